//! SIGINT, SIGTERM and SIGHUP set a process-wide flag instead of killing the process, so a
//! driver can finish its step, publish what it wrote and leave its ring valid. SIGHUP is
//! what a closed terminal sends: left to its default action it killed the demo and the
//! benches with their scratch rings still in /dev/shm. A SIGHUP the process started with
//! ignored (`nohup`) stays ignored. If the orderly stop
//! hangs, a second Ctrl-C (or SIGTERM) ends the process at once: the handler removes the
//! files registered with [`remove_on_exit`] (the demo's and the benches' scratch rings,
//! whose names carry the pid and so would never be reused) and the signal's default action
//! ends the process.
//!
//! A second signal that comes within [`REPEAT`] of the first is the same request delivered
//! twice, not a second Ctrl-C: `timeout`, and supervisors that signal a process and then
//! its process group, send it to the process twice at once. It is ignored, so the orderly
//! stop still runs.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::time::Duration;

static STOP: AtomicBool = AtomicBool::new(false);

/// When the first signal came (CLOCK_MONOTONIC ns, at least 1), 0 before.
static FIRST_AT: AtomicU64 = AtomicU64::new(0);

/// A signal this soon after the first is a duplicate delivery of it (see the module docs).
pub const REPEAT: Duration = Duration::from_millis(200);

/// Files the handler removes before a forced exit: NUL-terminated paths, null when free.
/// A registered path is never freed (a few bytes per scratch file of a command-line run),
/// so the handler can read any pointer it loads.
static FILES: [AtomicPtr<libc::c_char>; 8] = [const { AtomicPtr::new(std::ptr::null_mut()) }; 8];

/// CLOCK_MONOTONIC in ns (async-signal-safe: one `clock_gettime`), at least 1.
fn now_ns() -> u64 {
    crate::sys::clock_ns(libc::CLOCK_MONOTONIC).max(1)
}

/// Removes the files registered with [`remove_on_exit`], for a handler about to end the
/// process (this one's second signal, the CLI's SIGBUS handler). Async-signal-safe: atomic
/// loads and `unlink` only.
pub(crate) fn remove_registered() {
    for f in &FILES {
        // Acquire: pairs with the registration's release store, so the path's bytes are
        // seen.
        let p = f.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: a registered path is a NUL-terminated string that is never freed.
            unsafe { libc::unlink(p) };
        }
    }
}

extern "C" fn on_signal(sig: libc::c_int) {
    // Only async-signal-safe calls below: atomics, clock_gettime, unlink, sigaction, raise.
    let now = now_ns();
    // Relaxed: the flag and the time are each communicated alone.
    match FIRST_AT.compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => {
            STOP.store(true, Ordering::Relaxed);
            return;
        }
        Err(first) if now.saturating_sub(first) < REPEAT.as_nanos() as u64 => return,
        Err(_) => {}
    }
    remove_registered();
    // SAFETY: a zeroed sigaction with SIG_DFL is a valid action; raise re-delivers the signal
    // to this thread, which now ends the process with the signal's status.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut());
        libc::raise(sig);
    }
}

/// Installs the handler for SIGINT, SIGTERM and SIGHUP (idempotent; SIGHUP only if it is
/// not ignored) and returns the flag it sets. The first signal sets the flag; a second one,
/// [`REPEAT`] or more later, removes the files registered with [`remove_on_exit`] and ends
/// the process.
pub fn install() -> &'static AtomicBool {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        if sig == libc::SIGHUP && ignored(sig) {
            continue;
        }
        // SAFETY: a zeroed sigaction is a valid value; the handler makes only
        // async-signal-safe calls, and the pointers passed to sigaction are valid.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    &STOP
}

/// Whether `sig`'s action is to ignore it (as `nohup` leaves SIGHUP for its command).
fn ignored(sig: libc::c_int) -> bool {
    // SAFETY: a zeroed sigaction is a valid value for the kernel to overwrite; a null new
    // action only queries.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

/// The flag the handler sets (false until a signal arrived).
pub fn flag() -> &'static AtomicBool {
    &STOP
}

/// Removes its file when dropped, and, while it lives, when a second signal ends the
/// process (see the module docs; at most 8 files at once are covered that way, the rest
/// only by the drop).
#[derive(Debug)]
pub struct RemoveOnExit {
    path: PathBuf,
    slot: Option<usize>,
}

