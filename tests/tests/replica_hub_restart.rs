//! A hub (a mirror ring served onward: source → hub mirror and serve → leaf mirror) whose
//! mirror recreated its ring for a restarted source holds records only from the sequence
//! it resumed at, `w`: the new ring's slots below `w` were never written. A leaf that was
//! behind the hub (resuming below `w`), or a new leaf asking for the oldest record, gets a
//! start cursor below `w` (spec §19.1), and a local reader attached from the oldest starts
//! there too (§5). The hub ring is sparse (§7): those slots are holes, not records still to
//! come, and every reader of the hub has to get past them. A leaf that followed ring A
//! through the hub is told to start again (GEOMETRY RESET), as one connected to the source
//! itself would be: it must not keep A's records with B's appended after them.
//!
//! Over loopback, without root: ringwire's `serve::run_following` serves the source (TCP)
//! and the hub (TCP, multicast or unicast); ring A is replaced at its path by ring B, which
//! has passed the hub's position, as in `replica_restart.rs`.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ringwire::core::SlotRead;
use ringwire::core::replicate::Start;
use ringwire::replica::mirror::{self, MirrorOptions, MirrorSummary};
use ringwire::replica::serve::run_following;
use ringwire::{ReadOnlyRing, RingConsumer};
use ringwire_tests::replica::{Mode, SetOnDrop, free_addr, mirror_options, serve_options};
use ringwire_tests::shm::ShmPath;
use ringwire_tests::tagged::{LEN, census, publish, record, ring_at};
use ringwire_tests::wait_until;

/// Records of ring A the leaf holds when it is stopped.
const LEAF: u64 = 500;
/// Records of ring A the hub holds when the source restarts: the hub's `w`.
const OLD: u64 = 1000;
/// Records ring B publishes before the hub reconnects to it.
const NEW: u64 = 5000;
/// Generous for loopback; a reader stalled at a hole never gets there.
const WAIT: Duration = Duration::from_secs(20);

/// The ring at `path` has write_seq `to` and, below it, exactly the records `runs` list
/// (each `(tag, from, to)`, with the source's bytes); every other sequence is a hole.
fn assert_holds(path: &Path, to: u64, runs: &[(u8, u64, u64)]) {
    let m = ReadOnlyRing::open(path).expect("ring");
    assert_eq!(m.write_seq(), to, "write_seq of {}", path.display());
    let mut b = [0u8; LEN];
    for seq in 1..=to {
        let r = m.read_slot(seq, &mut b);
        match runs.iter().find(|&&(_, a, z)| (a..=z).contains(&seq)) {
            Some(&(tag, ..)) => {
                assert_eq!(r, SlotRead::Ok, "record {seq} of {}", path.display());
                assert_eq!(b, record(tag, seq), "record {seq} of {}", path.display());
            }
            None => assert_ne!(r, SlotRead::Ok, "record {seq} held (tag {})", b[8]),
        }
    }
}

/// A multicast group and port private to this process and test.
fn mcast(idx: u16) -> SocketAddrV4 {
    let pid = std::process::id();
    SocketAddrV4::new(
        Ipv4Addr::new(239, 255, 103, idx as u8),
        48_000 + (pid % 4_000) as u16 * 4 + idx,
    )
}

/// Runs a mirror with `mo` until its ring's write_seq reaches `n` (within [`WAIT`]); returns
/// its summary.
fn mirror_until(mo: &MirrorOptions, n: u64) -> MirrorSummary {
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let m = sc.spawn(|| mirror::run(mo, &stop));
        wait_until(&format!("{} to reach {n}", mo.path.display()), WAIT, || {
            ReadOnlyRing::open(&mo.path).is_ok_and(|r| r.write_seq() >= n)
        });
        stop.store(true, Ordering::Relaxed);
        m.join().unwrap().expect("mirror ends cleanly")
    })
}

/// A local reader of the hub ring attached from the oldest record (sequence 1: nothing was
/// lapped) reads B's records `OLD..=NEW` in order, within [`WAIT`], having skipped the
/// never-written slots below `OLD` as holes.
fn read_hub_from_oldest(hub: &Path) {
    let mut c = RingConsumer::<[u8; LEN]>::attach(hub).expect("attach the hub ring");
    assert_eq!(c.cursor(), 1, "oldest retained");
    let mut want = OLD;
    let t0 = Instant::now();
    while want <= NEW {
        match c.try_recv_seq() {
            Some((seq, r)) => {
                assert_eq!((seq, r), (want, record(2, want)), "local reader");
                want += 1;
            }
            None => {
                assert!(
                    t0.elapsed() < WAIT,
                    "local reader stalled at {} (lapped {})",
                    c.cursor(),
                    c.lapped_count()
                );
                std::thread::yield_now();
            }
        }
    }
    assert_eq!(c.lapped_count(), OLD - 1, "holes skipped");
}

