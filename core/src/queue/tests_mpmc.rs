//! Unit tests of the Vyukov MPMC queue and its stuck-slot heal, in heap buffers.

use std::vec;
use std::vec::Vec;

use super::mpmc::{CLAIMED, HEALED, WRITING};
use super::*;
use crate::region::Region;
use crate::sync::Ordering;
use crate::testutil::{Word, words};

const N: u64 = if cfg!(miri) { 40 } else { 5_000 };

fn mpmc(cap: u64, item: usize) -> (Vec<Word>, MpmcQueue) {
    let g = QueueGeometry::cache_lines(QueueKind::Mpmc, cap, item).unwrap();
    let mut buf = words(g.total_len().unwrap() as usize / 8);
    // SAFETY: the buffer is returned with the queue and outlives its use in each test.
    let r = unsafe { Region::from_raw_parts(buf.as_mut_ptr().cast(), buf.len() * 8) }.unwrap();
    // SAFETY: the test's own buffer, no other view of it exists yet.
    let v = unsafe { QueueView::init(r, &g) }.unwrap();
    let q = MpmcQueue::new(v).unwrap();
    (buf, q)
}

fn stuck(pos: u64, kind: StuckKind) -> StuckSlot {
    StuckSlot { pos, kind }
}

fn pop_u64(q: &MpmcQueue) -> Result<(u64, u64), PopError> {
    let mut b = [0u8; 8];
    match q.try_pop(&mut b)? {
        Popped::Item { pos } => Ok((pos, u64::from_le_bytes(b))),
        Popped::Healed { pos } => Ok((pos, u64::MAX)),
    }
}

#[test]
fn fifo_full_empty_and_length_checks() {
    let (_b, q) = mpmc(4, 8);
    assert_eq!(pop_u64(&q), Err(PopError::Empty));
    for i in 0..4u64 {
        assert_eq!(q.try_push(&(i * 10).to_le_bytes()), Ok(i));
    }
    assert_eq!(q.try_push(&[0u8; 8]), Err(PushError::Full));
    assert_eq!(
        q.try_push(&[0u8; 7]),
        Err(PushError::WrongLength {
            index: 0,
            len: 7,
            expected: 8
        })
    );
    let mut small = [0u8; 7];
    assert_eq!(
        q.try_pop(&mut small),
        Err(PopError::BufferTooSmall { len: 7, need: 8 })
    );
    assert_eq!(q.len(), 4);
    for i in 0..4u64 {
        assert_eq!(pop_u64(&q), Ok((i, i * 10)));
    }
    assert_eq!(pop_u64(&q), Err(PopError::Empty));
    // Next lap reuses the slots.
    for i in 4..8u64 {
        assert_eq!(q.try_push(&i.to_le_bytes()), Ok(i));
    }
    assert_eq!(pop_u64(&q), Ok((4, 4)));
    assert_eq!(q.view().slot_word(0).load(Ordering::Relaxed), 4 + 4);
    // A buffer longer than the item gets the item's bytes; the rest stays as it was.
    let mut big = [0xEEu8; 12];
    assert_eq!(q.try_pop(&mut big), Ok(Popped::Item { pos: 5 }));
    assert_eq!(big[..8], 5u64.to_le_bytes());
    assert_eq!(big[8..], [0xEE; 4]);
}

/// `try_pop_fixed` (the typed handles' pop): only a buffer of exactly the item size pops;
/// a shorter or longer one is refused and leaves the item where it is. Healed positions
/// and empty, pending and corrupt slots are reported as `try_pop` reports them.
#[test]
fn try_pop_fixed_pops_only_into_an_item_sized_buffer() {
    let (_b, q) = mpmc(4, 16);
    let mut out = [0u8; 24];
    assert_eq!(q.try_pop_fixed(&mut out[..16]), Err(PopError::Empty));
    q.try_push(&[7u8; 16]).unwrap();
    for len in [0, 8, 15, 17, 24] {
        assert_eq!(
            q.try_pop_fixed(&mut out[..len]),
            Err(PopError::LengthMismatch { len, expected: 16 }),
            "a {len}-byte buffer"
        );
    }
    assert_eq!(out, [0u8; 24], "a refused pop copies nothing");
    assert_eq!(q.len(), 1);
    assert_eq!(q.try_pop_fixed(&mut out[..16]), Ok(Popped::Item { pos: 0 }));
    assert_eq!(out[..16], [7u8; 16]);
    assert_eq!(out[16..], [0u8; 8], "nothing past the item is written");
    // A claim whose producer died: pending, then healed and passed.
    let dead = q.claim().unwrap();
    q.try_push(&[9u8; 16]).unwrap();
    assert_eq!(
        q.try_pop_fixed(&mut out[..16]),
        Err(PopError::Pending { pos: dead })
    );
    assert_eq!(q.heal_stuck_slot(stuck(dead, StuckKind::Claimed)), Ok(()));
    out = [0xAA; 24];
    assert_eq!(
        q.try_pop_fixed(&mut out[..16]),
        Ok(Popped::Healed { pos: dead })
    );
    assert_eq!(out, [0xAA; 24], "a healed pop leaves the buffer alone");
    assert_eq!(q.try_pop_fixed(&mut out[..16]), Ok(Popped::Item { pos: 2 }));
    assert_eq!(out[..16], [9u8; 16]);
    // A stamp no protocol step writes is reported, and the slot left alone.
    q.try_push(&[1u8; 16]).unwrap();
    let word = q.view().slot_word(3).load(Ordering::Relaxed);
    q.view().slot_word(3).store(word + 8, Ordering::Relaxed);
    assert_eq!(
        q.try_pop_fixed(&mut out[..16]),
        Err(PopError::Corrupt {
            pos: 3,
            word: word + 8
        })
    );
}

