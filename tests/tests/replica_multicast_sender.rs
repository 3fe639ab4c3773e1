//! A second sender on a multicast mirror's group and port with the source's session byte
//! (another source, an old serve still running, a misconfigured host): its DATA, well formed
//! and numbered as the source's, must never reach the mirror ring. The mirror filtered
//! multicast datagrams by the session byte only (spec §21.4), so the stranger's records
//! were written wherever they came first; now a sender is confirmed by comparing its first
//! record with the source's copy over TCP, and every other sender's datagrams are dropped
//! and counted in `udp_wrong_source`. On loopback (`--iface` 127.0.0.1, TTL 0), against
//! ringwire's serve and ringfire 0.5.2's.
//!
//! ringfire's server cannot be stopped in UDP modes, so its threads are left to the end of
//! the test process, as in `replica_compat.rs`.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ringwire::RingProducer;
use ringwire::core::wire::{DataRepr, Kind};
use ringwire::replica::mirror::{self, MirrorSummary};
use ringwire::replica::serve::Server;
use ringwire_tests::replica::{
    Mode, SetOnDrop, assert_mirrored, free_udp_port, mirror_options, payload, ringfire_server,
    serve_options, start_ringfire,
};
use ringwire_tests::shm::ShmPath;
use ringwire_tests::wait_until;
use socket2::{Domain, Protocol, Socket, Type};

const LEN: usize = 24;
const CAP: u64 = 1 << 14;
const N: u64 = 3_000;
/// Records per DATA datagram of the stranger.
const PER: u64 = 4;

/// A multicast group of this file's and a UDP port free now.
fn group(idx: u8) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::new(239, 255, 105, idx), free_udp_port())
}

/// The session byte of the datagrams sent to `group` (joined on 127.0.0.1): the first DATA
/// or HEARTBEAT's (an idle source sends a heartbeat every millisecond).
fn sniff_session(group: SocketAddrV4) -> u8 {
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
    s.set_reuse_address(true).unwrap();
    s.bind(&SocketAddr::from((Ipv4Addr::UNSPECIFIED, group.port())).into())
        .unwrap();
    s.join_multicast_v4(group.ip(), &Ipv4Addr::LOCALHOST)
        .unwrap();
    let s: UdpSocket = s.into();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut b = vec![0u8; 65_536];
    for _ in 0..1_000 {
        let n = s
            .recv(&mut b)
            .expect("a datagram of the source within 10 s");
        if n >= 16 && (b[0] == Kind::Data as u8 || b[0] == Kind::Heartbeat as u8) {
            return b[1];
        }
    }
    panic!("no DATA or HEARTBEAT among 1,000 datagrams on {group}");
}

/// The stranger: DATA of records 1..=N, `PER` to a datagram, round after round, with the
/// session byte `session`, each record starting as the source's (its sequence) and then
/// 0xEE, sent to `group` through loopback from 127.0.0.1 (another port than the source's),
/// until `stop` is set or 20 s have passed. Returns how many it sent.
fn stranger(group: SocketAddrV4, session: u8, stop: &AtomicBool) -> u64 {
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
    s.bind(&SocketAddr::from((Ipv4Addr::LOCALHOST, 0)).into())
        .unwrap();
    s.set_multicast_if_v4(&Ipv4Addr::LOCALHOST).unwrap();
    s.set_multicast_loop_v4(true).unwrap();
    s.set_multicast_ttl_v4(0).unwrap();
    let s: UdpSocket = s.into();
    let mut frame = vec![0u8; 16 + PER as usize * LEN];
    let (t0, mut seq, mut sent) = (Instant::now(), 1, 0);
    while !stop.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(20) {
        let records: Vec<u8> = (seq..seq + PER)
            .flat_map(|s| {
                let mut p = payload::<LEN>(s);
                p[8..].fill(0xEE);
                p
            })
            .collect();
        DataRepr {
            flags: session,
            seq,
            count: PER as u16,
            records: &records,
        }
        .emit(&mut frame)
        .unwrap();
        s.send_to(&frame, group).unwrap();
        sent += 1;
        seq = if seq + PER > N { 1 } else { seq + PER };
        std::thread::sleep(Duration::from_micros(200));
    }
    sent
}

