//! `RingMultiplexer` and `AsyncRingMultiplexer`: order of service (round robin, priority,
//! batches), names and indices, attach errors, laps, and for the async one its wake-ups,
//! its idle cost and cancel-safety. Where the result is observable, ringfire 0.5.2's
//! multiplexer reads the same rings through the same calls and must return the same.
//!
//! The idle test measures this process's CPU time, so every test here takes [`serial`].

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use ringwire::sys::process_cpu_time;
use ringwire::{AsyncRingConsumer, AsyncRingMultiplexer, RingConsumer, RingMultiplexer};
use ringwire::{Error, RingProducer};
use ringwire_tests::shm::ShmPath;

// Serialises the tests of this binary (the idle test counts process CPU time).
use ringwire_tests::one_at_a_time as serial;

/// `n` fresh rings of `capacity` u64 records, with their producers.
fn rings(tag: &str, n: usize, capacity: u64) -> (Vec<ShmPath>, Vec<RingProducer<u64>>) {
    let paths: Vec<ShmPath> = (0..n).map(|_| ShmPath::new(tag)).collect();
    let producers = paths
        .iter()
        .map(|p| RingProducer::<u64>::create(p, capacity).unwrap())
        .collect();
    (paths, producers)
}

/// Our multiplexer and ringfire's over the same rings (each with its own consumers).
fn both(paths: &[ShmPath]) -> (RingMultiplexer<u64>, ringfire::RingMultiplexer<u64>) {
    let mut ours = RingMultiplexer::new();
    let mut theirs = ringfire::RingMultiplexer::new();
    for p in paths {
        ours.attach(p).unwrap();
        theirs.attach(p.path()).unwrap();
    }
    (ours, theirs)
}

