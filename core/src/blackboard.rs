//! The blackboard (spec §14): a table of `slot_count` values, one writer per key, any
//! readers, each slot guarded by a seqlock. A separate file type with its own magic.
//!
//! Layout: a 128-byte header (`magic` "ROBBGNIR", `version` 1, `value_size`, `slot_size`,
//! `slot_count`), then the slots at 128 with stride `slot_size` (64-byte multiples); each
//! slot is a seqlock word at +0 and the value at +8, or at its alignment when that is above
//! 8 (ringfire's `#[repr(C, align(64))]` slot, see [`value_offset`]). The value moves as relaxed 64-bit
//! words, so a racing reader copies garbage at worst, never races in the language's sense;
//! the seqlock re-check throws such a copy away.

use core::fmt;

use crate::region::Region;
use crate::sync::{A64, Ordering, fence};

/// Blackboard magic; reads "ROBBGNIR" on disk.
pub const BLACKBOARD_MAGIC: u64 = 0x5249_4E47_4242_4F52;
/// Blackboard version.
pub const BLACKBOARD_VERSION: u32 = 1;
/// Header size; slot 0 starts here.
pub const HEADER_SIZE: usize = 128;

/// Byte offsets of the header fields.
pub mod bb_hdr {
    /// `magic` (u64).
    pub const MAGIC: usize = 0;
    /// `version` (u32).
    pub const VERSION: usize = 8;
    /// `value_size` (u32).
    pub const VALUE_SIZE: usize = 12;
    /// `slot_size` (u32).
    pub const SLOT_SIZE: usize = 16;
    /// `slot_count` (u32).
    pub const SLOT_COUNT: usize = 20;
}

/// Slot stride for values of `value_size` bytes: `roundup(8 + value_size, 64)`, as the FFI,
/// Python and Rust (`#[repr(C, align(64))]` slot) producers all lay it out for values
/// aligned to at most 8. Overflows for `value_size` within 71 bytes of `usize::MAX`
/// ([`checked_slot_size`] says `None` there).
pub const fn slot_size(value_size: usize) -> usize {
    (8 + value_size).div_ceil(64) * 64
}

/// [`slot_size`], `None` when it does not fit in a `usize`.
pub const fn checked_slot_size(value_size: usize) -> Option<usize> {
    checked_slot_size_aligned(value_size, 8)
}

/// The largest value alignment a blackboard takes. Slots start at 128 (the header's size)
/// in a page-aligned mapping, so a value aligned above 128 would not sit at its alignment
/// (ringfire 0.5.2 then makes misaligned references).
pub const MAX_VALUE_ALIGN: usize = 128;

/// Offset of the value in its slot: 8 (after the seqlock) for a value aligned to at most 8,
/// else the value's alignment, where ringfire's `BlackboardSlot<V>` (`#[repr(C,
/// align(64))]`: the seqlock, then `V`) puts it.
pub const fn value_offset(value_align: usize) -> usize {
    if value_align > 8 { value_align } else { 8 }
}

/// Slot stride for values of `value_size` bytes aligned to `value_align` (a power of two):
/// `roundup(value_offset + value_size, max(64, value_align))`, the size of ringfire's
/// `BlackboardSlot<V>`; `None` when it does not fit in a `usize`. With `value_align <= 8`
/// it is [`slot_size`].
pub const fn checked_slot_size_aligned(value_size: usize, value_align: usize) -> Option<usize> {
    let unit = if value_align > 64 { value_align } else { 64 };
    match value_size.checked_add(value_offset(value_align)) {
        Some(n) => n.div_ceil(unit).checked_mul(unit),
        None => None,
    }
}

/// The largest `value_size` whose slot size fits the header's u32 `slot_size` field:
/// `roundup(8 + v, 64) <= u32::MAX` (the largest multiple of 64 in a u32 is `2^32 - 64`).
pub const MAX_VALUE_SIZE: u32 = u32::MAX - 63 - 8;

/// Bytes a blackboard of `slot_count` values of `value_size` bytes needs, `None` on
/// overflow.
pub const fn total_len(value_size: usize, slot_count: usize) -> Option<usize> {
    total_len_aligned(value_size, 8, slot_count)
}

