//! loom models of the §11 sleep/wake handshake (`ringwire_core::futex`): a sleeper that
//! found nothing announces itself and sleeps on the futex word while a producer publishes;
//! no interleaving may leave the sleeper asleep after the publish. The futex itself is
//! modelled here as the kernel implements it (the word compared and the sleeper queued under
//! one lock; a wake takes the same lock), with no timeout, so a lost wake-up is a sleeper
//! that never returns, which loom reports as a deadlock.
//!
//! The real code paths run: `RingView::publish` and `publish_fenced` through a broadcast
//! `Producer`, the queues' `notify_data_unfenced` / `notify_data` after an MPMC push,
//! `LossyMpmcProducer::push` (two producers publishing out of ticket order), and the
//! sleeper's `FutexPair::announce` (with two competing queue sleepers too). The std
//! SPSC consumer's hand-back to a producer asleep on a full queue is built here from the
//! core calls it makes (`FutexPair::sleepers`, `SpscConsumer::release`, `FutexPair::bump`;
//! the std layer is not built under loom), in its order and in the wrong one. The
//! membarrier a std sleeper issues is modelled by
//! the SeqCst fence that `notify_unfenced` has under loom (see the `futex` module docs).
//! A sleeper that re-checks before announcing itself must be caught
//! (`a_recheck_before_the_announcement_loses_the_wake_up`).
//! So must the wake a retire after a clear of the count takes from a newer sleeper (the
//! bound `FutexPair::waiters` documents: `a_late_retire_after_a_clear_can_leave_…`).
//! So the unfenced models check the handshake given the barrier, not that a sleeper issues
//! it: a std sleeper that forgot its membarrier would pass them. The std unit test
//! `wait::tests::a_futex_sleep_runs_the_membarrier` checks that one is issued.
//!
//! Run: `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p ringwire-core
//! --release --test loom_futex`.
#![cfg(loom)]

use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;
use ringwire_core::broadcast::{Producer, Wake};
use ringwire_core::futex::{FutexPair, STALE_SLEEPER_AFTER, STALE_SLEEPER_WAKES, WakeGate};
use ringwire_core::layout::SLOT_WRITING;
use ringwire_core::queue::compat::{LossyMpmcProducer, LossyPush};
use ringwire_core::queue::{
    MpmcQueue, QueueGeometry, QueueKind, QueueView, SpscConsumer, SpscProducer,
};
use ringwire_core::sync::{A32, Ordering};
use ringwire_core::{Geometry, Region, RingView};

fn model(f: impl Fn() + Sync + Send + 'static) {
    model_bounded(3, f);
}

/// [`model`] with preemption bound `bound` (unless `LOOM_MAX_PREEMPTIONS` sets one).
fn model_bounded(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(bound);
    }
    b.check(f);
}

/// The kernel's futex for one word: `wait` compares the word and queues the caller under
/// the lock that `wake` takes, so a wake after the comparison always finds the sleeper.
struct Futex {
    /// Wake generation (a sleeper returns once it changed), and the sleepers queued since
    /// the last wake.
    woken: Mutex<(u64, u32)>,
    cv: Condvar,
}

impl Futex {
    fn new() -> Futex {
        Futex {
            woken: Mutex::new((0, 0)),
            cv: Condvar::new(),
        }
    }

    /// `FUTEX_WAIT(word, v)` without a timeout.
    fn wait(&self, word: A32<'_>, v: u32) {
        let mut g = self.woken.lock().unwrap();
        // Relaxed: the lock orders it against every wake (the kernel reads the word under
        // the hash bucket's lock).
        if word.load(Ordering::Relaxed) != v {
            return;
        }
        let seen = g.0;
        g.1 += 1;
        while g.0 == seen {
            g = self.cv.wait(g).unwrap();
        }
    }

    /// `FUTEX_WAKE` of every sleeper; returns how many were queued (as the kernel does).
    fn wake(&self) -> u32 {
        let mut g = self.woken.lock().unwrap();
        g.0 += 1;
        self.cv.notify_all();
        core::mem::take(&mut g.1)
    }
}

