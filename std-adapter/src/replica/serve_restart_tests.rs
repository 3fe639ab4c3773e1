//! Tests of serve around a ring's life: a replacement that takes long to create, a
//! session at a slot whose overwrite never finished, `--once` across a replacement.

use super::*;
use crate::test_guard::SetOnDrop;
use crate::test_tmp::TmpPath;
use std::io::Write as _;

fn geometry(capacity: u64) -> ringwire_core::Geometry {
    ringwire_core::Geometry::spmc(capacity, 16, 8, 0, false).unwrap()
}

/// A ring at `path` that stays there when dropped (it is renamed to its place).
fn persistent_ring(path: &Path, capacity: u64) -> RingFile {
    let o = crate::CreateOptions {
        cleanup: crate::CleanupMode::Persistent,
        ..Default::default()
    };
    RingFile::create(path, &geometry(capacity), &o).unwrap()
}

/// Publishes `seqs`, each record `tag * 1000 + seq`.
fn publish(ring: &RingFile, tag: u64, seqs: std::ops::RangeInclusive<u64>) {
    for seq in seqs {
        ring.ring()
            .write_slot(seq, &(tag * 1000 + seq).to_le_bytes());
        if ring.ring().publish(seq) {
            ring.wake_all();
        }
    }
}

/// A listener on a loopback port of the kernel's choosing, kept for the server: a port
/// learnt from a listener closed again could be given to another test meanwhile.
fn listener() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").unwrap()
}

/// [`run_following`] on `listener` (as `ReplicaServer` runs it), for the tests that need the
/// address before the server starts.
fn run_following_on(
    listener: TcpListener,
    opts: &ServeOptions,
    stop: &AtomicBool,
    on_replaced: impl FnMut(&Path),
) -> Result<ServeSummary, ReplicaError> {
    follow_from(
        Server::with_listener(opts.clone(), listener)?,
        opts,
        stop,
        on_replaced,
    )
}

fn opts(path: &Path, bind: SocketAddr) -> ServeOptions {
    let mut o = ServeOptions::new(path, bind);
    o.log = false;
    o
}

/// One frame as received: kind, sequence, payload.
type Frame = (u8, u64, Vec<u8>);

/// A raw TCP mirror: connects (retrying for up to 5 s, the server may not listen yet),
/// sends HELLO(oldest) and returns the stream.
fn hello_oldest(addr: SocketAddr) -> TcpStream {
    let t0 = std::time::Instant::now();
    let mut c = loop {
        match TcpStream::connect(addr) {
            Ok(c) => break c,
            Err(e) if t0.elapsed() < StdDuration::from_secs(5) => {
                let _ = e;
                std::thread::sleep(StdDuration::from_millis(20));
            }
            Err(e) => panic!("connect {addr}: {e}"),
        }
    };
    let mut hello = [0u8; 32];
    let k = ringwire_core::wire::HelloRepr {
        seq: ringwire_core::wire::HELLO_OLDEST,
        flags: 0,
    }
    .emit(&mut hello)
    .unwrap();
    std::io::Write::write_all(&mut c, &hello[..k]).unwrap();
    c
}

