//! Typed queue errors. Each names what is wrong and carries the value that was seen.

use core::fmt;

use super::layout::QueueKind;
use super::mpmc::StuckKind;

/// A queue geometry cannot be built from the requested parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum QueueGeometryError {
    /// The capacity is not a power of two.
    CapacityNotPowerOfTwo {
        /// The capacity asked for.
        capacity: u64,
    },
    /// An MPMC queue needs at least 2 slots.
    MpmcCapacityTooSmall {
        /// The capacity asked for.
        capacity: u64,
    },
    /// The item size is 0 or too large.
    BadItemSize {
        /// The size asked for.
        item_size: u64,
    },
    /// The stride is not a multiple of 8, cannot hold the control word and the item, or
    /// is over the header's 32-bit field.
    BadStride {
        /// The stride asked for.
        stride: u64,
        /// The item size it must hold.
        item_size: u32,
    },
    /// The queue (`capacity` slots of `slot_stride` bytes after the header and cursor
    /// lines) would not fit in the address space.
    TooLarge {
        /// The capacity asked for.
        capacity: u64,
        /// The slot stride in bytes.
        slot_stride: u64,
    },
}

/// A queue cannot be attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum QueueAttachError {
    /// The region is shorter than the 384-byte header and cursor lines.
    TooShort {
        /// Region length.
        len: u64,
    },
    /// The magic is no queue magic (0: not a queue, or its creation has not finished). Its
    /// message names the file kind the magic belongs to, if any
    /// ([`KnownMagic`](crate::error::KnownMagic): a ring's, a blackboard's).
    BadMagic {
        /// The value found.
        found: u64,
    },
    /// The region holds the other kind of queue.
    WrongKind {
        /// The kind asked for.
        expected: QueueKind,
        /// The kind found.
        found: QueueKind,
    },
    /// The version is not supported.
    BadVersion {
        /// The value found.
        found: u32,
    },
    /// The `kind` field contradicts the magic.
    KindMismatch {
        /// The `kind` field.
        kind: u32,
    },
    /// `capacity` is not a power of two, `mask != capacity - 1`, or an MPMC capacity is 1.
    BadCapacity {
        /// Header capacity.
        capacity: u64,
        /// Header mask.
        mask: u64,
    },
    /// The stride is not a multiple of 8 or cannot hold the item size.
    BadStride {
        /// Header slot stride.
        stride: u32,
        /// Header item size.
        item_size: u32,
    },
    /// Unknown `flags` bits, or `FLAG_FIXED` on an MPMC queue.
    BadFlags {
        /// The flags found.
        flags: u32,
    },
    /// `slots_offset` is below 384 or not a multiple of 64.
    BadSlotsOffset {
        /// The offset found.
        offset: u64,
    },
    /// The slots end past the region (`end` is `None` on overflow).
    SlotsPastEnd {
        /// End of the slot array.
        end: Option<u64>,
        /// Region length.
        len: u64,
    },
    /// The item size differs from the caller's.
    ItemSizeMismatch {
        /// The caller's item size.
        expected: u32,
        /// The header's item size.
        found: u32,
    },
    /// The schema signature differs from the caller's type (0 in the header accepts any).
    SchemaMismatch {
        /// The caller's signature.
        expected: u64,
        /// The header's signature.
        found: u64,
    },
    /// MPMC: the cursors contradict each other (the dequeue cursor past the enqueue cursor,
    /// or more than a lap behind it) or reach 2^61, where positions collide with the stamps'
    /// flag bits: a corrupt queue file, which would read as empty, full or both for good.
    BadCursors {
        /// The enqueue cursor.
        enqueue: u64,
        /// The dequeue cursor.
        dequeue: u64,
        /// The capacity.
        capacity: u64,
    },
    /// SPSC: the enqueue cursor is behind the dequeue cursor or more than a lap ahead of it
    /// (counted modulo 2^64, as the SPSC handles count): a corrupt queue file, which a
    /// producer finds full and a consumer finds holding items it never can pop.
    BadSpscCursors {
        /// The enqueue cursor.
        enqueue: u64,
        /// The dequeue cursor.
        dequeue: u64,
        /// The capacity.
        capacity: u64,
    },
    /// MPMC: the slot of `pos` holds a stamp of a lap the cursors rule out (older than the
    /// cursors allow; or, found by an opener alone on the file, any stamp no protocol step
    /// leaves there): the cursors and the slots come from different states (a machine crash
    /// under a queue on a disk file system writes back the header and slot pages
    /// separately), or a stamp was put back. The queue would stay empty or full for good.
    StampOffLap {
        /// The position.
        pos: u64,
        /// The stamp found in its slot.
        stamp: u64,
        /// The enqueue cursor.
        enqueue: u64,
        /// The dequeue cursor.
        dequeue: u64,
    },
}

