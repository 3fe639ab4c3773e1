//! Hostile input against the real drivers: datagrams of another session, random bytes,
//! truncated frames, forged PUNCHes, TCP garbage and a flood of HELLOs. Serve and mirror
//! must keep running, count what they dropped, and still replicate every record exactly.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ringwire::core::broadcast::{Producer, Wake};
use ringwire::core::replicate::Start;
use ringwire::core::wire::{HeaderRepr, HelloRepr, Kind, PunchRepr};
use ringwire::core::{Geometry, RingView, SlotRead};
use ringwire::replica::mirror::{self, MirrorOptions};
use ringwire::replica::serve::{ServeOptions, Server};
use ringwire::{CreateOptions, ReadOnlyRing, RingFile};
use ringwire_tests::replica::{SetOnDrop, geometry_frame, hold_udp_port, udp_handshake};
use ringwire_tests::shm::ShmPath;
use ringwire_tests::wait_until;

const LEN: usize = 24;
const CAP: u64 = 1 << 16;
const N: u64 = 20_000;

struct FutexWake;
impl Wake for FutexWake {
    fn wake(&self, view: &RingView) {
        ringwire::wait::wake_all(view);
    }
}

fn payload(seq: u64) -> [u8; LEN] {
    let mut p = [0u8; LEN];
    p[..8].copy_from_slice(&seq.to_le_bytes());
    p[8..16].copy_from_slice(&(!seq).to_le_bytes());
    p
}

/// A small xorshift generator: deterministic "random" bytes.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn assert_mirror_exact(path: &Path, n: u64) {
    let m = ReadOnlyRing::open(path).unwrap();
    assert_eq!(m.write_seq(), n);
    let mut b = vec![0u8; m.geometry().record_len()];
    for seq in 1..=n {
        assert_eq!(m.read_slot(seq, &mut b), SlotRead::Ok, "mirror {seq}");
        assert_eq!(&b[..LEN], &payload(seq), "bytes of {seq}");
    }
}

fn publish(p: &mut Producer<FutexWake>, n: u64) {
    for seq in 1..=n {
        assert_eq!(p.push(&payload(seq)), Ok(seq));
        if seq % 200 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Serve options for `src` on an ephemeral loopback port, without log lines.
fn quiet_serve(src: &ShmPath) -> ServeOptions {
    let mut so = ServeOptions::new(src.path(), SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
    so.log = false;
    so
}

fn source(tag: &str) -> (ShmPath, RingFile, Producer<FutexWake>) {
    let p = ShmPath::new(tag);
    let geo = Geometry::spmc(CAP, LEN + 8, 8, 0, false).unwrap();
    let ring = RingFile::create(p.path(), &geo, &CreateOptions::default()).unwrap();
    // SAFETY: `ring` outlives the producer built on its view (used only while it lives).
    let prod = Producer::new(*unsafe { ring.view() }, FutexWake).unwrap();
    (p, ring, prod)
}

/// Data frames of another session from another address (a second source on the same group
/// and port, forging sequences 1..), random bytes and truncated frames sent to a live
/// multicast mirror: all dropped and counted, nothing corrupted. (A multicast datagram's
/// source address is not checked, spec §21.4: it is the source's sending interface, not
/// necessarily the address the mirror connected to; the session byte is the filter.)
#[test]
fn mirror_drops_foreign_random_and_truncated_datagrams() {
    let (src, _ring, mut prod) = source("hostile-m-src");
    let dst = ShmPath::new("hostile-m-dst");
    let port = 30_000 + (std::process::id() % 10_000) as u16;
    let group = SocketAddrV4::new(Ipv4Addr::new(239, 255, 102, 1), port);
    let mut so = quiet_serve(&src);
    so.multicast = Some(group);
    so.iface = Some(Ipv4Addr::LOCALHOST);
    so.ttl = 0;
    let server = Server::bind(so).unwrap();
    let session = server.session_byte();
    let mut mo = MirrorOptions::new(server.local_addr(), dst.path());
    mo.start = Start::Oldest;
    mo.iface = Ipv4Addr::LOCALHOST;
    mo.log = false;
    let stop = AtomicBool::new(false);
    let sum = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let s = sc.spawn(|| server.run(&stop));
        let m = sc.spawn(|| mirror::run(&mo, &stop));
        wait_until("the mirror ring", Duration::from_secs(10), || {
            ReadOnlyRing::open(dst.path()).is_ok()
        });
        let to = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port);
        let stranger = UdpSocket::bind((Ipv4Addr::new(127, 0, 0, 2), 0)).unwrap();
        let local = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let mut rng = Rng(0x5EED);
        let mut frame = vec![0u8; 16 + 4 * (LEN + 8)];
        for i in 0..200u64 {
            // A well-formed DATA frame of another session, from 127.0.0.2.
            let seq = 1 + i % 50;
            HeaderRepr {
                kind: Kind::Data,
                flags: session ^ 0x5A,
                count: 4,
                len: (4 * LEN) as u32,
                seq,
            }
            .emit(&mut frame)
            .unwrap();
            frame[16..].fill(0xEE);
            stranger.send_to(&frame[..16 + 4 * LEN], to).unwrap();
            // Random bytes and a truncated frame from the source's own address.
            let n = 1 + (rng.next() % 200) as usize;
            local.send_to(&rng.bytes(n), to).unwrap();
            local.send_to(&frame[..16 + 4 * LEN - 3], to).unwrap();
        }
        publish(&mut prod, N);
        wait_until("the mirror to catch up", Duration::from_secs(30), || {
            ReadOnlyRing::open(dst.path()).map_or(0, |r| r.write_seq()) >= N
        });
        stop.store(true, Ordering::Relaxed);
        s.join().unwrap().unwrap();
        m.join().unwrap().unwrap()
    });
    assert_mirror_exact(dst.path(), N);
    // 200 forged + 200 random (some may pass the first checks and fail later) + 200
    // truncated; all counted as dropped.
    assert!(
        sum.counters.garbage_dropped >= 600,
        "dropped only {}: {sum:?}",
        sum.counters.garbage_dropped
    );
    assert_eq!(sum.counters.gaps, 0);
}

