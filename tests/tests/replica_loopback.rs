//! serve → mirror over real loopback sockets: ringwire to ringwire over TCP, multicast
//! (iface 127.0.0.1) and unicast, then interop with the published ringfire 0.5.2 in both
//! directions. Every run checks that the mirror ring holds every record under the source's
//! sequence with identical bytes.
//!
//! The 1,000,000-record variants at 100,000 msg/s are `#[ignore]`d (slow); run them with
//! `cargo test -p ringwire-tests --release --test replica_loopback -- --ignored`.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ringwire::core::broadcast::{Producer, Wake};
use ringwire::core::replicate::Start;
use ringwire::core::{Geometry, RingView};
use ringwire::replica::mirror::{self, MirrorOptions, MirrorSummary};
use ringwire::replica::serve::{ServeSummary, Server};
use ringwire::{CreateOptions, ReadOnlyRing, RingConsumer, RingFile, RingProducer};
use ringwire_tests::records::Aligned64;
use ringwire_tests::replica::{
    Mode, SetOnDrop, assert_served, hold_udp_port, mirror_options, ringfire_server, serve_options,
    start_ringfire,
};
use ringwire_tests::shm::ShmPath;
use ringwire_tests::wait_until;

/// Payload bytes per record (ringfire `[u8; 24]` records have the same slots).
const LEN: usize = 24;
/// Ring slots: more than any run publishes, so nothing is ever lapped.
const CAP: u64 = 1 << 21;
/// Modest count for the default run.
const QUICK: u64 = 20_000;
/// The ringwire-to-ringwire count.
const FULL: u64 = 100_000;

struct FutexWake;
impl Wake for FutexWake {
    fn wake(&self, view: &RingView) {
        ringwire::wait::wake_all(view);
    }
}

fn payload(seq: u64) -> [u8; LEN] {
    ringwire_tests::replica::payload(seq)
}

/// A multicast port private to this process and test.
fn mcast(idx: u16) -> SocketAddrV4 {
    let pid = std::process::id();
    SocketAddrV4::new(
        Ipv4Addr::new(239, 255, 101, idx as u8),
        40_000 + (pid % 4_000) as u16 * 4 + idx,
    )
}

fn mirror_write_seq(path: &Path) -> u64 {
    ReadOnlyRing::open(path).map_or(0, |r| r.write_seq())
}

/// Records 1..=n of the mirror ring equal the source's, and nothing beyond n was written.
fn assert_same(source: &Path, mirror: &Path, n: u64) {
    ringwire_tests::replica::assert_mirrored::<LEN>(source, mirror, n);
}

/// Publishes `n` records at about `rate` per second, in small bursts.
fn publish(p: &mut impl FnMut(u64), n: u64, rate: u64) {
    let t0 = Instant::now();
    let mut seq = 1;
    while seq <= n {
        let due = t0 + Duration::from_secs_f64(seq as f64 / rate as f64);
        if let Some(d) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
        let burst = (rate / 1000).clamp(1, 1000);
        for _ in 0..burst {
            if seq > n {
                break;
            }
            p(seq);
            seq += 1;
        }
    }
}

/// Runs `server` and a mirror with `mo` until the mirror ring holds record `n`, while
/// `push(seq)` publishes records 1..=n at about `rate` per second into the source ring;
/// returns both summaries.
fn serve_and_mirror(
    server: &Server,
    mo: &MirrorOptions,
    n: u64,
    rate: u64,
    push: &mut impl FnMut(u64),
) -> (ServeSummary, MirrorSummary) {
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let s = sc.spawn(|| server.run(&stop));
        let m = sc.spawn(|| mirror::run(mo, &stop));
        wait_until("the mirror ring", Duration::from_secs(10), || {
            ReadOnlyRing::open(&mo.path).is_ok()
        });
        publish(push, n, rate);
        wait_until("the mirror to catch up", Duration::from_secs(60), || {
            mirror_write_seq(&mo.path) >= n
        });
        stop.store(true, Ordering::Relaxed);
        (s.join().unwrap().unwrap(), m.join().unwrap().unwrap())
    })
}

