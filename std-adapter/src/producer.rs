//! [`RingProducer<T>`]: the typed single writer of a broadcast ring in a `/dev/shm` file,
//! ringfire-compatible (same layout, same schema signature, same lock).
//!
//! The ring protocol is the core's [`Producer`]; this file only creates the file, turns `T`
//! into bytes, wakes futex sleepers and implements the blocking lossless push of spec §6.

use std::marker::PhantomData;
use std::ops::Range;
use std::path::Path;
use std::time::{Duration, Instant};

use ringwire_core::Geometry;
use ringwire_core::broadcast::{Producer, SeqExhausted, TryPushError, registry};
use ringwire_core::layout::{schema_signature_of, slot_payload_offset, slot_stride};
use zerocopy::{Immutable, IntoBytes};

use crate::error::{Error, Result};
use crate::file::{CleanupMode, CreateOptions, RingFile};
use crate::registry::ReaderRegistry;
use crate::sys;
use crate::wait::FutexWake;

/// Flow control of a [`RingProducer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FlowControl {
    /// The writer always writes; lagging readers are lapped (flag `POLICY_LATEST_WINS`).
    #[default]
    LossyLatestWins,
    /// The writer waits for the slowest registered reader (spec §6). It reads the registry
    /// only every so often (at most half a ring of pushes apart), so a reader that
    /// registers while the ring holds records is protected from `write_seq + 1 - C/2` on
    /// (`write_seq` at its attach); older records it starts at may still be overwritten
    /// under it, which it counts as lapped (see `ringwire_core`'s `Consumer::register`).
    /// A registered reader whose process died is pruned
    /// ([`registry::is_reader_alive`](crate::registry::is_reader_alive)): its pid is gone
    /// (`kill(pid, 0)`), or, where `/proc` is this PID namespace's, a zombie its parent has
    /// not reaped, or (for a reader of ours, whose token carries its start time) held by a
    /// process that started at another time. A ringfire reader's pid reused by another
    /// process, or `/proc` missing, still defeats the test, and a reader's pid seen from
    /// another PID namespace looks dead and is pruned while it reads, or looks alive while
    /// another process has it. [`RingProducer::push_timeout`] bounds the wait and names the
    /// registry slot and pid it waited for.
    LosslessBackpressure,
}

/// Options for [`RingProducer`] (and the blob producer's common ones).
#[derive(Clone, Copy, Debug)]
pub struct RingProducerBuilder {
    capacity: u64,
    create: CreateOptions,
    flow: FlowControl,
    max_readers: usize,
}

impl RingProducerBuilder {
    /// A lossy ring of `capacity` slots, no registry, mode 0o660, unlinked on drop.
    pub fn new(capacity: u64) -> Self {
        RingProducerBuilder {
            capacity,
            create: CreateOptions::default(),
            flow: FlowControl::LossyLatestWins,
            max_readers: 0,
        }
    }

    /// What happens to the file on drop.
    pub fn cleanup_mode(mut self, mode: CleanupMode) -> Self {
        self.create.cleanup = mode;
        self
    }

    /// Lossy or lossless.
    pub fn flow_control(mut self, flow: FlowControl) -> Self {
        self.flow = flow;
        self
    }

    /// Registry slots (a lossless ring with 0 gets 32; more than `u32::MAX` is refused
    /// by `build`).
    pub fn max_readers(mut self, n: usize) -> Self {
        self.max_readers = n;
        self
    }

    /// File mode for `open` (the umask applies).
    pub fn file_mode(mut self, mode: u32) -> Self {
        self.create.mode = mode;
        self
    }

    /// Exclusive-producer lock (default `true`); `false` is ringfire's legacy mode.
    pub fn exclusive_lock(mut self, on: bool) -> Self {
        self.create.exclusive_lock = on;
        self
    }

    /// Creates the ring file at `path`. (Two type parameters, as ringfire's, so that
    /// `build::<T, _>(path)` compiles against both crates.)
    pub fn build<T: IntoBytes + Immutable + 'static, P: AsRef<Path>>(
        self,
        path: P,
    ) -> Result<RingProducer<T>> {
        RingProducer::create_with_options(path, self)
    }
}

