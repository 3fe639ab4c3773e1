//! Blackboard files (spec §14) shared with ringfire 0.5.2, both ways, and `stat` on one.

use ringwire::core::blackboard::{BlackboardError, slot_size};
use ringwire::{BlackboardConsumer, BlackboardProducer, Error};
use ringwire_tests::shm::ShmPath;

type V = [u64; 5];

fn val(k: u64, round: u64) -> V {
    [k, round, k * 1000 + round, !k, round.rotate_left(7)]
}

#[test]
fn ringfire_blackboard_read_by_ringwire() {
    let p = ShmPath::new("bb-rf2rw");
    let mut prod = ringfire::BlackboardProducer::<V>::create(p.path(), 16).unwrap();
    let cons = BlackboardConsumer::<V>::attach(&p).unwrap();
    assert_eq!(cons.slot_count(), 16);
    assert_eq!(cons.read(3).unwrap(), None);
    for round in 1..=100 {
        for k in 0..16 {
            prod.write(k as usize, &val(k, round)).unwrap();
        }
        for k in 0..16 {
            assert_eq!(cons.read(k as usize).unwrap(), Some(val(k, round)));
        }
    }
    let len = std::fs::metadata(p.path()).unwrap().len();
    assert_eq!(len, 128 + 16 * slot_size(40) as u64);
    let e = cons.read(16).unwrap_err();
    assert!(e.to_string().contains("key 16 is out of range"), "{e}");
}

/// A producer that restarts replaces the board with a fresh file: a reader attached before
/// goes on reading the old board's last values, and says so with `is_replaced`; a new
/// attach reads the new board. With ringfire's producer too.
#[test]
fn a_reader_of_a_replaced_board_knows_it() {
    let p = ShmPath::new("bb-replaced");
    let mut a = BlackboardProducer::<V>::create(&p, 4).unwrap();
    a.write(0, &val(0, 1)).unwrap();
    let old = BlackboardConsumer::<V>::attach(&p).unwrap();
    assert!(!old.is_replaced());
    // The producer dies (its file stays) and restarts.
    a.set_cleanup_mode(ringwire::CleanupMode::Persistent);
    drop(a);
    assert!(!old.is_replaced());
    let mut b = BlackboardProducer::<V>::create(&p, 4).unwrap();
    b.write(0, &val(0, 2)).unwrap();
    assert_eq!(old.read(0).unwrap(), Some(val(0, 1)));
    assert!(old.is_replaced());
    let new = BlackboardConsumer::<V>::attach(&p).unwrap();
    assert!(!new.is_replaced());
    assert_eq!(new.read(0).unwrap(), Some(val(0, 2)));
    // ringfire's producer replaces it the same way.
    b.set_cleanup_mode(ringwire::CleanupMode::Persistent);
    drop(b);
    let mut c = ringfire::BlackboardProducer::<V>::create(p.path(), 4).unwrap();
    c.write(0, &val(0, 3)).unwrap();
    assert!(new.is_replaced());
    drop(c);
}

#[test]
fn ringwire_blackboard_read_by_ringfire() {
    let p = ShmPath::new("bb-rw2rf");
    let mut prod = BlackboardProducer::<V>::create(&p, 8).unwrap();
    let cons = ringfire::BlackboardConsumer::<V>::attach(p.path()).unwrap();
    assert_eq!(cons.slot_count(), 8);
    assert_eq!(cons.read(0).unwrap(), None);
    for round in 1..=100 {
        for k in 0..8 {
            prod.write(k as usize, &val(k, round)).unwrap();
        }
        for k in 0..8 {
            assert_eq!(cons.read(k as usize).unwrap(), Some(val(k, round)));
        }
    }
    // Both projects' creators exclude each other through the flock.
    assert!(ringfire::BlackboardProducer::<V>::create(p.path(), 8).is_err());
    let e = BlackboardProducer::<V>::create(&p, 8).unwrap_err();
    assert!(matches!(e, Error::ProducerAlreadyExists { .. }), "{e}");
    let v = ringwire::cli::stat_json(p.path()).unwrap();
    // ringfire 0.5.2's `stat --json` says "Blackboard" (src/bin/ringfire.rs).
    assert_eq!(v["type"], "Blackboard");
    assert_eq!(v["slot_count"], 8);
    assert_eq!(v["value_size"], 40);
    assert_eq!(v["slot_size"], 64);
    drop(prod);
    assert!(!p.path().exists(), "unlinked on drop");
}

