//! `AsyncRingConsumer` (feature `tokio`): order through `recv().await` and through the
//! `Stream`, a wake-up from another thread, and a lossless stress that must never lose a
//! wake-up.

use std::future::poll_fn;
use std::pin::Pin;
use std::time::{Duration, Instant};

use futures_core::Stream;
use ringwire::{AsyncRingConsumer, FlowControl, RingConsumer, RingProducer};

mod common;
use common::TmpRing;

/// A consumer of the ring at `t` that starts at its head (the next record published).
fn head_consumer(t: &TmpRing) -> RingConsumer<u64> {
    RingConsumer::<u64>::builder()
        .start_from_head()
        .attach(&t.0)
        .unwrap()
}

const BOUND: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "current_thread")]
async fn recv_await_delivers_in_order() {
    let t = TmpRing::new("order");
    let mut tx = RingProducer::<u64>::create(&t.0, 1024).unwrap();
    for i in 0..500u64 {
        tx.push(&(i * 3));
    }
    let mut rx = AsyncRingConsumer::new(RingConsumer::<u64>::attach(&t.0).unwrap()).unwrap();
    tokio::time::timeout(BOUND, async {
        for i in 0..500u64 {
            let (seq, v) = rx.recv_seq().await;
            assert_eq!((seq, v), (i + 1, i * 3));
        }
    })
    .await
    .expect("records already in the ring arrive without waiting");
    assert_eq!(rx.try_recv(), None);
    assert_eq!(rx.lapped_count(), 0);
    assert_eq!(rx.cursor(), 501);
}

