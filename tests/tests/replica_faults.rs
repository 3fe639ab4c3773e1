//! ringfire's fault-injection knobs, `MulticastConfig::drop_every` and `swap_every`, on
//! ringwire's facade server: a ring served over loopback multicast and over unicast (with
//! multicast configured too, since the knobs come with it, as in ringfire) while the server
//! skips every 7th DATA datagram or sends every 5th after its successor. Each run checks:
//!
//! - the mirror ring (ringwire's facade mirror, or ringfire 0.5.2's `Mirror`) ends identical
//!   to the source, sequence and bytes, and its counters show that it NAKed the holes;
//! - the datagrams on the wire, as a third socket in the multicast group sees them, follow
//!   ringfire's counting exactly: 1-based over DATA datagrams only (heartbeats, which come
//!   between the records published 2 ms apart, do not count), every copy of a dropped one
//!   skipped, a held one sent right after the next DATA datagram.
//!
//! The same wire check runs on ringfire's own server with the same knobs, so both crates are
//! held to one pattern. ringfire's server cannot be stopped in UDP modes: its threads are left
//! to the end of the test process, as in `replica_compat.rs`.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ringwire::{Mirror, MirrorStart, MulticastConfig, ReplicaServer};
use ringwire_tests::replica::{Mode, spawn_server};
use ringwire_tests::shm::ShmPath;
use ringwire_tests::wait_until;

const LEN: usize = 24;
const CAP: u64 = 1 << 14;
/// Records published before the mirror connects (they come over TCP).
const BEFORE: u64 = 300;
/// All records: the rest are published one every [`TICK`], live over UDP.
const N: u64 = 650;
/// Longer than the 1 ms heartbeat, so one comes between any two records: a held datagram
/// waits across it, and a knob that counted heartbeats would break the wire pattern.
const TICK: Duration = Duration::from_millis(2);
const DEADLINE: Duration = Duration::from_secs(30);

const KIND_DATA: u8 = 3;
const KIND_HEARTBEAT: u8 = 5;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    Drop(u64),
    Swap(u64),
}

fn payload(seq: u64) -> [u8; LEN] {
    ringwire_tests::replica::payload(seq)
}

/// A multicast group and port private to this process and test.
fn mcast(idx: u16) -> SocketAddrV4 {
    let pid = std::process::id();
    SocketAddrV4::new(
        Ipv4Addr::new(239, 255, 103, idx as u8),
        40_000 + (pid % 1_500) as u16 * 12 + idx,
    )
}

/// One datagram header as the sniffer saw it.
#[derive(Clone, Copy, Debug)]
struct Seen {
    kind: u8,
    session: u8,
    count: u16,
    seq: u64,
}

/// A third member of the multicast group that records every datagram header, in order.
struct Sniffer {
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Sniffer {
    /// Joins `g` on loopback, before the server sends anything.
    fn join(g: SocketAddrV4) -> Sniffer {
        use socket2::{Domain, Protocol, Socket, Type};
        let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
        s.set_reuse_address(true).unwrap();
        s.set_recv_buffer_size(4 << 20).unwrap();
        s.bind(&SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, g.port()).into())
            .unwrap();
        s.join_multicast_v4(g.ip(), &Ipv4Addr::LOCALHOST).unwrap();
        // Only this group, not every group some other socket joined on this port.
        s.set_multicast_all_v4(false).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let sock: UdpSocket = s.into();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (seen, stop) = (seen.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 65_536];
                let t0 = Instant::now();
                let mut draining = false;
                while t0.elapsed() < 2 * DEADLINE {
                    if !draining && stop.load(Ordering::Relaxed) {
                        // What the group got before the stop is queued on the socket: read
                        // it all (a thread that stopped at once left the last datagrams
                        // unread when it was behind, as on a loaded machine).
                        sock.set_nonblocking(true).unwrap();
                        draining = true;
                    }
                    let n = match sock.recv(&mut buf) {
                        Ok(n) => n,
                        Err(_) if draining => break,
                        Err(_) => continue,
                    };
                    if n >= 16 {
                        seen.lock().unwrap().push(Seen {
                            kind: buf[0],
                            session: buf[1],
                            count: u16::from_le_bytes([buf[2], buf[3]]),
                            seq: u64::from_le_bytes(buf[8..16].try_into().unwrap()),
                        });
                    }
                }
            })
        };
        Sniffer { seen, stop, thread }
    }

    /// The sequence of the first HEARTBEAT of `session`, once one has come: the server's
    /// UDP sender is running and will count from the next DATA datagram.
    fn first_heartbeat(&self, session: u8) -> u64 {
        let mut hb = None;
        wait_until("a heartbeat in the group", DEADLINE, || {
            hb = self
                .seen
                .lock()
                .unwrap()
                .iter()
                .find(|s| s.kind == KIND_HEARTBEAT && s.session == session)
                .map(|s| s.seq);
            hb.is_some()
        });
        hb.unwrap()
    }

    /// Stops, and returns the DATA datagrams of `session` as `(seq, count)` in arrival
    /// order with their copies merged: each must have come `dup` times in a row.
    fn data(self, session: u8, dup: usize) -> Vec<(u64, u16)> {
        std::thread::sleep(Duration::from_millis(50));
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap();
        let seen = self.seen.lock().unwrap();
        let all: Vec<(u64, u16)> = seen
            .iter()
            .filter(|s| s.kind == KIND_DATA && s.session == session)
            .map(|s| (s.seq, s.count))
            .collect();
        let frames: Vec<(u64, u16)> = all.chunks(dup).map(|c| c[0]).collect();
        for (i, c) in all.chunks(dup).enumerate() {
            assert!(
                c.len() == dup && c.iter().all(|f| *f == c[0]),
                "datagram {i} did not come {dup} times in a row: {c:?}"
            );
        }
        frames
    }
}

