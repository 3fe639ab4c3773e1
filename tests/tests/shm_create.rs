//! Ring file creation (spec §1.2): lock, fresh inode for a stale ring, mode, magic last,
//! unlink on drop or persistence, legacy mode, flush.

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use ringwire::core::layout::RING_MAGIC;
use ringwire::core::{Expect, Geometry, GeometryError};
use ringwire::{CleanupMode, CreateOptions, Error, RingFile};
use ringwire_tests::shm::{ShmPath, view};

fn geo() -> Geometry {
    Geometry::spmc(16, 16, 8, 0, false).unwrap()
}

fn umask() -> u32 {
    // SAFETY: umask only swaps the process mask; it is restored at once.
    let m = unsafe { libc::umask(0o022) };
    // SAFETY: as above.
    unsafe { libc::umask(m) };
    m
}

#[test]
fn create_sets_size_mode_and_magic() {
    let p = ShmPath::new("mode");
    let r = RingFile::create(&p, &geo(), &CreateOptions::default()).unwrap();
    let m = std::fs::metadata(&p).unwrap();
    assert_eq!(m.len(), 128 + 16 * 16);
    assert_eq!(m.permissions().mode() & 0o777, 0o660 & !umask());
    let bytes = std::fs::read(&p).unwrap();
    assert_eq!(&bytes[0..8], b"ERIFGNIR");
    assert_eq!(
        u64::from_le_bytes(bytes[0..8].try_into().unwrap()),
        RING_MAGIC
    );
    drop(r);
}

#[test]
fn custom_mode_is_filtered_by_umask() {
    let p = ShmPath::new("mode2");
    let opts = CreateOptions {
        mode: 0o600,
        ..CreateOptions::default()
    };
    let _r = RingFile::create(&p, &geo(), &opts).unwrap();
    let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600 & !umask());
}

#[test]
fn unlink_on_drop_and_persistent() {
    let p = ShmPath::new("cleanup");
    drop(RingFile::create(&p, &geo(), &CreateOptions::default()).unwrap());
    assert!(!p.path().exists(), "default cleanup must unlink");
    let opts = CreateOptions {
        cleanup: CleanupMode::Persistent,
        ..CreateOptions::default()
    };
    drop(RingFile::create(&p, &geo(), &opts).unwrap());
    assert!(p.path().exists(), "persistent ring must stay");
    assert!(RingFile::open(&p, Expect::RAW).is_ok());
}

#[test]
fn second_producer_is_refused_while_the_first_lives() {
    let p = ShmPath::new("excl");
    let first = RingFile::create(&p, &geo(), &CreateOptions::default()).unwrap();
    let e = RingFile::create(&p, &geo(), &CreateOptions::default()).unwrap_err();
    assert!(matches!(e, Error::ProducerAlreadyExists { .. }), "{e:?}");
    // The live ring was not touched.
    assert_eq!(first.inode(), {
        let m = std::fs::metadata(&p).unwrap();
        (m.dev(), m.ino())
    });
    assert!(!first.is_replaced());
}

#[test]
fn stale_ring_is_replaced_by_a_fresh_inode() {
    let p = ShmPath::new("stale");
    let opts = CreateOptions {
        cleanup: CleanupMode::Persistent,
        ..CreateOptions::default()
    };
    drop(RingFile::create(&p, &geo(), &opts).unwrap());
    let reader = RingFile::open(&p, Expect::RAW).unwrap();
    let old = reader.inode();
    assert!(!reader.is_replaced());
    let second = RingFile::create(&p, &geo(), &opts).unwrap();
    assert_ne!(second.inode(), old, "a stale ring must get a fresh inode");
    assert!(reader.is_replaced(), "the reader must see the replacement");
    // The orphaned mapping stays consistent.
    assert_eq!(view(&reader).capacity(), 16);
}

#[test]
fn drop_does_not_unlink_a_foreign_ring() {
    let p = ShmPath::new("foreign");
    let r = RingFile::create(&p, &geo(), &CreateOptions::default()).unwrap();
    // Someone removes our path and puts another file there.
    std::fs::remove_file(&p).unwrap();
    std::fs::write(&p, b"not ours").unwrap();
    drop(r);
    assert_eq!(std::fs::read(&p).unwrap(), b"not ours");
}

