//! Interleaved hand-off experiment (diagnostics for issue 3 line 5, not the acceptance
//! benchmark, which is `cargo bench -p ringwire-tests --bench handoff`).
//!
//! Two threads pinned to CPUs 0 and 1 run blocks of `N` round trips of a 64-byte record,
//! cycling through every variant `REPS` times, so that all variants see the same machine
//! state (on a VM the cross-core latency changes by several times from one second to the
//! next). Prints each variant's median block time and its median ratio to the bare
//! one-line floor of the same cycle. Variants: `floor` (one line, tight polling, as
//! `floor::cacheline_round_trips`); `floor2` (a sequence word and a 64-byte payload on two
//! lines, reused, PAUSE between polls; with/without the eager copy and the write marker of
//! spec §4.2); ringwire (try_recv loop, or try_recv_eager through recv_blocking(BusySpin))
//! and ringfire (recv_blocking(BusySpin)) at several capacities.
//!
//! `cargo run --release -p ringwire-tests --example handoff_interleaved -- [N] [REPS]`
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use ringwire::bench::floor::pin_to;
use ringwire::{BusySpin, RingConsumer, RingProducer};

type Rec = [u8; 64];

#[repr(align(128))]
struct Line(AtomicU64);

fn rec(seq: u64) -> Rec {
    let mut r = [0u8; 64];
    r[..8].copy_from_slice(&seq.to_ne_bytes());
    r
}
fn seq_of(r: &[u8]) -> u64 {
    u64::from_ne_bytes(r[..8].try_into().unwrap())
}

#[repr(C, align(128))]
struct Two([AtomicU64; 16]);

// One value per variant, built once: the size difference does not matter here.
#[allow(clippy::large_enum_variant)]
enum Side {
    Floor(Arc<Line>, Arc<Line>),
    Floor2(Arc<Two>, Arc<Two>, bool, bool),
    Rw(RingProducer<Rec>, RingConsumer<Rec>, bool),
    Rf(ringfire::RingProducer<Rec>, ringfire::RingConsumer<Rec>),
}

/// The next record of a ringwire ring: the eager spinning receive, or a try_recv loop.
fn rw_recv(cons: &mut RingConsumer<Rec>, eager: bool) -> Rec {
    if eager {
        return cons.recv_blocking(&mut BusySpin);
    }
    loop {
        if let Some(r) = cons.try_recv() {
            return r;
        }
        std::hint::spin_loop();
    }
}

