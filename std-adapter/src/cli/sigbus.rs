//! What the `ringwire` binary says when a file it has mapped shrinks under it.
//!
//! A load or store in a page of a `MAP_SHARED` mapping that lies past the end of its file
//! raises SIGBUS. Another process that truncates a ring or queue file the CLI has mapped
//! (a creator recreating its ring in place, ringfire's legacy non-exclusive mode, or a
//! cleanup script's `: > file`) makes the CLI's next read of it fault; left to the default
//! action, the process died of signal 7 without a word. [`install`], called by the
//! binary's entry point (`cli::main`) and never by the library, installs a handler that
//! names the file and exits with status 1 instead.
//!
//! While the handler is installed, every mapping of a ring, queue, blackboard or checkpoint
//! file this crate makes is recorded in a table of [`SLOTS`] entries (its base, its length
//! and its path), and removed from it before it is unmapped: the mapping is held in a
//! [`Mapped`], whose record is dropped before the mapping. So the CLI's own files (`stat`,
//! `top`, `dump`, `heal`, `prune`, the ring `serve` reads, the ring `mirror` writes, the
//! demo's and the benches' rings) are covered wherever the library maps them, and a
//! library user's process, which never installs the handler, records nothing.
//!
//! The handler makes only async-signal-safe calls (`write`, `stat`, `statfs`, `unlink` and
//! `_exit`; `sigaction` and `raise` for a SIGBUS it cannot explain; `pause` in a thread that
//! faults second), reads the table with atomics only and allocates nothing. Whatever the
//! cause, it removes the scratch files registered for a forced exit (the demo's and the
//! benches' rings, `replica::signal`), as a second Ctrl-C does. A fault past the end of a
//! recorded mapping's file (`BUS_ADRERR` at an address inside it) prints `ringwire: PATH
//! shrank while it was mapped (…); stopping` and exits 1; when the file at PATH still has
//! the mapping's length and its file system has less than a huge page free, the fault was
//! no page to back the address (a full tmpfs has none for a never-written part of a sparse
//! file, such as one ringfire creates with `ftruncate`), and the line says that its file
//! system is full instead. Any other SIGBUS (an address in no recorded mapping, which
//! includes a mapping not recorded because the table was full; a memory error; a `kill
//! -BUS`) prints one line saying what it was and then takes the signal's default action,
//! so the process still dies of signal 7 with a core dump where those are kept: it is a
//! crash, and a shell, a supervisor or a test must go on seeing it as one, not as a
//! command's ordinary failure. (The handler replaces the one Rust's runtime installs at start for stack
//! overflows, which Linux reports as SIGSEGV, not SIGBUS; that one let a `kill -BUS` pass
//! and the process run on.) When several threads fault at once, the first reports and
//! ends the process, and the others wait for it without a word.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use ringwire_core::maptable;

/// Mappings the table holds at once. A command maps a few files at a time; a mapping made
/// while the table is full is not recorded, and a SIGBUS in it gets the line for an
/// unexplained one (and the default action).
const SLOTS: usize = 16;

/// A table of recorded mappings: the core's lock-free table (`ringwire_core::maptable`, a
/// sequence lock per slot, whose lookup reads atomics only), modelled with loom there.
pub(crate) type Table = maptable::Table<SLOTS>;

/// Records `len` bytes at `base` as a mapping of `path`; `None` when every slot is taken.
///
/// The path's bytes, followed by a NUL for the handler's `stat`, are a leaked allocation,
/// never freed, so that the handler can read any path it finds. A slot keeps its path when
/// freed and reuses it when the next mapping it records has the same path (`top` and
/// `serve` reopening a replaced ring), so a run leaks a path per slot and per path change,
/// not per mapping.
fn record(table: &'static Table, path: &Path, base: usize, len: usize) -> Option<Record> {
    let bytes = path.as_os_str().as_bytes();
    let held = table.record_with(base, len, |old| {
        if old.strip_suffix(b"\0") == Some(bytes) {
            old
        } else {
            Box::leak([bytes, b"\0"].concat().into_boxed_slice())
        }
    })?;
    Some(Record {
        table,
        held: Some(held),
    })
}

