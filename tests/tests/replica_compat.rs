//! ringfire's in-process replication API on ringwire (`ringwire::ReplicaServer`,
//! `ringwire::Mirror`, over the serve/mirror drivers), against itself and against the
//! published ringfire 0.5.2 in both directions, over loopback TCP, UDP multicast (iface
//! 127.0.0.1, TTL 0) and UDP unicast. Every run checks each record by sequence and bytes.
//!
//! ringfire's server cannot be stopped in UDP modes (its `run` loops forever), so those
//! threads are left to the end of the test process, as in `replica_loopback.rs`; their ring
//! files are still removed.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;
use std::time::{Duration, Instant};

use ringwire::{Mirror, MirrorStart, MulticastConfig, ReplicaError, ReplicaServer};
use ringwire_tests::replica::{
    Mode, StopOnDrop, assert_served, ringfire_server, spawn_server, start_ringfire,
};
use ringwire_tests::shm::ShmPath;
use ringwire_tests::wait_until;

const LEN: usize = 24;
const CAP: u64 = 1 << 16;
/// Records per run: half published before the mirror connects, half after.
const N: u64 = 6_000;
const DEADLINE: Duration = Duration::from_secs(30);
/// Scheduling slack allowed on top of `Mirror::STEP_WAIT` for a step to return.
const STEP_SLACK: Duration = Duration::from_millis(150);

fn payload(seq: u64) -> [u8; LEN] {
    ringwire_tests::replica::payload(seq)
}

/// A multicast group and port private to this process and test.
fn mcast(idx: u16) -> SocketAddrV4 {
    let pid = std::process::id();
    SocketAddrV4::new(
        Ipv4Addr::new(239, 255, 102, idx as u8),
        20_000 + (pid % 2_000) as u16 * 8 + idx,
    )
}

/// Records 1..=n of the mirror ring equal the source's, and nothing beyond n was written.
fn assert_same(source: &Path, mirror: &Path, n: u64) {
    ringwire_tests::replica::assert_mirrored::<LEN>(source, mirror, n);
}

/// Publishes `from..=to` in bursts of 100 with a short pause between them.
fn publish(push: &mut impl FnMut(u64), from: u64, to: u64) {
    for seq in from..=to {
        push(seq);
        if seq % 100 == 0 {
            std::thread::sleep(Duration::from_micros(500));
        }
    }
}