/// ringwire serve → ringwire mirror.
fn ringwire_to_ringwire(mode: Mode, idx: u16, n: u64, rate: u64) {
    let src = ShmPath::new(&format!("rw-src-{idx}"));
    let dst = ShmPath::new(&format!("rw-dst-{idx}"));
    let geo = Geometry::spmc(CAP, LEN + 8, 8, 0, false).unwrap();
    let ring = RingFile::create(src.path(), &geo, &CreateOptions::default()).unwrap();
    // SAFETY: `ring` outlives the producer built on its view (used only while it lives).
    let mut producer = Producer::new(*unsafe { ring.view() }, FutexWake).unwrap();
    let server = Server::bind(serve_options(src.path(), mode, mcast(idx), 1)).unwrap();
    let mo = mirror_options(server.local_addr(), dst.path(), mode);
    let (srv_sum, mir_sum) = serve_and_mirror(&server, &mo, n, rate, &mut |seq| {
        assert_eq!(producer.push(&payload(seq)), Ok(seq));
    });
    assert_same(src.path(), dst.path(), n);
    assert_eq!(mir_sum.last_seq, n);
    assert_eq!(mir_sum.counters.gaps, 0, "{mir_sum:?}");
    assert_eq!(srv_sum.sessions, 1);
    match mode {
        Mode::Tcp => assert!(srv_sum.tcp_records >= n, "{srv_sum:?}"),
        Mode::Multicast | Mode::Unicast => {
            assert!(mir_sum.counters.datagrams > 0, "{mir_sum:?}");
            assert!(srv_sum.udp.data_frames > 0, "{srv_sum:?}");
        }
    }
    if mode == Mode::Unicast {
        assert!(srv_sum.udp.punches >= 1, "{srv_sum:?}");
    }
}

/// An over-aligned record type (spec §4.1: 128-byte slots, the record at +64) crosses
/// serve → mirror by multicast as raw slot bytes: the mirror ring has the source's geometry
/// and schema, and a typed reader of the mirror gets every record.
#[test]
fn over_aligned_ring_replicates_to_a_typed_reader() {
    const N: u64 = 20_000;
    let src = ShmPath::new("rw-src-a64");
    let dst = ShmPath::new("rw-dst-a64");
    let mut producer = RingProducer::<Aligned64>::create(src.path(), 1 << 15).unwrap();
    let server = Server::bind(serve_options(src.path(), Mode::Multicast, mcast(7), 1)).unwrap();
    let mo = mirror_options(server.local_addr(), dst.path(), Mode::Multicast);
    serve_and_mirror(&server, &mo, N, 100_000, &mut |seq| {
        assert_eq!(producer.push(&Aligned64::new(seq)), seq);
    });
    let m = ReadOnlyRing::open(dst.path()).unwrap();
    assert_eq!(m.geometry().element_size, 128);
    let mut reader = RingConsumer::<Aligned64>::builder()
        .start_from_oldest()
        .attach(dst.path())
        .unwrap();
    for seq in 1..=N {
        assert_eq!(reader.try_recv_seq(), Some((seq, Aligned64::new(seq))));
    }
    assert_eq!(reader.try_recv(), None);
}

#[test]
fn ringwire_tcp() {
    ringwire_to_ringwire(Mode::Tcp, 0, FULL, 200_000);
}

#[test]
fn ringwire_multicast() {
    ringwire_to_ringwire(Mode::Multicast, 1, FULL, 200_000);
}

#[test]
fn ringwire_unicast() {
    ringwire_to_ringwire(Mode::Unicast, 2, FULL, 200_000);
}

