//! Why a frame was rejected. Every variant names the field and carries the value seen.

use core::fmt;

use super::Kind;

/// A frame that is short, oversized, or inconsistent (spec §17–§18).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum WireError {
    /// Fewer bytes than the header or the header's `len` needs.
    Truncated {
        /// Bytes needed.
        need: usize,
        /// Bytes present.
        have: usize,
    },
    /// More bytes than `16 + len` (a datagram carries exactly one frame).
    TrailingBytes {
        /// Bytes the header announces in total.
        expected: usize,
        /// Bytes present.
        have: usize,
    },
    /// `kind` is not one of 1..=8.
    UnknownKind {
        /// The value found.
        kind: u8,
    },
    /// The frame is a valid frame of another kind than the caller asked for.
    WrongKind {
        /// The kind asked for.
        expected: Kind,
        /// The kind found.
        found: Kind,
    },
    /// `len` differs from the fixed payload length of the kind (control frames need 0).
    BadLen {
        /// The frame kind.
        kind: Kind,
        /// The payload length required.
        expected: u32,
        /// The value found.
        found: u32,
    },
    /// `len` exceeds what the receiver can hold.
    FrameTooLarge {
        /// The announced payload length.
        len: u32,
        /// The largest payload accepted.
        max: usize,
    },
    /// HELLO magic is not `0x52494E474D495252`.
    BadMagic {
        /// The value found.
        found: u64,
    },
    /// HELLO protocol version is not 1.
    BadVersion {
        /// The value found.
        found: u32,
    },
    /// A DATA frame with `count == 0`.
    ZeroCount,
    /// Fixed-record DATA whose `len` is not `count × record_len`.
    DataLenMismatch {
        /// Records announced.
        count: u16,
        /// Bytes per record.
        record_len: usize,
        /// The `len` found.
        len: u32,
    },
    /// Blob DATA whose payload ends inside record `index` (descriptor or blob bytes).
    BlobTruncated {
        /// Index of the record that does not fit.
        index: u16,
        /// Bytes that record needs from its start.
        need: u64,
        /// Bytes left at its start.
        have: usize,
    },
    /// DATA whose sequences include 0 or reach the reserved `u64::MAX`.
    BadSeq {
        /// First sequence.
        seq: u64,
        /// Records announced.
        count: u16,
    },
    /// A GEOMETRY, DATA, GAP or HEARTBEAT sequence at or past
    /// [`SEQ_LIMIT`](crate::layout::SEQ_LIMIT), which no ring holds (a mirror would leave a
    /// `write_seq` that producers refuse as corrupt).
    SeqLimit {
        /// The frame kind.
        kind: Kind,
        /// The sequence found: the last record's for DATA, the frame's `seq` otherwise.
        seq: u64,
    },
    /// Blob DATA with bytes left after the last record.
    DataTrailing {
        /// Bytes left over.
        extra: usize,
    },
    /// A record length the format cannot describe (a blob descriptor below 16 bytes).
    BadRecordLen {
        /// The value given.
        record_len: usize,
    },
    /// GEOMETRY `capacity` is not a power of two.
    CapacityNotPowerOfTwo {
        /// The value found.
        capacity: u64,
    },
    /// GEOMETRY `element_size` is below 8 or not a multiple of 8.
    BadElementSize {
        /// The value found.
        element_size: u32,
    },
    /// GEOMETRY `slots_offset` is below `128 + 64·registry_count` or not a multiple of 64.
    BadSlotsOffset {
        /// The value found.
        slots_offset: u32,
        /// The registry count it must leave room for.
        registry_count: u32,
    },
    /// `capacity·element_size + slots_offset` (or the arena end) overflows, or (a source's
    /// own ring) `slots_offset` is over the field's 32 bits.
    SizeOverflow {
        /// The GEOMETRY's capacity.
        capacity: u64,
        /// Its element size.
        element_size: u32,
        /// Its slots offset.
        slots_offset: u64,
        /// Its arena offset (0: no arena).
        arena_offset: u64,
        /// Its arena size.
        arena_size: u64,
    },
    /// GEOMETRY `arena_offset` lies inside the slots or is not a multiple of 64.
    BadArenaOffset {
        /// The value found.
        arena_offset: u64,
        /// End of the slots.
        slots_end: u64,
    },
    /// GEOMETRY `arena_size` is not a power of two ≥ 64 (or non-zero without an arena).
    BadArenaSize {
        /// The value found.
        arena_size: u64,
    },
    /// A blob ring whose records cannot hold a 16-byte BlobRef (`element_size - 8 < 16`).
    BlobRecordTooSmall {
        /// The value found.
        element_size: u32,
    },
    /// MULTICAST group is neither 0.0.0.0 nor in 224.0.0.0/4.
    NotMulticast {
        /// The group found.
        group: [u8; 4],
    },
    /// MULTICAST port is 0: no datagram can come from (unicast) or to (multicast) it.
    ZeroPort {
        /// The group found (0.0.0.0 for unicast).
        group: [u8; 4],
    },
    /// A buffer is too small: the output buffer for the frame being emitted, or a
    /// [`StreamBuf`](crate::replicate::StreamBuf)'s buffer for even a frame header.
    BufferTooSmall {
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// A DATA payload to emit is longer than the header's 32-bit `len` can say (4 GiB or
    /// more of records).
    DataTooLarge {
        /// The payload's length in bytes.
        len: u64,
    },
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use WireError::*;
        match *self {
            Truncated { need, have } => {
                write!(f, "frame truncated: need {need} bytes, have {have}")
            }
            TrailingBytes { expected, have } => {
                write!(
                    f,
                    "frame has {have} bytes but its header announces {expected}"
                )
            }
            UnknownKind { kind } => write!(f, "unknown frame kind {kind}"),
            WrongKind { expected, found } => {
                write!(
                    f,
                    "expected a {} frame, got {}",
                    expected.name(),
                    found.name()
                )
            }
            BadLen {
                kind,
                expected,
                found,
            } => write!(
                f,
                "{} frame has len {found}, must be {expected}",
                kind.name()
            ),
            FrameTooLarge { len, max } => {
                write!(f, "frame payload of {len} bytes exceeds the limit of {max}")
            }
            BadMagic { found } => write!(f, "HELLO magic {found:#018x} is wrong"),
            BadVersion { found } => write!(f, "HELLO protocol version {found} is not 1"),
            ZeroCount => f.write_str("DATA frame with count 0"),
            DataLenMismatch {
                count,
                record_len,
                len,
            } => write!(
                f,
                "DATA len {len} is not count {count} x record length {record_len}"
            ),
            BlobTruncated { index, need, have } => write!(
                f,
                "DATA record {index} needs {need} bytes but only {have} remain"
            ),
            BadSeq { seq, count } => write!(
                f,
                "DATA sequences {seq}..+{count} include 0 or the reserved u64::MAX"
            ),
            SeqLimit { kind, seq } => write!(
                f,
                "{} sequence {seq:#x} is at or past the sequence limit {:#x}",
                kind.name(),
                crate::layout::SEQ_LIMIT
            ),
            DataTrailing { extra } => write!(f, "DATA has {extra} bytes after its last record"),
            BadRecordLen { record_len } => write!(f, "record length {record_len} is invalid"),
            CapacityNotPowerOfTwo { capacity } => {
                write!(f, "GEOMETRY capacity {capacity} is not a power of two")
            }
            BadElementSize { element_size } => write!(
                f,
                "GEOMETRY element_size {element_size} is not a multiple of 8 that is >= 8"
            ),
            BadSlotsOffset {
                slots_offset,
                registry_count,
            } => write!(
                f,
                "GEOMETRY slots_offset {slots_offset} is not a multiple of 64 >= 128 + 64 x {registry_count}"
            ),
            SizeOverflow {
                capacity,
                element_size,
                slots_offset,
                arena_offset,
                arena_size,
            } => {
                write!(
                    f,
                    "GEOMETRY ring size overflows: capacity {capacity} x element size \
                     {element_size} from slots_offset {slots_offset}"
                )?;
                if arena_offset != 0 {
                    write!(f, ", an arena of {arena_size} bytes at {arena_offset}")?;
                }
                Ok(())
            }
            BadArenaOffset {
                arena_offset,
                slots_end,
            } => write!(
                f,
                "GEOMETRY arena_offset {arena_offset} is below the slot end {slots_end} or not a multiple of 64"
            ),
            BadArenaSize { arena_size } => write!(f, "GEOMETRY arena_size {arena_size} is invalid"),
            BlobRecordTooSmall { element_size } => write!(
                f,
                "GEOMETRY element_size {element_size} leaves no room for a 16-byte BlobRef"
            ),
            NotMulticast { group } => write!(
                f,
                "MULTICAST group {}.{}.{}.{} is neither 0.0.0.0 nor in 224.0.0.0/4",
                group[0], group[1], group[2], group[3]
            ),
            ZeroPort { group } if u32::from_be_bytes(group) == 0 => f.write_str(
                "MULTICAST announces unicast from UDP port 0, which no PUNCH can reach (a \
                     ringfire server configured with unicast port 0 announces 0, not the port \
                     it bound: give it a port)",
            ),
            ZeroPort { group } => write!(
                f,
                "MULTICAST announces group {}.{}.{}.{} on UDP port 0, which cannot be received",
                group[0], group[1], group[2], group[3]
            ),
            BufferTooSmall { need, have } => {
                write!(f, "buffer of {have} bytes is smaller than {need}")
            }
            DataTooLarge { len } => write!(
                f,
                "DATA payload of {len} bytes is over the {} the header's 32-bit len holds",
                u32::MAX
            ),
        }
    }
}

impl core::error::Error for WireError {}
