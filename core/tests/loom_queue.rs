//! loom models of the lossless queues: SPSC push/pop including slice operations (with and
//! without per-slot length words), single pops that hand their slots back two at a time,
//! slots written in place then committed, the cursor check (`stat`'s) on a live queue, and a
//! producer
//! (dead mid-push) or a consumer replaced by a successor that resumes at the stored cursor
//! while the other side runs; MPMC with two
//! producers and two consumers, producers racing for slots across a wrap, a producer
//! reusing a slot while its consumer pops, `claim` racing `try_push`, the corruption checks
//! (of the full and empty paths, and an attacher's) on a live queue, a consumer following
//! another's cursor past stamps it has not seen yet; and the heals: of a
//! consumer killed mid-pop (also racing the next consumer), racing a late publish, of a
//! push dead mid-copy. And ringfire's
//! lossy MPMC ring: two producers and a competing consumer, slot reuse with an overwritten
//! ticket, and the heal of a slot left mid-write racing a push and a consumer.
//!
//! Run: `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p ringwire-core
//! --release --test loom_queue` (preemption bound 3, 2 for `mpmc_two_producers_two_consumers`,
//! `mpmc_wrap_with_competing_producers` and `mpmc_mid_pop_heal_racing_the_next_consumer`,
//! unless LOOM_MAX_PREEMPTIONS is set; about 170 s of CPU in all on the 2-core CI machine,
//! the longest `mpmc_corruption_checks_never_trip_on_a_live_queue` and
//! `lossy_mpmc_slot_reuse_and_an_overwritten_ticket`, about 35 s each).
//!
//! # What loom checks here, and what it cannot
//!
//! loom runs every interleaving (up to the bound) and lets a relaxed or acquire load read
//! any store that coherence and happens-before allow, but only a store already made in the
//! interleaving: it never produces *load buffering* (a load reading a store that comes
//! later in every interleaving). The payload words are relaxed atomics, so a consumer's copy
//! could never be seen reading the next lap's item, and the orderings that keep a producer
//! from reusing a slot still being read would go unchecked. Under loom, `QueueView`
//! therefore records every payload copy on a per-slot `loom::cell::UnsafeCell`, and loom
//! fails a model when two copies of one slot by different threads, one of them a write, are
//! not ordered by happens-before, whatever values they saw. Under loom the MPMC retry path
//! does not yield (`mpmc::backoff`): a load after a yield never returns a value the thread
//! saw before it, which would hide a stale cursor re-read.
//!
//! Weakening any one of these to `Relaxed` fails at least one model (checked one at a time):
//! MPMC `claim_pos`'s stamp acquire, `claim`'s CAS (AcqRel), `try_push`'s publishing store,
//! `write_claimed`'s publishing CAS, `try_pop`'s stamp acquire, the pop's store freeing the
//! slot, the heal's CAS (release), and `stays_behind`'s RMW made a plain load; SPSC the
//! producer's tail store and head acquire, the consumer's head store and tail acquire, a new
//! producer's head acquire and a new consumer's tail acquire (the replaced-side models),
//! `check_spsc_cursors`'s load of the enqueue cursor (its two loads of the dequeue cursor
//! need no acquire: the enqueue cursor's acquire, then program order, already put the
//! producer's reading of the dequeue cursor before the second).
//!
//! Verified by argument only: `write_claimed`'s begin CAS (acquire), which keeps the payload
//! stores after it (a store moving before an earlier load is load buffering) and carries the
//! previous lap's consumer's reads to a `write_claimed` made on another thread than its
//! `claim` (no model hands a claim over); the acquires of the snapshots (`has_item`,
//! `has_space`, `next_stuck_slot`) and of `heal_stuck_slot`'s stamp load, which only make a
//! report or a refusal less stale, never a heal wrong; and the acquires with which a new SPSC
//! producer or consumer takes over from the previous one (the replaced-side models order a
//! successor after its predecessor by a join, as the std layer's role lock does). Also by
//! argument, since loom puts each atomic's stores in the order the interleaving makes them
//! (so a store never lands before one it did not see, write-write coherence holds for free):
//! the lossy ring's slot CAS (acquire), which orders a producer's payload stores after the
//! previous lap's. And the attacher's check (`check_cursors`) needs none of its acquires:
//! the cursors move by relaxed CASes, so the acquires pair with nothing; its retry after a
//! pause is what tells a live queue from a corrupt one.
#![cfg(loom)]

use loom::thread;
use ringwire_core::queue::compat::{LossyMpmcConsumer, LossyMpmcProducer, LossyPush};
use ringwire_core::queue::spsc::check_spsc_cursors;
use ringwire_core::queue::{
    HealError, MpmcQueue, PopError, Popped, PushError, QueueGeometry, QueueKind, QueueView,
    SpscConsumer, SpscProducer, StuckKind, StuckSlot,
};
use ringwire_core::{Geometry, Region, RingView};

fn model(f: impl Fn() + Sync + Send + 'static) {
    model_bounded(3, f)
}

/// Runs `f` under loom with `bound` preemptions unless LOOM_MAX_PREEMPTIONS says otherwise.
fn model_bounded(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(bound);
    }
    b.check(f);
}

fn view(kind: QueueKind, cap: u64, item: usize, stride: usize) -> QueueView {
    let g = QueueGeometry::new(kind, cap, item, stride).unwrap();
    // SAFETY: a fresh loom region, no other view of it exists yet.
    unsafe { QueueView::init(Region::loom_new(g.total_len().unwrap() as usize), &g) }.unwrap()
}

/// A 16-byte item whose two words must agree: a torn copy shows.
fn item(v: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&v.to_le_bytes());
    b[8..].copy_from_slice(&(!v).to_le_bytes());
    b
}

fn value(b: &[u8]) -> u64 {
    let v = u64::from_le_bytes(b[..8].try_into().unwrap());
    let w = u64::from_le_bytes(b[8..16].try_into().unwrap());
    assert_eq!(w, !v, "torn item");
    v
}

/// A two-slot SPSC queue of 16-byte items: with a length word (`fixed == false`) or in the
/// fixed-size layout without one.
fn spsc_view(fixed: bool) -> QueueView {
    if fixed {
        let g = QueueGeometry::spsc_fixed(2, 16).unwrap();
        // SAFETY: a fresh loom region, no other view of it exists yet.
        unsafe { QueueView::init(Region::loom_new(g.total_len().unwrap() as usize), &g) }.unwrap()
    } else {
        view(QueueKind::Spsc, 2, 16, 24)
    }
}

/// The consumer thread of the SPSC models: one `try_pop` (which may find the queue
/// empty), then one `pop_slice` of up to two; returns the items' values.
fn pop_one_then_a_batch(q: QueueView) -> Vec<u64> {
    let mut c = SpscConsumer::new(q).unwrap();
    let mut got = Vec::new();
    pop_single(&mut c, &mut got);
    let mut bufs = [[0u8; 16]; 2];
    let mut lens = [0usize; 2];
    let n = c.pop_slice(&mut bufs, &mut lens).unwrap();
    for k in 0..n {
        assert_eq!(lens[k], 16);
        got.push(value(&bufs[k]));
    }
    got
}

