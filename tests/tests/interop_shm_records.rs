//! Record-level interop with ringfire 0.5.2, both ways: 1,000,000 records of a `#[repr(C)]`
//! struct, of `[u8; 64]` and through a blob ring, each checked by sequence and checksum
//! (acceptance line 1). Fixed-record rings are lossless (both projects' readers register,
//! the producers wait for them); the blob ring is paced by the test so nothing is lapped.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ringwire::{BlobConsumer, BlobProducer, FlowControl, RingConsumer, RingProducer, YieldBackoff};
use ringwire_tests::records::{Aligned64, Rec, blob_payload, bytes64};
use ringwire_tests::shm::ShmPath;

const N: u64 = 1_000_000;
const DEADLINE: Duration = Duration::from_secs(240);

fn spin_until(deadline: Instant, what: &str, mut f: impl FnMut() -> bool) {
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::yield_now();
    }
}

/// Record `seq`, the next one of a ringwire consumer, waited for until `deadline`.
fn next_rw<T>(cons: &mut RingConsumer<T>, w: &mut YieldBackoff, deadline: Instant, seq: u64) -> T
where
    T: zerocopy::FromBytes + 'static,
{
    loop {
        match cons.recv_timeout(w, Duration::from_secs(1)) {
            Some(r) => return r,
            None => assert!(Instant::now() < deadline, "stalled at {seq}"),
        }
    }
}

/// The next record of a ringfire consumer, waited for until `deadline`.
fn next_rf<T: Copy + 'static>(cons: &mut ringfire::RingConsumer<T>, deadline: Instant) -> T {
    let mut r = None;
    spin_until(deadline, "a record", || {
        r = cons.try_recv();
        r.is_some()
    });
    r.expect("spin_until returned")
}

/// Receives records 1..=`n` with `recv_batch` (256 at most per call) until `DEADLINE`,
/// each equal to `expect(seq)`.
fn drain_batches<T>(
    n: u64,
    mut recv_batch: impl FnMut(&mut [T]) -> usize,
    expect: impl Fn(u64) -> T,
) where
    T: Copy + PartialEq + std::fmt::Debug,
{
    let deadline = Instant::now() + DEADLINE;
    let mut buf = vec![expect(1); 256];
    let mut next = 1u64;
    while next <= n {
        let got = recv_batch(&mut buf);
        if got == 0 {
            assert!(Instant::now() < deadline, "stalled at {next}");
            std::thread::yield_now();
        }
        for r in &buf[..got] {
            assert_eq!(*r, expect(next), "record {next}");
            next += 1;
        }
    }
}

#[test]
fn ringfire_struct_ring_to_ringwire_consumer() {
    let p = ShmPath::new("rf2rw-rec");
    let mut prod = ringfire::RingProducerBuilder::new(1024)
        .flow_control(ringfire::FlowControl::LosslessBackpressure)
        .build::<Rec, _>(p.path())
        .unwrap();
    let mut cons = RingConsumer::<Rec>::attach(&p).unwrap();
    assert!(cons.registry_slot().is_some());
    let reader = std::thread::spawn(move || {
        let deadline = Instant::now() + DEADLINE;
        let mut w = YieldBackoff::new(64);
        for seq in 1..=N {
            let r = next_rw(&mut cons, &mut w, deadline, seq);
            assert!(r.is_valid_for(seq), "record {seq}: {r:?}");
        }
        assert_eq!(cons.lapped_count(), 0);
        assert_eq!(cons.try_recv(), None);
        cons.cursor()
    });
    for seq in 1..=N {
        prod.push(&Rec::new(seq));
    }
    assert_eq!(reader.join().unwrap(), N + 1);
}

#[test]
fn ringwire_struct_ring_to_ringfire_consumer() {
    let p = ShmPath::new("rw2rf-rec");
    let mut prod = RingProducer::<Rec>::builder(1024)
        .flow_control(FlowControl::LosslessBackpressure)
        .build::<Rec, _>(&p)
        .unwrap();
    let mut cons = ringfire::RingConsumer::<Rec>::attach(p.path()).unwrap();
    assert!(cons.registration().is_some());
    let reader = std::thread::spawn(move || {
        let deadline = Instant::now() + DEADLINE;
        for seq in 1..=N {
            let r = next_rf(&mut cons, deadline);
            assert!(r.is_valid_for(seq), "record {seq}: {r:?}");
        }
        assert_eq!(cons.lapped_count(), 0);
        cons.cursor()
    });
    for seq in 1..=N {
        assert_eq!(prod.push(&Rec::new(seq)), seq);
    }
    assert_eq!(reader.join().unwrap(), N + 1);
}

