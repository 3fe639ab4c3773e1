//! The physical floor of this machine: a bare cache-line ping-pong between two threads on two
//! cores. Every hand-off benchmark is reported against it (BENCHMARKS.md).
//!
//! `cargo bench -p ringwire-tests --bench floor`

use std::hint::spin_loop;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};

#[repr(align(128))]
struct Line(AtomicU64);

/// Pins the calling thread to `cpu` when the machine has it; unpinned otherwise.
fn pin(cpu: usize) {
    // SAFETY: cpu_set_t is plain data; sched_setaffinity only reads the set we pass.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Round trips of one value through two cache lines: main writes `ping`, the echo thread
/// answers on `pong`. Returns the time for `iters` round trips.
fn ping_pong(iters: u64) -> Duration {
    let ping = Arc::new(Line(AtomicU64::new(0)));
    let pong = Arc::new(Line(AtomicU64::new(0)));
    let stop = Arc::new(AtomicBool::new(false));
    let echo = {
        let (ping, pong, stop) = (ping.clone(), pong.clone(), stop.clone());
        std::thread::spawn(move || {
            pin(1);
            let mut last = 0;
            while !stop.load(Ordering::Relaxed) {
                let v = ping.0.load(Ordering::Acquire);
                if v != last {
                    last = v;
                    pong.0.store(v, Ordering::Release);
                } else {
                    spin_loop();
                }
            }
        })
    };
    pin(0);
    // Warm up the line so the first round trip does not include thread start-up.
    ping.0.store(u64::MAX, Ordering::Release);
    while pong.0.load(Ordering::Acquire) != u64::MAX {
        spin_loop();
    }
    let t0 = Instant::now();
    for i in 1..=iters {
        ping.0.store(i, Ordering::Release);
        while pong.0.load(Ordering::Acquire) != i {
            spin_loop();
        }
    }
    let dt = t0.elapsed();
    stop.store(true, Ordering::Relaxed);
    let _ = echo.join();
    dt
}

fn floor(c: &mut Criterion) {
    c.bench_function("floor/cacheline_round_trip", |b| b.iter_custom(ping_pong));
}

criterion_group!(benches, floor);
criterion_main!(benches);
