//! The blob arena (spec §10): reserving arena space, writing and validating blob bytes, and
//! the "BlobRef is the last 16 bytes of the slot payload" rule. [`BlobWriter`] and
//! [`BlobReader`] (in `stream.rs`) put them together so blob rings are usable on their own.
//!
//! The arena is a byte ring addressed by a global position (`reserved` never wraps). A
//! writer reserves 64-byte-rounded spans with a CAS, copies the bytes, then publishes a
//! descriptor slot. A reader copies the bytes and accepts them only when the arena has not
//! been reserved a full lap past the blob, checked before and after the copy; the writer's
//! release fence after the reservation makes any overwritten word visible as a newer
//! `reserved` to the reader's acquire fence after the copy.

use core::fmt;

use zerocopy::{FromBytes, IntoBytes};

use crate::layout::{BlobRef, round_up};
use crate::ring::RingView;
use crate::sync::{A64, Ordering, fence};

mod stream;

pub use stream::{BlobReader, BlobWriter, Pushed, Received};

/// Bytes of a [`BlobRef`] at the end of a blob ring's slot payload.
pub const BLOB_REF_LEN: usize = 16;

/// Why a blob operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum BlobError {
    /// The ring has no arena.
    NoArena,
    /// A blob longer than `min(arena capacity, u32::MAX)`.
    TooLarge {
        /// The length asked for.
        len: usize,
        /// The largest blob the arena takes.
        max: u64,
    },
    /// The arena's `reserved` counter would overflow (only a corrupt arena gets here).
    ArenaExhausted {
        /// The counter value found.
        reserved: u64,
    },
    /// A descriptor does not fit the arena (`(offset & mask) + len > capacity`, or an
    /// offset that is not 8-byte aligned, which no conforming writer produces).
    OutOfBounds {
        /// The descriptor.
        blob: BlobRef,
        /// Arena capacity.
        capacity: u64,
    },
    /// The bytes given do not match the descriptor's length.
    LenMismatch {
        /// Bytes given.
        len: usize,
        /// The descriptor's length.
        expected: u32,
    },
    /// A descriptor buffer whose length is not the ring's record length (`element_size - 8`).
    DescriptorLen {
        /// Bytes given.
        len: usize,
        /// Bytes needed.
        need: usize,
    },
    /// The ring's `write_seq` leaves no sequence below
    /// [`SEQ_LIMIT`](crate::layout::SEQ_LIMIT) for a writer: it is `SEQ_LIMIT - 1` (the
    /// last sequence, published) or more (only a corrupt header gets there). The writer's
    /// attach refuses it, and so does a push after the last sequence.
    WriteSeqExhausted {
        /// The header's `write_seq`.
        write_seq: u64,
    },
    /// The ring is of a kind a blob writer cannot write: its flags carry `MODE_MPMC` (many
    /// writers claim tickets there, spec §8; a blob ring has one writer and flags `0x0311`,
    /// spec §2.1). Only a corrupt header or a wrong path gets here.
    WrongKind {
        /// The header flags.
        flags: u32,
        /// What the writer needs.
        need: &'static str,
    },
    /// The caller's blob buffer is shorter than the blob.
    BufferTooSmall {
        /// Bytes given.
        len: usize,
        /// The blob's length.
        need: u32,
    },
}

impl fmt::Display for BlobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            BlobError::NoArena => f.write_str("the ring has no blob arena"),
            BlobError::TooLarge { len, max } => {
                write!(f, "blob of {len} bytes exceeds the arena limit of {max}")
            }
            BlobError::ArenaExhausted { reserved } => {
                write!(f, "arena reservation counter {reserved:#x} would overflow")
            }
            BlobError::OutOfBounds { blob, capacity } => write!(
                f,
                "blob descriptor at offset {:#x} with length {} does not fit an arena of {capacity} bytes",
                blob.offset, blob.len
            ),
            BlobError::LenMismatch { len, expected } => write!(
                f,
                "{len} bytes given for a blob descriptor of length {expected}"
            ),
            BlobError::DescriptorLen { len, need } => write!(
                f,
                "descriptor buffer of {len} bytes, but the ring's records are {need} bytes"
            ),
            BlobError::WriteSeqExhausted { write_seq } => {
                write!(
                    f,
                    "write_seq {write_seq:#x} leaves no sequence for a writer"
                )
            }
            BlobError::WrongKind { flags, need } => {
                write!(f, "ring flags {flags:#06x} do not describe {need}")
            }
            BlobError::BufferTooSmall { len, need } => {
                write!(
                    f,
                    "buffer of {len} bytes is too small for a {need}-byte blob"
                )
            }
        }
    }
}

