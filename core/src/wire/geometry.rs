//! GEOMETRY (kind 2, spec §18.2): the source's ring layout, 48-byte payload, with the
//! mirror's validity checks.

use zerocopy::byteorder::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::header::need;
use super::{Frame, HEADER_LEN, HeaderRepr, Kind, WireError};
use crate::layout::{Flags, Geometry};

/// The GEOMETRY payload as it lies on the wire.
#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
pub struct RawGeometry {
    /// Slot count.
    pub capacity: U64,
    /// Slot stride.
    pub element_size: U32,
    /// The source's header flags, verbatim.
    pub flags: U32,
    /// Schema signature.
    pub schema_sig: U64,
    /// Registry slot count.
    pub registry_count: U32,
    /// Offset of slot 0.
    pub slots_offset: U32,
    /// Arena header offset (0 = fixed records).
    pub arena_offset: U64,
    /// Arena data capacity.
    pub arena_size: U64,
}

/// Payload field offsets.
pub mod geometry_field {
    /// `capacity`.
    pub const CAPACITY: usize = 0;
    /// `element_size`.
    pub const ELEMENT_SIZE: usize = 8;
    /// `flags`.
    pub const FLAGS: usize = 12;
    /// `schema_sig`.
    pub const SCHEMA_SIG: usize = 16;
    /// `reader_registry_count`.
    pub const REGISTRY_COUNT: usize = 24;
    /// `slots_offset`.
    pub const SLOTS_OFFSET: usize = 28;
    /// `arena_offset`.
    pub const ARENA_OFFSET: usize = 32;
    /// `arena_size`.
    pub const ARENA_SIZE: usize = 40;
}

/// GEOMETRY payload length.
pub const GEOMETRY_LEN: usize = 48;

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<RawGeometry>() == GEOMETRY_LEN);
    assert!(offset_of!(RawGeometry, capacity) == geometry_field::CAPACITY);
    assert!(offset_of!(RawGeometry, element_size) == geometry_field::ELEMENT_SIZE);
    assert!(offset_of!(RawGeometry, flags) == geometry_field::FLAGS);
    assert!(offset_of!(RawGeometry, schema_sig) == geometry_field::SCHEMA_SIG);
    assert!(offset_of!(RawGeometry, registry_count) == geometry_field::REGISTRY_COUNT);
    assert!(offset_of!(RawGeometry, slots_offset) == geometry_field::SLOTS_OFFSET);
    assert!(offset_of!(RawGeometry, arena_offset) == geometry_field::ARENA_OFFSET);
    assert!(offset_of!(RawGeometry, arena_size) == geometry_field::ARENA_SIZE);
};

/// Typed view over a GEOMETRY frame's payload (unvalidated values).
#[derive(Debug, Clone, Copy)]
pub struct GeometryPayload<'a>(&'a RawGeometry);

impl<'a> GeometryPayload<'a> {
    /// Checks the kind and `len == 48` and returns the view.
    pub fn new_checked<T: AsRef<[u8]>>(frame: &'a Frame<T>) -> Result<Self, WireError> {
        let p = frame.fixed_payload(Kind::Geometry, GEOMETRY_LEN as u32)?;
        RawGeometry::ref_from_bytes(p)
            .map(GeometryPayload)
            .map_err(|_| WireError::Truncated {
                need: GEOMETRY_LEN,
                have: p.len(),
            })
    }
    /// The raw fields.
    pub fn raw(&self) -> &RawGeometry {
        self.0
    }
}

/// A GEOMETRY frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GeometryRepr {
    /// Header flags: bit0 RESET, bit1 UDP_FOLLOWS.
    pub flags: u8,
    /// First sequence the source will deliver.
    pub seq: u64,
    /// Slot count.
    pub capacity: u64,
    /// Slot stride.
    pub element_size: u32,
    /// The source ring's header flags (informational).
    pub ring_flags: u32,
    /// Schema signature.
    pub schema_sig: u64,
    /// Registry slot count.
    pub registry_count: u32,
    /// Offset of slot 0.
    pub slots_offset: u32,
    /// Arena header offset (0 = fixed records).
    pub arena_offset: u64,
    /// Arena data capacity.
    pub arena_size: u64,
}

