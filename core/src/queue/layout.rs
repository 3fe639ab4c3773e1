//! Native queue layout: a 128-byte header, two cursor lines, then the slots.
//!
//! ```text
//! [0, 128)    QueueHeader (read-only after init, except the four waiting words)
//! [128, 256)  producer line: the enqueue cursor (SPSC tail / MPMC enqueue position)
//! [256, 384)  consumer line: the dequeue cursor (SPSC head / MPMC dequeue position)
//! [384, ...)  capacity slots of `slot_stride` bytes: an 8-byte control word, then the item;
//!             an SPSC queue with [`FLAG_FIXED`] has no control word: the slot is the item
//! ```
//!
//! Version 2 (this one) added [`FLAG_FIXED`] and the MPMC `CLAIMED` stamp flag
//! (`mpmc` module docs); version 1 files are refused with a version error.
//!
//! Each cursor gets 128 bytes, not 64, so the adjacent-line prefetcher of x86 cores does not
//! pull the producer's line whenever the consumer touches its own. The magics are distinct
//! from every ringfire magic, so a ringfire reader refuses a queue file with "bad magic".

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::error::QueueGeometryError;

/// Magic of an SPSC queue, stored in the host's byte order as every header word is: the
/// bytes on disk read "RWSPSCQ1" on a little-endian host.
pub const SPSC_MAGIC: u64 = u64::from_le_bytes(*b"RWSPSCQ1");
/// Magic of a Vyukov MPMC queue: the bytes on disk read "RWMPMCQ1" on a little-endian host.
pub const MPMC_MAGIC: u64 = u64::from_le_bytes(*b"RWMPMCQ1");
/// Queue layout version.
pub const QUEUE_VERSION: u32 = 2;
/// Header flag (SPSC only): every item is exactly `item_size` bytes and slots carry no
/// length word, so a slot is `item_size` rounded up to 8 bytes (8 `u64`s per cache line,
/// a 64-byte item on exactly one line).
pub const FLAG_FIXED: u32 = 1;
/// The largest item size a queue takes: a slot (the item and its 8-byte control word,
/// rounded up to a multiple of 8) must fit the header's 32-bit stride, whose largest
/// multiple of 8 is `u32::MAX - 7`.
pub const MAX_ITEM_SIZE: u32 = u32::MAX - 7 - 8;

/// Which queue protocol a region holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum QueueKind {
    /// One producer, one consumer (Lamport head/tail).
    Spsc,
    /// Many producers, many consumers, global FIFO (Vyukov sequence stamps).
    Mpmc,
}

impl QueueKind {
    /// The magic stored for this kind.
    pub const fn magic(self) -> u64 {
        match self {
            QueueKind::Spsc => SPSC_MAGIC,
            QueueKind::Mpmc => MPMC_MAGIC,
        }
    }

    /// The value of the header's `kind` field.
    pub const fn code(self) -> u32 {
        match self {
            QueueKind::Spsc => 1,
            QueueKind::Mpmc => 2,
        }
    }

    /// "SPSC" or "MPMC".
    pub const fn name(self) -> &'static str {
        match self {
            QueueKind::Spsc => "SPSC",
            QueueKind::Mpmc => "MPMC",
        }
    }

    /// The kind a magic stands for, if it is a queue magic.
    pub const fn from_magic(magic: u64) -> Option<QueueKind> {
        match magic {
            SPSC_MAGIC => Some(QueueKind::Spsc),
            MPMC_MAGIC => Some(QueueKind::Mpmc),
            _ => None,
        }
    }
}

/// The 128-byte header at offset 0 of every native queue. Fields that change after init are
/// accessed atomically through the region at the offsets in [`qhdr`].
#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct QueueHeader {
    /// [`SPSC_MAGIC`] or [`MPMC_MAGIC`], written last at creation.
    pub magic: u64,
    /// [`QUEUE_VERSION`].
    pub version: u32,
    /// [`QueueKind::code`].
    pub kind: u32,
    /// Number of slots (a power of two).
    pub capacity: u64,
    /// `capacity - 1`.
    pub mask: u64,
    /// Slot stride in bytes, including the 8-byte control word.
    pub slot_stride: u32,
    /// Largest item in bytes (`<= slot_stride - 8`). MPMC items are exactly this long.
    pub item_size: u32,
    /// Offset of slot 0.
    pub slots_offset: u64,
    /// Schema signature of the item type (spec §12 rules), 0 = unverified.
    pub schema_sig: u64,
    /// [`FLAG_FIXED`] or 0; other bits are reserved and must be zero.
    pub flags: u32,
    /// Zero.
    pub pad0: u32,
    /// Bumped after a push when consumers sleep (atomic).
    pub data_futex: u32,
    /// Consumers asleep or about to sleep on `data_futex` (atomic).
    pub data_waiters: u32,
    /// Bumped after a pop when producers sleep (atomic).
    pub space_futex: u32,
    /// Producers asleep or about to sleep on `space_futex` (atomic).
    pub space_waiters: u32,
    /// Zero.
    pub pad: [u8; 48],
}

