//! Queue benchmarks, ringwire's lossless queues against rtrb, crossbeam `ArrayQueue`,
//! crossbeam-channel (bounded), heapless spsc/mpmc, std `sync_channel` and ringfire's lossy
//! MPMC ring and the `disruptor` crate, all in one run, every queue holding 4096 items
//! (heapless mpmc: 64, see `HeaplessMpmc`):
//!
//! * `spsc_throughput/{u64,64B}/{impl}`: one producer thread (core 0) pushes items one at a
//!   time, one consumer thread (core 1) pops them one at a time; time per item.
//! * `spsc_batch64/{u64,64B}/{impl}`: the same with batches of up to 64, for the queues that
//!   have a batch API: ringwire (`push_slice`/`pop_slice`), rtrb
//!   (`push_partial_slice`/`pop_partial_slice`) and the disruptor (`try_batch_publish`, all
//!   64 slots or none, and a poller `take` of up to 64).
//! * `spsc_round_trip/{impl}`: a u64 goes to an echo thread through one queue and comes back
//!   through another; time per round trip.
//! * `mpmc_2p2c/{impl}`: 2 producers and 2 consumers (one of each pinned to each core)
//!   move u64 items; time per item. ringfire's ring is lossy (a producer never waits, it
//!   overwrites): items it dropped count as moved, so its number is not a lossless one.
//!   The disruptor broadcasts every event to every consumer; `disruptor_sharded` has its two
//!   pollers split the items by sequence parity (see `DisruptorMpmc`), so each consumer
//!   reads every slot and a slot frees only when both have passed it.
//!
//! Waiting after a failed try is the same for every queue (`Backoff`; `QBENCH_BACKOFF=exp`
//! selects the second policy for the whole run, and the MPMC group is then named
//! `mpmc_2p2c_exp` so both policies' results can sit side by side), and the MPMC consumers
//! add to their shared progress count in steps of 64, not with one extra contended RMW per
//! item.
//!
//! Every consumer checks the values it receives (order for SPSC, the sum for MPMC), so a
//! broken queue fails the run instead of producing a number.
//!
//! ringwire goes through its public typed handles on anonymous memory (`spsc_channel`,
//! `MpmcQueue::anonymous`), the same code paths as a file-backed queue.
//!
//! `cargo bench -p ringwire-tests --bench queues -- --warm-up-time 1 --measurement-time 3`
//!
//! # Paired mode
//!
//! `cargo bench -p ringwire-tests --bench queues -- --paired [--rounds N] [--json PATH]
//! [FILTER]` runs the same functions without criterion, for the ratios between queues.
//! Criterion measures one queue for seconds, then the next: on a shared VM whose speed
//! drifts over seconds (a criterion run of one queue can go from 11 to 5.5 ns per item
//! between its first and last samples), the ratio of two such figures mixes the queues'
//! difference with the host's. The paired mode runs every queue of a case once per round,
//! back to back, with the same number of items (a trial: millions of items, or 200,000
//! round trips), reversing the order every other round; after one warm-up round it
//! reports each queue's time per item (per round trip for `spsc_round_trip`) over the
//! rounds (median, p10 – p90, min – max; see [`median`] and [`tails`]) and, for each peer,
//! its time divided by ringwire's in the same round (not for `ringfire_lossy`, whose time
//! is not a lossless one). N (default 16) must be even, so that as many rounds run in each
//! order: an odd N is rounded up, with a note on stderr. `--json` writes every trial's
//! figure (cargo runs a bench in its package directory, `tests/`: give an absolute PATH).
//! A FILTER keeps the trials whose `case/queue` contains it.
//!
//! When a 64-byte SPSC case runs, each round also measures the line-transfer floor
//! (`ringwire::bench::floor::line_transfer`, [`FLOOR_LAPS`] laps a prefetch distance, the
//! reader on core 1 and the writer on core 0 as the consumer and producer are): the time per
//! line to read 4,096 lines the other core has just written, and to write lines it has just
//! read, in bulk with no queue protocol, each side at its best prefetch distance. A queue
//! moving 64-byte items between the cores makes both moves for every item, at once, so the
//! report gives each queue's time per item in those cases divided by the larger of that
//! round's two figures, and the JSON holds the floor of every round.

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use ringwire::bench::floor::pin_to;
use ringwire_tests::bench_items::{B64, Val};

const CAP: usize = 4096;
const BATCH: usize = 64;
/// Laps of the line-transfer floor at each prefetch distance, per round of the paired mode.
const FLOOR_LAPS: u64 = 200;

/// Waiting after a failed try, the same for every queue. Two policies, chosen with the
/// environment variable `QBENCH_BACKOFF` (the same for every peer in a run):
///
/// * `spin64` (default): one spin hint per failed try, and every 64th failure gives the
///   core away (`yield_now`).
/// * `exp`: 1, 2, 4, ... 32 hints between tries, then a yield on every further failure
///   until a try succeeds ([`Backoff::reset`]).
///
/// The MPMC runs put two threads on each core, so what a waiter waits for is often a
/// thread descheduled on its own core (a producer between its claim and its publish, or
/// the consumer that would free a slot); how soon a waiter yields decides how soon that
/// thread runs again.
struct Backoff {
    n: u32,
    exp: bool,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            n: 0,
            exp: backoff_exp(),
        }
    }
}

/// Whether `QBENCH_BACKOFF=exp` selected the exponential policy (read once).
fn backoff_exp() -> bool {
    static EXP: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *EXP.get_or_init(|| match std::env::var("QBENCH_BACKOFF").as_deref() {
        Ok("exp") => true,
        Ok("spin64") | Err(_) => false,
        Ok(other) => panic!("QBENCH_BACKOFF={other}: use spin64 or exp"),
    })
}

