//! MPMC queue experiment (diagnostics for issue 4 line 5, not the acceptance benchmark, which
//! is `mpmc_2p2c` in `cargo bench -p ringwire-tests --bench queues`).
//!
//! The 2-producer/2-consumer bench runs four threads on two cores, so at any moment each core
//! runs a producer or a consumer: the run is a mix of three phases. This example times each
//! phase alone, ringwire's core `MpmcQueue` against crossbeam's `ArrayQueue` (u64 items),
//! interleaved in rounds, and prints the median ns per item of each:
//!
//! * `contended push`: two producers, one per core, fill a queue large enough to hold it all;
//! * `contended pop`: two consumers, one per core, drain it;
//! * `pipeline`: one producer on core 0 and one consumer on core 1 move the same number of
//!   items through a 4,096-slot queue (a failed try spins once; every 64th yields).
//!
//! `cargo run --release -p ringwire-tests --example mpmc_phases -- [ITEMS_PER_THREAD] [ROUNDS]`
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use ringwire::bench::floor::pin_to;
use ringwire::core::queue::{MpmcQueue as CoreQueue, PopError, Popped, PushError};

/// One of the two queues under test.
trait Queue: Clone + Send + Sync + 'static {
    fn push(&self, v: u64) -> bool;
    fn pop(&self) -> Option<u64>;
}

#[derive(Clone)]
struct Crossbeam(Arc<crossbeam_queue::ArrayQueue<u64>>);
impl Queue for Crossbeam {
    fn push(&self, v: u64) -> bool {
        self.0.push(v).is_ok()
    }
    fn pop(&self) -> Option<u64> {
        self.0.pop()
    }
}

/// The core queue, plus the typed handle that keeps its anonymous mapping alive.
#[derive(Clone)]
struct Ringwire(
    CoreQueue,
    #[allow(dead_code)] ringwire::queue::MpmcQueue<u64>,
);
impl Ringwire {
    fn new(cap: u64) -> Ringwire {
        let h = ringwire::queue::MpmcQueue::<u64>::anonymous(cap).expect("anonymous queue");
        // SAFETY: the copy of the core is kept next to the handle that maps its memory.
        Ringwire(unsafe { *h.core() }, h)
    }
}
impl Queue for Ringwire {
    fn push(&self, v: u64) -> bool {
        match self.0.try_push(&v.to_ne_bytes()) {
            Ok(_) => true,
            Err(PushError::Full) => false,
            Err(e) => panic!("push: {e}"),
        }
    }
    fn pop(&self) -> Option<u64> {
        let mut b = [0u8; 8];
        match self.0.try_pop(&mut b) {
            Ok(Popped::Item { .. }) => Some(u64::from_ne_bytes(b)),
            Ok(p) => panic!("{p:?} without a dead producer"),
            Err(PopError::Empty | PopError::Pending { .. }) => None,
            Err(e) => panic!("pop: {e}"),
        }
    }
}

/// Runs `f(k)` on one thread pinned to each core `k` of 0 and 1, started together; returns
/// the time until both finished and their results.
fn on_both_cores<R: Send + 'static>(
    f: impl Fn(usize) -> R + Send + Sync + 'static,
) -> (Duration, [R; 2]) {
    let f = Arc::new(f);
    let start = Arc::new(Barrier::new(3));
    let hs: Vec<_> = (0..2)
        .map(|k| {
            let (f, start) = (f.clone(), start.clone());
            std::thread::spawn(move || {
                pin_to(k);
                start.wait();
                f(k)
            })
        })
        .collect();
    start.wait();
    let t0 = Instant::now();
    let mut rs = hs.into_iter().map(|h| h.join().expect("worker"));
    let r = [rs.next().expect("two"), rs.next().expect("two")];
    (t0.elapsed(), r)
}

fn per_item(d: Duration, items: u64) -> f64 {
    d.as_nanos() as f64 / items as f64
}

/// (contended push, contended pop, pipeline) in ns per item.
fn phases<Q: Queue>(q: Q, pipe: Q, n: u64) -> [f64; 3] {
    let qp = q.clone();
    let (push, _) = on_both_cores(move |k| {
        for i in 0..n {
            assert!(qp.push(k as u64 * n + i), "the queue holds every item");
        }
    });
    let qc = q.clone();
    let (pop, got) = on_both_cores(move |_| {
        let mut sum = 0u64;
        while let Some(v) = qc.pop() {
            sum = sum.wrapping_add(v);
        }
        sum
    });
    let total = 2 * n;
    assert_eq!(
        got[0].wrapping_add(got[1]),
        total * (total - 1) / 2,
        "every item popped once"
    );
    let (pipeline, _) = on_both_cores(move |k| {
        let mut fails = 0u32;
        let mut wait = || {
            fails += 1;
            if fails.is_multiple_of(64) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        };
        if k == 0 {
            for i in 0..total {
                while !pipe.push(i) {
                    wait();
                }
            }
        } else {
            for i in 0..total {
                let v = loop {
                    match pipe.pop() {
                        Some(v) => break v,
                        None => wait(),
                    }
                };
                assert_eq!(v, i, "one producer: FIFO");
            }
        }
    });
    [
        per_item(push, total),
        per_item(pop, total),
        per_item(pipeline, total),
    ]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args
        .next()
        .map_or(1 << 20, |a| a.parse().expect("ITEMS_PER_THREAD"));
    let rounds: usize = args.next().map_or(5, |a| a.parse().expect("ROUNDS"));
    let cap = (2 * n).next_power_of_two();
    let (mut rw, mut cb) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        rw.push(phases(Ringwire::new(cap), Ringwire::new(4096), n));
        cb.push(phases(
            Crossbeam(Arc::new(crossbeam_queue::ArrayQueue::new(cap as usize))),
            Crossbeam(Arc::new(crossbeam_queue::ArrayQueue::new(4096))),
            n,
        ));
    }
    println!("median ns per item over {rounds} rounds, {n} items per thread:");
    println!("queue                 contended push  contended pop  pipeline 1P1C");
    for (name, runs) in [("ringwire", &rw), ("crossbeam_arrayqueue", &cb)] {
        let col = |i: usize| median(runs.iter().map(|r| r[i]).collect());
        println!(
            "{name:<21} {:>14.1} {:>14.1} {:>14.1}",
            col(0),
            col(1),
            col(2)
        );
    }
}
