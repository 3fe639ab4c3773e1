//! A source restarted with a new ring that has already passed the mirror's position when the
//! mirror reconnects. The new ring numbers from 1 again, so a resume at the mirror's `next`
//! is no more than the new ring holds: the source answers without RESET (spec §19.1), and a
//! mirror that trusted that appended the new ring's records to the old ring's. A resuming
//! mirror asks for the last record it holds again and compares the source's copy with its
//! own (the mirror module docs): a different one recreates the mirror ring.
//!
//! Over loopback, without root: ringwire's `serve::run_following` as the source (it ends
//! its sessions when the ring at its path is replaced, and the mirror, left running,
//! reconnects) over TCP and multicast; the published ringfire 0.5.2 server as the source
//! (the mirror was down while the producer restarted); and the control cases, the same ring
//! resumed, where nothing may be recreated, lost or written twice.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ringwire::ReadOnlyRing;
use ringwire::core::SlotRead;
use ringwire::core::replicate::Start;
use ringwire::replica::mirror::{self, MirrorOptions, MirrorSummary};
use ringwire::replica::serve::{ServeOptions, run_following};
use ringwire_tests::replica::{Mode, SetOnDrop, free_addr, mirror_options, serve_options};
use ringwire_tests::shm::ShmPath;
use ringwire_tests::tagged::{LEN, census, publish, record, ring_at};
use ringwire_tests::wait_until;

/// Records of the first ring.
const OLD: u64 = 1000;
/// Records the new ring publishes before the mirror reconnects.
const NEW: u64 = 5000;
const WAIT: Duration = Duration::from_secs(30);

/// The mirror ring holds exactly records `from..=to` of `tag`, with the source's bytes.
fn assert_holds(path: &Path, tag: u8, from: u64, to: u64) {
    let m = ReadOnlyRing::open(path).expect("mirror ring");
    assert_eq!(m.write_seq(), to, "write_seq");
    let mut b = [0u8; LEN];
    for seq in 1..=to {
        let r = m.read_slot(seq, &mut b);
        if seq < from {
            assert_ne!(r, SlotRead::Ok, "record {seq} held (tag {})", b[8]);
        } else {
            assert_eq!(r, SlotRead::Ok, "record {seq}");
            assert_eq!(b, record(tag, seq), "record {seq}");
        }
    }
}

/// A multicast group and port private to this process and test.
fn mcast(idx: u16) -> SocketAddrV4 {
    let pid = std::process::id();
    SocketAddrV4::new(
        Ipv4Addr::new(239, 255, 102, idx as u8),
        44_000 + (pid % 4_000) as u16 * 4 + idx,
    )
}

/// `run_following` serving `src` over `mode` and a mirror of it, both left running: ring A
/// (1,000 records) is mirrored, then replaced at its path by ring B with 5,000 records.
/// Before the check the mirror resumed at 1,001 (less than B holds, so no RESET) and ended
/// with A's 1..=1,000 followed by B's 1,001..=5,000, with no restart counted.
fn replaced_while_mirrored(mode: Mode, idx: u16) {
    let src = ShmPath::new(&format!("restart-src-{idx}"));
    let dst = ShmPath::new(&format!("restart-dst-{idx}"));
    let a = ring_at(src.path(), "restart-tmp", 1, OLD);
    let mut so: ServeOptions = serve_options(src.path(), mode, mcast(idx), 1);
    so.bind = free_addr();
    let mo = mirror_options(so.bind, dst.path(), mode);
    let stop = AtomicBool::new(false);
    let sum = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let s = sc.spawn(|| run_following(&so, &stop, |_| {}));
        let m = sc.spawn(|| mirror::run(&mo, &stop));
        wait_until("ring A mirrored", WAIT, || {
            census(dst.path()) == (OLD, [0, OLD, 0])
        });
        let b = ring_at(src.path(), "restart-tmp", 2, NEW);
        drop(a);
        wait_until("ring B mirrored", WAIT, || census(dst.path()).0 == NEW);
        stop.store(true, Ordering::Relaxed);
        s.join().unwrap().expect("serve ends cleanly");
        drop(b);
        m.join().unwrap().expect("mirror ends cleanly")
    });
    // B's records from the one the mirror compared, nothing of A.
    assert_eq!(census(dst.path()), (NEW, [0, 0, NEW - OLD + 1]), "{sum:?}");
    assert_holds(dst.path(), 2, OLD, NEW);
    assert_eq!(sum.counters.restarts, 1, "{sum:?}");
    assert_eq!(sum.counters.resumes_verified, 0, "{sum:?}");
    assert_eq!(sum.counters.gaps, 0, "{sum:?}");
    assert!(sum.connections >= 2, "{sum:?}");
}