/// A sleeper's loop: return once `ready()`, else announce, re-check and sleep.
///
/// The [`Announced`](ringwire_core::futex::Announced) is retired by hand after the wait, not
/// by unwinding: when loom ends a deadlocked execution with a panic out of `wait`, a drop
/// that touches a loom atomic would panic again and abort the `should_panic` models.
fn sleep_until(pair: FutexPair<'_>, futex: &Futex, ready: impl Fn() -> bool) {
    while !ready() {
        let announced = core::mem::ManuallyDrop::new(pair.announce(|| {}, &ready));
        if let Some(v) = announced.sleep_on() {
            futex.wait(pair.word, v);
        }
        drop(core::mem::ManuallyDrop::into_inner(announced));
    }
}

/// A one-record ring of 8-byte records.
fn ring() -> RingView {
    let geo = Geometry::spmc(2, 16, 8, 0, false).unwrap();
    // SAFETY: a fresh loom region, no other view of it exists yet.
    unsafe { RingView::init(Region::loom_new(geo.total_len().unwrap() as usize), &geo) }.unwrap()
}

struct ModelWake(Arc<Futex>);

impl Wake for ModelWake {
    fn wake(&self, _view: &RingView) {
        self.0.wake();
    }
}

/// A producer's waker that rations its wakes with the real [`WakeGate`], as the std
/// `FutexWake` does: the sleeper count read after the publish, a clock stopped at `now`.
struct GatedWake {
    futex: Arc<Futex>,
    gate: WakeGate,
    now: u64,
}

impl Wake for GatedWake {
    fn wake(&self, view: &RingView) {
        self.gate.wake(
            // Relaxed: as the std FutexWake's reload.
            || view.waiting_consumers().load(Ordering::Relaxed),
            || self.now,
            || i64::from(self.futex.wake()),
        );
    }
}

fn published(view: &RingView, seq: u64) -> bool {
    // Acquire: as a consumer's check of write_seq.
    view.write_seq().load(Ordering::Acquire) >= seq
}

/// A producer pushes two records through `Producer::push` (publish with the unfenced
/// check, the membarrier scheme); a reader sleeps until it sees both.
#[test]
fn ring_sleeper_never_misses_a_publish() {
    model(|| {
        let view = ring();
        let futex = Arc::new(Futex::new());
        let mut p = Producer::new(view.clone(), ModelWake(futex.clone())).unwrap();
        let w = thread::spawn(move || {
            p.push(&1u64.to_le_bytes()).unwrap();
            p.push(&2u64.to_le_bytes()).unwrap();
        });
        sleep_until(view.futex(), &futex, || published(&view, 2));
        w.join().unwrap();
        // Relaxed: every thread has joined.
        assert_eq!(view.waiting_consumers().load(Ordering::Relaxed), 0);
    });
}

/// The same with `publish_fenced` (no membarrier needed) and two sleepers.
#[test]
fn ring_fenced_publish_wakes_every_sleeper() {
    model(|| {
        let view = ring();
        let futex = Arc::new(Futex::new());
        let (v2, f2) = (view.clone(), futex.clone());
        let w = thread::spawn(move || {
            v2.write_slot(1, &1u64.to_le_bytes());
            if v2.publish_fenced(1) {
                f2.wake();
            }
        });
        let (v3, f3) = (view.clone(), futex.clone());
        let r = thread::spawn(move || sleep_until(v3.futex(), &f3, || published(&v3, 1)));
        sleep_until(view.futex(), &futex, || published(&view, 1));
        w.join().unwrap();
        r.join().unwrap();
    });
}

/// A lossy MPMC ring (spec §8) of two 8-byte records.
fn lossy_ring() -> RingView {
    let geo = Geometry::mpmc(2, 16, 8).unwrap();
    // SAFETY: a fresh loom region, no other view of it exists yet.
    unsafe { RingView::init(Region::loom_new(geo.total_len().unwrap() as usize), &geo) }.unwrap()
}

