//! Typed errors. Each names what is wrong and carries the value that was seen.

use core::fmt;

use crate::region::RegionError;

/// The kind of file a magic belongs to, of those ringwire knows: errors about a file with
/// the wrong magic name it ("the magic of a ring file"), since a wrong or swapped path is
/// the usual cause. Displays as a noun phrase: "a ring file", "a blackboard", "a ringwire
/// SPSC queue".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum KnownMagic {
    /// [`RING_MAGIC`](crate::layout::RING_MAGIC): a ring, ringwire's or ringfire's.
    Ring,
    /// [`BLACKBOARD_MAGIC`](crate::blackboard::BLACKBOARD_MAGIC).
    Blackboard,
    /// A ringwire queue's magic.
    Queue(crate::queue::QueueKind),
}

impl KnownMagic {
    /// The kind of file whose magic is `magic`, or `None` for a magic no file kind has.
    pub fn of(magic: u64) -> Option<KnownMagic> {
        match magic {
            crate::layout::RING_MAGIC => Some(KnownMagic::Ring),
            crate::blackboard::BLACKBOARD_MAGIC => Some(KnownMagic::Blackboard),
            m => crate::queue::QueueKind::from_magic(m).map(KnownMagic::Queue),
        }
    }
}

impl fmt::Display for KnownMagic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KnownMagic::Ring => f.write_str("a ring file"),
            KnownMagic::Blackboard => f.write_str("a blackboard"),
            KnownMagic::Queue(kind) => write!(f, "a ringwire {} queue", kind.name()),
        }
    }
}