#[test]
fn attach_refuses_an_mpmc_header_with_one_slot() {
    let (mut b, _q) = mpmc(2, 8);
    b[2] = Word(1); // capacity
    b[3] = Word(0); // mask
    // SAFETY: the buffer outlives the region.
    let r = unsafe { Region::from_raw_parts(b.as_mut_ptr().cast(), b.len() * 8) }.unwrap();
    assert_eq!(
        QueueView::attach(r, QueueExpect::raw(QueueKind::Mpmc)).unwrap_err(),
        QueueAttachError::BadCapacity {
            capacity: 1,
            mask: 0
        }
    );
}

#[test]
fn wrong_kind_is_refused() {
    let g = QueueGeometry::new(QueueKind::Spsc, 4, 8, 16).unwrap();
    let mut buf = words(56);
    // SAFETY: the buffer outlives the region.
    let r = unsafe { Region::from_raw_parts(buf.as_mut_ptr().cast(), 448) }.unwrap();
    // SAFETY: the test's own buffer, no other view of it exists yet.
    let v = unsafe { QueueView::init(r, &g) }.unwrap();
    assert_eq!(
        MpmcQueue::new(v).unwrap_err(),
        QueueAttachError::WrongKind {
            expected: QueueKind::Mpmc,
            found: QueueKind::Spsc
        }
    );
}

#[test]
fn stuck_slot_found_healed_and_late_producer_detected() {
    let (_b, q) = mpmc(4, 8);
    q.try_push(&1u64.to_le_bytes()).unwrap();
    // A producer claims position 1 and "dies" before writing.
    let dead = q.claim().unwrap();
    assert_eq!(dead, 1);
    q.try_push(&3u64.to_le_bytes()).unwrap();
    assert_eq!(pop_u64(&q), Ok((0, 1)));
    // Consumers now wait on the stuck position.
    assert_eq!(pop_u64(&q), Err(PopError::Pending { pos: 1 }));
    assert_eq!(q.next_stuck_slot(0), Some(stuck(1, StuckKind::Claimed)));
    assert_eq!(q.next_stuck_slot(2), None);
    assert_eq!(
        q.heal_stuck_slot(stuck(2, StuckKind::Claimed)),
        Err(HealError::NotStuck { pos: 2, stamp: 3 })
    );
    assert_eq!(
        q.heal_stuck_slot(stuck(3, StuckKind::Claimed)),
        Err(HealError::NotClaimed { pos: 3, enqueue: 3 })
    );
    assert_eq!(q.heal_stuck_slot(stuck(1, StuckKind::Claimed)), Ok(()));
    assert_eq!(q.next_stuck_slot(0), None);
    // Healing twice is refused.
    assert_eq!(
        q.heal_stuck_slot(stuck(1, StuckKind::Claimed)),
        Err(HealError::NotStuck {
            pos: 1,
            stamp: 2 | HEALED
        })
    );
    // The "dead" producer was alive after all: it is told, and writes nothing.
    assert_eq!(
        q.write_claimed(dead, &9u64.to_le_bytes()),
        Err(PushError::Healed { pos: 1 })
    );
    let mut b = [0xAAu8; 8];
    assert_eq!(q.try_pop(&mut b), Ok(Popped::Healed { pos: 1 }));
    assert_eq!(b, [0xAA; 8], "a healed pop leaves the buffer alone");
    assert_eq!(pop_u64(&q), Ok((2, 3)));
    assert_eq!(pop_u64(&q), Err(PopError::Empty));
    // The healed slot is reusable on the next lap.
    for i in 3..7u64 {
        q.try_push(&i.to_le_bytes()).unwrap();
    }
    for i in 3..7u64 {
        assert_eq!(pop_u64(&q), Ok((i, i)));
    }
}

/// A producer that claimed a position and then will not write it (an error between
/// `claim` and `write_claimed`) gives it back: consumers pass it instead of waiting at it
/// for good, a late `write_claimed` for it writes nothing, and the slot serves the next lap.
#[test]
fn an_abandoned_claim_is_passed_by_consumers_and_never_written() {
    let (_b, q) = mpmc(4, 8);
    let given_up = q.claim().unwrap();
    let kept = q.claim().unwrap();
    q.write_claimed(kept, &7u64.to_le_bytes()).unwrap();
    // Consumers wait at the claim: without a heal they would wait for good.
    assert_eq!(pop_u64(&q), Err(PopError::Pending { pos: given_up }));
    // Only an unwritten claim is given back: not the published one, nor one never made.
    assert_eq!(
        q.abandon_claim(kept),
        Err(HealError::NotStuck {
            pos: kept,
            stamp: kept + 1
        })
    );
    assert_eq!(
        q.abandon_claim(2),
        Err(HealError::NotClaimed { pos: 2, enqueue: 2 })
    );
    assert_eq!(q.abandon_claim(given_up), Ok(()));
    assert_eq!(q.next_stuck_slot(0), None);
    // Once is enough; a second call changes nothing.
    assert!(matches!(
        q.abandon_claim(given_up),
        Err(HealError::NotStuck { pos: 0, .. })
    ));
    // A write for it after all (another thread's, say) writes nothing.
    assert_eq!(
        q.write_claimed(given_up, &9u64.to_le_bytes()),
        Err(PushError::Healed { pos: given_up })
    );
    assert_eq!(pop_u64(&q), Ok((given_up, u64::MAX)));
    assert_eq!(pop_u64(&q), Ok((kept, 7)));
    assert_eq!(pop_u64(&q), Err(PopError::Empty));
    // Both slots serve the next lap.
    for i in 2..6u64 {
        assert_eq!(q.try_push(&i.to_le_bytes()), Ok(i));
    }
    for i in 2..6u64 {
        assert_eq!(pop_u64(&q), Ok((i, i)));
    }
}

