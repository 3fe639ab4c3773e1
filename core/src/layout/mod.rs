//! Shared-memory layouts (spec §2–§4, §9, §10): `#[repr(C)]` zerocopy types with `const`
//! asserts on sizes and field offsets, plus the geometry rules that place them in a file.

mod arena;
mod flags;
mod geometry;
mod header;
mod registry;
mod signature;

pub use arena::{ArenaHeader, BlobRef, arena_off};
pub use flags::Flags;
pub use geometry::{
    DEFAULT_MAX_READERS, Geometry, LaterSeq, lap_possible, later_seq, oldest_retained,
    slot_payload_offset, slot_stride,
};
pub use header::{
    RING_MAGIC, RING_VERSION, RingHeader, SEQ_LIMIT, SLOT_WRITING, check_write_seq, hdr,
    next_write_seq,
};
pub use registry::{REGISTRY_NAME_LEN, RegistrySlot, reg};
pub use signature::{fnv1a64, schema_signature, schema_signature_of, strip_type_paths};

/// `x` rounded up to a multiple of `to` (a power of two), or `None` on overflow or when
/// `to` is not a power of two (the mask below would give a wrong result, and 0 underflows).
#[inline]
pub const fn round_up(x: u64, to: u64) -> Option<u64> {
    if !to.is_power_of_two() {
        return None;
    }
    match x.checked_add(to - 1) {
        Some(v) => Some(v & !(to - 1)),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::round_up;

    #[test]
    fn round_up_refuses_what_is_not_a_power_of_two() {
        assert_eq!(round_up(5, 8), Some(8));
        assert_eq!(round_up(128, 64), Some(128));
        assert_eq!(round_up(1, 1), Some(1));
        assert_eq!(round_up(u64::MAX, 2), None);
        // Used to panic on 0 (subtract with overflow) in debug builds, and to give 5 for
        // (5, 3) and 128 for (128, 96): not multiples.
        assert_eq!(round_up(5, 0), None);
        assert_eq!(round_up(5, 3), None);
        assert_eq!(round_up(128, 96), None);
    }
}
