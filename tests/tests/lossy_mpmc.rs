//! The lossy MPMC ring (spec §8) through the typed handles `ringwire::MpmcProducer` and
//! `ringwire::MpmcQueueConsumer`: interop with ringfire 0.5.2 both ways (producers and
//! competing consumers of both crates on one ring), record type and ring kind checks,
//! exact loss counts, a 2×2-thread run where every ticket is received once or counted
//! lost once, and blocking receives woken by a push from another thread.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ringwire::core::AttachError;
use ringwire::lossy_mpmc::LossyPush;
use ringwire::{
    BusySpin, CleanupMode, Error, FutexWait, MpmcProducer, MpmcQueueConsumer, RingProducer,
    WaitStrategy, YieldBackoff,
};
use ringwire_tests::records::{Aligned64, Rec, mix};
use ringwire_tests::shm::ShmPath;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// A 16-byte record whose second word checks the first: a torn copy shows.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
struct Item {
    id: u64,
    check: u64,
}

impl Item {
    fn new(id: u64) -> Item {
        Item { id, check: mix(id) }
    }

    fn is_valid(&self) -> bool {
        self.check == mix(self.id)
    }
}

/// Runs `f` on a thread and returns its result, failing the test (instead of hanging it)
/// when it takes longer than `limit`.
fn within<R: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> R + Send + 'static,
) -> R {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(r) => r,
        Err(e) => panic!("{what}: no result within {limit:?} ({e})"),
    }
}

fn published(p: &MpmcProducer<Item>, item: &Item) -> u64 {
    match p.push_outcome(item) {
        LossyPush::Published { seq, .. } => seq,
        other => panic!("push of {item:?}: {other:?}"),
    }
}

#[test]
fn ringfire_producer_feeds_a_ringwire_consumer() {
    let p = ShmPath::new("lmpmc-rf2rw");
    let rf_prod = ringfire::MpmcProducer::<Rec>::create(&p, 16).unwrap();
    let mut rw = MpmcQueueConsumer::<Rec>::attach(&p).unwrap();
    assert_eq!(rw.capacity(), 16);
    assert_eq!(rw.try_recv(), None);
    for s in 1..=10 {
        assert_eq!(rf_prod.push(&Rec::new(s)), s);
    }
    for s in 1..=10 {
        let (seq, r) = rw.try_recv_seq().unwrap();
        assert_eq!(seq, s);
        assert!(r.is_valid_for(s), "{r:?}");
    }
    assert_eq!(rw.try_recv(), None);
    assert_eq!(rw.dropped_count(), 0);
    let h = rw.file().header();
    assert_eq!(
        (h.flags, h.claim_seq, h.read_seq, h.write_seq),
        (0x21, 11, 11, 10)
    );

    // An over-aligned record: its payload sits at offset 64 of a 128-byte slot (spec §4.1).
    let p = ShmPath::new("lmpmc-rf2rw-al");
    let rf_prod = ringfire::MpmcProducer::<Aligned64>::create(&p, 4).unwrap();
    let mut rw = MpmcQueueConsumer::<Aligned64>::attach(&p).unwrap();
    assert_eq!(rw.file().geometry().element_size, 128);
    for s in 1..=3 {
        rf_prod.push(&Aligned64::new(s));
    }
    for s in 1..=3 {
        assert_eq!(rw.try_recv(), Some(Aligned64::new(s)));
    }
}