/// TCP garbage, a flood of HELLOs beyond the session limit and forged PUNCHes: the server
/// refuses and counts them, then serves a real unicast mirror exactly.
#[test]
fn serve_survives_garbage_hello_flood_and_forged_punches() {
    let (src, _ring, mut prod) = source("hostile-s-src");
    let dst = ShmPath::new("hostile-s-dst");
    let mut so = quiet_serve(&src);
    so.udp = Some(0);
    so.max_sessions = 4;
    let server = Server::bind(so).unwrap();
    let addr = server.local_addr();
    let udp = server.udp_addr().unwrap();
    let session = server.session_byte();
    let stop = AtomicBool::new(false);
    let (srv, sum) = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let s = sc.spawn(|| server.run(&stop));
        let mut rng = Rng(0xBAD);
        // TCP garbage: each session must end with a protocol error.
        for _ in 0..10 {
            let mut c = TcpStream::connect(addr).unwrap();
            let mut junk = rng.bytes(64);
            junk[0] = 0xFF; // an unknown kind, so it is never a HELLO
            let _ = c.write_all(&junk);
            std::thread::sleep(Duration::from_millis(20));
        }
        // A HELLO flood, held open: at most 4 sessions are admitted.
        let mut hello = [0u8; 64];
        let n = HelloRepr { seq: 0, flags: 0 }.emit(&mut hello).unwrap();
        let flood: Vec<TcpStream> = (0..24)
            .map(|_| {
                let mut c = TcpStream::connect(addr).unwrap();
                let _ = c.write_all(&hello[..n]);
                c
            })
            .collect();
        wait_until("refusals", Duration::from_secs(10), || {
            server.summary().refused >= 20
        });
        drop(flood);
        // Forged PUNCHes (unregistered tokens) and random datagrams on the UDP port.
        let u = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let mut p = [0u8; 16];
        for t in 0..100u32 {
            PunchRepr {
                session,
                token: 1000 + t,
            }
            .emit(&mut p)
            .unwrap();
            u.send_to(&p, udp).unwrap();
            let k = 1 + (rng.next() % 60) as usize;
            u.send_to(&rng.bytes(k), udp).unwrap();
        }
        wait_until("rejections", Duration::from_secs(10), || {
            server.summary().udp.rejected >= 200
        });
        // A real mirror still gets everything.
        let mut mo = MirrorOptions::new(addr, dst.path());
        mo.start = Start::Oldest;
        mo.unicast = true;
        mo.log = false;
        mo.reconnect = Duration::from_millis(50);
        let stop = &stop;
        let m = sc.spawn(move || mirror::run(&mo, stop));
        wait_until("the mirror ring", Duration::from_secs(10), || {
            ReadOnlyRing::open(dst.path()).is_ok()
        });
        publish(&mut prod, N);
        wait_until("the mirror to catch up", Duration::from_secs(30), || {
            ReadOnlyRing::open(dst.path()).map_or(0, |r| r.write_seq()) >= N
        });
        stop.store(true, Ordering::Relaxed);
        let sum = m.join().unwrap().unwrap();
        (s.join().unwrap().unwrap(), sum)
    });
    assert_mirror_exact(dst.path(), N);
    assert!(srv.protocol_errors >= 10, "{srv:?}");
    assert!(srv.refused >= 20, "{srv:?}");
    assert!(srv.udp.rejected >= 200, "{srv:?}");
    assert!(srv.udp.punches >= 1, "{srv:?}");
    assert_eq!(sum.counters.gaps, 0, "{sum:?}");
}

/// A mirror that sends HELLO and then never reads: its session ends at the 5 s write
/// timeout (counted), and a well-behaved mirror alongside it gets every record meanwhile.
#[test]
fn a_mirror_that_stops_reading_times_out_without_hurting_others() {
    let src = ShmPath::new("hostile-slow-src");
    let dst = ShmPath::new("hostile-slow-dst");
    // 4,096 records of 4 KiB: 16 MiB, more than loopback socket buffers hold.
    let geo = Geometry::spmc(1 << 12, 4096 + 8, 8, 0, false).unwrap();
    let ring = RingFile::create(src.path(), &geo, &CreateOptions::default()).unwrap();
    // SAFETY: `ring` outlives the producer built on its view (used only while it lives).
    let mut prod = Producer::new(*unsafe { ring.view() }, FutexWake).unwrap();
    let so = quiet_serve(&src);
    let server = Server::bind(so).unwrap();
    let addr = server.local_addr();
    let stop = AtomicBool::new(false);
    let n = 4096;
    let (srv, sum) = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let s = sc.spawn(|| server.run(&stop));
        let mut hello = [0u8; 64];
        let k = HelloRepr { seq: 0, flags: 0 }.emit(&mut hello).unwrap();
        let mut silent = TcpStream::connect(addr).unwrap();
        silent.write_all(&hello[..k]).unwrap();
        let mut mo = MirrorOptions::new(addr, dst.path());
        mo.start = Start::Oldest;
        mo.log = false;
        let stop = &stop;
        let m = sc.spawn(move || mirror::run(&mo, stop));
        wait_until("the mirror ring", Duration::from_secs(10), || {
            ReadOnlyRing::open(dst.path()).is_ok()
        });
        for seq in 1..=n {
            prod.push(&payload(seq)).unwrap();
            if seq % 64 == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        wait_until("the good mirror", Duration::from_secs(30), || {
            ReadOnlyRing::open(dst.path()).map_or(0, |r| r.write_seq()) >= n
        });
        wait_until("the write timeout", Duration::from_secs(15), || {
            server.summary().write_timeouts >= 1
        });
        drop(silent);
        stop.store(true, Ordering::Relaxed);
        let sum = m.join().unwrap().unwrap();
        (s.join().unwrap().unwrap(), sum)
    });
    assert_mirror_exact(dst.path(), n);
    assert_eq!(srv.write_timeouts, 1, "{srv:?}");
    assert_eq!(srv.sessions, 2, "{srv:?}");
    assert_eq!(sum.counters.gaps, 0, "{sum:?}");
}

/// A source that announces a DATA frame longer than its ring's geometry allows (a fixed
/// ring of 32-byte slots, a 64 MiB frame): the mirror ends the connection with a protocol
/// error from the header alone, without growing its buffer or waiting for the payload;
/// with `--once` that is an error.
/// (A longer frame that the geometry allows, one big blob, grows the buffer: replica_blob.)
#[test]
fn a_frame_longer_than_the_geometry_allows_ends_the_connection() {
    use std::io::Read;
    let dst = ShmPath::new("hostile-long");
    let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let mut mo = MirrorOptions::new(listener.local_addr().unwrap(), dst.path());
    mo.start = Start::Oldest;
    mo.once = true;
    mo.log = false;
    let fake = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut hello = [0u8; 32];
        s.read_exact(&mut hello).unwrap();
        s.write_all(&geometry_frame(64, 0)).unwrap();
        let mut out = vec![0u8; 256];
        let n = HeaderRepr {
            kind: Kind::Data,
            flags: 0,
            count: 1,
            len: 64 << 20,
            seq: 1,
        }
        .emit(&mut out)
        .unwrap();
        s.write_all(&out[..n]).unwrap();
        // Hold the connection open: the mirror, not this side, must close it (a mirror
        // waiting for the 64 MiB would leave this read to time out).
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        matches!(s.read(&mut out), Ok(0))
    });
    let stop = AtomicBool::new(false);
    // A protocol error: --once fails, naming the source and the frame (spec §26.2).
    let msg = mirror::run(&mo, &stop).unwrap_err().to_string();
    assert!(fake.join().unwrap(), "the mirror kept the connection open");
    assert!(msg.contains(&mo.source.to_string()), "{msg}");
    assert!(msg.contains("67108864"), "{msg}");
    let m = ReadOnlyRing::open(dst.path()).unwrap();
    assert_eq!(m.write_seq(), 0);
}

