//! `AsyncRingConsumer` (feature `tokio`) at rest: an idle awaiting consumer uses ~no CPU, and
//! dropping it (or `into_inner`, or shutting down the runtime of the task that owns it) ends
//! its waiter thread at once. These tests count this process's threads and CPU time, so they
//! run one at a time in their own test binary.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use ringwire::async_consumer::WAITER_THREAD_NAME;
use ringwire::sys::process_cpu_time;
use ringwire::{AsyncRingConsumer, RingConsumer, RingProducer};

mod common;
use common::TmpRing;

/// Serialises the tests of this binary.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Threads of this process named like the async consumer's waiter.
fn waiter_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .filter(|c| c.trim_end() == WAITER_THREAD_NAME)
        .count()
}

/// Waits (at most 10 s) until [`waiter_threads`] is `n`: a new thread names itself after it
/// starts, and an exiting one leaves `/proc` a moment after `join` returned (the rest of its
/// exit, which on a loaded machine waits for a core like any other work).
fn assert_waiter_threads(n: usize) {
    let t0 = Instant::now();
    loop {
        let now = waiter_threads();
        if now == n {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{now} waiter threads, expected {n}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

#[test]
fn an_idle_awaiting_consumer_uses_almost_no_cpu() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let t = TmpRing::new("cpu");
    let _tx = RingProducer::<u64>::create(&t.0, 64).unwrap();
    // The default 50 ms futex timeout: the waiter wakes ~6 times in 300 ms.
    let mut rx = AsyncRingConsumer::new(RingConsumer::<u64>::attach(&t.0).unwrap()).unwrap();
    let rt = runtime();
    let idle = Duration::from_millis(300);
    let (cpu, wall) = rt.block_on(async {
        // Let the waiter reach its first sleep before measuring.
        let _ = tokio::time::timeout(Duration::from_millis(20), rx.recv()).await;
        let cpu0 = process_cpu_time();
        let t0 = Instant::now();
        let r = tokio::time::timeout(idle, rx.recv()).await;
        assert!(r.is_err(), "nothing was published");
        (process_cpu_time() - cpu0, t0.elapsed())
    });
    let share = cpu.as_secs_f64() / wall.as_secs_f64();
    let s = rx.waiter_stats();
    eprintln!(
        "idle {wall:?}: process CPU {cpu:?} = {:.2} % of one core; waiter {s:?}",
        share * 100.0
    );
    assert!(s.sleeps >= 2, "the waiter slept on the futex: {s:?}");
    assert!(
        share < 0.05,
        "idle consumer used {:.2} % CPU",
        share * 100.0
    );
}

#[test]
fn dropping_a_waiting_consumer_ends_its_waiter_promptly() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let t = TmpRing::new("drop");
    let _tx = RingProducer::<u64>::create(&t.0, 64).unwrap();
    let before = waiter_threads();
    // A 30 s futex timeout: the drop must not wait for it.
    let mut rx = AsyncRingConsumer::with_timeout(
        RingConsumer::<u64>::attach(&t.0).unwrap(),
        Duration::from_secs(30),
    )
    .unwrap();
    assert_waiter_threads(before + 1);
    let rt = runtime();
    rt.block_on(async {
        // Leaves the waiter armed and asleep on the ring's futex.
        let r = tokio::time::timeout(Duration::from_millis(200), rx.recv()).await;
        assert!(r.is_err());
    });
    assert_eq!(rx.waiter_stats().sleeps, 0, "still in its first sleep");
    let t0 = Instant::now();
    drop(rx);
    let took = t0.elapsed();
    eprintln!("drop of a consumer whose waiter slept took {took:?}");
    assert!(took < Duration::from_secs(1), "drop took {took:?}");
    assert_waiter_threads(before);

    // A consumer never polled (its waiter on the condition variable) drops as promptly.
    let rx = AsyncRingConsumer::with_timeout(
        RingConsumer::<u64>::attach(&t.0).unwrap(),
        Duration::from_secs(30),
    )
    .unwrap();
    assert_waiter_threads(before + 1);
    let t0 = Instant::now();
    drop(rx);
    assert!(t0.elapsed() < Duration::from_secs(1));
    assert_waiter_threads(before);
}

#[test]
fn into_inner_ends_the_waiter_and_returns_a_working_consumer() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let t = TmpRing::new("inner");
    let mut tx = RingProducer::<u64>::create(&t.0, 64).unwrap();
    let before = waiter_threads();
    let mut rx = AsyncRingConsumer::new(
        RingConsumer::<u64>::builder()
            .start_from_head()
            .attach(&t.0)
            .unwrap(),
    )
    .unwrap();
    tx.push(&1);
    let rt = runtime();
    assert_eq!(rt.block_on(rx.recv()), 1);
    rt.block_on(async {
        let r = tokio::time::timeout(Duration::from_millis(100), rx.recv()).await;
        assert!(r.is_err());
    });
    let mut inner = rx.into_inner();
    assert_waiter_threads(before);
    tx.push(&2);
    assert_eq!(inner.try_recv(), Some(2));
}

/// A runtime shut down while a task that owns a consumer waits in `recv()` drops the task,
/// and with it the consumer: the runtime's drop returns and the waiter thread ends, on a
/// current-thread runtime and on a multi-thread one.
#[test]
fn a_runtime_shut_down_while_its_task_waits_ends_the_waiter() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::task::Poll;

    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let t = TmpRing::new("shutdown");
    let _tx = RingProducer::<u64>::create(&t.0, 64).unwrap();
    let before = waiter_threads();
    for multi_thread in [false, true] {
        let rt = if multi_thread {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_time()
                .build()
                .unwrap()
        } else {
            runtime()
        };
        // A 30 s futex timeout: the drop must not wait for it.
        let mut rx = AsyncRingConsumer::with_timeout(
            RingConsumer::<u64>::attach(&t.0).unwrap(),
            Duration::from_secs(30),
        )
        .unwrap();
        let waiting = Arc::new(AtomicBool::new(false));
        let task_waiting = Arc::clone(&waiting);
        rt.spawn(async move {
            // The first poll registers the task's waker with the waiter thread.
            let first = std::future::poll_fn(|cx| Poll::Ready(rx.poll_recv(cx))).await;
            assert!(first.is_pending(), "nothing was published");
            task_waiting.store(true, Ordering::SeqCst);
            rx.recv().await
        });
        rt.block_on(async {
            let t0 = Instant::now();
            while !waiting.load(Ordering::SeqCst) {
                assert!(t0.elapsed() < Duration::from_secs(30), "the task never ran");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        assert_waiter_threads(before + 1);
        // Dropped on a thread of its own, so that a hang fails the test instead of stalling it.
        let (done, dropped) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            drop(rt);
            let _ = done.send(());
        });
        dropped
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("the runtime's drop hung (multi-thread: {multi_thread})"));
        assert_waiter_threads(before);
    }
}
