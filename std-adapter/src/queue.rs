//! Lossless queues in files (durable: they survive both sides exiting) or in anonymous
//! in-process memory, with typed handles: [`SpscProducer`], [`SpscConsumer`],
//! [`MpmcQueue`].
//!
//! Files follow the creation rules of spec §1.2 where they apply: `O_CREAT` without
//! `O_TRUNC`, mode 0o660, a non-blocking exclusive `flock` held by the creating handle for its
//! life, an inode check against the path, and replacement of a stale file (size ≠ 0) by a
//! fresh inode, up to 8 attempts. Unlike a ringfire ring, a queue file is never unlinked on
//! drop: the items in it are the point. Use `open` to reach an existing queue.
//!
//! Blocking pushes and pops spin briefly, then sleep on the queue's shared futex words
//! (`data_futex` for consumers, `space_futex` for producers) with the same no-lost-wake-up
//! handshake as the broadcast ring's `FutexWait` (see `wait`): every push and pop of these
//! handles pays one SeqCst fence to check for sleepers, and wakes them only if there are any.
//!
//! The one-producer / one-consumer rule of an SPSC queue file is enforced with open-file-
//! description locks (`F_OFD_SETLK`) on one byte per role, released by the kernel when the
//! handle is dropped or its process dies.

use std::fs::{File, OpenOptions};
use std::io;
use std::marker::PhantomData;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use memmap2::MmapMut;
use ringwire_core::Region;
use ringwire_core::layout::schema_signature_of;
use ringwire_core::queue::{
    self as q, HealError, HealedFrom, PopError, Popped, PushError, QueueAttachError, QueueExpect,
    QueueGeometry, QueueGeometryError, QueueInitError, QueueKind, QueueView,
};
use ringwire_core::sync::{A32, Ordering, fence};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::sys;

/// Why a queue file or mapping cannot be set up.
#[derive(Debug)]
pub enum QueueFileError {
    /// A system call failed.
    Io(io::Error),
    /// Another live handle holds the creation lock of this path.
    Locked(PathBuf),
    /// The role (producer or consumer of an SPSC queue) is held by another live handle.
    RoleTaken {
        /// The file.
        path: PathBuf,
        /// "producer" or "consumer".
        role: &'static str,
    },
    /// The geometry asked for is invalid.
    Geometry(QueueGeometryError),
    /// The memory cannot hold the queue.
    Init(QueueInitError),
    /// The file is not a queue of the expected kind and item type.
    Attach {
        /// The file ("anonymous" for in-process memory).
        path: PathBuf,
        /// What is wrong.
        err: QueueAttachError,
    },
}

impl std::fmt::Display for QueueFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueueFileError::Io(e) => e.fmt(f),
            QueueFileError::Locked(p) => {
                write!(
                    f,
                    "queue {}: another live handle is creating it",
                    p.display()
                )
            }
            QueueFileError::RoleTaken { path, role } => {
                write!(
                    f,
                    "queue {}: the {role} is already attached",
                    path.display()
                )
            }
            QueueFileError::Geometry(e) => e.fmt(f),
            QueueFileError::Init(e) => e.fmt(f),
            QueueFileError::Attach { path, err } => write!(f, "queue {}: {err}", path.display()),
        }
    }
}

impl std::error::Error for QueueFileError {}

impl From<io::Error> for QueueFileError {
    fn from(e: io::Error) -> Self {
        QueueFileError::Io(e)
    }
}

/// The memory a queue lives in: a shared mapping of a file, or anonymous memory.
#[derive(Debug)]
pub struct QueueMem {
    map: MmapMut,
    view: QueueView,
    path: Option<PathBuf>,
    // The creator's flock, held for the handle's life (spec §1.2 step 6).
    _lock: Option<File>,
}