/// A ring cannot be attached: spec §1.3 checks, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum AttachError {
    /// The region is shorter than the 128-byte header.
    TooShort {
        /// Region length.
        len: u64,
    },
    /// `magic` is not the ring magic (0 also means "creation not finished").
    BadMagic {
        /// The value found.
        found: u64,
    },
    /// `version` is not 2.
    BadVersion {
        /// The value found.
        found: u32,
    },
    /// `element_size` differs from the caller's slot stride.
    ElementSizeMismatch {
        /// The caller's stride.
        expected: u32,
        /// The header's stride.
        found: u32,
    },
    /// `element_size < 8`.
    ElementSizeTooSmall {
        /// The value found.
        found: u32,
    },
    /// `capacity` is not a power of two.
    CapacityNotPowerOfTwo {
        /// The value found.
        found: u64,
    },
    /// `mask != capacity - 1`.
    BadMask {
        /// Header capacity.
        capacity: u64,
        /// Header mask.
        mask: u64,
    },
    /// `slots_offset` is below 128 or not aligned.
    BadSlotsOffset {
        /// The offset found.
        offset: u64,
        /// The required alignment.
        align: u64,
    },
    /// The slots end past the region (`end` is `None` on overflow).
    SlotsPastEnd {
        /// End of the slot array.
        end: Option<u64>,
        /// Region length.
        len: u64,
    },
    /// `reader_registry_offset` is not a multiple of 64.
    RegistryMisaligned {
        /// The offset found.
        offset: u32,
    },
    /// The registry ends past the region.
    RegistryPastEnd {
        /// End of the registry.
        end: u64,
        /// Region length.
        len: u64,
    },
    /// `arena_offset` is not a multiple of 64.
    ArenaMisaligned {
        /// The offset found.
        offset: u64,
    },
    /// The arena ends past the region (`end` is `None` on overflow).
    ArenaPastEnd {
        /// End of the arena.
        end: Option<u64>,
        /// Region length.
        len: u64,
    },
    /// The arena size is not a power of two ≥ 64, or the records cannot hold a BlobRef.
    BadArena {
        /// Header arena size.
        arena_size: u64,
        /// Header element size.
        element_size: u32,
    },
    /// The arena header's capacity differs from the ring header's `arena_size`.
    ArenaHeaderMismatch {
        /// Ring header `arena_size`.
        arena_size: u64,
        /// Arena header `capacity`.
        arena_capacity: u64,
    },
    /// The arena header's `mask` is not its `capacity - 1` (spec §10.1).
    ArenaMaskMismatch {
        /// Arena header `capacity`.
        arena_capacity: u64,
        /// Arena header `mask`.
        mask: u64,
    },
    /// The registry or the arena overlaps the 128-byte header or the slots.
    Overlap {
        /// Which part overlaps ("registry" or "arena").
        what: &'static str,
        /// Its first byte.
        start: u64,
        /// The byte after its last.
        end: u64,
        /// The header's `slots_offset`.
        slots_offset: u64,
        /// The end of the slots (`slots_offset + capacity * element_size`).
        slots_end: u64,
    },
    /// The header's schema signature differs from the caller's type.
    SchemaMismatch {
        /// The caller's signature.
        expected: u64,
        /// The header's signature.
        found: u64,
    },
    /// The ring is of another kind than the caller asked for.
    WrongKind {
        /// The header flags.
        flags: u32,
        /// What the caller needs.
        need: &'static str,
    },
    /// `element_size` is not a multiple of 8: slot sequence words would be misaligned for
    /// atomic access (every ringfire stride is a multiple of 8, spec §4.1).
    ElementSizeMisaligned {
        /// The header's element size.
        found: u32,
    },
    /// `write_seq` is at or past [`SEQ_LIMIT`](crate::layout::SEQ_LIMIT): a writer could
    /// not continue the ring (only a corrupt header gets there). A single writer refuses
    /// `SEQ_LIMIT - 1` too ([`next_write_seq`](crate::layout::next_write_seq)): the last
    /// sequence is published there and none is left to write.
    WriteSeqExhausted {
        /// The header's `write_seq`.
        write_seq: u64,
    },
    /// An MPMC ring's `claim_seq` is at or past [`SEQ_LIMIT`](crate::layout::SEQ_LIMIT): the
    /// next ticket would not be a valid sequence (u64::MAX is the write marker, spec §0.1;
    /// only a corrupt header gets there).
    ClaimSeqExhausted {
        /// The header's `claim_seq`.
        claim_seq: u64,
    },
    /// An MPMC ring's `read_seq` is past its `claim_seq`: consumers take no ticket until
    /// producers have claimed up to `read_seq`, and those skipped are never counted lost
    /// (consumers only move `read_seq` to a ticket already claimed; only a corrupt header
    /// gets there).
    ReadSeqPastClaimSeq {
        /// The header's `read_seq`.
        read_seq: u64,
        /// The header's `claim_seq`, loaded after it.
        claim_seq: u64,
    },
    /// An MPMC ring's `write_seq` is at or past its `claim_seq`: no producer publishes a
    /// ticket before it claims it, so the records `write_seq` places were never published
    /// (only a corrupt header gets there). Refused by the tools that show or heal a ring
    /// ([`RingView::checked_write_seq`](crate::RingView::checked_write_seq)), not by its
    /// producers and queue consumers: consumers never read `write_seq`, and a producer's
    /// publish only raises it.
    WriteSeqPastClaimSeq {
        /// The header's `write_seq`.
        write_seq: u64,
        /// The header's `claim_seq`, loaded after it.
        claim_seq: u64,
    },
}

