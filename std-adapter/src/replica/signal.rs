//! SIGINT and SIGTERM set a process-wide flag instead of killing the process, so a driver
//! can finish its step, publish what it wrote and leave its ring valid. The handler then
//! gives the signal back its default action: if the orderly stop hangs, a second Ctrl-C (or
//! SIGTERM) ends the process at once.

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    // Relaxed: only the flag itself is communicated; an atomic store is async-signal-safe.
    STOP.store(true, Ordering::Relaxed);
}

/// Installs the handler for SIGINT and SIGTERM (idempotent until a signal came) and returns
/// the flag it sets. Each signal's first delivery sets the flag; the next one has the
/// default action (the process ends).
pub fn install() -> &'static AtomicBool {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is a valid value; we set a handler that only performs an
        // atomic store (async-signal-safe) and pass valid pointers to sigaction.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            // SA_RESETHAND: the kernel restores the default action as it runs the handler.
            sa.sa_flags = libc::SA_RESTART | libc::SA_RESETHAND;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    &STOP
}

/// The flag the handler sets (false until a signal arrived).
pub fn flag() -> &'static AtomicBool {
    &STOP
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigterm_sets_the_flag_instead_of_killing() {
        let f = install();
        // SAFETY: raise only delivers a signal to this thread; the handler is installed.
        let r = unsafe { libc::raise(libc::SIGTERM) };
        assert_eq!(r, 0);
        assert!(f.load(Ordering::Relaxed));
        assert!(flag().load(Ordering::Relaxed));
        // The next SIGTERM would end the process: its action is the default again. (SIGINT,
        // not delivered, is still handled.)
        assert_eq!(action(libc::SIGTERM), libc::SIG_DFL);
        assert_eq!(
            action(libc::SIGINT),
            on_signal as extern "C" fn(libc::c_int) as usize
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
