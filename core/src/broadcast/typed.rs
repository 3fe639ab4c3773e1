//! [`TypedConsumer`]: a [`Consumer`] that hands out records as a zerocopy type.

use core::marker::PhantomData;
use core::mem::{MaybeUninit, align_of, size_of};

use zerocopy::FromBytes;

use super::Consumer;
use crate::error::AttachError;
use crate::layout::{slot_payload_offset, slot_stride};

/// A consumer of records of type `T`, whose bytes are the slot payload at offset 8, or at
/// offset `align_of::<T>()` for an over-aligned type (spec §4.1: `align(T) > 8` gives the
/// stride `roundup(align + size, align)`; a 64-byte-aligned 64-byte record then has its
/// sequence word and its payload on two lines of their own, which no neighbouring slot
/// shares).
///
/// `T` must accept any bytes ([`FromBytes`]), because a ring is written by another process
/// (or another host, through a mirror).
#[derive(Debug)]
pub struct TypedConsumer<T> {
    inner: Consumer,
    _t: PhantomData<fn() -> T>,
}

impl<T> TypedConsumer<T> {
    /// The untyped consumer (cursor, lapped count, lag, seek).
    #[inline(always)]
    pub fn inner(&self) -> &Consumer {
        &self.inner
    }

    /// The untyped consumer, mutably.
    #[inline(always)]
    pub fn inner_mut(&mut self) -> &mut Consumer {
        &mut self.inner
    }
}

impl<T: FromBytes> TypedConsumer<T> {
    /// Wraps `inner`, checking that the ring's slot stride is `T`'s (spec §1.3 check 4).
    pub fn new(inner: Consumer) -> Result<Self, AttachError> {
        let want = slot_stride(size_of::<T>(), align_of::<T>());
        let found = inner.view().geometry().element_size;
        if want as u64 != u64::from(found) {
            return Err(AttachError::ElementSizeMismatch {
                expected: u32::try_from(want).unwrap_or(u32::MAX),
                found,
            });
        }
        Ok(TypedConsumer {
            inner,
            _t: PhantomData,
        })
    }

    /// One record without cursor publication.
    #[inline(always)]
    fn recv_value(&mut self) -> Option<(u64, T)> {
        self.recv_value_with::<false>()
    }