#[test]
fn mid_write_heal_makes_the_publish_fail() {
    let (_b, q) = mpmc(2, 8);
    let pos = q.claim().unwrap();
    // Simulate a producer that began its copy (what write_claimed's first CAS does).
    let slot = q.view().slot_word(pos);
    slot.store(pos | WRITING, Ordering::Relaxed);
    assert_eq!(pop_u64(&q), Err(PopError::Pending { pos }));
    assert_eq!(q.next_stuck_slot(0), Some(stuck(pos, StuckKind::MidWrite)));
    assert_eq!(q.heal_stuck_slot(stuck(pos, StuckKind::MidWrite)), Ok(()));
    // Its publish CAS (WRITING -> pos + 1) now fails.
    assert!(
        slot.compare_exchange(pos | WRITING, pos + 1, Ordering::Release, Ordering::Relaxed)
            .is_err()
    );
    assert_eq!(pop_u64(&q), Ok((pos, u64::MAX)));
    q.try_push(&5u64.to_le_bytes()).unwrap();
    assert_eq!(pop_u64(&q), Ok((1, 5)));
}

#[test]
fn write_claimed_rejects_an_unclaimed_position() {
    let (_b, q) = mpmc(2, 8);
    // Position 5 lives in slot 1, which still waits for position 1.
    assert_eq!(
        q.write_claimed(5, &[0u8; 8]),
        Err(PushError::NotClaimed { pos: 5, stamp: 1 })
    );
    assert_eq!(pop_u64(&q), Err(PopError::Empty));
}

/// A second write_claimed for a published position writes nothing and says so, where it
/// said Healed (no heal had happened). Once the item is popped, the slot cannot tell the
/// two apart: that call still reads as Healed (documented).
#[test]
fn write_claimed_twice_is_already_published_not_healed() {
    let (_b, q) = mpmc(2, 8);
    let pos = q.claim().unwrap();
    q.write_claimed(pos, &7u64.to_le_bytes()).unwrap();
    assert_eq!(
        q.write_claimed(pos, &8u64.to_le_bytes()),
        Err(PushError::AlreadyPublished { pos })
    );
    assert_eq!(pop_u64(&q), Ok((pos, 7)));
    assert_eq!(pop_u64(&q), Err(PopError::Empty));
    // Popped: the slot holds the next lap's free stamp, as after a heal and a pop.
    assert_eq!(
        q.write_claimed(pos, &8u64.to_le_bytes()),
        Err(PushError::Healed { pos })
    );
    assert_eq!(pop_u64(&q), Err(PopError::Empty));
    // A position try_push published is refused the same way.
    let p = q.try_push(&9u64.to_le_bytes()).unwrap();
    assert_eq!(
        q.write_claimed(p, &1u64.to_le_bytes()),
        Err(PushError::AlreadyPublished { pos: p })
    );
    assert_eq!(pop_u64(&q), Ok((p, 9)));
}

#[test]
fn healed_and_consumed_claim_is_still_reported_as_healed() {
    let (_b, q) = mpmc(2, 8);
    let pos = q.claim().unwrap();
    assert_eq!(q.heal_stuck_slot(stuck(pos, StuckKind::Claimed)), Ok(()));
    assert_eq!(pop_u64(&q), Ok((0, u64::MAX)));
    // The slot has moved on to position 2; the late producer learns it was healed.
    assert_eq!(
        q.write_claimed(pos, &[0u8; 8]),
        Err(PushError::Healed { pos: 0 })
    );
    assert_eq!(pop_u64(&q), Err(PopError::Empty));
}

#[test]
fn claim_marks_the_slot_and_the_cursors_are_exact() {
    let (_b, q) = mpmc(4, 8);
    let pos = q.claim().unwrap();
    assert_eq!(
        q.view().slot_word(pos).load(Ordering::Relaxed),
        pos | CLAIMED
    );
    assert_eq!(q.view().enq().load(Ordering::Relaxed), 1);
    assert_eq!(q.len(), 1);
    assert_eq!(pop_u64(&q), Err(PopError::Pending { pos }));
    q.write_claimed(pos, &7u64.to_le_bytes()).unwrap();
    assert_eq!(pop_u64(&q), Ok((0, 7)));
    assert!(q.is_empty());
    // Across laps the cursors name the positions exactly, and Full is exact.
    for i in 1..9u64 {
        assert_eq!(q.try_push(&i.to_le_bytes()), Ok(i));
        assert_eq!(pop_u64(&q), Ok((i, i)));
    }
    for i in 9..13u64 {
        q.try_push(&i.to_le_bytes()).unwrap();
    }
    assert_eq!(q.len(), 4);
    assert!(!q.has_space());
    assert_eq!(q.try_push(&[0u8; 8]), Err(PushError::Full));
    assert_eq!(pop_u64(&q), Ok((9, 9)));
    assert!(q.has_space());
}

