//! Push-with-a-draining-reader experiment (diagnostics for issue 3 line 5, not the acceptance
//! benchmark, which is `push_drain` in `cargo bench -p ringwire-tests --bench handoff`).
//!
//! Crosses writers and readers of both crates (ringwire writer + ringfire reader and so on),
//! interleaved in rounds, and prints per pair the median ns per push and the median share of
//! records the reader received (1.0: the reader keeps pace, the two run in lock-step on the
//! slot lines; below 1: the writer runs ahead and the reader is lapped now and then).
//!
//! `cargo run --release -p ringwire-tests --example push_drain_cross -- [PUSHES] [ROUNDS]`
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ringwire::bench::floor::pin_to;
use ringwire::{RingConsumer, RingProducer};

type Rec = [u8; 64];
const CAP: u64 = 1 << 16;

fn rec(seq: u64, tpl: &Rec) -> Rec {
    let mut r = *tpl;
    r[..8].copy_from_slice(&seq.to_ne_bytes());
    r
}
fn seq_of(r: &Rec) -> u64 {
    u64::from_ne_bytes(r[..8].try_into().unwrap_or([0; 8]))
}

#[derive(Clone, Copy, Debug)]
enum Crate {
    Rw,
    Rf,
}

fn one(w: Crate, r: Crate, pushes: u64) -> (f64, f64) {
    let path = format!("/dev/shm/rw-pdx-{}-{w:?}{r:?}", std::process::id());
    let tpl: Rec = std::hint::black_box(std::array::from_fn(|i| i as u8 ^ 0x5a));
    // One on the stack for the whole run; a Box would put a pointer chase in the timed push.
    #[allow(clippy::large_enum_variant)]
    enum P {
        Rw(RingProducer<Rec>),
        Rf(ringfire::RingProducer<Rec>),
    }
    pin_to(0);
    let mut p = match w {
        Crate::Rw => P::Rw(RingProducer::create(&path, CAP).expect("create")),
        Crate::Rf => P::Rf(ringfire::RingProducer::create(&path, CAP).expect("create")),
    };
    let attached = Arc::new(AtomicBool::new(false));
    let caught_up = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (path, attached, caught_up, stop) = (
            path.clone(),
            attached.clone(),
            caught_up.clone(),
            stop.clone(),
        );
        std::thread::spawn(move || {
            pin_to(1);
            let mut recv: Box<dyn FnMut() -> Option<u64>> = match r {
                Crate::Rw => {
                    let mut c = RingConsumer::<Rec>::attach(&path).expect("attach");
                    Box::new(move || c.try_recv().map(|x| seq_of(&x)))
                }
                Crate::Rf => {
                    let mut c = ringfire::RingConsumer::<Rec>::attach(&path).expect("attach");
                    Box::new(move || c.try_recv().map(|x| seq_of(&x)))
                }
            };
            attached.store(true, Ordering::Release);
            while recv().is_none_or(|s| s < CAP) {}
            caught_up.store(true, Ordering::Release);
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if recv().is_some() {
                    n += 1;
                }
            }
            n
        })
    };
    let wait = |f: &AtomicBool| {
        let end = Instant::now() + Duration::from_secs(10);
        while !f.load(Ordering::Acquire) && Instant::now() < end {
            std::thread::yield_now();
        }
    };
    let mut push = |range: std::ops::RangeInclusive<u64>| match &mut p {
        P::Rw(p) => {
            for i in range {
                p.push(&rec(i, &tpl));
            }
        }
        P::Rf(p) => {
            for i in range {
                p.push(&rec(i, &tpl));
            }
        }
    };
    wait(&attached);
    push(1..=CAP);
    wait(&caught_up);
    let t0 = Instant::now();
    push(CAP + 1..=CAP + pushes);
    let dt = t0.elapsed();
    stop.store(true, Ordering::Relaxed);
    let got = reader.join().unwrap_or(0);
    drop(p);
    let _ = std::fs::remove_file(&path);
    (
        dt.as_nanos() as f64 / pushes as f64,
        got as f64 / pushes as f64,
    )
}

fn main() {
    let mut args = std::env::args().skip(1);
    let pushes: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000_000);
    let rounds: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(7);
    let pairs = [
        (Crate::Rw, Crate::Rw),
        (Crate::Rf, Crate::Rf),
        (Crate::Rw, Crate::Rf),
        (Crate::Rf, Crate::Rw),
    ];
    let mut res = vec![(vec![], vec![]); pairs.len()];
    for _ in 0..rounds {
        for (k, &(w, r)) in pairs.iter().enumerate() {
            let (ns, share) = one(w, r, pushes);
            res[k].0.push(ns);
            res[k].1.push(share);
        }
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    for (k, &(w, r)) in pairs.iter().enumerate() {
        let (a, b) = &mut res[k];
        let all: Vec<String> = a.iter().map(|x| format!("{x:.1}")).collect();
        println!(
            "writer {w:?} reader {r:?}: median {:.1} ns/push, median share {:.3}  [{}]",
            med(a),
            med(b),
            all.join(" ")
        );
    }
}
