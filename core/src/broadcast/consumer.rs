//! [`Consumer`]: one reader of a broadcast ring with its own cursor (spec §4.3, §5, §7, §9
//! reader side).

use crate::layout::{Flags, SLOT_WRITING, oldest_retained};
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

/// One reader of a broadcast ring.
///
/// The hot path ([`Consumer::try_recv`] on a record that is there) loads only the slot's
/// sequence word; `write_seq` is read only when the reader was lapped, on MPMC-flagged rings
/// when its cached copy cannot prove the slot is still in reach, and on sparse rings every
/// 64th empty poll.
#[derive(Debug)]
pub struct Consumer {
    view: RingView,
    /// Next sequence to read.
    cursor: u64,
    /// Messages skipped because they were overwritten (or were holes) before we read them.
    lapped: u64,
    /// The last `write_seq` we loaded; `write_seq` only grows, so it is a lower bound.
    write_seq_seen: u64,
    /// Consecutive empty polls (sparse hole detection runs every 64th).
    empty_polls: u32,
    /// The ring is a mirror with holes (§7).
    sparse: bool,
    /// The ring is MPMC-flagged: a full lap behind a pending slot means the ticket is lost.
    mpmc: bool,
    /// The registry slot this reader publishes its cursor to, if registered.
    registry_slot: Option<u32>,
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
            registry_slot: None,
        };
        let w = c.load_write_seq();
        let cap = c.view.capacity();
        match mode {
            StartMode::Latest => c.cursor = w.max(1),
            StartMode::Head => c.cursor = w.saturating_add(1),
            StartMode::Oldest => c.cursor = oldest_retained(w, cap),
            StartMode::Sequence(n) => c.start_at(n.max(1), w),
        }
        c
    }

    /// Sets the cursor to `seq`, clamped up to the oldest retained message of a ring whose
    /// `write_seq` is `w`; the clamped distance counts as lapped.
    fn start_at(&mut self, seq: u64, w: u64) {
        let oldest = oldest_retained(w, self.view.capacity());
        if seq < oldest {
            self.lapped += oldest - seq;
            self.cursor = oldest;
        } else {
            self.cursor = seq;
        }
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
    pub fn lag(&mut self) -> u64 {
        let w = self.load_write_seq();
        if w >= self.cursor {
            w - self.cursor + 1
        } else {
            0
        }
    }

    /// The registry slot this reader publishes its cursor to.
    #[inline(always)]
    pub fn registry_slot(&self) -> Option<u32> {
        self.registry_slot
    }

    /// Moves the cursor to `seq` (at least 1); below the oldest retained message it moves to
    /// the oldest and counts the difference as lapped, as [`StartMode::Sequence`] does.
    pub fn seek(&mut self, seq: u64) {
        let w = self.load_write_seq();
        self.start_at(seq.max(1), w);
        self.empty_polls = 0;
        self.publish_cursor();
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
        loop {
            let want = self.cursor;
            match self.view.read_slot(want, dst) {
                SlotRead::Ok => {
                    self.cursor = want + 1;
                    self.empty_polls = 0;
                    return Some(want);
                }
                SlotRead::Overwritten { seen } => {
                    let w = self.load_write_seq();
                    if !self.lap_to(w.max(seen)) {
                        // The second load saw a write in flight and write_seq has not moved
                        // past us yet: report empty, the next poll retries.
                        return None;
                    }
                }
                SlotRead::Pending => {
                    if self.mpmc && self.mpmc_ticket_lost(want) {
                        continue;
                    }
                    if self.sparse {
                        self.empty_polls = self.empty_polls.wrapping_add(1);
                        if self.empty_polls & 63 == 0 && self.skip_hole() {
                            continue;
                        }
                    }
                    return None;
                }
            }
        }
    }

    /// The lap rule of §4.3: if `oldest_retained(newest, C)` is past the cursor, jump there
    /// and count the skipped messages. Returns whether the cursor moved.
    #[inline]
    fn lap_to(&mut self, newest: u64) -> bool {
        let oldest = oldest_retained(newest, self.view.capacity());
        if oldest > self.cursor {
            self.lapped += oldest - self.cursor;
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
        let start = oldest_retained(w, self.view.capacity()).max(cursor + 1);
        let mut next = w + 1;
        for s in start..=w {
            // Acquire: a slot found holding `s` must be readable by the retry that follows.
            if self.view.slot_seq(s).load(Ordering::Acquire) == s {
                next = s;
                break;
            }
        }
        self.lapped += next - cursor;
        self.cursor = next;
        true
    }

    /// Publishes the cursor to this reader's registry slot, if it has one (spec §5: after
    /// each receive or batch, skip, seek or jump).
    #[inline]
    pub(super) fn publish_cursor(&self) {
        if let Some(slot) = self.registry_slot
            && let Some(a) = self.view.registry_a64(slot, crate::layout::reg::CURSOR_SEQ) {
                // Release: the producer's gate that acquires this cursor knows we are done
                // with every slot below it.
                a.store(self.cursor, Ordering::Release);
            }
    }
}
