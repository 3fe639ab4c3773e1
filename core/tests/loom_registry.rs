//! loom models of the reader registry (spec §9) and the lossless gate (spec §6): a reader
//! registers, advances its cursor and unregisters while the producer computes its gate.
//! Whenever the reader is registered the gate never lets the producer write more than one
//! lap (C) past the reader's cursor.
//!
//! Run: `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p ringwire-core
//! --release --test loom_registry` (LOOM_MAX_PREEMPTIONS defaults to 3 here).
#![cfg(loom)]

use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;
use ringwire_core::broadcast::registry::{
    self, Incarnation, LiveReader, encode_name, gate_limit, live_reader, min_live_cursor,
    prune_dead, prune_dead_by, publish_cursor, register_owner, register_owner_as,
    token_incarnation,
};
use ringwire_core::layout::reg;
use ringwire_core::{Geometry, Region, RingView};

/// C = 4 (window 2), one registry slot.
const C: u64 = 4;
/// The producer's position: far ahead, so `seq + window` never hides a reader's limit.
const SEQ: u64 = 100;
const NO_READER: u64 = SEQ + C / 2;

fn ring() -> RingView {
    let geo = Geometry::spmc(C, 16, 8, 1, true).unwrap();
    let region = Region::loom_new(geo.total_len().unwrap() as usize);
    // SAFETY: a fresh loom region, no other view of it exists yet.
    unsafe { RingView::init(region, &geo) }.unwrap()
}

fn builder() -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    b
}

#[test]
fn gate_holds_a_registered_reader() {
    builder().check(|| {
        let view = ring();
        // Side channel of the model only: "registration finished" and "about to leave".
        let registered = Arc::new(AtomicBool::new(false));
        let leaving = Arc::new(AtomicBool::new(false));
        let reader = {
            let (view, registered, leaving) = (view.clone(), registered.clone(), leaving.clone());
            thread::spawn(move || {
                let slot = registry::register(&view, 7, "reader", 5, |_| true).unwrap();
                registered.store(true, Ordering::Release);
                publish_cursor(&view, slot, 6).unwrap();
                leaving.store(true, Ordering::Release);
                registry::unregister(&view, slot, 7).unwrap();
            })
        };
        for _ in 0..2 {
            let was_registered = registered.load(Ordering::Acquire);
            let gate = gate_limit(&view, SEQ);
            let left = leaving.load(Ordering::Acquire);
            // The gate is either the reader's cursor (5 or 6) plus C, or the plain window.
            assert!([5 + C, 6 + C, NO_READER].contains(&gate), "gate {gate}");
            if was_registered && !left {
                // Registered for the whole computation: the reader must hold the gate.
                assert!(gate <= 6 + C, "gate {gate} passes the registered reader");
            }
            if gate != NO_READER {
                // Only a reader whose registration was published (active == 1) counts.
                assert!(min_live_cursor(&view).is_none_or(|c| c == 5 || c == 6));
            }
        }
        reader.join().unwrap();
        assert_eq!(gate_limit(&view, SEQ), NO_READER);
        assert_eq!(min_live_cursor(&view), None);
    });
}

/// A reader takes over the slot of a dead one (pid 99) while the producer prunes it: the
/// reader always gets the slot, and the final state is exactly its registration, its token
/// included (the reader publishes and unregisters by it).
#[test]
fn register_over_a_dead_slot_races_prune() {
    builder().check(|| {
        let view = ring();
        // A dead reader left its slot live-looking: pid 99, active 1, cursor 1.
        view.registry_a32(0, reg::PID)
            .unwrap()
            .store(99, Ordering::Relaxed);
        view.registry_a64(0, reg::CURSOR_SEQ)
            .unwrap()
            .store(1, Ordering::Relaxed);
        view.registry_a32(0, reg::ACTIVE)
            .unwrap()
            .store(1, Ordering::Release);
        let alive = |pid: u32| pid != 99;
        let reader = {
            let view = view.clone();
            thread::spawn(move || registry::register_owner(&view, 7, &encode_name("new"), 5, alive))
        };
        let freed = prune_dead(&view, alive);
        assert!(freed <= 1);
        let gate = gate_limit(&view, SEQ);
        // Stale dead cursor 1 (before prune/takeover), the new reader's 5, or nobody.
        assert!([1 + C, 5 + C, NO_READER].contains(&gate), "gate {gate}");
        let owner = reader.join().unwrap().unwrap();
        assert_eq!(owner.slot, 0);
        // A pruner that read pid 99 and then the new reader's token cleared that token: the
        // reader's publishes then failed (NotOwner) and its slot stayed live under its pid.
        assert_eq!(registry::publish_cursor_as(&view, owner, 5), Ok(()));
        assert_eq!(
            live_reader(&view, 0),
            Some(LiveReader {
                slot: 0,
                pid: 7,
                cursor: 5
            })
        );
        assert_eq!(gate_limit(&view, SEQ), 5 + C);
    });
}