#[test]
fn ringwire_producer_feeds_a_ringfire_consumer() {
    let p = ShmPath::new("lmpmc-rw2rf");
    let rw_prod = MpmcProducer::<Rec>::create(&p, 16).unwrap();
    let mut rf = ringfire::MpmcQueueConsumer::<Rec>::attach(&p).unwrap();
    assert_eq!(rf.try_recv(), None);
    for s in 1..=10 {
        assert_eq!(rw_prod.push(&Rec::new(s)), s);
    }
    assert_eq!(rw_prod.published_sequence(), 10);
    for s in 1..=10 {
        let r = rf.try_recv().unwrap();
        assert!(r.is_valid_for(s), "{r:?}");
    }
    assert_eq!(rf.try_recv(), None);
    assert_eq!(rf.dropped_count(), 0);
    // The header is the one ringfire's create writes: flags, counters, layout, signature.
    let p2 = ShmPath::new("lmpmc-rw2rf-ref");
    let _reference = ringfire::MpmcProducer::<Rec>::create(&p2, 16).unwrap();
    let ours = ringwire::ReadOnlyRing::open(&p).unwrap().header();
    let theirs = ringwire::ReadOnlyRing::open(&p2).unwrap().header();
    assert_eq!(
        (
            ours.flags,
            ours.element_size,
            ours.slots_offset,
            ours.schema_sig
        ),
        (
            theirs.flags,
            theirs.element_size,
            theirs.slots_offset,
            theirs.schema_sig
        )
    );
    assert_eq!(
        std::fs::metadata(&p).unwrap().len(),
        std::fs::metadata(&p2).unwrap().len()
    );

    let p = ShmPath::new("lmpmc-rw2rf-al");
    let rw_prod = MpmcProducer::<Aligned64>::create(&p, 4).unwrap();
    let mut rf = ringfire::MpmcQueueConsumer::<Aligned64>::attach(&p).unwrap();
    for s in 1..=3 {
        rw_prod.push(&Aligned64::new(s));
    }
    for s in 1..=3 {
        assert_eq!(rf.try_recv(), Some(Aligned64::new(s)));
    }
}

#[test]
fn mixed_producers_and_competing_consumers_of_both_crates() {
    for ringfire_creates in [false, true] {
        let p = ShmPath::new("lmpmc-mixed");
        // The creator of either crate; everyone else attaches.
        let _creator = if ringfire_creates {
            (
                None,
                Some(ringfire::MpmcProducer::<Item>::create(&p, 64).unwrap()),
            )
        } else {
            (Some(MpmcProducer::<Item>::create(&p, 64).unwrap()), None)
        };
        let rw_prod = MpmcProducer::<Item>::attach(&p).unwrap();
        let rf_prod = ringfire::MpmcProducer::<Item>::attach(&p).unwrap();
        let mut rw_cons = [
            MpmcQueueConsumer::<Item>::attach(&p).unwrap(),
            MpmcQueueConsumer::<Item>::attach(&p).unwrap(),
        ];
        let mut rf_cons = ringfire::MpmcQueueConsumer::<Item>::attach(&p).unwrap();
        // 40 pushes alternating between the crates' producers: tickets 1..=40.
        for i in 0..40u64 {
            let seq = if i % 2 == 0 {
                published(&rw_prod, &Item::new(i))
            } else {
                rf_prod.push(&Item::new(i))
            };
            assert_eq!(seq, i + 1);
        }
        // The three consumers take turns; each message goes to exactly one of them.
        let mut got = Vec::new();
        let mut per_consumer = [0usize; 3];
        for round in 0..40 {
            let it = match round % 3 {
                0 => rw_cons[0].try_recv_seq(),
                1 => rf_cons.try_recv().map(|it| (it.id + 1, it)),
                _ => rw_cons[1].try_recv_seq(),
            }
            .unwrap();
            assert!(it.1.is_valid());
            assert_eq!(it.0, it.1.id + 1, "ticket and payload agree");
            per_consumer[round % 3] += 1;
            got.push(it.1.id);
        }
        assert_eq!(
            got,
            (0..40).collect::<Vec<_>>(),
            "tickets in claim order, once each"
        );
        assert_eq!(per_consumer, [14, 13, 13]);
        assert_eq!(rw_cons[0].try_recv(), None);
        assert_eq!(rf_cons.try_recv(), None);
        assert_eq!(rw_cons[0].dropped_count() + rw_cons[1].dropped_count(), 0);
        assert_eq!(rf_cons.dropped_count(), 0);
    }
}

