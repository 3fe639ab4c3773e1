//! The adapter's error type. Every variant names the file and carries the value that was
//! wrong, e.g. `ring /dev/shm/ticks: capacity 1000 is not a power of two`. The variants any
//! kind of file can raise (a failed system call, a bad argument, not a regular file) name the
//! path alone: `/dev/shm/ticks.offset: fallocate failed: No space left on device`.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ringwire_core::blackboard::BlackboardError;
use ringwire_core::broadcast::SeqExhausted;
use ringwire_core::broadcast::blob::BlobError;
use ringwire_core::broadcast::registry::RegistryError;
use ringwire_core::queue::QueueAttachError;
use ringwire_core::queue::compat::SlotsPastClaim;
use ringwire_core::{AttachError, GeometryError, InitError, RegionError};

use crate::registry::ReaderInfo;

/// Result alias for the adapter.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong with a ring file, a checkpoint file or a blackboard file.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A system call on the file failed.
    Io {
        /// The file.
        path: PathBuf,
        /// The operation that failed (`open`, `mmap`, `ftruncate`, …).
        op: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// The reader registry refused (a full registry on a lossless ring, …).
    Registry {
        /// The file.
        path: PathBuf,
        /// Why.
        source: RegistryError,
    },
    /// A producer's bounded wait ran out ([`RingProducer::push_timeout`] on a lossless ring,
    /// [`RingProducer::wait_for_headroom_timeout`] on any ring with a registry): a
    /// registered reader whose process is alive stayed a whole ring behind for the whole
    /// wait, so the record was not written.
    /// A reader that stopped reading looks the same as a registry entry forged or left by a
    /// process whose pid was reused; `reader` says which slot it is, for `ringwire stat`.
    ///
    /// [`RingProducer::push_timeout`]: crate::RingProducer::push_timeout
    /// [`RingProducer::wait_for_headroom_timeout`]: crate::RingProducer::wait_for_headroom_timeout
    Backpressure {
        /// The file.
        path: PathBuf,
        /// The sequence that could not be written.
        seq: u64,
        /// How long the producer waited.
        waited: Duration,
        /// The slowest live registered reader when the wait ended (`None` when it left just
        /// then).
        reader: Option<ReaderInfo>,
    },
    /// A producer has no sequence left below
    /// [`SEQ_LIMIT`](ringwire_core::layout::SEQ_LIMIT) to write: nothing was written
    /// ([`RingProducer::push_timeout`](crate::RingProducer::push_timeout)).
    SeqExhausted {
        /// The file.
        path: PathBuf,
        /// The sequence that could not be written.
        source: SeqExhausted,
    },
    /// A blob could not be written or read.
    Blob {
        /// The file.
        path: PathBuf,
        /// Why.
        source: BlobError,
    },
    /// A blackboard file is invalid, or an access was refused (spec §14).
    Blackboard {
        /// The file.
        path: PathBuf,
        /// Why.
        source: BlackboardError,
    },
    /// A blackboard key's writer stopped mid-write (the same odd seqlock for 100 ms).
    WriterStalled {
        /// The file.
        path: PathBuf,
        /// The key.
        key: usize,
    },
    /// A blackboard key was mid-write at every look for over a second, its seqlock moving
    /// all along: no consistent read was possible (a writer rewriting the key without a
    /// pause, or a hostile one).
    KeyBusy {
        /// The file.
        path: PathBuf,
        /// The key.
        key: usize,
    },
    /// The file is not a valid ring (spec §1.3).
    Attach {
        /// The file.
        path: PathBuf,
        /// Which check failed, with the value seen.
        source: AttachError,
    },
    /// The file is not a valid ringwire queue.
    QueueAttach {
        /// The file.
        path: PathBuf,
        /// Which check failed, with the value seen.
        source: QueueAttachError,
    },
    /// The requested ring shape is invalid.
    Geometry {
        /// The file.
        path: PathBuf,
        /// What is wrong with the shape.
        source: GeometryError,
    },
    /// The ring could not be initialised in the new file.
    Init {
        /// The file.
        path: PathBuf,
        /// Why.
        source: InitError,
    },
    /// The mapping cannot be used as ring memory.
    Region {
        /// The file.
        path: PathBuf,
        /// Why.
        source: RegionError,
    },
    /// Another live producer holds the file's lock (a ring's, a blackboard's, or a mirror's
    /// ring), or 8 creation attempts raced.
    ProducerAlreadyExists {
        /// The file.
        path: PathBuf,
    },
    /// The path is not a regular file (a ring is always one, spec §1.1).
    NotRegularFile {
        /// The file.
        path: PathBuf,
        /// What it is instead: "a directory", "a FIFO", "a character device", "a block
        /// device", "a socket", "a symlink" or "a file of unknown type". New after 0.1.0: a
        /// pattern that names `path` alone now needs `..`.
        found: &'static str,
    },
    /// The file is larger than this process can map.
    FileTooLarge {
        /// The file.
        path: PathBuf,
        /// Its length.
        len: u64,
    },
    /// A checkpoint file has the wrong magic (a blackboard's is [`Error::Blackboard`]), or a
    /// file opened as a ring is a checkpoint file (`kind` "ring", `found`
    /// [`CHECKPOINT_MAGIC`](crate::checkpoint::CHECKPOINT_MAGIC)): too short for a ring's
    /// header, it is named by its magic rather than taken for a ring cut short.
    BadFileMagic {
        /// The file.
        path: PathBuf,
        /// What kind of file was expected.
        kind: &'static str,
        /// The magic found.
        found: u64,
    },
    /// A file with the right magic is shorter than its layout (a truncated checkpoint).
    TooShort {
        /// The file.
        path: PathBuf,
        /// What kind of file it is.
        kind: &'static str,
        /// Its length.
        len: u64,
        /// The bytes its layout needs.
        need: u64,
    },
    /// A checkpoint file has an unsupported version (a blackboard's is
    /// [`Error::Blackboard`]).
    BadFileVersion {
        /// The file.
        path: PathBuf,
        /// What kind of file was expected.
        kind: &'static str,
        /// The version found.
        found: u32,
    },
    /// `commit_offset` on a consumer built without an offset file.
    NoOffsetFile {
        /// The ring file.
        path: PathBuf,
    },
    /// `commit_offset` through a copy of a consumer inherited through `fork`, while the
    /// process that opened its checkpoint file runs: both would commit their own cursors to
    /// the one file, and a restart would resume after whichever committed last.
    ForkedCheckpoint {
        /// The checkpoint file.
        path: PathBuf,
        /// The process that opened it.
        opener: u32,
    },
    /// `commit_offset` to a checkpoint file that is no longer at its path (removed, or
    /// replaced by another file there, since the consumer opened it): the offset went into
    /// a file the next attach cannot find, and a restart would not resume after it.
    CheckpointMoved {
        /// The checkpoint file's path.
        path: PathBuf,
    },
    /// The path of a mirror's ring, or of a ring or blackboard being created, holds a file
    /// that is neither empty nor of that kind (nor one whose creation never finished):
    /// somebody's data, which is refused rather than replaced, whether or not its own
    /// creator still holds it (a live queue at a ring's path is this, not
    /// [`Error::ProducerAlreadyExists`]).
    NotReplaced {
        /// The file.
        path: PathBuf,
        /// Its length.
        len: u64,
        /// Its first 8 bytes (little-endian), when it has 8.
        magic: Option<u64>,
        /// The kind of file that would have replaced it (`ring`, `blackboard`).
        kind: &'static str,
        /// Who refused (`a mirror`, `a ring producer`, `a blackboard producer`).
        creator: &'static str,
    },
    /// The path of a mirror's ring holds a lossy MPMC ring (`MODE_MPMC`, spec §8): a ring,
    /// but one its producers write by ticket. The mirror neither adopts it (its single-writer
    /// records would leave `write_seq` past `claim_seq`, which `stat`, `heal` and `serve`
    /// then refuse as corrupt) nor replaces it (the producers' records).
    MpmcRingNotMirrored {
        /// The file.
        path: PathBuf,
    },
    /// The path of a mirror's ring holds a ring without `FLAG_SPARSE` (spec §2.1: only
    /// mirrors set it, ringwire's and ringfire's alike): one a producer made, not a
    /// replica. The mirror neither adopts it (its readers would stall at every hole a
    /// mirror leaves) nor replaces it (its records would be gone).
    NotAMirrorRing {
        /// The file.
        path: PathBuf,
        /// Its header's flags.
        flags: u32,
    },
    /// Stuck slots were found and left as they are (`ringwire heal`): their holders may be
    /// alive.
    NotHealed {
        /// The file.
        path: PathBuf,
        /// What was left, and why.
        what: String,
    },
    /// A mirror was asked for a ring larger than its limit (`ringwire mirror
    /// --max-ring-size`): nothing was created, and a ring it already held is kept.
    RingTooLarge {
        /// The mirror ring file.
        path: PathBuf,
        /// The bytes the source's geometry needs (`u64::MAX` when that overflows).
        len: u64,
        /// The limit.
        max: u64,
    },
    /// An MPMC ring whose slots hold sequences no producer writes (at or past
    /// `claim_seq`): a corrupt ring (`ringwire stat` and `heal` refuse it).
    CorruptSlots {
        /// The file.
        path: PathBuf,
        /// The slots, with the sequence and `claim_seq` seen.
        source: SlotsPastClaim,
    },
    /// An argument is out of range.
    InvalidArgument {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the value.
        what: String,
    },
}

