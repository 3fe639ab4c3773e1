//! The lossless gate and the reader registry: what a registration protects, and a reader
//! whose slot was pruned (its pid judged dead) while it still reads.
// Heap-memory rings need `Region::from_raw_parts`, which loom builds do not have.
#![cfg(not(loom))]

use ringwire_core::broadcast::registry::{self, live_readers};
use ringwire_core::broadcast::{Consumer, NoWake, Producer, StartMode};
use ringwire_core::layout::reg;
use ringwire_core::{Geometry, RingView};

mod broadcast_common;

use broadcast_common::ring;

fn drain(c: &mut Consumer) -> Vec<u64> {
    let mut b = [0u8; 8];
    let mut v = Vec::new();
    while let Some(s) = c.try_recv(&mut b) {
        assert_eq!(u64::from_le_bytes(b), s, "payload belongs to its sequence");
        v.push(s);
    }
    v
}

/// (pid, cursor) of every live reader, in slot order.
fn readers(view: &RingView) -> Vec<(u32, u64)> {
    live_readers(view).map(|r| (r.pid, r.cursor)).collect()
}

/// A lossless ring of `cap` 16-byte slots and `readers` registry slots, with a producer
/// that pushed 1..=n (payload = sequence) with no reader registered.
fn lossless(cap: u64, readers: u32, n: u64) -> (broadcast_common::Heap, RingView, Producer) {
    let (h, view) = ring(&Geometry::spmc(cap, 16, 8, readers, true).unwrap());
    let mut p = Producer::new(view, NoWake).unwrap();
    for s in 1..=n {
        p.try_push(&s.to_le_bytes()).unwrap();
    }
    (h, view, p)
}

/// Pushes from `from` on until the gate refuses; returns the first refused sequence.
fn push_until_blocked(p: &mut Producer, from: u64) -> u64 {
    for s in from..from + 64 {
        if p.try_push(&s.to_le_bytes()).is_err() {
            return s;
        }
    }
    panic!("the lossless gate never refused a push");
}

#[test]
fn a_pruned_reader_stores_nothing_into_its_old_slot_once_another_reader_owns_it() {
    // One registry slot: A registers, is pruned (its pid judged dead), B takes the slot.
    let (_h, view, mut p) = lossless(4, 1, 0);
    let mut a = Consumer::new(view, StartMode::Oldest);
    assert_eq!(a.register(11, "a", |_, _| true).unwrap(), Some(0));
    for s in 1..=4u64 {
        p.try_push(&s.to_le_bytes()).unwrap();
    }
    assert_eq!(registry::prune_dead(&view, |pid| pid != 11), 1);
    let mut b = Consumer::new(view, StartMode::Oldest);
    assert_eq!(b.register(12, "b", |pid, _| pid != 11).unwrap(), Some(0));
    assert_eq!(readers(&view), [(12, 1)]);

    // A reads on: its cursor must not land in B's slot, and with no free slot it goes on
    // unregistered.
    assert_eq!(drain(&mut a), [1, 2, 3, 4]);
    assert_eq!(readers(&view), [(12, 1)], "A's cursor overwrote B's");
    assert_eq!(a.registry_slot(), None);

    // So the producer still waits for B, which gets every record.
    assert_eq!(push_until_blocked(&mut p, 5), 5);
    assert_eq!(drain(&mut b), [1, 2, 3, 4]);
    assert_eq!(b.lapped(), 0);
    assert_eq!(push_until_blocked(&mut p, 5), 9);
    assert_eq!(drain(&mut b), [5, 6, 7, 8]);
    assert_eq!(b.lapped(), 0);
}

