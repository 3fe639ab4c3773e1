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
//! | `pos + 1` | published, ready for the consumer of `pos` while the dequeue cursor is at or below `pos`; taken by it (and being copied out) once the cursor is past `pos` |
//! | `(pos + 1) \| HEALED` | healed: the consumer of `pos` skips it (taken, as above, once the dequeue cursor is past `pos`) |
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
//! A process that dies inside a push or a pop leaves a *stuck* slot, and a queue in a file
//! keeps it across restarts:
//! * a producer that dies between claiming a position and publishing it leaves the position
//!   unpublished (stamp `pos`, `pos | CLAIMED` or `pos | WRITING`, below the enqueue
//!   cursor): consumers wait on it forever (global FIFO);
//! * a consumer that dies between taking a position (its CAS of the dequeue cursor) and
//!   freeing the slot (its store of `pos + capacity`) leaves the stamp at `pos + 1` (or
//!   `(pos + 1) | HEALED`) below the dequeue cursor: the producer of `pos + capacity` finds
//!   the slot still holding the previous lap, and every push reports full, forever.
//!
//! [`MpmcQueue::next_stuck_slot`] finds the first stuck position and says which side holds
//! it ([`StuckKind`]); [`MpmcQueue::heal_stuck_slot`] unsticks it. A position a producer
//! holds is marked as a skipped item, which consumers pass ([`Popped::Healed`]); a slot a
//! consumer holds is freed for the next lap's producer, and the item that consumer was
//! copying out is lost with it. A live producer or consumer is also "stuck" for the few
//! nanoseconds of its copy, and the queue does not record who holds a position, so before
//! healing the caller MUST know that no live thread holds it: every producer (for
//! [`StuckKind::Claimed`] and [`StuckKind::MidWrite`]) or every consumer (for
//! [`StuckKind::MidPop`]) that may be inside a push or pop of this queue has died with its
//! process (exited or killed), or is known to be outside one (its call has returned and it
//! makes no other). A holder dies only with its process, and a process that is stopped
//! (`SIGSTOP`, a debugger, a frozen cgroup) or descheduled is alive: resumed, it goes on
//! with its push or pop. The std layer's open of a queue file with no other handle alive
//! has that proof from file locks, and heals at open. Short of such a proof, knowing that
//! a producer (consumer) process died and seeing the same position reported stuck, with the
//! same kind, before and after a grace period far longer than one push or pop makes a live
//! holder unlikely, not impossible; what a mistaken heal does is below. Two healers acting
//! on one report are safe: the second finds the position no longer held as reported and
//! changes nothing.
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
//!   overwrites whatever stamp the slot holds by then. Before a consumer took the position,
//!   the item is simply delivered. Otherwise the item is lost (its producer believes it
//!   delivered), and if the consumer had freed the slot already, the stamp goes back to
//!   `pos + 1`: pushes then find the queue full at that slot or, if the next lap's producer
//!   had published `pos + capacity`, that item is erased and consumers find the queue empty
//!   at `pos + capacity` forever while [`MpmcQueue::len`] stays above 0. The scan then
//!   reports `pos` as [`StuckKind::MidPop`]; healing it, then whatever position the scan
//!   reports next, brings the queue back (without the erased item). But if the item at
//!   `pos + capacity` was also popped and its slot freed before the late store, the stamp
//!   goes back two laps: every push then reports full at that slot, [`MpmcQueue::len`] is
//!   0, the scan finds nothing and no heal applies. Nothing short of recreating the queue
//!   brings it back.
//!
//! What happens when the caller is wrong and the consumer was alive (healed as
//! [`StuckKind::MidPop`] while it copied the item out): the slot is free at once, so the
//! next lap's producer may overwrite it during the copy and the consumer returns a mix of
//! the two items. Its own store freeing the slot comes late: if that producer has published
//! `pos + capacity` by then, the store erases that item, and consumers find the queue empty
//! at `pos + capacity` forever, while [`MpmcQueue::len`] stays above 0 (the scan then
//! reports `pos + capacity` as [`StuckKind::MidWrite`]; healing it passes the erased item).
//! If that item was also popped and its slot freed before the late store, the stamp goes
//! back two laps and the queue is wedged for good, as in the last producer case above. The
//! consumer cannot learn any of this.
//!
//! So death must be confirmed. Where a producer's death cannot be confirmed reliably,
//! pushing with [`MpmcQueue::claim`] and [`MpmcQueue::write_claimed`] (one RMW more)
//! narrows what a mistaken heal can do to the first two cases; a consumer has no such mode.
//!
//! # Corrupt files
//!
//! [`QueueView::attach`] refuses an MPMC queue whose cursors contradict each other
//! (dequeue past enqueue, more than a lap behind it, or at 2^61 or more) or whose slots at
//! the cursors hold a lap older than the cursors allow
//! ([`MpmcQueue::check_cursors`]); the std layer's opener alone on a file checks every slot
//! ([`MpmcQueue::check_stamps_at_rest`]) before healing. A handle attached before the damage
//! learns it on the paths that would report full or empty: a stamp older than the previous
//! lap at the enqueue cursor is [`PushError::Corrupt`], one older than the lap a capacity
//! below the dequeue cursor is [`PopError::Corrupt`] (once a read-modify-write of the
//! stamp, which cannot read a stale value, confirms it: the check costs nothing on a push
//! or pop that succeeds).
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
use crate::sync::Ordering;
use crate::sync::spin_hint;

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

