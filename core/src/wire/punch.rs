//! PUNCH (kind 8, spec §18, §19.4): a UDP hole punch, exactly 16 bytes, `flags` = session,
//! `seq` = token zero-extended.

use super::{Frame, HEADER_LEN, HeaderRepr, Kind, WireError, parse_control};

/// A PUNCH frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PunchRepr {
    /// Session byte echoed from MULTICAST.
    pub session: u8,
    /// Token from MULTICAST.
    pub token: u32,
}

impl PunchRepr {
    /// Parses a PUNCH. The datagram must be exactly 16 bytes (`Frame::new_checked` with
    /// `len == 0`); the token is `seq as u32` as the reference reads it.
    pub fn parse<T: AsRef<[u8]>>(frame: &Frame<T>) -> Result<PunchRepr, WireError> {
        parse_control(frame, Kind::Punch).map(|(session, seq)| PunchRepr {
            session,
            token: seq as u32,
        })
    }
    /// Bytes the frame takes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Writes the frame into `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        HeaderRepr::control(Kind::Punch, self.session, u64::from(self.token)).emit(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn punch_bytes() {
        let mut b = [0u8; 16];
        let p = PunchRepr {
            session: 0x22,
            token: 1,
        };
        p.emit(&mut b).unwrap();
        assert_eq!(b, [8, 0x22, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            PunchRepr::parse(&Frame::new_checked(&b[..]).unwrap()),
            Ok(p)
        );
        let mut long = [0u8; 17];
        long[..16].copy_from_slice(&b);
        assert!(Frame::new_checked(&long[..]).is_err());
    }

    proptest::proptest! {
        #[test]
        fn punch_roundtrip(session: u8, token: u32) {
            let p = PunchRepr { session, token };
            let mut b = [0u8; 16];
            p.emit(&mut b).unwrap();
            proptest::prop_assert_eq!(PunchRepr::parse(&Frame::new_checked(&b[..]).unwrap()), Ok(p));
        }
    }
}