/// The mappings of this process (recorded only once [`install`] has run).
static TABLE: Table = Table::new();

/// Set by [`install`]: mappings are recorded from then on.
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Set by the first thread to take a SIGBUS: only it reports and ends the process.
static REPORTING: AtomicBool = AtomicBool::new(false);

/// A slot taken by one mapping, freed when dropped.
struct Record {
    table: &'static Table,
    /// `Some` until dropped.
    held: Option<maptable::Held>,
}

impl Drop for Record {
    fn drop(&mut self) {
        if let Some(held) = self.held.take() {
            self.table.remove(held);
        }
    }
}

/// A mapping (`M`: memmap2's raw or mutable mapping) with its record in the table. The
/// record is a field before the mapping, so it is dropped first: the slot is free before
/// the memory is unmapped, and an address reused by a later mapping is never named after
/// this file.
pub(crate) struct Mapped<M> {
    _record: Option<Record>,
    map: M,
}

impl<M> Mapped<M> {
    /// `map`, recorded as `len` bytes at `base` mapping `path` when the handler is
    /// installed (and a slot is free).
    pub(crate) fn record(path: &Path, map: M, base: *const u8, len: usize) -> Self {
        // Relaxed: `install` runs at the start of main, before any mapping is made.
        let record = if ENABLED.load(Ordering::Relaxed) && len != 0 {
            record(&TABLE, path, base.addr(), len)
        } else {
            None
        };
        Mapped {
            _record: record,
            map,
        }
    }

    /// `map` unrecorded (anonymous memory, which no other process can truncate).
    pub(crate) fn unrecorded(map: M) -> Self {
        Mapped { _record: None, map }
    }
}

impl<M> std::ops::Deref for Mapped<M> {
    type Target = M;
    fn deref(&self) -> &M {
        &self.map
    }
}

impl<M> std::ops::DerefMut for Mapped<M> {
    fn deref_mut(&mut self) -> &mut M {
        &mut self.map
    }
}

impl<M: std::fmt::Debug> std::fmt::Debug for Mapped<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.map.fmt(f)
    }
}

/// Installs the SIGBUS handler and starts recording mappings (see the module docs). For
/// the binary only: a library must not take a signal from the program that uses it.
pub(crate) fn install() {
    ENABLED.store(true, Ordering::Relaxed);
    // SAFETY: a zeroed sigaction is a valid value; the handler has the three-argument
    // signature SA_SIGINFO calls, and makes only async-signal-safe calls.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigbus
            as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
            as usize;
        // SA_ONSTACK: on the thread's alternate stack where std set one up, so that a fault
        // with little stack left is still reported.
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut());
    }
}

/// Writes all of `b` to stderr, as far as it goes (async-signal-safe: `write` only).
fn write_stderr(mut b: &[u8]) {
    while !b.is_empty() {
        // SAFETY: `b` is valid for `b.len()` bytes.
        let n = unsafe { libc::write(libc::STDERR_FILENO, b.as_ptr().cast(), b.len()) };
        if n > 0 {
            b = &b[n as usize..];
        } else if n == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
    }
}

/// `addr` as `0x` and lowercase hex digits, in `buf`.
fn hex(addr: usize, buf: &mut [u8; 2 + 2 * size_of::<usize>()]) -> &[u8] {
    let digits = (usize::BITS - addr.leading_zeros()).div_ceil(4).max(1) as usize;
    buf[0] = b'0';
    buf[1] = b'x';
    for i in 0..digits {
        let d = (addr >> (4 * (digits - 1 - i))) & 0xf;
        buf[2 + i] = b"0123456789abcdef"[d];
    }
    &buf[..2 + digits]
}

