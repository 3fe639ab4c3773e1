//! Shared helpers of the broadcast integration tests: rings in heap memory.

#![allow(dead_code)]

use ringwire_core::sync::Ordering;
use ringwire_core::{Geometry, Region, RingView};

/// A zeroed, 8-aligned heap buffer and a region over it. The region (and every view on it)
/// must not be used after this is dropped.
pub struct Heap {
    _buf: Vec<u64>,
    pub region: Region,
}

/// `len` zero bytes (the region is exactly `len` bytes long).
pub fn heap(len: usize) -> Heap {
    let mut buf = vec![0u64; len.div_ceil(8)];
    // SAFETY: the buffer is 8-aligned and at least `len` bytes; its heap block never moves
    // and lives as long as the returned Heap; it is only accessed through the region.
    let region = unsafe { Region::from_raw_parts(buf.as_mut_ptr().cast(), len) }.unwrap();
    Heap { _buf: buf, region }
}

/// A freshly initialised ring of `geo`, sized exactly.
pub fn ring(geo: &Geometry) -> (Heap, RingView) {
    let h = heap(geo.total_len().unwrap() as usize);
    let view = RingView::init(h.region, geo).unwrap();
    settle(&h);
    (h, view)
}

/// Rewrites every word with its own value through a plain write. `RingView::init` writes the
/// header and registry as 64-bit atomic words and the protocols later use 32-bit atomics on
/// some of those bytes; that never races, but Miri's weak-memory emulation (nightly 2026-05)
/// panics on the mixed-size sequence. No other thread sees the ring yet, so the plain write
/// is legal and clears Miri's store buffers.
pub fn settle(h: &Heap) {
    let r = &h.region;
    for off in (0..r.len() / 8 * 8).step_by(8) {
        // SAFETY: `off` is 8-aligned and inside the region.
        let v = unsafe { r.a64(off) }.load(Ordering::Relaxed);
        // SAFETY: same word; only this thread can reach the fresh ring, so nothing races.
        unsafe { r.as_ptr().add(off).cast::<u64>().write(v) };
    }
}

/// The whole region as bytes, read as relaxed words (never a racing plain read).
pub fn bytes(h: &Heap) -> Vec<u8> {
    let mut b = vec![0u8; h.region.len()];
    // SAFETY: the whole region from offset 0; test rings are a multiple of 8 bytes long.
    unsafe { h.region.read_words(0, &mut b) };
    b
}