#[test]
fn concurrent_reader_never_sees_a_torn_value() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::time::{Duration, Instant};
    /// Clears the writing flag when dropped, also on a failed write, so the reader ends.
    struct Done<'a>(&'a AtomicBool);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            self.0.store(false, Ordering::Release);
        }
    }
    let p = ShmPath::new("bb-race");
    let mut prod = BlackboardProducer::<V>::create(&p, 1).unwrap();
    let cons = BlackboardConsumer::<V>::attach(&p).unwrap();
    let writing = AtomicBool::new(true);
    // Distinct values the reader saw while the writer was still writing.
    let distinct = AtomicU64::new(0);
    let (overlapped, distinct_seen) = std::thread::scope(|sc| {
        let done = Done(&writing);
        let reader = sc.spawn(|| {
            let (mut seen, mut overlapped) = (0u64, 0u64);
            loop {
                let v = cons.read(0).unwrap();
                // Only a read that ended before the writer did raced it.
                let during = writing.load(Ordering::Acquire);
                if let Some(v) = v {
                    assert_eq!(v, val(0, v[1]), "torn value");
                    assert!(v[1] >= seen, "went backwards");
                    if during && v[1] != seen {
                        distinct.fetch_add(1, Ordering::Relaxed);
                    }
                    seen = v[1];
                }
                if !during {
                    return overlapped;
                }
                overlapped += 1;
            }
        });
        // 200,000 writes, and more (for at most 10 s) until the reader has seen the value
        // change a few times while it was being written: a reader that never overlapped the
        // writer would check nothing.
        let t0 = Instant::now();
        let mut round = 0;
        while round < 200_000
            || (distinct.load(Ordering::Relaxed) < 3 && t0.elapsed() < Duration::from_secs(10))
        {
            round += 1;
            prod.write(0, &val(0, round)).unwrap();
        }
        drop(done);
        (reader.join().unwrap(), distinct.load(Ordering::Relaxed))
    });
    assert!(overlapped > 0, "no read overlapped the writer");
    assert!(
        distinct_seen >= 3,
        "the reader saw only {distinct_seen} distinct values while the writer wrote"
    );
}

#[test]
fn a_ring_is_not_a_blackboard() {
    let p = ShmPath::new("bb-ring");
    let _r = ringwire::RingProducer::<u64>::create(&p, 8).unwrap();
    let e = BlackboardConsumer::<V>::attach(&p).unwrap_err();
    assert!(e.to_string().contains("bad blackboard magic"), "{e}");
}

#[test]
fn a_writer_stuck_mid_write_is_reported_after_100ms() {
    let p = ShmPath::new("bb-stall");
    let mut prod = BlackboardProducer::<V>::create(&p, 2).unwrap();
    prod.write(1, &val(1, 1)).unwrap();
    let cons = BlackboardConsumer::<V>::attach(&p).unwrap();
    // Key 1's seqlock (at 128 + 64) left odd, as by a writer killed mid-write.
    ringwire_tests::shm::patch(p.path(), 128 + 64, &5u64.to_le_bytes());
    let t0 = std::time::Instant::now();
    let e = cons.read(1).unwrap_err();
    assert!(t0.elapsed() >= std::time::Duration::from_millis(100));
    assert!(e.to_string().contains("writer of key 1 stalled"), "{e}");
    assert_eq!(cons.read(0).unwrap(), None);
}

