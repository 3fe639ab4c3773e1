//! [`RingConsumer<T>`]: a typed reader of a broadcast ring in a `/dev/shm` file, with start
//! modes, registration under a name, an optional offset checkpoint (spec §5, §9, §13) and
//! blocking receive through a [`WaitStrategy`].
//!
//! The ring protocol (tear-free reads, laps, sparse holes, registry) is the core's
//! [`Consumer`]; this file maps the file, registers with this process's pid and handles the
//! checkpoint.

use std::path::{Path, PathBuf};

use ringwire_core::Expect;
use ringwire_core::broadcast::{Consumer, StartMode, TypedConsumer};
use ringwire_core::layout::{schema_signature_of, slot_stride};
use zerocopy::FromBytes;

use crate::checkpoint::{OffsetCheckpoint, default_path};
use crate::error::{Error, Result};
use crate::file::RingFile;
use crate::sys;
use crate::wait::WaitStrategy;

/// Default registry name of a [`RingConsumer`] (spec §5).
pub const DEFAULT_CONSUMER_NAME: &str = "consumer";

/// Options for attaching a [`RingConsumer`].
#[derive(Clone, Debug)]
pub struct RingConsumerBuilder<T> {
    mode: StartMode,
    name: Option<String>,
    offset_file: Option<PathBuf>,
    _t: std::marker::PhantomData<fn() -> T>,
}

impl<T: FromBytes + 'static> Default for RingConsumerBuilder<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: FromBytes + 'static> RingConsumerBuilder<T> {
    /// Starts at [`StartMode::Latest`] (the builder default, spec §5).
    pub fn new() -> Self {
        RingConsumerBuilder {
            mode: StartMode::Latest,
            name: None,
            offset_file: None,
            _t: std::marker::PhantomData,
        }
    }

    /// Where to start.
    pub fn start_mode(mut self, mode: StartMode) -> Self {
        self.mode = mode;
        self
    }

    /// Start at the newest published message (delivered again).
    pub fn start_from_latest(self) -> Self {
        self.start_mode(StartMode::Latest)
    }

    /// Start after the newest published message.
    pub fn start_from_head(self) -> Self {
        self.start_mode(StartMode::Head)
    }

    /// Start at the oldest retained message.
    pub fn start_from_oldest(self) -> Self {
        self.start_mode(StartMode::Oldest)
    }

    /// Start at sequence `seq` (clamped to the oldest retained, the rest counted as lapped).
    pub fn start_from_sequence(self, seq: u64) -> Self {
        self.start_mode(StartMode::Sequence(seq))
    }

    /// Registry name (default `"consumer"`); also names the default checkpoint file.
    pub fn consumer_name(mut self, name: &str) -> Self {
        self.name = Some(name.to_string());
        self
    }

    /// Resume from, and commit to, this checkpoint file (spec §13). A saved value `v != 0`
    /// overrides the start mode with `v + 1`.
    pub fn offset_file(mut self, path: impl AsRef<Path>) -> Self {
        self.offset_file = Some(path.as_ref().to_path_buf());
        self
    }

    /// Use the default checkpoint path for the consumer name (see
    /// [`checkpoint::default_path`](crate::checkpoint::default_path)).
    pub fn default_offset_file(mut self) -> Self {
        self.offset_file = Some(PathBuf::new());
        self
    }

    /// Attaches to the ring at `path`.
    pub fn attach(self, path: impl AsRef<Path>) -> Result<RingConsumer<T>> {
        RingConsumer::attach_with(path.as_ref(), self)
    }
}

/// A reader of a typed broadcast ring.
pub struct RingConsumer<T> {
    inner: TypedConsumer<T>,
    checkpoint: Option<OffsetCheckpoint>,
    file: RingFile,
}