impl core::error::Error for BlobError {}

/// Outcome of [`read_blob`].
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum BlobRead {
    /// `dst[..len]` holds the blob exactly as written.
    Ok(usize),
    /// The blob was overwritten (lapped), or its descriptor is bogus; `dst` holds nothing
    /// usable. Readers skip the message and count it as lapped (spec §10.4).
    Lost,
    /// `dst` is shorter than the blob (nothing was accepted; retry with `need` bytes).
    BufferTooSmall {
        /// The blob's length.
        need: u32,
    },
}

/// The arena of a ring: capacity, data offset and the `reserved` counter.
struct Arena<'a> {
    cap: u64,
    data: usize,
    reserved: A64<'a>,
}

impl<'a> Arena<'a> {
    fn of(view: &'a RingView) -> Option<Arena<'a>> {
        Some(Arena {
            // Validated at init/attach: a power of two >= 64, equal to the arena header's.
            cap: view.geometry().arena_size,
            data: view.arena_data_offset(),
            reserved: view.arena_reserved()?,
        })
    }

    /// Region offset of the descriptor's first byte, if the descriptor fits the arena.
    fn locate(&self, r: &BlobRef) -> Option<usize> {
        let ix = r.offset & (self.cap - 1);
        // Conforming writers reserve 64-byte aligned positions; word copies need 8.
        (ix.is_multiple_of(8) && ix + u64::from(r.len) <= self.cap).then(|| self.data + ix as usize)
    }

    /// Spec §10.4 lap test: acquire fence, load `reserved`; the blob is intact while the
    /// arena has not been reserved more than one capacity past its start. A `reserved`
    /// below the blob's end means the descriptor points at space never reserved (bogus).
    fn intact(&self, r: &BlobRef) -> bool {
        // Acquire fence: every word copied before it that a later writer stored makes that
        // writer's reservation (made before its release fence) visible to the load below.
        fence(Ordering::Acquire);
        // Relaxed: ordered by the fence above.
        let reserved = self.reserved.load(Ordering::Relaxed);
        reserved.saturating_sub(r.offset) <= self.cap
            && r.offset.saturating_add(u64::from(r.len)) <= reserved
    }
}

/// Reserves arena space for a blob of `len` bytes (spec §10.3). `len == 0` gives
/// [`BlobRef::EMPTY`]. A span that would run past the end of the arena starts on the next
/// lap instead. A counter off the 8-byte grid (only a corrupt arena holds one) is taken as
/// the next multiple of 8, where [`write_blob`] can copy words. Only the ring's writer(s)
/// call this; it is lock-free among them.
pub fn reserve(view: &RingView, len: usize, flags: u32) -> Result<BlobRef, BlobError> {
    let arena = Arena::of(view).ok_or(BlobError::NoArena)?;
    if len == 0 {
        return Ok(BlobRef::EMPTY);
    }
    let max = arena.cap.min(u64::from(u32::MAX));
    if len as u64 > max {
        return Err(BlobError::TooLarge { len, max });
    }
    let len64 = len as u64;
    let rounded = (len64 + 63) & !63;
    let mask = arena.cap - 1;
    // Relaxed: the CAS below validates the value.
    let mut cur = arena.reserved.load(Ordering::Relaxed);
    loop {
        // The blob starts at the next word: conforming writers keep the counter a multiple
        // of 64, and a corrupt one off the 8-byte grid would give a start that `write_blob`
        // refuses, as it would every start after it (each adds a multiple of 64).
        let at = round_up(cur, 8);
        // The lap test uses the unrounded length, as the reference does.
        let start = at.and_then(|at| {
            if (at & mask) + len64 > arena.cap {
                (at | mask).checked_add(1)
            } else {
                Some(at)
            }
        });
        let Some((start, next)) = start.and_then(|s| Some((s, s.checked_add(rounded)?))) else {
            return Err(BlobError::ArenaExhausted { reserved: cur });
        };
        // AcqRel (spec §10.3): orders us after earlier reservations and before our writes;
        // weak because we loop anyway.
        match arena
            .reserved
            .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed)
        {
            Ok(_) => {
                // Release fence: a reader that sees any of the words we store next, and then
                // fences with acquire, sees `reserved >= next` and rejects the old blob.
                fence(Ordering::Release);
                return Ok(BlobRef {
                    offset: start,
                    len: len as u32,
                    flags,
                });
            }
            Err(seen) => {
                cur = seen;
                crate::sync::spin_hint();
            }
        }
    }
}