#[test]
fn legacy_mode_truncates_without_lock() {
    let p = ShmPath::new("legacy");
    let opts = CreateOptions {
        exclusive_lock: false,
        cleanup: CleanupMode::Persistent,
        ..CreateOptions::default()
    };
    // Somebody's data at the path is refused and left byte for byte, as by the exclusive
    // creator: the truncation wiped it (ringfire's legacy mode truncates whatever is there).
    std::fs::write(&p, vec![0xAAu8; 5000]).unwrap();
    let e = RingFile::create(&p, &geo(), &opts).unwrap_err();
    assert!(matches!(e, Error::NotReplaced { len: 5000, .. }), "{e}");
    assert_eq!(std::fs::read(&p).unwrap(), vec![0xAAu8; 5000]);
    std::fs::remove_file(&p).unwrap();
    // A dead producer's ring (larger than the new one) is truncated and reused in place.
    let big = Geometry::spmc(64, 16, 8, 0, false).unwrap();
    let old = RingFile::create(&p, &big, &opts).unwrap();
    let old_len = std::fs::metadata(&p).unwrap().len();
    drop(old);
    assert!(old_len > 384, "{old_len}");
    let a = RingFile::create(&p, &geo(), &opts).unwrap();
    assert_eq!(std::fs::metadata(&p).unwrap().len(), 384);
    // No lock: a second legacy creator succeeds on the same inode.
    let b = RingFile::create(&p, &geo(), &opts).unwrap();
    assert_eq!(a.inode(), b.inode());
}

#[test]
fn flush_succeeds() {
    let p = ShmPath::new("flush");
    let r = RingFile::create(&p, &geo(), &CreateOptions::default()).unwrap();
    view(&r).write_slot(1, &[1, 2, 3]);
    view(&r).publish(1);
    r.flush().unwrap();
}

#[test]
fn creating_in_a_missing_directory_names_the_path() {
    let p = std::path::Path::new("/dev/shm/ringwire-no-such-dir/x");
    let e = RingFile::create(p, &geo(), &CreateOptions::default()).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.starts_with("/dev/shm/ringwire-no-such-dir/x: open failed"),
        "{msg}"
    );
}

/// A failed system call on a file that is not a ring (here a blackboard) names that file and
/// does not call it a ring.
#[test]
fn io_errors_on_other_files_do_not_say_ring() {
    let p = std::path::Path::new("/dev/shm/rw-no-such-dir/board");
    let e = ringwire::BlackboardProducer::<u64>::create(p, 4).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.starts_with("/dev/shm/rw-no-such-dir/board: open failed"),
        "{msg}"
    );
    assert!(!msg.contains("ring"), "{msg}");
}

#[test]
fn bad_capacity_is_a_geometry_error() {
    assert_eq!(
        Geometry::spmc(1000, 16, 8, 0, false).unwrap_err(),
        GeometryError::CapacityNotPowerOfTwo { capacity: 1000 }
    );
}

/// A ring too large for the address space names the capacity and the slot stride asked
/// for, through the producer's `create` (typed) and `RingFile::create` (a hand-built
/// geometry), and nothing is created.
#[test]
fn a_ring_too_large_names_its_capacity_and_stride() {
    let path = ShmPath::new("too-large");
    let e = ringwire::RingProducer::<u64>::create(&path, 1 << 62).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("capacity 4611686018427387904 of 16-byte slots do not fit"),
        "{msg}"
    );
    let huge = Geometry {
        capacity: 1 << 62,
        ..Geometry::spmc(8, 64, 8, 0, false).unwrap()
    };
    let e = RingFile::create(&path, &huge, &CreateOptions::default()).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains(&path.path().display().to_string()), "{msg}");
    assert!(
        msg.contains("capacity 4611686018427387904 of 64-byte slots do not fit"),
        "{msg}"
    );
    // Within a u64 but over the address space: the same, not an ftruncate or mmap failure.
    let over = Geometry {
        capacity: 1 << 57,
        ..Geometry::spmc(8, 64, 8, 0, false).unwrap()
    };
    assert!(over.total_len().is_some());
    let e = RingFile::create(&path, &over, &CreateOptions::default()).unwrap_err();
    assert!(
        e.to_string()
            .contains("capacity 144115188075855872 of 64-byte slots do not fit"),
        "{e}"
    );
    assert!(!path.path().exists());
}

