//! [`BlobProducer<M>`] and [`BlobConsumer<M>`]: blob rings in `/dev/shm` files, whose
//! records are a meta value `M` plus a byte blob in the ring's arena (spec §10),
//! ringfire-compatible.
//!
//! The arena and descriptor protocol is the core's [`BlobWriter`] / [`BlobReader`]; this
//! file creates or maps the file, converts `M` and wakes futex sleepers.

use std::marker::PhantomData;
use std::path::Path;

use ringwire_core::broadcast::blob::{BLOB_REF_LEN, BlobError, BlobReader, BlobWriter};
use ringwire_core::broadcast::registry;
use ringwire_core::layout::{schema_signature_of, slot_payload_offset, slot_stride};
use ringwire_core::{Expect, Geometry};
use zerocopy::{FromBytes, Immutable, IntoBytes};

use crate::error::{Error, Result};
use crate::file::{CleanupMode, CreateOptions, RingFile};
use crate::registry::{ReaderInfo, ReaderRegistry};
use crate::sys;
use crate::unreported_laps::UnreportedLaps;
use crate::wait::{self, WaitStrategy};

/// Registry slots a blob ring gets by default (spec §3).
pub const DEFAULT_BLOB_READERS: u32 = 32;
/// Registry name of a [`BlobConsumer`] (spec §5).
pub const BLOB_CONSUMER_NAME: &str = "anonymous";

/// The largest meta alignment a blob ring takes. ringfire's `BlobPacket<M>` is `{ meta: M,
/// blob_ref: BlobRef }` in C layout; up to 16 the BlobRef is the last 16 bytes of the slot
/// payload, which replication, `stat` and raw readers of both projects rely on (spec
/// §10.2). From 32 up tail padding follows it: ringfire 0.5.2 accepts such a meta but its
/// own replication then reads the BlobRef from padding, so ringwire refuses it.
const MAX_META_ALIGN: usize = 16;

/// Refuses, at compile time, a meta type aligned above [`MAX_META_ALIGN`].
const fn assert_meta_align<M>() {
    assert!(
        align_of::<M>() <= MAX_META_ALIGN,
        "blob meta types aligned above 16 bytes are not supported: ringfire's BlobRef is then not the last 16 bytes of the slot (spec §10.2)"
    );
}

/// The slot stride of `Slot<BlobPacket<M>>`: the packet (the meta rounded up to 8, then
/// the 16-byte BlobRef; with a meta aligned to at most 16 no tail padding follows) after
/// the sequence word, at the packet's alignment (spec §4.1).
const fn packet_stride<M>() -> usize {
    let meta = size_of::<M>().div_ceil(8) * 8;
    slot_stride(meta + BLOB_REF_LEN, packet_align::<M>())
}

/// Alignment of `BlobPacket<M>`: the BlobRef's 8, or the meta's when larger.
const fn packet_align<M>() -> usize {
    if align_of::<M>() > 8 {
        align_of::<M>()
    } else {
        8
    }
}

/// Where the meta starts in a slot payload (bytes `[8, stride)` of the slot, what the core
/// copies): 0, or 8 for a 16-aligned meta, whose packet starts at slot offset 16.
const fn meta_offset<M>() -> usize {
    slot_payload_offset(packet_align::<M>()) - 8
}

fn blob_expect<M>() -> Expect {
    Expect {
        element_size: u32::try_from(packet_stride::<M>()).ok(),
        schema_sig: Some(schema_signature_of::<M>()),
        slot_align: packet_align::<M>() as u64,
    }
}

/// Options for a [`BlobProducer`].
#[derive(Clone, Copy, Debug)]
pub struct BlobProducerBuilder {
    capacity: u64,
    arena_bytes: usize,
    readers: usize,
    create: CreateOptions,
}

impl BlobProducerBuilder {
    /// `capacity` descriptor slots and an arena of `arena_bytes` (a power of two ≥ 64), 32
    /// registry slots, mode 0o660, unlinked on drop.
    pub fn new(capacity: u64, arena_bytes: usize) -> Self {
        BlobProducerBuilder {
            capacity,
            arena_bytes,
            readers: DEFAULT_BLOB_READERS as usize,
            create: CreateOptions::default(),
        }
    }

    /// Registry slots (0 is allowed; the registry offset is still 128, as in the reference;
    /// more than `u32::MAX` is refused by `build`).
    pub fn max_readers(mut self, n: usize) -> Self {
        self.readers = n;
        self
    }

    /// What happens to the file on drop.
    pub fn cleanup_mode(mut self, mode: CleanupMode) -> Self {
        self.create.cleanup = mode;
        self
    }

    /// File mode for `open` (the umask applies).
    pub fn file_mode(mut self, mode: u32) -> Self {
        self.create.mode = mode;
        self
    }

    /// Creates the ring at `path`. (Two type parameters, as ringfire's, so that
    /// `build::<M, _>(path)` compiles against both crates.)
    pub fn build<M: IntoBytes + Immutable + 'static, P: AsRef<Path>>(
        self,
        path: P,
    ) -> Result<BlobProducer<M>> {
        BlobProducer::create_with(path.as_ref(), self)
    }
}