/// Copies `bytes` into the arena span of `r` (which [`reserve`] returned) as relaxed 64-bit
/// words. `bytes.len()` must equal `r.len`.
pub fn write_blob(view: &RingView, r: &BlobRef, bytes: &[u8]) -> Result<(), BlobError> {
    if bytes.len() != r.len as usize {
        return Err(BlobError::LenMismatch {
            len: bytes.len(),
            expected: r.len,
        });
    }
    if r.len == 0 {
        return Ok(());
    }
    let arena = Arena::of(view).ok_or(BlobError::NoArena)?;
    let off = arena.locate(r).ok_or(BlobError::OutOfBounds {
        blob: *r,
        capacity: arena.cap,
    })?;
    // SAFETY: `locate` proved the span 8-aligned and inside the arena, whose capacity is a
    // multiple of 64, so the rounded-up last word stays inside it too; validation proved the
    // arena inside the region. The reservation makes the span ours.
    unsafe { view.region().write_words(off, bytes) };
    Ok(())
}

/// Reads the blob of descriptor `r` into `dst` with the checks of spec §10.4: bounds, then
/// the lap test before and after the copy. Never returns bytes that differ from what was
/// written for `r`: a blob that was (even partly) overwritten is [`BlobRead::Lost`]. A ring
/// without an arena cannot hold the blob either, so it reads as `Lost`.
pub fn read_blob(view: &RingView, r: &BlobRef, dst: &mut [u8]) -> BlobRead {
    if r.len == 0 {
        return BlobRead::Ok(0);
    }
    let Some(arena) = Arena::of(view) else {
        return BlobRead::Lost;
    };
    let Some(off) = arena.locate(r) else {
        return BlobRead::Lost;
    };
    if !arena.intact(r) {
        return BlobRead::Lost;
    }
    let n = r.len as usize;
    let Some(dst) = dst.get_mut(..n) else {
        return BlobRead::BufferTooSmall { need: r.len };
    };
    // SAFETY: as in write_blob, the span and its rounded-up last word lie inside the arena.
    unsafe { view.region().read_words(off, dst) };
    if arena.intact(r) {
        BlobRead::Ok(n)
    } else {
        BlobRead::Lost
    }
}

/// Splits a blob slot payload into the meta bytes and the [`BlobRef`] in its last 16 bytes
/// (spec §10.2). `None` when the payload is shorter than 16 bytes.
pub fn split_descriptor(payload: &[u8]) -> Option<(&[u8], BlobRef)> {
    let at = payload.len().checked_sub(BLOB_REF_LEN)?;
    let (meta, tail) = payload.split_at(at);
    Some((meta, BlobRef::read_from_bytes(tail).ok()?))
}