impl GeometryRepr {
    /// Parses and applies every check of spec §18.2.
    pub fn parse<T: AsRef<[u8]>>(frame: &Frame<T>) -> Result<GeometryRepr, WireError> {
        let r = GeometryPayload::new_checked(frame)?.0;
        let g = GeometryRepr {
            flags: frame.flags(),
            seq: frame.seq(),
            capacity: r.capacity.get(),
            element_size: r.element_size.get(),
            ring_flags: r.flags.get(),
            schema_sig: r.schema_sig.get(),
            registry_count: r.registry_count.get(),
            slots_offset: r.slots_offset.get(),
            arena_offset: r.arena_offset.get(),
            arena_size: r.arena_size.get(),
        };
        g.check()?;
        Ok(g)
    }

    /// The checks of spec §18.2, in the order listed there.
    pub fn check(&self) -> Result<(), WireError> {
        if !self.capacity.is_power_of_two() {
            return Err(WireError::CapacityNotPowerOfTwo {
                capacity: self.capacity,
            });
        }
        if self.element_size < 8 || !self.element_size.is_multiple_of(8) {
            return Err(WireError::BadElementSize {
                element_size: self.element_size,
            });
        }
        let min_slots = 128 + 64 * u64::from(self.registry_count);
        if u64::from(self.slots_offset) < min_slots || !self.slots_offset.is_multiple_of(64) {
            return Err(WireError::BadSlotsOffset {
                slots_offset: self.slots_offset,
                registry_count: self.registry_count,
            });
        }
        let slots_end = self
            .capacity
            .checked_mul(u64::from(self.element_size))
            .and_then(|b| b.checked_add(u64::from(self.slots_offset)))
            .ok_or(self.size_overflow())?;
        if self.arena_offset != 0 {
            if self.arena_offset < slots_end || !self.arena_offset.is_multiple_of(64) {
                return Err(WireError::BadArenaOffset {
                    arena_offset: self.arena_offset,
                    slots_end,
                });
            }
            if !self.arena_size.is_power_of_two() || self.arena_size < 64 {
                return Err(WireError::BadArenaSize {
                    arena_size: self.arena_size,
                });
            }
            if self.element_size - 8 < 16 {
                return Err(WireError::BlobRecordTooSmall {
                    element_size: self.element_size,
                });
            }
            self.arena_offset
                .checked_add(64)
                .and_then(|e| e.checked_add(self.arena_size))
                .ok_or(self.size_overflow())?;
        } else if self.arena_size != 0 {
            return Err(WireError::BadArenaSize {
                arena_size: self.arena_size,
            });
        }
        Ok(())
    }

    /// The error for this GEOMETRY's size overflowing, with its sizes.
    fn size_overflow(&self) -> WireError {
        WireError::SizeOverflow {
            capacity: self.capacity,
            element_size: self.element_size,
            slots_offset: u64::from(self.slots_offset),
            arena_offset: self.arena_offset,
            arena_size: self.arena_size,
        }
    }

    /// The GEOMETRY a source sends for its ring `g`.
    pub fn from_source(g: &Geometry, flags: u8, seq: u64) -> Result<GeometryRepr, WireError> {
        let slots_offset = u32::try_from(g.slots_offset).map_err(|_| WireError::SizeOverflow {
            capacity: g.capacity,
            element_size: g.element_size,
            slots_offset: g.slots_offset,
            arena_offset: g.arena_offset,
            arena_size: g.arena_size,
        })?;
        Ok(GeometryRepr {
            flags,
            seq,
            capacity: g.capacity,
            element_size: g.element_size,
            ring_flags: g.flags.0,
            schema_sig: g.schema_sig,
            registry_count: g.registry_count,
            slots_offset,
            arena_offset: g.arena_offset,
            arena_size: g.arena_size,
        })
    }