/// [`total_len`] for values aligned to `value_align` (see [`checked_slot_size_aligned`]).
pub const fn total_len_aligned(
    value_size: usize,
    value_align: usize,
    slot_count: usize,
) -> Option<usize> {
    let Some(ss) = checked_slot_size_aligned(value_size, value_align) else {
        return None;
    };
    match ss.checked_mul(slot_count) {
        Some(s) => s.checked_add(HEADER_SIZE),
        None => None,
    }
}

/// Why a blackboard cannot be used, or an access was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum BlackboardError {
    /// The region is shorter than the header or than the layout needs.
    TooShort {
        /// Bytes needed.
        need: u64,
        /// Region length.
        len: u64,
    },
    /// `magic` is not the blackboard magic (0: creation not finished).
    BadMagic {
        /// The value found.
        found: u64,
    },
    /// `version` is not 1.
    BadVersion {
        /// The value found.
        found: u32,
    },
    /// `value_size` differs from the caller's value type.
    ValueSizeMismatch {
        /// The caller's size.
        expected: u32,
        /// The header's size.
        found: u32,
    },
    /// A value of `value_size` bytes needs a slot larger than the header's u32 `slot_size`
    /// can describe (above [`MAX_VALUE_SIZE`] for a value aligned to at most 8, a little less
    /// for one aligned above).
    ValueTooLarge {
        /// The value size asked for.
        value_size: u32,
    },
    /// A value alignment that is not a power of two or is above [`MAX_VALUE_ALIGN`].
    BadValueAlign {
        /// The alignment asked for.
        value_align: u32,
    },
    /// `slot_size` cannot hold the seqlock and the value (at its offset), or is not a
    /// multiple of 8.
    BadSlotSize {
        /// Header slot size.
        slot_size: u32,
        /// Header value size.
        value_size: u32,
    },
    /// `slot_size` is not the stride values of this size and alignment get: the board was
    /// written for a value type of another alignment, or by a foreign writer (ringfire's
    /// consumer refuses it too).
    SlotSizeMismatch {
        /// The stride the caller's value type gets.
        expected: u32,
        /// The header's slot size.
        found: u32,
        /// The caller's value alignment.
        value_align: u32,
    },
    /// A key at or beyond `slot_count`.
    KeyOutOfRange {
        /// The key.
        key: usize,
        /// The slot count.
        slot_count: u32,
    },
    /// A value buffer whose length is not `value_size`.
    ValueLen {
        /// Bytes given.
        len: usize,
        /// `value_size`.
        value_size: u32,
    },
}

impl fmt::Display for BlackboardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use BlackboardError::*;
        match *self {
            TooShort { need, len } => {
                write!(f, "file is {len} bytes, the blackboard needs {need}")
            }
            BadMagic { found } => {
                write!(
                    f,
                    "bad blackboard magic {found:#018x} (expected {BLACKBOARD_MAGIC:#018x})"
                )?;
                // Naming the file kind the magic belongs to shows a wrong or swapped path.
                match crate::error::KnownMagic::of(found) {
                    Some(owner) => write!(f, ": the magic of {owner}"),
                    None => Ok(()),
                }
            }
            BadVersion { found } => {
                write!(
                    f,
                    "blackboard version {found} is not supported (expected 1)"
                )
            }
            ValueSizeMismatch { expected, found } => write!(
                f,
                "value_size {found} does not match the value type's size {expected}"
            ),
            ValueTooLarge { value_size } => write!(
                f,
                "value_size {value_size} is too large: its slot would not fit the 32-bit slot_size (at most {MAX_VALUE_SIZE} for a value aligned to at most 8)"
            ),
            BadValueAlign { value_align } => write!(
                f,
                "value alignment {value_align} is not a power of two of at most {MAX_VALUE_ALIGN}"
            ),
            // Big enough but off the word grid: say which rule it breaks.
            BadSlotSize {
                slot_size,
                value_size,
            } if u64::from(slot_size) >= 8 + u64::from(value_size) => {
                write!(
                    f,
                    "slot_size {slot_size} (of {value_size}-byte values) is not a multiple of 8"
                )
            }
            BadSlotSize {
                slot_size,
                value_size,
            } => write!(
                f,
                "slot_size {slot_size} cannot hold a seqlock and a {value_size}-byte value"
            ),
            SlotSizeMismatch {
                expected,
                found,
                value_align,
            } => write!(
                f,
                "slot_size {found} is not the {expected} of the value type (aligned to {value_align}): written for a type of another alignment?"
            ),
            KeyOutOfRange { key, slot_count } => {
                write!(f, "key {key} is out of range (slot_count {slot_count})")
            }
            ValueLen { len, value_size } => {
                write!(f, "value of {len} bytes, the blackboard holds {value_size}")
            }
        }
    }
}