/// Who holds a stuck position ([`MpmcQueue::next_stuck_slot`]), or held the one a heal
/// unstuck ([`MpmcQueue::heal_stuck_slot`]): whose death the caller must confirm first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum StuckKind {
    /// A producer claimed the position with [`MpmcQueue::claim`] and has not begun its copy.
    Claimed,
    /// A producer may be copying the item in: [`MpmcQueue::write_claimed`] had begun, or the
    /// position was claimed by [`MpmcQueue::try_push`], which copies from its claim on.
    MidWrite,
    /// A consumer took the position (moved the dequeue cursor past it) and has not freed its
    /// slot: it may be copying the item out. Healing frees the slot for the next lap; the
    /// item is lost with the consumer.
    MidPop,
}

impl core::fmt::Display for StuckKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            StuckKind::Claimed => "claimed by a producer",
            StuckKind::MidWrite => "being written by a producer",
            StuckKind::MidPop => "taken by a consumer",
        })
    }
}

/// A stuck position and who holds it ([`MpmcQueue::next_stuck_slot`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StuckSlot {
    /// The position.
    pub pos: u64,
    /// Who holds it.
    pub kind: StuckKind,
}

/// A Vyukov MPMC queue. Any number of handles (in any processes) may push and pop.
#[derive(Clone, Debug)]
#[cfg_attr(not(loom), derive(Copy))]
pub struct MpmcQueue {
    q: QueueView,
    yield_now: Option<fn()>,
}

impl MpmcQueue {
    /// A handle on `q`, which must be an MPMC queue.
    pub fn new(q: QueueView) -> Result<MpmcQueue, QueueAttachError> {
        match q.geometry().kind {
            QueueKind::Mpmc => Ok(MpmcQueue { q, yield_now: None }),
            found => Err(QueueAttachError::WrongKind {
                expected: QueueKind::Mpmc,
                found,
            }),
        }
    }

    /// This handle, calling `yield_now` where a push or pop would otherwise spin on: when it
    /// finds its position taken by another handle of the same side after seven backoffs in
    /// the same call (127 spin hints). std's typed handles pass `std::thread::yield_now`;
    /// firmware may pass its scheduler's yield. Without it (the default) those retries spin,
    /// as every retry does under loom.
    ///
    /// This matters when threads outnumber cores: the 2-producer, 2-consumer benchmark with
    /// two threads per core (`tests/benches/queues.rs`, `mpmc_2p2c`) ran at 32–34 ns an item
    /// without it, 15–17 ns with it. With a core per thread the yield returns at once.
    pub fn with_yield(self, yield_now: fn()) -> MpmcQueue {
        MpmcQueue {
            yield_now: Some(yield_now),
            ..self
        }
    }

    /// The queue.
    pub fn view(&self) -> &QueueView {
        &self.q
    }

