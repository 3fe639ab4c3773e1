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

/// Collects up to `max_records` records from `cursor` into `out[HEADER_LEN..]`, stopping once
/// the frame (header included) reaches `max_bytes`. A record that would take a non-empty frame
/// past `max_bytes` is held back; a single record larger than the budget is still taken alone
/// if `out` can hold it, and is reported [`Stop::Lost`] if it cannot.
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
    let area = out.get_mut(HEADER_LEN..).unwrap_or(&mut []);
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
                c.stop = Stop::Pending;
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
