//! The consumer offset checkpoint file (spec §13): 64 bytes that remember the last sequence
//! a named consumer processed, so a restarted consumer resumes after it.
//!
//! | Off | Field |
//! |---:|---|
//! | 0 | magic `0x53484D5F4F464653` ("SFFO_MHS" on disk) |
//! | 8 | version 1 (u32) |
//! | 12 | pid of the last process that attached or saved (atomic u32) |
//! | 16 | `offset_seq`: last processed sequence, 0 = never committed (atomic u64) |
//! | 24 | `updated_ns`: wall-clock ns since the Unix epoch (atomic u64) |
//! | 32 | consumer name, at most 31 bytes, NUL-padded |
//!
//! The file is mapped, as ringfire maps it: truncating it while a consumer has it open (say
//! `: > file` from a cleanup script) makes that consumer's next save or load a SIGBUS, as
//! truncating a mapped ring file does to its users (the `ringwire` binary's handler names
//! the file and exits 1; a library user's process dies of the signal). Remove the file
//! instead: a consumer that has it open keeps its copy, and the next open creates a new
//! one.
//!
//! A save is one aligned 8-byte store into the shared mapping, with no write, rename or
//! `msync`: it survives its process however that ends (`kill -9` included) and is never
//! torn, but not a crash of the machine. On a disk file system the kernel writes it back
//! when it chooses, so a machine crash can lose the last saves (a restart resumes earlier
//! than the last commit, and reads those records again) or, before the file's first
//! write-back, its whole record (an empty file or 64 zero bytes, which the next open takes
//! for a creation cut short: the restart starts as one without a saved offset). In
//! `/dev/shm` the file does not outlive the machine at all.

use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use memmap2::{MmapOptions, MmapRaw};
use ringwire_core::Region;
use ringwire_core::sync::Ordering;

use crate::error::{Error, Result};

/// Checkpoint file magic.
pub const CHECKPOINT_MAGIC: u64 = 0x5348_4D5F_4F46_4653;
/// Checkpoint file version.
pub const CHECKPOINT_VERSION: u32 = 1;
/// Checkpoint file size.
pub const CHECKPOINT_SIZE: usize = 64;

/// After a "bad magic" message of a file opened as another kind: names a consumer offset
/// file's magic (`found`), which the core's names of its own file kinds leave out, so that a
/// swapped path shows. Writes nothing for any other magic.
pub(crate) fn name_offset_file_magic(
    f: &mut std::fmt::Formatter<'_>,
    found: u64,
) -> std::fmt::Result {
    if found == CHECKPOINT_MAGIC {
        f.write_str(" (the magic of a consumer offset file)")
    } else {
        Ok(())
    }
}

const OFF_MAGIC: usize = 0;
const OFF_VERSION: usize = 8;
const OFF_PID: usize = 12;
const OFF_SEQ: usize = 16;
const OFF_UPDATED: usize = 24;
const OFF_NAME: usize = 32;
const KIND: &str = "offset file";
/// How long an open that finds a record without its magic, as a creation leaves it, waits
/// for a creator still at work to store the magic before it finishes the record itself; and
/// one that finds the magic with the version 0 waits for the version before it refuses it.
const CREATOR_WAIT: Duration = Duration::from_millis(200);
/// How long an open waits in all for a record without its magic whose claim keeps changing
/// (openers taking its finishing and then stopping, one after another) before it refuses it.
const CREATOR_WAIT_MAX: Duration = Duration::from_secs(2);
/// How many times [`open_file`] tries again a file that another process removes between its
/// exclusive create (which finds the file) and its open (which does not).
const VANISHED_TRIES: u32 = 8;

/// What [`OffsetCheckpoint::await_creator`] found.
enum Creation {
    /// The magic is there now (the creator's, or any other non-zero word).
    Finished(u64),
    /// Still a creation's record without its magic, its claim unchanged for the whole wait:
    /// one cut short, whose finishing this open has now taken (see
    /// [`OffsetCheckpoint::take_over`]), with the time the record holds since.
    Claimed(u64),
    /// Not what a creation leaves (an offset, another version, bytes past the name's NUL),
    /// and still no magic; or a record whose claim kept changing for [`CREATOR_WAIT_MAX`].
    Not,
}

/// An open checkpoint file.
pub struct OffsetCheckpoint {
    region: Region,
    _map: crate::cli::sigbus::Mapped<MmapRaw>,
    path: PathBuf,
    name: String,
    /// The process that opened the file, and its fork generation then: a copy of this
    /// handle in a child forked since does not commit while that process runs (see
    /// [`OffsetCheckpoint::check_committer`]).
    opener: u32,
    opener_generation: u64,
    /// The opener's incarnation, so that a later process given its pid is not taken for it.
    opener_incarnation: Option<ringwire_core::broadcast::registry::Incarnation>,
    /// The file's device and inode, to tell whether its path still names it.
    id: (u64, u64),
    /// `path` made absolute at open, so that a change of the working directory since does
    /// not look like a moved file.
    abs_path: PathBuf,
}

/// The default checkpoint path for a consumer `name` of the ring at `ring` (spec §13):
/// `<dir of ring>/<file stem of ring>_<name, with every char not alphanumeric, '_' or '-'
/// replaced by '_'>.offset`. A bare relative ring path gives a file in the current
/// directory.
///
/// A stem that is not UTF-8 (or a path without one) is spelled `ring`, and a path without
/// a directory (`/`) puts the file in `/dev/shm`, as ringfire 0.5.2 does: a consumer of
/// either project then finds the offset the other committed under the same name. Two such
/// rings in one directory share their consumers' checkpoints, with ringfire too.
///
/// So do rings whose names differ only after their last dot: the stem drops that part, so
/// consumers "algo" of `/dev/shm/md.eurusd` and `/dev/shm/md.gbpusd` both get
/// `/dev/shm/md_algo.offset`. A checkpoint file holds a sequence and no name of its ring,
/// so the second consumer cannot tell: it resumes after the first one's offset, skipping or
/// repeating records (only an offset its ring cannot have reached is taken as stale, see
/// `RingConsumer::stale_checkpoint`). Give such rings' consumers distinct names, or a path
/// of their own ([`RingConsumerBuilder::offset_file`](crate::RingConsumerBuilder::offset_file)).
pub fn default_path(ring: &Path, name: &str) -> PathBuf {
    let stem = ring.file_stem().and_then(|s| s.to_str()).unwrap_or("ring");
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let file = format!("{stem}_{clean}.offset");
    ring.parent().unwrap_or(Path::new("/dev/shm")).join(file)
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos().min(u128::from(u64::MAX)) as u64)
        .unwrap_or(0)
}

/// [`now_ns`], or one more should it read `seen`: a claim's new time always differs from the
/// one it replaces, so that openers comparing times see the change.
fn now_other_than(seen: u64) -> u64 {
    let stamp = now_ns();
    if stamp == seen {
        stamp.wrapping_add(1)
    } else {
        stamp
    }
}

/// Opens the checkpoint file at `path`, creating it if missing; `true` when this call
/// created it. Never blocks (a FIFO is refused, not waited on) and accepts only a regular
/// file.
///
/// An `O_EXCL` create fails on any symbolic link, even one to nothing, and a plain
/// `O_CREAT` open does not say whether it made the file: a link whose target is missing is
/// followed here, a hop at a time, and the target created with `O_EXCL`, so that a failure
/// later removes only a file this call made (see [`OffsetCheckpoint::open_or_create`]). A
/// file removed between the exclusive create (which found it) and the open is tried again,
/// [`VANISHED_TRIES`] times; a path that still gives neither is opened without `O_CREAT`
/// (its error, say `ELOOP` or `ENOENT`, is returned), never created by an open that could
/// not tell it made the file.
fn open_file(path: &Path) -> Result<(File, bool)> {
    let mut opts = OpenOptions::new();
    opts.read(true).write(true).mode(0o666);
    // Errors name the path as given, not the link target reached.
    let named = |e: Error| match e {
        Error::Io { op, source, .. } => Error::io(path, op, source),
        Error::NotRegularFile { found, .. } => Error::NotRegularFile {
            path: path.to_path_buf(),
            found,
        },
        e => e,
    };
    let mut at = path.to_path_buf();
    let (mut hops, mut vanished) = (0, 0);
    // As many hops as Linux follows (MAXSYMLINKS) before it gives ELOOP.
    while hops < 40 && vanished < VANISHED_TRIES {
        match crate::file::open_regular(&at, opts.clone().create_new(true)) {
            Ok(f) => return Ok((f, true)),
            Err(Error::Io { source, .. }) if source.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => return Err(named(e)),
        }
        #[cfg(test)]
        run_hook(At::Exists, &at);
        match crate::file::open_regular(&at, &mut opts) {
            Ok(f) => return Ok((f, false)),
            Err(Error::Io { source, .. }) if source.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(named(e)),
        }
        #[cfg(test)]
        run_hook(At::Vanished, &at);
        // There (the exclusive create says) and not there (the open says): a link to a
        // missing file, whose target is tried next; or a file removed under us, tried again.
        match std::fs::read_link(&at) {
            // Relative to the link's directory; an absolute target replaces the path.
            Ok(target) => {
                at = at.parent().unwrap_or(Path::new("")).join(target);
                hops += 1;
            }
            Err(_) => vanished += 1,
        }
    }
    crate::file::open_regular(path, &mut opts).map(|f| (f, false))
}