impl Backoff {
    #[inline(always)]
    fn snooze(&mut self) {
        if !self.exp {
            self.n += 1;
            if self.n < 64 {
                std::hint::spin_loop();
            } else {
                self.n = 0;
                std::thread::yield_now();
            }
        } else if self.n <= 5 {
            for _ in 0..1u32 << self.n {
                std::hint::spin_loop();
            }
            self.n += 1;
        } else {
            std::thread::yield_now();
        }
    }

    #[inline(always)]
    fn reset(&mut self) {
        if self.exp {
            self.n = 0;
        }
    }
}

/// Consumers count what they moved in a shared total that tells them when to stop; they add
/// to it in steps of this many (and whenever a pop fails), so the count is not one more
/// contended RMW per item on top of the queue's own work.
const COUNT_STEP: u64 = 64;

// ---------------------------------------------------------------------------------------
// SPSC adapters

/// A single-producer single-consumer queue under test.
trait Spsc<T: Val> {
    type P: Send;
    type C: Send;
    fn make() -> (Self::P, Self::C);
    fn push(p: &mut Self::P, v: T) -> bool;
    fn pop(c: &mut Self::C) -> Option<T>;
    /// Pushes a prefix of `items`, returns its length; `None`: no batch API.
    fn push_batch(_p: &mut Self::P, _items: &[T]) -> Option<usize> {
        None
    }
    /// Pops into a prefix of `out`, returns its length.
    fn pop_batch(_c: &mut Self::C, _out: &mut [T]) -> Option<usize> {
        None
    }
}

struct Ringwire;
impl<T: Val> Spsc<T> for Ringwire {
    type P = ringwire::queue::SpscProducer<T>;
    type C = ringwire::queue::SpscConsumer<T>;
    fn make() -> (Self::P, Self::C) {
        ringwire::queue::spsc_channel::<T>(CAP as u64).expect("anonymous queue")
    }
    #[inline]
    fn push(p: &mut Self::P, v: T) -> bool {
        p.try_push(&v).is_ok()
    }
    #[inline]
    fn pop(c: &mut Self::C) -> Option<T> {
        c.try_pop().expect("no corruption")
    }
    #[inline]
    fn push_batch(p: &mut Self::P, items: &[T]) -> Option<usize> {
        Some(p.push_slice(items).expect("items fit"))
    }
    #[inline]
    fn pop_batch(c: &mut Self::C, out: &mut [T]) -> Option<usize> {
        Some(c.pop_slice(out).expect("no corruption"))
    }
}

struct Rtrb;
impl<T: Val> Spsc<T> for Rtrb {
    type P = rtrb::Producer<T>;
    type C = rtrb::Consumer<T>;
    fn make() -> (Self::P, Self::C) {
        rtrb::RingBuffer::new(CAP)
    }
    #[inline]
    fn push(p: &mut Self::P, v: T) -> bool {
        p.push(v).is_ok()
    }
    #[inline]
    fn pop(c: &mut Self::C) -> Option<T> {
        c.pop().ok()
    }
    #[inline]
    fn push_batch(p: &mut Self::P, items: &[T]) -> Option<usize> {
        Some(p.push_partial_slice(items).0.len())
    }
    #[inline]
    fn pop_batch(c: &mut Self::C, out: &mut [T]) -> Option<usize> {
        Some(c.pop_partial_slice(out).0.len())
    }
}

struct ArrayQ;
impl<T: Val> Spsc<T> for ArrayQ {
    type P = Arc<crossbeam_queue::ArrayQueue<T>>;
    type C = Arc<crossbeam_queue::ArrayQueue<T>>;
    fn make() -> (Self::P, Self::C) {
        let q = Arc::new(crossbeam_queue::ArrayQueue::new(CAP));
        (q.clone(), q)
    }
    #[inline]
    fn push(p: &mut Self::P, v: T) -> bool {
        p.push(v).is_ok()
    }
    #[inline]
    fn pop(c: &mut Self::C) -> Option<T> {
        c.pop()
    }
}

struct Channel;
impl<T: Val> Spsc<T> for Channel {
    type P = crossbeam_channel::Sender<T>;
    type C = crossbeam_channel::Receiver<T>;
    fn make() -> (Self::P, Self::C) {
        crossbeam_channel::bounded(CAP)
    }
    #[inline]
    fn push(p: &mut Self::P, v: T) -> bool {
        p.try_send(v).is_ok()
    }
    #[inline]
    fn pop(c: &mut Self::C) -> Option<T> {
        c.try_recv().ok()
    }
}

struct StdSync;
impl<T: Val> Spsc<T> for StdSync {
    type P = std::sync::mpsc::SyncSender<T>;
    type C = std::sync::mpsc::Receiver<T>;
    fn make() -> (Self::P, Self::C) {
        std::sync::mpsc::sync_channel(CAP)
    }
    #[inline]
    fn push(p: &mut Self::P, v: T) -> bool {
        p.try_send(v).is_ok()
    }
    #[inline]
    fn pop(c: &mut Self::C) -> Option<T> {
        c.try_recv().ok()
    }
}

/// heapless's queue holds N - 1 items: N = CAP (a power of two, its fast case) gives it
/// one slot fewer than the others, which does not matter at these speeds.
struct HeaplessSpsc;
impl<T: Val> Spsc<T> for HeaplessSpsc {
    type P = heapless::spsc::Producer<'static, T, CAP>;
    type C = heapless::spsc::Consumer<'static, T, CAP>;
    fn make() -> (Self::P, Self::C) {
        // Leaked: heapless's split halves borrow the queue; one per criterion sample.
        let q: &'static mut heapless::spsc::Queue<T, CAP> =
            Box::leak(Box::new(heapless::spsc::Queue::new()));
        q.split()
    }
    #[inline]
    fn push(p: &mut Self::P, v: T) -> bool {
        p.enqueue(v).is_ok()
    }
    #[inline]
    fn pop(c: &mut Self::C) -> Option<T> {
        c.dequeue()
    }
}