/// Record `i` of channel `ch`.
fn rec(ch: usize, i: u64) -> u64 {
    ch as u64 * 1000 + i
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

#[test]
fn round_robin_serves_one_record_per_channel_per_turn() {
    let _s = serial();
    let (paths, mut tx) = rings("mux-rr", 3, 64);
    let (mut ours, mut theirs) = both(&paths);
    // Backlogs of 3, 1 and 2 records.
    for (ch, n) in [(0, 3), (1, 1), (2, 2)] {
        for i in 1..=n {
            tx[ch].push(&rec(ch, i));
        }
    }
    let want = [
        (0, rec(0, 1)),
        (1, rec(1, 1)),
        (2, rec(2, 1)),
        (0, rec(0, 2)),
        (2, rec(2, 2)),
        (0, rec(0, 3)),
    ];
    for &w in &want {
        assert_eq!(ours.try_recv_any(), Some(w));
        assert_eq!(theirs.try_recv_any(), Some(w));
    }
    assert_eq!(ours.try_recv_any(), None);
    assert_eq!(theirs.try_recv_any(), None);

    // The turn passed to channel 1 (after channel 0's last record): a record on channel 0
    // waits behind records on 1 and 2.
    tx[0].push(&rec(0, 4));
    tx[2].push(&rec(2, 3));
    tx[1].push(&rec(1, 2));
    for w in [(1, rec(1, 2)), (2, rec(2, 3)), (0, rec(0, 4))] {
        assert_eq!(ours.try_recv_any(), Some(w));
        assert_eq!(theirs.try_recv_any(), Some(w));
    }
}

#[test]
fn the_turn_is_taken_modulo_the_channel_count_at_the_receive() {
    let _s = serial();
    let (paths, mut tx) = rings("mux-grow", 3, 64);
    let mut ours = RingMultiplexer::new();
    let mut theirs = ringfire::RingMultiplexer::new();
    for p in &paths[..2] {
        ours.attach(p).unwrap();
        theirs.attach(p.path()).unwrap();
    }
    tx[1].push(&rec(1, 1));
    assert_eq!(ours.try_recv_any(), Some((1, rec(1, 1))));
    assert_eq!(theirs.try_recv_any(), Some((1, rec(1, 1))));
    // Channel 1 was the last of two: the next turn starts at channel 0, and stays there
    // after a third channel is added.
    assert_eq!(ours.attach(&paths[2]).unwrap(), 2);
    assert_eq!(theirs.attach(paths[2].path()).unwrap(), 2);
    tx[2].push(&rec(2, 1));
    tx[0].push(&rec(0, 1));
    for w in [(0, rec(0, 1)), (2, rec(2, 1))] {
        assert_eq!(ours.try_recv_any(), Some(w));
        assert_eq!(theirs.try_recv_any(), Some(w));
    }
}

#[test]
fn priority_always_drains_the_lowest_index_first() {
    let _s = serial();
    let (paths, mut tx) = rings("mux-prio", 3, 64);
    let (mut ours, mut theirs) = both(&paths);
    for ch in [2, 1, 0] {
        for i in 1..=2 {
            tx[ch].push(&rec(ch, i));
        }
    }
    assert_eq!(ours.try_recv_priority(), Some((0, rec(0, 1))));
    assert_eq!(theirs.try_recv_priority(), Some((0, rec(0, 1))));
    assert_eq!(ours.try_recv_priority(), Some((0, rec(0, 2))));
    assert_eq!(theirs.try_recv_priority(), Some((0, rec(0, 2))));
    assert_eq!(ours.try_recv_priority(), Some((1, rec(1, 1))));
    assert_eq!(theirs.try_recv_priority(), Some((1, rec(1, 1))));
    // A new record on channel 0 goes before the rest of channel 1.
    tx[0].push(&rec(0, 3));
    for w in [
        (0, rec(0, 3)),
        (1, rec(1, 2)),
        (2, rec(2, 1)),
        (2, rec(2, 2)),
    ] {
        assert_eq!(ours.try_recv_priority(), Some(w));
        assert_eq!(theirs.try_recv_priority(), Some(w));
    }
    assert_eq!(ours.try_recv_priority(), None);
    assert_eq!(theirs.try_recv_priority(), None);

    // Priority receives leave the round-robin turn where it was (at channel 0 here).
    tx[0].push(&rec(0, 4));
    tx[1].push(&rec(1, 3));
    assert_eq!(ours.try_recv_any(), Some((0, rec(0, 4))));
    assert_eq!(theirs.try_recv_any(), Some((0, rec(0, 4))));
    tx[2].push(&rec(2, 3));
    tx[2].push(&rec(2, 4));
    // The turn is at channel 1 now; priority still takes channel 1 then 2, and does not
    // move the turn past them.
    assert_eq!(ours.try_recv_priority(), Some((1, rec(1, 3))));
    assert_eq!(theirs.try_recv_priority(), Some((1, rec(1, 3))));
    tx[0].push(&rec(0, 5));
    assert_eq!(ours.try_recv_any(), Some((2, rec(2, 3))));
    assert_eq!(theirs.try_recv_any(), Some((2, rec(2, 3))));
}

#[test]
fn recv_batch_any_interleaves_the_channels_in_turn() {
    let _s = serial();
    let (paths, mut tx) = rings("mux-batch", 3, 64);
    let (mut ours, mut theirs) = both(&paths);
    for (ch, n) in [(0, 4), (1, 1), (2, 2)] {
        for i in 1..=n {
            tx[ch].push(&rec(ch, i));
        }
    }
    assert!(ours.recv_batch_any(0).is_empty());
    assert!(theirs.recv_batch_any(0).is_empty());
    let first = vec![
        (0, rec(0, 1)),
        (1, rec(1, 1)),
        (2, rec(2, 1)),
        (0, rec(0, 2)),
    ];
    assert_eq!(ours.recv_batch_any(4), first);
    assert_eq!(theirs.recv_batch_any(4), first);
    // More asked than there is: all of it, in turn (channel 2 then 0 twice).
    let rest = vec![(2, rec(2, 2)), (0, rec(0, 3)), (0, rec(0, 4))];
    assert_eq!(ours.recv_batch_any(100), rest);
    assert_eq!(theirs.recv_batch_any(100), rest);
    assert!(ours.recv_batch_any(100).is_empty());
    assert!(theirs.recv_batch_any(100).is_empty());
}

#[test]
fn channels_are_numbered_in_order_and_named() {
    let _s = serial();
    let (paths, mut tx) = rings("mux-names", 4, 64);
    let mut mux = RingMultiplexer::<u64>::default();
    assert!(mux.is_empty());
    assert_eq!(mux.len(), 0);
    assert_eq!(mux.try_recv_any(), None);
    assert_eq!(mux.try_recv_priority(), None);
    assert!(mux.recv_batch_any(8).is_empty());
    assert_eq!(mux.channel_name(0), None);
    assert!(mux.consumer(0).is_none() && mux.consumer_mut(0).is_none());

    assert_eq!(mux.add(RingConsumer::attach(&paths[0]).unwrap()), 0);
    assert_eq!(
        mux.add_named(
            "book-b".to_string(),
            RingConsumer::attach(&paths[1]).unwrap()
        ),
        1
    );
    assert_eq!(mux.attach(&paths[2]).unwrap(), 2);
    assert_eq!(mux.attach_named("book-d", &paths[3]).unwrap(), 3);
    assert_eq!(mux.len(), 4);
    assert!(!mux.is_empty());
    let names: Vec<_> = (0..5)
        .map(|i| mux.channel_name(i).map(String::from))
        .collect();
    assert_eq!(
        names,
        [
            Some("channel_0".to_string()),
            Some("book-b".to_string()),
            Some("channel_2".to_string()),
            Some("book-d".to_string()),
            None
        ]
    );
    // Each index is the consumer of the ring it was added with.
    tx[3].push(&7);
    assert_eq!(mux.consumer(3).unwrap().lag(), 1);
    assert_eq!(mux.consumer_mut(3).unwrap().try_recv(), Some(7));
    assert!(mux.consumer(4).is_none());
    assert_eq!(mux.try_recv_any(), None);

    // ringfire names the same.
    let mut theirs = ringfire::RingMultiplexer::<u64>::default();
    theirs.attach(paths[0].path()).unwrap();
    theirs.attach_named("book-b", paths[1].path()).unwrap();
    theirs.attach(paths[2].path()).unwrap();
    theirs.attach_named("book-d", paths[3].path()).unwrap();
    let their_names: Vec<_> = (0..5)
        .map(|i| theirs.channel_name(i).map(String::from))
        .collect();
    assert_eq!(their_names, names);
}

#[test]
fn attach_errors_are_typed_and_add_no_channel() {
    let _s = serial();
    let (paths, _tx) = rings("mux-err", 1, 64);
    let missing = ShmPath::new("mux-missing");
    let mut mux = RingMultiplexer::<u64>::new();
    mux.attach(&paths[0]).unwrap();

    let err = mux.attach(&missing).unwrap_err();
    assert!(
        matches!(&err, Error::Io { path, op: "open", source }
            if path == missing.path() && source.kind() == std::io::ErrorKind::NotFound),
        "{err:?}"
    );
    assert!(
        err.to_string().contains(&*missing.path().to_string_lossy()),
        "{err}"
    );
    let err = mux.attach_named("gone", &missing).unwrap_err();
    assert!(matches!(&err, Error::Io { path, .. } if path == missing.path()));
    assert_eq!(mux.len(), 1);
    assert_eq!(mux.channel_name(1), None);

    // A ring of another record type is refused as RingConsumer::attach refuses it.
    let mut wide = RingMultiplexer::<[u64; 4]>::new();
    let err = wide.attach(&paths[0]).unwrap_err();
    assert!(
        matches!(&err, Error::Attach { path, .. } if path == paths[0].path()),
        "{err:?}"
    );
    assert!(wide.is_empty());

    // The async one reports the same.
    let mut amux = AsyncRingMultiplexer::<u64>::new();
    let err = amux.attach_named("gone", &missing).unwrap_err();
    assert!(
        matches!(&err, Error::Io { path, source, .. }
            if path == missing.path() && source.kind() == std::io::ErrorKind::NotFound),
        "{err:?}"
    );
    assert!(amux.is_empty());
    assert!(
        std::fs::metadata(missing.path()).is_err(),
        "attach created no file"
    );
}

#[test]
fn a_lapped_channel_counts_in_its_own_consumer() {
    let _s = serial();
    let (paths, mut tx) = rings("mux-lap", 2, 8);
    let (mut ours, mut theirs) = both(&paths);
    for i in 1..=20 {
        tx[1].push(&rec(1, i));
    }
    tx[0].push(&rec(0, 1));
    // Channel 1's first 12 records were overwritten: it resumes at 13.
    for w in [(0, rec(0, 1)), (1, rec(1, 13))] {
        assert_eq!(ours.try_recv_any(), Some(w));
        assert_eq!(theirs.try_recv_any(), Some(w));
    }
    for (i, want) in [(0, 0), (1, 12)] {
        assert_eq!(
            ours.consumer(i).unwrap().lapped_count(),
            want,
            "channel {i}"
        );
        assert_eq!(
            theirs.consumer(i).unwrap().lapped_count(),
            want,
            "channel {i}"
        );
    }
    let rest: Vec<_> = (14..=20).map(|i| (1, rec(1, i))).collect();
    assert_eq!(ours.recv_batch_any(100), rest);
    assert_eq!(theirs.recv_batch_any(100), rest);
}

/// xorshift64*: a reproducible op sequence per seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

#[test]
fn random_op_sequences_give_ringfires_results() {
    let _s = serial();
    for seed in 1..=40u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        // Up to 5 rings of 8 slots (so laps happen); two attached now, the rest later.
        let (paths, mut tx) = rings("mux-ops", 5, 8);
        let (mut ours, mut theirs) = both(&paths[..2]);
        let mut next = [1u64; 5];
        for step in 0..400 {
            let at = format!("seed {seed} step {step}");
            match rng.below(10) {
                0..=3 => {
                    let ch = rng.below(5) as usize;
                    for _ in 0..=rng.below(4) {
                        tx[ch].push(&rec(ch, next[ch]));
                        next[ch] += 1;
                    }
                }
                4 | 5 => assert_eq!(ours.try_recv_any(), theirs.try_recv_any(), "{at}"),
                6 => assert_eq!(ours.try_recv_priority(), theirs.try_recv_priority(), "{at}"),
                7 | 8 => {
                    let m = rng.below(12) as usize;
                    assert_eq!(ours.recv_batch_any(m), theirs.recv_batch_any(m), "{at}");
                }
                _ if ours.len() < 5 => {
                    let p = &paths[ours.len()];
                    assert_eq!(ours.attach(p).unwrap(), theirs.attach(p.path()).unwrap());
                }
                _ => {}
            }
            for i in 0..ours.len() {
                let (a, b) = (ours.consumer(i).unwrap(), theirs.consumer(i).unwrap());
                assert_eq!(a.lapped_count(), b.lapped_count(), "{at} channel {i}");
                assert_eq!(a.cursor(), b.cursor(), "{at} channel {i}");
            }
        }
        assert_eq!(
            ours.recv_batch_any(usize::MAX),
            theirs.recv_batch_any(10_000)
        );
    }
}

