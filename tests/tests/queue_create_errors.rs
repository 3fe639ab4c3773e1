//! What `create` of a queue file says when it cannot create one.
//!
//! * A second `create` on a path whose creator is alive is refused as in use by its creator
//!   (`QueueFileError::InUse`, holder "creator"); it used to say `Locked`, "another live
//!   handle is creating it", long after the creation had finished. `Locked` is kept for a
//!   creation really in progress (lock held, magic still 0) or a stale file being replaced.
//! * An invalid geometry names the file (or "anonymous"), as a ring's does: `create(path,
//!   1000)` used to print "queue capacity 1000 is not a power of two" without the path.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;

use ringwire::core::queue::QueueGeometryError;
use ringwire::queue::{
    MpmcQueue, QueueFileError, SpscBytesProducer, SpscConsumer, SpscProducer, bytes_geometry,
    spsc_bytes_channel, spsc_channel,
};
use ringwire_tests::shm::ShmPath;

fn assert_in_use_by_creator<T: std::fmt::Debug>(r: Result<T, QueueFileError>, path: &Path) {
    let e = r.expect_err("a second create while the creator lives must fail");
    assert!(
        matches!(&e, QueueFileError::InUse { path: p, holder: "creator" } if p == path),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        format!(
            "queue {}: a live creator still has it open; not replacing it (open it instead, \
             or close every handle first)",
            path.display()
        )
    );
}

fn assert_locked<T: std::fmt::Debug>(r: Result<T, QueueFileError>, path: &Path) {
    let e = r.expect_err("create must fail while another creation is in progress");
    assert!(
        matches!(&e, QueueFileError::Locked(p) if p == path),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        format!(
            "queue {}: another live handle is creating it",
            path.display()
        )
    );
}

#[test]
fn a_second_spsc_create_while_the_creator_lives_names_the_creator() {
    let path = ShmPath::new("qcreate-spsc");
    let mut p = SpscProducer::<u64>::create(&path, 8).unwrap();
    p.try_push(&1).unwrap();
    assert_in_use_by_creator(SpscProducer::<u64>::create(&path, 8), path.path());
    // With a consumer open too, the creator (which holds the lock) is named.
    let mut c = SpscConsumer::<u64>::open(&path).unwrap();
    assert_in_use_by_creator(SpscBytesProducer::create(&path, 8, 8), path.path());
    // The refused creates left the queue alone.
    assert_eq!(c.try_pop(), Ok(Some(1)));
    drop(c);
    drop(p);
    // Every handle gone: the stale file is replaced.
    let _p = SpscProducer::<u64>::create(&path, 8).unwrap();
}

#[test]
fn a_second_mpmc_create_while_the_creator_lives_names_the_creator() {
    let path = ShmPath::new("qcreate-mpmc");
    let q = MpmcQueue::<u64>::create(&path, 8).unwrap();
    q.try_push(&5).unwrap();
    assert_in_use_by_creator(MpmcQueue::<u64>::create(&path, 8), path.path());
    assert_eq!(q.try_pop().unwrap(), (Some(5), 0));
}

/// Holds the creation lock (flock) of the file at `path` as a creator in another process
/// would.
fn hold_creation_lock(path: &Path) -> File {
    let f = File::options().read(true).write(true).open(path).unwrap();
    // SAFETY: flock on a descriptor `f` keeps open.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    assert_eq!(r, 0);
    f
}

#[test]
fn a_creation_in_progress_is_still_reported_as_locked() {
    let path = ShmPath::new("qcreate-progress");
    // A creator that has just opened and locked the file (size 0) ...
    File::create(&path).unwrap();
    let lock = hold_creation_lock(path.path());
    assert_locked(SpscProducer::<u64>::create(&path, 8), path.path());
    // ... or sized it and not yet written the magic (written last).
    lock.set_len(4096).unwrap();
    assert_locked(MpmcQueue::<u64>::create(&path, 8), path.path());
    // Once the magic is written, a creator that keeps the lock is in use.
    lock.write_all_at(b"RWSPSCQ1", 0).unwrap();
    assert_in_use_by_creator(SpscProducer::<u64>::create(&path, 8), path.path());
    // A creator replacing that (stale) file holds a write lock over all of it until its
    // unlink: a creation in progress again.
    let replacing = File::options().read(true).write(true).open(&path).unwrap();
    // SAFETY: an all-zero flock struct is a valid value of this plain C struct.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: fcntl with a live descriptor and a pointer to a live flock struct.
    let r = unsafe { libc::fcntl(replacing.as_raw_fd(), libc::F_OFD_SETLK, &fl) };
    assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
    assert_locked(SpscProducer::<u64>::create(&path, 8), path.path());
    drop(replacing);
    drop(lock);
}

#[test]
fn geometry_errors_name_the_file_or_anonymous_memory() {
    let path = ShmPath::new("qcreate-geo");
    let p = path.path().display();
    let e = SpscProducer::<u64>::create(&path, 1000).unwrap_err();
    assert!(
        matches!(&e, QueueFileError::Geometry { path: q, source: QueueGeometryError::CapacityNotPowerOfTwo { capacity: 1000 } } if q == path.path()),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        format!("queue {p}: capacity 1000 is not a power of two")
    );
    assert_eq!(
        MpmcQueue::<u64>::create(&path, 1).unwrap_err().to_string(),
        format!("queue {p}: MPMC capacity 1 is below 2")
    );
    assert_eq!(
        SpscBytesProducer::create(&path, 1000, 64)
            .unwrap_err()
            .to_string(),
        format!("queue {p}: capacity 1000 is not a power of two")
    );
    assert_eq!(
        SpscBytesProducer::create(&path, 8, 0)
            .unwrap_err()
            .to_string(),
        format!(
            "queue {p}: item size is 0: an item needs at least 1 byte (a zero-sized type cannot \
             be queued)"
        )
    );
    assert_eq!(
        spsc_channel::<()>(8).unwrap_err().to_string(),
        "queue anonymous: item size is 0: an item needs at least 1 byte (a zero-sized type \
         cannot be queued)"
    );
    assert_eq!(
        MpmcQueue::<[u8; 0]>::anonymous(8).unwrap_err().to_string(),
        "queue anonymous: item size is 0: an item needs at least 1 byte (a zero-sized type \
         cannot be queued)"
    );
    assert_eq!(
        SpscBytesProducer::create(&path, 8, u32::MAX as usize)
            .unwrap_err()
            .to_string(),
        format!("queue {p}: item size 4294967295 is over the largest a queue takes (4294967287)")
    );
    assert_eq!(
        SpscBytesProducer::create(&path, 8, usize::MAX)
            .unwrap_err()
            .to_string(),
        format!("queue {p}: the queue size overflows")
    );
    // Nothing was created at the path.
    assert!(!path.path().exists());
    // Anonymous queues say so.
    assert_eq!(
        spsc_channel::<u64>(1000).unwrap_err().to_string(),
        "queue anonymous: capacity 1000 is not a power of two"
    );
    assert_eq!(
        MpmcQueue::<u64>::anonymous(3).unwrap_err().to_string(),
        "queue anonymous: capacity 3 is not a power of two"
    );
    assert!(matches!(
        spsc_bytes_channel(1000, 8),
        Err(QueueFileError::Geometry { path, .. }) if path == Path::new("anonymous")
    ));
    // The geometry alone has no file: the core's error.
    assert_eq!(
        bytes_geometry(1000, 8).unwrap_err(),
        QueueGeometryError::CapacityNotPowerOfTwo { capacity: 1000 }
    );
}
