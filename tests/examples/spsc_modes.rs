//! SPSC single-item throughput with the failed tries counted (diagnostics for issue 4 line
//! 5, not the acceptance benchmark, which is `spsc_throughput/u64` in
//! `cargo bench -p ringwire-tests --bench queues`).
//!
//! One producer on core 0 pushes `u64`s one at a time into a 4,096-slot queue, one consumer
//! on core 1 pops them one at a time and checks their order; a failed try spins once, as in
//! the criterion bench. Each run prints the time per item and how often a push found the
//! queue full and a pop found it empty. Those counts name the state a run fell into: a queue
//! that stays part full (few failures on either side) against a consumer that keeps catching
//! up (millions of empty pops, each re-reading the producer's index line while the producer
//! writes it). Runs alternate ringwire's typed handles and rtrb.
//!
//! `cargo run --release -p ringwire-tests --example spsc_modes -- [ITEMS] [ROUNDS]`
use std::time::Instant;

use ringwire::bench::floor::pin_to;

const CAP: usize = 4096;

/// One queue under test: a way to build a producer/consumer pair and use it.
trait Spsc {
    type P: Send;
    type C;
    fn make() -> (Self::P, Self::C);
    fn push(p: &mut Self::P, v: u64) -> bool;
    fn pop(c: &mut Self::C) -> Option<u64>;
}

struct Ringwire;
impl Spsc for Ringwire {
    type P = ringwire::queue::SpscProducer<u64>;
    type C = ringwire::queue::SpscConsumer<u64>;
    fn make() -> (Self::P, Self::C) {
        ringwire::queue::spsc_channel::<u64>(CAP as u64).expect("anonymous queue")
    }
    fn push(p: &mut Self::P, v: u64) -> bool {
        p.try_push(&v).is_ok()
    }
    fn pop(c: &mut Self::C) -> Option<u64> {
        c.try_pop().expect("no corruption")
    }
}

struct Rtrb;
impl Spsc for Rtrb {
    type P = rtrb::Producer<u64>;
    type C = rtrb::Consumer<u64>;
    fn make() -> (Self::P, Self::C) {
        rtrb::RingBuffer::new(CAP)
    }
    fn push(p: &mut Self::P, v: u64) -> bool {
        p.push(v).is_ok()
    }
    fn pop(c: &mut Self::C) -> Option<u64> {
        c.pop().ok()
    }
}

/// One run: (ns per item, pushes that found the queue full, pops that found it empty).
fn run<Q: Spsc>(items: u64) -> (f64, u64, u64) {
    let (mut p, mut c) = Q::make();
    std::thread::scope(|s| {
        let producer = s.spawn(move || {
            pin_to(0);
            let mut full = 0;
            let mut i = 0;
            while i < items {
                if Q::push(&mut p, i) {
                    i += 1;
                } else {
                    full += 1;
                    std::hint::spin_loop();
                }
            }
            full
        });
        pin_to(1);
        let t0 = Instant::now();
        let mut empty = 0;
        let mut i = 0;
        while i < items {
            match Q::pop(&mut c) {
                Some(v) => {
                    assert_eq!(v, i, "out of order");
                    i += 1;
                }
                None => {
                    empty += 1;
                    std::hint::spin_loop();
                }
            }
        }
        let per_item = t0.elapsed().as_secs_f64() * 1e9 / items.max(1) as f64;
        (per_item, producer.join().expect("producer"), empty)
    })
}

fn arg(k: usize, default: u64) -> u64 {
    std::env::args()
        .nth(k)
        .map(|a| a.parse().expect("a whole number"))
        .unwrap_or(default)
}

fn main() {
    let items = arg(1, 50_000_000);
    let rounds = arg(2, 3);
    println!("{items} u64 items per run, {CAP}-slot queues, producer core 0, consumer core 1");
    for round in 1..=rounds {
        for (name, (t, full, empty)) in [
            ("ringwire", run::<Ringwire>(items)),
            ("rtrb", run::<Rtrb>(items)),
        ] {
            println!(
                "round {round} {name:8} {t:6.2} ns/item  full pushes {full:>9}  empty pops {empty:>9}"
            );
        }
    }
}