/// A fake source on loopback for `conns` connections: reads each one's HELLO, writes
/// `reply`, then stays silent until the mirror closes the connection (or 10 s pass).
/// The thread returns how many connections the mirror closed itself.
fn fake_source(reply: Vec<u8>, conns: usize) -> (SocketAddr, std::thread::JoinHandle<usize>) {
    use std::io::Read;
    let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let mut closed = 0;
        for _ in 0..conns {
            let (mut s, _) = listener.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut hello = [0u8; 32];
            s.read_exact(&mut hello).unwrap();
            s.write_all(&reply).unwrap();
            let mut buf = [0u8; 256];
            // Anything the mirror sends (nothing, in TCP mode) until it closes.
            loop {
                match s.read(&mut buf) {
                    Ok(0) => {
                        closed += 1;
                        break;
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        }
        closed
    });
    (addr, h)
}

/// A scripted unicast source's side of the handshake: its UDP socket on loopback (reads
/// time out after 10 s), its session byte, and the GEOMETRY frame (64 slots, UDP follows)
/// with the MULTICAST frame that sends the mirror to that socket.
fn unicast_source_reply() -> (UdpSocket, u8, Vec<u8>) {
    use ringwire::core::wire::{GEOMETRY_UDP_FOLLOWS, MulticastRepr};
    let udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    udp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let session = 0x5C;
    let mut reply = geometry_frame(64, GEOMETRY_UDP_FOLLOWS);
    let mut mc = [0u8; 32];
    let n = MulticastRepr {
        group: [0; 4],
        port: udp.local_addr().unwrap().port(),
        mtu: 1472,
        ttl: 0,
        session,
        token: 1,
    }
    .emit(&mut mc)
    .unwrap();
    reply.extend_from_slice(&mc[..n]);
    (udp, session, reply)
}

/// Unicast DATA with the session's byte from another address than the one the mirror
/// punched (a scripted source, so the mirror's port is known from its PUNCH): dropped,
/// counted as wrong-source (and warned about once), while the real datagrams are applied.
#[test]
fn unicast_datagrams_from_another_address_are_dropped_and_counted() {
    use ringwire::core::wire::DataRepr;
    let dst = ShmPath::new("hostile-u-dst");
    let (udp, session, reply) = unicast_source_reply();
    let (addr, fake) = fake_source(reply, 1);
    let mut mo = MirrorOptions::new(addr, dst.path());
    mo.start = Start::Oldest;
    mo.unicast = true;
    let stop = AtomicBool::new(false);
    let sum = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let m = sc.spawn(|| mirror::run(&mo, &stop));
        let mut punch = [0u8; 64];
        let (len, mirror_at) = udp.recv_from(&mut punch).unwrap();
        assert_eq!((len, punch[0], punch[1]), (16, Kind::Punch as u8, session));
        let data = |seq: u64, fill: Option<u8>| {
            let mut recs = payload(seq).to_vec();
            if let Some(b) = fill {
                recs.fill(b);
            }
            let mut f = vec![0u8; 16 + LEN];
            DataRepr {
                flags: session,
                seq,
                count: 1,
                records: &recs,
            }
            .emit(&mut f)
            .unwrap();
            f
        };
        let stranger = UdpSocket::bind((Ipv4Addr::new(127, 0, 0, 2), 0)).unwrap();
        for seq in 1..=3 {
            stranger.send_to(&data(seq, Some(0xEE)), mirror_at).unwrap();
            udp.send_to(&data(seq, None), mirror_at).unwrap();
        }
        wait_until("the mirror to write 3", Duration::from_secs(10), || {
            ReadOnlyRing::open(dst.path()).is_ok_and(|r| r.write_seq() >= 3)
        });
        stop.store(true, Ordering::Relaxed);
        m.join().unwrap().unwrap()
    });
    assert_eq!(fake.join().unwrap(), 1);
    assert_mirror_exact(dst.path(), 3);
    assert_eq!(sum.counters.udp_wrong_source, 3, "{sum:?}");
    assert!(sum.counters.garbage_dropped >= 3, "{sum:?}");
}

/// A heartbeat datagram far ahead of what the source has (the session's byte, from the
/// source's own UDP port: a confused source, or anyone who can send as it) makes the mirror
/// NAK the records it claims. The source has none of them and answers nothing (spec §20.4),
/// and the mirror repeated that NAK every 20 ms for as long as it ran (about 100 in the 2 s
/// watched here). Now its repeats back off after 8 unanswered sends (at most 14 in 2 s),
/// the NAK is counted as unanswered, and records that arrive meanwhile are written. The
/// source's position the mirror reports (`MirrorProgress`, the progress line's lag) comes
/// back to what the source backed up (3): it stayed at 2^40 for the rest of the connection.
#[test]
fn a_far_ahead_heartbeat_the_source_cannot_answer_is_not_naked_for_ever() {
    use ringwire::core::wire::{DataRepr, HeartbeatRepr, NakRepr};
    use std::io::Read;
    let dst = ShmPath::new("hostile-far-hb-dst");
    let (udp, session, reply) = unicast_source_reply();
    let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let mut mo = MirrorOptions::new(listener.local_addr().unwrap(), dst.path());
    mo.start = Start::Oldest;
    mo.unicast = true;
    mo.log = false;
    let data = |seq: u64, count: u16| {
        let recs: Vec<u8> = (seq..seq + u64::from(count)).flat_map(payload).collect();
        let mut f = vec![0u8; 16 + recs.len()];
        DataRepr {
            flags: session,
            seq,
            count,
            records: &recs,
        }
        .emit(&mut f)
        .unwrap();
        f
    };
    let heartbeat = |seq: u64| {
        let mut f = [0u8; 16];
        HeartbeatRepr {
            flags: session,
            seq,
        }
        .emit(&mut f)
        .unwrap();
        f
    };
    let stop = AtomicBool::new(false);
    let progress = mirror::MirrorProgress::new();
    let (naks, sum) = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let m = sc.spawn(|| mirror::run_observed(&mo, &stop, Some(&progress)));
        let (mut c, _) = listener.accept().unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut hello = [0u8; 32];
        c.read_exact(&mut hello).unwrap();
        c.write_all(&reply).unwrap();
        let mut punch = [0u8; 64];
        let (len, mirror_at) = udp.recv_from(&mut punch).unwrap();
        assert_eq!((len, punch[0], punch[1]), (16, Kind::Punch as u8, session));
        udp.send_to(&data(1, 1), mirror_at).unwrap();
        wait_until("the mirror to write 1", Duration::from_secs(10), || {
            ReadOnlyRing::open(dst.path()).is_ok_and(|r| r.write_seq() >= 1)
        });
        udp.send_to(&heartbeat(1 << 40), mirror_at).unwrap();
        // 2 s of what the mirror sends over TCP; a heartbeat for what it has every 100 ms
        // (no silence timeout), records 2..=3 at 1 s.
        c.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let t0 = std::time::Instant::now();
        let (mut buf, mut naks) = (Vec::new(), Vec::new());
        let (mut beats, mut more) = (0u32, false);
        while t0.elapsed() < Duration::from_secs(2) {
            if t0.elapsed() >= Duration::from_millis(100) * beats {
                beats += 1;
                let to = if more { 3 } else { 1 };
                udp.send_to(&heartbeat(to), mirror_at).unwrap();
            }
            if !more && t0.elapsed() >= Duration::from_secs(1) {
                more = true;
                udp.send_to(&data(2, 2), mirror_at).unwrap();
            }
            let mut b = [0u8; 256];
            match c.read(&mut b) {
                Ok(0) => panic!("the mirror closed the connection"),
                Ok(n) => buf.extend_from_slice(&b[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => panic!("read: {e}"),
            }
            while buf.len() >= 24 {
                let f = ringwire::core::wire::Frame::new_checked(&buf[..24]).unwrap();
                assert_eq!(f.kind(), Some(Kind::Nak));
                naks.push(NakRepr::parse(&f).unwrap());
                buf.drain(..24);
            }
        }
        wait_until("the mirror to write 3", Duration::from_secs(10), || {
            ReadOnlyRing::open(dst.path()).is_ok_and(|r| r.write_seq() >= 3)
        });
        // The source's position shown is what it backed up (3), not the claim (2^40).
        wait_until(
            "the source's position back at 3",
            Duration::from_secs(5),
            || progress.snapshot().source_seq == Some(3),
        );
        stop.store(true, Ordering::Relaxed);
        (naks, m.join().unwrap().unwrap())
    });
    assert!(
        naks.first()
            .is_some_and(|k| (k.from, k.to) == (2, 2 + 65_534)),
        "{naks:?}"
    );
    assert!(
        (2..=20).contains(&naks.len()),
        "{} NAKs in 2 s: {naks:?}",
        naks.len()
    );
    assert_eq!(sum.counters.naks_unanswered, 1, "{sum:?}");
    assert_mirror_exact(dst.path(), 3);
}