/// A reader unregisters while another process, judging its pid dead, takes its slot over:
/// the leaving reader never clears the new owner's registration. (Before, unregister checked
/// the pid with a load and then stored `active = 0` unconditionally: a takeover in between
/// left the new owner registered with `active == 0`, invisible to the lossless gate.)
#[test]
fn unregister_never_clears_a_new_owners_registration() {
    builder().check(|| {
        let view = ring();
        assert_eq!(registry::register(&view, 7, "old", 1, |_| true), Ok(0));
        let newcomer = {
            let view = view.clone();
            // Pid 7 looks dead from here (another PID namespace, say).
            thread::spawn(move || registry::register(&view, 8, "new", 5, |p| p != 7))
        };
        match registry::unregister(&view, 0, 7) {
            Ok(()) => {}
            Err(e) => assert_eq!(
                e,
                registry::RegistryError::NotOwner {
                    slot: 0,
                    pid: 7,
                    found: 8
                }
            ),
        }
        assert_eq!(newcomer.join().unwrap(), Ok(0));
        assert_eq!(
            live_reader(&view, 0),
            Some(LiveReader {
                slot: 0,
                pid: 8,
                cursor: 5
            })
        );
        assert_eq!(gate_limit(&view, SEQ), 5 + C);
    });
}

/// A dead reader's slot still holds its pid, 7, and its token (started at tick 1); the
/// process that got pid 7 since (started at tick 2) registers while a pruner frees the old
/// registration, both judging by the token. The pruner never frees the new registration:
/// either the registrant clears the old token first (the pruner's CAS on it fails and it
/// frees nothing), or the pruner does (the registrant then sees pid 7 with no token, alive,
/// and finds no other slot, unless the pruner freed the pid before it looked). Were the pid CAS alone to decide, a pruner that read the old
/// token could free the slot just after the registrant claimed it again under the same pid.
#[test]
fn a_reused_pid_registering_races_a_pruner_of_its_predecessor() {
    builder().check(|| {
        let view = ring();
        let old = Incarnation::new(1, 5);
        let new = Incarnation::new(2, 5);
        let name = encode_name("r");
        register_owner_as(&view, 7, &name, 1, Some(old), |_, _| true).unwrap();
        let alive = |pid: u32, token: u64| {
            pid == 7 && token_incarnation(pid, token).is_none_or(|i| i.start == 2)
        };
        let reader = {
            let view = view.clone();
            thread::spawn(move || register_owner_as(&view, 7, &name, 5, Some(new), alive))
        };
        let freed = prune_dead_by(&view, alive, |_| {});
        let token = || {
            view.registry_a64(0, reg::HEARTBEAT_TSC)
                .unwrap()
                .load(Ordering::Acquire)
        };
        match reader.join().unwrap() {
            Ok(owner) => {
                // The pruner freed the old registration before the registrant looked, or
                // nothing.
                assert!(freed <= 1);
                assert_eq!(owner.slot, 0);
                assert_eq!(
                    live_reader(&view, 0),
                    Some(LiveReader {
                        slot: 0,
                        pid: 7,
                        cursor: 5
                    })
                );
                assert_eq!(token(), owner.token);
                assert_eq!(token_incarnation(7, owner.token), Some(new));
            }
            Err(e) => {
                assert_eq!(e, registry::RegistryError::Full { count: 1 });
                assert_eq!((freed, live_reader(&view, 0), token()), (1, None, 0));
            }
        }
    });
}

/// Two readers of two processes register at once in a registry of two free slots: each
/// ends in a slot of its own that shows its pid and its token. A registrant that read a
/// slot's pid (0) before the other claimed it and its token after cleared the other's token:
/// that reader's publishes and its unregister then failed (NotOwner), and the slot stayed
/// live under its pid with a frozen cursor, holding a lossless producer.
#[test]
fn two_registrants_keep_their_own_tokens() {
    builder().check(|| {
        let geo = Geometry::spmc(C, 16, 8, 2, true).unwrap();
        let region = Region::loom_new(geo.total_len().unwrap() as usize);
        // SAFETY: a fresh loom region, no other view of it exists yet.
        let view = unsafe { RingView::init(region, &geo) }.unwrap();
        let other = {
            let view = view.clone();
            thread::spawn(move || register_owner(&view, 8, &encode_name("b"), 5, |_| true))
        };
        let a = register_owner(&view, 7, &encode_name("a"), 5, |_| true).unwrap();
        let b = other.join().unwrap().unwrap();
        assert_ne!(a.slot, b.slot);
        for o in [a, b] {
            assert_eq!(registry::publish_cursor_as(&view, o, 6), Ok(()));
            assert_eq!(registry::unregister_owner(&view, o), Ok(()));
        }
    });
}
