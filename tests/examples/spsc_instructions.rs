//! Instructions per item through an SPSC queue, ringwire's typed handles against rtrb, for
//! a count that the machine's noise cannot move (diagnostics for issue 4 line 5; the
//! acceptance benchmark is `spsc_throughput` in `cargo bench -p ringwire-tests --bench
//! queues`, which measures time with two threads).
//!
//! One thread pushes 32 items, then pops 32 and checks each, `ROUNDS` times, so every push
//! and pop finds room or an item and takes the queue's one-item path; the items are `u64`s
//! or 64-byte items (`B64`, eight words, every word checked, as in the benchmark). Only
//! `run_queue` is meant to be counted: run it under callgrind with collection toggled on
//! that function, and divide by the items the program prints (the loop and the checks are
//! the same code for both queues, so the difference between two counts is the queues'):
//!
//! ```text
//! cargo build --release -p ringwire-tests --example spsc_instructions
//! for q in ringwire-u64 rtrb-u64 ringwire-64B rtrb-64B; do
//!   valgrind --tool=callgrind --toggle-collect='*run_queue*' --callgrind-out-file=/dev/null \
//!     target/release/examples/spsc_instructions $q 2>&1 | grep -E 'items|Collected'
//! done
//! ```
//!
//! `ringwire-mpmc-u64`, `crossbeam-u64`, `ringwire-mpmc-64B` and `crossbeam-64B` count the
//! same loop through ringwire's typed MPMC queue and crossbeam's `ArrayQueue` (one handle,
//! shared by the pushing and the popping side through an `Arc`, as between threads), so the
//! MPMC push and pop can be counted the same way.
//!
//! `ringwire-batch-u64`, `rtrb-batch-u64`, `ringwire-batch-64B` and `rtrb-batch-64B` count
//! the batch paths the same way (`run_queue_batch`, which the same toggle matches): one
//! thread fills a buffer of 32 items, pushes it with one call (ringwire's `push_slice`,
//! rtrb's `push_partial_slice`), pops the 32 into a second buffer with one call
//! (`pop_slice`, `pop_partial_slice`) and checks each, `ROUNDS` times. The buffer's filling
//! and the checks are the same code for both queues; what differs is the two calls.
//!
//! `cargo run --release -p ringwire-tests --example spsc_instructions -- QUEUE [ROUNDS]`
use std::hint::black_box;
use std::sync::Arc;

use ringwire_tests::bench_items::{B64, Val};

const CAP: usize = 4096;
const RUN: u64 = 32;

/// One queue under test.
trait Spsc<T> {
    type P;
    type C;
    fn make() -> (Self::P, Self::C);
    fn push(p: &mut Self::P, v: T) -> bool;
    fn pop(c: &mut Self::C) -> Option<T>;
}

struct Ringwire;
impl<T: Val> Spsc<T> for Ringwire {
    type P = ringwire::queue::SpscProducer<T>;
    type C = ringwire::queue::SpscConsumer<T>;
    fn make() -> (Self::P, Self::C) {
        ringwire::queue::spsc_channel::<T>(CAP as u64).expect("anonymous queue")
    }
    #[inline(always)]
    fn push(p: &mut Self::P, v: T) -> bool {
        p.try_push(&v).is_ok()
    }
    #[inline(always)]
    fn pop(c: &mut Self::C) -> Option<T> {
        c.try_pop().expect("no corruption")
    }
}

struct Rtrb;
impl<T: Val> Spsc<T> for Rtrb {
    type P = rtrb::Producer<T>;
    type C = rtrb::Consumer<T>;
    fn make() -> (Self::P, Self::C) {
        rtrb::RingBuffer::new(CAP)
    }
    #[inline(always)]
    fn push(p: &mut Self::P, v: T) -> bool {
        p.push(v).is_ok()
    }
    #[inline(always)]
    fn pop(c: &mut Self::C) -> Option<T> {
        c.pop().ok()
    }
}

struct RingwireMpmc;
impl<T: Val> Spsc<T> for RingwireMpmc {
    type P = Arc<ringwire::queue::MpmcQueue<T>>;
    type C = Arc<ringwire::queue::MpmcQueue<T>>;
    fn make() -> (Self::P, Self::C) {
        let q = Arc::new(
            ringwire::queue::MpmcQueue::<T>::anonymous(CAP as u64).expect("anonymous queue"),
        );
        (q.clone(), q)
    }
    #[inline(always)]
    fn push(p: &mut Self::P, v: T) -> bool {
        p.try_push(&v).is_ok()
    }
    #[inline(always)]
    fn pop(c: &mut Self::C) -> Option<T> {
        c.try_pop().expect("no corruption").0
    }
}

struct Crossbeam;
impl<T: Val> Spsc<T> for Crossbeam {
    type P = Arc<crossbeam_queue::ArrayQueue<T>>;
    type C = Arc<crossbeam_queue::ArrayQueue<T>>;
    fn make() -> (Self::P, Self::C) {
        let q = Arc::new(crossbeam_queue::ArrayQueue::new(CAP));
        (q.clone(), q)
    }
    #[inline(always)]
    fn push(p: &mut Self::P, v: T) -> bool {
        p.push(v).is_ok()
    }
    #[inline(always)]
    fn pop(c: &mut Self::C) -> Option<T> {
        c.pop()
    }
}