/// What [`BlobConsumer::recv_status`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlobRecvStatus {
    /// A message was received with nothing skipped before it in this call or the `Empty`
    /// calls just before it.
    Ok {
        /// Bytes of the blob now at the start of the caller's buffer.
        payload_len: usize,
    },
    /// Nothing new to read. Messages may still have been skipped (they count in
    /// [`BlobConsumer::lapped_count`] now, and the next `Lapped` reports them).
    Empty,
    /// A message was received, but older ones were skipped before it: slots the
    /// producer had overwritten, blobs overwritten in the arena, or holes of a mirror ring.
    Lapped {
        /// Messages skipped by this call and by the `recv_status` calls just before it that
        /// returned `Empty` (all in [`BlobConsumer::lapped_count`]).
        skipped: u64,
        /// Bytes of the blob that was received.
        payload_len: usize,
    },
}

/// The single writer of a blob ring.
///
/// The meta type `M` is laid out as ringfire's `Slot<BlobPacket<M>>`: aligned to at most 8,
/// it starts right after the slot's sequence word; a 16-aligned one (`u128`,
/// `#[repr(C, align(16))]`) at slot offset 16. A meta aligned above 16 is refused at compile
/// time, where ringfire accepts it: its BlobRef would no longer end the slot, as
/// replication and raw readers expect (spec §10.2).
///
/// ```compile_fail
/// #[repr(C, align(32))]
/// #[derive(zerocopy::IntoBytes, zerocopy::Immutable)]
/// struct Meta32([u64; 4]);
/// let _ = ringwire::BlobProducer::<Meta32>::create("/dev/shm/never-made", 8, 4096);
/// ```
pub struct BlobProducer<M> {
    writer: BlobWriter,
    scratch: Vec<u8>,
    /// `push_with`'s payload buffer, grown to the largest length asked for.
    fill_buf: Vec<u8>,
    file: RingFile,
    _m: PhantomData<fn(&M)>,
}