/// Reads frames from `c` until `done` says so, the stream ends or `within` has passed.
fn read_frames(
    c: &mut TcpStream,
    within: StdDuration,
    done: impl Fn(&[Frame]) -> bool,
) -> Vec<Frame> {
    let t0 = std::time::Instant::now();
    let mut bytes = Vec::new();
    let mut frames = Vec::new();
    let mut b = [0u8; 4096];
    c.set_read_timeout(Some(StdDuration::from_millis(50)))
        .unwrap();
    while !done(&frames) && t0.elapsed() < within {
        match c.read(&mut b) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&b[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
        while bytes.len() >= 16 {
            let len = u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize;
            if bytes.len() < 16 + len {
                break;
            }
            let seq = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
            frames.push((bytes[0], seq, bytes[16..16 + len].to_vec()));
            bytes.drain(..16 + len);
        }
    }
    frames
}

/// The records of the DATA frames in `frames` (16-byte slots: 8-byte records).
fn records(frames: &[Frame]) -> Vec<(u64, u64)> {
    frames
        .iter()
        .filter(|f| f.0 == Kind::Data as u8)
        .flat_map(|(_, seq, p)| {
            p.chunks(8)
                .enumerate()
                .map(move |(i, r)| (seq + i as u64, u64::from_le_bytes(r.try_into().unwrap())))
        })
        .collect()
}

/// A restarted producer's new ring appears at the path as an empty file (spec §1.2: the
/// file is created, then sized and initialised, magic last) and becomes a ring only 2.5 s
/// later, as a multi-GiB ring does (posix_fallocate of 1 GiB on /dev/shm takes 0.6 s). The
/// replacement is seen within 0.5 s; serve used to give up a second after that.
/// Serve waits for it and serves it, instead of giving up after a second; and a stop while
/// it waits for such a ring ends it promptly.
#[test]
fn a_replacement_slow_to_create_is_waited_for() {
    let path = TmpPath::shm("serve-restart-slow");
    let tmp = TmpPath::shm("serve-restart-slow-tmp");
    let a = persistent_ring(path.path(), 64);
    publish(&a, 1, 1..=5);
    let l = listener();
    let addr = l.local_addr().unwrap();
    let so = opts(path.path(), addr);
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let h = sc.spawn(|| run_following_on(l, &so, &stop, |_| {}));
        let mut c = hello_oldest(addr);
        let got = records(&read_frames(&mut c, StdDuration::from_secs(5), |f| {
            records(f).len() >= 5
        }));
        assert_eq!(got, (1..=5).map(|s| (s, 1000 + s)).collect::<Vec<_>>());
        // The new ring's file, not initialised yet.
        std::fs::write(tmp.path(), b"").unwrap();
        std::fs::rename(tmp.path(), path.path()).unwrap();
        std::thread::sleep(StdDuration::from_millis(2500));
        assert!(
            !h.is_finished(),
            "serve gave up: {:?}",
            h.join().unwrap().map(|_| ())
        );
        let b = persistent_ring(tmp.path(), 64);
        publish(&b, 2, 1..=3);
        std::fs::rename(tmp.path(), path.path()).unwrap();
        let mut c = hello_oldest(so.bind);
        let got = records(&read_frames(&mut c, StdDuration::from_secs(5), |f| {
            records(f).len() >= 3
        }));
        assert!(
            !h.is_finished(),
            "serve ended: {:?}",
            h.join().unwrap().map(|_| ())
        );
        assert_eq!(got, (1..=3).map(|s| (s, 2000 + s)).collect::<Vec<_>>());
        // Replaced again by a ring that is never initialised: a stop ends the wait at once.
        std::fs::write(tmp.path(), b"").unwrap();
        std::fs::rename(tmp.path(), path.path()).unwrap();
        std::thread::sleep(StdDuration::from_millis(1500));
        assert!(
            !h.is_finished(),
            "serve gave up: {:?}",
            h.join().unwrap().map(|_| ())
        );
        let t0 = std::time::Instant::now();
        stop.store(true, Ordering::Relaxed);
        let sum = h
            .join()
            .unwrap()
            .expect("a stop while waiting is a clean end");
        assert!(
            t0.elapsed() < StdDuration::from_millis(500),
            "{:?}",
            t0.elapsed()
        );
        assert_eq!(sum.sessions, 1, "the counters of ring B's server: {sum:?}");
        drop((a, b));
    });
}

/// Calls of `wait` made in 100 ms; each should sleep about `max` when nothing can be read.
fn waits_in_100ms(mut wait: impl FnMut()) -> u32 {
    let t0 = std::time::Instant::now();
    let mut n = 0;
    while t0.elapsed() < StdDuration::from_millis(100) {
        wait();
        n += 1;
    }
    n
}

