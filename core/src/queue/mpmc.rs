//! Bounded MPMC queue with global FIFO (Vyukov): every slot carries a sequence stamp. A
//! push fails when the queue is full; nothing is ever overwritten.
//!
//! Stamp of the slot holding position `pos` (positions count from 0 and must stay below
//! 2^61, which at a billion items a second takes 73 years):
//!
//! | stamp | meaning |
//! |---|---|
//! | `pos` | free for the producer of `pos` |
//! | `pos \| CLAIMED` | claimed with [`MpmcQueue::claim`], copy not begun |
//! | `pos \| WRITING` | its producer is copying the item |
//! | `pos + 1` | published, ready for the consumer of `pos` |
//! | `(pos + 1) \| HEALED` | healed: the consumer of `pos` skips it |
//! | `pos + capacity` | consumed; free for the producer of the next lap |
//!
//! # Producers claim on the slot
//!
//! A producer is elected by a CAS on the slot's stamp (`pos` → `pos | WRITING`), not on the
//! enqueue cursor: the winner owns the slot from that instant, so no separate "begin copy"
//! step is needed, and a push costs two RMWs on the slot's own line (claim, publish) and
//! none on a line shared by all producers. The enqueue cursor is only a hint of where to
//! start: the winner raises it with a plain store, and a producer that finds a slot taken
//! moves on to the next position (the winner raises it after its publish, so the hint's
//! cache miss is not inside the window in which consumers wait for the item). Claims stay
//! dense (a position is claimed only after every
//! earlier one, since a producer never passes a free slot and the hint never runs ahead of
//! the claims), so "the queue is full" is still exact: the first unclaimed position's slot
//! still holds the previous lap. A hint left behind by a producer that stalled for a lap is
//! caught up from the dequeue cursor (exact: consumers are elected by a CAS on it).
//!
//! # Stuck slots and healing: the caller contract
//!
//! A producer that dies between claiming a position and publishing it leaves a *stuck*
//! slot: consumers wait on it forever (global FIFO). [`MpmcQueue::next_stuck_slot`] finds a
//! claimed, unpublished position; [`MpmcQueue::heal_stuck_slot`] marks it as a skipped item so
//! consumers pass it. A live producer is also "stuck" for the few nanoseconds of its copy,
//! so before healing the caller MUST establish that the slot's producer is dead: typically
//! it knows a producer process died (its pid is gone, its lock was released) and sees the
//! same position reported stuck, with the same stamp, before and after a grace period far
//! longer than one push.
//!
//! What happens when the caller is wrong and the producer was alive:
//! * healed after [`MpmcQueue::claim`] and before [`MpmcQueue::write_claimed`] began
//!   (stamp `pos | CLAIMED`): always safe. Its begin CAS fails, it writes nothing and gets
//!   [`PushError::Healed`].
//! * healed while it was copying (stamp `pos | WRITING`; [`MpmcQueue::try_push`] is in this
//!   state from its claim on, since it claims and begins in one CAS): its publish CAS fails
//!   and it gets [`PushError::Healed`], so the item is never delivered twice or
//!   half-written; but its remaining payload stores may land in the slot after the next
//!   lap's producer took it and corrupt that item. This is why death must be confirmed.
//!
//! Detecting a late producer costs a CAS to publish where classic Vyukov does a plain
//! release store; it is on the slot's line, which the producer owns at that moment anyway.
//!
//! # Transient states are reported at once
//!
//! A push that finds the previous lap's consumer still copying out reports
//! [`PushError::Full`], and a pop that finds the producer still copying in reports
//! [`PopError::Pending`], without re-checking; waiting is the caller's choice. Re-checking
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
    /// Its producer was copying the item.
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

    /// Elects this producer for the next free position by a CAS of its stamp from `pos` to
    /// `pos | flag`, and returns the position.
    #[inline(always)]
    fn claim_slot(&self, flag: u64) -> Result<u64, PushError> {
        // Relaxed: a hint of where to start; the stamps decide (module docs).
        let mut pos = self.q.enq().load(Ordering::Relaxed);
        loop {
            let slot = self.q.slot_word(pos);
            // Acquire: pairs with the release store of the consumer that freed the slot (its
            // reads happen before our writes), and makes that consumer's dequeue CAS visible
            // to the lap-ahead check below.
            let stamp = slot.load(Ordering::Acquire);
            if stamp == pos {
                // Acquire on success: as for the load above, and our payload stores stay after
                // the claim. Relaxed on failure: the loop loads the stamp again.
                if slot
                    .compare_exchange_weak(pos, pos | flag, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    // The hint is raised by the caller once the item is published: the
                    // window in which consumers wait on this slot stays the copy alone.
                    return Ok(pos);
                }
                continue;
            }
            let base = stamp & !FLAGS;
            if base < pos {
                // The first unclaimed position still holds the previous lap: full.
                return Err(PushError::Full);
            }
            // Relaxed: a hint, as above.
            let hint = self.q.enq().load(Ordering::Relaxed);
            if base > pos.wrapping_add(1) {
                // The slot is a lap (or more) ahead: `pos` was consumed, so the dequeue
                // cursor is past it (the acquire above saw the consumer's release store,
                // which follows its dequeue CAS). Our hint was stale; restart from there.
                // Relaxed: ordered by the acquire load of the stamp.
                let deq = self.q.deq().load(Ordering::Relaxed);
                if deq <= pos {
                    // A stamp ahead of an unconsumed position: no protocol step writes that.
                    return Err(PushError::Corrupt { pos, word: stamp });
                }
                pos = deq.max(hint);
            } else {
                // Claimed, being written, published or healed at this lap: another
                // producer has `pos`. Follow the hint if it moved past it, else step.
                pos = if hint > pos {
                    hint
                } else {
                    pos.wrapping_add(1)
                };
            }
        }
    }

    /// Raises the enqueue hint to `to` unless it is already there or past it.
    #[inline(always)]
    fn raise_enq_hint(&self, to: u64) {
        let enq = self.q.enq();
        // Relaxed (both): a hint for other producers' starting point; a store that loses a
        // race and moves it back only costs them a few steps (see claim_slot).
        if enq.load(Ordering::Relaxed) < to {
            enq.store(to, Ordering::Relaxed);
        }
    }

    /// Claims the next position for an item, or fails with [`PushError::Full`]. The caller
    /// must then call [`MpmcQueue::write_claimed`] for it; until then consumers wait on it.
    /// [`MpmcQueue::try_push`] does both in one step and one RMW fewer.
    #[inline]
    pub fn claim(&self) -> Result<u64, PushError> {
        let pos = self.claim_slot(CLAIMED)?;
        self.raise_enq_hint(pos.wrapping_add(1));
        Ok(pos)
    }

    /// Copies `item` into the position `pos`, which this producer owns in state
    /// `pos | WRITING`, and publishes it.
    #[inline(always)]
    fn write_and_publish(&self, pos: u64, item: &[u8]) -> Result<(), PushError> {
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
        self.write_and_publish(pos, item)
    }

    /// Pushes one item (exactly [`MpmcQueue::item_size`] bytes) and returns its position:
    /// one CAS claims the slot and begins the copy, one CAS publishes it.
    #[inline]
    pub fn try_push(&self, item: &[u8]) -> Result<u64, PushError> {
        if item.len() != self.item_size() {
            return Err(PushError::WrongLength {
                len: item.len(),
                expected: self.q.geometry().item_size,
            });
        }
        let pos = self.claim_slot(WRITING)?;
        let r = self.write_and_publish(pos, item);
        self.raise_enq_hint(pos.wrapping_add(1));
        r.map(|()| pos)
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
                    Err(now) => pos = now,
                }
            } else if stamp & !FLAGS <= pos {
                // Not published yet: claimed (pending), or free or still a previous lap
                // whose consumer is finishing (empty).
                return Err(if stamp & !FLAGS == pos && stamp != pos {
                    PopError::Pending { pos }
                } else {
                    PopError::Empty
                });
            } else {
                // Another consumer took `pos`; follow the cursor.
                spin_hint();
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

    /// True when a push would probably not report full: the slot at the enqueue hint, or at
    /// one of the few positions after it that other producers have taken, is free. For
    /// waiting loops; a snapshot.
    pub fn has_space(&self) -> bool {
        // Relaxed: a snapshot of the hint, as in has_item.
        let mut pos = self.q.enq().load(Ordering::Relaxed);
        for _ in 0..8 {
            // Acquire: as in claim.
            let stamp = self.q.slot_word(pos).load(Ordering::Acquire);
            let base = stamp & !FLAGS;
            if stamp == pos || base > pos.wrapping_add(1) {
                // Free, or a lap ahead (a stale hint): let the caller try.
                return true;
            }
            if base < pos {
                return false;
            }
            pos = pos.wrapping_add(1);
        }
        true
    }

    /// Items claimed and not yet popped (a snapshot from the enqueue hint, which may lag the
    /// claims by the pushes in flight; includes unpublished positions).
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
    /// claimed by a producer but not published: stamp `pos | CLAIMED` or `pos | WRITING`.
    /// Scans at most one lap, and stops at the first unclaimed position (claims are dense).
    /// See the module docs for what the caller must establish before healing it.
    pub fn next_stuck_slot(&self, from: u64) -> Option<u64> {
        // Acquire: every stamp we then read is at least as new as this cursor's lap.
        let deq = self.q.deq().load(Ordering::Acquire);
        let start = from.max(deq);
        let end = deq.saturating_add(self.q.capacity());
        for pos in start..end {
            // Acquire: keeps the scan ordered after the cursor load.
            let stamp = self.q.slot_word(pos).load(Ordering::Acquire);
            if stamp == pos | CLAIMED || stamp == pos | WRITING {
                return Some(pos);
            }
            if stamp & !FLAGS <= pos {
                // Unclaimed (free, or the previous lap): nothing claimed lies beyond.
                return None;
            }
        }
        None
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
                // Relaxed: informational (the hint of the next position to claim).
                let enqueue = self.q.enq().load(Ordering::Relaxed);
                return Err(HealError::NotClaimed { pos, enqueue });
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
