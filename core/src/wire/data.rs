//! DATA (kind 3, spec §18.4): `count` consecutive records starting at `seq`, for
//! fixed-record rings (each record `P = element_size − 8` bytes) and blob rings (each record
//! a `P`-byte descriptor followed by `BlobRef.len` blob bytes).

use super::header::need;
use super::{Frame, HEADER_LEN, HeaderRepr, Kind, WireError};
use crate::layout::Geometry;

/// How the records of a DATA payload are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RecordFormat {
    /// Every record is `record_len` bytes.
    Fixed {
        /// `element_size - 8`; 0 for a ring of zero-sized records (stride 8: the slot holds
        /// only its sequence word), whose DATA frames have `len` 0.
        record_len: usize,
    },
    /// Every record is a `desc_len`-byte descriptor whose last 16 bytes are a BlobRef,
    /// followed by `BlobRef.len` bytes.
    Blob {
        /// `element_size - 8` (≥ 16).
        desc_len: usize,
    },
}

impl RecordFormat {
    /// The record format of a ring.
    pub const fn of(g: &Geometry) -> RecordFormat {
        if g.has_arena() {
            RecordFormat::Blob {
                desc_len: g.record_len(),
            }
        } else {
            RecordFormat::Fixed {
                record_len: g.record_len(),
            }
        }
    }

    /// Bytes of the fixed part (record or descriptor).
    pub const fn fixed_len(&self) -> usize {
        match *self {
            RecordFormat::Fixed { record_len } => record_len,
            RecordFormat::Blob { desc_len } => desc_len,
        }
    }

    fn check(&self) -> Result<(), WireError> {
        match *self {
            // Zero-sized records are valid (§18.2 allows stride 8): `count` bounds the records,
            // never the payload length, so nothing divides by `record_len` or loops on it.
            RecordFormat::Fixed { .. } => Ok(()),
            RecordFormat::Blob { desc_len } if desc_len >= 16 => Ok(()),
            f => Err(WireError::BadRecordLen {
                record_len: f.fixed_len(),
            }),
        }
    }

    /// Length of the record at the start of `bytes`, or how many bytes it needs.
    fn record_at(&self, bytes: &[u8]) -> Result<usize, u64> {
        match *self {
            RecordFormat::Fixed { record_len } => {
                if bytes.len() >= record_len {
                    Ok(record_len)
                } else {
                    Err(record_len as u64)
                }
            }
            RecordFormat::Blob { desc_len } => {
                let Some(d) = bytes.get(..desc_len) else {
                    return Err(desc_len as u64);
                };
                let total = desc_len as u64 + u64::from(blob_len(d));
                if bytes.len() as u64 >= total {
                    Ok(total as usize)
                } else {
                    Err(total)
                }
            }
        }
    }
}

/// `BlobRef.len` of a descriptor: the u32 at 8 bytes into its last 16 bytes.
pub(crate) fn blob_len(desc: &[u8]) -> u32 {
    let at = desc.len().saturating_sub(8);
    let mut b = [0u8; 4];
    if let Some(s) = desc.get(at..at + 4) {
        b.copy_from_slice(s);
    }
    u32::from_le_bytes(b)
}

/// A DATA frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataRepr<'a> {
    /// 0 on TCP, the session byte on UDP.
    pub flags: u8,
    /// Sequence of the first record.
    pub seq: u64,
    /// Number of records.
    pub count: u16,
    /// The records, back to back.
    pub records: &'a [u8],
}