/// On an MPMC-flagged ring a ticket not published yet while a later one is cannot be read:
/// the idle waiters sleep there instead of returning at once (the session loop around them
/// then spun). On a ring with one writer, a published cursor whose slot is being rewritten
/// (its producer died mid-write: the marker stays) is a record lost, which the session
/// passes with a GAP (`a_session_at_a_slot_left_half_written_…`): the waiters return.
#[test]
fn idle_waiters_sleep_at_a_slot_being_rewritten() {
    use ringwire_core::layout::SLOT_WRITING;
    use ringwire_core::sync::Ordering as O;
    let spmc = TmpPath::shm("serve-restart-stuck-wait");
    let mpmc = TmpPath::shm("serve-restart-stuck-wait-mpmc");
    let a = persistent_ring(spmc.path(), 8);
    publish(&a, 1, 1..=20);
    // The producer died writing 21, in the slot of 13.
    a.ring().slot_seq(21).store(SLOT_WRITING, O::Relaxed);
    let geo = ringwire_core::Geometry::mpmc(8, 16, 8).unwrap();
    let b = RingFile::create(mpmc.path(), &geo, &crate::CreateOptions::default()).unwrap();
    // Ticket 2 claimed and never written, 3 published.
    b.ring().slot_seq(2).store(SLOT_WRITING, O::Relaxed);
    b.ring().write_slot(3, &3u64.to_le_bytes());
    b.ring().write_seq().store(3, O::Release);
    // The ring with one writer: something to do at once (pass the lost record).
    let t0 = std::time::Instant::now();
    RingWaiter::new(false, false).wait(a.ring(), 13, StdDuration::from_secs(5));
    PollWait::new(false).wait(a.ring(), 13, StdDuration::from_secs(5));
    assert!(
        t0.elapsed() < StdDuration::from_secs(1),
        "{:?}",
        t0.elapsed()
    );
    let (ring, cursor) = (&b, 2);
    let v = ring.ring();
    let mut f = RingWaiter::new(false, false);
    let n = waits_in_100ms(|| f.wait(v, cursor, StdDuration::from_millis(2)));
    assert!(
        n < 200,
        "futex waiter: {n} waits in 100 ms at cursor {cursor}"
    );
    let mut p = PollWait::new(false);
    let n = waits_in_100ms(|| p.wait(v, cursor, StdDuration::from_millis(2)));
    assert!(
        n < 200,
        "polling waiter: {n} waits in 100 ms at cursor {cursor}"
    );
    // A readable record still ends the wait at once.
    let t0 = std::time::Instant::now();
    f.wait(v, cursor + 1, StdDuration::from_secs(5));
    p.wait(v, cursor + 1, StdDuration::from_secs(5));
    assert!(
        t0.elapsed() < StdDuration::from_secs(1),
        "{:?}",
        t0.elapsed()
    );
}

/// The producer died while rewriting the slot of the oldest record (13 of 1..=20 in a ring
/// of 8, the marker left by the write of 21). A mirror asking for the oldest gets a GAP past
/// 13 and the records 14..=20, which used to be never sent, and its session then sleeps
/// instead of spinning at the marked slot.
#[test]
fn a_session_at_a_slot_left_half_written_sends_what_follows_and_sleeps() {
    use ringwire_core::layout::SLOT_WRITING;
    let path = TmpPath::shm("serve-restart-stuck");
    let ring = persistent_ring(path.path(), 8);
    publish(&ring, 1, 1..=20);
    ring.ring()
        .slot_seq(21)
        .store(SLOT_WRITING, ringwire_core::sync::Ordering::Relaxed);
    let server = Server::bind(opts(
        path.path(),
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
    ))
    .unwrap();
    let stop = AtomicBool::new(false);
    let (frames, passes) = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let srv = sc.spawn(|| server.run(&stop));
        let mut c = hello_oldest(server.local_addr());
        let frames = read_frames(&mut c, StdDuration::from_secs(5), |f| records(f).len() >= 7);
        // Idle from here on: count the session's passes over half a second.
        let p0 = server.session_passes.load(Ordering::Relaxed);
        std::thread::sleep(StdDuration::from_millis(500));
        let passes = server.session_passes.load(Ordering::Relaxed) - p0;
        stop.store(true, Ordering::Relaxed);
        srv.join().unwrap().unwrap();
        (frames, passes)
    });
    let gaps: Vec<u64> = frames
        .iter()
        .filter(|f| f.0 == Kind::Gap as u8)
        .map(|f| f.1)
        .collect();
    assert_eq!(gaps, [14], "{frames:?}");
    assert_eq!(
        records(&frames),
        (14..=20).map(|s| (s, 1000 + s)).collect::<Vec<_>>()
    );
    // A sleeping session wakes every few ms at most (5 ms cap, 2 ms futex sleeps).
    assert!(passes < 2_000, "{passes} session passes in 0.5 s");
}

/// Whether the server closes `c` within `within` (frames before the end are skipped).
fn closed_within(c: &mut TcpStream, within: StdDuration) -> bool {
    let t0 = std::time::Instant::now();
    let mut b = [0u8; 4096];
    c.set_read_timeout(Some(StdDuration::from_millis(50)))
        .unwrap();
    while t0.elapsed() < within {
        match c.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return true,
        }
    }
    false
}

