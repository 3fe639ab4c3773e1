//! The blob arena (spec §10): reserving arena space, writing and validating blob bytes, the
//! "BlobRef is the last 16 bytes of the slot payload" rule, and a small writer/reader pair
//! that makes a blob ring usable on its own.
//!
//! The arena is a byte ring addressed by a global position (`reserved` never wraps). A
//! writer reserves 64-byte-rounded spans with a CAS, copies the bytes, then publishes a
//! descriptor slot. A reader copies the bytes and accepts them only when the arena has not
//! been reserved a full lap past the blob, checked before and after the copy; the writer's
//! release fence after the reservation makes any overwritten word visible as a newer
//! `reserved` to the reader's acquire fence after the copy.

use core::fmt;

use zerocopy::{FromBytes, IntoBytes};

use super::registry::{self, RegistryError};
use crate::layout::{BlobRef, oldest_retained};
use crate::ring::{RingView, SlotRead};
use crate::sync::{A64, Ordering, fence};

/// Bytes of a [`BlobRef`] at the end of a blob ring's slot payload.
pub const BLOB_REF_LEN: usize = 16;

/// Why a blob operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
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
/// lap instead. Only the ring's writer(s) call this; it is lock-free among them.
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
        // The lap test uses the unrounded length, as the reference does.
        let start = if (cur & mask) + len64 > arena.cap {
            (cur | mask).checked_add(1)
        } else {
            Some(cur)
        };
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

fn check_descriptor(view: &RingView, len: usize) -> Result<usize, BlobError> {
    let need = view.geometry().record_len();
    if len != need {
        return Err(BlobError::DescriptorLen { len, need });
    }
    Ok(need)
}

/// What [`BlobWriter::push`] published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Pushed {
    /// The message's sequence number.
    pub seq: u64,
    /// The descriptor it was published with.
    pub blob: BlobRef,
    /// Readers sleep on the futex: the caller must issue FUTEX_WAKE (spec §11).
    pub wake: bool,
}

/// The single writer of a blob ring: reserve, copy, publish a descriptor (spec §10.3
/// step 4 and §4.2).
#[derive(Debug)]
pub struct BlobWriter {
    view: RingView,
    next: u64,
}

impl BlobWriter {
    /// A writer for `view`, continuing after its current `write_seq` (1 on a fresh ring).
    /// The caller must be the ring's only writer.
    pub fn new(view: RingView) -> Result<BlobWriter, BlobError> {
        if Arena::of(&view).is_none() {
            return Err(BlobError::NoArena);
        }
        // Acquire: we continue after whatever an earlier writer of this ring published.
        let next = view.write_seq().load(Ordering::Acquire).saturating_add(1);
        Ok(BlobWriter { view, next })
    }

    /// The ring.
    pub fn view(&self) -> &RingView {
        &self.view
    }

    /// The sequence the next push will get.
    pub fn next_seq(&self) -> u64 {
        self.next
    }

    /// Publishes one message: `descriptor` is the whole slot payload (`element_size - 8`
    /// bytes, meta first); its last 16 bytes are overwritten with the new [`BlobRef`]
    /// (spec §10.2; meta types aligned to 32 or more break that rule, as in the reference).
    pub fn push(
        &mut self,
        descriptor: &mut [u8],
        blob: &[u8],
        flags: u32,
    ) -> Result<Pushed, BlobError> {
        check_descriptor(&self.view, descriptor.len())?;
        let r = reserve(&self.view, blob.len(), flags)?;
        write_blob(&self.view, &r, blob)?;
        set_descriptor_ref(descriptor, &r);
        let seq = self.next;
        self.view.write_slot(seq, descriptor);
        let wake = self.view.publish(seq);
        self.next += 1;
        Ok(Pushed { seq, blob: r, wake })
    }
}

/// One message received by [`BlobReader::recv`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Received {
    /// The message's sequence number.
    pub seq: u64,
    /// Blob bytes written to the caller's buffer.
    pub len: usize,
}

/// A reader of a blob ring: starts at the oldest retained message, handles laps as spec
/// §4.3 says and skips lost blobs (§10.4), counting both as lapped. Optionally registered
/// (spec §5, §9): it then publishes its cursor after every receive or skip and unregisters
/// when dropped.
#[derive(Debug)]
pub struct BlobReader {
    view: RingView,
    cursor: u64,
    lapped: u64,
    /// (registry slot, pid) while registered.
    registration: Option<(u32, u32)>,
}