/// Splits a blob record as a DATA frame carries it (spec §18.4) into the meta bytes and
/// its [`BlobRef`], read little-endian (in a slot it is in the host's byte order:
/// [`split_descriptor`]). `None` when the record is shorter than 16 bytes.
pub fn split_wire_descriptor(record: &[u8]) -> Option<(&[u8], BlobRef)> {
    let (meta, r) = split_descriptor(record)?;
    Some((meta, r.swap_le()))
}

/// Rewrites the [`BlobRef`] in the last 16 bytes of a descriptor read from a slot (host
/// byte order) little-endian, as a DATA frame carries it. `false` when the payload is
/// shorter than 16 bytes.
pub fn descriptor_to_wire(payload: &mut [u8]) -> bool {
    match split_descriptor(payload) {
        Some((_, r)) => set_descriptor_ref(payload, &r.swap_le()),
        None => false,
    }
}

/// Stores `r` into the last 16 bytes of a blob slot payload. `false` when the payload is
/// shorter than 16 bytes.
pub fn set_descriptor_ref(payload: &mut [u8], r: &BlobRef) -> bool {
    match payload.len().checked_sub(BLOB_REF_LEN) {
        Some(at) => {
            payload[at..].copy_from_slice(r.as_bytes());
            true
        }
        None => false,
    }
}

#[cfg(all(test, not(loom)))]
pub(crate) mod tests {
    use super::*;
    use crate::layout::Geometry;
    use crate::region::Region;
    use crate::testutil::Word;
    use std::vec;
    use std::vec::Vec;

    pub(crate) fn ring(buf: &mut Vec<Word>, geo: &Geometry) -> RingView {
        buf.clear();
        buf.resize(geo.total_len().unwrap().div_ceil(8) as usize, Word(0));
        // SAFETY: the buffer outlives the view in each test and is only used through it.
        let region =
            unsafe { Region::from_raw_parts(buf.as_mut_ptr().cast(), buf.len() * 8) }.unwrap();
        // SAFETY: the buffer was just sized for this ring and each test makes one ring per
        // buffer: no other view of it exists yet.
        unsafe { RingView::init(region, geo) }.unwrap()
    }

    /// The verified ring of spec §3: C = 4, M = u32 (S = 32), arena 256.
    pub(crate) fn small(buf: &mut Vec<Word>, readers: u32) -> RingView {
        ring(buf, &Geometry::blob(4, 32, readers, 256).unwrap())
    }

    pub(crate) fn reserved(v: &RingView) -> u64 {
        v.arena_reserved().unwrap().load(Ordering::Relaxed)
    }

    pub(crate) fn pattern(n: usize, seed: u8) -> Vec<u8> {
        (0..n)
            .map(|i| seed.wrapping_mul(31).wrapping_add(i as u8))
            .collect()
    }

    #[test]
    fn spec_example_5_then_70_bytes() {
        let mut buf = vec![];
        let v = small(&mut buf, 2);
        let a = reserve(&v, 5, 0).unwrap();
        let b = reserve(&v, 70, 9).unwrap();
        assert_eq!(
            a,
            BlobRef {
                offset: 0,
                len: 5,
                flags: 0
            }
        );
        assert_eq!(
            b,
            BlobRef {
                offset: 0x40,
                len: 70,
                flags: 9
            }
        );
        assert_eq!(reserved(&v), 0xC0);
    }

    #[test]
    fn empty_and_too_large() {
        let mut buf = vec![];
        let v = small(&mut buf, 2);
        assert_eq!(reserve(&v, 0, 7), Ok(BlobRef::EMPTY));
        assert_eq!(reserved(&v), 0);
        assert_eq!(reserve(&v, 256, 0).map(|r| r.offset), Ok(0));
        let e = reserve(&v, 257, 0).unwrap_err();
        assert_eq!(e, BlobError::TooLarge { len: 257, max: 256 });
        assert_eq!(
            std::format!("{e}"),
            "blob of 257 bytes exceeds the arena limit of 256"
        );
        assert_eq!(reserved(&v), 256);
        let mut dst = [0u8; 4];
        assert_eq!(read_blob(&v, &BlobRef::EMPTY, &mut dst), BlobRead::Ok(0));
    }

