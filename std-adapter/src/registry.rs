//! ringfire's reader-registry types: [`ReaderRegistry`] (what a producer or consumer sees of
//! a ring's registry, spec §9), [`ReaderRegistration`] (a consumer's own slot) and
//! [`ReaderInfo`] (one live reader in a listing), with ringfire 0.5.2's methods and results.
//!
//! They are views of the ring's mapping kept inside the handle that owns it, so they are only
//! handed out by reference ([`RingProducer::registry`](crate::RingProducer::registry),
//! [`RingConsumer::registry`](crate::RingConsumer::registry) /
//! [`registration`](crate::RingConsumer::registration),
//! [`BlobConsumer::registry`](crate::BlobConsumer::registry)) or as a listing
//! ([`BlobProducer::active_readers`](crate::BlobProducer::active_readers)). The protocol is
//! the core's [`ringwire_core::broadcast::registry`]. Liveness is ringfire's `kill(pid, 0)`
//! ([`is_process_alive`]) and then, where `/proc` is this PID namespace's, two rules more
//! ([`is_reader_alive`]): a zombie is dead, and so is a slot whose token names a process
//! that started at another time than the one now at its pid (a reused pid). A reader in
//! another PID namespace whose pid does not exist here looks dead and is pruned, as in
//! ringfire. Unlike ringfire's, a pruned reader of ours stores no cursor into the slot it
//! lost (another reader may own it now) and registers again, in a free slot, at its next
//! receive.
//!
//! Not here: ringfire's `ReaderRegistry::register` and its `unsafe` `init` / `from_ptr`
//! constructors. Its registration holds a raw pointer into the mapping with no lifetime, and
//! one that outlived the handle would write into unmapped memory; a reader registers by
//! attaching a consumer, whose registration lives and dies with it.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use ringwire_core::RingView;
use ringwire_core::broadcast::registry::{self, LiveReader, Owner, unread};

use crate::sys;

/// Registry slots a lossless ring gets when its builder asks for none (ringfire's
/// `DEFAULT_MAX_READERS`, spec §3).
pub const DEFAULT_MAX_READERS: usize = ringwire_core::layout::DEFAULT_MAX_READERS as usize;

/// One live registered reader, as [`ReaderRegistry::active_readers`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReaderInfo {
    /// Registry slot index.
    pub slot_index: usize,
    /// Owning process id.
    pub pid: u32,
    /// Registry name (at most 31 bytes, lossily decoded).
    pub name: String,
    /// The next sequence the reader will read.
    pub cursor_seq: u64,
    /// Messages up to the `write_seq` passed that it has not read:
    /// `write_seq - (cursor_seq - 1)`, saturating at 0.
    pub lag: u64,
}

impl ReaderInfo {
    /// The listing of live reader `r` of `view`, its lag counted up to `write_seq`.
    fn of(view: &RingView, r: LiveReader, write_seq: u64) -> ReaderInfo {
        // The name was stored before the reader's release of `active = 1`, which the scan
        // acquired.
        let raw = view.registry_name(r.slot).unwrap_or([0; 32]);
        ReaderInfo {
            slot_index: r.slot as usize,
            pid: r.pid,
            name: String::from_utf8_lossy(registry::name_bytes(&raw)).into_owned(),
            cursor_seq: r.cursor,
            lag: unread(write_seq, r.cursor),
        }
    }
}

/// The live reader of `view` with the smallest cursor (the first in slot order among
/// equals), as listed with its lag behind `write_seq`: the one a lossless producer waits
/// for. No liveness check; `None` when no reader is registered.
pub(crate) fn slowest_reader(view: &RingView, write_seq: u64) -> Option<ReaderInfo> {
    registry::live_readers(view)
        .min_by_key(|r| r.cursor)
        .map(|r| ReaderInfo::of(view, r, write_seq))
}

/// A ring's reader registry: its live readers, their cursors and the producer's headroom.
///
/// Obtained by reference from the handle that maps the ring, and valid as long as it.
pub struct ReaderRegistry {
    /// A copy of the owning handle's view; that handle keeps the mapping alive.
    view: RingView,
}

impl ReaderRegistry {
    /// The registry of `view`, or `None` when the ring has none (`reader_registry_offset ==
    /// 0`). The caller keeps the mapping alive as long as the result (a handle field).
    pub(crate) fn of(view: &RingView) -> Option<ReaderRegistry> {
        (view.geometry().registry_offset != 0).then_some(ReaderRegistry { view: *view })
    }

    /// Total number of reader slots.
    pub fn capacity(&self) -> usize {
        self.view.geometry().registry_count as usize
    }

    /// The smallest cursor of the live readers (`active == 1 && pid != 0`), without checking
    /// whether their processes still exist: one atomic load per slot, no system call.
    pub fn min_cursor(&self) -> Option<u64> {
        registry::min_live_cursor(&self.view)
    }

    /// The smallest cursor of the live readers after freeing the slots of dead processes
    /// ([`ReaderRegistry::prune_dead_readers`]); `None` when no reader is registered.
    pub fn min_reader_seq(&self) -> Option<u64> {
        self.prune_dead_readers();
        self.min_cursor()
    }