#[test]
fn a_wrong_record_type_is_refused_with_a_typed_error() {
    let p = ShmPath::new("lmpmc-type");
    let _rf = ringfire::MpmcProducer::<Rec>::create(&p, 8).unwrap();
    // Same stride (40), another type: the schema signature differs (spec §12).
    let sig = |e: Error| match e.attach_error() {
        Some(AttachError::SchemaMismatch { expected, found }) => (expected, found),
        _ => panic!("{e}"),
    };
    let (want, found) = sig(MpmcQueueConsumer::<[u8; 32]>::attach(&p).unwrap_err());
    assert_ne!(want, found);
    assert_eq!(found, ringwire::core::layout::schema_signature_of::<Rec>());
    sig(MpmcProducer::<[u8; 32]>::attach(&p).unwrap_err());
    // Another stride.
    let e = MpmcQueueConsumer::<u64>::attach(&p).unwrap_err();
    assert_eq!(
        e.attach_error(),
        Some(AttachError::ElementSizeMismatch {
            expected: 16,
            found: 40
        }),
        "{e}"
    );
    assert!(e.to_string().contains(&*p.path().to_string_lossy()), "{e}");
    // ringfire refuses our ring of another type just the same.
    let q = ShmPath::new("lmpmc-type-rw");
    let _rw = MpmcProducer::<Rec>::create(&q, 8).unwrap();
    assert!(matches!(
        ringfire::MpmcQueueConsumer::<[u8; 32]>::attach(&q),
        Err(ringfire::RingfireError::SchemaMismatch { .. })
    ));
    assert!(MpmcQueueConsumer::<Rec>::attach(&q).is_ok());
}

#[test]
fn a_broadcast_ring_is_refused_with_a_clear_error() {
    let p = ShmPath::new("lmpmc-bcast");
    let mut bcast = RingProducer::<u64>::create(&p, 8).unwrap();
    bcast.push(&7);
    let wrong_kind = |e: Error| {
        assert!(
            matches!(
                e.attach_error(),
                Some(AttachError::WrongKind { flags: 0x11, .. })
            ),
            "{e:?}"
        );
        let msg = e.to_string();
        assert!(
            msg.contains("MPMC") && msg.contains(&*p.path().to_string_lossy()),
            "{msg}"
        );
    };
    wrong_kind(MpmcQueueConsumer::<u64>::attach(&p).unwrap_err());
    wrong_kind(MpmcProducer::<u64>::attach(&p).unwrap_err());
    // A ringfire broadcast ring too.
    let q = ShmPath::new("lmpmc-bcast-rf");
    let _rf = ringfire::RingProducer::<u64>::create(&q, 8).unwrap();
    let e = MpmcQueueConsumer::<u64>::attach(&q).unwrap_err();
    assert!(
        matches!(e.attach_error(), Some(AttachError::WrongKind { .. })),
        "{e}"
    );
    // ringfire itself accepts the attach, then never sees the broadcast ring's record.
    let mut rf_cons = ringfire::MpmcQueueConsumer::<u64>::attach(&p).unwrap();
    assert_eq!(rf_cons.try_recv(), None);
}

/// A header whose `read_seq` is past `claim_seq` (no consumer moves it there: a corrupt
/// file) is refused at attach, naming the file and both values. ringfire's consumer
/// attaches and receives none of the next pushes, and counts none lost; ours did the same.
#[test]
fn a_ring_whose_read_seq_is_past_claim_seq_is_refused_with_both_values() {
    let p = ShmPath::new("lmpmc-read-seq");
    let prod = MpmcProducer::<u64>::create(&p, 8).unwrap();
    assert_eq!(prod.push(&1), 1);
    // SAFETY: the view is used only while `prod`, which maps the file, is alive.
    let view = unsafe { prod.file().view() };
    view.read_seq().store(50, Ordering::SeqCst);
    let e = MpmcQueueConsumer::<u64>::attach(&p).unwrap_err();
    assert_eq!(
        e.attach_error(),
        Some(AttachError::ReadSeqPastClaimSeq {
            read_seq: 50,
            claim_seq: 2
        }),
        "{e}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains(&*p.path().to_string_lossy()) && msg.contains("read_seq 50"),
        "{msg}"
    );
    let mut rf = ringfire::MpmcQueueConsumer::<u64>::attach(&p).unwrap();
    for v in 2..=9 {
        assert_eq!(prod.push(&v), v);
    }
    assert_eq!(rf.try_recv(), None);
    assert_eq!(rf.dropped_count(), 0);
}

