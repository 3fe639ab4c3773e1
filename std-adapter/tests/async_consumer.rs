//! `AsyncRingConsumer` (feature `tokio`): order through `recv().await` and through the
//! `Stream`, a wake-up from another thread, and a lossless stress that must never lose a
//! wake-up.

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use futures_core::Stream;
use ringwire::{AsyncRingConsumer, FlowControl, RecvStatus, RingConsumer, RingProducer};

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

/// A waker that counts its wake-ups.
#[derive(Default)]
struct CountWakes(AtomicUsize);

impl Wake for CountWakes {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl CountWakes {
    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }

    /// Waits (at most 10 s) until the count reaches `n`.
    fn wait_for(&self, n: usize) {
        let t0 = Instant::now();
        while self.count() < n {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "wake {n} never came"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

#[test]
fn empty_polls_yield_to_the_executor_before_one_arms_the_waiter() {
    let t = TmpRing::new("yields");
    let mut tx = RingProducer::<u64>::create(&t.0, 64).unwrap();
    let mut rx = AsyncRingConsumer::new(head_consumer(&t))
        .unwrap()
        .with_spins(100)
        .with_yields(3);
    let wakes = Arc::new(CountWakes::default());
    let waker = Waker::from(Arc::clone(&wakes));
    let mut cx = Context::from_waker(&waker);
    for k in 1..=3 {
        assert_eq!(rx.poll_recv(&mut cx), Poll::Pending);
        assert_eq!(
            wakes.count(),
            k,
            "empty poll {k} asks to be polled again at once"
        );
    }
    // The fourth arms the waiter thread: no wake until a record comes.
    assert_eq!(rx.poll_recv(&mut cx), Poll::Pending);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(wakes.count(), 3);
    tx.push(&7);
    wakes.wait_for(4);
    assert_eq!(rx.poll_recv(&mut cx), Poll::Ready(7));
    // The record starts the count again.
    assert_eq!(rx.poll_recv(&mut cx), Poll::Pending);
    assert_eq!(wakes.count(), 5);

    // By default the first empty poll arms the waiter.
    let mut rx = AsyncRingConsumer::new(head_consumer(&t)).unwrap();
    let wakes = Arc::new(CountWakes::default());
    let waker = Waker::from(Arc::clone(&wakes));
    let mut cx = Context::from_waker(&waker);
    assert_eq!(rx.poll_recv(&mut cx), Poll::Pending);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(wakes.count(), 0);
    tx.push(&8);
    wakes.wait_for(1);
    assert_eq!(rx.poll_recv(&mut cx), Poll::Ready(8));
}

#[tokio::test(flavor = "current_thread")]
async fn records_arrive_through_yields_alone_without_a_futex_sleep() {
    let t = TmpRing::new("yield-only");
    let mut tx = RingProducer::<u64>::create(&t.0, 64).unwrap();
    let mut rx = AsyncRingConsumer::new(head_consumer(&t))
        .unwrap()
        .with_yields(u32::MAX);
    let producer = std::thread::spawn(move || {
        for i in 0..20u64 {
            std::thread::sleep(Duration::from_millis(1));
            tx.push(&i);
        }
        tx
    });
    tokio::time::timeout(BOUND, async {
        for i in 0..20u64 {
            assert_eq!(rx.recv().await, i);
        }
    })
    .await
    .expect("every record arrives");
    let _tx = producer.join().unwrap();
    assert_eq!(rx.waiter_stats().sleeps, 0, "the waiter was never armed");
}

#[tokio::test(flavor = "current_thread")]
async fn recv_batch_waits_for_the_first_record_and_takes_what_is_there() {
    let t = TmpRing::new("batch");
    let mut tx = RingProducer::<u64>::create(&t.0, 64).unwrap();
    let mut rx = AsyncRingConsumer::new(head_consumer(&t)).unwrap();
    assert_eq!(rx.capacity(), 64);
    for i in 0..6u64 {
        tx.push(&i);
    }
    let mut buf = [0u64; 4];
    assert_eq!(rx.recv_batch(&mut []).await, 0);
    assert_eq!(rx.recv_batch(&mut buf).await, 4);
    assert_eq!(buf, [0, 1, 2, 3]);
    assert_eq!(rx.recv_batch(&mut buf).await, 2);
    assert_eq!(buf[..2], [4, 5]);
    let producer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        tx.push_batch(&[6, 7, 8]);
        tx
    });
    let mut got = Vec::new();
    tokio::time::timeout(BOUND, async {
        while got.len() < 3 {
            let n = rx.recv_batch(&mut buf).await;
            assert!(n > 0);
            got.extend_from_slice(&buf[..n]);
        }
    })
    .await
    .expect("the late batch arrives");
    assert_eq!(got, [6, 7, 8]);
    let _tx = producer.join().unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn recv_detailed_reports_each_loss_and_jumps_skip_the_backlog() {
    let t = TmpRing::new("detailed");
    let mut tx = RingProducer::<u64>::create(&t.0, 8).unwrap();
    let mut rx = AsyncRingConsumer::new(head_consumer(&t)).unwrap();
    assert_eq!(rx.recv_status(), RecvStatus::Empty);
    // Value i has sequence i + 1. 20 records in 8 slots: sequences 1..=12 are gone.
    for i in 0..20u64 {
        tx.push(&i);
    }
    assert_eq!(rx.lag(), 20);
    let (v, skipped) = tokio::time::timeout(BOUND, rx.recv_detailed())
        .await
        .unwrap();
    assert_eq!((v, skipped), (12, 12), "the oldest retained, after 12 lost");
    assert_eq!(rx.recv_detailed().await, (13, 0));
    assert_eq!(rx.recv_status(), RecvStatus::Ok(14));
    assert_eq!(rx.lag(), 5);
    // Sequence 16 onwards is there; the newest is 20.
    assert_eq!(rx.jump_to_oldest(), 0, "16 is still retained");
    assert_eq!(rx.jump_to_latest(), 4);
    assert_eq!(rx.recv_detailed().await, (19, 0));
    assert_eq!(rx.lapped_count(), 16);
    for i in 20..40u64 {
        tx.push(&i);
    }
    assert_eq!(
        rx.jump_to_oldest(),
        12,
        "sequences 21..=32 were overwritten"
    );
    assert_eq!(rx.recv_detailed().await, (32, 0));
    assert_eq!(rx.lapped_count(), 28);
}