#[test]
fn a_pruned_reader_registers_again_in_a_free_slot() {
    let (_h, view, mut p) = lossless(4, 2, 0);
    let mut a = Consumer::new(view, StartMode::Oldest);
    assert_eq!(a.register(11, "a", |_, _| true).unwrap(), Some(0));
    for s in 1..=4u64 {
        p.try_push(&s.to_le_bytes()).unwrap();
    }
    registry::prune_dead(&view, |pid| pid != 11);
    let mut b = Consumer::new(view, StartMode::Oldest);
    assert_eq!(b.register(12, "b", |pid, _| pid != 11).unwrap(), Some(0));

    // A's next receive finds its slot taken and registers again in the free one, under
    // its own pid and name, from its cursor on.
    let mut buf = [0u8; 8];
    assert_eq!(a.try_recv(&mut buf), Some(1));
    assert_eq!(a.registry_slot(), Some(1));
    assert_eq!(readers(&view), [(12, 1), (11, 2)]);
    let name = view.registry_name(1).unwrap();
    assert_eq!(registry::name_bytes(&name), b"a");
    assert_eq!(drain(&mut a), [2, 3, 4]);
    assert_eq!(readers(&view), [(12, 1), (11, 5)]);

    // The producer waits for the slower of the two, and A is counted again.
    assert_eq!(push_until_blocked(&mut p, 5), 5);
    assert_eq!(drain(&mut b), [1, 2, 3, 4]);
    assert_eq!(push_until_blocked(&mut p, 5), 9);
    assert_eq!(drain(&mut a), [5, 6, 7, 8]);
    assert_eq!(drain(&mut b), [5, 6, 7, 8]);
    assert_eq!((a.lapped(), b.lapped()), (0, 0));
}

#[test]
fn a_late_registration_is_protected_from_write_seq_plus_1_minus_half_the_ring() {
    // Capacity 8, 1..=9 pushed with nobody registered: the producer last read the registry
    // at 9 and may write up to 12 before it reads it again (a window of C/2), so records
    // from w + 1 - C/2 = 6 on are safe for a reader registering now, and older ones are
    // not (the documented limit of `Consumer::register` on a lossless ring).
    let (_h, view, mut p) = lossless(8, 2, 9);
    let mut safe = Consumer::new(view, StartMode::Sequence(6));
    safe.register(21, "safe", |_, _| true).unwrap();
    let mut early = Consumer::new(view, StartMode::Oldest);
    assert_eq!(early.cursor(), 2);
    early.register(22, "early", |_, _| true).unwrap();

    // The registry holds both cursors, yet the pushes up to the producer's next read of it
    // overwrite 2..=4 under the early reader, which counts them as lapped.
    assert_eq!(push_until_blocked(&mut p, 10), 13);
    assert_eq!(drain(&mut early), (5..=12).collect::<Vec<_>>());
    assert_eq!(early.lapped(), 3);
    assert_eq!(drain(&mut safe), (6..=12).collect::<Vec<_>>());
    assert_eq!(safe.lapped(), 0);
}

#[test]
fn two_readers_of_one_process_pruned_together_each_register_again() {
    // Readers of one process share its pid: A in slot 0 and B in slot 1, both pruned. B
    // reads first and takes slot 0 again; A must then see that slot 0 is no longer its
    // own (the pid alone matches) and take slot 1, or the producer would follow one
    // cursor for both.
    let (_h, view, mut p) = lossless(4, 2, 0);
    let mut a = Consumer::new(view, StartMode::Oldest);
    let mut b = Consumer::new(view, StartMode::Oldest);
    assert_eq!(a.register(11, "consumer", |_, _| true).unwrap(), Some(0));
    assert_eq!(b.register(11, "consumer", |_, _| true).unwrap(), Some(1));
    for s in 1..=4u64 {
        p.try_push(&s.to_le_bytes()).unwrap();
    }
    assert_eq!(registry::prune_dead(&view, |pid| pid != 11), 2);
    assert_eq!(drain(&mut b), [1, 2, 3, 4]);
    assert_eq!(b.registry_slot(), Some(0));
    let mut buf = [0u8; 8];
    assert_eq!(a.try_recv(&mut buf), Some(1));
    assert_eq!(a.registry_slot(), Some(1), "A kept writing into B's slot");
    assert_eq!(readers(&view), [(11, 5), (11, 2)]);

    // The producer waits for A, the slower; neither is lapped.
    assert_eq!(push_until_blocked(&mut p, 5), 6);
    assert_eq!(drain(&mut a), [2, 3, 4, 5]);
    assert_eq!(push_until_blocked(&mut p, 6), 9);
    assert_eq!(drain(&mut b), [5, 6, 7, 8]);
    assert_eq!(drain(&mut a), [6, 7, 8]);
    assert_eq!((a.lapped(), b.lapped()), (0, 0));
}