impl<M: IntoBytes + Immutable + 'static> BlobProducer<M> {
    /// Creates a blob ring with `capacity` slots and an `arena_bytes` arena at `path`.
    pub fn create(path: impl AsRef<Path>, capacity: u64, arena_bytes: usize) -> Result<Self> {
        Self::create_with(
            path.as_ref(),
            BlobProducerBuilder::new(capacity, arena_bytes),
        )
    }

    /// A builder for the other options.
    pub fn builder(capacity: u64, arena_bytes: usize) -> BlobProducerBuilder {
        BlobProducerBuilder::new(capacity, arena_bytes)
    }

    fn create_with(path: &Path, b: BlobProducerBuilder) -> Result<Self> {
        const { assert_meta_align::<M>() };
        let readers = crate::error::readers_u32(path, b.readers)?;
        // usize is at most 64 bits on every target std runs on.
        let geo = Geometry::blob(
            b.capacity,
            packet_stride::<M>(),
            readers,
            b.arena_bytes as u64,
        )
        .map_err(|source| Error::Geometry {
            path: path.to_path_buf(),
            source,
        })?
        .with_schema(schema_signature_of::<M>());
        let file = RingFile::create(path, &geo, &b.create)?;
        // The copy lives in the handle, which owns `file` and drops it last.
        let mut writer = BlobWriter::new(*file.ring()).map_err(|source| Error::Blob {
            path: path.to_path_buf(),
            source,
        })?;
        writer.set_fenced_publish(crate::sys::fenced_publish());
        Ok(BlobProducer {
            writer,
            scratch: vec![0u8; geo.record_len()],
            fill_buf: Vec::new(),
            file,
            _m: PhantomData,
        })
    }

    /// Publishes `meta` with `payload` and returns the sequence. A payload longer than the
    /// arena is an error naming its length.
    pub fn push(&mut self, meta: &M, payload: &[u8]) -> Result<u64> {
        let m = meta.as_bytes();
        self.scratch.fill(0);
        self.scratch[meta_offset::<M>()..][..m.len()].copy_from_slice(m);
        let pushed = self
            .writer
            .push(&mut self.scratch, payload, 0)
            .map_err(|source| Error::Blob {
                path: self.file.path().to_path_buf(),
                source,
            })?;
        if pushed.wake {
            self.file.wake_after_publish();
        }
        Ok(pushed.seq)
    }

    /// Publishes `meta` with a `len`-byte payload that `f` fills, and returns the sequence
    /// with what `f` returned: ringfire's zero-copy `push_with`, except that `f` fills a
    /// buffer this producer keeps (zeroed, exactly `len` bytes, reused across calls) which
    /// is then copied into the arena. Our arena is written with atomic word stores because
    /// a lapped reader may still be copying the bytes being overwritten; handing `f` a
    /// `&mut [u8]` into the arena would make that a data race.
    ///
    /// A `len` longer than the arena takes (its capacity, at most `u32::MAX`) is the same
    /// error as [`BlobProducer::push`] gives, returned before `f` runs; nothing is
    /// published. `len == 0` calls `f` with an empty slice. If `f` panics, nothing is
    /// published and no arena space is used.
    pub fn push_with<F, R>(&mut self, meta: &M, len: usize, f: F) -> Result<(u64, R)>
    where
        F: FnOnce(&mut [u8]) -> R,
    {
        // usize is at most 64 bits on every target std runs on.
        let max = self.max_blob_len();
        if len as u64 > max {
            return Err(Error::Blob {
                path: self.file.path().to_path_buf(),
                source: BlobError::TooLarge { len, max },
            });
        }
        let mut buf = std::mem::take(&mut self.fill_buf);
        if buf.len() < len {
            buf.resize(len, 0);
        }
        let payload = &mut buf[..len];
        payload.fill(0);
        let r = f(payload);
        let seq = self.push(meta, &buf[..len]);
        self.fill_buf = buf;
        Ok((seq?, r))
    }

    /// The longest blob the arena takes: its capacity, capped at `u32::MAX`.
    fn max_blob_len(&self) -> u64 {
        self.file
            .ring()
            .geometry()
            .arena_size
            .min(u64::from(u32::MAX))
    }

    /// The smallest cursor (next sequence to read) of the live registered readers, after
    /// freeing the registry slots of readers whose process has died; `None` when no reader
    /// is registered (always so with `max_readers(0)`). Each call scans the whole registry
    /// and signals every registered pid (`kill(pid, 0)`) and reads its `/proc/<pid>/stat`: a
    /// monitoring call, not a hot-path one.
    pub fn min_reader_seq(&self) -> Option<u64> {
        let ring = self.file.ring();
        registry::prune_dead_by(ring, sys::reader_alive, |_| {});
        registry::min_live_cursor(ring)
    }

    /// Messages published that the slowest live reader has not read yet:
    /// `sequence() - (min_reader_seq() - 1)`, 0 when no reader is registered or the slowest
    /// one has read everything. A reader lapped while idle can show more than the capacity.
    /// Prunes dead readers first, as [`BlobProducer::min_reader_seq`] does.
    pub fn reader_lag(&self) -> u64 {
        let ring = self.file.ring();
        registry::prune_dead_by(ring, sys::reader_alive, |_| {});
        registry::slowest_unread(ring, self.sequence()).unwrap_or(0)
    }

    /// Messages the producer can still publish before it overwrites a slot the slowest live
    /// reader has not read: `capacity - reader_lag()`, the capacity when no reader is
    /// registered, 0 once that reader is lapped. It counts descriptor slots only: a large
    /// blob can overwrite an unread blob in the arena sooner (the reader then counts it as
    /// lapped).
    pub fn headroom(&self) -> u64 {
        self.file
            .ring()
            .capacity()
            .saturating_sub(self.reader_lag())
    }

    /// The live registered readers in slot order, with their lag behind
    /// [`BlobProducer::sequence`], after pruning dead ones (a monitoring call, as
    /// [`BlobProducer::min_reader_seq`]).
    pub fn active_readers(&self) -> Vec<ReaderInfo> {
        ReaderRegistry::of(self.file.ring())
            .map(|r| r.active_readers(self.sequence()))
            .unwrap_or_default()
    }

    /// The highest published sequence.
    pub fn sequence(&self) -> u64 {
        self.writer.next_seq() - 1
    }

    /// The ring file.
    pub fn file(&self) -> &RingFile {
        &self.file
    }

    /// `msync` of the mapping.
    pub fn flush(&self) -> Result<()> {
        self.file.flush()
    }
}

impl BlobProducer<()> {
    /// [`BlobProducer::push`] for a ring without meta.
    pub fn push_payload(&mut self, payload: &[u8]) -> Result<u64> {
        self.push(&(), payload)
    }
}

/// A reader of a blob ring: starts at the oldest retained message and registers as
/// `"anonymous"` when there is a free registry slot. A copy inherited through `fork` takes
/// a slot of its own on its first receive in the child and leaves its parent's to the
/// parent, also when dropped, as a [`RingConsumer`](crate::RingConsumer)'s does.
pub struct BlobConsumer<M> {
    reader: BlobReader,
    scratch: Vec<u8>,
    /// `view`'s payload copy, grown to the largest payload seen.
    view_buf: Vec<u8>,
    /// The blob length of a message `view` took from the ring and has not delivered yet:
    /// its `f` is running, or panicked. Its descriptor is in `scratch`, its blob in
    /// `view_buf`, and it is the reader's `cursor - 1`; the next receive delivers it.
    undelivered: Option<usize>,
    /// The skips [`BlobConsumer::recv_status`] calls that returned `Empty` found, to be
    /// reported with the next message.
    unreported_laps: UnreportedLaps,
    /// ringfire's view of the registry, built at attach.
    registry: Option<Box<ReaderRegistry>>,
    /// The process's fork generation when the reader registered (see `RingConsumer`'s).
    fork_generation: u64,
    file: RingFile,
    _m: PhantomData<fn() -> M>,
}

