//! Ring files: creating one exactly as spec §1.2 (flock for the producer's life, a fresh inode
//! for a stale ring, magic written last, unlink on drop) and attaching as §1.3. Two steps
//! differ: a non-empty file at the path that is not a ring (nor a ring whose creation never
//! finished) is refused and left as it is, where ringfire unlinks whatever it finds there.
//! And a `flock` that fails other than on a lock held elsewhere (a file system without
//! locks) is an I/O error naming `flock`, where ringfire reports *ProducerAlreadyExists*.
//! A new file's bytes are reserved with `posix_fallocate`, so a full tmpfs is an error at
//! creation rather than a SIGBUS at the first store; no open waits on a FIFO (`O_NONBLOCK`,
//! then only a regular file is accepted).
//!
//! The whole file is mapped `MAP_SHARED` with memmap2's raw mapping and handed to the core as
//! a [`Region`]; from then on every access goes through the core's atomic word accessors.
//! The exclusive creator never shrinks a ring file (a stale ring is unlinked and replaced,
//! never truncated), so a mapping stays valid for as long as it is held. The legacy
//! non-exclusive mode ([`CreateOptions::exclusive_lock`] `false`) truncates the ring it
//! reuses, as ringfire's does; that truncation, or any other process's, makes the next
//! access of the ring's earlier mappings a SIGBUS. Every mapping made here is recorded (see
//! `map_file`) for the `ringwire` binary's handler, which then names the file
//! (`cli::sigbus`).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use memmap2::{MmapOptions, MmapRaw};
use ringwire_core::layout::{RING_MAGIC, RingHeader, hdr};
use ringwire_core::queue::{QueueGeometry, QueueHeader, QueueKind, qhdr};
use ringwire_core::{AttachError, Expect, Geometry, Region, RingView};

use crate::cli::sigbus::Mapped;
use crate::error::{Error, Result};
use crate::sys;

/// Attempts of the create loop before giving up (spec §1.2 step 3).
const CREATE_ATTEMPTS: usize = 8;

/// What a producer does with its file when it is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CleanupMode {
    /// Unlink the path while still holding the lock (the default, spec §1.2 step 6).
    #[default]
    UnlinkOnDrop,
    /// Leave the file in place.
    Persistent,
}

/// How a ring file is created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CreateOptions {
    /// File mode passed to `open` (the umask applies; nothing calls `fchmod`). Default 0o660.
    pub mode: u32,
    /// What happens to the file on drop.
    pub cleanup: CleanupMode,
    /// Exclusive-producer protocol with `flock` (default). `false` is ringfire's legacy
    /// mode: truncate and reuse the path, with no exclusive lock. Unlike ringfire's, it
    /// holds a shared flock and refuses (`ProducerAlreadyExists`) a file whose exclusive
    /// producer lives, whose ring the truncation would pull from under it (a SIGBUS), and,
    /// as the exclusive creator does, a file that is not a ring (`NotReplaced`).
    pub exclusive_lock: bool,
}

impl Default for CreateOptions {
    fn default() -> Self {
        CreateOptions {
            mode: 0o660,
            cleanup: CleanupMode::UnlinkOnDrop,
            exclusive_lock: true,
        }
    }
}

struct Owner {
    cleanup: CleanupMode,
    locked: bool,
    /// The process that created the file (or was told to clean it up): while it lives,
    /// only it unlinks and unlocks on drop (see `Drop for RingFile`).
    pid: u32,
    /// Its incarnation, so that a later process given the same pid is not taken for it.
    incarnation: Option<ringwire_core::broadcast::registry::Incarnation>,
}

/// A ring file mapped read-write: a producer's (created, locked) or a consumer's (attached).
pub struct RingFile {
    view: RingView,
    map: Mapped<MmapRaw>,
    file: File,
    id: (u64, u64),
    path: PathBuf,
    /// `path` made absolute at open, for the checks of what the path names: a change of
    /// the working directory since must not look like a replaced ring.
    abs_path: PathBuf,
    owner: Option<Owner>,
    /// The wakes of [`RingFile::wake_after_publish`].
    waker: crate::wait::FutexWake,
}

// The core's atomics must be real hardware atomics when two processes share them: a
// lock-based fallback would lock only within one process.
const _: () = assert!(portable_atomic::AtomicU64::is_always_lock_free());
const _: () = assert!(portable_atomic::AtomicU32::is_always_lock_free());

/// `path` made absolute against the working directory now (as given, should that fail).
pub(crate) fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The error for `file` (named `path`), `len` bytes long, opened as a ring but shorter than
/// a ring's header: a short ring ([`AttachError::TooShort`]), unless it starts with a
/// consumer offset file's magic. A 64-byte offset file (spec §13) lies beside the rings in
/// `/dev/shm`, and given for a ring it is named by its magic ([`Error::BadFileMagic`]), as a
/// queue or a blackboard is, not taken for a ring cut short.
pub(crate) fn short_ring(path: &Path, file: &File, len: u64) -> Error {
    offset_file_given_for(path, file, "ring")
        .unwrap_or_else(|| Error::attach(path, AttachError::TooShort { len }))
}

/// [`Error::BadFileMagic`] naming a consumer offset file, when `file` (named `path`, opened
/// as a `kind` and found shorter than its header) starts with that file's magic: the
/// blackboard's and the read-only queue's opens, as [`short_ring`].
pub(crate) fn offset_file_given_for(path: &Path, file: &File, kind: &'static str) -> Option<Error> {
    use std::os::unix::fs::FileExt;
    let mut m = [0u8; 8];
    // In the host's byte order, as the offset file's writers store it.
    (file.read_exact_at(&mut m, 0).is_ok()
        && u64::from_ne_bytes(m) == crate::checkpoint::CHECKPOINT_MAGIC)
        .then(|| Error::BadFileMagic {
            path: path.to_path_buf(),
            kind,
            found: crate::checkpoint::CHECKPOINT_MAGIC,
        })
}

/// Maps the whole of `file` (named `path`), recorded for the CLI's SIGBUS handler.
pub(crate) fn map_file(
    path: &Path,
    file: &File,
    read_only: bool,
) -> Result<(Mapped<MmapRaw>, Region)> {
    let meta = file.metadata().map_err(|e| Error::io(path, "fstat", e))?;
    if !meta.is_file() {
        return Err(Error::NotRegularFile {
            path: path.to_path_buf(),
            found: type_name(meta.file_type()),
        });
    }
    let len = meta.len();
    if len < hdr::SIZE as u64 {
        return Err(short_ring(path, file, len));
    }
    let ulen = usize::try_from(len).map_err(|_| Error::FileTooLarge {
        path: path.to_path_buf(),
        len,
    })?;
    let mut opts = MmapOptions::new();
    opts.len(ulen);
    let map = if read_only {
        opts.map_raw_read_only(file)
    } else {
        opts.map_raw(file)
    }
    .map_err(|e| Error::io(path, "mmap", e))?;
    let (base, len) = (map.as_ptr(), map.len());
    let map = Mapped::record(path, map, base, len);
    // SAFETY: the mapping is `ulen` bytes, page-aligned, and lives in the returned MmapRaw,
    // which every owner of the Region keeps alive alongside it; all accesses are atomic. A
    // read-only mapping is only wrapped by ReadOnlyRing, which issues loads and no stores,
    // and by blackboard::check_file, whose Blackboard::attach only loads the header.
    let region = unsafe { Region::from_raw_parts(map.as_mut_ptr(), map.len()) }.map_err(|e| {
        Error::Region {
            path: path.to_path_buf(),
            source: e,
        }
    })?;
    Ok((map, region))
}

