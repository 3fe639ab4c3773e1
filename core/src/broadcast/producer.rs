//! [`Producer`]: the single writer of a broadcast ring (spec §4.2, §6, §11 producer side,
//! §21.2 for the raw mirror API).

use core::ops::Range;

use crate::error::AttachError;
use crate::layout::{Flags, SEQ_LIMIT, next_write_seq};
use crate::ring::RingView;
use crate::sync::Ordering;

/// Wakes readers asleep on the ring's futex word (spec §11).
///
/// The core only decides *whether* to wake: after a publish, if `waiting_consumers > 0`, it
/// bumps `futex_word` and calls [`Wake::wake`]. The std adapter implements this with a
/// shared (not private) `FUTEX_WAKE` of all waiters on `view.futex_word().as_ptr()`.
pub trait Wake {
    /// Wakes every sleeper of `view`. Called only when someone was waiting, after
    /// `futex_word` was incremented.
    fn wake(&self, view: &RingView);
}

/// A [`Wake`] that does nothing: for rings nobody sleeps on (firmware, tests, spinning
/// readers). Sleepers still bound their wait with a timeout (spec §11), so nothing hangs.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoWake;

impl Wake for NoWake {
    #[inline(always)]
    fn wake(&self, _view: &RingView) {}
}

/// A lossless [`Producer::try_push`] was refused: the slowest registered reader is a whole
/// gate window behind (spec §6, ringfire's *BackpressureBufferFull*).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Full {
    /// The sequence that could not be written.
    pub seq: u64,
    /// The gate limit in force: only sequences below it may be written.
    pub gate_limit: u64,
}

impl core::fmt::Display for Full {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "ring full: sequence {} is not below the gate limit {} set by the slowest reader",
            self.seq, self.gate_limit
        )
    }
}

impl core::error::Error for Full {}

/// A push refused without writing anything: the sequence it would have written, `seq`, is
/// at or past [`SEQ_LIMIT`], which no record gets (`u64::MAX` is the write marker, spec
/// §0.1). Only a producer that started from a corrupt `write_seq` just below the limit, or
/// was moved there by [`Producer::skip_to`] or [`Producer::write_raw`], gets here: from
/// sequence 1, 2^63 records at 10^10 a second take 29 years.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SeqExhausted {
    /// The sequence that could not be written.
    pub seq: u64,
}

impl core::fmt::Display for SeqExhausted {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "sequence {:#x} is at or past the sequence limit {SEQ_LIMIT:#x}: nothing was written",
            self.seq
        )
    }
}

impl core::error::Error for SeqExhausted {}

/// Why [`Producer::try_push`] wrote nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TryPushError {
    /// The lossless gate is closed: the slowest registered reader is a whole window behind.
    /// A later push may succeed.
    Full(Full),
    /// No sequence is left below [`SEQ_LIMIT`]; no later push succeeds either.
    Exhausted(SeqExhausted),
}

impl From<Full> for TryPushError {
    fn from(e: Full) -> Self {
        TryPushError::Full(e)
    }
}

impl From<SeqExhausted> for TryPushError {
    fn from(e: SeqExhausted) -> Self {
        TryPushError::Exhausted(e)
    }
}

impl core::fmt::Display for TryPushError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            TryPushError::Full(e) => e.fmt(f),
            TryPushError::Exhausted(e) => e.fmt(f),
        }
    }
}

/// Transparent: its text is the refusal's own, so it has no `source` that would repeat it.
impl core::error::Error for TryPushError {}

/// The refusal of a push at `seq`, out of line: the check that calls it is one test of
/// `seq`'s top bit on the push path.
#[cold]
#[inline(never)]
fn exhausted(seq: u64) -> SeqExhausted {
    SeqExhausted { seq }
}

/// The lossless gate's cached state (spec §6).
#[derive(Clone, Copy, Debug)]
struct Gate {
    /// Sequences below this may be written without looking at the registry.
    limit: u64,
    /// Consecutive refused `try_push` calls; every 1024th prunes dead readers.
    blocked: u64,
    /// Liveness test for pruning dead readers, if the platform has one.
    is_alive: Option<fn(u32, u64) -> bool>,
}

/// The single writer of a broadcast ring.
///
/// It keeps `next` (the next sequence to write) and the last value it stored into
/// `write_seq` to itself, so the hot path loads nothing from the header.
#[derive(Debug)]
pub struct Producer<W: Wake = NoWake> {
    view: RingView,
    wake: W,
    /// Next sequence to write.
    next: u64,
    /// Last value stored into `write_seq` (the producer is its only writer).
    published: u64,
    /// Last sequence written by [`Producer::write_raw`] (`published` when none is pending):
    /// what [`Producer::commit`] publishes, which after a [`Producer::skip_to`] is below
    /// `next - 1`.
    written: u64,
    gate: Option<Gate>,
    /// What a push does beyond the plain one (lossy ring, publish without a fence): bit
    /// [`LOSSLESS`] for a gate, bit [`FENCED`] to publish with a full fence (no membarrier
    /// on this platform, see `set_fenced_publish`). One byte for both, so that the caller's
    /// single test of it ([`Producer::is_plain`]) also tells the inlined push that its
    /// publish is unfenced, and the push carries no second branch for it.
    mode: u8,
}

/// What a single writer needs, as its `WrongKind` errors name it.
pub(crate) const SINGLE_WRITER: &str = "a single-writer ring";

