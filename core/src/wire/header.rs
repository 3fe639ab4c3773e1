//! The 16-byte frame header (spec §17) and [`Frame`], a checked view over one whole frame.

use zerocopy::byteorder::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::{Kind, WireError};

/// The header as it lies on the wire.
#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
pub struct RawHeader {
    /// Frame kind.
    pub kind: u8,
    /// Kind-specific flags (the session byte on UDP).
    pub flags: u8,
    /// Record count (DATA), else 0.
    pub count: U16,
    /// Payload length after the header.
    pub len: U32,
    /// Kind-specific sequence.
    pub seq: U64,
}

/// Field offsets of the header, named in one place.
pub mod field {
    /// `kind` (u8).
    pub const KIND: usize = 0;
    /// `flags` (u8).
    pub const FLAGS: usize = 1;
    /// `count` (u16 LE).
    pub const COUNT: usize = 2;
    /// `len` (u32 LE).
    pub const LEN: usize = 4;
    /// `seq` (u64 LE).
    pub const SEQ: usize = 8;
    /// Header size; the payload starts here.
    pub const PAYLOAD: usize = 16;
}

/// Header length in bytes.
pub const HEADER_LEN: usize = field::PAYLOAD;

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<RawHeader>() == HEADER_LEN);
    assert!(offset_of!(RawHeader, kind) == field::KIND);
    assert!(offset_of!(RawHeader, flags) == field::FLAGS);
    assert!(offset_of!(RawHeader, count) == field::COUNT);
    assert!(offset_of!(RawHeader, len) == field::LEN);
    assert!(offset_of!(RawHeader, seq) == field::SEQ);
};

/// The bytes a frame whose header announces `len` takes (`HEADER_LEN + len`), or
/// [`WireError::FrameTooLarge`] when that does not fit a `usize`: a hostile `len` near
/// `u32::MAX` on a 32-bit target (thumbv7em, riscv32), where the plain sum would overflow.
pub fn total_len(len: u32) -> Result<usize, WireError> {
    total_len_within(len, usize::MAX as u64).map(|t| t as usize)
}

/// [`total_len`] for a target whose `usize::MAX` is `usize_max`: the sum in u64 (it cannot
/// overflow there), refused above `usize_max`. Separate so that 64-bit tests can run the
/// 32-bit case.
fn total_len_within(len: u32, usize_max: u64) -> Result<u64, WireError> {
    let total = HEADER_LEN as u64 + u64::from(len);
    if total <= usize_max {
        Ok(total)
    } else {
        Err(WireError::FrameTooLarge {
            len,
            // Lossless: `usize_max` is at most usize::MAX as u64.
            max: (usize_max - HEADER_LEN as u64) as usize,
        })
    }
}

/// Total length of the frame at the start of `bytes` (header + `len`), once its header is
/// complete, or the error [`total_len`] gives. For cutting frames out of a TCP byte stream.
pub fn frame_total(bytes: &[u8]) -> Option<Result<usize, WireError>> {
    let (h, _) = RawHeader::ref_from_prefix(bytes).ok()?;
    Some(total_len(h.len.get()))
}

/// [`frame_total`] as a plain length: `usize::MAX`, more than any buffer holds, for a frame
/// whose length does not fit a `usize`.
pub fn frame_len(bytes: &[u8]) -> Option<usize> {
    frame_total(bytes).map(|t| t.unwrap_or(usize::MAX))
}