    #[test]
    fn a_span_that_would_cross_the_end_starts_on_the_next_lap() {
        let mut buf = vec![];
        let v = small(&mut buf, 2);
        for _ in 0..3 {
            reserve(&v, 64, 0).unwrap();
        }
        assert_eq!(reserved(&v), 192);
        // 64 bytes fit exactly at index 192 (the test uses the unrounded length).
        assert_eq!(reserve(&v, 64, 0).unwrap().offset, 192);
        assert_eq!(reserve(&v, 10, 0).unwrap().offset, 256);
        // At index 64, 193 bytes would cross the end: skip to 512, reserve rounded 256.
        let r = reserve(&v, 193, 0).unwrap();
        assert_eq!((r.offset, reserved(&v)), (512, 768));
        // The unrounded length decides (it matters only for a counter that is not a
        // multiple of 64): 56 bytes at index 200 fit (200 + 56 <= 256) even though the
        // rounded 64 would not.
        let mut buf2 = vec![];
        let v2 = small(&mut buf2, 2);
        v2.arena_reserved().unwrap().store(200, Ordering::Relaxed);
        let r = reserve(&v2, 56, 0).unwrap();
        assert_eq!((r.offset, reserved(&v2)), (200, 264));
        let r = reserve(&v2, 57, 0).unwrap();
        assert_eq!((r.offset, reserved(&v2)), (264, 328));
        // A corrupt counter near u64::MAX is an error, not an overflow.
        v2.arena_reserved()
            .unwrap()
            .store(u64::MAX - 8, Ordering::Relaxed);
        assert_eq!(
            reserve(&v2, 60, 0),
            Err(BlobError::ArenaExhausted {
                reserved: u64::MAX - 8
            })
        );
    }

    /// A `reserved` counter scribbled off the 8-byte grid (4, say) was handed out as the
    /// start of the next blob, which `write_blob` refuses (word copies need 8-aligned
    /// positions) with `OutOfBounds`; every reservation after it was off the grid too (each
    /// adds a multiple of 64), so a writer of small blobs failed every push for good. The
    /// blob now starts at the next word.
    #[test]
    fn a_counter_off_the_word_grid_starts_the_next_blob_at_the_next_word() {
        let mut buf = vec![];
        let v = small(&mut buf, 2);
        let mut dst = [0u8; 64];
        // (counter, where the blob starts, counter after): 8-aligned ones are left as the
        // reference leaves them (the 200 of the test above).
        for (counter, start, after) in [(4, 8, 72), (77, 80, 144), (249, 256, 320), (200, 200, 264)]
        {
            v.arena_reserved()
                .unwrap()
                .store(counter, Ordering::Relaxed);
            let r = reserve(&v, 10, 0).unwrap();
            assert_eq!(
                (r.offset, reserved(&v)),
                (start, after),
                "counter {counter}"
            );
            write_blob(&v, &r, &pattern(10, 5)).unwrap();
            assert_eq!(read_blob(&v, &r, &mut dst), BlobRead::Ok(10));
            assert_eq!(&dst[..10], &pattern(10, 5)[..]);
        }
        // Near the top the word boundary itself would overflow: exhausted, not a panic.
        v.arena_reserved()
            .unwrap()
            .store(u64::MAX - 2, Ordering::Relaxed);
        assert_eq!(
            reserve(&v, 8, 0),
            Err(BlobError::ArenaExhausted {
                reserved: u64::MAX - 2
            })
        );
    }