impl<'a> DataRepr<'a> {
    /// Parses and validates against `fmt`: `count > 0`, sequences in `1..u64::MAX`, and the
    /// exact payload size of §18.4 (no short blob, no trailing bytes).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        frame: &'a Frame<&'a T>,
        fmt: RecordFormat,
    ) -> Result<DataRepr<'a>, WireError> {
        fmt.check()?;
        let found = frame.kind().ok_or(WireError::UnknownKind {
            kind: frame.kind_byte(),
        })?;
        if found != Kind::Data {
            return Err(WireError::WrongKind {
                expected: Kind::Data,
                found,
            });
        }
        let count = frame.count();
        if count == 0 {
            return Err(WireError::ZeroCount);
        }
        let seq = frame.seq();
        if seq == 0 || seq.checked_add(u64::from(count)).is_none() {
            return Err(WireError::BadSeq { seq, count });
        }
        let payload = frame.payload();
        match fmt {
            RecordFormat::Fixed { record_len } => {
                if u64::from(count) * record_len as u64 != u64::from(frame.len()) {
                    return Err(WireError::DataLenMismatch {
                        count,
                        record_len,
                        len: frame.len(),
                    });
                }
            }
            RecordFormat::Blob { .. } => {
                let mut rest = payload;
                for index in 0..count {
                    match fmt.record_at(rest) {
                        Ok(n) => rest = &rest[n..],
                        Err(need) => {
                            return Err(WireError::BlobTruncated {
                                index,
                                need,
                                have: rest.len(),
                            });
                        }
                    }
                }
                if !rest.is_empty() {
                    return Err(WireError::DataTrailing { extra: rest.len() });
                }
            }
        }
        Ok(DataRepr {
            flags: frame.flags(),
            seq,
            count,
            records: payload,
        })
    }

    /// Sequence after the last record. Saturates at `u64::MAX` for a hand-built repr (its
    /// fields are public) that [`DataRepr::parse`] would refuse, instead of an overflow panic.
    pub const fn end(&self) -> u64 {
        self.seq.saturating_add(self.count as u64)
    }

    /// Bytes the frame takes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.records.len()
    }

    /// Writes the frame into `buf`; returns its length. Records of 4 GiB or more, which the
    /// header's 32-bit `len` cannot announce, are [`WireError::DataTooLarge`].
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let len = u32::try_from(self.records.len()).map_err(|_| WireError::DataTooLarge {
            len: self.records.len() as u64,
        })?;
        need(buf, self.buffer_len())?;
        HeaderRepr {
            kind: Kind::Data,
            flags: self.flags,
            count: self.count,
            len,
            seq: self.seq,
        }
        .emit(buf)?;
        buf[HEADER_LEN..self.buffer_len()].copy_from_slice(self.records);
        Ok(self.buffer_len())
    }

    /// Iterates the records (the frame must have been parsed with the same `fmt`).
    pub fn iter(&self, fmt: RecordFormat) -> DataRecords<'a> {
        DataRecords {
            fmt,
            seq: self.seq,
            left: self.count,
            rest: self.records,
        }
    }
}

/// One record of a DATA frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataRecord<'a> {
    /// Its sequence.
    pub seq: u64,
    /// The fixed part: the whole record, or the blob descriptor.
    pub fixed: &'a [u8],
    /// The blob bytes (empty for fixed records).
    pub blob: &'a [u8],
}

/// Iterator over the records of a DATA frame.
#[derive(Debug, Clone)]
pub struct DataRecords<'a> {
    fmt: RecordFormat,
    seq: u64,
    left: u16,
    rest: &'a [u8],
}

impl<'a> Iterator for DataRecords<'a> {
    type Item = DataRecord<'a>;
    fn next(&mut self) -> Option<DataRecord<'a>> {
        if self.left == 0 {
            return None;
        }
        let n = self.fmt.record_at(self.rest).ok()?;
        let (rec, rest) = self.rest.split_at(n);
        let (fixed, blob) = rec.split_at(self.fmt.fixed_len().min(n));
        let r = DataRecord {
            seq: self.seq,
            fixed,
            blob,
        };
        self.rest = rest;
        self.left -= 1;
        self.seq = self.seq.wrapping_add(1);
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Spec §18.4 example: u64 ring, 3 records.
    pub const CAPTURED: [u8; 40] = [
        3, 0, 3, 0, 0x18, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, // header
        1, 0x10, 0, 0, 0, 0, 0, 0, 2, 0x10, 0, 0, 0, 0, 0, 0, 3, 0x10, 0, 0, 0, 0, 0, 0,
    ];
    const U64: RecordFormat = RecordFormat::Fixed { record_len: 8 };

    #[test]
    fn captured_data() {
        let f = Frame::new_checked(&CAPTURED[..]).unwrap();
        let d = DataRepr::parse(&f, U64).unwrap();
        assert_eq!((d.flags, d.seq, d.count, d.end()), (0, 1, 3, 4));
        let vals: heapless::Vec<(u64, u64), 4> = d
            .iter(U64)
            .map(|r| (r.seq, u64::from_le_bytes(r.fixed.try_into().unwrap())))
            .collect();
        assert_eq!(&vals[..], &[(1, 0x1001), (2, 0x1002), (3, 0x1003)]);
        let mut out = [0u8; 40];
        assert_eq!(d.emit(&mut out), Ok(40));
        assert_eq!(out, CAPTURED);
    }

