//! The mirror's local ring file as the state machine's [`RecordSink`] (spec §21.1, §21.2):
//! an existing valid ring is adopted (and `flock`ed, so two mirrors never write one file);
//! otherwise the ring is created with the mirror geometry — persistent, never unlinked, the
//! lock held for the mirror's life.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use ringwire_core::layout::{Flags, Geometry};
use ringwire_core::replicate::{
    Holds, RecordSink, Replace, SinkError, Start, compare_received, write_received,
};
use ringwire_core::sync::Ordering;
use ringwire_core::{Expect, RingView};

use crate::file::{FileKind, len_and_magic};
use crate::{CleanupMode, CreateOptions, Error, RingFile, sys};
use ringwire_core::layout::RING_MAGIC;

/// Why a file is not a usable ring, without its path, for lines that name the path
/// themselves: [`Error::reason`], the text of `e` after its "ring PATH: " (or "PATH: ")
/// and nothing else, whatever the reason's own text holds.
pub(crate) fn unusable_reason(e: &Error) -> String {
    e.reason().to_string()
}

/// Refuses `path` now if its directory says that no ring can be created there: missing, not
/// a directory, or one this process may not create files in (a read-only mount, no
/// permission). The ring is created only at the handshake, so without this a mistyped path
/// was found out only once a source answered; with the source down, the mirror retried its
/// connection for ever without a word about the path.
fn check_dir(path: &Path) -> Result<(), Error> {
    use std::os::unix::ffi::OsStrExt;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let refused = |e: std::io::Error| {
        Error::io(
            path,
            "open",
            std::io::Error::new(
                e.kind(),
                format!("its directory {}: {e}", crate::shown::path(dir)),
            ),
        )
    };
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| refused(std::io::Error::new(std::io::ErrorKind::InvalidInput, e)))?;
    // SAFETY: `c` is a NUL-terminated path that outlives the call. With the effective ids,
    // as the create will be: write and search permission, EROFS on a read-only mount.
    let r = unsafe {
        libc::faccessat(
            libc::AT_FDCWD,
            c.as_ptr(),
            libc::W_OK | libc::X_OK,
            libc::AT_EACCESS,
        )
    };
    if r != 0 {
        return Err(refused(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// A file the sink replaced with a new ring, for the mirror's log line ([`std::fmt::Display`]:
/// "replaced the replica at PATH (write_seq N): why").
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Replaced {
    /// A ring the sink held (adopted or created), replaced for the mirror's reason.
    Ring {
        /// Its path.
        path: PathBuf,
        /// Its layout.
        held: Geometry,
        /// Its `write_seq` then.
        write_seq: u64,
        /// The new ring's layout.
        new: Geometry,
        /// Why the mirror replaced it.
        why: Replace,
    },
    /// The file found at the path when the sink was opened, which was not a usable ring
    /// ([`FileSink::not_adopted`]).
    Unusable {
        /// Its path.
        path: PathBuf,
        /// Why it was not adopted.
        why: String,
    },
    /// The file was removed to be replaced (as the inner value says), but the new ring
    /// could not be created (no room on the file system, a file size limit): what the file
    /// held is gone, and nothing is at the path.
    NotRecreated(Box<Replaced>),
}

impl std::fmt::Display for Replaced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Replaced::NotRecreated(old) => {
                old.describe(f, "removed")?;
                f.write_str(
                    "; the ring to replace it could not be created, so nothing is at the path",
                )
            }
            _ => self.describe(f, "replaced"),
        }
    }
}

impl Replaced {
    /// "VERB the replica at PATH (write_seq N): why", or "VERB the file at PATH: ...".
    fn describe(&self, f: &mut std::fmt::Formatter<'_>, verb: &str) -> std::fmt::Result {
        let (path, held, w, new, why) = match self {
            Replaced::NotRecreated(old) => return old.describe(f, verb),
            Replaced::Unusable { path, why } => {
                return write!(
                    f,
                    "{verb} the file at {}: not a usable ring ({why})",
                    crate::shown::path(path)
                );
            }
            Replaced::Ring {
                path,
                held,
                write_seq,
                new,
                why,
            } => (path, held, *write_seq, new, why),
        };
        write!(
            f,
            "{verb} the replica at {} (write_seq {w}): ",
            crate::shown::path(path)
        )?;
        match *why {
            Replace::FreshStart(start) => {
                let from = match start {
                    Start::Latest => "latest".to_string(),
                    Start::Oldest => "oldest".to_string(),
                    Start::Sequence(n) => n.to_string(),
                    Start::Resume => "resume".to_string(),
                };
                write!(f, "--from {from} asked for a fresh start, not a resume")
            }
            Replace::Reset { source_next } => write!(
                f,
                "the source restarted with a new ring: it answered with RESET, its next \
                 record being {source_next}, below this replica's last"
            ),
            Replace::Layout => write!(
                f,
                "the source's ring has another layout ({}) than this replica ({}); the \
                 records it held are gone",
                describe_layout(new),
                describe_layout(held)
            ),
            Replace::NotSparse => write!(
                f,
                "it lacks FLAG_SPARSE (its flags are {:#06x}): its readers would stall at \
                 every hole a mirror leaves (a gap, a jump), so it is not resumed; a mirror \
                 ring always has the flag",
                held.flags.0
            ),
            Replace::Backwards { seq, next } => write!(
                f,
                "the source restarted with a new ring: its DATA went back to record {seq}, \
                 below the {next} expected"
            ),
            Replace::Differs { seq } => write!(
                f,
                "the source restarted with a new ring: its record {seq} differs from the one \
                 this replica held"
            ),
            // A reason added to the core later: its debug form.
            other => write!(f, "{other:?}"),
        }
    }
}

