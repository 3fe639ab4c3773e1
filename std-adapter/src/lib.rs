//! ringwire: rings in `/dev/shm` files, waiting strategies, serve/mirror drivers and the
//! `ringwire` command-line tool, around the `no_std` core in `ringwire-core`.
//!
//! Ring files are created and attached exactly as ringfire 0.5.2 does (spec §1.2, §1.3), so
//! rings made by either project are interchangeable.
//!
//! ```
//! use ringwire::{FutexWait, RingConsumer, RingProducer};
//!
//! # fn main() -> ringwire::Result<()> {
//! # let ticks = format!("/dev/shm/ringwire-doc-ticks-{}", std::process::id());
//! # let _ = std::fs::remove_file(&ticks);
//! // A ring of 1,024 records of 64 bytes, in /dev/shm (a process-unique name here).
//! let mut tx = RingProducer::<[u8; 64]>::create(&ticks, 1024)?;
//! tx.push(&[7; 64]);
//! // In another process (or thread): oldest retained first, then wait on the futex.
//! let mut rx = RingConsumer::<[u8; 64]>::attach(&ticks)?;
//! assert_eq!(rx.recv_blocking(&mut FutexWait::default()), [7; 64]);
//! let later = std::thread::spawn(move || {
//!     std::thread::sleep(std::time::Duration::from_millis(10));
//!     tx.push(&[8; 64]);
//!     tx
//! });
//! // Sleeps on the ring's futex until the push wakes it.
//! assert_eq!(rx.recv_blocking(&mut FutexWait::default()), [8; 64]);
//! # drop(later.join().unwrap());
//! # let _ = std::fs::remove_file(&ticks);
//! # Ok(())
//! # }
//! ```
//!
//! Modules: [`file`](mod@file) (create §1.2 / attach §1.3), [`producer`] and [`consumer`] (typed
//! broadcast rings), [`blob`] (blob rings, §10), [`registry`] (ringfire's reader-registry
//! types, §9), [`wait`] (busy spin, yield, futex, §11), [`header`] and [`signature`]
//! (ringfire's names for the header constants and the layout signature, §2, §12), [`tsc`]
//! (`CycleStamp`),
//! [`checkpoint`] (offset files, §13), [`blackboard`] (§14), [`lossy_mpmc`] (ringfire's
//! lossy MPMC ring, §8), [`multiplexer`] (one reader over several rings), [`queue`] (the
//! lossless SPSC and MPMC queues in files or anonymous memory), [`replica`] (serve, mirror
//! and the demo, §20–§27), [`net`] (sockets and `recvmmsg`), [`bench`](mod@bench) (the measurement
//! code behind `ringwire bench`), [`sys`] (the system calls: futex, membarrier, locks),
//! [`cli`] (the `ringwire` tool, §26). With the `tokio` feature, `async_consumer` has
//! `AsyncRingConsumer`: `async fn recv` and a `Stream` of records, waiting on the ring's
//! futex from a helper thread.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub use ringwire_core as core;

/// Writes one diagnostic line to stderr and ignores a failed write. `eprintln!` panics when
/// the write fails, and one does once stderr's reader has gone away (`SIGPIPE` is ignored,
/// so the write returns `EPIPE`): a closed log pipe must not end a server, a mirror or a
/// bench run. Declared before the modules so every one of them can use it.
macro_rules! diag {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

#[cfg(feature = "tokio")]
pub mod async_consumer;
pub mod bench;
pub mod blackboard;
pub mod blob;
pub mod checkpoint;
pub mod cli;
pub mod consumer;
pub mod error;
#[cfg(test)]
mod error_fmt_tests;
pub mod file;
// The core's test support, shared by path: a crate's cfg(test) items are not visible to another.
#[cfg(test)]
#[path = "../../core/src/fmt_check.rs"]
mod fmt_check;
pub mod header;
pub mod lossy_mpmc;
pub mod multiplexer;
pub mod net;
pub mod producer;
pub mod queue;
pub mod registry;
pub mod replica;
mod shown;
pub mod signature;
pub mod sys;
#[cfg(test)]
mod test_fork;
#[cfg(test)]
mod test_guard;
#[cfg(test)]
mod test_proc;
#[cfg(test)]
mod test_tmp;
pub mod tsc;
mod unreported_laps;
pub mod wait;

#[cfg(feature = "tokio")]
pub use async_consumer::AsyncRingConsumer;
pub use blackboard::{BlackboardConsumer, BlackboardProducer};
pub use blob::{BlobConsumer, BlobProducer, BlobProducerBuilder, BlobRecvStatus};
pub use checkpoint::OffsetCheckpoint;
pub use consumer::{RecvStatus, RingConsumer, RingConsumerBuilder};
/// ringfire's name for [`Error`], so `Result<T, RingfireError>` signatures carry over (the
/// variants are ringwire's own).
pub use error::Error as RingfireError;
pub use error::{Error, Result};
pub use file::{BlobLost, CleanupMode, CreateOptions, ReadOnlyRing, RegistryEntry, RingFile};
pub use header::{
    BLACKBOARD_MAGIC, BLACKBOARD_VERSION, FLAG_MODE_MPMC, FLAG_MODE_SPMC, FLAG_POLICY_LATEST_WINS,
    FLAG_POLICY_LOSSLESS_BACKPRESSURE, FLAG_SPARSE, FLAG_WITH_ARENA, FLAG_WITH_REGISTRY,
    RINGFIRE_MAGIC, RINGFIRE_VERSION, SLOT_WRITING,
};
pub use lossy_mpmc::{MpmcProducer, MpmcQueueConsumer};
#[cfg(feature = "tokio")]
pub use multiplexer::AsyncRingMultiplexer;
pub use multiplexer::RingMultiplexer;
pub use producer::{FlowControl, RingProducer, RingProducerBuilder};
pub use registry::{DEFAULT_MAX_READERS, ReaderInfo, ReaderRegistration, ReaderRegistry};
pub use replica::ReplicaError;
pub use replica::compat::{
    Geometry, Mirror, MirrorBuilder, MirrorHandle, MirrorStart, MulticastConfig, ReplicaServer,
    ReplicaServerHandle,
};
pub use ringwire_core::broadcast::StartMode;
/// ringfire's name for [`StartMode`] (the same four modes).
pub use ringwire_core::broadcast::StartMode as ConsumerStartMode;
pub use signature::{LayoutSignature, compute_layout_signature, fnv1a64};
pub use tsc::CycleStamp;
pub use wait::{BusySpin, FutexWait, FutexWake, WaitStrategy, YieldBackoff};
