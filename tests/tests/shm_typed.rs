//! The typed std API in one process: start modes, laps, lag, registration, checkpoint
//! resume, batches, lossless back-pressure, blob rings, waiting strategies; receive status,
//! jumps and seeks, the producer's view of its readers (headroom, reader lag, waiting for
//! headroom), ringfire's other attach and commit forms.

use std::time::Duration;

use ringwire::core::broadcast::registry;
use ringwire::{
    BlobConsumer, BlobProducer, BusySpin, CleanupMode, Error, FlowControl, FutexWait,
    OffsetCheckpoint, RecvStatus, RingConsumer, RingConsumerBuilder, RingProducer,
    RingProducerBuilder, StartMode, YieldBackoff,
};
use ringwire_tests::records::Rec;
use ringwire_tests::shm::{ShmPath, view};

fn filled(tag: &str, cap: u64, n: u64) -> (ShmPath, RingProducer<Rec>) {
    let p = ShmPath::new(tag);
    let mut prod = RingProducer::<Rec>::create(&p, cap).unwrap();
    for s in 1..=n {
        assert_eq!(prod.push(&Rec::new(s)), s);
    }
    (p, prod)
}

fn first_seq(p: &ShmPath, mode: StartMode) -> Option<u64> {
    let mut c = RingConsumer::<Rec>::builder()
        .start_mode(mode)
        .attach(p)
        .unwrap();
    c.try_recv_seq().map(|(s, r)| {
        assert!(r.is_valid_for(s));
        s
    })
}

#[test]
fn start_modes_follow_section_5() {
    let (p, _prod) = filled("modes", 16, 40);
    assert_eq!(first_seq(&p, StartMode::Latest), Some(40));
    assert_eq!(first_seq(&p, StartMode::Head), None);
    assert_eq!(first_seq(&p, StartMode::Oldest), Some(25));
    assert_eq!(first_seq(&p, StartMode::Sequence(30)), Some(30));
    let mut c = RingConsumer::<Rec>::builder()
        .start_from_sequence(3)
        .attach(&p)
        .unwrap();
    assert_eq!(c.lapped_count(), 22);
    assert_eq!(c.try_recv_seq().unwrap().0, 25);
    // `attach` is Oldest; the builder default is Latest.
    let c = RingConsumer::<Rec>::attach(&p).unwrap();
    assert_eq!(c.cursor(), 25);
    assert_eq!(c.lag(), 16);
    let c = RingConsumer::<Rec>::builder().attach(&p).unwrap();
    assert_eq!(c.cursor(), 40);
    assert_eq!(c.lag(), 1);
}

#[test]
fn lapped_reader_skips_and_counts() {
    let (p, mut prod) = filled("lap", 8, 4);
    let mut c = RingConsumer::<Rec>::attach(&p).unwrap();
    assert_eq!(c.try_recv_seq().unwrap().0, 1);
    for s in 5..=30 {
        prod.push(&Rec::new(s));
    }
    let (s, r) = c.try_recv_seq().unwrap();
    assert_eq!(s, 23);
    assert!(r.is_valid_for(23));
    assert_eq!(c.lapped_count(), 21);
    let mut buf = [Rec::new(0); 16];
    assert_eq!(c.recv_batch(&mut buf), 7);
    assert!(buf[..7].iter().zip(24..).all(|(r, s)| r.is_valid_for(s)));
    assert_eq!(c.lag(), 0);
}

#[test]
fn push_batch_publishes_once() {
    let p = ShmPath::new("batch");
    let mut prod = RingProducer::<[u8; 64]>::create(&p, 64).unwrap();
    let items: Vec<[u8; 64]> = (1..=50u8).map(|i| [i; 64]).collect();
    assert_eq!(prod.push_batch(&items), 1..51);
    assert_eq!(prod.sequence(), 50);
    let mut c = RingConsumer::<[u8; 64]>::attach(&p).unwrap();
    let mut out = vec![[0u8; 64]; 64];
    assert_eq!(c.recv_batch(&mut out), 50);
    assert_eq!(&out[..50], &items[..]);
}