    #[test]
    fn blob_round_trips_and_a_lapped_blob_is_lost() {
        let mut buf = vec![];
        let v = small(&mut buf, 2);
        let data = pattern(70, 1);
        let r = reserve(&v, data.len(), 0).unwrap();
        write_blob(&v, &r, &data).unwrap();
        let mut dst = [0u8; 128];
        assert_eq!(read_blob(&v, &r, &mut dst), BlobRead::Ok(70));
        assert_eq!(&dst[..70], &data[..]);
        assert_eq!(
            read_blob(&v, &r, &mut [0u8; 69]),
            BlobRead::BufferTooSmall { need: 70 }
        );
        // Fill the rest of the lap: the blob stays intact while reserved - offset <= 256.
        let r2 = reserve(&v, 128, 0).unwrap();
        write_blob(&v, &r2, &pattern(128, 2)).unwrap();
        assert_eq!(reserved(&v), 256);
        assert_eq!(read_blob(&v, &r, &mut dst), BlobRead::Ok(70));
        // The next reservation reuses index 0: the first blob is gone, the second is not.
        let r3 = reserve(&v, 8, 0).unwrap();
        write_blob(&v, &r3, &pattern(8, 3)).unwrap();
        assert_eq!(r3.offset, 256);
        assert_eq!(read_blob(&v, &r, &mut dst), BlobRead::Lost);
        assert_eq!(read_blob(&v, &r2, &mut dst), BlobRead::Ok(128));
        assert_eq!(&dst[..128], &pattern(128, 2)[..]);
    }

    #[test]
    fn bogus_descriptors_are_lost_or_rejected() {
        let mut buf = vec![];
        let v = small(&mut buf, 2);
        let r = reserve(&v, 64, 0).unwrap();
        write_blob(&v, &r, &pattern(64, 4)).unwrap();
        let mut dst = [0u8; 300];
        let bad = [
            // Runs past the end of the arena: (200 & 255) + 64 > 256.
            BlobRef {
                offset: 200,
                len: 64,
                flags: 0,
            },
            // Longer than the arena.
            BlobRef {
                offset: 0,
                len: 257,
                flags: 0,
            },
            // Not word aligned (no writer produces it).
            BlobRef {
                offset: 3,
                len: 8,
                flags: 0,
            },
            // Points past everything reserved so far.
            BlobRef {
                offset: 64,
                len: 8,
                flags: 0,
            },
            // Ends past u64::MAX: its index (248, 192) fits the arena, its end wraps.
            BlobRef {
                offset: u64::MAX - 7,
                len: 8,
                flags: 0,
            },
            BlobRef {
                offset: !63,
                len: 64,
                flags: 0,
            },
        ];
        for b in bad {
            assert_eq!(read_blob(&v, &b, &mut dst), BlobRead::Lost, "{b:?}");
        }
        assert_eq!(
            write_blob(&v, &bad[0], &[0; 64]),
            Err(BlobError::OutOfBounds {
                blob: bad[0],
                capacity: 256
            })
        );
        assert_eq!(
            write_blob(&v, &r, &[0; 3]),
            Err(BlobError::LenMismatch {
                len: 3,
                expected: 64
            })
        );
        // The rejected writes did not touch the arena.
        assert_eq!(read_blob(&v, &r, &mut dst), BlobRead::Ok(64));
        assert_eq!(&dst[..64], &pattern(64, 4)[..]);
    }

    #[test]
    fn no_arena_is_an_error() {
        let mut buf = vec![];
        let v = ring(&mut buf, &Geometry::spmc(4, 32, 8, 0, false).unwrap());
        assert_eq!(reserve(&v, 8, 0), Err(BlobError::NoArena));
        let r = BlobRef {
            offset: 0,
            len: 8,
            flags: 0,
        };
        assert_eq!(read_blob(&v, &r, &mut [0; 8]), BlobRead::Lost);
    }