/// The wire pattern of `fault`: `frames` are the DATA datagrams in arrival order, the first
/// one built starting at `first`.
fn check_wire(frames: &[(u64, u16)], fault: Fault, first: u64) {
    let end = |f: (u64, u16)| f.0 + u64::from(f.1);
    match fault {
        Fault::Drop(every) => {
            assert!(
                frames.len() as u64 >= 3 * every,
                "only {} datagrams",
                frames.len()
            );
            // Datagram 1 is sent: counting starts at 1.
            assert_eq!(frames[0].0, first, "the first datagram is missing");
            // Datagrams 1..every-1 come back to back, then a hole, and so on.
            for (i, w) in frames.windows(2).enumerate() {
                let at = i as u64 + 1;
                assert!(w[1].0 >= end(w[0]), "datagram {at} out of order: {w:?}");
                let hole = w[1].0 > end(w[0]);
                assert_eq!(
                    hole,
                    at.is_multiple_of(every - 1),
                    "received datagram {at}: hole {hole} before it ({w:?})"
                );
            }
        }
        Fault::Swap(every) => {
            let mut built = frames.to_vec();
            built.sort_unstable();
            assert!(
                built.len() as u64 >= 3 * every,
                "only {} datagrams",
                built.len()
            );
            assert_eq!(built[0].0, first, "the first datagram is missing");
            for w in built.windows(2) {
                assert_eq!(w[1].0, end(w[0]), "a datagram is missing: {w:?}");
            }
            // ringfire's rule, replayed over the datagrams in the order they were built (a
            // last one still held never came, and is not among them).
            let mut want = Vec::with_capacity(built.len());
            let mut held = None;
            for (k, f) in built.iter().enumerate() {
                if (k as u64 + 1).is_multiple_of(every) && held.is_none() {
                    held = Some(*f);
                    continue;
                }
                want.push(*f);
                want.extend(held.take());
            }
            assert_eq!(frames, &want[..], "arrival order");
        }
    }
}

/// The mirror NAKed at least half as many holes as the knob should have made among the
/// `frames` that came (a run without the knob NAKs once or a few times, at the switch from
/// the TCP catch-up to UDP). Each hole gets its own NAK as a rule: a dropped datagram's
/// successor, or the heartbeat a held one waits across, comes a [`TICK`] after the last.
fn assert_naked(naks: u64, frames: &[(u64, u16)], fault: Fault, counters: &str) {
    let n = frames.len() as u64;
    let holes = match fault {
        // Of every `every` datagrams built, `every - 1` came.
        Fault::Drop(every) => n / (every - 1),
        Fault::Swap(every) => n / every,
    };
    assert!(holes >= 10, "only {n} datagrams");
    assert!(
        naks * 2 >= holes,
        "{naks} NAKs for the {holes} holes {fault:?} made in {n} datagrams: {counters}"
    );
}

fn multicast_config(g: SocketAddrV4, fault: Fault) -> MulticastConfig {
    match fault {
        // Built literally, as a ringfire program may: the fields are there as in ringfire.
        Fault::Drop(n) => MulticastConfig {
            drop_every: n,
            ..MulticastConfig::new(*g.ip(), g.port())
                .interface(Ipv4Addr::LOCALHOST)
                .ttl(0)
        },
        Fault::Swap(n) => MulticastConfig::new(*g.ip(), g.port())
            .interface(Ipv4Addr::LOCALHOST)
            .ttl(0)
            .swap_every(n),
    }
}