/// A producer whose path names a non-empty file that is not a ring (a mistyped path: somebody's
/// data, a queue, a blackboard) refuses it, names the path and what it found, and leaves the
/// file as it was. Spec §1.2 step 4 takes any non-empty file whose lock is free for a dead
/// producer's ring and unlinks it: the data was deleted. A stale ring and one whose creation
/// never finished are still replaced.
#[test]
fn a_file_that_is_not_a_ring_is_refused_and_left_in_place() {
    let p = ShmPath::new("foreign");
    let board = ShmPath::new("foreign-board");
    let mut bb = ringwire::BlackboardProducer::<u64>::create(&board, 4).unwrap();
    bb.set_cleanup_mode(CleanupMode::Persistent);
    drop(bb);
    let board_bytes = std::fs::read(&board).unwrap();
    let cases: [(&[u8], &str); 3] = [
        (b"important notes, not a ring", "with magic"),
        (&[0xAB; 3], "a file of 3 bytes"),
        (&board_bytes, "(a blackboard)"),
    ];
    for (bytes, said) in cases {
        std::fs::write(&p, bytes).unwrap();
        let e = ringwire::RingProducer::<u64>::create(&p, 16).unwrap_err();
        assert!(matches!(e, Error::NotReplaced { .. }), "{e:?}");
        let msg = e.to_string();
        assert!(
            msg.starts_with(&format!("{}: ", p.path().display())),
            "{msg}"
        );
        assert!(msg.contains(said) && msg.contains("is not a ring"), "{msg}");
        assert_eq!(std::fs::read(&p).unwrap(), bytes, "the file was touched");
    }
    // A blackboard producer refuses a ring likewise.
    let ring = ShmPath::new("foreign-ring");
    let opts = CreateOptions {
        cleanup: CleanupMode::Persistent,
        ..CreateOptions::default()
    };
    drop(RingFile::create(&ring, &geo(), &opts).unwrap());
    let ring_bytes = std::fs::read(&ring).unwrap();
    let e = ringwire::BlackboardProducer::<u64>::create(&ring, 4).unwrap_err();
    assert!(
        e.to_string().contains("(a ring) is not a blackboard"),
        "{e}"
    );
    assert_eq!(std::fs::read(&ring).unwrap(), ring_bytes);
    // Still replaced: a dead producer's ring, a creation killed before the header (zeros)
    // or before the magic (a header with magic 0), and a dead blackboard producer's file.
    let r = RingFile::create(&ring, &geo(), &opts).unwrap();
    drop(r);
    std::fs::write(&p, vec![0u8; 384]).unwrap();
    drop(RingFile::create(&p, &geo(), &CreateOptions::default()).unwrap());
    let mut half = ring_bytes.clone();
    half[..8].fill(0);
    std::fs::write(&p, &half).unwrap();
    drop(RingFile::create(&p, &geo(), &CreateOptions::default()).unwrap());
    drop(ringwire::BlackboardProducer::<u64>::create(&board, 4).unwrap());
}

/// A ring created through a symbolic link lives where the link points, and its producer's
/// drop removes that file and leaves the link as it found it. The drop unlinked the link
/// instead: the ring file stayed in /dev/shm with nothing naming it at the ring's path. A
/// stale ring behind a link is replaced where the link points, and the old file goes.
#[test]
fn a_ring_created_through_a_symlink_is_removed_where_the_link_points() {
    use std::os::unix::fs::MetadataExt;
    let link = ShmPath::new("symlink");
    let target = ShmPath::new("symlink-target");
    std::os::unix::fs::symlink(target.path(), link.path()).unwrap();
    let is_link = || {
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    };
    let r = RingFile::create(&link, &geo(), &CreateOptions::default()).unwrap();
    assert!(target.path().exists() && is_link());
    drop(r);
    assert!(
        !target.path().exists(),
        "the ring file was left behind the link"
    );
    assert!(is_link(), "the link was removed");
    // A stale ring behind the link: replaced by a fresh inode at the target.
    let opts = CreateOptions {
        cleanup: CleanupMode::Persistent,
        ..CreateOptions::default()
    };
    drop(RingFile::create(&link, &geo(), &opts).unwrap());
    let stale = std::fs::metadata(&target).unwrap().ino();
    let r = RingFile::create(&link, &geo(), &CreateOptions::default()).unwrap();
    assert!(is_link(), "the link was replaced by a regular file");
    assert_ne!(std::fs::metadata(&target).unwrap().ino(), stale);
    assert_eq!(r.inode().1, std::fs::metadata(&target).unwrap().ino());
    drop(r);
    assert!(!target.path().exists() && is_link());
}