/// An async multiplexer over `paths`, each consumer's futex sleeps bounded by `idle`.
fn async_mux(paths: &[ShmPath], idle: Duration) -> AsyncRingMultiplexer<u64> {
    let mut mux = AsyncRingMultiplexer::new();
    for (i, p) in paths.iter().enumerate() {
        let c = AsyncRingConsumer::attach(p).unwrap().with_idle_sleep(idle);
        assert_eq!(mux.add_named(format!("book-{i}"), c), i);
    }
    mux
}

#[test]
fn recv_any_wakes_on_a_publish_to_any_one_channel() {
    let _s = serial();
    let (paths, tx) = rings("mux-wake", 4, 64);
    // A 30 s futex timeout: a wake-up that came only from a timeout would fail the test.
    let mut mux = async_mux(&paths, Duration::from_secs(30));
    let rt = runtime();
    for (round, mut producer) in tx.into_iter().enumerate().rev() {
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            producer.push(&rec(round, 1));
            producer
        });
        let t0 = Instant::now();
        let got = rt
            .block_on(async { tokio::time::timeout(Duration::from_secs(10), mux.recv_any()).await })
            .unwrap_or_else(|_| panic!("no wake-up for a publish on channel {round}"));
        // A timed-out `timeout` still polls the future once and would find the record:
        // the time taken tells a wake-up from the timeout.
        let took = t0.elapsed();
        assert_eq!(got, (round, rec(round, 1)));
        assert!(took >= Duration::from_millis(40), "it waited: {took:?}");
        assert!(
            took < Duration::from_secs(5),
            "woken late ({took:?}) by a publish on channel {round}"
        );
        drop(late.join().unwrap());
    }
}

