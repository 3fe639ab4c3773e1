//! ringfire's lossy MPMC ring (spec §8): producers claim tickets with `claim_seq`, and
//! competing consumers take tickets with `read_seq`. Tickets can be lost (a slot overtaken
//! by a newer lap, a stalled slot taken over), and consumers count what they lose.
//!
//! Clock choice: the reference takes over a slot stalled for 10 ms. The core has no clock,
//! so [`LossyMpmcProducer::push`] takes a caller-supplied `now_ns` closure, called only on
//! the slow path (after 4096 spins, every 64th spin), exactly where the reference reads its
//! clock. The std side passes a monotonic clock; firmware can pass a cycle counter, or a
//! closure that counts its calls to get a pure spin budget.

use core::fmt;

use crate::error::AttachError;
use crate::layout::{Flags, SEQ_LIMIT, SLOT_WRITING};
use crate::ring::{RingView, SlotRead};
use crate::sync::{Ordering, spin_hint};

/// The reference's stall takeover deadline, in nanoseconds.
pub const TAKEOVER_NS: u64 = 10_000_000;
#[cfg(not(loom))]
const SPINS_BEFORE_CLOCK: u32 = 4096;
#[cfg(not(loom))]
const CLOCK_EVERY: u32 = 64;
// Under loom every spin is a scheduling point: the slow path (the stall takeover) is
// modelled with the clock read on every spin from the first.
#[cfg(loom)]
const SPINS_BEFORE_CLOCK: u32 = 0;
#[cfg(loom)]
const CLOCK_EVERY: u32 = 1;

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
    /// written is never taken over). [`LossyMpmcProducer::push`] also reports a ticket
    /// refused as [`TicketExhausted`] (a corrupt `claim_seq`) this way; it and
    /// [`LossyMpmcProducer::try_push`] also report so a ticket 0 drawn twice in a row (a
    /// `claim_seq` scribbled to 0 again between the two draws), which writes nothing.
    Dropped {
        /// The ticket.
        seq: u64,
    },
}

/// A push refused without writing anything: `claim_seq` handed out `ticket`, at or past
/// [`SEQ_LIMIT`], which is not a valid sequence (u64::MAX is the write marker, spec §0.1).
/// Only a corrupt header gets there (another process scribbled on `claim_seq`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TicketExhausted {
    /// The ticket drawn.
    pub ticket: u64,
}

impl fmt::Display for TicketExhausted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "claim_seq handed out ticket {:#x}, at or past the sequence limit {SEQ_LIMIT:#x} (a corrupt ring header): nothing was written",
            self.ticket
        )
    }
}

impl core::error::Error for TicketExhausted {}

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
    /// Notify sleepers with a full fence (see [`LossyMpmcProducer::set_fenced_publish`]).
    fenced: bool,
}

impl LossyMpmcProducer {
    /// A producer on `ring`, which must be MPMC-flagged. A `claim_seq` at or past
    /// [`SEQ_LIMIT`] (a corrupt header) is refused with [`AttachError::ClaimSeqExhausted`].
    pub fn new(ring: RingView) -> Result<LossyMpmcProducer, AttachError> {
        check_mpmc(&ring)?;
        // Relaxed: a sanity check of the header; every push checks its own ticket again.
        let claim_seq = ring.claim_seq().load(Ordering::Relaxed);
        if claim_seq >= SEQ_LIMIT {
            return Err(AttachError::ClaimSeqExhausted { claim_seq });
        }
        Ok(LossyMpmcProducer {
            ring,
            fenced: false,
        })
    }

    /// Checks for sleepers after a fence of its own ([`crate::futex::FutexPair::notify`]) instead of
    /// relying on their membarrier: for a process that could not register for it (see
    /// [`RingView::bump_futex_if_waiting`]).
    pub fn set_fenced_publish(&mut self, fenced: bool) {
        self.fenced = fenced;
    }

    /// The ring.
    pub fn ring(&self) -> &RingView {
        &self.ring
    }

    /// Pushes `payload` (the raw slot bytes `[8, S)`, truncated to `S - 8`) with the claim
    /// protocol of spec §8.1. `now_ns` is a monotonic clock in nanoseconds (module docs).
    /// A ticket refused by [`LossyMpmcProducer::try_push`] is reported as
    /// [`LossyPush::Dropped`].
    pub fn push(&self, payload: &[u8], now_ns: impl FnMut() -> u64) -> LossyPush {
        self.try_push(payload, now_ns)
            .unwrap_or_else(|e| LossyPush::Dropped { seq: e.ticket })
    }

    /// [`LossyMpmcProducer::push`], except that a ticket at or past [`SEQ_LIMIT`] (drawn
    /// from a `claim_seq` corrupted after [`LossyMpmcProducer::new`]) is refused with
    /// [`TicketExhausted`]: its slot is not touched and nothing is published, and the
    /// ticket is given back when no other producer drew one since, so the counter stays
    /// where it was instead of creeping towards a wrap to 0. A ticket 0 (a corrupt
    /// `claim_seq` of 0; no consumer takes ticket 0) is skipped: the push draws the next one.
    pub fn try_push(
        &self,
        payload: &[u8],
        mut now_ns: impl FnMut() -> u64,
    ) -> Result<LossyPush, TicketExhausted> {
        let ring = &self.ring;
        // Relaxed: the ticket only needs to be unique; the slot word orders the data.
        let seq = match ring.claim_seq().fetch_add(1, Ordering::Relaxed) {
            // 0 is no sequence (spec §0.1): creators start claim_seq at 1, and consumers move
            // read_seq past 0 without taking it, so a message published as ticket 0 (a
            // corrupt claim_seq) would be received by nobody and counted by nobody. Our draw
            // moved claim_seq to 1: draw again.
            0 => ring.claim_seq().fetch_add(1, Ordering::Relaxed),
            s => s,
        };
        if seq == 0 {
            // Scribbled to 0 again between our two draws: give up on this message.
            return Ok(LossyPush::Dropped { seq });
        }
        if seq >= SEQ_LIMIT {
            return Err(self.refuse(seq));
        }
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
                return Ok(LossyPush::Discarded { seq });
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
                        return Ok(LossyPush::Dropped { seq });
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
        Ok(LossyPush::Published {
            seq,
            wake: if self.fenced {
                ring.futex().notify()
            } else {
                ring.bump_futex_if_waiting()
            },
        })
    }

