//! [`QueueMem`]: the mapping a queue lives in (a file created by the spec §1.2 rules, or
//! anonymous memory), msync flush, and the per-role file locks. One rule differs from
//! spec §1.2: `create` replaces only a stale queue file or one whose creation never
//! finished, and refuses any other file at its path rather than unlink it.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use memmap2::MmapMut;
use ringwire_core::Region;
use ringwire_core::futex::WakeGate;
use ringwire_core::queue::{
    self as q, HealError, QueueAttachError, QueueExpect, QueueGeometry, QueueGeometryError,
    QueueInitError, QueueView, StuckSlot,
};

use super::wait::Side;
use crate::cli::sigbus::Mapped;
use crate::shown::path as shown;

/// Why a queue file or mapping cannot be set up. Each variant names the file
/// ("anonymous" for in-process memory).
#[derive(Debug)]
#[non_exhaustive]
pub enum QueueFileError {
    /// A system call on the queue's file or memory failed.
    Io {
        /// The file ("anonymous" for in-process memory).
        path: PathBuf,
        /// The operation that failed (`open`, `fstat`, `mmap`, `fallocate`, `msync`, …).
        op: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// Another live handle is creating a queue at this path: it holds the creation lock and
    /// has not finished (the magic is still 0), or it is replacing a stale file there.
    /// (`open` also reports it when the path kept being replaced under it.)
    Locked(PathBuf),
    /// `create` found the queue file still open by a live handle (of this process or
    /// another), or its live creator, which holds the creation lock for its whole life:
    /// replacing it would leave that handle on a file nobody else uses, so it is refused.
    /// Open the queue instead, or close every handle first.
    InUse {
        /// The file.
        path: PathBuf,
        /// Who holds it: "creator" (the handle that created it, still alive), "producer" or
        /// "consumer" (an SPSC role), or "handle".
        holder: &'static str,
    },
    /// The path names something other than a regular file (a FIFO, a device, a socket).
    /// A directory fails the open itself: [`QueueFileError::Io`] with `EISDIR`.
    /// New after 0.1.0: this was the tuple variant `NotRegularFile(PathBuf)`, and it now
    /// names what the path is.
    NotRegularFile {
        /// The file.
        path: PathBuf,
        /// What it is instead: "a FIFO", "a character device", "a block device", "a
        /// socket"… (the names of [`crate::Error::NotRegularFile`]'s `found`).
        found: &'static str,
    },
    /// `create` found a non-empty file at the path that is neither a queue file (of any
    /// kind) nor one whose creation never finished: somebody's data, a ring, a blackboard.
    /// It is refused and left as it was, rather than replaced.
    NotReplaced {
        /// The file.
        path: PathBuf,
        /// Its length.
        len: u64,
        /// Its first 8 bytes (in the host's byte order), when it has 8.
        magic: Option<u64>,
    },
    /// The role (producer or consumer of an SPSC queue) is held by another live handle.
    RoleTaken {
        /// The file.
        path: PathBuf,
        /// "producer" or "consumer".
        role: &'static str,
    },
    /// The geometry asked for is invalid.
    Geometry {
        /// The file ("anonymous" for in-process memory).
        path: PathBuf,
        /// What is wrong with it.
        source: QueueGeometryError,
    },
    /// The memory cannot hold the queue.
    Init {
        /// The file ("anonymous" for in-process memory).
        path: PathBuf,
        /// Why.
        source: QueueInitError,
    },
    /// The file is not a queue of the expected kind and item type.
    Attach {
        /// The file ("anonymous" for in-process memory).
        path: PathBuf,
        /// What is wrong.
        err: QueueAttachError,
    },
    /// A typed SPSC handle was asked to attach to a queue of byte strings (made by
    /// [`super::SpscBytesProducer`]), whose items keep their own lengths.
    NotFixedSize(PathBuf),
}

impl std::fmt::Display for QueueFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueueFileError::Io { path, op, source } => {
                write!(f, "queue {}: {op} failed: {source}", shown(path))
            }
            QueueFileError::Locked(p) => {
                write!(f, "queue {}: another live handle is creating it", shown(p))
            }
            QueueFileError::InUse { path, holder } => write!(
                f,
                "queue {}: a live {holder} still has it open; not replacing it (open it \
                 instead, or close every handle first)",
                shown(path)
            ),
            QueueFileError::NotRegularFile { path, found } => {
                write!(f, "queue {}: not a regular file but {found}", shown(path))
            }
            QueueFileError::NotReplaced { path, len, magic } => {
                write!(f, "queue {}: ", shown(path))?;
                crate::error::not_replaced(f, *len, *magic, "queue", "a queue creator")
            }
            QueueFileError::RoleTaken { path, role } => {
                write!(f, "queue {}: the {role} is already attached", shown(path))
            }
            QueueFileError::Geometry { path, source } => {
                write!(f, "queue {}: {source}", shown(path))
            }
            QueueFileError::Init { path, source } => {
                write!(f, "queue {}: {source}", shown(path))
            }
            QueueFileError::Attach { path, err } => {
                write!(f, "queue {}: {err}", shown(path))?;
                // The core names the magics of its own file kinds; a consumer offset file
                // (which lies beside the queues) is named here, as the ring's opens name it.
                match err {
                    QueueAttachError::BadMagic { found } => {
                        crate::checkpoint::name_offset_file_magic(f, *found)
                    }
                    _ => Ok(()),
                }
            }
            QueueFileError::NotFixedSize(p) => write!(
                f,
                "queue {}: holds byte strings of their own lengths, not fixed-size items \
                 (open it with SpscBytesConsumer / SpscBytesProducer)",
                shown(p)
            ),
        }
    }
}

