//! Instructions per item through the broadcast ring, ringwire's `RingProducer` and
//! `RingConsumer` against ringfire 0.5.2's, for a count that the machine's noise cannot
//! move (timing one hand-off, ~100 ns, is mostly the cache lines' travel between cores;
//! this counts what each side executes around it).
//!
//! One thread creates a lossy ring of 4096 slots in a `/dev/shm` file (removed at the end)
//! and attaches a consumer at its head; then, `ROUNDS` times, it pushes 32 records and
//! receives those 32, one `try_recv` at a time or with one `recv_batch` into a 32-record
//! buffer, checking every value (the order, and every word of a 64-byte record). The
//! consumer is never lapped, so every push takes the lossy path and every receive finds its
//! record. The records are `u64`s or 64-byte items (`B64`, a 72-byte slot).
//!
//! Only `run_ring` is meant to be counted: run it under callgrind with collection toggled
//! on that function, and divide by the items the program prints (the loop and the checks
//! are the same code for both crates, so the difference between two counts is the rings').
//! `push_run` and `recv_run`, which it calls once per round, split the count into the
//! producer's part and the consumer's:
//!
//! ```text
//! cargo build --release -p ringwire-tests --example ring_instructions
//! for m in ringwire-u64 ringfire-u64 ringwire-u64-batch ringfire-u64-batch \
//!          ringwire-64B ringfire-64B ringwire-64B-batch ringfire-64B-batch; do
//!   for f in run_ring push_run recv_run; do
//!     valgrind --tool=callgrind --toggle-collect="*$f*" --callgrind-out-file=/dev/null \
//!       target/release/examples/ring_instructions $m 2>&1 | grep -E 'items|Collected'
//!   done
//! done
//! ```
//!
//! `callgrind_annotate` on a file written with `--callgrind-out-file=FILE` (and
//! `--dump-instr=yes` for `--auto=yes` per-line costs) shows where the instructions go.
//!
//! `cargo run --release -p ringwire-tests --example ring_instructions -- MODE [ROUNDS]`
use std::hint::black_box;
use std::path::Path;

use ringwire_tests::bench_items::{B64, Val};
use ringwire_tests::shm::ShmPath;

const CAP: u64 = 4096;
const RUN: usize = 32;

/// One broadcast ring under test.
trait Ring<T> {
    type P;
    type C;
    fn make(path: &Path) -> (Self::P, Self::C);
    fn push(p: &mut Self::P, v: &T);
    fn try_recv(c: &mut Self::C) -> Option<T>;
    fn recv_batch(c: &mut Self::C, buf: &mut [T]) -> usize;
}

/// The two crates' handles have the same shape: one adapter for each, from one template.
macro_rules! ring_adapter {
    ($name:ident, $krate:ident) => {
        struct $name;
        impl<T: Val> Ring<T> for $name {
            type P = $krate::RingProducer<T>;
            type C = $krate::RingConsumer<T>;
            fn make(path: &Path) -> (Self::P, Self::C) {
                let p = $krate::RingProducer::<T>::create(path, CAP).expect("create the ring");
                let c = $krate::RingConsumer::<T>::builder()
                    .start_from_head()
                    .attach(path)
                    .expect("attach a consumer");
                (p, c)
            }
            #[inline(always)]
            fn push(p: &mut Self::P, v: &T) {
                p.push(v);
            }
            #[inline(always)]
            fn try_recv(c: &mut Self::C) -> Option<T> {
                c.try_recv()
            }
            #[inline(always)]
            fn recv_batch(c: &mut Self::C, buf: &mut [T]) -> usize {
                c.recv_batch(buf)
            }
        }
    };
}

ring_adapter!(Ringwire, ringwire);
ring_adapter!(Ringfire, ringfire);

/// The producer's part of a round: records `first..first + 32`.
#[inline(never)]
fn push_run<T: Val, R: Ring<T>>(p: &mut R::P, first: u64) {
    for i in 0..RUN as u64 {
        R::push(p, &black_box(T::make(first + i)));
    }
}

/// The consumer's part of a round: receives records `first..first + 32` and checks each.
#[inline(never)]
fn recv_run<T: Val, R: Ring<T>>(c: &mut R::C, first: u64, batch: bool, buf: &mut [T; RUN]) {
    if batch {
        let n = R::recv_batch(c, buf);
        assert_eq!(n, RUN, "a batch of {RUN} is ready at {first}");
        for (i, v) in buf.iter().enumerate() {
            let want = first + i as u64;
            assert!(v.is(want), "record {want}: out of order, lost or torn");
        }
    } else {
        for i in 0..RUN as u64 {
            let v = R::try_recv(c).expect("a record is ready");
            assert!(
                v.is(first + i),
                "record {}: out of order, lost or torn",
                first + i
            );
        }
    }
}

/// The counted part: `rounds` runs of 32 pushes then 32 receives. Returns the items moved.
#[inline(never)]
fn run_ring<T: Val, R: Ring<T>>(p: &mut R::P, c: &mut R::C, rounds: u64, batch: bool) -> u64 {
    let mut buf = [T::default(); RUN];
    let mut next = 0u64;
    for _ in 0..rounds {
        push_run::<T, R>(p, next);
        recv_run::<T, R>(c, next, batch, &mut buf);
        next += RUN as u64;
    }
    assert!(
        R::try_recv(c).is_none(),
        "nothing beyond the pushed records"
    );
    next
}

fn one<T: Val, R: Ring<T>>(rounds: u64, batch: bool) -> u64 {
    let path = ShmPath::new("ring-insn");
    let (mut p, mut c) = R::make(path.path());
    let items = run_ring::<T, R>(&mut p, &mut c, rounds, batch);
    drop(c);
    drop(p);
    items
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_default();
    let rounds = args
        .next()
        .map(|a| a.parse().expect("ROUNDS: a whole number"))
        .unwrap_or(20_000);
    let (ring, rest) = mode.split_once('-').unwrap_or(("", ""));
    let (item, batch) = match rest.strip_suffix("-batch") {
        Some(item) => (item, true),
        None => (rest, false),
    };
    let items = match (ring, item) {
        ("ringwire", "u64") => one::<u64, Ringwire>(rounds, batch),
        ("ringfire", "u64") => one::<u64, Ringfire>(rounds, batch),
        ("ringwire", "64B") => one::<B64, Ringwire>(rounds, batch),
        ("ringfire", "64B") => one::<B64, Ringfire>(rounds, batch),
        _ => {
            eprintln!(
                "usage: ring_instructions ringwire|ringfire-u64|64B[-batch] [ROUNDS] \
                 (e.g. ringwire-u64, ringfire-64B-batch)"
            );
            std::process::exit(2);
        }
    };
    println!("{mode}: {items} items pushed and received");
}