/// The std consumers' wait test on an MPMC-flagged ring (`wait::published` in the std
/// adapter, not built under loom): the slot of `seq` holds it (or a later lap), or
/// `write_seq` is a lap past it.
fn mpmc_published(view: &RingView, seq: u64) -> bool {
    // Acquire: as the std test's load of write_seq.
    let w = view.write_seq().load(Ordering::Acquire);
    // Acquire: pairs with the producer's release store of the slot's sequence word.
    let s = view.slot_seq(seq).load(Ordering::Acquire);
    (s != SLOT_WRITING && s >= seq) || w >= seq + view.capacity()
}

/// Two lossy MPMC producers publish tickets 1 and 2, in either order, while a reader sleeps
/// until ticket 1 is readable. When ticket 2 is published first, ticket 1's `fetch_max`
/// leaves `write_seq` at 2, and the reader that ticket 2 woke finds ticket 1's slot not
/// written yet and sleeps again: ticket 1's publish must still wake it, though it does not
/// move `write_seq`. Bound 2: the order needs one preemption (ticket 1's producer stopped
/// after its claim), a wake skipped there fails at bound 1 already, and bound 3 took 40
/// times as long (85 s on 2 loaded cores) without finding more.
#[test]
fn mpmc_sleeper_is_woken_by_a_ticket_published_below_write_seq() {
    model_bounded(2, || {
        let view = lossy_ring();
        let futex = Arc::new(Futex::new());
        let producers: Vec<_> = (0..2u64)
            .map(|v| {
                let p = LossyMpmcProducer::new(view.clone()).unwrap();
                let f = futex.clone();
                thread::spawn(move || match p.push(&v.to_le_bytes(), || 0) {
                    LossyPush::Published { wake, .. } => {
                        if wake {
                            f.wake();
                        }
                    }
                    other => panic!("{other:?}"),
                })
            })
            .collect();
        sleep_until(view.futex(), &futex, || mpmc_published(&view, 1));
        for p in producers {
            p.join().unwrap();
        }
    });
}

fn mpmc() -> MpmcQueue {
    let g = QueueGeometry::new(QueueKind::Mpmc, 2, 8, 16).unwrap();
    // SAFETY: a fresh loom region, no other view of it exists yet.
    let q =
        unsafe { QueueView::init(Region::loom_new(g.total_len().unwrap() as usize), &g) }.unwrap();
    MpmcQueue::new(q).unwrap()
}

/// A queue consumer sleeps on `data_futex` while a producer pushes and notifies, with the
/// unfenced (membarrier) and the fenced notify.
#[test]
fn queue_sleeper_never_misses_a_push() {
    for fenced in [false, true] {
        model(move || {
            let q = mpmc();
            let futex = Arc::new(Futex::new());
            let (q2, f2) = (q.clone(), futex.clone());
            let w = thread::spawn(move || {
                q2.try_push(&7u64.to_le_bytes()).unwrap();
                let v = q2.view();
                if if fenced {
                    v.notify_data()
                } else {
                    v.notify_data_unfenced()
                } {
                    f2.wake();
                }
            });
            sleep_until(q.view().data_pair(), &futex, || q.has_item());
            let mut out = [0u8; 8];
            q.try_pop(&mut out).unwrap();
            assert_eq!(out, 7u64.to_le_bytes());
            w.join().unwrap();
        });
    }
}

/// The space side: a producer of a full queue sleeps on `space_futex` (re-check
/// `has_space`) while a consumer pops and notifies, with the unfenced and the fenced
/// notify: it may not sleep once a slot is free, and its push then succeeds.
#[test]
fn queue_producer_sleeper_never_misses_a_pop() {
    for fenced in [false, true] {
        model(move || {
            let q = mpmc();
            q.try_push(&1u64.to_le_bytes()).unwrap();
            q.try_push(&2u64.to_le_bytes()).unwrap();
            let futex = Arc::new(Futex::new());
            let (q2, f2) = (q.clone(), futex.clone());
            let c = thread::spawn(move || {
                let mut out = [0u8; 8];
                q2.try_pop(&mut out).unwrap();
                let v = q2.view();
                if if fenced {
                    v.notify_space()
                } else {
                    v.notify_space_unfenced()
                } {
                    f2.wake();
                }
                u64::from_le_bytes(out)
            });
            sleep_until(q.view().space_pair(), &futex, || q.has_space());
            assert_eq!(q.try_push(&3u64.to_le_bytes()), Ok(2));
            assert_eq!(c.join().unwrap(), 1);
        });
    }
}