/// A legacy (non-exclusive) creator refuses a ring whose exclusive producer lives, and
/// leaves its bytes alone: it truncated the file, so the live producer's next store (and
/// every reader's next load) past the new end was a SIGBUS, and its records were gone.
/// While the legacy producer lives, an exclusive creator does not take its ring for a dead
/// producer's either.
#[test]
fn legacy_mode_refuses_a_live_exclusive_producers_ring() {
    let p = ShmPath::new("legacy-live");
    let legacy = CreateOptions {
        exclusive_lock: false,
        cleanup: CleanupMode::Persistent,
        ..CreateOptions::default()
    };
    let live = RingFile::create(&p, &geo(), &CreateOptions::default()).unwrap();
    view(&live).write_slot(1, &[1, 2, 3]);
    view(&live).publish(1);
    let before = std::fs::read(&p).unwrap();
    let e = RingFile::create(&p, &geo(), &legacy).unwrap_err();
    assert!(matches!(e, Error::ProducerAlreadyExists { .. }), "{e:?}");
    assert_eq!(
        std::fs::read(&p).unwrap(),
        before,
        "the live ring was truncated"
    );
    assert!(!live.is_replaced());
    drop(live);
    // With no live exclusive producer, legacy creation goes ahead as before.
    let old = RingFile::create(&p, &geo(), &legacy).unwrap();
    let e = RingFile::create(&p, &geo(), &CreateOptions::default()).unwrap_err();
    assert!(matches!(e, Error::ProducerAlreadyExists { .. }), "{e:?}");
    assert!(
        !old.is_replaced(),
        "an exclusive creator replaced a live legacy ring"
    );
    let again = RingFile::create(&p, &geo(), &legacy).unwrap();
    assert_eq!(again.inode(), old.inode());
}

/// An empty path is named as the problem by every entry point of a ring file; it was an
/// `open failed: No such file or directory` with no path to show.
#[test]
fn an_empty_path_is_refused_by_name() {
    let msgs = [
        RingFile::create("", &geo(), &CreateOptions::default())
            .unwrap_err()
            .to_string(),
        RingFile::open("", Expect::RAW).unwrap_err().to_string(),
        ringwire::ReadOnlyRing::open("").unwrap_err().to_string(),
        ringwire::RingProducer::<u64>::create("", 16)
            .unwrap_err()
            .to_string(),
        ringwire::RingConsumer::<u64>::attach("")
            .unwrap_err()
            .to_string(),
    ];
    for msg in msgs {
        assert_eq!(msg, "the ring file's path is empty");
    }
}

