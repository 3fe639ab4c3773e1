//! Lossless queues in files (durable: they survive both sides exiting) or in anonymous
//! in-process memory, with typed handles: [`SpscProducer`], [`SpscConsumer`],
//! [`MpmcQueue`]; and SPSC queues of byte strings that keep each item's length (datagrams):
//! [`SpscBytesProducer`], [`SpscBytesConsumer`].
//!
//! Files follow the creation rules of spec §1.2 where they apply: `O_CREAT` without
//! `O_TRUNC`, mode 0o660, a non-blocking exclusive `flock` held by the creating handle for
//! its life, an inode check against the path, and replacement of a stale file (size ≠ 0) by
//! a fresh inode, up to 8 attempts; the file's bytes are reserved with `posix_fallocate`,
//! so a full file system is an error at creation. Only a queue file (of any kind, capacity
//! or item type: a program restarted with another queue geometry creates where it did
//! before) or one whose creation never finished is replaced; any other non-empty file at
//! the path (somebody's data, a ring, a blackboard: a mistyped path) is refused and left as
//! it was ([`QueueFileError::NotReplaced`]), where spec §1.2 unlinks whatever it finds.
//! `create` always makes an empty queue, so a stale queue's items go with it, whatever its
//! geometry. A file is stale only when no handle has it open: its creator holds the
//! creation lock for its life, every handle that `open`s a queue file holds a shared
//! open-file-description lock on its first byte, and `create` refuses a file with a live
//! handle, creator or not ([`QueueFileError::InUse`]), instead of orphaning it
//! ([`QueueFileError::Locked`] while another handle is still creating it). Unlike a
//! ringfire ring, a queue file is never unlinked on drop: the items in it are the point.
//! Use `open` to reach an existing queue. A queue file outlives every process that uses it;
//! it survives a crash of the machine only on a disk file system, and only as of its last
//! `flush` (see [`QueueMem::flush`]).
//!
//! Blocking pushes and pops spin briefly, then sleep on the queue's shared futex words
//! (`data_futex` for consumers, `space_futex` for producers) with the same no-lost-wake-up
//! handshake as the broadcast ring's `FutexWait` (see `wait`): every push and pop of these
//! handles checks for sleepers with a compiler fence and one relaxed load (the sleeper
//! issues `membarrier(GLOBAL_EXPEDITED)` instead; a process whose membarrier registration
//! failed keeps a SeqCst fence there), and wakes them only if there are any. A sleeper that
//! dies asleep cannot uncount itself: its count is cleared by the next handle to take its
//! SPSC role, and in any queue file by a handle that opens it with no other handle alive.
//! Until then each push (or pop) on its side issues one needless `FUTEX_WAKE`; the MPMC
//! handles stop doing so once such wakes have woken nobody for 100 ms, as a broadcast
//! producer does (`ringwire_core::futex::WakeGate`, [`crate::FutexWake`]).
//!
//! An MPMC slot left stuck by a producer that died mid-push, or a consumer that died
//! mid-pop, stops the queue at that slot until it is healed
//! ([`MpmcQueue::heal_stuck_slot`], whose caller confirms the holder dead). A handle that
//! opens the file with no other handle alive has that confirmation from the file locks,
//! and heals every stuck slot itself ([`MpmcQueue::healed_at_open`]): a queue whose
//! processes all exited drains after a restart past the items the dead holders lost.
//!
//! The one-producer / one-consumer rule of an SPSC queue file is enforced with open-file-
//! description locks (`F_OFD_SETLK`) on one byte per role, released by the kernel when the
//! handle is dropped or its process dies. A child forked from a process that holds a role
//! shares that open file description, so it holds the role too until it exits or execs
//! (every descriptor is close-on-exec), and its copy of the handle is not refused: the
//! child must not push (or pop) through it, which would make two producers (consumers) of
//! one queue. Dropping the copy there is harmless, and so is dropping the parent's after
//! the child's popped on: a consumer's drop hands back only pops ahead of what the queue
//! holds as handed back (the child's head may be the fork's, which the parent has passed;
//! a daemon's copy that popped on by itself hands its pops back, and its parent's drop
//! then hands nothing back). MPMC
//! handles may be used from both processes; their shared lock, held by the child's
//! descriptor too, keeps an open elsewhere from healing slots while either lives.
//!
//! On a file system without record locks (`F_OFD_SETLK` fails with `ENOLCK`, `EINVAL` or
//! `EOPNOTSUPP`: some network and FUSE file systems) every handle, SPSC or MPMC, opens
//! without its locks rather than fail, and says so (`is_guarded()` is false: see
//! [`SpscProducer::is_guarded`], [`MpmcQueue::is_guarded`]). Nothing then refuses a second
//! producer or consumer of an SPSC file, nor keeps `create` from replacing a file in use,
//! and no open heals: keeping to the rules is up to the caller. Any other failure of a
//! lock call is an error ([`QueueFileError::Io`], `fcntl`).

mod mem;
mod mpmc;
mod read_only;
mod spsc;
mod spsc_bytes;
mod wait;

use std::path::Path;

use ringwire_core::layout::schema_signature_of;
use ringwire_core::queue::{
    QueueAttachError, QueueExpect, QueueGeometry, QueueGeometryError, QueueKind,
};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

pub(crate) use mem::AtOpen;
pub use mem::{QueueFileError, QueueMem};
pub use mpmc::MpmcQueue;
pub use read_only::{QueueSnapshot, ReadOnlyQueue};
pub use spsc::{SpscConsumer, SpscProducer, spsc_channel};
pub use spsc_bytes::{
    Received, SpscBytesConsumer, SpscBytesProducer, bytes_geometry, spsc_bytes_channel,
};

/// The record types a typed queue can carry: plain bytes both ways, no padding surprises.
pub trait Item: IntoBytes + FromBytes + Immutable + KnownLayout + Sized {}
impl<T: IntoBytes + FromBytes + Immutable + KnownLayout> Item for T {}

fn expect_for<T: Item>(kind: QueueKind) -> QueueExpect {
    QueueExpect {
        kind,
        item_size: Some(std::mem::size_of::<T>() as u32),
        schema_sig: Some(schema_signature_of::<T>()),
    }
}

/// The geometry of a queue of `capacity` items of `T` (the caller names the file in the
/// error).
fn geometry_for<T: Item>(
    kind: QueueKind,
    capacity: u64,
) -> Result<QueueGeometry, QueueGeometryError> {
    let size = std::mem::size_of::<T>();
    let g = match kind {
        // SPSC: fixed-size slots without a length word, as compact as the type allows (8
        // `u64`s per line; a 64-byte type on exactly one line, since slot 0 is line-aligned).
        QueueKind::Spsc => QueueGeometry::spsc_fixed(capacity, size),
        // MPMC: compact slots (stamp + item), like crossbeam's ArrayQueue. Whole-line slots
        // keep concurrent producers off each other's lines, but every item then moves a
        // line between cores twice (claim, pop); with 16-byte slots four items share those
        // transfers, which measured faster on the 2P/2C bench (tests/benches/queues.rs).
        QueueKind::Mpmc => QueueGeometry::new(kind, capacity, size, (8 + size).div_ceil(8) * 8),
    };
    Ok(g?.with_schema(schema_signature_of::<T>()))
}

fn wrong_kind(mem: &QueueMem, err: QueueAttachError) -> QueueFileError {
    QueueFileError::Attach {
        path: mem.path().unwrap_or(Path::new("anonymous")).to_owned(),
        err,
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_bytes;