#[test]
fn a_slot_claimed_by_a_try_push_is_found_stuck_and_healed() {
    // The state a try_push is in between its cursor CAS and its publish (or that a producer
    // killed there leaves): the cursor is past the position and the stamp still says `pos`.
    // Consumers read it as empty; the stuck scan finds it.
    let (_b, q) = mpmc(4, 8);
    q.view().enq().store(1, Ordering::Relaxed);
    assert_eq!(pop_u64(&q), Err(PopError::Empty));
    assert_eq!(q.next_stuck_slot(0), Some(stuck(0, StuckKind::MidWrite)));
    assert_eq!(
        q.heal_stuck_slot(stuck(1, StuckKind::MidWrite)),
        Err(HealError::NotClaimed { pos: 1, enqueue: 1 })
    );
    assert_eq!(q.heal_stuck_slot(stuck(0, StuckKind::MidWrite)), Ok(()));
    assert_eq!(q.next_stuck_slot(0), None);
    assert_eq!(q.try_pop(&mut [0u8; 8]), Ok(Popped::Healed { pos: 0 }));
    assert_eq!(q.try_push(&5u64.to_le_bytes()), Ok(1));
    assert_eq!(pop_u64(&q), Ok((1, 5)));
}

#[test]
fn a_cursor_behind_the_stamps_is_corrupt_not_a_hang() {
    // A cursor moved back by a corrupt file: the producer finds a stamp ahead of a cursor
    // that never passed it.
    let (_b, q) = mpmc(4, 8);
    for i in 0..6u64 {
        q.try_push(&i.to_le_bytes()).unwrap();
        assert_eq!(pop_u64(&q), Ok((i, i)));
    }
    q.view().enq().store(0, Ordering::Relaxed);
    assert_eq!(
        q.try_push(&[0u8; 8]),
        Err(PushError::Corrupt { pos: 0, word: 8 })
    );
}

/// The at-rest check on a queue whose dequeue cursor something else keeps rewriting (a
/// process that ignores the std layer's locks, a device): it scans the lap of the cursors
/// it validated. It loaded the dequeue cursor again for the scan, and a value near
/// `u64::MAX` stored in between overflowed `dequeue + capacity` (a panic in this debug
/// build; in release an empty scan that passed the queue unchecked).
#[test]
fn the_at_rest_check_scans_the_cursors_it_checked_while_they_are_rewritten() {
    use std::sync::atomic::{AtomicBool, Ordering as O};
    let (_b, q) = mpmc(4, 8);
    let stop = AtomicBool::new(false);
    let rounds = if cfg!(miri) { 200 } else { 200_000 };
    std::thread::scope(|s| {
        s.spawn(|| {
            // Bounded: the main thread sets `stop` after its rounds (or its panic unwinds
            // through the scope, which sets it too).
            while !stop.load(O::Relaxed) {
                q.view().deq().store(u64::MAX - 1, Ordering::Relaxed);
                q.view().deq().store(0, Ordering::Relaxed);
            }
        });
        struct Stop<'a>(&'a AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, O::Relaxed);
            }
        }
        let _stop = Stop(&stop);
        let t0 = std::time::Instant::now();
        let mut passed = 0u32;
        for _ in 0..rounds {
            passed += u32::from(q.check_stamps_at_rest().is_ok());
            if t0.elapsed() > std::time::Duration::from_secs(3) {
                break;
            }
        }
        // Some readings saw both cursors at 0, a sound empty queue.
        assert!(passed > 0);
    });
}

#[test]
fn corrupt_stamps_give_errors_not_hangs() {
    let (_b, q) = mpmc(4, 8);
    q.view().slot_word(0).store(77, Ordering::Relaxed);
    assert_eq!(q.claim(), Err(PushError::Corrupt { pos: 0, word: 77 }));
    assert_eq!(pop_u64(&q), Err(PopError::Corrupt { pos: 0, word: 77 }));
}

#[test]
fn two_producers_two_consumers_exactly_once() {
    let (_b, q) = mpmc(4, 8);
    let got: Vec<Vec<u64>> = std::thread::scope(|s| {
        for p in 0..2u64 {
            s.spawn(move || {
                let mut i = 0;
                while i < N {
                    let v = (p << 32) | i;
                    match q.try_push(&v.to_le_bytes()) {
                        Ok(_) => i += 1,
                        Err(PushError::Full) => std::thread::yield_now(),
                        Err(e) => panic!("push: {e}"),
                    }
                }
            });
        }
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(move || {
                    let mut out = Vec::new();
                    let mut b = [0u8; 8];
                    // Stop once both producers' items are all accounted for globally.
                    while q.view().deq().load(Ordering::Relaxed) < 2 * N {
                        match q.try_pop(&mut b) {
                            Ok(Popped::Item { .. }) => out.push(u64::from_le_bytes(b)),
                            Ok(Popped::Healed { pos }) => panic!("healed {pos}"),
                            Err(PopError::Empty | PopError::Pending { .. }) => {
                                std::thread::yield_now()
                            }
                            Err(e) => panic!("pop: {e}"),
                        }
                    }
                    out
                })
            })
            .collect();
        consumers.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut seen = vec![vec![false; N as usize]; 2];
    for c in &got {
        // Global FIFO: each consumer sees each producer's items in increasing order.
        let mut last = [None::<u64>; 2];
        for &v in c {
            let (p, i) = ((v >> 32) as usize, v & 0xFFFF_FFFF);
            assert!(last[p].is_none_or(|l| l < i), "order broken at {v:#x}");
            last[p] = Some(i);
            assert!(!seen[p][i as usize], "duplicate {v:#x}");
            seen[p][i as usize] = true;
        }
    }
    assert!(seen.iter().flatten().all(|&b| b), "an item was lost");
}