/// A source multicasts from another address than the one a mirror reaches it at: `serve
/// --bind 0.0.0.0` sends from its --iface's address (or the default route's), here
/// 127.0.0.1, while the mirror connected to 127.0.0.2 (the listener is bound there only, to
/// stay on loopback). The mirror takes the datagrams by their session byte alone (spec
/// §21.4) and gets the records over UDP, not through NAKs.
#[test]
fn ringwire_multicast_from_another_address_than_the_tcp_peer() {
    const IDX: u16 = 20;
    let src = ShmPath::new("rw-src-mcif");
    let dst = ShmPath::new("rw-dst-mcif");
    let geo = Geometry::spmc(CAP, LEN + 8, 8, 0, false).unwrap();
    let ring = RingFile::create(src.path(), &geo, &CreateOptions::default()).unwrap();
    // SAFETY: `ring` outlives the producer built on its view (used only while it lives).
    let mut producer = Producer::new(*unsafe { ring.view() }, FutexWake).unwrap();
    let mut so = serve_options(src.path(), Mode::Multicast, mcast(IDX), 1);
    // The UDP socket follows --bind: 0.0.0.0, so datagrams leave from --iface's address.
    so.bind = (Ipv4Addr::UNSPECIFIED, 0).into();
    assert_eq!(so.iface, Some(Ipv4Addr::LOCALHOST));
    let listener = std::net::TcpListener::bind((Ipv4Addr::new(127, 0, 0, 2), 0)).unwrap();
    let server = Server::with_listener(so, listener).unwrap();
    let mo = mirror_options(server.local_addr(), dst.path(), Mode::Multicast);
    let (_, sum) = serve_and_mirror(&server, &mo, QUICK, 100_000, &mut |seq| {
        assert_eq!(producer.push(&payload(seq)), Ok(seq));
    });
    assert_same(src.path(), dst.path(), QUICK);
    let c = sum.counters;
    assert!(c.datagrams > 0 && c.udp_wrong_source == 0, "{sum:?}");
    assert!(c.records_retransmitted < QUICK / 2, "{sum:?}");
}

/// A mirror given no `--iface` joins the group on its own address of the TCP connection
/// (here 127.0.0.1), so a source on this host, whose datagrams leave by loopback, reaches
/// it by multicast. Joined on the kernel's choice (the default route's interface), it got
/// no datagram, and so no record and no heartbeat: `last seq written 0` for ever.
#[test]
fn ringwire_multicast_on_this_host_without_iface() {
    const IDX: u16 = 21;
    let src = ShmPath::new("rw-src-noif");
    let dst = ShmPath::new("rw-dst-noif");
    let geo = Geometry::spmc(CAP, LEN + 8, 8, 0, false).unwrap();
    let ring = RingFile::create(src.path(), &geo, &CreateOptions::default()).unwrap();
    // SAFETY: `ring` outlives the producer built on its view (used only while it lives).
    let mut producer = Producer::new(*unsafe { ring.view() }, FutexWake).unwrap();
    let server = Server::bind(serve_options(src.path(), Mode::Multicast, mcast(IDX), 1)).unwrap();
    let mut mo = mirror_options(server.local_addr(), dst.path(), Mode::Multicast);
    mo.iface = Ipv4Addr::UNSPECIFIED;
    let (_, sum) = serve_and_mirror(&server, &mo, QUICK, 100_000, &mut |seq| {
        assert_eq!(producer.push(&payload(seq)), Ok(seq));
    });
    assert_same(src.path(), dst.path(), QUICK);
    let c = sum.counters;
    assert!(c.datagrams > 0, "{sum:?}");
    assert!(c.records_retransmitted < QUICK / 2, "{sum:?}");
}