/// `--once` runs its session on the accept loop's thread, which checked the path only
/// between connections: a restarted producer's new ring was never seen, and the mirror was
/// served the frozen old ring for ever. The session now ends within a second of the
/// replacement, and the new ring is served to the mirror when it connects again.
#[test]
fn a_once_session_ends_when_the_ring_is_replaced() {
    let path = TmpPath::shm("serve-restart-once");
    let tmp = TmpPath::shm("serve-restart-once-tmp");
    let a = persistent_ring(path.path(), 64);
    publish(&a, 1, 1..=5);
    let l = listener();
    let addr = l.local_addr().unwrap();
    let mut so = opts(path.path(), addr);
    so.once = true;
    let stop = AtomicBool::new(false);
    let replaced = AtomicU64::new(0);
    std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let h = sc.spawn(|| {
            run_following_on(l, &so, &stop, |_| {
                replaced.fetch_add(1, Ordering::Relaxed);
            })
        });
        let mut c = hello_oldest(addr);
        let got = records(&read_frames(&mut c, StdDuration::from_secs(5), |f| {
            records(f).len() >= 5
        }));
        assert_eq!(got, (1..=5).map(|s| (s, 1000 + s)).collect::<Vec<_>>());
        let b = persistent_ring(tmp.path(), 64);
        publish(&b, 2, 1..=3);
        std::fs::rename(tmp.path(), path.path()).unwrap();
        assert!(
            closed_within(&mut c, StdDuration::from_secs(3)),
            "the --once session still serves the replaced ring 3 s later"
        );
        // The old server's listener lives a moment after its session closed: a connection
        // made then is reset when it goes, and the mirror connects again (bounded).
        let t0 = std::time::Instant::now();
        let (c, got) = loop {
            let mut c = hello_oldest(so.bind);
            let got = records(&read_frames(&mut c, StdDuration::from_secs(5), |f| {
                records(f).len() >= 3
            }));
            if !got.is_empty() || t0.elapsed() > StdDuration::from_secs(5) {
                break (c, got);
            }
        };
        assert_eq!(got, (1..=3).map(|s| (s, 2000 + s)).collect::<Vec<_>>());
        assert_eq!(replaced.load(Ordering::Relaxed), 1);
        drop(c);
        // The second --once session ended with its mirror: serve returns.
        let sum = h.join().unwrap().unwrap();
        assert_eq!(sum.sessions, 1);
        drop((a, b));
    });
}

/// A ring recreated in place (same inode: ringfire's legacy non-exclusive creation) is
/// taken as replaced when its length changes or its write_seq goes back.
#[test]
fn a_ring_recreated_in_place_counts_as_replaced() {
    let path = TmpPath::shm("serve-restart-inplace");
    let a = persistent_ring(path.path(), 64);
    publish(&a, 1, 1..=10);
    let server = Server::bind(opts(
        path.path(),
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
    ))
    .unwrap();
    assert!(!server.replaced());
    publish(&a, 1, 11..=12);
    assert!(!server.replaced());
    // Initialised again and 3 records published: write_seq went back.
    a.ring()
        .write_seq()
        .store(3, ringwire_core::sync::Ordering::Release);
    assert!(server.replaced());
    let server = Server::bind(opts(
        path.path(),
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
    ))
    .unwrap();
    assert!(!server.replaced());
    // Resized (growing: the mapping stays backed, no SIGBUS here).
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path.path())
        .unwrap();
    f.set_len(a.file_len() as u64 + 4096).unwrap();
    assert!(server.replaced());
}

/// Runs a `--once` server on a 64-slot ring and hands its address and stop flag to
/// `client`; returns what the server returned (within 10 s, or the test fails). What
/// `client` returns (a connection) is dropped only after the server returned.
fn once_outcome<T>(
    name: &str,
    tune: impl FnOnce(&mut ServeOptions),
    client: impl FnOnce(SocketAddr, &AtomicBool) -> T,
) -> Result<ServeSummary, ReplicaError> {
    let path = TmpPath::shm(&format!("serve-restart-{name}"));
    let ring = persistent_ring(path.path(), 64);
    publish(&ring, 1, 1..=5);
    // Port 0: the server is bound here, before the client learns its address.
    let mut so = opts(path.path(), SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
    so.once = true;
    tune(&mut so);
    let server = Server::bind(so).unwrap();
    let addr = server.local_addr();
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let h = sc.spawn(|| server.run(&stop));
        let _held = client(addr, &stop);
        let t0 = std::time::Instant::now();
        while !h.is_finished() {
            assert!(
                t0.elapsed() < StdDuration::from_secs(10),
                "the --once server still runs 10 s after its session"
            );
            std::thread::sleep(StdDuration::from_millis(10));
        }
        h.join().unwrap()
    })
}

