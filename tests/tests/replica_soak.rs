//! `ringwire serve` and `ringwire mirror` are meant to run for weeks: nothing they hold may
//! grow with the number of mirrors that came and went, of reconnections, or of source rings
//! replaced under serve. Each runs as a child process (this test executable again, as in
//! `replica_cli_process.rs`), so that its `/proc/PID/{fd,task,maps,status}` count only what it
//! holds; the test drives it over loopback and compares those counts before and after the
//! churn. Open descriptors, threads and mappings must come back to the starting level (the
//! children's glibc keeps no arena or thread stack caches, [`GLIBC_NO_CACHES`]); RSS may grow
//! by a bounded amount (freed heap the allocator keeps), far below what one leaked socket,
//! buffer, mapping or stack per cycle would add. Every wait is bounded by [`LIMIT`] and judged on the counts, not on
//! time; children are SIGKILLed and scratch rings removed on drop, also when a test fails.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringwire::core::Geometry;
use ringwire::core::wire::{
    Frame, GEOMETRY_RESET, GeometryRepr, HELLO_CAN_UNICAST, HELLO_LATEST, HELLO_OLDEST,
    HELLO_PREFER_UNICAST, HeartbeatRepr, HelloRepr, Kind, MulticastRepr, NakRepr, PunchRepr,
};
use ringwire::replica::serve::{ServeOptions, Server};
use ringwire::{CreateOptions, ReadOnlyRing, RingFile};
use ringwire_tests::replica::{SetOnDrop, geometry_frame, udp_handshake};
use ringwire_tests::shm::ShmPath;
use ringwire_tests::wait_until;

/// Set in the child: the `ringwire` arguments, one per line.
const CHILD_ENV: &str = "FIXS_RINGWIRE_SOAK_ARGS";
/// Bound of every wait: far more than any step takes on a loaded machine.
const LIMIT: Duration = Duration::from_secs(30);
/// Restarts of a real serve under the mirror.
const RESTARTS: usize = 10;
/// Connections of the churn tests.
const CHURN: usize = 1_000;
/// Cycles before the level RSS and mappings are compared with (allocator and stack caches
/// filled).
const WARM_UP: usize = 200;
/// RSS growth allowed over [`CHURN`] cycles after the warm-up: 4 KiB a cycle.
const RSS_SLACK_KIB: u64 = 4 * 1024;
/// Mappings allowed beyond the level (with [`GLIBC_NO_CACHES`]): a few for what the
/// allocator keeps.
const MAPS_SLACK: usize = 4;
/// The children's glibc keeps no caches that grow with the number of threads that ever ran
/// at once: one malloc arena (else up to 8 per core, two mappings each) and no cache of the
/// stacks of ended threads (else up to 40 MiB of them, two mappings each with the guard
/// page). Measured without this, 64 sessions at once left 70 more mappings after they
/// ended (15 arenas, 20 stacks), bounded but as many as a leak of one per session would.
const GLIBC_NO_CACHES: &str = "glibc.malloc.arena_max=1:glibc.pthread.stack_cache_size=0";

/// The child's entry point (see `ringwire_tests::cli_child`).
#[test]
#[ignore = "child process entry point of the other tests in this file"]
fn soak_child() {
    ringwire_tests::cli_child::run_from_env(CHILD_ENV);
}

/// A running child `ringwire`, its stderr lines collected; SIGKILLed on drop if running.
struct Child {
    child: std::process::Child,
    lines: Arc<Mutex<Vec<String>>>,
    first: mpsc::Receiver<String>,
}