impl Error {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            Error::Io { path, .. }
            | Error::Attach { path, .. }
            | Error::QueueAttach { path, .. }
            | Error::Registry { path, .. }
            | Error::Backpressure { path, .. }
            | Error::Blob { path, .. }
            | Error::SeqExhausted { path, .. }
            | Error::Blackboard { path, .. }
            | Error::WriterStalled { path, .. }
            | Error::KeyBusy { path, .. }
            | Error::Geometry { path, .. }
            | Error::Init { path, .. }
            | Error::Region { path, .. }
            | Error::ProducerAlreadyExists { path }
            | Error::NotRegularFile { path, .. }
            | Error::FileTooLarge { path, .. }
            | Error::BadFileMagic { path, .. }
            | Error::TooShort { path, .. }
            | Error::BadFileVersion { path, .. }
            | Error::NoOffsetFile { path }
            | Error::ForkedCheckpoint { path, .. }
            | Error::CheckpointMoved { path }
            | Error::NotReplaced { path, .. }
            | Error::MpmcRingNotMirrored { path }
            | Error::NotAMirrorRing { path, .. }
            | Error::NotHealed { path, .. }
            | Error::RingTooLarge { path, .. }
            | Error::CorruptSlots { path, .. }
            | Error::InvalidArgument { path, .. } => path,
        }
    }

    /// The attach check that failed, if this is an attach error.
    pub fn attach_error(&self) -> Option<AttachError> {
        match self {
            Error::Attach { source, .. } => Some(*source),
            Error::Init {
                source: InitError::Geometry(e),
                ..
            } => Some(*e),
            _ => None,
        }
    }

    pub(crate) fn io(path: &Path, op: &'static str, source: io::Error) -> Error {
        Error::Io {
            path: path.to_path_buf(),
            op,
            source,
        }
    }

    pub(crate) fn no_offset_file(path: &Path) -> Error {
        Error::NoOffsetFile {
            path: path.to_path_buf(),
        }
    }

    pub(crate) fn attach(path: &Path, source: AttachError) -> Error {
        Error::Attach {
            path: path.to_path_buf(),
            source,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = crate::shown::path(self.path());
        match self.noun() {
            None => {}
            Some("") => write!(f, "{p}: ")?,
            Some(noun) => write!(f, "{noun} {p}: ")?,
        }
        self.fmt_reason(f)
    }
}