/// `serve --once` returned Ok (exit 0) whatever ended its one session. As ringfire's, a
/// mirror going away (before or after HELLO, orderly or reset) ends it well; a protocol
/// error or a missing HELLO is an error (exit 1).
#[test]
fn a_once_session_ended_by_an_error_is_an_error() {
    // Not the protocol: an HTTP request where a HELLO belongs.
    let r = once_outcome(
        "once-http",
        |_| {},
        |addr, _| {
            let mut c = TcpStream::connect(addr).unwrap();
            c.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
            // Left open: the server ends the session on what it read.
            let _ = closed_within(&mut c, StdDuration::from_secs(5));
        },
    );
    match r {
        Err(ReplicaError::SessionFailed { why, .. }) => {
            assert!(why.contains("protocol error"), "{why}")
        }
        other => panic!("an HTTP request ended --once with {other:?}"),
    }
    // Connected and silent past the HELLO timeout.
    let r = once_outcome(
        "once-silent",
        |so| so.hello_timeout = StdDuration::from_millis(200),
        |addr, _| {
            let mut c = TcpStream::connect(addr).unwrap();
            assert!(closed_within(&mut c, StdDuration::from_secs(5)));
        },
    );
    match r {
        Err(ReplicaError::SessionFailed { why, .. }) => assert!(why.contains("no HELLO"), "{why}"),
        other => panic!("a silent peer ended --once with {other:?}"),
    }
    let text = ReplicaError::SessionFailed {
        peer: "127.0.0.1:9".into(),
        why: "no HELLO".into(),
    }
    .to_string();
    assert!(
        text.contains("127.0.0.1:9") && text.contains("no HELLO"),
        "{text}"
    );
}

#[test]
fn a_once_session_whose_mirror_goes_away_ends_well() {
    // Closed before sending anything (a port probe).
    let r = once_outcome(
        "once-probe",
        |_| {},
        |addr, _| {
            drop(TcpStream::connect(addr).unwrap());
        },
    );
    assert_eq!(r.map(|s| s.sessions).ok(), Some(1));
    // A mirror served its records, then closed.
    let r = once_outcome(
        "once-served",
        |_| {},
        |addr, _| {
            let mut c = hello_oldest(addr);
            let got = records(&read_frames(&mut c, StdDuration::from_secs(5), |f| {
                records(f).len() >= 5
            }));
            assert_eq!(got.len(), 5);
        },
    );
    assert_eq!(r.map(|s| s.sessions).ok(), Some(1));
    // A mirror that resets the connection (SO_LINGER 0) after HELLO.
    let r = once_outcome(
        "once-reset",
        |_| {},
        |addr, _| {
            let c = hello_oldest(addr);
            socket2::SockRef::from(&c)
                .set_linger(Some(StdDuration::ZERO))
                .unwrap();
            drop(c);
        },
    );
    assert_eq!(r.map(|s| s.sessions).ok(), Some(1));
}

/// A `--once` server stopped (SIGINT/SIGTERM) while its mirror is live and connected
/// returns Ok, exit 0: nothing went wrong. No test failed when this ended in an error.
#[test]
fn a_once_session_stopped_by_the_server_ends_well() {
    let r = once_outcome(
        "once-stopped",
        |_| {},
        |addr, stop| {
            let mut c = hello_oldest(addr);
            let got = records(&read_frames(&mut c, StdDuration::from_secs(5), |f| {
                records(f).len() >= 5
            }));
            assert_eq!(got.len(), 5, "the session is live");
            stop.store(true, Ordering::Relaxed);
            // Kept open until the server returned: the session ends by the stop alone.
            c
        },
    );
    let sum = r.expect("a --once server stopped during its session");
    assert_eq!(sum.sessions, 1);
}

#[test]
fn session_ends_from_socket_errors() {
    use io::ErrorKind as K;
    for k in [
        K::BrokenPipe,
        K::ConnectionReset,
        K::ConnectionAborted,
        K::UnexpectedEof,
    ] {
        let e = SessionEnd::of_io("write: ", &io::Error::from(k));
        assert!(matches!(e, SessionEnd::Disconnected(_)), "{k:?}: {e:?}");
        assert!(e.to_string().starts_with("write: "), "{e}");
    }
    for k in [K::TimedOut, K::PermissionDenied, K::Other] {
        let e = SessionEnd::of_io("", &io::Error::from(k));
        assert!(matches!(e, SessionEnd::Failed(_)), "{k:?}: {e:?}");
    }
}

