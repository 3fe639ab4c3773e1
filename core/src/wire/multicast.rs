//! MULTICAST (kind 7, spec §18.3): UDP delivery parameters after GEOMETRY, 16-byte payload.

use zerocopy::byteorder::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::header::need;
use super::{Frame, HEADER_LEN, HeaderRepr, Kind, WireError};

/// The MULTICAST payload as it lies on the wire.
#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
pub struct RawMulticast {
    /// IPv4 group, dotted order; 0.0.0.0 = unicast.
    pub group: [u8; 4],
    /// Group port, or the source's unicast port.
    pub port: U16,
    /// Datagram budget (informational).
    pub mtu: U16,
    /// Multicast TTL (informational).
    pub ttl: u8,
    /// Session byte.
    pub session: u8,
    /// Unicast token (0 for multicast).
    pub token: U32,
    /// Zero.
    pub pad: [u8; 2],
}

/// Payload field offsets.
pub mod multicast_field {
    /// `group`.
    pub const GROUP: usize = 0;
    /// `port`.
    pub const PORT: usize = 4;
    /// `mtu`.
    pub const MTU: usize = 6;
    /// `ttl`.
    pub const TTL: usize = 8;
    /// `session`.
    pub const SESSION: usize = 9;
    /// `token`.
    pub const TOKEN: usize = 10;
}

/// MULTICAST payload length.
pub const MULTICAST_LEN: usize = 16;

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<RawMulticast>() == MULTICAST_LEN);
    assert!(offset_of!(RawMulticast, group) == multicast_field::GROUP);
    assert!(offset_of!(RawMulticast, port) == multicast_field::PORT);
    assert!(offset_of!(RawMulticast, mtu) == multicast_field::MTU);
    assert!(offset_of!(RawMulticast, ttl) == multicast_field::TTL);
    assert!(offset_of!(RawMulticast, session) == multicast_field::SESSION);
    assert!(offset_of!(RawMulticast, token) == multicast_field::TOKEN);
};

/// Typed view over a MULTICAST frame's payload (unvalidated values).
#[derive(Debug, Clone, Copy)]
pub struct MulticastPayload<'a>(&'a RawMulticast);

impl<'a> MulticastPayload<'a> {
    /// Checks the kind and `len == 16` and returns the view.
    pub fn new_checked<T: AsRef<[u8]>>(frame: &'a Frame<T>) -> Result<Self, WireError> {
        let p = frame.fixed_payload(Kind::Multicast, MULTICAST_LEN as u32)?;
        RawMulticast::ref_from_bytes(p)
            .map(MulticastPayload)
            .map_err(|_| WireError::Truncated {
                need: MULTICAST_LEN,
                have: p.len(),
            })
    }
    /// The raw fields.
    pub fn raw(&self) -> &RawMulticast {
        self.0
    }
}

/// A MULTICAST frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MulticastRepr {
    /// IPv4 group; `[0; 4]` means unicast delivery.
    pub group: [u8; 4],
    /// UDP port.
    pub port: u16,
    /// Datagram budget.
    pub mtu: u16,
    /// TTL.
    pub ttl: u8,
    /// Session byte.
    pub session: u8,
    /// Unicast token.
    pub token: u32,
}

impl MulticastRepr {
    /// True when the group is 0.0.0.0 (unicast delivery with PUNCH).
    pub const fn is_unicast(&self) -> bool {
        u32::from_be_bytes(self.group) == 0
    }

    /// Parses and applies the group rule: 0.0.0.0 or 224.0.0.0/4, and the port rule: not 0
    /// (a source announces the port it sends from or to; port 0 is never one).
    pub fn parse<T: AsRef<[u8]>>(frame: &Frame<T>) -> Result<MulticastRepr, WireError> {
        let r = MulticastPayload::new_checked(frame)?.0;
        let m = MulticastRepr {
            group: r.group,
            port: r.port.get(),
            mtu: r.mtu.get(),
            ttl: r.ttl,
            session: r.session,
            token: r.token.get(),
        };
        if !m.is_unicast() && m.group[0] & 0xF0 != 0xE0 {
            return Err(WireError::NotMulticast { group: m.group });
        }
        if m.port == 0 {
            return Err(WireError::ZeroPort { group: m.group });
        }
        Ok(m)
    }

