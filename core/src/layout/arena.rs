//! Arena header and blob descriptors (spec §10).

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// The 64-byte arena header at `arena_offset`; blob data follows at `arena_offset + 64`.
#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArenaHeader {
    /// Data capacity in bytes (power of two, ≥ 64); equals the ring header's `arena_size`.
    pub capacity: u64,
    /// `capacity - 1`.
    pub mask: u64,
    /// Cumulative reservation counter, a global byte position that never wraps (atomic).
    pub reserved: u64,
    /// Zero.
    pub pad: [u8; 40],
}

/// Byte offsets inside the arena header.
pub mod arena_off {
    /// `capacity`.
    pub const CAPACITY: usize = 0;
    /// `mask`.
    pub const MASK: usize = 8;
    /// `reserved`.
    pub const RESERVED: usize = 16;
    /// Header size; data starts here.
    pub const SIZE: usize = 64;
}

/// A blob descriptor: the last 16 bytes of a blob ring's slot payload.
#[repr(C)]
#[derive(
    FromBytes, IntoBytes, KnownLayout, Immutable, Clone, Copy, Debug, PartialEq, Eq, Default,
)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlobRef {
    /// Global arena position; the data index is `offset & mask`.
    pub offset: u64,
    /// Blob length in bytes.
    pub len: u32,
    /// Caller flags (the reference producer writes 0).
    pub flags: u32,
}

impl BlobRef {
    /// The descriptor of an empty blob.
    pub const EMPTY: BlobRef = BlobRef {
        offset: 0,
        len: 0,
        flags: 0,
    };

    /// The descriptor with the byte order of each field swapped between the host's and
    /// little-endian: a slot holds a BlobRef in the host's order (ring memory is native),
    /// a DATA frame carries it little-endian, as every integer of the wire protocol (spec
    /// §18.4). The same call converts either way; on a little-endian host it changes
    /// nothing.
    pub const fn swap_le(self) -> BlobRef {
        BlobRef {
            offset: self.offset.to_le(),
            len: self.len.to_le(),
            flags: self.flags.to_le(),
        }
    }
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<ArenaHeader>() == arena_off::SIZE);
    assert!(offset_of!(ArenaHeader, capacity) == arena_off::CAPACITY);
    assert!(offset_of!(ArenaHeader, mask) == arena_off::MASK);
    assert!(offset_of!(ArenaHeader, reserved) == arena_off::RESERVED);
    assert!(size_of::<BlobRef>() == 16);
    assert!(offset_of!(BlobRef, len) == 8);
    assert!(offset_of!(BlobRef, flags) == 12);
};
