//! Untyped SPSC handles: [`SpscBytesProducer`], [`SpscBytesConsumer`],
//! [`spsc_bytes_channel`]. Each item is a byte string of up to the queue's item size
//! (`max_len`) and keeps its own length: datagrams received with `recvmmsg`, say, pushed as
//! a batch with one index update. The typed handles ([`super::SpscProducer`],
//! [`super::SpscConsumer`]) are these with a fixed-size item type on top.

use std::io;
use std::net::UdpSocket;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringwire_core::queue::{
    self as q, PopError, PushError, QueueAttachError, QueueExpect, QueueGeometry,
    QueueGeometryError, QueueKind, QueueView,
};
use ringwire_core::sync::Ordering;

use super::mem::{QueueFileError, QueueMem, RoleLock};
use super::wait::{
    Side, before, deadline_after, default_wait, notify_on, sleepers_on, wait_side, wake_on,
};
use super::wrong_kind;
use crate::net::mmsg::MmsgScratch;
use crate::wait::WaitStrategy;

/// The byte each role locks (see [`QueueMem::lock_role`]) and the role's name.
const PRODUCER_ROLE: (i64, &str) = (q::qhdr::ENQ as i64, "producer");
const CONSUMER_ROLE: (i64, &str) = (q::qhdr::DEQ as i64, "consumer");

/// The producer of an SPSC queue of byte strings.
#[derive(Debug)]
pub struct SpscBytesProducer {
    inner: q::SpscProducer,
    // `mem.unfenced_notify()`, kept beside `inner`'s view so a push reads only this handle
    // and the queue (see `wait::notify_on`).
    unfenced: bool,
    mem: Arc<QueueMem>,
    // Holds the role lock's file, if any, for the handle's life.
    role: RoleLock,
    ingest: Option<Box<Ingest>>,
}

/// What one [`SpscBytesProducer::recv_mmsg`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Received {
    /// Datagrams now in the queue, in arrival order (published with one index update).
    pub pushed: usize,
    /// Datagrams dropped: longer than the queue's item size (received truncated) or, on a
    /// queue of fixed-size items, not of that size.
    pub dropped: usize,
}

/// The `recvmmsg` headers and per-slot lengths one producer keeps between calls.
#[derive(Debug)]
struct Ingest {
    mmsg: MmsgScratch,
    lens: Vec<Option<usize>>,
}

/// The consumer of an SPSC queue of byte strings.
#[derive(Debug)]
pub struct SpscBytesConsumer {
    inner: q::SpscConsumer,
    // As the producer's.
    unfenced: bool,
    mem: Arc<QueueMem>,
    // Holds the role lock's file, if any, for the handle's life.
    role: RoleLock,
    // The process that took the role: a copy inherited through fork does not tell an
    // anonymous channel's producer it is abandoned when dropped (see `Drop`).
    pid: u32,
}

/// After `n` items moved in one batch through `view` (a handle's, with its `unfenced`):
/// wakes the other side's sleepers on `side` if any moved, and returns `n`.
#[inline(always)]
fn moved(view: &QueueView, unfenced: bool, side: Side, n: usize) -> usize {
    if n > 0 {
        notify_on(view, unfenced, side);
    }
    n
}

/// Maps the SPSC queue file at `path`, whatever its item size.
fn open_any(path: impl AsRef<Path>) -> Result<Arc<QueueMem>, QueueFileError> {
    Ok(Arc::new(QueueMem::open(
        path,
        QueueExpect::raw(QueueKind::Spsc),
    )?))
}

