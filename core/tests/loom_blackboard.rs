//! loom model of the blackboard's seqlock (spec §14): one writer updating a key while a
//! reader copies it. A read reported as a value is never torn, never older than a value
//! already read, and a read that overlaps a write reports busy instead.
//!
//! Run: `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p ringwire-core
//! --release --test loom_blackboard`.
#![cfg(loom)]

use loom::thread;
use ringwire_core::Region;
use ringwire_core::blackboard::{Blackboard, TryRead, total_len};

/// A 16-byte value whose two words must agree: a torn copy shows.
fn value(v: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&v.to_le_bytes());
    b[8..].copy_from_slice(&(v.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5A5A).to_le_bytes());
    b
}

fn decode(b: &[u8; 16]) -> u64 {
    let v = u64::from_le_bytes(b[..8].try_into().unwrap());
    assert_eq!(b, &value(v), "torn value");
    v
}

#[test]
fn seqlock_reads_are_whole_and_never_go_back() {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    b.check(|| {
        let region = Region::loom_new(total_len(16, 2).unwrap());
        // SAFETY: a fresh loom region, no other view of it exists yet.
        let bb = unsafe { Blackboard::init(region, 16, 2) }.unwrap();
        let w = {
            let bb = bb.clone();
            thread::spawn(move || {
                bb.write(1, &value(1)).unwrap();
                bb.write(1, &value(2)).unwrap();
            })
        };
        let mut last = 0;
        let mut dst = [0u8; 16];
        for _ in 0..3 {
            match bb.try_read(1, &mut dst).unwrap() {
                TryRead::Value => {
                    let v = decode(&dst);
                    assert!(v >= last, "read {v} after {last}");
                    last = v;
                }
                TryRead::Never => assert_eq!(last, 0, "never-written after a value"),
                // Odd: a write in progress; even: one completed during the copy. Never 0,
                // nor a value the two writes cannot produce.
                TryRead::Busy { seqlock } => assert!((1..=4).contains(&seqlock), "{seqlock}"),
            }
        }
        // Key 0 was never written.
        assert_eq!(bb.try_read(0, &mut dst).unwrap(), TryRead::Never);
        w.join().unwrap();
        assert_eq!(bb.try_read(1, &mut dst).unwrap(), TryRead::Value);
        assert_eq!(decode(&dst), 2);
    });
}