/// Byte offsets of the queue header fields and the cursor lines.
pub mod qhdr {
    /// `magic`.
    pub const MAGIC: usize = 0;
    /// `version`.
    pub const VERSION: usize = 8;
    /// `kind`.
    pub const KIND: usize = 12;
    /// `capacity`.
    pub const CAPACITY: usize = 16;
    /// `mask`.
    pub const MASK: usize = 24;
    /// `slot_stride`.
    pub const SLOT_STRIDE: usize = 32;
    /// `item_size`.
    pub const ITEM_SIZE: usize = 36;
    /// `slots_offset`.
    pub const SLOTS_OFFSET: usize = 40;
    /// `schema_sig`.
    pub const SCHEMA_SIG: usize = 48;
    /// `flags`.
    pub const FLAGS: usize = 56;
    /// `data_futex`.
    pub const DATA_FUTEX: usize = 64;
    /// `data_waiters`.
    pub const DATA_WAITERS: usize = 68;
    /// `space_futex`.
    pub const SPACE_FUTEX: usize = 72;
    /// `space_waiters`.
    pub const SPACE_WAITERS: usize = 76;
    /// Header size.
    pub const SIZE: usize = 128;
    /// The enqueue cursor (SPSC tail, MPMC enqueue position), alone on its 128 bytes.
    pub const ENQ: usize = 128;
    /// The dequeue cursor (SPSC head, MPMC dequeue position), alone on its 128 bytes.
    pub const DEQ: usize = 256;
    /// Smallest `slots_offset`: the header and both cursor lines.
    pub const MIN_SLOTS_OFFSET: usize = 384;
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<QueueHeader>() == qhdr::SIZE);
    assert!(offset_of!(QueueHeader, magic) == qhdr::MAGIC);
    assert!(offset_of!(QueueHeader, version) == qhdr::VERSION);
    assert!(offset_of!(QueueHeader, kind) == qhdr::KIND);
    assert!(offset_of!(QueueHeader, capacity) == qhdr::CAPACITY);
    assert!(offset_of!(QueueHeader, mask) == qhdr::MASK);
    assert!(offset_of!(QueueHeader, slot_stride) == qhdr::SLOT_STRIDE);
    assert!(offset_of!(QueueHeader, item_size) == qhdr::ITEM_SIZE);
    assert!(offset_of!(QueueHeader, slots_offset) == qhdr::SLOTS_OFFSET);
    assert!(offset_of!(QueueHeader, schema_sig) == qhdr::SCHEMA_SIG);
    assert!(offset_of!(QueueHeader, flags) == qhdr::FLAGS);
    assert!(offset_of!(QueueHeader, data_futex) == qhdr::DATA_FUTEX);
    assert!(offset_of!(QueueHeader, data_waiters) == qhdr::DATA_WAITERS);
    assert!(offset_of!(QueueHeader, space_futex) == qhdr::SPACE_FUTEX);
    assert!(offset_of!(QueueHeader, space_waiters) == qhdr::SPACE_WAITERS);
    assert!(offset_of!(QueueHeader, pad) == 80);
    // Distinct from ringfire's ring, blackboard and offset-file magics.
    assert!(SPSC_MAGIC != crate::layout::RING_MAGIC && MPMC_MAGIC != crate::layout::RING_MAGIC);
    assert!(SPSC_MAGIC != 0x5249_4E47_4242_4F52 && MPMC_MAGIC != 0x5249_4E47_4242_4F52);
    assert!(SPSC_MAGIC != MPMC_MAGIC);
};

/// The shape of a queue: everything needed to find its parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct QueueGeometry {
    /// SPSC or MPMC.
    pub kind: QueueKind,
    /// Number of slots (a power of two; at least 2 for MPMC, whose stamps could not tell
    /// a published item from a free slot with one).
    pub capacity: u64,
    /// Slot stride in bytes (a multiple of 8, at least `8 + item_size`, or `item_size` when
    /// `fixed`).
    pub slot_stride: u32,
    /// Largest item in bytes (MPMC items are exactly this long).
    pub item_size: u32,
    /// Offset of slot 0 (at least 384, a multiple of 64).
    pub slots_offset: u64,
    /// Schema signature of the item type, 0 = unverified.
    pub schema_sig: u64,
    /// SPSC only: items are exactly `item_size` bytes, slots have no length word
    /// ([`FLAG_FIXED`]).
    pub fixed: bool,
}

impl QueueGeometry {
    /// A queue of `capacity` slots of `slot_stride` bytes holding items of up to
    /// `item_size` bytes. A 64-byte stride holds a 56-byte item in one cache line.
    pub fn new(
        kind: QueueKind,
        capacity: u64,
        item_size: usize,
        slot_stride: usize,
    ) -> Result<QueueGeometry, QueueGeometryError> {
        Self::unchecked_size(kind, capacity, item_size, slot_stride)?.sized()
    }