/// One `try_pop` of a 16-byte item (which may find the queue empty): its value goes to
/// `got`.
fn pop_single(c: &mut SpscConsumer, got: &mut Vec<u64>) {
    let mut b = [0u8; 16];
    match c.try_pop(&mut b) {
        Ok(16) => got.push(value(&b)),
        Ok(n) => panic!("length {n}"),
        Err(PopError::Empty) => {}
        Err(e) => panic!("{e}"),
    }
}

/// The producer thread of the single-item SPSC models on a 2-slot queue: items 1 and 2,
/// then item 3 if a pop has freed a slot by then; returns how many it pushed.
fn push_two_then_a_third(q: QueueView) -> u64 {
    let mut p = SpscProducer::new(q).unwrap();
    p.try_push(&item(1)).unwrap();
    p.try_push(&item(2)).unwrap();
    match p.try_push(&item(3)) {
        Ok(()) => 3,
        Err(PushError::Full) => 2,
        Err(e) => panic!("{e}"),
    }
}

/// Drains what the consumer thread left: everything pushed (items 1..=pushed) comes out
/// once, in order, untorn.
fn drain_and_check(q: QueueView, mut got: Vec<u64>, pushed: u64) {
    let mut c = SpscConsumer::new(q).unwrap();
    let mut b = [0u8; 16];
    while let Ok(n) = c.try_pop(&mut b) {
        assert_eq!(n, 16);
        got.push(value(&b));
    }
    assert_eq!(got, (1..=pushed).collect::<Vec<_>>());
}

#[test]
fn spsc_push_pop_and_slices() {
    spsc_push_pop_and_slices_in(false);
}

#[test]
fn spsc_fixed_push_pop_and_slices() {
    spsc_push_pop_and_slices_in(true);
}

fn spsc_push_pop_and_slices_in(fixed: bool) {
    model(move || {
        let q = spsc_view(fixed);
        let qp = q.clone();
        let producer = thread::spawn(move || {
            let mut p = SpscProducer::new(qp).unwrap();
            p.try_push(&item(1)).unwrap();
            // Room for one or two more, depending on the consumer.
            let n = p.push_slice(&[item(2), item(3), item(4)]).unwrap();
            assert!((1..=2).contains(&n), "pushed {n}");
            1 + n as u64
        });
        let qc = q.clone();
        let consumer = thread::spawn(move || pop_one_then_a_batch(qc));
        let pushed = producer.join().unwrap();
        let got = consumer.join().unwrap();
        drain_and_check(q, got, pushed);
    });
}

#[test]
fn spsc_fixed_single_items_reuse_a_slot() {
    // The typed handles' path: single pushes and pops of exactly the item size. The third
    // push fits only in the slot the consumer's first pop freed; the loom cells check that
    // the pop's read of that slot happens before the push's write.
    model(|| {
        let q = spsc_view(true);
        let qp = q.clone();
        let producer = thread::spawn(move || push_two_then_a_third(qp));
        let qc = q.clone();
        let consumer = thread::spawn(move || {
            let mut c = SpscConsumer::new(qc).unwrap();
            let mut got = Vec::new();
            pop_single(&mut c, &mut got);
            pop_single(&mut c, &mut got);
            got
        });
        let pushed = producer.join().unwrap();
        let got = consumer.join().unwrap();
        drain_and_check(q, got, pushed);
    });
}

#[test]
fn spsc_cursor_check_never_trips_on_a_live_queue() {
    // One slot: the producer's second push fits only once the consumer's pop has handed
    // the slot back, so the enqueue cursor reaches 2 only after the dequeue cursor reached
    // 1. The main thread checks the cursors meanwhile, as `stat` does on a live queue: a
    // reading of the dequeue cursor older than the one the producer saw before its push
    // would show the enqueue cursor more than a lap ahead, and call the queue corrupt.
    model(|| {
        let q = view(QueueKind::Spsc, 1, 16, 24);
        let qp = q.clone();
        let producer = thread::spawn(move || {
            let mut p = SpscProducer::new(qp).unwrap();
            for v in 1..=2 {
                while p.try_push(&item(v)).is_err() {
                    thread::yield_now();
                }
            }
        });
        let qc = q.clone();
        let consumer = thread::spawn(move || {
            let mut c = SpscConsumer::new(qc).unwrap();
            let mut b = [0u8; 16];
            loop {
                match c.try_pop(&mut b) {
                    Ok(_) => return value(&b),
                    Err(PopError::Empty) => thread::yield_now(),
                    Err(e) => panic!("{e}"),
                }
            }
        });
        assert_eq!(check_spsc_cursors(&q), Ok(()));
        producer.join().unwrap();
        assert_eq!(consumer.join().unwrap(), 1);
        assert_eq!(check_spsc_cursors(&q), Ok(()));
    });
}

#[test]
fn spsc_single_pops_hand_slots_back_two_at_a_time() {
    // A consumer that stores its head every second single pop (or when it catches up with
    // the tail it read) against a producer that fills a 4-slot queue and pushes on into
    // the slots handed back: the payload cells check that every read of a slot happens
    // before the producer's write of the next lap into it, and the drain that nothing is
    // lost or popped twice.
    model(|| {
        let g = QueueGeometry::spsc_fixed(4, 16).unwrap();
        // SAFETY: a fresh loom region, no other view of it exists yet.
        let q = unsafe { QueueView::init(Region::loom_new(g.total_len().unwrap() as usize), &g) }
            .unwrap();
        let qp = q.clone();
        let producer = thread::spawn(move || {
            let mut p = SpscProducer::new(qp).unwrap();
            let mut pushed = 0;
            for v in 1..=6 {
                match p.try_push(&item(v)) {
                    Ok(()) => pushed = v,
                    Err(PushError::Full) => break,
                    Err(e) => panic!("{e}"),
                }
            }
            assert!(pushed >= 4, "pushed {pushed}");
            pushed
        });
        let qc = q.clone();
        let consumer = thread::spawn(move || {
            let mut c = SpscConsumer::new(qc).unwrap();
            c.set_release_every(2);
            let mut got = Vec::new();
            for _ in 0..3 {
                pop_single(&mut c, &mut got);
                // Every second pop (or catching up) hands the slots back.
                assert!(c.unreleased() < 2, "{} slots held", c.unreleased());
            }
            got
        });
        let pushed = producer.join().unwrap();
        let got = consumer.join().unwrap();
        drain_and_check(q, got, pushed);
    });
}

