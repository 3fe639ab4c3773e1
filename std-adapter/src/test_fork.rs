//! Test helper: run code in a forked child process.

use std::sync::{RwLock, RwLockWriteGuard};
use std::time::Duration;

/// Held shared by every [`forked_with`] from the fork until the child is reaped, and
/// exclusively by [`no_forks`]: a forked child holds a copy of every descriptor the test
/// process had at the fork, and so every open file description lock of other tests'
/// handles (an SPSC role, say) until it exits.
static FORKS: RwLock<()> = RwLock::new(());

/// Keeps [`forked`] children out of this process while the guard lives (waiting for those
/// alive to be reaped): for a test whose open file description locks another test's child
/// would hold. A child forked while the test dropped a role's descriptor keeps the role
/// locked until it exits, and `lock_role` refuses a role held past its grace.
pub(crate) fn no_forks() -> RwLockWriteGuard<'static, ()> {
    // A test that panicked holding the lock poisons it; the lock itself is still sound.
    FORKS.write().unwrap_or_else(|e| e.into_inner())
}

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
    let _forking = FORKS.read().unwrap_or_else(|e| e.into_inner());
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

/// A classic BPF instruction for a seccomp filter.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn stmt(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

/// `if A == k` go `jt` instructions on, else `jf`.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn jump(k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    }
}

/// Loads the 32-bit word at `offset` of `struct seccomp_data` (nr at 0, arch at 4, the
/// arguments from 16, 8 bytes each, low half first on a little-endian machine).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn load(offset: u32) -> libc::sock_filter {
    stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, offset)
}

/// Installs `checks`, which see the system call number loaded and end in a return, after
/// the test of the architecture (a call of another one is allowed). For a forked child
/// only: a filter cannot be removed, and the child's own children inherit it.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn install_filter(checks: &[libc::sock_filter]) -> std::io::Result<()> {
    let mut program = vec![
        load(4),
        jump(AUDIT_ARCH, 1, 0),
        stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW),
        load(0),
    ];
    program.extend_from_slice(checks);
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_mut_ptr(),
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
            &prog as *const libc::sock_fprog,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The seccomp return that fails a call with `EPERM`.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const EPERM: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;

/// Makes every `FUTEX_WAIT` and `FUTEX_WAIT_BITSET` of this process (private or shared)
/// fail with `EPERM` from now on, as a container's seccomp profile may; other futex
/// operations (`FUTEX_WAKE`) and every other system call still run. Forked children only
/// ([`install_filter`]); returns the `prctl` error if the kernel refused the filter.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) fn deny_futex_wait() -> std::io::Result<()> {
    // FUTEX_CMD_MASK: the op without FUTEX_PRIVATE_FLAG (128) and FUTEX_CLOCK_REALTIME (256).
    const CMD_MASK: u32 = 0x7f;
    let allow = stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW);
    install_filter(&[
        // Not futex: to the ALLOW below.
        jump(libc::SYS_futex as u32, 0, 4),
        // The op, args[1].
        load(24),
        stmt(libc::BPF_ALU | libc::BPF_AND | libc::BPF_K, CMD_MASK),
        jump(libc::FUTEX_WAIT as u32, 2, 0),
        jump(libc::FUTEX_WAIT_BITSET as u32, 1, 0),
        allow,
        stmt(libc::BPF_RET | libc::BPF_K, EPERM),
    ])
}

/// Makes every `sendto` with a destination address (a UDP `send_to`) fail with `EPERM`
/// from now on, as a firewall dropping the datagram on its way out does; `sendto` without
/// one (`send` on a connected socket) and every other system call still run. Forked
/// children only ([`install_filter`]).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) fn deny_sendto_an_address() -> std::io::Result<()> {
    let allow = stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW);
    install_filter(&[
        // Not sendto: to the ALLOW below.
        jump(libc::SYS_sendto as u32, 0, 4),
        // args[4], the address: denied unless both halves are 0.
        load(48),
        jump(0, 0, 3),
        load(52),
        jump(0, 0, 1),
        allow,
        stmt(libc::BPF_RET | libc::BPF_K, EPERM),
    ])
}

/// Makes every `flock` of this process fail with `errno` from now on, as on a file system
/// without locks (NFS without its lock daemon fails them with `ENOLCK`); every other system
/// call still runs. Forked children only ([`install_filter`]).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) fn fail_flock(errno: i32) -> std::io::Result<()> {
    fail_call(libc::SYS_flock, errno)
}

/// Makes every call of system call `nr` of this process fail with `errno` from now on;
/// every other system call still runs. Forked children only ([`install_filter`]).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) fn fail_call(nr: libc::c_long, errno: i32) -> std::io::Result<()> {
    install_filter(&[
        // Not `nr`: to the ALLOW below.
        jump(nr as u32, 0, 1),
        stmt(
            libc::BPF_RET | libc::BPF_K,
            libc::SECCOMP_RET_ERRNO | errno as u32,
        ),
        stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW),
    ])
}

/// Makes every `mmap` of this process that shares its pages (`MAP_SHARED`, and so
/// `MAP_SHARED_VALIDATE`) fail with `errno` from now on, as a process at its limit of
/// mappings sees (`ENOMEM`); private mappings (the allocator's) and every other system call
/// still run. Forked children only ([`install_filter`]).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) fn fail_shared_mmap(errno: i32) -> std::io::Result<()> {
    install_filter(&[
        // Not mmap: to the ALLOW below.
        jump(libc::SYS_mmap as u32, 0, 3),
        // args[3], the flags (their low half).
        load(40),
        stmt(
            libc::BPF_ALU | libc::BPF_AND | libc::BPF_K,
            libc::MAP_SHARED as u32,
        ),
        jump(libc::MAP_SHARED as u32, 1, 0),
        stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW),
        stmt(
            libc::BPF_RET | libc::BPF_K,
            libc::SECCOMP_RET_ERRNO | errno as u32,
        ),
    ])
}