#[test]
fn a_pruned_reader_dropped_leaves_alone_the_slot_its_sibling_took_again() {
    // A and B of one process (pid 11) in slots 0 and 1, both pruned; C takes slot 0, A's
    // next receive takes slot 1 (B's old one). B, dropped without having read again, must
    // not free the slot: its pid is A's too, its token is not.
    let (_h, view, mut p) = lossless(4, 2, 0);
    let mut a = Consumer::new(view, StartMode::Oldest);
    let mut b = Consumer::new(view, StartMode::Oldest);
    assert_eq!(a.register(11, "consumer", |_, _| true).unwrap(), Some(0));
    assert_eq!(b.register(11, "consumer", |_, _| true).unwrap(), Some(1));
    p.try_push(&1u64.to_le_bytes()).unwrap();
    assert_eq!(registry::prune_dead(&view, |pid| pid != 11), 2);
    let mut c = Consumer::new(view, StartMode::Oldest);
    assert_eq!(
        c.register(12, "other", |pid, _| pid != 11).unwrap(),
        Some(0)
    );
    assert_eq!(drain(&mut a), [1]);
    assert_eq!(a.registry_slot(), Some(1));
    drop(b);
    assert_eq!(readers(&view), [(12, 1), (11, 2)], "B freed A's slot");
}

#[test]
fn a_ring_of_write_markers_is_crossed_a_lap_at_a_time() {
    // A corrupt ring: every slot holds the write marker and write_seq is far ahead of a
    // reader. Each poll stays bounded; the 64th moves the reader past the oldest record
    // write_seq leaves, not one record.
    let (_h, view, _p) = lossless(4, 0, 4);
    let mut c = Consumer::new(view, StartMode::Head);
    assert_eq!(c.cursor(), 5);
    for s in 1..=4u64 {
        view.slot_seq(s)
            .store(u64::MAX, ringwire_core::sync::Ordering::Relaxed);
    }
    view.write_seq()
        .store(1000, ringwire_core::sync::Ordering::Release);
    let mut buf = [0u8; 8];
    for _ in 0..64 {
        assert_eq!(c.try_recv(&mut buf), None);
    }
    assert_eq!((c.cursor(), c.lapped()), (997, 992));
}

#[test]
fn a_registry_field_that_is_not_one_of_the_accessors_is_none() {
    // A field other than the documented ones used to fail a debug assertion (a panic in
    // debug builds) and, in release builds, to reach another field of the slot.
    let (_h, view) = ring(&Geometry::spmc(4, 16, 8, 2, false).unwrap());
    for field in [reg::PID, reg::ACTIVE] {
        assert!(view.registry_a32(1, field).is_some(), "{field}");
        assert!(view.registry_a64(1, field).is_none(), "{field}");
    }
    for field in [reg::CURSOR_SEQ, reg::HEARTBEAT_TSC] {
        assert!(view.registry_a64(1, field).is_some(), "{field}");
        assert!(view.registry_a32(1, field).is_none(), "{field}");
    }
    for field in [1, 2, 12, 24, 60, 64, usize::MAX] {
        assert!(view.registry_a32(0, field).is_none(), "{field}");
        assert!(view.registry_a64(0, field).is_none(), "{field}");
    }
    // Each accessor reaches its own field.
    view.registry_a32(1, reg::ACTIVE)
        .unwrap()
        .store(7, ringwire_core::sync::Ordering::Relaxed);
    view.registry_a64(1, reg::HEARTBEAT_TSC)
        .unwrap()
        .store(9, ringwire_core::sync::Ordering::Relaxed);
    let load32 = |f| {
        view.registry_a32(1, f)
            .unwrap()
            .load(ringwire_core::sync::Ordering::Relaxed)
    };
    let load64 = |f| {
        view.registry_a64(1, f)
            .unwrap()
            .load(ringwire_core::sync::Ordering::Relaxed)
    };
    assert_eq!((load32(reg::PID), load32(reg::ACTIVE)), (0, 7));
    assert_eq!(
        (load64(reg::CURSOR_SEQ), load64(reg::HEARTBEAT_TSC)),
        (0, 9)
    );
    assert!(view.registry_a32(2, reg::PID).is_none(), "no slot 2");
}