/// The ring's flags if they carry `MODE_MPMC` (many writers claim tickets there, spec §8),
/// which a single writer refuses: the check of [`Producer::new`] and of the blob writer's.
pub(crate) fn many_writers(view: &RingView) -> Option<u32> {
    let flags = view.geometry().flags;
    flags.has(Flags::MODE_MPMC).then_some(flags.0)
}

/// [`Producer::mode`] bit: the ring is lossless (the producer has a gate).
const LOSSLESS: u8 = 1;
/// [`Producer::mode`] bit: publish with a full fence.
const FENCED: u8 = 2;

impl<W: Wake> Producer<W> {
    /// Becomes the writer of `view`, continuing at `write_seq + 1` (1 for a fresh ring).
    ///
    /// The caller must be the ring's only writer (it holds the creator's lock, or it is the
    /// mirror that owns the ring). MPMC rings have many writers and their own protocol
    /// (spec §8), so they are refused with [`AttachError::WrongKind`]. A `write_seq` that
    /// leaves no sequence below [`SEQ_LIMIT`] to write (`SEQ_LIMIT - 1` or more: a corrupt
    /// header, [`next_write_seq`]) is refused with [`AttachError::WriteSeqExhausted`].
    pub fn new(view: RingView, wake: W) -> Result<Self, AttachError> {
        if let Some(flags) = many_writers(&view) {
            return Err(AttachError::WrongKind {
                flags,
                need: SINGLE_WRITER,
            });
        }
        let flags = view.geometry().flags;
        // Relaxed: we are the only writer, so the value we read is the last one stored.
        let published = view.write_seq().load(Ordering::Relaxed);
        let next = next_write_seq(published)?;
        let gate = flags
            .has(Flags::POLICY_LOSSLESS_BACKPRESSURE)
            .then_some(Gate {
                limit: 0,
                blocked: 0,
                is_alive: None,
            });
        Ok(Producer {
            view,
            wake,
            next,
            published,
            written: published,
            gate,
            mode: if gate.is_some() { LOSSLESS } else { 0 },
        })
    }

    /// Publishes with [`RingView::publish_fenced`] (a SeqCst fence per publish) instead of
    /// [`RingView::publish`]. Use it where sleepers cannot rely on `membarrier` (firmware,
    /// or when the producer's membarrier registration failed, spec §11): then no wake-up is
    /// lost even before a sleeper's timeout.
    pub fn set_fenced_publish(&mut self, fenced: bool) {
        if fenced {
            self.mode |= FENCED;
        } else {
            self.mode &= !FENCED;
        }
    }

    /// True when a push is the plain one: a lossy ring, published without a full fence.
    /// A caller that tests this before [`Producer::push_at`] gets the push inlined with
    /// neither the gate's nor the fence's branch; the others go to [`Producer::try_push_at`].
    #[inline(always)]
    pub fn is_plain(&self) -> bool {
        self.mode == 0
    }

    /// True when the ring is lossless (flag `POLICY_LOSSLESS_BACKPRESSURE`):
    /// [`Producer::try_push`] then refuses to lap the slowest registered reader.
    #[inline(always)]
    pub fn is_lossless(&self) -> bool {
        self.gate.is_some()
    }

    /// Gives a lossless producer a liveness test of a slot's pid and token (the std side
    /// passes its `kill(pid, 0)` and `/proc` check, see the [`registry`](super::registry)
    /// module): every 1024th refused [`Producer::try_push`] then frees the registry slots of
    /// dead readers (spec §6, §9) and retries. Without one, dead readers are never pruned
    /// here (the caller can run [`registry::prune_dead`](super::registry::prune_dead)).
    pub fn set_is_alive(&mut self, is_alive: fn(u32, u64) -> bool) {
        if let Some(g) = &mut self.gate {
            g.is_alive = Some(is_alive);
        }
    }

    /// The cached gate limit: sequences below it may be written without looking at the
    /// registry. `u64::MAX` on a lossy ring.
    #[inline(always)]
    pub fn gate_limit(&self) -> u64 {
        self.gate.map_or(u64::MAX, |g| g.limit)
    }

    /// Recomputes the gate limit from the registry (spec §6) and caches it.
    pub fn refresh_gate(&mut self) -> u64 {
        let limit = super::registry::gate_limit(&self.view, self.next);
        match &mut self.gate {
            Some(g) => {
                g.limit = limit;
                limit
            }
            None => u64::MAX,
        }
    }

    /// Publishes one record unless that would lap the slowest registered reader of a
    /// lossless ring (spec §6, [`TryPushError::Full`]). On a lossy ring this is
    /// [`Producer::push`], which fails only at [`SEQ_LIMIT`] ([`TryPushError::Exhausted`]).
    ///
    /// The cached gate limit is refreshed from the registry only when the next sequence
    /// reaches it. Every 1024th consecutive refusal prunes dead readers first (if
    /// [`Producer::set_is_alive`] was given a test). A blocking push (spin, yield, sleep,
    /// retry) is the std adapter's job.
    #[inline]
    pub fn try_push(&mut self, payload: &[u8]) -> Result<u64, TryPushError> {
        self.try_push_at(8, payload)
    }