fn once_options(addr: SocketAddr, path: &Path) -> MirrorOptions {
    let mut mo = MirrorOptions::new(addr, path);
    mo.start = Start::Oldest;
    mo.once = true;
    mo.log = false;
    mo
}

/// A DATA frame of one record (24 bytes of 7) at `seq`, for the 32-byte slots of
/// [`geometry_frame`]'s ring.
fn one_record(seq: u64) -> Vec<u8> {
    let mut f = vec![0u8; 16 + 24];
    ringwire::core::wire::DataRepr {
        flags: 0,
        seq,
        count: 1,
        records: &[7u8; 24],
    }
    .emit(&mut f)
    .unwrap();
    f
}

/// `--once` against a source that breaks the protocol (a GEOMETRY whose capacity is not a
/// power of two; a frame of unknown kind after a good GEOMETRY; a second GEOMETRY; DATA
/// before GEOMETRY; an HTTP server's reply) fails, naming the source and the error (spec
/// §26.2: a mirror error exits 1), instead of returning Ok.
#[test]
fn once_fails_on_a_protocol_error_naming_the_source() {
    let unknown_kind = {
        let mut v = geometry_frame(64, 0);
        // kind 99, flags 0, count 0, len 0, seq 1
        v.extend_from_slice(&[99, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
        v
    };
    // A second GEOMETRY after records: named with its seq and what the mirror takes then
    // (it said only "unexpected GEOMETRY frame").
    let mut again = geometry_frame(64, 0);
    again[8..16].copy_from_slice(&77u64.to_le_bytes());
    let second_geometry = [geometry_frame(64, 0), one_record(1), again].concat();
    // DATA where GEOMETRY must come first.
    let early_data = one_record(5);
    for (tag, reply, want) in [
        ("cap3", geometry_frame(3, 0), "not a power of two"),
        ("kind99", unknown_kind, "unknown frame kind 99"),
        (
            "geometry2",
            second_geometry,
            "unexpected GEOMETRY frame (seq 77): expected DATA, GAP or HEARTBEAT",
        ),
        (
            "early",
            early_data,
            "unexpected DATA frame (seq 5): expected GEOMETRY",
        ),
        // Another protocol's reply: its bytes read as a frame header of an 825,110,831-byte
        // payload, named as what it most likely is.
        (
            "http",
            b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n".to_vec(),
            "protocol error before GEOMETRY (not a replication source?): frame payload of \
             825110831 bytes",
        ),
    ] {
        let dst = ShmPath::new(&format!("hostile-proto-{tag}"));
        let (addr, fake) = fake_source(reply, 1);
        let stop = AtomicBool::new(false);
        let t0 = std::time::Instant::now();
        let e = mirror::run(&once_options(addr, dst.path()), &stop).unwrap_err();
        let msg = e.to_string();
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "{tag}: took {:?}",
            t0.elapsed()
        );
        assert!(msg.contains(&addr.to_string()), "{tag}: {msg}");
        assert!(msg.contains(want), "{tag}: {msg}");
        assert_eq!(
            fake.join().unwrap(),
            1,
            "{tag}: the mirror kept the connection open"
        );
    }
}

/// A MULTICAST frame announcing UDP port 0 (for unicast: the port to PUNCH; for a group:
/// the port to bind) is a protocol error naming it. It was accepted: the mirror's PUNCHes
/// to port 0 failed unseen, or it bound a random port for the group, and it waited for
/// datagrams that could never come until its silence timeout blamed a silent source.
#[test]
fn a_multicast_frame_announcing_port_0_is_a_protocol_error() {
    for (tag, group, unicast) in [("u", [0; 4], true), ("m", [239, 255, 77, 1], false)] {
        let dst = ShmPath::new(&format!("hostile-port0-{tag}"));
        let (addr, fake) = fake_source(udp_handshake(0, group, 0), 1);
        let mut mo = once_options(addr, dst.path());
        mo.unicast = unicast;
        let stop = AtomicBool::new(false);
        let t0 = std::time::Instant::now();
        let e = mirror::run(&mo, &stop).unwrap_err();
        let msg = e.to_string();
        assert!(
            t0.elapsed() < Duration::from_secs(4),
            "{tag}: took {:?}: {msg}",
            t0.elapsed()
        );
        assert!(msg.contains("UDP port 0"), "{tag}: {msg}");
        assert_eq!(fake.join().unwrap(), 1, "{tag}: the connection was kept");
    }
}

/// A MULTICAST frame the mirror does not expect (before GEOMETRY, or after one that does
/// not announce UDP delivery) fails as an unexpected frame, and no UDP socket is opened for
/// it. It was acted on first: the mirror bound a socket, joined the group and logged
/// "multicast …" or "unicast from source port …", so a group that cannot be joined here
/// was reported as the error instead of the source's protocol violation.
#[test]
fn an_unexpected_multicast_frame_opens_no_socket() {
    use ringwire::core::wire::MulticastRepr;
    // A port another socket holds: a mirror that tried to join the group there would fail
    // with the bind's error instead of the source's protocol violation.
    let held = hold_udp_port(0);
    let mut mc = [0u8; 32];
    let n = MulticastRepr {
        group: [239, 255, 77, 2],
        port: held.local_addr().unwrap().port(),
        mtu: 1472,
        ttl: 1,
        session: 7,
        token: 0,
    }
    .emit(&mut mc)
    .unwrap();
    let mc = mc[..n].to_vec();
    let before = [mc.clone(), geometry_frame(64, 0)].concat();
    let unannounced = [geometry_frame(64, 0), mc].concat();
    for (tag, reply) in [("before", before), ("unannounced", unannounced)] {
        let dst = ShmPath::new(&format!("hostile-mc-{tag}"));
        let (addr, fake) = fake_source(reply, 1);
        let mo = once_options(addr, dst.path());
        let stop = AtomicBool::new(false);
        let e = mirror::run(&mo, &stop).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("unexpected MULTICAST frame"), "{tag}: {msg}");
        assert_eq!(fake.join().unwrap(), 1, "{tag}: the connection was kept");
    }
}