#[test]
fn an_async_multiplexer_serves_in_turn_as_the_sync_one() {
    let _s = serial();
    let (paths, mut tx) = rings("mux-async-rr", 3, 64);
    let mut mux = async_mux(&paths, Duration::from_millis(50));
    let mut theirs = ringfire::AsyncRingMultiplexer::<u64>::new();
    for (i, p) in paths.iter().enumerate() {
        theirs.attach_named(format!("book-{i}"), p.path()).unwrap();
    }
    for i in 0..3 {
        assert_eq!(mux.channel_name(i), theirs.channel_name(i));
    }
    assert_eq!(mux.len(), theirs.len());
    for (ch, n) in [(0, 3), (1, 1), (2, 2)] {
        for i in 1..=n {
            tx[ch].push(&rec(ch, i));
        }
    }
    let rt = runtime();
    rt.block_on(async {
        // recv_any and try_recv_any share the turn, on both crates.
        assert_eq!(mux.recv_any().await, theirs.recv_any().await);
        assert_eq!(mux.try_recv_any(), theirs.try_recv_any());
        for _ in 0..4 {
            assert_eq!(mux.recv_any().await, theirs.recv_any().await);
        }
        assert_eq!(mux.try_recv_any(), None);
        assert_eq!(theirs.try_recv_any(), None);
    });
    // The extras (not in ringfire's async multiplexer) behave as the sync one's.
    tx[2].push(&rec(2, 3));
    tx[0].push(&rec(0, 4));
    tx[0].push(&rec(0, 5));
    assert_eq!(mux.try_recv_priority(), Some((0, rec(0, 4))));
    assert_eq!(
        mux.recv_batch_any(10),
        [(2, rec(2, 3)), (0, rec(0, 5))],
        "the turn was at channel 1"
    );
    assert_eq!(mux.consumer(2).unwrap().cursor(), 4);
    assert!(mux.consumer(3).is_none() && mux.consumer_mut(3).is_none());
}