/// Takes `mem`'s lock for `role` (the byte at `lock_byte`, for a file), clears the waiter
/// count the role sleeps on (`sleeps_on`), and builds that side's core handle with `new`.
/// The handle's copy of the view lives beside the `Arc<QueueMem>` that keeps the mapping
/// alive.
///
/// Why the count is cleared: only the holder of a role sleeps on its side (the consumer on
/// `data_waiters`, the producer on `space_waiters`), and the lock just taken proves that no
/// other holder lives (the kernel releases it when its handle is dropped, which no sleep
/// outlives, or once every thread of its process is gone). A count left there is a sleeper
/// that died asleep, and would cost every push (or pop) a `FUTEX_WAKE` for good. Without
/// record locks ([`RoleLock::Unguarded`]) nothing proves it, and the count is cleared on the
/// caller's word that it keeps to one handle per role, the condition of such a handle. Kept
/// to, no sleeper can be stranded: the role's only earlier handle was dropped, after its last
/// sleep. Broken (a second handle takes the role while the first sleeps), the first one's
/// announcement is cleared: the other side skips its wakes, so it wakes only when its sleep
/// ends on its own (a `push_blocking`'s or `pop_blocking`'s 10 ms slice, the timeout of a
/// `FutexWait` without a longest sleep). Its retirement finds the count at 0 and leaves it
/// there (the core's retire saturates: wrapped to `u32::MAX`, the count made every later
/// push or pop a `FUTEX_WAKE`, and each lone sleeper's announcement took it back to 0, so
/// that it was missed too), or takes the count of a sleeper that announced itself
/// meanwhile, which notifies then skip the same way: how many sleepers and wakes a clear
/// can cost, and when the shortfall ends, is the bound documented on
/// [`FutexPair::waiters`](ringwire_core::futex::FutexPair::waiters). Late wakes, never a
/// sleep past its own end; and two holders of a role corrupt the queue anyway
/// (`is_guarded`'s docs). The clear is kept: without it one dead sleeper would cost every push a wake for
/// good.
///
/// `taken`: the role lock, when the caller took it already (`create`, before the magic).
fn attach<H>(
    mem: &Arc<QueueMem>,
    (lock_byte, role): (i64, &'static str),
    taken: Option<RoleLock>,
    sleeps_on: Side,
    new: impl FnOnce(QueueView) -> Result<H, QueueAttachError>,
) -> Result<(H, RoleLock), QueueFileError> {
    let lock = match taken {
        Some(lock) => lock,
        None => mem.lock_role(lock_byte, role)?,
    };
    let handle = new(*mem.queue()).map_err(|e| wrong_kind(mem, e))?;
    let view = mem.queue();
    let waiters = match sleeps_on {
        Side::Data => view.data_waiters(),
        Side::Space => view.space_waiters(),
    };
    // Relaxed: this handle's own sleeps follow in program order; a peer that still reads the
    // old count wakes nobody once, needlessly. A swap, not a store: the RMW that the loom
    // model `retires_racing_a_cleared_count_leave_it_at_zero` checks against the retires.
    waiters.swap(0, Ordering::Relaxed);
    Ok((handle, lock))
}

/// The geometry of a queue of `capacity` byte strings of up to `max_len` bytes: each slot
/// holds a length word and the bytes, rounded up to whole words. (No file is involved
/// yet: the creating calls name it in their [`QueueFileError::Geometry`].)
pub fn bytes_geometry(capacity: u64, max_len: usize) -> Result<QueueGeometry, QueueGeometryError> {
    let too_long = QueueGeometryError::BadItemSize {
        item_size: max_len as u64,
    };
    let stride = max_len.checked_add(8 + 7).ok_or(too_long)? / 8 * 8;
    QueueGeometry::new(QueueKind::Spsc, capacity, max_len, stride)
}

/// A producer and a consumer joined by an SPSC queue of `capacity` byte strings of up to
/// `max_len` bytes, in anonymous memory.
pub fn spsc_bytes_channel(
    capacity: u64,
    max_len: usize,
) -> Result<(SpscBytesProducer, SpscBytesConsumer), QueueFileError> {
    let g = bytes_geometry(capacity, max_len).map_err(|e| QueueFileError::geometry(None, e))?;
    let mem = Arc::new(QueueMem::anonymous(&g)?);
    Ok((
        SpscBytesProducer::from_mem(mem.clone())?,
        SpscBytesConsumer::from_mem(mem)?,
    ))
}

impl SpscBytesProducer {
    /// Creates a fresh queue file of `capacity` byte strings of up to `max_len` bytes and
    /// becomes its producer (the role is taken before the file can be opened, so no other
    /// handle takes it first). On error no new file is left. On a file system without
    /// record locks the handle is made without its role lock: see
    /// [`SpscBytesProducer::is_guarded`].
    pub fn create(
        path: impl AsRef<Path>,
        capacity: u64,
        max_len: usize,
    ) -> Result<Self, QueueFileError> {
        let path = path.as_ref();
        let g = bytes_geometry(capacity, max_len)
            .map_err(|e| QueueFileError::geometry(Some(path), e))?;
        Self::create_file(path, &g)
    }

    /// Creates a fresh SPSC queue file of geometry `g` and becomes its producer. The
    /// producer's role is locked before the file's magic is stored, so no handle that opens
    /// the file takes it first, and a create that fails there leaves no file.
    pub(super) fn create_file(path: &Path, g: &QueueGeometry) -> Result<Self, QueueFileError> {
        let (mem, role) = QueueMem::create_with_role(path, g, Some(PRODUCER_ROLE))?;
        Self::with_role(Arc::new(mem), role)
    }

    /// Becomes the producer of an existing SPSC queue file (of any item size), resuming
    /// after its last item. A live producer of the file makes it fail with
    /// [`QueueFileError::RoleTaken`]; on a file system without record locks nothing can
    /// tell, and the handle opens without its role lock: see
    /// [`SpscBytesProducer::is_guarded`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self, QueueFileError> {
        Self::from_mem(open_any(path)?)
    }

    /// The producer of the queue in `mem`, holding the producer role lock of a file.
    pub(super) fn from_mem(mem: Arc<QueueMem>) -> Result<Self, QueueFileError> {
        Self::with_role(mem, None)
    }

    /// [`SpscBytesProducer::from_mem`] with the role lock `taken` already, if given.
    fn with_role(mem: Arc<QueueMem>, taken: Option<RoleLock>) -> Result<Self, QueueFileError> {
        let (inner, role) = attach(
            &mem,
            PRODUCER_ROLE,
            taken,
            Side::Space,
            q::SpscProducer::new,
        )?;
        Ok(SpscBytesProducer {
            inner,
            unfenced: mem.unfenced_notify(),
            mem,
            role,
            ingest: None,
        })
    }

    /// Whether a lock on the file guards this producer's role: while it lives, another
    /// producer of the queue file is refused ([`QueueFileError::RoleTaken`]), and `create`
    /// refuses to replace the file. False only on a file system without record locks
    /// (`fcntl(F_OFD_SETLK)` fails there with `ENOLCK`, `EINVAL` or `EOPNOTSUPP`, as on
    /// some network and FUSE file systems): the handle works as any other, but keeping to
    /// one producer and one consumer of the file is then up to the caller, and two
    /// producers at once would corrupt the queue; the second one's open also makes the
    /// sleeps of that side miss their wakes from then on, each waking only when it ends on
    /// its own (after 10 ms for [`SpscBytesProducer::push_blocking`]), until the role is
    /// next taken. An MPMC handle opened there works without its lock too ([`super::MpmcQueue::is_guarded`]). Always true for an anonymous
    /// channel, which makes the only producer there can be.
    pub fn is_guarded(&self) -> bool {
        self.role.is_guarded() && self.mem.is_guarded()
    }

    /// The longest item this queue takes.
    pub fn max_len(&self) -> usize {
        self.mem.geometry().item_size as usize
    }

    /// The queue's memory (the typed handles check its geometry).
    pub(super) fn mem(&self) -> &QueueMem {
        &self.mem
    }

    /// Pushes one item, or fails with [`PushError::Full`]; an item longer than
    /// [`SpscBytesProducer::max_len`] fails with [`PushError::TooLong`] (on a queue made
    /// for a fixed-size type, one of another length with [`PushError::WrongLength`]).
    ///
    /// Always inlined: a typed handle's item length is a constant there, so the copy is a
    /// few word stores.
    #[inline(always)]
    pub fn try_push(&mut self, item: &[u8]) -> Result<(), PushError> {
        self.inner.try_push(item)?;
        notify_on(self.inner.view(), self.unfenced, Side::Data);
        Ok(())
    }

    /// Pushes as many of `items` as fit, in order, with one index update, and returns how
    /// many. Fails without pushing anything if one of them is too long.
    pub fn push_slice<I: AsRef<[u8]>>(&mut self, items: &[I]) -> Result<usize, PushError> {
        let n = self.inner.push_slice(items)?;
        Ok(moved(self.inner.view(), self.unfenced, Side::Data, n))
    }

    /// Pushes records of `item_len` bytes laid back to back in `records` as far as they
    /// fit, with one index update, and returns how many (the typed `push_slice`).
    ///
    /// Always inlined, so that the typed handle's item length stays a constant in
    /// `SpscProducer::push_fixed` (see there).
    #[inline(always)]
    pub(super) fn push_records(
        &mut self,
        records: &[u8],
        item_len: usize,
    ) -> Result<usize, PushError> {
        let n = self.inner.push_fixed(records, item_len)?;
        Ok(moved(self.inner.view(), self.unfenced, Side::Data, n))
    }

    /// Pushes one item, waiting up to `timeout` for space; [`PushError::Full`] after that.
    /// Waits by spinning briefly, then sleeping on the queue's futex (see
    /// [`SpscBytesProducer::push_timeout`] to choose the strategy).
    pub fn push_blocking(&mut self, item: &[u8], timeout: Duration) -> Result<(), PushError> {
        self.push_timeout(item, &mut default_wait(), timeout)
    }

    /// Pushes one item, waiting for space with `wait` (any of the broadcast consumers'
    /// strategies: [`BusySpin`](crate::BusySpin), [`YieldBackoff`](crate::YieldBackoff),
    /// [`FutexWait`](crate::FutexWait), which sleeps on the queue's space futex and never
    /// past the timeout) for up to `timeout`; [`PushError::Full`] after that.
    pub fn push_timeout<W: WaitStrategy>(
        &mut self,
        item: &[u8],
        wait: &mut W,
        timeout: Duration,
    ) -> Result<(), PushError> {
        let deadline = deadline_after(timeout);
        loop {
            match self.try_push(item) {
                Err(PushError::Full) if before(deadline) && !self.is_abandoned() => {
                    self.sleep_for_space(wait, deadline)
                }
                r => {
                    wait.reset();
                    return r;
                }
            }
        }
    }

    /// Waits with `wait` (as [`SpscBytesProducer::push_timeout`] does) until a slot is free
    /// or `timeout` passes, and returns the free slots: 0 only after the timeout, or at once
    /// on a corrupt queue, which never drains (the next push or
    /// [`SpscBytesProducer::recv_mmsg`] says so), or on an anonymous channel whose consumer
    /// is gone ([`SpscBytesProducer::is_abandoned`]). For an ingest loop around
    /// [`SpscBytesProducer::recv_mmsg`] when the queue is full.
    pub fn wait_for_space<W: WaitStrategy>(&mut self, wait: &mut W, timeout: Duration) -> u64 {
        let deadline = deadline_after(timeout);
        loop {
            let free = self.inner.free();
            if free == 0
                && before(deadline)
                && self.inner.cursors_corrupt().is_none()
                && !self.is_abandoned()
            {
                self.sleep_for_space(wait, deadline);
                continue;
            }
            wait.reset();
            return free;
        }
    }

    /// One wait of `wait` on the space futex, ended by a free slot, the consumer's drop (of
    /// an anonymous channel) or the deadline.
    fn sleep_for_space<W: WaitStrategy>(&mut self, wait: &mut W, deadline: Option<Instant>) {
        let view = *self.mem.queue();
        let mem = &self.mem;
        wait_side(wait, &view, Side::Space, deadline, || {
            self.inner.free() > 0 || mem.side_dropped()
        });
    }

    /// True when this is the producer of an anonymous channel ([`spsc_bytes_channel`],
    /// [`super::spsc_channel`]) whose consumer has been dropped: nothing will pop the items
    /// in the queue or make room for more. The blocking pushes then stop waiting: a full
    /// queue fails with [`PushError::Full`] at once, whatever the timeout. Always false on a
    /// queue file, whose consumer role another handle may take at any time.
    pub fn is_abandoned(&self) -> bool {
        self.mem.side_dropped()
    }

    /// Receives datagrams from `sock` straight into the queue's free slots with one
    /// `recvmmsg` (no copy through a buffer of ours), up to `max` of them (at most 1024)
    /// and as many as there are free slots, and publishes them with one index update.
    ///
    /// Blocks as the socket does: on a blocking socket until at least one datagram is in
    /// (`MSG_WAITFORONE`, then whatever else is waiting), with `WouldBlock` on a
    /// non-blocking one when none is. Returns at once with nothing received when the queue
    /// is full or `max` is 0 (then `pushed` and `dropped` are both 0), and an
    /// [`io::ErrorKind::InvalidData`] error when it is corrupt (its cursors more than a lap
    /// apart: it would never drain). A datagram longer
    /// than [`SpscBytesProducer::max_len`] (or, on a queue of fixed-size items, of another
    /// length) is dropped and counted, and the datagrams after it close up. Senders are not
    /// kept. A socket shut down for reading fails with [`io::ErrorKind::UnexpectedEof`]
    /// (its end of stream is no datagram, not even an empty one). A signal before any
    /// datagram came fails with [`io::ErrorKind::Interrupted`], nothing received: call
    /// again (on Linux a stop and continue does this to a socket with a read timeout). Allocates only on the first call, and on a later call with a larger `max`.
    pub fn recv_mmsg(&mut self, sock: &UdpSocket, max: usize) -> io::Result<Received> {
        let max = max.min(1024);
        let want = self.inner.free().min(max as u64) as usize;
        if want == 0 {
            if let Some(e) = self.inner.cursors_corrupt() {
                return Err(io::Error::new(io::ErrorKind::InvalidData, e.to_string()));
            }
            return Ok(Received::default());
        }
        let ingest = match &mut self.ingest {
            Some(i) if i.mmsg.capacity() >= want => i,
            slot => slot.insert(Box::new(Ingest {
                mmsg: MmsgScratch::new(max),
                lens: Vec::with_capacity(max),
            })),
        };
        let inner = &mut self.inner;
        let slots = (0..want as u64).map_while(|k| inner.free_payload(k));
        // SAFETY: each (address, length) is the payload of a free slot, which this producer
        // alone owns until it commits below; `&mut self` keeps every other access out for
        // the call's length.
        let got = unsafe { ingest.mmsg.recv(sock, slots) }?;
        ingest.lens.clear();
        let g = self.mem.geometry();
        ingest.lens.extend((0..got).map(|i| {
            let len = ingest.mmsg.len(i);
            let whole = !ingest.mmsg.truncated(i) && (!g.fixed || len == g.item_size as usize);
            whole.then_some(len)
        }));
        let pushed = self
            .inner
            .commit_in_place(&ingest.lens)
            .map_err(|e| io::Error::other(format!("publishing received datagrams: {e}")))?;
        Ok(Received {
            pushed: moved(self.inner.view(), self.unfenced, Side::Data, pushed),
            dropped: got - pushed,
        })
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

/// Tells the consumer of an anonymous channel that no item will come any more, and wakes it
/// if it sleeps on the empty queue (see [`SpscBytesConsumer::is_abandoned`]).
impl Drop for SpscBytesProducer {
    fn drop(&mut self) {
        abandon(&self.mem, self.inner.view(), Side::Data);
    }
}

/// When a handle on `mem` (an anonymous channel's, sharing the mapping with its peer) is
/// dropped: marks the peer abandoned and wakes it on `side`, where it sleeps. The wake is
/// not the usual look for sleepers (`notify_on`) but a bump of the futex word whatever the
/// count: a sleeper that read the word before the bump then fails its `FUTEX_WAIT` or is
/// woken, and one that read it after sees the mark on its re-check (the bump is a release
/// after the mark). A file's handle owns its mapping alone and does nothing here.
fn abandon(mem: &Arc<QueueMem>, view: &QueueView, side: Side) {
    if Arc::strong_count(mem) > 1 {
        mem.mark_side_dropped();
        wake_on(view, side);
    }
}

/// Hands the popped slots back and wakes a producer asleep on the full queue, so that it,
/// or the next consumer, goes on from the last item this one popped. The producer of an
/// anonymous channel learns that it is abandoned (see
/// [`SpscBytesProducer::is_abandoned`]).
impl Drop for SpscBytesConsumer {
    fn drop(&mut self) {
        // The head is stored only if ahead of the queue's consumer index (see
        // `SpscConsumer::release_if_ahead`), which without a fork is always so while pops
        // are not handed back. After a fork, the child's copy and the parent's consumer
        // share the index, and either may have popped on and handed back past the other's
        // head (the parent past the fork's, or a daemon child past the parent's, whose
        // parent returns from `main` once the child is ready): stored, the older head
        // would move the index back, and the next consumer would pop again what was popped.
        self.inner.release_if_ahead();
        notify_on(self.inner.view(), self.unfenced, Side::Space);
        // A copy inherited through fork leaves the rest alone: the role lock stays with the
        // open file description the parent holds, and an anonymous channel's memory is the
        // child's own copy.
        if self.pid == std::process::id() {
            abandon(&self.mem, self.inner.view(), Side::Space);
        }
    }
}

impl SpscBytesConsumer {
    /// Becomes the consumer of an existing SPSC queue file (of any item size), resuming after
    /// the last item the previous consumer handed back: its oldest unread item, unless that
    /// consumer was killed holding popped items, which then come again (see
    /// [`SpscBytesConsumer::release_every`]). A live consumer of the file makes it fail
    /// with [`QueueFileError::RoleTaken`]; on a file system without record locks nothing
    /// can tell, and the handle opens without its role lock: see
    /// [`SpscBytesConsumer::is_guarded`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self, QueueFileError> {
        Self::from_mem(open_any(path)?)
    }

    /// The consumer of the queue in `mem`, holding the consumer role lock of a file.
    pub(super) fn from_mem(mem: Arc<QueueMem>) -> Result<Self, QueueFileError> {
        let (inner, role) = attach(&mem, CONSUMER_ROLE, None, Side::Data, q::SpscConsumer::new)?;
        Ok(SpscBytesConsumer {
            inner,
            unfenced: mem.unfenced_notify(),
            mem,
            role,
            pid: std::process::id(),
        })
    }

    /// Whether a lock on the file guards this consumer's role, as
    /// [`SpscBytesProducer::is_guarded`] says of the producer's: false only on a file
    /// system without record locks, where keeping to one consumer is up to the caller.
    pub fn is_guarded(&self) -> bool {
        self.role.is_guarded() && self.mem.is_guarded()
    }

    /// The longest item this queue holds: a buffer this long takes any item.
    pub fn max_len(&self) -> usize {
        self.mem.geometry().item_size as usize
    }

    /// Pops one item into `buf` and returns its length; `Ok(None)` when the queue is empty.
    /// A buffer shorter than the item fails with [`PopError::BufferTooSmall`] and leaves the
    /// item in the queue.
    ///
    /// Always inlined, as [`SpscBytesProducer::try_push`].
    #[inline(always)]
    pub fn try_pop(&mut self, buf: &mut [u8]) -> Result<Option<usize>, PopError> {
        match self.inner.try_pop(buf) {
            Ok(len) => {
                self.after_pop();
                Ok(Some(len))
            }
            Err(PopError::Empty) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// [`SpscBytesConsumer::try_pop`] for a typed handle, whose buffer is always exactly the
    /// item size of its fixed-size queue (`ringwire_core::queue::SpscConsumer::try_pop_fixed`):
    /// `Ok(true)` with the item in `buf`, `Ok(false)` when the queue is empty; a buffer of
    /// any other length fails with [`PopError::LengthMismatch`].
    #[inline(always)]
    pub(crate) fn try_pop_fixed(&mut self, buf: &mut [u8]) -> Result<bool, PopError> {
        let got = self.inner.try_pop_fixed(buf)?;
        if got {
            self.after_pop();
        }
        Ok(got)
    }

    /// After a single-item pop, which may have kept its slot from the producer for a few
    /// pops (see [`SpscBytesConsumer::release_every`]): if a producer sleeps on the full
    /// queue, every popped slot goes back before it is woken. A producer that announces
    /// its sleep after the look at the waiter count sleeps on until the next hand-back.
    #[inline(always)]
    fn after_pop(&mut self) {
        if sleepers_on(self.inner.view(), self.unfenced, Side::Space) {
            self.hand_back_and_wake();
        }
    }

    /// The rest of [`SpscBytesConsumer::after_pop`] when a producer sleeps: every popped
    /// slot goes back, then the producer is woken (the bump, a release, orders the hand-back
    /// before its re-check). Out of line, so that the pop stays small enough to inline into
    /// a caller's polling loop. The loom model
    /// `spsc_single_pop_hands_back_before_it_wakes_the_producer` (`core/tests/loom_futex.rs`)
    /// runs this order from the core calls, and catches the bump made before the hand-back.
    #[cold]
    #[inline(never)]
    fn hand_back_and_wake(&mut self) {
        self.inner.release();
        wake_on(self.inner.view(), Side::Space);
    }

    /// How many single-item pops may go by before their slots go back to the producer:
    /// at once when the consumer catches up with the producer, or when a producer is asleep
    /// on the full queue, or after this many pops (by default a sixteenth of the capacity, at
    /// least 1 and at most 64). A consumer killed before that leaves those items to be
    /// popped again by the next one. See `ringwire_core::queue::spsc`, "When a popped slot
    /// is handed back".
    pub fn release_every(&self) -> u64 {
        self.inner.release_every()
    }

    /// Sets [`SpscBytesConsumer::release_every`] (clamped to `1 ..= capacity`): 1 hands
    /// every slot back as it is popped, so no item is ever popped twice.
    pub fn set_release_every(&mut self, n: u64) {
        self.inner.set_release_every(n);
        notify_on(self.inner.view(), self.unfenced, Side::Space);
    }

    /// Hands every popped slot back to the producer now, and wakes it if it sleeps on the
    /// full queue. Dropping the consumer does the same.
    pub fn release(&mut self) {
        self.inner.release();
        notify_on(self.inner.view(), self.unfenced, Side::Space);
    }

    /// The queue's memory (the typed handles check its geometry).
    pub(super) fn mem(&self) -> &QueueMem {
        &self.mem
    }

    /// Pops up to `min(bufs.len(), lens.len())` items, item `k` into `bufs[k]` with its length
    /// in `lens[k]`, with one index update, and returns how many. An item that does not fit
    /// its buffer stops the batch and stays in the queue (its error is returned only when it
    /// is the first).
    pub fn pop_slice<B: AsMut<[u8]>>(
        &mut self,
        bufs: &mut [B],
        lens: &mut [usize],
    ) -> Result<usize, PopError> {
        let n = self.inner.pop_slice(bufs, lens)?;
        Ok(moved(self.inner.view(), self.unfenced, Side::Space, n))
    }

    /// Pops records of exactly `item_len` bytes back to back into `dst` with one index
    /// update and returns how many (the typed `pop_slice`).
    ///
    /// Always inlined, as [`SpscBytesProducer::push_records`].
    #[inline(always)]
    pub(super) fn pop_records(
        &mut self,
        dst: &mut [u8],
        item_len: usize,
    ) -> Result<usize, PopError> {
        let n = self.inner.pop_fixed(dst, item_len)?;
        Ok(moved(self.inner.view(), self.unfenced, Side::Space, n))
    }

    /// Pops one item into `buf`, waiting up to `timeout` for one; `Ok(None)` after that.
    /// Waits by spinning briefly, then sleeping on the queue's futex (see
    /// [`SpscBytesConsumer::pop_timeout`] to choose the strategy).
    pub fn pop_blocking(
        &mut self,
        buf: &mut [u8],
        timeout: Duration,
    ) -> Result<Option<usize>, PopError> {
        self.pop_timeout(buf, &mut default_wait(), timeout)
    }

    /// Pops one item into `buf`, waiting for one with `wait` (as in
    /// [`SpscBytesProducer::push_timeout`]; a [`FutexWait`](crate::FutexWait) sleeps on the
    /// queue's data futex) for up to `timeout`; `Ok(None)` after that.
    pub fn pop_timeout<W: WaitStrategy>(
        &mut self,
        buf: &mut [u8],
        wait: &mut W,
        timeout: Duration,
    ) -> Result<Option<usize>, PopError> {
        self.wait_for_item(wait, timeout, |c| c.try_pop(buf))
    }

    /// Runs `pop` until it yields an item or `timeout` passes, waiting with `wait` on the
    /// data futex between tries (the typed and untyped `pop_timeout`).
    pub(super) fn wait_for_item<W: WaitStrategy, R>(
        &mut self,
        wait: &mut W,
        timeout: Duration,
        mut pop: impl FnMut(&mut Self) -> Result<Option<R>, PopError>,
    ) -> Result<Option<R>, PopError> {
        let deadline = deadline_after(timeout);
        loop {
            // Looked at before the pop: every item the producer pushed before its drop is
            // then seen by the pop, so an empty pop after the mark is the end of the items.
            let abandoned = self.is_abandoned();
            match pop(self)? {
                None if before(deadline) && !abandoned => {
                    let view = *self.mem.queue();
                    let mem = &self.mem;
                    wait_side(wait, &view, Side::Data, deadline, || {
                        self.inner.ready().map_or(true, |n| n > 0) || mem.side_dropped()
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

    /// True when this is the consumer of an anonymous channel ([`spsc_bytes_channel`],
    /// [`super::spsc_channel`]) whose producer has been dropped: the items in the queue are
    /// the last. The blocking pops then stop waiting: once the queue is empty they return
    /// `Ok(None)` at once, whatever the timeout. Always false on a queue file, whose
    /// producer role another handle may take at any time.
    pub fn is_abandoned(&self) -> bool {
        self.mem.side_dropped()
    }

    /// See [`QueueMem::flush`].
    pub fn flush(&self) -> io::Result<()> {
        self.mem.flush()
    }
}
