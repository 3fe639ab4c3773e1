//! One writer and one reader driven through arbitrary interleavings (spec §4.2, §4.3, §5):
//! the reader never accepts a record other than the one published under its sequence, never
//! goes backwards, and accepted + lapped accounts for every sequence it passed.
// Heap-memory rings need `Region::from_raw_parts`, which loom builds do not have.
#![cfg(not(loom))]

use proptest::prelude::*;
use ringwire_core::broadcast::raw::{RawRead, read_record};
use ringwire_core::broadcast::{Consumer, NoWake, Producer, StartMode};
use ringwire_core::{Geometry, oldest_retained};

mod broadcast_common;

use broadcast_common::ring;

/// Record bytes (stride 32): sequence, a sequence-derived word, a checksum of both.
const REC: usize = 24;

fn record(seq: u64) -> [u8; REC] {
    let a = seq;
    let b = seq.rotate_left(17) ^ 0x5DEE_CE66_D1CE_F00D;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in a.to_le_bytes().into_iter().chain(b.to_le_bytes()) {
        h = (h ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3);
    }
    let mut r = [0u8; REC];
    r[..8].copy_from_slice(&a.to_le_bytes());
    r[8..16].copy_from_slice(&b.to_le_bytes());
    r[16..].copy_from_slice(&h.to_le_bytes());
    r
}

#[derive(Clone, Debug)]
enum Op {
    /// Push k records one by one.
    Push(u64),
    /// Push k records as one batch.
    PushBatch(u64),
    /// Call try_recv m times.
    Read(u64),
    /// recv_batch with max m.
    ReadBatch(u64),
    /// Raw-read the record `back` sequences below write_seq + 1.
    Raw(u64),
}

fn op(cap: u64) -> impl Strategy<Value = Op> {
    let k = 1..=2 * cap + 1;
    prop_oneof![
        k.clone().prop_map(Op::Push),
        k.clone().prop_map(Op::PushBatch),
        k.clone().prop_map(Op::Read),
        k.clone().prop_map(Op::ReadBatch),
        (0..=3 * cap).prop_map(Op::Raw),
    ]
}

fn mode() -> impl Strategy<Value = StartMode> {
    prop_oneof![
        Just(StartMode::Latest),
        Just(StartMode::Head),
        Just(StartMode::Oldest),
        (0u64..40).prop_map(StartMode::Sequence),
    ]
}

fn case() -> impl Strategy<Value = (u64, u64, StartMode, Vec<Op>)> {
    prop_oneof![Just(4u64), Just(8), Just(16)].prop_flat_map(|cap| {
        let n = if cfg!(miri) { 6 } else { 40 };
        (
            Just(cap),
            0..=3 * cap,
            mode(),
            prop::collection::vec(op(cap), 1..n),
        )
    })
}

/// The reader under test plus what it must do, computed from the writer's history alone.
struct Checker {
    cap: u64,
    /// Start cursor before any clamping to the oldest retained message.
    start: u64,
    accepted: u64,
    last: Option<u64>,
}

impl Checker {
    /// Checks one delivery (or none) against the model: with the writer at `w`, the reader
    /// at cursor `cur` must get `max(cur, oldest_retained(w))` if that exists.
    fn step(&mut self, c: &Consumer, before: u64, w: u64, got: Option<(u64, &[u8])>) {
        let expect = before.max(oldest_retained(w, self.cap));
        match got {
            Some((seq, bytes)) => {
                assert!(expect <= w, "delivered {seq} with nothing available");
                assert_eq!(seq, expect, "delivers the oldest unread retained message");
                assert_eq!(bytes, &record(seq)[..bytes.len()], "record {seq} intact");
                if let Some(l) = self.last {
                    assert!(seq > l, "never backwards: {seq} after {l}");
                }
                self.last = Some(seq);
                self.accepted += 1;
                assert_eq!(c.cursor(), seq + 1);
            }
            None => {
                assert!(expect > w, "nothing delivered although {expect} <= {w}");
                assert_eq!(c.cursor(), before.max(expect.min(w + 1)));
            }
        }
        assert_eq!(
            self.accepted + c.lapped(),
            c.cursor().max(self.start) - self.start,
            "accepted + lapped accounts for every sequence passed"
        );
    }
}

fn run(cap: u64, pre: u64, mode: StartMode, ops: Vec<Op>) {
    let (mem, view) = ring(&Geometry::spmc(cap, 32, 8, 0, false).unwrap());
    let mut p = Producer::new(view, NoWake).unwrap();
    for s in 1..=pre {
        p.push(&record(s)).unwrap();
    }
    let c0 = Consumer::new(view, mode);
    let start = match mode {
        StartMode::Sequence(n) => n.max(1),
        _ => c0.cursor(),
    };
    let mut c = c0;
    let mut chk = Checker {
        cap,
        start,
        accepted: 0,
        last: None,
    };
    assert_eq!(
        c.lapped(),
        c.cursor() - start,
        "start clamp counted as lapped"
    );
    let mut dst = [0u8; REC];
    for op in ops {
        let w = p.write_seq();
        match op {
            Op::Push(k) => {
                for _ in 0..k {
                    let s = p.next_seq();
                    assert_eq!(p.push(&record(s)), Ok(s));
                }
            }
            Op::PushBatch(k) => {
                let first = p.next_seq();
                let recs: Vec<_> = (first..first + k).map(record).collect();
                let r = p.push_batch(recs.iter().map(|r| &r[..]));
                assert_eq!(r, Ok(first..first + k));
            }
            Op::Read(m) => {
                for _ in 0..m {
                    let before = c.cursor();
                    let got = c.try_recv(&mut dst);
                    chk.step(&c, before, w, got.map(|s| (s, &dst[..])));
                }
            }
            Op::ReadBatch(m) => {
                let mut seen = Vec::new();
                let before = c.cursor();
                let n = c.recv_batch(&mut dst, m as usize, |s, b| seen.push((s, b.to_vec())));
                assert_eq!(n, seen.len());
                assert!(n as u64 <= m);
                // Replay the batch against the model one delivery at a time.
                let mut cur = before;
                for (s, b) in &seen {
                    let expect = cur.max(oldest_retained(w, cap));
                    assert_eq!(*s, expect);
                    assert_eq!(&b[..], &record(*s)[..]);
                    assert!(chk.last.is_none_or(|l| *s > l));
                    chk.last = Some(*s);
                    chk.accepted += 1;
                    cur = s + 1;
                }
                if (n as u64) < m {
                    assert!(cur.max(oldest_retained(w, cap)) > w, "batch stopped early");
                }
                assert_eq!(chk.accepted + c.lapped(), c.cursor().max(start) - start);
            }
            Op::Raw(back) => {
                let seq = (w + 1).saturating_sub(back).max(1);
                match read_record(&view, seq, &mut dst) {
                    RawRead::Record => {
                        assert!(seq <= w && seq >= oldest_retained(w, cap));
                        assert_eq!(dst, record(seq));
                    }
                    RawRead::Pending => assert!(seq > w, "{seq} pending with write_seq {w}"),
                    RawRead::Lapped { resume_at } => {
                        assert!(seq < oldest_retained(w, cap));
                        assert_eq!(resume_at, oldest_retained(w, cap));
                    }
                }
            }
        }
    }
    drop(c);
    drop(mem);
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 4 } else { 256 },
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn reader_never_accepts_a_wrong_record((cap, pre, mode, ops) in case()) {
        run(cap, pre, mode, ops);
    }
}