    /// Refuses ticket `seq` (at or past [`SEQ_LIMIT`]) and gives it back if `claim_seq` still
    /// holds the value our draw left (nobody drew since), so a corrupt u64::MAX is not left
    /// wrapped to 0.
    #[cold]
    #[inline(never)]
    fn refuse(&self, seq: u64) -> TicketExhausted {
        // Relaxed: only the counter's own value matters; no data is ordered by it.
        let _ = self.ring.claim_seq().compare_exchange(
            seq.wrapping_add(1),
            seq,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
        TicketExhausted { ticket: seq }
    }
}

/// Why [`LossyMpmcProducer::heal_mid_write_slot`] refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum LossyHealError {
    /// The index is not a slot of the ring (it is at or past the capacity).
    BadIndex {
        /// The index passed.
        index: u64,
        /// The ring's capacity.
        capacity: u64,
    },
    /// The slot is not mid-write: its writer finished (or it was healed already), so
    /// the death the caller confirmed is not that of a writer of this slot.
    NotMidWrite {
        /// The index passed.
        index: u64,
        /// The sequence word found.
        seq: u64,
    },
}

impl fmt::Display for LossyHealError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            LossyHealError::BadIndex { index, capacity } => write!(
                f,
                "slot {index} is not in the ring (capacity {capacity}): nothing was healed"
            ),
            LossyHealError::NotMidWrite { index, seq } => write!(
                f,
                "slot {index} is not mid-write (its sequence word is {seq}): nothing was healed"
            ),
        }
    }
}

impl core::error::Error for LossyHealError {}

/// A slot left mid-write by a producer that died between taking it (sequence word
/// `u64::MAX`, spec §4.1) and publishing. No producer ever takes over such a slot (spec
/// §8.1): each one whose ticket lands there spins for [`TAKEOVER_NS`] and drops its
/// message, on every lap, and the consumer that drew that ticket waits for a whole ring of
/// claims before counting it lost. ringfire's ring stays that way until it is recreated.
/// A caller that knows the writer is dead (a supervisor that reaped the process, say) can
/// find the slot and heal it.
impl LossyMpmcProducer {
    /// The first slot at or after index `from` whose sequence word is `u64::MAX` (mid-write),
    /// or `None` (also for a `from` at or past the capacity). A live producer's write shows
    /// the same for the moment it takes: only a slot found so again after the writer is
    /// known dead is stuck.
    ///
    /// Cost: one load per slot from `from` on, so it touches every page holding a slot's
    /// sequence word. The ring's creator wrote each of those words (spec §1.2 step 5;
    /// ringwire's creator reserves the whole file besides), so the pages exist already and
    /// a scan adds no memory; only the scanning process's RSS counts them while it maps
    /// the ring.
    pub fn next_mid_write_slot(&self, from: u64) -> Option<u64> {
        // Relaxed: a report; the heal's CAS decides.
        (from..self.ring.capacity())
            .find(|&i| self.ring.slot_seq(i).load(Ordering::Relaxed) == SLOT_WRITING)
    }

    /// Heals slot `index` (0 ≤ index < capacity), left mid-write by a dead producer: its
    /// sequence word goes from `u64::MAX` to 0, "never written". Its torn payload is never
    /// delivered: every reader needs the word to equal the sequence it wants (at least 1).
    /// The next producer whose ticket lands on the slot finds neither the value it expects
    /// nor a write in progress, so it takes the slot over once [`TAKEOVER_NS`] have passed
    /// (spec §8.1, "stalled"), as for any stalled slot, and the laps after it use the slot
    /// at once. Nothing is published, so nobody needs waking.
    ///
    /// What it does not do: a queue consumer that drew the dead writer's ticket still
    /// waits on it, receiving nothing, until that takeover lands (its ticket then reads as
    /// overwritten) or a ring's worth of tickets were claimed after it, and counts it lost.
    /// And 0 is also the value a first-lap ticket expects: a first-lap producer that drew
    /// this slot's first ticket and has not taken the slot yet (a later lap took it over
    /// by stall meanwhile) takes it at once, and the next lap stalls once more.
    ///
    /// The value is 0 rather than the value the next producer expects (its ticket less the
    /// capacity) because a consumer may hold that ticket and would take the torn payload
    /// as its message.
    ///
    /// # Caller contract
    ///
    /// The producer that marked the slot must be dead, and no other producer may be
    /// mid-write on it. The ring does not record which producer writes a slot, and a live
    /// producer descheduled while copying shows the same marker as a dead one: healing its
    /// slot lets another producer take the slot over while it still copies, and a consumer
    /// can then receive a torn message. So heal only when every producer that could hold
    /// the slot is known dead, exited or killed (say, a supervisor that reaped them all;
    /// pausing one is not enough: resumed, it finishes its copy over the new owner's), from
    /// one healer at a time: a second healer acting on
    /// the same verdict after the slot was taken over would heal a live writer's marker.
    /// Finding the same slot marked in two scans more than [`TAKEOVER_NS`] apart makes a
    /// live writer unlikely, not impossible. Fails with [`LossyHealError::NotMidWrite`]
    /// when the slot is not mid-write (its writer finished: then it was alive).
    pub fn heal_mid_write_slot(&self, index: u64) -> Result<(), LossyHealError> {
        let capacity = self.ring.capacity();
        if index >= capacity {
            return Err(LossyHealError::BadIndex { index, capacity });
        }
        // Relaxed: nothing is published; the next owner's acquire CAS takes the slot from
        // whatever word it finds.
        self.ring
            .slot_seq(index)
            .compare_exchange(SLOT_WRITING, 0, Ordering::Relaxed, Ordering::Relaxed)
            .map(|_| ())
            .map_err(|seq| LossyHealError::NotMidWrite { index, seq })
    }
}

