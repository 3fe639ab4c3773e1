//! ringfire's lossy MPMC ring (spec §8): producers claim tickets with `claim_seq`, and
//! competing consumers take tickets with `read_seq`. Tickets can be lost (a slot overtaken
//! by a newer lap, a stalled slot taken over), and consumers count what they lose.
//!
//! Clock choice: the reference takes over a slot stalled for 10 ms. The core has no clock,
//! so [`LossyMpmcProducer::push`] takes a caller-supplied `now_ns` closure, called only on
//! the slow path (after 4096 spins, every 64th spin), exactly where the reference reads its
//! clock. The std side passes a monotonic clock; firmware can pass a cycle counter, or a
//! closure that counts its calls to get a pure spin budget.

use crate::error::AttachError;
use crate::layout::{Flags, SLOT_WRITING};
use crate::ring::{RingView, SlotRead};
use crate::sync::{Ordering, spin_hint};

/// The reference's stall takeover deadline, in nanoseconds.
pub const TAKEOVER_NS: u64 = 10_000_000;
const SPINS_BEFORE_CLOCK: u32 = 4096;
const CLOCK_EVERY: u32 = 64;

/// Outcome of a lossy push. Every outcome consumed a ticket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[must_use]
pub enum LossyPush {
    /// Published as `seq`. When `wake` is true `futex_word` was bumped and the caller must
    /// wake sleepers (FUTEX_WAKE on the std side).
    Published {
        /// The ticket.
        seq: u64,
        /// Sleepers must be woken.
        wake: bool,
    },
    /// The slot already held a newer lap: the message was discarded.
    Discarded {
        /// The ticket.
        seq: u64,
    },
    /// The slot stayed mid-write past the deadline: the message was dropped (a slot being
    /// written is never taken over).
    Dropped {
        /// The ticket.
        seq: u64,
    },
}

fn check_mpmc(ring: &RingView) -> Result<(), AttachError> {
    let flags = ring.geometry().flags;
    if flags.has(Flags::MODE_MPMC) {
        Ok(())
    } else {
        Err(AttachError::WrongKind {
            flags: flags.0,
            need: "an MPMC ring",
        })
    }
}

/// A producer of a ringfire MPMC ring (any number may exist).
#[derive(Clone, Debug)]
pub struct LossyMpmcProducer {
    ring: RingView,
}

impl LossyMpmcProducer {
    /// A producer on `ring`, which must be MPMC-flagged.
    pub fn new(ring: RingView) -> Result<LossyMpmcProducer, AttachError> {
        check_mpmc(&ring)?;
        Ok(LossyMpmcProducer { ring })
    }

    /// The ring.
    pub fn ring(&self) -> &RingView {
        &self.ring
    }

    /// Pushes `payload` (the raw slot bytes `[8, S)`, truncated to `S - 8`) with the claim
    /// protocol of spec §8.1. `now_ns` is a monotonic clock in nanoseconds (module docs).
    pub fn push(&self, payload: &[u8], mut now_ns: impl FnMut() -> u64) -> LossyPush {
        let ring = &self.ring;
        // Relaxed: the ticket only needs to be unique; the slot word orders the data.
        let seq = ring.claim_seq().fetch_add(1, Ordering::Relaxed);
        let prev = seq.saturating_sub(ring.capacity());
        let slot = ring.slot_seq(seq);
        let mut spins: u32 = 0;
        let mut deadline: Option<u64> = None;
        let mut stalled = false;
        loop {
            // Acquire: pairs with the previous lap's release store, so its readers' view of
            // the old payload is settled before we overwrite it.
            let cur = slot.load(Ordering::Acquire);
            if cur != SLOT_WRITING && cur > seq {
                return LossyPush::Discarded { seq };
            }
            if cur == prev || (stalled && cur != SLOT_WRITING) {
                // Acquire: our payload stores stay after we own the slot.
                if slot
                    .compare_exchange(cur, SLOT_WRITING, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    break;
                }
                continue;
            }
            spins = spins.saturating_add(1);
            if spins > SPINS_BEFORE_CLOCK && spins.is_multiple_of(CLOCK_EVERY) {
                let t = now_ns();
                let d = *deadline.get_or_insert(t.saturating_add(TAKEOVER_NS));
                if t >= d {
                    if cur == SLOT_WRITING {
                        return LossyPush::Dropped { seq };
                    }
                    stalled = true;
                }
            }
            spin_hint();
        }
        // We own the slot (its word is SLOT_WRITING): fence, payload, release store of seq.
        ring.write_slot(seq, payload);
        // Release: a reader that acquires write_seq sees this slot published.
        ring.write_seq().fetch_max(seq, Ordering::Release);
        LossyPush::Published {
            seq,
            wake: ring.bump_futex_if_waiting(),
        }
    }
}

/// A competing consumer of a ringfire MPMC ring (spec §8.2): each ticket goes to one
/// consumer; lost tickets are counted in [`LossyMpmcConsumer::dropped`].
#[derive(Debug)]
pub struct LossyMpmcConsumer {
    ring: RingView,
    pending: Option<u64>,
    dropped: u64,
}

impl LossyMpmcConsumer {
    /// A consumer on `ring`, which must be MPMC-flagged.
    pub fn new(ring: RingView) -> Result<LossyMpmcConsumer, AttachError> {
        check_mpmc(&ring)?;
        Ok(LossyMpmcConsumer {
            ring,
            pending: None,
            dropped: 0,
        })
    }

    /// Tickets this consumer lost (overwritten, overtaken, or skipped past).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The ticket this consumer holds and waits on, if any (the cursor to sleep on).
    pub fn pending(&self) -> Option<u64> {
        self.pending
    }

    /// Takes the next message into `dst` (at most `S - 8` bytes of the raw slot bytes) and
    /// returns its sequence, or `None` when nothing is ready.
    pub fn try_recv(&mut self, dst: &mut [u8]) -> Option<u64> {
        let ring = &self.ring;
        let cap = ring.capacity();
        loop {
            if let Some(t) = self.pending {
                let lost = match ring.read_slot(t, dst) {
                    SlotRead::Ok => {
                        self.pending = None;
                        return Some(t);
                    }
                    SlotRead::Overwritten { .. } => true,
                    // Relaxed: a heuristic bound; a stale value only delays the verdict.
                    SlotRead::Pending => {
                        ring.claim_seq().load(Ordering::Relaxed) > t.saturating_add(cap)
                    }
                };
                if !lost {
                    return None;
                }
                self.dropped += 1;
                self.pending = None;
            }
            // Relaxed: ticket counters; the slot word carries the data ordering.
            let r = ring.read_seq().load(Ordering::Relaxed);
            // Relaxed: as above.
            let c = ring.claim_seq().load(Ordering::Relaxed);
            if r >= c {
                return None;
            }
            let floor = c.saturating_sub(cap);
            if r < floor {
                // Relaxed: as above.
                if ring
                    .read_seq()
                    .compare_exchange(r, floor, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
                {
                    self.dropped += floor - r;
                }
                continue;
            }
            // Relaxed: as above.
            if ring
                .read_seq()
                .compare_exchange(r, r + 1, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                self.pending = Some(r);
            }
        }
    }
}
