//! A table of memory mappings that a signal handler can search: the lock-free part of the
//! `ringwire` CLI's SIGBUS report (`cli::sigbus` in the std crate), kept here so that it runs
//! under loom (`core/tests/loom_maptable.rs`) and under Miri with the core's other tests.
//!
//! Each of the table's `N` slots holds one mapping (its base address, its length and the path
//! it maps) under a sequence lock: the slot's `seq` is odd while a recorder or a remover
//! changes the other fields, and even otherwise; `len` is 0 when the slot is free. A recorder
//! takes a free slot by moving its `seq` from even to odd with a compare-exchange, so two
//! recorders never take the same slot. [`Table::lookup`] only loads atomics and never waits,
//! so a signal handler may call it while it interrupts a recorder on its own thread (it
//! skips the slot being changed) or while other threads change slots: it sees a slot's base,
//! length and path as one recorder left them, or skips the slot.
//!
//! The path is a `&'static [u8]` the caller provides: the table never allocates. A freed
//! slot keeps its path and shows it to the next recorder ([`Table::record_with`]), so a
//! caller that allocates its paths can reuse one instead of allocating again.

use crate::sync::{AtomicPtr, AtomicUsize, Dep, Ordering, fence};

/// One mapping found by [`Table::lookup`]: the base, length and path of one record, never
/// a mix of two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    /// The mapping's first address.
    pub base: usize,
    /// Its length in bytes (never 0).
    pub len: usize,
    /// The path its recorder gave.
    pub path: &'static [u8],
}

/// A slot taken by [`Table::record_with`], to be given back to [`Table::remove`].
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a record that is never removed keeps its slot taken"]
pub struct Held {
    slot: usize,
    /// The slot's even `seq` after the record: only the holder changes it until it is freed.
    seq: usize,
}

impl Held {
    /// The index of the slot (slots are taken from the lowest free one).
    pub fn slot(&self) -> usize {
        self.slot
    }
}

/// One slot: a sequence lock over a mapping.
struct Slot {
    seq: Dep<AtomicUsize>,
    base: Dep<AtomicUsize>,
    len: Dep<AtomicUsize>,
    /// The start of the path; null until the slot's first record.
    path: Dep<AtomicPtr<u8>>,
    path_len: Dep<AtomicUsize>,
}

/// A free slot: every word 0, the path null. One body for both `Slot::new`s (loom's
/// atomics cannot be made in a `const fn`).
macro_rules! free_slot {
    () => {
        Slot {
            seq: Dep::new(AtomicUsize::new(0)),
            base: Dep::new(AtomicUsize::new(0)),
            len: Dep::new(AtomicUsize::new(0)),
            path: Dep::new(AtomicPtr::new(core::ptr::null_mut())),
            path_len: Dep::new(AtomicUsize::new(0)),
        }
    };
}

impl Slot {
    #[cfg(not(loom))]
    const fn new() -> Self {
        free_slot!()
    }

    #[cfg(loom)]
    fn new() -> Self {
        free_slot!()
    }
}

/// The path a slot's pointer and length stand for (empty for the null pointer of a slot
/// never recorded).
///
/// # Safety
///
/// `p` and `len` must have been loaded from one slot's `path` and `path_len` with no store
/// to either in between: the pair written together by one recorder.
unsafe fn stored_path(p: *mut u8, len: usize) -> &'static [u8] {
    if p.is_null() {
        return &[];
    }
    // SAFETY: a recorder stores a non-null pointer only with the length of the same
    // `&'static [u8]` (`record_with`), and the caller read the two as one pair, so they
    // describe a live slice for the rest of the program.
    unsafe { core::slice::from_raw_parts(p, len) }
}

/// A table of up to `N` mappings (see the module docs).
pub struct Table<const N: usize> {
    slots: [Slot; N],
}