/// A mirror that cannot join the group the source announces (here another socket holds
/// the group's port) ended, even without `--once`. As any connection failure (spec §26.2),
/// it now reconnects until it is stopped, and `--once` fails with the socket's error.
#[test]
fn a_mirror_that_cannot_join_the_group_reconnects() {
    const IDX: u16 = 22;
    let src = ShmPath::new("rw-src-nojoin");
    let dst = ShmPath::new("rw-dst-nojoin");
    let geo = Geometry::spmc(CAP, LEN + 8, 8, 0, false).unwrap();
    let _ring = RingFile::create(src.path(), &geo, &CreateOptions::default()).unwrap();
    let server = Server::bind(serve_options(src.path(), Mode::Multicast, mcast(IDX), 1)).unwrap();
    let mut mo = mirror_options(server.local_addr(), dst.path(), Mode::Multicast);
    let _held = hold_udp_port(mcast(IDX).port());
    let stop = AtomicBool::new(false);
    let (served, mirrored) = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let s = sc.spawn(|| server.run(&stop));
        let m = sc.spawn(|| mirror::run(&mo, &stop));
        // Three sessions: the mirror came back twice after failing to join.
        wait_until("the mirror to reconnect", Duration::from_secs(10), || {
            m.is_finished() || server.summary().sessions >= 3
        });
        stop.store(true, Ordering::Relaxed);
        (s.join().unwrap().unwrap(), m.join().unwrap())
    });
    let sum = mirrored.expect("stopped, not failed");
    assert!(served.sessions >= 3, "{served:?}");
    assert_eq!(sum.counters.datagrams, 0, "{sum:?}");

    mo.once = true;
    let stop = AtomicBool::new(false);
    let err = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let s = sc.spawn(|| server.run(&stop));
        let r = mirror::run(&mo, &stop);
        stop.store(true, Ordering::Relaxed);
        s.join().unwrap().unwrap();
        r
    })
    .expect_err("--once with a group it cannot join");
    let text = err.to_string();
    assert!(text.contains("mirror UDP socket"), "{text}");
    // The group and port joined, and the interface tried.
    assert!(text.contains(&mcast(IDX).to_string()), "{text}");
    assert!(text.contains("interface 127.0.0.1 (--iface)"), "{text}");
    assert!(text.contains("Address already in use"), "{text}");
}

/// [`ringwire_multicast_from_another_address_than_the_tcp_peer`] from ringfire's server.
#[test]
fn ringfire_serve_multicast_from_another_address_than_the_tcp_peer() {
    ringfire_at_to_ringwire(
        Ipv4Addr::new(127, 0, 0, 2),
        Mode::Multicast,
        21,
        1,
        QUICK,
        100_000,
    );
}

/// ringfire 0.5.2 `ReplicaServer` → ringwire mirror. ringfire's server cannot be stopped in
/// UDP modes (its `run` and UDP thread loop forever), so that thread is left to the end of
/// the test process; its ring file is still removed.
fn ringfire_to_ringwire(mode: Mode, idx: u16, dup: u8, n: u64, rate: u64) {
    ringfire_at_to_ringwire(Ipv4Addr::LOCALHOST, mode, idx, dup, n, rate);
}

/// [`ringfire_to_ringwire`] with the server's TCP listener on `tcp_ip` (multicast still goes
/// out through 127.0.0.1).
fn ringfire_at_to_ringwire(tcp_ip: Ipv4Addr, mode: Mode, idx: u16, dup: u8, n: u64, rate: u64) {
    let src = ShmPath::new(&format!("rf-src-{idx}"));
    let dst = ShmPath::new(&format!("rf-dst-{idx}"));
    let mut producer = ringfire::RingProducer::<[u8; LEN]>::create(src.path(), CAP).unwrap();
    let server = ringfire_server(src.path(), tcp_ip, mode, mcast(idx)).duplicate(dup);
    let addr = server.local_addr().unwrap();
    let stop = AtomicBool::new(false);
    let mo = mirror_options(addr, dst.path(), mode);
    let _wake = WakeAccept(addr);
    let served = start_ringfire(server, mode);
    let sum = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let m = sc.spawn(|| mirror::run(&mo, &stop));
        wait_until("the mirror ring", Duration::from_secs(10), || {
            ReadOnlyRing::open(dst.path()).is_ok()
        });
        publish(&mut |seq| producer.push(&payload(seq)), n, rate);
        wait_until("the mirror to catch up", Duration::from_secs(60), || {
            mirror_write_seq(dst.path()) >= n
        });
        stop.store(true, Ordering::Relaxed);
        m.join().unwrap().unwrap()
    });
    assert_same(src.path(), dst.path(), n);
    assert_eq!(sum.last_seq, n);
    assert_eq!(sum.connections, 1, "{sum:?}");
    assert_eq!(sum.counters.gaps, 0, "{sum:?}");
    match served {
        // serve_one returned once our mirror hung up.
        Some(h) => assert_served(h, &format!("{mode:?}")),
        None => assert!(sum.counters.datagrams > 0, "{sum:?}"),
    }
    drop(producer);
}

/// Ends ringfire's `serve_one` when the test fails before a mirror connected (it waits in
/// `accept` and has no stop flag): a connection that closes at once ends its session.
struct WakeAccept(std::net::SocketAddr);