#[test]
fn consumers_register_under_their_names() {
    let p = ShmPath::new("reg");
    let mut prod = RingProducer::<Rec>::builder(16)
        .max_readers(2)
        .build::<Rec, _>(&p)
        .unwrap();
    let mut a = RingConsumer::<Rec>::builder()
        .consumer_name("alpha")
        .start_from_oldest()
        .attach(&p)
        .unwrap();
    let b = RingConsumer::<Rec>::attach(&p).unwrap();
    // The registry is full and the ring lossy: the third reader continues unregistered.
    let c = RingConsumer::<Rec>::attach(&p).unwrap();
    assert_eq!((a.registry_slot(), b.registry_slot()), (Some(0), Some(1)));
    assert_eq!(c.registry_slot(), None);
    prod.push(&Rec::new(1));
    a.try_recv().unwrap();
    let live: Vec<_> = registry::live_readers(view(prod.file())).collect();
    assert_eq!(live.len(), 2);
    assert_eq!(live[0].cursor, 2);
    assert_eq!(
        view(prod.file()).registry_name(0).map(|n| n[..6].to_vec()),
        Some(b"alpha\0".to_vec())
    );
    drop(a);
    assert_eq!(registry::live_readers(view(prod.file())).count(), 1);
}

#[test]
fn full_registry_on_a_lossless_ring_is_an_error() {
    let p = ShmPath::new("reg-full");
    let _prod = RingProducer::<Rec>::builder(16)
        .max_readers(1)
        .flow_control(FlowControl::LosslessBackpressure)
        .build::<Rec, _>(&p)
        .unwrap();
    let _a = RingConsumer::<Rec>::attach(&p).unwrap();
    let e = RingConsumer::<Rec>::attach(&p).unwrap_err();
    assert!(matches!(e, Error::Registry { .. }), "{e}");
    assert!(
        e.to_string()
            .starts_with(&format!("ring {}: ", p.path().display()))
    );
}

#[test]
fn lossless_try_push_refuses_to_lap_a_registered_reader() {
    let p = ShmPath::new("lossless");
    let mut prod = RingProducer::<Rec>::builder(8)
        .flow_control(FlowControl::LosslessBackpressure)
        .build::<Rec, _>(&p)
        .unwrap();
    let mut c = RingConsumer::<Rec>::attach(&p).unwrap();
    let mut n = 0;
    while prod.try_push(&Rec::new(n + 1)).is_ok() {
        n += 1;
        assert!(n <= 8, "the producer lapped the reader");
    }
    assert_eq!(n, 8);
    assert_eq!(c.try_recv_seq().unwrap().0, 1);
    assert_eq!(prod.try_push(&Rec::new(9)), Ok(9));
}

#[test]
fn checkpoint_resumes_after_the_committed_sequence() {
    let (p, _prod) = filled("ckpt", 64, 30);
    let cp_path = p.sibling("_algo_1.offset");
    {
        let mut c = RingConsumer::<Rec>::builder()
            .consumer_name("algo 1")
            .start_from_oldest()
            .default_offset_file()
            .attach(&p)
            .unwrap();
        assert_eq!(c.checkpoint().unwrap().path(), cp_path.path());
        for _ in 0..10 {
            c.try_recv().unwrap();
        }
        c.commit_offset().unwrap();
    }
    let cp = OffsetCheckpoint::open_or_create(&cp_path, "algo 1").unwrap();
    assert_eq!(cp.load(), Some(10));
    assert_eq!(cp.pid(), std::process::id());
    assert!(cp.updated_ns() > 0);
    let bytes = std::fs::read(&cp_path).unwrap();
    assert_eq!(bytes.len(), 64);
    assert_eq!(&bytes[0..8], b"SFFO_MHS");
    assert_eq!(&bytes[32..39], b"algo 1\0");
    // The saved value overrides the start mode (here Latest).
    let mut c = RingConsumer::<Rec>::builder()
        .consumer_name("algo 1")
        .default_offset_file()
        .attach(&p)
        .unwrap();
    assert_eq!(c.try_recv_seq().unwrap().0, 11);
}

#[test]
fn a_file_that_is_not_a_checkpoint_is_refused() {
    let p = ShmPath::new("ckpt-bad");
    std::fs::write(&p, [0xAB; 64]).unwrap();
    let e = OffsetCheckpoint::open_or_create(&p, "x").unwrap_err();
    assert!(
        e.to_string().contains("bad magic 0xabababababababab"),
        "{e}"
    );
}

