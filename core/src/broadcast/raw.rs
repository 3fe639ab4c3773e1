//! Raw record access for a replication source (spec §20.1 on fixed-record rings): the §4.3
//! read on raw bytes, with the lap rule of §20.2, without knowing the record type.

use crate::layout::{LaterSeq, later_seq, oldest_retained};
use crate::ring::{RingView, SlotRead};
use crate::sync::Ordering;

/// Outcome of [`read_record`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RawRead {
    /// `dst` holds the record: `min(dst.len(), element_size - 8)` raw bytes from slot + 8.
    Record,
    /// Not published yet, or (on an MPMC-flagged ring) a ticket still being written: stop
    /// collecting and try again later.
    Pending,
    /// The record is gone: read on at `resume_at` (always greater than the sequence asked
    /// for), the oldest sequence the ring can still hold, or after a corrupt slot the next
    /// one. A TCP source sends `GAP(resume_at)`.
    Lapped {
        /// Where to continue reading.
        resume_at: u64,
    },
}

/// Reads record `seq` into `dst` with the tear-free protocol (spec §4.3).
///
/// When the slot holds a later sequence `seen`, [`later_seq`] judges it. A later lap's
/// write gives `r = oldest_retained(max(write_seq, seen), C)` (§20.2): if `r > seq` the
/// record is reported [`RawRead::Lapped`] with `resume_at = r`, otherwise (the re-check
/// saw a write in flight) it is [`RawRead::Pending`], which a source treats as "retry". A
/// sequence no writer could have stored there (more than a lap past
/// [`RingView::newest_writable`], or at or past `SEQ_LIMIT`) is a corrupt slot: once
/// `write_seq` has reached `seq`, the record alone is lost (`resume_at = seq + 1`, or the
/// oldest retained when `seq` is behind it); before, it is `Pending`.
///
/// On a ring with one writer, a slot holding the write marker at a sequence `write_seq` has
/// passed is a later lap's write ([`RingView::rewritten_under`]): in progress, or left for
/// good by a writer that died mid-write. The record is gone either way, so it is
/// [`RawRead::Lapped`], with `resume_at` the oldest record the ring holds once that write
/// (of `seq + C` at the earliest) is done.
///
/// Sequences start at 1: `seq` 0, which a never-written slot's sequence word holds, is no
/// record, and reads as [`RawRead::Lapped`] at the oldest record the ring holds (1 until
/// the ring has wrapped), `dst` untouched.
#[inline]
pub fn read_record(view: &RingView, seq: u64, dst: &mut [u8]) -> RawRead {
    if seq == 0 {
        // Acquire: as in `lapped_by` below.
        let w = view.write_seq().load(Ordering::Acquire);
        return RawRead::Lapped {
            resume_at: oldest_retained(w, view.capacity()),
        };
    }
    // The verdict on a slot that a later write than `seq`'s has reached (`seen`, or being
    // written): lapped when the oldest record the ring then holds is past `seq`. Otherwise
    // (the re-check saw a write in flight, or a corrupt `write_seq` near u64::MAX where
    // `seq + C` saturates) pending.
    let lapped_by = |seen: u64| {
        // Acquire: pairs with the producer's publish; only its value is used here.
        let w = view.write_seq().load(Ordering::Acquire);
        let r = oldest_retained(w.max(seen), view.capacity());
        if r > seq {
            RawRead::Lapped { resume_at: r }
        } else {
            RawRead::Pending
        }
    };
    match view.read_slot(seq, dst) {
        SlotRead::Ok => RawRead::Record,
        SlotRead::Pending => match view.rewritten_under(seq) {
            // The later write is of `seq + C` at the earliest.
            Some(_) => lapped_by(seq.saturating_add(view.capacity())),
            None => RawRead::Pending,
        },
        SlotRead::Overwritten { seen } => {
            // Acquire: as in `lapped_by`, loaded after the slot.
            let w = view.write_seq().load(Ordering::Acquire);
            match later_seq(seq, seen, w, view.newest_writable(w), view.capacity()) {
                LaterSeq::Lap => lapped_by(seen),
                // Behind a mirror's frame longer than the ring: gone whatever its slot holds.
                LaterSeq::Behind { oldest } => RawRead::Lapped { resume_at: oldest },
                // A corrupt slot: the record is lost, and the next is read after it.
                LaterSeq::Lost => RawRead::Lapped {
                    resume_at: seq.saturating_add(1),
                },
                LaterSeq::NotYet => RawRead::Pending,
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::broadcast::{NoWake, Producer};
    use crate::layout::SLOT_WRITING;
    use crate::testutil::{check_payload, payload_for, spmc_ring};

    /// Sequences start at 1, and a slot that was never written holds 0: record 0 was read
    /// as a record of the slot's zero bytes, in a fresh ring and in one whose slot 0 the
    /// writer had not reached yet, as if a writer had published it.
    #[test]
    fn sequence_0_is_never_a_record() {
        let (_m, view) = spmc_ring(4, 32);
        let mut p = Producer::new(view, NoWake).unwrap();
        let mut dst = [7u8; 24];
        let mut rec = [0u8; 24];
        // (records pushed before, where record 0's read resumes): a fresh ring, one whose
        // slot 0 the writer has not reached, one that has wrapped.
        for (pushed, resume_at) in [(0, 1), (3, 1), (6, 3)] {
            while p.next_seq() <= pushed {
                payload_for(p.next_seq(), &mut rec);
                p.push(&rec).unwrap();
            }
            let r = read_record(&view, 0, &mut dst);
            assert_eq!(r, RawRead::Lapped { resume_at }, "after {pushed}");
            assert_eq!(dst, [7; 24], "nothing copied after {pushed}");
        }
    }

    #[test]
    fn record_pending_and_lapped() {
        // Stride 32: 24-byte records, read without knowing their type.
        let (_m, view) = spmc_ring(4, 32);
        let mut p = Producer::new(view, NoWake).unwrap();
        let mut rec = [0u8; 24];
        let mut dst = [0u8; 24];
        assert_eq!(read_record(&view, 1, &mut dst), RawRead::Pending);
        for s in 1..=6 {
            payload_for(s, &mut rec);
            p.push(&rec).unwrap();
        }
        for s in 3..=6 {
            assert_eq!(read_record(&view, s, &mut dst), RawRead::Record);
            assert!(check_payload(s, &dst), "record {s}");
        }
        assert_eq!(read_record(&view, 7, &mut dst), RawRead::Pending);
        // 1 and 2 were overwritten by 5 and 6: resume at oldest_retained(6, 4) = 3.
        assert_eq!(
            read_record(&view, 1, &mut dst),
            RawRead::Lapped { resume_at: 3 }
        );
        assert_eq!(
            read_record(&view, 2, &mut dst),
            RawRead::Lapped { resume_at: 3 }
        );
    }

    #[test]
    fn a_marker_below_write_seq_is_lapped_not_pending() {
        // A writer that died writing record 5 (slot 1) after publishing 1..=4: record 1 is
        // gone, and 2..=4 are intact behind it.
        let (_m, view) = spmc_ring(4, 16);
        let mut p = Producer::new(view, NoWake).unwrap();
        for s in 1..=4u8 {
            p.push(&[s]).unwrap();
        }
        view.slot_seq(5).store(SLOT_WRITING, Ordering::Relaxed);
        let mut dst = [0u8; 8];
        assert_eq!(
            read_record(&view, 1, &mut dst),
            RawRead::Lapped { resume_at: 2 }
        );
        assert_eq!(read_record(&view, 2, &mut dst), RawRead::Record);
        // The marker of the record being written (5, past write_seq) is still pending.
        assert_eq!(read_record(&view, 5, &mut dst), RawRead::Pending);
    }

    /// A corrupt `write_seq` near u64::MAX with a marker below it: `seq + C` saturates, so
    /// no resume point past `seq` can be named; pending, never a `resume_at` at or before
    /// `seq` (the region fuzz target's `resume_at > seq` failed on such a ring).
    #[test]
    fn a_marker_below_a_write_seq_near_u64_max_is_pending() {
        let (_m, view) = spmc_ring(4, 16);
        let seq = u64::MAX - 2;
        view.write_seq().store(u64::MAX - 1, Ordering::Relaxed);
        view.slot_seq(seq).store(SLOT_WRITING, Ordering::Relaxed);
        let mut dst = [0u8; 8];
        assert_eq!(read_record(&view, seq, &mut dst), RawRead::Pending);
    }

    #[test]
    fn a_newer_sequence_in_the_slot_is_lapped_before_write_seq_moves() {
        let (_m, view) = spmc_ring(4, 16);
        let mut p = Producer::new(view, NoWake).unwrap();
        p.push(&[1]).unwrap();
        let mut dst = [0u8; 8];
        // Slot 1 holds 5 while write_seq is still 1.
        view.slot_seq(5).store(5, Ordering::Release);
        assert_eq!(
            read_record(&view, 1, &mut dst),
            RawRead::Lapped { resume_at: 2 }
        );
    }

    /// A mirror in the middle of a frame longer than the ring (written with `write_raw`,
    /// published once at its end): a record behind the oldest that `write_seq` leaves in
    /// the ring resumes there, not one record on (which walked a reader that far behind
    /// through the ring one record per read until the publish).
    #[test]
    fn a_record_behind_the_ring_during_a_long_frame_resumes_at_the_oldest() {
        let (_m, view) = spmc_ring(4, 16);
        let mut p = Producer::new(view, NoWake).unwrap();
        for s in 1..=20u8 {
            p.push(&[s]).unwrap();
        }
        for s in 21..=30u8 {
            assert!(p.write_raw(u64::from(s), &[s]));
        }
        let mut dst = [0u8; 8];
        // Slot 2 holds 30, more than a lap past write_seq 20.
        assert_eq!(
            read_record(&view, 2, &mut dst),
            RawRead::Lapped { resume_at: 17 }
        );
        // In the last lap of write_seq: lost alone.
        assert_eq!(
            read_record(&view, 18, &mut dst),
            RawRead::Lapped { resume_at: 19 }
        );
        p.commit();
        assert_eq!(
            read_record(&view, 2, &mut dst),
            RawRead::Lapped { resume_at: 27 }
        );
    }

    /// A slot holding a sequence no writer stores there (more than a lap past
    /// `write_seq`, or at or past `SEQ_LIMIT`): the record is lost, resumed right after,
    /// not a lap to that value's oldest retained sequence; not written yet past
    /// `write_seq`.
    #[test]
    fn a_slot_holding_a_sequence_no_lap_stores_is_one_lost_record() {
        use crate::layout::SEQ_LIMIT;
        for bad in [6 + 4 + 1, 1 << 40, SEQ_LIMIT, u64::MAX - 1] {
            let (_m, view) = spmc_ring(4, 16);
            let mut p = Producer::new(view, NoWake).unwrap();
            for s in 1..=6u8 {
                p.push(&[s]).unwrap();
            }
            let mut dst = [0u8; 8];
            view.slot_seq(4).store(bad, Ordering::Relaxed);
            assert_eq!(
                read_record(&view, 4, &mut dst),
                RawRead::Lapped { resume_at: 5 },
                "{bad:#x}"
            );
            assert_eq!(read_record(&view, 5, &mut dst), RawRead::Record);
            view.slot_seq(7).store(bad, Ordering::Relaxed);
            assert_eq!(
                read_record(&view, 7, &mut dst),
                RawRead::Pending,
                "{bad:#x}"
            );
        }
    }

    /// `claim_seq` bounds the tickets in flight of an MPMC-flagged ring alone. On another
    /// ring (where it is 0), or at or past `SEQ_LIMIT` (a corrupt header), a value there
    /// made a corrupt slot a lap to that slot's oldest retained sequence, far past anything
    /// the ring holds, instead of one lost record.
    #[test]
    fn claim_seq_bounds_nothing_on_a_single_writer_ring_or_past_the_limit() {
        use crate::layout::{Geometry, SEQ_LIMIT};
        use crate::testutil::heap_ring;
        let bad = 1 << 40;
        for (geo, claim) in [
            (Geometry::spmc(4, 16, 8, 0, false).unwrap(), bad + 1),
            (Geometry::spmc(4, 16, 8, 0, false).unwrap(), u64::MAX),
            (Geometry::mpmc(4, 16, 8).unwrap(), SEQ_LIMIT),
        ] {
            let (_m, view) = heap_ring(&geo);
            for s in 1..=6u64 {
                view.write_slot(s, &s.to_le_bytes());
            }
            view.write_seq().store(6, Ordering::Release);
            view.claim_seq().store(claim, Ordering::Relaxed);
            view.slot_seq(4).store(bad, Ordering::Relaxed);
            let mut dst = [0u8; 8];
            assert_eq!(
                read_record(&view, 4, &mut dst),
                RawRead::Lapped { resume_at: 5 },
                "{claim:#x}"
            );
        }
    }
}