    #[test]
    fn descriptor_helpers() {
        let mut payload = [0xAAu8; 24];
        let r = BlobRef {
            offset: 0x1234,
            len: 70,
            flags: 5,
        };
        // In a slot the BlobRef is in the host's byte order (ring memory is native).
        assert!(set_descriptor_ref(&mut payload, &r));
        assert_eq!(&payload[..8], &[0xAA; 8]);
        assert_eq!(&payload[8..16], &0x1234u64.to_ne_bytes());
        assert_eq!(&payload[16..20], &70u32.to_ne_bytes());
        assert_eq!(&payload[20..24], &5u32.to_ne_bytes());
        let (meta, got) = split_descriptor(&payload).unwrap();
        assert_eq!((meta, got), (&[0xAAu8; 8][..], r));
        // On the wire it is little-endian, on every host.
        let mut wire = payload;
        assert!(descriptor_to_wire(&mut wire));
        assert_eq!(&wire[..8], &[0xAA; 8]);
        assert_eq!(&wire[8..16], &0x1234u64.to_le_bytes());
        assert_eq!(&wire[16..20], &70u32.to_le_bytes());
        assert_eq!(&wire[20..24], &5u32.to_le_bytes());
        assert_eq!(split_wire_descriptor(&wire), Some((&[0xAAu8; 8][..], r)));
        assert!(split_wire_descriptor(&wire[..15]).is_none());
        assert!(!descriptor_to_wire(&mut wire[..15]));
        assert!(split_descriptor(&payload[..15]).is_none());
        assert!(!set_descriptor_ref(&mut payload[..15], &r));
    }

    /// Random reservations and writes against a byte-level model of the arena: every
    /// reservation obeys §10.3, a blob reads back exactly while `reserved - offset <= C`
    /// and as `Lost` after that, and a blob whose bytes were overwritten is never `Ok`.
    #[test]
    fn arena_model_exact_or_lost() {
        let seeds: u64 = if cfg!(miri) { 2 } else { 200 };
        for seed in 1..=seeds {
            let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15u64);
            let mut next = move || {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng
            };
            let mut buf = vec![];
            let v = small(&mut buf, 0);
            let mut owner = [usize::MAX; 256]; // index of the blob that last wrote each byte
            let mut blobs: Vec<(BlobRef, Vec<u8>)> = vec![];
            for i in 0..24 {
                let x = next();
                let len = (if x % 4 == 0 { x % 257 } else { x % 81 }) as usize;
                let before = reserved(&v);
                let r = reserve(&v, len, i as u32).unwrap();
                let after = reserved(&v);
                if len == 0 {
                    assert_eq!((r, after), (BlobRef::EMPTY, before));
                } else {
                    let ix = before & 255;
                    let start = if ix + len as u64 > 256 {
                        (before | 255) + 1
                    } else {
                        before
                    };
                    assert_eq!(r.offset, start, "seed {seed} blob {i}");
                    assert_eq!(after, start + (len as u64).div_ceil(64) * 64);
                    assert_eq!((r.len, r.flags), (len as u32, i as u32));
                    assert!((r.offset & 255) + len as u64 <= 256);
                }
                let data = pattern(len, i as u8);
                write_blob(&v, &r, &data).unwrap();
                let ix = (r.offset & 255) as usize;
                // Word copies complete the last word: the model marks the rounded span.
                for o in &mut owner[ix..ix + len.div_ceil(8) * 8] {
                    *o = i;
                }
                blobs.push((r, data));
                for (j, (rj, dj)) in blobs.iter().enumerate() {
                    let mut dst = [0u8; 256];
                    let got = read_blob(&v, rj, &mut dst);
                    if rj.len == 0 {
                        assert_eq!(got, BlobRead::Ok(0));
                        continue;
                    }
                    let jx = (rj.offset & 255) as usize;
                    let overwritten = owner[jx..jx + rj.len as usize].iter().any(|&o| o != j);
                    let retained = after - rj.offset <= 256;
                    assert_eq!(
                        got == BlobRead::Ok(dj.len()),
                        retained,
                        "seed {seed} blob {j}"
                    );
                    if overwritten {
                        assert_eq!(got, BlobRead::Lost, "seed {seed} blob {j} overwritten");
                    }
                    if let BlobRead::Ok(n) = got {
                        assert_eq!(&dst[..n], &dj[..], "seed {seed} blob {j}");
                    }
                }
            }
        }
    }
}
