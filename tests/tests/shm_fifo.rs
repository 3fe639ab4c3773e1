//! A FIFO (or anything else that is not a regular file) where a ring, queue, blackboard or
//! checkpoint file is expected is a typed "not a regular file" error naming the path, at
//! once: no open waits for a writer to appear. Each open runs on its own thread and the
//! test fails, rather than hangs, if one takes longer than a few seconds.

use std::ffi::CString;
use std::fmt::Debug;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use ringwire::core::queue::QueueKind;
use ringwire::core::{Expect, Geometry};
use ringwire::queue::{
    MpmcQueue, QueueFileError, ReadOnlyQueue, SpscBytesConsumer, SpscConsumer, SpscProducer,
};
use ringwire::{
    BlackboardConsumer, BlackboardProducer, CreateOptions, Error, OffsetCheckpoint, ReadOnlyRing,
    RingFile,
};

/// Longer than any of these opens takes; a blocked open never returns.
const BOUND: Duration = Duration::from_secs(5);

/// A FIFO in a fresh directory under /dev/shm; the directory is removed on drop.
struct Fifo(PathBuf);

impl Fifo {
    fn new(tag: &str) -> Fifo {
        let dir = PathBuf::from(format!(
            "/dev/shm/ringwire-test-fifo-{tag}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let path = dir.join("fifo");
        let c = CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: `c` is a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
        Fifo(path)
    }
}

impl Drop for Fifo {
    fn drop(&mut self) {
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Runs `open` on a thread and returns its error; panics if it blocks past `BOUND` or
/// succeeds.
fn open_err<T: Debug, E: Send + 'static>(
    what: &str,
    open: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> E {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(open().map(|t| format!("{t:?}")));
    });
    match rx.recv_timeout(BOUND) {
        Ok(Err(e)) => e,
        Ok(Ok(t)) => panic!("{what}: opened a FIFO: {t}"),
        Err(_) => {
            panic!("{what}: still blocked after {BOUND:?} (opening a FIFO waits for a writer)")
        }
    }
}

/// Checks `e` refuses `path` as not a regular file but `found` ("a FIFO"), and says so.
fn ring_err_found(what: &str, path: &Path, found: &str, e: Error) {
    let msg = e.to_string();
    assert!(
        matches!(&e, Error::NotRegularFile { path: p, found: f } if p == path && *f == found),
        "{what}: {e:?}"
    );
    assert!(msg.contains(&path.display().to_string()), "{what}: {msg}");
    assert!(
        msg.contains(&format!("not a regular file but {found}")),
        "{what}: {msg}"
    );
}

fn ring_err(what: &str, path: &Path, e: Error) {
    ring_err_found(what, path, "a FIFO", e);
}

fn queue_err(what: &str, path: &Path, e: QueueFileError) {
    let msg = e.to_string();
    assert!(
        matches!(&e, QueueFileError::NotRegularFile { path: p, found: "a FIFO" } if p == path),
        "{what}: {e:?}"
    );
    assert_eq!(
        msg,
        format!("queue {}: not a regular file but a FIFO", path.display())
    );
}

#[test]
fn every_open_of_a_fifo_is_a_typed_error_at_once() {
    let fifo = Fifo::new("open");
    let p = fifo.0.clone();
    let geo = Geometry::spmc(16, 16, 8, 0, false).unwrap();

    // Read-only opens: these used to block in open(2) until a writer came.
    let q = p.clone();
    ring_err(
        "ReadOnlyRing::open",
        &p,
        open_err("ReadOnlyRing::open", move || ReadOnlyRing::open(q)),
    );
    for kind in [QueueKind::Spsc, QueueKind::Mpmc] {
        let q = p.clone();
        let e = open_err("ReadOnlyQueue::open", move || ReadOnlyQueue::open(q, kind));
        ring_err("ReadOnlyQueue::open", &p, e);
    }
    let q = p.clone();
    let e = open_err("stat_json", move || ringwire::cli::stat_json(&q));
    ring_err("stat_json", &p, e);

    // Read-write opens and creates: refused as not a regular file, not as a short or
    // unsizable one.
    let q = p.clone();
    ring_err(
        "RingFile::open",
        &p,
        open_err("RingFile::open", move || RingFile::open(q, Expect::RAW)),
    );
    let (q, g) = (p.clone(), geo);
    let e = open_err("RingFile::create", move || {
        RingFile::create(q, &g, &CreateOptions::default())
    });
    ring_err("RingFile::create", &p, e);
    let (q, g) = (p.clone(), geo);
    let legacy = CreateOptions {
        exclusive_lock: false,
        ..CreateOptions::default()
    };
    let e = open_err("RingFile::create (legacy)", move || {
        RingFile::create(q, &g, &legacy)
    });
    ring_err("RingFile::create (legacy)", &p, e);
    let q = p.clone();
    let e = open_err("BlackboardConsumer::attach", move || {
        BlackboardConsumer::<u64>::attach(q)
    });
    ring_err("BlackboardConsumer::attach", &p, e);
    let q = p.clone();
    let e = open_err("BlackboardProducer::create", move || {
        BlackboardProducer::<u64>::create(q, 4)
    });
    ring_err("BlackboardProducer::create", &p, e);
    let q = p.clone();
    let e = open_err("OffsetCheckpoint::open_or_create", move || {
        OffsetCheckpoint::open_or_create(q, "c")
    });
    ring_err("OffsetCheckpoint::open_or_create", &p, e);

    let q = p.clone();
    queue_err(
        "SpscConsumer::open",
        &p,
        open_err("SpscConsumer::open", move || SpscConsumer::<u64>::open(q)),
    );
    let q = p.clone();
    queue_err(
        "SpscProducer::open",
        &p,
        open_err("SpscProducer::open", move || SpscProducer::<u64>::open(q)),
    );
    let q = p.clone();
    let e = open_err("SpscBytesConsumer::open", move || {
        SpscBytesConsumer::open(q)
    });
    queue_err("SpscBytesConsumer::open", &p, e);
    let q = p.clone();
    queue_err(
        "MpmcQueue::open",
        &p,
        open_err("MpmcQueue::open", move || MpmcQueue::<u64>::open(q)),
    );
    let q = p.clone();
    let e = open_err("SpscProducer::create", move || {
        SpscProducer::<u64>::create(q, 8)
    });
    queue_err("SpscProducer::create", &p, e);
    let q = p.clone();
    queue_err(
        "MpmcQueue::create",
        &p,
        open_err("MpmcQueue::create", move || MpmcQueue::<u64>::create(q, 8)),
    );

    // Nothing replaced or removed the FIFO.
    assert!(std::fs::metadata(&p).unwrap().file_type().is_fifo());
}

#[test]
fn a_directory_is_not_a_regular_file_either() {
    let fifo = Fifo::new("dir");
    let dir = fifo.0.parent().unwrap().to_path_buf();
    let q = dir.clone();
    let e = open_err("ReadOnlyRing::open", move || ReadOnlyRing::open(q));
    ring_err_found("ReadOnlyRing::open", &dir, "a directory", e);
    let q = dir.clone();
    let e = open_err("ReadOnlyQueue::open", move || {
        ReadOnlyQueue::open(q, QueueKind::Spsc)
    });
    ring_err_found("ReadOnlyQueue::open", &dir, "a directory", e);
}

/// `/dev/null`, the usual wrong path, is named a character device, whichever side opens it.
#[test]
fn dev_null_is_named_a_character_device() {
    let null = Path::new("/dev/null");
    let e = ReadOnlyRing::open(null).unwrap_err();
    ring_err_found("ReadOnlyRing::open", null, "a character device", e);
    let e = RingFile::open(null, Expect::RAW).unwrap_err();
    ring_err_found("RingFile::open", null, "a character device", e);
    let e = MpmcQueue::<u64>::open(null).unwrap_err();
    assert!(
        matches!(
            &e,
            QueueFileError::NotRegularFile {
                found: "a character device",
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "queue /dev/null: not a regular file but a character device"
    );
}
