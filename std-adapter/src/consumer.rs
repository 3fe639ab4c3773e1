//! [`RingConsumer<T>`]: a typed reader of a broadcast ring in a `/dev/shm` file, with start
//! modes, registration under a name, an optional offset checkpoint (spec §5, §9, §13) and
//! blocking receive through a [`WaitStrategy`].
//!
//! The ring protocol (tear-free reads, laps, sparse holes, registry) is the core's
//! [`Consumer`]; this file maps the file, registers with this process's pid and handles the
//! checkpoint.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ringwire_core::broadcast::{Consumer, StartMode, TypedConsumer};
use ringwire_core::layout::{Flags, SEQ_LIMIT, SLOT_WRITING, schema_signature_of, slot_stride};
use ringwire_core::sync::Ordering;
use ringwire_core::{Expect, RingView};
use zerocopy::FromBytes;

use crate::checkpoint::{OffsetCheckpoint, default_path};
use crate::error::{Error, Result};
use crate::file::RingFile;
use crate::registry::{ReaderRegistration, ReaderRegistry};
use crate::sys;
use crate::unreported_laps::UnreportedLaps;
use crate::wait::{Idle, WaitStrategy};

/// Default registry name of a [`RingConsumer`] (spec §5).
pub const DEFAULT_CONSUMER_NAME: &str = "consumer";

/// What one [`RingConsumer::recv_status`] call found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RecvStatus<T> {
    /// The next record, with nothing lost since the previous receive.
    Ok(T),
    /// Nothing new has been published.
    Empty,
    /// The writer lapped this reader: `skipped` records were overwritten before they could
    /// be read (or were holes of a sparse mirror ring), and `item` is the first record
    /// after them. `skipped` is also added to [`RingConsumer::lapped_count`].
    Lapped {
        /// Records lost just before `item`.
        skipped: u64,
        /// The record received.
        item: T,
    },
}

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

    /// Registry name (default `"consumer"`). Without [`RingConsumerBuilder::offset_file`],
    /// a name also gives the consumer a checkpoint at the default path (spec §13, as
    /// ringfire does): `attach` creates that file if it is missing and resumes from the
    /// offset saved in it, if any. Consumers attached under one name, or under names that
    /// differ only in characters the file name replaces (`"algo 1"`, `"algo_1"`), share that
    /// file, as in ringfire: each commit overwrites the others', and a restart resumes after
    /// whichever committed last, which may be past what this consumer processed.
    pub fn consumer_name(mut self, name: &str) -> Self {
        self.name = Some(name.to_string());
        self
    }

    /// Resume from, and commit to, this checkpoint file (spec §13). A saved value `v != 0`
    /// overrides the start mode with `v + 1`, unless the ring never reached `v` (a checkpoint
    /// of an earlier ring at this path: see [`RingConsumer::stale_checkpoint`]). An empty
    /// path is [`RingConsumerBuilder::default_offset_file`] (ringfire's attach fails to open
    /// it).
    pub fn offset_file(mut self, path: impl AsRef<Path>) -> Self {
        self.offset_file = Some(path.as_ref().to_path_buf());
        self
    }

    /// The same as [`RingConsumerBuilder::offset_file`] (ringfire's name for a checkpoint
    /// kept in `/dev/shm`; any path works).
    pub fn offset_shm(self, path: impl AsRef<Path>) -> Self {
        self.offset_file(path)
    }

    /// Use the default checkpoint path for the consumer name (see
    /// [`checkpoint::default_path`](crate::checkpoint::default_path)); the name defaults to
    /// `"consumer"`. Naming the consumer does the same. Rings whose names differ only after
    /// their last dot (`md.eurusd`, `md.gbpusd`) get the same default path for a name, and
    /// their consumers would resume at each other's offsets: name them apart, or give each
    /// an [`RingConsumerBuilder::offset_file`].
    pub fn default_offset_file(mut self) -> Self {
        self.offset_file = Some(PathBuf::new());
        self
    }

    /// Attaches to the ring at `path`.
    pub fn attach(self, path: impl AsRef<Path>) -> Result<RingConsumer<T>> {
        RingConsumer::attach_with_options(path, self)
    }
}

/// True when `offset` (a checkpoint's last processed sequence) names a record `ring` never
/// reached: its slot holds an earlier sequence (or nothing), and `write_seq`, loaded after
/// that slot, is still below `offset`. A slot holding `offset` or a later sequence, or
/// mid-write, means the ring got there: a writer stores a batch's slots before the one
/// `write_seq` store that ends it (spec §4.2 step 5), a batch longer than the ring laps
/// slots before that store, and an MPMC ring's `write_seq` is only the highest ticket
/// published; another reader may have processed and saved such a record meanwhile.
///
/// A mirror ring (`FLAG_SPARSE`) numbers its records as its source does, so one still
/// below the offset may be the same stream in a recreated mirror ring (spec §21.1: it
/// starts at the source's numbering), where the offset holds; it counts as never reached
/// only when the ring visibly numbers from 1 again (record 1 in its slot: a restarted
/// source).
///
/// An offset at or past [`SEQ_LIMIT`] (a corrupt file, or a commit after a seek past every
/// sequence) is never reached by any ring, whatever its slot holds: resumed after, the
/// consumer would wait past 2^63 and never deliver a record.
fn never_reached(ring: &RingView, offset: u64) -> bool {
    if offset >= SEQ_LIMIT {
        return true;
    }
    // Acquire: pairs with the writer's release store of the slot's sequence.
    let s = ring.slot_seq(offset).load(Ordering::Acquire);
    // Acquire: ordered after the slot load, so a write_seq published with or after the
    // slot's store is seen.
    let below =
        s != SLOT_WRITING && s < offset && offset > ring.write_seq().load(Ordering::Acquire);
    // Acquire: as for the first slot.
    below
        && (!ring.geometry().flags.has(Flags::SPARSE)
            || ring.slot_seq(1).load(Ordering::Acquire) == 1)
}

/// A reader of a typed broadcast ring.
///
/// A named consumer keeps its place in a checkpoint file (spec §13) and resumes after the
/// last offset it committed:
///
/// ```
/// use ringwire::{RingConsumer, RingProducer};
///
/// # fn main() -> ringwire::Result<()> {
/// # let path = format!("/dev/shm/ringwire-doc-ckpt-{}", std::process::id());
/// let mut tx = RingProducer::<u64>::create(&path, 64)?;
/// tx.push_batch(&[1, 2, 3, 4]);
/// let algo = || RingConsumer::<u64>::builder().consumer_name("algo").start_from_oldest();
/// let mut rx = algo().attach(&path)?;
/// assert_eq!((rx.try_recv(), rx.try_recv()), (Some(1), Some(2)));
/// rx.commit_offset()?;
/// drop(rx);
/// // Attached again (after a restart, say): after the committed offset, not the oldest.
/// let mut rx = algo().attach(&path)?;
/// assert_eq!(rx.try_recv(), Some(3));
/// # drop(rx);
/// # let _ = std::fs::remove_file(ringwire::checkpoint::default_path(path.as_ref(), "algo"));
/// # let _ = std::fs::remove_file(&path);
/// # Ok(())
/// # }
/// ```
///
/// Registered readers are named by process id (spec §9). A child forked from the process
/// that attached holds a copy of this consumer, registered in its parent's slot. The copy's
/// first call that reads or moves the cursor in the child registers it in a slot of its
/// own, under the child's pid and the same name, at its cursor (a lossless producer then
/// waits for parent and child each; the parent's slot stays the parent's, and is not
/// pruned from under the child when the parent exits). Until then
/// [`RingConsumer::registration`] is `None` in the child. With no free slot the child's
/// copy reads unregistered, as after a prune ([`RingConsumer::registry_slot`] is `None`),
/// and records the producer overwrites before it reads them count as lapped. Dropping the
/// copy leaves the parent's slot alone. Telling a child from its parent costs a relaxed
/// load of a static per call, which a `pthread_atfork` handler changes in the child; a
/// child made by a bare `clone` system call is not told apart. A copy with a checkpoint
/// file does not commit to it while the process that attached lives
/// ([`RingConsumer::commit_offset`] fails with [`Error::ForkedCheckpoint`]); a daemon's copy,
/// whose parent has exited, commits as the original would have.
pub struct RingConsumer<T> {
    inner: TypedConsumer<T>,
    checkpoint: Option<OffsetCheckpoint>,
    /// The saved offset ignored at attach (see [`RingConsumer::stale_checkpoint`]).
    stale_checkpoint: Option<u64>,
    /// ringfire's views of the registry and of this reader's slot, built at attach.
    registry: Option<Box<ReaderRegistry>>,
    registration: Option<Box<ReaderRegistration>>,
    /// The process's fork generation when the registration was taken (see
    /// [`RingConsumer::here`]).
    fork_generation: u64,
    /// The losses [`RingConsumer::recv_status`] calls that returned `Empty` found, to be
    /// reported with the next record.
    unreported_laps: UnreportedLaps,
    /// Shared with an async consumer's waiter thread, which must not outlive the mapping.
    file: Arc<RingFile>,
}