/// Refuses an empty path by name: `open("")` fails with `ENOENT`, whose message ("No such
/// file or directory", with no path to show) does not say what is wrong.
pub(crate) fn not_empty(path: &Path, kind: &str) -> Result<()> {
    if path.as_os_str().is_empty() {
        return Err(Error::InvalidArgument {
            path: PathBuf::new(),
            what: format!("the {kind} file's path is empty"),
        });
    }
    Ok(())
}

/// Opens `path` with `opts` and `O_NONBLOCK`, and refuses anything but a regular file.
/// Without `O_NONBLOCK` a read-only open of a FIFO waits for a writer, forever; for a regular
/// file the flag changes nothing (reads, writes, locks and mappings behave the same).
pub(crate) fn open_regular(path: &Path, opts: &mut OpenOptions) -> Result<File> {
    let file = opts
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| Error::io(path, "open", e))?;
    let meta = file.metadata().map_err(|e| Error::io(path, "fstat", e))?;
    if !meta.is_file() {
        return Err(Error::NotRegularFile {
            path: path.to_path_buf(),
            found: type_name(meta.file_type()),
        });
    }
    Ok(file)
}

/// What a file of type `t` is, for a message: "a directory", "a FIFO", "a character
/// device"… (`fstat` follows symlinks, so "a symlink" shows only from `lstat`).
pub(crate) fn type_name(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_file() {
        "a regular file"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_symlink() {
        "a symlink"
    } else {
        "a file of unknown type"
    }
}

/// A call could not `verb` (reserve, map) `len` bytes: `posix_fallocate` of a new file's
/// bytes, an `mmap` too large for the memory or the address space.
#[derive(Debug)]
struct SizeFailed {
    verb: &'static str,
    len: u64,
    os: io::Error,
}

impl std::fmt::Display for SizeFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot {} {} bytes: {}", self.verb, self.len, self.os)
    }
}

// No `source`: the Display above already includes the OS error.
impl std::error::Error for SizeFailed {}

/// `os`, the error of a call that could not `verb` `len` bytes, with that length in its
/// text (a size the caller chose, such as a queue's capacity, shows what to change) and
/// its kind kept.
pub(crate) fn size_failed(verb: &'static str, len: u64, os: io::Error) -> io::Error {
    io::Error::new(os.kind(), SizeFailed { verb, len, os })
}

/// Sizes a new, empty file to `len` bytes and reserves them. `ftruncate` alone reserves
/// nothing on tmpfs: the first store to a page the file system has no room for is a
/// SIGBUS, so the space is claimed here, where running out is an error (`ENOSPC`). A file
/// system that cannot reserve (`EOPNOTSUPP`, `EINVAL`) keeps the sparse file, as before.
/// On failure, the operation that failed and its error.
pub(crate) fn size_and_reserve(file: &File, len: u64) -> Result<(), (&'static str, io::Error)> {
    file.set_len(len).map_err(|e| ("ftruncate", e))?;
    reserve(file, len).map_err(|e| ("fallocate", e))
}

/// Reserves the first `len` bytes of `file` (`posix_fallocate`), which is at least that
/// long: the space of pages already written is claimed again for nothing, that of holes is
/// claimed now, so that a later store into the mapping finds it (see [`size_and_reserve`]).
/// A file system that cannot reserve (`EOPNOTSUPP`, `EINVAL`) is left as it is.
pub(crate) fn reserve(file: &File, len: u64) -> io::Result<()> {
    fallocate(file, len).map(drop)
}

/// Makes `file` at least `len` bytes long, with its first `len` bytes reserved, and never
/// shorter: `posix_fallocate` extends the file only once it has the space, so on failure
/// (`ENOSPC`) the length is what it was. For a file other processes may have sized and
/// mapped meanwhile (a checkpoint found empty), which a `ftruncate` back to its old length
/// would make a SIGBUS at their next access. A file system that cannot reserve
/// (`EOPNOTSUPP`, `EINVAL`) gets the length alone, by a `ftruncate` only while the file is
/// shorter. On failure, the operation that failed and its error.
pub(crate) fn grow_and_reserve(file: &File, len: u64) -> Result<(), (&'static str, io::Error)> {
    if fallocate(file, len).map_err(|e| ("fallocate", e))? {
        return Ok(());
    }
    if file.metadata().map_err(|e| ("fstat", e))?.len() < len {
        file.set_len(len).map_err(|e| ("ftruncate", e))?;
    }
    Ok(())
}

/// `posix_fallocate` of the first `len` bytes of `file`: `true` once they are reserved (the
/// file at least `len` bytes long), `false` for a length of 0 or beyond `off_t`, or on a
/// file system that cannot reserve (`EOPNOTSUPP`, `EINVAL`), which leaves the file as it is.
fn fallocate(file: &File, len: u64) -> io::Result<bool> {
    // A length beyond off_t cannot be a file's (set_len refuses it).
    let Ok(off_len) = libc::off_t::try_from(len) else {
        return Ok(false);
    };
    if off_len == 0 {
        return Ok(false);
    }
    loop {
        // SAFETY: posix_fallocate only reads the descriptor number, which `file` keeps open.
        let r = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, off_len) };
        match r {
            0 => return Ok(true),
            libc::EINTR => continue,
            libc::EOPNOTSUPP | libc::EINVAL => return Ok(false),
            errno => {
                let os = io::Error::from_raw_os_error(errno);
                return Err(size_failed("reserve", len, os));
            }
        }
    }
}

/// `fsync` of the directory holding `path`, so that the file's directory entry (a new file,
/// or one that replaced another) is still there after a crash of the machine: syncing a
/// file's data does not sync the entry that names it. A file system that cannot sync a
/// directory (`EINVAL`) is left as it is.
pub(crate) fn sync_parent_dir(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let d = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(dir)?;
    match d.sync_all() {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(()),
        r => r,
    }
}

/// Unlinks the file `path` names if it is the file `id`: a half-made file of ours, or a
/// producer's file at its drop, is removed; a file someone else has put at the path since is
/// never touched. Through a symbolic link, the file it points to is removed and the link
/// left as it was before the file was created: unlinking the link instead left the file,
/// which nothing names at its path any more and no producer removes, in `/dev/shm` for good.
pub(crate) fn remove_if_ours(path: &Path, id: (u64, u64)) {
    if matches!(sys::path_id(path), Ok(Some(now)) if now == id)
        && let Some(file) = resolved(path)
    {
        let _ = std::fs::remove_file(file);
    }
}

/// `path` with every symbolic link resolved: the path whose unlink removes the file `path`
/// names. `None` when there is no such file any more (removed since it was looked at):
/// through a link, unlinking the path as given would remove the link. Should resolving fail
/// otherwise, the path as given.
fn resolved(path: &Path) -> Option<PathBuf> {
    match std::fs::canonicalize(path) {
        Ok(p) => Some(p),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(_) => Some(path.to_path_buf()),
    }
}

/// The file's length and its first 8 bytes as a little-endian word (`None` when shorter).
pub(crate) fn len_and_magic(file: &File) -> std::io::Result<(u64, Option<u64>)> {
    use std::os::unix::fs::FileExt;
    let len = file.metadata()?.len();
    let mut m = [0u8; 8];
    let magic = match file.read_exact_at(&mut m, 0) {
        // In the host's byte order, as the writers store it.
        Ok(()) => Some(u64::from_ne_bytes(m)),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => None,
        Err(e) => return Err(e),
    };
    Ok((len, magic))
}

