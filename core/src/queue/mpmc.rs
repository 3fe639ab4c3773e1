//! Bounded MPMC queue with global FIFO (Vyukov): every slot carries a sequence stamp. A
//! push fails when the queue is full; nothing is ever overwritten.
//!
//! Stamp of the slot holding position `pos` (positions count from 0 and must stay below
//! 2^61, which at a billion items a second takes 73 years):
//!
//! | stamp | meaning |
//! |---|---|
//! | `pos` | free for the producer of `pos` while the enqueue cursor is at or below `pos`; claimed by it (and being copied) once the cursor is past `pos` |
//! | `pos \| CLAIMED` | claimed with [`MpmcQueue::claim`], copy not begun |
//! | `pos \| WRITING` | its producer is copying the item ([`MpmcQueue::write_claimed`]) |
//! | `pos + 1` | published, ready for the consumer of `pos` |
//! | `(pos + 1) \| HEALED` | healed: the consumer of `pos` skips it |
//! | `pos + capacity` | consumed; free for the producer of the next lap |
//!
//! # Election on the cursors
//!
//! Producers are elected by a CAS on the enqueue cursor and consumers by a CAS on the
//! dequeue cursor, each only after seeing its slot ready (classic Vyukov), so both cursors
//! are exact: every position below the enqueue cursor was claimed, and "the queue is full"
//! is "the slot at the enqueue cursor still holds the previous lap". [`MpmcQueue::try_push`]
//! costs one RMW (the cursor CAS) and publishes with a release store, as does a pop. A CAS
//! lost to another thread of the same side is followed by a short exponential spin (1 to 64
//! hints) before the retry, so the cursor lines do not bounce between cores on every attempt.
//!
//! Two earlier designs were measured slower on the 2-producer/2-consumer bench
//! (`tests/benches/queues.rs`, `mpmc_2p2c`, two threads per core) and replaced:
//! * producers elected by a CAS on the slot's stamp, the cursor only a hint: producers
//!   running at the same time tried the same slot and bounced its line;
//! * a CAS, not a store, to publish (so that a producer healed by mistake would learn it):
//!   a locked RMW on the line the consumers poll tipped the bench into its slow state (the
//!   queue near empty, consumers polling the producers' lines), 2.5 to 5 times slower than
//!   the store. [`MpmcQueue::write_claimed`] keeps the CAS: the split API is the heal-safe one.
//!
//! # Stuck slots and healing: the caller contract
//!
//! A producer that dies between claiming a position and publishing it leaves a *stuck*
//! slot: consumers wait on it forever (global FIFO). [`MpmcQueue::next_stuck_slot`] finds a
//! claimed, unpublished position (below the enqueue cursor, stamp `pos`, `pos | CLAIMED` or
//! `pos | WRITING`); [`MpmcQueue::heal_stuck_slot`] marks it as a skipped item so consumers
//! pass it. A live producer is also "stuck" for the few nanoseconds of its copy, so before
//! healing the caller MUST establish that the slot's producer is dead: typically it knows a
//! producer process died (its pid is gone, its lock was released) and sees the same
//! position reported stuck, with the same stamp, before and after a grace period far
//! longer than one push.
//!
//! What happens when the caller is wrong and the producer was alive:
//! * healed after [`MpmcQueue::claim`] and before [`MpmcQueue::write_claimed`] began
//!   (stamp `pos | CLAIMED`): always safe. Its begin CAS fails, it writes nothing and gets
//!   [`PushError::Healed`].
//! * healed during [`MpmcQueue::write_claimed`] (stamp `pos | WRITING`): its publish CAS
//!   fails and it gets [`PushError::Healed`], so the item is never delivered twice or
//!   half-written; but its remaining payload stores may land in the slot after the next
//!   lap's producer took it and corrupt that item.
//! * healed during [`MpmcQueue::try_push`] (stamp `pos` below the cursor: it copies from its
//!   claim on and publishes with a plain store): it cannot learn it was healed. Its late
//!   payload stores may corrupt the next lap's item as above, and its publishing store
//!   overwrites the healed stamp: before a consumer passed the position, the item is simply
//!   delivered; after, the slot's stamp goes back a lap and pushes find the queue full
//!   at that slot until the queue is recreated.
//!
//! So death must be confirmed. Where it cannot be confirmed reliably, pushing with
//! [`MpmcQueue::claim`] and [`MpmcQueue::write_claimed`] (one RMW more) narrows what a
//! mistaken heal can do to the first two cases.
//!
//! # Transient states are reported at once
//!
//! A push that finds the previous lap's consumer still copying out reports
//! [`PushError::Full`], and a pop that finds the producer still copying in reports
//! [`PopError::Pending`] (a position taken with [`MpmcQueue::claim`]) or [`PopError::Empty`]
//! (a [`MpmcQueue::try_push`] in flight), without re-checking; waiting is the caller's choice. Re-checking
//! inside the queue (up to 64 spin hints before answering) was measured slower on the
//! 2-producer/2-consumer bench with two threads per core (`tests/benches/queues.rs`,
//! `mpmc_2p2c/ringwire`: median 77 ns against 39 ns): the thread being waited for is
//! usually descheduled on the waiter's own core, and spinning only delays the waiter's yield.

