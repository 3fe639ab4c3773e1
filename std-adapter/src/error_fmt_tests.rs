//! Every variant of the adapter's public error types ([`Error`], [`QueueFileError`],
//! [`ReplicaError`]), built with hostile values (0, 1, the maxima and their neighbours,
//! empty, non-UTF-8, control-character and 64 KiB paths), formats without a panic and shows
//! the values, the path (escaped as `shown::path` does: no control character reaches the
//! text) and the cause it carries.
//! Each `*_variant` function numbers the variants with an exhaustive `match`: a variant
//! added later does not compile until it is numbered, and then fails until it has samples.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;

use ringwire_core::blackboard::{BLACKBOARD_MAGIC, BlackboardError};
use ringwire_core::broadcast::SeqExhausted;
use ringwire_core::broadcast::blob::BlobError;
use ringwire_core::broadcast::registry::RegistryError;
use ringwire_core::layout::RING_MAGIC;
use ringwire_core::queue::compat::SlotsPastClaim;
use ringwire_core::queue::layout::{MPMC_MAGIC, SPSC_MAGIC};
use ringwire_core::queue::{QueueAttachError, QueueGeometryError, QueueInitError};
use ringwire_core::replicate::{MirrorError, SinkError};
use ringwire_core::{AttachError, GeometryError, InitError, RegionError};

use crate::Error;
use crate::fmt_check::{U32, U64, USIZE, assert_every_variant, check, pairs};
use crate::queue::QueueFileError;
use crate::registry::ReaderInfo;
use crate::replica::ReplicaError;

const MAGICS: [u64; 7] = [
    0,
    1,
    u64::MAX,
    RING_MAGIC,
    BLACKBOARD_MAGIC,
    SPSC_MAGIC,
    MPMC_MAGIC,
];

fn paths() -> [PathBuf; 5] {
    [
        PathBuf::new(),
        PathBuf::from("/dev/shm/ticks"),
        PathBuf::from(OsStr::from_bytes(b"/dev/shm/\xff\xfe-ring")),
        PathBuf::from("/dev/shm/a\nb\x1b[2Jc"),
        PathBuf::from(format!("/tmp/{}", "p".repeat(65536))),
    ]
}

/// What `NotRegularFile` may say the path is (`file::type_name`).
const FILE_TYPES: [&str; 7] = [
    "a directory",
    "a FIFO",
    "a character device",
    "a block device",
    "a socket",
    "a symlink",
    "a file of unknown type",
];

fn io_errors() -> [io::Error; 3] {
    [
        io::Error::from_raw_os_error(libc::ENOSPC),
        io::Error::from(io::ErrorKind::UnexpectedEof),
        io::Error::other("custom cause 77"),
    ]
}

fn error_variant(e: &Error) -> usize {
    match e {
        Error::Io { .. } => 0,
        Error::Registry { .. } => 1,
        Error::Backpressure { .. } => 2,
        Error::Blob { .. } => 3,
        Error::Blackboard { .. } => 4,
        Error::WriterStalled { .. } => 5,
        Error::KeyBusy { .. } => 27,
        Error::Attach { .. } => 6,
        Error::QueueAttach { .. } => 7,
        Error::Geometry { .. } => 8,
        Error::Init { .. } => 9,
        Error::Region { .. } => 10,
        Error::ProducerAlreadyExists { .. } => 11,
        Error::NotRegularFile { .. } => 12,
        Error::FileTooLarge { .. } => 13,
        Error::BadFileMagic { .. } => 14,
        Error::TooShort { .. } => 15,
        Error::BadFileVersion { .. } => 16,
        Error::NoOffsetFile { .. } => 17,
        Error::ForkedCheckpoint { .. } => 18,
        Error::CheckpointMoved { .. } => 19,
        Error::NotReplaced { .. } => 20,
        Error::NotHealed { .. } => 21,
        Error::RingTooLarge { .. } => 22,
        Error::InvalidArgument { .. } => 23,
        Error::CorruptSlots { .. } => 24,
        Error::MpmcRingNotMirrored { .. } => 25,
        Error::NotAMirrorRing { .. } => 26,
        Error::SeqExhausted { .. } => 28,
    }
}