#[test]
fn records_at_hand_arm_no_waiter() {
    let _s = serial();
    let (paths, mut tx) = rings("mux-busy", 3, 256);
    let mut mux = async_mux(&paths, Duration::from_millis(5));
    for i in 1..=100 {
        tx[2].push(&rec(2, i));
    }
    let rt = runtime();
    rt.block_on(async {
        for i in 1..=100 {
            assert_eq!(mux.recv_any().await, (2, rec(2, i)));
        }
    });
    // Give an armed waiter time for several 5 ms sleeps: none was armed.
    std::thread::sleep(Duration::from_millis(50));
    for i in 0..3 {
        let s = mux.consumer(i).unwrap().waiter_stats();
        assert_eq!(s.sleeps, 0, "channel {i}'s waiter slept on its ring: {s:?}");
    }
}

/// Counts the polls of the future it wraps.
async fn counting<F: Future>(polls: &mut u32, f: F) -> F::Output {
    let mut f = pin!(f);
    poll_fn(|cx| {
        *polls += 1;
        f.as_mut().poll(cx)
    })
    .await
}

#[test]
fn an_idle_multiplexer_sleeps_instead_of_polling() {
    let _s = serial();
    let (paths, _tx) = rings("mux-idle", 4, 64);
    let mut mux = async_mux(&paths, Duration::from_millis(20));
    let rt = runtime();
    // Let the waiters reach their first sleep before measuring.
    rt.block_on(async {
        let r = tokio::time::timeout(Duration::from_millis(20), mux.recv_any()).await;
        assert!(r.is_err(), "nothing was published");
    });
    let before: Vec<_> = (0..4)
        .map(|i| mux.consumer(i).unwrap().waiter_stats().sleeps)
        .collect();
    let idle = Duration::from_millis(400);
    let mut polls = 0;
    let cpu0 = process_cpu_time();
    let t0 = Instant::now();
    rt.block_on(async {
        let r = tokio::time::timeout(idle, counting(&mut polls, mux.recv_any())).await;
        assert!(r.is_err(), "nothing was published");
    });
    let (cpu, wall) = (process_cpu_time() - cpu0, t0.elapsed());
    let share = cpu.as_secs_f64() / wall.as_secs_f64();
    let sleeps: Vec<_> = (0..4)
        .map(|i| mux.consumer(i).unwrap().waiter_stats().sleeps - before[i])
        .collect();
    eprintln!(
        "idle {wall:?}: {polls} polls, process CPU {cpu:?} = {:.2} % of one core, \
         futex sleeps per channel {sleeps:?}",
        share * 100.0
    );
    // One poll to start, one when the timeout fires: no wake-up in between.
    assert!(polls <= 3, "an idle recv_any was polled {polls} times");
    // Every channel's waiter was armed and asleep on its ring (20 ms sleeps, 400 ms).
    for (i, s) in sleeps.iter().enumerate() {
        assert!(*s >= 2, "channel {i}'s waiter slept {s} times");
    }
    assert!(
        share < 0.10,
        "idle multiplexer used {:.2} % CPU",
        share * 100.0
    );
}