fn p(tag: &str) -> std::path::PathBuf {
    format!("/dev/shm/rtexp-{}-{tag}", std::process::id()).into()
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(20000);
    let reps: usize = std::env::args()
        .nth(2)
        .map(|s| s.parse().unwrap())
        .unwrap_or(30);
    let caps: Vec<u64> = vec![1 << 16, 64, 8, 2, 1];
    let mut names = vec!["floor".to_string()];
    let mut mains: Vec<Side> = vec![];
    let mut echos: Vec<Side> = vec![];
    let (a, b) = (
        Arc::new(Line(AtomicU64::new(0))),
        Arc::new(Line(AtomicU64::new(0))),
    );
    mains.push(Side::Floor(a.clone(), b.clone()));
    echos.push(Side::Floor(a, b));
    for (eager, marker) in [(false, false), (true, false), (false, true), (true, true)] {
        let mk = || Arc::new(Two(std::array::from_fn(|_| AtomicU64::new(0))));
        let (a, b) = (mk(), mk());
        names.push(format!("floor2 eager {eager} marker {marker}"));
        mains.push(Side::Floor2(a.clone(), b.clone(), eager, marker));
        echos.push(Side::Floor2(a, b, eager, marker));
    }
    for &cap in &caps {
        for eager in [false, true] {
            let t = format!("rw{cap}{eager}");
            let pp = RingProducer::<Rec>::create(p(&format!("{t}a")), cap).unwrap();
            let pc = RingConsumer::<Rec>::builder()
                .start_from_head()
                .attach(p(&format!("{t}a")))
                .unwrap();
            let qp = RingProducer::<Rec>::create(p(&format!("{t}b")), cap).unwrap();
            let qc = RingConsumer::<Rec>::builder()
                .start_from_head()
                .attach(p(&format!("{t}b")))
                .unwrap();
            names.push(format!("ringwire cap {cap} eager {eager}"));
            mains.push(Side::Rw(pp, qc, eager));
            echos.push(Side::Rw(qp, pc, eager));
        }
        let t = format!("rf{cap}");
        let pp = ringfire::RingProducer::<Rec>::create(p(&format!("{t}a")), cap).unwrap();
        let mut pc = ringfire::RingConsumer::<Rec>::attach(p(&format!("{t}a"))).unwrap();
        pc.jump_to_latest();
        let qp = ringfire::RingProducer::<Rec>::create(p(&format!("{t}b")), cap).unwrap();
        let mut qc = ringfire::RingConsumer::<Rec>::attach(p(&format!("{t}b"))).unwrap();
        qc.jump_to_latest();
        names.push(format!("ringfire cap {cap}"));
        mains.push(Side::Rf(pp, qc));
        echos.push(Side::Rf(qp, pc));
    }
    let nv = mains.len();
    let echo = std::thread::spawn(move || {
        pin_to(1);
        let mut echos = echos;
        let mut last = 0;
        for _ in 0..reps {
            for e in echos.iter_mut() {
                for i in 1..=n + 1 {
                    match e {
                        Side::Floor(ping, pong) => {
                            let _ = i;
                            loop {
                                let v = ping.0.load(Ordering::Acquire);
                                if v > last {
                                    last = v;
                                    pong.0.store(v, Ordering::Release);
                                    break;
                                }
                            }
                        }
                        Side::Floor2(ping, pong, eager, marker) => {
                            let mut buf = [0u64; 8];
                            loop {
                                let v = ping.0[7].load(Ordering::Acquire);
                                if *eager {
                                    for (j, w) in buf.iter_mut().enumerate() {
                                        *w = ping.0[8 + j].load(Ordering::Relaxed);
                                    }
                                }
                                if v > last && v != u64::MAX {
                                    if !*eager {
                                        for (j, w) in buf.iter_mut().enumerate() {
                                            *w = ping.0[8 + j].load(Ordering::Relaxed);
                                        }
                                    }
                                    last = v;
                                    if *marker {
                                        pong.0[7].store(u64::MAX, Ordering::Relaxed);
                                        std::sync::atomic::fence(Ordering::Release);
                                    }
                                    for (j, w) in buf.iter().enumerate() {
                                        pong.0[8 + j].store(*w, Ordering::Relaxed);
                                    }
                                    pong.0[7].store(v, Ordering::Release);
                                    break;
                                }
                                std::hint::spin_loop();
                            }
                        }
                        Side::Rw(prod, cons, eager) => {
                            let r = rw_recv(cons, *eager);
                            prod.push(&r);
                        }
                        Side::Rf(prod, cons) => {
                            let r = cons.recv_blocking(&mut ringfire::BusySpin);
                            prod.push(&r);
                        }
                    }
                }
            }
        }
    });
    pin_to(0);
    let mut res = vec![vec![]; nv];
    let mut fl = 0u64;
    for _ in 0..reps {
        for (k, m) in mains.iter_mut().enumerate() {
            let mut t0 = Instant::now();
            for i in 0..=n {
                if i == 1 {
                    t0 = Instant::now();
                }
                match m {
                    Side::Floor(ping, pong) => {
                        fl += 1;
                        ping.0.store(fl, Ordering::Release);
                        while pong.0.load(Ordering::Acquire) != fl {}
                    }
                    Side::Floor2(ping, pong, eager, marker) => {
                        fl += 1;
                        if *marker {
                            ping.0[7].store(u64::MAX, Ordering::Relaxed);
                            std::sync::atomic::fence(Ordering::Release);
                        }
                        for j in 0..8 {
                            ping.0[8 + j].store(fl + j as u64, Ordering::Relaxed);
                        }
                        ping.0[7].store(fl, Ordering::Release);
                        loop {
                            let v = pong.0[7].load(Ordering::Acquire);
                            let mut buf = [0u64; 8];
                            if *eager {
                                for (j, w) in buf.iter_mut().enumerate() {
                                    *w = pong.0[8 + j].load(Ordering::Relaxed);
                                }
                            }
                            if v == fl {
                                if !*eager {
                                    for (j, w) in buf.iter_mut().enumerate() {
                                        *w = pong.0[8 + j].load(Ordering::Relaxed);
                                    }
                                }
                                std::hint::black_box(buf);
                                break;
                            }
                            std::hint::spin_loop();
                        }
                    }
                    Side::Rw(prod, cons, eager) => {
                        prod.push(&rec(i));
                        let r = rw_recv(cons, *eager);
                        assert_eq!(seq_of(&r), i);
                    }
                    Side::Rf(prod, cons) => {
                        prod.push(&rec(i));
                        let r = cons.recv_blocking(&mut ringfire::BusySpin);
                        assert_eq!(seq_of(&r), i);
                    }
                }
            }
            res[k].push(t0.elapsed().as_nanos() as f64 / n as f64);
        }
    }
    echo.join().unwrap();
    let med = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    // ratio to floor of the same rep
    for k in 0..nv {
        let mut r: Vec<f64> = (0..reps).map(|j| res[k][j] / res[0][j]).collect();
        let mut v = res[k].clone();
        println!(
            "{:32} median {:7.1} ns   ratio-to-floor (per rep, median) {:.2}",
            names[k],
            med(&mut v),
            med(&mut r)
        );
    }
}