/// Every variant of [`Error`], once per path and hostile value.
fn error_samples() -> Vec<Error> {
    let mut all = Vec::new();
    for path in paths() {
        let p = || path.clone();
        for (i, j) in pairs() {
            let (a, b, x, y, n) = (U64[i], U64[j], U32[i], U32[j], USIZE[i]);
            let reader = ReaderInfo {
                slot_index: USIZE[(i + 1) % 5],
                pid: x,
                name: ["", "reader-9", "tab\there"][i % 3].to_string(),
                cursor_seq: a,
                lag: b,
            };
            all.extend([
                Error::Registry {
                    path: p(),
                    source: RegistryError::BadSlot { slot: x, count: y },
                },
                Error::Backpressure {
                    path: p(),
                    seq: a,
                    waited: Duration::new(U64[(i + 2) % 5], 999_999_999),
                    reader: Some(reader),
                },
                Error::Backpressure {
                    path: p(),
                    seq: a,
                    waited: Duration::ZERO,
                    reader: None,
                },
                Error::Blob {
                    path: p(),
                    source: BlobError::TooLarge { len: n, max: b },
                },
                Error::SeqExhausted {
                    path: p(),
                    source: SeqExhausted { seq: a },
                },
                Error::Blackboard {
                    path: p(),
                    source: BlackboardError::KeyOutOfRange {
                        key: n,
                        slot_count: y,
                    },
                },
                Error::WriterStalled { path: p(), key: n },
                Error::KeyBusy { path: p(), key: n },
                Error::Attach {
                    path: p(),
                    source: AttachError::ReadSeqPastClaimSeq {
                        read_seq: a,
                        claim_seq: b,
                    },
                },
                Error::QueueAttach {
                    path: p(),
                    source: QueueAttachError::BadCursors {
                        enqueue: a,
                        dequeue: b,
                        capacity: U64[(i + 2) % 5],
                    },
                },
                Error::Geometry {
                    path: p(),
                    source: GeometryError::BadStride { stride: a },
                },
                Error::Init {
                    path: p(),
                    source: InitError::RegionTooSmall { need: a, len: b },
                },
                Error::Init {
                    path: p(),
                    source: InitError::Geometry(AttachError::TooShort { len: a }),
                },
                Error::Region {
                    path: p(),
                    source: RegionError::Misaligned { addr: n },
                },
                Error::FileTooLarge { path: p(), len: a },
                Error::TooShort {
                    path: p(),
                    kind: "offset file",
                    len: a,
                    need: b,
                },
                Error::BadFileVersion {
                    path: p(),
                    kind: "offset file",
                    found: x,
                },
                Error::ForkedCheckpoint {
                    path: p(),
                    opener: x,
                },
                Error::NotHealed {
                    path: p(),
                    what: format!("slot {a} of {b}"),
                },
                Error::RingTooLarge {
                    path: p(),
                    len: a,
                    max: b,
                },
                Error::InvalidArgument {
                    path: p(),
                    what: format!("max_readers {n} is too many"),
                },
                Error::CorruptSlots {
                    path: p(),
                    source: SlotsPastClaim {
                        count: a,
                        slot: b,
                        seq: U64[(i + 2) % 5],
                        claim_seq: U64[(j + 3) % 5],
                    },
                },
            ]);
        }
        for source in io_errors() {
            let op = "fallocate";
            all.push(Error::Io {
                path: p(),
                op,
                source,
            });
        }
        for found in MAGICS {
            let kind = "offset file";
            all.push(Error::BadFileMagic {
                path: p(),
                kind,
                found,
            });
            for magic in [None, Some(found)] {
                let (kind, creator) = ("ring", "a ring producer");
                let len = found.wrapping_mul(3);
                all.push(Error::NotReplaced {
                    path: p(),
                    len,
                    magic,
                    kind,
                    creator,
                });
            }
        }
        for found in FILE_TYPES {
            all.push(Error::NotRegularFile { path: p(), found });
        }
        all.extend([
            Error::ProducerAlreadyExists { path: p() },
            Error::NoOffsetFile { path: p() },
            Error::CheckpointMoved { path: p() },
            Error::MpmcRingNotMirrored { path: p() },
        ]);
        all.extend(
            U32.iter()
                .map(|&flags| Error::NotAMirrorRing { path: p(), flags }),
        );
    }
    all
}