impl fmt::Display for AttachError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use AttachError::*;
        match *self {
            TooShort { len } => write!(
                f,
                "file is {len} bytes, shorter than the 128-byte ring header"
            ),
            BadMagic { found: 0 } => write!(
                f,
                "magic is 0: not a ring, or its creation has not finished"
            ),
            BadMagic { found } => match KnownMagic::of(found) {
                // Named by its magic: a wrong or swapped path.
                Some(other @ (KnownMagic::Blackboard | KnownMagic::Queue(_))) => {
                    write!(f, "this is {other} (magic {found:#018x}), not a ring")
                }
                Some(KnownMagic::Ring) | None => write!(
                    f,
                    "not a ring, queue or blackboard of ringwire or ringfire: bad magic \
                     {found:#018x} (a ring's is {:#018x})",
                    crate::layout::RING_MAGIC
                ),
            },
            BadVersion { found } => write!(f, "ring version {found} is not supported (expected 2)"),
            ElementSizeMismatch { expected, found } => {
                write!(
                    f,
                    "element_size {found} does not match the record type's slot stride {expected}"
                )
            }
            ElementSizeTooSmall { found } => write!(f, "element_size {found} is smaller than 8"),
            CapacityNotPowerOfTwo { found } => write!(f, "capacity {found} is not a power of two"),
            BadMask { capacity, mask } => {
                write!(f, "mask {mask:#x} is not capacity {capacity} - 1")
            }
            BadSlotsOffset { offset, align } => {
                write!(
                    f,
                    "slots_offset {offset} is below 128 or not a multiple of {align}"
                )
            }
            SlotsPastEnd {
                end: Some(end),
                len,
            } => write!(
                f,
                "slots end at byte {end}, past the end of the file ({len} bytes)"
            ),
            SlotsPastEnd { end: None, len } => write!(
                f,
                "slots_offset + capacity * element_size overflows (file is {len} bytes)"
            ),
            RegistryMisaligned { offset } => {
                write!(f, "reader_registry_offset {offset} is not a multiple of 64")
            }
            RegistryPastEnd { end, len } => write!(
                f,
                "reader registry ends at byte {end}, past the end of the file ({len} bytes)"
            ),
            ArenaMisaligned { offset } => {
                write!(f, "arena_offset {offset} is not a multiple of 64")
            }
            ArenaPastEnd {
                end: Some(end),
                len,
            } => write!(
                f,
                "arena ends at byte {end}, past the end of the file ({len} bytes)"
            ),
            ArenaPastEnd { end: None, len } => write!(
                f,
                "arena_offset + 64 + arena_size overflows (file is {len} bytes)"
            ),
            BadArena {
                arena_size,
                element_size,
            } => write!(
                f,
                "arena_size {arena_size} is not a power of two >= 64, or element_size {element_size} cannot hold a blob descriptor"
            ),
            ArenaHeaderMismatch {
                arena_size,
                arena_capacity,
            } => {
                write!(
                    f,
                    "arena header capacity {arena_capacity} differs from the ring header's arena_size {arena_size}"
                )
            }
            ArenaMaskMismatch {
                arena_capacity,
                mask,
            } => write!(
                f,
                "arena header mask {mask:#x} is not its capacity {arena_capacity} - 1"
            ),
            Overlap {
                what,
                start,
                end,
                slots_offset,
                slots_end,
            } => write!(
                f,
                "the {what} at bytes {start}..{end} overlaps the 128-byte header or the slots \
                 at bytes {slots_offset}..{slots_end}"
            ),
            SchemaMismatch { expected, found } => {
                write!(
                    f,
                    "schema signature {found:#018x} does not match the record type's {expected:#018x}"
                )
            }
            WrongKind { flags, need } => {
                write!(f, "ring flags {flags:#06x} do not describe {need}")
            }
            ElementSizeMisaligned { found } => {
                write!(f, "element_size {found} is not a multiple of 8")
            }
            WriteSeqExhausted { write_seq } if write_seq < crate::layout::SEQ_LIMIT => {
                write!(
                    f,
                    "write_seq {write_seq:#x} leaves no sequence below the limit {:#x} for a \
                     writer (a corrupt header): no record can follow it",
                    crate::layout::SEQ_LIMIT
                )
            }
            WriteSeqExhausted { write_seq } => {
                write!(
                    f,
                    "write_seq {write_seq:#x} is at or past the sequence limit {:#x} (a \
                     corrupt header): no record can follow it",
                    crate::layout::SEQ_LIMIT
                )
            }
            ClaimSeqExhausted { claim_seq } => {
                write!(
                    f,
                    "claim_seq {claim_seq:#x} is at or past the sequence limit {:#x} (a \
                     corrupt header): it leaves no valid ticket",
                    crate::layout::SEQ_LIMIT
                )
            }
            ReadSeqPastClaimSeq {
                read_seq,
                claim_seq,
            } => write!(
                f,
                "MPMC read_seq {read_seq} is past claim_seq {claim_seq} (a corrupt header): \
                 consumers would take no ticket until {} more were claimed, and count none of \
                 them lost",
                read_seq.saturating_sub(claim_seq)
            ),
            // claim_seq 0 is wrong whatever write_seq is: "write_seq 0 is at or past
            // claim_seq 0" named the sound value as the fault.
            WriteSeqPastClaimSeq {
                write_seq,
                claim_seq: 0,
            } => write!(
                f,
                "MPMC claim_seq is 0 (a corrupt header): it holds the next ticket to claim, 1 \
                 on a new ring and never lowered, so no producer leaves it at 0 (write_seq \
                 {write_seq})"
            ),
            WriteSeqPastClaimSeq {
                write_seq,
                claim_seq,
            } => write!(
                f,
                "MPMC write_seq {write_seq} is at or past claim_seq {claim_seq} (a corrupt \
                 header): no producer publishes a ticket it has not claimed, so the window it \
                 places holds records never published"
            ),
        }
    }
}