/// A view over the bytes of exactly one frame: header followed by `len` payload bytes.
#[derive(Debug, Clone, Copy)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wraps a buffer without checking it; getters may then see a short buffer as zeros.
    /// Use for emitting into a buffer of at least [`HEADER_LEN`] bytes.
    pub const fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// Wraps a buffer that must hold exactly one frame: a complete header, a known kind and
    /// exactly `len` payload bytes.
    pub fn new_checked(buffer: T) -> Result<Frame<T>, WireError> {
        let b = buffer.as_ref();
        let Ok((h, _)) = RawHeader::ref_from_prefix(b) else {
            return Err(WireError::Truncated {
                need: HEADER_LEN,
                have: b.len(),
            });
        };
        Kind::from_u8(h.kind).ok_or(WireError::UnknownKind { kind: h.kind })?;
        let total = total_len(h.len.get())?;
        if b.len() < total {
            return Err(WireError::Truncated {
                need: total,
                have: b.len(),
            });
        }
        if b.len() > total {
            return Err(WireError::TrailingBytes {
                expected: total,
                have: b.len(),
            });
        }
        Ok(Frame { buffer })
    }

    fn raw(&self) -> RawHeader {
        RawHeader::read_from_prefix(self.buffer.as_ref())
            .map(|(h, _)| h)
            .unwrap_or_else(|_| RawHeader::new_zeroed())
    }

    /// The raw `kind` byte.
    pub fn kind_byte(&self) -> u8 {
        self.raw().kind
    }
    /// The frame kind (checked by `new_checked`).
    pub fn kind(&self) -> Option<Kind> {
        Kind::from_u8(self.kind_byte())
    }
    /// `flags`.
    pub fn flags(&self) -> u8 {
        self.raw().flags
    }
    /// `count`.
    pub fn count(&self) -> u16 {
        self.raw().count.get()
    }
    /// `len`.
    pub fn len(&self) -> u32 {
        self.raw().len.get()
    }
    /// True when `len == 0`.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// `seq`.
    pub fn seq(&self) -> u64 {
        self.raw().seq.get()
    }
    /// The payload bytes (up to `len`, clipped to the buffer).
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        let end = total_len(self.len()).unwrap_or(usize::MAX).min(b.len());
        b.get(HEADER_LEN..end).unwrap_or(&[])
    }
    /// The whole frame.
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// Returns the payload of a frame of kind `want` whose `len` is exactly `expected`.
    pub fn fixed_payload(&self, want: Kind, expected: u32) -> Result<&[u8], WireError> {
        let found = self.kind().ok_or(WireError::UnknownKind {
            kind: self.kind_byte(),
        })?;
        if found != want {
            return Err(WireError::WrongKind {
                expected: want,
                found,
            });
        }
        if self.len() != expected {
            return Err(WireError::BadLen {
                kind: want,
                expected,
                found: self.len(),
            });
        }
        Ok(self.payload())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Writes the header fields (the buffer must hold at least [`HEADER_LEN`] bytes).
    pub fn set_header(&mut self, h: &HeaderRepr) -> Result<(), WireError> {
        let b = self.buffer.as_mut();
        let have = b.len();
        let raw = RawHeader {
            kind: h.kind as u8,
            flags: h.flags,
            count: U16::new(h.count),
            len: U32::new(h.len),
            seq: U64::new(h.seq),
        };
        raw.write_to_prefix(b)
            .map_err(|_| WireError::BufferTooSmall {
                need: HEADER_LEN,
                have,
            })
    }
    /// The payload area after the header, mutable (as long as the buffer).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        self.buffer
            .as_mut()
            .get_mut(HEADER_LEN..)
            .unwrap_or(&mut [])
    }
}

/// The header fields as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct HeaderRepr {
    /// Frame kind.
    pub kind: Kind,
    /// Flags byte.
    pub flags: u8,
    /// Record count.
    pub count: u16,
    /// Payload length.
    pub len: u32,
    /// Sequence field.
    pub seq: u64,
}

impl HeaderRepr {
    /// Reads the header of a checked frame.
    pub fn parse<T: AsRef<[u8]>>(frame: &Frame<T>) -> Result<HeaderRepr, WireError> {
        Ok(HeaderRepr {
            kind: frame.kind().ok_or(WireError::UnknownKind {
                kind: frame.kind_byte(),
            })?,
            flags: frame.flags(),
            count: frame.count(),
            len: frame.len(),
            seq: frame.seq(),
        })
    }

    /// A control frame (GAP, HEARTBEAT, PUNCH): `len = 0`, `count = 0`.
    pub const fn control(kind: Kind, flags: u8, seq: u64) -> HeaderRepr {
        HeaderRepr {
            kind,
            flags,
            count: 0,
            len: 0,
            seq,
        }
    }