#[test]
fn an_empty_async_multiplexer_never_completes() {
    let _s = serial();
    let mut mux = AsyncRingMultiplexer::<u64>::default();
    assert!(mux.is_empty() && mux.channel_name(0).is_none());
    assert_eq!(mux.len(), 0);
    assert_eq!(mux.try_recv_any(), None);
    let mut polls = 0;
    let r = runtime().block_on(async {
        tokio::time::timeout(
            Duration::from_millis(50),
            counting(&mut polls, mux.recv_any()),
        )
        .await
    });
    assert!(r.is_err());
    assert!(polls <= 2, "polled {polls} times");
}

#[test]
fn a_dropped_recv_any_loses_no_record() {
    let _s = serial();
    let (paths, mut tx) = rings("mux-cancel", 3, 64);
    let mut mux = async_mux(&paths, Duration::from_secs(30));
    let rt = runtime();
    rt.block_on(async {
        // Timed out while pending, then a record comes: the next call gets it.
        let r = tokio::time::timeout(Duration::from_millis(30), mux.recv_any()).await;
        assert!(r.is_err());
        tx[1].push(&rec(1, 1));
        let got = tokio::time::timeout(Duration::from_secs(10), mux.recv_any()).await;
        assert_eq!(
            got.expect("the record after a cancelled wait"),
            (1, rec(1, 1))
        );

        // Published while a future is pending (its task woken), the future dropped
        // unpolled: the record stays for the next call.
        {
            let mut fut = pin!(mux.recv_any());
            poll_fn(|cx| {
                assert!(fut.as_mut().poll(cx).is_pending());
                Poll::Ready(())
            })
            .await;
            tx[2].push(&rec(2, 1));
            tx[0].push(&rec(0, 1));
        }
        let got = tokio::time::timeout(Duration::from_secs(10), mux.recv_any()).await;
        assert_eq!(got.unwrap(), (2, rec(2, 1)), "the turn was at channel 2");
        assert_eq!(mux.recv_any().await, (0, rec(0, 1)));
    });
}

#[test]
fn a_channel_whose_ring_is_removed_or_replaced_reads_as_ringfires() {
    let _s = serial();
    let (paths, mut tx) = rings("mux-replaced", 2, 64);
    let (mut ours, mut theirs) = both(&paths);
    tx[0].push(&rec(0, 1));
    tx[0].push(&rec(0, 2));
    tx[1].push(&rec(1, 1));
    // The producer of channel 0 goes, and its drop removes the file: what it published
    // is still read, from the mapping both consumers hold.
    drop(tx.remove(0));
    assert!(
        std::fs::metadata(paths[0].path()).is_err(),
        "the ring was removed"
    );
    assert!(ours.consumer(0).unwrap().is_replaced());
    for w in [(0, rec(0, 1)), (1, rec(1, 1)), (0, rec(0, 2))] {
        assert_eq!(ours.try_recv_any(), Some(w));
        assert_eq!(theirs.try_recv_any(), Some(w));
    }
    // A restarted producer's new ring at the same path: neither multiplexer follows it on
    // its own (the channel reads its old ring, which never advances again).
    let mut restarted = RingProducer::<u64>::create(&paths[0], 64).unwrap();
    restarted.push(&rec(0, 100));
    tx[0].push(&rec(1, 2));
    assert_eq!(ours.recv_batch_any(10), [(1, rec(1, 2))]);
    assert_eq!(theirs.recv_batch_any(10), [(1, rec(1, 2))]);
    assert!(ours.consumer(0).unwrap().is_replaced());
    // Re-attached through consumer_mut, the channel keeps its index, name and turn.
    *ours.consumer_mut(0).unwrap() = RingConsumer::attach(&paths[0]).unwrap();
    *theirs.consumer_mut(0).unwrap() = ringfire::RingConsumer::attach(paths[0].path()).unwrap();
    assert!(!ours.consumer(0).unwrap().is_replaced());
    tx[0].push(&rec(1, 3));
    for w in [(0, rec(0, 100)), (1, rec(1, 3))] {
        assert_eq!(ours.try_recv_any(), Some(w));
        assert_eq!(theirs.try_recv_any(), Some(w));
    }
    assert_eq!(ours.channel_name(0), Some("channel_0"));
    assert_eq!(ours.channel_name(0), theirs.channel_name(0));
    assert_eq!(ours.try_recv_any(), None);
    assert_eq!(theirs.try_recv_any(), None);
}

