//! `AsyncRingConsumer` and `AsyncRingMultiplexer` (feature `tokio`) on a ring that always
//! has a record ready: every receive path takes part in tokio's cooperative budget, so a
//! task looping on it yields to the other tasks of its runtime now and then instead of
//! holding a current-thread runtime for as long as the producer keeps up.

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures_core::Stream;
use ringwire::{AsyncRingConsumer, AsyncRingMultiplexer, FlowControl, RingConsumer, RingProducer};

mod common;
use common::TmpRing;

/// Slots of the ring, and records the reader takes: the ring is full before the reader
/// starts and the producer is lossless, so none of these reads finds the ring empty (nor a
/// slot mid-write) however the threads are scheduled. Well above tokio's budget of 128.
const CAP: u64 = 1024;

/// Generous bound on every wait (a loaded machine), never a pass/fail criterion.
const BOUND: Duration = Duration::from_secs(30);

/// One async receive path of the API.
#[derive(Clone, Copy, Debug)]
enum Path {
    Recv,
    RecvSeq,
    RecvDetailed,
    RecvBatch,
    Stream,
    /// `AsyncRingMultiplexer::recv_any` over the one ring.
    RecvAny,
}

/// A consumer read through one `Path`. It sits in a multiplexer (its only channel) for
/// `RecvAny`, and is read directly (`consumer_mut(0)`) otherwise.
struct Reader {
    mux: AsyncRingMultiplexer<u64>,
    path: Path,
}

impl Reader {
    fn new(rx: AsyncRingConsumer<u64>, path: Path) -> Reader {
        let mut mux = AsyncRingMultiplexer::new();
        mux.add(rx);
        Reader { mux, path }
    }

    /// The next record through this reader's path.
    async fn next(&mut self) -> u64 {
        let rx = self.mux.consumer_mut(0).unwrap();
        match self.path {
            Path::Recv => rx.recv().await,
            Path::RecvSeq => rx.recv_seq().await.1,
            Path::RecvDetailed => {
                let (v, lost) = rx.recv_detailed().await;
                assert_eq!(lost, 0, "a lossless ring loses nothing");
                v
            }
            Path::RecvBatch => {
                let mut buf = [0u64; 1];
                assert_eq!(rx.recv_batch(&mut buf).await, 1);
                buf[0]
            }
            Path::Stream => {
                let mut rx = Pin::new(rx);
                poll_fn(|cx| rx.as_mut().poll_next(cx))
                    .await
                    .expect("the stream never ends")
            }
            Path::RecvAny => self.mux.recv_any().await.1,
        }
    }
}

/// A task spawned before a reader that loops over `CAP` records always ready gets to run
/// before that loop ends: the reader's task yields once tokio's budget is spent. Meanwhile
/// a producer thread keeps the lossless ring full (until the reader is done, at most
/// `10 * CAP` records, each push bounded by `BOUND`).
async fn a_busy_reader_lets_an_earlier_task_run(path: Path) {
    let t = TmpRing::new(&format!("coop-{path:?}"));
    let mut tx = RingProducer::<u64>::builder(CAP)
        .max_readers(2)
        .flow_control(FlowControl::LosslessBackpressure)
        .build::<u64, _>(&t.0)
        .unwrap();
    // Attached (and registered) before the fill, so the producer never overwrites its records.
    let rx = AsyncRingConsumer::new(RingConsumer::<u64>::attach(&t.0).unwrap()).unwrap();
    for i in 0..CAP {
        tx.push_timeout(&i, Duration::ZERO)
            .expect("the empty ring has room for CAP records");
    }
    let done = Arc::new(AtomicBool::new(false));
    let producer = std::thread::spawn({
        let done = Arc::clone(&done);
        move || {
            let end = Instant::now() + BOUND;
            let mut i = CAP;
            while !done.load(Ordering::Relaxed) && i < 10 * CAP && Instant::now() < end {
                if tx.push_timeout(&i, BOUND).is_err() {
                    break;
                }
                i += 1;
            }
            tx
        }
    });

    let other_ran = Arc::new(AtomicBool::new(false));
    let other = tokio::spawn({
        let other_ran = Arc::clone(&other_ran);
        async move {
            // Back of the queue: it runs again only when the reader's task gives way.
            tokio::task::yield_now().await;
            other_ran.store(true, Ordering::SeqCst);
        }
    });
    let reader = tokio::spawn({
        let other_ran = Arc::clone(&other_ran);
        async move {
            let mut rx = Reader::new(rx, path);
            let ran_before = other_ran.load(Ordering::SeqCst);
            let mut got = Vec::with_capacity(CAP as usize);
            // How many records the reader had when it first saw the other task's flag.
            let mut seen_after = None;
            for _ in 0..CAP {
                got.push(rx.next().await);
                if seen_after.is_none() && other_ran.load(Ordering::SeqCst) {
                    seen_after = Some(got.len());
                }
            }
            (ran_before, got, seen_after, rx)
        }
    });
    let read = tokio::time::timeout(BOUND, reader).await;
    done.store(true, Ordering::Relaxed);
    let (ran_before, got, seen_after, rx) = read.expect("CAP records within the bound").unwrap();
    // Dropped first: a producer waiting for room gives up when its reader's slot is freed.
    drop(rx);
    let _tx = producer.join().unwrap();
    tokio::time::timeout(BOUND, other)
        .await
        .expect("the other task ends")
        .unwrap();

    assert!(
        !ran_before,
        "{path:?}: the other task ran before the reader started"
    );
    assert_eq!(
        got,
        (0..CAP).collect::<Vec<u64>>(),
        "{path:?}: every record, in order"
    );
    let seen_after = seen_after.unwrap_or_else(|| {
        panic!("{path:?}: the task spawned first ran only after the reader's {CAP} records")
    });
    assert!(
        seen_after < CAP as usize,
        "{path:?}: ran after {seen_after} records"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn recv_on_a_busy_ring_lets_other_tasks_run() {
    a_busy_reader_lets_an_earlier_task_run(Path::Recv).await;
}

#[tokio::test(flavor = "current_thread")]
async fn recv_seq_on_a_busy_ring_lets_other_tasks_run() {
    a_busy_reader_lets_an_earlier_task_run(Path::RecvSeq).await;
}

#[tokio::test(flavor = "current_thread")]
async fn recv_detailed_on_a_busy_ring_lets_other_tasks_run() {
    a_busy_reader_lets_an_earlier_task_run(Path::RecvDetailed).await;
}

#[tokio::test(flavor = "current_thread")]
async fn recv_batch_on_a_busy_ring_lets_other_tasks_run() {
    a_busy_reader_lets_an_earlier_task_run(Path::RecvBatch).await;
}

#[tokio::test(flavor = "current_thread")]
async fn the_stream_on_a_busy_ring_lets_other_tasks_run() {
    a_busy_reader_lets_an_earlier_task_run(Path::Stream).await;
}

#[tokio::test(flavor = "current_thread")]
async fn recv_any_on_a_busy_ring_lets_other_tasks_run() {
    a_busy_reader_lets_an_earlier_task_run(Path::RecvAny).await;
}