impl core::error::Error for BlackboardError {}

/// Outcome of one read attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TryRead {
    /// The copy is a consistent value.
    Value,
    /// The key was never written.
    Never,
    /// A write is in progress or raced the copy: retry. `seqlock` is the value seen; while
    /// it keeps changing the writer is making progress, and only an odd value that stays
    /// the same means a stalled writer.
    Busy {
        /// The seqlock value seen.
        seqlock: u64,
    },
}

/// A validated blackboard in a region.
#[derive(Clone, Debug)]
#[cfg_attr(not(loom), derive(Copy))]
pub struct Blackboard {
    region: Region,
    value_size: u32,
    /// Where the value starts in its slot ([`value_offset`]).
    value_off: u32,
    slot_size: u32,
    slot_count: u32,
}

/// `value_align` as a power of two of at most [`MAX_VALUE_ALIGN`].
fn check_align(value_align: u32) -> Result<(), BlackboardError> {
    if value_align.is_power_of_two() && value_align as usize <= MAX_VALUE_ALIGN {
        Ok(())
    } else {
        Err(BlackboardError::BadValueAlign { value_align })
    }
}

/// The value offset and slot size of values of `value_size` bytes aligned to
/// `value_align` ([`value_offset`], [`checked_slot_size_aligned`]); a slot size that does not
/// fit the header's u32 (or, on a 32-bit target, a usize) is `ValueTooLarge`.
fn layout(value_size: u32, value_align: u32) -> Result<(u32, u32), BlackboardError> {
    check_align(value_align)?;
    // `off` is at most MAX_VALUE_ALIGN.
    let off = value_offset(value_align as usize) as u32;
    checked_slot_size_aligned(value_size as usize, value_align as usize)
        .and_then(|ss| u32::try_from(ss).ok())
        .map(|ss| (off, ss))
        .ok_or(BlackboardError::ValueTooLarge { value_size })
}

/// The checks of [`Blackboard::attach`] past the value size: a slot size that holds the
/// seqlock and the value in whole words, and every slot inside `len` bytes.
fn check_slots(vs: u32, ss: u32, count: u32, len: u64) -> Result<(), BlackboardError> {
    if u64::from(ss) < 8 + u64::from(vs) || !ss.is_multiple_of(8) {
        return Err(BlackboardError::BadSlotSize {
            slot_size: ss,
            value_size: vs,
        });
    }
    let need = HEADER_SIZE as u64 + u64::from(ss) * u64::from(count);
    if need > len {
        return Err(BlackboardError::TooShort { need, len });
    }
    Ok(())
}

/// Whether the 128-byte `header` (its magic aside) describes a blackboard that a file of
/// `len` bytes holds, by the rules of [`Blackboard::attach`]: version, slot size, every slot
/// inside. A creator uses it to tell a blackboard whose creation never finished (header
/// written, the magic, stored last, still 0) from somebody's data with a zero first word.
pub fn header_describes(header: &[u8; HEADER_SIZE], len: u64) -> bool {
    let word = |off: usize| {
        u32::from_le_bytes([
            header[off],
            header[off + 1],
            header[off + 2],
            header[off + 3],
        ])
    };
    word(bb_hdr::VERSION) == BLACKBOARD_VERSION
        && check_slots(
            word(bb_hdr::VALUE_SIZE),
            word(bb_hdr::SLOT_SIZE),
            word(bb_hdr::SLOT_COUNT),
            len,
        )
        .is_ok()
}

fn le32(region: &Region, off: usize) -> u32 {
    let mut w = [0u8; 8];
    // SAFETY: callers checked that the region holds the 128-byte header; `off` is a header
    // offset, and its containing 8-aligned word is inside the header too.
    unsafe { region.read_words(off & !7, &mut w) };
    let i = off % 8;
    u32::from_le_bytes([w[i], w[i + 1], w[i + 2], w[i + 3]])
}