/// Removes the file at `path` if it is `file`, which this call created: a failed create
/// leaves no file behind (through a link, the file the link names; see
/// [`crate::file::remove_if_ours`]). Left when it cannot be told to be that file, and when
/// anyone has written to it: another opener that took the new file for one found empty may
/// have written its record and mapped it meanwhile, and it is that opener's checkpoint now.
fn remove_created(path: &Path, file: &File) {
    if untouched(file) == Some(true)
        && let Ok(id) = crate::sys::file_id(file)
    {
        crate::file::remove_if_ours(path, id);
    }
}

/// Whether `file` is still as a create that failed leaves it: at most 64 bytes, all zero
/// (empty, or sized by the create). `None` when it cannot be read.
fn untouched(file: &File) -> Option<bool> {
    let len = file.metadata().ok()?.len();
    if len > CHECKPOINT_SIZE as u64 {
        return Some(false);
    }
    let mut bytes = [0u8; CHECKPOINT_SIZE];
    // Read, not loaded through a mapping: a hole reads as zeros (see `read_magic`).
    file.read_exact_at(&mut bytes[..len as usize], 0).ok()?;
    Some(bytes.iter().all(|&b| b == 0))
}

/// A directory that [`make_dirs`] made: its path, device and inode.
type MadeDir = (PathBuf, (u64, u64));

/// Makes the directory `dir` and any missing parents, as `create_dir_all` does, and adds
/// each one this call made to `made`, outermost first: a failed create removes those, and
/// only those ([`remove_made_dirs`]). One made meanwhile by someone else is not noted.
fn make_dirs(dir: &Path, made: &mut Vec<MadeDir>) -> std::io::Result<()> {
    match make_dir(dir, made) {
        Err(e) if e.kind() == ErrorKind::NotFound => {
            match dir.parent().filter(|up| !up.as_os_str().is_empty()) {
                Some(up) => make_dirs(up, made)?,
                None => return Err(e),
            }
            make_dir(dir, made)
        }
        r => r,
    }
}

/// One `mkdir` of `dir` (mode `0o777` less the umask), noted in `made` when it made it; a
/// directory already there is no error.
fn make_dir(dir: &Path, made: &mut Vec<MadeDir>) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::create_dir(dir) {
        Ok(()) => {
            // Not noted (so never removed) if it cannot be looked at.
            if let Ok(m) = std::fs::symlink_metadata(dir) {
                made.push((dir.to_path_buf(), (m.dev(), m.ino())));
            }
            Ok(())
        }
        Err(_) if dir.is_dir() => Ok(()),
        Err(e) => Err(e),
    }
}

/// Removes the directories of `made`, deepest first, each only while it is still the one
/// made and empty. The first one left ends it: its parents hold it.
fn remove_made_dirs(made: &[MadeDir]) {
    use std::os::unix::fs::MetadataExt;
    for (dir, id) in made.iter().rev() {
        let ours = matches!(std::fs::symlink_metadata(dir), Ok(m) if (m.dev(), m.ino()) == *id);
        // `rmdir` refuses a directory with anything in it.
        if !ours || std::fs::remove_dir(dir).is_err() {
            break;
        }
    }
}

/// The first 8 bytes of `file` (fewer when it is shorter, the rest 0) as the magic. Read,
/// not loaded through a mapping: `pread` of a hole reads zeros, where a load faults a page
/// in, a SIGBUS on a full tmpfs.
fn read_magic(path: &Path, file: &File, len: u64) -> Result<u64> {
    let mut m = [0u8; 8];
    let n = (len as usize).min(8);
    file.read_exact_at(&mut m[..n], 0)
        .map_err(|e| Error::io(path, "read", e))?;
    // The mapped record is in the host's byte order, as ring files are.
    Ok(u64::from_ne_bytes(m))
}

/// The error for a file of `len` bytes, shorter than a checkpoint, that starts with `found`:
/// [`Error::TooShort`] for a truncated checkpoint, [`Error::BadFileMagic`] for anything else.
fn short_file(path: &Path, len: u64, found: u64) -> Error {
    if found == CHECKPOINT_MAGIC {
        Error::TooShort {
            path: path.to_path_buf(),
            kind: KIND,
            len,
            need: CHECKPOINT_SIZE as u64,
        }
    } else {
        Error::BadFileMagic {
            path: path.to_path_buf(),
            kind: KIND,
            found,
        }
    }
}

impl OffsetCheckpoint {
    /// Opens the checkpoint at `path`, creating it (mode `0o666` less the umask, and any missing
    /// parent directories: [`Error::Io`] of `mkdir`, naming the directory, when they cannot be
    /// made) when it does not exist or is empty; a file system with no room for its 64 bytes gives
    /// an [`Error::Io`] of `fallocate` (an empty file found is left at its length, never cut back:
    /// another opener may have sized and mapped it meanwhile). A call that fails (there, at its
    /// `mmap`, or at any later step) removes the file if it created it and nobody has written to it
    /// since, never one that was there before, and then the directories it made, those still empty.
    /// An existing file must be a checkpoint: the right magic ([`Error::BadFileMagic`], also for a
    /// short file that is something else), 64 bytes ([`Error::TooShort`]) and the right version
    /// ([`Error::BadFileVersion`]); a file refused is left as it was. Such a record without its
    /// magic (64 bytes, no offset) is a creation still at work or one cut short: the open waits for
    /// its creator to store the magic; once the record has not changed for 200 ms, the open
    /// finishes it itself (of several such opens, one does and the others open it as written; a
    /// record still changing after 2 s is refused), or refuses it with an [`Error::Io`] of
    /// `fallocate` when the file system has no room for its bytes. A record with the magic and the
    /// version 0 (a ringfire creator's, seen between its stores) is waited for in the same way;
    /// one unchanged for 200 ms (its creator killed between the stores) is finished by one of
    /// the opens that find it, as a new checkpoint with no offset and that open's name, and
    /// the others open it as written (one still changing after 2 s is refused). Of several opens
    /// that all find the file missing or empty, one writes the record and the others wait for it
    /// in the same way, then open it as written (its name, not theirs). This process's pid is
    /// stored into it. An empty `path` is [`Error::InvalidArgument`].
    pub fn open_or_create(path: impl AsRef<Path>, name: &str) -> Result<Self> {
        let path = path.as_ref();
        crate::file::not_empty(path, "offset")?;
        let mut made = Vec::new();
        let opened = Self::make_dirs_and_open(path, name, &mut made);
        if opened.is_err() {
            // A failed create leaves none of the directories it made for the file behind.
            remove_made_dirs(&made);
        }
        opened
    }

    /// [`Self::open_or_create`] once the path is known not to be empty, noting in `made` each
    /// directory it made.
    fn make_dirs_and_open(path: &Path, name: &str, made: &mut Vec<MadeDir>) -> Result<Self> {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        let mut tries = 0;
        let (file, created) = loop {
            tries += 1;
            // As ringfire does; its error matters only if the open then finds no file.
            let mkdir = match dir {
                Some(dir) => make_dirs(dir, made).map_err(|e| Error::io(dir, "mkdir", e)),
                None => Ok(()),
            };
            let opened = open_file(path);
            let missing = matches!(&opened, Err(Error::Io { source, .. })
                if source.kind() == ErrorKind::NotFound);
            match mkdir {
                // Why the file is missing (a read-only or full file system, no permission),
                // named on the directory, rather than only that it is.
                Err(mkdir) if missing => return Err(mkdir),
                // The directory was there, and then removed before the open by another
                // opener whose create failed (it had made it): made again, once.
                Ok(()) if missing && dir.is_some() && tries == 1 => {}
                _ => break opened?,
            }
        };
        let opened = Self::open_found(path, name, &file, created);
        if opened.is_err() && created {
            // A failed create leaves no file behind; never one that was there before.
            remove_created(path, &file);
        }
        opened
    }

