//! Where the parts of a ring lie in its region (spec §3, §4.1) and the attach-time checks
//! that prove those parts fit (spec §1.3).

use super::{Flags, RingHeader, arena_off, hdr, reg, round_up};
use crate::error::{AttachError, GeometryError};

/// `w - cap + 1` when `w >= cap`, else 1: the oldest sequence a ring whose newest published
/// message is `w` can still hold. Saturates at `u64::MAX` (only `cap == 0`, which no ring
/// has, could reach it).
#[inline(always)]
pub const fn oldest_retained(w: u64, cap: u64) -> u64 {
    if w >= cap {
        (w - cap).saturating_add(1)
    } else {
        1
    }
}

/// Whether a slot holding the sequence `seen` (a later one than the record a reader asked
/// for) can be a later lap's write, `w` being `write_seq` loaded after the slot was read
/// (on an MPMC-flagged ring, the larger of it and a `claim_seq` below `SEQ_LIMIT`, loaded
/// after too, for the tickets in flight:
/// [`RingView::newest_writable`](crate::RingView::newest_writable)): no writer stores a
/// sequence at or past [`SEQ_LIMIT`](super::SEQ_LIMIT), nor more than a lap past `w` (a
/// producer's batch fills at most the ring before it publishes, and an MPMC ticket is below
/// `claim_seq`). A slot holding any other value is corrupt: read as a lap, it moved a reader
/// to that value's oldest retained record, which the ring never reaches, and the reader got
/// nothing more. Readers take such a record as lost once published, and as not written yet
/// before. A `w` at or past `SEQ_LIMIT` is a corrupt header, against which no slot can be
/// judged: true. (A mirror does store more than a lap past `write_seq`: it publishes once
/// per DATA frame, and a frame may hold more records than the ring. A record behind the
/// oldest that `w` leaves in the ring is gone whatever its slot holds, so readers skip to
/// that oldest record there.)
#[inline]
pub const fn lap_possible(seen: u64, w: u64, cap: u64) -> bool {
    w >= super::SEQ_LIMIT || (seen < super::SEQ_LIMIT && seen <= w.saturating_add(cap))
}

/// What a reader makes of record `seq` whose slot holds the later sequence `seen`
/// ([`later_seq`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum LaterSeq {
    /// A later lap's write ([`lap_possible`]): the §4.3 lap rule applies, the reader
    /// moving to `oldest_retained(max(write_seq, seen), C)` when that is past `seq`.
    Lap,
    /// No lap could have stored `seen`, but `seq` is behind `oldest`, the oldest record
    /// that `write_seq` leaves in the ring: overwritten whatever its slot holds (a mirror's
    /// frame longer than the ring, written before its one publish). Resume at `oldest`.
    Behind {
        /// `oldest_retained(write_seq, C)`, greater than `seq`.
        oldest: u64,
    },
    /// A corrupt slot at a published sequence still in the ring: the record alone is lost,
    /// and the next one is read after it.
    Lost,
    /// Not published yet: its writer stores the right sequence there when it writes it.
    NotYet,
}

/// The lap rule for record `seq` whose slot holds the later sequence `seen`, `w` being
/// `write_seq` loaded after the slot and `newest` the newest sequence a writer may have
/// stored then (`w`, or on an MPMC-flagged ring the larger of it and `claim_seq`:
/// [`RingView::newest_writable`](crate::RingView::newest_writable)), both as
/// [`lap_possible`] takes them. One rule for every reader of a ring (the replication
/// source, [`read_record`](crate::broadcast::raw::read_record), the consumer and the blob
/// reader), so that they skip the same records.
#[inline]
pub const fn later_seq(seq: u64, seen: u64, w: u64, newest: u64, cap: u64) -> LaterSeq {
    if lap_possible(seen, newest, cap) {
        return LaterSeq::Lap;
    }
    let oldest = oldest_retained(w, cap);
    if seq < oldest {
        LaterSeq::Behind { oldest }
    } else if seq <= w {
        LaterSeq::Lost
    } else {
        LaterSeq::NotYet
    }
}

/// Slot stride for a payload of `size` bytes aligned to `align` (spec §4.1). A stride that
/// does not fit in a `usize` (no Rust type is that large) saturates at `usize::MAX`, which
/// every [`Geometry`] constructor refuses ([`GeometryError::BadStride`]).
pub const fn slot_stride(size: usize, align: usize) -> usize {
    // The payload starts at `unit` (8, or the alignment of an over-aligned type).
    let unit = if align <= 8 { 8 } else { align };
    match unit.checked_add(size) {
        Some(n) => match n.div_ceil(unit).checked_mul(unit) {
            Some(stride) => stride,
            None => usize::MAX,
        },
        None => usize::MAX,
    }
}

