//! Limits of `ringwire serve` against peers that cost it without being mirrors worth
//! serving: NAKs for everything (answered with at most one NAK's worth, spec §22), a slow
//! reader of such answers while the server stops, a unicast mirror whose PUNCHes stop (its
//! host is gone), mirrors refused at the session limit, which must be told so, and
//! sessions whose frame buffer the process cannot allocate.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ringwire::core::broadcast::{Producer, Wake};
use ringwire::core::replicate::Start;
use ringwire::core::wire::{
    Frame, HELLO_CAN_UNICAST, HELLO_PREFER_UNICAST, HelloRepr, Kind, MulticastRepr, NakRepr,
    PunchRepr,
};
use ringwire::core::{Geometry, RingView};
use ringwire::replica::mirror::{self, MirrorOptions};
use ringwire::replica::serve::{ServeOptions, Server};
use ringwire::{CreateOptions, ReadOnlyRing, RingFile};
use ringwire_tests::replica::SetOnDrop;
use ringwire_tests::shm::ShmPath;
use ringwire_tests::wait_until;

struct FutexWake;
impl Wake for FutexWake {
    fn wake(&self, view: &RingView) {
        ringwire::wait::wake_all(view);
    }
}

/// A source ring of `capacity` records of `len` bytes at `p`, holding records 1..=n.
fn source(p: &ShmPath, capacity: u64, len: usize, n: u64) -> RingFile {
    let geo = Geometry::spmc(capacity, len + 8, 8, 0, false).unwrap();
    let ring = RingFile::create(p.path(), &geo, &CreateOptions::default()).unwrap();
    // SAFETY: `ring` outlives the producer built on its view (used only in this function).
    let mut prod = Producer::new(*unsafe { ring.view() }, FutexWake).unwrap();
    let mut rec = vec![0u8; len];
    for seq in 1..=n {
        rec[..8].copy_from_slice(&seq.to_le_bytes());
        assert_eq!(prod.push(&rec), Ok(seq));
    }
    ring
}

fn quiet_serve(src: &ShmPath) -> ServeOptions {
    let mut so = ServeOptions::new(src.path(), SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
    so.log = false;
    so
}

/// Multicast on loopback, so that sessions answer NAKs; a group and port private to this
/// test process (`k` tells this file's tests apart).
fn with_multicast(mut so: ServeOptions, k: u16) -> ServeOptions {
    let port = 31_000 + (std::process::id() % 10_000) as u16 * 2 + k;
    so.multicast = Some(SocketAddrV4::new(Ipv4Addr::new(239, 255, 103, 1), port));
    so.iface = Some(Ipv4Addr::LOCALHOST);
    so.ttl = 0;
    so
}

/// Reads one frame: (kind byte, header seq, count, payload).
fn read_frame(s: &mut TcpStream) -> std::io::Result<(u8, u64, u16, Vec<u8>)> {
    let mut h = [0u8; 16];
    s.read_exact(&mut h)?;
    let len = u32::from_le_bytes(h[4..8].try_into().unwrap()) as usize;
    let mut body = vec![0u8; len];
    s.read_exact(&mut body)?;
    let count = u16::from_le_bytes([h[2], h[3]]);
    Ok((
        h[0],
        u64::from_le_bytes(h[8..16].try_into().unwrap()),
        count,
        body,
    ))
}

/// Connects, sends HELLO(latest, `flags`) and reads GEOMETRY and MULTICAST.
fn handshake(addr: SocketAddr, flags: u8) -> (TcpStream, MulticastRepr) {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut b = [0u8; 32];
    let n = HelloRepr { seq: 0, flags }.emit(&mut b).unwrap();
    c.write_all(&b[..n]).unwrap();
    let (k, ..) = read_frame(&mut c).unwrap();
    assert_eq!(k, Kind::Geometry as u8);
    let mut m = [0u8; 32];
    c.read_exact(&mut m).unwrap();
    let mc = MulticastRepr::parse(&Frame::new_checked(&m[..]).unwrap()).unwrap();
    (c, mc)
}

fn naks(k: usize, from: u64, to: u64) -> Vec<u8> {
    let mut one = [0u8; 24];
    NakRepr { from, to }.emit(&mut one).unwrap();
    one.repeat(k)
}

/// Sixteen NAK(1, u64::MAX) (384 bytes) on a ring of 100,000 records: the answer is the
/// 65,535 records one NAK may ask for (spec §21.4, §22), once, not the ring sixteen times.
#[test]
fn sixteen_naks_for_everything_get_one_naks_worth() {
    let src = ShmPath::new("limits-naks");
    let _ring = source(&src, 1 << 17, 24, 100_000);
    let server = Server::bind(with_multicast(quiet_serve(&src), 0)).unwrap();
    let stop = AtomicBool::new(false);
    let got = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let s = sc.spawn(|| server.run(&stop));
        let (mut c, _) = handshake(server.local_addr(), 0);
        c.write_all(&naks(16, 1, u64::MAX)).unwrap();
        let mut got = 0u64;
        let mut next = 1;
        while got < 65_535 {
            let (k, seq, count, _) = read_frame(&mut c).unwrap();
            assert_eq!(k, Kind::Data as u8, "only DATA answers these NAKs");
            assert_eq!(seq, next, "records in order, each once");
            next += u64::from(count);
            got += u64::from(count);
        }
        // Nothing more comes: a repeat would be here well within this.
        c.set_read_timeout(Some(Duration::from_millis(700)))
            .unwrap();
        let extra = read_frame(&mut c)
            .ok()
            .map(|(k, seq, count, _)| (k, seq, count));
        assert_eq!(extra, None, "more was sent after one NAK's worth");
        wait_until("the 16 NAKs counted", Duration::from_secs(5), || {
            server.summary().naks >= 16
        });
        stop.store(true, Ordering::Relaxed);
        s.join().unwrap().unwrap();
        got
    });
    assert_eq!(got, 65_535);
    assert_eq!(server.summary().tcp_records, 65_535);
}