#[tokio::test(flavor = "current_thread")]
async fn stream_delivers_in_order_while_the_producer_runs() {
    let t = TmpRing::new("stream");
    let mut tx = RingProducer::<u64>::create(&t.0, 4096).unwrap();
    let rx = head_consumer(&t);
    let mut rx = AsyncRingConsumer::new(rx).unwrap();
    const N: u64 = 3000;
    let producer = std::thread::spawn(move || {
        for i in 0..N {
            tx.push(&i);
            if i % 500 == 0 {
                // Let the reader catch up and wait on an empty ring now and then.
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        tx
    });
    let mut stream = Pin::new(&mut rx);
    tokio::time::timeout(BOUND, async {
        for i in 0..N {
            let v = poll_fn(|cx| stream.as_mut().poll_next(cx)).await;
            assert_eq!(v, Some(i));
        }
    })
    .await
    .expect("every record arrives through the stream");
    assert_eq!(rx.lapped_count(), 0);
    let _tx = producer.join().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_awaiting_consumer_is_woken_by_a_publish_from_another_thread() {
    let t = TmpRing::new("wake");
    let mut tx = RingProducer::<u64>::create(&t.0, 64).unwrap();
    let rx = head_consumer(&t);
    // A 30 s futex timeout: only the producer's FUTEX_WAKE can end the sleep in time.
    let mut rx = AsyncRingConsumer::with_timeout(rx, Duration::from_secs(30)).unwrap();
    let reader = tokio::spawn(async move {
        let v = rx.recv().await;
        (v, Instant::now(), rx)
    });
    let producer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        let at = Instant::now();
        tx.push(&42);
        (at, tx)
    });
    let (v, got_at, rx) = tokio::time::timeout(Duration::from_secs(10), reader)
        .await
        .expect("woken well before the 30 s futex timeout")
        .unwrap();
    let (pushed_at, _tx) = producer.join().unwrap();
    assert_eq!(v, 42);
    let latency = got_at.duration_since(pushed_at);
    assert!(latency < Duration::from_secs(2), "woken after {latency:?}");
    let s = rx.waiter_stats();
    assert!(s.sleeps >= 1, "the waiter slept on the ring: {s:?}");
    assert_eq!(s.timed_out, 0, "no sleep needed its timeout: {s:?}");
    assert_eq!(
        s.woken + s.changed,
        1,
        "one sleep, ended by the publish: {s:?}"
    );
}

/// 200,000 records through a small lossless ring: the producer waits for the reader, so
/// the reader drains, finds the ring empty and waits over and over.
async fn stress_200k(tag: &str) {
    let t = TmpRing::new(tag);
    let mut tx = RingProducer::<u64>::builder(64)
        .flow_control(FlowControl::LosslessBackpressure)
        .build::<u64, _>(&t.0)
        .unwrap();
    let rx = RingConsumer::<u64>::builder()
        .start_from_head()
        .consumer_name("async-stress")
        .attach(&t.0)
        .unwrap();
    // A 30 s futex timeout: a single lost wake-up would show as a timed-out sleep (and
    // stall the test past its bound).
    let mut rx = AsyncRingConsumer::with_timeout(rx, Duration::from_secs(30)).unwrap();
    const N: u64 = 200_000;
    let producer = std::thread::spawn(move || {
        for i in 0..N {
            tx.push(&i);
            if i % 2_000 == 0 {
                // An idle gap long enough for the reader's waiter to go to sleep.
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        tx
    });
    let reader = tokio::spawn(async move {
        for i in 0..N {
            let v = rx.recv().await;
            assert_eq!(v, i);
        }
        rx
    });
    let rx = tokio::time::timeout(Duration::from_secs(120), reader)
        .await
        .expect("200,000 records within the bound")
        .unwrap();
    let _tx = producer.join().unwrap();
    let mut rx = rx;
    assert_eq!(rx.lapped_count(), 0);
    assert_eq!(rx.try_recv(), None);
    let s = rx.waiter_stats();
    eprintln!("{tag}: waiter after {N} records: {s:?}");
    assert!(s.sleeps >= 20, "the reader slept in the idle gaps: {s:?}");
    assert_eq!(s.timed_out, 0, "every sleep ended by a publish: {s:?}");
}

#[tokio::test(flavor = "current_thread")]
async fn stress_200k_publishes_lose_nothing_and_no_wake_up() {
    stress_200k("stress-ct").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stress_200k_on_a_multi_thread_runtime() {
    stress_200k("stress-mt").await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_lapped_consumer_skips_to_the_oldest_retained_and_counts_the_loss() {
    let t = TmpRing::new("lapped");
    let mut tx = RingProducer::<u64>::create(&t.0, 8).unwrap();
    let rx = head_consumer(&t);
    let mut rx = AsyncRingConsumer::new(rx).unwrap();
    // Value i has sequence i + 1; 20 records overwrite the first 12 slots' contents.
    for i in 0..20u64 {
        tx.push(&i);
    }
    let (first, v) = tokio::time::timeout(BOUND, rx.recv_seq()).await.unwrap();
    assert!(first > 1, "the reader was lapped");
    assert_eq!(v, first - 1);
    assert_eq!(
        rx.lapped_count(),
        first - 1,
        "every skipped record is counted"
    );
    for seq in first + 1..=20 {
        assert_eq!(rx.recv_seq().await, (seq, seq - 1));
    }
    assert_eq!(rx.try_recv(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_async_consumers_of_one_ring_are_both_woken() {
    let t = TmpRing::new("two");
    let mut tx = RingProducer::<u64>::create(&t.0, 64).unwrap();
    let mut readers = Vec::new();
    for name in ["a", "b"] {
        let rx = RingConsumer::<u64>::builder()
            .start_from_head()
            .consumer_name(name)
            .attach(&t.0)
            .unwrap();
        let mut rx = AsyncRingConsumer::with_timeout(rx, Duration::from_secs(30)).unwrap();
        readers.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..3 {
                got.push(rx.recv().await);
            }
            got
        }));
    }
    let producer = std::thread::spawn(move || {
        for i in 0..3u64 {
            std::thread::sleep(Duration::from_millis(100));
            tx.push(&i);
        }
        tx
    });
    for r in readers {
        let got = tokio::time::timeout(Duration::from_secs(10), r)
            .await
            .expect("woken well before the 30 s futex timeout")
            .unwrap();
        assert_eq!(got, [0, 1, 2]);
    }
    let _tx = producer.join().unwrap();
}