/// A queue cannot be initialised in a region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum QueueInitError {
    /// The region is smaller than the geometry needs (`need` is `None` on overflow).
    RegionTooSmall {
        /// Bytes needed.
        need: Option<u64>,
        /// Bytes available.
        len: u64,
    },
    /// The geometry breaks a rule an attacher checks (a hand-built [`QueueGeometry`] whose
    /// capacity is not a power of two, say): the queue made from it could not be attached.
    ///
    /// [`QueueGeometry`]: super::QueueGeometry
    BadGeometry {
        /// What an attacher would refuse, as it would say it.
        reason: QueueAttachError,
    },
}

/// An item cannot be pushed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum PushError {
    /// Every slot holds an item nobody has popped yet.
    Full,
    /// The item is longer than the queue's item size.
    TooLong {
        /// Index of the item in the batch (0 for a single push).
        index: usize,
        /// Its length.
        len: usize,
        /// The queue's item size.
        max: u32,
    },
    /// The item is not exactly the item size of a queue whose items all have it (an MPMC
    /// queue, or a fixed-size SPSC queue).
    WrongLength {
        /// Index of the item in the batch (0 for a single push).
        index: usize,
        /// The length passed.
        len: usize,
        /// The queue's item size.
        expected: u32,
    },
    /// The claimed slot was healed (its producer was declared dead) before this push could
    /// publish: the item was not delivered. If the heal came before the copy began, nothing
    /// was written; a heal during [`MpmcQueue::write_claimed`]'s copy lets the rest of the
    /// copy land after it, possibly into the next lap's item (see the `mpmc` module docs).
    ///
    /// [`MpmcQueue::write_claimed`]: super::MpmcQueue::write_claimed
    Healed {
        /// The position that was healed.
        pos: u64,
    },
    /// The slot's stamp holds a value no protocol step writes, or a lap older than the
    /// enqueue cursor allows (a corrupt file).
    Corrupt {
        /// The position.
        pos: u64,
        /// The stamp found.
        word: u64,
    },
    /// SPSC: the dequeue cursor is ahead of the producer's tail or more than a lap behind
    /// it (a corrupt file, or a second producer), so the queue reads as full for good.
    CorruptCursors {
        /// The producer's tail (enqueue cursor).
        tail: u64,
        /// The dequeue cursor found.
        head: u64,
    },
    /// The position has not been claimed yet (it is ahead of the slot's lap).
    NotClaimed {
        /// The position passed.
        pos: u64,
        /// The slot's stamp.
        stamp: u64,
    },
    /// [`MpmcQueue::write_claimed`] was called again for a position it has published (or
    /// for one a push published), whose item is still in the queue: nothing was written.
    /// Once the item is popped, the slot no longer tells, and a second call reads as
    /// [`PushError::Healed`].
    ///
    /// [`MpmcQueue::write_claimed`]: super::MpmcQueue::write_claimed
    AlreadyPublished {
        /// The position passed.
        pos: u64,
    },
}

/// An item cannot be popped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum PopError {
    /// Nothing has been pushed that was not popped.
    Empty,
    /// The next position was claimed with `MpmcQueue::claim` by a producer that has not
    /// published it yet (possibly a dead producer: see `MpmcQueue::next_stuck_slot`). A
    /// `try_push` in flight reads as [`PopError::Empty`].
    Pending {
        /// The position waited on.
        pos: u64,
    },
    /// The destination buffer is shorter than the item.
    BufferTooSmall {
        /// Buffer length.
        len: usize,
        /// Bytes needed.
        need: usize,
    },
    /// A fixed-size pop found an item of another length (it was left in the queue), or a
    /// `try_pop_fixed` was given a buffer that is not exactly the item size (nothing was
    /// popped).
    LengthMismatch {
        /// The stored item's length; for `try_pop_fixed`, the buffer's.
        len: usize,
        /// The length asked for; for `try_pop_fixed`, the queue's item size.
        expected: usize,
    },
    /// The slot's control word holds a value no protocol step writes (a corrupt file), or,
    /// in an MPMC queue, a lap older than the dequeue cursor allows; the item was left in
    /// the queue.
    Corrupt {
        /// The position.
        pos: u64,
        /// The value found.
        word: u64,
    },
    /// SPSC: the enqueue cursor is behind the consumer's head or more than a lap ahead of
    /// it (a corrupt file, or a second consumer), so no item can be told ready; nothing was
    /// popped.
    CorruptCursors {
        /// The consumer's head (dequeue cursor).
        head: u64,
        /// The enqueue cursor found.
        tail: u64,
    },
}

