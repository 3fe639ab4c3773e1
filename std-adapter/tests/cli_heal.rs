//! `ringwire heal`: an MPMC queue file's stuck slots are healed when no other process has
//! it open and reported (exit 1) otherwise; a lossy MPMC ring's slots left mid-write are
//! healed only with `--producers-stopped`; other files have nothing to heal.

use std::sync::atomic::Ordering;

use ringwire::MpmcProducer;
use ringwire::core::Geometry;
use ringwire::queue::MpmcQueue;
use ringwire::{CleanupMode, CreateOptions, RingFile};

mod common;
use common::{TmpRing, ringwire};

#[test]
fn a_queue_files_stuck_claim_is_healed_once_no_other_process_has_it_open() {
    let t = TmpRing::new("heal-q");
    let path = t.0.to_str().unwrap();
    let q = MpmcQueue::<u64>::create(&t.0, 8).unwrap();
    q.try_push(&10).unwrap();
    // A producer claims position 1 and dies before writing it.
    let stuck = q.claim().unwrap();
    q.try_push(&12).unwrap();
    // This process still has the queue open: the holder may be alive.
    let (code, out, err) = ringwire(&["heal", path]);
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains(&format!(
            "{path}: 1 position(s) stuck (the first: {stuck}, claimed by a producer) and not healed"
        )) && err.contains("Stop every process using the queue"),
        "{err}"
    );
    let (_, out, _) = ringwire(&["stat", path, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["claimed_unpublished"], stuck);

    drop(q);
    let (code, out, err) = ringwire(&["heal", path]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("healed 1 stuck position(s)"), "{out}");
    let (_, out, _) = ringwire(&["stat", path, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["claimed_unpublished"].is_null(), "{v}");
    // The consumers pass the healed position: 10, then 12.
    let q = MpmcQueue::<u64>::open(&t.0).unwrap();
    assert_eq!(q.try_pop_with_pos(|_| ()), Ok(Some((0, 10))));
    let mut healed = Vec::new();
    assert_eq!(q.try_pop_with_pos(|p| healed.push(p)), Ok(Some((2, 12))));
    assert_eq!(healed, [stuck]);
    drop(q);
    let (code, out, err) = ringwire(&["heal", path]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("no stuck positions; nothing to heal"), "{out}");
}

#[test]
fn a_lossy_rings_slot_left_mid_write_is_healed_only_with_producers_stopped() {
    let t = TmpRing::new("heal-lossy");
    let path = t.0.to_str().unwrap();
    let p = MpmcProducer::<u64>::create(&t.0, 4).unwrap();
    let (code, out, err) = ringwire(&["heal", path]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("no slot left mid-write; nothing to heal"),
        "{out}"
    );
    p.push(&1);
    // A producer took ticket 2, marked its slot and died while copying.
    // SAFETY: the view is used while `p` keeps the mapping.
    let v = unsafe { p.file().view() };
    v.claim_seq().fetch_add(1, Ordering::SeqCst);
    v.slot_seq(2).store(u64::MAX, Ordering::SeqCst);

    let (code, out, err) = ringwire(&["heal", path]);
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains(&format!(
            "{path}: 1 slot(s) left mid-write (the first: 2) and not healed"
        )) && err.contains("--producers-stopped"),
        "{err}"
    );
    assert_eq!(v.slot_seq(2).load(Ordering::SeqCst), u64::MAX);

    let (code, out, err) = ringwire(&["heal", path, "--producers-stopped"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("healed slot 2 (left mid-write)\nhealed 1 slot(s) left mid-write\n"),
        "{out}"
    );
    assert_eq!(v.slot_seq(2).load(Ordering::SeqCst), 0);
    let (_, out, _) = ringwire(&["stat", path, "--json"]);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["mid_write_slots"], 0, "{j}");
}

#[test]
fn files_without_stuck_slots_have_nothing_to_heal_and_bad_files_are_errors() {
    let t = TmpRing::new("heal-other");
    let path = t.0.to_str().unwrap();
    let geo = Geometry::spmc(16, 16, 8, 0, false).unwrap();
    let opts = CreateOptions {
        cleanup: CleanupMode::UnlinkOnDrop,
        ..CreateOptions::default()
    };
    let ring = RingFile::create(&t.0, &geo, &opts).unwrap();
    let (code, out, err) = ringwire(&["heal", path]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("a single-writer ring has no stuck slots"),
        "{out}"
    );
    drop(ring);

    let prod = ringwire::queue::SpscProducer::<u64>::create(&t.0, 8).unwrap();
    let (code, out, err) = ringwire(&["heal", path]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("an SPSC queue has no stuck slots"), "{out}");
    drop(prod);
    let _ = std::fs::remove_file(&t.0);

    std::fs::write(&t.0, [7u8; 200]).unwrap();
    let (code, out, err) = ringwire(&["heal", path]);
    assert_eq!(code, 1, "{out}");
    assert!(err.contains(path) && err.contains("magic"), "{err}");
    let (code, _, err) = ringwire(&["heal"]);
    assert_eq!(code, 1);
    assert!(err.contains("<PATH>"), "{err}");
}
