//! Hostile input against the real drivers: datagrams from a wrong address, random bytes,
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
        assert_eq!(p.push(&payload(seq)), seq);
        if seq % 200 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

fn source(tag: &str) -> (ShmPath, RingFile, Producer<FutexWake>) {
    let p = ShmPath::new(tag);
    let geo = Geometry::spmc(CAP, LEN + 8, 8, 0, false).unwrap();
    let ring = RingFile::create(p.path(), &geo, &CreateOptions::default()).unwrap();
    // SAFETY: `ring` outlives the producer built on its view (used only while it lives).
    let prod = Producer::new(*unsafe { ring.view() }, FutexWake).unwrap();
    (p, ring, prod)
}

/// Data frames from a wrong address (forging sequences 1..), random bytes and truncated
/// frames sent to a live multicast mirror: all dropped and counted, nothing corrupted.
#[test]
fn mirror_drops_foreign_random_and_truncated_datagrams() {
    let (src, _ring, mut prod) = source("hostile-m-src");
    let dst = ShmPath::new("hostile-m-dst");
    let port = 30_000 + (std::process::id() % 10_000) as u16;
    let group = SocketAddrV4::new(Ipv4Addr::new(239, 255, 102, 1), port);
    let mut so = ServeOptions::new(src.path(), SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
    so.log = false;
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
            // A well-formed DATA frame with the right session byte, from 127.0.0.2.
            let seq = 1 + i % 50;
            HeaderRepr {
                kind: Kind::Data,
                flags: session,
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
    let mut so = ServeOptions::new(src.path(), SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
    so.log = false;
    so.udp = Some(0);
    so.max_sessions = 4;
    let server = Server::bind(so).unwrap();
    let addr = server.local_addr();
    let udp = server.udp_addr().unwrap();
    let session = server.session_byte();
    let stop = AtomicBool::new(false);
    let (srv, sum) = std::thread::scope(|sc| {
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
    let mut so = ServeOptions::new(src.path(), SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
    so.log = false;
    let server = Server::bind(so).unwrap();
    let addr = server.local_addr();
    let stop = AtomicBool::new(false);
    let n = 4096;
    let (srv, sum) = std::thread::scope(|sc| {
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
            prod.push(&payload(seq));
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
/// error from the header alone, without growing its buffer or waiting for the payload.
/// (A longer frame that the geometry allows, one big blob, grows the buffer: replica_blob.)
#[test]
fn a_frame_longer_than_the_geometry_allows_ends_the_connection() {
    use ringwire::core::wire::GeometryRepr;
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
        let mut out = vec![0u8; 256];
        let g = GeometryRepr {
            flags: 0,
            seq: 1,
            capacity: 64,
            element_size: 32,
            ring_flags: 0x0011,
            schema_sig: 0,
            registry_count: 0,
            slots_offset: 128,
            arena_offset: 0,
            arena_size: 0,
        };
        let n = g.emit(&mut out).unwrap();
        s.write_all(&out[..n]).unwrap();
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
    let sum = mirror::run(&mo, &stop).unwrap();
    assert!(fake.join().unwrap(), "the mirror kept the connection open");
    assert_eq!((sum.connections, sum.last_seq), (1, 0), "{sum:?}");
}