/// A slot cannot be healed; nothing was changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum HealError {
    /// The position is 2^61 or more: no queue gets there (the `mpmc` module docs), and its
    /// stamps would collide with the flag bits.
    BadPosition {
        /// The position passed.
        pos: u64,
    },
    /// The position has not been claimed by any producer (it is at or past the enqueue
    /// cursor).
    NotClaimed {
        /// The position passed.
        pos: u64,
        /// The enqueue cursor.
        enqueue: u64,
    },
    /// Nobody holds the position: it is published (or healed) and waits for its consumer, or
    /// its slot was freed, or holds another lap; or consumers passed it unpublished, which
    /// only a corrupt file shows.
    NotStuck {
        /// The position passed.
        pos: u64,
        /// The stamp found.
        stamp: u64,
    },
    /// The position is held otherwise than the caller expected (the kind it was reported
    /// with): its holder is alive and moved on (a producer began its copy, or published and
    /// a consumer took the item), so the death the caller confirmed is not this holder's.
    KindChanged {
        /// The position passed.
        pos: u64,
        /// The kind the caller passed.
        expected: StuckKind,
        /// The kind found.
        found: StuckKind,
    },
}

impl fmt::Display for QueueGeometryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            QueueGeometryError::CapacityNotPowerOfTwo { capacity } => {
                write!(f, "capacity {capacity} is not a power of two")
            }
            QueueGeometryError::MpmcCapacityTooSmall { capacity } => {
                write!(f, "MPMC capacity {capacity} is below 2")
            }
            QueueGeometryError::BadItemSize { item_size: 0 } => f.write_str(
                "item size is 0: an item needs at least 1 byte (a zero-sized type cannot be queued)",
            ),
            QueueGeometryError::BadItemSize { item_size } => write!(
                f,
                "item size {item_size} is over the largest a queue takes ({})",
                super::layout::MAX_ITEM_SIZE
            ),
            QueueGeometryError::BadStride { stride, item_size } => write!(
                f,
                "slot stride {stride} is not a multiple of 8 from 8 + item size {item_size} up \
                 to {}",
                u32::MAX - 7
            ),
            QueueGeometryError::TooLarge {
                capacity,
                slot_stride,
            } => write!(
                f,
                "capacity {capacity} of {slot_stride}-byte slots does not fit in the address space"
            ),
        }
    }
}

impl fmt::Display for QueueAttachError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use QueueAttachError::*;
        match *self {
            TooShort { len } => write!(
                f,
                "file is {len} bytes, shorter than the 384-byte queue header"
            ),
            BadMagic { found: 0 } => write!(
                f,
                "magic is 0: not a queue, or its creation has not finished"
            ),
            BadMagic { found } => {
                write!(f, "bad queue magic {found:#018x}")?;
                // Naming the file kind the magic belongs to shows a wrong or swapped path.
                match crate::error::KnownMagic::of(found) {
                    Some(owner) => write!(f, " (the magic of {owner})"),
                    None => Ok(()),
                }
            }
            WrongKind { expected, found } => {
                write!(
                    f,
                    "the file holds an {} queue, not an {} queue",
                    found.name(),
                    expected.name()
                )
            }
            BadVersion { found } => write!(
                f,
                "queue version {found} is not supported (expected {})",
                super::layout::QUEUE_VERSION
            ),
            KindMismatch { kind } => write!(f, "kind field {kind} contradicts the magic"),
            BadCapacity { capacity, mask } => write!(
                f,
                "capacity {capacity} is not a power of two (at least 2 for MPMC) or mask {mask:#x} is not capacity - 1"
            ),
            BadStride { stride, item_size } => write!(
                f,
                "slot stride {stride} is not a multiple of 8 of at least 8 + item size {item_size}"
            ),
            BadFlags { flags } => write!(
                f,
                "flags {flags:#x}: unknown bits, or FIXED on an MPMC queue"
            ),
            BadSlotsOffset { offset } => write!(
                f,
                "slots_offset {offset} is below 384 or not a multiple of 64"
            ),
            SlotsPastEnd {
                end: Some(end),
                len,
            } => write!(
                f,
                "slots end at byte {end}, past the end of the file ({len} bytes)"
            ),
            SlotsPastEnd { end: None, len } => write!(
                f,
                "slots_offset + capacity * slot_stride overflows (file is {len} bytes)"
            ),
            ItemSizeMismatch { expected, found } => write!(
                f,
                "item size {found} does not match the item type's size {expected}"
            ),
            SchemaMismatch { expected, found } => write!(
                f,
                "schema signature {found:#018x} does not match the item type's {expected:#018x}"
            ),
            BadCursors {
                enqueue,
                dequeue,
                capacity,
            } => write!(
                f,
                "corrupt queue cursors: enqueue {enqueue}, dequeue {dequeue} (capacity \
                 {capacity}); a queue needs dequeue <= enqueue <= dequeue + capacity, both \
                 below 2^61"
            ),
            BadSpscCursors {
                enqueue,
                dequeue,
                capacity,
            } => write!(
                f,
                "corrupt SPSC queue cursors: enqueue {enqueue}, dequeue {dequeue} (capacity \
                 {capacity}); an SPSC queue needs enqueue - dequeue, modulo 2^64, at most the \
                 capacity"
            ),
            StampOffLap {
                pos,
                stamp,
                enqueue,
                dequeue,
            } => write!(
                f,
                "corrupt queue: the slot of position {pos} holds stamp {stamp:#x}, which no \
                 state with enqueue cursor {enqueue} and dequeue cursor {dequeue} leaves there \
                 (cursors and slots from different times, as after a machine crash)"
            ),
        }
    }
}