    /// Messages up to `write_seq` the slowest live reader has not read (0 when none is
    /// registered). Prunes dead readers first.
    pub fn reader_lag(&self, write_seq: u64) -> u64 {
        self.min_reader_seq()
            .map_or(0, |min| unread(write_seq, min))
    }

    /// How many messages a writer at `write_seq` can still write before the slowest live
    /// reader is lapped on a ring of `ring_capacity` slots (`ring_capacity` when none is
    /// registered). Prunes dead readers first.
    pub fn headroom(&self, write_seq: u64, ring_capacity: u64) -> u64 {
        match self.min_reader_seq() {
            Some(min) => ring_capacity.saturating_sub(unread(write_seq, min)),
            None => ring_capacity,
        }
    }

    /// The live readers in slot order, with their lag behind `write_seq`, after pruning dead
    /// ones.
    pub fn active_readers(&self, write_seq: u64) -> Vec<ReaderInfo> {
        self.prune_dead_readers();
        registry::live_readers(&self.view)
            .map(|r| ReaderInfo::of(&self.view, r, write_seq))
            .collect()
    }

    /// Frees every slot owned by a process that no longer exists; returns how many.
    pub fn prune_dead_readers(&self) -> usize {
        registry::prune_dead_by(&self.view, sys::reader_alive, |_| {}) as usize
    }
}

impl std::fmt::Debug for ReaderRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReaderRegistry")
            .field("capacity", &self.capacity())
            .finish()
    }
}

/// A consumer's slot in the ring's reader registry. The consumer publishes its cursor here
/// after each receive, seek or jump, and gives the slot back when it is dropped.
pub struct ReaderRegistration {
    /// A copy of the owning consumer's view; the consumer keeps the mapping alive.
    view: RingView,
    /// The slot and the registration's token, which the consumer changes when it registers
    /// again after a prune ([`ReaderRegistration::follow`]).
    slot: AtomicU32,
    token: AtomicU64,
    /// The pid the consumer registered as.
    pid: u32,
}

impl ReaderRegistration {
    /// The registration `owner` of `view`, if the consumer holds one. The caller keeps the
    /// mapping alive as long as the result (a handle field).
    pub(crate) fn of(view: &RingView, owner: Option<Owner>) -> Option<ReaderRegistration> {
        owner.map(|o| ReaderRegistration {
            view: *view,
            slot: AtomicU32::new(o.slot),
            token: AtomicU64::new(o.token),
            pid: o.pid,
        })
    }

    /// Follows the consumer to the registration it holds now.
    pub(crate) fn follow(&self, owner: Owner) {
        // Relaxed (both): read and written by the owning handle's thread.
        self.slot.store(owner.slot, Ordering::Relaxed);
        self.token.store(owner.token, Ordering::Relaxed);
    }

    /// Publishes `seq` as this reader's cursor, the next sequence it will read: the producer
    /// may overwrite everything below it. The consumer's own next receive, seek or jump
    /// publishes its real cursor again, as does a receive that finds nothing for the
    /// [`LOOKASIDE_POLLS`](ringwire_core::broadcast::LOOKASIDE_POLLS)th time in a row.
    /// Stores nothing when the slot no longer holds this
    /// registration (pruned as dead, and perhaps taken by another reader: see
    /// [`registry::publish_cursor_as`]); the consumer's next receive registers it again.
    pub fn update_cursor(&self, seq: u64) {
        let _ = registry::publish_cursor_as(&self.view, self.owner(), seq);
    }

    /// Index of this reader's registry slot.
    pub fn slot_index(&self) -> usize {
        self.owner().slot as usize
    }

    fn owner(&self) -> Owner {
        Owner {
            // Relaxed (both): as in `follow`.
            slot: self.slot.load(Ordering::Relaxed),
            pid: self.pid,
            token: self.token.load(Ordering::Relaxed),
        }
    }
}

impl std::fmt::Debug for ReaderRegistration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReaderRegistration")
            .field("slot_index", &self.slot_index())
            .finish()
    }
}

/// Whether process `pid` exists in this PID namespace (`kill(pid, 0)` succeeds or fails
/// with `EPERM`); pid 0 and pids above `i32::MAX` are not. A process that has exited but
/// that its parent has not reaped yet (a zombie) still exists: [`is_reader_alive`] is the
/// test the registry goes by.
pub fn is_process_alive(pid: u32) -> bool {
    sys::pid_alive(pid)
}

/// Whether the reader registered as `pid` with `token` in its slot's `heartbeat_tsc` is
/// alive, as producers, `prune`, `stat` and `top` judge it: [`is_process_alive`], and then,
/// where `/proc` belongs to this PID namespace, not a zombie and, when the token carries
/// its registrant's start time from this namespace, not a later process that got the pid.
/// Slots of ringfire's readers (token 0) are judged by the first two.
pub fn is_reader_alive(pid: u32, token: u64) -> bool {
    sys::reader_alive(pid, token)
}

#[cfg(test)]
mod tests {
    use super::{ReaderRegistration, ReaderRegistry};

    /// As ringfire's, both may be shared with and sent to other threads (and so may the
    /// handles that hold them).
    #[test]
    fn registry_types_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<ReaderRegistry>();
        check::<ReaderRegistration>();
        check::<crate::RingConsumer<u64>>();
        check::<crate::BlobConsumer<u64>>();
        check::<crate::RingProducer<u64>>();
    }
}
