//! What another thread of this test process is doing, read from `/proc` (the tests crate's
//! `blocked_in`, for std-adapter's unit tests, which cannot use that crate): tests wait for
//! a thread to be seen asleep instead of sleeping a fixed time and hoping it is.

use std::time::{Duration, Instant};

/// The six arguments of the system call that thread `tid` of this process is blocked in
/// (`/proc/self/task/<tid>/syscall`), when it is blocked in system call `nr`; `None` while
/// it runs or is in another call.
pub(crate) fn blocked_in(tid: i32, nr: i64) -> Option<[u64; 6]> {
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

/// The times thread `tid` of this process has blocked (`voluntary_ctxt_switches`): one more
/// for each wait it was switched out for.
fn times_blocked(tid: i32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))?
        .trim()
        .parse()
        .ok()
}

/// Which wait of thread `tid` it is blocked in, when that is a `FUTEX_WAIT` on `word`: its
/// count of times blocked, the same before and after the look (so one wait all along).
fn futex_wait_on(tid: i32, word: *const u32) -> Option<u64> {
    let before = times_blocked(tid)?;
    let [w, op, ..] = blocked_in(tid, libc::SYS_futex)?;
    let one_wait = w == word as u64 && op == libc::FUTEX_WAIT as u64;
    (one_wait && times_blocked(tid) == Some(before)).then_some(before)
}

/// Returns once thread `tid` has been seen blocked in `waits` different `FUTEX_WAIT`s on
/// `word` (so at least `waits - 1` of its waits there have ended); panics after 30 s.
pub(crate) fn await_futex_waits(tid: i32, word: *const u32, waits: usize) {
    let t0 = Instant::now();
    let mut seen = Vec::new();
    while seen.len() < waits {
        if let Some(n) = futex_wait_on(tid, word).filter(|n| !seen.contains(n)) {
            seen.push(n);
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "thread {tid} seen in {} of {waits} FUTEX_WAITs on {word:?} in 30 s",
            seen.len()
        );
        std::thread::yield_now();
    }
}