    /// The layout a mirror creates (spec §21.1): GEOMETRY's offsets, mirror flags.
    pub fn mirror_geometry(&self) -> Geometry {
        let mut flags = Flags::MODE_SPMC | Flags::POLICY_LATEST_WINS | Flags::SPARSE;
        if self.registry_count > 0 {
            flags |= Flags::WITH_REGISTRY;
        }
        if self.arena_offset != 0 {
            flags |= Flags::WITH_ARENA;
        }
        Geometry {
            capacity: self.capacity,
            element_size: self.element_size,
            flags: Flags(flags),
            schema_sig: self.schema_sig,
            registry_offset: if self.registry_count > 0 { 128 } else { 0 },
            registry_count: self.registry_count,
            slots_offset: u64::from(self.slots_offset),
            arena_offset: self.arena_offset,
            arena_size: self.arena_size,
        }
    }

    /// True when an existing ring `g` has this layout: every field but the flags equal
    /// (spec §21.1's adoption test). The mirror also requires `g` to have
    /// [`Flags::SPARSE`] (see [`crate::replicate::Replace::NotSparse`]).
    pub fn matches(&self, g: &Geometry) -> bool {
        g.capacity == self.capacity
            && g.element_size == self.element_size
            && g.schema_sig == self.schema_sig
            && g.registry_count == self.registry_count
            && g.slots_offset == u64::from(self.slots_offset)
            && g.arena_offset == self.arena_offset
            && g.arena_size == self.arena_size
    }