impl QueueMem {
    /// Creates a fresh queue file at `path` (spec §1.2 rules; a stale file is replaced).
    pub fn create(path: impl AsRef<Path>, geo: &QueueGeometry) -> Result<QueueMem, QueueFileError> {
        let path = path.as_ref();
        let len = geo
            .total_len()
            .ok_or(QueueFileError::Geometry(QueueGeometryError::TooLarge))?;
        for _ in 0..8 {
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o660)
                .open(path)?;
            // SAFETY: flock on a descriptor we own; no memory is passed.
            if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                return Err(QueueFileError::Locked(path.to_owned()));
            }
            let mine = f.metadata()?;
            match std::fs::metadata(path) {
                Ok(m) if m.dev() == mine.dev() && m.ino() == mine.ino() => {}
                _ => continue, // the path was replaced meanwhile
            }
            if mine.len() != 0 {
                // A stale queue whose creator is gone (we hold its lock): fresh inode.
                std::fs::remove_file(path)?;
                continue;
            }
            f.set_len(len)?;
            let mut map = map_file(&f, len as usize)?;
            let region = region_of(&mut map)?;
            let view = QueueView::init(region, geo).map_err(QueueFileError::Init)?;
            return Ok(QueueMem {
                map,
                view,
                path: Some(path.to_owned()),
                _lock: Some(f),
            });
        }
        Err(QueueFileError::Locked(path.to_owned()))
    }

    /// Opens an existing queue file, with every attach check.
    pub fn open(path: impl AsRef<Path>, expect: QueueExpect) -> Result<QueueMem, QueueFileError> {
        let path = path.as_ref();
        let f = OpenOptions::new().read(true).write(true).open(path)?;
        let len = f.metadata()?.len();
        let attach_err = |err| QueueFileError::Attach {
            path: path.to_owned(),
            err,
        };
        // An empty file cannot be mapped; anything longer goes to the core's checks.
        if len < 8 {
            return Err(attach_err(QueueAttachError::TooShort { len }));
        }
        let mut map = map_file(&f, len as usize)?;
        let region = region_of(&mut map)?;
        let view = QueueView::attach(region, expect).map_err(attach_err)?;
        Ok(QueueMem {
            map,
            view,
            path: Some(path.to_owned()),
            _lock: None,
        })
    }

    /// A queue in anonymous memory, for threads of one process.
    pub fn anonymous(geo: &QueueGeometry) -> Result<QueueMem, QueueFileError> {
        let len = geo
            .total_len()
            .ok_or(QueueFileError::Geometry(QueueGeometryError::TooLarge))?;
        let mut map = MmapMut::map_anon(len as usize)?;
        let region = region_of(&mut map)?;
        let view = QueueView::init(region, geo).map_err(QueueFileError::Init)?;
        Ok(QueueMem {
            map,
            view,
            path: None,
            _lock: None,
        })
    }

    /// The queue.
    pub fn view(&self) -> &QueueView {
        &self.view
    }

    /// The file, if the queue lives in one.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Writes the mapping back to the file and waits for it (msync `MS_SYNC`): after this
    /// returns, the queue's state up to now survives a crash of the machine. A no-op for
    /// anonymous memory.
    pub fn flush(&self) -> io::Result<()> {
        if self.path.is_some() {
            self.map.flush()
        } else {
            Ok(())
        }
    }

    /// Takes an exclusive per-role lock on the file (one byte at `offset`) through a new open
    /// file description, kept alive by the returned file.
    fn lock_role(&self, offset: i64, role: &'static str) -> Result<Option<File>, QueueFileError> {
        let Some(path) = &self.path else {
            return Ok(None);
        };
        let f = OpenOptions::new().read(true).write(true).open(path)?;
        // SAFETY: an all-zero flock struct is a valid value of this plain C struct.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = libc::F_WRLCK as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        fl.l_start = offset;
        fl.l_len = 1;
        // SAFETY: fcntl with a valid descriptor and a pointer to a live flock struct.
        if unsafe { libc::fcntl(f.as_raw_fd(), libc::F_OFD_SETLK, &fl) } != 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EACCES) => QueueFileError::RoleTaken {
                    path: path.clone(),
                    role,
                },
                _ => QueueFileError::Io(e),
            });
        }
        Ok(Some(f))
    }
}

fn map_file(f: &File, len: usize) -> io::Result<MmapMut> {
    // SAFETY: the file is a queue file that other parties access only through ringwire's
    // atomic protocols (Region's contract); it is never truncated while mapped.
    unsafe { memmap2::MmapOptions::new().len(len).map_mut(f) }
}

