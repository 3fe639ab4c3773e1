//! loom models of the broadcast ring (spec §4.2 writer, §4.3 reader and lap rule).
//!
//! Run: `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p ringwire-core
//! --release --test loom_broadcast`.
#![cfg(loom)]

use loom::thread;
use ringwire_core::broadcast::raw::{RawRead, read_record};
use ringwire_core::broadcast::{Consumer, LOOKASIDE_POLLS, NoWake, Producer, StartMode};
use ringwire_core::layout::Flags;
use ringwire_core::{Geometry, Region, RingView};

/// Record bytes for `seq`: two words that both depend on it, so a torn mix of two records
/// (or a record from another sequence) is recognised.
fn record(seq: u64) -> [u8; 16] {
    let mut r = [0u8; 16];
    r[..8].copy_from_slice(&seq.to_le_bytes());
    r[8..].copy_from_slice(&(seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xA5A5).to_le_bytes());
    r
}

/// A lossy ring of `cap` slots of 16-byte records, in loom atomics.
fn ring(cap: u64) -> RingView {
    let geo = Geometry::spmc(cap, 24, 8, 0, false).unwrap();
    let region = Region::loom_new(geo.total_len().unwrap() as usize);
    // SAFETY: a fresh loom region, no other view of it exists yet.
    unsafe { RingView::init(region, &geo) }.unwrap()
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    b.check(f);
}

/// A consumer's receive call: `Consumer::try_recv` or `Consumer::try_recv_eager`.
type Recv = fn(&mut Consumer, &mut [u8]) -> Option<u64>;

/// Writer overwrites the single slot (capacity 1) while a reader copies it with `recv`:
/// whatever the reader accepts carries exactly the payload published under the sequence it
/// claims. With `check_raw`, the raw path (serve) is checked against the same rule.
fn overwrite_race(recv: Recv, check_raw: bool) {
    model(move || {
        let view = ring(1);
        let mut p = Producer::new(view.clone(), NoWake).unwrap();
        // Attached before the writer starts, so at 1. Attached while it ran, it started at 2
        // only once `write_seq` was 2, the last word the writer writes: a read of a ring no
        // one writes any more (the drain below reads it so too), and a `write_seq` it cached
        // at 1 is one its first receive can load; the load racing the pushes more than
        // doubled the interleavings (plain read: 74,812 to 33,422 executions without it).
        let mut c = Consumer::new(view.clone(), StartMode::Oldest);
        let start = c.cursor();
        assert_eq!(start, 1);
        let w = thread::spawn(move || {
            p.push(&record(1)).unwrap();
            p.push(&record(2)).unwrap();
        });
        let mut dst = [0u8; 16];
        let mut last = 0;
        let mut accepted = 0u64;
        for _ in 0..2 {
            if let Some(s) = recv(&mut c, &mut dst) {
                assert_eq!(dst, record(s), "accepted record {s} is intact");
                assert!(s > last, "never backwards");
                last = s;
                accepted += 1;
            }
            assert_eq!(accepted + c.lapped(), c.cursor() - start);
        }
        if check_raw {
            let mut raw = [0u8; 16];
            if read_record(&view, 2, &mut raw) == RawRead::Record {
                assert_eq!(raw, record(2));
            }
        }
        w.join().unwrap();
        while let Some(s) = recv(&mut c, &mut dst) {
            assert_eq!(dst, record(s));
            assert!(s > last);
            last = s;
            accepted += 1;
        }
        assert_eq!((c.cursor(), last), (3, 2));
        assert_eq!(accepted + c.lapped(), 3 - start);
    });
}

/// The plain read and the raw path (serve) under the overwrite race.
#[test]
fn torn_read_is_never_accepted() {
    overwrite_race(Consumer::try_recv, true);
}

/// The eager read (payload copied on every poll, before the verdict) under the same
/// overwrite race, also when the copy was taken while the slot still held the previous
/// record or the write marker.
#[test]
fn eager_read_never_accepts_a_torn_record() {
    overwrite_race(Consumer::try_recv_eager, false);
}

/// Capacity 2: the writer publishes 1..=3 and laps a reader that started at 1. The reader
/// never accepts a wrong record, never goes backwards, and at the end accepted + lapped
/// accounts for all three sequences.
#[test]
fn lap_detection_at_the_wrap() {
    model(|| {
        let view = ring(2);
        let mut c = Consumer::new(view.clone(), StartMode::Oldest);
        let mut p = Producer::new(view, NoWake).unwrap();
        let w = thread::spawn(move || {
            for s in 1..=3 {
                p.push(&record(s)).unwrap();
            }
        });
        let mut dst = [0u8; 16];
        let mut accepted = 0u64;
        let mut last = 0;
        let mut check = |c: &mut Consumer, accepted: &mut u64, last: &mut u64| {
            if let Some(s) = c.try_recv(&mut dst) {
                assert_eq!(dst, record(s), "accepted record {s} is intact");
                assert!(s > *last, "never backwards");
                *last = s;
                *accepted += 1;
            }
            assert_eq!(*accepted + c.lapped(), c.cursor() - 1);
        };
        check(&mut c, &mut accepted, &mut last);
        check(&mut c, &mut accepted, &mut last);
        w.join().unwrap();
        // Quiescent now: drain what is left.
        for _ in 0..3 {
            check(&mut c, &mut accepted, &mut last);
        }
        assert_eq!(c.cursor(), 4);
        assert_eq!(last, 3, "the newest record is always delivered");
        assert_eq!(accepted + c.lapped(), 3);
        assert!(
            c.lapped() <= 1,
            "only message 1 can be overwritten with capacity 2"
        );
    });
}