/// Slots of an MPMC ring holding a sequence at or past `claim_seq` (the write marker
/// aside), found by [`slots_past_claim`]: a producer claims its ticket before it writes the
/// slot, so no protocol step leaves one there. A corrupt ring: every push landing on such a
/// slot is discarded ([`LossyPush::Discarded`]) until tickets reach its sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SlotsPastClaim {
    /// How many slots hold such a sequence.
    pub count: u64,
    /// The first of them.
    pub slot: u64,
    /// The sequence it holds.
    pub seq: u64,
    /// `claim_seq`, loaded after that slot's sequence.
    pub claim_seq: u64,
}

impl fmt::Display for SlotsPastClaim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} slot(s) hold a sequence at or past claim_seq {} (the first: slot {}, sequence \
             {}), which no producer writes: a corrupt ring, on which every push landing on \
             such a slot is discarded until tickets reach its sequence",
            self.count, self.claim_seq, self.slot, self.seq
        )
    }
}

impl core::error::Error for SlotsPastClaim {}

/// The slots of the MPMC ring `ring` holding a sequence at or past `claim_seq`, if any
/// ([`SlotsPastClaim`]); `None` for a ring that is not MPMC-flagged. Only loads, so it runs
/// over a read-only mapping, and is exact on a live ring: a slot's word is judged against a
/// `claim_seq` loaded after it. It trusts `claim_seq`: check the header first
/// ([`LossyMpmcConsumer::new`]). One load per slot: it touches every page of the slots.
pub fn slots_past_claim(ring: &RingView) -> Option<SlotsPastClaim> {
    scan_slots(ring)?.past_claim
}

/// What one pass over the slots of an MPMC ring found ([`scan_slots`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SlotScan {
    /// Slots whose word is the write marker: a push in flight, or a producer that died
    /// while copying (see [`LossyMpmcProducer::next_mid_write_slot`]).
    pub mid_write: u64,
    /// The slots holding a sequence at or past `claim_seq`, as [`slots_past_claim`] says.
    pub past_claim: Option<SlotsPastClaim>,
}