#[test]
fn byte_array_rings_both_ways() {
    // Each record's bytes made once, for both directions and both sides: `bytes64` four times
    // a record took half of this test's time in a debug build.
    let batch: Arc<Vec<[u8; 64]>> = Arc::new((1..=N).map(bytes64).collect());
    let want = |b: &Arc<Vec<[u8; 64]>>| {
        let b = b.clone();
        move |seq: u64| b[seq as usize - 1]
    };
    // ringfire -> ringwire
    let p = ShmPath::new("rf2rw-u8");
    let mut prod = ringfire::RingProducerBuilder::new(512)
        .flow_control(ringfire::FlowControl::LosslessBackpressure)
        .build::<[u8; 64], _>(p.path())
        .unwrap();
    let mut cons = RingConsumer::<[u8; 64]>::attach(&p).unwrap();
    let expect = want(&batch);
    let reader = std::thread::spawn(move || {
        drain_batches(N, |buf| cons.recv_batch(buf), expect);
        assert_eq!(cons.lapped_count(), 0);
    });
    for rec in batch.iter() {
        prod.push(rec);
    }
    reader.join().unwrap();

    // ringwire -> ringfire
    let p = ShmPath::new("rw2rf-u8");
    let mut prod = RingProducer::<[u8; 64]>::builder(512)
        .flow_control(FlowControl::LosslessBackpressure)
        .build::<[u8; 64], _>(&p)
        .unwrap();
    let mut cons = ringfire::RingConsumer::<[u8; 64]>::attach(p.path()).unwrap();
    let expect = want(&batch);
    let reader = std::thread::spawn(move || {
        drain_batches(N, |buf| cons.recv_batch(buf), expect);
        assert_eq!(cons.lapped_count(), 0);
    });
    for chunk in batch.chunks(100) {
        prod.push_batch(chunk);
    }
    assert_eq!(prod.sequence(), N);
    reader.join().unwrap();
}

/// Paces a blob producer so it stays less than half a ring (and half an arena) ahead of
/// the reader: nothing is lapped, so every message must arrive.
const BLOB_CAP: u64 = 1024;

/// An over-aligned record (spec §4.1): both projects lay it out at stride 128 with the
/// payload at +64, attach to each other's rings by type, and the bytes `[8, 64)` between
/// the sequence word and the payload are never written by either.
#[test]
fn over_aligned_rings_both_ways() {
    const M: u64 = 200_000;
    // ringfire -> ringwire
    let p = ShmPath::new("rf2rw-a64");
    let mut prod = ringfire::RingProducerBuilder::new(256)
        .flow_control(ringfire::FlowControl::LosslessBackpressure)
        .build::<Aligned64, _>(p.path())
        .unwrap();
    let mut cons = RingConsumer::<Aligned64>::attach(&p).unwrap();
    let reader = std::thread::spawn(move || {
        let deadline = Instant::now() + DEADLINE;
        let mut w = YieldBackoff::new(64);
        for seq in 1..=M {
            let r = next_rw(&mut cons, &mut w, deadline, seq);
            assert_eq!(r, Aligned64::new(seq), "record {seq}");
        }
        assert_eq!(cons.lapped_count(), 0);
    });
    for seq in 1..=M {
        prod.push(&Aligned64::new(seq));
    }
    reader.join().unwrap();
    let rf_file = std::fs::read(p.path()).unwrap();
    drop(prod);

    // ringwire -> ringfire
    let p = ShmPath::new("rw2rf-a64");
    let mut prod = RingProducer::<Aligned64>::builder(256)
        .flow_control(FlowControl::LosslessBackpressure)
        .build::<Aligned64, _>(&p)
        .unwrap();
    let mut cons = ringfire::RingConsumer::<Aligned64>::attach(p.path()).unwrap();
    let reader = std::thread::spawn(move || {
        let deadline = Instant::now() + DEADLINE;
        for seq in 1..=M {
            assert_eq!(
                next_rf(&mut cons, deadline),
                Aligned64::new(seq),
                "record {seq}"
            );
        }
        assert_eq!(cons.lapped_count(), 0);
    });
    let batch: Vec<Aligned64> = (1..=M).map(Aligned64::new).collect();
    for chunk in batch.chunks(100) {
        prod.push_batch(chunk);
    }
    reader.join().unwrap();
    let rw_file = std::fs::read(p.path()).unwrap();

    // Same geometry (element_size at 12, slots_offset at 104 of the header, spec §2), and
    // in both files every slot holds its record at +64 with zeros in [8, 64).
    let u32_at = |f: &[u8], o: usize| u32::from_le_bytes(f[o..o + 4].try_into().unwrap());
    let u64_at = |f: &[u8], o: usize| u64::from_le_bytes(f[o..o + 8].try_into().unwrap());
    for f in [&rf_file, &rw_file] {
        assert_eq!(u32_at(f, 12), 128, "element_size");
        let slots = u64_at(f, 104) as usize;
        for i in 0..256 {
            let s = &f[slots + 128 * i..slots + 128 * (i + 1)];
            let seq = u64_at(s, 0);
            assert_eq!(seq % 256, i as u64, "slot {i} holds {seq}");
            assert!(
                s[8..64].iter().all(|&b| b == 0),
                "slot {i}: bytes [8, 64) written"
            );
            assert_eq!(s[64..], bytes64(seq), "slot {i}");
        }
    }
}