/// Offset of the payload inside a slot: 8, or `align` for over-aligned types.
pub const fn slot_payload_offset(align: usize) -> usize {
    if align <= 8 { 8 } else { align }
}

/// The shape of a ring: every number needed to find its parts. This is what a mirror copies
/// from GEOMETRY and what attach validates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Geometry {
    /// Number of slots (a power of two).
    pub capacity: u64,
    /// Slot stride in bytes, including the sequence word.
    pub element_size: u32,
    /// Header flags.
    pub flags: Flags,
    /// Schema signature, 0 = unverified.
    pub schema_sig: u64,
    /// Offset of the registry (0 = none).
    pub registry_offset: u32,
    /// Number of registry slots.
    pub registry_count: u32,
    /// Offset of slot 0.
    pub slots_offset: u64,
    /// Offset of the arena header (0 = none).
    pub arena_offset: u64,
    /// Arena data capacity (0 = none).
    pub arena_size: u64,
}

/// Registry slots a lossless ring gets when none were asked for (spec §3).
pub const DEFAULT_MAX_READERS: u32 = 32;

const fn check_cap_stride(capacity: u64, stride: usize) -> Result<u32, GeometryError> {
    if !capacity.is_power_of_two() {
        return Err(GeometryError::CapacityNotPowerOfTwo { capacity });
    }
    if stride < 8 || !stride.is_multiple_of(8) || stride > u32::MAX as usize {
        return Err(GeometryError::BadStride {
            stride: stride as u64,
        });
    }
    Ok(stride as u32)
}

/// The error for a ring of `capacity` slots of `stride` bytes (and an arena of `arena_size`)
/// that does not fit in the address space.
const fn too_large(capacity: u64, stride: u32, arena_size: u64) -> GeometryError {
    GeometryError::TooLarge {
        capacity,
        stride: stride as u64,
        arena_size,
    }
}

/// `g` if the whole ring fits in the address space: at most `isize::MAX` bytes, the most a
/// [`Region`](crate::Region) holds (2 GiB on a 32-bit target), else
/// [`GeometryError::TooLarge`].
const fn sized(g: Geometry) -> Result<Geometry, GeometryError> {
    match g.total_len() {
        Some(n) if n <= isize::MAX as u64 => Ok(g),
        _ => Err(g.too_large()),
    }
}

/// Refuses a slot alignment that is not a power of two: `round_up` to it would give a
/// `slots_offset` that is not a multiple of it, which a reader of that alignment refuses.
/// Refuses too a `stride` that is not a multiple of an alignment over 8 (strides are
/// multiples of 8 already): slots after the first would be misaligned.
const fn check_slot_align(slot_align: usize, stride: usize) -> Result<(), GeometryError> {
    if slot_align != 0 && !slot_align.is_power_of_two() {
        return Err(GeometryError::BadSlotAlign {
            slot_align: slot_align as u64,
        });
    }
    if slot_align > 8 && !stride.is_multiple_of(slot_align) {
        return Err(GeometryError::StrideNotAligned {
            stride: stride as u64,
            slot_align: slot_align as u64,
        });
    }
    Ok(())
}

impl Geometry {
    /// A single-writer broadcast ring of fixed records (ringfire `RingProducer`).
    ///
    /// `readers` registry slots are reserved; a lossless ring with 0 gets 32. `slot_align`
    /// (the record type's alignment) must be a power of two, or 0 (taken as 8); when over 8,
    /// `stride` must be a multiple of it ([`GeometryError::StrideNotAligned`]), as
    /// [`slot_stride`] makes it.
    ///
    /// A ring larger than the address space (`isize::MAX` bytes, 2 GiB on a 32-bit target)
    /// is [`GeometryError::TooLarge`], so [`Geometry::total_len`] of a geometry made here
    /// fits in a `usize`. A `const fn`, so firmware can size a ring's static buffer at
    /// compile time:
    ///
    /// ```
    /// use ringwire_core::Geometry;
    /// const BYTES: usize = match Geometry::spmc(64, 32, 8, 0, false) {
    ///     Ok(g) => match g.total_len() {
    ///         Some(n) => n as usize,
    ///         None => panic!("too large"),
    ///     },
    ///     Err(_) => panic!("bad geometry"),
    /// };
    /// static RING: [u64; BYTES / 8] = [0; BYTES / 8];
    /// assert_eq!(BYTES, 128 + 64 * 32);
    /// # let _ = &RING;
    /// ```
    pub const fn spmc(
        capacity: u64,
        stride: usize,
        slot_align: usize,
        readers: u32,
        lossless: bool,
    ) -> Result<Geometry, GeometryError> {
        let element_size = match check_cap_stride(capacity, stride) {
            Ok(e) => e,
            Err(e) => return Err(e),
        };
        if let Err(e) = check_slot_align(slot_align, stride) {
            return Err(e);
        }
        let n = if lossless && readers == 0 {
            DEFAULT_MAX_READERS
        } else {
            readers
        };
        let mut flags = Flags::MODE_SPMC
            | if lossless {
                Flags::POLICY_LOSSLESS_BACKPRESSURE
            } else {
                Flags::POLICY_LATEST_WINS
            };
        if n > 0 {
            flags |= Flags::WITH_REGISTRY;
        }
        let align = if slot_align > 64 { slot_align } else { 64 } as u64;
        let Some(slots_offset) = round_up(hdr::SIZE as u64 + 64 * n as u64, align) else {
            return Err(too_large(capacity, element_size, 0));
        };
        let g = Geometry {
            capacity,
            element_size,
            flags: Flags(flags),
            schema_sig: 0,
            registry_offset: if n > 0 { hdr::SIZE as u32 } else { 0 },
            registry_count: n,
            slots_offset,
            arena_offset: 0,
            arena_size: 0,
        };
        sized(g)
    }