impl Error {
    /// The word(s) this error's text puts before its path ("ring", "offset file"); "" when
    /// the text begins with the path; `None` when it names no path (Io and InvalidArgument
    /// with an empty one).
    fn noun(&self) -> Option<&'static str> {
        Some(match self {
            // Io and InvalidArgument come from rings, checkpoints, blackboards, queues, the
            // CLI's output files and sockets alike: the path says which, not a fixed noun.
            Error::Io { path, .. } | Error::InvalidArgument { path, .. }
                if path.as_os_str().is_empty() =>
            {
                return None;
            }
            Error::Attach { .. }
            | Error::Geometry { .. }
            | Error::Registry { .. }
            | Error::Backpressure { .. }
            | Error::Blob { .. }
            | Error::SeqExhausted { .. }
            | Error::Init { .. }
            | Error::NoOffsetFile { .. }
            | Error::CorruptSlots { .. } => "ring",
            Error::QueueAttach { .. } => "queue",
            Error::Blackboard { .. } | Error::WriterStalled { .. } | Error::KeyBusy { .. } => {
                "blackboard"
            }
            Error::ForkedCheckpoint { .. } | Error::CheckpointMoved { .. } => "offset file",
            Error::BadFileMagic { kind, .. }
            | Error::TooShort { kind, .. }
            | Error::BadFileVersion { kind, .. } => kind,
            Error::Io { .. }
            | Error::Region { .. }
            | Error::ProducerAlreadyExists { .. }
            | Error::NotRegularFile { .. }
            | Error::FileTooLarge { .. }
            | Error::NotReplaced { .. }
            | Error::MpmcRingNotMirrored { .. }
            | Error::NotAMirrorRing { .. }
            | Error::InvalidArgument { .. }
            | Error::NotHealed { .. }
            | Error::RingTooLarge { .. } => "",
        })
    }

    /// What is wrong, without the path this error names: its text after "ring PATH: " (or
    /// "PATH: ", "offset file PATH: "; all of it when it names no path), for a line that
    /// names the path itself. The reason's own text is never cut, whatever it holds.
    pub(crate) fn reason(&self) -> impl fmt::Display + '_ {
        struct Reason<'a>(&'a Error);
        impl fmt::Display for Reason<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt_reason(f)
            }
        }
        Reason(self)
    }

    /// The text after [`noun`](Self::noun) and the path.
    fn fmt_reason(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { op, source, .. } => write!(f, "{op} failed: {source}"),
            Error::Attach { source, .. } => write!(f, "{source}"),
            Error::QueueAttach { source, .. } => write!(f, "{source}"),
            Error::Geometry { source, .. } => write!(f, "{source}"),
            Error::Registry { source, .. } => write!(f, "{source}"),
            Error::Backpressure {
                seq,
                waited,
                reader,
                ..
            } => {
                write!(f, "record {seq} not written after waiting {waited:?}")?;
                match reader {
                    // Debug of the name: quoted, its control characters escaped.
                    Some(r) => write!(
                        f,
                        ": registry slot {} (pid {}, name {:?}) is at cursor {}, {} records behind, and holds the producer back",
                        r.slot_index, r.pid, r.name, r.cursor_seq, r.lag
                    ),
                    None => write!(f, ": a registered reader held the producer back"),
                }
            }
            Error::Blob { source, .. } => write!(f, "{source}"),
            Error::SeqExhausted { source, .. } => write!(f, "{source}"),
            Error::Blackboard { source, .. } => write!(f, "{source}"),
            Error::WriterStalled { key, .. } => write!(
                f,
                "writer of key {key} stalled for more than {} ms",
                crate::blackboard::STALL_TIMEOUT.as_millis()
            ),
            Error::KeyBusy { key, .. } => write!(
                f,
                "key {key} was being written at every look for more than {} ms: no consistent read",
                crate::blackboard::BUSY_TIMEOUT.as_millis()
            ),
            Error::Init { source, .. } => write!(f, "{source}"),
            Error::Region { source, .. } => write!(f, "{source}"),
            Error::ProducerAlreadyExists { .. } => {
                write!(f, "another producer holds its lock")
            }
            Error::NotRegularFile { found, .. } => {
                write!(f, "not a regular file but {found}")
            }
            Error::FileTooLarge { len, .. } => {
                write!(f, "file of {len} bytes is too large to map")
            }
            Error::BadFileMagic { found, .. } => {
                write!(f, "bad magic {found:#018x}")?;
                // Naming the file kind the magic belongs to shows a swapped or wrong path.
                match ringwire_core::error::KnownMagic::of(*found) {
                    Some(owner) => write!(f, " (the magic of {owner})"),
                    None => crate::checkpoint::name_offset_file_magic(f, *found),
                }
            }
            Error::TooShort { len, need, .. } => {
                write!(f, "{len} bytes, shorter than the {need} it needs")
            }
            Error::BadFileVersion { found, .. } => {
                write!(f, "version {found} is not supported")
            }
            Error::NoOffsetFile { .. } => write!(
                f,
                "no offset file configured for this consumer (RingConsumerBuilder::offset_file)"
            ),
            Error::ForkedCheckpoint { opener, .. } => write!(
                f,
                "opened by process {opener}, which is running; a copy inherited through fork does not commit to it (commit_offset_to a file of its own)"
            ),
            Error::CheckpointMoved { .. } => write!(
                f,
                "no longer at its path (removed or replaced since the consumer opened it); the offset committed to it would not be found by the next attach"
            ),
            Error::NotReplaced {
                len,
                magic,
                kind,
                creator,
                ..
            } => not_replaced(f, *len, *magic, kind, creator),
            Error::MpmcRingNotMirrored { .. } => write!(
                f,
                "a lossy MPMC ring (flag MODE_MPMC), written by its producers; a mirror \
                 neither writes into one nor replaces it (remove it, or use another path)"
            ),
            Error::NotAMirrorRing { flags, .. } => write!(
                f,
                "a ring without FLAG_SPARSE (flags {flags:#06x}), which no mirror makes: \
                 a producer's ring, not a replica; a mirror neither resumes nor replaces it \
                 (remove it, or use another path)"
            ),
            Error::CorruptSlots { source, .. } => write!(f, "{source}"),
            Error::InvalidArgument { what, .. } => write!(f, "{what}"),
            Error::NotHealed { what, .. } => write!(f, "{what}"),
            Error::RingTooLarge { len, max, .. } if *len == u64::MAX => write!(
                f,
                "the source's ring geometry overflows a 64-bit file length (limit {max} bytes); nothing was created"
            ),
            Error::RingTooLarge { len, max, .. } => write!(
                f,
                "the source's ring needs {len} bytes, over this mirror's limit of {max} bytes (--max-ring-size); nothing was created"
            ),
        }
    }
}

