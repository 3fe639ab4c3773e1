//! The items the queue benchmarks move (`benches/queues.rs`, `examples/spsc_instructions.rs`).

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// A benchmark item: `make(i)` builds item `i`, and consumers check every word of what
/// they receive with `is(i)`. Checking only the first word would let the compiler drop the
/// other loads for the queues whose pop is a plain `ptr::read` (rtrb, heapless: their
/// consumers then never read 56 of the 64 bytes), while an atomic copy must do them all.
pub trait Val:
    Copy + Default + Send + Sync + 'static + IntoBytes + FromBytes + Immutable + KnownLayout
{
    /// Item `i`.
    fn make(i: u64) -> Self;
    /// Whether this is item `i`, every word of it checked.
    fn is(&self, i: u64) -> bool;
}

impl Val for u64 {
    #[inline(always)]
    fn make(i: u64) -> Self {
        i
    }
    #[inline(always)]
    fn is(&self, i: u64) -> bool {
        *self == i
    }
}

/// A 64-byte item.
#[derive(Clone, Copy, Default, IntoBytes, FromBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct B64(pub [u64; 8]);

impl Val for B64 {
    #[inline(always)]
    fn make(i: u64) -> Self {
        B64([i, i ^ 1, i ^ 2, i ^ 3, i ^ 4, i ^ 5, i ^ 6, i ^ 7])
    }
    #[inline(always)]
    fn is(&self, i: u64) -> bool {
        // Every word, folded without branches: one compare per item, all 8 loads kept.
        self.0
            .iter()
            .enumerate()
            .fold(0, |d, (j, w)| d | (w ^ i ^ j as u64))
            == 0
    }
}