impl BlobReader {
    /// A reader starting at `oldest_retained(write_seq, C)` (spec §10.4 step 3).
    pub fn new(view: RingView) -> Result<BlobReader, BlobError> {
        if Arena::of(&view).is_none() {
            return Err(BlobError::NoArena);
        }
        // Acquire: pairs with the writer's release of write_seq.
        let w = view.write_seq().load(Ordering::Acquire);
        let cursor = oldest_retained(w, view.capacity());
        Ok(BlobReader {
            view,
            cursor,
            lapped: 0,
            registration: None,
        })
    }

    /// Registers this reader under `pid` with its current cursor (ringfire's
    /// `BlobConsumer` uses the name `"anonymous"`). Returns the slot; a second call returns
    /// the slot it already holds. The next [`recv`](Self::recv) re-runs the lap check.
    pub fn register(
        &mut self,
        pid: u32,
        name: &str,
        is_alive: impl Fn(u32) -> bool,
    ) -> Result<u32, RegistryError> {
        if let Some((slot, _)) = self.registration {
            return Ok(slot);
        }
        let slot = registry::register(&self.view, pid, name, self.cursor, is_alive)?;
        self.registration = Some((slot, pid));
        Ok(slot)
    }

    /// The registry slot this reader holds, if registered.
    pub fn registry_slot(&self) -> Option<u32> {
        self.registration.map(|(slot, _)| slot)
    }

    /// Gives the registry slot back (also done on drop). A no-op when not registered.
    pub fn unregister(&mut self) -> Result<(), RegistryError> {
        match self.registration.take() {
            Some((slot, pid)) => registry::unregister(&self.view, slot, pid),
            None => Ok(()),
        }
    }

    /// The ring.
    pub fn view(&self) -> &RingView {
        &self.view
    }

    /// The next sequence to read.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// Messages skipped: overwritten before they were read, or whose blob was lost.
    pub fn lapped_count(&self) -> u64 {
        self.lapped
    }

    /// Receives the next message: its slot payload into `descriptor` (`element_size - 8`
    /// bytes; the meta is everything but the last 16) and its blob into `blob`. `Ok(None)`
    /// when caught up. A `blob` buffer that is too small is an error and the message stays
    /// unread.
    pub fn recv(
        &mut self,
        descriptor: &mut [u8],
        blob: &mut [u8],
    ) -> Result<Option<Received>, BlobError> {
        let before = self.cursor;
        let got = self.recv_inner(descriptor, blob);
        if self.cursor != before
            && let Some((slot, _)) = self.registration
        {
            // The slot index came from register, so this cannot fail.
            let _ = registry::publish_cursor(&self.view, slot, self.cursor);
        }
        got
    }

    fn recv_inner(
        &mut self,
        descriptor: &mut [u8],
        blob: &mut [u8],
    ) -> Result<Option<Received>, BlobError> {
        check_descriptor(&self.view, descriptor.len())?;
        let cap = self.view.capacity();
        loop {
            match self.view.read_slot(self.cursor, descriptor) {
                SlotRead::Ok => {
                    // The length was checked above, so the split cannot fail.
                    let Some((_, r)) = split_descriptor(descriptor) else {
                        return Err(BlobError::DescriptorLen {
                            len: descriptor.len(),
                            need: BLOB_REF_LEN,
                        });
                    };
                    match read_blob(&self.view, &r, blob) {
                        BlobRead::Ok(len) => {
                            let seq = self.cursor;
                            self.cursor += 1;
                            return Ok(Some(Received { seq, len }));
                        }
                        BlobRead::Lost => {
                            self.lapped += 1;
                            self.cursor += 1;
                        }
                        BlobRead::BufferTooSmall { need } => {
                            return Err(BlobError::BufferTooSmall {
                                len: blob.len(),
                                need,
                            });
                        }
                    }
                }
                SlotRead::Pending => return Ok(None),
                SlotRead::Overwritten { seen } => {
                    // Acquire: pairs with the writer's release of write_seq.
                    let w = self.view.write_seq().load(Ordering::Acquire);
                    let oldest = oldest_retained(w.max(seen), cap);
                    if oldest > self.cursor {
                        self.lapped += oldest - self.cursor;
                        self.cursor = oldest;
                    } else {
                        return Ok(None);
                    }
                }
            }
        }
    }
}

