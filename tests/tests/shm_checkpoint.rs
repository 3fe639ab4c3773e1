//! Offset checkpoint files (spec §13): the `updated_ns` stamp and the trimmed name, against
//! ringfire 0.5.2 reading and writing the same files.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ringwire::checkpoint::default_path;
use ringwire::{OffsetCheckpoint, RingConsumer, RingProducer};
use ringwire_tests::records::Rec;
use ringwire_tests::shm::ShmPath;

fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

#[test]
fn updated_nanos_is_stamped_on_create_and_on_save() {
    let p = ShmPath::new("ckpt-time");
    let t0 = wall_ns();
    let cp = OffsetCheckpoint::open_or_create(&p, "  algo 2 ").unwrap();
    let created = cp.updated_nanos();
    assert!(t0 <= created && created <= wall_ns(), "{created}");
    assert_eq!(cp.updated_ns(), created);
    assert_eq!((cp.name(), cp.load()), ("algo 2", None));
    std::thread::sleep(Duration::from_millis(2));
    let t1 = wall_ns();
    cp.save(7);
    let saved = cp.updated_nanos();
    assert!(created < t1 && t1 <= saved && saved <= wall_ns(), "{saved}");
    let bytes = std::fs::read(&p).unwrap();
    assert_eq!(bytes[24..32], saved.to_le_bytes());
    // Reopening keeps the stamp; ringfire reads the same one from our file.
    let again = OffsetCheckpoint::open_or_create(&p, "algo 2").unwrap();
    assert_eq!(again.updated_nanos(), saved);
    let rf = ringfire::OffsetCheckpoint::open_or_create(p.path(), "algo 2").unwrap();
    assert_eq!((rf.updated_nanos(), rf.load()), (saved, Some(7)));
}

#[test]
fn a_ringfire_checkpoint_reads_the_same() {
    let p = ShmPath::new("ckpt-time-rf");
    let rf = ringfire::OffsetCheckpoint::open_or_create(p.path(), " x ").unwrap();
    let cp = OffsetCheckpoint::open_or_create(&p, " x ").unwrap();
    assert!(rf.updated_nanos() > 0);
    assert_eq!(cp.updated_nanos(), rf.updated_nanos());
    assert_eq!((cp.name(), rf.name()), ("x", "x"));
    rf.save(41);
    assert_eq!(cp.load(), Some(41));
    assert_eq!(cp.updated_nanos(), rf.updated_nanos());
}

#[test]
fn a_named_consumer_resumes_from_the_default_checkpoint_on_both_crates() {
    let p = ShmPath::new("ckpt-named");
    let mut prod = RingProducer::<Rec>::create(&p, 64).unwrap();
    for s in 1..=6 {
        prod.push(&Rec::new(s));
    }
    let named = || {
        RingConsumer::<Rec>::builder()
            .start_from_oldest()
            .consumer_name("algo 1")
            .attach(&p)
            .unwrap()
    };
    let mut c = named();
    let file = default_path(p.path(), "algo 1");
    assert_eq!(c.offset_path(), Some(file.as_path()));
    assert!(file.exists(), "attach created {}", file.display());
    assert!(c.try_recv().unwrap().is_valid_for(1));
    assert!(c.try_recv().unwrap().is_valid_for(2));
    c.commit_offset().unwrap();
    drop(c);
    // Ours resumes after the committed record, and so does ringfire's consumer of that name.
    assert!(named().try_recv().unwrap().is_valid_for(3));
    let mut rf = ringfire::RingConsumer::<Rec>::builder()
        .consumer_name("algo 1")
        .attach(p.path())
        .unwrap();
    assert!(rf.try_recv().unwrap().is_valid_for(3));
    assert!(rf.try_recv().unwrap().is_valid_for(4));
    rf.commit_offset().unwrap();
    drop(rf);
    assert!(named().try_recv().unwrap().is_valid_for(5));
    // An unnamed consumer keeps no checkpoint.
    let plain = RingConsumer::<Rec>::attach(&p).unwrap();
    assert_eq!(plain.offset_path(), None);
    assert!(plain.commit_offset().is_err());
}

#[test]
fn a_checkpoint_in_a_missing_directory_is_created_with_it() {
    struct Dir(std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let dir = Dir(format!("/dev/shm/ringwire-test-ckpt-dir-{}", std::process::id()).into());
    let path = dir.0.join("offsets/algo.offset");
    let cp = OffsetCheckpoint::open_or_create(&path, "algo").unwrap();
    cp.save(9);
    assert_eq!(
        OffsetCheckpoint::open_or_create(&path, "algo")
            .unwrap()
            .load(),
        Some(9)
    );
}