fn region_of(map: &mut MmapMut) -> Result<Region, QueueFileError> {
    let len = map.len();
    // SAFETY: the mapping lives as long as the QueueMem that owns both it and every view of
    // this region; all accesses go through atomics.
    unsafe { Region::from_raw_parts(map.as_mut_ptr(), len) }
        .map_err(|e| QueueFileError::Io(io::Error::other(e)))
}

/// Spins this many times before sleeping.
const SPINS: u32 = 64;
/// Longest single sleep, so a lost wake-up (a peer that does not notify) costs little.
const MAX_SLEEP: Duration = Duration::from_millis(10);

/// Which waiting words a side sleeps on.
#[derive(Clone, Copy)]
enum Side {
    /// Consumers waiting for items.
    Data,
    /// Producers waiting for space.
    Space,
}

fn words(view: &QueueView, side: Side) -> (A32<'_>, A32<'_>) {
    match side {
        Side::Data => (view.data_futex(), view.data_waiters()),
        Side::Space => (view.space_futex(), view.space_waiters()),
    }
}

/// After a push (`Side::Data`) or a pop (`Side::Space`): wakes the other side's sleepers.
fn notify(view: &QueueView, side: Side) {
    let bumped = match side {
        Side::Data => view.notify_data(),
        Side::Space => view.notify_space(),
    };
    if bumped {
        sys::futex_wake_all(words(view, side).0.as_ptr());
    }
}

/// Waits until `ready()` or the deadline, spinning first, then sleeping on the side's
/// futex. Returns when `ready()` may have become true (callers retry their operation).
fn wait_for(view: &QueueView, side: Side, deadline: Instant, mut ready: impl FnMut() -> bool) {
    for _ in 0..SPINS {
        if ready() {
            return;
        }
        std::hint::spin_loop();
    }
    let (word, waiters) = words(view, side);
    // Acquire: if the peer's bump is seen here, so is the change before it.
    let v = word.load(Ordering::Acquire);
    // SeqCst: announces the sleeper; pairs with the peer's fence-then-load in notify_*.
    waiters.fetch_add(1, Ordering::SeqCst);
    // SeqCst fence: the re-check below cannot move before the announcement.
    fence(Ordering::SeqCst);
    if !ready() {
        let left = deadline.saturating_duration_since(Instant::now());
        if !left.is_zero() {
            let _ = sys::futex_wait(word.as_ptr(), v, left.min(MAX_SLEEP));
        }
    }
    // Relaxed: a stale non-zero count only costs the peer one spare wake.
    waiters.fetch_sub(1, Ordering::Relaxed);
}

/// The record types a typed queue can carry: plain bytes both ways, no padding surprises.
pub trait Item: IntoBytes + FromBytes + Immutable + KnownLayout + Sized {}
impl<T: IntoBytes + FromBytes + Immutable + KnownLayout> Item for T {}

fn expect_for<T: Item>(kind: QueueKind) -> QueueExpect {
    QueueExpect {
        kind,
        item_size: Some(std::mem::size_of::<T>() as u32),
        schema_sig: Some(schema_signature_of::<T>()),
    }
}

fn geometry_for<T: Item>(kind: QueueKind, capacity: u64) -> Result<QueueGeometry, QueueFileError> {
    let size = std::mem::size_of::<T>();
    let g = match kind {
        // SPSC: compact slots; the two sides never write neighbouring slots at once.
        QueueKind::Spsc => QueueGeometry::new(kind, capacity, size, (8 + size).div_ceil(8) * 8),
        // MPMC: whole cache lines, so concurrent producers never share one.
        QueueKind::Mpmc => QueueGeometry::cache_lines(kind, capacity, size),
    };
    Ok(g.map_err(QueueFileError::Geometry)?
        .with_schema(schema_signature_of::<T>()))
}

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