/// Holds the one session of `server` (at `max_sessions` 1): a connection that sends HELLO,
/// then reads nothing, once the server counts it.
fn hold_the_session(server: &Server) -> TcpStream {
    let mut hello = [0u8; 64];
    let k = HelloRepr { seq: 0, flags: 0 }.emit(&mut hello).unwrap();
    let mut c = TcpStream::connect(server.local_addr()).unwrap();
    c.write_all(&hello[..k]).unwrap();
    wait_until("the first session", Duration::from_secs(10), || {
        server.summary().sessions >= 1
    });
    c
}

/// A server at its session limit refuses a mirror by closing the connection before
/// GEOMETRY: `--once` fails with a message that says so, and no ring is created.
#[test]
fn once_fails_when_the_server_refuses_it() {
    let (src, _ring, _prod) = source("hostile-refused-src");
    let dst = ShmPath::new("hostile-refused-dst");
    let mut so = quiet_serve(&src);
    so.max_sessions = 1;
    let server = Server::bind(so).unwrap();
    let addr = server.local_addr();
    let stop = AtomicBool::new(false);
    let r = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let s = sc.spawn(|| server.run(&stop));
        let first = hold_the_session(&server);
        let r = mirror::run(&once_options(addr, dst.path()), &AtomicBool::new(false));
        stop.store(true, Ordering::Relaxed);
        drop(first);
        s.join().unwrap().unwrap();
        r
    });
    let msg = r.unwrap_err().to_string();
    assert!(msg.contains(&addr.to_string()), "{msg}");
    assert!(msg.contains("before GEOMETRY"), "{msg}");
    assert!(
        ReadOnlyRing::open(dst.path()).is_err(),
        "a ring was created"
    );
    assert_eq!(server.summary().refused, 1);
}

/// A mirror started with `--from N` or `--from latest` while the source cannot serve it yet
/// (a server at its session limit refuses it; a source not up yet refuses the connect)
/// starts where it was asked to once the source does: the start switches to resume only
/// once a connection of the run has made the mirror ring. It switched after the first
/// failed attempt, and a resume without a ring asks for the oldest record: `--from 300`
/// mirrored records 1..=500, and `--from latest` the source's whole history, without a word.
#[test]
fn the_start_asked_for_holds_until_a_handshake() {
    for (tag, start, first) in [
        ("seq", Start::Sequence(300), 300),
        ("latest", Start::Latest, 501),
    ] {
        let (src, _ring, mut prod) = source(&format!("hostile-start-{tag}-src"));
        let dst = ShmPath::new(&format!("hostile-start-{tag}-dst"));
        publish(&mut prod, 500);
        let mut so = quiet_serve(&src);
        so.max_sessions = 1;
        let server = Server::bind(so).unwrap();
        let addr = server.local_addr();
        let mut mo = MirrorOptions::new(addr, dst.path());
        mo.start = start;
        mo.reconnect = Duration::from_millis(20);
        mo.log = false;
        let stop = AtomicBool::new(false);
        let mstop = AtomicBool::new(false);
        std::thread::scope(|sc| {
            let _stop = SetOnDrop(&stop);
            let _mstop = SetOnDrop(&mstop);
            let s = sc.spawn(|| server.run(&stop));
            // So that the mirror is refused before GEOMETRY.
            let first_conn = hold_the_session(&server);
            let m = sc.spawn(|| mirror::run(&mo, &mstop));
            wait_until("the mirror refused twice", Duration::from_secs(10), || {
                server.summary().refused >= 2
            });
            assert!(
                ReadOnlyRing::open(dst.path()).is_err(),
                "{tag}: a ring was created"
            );
            // The session ends at its next write (a heartbeat) after the reset.
            drop(first_conn);
            if start == Start::Latest {
                // Published once the mirror is live: only these are new to it.
                wait_until("the mirror ring", Duration::from_secs(10), || {
                    ReadOnlyRing::open(dst.path()).is_ok()
                });
                for seq in 501..=600 {
                    assert_eq!(prod.push(&payload(seq)), Ok(seq));
                }
            }
            let last = if start == Start::Latest { 600 } else { 500 };
            wait_until("the mirror to catch up", Duration::from_secs(20), || {
                ReadOnlyRing::open(dst.path()).is_ok_and(|r| r.write_seq() >= last)
            });
            mstop.store(true, Ordering::Relaxed);
            m.join().unwrap().unwrap();
            stop.store(true, Ordering::Relaxed);
            s.join().unwrap().unwrap();
            let r = ReadOnlyRing::open(dst.path()).unwrap();
            let mut b = vec![0u8; r.geometry().record_len()];
            for seq in 1..=last {
                let got = r.read_slot(seq, &mut b);
                if seq < first {
                    assert_ne!(got, SlotRead::Ok, "{tag}: record {seq} mirrored");
                } else {
                    assert_eq!(got, SlotRead::Ok, "{tag}: record {seq}");
                    assert_eq!(&b[..LEN], &payload(seq), "{tag}: bytes of {seq}");
                }
            }
        });
    }
}

/// A source that accepts the connection and never sends GEOMETRY: `--once` fails at the
/// handshake deadline instead of waiting forever, and closes the connection.
#[test]
fn once_fails_when_the_source_never_sends_geometry() {
    let dst = ShmPath::new("hostile-nogeo");
    let (addr, fake) = fake_source(Vec::new(), 1);
    let mut mo = once_options(addr, dst.path());
    mo.handshake_timeout = Duration::from_millis(300);
    let t0 = std::time::Instant::now();
    let e = mirror::run(&mo, &AtomicBool::new(false)).unwrap_err();
    let dt = t0.elapsed();
    let msg = e.to_string();
    assert!(dt >= Duration::from_millis(300), "{dt:?}");
    assert!(dt < Duration::from_secs(3), "{dt:?}");
    assert!(msg.contains(&addr.to_string()), "{msg}");
    assert!(msg.contains("no GEOMETRY"), "{msg}");
    assert_eq!(
        fake.join().unwrap(),
        1,
        "the mirror kept the connection open"
    );
}

/// A source that sends GEOMETRY and then nothing at all (no DATA, no HEARTBEAT): the
/// mirror gives up at the silence deadline: with `--once` with an error, otherwise it
/// closes the connection and reconnects.
#[test]
fn a_source_silent_after_the_handshake_is_given_up() {
    let dst = ShmPath::new("hostile-silent-once");
    let (addr, fake) = fake_source(geometry_frame(64, 0), 1);
    let mut mo = once_options(addr, dst.path());
    mo.silence_timeout = Duration::from_millis(300);
    let t0 = std::time::Instant::now();
    let msg = mirror::run(&mo, &AtomicBool::new(false))
        .unwrap_err()
        .to_string();
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    assert!(msg.contains(&addr.to_string()), "{msg}");
    assert!(msg.contains("nothing from the source"), "{msg}");
    assert_eq!(fake.join().unwrap(), 1);
    // The mirror ring was created at the handshake.
    assert!(ReadOnlyRing::open(dst.path()).is_ok());

    // Without --once: closed, then a new connection (which resumes).
    let dst = ShmPath::new("hostile-silent-again");
    let (addr, fake) = fake_source(geometry_frame(64, 0), 2);
    let mut mo = once_options(addr, dst.path());
    mo.once = false;
    mo.silence_timeout = Duration::from_millis(200);
    mo.reconnect = Duration::from_millis(10);
    let stop = AtomicBool::new(false);
    let sum = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let m = sc.spawn(|| mirror::run(&mo, &stop));
        let closed = fake.join().unwrap();
        stop.store(true, Ordering::Relaxed);
        assert_eq!(
            closed, 2,
            "the mirror did not close both silent connections"
        );
        m.join().unwrap().unwrap()
    });
    assert!(sum.connections >= 2, "{sum:?}");
}

