//! DESIGN.md, "The std API": a program written against ringfire's common subset compiles
//! against ringwire after changing the crate name. `common_subset/program.rs` is such a
//! program (creation, records, batches, the three wait strategies, builders with start modes
//! and flow control, offset checkpoints, blobs, a blackboard, the async consumer), and its
//! `run_more_*` parts use the rest of ringfire's calls on those types (receive status, jumps,
//! the producer's view of its readers, the reader registry (`registry()`, `registration()`,
//! `active_readers()`), `push_with`, the async consumer's tuning knobs, the
//! lossy MPMC ring's `MpmcProducer`/`MpmcQueueConsumer`, the multiplexers, in-process
//! `ReplicaServer`/`Mirror`, the header constants, `compute_layout_signature` and
//! `CycleStamp`); it is
//! compiled twice, with `rf` naming each crate, and both builds run and check the same
//! results. What differs on purpose: record types also derive zerocopy's traits (ringfire
//! asks only `Copy`), and ringwire returns more where ringfire returns `()` (`push` gives the
//! sequence), which a program written for ringfire ignores. Left out: `wake_futex(&RingHeader)`
//! and `ReaderRegistry::register` (see `ringwire::registry`).

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// The record: `Copy` for ringfire, zerocopy traits for ringwire, no padding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct Tick {
    seq: u64,
    bid: u64,
    ask: u64,
    asset: u32,
    flags: u32,
}

mod on_ringfire {
    use ringfire as rf;
    include!("common_subset/program.rs");
}

mod on_ringwire {
    use ringwire as rf;
    include!("common_subset/program.rs");
}

use ringwire_tests::shm::ShmDir;

#[test]
fn the_program_runs_on_ringfire() {
    let d = ShmDir::new("rf");
    on_ringfire::run(d.path()).unwrap();
    on_ringfire::run_more_ring(d.path()).unwrap();
    on_ringfire::run_more_blob(d.path()).unwrap();
    on_ringfire::run_more_mpmc(d.path()).unwrap();
    on_ringfire::run_more_mux(d.path()).unwrap();
    on_ringfire::run_more_replica(d.path()).unwrap();
    on_ringfire::run_more_registry(d.path()).unwrap();
    on_ringfire::run_more_names(d.path()).unwrap();
}

#[test]
fn the_same_program_runs_on_ringwire() {
    let d = ShmDir::new("rw");
    on_ringwire::run(d.path()).unwrap();
    on_ringwire::run_more_ring(d.path()).unwrap();
    on_ringwire::run_more_blob(d.path()).unwrap();
    on_ringwire::run_more_mpmc(d.path()).unwrap();
    on_ringwire::run_more_mux(d.path()).unwrap();
    on_ringwire::run_more_replica(d.path()).unwrap();
    on_ringwire::run_more_registry(d.path()).unwrap();
    on_ringwire::run_more_names(d.path()).unwrap();
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(async { tokio::time::timeout(std::time::Duration::from_secs(30), f).await })
        .expect("the async program finished within 30 s")
}

#[test]
fn the_async_part_runs_on_ringfire() {
    let d = ShmDir::new("rf-async");
    block_on(on_ringfire::run_async(d.path())).unwrap();
    block_on(on_ringfire::run_more_async(d.path())).unwrap();
    block_on(on_ringfire::run_more_mux_async(d.path())).unwrap();
}

#[test]
fn the_async_part_runs_on_ringwire() {
    let d = ShmDir::new("rw-async");
    block_on(on_ringwire::run_async(d.path())).unwrap();
    block_on(on_ringwire::run_more_async(d.path())).unwrap();
    block_on(on_ringwire::run_more_mux_async(d.path())).unwrap();
}