impl QueueFileError {
    /// A [`QueueFileError::Geometry`] naming `path` (`None`: anonymous memory).
    pub(crate) fn geometry(path: Option<&Path>, source: QueueGeometryError) -> QueueFileError {
        QueueFileError::Geometry {
            path: path.unwrap_or(Path::new("anonymous")).to_owned(),
            source,
        }
    }
}

impl QueueFileError {
    /// The error this one wraps (a system call's, or a check's of the core), whose text is
    /// already in this one's; `None` for the variants that wrap nothing.
    pub fn cause(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            QueueFileError::Io { source, .. } => Some(source),
            QueueFileError::Geometry { source, .. } => Some(source),
            QueueFileError::Init { source, .. } => Some(source),
            QueueFileError::Attach { err, .. } => Some(err),
            _ => None,
        }
    }
}

/// `source()` is the wrapped error's own source (see [`crate::Error`]'s): the wrapped
/// error's text is already in this one's.
impl std::error::Error for QueueFileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause().and_then(|c| c.source())
    }
}

/// The byte every handle that opens a queue file holds a shared open-file-description lock
/// on for its life (byte 0; the SPSC role locks are on other bytes): `create` finds it held
/// and refuses to replace a file still in use.
const LIVE_BYTE: i64 = q::qhdr::MAGIC as i64;
/// The SPSC role lock bytes (see `spsc_bytes`), to name the holder of a file in use.
const ROLE_BYTES: [(i64, &str); 2] = [
    (q::qhdr::ENQ as i64, "producer"),
    (q::qhdr::DEQ as i64, "consumer"),
];
/// Attempts of `open` while the path is being replaced under it.
const OPEN_ATTEMPTS: usize = 8;
/// How long `open` waits for a write lock over [`LIVE_BYTE`] to go: a creator's while it
/// replaces the file, or another opener's while it proves itself alone, which in an MPMC
/// file heals every stuck slot in one pass over the slots (tens of ms for millions).
const OPEN_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// How long taking an SPSC role waits for an opener's probe (`reset_if_alone`) to give back
/// its whole-file lock. The probe takes microseconds, or one pass over the slots when it
/// heals an MPMC file (which has no roles); this bounds a wait on a prober descheduled
/// mid-probe.
pub(super) const PROBE_WAIT: std::time::Duration = std::time::Duration::from_millis(500);
/// How long taking an SPSC role waits for a lock on the role's byte to go before it
/// reports the role taken. The lock is an open file description's, so a handle closed
/// while another thread of its process forked keeps its role locked until the child
/// execs (or exits) and closes its copy of the descriptor: a new handle opened right after
/// was refused, although nobody held the role. A role really held is reported this late.
const ROLE_GRACE: std::time::Duration = std::time::Duration::from_millis(50);

/// The memory a queue lives in: a shared mapping of a file, or anonymous memory.
#[derive(Debug)]
pub struct QueueMem {
    map: Mapped<MmapMut>,
    view: QueueView,
    path: Option<PathBuf>,
    // `path` made absolute at creation or open, for `is_replaced` and `flush`: looked up
    // again after a change of the working directory, a relative path names another file
    // or none (as a ring's, see `RingFile`).
    abs_path: Option<PathBuf>,
    // (device, inode) of the mapped file.
    id: Option<(u64, u64)>,
    // This process registered for membarrier: its notifiers may skip the fence.
    unfenced_notify: bool,
    // The file's directory entry was synced by a flush of this handle (see `flush`).
    dir_synced: AtomicBool,
    // The creator's flock (spec §1.2 step 6), or an opener's shared lock on LIVE_BYTE, held
    // for the handle's life.
    _lock: Option<File>,
    // What the open proved of other handles, and what it healed (see `reset_if_alone`).
    at_open: AtOpen,
    // The file system took this handle's record locks (always true for `create`, whose
    // `flock` guards it, and for anonymous memory); see `QueueMem::is_guarded`.
    guarded: bool,
    // The MPMC handles' watch over their wakes of the data and the space side, shared by
    // every handle on this mapping (see `wait::notify_gated`).
    wake_gates: [WakeGate; 2],
    // An SPSC handle on this mapping was dropped (see `mark_side_dropped`).
    side_dropped: AtomicBool,
}

/// What guards an SPSC handle's role (see [`QueueMem::lock_role`]).
#[derive(Debug)]
pub(super) enum RoleLock {
    /// The role's lock, held while this open file description lives (until the handle
    /// that keeps it drops).
    Held {
        /// The open file description that holds the lock.
        _file: File,
    },
    /// Anonymous memory: its channel made the only pair of handles there can be.
    Anonymous,
    /// The file system has no record locks: nothing keeps a second handle from taking
    /// the role.
    Unguarded,
}

impl RoleLock {
    /// False for [`RoleLock::Unguarded`].
    pub(super) fn is_guarded(&self) -> bool {
        !matches!(self, RoleLock::Unguarded)
    }
}

/// What [`QueueMem::open`] found out about other handles on the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AtOpen {
    /// Another handle held a lock on the file (or this is `create` / `anonymous`).
    NotAlone,
    /// The file system has no record locks: nothing could be proved.
    Unprovable,
    /// No other handle had the file open: every stuck slot was healed (`healed` positions)
    /// up to the first the heal refused, which only a corrupt file shows.
    Alone {
        /// Positions healed.
        healed: u64,
        /// The first stuck position the heal refused, and why.
        refused: Option<(StuckSlot, HealError)>,
    },
}