/// A geometry cannot be built from the requested parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum GeometryError {
    /// The capacity is not a power of two.
    CapacityNotPowerOfTwo {
        /// The capacity asked for.
        capacity: u64,
    },
    /// The slot stride is below 8 (24 for blob rings), not a multiple of 8, or above
    /// 4294967288 (the largest multiple of 8 the header's u32 `element_size` holds).
    BadStride {
        /// The stride asked for.
        stride: u64,
    },
    /// The arena size is not a power of two ≥ 64.
    ArenaSize {
        /// The size asked for.
        arena_size: u64,
    },
    /// The ring (`capacity` slots of `stride` bytes after the header and registry, and on a
    /// blob ring an arena of `arena_size` bytes) would not fit in the address space: it would
    /// be larger than `isize::MAX` bytes (2 GiB on a 32-bit target), the most a
    /// [`Region`](crate::Region) holds.
    TooLarge {
        /// The capacity asked for.
        capacity: u64,
        /// The slot stride in bytes.
        stride: u64,
        /// The blob arena's size in bytes (0: no arena).
        arena_size: u64,
    },
    /// The slot alignment is not a power of two (0 is taken as 8).
    BadSlotAlign {
        /// The alignment asked for.
        slot_align: u64,
    },
    /// The slot stride is not a multiple of a slot alignment over 8: every slot after the
    /// first would start misaligned, and a typed reader of records of that alignment
    /// (whose stride, spec §4.1, is a multiple of it) refuses the ring. Only the
    /// constructors refuse it; attach accepts such a ring from another creator, as
    /// ringfire's does (spec §1.3 has no such check).
    StrideNotAligned {
        /// The stride asked for.
        stride: u64,
        /// The slot alignment asked for.
        slot_align: u64,
    },
}

impl fmt::Display for GeometryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            GeometryError::CapacityNotPowerOfTwo { capacity } => {
                write!(f, "capacity {capacity} is not a power of two")
            }
            GeometryError::BadStride { stride } => write!(
                f,
                "slot stride {stride} is invalid (must be a multiple of 8 from 8, 24 for blob rings, to {}, the most the header's 32-bit element_size holds)",
                u32::MAX - 7
            ),
            GeometryError::ArenaSize { arena_size } => {
                write!(f, "arena size {arena_size} is not a power of two >= 64")
            }
            GeometryError::TooLarge {
                capacity,
                stride,
                arena_size,
            } => {
                write!(f, "capacity {capacity} of {stride}-byte slots")?;
                if arena_size > 0 {
                    write!(f, " and a {arena_size}-byte arena")?;
                }
                f.write_str(" do not fit in the address space")
            }
            GeometryError::BadSlotAlign { slot_align } => {
                write!(f, "slot alignment {slot_align} is not a power of two")
            }
            GeometryError::StrideNotAligned { stride, slot_align } => write!(
                f,
                "slot stride {stride} is not a multiple of the slot alignment {slot_align}"
            ),
        }
    }
}

