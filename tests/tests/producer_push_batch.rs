//! `RingProducer::push_batch` publishes a batch once: one `write_seq` store and at most one
//! wake for a batch that fits, on a lossless ring as on a lossy one (it used to publish and
//! wake per record on a lossless ring). A lossless batch larger than the room the slowest
//! registered reader leaves is published in pieces, and a reader draining meanwhile gets
//! every record, in order, without being lapped.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use ringwire::core::sync::Ordering;
use ringwire::{FlowControl, RingConsumer, RingProducer, RingProducerBuilder};
use ringwire_tests::shm::{ShmPath, view};

fn producer(p: &ShmPath, capacity: u64, flow: FlowControl) -> RingProducer<u64> {
    RingProducerBuilder::new(capacity)
        .flow_control(flow)
        .max_readers(4)
        .build::<u64, _>(p)
        .unwrap()
}

/// How many times `f` bumped the ring's `futex_word` (one per wake) while a sleeper is
/// announced in `waiting_consumers`, as the reviewer observed it.
fn wakes(prod: &mut RingProducer<u64>, f: impl FnOnce(&mut RingProducer<u64>)) -> u32 {
    let v = view(prod.file());
    v.waiting_consumers().store(1, Ordering::SeqCst);
    let before = v.futex_word().load(Ordering::SeqCst);
    f(prod);
    let v = view(prod.file());
    let after = v.futex_word().load(Ordering::SeqCst);
    v.waiting_consumers().store(0, Ordering::SeqCst);
    after.wrapping_sub(before)
}

#[test]
fn a_batch_that_fits_is_published_with_one_wake_on_both_kinds_of_ring() {
    for flow in [
        FlowControl::LossyLatestWins,
        FlowControl::LosslessBackpressure,
    ] {
        let p = ShmPath::new("pbatch-one");
        let mut prod = producer(&p, 64, flow);
        // A registered reader: the lossless gate is set by its position, not by an empty
        // registry.
        let mut c = RingConsumer::<u64>::attach(&p).unwrap();
        let items: Vec<u64> = (100..110).collect();
        let n = wakes(&mut prod, |prod| {
            assert_eq!(prod.push_batch(&items), 1..11);
        });
        assert_eq!(n, 1, "{flow:?}: 10 records, {n} wakes");
        assert_eq!(prod.published_sequence(), 10);
        let got: Vec<u64> = std::iter::from_fn(|| c.try_recv()).collect();
        assert_eq!(got, items, "{flow:?}");
        // A single push still wakes once.
        assert_eq!(wakes(&mut prod, |prod| assert_eq!(prod.push(&7), 11)), 1);
        // An empty batch publishes nothing and wakes nobody.
        assert_eq!(
            wakes(&mut prod, |prod| assert_eq!(prod.push_batch(&[]), 12..12)),
            0
        );
    }
}

#[test]
fn a_lossless_batch_larger_than_the_room_arrives_whole_and_in_order() {
    const N: u64 = 5000;
    let p = ShmPath::new("pbatch-big");
    let mut prod = producer(&p, 16, FlowControl::LosslessBackpressure);
    // Registered before the batch starts, so the producer waits for it from the first
    // record.
    let mut c = RingConsumer::<u64>::attach(&p).unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let t0 = Instant::now();
        let mut got = Vec::with_capacity(N as usize);
        while (got.len() as u64) < N && t0.elapsed() < Duration::from_secs(20) {
            match c.try_recv() {
                Some(v) => got.push(v),
                None => std::thread::yield_now(),
            }
        }
        let _ = tx.send(());
        (got, c.lapped_count())
    });
    let items: Vec<u64> = (1..=N).map(|i| i * 3).collect();
    assert_eq!(prod.push_batch(&items), 1..N + 1);
    rx.recv_timeout(Duration::from_secs(30))
        .expect("the reader finished");
    let (got, lapped) = reader.join().unwrap();
    assert_eq!(lapped, 0);
    assert_eq!(got.len(), items.len());
    assert!(got == items, "records lost or out of order");
    assert_eq!(prod.published_sequence(), N);
}