/// What one SIGBUS was.
#[derive(Debug, PartialEq, Eq)]
enum Cause {
    /// A page past the end of a recorded mapping's file (`BUS_ADRERR`): the file shrank,
    /// since it had the whole mapping's length when it was mapped.
    Shrank(&'static [u8]),
    /// `BUS_ADRERR` in a recorded mapping whose file at its path still has the mapping's
    /// length, on a file system with less than a huge page free: no page could back the
    /// address, as on a full tmpfs, which has none for a never-written (sparse) part of a
    /// file. (A file recreated in place, regrown between the fault and the check, is on a
    /// file system with room: it shrank.)
    NoRoom(&'static [u8]),
    /// Another fault in a recorded mapping (a memory error, `BUS_MCEERR_*`).
    InMapping(usize, &'static [u8]),
    /// A fault at an address no recorded mapping holds.
    Unmapped(usize),
    /// Sent by kill, tgkill or sigqueue (si_code 0 or below; si_addr then means nothing).
    Sent,
}

impl Cause {
    fn of(table: &Table, code: libc::c_int, addr: usize) -> Cause {
        if code <= 0 {
            return Cause::Sent;
        }
        let Some(m) = table.lookup(addr) else {
            return Cause::Unmapped(addr);
        };
        // Recorded with a NUL after it (see `record`).
        let path = m.path.strip_suffix(b"\0").unwrap_or(m.path);
        if code != libc::BUS_ADRERR {
            Cause::InMapping(addr, path)
        } else if still_whole(m.path, m.len) && nearly_full(m.path) {
            Cause::NoRoom(path)
        } else {
            Cause::Shrank(path)
        }
    }

    /// Writes the line that says what happened, piece by piece, to `w` (no allocation).
    fn report(&self, mut w: impl FnMut(&[u8])) {
        let mut buf = [0; 2 + 2 * size_of::<usize>()];
        // The path as every message shows it: its control characters escaped.
        let path_of = |path: &[u8], w: &mut dyn FnMut(&[u8])| {
            let _ = crate::shown::write_bytes(path, |s| {
                w(s.as_bytes());
                Ok::<(), ()>(())
            });
        };
        match *self {
            Cause::Shrank(path) => {
                w(b"ringwire: ");
                path_of(path, &mut w);
                w(
                    b" shrank while it was mapped (truncated or recreated in place by another \
                    process); stopping\n",
                );
            }
            Cause::NoRoom(path) => {
                w(b"ringwire: ");
                path_of(path, &mut w);
                w(
                    b": no page could back a part of it, though the file is still whole: its \
                    file system is full (a full tmpfs has no page for a part of a file never \
                    written); stopping\n",
                );
            }
            Cause::InMapping(addr, path) => {
                w(b"ringwire: SIGBUS at ");
                w(hex(addr, &mut buf));
                w(b" in ");
                path_of(path, &mut w);
                w(b", not past the end of the file\n");
            }
            Cause::Unmapped(addr) => {
                w(b"ringwire: SIGBUS at ");
                w(hex(addr, &mut buf));
                w(b": not in a mapped ring file\n");
            }
            Cause::Sent => w(b"ringwire: SIGBUS sent by another process\n"),
        }
    }
}

/// Whether the file at `c_path` (a path and its NUL) is at least `len` bytes long. Only
/// `stat`, which is async-signal-safe.
fn still_whole(c_path: &[u8], len: usize) -> bool {
    if c_path.last() != Some(&0) {
        return false;
    }
    // SAFETY: a zeroed `stat` is a valid value, and `c_path` is NUL-terminated.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::stat(c_path.as_ptr().cast(), &mut st) == 0
            && u64::try_from(st.st_size).is_ok_and(|n| n >= len as u64)
    }
}

/// Whether the file system of the file at `c_path` (a path and its NUL) has less than a
/// huge page (2 MiB) free, the most a tmpfs page fault asks for. `statfs` is a plain system
/// call in glibc and musl (unlike `statvfs`, which reads /proc/mounts), so the handler may
/// make it.
fn nearly_full(c_path: &[u8]) -> bool {
    if c_path.last() != Some(&0) {
        return false;
    }
    // SAFETY: a zeroed `statfs` is a valid value, and `c_path` is NUL-terminated.
    unsafe {
        let mut fs: libc::statfs = std::mem::zeroed();
        libc::statfs(c_path.as_ptr().cast(), &mut fs) == 0
            && (fs.f_bfree as u128) * (fs.f_bsize as u128) < 2 << 20
    }
}

extern "C" fn on_sigbus(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // Only async-signal-safe calls below: atomics, stat, statfs (see `nearly_full`),
    // write, unlink, _exit, pause, sigaction, raise.
    if REPORTING.swap(true, Ordering::Relaxed) {
        // Another thread faulted first and is ending the process: wait for it.
        loop {
            // SAFETY: pause only sleeps until a signal.
            unsafe { libc::pause() };
        }
    }
    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo_t; si_addr reads the fault
    // address of a SIGBUS.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr().addr()) };
    let cause = Cause::of(&TABLE, code, addr);
    cause.report(write_stderr);
    // The demo's and the benches' scratch rings, whose names carry our pid and would never
    // be used again, go as after a second Ctrl-C (`unlink` only).
    crate::replica::signal::remove_registered();
    if let Cause::Shrank(_) | Cause::NoRoom(_) = cause {
        // SAFETY: _exit ends the process at once, running nothing of ours.
        unsafe { libc::_exit(1) }
    }
    // SAFETY: a zeroed sigaction with SIG_DFL is a valid action. SIGBUS is blocked while
    // this handler runs, so the raised one waits for its return and then ends the process
    // by the default action (a fault would also recur at the faulting instruction).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut());
        libc::raise(libc::SIGBUS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> &'static Table {
        Box::leak(Box::new(Table::new()))
    }

    /// The path recorded for `addr`, without the NUL `record` puts after it.
    fn lookup(t: &Table, addr: usize) -> Option<&'static [u8]> {
        t.lookup(addr)
            .map(|m| m.path.strip_suffix(b"\0").expect("a NUL after the path"))
    }

    #[test]
    fn a_recorded_mapping_is_found_by_any_address_in_it_until_dropped() {
        let t = table();
        let r = record(t, Path::new("/dev/shm/a"), 0x1000, 0x2000).unwrap();
        let other = record(t, Path::new("/dev/shm/b"), 0x3000, 0x1000).unwrap();
        assert_eq!(lookup(t, 0x1000), Some(&b"/dev/shm/a"[..]));
        assert_eq!(lookup(t, 0x2fff), Some(&b"/dev/shm/a"[..]));
        assert_eq!(lookup(t, 0x3000), Some(&b"/dev/shm/b"[..]));
        assert_eq!(lookup(t, 0xfff), None);
        assert_eq!(lookup(t, 0x4000), None);
        drop(r);
        assert_eq!(lookup(t, 0x1000), None);
        assert_eq!(lookup(t, 0x3fff), Some(&b"/dev/shm/b"[..]));
        drop(other);
        assert_eq!(t.used(), 0);
    }

    #[test]
    fn a_full_table_records_nothing_more_and_its_faults_are_unexplained() {
        let t = table();
        let held: Vec<Record> = (0..SLOTS)
            .map(|i| record(t, Path::new("/r"), 0x10000 * (i + 1), 0x1000).unwrap())
            .collect();
        assert!(record(t, Path::new("/late"), 0x100_0000, 0x1000).is_none());
        assert_eq!(
            Cause::of(t, libc::BUS_ADRERR, 0x100_0000),
            Cause::Unmapped(0x100_0000)
        );
        drop(held);
        assert_eq!(t.used(), 0);
        let r = record(t, Path::new("/late"), 0x100_0000, 0x1000);
        assert!(r.is_some());
        assert_eq!(
            Cause::of(t, libc::BUS_ADRERR, 0x100_0800),
            Cause::Shrank(b"/late")
        );
    }

    #[test]
    fn a_slot_keeps_its_path_for_the_next_mapping_of_the_same_file() {
        let t = table();
        let first = record(t, Path::new("/dev/shm/x"), 0x1000, 0x1000).unwrap();
        let p = lookup(t, 0x1000).unwrap().as_ptr();
        drop(first);
        let again = record(t, Path::new("/dev/shm/x"), 0x5000, 0x1000).unwrap();
        assert_eq!(again.held.as_ref().unwrap().slot(), 0);
        assert_eq!(lookup(t, 0x5000).unwrap().as_ptr(), p, "leaked again");
        drop(again);
        let other = record(t, Path::new("/dev/shm/y"), 0x5000, 0x1000).unwrap();
        assert_eq!(lookup(t, 0x5000), Some(&b"/dev/shm/y"[..]));
        drop(other);
    }

    #[test]
    fn each_cause_has_its_line() {
        let t = table();
        let _r = record(t, Path::new("/dev/shm/q"), 0x7000, 0x1000).unwrap();
        let line = |c: Cause| {
            let mut v = Vec::new();
            c.report(|b| v.extend_from_slice(b));
            String::from_utf8(v).unwrap()
        };
        let shrank = Cause::of(t, libc::BUS_ADRERR, 0x7010);
        assert_eq!(shrank, Cause::Shrank(b"/dev/shm/q"));
        assert_eq!(
            line(shrank),
            "ringwire: /dev/shm/q shrank while it was mapped (truncated or recreated in place \
             by another process); stopping\n"
        );
        // BUS_MCEERR_AR: a memory error, not the file's end.
        let mce = Cause::of(t, 4, 0x7010);
        assert_eq!(mce, Cause::InMapping(0x7010, b"/dev/shm/q"));
        assert_eq!(
            line(mce),
            "ringwire: SIGBUS at 0x7010 in /dev/shm/q, not past the end of the file\n"
        );
        let stray = Cause::of(t, libc::BUS_ADRERR, 0xdead_beef);
        assert_eq!(
            line(stray),
            "ringwire: SIGBUS at 0xdeadbeef: not in a mapped ring file\n"
        );
        // SI_USER and SI_TKILL: the address is no address, even if it looks like one.
        for code in [0, -6] {
            assert_eq!(Cause::of(t, code, 0x7010), Cause::Sent);
        }
        assert_eq!(
            line(Cause::Sent),
            "ringwire: SIGBUS sent by another process\n"
        ); // The path as every message shows it: a newline or an ESC in it escaped.
        assert_eq!(
            line(Cause::InMapping(0x10, b"/dev/shm/a\nb\x1b[2J")),
            "ringwire: SIGBUS at 0x10 in \"/dev/shm/a\\nb\\x1b[2J\", not past the end of the file\n"
        );
    }

    /// A fault past no end of file, on a full file system (a full tmpfs, a never-written
    /// part of a sparse file): the file at the path is still whole, and the line says its
    /// file system is full. It said the file shrank, and sent its reader looking for a
    /// process that truncated it. The whole check end to end, on a full tmpfs, is the CLI
    /// test `a_fault_on_a_full_tmpfs_says_so_not_that_the_file_shrank` (it needs root).
    #[test]
    #[cfg_attr(miri, ignore = "Miri has no statfs (nor stat on every target)")]
    fn a_fault_in_a_whole_file_on_a_full_file_system_says_so() {
        let f = crate::test_tmp::TmpPath::new("sigbus-whole");
        std::fs::write(&f, [0u8; 0x1000]).unwrap();
        let t = table();
        let _r = record(t, &f, 0x9000, 0x1000).unwrap();
        let c_path = t.lookup(0x9000).unwrap().path;
        assert!(still_whole(c_path, 0x1000));
        assert!(!still_whole(c_path, 0x1001));
        // The temporary directory has room: a whole file there was regrown after the fault.
        assert!(!nearly_full(c_path));
        let path = leaked(f.as_os_str().as_bytes());
        assert_eq!(Cause::of(t, libc::BUS_ADRERR, 0x9008), Cause::Shrank(path));
        let mut v = Vec::new();
        Cause::NoRoom(path).report(|b| v.extend_from_slice(b));
        assert_eq!(
            String::from_utf8(v).unwrap(),
            format!(
                "ringwire: {}: no page could back a part of it, though the file is still \
                 whole: its file system is full (a full tmpfs has no page for a part of a \
                 file never written); stopping\n",
                f.display()
            )
        );
    }

    /// `bytes` as a `'static` slice, for comparing with a cause's path.
    fn leaked(bytes: &[u8]) -> &'static [u8] {
        Box::leak(bytes.to_vec().into_boxed_slice())
    }