/// A key whose seqlock is odd at every look but keeps moving (a writer that rewrites it
/// without a pause, or a hostile one) never looked stalled, so `read` spun on it for ever.
/// It now ends after `BUSY_TIMEOUT` with its own error.
#[test]
fn a_key_mid_write_at_every_look_ends_the_read_after_a_second() {
    use std::os::unix::fs::FileExt;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};
    let p = ShmPath::new("bb-busy");
    let mut prod = BlackboardProducer::<V>::create(&p, 2).unwrap();
    prod.write(1, &val(1, 1)).unwrap();
    let cons = BlackboardConsumer::<V>::attach(&p).unwrap();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(p.path())
        .unwrap();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    // Key 1's seqlock (at 128 + 64) through odd values, each for well under STALL_TIMEOUT;
    // bounded in time whatever the reader does. The first is stored before the read starts,
    // so that the read never finds the key's value whole.
    file.write_all_at(&5u64.to_le_bytes(), 128 + 64).unwrap();
    let writer = {
        let stop = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            let end = Instant::now() + Duration::from_secs(20);
            let mut s = 7u64;
            while !stop.load(Ordering::Relaxed) && Instant::now() < end {
                file.write_all_at(&s.to_le_bytes(), 128 + 64).unwrap();
                s += 2;
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    // Not joined when it hangs: the test fails at the timeout below instead.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let t0 = Instant::now();
        let r = cons.read(1);
        let _ = tx.send((r, t0.elapsed()));
    });
    let got = rx.recv_timeout(Duration::from_secs(10));
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let (r, took) = got.expect("read still spinning on a key whose seqlock keeps moving");
    let e = r.unwrap_err();
    assert!(matches!(e, Error::KeyBusy { key: 1, .. }), "{e}");
    assert!(
        e.to_string()
            .contains("key 1 was being written at every look"),
        "{e}"
    );
    assert!(took >= ringwire::blackboard::BUSY_TIMEOUT, "{took:?}");
}

/// `read_copy` writes `out` only for a written key, like ringfire's on the same file; a key
/// out of range is a typed error that leaves `out` alone.
#[test]
fn read_copy_fills_out_only_for_written_keys() {
    let p = ShmPath::new("bb-copy");
    let mut prod = BlackboardProducer::<V>::create(&p, 4).unwrap();
    let cons = BlackboardConsumer::<V>::attach(&p).unwrap();
    let rf = ringfire::BlackboardConsumer::<V>::attach(p.path()).unwrap();
    let untouched: V = [0xABAB_ABAB_ABAB_ABAB; 5];
    let (mut out, mut rf_out) = (untouched, untouched);
    assert!(!cons.read_copy(2, &mut out).unwrap());
    assert!(!rf.read_copy(2, &mut rf_out).unwrap());
    assert_eq!((out, rf_out), (untouched, untouched));
    prod.write(2, &val(2, 9)).unwrap();
    assert!(cons.read_copy(2, &mut out).unwrap());
    assert!(rf.read_copy(2, &mut rf_out).unwrap());
    assert_eq!((out, rf_out), (val(2, 9), val(2, 9)));
    // Another key stays unwritten, and a rewrite is seen.
    let mut other = untouched;
    assert!(!cons.read_copy(3, &mut other).unwrap());
    assert_eq!(other, untouched);
    prod.write(2, &val(2, 10)).unwrap();
    assert!(cons.read_copy(2, &mut out).unwrap());
    assert_eq!(out, val(2, 10));
    let mut out = untouched;
    let e = cons.read_copy(4, &mut out).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Blackboard {
                source: BlackboardError::KeyOutOfRange {
                    key: 4,
                    slot_count: 4
                },
                ..
            }
        ),
        "{e}"
    );
    assert!(cons.read_copy(usize::MAX, &mut out).is_err());
    assert_eq!(out, untouched);
}
