//! The typed std API in one process: start modes, laps, lag, registration, checkpoint
//! resume, batches, lossless back-pressure, blob rings, waiting strategies.

use std::time::Duration;

use ringwire::core::broadcast::registry;
use ringwire::{
    BlobConsumer, BlobProducer, BusySpin, CleanupMode, Error, FlowControl, FutexWait,
    OffsetCheckpoint, RingConsumer, RingProducer, StartMode, YieldBackoff,
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
    let mut c = RingConsumer::<Rec>::attach(&p).unwrap();
    assert_eq!(c.cursor(), 25);
    assert_eq!(c.lag(), 16);
    let mut c = RingConsumer::<Rec>::builder().attach(&p).unwrap();
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