impl Drop for WakeAccept {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = std::net::TcpStream::connect_timeout(&self.0, Duration::from_secs(1));
        }
    }
}

/// ringwire serve → ringfire 0.5.2 `Mirror`.
fn ringwire_to_ringfire(mode: Mode, idx: u16, dup: u8, n: u64, rate: u64) {
    use ringfire::replication::{Mirror, MirrorStart};
    let src = ShmPath::new(&format!("wf-src-{idx}"));
    let dst = ShmPath::new(&format!("wf-dst-{idx}"));
    let geo = Geometry::spmc(CAP, LEN + 8, 8, 0, false).unwrap();
    let ring = RingFile::create(src.path(), &geo, &CreateOptions::default()).unwrap();
    // SAFETY: `ring` outlives the producer built on its view (used only while it lives).
    let mut producer = Producer::new(*unsafe { ring.view() }, FutexWake).unwrap();
    let server = Server::bind(serve_options(src.path(), mode, mcast(idx), dup)).unwrap();
    let addr = server.local_addr();
    let stop = AtomicBool::new(false);
    let (got, srv) = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let s = sc.spawn(|| server.run(&stop));
        let m = sc.spawn(|| {
            let mut mir = Mirror::builder()
                .start(MirrorStart::Oldest)
                .interface(Ipv4Addr::LOCALHOST)
                .unicast(mode == Mode::Unicast)
                .connect(addr, dst.path())
                .unwrap();
            let kind = (mir.is_multicast(), mir.is_unicast());
            let t0 = Instant::now();
            while mir.sequence() < n && t0.elapsed() < Duration::from_secs(60) {
                if !mir.step().unwrap() {
                    break;
                }
            }
            (mir.sequence(), mir.gaps(), mir.datagrams(), kind)
        });
        wait_until("the ringfire mirror ring", Duration::from_secs(10), || {
            ReadOnlyRing::open(dst.path()).is_ok()
        });
        publish(
            &mut |seq| {
                producer.push(&payload(seq)).unwrap();
            },
            n,
            rate,
        );
        let got = m.join().unwrap();
        stop.store(true, Ordering::Relaxed);
        (got, s.join().unwrap().unwrap())
    });
    let (seq, gaps, datagrams, kind) = got;
    assert_eq!(seq, n, "ringfire mirror sequence");
    assert_eq!(gaps, 0);
    match mode {
        Mode::Tcp => assert_eq!(kind, (false, false)),
        Mode::Multicast => {
            assert_eq!(kind, (true, false));
            assert!(datagrams > 0);
        }
        Mode::Unicast => {
            // ringfire's is_multicast() means "live data over UDP".
            assert!(kind.1, "{kind:?}");
            assert!(datagrams > 0);
            assert!(srv.udp.punches >= 1, "{srv:?}");
        }
    }
    assert_same(src.path(), dst.path(), n);
}

#[test]
fn ringfire_serve_to_ringwire_mirror_tcp() {
    ringfire_to_ringwire(Mode::Tcp, 3, 1, QUICK, 100_000);
}

#[test]
fn ringfire_serve_to_ringwire_mirror_multicast() {
    ringfire_to_ringwire(Mode::Multicast, 4, 1, QUICK, 100_000);
}

#[test]
fn ringfire_serve_to_ringwire_mirror_unicast_dup2() {
    ringfire_to_ringwire(Mode::Unicast, 5, 2, QUICK, 100_000);
}

#[test]
fn ringwire_serve_to_ringfire_mirror_tcp() {
    ringwire_to_ringfire(Mode::Tcp, 6, 1, QUICK, 100_000);
}

#[test]
fn ringwire_serve_to_ringfire_mirror_multicast() {
    ringwire_to_ringfire(Mode::Multicast, 7, 1, QUICK, 100_000);
}

#[test]
fn ringwire_serve_to_ringfire_mirror_unicast_dup2() {
    ringwire_to_ringfire(Mode::Unicast, 8, 2, QUICK, 100_000);
}

const MILLION: u64 = 1_000_000;

#[test]
#[ignore = "slow: 1,000,000 records at 100,000 msg/s (10 s)"]
fn million_ringfire_to_ringwire_tcp() {
    ringfire_to_ringwire(Mode::Tcp, 9, 1, MILLION, 100_000);
}

