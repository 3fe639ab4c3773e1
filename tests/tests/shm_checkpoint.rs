//! Offset checkpoint files (spec §13): the `updated_ns` stamp and the trimmed name, against
//! ringfire 0.5.2 reading and writing the same files.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ringwire::checkpoint::default_path;
use ringwire::{OffsetCheckpoint, RingConsumer, RingProducer};
use ringwire_tests::records::Rec;
use ringwire_tests::shm::ShmPath;
use zerocopy::IntoBytes;

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

/// A checkpoint created by either crate has the same mode (`0o666` less the umask, spec
/// §13, §16) and the same bytes but for the pid and the time, after the same saves.
#[test]
fn both_crates_create_the_same_checkpoint_file() {
    use std::os::unix::fs::PermissionsExt;
    // Read, not set: the umask is the process's, shared with the other tests' threads.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let umask = status
        .lines()
        .find_map(|l| l.strip_prefix("Umask:"))
        .map(|v| u32::from_str_radix(v.trim(), 8).unwrap())
        .unwrap();
    let (ours, theirs) = (ShmPath::new("ckpt-same-rw"), ShmPath::new("ckpt-same-rf"));
    let cp = OffsetCheckpoint::open_or_create(&ours, " algo 1 ").unwrap();
    let rf = ringfire::OffsetCheckpoint::open_or_create(theirs.path(), " algo 1 ").unwrap();
    cp.save(77);
    rf.save(77);
    let mode = |p: &ShmPath| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(
        (mode(&ours), mode(&theirs)),
        (0o666 & !umask, 0o666 & !umask)
    );
    let (a, b) = (
        std::fs::read(&ours).unwrap(),
        std::fs::read(&theirs).unwrap(),
    );
    assert_eq!(a.len(), 64);
    assert_eq!(b.len(), 64);
    for (what, r) in [
        ("magic, version", 0..12),
        ("offset", 16..24),
        ("name", 32..64),
    ] {
        assert_eq!(a[r.clone()], b[r], "{what}");
    }
    assert_eq!(&a[32..40], b"algo 1\0\0");
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
    let dir = ringwire_tests::shm::ShmDir::new("ckpt-dir");
    let path = dir.join("offsets/algo.offset");
    let cp = OffsetCheckpoint::open_or_create(&path, "algo").unwrap();
    cp.save(9);
    assert_eq!(
        OffsetCheckpoint::open_or_create(&path, "algo")
            .unwrap()
            .load(),
        Some(9)
    );
}

/// A checkpoint saved against a ring that a restarted producer has since replaced (the new
/// ring counts from 1 again and has not reached the saved offset) is ignored: the consumer
/// starts at the new ring's oldest record, whatever its start mode, reports the stale
/// offset, and replaces it in the file at once. Resuming after it would wait for record 9
/// of the new ring, skipping 1 to 8 unseen.
#[test]
fn a_checkpoint_past_a_restarted_rings_write_seq_is_ignored_and_reported() {
    let p = ShmPath::new("ckpt-stale");
    // The builder's default start mode (latest) applies only without a saved offset.
    let named = |oldest: bool| {
        let b = RingConsumer::<Rec>::builder().consumer_name("algo");
        let b = if oldest { b.start_from_oldest() } else { b };
        b.attach(&p).unwrap()
    };
    let mut prod = RingProducer::<Rec>::create(&p, 64).unwrap();
    for s in 1..=10 {
        prod.push(&Rec::new(s));
    }
    let mut c = named(true);
    for s in 1..=8 {
        assert!(c.try_recv().unwrap().is_valid_for(s));
    }
    c.commit_offset().unwrap();
    assert_eq!(c.stale_checkpoint(), None);
    drop(c);
    drop(prod);

    // The producer restarts: a fresh ring at the same path.
    let mut prod = RingProducer::<Rec>::create(&p, 64).unwrap();
    for s in 1..=3 {
        prod.push(&Rec::new(s));
    }
    let mut c = named(false);
    assert_eq!(c.stale_checkpoint(), Some(8));
    // Replaced in the file before anything was read.
    assert_eq!(c.checkpoint().unwrap().load(), None);
    for s in 1..=2 {
        assert!(c.try_recv().unwrap().is_valid_for(s));
    }
    // It dies without committing, and the ring moves past the old offset: the next
    // attach starts over from the new ring's oldest, not after record 8.
    drop(c);
    for s in 4..=12 {
        prod.push(&Rec::new(s));
    }
    let mut c = named(true);
    assert_eq!(c.stale_checkpoint(), None);
    for s in 1..=5 {
        assert!(c.try_recv().unwrap().is_valid_for(s));
    }
    c.commit_offset().unwrap();
    drop(c);

    // The offset saved on the new ring is used again.
    let mut c = named(false);
    assert_eq!(c.stale_checkpoint(), None);
    assert!(c.try_recv().unwrap().is_valid_for(6));
}