impl Blackboard {
    /// Initialises a blackboard of `slot_count` values of `value_size` bytes in `region`
    /// (which the caller holds exclusively): header with magic 0, zeroed slots, release
    /// fence, magic last. A `value_size` above [`MAX_VALUE_SIZE`] is
    /// [`BlackboardError::ValueTooLarge`]; a region shorter than the layout is
    /// [`BlackboardError::TooShort`] with the exact size needed (computed in u64, so it
    /// does not wrap on 32-bit targets).
    ///
    /// # Safety
    /// While this runs, nothing else may access the region's memory: no other view of it
    /// (a blackboard of this or another value size or slot count, a ring, a queue) and no
    /// other access may be in use, in this thread or another. Other processes and devices,
    /// outside the Rust abstract machine, are the caller's protocol concern, as for
    /// [`Region::from_raw_parts`]. After it returns, no view of the memory made before it
    /// for another layout (a blackboard of another value size or slot count, a ring, a
    /// queue) may be used again: the same bytes would then be accessed atomically at two
    /// sizes.
    pub unsafe fn init(
        region: Region,
        value_size: u32,
        slot_count: u32,
    ) -> Result<Blackboard, BlackboardError> {
        // SAFETY: the caller's guarantees, passed on.
        unsafe { Blackboard::init_aligned(region, value_size, 8, slot_count) }
    }

    /// [`Blackboard::init`] for values aligned to `value_align`: each value at
    /// [`value_offset`] in slots of [`checked_slot_size_aligned`] bytes, as ringfire lays
    /// out a `V` of that alignment. An alignment that is not a power of two or is above
    /// [`MAX_VALUE_ALIGN`] is [`BlackboardError::BadValueAlign`].
    ///
    /// # Safety
    /// As for [`Blackboard::init`].
    pub unsafe fn init_aligned(
        region: Region,
        value_size: u32,
        value_align: u32,
        slot_count: u32,
    ) -> Result<Blackboard, BlackboardError> {
        let (off, ss) = layout(value_size, value_align)?;
        // Cannot overflow: ss < 2^32, so ss * (2^32 - 1) + 128 < 2^64.
        let need = HEADER_SIZE as u64 + u64::from(ss) * u64::from(slot_count);
        let len = region.len() as u64;
        if need > len {
            return Err(BlackboardError::TooShort { need, len });
        }
        // `need <= len`, the length of a region in this address space.
        let need = need as usize;
        let mut h = [0u8; HEADER_SIZE];
        h[bb_hdr::VERSION..][..4].copy_from_slice(&BLACKBOARD_VERSION.to_le_bytes());
        h[bb_hdr::VALUE_SIZE..][..4].copy_from_slice(&value_size.to_le_bytes());
        h[bb_hdr::SLOT_SIZE..][..4].copy_from_slice(&ss.to_le_bytes());
        h[bb_hdr::SLOT_COUNT..][..4].copy_from_slice(&slot_count.to_le_bytes());
        // SAFETY: the region holds `need >= 128` bytes and is ours during init.
        unsafe {
            region.write_words(0, &h);
            region.zero_words(HEADER_SIZE, need - HEADER_SIZE);
        }
        // Everything above happens-before an attacher's acquire of the magic.
        fence(Ordering::Release);
        // SAFETY: offset 0 is 8-aligned and inside the header.
        unsafe { region.a64(bb_hdr::MAGIC) }.store(BLACKBOARD_MAGIC, Ordering::Release);
        Ok(Blackboard {
            region,
            value_size,
            value_off: off,
            slot_size: ss,
            slot_count,
        })
    }

    /// Attaches to an initialised blackboard, checking magic, version, the value size (if
    /// the caller knows it), the slot size and that every slot lies inside the region.
    /// Values are read at +8: for a value type aligned above 8 use
    /// [`Blackboard::attach_aligned`]. (The header holds no alignment, so a board of such
    /// values attached here reads the wrong bytes; with `None`, only to look at seqlocks.)
    pub fn attach(region: Region, value_size: Option<u32>) -> Result<Blackboard, BlackboardError> {
        let len = region.len() as u64;
        if len < HEADER_SIZE as u64 {
            return Err(BlackboardError::TooShort {
                need: HEADER_SIZE as u64,
                len,
            });
        }
        // SAFETY: the region holds the header (checked above).
        let magic = unsafe { region.a64(bb_hdr::MAGIC) }.load(Ordering::Acquire);
        if magic != BLACKBOARD_MAGIC {
            return Err(BlackboardError::BadMagic { found: magic });
        }
        let version = le32(&region, bb_hdr::VERSION);
        if version != BLACKBOARD_VERSION {
            return Err(BlackboardError::BadVersion { found: version });
        }
        let vs = le32(&region, bb_hdr::VALUE_SIZE);
        if let Some(want) = value_size
            && want != vs
        {
            return Err(BlackboardError::ValueSizeMismatch {
                expected: want,
                found: vs,
            });
        }
        let ss = le32(&region, bb_hdr::SLOT_SIZE);
        let count = le32(&region, bb_hdr::SLOT_COUNT);
        check_slots(vs, ss, count, len)?;
        Ok(Blackboard {
            region,
            value_size: vs,
            value_off: 8,
            slot_size: ss,
            slot_count: count,
        })
    }