/// The TCP ports this process listens on at `ip` (from /proc/net/tcp, state LISTEN).
fn listening_ports(ip: Ipv4Addr) -> Vec<u16> {
    let want = format!("{:08X}", u32::from_le_bytes(ip.octets()));
    std::fs::read_to_string("/proc/self/net/tcp")
        .unwrap()
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (addr, port) = f.get(1)?.split_once(':')?;
            (addr == want && f.get(3) == Some(&"0A"))
                .then(|| u16::from_str_radix(port, 16).ok())
                .flatten()
        })
        .collect()
}

/// Serve follows a replaced ring on the port it listened on, also when `--bind` asked for
/// any free one (port 0): it bound its address again for the new ring, which got another
/// port, so no mirror could find it; with a fixed port, a mirror connecting meanwhile was
/// refused by the system, and the port could be taken by another process in the gap. While
/// it waits for the new ring to be initialised, a mirror that connects is refused with an
/// orderly close (it reads the end of the stream, not a reset, and is not left waiting for
/// a GEOMETRY).
#[test]
fn a_replaced_ring_is_served_on_the_same_listener() {
    let path = TmpPath::shm("serve-restart-same-port");
    let tmp = TmpPath::shm("serve-restart-same-port-tmp");
    let a = persistent_ring(path.path(), 64);
    publish(&a, 1, 1..=5);
    // An address of its own, so that the listener found in /proc is this test's (by the
    // pid: /proc/self/net/tcp lists the whole network namespace's, and another process
    // may run this test at the same time).
    let pid = std::process::id();
    let ip = Ipv4Addr::new(127, 77, (pid >> 8) as u8, (pid % 250) as u8 + 2);
    let so = opts(path.path(), SocketAddr::from((ip, 0)));
    let stop = AtomicBool::new(false);
    let replaced = AtomicU64::new(0);
    std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let h = sc.spawn(|| {
            run_following(&so, &stop, |_| {
                replaced.fetch_add(1, Ordering::Relaxed);
            })
        });
        let t0 = std::time::Instant::now();
        let mut ports = listening_ports(ip);
        while ports.is_empty() && t0.elapsed() < StdDuration::from_secs(5) {
            std::thread::sleep(StdDuration::from_millis(10));
            ports = listening_ports(ip);
        }
        assert_eq!(ports.len(), 1, "{ports:?}");
        let addr = SocketAddr::from((ip, ports[0]));
        let mut c = hello_oldest(addr);
        let got = records(&read_frames(&mut c, StdDuration::from_secs(5), |f| {
            records(f).len() >= 5
        }));
        assert_eq!(got.len(), 5);
        // Replaced by a file not initialised yet: serve ends the sessions and waits for it,
        // and tells of no replacement until it serves a new ring.
        std::fs::write(tmp.path(), b"").unwrap();
        std::fs::rename(tmp.path(), path.path()).unwrap();
        assert!(
            closed_within(&mut c, StdDuration::from_secs(5)),
            "the session of the replaced ring still open 5 s later"
        );
        std::thread::sleep(StdDuration::from_millis(100));
        assert_eq!(replaced.load(Ordering::Relaxed), 0);
        let mut w = TcpStream::connect(addr).expect("a mirror connecting while serve waits");
        w.set_read_timeout(Some(StdDuration::from_secs(3))).unwrap();
        let mut b = [0u8; 16];
        assert_eq!(w.read(&mut b).ok(), Some(0), "an orderly refusal");
        let b = persistent_ring(tmp.path(), 64);
        publish(&b, 2, 1..=3);
        std::fs::rename(tmp.path(), path.path()).unwrap();
        // Serve looks for the new ring every 20 ms: a mirror that connects before it has
        // opened it is refused as the one above was (a loaded machine can delay that look
        // well past the connect), and connects again, as a mirror does.
        let t0 = std::time::Instant::now();
        let got = loop {
            let mut c = hello_oldest(addr);
            let frames = read_frames(&mut c, StdDuration::from_secs(5), |f| records(f).len() >= 3);
            let refused = frames.is_empty() && matches!(c.read(&mut [0u8; 16]), Ok(0));
            if !refused || t0.elapsed() > StdDuration::from_secs(30) {
                break records(&frames);
            }
        };
        assert_eq!(got, (1..=3).map(|s| (s, 2000 + s)).collect::<Vec<_>>());
        assert_eq!(replaced.load(Ordering::Relaxed), 1);
        assert_eq!(listening_ports(ip), [addr.port()]);
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap().unwrap();
        drop((a, b));
    });
}