impl fmt::Display for QueueInitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            QueueInitError::RegionTooSmall {
                need: Some(need),
                len,
            } => write!(
                f,
                "region of {len} bytes is smaller than the {need} bytes the queue needs"
            ),
            QueueInitError::RegionTooSmall { need: None, len } => {
                write!(f, "queue size overflows (region is {len} bytes)")
            }
            QueueInitError::BadGeometry { reason } => write!(f, "invalid geometry: {reason}"),
        }
    }
}

impl fmt::Display for PushError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PushError::Full => f.write_str("queue is full"),
            PushError::TooLong { index, len, max } => write!(
                f,
                "item {index} is {len} bytes, longer than the queue's item size {max}"
            ),
            PushError::WrongLength {
                index,
                len,
                expected,
            } => write!(
                f,
                "item {index} is {len} bytes; this queue's items are exactly {expected}"
            ),
            PushError::Healed { pos } => write!(
                f,
                "position {pos} was healed before it was published: the item was not delivered"
            ),
            PushError::Corrupt { pos, word } => {
                write!(
                    f,
                    "slot of position {pos} holds an impossible stamp {word:#x}"
                )
            }
            PushError::CorruptCursors { tail, head } => write!(
                f,
                "the dequeue cursor {head} is not within a lap below the enqueue cursor {tail} \
                 (a corrupt queue file): nothing was pushed"
            ),
            PushError::NotClaimed { pos, stamp } => write!(
                f,
                "position {pos} is not claimed by this producer (stamp {stamp:#x})"
            ),
            PushError::AlreadyPublished { pos } => write!(
                f,
                "position {pos} is published already (write_claimed called twice for it?): \
                 nothing was written"
            ),
        }
    }
}

impl fmt::Display for PopError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PopError::Empty => f.write_str("queue is empty"),
            PopError::Pending { pos } => write!(f, "position {pos} is claimed but not published"),
            PopError::BufferTooSmall { len, need } => {
                write!(
                    f,
                    "buffer of {len} bytes is shorter than the {need}-byte item"
                )
            }
            PopError::LengthMismatch { len, expected } => {
                write!(f, "length mismatch: {len} bytes, expected {expected}")
            }
            PopError::Corrupt { pos, word } => {
                write!(
                    f,
                    "slot of position {pos} holds an impossible control word {word:#x}"
                )
            }
            PopError::CorruptCursors { head, tail } => write!(
                f,
                "the enqueue cursor {tail} is not within a lap ahead of the dequeue cursor {head} \
                 (a corrupt queue file): nothing was popped"
            ),
        }
    }
}

impl fmt::Display for HealError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            HealError::BadPosition { pos } => write!(
                f,
                "position {pos:#x} is not below 2^61, the limit of queue positions"
            ),
            HealError::NotClaimed { pos, enqueue } => write!(
                f,
                "position {pos} is not claimed (enqueue cursor is {enqueue})"
            ),
            HealError::NotStuck { pos, stamp } => write!(
                f,
                "position {pos} is held by no producer or consumer (stamp {stamp:#x})"
            ),
            HealError::KindChanged {
                pos,
                expected,
                found,
            } => write!(
                f,
                "position {pos} is now {found}, not {expected} as reported: its holder moved on"
            ),
        }
    }
}

impl core::error::Error for QueueGeometryError {}
impl core::error::Error for QueueAttachError {}
impl core::error::Error for QueueInitError {}
impl core::error::Error for PushError {}
impl core::error::Error for PopError {}
impl core::error::Error for HealError {}