/// The state a consumer killed inside `try_pop` leaves, between its CAS of the dequeue
/// cursor (past `pos`) and its store freeing the slot: the stamp stays `pos + 1`.
fn kill_consumer_mid_pop(q: &MpmcQueue, pos: u64) {
    assert_eq!(
        q.view()
            .deq()
            .compare_exchange(pos, pos + 1, Ordering::Relaxed, Ordering::Relaxed),
        Ok(pos)
    );
}

#[test]
fn a_consumer_killed_mid_pop_wedges_the_queue_until_healed() {
    let (_b, q) = mpmc(4, 8);
    assert_eq!(q.try_push(&100u64.to_le_bytes()), Ok(0));
    kill_consumer_mid_pop(&q, 0);
    for i in 1..4u64 {
        assert_eq!(q.try_push(&(100 + i).to_le_bytes()), Ok(i));
        assert_eq!(pop_u64(&q), Ok((i, 100 + i)));
    }
    // Position 4 waits for slot 0, which the dead consumer never freed.
    assert_eq!(q.len(), 0);
    assert_eq!(q.try_push(&[0u8; 8]), Err(PushError::Full));
    assert!(!q.has_space());
    assert_eq!(pop_u64(&q), Err(PopError::Empty));
    assert_eq!(q.next_stuck_slot(0), Some(stuck(0, StuckKind::MidPop)));
    assert_eq!(q.next_stuck_slot(1), None);
    assert_eq!(
        q.heal_stuck_slot(stuck(4, StuckKind::MidWrite)),
        Err(HealError::NotClaimed { pos: 4, enqueue: 4 })
    );
    assert_eq!(
        q.heal_stuck_slot(stuck(3, StuckKind::MidPop)),
        Err(HealError::NotStuck { pos: 3, stamp: 7 })
    );
    assert_eq!(q.heal_stuck_slot(stuck(0, StuckKind::MidPop)), Ok(()));
    assert_eq!(
        q.heal_stuck_slot(stuck(0, StuckKind::MidPop)),
        Err(HealError::NotStuck { pos: 0, stamp: 4 })
    );
    assert_eq!(q.next_stuck_slot(0), None);
    assert!(q.has_space());
    // Usable again, through slot 0's next lap and beyond.
    for i in 4..10u64 {
        assert_eq!(q.try_push(&i.to_le_bytes()), Ok(i));
        assert_eq!(pop_u64(&q), Ok((i, i)));
    }
}

#[test]
fn healing_a_consumer_killed_mid_pop_keeps_the_rest_in_order() {
    let (_b, q) = mpmc(4, 8);
    for i in 0..4u64 {
        assert_eq!(q.try_push(&(10 + i).to_le_bytes()), Ok(i));
    }
    assert_eq!(pop_u64(&q), Ok((0, 10)));
    kill_consumer_mid_pop(&q, 1);
    assert_eq!(q.try_push(&14u64.to_le_bytes()), Ok(4));
    assert_eq!(q.try_push(&[0u8; 8]), Err(PushError::Full));
    // Positions 2 and 3 are published and waiting: not stuck.
    assert_eq!(
        q.heal_stuck_slot(stuck(2, StuckKind::MidPop)),
        Err(HealError::NotStuck { pos: 2, stamp: 3 })
    );
    assert_eq!(q.next_stuck_slot(0), Some(stuck(1, StuckKind::MidPop)));
    assert_eq!(q.heal_stuck_slot(stuck(1, StuckKind::MidPop)), Ok(()));
    // Item 11 was lost with its consumer; the rest come out in order, then the new one.
    assert_eq!(q.try_push(&15u64.to_le_bytes()), Ok(5));
    for i in 2..6u64 {
        assert_eq!(pop_u64(&q), Ok((i, 10 + i)));
    }
    assert_eq!(pop_u64(&q), Err(PopError::Empty));
}

#[test]
fn a_consumer_killed_passing_a_healed_position_is_healed_too() {
    let (_b, q) = mpmc(2, 8);
    assert_eq!(q.claim(), Ok(0));
    assert_eq!(q.heal_stuck_slot(stuck(0, StuckKind::Claimed)), Ok(()));
    // A consumer takes the healed position and dies before freeing the slot.
    kill_consumer_mid_pop(&q, 0);
    assert_eq!(q.try_push(&1u64.to_le_bytes()), Ok(1));
    assert_eq!(q.try_push(&[0u8; 8]), Err(PushError::Full));
    assert_eq!(q.next_stuck_slot(0), Some(stuck(0, StuckKind::MidPop)));
    assert_eq!(q.heal_stuck_slot(stuck(0, StuckKind::MidPop)), Ok(()));
    assert_eq!(q.try_push(&2u64.to_le_bytes()), Ok(2));
    assert_eq!(pop_u64(&q), Ok((1, 1)));
    assert_eq!(pop_u64(&q), Ok((2, 2)));
}