/// A full four-slot SPSC queue of u64s (items 1 to 4) whose consumer hands its popped
/// slots back every 4 pops, so a single pop that does not catch up stores no head.
fn full_spsc() -> (SpscProducer, SpscConsumer) {
    let g = QueueGeometry::spsc_fixed(4, 8).unwrap();
    // SAFETY: a fresh loom region, no other view of it exists yet.
    let q =
        unsafe { QueueView::init(Region::loom_new(g.total_len().unwrap() as usize), &g) }.unwrap();
    let mut p = SpscProducer::new(q.clone()).unwrap();
    for i in 1..=4u64 {
        p.try_push(&i.to_le_bytes()).unwrap();
    }
    let mut c = SpscConsumer::new(q).unwrap();
    c.set_release_every(4);
    (p, c)
}

/// The std SPSC consumer's pop (`SpscBytesConsumer::after_pop` and `hand_back_and_wake`)
/// against a producer asleep on the full queue: one pop, the look at the space side's
/// waiter count, and when it sees the sleeper, the hand-back of the popped slot (a head
/// store the single pop did not make), the bump and the wake. `hand_back_first == false`
/// is the wrong order (bump, then hand-back), for the model below that must catch it.
///
/// The consumer pops only once the producer has announced itself, the setting of the std
/// test `a_producer_asleep_on_a_full_queue_gets_the_slots_of_single_pops_back`: a producer
/// that announces after the look sleeps on until a later hand-back (the module docs of
/// `SpscBytesConsumer::after_pop`), and this consumer makes none, so the hand-back is the
/// only way the producer can wake. Its drop stores the head but wakes nobody (the core's
/// `Drop`), so a missing or late wake-up is a deadlock.
fn spsc_single_pop_wakes_the_full_queues_producer(unfenced: bool, hand_back_first: bool) {
    model(move || {
        let (p, mut c) = full_spsc();
        // Dropped by hand at the end, not by unwinding (see `sleep_until`).
        let futex = core::mem::ManuallyDrop::new(Arc::new(Futex::new()));
        let f2 = Arc::clone(&futex);
        let consumer = thread::spawn(move || {
            let view = c.view().clone();
            let pair = view.space_pair();
            // SeqCst: as the announcement's increment.
            while pair.waiters.load(Ordering::SeqCst) == 0 {
                thread::yield_now();
            }
            let mut out = [0u8; 8];
            assert_eq!(c.try_pop(&mut out), Ok(8));
            assert_eq!(c.unreleased(), 1);
            if pair.sleepers(unfenced) {
                if hand_back_first {
                    c.release();
                    pair.bump();
                } else {
                    pair.bump();
                    c.release();
                }
                f2.wake();
            }
            u64::from_le_bytes(out)
        });
        let view = p.view().clone();
        let p = core::cell::RefCell::new(p);
        sleep_until(view.space_pair(), &futex, || p.borrow_mut().free() > 0);
        assert_eq!(p.borrow_mut().try_push(&5u64.to_le_bytes()), Ok(()));
        assert_eq!(consumer.join().unwrap(), 1);
        drop(core::mem::ManuallyDrop::into_inner(futex));
    });
}

#[test]
fn spsc_single_pop_hands_back_before_it_wakes_the_producer() {
    for unfenced in [true, false] {
        spsc_single_pop_wakes_the_full_queues_producer(unfenced, true);
    }
}

/// The model above is not vacuous: bumped before the hand-back, the producer can be woken,
/// re-check before the head store, announce again on the new word value and sleep through
/// the wake.
#[test]
#[should_panic(expected = "deadlock")]
fn spsc_a_bump_before_the_hand_back_loses_the_wake_up() {
    spsc_single_pop_wakes_the_full_queues_producer(true, false);
}