/// A `QueueFileError::Io` for `op` on `path`.
fn io_err<'a>(path: &'a Path, op: &'static str) -> impl FnOnce(io::Error) -> QueueFileError + 'a {
    move |source| QueueFileError::Io {
        path: path.to_owned(),
        op,
        source,
    }
}

/// Opens `path` read-write without blocking and refuses anything but a regular file.
fn open_regular_rw(path: &Path) -> Result<File, QueueFileError> {
    crate::file::open_regular(path, OpenOptions::new().read(true).write(true)).map_err(
        |e| match e {
            crate::Error::Io { op, source, .. } => QueueFileError::Io {
                path: path.to_owned(),
                op,
                source,
            },
            crate::Error::NotRegularFile { found, .. } => QueueFileError::NotRegularFile {
                path: path.to_owned(),
                found,
            },
            // open_regular fails only with the two above; anything else keeps its text.
            other => QueueFileError::Io {
                path: path.to_owned(),
                op: "open",
                source: io::Error::other(other.to_string()),
            },
        },
    )
}

/// `F_OFD_SETLK` of `len` bytes at `start` (`len` 0: to the end of the file and beyond) on
/// `f`'s open file description; `Ok(false)` when another description holds a conflicting
/// lock. The kernel releases it when the description is closed or its process dies.
pub(super) fn ofd_lock(f: &File, kind: libc::c_int, start: i64, len: i64) -> io::Result<bool> {
    #[cfg(test)]
    if let Some(errno) = LOCKS_FAIL_WITH.get() {
        return Err(io::Error::from_raw_os_error(errno));
    }
    let fl = flock_of(kind, start, len);
    // SAFETY: fcntl with a valid descriptor and a pointer to a live flock struct.
    if unsafe { libc::fcntl(f.as_raw_fd(), libc::F_OFD_SETLK, &fl) } == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EACCES) => Ok(false),
        _ => Err(e),
    }
}

/// Whether another open file description holds a lock on any of `len` bytes at `start`
/// (`F_OFD_GETLK` of a write lock).
fn ofd_held(f: &File, start: i64, len: i64) -> io::Result<bool> {
    ofd_held_as(f, libc::F_WRLCK, start, len)
}

/// Whether another open file description holds a lock on any of `len` bytes at `start`
/// that conflicts with a lock of `kind` (`F_OFD_GETLK`).
pub(super) fn ofd_held_as(f: &File, kind: libc::c_int, start: i64, len: i64) -> io::Result<bool> {
    Ok(ofd_conflict(f, kind, start, len)?.is_some())
}

/// A lock held through another open file description that conflicts with a lock of `kind`
/// on `len` bytes at `start` (`F_OFD_GETLK`), if any.
fn ofd_conflict(
    f: &File,
    kind: libc::c_int,
    start: i64,
    len: i64,
) -> io::Result<Option<libc::flock>> {
    #[cfg(test)]
    if let Some(errno) = LOCKS_FAIL_WITH.get() {
        return Err(io::Error::from_raw_os_error(errno));
    }
    let mut fl = flock_of(kind, start, len);
    // SAFETY: fcntl with a valid descriptor and a pointer to a live flock struct, which
    // F_OFD_GETLK overwrites with the conflicting lock, if any.
    if unsafe { libc::fcntl(f.as_raw_fd(), libc::F_OFD_GETLK, &mut fl) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((fl.l_type != libc::F_UNLCK as libc::c_short).then_some(fl))
}

#[cfg(test)]
thread_local! {
    /// Tests: the errno every `F_OFD_SETLK` and `F_OFD_GETLK` on this thread fails with
    /// (see [`locks_fail_with`]), as on a file system without record locks, which a test
    /// cannot mount without root.
    static LOCKS_FAIL_WITH: std::cell::Cell<Option<i32>> = const { std::cell::Cell::new(None) };
}

/// Tests: makes every open-file-description lock call of this thread fail with `errno`
/// until the returned guard drops (also when the test unwinds). The creator's `flock` is
/// left working, as on a file system that offers `flock` but not byte-range locks.
#[cfg(test)]
pub(super) fn locks_fail_with(errno: i32) -> impl Drop {
    struct Restore;
    impl Drop for Restore {
        fn drop(&mut self) {
            LOCKS_FAIL_WITH.set(None);
        }
    }
    LOCKS_FAIL_WITH.set(Some(errno));
    Restore
}

/// The file system (or kernel) offers no open-file-description locks.
pub(super) fn locks_unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOLCK | libc::EINVAL | libc::EOPNOTSUPP)
    )
}

fn flock_of(kind: libc::c_int, start: i64, len: i64) -> libc::flock {
    // SAFETY: an all-zero flock struct is a valid value of this plain C struct.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = start;
    fl.l_len = len;
    fl
}

/// Who still uses the stale queue file `f` (`None`: nobody, it may be replaced). Takes a
/// write lock on the whole file, which conflicts with every handle's shared lock and role
/// lock, and which the creator holds until it has unlinked the file: a handle that opens
/// the file meanwhile cannot take its shared lock, and retries on the new file.
fn live_holder(f: &File) -> io::Result<Option<&'static str>> {
    match ofd_lock(f, libc::F_WRLCK, 0, 0) {
        Ok(true) => return Ok(None),
        Ok(false) => {}
        // No record locks on this file system: nothing to tell, replaced as before.
        Err(e) if locks_unsupported(&e) => return Ok(None),
        Err(e) => return Err(e),
    }
    for (byte, role) in ROLE_BYTES {
        if ofd_held(f, byte, 1)? {
            return Ok(Some(role));
        }
    }
    Ok(Some("handle"))
}