impl<M: FromBytes + 'static> BlobConsumer<M> {
    /// Attaches to the blob ring at `path`. A header flagged `MODE_MPMC` (only a corrupt
    /// one: a blob ring has one writer) is refused, [`Error::Blob`] with
    /// [`BlobError::WrongKind`], as the core's [`BlobReader::new`] refuses it.
    pub fn attach(path: impl AsRef<Path>) -> Result<Self> {
        Self::attach_with_name(path, BLOB_CONSUMER_NAME)
    }

    /// Attaches and registers under `name`.
    pub fn attach_with_name(path: impl AsRef<Path>, name: &str) -> Result<Self> {
        let path = path.as_ref();
        const { assert_meta_align::<M>() };
        let file = RingFile::open(path, blob_expect::<M>())?;
        // A corrupt write_seq is refused, as by `RingConsumer`.
        file.checked_write_seq()?;
        let blob_err = |source| Error::Blob {
            path: path.to_path_buf(),
            source,
        };
        // The copy lives in the handle, which owns `file` and drops it last.
        let mut reader = BlobReader::new(*file.ring()).map_err(blob_err)?;
        // Before the registration: a fork after it must show.
        let fork_generation = sys::fork_generation();
        // A full registry leaves the reader unregistered, as in the reference.
        if file.ring().geometry().registry_count > 0 {
            reader.set_incarnation(sys::own_incarnation());
            let _ = reader.register(std::process::id(), name, sys::reader_alive);
        }
        let n = file.ring().geometry().record_len();
        // Lives in the handle beside `file`, which keeps the mapping it views.
        let registry = ReaderRegistry::of(file.ring()).map(Box::new);
        Ok(BlobConsumer {
            reader,
            scratch: vec![0u8; n],
            view_buf: Vec::new(),
            undelivered: None,
            unreported_laps: UnreportedLaps::default(),
            registry,
            fork_generation,
            file,
            _m: PhantomData,
        })
    }

    /// Receives the next message: the meta into `meta`, the blob into `out`. Returns the
    /// blob length, `Ok(None)` when caught up, or an error when `out` is too small (the
    /// message then stays unread).
    pub fn recv(&mut self, meta: &mut M, out: &mut [u8]) -> Result<Option<usize>> {
        if let Some(len) = self.undelivered {
            let Some(dst) = out.get_mut(..len) else {
                return Err(Error::Blob {
                    path: self.file.path().to_path_buf(),
                    source: BlobError::BufferTooSmall {
                        len: out.len(),
                        // A blob the arena held, so at most u32::MAX bytes.
                        need: len as u32,
                    },
                });
            };
            dst.copy_from_slice(&self.view_buf[..len]);
            self.undelivered = None;
            *meta = self.scratch_meta();
            return Ok(Some(len));
        }
        self.register_after_fork();
        let got = self
            .reader
            .recv(&mut self.scratch, out)
            .map_err(|source| Error::Blob {
                path: self.file.path().to_path_buf(),
                source,
            })?;
        Ok(got.map(|r| {
            *meta = self.scratch_meta();
            r.len
        }))
    }

    /// In a child forked since the reader registered, registers its copy in a slot of its
    /// own (see [`RingConsumer`](crate::RingConsumer)'s docs); a relaxed load otherwise.
    #[inline(always)]
    fn register_after_fork(&mut self) {
        if sys::forked_since(self.fork_generation) {
            self.fork_generation = sys::fork_generation();
            // A full registry leaves the copy unregistered.
            // The child's own start time, not its parent's.
            self.reader.set_incarnation(sys::own_incarnation());
            let _ = self
                .reader
                .register_as(std::process::id(), sys::reader_alive);
        }
    }

    /// The meta of the descriptor in `scratch`.
    fn scratch_meta(&self) -> M {
        // The scratch is at least meta_offset + size_of::<M>() + 16 bytes (the stride check
        // at attach), so the meta always reads.
        M::read_from_prefix(&self.scratch[meta_offset::<M>()..])
            .map(|(m, _)| m)
            .unwrap_or_else(|_| M::new_zeroed())
    }

    /// [`BlobConsumer::recv`] that also says whether messages were skipped to get there:
    /// [`BlobRecvStatus::Lapped`] with the number skipped since the last message
    /// (overwritten slots, overwritten blobs, holes of a mirror ring; the increase of
    /// [`BlobConsumer::lapped_count`]), [`BlobRecvStatus::Ok`] when none was,
    /// [`BlobRecvStatus::Empty`] when caught up. A call that skips messages and then finds
    /// the next one not yet readable (the producer is rewriting its slot) returns `Empty`;
    /// the messages it skipped are counted in `lapped_count` at once and reported with the
    /// message the next `recv_status` returns. An `out` shorter than the next blob is an
    /// error and that message stays unread; messages that call skipped before it stay
    /// skipped and counted, though no status reports them, as in ringfire (the skips of the
    /// `Empty` calls before it are still reported with the next message). Skips found by
    /// another call (`recv`, `view`, a wait) are counted in `lapped_count` only.
    pub fn recv_status(&mut self, meta: &mut M, out: &mut [u8]) -> Result<BlobRecvStatus> {
        // Skips found by the `Empty` calls just before this one, with the cursor moved by
        // nothing else since, belong to the message this call returns.
        let lapped = self.lapped_count();
        let before = self.unreported_laps.since(self.cursor(), lapped);
        let got = match self.recv(meta, out) {
            Ok(Some(got)) => got,
            Ok(None) => {
                self.unreported_laps.empty(self.cursor(), before);
                return Ok(BlobRecvStatus::Empty);
            }
            Err(e) => {
                let now = self.lapped_count();
                self.unreported_laps
                    .failed(self.cursor(), before, lapped, now);
                return Err(e);
            }
        };
        self.unreported_laps.reported();
        // The reader's lapped count only grows (saturating), and `before` is a value it
        // had, so this never underflows.
        Ok(match self.lapped_count() - before {
            0 => BlobRecvStatus::Ok { payload_len: got },
            skipped => BlobRecvStatus::Lapped {
                skipped,
                payload_len: got,
            },
        })
    }

    /// Hands the next message to `f` as `(meta, payload)` and returns what it returns, or
    /// `Ok(None)` when caught up: ringfire's `view`, with one difference that only makes it
    /// safer. `f` never sees shared memory: the payload is first copied out and validated
    /// like [`BlobConsumer::recv`]'s (into a buffer this consumer keeps, grown to the
    /// largest payload seen), so `f` runs exactly once per message, on bytes no writer can
    /// change under it, and a message lapped during the copy is skipped before `f` runs.
    ///
    /// The message counts as received only once `f` returns. Should `f` panic, the
    /// [cursor](BlobConsumer::cursor) stays on it and the next receive (`view`, `recv`, …)
    /// delivers it again, as ringfire's does; from the copy, where ringfire reads the ring
    /// again (the registry slot already shows it read).
    pub fn view<R>(&mut self, mut f: impl FnMut(&M, &[u8]) -> R) -> Result<Option<R>> {
        let len = match self.undelivered {
            Some(len) => len,
            None => match self.copy_next()? {
                Some(len) => len,
                None => return Ok(None),
            },
        };
        self.undelivered = Some(len);
        let r = f(&self.scratch_meta(), &self.view_buf[..len]);
        self.undelivered = None;
        Ok(Some(r))
    }

    /// Takes the next message from the ring into `scratch` and `view_buf` (grown to fit);
    /// returns its blob length, or `None` when caught up.
    fn copy_next(&mut self) -> Result<Option<usize>> {
        self.register_after_fork();
        loop {
            let got = self.reader.recv(&mut self.scratch, &mut self.view_buf);
            return match got {
                Ok(got) => Ok(got.map(|r| r.len)),
                Err(BlobError::BufferTooSmall { need, .. }) => {
                    // The message stays unread: grow and read it again. `need` is at most
                    // the arena's capacity (the core checks the span lies inside the arena
                    // before it reports a short buffer), so this stays bounded by the file.
                    self.view_buf.resize(need as usize, 0);
                    continue;
                }
                Err(source) => Err(Error::Blob {
                    path: self.file.path().to_path_buf(),
                    source,
                }),
            };
        }
    }

    /// Like [`BlobConsumer::recv`], also returning the sequence.
    pub fn recv_seq(&mut self, meta: &mut M, out: &mut [u8]) -> Result<Option<(u64, usize)>> {
        let len = self.recv(meta, out)?;
        // The received message is the one just below the new cursor.
        Ok(len.map(|l| (self.cursor() - 1, l)))
    }

    /// Waits with `wait` (bounded waits, re-checked) until a message arrives or `timeout`
    /// passes; a sleeping strategy never sleeps past it. `Ok(None)` also when the ring was
    /// removed or replaced at its path meanwhile (its mapping never advances again), which
    /// [`RingFile::is_replaced`] through [`BlobConsumer::file`] tells apart from a quiet
    /// ring.
    pub fn recv_timeout<W: WaitStrategy>(
        &mut self,
        wait: &mut W,
        meta: &mut M,
        out: &mut [u8],
        timeout: std::time::Duration,
    ) -> Result<Option<usize>> {
        let deadline = wait::deadline_after(timeout);
        let mut idle = wait::Idle::default();
        loop {
            idle.before_poll::<W>(self.file.ring(), self.reader.cursor());
            if let Some(n) = self.recv(meta, out)? {
                wait.reset();
                return Ok(Some(n));
            }
            if !wait::before(deadline) {
                return Ok(None);
            }
            // As `RingConsumer::recv_timeout`: a corrupt header leaves no spin.
            idle.wait(wait, self.file.ring(), self.reader.cursor(), deadline);
        }
    }

    /// The next sequence to read (a message whose `view` closure panicked is still to
    /// read).
    pub fn cursor(&self) -> u64 {
        self.next_seq()
    }

    /// Messages skipped (overwritten, or blob lost).
    pub fn lapped_count(&self) -> u64 {
        self.reader.lapped_count()
    }

    /// The ring's reader registry (a blob ring always has one, possibly of 0 slots).
    pub fn registry(&self) -> Option<&ReaderRegistry> {
        self.registry.as_deref()
    }

    /// Published messages not read yet.
    pub fn lag(&self) -> u64 {
        let w = self.file.write_seq();
        let c = self.cursor();
        if w >= c { w - c + 1 } else { 0 }
    }

    /// The ring file.
    pub fn file(&self) -> &RingFile {
        &self.file
    }
}