    /// [`Producer::try_push`] with the payload `poff` bytes into the slot (see
    /// [`Producer::push_at`]).
    #[inline]
    pub fn try_push_at(&mut self, poff: usize, payload: &[u8]) -> Result<u64, TryPushError> {
        if let Some(g) = self.gate
            && self.next >= g.limit
        {
            self.gate_blocked()?;
        }
        Ok(self.push_at(poff, payload)?)
    }

    /// Slow path of `try_push`: refresh the gate, prune on every 1024th refusal.
    #[cold]
    fn gate_blocked(&mut self) -> Result<(), Full> {
        let seq = self.next;
        let mut limit = self.refresh_gate();
        let Some(g) = &mut self.gate else {
            return Ok(());
        };
        if seq < limit {
            g.blocked = 0;
            return Ok(());
        }
        g.blocked += 1;
        if g.blocked % 1024 == 0
            && let Some(is_alive) = g.is_alive
            && super::registry::prune_dead_by(&self.view, is_alive, |_| {}) > 0
        {
            limit = self.refresh_gate();
        }
        if seq < limit {
            if let Some(g) = &mut self.gate {
                g.blocked = 0;
            }
            return Ok(());
        }
        Err(Full {
            seq,
            gate_limit: limit,
        })
    }

    /// The ring this producer writes.
    #[inline(always)]
    pub fn view(&self) -> &RingView {
        &self.view
    }

    /// The waker.
    #[inline(always)]
    pub fn waker(&self) -> &W {
        &self.wake
    }

    /// The highest published sequence (the value of `write_seq`), 0 if none.
    #[inline(always)]
    pub fn write_seq(&self) -> u64 {
        self.published
    }

    /// The sequence the next record will get.
    #[inline(always)]
    pub fn next_seq(&self) -> u64 {
        self.next
    }

    /// Publishes one record (spec §4.2 steps 1–6) and returns its sequence.
    ///
    /// `payload` is the raw slot bytes after the sequence word; it is truncated to
    /// `element_size - 8`, and a shorter payload leaves the rest of the slot's previous
    /// bytes beyond its last (zero-completed) word. This never waits, even on a lossless
    /// ring: use [`Producer::try_push`] to respect the gate. A push whose sequence would be
    /// [`SEQ_LIMIT`] writes nothing and fails with [`SeqExhausted`] (see there).
    #[inline]
    pub fn push(&mut self, payload: &[u8]) -> Result<u64, SeqExhausted> {
        self.push_at(8, payload)
    }

    /// [`Producer::push`] for a record type whose payload starts `poff` bytes into the slot:
    /// an over-aligned type (spec §4.1) is written at its alignment and the slot bytes
    /// `[8, poff)` are left alone ([`RingView::write_slot_at`]; `poff` must be a multiple of
    /// 8 in `8..=element_size`, any other value is taken as 8).
    #[inline]
    pub fn push_at(&mut self, poff: usize, payload: &[u8]) -> Result<u64, SeqExhausted> {
        // Read before the slot's release stores, after which the compiler would load it
        // again: a caller's `is_plain` test then folds the fenced branch away.
        let fenced = self.mode & FENCED != 0;
        let seq = self.next;
        // `next` never passes SEQ_LIMIT (attach, skip_to and write_raw keep it at or below),
        // so this is a test of its top bit, in the register it was loaded into.
        if seq >= SEQ_LIMIT {
            return Err(exhausted(seq));
        }
        // Spec §4.2 steps 1-5 as `write_slot_at` then `publish`, in one call that locates
        // the header words only once; step 6 below.
        let sleepers = self.view.write_publish_at(seq, poff, payload, fenced);
        self.next = seq + 1;
        self.published = seq;
        if sleepers {
            self.wake_sleepers();
        }
        Ok(seq)
    }

    /// Writes every record of `records` into its slot, then publishes once (one `write_seq`
    /// store and at most one wake for the whole batch). Returns the sequences written.
    /// A record whose sequence would be [`SEQ_LIMIT`] is not written: the records before it
    /// are published, and [`SeqExhausted`] names it (they are `first..seq`, where `first`
    /// was [`Producer::next_seq`] before the call).
    ///
    /// A batch longer than the ring publishes once more per lap: before writing a record a
    /// lap past `write_seq`, it publishes the records before it. Readers take a slot that
    /// holds a sequence more than a lap past `write_seq` for a corrupt one
    /// ([`lap_possible`](crate::layout::lap_possible)); without these publishes, a raw
    /// reader (a replication source) that met such a slot in the middle of the batch took
    /// the record it asked for as lost to corruption and moved on by one record, instead of
    /// to the oldest record the ring holds.
    pub fn push_batch<'a, I>(&mut self, records: I) -> Result<Range<u64>, SeqExhausted>
    where
        I: IntoIterator<Item = &'a [u8]>,
    {
        self.push_batch_at(8, records)
    }