#[test]
fn blob_producer_and_consumer_round_trip() {
    let p = ShmPath::new("blob");
    let mut prod = BlobProducer::<u64>::builder(8, 1024)
        .cleanup_mode(CleanupMode::UnlinkOnDrop)
        .build::<u64, _>(&p)
        .unwrap();
    let mut cons = BlobConsumer::<u64>::attach(&p).unwrap();
    let (mut meta, mut out) = (0u64, [0u8; 300]);
    assert_eq!(cons.recv(&mut meta, &mut out).unwrap(), None);
    for i in 1..=5u64 {
        assert_eq!(
            prod.push(&(i * 100), &vec![i as u8; i as usize * 50])
                .unwrap(),
            i
        );
    }
    for i in 1..=5u64 {
        let n = cons.recv(&mut meta, &mut out).unwrap().unwrap();
        assert_eq!((meta, n), (i * 100, i as usize * 50));
        assert!(out[..n].iter().all(|&b| b == i as u8));
    }
    // Too small a buffer is an error, and the message stays unread.
    prod.push(&7, &[7; 200]).unwrap();
    let e = cons.recv(&mut meta, &mut [0u8; 10]).unwrap_err();
    assert!(
        e.to_string().contains(&p.path().display().to_string()),
        "{e}"
    );
    assert_eq!(cons.recv(&mut meta, &mut out).unwrap(), Some(200));
    // A blob larger than the arena is refused with its length.
    let e = prod.push(&8, &vec![0; 2048]).unwrap_err();
    assert!(matches!(e, Error::Blob { .. }), "{e}");
    assert_eq!(cons.lapped_count(), 0);
    assert_eq!(cons.lag(), 0);
}

#[test]
fn blocking_receive_with_every_wait_strategy() {
    let (p, mut prod) = filled("block", 64, 0);
    let mut c1 = RingConsumer::<Rec>::builder()
        .start_from_head()
        .attach(&p)
        .unwrap();
    let mut c2 = RingConsumer::<Rec>::builder()
        .start_from_head()
        .attach(&p)
        .unwrap();
    let mut c3 = RingConsumer::<Rec>::builder()
        .start_from_head()
        .attach(&p)
        .unwrap();
    let h = std::thread::spawn(move || {
        let a = c1.recv_blocking(&mut BusySpin::new());
        let b = c2.recv_blocking(&mut YieldBackoff::default());
        let c = c3.recv_blocking(&mut FutexWait::new(4, Some(Duration::from_millis(20))));
        (a, b, c)
    });
    std::thread::sleep(Duration::from_millis(30));
    prod.push(&Rec::new(1));
    let (a, b, c) = h.join().unwrap();
    assert!(a.is_valid_for(1) && b.is_valid_for(1) && c.is_valid_for(1));
}

#[test]
fn typed_attach_checks_the_record_type() {
    let (p, _prod) = filled("type", 8, 1);
    let e = RingConsumer::<u64>::attach(&p).unwrap_err();
    assert!(
        e.to_string().contains("element_size 40 does not match"),
        "{e}"
    );
    let e = RingConsumer::<[u8; 32]>::attach(&p).unwrap_err();
    assert!(e.to_string().contains("schema signature"), "{e}");
    let e = RingProducer::<Rec>::create(ShmPath::new("cap").path(), 1000).unwrap_err();
    assert!(
        e.to_string()
            .ends_with("capacity 1000 is not a power of two"),
        "{e}"
    );
}

/// The eager (spinning) read against a writer lapping it in a small ring: every record it
/// accepts is intact and newer than the last, and accepted + lapped accounts for every
/// sequence, as for `try_recv`.
#[test]
fn eager_receive_is_tear_free_under_laps() {
    const N: u64 = 200_000;
    let p = ShmPath::new("eager");
    let mut prod = RingProducer::<Rec>::create(&p, 8).unwrap();
    let mut c = RingConsumer::<Rec>::builder()
        .start_from_head()
        .attach(&p)
        .unwrap();
    let w = std::thread::spawn(move || {
        for s in 1..=N {
            prod.push(&Rec::new(s));
        }
        prod
    });
    let (mut last, mut accepted) = (0u64, 0u64);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while last < N && std::time::Instant::now() < deadline {
        for _ in 0..1024 {
            if let Some(r) = c.try_recv_eager() {
                let s = c.cursor() - 1;
                assert!(r.is_valid_for(s), "record {s} is intact");
                assert!(s > last, "never backwards");
                last = s;
                accepted += 1;
            }
        }
    }
    let _prod = w.join().unwrap();
    assert_eq!(last, N, "the newest record is delivered");
    assert_eq!(accepted + c.lapped_count(), N);
}

