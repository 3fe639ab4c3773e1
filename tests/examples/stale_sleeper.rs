//! What a sleeper that died asleep costs a producer (`FutexWake`'s docs,
//! `ringwire_core::futex::WakeGate`).
//!
//! A 4,096-slot ring of 8-byte records in the temp directory; its `waiting_consumers`
//! is set by hand to 0 (nobody asleep) or 1 (the count a reader killed asleep leaves,
//! spec §11). Each round times `ITEMS` pushes of the core's producer three ways, in an
//! order that rotates each round:
//!
//! * `nobody`: count 0, the default waker: no wake at all.
//! * `stale_strict`: count 1, `FutexWake::strict()`: a `FUTEX_WAKE` per publish, what every
//!   producer did before (and ringfire's still does).
//! * `stale_rationed`: count 1, the default waker (`FutexWake::new`), once it rations its
//!   wakes. Before the timing it pushes until it does (bounded: 10 s), and the round
//!   reports how long that took (`to_rationing`: the wakes must have woken nobody for
//!   `STALE_SLEEPER_AFTER`, 100 ms).
//!
//! Prints each way's time per push over the rounds (median, min – max) and the ratio
//! `stale_strict ÷ stale_rationed` within each round.
//!
//! Then the same for an MPMC queue file of 4,096 `u64`s, whose `data_waiters` a consumer
//! killed asleep leaves at 1 while other handles keep the file open: `ITEMS` push-pop pairs
//! with the count at 0 (`queue_nobody`), then, on a handle opened afresh, with the count at
//! 1: 20,000 pairs (`queue_stale_first`, a wake per push: they take under the 100 ms after
//! which the handle rations), then pairs until 1 s has gone by (so the handle rations), then
//! `ITEMS` pairs (`queue_stale_rationed`).
//!
//! `cargo run --release -p ringwire-tests --example stale_sleeper -- [ITEMS] [ROUNDS]`
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ringwire::{CreateOptions, FutexWake, RingFile};
use ringwire_core::Geometry;
use ringwire_core::broadcast::Producer;

const WAYS: [&str; 3] = ["nobody", "stale_strict", "stale_rationed"];

fn main() {
    let mut args = std::env::args().skip(1);
    let items: u64 = args.next().map_or(1_000_000, |a| a.parse().expect("ITEMS"));
    let rounds: usize = args.next().map_or(6, |a| a.parse().expect("ROUNDS"));
    let path = std::env::temp_dir().join(format!("ringwire-stale-sleeper-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let geo = Geometry::spmc(4096, 16, 8, 0, false).expect("geometry");
    let file = RingFile::create(&path, &geo, &CreateOptions::default()).expect("ring");
    // SAFETY: the file outlives every view copy below; nothing else maps it.
    let view = *unsafe { file.view() };
    let mut ns = vec![Vec::new(); WAYS.len()];
    let mut ratios = Vec::new();
    let mut to_rationing = Vec::new();
    for round in 0..rounds {
        let mut this = [0.0f64; 3];
        for k in 0..WAYS.len() {
            let way = (k + round) % WAYS.len();
            let waker = if way == 1 {
                FutexWake::strict()
            } else {
                FutexWake::new()
            };
            view.waiting_consumers()
                .store(u32::from(way != 0), Ordering::Relaxed);
            let mut p = Producer::new(view, waker).expect("producer");
            if way == 2 {
                let t0 = Instant::now();
                let mut i = 0u64;
                while !p.waker().suspects_stale_sleeper() {
                    assert!(
                        t0.elapsed() < Duration::from_secs(10),
                        "no rationing in 10 s"
                    );
                    p.push(&i.to_le_bytes()).unwrap();
                    i += 1;
                }
                to_rationing.push(t0.elapsed().as_secs_f64() * 1e3);
            }
            let t0 = Instant::now();
            for i in 0..items {
                p.push(&i.to_le_bytes()).unwrap();
            }
            this[way] = t0.elapsed().as_nanos() as f64 / items as f64;
            ns[way].push(this[way]);
        }
        ratios.push(this[1] / this[2]);
    }
    view.waiting_consumers().store(0, Ordering::Relaxed);
    drop(file);
    let _ = std::fs::remove_file(&path);
    println!("{items} pushes per way and round, {rounds} rounds");
    for (way, v) in WAYS.iter().zip(&mut ns) {
        let (med, lo, hi) = summary(v);
        println!("{way:>21}: {med:8.1} ns per push (min {lo:.1}, max {hi:.1})");
    }
    let (med, lo, hi) = summary(&mut ratios);
    println!("stale_strict ÷ stale_rationed, same round: {med:.1} (min {lo:.1}, max {hi:.1})");
    let (med, lo, hi) = summary(&mut to_rationing);
    println!("to_rationing: {med:.1} ms (min {lo:.1}, max {hi:.1})");
    queue(items, rounds);
}

/// The MPMC part (module docs): time per push-pop pair.
fn queue(items: u64, rounds: usize) {
    use std::os::unix::fs::FileExt;
    let path = std::env::temp_dir().join(format!("ringwire-stale-queue-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let q = ringwire::queue::MpmcQueue::<u64>::create(&path, 4096).expect("queue");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open");
    let set_waiters = |n: u32| {
        f.write_all_at(
            &n.to_le_bytes(),
            ringwire_core::queue::qhdr::DATA_WAITERS as u64,
        )
        .expect("pwrite")
    };
    let pair = |q: &ringwire::queue::MpmcQueue<u64>, i: u64| {
        q.try_push(&i).expect("room");
        assert_eq!(q.try_pop().expect("pop").0, Some(i));
    };
    let run = |q: &ringwire::queue::MpmcQueue<u64>, n: u64| {
        let t0 = Instant::now();
        for i in 0..n {
            pair(q, i);
        }
        t0.elapsed().as_nanos() as f64 / n as f64
    };
    let mut ns = vec![Vec::new(); 3];
    for _ in 0..rounds {
        set_waiters(0);
        ns[0].push(run(&q, items));
        // A fresh handle: its mapping's wakes have not been rationed yet.
        let fresh = ringwire::queue::MpmcQueue::<u64>::open(&path).expect("open");
        set_waiters(1);
        ns[1].push(run(&fresh, 20_000));
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(1) {
            pair(&fresh, 0);
        }
        ns[2].push(run(&fresh, items));
    }
    set_waiters(0);
    drop(q);
    let _ = std::fs::remove_file(&path);
    println!(
        "MPMC queue: {items} push-pop pairs per way and round (20,000 for queue_stale_first), {rounds} rounds"
    );
    let ways = ["queue_nobody", "queue_stale_first", "queue_stale_rationed"];
    for (way, v) in ways.iter().zip(&mut ns) {
        let (med, lo, hi) = summary(v);
        println!("{way:>21}: {med:8.1} ns per pair (min {lo:.1}, max {hi:.1})");
    }
}

/// Median (the mean of the two middle values for an even count), min and max.
fn summary(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let med = (v[(n - 1) / 2] + v[n / 2]) / 2.0;
    (med, v[0], v[n - 1])
}
