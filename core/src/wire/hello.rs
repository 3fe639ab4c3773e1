//! HELLO (kind 1, spec §18.1): the mirror's first frame, 16-byte payload.

use zerocopy::byteorder::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::header::need;
use super::{Frame, HEADER_LEN, HeaderRepr, Kind, REPL_MAGIC, REPL_VERSION, WireError};

/// The HELLO payload as it lies on the wire.
#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
pub struct RawHello {
    /// Replication magic.
    pub magic: U64,
    /// Protocol version.
    pub version: U32,
    /// bit0 can receive unicast, bit1 prefers unicast.
    pub flags: u8,
    /// Zero, ignored.
    pub pad: [u8; 3],
}

/// Payload field offsets.
pub mod hello_field {
    /// `magic`.
    pub const MAGIC: usize = 0;
    /// `version`.
    pub const VERSION: usize = 8;
    /// `flags`.
    pub const FLAGS: usize = 12;
}

/// HELLO payload length.
pub const HELLO_LEN: usize = 16;

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<RawHello>() == HELLO_LEN);
    assert!(offset_of!(RawHello, magic) == hello_field::MAGIC);
    assert!(offset_of!(RawHello, version) == hello_field::VERSION);
    assert!(offset_of!(RawHello, flags) == hello_field::FLAGS);
};

/// Typed getters over a HELLO frame's payload.
#[derive(Debug, Clone, Copy)]
pub struct HelloPayload<'a>(&'a RawHello);

impl<'a> HelloPayload<'a> {
    /// Checks the kind and `len == 16` and returns the view.
    pub fn new_checked<T: AsRef<[u8]>>(frame: &'a Frame<T>) -> Result<Self, WireError> {
        let p = frame.fixed_payload(Kind::Hello, HELLO_LEN as u32)?;
        RawHello::ref_from_bytes(p)
            .map(HelloPayload)
            .map_err(|_| WireError::Truncated {
                need: HELLO_LEN,
                have: p.len(),
            })
    }
    /// `magic`.
    pub fn magic(&self) -> u64 {
        self.0.magic.get()
    }
    /// `version`.
    pub fn version(&self) -> u32 {
        self.0.version.get()
    }
    /// The HELLO flags byte.
    pub fn flags(&self) -> u8 {
        self.0.flags
    }
}

/// A HELLO frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct HelloRepr {
    /// First wanted sequence: 0 latest, `u64::MAX` oldest, else a sequence.
    pub seq: u64,
    /// bit0 can receive unicast, bit1 prefers unicast (other bits: extensions).
    pub flags: u8,
}

impl HelloRepr {
    /// Parses and checks magic and version.
    pub fn parse<T: AsRef<[u8]>>(frame: &Frame<T>) -> Result<HelloRepr, WireError> {
        let p = HelloPayload::new_checked(frame)?;
        if p.magic() != REPL_MAGIC {
            return Err(WireError::BadMagic { found: p.magic() });
        }
        if p.version() != REPL_VERSION {
            return Err(WireError::BadVersion { found: p.version() });
        }
        Ok(HelloRepr {
            seq: frame.seq(),
            flags: p.flags(),
        })
    }
    /// Bytes the frame takes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + HELLO_LEN
    }
    /// Writes the frame into `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        need(buf, self.buffer_len())?;
        HeaderRepr {
            kind: Kind::Hello,
            flags: 0,
            count: 0,
            len: HELLO_LEN as u32,
            seq: self.seq,
        }
        .emit(buf)?;
        let raw = RawHello {
            magic: U64::new(REPL_MAGIC),
            version: U32::new(REPL_VERSION),
            flags: self.flags,
            pad: [0; 3],
        };
        buf[HEADER_LEN..self.buffer_len()].copy_from_slice(raw.as_bytes());
        Ok(self.buffer_len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spec §18.1 captured HELLO for Latest.
    pub const CAPTURED: [u8; 32] = [
        0x01, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, // header
        0x52, 0x52, 0x49, 0x4d, 0x47, 0x4e, 0x49, 0x52, 0x01, 0x00, 0x00, 0x00, 0x01, 0, 0, 0,
    ];

    #[test]
    fn captured_hello() {
        let f = Frame::new_checked(&CAPTURED[..]).unwrap();
        let r = HelloRepr::parse(&f).unwrap();
        assert_eq!(r, HelloRepr { seq: 0, flags: 1 });
        let mut out = [0u8; 32];
        assert_eq!(r.emit(&mut out), Ok(32));
        assert_eq!(out, CAPTURED);
    }

    #[test]
    fn hello_rejects() {
        let mut b = CAPTURED;
        b[16] = 0x53;
        let f = Frame::new_checked(&b[..]).unwrap();
        assert!(matches!(
            HelloRepr::parse(&f),
            Err(WireError::BadMagic { .. })
        ));
        let mut b = CAPTURED;
        b[24] = 2;
        let f = Frame::new_checked(&b[..]).unwrap();
        assert_eq!(
            HelloRepr::parse(&f),
            Err(WireError::BadVersion { found: 2 })
        );
        let mut b = [0u8; 33];
        b[..32].copy_from_slice(&CAPTURED);
        b[4] = 17;
        let f = Frame::new_checked(&b[..]).unwrap();
        assert_eq!(
            HelloRepr::parse(&f),
            Err(WireError::BadLen {
                kind: Kind::Hello,
                expected: 16,
                found: 17
            })
        );
        assert_eq!(
            HelloRepr { seq: 1, flags: 0 }.emit(&mut [0u8; 31]),
            Err(WireError::BufferTooSmall { need: 32, have: 31 })
        );
    }

    proptest::proptest! {
        #[test]
        fn hello_roundtrip(seq: u64, flags: u8) {
            let r = HelloRepr { seq, flags };
            let mut b = [0u8; 32];
            let n = r.emit(&mut b).unwrap();
            let f = Frame::new_checked(&b[..n]).unwrap();
            proptest::prop_assert_eq!(HelloRepr::parse(&f), Ok(r));
        }
    }
}