/// A ring cannot be initialised in a region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum InitError {
    /// The region is smaller than the geometry needs.
    RegionTooSmall {
        /// Bytes needed.
        need: u64,
        /// Bytes available.
        len: u64,
    },
    /// The geometry is inconsistent.
    Geometry(AttachError),
    /// The memory is unusable.
    Region(RegionError),
}

impl fmt::Display for InitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InitError::RegionTooSmall { need, len } => write!(
                f,
                "region of {len} bytes is smaller than the {need} bytes the ring needs"
            ),
            InitError::Geometry(e) => write!(f, "inconsistent geometry: {e}"),
            InitError::Region(e) => e.fmt(f),
        }
    }
}

impl core::error::Error for AttachError {}
impl core::error::Error for GeometryError {}
impl core::error::Error for InitError {}
impl core::error::Error for RegionError {}

#[cfg(test)]
mod tests {
    use super::AttachError;
    use crate::blackboard::BLACKBOARD_MAGIC;
    use crate::layout::RING_MAGIC;
    use crate::queue::QueueAttachError;
    use crate::queue::layout::{MPMC_MAGIC, SPSC_MAGIC};
    use std::string::ToString;

    /// A ring's attach and a queue's name the file kind another kind's magic belongs to
    /// (through one [`super::KnownMagic`], as std's `Error::BadFileMagic`); a ring's own
    /// magic, which a ring's attach never refuses, reads as an unknown one there.
    #[test]
    fn a_magic_of_another_file_kind_is_named() {
        let ring = |m: u64| AttachError::BadMagic { found: m }.to_string();
        let queue = |m: u64| QueueAttachError::BadMagic { found: m }.to_string();
        for (m, kind) in [(SPSC_MAGIC, "SPSC"), (MPMC_MAGIC, "MPMC")] {
            assert_eq!(
                ring(m),
                std::format!("this is a ringwire {kind} queue (magic {m:#018x}), not a ring")
            );
        }
        assert_eq!(
            ring(BLACKBOARD_MAGIC),
            std::format!("this is a blackboard (magic {BLACKBOARD_MAGIC:#018x}), not a ring")
        );
        assert_eq!(
            ring(RING_MAGIC),
            "not a ring, queue or blackboard of ringwire or ringfire: bad magic \
             0x52494e4746495245 (a ring's is 0x52494e4746495245)"
        );
        assert_eq!(
            queue(RING_MAGIC),
            "bad queue magic 0x52494e4746495245 (the magic of a ring file)"
        );
        assert_eq!(
            queue(BLACKBOARD_MAGIC),
            std::format!("bad queue magic {BLACKBOARD_MAGIC:#018x} (the magic of a blackboard)")
        );
        assert_eq!(queue(7), "bad queue magic 0x0000000000000007");
    }

    /// The variants are public: one built by hand with the values the other way round
    /// prints a count of 0 instead of panicking on the subtraction (debug builds).
    #[test]
    fn read_seq_past_claim_seq_displays_whatever_its_values() {
        let e = AttachError::ReadSeqPastClaimSeq {
            read_seq: 1,
            claim_seq: 2,
        };
        assert!(e.to_string().contains("until 0 more"), "{e}");
        let e = AttachError::ReadSeqPastClaimSeq {
            read_seq: 102,
            claim_seq: 2,
        };
        assert!(e.to_string().contains("until 100 more"), "{e}");
    }
}