/// Field values a text may leave out on purpose: a magic it names the file kind of, a
/// length that stands for an overflow.
fn hidden(e: &Error) -> &'static [&'static str] {
    match e {
        Error::NotReplaced { magic: Some(m), .. }
            if [RING_MAGIC, BLACKBOARD_MAGIC, SPSC_MAGIC, MPMC_MAGIC].contains(m) =>
        {
            &["magic"]
        }
        Error::RingTooLarge { len: u64::MAX, .. } => &["len"],
        _ => &[],
    }
}

/// Whether `s` holds a char for which [`char::is_control`] is true (U+0000..=U+001F and
/// U+007F..=U+009F), found from its UTF-8 bytes: a byte below 0x20, 0x7f, or 0xc2 (always a
/// lead byte) before one of 0x80..=0x9f. The answer of `s.contains(char::is_control)`, which
/// decodes every char: seconds of these tests over the 64 KiB path in a debug build.
fn has_control(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c < 0x20 || c == 0x7f || c == 0xc2 && b.get(i + 1).is_some_and(|n| *n <= 0x9f) {
            return true;
        }
        i += 1;
    }
    false
}

/// [`has_control`] gives `char::is_control`'s answer for every char, alone and between others.
#[test]
fn has_control_finds_the_control_chars() {
    let mut buf = [0u8; 4];
    for c in (0..=0x10_ffff).filter_map(char::from_u32) {
        assert_eq!(
            has_control(c.encode_utf8(&mut buf)),
            c.is_control(),
            "{c:?}"
        );
    }
    // Each char below U+0800 (every control char is) between a plain char and a 0xc2-led one.
    for c in (0..0x800).filter_map(char::from_u32) {
        let text = format!("a{c}\u{a0}");
        assert_eq!(has_control(&text), c.is_control(), "{c:?} in {text:?}");
    }
    assert!(!has_control(""));
}

/// `shown::path(path)` as a string, made once per run of equal paths (the samples come
/// grouped by path): escaping the 64 KiB path for every sample cost seconds in a debug build.
fn shown_path<'a>(last: &'a mut Option<(PathBuf, String)>, path: &std::path::Path) -> &'a str {
    if last.as_ref().is_none_or(|(p, _)| p != path) {
        *last = Some((path.to_path_buf(), crate::shown::path(path).to_string()));
    }
    last.as_ref().map_or("", |(_, s)| s.as_str())
}

#[test]
fn adapter_errors_format_every_variant_with_their_path() {
    let all = error_samples();
    assert_every_variant(&all, 29, error_variant);
    let mut last = None;
    for e in &all {
        let shown = check(e, hidden(e));
        // Io and InvalidArgument leave an empty path out; the others show it as `""`.
        if !e.path().as_os_str().is_empty() {
            let path = shown_path(&mut last, e.path());
            assert!(shown.contains(path), "{e:?}: the path is not in {shown:?}");
        }
        assert!(!has_control(&shown), "{e:?}: {shown:?}");
    }
}

/// A wrapped cause is [`Error::cause`], its text is in the wrapper's, and a report that walks
/// `source()` (anyhow's `{:#}`) prints every text of the chain once.
#[test]
fn adapter_errors_show_their_cause_once_down_the_chain() {
    for e in &error_samples() {
        let wraps = matches!(
            e,
            Error::Io { .. }
                | Error::Registry { .. }
                | Error::Blob { .. }
                | Error::SeqExhausted { .. }
                | Error::Blackboard { .. }
                | Error::Attach { .. }
                | Error::QueueAttach { .. }
                | Error::Geometry { .. }
                | Error::Init { .. }
                | Error::Region { .. }
                | Error::CorruptSlots { .. }
        );
        assert_cause_shown_once(e, e.cause(), wraps);
    }
}

