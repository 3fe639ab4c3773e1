//! A mirror-style writer (raw writes under given sequences, GAP skips, one commit per frame)
//! and a reader on a SPARSE ring (spec §7, §21.2), through arbitrary interleavings: the
//! reader only accepts records that were written under the sequence it claims, never goes
//! backwards, accounts for every sequence it passed, and always gets past holes.
// Heap-memory rings need `Region::from_raw_parts`, which loom builds do not have.
#![cfg(not(loom))]

use std::collections::BTreeSet;

use proptest::prelude::*;
use ringwire_core::Geometry;
use ringwire_core::broadcast::{Consumer, NoWake, Producer, StartMode};
use ringwire_core::layout::Flags;

mod broadcast_common;

use broadcast_common::ring;

fn record(seq: u64) -> [u8; 16] {
    let mut r = [0u8; 16];
    r[..8].copy_from_slice(&seq.to_le_bytes());
    r[8..].copy_from_slice(&(seq ^ 0xC3C3_5A5A_0F0F_9696).rotate_left(7).to_le_bytes());
    r
}

#[derive(Clone, Debug)]
enum Op {
    /// One DATA frame: skip `gap` sequences first (a GAP), then write `k` records, commit.
    Frame { gap: u64, k: u64 },
    /// A duplicate frame of an already written sequence `back` below next: skipped.
    Dup { back: u64 },
    /// `m` polls.
    Read(u64),
}

fn case() -> impl Strategy<Value = (u64, Vec<Op>)> {
    prop_oneof![Just(4u64), Just(8)].prop_flat_map(|cap| {
        let n = if cfg!(miri) { 5 } else { 30 };
        let op = prop_oneof![
            (0..=cap + 2, 1..=cap + 1).prop_map(|(gap, k)| Op::Frame { gap, k }),
            (1..=cap).prop_map(|back| Op::Dup { back }),
            (1u64..=70).prop_map(Op::Read),
        ];
        (Just(cap), prop::collection::vec(op, 1..n))
    })
}

fn run(cap: u64, ops: Vec<Op>) {
    let mut geo = Geometry::spmc(cap, 24, 8, 0, false).unwrap();
    geo.flags.0 |= Flags::SPARSE;
    let (mem, view) = ring(&geo);
    let mut p = Producer::new(view, NoWake).unwrap();
    let mut c = Consumer::new(view, StartMode::Oldest);
    let mut written = BTreeSet::new();
    let (mut accepted, mut last) = (0u64, 0u64);
    let mut dst = [0u8; 16];
    let mut poll = |c: &mut Consumer, written: &BTreeSet<u64>| {
        if let Some(s) = c.try_recv(&mut dst) {
            assert!(written.contains(&s), "accepted {s}, which is a hole");
            assert_eq!(dst, record(s), "record {s} intact");
            assert!(s > last, "never backwards: {s} after {last}");
            last = s;
            accepted += 1;
        }
        assert_eq!(
            accepted + c.lapped(),
            c.cursor() - 1,
            "every sequence accounted for"
        );
    };
    for op in ops {
        match op {
            Op::Frame { gap, k } => {
                p.skip_to(p.next_seq() + gap);
                for _ in 0..k {
                    let s = p.next_seq();
                    assert!(p.write_raw(s, &record(s)));
                    written.insert(s);
                }
                assert_eq!(p.commit(), p.next_seq() - 1);
            }
            Op::Dup { back } => {
                let s = p.next_seq().saturating_sub(back);
                assert!(!p.write_raw(s, &[0xEE; 16]), "duplicate {s} skipped");
                p.commit();
            }
            Op::Read(m) => {
                for _ in 0..m {
                    poll(&mut c, &written);
                }
            }
        }
    }
    // Quiescent: within a bounded number of polls the reader gets past every hole.
    let w = p.write_seq();
    for _ in 0..64 * (cap + 2) {
        poll(&mut c, &written);
    }
    assert_eq!(c.cursor(), w + 1, "caught up with write_seq {w}");
    assert_eq!(last, w, "the newest record is delivered");
    drop(c);
    drop(mem);
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 3 } else { 256 },
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn sparse_reader_skips_holes_and_never_accepts_one((cap, ops) in case()) {
        run(cap, ops);
    }
}