/// A UDP-mode source whose datagrams never reach the mirror (multicast not routed here, a
/// unicast source its PUNCHes do not reach) while its TCP connection is up: the silence
/// timeout names the UDP path the records and heartbeats were to come by. It said only
/// "nothing from the source", of a source whose TCP connection was fine.
#[test]
fn a_udp_session_that_hears_nothing_names_its_udp_path() {
    // The unicast source's UDP port: PUNCHes arrive there and are never answered.
    let punched = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let uport = punched.local_addr().unwrap().port();
    let mport = ringwire_tests::replica::free_udp_port();
    for (tag, group, port, want) in [
        (
            "m",
            [239, 255, 77, 3],
            mport,
            format!("UDP multicast 239.255.77.3:{mport}"),
        ),
        (
            "u",
            [0; 4],
            uport,
            format!("UDP unicast from 127.0.0.1:{uport}"),
        ),
    ] {
        let dst = ShmPath::new(&format!("hostile-udp-silent-{tag}"));
        let (addr, fake) = fake_source(udp_handshake(0, group, port), 1);
        let mut mo = once_options(addr, dst.path());
        mo.unicast = tag == "u";
        mo.silence_timeout = Duration::from_millis(300);
        let msg = mirror::run(&mo, &AtomicBool::new(false))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("nothing from the source"), "{tag}: {msg}");
        assert!(msg.contains(&want), "{tag}: {msg}");
        assert_eq!(fake.join().unwrap(), 1, "{tag}");
    }
}

/// A fake source that answers the HELLO with the GEOMETRY of a ring of `capacity` slots
/// of `element_size` bytes, then writes `chunk(i)` for i = 0, 1, … until the mirror hangs up
/// (or 60 s pass).
fn flooding_source(
    capacity: u64,
    element_size: u32,
    chunk: impl Fn(u64) -> Vec<u8> + Send + 'static,
) -> (SocketAddr, std::thread::JoinHandle<()>) {
    use ringwire::core::wire::GeometryRepr;
    use std::io::Read;
    let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_write_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut hello = [0u8; 32];
        s.read_exact(&mut hello).unwrap();
        let mut g = [0u8; 64];
        let n = GeometryRepr {
            flags: 0,
            seq: 1,
            capacity,
            element_size,
            ring_flags: 0x11,
            schema_sig: 0,
            registry_count: 0,
            slots_offset: 128,
            arena_offset: 0,
            arena_size: 0,
        }
        .emit(&mut g)
        .unwrap();
        s.write_all(&g[..n]).unwrap();
        let t0 = std::time::Instant::now();
        let mut i = 0;
        while t0.elapsed() < Duration::from_secs(60) && s.write_all(&chunk(i)).is_ok() {
            i += 1;
        }
    });
    (addr, h)
}

/// Runs a mirror (from the oldest record, no log) of the source at `addr` into `dst` on a
/// thread of its own, not scoped: a mirror that does not stop fails a test instead of
/// hanging it. Returns its stop flag and where its result comes.
fn unscoped_mirror(
    addr: SocketAddr,
    dst: &Path,
) -> (
    std::sync::Arc<AtomicBool>,
    std::sync::mpsc::Receiver<Result<mirror::MirrorSummary, String>>,
) {
    let mut mo = MirrorOptions::new(addr, dst);
    mo.start = Start::Oldest;
    mo.log = false;
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let m_stop = std::sync::Arc::clone(&stop);
    std::thread::spawn(move || {
        let _ = tx.send(mirror::run(&mo, &m_stop).map_err(|e| e.to_string()));
    });
    (stop, rx)
}

/// Sets `stop` and returns the mirror's summary, failing if it takes more than 30 s.
fn stopped_within_30s(
    stop: &AtomicBool,
    rx: &std::sync::mpsc::Receiver<Result<mirror::MirrorSummary, String>>,
) -> mirror::MirrorSummary {
    stop.store(true, Ordering::Relaxed);
    rx.recv_timeout(Duration::from_secs(30))
        .expect("the mirror did not stop within 30 s")
        .unwrap()
}

/// A source that floods the mirror with DATA frames of zero-sized records, 65,535 records in
/// 16 bytes: the mirror still sees its stop flag (and its timers, its UDP socket) within a
/// bounded time. Its reads were bounded by bytes only (1 MiB a pass), and a pass of such
/// frames was 4.3 billion slot writes: stopped after two seconds of flood, the debug build
/// returned after 492 s.
#[test]
fn a_flood_of_zero_sized_records_leaves_the_mirror_stoppable() {
    use ringwire::core::wire::{HeaderRepr, Kind};
    const FRAMES: u64 = 4096;
    let (addr, source) = flooding_source(8, 8, |i| {
        let mut chunk = vec![0u8; 16 * FRAMES as usize];
        for (k, f) in (0..).zip(chunk.chunks_mut(16)) {
            HeaderRepr {
                kind: Kind::Data,
                flags: 0,
                count: u16::MAX,
                len: 0,
                seq: 1 + (i * FRAMES + k) * u64::from(u16::MAX),
            }
            .emit(f)
            .unwrap();
        }
        chunk
    });
    let dst = ShmPath::new("hostile-zero-flood");
    let (stop, rx) = unscoped_mirror(addr, dst.path());
    wait_until("the flood to be written", Duration::from_secs(20), || {
        ReadOnlyRing::open(dst.path()).is_ok_and(|r| r.write_seq() > 0)
    });
    let sum = stopped_within_30s(&stop, &rx);
    assert!(sum.counters.records_written > 0, "{sum:?}");
    source.join().unwrap();
}

/// A source whose DATA goes backwards frame after frame (3, 1, 3, 1, …): each is a restart
/// (spec §21.3) and recreates the mirror ring, 32 MiB here; the mirror still sees its stop
/// flag within a bounded time. A pass of the loop was bounded by bytes only, and 1 MiB of
/// such frames was 13,000 ring creations: stopped after two seconds, the debug build
/// returned after 403 s.
#[test]
fn a_source_that_keeps_going_backwards_leaves_the_mirror_stoppable() {
    let (addr, source) = flooding_source(1 << 20, 32, |_| {
        [3, 1]
            .repeat(500)
            .into_iter()
            .flat_map(one_record)
            .collect()
    });
    let dst = ShmPath::new("hostile-backwards");
    let (stop, rx) = unscoped_mirror(addr, dst.path());
    // A restart replaces the ring file: another inode at the path.
    let inode = || {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(dst.path()).map(|m| m.ino()).ok()
    };
    wait_until("the mirror ring", Duration::from_secs(20), || {
        inode().is_some()
    });
    let first = inode();
    wait_until("a restart", Duration::from_secs(20), || {
        inode().is_some_and(|i| Some(i) != first)
    });
    let sum = stopped_within_30s(&stop, &rx);
    assert!(sum.counters.restarts >= 1, "{sum:?}");
    source.join().unwrap();
}