/// Whether every byte of `file`'s first `len` bytes is zero. Only its data is read: a hole
/// reads as zeros, and a sparse file far larger than memory is mostly holes.
fn all_zero(file: &File, len: u64) -> std::io::Result<bool> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; 64 << 10];
    let mut at = 0u64;
    while at < len {
        let Some((from, to)) = data_extent(file, at, len)? else {
            break;
        };
        at = from;
        while at < to {
            let want = buf
                .len()
                .min(usize::try_from(to - at).unwrap_or(usize::MAX));
            let n = file.read_at(&mut buf[..want], at)?;
            if n == 0 {
                return Ok(true);
            }
            if buf[..n].iter().any(|&b| b != 0) {
                return Ok(false);
            }
            at += n as u64;
        }
    }
    Ok(true)
}

/// The next run of data in `file` at or after `at`, up to `len`, as `(from, to)`; `None`
/// when only holes remain. A file system without `SEEK_DATA` gives the rest of the file.
fn data_extent(file: &File, at: u64, len: u64) -> std::io::Result<Option<(u64, u64)>> {
    use std::os::fd::AsRawFd;
    let seek = |whence, from: u64| -> std::io::Result<Option<u64>> {
        let Ok(off) = libc::off_t::try_from(from) else {
            return Ok(None);
        };
        // SAFETY: lseek on a descriptor this function borrows; it moves only the file
        // offset, which nothing here relies on (reads are positioned).
        let r = unsafe { libc::lseek(file.as_raw_fd(), off, whence) };
        if r >= 0 {
            return Ok(Some(r as u64));
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            // No data at or after `from`.
            Some(libc::ENXIO) => Ok(None),
            _ => Err(e),
        }
    };
    let from = match seek(libc::SEEK_DATA, at) {
        Ok(Some(from)) => from,
        Ok(None) => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return Ok(Some((at, len))),
        Err(e) => return Err(e),
    };
    if from >= len {
        return Ok(None);
    }
    let to = match seek(libc::SEEK_HOLE, from) {
        Ok(Some(to)) => to.min(len),
        Ok(None) => len,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => len,
        Err(e) => return Err(e),
    };
    Ok(Some((from, to.max(from + 1).min(len))))
}