/// A cause with a cause of its own: the wrapper's `source()` is that deeper one, so the
/// chain's report reads each text once, outermost first.
#[test]
fn a_cause_of_the_cause_is_the_source() {
    #[derive(Debug)]
    struct Layered(io::Error);
    impl std::fmt::Display for Layered {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("layered cause")
        }
    }
    impl std::error::Error for Layered {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
    let deep = || io::Error::other(Layered(io::Error::from_raw_os_error(libc::ENOSPC)));
    let path = PathBuf::from("/dev/shm/chain");
    let ring = Error::Io {
        path: path.clone(),
        op: "fallocate",
        source: deep(),
    };
    let queue = QueueFileError::Io {
        path,
        op: "fallocate",
        source: deep(),
    };
    let replica = ReplicaError::Ring(Error::Io {
        path: PathBuf::from("/dev/shm/chain"),
        op: "fallocate",
        source: deep(),
    });
    let enospc = io::Error::from_raw_os_error(libc::ENOSPC).to_string();
    for (e, wrapper) in [
        (
            &ring as &(dyn std::error::Error + 'static),
            "/dev/shm/chain",
        ),
        (&queue, "queue /dev/shm/chain"),
        (&replica, "/dev/shm/chain"),
    ] {
        assert_eq!(
            chain_report(e),
            format!("{wrapper}: fallocate failed: layered cause: {enospc}")
        );
        assert_eq!(e.source().map(|c| c.to_string()), Some(enospc.clone()));
        assert_chain_texts_once(e);
    }
}

/// The texts of `e` and of each `source()` under it, outermost first.
fn chain_texts(e: &(dyn std::error::Error + 'static)) -> Vec<String> {
    std::iter::successors(Some(e), |c| c.source())
        .map(|c| c.to_string())
        .collect()
}

/// The chain's texts joined by ": ", as anyhow's `{:#}` joins them.
fn chain_report(e: &(dyn std::error::Error + 'static)) -> String {
    chain_texts(e).join(": ")
}

/// `cause` is there when `wraps`, its text is in `e`'s, and the chain's texts are each
/// shown once ([`assert_chain_texts_once`]).
fn assert_cause_shown_once(
    e: &(dyn std::error::Error + 'static),
    cause: Option<&(dyn std::error::Error + 'static)>,
    wraps: bool,
) {
    assert_eq!(cause.is_some(), wraps, "{e:?}");
    let shown = e.to_string();
    if let Some(c) = cause {
        let text = c.to_string();
        assert!(shown.contains(&text), "{e:?}: {text:?} is not in {shown:?}");
    }
    assert_chain_texts_once(e);
}

/// No text down the chain of `source()` from `e` already holds the text of one below it.
fn assert_chain_texts_once(e: &(dyn std::error::Error + 'static)) {
    let texts = chain_texts(e);
    for (i, outer) in texts.iter().enumerate() {
        for inner in &texts[i + 1..] {
            assert!(
                !outer.contains(inner.as_str()),
                "{e:?}: {outer:?} already holds {inner:?}, the text of a source below it"
            );
        }
    }
}

fn queue_file_variant(e: &QueueFileError) -> usize {
    match e {
        QueueFileError::Io { .. } => 0,
        QueueFileError::Locked(_) => 1,
        QueueFileError::InUse { .. } => 2,
        QueueFileError::NotRegularFile { .. } => 3,
        QueueFileError::NotReplaced { .. } => 4,
        QueueFileError::RoleTaken { .. } => 5,
        QueueFileError::Geometry { .. } => 6,
        QueueFileError::Init { .. } => 7,
        QueueFileError::Attach { .. } => 8,
        QueueFileError::NotFixedSize(_) => 9,
    }
}

fn queue_file_samples() -> Vec<QueueFileError> {
    let mut all = Vec::new();
    for path in paths() {
        let p = || path.clone();
        for source in io_errors() {
            all.push(QueueFileError::Io {
                path: p(),
                op: "mmap",
                source,
            });
        }
        for (i, j) in pairs() {
            let (a, b) = (U64[i], U64[j]);
            all.extend([
                QueueFileError::Geometry {
                    path: p(),
                    source: QueueGeometryError::BadStride {
                        stride: a,
                        item_size: U32[j],
                    },
                },
                QueueFileError::Init {
                    path: p(),
                    source: QueueInitError::RegionTooSmall {
                        need: Some(a),
                        len: b,
                    },
                },
                QueueFileError::Attach {
                    path: p(),
                    err: QueueAttachError::StampOffLap {
                        pos: a,
                        stamp: b,
                        enqueue: U64[(i + 2) % 5],
                        dequeue: U64[(i + 1) % 5],
                    },
                },
            ]);
        }
        for found in FILE_TYPES {
            all.push(QueueFileError::NotRegularFile { path: p(), found });
        }
        for found in [0, 1, u64::MAX] {
            for magic in [None, Some(found)] {
                let len = found.wrapping_add(5);
                all.push(QueueFileError::NotReplaced {
                    path: p(),
                    len,
                    magic,
                });
            }
        }
        all.extend([
            QueueFileError::Locked(p()),
            QueueFileError::InUse {
                path: p(),
                holder: "consumer",
            },
            QueueFileError::RoleTaken {
                path: p(),
                role: "producer",
            },
            QueueFileError::NotFixedSize(p()),
        ]);
    }
    all
}

#[test]
fn queue_file_errors_format_every_variant_and_show_their_cause_once() {
    let all = queue_file_samples();
    assert_every_variant(&all, 10, queue_file_variant);
    let mut last = None;
    for e in &all {
        let shown = check(e, &[]);
        let path = match e {
            QueueFileError::Io { path, .. }
            | QueueFileError::Locked(path)
            | QueueFileError::InUse { path, .. }
            | QueueFileError::NotRegularFile { path, .. }
            | QueueFileError::NotReplaced { path, .. }
            | QueueFileError::RoleTaken { path, .. }
            | QueueFileError::Geometry { path, .. }
            | QueueFileError::Init { path, .. }
            | QueueFileError::Attach { path, .. }
            | QueueFileError::NotFixedSize(path) => shown_path(&mut last, path),
        };
        assert!(shown.contains(path), "{e:?}: the path is not in {shown:?}");
        assert!(!has_control(&shown), "{e:?}: {shown:?}");
        let wraps = matches!(
            e,
            QueueFileError::Io { .. }
                | QueueFileError::Geometry { .. }
                | QueueFileError::Init { .. }
                | QueueFileError::Attach { .. }
        );
        assert_cause_shown_once(e, e.cause(), wraps);
    }
}

fn replica_variant(e: &ReplicaError) -> usize {
    match e {
        ReplicaError::Ring(_) => 0,
        ReplicaError::Io { .. } => 1,
        ReplicaError::InvalidArgument { .. } => 2,
        ReplicaError::Mirror(_) => 3,
        ReplicaError::SourceReplaced { .. } => 4,
        ReplicaError::SessionFailed { .. } => 5,
        ReplicaError::DemoFailed { .. } => 6,
    }
}

#[test]
fn replica_errors_format_every_variant_and_show_their_cause_once() {
    let mut all: Vec<ReplicaError> = error_samples()
        .into_iter()
        .filter(|e| hidden(e).is_empty())
        .map(ReplicaError::Ring)
        .collect();
    for source in io_errors() {
        all.push(ReplicaError::Io {
            what: "connect to 10.0.0.1:7000".into(),
            source,
        });
    }
    for path in paths() {
        all.push(ReplicaError::SourceReplaced { path });
    }
    for (i, &a) in U64.iter().enumerate() {
        all.extend([
            ReplicaError::arg("--max-ring-size", a, "is below the header"),
            ReplicaError::Mirror(MirrorError::Sink(SinkError::Init(
                InitError::RegionTooSmall {
                    need: a,
                    len: U64[4 - i],
                },
            ))),
            ReplicaError::SessionFailed {
                peer: format!("10.0.0.{i}:{a}"),
                why: format!("no HELLO in {a} ms"),
            },
            ReplicaError::DemoFailed {
                what: format!("record {a} missing"),
            },
        ]);
    }
    assert_every_variant(&all, 7, replica_variant);
    for e in &all {
        check(e, &[]);
        // Every variant shows its cause in its text; none hands it on as its source.
        assert_cause_shown_once(e, None, false);
    }
}