use super::error::{HealError, PopError, PushError, QueueAttachError};
use super::layout::QueueKind;
use super::view::QueueView;
use crate::sync::{Ordering, spin_hint};

/// Stamp flag: this position was claimed with [`MpmcQueue::claim`]; its copy has not begun.
pub const CLAIMED: u64 = 1 << 61;
/// Stamp flag: the producer of this position is copying its item.
pub const WRITING: u64 = 1 << 62;
/// Stamp flag: this position was healed; consumers skip it.
pub const HEALED: u64 = 1 << 63;
const FLAGS: u64 = CLAIMED | WRITING | HEALED;

/// What a successful pop delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Popped {
    /// An item, copied into the buffer.
    Item {
        /// Its position.
        pos: u64,
    },
    /// A healed position was passed; its item was lost with its producer. The buffer is
    /// untouched.
    Healed {
        /// The position.
        pos: u64,
    },
}

/// Which state a healed slot was in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum HealedFrom {
    /// Claimed, copy not begun.
    Claimed,
    /// Its producer may have been copying the item: [`MpmcQueue::write_claimed`] had begun,
    /// or the position was claimed by [`MpmcQueue::try_push`], which copies from its claim on.
    MidWrite,
}

/// A Vyukov MPMC queue. Any number of handles (in any processes) may push and pop.
#[derive(Clone, Debug)]
#[cfg_attr(not(loom), derive(Copy))]
pub struct MpmcQueue {
    q: QueueView,
}

impl MpmcQueue {
    /// A handle on `q`, which must be an MPMC queue.
    pub fn new(q: QueueView) -> Result<MpmcQueue, QueueAttachError> {
        match q.geometry().kind {
            QueueKind::Mpmc => Ok(MpmcQueue { q }),
            found => Err(QueueAttachError::WrongKind {
                expected: QueueKind::Mpmc,
                found,
            }),
        }
    }

    /// The queue.
    pub fn view(&self) -> &QueueView {
        &self.q
    }

    /// Items are exactly this many bytes.
    pub fn item_size(&self) -> usize {
        self.q.geometry().item_size as usize
    }