/// A `claim_seq` scribbled to 0 (creators start it at 1) made our producer publish the
/// next message as ticket 0, which no consumer takes: ringfire's consumer (and ours)
/// received nothing and counted nothing lost. The producer now skips ticket 0.
#[test]
fn a_claim_seq_of_zero_loses_no_message_to_ticket_0() {
    let p = ShmPath::new("lmpmc-claim-0");
    let prod = MpmcProducer::<u64>::create(&p, 8).unwrap();
    // SAFETY: the view is used only while `prod`, which maps the file, is alive.
    let view = unsafe { prod.file().view() };
    let mut rf = ringfire::MpmcQueueConsumer::<u64>::attach(&p).unwrap();
    view.claim_seq().store(0, Ordering::SeqCst);
    assert_eq!(prod.push(&7), 1);
    assert_eq!(rf.try_recv(), Some(7));
    assert_eq!((rf.try_recv(), rf.dropped_count()), (None, 0));
    assert_eq!(prod.push(&8), 2);
    let mut rw = MpmcQueueConsumer::<u64>::attach(&p).unwrap();
    assert_eq!(rw.try_recv_seq(), Some((2, 8)));
}

#[test]
fn a_lapped_consumer_counts_exactly_what_it_lost() {
    // The same pushes and receives on a ring of ours with our consumer and on a ringfire
    // ring with ringfire's: the counts agree with spec §8.2 and with each other.
    let p = ShmPath::new("lmpmc-lap-rw");
    let q = ShmPath::new("lmpmc-lap-rf");
    let rw_prod = MpmcProducer::<Item>::create(&p, 4).unwrap();
    let rf_prod = ringfire::MpmcProducer::<Item>::create(&q, 4).unwrap();
    let mut rw = MpmcQueueConsumer::<Item>::attach(&p).unwrap();
    let mut rf = ringfire::MpmcQueueConsumer::<Item>::attach(&q).unwrap();
    let push = |range: std::ops::RangeInclusive<u64>| {
        for i in range {
            published(&rw_prod, &Item::new(i));
            rf_prod.push(&Item::new(i));
        }
    };
    let both = |rw: &mut MpmcQueueConsumer<Item>, rf: &mut ringfire::MpmcQueueConsumer<Item>| {
        let a = rw.try_recv().map(|it| it.id);
        assert_eq!(a, rf.try_recv().map(|it| it.id));
        assert_eq!(rw.dropped_count(), rf.dropped_count());
        (a, rw.dropped_count())
    };
    push(1..=11);
    // claim_seq 12, floor 8: tickets 1..=7 are gone.
    assert_eq!(both(&mut rw, &mut rf), (Some(8), 7));
    assert_eq!(both(&mut rw, &mut rf), (Some(9), 7));
    push(12..=20);
    // claim_seq 21, floor 17: tickets 10..=16 are gone.
    assert_eq!(both(&mut rw, &mut rf), (Some(17), 14));
    for id in 18..=20 {
        assert_eq!(both(&mut rw, &mut rf), (Some(id), 14));
    }
    assert_eq!(both(&mut rw, &mut rf), (None, 14));
    // A second consumer attached after all that loses nothing: read_seq is shared.
    let mut late = MpmcQueueConsumer::<Item>::attach(&p).unwrap();
    push(21..=21);
    assert_eq!(late.try_recv().map(|it| it.id), Some(21));
    assert_eq!(late.dropped_count(), 0);
}