#[test]
fn heal_refuses_positions_with_flag_bits() {
    // `pos | CLAIMED` names the same slot as `pos`, and its stamp `pos | CLAIMED` matched the
    // claimed stamp of `pos`: a heal wrote `(pos | CLAIMED) + 1 | HEALED`, a stamp nobody
    // accepts, and the queue was broken for good.
    let (_b, q) = mpmc(4, 8);
    assert_eq!(q.claim(), Ok(0));
    for bad in [CLAIMED, WRITING, HEALED, CLAIMED | 4, u64::MAX] {
        assert_eq!(
            q.heal_stuck_slot(stuck(bad, StuckKind::Claimed)),
            Err(HealError::BadPosition { pos: bad })
        );
    }
    assert_eq!(q.view().slot_word(0).load(Ordering::Relaxed), CLAIMED);
    q.write_claimed(0, &7u64.to_le_bytes()).unwrap();
    assert_eq!(pop_u64(&q), Ok((0, 7)));
    // A producer mid-copy in write_claimed (stamp `pos | WRITING`), likewise.
    assert_eq!(q.claim(), Ok(1));
    q.view().slot_word(1).store(1 | WRITING, Ordering::Relaxed);
    assert_eq!(
        q.heal_stuck_slot(stuck(1 | WRITING, StuckKind::MidWrite)),
        Err(HealError::BadPosition { pos: 1 | WRITING })
    );
    assert_eq!(q.view().slot_word(1).load(Ordering::Relaxed), 1 | WRITING);
    assert!(
        HealError::BadPosition { pos: CLAIMED }
            .to_string()
            .contains("2^61")
    );
}

#[test]
fn heal_refuses_a_claimed_stamp_outside_the_cursors() {
    // Stamps no protocol step leaves (a corrupt file): a claimed stamp at or past the
    // enqueue cursor, or below the dequeue cursor.
    let (_b, q) = mpmc(4, 8);
    q.view().slot_word(0).store(CLAIMED, Ordering::Relaxed);
    assert_eq!(
        q.heal_stuck_slot(stuck(0, StuckKind::Claimed)),
        Err(HealError::NotClaimed { pos: 0, enqueue: 0 })
    );
    q.view().slot_word(1).store(1 | WRITING, Ordering::Relaxed);
    q.view().enq().store(2, Ordering::Relaxed);
    q.view().deq().store(2, Ordering::Relaxed);
    assert_eq!(
        q.heal_stuck_slot(stuck(1, StuckKind::MidWrite)),
        Err(HealError::NotStuck {
            pos: 1,
            stamp: 1 | WRITING
        })
    );
    assert_eq!(q.view().slot_word(0).load(Ordering::Relaxed), CLAIMED);
    assert_eq!(q.view().slot_word(1).load(Ordering::Relaxed), 1 | WRITING);
}

#[test]
fn a_late_try_push_publish_after_a_heal_is_recovered_by_healing_again() {
    // A try_push wrongly healed mid-copy publishes after a consumer passed its position and
    // the next lap's producer published into the same slot (module docs): that item is
    // erased, and the queue reads empty while len() is 1, until the scan-and-heal.
    let (_b, q) = mpmc(2, 8);
    q.view().enq().store(1, Ordering::Relaxed); // try_push claimed position 0
    assert_eq!(q.heal_stuck_slot(stuck(0, StuckKind::MidWrite)), Ok(()));
    assert_eq!(q.try_pop(&mut [0u8; 8]), Ok(Popped::Healed { pos: 0 }));
    assert_eq!(q.try_push(&1u64.to_le_bytes()), Ok(1));
    assert_eq!(q.try_push(&2u64.to_le_bytes()), Ok(2));
    q.view().slot_word(0).store(1, Ordering::Release); // the late publish of position 0
    assert_eq!(pop_u64(&q), Ok((1, 1)));
    assert_eq!(pop_u64(&q), Err(PopError::Empty));
    assert_eq!(q.len(), 1);
    // Recoverable (below), so neither check refuses it.
    assert_eq!(q.check_cursors(), Ok(()));
    assert_eq!(q.check_stamps_at_rest(), Ok(()));
    assert_eq!(q.next_stuck_slot(0), Some(stuck(0, StuckKind::MidPop)));
    assert_eq!(q.heal_stuck_slot(stuck(0, StuckKind::MidPop)), Ok(()));
    assert_eq!(q.next_stuck_slot(0), Some(stuck(2, StuckKind::MidWrite)));
    assert_eq!(q.heal_stuck_slot(stuck(2, StuckKind::MidWrite)), Ok(()));
    assert_eq!(q.try_pop(&mut [0u8; 8]), Ok(Popped::Healed { pos: 2 }));
    assert_eq!(q.try_push(&3u64.to_le_bytes()), Ok(3));
    assert_eq!(pop_u64(&q), Ok((3, 3)));
}

#[test]
fn a_live_consumer_healed_mid_pop_erases_the_next_lap_with_its_late_free() {
    // The module docs' case of a wrong MidPop heal: the consumer's late store freeing the
    // slot lands on the next lap's published item.
    let (_b, q) = mpmc(2, 8);
    assert_eq!(q.try_push(&1u64.to_le_bytes()), Ok(0));
    kill_consumer_mid_pop(&q, 0); // in fact alive, copying
    assert_eq!(q.heal_stuck_slot(stuck(0, StuckKind::MidPop)), Ok(()));
    assert_eq!(q.try_push(&2u64.to_le_bytes()), Ok(1));
    assert_eq!(q.try_push(&3u64.to_le_bytes()), Ok(2));
    q.view().slot_word(0).store(2, Ordering::Release); // its late free
    assert_eq!(pop_u64(&q), Ok((1, 2)));
    assert_eq!(pop_u64(&q), Err(PopError::Empty));
    assert_eq!(q.len(), 1);
    assert_eq!(q.check_cursors(), Ok(()));
    assert_eq!(q.check_stamps_at_rest(), Ok(()));
    assert_eq!(q.next_stuck_slot(0), Some(stuck(2, StuckKind::MidWrite)));
    assert_eq!(q.heal_stuck_slot(stuck(2, StuckKind::MidWrite)), Ok(()));
    assert_eq!(q.try_pop(&mut [0u8; 8]), Ok(Popped::Healed { pos: 2 }));
}