    /// Elects this producer for the next position by a CAS of the enqueue cursor, once the
    /// position's slot is free (stamp `pos`), and returns the position. The stamp is left at
    /// `pos`: the cursor past it is the claim.
    #[inline(always)]
    fn claim_pos(&self) -> Result<u64, PushError> {
        let enq = self.q.enq();
        // Relaxed: the slot's stamp decides whether the position is free; the CAS elects.
        let mut pos = enq.load(Ordering::Relaxed);
        let mut step = 0;
        loop {
            // Acquire: pairs with the release store of the consumer that freed the slot (its
            // reads happen before our writes), and with whichever release (a publish, a
            // claim's or a heal's CAS) moved the stamp past `pos`, so the cursor load below
            // sees the claim of `pos`.
            let stamp = self.q.slot_word(pos).load(Ordering::Acquire);
            if stamp == pos {
                // Relaxed (both): election only; the acquire above ordered the consumer's
                // reads before our payload stores.
                match enq.compare_exchange_weak(
                    pos,
                    pos.wrapping_add(1),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return Ok(pos),
                    Err(now) => {
                        backoff(&mut step);
                        pos = now;
                    }
                }
                continue;
            }
            if stamp & !FLAGS < pos {
                // The slot still holds the previous lap: full (or its consumer is copying
                // out, reported the same; module docs).
                return Err(PushError::Full);
            }
            // Claimed, published, healed or consumed at this lap or later: another producer
            // took `pos` and moved the cursor on (the acquire above shows its move).
            backoff(&mut step);
            // Relaxed: as for the first load.
            let now = enq.load(Ordering::Relaxed);
            if now <= pos {
                // A stamp ahead of a cursor that did not pass it: no protocol step writes that.
                return Err(PushError::Corrupt { pos, word: stamp });
            }
            pos = now;
        }
    }

    /// Claims the next position for an item, or fails with [`PushError::Full`]. The caller
    /// must then call [`MpmcQueue::write_claimed`] for it; until then consumers wait on it.
    /// [`MpmcQueue::try_push`] does both in one step and one RMW fewer.
    #[inline]
    pub fn claim(&self) -> Result<u64, PushError> {
        let pos = self.claim_pos()?;
        // AcqRel: release, so a producer that sees this stamp also sees our cursor CAS; the
        // CAS (not a store) fails only if a healer took the slot in the meantime.
        match self.q.slot_word(pos).compare_exchange(
            pos,
            pos | CLAIMED,
            Ordering::AcqRel,
            Ordering::Relaxed,
        ) {
            Ok(_) => Ok(pos),
            Err(_) => Err(PushError::Healed { pos }),
        }
    }

    /// Copies `item` (exactly [`MpmcQueue::item_size`] bytes) into the claimed position `pos`
    /// and publishes it. Fails with [`PushError::Healed`], having written nothing after the
    /// heal, if the position was healed meanwhile (see the module docs for a heal during the
    /// copy). `pos` must come from [`MpmcQueue::claim`], once.
    #[inline]
    pub fn write_claimed(&self, pos: u64, item: &[u8]) -> Result<(), PushError> {
        if item.len() != self.item_size() {
            // Leave the claim in place; the caller may retry with a correct item.
            return Err(PushError::WrongLength {
                len: item.len(),
                expected: self.q.geometry().item_size,
            });
        }
        // Acquire: our payload stores stay after the CAS that shows the slot is still ours
        // (a healed producer must write nothing).
        if let Err(stamp) = self.q.slot_word(pos).compare_exchange(
            pos | CLAIMED,
            pos | WRITING,
            Ordering::Acquire,
            Ordering::Relaxed,
        ) {
            // Only a healer moves a claimed slot on before its producer begins: if the
            // stamp is past `pos` (healed, or healed and already consumed), we were healed.
            return Err(if stamp & !FLAGS > pos {
                PushError::Healed { pos }
            } else {
                PushError::NotClaimed { pos, stamp }
            });
        }
        self.q.write_payload(pos, item);
        // Release: a consumer that acquires `pos + 1` sees the whole item. A CAS, not a
        // store: a healer may have moved the stamp on (module docs).
        match self.q.slot_word(pos).compare_exchange(
            pos | WRITING,
            pos.wrapping_add(1),
            Ordering::Release,
            Ordering::Relaxed,
        ) {
            Ok(_) => Ok(()),
            Err(_) => Err(PushError::Healed { pos }),
        }
    }