    /// A broadcast ring of blob descriptors with a byte arena (ringfire `BlobProducer`).
    /// A `const fn`, like [`Geometry::spmc`], to size a static buffer at compile time.
    pub const fn blob(
        capacity: u64,
        stride: usize,
        readers: u32,
        arena_size: u64,
    ) -> Result<Geometry, GeometryError> {
        let element_size = match check_cap_stride(capacity, stride) {
            Ok(e) => e,
            Err(e) => return Err(e),
        };
        if stride < 8 + 16 {
            return Err(GeometryError::BadStride {
                stride: stride as u64,
            });
        }
        if !arena_size.is_power_of_two() || arena_size < 64 {
            return Err(GeometryError::ArenaSize { arena_size });
        }
        let too_large = too_large(capacity, element_size, arena_size);
        // At most 128 + 64 * (2^32 - 1): neither the sum nor its rounding overflows.
        let Some(slots_offset) = round_up(hdr::SIZE as u64 + 64 * readers as u64, 128) else {
            return Err(too_large);
        };
        let Some(slots_end) = Geometry::end_of(capacity, element_size, slots_offset) else {
            return Err(too_large);
        };
        let Some(arena_offset) = round_up(slots_end, 128) else {
            return Err(too_large);
        };
        let flags =
            Flags::MODE_SPMC | Flags::POLICY_LATEST_WINS | Flags::WITH_ARENA | Flags::WITH_REGISTRY;
        sized(Geometry {
            capacity,
            element_size,
            flags: Flags(flags),
            schema_sig: 0,
            registry_offset: hdr::SIZE as u32,
            registry_count: readers,
            slots_offset,
            arena_offset,
            arena_size,
        })
    }

    /// A multi-producer ring (ringfire `MpmcProducer`, spec §8). `slot_align` must be a power
    /// of two, or 0 (taken as 8), and `stride` a multiple of it when over 8, as for
    /// [`Geometry::spmc`]. A `const fn`, like [`Geometry::spmc`].
    pub const fn mpmc(
        capacity: u64,
        stride: usize,
        slot_align: usize,
    ) -> Result<Geometry, GeometryError> {
        let element_size = match check_cap_stride(capacity, stride) {
            Ok(e) => e,
            Err(e) => return Err(e),
        };
        if let Err(e) = check_slot_align(slot_align, stride) {
            return Err(e);
        }
        let align = if slot_align > 8 { slot_align } else { 8 };
        let Some(slots_offset) = round_up(hdr::SIZE as u64, align as u64) else {
            return Err(too_large(capacity, element_size, 0));
        };
        sized(Geometry {
            capacity,
            element_size,
            flags: Flags(Flags::MODE_MPMC | Flags::POLICY_LATEST_WINS),
            schema_sig: 0,
            registry_offset: 0,
            registry_count: 0,
            slots_offset,
            arena_offset: 0,
            arena_size: 0,
        })
    }

    /// The error for a ring of this geometry that does not fit in the address space (its
    /// [`Geometry::total_len`] is `None` or above `isize::MAX`), naming its capacity, stride
    /// and arena.
    pub const fn too_large(&self) -> GeometryError {
        too_large(self.capacity, self.element_size, self.arena_size)
    }

    /// The same geometry with a schema signature.
    pub const fn with_schema(mut self, sig: u64) -> Geometry {
        self.schema_sig = sig;
        self
    }

