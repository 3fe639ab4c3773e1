//! [`Consumer`]: one reader of a broadcast ring with its own cursor (spec §4.3, §5, §7, §9
//! reader side).
//!
//! # A reader that keeps pace with the writer (issue 3 line 5): tried, not kept
//!
//! With 64-byte records a slot is 72 bytes, so the line holding record `n`'s tail also holds
//! record `n + 1`'s sequence word and head. A reader that reads `n` as soon as it is
//! published therefore takes, in shared state, the line the writer needs next, and the
//! writer's stores then wait for that line on every push ("lock-step": the reader receives
//! every record, the writer pays 35–45 ns a push instead of 5–12). Which state a pair
//! settles in seems to follow the reader's speed relative to the writer's (ringfire's slower
//! reader rarely locks step, nor does ringwire's reader behind ringfire's writer), not any
//! single poll. Tried against the unchanged `push_drain` bench and the `push_drain_cross`
//! example, interleaved with the unchanged build (5 rounds; figures are medians, min–max;
//! this 2-vCPU nested VM also shows whole-round outliers of 70–190 ns for every pair):
//!
//! | variant | push_drain ringwire | ringfire | cross rw→rw |
//! |---|---:|---:|---:|
//! | unchanged | 19.9 (9.4–43.2) | 17.2 | 15.8 (7.3–117) |
//! | A: caught up, poll `write_seq`; slot only once published | 27.2 (9.4–104) | 13.0 | 22.3 |
//! | B: 4 × `spin_loop` after seeing the write in flight | 30.1 (14.6–194) | 14.0 | 11.6 |
//! | C: writer PREFETCHW of slot `n + 4` (both lines) | 32.2 (23.3–71.6) | 13.2 | 8.4 |
//! | W: writer payload as four 16-byte stores | 44.7 (33.7–111) | 13.1 | 44.4 |
//! | E8: 8 × `spin_loop` (200 ns) on the first empty poll | 27.0 (11.0–170) | 13.1 | 21.1 |
//! | E32: 32 × `spin_loop` (800 ns) on the first empty poll | 24.2 (17.8–30.5) | 13.2 | 7.9 |
//!
//! ("first empty poll": the first `Pending` after a received record; ringfire: its own pair
//! in the same runs; cross: `push_drain_cross` ringwire writer and reader.)
//!
//! None is below the unchanged build in both benches. E32 has the narrowest spread but not
//! a lower median, and it gets it by delaying every record that arrives within 800 ns of
//! the previous one: a polling reader's latency traded for the writer's throughput, which
//! `try_recv` does not do. The eager read path (`BusySpin`) was unchanged in every reader
//! variant; the 64-byte two-process round trip (3 runs per build) was 205–218 ns for every
//! build in its fast state (ringfire 219–237 ns), and every build, ringfire included, also
//! had runs at 636–799 ns.

use super::registry::{self, RegistryError};
use crate::layout::{Flags, LaterSeq, REGISTRY_NAME_LEN, SLOT_WRITING, later_seq, oldest_retained};
use crate::ring::{RingView, SlotRead};
use crate::sync::Ordering;

/// Where a new consumer starts reading (spec §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum StartMode {
    /// `max(write_seq, 1)`: the newest message already published is delivered again.
    Latest,
    /// `write_seq + 1`: only messages published from now on.
    Head,
    /// `oldest_retained(write_seq, C)`: everything the ring still holds.
    Oldest,
    /// `max(n, 1)`; below the oldest retained message it starts at the oldest and counts the
    /// difference as lapped.
    Sequence(u64),
}

/// How many empty polls in a row a reader makes at one cursor before it looks past the
/// slot there ([`Consumer`] and the blob stream reader, on every such poll count): at a slot
/// a dead writer left mid-write, and at a hole of a sparse ring. Not on every poll: a reader
/// spinning at the head would pull the slot's and the header's lines while the writer fills
/// them. A power of two. A waiter that returns at once while a look is still due (the std
/// consumers' receive loops) may return up to this many times in a row at one slot.
pub const LOOKASIDE_POLLS: u32 = 64;

/// One reader of a broadcast ring.
///
/// The hot path ([`Consumer::try_recv`] on a record that is there) loads only the slot's
/// sequence word; `write_seq` is read only when the reader was lapped, on MPMC-flagged rings
/// when its cached copy cannot prove the slot is still in reach, and on sparse rings every
/// [`LOOKASIDE_POLLS`]th empty poll.
#[derive(Debug)]
pub struct Consumer {
    view: RingView,
    /// Next sequence to read.
    cursor: u64,
    /// Messages skipped because they were overwritten (or were holes) before we read them.
    lapped: u64,
    /// The last `write_seq` we loaded; `write_seq` only grows, so it is a lower bound.
    write_seq_seen: u64,
    /// Consecutive empty polls (the look past the slot runs every [`LOOKASIDE_POLLS`]th).
    empty_polls: u32,
    /// The ring is a mirror with holes (§7).
    sparse: bool,
    /// The ring is MPMC-flagged: a full lap behind a pending slot means the ticket is lost.
    mpmc: bool,
    /// The registry slot this reader publishes its cursor to, if registered.
    registry: Option<registry::Owner>,
    /// The pid it registered as (kept after a prune, to register again).
    registry_pid: u32,
    /// The name it registered under (encoded), to register again if its slot is pruned.
    registry_name: [u8; REGISTRY_NAME_LEN],
    /// The incarnation its registrations' tokens carry ([`Consumer::set_incarnation`]).
    incarnation: Option<registry::Incarnation>,
}

impl Consumer {
    /// A reader of `view` starting where `mode` says (spec §5).
    pub fn new(view: RingView, mode: StartMode) -> Consumer {
        let flags = view.geometry().flags;
        let mut c = Consumer {
            view,
            cursor: 1,
            lapped: 0,
            write_seq_seen: 0,
            empty_polls: 0,
            sparse: flags.has(Flags::SPARSE),
            mpmc: flags.has(Flags::MODE_MPMC),
            registry: None,
            registry_pid: 0,
            registry_name: [0; REGISTRY_NAME_LEN],
            incarnation: None,
        };
        let w = c.load_write_seq();
        let cap = c.view.capacity();
        match mode {
            StartMode::Latest => c.cursor = w.max(1),
            StartMode::Head => c.cursor = w.saturating_add(1),
            StartMode::Oldest => c.cursor = oldest_retained(w, cap),
            StartMode::Sequence(n) => {
                c.start_at(n.max(1), w);
            }
        }
        c
    }

    /// Sets the cursor to `seq`, clamped up to the oldest retained message of a ring whose
    /// `write_seq` is `w`; the clamped distance counts as lapped and is returned.
    fn start_at(&mut self, seq: u64, w: u64) -> u64 {
        let oldest = oldest_retained(w, self.view.capacity());
        if seq < oldest {
            // Saturating: a corrupt write_seq may claim up to 2^64 skipped messages.
            self.lapped = self.lapped.saturating_add(oldest - seq);
            self.cursor = oldest;
            oldest - seq
        } else {
            self.cursor = seq;
            0
        }
    }

    /// Moves the cursor forward to `target` when it is ahead, counting the passed messages
    /// as lapped and publishing the new cursor. Returns how many were passed (0: no move).
    fn skip_forward_to(&mut self, target: u64) -> u64 {
        if target <= self.cursor {
            return 0;
        }
        let skipped = target - self.cursor;
        // Saturating: a corrupt write_seq may claim up to 2^64 skipped messages.
        self.lapped = self.lapped.saturating_add(skipped);
        self.cursor = target;
        self.empty_polls = 0;
        self.publish_cursor();
        skipped
    }

    #[inline]
    fn load_write_seq(&mut self) -> u64 {
        // Acquire: pairs with the producer's release publish, so slots up to it are visible.
        let w = self.view.write_seq().load(Ordering::Acquire);
        self.write_seq_seen = self.write_seq_seen.max(w);
        w
    }