    /// Items are exactly this many bytes.
    #[inline(always)]
    pub fn item_size(&self) -> usize {
        self.q.item_len()
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
                        // Spin only: the failed CAS returned a fresh cursor to retry at (a
                        // yield here too measured slower on the 2P/2C bench).
                        backoff(&mut step, None);
                        pos = now;
                    }
                }
                continue;
            }
            if stamp & !FLAGS < pos {
                // The slot still holds the previous lap: full (or its consumer is copying
                // out, reported the same; module docs). A stamp older than that lap is
                // checked out of line.
                if stamp & !FLAGS >= pos.saturating_sub(self.q.capacity()) {
                    return Err(PushError::Full);
                }
                return Err(self.full_or_corrupt(pos));
            }
            // Claimed, published, healed or consumed at this lap or later: another producer
            // took `pos` and moved the cursor on (the acquire above shows its move).
            backoff(&mut step, self.yield_now);
            // Relaxed: as for the first load.
            let now = enq.load(Ordering::Relaxed);
            if now <= pos {
                // A stamp ahead of a cursor that did not pass it: no protocol step writes that.
                return Err(PushError::Corrupt { pos, word: stamp });
            }
            pos = now;
        }
    }

    /// The error of a push whose enqueue cursor read `pos` while the slot of `pos` held a
    /// stamp older (flags masked) than `pos - capacity`, the previous lap's position:
    /// [`PushError::Corrupt`] if the stamp is still that old when read by an RMW
    /// ([`MpmcQueue::stays_behind`]), else [`PushError::Full`], as before the check (the
    /// caller retries).
    ///
    /// A sound queue never holds that state: the enqueue cursor reached `pos` only after
    /// the position `pos - capacity` was claimed, whose producer saw the slot free at that
    /// lap, and a slot's stamp only grows. A stale cursor names an earlier position, and so
    /// allows an older stamp, never a newer one. But the cursors move by relaxed CASes, so
    /// a plain load of the stamp may return a value older than the cursor implies (the
    /// memory model allows it, and Miri produces it): hence the RMW.
    #[cold]
    #[inline(never)]
    fn full_or_corrupt(&self, pos: u64) -> PushError {
        match self.stays_behind(true, pos) {
            Some(word) => PushError::Corrupt { pos, word },
            None => PushError::Full,
        }
    }

    /// The error of a pop whose dequeue cursor read `pos` while the slot of `pos` held
    /// a stamp older (flags masked) than `pos - capacity + 1`: the consumer of
    /// `pos - capacity` moved the cursor past that position only after seeing the slot at
    /// that lap's `pos - capacity + 1`, and a slot's stamp only grows.
    /// [`PopError::Corrupt`] if the stamp is still that old when read by an RMW, as in
    /// [`MpmcQueue::full_or_corrupt`], else [`PopError::Empty`].
    #[cold]
    #[inline(never)]
    fn empty_or_corrupt(&self, pos: u64) -> PopError {
        match self.stays_behind(false, pos) {
            Some(word) => PopError::Corrupt { pos, word },
            None => PopError::Empty,
        }
    }

    /// Reads the stamp of `pos` again, by a read-modify-write that adds 0 (it writes back
    /// the value it reads, which no protocol step can tell from no write: every other
    /// access to a stamp compares or overwrites its value), and returns it if it is still
    /// behind the lap the cursor named (`enqueue`: the enqueue cursor, else the dequeue
    /// cursor). An RMW reads the last value in the stamp's modification order, never a
    /// stale one, and the stamp only grows: in a sound queue it is now at least what it was
    /// when the cursor was at `pos`. `None`: a live queue, the first load was stale.
    #[cold]
    fn stays_behind(&self, enqueue: bool, pos: u64) -> Option<u64> {
        let cap = self.q.capacity();
        // Behind: older than `pos - capacity` at the enqueue cursor, than
        // `pos - capacity + 1` at the dequeue cursor.
        let lap = if enqueue { cap.saturating_add(1) } else { cap };
        // Acquire: as in claim and pop.
        let stamp = self.q.slot_word(pos).fetch_add(0, Ordering::Acquire);
        ((stamp & !FLAGS).saturating_add(lap) <= pos).then_some(stamp)
    }

    /// Checks the cursors of the queue: both below 2^61 (the stamps' flag bits), the
    /// dequeue cursor at or below the enqueue cursor and at most a lap behind it, and the
    /// slots at the two cursors holding no lap older than those cursors allow (the slot at
    /// the enqueue cursor at least the previous lap, the one at the dequeue cursor at least
    /// the lap of the position a capacity below it, taken). [`QueueView::attach`] runs it on
    /// every MPMC queue. Loads only, safe on a queue in use: the dequeue cursor is read
    /// before and after the enqueue cursor, so a queue moving meanwhile passes, and a
    /// failed check is reported only when, after a pause, it fails again with the same
    /// values. Loads only (a `stat` maps the file read-only), so unlike the full and empty
    /// paths it cannot confirm a stamp by an RMW: the cursors move by relaxed CASes, and
    /// the memory model alone would let a load of a queue in use return the same stale
    /// value twice; the pause is what lets stores in flight reach this thread (a false
    /// refusal is an error at open, which a retry clears).
    #[cold]
    pub fn check_cursors(&self) -> Result<(), QueueAttachError> {
        check_cursors(&self.q)
    }

    /// Checks every slot's stamp against the cursors of a queue AT REST: no live handle
    /// pushes or pops (every holder is dead, as the std layer proves with file locks before
    /// healing at open). On top of [`MpmcQueue::check_cursors`], the slot of each position
    /// `p` of the lap from the dequeue cursor must hold a stamp some sequence of protocol
    /// steps (dead holders and heals included) leaves there:
    /// * `p` (free, or claimed by a dead [`MpmcQueue::try_push`] when `p` is below the
    ///   enqueue cursor), or `p | CLAIMED` or `p | WRITING` when `p` is below the enqueue
    ///   cursor (a dead producer);
    /// * `p + 1` or `(p + 1) | HEALED` when `p` is below the enqueue cursor (published or
    ///   healed, not popped);
    /// * `p - capacity + 1` or that `| HEALED` (the slot a dead consumer of `p - capacity`
    ///   took and never freed, or put back by a mistaken heal's late store, which the
    ///   stuck-slot scan reports and heals).
    ///
    /// Any other stamp ([`QueueAttachError::StampOffLap`]) means the cursors and the slots
    /// come from different states (a crash of the machine under a queue on a disk file
    /// system writes back the header and the slot pages separately), or a stamp put back
    /// two laps: healing it would deliver garbage or wedge the queue for good. On a queue
    /// in use the answer means nothing.
    #[cold]
    pub fn check_stamps_at_rest(&self) -> Result<(), QueueAttachError> {
        // The cursors as checked, not loaded again: at rest they are the same, and on a
        // queue that something writes meanwhile (the answer then means nothing, but it must
        // not be a panic) a second load could hold any value, `dequeue + cap` overflowing.
        let (dequeue, enqueue) = check_cursors_once(&self.q)?;
        let cap = self.q.capacity();
        // Relaxed (all): at rest nothing moves; the caller's locks order the dead holders'
        // stores before these loads.
        for pos in dequeue..dequeue + cap {
            let stamp = self.q.slot_word(pos).load(Ordering::Relaxed);
            let next = pos + 1;
            let claimed = pos < enqueue;
            let ok = stamp == pos
                || (claimed
                    && (stamp == pos | CLAIMED
                        || stamp == pos | WRITING
                        || stamp == next
                        || stamp == next | HEALED))
                || (pos >= cap && (stamp == next - cap || stamp == (next - cap) | HEALED));
            if !ok {
                return Err(QueueAttachError::StampOffLap {
                    pos,
                    stamp,
                    enqueue,
                    dequeue,
                });
            }
        }
        Ok(())
    }

    /// Claims the next position for an item, or fails with [`PushError::Full`]. The caller
    /// must then call [`MpmcQueue::write_claimed`] for it; until then consumers wait on it.
    /// A caller that will not write it after all (an error between the two calls) gives it
    /// back with [`MpmcQueue::abandon_claim`]: left as it is, the claim stops every consumer
    /// at its position until the position is healed. [`MpmcQueue::try_push`] does both in
    /// one step and one RMW fewer.
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
    /// and publishes it. Fails with [`PushError::Healed`] if the position was healed
    /// meanwhile: having written nothing if the heal came before the copy began; a heal
    /// during the copy lets the rest of the copy land after it (module docs). `pos` must
    /// come from [`MpmcQueue::claim`], once: a second call for it is
    /// [`PushError::AlreadyPublished`] while its item is in the queue, and reads as
    /// [`PushError::Healed`] once the item is popped (the slot no longer tells).
    #[inline]
    pub fn write_claimed(&self, pos: u64, item: &[u8]) -> Result<(), PushError> {
        if item.len() != self.item_size() {
            // Leave the claim in place; the caller may retry with a correct item.
            return Err(PushError::WrongLength {
                index: 0,
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
            // But `pos + 1` with no flag is a publish, which no heal writes: this call
            // came again for a position it published. (Consumed, the two look alike.)
            return Err(if stamp == pos.wrapping_add(1) {
                PushError::AlreadyPublished { pos }
            } else if stamp & !FLAGS > pos {
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

    /// Gives back a position this caller claimed with [`MpmcQueue::claim`] and will not
    /// write: it is healed as a dead producer's claim would be (see
    /// [`MpmcQueue::heal_stuck_slot`], with [`StuckKind::Claimed`]), so consumers pass it
    /// ([`Popped::Healed`], no item) instead of waiting at it, and its slot is free again once
    /// a consumer has passed it. The holder whose death `heal_stuck_slot` asks its caller to
    /// confirm is the caller here, which promises not to write: a `write_claimed` for `pos`
    /// afterwards (another thread's, say) writes nothing and fails with
    /// [`PushError::Healed`], as after any heal that came before the copy began.
    ///
    /// Changes nothing, with the error `heal_stuck_slot` gives, for a position that is not
    /// claimed and unwritten: never claimed ([`HealError::NotClaimed`]), published or given
    /// back already ([`HealError::NotStuck`]), or whose `write_claimed` has begun
    /// ([`HealError::KindChanged`]).
    pub fn abandon_claim(&self, pos: u64) -> Result<(), HealError> {
        self.heal_stuck_slot(StuckSlot {
            pos,
            kind: StuckKind::Claimed,
        })
    }

    /// Pushes one item (exactly [`MpmcQueue::item_size`] bytes) and returns its position:
    /// one CAS of the enqueue cursor claims the position, a release store of its stamp
    /// publishes it. A producer healed by mistake cannot tell, and its item may be lost or
    /// erase another (module docs).
    #[inline]
    pub fn try_push(&self, item: &[u8]) -> Result<u64, PushError> {
        if item.len() != self.item_size() {
            return Err(PushError::WrongLength {
                index: 0,
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
        self.pop::<true, false>(dst)
    }

    /// [`MpmcQueue::try_pop`] into a buffer of exactly [`MpmcQueue::item_size`] bytes (a
    /// typed handle's item); any other length fails with [`PopError::LengthMismatch`] and
    /// pops nothing.
    ///
    /// Why a typed handle calls this rather than `try_pop`: there a longer buffer takes an
    /// out-of-line copy, and a buffer whose address goes to a call must live in memory, so
    /// the item would be zeroed, copied in and read back through the stack on every pop;
    /// here it can stay in registers.
    #[inline(always)]
    pub fn try_pop_fixed(&self, dst: &mut [u8]) -> Result<Popped, PopError> {
        if dst.len() != self.item_size() {
            return Err(PopError::LengthMismatch {
                len: dst.len(),
                expected: self.item_size(),
            });
        }
        self.pop::<true, true>(dst)
    }

    /// [`MpmcQueue::try_pop`] by a consumer that dies after copying the item out, before it
    /// frees the slot: the state a consumer killed mid-pop leaves, for loom models of the
    /// heal ([`StuckKind::MidPop`]).
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_pop_and_die(&self, dst: &mut [u8]) -> Result<Popped, PopError> {
        self.pop::<false, false>(dst)
    }

    /// The pop's copy into a buffer longer than the item (the item's bytes at its front),
    /// out of line: inlined, the set-up of its copy of a run-time length was hoisted in
    /// front of the pop's loops and ran on every pop, even a typed handle's, whose buffer
    /// is always exactly the item.
    #[inline(never)]
    fn read_prefix(&self, pos: u64, dst: &mut [u8], need: usize) {
        self.q.read_payload_prefix(pos, dst, need);
    }

    /// The pop; `FREE == false` leaves the slot taken (only for `loom_pop_and_die`);
    /// `EXACT` when the caller has checked that `dst` is exactly the item.
    #[inline(always)]
    fn pop<const FREE: bool, const EXACT: bool>(&self, dst: &mut [u8]) -> Result<Popped, PopError> {
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
                            if EXACT || dst.len() == need {
                                // A typed handle's buffer: a copy of a constant length.
                                self.q.read_payload(pos, dst);
                            } else {
                                self.read_prefix(pos, dst, need);
                            }
                            Popped::Item { pos }
                        } else {
                            Popped::Healed { pos }
                        };
                        if FREE {
                            // Release: our reads of the slot happen before the next lap's
                            // producer (which acquires this stamp) writes it.
                            slot.store(pos.wrapping_add(cap), Ordering::Release);
                        }
                        return Ok(out);
                    }
                    Err(now) => {
                        // Spin only: the failed CAS returned a fresh cursor to retry at (a
                        // yield here too measured slower on the 2P/2C bench).
                        backoff(&mut step, None);
                        pos = now;
                    }
                }
            } else if stamp & !FLAGS <= pos {
                // Not published yet: claimed with `claim` (pending), or free or still a
                // previous lap whose consumer is finishing (empty). A try_push in flight
                // leaves the stamp at `pos` and reads as empty: telling it apart would cost
                // a load of the producers' cursor line on every empty poll.
                if stamp & !FLAGS == pos && stamp != pos {
                    return Err(PopError::Pending { pos });
                }
                // A stamp older than the lap below `pos` is checked out of line.
                if (stamp & !FLAGS).saturating_add(cap) > pos {
                    return Err(PopError::Empty);
                }
                return Err(self.empty_or_corrupt(pos));
            } else {
                // Another consumer took `pos`; back off as after a lost CAS, then follow
                // the cursor.
                backoff(&mut step, self.yield_now);
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

    /// True when a pop would not report empty or pending at the position the dequeue
    /// cursor names: it is published (or healed), or another consumer took it since the
    /// cursor was read (a pop follows the cursor to the next position, which may hold an
    /// item: only a pop can tell). For waiting loops; a snapshot.
    ///
    /// Answering false in that last case would let a consumer sleep on an item: it reads
    /// the cursor, another consumer pops that position and frees its slot (a pop wakes only
    /// producers), and the item behind it, whose push came before the sleeper announced
    /// itself, wakes nobody.
    pub fn has_item(&self) -> bool {
        // Relaxed: a snapshot; the acquire below orders what a following pop reads.
        let pos = self.q.deq().load(Ordering::Relaxed);
        // Acquire: as in try_pop.
        let stamp = self.q.slot_word(pos).load(Ordering::Acquire);
        // The complement of try_pop's empty-or-pending test.
        stamp & !FLAGS > pos
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

    /// The first stuck position at or after `from` and who holds it (module docs): a
    /// position a producer claimed and has not published (at or past the dequeue cursor,
    /// below the enqueue cursor, stamp `pos`, `pos | CLAIMED` or `pos | WRITING`), or one a
    /// consumer took and has not freed (below the dequeue cursor, stamp `pos + 1` or
    /// `(pos + 1) | HEALED`). Reads at most two stamps per slot: a consumer holds a position
    /// of the lap below the dequeue cursor, a producer one of the lap from it. A live
    /// producer or consumer is reported too, for the length of its copy: see the module
    /// docs for what the caller must establish before healing.
    pub fn next_stuck_slot(&self, from: u64) -> Option<StuckSlot> {
        let cap = self.q.capacity();
        // Acquire: every stamp we then read is at least as new as this cursor's lap.
        let deq = self.q.deq().load(Ordering::Acquire);
        // Acquire: as above; every position below it was claimed.
        let enq = self.q.enq().load(Ordering::Acquire);
        // A consumer holding `pos` keeps the producer of `pos + cap` out, so the enqueue
        // cursor, and the dequeue cursor below it, stay at or below `pos + cap`.
        let start = from.max(deq.saturating_sub(cap));
        let end = enq.min(deq.saturating_add(cap));
        (start..end).find_map(|pos| {
            // Acquire: keeps the scan ordered after the cursor loads.
            let stamp = self.q.slot_word(pos).load(Ordering::Acquire);
            let next = pos.wrapping_add(1);
            let kind = if pos < deq {
                // Taken by a consumer (the cursor moved past it only after this stamp).
                (stamp == next || stamp == next | HEALED).then_some(StuckKind::MidPop)
            } else if stamp == pos | CLAIMED {
                Some(StuckKind::Claimed)
            } else if stamp == pos || stamp == pos | WRITING {
                Some(StuckKind::MidWrite)
            } else {
                None
            };
            kind.map(|kind| StuckSlot { pos, kind })
        })
    }

    /// Unsticks a position [`MpmcQueue::next_stuck_slot`] reported, if it is still held the
    /// same way (`stuck.kind`):
    /// * a position a producer claimed and has not published is marked healed, so consumers
    ///   pass it ([`Popped::Healed`]); its item is lost;
    /// * a slot a consumer took and has not freed ([`StuckKind::MidPop`]) is freed for the
    ///   producer of `pos + capacity`, as the consumer's pop would have; the item it was
    ///   copying out is lost with it.
    ///
    /// The caller MUST have established that the producer or consumer holding the position
    /// is dead (module docs). A live one is not reliably told: only a producer using
    /// [`MpmcQueue::write_claimed`] learns it was healed ([`PushError::Healed`]); a
    /// [`MpmcQueue::try_push`] or a pop goes on, and may corrupt or erase another item.
    ///
    /// The kind is checked because the death the caller confirmed is that of one holder: a
    /// position a producer was reported to hold may since have been published and taken by
    /// a live consumer, which a heal by position alone would then free under it.
    ///
    /// Changes nothing, with an error, for a position at or past 2^61
    /// ([`HealError::BadPosition`]), one no producer has claimed ([`HealError::NotClaimed`]),
    /// one that is published and not yet taken, already healed and not yet taken, freed, or
    /// of another lap than the slot's ([`HealError::NotStuck`]), and one held otherwise than
    /// `stuck.kind` says ([`HealError::KindChanged`]).
    pub fn heal_stuck_slot(&self, stuck: StuckSlot) -> Result<(), HealError> {
        let StuckSlot {
            pos,
            kind: expected,
        } = stuck;
        if pos & FLAGS != 0 {
            // Its stamps would collide with the flags (`pos | CLAIMED` would be a claimed
            // stamp of position `pos & !FLAGS`, in the same slot).
            return Err(HealError::BadPosition { pos });
        }
        let slot = self.q.slot_word(pos);
        let next = pos + 1;
        // Acquire: a claim's stamp comes with that producer's cursor CAS (claim's release),
        // so the enqueue cursor load below sees the claim.
        let mut stamp = slot.load(Ordering::Acquire);
        loop {
            let (kind, to) = if stamp == next || stamp == next | HEALED {
                // Relaxed: the cursor only grows, and consumers move it past `pos` only after
                // seeing this stamp, so a value past `pos` proves a consumer took the
                // position; the CAS below proves it has not freed the slot.
                let dequeue = self.q.deq().load(Ordering::Relaxed);
                // At or past the cursor: published (or healed) and waiting for its
                // consumer. More than a lap below it: the next lap's position was popped
                // too, so no consumer holds this one (a stamp a mistaken heal's late store
                // put back, module docs); freeing it to `pos + capacity` would not unstick
                // the slot, and the scan never reports such a position.
                if dequeue <= pos || dequeue - pos > self.q.capacity() {
                    return Err(HealError::NotStuck { pos, stamp });
                }
                (StuckKind::MidPop, pos.wrapping_add(self.q.capacity()))
            } else if stamp == pos || stamp == pos | CLAIMED || stamp == pos | WRITING {
                // Relaxed (both): the cursors only grow. An enqueue cursor past `pos` proves
                // the claim (the CAS below proves it still unpublished); a dequeue cursor past
                // it would mean consumers passed an unpublished position, which no protocol
                // step does (a corrupt file, or a stamp read before a publish and a pop).
                let enqueue = self.q.enq().load(Ordering::Relaxed);
                if enqueue <= pos {
                    return Err(HealError::NotClaimed { pos, enqueue });
                }
                if self.q.deq().load(Ordering::Relaxed) > pos {
                    return Err(HealError::NotStuck { pos, stamp });
                }
                let kind = if stamp == pos | CLAIMED {
                    StuckKind::Claimed
                } else {
                    // `pos`: claimed by a try_push, which copies from its claim on.
                    StuckKind::MidWrite
                };
                (kind, next | HEALED)
            } else if stamp & !FLAGS < pos {
                // The slot still holds an earlier lap: nobody can have claimed `pos`.
                // Relaxed: for the error only.
                let enqueue = self.q.enq().load(Ordering::Relaxed);
                return Err(HealError::NotClaimed { pos, enqueue });
            } else {
                return Err(HealError::NotStuck { pos, stamp });
            };
            if kind != expected {
                return Err(HealError::KindChanged {
                    pos,
                    expected,
                    found: kind,
                });
            }
            // Release: whatever made the caller sure of the death (a reaped process, a
            // joined thread) happens before the next user of the slot acquires our stamp: a
            // consumer of the healed position and, through its release, the next lap's
            // producer; or, for a freed slot, that producer directly (so the dead consumer's
            // reads happen before its writes). Acquire on failure: as for the first load.
            match slot.compare_exchange(stamp, to, Ordering::Release, Ordering::Acquire) {
                Ok(_) => return Ok(()),
                Err(now) => stamp = now,
            }
        }
    }
}

/// [`MpmcQueue::check_cursors`] on the MPMC queue `q` (for [`QueueView::attach`]): an error
/// only when two readings a pause apart fail the same way (a state at rest); `Ok` after 16
/// readings that each failed otherwise (a queue moving: the checks of the full and empty
/// paths see it later).
#[cold]
pub(crate) fn check_cursors(q: &QueueView) -> Result<(), QueueAttachError> {
    let mut last = None;
    for _ in 0..16 {
        match check_cursors_once(q) {
            Ok(_) => return Ok(()),
            Err(e) if last == Some(e) => return Err(e),
            Err(e) => last = Some(e),
        }
        pause();
    }
    Ok(())
}

/// One reading of [`MpmcQueue::check_cursors`]; the dequeue and enqueue cursors it
/// checked (below 2^61, dequeue <= enqueue) when it passes.
fn check_cursors_once(q: &QueueView) -> Result<(u64, u64), QueueAttachError> {
    let cap = q.capacity();
    // Acquire (all): as for a pop and a push; the order of the three loads is what the
    // check relies on (the cursors only grow, and dequeue <= enqueue at every moment).
    let dequeue = q.deq().load(Ordering::Acquire);
    let enqueue = q.enq().load(Ordering::Acquire);
    let later = q.deq().load(Ordering::Acquire);
    if (dequeue | enqueue | later) & FLAGS != 0
        || dequeue > enqueue
        || enqueue > later.saturating_add(cap)
    {
        return Err(QueueAttachError::BadCursors {
            enqueue,
            dequeue: if dequeue > enqueue { dequeue } else { later },
            capacity: cap,
        });
    }
    let off = |pos: u64, stamp: u64| QueueAttachError::StampOffLap {
        pos,
        stamp,
        enqueue,
        dequeue: later,
    };
    // Acquire: as in claim. The slot at the enqueue cursor holds at least the previous lap.
    let stamp = q.slot_word(enqueue).load(Ordering::Acquire);
    if (stamp & !FLAGS).saturating_add(cap) < enqueue {
        return Err(off(enqueue, stamp));
    }
    // Acquire: as in a pop. The slot at the dequeue cursor holds at least the lap of the
    // position a capacity below it, published.
    let stamp = q.slot_word(later).load(Ordering::Acquire);
    if (stamp & !FLAGS).saturating_add(cap) <= later {
        return Err(off(later, stamp));
    }
    Ok((dequeue, enqueue))
}

/// The pause before the attach check reads again: 64 spin hints, so that stores in flight
/// reach this thread; one yield under loom, after which a load returns a newer store than
/// it saw before, if there is one.
#[cold]
fn pause() {
    #[cfg(not(loom))]
    for _ in 0..64 {
        spin_hint();
    }
    #[cfg(loom)]
    spin_hint();
}

/// After a CAS lost to another thread of the same side, or a position found taken by one:
/// 1, 2, 4, ... 64 spin hints before the retry, so the contended cursor line is not pulled
/// back on every attempt; then 64 hints on every further retry, or, where the caller passes
/// a `yield_now` (the position-taken retries of a handle made [`MpmcQueue::with_yield`]), a
/// call to it instead. Seven backoffs in one push or pop (127 hints) mean another thread of
/// the same side keeps winning: with more threads than cores, the thread that would make
/// room or bring an item is likely waiting for this core, and a yield lets it run.
///
/// Nothing under loom: a hint there is a yield, and loom never lets a load after a yield
/// return a value the thread saw before it, so the cursor re-read after a backoff could
/// never be stale and the orderings that keep it fresh would go unchecked. The retry loops
/// need no yield to end: each retry moves to a position strictly past the last one seen
/// (a CAS fails with a newer cursor, a re-read equal to the last one is reported corrupt),
/// and a model makes only a few.
#[inline(always)]
fn backoff(step: &mut u32, yield_now: Option<fn()>) {
    #[cfg(not(loom))]
    {
        if let (7.., Some(y)) = (*step, yield_now) {
            y();
            return;
        }
        for _ in 0..1u32 << (*step).min(6) {
            spin_hint();
        }
        if *step <= 6 {
            *step += 1;
        }
    }
    #[cfg(loom)]
    let _ = (step, yield_now);
}

#[cfg(all(test, not(loom)))]
mod backoff_tests {
    use super::backoff;
    use core::sync::atomic::{AtomicU32, Ordering};

    static YIELDS: AtomicU32 = AtomicU32::new(0);

    fn count_yield() {
        YIELDS.fetch_add(1, Ordering::Relaxed);
    }

    /// Seven backoffs spin (1 + 2 + ... + 64 hints); every one after calls the hook, and
    /// never without one.
    #[test]
    fn backoff_yields_only_after_seven_spins_and_only_with_a_hook() {
        let mut step = 0;
        for _ in 0..7 {
            backoff(&mut step, Some(count_yield));
        }
        assert_eq!(
            YIELDS.load(Ordering::Relaxed),
            0,
            "yielded within 127 hints"
        );
        for n in 1..=3 {
            backoff(&mut step, Some(count_yield));
            assert_eq!(YIELDS.load(Ordering::Relaxed), n);
        }
        let mut step = 0;
        for _ in 0..20 {
            backoff(&mut step, None);
        }
        assert_eq!(
            YIELDS.load(Ordering::Relaxed),
            3,
            "a handle without a hook yielded"
        );
    }
}
