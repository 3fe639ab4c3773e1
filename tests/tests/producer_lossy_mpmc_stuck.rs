//! What `MpmcProducer::push` does with a slot whose writer died (spec §8.1), as its doc now
//! says: a slot whose writer took its ticket and never started writing is taken over after
//! 10 ms; a slot left mid-write (word stuck at the write marker) is never taken over, and
//! every later lap onto it waits the 10 ms and drops its message. (The doc used to say such
//! a slot is taken over.)

use std::time::{Duration, Instant};

use ringwire::MpmcProducer;
use ringwire::core::layout::SLOT_WRITING;
use ringwire::core::sync::Ordering;
use ringwire::lossy_mpmc::LossyPush;
use ringwire_tests::shm::{ShmPath, view};

const CAP: u64 = 4;

/// Pushes `v`, returning the outcome and how long the push took.
fn timed(p: &MpmcProducer<u64>, v: u64) -> (LossyPush, Duration) {
    let t0 = Instant::now();
    let out = p.push_outcome(&v);
    (out, t0.elapsed())
}

fn published(out: LossyPush) -> u64 {
    match out {
        LossyPush::Published { seq, .. } => seq,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_slot_left_mid_write_drops_every_later_lap_and_a_claimed_one_is_taken_over() {
    let path = ShmPath::new("lossy-stuck");
    let p = MpmcProducer::<u64>::create(&path, CAP).unwrap();
    let v = view(p.file());
    assert_eq!(published(p.push_outcome(&1)), 1);
    // A producer takes ticket 2, owns its slot and dies while copying.
    assert_eq!(v.claim_seq().fetch_add(1, Ordering::SeqCst), 2);
    v.slot_seq(2).store(SLOT_WRITING, Ordering::SeqCst);
    // A producer takes ticket 3 and dies before touching its slot.
    assert_eq!(v.claim_seq().fetch_add(1, Ordering::SeqCst), 3);
    for t in 4..=5 {
        assert_eq!(published(p.push_outcome(&t)), t);
    }
    // Ticket 6 lands on the mid-write slot: 10 ms, then dropped, slot still stuck.
    let (out, took) = timed(&p, 6);
    assert_eq!(out, LossyPush::Dropped { seq: 6 });
    assert!(took >= Duration::from_millis(10), "{took:?}");
    assert_eq!(v.slot_seq(2).load(Ordering::SeqCst), SLOT_WRITING);
    // Ticket 7 lands on the slot whose lap 3 was never written: taken over after 10 ms.
    let (out, took) = timed(&p, 7);
    assert_eq!(published(out), 7);
    assert!(took >= Duration::from_millis(10), "{took:?}");
    assert_eq!(v.slot_seq(7).load(Ordering::SeqCst), 7);
    for t in 8..=9 {
        assert_eq!(published(p.push_outcome(&t)), t);
    }
    // The next lap onto the stuck slot is dropped again: it is never healed.
    let (out, took) = timed(&p, 10);
    assert_eq!(out, LossyPush::Dropped { seq: 10 });
    assert!(took >= Duration::from_millis(10), "{took:?}");
    assert_eq!(v.slot_seq(10).load(Ordering::SeqCst), SLOT_WRITING);
}