#[test]
#[ignore = "slow: 1,000,000 records at 100,000 msg/s (10 s)"]
fn million_ringfire_to_ringwire_multicast() {
    ringfire_to_ringwire(Mode::Multicast, 10, 1, MILLION, 100_000);
}

#[test]
#[ignore = "slow: 1,000,000 records at 100,000 msg/s (10 s)"]
fn million_ringfire_to_ringwire_unicast_dup2() {
    ringfire_to_ringwire(Mode::Unicast, 11, 2, MILLION, 100_000);
}

#[test]
#[ignore = "slow: 1,000,000 records at 100,000 msg/s (10 s)"]
fn million_ringwire_to_ringfire_tcp() {
    ringwire_to_ringfire(Mode::Tcp, 12, 1, MILLION, 100_000);
}

#[test]
#[ignore = "slow: 1,000,000 records at 100,000 msg/s (10 s)"]
fn million_ringwire_to_ringfire_multicast() {
    ringwire_to_ringfire(Mode::Multicast, 13, 1, MILLION, 100_000);
}

#[test]
#[ignore = "slow: 1,000,000 records at 100,000 msg/s (10 s)"]
fn million_ringwire_to_ringfire_unicast_dup2() {
    ringwire_to_ringfire(Mode::Unicast, 14, 2, MILLION, 100_000);
}

/// A stopped mirror resumes its own ring (same inode, no gap) and a second mirror on the
/// same file is refused while the first holds its lock.
#[test]
fn mirror_resumes_its_ring_and_holds_its_lock() {
    use std::os::unix::fs::MetadataExt;
    let src = ShmPath::new("resume-src");
    let dst = ShmPath::new("resume-dst");
    let geo = Geometry::spmc(1 << 12, LEN + 8, 8, 0, false).unwrap();
    let ring = RingFile::create(src.path(), &geo, &CreateOptions::default()).unwrap();
    // SAFETY: `ring` outlives the producer built on its view (used only while it lives).
    let mut producer = Producer::new(*unsafe { ring.view() }, FutexWake).unwrap();
    let server = Server::bind(serve_options(src.path(), Mode::Tcp, mcast(15), 1)).unwrap();
    let stop_server = AtomicBool::new(false);
    std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop_server);
        let s = sc.spawn(|| server.run(&stop_server));
        let mut mo = mirror_options(server.local_addr(), dst.path(), Mode::Tcp);
        // First run: from the oldest, 1,000 records.
        let stop = AtomicBool::new(false);
        let first = std::thread::scope(|sc2| {
            let _stop = SetOnDrop(&stop);
            let m = sc2.spawn(|| mirror::run(&mo, &stop));
            wait_until("the mirror ring", Duration::from_secs(10), || {
                ReadOnlyRing::open(dst.path()).is_ok()
            });
            // A second mirror on the same file is refused.
            let second = mirror::run(&mo, &AtomicBool::new(false));
            assert!(second.is_err(), "a second mirror was allowed");
            for seq in 1..=1000 {
                producer.push(&payload(seq)).unwrap();
            }
            wait_until("1,000 records", Duration::from_secs(10), || {
                mirror_write_seq(dst.path()) >= 1000
            });
            stop.store(true, Ordering::Relaxed);
            m.join().unwrap().unwrap()
        });
        assert_eq!(first.last_seq, 1000);
        let inode = std::fs::metadata(dst.path()).unwrap().ino();
        for seq in 1001..=2000 {
            producer.push(&payload(seq)).unwrap();
        }
        // Second run: resume.
        mo.start = Start::Resume;
        let stop = AtomicBool::new(false);
        let second = std::thread::scope(|sc2| {
            let _stop = SetOnDrop(&stop);
            let m = sc2.spawn(|| mirror::run(&mo, &stop));
            wait_until("2,000 records", Duration::from_secs(10), || {
                mirror_write_seq(dst.path()) >= 2000
            });
            stop.store(true, Ordering::Relaxed);
            m.join().unwrap().unwrap()
        });
        assert_eq!(second.last_seq, 2000);
        assert_eq!(second.counters.records_written, 1000, "{second:?}");
        assert_eq!(second.counters.gaps, 0);
        assert_eq!(std::fs::metadata(dst.path()).unwrap().ino(), inode);
        stop_server.store(true, Ordering::Relaxed);
        s.join().unwrap().unwrap();
    });
    assert_same(src.path(), dst.path(), 2000);
}