    #[test]
    fn hex_prints_the_whole_address() {
        let mut buf = [0; 2 + 2 * size_of::<usize>()];
        assert_eq!(hex(0, &mut buf), b"0x0");
        assert_eq!(hex(0xf, &mut buf), b"0xf");
        assert_eq!(hex(0x10, &mut buf), b"0x10");
        let max = format!("{:#x}", usize::MAX);
        assert_eq!(hex(usize::MAX, &mut buf), max.as_bytes());
    }

    #[test]
    fn without_the_handler_nothing_is_recorded() {
        // No test installs the handler: a library's mappings stay out of the table.
        assert!(!ENABLED.load(Ordering::Relaxed));
        let m = Mapped::record(
            Path::new("/dev/shm/lib"),
            (),
            std::ptr::without_provenance(0x1000),
            0x1000,
        );
        assert!(m._record.is_none());
        assert_eq!(TABLE.used(), 0);
    }

    /// Threads recording and freeing mappings while another looks addresses up: a lookup
    /// finds a mapping's own path or nothing, never another's (the sequence lock keeps a
    /// slot's base, length and path together).
    #[test]
    fn lookups_during_records_and_drops_never_mix_two_mappings() {
        const THREADS: usize = 4;
        let rounds = if cfg!(miri) { 20 } else { 2000 };
        let t = table();
        let paths: Vec<String> = (0..THREADS).map(|i| format!("/dev/shm/m{i}")).collect();
        let base = |i: usize| 0x10_0000 * (i + 1);
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let looker = s.spawn(|| {
                let mut found = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for (i, p) in paths.iter().enumerate() {
                        if let Some(got) = lookup(t, base(i) + 8) {
                            assert_eq!(got, p.as_bytes());
                            found += 1;
                        }
                    }
                    if cfg!(miri) {
                        std::thread::yield_now();
                    }
                }
                found
            });
            let workers: Vec<_> = (0..THREADS)
                .map(|i| {
                    let (p, t) = (&paths[i], t);
                    s.spawn(move || {
                        for _ in 0..rounds {
                            let r = record(t, Path::new(p), base(i), 0x1000).unwrap();
                            assert_eq!(lookup(t, base(i) + 0xfff), Some(p.as_bytes()));
                            drop(r);
                        }
                    })
                })
                .collect();
            // Every worker is joined and the looker stopped before any failure is raised: a
            // worker's panic raised first would leave the scope waiting for a looker that
            // never stops.
            let ended: Vec<_> = workers.into_iter().map(|w| w.join()).collect();
            stop.store(true, Ordering::Relaxed);
            looker.join().unwrap();
            for e in ended {
                e.unwrap();
            }
        });
        assert_eq!(t.used(), 0);
    }
}
