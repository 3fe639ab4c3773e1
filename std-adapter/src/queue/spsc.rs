//! Typed SPSC handles: [`SpscProducer`], [`SpscConsumer`], [`spsc_channel`]: the untyped
//! handles of [`super::spsc_bytes`] with a fixed-size item type on top. They attach only to
//! fixed-size queues (every item is exactly one `T`), never to a queue of byte strings.

use std::io;
use std::marker::PhantomData;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ringwire_core::queue::{PopError, PushError, QueueKind};

use zerocopy::IntoBytes;

use super::mem::{QueueFileError, QueueMem};
use super::spsc_bytes::{SpscBytesConsumer, SpscBytesProducer};
use super::wait::default_wait;
use super::{Item, expect_for, geometry_for};
use crate::wait::WaitStrategy;

/// The producer of an SPSC queue of `T`.
#[derive(Debug)]
pub struct SpscProducer<T: Item> {
    raw: SpscBytesProducer,
    _t: PhantomData<fn(T)>,
}

/// The consumer of an SPSC queue of `T`.
#[derive(Debug)]
pub struct SpscConsumer<T: Item> {
    raw: SpscBytesConsumer,
    _t: PhantomData<fn() -> T>,
}

/// Refuses a queue of byte strings: its items keep their own lengths, so one could be
/// shorter than a `T` (the typed handles' expectations have already checked the kind, the
/// item size and the schema).
fn fixed_size(mem: &QueueMem) -> Result<(), QueueFileError> {
    if mem.geometry().fixed {
        Ok(())
    } else {
        Err(QueueFileError::NotFixedSize(
            mem.path().unwrap_or(Path::new("anonymous")).to_owned(),
        ))
    }
}

/// A producer and a consumer joined by an SPSC queue in anonymous memory.
///
/// ```
/// use std::time::Duration;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let (mut tx, mut rx) = ringwire::queue::spsc_channel::<u64>(1024)?;
/// let sender = std::thread::spawn(move || {
///     for i in 0..1000u64 {
///         tx.push_blocking(&i, Duration::from_secs(5)).expect("room within 5 s");
///     }
///     // A batch moves with one publication.
///     assert_eq!(tx.push_slice(&[1000, 1001])?, 2);
///     Ok::<_, ringwire::core::queue::PushError>(())
/// });
/// for i in 0..1002u64 {
///     assert_eq!(rx.pop_blocking(Duration::from_secs(5))?, Some(i));
/// }
/// sender.join().unwrap()?;
/// assert_eq!(rx.try_pop()?, None);
/// # Ok(())
/// # }
/// ```
pub fn spsc_channel<T: Item>(
    capacity: u64,
) -> Result<(SpscProducer<T>, SpscConsumer<T>), QueueFileError> {
    let g = geometry_for::<T>(QueueKind::Spsc, capacity)
        .map_err(|e| QueueFileError::geometry(None, e))?;
    let mem = Arc::new(QueueMem::anonymous(&g)?);
    Ok((
        SpscProducer::from_raw(SpscBytesProducer::from_mem(mem.clone())?)?,
        SpscConsumer::from_raw(SpscBytesConsumer::from_mem(mem)?)?,
    ))
}

impl<T: Item> SpscProducer<T> {
    /// Creates a fresh queue file of `capacity` items and becomes its producer (the role is
    /// taken before the file can be opened, so no other handle takes it first). On error no
    /// new file is left. On a file system without record locks the handle is made without
    /// its role lock: see [`SpscProducer::is_guarded`].
    pub fn create(path: impl AsRef<Path>, capacity: u64) -> Result<Self, QueueFileError> {
        let path = path.as_ref();
        let g = geometry_for::<T>(QueueKind::Spsc, capacity)
            .map_err(|e| QueueFileError::geometry(Some(path), e))?;
        Self::from_raw(SpscBytesProducer::create_file(path, &g)?)
    }

    /// Becomes the producer of an existing queue file, resuming after its last item. A live
    /// producer of the file makes it fail with [`QueueFileError::RoleTaken`]; on a file
    /// system without record locks nothing can tell, and the handle opens without its role
    /// lock: see [`SpscProducer::is_guarded`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self, QueueFileError> {
        let mem = Arc::new(QueueMem::open(path, expect_for::<T>(QueueKind::Spsc))?);
        Self::from_raw(SpscBytesProducer::from_mem(mem)?)
    }

    fn from_raw(raw: SpscBytesProducer) -> Result<Self, QueueFileError> {
        fixed_size(raw.mem())?;
        Ok(SpscProducer {
            raw,
            _t: PhantomData,
        })
    }

    /// Pushes one item, or fails with [`PushError::Full`].
    #[inline]
    pub fn try_push(&mut self, item: &T) -> Result<(), PushError> {
        self.raw.try_push(item.as_bytes())
    }

    /// Pushes as many of `items` as fit, with one index update, and returns how many.
    #[inline]
    pub fn push_slice(&mut self, items: &[T]) -> Result<usize, PushError> {
        self.raw
            .push_records(items.as_bytes(), std::mem::size_of::<T>())
    }

    /// Pushes one item, waiting up to `timeout` for space; [`PushError::Full`] after that.
    /// Waits by spinning briefly, then sleeping on the queue's futex (see
    /// [`SpscProducer::push_timeout`] to choose the strategy).
    pub fn push_blocking(&mut self, item: &T, timeout: Duration) -> Result<(), PushError> {
        self.push_timeout(item, &mut default_wait(), timeout)
    }

    /// Pushes one item, waiting for space with `wait` (any of the broadcast consumers'
    /// strategies: [`BusySpin`](crate::BusySpin), [`YieldBackoff`](crate::YieldBackoff),
    /// [`FutexWait`](crate::FutexWait), which sleeps on the queue's space futex and never
    /// past the timeout) for up to `timeout`; [`PushError::Full`] after that.
    pub fn push_timeout<W: WaitStrategy>(
        &mut self,
        item: &T,
        wait: &mut W,
        timeout: Duration,
    ) -> Result<(), PushError> {
        self.raw.push_timeout(item.as_bytes(), wait, timeout)
    }

    /// Free slots.
    pub fn free(&mut self) -> u64 {
        self.raw.free()
    }

    /// See [`SpscBytesProducer::is_abandoned`]: the consumer of this anonymous channel was
    /// dropped.
    pub fn is_abandoned(&self) -> bool {
        self.raw.is_abandoned()
    }

    /// See [`SpscBytesProducer::is_guarded`]: false only on a file system without record
    /// locks, where nothing refuses a second producer of the file.
    pub fn is_guarded(&self) -> bool {
        self.raw.is_guarded()
    }

    /// True when the path no longer names this queue's file (see
    /// [`QueueMem::is_replaced`]): items pushed here reach no consumer that opens the path.
    pub fn is_replaced(&self) -> bool {
        self.raw.mem().is_replaced()
    }

    /// See [`QueueMem::flush`].
    pub fn flush(&self) -> io::Result<()> {
        self.raw.flush()
    }
}