    /// [`Blackboard::attach`] for values of `value_size` bytes aligned to `value_align`,
    /// read at [`value_offset`]. The slot size must be the one [`Blackboard::init_aligned`]
    /// gives them, as ringfire's consumer requires ([`BlackboardError::SlotSizeMismatch`]).
    /// An alignment that is not a power of two or is above [`MAX_VALUE_ALIGN`] is
    /// [`BlackboardError::BadValueAlign`]; a value too large for any slot,
    /// [`BlackboardError::ValueTooLarge`].
    pub fn attach_aligned(
        region: Region,
        value_size: u32,
        value_align: u32,
    ) -> Result<Blackboard, BlackboardError> {
        let (off, ss) = layout(value_size, value_align)?;
        // The plain attach checks the header first: a slot under 8 + value_size bytes (or not
        // a multiple of 8) is BadSlotSize there; any other size but `ss` is a mismatch here.
        let mut bb = Blackboard::attach(region, Some(value_size))?;
        if bb.slot_size != ss {
            return Err(BlackboardError::SlotSizeMismatch {
                expected: ss,
                found: bb.slot_size,
                value_align,
            });
        }
        bb.value_off = off;
        Ok(bb)
    }

    /// Bytes per value.
    pub fn value_size(&self) -> u32 {
        self.value_size
    }

    /// Slot stride.
    pub fn slot_size(&self) -> u32 {
        self.slot_size
    }

    /// Number of keys.
    pub fn slot_count(&self) -> u32 {
        self.slot_count
    }

    fn slot(&self, key: usize, len: usize) -> Result<(usize, A64<'_>), BlackboardError> {
        if key >= self.slot_count as usize {
            return Err(BlackboardError::KeyOutOfRange {
                key,
                slot_count: self.slot_count,
            });
        }
        if len != self.value_size as usize {
            return Err(BlackboardError::ValueLen {
                len,
                value_size: self.value_size,
            });
        }
        let off = HEADER_SIZE + key * self.slot_size as usize;
        // SAFETY: attach/init proved every slot inside the region; slot offsets are
        // multiples of 8 (128 + key * a multiple of 8).
        Ok((off, unsafe { self.region.a64(off) }))
    }

    /// Writes `value` (exactly `value_size` bytes) under `key`: odd seqlock, release fence,
    /// value words, release store of the next even value. One writer per key.
    pub fn write(&self, key: usize, value: &[u8]) -> Result<(), BlackboardError> {
        let (off, lock) = self.slot(key, value.len())?;
        // Relaxed: this key's single writer is the only one that stores the seqlock.
        let s = lock.load(Ordering::Relaxed);
        // A counter about to overflow (only a corrupt file holds one) restarts at 1 (never 0,
        // which means "never written").
        let w = if s >= u64::MAX - 2 {
            1
        } else if s.is_multiple_of(2) {
            s + 1
        } else {
            s + 2
        };
        // Relaxed: the release fence below orders it before the value stores.
        lock.store(w, Ordering::Relaxed);
        // A reader that sees any new value word also sees the odd seqlock.
        fence(Ordering::Release);
        // SAFETY: [off + value_off, off + value_off + value_size) and its rounded-up last
        // word lie inside the slot (slot_size >= value_off + value_size, a multiple of 8;
        // value_off is 8 or a power of two above); the writer owns the key.
        unsafe {
            self.region
                .write_words(off + self.value_off as usize, value)
        };
        // Release: a reader that acquires the even value sees the whole value.
        lock.store(w + 1, Ordering::Release);
        Ok(())
    }

    /// The seqlock word of `key` (0: never written; odd: a write in progress, or a writer
    /// that died in one). For tools that look at a board without reading values.
    pub fn seqlock(&self, key: usize) -> Result<u64, BlackboardError> {
        let (_, lock) = self.slot(key, self.value_size as usize)?;
        // Relaxed: a diagnosis; no value is read through it.
        Ok(lock.load(Ordering::Relaxed))
    }