/// Source (TCP) → hub → leaf over `mode`. The leaf mirrors A's 1..=500 and is stopped; A
/// goes on to 1,000, which the hub mirrors; then A is replaced by B (5,000 records) and the
/// hub, resuming, finds B and recreates its ring: B's 1,000..=5,000. Then:
///
/// - a local reader of the hub ring from the oldest reads B's records;
/// - the leaf, resumed at 500 (below the hub's first record), catches up to 5,000. The hub
///   no longer holds 500, so the leaf cannot check its resume: it keeps A's 1..=500, and
///   501..=999 are a hole, counted as one gap;
/// - a new leaf from the oldest holds B's 1,000..=5,000 only, the rest one counted gap.
fn hub_recreated_leaf_behind(mode: Mode, idx: u16) {
    let src = ShmPath::new(&format!("hubrs-src-{idx}"));
    let hub = ShmPath::new(&format!("hubrs-hub-{idx}"));
    let leaf = ShmPath::new(&format!("hubrs-leaf-{idx}"));
    let fresh = ShmPath::new(&format!("hubrs-fresh-{idx}"));
    let a = ring_at(src.path(), "hubrs-tmp", 1, LEAF);
    let mut so = serve_options(src.path(), Mode::Tcp, mcast(idx), 1);
    so.bind = free_addr();
    let mut ho = serve_options(hub.path(), mode, mcast(idx), 1);
    ho.bind = free_addr();
    let to_hub = mirror_options(so.bind, hub.path(), Mode::Tcp);
    let mut to_leaf = mirror_options(ho.bind, leaf.path(), mode);
    let to_fresh = mirror_options(ho.bind, fresh.path(), mode);
    let stop = AtomicBool::new(false);
    let followed = AtomicU64::new(0);
    let (hub_sum, first, resumed, new_leaf) = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let s = sc.spawn(|| run_following(&so, &stop, |_| {}));
        let m = sc.spawn(|| mirror::run(&to_hub, &stop));
        wait_until("the hub ring", WAIT, || census(hub.path()).0 == LEAF);
        let h = sc.spawn(|| {
            run_following(&ho, &stop, |_| {
                followed.fetch_add(1, Ordering::Relaxed);
            })
        });
        let first = mirror_until(&to_leaf, LEAF);
        publish(&a, 1, LEAF + 1, OLD);
        wait_until("A mirrored by the hub", WAIT, || {
            census(hub.path()) == (OLD, [0, OLD, 0])
        });
        let b = ring_at(src.path(), "hubrs-tmp", 2, NEW);
        drop(a);
        wait_until("B mirrored by the hub", WAIT, || {
            census(hub.path()) == (NEW, [0, 0, NEW - OLD + 1])
        });
        // The hub's serve has left the ring it served before (the leaf would otherwise
        // resume from the old hub ring, which still holds A's records, and find B later).
        let t0 = Instant::now();
        while followed.load(Ordering::Relaxed) == 0 {
            // A serve that ended (it could not bind, say) never follows: said at once, with
            // what ended it.
            if h.is_finished() {
                let r = h.join().expect("the hub serve's thread");
                panic!("the hub serve ended before it followed the new ring: {r:?}");
            }
            assert!(
                t0.elapsed() < WAIT,
                "timed out after {WAIT:?} waiting for the hub serve to follow"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        read_hub_from_oldest(hub.path());
        to_leaf.start = Start::Resume;
        let resumed = mirror_until(&to_leaf, NEW);
        let new_leaf = mirror_until(&to_fresh, NEW);
        stop.store(true, Ordering::Relaxed);
        s.join().unwrap().expect("serve ends cleanly");
        h.join().unwrap().expect("hub serve ends cleanly");
        drop(b);
        let hub_sum = m.join().unwrap().expect("hub mirror ends cleanly");
        (hub_sum, first, resumed, new_leaf)
    });
    assert_eq!(hub_sum.counters.restarts, 1, "{hub_sum:?}");
    assert_holds(hub.path(), NEW, &[(2, OLD, NEW)]);
    assert_eq!(first.counters.records_written, LEAF, "{first:?}");

    // The leaf holds what the hub holds: ring B's records, not A's with B's after them.
    // The hub's serve finds the record before the one the leaf asks for (its last, LEAF) a
    // hole of its ring and answers RESET; the leaf recreates its ring at LEAF and skips
    // the hole up to B's first record.
    assert_holds(leaf.path(), NEW, &[(2, OLD, NEW)]);
    let c = resumed.counters;
    assert_eq!(c.records_written, NEW - OLD + 1, "{resumed:?}");
    assert_eq!((c.resumes_unverified, c.restarts), (0, 1), "{resumed:?}");
    assert_eq!((c.gaps, c.records_skipped), (1, OLD - LEAF), "{resumed:?}");

    assert_holds(fresh.path(), NEW, &[(2, OLD, NEW)]);
    let c = new_leaf.counters;
    assert_eq!(c.records_written, NEW - OLD + 1, "{new_leaf:?}");
    assert_eq!((c.gaps, c.records_skipped), (1, OLD - 1), "{new_leaf:?}");
}

#[test]
fn tcp_leaf_behind_a_recreated_hub_catches_up() {
    hub_recreated_leaf_behind(Mode::Tcp, 1);
}

#[test]
fn multicast_leaf_behind_a_recreated_hub_catches_up() {
    hub_recreated_leaf_behind(Mode::Multicast, 2);
}

#[test]
fn unicast_leaf_behind_a_recreated_hub_catches_up() {
    hub_recreated_leaf_behind(Mode::Unicast, 3);
}