impl<T: Item> SpscConsumer<T> {
    /// Becomes the consumer of an existing queue file, resuming after the last item the
    /// previous consumer handed back: its oldest unread item, unless that consumer was killed
    /// holding popped items, which then come again (see
    /// [`SpscBytesConsumer::release_every`]). A live consumer of the file makes it fail
    /// with [`QueueFileError::RoleTaken`]; on a file system without record locks nothing
    /// can tell, and the handle opens without its role lock: see
    /// [`SpscConsumer::is_guarded`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self, QueueFileError> {
        let mem = Arc::new(QueueMem::open(path, expect_for::<T>(QueueKind::Spsc))?);
        Self::from_raw(SpscBytesConsumer::from_mem(mem)?)
    }

    fn from_raw(raw: SpscBytesConsumer) -> Result<Self, QueueFileError> {
        fixed_size(raw.mem())?;
        Ok(SpscConsumer {
            raw,
            _t: PhantomData,
        })
    }

    /// Pops one item; `Ok(None)` when the queue is empty.
    #[inline]
    pub fn try_pop(&mut self) -> Result<Option<T>, PopError> {
        Self::pop_from(&mut self.raw)
    }

    /// One `T` from `raw`: every item of a fixed-size queue is exactly one `T` (checked on
    /// attach).
    #[inline(always)]
    fn pop_from(raw: &mut SpscBytesConsumer) -> Result<Option<T>, PopError> {
        let mut t = T::new_zeroed();
        Ok(raw.try_pop_fixed(t.as_mut_bytes())?.then_some(t))
    }

    /// Pops up to `out.len()` items with one index update and returns how many.
    #[inline]
    pub fn pop_slice(&mut self, out: &mut [T]) -> Result<usize, PopError> {
        self.raw
            .pop_records(out.as_mut_bytes(), std::mem::size_of::<T>())
    }

    /// Pops one item, waiting up to `timeout` for one; `Ok(None)` after that. Waits by
    /// spinning briefly, then sleeping on the queue's futex (see
    /// [`SpscConsumer::pop_timeout`] to choose the strategy).
    pub fn pop_blocking(&mut self, timeout: Duration) -> Result<Option<T>, PopError> {
        self.pop_timeout(&mut default_wait(), timeout)
    }

    /// Pops one item, waiting for one with `wait` (as in
    /// [`SpscProducer::push_timeout`]; a [`FutexWait`](crate::FutexWait) sleeps on the
    /// queue's data futex) for up to `timeout`; `Ok(None)` after that.
    pub fn pop_timeout<W: WaitStrategy>(
        &mut self,
        wait: &mut W,
        timeout: Duration,
    ) -> Result<Option<T>, PopError> {
        self.raw.wait_for_item(wait, timeout, Self::pop_from)
    }

    /// Items ready to pop.
    pub fn ready(&mut self) -> Result<u64, PopError> {
        self.raw.ready()
    }

    /// See [`SpscBytesConsumer::is_guarded`]: false only on a file system without record
    /// locks, where nothing refuses a second consumer of the file.
    pub fn is_guarded(&self) -> bool {
        self.raw.is_guarded()
    }

    /// See [`SpscBytesConsumer::is_abandoned`]: the producer of this anonymous channel was
    /// dropped.
    pub fn is_abandoned(&self) -> bool {
        self.raw.is_abandoned()
    }

    /// See [`SpscBytesConsumer::release_every`].
    pub fn release_every(&self) -> u64 {
        self.raw.release_every()
    }

    /// See [`SpscBytesConsumer::set_release_every`].
    pub fn set_release_every(&mut self, n: u64) {
        self.raw.set_release_every(n);
    }

    /// See [`SpscBytesConsumer::release`].
    pub fn release(&mut self) {
        self.raw.release();
    }

    /// True when the path no longer names this queue's file (see
    /// [`QueueMem::is_replaced`]): a producer that opens the path pushes elsewhere.
    pub fn is_replaced(&self) -> bool {
        self.raw.mem().is_replaced()
    }

    /// See [`QueueMem::flush`].
    pub fn flush(&self) -> io::Result<()> {
        self.raw.flush()
    }
}