/// Lossless ring, capacity 2, one registered reader: the producer's `try_push` refuses to
/// lap it, so the reader is never lapped and every record it accepts is intact, whatever the
/// interleaving of its cursor publication and the producer's gate refresh.
#[test]
fn lossless_gate_never_laps_a_registered_reader() {
    model(|| {
        let geo = Geometry::spmc(2, 24, 8, 1, true).unwrap();
        let region = Region::loom_new(geo.total_len().unwrap() as usize);
        // SAFETY: a fresh loom region, no other view of it exists yet.
        let view = unsafe { RingView::init(region, &geo) }.unwrap();
        let mut c = Consumer::new(view.clone(), StartMode::Oldest);
        assert_eq!(c.register(7, "r", |_, _| true).unwrap(), Some(0));
        let mut p = Producer::new(view, NoWake).unwrap();
        let w = thread::spawn(move || {
            // Bounded: give up on a record after two refusals (the reader may stop early).
            let mut seq = 1;
            'outer: while seq <= 4 {
                for _ in 0..2 {
                    if p.try_push(&record(seq)).is_ok() {
                        seq += 1;
                        continue 'outer;
                    }
                    thread::yield_now();
                }
                break;
            }
        });
        let mut dst = [0u8; 16];
        let mut last = 0;
        for _ in 0..4 {
            if let Some(s) = c.try_recv(&mut dst) {
                assert_eq!(dst, record(s), "accepted record {s} is intact");
                assert_eq!(s, last + 1, "lossless: no sequence is skipped");
                last = s;
            } else {
                thread::yield_now();
            }
            assert_eq!(c.lapped(), 0, "a registered reader is never lapped");
        }
        w.join().unwrap();
    });
}

/// A raw read (serve's path) of record 1 while the producer publishes it into a two-slot
/// ring: nothing can have lapped it, so it is the record or pending, never lapped. A slot
/// that still shows the marker is a later lap's write only if `write_seq`, acquired before
/// the slot's load, has passed the record: the record's own release store of its sequence
/// then happens before that load (`RingView::rewritten_under`).
#[test]
fn a_raw_read_never_takes_a_record_being_published_for_lapped() {
    model(|| {
        let view = ring(2);
        let mut p = Producer::new(view.clone(), NoWake).unwrap();
        let w = thread::spawn(move || {
            p.push(&record(1)).unwrap();
        });
        let mut dst = [0u8; 16];
        match read_record(&view, 1, &mut dst) {
            RawRead::Record => assert_eq!(dst, record(1)),
            RawRead::Pending => {}
            other => panic!("record 1 of a two-slot ring: {other:?}"),
        }
        w.join().unwrap();
        assert_eq!(read_record(&view, 1, &mut dst), RawRead::Record);
        assert_eq!(dst, record(1));
    });
}

/// A sparse ring (a mirror's, spec §7) whose reader has polled an empty slot 63 times in a
/// row, so that its next empty poll looks for a hole, while the writer writes record 1 and
/// publishes it: the reader gets record 1, now or later, and never skips it as a hole. Hole
/// detection takes the slot under the cursor for a hole only if `write_seq`, acquired, has
/// passed it: the writer's slot stores then happen before the look (`Consumer::skip_hole`).
#[test]
fn a_sparse_ring_reader_never_skips_a_published_record_as_a_hole() {
    model(|| {
        let mut geo = Geometry::spmc(2, 24, 8, 0, false).unwrap();
        geo.flags.0 |= Flags::SPARSE;
        let region = Region::loom_new(geo.total_len().unwrap() as usize);
        // SAFETY: a fresh loom region, no other view of it exists yet.
        let view = unsafe { RingView::init(region, &geo) }.unwrap();
        let mut p = Producer::new(view.clone(), NoWake).unwrap();
        let mut c = Consumer::new(view, StartMode::Oldest);
        let mut dst = [0u8; 16];
        for _ in 1..LOOKASIDE_POLLS {
            assert_eq!(c.try_recv(&mut dst), None);
        }
        let w = thread::spawn(move || {
            assert!(p.write_raw(1, &record(1)));
            p.commit();
        });
        let got = c.try_recv(&mut dst);
        w.join().unwrap();
        let got = got.or_else(|| c.try_recv(&mut dst));
        assert_eq!(got, Some(1), "record 1, lapped {}", c.lapped());
        assert_eq!(dst, record(1));
        assert_eq!(c.lapped(), 0);
    });
}