/// The source's server goes away and comes back on the same port: the mirror reconnects on
/// its own, resumes (no gap, same ring file) and ends with every record.
#[test]
fn mirror_reconnects_and_resumes_after_the_server_restarts() {
    use std::os::unix::fs::MetadataExt;
    let src = ShmPath::new("reconnect-src");
    let dst = ShmPath::new("reconnect-dst");
    let geo = Geometry::spmc(1 << 12, LEN + 8, 8, 0, false).unwrap();
    let ring = RingFile::create(src.path(), &geo, &CreateOptions::default()).unwrap();
    // SAFETY: `ring` outlives the producer built on its view (used only while it lives).
    let mut producer = Producer::new(*unsafe { ring.view() }, FutexWake).unwrap();
    let first = Server::bind(serve_options(src.path(), Mode::Multicast, mcast(16), 1)).unwrap();
    let addr = first.local_addr();
    let mo = mirror_options(addr, dst.path(), Mode::Multicast);
    let stop_mirror = AtomicBool::new(false);
    let sum = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop_mirror);
        let m = sc.spawn(|| mirror::run(&mo, &stop_mirror));
        let stop1 = AtomicBool::new(false);
        std::thread::scope(|sc1| {
            let _stop = SetOnDrop(&stop1);
            let s = sc1.spawn(|| first.run(&stop1));
            wait_until("the mirror ring", Duration::from_secs(10), || {
                ReadOnlyRing::open(dst.path()).is_ok()
            });
            for seq in 1..=1000 {
                producer.push(&payload(seq)).unwrap();
            }
            wait_until("1,000 records", Duration::from_secs(10), || {
                mirror_write_seq(dst.path()) >= 1000
            });
            stop1.store(true, Ordering::Relaxed);
            s.join().unwrap().unwrap();
        });
        drop(first);
        let inode = std::fs::metadata(dst.path()).unwrap().ino();
        // Records published while no server runs.
        for seq in 1001..=1500 {
            producer.push(&payload(seq)).unwrap();
        }
        let mut so = serve_options(src.path(), Mode::Multicast, mcast(16), 1);
        so.bind = addr;
        let second = Server::bind(so).unwrap();
        let stop2 = AtomicBool::new(false);
        std::thread::scope(|sc2| {
            let _stop = SetOnDrop(&stop2);
            let s = sc2.spawn(|| second.run(&stop2));
            for seq in 1501..=2000 {
                producer.push(&payload(seq)).unwrap();
            }
            wait_until("2,000 records", Duration::from_secs(20), || {
                mirror_write_seq(dst.path()) >= 2000
            });
            stop2.store(true, Ordering::Relaxed);
            s.join().unwrap().unwrap();
        });
        assert_eq!(std::fs::metadata(dst.path()).unwrap().ino(), inode);
        stop_mirror.store(true, Ordering::Relaxed);
        m.join().unwrap().unwrap()
    });
    assert!(sum.connections >= 2, "{sum:?}");
    assert_eq!(sum.counters.gaps, 0, "{sum:?}");
    assert_eq!(sum.counters.records_written, 2000, "{sum:?}");
    assert_same(src.path(), dst.path(), 2000);
}