impl<T: FromBytes + 'static> RingConsumer<T> {
    /// Attaches at the oldest retained message (spec §5), registered as `"consumer"` if the
    /// ring has a registry.
    pub fn attach(path: impl AsRef<Path>) -> Result<Self> {
        RingConsumerBuilder::new().start_from_oldest().attach(path)
    }

    /// A builder with start modes, a name and a checkpoint file.
    pub fn builder() -> RingConsumerBuilder<T> {
        RingConsumerBuilder::new()
    }

    /// The §1.3 expectations for `T`: its slot stride, its schema signature, its alignment.
    pub fn expect() -> Expect {
        Expect {
            element_size: u32::try_from(slot_stride(size_of::<T>(), align_of::<T>())).ok(),
            schema_sig: Some(schema_signature_of::<T>()),
            slot_align: align_of::<T>().max(8) as u64,
        }
    }

    fn attach_with(path: &Path, b: RingConsumerBuilder<T>) -> Result<Self> {
        let file = RingFile::open(path, Self::expect())?;
        let name = b.name.as_deref().unwrap_or(DEFAULT_CONSUMER_NAME);
        let checkpoint = match &b.offset_file {
            Some(p) if p.as_os_str().is_empty() => Some(OffsetCheckpoint::open_or_create(
                default_path(path, name),
                name,
            )?),
            Some(p) => Some(OffsetCheckpoint::open_or_create(p, name)?),
            None => None,
        };
        let mode = match checkpoint.as_ref().and_then(|c| c.load()) {
            Some(v) => StartMode::Sequence(v.saturating_add(1)),
            None => b.mode,
        };
        // The copy lives in the handle, which owns `file` and drops it last.
        let mut consumer = Consumer::new(*file.ring(), mode);
        consumer
            .register(std::process::id(), name, sys::pid_alive)
            .map_err(|source| Error::Registry {
                path: path.to_path_buf(),
                source,
            })?;
        let inner = TypedConsumer::new(consumer).map_err(|e| Error::attach(path, e))?;
        Ok(RingConsumer {
            inner,
            checkpoint,
            file,
        })
    }

    /// The next record, or `None` when there is nothing new. Overwritten messages are
    /// skipped and counted in [`RingConsumer::lapped_count`].
    #[inline]
    pub fn try_recv(&mut self) -> Option<T> {
        self.inner.try_recv()
    }

    /// The next record with its sequence number.
    #[inline]
    pub fn try_recv_seq(&mut self) -> Option<(u64, T)> {
        self.inner.try_recv_seq()
    }

    /// [`RingConsumer::try_recv`] for a loop that polls until the next record arrives: the
    /// payload is copied together with every load of the slot's sequence word, so a record
    /// whose slot spans two cache lines arrives in one round of line transfers instead of
    /// two. Same results as `try_recv` (never a torn record, laps counted the same way).
    /// [`RingConsumer::recv_blocking`] with [`BusySpin`](crate::BusySpin) polls this way.
    #[inline]
    pub fn try_recv_eager(&mut self) -> Option<T> {
        self.inner.try_recv_eager()
    }

    /// One poll of a receive loop: the eager read when `W` only spins.
    #[inline(always)]
    fn poll<W: WaitStrategy>(&mut self) -> Option<T> {
        if W::SPINS {
            self.inner.try_recv_eager()
        } else {
            self.inner.try_recv()
        }
    }

    /// Fills `buf` from the front; returns how many records were received.
    pub fn recv_batch(&mut self, buf: &mut [T]) -> usize {
        self.inner.recv_batch(buf)
    }

    /// Waits with `wait` until a record arrives. Each wait is bounded, so a frozen ring
    /// (its producer died) keeps this looping without a record: use
    /// [`RingConsumer::recv_timeout`] when that matters. With a strategy that only spins
    /// ([`WaitStrategy::SPINS`]) each poll is [`RingConsumer::try_recv_eager`].
    #[inline]
    pub fn recv_blocking<W: WaitStrategy>(&mut self, wait: &mut W) -> T {
        loop {
            if let Some(v) = self.poll::<W>() {
                wait.reset();
                return v;
            }
            wait.wait(self.file.ring(), self.inner.inner().cursor());
        }
    }

    /// Like [`RingConsumer::recv_blocking`], giving up after `timeout`; a sleeping
    /// strategy ([`FutexWait`](crate::FutexWait)) never sleeps past it.
    pub fn recv_timeout<W: WaitStrategy>(
        &mut self,
        wait: &mut W,
        timeout: std::time::Duration,
    ) -> Option<T> {
        let deadline = crate::wait::deadline_after(timeout);
        loop {
            if let Some(v) = self.poll::<W>() {
                wait.reset();
                return Some(v);
            }
            if !crate::wait::before(deadline) {
                return None;
            }
            // A sleeping strategy's sleep is cut at the deadline.
            wait.wait_until(self.file.ring(), self.inner.inner().cursor(), deadline);
        }
    }

    /// Messages this reader lost (overwritten before read, or skipped at start).
    pub fn lapped_count(&self) -> u64 {
        self.inner.inner().lapped()
    }

    /// The next sequence to read.
    pub fn cursor(&self) -> u64 {
        self.inner.inner().cursor()
    }

    /// Published messages not read yet.
    pub fn lag(&mut self) -> u64 {
        self.inner.inner_mut().lag()
    }

    /// Number of slots.
    pub fn capacity(&self) -> u64 {
        self.file.ring().capacity()
    }

    /// Moves the cursor to `seq` (clamped to the oldest retained).
    pub fn seek(&mut self, seq: u64) {
        self.inner.inner_mut().seek(seq);
    }

    /// The registry slot this reader holds, if registered.
    pub fn registry_slot(&self) -> Option<u32> {
        self.inner.inner().registry_slot()
    }

    /// The last sequence processed: `cursor - 1`.
    pub fn last_processed_sequence(&self) -> u64 {
        self.cursor().saturating_sub(1)
    }

    /// Saves [`RingConsumer::last_processed_sequence`] to the checkpoint file, or fails
    /// with [`Error::NoOffsetFile`] when the consumer was built without one (as ringfire's).
    pub fn commit_offset(&self) -> Result<()> {
        match &self.checkpoint {
            Some(cp) => {
                cp.save(self.last_processed_sequence());
                Ok(())
            }
            None => Err(Error::no_offset_file(self.file.path())),
        }
    }

    /// The checkpoint file, if configured.
    pub fn checkpoint(&self) -> Option<&OffsetCheckpoint> {
        self.checkpoint.as_ref()
    }

    /// True when the producer restarted and replaced the ring with a fresh inode: this
    /// mapping will never advance again; attach anew to follow the new ring.
    pub fn is_replaced(&self) -> bool {
        self.file.is_replaced()
    }

    /// The ring file.
    pub fn file(&self) -> &RingFile {
        &self.file
    }
}

impl<T: FromBytes + 'static> std::fmt::Debug for RingConsumer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingConsumer")
            .field("file", &self.file)
            .field("cursor", &self.inner.inner().cursor())
            .finish()
    }
}