/// The `disruptor` crate (an LMAX Disruptor in Rust) used as a queue: one producer, one
/// event poller (the API where the caller owns the consumer thread). Its ring is sized
/// like the others (4096 events, built from `T::default`), `try_publish` fails when full;
/// a pop takes one event (`take(1)`) and releases it when the guard drops.
struct Disruptor;
impl<T: Val> Spsc<T> for Disruptor {
    type P = disruptor::SingleProducer<T, disruptor::SingleConsumerBarrier>;
    type C = disruptor::EventPoller<T, disruptor::SingleProducerBarrier>;
    fn make() -> (Self::P, Self::C) {
        let (poller, builder) =
            disruptor::build_single_producer(CAP, T::default, disruptor::BusySpin)
                .new_event_poller();
        (builder.build(), poller)
    }
    #[inline]
    fn push(p: &mut Self::P, v: T) -> bool {
        use disruptor::Producer as _;
        p.try_publish(|e| *e = v).is_ok()
    }
    #[inline]
    fn pop(c: &mut Self::C) -> Option<T> {
        let mut g = c.take(1).ok()?;
        (&mut g).next().copied()
    }
    #[inline]
    fn push_batch(p: &mut Self::P, items: &[T]) -> Option<usize> {
        use disruptor::Producer as _;
        // All or nothing: the crate publishes a batch only when every slot of it is free.
        let ok = p
            .try_batch_publish(items.len(), |it| {
                for (e, v) in it.zip(items) {
                    *e = *v;
                }
            })
            .is_ok();
        Some(if ok { items.len() } else { 0 })
    }
    #[inline]
    fn pop_batch(c: &mut Self::C, out: &mut [T]) -> Option<usize> {
        let Ok(mut g) = c.take(out.len() as u64) else {
            return Some(0);
        };
        let mut n = 0;
        for (o, e) in out.iter_mut().zip(&mut g) {
            *o = *e;
            n += 1;
        }
        Some(n)
    }
}

/// Time for the consumer to receive `iters` items pushed one by one (or in batches).
fn spsc_throughput<T: Val, Q: Spsc<T>>(iters: u64, batch: bool) -> Duration {
    let (mut p, mut c) = Q::make();
    let start = &Barrier::new(2);
    // Each handle moves into its thread: left on this stack, the two sides' private
    // cursors would share a cache line.
    std::thread::scope(|s| {
        s.spawn(move || {
            pin_to(0);
            start.wait();
            let mut i = 0;
            let mut buf = [T::default(); BATCH];
            while i < iters {
                let n = if batch {
                    let k = (iters - i).min(BATCH as u64) as usize;
                    for (j, b) in buf[..k].iter_mut().enumerate() {
                        *b = T::make(i + j as u64);
                    }
                    Q::push_batch(&mut p, &buf[..k]).expect("batch API") as u64
                } else {
                    u64::from(Q::push(&mut p, T::make(i)))
                };
                if n == 0 {
                    std::hint::spin_loop();
                }
                i += n;
            }
        });
        let consumer = s.spawn(move || {
            pin_to(1);
            start.wait();
            let t0 = Instant::now();
            let mut i = 0;
            let mut buf = [T::default(); BATCH];
            while i < iters {
                if batch {
                    let n = Q::pop_batch(&mut c, &mut buf).expect("batch API");
                    for v in &buf[..n] {
                        assert!(v.is(i), "item {i}: out of order or torn");
                        i += 1;
                    }
                    if n == 0 {
                        std::hint::spin_loop();
                    }
                } else if let Some(v) = Q::pop(&mut c) {
                    assert!(v.is(i), "item {i}: out of order or torn");
                    i += 1;
                } else {
                    std::hint::spin_loop();
                }
            }
            t0.elapsed()
        });
        consumer.join().expect("consumer")
    })
}

/// Time for `iters` round trips of a u64 through two queues and an echo thread.
fn spsc_round_trip<Q: Spsc<u64>>(iters: u64) -> Duration {
    let (mut to_p, mut to_c) = Q::make();
    let (mut back_p, mut back_c) = Q::make();
    let start = &Barrier::new(2);
    // Handles move into their threads (see spsc_throughput).
    std::thread::scope(|s| {
        s.spawn(move || {
            pin_to(1);
            start.wait();
            for _ in 0..iters {
                let v = loop {
                    if let Some(v) = Q::pop(&mut to_c) {
                        break v;
                    }
                    std::hint::spin_loop();
                };
                while !Q::push(&mut back_p, v + 1) {
                    std::hint::spin_loop();
                }
            }
        });
        let pinger = s.spawn(move || {
            pin_to(0);
            start.wait();
            let t0 = Instant::now();
            for i in 0..iters {
                while !Q::push(&mut to_p, i) {
                    std::hint::spin_loop();
                }
                let v = loop {
                    if let Some(v) = Q::pop(&mut back_c) {
                        break v;
                    }
                    std::hint::spin_loop();
                };
                assert_eq!(v, i + 1, "echo");
            }
            t0.elapsed()
        });
        pinger.join().expect("pinger")
    })
}

// ---------------------------------------------------------------------------------------
// MPMC adapters

