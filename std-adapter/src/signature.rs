//! ringfire's layout-signature names over the core's schema signature (spec §12): the
//! 64-bit fingerprint of a record type's path-less name, size and alignment that a ring's
//! header carries, so that two programs whose record types differ in name, size or
//! alignment refuse each other instead of misreading bytes.
//!
//! That is all it checks. Fields changed, reordered or retyped in a type of the same name,
//! size and alignment (`Quote { bid: f64, ask: f64 }` becoming `Quote { ask_qty: u64,
//! bid_ticks: i64 }`), and same-named types of two modules, have the same signature and
//! attach to each other's rings. Rename the type (`QuoteV2`) when its layout changes. The
//! signature cannot cover more without breaking interop: ringfire computes the same value.

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