#[test]
fn recv_status_reports_each_lap_with_its_exact_skip() {
    let (p, mut prod) = filled("status", 8, 3);
    let mut c = RingConsumer::<Rec>::attach(&p).unwrap();
    assert_eq!(c.recv_status(), RecvStatus::Ok(Rec::new(1)));
    assert_eq!(c.recv_status(), RecvStatus::Ok(Rec::new(2)));
    assert_eq!(c.recv_status(), RecvStatus::Ok(Rec::new(3)));
    assert_eq!(c.recv_status(), RecvStatus::Empty);
    // write_seq 20 in 8 slots holds 13..=20: 4..=12 (9 records) are gone.
    for s in 4..=20 {
        prod.push(&Rec::new(s));
    }
    assert_eq!(
        c.recv_status(),
        RecvStatus::Lapped {
            skipped: 9,
            item: Rec::new(13)
        }
    );
    assert_eq!(c.recv_status(), RecvStatus::Ok(Rec::new(14)));
    assert_eq!(c.lapped_count(), 9);
    // A second lap reports only its own loss: cursor 15, write_seq 40, oldest 33.
    for s in 21..=40 {
        prod.push(&Rec::new(s));
    }
    assert_eq!(
        c.recv_status(),
        RecvStatus::Lapped {
            skipped: 18,
            item: Rec::new(33)
        }
    );
    assert_eq!(c.lapped_count(), 27);
    let mut rest = 0;
    while let RecvStatus::Ok(r) = c.recv_status() {
        assert!(r.is_valid_for(34 + rest));
        rest += 1;
    }
    assert_eq!(rest, 7);
    assert_eq!(c.recv_status(), RecvStatus::Empty);
}

#[test]
fn jumps_and_seeks_count_what_they_skip() {
    let p = ShmPath::new("jump");
    let mut prod = RingProducer::<Rec>::builder(8)
        .max_readers(2)
        .build::<Rec, _>(&p)
        .unwrap();
    for s in 1..=5 {
        prod.push(&Rec::new(s));
    }
    let mut c = RingConsumer::<Rec>::attach(&p).unwrap();
    let cursor_in_registry = |prod: &RingProducer<Rec>| {
        registry::live_readers(view(prod.file()))
            .next()
            .unwrap()
            .cursor
    };
    assert_eq!(c.try_recv_seq().unwrap().0, 1);
    // Cursor 2, newest 5: 2..=4 skipped, 5 redelivered.
    assert_eq!(c.jump_to_latest(), 3);
    assert_eq!((c.cursor(), c.lapped_count()), (5, 3));
    assert_eq!(cursor_in_registry(&prod), 5);
    assert_eq!(c.try_recv_seq().unwrap().0, 5);
    assert_eq!(c.jump_to_latest(), 0, "caught up");
    assert_eq!(c.jump_to_oldest(), 0, "inside the window");
    assert_eq!(c.cursor(), 6);
    // write_seq 20 holds 13..=20; cursor 6: 6..=12 are gone.
    for s in 6..=20 {
        prod.push(&Rec::new(s));
    }
    assert_eq!(c.jump_to_oldest(), 7);
    assert_eq!((c.cursor(), c.lapped_count()), (13, 10));
    assert_eq!(cursor_in_registry(&prod), 13);
    assert_eq!(c.recv_status(), RecvStatus::Ok(Rec::new(13)));
    // seek goes back inside the window for free, and counts a clamp below it.
    assert_eq!(c.seek(15), 0);
    assert_eq!(c.try_recv_seq().unwrap().0, 15);
    assert_eq!(c.seek(3), 10);
    assert_eq!((c.cursor(), c.lapped_count()), (13, 20));
    assert_eq!(cursor_in_registry(&prod), 13);
    assert_eq!(c.seek(99), 0);
    assert_eq!((c.cursor(), c.lag()), (99, 0));
}

/// A registry entry for a process that cannot exist (`pid_alive` treats pids above
/// `i32::MAX` as dead), holding `cursor`.
fn ghost_reader(prod: &RingProducer<Rec>, cursor: u64) {
    registry::register(view(prod.file()), 0x8000_0001, "ghost", cursor, |_| true).unwrap();
}