    /// `end` of a repr built by hand with a sequence near `u64::MAX` (parse refuses such a
    /// frame, but the fields are public, for emitting) overflowed: a panic in debug builds.
    #[test]
    fn end_of_a_hand_built_repr_does_not_overflow() {
        let d = DataRepr {
            flags: 0,
            seq: u64::MAX,
            count: 2,
            records: &[],
        };
        assert_eq!(d.end(), u64::MAX);
        let d = DataRepr {
            seq: u64::MAX - 3,
            ..d
        };
        assert_eq!(d.end(), u64::MAX - 1);
    }

    #[test]
    fn data_rejects() {
        let f = Frame::new_checked(&CAPTURED[..]).unwrap();
        assert_eq!(
            DataRepr::parse(&f, RecordFormat::Fixed { record_len: 16 }).err(),
            Some(WireError::DataLenMismatch {
                count: 3,
                record_len: 16,
                len: 24
            })
        );
        let mut b = CAPTURED;
        b[2] = 0;
        let f = Frame::new_checked(&b[..]).unwrap();
        assert_eq!(DataRepr::parse(&f, U64).err(), Some(WireError::ZeroCount));
        let mut b = CAPTURED;
        b[8..16].copy_from_slice(&(u64::MAX - 2).to_le_bytes());
        let f = Frame::new_checked(&b[..]).unwrap();
        assert_eq!(
            DataRepr::parse(&f, U64).err(),
            Some(WireError::BadSeq {
                seq: u64::MAX - 2,
                count: 3
            })
        );
        let mut b = CAPTURED;
        b[8] = 0;
        let f = Frame::new_checked(&b[..]).unwrap();
        assert!(DataRepr::parse(&f, U64).is_err());
        let f = Frame::new_checked(&CAPTURED[..]).unwrap();
        assert_eq!(
            DataRepr::parse(&f, RecordFormat::Blob { desc_len: 8 }).err(),
            Some(WireError::BadRecordLen { record_len: 8 })
        );
    }

    /// Zero-sized records (a stride-8 ring): `len` 0, `count` records of 0 bytes each.
    #[test]
    fn zero_sized_records() {
        const ZERO: RecordFormat = RecordFormat::Fixed { record_len: 0 };
        let d = DataRepr {
            flags: 0,
            seq: 7,
            count: 3,
            records: &[],
        };
        let mut b = [0u8; 16];
        assert_eq!(d.emit(&mut b), Ok(16));
        let f = Frame::new_checked(&b[..]).unwrap();
        assert_eq!(DataRepr::parse(&f, ZERO), Ok(d));
        let seqs: heapless::Vec<(u64, usize), 4> =
            d.iter(ZERO).map(|r| (r.seq, r.fixed.len())).collect();
        assert_eq!(&seqs[..], &[(7, 0), (8, 0), (9, 0)]);
        // A zero-sized record format still refuses a payload.
        let mut long = [0u8; 17];
        d.emit(&mut long).unwrap();
        long[4] = 1;
        let f = Frame::new_checked(&long[..]).unwrap();
        assert_eq!(
            DataRepr::parse(&f, ZERO).err(),
            Some(WireError::DataLenMismatch {
                count: 3,
                record_len: 0,
                len: 1
            })
        );
    }

    fn blob_record(out: &mut heapless::Vec<u8, 512>, meta: u8, blob: &[u8]) {
        out.extend_from_slice(&[meta; 8]).unwrap();
        out.extend_from_slice(&0xdead_u64.to_le_bytes()).unwrap();
        out.extend_from_slice(&(blob.len() as u32).to_le_bytes())
            .unwrap();
        out.extend_from_slice(&7u32.to_le_bytes()).unwrap();
        out.extend_from_slice(blob).unwrap();
    }

