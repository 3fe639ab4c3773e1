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
pub use geometry::{Geometry, oldest_retained, slot_payload_offset, slot_stride};
pub use header::{RING_MAGIC, RING_VERSION, RingHeader, SEQ_LIMIT, SLOT_WRITING, hdr};
pub use registry::{REGISTRY_NAME_LEN, RegistrySlot, reg};
pub use signature::{fnv1a64, schema_signature, schema_signature_of, strip_type_paths};

/// `x` rounded up to a multiple of `to` (a power of two), or `None` on overflow.
#[inline]
pub const fn round_up(x: u64, to: u64) -> Option<u64> {
    match x.checked_add(to - 1) {
        Some(v) => Some(v & !(to - 1)),
        None => None,
    }
}