/// Why [`create_exclusive`] failed; the ring and the queue side name the file in their own
/// error types.
#[derive(Debug)]
pub(crate) enum CreateError {
    /// A system call failed.
    Io {
        /// The operation (`open`, `fstat`, `ftruncate`, `fallocate`, …).
        op: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// Another live creator holds the flock (or every attempt raced). A `flock` that fails
    /// otherwise is [`CreateError::Io`].
    Locked,
    /// The path names something other than a regular file: what it is ([`type_name`]).
    NotRegular(&'static str),
    /// The stale file is still open by a live handle (`in_use` said who).
    InUse(&'static str),
    /// The file at the path is not of the kind being created (nor one whose creation never
    /// finished): somebody's data, left in place.
    Foreign {
        /// Its length.
        len: u64,
        /// Its first 8 bytes, when it has 8.
        magic: Option<u64>,
    },
}

/// Why [`create_exclusive`]'s check of a stale file refuses to replace it.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// A live handle still uses it (who).
    InUse(&'static str),
    /// It is not a file of the kind being created.
    Foreign {
        /// Its length.
        len: u64,
        /// Its first 8 bytes, when it has 8.
        magic: Option<u64>,
    },
}

/// The spec §1.2 creation protocol: `O_CREAT` without `O_TRUNC`, a non-blocking exclusive
/// flock, the inode checked against the path, a stale file (size ≠ 0, its lock free)
/// replaced by a fresh inode, up to 8 attempts; the new file sized to `total` and reserved.
/// Before a stale file is unlinked, `in_use` may refuse the replacement (`Some`): a live
/// handle still uses it, or it is not a file of the kind being created; whatever lock it
/// takes on the file is held until the unlink. Its error names the operation that failed
/// (`read` of the file, `fcntl` of a lock).
/// On error no file of this call is left at the path, except the empty file `open` may
/// have created when `flock` itself fails (another creator may be about to lock it).
pub(crate) fn create_exclusive(
    path: &Path,
    mode: u32,
    total: u64,
    in_use: impl Fn(&File) -> Result<Option<Refusal>, (&'static str, io::Error)>,
) -> Result<File, CreateError> {
    let io = |op| move |source| CreateError::Io { op, source };
    for _ in 0..CREATE_ATTEMPTS {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(mode)
            // Never wait in open: whatever is not a regular file is refused below.
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(io("open"))?;
        let t = file.metadata().map_err(io("fstat"))?.file_type();
        if !t.is_file() {
            return Err(CreateError::NotRegular(type_name(t)));
        }
        if let Err(e) = sys::try_lock_exclusive(&file) {
            // Only a lock held by another open file is a producer. Any other failure (a file
            // system without flock: NFS without its lock daemon gives ENOLCK) is said as it
            // is, where ringfire reports a producer that does not exist.
            if e.kind() == io::ErrorKind::WouldBlock {
                return Err(CreateError::Locked);
            }
            return Err(CreateError::Io {
                op: "flock",
                source: e,
            });
        }
        let mine = sys::file_id(&file).map_err(io("fstat"))?;
        match sys::path_id(path).map_err(io("stat"))? {
            Some(id) if id == mine => {}
            _ => continue, // the path was replaced meanwhile: retry on the new one
        }
        // Read under the lock: a creator that held it may have sized the file meanwhile.
        let len = file.metadata().map_err(io("fstat"))?.len();
        if len != 0 {
            // A stale file of a dead creator (we hold its lock): replace it with a fresh
            // inode so readers still mapping the old one see a frozen, consistent file.
            match in_use(&file).map_err(|(op, source)| CreateError::Io { op, source })? {
                None => {}
                Some(Refusal::InUse(holder)) => return Err(CreateError::InUse(holder)),
                Some(Refusal::Foreign { len, magic }) => {
                    return Err(CreateError::Foreign { len, magic });
                }
            }
            // Through a symbolic link, the stale file itself, so that the retry creates the
            // new one where the link points and the old one does not linger unnamed. One
            // that someone else removed since the check (a cleanup script, a handle's
            // UnlinkOnDrop) is gone already: the retry creates the new one all the same.
            if let Some(stale) = resolved(path)
                && let Err(e) = std::fs::remove_file(stale)
                && e.kind() != io::ErrorKind::NotFound
            {
                return Err(CreateError::Io {
                    op: "unlink",
                    source: e,
                });
            }
            continue;
        }
        if let Err((op, source)) = size_and_reserve(&file, total) {
            // Unlinked while we still hold the lock, so no other creator owns it yet.
            remove_if_ours(path, mine);
            return Err(CreateError::Io { op, source });
        }
        return Ok(file);
    }
    Err(CreateError::Locked)
}

/// What a creator makes, and so which stale files it may replace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FileKind {
    /// A ring (spec §1.2).
    Ring,
    /// A blackboard (spec §14).
    Blackboard,
    /// A queue file of any kind (SPSC, MPMC, of byte strings), capacity or item type.
    Queue,
}

impl FileKind {
    fn name(self) -> &'static str {
        match self {
            FileKind::Ring => "ring",
            FileKind::Blackboard => "blackboard",
            FileKind::Queue => "queue",
        }
    }

    /// The refusal of the file at `path` (`len` bytes, first word `magic`), not of this kind.
    fn not_replaced(self, path: &Path, len: u64, magic: Option<u64>) -> Error {
        Error::NotReplaced {
            path: path.to_path_buf(),
            len,
            magic,
            kind: self.name(),
            creator: self.creator(),
        }
    }

    fn creator(self) -> &'static str {
        match self {
            FileKind::Ring => "a ring producer",
            FileKind::Blackboard => "a blackboard producer",
            FileKind::Queue => "a queue creator",
        }
    }

    /// `None` when the stale file `f` may be replaced: a file of this kind (its magic), or
    /// one whose creation never finished. Anything else (a queue, a blackboard at a ring's
    /// path, somebody's data) is refused: spec §1.2 step 4 unlinks whatever non-empty file
    /// it finds, which deletes a file that a mistyped path happens to name.
    ///
    /// A queue creator replaces a stale queue of another kind, capacity or item type as it
    /// replaces one of its own: `create` makes a fresh, empty queue whatever the stale
    /// one held (`open` is what keeps its items), and a program restarted with another
    /// queue geometry creates at the path it used before.
    pub(crate) fn refuse(self, f: &File) -> io::Result<Option<Refusal>> {
        let (len, magic) = len_and_magic(f)?;
        let ok = match self {
            FileKind::Ring => {
                magic == Some(RING_MAGIC) || (magic == Some(0) && self.unfinished(f, len)?)
            }
            FileKind::Queue => {
                magic.and_then(QueueKind::from_magic).is_some()
                    || (magic == Some(0) && self.unfinished(f, len)?)
            }
            // The blackboard writes its magic last too (spec §14).
            FileKind::Blackboard => {
                magic == Some(ringwire_core::blackboard::BLACKBOARD_MAGIC)
                    || (magic == Some(0) && self.unfinished(f, len)?)
            }
        };
        Ok((!ok).then_some(Refusal::Foreign { len, magic }))
    }

    /// Whether a file of `len` bytes whose magic is 0 is a file of this kind whose creation
    /// never finished (spec §1.2; a blackboard and a queue are made the same way: the file
    /// is sized, zero-filled, then gets its header with magic 0, the magic last): its
    /// header, given the kind's magic, describes a file of this length, or the whole file
    /// is still zero. Any other file with a zero first word (a disk image, whose first
    /// sectors are often zero) is somebody's data.
    pub(crate) fn unfinished(self, file: &File, len: u64) -> io::Result<bool> {
        if let Some(described) = self.header_describes(file, len)? {
            return Ok(described);
        }
        // A header not written yet: every byte of the file is zero.
        all_zero(file, len)
    }

    /// Whether the header at the start of `file`, with this kind's magic put in, describes
    /// a file of `len` bytes; `None` when there is no header (too short, or every byte of
    /// it past the magic zero).
    fn header_describes(self, file: &File, len: u64) -> io::Result<Option<bool>> {
        use std::os::unix::fs::FileExt;
        use zerocopy::FromBytes;
        fn read<const N: usize>(file: &File, len: u64) -> io::Result<Option<[u8; N]>> {
            let mut h = [0u8; N];
            if len < N as u64 {
                return Ok(None);
            }
            file.read_exact_at(&mut h, 0)?;
            Ok(h[8..].iter().any(|&b| b != 0).then_some(h))
        }
        Ok(match self {
            FileKind::Ring => read::<{ hdr::SIZE }>(file, len)?.map(|h| {
                RingHeader::read_from_bytes(&h).is_ok_and(|mut header| {
                    header.magic = RING_MAGIC;
                    Geometry::from_header(&header, len, 8).is_ok()
                })
            }),
            FileKind::Queue => read::<{ qhdr::SIZE }>(file, len)?.map(|h| {
                QueueHeader::read_from_bytes(&h).is_ok_and(|mut header| {
                    // The kind the header names gives the magic its creator would store.
                    let Some(kind) = [QueueKind::Spsc, QueueKind::Mpmc]
                        .into_iter()
                        .find(|k| k.code() == header.kind)
                    else {
                        return false;
                    };
                    header.magic = kind.magic();
                    QueueGeometry::from_header(&header, len).is_ok()
                })
            }),
            FileKind::Blackboard => read::<{ ringwire_core::blackboard::HEADER_SIZE }>(file, len)?
                .map(|h| ringwire_core::blackboard::header_describes(&h, len)),
        })
    }
}

/// [`create_exclusive`] for a ring or a blackboard: a stale file of that kind is replaced,
/// any other non-empty file refused ([`Error::NotReplaced`]).
pub(crate) fn open_exclusive(path: &Path, mode: u32, total: u64, kind: FileKind) -> Result<File> {
    create_exclusive(path, mode, total, |f| {
        kind.refuse(f).map_err(|e| ("read", e))
    })
    .map_err(|e| match e {
        CreateError::Io { op, source } => Error::io(path, op, source),
        CreateError::NotRegular(found) => Error::NotRegularFile {
            path: path.to_path_buf(),
            found,
        },
        CreateError::Locked => match locked_by_another_kind(path, kind) {
            Some((len, magic)) => kind.not_replaced(path, len, magic),
            None => Error::ProducerAlreadyExists {
                path: path.to_path_buf(),
            },
        },
        CreateError::InUse(_) => Error::ProducerAlreadyExists {
            path: path.to_path_buf(),
        },
        CreateError::Foreign { len, magic } => kind.not_replaced(path, len, magic),
    })
}

/// The length and first word of the file at `path`, whose lock another process holds, when
/// that file is not of `kind`: a live queue or blackboard at a ring's path, say. Its lock
/// holder is then no producer of this kind, and the file would be refused just the same
/// once that holder exits. A file still empty (a creator that has not sized it yet) or one
/// whose first word is still 0 is a creation in progress, this kind's producer: `None`.
/// Every creator holds its lock from before it sizes the file and writes the magic last
/// (spec §1.2 step 5, §14; a queue likewise), and a header read while it is being written
/// describes no file, so the rest of the header does not count (the queue creator's
/// `locked_err` rules the same way).
fn locked_by_another_kind(path: &Path, kind: FileKind) -> Option<(u64, Option<u64>)> {
    let f = open_regular(path, OpenOptions::new().read(true)).ok()?;
    if let Ok((_, Some(0))) = len_and_magic(&f) {
        return None;
    }
    match kind.refuse(&f).ok()? {
        Some(Refusal::Foreign { len, magic }) if len > 0 => Some((len, magic)),
        _ => None,
    }
}

impl RingFile {
    /// Creates a ring file at `path` with geometry `geo` (spec §1.2) and initialises it (magic
    /// last). The lock, if any, is held until the returned value is dropped.
    pub fn create(path: impl AsRef<Path>, geo: &Geometry, opts: &CreateOptions) -> Result<Self> {
        let path = path.as_ref();
        not_empty(path, "ring")?;
        sys::membarrier_register();
        // As the core's constructors bound it: at most `isize::MAX` bytes (a hand-built
        // geometry's fields are public).
        let total = geo
            .total_len()
            .filter(|&n| n <= isize::MAX as u64)
            .ok_or_else(|| Error::InvalidArgument {
                path: path.to_path_buf(),
                what: geo.too_large().to_string(),
            })?;
        let file = if opts.exclusive_lock {
            open_exclusive(path, opts.mode, total, FileKind::Ring)?
        } else {
            // Opened without `O_TRUNC`: the truncation waits for the lock test below.
            let f = open_regular(
                path,
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .mode(opts.mode),
            )?;
            // A live exclusive producer holds its file's flock: truncating its ring would
            // make its next store, and every reader's next load, a SIGBUS. A shared lock
            // is refused only by such a holder (legacy creators take no other kind), and is
            // kept for this handle's life, so that an exclusive creator or a mirror does
            // not take this live ring for a dead producer's and replace or adopt it.
            if let Err(e) = sys::try_lock_shared(&f)
                && e.kind() == io::ErrorKind::WouldBlock
            {
                return Err(match locked_by_another_kind(path, FileKind::Ring) {
                    Some((len, magic)) => FileKind::Ring.not_replaced(path, len, magic),
                    None => Error::ProducerAlreadyExists {
                        path: path.to_path_buf(),
                    },
                });
            }
            // The truncation would wipe whatever the file holds: as the exclusive creator
            // replaces, it truncates only a ring (another legacy creator's, live or not) or
            // a ring whose creation never finished, and leaves somebody's data in place.
            if let Some(Refusal::Foreign { len, magic }) = FileKind::Ring
                .refuse(&f)
                .map_err(|e| Error::io(path, "read", e))?
                && len != 0
            {
                return Err(FileKind::Ring.not_replaced(path, len, magic));
            }
            f.set_len(0).map_err(|e| Error::io(path, "ftruncate", e))?;
            size_and_reserve(&f, total).map_err(|(op, e)| Error::io(path, op, e))?;
            f
        };
        let id = sys::file_id(&file).map_err(|e| Error::io(path, "fstat", e))?;
        let owner = Owner {
            cleanup: opts.cleanup,
            locked: opts.exclusive_lock,
            pid: std::process::id(),
            incarnation: sys::own_incarnation(),
        };
        // Without the lock the file may be another legacy creator's too: left in place.
        let cleanup_on_error = |e: Error| {
            if opts.exclusive_lock {
                remove_if_ours(path, id);
            }
            e
        };
        let (map, region) = map_file(path, &file, false).map_err(cleanup_on_error)?;
        // SAFETY: `region` is the mapping made just above, of which no view exists yet.
        // Other mappings of the file are other parties, the creation protocol's concern:
        // with the lock the file is a fresh inode under the creator's lock; without it, the
        // legacy mode's truncate-and-reuse (see `CreateOptions::exclusive_lock`).
        let view = unsafe { RingView::init(region, geo) }
            .map_err(|source| Error::Init {
                path: path.to_path_buf(),
                source,
            })
            .map_err(cleanup_on_error)?;
        Ok(RingFile {
            view,
            map,
            file,
            id,
            path: path.to_path_buf(),
            abs_path: absolute(path),
            owner: Some(owner),
            waker: crate::wait::FutexWake::new(),
        })
    }

