//! Test helper: run code in a forked child process.

use std::time::Duration;

/// Runs `child` in a forked child process that `alarm` ends after `secs` seconds, and
/// returns the child's wait status. The child leaves through `_exit` with what `child`
/// returned (101 if it panicked), never returning into the test harness.
pub(crate) fn forked(secs: u32, child: impl FnOnce() -> i32) -> libc::c_int {
    forked_with(secs, child, |_| {})
}

/// [`forked`], running `parent` with the child's pid (to signal it) before waiting for it.
pub(crate) fn forked_with(
    secs: u32,
    child: impl FnOnce() -> i32,
    parent: impl FnOnce(libc::pid_t),
) -> libc::c_int {
    // The process-wide one-time set-ups the child's ring code runs, finished here first:
    // another test thread inside one of them at the fork would leave the child's copy
    // "running" forever with no thread to finish it (a deadlock a reviewer hit at 8
    // test threads). `call_once` returns only once the set-up is complete.
    crate::sys::membarrier_register();
    let _ = crate::sys::membarrier_registered();
    let _ = crate::sys::fork_generation();
    // The replication drivers' clock starts at its first reading.
    let _ = crate::replica::io::now();
    // SAFETY: the child runs only `child` (no harness code) and leaves through `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        // SAFETY: alarm takes an integer and touches no memory of ours.
        unsafe { libc::alarm(secs) };
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child)).unwrap_or(101);
        // SAFETY: ends this child at once, without running destructors or atexit
        // handlers inherited from the parent.
        unsafe { libc::_exit(code) }
    }
    parent(pid);
    let end = std::time::Instant::now() + Duration::from_secs(u64::from(secs) + 20);
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: `status` is a valid place for the kernel to store the status.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            return status;
        }
        assert_eq!(r, 0, "waitpid: {}", std::io::Error::last_os_error());
        if std::time::Instant::now() >= end {
            // SAFETY: kill and waitpid on our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            panic!("the forked child outlived its alarm");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub(crate) fn assert_exited_0(status: libc::c_int, what: &str) {
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{what}: the child {}",
        if libc::WIFEXITED(status) {
            format!("exited with {}", libc::WEXITSTATUS(status))
        } else {
            format!("was killed by signal {}", libc::WTERMSIG(status))
        }
    );
}