/// A multi-producer multi-consumer queue under test: `make` gives 2 producer and 2
/// consumer handles.
trait Mpmc {
    type P: Send;
    type C: Send;
    /// True when pushes never fail and may drop items (ringfire's ring).
    const LOSSY: bool = false;
    fn make() -> ([Self::P; 2], [Self::C; 2]);
    fn push(p: &Self::P, v: u64) -> bool;
    fn pop(c: &mut Self::C) -> Option<u64>;
    /// Items this consumer found dropped so far (lossy queues only).
    fn dropped(_c: &Self::C) -> u64 {
        0
    }
}

impl Mpmc for Ringwire {
    type P = ringwire::queue::MpmcQueue<u64>;
    type C = ringwire::queue::MpmcQueue<u64>;
    fn make() -> ([Self::P; 2], [Self::C; 2]) {
        let q = ringwire::queue::MpmcQueue::<u64>::anonymous(CAP as u64).expect("queue");
        ([q.clone(), q.clone()], [q.clone(), q])
    }
    #[inline]
    fn push(p: &Self::P, v: u64) -> bool {
        p.try_push(&v).is_ok()
    }
    #[inline]
    fn pop(c: &mut Self::C) -> Option<u64> {
        match c.try_pop().expect("no corruption") {
            (v, 0) => v,
            (_, healed) => panic!("{healed} healed positions without a dead producer"),
        }
    }
}

/// ringwire's core `MpmcQueue` on the same anonymous memory, without the typed handle's
/// sleeper check: shows what the std layer costs.
struct RingwireCore;
impl Mpmc for RingwireCore {
    // The typed handle keeps the mapping alive.
    type P = (
        ringwire::core::queue::MpmcQueue,
        ringwire::queue::MpmcQueue<u64>,
    );
    type C = Self::P;
    fn make() -> ([Self::P; 2], [Self::C; 2]) {
        let q = ringwire::queue::MpmcQueue::<u64>::anonymous(CAP as u64).expect("queue");
        // SAFETY: each copy of the core travels with a clone of the handle, which keeps
        // the mapping alive as long as the copy.
        let h = || (unsafe { *q.core() }, q.clone());
        ([h(), h()], [h(), h()])
    }
    #[inline]
    fn push(p: &Self::P, v: u64) -> bool {
        p.0.try_push(&v.to_ne_bytes()).is_ok()
    }
    #[inline]
    fn pop(c: &mut Self::C) -> Option<u64> {
        let mut b = [0u8; 8];
        match c.0.try_pop(&mut b) {
            Ok(ringwire::core::queue::Popped::Item { .. }) => Some(u64::from_ne_bytes(b)),
            Ok(healed) => panic!("{healed:?} without a dead producer"),
            Err(_) => None,
        }
    }
}

impl Mpmc for ArrayQ {
    type P = Arc<crossbeam_queue::ArrayQueue<u64>>;
    type C = Arc<crossbeam_queue::ArrayQueue<u64>>;
    fn make() -> ([Self::P; 2], [Self::C; 2]) {
        let q = Arc::new(crossbeam_queue::ArrayQueue::new(CAP));
        ([q.clone(), q.clone()], [q.clone(), q])
    }
    #[inline]
    fn push(p: &Self::P, v: u64) -> bool {
        p.push(v).is_ok()
    }
    #[inline]
    fn pop(c: &mut Self::C) -> Option<u64> {
        c.pop()
    }
}

impl Mpmc for Channel {
    type P = crossbeam_channel::Sender<u64>;
    type C = crossbeam_channel::Receiver<u64>;
    fn make() -> ([Self::P; 2], [Self::C; 2]) {
        let (s, r) = crossbeam_channel::bounded(CAP);
        ([s.clone(), s], [r.clone(), r])
    }
    #[inline]
    fn push(p: &Self::P, v: u64) -> bool {
        p.try_send(v).is_ok()
    }
    #[inline]
    fn pop(c: &mut Self::C) -> Option<u64> {
        c.try_recv().ok()
    }
}

/// heapless 0.8.0's `mpmc_large` feature (capacities above 128) loses items (fixed after
/// 0.8.0, heapless PR #462), and without it the stamps are compared as `i8`, which stalls
/// at 128 slots; so this one holds 64 items, not 4096.
struct HeaplessMpmc;
impl Mpmc for HeaplessMpmc {
    type P = &'static heapless::mpmc::MpMcQueue<u64, 64>;
    type C = &'static heapless::mpmc::MpMcQueue<u64, 64>;
    fn make() -> ([Self::P; 2], [Self::C; 2]) {
        // Leaked: one per criterion sample (1 KiB).
        let q: &'static _ = Box::leak(Box::new(heapless::mpmc::MpMcQueue::new()));
        ([q, q], [q, q])
    }
    #[inline]
    fn push(p: &Self::P, v: u64) -> bool {
        p.enqueue(v).is_ok()
    }
    #[inline]
    fn pop(c: &mut Self::C) -> Option<u64> {
        c.dequeue()
    }
}