fn wrong_kind(mem: &QueueMem, err: QueueAttachError) -> QueueFileError {
    QueueFileError::Attach {
        path: mem.path().unwrap_or(Path::new("anonymous")).to_owned(),
        err,
    }
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
        let inner = q::SpscProducer::new(*mem.view()).map_err(|e| wrong_kind(&mem, e))?;
        Ok(SpscProducer {
            inner,
            mem,
            _role: role,
            _t: PhantomData,
        })
    }

    /// Pushes one item, or fails with [`PushError::Full`].
    pub fn try_push(&mut self, item: &T) -> Result<(), PushError> {
        self.inner.try_push(item.as_bytes())?;
        notify(self.mem.view(), Side::Data);
        Ok(())
    }

    /// Pushes as many of `items` as fit, with one index update, and returns how many.
    pub fn push_slice(&mut self, items: &[T]) -> Result<usize, PushError> {
        let n = self
            .inner
            .push_fixed(items.as_bytes(), std::mem::size_of::<T>())?;
        if n > 0 {
            notify(self.mem.view(), Side::Data);
        }
        Ok(n)
    }

    /// Pushes one item, waiting up to `timeout` for space; [`PushError::Full`] after that.
    pub fn push_blocking(&mut self, item: &T, timeout: Duration) -> Result<(), PushError> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.try_push(item) {
                Err(PushError::Full) if Instant::now() < deadline => {
                    let view = *self.mem.view();
                    wait_for(&view, Side::Space, deadline, || self.inner.free() > 0);
                }
                r => return r,
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
        let inner = q::SpscConsumer::new(*mem.view()).map_err(|e| wrong_kind(&mem, e))?;
        Ok(SpscConsumer {
            inner,
            mem,
            _role: role,
            _t: PhantomData,
        })
    }

    /// Pops one item; `Ok(None)` when the queue is empty.
    pub fn try_pop(&mut self) -> Result<Option<T>, PopError> {
        let mut t = T::new_zeroed();
        match self
            .inner
            .pop_fixed(t.as_mut_bytes(), std::mem::size_of::<T>())?
        {
            1 => {
                notify(self.mem.view(), Side::Space);
                Ok(Some(t))
            }
            _ => Ok(None),
        }
    }

    /// Pops up to `out.len()` items with one index update and returns how many.
    pub fn pop_slice(&mut self, out: &mut [T]) -> Result<usize, PopError> {
        let n = self
            .inner
            .pop_fixed(out.as_mut_bytes(), std::mem::size_of::<T>())?;
        if n > 0 {
            notify(self.mem.view(), Side::Space);
        }
        Ok(n)
    }

    /// Pops one item, waiting up to `timeout` for one; `Ok(None)` after that.
    pub fn pop_blocking(&mut self, timeout: Duration) -> Result<Option<T>, PopError> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.try_pop()? {
                None if Instant::now() < deadline => {
                    let view = *self.mem.view();
                    wait_for(&view, Side::Data, deadline, || {
                        self.inner.ready().map_or(true, |n| n > 0)
                    });
                }
                r => return Ok(r),
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

/// A handle on an MPMC queue of `T`; clone it for more producers and consumers.
#[derive(Debug, Clone)]
pub struct MpmcQueue<T: Item> {
    inner: q::MpmcQueue,
    mem: Arc<QueueMem>,
    _t: PhantomData<fn(T) -> T>,
}

impl<T: Item> MpmcQueue<T> {
    /// Creates a fresh queue file of `capacity` items.
    pub fn create(path: impl AsRef<Path>, capacity: u64) -> Result<Self, QueueFileError> {
        let g = geometry_for::<T>(QueueKind::Mpmc, capacity)?;
        Self::from_mem(Arc::new(QueueMem::create(path, &g)?))
    }

    /// Opens an existing queue file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, QueueFileError> {
        Self::from_mem(Arc::new(QueueMem::open(
            path,
            expect_for::<T>(QueueKind::Mpmc),
        )?))
    }

    /// A queue of `capacity` items in anonymous memory, for threads of one process.
    pub fn anonymous(capacity: u64) -> Result<Self, QueueFileError> {
        let g = geometry_for::<T>(QueueKind::Mpmc, capacity)?;
        Self::from_mem(Arc::new(QueueMem::anonymous(&g)?))
    }

    fn from_mem(mem: Arc<QueueMem>) -> Result<Self, QueueFileError> {
        let inner = q::MpmcQueue::new(*mem.view()).map_err(|e| wrong_kind(&mem, e))?;
        Ok(MpmcQueue {
            inner,
            mem,
            _t: PhantomData,
        })
    }

    /// Pushes one item and returns its position, or fails with [`PushError::Full`].
    pub fn try_push(&self, item: &T) -> Result<u64, PushError> {
        let pos = self.inner.try_push(item.as_bytes())?;
        notify(self.mem.view(), Side::Data);
        Ok(pos)
    }

    /// Pushes one item, waiting up to `timeout` for space; [`PushError::Full`] after that.
    pub fn push_blocking(&self, item: &T, timeout: Duration) -> Result<u64, PushError> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.try_push(item) {
                Err(PushError::Full) if Instant::now() < deadline => {
                    wait_for(self.mem.view(), Side::Space, deadline, || {
                        self.inner.has_space()
                    });
                }
                r => return r,
            }
        }
    }

    /// Pops one item, waiting up to `timeout`; `Ok((None, healed))` after that.
    pub fn pop_blocking(&self, timeout: Duration) -> Result<(Option<T>, u64), PopError> {
        let deadline = Instant::now() + timeout;
        let mut healed = 0;
        loop {
            match self.try_pop()? {
                (None, h) if Instant::now() < deadline => {
                    healed += h;
                    wait_for(self.mem.view(), Side::Data, deadline, || {
                        self.inner.has_item()
                    });
                }
                (t, h) => return Ok((t, healed + h)),
            }
        }
    }

    /// Pops the next item in global FIFO order; `Ok(None)` when nothing is ready. Healed
    /// positions (items lost with a dead producer) are passed and counted in the returned
    /// pair's second field.
    pub fn try_pop(&self) -> Result<(Option<T>, u64), PopError> {
        let mut t = T::new_zeroed();
        let mut healed = 0;
        // At most one lap of healed positions can precede an item.
        for _ in 0..=self.inner.view().capacity() {
            match self.inner.try_pop(t.as_mut_bytes()) {
                Ok(Popped::Item { .. }) => {
                    notify(self.mem.view(), Side::Space);
                    return Ok((Some(t), healed));
                }
                Ok(Popped::Healed { .. }) => {
                    notify(self.mem.view(), Side::Space);
                    healed += 1;
                }
                Err(PopError::Empty | PopError::Pending { .. }) => return Ok((None, healed)),
                Err(e) => return Err(e),
            }
        }
        Ok((None, healed))
    }

    /// The core queue, for the split [`q::MpmcQueue::claim`] /
    /// [`q::MpmcQueue::write_claimed`] push and other raw access.
    pub fn core(&self) -> &q::MpmcQueue {
        &self.inner
    }

    /// See [`q::MpmcQueue::next_stuck_slot`].
    pub fn next_stuck_slot(&self, from: u64) -> Option<u64> {
        self.inner.next_stuck_slot(from)
    }

    /// See [`q::MpmcQueue::heal_stuck_slot`] and its caller contract.
    pub fn heal_stuck_slot(&self, pos: u64) -> Result<HealedFrom, HealError> {
        self.inner.heal_stuck_slot(pos)
    }

    /// Items claimed and not yet popped.
    pub fn len(&self) -> u64 {
        self.inner.len()
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// See [`QueueMem::flush`].
    pub fn flush(&self) -> io::Result<()> {
        self.mem.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let dir = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let p = dir.join(format!("ringwire-queue-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        p
    }

    #[derive(IntoBytes, FromBytes, Immutable, KnownLayout, Clone, Copy, Debug, PartialEq)]
    #[repr(C)]
    struct Order {
        id: u64,
        px: f64,
        qty: u32,
        side: u32,
    }

    fn order(id: u64) -> Order {
        Order {
            id,
            px: id as f64 * 0.5,
            qty: id as u32 * 3,
            side: (id % 2) as u32,
        }
    }

    #[test]
    fn spsc_file_survives_both_sides_dropping() {
        let path = tmp("durable");
        {
            let mut p = SpscProducer::<Order>::create(&path, 16).unwrap();
            let mut c = SpscConsumer::<Order>::open(&path).unwrap();
            assert_eq!(
                p.push_slice(&(0..10).map(order).collect::<Vec<_>>()),
                Ok(10)
            );
            assert_eq!(c.try_pop(), Ok(Some(order(0))));
            assert_eq!(c.try_pop(), Ok(Some(order(1))));
            p.flush().unwrap();
        }
        // Both handles are gone (and the creator's lock with them); the file keeps the items.
        let mut c = SpscConsumer::<Order>::open(&path).unwrap();
        let mut p = SpscProducer::<Order>::open(&path).unwrap();
        p.try_push(&order(10)).unwrap();
        let mut out = [order(0); 16];
        assert_eq!(c.pop_slice(&mut out), Ok(9));
        assert_eq!(out[..9], (2..=10).map(order).collect::<Vec<_>>()[..]);
        assert_eq!(c.try_pop(), Ok(None));
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn spsc_roles_are_exclusive_and_types_are_checked() {
        let path = tmp("roles");
        let _p = SpscProducer::<Order>::create(&path, 4).unwrap();
        assert!(matches!(
            SpscProducer::<Order>::open(&path),
            Err(QueueFileError::RoleTaken {
                role: "producer",
                ..
            })
        ));
        let c = SpscConsumer::<Order>::open(&path).unwrap();
        assert!(matches!(
            SpscConsumer::<Order>::open(&path),
            Err(QueueFileError::RoleTaken {
                role: "consumer",
                ..
            })
        ));
        drop(c);
        SpscConsumer::<Order>::open(&path).unwrap();
        // Another item type, or the other queue kind, is refused with the values seen.
        match SpscConsumer::<u64>::open(&path) {
            Err(QueueFileError::Attach {
                err:
                    QueueAttachError::ItemSizeMismatch {
                        expected: 8,
                        found: 24,
                    },
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
        match MpmcQueue::<Order>::open(&path) {
            Err(QueueFileError::Attach {
                err:
                    QueueAttachError::WrongKind {
                        expected: QueueKind::Mpmc,
                        found: QueueKind::Spsc,
                    },
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
        // A second creator while the first lives is refused.
        assert!(matches!(
            SpscProducer::<Order>::create(&path, 4),
            Err(QueueFileError::Locked(_))
        ));
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn spsc_anonymous_channel_across_threads() {
        let (mut p, mut c) = spsc_channel::<u64>(8).unwrap();
        const N: u64 = 10_000;
        std::thread::scope(|s| {
            s.spawn(move || {
                let mut i = 0;
                while i < N {
                    if p.try_push(&i).is_ok() {
                        i += 1;
                    } else {
                        std::thread::yield_now();
                    }
                }
            });
            let mut want = 0;
            let mut buf = [0u64; 5];
            while want < N {
                let n = c.pop_slice(&mut buf).unwrap();
                for v in &buf[..n] {
                    assert_eq!(*v, want);
                    want += 1;
                }
                if n == 0 {
                    std::thread::yield_now();
                }
            }
        });
    }

    #[test]
    fn blocking_pop_and_push_wake_up_and_time_out() {
        let (mut p, mut c) = spsc_channel::<u64>(2).unwrap();
        // Times out on an empty queue, after the timeout.
        let t0 = Instant::now();
        assert_eq!(c.pop_blocking(Duration::from_millis(30)), Ok(None));
        let waited = t0.elapsed();
        assert!(waited >= Duration::from_millis(30), "{waited:?}");
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(50));
                p.try_push(&7).unwrap();
                p.try_push(&8).unwrap();
                // Full now: blocks until the consumer pops.
                p.push_blocking(&9, Duration::from_secs(10)).unwrap();
            });
            let t0 = Instant::now();
            assert_eq!(c.pop_blocking(Duration::from_secs(10)), Ok(Some(7)));
            assert!(t0.elapsed() < Duration::from_secs(5));
            std::thread::sleep(Duration::from_millis(30));
            assert_eq!(c.pop_blocking(Duration::from_secs(10)), Ok(Some(8)));
            assert_eq!(c.pop_blocking(Duration::from_secs(10)), Ok(Some(9)));
        });
        let q = MpmcQueue::<u64>::anonymous(2).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(20));
                q.push_blocking(&1, Duration::from_secs(10)).unwrap();
            });
            assert_eq!(q.pop_blocking(Duration::from_secs(10)), Ok((Some(1), 0)));
        });
        assert_eq!(q.pop_blocking(Duration::from_millis(5)), Ok((None, 0)));
    }

    /// The child half of `producer_killed_mid_push_is_healed_from_another_process`: run only
    /// by that test, in a child process (hence ignored).
    #[test]
    #[ignore = "child process of producer_killed_mid_push_is_healed_from_another_process"]
    fn child_claims_and_hangs() {
        let path = std::env::var("RINGWIRE_QUEUE_CHILD").expect("run by the parent test");
        let q = MpmcQueue::<u64>::open(&path).unwrap();
        q.try_push(&1).unwrap();
        // Claim position 1 and never publish it: the parent kills us here.
        let _pos = q.core().claim().unwrap();
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }

    #[test]
    fn producer_killed_mid_push_is_healed_from_another_process() {
        let path = tmp("killed");
        let q = MpmcQueue::<u64>::create(&path, 8).unwrap();
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "queue::tests::child_claims_and_hangs",
                "--ignored",
                "--test-threads=1",
            ])
            .env("RINGWIRE_QUEUE_CHILD", &path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while q.next_stuck_slot(0) != Some(1) {
            assert!(Instant::now() < deadline, "the child never claimed");
            std::thread::sleep(Duration::from_millis(2));
        }
        // kill -9, and reap: the producer is now known to be dead.
        child.kill().unwrap();
        child.wait().unwrap();
        q.try_push(&3).unwrap();
        assert_eq!(q.try_pop(), Ok((Some(1), 0)));
        // Consumers wait on the dead producer's position...
        assert_eq!(q.try_pop(), Ok((None, 0)));
        assert_eq!(q.next_stuck_slot(0), Some(1));
        // ...until it is healed; then they pass it, and the count says one item was lost.
        assert_eq!(q.heal_stuck_slot(1), Ok(HealedFrom::Claimed));
        assert_eq!(q.try_pop(), Ok((Some(3), 1)));
        assert_eq!(q.next_stuck_slot(0), None);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn mpmc_file_shared_by_threads_and_reopened() {
        let path = tmp("mpmc");
        let q = MpmcQueue::<Order>::create(&path, 8).unwrap();
        const N: u64 = 2_000;
        let total: u64 = std::thread::scope(|s| {
            let mut producers = Vec::new();
            for t in 0..2u64 {
                let q = MpmcQueue::<Order>::open(&path).unwrap();
                producers.push(s.spawn(move || {
                    let mut i = 0;
                    while i < N {
                        if q.try_push(&order(t * N + i)).is_ok() {
                            i += 1;
                        } else {
                            std::thread::yield_now();
                        }
                    }
                }));
            }
            let hs: Vec<_> = (0..2)
                .map(|_| {
                    let q = q.clone();
                    s.spawn(move || {
                        let mut sum = 0;
                        let mut n = 0;
                        while q
                            .inner
                            .view()
                            .deq()
                            .load(ringwire_core::sync::Ordering::Relaxed)
                            < 2 * N - 4
                        {
                            match q.try_pop().unwrap() {
                                (Some(o), 0) => {
                                    assert_eq!(o, order(o.id));
                                    sum += o.id;
                                    n += 1;
                                }
                                (None, 0) => std::thread::yield_now(),
                                other => panic!("{other:?}"),
                            }
                        }
                        (sum, n)
                    })
                })
                .collect();
            let (mut sum, mut n) = (0, 0);
            for h in hs {
                let (s2, n2) = h.join().unwrap();
                sum += s2;
                n += n2;
            }
            for p in producers {
                p.join().unwrap();
            }
            // The last few stay queued; drain them through a fresh handle on the file.
            drop(q);
            let q2 = MpmcQueue::<Order>::open(&path).unwrap();
            while let (Some(o), 0) = q2.try_pop().unwrap() {
                sum += o.id;
                n += 1;
            }
            assert_eq!(n, 2 * N);
            sum
        });
        assert_eq!(total, (0..2 * N).sum::<u64>());
        std::fs::remove_file(&path).unwrap();
    }
}
