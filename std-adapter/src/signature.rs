//! ringfire's layout-signature names over the core's schema signature (spec §12): the
//! 64-bit fingerprint of a record type's path-less name, size and alignment that a ring's
//! header carries, so that two programs built with different record types refuse each
//! other instead of misreading bytes.

pub use ringwire_core::layout::fnv1a64;

/// The schema signature of `T` (ringfire's `compute_layout_signature`): the value a ring of
/// `T` records holds in its header.
pub fn compute_layout_signature<T: 'static>() -> u64 {
    ringwire_core::layout::schema_signature_of::<T>()
}

/// A type's layout signature (ringfire's trait, implemented for every `'static` type).
pub trait LayoutSignature: 'static {
    /// [`compute_layout_signature`] of `Self`.
    fn layout_signature() -> u64;
}

impl<T: 'static> LayoutSignature for T {
    #[inline]
    fn layout_signature() -> u64 {
        compute_layout_signature::<T>()
    }
}