    #[test]
    fn blob_records() {
        const FMT: RecordFormat = RecordFormat::Blob { desc_len: 24 };
        let mut recs = heapless::Vec::<u8, 512>::new();
        blob_record(&mut recs, 1, b"hello");
        blob_record(&mut recs, 2, b"");
        blob_record(&mut recs, 3, b"xyz");
        let d = DataRepr {
            flags: 5,
            seq: 10,
            count: 3,
            records: &recs,
        };
        let mut b = [0u8; 512];
        let n = d.emit(&mut b).unwrap();
        let f = Frame::new_checked(&b[..n]).unwrap();
        let p = DataRepr::parse(&f, FMT).unwrap();
        assert_eq!(p, d);
        let blobs: heapless::Vec<(u64, u8, &[u8]), 4> =
            p.iter(FMT).map(|r| (r.seq, r.fixed[0], r.blob)).collect();
        assert_eq!(
            &blobs[..],
            &[
                (10, 1, &b"hello"[..]),
                (11, 2, &b""[..]),
                (12, 3, &b"xyz"[..])
            ]
        );
        // One byte short: the last blob is truncated.
        let mut short = b;
        short[4..8].copy_from_slice(&((n - 17) as u32).to_le_bytes());
        let f = Frame::new_checked(&short[..n - 1]).unwrap();
        assert_eq!(
            DataRepr::parse(&f, FMT).err(),
            Some(WireError::BlobTruncated {
                index: 2,
                need: 27,
                have: 26
            })
        );
        // One byte extra: trailing bytes.
        let mut long = b;
        long[4..8].copy_from_slice(&((n - 15) as u32).to_le_bytes());
        let f = Frame::new_checked(&long[..n + 1]).unwrap();
        assert_eq!(
            DataRepr::parse(&f, FMT).err(),
            Some(WireError::DataTrailing { extra: 1 })
        );
    }

    proptest! {
        #[test]
        fn fixed_roundtrip(flags: u8, seq in 1u64..u64::MAX / 2, rl in 0usize..40, count in 1u16..20, fill: u8) {
            let recs = [fill; 40 * 20];
            let d = DataRepr { flags, seq, count, records: &recs[..rl * count as usize] };
            let fmt = RecordFormat::Fixed { record_len: rl };
            let mut b = [0u8; 16 + 800];
            let n = d.emit(&mut b).unwrap();
            let f = Frame::new_checked(&b[..n]).unwrap();
            prop_assert_eq!(DataRepr::parse(&f, fmt), Ok(d));
            prop_assert_eq!(d.iter(fmt).count(), count as usize);
        }

        #[test]
        fn blob_roundtrip(seq in 1u64..1000, lens in proptest::collection::vec(0usize..40, 1..8)) {
            let fmt = RecordFormat::Blob { desc_len: 24 };
            let mut recs = heapless::Vec::<u8, 512>::new();
            for (i, l) in lens.iter().enumerate() {
                blob_record(&mut recs, i as u8, &[i as u8; 40][..*l]);
            }
            let d = DataRepr { flags: 0, seq, count: lens.len() as u16, records: &recs };
            let mut b = [0u8; 600];
            let n = d.emit(&mut b).unwrap();
            let f = Frame::new_checked(&b[..n]).unwrap();
            let p = DataRepr::parse(&f, fmt).unwrap();
            prop_assert_eq!(p, d);
            for (r, l) in p.iter(fmt).zip(lens.iter()) {
                prop_assert_eq!(r.blob.len(), *l);
            }
        }
    }

    /// Records over 4 GiB are refused by their length, before the buffer is looked at. It
    /// said FrameTooLarge with len and max both u32::MAX, neither of them the length.
    /// 64-bit only (no such slice on a 32-bit target); the 4 GiB is calloc'd, never touched.
    #[test]
    #[cfg(target_pointer_width = "64")]
    #[cfg_attr(miri, ignore = "a 4 GiB allocation")]
    fn emit_of_records_over_4_gib_names_their_length() {
        let n = u32::MAX as usize + 9;
        let records = std::vec![0u8; n];
        let d = DataRepr {
            flags: 0,
            seq: 1,
            count: 1,
            records: &records,
        };
        let mut buf = [0u8; 64];
        let e = d.emit(&mut buf);
        assert_eq!(e, Err(WireError::DataTooLarge { len: n as u64 }));
        assert_eq!(buf, [0u8; 64], "nothing written");
        assert!(
            e.unwrap_err().to_string().contains("4294967304 bytes"),
            "the length is named"
        );
    }
}