/// Stages `bytes` in the free slot `k` after `tail` the way the kernel's recvmmsg would
/// fill it in place (loom cannot model a write through the raw address, so this writes the
/// same bytes through the region).
fn stage(q: &QueueView, tail: u64, k: u64, bytes: &[u8]) {
    let off = q.slot_offset(tail + k) + q.geometry().payload_offset();
    // SAFETY: the slot is free (the caller checked), inside the region, 8-aligned, and the
    // 16 bytes fit its payload.
    unsafe { q.region().write_words(off, bytes) };
}

#[test]
fn spsc_in_place_commit_drops_a_slot_and_publishes_the_rest() {
    // Datagrams written in place and published with commit_in_place, one of them dropped
    // (the later slot moves down), against a consumer popping one and then a batch.
    model(|| {
        let q = view(QueueKind::Spsc, 2, 16, 24);
        let qp = q.clone();
        let producer = thread::spawn(move || {
            let mut p = SpscProducer::new(qp.clone()).unwrap();
            // Both slots free: slot 0 is dropped, slot 1 (item 1) moves down to it.
            stage(&qp, p.tail(), 0, &[0xee; 16]);
            stage(&qp, p.tail(), 1, &item(1));
            assert_eq!(p.commit_in_place(&[None, Some(16)]), Ok(1));
            // One or two free now, depending on the consumer.
            let free = p.free();
            for k in 0..free {
                stage(&qp, p.tail(), k, &item(2 + k));
            }
            let lens = [Some(16); 2];
            1 + p.commit_in_place(&lens[..free as usize]).unwrap() as u64
        });
        let qc = q.clone();
        let consumer = thread::spawn(move || pop_one_then_a_batch(qc));
        let pushed = producer.join().unwrap();
        let got = consumer.join().unwrap();
        drain_and_check(q, got, pushed);
    });
}

#[test]
fn spsc_a_replaced_producer_resumes_at_the_stored_tail() {
    // A producer pushes item 1, writes the next free slot and dies before committing it (a
    // half push). Its successor (the std layer's role lock orders the two: here a join)
    // resumes at the stored tail, overwrites that slot and pushes on, while a consumer pops
    // throughout: the dead producer's uncommitted bytes are never read, and the slot the
    // successor reuses is ordered after the consumer's read of it (the payload cells).
    model(|| {
        let q = spsc_view(true);
        let qd = q.clone();
        let dead = thread::spawn(move || {
            let mut p = SpscProducer::new(qd.clone()).unwrap();
            p.try_push(&item(1)).unwrap();
            if p.free() > 0 {
                stage(&qd, p.tail(), 0, &item(99));
            }
        });
        let qc = q.clone();
        let consumer = thread::spawn(move || pop_one_then_a_batch(qc));
        let qs = q.clone();
        let successor = thread::spawn(move || {
            dead.join().unwrap();
            let mut p = SpscProducer::new(qs).unwrap();
            assert_eq!(p.tail(), 1, "resumes after the committed item");
            1 + p.push_slice(&[item(2), item(3)]).unwrap() as u64
        });
        let pushed = successor.join().unwrap();
        let got = consumer.join().unwrap();
        drain_and_check(q, got, pushed);
    });
}

#[test]
fn spsc_a_replaced_consumer_resumes_at_the_stored_head() {
    // A consumer pops one item and exits; its successor (ordered after it by the role lock:
    // here a join) resumes at the stored head while the producer pushes on into the freed
    // slot: nothing is popped twice or skipped, and the producer's reuse of the slot is
    // ordered after the first consumer's read.
    model(|| {
        let q = spsc_view(true);
        let qp = q.clone();
        let producer = thread::spawn(move || push_two_then_a_third(qp));
        let qc = q.clone();
        let first = thread::spawn(move || {
            let mut got = Vec::new();
            pop_single(&mut SpscConsumer::new(qc).unwrap(), &mut got);
            got
        });
        let qs = q.clone();
        let successor = thread::spawn(move || {
            let mut got = first.join().unwrap();
            let mut c = SpscConsumer::new(qs).unwrap();
            assert_eq!(c.head(), got.len() as u64, "resumes after the popped items");
            pop_single(&mut c, &mut got);
            got
        });
        let pushed = producer.join().unwrap();
        let got = successor.join().unwrap();
        drain_and_check(q, got, pushed);
    });
}

#[test]
fn spsc_fixed_record_batches() {
    spsc_fixed_record_batches_in(false);
}

#[test]
fn spsc_fixed_layout_record_batches() {
    spsc_fixed_record_batches_in(true);
}

fn spsc_fixed_record_batches_in(fixed: bool) {
    spsc_fixed_record_batches_from(fixed, false);
}

#[test]
fn spsc_packed_batches_across_the_wrap() {
    // A packed queue's batches copy one span up to the wrap and one after it. Position 0
    // is pushed and popped before the threads start, so a batch of two from position 1
    // takes slot 1, then slot 0, while the consumer pops a batch that may wrap the same
    // way: the cells check that no copy into a slot overlaps a copy out of it.
    spsc_fixed_record_batches_from(true, true);
}

/// A producer pushes records 1 to 3 in two batches into a two-slot queue (fixed or with
/// length words) while a consumer pops one batch; then the rest is drained, and every
/// record comes once, in order. With `wrapped`, position 0 is pushed and popped first, so
/// the batches start at slot 1 and wrap.
fn spsc_fixed_record_batches_from(fixed: bool, wrapped: bool) {
    // The typed std handles move records with push_fixed / pop_fixed.
    model(move || {
        let q = spsc_view(fixed);
        if wrapped {
            let mut p = SpscProducer::new(q.clone()).unwrap();
            assert_eq!(p.push_fixed(&item(0), 16), Ok(1));
            let mut c = SpscConsumer::new(q.clone()).unwrap();
            let mut b = [0u8; 16];
            assert_eq!(c.pop_fixed(&mut b, 16), Ok(1));
            assert_eq!(value(&b), 0);
        }
        let qp = q.clone();
        let producer = thread::spawn(move || {
            let mut p = SpscProducer::new(qp).unwrap();
            let recs: Vec<u8> = (1..=3).flat_map(item).collect();
            let n = p.push_fixed(&recs, 16).unwrap() as u64;
            assert_eq!(n, 2, "an empty two-slot queue takes two");
            // One more if the consumer freed a slot meanwhile.
            n + p.push_fixed(&recs[32..], 16).unwrap() as u64
        });
        let qc = q.clone();
        let consumer = thread::spawn(move || {
            let mut c = SpscConsumer::new(qc).unwrap();
            let mut out = [0u8; 32];
            let n = c.pop_fixed(&mut out, 16).unwrap();
            out.chunks(16).take(n).map(value).collect::<Vec<_>>()
        });
        let pushed = producer.join().unwrap();
        let mut got = consumer.join().unwrap();
        // What is left, in one batch (it may wrap too).
        let mut c = SpscConsumer::new(q).unwrap();
        let mut out = [0u8; 32];
        let n = c.pop_fixed(&mut out, 16).unwrap();
        got.extend(out.chunks(16).take(n).map(value));
        assert_eq!(got, (1..=pushed).collect::<Vec<_>>());
    });
}