/// A peer that asks for everything with big NAKs and then reads their answer slowly
/// (~128 KiB/s, far less than the answer): once `stop` is set, `run` returns promptly
/// instead of finishing the answer frame by frame (each frame may wait up to the 5 s write
/// timeout).
#[test]
fn a_slow_reader_of_nak_answers_does_not_hold_a_stopping_server() {
    let src = ShmPath::new("limits-slow");
    // 60,000 records of 512 bytes: a 30 MiB answer, more than loopback socket buffers hold.
    let _ring = source(&src, 1 << 16, 512, 60_000);
    let server = Server::bind(with_multicast(quiet_serve(&src), 1)).unwrap();
    let stop = AtomicBool::new(false);
    let reader_done = AtomicBool::new(false);
    let read = std::sync::atomic::AtomicU64::new(0);
    let (took, finished) = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let _reader = SetOnDrop(&reader_done);
        let run = sc.spawn(|| server.run(&stop));
        let (mut c, _) = handshake(server.local_addr(), 0);
        c.write_all(&naks(16, 1, u64::MAX)).unwrap();
        let read = &read;
        let reader_done = &reader_done;
        sc.spawn(move || {
            c.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
            let mut b = [0u8; 4096];
            while !reader_done.load(Ordering::Relaxed) {
                match c.read(&mut b) {
                    Ok(0) => break,
                    Ok(n) => {
                        read.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    Err(_) => break,
                }
                std::thread::sleep(Duration::from_millis(30));
            }
            // Dropping `c` here ends the session in any case.
        });
        wait_until("the answer under way", Duration::from_secs(10), || {
            read.load(Ordering::Relaxed) >= 64 << 10
        });
        let t0 = Instant::now();
        stop.store(true, Ordering::Relaxed);
        // Bounded: past 2 s the reader goes away, which ends the session by itself.
        while !run.is_finished() && t0.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let took = t0.elapsed();
        let finished = run.is_finished();
        reader_done.store(true, Ordering::Relaxed);
        run.join().unwrap().unwrap();
        (took, finished)
    });
    assert!(finished, "serve still running {took:?} after stop");
    assert!(took < Duration::from_secs(2), "{took:?}");
}

