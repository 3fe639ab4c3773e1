//! What `MpmcProducer::push` does with a slot whose writer died (spec §8.1), as its doc now
//! says: a slot whose writer took its ticket and never started writing is taken over after
//! 10 ms; a slot left mid-write (word stuck at the write marker) is never taken over, and
//! every later lap onto it waits the 10 ms and drops its message, until a process that knows
//! the writer dead heals it. (The doc used to say such a slot is taken over.)

use std::time::{Duration, Instant};

use ringwire::cli::stat_json;
use ringwire::core::layout::SLOT_WRITING;
use ringwire::core::sync::Ordering;
use ringwire::lossy_mpmc::LossyHealError;
use ringwire::lossy_mpmc::LossyPush;
use ringwire::{MpmcProducer, MpmcQueueConsumer};
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

/// Everything `c` can take now, as (ticket, value).
fn drain(c: &mut MpmcQueueConsumer<u64>) -> Vec<(u64, u64)> {
    std::iter::from_fn(|| c.try_recv_seq()).collect()
}

#[test]
fn a_healed_mid_write_slot_is_taken_over_once_then_serves_ringwire_and_ringfire_producers() {
    let path = ShmPath::new("lossy-heal");
    let p = MpmcProducer::<u64>::create(&path, CAP).unwrap();
    let mut c = MpmcQueueConsumer::<u64>::attach(&path).unwrap();
    let v = view(p.file());
    assert_eq!(published(p.push_outcome(&1)), 1);
    assert_eq!(drain(&mut c), [(1, 1)]);
    // A producer takes ticket 2, owns its slot, copies part of its record and dies.
    assert_eq!(v.claim_seq().fetch_add(1, Ordering::SeqCst), 2);
    v.slot_seq(2).store(SLOT_WRITING, Ordering::SeqCst);
    v.write_slot_at(2, 8, &0xdead_u64.to_le_bytes());
    v.slot_seq(2).store(SLOT_WRITING, Ordering::SeqCst);
    assert_eq!(stat_json(path.path()).unwrap()["mid_write_slots"], 1);

    // The supervisor that reaped it finds the slot and heals it.
    assert_eq!(p.next_mid_write_slot(0), Some(2));
    assert_eq!(p.next_mid_write_slot(3), None);
    assert_eq!(p.heal_mid_write_slot(2), Ok(()));
    assert_eq!(stat_json(path.path()).unwrap()["mid_write_slots"], 0);
    assert_eq!(
        p.heal_mid_write_slot(2),
        Err(LossyHealError::NotMidWrite { index: 2, seq: 0 })
    );
    assert_eq!(
        p.heal_mid_write_slot(CAP),
        Err(LossyHealError::BadIndex {
            index: CAP,
            capacity: CAP
        })
    );

    for t in 3..=5 {
        assert_eq!(published(p.push_outcome(&t)), t);
    }
    // The consumer drew ticket 2 and waits on it: the torn record is not delivered.
    assert_eq!(drain(&mut c), []);
    // Ticket 6 lands on the healed slot: taken over after the 10 ms stall, published.
    let (out, took) = timed(&p, 6);
    assert_eq!(published(out), 6);
    assert!(took >= Duration::from_millis(10), "{took:?}");
    assert_eq!(drain(&mut c), [(3, 3), (4, 4), (5, 5), (6, 6)]);
    assert_eq!(c.dropped_count(), 1, "ticket 2 counted lost");

    // Two more laps, by ringwire's producer and then ringfire's: the slot takes every
    // ticket at once, none dropped.
    for t in 7..=10 {
        assert_eq!(published(p.push_outcome(&t)), t);
    }
    assert_eq!(drain(&mut c), (7..=10).map(|t| (t, t)).collect::<Vec<_>>());
    let rf = ringfire::MpmcProducer::<u64>::attach(&path).unwrap();
    for t in 11..=14 {
        // ringfire's push returns the ticket whatever became of it: its slot tells.
        assert_eq!(rf.push(&t), t);
        assert_eq!(v.slot_seq(t).load(Ordering::SeqCst), t);
    }
    assert_eq!(drain(&mut c), (11..=14).map(|t| (t, t)).collect::<Vec<_>>());
    assert_eq!(c.dropped_count(), 1);
}