#[test]
fn blob_rings_both_ways() {
    // ringfire producer -> ringwire consumer
    let p = ShmPath::new("rf2rw-blob");
    let mut prod = ringfire::BlobProducer::<u64>::create(p.path(), BLOB_CAP, 1 << 20).unwrap();
    let mut cons = BlobConsumer::<u64>::attach(&p).unwrap();
    let done = Arc::new(AtomicU64::new(0));
    let done2 = done.clone();
    let reader = std::thread::spawn(move || {
        let deadline = Instant::now() + DEADLINE;
        let (mut meta, mut out, mut want) = (0u64, vec![0u8; 256], vec![0u8; 256]);
        for seq in 1..=N {
            let mut got = None;
            spin_until(deadline, "a blob", || {
                got = cons.recv_seq(&mut meta, &mut out).unwrap();
                got.is_some()
            });
            let (s, len) = got.unwrap();
            let wl = blob_payload(seq, 0, &mut want);
            assert_eq!((s, meta, len), (seq, seq, wl));
            assert_eq!(&out[..len], &want[..wl], "blob {seq}");
            done2.store(seq, Ordering::Release);
        }
        assert_eq!(cons.lapped_count(), 0);
    });
    let deadline = Instant::now() + DEADLINE;
    let mut buf = vec![0u8; 256];
    for seq in 1..=N {
        spin_until(deadline, "the reader", || {
            seq - done.load(Ordering::Acquire) < BLOB_CAP / 2
        });
        let len = blob_payload(seq, 0, &mut buf);
        assert_eq!(prod.push(&seq, &buf[..len]).unwrap(), seq);
    }
    reader.join().unwrap();

    // ringwire producer -> ringfire consumer. Payloads are never empty here: ringfire's
    // reader drops empty blobs once the arena has wrapped, whoever wrote them (see
    // `ringfire_reader_drops_empty_blobs_after_an_arena_wrap`).
    let p = ShmPath::new("rw2rf-blob");
    let mut prod = BlobProducer::<u64>::create(&p, BLOB_CAP, 1 << 20).unwrap();
    let mut cons = ringfire::BlobConsumer::<u64>::attach(p.path()).unwrap();
    let done = Arc::new(AtomicU64::new(0));
    let done2 = done.clone();
    let reader = std::thread::spawn(move || {
        let deadline = Instant::now() + DEADLINE;
        let (mut meta, mut out, mut want) = (0u64, vec![0u8; 256], vec![0u8; 256]);
        for seq in 1..=N {
            let mut got = None;
            spin_until(deadline, "a blob", || {
                got = cons.recv(&mut meta, &mut out).unwrap();
                got.is_some()
            });
            let len = got.unwrap();
            let wl = blob_payload(seq, 1, &mut want);
            assert_eq!((meta, len), (seq, wl));
            assert_eq!(&out[..len], &want[..wl], "blob {seq}");
            done2.store(seq, Ordering::Release);
        }
        assert_eq!(cons.lapped_count(), 0);
    });
    let deadline = Instant::now() + DEADLINE;
    let mut buf = vec![0u8; 256];
    for seq in 1..=N {
        spin_until(deadline, "the reader", || {
            seq - done.load(Ordering::Acquire) < BLOB_CAP / 2
        });
        let len = blob_payload(seq, 1, &mut buf);
        assert_eq!(prod.push(&seq, &buf[..len]).unwrap(), seq);
    }
    reader.join().unwrap();
}

/// A quirk of the reference reader (not of ringwire): an empty blob is stored as
/// `BlobRef {0, 0, 0}` (spec §10.2) and ringfire's lap test `reserved - offset > capacity`
/// then calls it lost once the arena has wrapped, even from ringfire's own producer.
/// ringwire's reader delivers it.
#[test]
fn ringfire_reader_drops_empty_blobs_after_an_arena_wrap() {
    let p = ShmPath::new("rf-empty");
    let mut prod = ringfire::BlobProducer::<u64>::create(p.path(), 16, 256).unwrap();
    let mut rf = ringfire::BlobConsumer::<u64>::attach(p.path()).unwrap();
    let mut rw = BlobConsumer::<u64>::attach(&p).unwrap();
    let (mut meta, mut out) = (0u64, [0u8; 64]);
    for seq in 1..=5u64 {
        prod.push(&seq, &[seq as u8; 64]).unwrap();
        assert_eq!(rf.recv(&mut meta, &mut out).unwrap(), Some(64));
        assert_eq!(rw.recv(&mut meta, &mut out).unwrap(), Some(64));
    }
    prod.push(&6, &[]).unwrap();
    assert_eq!(rw.recv(&mut meta, &mut out).unwrap(), Some(0));
    assert_eq!(meta, 6);
    assert_eq!(rf.recv(&mut meta, &mut out).unwrap(), None);
    assert_eq!(rf.lapped_count(), 1);
}
