//! Whether a producer's wake rationing (`FutexWake`, `ringwire_core::futex::WakeGate`)
//! takes live readers for dead ones, and what it then costs them. No process dies here.
//!
//! `READERS` threads read a 4,096-slot ring of `u64`s with `FutexWait::new(0, 3 s)` (no
//! spins: each empty poll announces a sleep), the producer on its own thread. Each of
//! `BURSTS` bursts pushes back to back for `BURST_MS`, then pauses 200 ms, then publishes
//! one record and times how long every reader takes to get it (a reader woken by the publish
//! takes microseconds; one left asleep takes up to its 3 s timeout). Prints per burst
//! whether the producer rationed its wakes when the burst ended, and the slowest reader's
//! latency for the lone record.
//!
//! `cargo run --release -p ringwire-tests --example live_readers_rationing -- [READERS]
//! [BURSTS] [BURST_MS]`
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ringwire::{FutexWait, RingConsumer, RingProducer};

fn main() {
    let mut args = std::env::args().skip(1);
    let readers: usize = args.next().map_or(4, |a| a.parse().expect("READERS"));
    let bursts: usize = args.next().map_or(10, |a| a.parse().expect("BURSTS"));
    let burst_ms: u64 = args.next().map_or(300, |a| a.parse().expect("BURST_MS"));
    let path = format!("/dev/shm/ringwire-live-rationing-{}", std::process::id());
    let mut tx = RingProducer::<u64>::create(&path, 4096).expect("ring");
    let stop = Arc::new(AtomicBool::new(false));
    // Per reader: the newest value it got, and when (ns since `epoch`).
    let epoch = Instant::now();
    let seen: Arc<Vec<(AtomicU64, AtomicU64)>> = Arc::new(
        (0..readers)
            .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
            .collect(),
    );
    let handles: Vec<_> = (0..readers)
        .map(|r| {
            let (path, stop, seen) = (path.clone(), stop.clone(), seen.clone());
            std::thread::spawn(move || {
                let mut rx = RingConsumer::<u64>::attach(&path).expect("attach");
                let mut wait = FutexWait::new(0, Some(Duration::from_secs(3)));
                while !stop.load(Ordering::Relaxed) {
                    if let Some(v) = rx.recv_timeout(&mut wait, Duration::from_secs(4)) {
                        seen[r]
                            .1
                            .store(epoch.elapsed().as_nanos() as u64, Ordering::Relaxed);
                        seen[r].0.store(v, Ordering::Release);
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let mut v = 0u64;
    let mut rationed = 0;
    for b in 0..bursts {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(burst_ms) {
            for _ in 0..256 {
                v += 1;
                tx.push(&v);
            }
        }
        let suspected = tx.suspects_stale_sleeper();
        rationed += usize::from(suspected);
        std::thread::sleep(Duration::from_millis(200));
        v += 1;
        let at = epoch.elapsed().as_nanos() as u64;
        tx.push(&v);
        let end = Instant::now() + Duration::from_secs(5);
        while seen.iter().any(|s| s.0.load(Ordering::Acquire) < v) && Instant::now() < end {
            std::thread::sleep(Duration::from_micros(200));
        }
        let worst = seen
            .iter()
            .map(|s| s.1.load(Ordering::Relaxed).saturating_sub(at))
            .max()
            .unwrap_or(0);
        println!(
            "burst {b}: rationed at its end: {suspected}; lone record reached every reader in {:.3} ms",
            worst as f64 / 1e6
        );
    }
    stop.store(true, Ordering::Relaxed);
    // Wakes every reader, so that it sees `stop`.
    v += 1;
    tx.push(&v);
    for h in handles {
        h.join().expect("reader");
    }
    drop(tx);
    println!("{readers} readers, {bursts} bursts of {burst_ms} ms: rationed after {rationed}");
}