/// `--once`: the server serves one TCP mirror and returns when it hangs up, without a stop.
#[test]
fn serve_once_returns_when_its_mirror_leaves() {
    let src = ShmPath::new("once-src");
    let dst = ShmPath::new("once-dst");
    let geo = Geometry::spmc(1 << 12, LEN + 8, 8, 0, false).unwrap();
    let ring = RingFile::create(src.path(), &geo, &CreateOptions::default()).unwrap();
    // SAFETY: `ring` outlives the producer built on its view (used only while it lives).
    let mut producer = Producer::new(*unsafe { ring.view() }, FutexWake).unwrap();
    let mut so = serve_options(src.path(), Mode::Tcp, mcast(17), 1);
    so.once = true;
    let server = Server::bind(so).unwrap();
    let never = AtomicBool::new(false);
    let stop = AtomicBool::new(false);
    let mut mo = mirror_options(server.local_addr(), dst.path(), Mode::Tcp);
    mo.once = true;
    let sum = std::thread::scope(|sc| {
        // `never` is set only when the scope ends; the server must return on its own first.
        let _stop = (SetOnDrop(&stop), SetOnDrop(&never));
        let s = sc.spawn(|| server.run(&never));
        let m = sc.spawn(|| mirror::run(&mo, &stop));
        wait_until("the mirror ring", Duration::from_secs(10), || {
            ReadOnlyRing::open(dst.path()).is_ok()
        });
        for seq in 1..=500 {
            producer.push(&payload(seq)).unwrap();
        }
        wait_until("500 records", Duration::from_secs(10), || {
            mirror_write_seq(dst.path()) >= 500
        });
        stop.store(true, Ordering::Relaxed);
        let sum = m.join().unwrap().unwrap();
        wait_until("serve --once to return", Duration::from_secs(10), || {
            s.is_finished()
        });
        let srv = s.join().unwrap().unwrap();
        assert_eq!(srv.sessions, 1);
        sum
    });
    assert_eq!(sum.last_seq, 500);
    assert_same(src.path(), dst.path(), 500);
    // --once refuses UDP delivery.
    let mut bad = serve_options(src.path(), Mode::Unicast, mcast(17), 1);
    bad.once = true;
    assert!(Server::bind(bad).is_err());
}

/// A hub: a mirror ring served again. source → (multicast) → hub ring → (TCP) → leaf ring;
/// the leaf holds every record with the source's bytes.
#[test]
fn a_mirror_ring_can_be_served_again() {
    let src = ShmPath::new("hub-src");
    let hub = ShmPath::new("hub-mid");
    let leaf = ShmPath::new("hub-leaf");
    let geo = Geometry::spmc(1 << 14, LEN + 8, 8, 0, false).unwrap();
    let ring = RingFile::create(src.path(), &geo, &CreateOptions::default()).unwrap();
    // SAFETY: `ring` outlives the producer built on its view (used only while it lives).
    let mut producer = Producer::new(*unsafe { ring.view() }, FutexWake).unwrap();
    let first = Server::bind(serve_options(src.path(), Mode::Multicast, mcast(18), 1)).unwrap();
    let stop = AtomicBool::new(false);
    let n = 10_000;
    let to_hub = mirror_options(first.local_addr(), hub.path(), Mode::Multicast);
    std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let s1 = sc.spawn(|| first.run(&stop));
        let m1 = sc.spawn(|| mirror::run(&to_hub, &stop));
        wait_until("the hub ring", Duration::from_secs(10), || {
            ReadOnlyRing::open(hub.path()).is_ok()
        });
        let second = Server::bind(serve_options(hub.path(), Mode::Tcp, mcast(19), 1)).unwrap();
        let to_leaf = mirror_options(second.local_addr(), leaf.path(), Mode::Tcp);
        std::thread::scope(|sc2| {
            let _stop = SetOnDrop(&stop);
            let s2 = sc2.spawn(|| second.run(&stop));
            let m2 = sc2.spawn(|| mirror::run(&to_leaf, &stop));
            wait_until("the leaf ring", Duration::from_secs(10), || {
                ReadOnlyRing::open(leaf.path()).is_ok()
            });
            publish(
                &mut |seq| {
                    producer.push(&payload(seq)).unwrap();
                },
                n,
                100_000,
            );
            wait_until("the leaf to catch up", Duration::from_secs(30), || {
                mirror_write_seq(leaf.path()) >= n
            });
            stop.store(true, Ordering::Relaxed);
            let leaf_sum = m2.join().unwrap().unwrap();
            assert_eq!(leaf_sum.counters.gaps, 0, "{leaf_sum:?}");
            s2.join().unwrap().unwrap();
        });
        m1.join().unwrap().unwrap();
        s1.join().unwrap().unwrap();
    });
    assert_same(src.path(), leaf.path(), n);
}