/// Threads of this process named like the async consumer's waiter.
fn waiter_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .filter(|c| c.trim_end() == ringwire::async_consumer::WAITER_THREAD_NAME)
        .count()
}

/// A waker that only counts its clones (through its `Arc`).
struct Counted;

impl std::task::Wake for Counted {
    fn wake(self: std::sync::Arc<Self>) {}
}

#[test]
fn cancelled_recv_any_calls_leave_no_thread_or_waker_behind() {
    let _s = serial();
    let (paths, mut tx) = rings("mux-cancel-leak", 3, 256);
    // Waits until the process has `n` waiter threads (an exiting thread leaves /proc a
    // moment after its join, later on a loaded machine).
    let settle = |n: usize| {
        ringwire_tests::wait_until(
            &format!("{n} waiter threads"),
            Duration::from_secs(30),
            || waiter_threads() == n,
        );
    };
    let base = waiter_threads();
    let mut mux = async_mux(&paths, Duration::from_secs(30));
    settle(base + 3);
    let rt = runtime();
    rt.block_on(async {
        for round in 0..200u64 {
            // Polled once (every waiter armed with this task's waker), then dropped.
            let mut fut = pin!(mux.recv_any());
            poll_fn(|cx| {
                assert!(fut.as_mut().poll(cx).is_pending(), "round {round}");
                Poll::Ready(())
            })
            .await;
        }
    });
    // No thread per wait: still one per channel.
    settle(base + 3);
    // A waker left with the armed waiters of a dropped wait is let go: replaced by the next
    // wait's, and released when its channel publishes or the multiplexer drops.
    let counted = std::sync::Arc::new(Counted);
    let waker = std::task::Waker::from(std::sync::Arc::clone(&counted));
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(mux.poll_recv_any(&mut cx).is_pending());
    drop(waker);
    assert_eq!(
        std::sync::Arc::strong_count(&counted),
        1 + 3,
        "one clone per waiter"
    );
    tx[1].push(&rec(1, 1));
    ringwire_tests::wait_until(
        "channel 1's waiter to wake and drop its waker",
        Duration::from_secs(30),
        || std::sync::Arc::strong_count(&counted) == 1 + 2,
    );
    assert_eq!(mux.try_recv_any(), Some((1, rec(1, 1))));
    drop(mux);
    assert_eq!(
        std::sync::Arc::strong_count(&counted),
        1,
        "the waiters dropped theirs"
    );
    settle(base);
}

/// A record published on any channel at any moment of a `recv_any` poll (before it, while
/// it tries the channels, while it arms their waiters, after it sleeps) is delivered by a
/// wake-up: the waiters' futex sleeps (10 min) outlast the 30 s bound, and the bound is
/// checked first, so a lost wake-up fails the round instead of being rescued by a re-poll.
#[test]
fn no_wake_up_is_lost_when_a_record_lands_while_recv_any_goes_to_sleep() {
    let _s = serial();
    const ROUNDS: u64 = 300;
    let (paths, tx) = rings("mux-race", 4, 512);
    let mut mux = async_mux(&paths, Duration::from_secs(600));
    let (go_tx, go_rx) = std::sync::mpsc::channel::<u64>();
    let publisher = std::thread::spawn(move || {
        let mut tx = tx;
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        while let Ok(round) = go_rx.recv() {
            // A varying head start for the poll: from none to some tens of microseconds.
            for _ in 0..rng.below(20_000) {
                std::hint::spin_loop();
            }
            let ch = (round % 4) as usize;
            tx[ch].push(&rec(ch, round));
        }
        tx
    });
    let rt = runtime();
    rt.block_on(async {
        for round in 1..=ROUNDS {
            go_tx.send(round).unwrap();
            let got = tokio::select! {
                biased;
                () = tokio::time::sleep(Duration::from_secs(30)) => None,
                got = mux.recv_any() => Some(got),
            };
            let ch = (round % 4) as usize;
            assert_eq!(got, Some((ch, rec(ch, round))), "round {round}: no wake-up");
        }
    });
    drop(go_tx);
    drop(publisher.join().unwrap());
    assert_eq!(mux.try_recv_any(), None);
}