    /// `capacity - 1` (wrapping: a hand-built capacity of 0, which init and attach refuse,
    /// gives `u64::MAX` instead of an overflow panic).
    #[inline(always)]
    pub const fn mask(&self) -> u64 {
        self.capacity.wrapping_sub(1)
    }

    /// Payload bytes per record on the wire: `element_size - 8` (0 for a hand-built
    /// `element_size` under 8, which init and attach refuse, instead of an overflow panic).
    #[inline(always)]
    pub const fn record_len(&self) -> usize {
        (self.element_size as usize).saturating_sub(8)
    }

    /// True when the records are blob descriptors.
    #[inline(always)]
    pub const fn has_arena(&self) -> bool {
        self.arena_offset != 0
    }

    /// End of the slot array.
    pub const fn slots_end(&self) -> Option<u64> {
        Geometry::end_of(self.capacity, self.element_size, self.slots_offset)
    }

    /// `slots_offset + capacity * element_size`, `None` on overflow.
    const fn end_of(capacity: u64, element_size: u32, slots_offset: u64) -> Option<u64> {
        match capacity.checked_mul(element_size as u64) {
            Some(b) => b.checked_add(slots_offset),
            None => None,
        }
    }

    /// Bytes the whole ring needs: `arena_offset + 64 + arena_size` for blob rings, else the
    /// end of the slots. `None` on overflow.
    pub const fn total_len(&self) -> Option<u64> {
        if self.has_arena() {
            match self.arena_offset.checked_add(arena_off::SIZE as u64) {
                Some(a) => a.checked_add(self.arena_size),
                None => None,
            }
        } else {
            self.slots_end()
        }
    }