impl Drop for BlobReader {
    fn drop(&mut self) {
        // Nothing to do if the slot was already pruned and reused by another reader.
        let _ = self.unregister();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::layout::{Geometry, arena_off};
    use crate::region::Region;
    use std::vec;
    use std::vec::Vec;

    fn ring(buf: &mut Vec<u64>, geo: &Geometry) -> RingView {
        buf.clear();
        buf.resize(geo.total_len().unwrap().div_ceil(8) as usize, 0);
        // SAFETY: the buffer outlives the view in each test and is only used through it.
        let region =
            unsafe { Region::from_raw_parts(buf.as_mut_ptr().cast(), buf.len() * 8) }.unwrap();
        let view = RingView::init(region, geo).unwrap();
        crate::broadcast::registry::tests::forget_init_stores(&view);
        view
    }

    /// The verified ring of spec §3: C = 4, M = u32 (S = 32), arena 256.
    fn small(buf: &mut Vec<u64>, readers: u32) -> RingView {
        ring(buf, &Geometry::blob(4, 32, readers, 256).unwrap())
    }

    fn reserved(v: &RingView) -> u64 {
        v.arena_reserved().unwrap().load(Ordering::Relaxed)
    }

    fn pattern(n: usize, seed: u8) -> Vec<u8> {
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
        assert_eq!(BlobWriter::new(v).unwrap_err(), BlobError::NoArena);
        assert_eq!(BlobReader::new(v).unwrap_err(), BlobError::NoArena);
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
        assert!(set_descriptor_ref(&mut payload, &r));
        assert_eq!(&payload[..8], &[0xAA; 8]);
        assert_eq!(&payload[8..16], &0x1234u64.to_le_bytes());
        assert_eq!(&payload[16..20], &70u32.to_le_bytes());
        assert_eq!(&payload[20..24], &5u32.to_le_bytes());
        let (meta, got) = split_descriptor(&payload).unwrap();
        assert_eq!((meta, got), (&[0xAAu8; 8][..], r));
        assert!(split_descriptor(&payload[..15]).is_none());
        assert!(!set_descriptor_ref(&mut payload[..15], &r));
    }

    #[test]
    fn writer_and_reader_deliver_meta_and_blobs() {
        let mut buf = vec![];
        let v = small(&mut buf, 2);
        let mut w = BlobWriter::new(v).unwrap();
        let mut rd = BlobReader::new(v).unwrap();
        let mut desc = [0u8; 24];
        let mut out = [0u8; 256];
        assert_eq!(rd.recv(&mut desc, &mut out), Ok(None));
        for (i, n) in [5usize, 70, 0].into_iter().enumerate() {
            let mut d = [0u8; 24];
            d[..4].copy_from_slice(&(100 + i as u32).to_ne_bytes());
            let p = w.push(&mut d, &pattern(n, i as u8), 0).unwrap();
            assert_eq!((p.seq, p.blob.len, p.wake), (i as u64 + 1, n as u32, false));
        }
        for (i, n) in [5usize, 70, 0].into_iter().enumerate() {
            let got = rd.recv(&mut desc, &mut out).unwrap().unwrap();
            assert_eq!((got.seq, got.len), (i as u64 + 1, n));
            assert_eq!(&desc[..4], &(100 + i as u32).to_ne_bytes());
            assert_eq!(&out[..n], &pattern(n, i as u8)[..]);
        }
        assert_eq!(rd.recv(&mut desc, &mut out), Ok(None));
        assert_eq!((rd.cursor(), rd.lapped_count()), (4, 0));
        assert_eq!(
            rd.recv(&mut [0u8; 16], &mut out),
            Err(BlobError::DescriptorLen { len: 16, need: 24 })
        );
        // A buffer too small leaves the message unread.
        w.push(&mut [0u8; 24], &pattern(40, 9), 0).unwrap();
        assert_eq!(
            rd.recv(&mut desc, &mut out[..39]),
            Err(BlobError::BufferTooSmall { len: 39, need: 40 })
        );
        assert_eq!(rd.recv(&mut desc, &mut out).unwrap().unwrap().seq, 4);
    }

    #[test]
    fn lost_blobs_and_lapped_slots_are_counted_never_torn() {
        let mut buf = vec![];
        let v = small(&mut buf, 2);
        let mut w = BlobWriter::new(v).unwrap();
        let mut rd = BlobReader::new(v).unwrap();
        // Four 100-byte blobs (128 rounded) into a 256-byte arena: only the last two survive,
        // while all four descriptors are still in the 4-slot ring.
        for i in 0..4u8 {
            w.push(&mut [i; 24], &pattern(100, i), 0).unwrap();
        }
        let (mut desc, mut out) = ([0u8; 24], [0u8; 128]);
        let got = rd.recv(&mut desc, &mut out).unwrap().unwrap();
        assert_eq!((got.seq, rd.lapped_count()), (3, 2));
        assert_eq!(&out[..100], &pattern(100, 2)[..]);
        assert_eq!(desc[0], 2);
        // Lapped slots: six more small pushes put seq 5..10 in the ring; the reader at 4
        // is lapped to oldest_retained(10, 4) = 7.
        for i in 4..10u8 {
            w.push(&mut [i; 24], &pattern(8, i), 0).unwrap();
        }
        let got = rd.recv(&mut desc, &mut out).unwrap().unwrap();
        assert_eq!((got.seq, rd.lapped_count()), (7, 2 + 3));
        assert_eq!(&out[..8], &pattern(8, 6)[..]);
    }

    #[test]
    fn a_registered_reader_publishes_its_cursor_and_leaves_on_drop() {
        use crate::broadcast::registry::{gate_limit, live_reader, min_live_cursor};
        let mut buf = vec![];
        let v = small(&mut buf, 2);
        let mut w = BlobWriter::new(v).unwrap();
        let mut rd = BlobReader::new(v).unwrap();
        assert_eq!(rd.registry_slot(), None);
        assert_eq!(rd.register(4242, "anonymous", |_| true), Ok(0));
        assert_eq!(rd.register(4242, "anonymous", |_| true), Ok(0));
        assert_eq!(rd.registry_slot(), Some(0));
        assert_eq!(
            live_reader(&v, 0).map(|r| (r.pid, r.cursor)),
            Some((4242, 1))
        );
        assert_eq!(gate_limit(&v, 1), 3); // min(1 + 4, 1 + 2)
        for i in 0..3u8 {
            w.push(&mut [i; 24], &pattern(100, i), 0).unwrap();
        }
        let (mut desc, mut out) = ([0u8; 24], [0u8; 128]);
        // Blob 1 was overwritten by blob 3: skipped, then 2 delivered; cursor 3 published.
        assert_eq!(rd.recv(&mut desc, &mut out).unwrap().unwrap().seq, 2);
        assert_eq!(rd.lapped_count(), 1);
        assert_eq!(min_live_cursor(&v), Some(3));
        assert_eq!(rd.recv(&mut desc, &mut out).unwrap().unwrap().seq, 3);
        assert_eq!(min_live_cursor(&v), Some(4));
        // Caught up: nothing changes, nothing is published.
        assert_eq!(rd.recv(&mut desc, &mut out), Ok(None));
        assert_eq!(min_live_cursor(&v), Some(4));
        drop(rd);
        assert_eq!(min_live_cursor(&v), None);
        // Explicit unregister, then drop: the second release is a no-op.
        let mut rd = BlobReader::new(v).unwrap();
        assert_eq!(rd.register(7, "b", |_| true), Ok(0));
        assert_eq!(rd.unregister(), Ok(()));
        assert_eq!(rd.unregister(), Ok(()));
        assert_eq!(min_live_cursor(&v), None);
        // A ring with zero registry slots cannot take a registration.
        let mut buf0 = vec![];
        let v0 = small(&mut buf0, 0);
        let mut rd0 = BlobReader::new(v0).unwrap();
        assert_eq!(
            rd0.register(7, "c", |_| true),
            Err(crate::broadcast::registry::RegistryError::Full { count: 0 })
        );
    }

    #[test]
    fn bogus_descriptor_in_a_slot_is_skipped_and_counted() {
        let mut buf = vec![];
        let v = small(&mut buf, 2);
        let mut w = BlobWriter::new(v).unwrap();
        w.push(&mut [1; 24], &pattern(8, 1), 0).unwrap();
        // A descriptor whose span runs past the end of the arena, written by someone else.
        let mut d = [2u8; 24];
        set_descriptor_ref(
            &mut d,
            &BlobRef {
                offset: 250,
                len: 8,
                flags: 0,
            },
        );
        v.write_slot(2, &d);
        v.publish(2);
        let mut w = BlobWriter::new(v).unwrap();
        w.push(&mut [3; 24], &pattern(8, 3), 0).unwrap();
        let mut rd = BlobReader::new(v).unwrap();
        let (mut desc, mut out) = ([0u8; 24], [0u8; 16]);
        assert_eq!(rd.recv(&mut desc, &mut out).unwrap().unwrap().seq, 1);
        assert_eq!(rd.recv(&mut desc, &mut out).unwrap().unwrap().seq, 3);
        assert_eq!(rd.lapped_count(), 1);
    }

    fn le32(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }

    fn le64(b: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
    }

    /// The bytes of a blob ring built by RingView::init, against spec §2, §3 and §10.1.
    #[test]
    fn blob_ring_bytes_match_the_spec() {
        // (readers, slots_offset, arena_offset, file size): the verified examples of §3.
        for (readers, slots, arena, size) in [
            (32u32, 0x880u64, 0x900u64, 2624usize),
            (2, 0x100, 0x180, 704),
        ] {
            let mut buf = vec![];
            let geo = Geometry::blob(4, 32, readers, 256).unwrap();
            assert_eq!(geo.total_len(), Some(size as u64));
            let v = ring(&mut buf, &geo);
            // Publish one message so the slot and arena bytes can be checked too.
            let mut w = BlobWriter::new(v).unwrap();
            let mut d = [0u8; 24];
            d[..4].copy_from_slice(&0xDEAD_BEEFu32.to_le_bytes());
            w.push(&mut d, b"hello", 0).unwrap();
            let b: &[u8] = zerocopy::IntoBytes::as_bytes(&buf[..]);
            assert_eq!(b.len(), size);
            assert_eq!(&b[0..8], b"ERIFGNIR");
            assert_eq!(le32(b, 8), 2, "version");
            assert_eq!(le32(b, 12), 32, "element_size");
            assert_eq!(le64(b, 16), 4, "capacity");
            assert_eq!(le64(b, 24), 3, "mask");
            assert_eq!(le64(b, 32), 1, "write_seq");
            assert_eq!(le64(b, 40), 0, "claim_seq");
            assert_eq!(le32(b, 48), 0x0311, "flags");
            assert_eq!(le64(b, 64), 0, "read_seq");
            assert_eq!(le64(b, 72), 0, "schema_sig");
            assert_eq!(le64(b, 80), arena, "arena_offset");
            assert_eq!(le64(b, 88), 256, "arena_size");
            assert_eq!(le32(b, 96), 128, "reader_registry_offset");
            assert_eq!(le32(b, 100), readers, "reader_registry_count");
            assert_eq!(le64(b, 104), slots, "slots_offset");
            assert!(b[112..128].iter().all(|&x| x == 0), "header padding");
            let reg_end = 128 + 64 * readers as usize;
            assert!(b[128..reg_end].iter().all(|&x| x == 0), "registry zeroed");
            // Slot of seq 1: sequence word, meta u32 + 4 padding, BlobRef {0, 5, 0}.
            let s1 = slots as usize + 32;
            assert_eq!(le64(b, s1), 1);
            assert_eq!(le32(b, s1 + 8), 0xDEAD_BEEF);
            assert_eq!(
                (le64(b, s1 + 16), le32(b, s1 + 24), le32(b, s1 + 28)),
                (0, 5, 0)
            );
            for i in [0usize, 2, 3] {
                assert_eq!(le64(b, slots as usize + 32 * i), 0, "slot {i} seq");
            }
            // Arena header: capacity, mask, reserved (one 64-byte span), zero padding.
            let a = arena as usize;
            assert_eq!(le64(b, a + arena_off::CAPACITY), 256);
            assert_eq!(le64(b, a + arena_off::MASK), 255);
            assert_eq!(le64(b, a + arena_off::RESERVED), 64);
            assert!(b[a + 24..a + 64].iter().all(|&x| x == 0));
            assert_eq!(&b[a + 64..a + 69], b"hello");
        }
        // A fresh ring's arena starts with reserved 0.
        let mut buf = vec![];
        let v = small(&mut buf, 2);
        assert_eq!(reserved(&v), 0);
    }
}
