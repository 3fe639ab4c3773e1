//! Typed SPSC handles: [`SpscProducer`], [`SpscConsumer`], [`spsc_channel`].

use std::fs::File;
use std::io;
use std::marker::PhantomData;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ringwire_core::queue::{self as q, PopError, PushError, QueueKind};

use zerocopy::IntoBytes;

use super::mem::{QueueFileError, QueueMem};
use super::wait::{Side, before, deadline_after, default_wait, notify, wait_side};
use super::{Item, expect_for, geometry_for, wrong_kind};
use crate::wait::WaitStrategy;

const PRODUCER_LOCK_BYTE: i64 = q::qhdr::ENQ as i64;
const CONSUMER_LOCK_BYTE: i64 = q::qhdr::DEQ as i64;

/// The producer of an SPSC queue of `T`.
#[derive(Debug)]
pub struct SpscProducer<T: Item> {
    inner: q::SpscProducer,
    mem: Arc<QueueMem>,
    _role: Option<File>,
    _t: PhantomData<fn(T)>,
}

/// The consumer of an SPSC queue of `T`.
#[derive(Debug)]
pub struct SpscConsumer<T: Item> {
    inner: q::SpscConsumer,
    mem: Arc<QueueMem>,
    _role: Option<File>,
    _t: PhantomData<fn() -> T>,
}

/// A producer and a consumer joined by an SPSC queue in anonymous memory.
pub fn spsc_channel<T: Item>(
    capacity: u64,
) -> Result<(SpscProducer<T>, SpscConsumer<T>), QueueFileError> {
    let mem = Arc::new(QueueMem::anonymous(&geometry_for::<T>(
        QueueKind::Spsc,
        capacity,
    )?)?);
    Ok((
        SpscProducer::from_mem(mem.clone())?,
        SpscConsumer::from_mem(mem)?,
    ))
}

impl<T: Item> SpscProducer<T> {
    /// Creates a fresh queue file of `capacity` items and becomes its producer.
    pub fn create(path: impl AsRef<Path>, capacity: u64) -> Result<Self, QueueFileError> {
        let g = geometry_for::<T>(QueueKind::Spsc, capacity)?;
        Self::from_mem(Arc::new(QueueMem::create(path, &g)?))
    }

    /// Becomes the producer of an existing queue file, resuming after its last item.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, QueueFileError> {
        Self::from_mem(Arc::new(QueueMem::open(
            path,
            expect_for::<T>(QueueKind::Spsc),
        )?))
    }

    fn from_mem(mem: Arc<QueueMem>) -> Result<Self, QueueFileError> {
        let role = mem.lock_role(PRODUCER_LOCK_BYTE, "producer")?;
        // The copy lives in the handle, which holds the mapping (`Arc<QueueMem>`).
        let inner = q::SpscProducer::new(*mem.queue()).map_err(|e| wrong_kind(&mem, e))?;
        Ok(SpscProducer {
            inner,
            mem,
            _role: role,
            _t: PhantomData,
        })
    }

    /// Pushes one item, or fails with [`PushError::Full`].
    #[inline]
    pub fn try_push(&mut self, item: &T) -> Result<(), PushError> {
        self.inner.try_push(item.as_bytes())?;
        notify(&self.mem, Side::Data);
        Ok(())
    }

    /// Pushes as many of `items` as fit, with one index update, and returns how many.
    pub fn push_slice(&mut self, items: &[T]) -> Result<usize, PushError> {
        let n = self
            .inner
            .push_fixed(items.as_bytes(), std::mem::size_of::<T>())?;
        if n > 0 {
            notify(&self.mem, Side::Data);
        }
        Ok(n)
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
        let deadline = deadline_after(timeout);
        loop {
            match self.try_push(item) {
                Err(PushError::Full) if before(deadline) => {
                    let view = *self.mem.queue();
                    wait_side(wait, &view, Side::Space, deadline, || self.inner.free() > 0);
                }
                r => {
                    wait.reset();
                    return r;
                }
            }
        }
    }

    /// Free slots.
    pub fn free(&mut self) -> u64 {
        self.inner.free()
    }

    /// See [`QueueMem::flush`].
    pub fn flush(&self) -> io::Result<()> {
        self.mem.flush()
    }
}

impl<T: Item> SpscConsumer<T> {
    /// Becomes the consumer of an existing queue file, resuming at its oldest unread item.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, QueueFileError> {
        Self::from_mem(Arc::new(QueueMem::open(
            path,
            expect_for::<T>(QueueKind::Spsc),
        )?))
    }

    fn from_mem(mem: Arc<QueueMem>) -> Result<Self, QueueFileError> {
        let role = mem.lock_role(CONSUMER_LOCK_BYTE, "consumer")?;
        // The copy lives in the handle, which holds the mapping (`Arc<QueueMem>`).
        let inner = q::SpscConsumer::new(*mem.queue()).map_err(|e| wrong_kind(&mem, e))?;
        Ok(SpscConsumer {
            inner,
            mem,
            _role: role,
            _t: PhantomData,
        })
    }

    /// Pops one item; `Ok(None)` when the queue is empty.
    #[inline]
    pub fn try_pop(&mut self) -> Result<Option<T>, PopError> {
        let mut t = T::new_zeroed();
        match self.inner.try_pop(t.as_mut_bytes()) {
            Ok(_) => {
                notify(&self.mem, Side::Space);
                Ok(Some(t))
            }
            Err(PopError::Empty) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Pops up to `out.len()` items with one index update and returns how many.
    pub fn pop_slice(&mut self, out: &mut [T]) -> Result<usize, PopError> {
        let n = self
            .inner
            .pop_fixed(out.as_mut_bytes(), std::mem::size_of::<T>())?;
        if n > 0 {
            notify(&self.mem, Side::Space);
        }
        Ok(n)
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
        let deadline = deadline_after(timeout);
        loop {
            match self.try_pop()? {
                None if before(deadline) => {
                    let view = *self.mem.queue();
                    wait_side(wait, &view, Side::Data, deadline, || {
                        self.inner.ready().map_or(true, |n| n > 0)
                    });
                }
                r => {
                    wait.reset();
                    return Ok(r);
                }
            }
        }
    }

    /// Items ready to pop.
    pub fn ready(&mut self) -> Result<u64, PopError> {
        self.inner.ready()
    }

    /// See [`QueueMem::flush`].
    pub fn flush(&self) -> io::Result<()> {
        self.mem.flush()
    }
}