/// A consumer dropped while it holds a claimed ticket that its producer has not published
/// yet (a producer paused between its claim and its copy: a consumer that gives up with
/// `recv_timeout` and is dropped meets one whenever the producer is descheduled there)
/// gives the ticket back when no consumer took a later one since, so the next consumer
/// receives the message. Before, it was neither received nor counted lost by anyone. A
/// ticket that cannot be given back (a later one was taken) is lost as before, and the
/// consumer holding it in a forked child's copy never gives it back (its parent holds it).
#[test]
fn a_consumer_dropped_holding_an_unpublished_ticket_gives_it_back() {
    let p = ShmPath::new("lmpmc-give-back");
    let prod = MpmcProducer::<Item>::create(&p, 8).unwrap();
    // SAFETY: the view is used only while `prod`, which maps the file, is alive.
    let view = unsafe { prod.file().view() };
    // A producer draws ticket `t` and pauses; later it copies and publishes its item.
    let draw = || view.claim_seq().fetch_add(1, Ordering::Relaxed);
    let publish = |t: u64| {
        view.write_slot(t, Item::new(t).as_bytes());
        view.write_seq().fetch_max(t, Ordering::Release);
    };
    assert_eq!(published(&prod, &Item::new(1)), 1);
    assert_eq!(draw(), 2);
    let mut first = MpmcQueueConsumer::<Item>::attach(&p).unwrap();
    assert_eq!(first.try_recv(), Some(Item::new(1)));
    let mut wait = YieldBackoff::default();
    assert_eq!(
        first.recv_timeout(&mut wait, Duration::from_millis(5)),
        None
    );
    drop(first);
    publish(2);
    // Ours and ringfire's next consumer both see ticket 2 (ringfire's after ours took it
    // and gave it back again).
    let mut next = MpmcQueueConsumer::<Item>::attach(&p).unwrap();
    assert_eq!(view.read_seq().load(Ordering::Relaxed), 2);
    assert_eq!(next.try_recv(), Some(Item::new(2)));
    assert_eq!(next.dropped_count(), 0);
    assert_eq!(draw(), 3);
    assert_eq!(next.try_recv(), None);
    drop(next);
    publish(3);
    let mut rf = ringfire::MpmcQueueConsumer::<Item>::attach(&p).unwrap();
    assert_eq!(rf.try_recv(), Some(Item::new(3)));
    assert_eq!(rf.dropped_count(), 0);

    // Ticket 4 held by one consumer, 5 taken by another after it: 4 cannot be given back.
    assert_eq!((draw(), draw()), (4, 5));
    let mut a = MpmcQueueConsumer::<Item>::attach(&p).unwrap();
    let mut b = MpmcQueueConsumer::<Item>::attach(&p).unwrap();
    assert_eq!((a.try_recv(), b.try_recv()), (None, None));
    drop(a);
    publish(4);
    publish(5);
    assert_eq!(view.read_seq().load(Ordering::Relaxed), 6);
    assert_eq!(b.try_recv(), Some(Item::new(5)));
    assert_eq!(rf.try_recv(), None);
}