/// ringwire's facade server for `mode`.
fn our_server(src: &Path, mode: Mode, idx: u16) -> ReplicaServer {
    let s = ReplicaServer::bind(src, (Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .batch(64)
        .linger(None);
    match mode {
        Mode::Tcp => s,
        Mode::Multicast => {
            let g = mcast(idx);
            s.multicast(
                MulticastConfig::new(*g.ip(), g.port())
                    .interface(Ipv4Addr::LOCALHOST)
                    .ttl(0)
                    .mtu(1472)
                    .heartbeat(Duration::from_millis(1)),
            )
        }
        Mode::Unicast => s.unicast(0, 1400).duplicate(2),
    }
}

fn check_kind(mode: Mode, multicast: bool, unicast: bool, datagrams: u64) {
    match mode {
        Mode::Tcp => assert_eq!((multicast, unicast), (false, false)),
        Mode::Multicast => assert_eq!((multicast, unicast), (true, false)),
        // ringfire's is_multicast() means "live data over UDP".
        Mode::Unicast => assert_eq!((multicast, unicast), (true, true)),
    }
    if mode != Mode::Tcp {
        assert!(datagrams > 0, "no datagrams in {mode:?}");
    }
}

/// ringwire facade server → ringwire facade mirror.
fn ours_to_ours(mode: Mode, idx: u16) {
    let src = ShmPath::new(&format!("cmp-oo-src-{idx}"));
    let dst = ShmPath::new(&format!("cmp-oo-dst-{idx}"));
    let mut producer = ringwire::RingProducer::<[u8; LEN]>::create(src.path(), CAP).unwrap();
    publish(&mut |s| assert_eq!(producer.push(&payload(s)), s), 1, N / 2);
    let server = our_server(src.path(), mode, idx);
    assert_eq!(server.ring_path(), src.path());
    let (addr, _stop, srv) = spawn_server(server);
    let mut mirror = Mirror::builder()
        .start(MirrorStart::Oldest)
        .interface(Ipv4Addr::LOCALHOST)
        .unicast(mode == Mode::Unicast)
        .nak_timeout(Duration::from_millis(10))
        .connect(addr, dst.path())
        .unwrap();
    assert_eq!(mirror.first_sequence(), 1);
    assert!(!mirror.resumed());
    assert_eq!(mirror.path(), dst.path());
    assert_eq!(mirror.peer_addr().unwrap(), addr);
    let g = mirror.geometry();
    assert_eq!(
        (g.capacity, g.payload_len(), g.has_arena()),
        (CAP, LEN, false)
    );
    publish(
        &mut |s| assert_eq!(producer.push(&payload(s)), s),
        N / 2 + 1,
        N,
    );
    wait_until("the facade mirror to catch up", DEADLINE, || {
        mirror.sequence() >= N
    });
    check_kind(
        mode,
        mirror.is_multicast(),
        mirror.is_unicast(),
        mirror.datagrams(),
    );
    mirror.handle().unwrap().shutdown().unwrap();
    mirror.run().unwrap();
    assert_eq!(mirror.sequence(), N);
    assert_eq!(mirror.gaps(), 0);
    assert!(mirror.source_sequence() >= N);
    assert!(mirror.frames() > 0);
    if mode == Mode::Tcp {
        assert_eq!(mirror.session(), 0);
    }
    drop(mirror);
    _stop.0.shutdown();
    srv.join().unwrap().unwrap();
    assert_same(src.path(), dst.path(), N);
}

#[test]
fn facade_server_to_facade_mirror_tcp() {
    ours_to_ours(Mode::Tcp, 1);
}

#[test]
fn facade_server_to_facade_mirror_multicast() {
    ours_to_ours(Mode::Multicast, 2);
}

#[test]
fn facade_server_to_facade_mirror_unicast() {
    ours_to_ours(Mode::Unicast, 3);
}

/// ringwire facade server → ringfire 0.5.2 `Mirror`.
fn ours_to_ringfire(mode: Mode, idx: u16) {
    use ringfire::replication::{Mirror as RfMirror, MirrorStart as RfStart};
    let src = ShmPath::new(&format!("cmp-or-src-{idx}"));
    let dst = ShmPath::new(&format!("cmp-or-dst-{idx}"));
    let mut producer = ringwire::RingProducer::<[u8; LEN]>::create(src.path(), CAP).unwrap();
    publish(&mut |s| assert_eq!(producer.push(&payload(s)), s), 1, N / 2);
    let server = our_server(src.path(), mode, idx);
    let (addr, _stop, srv) = spawn_server(server);
    let mut mirror = RfMirror::builder()
        .start(RfStart::Oldest)
        .interface(Ipv4Addr::LOCALHOST)
        .unicast(mode == Mode::Unicast)
        .connect(addr, dst.path())
        .unwrap();
    assert_eq!(mirror.first_sequence(), 1);
    let got = std::thread::scope(|sc| {
        let m = sc.spawn(|| {
            let t0 = Instant::now();
            while mirror.sequence() < N && t0.elapsed() < DEADLINE {
                if !mirror.step().unwrap() {
                    break;
                }
            }
            (
                mirror.sequence(),
                mirror.gaps(),
                mirror.is_multicast(),
                mirror.is_unicast(),
                mirror.datagrams(),
            )
        });
        publish(
            &mut |s| assert_eq!(producer.push(&payload(s)), s),
            N / 2 + 1,
            N,
        );
        m.join().unwrap()
    });
    drop(mirror);
    _stop.0.shutdown();
    srv.join().unwrap().unwrap();
    let (seq, gaps, multicast, unicast, datagrams) = got;
    assert_eq!((seq, gaps), (N, 0));
    check_kind(mode, multicast, unicast, datagrams);
    assert_same(src.path(), dst.path(), N);
}

#[test]
fn facade_server_to_ringfire_mirror_tcp() {
    ours_to_ringfire(Mode::Tcp, 4);
}

#[test]
fn facade_server_to_ringfire_mirror_multicast() {
    ours_to_ringfire(Mode::Multicast, 5);
}

#[test]
fn facade_server_to_ringfire_mirror_unicast() {
    ours_to_ringfire(Mode::Unicast, 6);
}

/// ringfire 0.5.2 `ReplicaServer` → ringwire facade mirror.
fn ringfire_to_ours(mode: Mode, idx: u16) {
    ringfire_to_ours_at(mode, idx, Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST);
}

/// [`ringfire_to_ours`] with ringfire's server bound to `bind` and dialled at `dial`.
fn ringfire_to_ours_at(mode: Mode, idx: u16, bind: Ipv4Addr, dial: Ipv4Addr) {
    let src = ShmPath::new(&format!("cmp-ro-src-{idx}"));
    let dst = ShmPath::new(&format!("cmp-ro-dst-{idx}"));
    let mut producer = ringfire::RingProducer::<[u8; LEN]>::create(src.path(), CAP).unwrap();
    publish(&mut |s| producer.push(&payload(s)), 1, N / 2);
    let server = ringfire_server(src.path(), bind, mode, mcast(idx));
    let addr = std::net::SocketAddr::from((dial, server.local_addr().unwrap().port()));
    let served = start_ringfire(server, mode);
    let mut mirror = Mirror::builder()
        .start(MirrorStart::Oldest)
        .interface(Ipv4Addr::LOCALHOST)
        .unicast(mode == Mode::Unicast)
        .connect(addr, dst.path())
        .unwrap();
    assert_eq!(mirror.first_sequence(), 1);
    publish(&mut |s| producer.push(&payload(s)), N / 2 + 1, N);
    let caught_up = {
        let t0 = Instant::now();
        while mirror.sequence() < N && t0.elapsed() < DEADLINE {
            std::thread::sleep(Duration::from_millis(5));
        }
        mirror.sequence() >= N
    };
    let kind = (
        mirror.is_multicast(),
        mirror.is_unicast(),
        mirror.datagrams(),
    );
    mirror.handle().unwrap().shutdown().unwrap();
    mirror.run().unwrap();
    let (seq, gaps) = (mirror.sequence(), mirror.gaps());
    drop(mirror);
    if let Some(h) = served {
        assert_served(h, &format!("{mode:?}"));
    }
    assert!(caught_up, "mirror at {seq} of {N}");
    assert_eq!((seq, gaps), (N, 0));
    check_kind(mode, kind.0, kind.1, kind.2);
    assert_same(src.path(), dst.path(), N);
}

#[test]
fn ringfire_server_to_facade_mirror_tcp() {
    ringfire_to_ours(Mode::Tcp, 7);
}

#[test]
fn ringfire_server_to_facade_mirror_multicast() {
    ringfire_to_ours(Mode::Multicast, 8);
}

#[test]
fn ringfire_server_to_facade_mirror_unicast() {
    ringfire_to_ours(Mode::Unicast, 9);
}

/// ringfire's server bound to 0.0.0.0 and dialled at another local address than the one its
/// kernel sends from (127.0.0.2; all of 127/8 is local): its datagrams come from 127.0.0.1.
/// The mirror used to drop every one as from a wrong address, and so never caught up.
#[test]
fn ringfire_server_dialled_at_a_secondary_address_to_facade_mirror_unicast() {
    ringfire_to_ours_at(
        Mode::Unicast,
        10,
        Ipv4Addr::UNSPECIFIED,
        Ipv4Addr::new(127, 0, 0, 2),
    );
}

/// `MirrorHandle::shutdown` ends `run` on another thread promptly, with nothing published
/// (the mirror is idle, blocked in its wait), and `serve_one` returns once it hung up.
#[test]
fn shutdown_ends_run_promptly() {
    let src = ShmPath::new("cmp-stop-src");
    let dst = ShmPath::new("cmp-stop-dst");
    let mut producer = ringwire::RingProducer::<[u8; LEN]>::create(src.path(), CAP).unwrap();
    producer.push(&payload(1));
    let server = ReplicaServer::bind(src.path(), "127.0.0.1:0").unwrap();
    let addr = server.local_addr().unwrap();
    let stop = StopOnDrop(server.shutdown_handle());
    let srv = std::thread::spawn(move || server.serve_one());
    let mut mirror = Mirror::connect(addr, dst.path()).unwrap();
    // Latest: the record already there is not copied.
    assert_eq!(mirror.first_sequence(), 2);
    assert_eq!(mirror.sequence(), 1);
    let handle = mirror.handle().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let runner = std::thread::spawn(move || {
        let r = mirror.run();
        let _ = tx.send(());
        (r, mirror.sequence())
    });
    std::thread::sleep(Duration::from_millis(200));
    assert!(rx.try_recv().is_err(), "run returned before shutdown");
    let t0 = Instant::now();
    handle.shutdown().unwrap();
    let ended = rx.recv_timeout(Duration::from_secs(5));
    let took = t0.elapsed();
    if ended.is_err() {
        stop.0.shutdown();
    }
    let (r, seq) = runner.join().unwrap();
    assert!(ended.is_ok(), "run still going 5 s after shutdown");
    // `run` checks its stop flag at least every 100 ms (MAX_BLOCK); 1 s is ten times that,
    // room for a loaded machine keeping either thread off the CPU, and still far from the
    // 5 s above that means it never noticed.
    assert!(took < Duration::from_secs(1), "shutdown took {took:?}");
    r.unwrap();
    assert_eq!(seq, 1);
    // The server's one session ended with the mirror's connection.
    let t1 = Instant::now();
    while !srv.is_finished() && t1.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.0.shutdown();
    srv.join().unwrap().unwrap();
    assert!(
        t1.elapsed() < Duration::from_secs(5),
        "serve_one outlived its mirror"
    );
}

/// A resumed mirror continues the ring already at its path.
#[test]
fn resume_continues_the_existing_ring() {
    let src = ShmPath::new("cmp-res-src");
    let dst = ShmPath::new("cmp-res-dst");
    let mut producer = ringwire::RingProducer::<[u8; LEN]>::create(src.path(), CAP).unwrap();
    publish(&mut |s| assert_eq!(producer.push(&payload(s)), s), 1, 1000);
    let server = ReplicaServer::bind(src.path(), (Ipv4Addr::LOCALHOST, 0)).unwrap();
    let (addr, stop, srv) = spawn_server(server);
    let copy = |start, until: u64| {
        let mut m = Mirror::builder()
            .start(start)
            .file_mode(0o600)
            .connect(addr, dst.path())
            .unwrap();
        wait_until("the mirror", DEADLINE, || m.sequence() >= until);
        m.handle().unwrap().shutdown().unwrap();
        m.run().unwrap();
        (m.first_sequence(), m.resumed(), m.sequence())
    };
    assert_eq!(copy(MirrorStart::Sequence(1), 1000), (1, false, 1000));
    publish(
        &mut |s| assert_eq!(producer.push(&payload(s)), s),
        1001,
        3000,
    );
    assert_eq!(copy(MirrorStart::Resume, 3000), (1001, true, 3000));
    stop.0.shutdown();
    srv.join().unwrap().unwrap();
    assert_same(src.path(), dst.path(), 3000);
}

/// A replica made by ringfire 0.5.2's mirror (which always sets FLAG_SPARSE) is resumed by
/// ours: not adopting a ring without SPARSE leaves resume between the two alone.
#[test]
fn a_ringfire_made_replica_is_resumed() {
    use ringfire::replication::{Mirror as RfMirror, MirrorStart as RfStart};
    let src = ShmPath::new("cmp-rfres-src");
    let dst = ShmPath::new("cmp-rfres-dst");
    let mut producer = ringwire::RingProducer::<[u8; LEN]>::create(src.path(), CAP).unwrap();
    publish(&mut |s| assert_eq!(producer.push(&payload(s)), s), 1, 1000);
    let server = ReplicaServer::bind(src.path(), (Ipv4Addr::LOCALHOST, 0)).unwrap();
    let (addr, stop, srv) = spawn_server(server);
    {
        let mut rf = RfMirror::builder()
            .start(RfStart::Oldest)
            .connect(addr, dst.path())
            .unwrap();
        let t0 = Instant::now();
        while rf.sequence() < 1000 && t0.elapsed() < DEADLINE {
            if !rf.step().unwrap() {
                break;
            }
        }
        assert_eq!(rf.sequence(), 1000);
    }
    let made = ringwire::ReadOnlyRing::open(dst.path()).unwrap();
    assert!(
        made.geometry()
            .flags
            .has(ringwire::core::layout::Flags::SPARSE)
    );
    drop(made);
    publish(
        &mut |s| assert_eq!(producer.push(&payload(s)), s),
        1001,
        2000,
    );
    let mut m = Mirror::builder()
        .start(MirrorStart::Resume)
        .connect(addr, dst.path())
        .unwrap();
    wait_until("the mirror", DEADLINE, || m.sequence() >= 2000);
    m.handle().unwrap().shutdown().unwrap();
    m.run().unwrap();
    assert_eq!(
        (m.first_sequence(), m.resumed(), m.sequence()),
        (1001, true, 2000)
    );
    drop(m);
    stop.0.shutdown();
    srv.join().unwrap().unwrap();
    assert_same(src.path(), dst.path(), 2000);
}

#[test]
fn bad_addresses_and_missing_rings_are_typed_errors() {
    let missing = ShmPath::new("cmp-missing");
    let e = ReplicaServer::bind(missing.path(), "127.0.0.1:0").unwrap_err();
    assert!(matches!(e, ReplicaError::Ring(_)), "{e:?}");
    let src = ShmPath::new("cmp-err-src");
    let _p = ringwire::RingProducer::<[u8; LEN]>::create(src.path(), 64).unwrap();
    let e = ReplicaServer::bind(src.path(), "not-an-address").unwrap_err();
    assert!(matches!(e, ReplicaError::Io { .. }), "{e:?}");
    // A port nobody listens on.
    let closed = ringwire_tests::replica::free_addr();
    let dst = ShmPath::new("cmp-err-dst");
    let e = Mirror::connect(closed, dst.path()).unwrap_err();
    assert!(matches!(e, ReplicaError::Io { .. }), "{e:?}");
    let e = Mirror::connect("no such host:1", dst.path()).unwrap_err();
    assert!(matches!(e, ReplicaError::Io { .. }), "{e:?}");
    assert!(!dst.path().exists());
    // A mirror ring that cannot be created.
    let server = ReplicaServer::bind(src.path(), "127.0.0.1:0").unwrap();
    let (addr, stop, srv) = spawn_server(server);
    let e = Mirror::connect(addr, "/dev/shm/ringwire-no-such-dir/mirror").unwrap_err();
    assert!(matches!(e, ReplicaError::Ring(_)), "{e:?}");
    stop.0.shutdown();
    srv.join().unwrap().unwrap();
}

/// `while mirror.step()? {}` against a server that is shut down once the mirror has every
/// record: the loop ends by itself (`Ok(false)`), with the ring complete, and later calls
/// (and `run`) return at once.
fn step_until_the_server_stops(mode: Mode, idx: u16) {
    let src = ShmPath::new(&format!("cmp-step-src-{idx}"));
    let dst = ShmPath::new(&format!("cmp-step-dst-{idx}"));
    let mut producer = ringwire::RingProducer::<[u8; LEN]>::create(src.path(), CAP).unwrap();
    publish(&mut |s| assert_eq!(producer.push(&payload(s)), s), 1, N / 2);
    let server = our_server(src.path(), mode, idx);
    let (addr, stop, srv) = spawn_server(server);
    let mut mirror = Mirror::builder()
        .start(MirrorStart::Oldest)
        .interface(Ipv4Addr::LOCALHOST)
        .unicast(mode == Mode::Unicast)
        .connect(addr, dst.path())
        .unwrap();
    let (steps, stopped_at) = std::thread::scope(|sc| {
        let publisher = sc.spawn(|| {
            publish(
                &mut |s| assert_eq!(producer.push(&payload(s)), s),
                N / 2 + 1,
                N,
            )
        });
        let t0 = Instant::now();
        let mut steps = 0u64;
        let mut stopped_at = None;
        while mirror.step().unwrap() {
            steps += 1;
            assert!(
                t0.elapsed() < DEADLINE,
                "step loop at {} of {N}",
                mirror.sequence()
            );
            if stopped_at.is_none() && mirror.sequence() >= N {
                stop.0.shutdown();
                stopped_at = Some(Instant::now());
            }
        }
        publisher.join().unwrap();
        (steps, stopped_at.map(|t| t.elapsed()))
    });
    let stopped_at = stopped_at.expect("the loop ended before the mirror had every record");
    // The server stops within ~100 ms, the driver sees EOF, step sees the driver's end.
    assert!(stopped_at < Duration::from_secs(2), "{stopped_at:?}");
    assert!(steps > 1, "{steps} steps");
    let t1 = Instant::now();
    assert!(!mirror.step().unwrap());
    mirror.run().unwrap();
    assert!(
        t1.elapsed() < Mirror::STEP_WAIT + STEP_SLACK,
        "{:?}",
        t1.elapsed()
    );
    assert_eq!((mirror.sequence(), mirror.gaps()), (N, 0));
    drop(mirror);
    srv.join().unwrap().unwrap();
    assert_same(src.path(), dst.path(), N);
}

#[test]
fn step_loop_ends_when_the_server_stops_tcp() {
    step_until_the_server_stops(Mode::Tcp, 10);
}

#[test]
fn step_loop_ends_when_the_server_stops_multicast() {
    step_until_the_server_stops(Mode::Multicast, 11);
}

/// On an idle source each `step` returns `Ok(true)` within `Mirror::STEP_WAIT` (plus
/// scheduling slack); after a record is published a few steps see it; after `shutdown`,
/// `Ok(false)`.
#[test]
fn step_on_an_idle_source_returns_within_the_bound() {
    let src = ShmPath::new("cmp-idle-src");
    let dst = ShmPath::new("cmp-idle-dst");
    let mut producer = ringwire::RingProducer::<[u8; LEN]>::create(src.path(), CAP).unwrap();
    let server = ReplicaServer::bind(src.path(), (Ipv4Addr::LOCALHOST, 0)).unwrap();
    let (addr, stop, srv) = spawn_server(server);
    let mut mirror = Mirror::connect(addr, dst.path()).unwrap();
    let mut longest = Duration::ZERO;
    for _ in 0..20 {
        let t = Instant::now();
        assert!(mirror.step().unwrap());
        longest = longest.max(t.elapsed());
    }
    assert!(
        longest < Mirror::STEP_WAIT + STEP_SLACK,
        "an idle step took {longest:?}"
    );
    assert_eq!(mirror.sequence(), 0);
    assert_eq!(producer.push(&payload(1)), 1);
    let mut steps = 0;
    while mirror.sequence() < 1 {
        steps += 1;
        assert!(steps < 200, "200 steps without the record");
        assert!(mirror.step().unwrap());
    }
    let handle = mirror.handle().unwrap();
    handle.shutdown().unwrap();
    let t = Instant::now();
    let mut steps = 0;
    while mirror.step().unwrap() {
        steps += 1;
        assert!(steps < 200, "200 steps after shutdown");
    }
    // The driver stops within ~100 ms of shutdown.
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );
    drop(mirror);
    stop.0.shutdown();
    srv.join().unwrap().unwrap();
    assert_same(src.path(), dst.path(), 1);
}

/// A listener that accepts and never sends GEOMETRY: `connect` (ringfire's API shape,
/// which there blocks forever) fails at the handshake deadline, naming the source, and
/// creates no ring.
#[test]
fn connect_fails_when_the_source_never_sends_geometry() {
    let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    let held = std::thread::spawn(move || {
        // Keep the accepted connection open, silent, until the mirror closes it.
        use std::io::Read;
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut b = [0u8; 64];
        while let Ok(n) = s.read(&mut b) {
            if n == 0 {
                return true;
            }
        }
        false
    });
    let dst = ShmPath::new("cmp-nogeo");
    let t0 = Instant::now();
    let e = Mirror::builder()
        .handshake_timeout(Duration::from_millis(300))
        .connect(addr, dst.path())
        .unwrap_err();
    let dt = t0.elapsed();
    assert!(dt < Duration::from_secs(3), "{dt:?}");
    let msg = e.to_string();
    assert!(
        msg.contains(&addr.to_string()) && msg.contains("no GEOMETRY"),
        "{msg}"
    );
    assert!(held.join().unwrap(), "the mirror kept the connection open");
    assert!(!dst.path().exists());
}

/// An idle source (ringwire's or ringfire's, TCP, UDP unicast or multicast) keeps a mirror whose
/// silence deadline is 1 s (5 TCP heartbeat intervals) alive with its heartbeats: after
/// 1.5 s without records the copy still runs and takes the next record.
fn idle_source_keeps_the_mirror(mode: Mode, ringfire_source: bool, idx: u16) {
    let src = ShmPath::new(&format!("cmp-quiet-src-{idx}"));
    let dst = ShmPath::new(&format!("cmp-quiet-dst-{idx}"));
    let mut push: Box<dyn FnMut(u64)> = if ringfire_source {
        let mut p = ringfire::RingProducer::<[u8; LEN]>::create(src.path(), CAP).unwrap();
        Box::new(move |s| {
            p.push(&payload(s));
        })
    } else {
        let mut p = ringwire::RingProducer::<[u8; LEN]>::create(src.path(), CAP).unwrap();
        Box::new(move |s| assert_eq!(p.push(&payload(s)), s))
    };
    push(1);
    let mut ours = None;
    let addr = if ringfire_source {
        let server = ringfire_server(src.path(), Ipv4Addr::LOCALHOST, mode, mcast(idx));
        let addr = server.local_addr().unwrap();
        // ringfire's server cannot be stopped: its thread is left to the end of the process.
        drop(server.spawn().unwrap());
        addr
    } else {
        let (addr, stop, srv) = spawn_server(our_server(src.path(), mode, idx));
        ours = Some((stop, srv));
        addr
    };
    let mut mirror = Mirror::builder()
        .start(MirrorStart::Oldest)
        .unicast(mode == Mode::Unicast)
        .silence_timeout(Duration::from_secs(1))
        .connect(addr, dst.path())
        .unwrap();
    wait_until("record 1", Duration::from_secs(10), || {
        mirror.sequence() >= 1
    });
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(1500) {
        assert!(mirror.step().unwrap(), "the mirror ended on an idle source");
    }
    push(2);
    wait_until("record 2", Duration::from_secs(10), || {
        mirror.sequence() >= 2
    });
    assert_eq!(mirror.is_unicast(), mode == Mode::Unicast);
    mirror.handle().unwrap().shutdown().unwrap();
    mirror.run().unwrap();
    drop(mirror);
    if let Some((stop, srv)) = ours {
        stop.0.shutdown();
        srv.join().unwrap().unwrap();
    }
    assert_same(src.path(), dst.path(), 2);
}

#[test]
fn idle_ringwire_source_keeps_the_mirror_tcp() {
    idle_source_keeps_the_mirror(Mode::Tcp, false, 20);
}

#[test]
fn idle_ringwire_source_keeps_the_mirror_unicast() {
    idle_source_keeps_the_mirror(Mode::Unicast, false, 21);
}

#[test]
fn idle_ringfire_source_keeps_the_mirror_tcp() {
    idle_source_keeps_the_mirror(Mode::Tcp, true, 22);
}

#[test]
fn idle_ringfire_source_keeps_the_mirror_unicast() {
    idle_source_keeps_the_mirror(Mode::Unicast, true, 23);
}

/// Over multicast an idle source sends no DATA, so its sender is never tried: its
/// heartbeats, an untried sender's, are what keep the mirror, and must go on counting.
#[test]
fn idle_ringwire_source_keeps_the_mirror_multicast() {
    idle_source_keeps_the_mirror(Mode::Multicast, false, 24);
}

#[test]
fn idle_ringfire_source_keeps_the_mirror_multicast() {
    idle_source_keeps_the_mirror(Mode::Multicast, true, 25);
}

/// A resume against a restarted source (a new ring at the source's path, published past
/// the mirror's position): the resume check finds the source's copy of the last record
/// held differs, recreates the mirror ring and continues from that record; `resumed()` then
/// says the ring was not kept and `first_sequence()` names the new ring's first record
/// copied, even though the verdict (in UDP modes, the answer to a NAK) can come after
/// `connect` returned.
fn resume_against_a_restarted_source(mode: Mode, idx: u16) {
    let src = ShmPath::new(&format!("cmp-rst-src-{idx}"));
    let dst = ShmPath::new(&format!("cmp-rst-dst-{idx}"));
    let copy = |start, until: u64| {
        let (addr, stop, srv) = spawn_server(our_server(src.path(), mode, idx));
        let mut m = Mirror::builder()
            .start(start)
            .interface(Ipv4Addr::LOCALHOST)
            .unicast(mode == Mode::Unicast)
            .nak_timeout(Duration::from_millis(10))
            .file_mode(0o600)
            .connect(addr, dst.path())
            .unwrap();
        wait_until("the mirror", DEADLINE, || m.sequence() >= until);
        m.handle().unwrap().shutdown().unwrap();
        m.run().unwrap();
        stop.0.shutdown();
        srv.join().unwrap().unwrap();
        (m.first_sequence(), m.resumed(), m.sequence())
    };
    {
        let mut old = ringwire::RingProducer::<[u8; LEN]>::create(src.path(), CAP).unwrap();
        publish(&mut |s| assert_eq!(old.push(&payload(s)), s), 1, 1000);
        assert_eq!(copy(MirrorStart::Sequence(1), 1000), (1, false, 1000));
    }
    // The restarted source: other bytes under the same sequences, 2000 of them.
    let mut new = ringwire::RingProducer::<[u8; LEN]>::create(src.path(), CAP).unwrap();
    let other = |s: u64| payload(s).map(|b| !b);
    publish(&mut |s| assert_eq!(new.push(&other(s)), s), 1, 2000);
    assert_eq!(copy(MirrorStart::Resume, 2000), (1000, false, 2000));
    // The recreated ring holds the new ring's records from 1000 on, and none of the old.
    let ring = ringwire::ReadOnlyRing::open(dst.path()).unwrap();
    assert_eq!(ring.write_seq(), 2000);
    let mut buf = vec![0u8; ring.geometry().record_len()];
    assert_ne!(ring.read_slot(999, &mut buf), ringwire::core::SlotRead::Ok);
    for seq in 1000..=2000 {
        assert_eq!(ring.read_slot(seq, &mut buf), ringwire::core::SlotRead::Ok);
        assert_eq!(buf[..LEN], other(seq), "record {seq}");
    }
}

#[test]
fn resume_against_a_restarted_source_reports_a_new_ring_tcp() {
    resume_against_a_restarted_source(Mode::Tcp, 30);
}

#[test]
fn resume_against_a_restarted_source_reports_a_new_ring_multicast() {
    resume_against_a_restarted_source(Mode::Multicast, 31);
}