/// A ring's layout as the mirror's log names it: what a source's GEOMETRY must match for
/// a resuming mirror to keep its ring (spec §21.1).
fn describe_layout(g: &Geometry) -> String {
    let mut s = format!("{} slots of {} bytes", g.capacity, g.element_size);
    if g.arena_size > 0 {
        s += &format!(", an arena of {} bytes", g.arena_size);
    }
    if g.registry_count > 0 {
        s += &format!(", {} reader slots", g.registry_count);
    }
    if g.schema_sig != 0 {
        s += &format!(", schema {:#018x}", g.schema_sig);
    }
    s
}

/// The mirror ring file.
pub struct FileSink {
    path: PathBuf,
    ring: Option<RingFile>,
    /// The lock on an adopted file (a created one holds its own).
    lock: Option<File>,
    /// The last error of a failed creation, for the message (the sink error only says
    /// "cannot create").
    pub last_error: Option<Error>,
    /// Permission bits a created ring gets (before the umask).
    mode: u32,
    /// Rings created so far (a handshake that adopts the existing ring creates none).
    created: u64,
    /// The largest ring (file length) this sink creates; `None`: no limit but the
    /// filesystem's free space.
    max_len: Option<u64>,
    /// Why the ring found at the path by [`FileSink::open`] was not adopted.
    not_adopted: Option<Error>,
    /// The reason the mirror gave for replacing the ring held, until the replacement.
    replacing: Option<Replace>,
    /// The last file replaced, until [`FileSink::take_replaced`].
    replaced: Option<Replaced>,
}