#[test]
fn headroom_and_reader_lag_follow_the_slowest_registered_reader() {
    let p = ShmPath::new("headroom");
    let mut prod = RingProducer::<Rec>::builder(8)
        .flow_control(FlowControl::LosslessBackpressure)
        .build::<Rec, _>(&p)
        .unwrap();
    assert_eq!(prod.flow_control(), FlowControl::LosslessBackpressure);
    assert_eq!(
        (prod.headroom(), prod.reader_lag()),
        (8, 0),
        "no reader yet"
    );
    let mut slow = RingConsumer::<Rec>::attach(&p).unwrap();
    for s in 1..=5 {
        prod.push(&Rec::new(s));
    }
    assert_eq!((prod.headroom(), prod.reader_lag()), (3, 5));
    let mut fast = RingConsumer::<Rec>::attach(&p).unwrap();
    while fast.try_recv().is_some() {}
    assert_eq!(fast.lag(), 0);
    assert_eq!(
        (prod.headroom(), prod.reader_lag()),
        (3, 5),
        "the slowest counts"
    );
    slow.try_recv().unwrap();
    slow.try_recv().unwrap();
    assert_eq!((prod.headroom(), prod.reader_lag()), (5, 3));
    while prod.try_push(&Rec::new(prod.next_sequence())).is_ok() {}
    assert_eq!(prod.sequence(), 10);
    assert_eq!((prod.headroom(), prod.reader_lag()), (0, 8));
    assert_eq!(slow.lag(), 8);
    drop(slow);
    assert_eq!(
        (prod.headroom(), prod.reader_lag()),
        (3, 5),
        "fast is at 6 of 10"
    );
    let _ = fast.recv_batch(&mut [Rec::new(0); 8]);
    assert_eq!((prod.headroom(), prod.reader_lag()), (8, 0));
    // A dead reader is pruned by the query, as ringfire's registry scan does.
    ghost_reader(&prod, 1);
    assert_eq!(registry::live_readers(view(prod.file())).count(), 2);
    assert_eq!((prod.headroom(), prod.reader_lag()), (8, 0));
    assert_eq!(registry::live_readers(view(prod.file())).count(), 1);
}

#[test]
fn headroom_on_lossy_rings_with_and_without_a_registry() {
    // No registry: the capacity, whatever the readers do.
    let (p, mut prod) = filled("headroom-lossy", 8, 3);
    let _c = RingConsumer::<Rec>::attach(&p).unwrap();
    for s in 4..=30 {
        prod.push(&Rec::new(s));
    }
    assert_eq!(prod.flow_control(), FlowControl::LossyLatestWins);
    assert_eq!((prod.headroom(), prod.reader_lag()), (8, 0));
    prod.wait_for_headroom();
    // A lossy ring with a registry counts a lapped reader where it last published.
    let p = ShmPath::new("headroom-lossy-reg");
    let mut prod = RingProducer::<Rec>::builder(8)
        .max_readers(1)
        .build::<Rec, _>(&p)
        .unwrap();
    let mut c = RingConsumer::<Rec>::attach(&p).unwrap();
    for s in 1..=30 {
        prod.push(&Rec::new(s));
    }
    assert_eq!((prod.headroom(), prod.reader_lag()), (0, 30));
    assert_eq!(c.try_recv_seq().unwrap().0, 23);
    assert_eq!((prod.headroom(), prod.reader_lag()), (1, 7));
}