impl QueueMem {
    /// Creates a fresh queue file at `path` (spec §1.2 rules). A stale queue file (no live
    /// handle), of any kind, capacity or item type, is replaced by an empty queue, and so
    /// is one whose creation never finished; one still open by a live handle, its creator
    /// included, is refused ([`QueueFileError::InUse`]), and one that another handle is
    /// creating or replacing right now too ([`QueueFileError::Locked`]). Any other
    /// non-empty file (somebody's data, a ring, a blackboard: a mistyped path) is refused
    /// and left as it was ([`QueueFileError::NotReplaced`]). The file's bytes are reserved
    /// (`fallocate`), so a full file system is an error here, never a SIGBUS later. On error
    /// no new file is left. The file's directory entry is made durable by the first
    /// [`QueueMem::flush`], not here.
    pub fn create(path: impl AsRef<Path>, geo: &QueueGeometry) -> Result<QueueMem, QueueFileError> {
        Self::create_with_role(path.as_ref(), geo, None).map(|(mem, _)| mem)
    }

    /// [`QueueMem::create`], taking the SPSC role lock `role` (its byte and name, see
    /// [`QueueMem::lock_role`]) before the magic is stored, when given: no handle can have
    /// attached yet, so the role is free, and should taking it fail, the file this call made
    /// is removed with nobody using it.
    pub(super) fn create_with_role(
        path: &Path,
        geo: &QueueGeometry,
        role: Option<(i64, &'static str)>,
    ) -> Result<(QueueMem, Option<RoleLock>), QueueFileError> {
        let too_large = || QueueFileError::geometry(Some(path), geo.too_large());
        let len = geo.total_len().ok_or_else(too_large)?;
        let map_len = usize::try_from(len).map_err(|_| too_large())?;
        // The same exclusive-creation protocol as ring files (spec §1.2): flock, inode
        // check, a stale file replaced by a fresh inode, 8 attempts. Only a queue file (or
        // one whose creation never finished) is stale: anything else is refused first, and
        // a queue is then refused while a live handle has it open.
        let refusal = |f: &File| match crate::file::FileKind::Queue
            .refuse(f)
            .map_err(|e| ("read", e))?
        {
            Some(foreign) => Ok(Some(foreign)),
            None => live_holder(f)
                .map(|h| h.map(crate::file::Refusal::InUse))
                .map_err(|e| ("fcntl", e)),
        };
        let f = crate::file::create_exclusive(path, 0o660, len, refusal).map_err(|e| {
            use crate::file::CreateError;
            match e {
                CreateError::Io { op, source } => io_err(path, op)(source),
                CreateError::Locked => locked_err(path),
                CreateError::NotRegular(found) => QueueFileError::NotRegularFile {
                    path: path.to_owned(),
                    found,
                },
                CreateError::InUse(holder) => QueueFileError::InUse {
                    path: path.to_owned(),
                    holder,
                },
                CreateError::Foreign { len, magic } => QueueFileError::NotReplaced {
                    path: path.to_owned(),
                    len,
                    magic,
                },
            }
        })?;
        let id = crate::sys::file_id(&f).map_err(io_err(path, "fstat"))?;
        // A half-made file is removed while we still hold its lock, as a ring's is.
        let cleanup_on_error = |e: QueueFileError| {
            crate::file::remove_if_ours(path, id);
            e
        };
        let mut map = map_file(&f, map_len, path)
            .map_err(io_err(path, "mmap"))
            .map_err(cleanup_on_error)?;
        let region = region_of(&mut map, path).map_err(cleanup_on_error)?;
        let abs_path = crate::file::absolute(path);
        let role = match role {
            Some((offset, name)) => {
                Some(lock_role_of(path, &abs_path, id, offset, name).map_err(cleanup_on_error)?)
            }
            None => None,
        };
        // SAFETY: `region` is the mapping just made of a fresh file under the creator's
        // lock: no other view of it exists yet (other processes' mappings only poll the
        // magic, stored last).
        let view = unsafe { QueueView::init(region, geo) }
            .map_err(|source| QueueFileError::Init {
                path: path.to_owned(),
                source,
            })
            .map_err(cleanup_on_error)?;
        let mem = QueueMem {
            map,
            view,
            path: Some(path.to_owned()),
            abs_path: Some(abs_path),
            id: Some(id),
            unfenced_notify: crate::sys::membarrier_registered(),
            dir_synced: AtomicBool::new(false),
            _lock: Some(f),
            at_open: AtOpen::NotAlone,
            guarded: true,
            wake_gates: Default::default(),
            side_dropped: AtomicBool::new(false),
        };
        Ok((mem, role))
    }

    /// Opens an existing queue file, with every attach check. The handle holds a shared
    /// lock on the file for its life, so that `create` refuses to replace it meanwhile.
    /// On a file system without record locks (`fcntl` fails with `ENOLCK`, `EINVAL` or
    /// `EOPNOTSUPP`) it opens without that lock, proves nothing and heals nothing, and
    /// [`QueueMem::is_guarded`] says false; any other failure of the lock is an error.
    pub fn open(path: impl AsRef<Path>, expect: QueueExpect) -> Result<QueueMem, QueueFileError> {
        let path = path.as_ref();
        let (f, id, guarded) = open_live(path)?;
        let len = f.metadata().map_err(io_err(path, "fstat"))?.len();
        let attach_err = |err| QueueFileError::Attach {
            path: path.to_owned(),
            err,
        };
        // An empty file cannot be mapped; anything longer goes to the core's checks.
        if len < 8 {
            return Err(attach_err(QueueAttachError::TooShort { len }));
        }
        let map_len = usize::try_from(len).map_err(|_| QueueFileError::Io {
            path: path.to_owned(),
            op: "mmap",
            source: io::Error::other(format!("a file of {len} bytes is too large to map")),
        })?;
        let mut map = map_file(&f, map_len, path).map_err(io_err(path, "mmap"))?;
        let region = region_of(&mut map, path)?;
        let view = QueueView::attach(region, expect).map_err(attach_err)?;
        let at_open = if guarded {
            reset_if_alone(&f, &view)
                .map_err(io_err(path, "fcntl"))?
                .map_err(attach_err)?
        } else {
            AtOpen::Unprovable
        };
        Ok(QueueMem {
            map,
            view,
            path: Some(path.to_owned()),
            abs_path: Some(crate::file::absolute(path)),
            id: Some(id),
            unfenced_notify: crate::sys::membarrier_registered(),
            dir_synced: AtomicBool::new(false),
            _lock: Some(f),
            at_open,
            guarded,
            wake_gates: Default::default(),
            side_dropped: AtomicBool::new(false),
        })
    }

    /// A queue in anonymous memory, for threads of one process.
    pub fn anonymous(geo: &QueueGeometry) -> Result<QueueMem, QueueFileError> {
        let anon = Path::new("anonymous");
        let len = geo
            .total_len()
            .and_then(|l| usize::try_from(l).ok())
            .ok_or_else(|| QueueFileError::geometry(None, geo.too_large()))?;
        let map =
            MmapMut::map_anon(len).map_err(|e| crate::file::size_failed("map", len as u64, e));
        let mut map = Mapped::unrecorded(map.map_err(io_err(anon, "mmap"))?);
        let region = region_of(&mut map, anon)?;
        // SAFETY: fresh anonymous memory, mapped just above: no other view of it exists yet.
        let view =
            unsafe { QueueView::init(region, geo) }.map_err(|source| QueueFileError::Init {
                path: anon.to_owned(),
                source,
            })?;
        Ok(QueueMem {
            map,
            view,
            path: None,
            abs_path: None,
            id: None,
            unfenced_notify: crate::sys::membarrier_registered(),
            dir_synced: AtomicBool::new(true),
            _lock: None,
            at_open: AtOpen::NotAlone,
            guarded: true,
            wake_gates: Default::default(),
            side_dropped: AtomicBool::new(false),
        })
    }

    /// The queue, for building the core's queue handles.
    ///
    /// # Safety
    /// [`QueueView`] is `Copy` and does not borrow the mapping: neither the returned view nor
    /// any copy of it may be used after this `QueueMem` is dropped, which unmaps the memory.
    /// The typed handles keep the `QueueMem` alive (an `Arc`) as long as their core handle.
    pub unsafe fn view(&self) -> &QueueView {
        &self.view
    }

    /// MPMC positions this handle healed when it opened the file as its only live handle:
    /// slots left stuck by producers or consumers that died mid-push or mid-pop.
    pub fn healed_at_open(&self) -> u64 {
        match self.at_open {
            AtOpen::Alone { healed, .. } => healed,
            AtOpen::NotAlone | AtOpen::Unprovable => 0,
        }
    }

    /// Whether the file system took this handle's record lock, so that `create` sees the
    /// handle and refuses to replace its file, and an open with no other live handle can
    /// prove that and heal. False only for a handle [`QueueMem::open`] made on a file system
    /// without record locks; true for `create` (its `flock` guards it) and for anonymous
    /// memory. An SPSC handle's role lock is told by the handle's own `is_guarded`.
    pub fn is_guarded(&self) -> bool {
        self.guarded
    }

    /// What the open proved of other handles on the file, and what it healed.
    pub(crate) fn at_open(&self) -> AtOpen {
        self.at_open
    }

    /// Records that an SPSC handle on this mapping was dropped. Only an anonymous channel
    /// (`spsc_channel`, `spsc_bytes_channel`) has two handles on one mapping, so the other
    /// one learns that its peer is gone for good: nothing can reach the queue through
    /// anonymous memory afterwards. (A file's handles each map it themselves, and a role
    /// given up there may be taken again by another process.)
    pub(super) fn mark_side_dropped(&self) {
        // SeqCst: before the wake that follows (`wait::wake_on`), so that a sleeper woken
        // by it, or one that reads the futex word it bumps, sees the mark on its re-check.
        self.side_dropped.store(true, Ordering::SeqCst);
    }

    /// True once [`QueueMem::mark_side_dropped`] ran: the peer of an anonymous channel is
    /// gone.
    pub(super) fn side_dropped(&self) -> bool {
        // Acquire: the peer's last pushes (or hand-backs) come before its mark, so a caller
        // that sees the mark and then looks at the queue sees them.
        self.side_dropped.load(Ordering::Acquire)
    }

    /// Whether this process's notifiers may skip the fence (membarrier registered).
    pub(super) fn unfenced_notify(&self) -> bool {
        self.unfenced_notify
    }

    /// The gate of this mapping's MPMC wakes of `side` (see `wait::notify_gated`).
    pub(super) fn wake_gate(&self, side: Side) -> &WakeGate {
        match side {
            Side::Data => &self.wake_gates[0],
            Side::Space => &self.wake_gates[1],
        }
    }

    /// The view, for this crate's typed handles, which keep the mapping alive in an `Arc`
    /// as long as their core handle (see [`QueueMem::view`]).
    #[inline(always)]
    pub(crate) fn queue(&self) -> &QueueView {
        &self.view
    }

    /// The queue's validated geometry.
    pub fn geometry(&self) -> &ringwire_core::queue::QueueGeometry {
        self.view.geometry()
    }

    /// The file, if the queue lives in one.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// A durability point for a queue file on a disk file system: writes the mapping back
    /// and waits for it (`msync(MS_SYNC)`), and on this handle's first flush also `fsync`s
    /// the file's directory, so that a newly created (or replacing) file is found at its
    /// path after a crash. After it returns, everything written to the queue before the
    /// call is on the disk (provided the storage honours cache flushes). Writes made later
    /// reach it in part and in any order until the next flush, so after a crash the file
    /// holds the flushed state with an arbitrary part of them applied (an index without
    /// its item, say); a flush while no handle pushes or pops leaves a consistent queue.
    ///
    /// Every queue file survives the exit or crash of the processes using it without a
    /// flush (the page cache keeps it). A queue on tmpfs (`/dev/shm`) lives in memory only
    /// and is lost when the machine crashes or restarts, flushed or not: there `flush` is
    /// cheap and makes nothing durable. A no-op for anonymous memory.
    ///
    /// # Errors
    /// An error names the queue's file, for a caller that flushes several: its text is
    /// `queue PATH: msync failed: …` (or `directory fsync failed`, when the sync of the
    /// file's directory failed: it can no longer be opened, say), and its kind is the OS
    /// error's. Its inner error ([`io::Error::get_ref`], downcast) is a
    /// [`QueueFileError::Io`] with the path as the handle was given it, the call, and the
    /// OS error, whose [`io::Error::raw_os_error`] is there (the outer error's is `None`).
    pub fn flush(&self) -> io::Result<()> {
        let (Some(path), Some(abs_path)) = (&self.path, &self.abs_path) else {
            return Ok(());
        };
        let named = |op| move |e: io::Error| io::Error::new(e.kind(), io_err(path, op)(e));
        self.map.flush().map_err(named("msync"))?;
        // Relaxed: a flag that only saves repeating an idempotent fsync.
        if !self.dir_synced.load(Ordering::Relaxed) {
            crate::file::sync_parent_dir(abs_path).map_err(named("directory fsync"))?;
            self.dir_synced.store(true, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Whether a flush of this handle has synced the file's directory entry (always true
    /// for anonymous memory).
    #[cfg(test)]
    pub(super) fn dir_synced(&self) -> bool {
        self.dir_synced.load(Ordering::Relaxed)
    }

    /// True when the path no longer names the mapped file (it was removed, or removed and
    /// created anew): this handle's queue is no longer the one at the path. Always false
    /// for anonymous memory.
    pub fn is_replaced(&self) -> bool {
        match (&self.abs_path, self.id) {
            (Some(path), Some(id)) => {
                !matches!(crate::sys::path_id(path), Ok(Some(now)) if now == id)
            }
            _ => false,
        }
    }

    /// Takes an exclusive per-role lock on the file (one byte at `offset`) through a new open
    /// file description, kept alive by the returned file; on a file system without record
    /// locks, none ([`RoleLock::Unguarded`]).
    pub(super) fn lock_role(
        &self,
        offset: i64,
        role: &'static str,
    ) -> Result<RoleLock, QueueFileError> {
        let (Some(path), Some(id)) = (&self.path, self.id) else {
            return Ok(RoleLock::Anonymous);
        };
        let abs_path = self.abs_path.as_ref().unwrap_or(path);
        lock_role_of(path, abs_path, id, offset, role)
    }
}

/// [`QueueMem::lock_role`] on the file `id` at `path` (`abs_path` made absolute).
fn lock_role_of(
    path: &Path,
    abs_path: &Path,
    id: (u64, u64),
    offset: i64,
    role: &'static str,
) -> Result<RoleLock, QueueFileError> {
    // By the absolute path: a change of the working directory since the open (another
    // thread's) leaves a relative one naming another file or none.
    let f = open_regular_rw(abs_path)?;
    // The lock must land on the mapped file, not on one put at the path since.
    if crate::sys::file_id(&f).map_err(io_err(path, "fstat"))? != id {
        return Err(QueueFileError::Io {
            path: path.to_owned(),
            op: "open",
            source: io::Error::other("the path now names another file than the one mapped"),
        });
    }
    let t0 = std::time::Instant::now();
    let deadline = t0 + PROBE_WAIT;
    loop {
        match ofd_lock(&f, libc::F_WRLCK, offset, 1) {
            Ok(true) => return Ok(RoleLock::Held { _file: f }),
            Ok(false) => {}
            // As `open_live` does (and an MPMC handle): the handle goes on without the
            // guard, and says so (`is_guarded`).
            Err(e) if locks_unsupported(&e) => return Ok(RoleLock::Unguarded),
            Err(e) => return Err(io_err(path, "fcntl")(e)),
        }
        // A lock from byte 0 is not a role holder's (each locks its own byte) but a
        // handle proving itself alone on the file (`reset_if_alone`), for the length of
        // its probe: wait for it, or a handle opened beside a first open would report its
        // role taken. No conflicting lock left by the time we look: the probe ended
        // between the two calls, so try again. A role holder's lock is waited for
        // [`ROLE_GRACE`]: it may be a handle closed an instant ago whose descriptor a
        // child forked meanwhile still holds (until it execs).
        let probe = match ofd_conflict(&f, libc::F_WRLCK, offset, 1) {
            Ok(Some(held)) => held.l_start == LIVE_BYTE || t0.elapsed() < ROLE_GRACE,
            Ok(None) => true,
            Err(_) => false,
        };
        if !probe || std::time::Instant::now() >= deadline {
            return Err(QueueFileError::RoleTaken {
                path: path.to_owned(),
                role,
            });
        }
        crate::sys::sleep(std::time::Duration::from_millis(1));
    }
}

/// The error for a creation lock found held at `path`. A creator that has finished
/// initialising the file (the magic is not 0) holds that lock for its whole life: a queue
/// file is then in use by its creator, and any other file (a live ring's or blackboard's,
/// whose producer holds the lock too) is no queue, refused as a stale one would be. One
/// still initialising it (magic 0, or a file too short to have one) or replacing a stale
/// file there (its write lock over byte 0, see `live_holder`) is a creation in progress.
fn locked_err(path: &Path) -> QueueFileError {
    match finished_magic(path) {
        Some((len, magic)) if q::QueueKind::from_magic(magic).is_none() => {
            QueueFileError::NotReplaced {
                path: path.to_owned(),
                len,
                magic: Some(magic),
            }
        }
        Some(_) => QueueFileError::InUse {
            path: path.to_owned(),
            holder: "creator",
        },
        None => QueueFileError::Locked(path.to_owned()),
    }
}

/// The length and the non-zero magic (in the host's byte order) of the file at `path`,
/// unless its magic is 0 or a creator is replacing it.
fn finished_magic(path: &Path) -> Option<(u64, u64)> {
    let f = crate::file::open_regular(path, OpenOptions::new().read(true)).ok()?;
    let mut magic = [0u8; 8];
    f.read_exact_at(&mut magic, q::qhdr::MAGIC as u64).ok()?;
    let magic = u64::from_ne_bytes(magic);
    // A read lock conflicts only with a write lock: the replacing creator's, not the live
    // handles' shared ones (the role locks lie past byte 0).
    if magic == 0 || matches!(ofd_held_as(&f, libc::F_RDLCK, LIVE_BYTE, 1), Ok(true)) {
        return None;
    }
    Some((f.metadata().ok()?.len(), magic))
}

/// When the opener's file `f` (which holds the shared [`LIVE_BYTE`] lock) proves to be the
/// only live handle on the file, resets both waiter counts of the queue in `view` to 0 and,
/// in an MPMC queue, heals every stuck slot; returns the number of positions healed.
///
/// Why the counts: a sleeper counts itself in `data_waiters` / `space_waiters` and uncounts itself
/// when its sleep ends; one that dies asleep (SIGKILL, or a process whose `main` returns
/// while a thread waits) never does, and the stale count, durable in the file, would make
/// every later push or pop in every process bump the futex word and issue a `FUTEX_WAKE`.
/// With no other live handle, nobody can be asleep, so every count is stale.
///
/// Why the slots: a producer killed between claiming a position and publishing it, or a
/// consumer killed between taking a position and freeing its slot, leaves a stuck slot
/// (`next_stuck_slot`) that stops every consumer (or, a lap later, every producer) for
/// good, and `heal_stuck_slot` asks its caller to establish that the holder is dead. With
/// no other live handle every holder is dead, so the proof below is that confirmation: a
/// queue whose processes all exited, one of them mid-push, is drained after a restart
/// past the lost item instead of stopping at it. Items a dead producer never published
/// and items a dead consumer took are lost with them; healing loses nothing else.
///
/// The proof holds the count still: a write lock on the whole file (taken by converting
/// our shared lock, so there is no moment without one) succeeds only when no other open
/// file description holds any lock on it (every opener's shared lock, every SPSC role
/// lock), and while we hold it no handle can open the file (its shared lock is refused and
/// `open_live` retries) nor replace it (`live_holder` finds it held). The creator holds only
/// its `flock`, for its life, so that is tried too. A dead process's locks are released
/// only once all its threads are gone, so none of them can still touch a count.
///
/// While the probe runs (microseconds; one pass over the slots in an MPMC file, which it
/// heals), a concurrent `open` retries every millisecond (for up to [`OPEN_WAIT`]), an
/// SPSC role being taken by another handle's open waits for it (`lock_role`; a creator
/// takes its role before the magic, when no open can probe yet), and a concurrent `create` of the path is refused, as it would be
/// anyway (this handle has the file open), but may name the file as being created
/// ([`QueueFileError::Locked`]) or its holder as a "producer" (the whole-file lock covers
/// the role bytes).
///
/// A dead sleeper's count in a queue that other live handles keep open is not cleared
/// here (a live sleeper cannot be told from a dead one): it costs each push (or pop) one
/// needless `FUTEX_WAKE` until the last handle closes and the file is opened again, or,
/// for an SPSC queue, until the next handle takes the dead sleeper's role (see
/// `spsc_bytes`). The MPMC handles ration those wakes once they have woken nobody for
/// 100 ms (`wait::notify_gated`).
///
/// An MPMC queue whose cursors and stamps no sequence of protocol steps leaves (checked at
/// rest, `check_stamps_at_rest`: cursors and slot pages from different times after a machine
/// crash, say) is not healed: the inner error refuses the open, since healing it would
/// wedge the queue or deliver garbage.
fn reset_if_alone(f: &File, view: &QueueView) -> io::Result<Result<AtOpen, QueueAttachError>> {
    // The conversion back below keeps the lock on bytes from LIVE_BYTE on.
    const _: () = assert!(LIVE_BYTE == 0);
    match ofd_lock(f, libc::F_WRLCK, LIVE_BYTE, 0) {
        Ok(true) => {}
        // Another handle holds a lock: not alone (our shared lock is unchanged).
        Ok(false) => return Ok(Ok(AtOpen::NotAlone)),
        // No record locks here: `open_live` went on without them, nothing can be proved.
        Err(e) if locks_unsupported(&e) => return Ok(Ok(AtOpen::Unprovable)),
        Err(e) => return Err(e),
    }
    let mut found = Ok(AtOpen::NotAlone);
    if crate::sys::try_lock_exclusive(f).is_ok() {
        // Relaxed: the locks order these stores before any later handle's use of the
        // counts (its lock waits for our release, a system call on both sides).
        view.data_waiters().store(0, Ordering::Relaxed);
        view.space_waiters().store(0, Ordering::Relaxed);
        found = heal_all_stuck(view).map(|(healed, refused)| AtOpen::Alone { healed, refused });
        crate::sys::unlock(f);
    }
    // Back to the shared lock on LIVE_BYTE alone: the tail first, so that what is held in
    // between still starts at LIVE_BYTE (a role locker takes only such a lock for a probe
    // and waits for it; a write lock from byte 1 on would read as a role holder's), then the
    // conversion, which nobody else can hold a conflicting lock against.
    ofd_lock(f, libc::F_UNLCK, LIVE_BYTE + 1, 0)?;
    ofd_lock(f, libc::F_RDLCK, LIVE_BYTE, 1)?;
    Ok(found)
}

/// Heals every stuck slot of the MPMC queue in `view` (none in an SPSC queue) and returns
/// how many, with the first position the heal refused; for [`reset_if_alone`], whose
/// caller has proved every holder dead. Stops at that position, which only a corrupt file
/// can cause (no live handle moves a stamp meanwhile): that slot stays as it is, for `stat`
/// to show. Heals nothing, with the error, when a stamp is of a lap the cursors rule out
/// (`check_stamps_at_rest`).
#[allow(clippy::type_complexity)]
fn heal_all_stuck(
    view: &QueueView,
) -> Result<(u64, Option<(StuckSlot, HealError)>), QueueAttachError> {
    let Ok(q) = q::MpmcQueue::new(*view) else {
        return Ok((0, None));
    };
    q.check_stamps_at_rest()?;
    let mut healed = 0;
    let mut from = 0;
    // Each heal moves `from` past its position, and stuck positions lie within two laps.
    while let Some(stuck) = q.next_stuck_slot(from) {
        if let Err(e) = q.heal_stuck_slot(stuck) {
            return Ok((healed, Some((stuck, e))));
        }
        healed += 1;
        from = stuck.pos + 1;
    }
    Ok((healed, None))
}

/// Opens the queue file at `path` and takes the shared [`LIVE_BYTE`] lock on it, retrying
/// while a write lock refuses ours (a creator replacing the file, until its unlink; another
/// opener proving itself alone, for its probe, which passes over every slot of an MPMC
/// file) for up to [`OPEN_WAIT`], and up to [`OPEN_ATTEMPTS`] times when the path names
/// another inode than the one opened (replaced since). The flag is false when the file
/// system has no record locks: the file was opened without the lock.
fn open_live(path: &Path) -> Result<(File, (u64, u64), bool), QueueFileError> {
    let deadline = std::time::Instant::now() + OPEN_WAIT;
    let mut replaced = 0;
    while replaced < OPEN_ATTEMPTS {
        let f = open_regular_rw(path)?;
        let guarded = match ofd_lock(&f, libc::F_RDLCK, LIVE_BYTE, 1) {
            Ok(true) => true,
            Ok(false) if std::time::Instant::now() < deadline => {
                crate::sys::sleep(std::time::Duration::from_millis(1));
                continue;
            }
            Ok(false) => break,
            // No record locks on this file system: the handle works without the guard.
            Err(e) if locks_unsupported(&e) => false,
            Err(e) => return Err(io_err(path, "fcntl")(e)),
        };
        let id = crate::sys::file_id(&f).map_err(io_err(path, "fstat"))?;
        if crate::sys::path_id(path).map_err(io_err(path, "stat"))? == Some(id) {
            return Ok((f, id, guarded));
        }
        replaced += 1;
    }
    Err(QueueFileError::Locked(path.to_owned()))
}

/// Maps `len` bytes of `f` (named `path`), recorded for the CLI's SIGBUS handler.
fn map_file(f: &File, len: usize, path: &Path) -> io::Result<Mapped<MmapMut>> {
    // SAFETY: the file is a queue file that other parties access only through ringwire's
    // atomic protocols (Region's contract); it is never truncated while mapped.
    let map = unsafe { memmap2::MmapOptions::new().len(len).map_mut(f) }
        .map_err(|e| crate::file::size_failed("map", len as u64, e))?;
    let (base, len) = (map.as_ptr(), map.len());
    Ok(Mapped::record(path, map, base, len))
}

fn region_of(map: &mut MmapMut, path: &Path) -> Result<Region, QueueFileError> {
    let len = map.len();
    // SAFETY: the mapping lives as long as the QueueMem that owns both it and every view of
    // this region; all accesses go through atomics.
    unsafe { Region::from_raw_parts(map.as_mut_ptr(), len) }
        .map_err(|e| io_err(path, "mmap")(io::Error::other(e)))
}