/// ringwire's facade server with the knob; unicast mirrors get each datagram twice.
fn our_server(src: &Path, mode: Mode, g: SocketAddrV4, fault: Fault) -> ReplicaServer {
    let s = ReplicaServer::bind(src, (Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .batch(64)
        .multicast(multicast_config(g, fault));
    match mode {
        Mode::Unicast => s.unicast(0, 1400).duplicate(2),
        _ => s,
    }
}

/// Publishes `from..=to`, one record every [`TICK`] at the earliest, each once the mirror
/// holds the one before (`mirrored`, within [`DEADLINE`]). A datagram the knob dropped or
/// held is then NAKed and repaired before its successor exists, so every hole gets its NAK:
/// published on the clock alone, a mirror kept off a core read a held datagram's successor
/// and the held one in one go, saw no hole and NAKed none (13 NAKs for 36 holes).
fn publish_live(push: &mut impl FnMut(u64), from: u64, to: u64, mirrored: impl Fn(u64) -> bool) {
    for seq in from..=to {
        push(seq);
        std::thread::sleep(TICK);
        wait_until("the mirror to take the last record", DEADLINE, || {
            mirrored(seq)
        });
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Peer {
    Ringwire,
    Ringfire,
}

/// What the mirror's counters said at the end.
#[derive(Debug)]
struct Counts {
    seq: u64,
    gaps: u64,
    naks: u64,
    retransmitted: u64,
    unicast: bool,
}

/// ringwire's facade server with `fault` → the mirror of `peer`, in `mode`.
fn faulty_server(mode: Mode, fault: Fault, peer: Peer, idx: u16) {
    let src = ShmPath::new(&format!("flt-src-{idx}"));
    let dst = ShmPath::new(&format!("flt-dst-{idx}"));
    let g = mcast(idx);
    let mut producer = ringwire::RingProducer::<[u8; LEN]>::create(src.path(), CAP).unwrap();
    let mut push = |s| assert_eq!(producer.push(&payload(s)), s);
    for s in 1..=BEFORE {
        push(s);
    }
    let sniffer = Sniffer::join(g);
    let server = our_server(src.path(), mode, g, fault);
    let (addr, stop, srv) = spawn_server(server);
    let unicast = mode == Mode::Unicast;
    let (got, session) = match peer {
        Peer::Ringwire => {
            let mut m = Mirror::builder()
                .start(MirrorStart::Oldest)
                .interface(Ipv4Addr::LOCALHOST)
                .unicast(unicast)
                .nak_timeout(Duration::from_millis(10))
                .connect(addr, dst.path())
                .unwrap();
            let session = m.session();
            assert_eq!(sniffer.first_heartbeat(session), BEFORE);
            publish_live(&mut push, BEFORE + 1, N, |s| m.sequence() >= s);
            m.handle().unwrap().shutdown().unwrap();
            m.run().unwrap();
            let got = Counts {
                seq: m.sequence(),
                gaps: m.gaps(),
                naks: m.naks(),
                retransmitted: m.retransmitted(),
                unicast: m.is_unicast(),
            };
            (got, session)
        }
        Peer::Ringfire => {
            use ringfire::replication::{Mirror as RfMirror, MirrorStart as RfStart};
            let mut m = RfMirror::builder()
                .start(RfStart::Oldest)
                .interface(Ipv4Addr::LOCALHOST)
                .unicast(unicast)
                .connect(addr, dst.path())
                .unwrap();
            let session = m.session();
            let mirrored = ringwire::ReadOnlyRing::open(dst.path()).unwrap();
            let got = std::thread::scope(|sc| {
                let t = sc.spawn(|| {
                    let t0 = Instant::now();
                    while m.sequence() < N && t0.elapsed() < DEADLINE {
                        if !m.step().unwrap() {
                            break;
                        }
                    }
                    Counts {
                        seq: m.sequence(),
                        gaps: m.gaps(),
                        naks: m.naks(),
                        retransmitted: m.retransmitted(),
                        unicast: m.is_unicast(),
                    }
                });
                assert_eq!(sniffer.first_heartbeat(session), BEFORE);
                publish_live(&mut push, BEFORE + 1, N, |s| mirrored.write_seq() >= s);
                t.join().unwrap()
            });
            drop(m);
            (got, session)
        }
    };
    stop.0.shutdown();
    srv.join().unwrap().unwrap();
    let frames = sniffer.data(session, if unicast { 2 } else { 1 });
    assert_eq!((got.seq, got.gaps), (N, 0), "{got:?}");
    assert_eq!(got.unicast, unicast);
    ringwire_tests::replica::assert_mirrored::<LEN>(src.path(), dst.path(), N);
    assert_naked(got.naks, &frames, fault, &format!("{got:?}"));
    if let Fault::Drop(_) = fault {
        assert!(got.retransmitted > 0, "nothing retransmitted: {got:?}");
    }
    check_wire(&frames, fault, BEFORE + 1);
}

#[test]
fn drop_every_multicast_to_facade_mirror() {
    faulty_server(Mode::Multicast, Fault::Drop(7), Peer::Ringwire, 1);
}

#[test]
fn drop_every_unicast_to_facade_mirror() {
    faulty_server(Mode::Unicast, Fault::Drop(7), Peer::Ringwire, 2);
}

#[test]
fn swap_every_multicast_to_facade_mirror() {
    faulty_server(Mode::Multicast, Fault::Swap(5), Peer::Ringwire, 3);
}

#[test]
fn swap_every_unicast_to_facade_mirror() {
    faulty_server(Mode::Unicast, Fault::Swap(5), Peer::Ringwire, 4);
}

#[test]
fn drop_every_multicast_to_ringfire_mirror() {
    faulty_server(Mode::Multicast, Fault::Drop(7), Peer::Ringfire, 5);
}

#[test]
fn drop_every_unicast_to_ringfire_mirror() {
    faulty_server(Mode::Unicast, Fault::Drop(7), Peer::Ringfire, 6);
}

#[test]
fn swap_every_multicast_to_ringfire_mirror() {
    faulty_server(Mode::Multicast, Fault::Swap(5), Peer::Ringfire, 7);
}

#[test]
fn swap_every_unicast_to_ringfire_mirror() {
    faulty_server(Mode::Unicast, Fault::Swap(5), Peer::Ringfire, 8);
}

/// ringfire 0.5.2's own server with the knob → ringwire's facade mirror: the same wire
/// pattern as ours, and the facade mirror recovers from it.
fn ringfire_server(fault: Fault, idx: u16) {
    use ringfire::replication::{MulticastConfig as RfMc, ReplicaServer as RfServer};
    let src = ShmPath::new(&format!("flt-rf-src-{idx}"));
    let dst = ShmPath::new(&format!("flt-rf-dst-{idx}"));
    let g = mcast(idx);
    let mut producer = ringfire::RingProducer::<[u8; LEN]>::create(src.path(), CAP).unwrap();
    let mut push = |s| producer.push(&payload(s));
    for s in 1..=BEFORE {
        push(s);
    }
    let sniffer = Sniffer::join(g);
    let mc = RfMc::new(*g.ip(), g.port())
        .interface(Ipv4Addr::LOCALHOST)
        .ttl(0);
    let mc = match fault {
        Fault::Drop(n) => mc.drop_every(n),
        Fault::Swap(n) => mc.swap_every(n),
    };
    let server = RfServer::bind(src.path(), (Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .multicast(mc);
    let addr = server.local_addr().unwrap();
    drop(server.spawn().unwrap());
    let mut m = Mirror::builder()
        .start(MirrorStart::Oldest)
        .interface(Ipv4Addr::LOCALHOST)
        .nak_timeout(Duration::from_millis(10))
        .connect(addr, dst.path())
        .unwrap();
    let session = m.session();
    // ringfire's UDP thread reads the ring's position when it starts: wait for it.
    assert_eq!(sniffer.first_heartbeat(session), BEFORE);
    publish_live(&mut push, BEFORE + 1, N, |s| m.sequence() >= s);
    m.handle().unwrap().shutdown().unwrap();
    m.run().unwrap();
    let (seq, gaps, naks) = (m.sequence(), m.gaps(), m.naks());
    drop(m);
    let frames = sniffer.data(session, 1);
    assert_eq!((seq, gaps), (N, 0));
    assert_naked(naks, &frames, fault, "");
    ringwire_tests::replica::assert_mirrored::<LEN>(src.path(), dst.path(), N);
    check_wire(&frames, fault, BEFORE + 1);
}

#[test]
fn ringfire_drop_every_has_the_same_wire_pattern() {
    ringfire_server(Fault::Drop(7), 9);
}

#[test]
fn ringfire_swap_every_has_the_same_wire_pattern() {
    ringfire_server(Fault::Swap(5), 10);
}