/// A frame longer than the mirror's stream buffer but within what the ring's geometry allows
/// (a long blob) grows the buffer and reconnects at once, without the reconnect pause. It
/// grew to that frame's length, so a source announcing a frame a little longer on each
/// connection had the mirror reconnect at once, again and again, for as long as it liked;
/// now the buffer grows to the longest frame the ring can need, and the next connection's
/// longer frame fits it. (Here the reconnect pause is an hour: a third connection soon after
/// the second is one made at once.)
#[test]
fn a_stream_buffer_grows_once_to_the_rings_longest_frame() {
    use ringwire::core::wire::{GeometryRepr, HeaderRepr, Kind};
    use std::io::Read;
    let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    // A blob ring with a 64 MiB arena: frames up to 64 MiB and a bit.
    let geometry = GeometryRepr {
        flags: 0,
        seq: 1,
        capacity: 64,
        element_size: 32,
        ring_flags: 0x11,
        schema_sig: 0,
        registry_count: 0,
        slots_offset: 128,
        arena_offset: 128 + 64 * 32,
        arena_size: 64 << 20,
    };
    let dst = ShmPath::new("hostile-grow");
    let mut mo = MirrorOptions::new(addr, dst.path());
    mo.start = Start::Oldest;
    mo.log = false;
    mo.reconnect = Duration::from_secs(3600);
    let stop = AtomicBool::new(false);
    let conns = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let m = sc.spawn(|| mirror::run(&mo, &stop));
        listener.set_nonblocking(true).unwrap();
        let mut conns = 0u32;
        // The first two connections are certain; a third is waited for 3 s.
        let mut last = std::time::Instant::now();
        while conns < 10 && last.elapsed() < Duration::from_secs(if conns < 2 { 20 } else { 3 }) {
            let Ok((mut s, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            };
            conns += 1;
            s.set_nonblocking(false).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut hello = [0u8; 32];
            s.read_exact(&mut hello).unwrap();
            let mut out = [0u8; 80];
            let n = geometry.emit(&mut out).unwrap();
            // DATA of one record whose blob makes it longer than the one before.
            HeaderRepr {
                kind: Kind::Data,
                flags: 0,
                count: 1,
                len: (3 << 20) + conns * 4096,
                seq: 1,
            }
            .emit(&mut out[n..])
            .unwrap();
            s.write_all(&out[..n + 16]).unwrap();
            // The mirror reconnects (a frame too long for it) or waits for the frame's
            // bytes; either way the connection ends with its close.
            drop(s);
            last = std::time::Instant::now();
        }
        stop.store(true, Ordering::Relaxed);
        m.join().unwrap().unwrap();
        conns
    });
    assert_eq!(
        conns,
        2,
        "the mirror reconnected at once {} times",
        conns - 1
    );
}

/// Connections that never send HELLO fill `max_sessions`; a real mirror is refused while
/// they hold it, and once the HELLO deadline has closed them it is accepted and gets every
/// record.
#[test]
fn idle_connections_are_closed_at_the_hello_deadline() {
    let (src, _ring, mut prod) = source("hostile-idle-src");
    let dst = ShmPath::new("hostile-idle-dst");
    publish(&mut prod, 500);
    let mut so = quiet_serve(&src);
    so.max_sessions = 4;
    so.hello_timeout = Duration::from_millis(300);
    let server = Server::bind(so).unwrap();
    let addr = server.local_addr();
    let stop = AtomicBool::new(false);
    let mstop = AtomicBool::new(false);
    let (srv, sum, refused) = std::thread::scope(|sc| {
        // A failed assertion must not leave the scope waiting for these forever.
        let _guards = (SetOnDrop(&stop), SetOnDrop(&mstop));
        let s = sc.spawn(|| server.run(&stop));
        let idle: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(addr).unwrap()).collect();
        wait_until("4 sessions", Duration::from_secs(5), || {
            server.summary().sessions >= 4
        });
        let t0 = std::time::Instant::now();
        // Refused while the idle connections hold every session.
        let refused = mirror::run(&once_options(addr, dst.path()), &AtomicBool::new(false));
        let mut mo = once_options(addr, dst.path());
        mo.once = false;
        mo.reconnect = Duration::from_millis(20);
        let mstop = &mstop;
        let m = sc.spawn(move || mirror::run(&mo, mstop));
        wait_until(
            "the mirror after the deadline",
            Duration::from_secs(5),
            || ReadOnlyRing::open(dst.path()).map_or(0, |r| r.write_seq()) >= 500,
        );
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
        mstop.store(true, Ordering::Relaxed);
        let sum = m.join().unwrap().unwrap();
        stop.store(true, Ordering::Relaxed);
        drop(idle);
        (s.join().unwrap().unwrap(), sum, refused)
    });
    let msg = refused.unwrap_err().to_string();
    assert!(msg.contains("before GEOMETRY"), "{msg}");
    assert_mirror_exact(dst.path(), 500);
    assert_eq!(srv.hello_timeouts, 4, "{srv:?}");
    assert!(srv.refused >= 1, "{srv:?}");
    assert!(sum.connections >= 1, "{sum:?}");
}

/// Reads frames from `s` until `n` records have come in DATA frames (or 5 s pass); returns
/// the GEOMETRY's first sequence and the records' sequences in order.
fn read_records(s: &mut TcpStream, n: u64) -> (u64, Vec<u64>) {
    use std::io::Read;
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let t0 = std::time::Instant::now();
    let mut first = None;
    let mut seqs = Vec::new();
    while (seqs.len() as u64) < n && t0.elapsed() < Duration::from_secs(5) {
        let mut h = [0u8; 16];
        s.read_exact(&mut h).unwrap();
        let count = u16::from_le_bytes([h[2], h[3]]) as u64;
        let len = u32::from_le_bytes(h[4..8].try_into().unwrap()) as usize;
        let seq = u64::from_le_bytes(h[8..16].try_into().unwrap());
        let mut body = vec![0u8; len];
        s.read_exact(&mut body).unwrap();
        match h[0] {
            k if k == Kind::Geometry as u8 => first = Some(seq),
            k if k == Kind::Data as u8 => {
                for (i, rec) in body.chunks(LEN).enumerate() {
                    assert_eq!(rec, payload(seq + i as u64), "record {}", seq + i as u64);
                }
                seqs.extend(seq..seq + count);
            }
            _ => {}
        }
    }
    (first.expect("no GEOMETRY"), seqs)
}