    /// Writes the header into the first 16 bytes of `buf`; returns 16.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        Frame::new_unchecked(buf).set_header(self)?;
        Ok(HEADER_LEN)
    }
}

/// Checks that `buf` holds `need` bytes (for emitters).
pub(crate) fn need(buf: &[u8], need: usize) -> Result<(), WireError> {
    if buf.len() < need {
        Err(WireError::BufferTooSmall {
            need,
            have: buf.len(),
        })
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_roundtrip_and_checks() {
        let mut b = [0u8; 24];
        let h = HeaderRepr {
            kind: Kind::Nak,
            flags: 0,
            count: 0,
            len: 8,
            seq: 0x0102_0304_0506_0708,
        };
        assert_eq!(h.emit(&mut b), Ok(16));
        assert_eq!(&b[..16], &[6, 0, 0, 0, 8, 0, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1]);
        let f = Frame::new_checked(&b[..]).unwrap();
        assert_eq!(HeaderRepr::parse(&f), Ok(h));
        assert_eq!(frame_len(&b), Some(24));
        assert_eq!(frame_len(&b[..15]), None);
        assert_eq!(
            Frame::new_checked(&b[..23]).err(),
            Some(WireError::Truncated { need: 24, have: 23 })
        );
        let mut long = [0u8; 25];
        long[..24].copy_from_slice(&b);
        assert_eq!(
            Frame::new_checked(&long[..]).err(),
            Some(WireError::TrailingBytes {
                expected: 24,
                have: 25
            })
        );
        b[0] = 9;
        assert_eq!(
            Frame::new_checked(&b[..]).err(),
            Some(WireError::UnknownKind { kind: 9 })
        );
        assert_eq!(
            HeaderRepr::control(Kind::Gap, 0, 1).emit(&mut [0u8; 15]),
            Err(WireError::BufferTooSmall { need: 16, have: 15 })
        );
    }

    /// A hostile `len` near `u32::MAX`: `HEADER_LEN + len` overflows a 32-bit `usize`
    /// (thumbv7em, riscv32). The arithmetic, run with a 32-bit `usize::MAX`, refuses it as
    /// too long instead.
    #[test]
    fn a_len_that_overflows_a_32_bit_usize_is_too_large() {
        let max32 = u64::from(u32::MAX);
        assert_eq!(total_len_within(u32::MAX - 16, max32), Ok(max32));
        for len in [u32::MAX - 15, u32::MAX] {
            assert_eq!(
                total_len_within(len, max32),
                Err(WireError::FrameTooLarge {
                    len,
                    max: u32::MAX as usize - 16
                })
            );
        }
        assert_eq!(total_len(8), Ok(24));
    }

    fn huge_header() -> [u8; 16] {
        let mut b = [0u8; 16];
        HeaderRepr {
            kind: Kind::Data,
            flags: 0,
            count: 1,
            len: u32::MAX,
            seq: 1,
        }
        .emit(&mut b)
        .unwrap();
        b
    }

    #[cfg(target_pointer_width = "64")]
    #[test]
    fn a_huge_len_is_a_truncated_frame_on_64_bit() {
        let b = huge_header();
        let total = u32::MAX as usize + 16;
        assert_eq!(total_len(u32::MAX), Ok(total));
        assert_eq!(frame_len(&b), Some(total));
        assert_eq!(
            Frame::new_checked(&b[..]).err(),
            Some(WireError::Truncated {
                need: total,
                have: 16
            })
        );
    }

    #[cfg(target_pointer_width = "32")]
    #[test]
    fn a_huge_len_is_too_large_on_32_bit() {
        let b = huge_header();
        let too_large = WireError::FrameTooLarge {
            len: u32::MAX,
            max: usize::MAX - 16,
        };
        assert_eq!(total_len(u32::MAX), Err(too_large));
        assert_eq!(frame_total(&b), Some(Err(too_large)));
        assert_eq!(frame_len(&b), Some(usize::MAX));
        assert_eq!(Frame::new_checked(&b[..]).err(), Some(too_large));
        assert!(Frame::new_unchecked(&b[..]).payload().is_empty());
    }
}
