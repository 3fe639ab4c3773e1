//! NAK (kind 6, spec §18): the mirror asks for `seq..=to` again. Payload: u64 LE `to`.

use super::header::need;
use super::{Frame, HEADER_LEN, HeaderRepr, Kind, WireError};

/// NAK payload length.
pub const NAK_LEN: usize = 8;

/// A NAK frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NakRepr {
    /// First missing sequence.
    pub from: u64,
    /// Last missing sequence (inclusive).
    pub to: u64,
}

impl NakRepr {
    /// Parses a NAK (kind and `len == 8` checked). `from > to` is legal on the wire and
    /// means an empty range.
    pub fn parse<T: AsRef<[u8]>>(frame: &Frame<T>) -> Result<NakRepr, WireError> {
        let p = frame.fixed_payload(Kind::Nak, NAK_LEN as u32)?;
        let mut to = [0u8; 8];
        to.copy_from_slice(p);
        Ok(NakRepr {
            from: frame.seq(),
            to: u64::from_le_bytes(to),
        })
    }
    /// Bytes the frame takes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + NAK_LEN
    }
    /// Writes the frame into `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        need(buf, self.buffer_len())?;
        HeaderRepr {
            kind: Kind::Nak,
            flags: 0,
            count: 0,
            len: NAK_LEN as u32,
            seq: self.from,
        }
        .emit(buf)?;
        buf[HEADER_LEN..self.buffer_len()].copy_from_slice(&self.to.to_le_bytes());
        Ok(self.buffer_len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nak_bytes() {
        let mut b = [0u8; 24];
        NakRepr { from: 3, to: 7 }.emit(&mut b).unwrap();
        assert_eq!(b[..8], [6, 0, 0, 0, 8, 0, 0, 0]);
        assert_eq!(b[8], 3);
        assert_eq!(b[16], 7);
        assert_eq!(
            NakRepr::parse(&Frame::new_checked(&b[..]).unwrap()),
            Ok(NakRepr { from: 3, to: 7 })
        );
        b[4] = 0;
        assert!(matches!(
            NakRepr::parse(&Frame::new_checked(&b[..16]).unwrap()),
            Err(WireError::BadLen { found: 0, .. })
        ));
    }

    proptest::proptest! {
        #[test]
        fn nak_roundtrip(from: u64, to: u64) {
            let n = NakRepr { from, to };
            let mut b = [0u8; 24];
            n.emit(&mut b).unwrap();
            proptest::prop_assert_eq!(NakRepr::parse(&Frame::new_checked(&b[..]).unwrap()), Ok(n));
        }
    }
}
