//! What `create` of a queue file says when it cannot create one.
//!
//! * A second `create` on a path whose creator is alive is refused as in use by its creator
//!   (`QueueFileError::InUse`, holder "creator"); it used to say `Locked`, "another live
//!   handle is creating it", long after the creation had finished. `Locked` is kept for a
//!   creation really in progress (lock held, magic still 0) or a stale file being replaced.
//! * An invalid geometry names the file (or "anonymous"), as a ring's does: `create(path,
//!   1000)` used to print "queue capacity 1000 is not a power of two" without the path.
//! * A non-empty file that is not a queue (nor a queue whose creation never finished) is
//!   refused (`QueueFileError::NotReplaced`, naming the path and what it found) and left
//!   byte for byte; `create` took any file no live handle held for a stale queue and
//!   unlinked it, so a mistyped path deleted somebody's data, a ring or a blackboard.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;

use ringwire::core::queue::QueueGeometryError;
use ringwire::queue::{
    MpmcQueue, QueueFileError, SpscBytesConsumer, SpscBytesProducer, SpscConsumer, SpscProducer,
    bytes_geometry, spsc_bytes_channel, spsc_channel,
};
use ringwire::{BlackboardProducer, CleanupMode, CreateOptions, RingFile};
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
        format!("queue {p}: item size 4294967295 is over the largest a queue takes (4294967280)")
    );
    assert_eq!(
        SpscBytesProducer::create(&path, 8, usize::MAX)
            .unwrap_err()
            .to_string(),
        format!(
            "queue {p}: item size {} is over the largest a queue takes (4294967280)",
            usize::MAX
        )
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

/// Every way of creating a queue file, at `path`: the error if it was refused.
fn creates(path: &Path) -> [(&'static str, Option<QueueFileError>); 3] {
    [
        ("spsc", SpscProducer::<u64>::create(path, 8).err()),
        ("mpmc", MpmcQueue::<u64>::create(path, 8).err()),
        ("bytes", SpscBytesProducer::create(path, 8, 64).err()),
    ]
}

#[test]
fn a_file_that_is_not_a_queue_is_refused_and_left_byte_for_byte() {
    let path = ShmPath::new("qcreate-foreign");
    // A ring and a blackboard their producers left behind (dead, so their locks are free).
    let ring = ShmPath::new("qcreate-foreign-ring");
    let opts = CreateOptions {
        cleanup: CleanupMode::Persistent,
        ..CreateOptions::default()
    };
    let geo = ringwire::core::Geometry::spmc(16, 16, 8, 0, false).unwrap();
    drop(RingFile::create(&ring, &geo, &opts).unwrap());
    let ring_bytes = std::fs::read(&ring).unwrap();
    let board = ShmPath::new("qcreate-foreign-board");
    let mut bb = BlackboardProducer::<u64>::create(&board, 4).unwrap();
    bb.write(1, &7).unwrap();
    bb.set_cleanup_mode(CleanupMode::Persistent);
    drop(bb);
    let board_bytes = std::fs::read(&board).unwrap();
    // A ring whose creation never finished is not a queue's either.
    let mut half_ring = ring_bytes.clone();
    half_ring[..8].fill(0);
    // A disk image: a zero first word, data after it.
    let mut image = vec![0u8; 4096];
    image[512..520].copy_from_slice(b"EFI PART");
    let cases: [(&str, &[u8], &str); 6] = [
        ("notes", b"important notes, not a queue", "with magic"),
        ("short", &[0xAB; 3], "a file of 3 bytes is"),
        ("ring", &ring_bytes, "(a ring)"),
        ("blackboard", &board_bytes, "(a blackboard)"),
        (
            "unfinished ring",
            &half_ring,
            "with magic 0x0000000000000000",
        ),
        ("disk image", &image, "with magic 0x0000000000000000"),
    ];
    for (what, bytes, said) in cases {
        std::fs::write(&path, bytes).unwrap();
        for (how, refused) in creates(path.path()) {
            let e = refused.unwrap_or_else(|| panic!("{how} create replaced the {what}"));
            assert!(
                matches!(&e, QueueFileError::NotReplaced { path: p, len, .. }
                    if p == path.path() && *len == bytes.len() as u64),
                "{how}, {what}: {e:?}"
            );
            let msg = e.to_string();
            assert!(
                msg.starts_with(&format!(
                    "queue {}: a file of {} bytes",
                    path.path().display(),
                    bytes.len()
                )) && msg.contains(said)
                    && msg.ends_with(
                        "is not a queue; a queue creator replaces only a queue or an empty \
                         file (remove it, or use another path)"
                    ),
                "{how}, {what}: {msg}"
            );
            assert_eq!(
                std::fs::read(&path).unwrap(),
                bytes,
                "{how} create touched the {what}"
            );
        }
    }
    // The ring and the blackboard, at their own paths, were not touched either.
    assert_eq!(std::fs::read(&ring).unwrap(), ring_bytes);
    assert_eq!(std::fs::read(&board).unwrap(), board_bytes);
}

/// What `create` still replaces: an empty file, a queue whose creation never finished
/// (all zeros, or a header whose magic, written last, is still 0), and a stale queue of
/// any kind, capacity or item type (a program restarted with another queue geometry; a
/// stale queue's items are never kept by `create`, whatever its geometry: `open` keeps
/// them).
#[test]
fn an_unfinished_or_stale_queue_of_any_kind_is_still_replaced() {
    let path = ShmPath::new("qcreate-replaced");
    let fresh_spsc = |path: &ShmPath| {
        let mut p = SpscProducer::<u64>::create(path, 8).unwrap();
        p.try_push(&42).unwrap();
        drop(p);
        let mut c = SpscConsumer::<u64>::open(path).unwrap();
        assert_eq!(c.try_pop(), Ok(Some(42)));
        assert_eq!(c.try_pop(), Ok(None), "the new queue is not empty");
    };
    std::fs::write(&path, b"").unwrap();
    fresh_spsc(&path);
    std::fs::write(&path, vec![0u8; 8192]).unwrap();
    fresh_spsc(&path);
    // Headers with magic 0 of each kind's queue.
    let mpmc = MpmcQueue::<u32>::create(&path, 4).unwrap();
    mpmc.try_push(&1).unwrap();
    drop(mpmc);
    let other = path.sibling("bytes");
    drop(SpscBytesProducer::create(&other, 4, 100).unwrap());
    for half in [
        std::fs::read(&path).unwrap(),
        std::fs::read(&other).unwrap(),
    ] {
        let mut half = half;
        half[..8].fill(0);
        std::fs::write(&path, &half).unwrap();
        fresh_spsc(&path);
    }
    // A stale queue of another kind and item type, still holding items.
    let mpmc = MpmcQueue::<[u8; 24]>::create(&path, 16).unwrap();
    mpmc.try_push(&[9; 24]).unwrap();
    drop(mpmc);
    fresh_spsc(&path);
    let mut p = SpscBytesProducer::create(&path, 4, 100).unwrap();
    p.try_push(b"datagram").unwrap();
    drop(p);
    let q = MpmcQueue::<u64>::create(&path, 8).unwrap();
    assert!(q.is_empty());
    drop(q);
    let p = SpscBytesProducer::create(&path, 8, 16).unwrap();
    drop(p);
    let mut c = SpscBytesConsumer::open(&path).unwrap();
    let mut buf = [0u8; 16];
    assert!(matches!(c.try_pop(&mut buf), Ok(None)), "not empty");
}