/// [`slots_past_claim`] and the count of slots mid-write, in one pass over the slots of the
/// MPMC ring `ring` (`None` for a ring that is not MPMC-flagged), for a report that shows
/// both (`ringwire stat`). Only loads; one load per slot.
pub fn scan_slots(ring: &RingView) -> Option<SlotScan> {
    check_mpmc(ring).ok()?;
    // Relaxed: a lower bound; a word at or past it is judged against a later load.
    let mut claim = ring.claim_seq().load(Ordering::Relaxed);
    let mut found: Option<SlotsPastClaim> = None;
    let mut mid_write = 0;
    for i in 0..ring.capacity() {
        // Acquire: a word a producer published comes with its claim of that ticket, so a
        // claim_seq loaded after it is past it.
        let w = ring.slot_seq(i).load(Ordering::Acquire);
        if w == SLOT_WRITING {
            mid_write += 1;
            continue;
        }
        if w < claim {
            continue;
        }
        // Relaxed: ordered after the acquire load above.
        claim = ring.claim_seq().load(Ordering::Relaxed);
        if w < claim {
            continue;
        }
        match &mut found {
            Some(f) => f.count += 1,
            None => {
                found = Some(SlotsPastClaim {
                    count: 1,
                    slot: i,
                    seq: w,
                    claim_seq: claim,
                })
            }
        }
    }
    Some(SlotScan {
        mid_write,
        past_claim: found,
    })
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
    /// A consumer on `ring`, which must be MPMC-flagged. A corrupt header is refused: a
    /// `claim_seq` at or past [`SEQ_LIMIT`] ([`AttachError::ClaimSeqExhausted`], as for a
    /// producer: no ticket drawn from it can hold a message, and the consumer would count
    /// some 2^64 tickets lost), a `read_seq` past `claim_seq`
    /// ([`AttachError::ReadSeqPastClaimSeq`]).
    pub fn new(ring: RingView) -> Result<LossyMpmcConsumer, AttachError> {
        check_mpmc(&ring)?;
        // Acquire: as in try_recv, so the claim_seq loaded next is at least what the
        // consumer that moved read_seq there saw: a sound ring never shows it ahead.
        let read_seq = ring.read_seq().load(Ordering::Acquire);
        // Relaxed: ordered after the acquire above.
        let claim_seq = ring.claim_seq().load(Ordering::Relaxed);
        if claim_seq >= SEQ_LIMIT {
            return Err(AttachError::ClaimSeqExhausted { claim_seq });
        }
        if read_seq > claim_seq {
            return Err(AttachError::ReadSeqPastClaimSeq {
                read_seq,
                claim_seq,
            });
        }
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

    /// Hands the ticket this consumer holds ([`LossyMpmcConsumer::pending`]) back to the
    /// other consumers, when none has taken a later one since (`read_seq` is still the
    /// ticket after it): `read_seq` goes back to the ticket, which the next receive of any
    /// consumer claims, and this consumer holds nothing. Returns whether it did; `false`,
    /// keeping the ticket, when a later ticket was taken or nothing is held.
    ///
    /// For a consumer that stops: a held ticket is otherwise neither received nor counted
    /// lost by anyone (spec §8.2 has no way back). `read_seq` stepping back by one is the
    /// state the ring was in before our claim, so every consumer's CAS on it (ringfire's
    /// too) sees it as such; one taken back by a consumer that gives up its own later ticket
    /// first returns to it in turn. Only the holder may call it, once it no longer reads the
    /// ticket: a copy of this consumer that still reads it (one inherited through `fork`)
    /// would receive the message a second time.
    pub fn give_back(&mut self) -> bool {
        let Some(t) = self.pending else {
            return false;
        };
        // AcqRel: release, so a consumer that acquires `read_seq == t` and claims the ticket
        // sees it as ours was; acquire as the claims' CAS.
        let ok = self
            .ring
            .read_seq()
            .compare_exchange(t.wrapping_add(1), t, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok();
        if ok {
            self.pending = None;
        }
        ok
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
                self.dropped = self.dropped.saturating_add(1);
                self.pending = None;
            }
            // Acquire: pairs with the release CAS of the consumer that moved `read_seq` to
            // `r`, which had seen `claim_seq >= r`; so the load of `claim_seq` below sees at
            // least that, and `r > c` cannot make a non-empty ring look empty (as
            // ringfire's). The slot word carries the data ordering.
            let r = ring.read_seq().load(Ordering::Acquire);
            // Relaxed: ordered after the acquire above.
            let c = ring.claim_seq().load(Ordering::Relaxed);
            if r >= c {
                return None;
            }
            // Tickets start at 1: a `read_seq` of 0 (a corrupt header) is moved up to 1, not
            // claimed, since slot 0's sequence word, 0 from creation, would read as ticket 0
            // published and deliver its zeros as a message.
            let floor = c.saturating_sub(cap).max(1);
            if r < floor {
                // AcqRel: release for the next consumer's acquire load above; acquire as that
                // load.
                if ring
                    .read_seq()
                    .compare_exchange(r, floor, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
                {
                    // Saturating: corrupt ticket counters may claim 2^64 drops. Ticket 0
                    // never held a message, so it is not counted.
                    self.dropped = self.dropped.saturating_add(floor - r.max(1));
                }
                continue;
            }
            // AcqRel: as the CAS above.
            if ring
                .read_seq()
                .compare_exchange(r, r + 1, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                self.pending = Some(r);
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::vec::Vec;

    use super::*;
    use crate::layout::Geometry;
    use crate::region::Region;
    use crate::testutil::{Word, words};

    fn ring(cap: u64) -> (Vec<Word>, RingView) {
        let g = Geometry::mpmc(cap, 16, 8).unwrap();
        let mut buf = words(g.total_len().unwrap() as usize / 8);
        // SAFETY: the buffer is returned with the view and outlives its use in each test.
        let r = unsafe { Region::from_raw_parts(buf.as_mut_ptr().cast(), buf.len() * 8) }.unwrap();
        // SAFETY: the test's own buffer, no other view of it exists yet.
        let v = unsafe { RingView::init(r, &g) }.unwrap();
        (buf, v)
    }

    fn no_clock() -> u64 {
        panic!("the clock is only read on the slow path")
    }

    /// A sound ring has no slot past `claim_seq`, whatever laps and in-flight pushes it
    /// shows; a word at `claim_seq` or past it is found (the write marker aside), the first
    /// one named; a single-writer ring is not judged (its `claim_seq` is not a ticket).
    #[test]
    fn slots_past_claim_names_the_first_slot_ahead_of_the_tickets() {
        let (_b, r) = ring(4);
        let p = LossyMpmcProducer::new(r).unwrap();
        for i in 0..6u64 {
            let out = p.push(&i.to_le_bytes(), no_clock);
            assert!(matches!(out, LossyPush::Published { .. }), "{out:?}");
        }
        // A ticket claimed, its slot taken for writing: a push in flight.
        r.claim_seq().fetch_add(1, Ordering::Relaxed);
        r.slot_seq(7).store(SLOT_WRITING, Ordering::Relaxed);
        assert_eq!(slots_past_claim(&r), None);
        // The same pass counts the slot mid-write.
        assert_eq!(
            scan_slots(&r),
            Some(SlotScan {
                mid_write: 1,
                past_claim: None
            })
        );
        let claim_seq = r.claim_seq().load(Ordering::Relaxed);
        r.slot_seq(1).store(claim_seq, Ordering::Relaxed);
        r.slot_seq(2).store(u64::MAX - 1, Ordering::Relaxed);
        assert_eq!(
            slots_past_claim(&r),
            Some(SlotsPastClaim {
                count: 2,
                slot: 1,
                seq: claim_seq,
                claim_seq
            })
        );
        assert_eq!(scan_slots(&r).map(|s| s.mid_write), Some(1));
        let mut buf = words(64);
        let g = Geometry::spmc(4, 16, 8, 0, false).unwrap();
        // SAFETY: the test's own buffer, used only while it lives.
        let r = unsafe { Region::from_raw_parts(buf.as_mut_ptr().cast(), buf.len() * 8) }.unwrap();
        // SAFETY: as above; no other view of it exists.
        let v = unsafe { RingView::init(r, &g) }.unwrap();
        v.slot_seq(0).store(9, Ordering::Relaxed);
        assert_eq!(slots_past_claim(&v), None);
        assert_eq!(scan_slots(&v), None);
    }

    /// On a sound, busy ring (producers lapping a small ring, a consumer moving read_seq) the
    /// checks stat and heal run, [`RingView::checked_write_seq`] (`write_seq` against
    /// `claim_seq`), a consumer's header check and [`slots_past_claim`], never
    /// call it corrupt: a published word comes with its ticket's claim, which the later
    /// load of `claim_seq` sees. The producers push at least 200,000 items each (100 under
    /// Miri) and go on until the checker has made 100 checks (3 under Miri) across moving
    /// tickets (a loaded machine may start it late), within a 30 s bound that only a
    /// checker never scheduled reaches.
    #[test]
    fn a_busy_sound_ring_is_never_judged_corrupt() {
        use core::sync::atomic::{AtomicBool, AtomicU64};
        // Scaled down under Miri, as the other threaded queue tests are.
        const BUSY_CHECKS: u64 = if cfg!(miri) { 3 } else { 100 };
        const PUSHES: u64 = if cfg!(miri) { 100 } else { 200_000 };
        let (_b, r) = ring(4);
        let t0 = std::time::Instant::now();
        let clock = || t0.elapsed().as_nanos() as u64;
        let bound = std::time::Duration::from_secs(30);
        let (done, busy) = (AtomicBool::new(false), AtomicU64::new(0));
        let (pushed, found) = std::thread::scope(|s| {
            let producers: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        let p = LossyMpmcProducer::new(r).unwrap();
                        let mut i = 0u64;
                        while i < PUSHES
                            || (busy.load(Ordering::Relaxed) < BUSY_CHECKS && t0.elapsed() < bound)
                        {
                            let _ = p.push(&i.to_le_bytes(), clock);
                            i += 1;
                        }
                        i
                    })
                })
                .collect();
            let consumer = s.spawn(|| {
                let mut c = LossyMpmcConsumer::new(r).unwrap();
                let mut b = [0u8; 8];
                while !done.load(Ordering::Relaxed) {
                    c.try_recv(&mut b);
                }
            });
            // Checks until the producers are done, counting those made while tickets moved.
            let checker = s.spawn(|| {
                let mut found = Vec::new();
                while !done.load(Ordering::Relaxed) && found.len() < 3 {
                    let before = r.claim_seq().load(Ordering::Relaxed);
                    found.extend(r.checked_write_seq().err().map(|e| e.to_string()));
                    found.extend(LossyMpmcConsumer::new(r).err().map(|e| e.to_string()));
                    found.extend(slots_past_claim(&r).map(|f| f.to_string()));
                    if r.claim_seq().load(Ordering::Relaxed) != before {
                        busy.fetch_add(1, Ordering::Relaxed);
                    }
                }
                found
            });
            let pushed: u64 = producers.into_iter().map(|p| p.join().unwrap()).sum();
            done.store(true, Ordering::Relaxed);
            consumer.join().unwrap();
            (pushed, checker.join().unwrap())
        });
        assert_eq!(found, Vec::<std::string::String>::new());
        assert!(
            busy.load(Ordering::Relaxed) >= BUSY_CHECKS,
            "the checker made fewer than {BUSY_CHECKS} checks while tickets moved in {bound:?}"
        );
        assert_eq!(r.claim_seq().load(Ordering::Relaxed), 1 + pushed);
    }

    fn recv(c: &mut LossyMpmcConsumer) -> Option<(u64, u64)> {
        let mut b = [0u8; 8];
        c.try_recv(&mut b).map(|s| (s, u64::from_le_bytes(b)))
    }

    #[test]
    fn fenced_and_unfenced_pushes_report_sleepers_alike() {
        for fenced in [false, true] {
            let (_b, r) = ring(4);
            let mut p = LossyMpmcProducer::new(r).unwrap();
            p.set_fenced_publish(fenced);
            let wake = |p: &LossyMpmcProducer, v: u64| match p.push(&v.to_le_bytes(), no_clock) {
                LossyPush::Published { wake, .. } => wake,
                other => panic!("{other:?}"),
            };
            assert!(!wake(&p, 1), "nobody sleeps");
            r.waiting_consumers().store(1, Ordering::Relaxed);
            assert!(wake(&p, 2), "fenced {fenced}");
            assert_eq!(r.futex_word().load(Ordering::Relaxed), 1);
        }
    }

    #[test]
    fn push_then_compete_in_ticket_order() {
        let (_b, r) = ring(4);
        let p = LossyMpmcProducer::new(r).unwrap();
        let mut c1 = LossyMpmcConsumer::new(r).unwrap();
        let mut c2 = LossyMpmcConsumer::new(r).unwrap();
        assert_eq!(recv(&mut c1), None);
        for v in [10u64, 20, 30] {
            assert!(matches!(
                p.push(&v.to_le_bytes(), no_clock),
                LossyPush::Published { wake: false, .. }
            ));
        }
        assert_eq!(r.write_seq().load(Ordering::Relaxed), 3);
        assert_eq!(recv(&mut c1), Some((1, 10)));
        assert_eq!(recv(&mut c2), Some((2, 20)));
        assert_eq!(recv(&mut c1), Some((3, 30)));
        assert_eq!(recv(&mut c2), None);
        assert_eq!(c1.dropped() + c2.dropped(), 0);
    }

    #[test]
    fn overrun_consumer_counts_what_it_lost() {
        let (_b, r) = ring(4);
        let p = LossyMpmcProducer::new(r).unwrap();
        let mut c = LossyMpmcConsumer::new(r).unwrap();
        for v in 1..=7u64 {
            let _ = p.push(&v.to_le_bytes(), no_clock);
        }
        // claim_seq = 8, floor = 4: tickets 1..=3 are skipped and counted.
        assert_eq!(recv(&mut c), Some((4, 4)));
        assert_eq!(c.dropped(), 3);
        // Another consumer takes ticket 5; then four more pushes put claim_seq at 12, so a
        // third consumer skips tickets 6 and 7 (below the floor 8) and counts them.
        let mut other = LossyMpmcConsumer::new(r).unwrap();
        assert_eq!(recv(&mut other), Some((5, 5)));
        let mut late = LossyMpmcConsumer::new(r).unwrap();
        for v in 8..=11u64 {
            let _ = p.push(&v.to_le_bytes(), no_clock);
        }
        assert_eq!(recv(&mut late), Some((8, 8)));
        assert_eq!(late.dropped(), 2);
    }

    #[test]
    fn pending_ticket_is_lost_once_a_lap_passes() {
        let (_b, r) = ring(2);
        let p = LossyMpmcProducer::new(r).unwrap();
        let mut c = LossyMpmcConsumer::new(r).unwrap();
        // Ticket 1 is claimed but never written (its producer died).
        r.claim_seq().fetch_add(1, Ordering::Relaxed);
        assert_eq!(recv(&mut c), None);
        assert_eq!(c.pending(), Some(1));
        let _ = p.push(&2u64.to_le_bytes(), no_clock);
        assert_eq!(recv(&mut c), None, "claim_seq 3 is not past 1 + 2");
        // Ticket 3 shares ticket 1's slot, which was never written: it stalls, and takes the
        // slot over once the (fast) clock passes the deadline.
        let mut t = 0u64;
        let fast = || {
            t += 5_000_000;
            t
        };
        assert!(matches!(
            p.push(&3u64.to_le_bytes(), fast),
            LossyPush::Published { seq: 3, .. }
        ));
        // claim_seq 4 > 1 + 2: ticket 1 is lost, then ticket 2 is delivered.
        assert_eq!(recv(&mut c), Some((2, 2)));
        assert_eq!(c.dropped(), 1);
        assert_eq!(recv(&mut c), Some((3, 3)));
    }

    #[test]
    fn newer_lap_in_the_slot_discards_the_message() {
        let (_b, r) = ring(2);
        let p = LossyMpmcProducer::new(r).unwrap();
        r.slot_seq(1).store(3, Ordering::Relaxed);
        assert_eq!(
            p.push(&1u64.to_le_bytes(), no_clock),
            LossyPush::Discarded { seq: 1 }
        );
        assert_eq!(r.write_seq().load(Ordering::Relaxed), 0);
    }

    #[test]
    fn stalled_slot_is_taken_over_after_the_deadline() {
        let (_b, r) = ring(2);
        let p = LossyMpmcProducer::new(r).unwrap();
        // Ticket 3 expects slot 1 to hold ticket 1, but it holds 0 (ticket 1 was dropped).
        r.claim_seq().store(3, Ordering::Relaxed);
        let mut t = 0u64;
        let mut calls = 0u32;
        let out = p.push(&9u64.to_le_bytes(), || {
            calls += 1;
            t += 1_000_000; // 1 ms per check
            t
        });
        assert_eq!(
            out,
            LossyPush::Published {
                seq: 3,
                wake: false
            }
        );
        // Deadline set at the first check (t = 1 ms), passed at t = 11 ms.
        assert_eq!(calls, 11);
        let mut b = [0u8; 8];
        assert_eq!(r.read_slot(3, &mut b), SlotRead::Ok);
        assert_eq!(u64::from_le_bytes(b), 9);
    }

    #[test]
    fn a_healed_mid_write_slot_is_taken_over_once_and_its_torn_ticket_is_never_delivered() {
        let (_b, r) = ring(2);
        let p = LossyMpmcProducer::new(r).unwrap();
        let mut c = LossyMpmcConsumer::new(r).unwrap();
        // A producer drew ticket 1, marked its slot mid-write, copied half its payload and
        // died.
        assert_eq!(r.claim_seq().fetch_add(1, Ordering::Relaxed), 1);
        r.slot_seq(1).store(SLOT_WRITING, Ordering::Relaxed);
        r.write_slot_at(1, 8, &0xdead_u64.to_le_bytes());
        r.slot_seq(1).store(SLOT_WRITING, Ordering::Relaxed);
        // A consumer drew ticket 1 and waits on it.
        assert_eq!(recv(&mut c), None);
        assert_eq!(c.pending(), Some(1));

        assert_eq!(p.next_mid_write_slot(0), Some(1));
        assert_eq!(p.next_mid_write_slot(2), None);
        assert_eq!(p.heal_mid_write_slot(1), Ok(()));
        assert_eq!(r.slot_seq(1).load(Ordering::Relaxed), 0);
        assert_eq!(p.next_mid_write_slot(0), None);
        assert_eq!(
            p.heal_mid_write_slot(1),
            Err(LossyHealError::NotMidWrite { index: 1, seq: 0 })
        );
        assert_eq!(
            p.heal_mid_write_slot(2),
            Err(LossyHealError::BadIndex {
                index: 2,
                capacity: 2
            })
        );
        // The healed word is below the ticket: still pending, nothing torn delivered.
        assert_eq!(recv(&mut c), None);

        assert!(matches!(
            p.push(&2u64.to_le_bytes(), no_clock),
            LossyPush::Published { seq: 2, .. }
        ));
        // Ticket 3 lands on the healed slot: it finds 0, not its expected 1, and takes the
        // slot over once the deadline passed (a clock of 2 ms per read).
        let mut t = 0u64;
        let out = p.push(&3u64.to_le_bytes(), || {
            t += 2_000_000;
            t
        });
        assert!(
            matches!(out, LossyPush::Published { seq: 3, .. }),
            "{out:?}"
        );
        // Ticket 1 is lost (its slot holds 3 now), and counted; 2 and 3 are delivered.
        assert_eq!(recv(&mut c), Some((2, 2)));
        assert_eq!(c.dropped(), 1);
        assert_eq!(recv(&mut c), Some((3, 3)));
        // The next laps take the slot at once (the clock is never read).
        for s in 4..=7u64 {
            assert!(matches!(
                p.push(&s.to_le_bytes(), no_clock),
                LossyPush::Published { seq, .. } if seq == s
            ));
            assert_eq!(recv(&mut c), Some((s, s)));
        }
        assert_eq!(c.dropped(), 1);
    }

    #[test]
    fn slot_stuck_mid_write_drops_the_message() {
        let (_b, r) = ring(2);
        let p = LossyMpmcProducer::new(r).unwrap();
        r.slot_seq(1).store(SLOT_WRITING, Ordering::Relaxed);
        let mut t = 0u64;
        let out = p.push(&9u64.to_le_bytes(), || {
            t += 2_000_000;
            t
        });
        assert_eq!(out, LossyPush::Dropped { seq: 1 });
        assert_eq!(r.slot_seq(1).load(Ordering::Relaxed), SLOT_WRITING);
    }

    #[test]
    fn corrupt_claim_seq_is_refused_at_new() {
        let (_b, r) = ring(4);
        for c in [u64::MAX, u64::MAX - 1, SEQ_LIMIT] {
            r.claim_seq().store(c, Ordering::Relaxed);
            assert_eq!(
                LossyMpmcProducer::new(r).unwrap_err(),
                AttachError::ClaimSeqExhausted { claim_seq: c }
            );
        }
        r.claim_seq().store(SEQ_LIMIT - 1, Ordering::Relaxed);
        assert!(LossyMpmcProducer::new(r).is_ok(), "the last valid ticket");
    }

    #[test]
    fn ticket_past_the_limit_is_never_written_nor_published() {
        // From a review: a claim_seq of u64::MAX handed out the write marker (spec §0.1) as a
        // ticket and published it; write_seq stuck at u64::MAX and claim_seq wrapped to 0.
        let (_b, r) = ring(4);
        let p = LossyMpmcProducer::new(r).unwrap();
        assert_eq!(
            p.push(&1u64.to_le_bytes(), no_clock),
            LossyPush::Published {
                seq: 1,
                wake: false
            }
        );
        let slots = || -> Vec<u64> {
            (0..4)
                .map(|i| r.slot_seq(i).load(Ordering::Relaxed))
                .collect()
        };
        // A clock that passes the takeover deadline at once, as the review's reproduction had.
        let fast = || {
            let mut t = 0u64;
            move || {
                t += TAKEOVER_NS;
                t
            }
        };
        // Another process scribbles on claim_seq after we attached.
        for c in [u64::MAX, u64::MAX - 1, SEQ_LIMIT] {
            r.claim_seq().store(c, Ordering::Relaxed);
            assert_eq!(
                p.try_push(&2u64.to_le_bytes(), fast()),
                Err(TicketExhausted { ticket: c })
            );
            assert_eq!(
                p.push(&2u64.to_le_bytes(), fast()),
                LossyPush::Dropped { seq: c }
            );
            // Nothing written or published; the ticket was given back (no wrap to 0).
            assert_eq!(slots(), [0, 1, 0, 0]);
            assert_eq!(r.write_seq().load(Ordering::Relaxed), 1);
            assert_eq!(r.claim_seq().load(Ordering::Relaxed), c);
        }
        // The last valid ticket is published as in ringfire; the one after it is refused.
        let last = SEQ_LIMIT - 1;
        r.claim_seq().store(last, Ordering::Relaxed);
        r.slot_seq(last).store(last - 4, Ordering::Relaxed);
        assert_eq!(
            p.try_push(&3u64.to_le_bytes(), no_clock),
            Ok(LossyPush::Published {
                seq: last,
                wake: false
            })
        );
        assert_eq!(r.write_seq().load(Ordering::Relaxed), last);
        assert_eq!(
            p.try_push(&4u64.to_le_bytes(), no_clock),
            Err(TicketExhausted { ticket: SEQ_LIMIT })
        );
        assert_eq!(r.write_seq().load(Ordering::Relaxed), last);
        let mut b = [0u8; 8];
        assert_eq!(r.read_slot(last, &mut b), SlotRead::Ok);
        assert_eq!(u64::from_le_bytes(b), 3);
    }

    #[test]
    fn a_read_seq_of_zero_is_never_claimed_as_ticket_0() {
        // Found by a corruption audit: `read_seq` scribbled to 0 under an attached consumer
        // made it claim ticket 0, whose slot word (0 since creation) read as published, and
        // deliver the slot's zeros as message 0.
        let (_b, r) = ring(4);
        let p = LossyMpmcProducer::new(r).unwrap();
        let mut c = LossyMpmcConsumer::new(r).unwrap();
        for v in [10u64, 20, 30] {
            assert!(matches!(
                p.push(&v.to_le_bytes(), no_clock),
                LossyPush::Published { .. }
            ));
        }
        assert_eq!(recv(&mut c), Some((1, 10)));
        r.read_seq().store(0, Ordering::Relaxed);
        // Tickets 1 and 2 again (the counter went backwards), never a ticket 0.
        assert_eq!(recv(&mut c), Some((1, 10)));
        assert_eq!(recv(&mut c), Some((2, 20)));
        assert_eq!(recv(&mut c), Some((3, 30)));
        assert_eq!(recv(&mut c), None);
        assert_eq!(c.dropped(), 0);
        // With a lap pushed since, the floor is past 1 and the skip counts from ticket 1.
        for v in 40..46u64 {
            assert!(matches!(
                p.push(&v.to_le_bytes(), no_clock),
                LossyPush::Published { .. }
            ));
        }
        r.read_seq().store(0, Ordering::Relaxed);
        assert_eq!(recv(&mut c), Some((6, 42)));
        assert_eq!(c.dropped(), 5);
    }

    #[test]
    fn a_claim_seq_of_zero_never_publishes_ticket_0() {
        // Found by a corruption probe: `claim_seq` scribbled to 0 handed out ticket 0, and the
        // push stored it as the slot's word (0, "never written") and reported it published.
        // No consumer takes ticket 0 (see a_read_seq_of_zero_is_never_claimed_as_ticket_0),
        // so the message was neither received nor counted lost by anyone.
        let (_b, r) = ring(4);
        let p = LossyMpmcProducer::new(r).unwrap();
        let mut c = LossyMpmcConsumer::new(r).unwrap();
        for (scribbled_read_seq, v) in [(0u64, 10u64), (1, 20)] {
            r.claim_seq().store(0, Ordering::Relaxed);
            r.read_seq().store(scribbled_read_seq, Ordering::Relaxed);
            // The slot of the next ticket after 0 holds the lap before it, as on a fresh ring.
            r.slot_seq(1).store(0, Ordering::Relaxed);
            assert_eq!(
                p.push(&v.to_le_bytes(), no_clock),
                LossyPush::Published {
                    seq: 1,
                    wake: false
                }
            );
            assert_eq!(r.claim_seq().load(Ordering::Relaxed), 2);
            assert_eq!(r.slot_seq(0).load(Ordering::Relaxed), 0, "slot 0 untouched");
            assert_eq!(r.write_seq().load(Ordering::Relaxed), 1);
            assert_eq!(recv(&mut c), Some((1, v)));
            assert_eq!((recv(&mut c), c.dropped()), (None, 0));
        }
    }

    #[test]
    fn a_consumer_refuses_a_read_seq_past_claim_seq_or_an_exhausted_claim_seq() {
        // Found by a corruption audit: `read_seq` scribbled past `claim_seq` was accepted,
        // and the consumer then received none of the next messages (`read_seq >=
        // claim_seq` reads as empty) and counted none of them lost: the first 100 pushes
        // after the scribble vanished uncounted.
        let (_b, r) = ring(4);
        let p = LossyMpmcProducer::new(r).unwrap();
        assert!(matches!(
            p.push(&1u64.to_le_bytes(), no_clock),
            LossyPush::Published { seq: 1, .. }
        ));
        // claim_seq 2: read_seq may be anything up to it (2 once ticket 1 is taken).
        for read_seq in [0, 1, 2] {
            r.read_seq().store(read_seq, Ordering::Relaxed);
            assert!(LossyMpmcConsumer::new(r).is_ok(), "read_seq {read_seq}");
        }
        for read_seq in [3, 102, u64::MAX] {
            r.read_seq().store(read_seq, Ordering::Relaxed);
            assert_eq!(
                LossyMpmcConsumer::new(r).unwrap_err(),
                AttachError::ReadSeqPastClaimSeq {
                    read_seq,
                    claim_seq: 2
                }
            );
        }
        // A claim_seq no ticket can be drawn from: refused as a producer refuses it (the
        // consumer counted 2^64 - 10 tickets lost on a u64::MAX and received nothing).
        r.read_seq().store(2, Ordering::Relaxed);
        for claim_seq in [SEQ_LIMIT, u64::MAX] {
            r.claim_seq().store(claim_seq, Ordering::Relaxed);
            assert_eq!(
                LossyMpmcConsumer::new(r).unwrap_err(),
                AttachError::ClaimSeqExhausted { claim_seq }
            );
        }
        r.claim_seq().store(SEQ_LIMIT - 1, Ordering::Relaxed);
        assert!(LossyMpmcConsumer::new(r).is_ok());
        assert_eq!(
            AttachError::ReadSeqPastClaimSeq {
                read_seq: 102,
                claim_seq: 2
            }
            .to_string(),
            "MPMC read_seq 102 is past claim_seq 2 (a corrupt header): consumers would take no \
             ticket until 100 more were claimed, and count none of them lost"
        );
    }

    /// `write_seq` at or past `claim_seq` (below 2^63): a corrupt header, since a producer
    /// claims its ticket before it publishes it. The tools refuse it
    /// ([`RingView::checked_write_seq`], naming both values); `write_seq` one below
    /// `claim_seq` is sound, and a single-writer ring (its `claim_seq` is 0) is not judged.
    /// Producers and queue consumers accept it, with a clear behaviour (documented on their
    /// attach): consumers never read `write_seq` and receive every ticket, and a producer's
    /// publish leaves it where it is until tickets pass it (its `fetch_max` only raises it).
    #[test]
    fn a_write_seq_past_claim_seq_is_refused_by_the_tools_not_by_producers_or_consumers() {
        let (_b, r) = ring(4);
        let p = LossyMpmcProducer::new(r).unwrap();
        for v in [10u64, 20] {
            assert!(matches!(
                p.push(&v.to_le_bytes(), no_clock),
                LossyPush::Published { .. }
            ));
        }
        assert_eq!(
            r.checked_write_seq(),
            Ok(2),
            "every ticket drawn is published"
        );
        for w in [3, 102, SEQ_LIMIT - 1] {
            r.write_seq().store(w, Ordering::Relaxed);
            assert_eq!(
                r.checked_write_seq(),
                Err(AttachError::WriteSeqPastClaimSeq {
                    write_seq: w,
                    claim_seq: 3
                })
            );
        }
        // At the limit, the limit's own refusal comes first.
        r.write_seq().store(SEQ_LIMIT, Ordering::Relaxed);
        assert_eq!(
            r.checked_write_seq(),
            Err(AttachError::WriteSeqExhausted {
                write_seq: SEQ_LIMIT
            })
        );
        r.write_seq().store(102, Ordering::Relaxed);
        let p = LossyMpmcProducer::new(r).unwrap();
        let mut c = LossyMpmcConsumer::new(r).unwrap();
        assert_eq!(
            p.push(&30u64.to_le_bytes(), no_clock),
            LossyPush::Published {
                seq: 3,
                wake: false
            }
        );
        assert_eq!(r.write_seq().load(Ordering::Relaxed), 102);
        assert_eq!(recv(&mut c), Some((1, 10)));
        assert_eq!(recv(&mut c), Some((2, 20)));
        assert_eq!(recv(&mut c), Some((3, 30)));
        assert_eq!((recv(&mut c), c.dropped()), (None, 0));
        assert_eq!(
            AttachError::WriteSeqPastClaimSeq {
                write_seq: 102,
                claim_seq: 4
            }
            .to_string(),
            "MPMC write_seq 102 is at or past claim_seq 4 (a corrupt header): no producer \
             publishes a ticket it has not claimed, so the window it places holds records never \
             published"
        );
        let mut buf = words(64);
        let g = Geometry::spmc(4, 16, 8, 0, false).unwrap();
        // SAFETY: the test's own buffer, used only while it lives.
        let r = unsafe { Region::from_raw_parts(buf.as_mut_ptr().cast(), buf.len() * 8) }.unwrap();
        // SAFETY: as above; no other view of it exists.
        let v = unsafe { RingView::init(r, &g) }.unwrap();
        v.write_seq().store(9, Ordering::Relaxed);
        assert_eq!(v.checked_write_seq(), Ok(9));
    }

    #[test]
    fn broadcast_ring_is_refused() {
        let g = Geometry::spmc(4, 16, 8, 0, false).unwrap();
        let mut buf = words(g.total_len().unwrap() as usize / 8);
        // SAFETY: the buffer outlives the region.
        let r = unsafe { Region::from_raw_parts(buf.as_mut_ptr().cast(), buf.len() * 8) }.unwrap();
        // SAFETY: the test's own buffer, no other view of it exists yet.
        let v = unsafe { RingView::init(r, &g) }.unwrap();
        assert_eq!(
            LossyMpmcProducer::new(v).unwrap_err(),
            AttachError::WrongKind {
                flags: 0x0011,
                need: "an MPMC ring"
            }
        );
    }
}
