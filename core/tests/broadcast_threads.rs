//! A writer thread and reader threads on a real heap ring: lossy (readers may be lapped but
//! never accept a wrong record) and lossless (a registered reader is never lapped).
// Heap-memory rings need `Region::from_raw_parts`, which loom builds do not have.
#![cfg(not(loom))]

use std::time::{Duration, Instant};

use ringwire_core::broadcast::{Consumer, NoWake, Producer, StartMode, TryPushError};
use ringwire_core::{Geometry, RingView};

mod broadcast_common;

use broadcast_common::ring;

const N: u64 = if cfg!(miri) { 60 } else { 50_000 };
/// The longest a thread may go without progress (a record read, a push taken) before the
/// test calls it stalled: a hang detector, not a speed test (on a loaded 2-core machine the
/// 50,000 hand-offs through 8 slots took over 20 s in all).
const DEADLINE: Duration = Duration::from_secs(if cfg!(miri) { 600 } else { 20 });

fn record(seq: u64) -> [u8; 24] {
    let mut r = [0u8; 24];
    r[..8].copy_from_slice(&seq.to_le_bytes());
    r[8..16].copy_from_slice(&(!seq).rotate_left(29).to_le_bytes());
    r[16..].copy_from_slice(&seq.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes());
    r
}

/// Runs `f` on a ring of `geo` in heap memory that outlives every thread `f` starts
/// (`f` uses scoped threads, joined before it returns).
fn with_ring(geo: Geometry, f: impl FnOnce(RingView)) {
    let (mem, view) = ring(&geo);
    f(view);
    drop(mem);
}

/// Reads until sequence `last` was passed; returns (accepted, lapped).
fn read_all(mut c: Consumer, last: u64) -> (u64, u64) {
    let (mut progress, mut at) = (Instant::now(), c.cursor());
    let mut dst = [0u8; 24];
    let (mut accepted, mut prev) = (0u64, 0u64);
    while c.cursor() <= last {
        match c.try_recv(&mut dst) {
            Some(s) => {
                assert_eq!(dst, record(s), "record {s} intact");
                assert!(s > prev, "never backwards: {s} after {prev}");
                prev = s;
                accepted += 1;
                at = c.cursor();
                progress = Instant::now();
            }
            None if c.cursor() != at => {
                // Lapped: the cursor moved past records it never accepted.
                at = c.cursor();
                progress = Instant::now();
            }
            None => {
                assert!(
                    progress.elapsed() < DEADLINE,
                    "reader stalled at {}",
                    c.cursor()
                );
                std::thread::yield_now();
            }
        }
    }
    assert_eq!(
        accepted + c.lapped(),
        last,
        "every sequence accepted or lapped"
    );
    (accepted, c.lapped())
}

#[test]
fn lossy_readers_never_accept_a_wrong_record() {
    with_ring(Geometry::spmc(8, 32, 8, 0, false).unwrap(), |view| {
        std::thread::scope(|s| {
            let readers: Vec<_> = (0..2)
                .map(|_| {
                    let c = Consumer::new(view, StartMode::Oldest);
                    s.spawn(move || read_all(c, N))
                })
                .collect();
            let mut p = Producer::new(view, NoWake).unwrap();
            for seq in 1..=N {
                assert_eq!(p.push(&record(seq)), Ok(seq));
            }
            for r in readers {
                let (accepted, _lapped) = r.join().unwrap();
                assert!(accepted >= 1);
            }
        });
    });
}

#[test]
fn lossless_registered_reader_is_never_lapped() {
    with_ring(Geometry::spmc(8, 32, 8, 2, true).unwrap(), |view| {
        let mut c = Consumer::new(view, StartMode::Oldest);
        assert_eq!(c.register(1234, "t", |_, _| true).unwrap(), Some(0));
        std::thread::scope(|s| {
            let reader = s.spawn(move || read_all(c, N));
            let mut p = Producer::new(view, NoWake).unwrap();
            let mut progress = Instant::now();
            let mut seq = 1;
            while seq <= N {
                match p.try_push(&record(seq)) {
                    Ok(s) => {
                        assert_eq!(s, seq);
                        seq += 1;
                        progress = Instant::now();
                    }
                    Err(e) => {
                        let TryPushError::Full(full) = e else {
                            panic!("push {seq}: {e}");
                        };
                        assert_eq!(full.seq, seq);
                        assert!(progress.elapsed() < DEADLINE, "writer stalled at {seq}");
                        std::thread::yield_now();
                    }
                }
            }
            assert_eq!(reader.join().unwrap(), (N, 0));
        });
    });
}