/// A queue with a batch API: `push` pushes a prefix of `items` and `pop` fills a prefix of
/// `out`, each returning how many.
trait SpscBatch<T>: Spsc<T> {
    fn push_batch(p: &mut Self::P, items: &[T]) -> usize;
    fn pop_batch(c: &mut Self::C, out: &mut [T]) -> usize;
}

impl<T: Val> SpscBatch<T> for Ringwire {
    #[inline(always)]
    fn push_batch(p: &mut Self::P, items: &[T]) -> usize {
        p.push_slice(items).expect("no corruption")
    }
    #[inline(always)]
    fn pop_batch(c: &mut Self::C, out: &mut [T]) -> usize {
        c.pop_slice(out).expect("no corruption")
    }
}

impl<T: Val> SpscBatch<T> for Rtrb {
    #[inline(always)]
    fn push_batch(p: &mut Self::P, items: &[T]) -> usize {
        p.push_partial_slice(items).0.len()
    }
    #[inline(always)]
    fn pop_batch(c: &mut Self::C, out: &mut [T]) -> usize {
        c.pop_partial_slice(out).0.len()
    }
}

/// The counted part of the batch modes: `rounds` batches of 32 pushed with one call, then
/// popped with one call and checked. Returns the items moved.
#[inline(never)]
fn run_queue_batch<T: Val, Q: SpscBatch<T>>(p: &mut Q::P, c: &mut Q::C, rounds: u64) -> u64 {
    let (mut pushed, mut popped) = (0u64, 0u64);
    let mut inb = [T::default(); RUN as usize];
    let mut out = [T::default(); RUN as usize];
    for _ in 0..rounds {
        for (j, v) in inb.iter_mut().enumerate() {
            *v = T::make(pushed + j as u64);
        }
        let n = Q::push_batch(p, black_box(&inb));
        assert_eq!(n, RUN as usize, "the queue has room for the batch");
        pushed += RUN;
        let n = Q::pop_batch(c, black_box(&mut out));
        assert_eq!(n, RUN as usize, "the batch is ready");
        for v in &out {
            assert!(v.is(popped), "item {popped}: out of order or torn");
            popped += 1;
        }
    }
    popped
}

fn batch<T: Val, Q: SpscBatch<T>>(rounds: u64) -> u64 {
    let (mut p, mut c) = Q::make();
    run_queue_batch::<T, Q>(&mut p, &mut c, rounds)
}

/// The counted part: `rounds` runs of 32 pushes then 32 pops. Returns the items moved.
#[inline(never)]
fn run_queue<T: Val, Q: Spsc<T>>(p: &mut Q::P, c: &mut Q::C, rounds: u64) -> u64 {
    let (mut pushed, mut popped) = (0u64, 0u64);
    for _ in 0..rounds {
        for _ in 0..RUN {
            assert!(Q::push(p, black_box(T::make(pushed))), "the queue has room");
            pushed += 1;
        }
        for _ in 0..RUN {
            let v = Q::pop(c).expect("an item is ready");
            assert!(v.is(popped), "item {popped}: out of order or torn");
            popped += 1;
        }
    }
    popped
}

fn one<T: Val, Q: Spsc<T>>(rounds: u64) -> u64 {
    let (mut p, mut c) = Q::make();
    run_queue::<T, Q>(&mut p, &mut c, rounds)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let queue = args.next().unwrap_or_default();
    let rounds = args
        .next()
        .map(|a| a.parse().expect("ROUNDS: a whole number"))
        .unwrap_or(20_000);
    let items = match queue.as_str() {
        "ringwire-u64" => one::<u64, Ringwire>(rounds),
        "rtrb-u64" => one::<u64, Rtrb>(rounds),
        "ringwire-64B" => one::<B64, Ringwire>(rounds),
        "rtrb-64B" => one::<B64, Rtrb>(rounds),
        "ringwire-mpmc-u64" => one::<u64, RingwireMpmc>(rounds),
        "crossbeam-u64" => one::<u64, Crossbeam>(rounds),
        "ringwire-mpmc-64B" => one::<B64, RingwireMpmc>(rounds),
        "crossbeam-64B" => one::<B64, Crossbeam>(rounds),
        "ringwire-batch-u64" => batch::<u64, Ringwire>(rounds),
        "rtrb-batch-u64" => batch::<u64, Rtrb>(rounds),
        "ringwire-batch-64B" => batch::<B64, Ringwire>(rounds),
        "rtrb-batch-64B" => batch::<B64, Rtrb>(rounds),
        _ => {
            eprintln!(
                "usage: spsc_instructions ringwire-u64|rtrb-u64|ringwire-64B|rtrb-64B|\
                 ringwire-mpmc-u64|crossbeam-u64|ringwire-mpmc-64B|crossbeam-64B|\
                 ringwire-batch-u64|rtrb-batch-u64|ringwire-batch-64B|rtrb-batch-64B [ROUNDS]"
            );
            std::process::exit(2);
        }
    };
    println!("{queue}: {items} items pushed and popped");
}
