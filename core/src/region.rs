//! [`Region`]: a span of caller memory that a ring lives in.
//!
//! A region is a mapped file, a static buffer or a DMA buffer. Its bounds are checked once,
//! when a ring is initialised in it or attached to it; from then on the ring's typed views
//! address it with offsets that validation has already proved in range. Every access is
//! atomic (payloads move as relaxed 64-bit words), so two processes sharing the memory never
//! race in the language's sense.
//!
//! # Sharing with a device or another core
//!
//! The accesses are atomic only as far as the target's 64-bit atomics are. On a 32-bit MCU
//! with this crate's `unsafe-assume-single-core` feature (passed to portable-atomic), a
//! 64-bit load or store is two 32-bit accesses with interrupts masked: atomic against
//! interrupt handlers on the same core, not against a DMA master or a second core, which
//! can write between the two halves. A torn word is misread. When a sequence crosses 2^32
//! (`0xFFFF_FFFF` to `0x1_0000_0000`), a reader can load `0x1_FFFF_FFFF`, and take the slot
//! as overwritten far ahead (about 2^32 records counted as lapped and skipped), or `0`, and
//! take a published record as pending or the ring as empty. A region shared beyond one core
//! needs native 64-bit atomics on the CPU side and single 64-bit writes from the device.
//!
//! A device that writes records (an FPGA, a DMA engine, a coprocessor's own code) must
//! follow the writer protocol of the spec's §4.2 in order, each step visible to the CPU's
//! readers before the next: `u64::MAX` into the slot's sequence word, then the payload,
//! then the record's sequence, then `write_seq`. The marker is how a reader sees a write in
//! progress: without it, a reader that loaded the slot's old sequence, copied the payload
//! while the device overwrote it, and loaded the old sequence again (the new one not stored
//! yet) accepts the half-written payload as the old record.

#[cfg(not(loom))]
use crate::sync::AtomicU64;
use crate::sync::{A32, A64, Ordering};

/// Why caller memory cannot be used as a region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum RegionError {
    /// The base address is not 8-byte aligned (atomic words need natural alignment), or is
    /// null (`addr` 0, which the message calls null rather than misaligned).
    Misaligned {
        /// The address that was passed.
        addr: usize,
    },
    /// The length is larger than `isize::MAX`.
    TooLarge {
        /// The length that was passed.
        len: usize,
    },
}

impl core::fmt::Display for RegionError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            // 0 is 8-aligned: calling a null base misaligned sent users looking at alignment.
            RegionError::Misaligned { addr: 0 } => f.write_str("region base 0x0 is a null pointer"),
            RegionError::Misaligned { addr } => {
                write!(f, "region base {addr:#x} is not 8-byte aligned")
            }
            RegionError::TooLarge { len } => write!(f, "region length {len} exceeds isize::MAX"),
        }
    }
}

/// A span of caller-supplied memory: pointer and length, 8-byte aligned.
///
/// `Region` is `Copy`: it does not own the memory. Whoever creates one promises (see
/// [`Region::from_raw_parts`]) that the memory stays valid while any copy is in use.
#[derive(Clone)]
#[cfg_attr(not(loom), derive(Copy))]
pub struct Region {
    #[cfg(not(loom))]
    base: core::ptr::NonNull<u8>,
    #[cfg(loom)]
    words: std::sync::Arc<[crate::sync::Word]>,
    len: usize,
}

impl core::fmt::Debug for Region {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Region")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

// SAFETY: a Region is a pointer into memory that is only ever accessed through atomic
// operations, so sharing it between threads cannot create a data race.
unsafe impl Send for Region {}
// SAFETY: as for Send: every access through a Region is atomic.
unsafe impl Sync for Region {}

impl Region {
    /// Wraps caller memory.
    ///
    /// # Safety
    /// `ptr..ptr+len` must be valid for reads and writes for as long as this region or any
    /// copy of it (or any ring view built on it) is used, and every other party touching the
    /// memory meanwhile (other threads, other processes, a device) must do so only through
    /// atomic accesses or ringwire's protocols. That includes the caller: no Rust reference
    /// to any of those bytes (a `&[u8]` or `&mut [u8]` the pointer was taken from, say) may
    /// be used while the region is, since ringwire writes through it behind such a
    /// reference's back. Within this process, each byte must be accessed at one size only
    /// while accesses can race: the size the layout in use gives it (see the views' `init`).
    #[cfg(not(loom))]
    pub unsafe fn from_raw_parts(ptr: *mut u8, len: usize) -> Result<Region, RegionError> {
        if ptr.is_null() || !(ptr as usize).is_multiple_of(8) {
            return Err(RegionError::Misaligned { addr: ptr as usize });
        }
        if len > isize::MAX as usize {
            return Err(RegionError::TooLarge { len });
        }
        // SAFETY: checked non-null just above.
        let base = unsafe { core::ptr::NonNull::new_unchecked(ptr) };
        Ok(Region { base, len })
    }