/// Saved offsets that this ring has reached although its `write_seq` is below them are
/// used: a record published before the producer's `write_seq` store that follows it (spec
/// §4.2 steps 4 and 5), a slot already lapped by a batch longer than the ring (its slots
/// are all stored before its one `write_seq` store), and a slot being written.
#[test]
fn a_checkpoint_of_a_slot_the_ring_reached_before_its_write_seq_store_is_used() {
    let p = ShmPath::new("ckpt-slot-first");
    let file = default_path(p.path(), "algo");
    let attach = |saved: u64| {
        OffsetCheckpoint::open_or_create(&file, "algo")
            .unwrap()
            .save(saved);
        let c = RingConsumer::<Rec>::builder()
            .start_from_oldest()
            .consumer_name("algo")
            .attach(&p)
            .unwrap();
        (c.stale_checkpoint(), c.cursor())
    };
    let mut prod = RingProducer::<Rec>::builder(4).build::<Rec, _>(&p).unwrap();
    for s in 1..=3 {
        prod.push(&Rec::new(s));
    }
    let v = ringwire_tests::shm::view(prod.file());
    // Record 4 is in its slot; write_seq still says 3.
    v.write_slot(4, Rec::new(4).as_bytes());
    assert_eq!(attach(4), (None, 5));
    // A batch of 4..=9 in flight: slots written up to 9 (slot 1 holds 5 and then 9),
    // write_seq still 3. A reader that took 4 and 5 saved 5.
    for s in 5..=9 {
        v.write_slot(s, Rec::new(s).as_bytes());
    }
    assert_eq!(attach(5), (None, 6));
    // Slot 2 (of record 6, in the next lap 10) is being written.
    v.slot_seq(10)
        .store(u64::MAX, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(attach(10), (None, 11));
    // A record whose slot holds an earlier one, past write_seq: never reached.
    assert_eq!(attach(11), (Some(11), 1));
}

/// A mirror ring (`FLAG_SPARSE`) carries its source's numbers: recreated below a saved
/// offset at the source's numbering (spec §21.1), it is the same stream, and the consumer
/// resumes after the offset instead of replaying records it already processed (and
/// overwriting the good offset at attach). One that holds its record 1 (a restarted source
/// counting from 1 again) is a new stream, and the offset is stale as on any ring.
#[test]
fn a_checkpoint_above_a_mirror_ring_is_stale_only_if_the_ring_counts_from_1() {
    let p = ShmPath::new("ckpt-sparse");
    let file = default_path(p.path(), "algo");
    let prod = RingProducer::<Rec>::create(&p, 64).unwrap();
    // Made a mirror ring: the SPARSE flag (0x0400) in the header's flags word.
    let flags = prod.file().header().flags | 0x0400;
    ringwire_tests::shm::patch(p.path(), 48, &flags.to_le_bytes());
    let v = ringwire_tests::shm::view(prod.file());
    let attach = |saved: u64| {
        OffsetCheckpoint::open_or_create(&file, "algo")
            .unwrap()
            .save(saved);
        RingConsumer::<Rec>::builder()
            .start_from_oldest()
            .consumer_name("algo")
            .attach(&p)
            .unwrap()
    };
    // The mirror ring recreated at the source's numbering: records 985..=995.
    for s in 985..=995 {
        v.write_slot(s, Rec::new(s).as_bytes());
    }
    v.write_seq()
        .store(995, std::sync::atomic::Ordering::SeqCst);
    let mut c = attach(1000);
    assert_eq!((c.stale_checkpoint(), c.cursor()), (None, 1001));
    assert!(c.try_recv().is_none(), "replayed a processed record");
    assert_eq!(c.checkpoint().unwrap().load(), Some(1000));
    drop(c);
    // A restarted source's mirror ring, counting from 1 again.
    let p2 = ShmPath::new("ckpt-sparse-restart");
    let file2 = default_path(p2.path(), "algo");
    let prod2 = RingProducer::<Rec>::create(&p2, 64).unwrap();
    ringwire_tests::shm::patch(p2.path(), 48, &flags.to_le_bytes());
    let v2 = ringwire_tests::shm::view(prod2.file());
    for s in 1..=3 {
        v2.write_slot(s, Rec::new(s).as_bytes());
    }
    v2.write_seq().store(3, std::sync::atomic::Ordering::SeqCst);
    OffsetCheckpoint::open_or_create(&file2, "algo")
        .unwrap()
        .save(1000);
    let mut c = RingConsumer::<Rec>::builder()
        .consumer_name("algo")
        .attach(&p2)
        .unwrap();
    assert_eq!(c.stale_checkpoint(), Some(1000));
    assert!(c.try_recv().unwrap().is_valid_for(1));
}