    /// Bytes the frame takes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + GEOMETRY_LEN
    }

    /// Writes the frame into `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        need(buf, self.buffer_len())?;
        HeaderRepr {
            kind: Kind::Geometry,
            flags: self.flags,
            count: 0,
            len: GEOMETRY_LEN as u32,
            seq: self.seq,
        }
        .emit(buf)?;
        let raw = RawGeometry {
            capacity: U64::new(self.capacity),
            element_size: U32::new(self.element_size),
            flags: U32::new(self.ring_flags),
            schema_sig: U64::new(self.schema_sig),
            registry_count: U32::new(self.registry_count),
            slots_offset: U32::new(self.slots_offset),
            arena_offset: U64::new(self.arena_offset),
            arena_size: U64::new(self.arena_size),
        };
        buf[HEADER_LEN..self.buffer_len()].copy_from_slice(raw.as_bytes());
        Ok(self.buffer_len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Spec §18.2 captured payload (u64 ring, C = 8), behind a header with seq 1.
    pub const CAPTURED: [u8; 64] = [
        2, 0, 0, 0, 48, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, // header
        0x08, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0x11, 0, 0, 0, // capacity, stride, flags
        0x72, 0x44, 0x96, 0xcc, 0x8b, 0x54, 0x4c, 0xaf, 0, 0, 0, 0, 0x80, 0, 0, 0, //
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    fn sample() -> GeometryRepr {
        let f = Frame::new_checked(&CAPTURED[..]).unwrap();
        GeometryRepr::parse(&f).unwrap()
    }

    #[test]
    fn captured_geometry() {
        let g = sample();
        assert_eq!(
            g,
            GeometryRepr {
                flags: 0,
                seq: 1,
                capacity: 8,
                element_size: 16,
                ring_flags: 0x11,
                schema_sig: 0xaf4c_548b_cc96_4472,
                registry_count: 0,
                slots_offset: 128,
                arena_offset: 0,
                arena_size: 0,
            }
        );
        let mut out = [0u8; 64];
        assert_eq!(g.emit(&mut out), Ok(64));
        assert_eq!(out, CAPTURED);
        let m = g.mirror_geometry();
        assert_eq!(m.flags.0, 0x0411);
        assert!(g.matches(&m));
    }

    #[test]
    fn geometry_checks() {
        let ok = sample();
        let bad = |f: fn(&mut GeometryRepr)| {
            let mut g = ok;
            f(&mut g);
            let mut b = [0u8; 64];
            g.emit(&mut b).unwrap();
            GeometryRepr::parse(&Frame::new_checked(&b[..]).unwrap()).err()
        };
        assert_eq!(
            bad(|g| g.capacity = 12),
            Some(WireError::CapacityNotPowerOfTwo { capacity: 12 })
        );
        assert_eq!(
            bad(|g| g.capacity = 0),
            Some(WireError::CapacityNotPowerOfTwo { capacity: 0 })
        );
        assert_eq!(
            bad(|g| g.element_size = 12),
            Some(WireError::BadElementSize { element_size: 12 })
        );
        assert_eq!(
            bad(|g| g.registry_count = 1),
            Some(WireError::BadSlotsOffset {
                slots_offset: 128,
                registry_count: 1
            })
        );
        assert_eq!(
            bad(|g| g.slots_offset = 136),
            Some(WireError::BadSlotsOffset {
                slots_offset: 136,
                registry_count: 0
            })
        );
        let e = bad(|g| g.capacity = 1 << 63).unwrap();
        assert!(matches!(e, WireError::SizeOverflow { capacity, .. } if capacity == 1 << 63));
        assert_eq!(
            e.to_string(),
            "GEOMETRY ring size overflows: capacity 9223372036854775808 x element size 16 from \
             slots_offset 128"
        );
        assert_eq!(
            bad(|g| g.arena_size = 64),
            Some(WireError::BadArenaSize { arena_size: 64 })
        );
        assert_eq!(
            bad(|g| g.arena_offset = 192),
            Some(WireError::BadArenaOffset {
                arena_offset: 192,
                slots_end: 256
            })
        );
        assert_eq!(
            bad(|g| {
                g.arena_offset = 256;
                g.arena_size = 100
            }),
            Some(WireError::BadArenaSize { arena_size: 100 })
        );
        assert_eq!(
            bad(|g| {
                g.arena_offset = 256;
                g.arena_size = 64
            }),
            Some(WireError::BlobRecordTooSmall { element_size: 16 })
        );
        assert_eq!(
            bad(|g| {
                g.element_size = 32;
                g.arena_offset = u64::MAX - 63;
                g.arena_size = 64
            })
            .map(|e| e.to_string()),
            Some(
                "GEOMETRY ring size overflows: capacity 8 x element size 32 from slots_offset \
                 128, an arena of 64 bytes at 18446744073709551552"
                    .into()
            )
        );
        assert_eq!(
            bad(|g| {
                g.element_size = 32;
                g.arena_offset = 384;
                g.arena_size = 64
            }),
            None
        );
    }

    fn any_valid() -> impl Strategy<Value = GeometryRepr> {
        (
            any::<u8>(),
            any::<u64>(),
            0u32..20,
            1u32..64,
            any::<u32>(),
            any::<u64>(),
            0u32..40,
            any::<bool>(),
            6u32..20,
        )
            .prop_map(
                |(flags, seq, cap_log, words, ring_flags, sig, reg, blob, arena_log)| {
                    let capacity = 1u64 << cap_log;
                    let element_size = if blob { (words + 3) * 8 } else { words * 8 };
                    let slots_offset = (128 + 64 * reg).div_ceil(64) * 64;
                    let slots_end = capacity * u64::from(element_size) + u64::from(slots_offset);
                    let (arena_offset, arena_size) = if blob {
                        (slots_end.div_ceil(64) * 64, 1u64 << arena_log)
                    } else {
                        (0, 0)
                    };
                    GeometryRepr {
                        flags,
                        seq,
                        capacity,
                        element_size,
                        ring_flags,
                        schema_sig: sig,
                        registry_count: reg,
                        slots_offset,
                        arena_offset,
                        arena_size,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn geometry_roundtrip(g in any_valid()) {
            let mut b = [0u8; 64];
            let n = g.emit(&mut b).unwrap();
            let f = Frame::new_checked(&b[..n]).unwrap();
            prop_assert_eq!(GeometryRepr::parse(&f), Ok(g));
        }
    }
}