/// Mirrors `src` from the source at `source` (multicasting to `group` with `session`)
/// into `dst` while the stranger sends, from before the first record is published until
/// the mirror holds all `N`: the mirror's summary, and how many datagrams the stranger sent.
fn mirror_beside_a_stranger(
    source: SocketAddr,
    group: SocketAddrV4,
    session: u8,
    producer: &mut RingProducer<[u8; LEN]>,
    dst: &ShmPath,
    stop: &AtomicBool,
) -> (MirrorSummary, u64) {
    let mo = mirror_options(source, dst.path(), Mode::Multicast);
    let quiet = AtomicBool::new(false);
    std::thread::scope(|sc| {
        let _stop = SetOnDrop(stop);
        let _quiet = SetOnDrop(&quiet);
        let m = sc.spawn(|| mirror::run(&mo, stop));
        wait_until("the mirror ring", Duration::from_secs(10), || {
            ringwire::ReadOnlyRing::open(dst.path()).is_ok()
        });
        let r = sc.spawn(|| stranger(group, session, &quiet));
        // The stranger's first datagrams reach the mirror before any of the source's DATA.
        std::thread::sleep(Duration::from_millis(50));
        for seq in 1..=N {
            assert_eq!(producer.push(&payload::<LEN>(seq)), seq);
            if seq % 100 == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        wait_until("the mirror to hold N", Duration::from_secs(30), || {
            ringwire::ReadOnlyRing::open(dst.path()).is_ok_and(|r| r.write_seq() >= N)
        });
        quiet.store(true, Ordering::Relaxed);
        let sent = r.join().unwrap();
        stop.store(true, Ordering::Relaxed);
        (m.join().unwrap().unwrap(), sent)
    })
}

fn check(sum: &MirrorSummary, sent: u64, src: &ShmPath, dst: &ShmPath) {
    assert!(sent > 0, "the stranger sent nothing");
    assert_mirrored::<LEN>(src.path(), dst.path(), N);
    let c = sum.counters;
    assert!(c.udp_wrong_source > 0, "{sum:?}");
    assert!(
        c.udp_wrong_source <= sent,
        "{sum:?}; the stranger sent {sent}"
    );
    assert!(c.garbage_dropped >= c.udp_wrong_source, "{sum:?}");
    assert_eq!((c.gaps, c.restarts), (0, 0), "{sum:?}");
}

/// ringwire's serve, and a stranger with its session byte on the same group and port.
#[test]
fn a_second_sender_with_the_session_byte_never_reaches_the_mirror_ring() {
    let src = ShmPath::new("mc-sender-src");
    let dst = ShmPath::new("mc-sender-dst");
    let mut producer = RingProducer::<[u8; LEN]>::create(src.path(), CAP).unwrap();
    let g = group(1);
    let server = Server::bind(serve_options(src.path(), Mode::Multicast, g, 1)).unwrap();
    let session = server.session_byte();
    let stop = AtomicBool::new(false);
    let (sum, sent) = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let s = sc.spawn(|| server.run(&stop));
        let r =
            mirror_beside_a_stranger(server.local_addr(), g, session, &mut producer, &dst, &stop);
        s.join().unwrap().unwrap();
        r
    });
    check(&sum, sent, &src, &dst);
}

/// The same against ringfire 0.5.2's serve, whose session byte the stranger reads off the
/// group, as anyone on it can.
#[test]
fn a_second_sender_beside_ringfires_serve_never_reaches_the_mirror_ring() {
    let src = ShmPath::new("mc-sender-rf-src");
    let dst = ShmPath::new("mc-sender-rf-dst");
    let mut producer = RingProducer::<[u8; LEN]>::create(src.path(), CAP).unwrap();
    let g = group(2);
    let server = ringfire_server(src.path(), Ipv4Addr::LOCALHOST, Mode::Multicast, g);
    let addr = server.local_addr().unwrap();
    assert!(start_ringfire(server, Mode::Multicast).is_none());
    let session = sniff_session(g);
    let stop = AtomicBool::new(false);
    let (sum, sent) = mirror_beside_a_stranger(addr, g, session, &mut producer, &dst, &stop);
    check(&sum, sent, &src, &dst);
}
