//! Shared helpers for ringwire's cross-crate tests.
#![deny(missing_docs)]

pub mod bench_items;
pub mod cli_child;
pub mod netns;
pub mod push_drain;
pub mod records;
pub mod replica;
pub mod shm;
pub mod sim;
pub mod tagged;

use std::time::{Duration, Instant};

/// Serialises the tests of one test binary that call it, for as long as each holds the
/// guard. Tests that spawn child processes must not overlap tests that prove a queue file
/// has no other open handle: a child forked by one test holds a copy of every descriptor
/// of the process until its exec closes them, and so keeps another test's just-dropped
/// handle, and that handle's file lock, alive for the moment.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Polls `f` every 5 ms until it holds; panics naming `what` once `within` has passed.
pub fn wait_until(what: &str, within: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(
            t0.elapsed() < within,
            "timed out after {within:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The six arguments of the system call that thread `tid` of this process is blocked in
/// (`/proc/self/task/<tid>/syscall`), when it is blocked in system call `nr`; `None` while
/// it runs or is in another call.
pub fn blocked_in(tid: i32, nr: i64) -> Option<[u64; 6]> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).ok()?;
    let mut f = s.split_whitespace();
    if f.next()?.parse::<i64>().ok()? != nr {
        return None;
    }
    let mut args = [0u64; 6];
    for a in &mut args {
        *a = u64::from_str_radix(f.next()?.trim_start_matches("0x"), 16).ok()?;
    }
    Some(args)
}

/// Waits for `child` to exit, polling every 10 ms; past `within` it kills and reaps the
/// child and panics naming `what`.
pub fn wait_exit(child: &mut std::process::Child, within: Duration, what: &str) {
    let t0 = Instant::now();
    while child.try_wait().expect("try_wait").is_none() {
        if t0.elapsed() > within {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} still running after {within:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