#[test]
fn a_mistaken_mid_pop_heal_can_wedge_the_queue_for_good_and_is_not_healed_again() {
    // The module docs' case: a live consumer healed as MidPop frees its slot late, after the
    // next lap's item in that slot was popped and freed too; the stamp goes back two laps.
    let (_b, q) = mpmc(2, 8);
    assert_eq!(q.try_push(&1u64.to_le_bytes()), Ok(0));
    kill_consumer_mid_pop(&q, 0); // in fact alive, copying
    assert_eq!(q.heal_stuck_slot(stuck(0, StuckKind::MidPop)), Ok(()));
    assert_eq!(q.try_push(&2u64.to_le_bytes()), Ok(1));
    assert_eq!(q.try_push(&3u64.to_le_bytes()), Ok(2));
    assert_eq!(pop_u64(&q), Ok((1, 2)));
    assert_eq!(pop_u64(&q), Ok((2, 3)));
    q.view().slot_word(0).store(2, Ordering::Release); // its late free
    assert_eq!(q.try_push(&4u64.to_le_bytes()), Ok(3));
    // Slot 0 reads as position 2 unpublished; the push of position 4 finds it full.
    assert_eq!(
        q.try_push(&5u64.to_le_bytes()),
        Err(PushError::Full),
        "the wedge"
    );
    assert_eq!(pop_u64(&q), Ok((3, 4)));
    assert_eq!(q.len(), 0);
    assert_eq!(q.next_stuck_slot(0), None);
    // A stamp one lap behind a slot consumers passed twice: no consumer holds it.
    q.view().slot_word(0).store(1, Ordering::Release);
    assert!(matches!(
        q.heal_stuck_slot(stuck(0, StuckKind::MidPop)),
        Err(HealError::NotStuck { pos: 0, .. })
    ));
    assert_eq!(q.view().slot_word(0).load(Ordering::Relaxed), 1);
}

#[test]
fn heal_refuses_a_position_whose_holder_moved_on() {
    // The scan reported position 0 claimed; its producer (alive after all) then published,
    // and a live consumer took the item. Healing by position alone would free the slot under
    // that consumer: the kind the caller confirmed no longer holds.
    let (_b, q) = mpmc(2, 8);
    assert_eq!(q.claim(), Ok(0));
    let reported = q.next_stuck_slot(0).unwrap();
    assert_eq!(reported, stuck(0, StuckKind::Claimed));
    q.write_claimed(0, &5u64.to_le_bytes()).unwrap();
    kill_consumer_mid_pop(&q, 0); // a consumer mid-copy
    assert_eq!(
        q.heal_stuck_slot(reported),
        Err(HealError::KindChanged {
            pos: 0,
            expected: StuckKind::Claimed,
            found: StuckKind::MidPop
        })
    );
    assert_eq!(q.view().slot_word(0).load(Ordering::Relaxed), 1);
    // A claimed position whose producer began its copy: alive, likewise.
    assert_eq!(q.claim(), Ok(1));
    let reported = q.next_stuck_slot(1).unwrap();
    q.view().slot_word(1).store(1 | WRITING, Ordering::Relaxed);
    assert_eq!(
        q.heal_stuck_slot(reported),
        Err(HealError::KindChanged {
            pos: 1,
            expected: StuckKind::Claimed,
            found: StuckKind::MidWrite
        })
    );
    assert_eq!(q.view().slot_word(1).load(Ordering::Relaxed), 1 | WRITING);
}

/// A 4-slot queue holding items at positions 0 and 1 (stamps 1, 2, 2, 3), with the
/// cursors then set to `enq` and `deq` (a corrupt file), and a fresh attach of it.
fn two_items_then_cursors(
    enq: u64,
    deq: u64,
) -> (Vec<Word>, MpmcQueue, Result<(), QueueAttachError>) {
    let (mut b, q) = mpmc(4, 8);
    assert_eq!(q.try_push(&10u64.to_le_bytes()), Ok(0));
    assert_eq!(q.try_push(&11u64.to_le_bytes()), Ok(1));
    q.view().deq().store(deq, Ordering::Relaxed);
    q.view().enq().store(enq, Ordering::Relaxed);
    // SAFETY: the buffer outlives the region, and every access to it is atomic.
    let r = unsafe { Region::from_raw_parts(b.as_mut_ptr().cast(), b.len() * 8) }.unwrap();
    let attached = QueueView::attach(r, QueueExpect::raw(QueueKind::Mpmc)).map(|_| ());
    (b, q, attached)
}

#[test]
fn attach_refuses_a_dequeue_cursor_past_the_enqueue_cursor() {
    let (_b, q, attached) = two_items_then_cursors(2, 10);
    let e = QueueAttachError::BadCursors {
        enqueue: 2,
        dequeue: 10,
        capacity: 4,
    };
    assert_eq!(attached, Err(e));
    assert_eq!(
        std::format!("{e}"),
        "corrupt queue cursors: enqueue 2, dequeue 10 (capacity 4); a queue needs \
         dequeue <= enqueue <= dequeue + capacity, both below 2^61"
    );
    assert_eq!(q.check_cursors(), Err(e));
    // A handle attached before the damage: the push lands at position 2, which consumers
    // at 10 never reach; the pop says so instead of reporting empty for ever.
    assert_eq!(q.try_push(&12u64.to_le_bytes()), Ok(2));
    assert_eq!(pop_u64(&q), Err(PopError::Corrupt { pos: 10, word: 3 }));
}