/// A TCP-mode mirror that shuts down its write side right after HELLO (a source never
/// reads after HELLO in TCP mode, spec §19.3) still gets GEOMETRY and every record, and
/// heartbeats while idle. When it then really goes away, the server notices at its next
/// write and frees the session: with `max_sessions` 1, a new mirror is served promptly.
#[test]
fn a_mirror_that_half_closes_after_hello_is_served() {
    let (src, _ring, mut prod) = source("hostile-halfclose-src");
    let dst = ShmPath::new("hostile-halfclose-dst");
    publish(&mut prod, 300);
    let mut so = quiet_serve(&src);
    so.max_sessions = 1;
    let server = Server::bind(so).unwrap();
    let addr = server.local_addr();
    let stop = AtomicBool::new(false);
    let mstop = AtomicBool::new(false);
    let sum = std::thread::scope(|sc| {
        let _guards = (SetOnDrop(&stop), SetOnDrop(&mstop));
        let s = sc.spawn(|| server.run(&stop));
        let mut c = TcpStream::connect(addr).unwrap();
        let mut hello = [0u8; 64];
        let k = HelloRepr {
            seq: u64::MAX,
            flags: 0,
        }
        .emit(&mut hello)
        .unwrap();
        c.write_all(&hello[..k]).unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        let (first, seqs) = read_records(&mut c, 300);
        assert_eq!(first, 1);
        assert_eq!(seqs, (1..=300).collect::<Vec<_>>());
        // Still served after an idle spell, and records published now still come.
        std::thread::sleep(Duration::from_millis(300));
        for seq in 301..=310 {
            prod.push(&payload(seq)).unwrap();
        }
        let mut more = Vec::new();
        while more.len() < 10 {
            use std::io::Read;
            let mut h = [0u8; 16];
            c.read_exact(&mut h).unwrap();
            let len = u32::from_le_bytes(h[4..8].try_into().unwrap()) as usize;
            let mut body = vec![0u8; len];
            c.read_exact(&mut body).unwrap();
            assert!(
                h[0] == Kind::Data as u8 || h[0] == Kind::Heartbeat as u8,
                "kind {}",
                h[0]
            );
            if h[0] == Kind::Data as u8 {
                let seq = u64::from_le_bytes(h[8..16].try_into().unwrap());
                let count = u16::from_le_bytes([h[2], h[3]]) as u64;
                more.extend(seq..seq + count);
            }
        }
        assert_eq!(more, (301..=310).collect::<Vec<_>>());
        // Gone for real: the one session is freed for a new mirror within about a
        // heartbeat interval or two.
        drop(c);
        let t0 = std::time::Instant::now();
        let mut mo = once_options(addr, dst.path());
        mo.once = false;
        mo.reconnect = Duration::from_millis(20);
        let mstop = &mstop;
        let m = sc.spawn(move || mirror::run(&mo, mstop));
        wait_until("the next mirror", Duration::from_secs(5), || {
            ReadOnlyRing::open(dst.path()).map_or(0, |r| r.write_seq()) >= 310
        });
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
        mstop.store(true, Ordering::Relaxed);
        let sum = m.join().unwrap().unwrap();
        stop.store(true, Ordering::Relaxed);
        s.join().unwrap().unwrap();
        sum
    });
    assert_mirror_exact(dst.path(), 310);
    assert!(sum.connections >= 1, "{sum:?}");
}

/// The mirror ring's file is removed while the mirror runs: the mirror stops with an error
/// naming the path within about the 500 ms check, instead of writing on into an inode no
/// reader of the path sees.
#[test]
fn a_removed_mirror_ring_stops_the_mirror() {
    let (src, _ring, mut prod) = source("hostile-orphan-src");
    let dst = ShmPath::new("hostile-orphan-dst");
    publish(&mut prod, 100);
    let so = quiet_serve(&src);
    let server = Server::bind(so).unwrap();
    let addr = server.local_addr();
    let stop = AtomicBool::new(false);
    let mstop = AtomicBool::new(false);
    let mut mo = once_options(addr, dst.path());
    mo.once = false;
    let (r, dt) = std::thread::scope(|sc| {
        let _guards = (SetOnDrop(&stop), SetOnDrop(&mstop));
        let s = sc.spawn(|| server.run(&stop));
        let m = sc.spawn(|| mirror::run(&mo, &mstop));
        wait_until("the mirror", Duration::from_secs(5), || {
            ReadOnlyRing::open(dst.path()).map_or(0, |r| r.write_seq()) >= 100
        });
        std::fs::remove_file(dst.path()).unwrap();
        let t0 = std::time::Instant::now();
        wait_until("the mirror to stop", Duration::from_secs(3), || {
            m.is_finished()
        });
        let dt = t0.elapsed();
        mstop.store(true, Ordering::Relaxed);
        let r = m.join().unwrap();
        stop.store(true, Ordering::Relaxed);
        s.join().unwrap().unwrap();
        (r, dt)
    });
    let msg = r.unwrap_err().to_string();
    assert!(msg.contains(&dst.path().display().to_string()), "{msg}");
    assert!(msg.contains("removed"), "{msg}");
    assert!(dt < Duration::from_secs(2), "{dt:?}");
}

/// A source whose GEOMETRY needs a ring over the mirror's `max_ring_len` (`--max-ring-size`)
/// is refused with an error that names the sizes, with or without `--once` (a ring that
/// cannot be had is fatal, not retried), and nothing is created at the mirror's path.
#[test]
fn a_ring_over_the_mirror_size_limit_is_refused_and_nothing_created() {
    for once in [true, false] {
        let dst = ShmPath::new(&format!("hostile-cap-{once}"));
        // 2^20 slots of 32 bytes: some 40 MiB.
        let (addr, fake) = fake_source(geometry_frame(1 << 20, 0), 1);
        let mut mo = once_options(addr, dst.path());
        mo.once = once;
        mo.max_ring_len = Some(1 << 20);
        let t0 = std::time::Instant::now();
        let e = mirror::run(&mo, &AtomicBool::new(false)).unwrap_err();
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "took {:?}",
            t0.elapsed()
        );
        let msg = e.to_string();
        assert!(
            msg.contains("over this mirror's limit of 1048576 bytes"),
            "{msg}"
        );
        assert!(msg.contains("--max-ring-size"), "{msg}");
        assert_eq!(
            fake.join().unwrap(),
            1,
            "the mirror kept the connection open"
        );
        assert!(!dst.path().exists(), "once={once}: a file was created");
    }
}

/// A mirror ring whose directory is missing (a typo in PATH) is refused before the first
/// connection, naming the directory (as is one this process may not create files in, on a
/// read-only mount or without permission: not tested here, root on a writable file system
/// may create anywhere). A directory that is a file was already refused then, by the open. It was found only at the handshake: with the source down, the mirror retried
/// its connection for ever and never said the path could not work.
#[test]
fn a_ring_path_in_a_directory_it_cannot_create_in_is_refused_before_connecting() {
    let missing = format!("/dev/shm/ringwire-test-no-such-dir-{}", std::process::id());
    let file = ShmPath::new("hostile-dir-is-a-file");
    std::fs::write(file.path(), b"").unwrap();
    let file = file.path().to_str().unwrap();
    for (dir, want) in [
        (
            missing.as_str(),
            format!("its directory {missing}: No such file or directory"),
        ),
        (file, "Not a directory".to_string()),
    ] {
        let path = Path::new(dir).join("mirror");
        // Nobody listens there: the mirror would retry its connection until stopped.
        let mut mo = MirrorOptions::new(ringwire_tests::replica::free_addr(), &path);
        mo.log = false;
        mo.reconnect = Duration::from_millis(50);
        let stop = AtomicBool::new(false);
        let t0 = std::time::Instant::now();
        let r = std::thread::scope(|sc| {
            let _stop = SetOnDrop(&stop);
            let m = sc.spawn(|| mirror::run(&mo, &stop));
            wait_until("the mirror to give up", Duration::from_secs(3), || {
                m.is_finished()
            });
            m.join().unwrap()
        });
        let msg = r.expect_err("refused").to_string();
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
        assert!(msg.contains(dir), "{msg}");
        assert!(msg.contains(&want), "{msg}");
        assert!(!path.exists());
    }
}