/// Two queue consumers that each pop one item, sleeping on `data_futex` with `has_item` as
/// the re-check, while a producer pushes two items and notifies after each: neither may
/// sleep while an item is there. (`has_item` once said "no item" when another consumer had
/// taken the position it read and freed its slot: the consumer then slept on the second
/// item, pushed before it announced itself, and no later push came to wake it.)
#[test]
fn two_queue_sleepers_each_get_an_item() {
    use ringwire_core::queue::{PopError, Popped};
    /// A consumer's `pop_timeout` loop without the timeout: pop, else announce, re-check
    /// and sleep.
    fn pop_one(q: &MpmcQueue, futex: &Futex) -> u64 {
        let mut out = [0u8; 8];
        loop {
            match q.try_pop(&mut out) {
                Ok(Popped::Item { .. }) => return u64::from_le_bytes(out),
                Err(PopError::Empty | PopError::Pending { .. }) => {
                    let pair = q.view().data_pair();
                    let announced = pair.announce(|| {}, || q.has_item());
                    if let Some(v) = announced.sleep_on() {
                        futex.wait(pair.word, v);
                    }
                }
                other => panic!("{other:?}"),
            }
        }
    }
    model_bounded(2, || {
        let q = mpmc();
        let futex = Arc::new(Futex::new());
        let (q2, f2) = (q.clone(), futex.clone());
        let w = thread::spawn(move || {
            for v in [7u64, 8] {
                q2.try_push(&v.to_le_bytes()).unwrap();
                if q2.view().notify_data_unfenced() {
                    f2.wake();
                }
            }
        });
        let (q3, f3) = (q.clone(), futex.clone());
        let other = thread::spawn(move || pop_one(&q3, &f3));
        let mine = pop_one(&q, &futex);
        let mut got = [mine, other.join().unwrap()];
        got.sort();
        assert_eq!(got, [7, 8]);
        w.join().unwrap();
    });
}

/// The model is not vacuous: a sleeper that re-checks *before* announcing itself can miss
/// the publish (the producer sees no waiter and does not bump) and sleep forever.
#[test]
#[should_panic(expected = "deadlock")]
fn a_recheck_before_the_announcement_loses_the_wake_up() {
    model(|| {
        let view = ring();
        let futex = Arc::new(Futex::new());
        let mut p = Producer::new(view.clone(), ModelWake(futex.clone())).unwrap();
        let w = thread::spawn(move || p.push(&1u64.to_le_bytes()).unwrap());
        let pair = view.futex();
        while !published(&view, 1) {
            // Acquire: as in FutexPair::announce.
            let v = pair.word.load(Ordering::Acquire);
            if published(&view, 1) {
                break;
            }
            // SeqCst: the announcement, too late.
            pair.waiters.fetch_add(1, Ordering::SeqCst);
            futex.wait(pair.word, v);
            // Relaxed: as in Announced's drop.
            pair.waiters.fetch_sub(1, Ordering::Relaxed);
        }
        w.join().unwrap();
    });
}

/// A gate taking `stale` sleepers for dead: `STALE_SLEEPER_WAKES` wakes that woke nobody
/// over `STALE_SLEEPER_AFTER` from 1 ms on, the count reading `stale`; returns it and the
/// time of its last wake (at which no rationed wake is due before a notify makes the count
/// rise).
fn rationing(stale: u32) -> (WakeGate, u64) {
    let gate = WakeGate::new();
    let n = u64::from(STALE_SLEEPER_WAKES);
    let after = STALE_SLEEPER_AFTER.as_nanos() as u64;
    let mut t = 0;
    for i in 0..n {
        t = 1_000_000 + i * after / (n - 1);
        gate.wake(|| stale, || t, || 0);
    }
    assert!(gate.suspects_stale_sleeper());
    (gate, t)
}

/// A ring whose count holds a sleeper that died asleep, its producer's waker rationing
/// (`WakeGate`, the std `FutexWake`'s): a live reader that sleeps for the next record is
/// still woken by its publish. The clock stands still, so no rationed wake falls due: only
/// the count the reader raised can make the wake.
fn rationed_wake(taken_for_dead: u32) {
    model(move || {
        let view = ring();
        // Relaxed: before any other thread exists.
        view.waiting_consumers().store(1, Ordering::Relaxed);
        let futex = Arc::new(Futex::new());
        let (gate, now) = rationing(taken_for_dead);
        let waker = GatedWake {
            futex: futex.clone(),
            gate,
            now,
        };
        let mut p = Producer::new(view.clone(), waker).unwrap();
        let w = thread::spawn(move || {
            p.push(&1u64.to_le_bytes()).unwrap();
        });
        sleep_until(view.futex(), &futex, || published(&view, 1));
        w.join().unwrap();
        // Relaxed: every thread has joined; the dead sleeper's count stays.
        assert_eq!(view.waiting_consumers().load(Ordering::Relaxed), 1);
    });
}

