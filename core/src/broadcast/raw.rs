//! Raw record access for a replication source (spec §20.1 on fixed-record rings): the §4.3
//! read on raw bytes, with the lap rule of §20.2, without knowing the record type.

use crate::layout::oldest_retained;
use crate::ring::{RingView, SlotRead};
use crate::sync::Ordering;

/// Outcome of [`read_record`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RawRead {
    /// `dst` holds the record: `min(dst.len(), element_size - 8)` raw bytes from slot + 8.
    Record,
    /// Not published yet, or being overwritten while `write_seq` has not yet moved past the
    /// asked sequence: stop collecting and try again later.
    Pending,
    /// The record is gone: the oldest sequence the ring can still hold is `resume_at`
    /// (always greater than the sequence asked for). A TCP source sends `GAP(resume_at)`.
    Lapped {
        /// Where to continue reading.
        resume_at: u64,
    },
}

/// Reads record `seq` into `dst` with the tear-free protocol (spec §4.3).
///
/// When the slot holds a newer record, `r = oldest_retained(max(write_seq, seen), C)`
/// (§20.2): if `r > seq` the record is reported [`RawRead::Lapped`] with `resume_at = r`,
/// otherwise (the re-check saw a write in flight) it is [`RawRead::Pending`], which a
/// source treats as "retry".
#[inline]
pub fn read_record(view: &RingView, seq: u64, dst: &mut [u8]) -> RawRead {
    match view.read_slot(seq, dst) {
        SlotRead::Ok => RawRead::Record,
        SlotRead::Pending => RawRead::Pending,
        SlotRead::Overwritten { seen } => {
            // Acquire: pairs with the producer's publish; only its value is used here.
            let w = view.write_seq().load(Ordering::Acquire);
            let r = oldest_retained(w.max(seen), view.capacity());
            if r > seq {
                RawRead::Lapped { resume_at: r }
            } else {
                RawRead::Pending
            }
        }
    }
}