/// One `try_pop`: the position and value popped, `None` when empty or pending; a healed
/// position or any error fails the model.
fn pop_once(q: &MpmcQueue) -> Option<(u64, u64)> {
    pop_once_with(q, false)
}

/// [`pop_once`], by `try_pop_fixed` (a typed handle's pop) when `fixed`.
fn pop_once_with(q: &MpmcQueue, fixed: bool) -> Option<(u64, u64)> {
    let mut b = [0u8; 16];
    let popped = if fixed {
        q.try_pop_fixed(&mut b)
    } else {
        q.try_pop(&mut b)
    };
    match popped {
        Ok(Popped::Item { pos }) => Some((pos, value(&b))),
        Ok(Popped::Healed { pos }) => panic!("healed {pos}"),
        Err(PopError::Empty | PopError::Pending { .. }) => None,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn mpmc_two_producers_two_consumers() {
    // Four threads with retry loops: bound 2 keeps it to about 20 s (bound 3: 160 s, passes).
    model_bounded(2, || {
        let q = MpmcQueue::new(view(QueueKind::Mpmc, 2, 16, 24)).unwrap();
        let producers: Vec<_> = [10u64, 20]
            .into_iter()
            .map(|v| {
                let q = q.clone();
                thread::spawn(move || {
                    // Two items in two slots: never full.
                    q.try_push(&item(v)).unwrap();
                })
            })
            .collect();
        // One consumer pops as `try_pop` does, the other as a typed handle does.
        let consumers: Vec<_> = [false, true]
            .into_iter()
            .map(|fixed| {
                let q = q.clone();
                thread::spawn(move || pop_once_with(&q, fixed))
            })
            .collect();
        for p in producers {
            p.join().unwrap();
        }
        let mut got: Vec<(u64, u64)> = consumers
            .into_iter()
            .filter_map(|c| c.join().unwrap())
            .collect();
        let mut b = [0u8; 16];
        while let Ok(Popped::Item { pos }) = q.try_pop(&mut b) {
            got.push((pos, value(&b)));
        }
        got.sort();
        // Positions 0 and 1, each delivered once; the two values, each once.
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), [0, 1]);
        let mut vals: Vec<u64> = got.iter().map(|g| g.1).collect();
        vals.sort();
        assert_eq!(vals, [10, 20]);
    });
}

#[test]
fn mpmc_wrap_with_competing_producers() {
    // Two slots; position 0 was pushed and popped, so position 2 is slot 0's next lap. Two
    // producers race for positions 1 and 2 across the wrap (they collide on the enqueue
    // cursor CAS) while a consumer pops.
    model_bounded(2, || {
        let q = MpmcQueue::new(view(QueueKind::Mpmc, 2, 16, 24)).unwrap();
        let mut b = [0u8; 16];
        assert_eq!(q.try_push(&item(1)), Ok(0));
        assert_eq!(q.try_pop(&mut b), Ok(Popped::Item { pos: 0 }));
        let producers: Vec<_> = [10u64, 20]
            .into_iter()
            .map(|v| {
                let q = q.clone();
                thread::spawn(move || (q.try_push(&item(v)).unwrap(), v))
            })
            .collect();
        let qc = q.clone();
        let consumer = thread::spawn(move || pop_once(&qc));
        let mut pushed: Vec<(u64, u64)> =
            producers.into_iter().map(|p| p.join().unwrap()).collect();
        let mut got: Vec<(u64, u64)> = consumer.join().unwrap().into_iter().collect();
        while let Ok(Popped::Item { pos }) = q.try_pop(&mut b) {
            got.push((pos, value(&b)));
        }
        // Positions 1 and 2 each claimed once, popped in order, with the value pushed there.
        pushed.sort();
        assert_eq!(pushed.iter().map(|p| p.0).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(got, pushed);
        assert_eq!(q.try_pop(&mut b), Err(PopError::Empty));
    });
}

#[test]
fn mpmc_wrap_with_competing_consumers() {
    // Two slots; position 0 was pushed and popped, so position 2 is slot 0's next lap, and
    // position 1 holds 10. A producer pushes 20 at position 2 across the wrap while two
    // consumers race for positions 1 and 2 (they collide on the dequeue cursor CAS, and one
    // may find position 2 not yet published, or read a stale cursor): each position is
    // delivered once, with its value, and no corruption check trips on the way.
    model_bounded(2, || {
        let q = MpmcQueue::new(view(QueueKind::Mpmc, 2, 16, 24)).unwrap();
        let mut b = [0u8; 16];
        assert_eq!(q.try_push(&item(1)), Ok(0));
        assert_eq!(q.try_pop(&mut b), Ok(Popped::Item { pos: 0 }));
        assert_eq!(q.try_push(&item(10)), Ok(1));
        let qp = q.clone();
        let producer = thread::spawn(move || qp.try_push(&item(20)).unwrap());
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let q = q.clone();
                thread::spawn(move || pop_once(&q))
            })
            .collect();
        assert_eq!(producer.join().unwrap(), 2);
        let mut got: Vec<(u64, u64)> = consumers
            .into_iter()
            .filter_map(|c| c.join().unwrap())
            .collect();
        while let Ok(Popped::Item { pos }) = q.try_pop(&mut b) {
            got.push((pos, value(&b)));
        }
        got.sort();
        assert_eq!(got, [(1, 10), (2, 20)]);
        assert_eq!(q.try_pop(&mut b), Err(PopError::Empty));
    });
}

/// Pushes `v` with `try_push`, retrying (with a yield, so loom runs the consumer) while the
/// queue is full; returns the position.
fn push_retrying(q: &MpmcQueue, v: u64) -> u64 {
    loop {
        match q.try_push(&item(v)) {
            Ok(pos) => return pos,
            Err(PushError::Full) => thread::yield_now(),
            Err(e) => panic!("push {v}: {e}"),
        }
    }
}

#[test]
fn mpmc_corruption_checks_never_trip_on_a_live_queue() {
    // Two slots, two laps already done, so the stamps are of later laps than their slot
    // indices: a producer pushes positions 4 to 6 (full at 6 until the consumer frees slot
    // 0), a consumer pops them (empty until each is published), and the main thread checks
    // the cursors as an attacher does. Neither the checks of the full and empty paths nor the
    // attacher's may call the live queue corrupt.
    model_bounded(2, || {
        let q = MpmcQueue::new(view(QueueKind::Mpmc, 2, 16, 24)).unwrap();
        let mut b = [0u8; 16];
        for v in 0..4 {
            assert_eq!(q.try_push(&item(v)), Ok(v));
            assert_eq!(q.try_pop(&mut b), Ok(Popped::Item { pos: v }));
        }
        let qp = q.clone();
        let producer = thread::spawn(move || {
            for v in 4..7 {
                assert_eq!(push_retrying(&qp, v), v);
            }
        });
        let qc = q.clone();
        let consumer = thread::spawn(move || {
            let mut b = [0u8; 16];
            let mut got = Vec::new();
            while got.len() < 3 {
                match qc.try_pop(&mut b) {
                    Ok(Popped::Item { pos }) => got.push((pos, value(&b))),
                    Err(PopError::Empty | PopError::Pending { .. }) => thread::yield_now(),
                    other => panic!("pop: {other:?}"),
                }
            }
            got
        });
        assert_eq!(q.check_cursors(), Ok(()));
        producer.join().unwrap();
        assert_eq!(consumer.join().unwrap(), [(4, 4), (5, 5), (6, 6)]);
        assert_eq!(q.check_cursors(), Ok(()));
    });
}