#[test]
fn a_rationing_producer_still_wakes_a_new_sleeper() {
    rationed_wake(1);
}

/// The model is not vacuous: a gate that takes the live reader's count for dead too (a
/// stale part of 2 while the count is 2) makes no wake, and the reader sleeps forever.
#[test]
#[should_panic(expected = "deadlock")]
fn a_gate_that_takes_a_new_sleeper_for_dead_loses_the_wake_up() {
    rationed_wake(2);
}

/// Two sleepers announce themselves and retire (each re-check finds the record, so neither
/// sleeps) while the count is cleared, as the std SPSC queue's attach of a role clears a
/// dead sleeper's count: in every interleaving the count ends at 0. With a plain decrement,
/// a retire after the clear took it to `u32::MAX`, and every notify after that found a
/// sleeper. A retire that races the other sleeper's announcement retries its CAS.
#[test]
fn retires_racing_a_cleared_count_leave_it_at_zero() {
    model(|| {
        let view = ring();
        let sleepers: Vec<_> = (0..2)
            .map(|_| {
                let v = view.clone();
                thread::spawn(move || drop(v.futex().announce(|| {}, || true)))
            })
            .collect();
        // Relaxed: as the std attach's clear, an RMW as there (a plain store racing the
        // sleepers' RMWs let loom, whose modification order is partial, end the count at 1,
        // an outcome C11's total order on the count forbids).
        view.waiting_consumers().swap(0, Ordering::Relaxed);
        for s in sleepers {
            s.join().unwrap();
        }
        // Relaxed: every thread has joined.
        assert_eq!(view.waiting_consumers().load(Ordering::Relaxed), 0);
        assert!(!view.futex().notify());
    });
}

/// The bound the saturating retire leaves (`FutexPair::waiters`): a sleeper counted before
/// the count was cleared (the std SPSC queue's attach) retires after a newer sleeper has
/// announced itself, and takes its increment; a publish then finds nobody counted, makes no
/// wake, and the newer sleeper's sleep is not ended by it. Here, with no timeout, that sleep
/// never ends, and loom finds the interleaving; a real sleep ends at its timeout (the unit
/// test `futex::tests::a_late_retire_after_a_clear_costs_a_newer_sleeper_one_sleep` shows
/// that only the sleep the late retire lands in is missed). Should the late retire ever be
/// told apart from the newer sleeper's, this model stops deadlocking.
#[test]
#[should_panic(expected = "deadlock")]
fn a_late_retire_after_a_clear_can_leave_a_newer_sleeper_to_its_timeout() {
    model(|| {
        let view = ring();
        let futex = Arc::new(Futex::new());
        // Retired by hand, as in `sleep_until`.
        let mut old = Some(core::mem::ManuallyDrop::new(
            view.futex().announce(|| {}, || false),
        ));
        // Relaxed: before any other thread exists.
        view.waiting_consumers().swap(0, Ordering::Relaxed);
        let mut p = Producer::new(view.clone(), ModelWake(futex.clone())).unwrap();
        let w = thread::spawn(move || {
            p.push(&1u64.to_le_bytes()).unwrap();
        });
        // `sleep_until`, with the late retire in the first sleep, after its announcement
        // (in the place of the barrier, which the unfenced notify models by its fence).
        let pair = view.futex();
        while !published(&view, 1) {
            let late = old.take();
            let announced = core::mem::ManuallyDrop::new(pair.announce(
                || drop(late.map(core::mem::ManuallyDrop::into_inner)),
                || published(&view, 1),
            ));
            if let Some(v) = announced.sleep_on() {
                futex.wait(pair.word, v);
            }
            drop(core::mem::ManuallyDrop::into_inner(announced));
        }
        w.join().unwrap();
    });
}