/// Registers `path` to be removed when the returned guard drops, or on a forced exit.
pub fn remove_on_exit(path: impl Into<PathBuf>) -> RemoveOnExit {
    let path = path.into();
    let slot = CString::new(path.as_os_str().as_bytes())
        .ok()
        .and_then(|c| {
            let p = c.into_raw();
            // Release: the handler's acquire load sees the bytes written before.
            let slot = FILES.iter().position(|f| {
                f.compare_exchange(
                    std::ptr::null_mut(),
                    p,
                    Ordering::Release,
                    Ordering::Relaxed,
                )
                .is_ok()
            });
            if slot.is_none() {
                // SAFETY: `p` came from into_raw just above and was not published.
                drop(unsafe { CString::from_raw(p) });
            }
            slot
        });
    RemoveOnExit { path, slot }
}

impl RemoveOnExit {
    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RemoveOnExit {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            // Relaxed: the slot is only freed; its string stays allocated (see `FILES`).
            FILES[i].store(std::ptr::null_mut(), Ordering::Relaxed);
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_fork::forked;
    use crate::test_tmp::TmpPath;

    /// A forked child (the handler and its state are process-wide): the first signal sets
    /// the flag and leaves the handler installed; a duplicate delivery right after it is
    /// ignored; a second signal past [`REPEAT`] removes the registered file and ends the
    /// process by that signal. Before, the handler reset itself on the first signal, so the
    /// duplicate killed the process and left the file.
    #[test]
    fn a_second_signal_removes_the_registered_files_and_a_duplicate_is_ignored() {
        let path = TmpPath::shm("signal");
        std::fs::write(&path, b"x").unwrap();
        let status = forked(20, || {
            let f = install();
            let _keep = remove_on_exit(&path);
            // SAFETY: raise only delivers a signal to this thread; the handler is installed.
            unsafe {
                libc::raise(libc::SIGINT);
                libc::raise(libc::SIGINT);
            }
            if !f.load(Ordering::Relaxed) || !path.exists() {
                return 3;
            }
            if action(libc::SIGINT) != on_signal as extern "C" fn(libc::c_int) as usize {
                return 4;
            }
            std::thread::sleep(REPEAT + Duration::from_millis(50));
            // SAFETY: as above; this one ends the process.
            unsafe { libc::raise(libc::SIGTERM) };
            5
        });
        let removed = !path.exists();
        assert!(
            libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGTERM,
            "the child {}",
            if libc::WIFEXITED(status) {
                format!("exited with {}", libc::WEXITSTATUS(status))
            } else {
                format!("was killed by signal {}", libc::WTERMSIG(status))
            }
        );
        assert!(removed, "the registered file is still there");
    }

    /// The guard removes its file when dropped and frees its slot.
    #[test]
    fn the_guard_removes_its_file_when_dropped() {
        let path = TmpPath::shm("signal-drop");
        std::fs::write(&path, b"x").unwrap();
        let g = remove_on_exit(&path);
        let slot = g.slot.expect("a free slot");
        assert!(!FILES[slot].load(Ordering::Relaxed).is_null());
        drop(g);
        assert!(!path.exists());
        assert!(FILES[slot].load(Ordering::Relaxed).is_null());
    }

    /// A SIGHUP the process was started with ignored (`nohup ringwire serve`) stays
    /// ignored; otherwise `install` catches it like SIGINT.
    #[test]
    fn sighup_is_caught_unless_ignored() {
        let status = forked(20, || {
            // SAFETY: setting a signal's disposition to SIG_IGN is always valid.
            unsafe { libc::signal(libc::SIGHUP, libc::SIG_IGN) };
            install();
            if action(libc::SIGHUP) != libc::SIG_IGN {
                return 3;
            }
            // SAFETY: as above, back to the default action.
            unsafe { libc::signal(libc::SIGHUP, libc::SIG_DFL) };
            install();
            if action(libc::SIGHUP) != on_signal as extern "C" fn(libc::c_int) as usize {
                return 4;
            }
            0
        });
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "status {status:#x}"
        );
    }

    fn action(sig: libc::c_int) -> libc::sighandler_t {
        // SAFETY: a zeroed sigaction is a valid value for the kernel to overwrite; a null new
        // action only queries.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            assert_eq!(libc::sigaction(sig, std::ptr::null(), &mut old), 0);
            old.sa_sigaction
        }
    }
}