/// Registrants of four processes (pids 101 to 104, as threads) take, use and give back the
/// two slots of a registry, while ghosts (pids from 1000 on, each dead once it registered)
/// keep taking a slot and a pruner keeps freeing theirs. Every registration keeps its token
/// to the end: each publish and each unregister by it succeeds. A registrant or a pruner
/// that read a slot's pid before another registrant claimed it and the token after cleared
/// that registrant's token: its publishes and its unregister then failed (NotOwner) and its
/// slot stayed live under its pid, a frozen cursor a lossless producer waits on (12 runs of
/// 16 lost one slot or both so, on a loaded 2-core machine). Caught by a stress test of
/// processes; loom_registry's two_registrants_keep_their_own_tokens shows it step by step,
/// every time.
#[test]
fn concurrent_registrants_and_pruners_never_take_a_live_readers_token() {
    use std::sync::atomic::{
        AtomicU32, AtomicU64,
        Ordering::{Acquire, Relaxed, Release},
    };
    const ROUNDS: u64 = if cfg!(miri) { 20 } else { 200_000 };
    let (_h, view) = ring(&Geometry::spmc(4, 16, 8, 2, true).unwrap());
    // The ghost's pids below this one are dead: it died once it had registered.
    let next_ghost = &AtomicU32::new(1000);
    // Acquire: a ghost judged dead has made all its stores (its release below), as a dead
    // process has.
    let alive = |pid: u32, _| pid < 1000 || pid >= next_ghost.load(Acquire);
    // Counted, not asserted in the threads: a registrant that panicked would leave the ghost
    // and the pruner running for ever.
    let (lost, finished) = (&AtomicU64::new(0), &AtomicU64::new(0));
    std::thread::scope(|s| {
        for pid in 101..=104u32 {
            s.spawn(move || {
                let name = registry::encode_name("r");
                for i in 0..ROUNDS {
                    match registry::register_owner_as(&view, pid, &name, i, None, alive) {
                        Ok(o) => {
                            let published = (0..4)
                                .all(|k| registry::publish_cursor_as(&view, o, i + k).is_ok());
                            let left = registry::unregister_owner(&view, o).is_ok();
                            if !(published && left) {
                                lost.fetch_add(1, Relaxed);
                            }
                        }
                        Err(registry::RegistryError::Full { count: 2 }) => {}
                        Err(_) => {
                            lost.fetch_add(1, Relaxed);
                        }
                    }
                }
                finished.fetch_add(1, Relaxed);
            });
        }
        let running = || finished.load(Relaxed) < 4;
        s.spawn(move || {
            let name = registry::encode_name("ghost");
            for pid in 1000.. {
                if !running() {
                    break;
                }
                let _ = registry::register_owner_as(&view, pid, &name, 1, None, alive);
                next_ghost.store(pid + 1, Release);
            }
        });
        s.spawn(move || {
            while running() {
                registry::prune_dead_by(&view, alive, |_| {});
            }
        });
    });
    assert_eq!(lost.load(Relaxed), 0, "registrations that lost their slot");
    registry::prune_dead_by(&view, alive, |_| {});
    assert_eq!(readers(&view), []);
}