impl Child {
    fn spawn(args: &[&str]) -> Child {
        let mut child = ringwire_tests::cli_child::command("soak_child", CHILD_ENV, args)
            .env("GLIBC_TUNABLES", GLIBC_NO_CACHES)
            .spawn()
            .expect("spawn the child");
        let err = child.stderr.take().expect("stderr");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (tx, first) = mpsc::channel();
        let kept = Arc::clone(&lines);
        // Drained all along: a full pipe would stop the child's logging thread.
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines() {
                let Ok(l) = l else { break };
                let _ = tx.send(l.clone());
                kept.lock().unwrap_or_else(|p| p.into_inner()).push(l);
            }
        });
        Child {
            child,
            lines,
            first,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for a stderr line containing `key`.
    fn line(&self, key: &str) -> String {
        let end = Instant::now() + LIMIT;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.first.recv_timeout(left) {
                Ok(l) if l.contains(key) => return l,
                Ok(_) => {}
                Err(_) => panic!("no line with '{key}' within {LIMIT:?}: {:?}", self.log()),
            }
        }
    }

    fn log(&self) -> Vec<String> {
        self.lines.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// SIGTERM, then the exit (killed after [`LIMIT`]); returns the stderr lines.
    fn stop(mut self) -> Vec<String> {
        // SAFETY: kill only sends a signal to the child we started and have not reaped.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        ringwire_tests::wait_exit(&mut self.child, LIMIT, "the child after SIGTERM");
        let end = Instant::now() + LIMIT;
        // Its last lines (the summary) come before the pipe closes.
        while self
            .first
            .recv_timeout(end.saturating_duration_since(Instant::now()))
            .is_ok()
        {}
        self.log()
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `ringwire serve RING --bind 127.0.0.1:0 extra…` as a child, and the TCP address it
/// listens on (from its startup line).
fn serve_child(ring: &Path, extra: &[&str]) -> (Child, SocketAddr) {
    let mut args = vec!["serve", ring.to_str().unwrap(), "--bind", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let serve = Child::spawn(&args);
    let addr = addr_after(&serve.line("on tcp "), "on tcp ");
    (serve, addr)
}

/// What a process holds, from /proc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Usage {
    fds: usize,
    threads: usize,
    maps: usize,
    rss_kib: u64,
}

fn usage(pid: u32) -> Usage {
    let count = |d: &str| {
        std::fs::read_dir(format!("/proc/{pid}/{d}"))
            .unwrap_or_else(|e| panic!("/proc/{pid}/{d}: {e}"))
            .count()
    };
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .expect("maps")
        .lines()
        .count();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in status");
    Usage {
        fds: count("fd"),
        threads: count("task"),
        maps,
        rss_kib,
    }
}

/// The usage once `held` says the process holds what it should and its descriptors and
/// threads are the same in six samples in a row, 100 ms (a thread just starting, or a
/// session just ending: an idle one looks at its socket every 50 ms).
fn settled(pid: u32, what: &str, mut held: impl FnMut(Usage) -> bool) -> Usage {
    let end = Instant::now() + LIMIT;
    let mut last = usage(pid);
    let mut same = 0;
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let u = usage(pid);
        let steady = (u.fds, u.threads) == (last.fds, last.threads);
        same = if steady && held(u) { same + 1 } else { 0 };
        if same >= 5 {
            return u;
        }
        assert!(
            Instant::now() < end,
            "{what}: not reached, or not steady, within {LIMIT:?}: last {u:?}"
        );
        last = u;
    }
}

/// Waits until the process holds no more descriptors and threads than at `base`, and at most
/// [`MAPS_SLACK`] more mappings; returns the usage then.
fn back_to(pid: u32, base: Usage, what: &str) -> Usage {
    let maps_max = base.maps + MAPS_SLACK;
    let end = Instant::now() + LIMIT;
    loop {
        let u = usage(pid);
        if u.fds <= base.fds && u.threads <= base.threads && u.maps <= maps_max {
            return u;
        }
        assert!(
            Instant::now() < end,
            "{what}: not back to the starting level within {LIMIT:?}: start {base:?}, now {u:?} \
             (maps allowed {maps_max})"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The RSS after the churn is within [`RSS_SLACK_KIB`] of the level after the warm-up.
fn assert_rss(warm: Usage, end: Usage, what: &str) {
    assert!(
        end.rss_kib <= warm.rss_kib + RSS_SLACK_KIB,
        "{what}: RSS grew from {} KiB after the warm-up to {} KiB after {CHURN} more cycles",
        warm.rss_kib,
        end.rss_kib
    );
}

/// The `ADDR` after `key` in `line` (up to a comma or space).
fn addr_after(line: &str, key: &str) -> SocketAddr {
    let at = line
        .find(key)
        .unwrap_or_else(|| panic!("no '{key}' in {line}"))
        + key.len();
    line[at..]
        .split([',', ' '])
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address after '{key}' in {line}"))
}

/// A source ring at `p` of `capacity` records of 56 bytes, all written.
fn source(p: &Path, capacity: u64) -> RingFile {
    let geo = Geometry::spmc(capacity, 64, 8, 0, false).unwrap();
    let ring = RingFile::create(p, &geo, &CreateOptions::default()).expect("source ring");
    for seq in 1..=capacity {
        publish(&ring, seq);
    }
    ring
}

/// Writes and publishes record `seq` of a [`source`] ring.
fn publish(ring: &RingFile, seq: u64) {
    let view = ringwire_tests::shm::view(ring);
    let mut rec = [0u8; 56];
    rec[..8].copy_from_slice(&seq.to_le_bytes());
    view.write_slot(seq, &rec);
    view.publish(seq);
}

fn hello(seq: u64, flags: u8) -> Vec<u8> {
    let mut b = vec![0u8; 64];
    let n = HelloRepr { seq, flags }.emit(&mut b).expect("emit HELLO");
    b.truncate(n);
    b
}

/// One whole frame, header included; `None` at the end of the stream (a refusal).
fn read_frame(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut f = vec![0u8; 16];
    match s.read_exact(&mut f) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return None,
        Err(e) => panic!("read a frame: {e}"),
    }
    let len = u32::from_le_bytes(f[4..8].try_into().unwrap()) as usize;
    f.resize(16 + len, 0);
    s.read_exact(&mut f[16..]).expect("a frame's body");
    Some(f)
}

/// Connects to `addr` and sends HELLO(`seq`, `flags`): the GEOMETRY, or `None` when refused.
fn handshake(addr: SocketAddr, seq: u64, flags: u8) -> Option<(TcpStream, GeometryRepr)> {
    let mut c = TcpStream::connect(addr).expect("connect to serve");
    c.set_read_timeout(Some(LIMIT)).unwrap();
    c.write_all(&hello(seq, flags)).expect("send HELLO");
    let f = read_frame(&mut c)?;
    assert_eq!(f[0], Kind::Geometry as u8, "GEOMETRY first");
    let g = GeometryRepr::parse(&Frame::new_checked(&f[..]).unwrap()).expect("GEOMETRY");
    Some((c, g))
}

/// [`handshake`], retried while the server refuses (a place not free yet: the session that
/// held it is still ending).
fn served(addr: SocketAddr, seq: u64, flags: u8) -> (TcpStream, GeometryRepr) {
    let end = Instant::now() + LIMIT;
    loop {
        if let Some(x) = handshake(addr, seq, flags) {
            return x;
        }
        assert!(Instant::now() < end, "{addr}: refused for {LIMIT:?}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A unicast handshake: the stream and the MULTICAST announcement, which must grant a token.
fn unicast(addr: SocketAddr) -> (TcpStream, MulticastRepr) {
    let (mut c, _) = served(addr, HELLO_LATEST, HELLO_CAN_UNICAST | HELLO_PREFER_UNICAST);
    let f = read_frame(&mut c).expect("MULTICAST after GEOMETRY");
    assert_eq!(f[0], Kind::Multicast as u8, "a MULTICAST frame");
    let m = MulticastRepr::parse(&Frame::new_checked(&f[..]).unwrap()).expect("MULTICAST");
    assert!(m.is_unicast() && m.token != 0, "no unicast token: {m:?}");
    (c, m)
}

/// Closes `s` with a reset instead of a FIN (SO_LINGER 0).
fn reset(s: TcpStream) {
    socket2::SockRef::from(&s)
        .set_linger(Some(Duration::ZERO))
        .expect("SO_LINGER");
}

/// One mirror coming and going, the `i`-th way of seven.
fn churn_cycle(addr: SocketAddr, i: usize) {
    match i % 7 {
        // Orderly close while the ring's records are still coming.
        0 => drop(served(addr, HELLO_OLDEST, 0)),
        // Reset while they are.
        1 => reset(served(addr, HELLO_OLDEST, 0).0),
        // No HELLO: a FIN, a reset, a FIN in the middle of the HELLO.
        2 => drop(TcpStream::connect(addr).expect("connect")),
        3 => reset(TcpStream::connect(addr).expect("connect")),
        4 => {
            let mut c = TcpStream::connect(addr).expect("connect");
            c.write_all(&hello(HELLO_LATEST, 0)[..10])
                .expect("half a HELLO");
        }
        // A unicast subscriber that punches and gets datagrams, then goes.
        5 => {
            let (c, m) = unicast(addr);
            let u = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
            u.set_read_timeout(Some(LIMIT)).unwrap();
            let mut p = [0u8; 16];
            PunchRepr {
                session: m.session,
                token: m.token,
            }
            .emit(&mut p)
            .unwrap();
            u.send_to(&p, (Ipv4Addr::LOCALHOST, m.port)).unwrap();
            let mut b = [0u8; 2048];
            u.recv_from(&mut b).expect("a datagram after the PUNCH");
            drop((c, u));
        }
        // A unicast subscriber reset in the middle of a NAK.
        _ => {
            let (mut c, _) = unicast(addr);
            let mut n = [0u8; 24];
            NakRepr { from: 1, to: 2 }.emit(&mut n).unwrap();
            c.write_all(&n[..9]).expect("half a NAK");
            reset(c);
        }
    }
}

/// serve through 1,000 mirrors coming and going over TCP and UDP unicast (orderly closes,
/// resets, connections that close or reset without HELLO or in the middle of a frame): its
/// descriptors and threads come back to their starting level, its RSS and mappings stay
/// within a bound, and afterwards all 64 places (`--max-mirrors`) and all 64 unicast tokens
/// are free again: 64 unicast mirrors get a token at once, and a 65th is refused.
#[test]
fn serve_through_mirror_churn_returns_to_its_level() {
    let src = ShmPath::new("soak-serve");
    let _ring = source(src.path(), 1024);
    let (serve, addr) = serve_child(src.path(), &["--udp", "0"]);
    let pid = serve.pid();
    // The UDP thread starts after the startup line.
    let base = settled(pid, "serve at start", |_| true);
    for i in 0..WARM_UP {
        churn_cycle(addr, i);
    }
    let warm = back_to(pid, base, "serve after the warm-up");
    for i in 0..CHURN {
        churn_cycle(addr, i);
    }
    let end = back_to(pid, base, "serve after the churn");
    assert_rss(warm, end, "serve");
    // Every place and every token is free: 64 unicast mirrors at once, a 65th refused.
    let all: Vec<_> = (0..64).map(|_| unicast(addr)).collect();
    assert!(
        handshake(addr, HELLO_LATEST, 0).is_none(),
        "a 65th mirror served past --max-mirrors 64"
    );
    drop(all);
    let after = back_to(pid, base, "serve after 64 unicast mirrors");
    let log = serve.stop();
    eprintln!(
        "serve churn: start {base:?}, after {WARM_UP} warm-up cycles {warm:?}, after {CHURN} \
         more {end:?}, after 64 unicast mirrors {after:?}; {:?}",
        log.iter().find(|l| l.contains("serve: done"))
    );
}

/// `--max-mirrors` counts connections that have not sent their HELLO: 64 of them fill the
/// server, and their places come free when they close, and when the HELLO timeout (5 s)
/// closes them; a mirror is then served in each. All 64 are counted as closed without
/// HELLO, 32 of them at the HELLO timeout.
#[test]
fn places_held_without_hello_come_free() {
    let src = ShmPath::new("soak-hello");
    let _ring = source(src.path(), 64);
    let (serve, addr) = serve_child(src.path(), &[]);
    let pid = serve.pid();
    let base = settled(pid, "serve at start", |_| true);
    let mut silent: Vec<TcpStream> = (0..64)
        .map(|_| TcpStream::connect(addr).expect("connect"))
        .collect();
    // Each is a session once accepted: its descriptor is open in serve.
    settled(pid, "64 silent connections", |u| u.fds >= base.fds + 64);
    assert!(
        handshake(addr, HELLO_LATEST, 0).is_none(),
        "a mirror served while 64 HELLO-less connections hold every place"
    );
    // Half of them go: a mirror in each of their places.
    silent.truncate(32);
    let live: Vec<_> = (0..32).map(|_| served(addr, HELLO_LATEST, 0)).collect();
    // The rest are closed by the HELLO timeout: serve ends the stream.
    for mut s in silent {
        s.set_read_timeout(Some(LIMIT)).unwrap();
        let mut b = [0u8; 16];
        assert_eq!(
            s.read(&mut b).expect("closed by serve"),
            0,
            "the end, no frame"
        );
    }
    let more: Vec<_> = (0..32).map(|_| served(addr, HELLO_LATEST, 0)).collect();
    drop((live, more));
    let end = back_to(pid, base, "serve after the HELLO-less connections");
    let log = serve.stop();
    let done = log.iter().find(|l| l.contains("serve: done")).cloned();
    assert!(
        done.as_deref()
            .is_some_and(|l| l.contains("64 closed without HELLO (32 at the hello timeout)")),
        "{done:?}"
    );
    eprintln!("HELLO-less places: start {base:?}, end {end:?}; {done:?}");
}

/// The source ring replaced 100 times under serve (a producer restarting): each new ring is
/// served, and serve holds no more descriptors, threads or mappings after the 100th
/// replacement than after the first. (The first adds one descriptor for good: serve keeps a
/// copy of its listener for every later ring's server, see `serve::follow_from`.)
#[test]
fn serve_through_100_replaced_rings_returns_to_its_level() {
    let src = ShmPath::new("soak-replaced");
    let mut ring = Some(source(src.path(), 64));
    let (serve, addr) = serve_child(src.path(), &["--udp", "0"]);
    let pid = serve.pid();
    let start = settled(pid, "serve at start", |_| true);
    let mut replace = |k: u64| {
        drop(ring.take());
        let capacity = if k % 2 == 1 { 128 } else { 64 };
        ring = Some(source(src.path(), capacity));
        // The first mirror after the replacement is served the new ring; reset, its
        // session ends at once.
        let (c, g) = served(addr, HELLO_LATEST, 0);
        reset(c);
        assert_eq!(g.capacity, capacity, "replacement {k}: the old ring served");
    };
    replace(1);
    let base = settled(pid, "serve after the first replacement", |_| true);
    for k in 2..=100 {
        replace(k);
    }
    let end = back_to(pid, base, "serve after 100 replaced rings");
    assert_rss(base, end, "serve after 100 replaced rings");
    let log = serve.stop();
    let replaced = log.iter().filter(|l| l.contains("was replaced")).count();
    eprintln!(
        "replaced rings: start {start:?}, after the first replacement {base:?}, after 100 \
         {end:?}; {replaced} replacements logged"
    );
}

/// A fake source's side of one mirror connection, the `i`-th way of six: the HELLO read,
/// then a refusal (closed before GEOMETRY), or a GEOMETRY (a RESET one every 250th, which
/// makes the mirror recreate its ring) closed with a FIN or a reset, in the middle of a
/// frame, or after announcing UDP unicast (closed once the mirror's PUNCH is in: its socket is open)
/// or a multicast group (which the mirror joins).
fn source_cycle(l: &TcpListener, udp: &UdpSocket, i: usize) {
    let (mut c, _) = l.accept().expect("accept the mirror");
    c.set_read_timeout(Some(LIMIT)).unwrap();
    let mut h = [0u8; 32];
    c.read_exact(&mut h).expect("the mirror's HELLO");
    let reset_flag = if i % 250 == 249 { GEOMETRY_RESET } else { 0 };
    let geometry = |c: &mut TcpStream, flags: u8| {
        c.write_all(&geometry_frame(64, reset_flag | flags))
            .expect("GEOMETRY");
    };
    let announce = |c: &mut TcpStream, group: [u8; 4], port: u16| {
        c.write_all(&udp_handshake(reset_flag, group, port))
            .expect("GEOMETRY and MULTICAST");
    };
    match i % 6 {
        0 => {}
        1 => geometry(&mut c, 0),
        2 => {
            geometry(&mut c, 0);
            reset(c);
        }
        3 => {
            geometry(&mut c, 0);
            let mut hb = [0u8; 32];
            HeartbeatRepr { flags: 0, seq: 0 }.emit(&mut hb).unwrap();
            HeartbeatRepr { flags: 0, seq: 0 }
                .emit(&mut hb[16..])
                .unwrap();
            // A heartbeat and half of another: the next connection starts on a clean stream.
            c.write_all(&hb[..24]).expect("a frame and a half");
        }
        4 => {
            announce(&mut c, [0; 4], udp.local_addr().unwrap().port());
            let mut b = [0u8; 64];
            udp.recv_from(&mut b).expect("the mirror's PUNCH");
            reset(c);
        }
        _ => announce(&mut c, [239, 255, 77, 1], 40_000 + (i % 1000) as u16),
    }
}

/// Accepts the mirror and keeps it connected, its ring at `ring` open, until `done` says
/// what the mirror holds is right (a heartbeat every pass keeps it from the silence
/// timeout); returns that usage.
fn hold(l: &TcpListener, pid: u32, ring: &Path, what: &str, done: impl Fn(Usage) -> bool) -> Usage {
    let (mut c, _) = l.accept().expect("accept the mirror");
    c.set_read_timeout(Some(LIMIT)).unwrap();
    let mut h = [0u8; 32];
    c.read_exact(&mut h).expect("the mirror's HELLO");
    c.write_all(&geometry_frame(64, 0)).expect("GEOMETRY");
    let mut hb = [0u8; 16];
    HeartbeatRepr { flags: 0, seq: 0 }.emit(&mut hb).unwrap();
    let opened = || {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| std::fs::read_link(e.path()).is_ok_and(|t| t == ring))
    };
    settled(pid, what, |u| {
        let _ = c.write_all(&hb);
        opened() && done(u)
    })
}

/// Files in /dev/shm whose names start with `p`'s.
fn shm_files_like(p: &Path) -> Vec<String> {
    let name = p.file_name().unwrap().to_string_lossy().into_owned();
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&name))
        .collect()
}

fn inode(p: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).expect("the mirror ring").ino()
}

/// A mirror reconnecting over 1,000 times (`--reconnect-ms 0`) to a source that refuses it
/// (closes before GEOMETRY), restarts (GEOMETRY, then a FIN or a reset; over TCP, UDP
/// unicast or multicast), is not there at all for a while (connections refused), and now
/// and then restarts with a new ring (RESET), and a real serve restarted 10 times:
/// its descriptors and threads come back to their level, its RSS and mappings stay within a
/// bound, its ring is recreated exactly at the RESETs and kept otherwise, and no other file
/// is left in /dev/shm.
#[test]
fn mirror_through_reconnects_returns_to_its_level() {
    let dst = ShmPath::new("soak-mirror");
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let addr = l.local_addr().unwrap();
    let mirror = Child::spawn(&[
        "mirror",
        &addr.to_string(),
        dst.path().to_str().unwrap(),
        "--reconnect-ms",
        "0",
    ]);
    let pid = mirror.pid();
    let udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    udp.set_read_timeout(Some(LIMIT)).unwrap();
    let base = hold(&l, pid, dst.path(), "mirror at start", |_| true);
    for i in 0..WARM_UP {
        source_cycle(&l, &udp, i);
    }
    let warm = hold(
        &l,
        pid,
        dst.path(),
        &format!("mirror after the warm-up at {base:?}"),
        |u| u.fds <= base.fds && u.threads <= base.threads,
    );
    // No source at all for a while: connections refused, retried at once.
    drop(l);
    std::thread::sleep(Duration::from_millis(200));
    let l = TcpListener::bind(addr).expect("the source's port again");
    let mut ino = inode(dst.path());
    let mut recreated = 0;
    for i in 0..CHURN {
        source_cycle(&l, &udp, i);
        if i % 250 == 0 && i > 0 {
            // The RESET of cycle i - 1 was handled before this connection's HELLO.
            let now = inode(dst.path());
            assert_ne!(now, ino, "cycle {i}: ring not recreated at a RESET");
            ino = now;
            recreated += 1;
        } else if i % 250 == 249 {
            // This cycle's GEOMETRY carried the RESET: the mirror may have recreated its
            // ring by now or may do so before its next HELLO, so the ring is checked at the
            // next cycle, against the inode from before this one.
        } else {
            assert_eq!(
                inode(dst.path()),
                ino,
                "cycle {i}: ring recreated without a RESET"
            );
        }
    }
    // A real serve restarted on the source's address, its ring the same with one more record
    // each time: the mirror resumes (and gets that record) and keeps its ring.
    drop(l);
    let src = ShmPath::new("soak-src");
    let ring = source(src.path(), 64);
    let mut kept = None;
    for r in 0..RESTARTS {
        let seq = 65 + r as u64;
        publish(&ring, seq);
        let mut so = ServeOptions::new(src.path(), addr);
        so.log = false;
        let server = Server::bind(so).expect("serve on the source's address");
        let stop = AtomicBool::new(false);
        std::thread::scope(|sc| {
            let _stop = SetOnDrop(&stop);
            let served = sc.spawn(|| server.run(&stop));
            wait_until("the mirror served", LIMIT, || {
                ReadOnlyRing::open(dst.path()).is_ok_and(|m| m.write_seq() == seq)
            });
            stop.store(true, Ordering::Relaxed);
            served.join().unwrap().expect("serve");
        });
        let now = inode(dst.path());
        if let Some(was) = kept {
            assert_eq!(now, was, "serve restart {r}: the mirror ring recreated");
        }
        kept = Some(now);
    }
    let l = TcpListener::bind(addr).expect("the source's port again");
    let end = hold(
        &l,
        pid,
        dst.path(),
        &format!("mirror after the churn at {base:?}"),
        |u| u.fds <= base.fds && u.threads <= base.threads && u.maps <= warm.maps + MAPS_SLACK,
    );
    assert_rss(warm, end, "mirror");
    assert_eq!(
        shm_files_like(dst.path()),
        [dst.path().file_name().unwrap().to_string_lossy()],
        "files left in /dev/shm"
    );
    let log = mirror.stop();
    let done = log.iter().find(|l| l.contains("mirror: done")).cloned();
    eprintln!(
        "mirror reconnects: start {base:?}, after {WARM_UP} warm-up cycles {warm:?}, after \
         {CHURN} more {end:?}; ring recreated {recreated} times; {done:?}"
    );
}