    /// The ring this consumer reads.
    #[inline(always)]
    pub fn view(&self) -> &RingView {
        &self.view
    }

    /// The next sequence this reader will read.
    #[inline(always)]
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// How many messages this reader lost: overwritten before it read them, below the
    /// oldest retained message at start or seek, or holes skipped on a sparse ring.
    #[inline(always)]
    pub fn lapped(&self) -> u64 {
        self.lapped
    }

    /// Messages published but not read yet: `write_seq - cursor + 1`, or 0 (spec §5).
    pub fn lag(&self) -> u64 {
        // Acquire: pairs with the producer's release publish (the value is all we use).
        let w = self.view.write_seq().load(Ordering::Acquire);
        if w >= self.cursor {
            w - self.cursor + 1
        } else {
            0
        }
    }

    /// The registry slot this reader publishes its cursor to.
    #[inline(always)]
    pub fn registry_slot(&self) -> Option<u32> {
        self.registry.map(|o| o.slot)
    }

    /// This reader's registration (slot, pid and token), if it holds one.
    #[inline(always)]
    pub fn registry_owner(&self) -> Option<registry::Owner> {
        self.registry
    }

    /// The incarnation of the registering process (see [`registry::Incarnation`]) that the
    /// tokens of this reader's next registrations carry, so that a liveness check can tell
    /// the registrant from a later process with its pid. `None` (the default) stores tokens
    /// without one. A copy inherited through `fork` sets its own before
    /// [`Consumer::register_as`].
    pub fn set_incarnation(&mut self, incarnation: Option<registry::Incarnation>) {
        self.incarnation = incarnation;
    }