#[test]
fn tcp_mirror_recreates_its_ring_for_a_new_ring_past_its_position() {
    replaced_while_mirrored(Mode::Tcp, 1);
}

#[test]
fn multicast_mirror_recreates_its_ring_for_a_new_ring_past_its_position() {
    replaced_while_mirrored(Mode::Multicast, 2);
}

/// Runs a mirror with `mo` until its ring's write_seq reaches `n`; returns its summary.
fn mirror_until(mo: &MirrorOptions, n: u64) -> MirrorSummary {
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let m = sc.spawn(|| mirror::run(mo, &stop));
        wait_until("the mirror to catch up", WAIT, || {
            ReadOnlyRing::open(&mo.path).is_ok_and(|r| r.write_seq() >= n)
        });
        stop.store(true, Ordering::Relaxed);
        m.join().unwrap().expect("mirror ends cleanly")
    })
}

/// Control: the same ring, the mirror stopped and resumed. The source's copy of the last
/// record held matches: nothing is recreated, lost or written twice.
fn same_ring_resumed(mode: Mode, idx: u16) {
    let src = ShmPath::new(&format!("resume-src-{idx}"));
    let dst = ShmPath::new(&format!("resume-dst-{idx}"));
    let a = ring_at(src.path(), "restart-tmp", 1, OLD);
    let mut so = serve_options(src.path(), mode, mcast(idx), 1);
    so.bind = free_addr();
    let mut mo = mirror_options(so.bind, dst.path(), mode);
    let stop = AtomicBool::new(false);
    let (first, second) = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let s = sc.spawn(|| run_following(&so, &stop, |_| {}));
        let first = mirror_until(&mo, OLD);
        // Published while the mirror is down.
        publish(&a, 1, OLD + 1, 2 * OLD);
        mo.start = Start::Resume;
        let second = mirror_until(&mo, 2 * OLD);
        stop.store(true, Ordering::Relaxed);
        s.join().unwrap().expect("serve ends cleanly");
        (first, second)
    });
    assert_eq!(first.counters.records_written, OLD, "{first:?}");
    let c = second.counters;
    assert_eq!((c.restarts, c.gaps), (0, 0), "{second:?}");
    assert_eq!(c.resumes_verified, 1, "{second:?}");
    assert_eq!(c.records_written, OLD, "each record once: {second:?}");
    assert_eq!(census(dst.path()), (2 * OLD, [0, 2 * OLD, 0]));
    assert_holds(dst.path(), 1, 1, 2 * OLD);
}

#[test]
fn tcp_mirror_resumed_at_the_same_ring_continues_it() {
    same_ring_resumed(Mode::Tcp, 3);
}

#[test]
fn multicast_mirror_resumed_at_the_same_ring_continues_it() {
    same_ring_resumed(Mode::Multicast, 4);
}

/// Ends ringfire's `serve_one` when the test fails before a mirror connected (it waits in
/// `accept` and has no stop flag): a connection that closes at once ends its session.
struct WakeAccept(SocketAddr);

impl Drop for WakeAccept {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for _ in 0..2 {
                let _ = std::net::TcpStream::connect_timeout(&self.0, Duration::from_secs(1));
            }
        }
    }
}