#[test]
fn wait_for_headroom_waits_for_the_reader_and_only_for_a_live_one() {
    let p = ShmPath::new("wait-headroom");
    let mut prod = RingProducer::<Rec>::builder(4)
        .flow_control(FlowControl::LosslessBackpressure)
        .build::<Rec, _>(&p)
        .unwrap();
    // No reader: returns at once, even with more than a ring published.
    for s in 1..=9 {
        prod.push(&Rec::new(s));
    }
    prod.wait_for_headroom();
    let mut c = RingConsumer::<Rec>::builder()
        .start_from_head()
        .attach(&p)
        .unwrap();
    for s in 10..=13 {
        prod.push(&Rec::new(s));
    }
    assert_eq!(prod.headroom(), 0);
    let waiter = std::thread::spawn(move || {
        prod.wait_for_headroom();
        let h = prod.headroom();
        (prod, h)
    });
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        !waiter.is_finished(),
        "waits while the reader is a ring behind"
    );
    assert_eq!(c.try_recv_seq().unwrap().0, 10);
    let (mut prod, h) = waiter.join().unwrap();
    assert_eq!(h, 1);
    assert_eq!(prod.try_push(&Rec::new(14)), Ok(14));
    // A dead reader a ring behind does not hold it: pruned while waiting.
    drop(c);
    ghost_reader(&prod, 11);
    assert_eq!(prod.headroom(), 4, "pruned by the query");
    ghost_reader(&prod, 11);
    let waiter = std::thread::spawn(move || {
        prod.wait_for_headroom();
        prod
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !waiter.is_finished() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(
        waiter.is_finished(),
        "a dead reader must not hold the producer"
    );
    let prod = waiter.join().unwrap();
    assert_eq!(registry::live_readers(view(prod.file())).count(), 0);
}

#[test]
fn published_sequence_is_the_header_write_seq() {
    let p = ShmPath::new("published");
    let mut prod = RingProducer::<Rec>::create_with_options(
        &p,
        RingProducerBuilder::new(16).cleanup_mode(CleanupMode::UnlinkOnDrop),
    )
    .unwrap();
    assert_eq!((prod.published_sequence(), prod.sequence()), (0, 0));
    prod.push_batch(&[Rec::new(1), Rec::new(2), Rec::new(3)]);
    assert_eq!(prod.published_sequence(), 3);
    assert_eq!(prod.published_sequence(), prod.file().write_seq());
    assert_eq!(prod.next_sequence(), 4);
}

#[test]
fn attach_forms_and_offset_commits() {
    let (p, mut prod) = filled("attach-forms", 16, 5);
    let mut c = RingConsumer::<Rec>::attach_latest(&p).unwrap();
    assert_eq!(c.try_recv_seq().unwrap().0, 5);
    assert_eq!(c.offset_path(), None);
    let mut c = RingConsumer::<Rec>::attach_with_options(
        &p,
        RingConsumerBuilder::new().start_from_sequence(2),
    )
    .unwrap();
    assert_eq!(c.try_recv_seq().unwrap().0, 2);
    // Nothing saved yet: starts at the newest, like attach_latest.
    let cp = p.sibling(".offset");
    let mut r = RingConsumer::<Rec>::attach_from_offset(&p, &cp).unwrap();
    assert_eq!(r.offset_path(), Some(cp.path()));
    assert_eq!(r.checkpoint().unwrap().name(), "consumer");
    assert_eq!(r.try_recv_seq().unwrap().0, 5);
    r.commit_offset().unwrap();
    drop(r);
    prod.push(&Rec::new(6));
    let mut r = RingConsumer::<Rec>::attach_from_offset(&p, &cp).unwrap();
    assert_eq!(r.try_recv_seq().unwrap().0, 6);
    // commit_offset_to: another file, created on demand; the own checkpoint is untouched.
    let other = p.sibling("_other.offset");
    r.commit_offset_to(&other, "other").unwrap();
    let saved = OffsetCheckpoint::open_or_create(&other, "x").unwrap();
    assert_eq!((saved.load(), saved.name()), (Some(6), "x"));
    assert_eq!(r.checkpoint().unwrap().load(), Some(5));
    // A consumer without a checkpoint can commit elsewhere too; 0 reads as "never".
    let fresh = RingConsumer::<Rec>::builder()
        .start_from_oldest()
        .offset_shm(p.sibling("_shm.offset"))
        .attach(&p)
        .unwrap();
    assert_eq!(fresh.offset_path(), Some(p.sibling("_shm.offset").path()));
    fresh.commit_offset_to(&other, "other").unwrap();
    assert_eq!(saved.load(), None);
}

#[test]
fn offset_files_that_are_not_checkpoints_are_refused() {
    let (p, _prod) = filled("offset-bad", 16, 5);
    let c = RingConsumer::<Rec>::attach(&p).unwrap();
    // The ring itself is no checkpoint: refused, and the ring is left intact.
    let e = c.commit_offset_to(&p, "x").unwrap_err();
    assert!(matches!(e, Error::BadFileMagic { .. }), "{e}");
    let e = RingConsumer::<Rec>::attach_from_offset(&p, &p).unwrap_err();
    assert!(matches!(e, Error::BadFileMagic { .. }), "{e}");
    // The message says what the file is: the arguments were swapped, or a ring named.
    assert_eq!(
        e.to_string(),
        format!(
            "offset file {}: bad magic {:#018x} (the magic of a ring file)",
            p.path().display(),
            ringwire::core::layout::RING_MAGIC
        )
    );
    let board = ShmPath::new("offset-bad-board");
    let _bb = ringwire::BlackboardProducer::<u64>::create(&board, 1).unwrap();
    let e = c.commit_offset_to(&board, "x").unwrap_err();
    assert!(
        e.to_string().ends_with("(the magic of a blackboard)"),
        "{e}"
    );
    let mut again = RingConsumer::<Rec>::attach(&p).unwrap();
    assert!(again.try_recv().unwrap().is_valid_for(1));
    // A checkpoint path under a file or naming a directory: an I/O error.
    let e = c
        .commit_offset_to(p.path().join("x.offset"), "x")
        .unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e}");
    let e = c.commit_offset_to("/dev/shm", "x").unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e}");
}