impl<T: FromBytes + 'static> RingConsumer<T> {
    /// Attaches at the oldest retained message (spec §5), registered as `"consumer"` if the
    /// ring has a registry. On a lossless ring whose registry has no free slot (every one
    /// held by a live reader) it fails with [`Error::Registry`]; a lossy ring's reader then
    /// goes on unregistered. A corrupt `write_seq` fails with [`Error::Attach`]
    /// ([`RingView::checked_write_seq`](ringwire_core::RingView::checked_write_seq): at or
    /// past 2^63, or on an MPMC ring at or past `claim_seq`), as every attach does.
    pub fn attach(path: impl AsRef<Path>) -> Result<Self> {
        RingConsumerBuilder::new().start_from_oldest().attach(path)
    }

    /// Attaches at the newest published message, which the first receive delivers (or at
    /// the first message to come, on an empty ring); registered as `"consumer"` if the ring
    /// has a registry.
    pub fn attach_latest(path: impl AsRef<Path>) -> Result<Self> {
        RingConsumerBuilder::new().start_from_latest().attach(path)
    }

    /// Attaches with the checkpoint file `offset_file` (created if missing): resumes after
    /// the sequence saved there (clamped to the oldest retained, the rest counted as
    /// lapped), or at the newest published message when nothing was saved yet. The
    /// checkpoint and the registry entry are named `"consumer"`. A file that exists but is
    /// not a checkpoint is refused ([`Error::BadFileMagic`], [`Error::BadFileVersion`]), and
    /// so is a checkpoint cut short ([`Error::TooShort`]); one that cannot be created is an
    /// [`Error::Io`] naming the step (`mkdir` of its directory, `fallocate` on a full file
    /// system: see [`OffsetCheckpoint::open_or_create`]); a full registry fails as in
    /// [`RingConsumer::attach`].
    pub fn attach_from_offset<P: AsRef<Path>, O: AsRef<Path>>(
        path: P,
        offset_file: O,
    ) -> Result<Self> {
        RingConsumerBuilder::new()
            .offset_file(offset_file)
            .start_from_latest()
            .attach(path)
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

    /// Attaches to the ring at `path` with the options of `b`: the same as `b.attach(path)`
    /// (ringfire's spelling).
    pub fn attach_with_options<P: AsRef<Path>>(path: P, b: RingConsumerBuilder<T>) -> Result<Self> {
        let path = path.as_ref();
        let file = RingFile::open(path, Self::expect())?;
        // A write_seq no producer publishes (a corrupt header) is refused here, as producers,
        // `serve` and the tools refuse it: read against it, the start, the lap checks and
        // `lag` would be measured from a sequence no record will reach.
        file.checked_write_seq()?;
        let name = b.name.as_deref().unwrap_or(DEFAULT_CONSUMER_NAME);
        // A name without a file means the default file (spec §13), as does an empty path.
        let checkpoint_path = match &b.offset_file {
            Some(p) if !p.as_os_str().is_empty() => Some(p.clone()),
            Some(_) => Some(default_path(path, name)),
            None => b.name.is_some().then(|| default_path(path, name)),
        };
        let checkpoint = checkpoint_path
            .map(|p| OffsetCheckpoint::open_or_create(p, name))
            .transpose()?;
        let (mode, stale_checkpoint) = match checkpoint.as_ref().and_then(|c| c.load()) {
            // Saved against an earlier ring: nothing of this one was processed.
            Some(v) if never_reached(file.ring(), v) => (StartMode::Oldest, Some(v)),
            Some(v) => (StartMode::Sequence(v.saturating_add(1)), None),
            None => (b.mode, None),
        };
        // The copy lives in the handle, which owns `file` and drops it last.
        let mut consumer = Consumer::new(*file.ring(), mode);
        // Before the registration: a fork after it must show.
        let fork_generation = sys::fork_generation();
        consumer.set_incarnation(sys::own_incarnation());
        consumer
            .register(std::process::id(), name, sys::reader_alive)
            .map_err(|source| Error::Registry {
                path: path.to_path_buf(),
                source,
            })?;
        // Both live in the handle beside `file`, which keeps the mapping they view.
        let registry = ReaderRegistry::of(file.ring()).map(Box::new);
        let registration =
            ReaderRegistration::of(file.ring(), consumer.registry_owner()).map(Box::new);
        let inner = TypedConsumer::new(consumer).map_err(|e| Error::attach(path, e))?;
        if let (Some(cp), Some(_)) = (&checkpoint, stale_checkpoint) {
            // Replaced at once, so that a consumer that dies before its first commit does
            // not leave the stale offset for the next attach (which could no longer tell it
            // once this ring has passed it).
            cp.save(inner.inner().cursor().saturating_sub(1));
        }
        Ok(RingConsumer {
            inner,
            checkpoint,
            stale_checkpoint,
            registry,
            registration,
            fork_generation,
            unreported_laps: UnreportedLaps::default(),
            file: Arc::new(file),
        })
    }

    /// The core consumer, after registering this handle in a registry slot of its own if
    /// the process is a child forked since the handle registered (the copy held its
    /// parent's slot). A relaxed load of a static when nothing forked.
    #[inline(always)]
    fn here(&mut self) -> &mut TypedConsumer<T> {
        if sys::forked_since(self.fork_generation) {
            self.register_after_fork();
        }
        &mut self.inner
    }

    #[cold]
    #[inline(never)]
    fn register_after_fork(&mut self) {
        self.fork_generation = sys::fork_generation();
        // A full registry leaves the copy unregistered (see the type's docs).
        let inner = self.inner.inner_mut();
        // The child's own start time, not its parent's.
        inner.set_incarnation(sys::own_incarnation());
        let _ = inner.register_as(std::process::id(), sys::reader_alive);
    }

    /// The next record, or `None` when there is nothing new. Overwritten messages are
    /// skipped and counted in [`RingConsumer::lapped_count`]. Always inlined, as the core's
    /// receive under it: with `#[inline]` one of the two stayed out of line and the record
    /// came back through memory (11 instructions more per `u64` record).
    #[inline(always)]
    pub fn try_recv(&mut self) -> Option<T> {
        self.here().try_recv()
    }

    /// The next record, telling whether records were lost just before it:
    /// [`RecvStatus::Lapped`] carries how many (the increase of
    /// [`RingConsumer::lapped_count`] since the last record), [`RecvStatus::Ok`] means none,
    /// [`RecvStatus::Empty`] that nothing new is there. A call that finds the reader lapped
    /// but the next record not yet readable (the producer is rewriting it) returns `Empty`;
    /// the records it skipped are counted in `lapped_count` at once and reported with the
    /// record the next `recv_status` returns. Losses found by another call (`try_recv`, a
    /// seek or a jump) are counted in `lapped_count` only.
    #[inline]
    pub fn recv_status(&mut self) -> RecvStatus<T> {
        // Losses found by the `Empty` calls just before this one, with the cursor moved by
        // nothing else since, belong to the record this call returns.
        let before = self
            .unreported_laps
            .since(self.cursor(), self.lapped_count());
        match self.here().try_recv() {
            None => {
                self.unreported_laps.empty(self.cursor(), before);
                RecvStatus::Empty
            }
            Some(item) => {
                self.unreported_laps.reported();
                match self.lapped_count().saturating_sub(before) {
                    0 => RecvStatus::Ok(item),
                    skipped => RecvStatus::Lapped { skipped, item },
                }
            }
        }
    }

    /// The next record with its sequence number.
    #[inline]
    pub fn try_recv_seq(&mut self) -> Option<(u64, T)> {
        self.here().try_recv_seq()
    }

    /// [`RingConsumer::try_recv`] for a loop that polls until the next record arrives: the
    /// payload is copied together with every load of the slot's sequence word, so a record
    /// whose slot spans two cache lines arrives in one round of line transfers instead of
    /// two. Same results as `try_recv` (never a torn record, laps counted the same way).
    /// [`RingConsumer::recv_blocking`] with [`BusySpin`](crate::BusySpin) polls this way.
    #[inline]
    pub fn try_recv_eager(&mut self) -> Option<T> {
        self.here().try_recv_eager()
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
        self.here().recv_batch(buf)
    }

    /// Waits with `wait` until a record arrives. Each wait is bounded, so a frozen ring
    /// (its producer died) keeps this looping without a record: use
    /// [`RingConsumer::recv_timeout`] when that matters. So does a ring removed or replaced
    /// at its path while this waits (a producer that unlinked it on exit, or a restarted one
    /// that created a fresh file there): this mapping never advances again, and nothing
    /// can return here to say so; a loop of `recv_timeout` that checks
    /// [`RingConsumer::is_replaced`] after each `None` finds out. With a strategy that only spins
    /// ([`WaitStrategy::SPINS`]) each poll is [`RingConsumer::try_recv_eager`].
    #[inline]
    pub fn recv_blocking<W: WaitStrategy>(&mut self, wait: &mut W) -> T {
        // Once per call: a fork leaves the child one thread, not inside this call.
        self.here();
        let mut idle = Idle::default();
        loop {
            idle.before_poll::<W>(self.file.ring(), self.cursor());
            if let Some(v) = self.poll::<W>() {
                wait.reset();
                return v;
            }
            // Waits for the cursor to be published, or, at a cursor the consumer is stuck
            // at (a corrupt header), for the ring to change (see `Idle`).
            idle.wait(wait, self.file.ring(), self.cursor(), None);
        }
    }

    /// Like [`RingConsumer::recv_blocking`], giving up after `timeout`; a sleeping
    /// strategy ([`FutexWait`](crate::FutexWait)) never sleeps past it. `None` also when the
    /// ring was removed or replaced at its path meanwhile, which
    /// [`RingConsumer::is_replaced`] then tells apart from a quiet ring. `Duration::ZERO`
    /// polls once; a timeout past what an `Instant` holds (`Duration::MAX`) waits as
    /// `recv_blocking` does.
    pub fn recv_timeout<W: WaitStrategy>(
        &mut self,
        wait: &mut W,
        timeout: std::time::Duration,
    ) -> Option<T> {
        self.here();
        let deadline = crate::wait::deadline_after(timeout);
        let mut idle = Idle::default();
        loop {
            idle.before_poll::<W>(self.file.ring(), self.cursor());
            if let Some(v) = self.poll::<W>() {
                wait.reset();
                return Some(v);
            }
            if !crate::wait::before(deadline) {
                return None;
            }
            // A sleeping strategy's sleep is cut at the deadline.
            idle.wait(wait, self.file.ring(), self.cursor(), deadline);
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

    /// Published messages not read yet: `write_seq - cursor + 1`, or 0. Records already
    /// overwritten count too: it can exceed the capacity until the next receive.
    pub fn lag(&self) -> u64 {
        self.inner.inner().lag()
    }

    /// Number of slots.
    pub fn capacity(&self) -> u64 {
        self.file.ring().capacity()
    }

    /// Moves the cursor to `seq` (at least 1), backwards or forwards. Below the oldest
    /// retained message it moves to the oldest instead and counts the difference as lapped;
    /// returns that difference (0 when `seq` is retained or not published yet).
    pub fn seek(&mut self, seq: u64) -> u64 {
        self.here().inner_mut().seek(seq)
    }

    /// Skips the backlog: moves the cursor to the newest published message, which the next
    /// receive delivers. Returns how many messages were passed over; they count in
    /// [`RingConsumer::lapped_count`]. A reader already at or past the newest message, or
    /// on an empty ring, stays put and gets 0.
    pub fn jump_to_latest(&mut self) -> u64 {
        self.here().inner_mut().jump_to_latest()
    }

    /// Skips what the ring no longer holds: moves the cursor up to the oldest retained
    /// message when it is behind it. Returns how many messages were passed over; they
    /// count in [`RingConsumer::lapped_count`]. A cursor inside the retained window is left
    /// alone and gets 0 (this never rewinds; [`RingConsumer::seek`] does).
    pub fn jump_to_oldest(&mut self) -> u64 {
        self.here().inner_mut().jump_to_oldest()
    }

    /// The registry slot this reader holds, if registered.
    /// `None` in a forked child until its copy registers (see [`RingConsumer::registration`]).
    pub fn registry_slot(&self) -> Option<u32> {
        if sys::forked_since(self.fork_generation) {
            return None;
        }
        self.inner.inner().registry_slot()
    }

    /// The ring's reader registry, or `None` when the ring has none.
    pub fn registry(&self) -> Option<&ReaderRegistry> {
        self.registry.as_deref()
    }

    /// This reader's registry slot, or `None` when it is not registered (no registry, or a
    /// full one on a lossy ring), nor in a forked child whose copy has not yet read (the
    /// slot it holds then is its parent's; see the type's docs).
    pub fn registration(&self) -> Option<&ReaderRegistration> {
        if sys::forked_since(self.fork_generation) {
            return None;
        }
        let r = self.registration.as_deref()?;
        // The core consumer registers again, in another slot, after a prune; with no free
        // slot it holds none.
        r.follow(self.inner.inner().registry_owner()?);
        Some(r)
    }

    /// The last sequence processed: `cursor - 1`.
    pub fn last_processed_sequence(&self) -> u64 {
        self.cursor().saturating_sub(1)
    }

    /// Saves [`RingConsumer::last_processed_sequence`] to the checkpoint file and publishes
    /// the cursor to this reader's registry slot again, or fails with
    /// [`Error::NoOffsetFile`] when the consumer was built without one (as ringfire's).
    /// The re-publish undoes a [`ReaderRegistration::update_cursor`] made through
    /// [`RingConsumer::registration`]. A copy of this consumer in a forked child fails with
    /// [`Error::ForkedCheckpoint`] while the process that attached it runs, and saves
    /// nothing: parent and child would overwrite each other's offsets in the one file (the
    /// child can keep its own with [`RingConsumer::commit_offset_to`]). A checkpoint file
    /// no longer at its path (removed, or replaced by another file, since attach) fails
    /// with [`Error::CheckpointMoved`] after the save, which the next attach would not find
    /// (a restart would start at the builder's mode); checking costs a `stat` per commit.
    pub fn commit_offset(&self) -> Result<()> {
        match &self.checkpoint {
            Some(cp) => {
                cp.check_committer()?;
                cp.save(self.last_processed_sequence());
                self.republish_cursor();
                // After the save: a file removed before it would hold the offset nowhere
                // the next attach looks.
                cp.check_at_path()
            }
            None => Err(Error::no_offset_file(self.file.path())),
        }
    }

    /// Publishes the cursor to this reader's registry slot, if it holds one (ringfire's
    /// commits do).
    fn republish_cursor(&self) {
        if let Some(r) = self.registration() {
            r.update_cursor(self.cursor());
        }
    }

    /// Saves [`RingConsumer::last_processed_sequence`] to the checkpoint file at `path` under
    /// `consumer_name` (the name is stored only when the file is created), creating it if
    /// missing. Works whether or not this consumer has a checkpoint of its own; that one is
    /// not touched unless `path` is the same file. The file is opened and mapped on every
    /// call. The cursor is published to the registry again, as [`RingConsumer::commit_offset`]
    /// does. A file that exists but is not a checkpoint is refused
    /// ([`Error::BadFileMagic`], [`Error::BadFileVersion`]) and left as it is; one that
    /// cannot be created is an [`Error::Io`] as [`OffsetCheckpoint::open_or_create`] says.
    pub fn commit_offset_to(&self, path: impl AsRef<Path>, consumer_name: &str) -> Result<()> {
        let cp = OffsetCheckpoint::open_or_create(path, consumer_name)?;
        cp.save(self.last_processed_sequence());
        self.republish_cursor();
        Ok(())
    }

    /// The checkpoint file, if configured.
    pub fn checkpoint(&self) -> Option<&OffsetCheckpoint> {
        self.checkpoint.as_ref()
    }

    /// The offset the checkpoint held at attach, when it was ignored because this ring never
    /// reached it: that record's slot holds an earlier sequence (or nothing) and `write_seq`
    /// is below it. Such an offset was saved against an earlier ring at this path, which a
    /// restarted producer has replaced with a fresh one counting from 1 again; resuming
    /// after it would skip the new ring's records up to it (and wait, receiving nothing,
    /// until the producer got there). Since nothing of the new ring was processed, the
    /// consumer starts at its oldest retained record instead (whatever the builder's start
    /// mode, which applies only when there is no saved offset), and attach replaces the
    /// stale value in the file at once with the offset just before that record (0, "never
    /// committed", when it is record 1: a consumer that dies before its first commit then
    /// starts the next time as one without a saved offset, not after the stale value).
    /// `None` when the saved offset was used, or there was none.
    ///
    /// On a mirror ring (`FLAG_SPARSE`), whose records carry the source's numbers, a saved
    /// offset above what the ring holds is taken as stale only when the ring holds its
    /// record 1 (a restarted source counting from 1 again), or when it is at or past 2^63
    /// ([`SEQ_LIMIT`], which no ring reaches: a corrupt file); otherwise the ring is taken for
    /// the same stream mirrored again (a mirror ring recreated at the source's numbering,
    /// spec §21.1), and the consumer resumes after the saved offset, as ringfire's does. A
    /// restarted source's mirror ring that has already overwritten its record 1 while still
    /// below the offset looks the same, and is resumed after it too.
    ///
    /// Cases it cannot tell: a new ring that has already published past the saved offset
    /// (the format records no ring identity: the consumer then resumes after the saved
    /// offset, as ringfire's does); and an offset committed after a
    /// [`RingConsumer::seek`] past the end of the ring, which claims records never
    /// published and is taken for stale. ringfire's and Python's consumers sharing the file
    /// resume after a stale offset.
    pub fn stale_checkpoint(&self) -> Option<u64> {
        self.stale_checkpoint
    }

    /// The checkpoint file's path, if one is configured.
    pub fn offset_path(&self) -> Option<&Path> {
        self.checkpoint.as_ref().map(OffsetCheckpoint::path)
    }

    /// True when the producer restarted and replaced the ring with a fresh inode, or the
    /// file is gone from its path (a producer that unlinked it on exit): this mapping will
    /// never advance again; attach anew to follow a new ring. (A file removed under a
    /// producer that goes on writing still advances, though no new reader can find it.)
    pub fn is_replaced(&self) -> bool {
        self.file.is_replaced()
    }

    /// The ring file.
    pub fn file(&self) -> &RingFile {
        &self.file
    }

    /// The ring file, shared: an owner of the mapping for a thread that waits on the ring
    /// (the async consumer's waiter), which may outlive this consumer.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn shared_file(&self) -> &Arc<RingFile> {
        &self.file
    }
}

impl<T> Drop for RingConsumer<T> {
    fn drop(&mut self) {
        // A copy inherited through fork leaves the registry slot to the parent, which owns
        // it (the core's drop then has nothing to give up).
        let _ = self.inner.inner_mut().unregister_as(std::process::id());
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ringwire_core::layout::SLOT_WRITING;
    use ringwire_core::sync::Ordering;

    use super::*;
    use crate::test_tmp::TmpPath;
    use crate::wait::FutexWait;
    use crate::{RingProducer, sys};

    /// Files of one test, removed when dropped.
    fn tmp_paths<const N: usize>(tags: [&str; N]) -> [TmpPath; N] {
        tags.map(|t| TmpPath::new(&format!("consumer-{t}")))
    }

    /// A checkpoint whose saved offset is at or past `SEQ_LIMIT` (2^63: a corrupt file, or
    /// a commit made after a `seek` past every sequence) names a record no ring can hold.
    /// On a mirror ring (`FLAG_SPARSE`) that had overwritten its record 1, and on any ring
    /// whose slot for that offset was mid-write at attach, it was taken for the same
    /// stream resumed: the consumer started past 2^63 and never delivered a record again,
    /// silently. It is stale, as on any other ring: the consumer starts at the oldest
    /// record, says so, and overwrites the bad offset.
    #[test]
    fn a_checkpoint_offset_no_ring_can_reach_is_stale_on_every_ring() {
        use std::os::unix::fs::FileExt;
        for (case, saved) in [
            ("sparse", SEQ_LIMIT),
            ("sparse", u64::MAX - 1),
            ("mid-write", SEQ_LIMIT),
        ] {
            let t = tmp_paths([&format!("unreachable-{case}-ring"), "unreachable-offset"]);
            let mut tx = RingProducer::<u64>::create(&t[0], 8).unwrap();
            // Records 1..=12: slot 1 now holds record 9, as a mirror's that joined late.
            tx.push_batch(&(1..=12).collect::<Vec<u64>>());
            if case == "sparse" {
                let flags = tx.file().header().flags | Flags::SPARSE;
                let f = std::fs::OpenOptions::new().write(true).open(&t[0]).unwrap();
                f.write_all_at(&flags.to_ne_bytes(), 48).unwrap();
            } else {
                // The offset's slot (index 0) is being overwritten at attach.
                tx.file()
                    .ring()
                    .slot_seq(SEQ_LIMIT)
                    .store(SLOT_WRITING, Ordering::Release);
            }
            OffsetCheckpoint::open_or_create(&t[1], "consumer")
                .unwrap()
                .save(saved);
            let mut rx = RingConsumer::<u64>::builder()
                .offset_file(&t[1])
                .attach(&t[0])
                .unwrap();
            let got = (rx.stale_checkpoint(), rx.cursor(), rx.try_recv());
            assert_eq!(got, (Some(saved), 5, Some(5)), "{case}, offset {saved:#x}");
            assert_eq!(rx.checkpoint().unwrap().load(), Some(4), "{case}");
        }
    }

    /// A commit to a checkpoint file that is no longer at its path (removed, or replaced by
    /// another file there) went into the orphaned mapping and returned `Ok`: the next attach
    /// found no offset (or another one) and started at the builder's mode, here the newest
    /// record, silently skipping records 6 to 9 that were never processed. It is an error
    /// that names the file; a commit to a checkpoint still in place is not.
    #[test]
    fn a_commit_to_a_checkpoint_no_longer_at_its_path_is_an_error() {
        for replace in [false, true] {
            let t = tmp_paths(["moved-ring", "moved-offset"]);
            let mut tx = RingProducer::<u64>::create(&t[0], 64).unwrap();
            tx.push_batch(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
            let consumer = || {
                RingConsumer::<u64>::builder()
                    .offset_file(&t[1])
                    .start_from_latest()
                    .attach(&t[0])
                    .unwrap()
            };
            let mut rx = consumer();
            rx.seek(1);
            for _ in 0..5 {
                rx.try_recv().unwrap();
            }
            rx.commit_offset().unwrap();
            std::fs::remove_file(&t[1]).unwrap();
            let other = replace.then(|| OffsetCheckpoint::open_or_create(&t[1], "other").unwrap());
            let e = rx.commit_offset().unwrap_err();
            assert!(
                e.to_string().contains("no longer at its path"),
                "replace {replace}: {e}"
            );
            assert_eq!(e.path(), &*t[1], "replace {replace}");
            drop((rx, other));
            if !replace {
                // Nothing at the path: the restarted consumer starts at the newest record,
                // and its commits there work.
                let mut rx = consumer();
                assert_eq!(rx.try_recv(), Some(10));
                rx.commit_offset().unwrap();
            }
        }
    }

    /// A relative checkpoint path still names its file after the process changes its
    /// working directory: the check of the path above must not take that for a move. In a
    /// forked child, whose `chdir` the test harness's other threads do not see.
    #[test]
    fn a_relative_checkpoint_path_commits_after_a_chdir() {
        let t = tmp_paths(["chdir-ring", "chdir-offset"]);
        let mut tx = RingProducer::<u64>::create(&t[0], 8).unwrap();
        tx.push_batch(&[1, 2, 3]);
        let (dir, name) = (t[1].parent().unwrap(), t[1].file_name().unwrap());
        let status = crate::test_fork::forked(10, || {
            let attach = || {
                RingConsumer::<u64>::builder()
                    .start_from_oldest()
                    .offset_file(name)
                    .attach(&t[0])
            };
            if std::env::set_current_dir(dir).is_err() {
                return 2;
            }
            let Ok(mut rx) = attach() else { return 3 };
            if rx.try_recv() != Some(1) || std::env::set_current_dir("/").is_err() {
                return 4;
            }
            if rx.commit_offset().is_err() {
                return 5;
            }
            drop(rx);
            if std::env::set_current_dir(dir).is_err() {
                return 6;
            }
            // Resumed after the commit made from "/".
            match attach().map(|mut rx| rx.try_recv()) {
                Ok(Some(2)) => 0,
                _ => 7,
            }
        });
        crate::test_fork::assert_exited_0(status, "committing after a chdir");
    }

    /// A ring attached through a relative path is not "replaced" when the process changes
    /// its working directory: `is_replaced` looked the relative path up again from the new
    /// directory and said true (a reader told to attach anew would then find no ring, or
    /// another one), and the producer's unlink on drop missed its file, leaving it behind.
    /// In a forked child, whose `chdir` the test harness's other threads do not see.
    #[test]
    fn a_relative_ring_path_still_names_the_ring_after_a_chdir() {
        let t = tmp_paths(["chdir-relative-ring"]);
        let (dir, name) = (t[0].parent().unwrap(), t[0].file_name().unwrap());
        let status = crate::test_fork::forked(10, || {
            if std::env::set_current_dir(dir).is_err() {
                return 2;
            }
            let (Ok(mut tx), Ok(mut rx)) = (
                RingProducer::<u64>::create(name, 8),
                RingConsumer::<u64>::attach_latest(name),
            ) else {
                return 3;
            };
            if std::env::set_current_dir("/").is_err() {
                return 4;
            }
            tx.push(&1);
            if rx.is_replaced() || rx.try_recv() != Some(1) {
                return 5;
            }
            // Unlinks the ring at its absolute path, which the reader then sees gone.
            drop(tx);
            match (t[0].exists(), rx.is_replaced()) {
                (false, true) => 0,
                _ => 6,
            }
        });
        crate::test_fork::assert_exited_0(status, "the ring after a chdir");
    }

    /// A reader asleep in `recv_timeout` when its ring is removed (the producer unlinks it
    /// on exit), or replaced by a restarted producer that pushes at once, gets `None` at its
    /// deadline, not a record of the new ring and not a hang, and `is_replaced` then tells
    /// it why.
    #[test]
    fn a_sleeper_on_a_removed_or_replaced_ring_times_out_and_is_told() {
        for replace in [false, true] {
            let t = tmp_paths([if replace { "replaced" } else { "removed" }]);
            let mut tx = RingProducer::<u64>::create(&t[0], 8).unwrap();
            tx.push(&1);
            let mut rx = RingConsumer::<u64>::attach(&t[0]).unwrap();
            assert_eq!(rx.try_recv(), Some(1));
            let sleeper = std::thread::spawn(move || {
                let t0 = std::time::Instant::now();
                let got = rx.recv_timeout(&mut FutexWait::default(), Duration::from_millis(300));
                (got, t0.elapsed(), rx.is_replaced())
            });
            std::thread::sleep(Duration::from_millis(50));
            // Unlinks the file (the default cleanup).
            drop(tx);
            let fresh = replace.then(|| {
                let mut tx = RingProducer::<u64>::create(&t[0], 8).unwrap();
                tx.push_batch(&[2, 3]);
                tx
            });
            let (got, waited, told) = sleeper.join().unwrap();
            assert_eq!(got, None, "replace {replace}");
            assert!(
                waited >= Duration::from_millis(300) && waited < Duration::from_secs(5),
                "replace {replace}: waited {waited:?}"
            );
            assert!(told, "replace {replace}: is_replaced is false");
            drop(fresh);
        }
    }

    /// A reader lapped while the producer is rewriting the oldest slot it could move to
    /// finds nothing readable there: that `recv_status` is `Empty`, though it counted the
    /// lost records. The next one said `Lapped` with only its own call's losses (1 of the
    /// 4 lost between records 1 and 6); it reports all of them, and the calls after it
    /// report none again.
    #[test]
    fn recv_status_reports_the_losses_an_empty_call_found_with_the_next_record() {
        let t = tmp_paths(["status-empty-lap"]);
        let mut tx = RingProducer::<u64>::create(&t[0], 4).unwrap();
        let mut rx = RingConsumer::<u64>::attach(&t[0]).unwrap();
        tx.push(&1);
        assert_eq!(rx.recv_status(), RecvStatus::Ok(1));
        tx.push_batch(&[2, 3, 4, 5, 6, 7, 8]);
        // The producer has begun writing record 9 over record 5's slot.
        tx.file()
            .ring()
            .slot_seq(9)
            .store(SLOT_WRITING, Ordering::Release);
        let empty = (rx.recv_status(), rx.lapped_count(), rx.cursor());
        assert_eq!(empty, (RecvStatus::Empty, 3, 5), "records 2 to 4 lost");
        // Nothing new at the cursor yet: still Empty, nothing counted twice.
        assert_eq!(rx.recv_status(), RecvStatus::Empty);
        // Record 9 written: record 5 is lost too, and 6 is the next one.
        tx.push(&9);
        let lapped = RecvStatus::Lapped {
            skipped: 4,
            item: 6,
        };
        assert_eq!(rx.recv_status(), lapped);
        assert_eq!(rx.lapped_count(), 4);
        let rest = [rx.recv_status(), rx.recv_status(), rx.recv_status()];
        assert_eq!(rest, [7, 8, 9].map(RecvStatus::Ok));
        assert_eq!(rx.recv_status(), RecvStatus::Empty);
    }

    #[test]
    fn a_slot_left_mid_write_is_skipped_and_recv_blocking_sleeps_past_it() {
        let t = tmp_paths(["stuck"]);
        let mut tx = RingProducer::<u64>::create(&t[0], 8).unwrap();
        for v in 1..=8u64 {
            tx.push(&v);
        }
        let mut rx = RingConsumer::<u64>::attach(&t[0]).unwrap();
        // A producer died overwriting the reader's slot with the next lap (write_seq 8 >= 1):
        // record 1 is gone, the records behind it are intact and delivered.
        tx.file()
            .ring()
            .slot_seq(1)
            .store(SLOT_WRITING, Ordering::Release);
        // Looked at on the 64th empty poll in a row.
        assert_eq!((0..64).find_map(|_| rx.try_recv()), Some(2));
        assert_eq!(rx.lapped_count(), 1);
        while rx.try_recv().is_some() {}
        // Caught up: a blocking receive sleeps (no spin) until the next record.
        let mut wait = FutexWait::default();
        let cpu0 = sys::thread_cpu_time();
        assert_eq!(rx.recv_timeout(&mut wait, Duration::from_millis(300)), None);
        let cpu = sys::thread_cpu_time() - cpu0;
        assert!(
            cpu < Duration::from_millis(100),
            "recv_timeout spun: {cpu:?}"
        );
        assert!(wait.stats().sleeps > 0, "{:?}", wait.stats());
        let reader = std::thread::spawn(move || {
            let v = rx.recv_blocking(&mut FutexWait::default());
            (v, rx.lapped_count())
        });
        std::thread::sleep(Duration::from_millis(100));
        tx.push(&9);
        assert_eq!(reader.join().unwrap(), (9, 1));
    }

    /// A `FutexWait` built (or reset) with a zero or a nanosecond timeout sleeps in
    /// sleeps of `MIN_FUTEX_SLEEP`: a zero timeout made every wait return before sleeping
    /// (a busy spin), a 1 ns one ran the handshake's barrier about 400,000 times a second.
    #[test]
    fn futex_waits_with_a_tiny_timeout_still_sleep() {
        let t = tmp_paths(["tiny"]);
        let _tx = RingProducer::<u64>::create(&t[0], 8).unwrap();
        let mut rx = RingConsumer::<u64>::attach(&t[0]).unwrap();
        let mut reset = FutexWait::default();
        reset.set_timeout(Duration::ZERO);
        for (name, mut wait) in [
            ("0", FutexWait::new(32, Some(Duration::ZERO))),
            ("1 ns", FutexWait::new(32, Some(Duration::from_nanos(1)))),
            ("set 0", reset),
        ] {
            assert_eq!(wait.timeout(), crate::wait::MIN_FUTEX_SLEEP, "{name}");
            let cpu0 = sys::thread_cpu_time();
            assert_eq!(rx.recv_timeout(&mut wait, Duration::from_millis(200)), None);
            let cpu = sys::thread_cpu_time() - cpu0;
            let s = wait.stats();
            // 200 ms in sleeps of 10 µs: at most 20,000 sleeps, each a few µs of CPU.
            assert!(s.sleeps > 0 && s.sleeps <= 20_000, "timeout {name}: {s:?}");
            assert!(
                cpu < Duration::from_millis(150),
                "timeout {name}: recv_timeout spun: {cpu:?} of CPU, {s:?}"
            );
        }
    }

    /// Where a seccomp filter makes `FUTEX_WAIT` fail (EPERM, as some container profiles
    /// do), a waiting reader still waits without burning a core: each failed wait returned
    /// at once, and `recv_timeout` called it again, 300 ms of CPU in a 300 ms wait. The
    /// same for a queue's `pop_blocking`, which waits through the same `FutexWait`. The
    /// child also checks that the timeouts still hold and that records pushed while it
    /// waits still arrive.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[test]
    fn a_reader_whose_futex_waits_fail_does_not_spin() {
        use crate::queue::{SpscConsumer, SpscProducer};
        let t = tmp_paths(["futex-eperm", "futex-eperm-queue"]);
        let mut tx = RingProducer::<u64>::create(&t[0], 8).unwrap();
        let mut qtx = SpscProducer::<u64>::create(&t[1], 8).unwrap();
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` has room for the two descriptors pipe writes.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let [from_child, to_parent] = fds;
        // What the child sends after its empty waits: failed futex waits, then CPU µs and
        // wall µs of the ring's wait and of the queue's.
        let mut report = [0u64; 5];
        let status = crate::test_fork::forked_with(
            30,
            || {
                // SAFETY: the child's copy of the read end, which it does not use.
                unsafe { libc::close(from_child) };
                let (Ok(mut rx), Ok(mut qrx)) = (
                    RingConsumer::<u64>::attach(&t[0]),
                    SpscConsumer::<u64>::open(&t[1]),
                ) else {
                    return 2;
                };
                if crate::test_fork::deny_futex_wait().is_err() {
                    return 3;
                }
                let mut wait = FutexWait::default();
                let (cpu0, t0) = (sys::thread_cpu_time(), std::time::Instant::now());
                let got = rx.recv_timeout(&mut wait, Duration::from_millis(300));
                let ring = [
                    (sys::thread_cpu_time() - cpu0).as_micros() as u64,
                    t0.elapsed().as_micros() as u64,
                ];
                let (cpu0, t0) = (sys::thread_cpu_time(), std::time::Instant::now());
                let popped = qrx.pop_blocking(Duration::from_millis(300));
                let queue = [
                    (sys::thread_cpu_time() - cpu0).as_micros() as u64,
                    t0.elapsed().as_micros() as u64,
                ];
                let sent = [wait.stats().failed, ring[0], ring[1], queue[0], queue[1]];
                // SAFETY: `sent` is 40 readable bytes for the write.
                let n = unsafe { libc::write(to_parent, sent.as_ptr().cast(), 40) };
                if got.is_some() || !matches!(popped, Ok(None)) || n != 40 {
                    return 4;
                }
                // The parent pushes once it has the report.
                if rx.recv_timeout(&mut wait, Duration::from_secs(10)) != Some(7) {
                    return 5;
                }
                match qrx.pop_blocking(Duration::from_secs(10)) {
                    Ok(Some(8)) => 0,
                    _ => 6,
                }
            },
            |_| {
                // SAFETY: the parent's copy of the write end: the read below then ends at
                // the child's exit if it never writes.
                unsafe { libc::close(to_parent) };
                // SAFETY: `report` is 40 writable bytes for the read.
                let n = unsafe { libc::read(from_child, report.as_mut_ptr().cast(), 40) };
                // Give the child time to be waiting again before the records come.
                std::thread::sleep(Duration::from_millis(50));
                if n == 40 {
                    tx.push(&7);
                    // The child waits for the ring's record first.
                    std::thread::sleep(Duration::from_millis(50));
                    let _ = qtx.try_push(&8);
                }
            },
        );
        // SAFETY: the read end, no longer used.
        unsafe { libc::close(from_child) };
        let [failed, ring_cpu, ring_wall, queue_cpu, queue_wall] = report;
        let what = format!(
            "{failed} failed futex waits; ring: cpu {ring_cpu} µs, wall {ring_wall} µs; \
             queue: cpu {queue_cpu} µs, wall {queue_wall} µs"
        );
        crate::test_fork::assert_exited_0(status, &what);
        assert!(
            failed > 0,
            "the filter did not make FUTEX_WAIT fail: {what}"
        );
        for wall in [ring_wall, queue_wall] {
            assert!((290_000..5_000_000).contains(&wall), "300 ms waits: {what}");
        }
        // A spinning wait uses about all of the 300 ms; naps use a few ms.
        for cpu in [ring_cpu, queue_cpu] {
            assert!(cpu < 100_000, "a waiter spun: {what}");
        }
    }

    /// A ring whose `write_seq` no producer could have published is refused at attach, as
    /// producers, `serve` and the tools refuse it: at or past 2^63, or on an MPMC ring at or
    /// past its `claim_seq`. Nothing is registered, and the ring is left as it was.
    #[test]
    fn a_corrupt_write_seq_is_refused_at_attach() {
        use ringwire_core::AttachError;
        use ringwire_core::layout::SEQ_LIMIT;
        let t = tmp_paths(["bad-w", "bad-w-mpmc"]);
        let mut tx = RingProducer::<u64>::create_with_options(
            &t[0],
            RingProducer::<u64>::builder(8).max_readers(2),
        )
        .unwrap();
        tx.push(&1);
        let ring = *tx.file().ring();
        for bad in [SEQ_LIMIT, SEQ_LIMIT + 5, u64::MAX] {
            ring.write_seq().store(bad, Ordering::Release);
            for latest in [false, true] {
                let r = if latest {
                    RingConsumer::<u64>::attach_latest(&t[0])
                } else {
                    RingConsumer::<u64>::attach(&t[0])
                };
                let e = r.expect_err("attached to a corrupt ring");
                assert_eq!(
                    e.attach_error(),
                    Some(AttachError::WriteSeqExhausted { write_seq: bad }),
                    "{e}"
                );
                assert!(e.to_string().contains(&t[0].display().to_string()), "{e}");
            }
            assert_eq!(ring.write_seq().load(Ordering::Relaxed), bad);
        }
        let registry = tx.registry().expect("a registry");
        assert_eq!(registry.min_cursor(), None, "a refused reader registered");
        ring.write_seq().store(1, Ordering::Release);
        let mut rx = RingConsumer::<u64>::attach(&t[0]).unwrap();
        assert_eq!(rx.try_recv(), Some(1));
        // An MPMC ring: a write_seq at or past claim_seq is corrupt, one below it is not.
        let mtx = crate::MpmcProducer::<u64>::create(&t[1], 8).unwrap();
        for v in 1..=3u64 {
            mtx.push(&v);
        }
        let view = *mtx.file().ring();
        let claim = view.claim_seq().load(Ordering::Relaxed);
        for w in [claim, claim + 1, SEQ_LIMIT - 1] {
            view.write_seq().store(w, Ordering::Release);
            let e =
                RingConsumer::<u64>::attach(&t[1]).expect_err("attached to a corrupt MPMC ring");
            assert_eq!(
                e.attach_error(),
                Some(AttachError::WriteSeqPastClaimSeq {
                    write_seq: w,
                    claim_seq: claim
                }),
                "{e}"
            );
        }
        view.write_seq().store(claim - 1, Ordering::Release);
        let mut rx = RingConsumer::<u64>::attach(&t[1]).unwrap();
        assert_eq!(rx.try_recv(), Some(1));
    }

    #[test]
    fn a_write_seq_ahead_of_the_slots_leaves_a_waiting_reader_asleep() {
        let t = tmp_paths(["ahead"]);
        let mut tx = RingProducer::<u64>::create(&t[0], 8).unwrap();
        tx.push(&1);
        let mut rx = RingConsumer::<u64>::attach(&t[0]).unwrap();
        assert_eq!(rx.try_recv(), Some(1));
        // A corrupt header: write_seq claims records 2..=5, whose slots hold nothing (the
        // ring is neither sparse nor MPMC-flagged, and no slot holds the write marker).
        tx.file().ring().write_seq().store(5, Ordering::Release);
        let mut wait = FutexWait::default();
        let cpu0 = sys::thread_cpu_time();
        assert_eq!(rx.recv_timeout(&mut wait, Duration::from_millis(500)), None);
        let cpu = sys::thread_cpu_time() - cpu0;
        assert!(
            cpu < Duration::from_millis(150),
            "recv_timeout spun: {cpu:?} of CPU, {:?}",
            wait.stats()
        );
        assert!(wait.stats().sleeps > 0, "{:?}", wait.stats());
        // A record at the cursor still comes at once: its publish wakes the sleeper (the
        // sleeps last up to 30 s, so only a wake-up delivers it in time).
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            tx.push(&2);
            tx
        });
        let t0 = std::time::Instant::now();
        let mut wait = FutexWait::new(32, Some(Duration::from_secs(30)));
        assert_eq!(rx.recv_timeout(&mut wait, Duration::from_secs(20)), Some(2));
        let took = t0.elapsed();
        assert!(
            took < Duration::from_secs(5),
            "the record came late: {took:?}"
        );
        drop(late.join());
    }

    #[test]
    fn a_registry_cursor_scribbled_back_does_not_hold_a_lossless_producer_for_good() {
        // Found by a corruption audit: with the reader caught up, its registry cursor
        // scribbled a lap back held the lossless producer's push forever, and the reader,
        // publishing only when its cursor moved, waited for that push forever.
        // `update_cursor` stands in for the scribble (the same store).
        let t = tmp_paths(["scribbled-registry"]);
        let mut tx = RingProducer::<u64>::builder(8)
            .max_readers(2)
            .flow_control(crate::FlowControl::LosslessBackpressure)
            .build::<u64, _>(&t[0])
            .unwrap();
        let mut rx = RingConsumer::<u64>::attach(&t[0]).unwrap();
        tx.push_batch(&[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(rx.recv_batch(&mut [0; 8]), 8);
        rx.registration().unwrap().update_cursor(1);
        assert_eq!(tx.headroom(), 0);
        let pusher = std::thread::spawn(move || {
            tx.push(&9);
            tx
        });
        // Short sleeps: the reader looks at its slot every 64th empty poll in a row.
        let mut wait = FutexWait::new(0, Some(Duration::from_millis(1)));
        assert_eq!(rx.recv_timeout(&mut wait, Duration::from_secs(20)), Some(9));
        drop(pusher.join().unwrap());
    }

    #[test]
    fn commit_offset_publishes_the_registry_cursor_again() {
        let t = tmp_paths(["commit-ring", "commit-offset", "commit-offset-to"]);
        let mut tx = RingProducer::<u64>::builder(64)
            .max_readers(4)
            .build::<u64, _>(&t[0])
            .unwrap();
        tx.push_batch(&[1, 2, 3]);
        let mut rx = RingConsumer::<u64>::builder()
            .start_from_oldest()
            .offset_file(&t[1])
            .attach(&t[0])
            .unwrap();
        assert_eq!(rx.recv_batch(&mut [0; 3]), 3);
        let reg = rx.registry().unwrap();
        assert_eq!(reg.min_cursor(), Some(4));
        rx.registration().unwrap().update_cursor(1);
        assert_eq!(rx.registry().unwrap().min_cursor(), Some(1));
        rx.commit_offset().unwrap();
        assert_eq!(rx.registry().unwrap().min_cursor(), Some(4));
        assert_eq!(rx.checkpoint().unwrap().load(), Some(3));
        rx.registration().unwrap().update_cursor(2);
        rx.commit_offset_to(&t[2], "other").unwrap();
        assert_eq!(rx.registry().unwrap().min_cursor(), Some(4));
    }

    /// A consumer's copy read in a forked child registers in a slot of its own: before,
    /// it published its cursor into its parent's slot, so a lossless producer protected
    /// whichever process published last (the other could be lapped), and the slot, named
    /// by the parent's pid, was pruned when the parent exited while the child still read.
    #[test]
    fn a_forked_childs_copy_that_reads_takes_a_registry_slot_of_its_own() {
        use crate::test_fork::{assert_exited_0, forked};
        let t = tmp_paths(["fork-read-ring", "fork-read-blob"]);
        let mut tx = RingProducer::<u64>::builder(16)
            .max_readers(4)
            .flow_control(crate::FlowControl::LosslessBackpressure)
            .build::<u64, _>(&t[0])
            .unwrap();
        let mut btx = crate::BlobProducer::<()>::builder(16, 4096)
            .max_readers(4)
            .build::<(), _>(&t[1])
            .unwrap();
        tx.push_batch(&[1, 2, 3, 4]);
        for _ in 0..4 {
            btx.push_payload(b"blob").unwrap();
        }
        let rx = RingConsumer::<u64>::attach(&t[0]).unwrap();
        let brx = crate::BlobConsumer::<()>::attach(&t[1]).unwrap();
        let me = std::process::id();
        // (pid, cursor) of each live reader of the ring and of the blob ring.
        let readers = || {
            let ring = tx.registry().unwrap().active_readers(0);
            let blob = btx.active_readers();
            (
                ring.iter()
                    .map(|r| (r.pid, r.cursor_seq))
                    .collect::<Vec<_>>(),
                blob.iter()
                    .map(|r| (r.pid, r.cursor_seq))
                    .collect::<Vec<_>>(),
            )
        };
        assert_eq!(readers(), (vec![(me, 1)], vec![(me, 1)]));
        // The child's start time must differ from ours for the check of its tokens below
        // (a tick is 10 ms).
        let ours = sys::own_incarnation().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let status = forked(10, || {
            // SAFETY: this child never touches the originals again (it leaves through
            // `_exit`), so the bitwise copies are its only copies of the consumers.
            let (mut copy, mut bcopy) = unsafe { (std::ptr::read(&rx), std::ptr::read(&brx)) };
            let child = std::process::id();
            // Not the parent's slot, before and after the first read.
            if copy.registration().is_some() || copy.registry_slot().is_some() {
                return 2;
            }
            if copy.recv_batch(&mut [0; 3]) != 3 {
                return 3;
            }
            if bcopy.recv_payload(&mut [0; 16]).unwrap() != Some(4) {
                return 4;
            }
            let (ring, blob) = readers();
            if ring != [(me, 1), (child, 4)] || blob != [(me, 1), (child, 2)] {
                eprintln!("child sees ring {ring:?}, blob {blob:?}");
                return 5;
            }
            let reg = copy.registration().unwrap();
            if (reg.slot_index(), copy.registry_slot()) != (1, Some(1)) {
                return 6;
            }
            // The child's slots carry its own start time, not its parent's: with the
            // parent's, a liveness check would take the child for a later process that got
            // a dead reader's pid, and prune it.
            let mine = sys::own_incarnation().unwrap();
            let token_of = |f: &crate::file::RingFile| {
                let w = f
                    .ring()
                    .registry_a64(1, ringwire_core::layout::reg::HEARTBEAT_TSC);
                // Relaxed: the child's own stores, on this thread.
                w.unwrap().load(std::sync::atomic::Ordering::Relaxed)
            };
            for token in [token_of(tx.file()), token_of(btx.file())] {
                let carried = ringwire_core::broadcast::registry::token_incarnation(child, token);
                if carried != Some(mine) || mine == ours || !sys::reader_alive(child, token) {
                    eprintln!("child {mine:?} (parent {ours:?}) token carries {carried:?}");
                    return 8;
                }
            }
            drop(copy);
            drop(bcopy);
            // The copies gave up their own slots only.
            if readers() != (vec![(me, 1)], vec![(me, 1)]) {
                return 7;
            }
            0
        });
        assert_exited_0(status, "reading through the copies in the child");
        // The parent's slots still hold the parent's cursors.
        assert_eq!(readers(), (vec![(me, 1)], vec![(me, 1)]));
        assert_eq!(rx.registry_slot(), Some(0));
        drop(rx);
        drop(brx);
        assert_eq!(readers(), (vec![], vec![]));
    }

    /// A consumer's copy in a forked child used to commit its own cursor to the checkpoint
    /// its parent commits to: the file then held whichever process committed last, and a
    /// restart resumed after records the other had not processed (or replayed some). The
    /// copy's `commit_offset` is refused while the process that opened the checkpoint lives;
    /// the child can commit to a file of its own with `commit_offset_to`.
    #[test]
    fn a_forked_childs_copy_does_not_commit_to_its_parents_checkpoint() {
        use crate::test_fork::{assert_exited_0, forked};
        let t = tmp_paths(["fork-commit-ring", "fork-commit-offset", "fork-commit-own"]);
        let mut tx = RingProducer::<u64>::builder(16)
            .max_readers(4)
            .build::<u64, _>(&t[0])
            .unwrap();
        tx.push_batch(&[1, 2, 3, 4, 5, 6]);
        let mut rx = RingConsumer::<u64>::builder()
            .start_from_oldest()
            .offset_file(&t[1])
            .attach(&t[0])
            .unwrap();
        assert_eq!(rx.recv_batch(&mut [0; 2]), 2);
        rx.commit_offset().unwrap();
        let me = std::process::id();
        let status = forked(10, || {
            // SAFETY: this child never touches the original again (it leaves through
            // `_exit`), so the bitwise copy is its only copy of the consumer.
            let mut copy = unsafe { std::ptr::read(&rx) };
            if copy.recv_batch(&mut [0; 3]) != 3 {
                return 2;
            }
            match copy.commit_offset() {
                Err(Error::ForkedCheckpoint { opener, .. }) if opener == me => {}
                other => {
                    eprintln!("the copy's commit: {other:?}");
                    return 3;
                }
            }
            if copy.commit_offset_to(&t[2], "child").is_err() {
                return 4;
            }
            0
        });
        assert_exited_0(status, "committing through the copy in the child");
        assert_eq!(rx.checkpoint().unwrap().load(), Some(2));
        let own = OffsetCheckpoint::open_or_create(&t[2], "child").unwrap();
        assert_eq!(own.load(), Some(5));
        // The parent's own commits go on as before.
        assert_eq!(rx.recv_batch(&mut [0; 1]), 1);
        rx.commit_offset().unwrap();
        assert_eq!(rx.checkpoint().unwrap().load(), Some(3));
        let e = Error::ForkedCheckpoint {
            path: t[1].path().clone(),
            opener: 42,
        };
        assert_eq!(
            e.to_string(),
            format!(
                "offset file {}: opened by process 42, which is running; a copy inherited through fork does not commit to it (commit_offset_to a file of its own)",
                t[1].display()
            )
        );
    }

    /// A daemon's consumer (attached, then the process forks and the parent exits) commits
    /// from the child once the process that opened the checkpoint is gone.
    #[test]
    fn a_forked_copy_commits_once_the_checkpoints_opener_has_exited() {
        use crate::test_fork::{assert_exited_0, forked};
        let t = tmp_paths(["daemon-commit-ring", "daemon-commit-offset"]);
        let mut tx = RingProducer::<u64>::builder(16)
            .max_readers(4)
            .build::<u64, _>(&t[0])
            .unwrap();
        tx.push_batch(&[1, 2, 3, 4, 5, 6]);
        let status = forked(10, || {
            // The opener: attaches, forks the daemon and exits at once.
            let Ok(rx) = RingConsumer::<u64>::builder()
                .start_from_oldest()
                .offset_file(&t[1])
                .attach(&t[0])
            else {
                return 2;
            };
            // Dropped neither here nor in the daemon, which holds the only copy in use.
            let rx = std::mem::ManuallyDrop::new(rx);
            let opener = std::process::id();
            // SAFETY: the daemon runs only the code below and leaves through `_exit`.
            let pid = unsafe { libc::fork() };
            if pid < 0 {
                return 3;
            }
            if pid > 0 {
                return 0;
            }
            // SAFETY: alarm takes an integer and touches no memory of ours.
            unsafe { libc::alarm(10) };
            // SAFETY: the opener leaves through `_exit` without touching `rx` again.
            let mut copy = unsafe { std::ptr::read(&*rx) };
            let end = std::time::Instant::now() + Duration::from_secs(5);
            while sys::pid_alive(opener) && std::time::Instant::now() < end {
                std::thread::sleep(Duration::from_millis(2));
            }
            let code = if copy.recv_batch(&mut [0; 4]) == 4 && copy.commit_offset().is_ok() {
                0
            } else {
                1
            };
            // SAFETY: ends the daemon at once, without running inherited destructors.
            unsafe { libc::_exit(code) }
        });
        assert_exited_0(status, "the opener");
        let cp = OffsetCheckpoint::open_or_create(&t[1], "consumer").unwrap();
        let end = std::time::Instant::now() + Duration::from_secs(10);
        while cp.load() != Some(4) && std::time::Instant::now() < end {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(cp.load(), Some(4), "the daemon's commit");
    }

    #[test]
    fn a_forked_childs_copy_dropped_leaves_the_parents_registry_slot() {
        use crate::test_fork::{assert_exited_0, forked};
        let t = tmp_paths(["fork-drop-ring", "fork-drop-blob"]);
        let tx = RingProducer::<u64>::builder(16)
            .max_readers(2)
            .build::<u64, _>(&t[0])
            .unwrap();
        let btx = crate::BlobProducer::<()>::builder(16, 4096)
            .max_readers(2)
            .build::<(), _>(&t[1])
            .unwrap();
        let rx = RingConsumer::<u64>::attach(&t[0]).unwrap();
        let brx = crate::BlobConsumer::<()>::attach(&t[1]).unwrap();
        let me = std::process::id();
        let pids = || {
            let ring = tx.registry().unwrap().active_readers(0);
            let blob = btx.active_readers();
            (
                ring.iter().map(|r| r.pid).collect::<Vec<_>>(),
                blob.iter().map(|r| r.pid).collect::<Vec<_>>(),
            )
        };
        assert_eq!(pids(), (vec![me], vec![me]));
        let status = forked(10, || {
            // SAFETY: this child never touches the originals again (it leaves through
            // `_exit`), so the bitwise copies are its only copies of the consumers.
            let (copy, bcopy) = unsafe { (std::ptr::read(&rx), std::ptr::read(&brx)) };
            drop(copy);
            drop(bcopy);
            0
        });
        assert_exited_0(status, "drop in the child");
        assert_eq!(
            pids(),
            (vec![me], vec![me]),
            "the child freed the parent's slot"
        );
        drop(rx);
        drop(brx);
        assert_eq!(pids(), (vec![], vec![]));
    }

    /// An empty `offset_file` path is the default checkpoint of the consumer's name, as its
    /// docs say (ringfire's attach fails to open it instead).
    #[test]
    fn an_empty_offset_file_path_is_the_default_one() {
        let [ring] = tmp_paths(["empty-offset-path"]);
        let _tx = RingProducer::<u64>::create(&ring, 4).unwrap();
        for name in [None, Some("algo")] {
            let b = RingConsumer::<u64>::builder().offset_file("");
            let b = match name {
                Some(n) => b.consumer_name(n),
                None => b,
            };
            let rx = b.attach(&ring).unwrap();
            let want = default_path(&ring, name.unwrap_or(DEFAULT_CONSUMER_NAME));
            assert_eq!(rx.offset_path(), Some(&*want), "{name:?}");
            drop(rx);
            std::fs::remove_file(&want).unwrap();
        }
    }
}