/// A unicast session whose mirror never PUNCHes (its host gone right after the handshake)
/// ends at the punch timeout, and its token with it; one whose mirror keeps punching stays,
/// receives datagrams, and ends once its PUNCHes stop.
#[test]
fn a_unicast_session_ends_when_its_punches_stop() {
    let src = ShmPath::new("limits-punch");
    let _ring = source(&src, 1 << 10, 24, 10);
    let mut so = quiet_serve(&src);
    so.udp = Some(0);
    so.punch_timeout = Duration::from_millis(300);
    let server = Server::bind(so).unwrap();
    let addr = server.local_addr();
    let udp = server.udp_addr().unwrap();
    let session = server.session_byte();
    let stop = AtomicBool::new(false);
    let unicast = HELLO_CAN_UNICAST | HELLO_PREFER_UNICAST;
    std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let s = sc.spawn(|| server.run(&stop));
        // Never punches. The server's timer starts when it sends GEOMETRY, after `t0`.
        let t0 = Instant::now();
        let (mut gone, m) = handshake(addr, unicast);
        assert_ne!(m.token, 0, "a unicast token");
        let mut b = [0u8; 64];
        gone.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let r = gone.read(&mut b);
        assert!(matches!(r, Ok(0)), "the session was not ended: {r:?}");
        let dt = t0.elapsed();
        assert!(dt >= Duration::from_millis(300), "{dt:?}");
        assert_eq!(server.summary().punch_timeouts, 1);

        // Punches every 100 ms for a second (three punch timeouts), then stops.
        let (mut alive, m) = handshake(addr, unicast);
        let u = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        u.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
        let mut p = [0u8; 16];
        PunchRepr {
            session,
            token: m.token,
        }
        .emit(&mut p)
        .unwrap();
        let mut datagrams = 0;
        let t0 = Instant::now();
        let mut punched: Option<Instant> = None;
        let mut d = [0u8; 2048];
        while t0.elapsed() < Duration::from_secs(1) {
            if punched.is_none_or(|t| t.elapsed() >= Duration::from_millis(100)) {
                u.send_to(&p, udp).unwrap();
                punched = Some(Instant::now());
            }
            // Heartbeats every millisecond once punched.
            if let Ok(n) = u.recv(&mut d) {
                datagrams += usize::from(n >= 16);
            }
        }
        assert!(datagrams > 0, "nothing came to the punched address");
        alive.set_nonblocking(true).unwrap();
        let r = alive.read(&mut b);
        assert!(
            matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "a punching mirror's session ended: {r:?}"
        );
        assert_eq!(server.summary().punch_timeouts, 1);
        alive.set_nonblocking(false).unwrap();
        alive
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        let r = alive.read(&mut b);
        assert!(matches!(r, Ok(0)), "not ended once unpunched: {r:?}");
        assert_eq!(server.summary().punch_timeouts, 2);
        stop.store(true, Ordering::Relaxed);
        s.join().unwrap().unwrap();
    });
}