#[test]
fn two_producer_and_two_consumer_threads_lose_nothing_unaccounted() {
    const PER_PRODUCER: u64 = 200_000;
    const CAP: u64 = 64;
    let p = ShmPath::new("lmpmc-threads");
    let owner = MpmcProducer::<Item>::create(&p, CAP).unwrap();
    let pushed = AtomicU64::new(0);
    let lost_in_push = AtomicU64::new(0);
    let producers_done = AtomicBool::new(false);
    // Received and dropped per consumer, stored by each after every step.
    let counts = [
        AtomicU64::new(0),
        AtomicU64::new(0),
        AtomicU64::new(0),
        AtomicU64::new(0),
    ];
    let deadline = Instant::now() + Duration::from_secs(120);
    let push_counted = |prod: &MpmcProducer<Item>, id: u64| {
        pushed.fetch_add(1, Ordering::SeqCst);
        match prod.push_outcome(&Item::new(id)) {
            LossyPush::Published { .. } => {}
            LossyPush::Discarded { .. } => {}
            // Never written: a consumer holding this ticket waits until the producers
            // are a lap past it.
            LossyPush::Dropped { .. } => {
                lost_in_push.fetch_add(1, Ordering::SeqCst);
            }
        }
    };
    let received: Vec<Vec<Item>> = std::thread::scope(|s| {
        let consumers: Vec<_> = (0..2)
            .map(|c| {
                let (p, counts, pushed, producers_done) = (&p, &counts, &pushed, &producers_done);
                s.spawn(move || {
                    let mut cons = MpmcQueueConsumer::<Item>::attach(p).unwrap();
                    let mut got = Vec::new();
                    let mut wait = YieldBackoff::new(64);
                    loop {
                        if let Some(it) = cons.recv_timeout(&mut wait, Duration::from_millis(5)) {
                            got.push(it);
                        }
                        counts[2 * c].store(got.len() as u64, Ordering::SeqCst);
                        counts[2 * c + 1].store(cons.dropped_count(), Ordering::SeqCst);
                        let accounted: u64 = counts.iter().map(|n| n.load(Ordering::SeqCst)).sum();
                        if producers_done.load(Ordering::SeqCst)
                            && accounted == pushed.load(Ordering::SeqCst)
                        {
                            return got;
                        }
                        assert!(
                            Instant::now() < deadline,
                            "consumer {c} stuck: {got_len} received",
                            got_len = got.len()
                        );
                    }
                })
            })
            .collect();
        let producers: Vec<_> = (0..2u64)
            .map(|pi| {
                let (p, push_counted) = (&p, &push_counted);
                s.spawn(move || {
                    let prod = MpmcProducer::<Item>::attach(p).unwrap();
                    for i in 0..PER_PRODUCER {
                        push_counted(&prod, (pi << 32) | i);
                    }
                })
            })
            .collect();
        for h in producers {
            h.join().unwrap();
        }
        // A message dropped mid-push leaves its ticket unwritten; a lap of fillers settles
        // it (they are counted like every other push).
        let mut filler = 2u64 << 32;
        while lost_in_push.swap(0, Ordering::SeqCst) > 0 {
            for _ in 0..CAP {
                push_counted(&owner, filler);
                filler += 1;
            }
        }
        producers_done.store(true, Ordering::SeqCst);
        consumers.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let total_pushed = pushed.load(Ordering::SeqCst);
    let mut seen = HashSet::new();
    for it in received.iter().flatten() {
        assert!(it.is_valid(), "torn record {it:?}");
        assert!(seen.insert(it.id), "{it:?} received twice");
        let (pi, i) = (it.id >> 32, it.id & 0xffff_ffff);
        assert!(
            (pi < 2 && i < PER_PRODUCER) || pi == 2,
            "{it:?} was never pushed"
        );
    }
    let dropped = counts[1].load(Ordering::SeqCst) + counts[3].load(Ordering::SeqCst);
    eprintln!(
        "pushed {total_pushed}, received {} + {} (consumers), dropped {dropped}",
        received[0].len(),
        received[1].len()
    );
    assert_eq!(seen.len() as u64 + dropped, total_pushed);
    assert!(total_pushed >= 2 * PER_PRODUCER);
}

/// A wait strategy that records that `wait_on` was entered (the caller found nothing to
/// receive and began to wait), then waits with the one it wraps.
struct Entered<W> {
    inner: W,
    entered: std::sync::Arc<AtomicBool>,
}

impl<W: WaitStrategy> WaitStrategy for Entered<W> {
    const SPINS: bool = W::SPINS;
    fn wait_on(
        &mut self,
        pair: ringwire::core::futex::FutexPair<'_>,
        deadline: Option<Instant>,
        ready: impl FnMut() -> bool,
    ) {
        self.entered.store(true, Ordering::SeqCst);
        self.inner.wait_on(pair, deadline, ready);
    }
    fn reset(&mut self) {
        self.inner.reset();
    }
}

/// `recv_blocking` with `wait`, woken by a push from another thread once the consumer is
/// waiting; returns how long the receive took.
fn woken_by_a_push<W: WaitStrategy + 'static>(tag: &str, wait: W) -> (Duration, W) {
    let p = ShmPath::new(tag);
    let prod = MpmcProducer::<Item>::create(&p, 8).unwrap();
    let mut cons = MpmcQueueConsumer::<Item>::attach(&p).unwrap();
    let entered = std::sync::Arc::new(AtomicBool::new(false));
    let mut wait = Entered {
        inner: wait,
        entered: entered.clone(),
    };
    let receiver = std::thread::spawn(move || {
        let t0 = Instant::now();
        let it = cons.recv_blocking(&mut wait);
        (t0.elapsed(), it, wait.inner)
    });
    // The receiver is waiting (in its strategy) before the push, so the push is what ends
    // the wait, for a spinning strategy too.
    let t0 = Instant::now();
    while !entered.load(Ordering::SeqCst) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the receiver never began to wait"
        );
        assert!(
            !receiver.is_finished(),
            "received before anything was pushed"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // Time for a sleeping strategy to get past its spins into its sleep (FutexWait's stats,
    // checked by its test, show that it did).
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        !receiver.is_finished(),
        "received before anything was pushed"
    );
    prod.push(&Item::new(5));
    let (took, it, wait) = within(Duration::from_secs(10), tag, move || {
        receiver.join().unwrap()
    });
    assert_eq!(it, Item::new(5));
    (took, wait)
}