impl Error {
    /// The error this one wraps (a system call's, or a check's of the core), whose text is
    /// already in this one's: `ring /dev/shm/ticks: capacity 1000 is not a power of two`.
    /// `None` for the variants that wrap nothing. Also reachable as the variant's `source`.
    pub fn cause(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Attach { source, .. } => Some(source),
            Error::QueueAttach { source, .. } => Some(source),
            Error::Geometry { source, .. } => Some(source),
            Error::Registry { source, .. } => Some(source),
            Error::Blob { source, .. } => Some(source),
            Error::SeqExhausted { source, .. } => Some(source),
            Error::Blackboard { source, .. } => Some(source),
            Error::Init { source, .. } => Some(source),
            Error::Region { source, .. } => Some(source),
            Error::CorruptSlots { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// `source()` is the wrapped error's own source, not the wrapped error: its text is already
/// in this error's, so a report that walks the chain (anyhow's `{:#}`, eyre's) prints it once.
/// `std::io::Error` treats the error it wraps the same way. The wrapped error is
/// [`Error::cause`].
impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause().and_then(|c| c.source())
    }
}

/// A registry size as the header's u32, or an error naming the file.
pub(crate) fn readers_u32(path: &Path, n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::InvalidArgument {
        path: path.to_path_buf(),
        what: format!("max_readers {n} does not fit the header's 32-bit registry count"),
    })
}

/// What a creator found at its path and refused to replace (after the path): "a file of
/// 300 bytes (a ring) is not a queue; a queue creator replaces only …".
pub(crate) fn not_replaced(
    f: &mut fmt::Formatter<'_>,
    len: u64,
    magic: Option<u64>,
    kind: &str,
    creator: &str,
) -> fmt::Result {
    write!(f, "a file of {len} bytes")?;
    match magic.and_then(ringwire_core::queue::QueueKind::from_magic) {
        Some(k) => write!(f, " (a ringwire {} queue)", k.name())?,
        None if magic == Some(ringwire_core::blackboard::BLACKBOARD_MAGIC) => {
            write!(f, " (a blackboard)")?
        }
        None if magic == Some(ringwire_core::layout::RING_MAGIC) => write!(f, " (a ring)")?,
        None if magic == Some(crate::checkpoint::CHECKPOINT_MAGIC) => {
            write!(f, " (a consumer offset file)")?
        }
        None => {
            if let Some(m) = magic {
                write!(f, " with magic {m:#018x}")?
            }
        }
    }
    write!(
        f,
        " is not a {kind}; {creator} replaces only a {kind} or an empty file (remove it, or \
         use another path)"
    )
}