impl<const N: usize> Default for Table<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Table<N> {
    /// An empty table (`const`, so that a `static` can hold it; not under loom, whose atomics
    /// are made at run time).
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Table {
            slots: [const { Slot::new() }; N],
        }
    }

    /// An empty table.
    #[cfg(loom)]
    pub fn new() -> Self {
        Table {
            slots: core::array::from_fn(|_| Slot::new()),
        }
    }

    /// Records `len` bytes at `base` in the lowest free slot; `None` when every slot is taken
    /// (and for `len` 0, which would read as a free slot). A slot another thread has just
    /// freed may still look taken: nothing orders this search after that removal.
    ///
    /// `path` is called with the path the slot held before (empty if none) and returns the
    /// path to record, which may be that same slice: a caller that allocates paths reuses
    /// one that matches. It runs while the slot is taken, when a lookup skips the slot.
    pub fn record_with(
        &self,
        base: usize,
        len: usize,
        path: impl FnOnce(&'static [u8]) -> &'static [u8],
    ) -> Option<Held> {
        if len == 0 {
            return None;
        }
        for (i, s) in self.slots.iter().enumerate() {
            // Acquire: pairs with the release that ended the slot's last change, so `len` is
            // at least as new as `v`, and the last holder's work happens before ours.
            let v = s.seq.get().load(Ordering::Acquire);
            // Relaxed: a 0 read here that is newer than `v` was stored by a remover whose
            // exchange had already read `v` and moved `seq` on, so ours below fails (two
            // exchanges never read the same value).
            if v % 2 == 1 || s.len.get().load(Ordering::Relaxed) != 0 {
                continue;
            }
            // Relaxed: the exchange only decides who takes the slot; the loads above and the
            // fence below order everything else. Taking the odd value is taking the slot:
            // nobody changed it since `v`, so it is still free.
            if s.seq
                .get()
                .compare_exchange(v, v.wrapping_add(1), Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            // Release: a lookup that sees any of the stores below sees the odd `seq` too
            // when it reads `seq` again.
            fence(Ordering::Release);
            // Relaxed (the four loads): only this holder writes the slot now.
            let (p, n) = (
                s.path.get().load(Ordering::Relaxed),
                s.path_len.get().load(Ordering::Relaxed),
            );
            // SAFETY: read while this recorder holds the slot, so no store came between.
            let old = unsafe { stored_path(p, n) };
            let new = path(old);
            if new.as_ptr() != old.as_ptr() || new.len() != old.len() {
                // Relaxed (these stores): ordered after the odd `seq` by the fence above, and
                // before the even one by its release.
                s.path_len.get().store(new.len(), Ordering::Relaxed);
                s.path
                    .get()
                    .store(new.as_ptr().cast_mut(), Ordering::Relaxed);
            }
            s.base.get().store(base, Ordering::Relaxed);
            s.len.get().store(len, Ordering::Relaxed);
            let seq = v.wrapping_add(2);
            // Release: a lookup or a recorder that reads this value (Acquire) sees the whole
            // record.
            s.seq.get().store(seq, Ordering::Release);
            return Some(Held { slot: i, seq });
        }
        None
    }

    /// [`record_with`](Self::record_with) for a path the caller keeps no allocation for.
    pub fn record(&self, base: usize, len: usize, path: &'static [u8]) -> Option<Held> {
        self.record_with(base, len, |_| path)
    }

    /// Frees the slot `held` took: from the end of this call no lookup finds its mapping.
    /// A `held` from another table (of the same size) whose slot has moved on does nothing.
    pub fn remove(&self, held: Held) {
        let Some(s) = self.slots.get(held.slot) else {
            return;
        };
        // Relaxed: only the holder changes a held slot, so this succeeds for a record of this
        // table, and a failure means `held` is not this table's: the slot is left alone.
        // Being an exchange, it also stops a recorder that reads the 0 below from taking the
        // slot before it (see `record_with`).
        if s.seq
            .get()
            .compare_exchange(
                held.seq,
                held.seq.wrapping_add(1),
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_err()
        {
            return;
        }
        // Relaxed, with no fence before it: a lookup that reads this 0 with the old even
        // `seq` finds nothing in the slot, which is what it finds once the removal is done;
        // the release below orders it for a recorder that reads the freed `seq`.
        s.len.get().store(0, Ordering::Relaxed);
        // Release: the slot is free; a recorder that reads this value (Acquire) sees the 0
        // and everything the holder did before.
        s.seq
            .get()
            .store(held.seq.wrapping_add(2), Ordering::Release);
    }

    /// The recorded mapping that holds `addr`, if any. Only loads atomics and never waits,
    /// so a signal handler may call it (module docs); a slot being changed is skipped.
    pub fn lookup(&self, addr: usize) -> Option<Mapping> {
        for s in &self.slots {
            // Acquire: pairs with the release that ended the slot's last change, so the loads
            // below see at least that change's stores.
            let v = s.seq.get().load(Ordering::Acquire);
            if v % 2 == 1 {
                continue;
            }
            // Relaxed (the four loads): checked by the second read of `seq` below.
            let base = s.base.get().load(Ordering::Relaxed);
            let len = s.len.get().load(Ordering::Relaxed);
            let p = s.path.get().load(Ordering::Relaxed);
            let path_len = s.path_len.get().load(Ordering::Relaxed);
            // Acquire: the loads above are done before `seq` is read again, so an unchanged
            // `seq` means they saw no change in progress, and belong together.
            fence(Ordering::Acquire);
            // Relaxed: ordered after the loads by the fence above.
            if s.seq.get().load(Ordering::Relaxed) != v {
                continue;
            }
            if len != 0 && addr.wrapping_sub(base) < len {
                // SAFETY: `seq` was the same even value before and after the two loads, so
                // no recorder stored between them.
                let path = unsafe { stored_path(p, path_len) };
                return Some(Mapping { base, len, path });
            }
        }
        None
    }

    /// How many slots hold a mapping (a snapshot, for tests and diagnostics).
    pub fn used(&self) -> usize {
        self.slots
            .iter()
            // Relaxed: a count for whoever already ordered itself after the changes it
            // cares about.
            .filter(|s| s.len.get().load(Ordering::Relaxed) != 0)
            .count()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::vec::Vec;

    #[test]
    fn a_recorded_mapping_is_found_by_any_address_in_it_until_removed() {
        let t = Table::<4>::new();
        let a = t.record(0x1000, 0x2000, b"/dev/shm/a").unwrap();
        let b = t.record(0x3000, 0x1000, b"/dev/shm/b").unwrap();
        assert_eq!((a.slot(), b.slot()), (0, 1));
        let ma = Mapping {
            base: 0x1000,
            len: 0x2000,
            path: b"/dev/shm/a",
        };
        assert_eq!(t.lookup(0x1000), Some(ma));
        assert_eq!(t.lookup(0x2fff), Some(ma));
        assert_eq!(t.lookup(0x3000).map(|m| m.path), Some(&b"/dev/shm/b"[..]));
        assert_eq!(t.lookup(0xfff), None);
        assert_eq!(t.lookup(0x4000), None);
        assert_eq!(t.used(), 2);
        t.remove(a);
        assert_eq!(t.lookup(0x1000), None);
        assert_eq!(t.lookup(0x3fff).map(|m| m.path), Some(&b"/dev/shm/b"[..]));
        t.remove(b);
        assert_eq!(t.used(), 0);
    }

    #[test]
    fn a_full_table_records_nothing_more_until_a_slot_is_freed() {
        let t = Table::<3>::new();
        let mut held: Vec<Held> = (0..3)
            .map(|i| t.record(0x10000 * (i + 1), 0x1000, b"/r").unwrap())
            .collect();
        assert!(t.record(0x100_0000, 0x1000, b"/late").is_none());
        assert_eq!(t.lookup(0x100_0000), None);
        t.remove(held.remove(1));
        let late = t.record(0x100_0000, 0x1000, b"/late").unwrap();
        assert_eq!(late.slot(), 1, "the freed slot is reused");
        assert_eq!(t.lookup(0x100_0800).map(|m| m.path), Some(&b"/late"[..]));
        assert_eq!(t.lookup(0x20000), None);
        assert_eq!(t.used(), 3);
    }

    #[test]
    fn an_empty_mapping_is_not_recorded() {
        let t = Table::<1>::new();
        assert!(t.record(0x1000, 0, b"/z").is_none());
        assert_eq!(t.used(), 0);
        assert!(t.record(0x1000, 1, b"/z").is_some());
    }

    #[test]
    fn a_slot_shows_its_last_path_to_the_next_recorder() {
        let t = Table::<2>::new();
        let mut seen = Vec::new();
        let first = t
            .record_with(0x1000, 0x1000, |old| {
                seen.push(old);
                b"/dev/shm/x"
            })
            .unwrap();
        t.remove(first);
        let again = t
            .record_with(0x5000, 0x1000, |old| {
                seen.push(old);
                old
            })
            .unwrap();
        assert_eq!(seen, [&b""[..], &b"/dev/shm/x"[..]]);
        assert_eq!(again.slot(), 0);
        let m = t.lookup(0x5000).unwrap();
        assert_eq!((m.base, m.path), (0x5000, &b"/dev/shm/x"[..]));
        t.remove(again);
        let other = t.record(0x5000, 0x1000, b"/dev/shm/y").unwrap();
        assert_eq!(t.lookup(0x5000).unwrap().path, b"/dev/shm/y");
        t.remove(other);
        assert_eq!(t.used(), 0);
    }

    #[test]
    fn a_record_of_another_table_removes_nothing() {
        let (t, u) = (Table::<2>::new(), Table::<2>::new());
        let mine = t.record(0x1000, 0x1000, b"/t").unwrap();
        // Same slot, but `u`'s slot has moved on: the stale record must not free it.
        let stale = u.record(0x1000, 0x1000, b"/u").unwrap();
        let theirs = Held {
            slot: stale.slot,
            seq: stale.seq,
        };
        u.remove(stale);
        let now = u.record(0x1000, 0x1000, b"/u2").unwrap();
        u.remove(theirs);
        assert_eq!(u.lookup(0x1000).unwrap().path, b"/u2");
        // A slot index this table does not have.
        t.remove(Held { slot: 7, seq: 2 });
        assert_eq!(t.lookup(0x1000).unwrap().path, b"/t");
        u.remove(now);
        t.remove(mine);
        assert_eq!((t.used(), u.used()), (0, 0));
    }

    /// Threads recording and removing mappings while another looks addresses up: a lookup
    /// finds a whole mapping of the address or nothing, never a mix of two.
    #[test]
    fn lookups_during_records_and_removals_never_mix_two_mappings() {
        const THREADS: usize = 4;
        const PATHS: [&[u8]; THREADS] = [b"/dev/shm/m0", b"/dev/shm/m1", b"/dev/shm/m2", b"/m3"];
        let rounds = if cfg!(miri) { 20 } else { 2000 };
        // Twice as many slots as holders: a slot another worker just freed may still look
        // held to this one (a load may return an older value), so a record can find every
        // slot taken even with one free, but hardly ever here.
        let t = Table::<{ 2 * THREADS }>::new();
        let base = |i: usize| 0x10_0000 * (i + 1);
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let looker = s.spawn(|| {
                let mut found = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for (i, p) in PATHS.iter().enumerate() {
                        if let Some(got) = t.lookup(base(i) + 8) {
                            let want = Mapping {
                                base: base(i),
                                len: 0x1000 * (i + 1),
                                path: p,
                            };
                            assert_eq!(got, want);
                            found += 1;
                        }
                    }
                    if cfg!(miri) {
                        std::thread::yield_now();
                    }
                }
                found
            });
            let workers: Vec<_> = (0..THREADS)
                .map(|i| {
                    let t = &t;
                    s.spawn(move || {
                        let mut recorded = 0;
                        for _ in 0..rounds {
                            let Some(r) = t.record(base(i), 0x1000 * (i + 1), PATHS[i]) else {
                                continue;
                            };
                            recorded += 1;
                            let end = base(i) + 0x1000 * (i + 1) - 1;
                            assert_eq!(t.lookup(end).map(|m| m.path), Some(PATHS[i]));
                            t.remove(r);
                        }
                        assert!(recorded > rounds / 2, "worker {i}: {recorded} of {rounds}");
                    })
                })
                .collect();
            // Every worker is joined and the looker stopped before any failure is raised: a
            // worker's panic raised first would leave the scope waiting for a looker that
            // never stops.
            let ended: Vec<_> = workers.into_iter().map(|w| w.join()).collect();
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            looker.join().unwrap();
            for e in ended {
                e.unwrap();
            }
        });
        assert_eq!(t.used(), 0);
    }
}