    /// Attaches read-write (no lock) to an existing ring with the §1.3 checks, in order.
    pub fn open(path: impl AsRef<Path>, expect: Expect) -> Result<Self> {
        let path = path.as_ref();
        not_empty(path, "ring")?;
        let file = open_regular(path, OpenOptions::new().read(true).write(true))?;
        let id = sys::file_id(&file).map_err(|e| Error::io(path, "fstat", e))?;
        let (map, region) = map_file(path, &file, false)?;
        let view = RingView::attach(region, expect).map_err(|e| Error::attach(path, e))?;
        Ok(RingFile {
            view,
            map,
            file,
            id,
            path: path.to_path_buf(),
            abs_path: absolute(path),
            owner: None,
            waker: crate::wait::FutexWake::new(),
        })
    }

    /// The validated ring, for building the core's producers and consumers.
    ///
    /// # Safety
    /// [`RingView`] is `Copy` and does not borrow the mapping: neither the returned view nor
    /// any copy of it (nor anything built on one) may be used after this `RingFile` is
    /// dropped, which unmaps the memory. The typed handles uphold this by owning the file and
    /// declaring it after the core handle, so the core handle is dropped first.
    #[inline(always)]
    pub unsafe fn view(&self) -> &RingView {
        &self.view
    }

    /// The view, for this crate's typed handles, which own the file and drop their core
    /// handle first (see [`RingFile::view`]).
    #[inline(always)]
    pub(crate) fn ring(&self) -> &RingView {
        &self.view
    }

    /// The ring's validated geometry.
    pub fn geometry(&self) -> &Geometry {
        self.view.geometry()
    }

    /// A relaxed snapshot of the header.
    pub fn header(&self) -> ringwire_core::layout::RingHeader {
        self.view.header()
    }

    /// The current `write_seq` (acquire).
    pub fn write_seq(&self) -> u64 {
        // Acquire: records up to the value read are visible to the caller's reads after it.
        self.view
            .write_seq()
            .load(ringwire_core::sync::Ordering::Acquire)
    }

    /// [`RingFile::write_seq`], or [`Error::Attach`] when the header is corrupt there, as
    /// [`ReadOnlyRing::checked_write_seq`] judges it.
    pub fn checked_write_seq(&self) -> Result<u64> {
        self.view
            .checked_write_seq()
            .map_err(|e| Error::attach(&self.path, e))
    }

    /// The path the ring was created at or attached through.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// (device, inode) of the mapped file.
    pub fn inode(&self) -> (u64, u64) {
        self.id
    }

    /// True when the path no longer names the mapped file: the producer restarted and
    /// replaced the ring with a fresh inode (or removed it). Such a ring never advances
    /// again; re-attach to follow the new one.
    pub fn is_replaced(&self) -> bool {
        !matches!(sys::path_id(&self.abs_path), Ok(Some(id)) if id == self.id)
    }

    /// `msync(MS_SYNC)` of the whole mapping: the ring's bytes as of the call reach the
    /// disk of a ring on a disk file system. It does not sync the directory, so the entry of
    /// a newly created ring file may still be lost in a crash of the machine. A ring on
    /// tmpfs (`/dev/shm`, where rings normally live) is memory only: it outlives the
    /// processes that use it, never a crash or restart of the machine, and no flush can
    /// make it durable (there this call is cheap and does nothing useful).
    pub fn flush(&self) -> Result<()> {
        self.map
            .flush()
            .map_err(|e| Error::io(&self.path, "msync", e))
    }

    /// `FUTEX_WAKE` every sleeper on the ring's futex word (after [`RingView::publish`]
    /// returned `true`), every time. Shared futex: sleepers may be in other processes.
    pub fn wake_all(&self) {
        sys::futex_wake_all(self.view.futex_word().as_ptr());
    }

    /// The wake of a producer publishing through this file's [`RingView`], after a
    /// [`RingView::publish`] that returned `true`: as [`RingFile::wake_all`], except that
    /// it stops paying a system call per publish for a sleeper that died asleep
    /// ([`FutexWake`](crate::FutexWake)'s docs).
    #[inline]
    pub fn wake_after_publish(&self) {
        self.waker.wake_after_publish(&self.view);
    }

    /// The file's length in bytes.
    pub fn file_len(&self) -> usize {
        self.map.len()
    }

    /// The mapping's base address (for diagnostics).
    pub fn as_ptr(&self) -> *const u8 {
        self.map.as_ptr()
    }
}

impl RingFile {
    /// Whether dropping this handle unlinks the file ([`CleanupMode`]; a created ring's
    /// comes from its [`CreateOptions`], an attached one never unlinks unless told to here).
    /// A creator unlinks while it still holds its lock; an attached handle, which holds
    /// none, unlinks without one. Either way only while the path still names this file.
    pub fn set_cleanup(&mut self, cleanup: CleanupMode) {
        match &mut self.owner {
            Some(owner) => owner.cleanup = cleanup,
            None => {
                self.owner = Some(Owner {
                    cleanup,
                    locked: false,
                    pid: std::process::id(),
                    incarnation: sys::own_incarnation(),
                })
            }
        }
    }
}

impl Drop for RingFile {
    fn drop(&mut self) {
        let Some(owner) = &self.owner else { return };
        if owner.pid != std::process::id() && sys::process_running(owner.pid, owner.incarnation) {
            // A copy inherited through fork while its creator lives: the file and its lock
            // are the creator's, which goes on writing. `flock(LOCK_UN)` here would release
            // the lock for both (it belongs to the open file description, which fork
            // shares), letting another producer replace a live ring, and the unlink would
            // take the ring from every later reader. Closing this process's descriptor
            // leaves the lock in place. A copy that outlives its creator (a daemon's, whose
            // parent exits after the fork) cleans up as the creator would have, also while
            // the creator is a zombie nobody has reaped yet, or its pid is another's now.
            return;
        }
        // Unlink while still holding the lock (spec §1.2 step 6), and only if the path still
        // names our inode: never delete a ring someone else created at the same path.
        if owner.cleanup == CleanupMode::UnlinkOnDrop {
            remove_if_ours(&self.abs_path, self.id);
        }
        if owner.locked {
            sys::unlock(&self.file);
        }
    }
}

impl std::fmt::Debug for RingFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingFile")
            .field("path", &self.path)
            .field("geometry", self.view.geometry())
            .field("owner", &self.owner.is_some())
            .finish()
    }
}

