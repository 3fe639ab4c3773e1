//! A queue's I/O errors name the file and the operation, and call it a queue:
//! "queue /dev/shm/x: open failed: No such file or directory (os error 2)", not the bare OS
//! error, nor "ring …".

use std::io::ErrorKind;
use std::path::Path;

use ringwire::queue::{MpmcQueue, QueueFileError, SpscBytesConsumer, SpscConsumer, SpscProducer};
use ringwire_tests::shm::{ShmDir, ShmPath};

fn assert_io<T>(r: Result<T, QueueFileError>, path: &Path, op: &str, kind: ErrorKind, os: &str) {
    let Err(e) = r else {
        panic!("expected an error on {}", path.display())
    };
    assert!(
        matches!(&e, QueueFileError::Io { path: p, op: o, source }
            if p == path && *o == op && source.kind() == kind),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        format!("queue {}: {op} failed: {os}", path.display())
    );
    // The OS error is the cause, shown in the text; it has no source of its own, so a
    // report that walks the chain shows it once.
    let cause = e.cause().and_then(|c| c.downcast_ref::<std::io::Error>());
    assert_eq!(cause.map(std::io::Error::kind), Some(kind), "{e:?}");
    assert!(std::error::Error::source(&e).is_none(), "{e:?}");
}

#[test]
fn open_of_a_missing_path_or_a_directory_names_the_queue_and_the_operation() {
    let missing = ShmPath::new("qio-missing");
    let p = missing.path();
    let enoent = "No such file or directory (os error 2)";
    assert_io(
        SpscConsumer::<u64>::open(p),
        p,
        "open",
        ErrorKind::NotFound,
        enoent,
    );
    assert_io(
        SpscProducer::<u64>::open(p),
        p,
        "open",
        ErrorKind::NotFound,
        enoent,
    );
    assert_io(
        SpscBytesConsumer::open(p),
        p,
        "open",
        ErrorKind::NotFound,
        enoent,
    );
    assert_io(
        MpmcQueue::<u64>::open(p),
        p,
        "open",
        ErrorKind::NotFound,
        enoent,
    );

    let dir = ShmDir::new("qio-dir");
    let d = dir.path();
    let eisdir = "Is a directory (os error 21)";
    let kind = ErrorKind::IsADirectory;
    assert_io(SpscConsumer::<u64>::open(d), d, "open", kind, eisdir);
    assert_io(SpscProducer::<u64>::open(d), d, "open", kind, eisdir);
    assert_io(MpmcQueue::<u64>::open(d), d, "open", kind, eisdir);
    // create says "queue" too (it used to say "ring").
    assert_io(SpscProducer::<u64>::create(d, 8), d, "open", kind, eisdir);
    assert_io(MpmcQueue::<u64>::create(d, 8), d, "open", kind, eisdir);
    let inside = dir.join("no-such-dir").join("q");
    assert_io(
        MpmcQueue::<u64>::create(&inside, 8),
        &inside,
        "open",
        ErrorKind::NotFound,
        enoent,
    );
}