    /// [`QueueGeometry::new`] but for the check of the total size ([`QueueGeometry::sized`]).
    fn unchecked_size(
        kind: QueueKind,
        capacity: u64,
        item_size: usize,
        slot_stride: usize,
    ) -> Result<QueueGeometry, QueueGeometryError> {
        if !capacity.is_power_of_two() {
            return Err(QueueGeometryError::CapacityNotPowerOfTwo { capacity });
        }
        if kind == QueueKind::Mpmc && capacity < 2 {
            return Err(QueueGeometryError::MpmcCapacityTooSmall { capacity });
        }
        if item_size == 0 || item_size > MAX_ITEM_SIZE as usize {
            return Err(QueueGeometryError::BadItemSize {
                item_size: item_size as u64,
            });
        }
        if !slot_stride.is_multiple_of(8)
            || slot_stride < 8 + item_size
            || slot_stride > u32::MAX as usize
        {
            return Err(QueueGeometryError::BadStride {
                stride: slot_stride as u64,
                item_size: item_size as u32,
            });
        }
        Ok(QueueGeometry {
            kind,
            capacity,
            slot_stride: slot_stride as u32,
            item_size: item_size as u32,
            slots_offset: qhdr::MIN_SLOTS_OFFSET as u64,
            schema_sig: 0,
            fixed: false,
        })
    }

    /// This geometry if the whole queue fits in the address space.
    fn sized(self) -> Result<QueueGeometry, QueueGeometryError> {
        match self.total_len() {
            Some(n) if n <= isize::MAX as u64 => Ok(self),
            _ => Err(self.too_large()),
        }
    }

    /// Like [`QueueGeometry::new`] with the stride rounded up to whole 64-byte cache lines
    /// (one line for items of up to 56 bytes), so no two MPMC slots share a line.
    pub fn cache_lines(
        kind: QueueKind,
        capacity: u64,
        item_size: usize,
    ) -> Result<QueueGeometry, QueueGeometryError> {
        let stride = item_size.checked_add(8 + 63).map(|n| n & !63).ok_or(
            QueueGeometryError::BadItemSize {
                item_size: item_size as u64,
            },
        )?;
        QueueGeometry::new(kind, capacity, item_size, stride)
    }

    /// An SPSC queue of `capacity` slots holding items of exactly `item_size` bytes with no
    /// per-slot length word ([`FLAG_FIXED`]): the stride is `item_size` rounded up to 8.
    pub fn spsc_fixed(
        capacity: u64,
        item_size: usize,
    ) -> Result<QueueGeometry, QueueGeometryError> {
        let stride =
            item_size
                .checked_add(7)
                .map(|n| n & !7)
                .ok_or(QueueGeometryError::BadItemSize {
                    item_size: item_size as u64,
                })?;
        // Validate with room for a length word, then drop it: the same item-size rules
        // (the size is checked with the stride the queue has).
        let mut g = QueueGeometry::unchecked_size(
            QueueKind::Spsc,
            capacity,
            item_size,
            stride.saturating_add(8),
        )?;
        g.slot_stride = stride as u32;
        g.fixed = true;
        g.sized()
    }

    /// Bytes before the item in each slot: 0 for a fixed-size SPSC queue, else the 8-byte
    /// control word.
    #[inline(always)]
    pub const fn payload_offset(&self) -> usize {
        if self.fixed { 0 } else { 8 }
    }

    /// The same geometry with a schema signature.
    pub const fn with_schema(mut self, sig: u64) -> QueueGeometry {
        self.schema_sig = sig;
        self
    }

    /// `capacity - 1` (wrapping: a hand-built capacity of 0, which init and attach refuse,
    /// gives `u64::MAX` instead of an overflow panic).
    #[inline(always)]
    pub const fn mask(&self) -> u64 {
        self.capacity.wrapping_sub(1)
    }

    /// The error for a queue of this geometry that does not fit in the address space.
    pub const fn too_large(&self) -> QueueGeometryError {
        QueueGeometryError::TooLarge {
            capacity: self.capacity,
            slot_stride: self.slot_stride as u64,
        }
    }

    /// Bytes the whole queue needs, `None` on overflow.
    pub fn total_len(&self) -> Option<u64> {
        self.capacity
            .checked_mul(u64::from(self.slot_stride))?
            .checked_add(self.slots_offset)
    }

    /// The header that describes this geometry (magic included).
    pub fn header(&self) -> QueueHeader {
        QueueHeader {
            magic: self.kind.magic(),
            version: QUEUE_VERSION,
            kind: self.kind.code(),
            capacity: self.capacity,
            mask: self.mask(),
            slot_stride: self.slot_stride,
            item_size: self.item_size,
            slots_offset: self.slots_offset,
            schema_sig: self.schema_sig,
            flags: if self.fixed { FLAG_FIXED } else { 0 },
            pad0: 0,
            data_futex: 0,
            data_waiters: 0,
            space_futex: 0,
            space_waiters: 0,
            pad: [0; 48],
        }
    }
}