    /// Pushes one item (exactly [`MpmcQueue::item_size`] bytes) and returns its position:
    /// one CAS of the enqueue cursor claims the position, a release store of its stamp
    /// publishes it. A producer healed by mistake cannot tell (module docs).
    #[inline]
    pub fn try_push(&self, item: &[u8]) -> Result<u64, PushError> {
        if item.len() != self.item_size() {
            return Err(PushError::WrongLength {
                len: item.len(),
                expected: self.q.geometry().item_size,
            });
        }
        let pos = self.claim_pos()?;
        self.q.write_payload(pos, item);
        // Release: a consumer that acquires `pos + 1` sees the whole item.
        self.q
            .slot_word(pos)
            .store(pos.wrapping_add(1), Ordering::Release);
        Ok(pos)
    }

    /// Pops the next item in global FIFO order into `dst` (at least
    /// [`MpmcQueue::item_size`] bytes), or passes one healed position.
    #[inline]
    pub fn try_pop(&self, dst: &mut [u8]) -> Result<Popped, PopError> {
        let need = self.item_size();
        if dst.len() < need {
            return Err(PopError::BufferTooSmall {
                len: dst.len(),
                need,
            });
        }
        let cap = self.q.capacity();
        // Relaxed: the CAS below elects us; the slot's stamp carries the synchronisation.
        let mut pos = self.q.deq().load(Ordering::Relaxed);
        let mut step = 0;
        loop {
            let slot = self.q.slot_word(pos);
            // Acquire: pairs with the producer's (or healer's) release CAS, so the item's
            // bytes are visible once we own the position.
            let stamp = slot.load(Ordering::Acquire);
            let next = pos.wrapping_add(1);
            if stamp == next || stamp == next | HEALED {
                // Relaxed: election only (see above).
                match self.q.deq().compare_exchange_weak(
                    pos,
                    next,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        let out = if stamp == next {
                            self.q.read_payload_prefix(pos, dst, need);
                            Popped::Item { pos }
                        } else {
                            Popped::Healed { pos }
                        };
                        // Release: our reads of the slot happen before the next lap's
                        // producer (which acquires this stamp) writes it.
                        slot.store(pos.wrapping_add(cap), Ordering::Release);
                        return Ok(out);
                    }
                    Err(now) => {
                        backoff(&mut step);
                        pos = now;
                    }
                }
            } else if stamp & !FLAGS <= pos {
                // Not published yet: claimed with `claim` (pending), or free or still a
                // previous lap whose consumer is finishing (empty). A try_push in flight
                // leaves the stamp at `pos` and reads as empty: telling it apart would cost
                // a load of the producers' cursor line on every empty poll.
                return Err(if stamp & !FLAGS == pos && stamp != pos {
                    PopError::Pending { pos }
                } else {
                    PopError::Empty
                });
            } else {
                // Another consumer took `pos`; back off as after a lost CAS, then follow
                // the cursor.
                backoff(&mut step);
                // Relaxed: as for the first load.
                let now = self.q.deq().load(Ordering::Relaxed);
                if now == pos {
                    // A stamp ahead of an unmoved cursor: no protocol step writes that.
                    return Err(PopError::Corrupt { pos, word: stamp });
                }
                pos = now;
            }
        }
    }

    /// True when the next position to pop is published (or healed): a pop would not report
    /// empty or pending. For waiting loops; a snapshot.
    pub fn has_item(&self) -> bool {
        // Relaxed: a snapshot; the acquire below orders what a following pop reads.
        let pos = self.q.deq().load(Ordering::Relaxed);
        // Acquire: as in try_pop.
        let stamp = self.q.slot_word(pos).load(Ordering::Acquire);
        stamp & !HEALED == pos.wrapping_add(1)
    }

    /// True when a push would probably not report full: the slot at the enqueue cursor is
    /// free, or the cursor has moved on. For waiting loops; a snapshot.
    pub fn has_space(&self) -> bool {
        // Relaxed: a snapshot, as in has_item.
        let pos = self.q.enq().load(Ordering::Relaxed);
        // Acquire: as in claim.
        let stamp = self.q.slot_word(pos).load(Ordering::Acquire);
        // Below `pos`: the previous lap is still there (full); anything else lets the caller
        // try (free, or taken by a producer that moved the cursor on).
        stamp & !FLAGS >= pos
    }

    /// Items claimed and not yet popped (a snapshot of the two cursors; includes positions
    /// whose producers are still copying).
    pub fn len(&self) -> u64 {
        // Relaxed: a diagnostic snapshot. Dequeue first, so the difference cannot go below 0
        // except by wrapping on a corrupt file, which saturates to 0.
        let deq = self.q.deq().load(Ordering::Relaxed);
        // Relaxed: as above.
        let enq = self.q.enq().load(Ordering::Relaxed);
        enq.saturating_sub(deq)
    }

    /// True when [`MpmcQueue::len`] is 0.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first position at or after `from` (and at or after the dequeue cursor) that is
    /// claimed by a producer but not published: below the enqueue cursor, with stamp `pos`,
    /// `pos | CLAIMED` or `pos | WRITING`. Scans at most one lap. See the module docs for
    /// what the caller must establish before healing it.
    pub fn next_stuck_slot(&self, from: u64) -> Option<u64> {
        // Acquire: every stamp we then read is at least as new as this cursor's lap.
        let deq = self.q.deq().load(Ordering::Acquire);
        // Acquire: as above; every position below it was claimed.
        let enq = self.q.enq().load(Ordering::Acquire);
        let start = from.max(deq);
        let end = enq.min(deq.saturating_add(self.q.capacity()));
        (start..end).find(|&pos| {
            // Acquire: keeps the scan ordered after the cursor loads.
            let stamp = self.q.slot_word(pos).load(Ordering::Acquire);
            stamp == pos || stamp == pos | CLAIMED || stamp == pos | WRITING
        })
    }

    /// Marks the claimed, unpublished position `pos` as healed so consumers skip it. The
    /// caller MUST have established that its producer is dead (module docs); a producer that
    /// turns out to be alive gets [`PushError::Healed`] from its push.
    pub fn heal_stuck_slot(&self, pos: u64) -> Result<HealedFrom, HealError> {
        let slot = self.q.slot_word(pos);
        let healed = pos.wrapping_add(1) | HEALED;
        // Relaxed: the CAS below revalidates it.
        let mut stamp = slot.load(Ordering::Relaxed);
        loop {
            let from = if stamp == pos | CLAIMED {
                HealedFrom::Claimed
            } else if stamp == pos | WRITING {
                HealedFrom::MidWrite
            } else if stamp & !FLAGS <= pos {
                // Relaxed: the cursor only grows, so a value past `pos` proves the claim
                // (the CAS below rechecks that the stamp is still unpublished).
                let enqueue = self.q.enq().load(Ordering::Relaxed);
                if stamp == pos && enqueue > pos {
                    // Claimed by a try_push, which copies from its claim on.
                    HealedFrom::MidWrite
                } else {
                    return Err(HealError::NotClaimed { pos, enqueue });
                }
            } else {
                return Err(HealError::NotStuck { pos, stamp });
            };
            // Release: pairs with the consumer's acquire of the stamp (it reads no payload
            // of a healed slot, but its reuse of the slot must follow our decision).
            match slot.compare_exchange(stamp, healed, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return Ok(from),
                Err(now) => stamp = now,
            }
        }
    }
}

/// After a CAS lost to another thread of the same side: 1, 2, 4, ... 64 spin hints before the
/// retry, so the contended cursor line is not pulled back on every attempt. One hint under
/// loom (a yield), to keep the models small.
#[inline(always)]
fn backoff(step: &mut u32) {
    #[cfg(not(loom))]
    for _ in 0..1u32 << *step {
        spin_hint();
    }
    #[cfg(loom)]
    spin_hint();
    if *step < 6 {
        *step += 1;
    }
}
