//! The 128-byte ring header (spec §2).

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::error::AttachError;

/// `magic` of a ringfire-compatible ring; reads "ERIFGNIR" on disk.
pub const RING_MAGIC: u64 = 0x5249_4E47_4649_5245;
/// Ring protocol version.
pub const RING_VERSION: u32 = 2;
/// Sequence-word value meaning "a writer is overwriting this slot now".
pub const SLOT_WRITING: u64 = u64::MAX;
/// Sequences from here up are never written by a [`Producer`](crate::broadcast::Producer):
/// it refuses a ring whose `write_seq` leaves it no sequence below, its pushes refuse them
/// and the raw mirror API refuses them, so the
/// next sequence can never reach [`SLOT_WRITING`] or overflow (only a corrupt header holds
/// such a value: 2^63 records at 10^10 a second take 29 years).
pub const SEQ_LIMIT: u64 = 1 << 63;

/// `write_seq` if a writer can continue after it, else [`AttachError::WriteSeqExhausted`]:
/// at or past [`SEQ_LIMIT`] it is a corrupt header (no writer stores such a value). The one
/// check behind every producer's attach and every tool that refuses such a ring.
pub const fn check_write_seq(write_seq: u64) -> Result<u64, AttachError> {
    if write_seq >= SEQ_LIMIT {
        Err(AttachError::WriteSeqExhausted { write_seq })
    } else {
        Ok(write_seq)
    }
}

/// The sequence a single writer continuing after `write_seq` writes next, if it is below
/// [`SEQ_LIMIT`]; else [`AttachError::WriteSeqExhausted`]. At `SEQ_LIMIT - 1` the last
/// sequence is published and a writer has none left (readers and tools still accept it:
/// [`check_write_seq`]); from `SEQ_LIMIT` up the header is corrupt. The attach check of
/// [`Producer`](crate::broadcast::Producer) and the blob writer.
pub const fn next_write_seq(write_seq: u64) -> Result<u64, AttachError> {
    if write_seq >= SEQ_LIMIT - 1 {
        Err(AttachError::WriteSeqExhausted { write_seq })
    } else {
        Ok(write_seq + 1)
    }
}

/// The ring header at offset 0 of every ring (spec §2). Atomic fields are accessed through
/// the region at the offsets in [`hdr`]; this struct is the layout contract and the type of
/// a header snapshot.
#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RingHeader {
    /// [`RING_MAGIC`], written last at creation.
    pub magic: u64,
    /// [`RING_VERSION`].
    pub version: u32,
    /// Slot stride in bytes, including the 8-byte sequence word.
    pub element_size: u32,
    /// Number of slots (a power of two).
    pub capacity: u64,
    /// `capacity - 1`.
    pub mask: u64,
    /// Highest published sequence (atomic).
    pub write_seq: u64,
    /// MPMC: next ticket to claim (atomic).
    pub claim_seq: u64,
    /// [`Flags`](super::Flags) bits.
    pub flags: u32,
    /// Futex notification word (atomic).
    pub futex_word: u32,
    /// Readers asleep or about to sleep on the futex (atomic).
    pub waiting_consumers: u32,
    /// Zero.
    pub align_pad: u32,
    /// MPMC queue: next ticket to consume (atomic).
    pub read_seq: u64,
    /// Schema signature of the record type (§12); 0 = unverified.
    pub schema_sig: u64,
    /// Offset of the arena header, 0 = none.
    pub arena_offset: u64,
    /// Arena data capacity in bytes.
    pub arena_size: u64,
    /// Offset of the reader registry, 0 = none.
    pub reader_registry_offset: u32,
    /// Number of 64-byte registry slots.
    pub reader_registry_count: u32,
    /// Offset of slot 0.
    pub slots_offset: u64,
    /// Zero.
    pub pad: [u8; 16],
}

/// Byte offsets of the header fields.
pub mod hdr {
    /// `magic`.
    pub const MAGIC: usize = 0;
    /// `version`.
    pub const VERSION: usize = 8;
    /// `element_size`.
    pub const ELEMENT_SIZE: usize = 12;
    /// `capacity`.
    pub const CAPACITY: usize = 16;
    /// `mask`.
    pub const MASK: usize = 24;
    /// `write_seq`.
    pub const WRITE_SEQ: usize = 32;
    /// `claim_seq`.
    pub const CLAIM_SEQ: usize = 40;
    /// `flags`.
    pub const FLAGS: usize = 48;
    /// `futex_word`.
    pub const FUTEX_WORD: usize = 52;
    /// `waiting_consumers`.
    pub const WAITING_CONSUMERS: usize = 56;
    /// `read_seq`.
    pub const READ_SEQ: usize = 64;
    /// `schema_sig`.
    pub const SCHEMA_SIG: usize = 72;
    /// `arena_offset`.
    pub const ARENA_OFFSET: usize = 80;
    /// `arena_size`.
    pub const ARENA_SIZE: usize = 88;
    /// `reader_registry_offset`.
    pub const REGISTRY_OFFSET: usize = 96;
    /// `reader_registry_count`.
    pub const REGISTRY_COUNT: usize = 100;
    /// `slots_offset`.
    pub const SLOTS_OFFSET: usize = 104;
    /// Header size.
    pub const SIZE: usize = 128;
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<RingHeader>() == hdr::SIZE);
    assert!(offset_of!(RingHeader, magic) == hdr::MAGIC);
    assert!(offset_of!(RingHeader, version) == hdr::VERSION);
    assert!(offset_of!(RingHeader, element_size) == hdr::ELEMENT_SIZE);
    assert!(offset_of!(RingHeader, capacity) == hdr::CAPACITY);
    assert!(offset_of!(RingHeader, mask) == hdr::MASK);
    assert!(offset_of!(RingHeader, write_seq) == hdr::WRITE_SEQ);
    assert!(offset_of!(RingHeader, claim_seq) == hdr::CLAIM_SEQ);
    assert!(offset_of!(RingHeader, flags) == hdr::FLAGS);
    assert!(offset_of!(RingHeader, futex_word) == hdr::FUTEX_WORD);
    assert!(offset_of!(RingHeader, waiting_consumers) == hdr::WAITING_CONSUMERS);
    assert!(offset_of!(RingHeader, read_seq) == hdr::READ_SEQ);
    assert!(offset_of!(RingHeader, schema_sig) == hdr::SCHEMA_SIG);
    assert!(offset_of!(RingHeader, arena_offset) == hdr::ARENA_OFFSET);
    assert!(offset_of!(RingHeader, arena_size) == hdr::ARENA_SIZE);
    assert!(offset_of!(RingHeader, reader_registry_offset) == hdr::REGISTRY_OFFSET);
    assert!(offset_of!(RingHeader, reader_registry_count) == hdr::REGISTRY_COUNT);
    assert!(offset_of!(RingHeader, slots_offset) == hdr::SLOTS_OFFSET);
    assert!(offset_of!(RingHeader, pad) == 112);
};
