//! HEARTBEAT (kind 5, spec §18): idle keep-alive. `len = 0`; `flags` is 0 on TCP and the
//! session byte on UDP; `seq` is `write_seq` on TCP and the last sent sequence on UDP.

use super::{Frame, HEADER_LEN, HeaderRepr, Kind, WireError, parse_control};

/// A HEARTBEAT frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct HeartbeatRepr {
    /// 0 on TCP, the session byte on UDP.
    pub flags: u8,
    /// The source's sequence.
    pub seq: u64,
}

impl HeartbeatRepr {
    /// Parses a HEARTBEAT (kind and `len == 0` checked).
    pub fn parse<T: AsRef<[u8]>>(frame: &Frame<T>) -> Result<HeartbeatRepr, WireError> {
        parse_control(frame, Kind::Heartbeat).map(|(flags, seq)| HeartbeatRepr { flags, seq })
    }
    /// Bytes the frame takes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    /// Writes the frame into `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        HeaderRepr::control(Kind::Heartbeat, self.flags, self.seq).emit(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_bytes() {
        let mut b = [0u8; 16];
        let h = HeartbeatRepr {
            flags: 0x22,
            seq: 0x1_0000_0001,
        };
        h.emit(&mut b).unwrap();
        assert_eq!(b, [5, 0x22, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(
            HeartbeatRepr::parse(&Frame::new_checked(&b[..]).unwrap()),
            Ok(h)
        );
        let mut g = b;
        g[0] = 4;
        assert!(matches!(
            HeartbeatRepr::parse(&Frame::new_checked(&g[..]).unwrap()),
            Err(WireError::WrongKind { .. })
        ));
    }

    proptest::proptest! {
        #[test]
        fn heartbeat_roundtrip(flags: u8, seq: u64) {
            let h = HeartbeatRepr { flags, seq };
            let mut b = [0u8; 16];
            h.emit(&mut b).unwrap();
            proptest::prop_assert_eq!(HeartbeatRepr::parse(&Frame::new_checked(&b[..]).unwrap()), Ok(h));
        }
    }
}
