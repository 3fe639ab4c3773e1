//! GAP (kind 4, spec §18): everything below `seq` that is still missing is gone. `len = 0`.

use super::{Frame, HEADER_LEN, HeaderRepr, Kind, WireError, parse_control};

/// A GAP frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GapRepr {
    /// The next sequence that will follow.
    pub seq: u64,
}

impl GapRepr {
    /// Parses a GAP (kind and `len == 0` checked).
    pub fn parse<T: AsRef<[u8]>>(frame: &Frame<T>) -> Result<GapRepr, WireError> {
        parse_control(frame, Kind::Gap).map(|(_, seq)| GapRepr { seq })
    }
    /// Bytes the frame takes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Writes the frame into `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        HeaderRepr::control(Kind::Gap, 0, self.seq).emit(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gap_bytes_and_len_rule() {
        let mut b = [0u8; 17];
        assert_eq!(GapRepr { seq: 9 }.emit(&mut b), Ok(16));
        assert_eq!(&b[..16], &[4, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0]);
        let f = Frame::new_checked(&b[..16]).unwrap();
        assert_eq!(GapRepr::parse(&f), Ok(GapRepr { seq: 9 }));
        b[4] = 1;
        let f = Frame::new_checked(&b[..]).unwrap();
        assert_eq!(
            GapRepr::parse(&f),
            Err(WireError::BadLen {
                kind: Kind::Gap,
                expected: 0,
                found: 1
            })
        );
    }

    proptest::proptest! {
        #[test]
        fn gap_roundtrip(seq: u64) {
            let mut b = [0u8; 16];
            GapRepr { seq }.emit(&mut b).unwrap();
            proptest::prop_assert_eq!(GapRepr::parse(&Frame::new_checked(&b[..]).unwrap()), Ok(GapRepr { seq }));
        }
    }
}