#[test]
fn cursors_ahead_of_their_slots_are_refused_and_corrupt_not_full_and_empty() {
    // The header page written back after a crash, the slot pages not: the cursors name
    // positions 100 and 102, the slots still hold the laps of positions 0 to 3.
    let (_b, q, attached) = two_items_then_cursors(102, 100);
    assert_eq!(
        attached,
        Err(QueueAttachError::StampOffLap {
            pos: 102,
            stamp: 2,
            enqueue: 102,
            dequeue: 100
        })
    );
    assert_eq!(q.next_stuck_slot(0), None);
    // A handle attached before: errors, not a queue full and empty for good.
    assert_eq!(
        q.try_push(&[0u8; 8]),
        Err(PushError::Corrupt { pos: 102, word: 2 })
    );
    assert_eq!(q.claim(), Err(PushError::Corrupt { pos: 102, word: 2 }));
    assert_eq!(pop_u64(&q), Err(PopError::Corrupt { pos: 100, word: 1 }));
    assert!(q.check_stamps_at_rest().is_err());
}

#[test]
fn attach_refuses_an_enqueue_cursor_laps_ahead_of_the_dequeue_cursor() {
    let (_b, q, attached) = two_items_then_cursors(1000, 0);
    assert_eq!(
        attached,
        Err(QueueAttachError::BadCursors {
            enqueue: 1000,
            dequeue: 0,
            capacity: 4
        })
    );
    assert_eq!(
        q.try_push(&[0u8; 8]),
        Err(PushError::Corrupt { pos: 1000, word: 1 })
    );
}

#[test]
fn attach_refuses_a_cursor_in_the_flag_bits() {
    let (_b, q, attached) = two_items_then_cursors((1 << 61) + 2, 0);
    assert_eq!(
        attached,
        Err(QueueAttachError::BadCursors {
            enqueue: (1 << 61) + 2,
            dequeue: 0,
            capacity: 4
        })
    );
    assert_eq!(
        q.try_push(&[0u8; 8]),
        Err(PushError::Corrupt {
            pos: (1 << 61) + 2,
            word: 2
        })
    );
    let (_b, _q, attached) = two_items_then_cursors((1 << 61) + 2, 1 << 61);
    assert!(matches!(attached, Err(QueueAttachError::BadCursors { .. })));
}

#[test]
fn sound_states_pass_the_cursor_and_at_rest_checks() {
    let (_b, q) = mpmc(4, 8);
    let check = |q: &MpmcQueue| {
        assert_eq!(q.check_cursors(), Ok(()));
        assert_eq!(q.check_stamps_at_rest(), Ok(()));
    };
    check(&q);
    // Full, over several laps, each fill level.
    for lap in 0..3u64 {
        for i in 0..4 {
            assert_eq!(q.try_push(&[0u8; 8]), Ok(lap * 4 + i));
            check(&q);
        }
        assert_eq!(q.try_push(&[0u8; 8]), Err(PushError::Full));
        for i in 0..4 {
            assert_eq!(pop_u64(&q).map(|p| p.0), Ok(lap * 4 + i));
            check(&q);
        }
        assert_eq!(pop_u64(&q), Err(PopError::Empty));
    }
    // Dead holders: a claim, a try_push that claimed (the stamp left at its position), a
    // consumer that took position 12 and one that passed a healed position.
    assert_eq!(q.claim(), Ok(12));
    q.view().enq().store(14, Ordering::Relaxed); // try_push claimed 13
    check(&q);
    assert_eq!(q.heal_stuck_slot(stuck(12, StuckKind::Claimed)), Ok(()));
    kill_consumer_mid_pop(&q, 12);
    check(&q);
    assert_eq!(q.try_push(&[0u8; 8]), Ok(14));
    assert_eq!(q.try_push(&[0u8; 8]), Ok(15));
    // Slot 0 is still taken by the consumer of 12: position 16 finds it full, soundly.
    assert_eq!(q.try_push(&[0u8; 8]), Err(PushError::Full));
    check(&q);
    // The dead consumer's slot healed.
    assert_eq!(q.heal_stuck_slot(stuck(12, StuckKind::MidPop)), Ok(()));
    check(&q);
}

#[test]
fn a_stamp_put_back_two_laps_fails_the_at_rest_check() {
    // The module docs' wedge for good (see the test above of that name): the scan finds
    // nothing, and the at-rest check names the slot.
    let (_b, q) = mpmc(2, 8);
    for v in 0..4u64 {
        assert_eq!(q.try_push(&v.to_le_bytes()), Ok(v));
        assert_eq!(pop_u64(&q), Ok((v, v)));
    }
    q.view().slot_word(0).store(2, Ordering::Release);
    let off = Err(QueueAttachError::StampOffLap {
        pos: 4,
        stamp: 2,
        enqueue: 4,
        dequeue: 4,
    });
    assert_eq!(q.check_stamps_at_rest(), off);
    // The slot is the one at the dequeue cursor: any attach sees it, and a pop says so.
    assert_eq!(q.check_cursors(), off);
    assert_eq!(pop_u64(&q), Err(PopError::Corrupt { pos: 4, word: 2 }));
    // One slot further on, only the at-rest check sees it.
    q.view().slot_word(0).store(4, Ordering::Release);
    q.view().slot_word(1).store(3, Ordering::Release);
    assert_eq!(q.check_cursors(), Ok(()));
    assert_eq!(
        q.check_stamps_at_rest(),
        Err(QueueAttachError::StampOffLap {
            pos: 5,
            stamp: 3,
            enqueue: 4,
            dequeue: 4
        })
    );
}