    /// Registers this reader in the ring's registry under `pid` and `name` (spec §5, §9), so
    /// a lossless producer waits for it and monitors see it. Slots for which `is_alive(pid,
    /// token)` is false (the slot's pid and `heartbeat_tsc`) are reused.
    ///
    /// Returns the slot index, or `Ok(None)` when the reader continues unregistered: the ring
    /// has no registry, or the registry is full and the ring is lossy. A full registry on a
    /// lossless ring is an error (attaching fails). After registering, the lap check runs
    /// once, since the producer may have lapped the cursor before it became visible.
    ///
    /// What a registration protects on a lossless ring: a producer reads the registry only
    /// when it reaches the limit it computed at its last read, at most half a ring
    /// (`max(C/2, 1)`) past the sequence it was writing then ([`registry::gate_limit`]; a
    /// ringfire producer does the same). So the records from `w + 1 - C/2` on, `w` being
    /// `write_seq` once this call returns, are never overwritten before this reader has
    /// read them; older ones it starts at (the oldest of a full ring, say) may be, by the
    /// pushes before that producer's next read of the registry, and the reader then counts
    /// them as lapped. A reader that must miss nothing registers before the producer writes
    /// what it wants, or starts at `w + 1 - C/2` or later.
    pub fn register(
        &mut self,
        pid: u32,
        name: &str,
        is_alive: impl Fn(u32, u64) -> bool,
    ) -> Result<Option<u32>, RegistryError> {
        if let Some(o) = self.registry {
            return Ok(Some(o.slot));
        }
        let lossless = self
            .view
            .geometry()
            .flags
            .has(Flags::POLICY_LOSSLESS_BACKPRESSURE);
        let encoded = registry::encode_name(name);
        match registry::register_owner_as(
            &self.view,
            pid,
            &encoded,
            self.cursor,
            self.incarnation,
            is_alive,
        ) {
            Ok(owner) => {
                self.registry = Some(owner);
                self.registry_pid = pid;
                self.registry_name = encoded;
                let w = self.load_write_seq();
                if self.lap_to(w) {
                    self.publish_cursor();
                }
                Ok(Some(owner.slot))
            }
            Err(RegistryError::NoRegistry) => Ok(None),
            Err(RegistryError::Full { .. }) if !lossless => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Gives up this reader's registry slot (also done on drop). A slot that was pruned and
    /// reused by another reader meanwhile is left alone (the error says so).
    pub fn unregister(&mut self) -> Result<(), RegistryError> {
        match self.registry.take() {
            Some(o) => registry::unregister_owner(&self.view, o),
            None => Ok(()),
        }
    }

    /// [`Consumer::unregister`] when called from process `pid`, the one that registered;
    /// from any other process the slot is only forgotten. The registry names a reader by
    /// its process id, so a copy of this reader inherited through `fork` holds its parent's
    /// slot: were the child's copy to give it up (dropping it does, through the std layer's
    /// handles, which pass their own pid here), the parent would go on reading unregistered,
    /// and a lossless producer would no longer wait for it.
    pub fn unregister_as(&mut self, pid: u32) -> Result<(), RegistryError> {
        if self.registry.is_some() && self.registry_pid != pid {
            self.registry = None;
            return Ok(());
        }
        self.unregister()
    }

    /// Registers this reader again under `pid` when it holds a registration of another
    /// process: a copy inherited through `fork`, whose registration is its parent's. The
    /// parent's slot is left to the parent (only forgotten here, as
    /// [`Consumer::unregister_as`] does); the copy takes a slot of its own under `pid` and
    /// the name it registered under, at its cursor, and reruns the lap check as
    /// [`Consumer::register`] does. Without this the two processes would publish into one
    /// slot, and a lossless producer would protect only the cursor stored there last (one
    /// of them could be lapped), and the slot would be pruned as dead once the parent
    /// exits while the child still reads.
    ///
    /// Returns the slot now held: the same one when the registration is already `pid`'s (or
    /// `None` when there is none). A full registry fails with [`RegistryError::Full`] and
    /// leaves the reader unregistered ([`Consumer::registry_slot`] is then `None`) on a
    /// lossy and a lossless ring alike; a ring without a registry gives `Ok(None)`.
    pub fn register_as(
        &mut self,
        pid: u32,
        is_alive: impl Fn(u32, u64) -> bool,
    ) -> Result<Option<u32>, RegistryError> {
        match self.registry {
            // The other process's slot: forgotten, never freed from here.
            Some(_) if self.registry_pid != pid => self.registry = None,
            held => return Ok(held.map(|o| o.slot)),
        }
        let name = self.registry_name;
        match registry::register_owner_as(
            &self.view,
            pid,
            &name,
            self.cursor,
            self.incarnation,
            is_alive,
        ) {
            Ok(owner) => {
                self.registry = Some(owner);
                self.registry_pid = pid;
                let w = self.load_write_seq();
                if self.lap_to(w) {
                    self.publish_cursor();
                }
                Ok(Some(owner.slot))
            }
            Err(RegistryError::NoRegistry) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Moves the cursor to `seq` (at least 1), backwards or forwards; below the oldest
    /// retained message it moves to the oldest and counts the difference as lapped, as
    /// [`StartMode::Sequence`] does. Returns that difference (0 when `seq` is retained or not
    /// published yet).
    pub fn seek(&mut self, seq: u64) -> u64 {
        let w = self.load_write_seq();
        let skipped = self.start_at(seq.max(1), w);
        self.empty_polls = 0;
        self.publish_cursor();
        skipped
    }

    /// Skips the backlog: the cursor moves to the newest published message (`write_seq`),
    /// which the next receive delivers, as [`StartMode::Latest`] would. The messages passed
    /// over count as lapped; returns how many. A reader already at or past the newest
    /// message (or an empty ring) stays where it is and gets 0.
    pub fn jump_to_latest(&mut self) -> u64 {
        let w = self.load_write_seq();
        self.skip_forward_to(w)
    }

    /// Skips only what the ring no longer holds: the cursor moves to the oldest retained
    /// message, `oldest_retained(write_seq, C)`, when it is behind it; the messages passed
    /// over count as lapped and their number is returned. A cursor inside the retained
    /// window (or ahead of it) is left alone and gets 0: this never moves backwards.
    pub fn jump_to_oldest(&mut self) -> u64 {
        let w = self.load_write_seq();
        self.skip_forward_to(oldest_retained(w, self.view.capacity()))
    }

    /// Reads the next record into `dst` and returns its sequence, or `None` when there is
    /// nothing new. Copies `min(dst.len(), element_size - 8)` raw bytes of the slot after its
    /// sequence word. Messages overwritten before we got to them are skipped and counted in
    /// [`Consumer::lapped`] (spec §4.3).
    #[inline]
    pub fn try_recv(&mut self, dst: &mut [u8]) -> Option<u64> {
        let before = self.cursor;
        let r = self.recv_one(dst);
        if self.cursor != before {
            self.publish_cursor();
        }
        r
    }

    /// [`Consumer::try_recv`] for a reader that polls in a loop until the next record
    /// arrives: each call copies the payload together with the sequence load
    /// ([`RingView::read_slot_eager`]), so a record spanning two cache lines reaches this
    /// reader in one round of line transfers instead of two. Same results as `try_recv`
    /// (never a torn record, laps counted the same way); `dst` is overwritten even when it
    /// returns `None`.
    #[inline]
    pub fn try_recv_eager(&mut self, dst: &mut [u8]) -> Option<u64> {
        let before = self.cursor;
        let r = self.recv_one_with::<true>(dst);
        if self.cursor != before {
            self.publish_cursor();
        }
        r
    }

    /// Receives up to `max` records, copying each into `scratch` and handing it to `f` with
    /// its sequence. Publishes the cursor once at the end. Returns the number received.
    pub fn recv_batch<F: FnMut(u64, &[u8])>(
        &mut self,
        scratch: &mut [u8],
        max: usize,
        mut f: F,
    ) -> usize {
        let before = self.cursor;
        let n = scratch.len().min(self.view.geometry().record_len());
        let mut got = 0;
        while got < max {
            match self.recv_one(scratch) {
                Some(seq) => {
                    f(seq, &scratch[..n]);
                    got += 1;
                }
                None => break,
            }
        }
        if self.cursor != before {
            self.publish_cursor();
        }
        got
    }

    /// One receive without cursor publication (spec §4.3 with the §7 and MPMC additions).
    #[inline]
    pub(super) fn recv_one(&mut self, dst: &mut [u8]) -> Option<u64> {
        self.recv_one_with::<false>(dst)
    }

    /// [`Consumer::recv_one`] with the slot read chosen at compile time: `EAGER` copies the
    /// payload on every poll ([`RingView::read_slot_eager`]).
    #[inline]
    pub(super) fn recv_one_with<const EAGER: bool>(&mut self, dst: &mut [u8]) -> Option<u64> {
        self.recv_one_at::<EAGER>(8, dst)
    }

    /// [`Consumer::recv_one_with`] for a payload `poff` bytes into the slot (an over-aligned
    /// record type, [`RingView::read_slot_at`]).
    ///
    /// Only the first read and its common verdict (the record is there) are inlined into the
    /// caller, where a typed reader's `dst` has a constant length and the copy unrolls into
    /// plain word loads; every other verdict goes on in [`Consumer::recv_one_rest`], out of
    /// line. As one function, too large to inline, the whole receive copied with a length
    /// known only at run time (`examples/ring_instructions.rs` in the tests crate: 85
    /// instructions per `u64` record received with `try_recv`, 46 with the split).
    #[inline(always)]
    pub(super) fn recv_one_at<const EAGER: bool>(
        &mut self,
        poff: usize,
        dst: &mut [u8],
    ) -> Option<u64> {
        let want = self.cursor;
        let read = self.read_at::<EAGER>(want, poff, dst);
        if matches!(read, SlotRead::Ok) {
            self.cursor = want + 1;
            self.empty_polls = 0;
            return Some(want);
        }
        self.recv_one_rest::<EAGER>(want, read, poff, dst)
    }

    /// The slot read of record `want`: the eager one ([`RingView::read_slot_eager_at`]) or
    /// the plain one.
    #[inline(always)]
    fn read_at<const EAGER: bool>(&self, want: u64, poff: usize, dst: &mut [u8]) -> SlotRead {
        if EAGER {
            self.view.read_slot_eager_at(want, poff, dst)
        } else {
            self.view.read_slot_at(want, poff, dst)
        }
    }

    /// [`Consumer::recv_one_at`] after its first read of record `want` found `read`: the
    /// record overwritten (the lap rule, then a read of the record the cursor moved to) or
    /// not there yet, and the reads that follow until one succeeds or finds nothing.
    #[inline(never)]
    fn recv_one_rest<const EAGER: bool>(
        &mut self,
        mut want: u64,
        mut read: SlotRead,
        poff: usize,
        dst: &mut [u8],
    ) -> Option<u64> {
        loop {
            match read {
                SlotRead::Ok => {
                    self.cursor = want + 1;
                    self.empty_polls = 0;
                    return Some(want);
                }
                SlotRead::Overwritten { seen } => {
                    let w = self.load_write_seq();
                    let newest = self.view.newest_writable(w);
                    let moved = match later_seq(want, seen, w, newest, self.view.capacity()) {
                        LaterSeq::Lap => self.lap_to(w.max(seen)),
                        LaterSeq::Behind { .. } => self.lap_to(w),
                        // A corrupt slot: its record alone is lost (at most a ring of such
                        // skips in one call).
                        LaterSeq::Lost => {
                            self.lapped = self.lapped.saturating_add(1);
                            self.cursor = want + 1;
                            true
                        }
                        LaterSeq::NotYet => false,
                    };
                    if !moved {
                        // Not written yet, or the second load saw a write in flight and
                        // write_seq has not moved past us yet: empty, the next poll retries.
                        return None;
                    }
                }
                SlotRead::Pending => {
                    // A lost MPMC ticket moved the cursor on: read again below.
                    let lost = self.mpmc && self.mpmc_ticket_lost(want);
                    if !lost {
                        // Every LOOKASIDE_POLLS-th empty poll in a row looks further: at a
                        // slot a dead writer left mid-write (the marker never goes away, so
                        // finding it late costs nothing), and at a hole of a sparse ring.
                        self.empty_polls = self.empty_polls.wrapping_add(1);
                        if !self.empty_polls.is_multiple_of(LOOKASIDE_POLLS) {
                            return None;
                        }
                        if !((!self.mpmc && self.rewritten_under(want))
                            || (self.sparse && self.skip_hole()))
                        {
                            self.republish_stale_cursor();
                            return None;
                        }
                    }
                }
            }
            want = self.cursor;
            read = self.read_at::<EAGER>(want, poff, dst);
        }
    }

    /// The lap rule of §4.3: if `oldest_retained(newest, C)` is past the cursor, jump there
    /// and count the skipped messages. Returns whether the cursor moved.
    #[inline]
    fn lap_to(&mut self, newest: u64) -> bool {
        let oldest = oldest_retained(newest, self.view.capacity());
        if oldest > self.cursor {
            // Saturating: a corrupt write_seq may claim up to 2^64 skipped messages.
            self.lapped = self.lapped.saturating_add(oldest - self.cursor);
            self.cursor = oldest;
            true
        } else {
            false
        }
    }

    /// MPMC-flagged rings (§4.3 "Pending"): a ticket still pending when `write_seq` is a
    /// whole lap ahead was dropped by its producer; apply the lap rule with seen = 0.
    #[cold]
    fn mpmc_ticket_lost(&mut self, want: u64) -> bool {
        let reach = want.saturating_add(self.view.capacity());
        // The cached write_seq is a lower bound: when it already proves the lap, skip the load.
        let w = if self.write_seq_seen >= reach {
            self.write_seq_seen
        } else {
            self.load_write_seq()
        };
        w >= reach && self.lap_to(w)
    }

    /// On a ring with one writer: the slot of `want`, a record `write_seq` has passed, holds
    /// the write marker. The record was published and a later lap's write is overwriting
    /// it, or did and its writer died mid-write (a killed producer leaves the marker for
    /// good, and readers stopped there would never get the intact records behind it). Either
    /// way the record is gone: it counts as lapped and the cursor moves past it, as the lap
    /// rule would move it once the write finished. Not for MPMC rings, whose tickets are
    /// written out of order (`mpmc_ticket_lost`). Returns whether the cursor moved.
    #[cold]
    fn rewritten_under(&mut self, want: u64) -> bool {
        let Some(w) = self.view.rewritten_under(want) else {
            return false;
        };
        self.write_seq_seen = self.write_seq_seen.max(w);
        // Past the oldest retained record too: a ring of markers (corrupt) is then crossed
        // a lap at a time, not a record at a time. (`want` is below the marker's value.)
        self.lapped = self.lapped.saturating_add(1);
        self.cursor = want + 1;
        self.lap_to(w);
        true
    }

    /// Hole detection on sparse rings (§7). Returns whether the cursor moved.
    #[cold]
    fn skip_hole(&mut self) -> bool {
        let w = self.load_write_seq();
        let cursor = self.cursor;
        if w < cursor {
            return false;
        }
        // Acquire: pairs with the writer's release store of the sequence word.
        let seen = self.view.slot_seq(cursor).load(Ordering::Acquire);
        if seen == SLOT_WRITING || seen >= cursor {
            return false;
        }
        // Saturating: a corrupt write_seq may be u64::MAX (a cursor of SLOT_WRITING then
        // stays there and reads nothing, see RingView::read_slot).
        let start = oldest_retained(w, self.view.capacity()).max(cursor.saturating_add(1));
        let mut next = w.saturating_add(1);
        for s in start..=w {
            // Acquire: a slot found holding `s` must be readable by the retry that follows.
            if self.view.slot_seq(s).load(Ordering::Acquire) == s {
                next = s;
                break;
            }
        }
        self.lapped = self.lapped.saturating_add(next - cursor);
        self.cursor = next;
        true
    }

    /// Publishes the cursor to this reader's registry slot, if it has one (spec §5: after
    /// each receive or batch, skip, seek or jump).
    ///
    /// A slot that no longer holds this reader's pid was pruned (a pruner judged the pid
    /// dead: see [`registry::publish_cursor_as`]); the cursor is not stored there, and the
    /// reader registers again, under its pid and name, in a free slot (pruning nobody), so
    /// a lossless producer waits for it again from its cursor on. Records the producer
    /// overwrote while it was not counted are counted as lapped by the reads that find
    /// them. With no free slot it goes on unregistered ([`Consumer::registry_slot`] is then
    /// `None`).
    #[inline]
    pub(super) fn publish_cursor(&mut self) {
        if let Some(owner) = self.registry
            && registry::publish_cursor_as(&self.view, owner, self.cursor).is_err()
        {
            self.register_again();
        }
    }

    /// On every [`LOOKASIDE_POLLS`]th empty poll in a row: publishes the cursor again when
    /// the registry slot shows another one. A reader publishes only when its cursor moves,
    /// so a slot scribbled back by a lap or more (a corrupt file) kept a lossless producer
    /// waiting for a reader that, caught up, waited for it: neither ever moved again.
    #[cold]
    fn republish_stale_cursor(&mut self) {
        if let Some(owner) = self.registry
            && registry::published_cursor(&self.view, owner.slot) != Some(self.cursor)
        {
            self.publish_cursor();
        }
    }

    /// After this reader's registry slot was pruned: takes a free slot under the same pid
    /// and name (see [`Consumer::publish_cursor`]).
    #[cold]
    fn register_again(&mut self) {
        self.registry = None;
        let (pid, name) = (self.registry_pid, self.registry_name);
        // The registration stores the cursor. No lap check here (unlike `register`'s): this
        // runs inside a receive that just delivered the record before the cursor, and
        // records lost meanwhile are found, and counted, by the next read as always.
        self.registry = registry::register_owner_as(
            &self.view,
            pid,
            &name,
            self.cursor,
            self.incarnation,
            |_, _| true,
        )
        .ok();
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        // Nothing to report from a destructor; a reused slot is left to its new owner.
        let _ = self.unregister();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::broadcast::{NoWake, Producer};
    use crate::layout::Geometry;
    use crate::testutil::{HeapRegion, check_payload, heap_ring, payload_for, spmc_ring};

    /// A lossy ring of `cap` 16-byte slots with `n` records pushed (payload = seq).
    fn ring_with(cap: u64, n: u64) -> (HeapRegion, RingView, Producer) {
        let (m, view) = spmc_ring(cap, 16);
        let mut p = Producer::new(view, NoWake).unwrap();
        for s in 1..=n {
            p.push(&s.to_le_bytes()).unwrap();
        }
        (m, view, p)
    }

    fn recv(c: &mut Consumer) -> Option<(u64, u64)> {
        let mut b = [0u8; 8];
        c.try_recv(&mut b).map(|s| (s, u64::from_le_bytes(b)))
    }

    /// [`drain`] that goes on through 64 empty polls in a row (a marker a dead writer left
    /// below write_seq is looked at on every 64th).
    fn drain_patiently(c: &mut Consumer) -> std::vec::Vec<u64> {
        let mut v = std::vec::Vec::new();
        let mut empty = 0;
        while empty < 64 {
            match recv(c) {
                Some((s, x)) => {
                    assert_eq!(s, x, "payload belongs to its sequence");
                    v.push(s);
                    empty = 0;
                }
                None => empty += 1,
            }
        }
        v
    }

    fn drain(c: &mut Consumer) -> std::vec::Vec<u64> {
        let mut v = std::vec::Vec::new();
        while let Some((s, x)) = recv(c) {
            assert_eq!(s, x, "payload belongs to its sequence");
            v.push(s);
        }
        v
    }

    #[test]
    fn start_modes_on_an_empty_ring() {
        let (_m, view, _p) = ring_with(4, 0);
        for (mode, cursor) in [
            (StartMode::Latest, 1),
            (StartMode::Head, 1),
            (StartMode::Oldest, 1),
            (StartMode::Sequence(0), 1),
            (StartMode::Sequence(9), 9),
        ] {
            let c = Consumer::new(view, mode);
            assert_eq!((c.cursor(), c.lapped()), (cursor, 0), "{mode:?}");
        }
    }

    #[test]
    fn start_modes_after_a_wrap() {
        // Capacity 4, write_seq 6: the ring holds 3..=6.
        let (_m, view, _p) = ring_with(4, 6);
        for (mode, cursor, lapped, got) in [
            (StartMode::Latest, 6, 0, &[6][..]),
            (StartMode::Head, 7, 0, &[][..]),
            (StartMode::Oldest, 3, 0, &[3, 4, 5, 6][..]),
            (StartMode::Sequence(0), 3, 2, &[3, 4, 5, 6][..]),
            (StartMode::Sequence(1), 3, 2, &[3, 4, 5, 6][..]),
            (StartMode::Sequence(2), 3, 1, &[3, 4, 5, 6][..]),
            (StartMode::Sequence(5), 5, 0, &[5, 6][..]),
            (StartMode::Sequence(8), 8, 0, &[][..]),
        ] {
            let mut c = Consumer::new(view, mode);
            assert_eq!((c.cursor(), c.lapped()), (cursor, lapped), "{mode:?}");
            assert_eq!(drain(&mut c), got, "{mode:?}");
            assert_eq!(c.lapped(), lapped, "{mode:?}");
        }
    }

    #[test]
    fn latest_redelivers_the_newest_then_follows() {
        let (_m, view, mut p) = ring_with(8, 3);
        let mut c = Consumer::new(view, StartMode::Latest);
        assert_eq!(recv(&mut c), Some((3, 3)));
        assert_eq!(recv(&mut c), None);
        p.push(&4u64.to_le_bytes()).unwrap();
        assert_eq!(recv(&mut c), Some((4, 4)));
    }

    #[test]
    fn lapped_at_the_wrap_by_one() {
        let (_m, view, mut p) = ring_with(4, 0);
        let mut c = Consumer::new(view, StartMode::Oldest);
        for s in 1..=5u64 {
            p.push(&s.to_le_bytes()).unwrap();
        }
        // Slot 1 now holds 5: message 1 is gone, 2..=5 remain.
        assert_eq!(drain(&mut c), [2, 3, 4, 5]);
        assert_eq!((c.lapped(), c.cursor()), (1, 6));
    }

    #[test]
    fn eager_receive_matches_try_recv() {
        // Capacity 4 with 6 pushed: 1 and 2 are gone. Both reads must give the same records,
        // the same laps and the same empty result, for a small, exact and oversized dst.
        for len in [4usize, 8, 40] {
            let (_m, view, mut p) = ring_with(4, 6);
            let mut a = Consumer::new(view, StartMode::Sequence(1));
            let mut b = Consumer::new(view, StartMode::Sequence(1));
            let (mut da, mut db) = ([0xEEu8; 40], [0xEEu8; 40]);
            for round in 0..2 {
                loop {
                    let ra = a.try_recv(&mut da[..len]);
                    let rb = b.try_recv_eager(&mut db[..len]);
                    assert_eq!(ra, rb, "len {len} round {round}");
                    if ra.is_none() {
                        break;
                    }
                    assert_eq!(da, db, "len {len}: same bytes, nothing past the record");
                }
                assert_eq!((a.cursor(), a.lapped()), (b.cursor(), b.lapped()));
                p.push(&7u64.to_le_bytes()).unwrap();
            }
            assert_eq!((b.cursor(), b.lapped()), (8, 2), "len {len}");
        }
    }

    #[test]
    fn eager_read_reports_pending_and_overwritten() {
        let (_m, view, mut p) = ring_with(4, 2);
        let mut d = [0u8; 8];
        assert_eq!(view.read_slot_eager(2, &mut d), SlotRead::Ok);
        assert_eq!(u64::from_le_bytes(d), 2);
        assert_eq!(view.read_slot_eager(3, &mut d), SlotRead::Pending);
        view.slot_seq(3).store(SLOT_WRITING, Ordering::Relaxed);
        assert_eq!(view.read_slot_eager(3, &mut d), SlotRead::Pending);
        for s in 3..=6u64 {
            p.push(&s.to_le_bytes()).unwrap();
        }
        assert_eq!(
            view.read_slot_eager(2, &mut d),
            SlotRead::Overwritten { seen: 6 }
        );
        assert_eq!(view.read_slot(2, &mut d), SlotRead::Overwritten { seen: 6 });
    }

    #[test]
    fn a_slot_left_mid_write_below_write_seq_is_skipped_not_waited_on() {
        // Capacity 4, 1..=10 published, then the writer dies writing 11 over 7's slot.
        let (_m, view, _p) = ring_with(4, 10);
        view.slot_seq(11).store(SLOT_WRITING, Ordering::Relaxed);
        let mut c = Consumer::new(view, StartMode::Oldest);
        assert_eq!(c.cursor(), 7);
        // The intact records behind it are delivered; 7 counts as lapped.
        assert_eq!(drain_patiently(&mut c), [8, 9, 10]);
        assert_eq!((c.lapped(), c.cursor()), (1, 11));
        // Past write_seq the same marker is a write in progress: waited for.
        let (_m, view, mut p) = ring_with(4, 10);
        view.slot_seq(11).store(SLOT_WRITING, Ordering::Relaxed);
        let mut c = Consumer::new(view, StartMode::Head);
        assert_eq!(drain_patiently(&mut c), []);
        assert_eq!((c.lapped(), c.cursor()), (0, 11));
        p.push(&11u64.to_le_bytes()).unwrap();
        assert_eq!(drain(&mut c), [11]);
        // A reader that last loaded write_seq long ago (waiting at 12) finds out too:
        // 12..=15 published, the writer dies writing 16 over 12's slot.
        for s in 12..=15u64 {
            p.push(&s.to_le_bytes()).unwrap();
        }
        view.slot_seq(16).store(SLOT_WRITING, Ordering::Relaxed);
        assert_eq!(drain_patiently(&mut c), [13, 14, 15]);
        assert_eq!(c.lapped(), 1);
    }

    /// A slot whose sequence word holds a value no writer stores there (more than a lap
    /// past `write_seq`, or at or past `SEQ_LIMIT`): read as a lap, it moved the reader to
    /// that value's oldest retained record, which the ring never reaches, and counted up to
    /// 2^64 records lapped; the reader got nothing more. It is one lost record now, and one
    /// not written yet past `write_seq` (its writer stores the right sequence there).
    #[test]
    fn a_slot_holding_a_sequence_no_lap_stores_is_one_lost_record() {
        use crate::layout::SEQ_LIMIT;
        // One more than a lap past write_seq 12, far ahead, and past the limit.
        for bad in [12 + 8 + 1, 1 << 40, SEQ_LIMIT, u64::MAX - 1] {
            let (_m, view, mut p) = ring_with(8, 12);
            view.slot_seq(10).store(bad, Ordering::Relaxed);
            let mut c = Consumer::new(view, StartMode::Oldest);
            assert_eq!(drain(&mut c), [5, 6, 7, 8, 9, 11, 12], "{bad:#x}");
            assert_eq!((c.lapped(), c.cursor()), (1, 13), "{bad:#x}");
            // The slot of 13 (5's, read already) before 13 is written: waited for.
            view.slot_seq(13).store(bad, Ordering::Relaxed);
            assert_eq!(drain(&mut c), [], "{bad:#x}");
            p.push(&13u64.to_le_bytes()).unwrap();
            assert_eq!(drain(&mut c), [13], "{bad:#x}");
            assert_eq!(c.lapped(), 1, "{bad:#x}");
        }
        // A reader behind the oldest retained record that meets a corrupt slot laps to it
        // first: the slot of 1 is 9's, so 1..=4 are lapped and 9 is lost.
        let (_m, view, _p) = ring_with(8, 12);
        let mut c = Consumer::new(view, StartMode::Sequence(1));
        view.slot_seq(9).store(SEQ_LIMIT, Ordering::Relaxed);
        assert_eq!(drain(&mut c), [5, 6, 7, 8, 10, 11, 12]);
        assert_eq!(c.lapped(), 5);
        // A real lap is still one: 13..=22 pushed over a reader at 13 of a ring of 8.
        let (_m, view, mut p) = ring_with(8, 12);
        let mut c = Consumer::new(view, StartMode::Head);
        for s in 13..=22u64 {
            p.push(&s.to_le_bytes()).unwrap();
        }
        assert_eq!(drain(&mut c), [15, 16, 17, 18, 19, 20, 21, 22]);
        assert_eq!(c.lapped(), 2);
    }

    #[test]
    fn lapped_by_many_laps_counts_exactly() {
        let (_m, view, mut p) = ring_with(4, 2);
        let mut c = Consumer::new(view, StartMode::Oldest);
        assert_eq!(recv(&mut c), Some((1, 1)));
        for s in 3..=13u64 {
            p.push(&s.to_le_bytes()).unwrap();
        }
        // write_seq 13, oldest 10: messages 2..=9 (8 of them) were lost.
        assert_eq!(drain(&mut c), [10, 11, 12, 13]);
        assert_eq!(c.lapped(), 8);
        assert_eq!(c.lag(), 0);
        p.push(&14u64.to_le_bytes()).unwrap();
        assert_eq!(c.lag(), 1);
    }

    #[test]
    fn lag_counts_unread_messages() {
        let (_m, view, _p) = ring_with(8, 5);
        let c = Consumer::new(view, StartMode::Sequence(2));
        assert_eq!(c.lag(), 4);
        let c = Consumer::new(view, StartMode::Head);
        assert_eq!(c.lag(), 0);
    }

    #[test]
    fn seek_clamps_to_oldest_and_counts_lapped() {
        let (_m, view, _p) = ring_with(4, 10);
        let mut c = Consumer::new(view, StartMode::Head);
        c.seek(9);
        assert_eq!((c.cursor(), c.lapped()), (9, 0));
        assert_eq!(drain(&mut c), [9, 10]);
        c.seek(2);
        // Oldest retained is 7: 2..=6 count as lapped.
        assert_eq!((c.cursor(), c.lapped()), (7, 5));
        assert_eq!(drain(&mut c), [7, 8, 9, 10]);
        c.seek(0);
        assert_eq!(c.cursor(), 7);
    }

    #[test]
    fn seek_returns_the_clamped_distance() {
        let (_m, view, _p) = ring_with(4, 10); // holds 7..=10
        let mut c = Consumer::new(view, StartMode::Head);
        assert_eq!(c.seek(9), 0);
        assert_eq!(c.seek(12), 0, "not published yet: no clamp");
        assert_eq!(c.cursor(), 12);
        assert_eq!(c.seek(2), 5);
        assert_eq!(c.seek(0), 6, "0 is taken as 1");
        assert_eq!((c.cursor(), c.lapped()), (7, 11));
    }

    #[test]
    fn jump_to_latest_lands_on_the_newest_and_counts_the_rest() {
        let (_m, view, mut p) = ring_with(8, 5);
        let mut c = Consumer::new(view, StartMode::Oldest);
        assert_eq!(recv(&mut c), Some((1, 1)));
        // Cursor 2, newest 5: 2, 3 and 4 are skipped, 5 is delivered.
        assert_eq!(c.jump_to_latest(), 3);
        assert_eq!((c.cursor(), c.lapped()), (5, 3));
        assert_eq!(drain(&mut c), [5]);
        assert_eq!(
            c.jump_to_latest(),
            0,
            "caught up: cursor 6 is past the newest"
        );
        assert_eq!(c.cursor(), 6);
        // Lapped by the writer: the jump counts from the cursor, not from the oldest.
        for s in 6..=30u64 {
            p.push(&s.to_le_bytes()).unwrap();
        }
        assert_eq!(c.jump_to_latest(), 24);
        assert_eq!((c.cursor(), c.lapped()), (30, 27));
        assert_eq!(drain(&mut c), [30]);
        // An empty ring: nothing to jump to.
        let (_m2, view2, _p2) = ring_with(8, 0);
        let mut e = Consumer::new(view2, StartMode::Oldest);
        assert_eq!((e.jump_to_latest(), e.cursor(), e.lapped()), (0, 1, 0));
    }

    #[test]
    fn jump_to_oldest_only_moves_forward() {
        let (_m, view, mut p) = ring_with(4, 2);
        let mut c = Consumer::new(view, StartMode::Oldest);
        assert_eq!(c.jump_to_oldest(), 0, "1 is still retained");
        assert_eq!(recv(&mut c), Some((1, 1)));
        for s in 3..=12u64 {
            p.push(&s.to_le_bytes()).unwrap();
        }
        // Holds 9..=12; cursor 2: 2..=8 (7 messages) are gone.
        assert_eq!(c.jump_to_oldest(), 7);
        assert_eq!((c.cursor(), c.lapped()), (9, 7));
        assert_eq!(recv(&mut c), Some((9, 9)));
        assert_eq!(
            c.jump_to_oldest(),
            0,
            "cursor 10 is inside the window: no move back"
        );
        assert_eq!(c.cursor(), 10);
        assert_eq!(drain(&mut c), [10, 11, 12]);
        assert_eq!(c.lapped(), 7);
    }

    #[test]
    fn jumps_publish_the_cursor_to_the_registry() {
        let (_m, view) = heap_ring(&Geometry::spmc(4, 16, 8, 1, false).unwrap());
        let mut p = Producer::new(view, NoWake).unwrap();
        let mut c = Consumer::new(view, StartMode::Oldest);
        c.register(11, "j", |_, _| true).unwrap();
        for s in 1..=10u64 {
            p.push(&s.to_le_bytes()).unwrap();
        }
        assert_eq!(registry::min_live_cursor(&view), Some(1));
        assert_eq!(c.jump_to_oldest(), 6);
        assert_eq!(registry::min_live_cursor(&view), Some(7));
        assert_eq!(c.jump_to_latest(), 3);
        assert_eq!(registry::min_live_cursor(&view), Some(10));
    }

    #[test]
    fn an_idle_reader_publishes_its_cursor_again_over_a_scribbled_registry_slot() {
        // Found by a corruption audit: a registry cursor scribbled a lap back while the
        // reader was caught up held a lossless producer for good (the reader published
        // only when its cursor moved, and it waited for the producer).
        let (_m, view) = heap_ring(&Geometry::spmc(4, 16, 8, 1, false).unwrap());
        let mut p = Producer::new(view, NoWake).unwrap();
        let mut c = Consumer::new(view, StartMode::Oldest);
        let slot = c.register(11, "idle", |_, _| true).unwrap().unwrap();
        for s in 1..=4u64 {
            p.push(&s.to_le_bytes()).unwrap();
        }
        assert_eq!(drain(&mut c), [1, 2, 3, 4]);
        assert_eq!(registry::published_cursor(&view, slot), Some(5));
        for scribbled in [0, 1, u64::MAX] {
            registry::publish_cursor(&view, slot, scribbled).unwrap();
            // One empty poll short of the look: nothing is stored yet.
            while c.empty_polls % LOOKASIDE_POLLS != LOOKASIDE_POLLS - 1 {
                assert_eq!(recv(&mut c), None);
            }
            assert_eq!(registry::published_cursor(&view, slot), Some(scribbled));
            assert_eq!(recv(&mut c), None);
            assert_eq!(registry::published_cursor(&view, slot), Some(5));
            assert_eq!(registry::min_live_cursor(&view), Some(5));
        }
        // A slot that shows the reader's cursor is left alone (no store while idle).
        assert_eq!((0..3 * LOOKASIDE_POLLS).find_map(|_| recv(&mut c)), None);
        assert_eq!(registry::published_cursor(&view, slot), Some(5));
    }

    #[test]
    fn recv_batch_delivers_in_order_up_to_max() {
        let (_m, view, _p) = ring_with(8, 5);
        let mut c = Consumer::new(view, StartMode::Oldest);
        let mut got = std::vec::Vec::new();
        let mut scratch = [0u8; 8];
        let n = c.recv_batch(&mut scratch, 3, |s, b| {
            got.push((s, u64::from_le_bytes(b.try_into().unwrap())))
        });
        assert_eq!((n, &got[..]), (3, &[(1, 1), (2, 2), (3, 3)][..]));
        got.clear();
        let n = c.recv_batch(&mut scratch, 10, |s, b| {
            got.push((s, u64::from_le_bytes(b.try_into().unwrap())))
        });
        assert_eq!((n, &got[..]), (2, &[(4, 4), (5, 5)][..]));
        assert_eq!(c.recv_batch(&mut scratch, 10, |_, _| panic!("empty")), 0);
    }

    #[test]
    fn copies_at_most_the_record_length() {
        // Stride 24: 16-byte records.
        let (_m, view) = spmc_ring(4, 24);
        let mut p = Producer::new(view, NoWake).unwrap();
        let mut rec = [0u8; 16];
        payload_for(1, &mut rec);
        p.push(&rec).unwrap();
        let mut c = Consumer::new(view, StartMode::Oldest);
        let mut big = [0xAAu8; 40];
        assert_eq!(c.try_recv(&mut big), Some(1));
        assert!(check_payload(1, &big[..16]));
        assert!(
            big[16..].iter().all(|&b| b == 0xAA),
            "bytes past the record untouched"
        );
    }

    fn sparse_ring(cap: u64) -> (HeapRegion, RingView) {
        let mut g = Geometry::spmc(cap, 16, 8, 0, false).unwrap();
        g.flags.0 |= Flags::SPARSE;
        heap_ring(&g)
    }

    #[test]
    fn corrupt_write_seq_and_slot_words_never_overflow() {
        // Found by fuzz/fuzz_targets/region.rs: a write_seq of u64::MAX overflowed the lapped
        // count (start, lap rule), a slot word equal to the cursor u64::MAX (the marker) was
        // delivered as a record and `cursor + 1` overflowed, and hole detection overflowed
        // `w + 1`.
        let (_m, view) = sparse_ring(4);
        let mut dst = [0u8; 8];
        view.write_seq().store(u64::MAX, Ordering::Relaxed);
        let mut c = Consumer::new(view, StartMode::Sequence(1));
        assert_eq!(c.lapped(), u64::MAX - 4);
        // Every slot says "overwritten by u64::MAX - 1": the lap rule jumps again.
        for s in 0..4 {
            view.slot_seq(s).store(u64::MAX - 1, Ordering::Relaxed);
        }
        c.seek(1);
        assert_eq!(c.try_recv(&mut dst), None);
        assert_eq!(c.lapped(), u64::MAX, "saturates");
        // The cursor at the marker with the slot holding the marker: nothing is delivered.
        let mut c = Consumer::new(view, StartMode::Head);
        assert_eq!(c.cursor(), u64::MAX);
        view.slot_seq(u64::MAX).store(u64::MAX, Ordering::Relaxed);
        assert_eq!(view.read_slot(u64::MAX, &mut dst), SlotRead::Pending);
        assert_eq!(view.read_slot_eager(u64::MAX, &mut dst), SlotRead::Pending);
        for _ in 0..130 {
            assert_eq!(c.try_recv(&mut dst), None);
            assert_eq!(c.try_recv_eager(&mut dst), None);
        }
        // Hole detection with write_seq = u64::MAX and an older slot word under the cursor.
        view.slot_seq(u64::MAX - 1).store(5, Ordering::Relaxed);
        let mut c = Consumer::new(view, StartMode::Latest);
        c.seek(u64::MAX - 1);
        for _ in 0..130 {
            assert_eq!(c.try_recv(&mut dst), None);
        }
        assert_eq!(c.cursor(), u64::MAX);
    }

    #[test]
    fn sparse_ring_skips_a_hole_on_the_64th_empty_poll() {
        let (_m, view) = sparse_ring(8);
        let mut p = Producer::new(view, NoWake).unwrap();
        let mut c = Consumer::new(view, StartMode::Oldest);
        for s in [1u64, 2] {
            p.write_raw(s, &s.to_le_bytes());
        }
        p.skip_to(5);
        for s in [5u64, 6] {
            p.write_raw(s, &s.to_le_bytes());
        }
        p.commit();
        assert_eq!(recv(&mut c), Some((1, 1)));
        assert_eq!(recv(&mut c), Some((2, 2)));
        for i in 1..64 {
            assert_eq!(recv(&mut c), None, "empty poll {i}");
            assert_eq!(c.cursor(), 3);
        }
        // The 64th consecutive empty poll runs hole detection and jumps to 5.
        assert_eq!(recv(&mut c), Some((5, 5)));
        assert_eq!(c.lapped(), 2);
        assert_eq!(recv(&mut c), Some((6, 6)));
        assert_eq!(recv(&mut c), None);
    }

    #[test]
    fn sparse_hole_over_an_older_lap_and_trailing_hole() {
        let (_m, view) = sparse_ring(4);
        let mut p = Producer::new(view, NoWake).unwrap();
        for s in 1..=4u64 {
            p.write_raw(s, &s.to_le_bytes());
        }
        p.skip_to(6);
        p.write_raw(6, &6u64.to_le_bytes());
        p.write_raw(7, &7u64.to_le_bytes());
        p.commit();
        let mut c = Consumer::new(view, StartMode::Sequence(5));
        // Slot of 5 still holds 1 (< 5): a hole. The 64th empty poll skips to 6.
        for _ in 1..64 {
            assert_eq!(recv(&mut c), None);
        }
        assert_eq!(recv(&mut c), Some((6, 6)));
        assert_eq!(recv(&mut c), Some((7, 7)));
        assert_eq!(c.lapped(), 1);
        assert_eq!(recv(&mut c), None, "empty poll 1 of the next run");
        // A hole at the end (write_seq published past unwritten sequences): jump past it.
        p.skip_to(10);
        p.write_raw(10, &10u64.to_le_bytes());
        // Publish write_seq = 9 only: 8 and 9 are holes, 10 is written but not published.
        view.write_seq().store(9, Ordering::Release);
        for _ in 2..64 {
            assert_eq!(recv(&mut c), None);
        }
        assert_eq!(recv(&mut c), Some((10, 10)));
        assert_eq!(c.lapped(), 3);
    }

    #[test]
    fn non_sparse_ring_never_skips_holes() {
        let (_m, view) = spmc_ring(8, 16);
        let mut p = Producer::new(view, NoWake).unwrap();
        p.write_raw(1, &1u64.to_le_bytes());
        p.skip_to(3);
        p.write_raw(3, &3u64.to_le_bytes());
        p.commit();
        let mut c = Consumer::new(view, StartMode::Oldest);
        assert_eq!(recv(&mut c), Some((1, 1)));
        for _ in 0..200 {
            assert_eq!(recv(&mut c), None);
        }
        assert_eq!((c.cursor(), c.lapped()), (2, 0));
    }

    #[test]
    fn in_flight_write_is_pending_not_a_hole() {
        let (_m, view) = sparse_ring(8);
        let mut p = Producer::new(view, NoWake).unwrap();
        p.push(&1u64.to_le_bytes()).unwrap();
        p.push(&2u64.to_le_bytes()).unwrap();
        let mut c = Consumer::new(view, StartMode::Oldest);
        assert_eq!(drain(&mut c), [1, 2]);
        // A writer is mid-way through message 3 (write_seq still 2): not a hole.
        view.slot_seq(3).store(SLOT_WRITING, Ordering::Relaxed);
        for _ in 0..128 {
            assert_eq!(recv(&mut c), None);
        }
        assert_eq!((c.cursor(), c.lapped()), (3, 0));
        // With write_seq past it, the marker is a later lap's write over a record already
        // published (§4.2 publishes write_seq after the slot): that record is gone, lapped,
        // not a hole either.
        view.write_seq().store(3, Ordering::Release);
        assert_eq!(drain_patiently(&mut c), []);
        assert_eq!((c.cursor(), c.lapped()), (4, 1));
    }

    /// Message 1 is read; then the producer of ticket 2 gets stuck mid-write while others
    /// go on to 7 (ticket 6 shares slot 2 and is dropped).
    fn stuck_ticket(view: &RingView, c: &mut Consumer) {
        view.write_slot(1, &1u64.to_le_bytes());
        view.write_seq().fetch_max(1, Ordering::Release);
        assert_eq!(recv(c), Some((1, 1)));
        view.slot_seq(2).store(SLOT_WRITING, Ordering::Relaxed);
        for s in [3u64, 4, 5, 7] {
            view.write_slot(s, &s.to_le_bytes());
        }
        view.write_seq().fetch_max(7, Ordering::Release);
    }

    #[test]
    fn mpmc_flagged_ring_treats_a_full_lap_as_lost() {
        let (_m, view) = heap_ring(&Geometry::mpmc(4, 16, 8).unwrap());
        let mut c = Consumer::new(view, StartMode::Oldest);
        stuck_ticket(&view, &mut c);
        // Ticket 2 is pending with write_seq 7 >= 2 + 4: lost; oldest_retained(7) = 4.
        assert_eq!(drain(&mut c), [4, 5]);
        assert_eq!(c.lapped(), 2);
        // Ticket 6 is pending too, but 7 < 6 + 4: still just "empty".
        assert_eq!((c.cursor(), recv(&mut c)), (6, None));
    }

    /// An MPMC-flagged ring whose `claim_seq` is at or past `SEQ_LIMIT` (a corrupt header:
    /// no producer draws a ticket there): a slot holding a value no ticket can be is one
    /// lost record, as on a ring with one writer. With that `claim_seq` as the bound it was
    /// a lap to the value's oldest retained sequence, and the reader got nothing more.
    #[test]
    fn mpmc_ring_with_a_corrupt_claim_seq_loses_a_corrupt_slot_alone() {
        use crate::layout::SEQ_LIMIT;
        let (_m, view) = heap_ring(&Geometry::mpmc(4, 16, 8).unwrap());
        for s in 1..=6u64 {
            view.write_slot(s, &s.to_le_bytes());
        }
        view.write_seq().fetch_max(6, Ordering::Release);
        view.claim_seq().store(SEQ_LIMIT, Ordering::Relaxed);
        view.slot_seq(4).store(u64::MAX - 1, Ordering::Relaxed);
        let mut c = Consumer::new(view, StartMode::Oldest);
        assert_eq!(drain(&mut c), [3, 5, 6]);
        assert_eq!((c.lapped(), c.cursor()), (1, 7));
    }

    #[test]
    fn plain_ring_takes_a_marker_below_write_seq_for_a_lost_record() {
        // The same bytes on a ring with one writer: a marker at a sequence write_seq has
        // passed can only be a later lap's write (in progress, or its writer dead), so 2 and
        // 6 (slot 2) are lost, and 3 (its slot holds 7) is lapped.
        let (_m, view) = spmc_ring(4, 16);
        let mut c = Consumer::new(view, StartMode::Oldest);
        stuck_ticket(&view, &mut c);
        assert_eq!(drain_patiently(&mut c), [4, 5, 7]);
        assert_eq!((c.cursor(), c.lapped()), (8, 3));
    }

    #[test]
    fn registered_reader_publishes_its_cursor() {
        let (_m, view) = heap_ring(&Geometry::spmc(4, 16, 8, 2, false).unwrap());
        let mut p = Producer::new(view, NoWake).unwrap();
        p.push(&1u64.to_le_bytes()).unwrap();
        let mut c = Consumer::new(view, StartMode::Oldest);
        let slot = c.register(11, "algo", |_, _| true).unwrap().unwrap();
        assert_eq!(c.registry_slot(), Some(slot));
        let cur = || {
            view.registry_a64(slot, crate::layout::reg::CURSOR_SEQ)
                .unwrap()
        };
        assert_eq!(cur().load(Ordering::Relaxed), 1);
        assert_eq!(recv(&mut c), Some((1, 1)));
        assert_eq!(cur().load(Ordering::Relaxed), 2, "after a receive");
        for s in 2..=9u64 {
            p.push(&s.to_le_bytes()).unwrap();
        }
        let mut scratch = [0u8; 8];
        assert_eq!(c.recv_batch(&mut scratch, 2, |_, _| {}), 2);
        // Lapped to 6, then read 6 and 7.
        assert_eq!(
            (c.lapped(), cur().load(Ordering::Relaxed)),
            (4, 8),
            "after a batch"
        );
        c.seek(9);
        assert_eq!(cur().load(Ordering::Relaxed), 9, "after a seek");
        assert_eq!(registry::min_live_cursor(&view), Some(9));
        drop(c);
        assert_eq!(
            registry::min_live_cursor(&view),
            None,
            "unregistered on drop"
        );
    }

    #[test]
    fn registration_reruns_the_lap_check() {
        let (_m, view) = heap_ring(&Geometry::spmc(4, 16, 8, 1, false).unwrap());
        let mut c = Consumer::new(view, StartMode::Oldest);
        let mut p = Producer::new(view, NoWake).unwrap();
        for s in 1..=6u64 {
            p.push(&s.to_le_bytes()).unwrap();
        }
        c.register(11, "late", |_, _| true).unwrap();
        assert_eq!((c.cursor(), c.lapped()), (3, 2));
        assert_eq!(registry::min_live_cursor(&view), Some(3));
    }

    #[test]
    fn registration_outcomes() {
        // No registry: continue unregistered.
        let (_m, view) = spmc_ring(4, 16);
        let mut c = Consumer::new(view, StartMode::Oldest);
        assert_eq!(c.register(11, "x", |_, _| true), Ok(None));
        // Full lossy registry: continue unregistered.
        let (_m2, view) = heap_ring(&Geometry::spmc(4, 16, 8, 1, false).unwrap());
        let mut a = Consumer::new(view, StartMode::Oldest);
        let mut b = Consumer::new(view, StartMode::Oldest);
        assert_eq!(a.register(11, "a", |_, _| true), Ok(Some(0)));
        assert_eq!(b.register(12, "b", |_, _| true), Ok(None));
        // Full lossless registry: an error.
        let (_m3, view) = heap_ring(&Geometry::spmc(4, 16, 8, 1, true).unwrap());
        let mut a = Consumer::new(view, StartMode::Oldest);
        let mut b = Consumer::new(view, StartMode::Oldest);
        assert_eq!(a.register(11, "a", |_, _| true), Ok(Some(0)));
        assert_eq!(
            b.register(12, "b", |_, _| true),
            Err(RegistryError::Full { count: 1 })
        );
        // A dead owner's slot is reused.
        assert_eq!(b.register(12, "b", |pid, _| pid != 11), Ok(Some(0)));
        // The pruned reader's unregister leaves the new owner alone.
        assert_eq!(
            a.unregister(),
            Err(RegistryError::NotOwner {
                slot: 0,
                pid: 11,
                found: 12
            })
        );
        assert_eq!(registry::min_live_cursor(&view), Some(1));
    }

    #[test]
    fn register_as_gives_a_copy_of_another_process_a_slot_of_its_own() {
        let (_m, view) = heap_ring(&Geometry::spmc(4, 16, 8, 2, true).unwrap());
        let mut parent = Consumer::new(view, StartMode::Oldest);
        assert_eq!(parent.register(11, "reader", |_, _| true), Ok(Some(0)));
        // SAFETY: stands in for the child's copy made by fork; `parent` and `child` each
        // give up only their own slot when dropped (the child's registers anew first).
        let mut child = unsafe { core::ptr::read(&parent) };
        assert_eq!(
            child.register_as(11, |_, _| true),
            Ok(Some(0)),
            "same process"
        );
        assert_eq!(child.register_as(12, |_, _| true), Ok(Some(1)));
        assert_eq!(
            child.register_as(12, |_, _| true),
            Ok(Some(1)),
            "already its own"
        );
        assert_eq!(view.registry_name(1), view.registry_name(0));
        let mut p = Producer::new(view, NoWake).unwrap();
        p.push(&[7; 8]).unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(child.try_recv(&mut buf), Some(1));
        let live = |v: &RingView| {
            registry::live_readers(v)
                .map(|r| (r.slot, r.pid, r.cursor))
                .collect::<std::vec::Vec<_>>()
        };
        assert_eq!(live(&view), [(0, 11, 1), (1, 12, 2)]);
        drop(child);
        assert_eq!(live(&view), [(0, 11, 1)]);
        // A full registry leaves the copy unregistered.
        // SAFETY: as above.
        let mut child = unsafe { core::ptr::read(&parent) };
        let mut other = Consumer::new(view, StartMode::Oldest);
        assert_eq!(other.register(13, "other", |_, _| true), Ok(Some(1)));
        assert_eq!(
            child.register_as(12, |_, _| true),
            Err(RegistryError::Full { count: 2 })
        );
        assert_eq!(child.registry_slot(), None);
        drop(child);
        assert_eq!(live(&view), [(0, 11, 1), (1, 13, 1)]);
    }
}