/// A blackboard producer whose path names a file with a zero first word that is not a
/// blackboard whose creation never finished (a disk image, whose first sectors are often
/// zero) refuses it and leaves it byte for byte: it took any such file for an unfinished
/// blackboard and unlinked it. A blackboard killed before its header (all zeros) or
/// before its magic (a header with magic 0) is still replaced.
#[test]
fn a_blackboard_producer_refuses_a_zero_first_word_that_is_not_a_blackboard() {
    let p = ShmPath::new("bb-zero-word");
    let mut image = vec![0u8; 4096];
    image[512..520].copy_from_slice(b"EFI PART");
    // A ring killed before its magic: its header is not a blackboard's.
    let ring = ShmPath::new("bb-zero-word-ring");
    let opts = CreateOptions {
        cleanup: CleanupMode::Persistent,
        ..CreateOptions::default()
    };
    drop(RingFile::create(&ring, &geo(), &opts).unwrap());
    let mut half_ring = std::fs::read(&ring).unwrap();
    half_ring[..8].fill(0);
    for bytes in [&image, &half_ring] {
        std::fs::write(&p, bytes).unwrap();
        let e = ringwire::BlackboardProducer::<u64>::create(&p, 4).unwrap_err();
        assert!(
            matches!(e, Error::NotReplaced { len, magic: Some(0), .. } if len == bytes.len() as u64),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .contains("with magic 0x0000000000000000 is not a blackboard"),
            "{e}"
        );
        assert_eq!(&std::fs::read(&p).unwrap(), bytes, "the file was touched");
    }
    // Still replaced: zeros, and a board whose magic was never written (another value size
    // and slot count than the new one's).
    std::fs::write(&p, vec![0u8; 1000]).unwrap();
    drop(ringwire::BlackboardProducer::<u64>::create(&p, 4).unwrap());
    let mut bb = ringwire::BlackboardProducer::<[u64; 9]>::create(&p, 3).unwrap();
    bb.set_cleanup_mode(CleanupMode::Persistent);
    drop(bb);
    let mut half = std::fs::read(&p).unwrap();
    half[..8].fill(0);
    std::fs::write(&p, &half).unwrap();
    let bb = ringwire::BlackboardProducer::<u64>::create(&p, 4).unwrap();
    let rx = ringwire::BlackboardConsumer::<u64>::attach(&p).unwrap();
    assert_eq!(rx.slot_count(), 4);
    drop(bb);
    assert!(!p.path().exists());
}

/// A producer whose path names a live file of another kind (a queue, a blackboard, a ring
/// at a blackboard's path) says that the file is not of its kind, as it does once that
/// file's creator has exited, and leaves it as it was. It said "another producer holds its
/// lock", which sent the user looking for a producer of its own kind: the lock was the
/// other file's creator's. A live producer of the same kind is still named as such, in
/// the exclusive and the legacy mode.
#[test]
fn a_live_file_of_another_kind_is_named_not_taken_for_a_producer() {
    let queue = ShmPath::new("live-queue");
    let _q = ringwire::queue::SpscProducer::<u64>::create(&queue, 8).unwrap();
    let board = ShmPath::new("live-board");
    let _b = ringwire::BlackboardProducer::<u64>::create(&board, 4).unwrap();
    let ring = ShmPath::new("live-ring");
    let _r = ringwire::RingProducer::<u64>::create(&ring, 16).unwrap();
    let legacy = CreateOptions {
        exclusive_lock: false,
        ..CreateOptions::default()
    };
    let before = |p: &ShmPath| std::fs::read(p).unwrap();
    for (path, said) in [(&queue, "SPSC queue)"), (&board, "(a blackboard)")] {
        let bytes = before(path);
        let e = ringwire::RingProducer::<u64>::create(path, 16).unwrap_err();
        assert!(matches!(e, Error::NotReplaced { .. }), "{e:?}");
        assert!(
            e.to_string().contains(said) && e.to_string().contains("is not a ring"),
            "{e}"
        );
        let e = RingFile::create(path, &geo(), &legacy).unwrap_err();
        assert!(matches!(e, Error::NotReplaced { .. }), "legacy: {e:?}");
        assert_eq!(before(path), bytes, "the file was touched");
    }
    let e = ringwire::BlackboardProducer::<u64>::create(&ring, 4).unwrap_err();
    assert!(
        e.to_string().contains("(a ring) is not a blackboard"),
        "{e}"
    );
    let e = ringwire::BlackboardProducer::<u64>::create(&queue, 4).unwrap_err();
    assert!(e.to_string().contains("is not a blackboard"), "{e}");
    // The same kind: another producer.
    let e = ringwire::RingProducer::<u64>::create(&ring, 16).unwrap_err();
    assert!(matches!(e, Error::ProducerAlreadyExists { .. }), "{e:?}");
    let e = RingFile::create(&ring, &geo(), &legacy).unwrap_err();
    assert!(
        matches!(e, Error::ProducerAlreadyExists { .. }),
        "legacy: {e:?}"
    );
    let e = ringwire::BlackboardProducer::<u64>::create(&board, 4).unwrap_err();
    assert!(matches!(e, Error::ProducerAlreadyExists { .. }), "{e:?}");
}
