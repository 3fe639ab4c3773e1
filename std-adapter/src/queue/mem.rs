//! [`QueueMem`]: the mapping a queue lives in (a file created by the spec §1.2 rules, or
//! anonymous memory), msync flush, and the per-role file locks.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use memmap2::MmapMut;
use ringwire_core::Region;
use ringwire_core::queue::{
    QueueAttachError, QueueExpect, QueueGeometry, QueueGeometryError, QueueInitError, QueueView,
};

/// Why a queue file or mapping cannot be set up.
#[derive(Debug)]
#[non_exhaustive]
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
    /// A typed SPSC handle was asked to attach to a queue of byte strings (made by
    /// [`super::SpscBytesProducer`]), whose items keep their own lengths.
    NotFixedSize(PathBuf),
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
            QueueFileError::NotFixedSize(p) => write!(
                f,
                "queue {}: holds byte strings of their own lengths, not fixed-size items \
                 (open it with SpscBytesConsumer / SpscBytesProducer)",
                p.display()
            ),
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
    // This process registered for membarrier: its notifiers may skip the fence.
    unfenced_notify: bool,
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
        // The same exclusive-creation protocol as ring files (spec §1.2): flock, inode
        // check, a stale file replaced by a fresh inode, 8 attempts.
        let f = crate::file::open_exclusive(path, 0o660, len).map_err(|e| match e {
            crate::Error::ProducerAlreadyExists { .. } => QueueFileError::Locked(path.to_owned()),
            other => QueueFileError::Io(io::Error::other(other.to_string())),
        })?;
        let mut map = map_file(&f, len as usize)?;
        let region = region_of(&mut map)?;
        let view = QueueView::init(region, geo).map_err(QueueFileError::Init)?;
        Ok(QueueMem {
            map,
            view,
            path: Some(path.to_owned()),
            unfenced_notify: crate::sys::membarrier_registered(),
            _lock: Some(f),
        })
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
            unfenced_notify: crate::sys::membarrier_registered(),
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
            unfenced_notify: crate::sys::membarrier_registered(),
            _lock: None,
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

    /// Whether this process's notifiers may skip the fence (membarrier registered).
    pub(super) fn unfenced_notify(&self) -> bool {
        self.unfenced_notify
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
    pub(super) fn lock_role(
        &self,
        offset: i64,
        role: &'static str,
    ) -> Result<Option<File>, QueueFileError> {
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