    /// [`Producer::push_batch`] with every payload `poff` bytes into its slot (see
    /// [`Producer::push_at`]).
    pub fn push_batch_at<'a, I>(
        &mut self,
        poff: usize,
        records: I,
    ) -> Result<Range<u64>, SeqExhausted>
    where
        I: IntoIterator<Item = &'a [u8]>,
    {
        let first = self.next;
        let cap = self.view.capacity();
        for r in records {
            // As in push_at: a test of the top bit.
            if self.next >= SEQ_LIMIT {
                if self.next > first {
                    self.publish(self.next - 1);
                }
                return Err(exhausted(self.next));
            }
            // `next - published` is at most a lap: every slot then holds a sequence at most
            // a lap past `write_seq`, as `lap_possible` expects.
            if self.next - self.published > cap {
                self.publish(self.next - 1);
            }
            self.view.write_slot_at(self.next, poff, r);
            self.next += 1;
        }
        if self.next > first {
            self.publish(self.next - 1);
        }
        Ok(first..self.next)
    }

    /// Step 5 and 6 of spec §4.2: release-store `write_seq` (inside `view.publish`), then
    /// wake sleepers if there are any.
    #[inline(always)]
    fn publish(&mut self, seq: u64) {
        self.published = seq;
        if self.view.publish_with(seq, self.mode & FENCED != 0) {
            self.wake_sleepers();
        }
    }

    /// The wake of step 6, out of line: the push that inlines into its caller stays small
    /// when nobody sleeps (the common case on a spinning reader's ring).
    #[cold]
    #[inline(never)]
    fn wake_sleepers(&self) {
        self.wake.wake(&self.view);
    }

    // ---- raw mirror API (spec §21.2) ----

    /// Writes a record under sequence `seq` (spec §4.2 steps 1–4) without publishing it.
    ///
    /// A record with `seq < next_seq()` was already written (a duplicate or a repair of
    /// something we have) and is skipped: returns `false` (as for every sequence from
    /// [`SEQ_LIMIT`] up, which a sane source never sends). Otherwise it is written, `next`
    /// becomes `seq + 1`, and `true` is returned. A `seq` above `next` leaves a hole, which
    /// readers of a SPARSE ring skip (§7). Call [`Producer::commit`] once per frame.
    #[inline]
    pub fn write_raw(&mut self, seq: u64, payload: &[u8]) -> bool {
        // u64::MAX is the write marker; refusing everything from SEQ_LIMIT keeps `next` (and
        // every later push) a valid sequence.
        if seq < self.next || seq >= SEQ_LIMIT {
            return false;
        }
        self.view.write_slot(seq, payload);
        self.next = seq + 1;
        self.written = seq;
        true
    }

    /// Publishes everything written with [`Producer::write_raw`]: release-stores
    /// `write_seq` = the last sequence written and wakes sleepers (one publish per frame).
    /// A [`Producer::skip_to`] past the last write publishes nothing (spec §27.9: a GAP or
    /// jump does not move `write_seq`). Does nothing when the last write is already
    /// published. Returns the published `write_seq`.
    pub fn commit(&mut self) -> u64 {
        if self.written > self.published {
            self.publish(self.written);
        }
        self.published
    }

    /// Raises the next write position to `seq` (after a GAP or a jump). Never lowers it, never
    /// raises it past [`SEQ_LIMIT`] and does not touch `write_seq`: readers see the hole once
    /// later records are published. At `SEQ_LIMIT` every later push is refused
    /// ([`SeqExhausted`]) and every raw write skipped.
    #[inline]
    pub fn skip_to(&mut self, seq: u64) {
        if seq > self.next && seq <= SEQ_LIMIT {
            self.next = seq;
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use core::cell::Cell;

    use super::*;
    use crate::broadcast::registry;
    use crate::layout::{Geometry, lap_possible};
    use crate::testutil::{heap_ring, spmc_ring};

    /// Counts wake calls.
    #[derive(Default)]
    struct CountWake(Cell<u32>);
    impl Wake for CountWake {
        fn wake(&self, _view: &RingView) {
            self.0.set(self.0.get() + 1);
        }
    }

    fn slot_bytes(view: &RingView, seq: u64) -> (u64, [u8; 8]) {
        let mut b = [0u8; 8];
        let s = view.slot_seq(seq).load(Ordering::Relaxed);
        // SAFETY: the 8 payload bytes after the slot's sequence word are inside the slot.
        unsafe { view.region().read_words(view.slot_offset(seq) + 8, &mut b) };
        (s, b)
    }

    #[test]
    fn push_numbers_from_one_and_publishes() {
        let (_m, view) = spmc_ring(4, 16);
        let mut p = Producer::new(view, NoWake).unwrap();
        assert_eq!((p.write_seq(), p.next_seq()), (0, 1));
        assert_eq!(p.push(&7u64.to_le_bytes()), Ok(1));
        assert_eq!(p.push(&8u64.to_le_bytes()), Ok(2));
        assert_eq!(view.write_seq().load(Ordering::Relaxed), 2);
        assert_eq!(slot_bytes(&view, 1), (1, 7u64.to_le_bytes()));
        assert_eq!(slot_bytes(&view, 2), (2, 8u64.to_le_bytes()));
        // The fifth record goes into slot 1 and overwrites record 1.
        for v in 3..=5u64 {
            p.push(&v.to_le_bytes()).unwrap();
        }
        assert_eq!(slot_bytes(&view, 5), (5, 5u64.to_le_bytes()));
        assert_eq!(slot_bytes(&view, 1), (5, 5u64.to_le_bytes()));
    }

    #[test]
    fn push_truncates_a_long_payload_to_the_slot() {
        // Element size 16: 8 payload bytes per slot.
        let (_m, view) = spmc_ring(4, 16);
        let mut p = Producer::new(view, NoWake).unwrap();
        let long: [u8; 20] = core::array::from_fn(|i| i as u8 + 1);
        assert_eq!(p.push(&long), Ok(1));
        assert_eq!(slot_bytes(&view, 1), (1, [1, 2, 3, 4, 5, 6, 7, 8]));
        // The next slot (its sequence word follows the payload) is untouched.
        assert_eq!(view.slot_seq(2).load(Ordering::Relaxed), 0);
        // A short payload is zero-completed to its word; one that fits is copied whole.
        assert_eq!(p.push(&[9, 9, 9]), Ok(2));
        assert_eq!(slot_bytes(&view, 2), (2, [9, 9, 9, 0, 0, 0, 0, 0]));
        assert_eq!(p.push(&long[..8]), Ok(3));
        assert_eq!(slot_bytes(&view, 3), (3, [1, 2, 3, 4, 5, 6, 7, 8]));
        assert_eq!(view.write_seq().load(Ordering::Relaxed), 3);
    }

    /// A batch longer than the ring: every slot holds a sequence at most a lap past
    /// `write_seq` at every step (what `lap_possible` and the raw reader rely on), and the
    /// batch ends with its last record published.
    #[test]
    fn a_batch_longer_than_the_ring_keeps_every_slot_within_a_lap_of_write_seq() {
        let (_m, view) = spmc_ring(4, 16);
        let mut p = Producer::new(view, NoWake).unwrap();
        p.push(&[0]).unwrap();
        let recs: [[u8; 1]; 11] = core::array::from_fn(|i| [i as u8 + 1]);
        let checked = Cell::new(0);
        let within_a_lap = || {
            let w = view.write_seq().load(Ordering::Relaxed);
            for i in 0..4u64 {
                let s = view.slot_seq(w + 1 + i).load(Ordering::Relaxed);
                assert!(
                    lap_possible(s, w, 4),
                    "slot {i}: sequence {s} with write_seq {w}"
                );
            }
            checked.set(checked.get() + 1);
        };
        let r = p.push_batch(recs.iter().map(|r| {
            within_a_lap();
            &r[..]
        }));
        within_a_lap();
        assert_eq!((r, checked.get()), (Ok(2..13), 12));
        assert_eq!(view.write_seq().load(Ordering::Relaxed), 12);
        // The last lap of the batch is what the ring holds.
        for s in 9..=12u64 {
            assert_eq!(view.slot_seq(s).load(Ordering::Relaxed), s);
        }
    }

    #[test]
    fn new_continues_after_write_seq() {
        let (_m, view) = spmc_ring(4, 16);
        let mut p = Producer::new(view, NoWake).unwrap();
        p.push_batch([&[1u8][..], &[2], &[3]]).unwrap();
        let mut p = Producer::new(view, NoWake).unwrap();
        assert_eq!((p.write_seq(), p.next_seq()), (3, 4));
        assert_eq!(p.push(&[4]), Ok(4));
    }

    #[test]
    fn refuses_mpmc_rings() {
        let (_m, view) = heap_ring(&Geometry::mpmc(4, 16, 8).unwrap());
        assert_eq!(
            Producer::new(view, NoWake).unwrap_err(),
            AttachError::WrongKind {
                flags: 0x0021,
                need: "a single-writer ring"
            }
        );
    }

    #[test]
    fn wakes_only_when_someone_waits_and_once_per_batch() {
        let (_m, view) = spmc_ring(8, 16);
        let mut p = Producer::new(view, CountWake::default()).unwrap();
        p.push(&[1]).unwrap();
        assert_eq!(p.waker().0.get(), 0);
        assert_eq!(view.futex_word().load(Ordering::Relaxed), 0);
        view.waiting_consumers().store(1, Ordering::Relaxed);
        p.push(&[2]).unwrap();
        assert_eq!(p.waker().0.get(), 1);
        assert_eq!(view.futex_word().load(Ordering::Relaxed), 1);
        let r = p.push_batch([&[3u8][..], &[4], &[5]]).unwrap();
        assert_eq!(r, 3..6);
        assert_eq!(p.waker().0.get(), 2);
        assert_eq!(view.futex_word().load(Ordering::Relaxed), 2);
        assert_eq!(view.write_seq().load(Ordering::Relaxed), 5);
        // An empty batch publishes nothing and wakes nobody.
        assert_eq!(p.push_batch(core::iter::empty()), Ok(6..6));
        assert_eq!(p.waker().0.get(), 2);
    }

    #[test]
    fn fenced_publish_wakes_the_same_way() {
        let (_m, view) = spmc_ring(4, 16);
        let mut p = Producer::new(view, CountWake::default()).unwrap();
        p.set_fenced_publish(true);
        p.push(&[1]).unwrap();
        assert_eq!(p.waker().0.get(), 0);
        view.waiting_consumers().store(2, Ordering::Relaxed);
        assert!(p.write_raw(2, &[2]));
        assert_eq!(p.commit(), 2);
        assert_eq!(p.waker().0.get(), 1);
        assert_eq!(view.futex_word().load(Ordering::Relaxed), 1);
        assert_eq!(view.write_seq().load(Ordering::Relaxed), 2);
    }

    #[test]
    fn plain_only_when_lossy_and_unfenced() {
        let (_m, view) = spmc_ring(4, 16);
        let mut p = Producer::new(view, CountWake::default()).unwrap();
        assert!(p.is_plain());
        p.set_fenced_publish(true);
        assert!(!p.is_plain() && !p.is_lossless());
        // A fenced push publishes and wakes as the plain one does.
        view.waiting_consumers().store(1, Ordering::Relaxed);
        assert_eq!(p.push(&9u64.to_le_bytes()), Ok(1));
        assert_eq!(p.waker().0.get(), 1);
        assert_eq!(view.futex_word().load(Ordering::Relaxed), 1);
        assert_eq!(view.write_seq().load(Ordering::Relaxed), 1);
        assert_eq!(slot_bytes(&view, 1), (1, 9u64.to_le_bytes()));
        p.set_fenced_publish(false);
        assert!(p.is_plain());

        let (_m, view) = lossless_ring(4, 2);
        let mut q = Producer::new(view, NoWake).unwrap();
        assert!(!q.is_plain() && q.is_lossless());
        q.set_fenced_publish(true);
        q.set_fenced_publish(false);
        assert!(
            !q.is_plain() && q.is_lossless(),
            "the fence's bit leaves the gate's"
        );
    }

    #[test]
    fn raw_write_commit_and_skip_to() {
        let (_m, view) = spmc_ring(8, 16);
        let mut p = Producer::new(view, NoWake).unwrap();
        assert!(p.write_raw(5, &[5]));
        assert!(!p.write_raw(3, &[3]), "below next: skipped");
        assert!(!p.write_raw(5, &[0xEE]), "duplicate: skipped");
        assert_eq!(slot_bytes(&view, 5).1[0], 5);
        assert_eq!(slot_bytes(&view, 3).0, 0, "skipped record not written");
        // Nothing is visible before commit.
        assert_eq!(view.write_seq().load(Ordering::Relaxed), 0);
        assert_eq!(p.commit(), 5);
        assert_eq!(view.write_seq().load(Ordering::Relaxed), 5);
        p.skip_to(10);
        assert_eq!(p.next_seq(), 10);
        assert_eq!(
            view.write_seq().load(Ordering::Relaxed),
            5,
            "skip_to leaves write_seq"
        );
        p.skip_to(7);
        assert_eq!(p.next_seq(), 10, "skip_to never lowers next");
        assert!(!p.write_raw(9, &[9]));
        assert!(p.write_raw(10, &[10]));
        assert!(p.write_raw(11, &[11]));
        assert_eq!(p.commit(), 11);
        assert_eq!(p.commit(), 11, "a second commit publishes nothing new");
        assert_eq!(p.push(&[12]), Ok(12));
        // Reserved sequences never enter the ring.
        assert!(!p.write_raw(u64::MAX, &[0]));
        assert!(!p.write_raw(u64::MAX - 1, &[0]));
        p.skip_to(u64::MAX);
        assert_eq!(p.next_seq(), 13);
    }

    #[test]
    fn commit_after_skip_to_publishes_only_written_records() {
        // From a review: write_raw(1); commit(); skip_to(5); commit() published 4, a sequence
        // never written (spec §27.9: a GAP or jump does not move write_seq).
        let (_m, view) = spmc_ring(8, 16);
        let mut p = Producer::new(view, CountWake::default()).unwrap();
        view.waiting_consumers().store(1, Ordering::Relaxed);
        assert!(p.write_raw(1, &[1]));
        assert_eq!(p.commit(), 1);
        p.skip_to(5);
        assert_eq!(p.commit(), 1, "a jump alone publishes nothing");
        assert_eq!(view.write_seq().load(Ordering::Relaxed), 1);
        assert_eq!(p.waker().0.get(), 1, "and wakes nobody");
        // A write before the jump is still published, up to itself only.
        assert!(p.write_raw(5, &[5]));
        assert!(p.write_raw(6, &[6]));
        p.skip_to(9);
        assert_eq!(p.commit(), 6);
        assert_eq!(view.write_seq().load(Ordering::Relaxed), 6);
        // After a push (which publishes itself), commit has nothing left to publish.
        assert_eq!(p.push(&[9]), Ok(9));
        p.skip_to(12);
        assert_eq!(p.commit(), 9);
        assert_eq!(p.next_seq(), 12);
    }

    #[test]
    fn corrupt_write_seq_cannot_overflow_next() {
        // Found by fuzz/fuzz_targets/region.rs: a scribbled write_seq of u64::MAX made
        // `next` u64::MAX (the slot marker) and the next push overflowed.
        let (_m, view) = heap_ring(&Geometry::spmc(4, 16, 8, 0, false).unwrap());
        for w in [u64::MAX, u64::MAX - 1, SEQ_LIMIT, SEQ_LIMIT - 1] {
            view.write_seq().store(w, Ordering::Relaxed);
            assert_eq!(
                Producer::new(view, NoWake).unwrap_err(),
                AttachError::WriteSeqExhausted { write_seq: w }
            );
        }
        // A jump or a raw write never takes `next` past the limit.
        let (_m2, view2) = heap_ring(&Geometry::spmc(4, 16, 8, 0, false).unwrap());
        let mut p = Producer::new(view2, NoWake).unwrap();
        p.skip_to(u64::MAX - 1);
        assert_eq!(p.next_seq(), 1);
        assert!(!p.write_raw(SEQ_LIMIT, &[0]));
        p.skip_to(SEQ_LIMIT);
        assert_eq!(p.next_seq(), SEQ_LIMIT);
    }

    /// A `write_seq` of 2^63 − 1 let the producer attach and write sequence 2^63, which
    /// every reader and tool then refused as a corrupt header. It is refused at attach; one
    /// below it leaves one push, and the push after it writes nothing.
    #[test]
    fn a_write_seq_at_the_last_sequence_leaves_nothing_to_push() {
        let (_m, view) = spmc_ring(4, 16);
        view.write_seq().store(SEQ_LIMIT - 1, Ordering::Relaxed);
        assert_eq!(
            Producer::new(view, NoWake).unwrap_err(),
            AttachError::WriteSeqExhausted {
                write_seq: SEQ_LIMIT - 1
            }
        );
        view.write_seq().store(SEQ_LIMIT - 2, Ordering::Relaxed);
        let mut p = Producer::new(view, CountWake::default()).unwrap();
        view.waiting_consumers().store(1, Ordering::Relaxed);
        assert_eq!(p.push(&[1]), Ok(SEQ_LIMIT - 1));
        let refused = SeqExhausted { seq: SEQ_LIMIT };
        assert_eq!(p.push(&[2]), Err(refused));
        assert_eq!(p.push_at(8, &[2]), Err(refused));
        assert_eq!(p.try_push(&[2]), Err(TryPushError::Exhausted(refused)));
        assert_eq!(p.push_batch([&[2u8][..], &[3]]), Err(refused));
        // Nothing of the refused pushes reached the ring or woke anybody.
        assert_eq!(view.write_seq().load(Ordering::Relaxed), SEQ_LIMIT - 1);
        assert_eq!(slot_bytes(&view, SEQ_LIMIT), (0, [0; 8]));
        assert_eq!(
            slot_bytes(&view, SEQ_LIMIT - 1),
            (SEQ_LIMIT - 1, [1, 0, 0, 0, 0, 0, 0, 0])
        );
        assert_eq!(
            (p.write_seq(), p.next_seq(), p.waker().0.get()),
            (SEQ_LIMIT - 1, SEQ_LIMIT, 1)
        );
        // The ring stays readable: its last record is a valid sequence.
        assert_eq!(view.checked_write_seq(), Ok(SEQ_LIMIT - 1));
    }

    /// A batch that reaches the limit writes and publishes the records below it, then stops.
    #[test]
    fn a_batch_stops_at_the_limit_with_the_records_below_it_published() {
        let (_m, view) = spmc_ring(4, 16);
        view.write_seq().store(SEQ_LIMIT - 3, Ordering::Relaxed);
        let mut p = Producer::new(view, NoWake).unwrap();
        let recs: [[u8; 1]; 4] = core::array::from_fn(|i| [i as u8 + 1]);
        assert_eq!(
            p.push_batch(recs.iter().map(|r| &r[..])),
            Err(SeqExhausted { seq: SEQ_LIMIT })
        );
        assert_eq!(view.write_seq().load(Ordering::Relaxed), SEQ_LIMIT - 1);
        assert_eq!(
            slot_bytes(&view, SEQ_LIMIT - 2),
            (SEQ_LIMIT - 2, [1, 0, 0, 0, 0, 0, 0, 0])
        );
        assert_eq!(
            slot_bytes(&view, SEQ_LIMIT - 1),
            (SEQ_LIMIT - 1, [2, 0, 0, 0, 0, 0, 0, 0])
        );
        assert_eq!(slot_bytes(&view, SEQ_LIMIT), (0, [0; 8]));
        assert_eq!(p.next_seq(), SEQ_LIMIT);
    }

    /// `skip_to(SEQ_LIMIT)` (or a raw write of the last sequence) followed by a push wrote
    /// sequence 2^63 and then 2^63 + 1. Every kind of push now refuses with nothing written.
    #[test]
    fn a_push_after_a_jump_to_the_limit_writes_nothing() {
        let (_m, view) = spmc_ring(4, 16);
        let mut p = Producer::new(view, CountWake::default()).unwrap();
        view.waiting_consumers().store(1, Ordering::Relaxed);
        assert_eq!(p.push(&[1]), Ok(1));
        p.skip_to(SEQ_LIMIT);
        let refused = SeqExhausted { seq: SEQ_LIMIT };
        assert_eq!(p.push(&[2]), Err(refused));
        assert_eq!(p.push_at(8, &[2]), Err(refused));
        assert_eq!(p.try_push(&[2]), Err(TryPushError::Exhausted(refused)));
        assert_eq!(
            p.try_push_at(8, &[2]),
            Err(TryPushError::Exhausted(refused))
        );
        assert_eq!(p.push_batch([&[2u8][..], &[3]]), Err(refused));
        assert_eq!(p.commit(), 1);
        assert_eq!(view.write_seq().load(Ordering::Relaxed), 1);
        assert_eq!(slot_bytes(&view, SEQ_LIMIT), (0, [0; 8]));
        assert_eq!((p.next_seq(), p.waker().0.get()), (SEQ_LIMIT, 1));
        // A raw write of the last sequence leaves `next` at the limit too.
        let (_m2, view2) = spmc_ring(4, 16);
        let mut q = Producer::new(view2, NoWake).unwrap();
        assert!(q.write_raw(SEQ_LIMIT - 1, &[7]));
        assert_eq!(q.push(&[8]), Err(refused));
        assert_eq!(q.commit(), SEQ_LIMIT - 1);
        assert_eq!(slot_bytes(&view2, SEQ_LIMIT), (0, [0; 8]));
    }

    /// On a lossless ring the limit is its own refusal, not a closed gate a blocking
    /// caller would wait at for ever.
    #[test]
    fn a_lossless_try_push_at_the_limit_is_exhausted_not_full() {
        let (_m, view) = lossless_ring(4, 2);
        view.write_seq().store(SEQ_LIMIT - 2, Ordering::Relaxed);
        let mut p = Producer::new(view, NoWake).unwrap();
        assert_eq!(p.try_push(&[1]), Ok(SEQ_LIMIT - 1));
        assert_eq!(
            p.try_push(&[2]),
            Err(TryPushError::Exhausted(SeqExhausted { seq: SEQ_LIMIT }))
        );
        assert_eq!(view.write_seq().load(Ordering::Relaxed), SEQ_LIMIT - 1);
    }

    fn lossless_ring(cap: u64, readers: u32) -> (crate::testutil::HeapRegion, RingView) {
        heap_ring(&Geometry::spmc(cap, 16, 8, readers, true).unwrap())
    }

    #[test]
    fn lossy_try_push_never_fails() {
        let (_m, view) = spmc_ring(2, 16);
        let mut p = Producer::new(view, NoWake).unwrap();
        assert!(!p.is_lossless());
        for s in 1..=10 {
            assert_eq!(p.try_push(&[s as u8]), Ok(s));
        }
        assert_eq!(p.gate_limit(), u64::MAX);
    }

    #[test]
    fn lossless_gate_stops_one_lap_ahead_of_a_registered_reader() {
        let (_m, view) = lossless_ring(4, 2);
        let mut p = Producer::new(view, NoWake).unwrap();
        assert!(p.is_lossless());
        let slot = registry::register(&view, 77, "r", 1, |_| true).unwrap();
        for s in 1..=4 {
            assert_eq!(p.try_push(&[s as u8]), Ok(s));
        }
        // The reader's cursor is 1: sequence 5 would overwrite message 1 in slot 1.
        assert_eq!(
            p.try_push(&[5]),
            Err(TryPushError::Full(Full {
                seq: 5,
                gate_limit: 5
            }))
        );
        assert_eq!(view.write_seq().load(Ordering::Relaxed), 4);
        assert_eq!(
            view.slot_seq(1).load(Ordering::Relaxed),
            1,
            "not overwritten"
        );
        // The reader moves on to 3: sequences 5 and 6 may be written, 7 may not.
        registry::publish_cursor(&view, slot, 3).unwrap();
        assert_eq!(p.try_push(&[5]), Ok(5));
        assert_eq!(p.try_push(&[6]), Ok(6));
        assert!(matches!(
            p.try_push(&[7]),
            Err(TryPushError::Full(Full { gate_limit: 7, .. }))
        ));
        // Without readers the window is C/2 ahead of the producer, refreshed as it goes.
        registry::unregister(&view, slot, 77).unwrap();
        for s in 7..=20 {
            assert_eq!(p.try_push(&[s as u8]), Ok(s));
        }
    }

    /// The refusal numbers (1 for the first) that the pruning tests make, up to `last`:
    /// every one natively. Under Miri, where each refusal is the same registry scan and
    /// 2,048 of them took over half a minute, the first eight and the eight up to and
    /// including each multiple of 1024 (where a prune is tried) and `last`; the counter is
    /// moved over the rest by [`skip_to_refusal`].
    fn refusals(last: u64) -> Vec<u64> {
        (1..=last)
            .filter(|&i| !cfg!(miri) || i <= 8 || i % 1024 == 0 || i % 1024 > 1016 || i > last - 8)
            .collect()
    }

    /// Under Miri, sets `p`'s count of consecutive refusals to `i - 1`, so that its next
    /// refusal is the `i`th, as if the ones [`refusals`] leaves out had been made (each
    /// refusal only adds one to the count, the registry being unchanged). Natively the
    /// count is already `i - 1`: checked, not set.
    fn skip_to_refusal(p: &mut Producer<NoWake>, i: u64) {
        let g = p.gate.as_mut().expect("a lossless ring's gate");
        if cfg!(miri) {
            g.blocked = i - 1;
        }
        assert_eq!(g.blocked, i - 1, "refusals counted before refusal {i}");
    }

    #[test]
    fn every_1024th_refusal_prunes_dead_readers() {
        let (_m, view) = lossless_ring(4, 1);
        let mut p = Producer::new(view, NoWake).unwrap();
        p.set_is_alive(|pid, _| pid != 4242);
        registry::register(&view, 4242, "dead", 1, |_| true).unwrap();
        for s in 1..=4 {
            assert_eq!(p.try_push(&[s as u8]), Ok(s));
        }
        for i in refusals(1023) {
            skip_to_refusal(&mut p, i);
            assert!(p.try_push(&[5]).is_err(), "refusal {i}");
        }
        assert_eq!(
            p.try_push(&[5]),
            Ok(5),
            "the 1024th attempt prunes pid 4242"
        );
        assert_eq!(registry::min_live_cursor(&view), None);
    }

    #[test]
    fn without_a_liveness_test_dead_readers_block_forever() {
        let (_m, view) = lossless_ring(2, 1);
        let mut p = Producer::new(view, NoWake).unwrap();
        registry::register(&view, 4242, "dead", 1, |_| true).unwrap();
        p.push_batch([&[1u8][..], &[2]]).unwrap();
        for i in refusals(2048) {
            skip_to_refusal(&mut p, i);
            assert_eq!(
                p.try_push(&[3]),
                Err(TryPushError::Full(Full {
                    seq: 3,
                    gate_limit: 3
                }))
            );
        }
    }
}