    /// Reads the geometry out of a header snapshot and runs spec §1.3 checks 3 and 5–10
    /// against a region of `len` bytes (`slot_align` is the reader's slot alignment, 8 for
    /// raw readers).
    pub fn from_header(h: &RingHeader, len: u64, slot_align: u64) -> Result<Geometry, AttachError> {
        if h.version != super::RING_VERSION {
            return Err(AttachError::BadVersion { found: h.version });
        }
        if h.element_size < 8 {
            return Err(AttachError::ElementSizeTooSmall {
                found: h.element_size,
            });
        }
        // Not in spec §1.3, but every stride of §4.1 is a multiple of 8 and slot sequence
        // words are 8-byte atomics: another value would make their accesses misaligned.
        if !h.element_size.is_multiple_of(8) {
            return Err(AttachError::ElementSizeMisaligned {
                found: h.element_size,
            });
        }
        if !h.capacity.is_power_of_two() {
            return Err(AttachError::CapacityNotPowerOfTwo { found: h.capacity });
        }
        if h.mask != h.capacity - 1 {
            return Err(AttachError::BadMask {
                capacity: h.capacity,
                mask: h.mask,
            });
        }
        // The slot sequence words are 8-byte atomics, so the offset must be a multiple of 8
        // whatever the reader's alignment: one that is not a power of two (12) has
        // multiples (132) that are not.
        let align = if h.slots_offset.is_multiple_of(8) {
            slot_align.max(8)
        } else {
            8
        };
        if h.slots_offset < hdr::SIZE as u64 || !h.slots_offset.is_multiple_of(align) {
            return Err(AttachError::BadSlotsOffset {
                offset: h.slots_offset,
                align,
            });
        }
        let g = Geometry {
            capacity: h.capacity,
            element_size: h.element_size,
            flags: Flags(h.flags),
            schema_sig: h.schema_sig,
            registry_offset: h.reader_registry_offset,
            registry_count: h.reader_registry_count,
            slots_offset: h.slots_offset,
            arena_offset: h.arena_offset,
            arena_size: h.arena_size,
        };
        match g.slots_end() {
            Some(end) if end <= len => {}
            end => return Err(AttachError::SlotsPastEnd { end, len }),
        }
        if g.registry_offset != 0 {
            if !g.registry_offset.is_multiple_of(64) {
                return Err(AttachError::RegistryMisaligned {
                    offset: g.registry_offset,
                });
            }
            let end = u64::from(g.registry_offset) + u64::from(g.registry_count) * reg::SIZE as u64;
            if end > len {
                return Err(AttachError::RegistryPastEnd { end, len });
            }
        }
        if g.arena_offset != 0 {
            if !g.arena_offset.is_multiple_of(64) {
                return Err(AttachError::ArenaMisaligned {
                    offset: g.arena_offset,
                });
            }
            match g.total_len() {
                Some(end) if end <= len => {}
                end => return Err(AttachError::ArenaPastEnd { end, len }),
            }
            // The reader also needs a sane arena to compute data indices (spec §10.1).
            if !g.arena_size.is_power_of_two() || g.arena_size < 64 || g.element_size < 24 {
                return Err(AttachError::BadArena {
                    arena_size: g.arena_size,
                    element_size: g.element_size,
                });
            }
        }
        // The registry and the arena must not overlap the header or the slots; a hostile
        // header could otherwise make two protocols share words.
        // Both proved above not to overflow.
        let slots_end = g.slots_end().unwrap_or(u64::MAX);
        let overlap = |what, start, end| AttachError::Overlap {
            what,
            start,
            end,
            slots_offset: g.slots_offset,
            slots_end,
        };
        if g.registry_offset != 0 && g.registry_count > 0 {
            let start = u64::from(g.registry_offset);
            let reg_end = start + u64::from(g.registry_count) * reg::SIZE as u64;
            if start < hdr::SIZE as u64 || reg_end > g.slots_offset {
                return Err(overlap("registry", start, reg_end));
            }
        }
        if g.arena_offset != 0 && g.arena_offset < slots_end {
            let end = g.total_len().unwrap_or(u64::MAX);
            return Err(overlap("arena", g.arena_offset, end));
        }
        Ok(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides() {
        assert_eq!(slot_stride(8, 8), 16);
        assert_eq!(slot_stride(4, 4), 16);
        assert_eq!(slot_stride(64, 1), 72);
        assert_eq!(slot_stride(24, 8), 32); // BlobPacket<u32>
        assert_eq!(slot_stride(32, 32), 64);
        assert_eq!(slot_payload_offset(32), 32);
    }

    #[test]
    fn oldest_retained_never_overflows() {
        assert_eq!(oldest_retained(0, 4), 1);
        assert_eq!(oldest_retained(4, 4), 1);
        assert_eq!(oldest_retained(5, 4), 2);
        assert_eq!(oldest_retained(u64::MAX, 1), u64::MAX);
        // A capacity of 0 (no ring has one) overflowed: a panic in debug builds.
        assert_eq!(oldest_retained(u64::MAX, 0), u64::MAX);
        assert_eq!(oldest_retained(7, 0), 8);
    }

    /// The lap rule's edges: a ring of one slot, a ring with nothing published, sequences
    /// and `write_seq` near `u64::MAX` (nothing overflows, a corrupt header is a lap).
    #[test]
    fn later_seq_edges() {
        use super::super::SEQ_LIMIT;
        use LaterSeq::*;
        let w = SEQ_LIMIT - 1;
        // (seq, seen, write_seq, newest, capacity) and the verdict.
        let cases = [
            // Capacity 4, write_seq 20: 21..=24 is the next lap, 17..=20 the ring.
            ((18, 24, 20, 20, 4), Lap),
            ((2, 30, 20, 20, 4), Behind { oldest: 17 }),
            ((16, 25, 20, 20, 4), Behind { oldest: 17 }),
            ((17, 25, 20, 20, 4), Lost),
            ((20, 25, 20, 20, 4), Lost),
            ((21, 25, 20, 20, 4), NotYet),
            // An MPMC ring's tickets in flight make a later lap possible.
            ((18, 25, 20, 21, 4), Lap),
            // Capacity 1: the ring holds `w` alone; a lap is `w + 1`.
            ((5, 6, 5, 5, 1), Lap),
            ((5, 7, 5, 5, 1), Lost),
            ((4, 7, 5, 5, 1), Behind { oldest: 5 }),
            ((6, 8, 5, 5, 1), NotYet),
            ((1, 3, 0, 0, 1), NotYet),
            ((1, 2, 0, 0, 1), NotYet),
            ((0, 1, 0, 0, 1), Lap),
            // write_seq 0: nothing published, nothing behind the ring (oldest 1).
            ((1, 4, 0, 0, 4), Lap),
            ((1, 5, 0, 0, 4), NotYet),
            ((0, 5, 0, 0, 4), Behind { oldest: 1 }),
            // Near u64::MAX: a write_seq (or claim_seq) at or past SEQ_LIMIT is a corrupt
            // header, judged a lap; a slot at or past it is never a lap.
            ((1, 2, u64::MAX, u64::MAX, 4), Lap),
            ((1, u64::MAX, 3, u64::MAX, 1), Lap),
            ((u64::MAX - 1, u64::MAX, 3, 3, 4), NotYet),
            ((1, u64::MAX, 3, 3, 4), Lost),
            ((1, SEQ_LIMIT, 8, 8, 4), Behind { oldest: 5 }),
            ((w, SEQ_LIMIT, w, w, u64::MAX), Lost),
            ((w - 2, w - 1, w - 2, w - 2, 1), Lap),
            ((w - 1, w, w - 2, w - 2, 1), NotYet),
            // `w + cap` saturates instead of wrapping to a small bound.
            ((1, w, 3, 3, u64::MAX), Lap),
            ((0, SEQ_LIMIT, w, w, 1), Behind { oldest: w }),
            ((u64::MAX, SEQ_LIMIT, w, w, 1), NotYet),
        ];
        for ((seq, seen, ws, newest, cap), want) in cases {
            let args = (seq, seen, ws, newest, cap);
            assert_eq!(later_seq(seq, seen, ws, newest, cap), want, "{args:?}");
        }
    }

    #[test]
    fn a_stride_too_large_for_a_usize_saturates_and_is_refused() {
        // These overflowed: a panic in debug builds, a small wrapped stride in release.
        for (size, align) in [(usize::MAX, 8), (usize::MAX - 7, 1), (usize::MAX - 16, 16)] {
            assert_eq!(slot_stride(size, align), usize::MAX, "{size} {align}");
        }
        assert_eq!(slot_stride(usize::MAX - 15, 8), usize::MAX - 7);
        // The refused stride is reported as it was, usize::MAX of the target (2^32 - 1 on a
        // 32-bit one).
        assert_eq!(
            Geometry::spmc(4, slot_stride(usize::MAX, 8), 8, 0, false),
            Err(GeometryError::BadStride {
                stride: usize::MAX as u64
            })
        );
    }

    /// A hand-built geometry (its fields are public) with an element size under 8 made
    /// `record_len` overflow: a panic in debug builds. `mask` likewise for capacity 0.
    #[test]
    fn accessors_of_a_hand_built_geometry_do_not_overflow() {
        let g = Geometry {
            element_size: 4,
            capacity: 0,
            ..Geometry::spmc(4, 16, 8, 0, false).unwrap()
        };
        assert_eq!((g.record_len(), g.mask()), (0, u64::MAX));
    }

    #[test]
    fn spec_section3_examples() {
        let g = Geometry::spmc(8, 16, 8, 0, true).unwrap();
        assert_eq!(
            (g.slots_offset, g.registry_count, g.flags.0),
            (0x880, 32, 0x0212)
        );
        let g = Geometry::spmc(8, 16, 8, 0, false).unwrap();
        assert_eq!(
            (g.slots_offset, g.registry_offset, g.flags.0),
            (128, 0, 0x0011)
        );
        let g = Geometry::spmc(8, 16, 8, 3, false).unwrap();
        assert_eq!(g.flags.0, 0x0211);
        let g = Geometry::blob(4, 32, 32, 256).unwrap();
        assert_eq!(
            (g.slots_offset, g.arena_offset, g.total_len()),
            (0x880, 0x900, Some(2624))
        );
        assert_eq!(g.flags.0, 0x0311);
        let g = Geometry::blob(4, 32, 2, 256).unwrap();
        assert_eq!(
            (g.slots_offset, g.arena_offset, g.total_len()),
            (0x100, 0x180, Some(704))
        );
        let g = Geometry::mpmc(8, 16, 8).unwrap();
        assert_eq!((g.slots_offset, g.flags.0), (128, 0x0021));
    }

    /// The overlap errors named the part and nothing else ("the registry overlaps another
    /// part of the ring"): not where it lies nor where the slots do, so a user looking at a
    /// corrupt or hand-built header could not tell which field was wrong.
    #[test]
    fn an_overlap_names_the_spans() {
        use std::string::ToString;
        let g = Geometry::spmc(4, 16, 8, 2, false).unwrap();
        let mut h = header_of(&g);
        // Two registry slots at 128 end at 256; slots moved down to 192 overlap the second.
        h.slots_offset = 192;
        let e = Geometry::from_header(&h, 1024, 8).unwrap_err().to_string();
        assert_eq!(
            e,
            "the registry at bytes 128..256 overlaps the 128-byte header or the slots at \
             bytes 192..256"
        );
        // A registry at 64 overlaps the header.
        h.slots_offset = g.slots_offset;
        h.reader_registry_offset = 64;
        let e = Geometry::from_header(&h, 1024, 8).unwrap_err().to_string();
        assert!(e.contains("registry at bytes 64..192 "), "{e}");
        // An arena inside the slots of a blob ring (slots 256..384, arena 384..704).
        let g = Geometry::blob(4, 32, 2, 256).unwrap();
        let mut h = header_of(&g);
        h.arena_offset = 0x100;
        let e = Geometry::from_header(&h, 704, 8).unwrap_err().to_string();
        assert_eq!(
            e,
            "the arena at bytes 256..576 overlaps the 128-byte header or the slots at bytes \
             256..384"
        );
    }

    /// The header a ring of `g` starts with (nothing published).
    fn header_of(g: &Geometry) -> RingHeader {
        RingHeader {
            magic: super::super::RING_MAGIC,
            version: super::super::RING_VERSION,
            element_size: g.element_size,
            capacity: g.capacity,
            mask: g.capacity - 1,
            write_seq: 0,
            claim_seq: 0,
            flags: g.flags.0,
            futex_word: 0,
            waiting_consumers: 0,
            align_pad: 0,
            read_seq: 0,
            schema_sig: 0,
            arena_offset: g.arena_offset,
            arena_size: g.arena_size,
            reader_registry_offset: g.registry_offset,
            reader_registry_count: g.registry_count,
            slots_offset: g.slots_offset,
            pad: [0; 16],
        }
    }

    #[test]
    fn element_size_not_a_multiple_of_8_is_refused() {
        // Found by fuzz/fuzz_targets/region.rs: an element_size of 12 passed every check and
        // put slot sequence words at offsets like 140 (a misaligned atomic, UB).
        let g = Geometry::spmc(4, 16, 8, 0, false).unwrap();
        let mut h = RingHeader {
            element_size: 12,
            ..header_of(&g)
        };
        assert_eq!(
            Geometry::from_header(&h, 1024, 8),
            Err(AttachError::ElementSizeMisaligned { found: 12 })
        );
        h.element_size = 16;
        assert!(Geometry::from_header(&h, 1024, 8).is_ok());
    }

    /// A stride above the u32 `element_size` was refused as "must be a multiple of 8, at
    /// least 8, 24 for blob rings", which 2^32 is: the message gave no reason that applied.
    #[test]
    fn a_stride_too_large_for_the_header_names_the_limit() {
        use std::string::ToString;
        let largest = (u32::MAX - 7) as usize;
        // Taken as a stride (too large for a 32-bit address space, but not a bad stride).
        assert!(!matches!(
            Geometry::spmc(1, largest, 8, 0, false),
            Err(GeometryError::BadStride { .. })
        ));
        let e = GeometryError::BadStride {
            stride: largest as u64 + 8,
        };
        assert_eq!(
            e.to_string(),
            "slot stride 4294967296 is invalid (must be a multiple of 8 from 8, 24 for blob \
             rings, to 4294967288, the most the header's 32-bit element_size holds)"
        );
        // The constructors give it (a usize holds 2^32 on 64-bit targets only).
        if let Some(stride) = largest.checked_add(8) {
            assert_eq!(Geometry::spmc(1, stride, 8, 0, false), Err(e));
            assert_eq!(Geometry::mpmc(1, stride, 8), Err(e));
        }
    }

    #[test]
    fn creation_errors() {
        assert_eq!(
            Geometry::spmc(1000, 16, 8, 0, false),
            Err(GeometryError::CapacityNotPowerOfTwo { capacity: 1000 })
        );
        assert_eq!(
            Geometry::spmc(8, 12, 8, 0, false),
            Err(GeometryError::BadStride { stride: 12 })
        );
        assert_eq!(
            Geometry::blob(8, 32, 0, 100),
            Err(GeometryError::ArenaSize { arena_size: 100 })
        );
        let e = Geometry::spmc(1 << 62, 64, 8, 0, false).unwrap_err();
        assert_eq!(
            e,
            GeometryError::TooLarge {
                capacity: 1 << 62,
                stride: 64,
                arena_size: 0
            }
        );
        assert_eq!(
            e.to_string(),
            "capacity 4611686018427387904 of 64-byte slots do not fit in the address space"
        );
        // Each constructor names what it was asked for, the arena too.
        assert_eq!(
            Geometry::mpmc(1 << 62, 64, 8),
            Err(GeometryError::TooLarge {
                capacity: 1 << 62,
                stride: 64,
                arena_size: 0
            })
        );
        let e = Geometry::blob(1 << 62, 64, 0, 1 << 62).unwrap_err();
        assert_eq!(
            e.to_string(),
            "capacity 4611686018427387904 of 64-byte slots and a 4611686018427387904-byte \
             arena do not fit in the address space"
        );
        let g = Geometry {
            capacity: 1 << 62,
            ..Geometry::spmc(8, 64, 8, 0, false).unwrap()
        };
        assert_eq!(g.total_len(), None);
        assert_eq!(
            g.too_large(),
            Geometry::spmc(1 << 62, 64, 8, 0, false).unwrap_err()
        );
    }

    /// The constructors refused only a ring whose size overflows a u64: one larger than the
    /// address space (above `isize::MAX` bytes, 2 GiB on a 32-bit target) was made, failed
    /// only at init, and the const sizing example's `n as usize` truncated its size on a
    /// 32-bit target. The queue geometry refuses the same size.
    #[test]
    fn a_ring_larger_than_the_address_space_is_too_large() {
        let space = isize::MAX as u64 + 1;
        // 16-byte slots after the 128-byte header: 128 bytes past the address space.
        let cap = space / 16;
        let too_large = |capacity, stride, arena_size| {
            Err(GeometryError::TooLarge {
                capacity,
                stride,
                arena_size,
            })
        };
        assert_eq!(Geometry::spmc(cap, 16, 8, 0, false), too_large(cap, 16, 0));
        assert_eq!(Geometry::mpmc(cap, 16, 8), too_large(cap, 16, 0));
        // An arena of the whole address space, after 320 bytes of header and slots.
        assert_eq!(Geometry::blob(4, 32, 0, space), too_large(4, 32, space));
        // Half of it fits, and its size is a usize.
        let g = Geometry::spmc(cap / 2, 16, 8, 0, false).unwrap();
        assert_eq!(g.total_len(), Some(space / 2 + 128));
        assert!(usize::try_from(g.total_len().unwrap()).is_ok());
        assert!(Geometry::mpmc(cap / 2, 16, 8).is_ok());
        assert!(Geometry::blob(4, 32, 0, space / 2).is_ok());
    }

    /// Only `spmc` was a `const fn`: firmware could not size the static buffer of a blob
    /// or MPMC ring at compile time (this did not compile).
    #[test]
    fn every_constructor_sizes_a_static_buffer_at_compile_time() {
        const fn bytes(g: Result<Geometry, GeometryError>) -> usize {
            match g {
                Ok(g) => match g.total_len() {
                    Some(n) => n as usize,
                    None => panic!("too large"),
                },
                Err(_) => panic!("bad geometry"),
            }
        }
        const BLOB: usize = bytes(Geometry::blob(4, 32, 2, 256));
        const MPMC: usize = bytes(Geometry::mpmc(8, 16, 8));
        assert_eq!((BLOB, MPMC), (704, 128 + 8 * 16));
    }

    #[test]
    fn a_slot_alignment_that_is_not_a_power_of_two_is_refused() {
        // Geometry::spmc(16, 16, 96, ..) used to succeed with slots_offset 128, which is not
        // a multiple of 96: a reader of that alignment then refused the ring it made.
        for align in [3, 48, 96, 100, usize::MAX] {
            let refused = Err(GeometryError::BadSlotAlign {
                slot_align: align as u64,
            });
            assert_eq!(Geometry::spmc(16, 16, align, 0, false), refused);
            assert_eq!(Geometry::mpmc(16, 16, align), refused);
        }
        for align in [0, 1, 8, 64, 128, 1 << 20] {
            let stride = align.max(16);
            let g = Geometry::spmc(16, stride, align, 0, false).unwrap();
            assert!(
                g.slots_offset.is_multiple_of(align.max(1) as u64),
                "{align}"
            );
            let g = Geometry::mpmc(16, stride, align).unwrap();
            assert!(
                g.slots_offset.is_multiple_of(align.max(1) as u64),
                "{align}"
            );
        }
    }

    /// A stride that is not a multiple of a slot alignment over 8 is refused by name:
    /// `spmc(16, 40, 32, ..)` made a ring whose slots after the first start misaligned, and
    /// that a typed reader of 32-aligned records (stride a multiple of 32) refuses. A file
    /// of that shape from another creator still attaches (spec §1.3 does not check it).
    #[test]
    fn a_stride_not_a_multiple_of_the_slot_alignment_is_refused() {
        for (stride, align) in [
            (40, 32),
            (16, 32),
            (24, 16),
            (8, 16),
            (72, 64),
            (4104, 4096),
        ] {
            let refused = Err(GeometryError::StrideNotAligned {
                stride: stride as u64,
                slot_align: align as u64,
            });
            assert_eq!(Geometry::spmc(16, stride, align, 0, false), refused);
            assert_eq!(Geometry::spmc(16, stride, align, 2, true), refused);
            assert_eq!(Geometry::mpmc(16, stride, align), refused);
        }
        // Up to 8 every stride (a multiple of 8) is aligned; over it, a multiple is.
        for (stride, align) in [(40, 0), (40, 1), (40, 8), (64, 32), (96, 32), (32, 16)] {
            assert!(Geometry::spmc(16, stride, align, 0, false).is_ok());
            assert!(Geometry::mpmc(16, stride, align).is_ok());
        }
        // The attach side keeps accepting such a ring, for any reader alignment.
        let mut g = Geometry::spmc(16, 64, 32, 0, false).unwrap();
        g.element_size = 40;
        let len = g.total_len().unwrap();
        let h = header_of(&g);
        for align in [8, 32] {
            assert_eq!(Geometry::from_header(&h, len, align), Ok(g), "{align}");
        }
    }
}