/// The single writer of a typed broadcast ring.
///
/// A child forked from the producer's process holds a copy of this handle and shares its
/// `flock`, which belongs to the open file description fork shares: the lock keeps other
/// creators out, not the child's copy. The child must not push through it (the ring would
/// have two writers, and one sequence number could end up with bytes from both);
/// dropping the copy there leaves the file and the lock to the parent. A copy that outlives
/// its creator (a daemon's, whose parent exits right after the fork) is the producer from
/// then on, and its drop unlinks the ring as the creator's would have.
pub struct RingProducer<T> {
    inner: Producer<FutexWake>,
    /// ringfire's view of the registry, built once; `None` without one.
    registry: Option<Box<ReaderRegistry>>,
    file: RingFile,
    _t: PhantomData<fn(&T)>,
}

impl<T: IntoBytes + Immutable + 'static> RingProducer<T> {
    /// Where `T`'s bytes start in a slot: 8, or `align_of::<T>()` for an over-aligned type
    /// (spec §4.1), whose slot then has the stride `roundup(align + size, align)`.
    const POFF: usize = slot_payload_offset(align_of::<T>());

    /// Creates a lossy ring of `capacity` slots at `path` (spec §1.2).
    pub fn create(path: impl AsRef<Path>, capacity: u64) -> Result<Self> {
        Self::create_with_options(path, RingProducerBuilder::new(capacity))
    }

    /// A builder for the other options.
    pub fn builder(capacity: u64) -> RingProducerBuilder {
        RingProducerBuilder::new(capacity)
    }

    /// Creates the ring at `path` with the options of `b`: the same as `b.build(path)`
    /// (ringfire's spelling).
    pub fn create_with_options<P: AsRef<Path>>(path: P, b: RingProducerBuilder) -> Result<Self> {
        let path = path.as_ref();
        let stride = slot_stride(size_of::<T>(), align_of::<T>());
        let readers = crate::error::readers_u32(path, b.max_readers)?;
        let geo = Geometry::spmc(
            b.capacity,
            stride,
            align_of::<T>().max(8),
            readers,
            b.flow == FlowControl::LosslessBackpressure,
        )
        .map_err(|source| Error::Geometry {
            path: path.to_path_buf(),
            source,
        })?
        .with_schema(schema_signature_of::<T>());
        let file = RingFile::create(path, &geo, &b.create)?;
        let mut inner =
            // The copy lives in the handle, which owns `file` and drops it last.
            Producer::new(*file.ring(), FutexWake::new()).map_err(|e| Error::attach(path, e))?;
        inner.set_is_alive(sys::reader_alive);
        inner.set_fenced_publish(sys::fenced_publish());
        // Lives in the handle beside `file`, which keeps the mapping it views.
        let registry = ReaderRegistry::of(file.ring()).map(Box::new);
        Ok(RingProducer {
            inner,
            registry,
            file,
            _t: PhantomData,
        })
    }

    /// Publishes one record and returns its sequence. On a lossless ring this waits for
    /// the slowest registered reader (spec §6: spin, yield, then sleep 10 µs between
    /// prunes of dead readers).
    ///
    /// Returns 0 (no sequence, spec §0.1) and writes nothing once the sequences below
    /// [`SEQ_LIMIT`](ringwire_core::layout::SEQ_LIMIT) (2^63) are used up, which this
    /// producer, starting at 1 on the ring it created, reaches only after 2^63 − 1 records
    /// (29 years at 10^10 a second) or when its header's `write_seq` was scribbled between
    /// creation and attach. [`RingProducer::try_push`] and [`RingProducer::push_timeout`]
    /// report it as an error.
    #[inline(always)]
    pub fn push(&mut self, item: &T) -> u64 {
        if self.inner.is_plain() {
            // Inlined into the caller, the copy has the constant length `size_of::<T>()`;
            // the limit's test in `push_at` is the only branch before the write.
            return match self.inner.push_at(Self::POFF, item.as_bytes()) {
                Ok(seq) => seq,
                Err(_) => Self::exhausted(),
            };
        }
        self.push_other(item)
    }

    /// [`RingProducer::push`]'s result when no sequence is left: 0, nothing written.
    #[cold]
    #[inline(never)]
    fn exhausted() -> u64 {
        0
    }

    /// [`RingProducer::push`] on a lossless ring, or on a lossy one that publishes with a
    /// full fence (no membarrier here), kept out of line so that the plain push inlines
    /// small. On a lossy ring `try_push_at` refuses only at the sequence limit.
    #[inline(never)]
    fn push_other(&mut self, item: &T) -> u64 {
        match self.inner.try_push_at(Self::POFF, item.as_bytes()) {
            Ok(seq) => seq,
            Err(TryPushError::Full(_)) => self.push_blocked(item),
            Err(_) => Self::exhausted(),
        }
    }

    #[cold]
    fn push_blocked(&mut self, item: &T) -> u64 {
        loop {
            self.wait_for_headroom();
            // The wait refreshed the gate past `next_seq`, so this succeeds unless the
            // sequences are used up, which no wait changes.
            match self.inner.try_push_at(Self::POFF, item.as_bytes()) {
                Ok(seq) => return seq,
                Err(TryPushError::Full(_)) => {}
                Err(_) => return Self::exhausted(),
            }
        }
    }

    /// Waits until the next record can be written without lapping the slowest live
    /// registered reader, i.e. until [`RingProducer::headroom`] is at least 1 (spec §6: spin,
    /// yield, then sleep 10 µs between prunes of dead readers). [`RingProducer::push`] on a
    /// lossless ring does this by itself; call it to wait ahead of a push.
    ///
    /// Returns at once when the ring has no registry or no reader is registered, so it never
    /// waits for readers that do not exist; a registered reader whose process died is pruned
    /// and stops holding it back. It waits as long as a live registered reader does not
    /// advance. As in ringfire, it looks at the registry whatever the flow control: on a lossy
    /// ring with a registry it too waits for a registered reader a whole ring behind.
    pub fn wait_for_headroom(&mut self) {
        // Without a deadline the wait ends only when the gate opens.
        let _ = self.wait_until(None);
    }

    /// [`RingProducer::wait_for_headroom`], giving up after `timeout` with
    /// [`Error::Backpressure`], which names the registry slot, pid, name and cursor of the
    /// slowest live reader: the one holding the producer back. A reader that stopped
    /// reading, or a registry entry that no reader owns (written by another process, or
    /// left by a reader whose pid a new process got), would otherwise hold a lossless
    /// producer for ever, its pid being alive.
    ///
    /// `Duration::ZERO` looks once (after pruning dead readers, which a refused
    /// [`RingProducer::try_push`] does only now and then); `Duration::MAX`, or any timeout
    /// the clock cannot add, waits as long as `wait_for_headroom`.
    pub fn wait_for_headroom_timeout(&mut self, timeout: Duration) -> Result<()> {
        let start = Instant::now();
        if self.wait_until(start.checked_add(timeout)) {
            Ok(())
        } else {
            Err(self.backpressure(start.elapsed()))
        }
    }

    /// [`RingProducer::push`] with a bounded wait: publishes `item` and returns its
    /// sequence, or, on a lossless ring whose slowest live registered reader stays a whole
    /// ring behind for `timeout`, writes nothing and fails with [`Error::Backpressure`]
    /// naming that reader (see [`RingProducer::wait_for_headroom_timeout`], which also says
    /// what `Duration::ZERO` and `Duration::MAX` do). On a lossy ring it never waits.
    /// Once the sequences are used up (see [`RingProducer::push`]) it writes nothing and
    /// fails at once with [`Error::SeqExhausted`].
    pub fn push_timeout(&mut self, item: &T, timeout: Duration) -> Result<u64> {
        match self.inner.try_push_at(Self::POFF, item.as_bytes()) {
            Ok(seq) => return Ok(seq),
            Err(TryPushError::Full(_)) => {}
            Err(TryPushError::Exhausted(e)) => return Err(self.seq_exhausted(e)),
        }
        let start = Instant::now();
        let deadline = start.checked_add(timeout);
        loop {
            if !self.wait_until(deadline) {
                return Err(self.backpressure(start.elapsed()));
            }
            // The wait refreshed the gate past `next_seq`, so this succeeds unless the
            // sequences are used up.
            match self.inner.try_push_at(Self::POFF, item.as_bytes()) {
                Ok(seq) => return Ok(seq),
                Err(TryPushError::Full(_)) => {}
                Err(TryPushError::Exhausted(e)) => return Err(self.seq_exhausted(e)),
            }
        }
    }

    /// [`Error::SeqExhausted`] for this ring.
    #[cold]
    fn seq_exhausted(&self, source: SeqExhausted) -> Error {
        Error::SeqExhausted {
            path: self.path().to_path_buf(),
            source,
        }
    }

    /// Waits as [`RingProducer::wait_for_headroom`] describes until the gate opens (true) or
    /// `deadline` passes (false; `None` is no deadline). The last look, at the deadline,
    /// prunes dead readers first, so a zero timeout is not refused for a dead one.
    ///
    /// While sleeping it prunes by `kill(pid, 0)` alone before each sleep (a reader that
    /// died and was reaped is seen within microseconds, as before), and by the whole check
    /// (zombies, reused pids: a read of `/proc/<pid>/stat` per live reader, some 7 µs each)
    /// at most once a millisecond, so that a producer held by many live readers does not
    /// spend its wait in `/proc` and notice late that the gate opened.
    fn wait_until(&mut self, deadline: Option<Instant>) -> bool {
        const FULL_PRUNE_EVERY: Duration = Duration::from_millis(1);
        // The yields end after 1,000 or after this long: beside busy processes each yield
        // can give the core away for a whole time slice, and 1,000 of them took seconds
        // before the first look for dead readers.
        const YIELD_FOR: Duration = Duration::from_millis(1);
        let mut round = 0u32;
        let mut next_full: Option<Instant> = None;
        let mut yield_end: Option<Instant> = None;
        while !self.gate_open() {
            let now = Instant::now();
            let left = match deadline {
                None => Duration::MAX,
                Some(d) => d.saturating_duration_since(now),
            };
            if left.is_zero() {
                registry::prune_dead_by(self.inner.view(), sys::reader_alive, |_| {});
                return self.gate_open();
            }
            if round < 100 {
                std::hint::spin_loop();
            } else if round < 1100 && now < *yield_end.get_or_insert_with(|| now + YIELD_FOR) {
                std::thread::yield_now();
            } else {
                let view = self.inner.view();
                if next_full.is_none_or(|t| now >= t) {
                    registry::prune_dead_by(view, sys::reader_alive, |_| {});
                    next_full = now.checked_add(FULL_PRUNE_EVERY);
                } else {
                    registry::prune_dead(view, sys::pid_alive);
                }
                crate::sys::sleep(left.min(Duration::from_micros(10)));
            }
            round = round.saturating_add(1);
        }
        true
    }

    /// The error of a bounded wait that ran out after `waited`, naming the reader that is
    /// slowest now.
    #[cold]
    fn backpressure(&self, waited: Duration) -> Error {
        Error::Backpressure {
            path: self.path().to_path_buf(),
            seq: self.inner.next_seq(),
            waited,
            reader: crate::registry::slowest_reader(self.inner.view(), self.inner.write_seq()),
        }
    }

    /// Whether `next_sequence` may be written now (spec §6 gate); on a lossless ring this
    /// also refreshes the gate that `try_push` checks.
    fn gate_open(&mut self) -> bool {
        let next = self.inner.next_seq();
        let limit = if self.inner.is_lossless() {
            self.inner.refresh_gate()
        } else {
            registry::gate_limit(self.inner.view(), next)
        };
        next < limit
    }

    /// How many more records can be written before the slowest live registered reader is
    /// lapped: `capacity - unread`, where `unread` is what that reader has not read up to
    /// [`RingProducer::sequence`]; 0 when it is a whole ring (or, on a lossy ring, more)
    /// behind. The capacity when the ring has no registry or no reader is registered.
    ///
    /// First frees the registry slots of dead processes (one `kill(pid, 0)` and one read of
    /// `/proc/<pid>/stat` per registered reader). A reader publishes its cursor when it receives, seeks or jumps, so one
    /// that only polls an empty ring is counted where it last moved.
    pub fn headroom(&self) -> u64 {
        self.capacity().saturating_sub(self.reader_lag())
    }

    /// Records up to [`RingProducer::sequence`] that the slowest live registered reader has
    /// not read (`sequence - cursor + 1`, 0 for a reader that has read everything); 0 when
    /// the ring has no registry or no reader is registered. On a lossy ring a lapped reader
    /// can be more than the capacity behind. Prunes dead readers first, as
    /// [`RingProducer::headroom`] does.
    pub fn reader_lag(&self) -> u64 {
        let view = self.inner.view();
        registry::prune_dead_by(view, sys::reader_alive, |_| {});
        registry::slowest_unread(view, self.inner.write_seq()).unwrap_or(0)
    }

    /// The ring's reader registry (live readers, their cursors and lag), or `None` when the
    /// ring has none (a lossy ring built without `max_readers`).
    pub fn registry(&self) -> Option<&ReaderRegistry> {
        self.registry.as_deref()
    }

    /// Publishes one record unless that would lap the slowest registered reader of a
    /// lossless ring ([`TryPushError::Full`]); never waits. Once the sequences are used up
    /// (see [`RingProducer::push`]) it writes nothing: [`TryPushError::Exhausted`].
    #[inline]
    pub fn try_push(&mut self, item: &T) -> std::result::Result<u64, TryPushError> {
        self.inner.try_push_at(Self::POFF, item.as_bytes())
    }

    /// Writes all `items`, publishing once (one `write_seq` store, at most one wake; a batch
    /// longer than the ring publishes once per lap of it, see the core's `push_batch`). On a
    /// lossless ring each record respects the gate (spec §6, as [`RingProducer::push`]):
    /// the records below the gate limit are written and published together; when the
    /// batch does not fit, that piece is published, the producer waits as `push` does
    /// ([`RingProducer::wait_for_headroom`]) and goes on with the next piece. Returns the
    /// sequences written: fewer than `items` only once the sequences are used up (see
    /// [`RingProducer::push`]), where the batch stops.
    pub fn push_batch(&mut self, items: &[T]) -> Range<u64> {
        let first = self.inner.next_seq();
        if !self.inner.is_lossless() {
            let _stopped_at_the_limit = self
                .inner
                .push_batch_at(Self::POFF, items.iter().map(|t| t.as_bytes()));
            return first..self.inner.next_seq();
        }
        let mut rest = items;
        while !rest.is_empty() {
            let n = self.room_for(rest.len());
            if n == 0 {
                // Everything written so far is published: the readers we wait for see it.
                self.wait_for_headroom();
                continue;
            }
            let (now, later) = rest.split_at(n);
            if self
                .inner
                .push_batch_at(Self::POFF, now.iter().map(|t| t.as_bytes()))
                .is_err()
            {
                break;
            }
            rest = later;
        }
        first..self.inner.next_seq()
    }

    /// How many of `want` records a lossless producer may write now without waiting: those
    /// below the gate limit, which is refreshed from the registry when the cached one does
    /// not cover them all.
    fn room_for(&mut self, want: usize) -> usize {
        let next = self.inner.next_seq();
        let mut limit = self.inner.gate_limit();
        if limit.saturating_sub(next) < want as u64 {
            limit = self.inner.refresh_gate();
        }
        usize::try_from(limit.saturating_sub(next)).map_or(want, |room| room.min(want))
    }

    /// The highest published sequence (0 if none).
    pub fn sequence(&self) -> u64 {
        self.inner.write_seq()
    }

    /// The ring header's `write_seq`, read from shared memory: what readers see as published
    /// (0 if none). Equal to [`RingProducer::sequence`] unless another writer shares the
    /// ring (a producer created with `exclusive_lock(false)`).
    pub fn published_sequence(&self) -> u64 {
        self.file.write_seq()
    }

    /// The ring's flow control, as its header flags say.
    pub fn flow_control(&self) -> FlowControl {
        if self.inner.is_lossless() {
            FlowControl::LosslessBackpressure
        } else {
            FlowControl::LossyLatestWins
        }
    }

    /// The sequence the next record gets.
    pub fn next_sequence(&self) -> u64 {
        self.inner.next_seq()
    }

    /// Number of slots.
    pub fn capacity(&self) -> u64 {
        self.file.ring().capacity()
    }

    /// The ring file's path.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// The ring file (geometry, inode, raw view).
    pub fn file(&self) -> &RingFile {
        &self.file
    }

    /// Whether this producer takes the ring's sleeper count for a sleeper that died asleep
    /// and so rations its `FUTEX_WAKE`s ([`FutexWake`]'s docs). `ringwire stat` shows the
    /// count.
    pub fn suspects_stale_sleeper(&self) -> bool {
        self.inner.waker().suspects_stale_sleeper()
    }

    /// `msync` of the mapping ([`RingFile::flush`]): makes the records durable only for a
    /// ring on a disk file system; a tmpfs (`/dev/shm`) ring cannot be made durable.
    pub fn flush(&self) -> Result<()> {
        self.file.flush()
    }
}