/// Receives, batches, seeks (0, inside and below the window, past `write_seq`, `u64::MAX`),
/// jumps and lag against a model of a lossy ring, in a seeded random order over capacities
/// 1 to 64: every delivered record is the model's next one, and every skip is counted in
/// `lapped_count` exactly once.
#[test]
fn receives_seeks_and_jumps_follow_a_model_of_the_ring() {
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for cap in [1u64, 2, 8, 64] {
        let p = ShmPath::new(&format!("model-{cap}"));
        let mut prod = RingProducer::<Rec>::create(&p, cap).unwrap();
        let mut c = RingConsumer::<Rec>::attach(&p).unwrap();
        let mut w = 0u64;
        for step in 0..5_000 {
            let (c0, l0) = (c.cursor(), c.lapped_count());
            let oldest = w.saturating_sub(cap) + 1;
            // Where the next receive reads: the cursor, or the oldest retained record.
            let at = c0.max(oldest);
            let ctx = format!("cap {cap} step {step} cursor {c0} write_seq {w}");
            match next() % 10 {
                0..=2 => {
                    for _ in 0..next() % (3 * cap + 2) {
                        w += 1;
                        assert_eq!(prod.push(&Rec::new(w)), w);
                    }
                }
                3..=5 => match c.try_recv_seq() {
                    Some((s, r)) => {
                        assert!(r.is_valid_for(s), "{ctx}");
                        assert_eq!(s, at, "{ctx}");
                        assert_eq!(c.lapped_count() - l0, at - c0, "{ctx}");
                    }
                    None => assert!(c0 > w, "{ctx}: nothing received"),
                },
                6 => {
                    let mut buf = vec![Rec::new(0); (next() % (2 * cap + 2)) as usize];
                    let n = c.recv_batch(&mut buf);
                    let want = buf.len().min((w + 1).saturating_sub(at) as usize);
                    assert_eq!(n, want, "{ctx}");
                    for (i, r) in buf[..n].iter().enumerate() {
                        assert!(r.is_valid_for(at + i as u64), "{ctx}: record {i}");
                    }
                    if n > 0 {
                        assert_eq!(c.lapped_count() - l0, at - c0, "{ctx}");
                    }
                }
                7 => {
                    let s = match next() % 8 {
                        0 => 0,
                        1 => u64::MAX,
                        2 => w + 1 + next() % 4,
                        _ => next() % (w + 2),
                    };
                    let clamped = oldest.saturating_sub(s.max(1));
                    assert_eq!(c.seek(s), clamped, "{ctx}: seek {s}");
                    assert_eq!(c.cursor(), s.max(1).max(oldest), "{ctx}: seek {s}");
                    assert_eq!(c.lapped_count() - l0, clamped, "{ctx}: seek {s}");
                }
                8 => {
                    let skipped = w.saturating_sub(c0);
                    assert_eq!(c.jump_to_latest(), skipped, "{ctx}");
                    assert_eq!(c.cursor(), c0.max(w), "{ctx}");
                }
                _ => {
                    assert_eq!(c.jump_to_oldest(), at - c0, "{ctx}");
                    assert_eq!(c.cursor(), at, "{ctx}");
                }
            }
            assert_eq!(c.lag(), (w + 1).saturating_sub(c.cursor()), "{ctx}");
        }
    }
}