    /// Wraps a static buffer of 64-bit words (for firmware rings in `static` memory).
    ///
    /// [`RegionError::Misaligned`] when the buffer does not start on an 8-byte boundary. A
    /// `u64` is 8-aligned on the targets the firmware builds for (Arm, RISC-V), so there
    /// this never fails; on 32-bit x86 a `u64` is aligned to 4 only, and a `[u64]` may start
    /// 4 bytes past a boundary (a static of a `#[repr(align(8))]` type never does).
    #[cfg(not(loom))]
    pub fn from_static(buf: &'static mut [u64]) -> Result<Region, RegionError> {
        let len = core::mem::size_of_val(buf);
        // SAFETY: a `&'static mut` slice is valid forever and exclusively ours; the
        // alignment is checked there.
        unsafe { Region::from_raw_parts(buf.as_mut_ptr().cast(), len) }
    }

    /// A zeroed region of `len` bytes backed by loom atomics (one per 8-byte word).
    #[cfg(loom)]
    pub fn loom_new(len: usize) -> Region {
        let words: std::vec::Vec<crate::sync::Word> = (0..len.div_ceil(8))
            .map(|_| crate::sync::Word::new())
            .collect();
        Region {
            words: words.into(),
            len,
        }
    }

    /// Length in bytes.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the region is empty.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The base address (for system calls such as futex or msync on the std side).
    #[cfg(not(loom))]
    #[inline(always)]
    pub fn as_ptr(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    /// True when `[off, off + n)` lies inside the region.
    #[inline(always)]
    pub fn contains(&self, off: usize, n: usize) -> bool {
        off.checked_add(n).is_some_and(|end| end <= self.len)
    }

    /// The 64-bit atomic word at `off`.
    ///
    /// # Safety
    /// `off` must be a multiple of 8 and `off + 8 <= len`. While the returned atomic is in
    /// use, no other thread may access any of its 8 bytes atomically at another size (a
    /// 32-bit field of the layout in use, say): mixed-size racing atomics are undefined
    /// behaviour.
    #[inline(always)]
    pub unsafe fn a64(&self, off: usize) -> A64<'_> {
        debug_assert!(
            off.is_multiple_of(8) && self.contains(off, 8),
            "a64 at {off} in {}",
            self.len
        );
        #[cfg(not(loom))]
        {
            // SAFETY: the caller guarantees alignment and bounds; the memory is valid for
            // the region's life and only accessed atomically (from_raw_parts contract).
            A64(unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(off).cast()) })
        }
        #[cfg(loom)]
        {
            A64(&self.words[off / 8])
        }
    }

    /// The 32-bit atomic field at `off`.
    ///
    /// # Safety
    /// `off` must be a multiple of 4 and `off + 4 <= len`. As for [`Region::a64`], no other
    /// thread may meanwhile access these 4 bytes atomically at another size (as part of a
    /// 64-bit word, say).
    #[inline(always)]
    pub unsafe fn a32(&self, off: usize) -> A32<'_> {
        debug_assert!(
            off.is_multiple_of(4) && self.contains(off, 4),
            "a32 at {off} in {}",
            self.len
        );
        #[cfg(not(loom))]
        {
            A32 {
                // SAFETY: as in `a64`, for a 4-byte aligned field.
                cell: unsafe {
                    crate::sync::AtomicU32::from_ptr(self.base.as_ptr().add(off).cast())
                },
            }
        }
        #[cfg(loom)]
        {
            A32 {
                word: &self.words[off / 8],
                shift: ((off % 8) * 8) as u32,
            }
        }
    }

    /// Copies `dst.len()` bytes starting at `off` out of the region as relaxed 64-bit loads.
    ///
    /// # Safety
    /// `off` must be a multiple of 8 and `off + roundup(dst.len(), 8) <= len`; each word of
    /// that span is loaded as by [`Region::a64`], under its contract.
    #[inline]
    pub unsafe fn read_words(&self, off: usize, dst: &mut [u8]) {
        let mut chunks = dst.chunks_exact_mut(8);
        let mut o = off;
        for c in &mut chunks {
            // SAFETY: o stays 8-aligned and inside [off, off + roundup(len, 8)).
            let w = unsafe { self.a64(o) }.load(Ordering::Relaxed);
            c.copy_from_slice(&w.to_ne_bytes());
            o += 8;
        }
        let rest = chunks.into_remainder();
        if !rest.is_empty() {
            // SAFETY: the partial last word is inside the rounded-up span.
            let w = unsafe { self.a64(o) }.load(Ordering::Relaxed);
            rest.copy_from_slice(&w.to_ne_bytes()[..rest.len()]);
        }
    }

    /// Copies `src` into the region at `off` as relaxed 64-bit stores. A partial last word
    /// is completed with zero bytes.
    ///
    /// # Safety
    /// `off` must be a multiple of 8, `off + roundup(src.len(), 8) <= len`, and the caller
    /// must own that span under the ring protocol (a claimed slot or a reserved arena span);
    /// each word of it is stored as by [`Region::a64`], under its contract.
    #[inline]
    pub unsafe fn write_words(&self, off: usize, src: &[u8]) {
        let mut chunks = src.chunks_exact(8);
        let mut o = off;
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            // SAFETY: o stays 8-aligned and inside [off, off + roundup(len, 8)).
            unsafe { self.a64(o) }.store(u64::from_ne_bytes(w), Ordering::Relaxed);
            o += 8;
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            // SAFETY: the partial last word is inside the rounded-up span.
            unsafe { self.a64(o) }.store(u64::from_ne_bytes(w), Ordering::Relaxed);
        }
    }

    /// Stores zero into every word of `[off, off + n)` (relaxed).
    ///
    /// # Safety
    /// As for [`Region::write_words`] with a span of `n` bytes.
    pub unsafe fn zero_words(&self, off: usize, n: usize) {
        let mut o = off;
        while o < off + n {
            // SAFETY: o is 8-aligned and inside the span the caller owns.
            unsafe { self.a64(o) }.store(0, Ordering::Relaxed);
            o += 8;
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::testutil::Word;
    use std::boxed::Box;
    use std::vec;

    /// A null base was refused as "region base 0x0 is not 8-byte aligned", which 0 is: the
    /// message pointed at alignment, not at the missing buffer.
    #[test]
    fn a_null_base_is_called_null_not_misaligned() {
        use std::string::ToString;
        // SAFETY: a null pointer is refused before anything is accessed through it.
        let e = unsafe { Region::from_raw_parts(core::ptr::null_mut(), 64) }.unwrap_err();
        assert_eq!(e, RegionError::Misaligned { addr: 0 });
        assert_eq!(e.to_string(), "region base 0x0 is a null pointer");
        let e = RegionError::Misaligned { addr: 12 };
        assert_eq!(e.to_string(), "region base 0xc is not 8-byte aligned");
    }

    #[test]
    fn rejects_misaligned_base() {
        let mut buf = [Word(0); 4];
        let p = buf.as_mut_ptr().cast::<u8>();
        // SAFETY: the buffer outlives the region; this only tests the alignment check.
        let r = unsafe { Region::from_raw_parts(p.wrapping_add(4), 16) };
        assert_eq!(
            r.unwrap_err(),
            RegionError::Misaligned {
                addr: p as usize + 4
            }
        );
    }

    /// `from_static` took every `[u64]` for 8-aligned and made a region of 0 bytes of one
    /// that is not, which 32-bit x86 allows (a `u64` is aligned to 4 there): a ring then
    /// failed to initialise with "region too small" instead of naming the alignment.
    #[test]
    fn from_static_refuses_a_misaligned_buffer_and_takes_an_aligned_one_whole() {
        let aligned: *mut [Word] = Box::into_raw(vec![Word(0); 4].into_boxed_slice());
        // SAFETY: a fresh allocation of 4 words, leaked until the end of the test; the slice
        // is its only reference.
        let buf: &'static mut [u64] =
            unsafe { core::slice::from_raw_parts_mut(aligned.cast::<u64>(), 4) };
        assert_eq!(Region::from_static(buf).map(|r| r.len()), Ok(32));
        // A u64 at 4 bytes past an 8-byte boundary exists only where u64 is aligned to 4.
        let spare: *mut [Word] = Box::into_raw(vec![Word(0); 5].into_boxed_slice());
        if core::mem::align_of::<u64>() <= 4 {
            let p = spare.cast::<u8>().wrapping_add(4);
            // SAFETY: bytes [4, 36) of the 40-byte allocation, aligned to 4 = align_of::<u64>
            // on this target; the slice is the allocation's only reference.
            let buf: &'static mut [u64] =
                unsafe { core::slice::from_raw_parts_mut(p.cast::<u64>(), 4) };
            assert_eq!(
                Region::from_static(buf).map(|r| r.len()),
                Err(RegionError::Misaligned { addr: p as usize })
            );
        }
        // SAFETY: both boxes came from `Box::into_raw` above, and no reference made from them
        // (the slices, the regions) is used any more.
        unsafe { drop((Box::from_raw(aligned), Box::from_raw(spare))) };
    }

    #[test]
    fn words_round_trip_with_partial_tail() {
        let mut buf = [Word(0); 4];
        // SAFETY: the buffer outlives the region and nothing else touches it.
        let r = unsafe { Region::from_raw_parts(buf.as_mut_ptr().cast(), 32) }.unwrap();
        let src: [u8; 13] = core::array::from_fn(|i| i as u8 + 1);
        // SAFETY: 16 bytes at offset 8 are in bounds and ours.
        unsafe { r.write_words(8, &src) };
        let mut dst = [0u8; 13];
        // SAFETY: same span.
        unsafe { r.read_words(8, &mut dst) };
        assert_eq!(dst, src);
        // The partial word was completed with zeros.
        // SAFETY: offset 16 is 8-aligned and in bounds.
        let tail = unsafe { r.a64(16) }.load(Ordering::Relaxed);
        assert_eq!(tail.to_ne_bytes()[5..], [0, 0, 0]);
        assert!(r.contains(24, 8) && !r.contains(25, 8) && !r.contains(usize::MAX, 2));
    }
}
