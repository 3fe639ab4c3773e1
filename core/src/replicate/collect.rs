//! Collecting consecutive records into one DATA frame under a record and a byte budget
//! (spec §20.1 "Collect").

use super::ring_io::{ReadRecord, RecordSource};
use crate::wire::HEADER_LEN;

/// Why a collect stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The next record is not published yet.
    Pending,
    /// `max_records` reached, or the byte budget reached or a record held back for it.
    Full,
    /// The next record was overwritten; `seen` is the sequence found.
    Lapped {
        /// The sequence seen.
        seen: u64,
    },
    /// The next record cannot be sent.
    Lost,
    /// The next record is a hole that will never be written (a sparse mirror ring,
    /// [`RecordSource::hole_end`]); `next` is the first sequence after it, or one inside a
    /// long hole up to which everything is hole.
    Hole {
        /// The sequence after the hole.
        next: u64,
    },
}

/// What a collect put into the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Collected {
    /// Records collected (consecutive from the cursor).
    pub count: u16,
    /// Payload bytes they take after the header.
    pub bytes: usize,
    /// Why collecting stopped.
    pub stop: Stop,
}

impl Collected {
    /// True when pacing must not linger any longer (spec §23 "full").
    pub const fn is_full(&self) -> bool {
        !matches!(self.stop, Stop::Pending)
    }
}

/// The longest DATA frame (header included) a source can send for a ring of geometry `geo`
/// under the TCP byte budget `budget` (spec §22): frames fill up to the budget, and one
/// record larger than that goes alone. The longest record is a slot's payload plus, on a
/// blob ring, a blob as long as the whole arena (and a blob length is a `u32`). A source's
/// frame buffer of this size never turns a record into a GAP; a mirror's stream buffer of
/// this size accepts every frame a source may send for the ring.
pub fn max_frame_len(geo: &crate::Geometry, budget: usize) -> usize {
    let payload = u64::from(geo.element_size.saturating_sub(8));
    let blob = if geo.arena_offset != 0 {
        geo.arena_size.min(u64::from(u32::MAX))
    } else {
        0
    };
    let record = usize::try_from(payload.saturating_add(blob)).unwrap_or(usize::MAX);
    budget.max(HEADER_LEN.saturating_add(record))
}

/// Collects up to `max_records` records from `cursor` into `out[HEADER_LEN..]`, stopping once
/// the frame (header included) reaches `max_bytes`. A record that would take a non-empty frame
/// past `max_bytes` is held back; a single record larger than the budget is still taken alone
/// if `out` can hold it, and is reported [`Stop::Lost`] if it cannot. The payload never
/// exceeds `u32::MAX` bytes (the header's `len`), so a record longer than that is lost too.
/// A record not published yet ends the frame: [`Stop::Pending`], or [`Stop::Hole`] when the
/// ring says it never will be ([`RecordSource::hole_end`]).
pub fn collect<R: RecordSource + ?Sized>(
    ring: &R,
    cursor: u64,
    max_records: u16,
    max_bytes: usize,
    out: &mut [u8],
) -> Collected {
    let mut c = Collected {
        count: 0,
        bytes: 0,
        stop: Stop::Full,
    };
    // The header's `len` is a u32: no frame carries more payload, whatever the budget.
    let end = out.len().min(HEADER_LEN.saturating_add(u32::MAX as usize));
    let area = out.get_mut(HEADER_LEN..end).unwrap_or(&mut []);
    while c.count < max_records {
        if HEADER_LEN + c.bytes >= max_bytes {
            return c;
        }
        let limit = if c.count == 0 {
            area.len()
        } else {
            (max_bytes - HEADER_LEN).min(area.len())
        };
        let dst = &mut area[c.bytes..limit];
        match ring.read_record(cursor + u64::from(c.count), dst) {
            ReadRecord::Ok(n) => {
                c.bytes += n;
                c.count += 1;
            }
            ReadRecord::TooLarge { .. } if c.count > 0 => return c,
            ReadRecord::TooLarge { .. } | ReadRecord::Lost => {
                c.stop = Stop::Lost;
                return c;
            }
            ReadRecord::Pending => {
                let seq = cursor + u64::from(c.count);
                c.stop = match ring.hole_end(seq) {
                    // A hole ends the frame at once: nothing past it can join this frame.
                    Some(next) => Stop::Hole { next },
                    None => Stop::Pending,
                };
                return c;
            }
            ReadRecord::Overwritten { seen } => {
                c.stop = Stop::Lapped { seen };
                return c;
            }
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Geometry;

    /// A source of records `len` bytes long that it does not write (the test's buffer stays
    /// untouched, so gigabytes of it cost no memory).
    struct Huge {
        len: usize,
    }

    impl RecordSource for Huge {
        fn geometry(&self) -> Geometry {
            Geometry::blob(64, 32, 0, 8 << 30).unwrap()
        }
        fn write_seq(&self) -> u64 {
            10
        }
        fn read_record(&self, _seq: u64, dst: &mut [u8]) -> ReadRecord {
            if dst.len() >= self.len {
                ReadRecord::Ok(self.len)
            } else {
                ReadRecord::TooLarge { need: self.len }
            }
        }
    }

    /// A DATA frame's `len` is a u32: a frame never holds more than `u32::MAX` payload
    /// bytes. Under a byte budget past 4 GiB (the session's is a `usize`, its buffer as long
    /// as the longest record) two records of 2.5 GiB were collected together, and a record
    /// of 4 GiB or more (a blob of nearly 4 GiB behind its descriptor) alone: the sender
    /// then wrote their length cut to 32 bits into the header, and the mirror read the
    /// record bytes that followed as frames. The second record now waits for the next frame,
    /// and a record too long for any frame cannot be sent (lost: the TCP session sends a GAP
    /// past it, the UDP sender skips it).
    #[test]
    #[cfg(target_pointer_width = "64")]
    #[cfg_attr(miri, ignore = "a 5 GiB allocation")]
    fn a_frame_holds_at_most_u32_max_payload_bytes() {
        let big = (5usize << 29) + 8; // 2.5 GiB
        let mut out = std::vec![0u8; HEADER_LEN + 2 * big];
        let c = collect(&Huge { len: big }, 1, 10, usize::MAX, &mut out);
        assert_eq!((c.count, c.bytes, c.stop), (1, big, Stop::Full));
        let c = collect(&Huge { len: 1 << 32 }, 1, 10, usize::MAX, &mut out);
        assert_eq!((c.count, c.stop), (0, Stop::Lost));
        let max = u32::MAX as usize;
        let c = collect(&Huge { len: max }, 1, 10, usize::MAX, &mut out);
        assert_eq!((c.count, c.bytes), (1, max));
    }

    #[test]
    fn the_longest_frame_is_the_budget_or_one_whole_record() {
        const MIB: usize = 1 << 20;
        // Fixed records never exceed the budget: one 72-byte slot carries 64 bytes.
        let fixed = Geometry::spmc(1024, 72, 8, 0, false).unwrap();
        assert_eq!(max_frame_len(&fixed, MIB), MIB);
        // A budget below one record: the record goes alone.
        assert_eq!(max_frame_len(&fixed, 32), HEADER_LEN + 64);
        // A blob ring: descriptor payload (32 - 8) plus a blob as long as the arena.
        let blob = Geometry::blob(64, 32, 0, 8 << 20).unwrap();
        assert_eq!(max_frame_len(&blob, MIB), HEADER_LEN + 24 + (8 << 20));
        assert_eq!(max_frame_len(&blob, 64 << 20), 64 << 20);
    }
}