    /// One record without cursor publication; `EAGER` selects the polling read
    /// ([`Consumer::try_recv_eager`]). This and the receives above it are always inlined,
    /// down to the slot read of [`Consumer::recv_one_at`], so the copy has `T`'s constant
    /// length and the record is not handed back through memory by a call left out of line.
    #[inline(always)]
    fn recv_value_with<const EAGER: bool>(&mut self) -> Option<(u64, T)> {
        let mut v = MaybeUninit::<T>::zeroed();
        // SAFETY: `v` is `size_of::<T>()` initialised (zeroed) bytes that only this slice
        // refers to while it lives.
        let bytes =
            unsafe { core::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), size_of::<T>()) };
        let seq = self
            .inner
            .recv_one_at::<EAGER>(slot_payload_offset(align_of::<T>()), bytes)?;
        // SAFETY: every byte of `v` is initialised (zeroed, then overwritten with slot bytes)
        // and `T: FromBytes` makes any byte pattern a valid `T`.
        Some((seq, unsafe { v.assume_init() }))
    }

    /// The next record and its sequence, or `None` when there is nothing new.
    #[inline(always)]
    pub fn try_recv_seq(&mut self) -> Option<(u64, T)> {
        let before = self.inner.cursor();
        let r = self.recv_value();
        if self.inner.cursor() != before {
            self.inner.publish_cursor();
        }
        r
    }

    /// The next record, or `None` when there is nothing new.
    #[inline(always)]
    pub fn try_recv(&mut self) -> Option<T> {
        self.try_recv_seq().map(|(_, v)| v)
    }

    /// [`TypedConsumer::try_recv_seq`] for a reader that polls in a loop until the next
    /// record arrives: the payload is copied together with the sequence load on every poll
    /// (see [`Consumer::try_recv_eager`]). Same results as `try_recv_seq`.
    #[inline]
    pub fn try_recv_seq_eager(&mut self) -> Option<(u64, T)> {
        let before = self.inner.cursor();
        let r = self.recv_value_with::<true>();
        if self.inner.cursor() != before {
            self.inner.publish_cursor();
        }
        r
    }

    /// [`TypedConsumer::try_recv`] with the polling read of
    /// [`TypedConsumer::try_recv_seq_eager`].
    #[inline]
    pub fn try_recv_eager(&mut self) -> Option<T> {
        self.try_recv_seq_eager().map(|(_, v)| v)
    }

    /// Fills `out` from the front with the next records; returns how many were received.
    /// The cursor is published to the registry once, at the end.
    pub fn recv_batch(&mut self, out: &mut [T]) -> usize {
        let before = self.inner.cursor();
        let mut got = 0;
        for slot in out.iter_mut() {
            match self.recv_value() {
                Some((_, v)) => *slot = v,
                None => break,
            }
            got += 1;
        }
        if self.inner.cursor() != before {
            self.inner.publish_cursor();
        }
        got
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use zerocopy::{Immutable, IntoBytes};

    use super::*;
    use crate::broadcast::{NoWake, Producer, StartMode};
    use crate::testutil::spmc_ring;

    /// A record with padding: FromBytes accepts it, IntoBytes would not.
    #[repr(C)]
    #[derive(FromBytes, Clone, Copy, Debug, PartialEq)]
    struct Tick {
        px: f64,
        qty: u32,
        side: u8,
    }

    #[repr(C)]
    #[derive(IntoBytes, Immutable)]
    struct TickBytes {
        px: f64,
        qty: u32,
        side: u8,
        pad: [u8; 3],
    }

    #[test]
    fn typed_records_round_trip() {
        let (_m, view) = spmc_ring(4, slot_stride(16, 8));
        let mut p = Producer::new(view, NoWake).unwrap();
        for i in 1..=3u32 {
            let t = TickBytes {
                px: f64::from(i) * 1.5,
                qty: i * 10,
                side: i as u8,
                pad: [0xEE; 3],
            };
            p.push(t.as_bytes()).unwrap();
        }
        let c = Consumer::new(view, StartMode::Oldest);
        let mut c = TypedConsumer::<Tick>::new(c).unwrap();
        let want = |i: u32| Tick {
            px: f64::from(i) * 1.5,
            qty: i * 10,
            side: i as u8,
        };
        assert_eq!(c.try_recv_seq(), Some((1, want(1))));
        let mut out = [want(0); 4];
        assert_eq!(c.recv_batch(&mut out), 2);
        assert_eq!(out[..2], [want(2), want(3)]);
        assert_eq!(c.try_recv(), None);
        assert_eq!(c.inner().cursor(), 4);
    }

    /// Over-aligned (spec §4.1): a 32-byte type aligned to 32 has the stride 64 and its
    /// bytes at +32; the slot bytes [8, 32) are neither written nor read.
    #[repr(C, align(32))]
    #[derive(FromBytes, IntoBytes, Immutable, Clone, Copy, Debug, PartialEq)]
    struct Wide([u64; 4]);

    #[test]
    fn over_aligned_records_sit_at_their_alignment() {
        let stride = slot_stride(32, 32);
        assert_eq!((stride, slot_payload_offset(32)), (64, 32));
        let (_m, view) = spmc_ring(2, stride);
        let mut p = Producer::new(view, NoWake).unwrap();
        // Records 1 and 2 fill both slots' raw bytes [8, 64) with 0xEE.
        p.push(&[0xEE; 56]).unwrap();
        p.push(&[0xEE; 56]).unwrap();
        let w = |i: u64| Wide([i, i * 3, !i, i << 7]);
        assert_eq!(p.push_at(32, w(3).as_bytes()), Ok(3));
        assert_eq!(p.push_batch_at(32, [w(4).as_bytes()]), Ok(4..5));
        for seq in [3u64, 4] {
            let mut raw = [0u8; 56];
            // SAFETY: the slot's raw payload [8, 64) lies inside the heap ring.
            unsafe {
                view.region()
                    .read_words(view.slot_offset(seq) + 8, &mut raw)
            };
            assert_eq!(
                raw[..24],
                [0xEE; 24],
                "slot of {seq}: bytes [8, 32) were written"
            );
            assert_eq!(raw[24..], *w(seq).as_bytes(), "slot of {seq}");
        }
        let c = Consumer::new(view, StartMode::Sequence(3));
        let mut c = TypedConsumer::<Wide>::new(c).unwrap();
        assert_eq!(c.try_recv_seq(), Some((3, w(3))));
        assert_eq!(c.try_recv_seq_eager(), Some((4, w(4))));
        assert_eq!(c.try_recv_eager(), None);
        // The stride is this layer's only type check (std's attach adds the schema
        // signature): [u8; 56] has the same stride 64, [u64; 4] (align 8) has 40.
        let c = Consumer::new(view, StartMode::Sequence(3));
        assert!(TypedConsumer::<[u8; 56]>::new(c).is_ok());
        let c = Consumer::new(view, StartMode::Sequence(3));
        assert_eq!(
            TypedConsumer::<[u64; 4]>::new(c).unwrap_err(),
            AttachError::ElementSizeMismatch {
                expected: 40,
                found: 64
            }
        );
    }

    #[test]
    fn wrong_stride_is_refused() {
        let (_m, view) = spmc_ring(4, 16);
        let c = Consumer::new(view, StartMode::Oldest);
        assert_eq!(
            TypedConsumer::<[u64; 2]>::new(c).unwrap_err(),
            AttachError::ElementSizeMismatch {
                expected: 24,
                found: 16
            }
        );
    }
}