    /// Bytes the frame takes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + MULTICAST_LEN
    }

    /// Writes the frame into `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        need(buf, self.buffer_len())?;
        HeaderRepr {
            kind: Kind::Multicast,
            flags: 0,
            count: 0,
            len: MULTICAST_LEN as u32,
            seq: 0,
        }
        .emit(buf)?;
        let raw = RawMulticast {
            group: self.group,
            port: U16::new(self.port),
            mtu: U16::new(self.mtu),
            ttl: self.ttl,
            session: self.session,
            token: U32::new(self.token),
            pad: [0; 2],
        };
        buf[HEADER_LEN..self.buffer_len()].copy_from_slice(raw.as_bytes());
        Ok(self.buffer_len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Spec §18.3 captured unicast example.
    pub const CAPTURED: [u8; 32] = [
        7, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // header
        0, 0, 0, 0, 0xfb, 0x43, 0xc0, 0x05, 0x00, 0x22, 0x01, 0, 0, 0, 0, 0,
    ];

    #[test]
    fn captured_multicast() {
        let f = Frame::new_checked(&CAPTURED[..]).unwrap();
        let m = MulticastRepr::parse(&f).unwrap();
        assert_eq!(
            m,
            MulticastRepr {
                group: [0; 4],
                port: 17403,
                mtu: 1472,
                ttl: 0,
                session: 0x22,
                token: 1
            }
        );
        assert!(m.is_unicast());
        let mut out = [0u8; 32];
        assert_eq!(m.emit(&mut out), Ok(32));
        assert_eq!(out, CAPTURED);
    }

    #[test]
    fn group_rule() {
        let mut b = CAPTURED;
        b[16..20].copy_from_slice(&[10, 0, 0, 1]);
        let f = Frame::new_checked(&b[..]).unwrap();
        assert_eq!(
            MulticastRepr::parse(&f),
            Err(WireError::NotMulticast {
                group: [10, 0, 0, 1]
            })
        );
        b[16..20].copy_from_slice(&[239, 1, 2, 3]);
        let f = Frame::new_checked(&b[..]).unwrap();
        assert!(!MulticastRepr::parse(&f).unwrap().is_unicast());
        b[16..20].copy_from_slice(&[240, 0, 0, 1]);
        let f = Frame::new_checked(&b[..]).unwrap();
        assert!(MulticastRepr::parse(&f).is_err());
    }

    /// A MULTICAST frame with port 0 was accepted: the mirror punched port 0 (EINVAL,
    /// ignored) or bound a random port for the group, and waited for datagrams that could
    /// never come until its silence timeout, which blamed a silent source.
    #[test]
    fn port_rule() {
        let mut b = CAPTURED;
        b[20..22].copy_from_slice(&[0, 0]);
        let f = Frame::new_checked(&b[..]).unwrap();
        let e = MulticastRepr::parse(&f).unwrap_err();
        assert_eq!(e, WireError::ZeroPort { group: [0; 4] });
        assert!(e.to_string().contains("UDP port 0"), "{e}");
        b[16..20].copy_from_slice(&[239, 1, 2, 3]);
        let f = Frame::new_checked(&b[..]).unwrap();
        let e = MulticastRepr::parse(&f).unwrap_err();
        assert_eq!(
            e,
            WireError::ZeroPort {
                group: [239, 1, 2, 3]
            }
        );
        assert!(e.to_string().contains("239.1.2.3 on UDP port 0"), "{e}");
    }

    proptest! {
        #[test]
        fn multicast_roundtrip(mc: bool, g in any::<[u8; 3]>(), g0 in 224u8..240, port in 1u16.., mtu: u16, ttl: u8, session: u8, token: u32) {
            let group = if mc { [g0, g[0], g[1], g[2]] } else { [0; 4] };
            let m = MulticastRepr { group, port, mtu, ttl, session, token };
            let mut b = [0u8; 32];
            let n = m.emit(&mut b).unwrap();
            prop_assert_eq!(MulticastRepr::parse(&Frame::new_checked(&b[..n]).unwrap()), Ok(m));
        }
    }
}