/// A blob ring record's blob is gone: overwritten in the arena since the record was
/// written, or its descriptor is out of bounds (spec §10.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobLost;

/// A ring mapped read-only (for `stat`, `top`, `dump` and a network source). It exposes only
/// loads: the mapping is `PROT_READ`, so no store path exists.
pub struct ReadOnlyRing {
    view: RingView,
    map: Mapped<MmapRaw>,
    _file: File,
    path: PathBuf,
    id: (u64, u64),
}

impl ReadOnlyRing {
    /// Opens and validates a ring read-only (§1.3, slot alignment 8, any record type).
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        not_empty(path, "ring")?;
        let file = open_regular(path, OpenOptions::new().read(true))?;
        let id = sys::file_id(&file).map_err(|e| Error::io(path, "fstat", e))?;
        let (map, region) = map_file(path, &file, true)?;
        let view = RingView::attach(region, Expect::RAW).map_err(|e| Error::attach(path, e))?;
        Ok(ReadOnlyRing {
            view,
            map,
            _file: file,
            path: path.to_path_buf(),
            id,
        })
    }

    /// The path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// (device, inode) of the mapped file.
    pub fn inode(&self) -> (u64, u64) {
        self.id
    }

    /// The view, for this crate's readers (serve on a ring it may not write). Crate-only, as
    /// [`RingFile::view`] is unsafe: the view is `Copy` and must not outlive this mapping;
    /// only loads may go through it (the mapping is `PROT_READ`).
    pub(crate) fn ring(&self) -> &RingView {
        &self.view
    }

    /// The file's length in bytes.
    pub fn file_len(&self) -> usize {
        self.map.len()
    }

    /// A relaxed snapshot of the header.
    pub fn header(&self) -> ringwire_core::layout::RingHeader {
        self.view.header()
    }

    /// The validated geometry.
    pub fn geometry(&self) -> &Geometry {
        self.view.geometry()
    }

    /// `write_seq`, acquire-loaded.
    pub fn write_seq(&self) -> u64 {
        // Acquire: slots read after this see at least the records published up to it.
        self.view
            .write_seq()
            .load(ringwire_core::sync::Ordering::Acquire)
    }

    /// [`ReadOnlyRing::write_seq`], or [`Error::Attach`] when the header is corrupt there
    /// ([`RingView::checked_write_seq`]): [`AttachError::WriteSeqExhausted`] when it is at
    /// or past [`SEQ_LIMIT`](ringwire_core::layout::SEQ_LIMIT), which every producer refuses
    /// and against which no record can be placed, and
    /// [`AttachError::WriteSeqPastClaimSeq`] when an MPMC ring's is at or past its
    /// `claim_seq`, which no producer publishes.
    pub fn checked_write_seq(&self) -> Result<u64> {
        self.view
            .checked_write_seq()
            .map_err(|e| Error::attach(&self.path, e))
    }

    /// The raw sequence word of the slot that holds `seq`.
    pub fn slot_seq_word(&self, seq: u64) -> u64 {
        // Acquire: pairs with the writer's release store of the sequence.
        self.view
            .slot_seq(seq)
            .load(ringwire_core::sync::Ordering::Acquire)
    }

    /// Tear-free read of record `seq` (raw slot bytes `[8, S)`), spec §4.3.
    pub fn read_slot(&self, seq: u64, dst: &mut [u8]) -> ringwire_core::SlotRead {
        self.view.read_slot(seq, dst)
    }

    /// The blob of a blob ring's record: `payload` is the record as
    /// [`ReadOnlyRing::read_slot`] gave it; the bytes are read with the bounds and lap tests
    /// of spec §10.4. `None` when the ring has no arena or the payload holds no BlobRef.
    pub fn read_blob(&self, payload: &[u8]) -> Option<std::result::Result<Vec<u8>, BlobLost>> {
        use ringwire_core::broadcast::blob::{BlobRead, read_blob, split_descriptor};
        if !self.geometry().has_arena() {
            return None;
        }
        let (_, r) = split_descriptor(payload)?;
        // A BlobRef longer than the arena cannot be intact: no allocation for it.
        if u64::from(r.len) > self.geometry().arena_size {
            return Some(Err(BlobLost));
        }
        let mut blob = vec![0u8; r.len as usize];
        Some(match read_blob(&self.view, &r, &mut blob) {
            BlobRead::Ok(n) => {
                blob.truncate(n);
                Ok(blob)
            }
            BlobRead::Lost | BlobRead::BufferTooSmall { .. } => Err(BlobLost),
        })
    }

    /// Registry slot `i`, if the ring has one.
    pub fn registry_entry(&self, i: u32) -> Option<RegistryEntry> {
        use ringwire_core::layout::reg;
        use ringwire_core::sync::Ordering::{Acquire, Relaxed};
        // Acquire on `active`: a reader's name and cursor stores precede its release of 1.
        let active = self.view.registry_a32(i, reg::ACTIVE)?.load(Acquire);
        // Relaxed: monitoring only, no data depends on these values.
        let pid = self.view.registry_a32(i, reg::PID)?.load(Relaxed);
        // Relaxed: as above.
        let cursor = self.view.registry_a64(i, reg::CURSOR_SEQ)?.load(Relaxed);
        // Relaxed: as above.
        let token = self.view.registry_a64(i, reg::HEARTBEAT_TSC)?.load(Relaxed);
        let name = self.view.registry_name(i)?;
        Some(RegistryEntry {
            pid,
            active,
            cursor,
            token,
            name,
        })
    }

    /// The arena's `reserved` counter, if the ring has an arena.
    pub fn arena_reserved(&self) -> Option<u64> {
        // Relaxed: a monitoring snapshot.
        self.view
            .arena_reserved()
            .map(|a| a.load(ringwire_core::sync::Ordering::Relaxed))
    }

    /// `waiting_consumers` and `futex_word`.
    pub fn futex_state(&self) -> (u32, u32) {
        use ringwire_core::sync::Ordering::Relaxed;
        // Relaxed: a monitoring snapshot.
        (
            self.view.waiting_consumers().load(Relaxed),
            self.view.futex_word().load(Relaxed),
        )
    }
}

/// A snapshot of one registry slot (spec §9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegistryEntry {
    /// Owning pid, 0 = free.
    pub pid: u32,
    /// 1 = live reader.
    pub active: u32,
    /// Next sequence the reader will read.
    pub cursor: u64,
    /// `heartbeat_tsc`: 0 for a ringfire reader, a token of the registration for ours (see
    /// [`ringwire_core::broadcast::registry::token_incarnation`]).
    pub token: u64,
    /// NUL-padded name bytes.
    pub name: [u8; 32],
}