impl<T> std::fmt::Debug for RingProducer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingProducer")
            .field("file", &self.file)
            .field("write_seq", &self.inner.write_seq())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RingConsumer;
    use crate::test_tmp::TmpPath;

    /// A lossy producer that publishes with a full fence (its process could not register
    /// for membarrier) is not the plain one: its pushes go out of line, through
    /// `try_push_at`, which on a lossy ring refuses only at the sequence limit. Every
    /// record still arrives.
    #[test]
    fn fenced_lossy_push_goes_out_of_line_and_delivers_every_record() {
        let path = TmpPath::new("fenced-lossy");
        let mut p = RingProducer::<u64>::create(&path, 32).unwrap();
        let mut c = RingConsumer::<u64>::builder()
            .start_from_head()
            .attach(&path)
            .unwrap();
        p.inner.set_fenced_publish(true);
        assert!(!p.inner.is_plain() && !p.inner.is_lossless());
        for v in 0..20u64 {
            assert_eq!(p.push(&(v * 3)), v + 1);
        }
        assert_eq!(p.inner.write_seq(), 20);
        for v in 0..20u64 {
            assert_eq!(c.try_recv(), Some(v * 3));
        }
        assert_eq!(c.try_recv(), None);
    }

    /// `wait_for_headroom_timeout` waits on a lossy ring with a registry too (as
    /// ringfire's): its error named a "lossless producer" there. It names the reader that
    /// held the producer back, and calls the producer nothing it is not.
    #[test]
    fn a_lossy_rings_headroom_timeout_does_not_call_the_producer_lossless() {
        let path = TmpPath::new("headroom-lossy");
        let mut p = RingProducer::<u64>::builder(4)
            .max_readers(2)
            .build::<u64, _>(&path)
            .unwrap();
        // Registered under the default name, at record 1.
        let c = RingConsumer::<u64>::builder()
            .start_from_head()
            .attach(&path)
            .unwrap();
        for v in 1..=4 {
            p.push(&v);
        }
        let e = p
            .wait_for_headroom_timeout(Duration::from_millis(5))
            .unwrap_err();
        drop(c);
        assert_eq!(p.flow_control(), FlowControl::LossyLatestWins);
        let text = e.to_string();
        assert!(text.contains("name \"consumer\""), "{text}");
        assert!(!text.contains("lossless"), "{text}");
    }

    /// Once no sequence is left below `SEQ_LIMIT` (here after a jump of the core producer:
    /// short of 2^63 pushes, only a header scribbled between creation and attach gets
    /// there), every kind of push writes nothing and returns at once, on a plain, a fenced
    /// and a lossless ring alike: `push` returns 0, `try_push` and `push_timeout` say why,
    /// `push_batch` writes an empty range. Before, they wrote sequence 2^63, which every
    /// reader then refused as a corrupt header.
    #[test]
    fn pushes_at_the_sequence_limit_write_nothing_and_never_wait() {
        use ringwire_core::layout::SEQ_LIMIT;
        let cases = [
            ("plain", FlowControl::LossyLatestWins, false),
            ("fenced", FlowControl::LossyLatestWins, true),
            ("lossless", FlowControl::LosslessBackpressure, false),
        ];
        for (name, flow, fenced) in cases {
            let path = TmpPath::new(&format!("seq-limit-{name}"));
            let mut p = RingProducer::<u64>::builder(4)
                .flow_control(flow)
                .build::<u64, _>(&path)
                .unwrap();
            p.inner.set_fenced_publish(fenced);
            assert_eq!(p.push(&11), 1, "{name}");
            p.inner.skip_to(SEQ_LIMIT);
            let refused = SeqExhausted { seq: SEQ_LIMIT };
            assert_eq!(p.push(&12), 0, "{name}");
            assert_eq!(p.try_push(&12), Err(TryPushError::Exhausted(refused)));
            let start = Instant::now();
            match p.push_timeout(&12, Duration::from_secs(5)) {
                Err(Error::SeqExhausted { source, .. }) => assert_eq!(source, refused),
                other => panic!("{name}: push_timeout gave {other:?}"),
            }
            assert!(start.elapsed() < Duration::from_secs(1), "{name}: waited");
            assert_eq!(p.push_batch(&[13, 14]), SEQ_LIMIT..SEQ_LIMIT, "{name}");
            assert_eq!((p.sequence(), p.published_sequence()), (1, 1), "{name}");
            let mut c = RingConsumer::<u64>::attach(&path).unwrap();
            assert_eq!((c.try_recv(), c.try_recv()), (Some(11), None), "{name}");
        }
    }
}