impl BlobConsumer<()> {
    /// [`BlobConsumer::recv`] for a ring without meta: the blob into `out`, its length, or
    /// `Ok(None)` when caught up.
    pub fn recv_payload(&mut self, out: &mut [u8]) -> Result<Option<usize>> {
        self.recv(&mut (), out)
    }
}

impl<M> std::fmt::Debug for BlobProducer<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobProducer")
            .field("file", &self.file)
            .finish()
    }
}

impl<M> BlobConsumer<M> {
    /// [`BlobConsumer::cursor`]: the reader's, less the message `view` has not delivered.
    fn next_seq(&self) -> u64 {
        self.reader.cursor() - u64::from(self.undelivered.is_some())
    }
}

impl<M> Drop for BlobConsumer<M> {
    fn drop(&mut self) {
        // As RingConsumer's: a copy inherited through fork leaves the slot to the parent.
        let _ = self.reader.unregister_as(std::process::id());
    }
}

impl<M> std::fmt::Debug for BlobConsumer<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobConsumer")
            .field("file", &self.file)
            .field("cursor", &self.next_seq())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use crate::test_tmp::TmpPath;
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_message_whose_view_closure_panicked_is_delivered_again() {
        let path = TmpPath::new("blob-view-panic");
        let mut tx = BlobProducer::<u64>::create(&path, 16, 4096).unwrap();
        tx.push(&7, b"first").unwrap();
        tx.push(&8, b"second").unwrap();
        let mut rx = BlobConsumer::<u64>::attach(&path).unwrap();
        assert_eq!((rx.cursor(), rx.lag()), (1, 2));
        let r = catch_unwind(AssertUnwindSafe(|| {
            rx.view(|m, b| {
                assert_eq!((*m, b), (7, &b"first"[..]));
                panic!("the handler failed");
            })
        }));
        assert!(r.is_err());
        assert_eq!((rx.cursor(), rx.lag()), (1, 2));
        assert_eq!(
            rx.view(|m, b| (*m, b.to_vec())).unwrap(),
            Some((7, b"first".to_vec()))
        );
        assert_eq!((rx.cursor(), rx.lag()), (2, 1));
        // After a panic, the other receives deliver it too; a buffer too short leaves it.
        let r = catch_unwind(AssertUnwindSafe(|| rx.view(|_, _| panic!("again"))));
        assert!(r.is_err());
        let mut meta = 0u64;
        let mut out = [0u8; 16];
        assert!(matches!(
            rx.recv(&mut meta, &mut out[..3]),
            Err(Error::Blob {
                source: BlobError::BufferTooSmall { len: 3, need: 6 },
                ..
            })
        ));
        assert_eq!(rx.recv_seq(&mut meta, &mut out).unwrap(), Some((2, 6)));
        assert_eq!((meta, &out[..6]), (8, &b"second"[..]));
        assert_eq!(rx.view(|_, _| ()).unwrap(), None);
        assert_eq!((rx.cursor(), rx.lag(), rx.lapped_count()), (3, 0, 0));
    }

    /// As `RingConsumer`'s attach: a `write_seq` at or past 2^63 is a corrupt header.
    #[test]
    fn a_write_seq_past_the_limit_is_refused_at_attach() {
        use ringwire_core::layout::SEQ_LIMIT;
        let path = TmpPath::new("blob-bad-w");
        let mut tx = BlobProducer::<u64>::create(&path, 16, 4096).unwrap();
        tx.push(&1, b"one").unwrap();
        let w = tx.file().ring().write_seq();
        w.store(SEQ_LIMIT + 1, ringwire_core::sync::Ordering::Release);
        let got = BlobConsumer::<u64>::attach(&path).err();
        w.store(1, ringwire_core::sync::Ordering::Release);
        let ok = BlobConsumer::<u64>::attach(&path).map(|mut rx| {
            let (mut meta, mut out) = (0u64, [0u8; 16]);
            rx.recv(&mut meta, &mut out).map(|n| (n, meta))
        });
        drop(tx);
        let e = got.expect("attached to a corrupt ring");
        assert_eq!(
            e.attach_error(),
            Some(ringwire_core::AttachError::WriteSeqExhausted {
                write_seq: SEQ_LIMIT + 1
            }),
            "{e}"
        );
        assert_eq!(ok.unwrap().unwrap(), (Some(3), 1));
    }

    /// A blob ring of 4 slots and a 4 KiB arena at a fresh path named for `name`, with a
    /// consumer attached before anything is pushed.
    fn four_slot_ring(name: &str) -> (TmpPath, BlobProducer<u64>, BlobConsumer<u64>) {
        let path = TmpPath::new(name);
        let tx = BlobProducer::<u64>::create(&path, 4, 4096).unwrap();
        let rx = BlobConsumer::<u64>::attach(&path).unwrap();
        (path, tx, rx)
    }

    /// As `RingConsumer`'s test: a reader lapped while the producer is rewriting the oldest
    /// slot it could move to finds nothing readable there, so that `recv_status` is
    /// `Empty` though it counted 3 lost messages. The next one said `Lapped` with only its
    /// own call's loss (1 of the 4 lost between messages 1 and 6); it reports all of them.
    #[test]
    fn recv_status_reports_the_losses_an_empty_call_found_with_the_next_message() {
        use ringwire_core::layout::SLOT_WRITING;
        use ringwire_core::sync::Ordering;
        let (_path, mut tx, mut rx) = four_slot_ring("blob-status-empty-lap");
        let (mut meta, mut out) = (0u64, [0u8; 16]);
        let mut status = |rx: &mut BlobConsumer<u64>| {
            let s = rx.recv_status(&mut meta, &mut out).unwrap();
            (s, meta, out[0])
        };
        let ok = |m: u64| (BlobRecvStatus::Ok { payload_len: 1 }, m, m as u8);
        tx.push(&1, &[1]).unwrap();
        assert_eq!(status(&mut rx), ok(1));
        for m in 2..=8u64 {
            tx.push(&m, &[m as u8]).unwrap();
        }
        // The producer has begun writing message 9 over message 5's slot.
        tx.file()
            .ring()
            .slot_seq(9)
            .store(SLOT_WRITING, Ordering::Release);
        let empty = (status(&mut rx).0, rx.lapped_count(), rx.cursor());
        assert_eq!(empty, (BlobRecvStatus::Empty, 3, 5), "messages 2 to 4 lost");
        // Nothing new at the cursor yet: still Empty, nothing counted twice.
        assert_eq!(status(&mut rx).0, BlobRecvStatus::Empty);
        // Message 9 written: message 5 is lost too, and 6 is the next one.
        tx.push(&9, &[9]).unwrap();
        let lapped = BlobRecvStatus::Lapped {
            skipped: 4,
            payload_len: 1,
        };
        assert_eq!(status(&mut rx), (lapped, 6, 6));
        assert_eq!(rx.lapped_count(), 4);
        let rest = [status(&mut rx), status(&mut rx), status(&mut rx)];
        assert_eq!(rest, [ok(7), ok(8), ok(9)]);
        assert_eq!(status(&mut rx).0, BlobRecvStatus::Empty);
    }

    /// Skips an `Empty` call stored are reported by the next message even when a call that
    /// failed on a short buffer came between. That call's own skips stay unreported, as in
    /// ringfire (the shm_blob interop tests pin it). It moved the cursor, which used to
    /// drop the stored skips too: the message after it said `Ok`.
    #[test]
    fn recv_status_still_reports_an_empty_calls_losses_after_a_failed_call() {
        use ringwire_core::layout::SLOT_WRITING;
        use ringwire_core::sync::Ordering;
        let (_path, mut tx, mut rx) = four_slot_ring("blob-status-empty-short");
        let (mut meta, mut out) = (0u64, [0u8; 16]);
        tx.push(&1, &[1]).unwrap();
        let got = rx.recv_status(&mut meta, &mut out).unwrap();
        assert_eq!(got, BlobRecvStatus::Ok { payload_len: 1 });
        // Messages `ms`, each of one byte but `long`, of 8.
        let push = |tx: &mut BlobProducer<u64>, ms: core::ops::RangeInclusive<u64>, long| {
            for m in ms {
                let byte = [m as u8];
                let blob: &[u8] = if m == long { b"long...." } else { &byte };
                tx.push(&m, blob).unwrap();
            }
        };
        // 2 to 8 in 4 slots, 6 long; 9 being written over 5's slot.
        push(&mut tx, 2..=8, 6);
        let writing = |tx: &BlobProducer<u64>, seq| {
            let slot = tx.file().ring().slot_seq(seq);
            slot.store(SLOT_WRITING, Ordering::Release);
        };
        writing(&tx, 9);
        let empty = rx.recv_status(&mut meta, &mut out).unwrap();
        let empty = (empty, rx.lapped_count(), rx.cursor());
        assert_eq!(empty, (BlobRecvStatus::Empty, 3, 5), "messages 2 to 4 lost");
        // 9 written: the next call skips 5 too, then finds 6 too long for 4 bytes.
        tx.push(&9, &[9]).unwrap();
        let short = rx.recv_status(&mut meta, &mut out[..4]);
        assert!(
            matches!(
                short,
                Err(Error::Blob {
                    source: BlobError::BufferTooSmall { len: 4, need: 8 },
                    ..
                })
            ),
            "{short:?}"
        );
        assert_eq!((rx.cursor(), rx.lapped_count()), (6, 4));
        // The Empty call's 3 are reported, the failed call's 1 is not.
        let got = rx.recv_status(&mut meta, &mut out).unwrap();
        let lapped = BlobRecvStatus::Lapped {
            skipped: 3,
            payload_len: 8,
        };
        assert_eq!((got, meta, &out[..8]), (lapped, 6, &b"long...."[..]));
        for m in 7..=8 {
            let got = rx.recv_status(&mut meta, &mut out).unwrap();
            assert_eq!((got, meta), (BlobRecvStatus::Ok { payload_len: 1 }, m));
        }
        // Two failed calls in a row (the first skips 12, the second nothing) keep them too.
        push(&mut tx, 10..=15, 13);
        writing(&tx, 16);
        let empty = rx.recv_status(&mut meta, &mut out).unwrap();
        let empty = (empty, rx.lapped_count(), rx.cursor());
        assert_eq!(
            empty,
            (BlobRecvStatus::Empty, 7, 12),
            "messages 9 to 11 lost"
        );
        tx.push(&16, &[16]).unwrap();
        let short = rx.recv_status(&mut meta, &mut out[..4]);
        assert!(short.is_err(), "{short:?}");
        let short = rx.recv_status(&mut meta, &mut out[..4]);
        assert!(short.is_err(), "{short:?}");
        assert_eq!((rx.cursor(), rx.lapped_count()), (13, 8));
        let got = rx.recv_status(&mut meta, &mut out).unwrap();
        let lapped = BlobRecvStatus::Lapped {
            skipped: 3,
            payload_len: 8,
        };
        assert_eq!((got, meta), (lapped, 13));
    }

    /// A blob ring file whose header was scribbled to an MPMC ring's (flags with
    /// `MODE_MPMC`, `claim_seq` past `write_seq`; no writer makes one): the consumer
    /// attached and would then wait for good at a slot left mid-write, which it passes as
    /// lost only on a single-writer ring. It is refused at attach, as the core reader
    /// refuses it; `stat` and `dump`, which read the file without a `BlobReader`, still
    /// report it. (With a blob ring's `claim_seq` of 0 the header was already refused as
    /// corrupt: an MPMC `write_seq` must be below `claim_seq`.)
    #[test]
    fn a_consumer_refuses_an_mpmc_flagged_blob_ring_and_stat_and_dump_report_it() {
        use ringwire_core::layout::hdr;
        use std::os::unix::fs::FileExt;
        let path = TmpPath::new("blob-mpmc-flag");
        let mut tx = BlobProducer::<u64>::create(&path, 16, 4096).unwrap();
        tx.push(&1, b"one").unwrap();
        let scribble = |flags: u32, claim_seq: u64| {
            let f = std::fs::OpenOptions::new().write(true).open(&path)?;
            f.write_all_at(&flags.to_ne_bytes(), hdr::FLAGS as u64)?;
            f.write_all_at(&claim_seq.to_ne_bytes(), hdr::CLAIM_SEQ as u64)
        };
        let dump = || {
            let mut out = Vec::new();
            let args = ["ringwire".as_ref(), "dump".as_ref(), path.as_os_str()];
            crate::cli::run(crate::cli::parse_from(args).unwrap(), &mut out)
                .map(|()| String::from_utf8_lossy(&out).into_owned())
        };
        scribble(0x0331, 2).unwrap();
        let e = BlobConsumer::<u64>::attach(&path).err();
        let (stat, dumped) = (crate::cli::stat_json(&path), dump());
        scribble(0x0331, 0).unwrap();
        let e0 = BlobConsumer::<u64>::attach(&path).err();
        scribble(0x0311, 0).unwrap();
        let e = e.expect("attached to an MPMC-flagged blob ring");
        assert!(
            matches!(
                e,
                Error::Blob {
                    source: BlobError::WrongKind {
                        flags: 0x0331,
                        need: "a single-writer ring"
                    },
                    ..
                }
            ),
            "{e}"
        );
        let stat = stat.unwrap();
        assert_eq!(
            (&stat["mode"], &stat["has_arena"]),
            (&"MPMC".into(), &true.into())
        );
        let dumped = dumped.unwrap();
        assert!(dumped.starts_with("seq 1 slot 1 seq_word 1 "), "{dumped}");
        let e0 = e0.expect("attached with write_seq past claim_seq");
        let corrupt = ringwire_core::AttachError::WriteSeqPastClaimSeq {
            write_seq: 1,
            claim_seq: 0,
        };
        assert_eq!(e0.attach_error(), Some(corrupt), "{e0}");
        // With the header back, the same file attaches and reads.
        let mut rx = BlobConsumer::<u64>::attach(&path).unwrap();
        let (mut meta, mut buf) = (0u64, [0u8; 8]);
        assert_eq!(rx.recv(&mut meta, &mut buf).unwrap(), Some(3));
        assert_eq!((meta, &buf[..3]), (1, &b"one"[..]));
    }

    #[test]
    fn recv_timeout_sleeps_at_a_write_seq_ahead_of_the_slots() {
        let path = TmpPath::new("blob-ahead");
        let mut tx = BlobProducer::<u64>::create(&path, 16, 4096).unwrap();
        tx.push(&1, b"one").unwrap();
        let mut rx = BlobConsumer::<u64>::attach(&path).unwrap();
        let (mut meta, mut out) = (0u64, [0u8; 16]);
        assert_eq!(rx.recv(&mut meta, &mut out).unwrap(), Some(3));
        // A corrupt header: write_seq claims records 2..=5, whose slots hold nothing.
        tx.file()
            .ring()
            .write_seq()
            .store(5, ringwire_core::sync::Ordering::Release);
        let mut wait = crate::FutexWait::default();
        let cpu0 = crate::sys::thread_cpu_time();
        let got = rx.recv_timeout(&mut wait, &mut meta, &mut out, Duration::from_millis(500));
        let cpu = crate::sys::thread_cpu_time() - cpu0;
        assert_eq!(got.unwrap(), None);
        assert!(
            cpu < Duration::from_millis(150),
            "recv_timeout spun: {cpu:?}, {:?}",
            wait.stats()
        );
    }
}