    /// [`Self::make_dirs_and_open`] once `file`, at `path`, is open; `created` when this
    /// call made it.
    fn open_found(path: &Path, name: &str, file: &File, created: bool) -> Result<Self> {
        let mut len = file
            .metadata()
            .map_err(|e| Error::io(path, "fstat", e))?
            .len();
        // Only a file this call created, or an empty one, is new: anything else with bytes
        // in it is someone's data, checked below and never overwritten.
        let fresh = created || len == 0;
        #[cfg(test)]
        if fresh {
            run_hook(At::FoundNew, path);
        }
        if fresh {
            // Never shortened, even on failure: another opener that took the file for new
            // too may have sized and mapped it meanwhile (a SIGBUS at its next access).
            crate::file::grow_and_reserve(file, CHECKPOINT_SIZE as u64)
                .map_err(|(op, e)| Error::io(path, op, e))?;
            // Sized by this call, or by another opener that also took the file for new.
            len = CHECKPOINT_SIZE as u64;
        } else {
            let found = read_magic(path, file, len)?;
            if len < CHECKPOINT_SIZE as u64 {
                return Err(short_file(path, len, found));
            }
            if found == 0 && len == CHECKPOINT_SIZE as u64 {
                // Perhaps a creation cut short before it reserved its page (a hole), which
                // the loads below would fault in, a SIGBUS on a full tmpfs: claim it first.
                crate::file::reserve(file, len).map_err(|e| Error::io(path, "fallocate", e))?;
            }
        }
        let id = crate::sys::file_id(file).map_err(|e| Error::io(path, "fstat", e))?;
        let map = MmapOptions::new()
            .len(CHECKPOINT_SIZE)
            .map_raw(file)
            .map_err(|e| Error::io(path, "mmap", e))?;
        let (base, map_len) = (map.as_ptr(), map.len());
        let map = crate::cli::sigbus::Mapped::record(path, map, base, map_len);
        // SAFETY: the mapping is 64 page-aligned bytes kept alive in `_map` as long as the
        // region is used; every access below is atomic.
        let region =
            unsafe { Region::from_raw_parts(map.as_mut_ptr(), CHECKPOINT_SIZE) }.map_err(|e| {
                Error::Region {
                    path: path.to_path_buf(),
                    source: e,
                }
            })?;
        let cp = OffsetCheckpoint {
            region,
            _map: map,
            path: path.to_path_buf(),
            // Trimmed, as stored in the file and as the reference reports it.
            name: name.trim().to_string(),
            opener: std::process::id(),
            opener_generation: crate::sys::fork_generation(),
            opener_incarnation: crate::sys::own_incarnation(),
            id,
            abs_path: std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
        };
        // Of openers that all took the file for new, one writes the record; the others go on
        // as for a file found sized: they wait for its magic (or finish a record whose
        // writer was cut short) and open the record as written, its name and any offset its
        // consumer has saved since.
        let mut claim = if fresh { cp.claim_new() } else { None };
        // All the waits of this open together, however often its finishing is taken over.
        let start = Instant::now();
        let magic = loop {
            if let Some(seen) = claim.take() {
                #[cfg(test)]
                run_hook(At::Claimed, path);
                if cp.initialise(seen) {
                    return Ok(cp);
                }
                // This open stalled past [`CREATOR_WAIT`] and another took the record over:
                // the record is that one's, waited for and opened as any other.
            }
            // Acquire: pairs with the creator's release store of the magic.
            let magic = cp.a64(OFF_MAGIC).load(Ordering::Acquire);
            #[cfg(test)]
            if magic == 0 {
                run_hook(At::MagicZero, path);
            }
            if magic != 0 || len != CHECKPOINT_SIZE as u64 {
                break magic;
            }
            match cp.await_creator(start) {
                Creation::Finished(m) => break m,
                // A creation cut short between sizing the file and storing the magic (a
                // crash) leaves 64 zero bytes, or some of `initialise`'s fields written: no
                // offset was ever saved there (no open succeeded before the magic), so it is
                // finished now rather than refused for ever, by the one opener that took it
                // over. A creator slower than the wait finds its claim gone and writes
                // nothing (see `initialise`); neither writes the offset.
                Creation::Claimed(seen) => claim = Some(seen),
                Creation::Not => break 0,
            }
        };
        if magic != CHECKPOINT_MAGIC {
            return Err(Error::BadFileMagic {
                path: path.to_path_buf(),
                kind: KIND,
                found: magic,
            });
        }
        // Acquire: pairs with the release store of the version by an opener that finished a
        // record found without it (see `finish_version`).
        let mut version = cp.a32(OFF_VERSION).load(Ordering::Acquire);
        if version == 0 {
            #[cfg(test)]
            run_hook(At::VersionZero, path);
            // ringfire 0.5.2's creator writes its record as one plain struct store, with no
            // fence: compiled into a store of the magic and then one of the version (x86_64),
            // or seen in any order (a weakly ordered CPU), its magic can be seen without its
            // version for an instant. Waited for as a magic is, and finished by one opener
            // when its creator was killed between the two stores.
            version = cp.await_version(start);
        }
        if version != CHECKPOINT_VERSION {
            return Err(Error::BadFileVersion {
                path: path.to_path_buf(),
                kind: KIND,
                found: version,
            });
        }
        // Relaxed: the pid is informational.
        cp.a32(OFF_PID).store(std::process::id(), Ordering::Relaxed);
        Ok(cp)
    }