impl RegistryEntry {
    /// A live reader: `active == 1 && pid != 0`.
    pub fn is_live(&self) -> bool {
        self.active == 1 && self.pid != 0
    }

    /// The name up to the first NUL, lossily decoded.
    pub fn name_str(&self) -> String {
        let end = self.name.iter().position(|&b| b == 0).unwrap_or(32);
        String::from_utf8_lossy(&self.name[..end]).into_owned()
    }
}

impl std::fmt::Debug for ReadOnlyRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadOnlyRing")
            .field("path", &self.path)
            .field("geometry", self.view.geometry())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use crate::test_fork::{assert_exited_0, forked};
    use crate::test_tmp::TmpPath;
    use crate::{BlackboardProducer, RingProducer};

    /// A producer's copy inherited through fork, dropped in the child, leaves the file and
    /// the creator's lock alone. Before, the copy unlinked the parent's live ring (its path
    /// still named it) and released its `flock`, which the open file description shared
    /// with the parent holds for both: a second producer could then create the path anew
    /// while the first still wrote, and attaches found the new ring, never the live one.
    #[test]
    fn a_forked_childs_copy_of_a_producer_dropped_leaves_the_file_and_its_lock() {
        let (ring, board) = (
            TmpPath::new("file-fork-ring"),
            TmpPath::new("file-fork-board"),
        );
        let mut tx = RingProducer::<u64>::create(&ring, 16).unwrap();
        let mut bb = BlackboardProducer::<u64>::create(&board, 4).unwrap();
        let status = forked(10, || {
            // SAFETY: this child never touches the originals again (it leaves through
            // `_exit`), so the bitwise copies are its only copies of the producers.
            let (copy, bcopy) = unsafe { (std::ptr::read(&tx), std::ptr::read(&bb)) };
            drop(copy);
            drop(bcopy);
            0
        });
        assert_exited_0(status, "drop in the child");
        assert!(
            ring.exists() && board.exists(),
            "the child's drop unlinked them"
        );
        // The parent still holds both locks: a second creator is refused.
        assert!(RingProducer::<u64>::create(&ring, 16).is_err());
        assert!(BlackboardProducer::<u64>::create(&board, 4).is_err());
        tx.push(&1);
        bb.write(0, &1).unwrap();
        // The parent's own drop still cleans up.
        drop(tx);
        drop(bb);
        assert!(!ring.exists() && !board.exists());
    }

    /// Where `flock` itself fails (a file system without locks: ENOLCK), a ring, a
    /// blackboard and a queue creator say so, naming `flock` and the OS error. They said
    /// "producer already exists" (the queue: "being created by another handle"), sending
    /// the user after a producer that does not exist.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[test]
    fn a_flock_that_fails_without_a_holder_is_an_io_error_not_a_producer() {
        use crate::error::Error;
        use crate::queue::QueueFileError;
        let (ring, board, queue) = (
            TmpPath::new("file-flock-ring"),
            TmpPath::new("file-flock-board"),
            TmpPath::new("file-flock-queue"),
        );
        let status = forked(10, || {
            if crate::test_fork::fail_flock(libc::ENOLCK).is_err() {
                return 2;
            }
            let enolck = |op: &str, e: &std::io::Error| {
                op == "flock" && e.raw_os_error() == Some(libc::ENOLCK)
            };
            let r = match RingProducer::<u64>::create(&ring, 16) {
                Err(Error::Io { op, source, .. }) => enolck(op, &source),
                _ => false,
            };
            let b = match BlackboardProducer::<u64>::create(&board, 4) {
                Err(Error::Io { op, source, .. }) => enolck(op, &source),
                _ => false,
            };
            let q = match crate::queue::SpscProducer::<u64>::create(&queue, 16) {
                Err(QueueFileError::Io { op, source, .. }) => enolck(op, &source),
                _ => false,
            };
            // Which ones went wrong, one bit each.
            i32::from(!r) << 2 | i32::from(!b) << 3 | i32::from(!q) << 4
        });
        crate::test_fork::assert_exited_0(status, "creation with a failing flock");
    }

    /// A daemon's pattern where nobody reaps the creator at once: it forks and exits, and
    /// stays a zombie until its parent waits for it. The child's copies of a ring and a
    /// blackboard producer and of a checkpoint are then the only ones in use: the drops
    /// unlink the files and the checkpoint commits, as the creator's would have. `kill(pid,
    /// 0)` succeeds on a zombie, so the copies took the creator for alive: the files stayed
    /// (in `/dev/shm`, for good) and every commit was refused as a forked child's.
    #[test]
    fn a_forked_copy_whose_creator_is_an_unreaped_zombie_acts_as_the_creator_would() {
        use crate::checkpoint::OffsetCheckpoint;
        use std::time::{Duration, Instant};
        let (ring, board, offset) = (
            TmpPath::new("file-zombie-ring"),
            TmpPath::new("file-zombie-board"),
            TmpPath::new("file-zombie-offset"),
        );
        let saved = || {
            let b = std::fs::read(&offset).ok()?;
            Some(u64::from_ne_bytes(b.get(16..24)?.try_into().ok()?))
        };
        let mut seen = None;
        let status = crate::test_fork::forked_with(
            10,
            || {
                let (Ok(tx), Ok(bb), Ok(cp)) = (
                    RingProducer::<u64>::create(&ring, 16),
                    BlackboardProducer::<u64>::create(&board, 4),
                    OffsetCheckpoint::open_or_create(&offset, "algo"),
                ) else {
                    return 2;
                };
                let creator = std::process::id();
                // SAFETY: the daemon runs only the code below and leaves through `_exit`.
                let pid = unsafe { libc::fork() };
                if pid == 0 {
                    // SAFETY: alarm takes an integer and touches no memory of ours.
                    unsafe { libc::alarm(10) };
                    // Until the creator has exited (another process is then our parent).
                    let end = Instant::now() + Duration::from_secs(5);
                    // SAFETY: getppid takes nothing and cannot fail.
                    while unsafe { libc::getppid() } as u32 == creator && Instant::now() < end {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    if cp.check_committer().is_ok() {
                        cp.save(7);
                    }
                    drop((tx, bb, cp));
                    // SAFETY: ends the daemon without running inherited exit handlers.
                    unsafe { libc::_exit(0) }
                }
                // The creator leaves without its drops, as a daemon's parent that exits.
                std::mem::forget((tx, bb, cp));
                i32::from(pid < 0)
            },
            |_| {
                // The creator is reaped only once this returns: a zombie until then.
                let end = Instant::now() + Duration::from_secs(5);
                let now = || (ring.exists(), board.exists(), saved());
                while now() != (false, false, Some(7)) && Instant::now() < end {
                    std::thread::sleep(Duration::from_millis(2));
                }
                seen = Some(now());
            },
        );
        assert_exited_0(status, "the creator");
        assert_eq!(seen, Some((false, false, Some(7))), "(ring, board, offset)");
    }

    /// A producer's copy (inherited through fork) whose creator's pid names another
    /// process since (the creator exited, and a long-running host gave its pid to a new
    /// process) cleans up as the creator would have: that process is not the creator.
    /// `kill(pid, 0)` alone took it for the creator, and the ring was left behind.
    #[test]
    fn a_copy_whose_creators_pid_is_another_process_now_cleans_up() {
        use ringwire_core::broadcast::registry::Incarnation;
        /// The process, killed and reaped when dropped, also when the test fails.
        struct Reaped(std::process::Child);
        impl Drop for Reaped {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let ring = TmpPath::new("file-pid-reused");
        let other = Reaped(
            std::process::Command::new("sleep")
                .arg("10")
                .spawn()
                .unwrap(),
        );
        let pid = other.0.id();
        let inc = crate::sys::incarnation_of(pid);
        let geo = ringwire_core::Geometry::spmc(4, 16, 8, 8, false).unwrap();
        let mut file = super::RingFile::create(&ring, &geo, &Default::default()).unwrap();
        let owner = file.owner.as_mut().unwrap();
        // As a forked copy sees it: created by `pid`, a process that started a second
        // before the one that has that pid now.
        owner.pid = pid;
        owner.incarnation = inc.map(|i| Incarnation {
            start: i.start.wrapping_sub(100) & 0xF_FFFF,
            ..i
        });
        drop(file);
        assert!(inc.is_some(), "this test needs /proc");
        assert!(
            !ring.exists(),
            "the copy left the ring of a creator that is gone"
        );
    }

    /// A stale file that someone else removes between the creator's check and its unlink
    /// (a cleanup script, an attached handle's `UnlinkOnDrop`) is gone already: creation
    /// goes on with a fresh file. The unlink's ENOENT failed the creation; through a
    /// symbolic link whose target had gone, the link itself was unlinked and a plain file
    /// made in its place.
    #[test]
    fn a_stale_file_removed_by_another_before_the_unlink_is_replaced_all_the_same() {
        let (plain, target, link) = (
            TmpPath::new("file-gone-plain"),
            TmpPath::new("file-gone-target"),
            TmpPath::new("file-gone-link"),
        );
        std::os::unix::fs::symlink(&*target, &*link).unwrap();
        for (path, stale) in [(&plain, &plain), (&link, &target)] {
            std::fs::write(stale, [1u8; 64]).unwrap();
            // The refusal check runs just before the unlink: the removal lands there.
            let f = super::create_exclusive(path, 0o600, 4096, |_| {
                std::fs::remove_file(stale).map_err(|e| ("unlink", e))?;
                Ok(None)
            })
            .unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
            assert_eq!(f.metadata().unwrap().len(), 4096, "{}", path.display());
            let id = crate::sys::file_id(&f).unwrap();
            assert_eq!(crate::sys::path_id(path).unwrap(), Some(id));
        }
        let link_type = std::fs::symlink_metadata(&link).unwrap().file_type();
        assert!(link_type.is_symlink(), "the link was replaced by a file");
        assert!(target.exists(), "the new file is not where the link points");
    }

    /// A stale file whose bytes cannot be read (an I/O error of the disk under it) fails a
    /// ring, blackboard or queue creation with an error naming `read`, the call that
    /// failed. It named `fcntl`, a call the ring and blackboard creators never make there.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[test]
    fn a_stale_file_that_cannot_be_read_is_said_to_fail_a_read() {
        use crate::error::Error;
        use crate::queue::QueueFileError;
        let (ring, board, queue) = (
            TmpPath::new("file-eio-ring"),
            TmpPath::new("file-eio-board"),
            TmpPath::new("file-eio-queue"),
        );
        for stale in [&ring, &board, &queue] {
            std::fs::write(stale, [1u8; 4096]).unwrap();
        }
        let status = forked(10, || {
            if crate::test_fork::fail_call(libc::SYS_pread64, libc::EIO).is_err() {
                return 2;
            }
            let eio =
                |op: &str, e: &std::io::Error| op == "read" && e.raw_os_error() == Some(libc::EIO);
            let r = match RingProducer::<u64>::create(&ring, 16) {
                Err(Error::Io { op, source, .. }) => eio(op, &source),
                _ => false,
            };
            let b = match BlackboardProducer::<u64>::create(&board, 4) {
                Err(Error::Io { op, source, .. }) => eio(op, &source),
                _ => false,
            };
            let q = match crate::queue::SpscProducer::<u64>::create(&queue, 16) {
                Err(QueueFileError::Io { op, source, .. }) => eio(op, &source),
                _ => false,
            };
            // Which ones went wrong, one bit each.
            i32::from(!r) << 2 | i32::from(!b) << 3 | i32::from(!q) << 4
        });
        crate::test_fork::assert_exited_0(status, "creation over an unreadable stale file");
        // Refused before any unlink: each stale file is still there, as it was.
        for stale in [&ring, &board, &queue] {
            assert_eq!(std::fs::read(stale).unwrap(), [1u8; 4096]);
        }
    }

    /// A second producer that tries a path while the first one is still writing its file's
    /// header (the lock held, the magic still 0, some fields written) is told that another
    /// producer holds the lock, for a ring and a blackboard, also in the legacy mode. It was
    /// told the file is not a ring (`NotReplaced`) and to remove it: a header read mid-write
    /// describes no file, and was taken for somebody's data.
    #[test]
    fn a_creator_racing_another_ones_header_write_is_told_a_producer_holds_the_lock() {
        use crate::error::Error;
        use std::os::unix::fs::FileExt;
        let (ring, board) = (
            TmpPath::new("file-midwrite-ring"),
            TmpPath::new("file-midwrite-board"),
        );
        let version_at = |path: &std::path::Path, off: usize, version: u32| {
            // The first creator: its lock, its sized file, the first header field written.
            let first = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
                .unwrap();
            crate::sys::try_lock_exclusive(&first).unwrap();
            first.set_len(1 << 16).unwrap();
            first
                .write_all_at(&version.to_ne_bytes(), off as u64)
                .unwrap();
            first
        };
        let _first = version_at(
            &ring,
            ringwire_core::layout::hdr::VERSION,
            ringwire_core::layout::RING_VERSION,
        );
        let legacy = crate::CreateOptions {
            exclusive_lock: false,
            ..Default::default()
        };
        let geo = ringwire_core::Geometry::spmc(8, 16, 8, 0, false).unwrap();
        let e = RingProducer::<u64>::create(&ring, 16).map(drop);
        let l = super::RingFile::create(&ring, &geo, &legacy).map(drop);
        let _first_board = version_at(
            &board,
            ringwire_core::blackboard::bb_hdr::VERSION,
            ringwire_core::blackboard::BLACKBOARD_VERSION,
        );
        let b = BlackboardProducer::<u64>::create(&board, 4).map(drop);
        for (what, r) in [("ring", e), ("legacy ring", l), ("blackboard", b)] {
            assert!(
                matches!(r, Err(Error::ProducerAlreadyExists { .. })),
                "{what}: {r:?}"
            );
        }
    }

    /// A daemon's pattern: the process that created the ring forks and exits, and the child
    /// goes on as the producer. The child's copy, outliving its creator, unlinks the ring
    /// when dropped, as the creator's drop would have.
    #[test]
    fn a_forked_copy_that_outlives_its_creator_cleans_up_as_the_creator_would() {
        let ring = TmpPath::new("file-daemon-ring");
        let status = forked(10, || {
            let Ok(mut tx) = RingProducer::<u64>::create(&ring, 16) else {
                return 2;
            };
            let creator = std::process::id();
            // SAFETY: the grandchild runs only the code below and leaves through `_exit`.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                // SAFETY: alarm takes an integer and touches no memory of ours.
                unsafe { libc::alarm(10) };
                // Until the creator has exited and been reaped by the test.
                while crate::sys::pid_alive(creator) {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                tx.push(&1);
                drop(tx);
                // SAFETY: ends the grandchild without running inherited exit handlers.
                unsafe { libc::_exit(0) }
            }
            // The creator leaves without its drop, as a daemon's parent that exits.
            std::mem::forget(tx);
            i32::from(pid < 0)
        });
        assert_exited_0(status, "the creator");
        let t0 = std::time::Instant::now();
        while ring.exists() {
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(10),
                "the copy that outlived its creator left the ring"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}
