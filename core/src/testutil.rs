//! Helpers for unit tests: rings in heap memory.

extern crate std;

use std::vec::Vec;

use crate::layout::Geometry;
use crate::region::Region;
use crate::ring::RingView;

/// A `u64` aligned to 8 bytes on every target. A `u64` itself is aligned to only 4 on some
/// 32-bit targets (i686), so a buffer of them need not be one a [`Region`] accepts; tests
/// back their regions with these instead.
#[repr(C, align(8))]
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::Immutable,
    zerocopy::KnownLayout,
)]
pub(crate) struct Word(pub(crate) u64);

/// `n` zeroed [`Word`]s.
pub(crate) fn words(n: usize) -> Vec<Word> {
    std::vec![Word(0); n]
}

/// A zeroed, 8-aligned heap buffer and a [`Region`] over it. Keep it alive while the region
/// (or any view on it) is in use.
pub(crate) struct HeapRegion {
    _buf: Vec<Word>,
    region: Region,
}

impl HeapRegion {
    /// `len` bytes (rounded up to whole words; the region is exactly `len` bytes long).
    pub(crate) fn new(len: usize) -> HeapRegion {
        let mut buf = words(len.div_ceil(8));
        // SAFETY: the buffer is 8-aligned, at least `len` bytes, owned by the returned value
        // (its heap block never moves), and only touched through the region from now on.
        let region = unsafe { Region::from_raw_parts(buf.as_mut_ptr().cast(), len) }
            .expect("heap buffer is aligned");
        HeapRegion { _buf: buf, region }
    }

    /// The region over the buffer.
    pub(crate) fn region(&self) -> Region {
        self.region
    }
}

/// A freshly initialised ring of `geo` in heap memory, sized exactly.
pub(crate) fn heap_ring(geo: &Geometry) -> (HeapRegion, RingView) {
    let len = geo.total_len().expect("geometry fits") as usize;
    let mem = HeapRegion::new(len);
    // SAFETY: a fresh heap buffer: no other view of it exists yet.
    let view = unsafe { RingView::init(mem.region(), geo) }.expect("init");
    (mem, view)
}

/// A lossy SPMC ring (flags 0x0011) of `capacity` slots with `stride`-byte slots.
pub(crate) fn spmc_ring(capacity: u64, stride: usize) -> (HeapRegion, RingView) {
    heap_ring(&Geometry::spmc(capacity, stride, 8, 0, false).expect("geometry"))
}

/// Record payload for sequence `seq`: every 8-byte word is `seq ^ (word index * K)`, so a
/// record from another sequence or a torn mix of two is recognised by [`check_payload`].
pub(crate) fn payload_for(seq: u64, out: &mut [u8]) {
    for (i, c) in out.chunks_mut(8).enumerate() {
        let w = seq ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        c.copy_from_slice(&w.to_le_bytes()[..c.len()]);
    }
}

/// True when `p` is exactly the payload [`payload_for`] makes for `seq`.
pub(crate) fn check_payload(seq: u64, p: &[u8]) -> bool {
    let mut want = std::vec![0u8; p.len()];
    payload_for(seq, &mut want);
    want == p
}