/// The published ringfire 0.5.2 server, which opens the ring at its path for every
/// connection, as the source (TCP). The mirror is down while the producer restarts with a
/// ring that passes its position; resumed, it finds the new ring and recreates its own.
/// Then the control: resumed again at the same (new) ring, it continues it.
#[test]
fn ringfire_serve_restarted_ring_is_found_by_a_resuming_mirror() {
    use ringfire::replication::ReplicaServer;
    let src = ShmPath::new("restart-rf-src");
    let dst = ShmPath::new("restart-rf-dst");
    let a = ring_at(src.path(), "restart-tmp", 1, OLD);
    let server = ReplicaServer::bind(src.path(), (Ipv4Addr::LOCALHOST, 0)).unwrap();
    let addr = server.local_addr().unwrap();
    let mut mo = mirror_options(addr, dst.path(), Mode::Tcp);
    let sums = std::thread::scope(|sc| {
        let _wake = WakeAccept(addr);
        // One session per mirror run. A session ends when its mirror has gone (its next
        // heartbeat write fails), cleanly or with a disconnect error.
        sc.spawn(|| {
            for _ in 0..3 {
                let _ = server.serve_one();
            }
        });
        let first = mirror_until(&mo, OLD);
        let b = ring_at(src.path(), "restart-tmp", 2, NEW);
        drop(a);
        mo.start = Start::Resume;
        let second = mirror_until(&mo, NEW);
        publish(&b, 2, NEW + 1, NEW + 100);
        let third = mirror_until(&mo, NEW + 100);
        [first, second, third]
    });
    let [first, second, third] = sums;
    assert_eq!(first.counters.records_written, OLD, "{first:?}");
    assert_eq!(second.counters.restarts, 1, "{second:?}");
    assert_eq!(second.counters.records_written, NEW - OLD + 1, "{second:?}");
    assert_eq!(
        (third.counters.restarts, third.counters.resumes_verified),
        (0, 1),
        "{third:?}"
    );
    assert_eq!(third.counters.records_written, 100, "{third:?}");
    assert_eq!(census(dst.path()), (NEW + 100, [0, 0, NEW + 100 - OLD + 1]));
    assert_holds(dst.path(), 2, OLD, NEW + 100);
}

/// A hub (a mirror ring served again, with `run_following`, which follows the hub ring when
/// its mirror recreates it) passes the restart on: source → (multicast) → hub → (TCP) →
/// leaf. Ring A is mirrored by both, then replaced by ring B past their position; the hub
/// finds B by its resume check and recreates its ring, its serve follows the new hub ring,
/// and the leaf, resuming, finds it the same way. Both end with B's records only.
#[test]
fn a_hub_passes_a_restarted_source_on_to_its_leaf() {
    let src = ShmPath::new("restart-hub-src");
    let hub = ShmPath::new("restart-hub-mid");
    let leaf = ShmPath::new("restart-hub-leaf");
    let a = ring_at(src.path(), "restart-tmp", 1, OLD);
    let mut so = serve_options(src.path(), Mode::Multicast, mcast(5), 1);
    so.bind = free_addr();
    let mut ho = serve_options(hub.path(), Mode::Tcp, mcast(6), 1);
    ho.bind = free_addr();
    let to_hub = mirror_options(so.bind, hub.path(), Mode::Multicast);
    let to_leaf = mirror_options(ho.bind, leaf.path(), Mode::Tcp);
    let stop = AtomicBool::new(false);
    let (hub_sum, leaf_sum) = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let s = sc.spawn(|| run_following(&so, &stop, |_| {}));
        let m1 = sc.spawn(|| mirror::run(&to_hub, &stop));
        wait_until("the hub ring", WAIT, || {
            ReadOnlyRing::open(hub.path()).is_ok()
        });
        let h = sc.spawn(|| run_following(&ho, &stop, |_| {}));
        let m2 = sc.spawn(|| mirror::run(&to_leaf, &stop));
        for p in [hub.path(), leaf.path()] {
            wait_until("ring A mirrored", WAIT, || census(p) == (OLD, [0, OLD, 0]));
        }
        let b = ring_at(src.path(), "restart-tmp", 2, NEW);
        drop(a);
        for p in [hub.path(), leaf.path()] {
            wait_until("ring B mirrored", WAIT, || census(p).0 == NEW);
        }
        stop.store(true, Ordering::Relaxed);
        s.join().unwrap().expect("serve ends cleanly");
        h.join().unwrap().expect("hub serve ends cleanly");
        drop(b);
        (
            m1.join().unwrap().expect("hub mirror ends cleanly"),
            m2.join().unwrap().expect("leaf mirror ends cleanly"),
        )
    });
    for (p, sum) in [(hub.path(), hub_sum), (leaf.path(), leaf_sum)] {
        assert_eq!(census(p), (NEW, [0, 0, NEW - OLD + 1]), "{sum:?}");
        assert_holds(p, 2, OLD, NEW);
        assert_eq!(sum.counters.restarts, 1, "{sum:?}");
    }
}