#[test]
fn recv_blocking_busy_spin_is_woken_by_a_push() {
    let (took, _) = woken_by_a_push("lmpmc-spin", BusySpin::new());
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[test]
fn recv_blocking_yield_backoff_is_woken_by_a_push() {
    let (took, _) = woken_by_a_push("lmpmc-yield", YieldBackoff::new(16));
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[test]
fn recv_blocking_futex_wait_sleeps_and_is_woken_by_a_push() {
    // Sleeps of up to 10 s: only a FUTEX_WAKE ends one within the bound below.
    let (took, wait) = woken_by_a_push(
        "lmpmc-futex",
        FutexWait::new(16, Some(Duration::from_secs(10))),
    );
    let st = wait.stats();
    assert!(
        took < Duration::from_secs(5),
        "woke only after {took:?}: {st:?}"
    );
    assert!(
        st.sleeps >= 1 && st.woken >= 1 && st.timed_out == 0,
        "{st:?}"
    );
}

#[test]
fn futex_sleepers_are_woken_across_crates() {
    // Our push wakes ringfire's FutexWait sleeper.
    let p = ShmPath::new("lmpmc-wake-rf");
    let prod = MpmcProducer::<Item>::create(&p, 8).unwrap();
    let mut rf_cons = ringfire::MpmcQueueConsumer::<Item>::attach(&p).unwrap();
    let sleeper = std::thread::spawn(move || {
        let t0 = Instant::now();
        let it = rf_cons.recv_blocking(&mut ringfire::FutexWait::new(
            0,
            Some(Duration::from_secs(10)),
        ));
        (t0.elapsed(), it)
    });
    let watcher = ringwire::ReadOnlyRing::open(&p).unwrap();
    ringwire_tests::wait_until("ringfire's sleeper", Duration::from_secs(5), || {
        watcher.futex_state().0 > 0
    });
    prod.push(&Item::new(1));
    let (took, it) = within(Duration::from_secs(10), "ringfire sleeper", move || {
        sleeper.join().unwrap()
    });
    assert_eq!(it, Item::new(1));
    assert!(took < Duration::from_secs(5), "{took:?}");

    // ringfire's push wakes our sleeper.
    let q = ShmPath::new("lmpmc-wake-rw");
    let rf_prod = ringfire::MpmcProducer::<Item>::create(&q, 8).unwrap();
    let mut cons = MpmcQueueConsumer::<Item>::attach(&q).unwrap();
    let watcher = ringwire::ReadOnlyRing::open(&q).unwrap();
    let sleeper = std::thread::spawn(move || {
        let mut w = FutexWait::new(0, Some(Duration::from_secs(10)));
        let t0 = Instant::now();
        let it = cons.recv_blocking(&mut w);
        (t0.elapsed(), it, w.stats())
    });
    ringwire_tests::wait_until("our sleeper", Duration::from_secs(5), || {
        watcher.futex_state().0 > 0
    });
    rf_prod.push(&Item::new(2));
    let (took, it, st) = within(Duration::from_secs(10), "our sleeper", move || {
        sleeper.join().unwrap()
    });
    assert_eq!(it, Item::new(2));
    assert!(
        took < Duration::from_secs(5) && st.timed_out == 0,
        "{took:?} {st:?}"
    );
}

#[test]
fn recv_timeout_gives_up_on_an_empty_ring_with_each_strategy() {
    let p = ShmPath::new("lmpmc-timeout");
    let prod = MpmcProducer::<Item>::create(&p, 8).unwrap();
    let mut cons = MpmcQueueConsumer::<Item>::attach(&p).unwrap();
    let limit = Duration::from_millis(30);
    let mut check = |w: &mut dyn FnMut(&mut MpmcQueueConsumer<Item>) -> Option<Item>| {
        let t0 = Instant::now();
        assert_eq!(w(&mut cons), None);
        let took = t0.elapsed();
        assert!(took >= limit && took < Duration::from_secs(2), "{took:?}");
    };
    check(&mut |c| c.recv_timeout(&mut BusySpin::new(), limit));
    check(&mut |c| c.recv_timeout(&mut YieldBackoff::default(), limit));
    // Sleeps of 10 s are cut at the deadline.
    check(&mut |c| c.recv_timeout(&mut FutexWait::new(0, Some(Duration::from_secs(10))), limit));
    prod.push(&Item::new(9));
    assert_eq!(
        cons.recv_timeout(&mut FutexWait::default(), limit),
        Some(Item::new(9))
    );
}

#[test]
fn the_creator_locks_and_unlinks_attached_producers_do_not() {
    let p = ShmPath::new("lmpmc-life");
    let creator = MpmcProducer::<Item>::create(&p, 8).unwrap();
    assert!(matches!(
        MpmcProducer::<Item>::create(&p, 8),
        Err(Error::ProducerAlreadyExists { .. })
    ));
    assert!(matches!(
        ringfire::MpmcProducer::<Item>::create(&p, 8),
        Err(ringfire::RingfireError::ProducerAlreadyExists)
    ));
    let attached = MpmcProducer::<Item>::attach(&p).unwrap();
    drop(attached);
    assert!(p.path().exists(), "an attached producer leaves the file");
    drop(creator);
    assert!(!p.path().exists(), "the creator unlinks on drop");

    let mut keep = MpmcProducer::<Item>::create(&p, 8).unwrap();
    keep.set_cleanup_mode(CleanupMode::Persistent);
    keep.push(&Item::new(3));
    drop(keep);
    assert!(p.path().exists(), "Persistent keeps the file");
    // The stale ring is replaced by a fresh one, which the creator unlinks again.
    let fresh = MpmcProducer::<Item>::create(&p, 8).unwrap();
    assert_eq!(fresh.file().header().claim_seq, 1);
    assert!(matches!(
        MpmcProducer::<Item>::create(&p, 8),
        Err(Error::ProducerAlreadyExists { .. })
    ));
    drop(fresh);
    assert!(!p.path().exists());
    // A capacity that is not a power of two names itself.
    let e = MpmcProducer::<Item>::create(&p, 6).unwrap_err();
    assert!(e.to_string().contains('6'), "{e}");
    assert!(!p.path().exists());
}

#[test]
fn a_broadcast_reader_behind_a_dead_claim_sleeps_instead_of_spinning() {
    // Spec §8.2 lets a broadcast consumer read an MPMC ring. There `write_seq` is the highest
    // ticket published: with ticket 1 claimed by a producer that died and ticket 2
    // published, `write_seq >= cursor` holds while the record at the cursor stays pending
    // until a lap proves it lost. A FutexWait must sleep through that, not spin.
    let p = ShmPath::new("lmpmc-deadclaim");
    let prod = MpmcProducer::<Item>::create(&p, 8).unwrap();
    // SAFETY: the view is used only while `prod`, which maps the file, is alive.
    let view = unsafe { prod.file().view() };
    // Ticket 1: claimed, never written (its producer "died").
    view.claim_seq()
        .fetch_add(1, ringwire::core::sync::Ordering::SeqCst);
    assert_eq!(published(&prod, &Item::new(2)), 2);
    let mut cons = ringwire::RingConsumer::<Item>::attach(&p).unwrap();
    let mut wait = FutexWait::new(0, Some(Duration::from_millis(50)));
    let t0 = Instant::now();
    assert_eq!(
        cons.recv_timeout(&mut wait, Duration::from_millis(300)),
        None
    );
    assert!(t0.elapsed() >= Duration::from_millis(300));
    let st = wait.stats();
    assert!(
        st.sleeps >= 2 && st.timed_out >= 2,
        "spun instead of sleeping: {st:?}"
    );
    // A lap past the dead ticket: the reader counts it lost and goes on from there.
    for id in 3..=10 {
        published(&prod, &Item::new(id));
    }
    let got = cons.recv_timeout(&mut wait, Duration::from_secs(5));
    assert!(got.is_some_and(|it| it.id >= 2 && it.is_valid()), "{got:?}");
    assert!(
        cons.lapped_count() >= 1,
        "the dead ticket was not counted lost"
    );
}