#[test]
fn mpmc_a_consumer_behind_another_never_calls_the_queue_corrupt() {
    // Two slots: a producer pushes positions 0 and 1, one consumer pops twice, another once.
    // The second consumer may read the dequeue cursor at 2, moved there by the first one's
    // relaxed CASes, and then a stamp of slot 0 older than that cursor implies (still the
    // free stamp 0): the empty path must read the stamp again by an RMW before calling the
    // queue corrupt (`stays_behind`); a plain load may return the same stale stamp.
    model_bounded(2, || {
        let q = MpmcQueue::new(view(QueueKind::Mpmc, 2, 16, 24)).unwrap();
        let qp = q.clone();
        let producer = thread::spawn(move || {
            for v in 0..2 {
                assert_eq!(qp.try_push(&item(v)), Ok(v));
            }
        });
        let pop = |q: &MpmcQueue| match pop_once(q) {
            Some((pos, v)) => {
                assert_eq!(pos, v);
                1
            }
            None => 0,
        };
        let qc = q.clone();
        let first = thread::spawn(move || pop(&qc) + pop(&qc));
        let got = pop(&q);
        producer.join().unwrap();
        assert!(got + first.join().unwrap() <= 2);
    });
}

#[test]
fn mpmc_producer_reuses_a_slot_while_its_consumer_pops() {
    // Two slots, three items: the producer writes position 2 into slot 0 as soon as the
    // consumer frees it, while the consumer goes on popping. Every item comes out once, in
    // order and untorn, and the payload cells (`QueueView` under loom) check that the
    // consumer's copy out of slot 0 happens before the producer's copy into it.
    model(|| {
        let q = MpmcQueue::new(view(QueueKind::Mpmc, 2, 16, 24)).unwrap();
        let qp = q.clone();
        let producer = thread::spawn(move || {
            for v in 0..3 {
                assert_eq!(push_retrying(&qp, 10 + v), v);
            }
        });
        let mut got = Vec::new();
        let mut b = [0u8; 16];
        while got.len() < 3 {
            match q.try_pop(&mut b) {
                Ok(Popped::Item { pos }) => got.push((pos, value(&b))),
                Ok(Popped::Healed { pos }) => panic!("healed {pos}"),
                Err(PopError::Empty) => thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        }
        producer.join().unwrap();
        assert_eq!(got, [(0, 10), (1, 11), (2, 12)]);
    });
}

#[test]
fn mpmc_claim_racing_try_push() {
    // A producer using claim + write_claimed races one using try_push for positions 0 and 1.
    // The one that meets the other's stamp (claimed, being written or published) at its
    // position re-reads the enqueue cursor straight away (no yield under loom): that stamp
    // must show it the other's cursor move, or it reports a corrupt queue.
    model(|| {
        let q = MpmcQueue::new(view(QueueKind::Mpmc, 2, 16, 24)).unwrap();
        let qa = q.clone();
        let a = thread::spawn(move || {
            let pos = qa.claim().unwrap();
            qa.write_claimed(pos, &item(10)).unwrap();
            (pos, 10)
        });
        let qb = q.clone();
        let b = thread::spawn(move || (qb.try_push(&item(20)).unwrap(), 20));
        let mut pushed = [a.join().unwrap(), b.join().unwrap()];
        pushed.sort();
        assert_eq!(pushed.map(|p| p.0), [0, 1]);
        let mut got = Vec::new();
        let mut buf = [0u8; 16];
        while let Ok(Popped::Item { pos }) = q.try_pop(&mut buf) {
            got.push((pos, value(&buf)));
        }
        assert_eq!(got, pushed);
    });
}

#[test]
fn mpmc_heal_of_a_consumer_killed_mid_pop() {
    // Both slots full. A consumer takes position 0, copies it out and dies before freeing
    // the slot; a healer that confirmed the death (it joins the thread) finds the slot and
    // frees it, while a producer retries its push of position 2 into that slot. The dead
    // consumer never freed the slot, so only the heal's release orders its copy out before
    // the producer's copy in (the payload cells check it); the rest stays in order.
    model(|| {
        let q = MpmcQueue::new(view(QueueKind::Mpmc, 2, 16, 24)).unwrap();
        assert_eq!(q.try_push(&item(10)), Ok(0));
        assert_eq!(q.try_push(&item(11)), Ok(1));
        let qd = q.clone();
        let dead = thread::spawn(move || {
            let mut b = [0u8; 16];
            assert_eq!(qd.loom_pop_and_die(&mut b), Ok(Popped::Item { pos: 0 }));
            value(&b)
        });
        let qh = q.clone();
        let healer = thread::spawn(move || {
            assert_eq!(dead.join().unwrap(), 10);
            let stuck = qh.next_stuck_slot(0);
            assert_eq!(
                stuck,
                Some(StuckSlot {
                    pos: 0,
                    kind: StuckKind::MidPop
                })
            );
            qh.heal_stuck_slot(stuck.unwrap())
        });
        let qp = q.clone();
        let producer = thread::spawn(move || push_retrying(&qp, 12));
        assert_eq!(healer.join().unwrap(), Ok(()));
        assert_eq!(producer.join().unwrap(), 2);
        let mut b = [0u8; 16];
        for (pos, v) in [(1, 11), (2, 12)] {
            assert_eq!(q.try_pop(&mut b), Ok(Popped::Item { pos }));
            assert_eq!(value(&b), v);
        }
        assert_eq!(q.try_pop(&mut b), Err(PopError::Empty));
        assert_eq!(q.next_stuck_slot(0), None);
    });
}

#[test]
fn mpmc_mid_pop_heal_racing_the_next_consumer() {
    // As mpmc_heal_of_a_consumer_killed_mid_pop, with a live consumer popping while the heal
    // runs: it takes position 1, and position 2 (which the producer writes into the healed
    // slot) only once the heal freed the slot and the producer published it. Nothing is
    // read twice or out of order, and the dead consumer's copy out is ordered before the
    // producer's copy in (the payload cells): the producer runs from the start, and only
    // the heal orders it after the dead consumer. Bound 2: 5 s (bound 3: 90 s, passes).
    model_bounded(2, || {
        let q = MpmcQueue::new(view(QueueKind::Mpmc, 2, 16, 24)).unwrap();
        assert_eq!(q.try_push(&item(10)), Ok(0));
        assert_eq!(q.try_push(&item(11)), Ok(1));
        let qp = q.clone();
        let producer = thread::spawn(move || push_retrying(&qp, 12));
        let qd = q.clone();
        let dead = thread::spawn(move || {
            let mut b = [0u8; 16];
            assert_eq!(qd.loom_pop_and_die(&mut b), Ok(Popped::Item { pos: 0 }));
            // The next consumer starts once position 0 is taken (it is the dead one's).
            let qc = qd.clone();
            thread::spawn(move || -> Vec<(u64, u64)> {
                (0..2).filter_map(|_| pop_once(&qc)).collect()
            })
        });
        let qh = q.clone();
        let healer = thread::spawn(move || {
            // The healer confirmed the death by joining the dead consumer.
            let consumer = dead.join().unwrap();
            let stuck = qh.next_stuck_slot(0);
            assert_eq!(
                stuck,
                Some(StuckSlot {
                    pos: 0,
                    kind: StuckKind::MidPop
                })
            );
            (qh.heal_stuck_slot(stuck.unwrap()), consumer)
        });
        let (healed, consumer) = healer.join().unwrap();
        assert_eq!(healed, Ok(()));
        assert_eq!(producer.join().unwrap(), 2);
        let mut got = consumer.join().unwrap();
        while let Some(p) = pop_once(&q) {
            got.push(p);
        }
        assert_eq!(got, [(1, 11), (2, 12)]);
        assert_eq!(q.next_stuck_slot(0), None);
    });
}

#[test]
fn heal_of_a_dead_try_push_racing_a_push_and_a_pop() {
    // A producer died inside try_push, between its cursor CAS and its publish: the cursor is
    // past position 0 and its stamp still says 0. A healer heals it while a producer pushes
    // (position 1) and a consumer pops: the consumer never sees a payload at position 0, and
    // the queue then delivers position 1 and works through slot 0's next lap.
    model(|| {
        let q = MpmcQueue::new(view(QueueKind::Mpmc, 2, 16, 24)).unwrap();
        q.view()
            .enq()
            .store(1, ringwire_core::sync::Ordering::Relaxed);
        let qh = q.clone();
        let healer = thread::spawn(move || {
            let s = qh.next_stuck_slot(0);
            (s, s.map(|s| qh.heal_stuck_slot(s)))
        });
        let qp = q.clone();
        let producer = thread::spawn(move || qp.try_push(&item(5)));
        let qc = q.clone();
        let consumer = thread::spawn(move || {
            let mut b = [0u8; 16];
            match qc.try_pop(&mut b) {
                Ok(Popped::Item { pos }) => panic!("an item at {pos} before position 0 was healed"),
                Ok(Popped::Healed { pos }) => Some(pos),
                Err(PopError::Empty | PopError::Pending { .. }) => None,
                Err(e) => panic!("{e}"),
            }
        });
        assert_eq!(
            healer.join().unwrap(),
            (
                Some(StuckSlot {
                    pos: 0,
                    kind: StuckKind::MidWrite
                }),
                Some(Ok(()))
            )
        );
        assert_eq!(producer.join().unwrap(), Ok(1));
        let mut seen: Vec<(u64, Option<u64>)> = consumer
            .join()
            .unwrap()
            .into_iter()
            .map(|p| (p, None))
            .collect();
        let mut b = [0u8; 16];
        while let Ok(p) = q.try_pop(&mut b) {
            seen.push(match p {
                Popped::Item { pos } => (pos, Some(value(&b))),
                Popped::Healed { pos } => (pos, None),
            });
        }
        assert_eq!(seen, [(0, None), (1, Some(5))]);
        assert_eq!(q.try_push(&item(6)), Ok(2));
        assert_eq!(q.try_pop(&mut b), Ok(Popped::Item { pos: 2 }));
        assert_eq!(value(&b), 6);
    });
}

#[test]
fn heal_racing_a_late_publish() {
    model(|| {
        let q = MpmcQueue::new(view(QueueKind::Mpmc, 2, 16, 24)).unwrap();
        // The producer claimed position 0 and was (wrongly) declared dead.
        let pos = q.claim().unwrap();
        let qp = q.clone();
        let late = thread::spawn(move || qp.write_claimed(pos, &item(7)));
        let qh = q.clone();
        // It heals what the scan reports a producer holds (it believes the producer dead, and
        // knows nothing of the consumer, which the scan reports while it copies out).
        let healer = thread::spawn(move || match qh.next_stuck_slot(0) {
            Some(s) if s.kind != StuckKind::MidPop => qh.heal_stuck_slot(s).map(|()| s.kind),
            _ => Err(HealError::NotStuck { pos, stamp: 0 }),
        });
        let qc = q.clone();
        let consumer = thread::spawn(move || {
            let mut b = [0u8; 16];
            match qc.try_pop(&mut b) {
                Ok(Popped::Item { pos }) => Some((pos, Some(value(&b)))),
                Ok(Popped::Healed { pos }) => Some((pos, None)),
                Err(PopError::Empty | PopError::Pending { .. }) => None,
                Err(e) => panic!("{e}"),
            }
        });
        let published = late.join().unwrap();
        let healed = healer.join().unwrap();
        let mut seen: Vec<(u64, Option<u64>)> = consumer.join().unwrap().into_iter().collect();
        let mut b = [0u8; 16];
        while let Ok(p) = q.try_pop(&mut b) {
            seen.push(match p {
                Popped::Item { pos } => (pos, Some(value(&b))),
                Popped::Healed { pos } => (pos, None),
            });
        }
        // Exactly one side wins, the loser knows, and consumers see exactly the winner.
        match (published, healed) {
            (Ok(()), Err(_)) => assert_eq!(seen, [(0, Some(7))]),
            (Err(PushError::Healed { pos: 0 }), Ok(StuckKind::Claimed | StuckKind::MidWrite)) => {
                assert_eq!(seen, [(0, None)])
            }
            other => panic!("both or neither won: {other:?}"),
        }
        // The queue works on afterwards, through the same slot's next lap.
        for v in [8, 9] {
            q.try_push(&item(v)).unwrap();
        }
        for (p, v) in [(1, 8), (2, 9)] {
            assert_eq!(q.try_pop(&mut b), Ok(Popped::Item { pos: p }));
            assert_eq!(value(&b), v);
        }
    });
}

#[test]
fn healed_claim_never_writes_into_the_next_lap() {
    model(|| {
        // Position 0 is claimed, healed and passed; position 1 comes and goes; then the
        // zombie producer of position 0 races the producer of position 2 (the same slot).
        let q = MpmcQueue::new(view(QueueKind::Mpmc, 2, 16, 24)).unwrap();
        let zombie_pos = q.claim().unwrap();
        assert_eq!(
            q.heal_stuck_slot(StuckSlot {
                pos: zombie_pos,
                kind: StuckKind::Claimed
            }),
            Ok(())
        );
        let mut b = [0u8; 16];
        assert_eq!(q.try_pop(&mut b), Ok(Popped::Healed { pos: 0 }));
        q.try_push(&item(1)).unwrap();
        assert_eq!(q.try_pop(&mut b), Ok(Popped::Item { pos: 1 }));
        let qz = q.clone();
        let zombie = thread::spawn(move || qz.write_claimed(zombie_pos, &item(66)));
        let qb = q.clone();
        let next = thread::spawn(move || qb.try_push(&item(5)));
        let qc = q.clone();
        let consumer = thread::spawn(move || {
            let mut b = [0u8; 16];
            qc.try_pop(&mut b).ok().map(|p| (p, value(&b)))
        });
        assert!(matches!(
            zombie.join().unwrap(),
            Err(PushError::NotClaimed { pos: 0, .. } | PushError::Healed { pos: 0 })
        ));
        assert_eq!(next.join().unwrap(), Ok(2));
        let got = consumer
            .join()
            .unwrap()
            .or_else(|| q.try_pop(&mut b).ok().map(|p| (p, value(&b))));
        assert_eq!(got, Some((Popped::Item { pos: 2 }, 5)));
    });
}

/// A lossy MPMC ring of `capacity` 16-byte records in a fresh loom region.
fn lossy_ring(capacity: u64) -> RingView {
    let g = Geometry::mpmc(capacity, 24, 8).unwrap();
    // SAFETY: a fresh loom region, no other view of it exists yet.
    unsafe { RingView::init(Region::loom_new(g.total_len().unwrap() as usize), &g) }.unwrap()
}

/// One lossy MPMC producer thread per value, each pushing its value once and returning
/// (ticket, value). Their clock never advances, so a push never gives up on its slot (a
/// drop fails the model): it waits for the previous lap, as these models never stall a
/// producer. Every producer attaches before the first thread starts: an attach keeps
/// nothing it loads and only refuses a `claim_seq` past 2^63, which these models never
/// reach, so its load racing another producer's claim added interleavings and no check.
fn lossy_producers(ring: &RingView, values: [u64; 2]) -> Vec<thread::JoinHandle<(u64, u64)>> {
    let producers = values.map(|v| (LossyMpmcProducer::new(ring.clone()).unwrap(), v));
    producers
        .into_iter()
        .map(|(p, v)| {
            thread::spawn(move || match p.push(&item(v), || 0) {
                LossyPush::Published { seq, .. } => (seq, v),
                other => panic!("{other:?}"),
            })
        })
        .collect()
}

#[test]
fn lossy_mpmc_two_producers_one_competing_consumer() {
    model(|| {
        let ring = lossy_ring(2);
        // Attached first: as a producer's, its attach keeps nothing it loads, and its checks
        // (read_seq not past claim_seq, claim_seq below 2^63) cannot fail here.
        let mut c = LossyMpmcConsumer::new(ring.clone()).unwrap();
        // Two tickets in two fresh slots: never waits, so the clock is unused.
        let producers = lossy_producers(&ring, [10, 20]);
        let mut got = Vec::new();
        let mut b = [0u8; 16];
        if let Some(seq) = c.try_recv(&mut b) {
            got.push((seq, value(&b)));
        }
        let seqs: Vec<u64> = producers.into_iter().map(|p| p.join().unwrap().0).collect();
        while let Some(seq) = c.try_recv(&mut b) {
            got.push((seq, value(&b)));
        }
        // Every ticket delivered once, untorn, with its producer's value; nothing dropped.
        assert_eq!(c.dropped(), 0);
        got.sort();
        let mut want: Vec<(u64, u64)> = seqs.into_iter().zip([10, 20]).collect();
        want.sort();
        assert_eq!(got, want);
    });
}

/// The lossy MPMC ring with slot reuse: one slot, two tickets, so ticket 2 waits in the
/// claim loop for ticket 1's lap and takes the slot over with the `cur == prev` CAS, while a
/// competing consumer takes ticket 1 and may meet it overwritten (or still being
/// overwritten). Every ticket is delivered once, untorn and with its producer's value, or
/// counted as dropped; a model run must reach both a delivered ticket 1 and a dropped one.
#[test]
fn lossy_mpmc_slot_reuse_and_an_overwritten_ticket() {
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
    // Across executions (not part of the model): which outcomes the model reached.
    static DELIVERED_FIRST: AtomicU32 = AtomicU32::new(0);
    static DROPPED_FIRST: AtomicU32 = AtomicU32::new(0);
    static HELD_THEN_LOST: AtomicU32 = AtomicU32::new(0);
    model(|| {
        let ring = lossy_ring(1);
        // Attached first: as a producer's, its attach keeps nothing it loads, and its checks
        // (read_seq not past claim_seq, claim_seq below 2^63) cannot fail here.
        let mut c = LossyMpmcConsumer::new(ring.clone()).unwrap();
        // The second ticket waits only for the first to publish (no stall).
        let producers = lossy_producers(&ring, [10, 20]);
        let mut got = Vec::new();
        let mut b = [0u8; 16];
        if let Some(seq) = c.try_recv(&mut b) {
            got.push((seq, value(&b)));
        }
        // The consumer took ticket 1 and is waiting on its slot.
        let held = c.pending() == Some(1);
        let mut pushed: Vec<(u64, u64)> =
            producers.into_iter().map(|p| p.join().unwrap()).collect();
        pushed.sort();
        assert_eq!(pushed.iter().map(|p| p.0).collect::<Vec<_>>(), [1, 2]);
        while let Some(seq) = c.try_recv(&mut b) {
            got.push((seq, value(&b)));
        }
        // Ticket 2 is always delivered (nothing overwrites it); ticket 1 only if it was read
        // before ticket 2 took the slot, and otherwise counted as dropped.
        assert!(got.windows(2).all(|w| w[0].0 < w[1].0), "{got:?}");
        assert_eq!(got.last(), Some(&pushed[1]), "{got:?}");
        match got.len() {
            2 => {
                assert_eq!(got[0], pushed[0]);
                assert_eq!(c.dropped(), 0);
                DELIVERED_FIRST.fetch_add(1, Relaxed);
            }
            1 => {
                assert_eq!(c.dropped(), 1);
                DROPPED_FIRST.fetch_add(1, Relaxed);
                if held {
                    // It met its slot overwritten by ticket 2 (or mid-overwrite a lap on).
                    HELD_THEN_LOST.fetch_add(1, Relaxed);
                }
            }
            _ => panic!("{got:?}"),
        }
        assert_eq!(
            ring.write_seq()
                .load(ringwire_core::sync::Ordering::Relaxed),
            2
        );
    });
    assert!(
        DELIVERED_FIRST.load(Relaxed) > 0,
        "ticket 1 was never delivered"
    );
    assert!(
        DROPPED_FIRST.load(Relaxed) > 0,
        "ticket 1 was never overwritten"
    );
    assert!(
        HELD_THEN_LOST.load(Relaxed) > 0,
        "the consumer never held ticket 1 when its slot was overwritten"
    );
}

/// A consumer giving back the ticket it holds (`give_back`, what a consumer dropped before
/// its ticket was published does) while a competing consumer claims, and the producers of
/// both drawn tickets publish them. Tickets 1 and 2 were drawn by paused producers and the
/// first consumer holds ticket 1. Whatever the order: the give-back succeeds only when the
/// other consumer has not taken ticket 2, in which case ticket 1 goes to whoever claims next;
/// when it fails the first consumer still holds ticket 1 and receives it. Each ticket is
/// received once, untorn, and nothing is counted lost. A model run must reach both the
/// given-back and the kept ticket.
#[test]
fn lossy_give_back_racing_a_competing_claim() {
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
    // Across executions (not part of the model): which outcomes the model reached.
    static GIVEN_BACK: AtomicU32 = AtomicU32::new(0);
    static KEPT: AtomicU32 = AtomicU32::new(0);
    model(|| {
        use ringwire_core::sync::Ordering;
        let ring = lossy_ring(2);
        // Two producers drew tickets 1 and 2 and have not written them yet.
        ring.claim_seq().store(3, Ordering::Relaxed);
        let mut first = LossyMpmcConsumer::new(ring.clone()).unwrap();
        let mut b = [0u8; 16];
        assert_eq!(first.try_recv(&mut b), None);
        assert_eq!(first.pending(), Some(1));
        let writers = {
            let ring = ring.clone();
            thread::spawn(move || {
                for t in [1u64, 2] {
                    ring.write_slot(t, &item(t * 10));
                    ring.write_seq().fetch_max(t, Ordering::Release);
                }
            })
        };
        let other = {
            let ring = ring.clone();
            thread::spawn(move || {
                let mut c = LossyMpmcConsumer::new(ring).unwrap();
                let mut b = [0u8; 16];
                let got = c.try_recv(&mut b).map(|t| (t, value(&b)));
                (c, got)
            })
        };
        let given = first.give_back();
        assert_eq!(first.pending(), (!given).then_some(1));
        writers.join().unwrap();
        let (mut other, early) = other.join().unwrap();
        let mut got: Vec<(u64, u64)> = early.into_iter().collect();
        for c in [&mut first, &mut other] {
            while let Some(t) = c.try_recv(&mut b) {
                got.push((t, value(&b)));
            }
        }
        got.sort();
        assert_eq!(got, [(1, 10), (2, 20)]);
        assert_eq!(first.dropped() + other.dropped(), 0);
        assert_eq!((first.pending(), other.pending()), (None, None));
        if given {
            GIVEN_BACK.fetch_add(1, Relaxed);
        } else {
            KEPT.fetch_add(1, Relaxed);
        }
    });
    assert!(
        GIVEN_BACK.load(Relaxed) > 0,
        "ticket 1 was never given back"
    );
    assert!(KEPT.load(Relaxed) > 0, "ticket 1 was always given back");
}

/// Healing a lossy ring's slot left mid-write by a dead producer (ticket 1 of a 2-slot
/// ring) while the next lap's producer (ticket 3) waits on that slot and takes it over once
/// its clock passes the deadline (the slow path; under loom the clock is read on every
/// spin), a consumer holds the dead ticket and another waits for ticket 3. Whatever the
/// order: ticket 1's torn payload is never delivered (it stays pending, or reads as
/// overwritten once ticket 3 took the slot); ticket 3 is published if the producer saw the
/// heal before its deadline (dropped if it saw only the marker) and then delivered untorn
/// with its value; and the slot ends healed or holding 3.
#[test]
fn lossy_heal_of_a_mid_write_slot_racing_its_next_laps_takeover() {
    use ringwire_core::sync::Ordering::Relaxed;
    use std::sync::atomic::AtomicU32;
    // Across executions (not part of the model): which outcomes the model reached.
    static TAKEN_OVER: AtomicU32 = AtomicU32::new(0);
    static GAVE_UP: AtomicU32 = AtomicU32::new(0);
    model(|| {
        let ring = lossy_ring(2);
        // The dead producer's ticket 1: drawn, slot marked mid-write, never published.
        ring.claim_seq().fetch_add(1, Relaxed);
        ring.slot_seq(1).store(u64::MAX, Relaxed);
        // Ticket 2, published in slot 0 before the race.
        let p = LossyMpmcProducer::new(ring.clone()).unwrap();
        assert!(matches!(
            p.push(&item(20), || unreachable!("slot 0 is fresh")),
            LossyPush::Published { seq: 2, .. }
        ));
        // One consumer draws ticket 1, another takes 2 and will draw 3.
        let mut b = [0u8; 16];
        let mut c1 = LossyMpmcConsumer::new(ring.clone()).unwrap();
        assert_eq!(c1.try_recv(&mut b), None);
        assert_eq!(c1.pending(), Some(1));
        let mut c3 = LossyMpmcConsumer::new(ring.clone()).unwrap();
        assert_eq!(c3.try_recv(&mut b), Some(2));
        assert_eq!(value(&b), 20);

        let healer = {
            let p = LossyMpmcProducer::new(ring.clone()).unwrap();
            thread::spawn(move || p.heal_mid_write_slot(1))
        };
        let producer = {
            let p = LossyMpmcProducer::new(ring.clone()).unwrap();
            thread::spawn(move || {
                // The first read sets the deadline; the second is past it.
                let mut t = 0;
                p.push(&item(30), move || {
                    t += ringwire_core::queue::compat::TAKEOVER_NS;
                    t
                })
            })
        };
        // Both consumers poll while the heal and the takeover run.
        let mut got = Vec::new();
        for c in [&mut c1, &mut c3] {
            if let Some(seq) = c.try_recv(&mut b) {
                got.push((seq, value(&b)));
            }
        }
        assert_eq!(healer.join().unwrap(), Ok(()));
        let out = producer.join().unwrap();
        for c in [&mut c1, &mut c3] {
            if let Some(seq) = c.try_recv(&mut b) {
                got.push((seq, value(&b)));
            }
        }
        assert!(got.iter().all(|&(s, _)| s != 1), "{got:?}");
        // Ticket 1 was counted lost once by the end (its slot took ticket 3, or ticket 3
        // was claimed: a ring's worth past it), and never delivered.
        assert_eq!(c1.dropped() + c3.dropped(), 1);
        let word = ring.slot_seq(1).load(Relaxed);
        match out {
            LossyPush::Published { seq: 3, .. } => {
                assert_eq!(got, [(3, 30)]);
                assert_eq!(word, 3);
                TAKEN_OVER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            LossyPush::Dropped { seq: 3 } => {
                assert_eq!(got, []);
                assert_eq!(word, 0);
                GAVE_UP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            other => panic!("{other:?}"),
        }
    });
    assert!(
        TAKEN_OVER.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "the heal never let the next lap take the slot over"
    );
    assert!(
        GAVE_UP.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "the next lap never met the marker past its deadline"
    );
}
