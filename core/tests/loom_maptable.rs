//! loom models of the mapping table behind the CLI's SIGBUS report (`maptable`): a
//! recorder changing a slot while a handler looks addresses up, and two recorders racing for
//! slots.
//!
//! Run: `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p ringwire-core
//! --release --test loom_maptable`.
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use ringwire_core::maptable::{Mapping, Table};

/// Two mappings that both hold [`BOTH`], with paths of the same length, so that any mix of
/// their fields is a value neither of them is (and a mixed path pointer and length still
/// lie inside one path).
const A: Mapping = Mapping {
    base: 0x1000,
    len: 0x1000,
    path: b"/a",
};
const B: Mapping = Mapping {
    base: 0x1800,
    len: 0x2000,
    path: b"/b",
};
const BOTH: usize = 0x1800;

fn builder() -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    b
}

/// One slot: the recorder records A, removes it and records B there, saying how far it got
/// in `phase` after each step, while the handler thread looks up an address both hold.
/// What the handler finds is A, B or nothing, never a mix; never A once it knows A's
/// removal completed; and B once it knows B was recorded. On the recorder's own thread, a
/// lookup made while it changes the slot (as a signal handler interrupting it would) finds
/// nothing, and one made after a record finds it.
#[test]
fn a_lookup_racing_a_recorder_finds_one_whole_current_record() {
    builder().check(|| {
        let t = Arc::new(Table::<1>::new());
        let phase = Arc::new(AtomicUsize::new(0));
        let recorder = {
            let (t, phase) = (t.clone(), phase.clone());
            thread::spawn(move || {
                let a = t.record(A.base, A.len, A.path).unwrap();
                assert_eq!(t.lookup(BOTH), Some(A));
                // Release: the handler that reads 1 also sees A recorded.
                phase.store(1, Ordering::Release);
                t.remove(a);
                assert_eq!(t.lookup(BOTH), None);
                phase.store(2, Ordering::Release);
                let b = t
                    .record_with(B.base, B.len, |old| {
                        assert_eq!(old, A.path, "the slot keeps its last path");
                        assert_eq!(t.lookup(BOTH), None, "a slot being changed is skipped");
                        B.path
                    })
                    .unwrap();
                assert_eq!(b.slot(), 0);
                phase.store(3, Ordering::Release);
                b
            })
        };
        let before = phase.load(Ordering::Acquire);
        let got = t.lookup(BOTH);
        assert!(
            got.is_none() || got == Some(A) || got == Some(B),
            "a mix of two records: {got:?} (phase {before})"
        );
        if before >= 2 {
            assert_ne!(got, Some(A), "a removed record found after its removal");
        }
        if before == 3 {
            assert_eq!(got, Some(B), "a complete record not found");
        }
        let b = recorder.join().unwrap();
        assert_eq!(t.lookup(BOTH), Some(B));
        t.remove(b);
        assert_eq!((t.lookup(BOTH), t.used()), (None, 0));
    });
}

/// Marks slot `i` as used by `who`: a plain write, so loom reports two holders of one slot
/// at once, or a holder whose access is not ordered after the previous holder's.
fn own(cells: &[UnsafeCell<usize>; 2], i: usize, who: usize) {
    // SAFETY: only the holder of slot `i` touches cell `i` (what the model checks: loom
    // reports any two accesses that are not ordered).
    cells[i].with_mut(|p| unsafe { *p = who });
}

/// Two slots, two recorders: one records A, removes it and records C; the other records B.
/// Each record gets a slot (at most two are held at once), no two holders share one (the
/// cells), C reuses the slot A freed or the one B left, and a third record finds the table
/// full.
#[test]
fn two_recorders_take_distinct_slots_and_reuse_a_freed_one() {
    const C: Mapping = Mapping {
        base: 0x9000,
        len: 0x1000,
        path: b"/c",
    };
    const D: Mapping = Mapping {
        base: 0x4000,
        len: 0x1000,
        path: b"/d",
    };
    builder().check(|| {
        let t = Arc::new(Table::<2>::new());
        let cells = Arc::new([UnsafeCell::new(0), UnsafeCell::new(0)]);
        let first = {
            let (t, cells) = (t.clone(), cells.clone());
            thread::spawn(move || {
                let a = t.record(A.base, A.len, A.path).expect("a free slot for A");
                own(&cells, a.slot(), 1);
                assert_eq!(t.lookup(A.base), Some(A));
                t.remove(a);
                let c = t.record(C.base, C.len, C.path).expect("a free slot for C");
                own(&cells, c.slot(), 3);
                assert_eq!(t.lookup(C.base), Some(C));
                c
            })
        };
        // B at an address A does not hold, so that each lookup has one answer.
        let b = t.record(0x2000, 0x1000, B.path).expect("a free slot for B");
        own(&cells, b.slot(), 2);
        assert_eq!(t.lookup(0x2000).map(|m| m.path), Some(B.path));
        let c = first.join().unwrap();
        assert_ne!(b.slot(), c.slot());
        assert_eq!(t.used(), 2);
        assert_eq!(t.lookup(A.base), None);
        assert!(
            t.record(D.base, D.len, D.path).is_none(),
            "a full table took D"
        );
        t.remove(b);
        let d = t.record(D.base, D.len, D.path).expect("B's slot freed");
        assert_eq!(t.lookup(D.base), Some(D));
        t.remove(c);
        t.remove(d);
        assert_eq!(t.used(), 0);
    });
}