/// ringfire's §8 MPMC ring (lossy) in a /dev/shm file, with competing consumers.
struct Ringfire;
impl Mpmc for Ringfire {
    type P = Arc<ringfire::MpmcProducer<u64>>;
    type C = ringfire::MpmcQueueConsumer<u64>;
    const LOSSY: bool = true;
    fn make() -> ([Self::P; 2], [Self::C; 2]) {
        static N: AtomicU64 = AtomicU64::new(0);
        let path = PathBuf::from(format!(
            "/dev/shm/rw-qbench-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_file(&path);
        let p = Arc::new(ringfire::MpmcProducer::<u64>::create(&path, CAP as u64).expect("ring"));
        let c0 = ringfire::MpmcQueueConsumer::<u64>::attach(&path).expect("consumer");
        let c1 = ringfire::MpmcQueueConsumer::<u64>::attach(&path).expect("consumer");
        // The mappings stay valid after the name is gone.
        let _ = std::fs::remove_file(&path);
        ([p.clone(), p], [c0, c1])
    }
    #[inline]
    fn push(p: &Self::P, v: u64) -> bool {
        p.push(&v);
        true
    }
    #[inline]
    fn pop(c: &mut Self::C) -> Option<u64> {
        c.try_recv()
    }
    fn dropped(c: &Self::C) -> u64 {
        c.dropped_count()
    }
}

/// The `disruptor` crate with 2 producers (`build_multi_producer`, one cloned handle per
/// producer thread) and 2 event pollers. A disruptor broadcasts: every poller sees every
/// event, and a slot is free again only once both have passed it. The usual way to share
/// work among disruptor consumers is to shard by sequence, which this does: poller k keeps
/// the events whose sequence is k modulo 2 and skips the others, so each item is consumed
/// exactly once but every poller reads every slot. A pop takes up to 64 events and buffers
/// the ones it keeps (the disruptor's own batch mode).
struct DisruptorMpmc;

/// One poller of [`DisruptorMpmc`]: its shard, the next sequence it will see, and the items
/// of its shard taken from the ring but not yet popped.
struct DisruptorShard {
    poller: disruptor::EventPoller<u64, disruptor::MultiProducerBarrier>,
    shard: u64,
    next_seq: u64,
    kept: std::collections::VecDeque<u64>,
}

impl Mpmc for DisruptorMpmc {
    // `try_publish` takes `&mut self`; each producer thread owns its own handle.
    type P = std::cell::RefCell<disruptor::MultiProducer<u64, disruptor::MultiConsumerBarrier>>;
    type C = DisruptorShard;
    fn make() -> ([Self::P; 2], [Self::C; 2]) {
        let b = disruptor::build_multi_producer(CAP, || 0u64, disruptor::BusySpin);
        let (p0, b) = b.new_event_poller();
        let (p1, b) = b.new_event_poller();
        let prod = b.build();
        let shard = |poller, shard| DisruptorShard {
            poller,
            shard,
            next_seq: 0,
            kept: std::collections::VecDeque::with_capacity(BATCH),
        };
        (
            [prod.clone().into(), prod.into()],
            [shard(p0, 0), shard(p1, 1)],
        )
    }
    #[inline]
    fn push(p: &Self::P, v: u64) -> bool {
        use disruptor::Producer as _;
        p.borrow_mut().try_publish(|e| *e = v).is_ok()
    }
    #[inline]
    fn pop(c: &mut Self::C) -> Option<u64> {
        if c.kept.is_empty() {
            let mut g = c.poller.take(BATCH as u64).ok()?;
            for &v in &mut g {
                if c.next_seq % 2 == c.shard {
                    c.kept.push_back(v);
                }
                c.next_seq += 1;
            }
        }
        c.kept.pop_front()
    }
}

/// Time for 2 producers and 2 consumers to move `iters` u64 items (rounded up to even).
fn mpmc_2p2c<Q: Mpmc>(iters: u64) -> Duration {
    let half = iters.div_ceil(2);
    let total = 2 * half;
    let (ps, cs) = Q::make();
    let moved = AtomicU64::new(0);
    let sum = AtomicU64::new(0);
    let start = Barrier::new(5);
    let t0 = std::thread::scope(|s| {
        for (k, p) in ps.into_iter().enumerate() {
            let start = &start;
            s.spawn(move || {
                pin_to(k);
                start.wait();
                let mut b = Backoff::default();
                for i in 0..half {
                    while !Q::push(&p, k as u64 * half + i) {
                        b.snooze();
                    }
                    b.reset();
                }
            });
        }
        for (k, mut c) in cs.into_iter().enumerate() {
            let (start, moved, sum) = (&start, &moved, &sum);
            s.spawn(move || {
                pin_to(k);
                start.wait();
                let (mut mine, mut dropped, mut acc, mut unsaid) = (0u64, 0u64, 0u64, 0u64);
                let mut b = Backoff::default();
                let deadline = Instant::now() + Duration::from_secs(30);
                loop {
                    if let Some(v) = Q::pop(&mut c) {
                        acc = acc.wrapping_add(v);
                        mine += 1;
                        unsaid += 1;
                        b.reset();
                        if unsaid == COUNT_STEP {
                            // Relaxed: a progress counter; the scope's join orders the sums.
                            moved.fetch_add(unsaid, Ordering::Relaxed);
                            unsaid = 0;
                        }
                        continue;
                    }
                    let d = Q::dropped(&c);
                    unsaid += d - dropped;
                    dropped = d;
                    // Relaxed: as above. Every item popped so far is counted before the
                    // check, so the last one popped ends both consumers' loops.
                    let now = if unsaid > 0 {
                        moved.fetch_add(unsaid, Ordering::Relaxed) + unsaid
                    } else {
                        // Relaxed: as above.
                        moved.load(Ordering::Relaxed)
                    };
                    unsaid = 0;
                    if now >= total {
                        break;
                    }
                    assert!(Instant::now() < deadline, "MPMC run stalled");
                    b.snooze();
                }
                black_box(mine);
                // Relaxed: read after the scope joins this thread.
                sum.fetch_add(acc, Ordering::Relaxed);
            });
        }
        start.wait();
        Instant::now()
    });
    // The scope has joined every thread: the last item was moved.
    let elapsed = t0.elapsed();
    if !Q::LOSSY {
        // Relaxed: every writer has been joined.
        assert_eq!(
            sum.load(Ordering::Relaxed),
            total * (total - 1) / 2,
            "lost items"
        );
    }
    elapsed
}

// ---------------------------------------------------------------------------------------

/// The criterion groups: one per case of [`trials`], in its order, each queue a bench.
fn benches(c: &mut Criterion) {
    let trials = trials();
    for (case, idx) in by_case(&trials) {
        let mut g = c.benchmark_group(case);
        if !case.contains("round_trip") {
            g.throughput(Throughput::Elements(1));
        }
        for i in idx {
            let run = trials[i].run;
            g.bench_function(trials[i].queue, |b| b.iter_custom(run));
        }
        g.finish();
    }
}

// ---------------------------------------------------------------------------------------
// Paired mode

/// One trial of the paired mode: a case, a queue, and the run that times `items` of it.
struct Trial {
    case: &'static str,
    queue: &'static str,
    items: u64,
    run: fn(u64) -> Duration,
    /// The queue drops items (ringfire's ring): its time has no ratio to ringwire's.
    lossy: bool,
}

/// Every case (a criterion group) and its queues, for both modes; in the paired mode each
/// queue of a case moves the same number of items (ringwire and rtrb take tens of
/// milliseconds per trial, the slowest peers under a second).
fn trials() -> Vec<Trial> {
    fn t(case: &'static str, queue: &'static str, items: u64, run: fn(u64) -> Duration) -> Trial {
        Trial {
            case,
            queue,
            items,
            run,
            lossy: false,
        }
    }
    const ONE: u64 = 10_000_000;
    const BATCHED: u64 = 20_000_000;
    const ROUND_TRIPS: u64 = 200_000;
    const MPMC: u64 = 4_000_000;
    let mpmc = mpmc_case();
    let mut v = vec![
        t("spsc_throughput/u64", "ringwire", ONE, |n| {
            spsc_throughput::<u64, Ringwire>(n, false)
        }),
        t("spsc_throughput/u64", "rtrb", ONE, |n| {
            spsc_throughput::<u64, Rtrb>(n, false)
        }),
        t("spsc_throughput/u64", "crossbeam_arrayqueue", ONE, |n| {
            spsc_throughput::<u64, ArrayQ>(n, false)
        }),
        t("spsc_throughput/u64", "crossbeam_channel", ONE, |n| {
            spsc_throughput::<u64, Channel>(n, false)
        }),
        t("spsc_throughput/u64", "heapless_spsc", ONE, |n| {
            spsc_throughput::<u64, HeaplessSpsc>(n, false)
        }),
        t("spsc_throughput/u64", "std_sync_channel", ONE, |n| {
            spsc_throughput::<u64, StdSync>(n, false)
        }),
        t("spsc_throughput/u64", "disruptor", ONE, |n| {
            spsc_throughput::<u64, Disruptor>(n, false)
        }),
        t("spsc_batch64/u64", "ringwire", BATCHED, |n| {
            spsc_throughput::<u64, Ringwire>(n, true)
        }),
        t("spsc_batch64/u64", "rtrb", BATCHED, |n| {
            spsc_throughput::<u64, Rtrb>(n, true)
        }),
        t("spsc_batch64/u64", "disruptor", BATCHED, |n| {
            spsc_throughput::<u64, Disruptor>(n, true)
        }),
        t("spsc_throughput/64B", "ringwire", ONE, |n| {
            spsc_throughput::<B64, Ringwire>(n, false)
        }),
        t("spsc_throughput/64B", "rtrb", ONE, |n| {
            spsc_throughput::<B64, Rtrb>(n, false)
        }),
        t("spsc_throughput/64B", "crossbeam_arrayqueue", ONE, |n| {
            spsc_throughput::<B64, ArrayQ>(n, false)
        }),
        t("spsc_throughput/64B", "crossbeam_channel", ONE, |n| {
            spsc_throughput::<B64, Channel>(n, false)
        }),
        t("spsc_throughput/64B", "heapless_spsc", ONE, |n| {
            spsc_throughput::<B64, HeaplessSpsc>(n, false)
        }),
        t("spsc_throughput/64B", "std_sync_channel", ONE, |n| {
            spsc_throughput::<B64, StdSync>(n, false)
        }),
        t("spsc_throughput/64B", "disruptor", ONE, |n| {
            spsc_throughput::<B64, Disruptor>(n, false)
        }),
        t("spsc_batch64/64B", "ringwire", BATCHED, |n| {
            spsc_throughput::<B64, Ringwire>(n, true)
        }),
        t("spsc_batch64/64B", "rtrb", BATCHED, |n| {
            spsc_throughput::<B64, Rtrb>(n, true)
        }),
        t("spsc_batch64/64B", "disruptor", BATCHED, |n| {
            spsc_throughput::<B64, Disruptor>(n, true)
        }),
        t(
            "spsc_round_trip",
            "ringwire",
            ROUND_TRIPS,
            spsc_round_trip::<Ringwire>,
        ),
        t(
            "spsc_round_trip",
            "rtrb",
            ROUND_TRIPS,
            spsc_round_trip::<Rtrb>,
        ),
        t(
            "spsc_round_trip",
            "crossbeam_arrayqueue",
            ROUND_TRIPS,
            spsc_round_trip::<ArrayQ>,
        ),
        t(
            "spsc_round_trip",
            "crossbeam_channel",
            ROUND_TRIPS,
            spsc_round_trip::<Channel>,
        ),
        t(
            "spsc_round_trip",
            "heapless_spsc",
            ROUND_TRIPS,
            spsc_round_trip::<HeaplessSpsc>,
        ),
        t(
            "spsc_round_trip",
            "std_sync_channel",
            ROUND_TRIPS,
            spsc_round_trip::<StdSync>,
        ),
        t(
            "spsc_round_trip",
            "disruptor",
            ROUND_TRIPS,
            spsc_round_trip::<Disruptor>,
        ),
        t(mpmc, "ringwire", MPMC, mpmc_2p2c::<Ringwire>),
        t(mpmc, "ringwire_core", MPMC, mpmc_2p2c::<RingwireCore>),
        t(mpmc, "crossbeam_arrayqueue", MPMC, mpmc_2p2c::<ArrayQ>),
        t(mpmc, "crossbeam_channel", MPMC, mpmc_2p2c::<Channel>),
        t(mpmc, "disruptor_sharded", MPMC, mpmc_2p2c::<DisruptorMpmc>),
        Trial {
            lossy: Ringfire::LOSSY,
            ..t(mpmc, "ringfire_lossy", MPMC, mpmc_2p2c::<Ringfire>)
        },
    ];
    // heapless's u8 cursors wrap every 256 positions: a consumer preempted between its
    // cursor load and its CAS can succeed on a stale position (ABA) and wedge the queue,
    // which happens when the 4 threads share fewer than 4 cores. Run it only where each
    // thread can have its own core.
    if heapless_mpmc_runs() {
        v.push(t(mpmc, "heapless_mpmc", MPMC, mpmc_2p2c::<HeaplessMpmc>));
    } else {
        eprintln!(
            "{mpmc}/heapless_mpmc skipped: fewer than 4 CPUs (see `trials` in tests/benches/queues.rs)"
        );
    }
    v
}

/// Whether [`trials`] includes heapless_mpmc: only with at least 4 CPUs (see there).
fn heapless_mpmc_runs() -> bool {
    std::thread::available_parallelism().map_or(0, |n| n.get()) >= 4
}

/// The MPMC group's name: `mpmc_2p2c_exp` under `QBENCH_BACKOFF=exp`, so both policies'
/// results can sit side by side.
fn mpmc_case() -> &'static str {
    if backoff_exp() {
        "mpmc_2p2c_exp"
    } else {
        "mpmc_2p2c"
    }
}

/// The trials' cases in order, each with the indices of its trials (a case's trials are
/// adjacent in [`trials`]).
fn by_case(trials: &[Trial]) -> Vec<(&'static str, Vec<usize>)> {
    let mut out: Vec<(&'static str, Vec<usize>)> = Vec::new();
    for (i, t) in trials.iter().enumerate() {
        match out.last_mut() {
            Some((case, idx)) if *case == t.case => idx.push(i),
            _ => out.push((t.case, vec![i])),
        }
    }
    out
}

/// The median of the figures (the mean of the two middle ones for an even count).
fn median(figures: &[f64]) -> f64 {
    ringwire::bench::median_min_max(figures).map_or(f64::NAN, |m| m.0)
}

/// p10 and p90, nearest rank counted from each end ([`ringwire::bench::nearest_rank_tails`]).
fn tails(sorted: &[f64], p: usize) -> (f64, f64) {
    ringwire::bench::nearest_rank_tails(sorted, p)
}

fn sorted(v: impl IntoIterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = v.into_iter().collect();
    v.sort_by(f64::total_cmp);
    v
}

/// The report's three cells for a set of figures: `median | p10 – p90 | min – max`, each
/// number followed by `unit` (`" ns"`, or `""` for a ratio).
fn spread_cells(v: impl IntoIterator<Item = f64>, unit: &str) -> String {
    let v = sorted(v);
    let (p10, p90) = tails(&v, 10);
    format!(
        "{:.2}{unit} | {p10:.2} – {p90:.2}{unit} | {:.2} – {:.2}{unit}",
        median(&v),
        v[0],
        v[v.len() - 1]
    )
}

/// The paired report's floor section: the line-transfer floor over the rounds, and each
/// queue's time per item in the 64-byte SPSC cases divided by the same round's read figure.
fn print_floor(
    trials: &[Trial],
    cases: &[(&'static str, Vec<usize>)],
    figures: &[Vec<f64>],
    floors: &[ringwire::bench::floor::LineTransfer],
) {
    println!(
        "\n### Line-transfer floor (per round, {} lines, {FLOOR_LAPS} laps a prefetch distance)\n",
        ringwire::bench::floor::TRANSFER_LINES
    );
    println!(
        "Each round's figure is the median lap of `ringwire::bench::floor::line_transfer` (the `line transfer` of `ringwire bench floor`): core 1 reads every word of 4,096 lines core 0 has just written, and core 0 writes lines core 1 has just read, in bulk, with no queue protocol, each at the prefetch distance with the lowest median (core 0 prefetches for writing where the CPU can). A queue moving 64-byte items makes both moves for every item, the producer's and the consumer's at once: the larger of the two figures bounds its time per item.\n"
    );
    println!("| figure | per line: median | p10 – p90 | min – max |");
    println!("|---|---:|---:|---:|");
    println!(
        "| read (lines the other core wrote) | {} |",
        spread_cells(floors.iter().map(|f| f.read.p50), " ns")
    );
    println!(
        "| write (lines the other core read) | {} |",
        spread_cells(floors.iter().map(|f| f.write.p50), " ns")
    );
    println!(
        "\n| case | implementation | time per item ÷ the floor (the larger of read and write), same round: median | p10 – p90 | min – max |"
    );
    println!("|---|---|---:|---:|---:|");
    for (case, idx) in cases.iter().filter(|(c, _)| c.ends_with("/64B")) {
        for &i in idx {
            let q = figures[i]
                .iter()
                .zip(floors)
                .map(|(x, f)| x / f.read.p50.max(f.write.p50));
            println!(
                "| `{case}` | {} | {} |",
                trials[i].queue,
                spread_cells(q, "")
            );
        }
    }
}

/// `--paired [--rounds N] [--json PATH] [FILTER]`: every queue of a case runs in every
/// round, back to back, the order reversed every other round (N even: an odd one is rounded
/// up); the ratio to ringwire is taken within a round. See the module docs.
fn paired(args: &[String]) {
    let mut rounds = 16usize;
    let mut json = None;
    let mut filter = String::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--paired" | "--bench" => {}
            "--rounds" => {
                rounds = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|&n| n > 0)
                    .expect("--rounds takes a whole number above 0");
            }
            "--json" => json = Some(PathBuf::from(it.next().expect("--json takes a path"))),
            f if !f.starts_with('-') => filter = f.to_owned(),
            other => {
                panic!("unknown argument {other} (--paired [--rounds N] [--json PATH] [FILTER])")
            }
        }
    }
    if rounds % 2 == 1 {
        eprintln!(
            "paired: --rounds {rounds} is odd: running {} so that as many rounds run in each order",
            rounds + 1
        );
        rounds += 1;
    }
    let trials: Vec<Trial> = trials()
        .into_iter()
        .filter(|t| format!("{}/{}", t.case, t.queue).contains(&filter))
        .collect();
    let cases = by_case(&trials);
    eprintln!(
        "paired: {} trials, {rounds} rounds after one warm-up round",
        trials.len()
    );
    for t in &trials {
        black_box((t.run)(t.items));
    }
    // figures[trial][round]: time per item (per round trip for the round trip) in ns.
    let mut figures = vec![Vec::with_capacity(rounds); trials.len()];
    let with_floor = trials.iter().any(|t| t.case.ends_with("/64B"));
    // floors[round]: the line-transfer floor measured in that round.
    let mut floors = Vec::with_capacity(rounds);
    for r in 0..rounds {
        if with_floor {
            // In a thread of its own: `line_transfer` pins the thread that calls it, and
            // the trials' threads inherit this one's CPUs.
            let f = std::thread::spawn(|| {
                ringwire::bench::floor::line_transfer(FLOOR_LAPS, Some((1, 0)))
            });
            floors.push(f.join().expect("line transfer"));
        }
        for (_, idx) in &cases {
            let order: Box<dyn Iterator<Item = &usize>> = if r % 2 == 1 {
                Box::new(idx.iter().rev())
            } else {
                Box::new(idx.iter())
            };
            for &i in order {
                let t = &trials[i];
                let d = (t.run)(t.items);
                figures[i].push(d.as_secs_f64() * 1e9 / t.items as f64);
            }
        }
        eprintln!("paired: round {}/{rounds} done", r + 1);
    }
    println!(
        "Paired runs: {rounds} rounds (after one warm-up round); in each round every queue of a case runs once, back to back, in reverse order every other round."
    );
    for (case, idx) in &cases {
        let base = idx.iter().copied().find(|&i| trials[i].queue == "ringwire");
        let (units, unit) = if case.contains("round_trip") {
            ("round trips", "round trip")
        } else {
            ("items", "item")
        };
        println!(
            "\n### `{case}` (paired, {} {units} per trial)\n",
            trials[idx[0]].items
        );
        println!(
            "| implementation | time per {unit}: median | p10 – p90 | min – max | this ÷ ringwire, same round: median | p10 – p90 | min – max |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|");
        for &i in idx {
            let ratio = match base {
                // A lossy queue's time counts dropped items as moved: no ratio.
                _ if trials[i].lossy => "n/a (lossy) | – | –".to_owned(),
                Some(b) if b != i => {
                    spread_cells(figures[i].iter().zip(&figures[b]).map(|(x, y)| x / y), "")
                }
                Some(_) => "1.00 | – | –".to_owned(),
                // The filter left ringwire out of this case.
                None => "– | – | –".to_owned(),
            };
            println!(
                "| {} | {} | {ratio} |",
                trials[i].queue,
                spread_cells(figures[i].iter().copied(), " ns")
            );
        }
        for &i in idx.iter().filter(|&&i| trials[i].lossy) {
            println!(
                "\n`{}`: ringfire's MPMC ring is lossy (a producer never waits, it overwrites); items it dropped count as moved, so its time per item is not a lossless figure and does not compare with the other rows' time per delivered item: no ratio to ringwire is given.",
                trials[i].queue
            );
        }
        if *case == mpmc_case()
            && !heapless_mpmc_runs()
            && format!("{case}/heapless_mpmc").contains(&filter)
        {
            println!(
                "\n`heapless_mpmc`: not measured, skipped on fewer than 4 CPUs (this machine: {}): heapless's u8 cursors can wedge the queue (ABA) when its four threads share cores (see `trials` in tests/benches/queues.rs).",
                std::thread::available_parallelism().map_or(0, |n| n.get())
            );
        }
    }
    if with_floor {
        print_floor(&trials, &cases, &figures, &floors);
    }
    if let Some(path) = json {
        let rows: Vec<serde_json::Value> = trials
            .iter()
            .zip(&figures)
            .map(|(t, f)| {
                serde_json::json!({"case": t.case, "queue": t.queue, "items": t.items, "ns_per_item": f})
            })
            .collect();
        let mut doc = serde_json::json!({"rounds": rounds, "trials": rows});
        if with_floor {
            doc["line_transfer"] = serde_json::json!({
                "lines": ringwire::bench::floor::TRANSFER_LINES,
                "read_ns_per_line": floors.iter().map(|f| f.read.p50).collect::<Vec<_>>(),
                "read_ahead_lines": floors.iter().map(|f| f.read_ahead).collect::<Vec<_>>(),
                "write_ns_per_line": floors.iter().map(|f| f.write.p50).collect::<Vec<_>>(),
                "write_ahead_lines": floors.iter().map(|f| f.write_ahead).collect::<Vec<_>>(),
            });
        }
        std::fs::write(&path, serde_json::to_string_pretty(&doc).expect("json"))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--paired") {
        paired(&args);
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
}