impl FileSink {
    /// Opens `path`: adopts a valid mirror ring found there (taking its lock), or remembers
    /// to create one at the handshake. Fails if another process holds the file's lock, and
    /// refuses a ring no mirror makes (without `FLAG_SPARSE`, or a lossy MPMC ring) and a
    /// file that is not a ring, leaving them as they were.
    pub fn open(path: impl AsRef<Path>) -> Result<FileSink, Error> {
        let path = path.as_ref().to_path_buf();
        let mut sink = FileSink {
            path: path.clone(),
            ring: None,
            lock: None,
            last_error: None,
            mode: CreateOptions::default().mode,
            created: 0,
            max_len: None,
            not_adopted: None,
            replacing: None,
            replaced: None,
        };
        // Anything but a regular file (a FIFO, a device) is refused before connecting, as
        // the other commands refuse it, rather than read as a ring.
        let file = match crate::file::open_regular(&path, OpenOptions::new().read(true).write(true))
        {
            Ok(f) => f,
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                check_dir(&path)?;
                return Ok(sink);
            }
            Err(e) => return Err(e),
        };
        if let Err(e) = sys::try_lock_exclusive(&file) {
            // Only a lock held by another open file is a producer (or another mirror); any
            // other failure (a file system without flock) is said as it is, as the creators
            // in `file` say it.
            if e.kind() == std::io::ErrorKind::WouldBlock {
                return Err(Error::ProducerAlreadyExists { path });
            }
            return Err(Error::Io {
                path,
                op: "flock",
                source: e,
            });
        }
        match RingFile::open(&path, Expect::RAW) {
            // A lossy MPMC ring is a ring, and its geometry may match the source's (spec
            // §21.1 compares no flags), but its producers write it by ticket: adopted, the
            // mirror's records would leave its `write_seq` past its `claim_seq` (a corrupt
            // ring to `stat`, `heal` and `serve`). A mirror never creates one, so it is
            // somebody's queue: refused, neither adopted nor replaced.
            Ok(r) if r.ring().geometry().flags.has(Flags::MODE_MPMC) => {
                return Err(Error::MpmcRingNotMirrored { path });
            }
            // Only mirrors set SPARSE (spec §2.1), so a ring without it is a producer's:
            // adopted, its readers would stall at the mirror's holes; replaced, its records
            // would be gone. Refused, whatever `--from` says.
            Ok(r) if !r.ring().geometry().flags.has(Flags::SPARSE) => {
                return Err(Error::NotAMirrorRing {
                    path,
                    flags: r.ring().geometry().flags.0,
                });
            }
            Ok(r) => sink.ring = Some(r),
            // A ring that does not validate (another version, a corrupt header, a creation
            // that never finished) is recreated at the handshake, as is an empty file.
            // Anything else is somebody's data: refused, never replaced.
            Err(e) => {
                let (len, magic) = len_and_magic(&file).map_err(|e| Error::io(&path, "read", e))?;
                let replaceable = len == 0
                    || magic == Some(RING_MAGIC)
                    || (magic == Some(0)
                        && FileKind::Ring
                            .unfinished(&file, len)
                            .map_err(|e| Error::io(&path, "read", e))?);
                if !replaceable {
                    return Err(Error::NotReplaced {
                        path,
                        len,
                        magic,
                        kind: "ring",
                        creator: "a mirror",
                    });
                }
                sink.not_adopted = Some(e);
            }
        }
        sink.lock = Some(file);
        Ok(sink)
    }

    /// Why the file found at the path when the sink was opened is not adopted: a ring that
    /// does not validate (another version, a corrupt header, a file cut short, a creation
    /// that never finished, an empty file), which the handshake replaces. `None` when there
    /// was no file or it was adopted. A mirror asked to resume says so, since it starts
    /// again instead.
    pub fn not_adopted(&self) -> Option<&Error> {
        self.not_adopted.as_ref()
    }

    /// Sets the permission bits of rings created from now on (default 0o660).
    pub fn set_mode(&mut self, mode: u32) {
        self.mode = mode;
    }

    /// Refuses to create a ring whose file would be longer than `max` bytes (`None`: no
    /// limit). A source's GEOMETRY says how large the mirror ring is; this bounds what a
    /// hostile or misconfigured source can make this host reserve (on tmpfs, memory).
    pub fn set_max_len(&mut self, max: Option<u64>) {
        self.max_len = max;
    }

    /// How many rings this sink has created (it recreates one when the source's geometry
    /// or numbering does not continue the ring it holds).
    pub fn created(&self) -> u64 {
        self.created
    }

    /// The file this sink last replaced with a new ring, once: a ring it held (with the
    /// mirror's reason) or the unusable file found at the path. A ring created where there
    /// was none replaces nothing. Only the last replacement is kept; the mirror takes it
    /// after each pass, and a pass replaces at most one.
    pub fn take_replaced(&mut self) -> Option<Replaced> {
        self.replaced.take()
    }

    /// The ring, once adopted or created.
    pub fn ring(&self) -> Option<&RingFile> {
        self.ring.as_ref()
    }

    /// The ring's view. Crate-only: the view is `Copy` and does not keep the mapping alive
    /// (see [`RingFile::view`]).
    pub(crate) fn view(&self) -> Option<&RingView> {
        self.ring.as_ref().map(|r| r.ring())
    }

    /// The path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl RecordSink for FileSink {
    fn existing(&self) -> Option<(Geometry, u64)> {
        let v = self.view()?;
        // Relaxed: this process is the ring's only writer.
        Some((*v.geometry(), v.write_seq().load(Ordering::Relaxed)))
    }

    fn recreate(&mut self, geo: &Geometry) -> Result<(), SinkError> {
        // Given for this call only, whether it succeeds or not.
        let why = self.replacing.take();
        if let Some(max) = self.max_len {
            let len = geo.total_len().unwrap_or(u64::MAX);
            if len > max {
                // Checked before the old ring is let go: it stays as it was.
                self.last_error = Some(Error::RingTooLarge {
                    path: self.path.clone(),
                    len,
                    max,
                });
                return Err(SinkError::Storage);
            }
        }
        // What this call replaces, if it succeeds: a ring held, with the mirror's reason
        // (none, a driver other than the core mirror, is not said); the file found at open
        // and not adopted, replaced by the first ring created.
        let replacing = match (self.existing(), why, &self.not_adopted, self.created) {
            (Some((old, write_seq)), Some(why), _, _) => Some(Replaced::Ring {
                path: self.path.clone(),
                held: old,
                write_seq,
                new: *geo,
                why,
            }),
            (None, _, Some(e), 0) => Some(Replaced::Unusable {
                path: self.path.clone(),
                why: unusable_reason(e),
            }),
            _ => None,
        };
        // The file at the path now, to tell whether a failed creation removed it.
        let old_file = crate::sys::path_id(&self.path).ok().flatten();
        // Release the old mapping and lock first: create takes the lock on the path itself
        // and replaces a non-empty file by a fresh inode (readers of the old one see it
        // frozen).
        self.ring = None;
        self.lock = None;
        let opts = CreateOptions {
            cleanup: CleanupMode::Persistent,
            mode: self.mode,
            ..CreateOptions::default()
        };
        match RingFile::create(&self.path, geo, &opts) {
            Ok(r) => {
                self.ring = Some(r);
                self.created += 1;
                self.replaced = replacing;
                Ok(())
            }
            Err(e) => {
                // The creation unlinks a stale ring before it sizes the new file, which can
                // fail (no room): the old file and its records are gone all the same.
                if old_file.is_some() && crate::sys::path_id(&self.path).ok().flatten() != old_file
                {
                    self.replaced = replacing.map(|r| Replaced::NotRecreated(Box::new(r)));
                }
                let se = match &e {
                    Error::Init { source, .. } => SinkError::Init(*source),
                    // Creating, locking or mapping the file: the detail stays in last_error.
                    _ => SinkError::Storage,
                };
                self.last_error = Some(e);
                Err(se)
            }
        }
    }

    fn replacing(&mut self, why: Replace) {
        self.replacing = Some(why);
    }

    fn write(&mut self, seq: u64, fixed: &[u8], blob: &[u8]) {
        if let Some(r) = &self.ring {
            write_received(r.ring(), seq, fixed, blob);
        }
    }

    fn publish(&mut self, seq: u64) {
        if let Some(r) = &self.ring
            && r.ring().publish_with(seq, crate::sys::fenced_publish())
        {
            r.wake_after_publish();
        }
    }

    fn holds(&self, seq: u64, fixed: &[u8], blob: &[u8]) -> Holds {
        self.view()
            .map_or(Holds::Unknown, |v| compare_received(v, seq, fixed, blob))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_tmp::TmpPath;

    #[test]
    fn a_file_that_cannot_be_created_is_a_storage_error_with_the_detail_kept() {
        let dir = TmpPath::new("no-such-dir");
        let path = dir.join("mirror");
        // A directory removed after the open: the failure is the creation's.
        std::fs::create_dir(&dir).unwrap();
        let opened = FileSink::open(&path);
        std::fs::remove_dir(&dir).unwrap();
        let mut sink = opened.expect("a missing file is created later");
        let geo = Geometry::spmc(64, 16, 8, 0, false).unwrap();
        let err = sink.recreate(&geo).unwrap_err();
        assert!(matches!(err, SinkError::Storage), "{err}");
        let detail = sink.last_error.take().expect("detail kept").to_string();
        assert!(detail.contains("ringwire-no-such-dir"), "{detail}");
    }

    /// A geometry over the limit is refused before anything is created or let go: a ring
    /// the sink holds stays, with its records; one within the limit is created.
    #[test]
    fn a_ring_over_the_size_limit_is_refused_and_the_held_ring_kept() {
        let path = TmpPath::new("sink-cap");
        let small = Geometry::spmc(64, 16, 8, 0, false).unwrap();
        let big = Geometry::spmc(1 << 16, 16, 8, 0, false).unwrap();
        let (small_len, big_len) = (small.total_len().unwrap(), big.total_len().unwrap());
        assert!(small_len < big_len);
        let mut sink = FileSink::open(&path).unwrap();
        sink.set_max_len(Some(small_len));
        sink.recreate(&small).expect("exactly at the limit");
        sink.write(1, &7u64.to_le_bytes(), &[]);
        sink.publish(1);
        let err = sink.recreate(&big).unwrap_err();
        assert!(matches!(err, SinkError::Storage), "{err}");
        let e = sink.last_error.take().expect("detail kept");
        assert!(
            matches!(e, Error::RingTooLarge { len, max, .. } if len == big_len && max == small_len),
            "{e:?}"
        );
        let msg = e.to_string();
        assert!(msg.contains(&format!("needs {big_len} bytes")), "{msg}");
        assert!(msg.contains("--max-ring-size"), "{msg}");
        assert_eq!(
            sink.existing(),
            Some((small, 1)),
            "the held ring was let go"
        );
        assert_eq!(std::fs::metadata(&path).unwrap().len(), small_len);
        // No limit: the larger ring is created.
        sink.set_max_len(None);
        sink.recreate(&big).unwrap();
        assert_eq!(sink.existing(), Some((big, 0)));
        drop(sink);
    }

    /// A replacement whose new ring cannot be created after the old file was unlinked (no
    /// room; here a file size limit, in a forked child) is said as the removal it is: the
    /// records held are gone and nothing is at the path. Nothing was said, as nothing was
    /// replaced, and the mirror's error named only the creation that failed.
    #[test]
    fn a_replica_removed_for_a_ring_that_cannot_be_created_is_said_to_be_gone() {
        let path = TmpPath::new("sink-removed");
        let held = Geometry::spmc(64, 32, 8, 0, false).unwrap();
        let held = Geometry {
            flags: Flags(held.flags.0 | Flags::SPARSE),
            ..held
        };
        // 2 MiB of slots, over the 1 MiB limit.
        let big = Geometry {
            capacity: 1 << 16,
            ..held
        };
        let status = crate::test_fork::forked(10, || {
            let Ok(mut sink) = FileSink::open(&path) else {
                return 2;
            };
            if sink.recreate(&held).is_err() {
                return 3;
            }
            for seq in 1..=3u64 {
                sink.write(seq, &[seq as u8; 24], &[]);
            }
            sink.publish(3);
            // SAFETY: plain system calls on this child alone: ignoring SIGXFSZ makes a
            // write past the limit fail with EFBIG instead of killing the child.
            unsafe {
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                let lim = libc::rlimit {
                    rlim_cur: 1 << 20,
                    rlim_max: 1 << 20,
                };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                    return 4;
                }
            }
            sink.replacing(Replace::Layout);
            if sink.recreate(&big).is_ok() {
                return 5;
            }
            let Some(r) = sink.take_replaced() else {
                return 6;
            };
            let want = format!(
                "removed the replica at {} (write_seq 3): the source's ring has another \
                 layout (65536 slots of 32 bytes) than this replica (64 slots of 32 bytes); \
                 the records it held are gone; the ring to replace it could not be created, \
                 so nothing is at the path",
                path.display()
            );
            if r.to_string() != want {
                eprintln!("{r}");
                return 7;
            }
            0
        });
        crate::test_fork::assert_exited_0(status, "the removal not said");
        assert!(!path.exists(), "the held ring is still there");
    }

    /// The log line of each replacement names the path, the `write_seq` held and the
    /// reason, with the figures the reason has.
    #[test]
    fn a_replacement_says_what_it_replaced_and_why() {
        let held = Geometry::spmc(64, 32, 8, 0, false).unwrap();
        let new = Geometry::spmc(128, 32, 8, 0, false).unwrap();
        let ring = |why| {
            Replaced::Ring {
                path: PathBuf::from("/dev/shm/x"),
                held,
                write_seq: 4096,
                new,
                why,
            }
            .to_string()
        };
        let head = "replaced the replica at /dev/shm/x (write_seq 4096): ";
        for (why, want) in [
            (
                Replace::FreshStart(Start::Latest),
                "--from latest asked for a fresh start, not a resume",
            ),
            (
                Replace::FreshStart(Start::Oldest),
                "--from oldest asked for a fresh start, not a resume",
            ),
            (
                Replace::FreshStart(Start::Sequence(7)),
                "--from 7 asked for a fresh start, not a resume",
            ),
            (
                Replace::Reset { source_next: 12 },
                "the source restarted with a new ring: it answered with RESET, its next \
                 record being 12, below this replica's last",
            ),
            (
                Replace::Layout,
                "the source's ring has another layout (128 slots of 32 bytes) than this \
                 replica (64 slots of 32 bytes); the records it held are gone",
            ),
            (
                Replace::NotSparse,
                "it lacks FLAG_SPARSE (its flags are 0x0011): its readers would stall at \
                 every hole a mirror leaves (a gap, a jump), so it is not resumed; a mirror \
                 ring always has the flag",
            ),
            (
                Replace::Backwards { seq: 5, next: 4097 },
                "the source restarted with a new ring: its DATA went back to record 5, below \
                 the 4097 expected",
            ),
            (
                Replace::Differs { seq: 4096 },
                "the source restarted with a new ring: its record 4096 differs from the one \
                 this replica held",
            ),
        ] {
            assert_eq!(ring(why), format!("{head}{want}"));
        }
        let unusable = Replaced::Unusable {
            path: PathBuf::from("/dev/shm/x"),
            why: "bad version 9".into(),
        };
        assert_eq!(
            unusable.to_string(),
            "replaced the file at /dev/shm/x: not a usable ring (bad version 9)"
        );
    }

    /// A mirror's ring on a file system without flock (NFS without its lock daemon gives
    /// ENOLCK) was refused as held by "another producer", which does not exist. Only a lock
    /// held elsewhere means that; any other failure is the `flock` error it is. A held lock
    /// is still a producer.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[test]
    fn a_flock_that_fails_without_a_holder_is_an_io_error_not_a_producer() {
        let path = TmpPath::new("sink-flock");
        std::fs::write(&path, b"").unwrap();
        let status = crate::test_fork::forked(10, || {
            if crate::test_fork::fail_flock(libc::ENOLCK).is_err() {
                return 2;
            }
            match FileSink::open(&path) {
                Err(Error::Io {
                    op: "flock",
                    source,
                    ..
                }) if source.raw_os_error() == Some(libc::ENOLCK) => 0,
                Err(Error::ProducerAlreadyExists { .. }) => 3,
                _ => 4,
            }
        });
        crate::test_fork::assert_exited_0(status, "a mirror's ring with a failing flock");
        let held = std::fs::File::open(&path).unwrap();
        sys::try_lock_exclusive(&held).unwrap();
        let e = FileSink::open(&path).err().expect("refused");
        assert!(matches!(e, Error::ProducerAlreadyExists { .. }), "{e:?}");
    }

    #[test]
    fn a_file_that_is_not_a_ring_is_refused_and_left_as_it_was() {
        let path = TmpPath::new("sink-notes");
        let notes = b"my precious notes, not a ring\n";
        std::fs::write(&path, notes).unwrap();
        let e = FileSink::open(&path).err().expect("refused");
        assert!(
            matches!(e, Error::NotReplaced { len, magic: Some(_), .. } if len == notes.len() as u64),
            "{e:?}"
        );
        assert!(e.to_string().contains("is not a ring"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), notes, "the file was touched");
        // Shorter than a magic word: refused too.
        std::fs::write(&path, b"abc").unwrap();
        let e = FileSink::open(&path).err().expect("refused");
        assert!(
            matches!(
                e,
                Error::NotReplaced {
                    len: 3,
                    magic: None,
                    ..
                }
            ),
            "{e:?}"
        );
    }

    /// A lossy MPMC ring at the mirror's path is refused before connecting, neither adopted
    /// (its geometry would match a source's of the same shape, as no flags are compared)
    /// nor replaced, and left byte for byte as it was. While its creating producer lives,
    /// its lock refuses the mirror already.
    #[test]
    fn a_lossy_mpmc_ring_is_neither_adopted_nor_replaced() {
        let path = TmpPath::new("sink-mpmc");
        let mut tx = crate::MpmcProducer::<u64>::create(&path, 16).unwrap();
        tx.set_cleanup_mode(CleanupMode::Persistent);
        for v in 1..=3u64 {
            tx.push(&v);
        }
        let e = FileSink::open(&path)
            .err()
            .expect("refused while its producer lives");
        assert!(matches!(e, Error::ProducerAlreadyExists { .. }), "{e:?}");
        drop(tx);
        let before = std::fs::read(&path).unwrap();
        let e = FileSink::open(&path).err().expect("refused");
        assert!(
            matches!(&e, Error::MpmcRingNotMirrored { path: p } if *p == *path),
            "{e:?}"
        );
        let msg = e.to_string();
        assert!(msg.contains("lossy MPMC ring"), "{msg}");
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            before,
            "the file was touched"
        );
        // The refusal let go of the lock: the ring's own producers attach again.
        let again = crate::MpmcProducer::<u64>::attach(&path).unwrap();
        assert_eq!(again.push(&4), 4);
        drop(again);
    }

    /// A ring without FLAG_SPARSE at the mirror's path (only mirrors set it, spec §2.1: a
    /// producer made this one, and its producer has gone) is refused before connecting,
    /// with its path and flags, and left byte for byte as it was: a resume replaced it at
    /// the handshake (its records gone) when its layout matched the source's, as did any
    /// `--from` but resume. A mirror's own ring (SPARSE) is adopted.
    #[test]
    fn a_ring_without_sparse_is_neither_adopted_nor_replaced() {
        let path = TmpPath::new("sink-plain");
        let mut tx = crate::RingProducer::<u64>::builder(16)
            .cleanup_mode(CleanupMode::Persistent)
            .build::<u64, _>(&path)
            .unwrap();
        for v in 1..=3u64 {
            tx.push(&v);
        }
        drop(tx);
        let before = std::fs::read(&path).unwrap();
        let e = FileSink::open(&path).err().expect("refused");
        assert!(
            matches!(&e, Error::NotAMirrorRing { path: p, flags: 0x0011 } if *p == *path),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "{}: a ring without FLAG_SPARSE (flags 0x0011), which no mirror makes: a \
                 producer's ring, not a replica; a mirror neither resumes nor replaces it \
                 (remove it, or use another path)",
                path.display()
            )
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            before,
            "the file was touched"
        );
        // The refusal let go of the lock (held, a second open would be refused for it).
        let again = FileSink::open(&path).err().expect("refused again");
        assert!(matches!(again, Error::NotAMirrorRing { .. }), "{again:?}");
    }

    /// A file whose first word is zero is replaced only when it is a ring whose creation
    /// never finished: a header without its magic, or nothing but zeros. A disk image (its
    /// first 32 KiB zero, as an ISO 9660 image's) is refused and left as it was.
    #[test]
    fn a_file_starting_with_zeros_is_replaced_only_if_an_unfinished_ring() {
        let path = TmpPath::new("sink-zeros");
        let mut image = vec![0u8; 32 << 10];
        image.extend_from_slice(b"CD001 the volume descriptor, somebody's data");
        std::fs::write(&path, &image).unwrap();
        let e = FileSink::open(&path).err().expect("refused");
        assert!(
            matches!(e, Error::NotReplaced { len, magic: Some(0), .. } if len == image.len() as u64),
            "{e:?}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), image, "the file was touched");
        // Sized and zero-filled, no header yet.
        std::fs::write(&path, vec![0u8; 4096]).unwrap();
        assert!(
            FileSink::open(&path).is_ok(),
            "an all-zero file is replaced"
        );
        // A whole ring but for its magic, which creation writes last.
        let geo = Geometry::spmc(64, 16, 8, 0, false).unwrap();
        let mut sink = FileSink::open(&path).unwrap();
        sink.recreate(&geo).unwrap();
        drop(sink);
        let mut ring = std::fs::read(&path).unwrap();
        ring[..8].fill(0);
        std::fs::write(&path, &ring).unwrap();
        let mut sink = FileSink::open(&path).expect("an unfinished ring is replaced");
        assert!(sink.existing().is_none());
        sink.recreate(&geo).unwrap();
        assert_eq!(sink.existing(), Some((geo, 0)));
        drop(sink);
        // A header that describes no ring (capacity 1000): refused.
        ring[16..24].copy_from_slice(&1000u64.to_le_bytes());
        std::fs::write(&path, &ring).unwrap();
        assert!(matches!(
            FileSink::open(&path),
            Err(Error::NotReplaced { magic: Some(0), .. })
        ));
    }

    /// A sparse file whose first word is zero, far larger than memory: its holes are not
    /// read (they are zeros), so the open answers at once, and a file with data only near
    /// its end is still refused. The open read every byte, 64 KiB at a time: a 200 GiB
    /// sparse file at the mirror's PATH kept `ringwire mirror` from connecting for more
    /// than ten minutes, deaf to SIGTERM.
    #[test]
    fn a_huge_sparse_file_is_judged_without_reading_its_holes() {
        let path = TmpPath::shm("sink-sparse");
        const LEN: u64 = 1 << 40;
        let judge = |path: &PathBuf| {
            let (tx, rx) = std::sync::mpsc::channel();
            let p = path.clone();
            // A thread, so that a slow judgement fails the test instead of hanging it.
            std::thread::spawn(move || {
                let _ = tx.send(FileSink::open(&p).map(|s| s.not_adopted().is_some()));
            });
            rx.recv_timeout(std::time::Duration::from_secs(10))
        };
        let f = File::create(&path).unwrap();
        f.set_len(LEN).unwrap();
        drop(f);
        let r = judge(path.path());
        assert!(
            matches!(r, Ok(Ok(true))),
            "an all-zero sparse file is an unfinished ring: {r:?}"
        );
        // Somebody's data near the end: refused, and left as it was.
        {
            use std::os::unix::fs::FileExt;
            let f = OpenOptions::new().write(true).open(&path).unwrap();
            f.write_all_at(b"CD001", LEN - 4096).unwrap();
        }
        let r = judge(path.path());
        let kept = std::fs::metadata(&path).map(|m| m.len()).ok();
        assert!(
            matches!(
                r,
                Ok(Err(Error::NotReplaced {
                    len: LEN,
                    magic: Some(0),
                    ..
                }))
            ),
            "{r:?}"
        );
        assert_eq!(kept, Some(LEN));
    }

    #[test]
    fn an_empty_file_and_a_ring_that_does_not_validate_are_recreated() {
        let path = TmpPath::new("sink-stale");
        let geo = Geometry::spmc(64, 16, 8, 0, false).unwrap();
        std::fs::write(&path, b"").unwrap();
        let mut sink = FileSink::open(&path).expect("an empty file is replaced");
        assert!(sink.existing().is_none());
        sink.recreate(&geo).unwrap();
        drop(sink);
        // The ring magic with an unsupported version (offset 8): not adoptable, replaced.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[8..12].copy_from_slice(&9u32.to_le_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let mut sink = FileSink::open(&path).expect("a ring of another version is replaced");
        assert!(sink.existing().is_none());
        let why = sink.not_adopted().expect("the reason kept").to_string();
        assert!(why.contains("version 9"), "{why}");
        sink.recreate(&geo).unwrap();
        assert_eq!(sink.existing(), Some((geo, 0)));
        drop(sink);
    }

    /// The line of an unusable file replaced names its path once: the reason was the
    /// error's whole text, which names it too ("replaced the file at P: not a usable ring
    /// (ring P: file is 0 bytes, ...)").
    #[test]
    fn an_unusable_file_replaced_is_named_once() {
        let path = TmpPath::new("sink-unusable-once");
        let geo = Geometry::spmc(64, 16, 8, 0, false).unwrap();
        std::fs::write(&path, b"").unwrap();
        let mut sink = FileSink::open(&path).expect("an empty file is replaced");
        sink.recreate(&geo).unwrap();
        let line = sink.take_replaced().expect("the replacement").to_string();
        let p = crate::shown::path(&path).to_string();
        assert_eq!(
            line,
            format!(
                "replaced the file at {p}: not a usable ring (file is 0 bytes, shorter than \
                 the 128-byte ring header)"
            )
        );
        assert_eq!(line.matches(&p).count(), 1, "{line}");
    }

    /// unusable_reason cut the text after the first "PATH: " found anywhere in it, not the
    /// error's own prefix: an error that names no path (an empty one) but whose text holds
    /// `"": ` (the empty path as messages show it) lost the words before it. Only the prefix
    /// ("ring PATH: ", "PATH: ") goes now; a reason that names the path again is kept whole.
    #[test]
    fn unusable_reason_removes_only_the_errors_own_prefix() {
        let p = PathBuf::from("/dev/shm/x");
        for (e, reason) in [
            (
                Error::InvalidArgument {
                    path: PathBuf::new(),
                    what: "rename to \"\": refused".into(),
                },
                "rename to \"\": refused",
            ),
            (
                Error::InvalidArgument {
                    path: p.clone(),
                    what: "copied from /dev/shm/x: gone".into(),
                },
                "copied from /dev/shm/x: gone",
            ),
            (
                Error::TooShort {
                    path: p.clone(),
                    kind: "ring",
                    len: 3,
                    need: 128,
                },
                "3 bytes, shorter than the 128 it needs",
            ),
            (
                Error::CheckpointMoved { path: p.clone() },
                "no longer at its path (removed or replaced since the consumer opened it); the \
                 offset committed to it would not be found by the next attach",
            ),
        ] {
            assert_eq!(unusable_reason(&e), reason, "{e}");
            assert!(e.to_string().ends_with(reason), "{e}");
        }
    }

    #[test]
    fn fixed_and_blob_rings_are_created_written_and_adopted() {
        use ringwire_core::SlotRead;
        use ringwire_core::broadcast::blob::{BlobRead, read_blob, split_descriptor};

        let path = TmpPath::new("sink");
        // As a mirror makes them (SPARSE): only those are adopted.
        let sparse = |mut g: Geometry| {
            g.flags = Flags(g.flags.0 | Flags::SPARSE);
            g
        };
        let geo = sparse(Geometry::spmc(64, 16, 8, 0, false).unwrap());
        {
            let mut sink = FileSink::open(&path).unwrap();
            assert!(sink.existing().is_none());
            sink.recreate(&geo).unwrap();
            assert_eq!(sink.existing(), Some((geo, 0)));
        }
        let sink = FileSink::open(&path).unwrap();
        assert_eq!(sink.existing().map(|(g, _)| g), Some(geo));
        drop(sink);
        // A blob ring: 8 bytes of meta, then the BlobRef.
        let blob = sparse(Geometry::blob(64, 32, 0, 1 << 12).unwrap());
        {
            let mut sink = FileSink::open(&path).unwrap();
            sink.recreate(&blob).unwrap();
            let mut d = [0u8; 24];
            d[..8].copy_from_slice(&7u64.to_le_bytes());
            // The source's BlobRef: offset 4032 (meaningless here), len 10, flags 9.
            d[8..16].copy_from_slice(&4032u64.to_le_bytes());
            d[16..20].copy_from_slice(&10u32.to_le_bytes());
            d[20..24].copy_from_slice(&9u32.to_le_bytes());
            sink.write(1, &d, b"0123456789");
            sink.write(2, &d[..8], &[]); // too short to hold a BlobRef: not written
            sink.publish(1);
        }
        let sink = FileSink::open(&path).unwrap();
        assert_eq!(sink.existing(), Some((blob, 1)), "adopted for resume");
        let v = sink.view().unwrap();
        let mut d = [0u8; 24];
        assert_eq!(v.read_slot(1, &mut d), SlotRead::Ok);
        assert_eq!(d[..8], 7u64.to_le_bytes());
        let (_, r) = split_descriptor(&d).unwrap();
        assert_eq!(
            (r.offset, r.len, r.flags),
            (0, 10, 9),
            "this arena's offset"
        );
        let mut got = [0u8; 10];
        assert_eq!(read_blob(v, &r, &mut got), BlobRead::Ok(10));
        assert_eq!(&got, b"0123456789");
        assert_eq!(v.read_slot(2, &mut d), SlotRead::Pending);
        drop(sink);
    }
}