    /// Takes the writing of a new record, for an open that took the file for new: the version
    /// goes from 0 to ours, which only one of several such openers (a creator, openers that
    /// found the file empty) can do. The others wait for the winner's magic.
    fn claim(&self) -> bool {
        // Relaxed: the one word's order of changes decides who wins; the record itself is
        // published by the magic's release store.
        self.a32(OFF_VERSION)
            .compare_exchange(0, CHECKPOINT_VERSION, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    /// [`Self::claim`] for an open that took the file for new: the time the record held
    /// when it was claimed (for [`Self::initialise`]), or `None` if another opener won.
    fn claim_new(&self) -> Option<u64> {
        // Loaded before the claim: nobody takes the record over (which changes the time)
        // before it is claimed.
        let updated = self.a64(OFF_UPDATED).load(Ordering::Relaxed);
        self.claim().then_some(updated)
    }

    /// Writes the record of a new checkpoint into a file of 64 zero bytes (or one a
    /// creation cut short left), magic last, for an open that claimed it when its time was
    /// `seen`; `false`, writing nothing, when the claim is no longer this open's.
    ///
    /// An open that stalls for over [`CREATOR_WAIT`] after its claim (preempted, stopped,
    /// swapped out) can be taken over by another opener, which changes the time (see
    /// [`Self::take_over`]), writes the record and opens it; its consumer may save offsets.
    /// So this open first stamps the time by one compare-exchange from `seen`: if that fails,
    /// the record is someone else's and it writes nothing. That check and the stores after it
    /// cannot be one atomic step without a change of the format (a lock, or a word that
    /// every store checks), so an open that stalls for over [`CREATOR_WAIT`] *between* the
    /// stamp and the magic can still be taken over and then write after the other opener:
    /// its name over the other's (word by word, so the two may mix), the version and the
    /// magic (the values already there) and its pid (which every attach and save stores
    /// anyway). Never the offset, which this never writes (0 in a new file), nor the time,
    /// stamped before the stall: an offset saved since, and its time, stay.
    fn initialise(&self, seen: u64) -> bool {
        let stamp = now_other_than(seen);
        // Relaxed: as in `claim`; the record is published by the magic. Creation stamps the
        // time too, as the reference does (spec §13: the whole struct is written).
        if self
            .a64(OFF_UPDATED)
            .compare_exchange(seen, stamp, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        // A file being created (or one holding only zeros) has no reader of the name before
        // the magic below.
        self.write_name();
        store_version_pid(&self.region, std::process::id());
        // Release: a reader that sees the magic sees the whole record.
        self.a64(OFF_MAGIC)
            .store(CHECKPOINT_MAGIC, Ordering::Release);
        true
    }

    /// For a file whose magic was loaded as 0: waits for a creator still writing the record
    /// to store its magic, as long as the record is what a creation leaves before it
    /// ([`Self::is_unfinished_creation`]). The creator stores the magic microseconds after it
    /// sized the file: waiting for it, rather than writing the record again at once, keeps
    /// the creator's record (its name, should ours differ).
    ///
    /// A record whose claim (the version and the time, see [`Self::take_over`]) has not
    /// changed for [`CREATOR_WAIT`] is a creation cut short: this open then takes its
    /// finishing over, and of several that try, one does; the others wait for its magic in
    /// the same way. A change of the claim (a creator storing its fields, an opener taking
    /// the record over) starts the wait again, for [`CREATOR_WAIT_MAX`] from `start` in all.
    fn await_creator(&self, start: Instant) -> Creation {
        let mut seen = self.claim_seen();
        let mut since = start;
        loop {
            // The snapshot first, then the magic: a snapshot that is no creation's because
            // the creator stored its magic since the last look and its consumer has saved an
            // offset (which comes after the magic, see `is_unfinished_creation`) is then
            // seen with that magic, not taken for somebody's data.
            let unfinished = self.is_unfinished_creation();
            // Acquire: pairs with the creator's release store of the magic.
            let magic = self.a64(OFF_MAGIC).load(Ordering::Acquire);
            if magic != 0 {
                return Creation::Finished(magic);
            }
            if !unfinished {
                return Creation::Not;
            }
            let now = Instant::now();
            if now.duration_since(start) >= CREATOR_WAIT_MAX {
                return Creation::Not;
            }
            let claim = self.claim_seen();
            if claim != seen {
                // Someone at work on the record: waited for anew.
                (seen, since) = (claim, now);
            } else if now.duration_since(since) >= CREATOR_WAIT {
                #[cfg(test)]
                run_hook(At::WaitedOut, &self.path);
                if let Some(updated) = self.take_over(seen) {
                    return Creation::Claimed(updated);
                }
                // Another opener took it over first: its record is waited for.
                (seen, since) = (self.claim_seen(), Instant::now());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The record's claim, as [`Self::take_over`] changes it: the version and the time.
    fn claim_seen(&self) -> (u32, u64) {
        // Relaxed: compared, then changed only by a compare-exchange.
        (
            load_version(&self.region),
            self.a64(OFF_UPDATED).load(Ordering::Relaxed),
        )
    }

    /// Takes over the writing of a record without its magic whose claim was `seen` for
    /// the whole wait, by one compare-exchange of the word that tells: the version from 0
    /// to ours when nobody had claimed the record ([`Self::claim`], which a new file's
    /// openers also race for), otherwise the time from what was seen to now. Of several
    /// openers that saw the same claim, one succeeds (and has the time the record holds
    /// since, for [`Self::initialise`]); the others then see it changed.
    fn take_over(&self, (version, updated): (u32, u64)) -> Option<u64> {
        if version == 0 {
            return self.claim().then_some(updated);
        }
        let stamp = now_other_than(updated);
        // Relaxed: as in `claim`; `initialise` publishes the record by the magic.
        self.a64(OFF_UPDATED)
            .compare_exchange(updated, stamp, Ordering::Relaxed, Ordering::Relaxed)
            .ok()
            .map(|_| stamp)
    }

    /// For a record whose magic is there and whose version was loaded as 0: waits for a
    /// creator still writing the record to store the version, and returns the version.
    ///
    /// A ringfire 0.5.2 creator killed between its store of the magic and that of the
    /// version leaves such a record for good: no open of either project accepts it, so no
    /// consumer ever saved an offset there, and nothing else will ever finish it. Once the
    /// time (the word a finishing opener claims, see [`Self::finish_version`]) and the
    /// version have not changed for [`CREATOR_WAIT`], this open takes the finishing over by
    /// one compare-exchange of the time, of several such opens one, and returns our version
    /// once it has written the record; the others wait for its version and open the record
    /// as it wrote it. A change of the time starts the wait again; the version still 0 after
    /// [`CREATOR_WAIT_MAX`] from `start` is returned as 0 (refused).
    fn await_version(&self, start: Instant) -> u32 {
        let mut seen = self.a64(OFF_UPDATED).load(Ordering::Relaxed);
        let mut since = Instant::now();
        loop {
            // The offset before the version: one loaded while the version is still 0 is no
            // consumer's save (every save comes after a version was seen or stored).
            let offset = self.a64(OFF_SEQ).load(Ordering::Relaxed);
            // Acquire: pairs with the finishing opener's release store of the version.
            let version = self.a32(OFF_VERSION).load(Ordering::Acquire);
            let now = Instant::now();
            if version != 0 || now.duration_since(start) >= CREATOR_WAIT_MAX {
                return version;
            }
            // Relaxed: compared, then changed only by a compare-exchange.
            let updated = self.a64(OFF_UPDATED).load(Ordering::Relaxed);
            if updated != seen {
                // Someone at work on the record: waited for anew.
                (seen, since) = (updated, now);
            } else if now.duration_since(since) >= CREATOR_WAIT {
                #[cfg(test)]
                run_hook(At::WaitedOut, &self.path);
                // The time's compare-exchange (the version is not the word claimed here).
                if let Some(stamp) = self.take_over((CHECKPOINT_VERSION, seen)) {
                    #[cfg(test)]
                    run_hook(At::Claimed, &self.path);
                    if self.finish_version(stamp, offset) {
                        return CHECKPOINT_VERSION;
                    }
                }
                // Another opener took it over: its version is waited for.
                (seen, since) = (
                    self.a64(OFF_UPDATED).load(Ordering::Relaxed),
                    Instant::now(),
                );
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Finishes a record with the magic and the version 0 (see [`Self::await_version`]) for an
    /// open that took it over by stamping the time `stamp`, when the offset was `offset`;
    /// `false`, writing nothing, if the time has changed since (another opener took it over
    /// from this one, stalled).
    ///
    /// The finished record is a new checkpoint's: our version, this process's pid, the time
    /// of the takeover, this consumer's name, and the offset 0 (never committed). What the
    /// record held there is not a ringfire creator's: it stores the offset, time and name
    /// after the version, so they are zeros, or leftovers of a shorter file it extended
    /// (`set_len` keeps a file's first bytes), and an offset taken from them would resume
    /// the consumer at an arbitrary sequence. The offset is cleared by one compare-exchange
    /// from the value loaded while the version was 0, so that a save made since (by the
    /// consumer of a ringfire creator that was stalled, not killed, and has stored its
    /// version meanwhile) is not undone. The version is stored last, with release: an open
    /// that sees it sees the record.
    ///
    /// Beyond this process's control: a ringfire creator stalled for over [`CREATOR_WAIT`]
    /// between its two stores, not killed, goes on after this finishing with plain stores of
    /// its whole record but the magic, the offset 0 among them: an offset that this
    /// checkpoint's consumer saved in between is lost (the next attach starts as one without a
    /// saved offset), and the name becomes its own. As in [`Self::initialise`], an open of ours
    /// stalled between the check below and its stores can write its name and pid after
    /// another opener's takeover, never the offset (a compare-exchange from a value loaded
    /// before the version was stored) nor the time.
    fn finish_version(&self, stamp: u64, offset: u64) -> bool {
        // Relaxed: the claim is only ever changed by a compare-exchange.
        if self.a64(OFF_UPDATED).load(Ordering::Relaxed) != stamp {
            return false;
        }
        // Nobody reads the name of a record without its version (every open waits for or
        // refuses it).
        self.write_name();
        // Relaxed: published by the version's release store below. A failure is a save
        // made since, kept.
        let _ = self
            .a64(OFF_SEQ)
            .compare_exchange(offset, 0, Ordering::Relaxed, Ordering::Relaxed);
        self.a32(OFF_PID)
            .store(std::process::id(), Ordering::Relaxed);
        // Release: an open that sees the version sees the record.
        self.a32(OFF_VERSION)
            .store(CHECKPOINT_VERSION, Ordering::Release);
        true
    }

    /// Writes this consumer's name into the record, NUL-padded to 32 bytes (at most 31 of
    /// it), for an open that writes a record nobody reads yet ([`Self::initialise`],
    /// [`Self::finish_version`]).
    fn write_name(&self) {
        let mut name_buf = [0u8; 32];
        let n = self.name.len().min(31);
        name_buf[..n].copy_from_slice(&self.name.as_bytes()[..n]);
        // SAFETY: [32, 64) is inside the 64-byte region; the callers' records have no reader
        // of these bytes yet.
        unsafe { self.region.write_words(OFF_NAME, &name_buf) };
    }

    /// Whether the 64 bytes (magic 0) are what a creation stopped inside [`Self::initialise`]
    /// can leave: no offset (nothing stores one before the magic), the version 0 or ours,
    /// and a name field that is NUL-padded (as `initialise` writes it, or zero). 64 zero
    /// bytes (a creation stopped before `initialise`) are such a file too.
    fn is_unfinished_creation(&self) -> bool {
        // Relaxed (all but the offset): a snapshot; a creator writing meanwhile writes what
        // `initialise` does.
        let version = load_version(&self.region);
        let mut name = [0u8; 32];
        for (i, chunk) in name.chunks_exact_mut(8).enumerate() {
            let w = self.a64(OFF_NAME + 8 * i).load(Ordering::Relaxed);
            chunk.copy_from_slice(&w.to_ne_bytes());
        }
        let used = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        // Acquire: pairs with `save`'s release store. The saving process had loaded (or
        // stored) the magic before it, so a caller that sees an offset here and then loads
        // the magic sees it stored.
        self.a64(OFF_SEQ).load(Ordering::Acquire) == 0
            && (version == 0 || version == CHECKPOINT_VERSION)
            && name[used..].iter().all(|&b| b == 0)
    }

    /// Opens the default checkpoint of consumer `name` of the ring at `ring`
    /// ([`default_path`]). An empty `ring` is [`Error::InvalidArgument`], as every attach
    /// to a ring says.
    pub fn for_consumer(ring: impl AsRef<Path>, name: &str) -> Result<Self> {
        let ring = ring.as_ref();
        // Its default path would be `/dev/shm/ring_<name>.offset`, shared by every such call.
        crate::file::not_empty(ring, "ring")?;
        Self::open_or_create(default_path(ring, name), name)
    }

    fn a64(&self, off: usize) -> ringwire_core::sync::A64<'_> {
        // SAFETY: only called with 8-aligned offsets 0..=56 of the 64-byte region.
        unsafe { self.region.a64(off) }
    }

    fn a32(&self, off: usize) -> ringwire_core::sync::A32<'_> {
        // SAFETY: only called with the 4-aligned offsets 8 (the version, also accessed at
        // this size by store_version_pid/load_version) and 12 (the pid) of the 64-byte
        // region.
        unsafe { self.region.a32(off) }
    }

    /// The last committed sequence, or `None` if nothing was ever committed.
    pub fn load(&self) -> Option<u64> {
        // Acquire: pairs with save's release store.
        let v = self.a64(OFF_SEQ).load(Ordering::Acquire);
        (v != 0).then_some(v)
    }

    /// Commits `seq` as the last processed sequence (release store), then the wall-clock
    /// time (relaxed) and this process's pid. It saves whoever calls it, as ringfire's does;
    /// [`RingConsumer::commit_offset`](crate::RingConsumer::commit_offset) is the call that
    /// refuses a copy of the handle in a forked child ([`Error::ForkedCheckpoint`]).
    pub fn save(&self, seq: u64) {
        // Release: whoever loads this value sees the processing that preceded it.
        self.a64(OFF_SEQ).store(seq, Ordering::Release);
        // Relaxed: informational.
        self.a64(OFF_UPDATED).store(now_ns(), Ordering::Relaxed);
        // Relaxed: informational.
        self.a32(OFF_PID)
            .store(std::process::id(), Ordering::Relaxed);
    }

    /// Wall-clock nanoseconds since the Unix epoch of the last save, or of the file's
    /// creation when nothing was saved yet. 0 only in a file whose creator stored 0 (an
    /// older ringwire) or a clock before 1970; the clock is not monotonic.
    pub fn updated_ns(&self) -> u64 {
        // Relaxed: informational.
        self.a64(OFF_UPDATED).load(Ordering::Relaxed)
    }

    /// ringfire's name for [`OffsetCheckpoint::updated_ns`]: the same value.
    pub fn updated_nanos(&self) -> u64 {
        self.updated_ns()
    }

    /// The pid of the last process that attached or saved.
    pub fn pid(&self) -> u32 {
        // Relaxed: informational.
        self.a32(OFF_PID).load(Ordering::Relaxed)
    }

    /// Refuses ([`Error::ForkedCheckpoint`]) a commit made through a copy of this handle
    /// that a child forked since the open inherited, while the process that opened the file
    /// runs: parent and child would each commit their own cursor to the one file. Once the
    /// opener has exited (a daemon's parent, reaped or not, its pid perhaps another
    /// process's since) the copy is the checkpoint's only user and may commit. A relaxed load when nothing forked. [`OffsetCheckpoint::save`] itself
    /// does not check, as ringfire's does not.
    pub(crate) fn check_committer(&self) -> Result<()> {
        if crate::sys::forked_since(self.opener_generation)
            && crate::sys::process_running(self.opener, self.opener_incarnation)
        {
            return Err(Error::ForkedCheckpoint {
                path: self.path.clone(),
                opener: self.opener,
            });
        }
        Ok(())
    }

    /// Fails with [`Error::CheckpointMoved`] when the path no longer names the mapped file
    /// (removed, or replaced by another file): an offset saved to it is then lost to the
    /// next attach. A `stat` of the path; a path that cannot be looked at counts as moved.
    pub(crate) fn check_at_path(&self) -> Result<()> {
        match crate::sys::path_id(&self.abs_path) {
            Ok(Some(id)) if id == self.id => Ok(()),
            _ => Err(Error::CheckpointMoved {
                path: self.path.clone(),
            }),
        }
    }

    /// The checkpoint's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The consumer name given at open, with surrounding whitespace trimmed (the file
    /// keeps at most 31 bytes of it).
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl std::fmt::Debug for OffsetCheckpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OffsetCheckpoint")
            .field("path", &self.path)
            .field("offset", &self.load())
            .finish()
    }
}

/// Stores the version and `pid`, each as the u32 field it is (spec §13): one 64-bit word
/// with the version in its low half would put the pid first on a big-endian host. Relaxed:
/// a new record is published by the magic's release store.
fn store_version_pid(region: &Region, pid: u32) {
    // SAFETY: offsets 8 and 12 are 4-aligned and inside the 64-byte region; both fields
    // are only ever accessed as 32-bit atomics.
    unsafe {
        region
            .a32(OFF_VERSION)
            .store(CHECKPOINT_VERSION, Ordering::Relaxed);
        region.a32(OFF_PID).store(pid, Ordering::Relaxed);
    }
}

/// The version field. Relaxed: it is immutable once the magic is published (and a snapshot
/// otherwise).
fn load_version(region: &Region) -> u32 {
    // SAFETY: as in store_version_pid.
    unsafe { region.a32(OFF_VERSION) }.load(Ordering::Relaxed)
}

/// Tests: a hook given the checkpoint's path (see [`on`]).
#[cfg(test)]
type PathHook = Box<dyn FnMut(&Path)>;

/// Tests: the points of an open where a test can run a hook of its own (see [`on`]), as a
/// creator or its consumer in another process would act there.
#[cfg(test)]
#[derive(Clone, Copy)]
enum At {
    /// The open has just loaded the magic of an existing file as 0.
    MagicZero,
    /// The open found the file missing (and made it) or empty, and has not sized it yet.
    FoundNew,
    /// The open took the file for new, or waited out a creation cut short, and has just
    /// claimed the writing of its record, before it writes any of it.
    Claimed,
    /// The open has just loaded the version of a record with the magic as 0.
    VersionZero,
    /// The open has waited out a record without its magic (a creation cut short), and has
    /// not yet taken its finishing.
    WaitedOut,
    /// The open's exclusive create has just found a file at the path (or the link target).
    Exists,
    /// The open has just found no file at the path that its exclusive create found there.
    Vanished,
}

#[cfg(test)]
thread_local! {
    /// Tests: each point's hook for the opens of this thread, indexed by [`At`].
    static HOOKS: std::cell::RefCell<[Option<PathHook>; 7]> =
        const { std::cell::RefCell::new([const { None }; 7]) };
}

/// Tests: runs `hook` with the path each time an open of this thread reaches the point
/// `at`, until the returned guard drops (also when the test unwinds).
#[cfg(test)]
fn on(at: At, hook: impl FnMut(&Path) + 'static) -> impl Drop {
    struct Restore(At);
    impl Drop for Restore {
        fn drop(&mut self) {
            HOOKS.with_borrow_mut(|h| h[self.0 as usize] = None);
        }
    }
    HOOKS.with_borrow_mut(|h| h[at as usize] = Some(Box::new(hook)));
    Restore(at)
}

/// Tests: runs the hook of point `at`, if this thread has one. It is taken out while it
/// runs, so that it may itself open the file (in this thread) without reaching itself.
#[cfg(test)]
fn run_hook(at: At, path: &Path) {
    let Some(mut hook) = HOOKS.with_borrow_mut(|h| h[at as usize].take()) else {
        return;
    };
    hook(path);
    HOOKS.with_borrow_mut(|h| {
        // Unless the hook put another one there meanwhile.
        if h[at as usize].is_none() {
            h[at as usize] = Some(hook);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_tmp::TmpPath;

    /// 64 bytes as a creator leaves them inside `initialise`, before its magic: the name
    /// `name`, the version and a pid.
    fn before_the_magic(name: &[u8]) -> [u8; CHECKPOINT_SIZE] {
        let mut b = [0u8; CHECKPOINT_SIZE];
        b[OFF_NAME..OFF_NAME + name.len()].copy_from_slice(name);
        b[OFF_VERSION..OFF_VERSION + 4].copy_from_slice(&CHECKPOINT_VERSION.to_ne_bytes());
        b[OFF_PID..OFF_PID + 4].copy_from_slice(&4242u32.to_ne_bytes());
        b
    }

    /// Writes `bytes` at `at` into the file at `path`, as another process's store into its
    /// mapping lands.
    fn store_at(path: &Path, at: usize, bytes: &[u8]) {
        let f = OpenOptions::new().write(true).open(path).unwrap();
        f.write_all_at(bytes, at as u64).unwrap();
    }

    /// An open that loads the magic as 0 just before the creator stores it, and looks at the
    /// record again after the creator's consumer has committed an offset, opens the
    /// checkpoint with that offset. It took the offset for somebody's data and refused the
    /// checkpoint (`BadFileMagic { found: 0 }`).
    #[test]
    fn an_open_that_loads_the_magic_just_before_the_creator_stores_it_opens_the_file() {
        let path = TmpPath::new("ckpt-race-saved");
        std::fs::write(&path, before_the_magic(b"algo")).unwrap();
        let _hook = on(At::MagicZero, |p| {
            store_at(p, OFF_MAGIC, &CHECKPOINT_MAGIC.to_ne_bytes());
            store_at(p, OFF_SEQ, &5u64.to_ne_bytes());
        });
        let cp = OffsetCheckpoint::open_or_create(&path, "algo").unwrap();
        assert_eq!(cp.load(), Some(5));
    }

    /// An open that finds a checkpoint still being written (magic 0, no offset) waits for
    /// its creator to store the magic, and leaves the creator's record as it is. It wrote
    /// the record again itself at once, its own name over the creator's.
    #[test]
    fn an_open_waits_for_a_creator_still_writing_the_checkpoint() {
        let path = TmpPath::new("ckpt-race-writing");
        std::fs::write(&path, before_the_magic(b"creator")).unwrap();
        let (seen, told) = std::sync::mpsc::channel();
        let _hook = on(At::MagicZero, move |_| {
            let _ = seen.send(());
        });
        let creator = {
            let path = path.path().clone();
            std::thread::spawn(move || {
                told.recv_timeout(std::time::Duration::from_secs(10))
                    .unwrap();
                std::thread::sleep(std::time::Duration::from_millis(5));
                store_at(&path, OFF_MAGIC, &CHECKPOINT_MAGIC.to_ne_bytes());
            })
        };
        let cp = OffsetCheckpoint::open_or_create(&path, "other").unwrap();
        creator.join().unwrap();
        assert_eq!(cp.load(), None);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[OFF_NAME..OFF_NAME + 8], b"creator\0");
    }

    /// Two openers that both find the checkpoint file empty: the one that writes the record
    /// first keeps it, and the other opens it as written, with the offset saved to it since.
    /// Both wrote the whole record, the later one's name over the first one's.
    #[test]
    fn of_two_openers_that_find_the_file_empty_the_later_keeps_the_first_ones_record() {
        let path = TmpPath::new("ckpt-race-empty");
        std::fs::write(&path, b"").unwrap();
        // The other opener, in a thread without hooks, from its look at the file to its
        // commit while this thread's open is between its look (empty) and its sizing.
        let _hook = on(At::FoundNew, |p| {
            let p = p.to_path_buf();
            std::thread::spawn(move || {
                let cp = OffsetCheckpoint::open_or_create(&p, "first").unwrap();
                cp.save(7);
            })
            .join()
            .unwrap();
        });
        let cp = OffsetCheckpoint::open_or_create(&path, "second").unwrap();
        assert_eq!((cp.load(), cp.pid()), (Some(7), std::process::id()));
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[OFF_NAME..OFF_NAME + 6], b"first\0");
    }

    /// Another opener of `p`, named "first", on its own thread: once it has claimed the record
    /// (before writing any of it) it tells `claimed` and pauses 20 ms.
    fn an_opener_that_pauses_once_claimed(
        p: &Path,
        claimed: std::sync::mpsc::Sender<()>,
    ) -> std::thread::JoinHandle<Result<()>> {
        let p = p.to_path_buf();
        std::thread::spawn(move || {
            let _pause = on(At::Claimed, move |_| {
                let _ = claimed.send(());
                std::thread::sleep(Duration::from_millis(20));
            });
            OffsetCheckpoint::open_or_create(&p, "first").map(drop)
        })
    }

    /// Opens `path` as "second" while another opener ("first",
    /// [`an_opener_that_pauses_once_claimed`]) waits out what the file holds too: that one
    /// starts when this thread's open has waited it out, and both have when this one goes
    /// on. Returns this opener's handle and the file's bytes, read before the other opener
    /// is joined (its record is already whole then).
    fn open_beside_another_that_waits_it_out(path: &Path) -> (OffsetCheckpoint, Vec<u8>) {
        let first = std::rc::Rc::new(std::cell::RefCell::new(None));
        let hooked = first.clone();
        let (claimed, told) = std::sync::mpsc::channel();
        let _hook = on(At::WaitedOut, move |p| {
            if hooked.borrow().is_some() {
                return;
            }
            // It pauses once it has taken the finishing over, before writing any of it.
            *hooked.borrow_mut() = Some(an_opener_that_pauses_once_claimed(p, claimed.clone()));
            told.recv_timeout(Duration::from_secs(10)).unwrap();
        });
        let cp = OffsetCheckpoint::open_or_create(path, "second").unwrap();
        let bytes = std::fs::read(path).unwrap();
        let first = first.borrow_mut().take().expect("the other opener ran");
        first.join().unwrap().unwrap();
        (cp, bytes)
    }

    /// Two openers that both find the checkpoint file empty, the first one still writing the
    /// record when the other looks: the other waits for it and opens it. It wrote the record
    /// again at once, its own name in the file before the first one's.
    #[test]
    fn an_opener_that_finds_the_file_empty_waits_for_another_writing_the_record() {
        let path = TmpPath::new("ckpt-race-empty-writing");
        std::fs::write(&path, b"").unwrap();
        let first = std::rc::Rc::new(std::cell::RefCell::new(None));
        let (claimed, told) = std::sync::mpsc::channel();
        let hooked = first.clone();
        let _hook = on(At::FoundNew, move |p| {
            *hooked.borrow_mut() = Some(an_opener_that_pauses_once_claimed(p, claimed.clone()));
            // Both have looked at the file (empty) when this thread's open sizes it.
            told.recv_timeout(Duration::from_secs(10)).unwrap();
        });
        let cp = OffsetCheckpoint::open_or_create(&path, "second").unwrap();
        // Read before the first opener is joined: its record is already whole.
        let bytes = std::fs::read(&path).unwrap();
        let first = first.borrow_mut().take().expect("the other opener ran");
        first.join().unwrap().unwrap();
        assert_eq!(cp.load(), None);
        assert_eq!(&bytes[..8], &CHECKPOINT_MAGIC.to_ne_bytes());
        assert_eq!(&bytes[OFF_NAME..OFF_NAME + 6], b"first\0");
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
    }

    /// Two openers that both find a creation cut short (the record claimed and named, no
    /// magic) and wait it out: one finishes the record, and the other opens it as that one
    /// wrote it. Both finished it, each its own name, the later one's over the first's.
    #[test]
    fn of_two_openers_that_wait_out_a_creation_cut_short_one_finishes_it() {
        let path = TmpPath::new("ckpt-race-crashed");
        std::fs::write(&path, before_the_magic(b"crashed")).unwrap();
        let (cp, bytes) = open_beside_another_that_waits_it_out(&path);
        assert_eq!((cp.load(), cp.pid()), (None, std::process::id()));
        assert_eq!(&bytes[..8], &CHECKPOINT_MAGIC.to_ne_bytes());
        assert_eq!(&bytes[OFF_NAME..OFF_NAME + 6], b"first\0");
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
    }

    /// A creator that stalls after claiming the new record for longer than the wait, while
    /// another opener takes the record over, opens it and saves an offset, then writes
    /// nothing when it goes on: it opens the record as the other wrote it, with the offset.
    /// It wrote its record anyway, its name over the other opener's and the time of its
    /// creation over that of the other's save.
    #[test]
    fn a_creator_stalled_past_a_takeover_writes_nothing_and_opens_the_record() {
        let path = TmpPath::new("ckpt-race-stalled");
        let after_save = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let seen = after_save.clone();
        let _stall = on(At::Claimed, move |p| {
            if !seen.borrow().is_empty() {
                return;
            }
            // The other opener, in a thread without hooks: it waits this stalled creation
            // out, takes it over and writes its record; its consumer saves.
            let p = p.to_path_buf();
            let other = std::thread::spawn(move || {
                let cp = OffsetCheckpoint::open_or_create(&p, "taker").unwrap();
                cp.save(7);
                std::fs::read(&p).unwrap()
            });
            *seen.borrow_mut() = other.join().unwrap();
        });
        let cp = OffsetCheckpoint::open_or_create(&path, "stalled").unwrap();
        let after_save = after_save.borrow().clone();
        assert_eq!(&after_save[OFF_NAME..OFF_NAME + 6], b"taker\0");
        assert_eq!(cp.load(), Some(7));
        let bytes = std::fs::read(&path).unwrap();
        // All but the pid, which this open stores as any attach does.
        assert_eq!(bytes[..OFF_PID], after_save[..OFF_PID]);
        assert_eq!(bytes[OFF_SEQ..], after_save[OFF_SEQ..]);
    }

    /// An open that finds the magic with the version still 0 waits for the version:
    /// ringfire 0.5.2's creator stores its record's magic and then its version (one plain
    /// struct write, compiled into two stores in that order on x86_64, and seen in any order
    /// on a weakly ordered CPU). It refused the checkpoint at once (`BadFileVersion { found:
    /// 0 }`).
    #[test]
    fn an_open_that_finds_the_magic_before_the_version_waits_for_the_version() {
        let path = TmpPath::new("ckpt-race-version");
        let mut record = [0u8; CHECKPOINT_SIZE];
        record[..8].copy_from_slice(&CHECKPOINT_MAGIC.to_ne_bytes());
        record[OFF_NAME..OFF_NAME + 2].copy_from_slice(b"rf");
        std::fs::write(&path, record).unwrap();
        let (seen, told) = std::sync::mpsc::channel();
        let _hook = on(At::VersionZero, move |_| {
            let _ = seen.send(());
        });
        let creator = {
            let path = path.path().clone();
            std::thread::spawn(move || {
                told.recv_timeout(Duration::from_secs(10)).unwrap();
                std::thread::sleep(Duration::from_millis(5));
                store_at(&path, OFF_VERSION, &CHECKPOINT_VERSION.to_ne_bytes());
            })
        };
        let cp = OffsetCheckpoint::open_or_create(&path, "algo").unwrap();
        creator.join().unwrap();
        assert_eq!((cp.load(), cp.pid()), (None, std::process::id()));
        drop(cp);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(
            &bytes[OFF_VERSION..OFF_VERSION + 4],
            CHECKPOINT_VERSION.to_ne_bytes()
        );
        assert_eq!(&bytes[OFF_NAME..OFF_NAME + 3], b"rf\0");
    }

    /// A record with the magic and the version 0 for good (a ringfire 0.5.2 creator killed
    /// between its two stores), the rest of it leftover bytes, is finished by one of two
    /// openers that wait it out, as a new checkpoint (our version, no offset, that opener's
    /// name); the other opens it as written, and so does a later open. Both were refused
    /// after the wait (`BadFileVersion { found: 0 }`), and so was every later open.
    #[test]
    fn a_record_left_without_its_version_is_finished_by_one_opener() {
        let path = TmpPath::new("ckpt-race-no-version");
        let mut record = [0xA5u8; CHECKPOINT_SIZE];
        record[..8].copy_from_slice(&CHECKPOINT_MAGIC.to_ne_bytes());
        record[OFF_VERSION..OFF_VERSION + 4].fill(0);
        std::fs::write(&path, record).unwrap();
        let start = Instant::now();
        let (cp, bytes) = open_beside_another_that_waits_it_out(&path);
        assert!(start.elapsed() >= CREATOR_WAIT);
        assert_eq!((cp.load(), cp.pid()), (None, std::process::id()));
        assert_eq!(&bytes[..8], &CHECKPOINT_MAGIC.to_ne_bytes());
        assert_eq!(
            &bytes[OFF_VERSION..OFF_VERSION + 4],
            CHECKPOINT_VERSION.to_ne_bytes()
        );
        assert_eq!(&bytes[OFF_SEQ..OFF_SEQ + 8], &[0; 8]);
        let mut name = [0u8; 32];
        name[..5].copy_from_slice(b"first");
        assert_eq!(&bytes[OFF_NAME..], &name);
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        drop(cp);
        let later = OffsetCheckpoint::open_or_create(&path, "third").unwrap();
        assert_eq!(later.load(), None);
        assert_eq!(&std::fs::read(&path).unwrap()[OFF_NAME..], &name);
    }

    /// A checkpoint created through a symbolic link that points nowhere yet makes the file
    /// the link names; when its bytes cannot be reserved (no space), that file is removed
    /// and the link left as it was. The open took the file it had just made for an empty
    /// one it found (an `O_CREAT` open does not say which), and left it there, empty. An
    /// empty file found at the path is still left there, empty.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[test]
    fn a_failed_create_through_a_dangling_link_leaves_no_target_behind() {
        let (target, link, chain, empty) = (
            TmpPath::new("ckpt-nospc-target"),
            TmpPath::new("ckpt-nospc-link"),
            TmpPath::new("ckpt-nospc-chain"),
            TmpPath::new("ckpt-nospc-empty"),
        );
        std::os::unix::fs::symlink(&*target, &*link).unwrap();
        // A link to that link, by its name relative to the directory they share.
        std::os::unix::fs::symlink(link.file_name().unwrap(), &*chain).unwrap();
        std::fs::write(&empty, b"").unwrap();
        let status = crate::test_fork::forked(10, || {
            if crate::test_fork::fail_call(libc::SYS_fallocate, libc::ENOSPC).is_err() {
                return 2;
            }
            let nospc = |r: Result<OffsetCheckpoint>| {
                matches!(r, Err(Error::Io { op: "fallocate", source, .. })
                    if source.kind() == ErrorKind::StorageFull)
            };
            let through_link = nospc(OffsetCheckpoint::open_or_create(&link, "algo"));
            let through_chain = nospc(OffsetCheckpoint::open_or_create(&chain, "algo"));
            let found_empty = nospc(OffsetCheckpoint::open_or_create(&empty, "algo"));
            // Which ones went wrong, one bit each.
            i32::from(!through_link) << 2
                | i32::from(!through_chain) << 3
                | i32::from(!found_empty) << 4
        });
        crate::test_fork::assert_exited_0(status, "creation without space");
        for l in [&link, &chain] {
            let t = std::fs::symlink_metadata(l).unwrap().file_type();
            assert!(t.is_symlink(), "{} was replaced", l.display());
        }
        assert!(
            std::fs::symlink_metadata(&target).is_err(),
            "the file made through the link was left behind"
        );
        assert_eq!(std::fs::read(&empty).unwrap(), b"", "the empty file found");
    }

    /// A create that fails (no space for the file's 64 bytes) after its exclusive create found
    /// a file that another process then removed, twice, before its open could open it,
    /// removes the file it made on the next try. Its last resort, a plain `O_CREAT` open,
    /// made the file without knowing it had: the failed create left it behind, empty.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[test]
    fn a_failed_create_after_the_file_vanished_twice_leaves_no_file_behind() {
        let path = TmpPath::new("ckpt-nospc-vanished");
        std::fs::write(&path, b"").unwrap();
        let status = crate::test_fork::forked(10, || {
            if crate::test_fork::fail_call(libc::SYS_fallocate, libc::ENOSPC).is_err() {
                return 2;
            }
            // Another process removes the file each time the exclusive create has found it,
            // and makes it again once, after the first open found it gone.
            let _gone = on(At::Exists, |p| std::fs::remove_file(p).unwrap());
            let mut again = true;
            let _back = on(At::Vanished, move |p| {
                if std::mem::take(&mut again) {
                    std::fs::write(p, b"").unwrap();
                }
            });
            let nospc = matches!(OffsetCheckpoint::open_or_create(&path, "algo"),
                Err(Error::Io { op: "fallocate", source, .. })
                    if source.kind() == ErrorKind::StorageFull);
            i32::from(!nospc) << 2
        });
        crate::test_fork::assert_exited_0(status, "creation without space");
        assert!(
            std::fs::symlink_metadata(&path).is_err(),
            "the file the create made was left behind"
        );
    }

    /// An open that finds the checkpoint file empty and cannot reserve its bytes (no space)
    /// never makes the file shorter: another opener may have sized the file and mapped it
    /// meanwhile, and keeps using it. The open cut the file back to 0 bytes, and that
    /// opener's next save was a SIGBUS.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[test]
    fn an_open_that_cannot_reserve_a_file_found_empty_never_shrinks_it() {
        let path = TmpPath::new("ckpt-nospc-shared");
        std::fs::write(&path, b"").unwrap();
        // A SIGBUS, in a file cut back to 0 bytes.
        another_opener_writes_during_an_open_without_space(&path, |other| other.load() != Some(9));
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), CHECKPOINT_SIZE);
    }

    /// A create that fails (no space for the file's 64 bytes) after another opener has
    /// written its record into the new file, and mapped it, leaves that file: it is the other
    /// opener's checkpoint now. It was removed, and every later commit of that opener's
    /// consumer failed (`CheckpointMoved`), its offsets lost to the next attach.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[test]
    fn a_failed_create_leaves_the_file_another_opener_has_written() {
        let path = TmpPath::new("ckpt-nospc-taken");
        another_opener_writes_during_an_open_without_space(&path, |other| {
            other.check_at_path().is_err()
        });
    }

    /// In a forked child whose `fallocate` fails with ENOSPC: an open of `path` for "algo"
    /// during which (at `At::FoundNew`) another opener writes its record ("other") into the
    /// file and opens it. The open must fail with the `fallocate` error, and the other
    /// opener's save of 9 must stay in the file; `broken` says whether the other opener's
    /// checkpoint, after that save, shows the defect the caller tests for.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn another_opener_writes_during_an_open_without_space(
        path: &Path,
        broken: impl FnOnce(&OffsetCheckpoint) -> bool,
    ) {
        let status = crate::test_fork::forked(10, || {
            if crate::test_fork::fail_call(libc::SYS_fallocate, libc::ENOSPC).is_err() {
                return 2;
            }
            // The other opener, between this open's look at the file (new or empty) and its
            // sizing: it writes its record (whose page is then allocated) and keeps the file
            // open.
            let other = std::rc::Rc::new(std::cell::RefCell::new(None));
            let hooked = other.clone();
            let _hook = on(At::FoundNew, move |p| {
                let mut record = before_the_magic(b"other");
                record[..8].copy_from_slice(&CHECKPOINT_MAGIC.to_ne_bytes());
                store_at(p, 0, &record);
                *hooked.borrow_mut() = OffsetCheckpoint::open_or_create(p, "other").ok();
            });
            let nospc = matches!(OffsetCheckpoint::open_or_create(path, "algo"),
                Err(Error::Io { op: "fallocate", source, .. })
                    if source.kind() == ErrorKind::StorageFull);
            let Some(other) = other.borrow_mut().take() else {
                return 3;
            };
            other.save(9);
            i32::from(!nospc) << 2 | i32::from(broken(&other)) << 3
        });
        crate::test_fork::assert_exited_0(status, "an open without space");
        let bytes = std::fs::read(path).unwrap();
        assert_eq!(&bytes[OFF_SEQ..OFF_SEQ + 8], &9u64.to_ne_bytes());
        assert_eq!(&bytes[OFF_NAME..OFF_NAME + 6], b"other\0");
    }

    /// A create that fails (no space for the file's 64 bytes) removes the directories it
    /// made for the file, deepest first, while they are empty: one that another process has
    /// put a file in meanwhile is left, with that file, and so is the directory that was
    /// there before. They were all left behind, empty.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[test]
    fn a_failed_create_removes_the_empty_directories_it_made() {
        let base = TmpPath::new("ckpt-nospc-dirs");
        std::fs::create_dir(&base).unwrap();
        let (alone, shared) = (base.join("alone"), base.join("shared"));
        let status = crate::test_fork::forked(10, || {
            if crate::test_fork::fail_call(libc::SYS_fallocate, libc::ENOSPC).is_err() {
                return 2;
            }
            let nospc = |r: Result<OffsetCheckpoint>| {
                matches!(r, Err(Error::Io { op: "fallocate", source, .. })
                    if source.kind() == ErrorKind::StorageFull)
            };
            let deep = nospc(OffsetCheckpoint::open_or_create(
                alone.join("b/c/algo.offset"),
                "algo",
            ));
            // Another process's file, put in the outer directory made while the open works.
            let other = shared.join("other");
            let _hook = on(At::FoundNew, move |_| std::fs::write(&other, b"x").unwrap());
            let beside = nospc(OffsetCheckpoint::open_or_create(
                shared.join("b/algo.offset"),
                "algo",
            ));
            // Which ones went wrong, one bit each.
            i32::from(!deep) << 2 | i32::from(!beside) << 3
        });
        crate::test_fork::assert_exited_0(status, "creation without space");
        let mut left: Vec<_> = walk(&base);
        left.sort();
        assert_eq!(left, ["shared", "shared/other"], "in {}", base.display());
        assert_eq!(std::fs::read(shared.join("other")).unwrap(), b"x");
    }

    /// A create whose mapping of the new file fails (a process at its limit of mappings)
    /// removes the file it made (through a link to a missing file: the file the link names,
    /// not the link), and then the directories it made for it; a file that was there before
    /// (empty, or a whole record) is left. The new file was removed only when its bytes could
    /// not be reserved: one whose `mmap` failed stayed behind, and so did its directories.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[test]
    fn a_create_whose_mapping_fails_leaves_no_file_behind() {
        let base = TmpPath::new("ckpt-nomap");
        std::fs::create_dir(&base).unwrap();
        let (new, deep, empty, whole) = (
            base.join("new.offset"),
            base.join("a/b/deep.offset"),
            base.join("empty.offset"),
            base.join("whole.offset"),
        );
        let link = base.join("link.offset");
        std::os::unix::fs::symlink("target.offset", &link).unwrap();
        std::fs::write(&empty, b"").unwrap();
        let mut record = before_the_magic(b"whole");
        record[..8].copy_from_slice(&CHECKPOINT_MAGIC.to_ne_bytes());
        std::fs::write(&whole, record).unwrap();
        let status = crate::test_fork::forked(10, || {
            if crate::test_fork::fail_shared_mmap(libc::ENOMEM).is_err() {
                return 2;
            }
            let refused = |p: &Path| {
                !matches!(OffsetCheckpoint::open_or_create(p, "algo"),
                    Err(Error::Io { op: "mmap", source, .. })
                        if source.raw_os_error() == Some(libc::ENOMEM))
            };
            // Which ones went wrong, one bit each.
            [&new, &deep, &link, &empty, &whole]
                .iter()
                .enumerate()
                .fold(0, |bits, (i, p)| bits | i32::from(refused(p)) << (i + 2))
        });
        crate::test_fork::assert_exited_0(status, "creation without a mapping");
        let mut left = walk(&base);
        left.sort();
        assert_eq!(
            left,
            ["empty.offset", "link.offset", "whole.offset"],
            "in {}",
            base.display()
        );
        assert_eq!(std::fs::read(&whole).unwrap(), record);
    }

    /// The paths under `dir`, relative to it, of everything there (not following links).
    fn walk(dir: &Path) -> Vec<String> {
        let mut found = Vec::new();
        let mut todo = vec![dir.to_path_buf()];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                found.push(p.strip_prefix(dir).unwrap().display().to_string());
                if std::fs::symlink_metadata(&p).unwrap().is_dir() {
                    todo.push(p);
                }
            }
        }
        found
    }

    /// The version (u32 at 8) and the pid (u32 at 12) are two fields in the host's byte
    /// order, as the rest of the mapped record (spec §13). They were stored and loaded as
    /// one 64-bit word with the version in its low half, which on a big-endian host put the
    /// pid at 8 and the version at 12: a save (which stores the pid at 12) then made the
    /// next open read the pid as the version and refuse the file (BadFileVersion).
    #[test]
    fn the_version_survives_a_save_of_the_pid_in_either_byte_order() {
        #[repr(C, align(8))]
        struct Record([u8; CHECKPOINT_SIZE]);
        let mut rec = Record([0; CHECKPOINT_SIZE]);
        // SAFETY: 64 aligned bytes that outlive the region, only accessed through it.
        let r = unsafe { Region::from_raw_parts(rec.0.as_mut_ptr(), CHECKPOINT_SIZE) }.unwrap();
        store_version_pid(&r, 4242);
        assert_eq!(load_version(&r), CHECKPOINT_VERSION);
        // What `save` and an attach store: the pid, at its own offset and size.
        // SAFETY: offset 12 is 4-aligned and inside the 64 bytes.
        unsafe { r.a32(OFF_PID) }.store(77, Ordering::Relaxed);
        assert_eq!(load_version(&r), CHECKPOINT_VERSION);
        let mut b = [0u8; 16];
        // SAFETY: the first 16 bytes, 8-aligned, inside the region.
        unsafe { r.read_words(0, &mut b) };
        assert_eq!(b[8..12], CHECKPOINT_VERSION.to_ne_bytes());
        assert_eq!(b[12..16], 77u32.to_ne_bytes());
    }

    #[test]
    fn a_checkpoint_of_an_interrupted_creation_is_finished_not_refused() {
        let path = crate::test_tmp::TmpPath::new("checkpoint-zero");
        // Sized, then the creator died before it stored anything.
        std::fs::write(&path, [0u8; CHECKPOINT_SIZE]).unwrap();
        let cp = OffsetCheckpoint::open_or_create(&path, " algo ").unwrap();
        assert_eq!((cp.load(), cp.pid()), (None, std::process::id()));
        assert!(cp.updated_ns() > 0);
        cp.save(5);
        drop(cp);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), CHECKPOINT_SIZE);
        assert_eq!(&bytes[..8], &CHECKPOINT_MAGIC.to_ne_bytes());
        assert_eq!(&bytes[8..12], &CHECKPOINT_VERSION.to_ne_bytes());
        assert_eq!(&bytes[32..37], b"algo\0");
        assert_eq!(
            OffsetCheckpoint::open_or_create(&path, "algo")
                .unwrap()
                .load(),
            Some(5)
        );
        // A creator killed inside `initialise`, after it stored the name, then the version
        // and pid, then the time, but not the magic: finished too.
        let mut partial = [0u8; CHECKPOINT_SIZE];
        partial[32..36].copy_from_slice(b"algo");
        let mut states = vec![partial];
        partial[8..12].copy_from_slice(&CHECKPOINT_VERSION.to_ne_bytes());
        partial[12..16].copy_from_slice(&4242u32.to_ne_bytes());
        states.push(partial);
        partial[24..32].copy_from_slice(&1_700_000_000_000_000_000u64.to_ne_bytes());
        states.push(partial);
        for bytes in states {
            std::fs::write(&path, bytes).unwrap();
            let cp = OffsetCheckpoint::open_or_create(&path, "algo").unwrap();
            assert_eq!((cp.load(), cp.pid()), (None, std::process::id()));
            drop(cp);
            assert_eq!(
                &std::fs::read(&path).unwrap()[..8],
                &CHECKPOINT_MAGIC.to_ne_bytes()
            );
        }
        // Anything else without the magic is still refused and left as it is: zeros of
        // another length, 64 bytes with something past the name's NUL, an offset (no
        // creation writes one before the magic), another version.
        let mut other = [0u8; CHECKPOINT_SIZE];
        other[40] = 1;
        let mut offset = partial;
        offset[16] = 1;
        let mut version = partial;
        version[8] = 7;
        for bytes in [
            &[0u8; CHECKPOINT_SIZE + 1][..],
            &other[..],
            &offset[..],
            &version[..],
        ] {
            std::fs::write(&path, bytes).unwrap();
            assert!(matches!(
                OffsetCheckpoint::open_or_create(&path, "algo"),
                Err(Error::BadFileMagic { found: 0, .. })
            ));
            assert_eq!(std::fs::read(&path).unwrap(), bytes);
        }
    }

