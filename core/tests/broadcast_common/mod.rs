//! Shared helpers of the broadcast integration tests: rings in heap memory.

#![allow(dead_code)]

use ringwire_core::{Geometry, Region, RingView};

/// A `u64` aligned to 8 bytes on every target (a `u64` is aligned to only 4 on i686, so a
/// buffer of them need not be one a region accepts).
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct Word(pub u64);

/// A zeroed, 8-aligned heap buffer and a region over it. The region (and every view on it)
/// must not be used after this is dropped.
pub struct Heap {
    _buf: Vec<Word>,
    pub region: Region,
}

/// `len` zero bytes (the region is exactly `len` bytes long).
pub fn heap(len: usize) -> Heap {
    let mut buf = vec![Word(0); len.div_ceil(8)];
    // SAFETY: the buffer is 8-aligned and at least `len` bytes; its heap block never moves
    // and lives as long as the returned Heap; it is only accessed through the region.
    let region = unsafe { Region::from_raw_parts(buf.as_mut_ptr().cast(), len) }.unwrap();
    Heap { _buf: buf, region }
}

/// A freshly initialised ring of `geo`, sized exactly.
pub fn ring(geo: &Geometry) -> (Heap, RingView) {
    let h = heap(geo.total_len().unwrap() as usize);
    // SAFETY: a fresh heap buffer, no other view of it exists yet.
    let view = unsafe { RingView::init(h.region, geo) }.unwrap();
    (h, view)
}

/// The whole region as bytes, read as relaxed words (never a racing plain read).
pub fn bytes(h: &Heap) -> Vec<u8> {
    let mut b = vec![0u8; h.region.len()];
    // SAFETY: the whole region from offset 0; test rings are a multiple of 8 bytes long.
    unsafe { h.region.read_words(0, &mut b) };
    b
}