/// A mirror refused at the session limit reads an orderly close before GEOMETRY, which it
/// reports as a refusal, not "Connection reset by peer" (the server used to close the
/// connection with the mirror's HELLO unread, which makes the kernel send a reset).
///
/// Whether the HELLO is in when the server closes is a race, which on loopback the close
/// usually wins. The listener here has TCP_DEFER_ACCEPT, so that a connection is accepted
/// only once its first bytes (the HELLO) are in: the race always goes the bad way.
#[test]
fn a_mirror_refused_at_the_session_limit_is_told_so() {
    use std::os::fd::AsRawFd;
    let src = ShmPath::new("limits-refused");
    let _ring = source(&src, 1 << 10, 24, 10);
    let mut so = quiet_serve(&src);
    so.max_sessions = 1;
    let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let secs: libc::c_int = 5;
    // SAFETY: a valid socket and a c_int option value that outlives the call.
    let r = unsafe {
        libc::setsockopt(
            listener.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_DEFER_ACCEPT,
            (&secs as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(
        r,
        0,
        "TCP_DEFER_ACCEPT: {}",
        std::io::Error::last_os_error()
    );
    let server = Server::with_listener(so, listener).unwrap();
    let addr = server.local_addr();
    let stop = AtomicBool::new(false);
    let msgs = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let s = sc.spawn(|| server.run(&stop));
        // Holds the one session (TCP mode: GEOMETRY and heartbeats, a few bytes).
        let mut first = TcpStream::connect(addr).unwrap();
        let mut b = [0u8; 32];
        let n = HelloRepr { seq: 0, flags: 0 }.emit(&mut b).unwrap();
        first.write_all(&b[..n]).unwrap();
        wait_until("the first session", Duration::from_secs(5), || {
            server.summary().sessions >= 1
        });
        let msgs: Vec<String> = (0..20)
            .map(|i| {
                let dst = ShmPath::new(&format!("limits-refused-{i}"));
                let mut mo = MirrorOptions::new(addr, dst.path());
                mo.start = Start::Oldest;
                mo.once = true;
                mo.log = false;
                let r = mirror::run(&mo, &AtomicBool::new(false));
                assert!(
                    ReadOnlyRing::open(dst.path()).is_err(),
                    "a ring was created"
                );
                r.unwrap_err().to_string()
            })
            .collect();
        stop.store(true, Ordering::Relaxed);
        drop(first);
        s.join().unwrap().unwrap();
        msgs
    });
    for m in &msgs {
        assert!(m.contains("closed the connection before GEOMETRY"), "{m}");
        assert!(!m.contains("reset"), "{m}");
    }
    assert_eq!(server.summary().refused, 20);
}

/// Unicast mirrors that keep punching, ours and ringfire 0.5.2's (every 5 s once heard,
/// spec §21.4), keep their sessions past the punch timeout while the source is idle, and
/// get the next record on the same connection.
#[test]
fn punching_mirrors_ours_and_ringfires_outlive_the_punch_timeout() {
    use ringfire::replication::{Mirror as RfMirror, MirrorStart};
    let src = ShmPath::new("limits-keep-src");
    let ours = ShmPath::new("limits-keep-ours");
    let theirs = ShmPath::new("limits-keep-rf");
    let ring = source(&src, 1 << 10, 24, 1);
    // SAFETY: `ring` outlives the producer built on its view (used only while it lives).
    let mut prod = Producer::new(*unsafe { ring.view() }, FutexWake).unwrap();
    let mut so = quiet_serve(&src);
    so.udp = Some(0);
    // Above the 5 s keep-alive with room for its jitter; the idle spell below spans two.
    so.punch_timeout = Duration::from_secs(7);
    let server = Server::bind(so).unwrap();
    let addr = server.local_addr();
    let stop = AtomicBool::new(false);
    let mstop = AtomicBool::new(false);
    let (rf, sum) = std::thread::scope(|sc| {
        let _guards = (SetOnDrop(&stop), SetOnDrop(&mstop));
        let s = sc.spawn(|| server.run(&stop));
        let mut mo = MirrorOptions::new(addr, ours.path());
        mo.start = Start::Oldest;
        mo.unicast = true;
        mo.log = false;
        let mstop = &mstop;
        let m = sc.spawn(move || mirror::run(&mo, mstop));
        let theirs = theirs.path();
        let rf = sc.spawn(move || {
            let mut mir = RfMirror::builder()
                .start(MirrorStart::Oldest)
                .unicast(true)
                .connect(addr, theirs)
                .unwrap();
            let mut ended = None;
            while !mstop.load(Ordering::Relaxed) {
                match mir.step() {
                    Ok(true) => {}
                    r => {
                        ended = Some(format!("{r:?}"));
                        break;
                    }
                }
            }
            (mir.is_unicast(), mir.sequence(), ended)
        });
        let seq = |p: &ShmPath| ReadOnlyRing::open(p.path()).map_or(0, |r| r.write_seq());
        wait_until("record 1 at both mirrors", Duration::from_secs(10), || {
            seq(&ours) >= 1 && ReadOnlyRing::open(theirs).map_or(0, |r| r.write_seq()) >= 1
        });
        // Idle for longer than the punch timeout: only PUNCHes keep the sessions.
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(11) {
            assert_eq!(server.summary().punch_timeouts, 0);
            std::thread::sleep(Duration::from_millis(100));
        }
        prod.push(&[2u8; 24]).unwrap();
        wait_until("record 2 at both mirrors", Duration::from_secs(10), || {
            seq(&ours) >= 2 && ReadOnlyRing::open(theirs).map_or(0, |r| r.write_seq()) >= 2
        });
        mstop.store(true, Ordering::Relaxed);
        let sum = m.join().unwrap().unwrap();
        let rf = rf.join().unwrap();
        stop.store(true, Ordering::Relaxed);
        s.join().unwrap().unwrap();
        (rf, sum)
    });
    assert_eq!(rf, (true, 2, None), "ringfire's mirror");
    assert_eq!(sum.connections, 1, "our mirror reconnected: {sum:?}");
    let srv = server.summary();
    assert_eq!((srv.punch_timeouts, srv.sessions), (0, 2), "{srv:?}");
}

/// Address-space limit of the `serve` process in
/// [`a_session_buffer_that_cannot_be_allocated_refuses_only_its_session`].
const SERVE_AS_LIMIT: u64 = 1 << 30;

/// A session whose frame buffer cannot be allocated (the buffer of a blob ring's longest
/// record, as long as its arena; here the address space of the `serve` process is limited)
/// ends with an error naming it, and the server goes on serving its other mirrors. The
/// buffer was allocated infallibly: the allocation failure aborted the whole server, every
/// mirror's session with it, on the connection of any peer, before its HELLO.
#[test]
fn a_session_buffer_that_cannot_be_allocated_refuses_only_its_session() {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    const ARENA: usize = 128 << 20;
    let src = ShmPath::new("limits-alloc");
    let mut producer = ringwire::BlobProducer::<u64>::create(src.path(), 64, ARENA).unwrap();
    for n in 1..=3u64 {
        producer.push(&n, &[n as u8; 100]).unwrap();
    }
    let mut cmd = Command::new(ringwire_tests::netns::ringwire_bin());
    cmd.arg("serve")
        .arg(src.path())
        .args(["--bind", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: the closure runs in the forked child before exec and makes one system call,
    // which is async-signal-safe; it touches no memory the parent's threads own.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: SERVE_AS_LIMIT,
                rlim_max: SERVE_AS_LIMIT,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
    let mut child = cmd.spawn().expect("spawn ringwire serve");
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let stderr = child.stderr.take().unwrap();
    let mut child = Kill(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let first = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("serve's first line");
    let addr: SocketAddr = first
        .split(" on tcp ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {first:?}"));
    let hello = |c: &mut TcpStream| {
        let mut h = [0u8; 32];
        let n = HelloRepr {
            seq: u64::MAX,
            flags: 0,
        }
        .emit(&mut h)
        .unwrap();
        c.write_all(&h[..n]).unwrap();
    };
    // More sessions than the address space holds buffers for, each kept open.
    let mut peers = Vec::new();
    for _ in 0..12 {
        let mut c = match TcpStream::connect(addr) {
            Ok(c) => c,
            Err(e) => {
                while let Ok(l) = rx.recv_timeout(Duration::from_secs(1)) {
                    eprintln!("DBG {l}");
                }
                eprintln!("DBG status {:?}", child.0.try_wait());
                panic!("{e}")
            }
        };
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        hello(&mut c);
        peers.push(c);
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        child.0.try_wait().unwrap(),
        None,
        "serve died with its sessions' buffers"
    );
    // The sessions that got a buffer are served; the others were closed before GEOMETRY.
    let mut served = 0;
    for c in &mut peers {
        match read_frame(c) {
            Ok((k, ..)) => {
                assert_eq!(k, Kind::Geometry as u8);
                served += 1;
            }
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof, "{e}"),
        }
    }
    assert!(served >= 1 && served < peers.len(), "{served} served");
    drop(peers);
    let told = std::iter::from_fn(|| rx.recv_timeout(Duration::from_secs(2)).ok())
        .find(|l| l.contains("cannot allocate"));
    let told = told.expect("no line for a refused session");
    assert!(told.contains("frame buffer"), "{told}");
    // A mirror is served once the others' sessions have ended (each learns it on its next
    // write, a heartbeat at the latest) and given back their buffers.
    wait_until("a new mirror served", Duration::from_secs(10), || {
        let mut c = TcpStream::connect(addr).expect("serve is still accepting");
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        hello(&mut c);
        read_frame(&mut c).is_ok_and(|f| f.0 == Kind::Geometry as u8)
    });
    assert_eq!(child.0.try_wait().unwrap(), None);
}
