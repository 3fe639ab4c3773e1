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

/// The audit architecture seccomp reports for this build's system calls.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

/// Makes every `FUTEX_WAIT` and `FUTEX_WAIT_BITSET` of this process (private or shared)
/// fail with `EPERM` from now on, as a container's seccomp profile may; other futex
/// operations (`FUTEX_WAKE`) and every other system call still run. For a forked child
/// only: the filter cannot be removed, and it is inherited by the child's own children.
/// Returns the `prctl` error if the kernel refused the filter.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) fn deny_futex_wait() -> std::io::Result<()> {
    use libc::{
        BPF_ABS, BPF_ALU, BPF_AND, BPF_JEQ, BPF_JMP, BPF_K, BPF_LD, BPF_RET, BPF_W,
        SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO, sock_filter, sock_fprog,
    };
    let stmt = |code: u32, k: u32| sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let jump = |k: u32, jt: u8, jf: u8| sock_filter {
        code: (BPF_JMP | BPF_JEQ | BPF_K) as u16,
        jt,
        jf,
        k,
    };
    // Offsets in `struct seccomp_data`: nr at 0, arch at 4, args[1] (the futex op; its
    // low half on a little-endian machine) at 24.
    let load = |offset: u32| stmt(BPF_LD | BPF_W | BPF_ABS, offset);
    // FUTEX_CMD_MASK: the op without FUTEX_PRIVATE_FLAG (128) and FUTEX_CLOCK_REALTIME (256).
    const CMD_MASK: u32 = 0x7f;
    let program = [
        load(4),
        jump(AUDIT_ARCH, 1, 0),
        stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        load(0),
        // Not futex: to the ALLOW at 9.
        jump(libc::SYS_futex as u32, 0, 4),
        load(24),
        stmt(BPF_ALU | BPF_AND | BPF_K, CMD_MASK),
        // FUTEX_WAIT and FUTEX_WAIT_BITSET: to the ERRNO at 10.
        jump(libc::FUTEX_WAIT as u32, 2, 0),
        jump(libc::FUTEX_WAIT_BITSET as u32, 1, 0),
        stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        stmt(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | libc::EPERM as u32),
    ];
    let prog = sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr() as *mut sock_filter,
    };
    // SAFETY: prctl with integer arguments touches no memory of ours.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `prog` points at `program`, which outlives the call; the kernel copies the
    // filter before returning.
    let r = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &prog as *const sock_fprog,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
