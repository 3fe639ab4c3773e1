//! Lossless queues in the same memory model as the broadcast ring: an SPSC queue
//! ([`spsc`], Lamport head/tail with cached indices and batch push/pop) and a bounded MPMC
//! queue with global FIFO ([`mpmc`], Vyukov stamps, stuck-slot scan and heal), both in a
//! native layout ([`layout`]) whose magic a ringfire reader refuses; plus ringfire's lossy
//! MPMC ring (spec §8) for interop ([`compat`]).

pub mod compat;
pub mod error;
pub mod layout;
pub mod mpmc;
pub mod spsc;
mod view;

pub use error::{
    HealError, PopError, PushError, QueueAttachError, QueueGeometryError, QueueInitError,
};
pub use layout::{
    FLAG_FIXED, MAX_ITEM_SIZE, MPMC_MAGIC, QUEUE_VERSION, QueueGeometry, QueueHeader, QueueKind,
    SPSC_MAGIC, qhdr,
};
pub use mpmc::{MpmcQueue, Popped, StuckKind, StuckSlot};
pub use spsc::{SpscConsumer, SpscProducer};
pub use view::{QueueExpect, QueueView, has_prefetch_write};

#[cfg(all(test, not(loom)))]
mod tests;
#[cfg(all(test, not(loom)))]
mod tests_mpmc;