    /// One read attempt of `key` into `dst` (exactly `value_size` bytes).
    pub fn try_read(&self, key: usize, dst: &mut [u8]) -> Result<TryRead, BlackboardError> {
        let (off, lock) = self.slot(key, dst.len())?;
        // Acquire: pairs with the writer's release of the even value.
        let s1 = lock.load(Ordering::Acquire);
        if s1 == 0 {
            return Ok(TryRead::Never);
        }
        if !s1.is_multiple_of(2) {
            return Ok(TryRead::Busy { seqlock: s1 });
        }
        // SAFETY: as in write.
        unsafe { self.region.read_words(off + self.value_off as usize, dst) };
        // Acquire fence: a value word from a later write makes the re-check see its seqlock.
        fence(Ordering::Acquire);
        let s2 = lock.load(Ordering::Relaxed);
        Ok(if s2 == s1 {
            TryRead::Value
        } else {
            TryRead::Busy { seqlock: s2 }
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::testutil::{Word, words};

    /// A ring's or a queue's path given to a blackboard reader is named for what it is, as
    /// a blackboard's given to a ring reader is; the message gave the hex magic alone.
    #[test]
    fn a_foreign_magic_names_its_file_kind() {
        let ring = BlackboardError::BadMagic {
            found: crate::layout::RING_MAGIC,
        };
        assert!(
            ring.to_string().ends_with(": the magic of a ring file"),
            "{ring}"
        );
        let queue = crate::queue::QueueKind::Spsc.magic();
        let queue = BlackboardError::BadMagic { found: queue };
        assert!(
            queue.to_string().contains(": the magic of a ringwire"),
            "{queue}"
        );
        let other = BlackboardError::BadMagic { found: 7 }.to_string();
        assert!(!other.contains("the magic of"), "{other}");
    }

    fn region(buf: &mut [Word]) -> Region {
        // SAFETY: the buffer outlives the region in each test and nothing else touches it.
        unsafe { Region::from_raw_parts(buf.as_mut_ptr().cast(), buf.len() * 8) }.unwrap()
    }

    /// [`Blackboard::init`] on a region of a test's own buffer.
    fn init(r: Region, value_size: u32, slot_count: u32) -> Result<Blackboard, BlackboardError> {
        // SAFETY: every test passes a region of its own buffer, used in one thread and only
        // as a blackboard: nothing else accesses it while this runs, and no view of another
        // layout exists.
        unsafe { Blackboard::init(r, value_size, slot_count) }
    }

    #[test]
    fn corrupt_seqlock_near_the_top_restarts() {
        // Found by fuzz/fuzz_targets/region.rs: a scribbled seqlock of u64::MAX overflowed
        // the writer's `s + 2`.
        let mut buf = words(total_len(8, 1).unwrap() / 8);
        let r = region(&mut buf);
        let bb = init(r, 8, 1).unwrap();
        let (_, lock) = bb.slot(0, 8).unwrap();
        for s in [u64::MAX, u64::MAX - 1, u64::MAX - 2] {
            lock.store(s, Ordering::Relaxed);
            bb.write(0, &[7; 8]).unwrap();
            assert_eq!(lock.load(Ordering::Relaxed), 2);
            let mut d = [0u8; 8];
            assert_eq!(bb.try_read(0, &mut d), Ok(TryRead::Value));
            assert_eq!(d, [7; 8]);
        }
    }

    #[test]
    fn layout_write_read_and_errors() {
        assert_eq!(slot_size(8), 64);
        assert_eq!(slot_size(57), 128);
        let mut buf = words(total_len(16, 4).unwrap() / 8);
        let r = region(&mut buf);
        let bb = init(r, 16, 4).unwrap();
        let a = Blackboard::attach(r, Some(16)).unwrap();
        let mut out = [0u8; 16];
        assert_eq!(a.try_read(2, &mut out), Ok(TryRead::Never));
        bb.write(2, &[7u8; 16]).unwrap();
        assert_eq!(a.try_read(2, &mut out), Ok(TryRead::Value));
        assert_eq!(out, [7u8; 16]);
        bb.write(2, &[9u8; 16]).unwrap();
        assert_eq!(a.try_read(2, &mut out), Ok(TryRead::Value));
        assert_eq!(out, [9u8; 16]);
        assert_eq!(
            a.try_read(4, &mut out),
            Err(BlackboardError::KeyOutOfRange {
                key: 4,
                slot_count: 4
            })
        );
        assert_eq!(
            Blackboard::attach(r, Some(8)).unwrap_err(),
            BlackboardError::ValueSizeMismatch {
                expected: 8,
                found: 16
            }
        );
        // An odd seqlock (writer mid-update) reads as busy.
        // SAFETY: slot 1's seqlock is inside the buffer.
        unsafe { r.a64(HEADER_SIZE + 64) }.store(3, Ordering::Relaxed);
        assert_eq!(a.try_read(1, &mut out), Ok(TryRead::Busy { seqlock: 3 }));
        // Header bytes as the spec gives them.
        // The magic is a native word (it spells "ROBBGNIR" on a little-endian host); the
        // u32 fields are stored little-endian on every host.
        let bytes: &[u8] = zerocopy::IntoBytes::as_bytes(&buf[..3]);
        assert_eq!(&bytes[0..8], &BLACKBOARD_MAGIC.to_ne_bytes());
        if cfg!(target_endian = "little") {
            assert_eq!(&bytes[0..8], b"ROBBGNIR");
        }
        assert_eq!(
            &bytes[8..24],
            &[1, 0, 0, 0, 16, 0, 0, 0, 64, 0, 0, 0, 4, 0, 0, 0]
        );
    }

    #[test]
    fn oversized_values_are_refused_precisely() {
        // From a review: `8 + value_size` overflowed in usize on 32-bit targets (a debug
        // panic, a wrapped size in release), and on 64-bit a slot size past u32::MAX was
        // reported as TooShort.
        let mut buf = words(16);
        let r = region(&mut buf);
        for vs in [u32::MAX, u32::MAX - 7, u32::MAX - 8, MAX_VALUE_SIZE + 1] {
            assert_eq!(
                init(r, vs, 1).unwrap_err(),
                BlackboardError::ValueTooLarge { value_size: vs }
            );
        }
        // The largest value the header can describe: slot 2^32 - 64, too big for this region,
        // the size needed exact (u64 arithmetic, no wrap on 32-bit targets).
        let ss = (1u64 << 32) - 64;
        assert_eq!(
            init(r, MAX_VALUE_SIZE, 1).unwrap_err(),
            BlackboardError::TooShort {
                need: 128 + ss,
                len: 128
            }
        );
        assert_eq!(
            init(r, MAX_VALUE_SIZE, u32::MAX).unwrap_err(),
            BlackboardError::TooShort {
                need: 128 + ss * u64::from(u32::MAX),
                len: 128
            }
        );
        assert_eq!(
            checked_slot_size(MAX_VALUE_SIZE as usize),
            Some(ss as usize)
        );
        assert_eq!(checked_slot_size(57), Some(128));
        assert_eq!(checked_slot_size(usize::MAX - 7), None);
        assert_eq!(checked_slot_size(usize::MAX), None);
        assert_eq!(total_len(usize::MAX, 1), None);
        // An empty blackboard of zero-sized values still has its header and slot stride.
        let bb = init(r, 0, 0).unwrap();
        assert_eq!((bb.slot_size(), bb.slot_count()), (64, 0));
    }

    #[test]
    fn values_aligned_above_8_sit_at_their_alignment() {
        // ringfire's BlackboardSlot<V> is #[repr(C, align(64))] { seqlock: u64, value: V }.
        assert_eq!(
            (value_offset(1), value_offset(8), value_offset(16)),
            (8, 8, 16)
        );
        assert_eq!(checked_slot_size_aligned(16, 8), Some(64));
        assert_eq!(checked_slot_size_aligned(16, 16), Some(64));
        assert_eq!(checked_slot_size_aligned(48, 16), Some(64));
        assert_eq!(checked_slot_size_aligned(64, 16), Some(128));
        assert_eq!(checked_slot_size_aligned(64, 64), Some(128));
        assert_eq!(checked_slot_size_aligned(128, 128), Some(256));
        assert_eq!(total_len_aligned(48, 16, 3), Some(128 + 3 * 64));
        let mut buf = words(total_len_aligned(48, 16, 2).unwrap() / 8);
        let r = region(&mut buf);
        // SAFETY: as `init`'s: the test's own buffer, nothing else uses it.
        let bb = unsafe { Blackboard::init_aligned(r, 48, 16, 2) }.unwrap();
        assert_eq!(bb.slot_size(), 64);
        bb.write(1, &[5u8; 48]).unwrap();
        let a = Blackboard::attach_aligned(r, 48, 16).unwrap();
        let mut out = [0u8; 48];
        assert_eq!(a.try_read(1, &mut out), Ok(TryRead::Value));
        assert_eq!(out, [5u8; 48]);
        // Slot 1 at 192: the seqlock, 8 untouched bytes, the value at +16.
        let bytes: &[u8] = zerocopy::IntoBytes::as_bytes(&buf[..]);
        assert_eq!(&bytes[192..200], &2u64.to_ne_bytes());
        assert_eq!(&bytes[200..208], &[0u8; 8]);
        assert_eq!(&bytes[208..256], &[5u8; 48]);
        // 48 bytes aligned to 64 would take 128-byte slots.
        assert_eq!(
            Blackboard::attach_aligned(r, 48, 64).unwrap_err(),
            BlackboardError::SlotSizeMismatch {
                expected: 128,
                found: 64,
                value_align: 64
            }
        );
        for value_align in [0, 3, 256] {
            assert_eq!(
                Blackboard::attach_aligned(r, 48, value_align).unwrap_err(),
                BlackboardError::BadValueAlign { value_align }
            );
        }
        // A value too large for the header's slot_size at its offset.
        assert_eq!(
            layout(MAX_VALUE_SIZE, 16).unwrap_err(),
            BlackboardError::ValueTooLarge {
                value_size: MAX_VALUE_SIZE
            }
        );
    }

    #[test]
    fn hostile_headers_are_refused() {
        let mut buf = words(64);
        let r = region(&mut buf);
        init(r, 8, 2).unwrap();
        // slot_count far past the end. The header's u32 fields are little-endian, so a word
        // holding (slot_size, slot_count) is the little-endian form of `size | count << 32`.
        // SAFETY: word 2 (bytes 16..24: slot_size, slot_count) is in the header.
        unsafe { r.a64(16) }.store((64 | (1000u64 << 32)).to_le(), Ordering::Relaxed);
        assert!(matches!(
            Blackboard::attach(r, None),
            Err(BlackboardError::TooShort { .. })
        ));
        // 2^28 slots of 16 bytes need 2^32 + 128 bytes: 128 once the product is narrowed
        // to a 32-bit usize. It is made in u64 (this runs under Miri on i686 too).
        // SAFETY: as above.
        unsafe { r.a64(16) }.store((16 | (1u64 << 60)).to_le(), Ordering::Relaxed);
        assert_eq!(
            Blackboard::attach(r, None).unwrap_err(),
            BlackboardError::TooShort {
                need: 128 + (1 << 32),
                len: 512
            }
        );
        // slot_size too small for the value.
        // SAFETY: as above.
        unsafe { r.a64(16) }.store((8 | (2u64 << 32)).to_le(), Ordering::Relaxed);
        assert_eq!(
            Blackboard::attach(r, None).unwrap_err(),
            BlackboardError::BadSlotSize {
                slot_size: 8,
                value_size: 8
            }
        );
    }

    /// A slot size large enough for the value but not a multiple of 8 was refused as
    /// "slot_size 76 cannot hold a seqlock and a 8-byte value", which it can: the message
    /// gave the wrong reason for the one it was refused for.
    #[test]
    fn a_slot_size_not_a_multiple_of_8_is_named_so() {
        use std::string::ToString;
        let mut buf = words(64);
        let r = region(&mut buf);
        init(r, 8, 2).unwrap();
        // SAFETY: word 2 (bytes 16..24: slot_size, slot_count) is in the header.
        unsafe { r.a64(16) }.store((76 | (2u64 << 32)).to_le(), Ordering::Relaxed);
        let e = Blackboard::attach(r, None).unwrap_err();
        assert_eq!(
            e,
            BlackboardError::BadSlotSize {
                slot_size: 76,
                value_size: 8
            }
        );
        assert_eq!(
            e.to_string(),
            "slot_size 76 (of 8-byte values) is not a multiple of 8"
        );
        let e = BlackboardError::BadSlotSize {
            slot_size: 12,
            value_size: 8,
        };
        assert_eq!(
            e.to_string(),
            "slot_size 12 cannot hold a seqlock and a 8-byte value"
        );
    }
}