    /// A copy of the handle in a child forked since the open commits once its opener has
    /// exited, also when the opener's pid names another process since (a pid reused on a
    /// long-running host): that process never opened the file. `kill(pid, 0)` alone took it
    /// for the opener, and every commit of the copy was refused as long as it lived.
    #[test]
    fn a_forked_copy_commits_once_its_openers_pid_is_another_process() {
        use ringwire_core::broadcast::registry::Incarnation;
        let path = TmpPath::new("checkpoint-pid-reused");
        let mut cp = OffsetCheckpoint::open_or_create(&path, "algo").unwrap();
        let mine = crate::sys::own_incarnation().expect("this test needs /proc");
        // As a child forked since the open sees it, while the opener (this process) runs:
        // refused.
        cp.opener_generation = cp.opener_generation.wrapping_add(1);
        let e = cp.check_committer().unwrap_err();
        assert!(matches!(e, Error::ForkedCheckpoint { .. }), "{e:?}");
        // The opener started a second before the process that has its pid now: it is gone.
        cp.opener_incarnation = Some(Incarnation {
            start: mine.start.wrapping_sub(100) & 0xF_FFFF,
            ..mine
        });
        cp.check_committer().unwrap();
    }

    /// An empty path (an unset variable, say) is refused by name. It was opened: the
    /// `ENOENT` came back as an `Io` error with no path to show, "open failed: No such file
    /// or directory", naming neither the file nor what was wrong.
    #[test]
    fn an_empty_offset_file_path_is_said_to_be_empty() {
        let ring = TmpPath::shm("ckpt-empty-path");
        let _tx = crate::RingProducer::<u64>::create(&ring, 4).unwrap();
        let rx = crate::RingConsumer::<u64>::attach(&ring).unwrap();
        for e in [
            OffsetCheckpoint::open_or_create("", "algo").map(drop),
            rx.commit_offset_to("", "algo"),
        ] {
            let e = e.unwrap_err();
            assert!(matches!(e, Error::InvalidArgument { .. }), "{e:?}");
            assert_eq!(e.to_string(), "the offset file's path is empty");
        }
    }

    /// An empty ring path is refused by name, as every attach to a ring refuses it. It
    /// made `/dev/shm/ring_<name>.offset` (the default path of a ring without a stem or a
    /// directory) and opened it: the consumer then resumed at whatever offset any other
    /// such mistake committed there, and the file was left behind.
    #[test]
    fn a_checkpoint_for_an_empty_ring_path_is_refused_and_makes_no_file() {
        let name = format!("fxempty{}", std::process::id());
        let made = default_path(Path::new(""), &name);
        assert_eq!(
            made,
            Path::new("/dev/shm").join(format!("ring_{name}.offset"))
        );
        let _ = std::fs::remove_file(&made);
        let opened = OffsetCheckpoint::for_consumer("", &name);
        let existed = made.exists();
        let _ = std::fs::remove_file(&made);
        let Err(e) = opened else {
            panic!("a checkpoint of an empty ring path opened");
        };
        assert!(
            matches!(&e, Error::InvalidArgument { path, .. } if path.as_os_str().is_empty()),
            "{e:?}"
        );
        assert_eq!(e.to_string(), "the ring file's path is empty");
        assert!(!existed, "{} was made", made.display());
    }
}
