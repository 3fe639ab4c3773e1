//! `ringwire serve`: streams a ring to mirrors (spec §19, §20). One thread accepts TCP
//! mirrors and runs one thread per session (at most [`ServeOptions::max_sessions`]); one
//! thread runs the UDP sender (multicast and/or unicast) when UDP is configured.
//!
//! Beyond the reference: a PUNCH is accepted only from the IP of its token's TCP peer, the
//! number of sessions is bounded, and idle threads sleep on the ring's futex (or spin for a
//! bounded, adaptive time with `--spin`) instead of sleep-polling.

use std::io::{self, Read};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration as StdDuration;

use ringwire_core::Expect;
use ringwire_core::replicate::collect::max_frame_len;
use ringwire_core::replicate::udp_sender::UdpCounters;
use ringwire_core::replicate::{
    Duration, Pacing, PeerAddr, RecordSource, RingSource, SourceConfig, SourceCounters,
    SourceSession, TokenRegistry, Transport, UdpConfig, UdpOffer, UdpSender,
};
use ringwire_core::wire::Kind;

use super::ReplicaError;
use super::anticipate::MAX_WINDOW;
use super::faults::Faults;
use super::io::{
    RingWaiter, now, peer, peer_v4, poll, pollin, until, write_all_within, yield_to_receiver,
};
use crate::RingFile;
use crate::net::mmsg::SendMany;
use crate::net::sockets::{MulticastOut, TCP_WRITE_TIMEOUT, is_emsgsize, source_udp, tune_tcp};

/// Unicast mirrors one server can register.
pub const MAX_UNICAST: usize = 64;

/// [`ServeOptions::hello_timeout`] by default: a mirror sends HELLO right after it
/// connects, so this is a round trip plus a great deal of slack.
pub const HELLO_TIMEOUT: StdDuration = StdDuration::from_secs(5);

/// Settings of `ringwire serve` (spec §26.1).
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// The source ring (must exist).
    pub path: PathBuf,
    /// TCP listen address.
    pub bind: SocketAddr,
    /// Multicast group and port.
    pub multicast: Option<SocketAddrV4>,
    /// Multicast sending interface.
    pub iface: Option<Ipv4Addr>,
    /// Datagram budget (clamped to 24..=65536).
    pub mtu: usize,
    /// Multicast TTL.
    pub ttl: u8,
    /// Fixed frame linger in µs; `None` = adaptive.
    pub linger_us: Option<u64>,
    /// Enable unicast from this UDP port (0 = an ephemeral port).
    pub udp: Option<u16>,
    /// Copies of every datagram (1..=255).
    pub dup: u8,
    /// Idle time of the UDP sender before it sends a HEARTBEAT.
    pub heartbeat: StdDuration,
    /// Records per frame (1..=65535).
    pub batch: u16,
    /// Bounded spin before parking when idle.
    pub spin: bool,
    /// Anticipate a steady stream's next record (see [`super::anticipate`]).
    pub anticipate: bool,
    /// Serve one mirror on the calling thread and return when it disconnects.
    pub once: bool,
    /// Most concurrent TCP sessions; more are refused with a log line.
    pub max_sessions: usize,
    /// A connection that has not sent its HELLO this long after it was accepted is closed
    /// (and logged): it would otherwise hold one of [`ServeOptions::max_sessions`] forever.
    /// Zero waits forever, as ringfire's server does. Default [`HELLO_TIMEOUT`].
    pub hello_timeout: StdDuration,
    /// Print startup, status and session lines on stderr.
    pub log: bool,
    /// Fault injection for tests (ringfire's `MulticastConfig::drop_every`): the UDP sender
    /// skips every n-th DATA datagram, all its copies to every destination; mirrors recover
    /// the records by NAK. 0 (the default) never.
    pub drop_every: u64,
    /// Fault injection for tests (ringfire's `MulticastConfig::swap_every`): the UDP sender
    /// sends every n-th DATA datagram right after the one that follows it, so mirrors see
    /// them out of order. 0 (the default) never.
    pub swap_every: u64,
}

impl ServeOptions {
    /// Defaults for `path` and `bind`.
    pub fn new(path: impl Into<PathBuf>, bind: SocketAddr) -> ServeOptions {
        ServeOptions {
            path: path.into(),
            bind,
            multicast: None,
            iface: None,
            mtu: 1472,
            ttl: 1,
            linger_us: None,
            udp: None,
            dup: 1,
            heartbeat: StdDuration::from_millis(1),
            batch: 256,
            spin: false,
            anticipate: true,
            once: false,
            max_sessions: 64,
            hello_timeout: HELLO_TIMEOUT,
            log: true,
            drop_every: 0,
            swap_every: 0,
        }
    }
}

/// What a server did, summed over its sessions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServeSummary {
    /// Sessions served.
    pub sessions: u64,
    /// Connections refused because `max_sessions` were active.
    pub refused: u64,
    /// Records sent over TCP (live TCP mode and NAK answers).
    pub tcp_records: u64,
    /// NAKs received.
    pub naks: u64,
    /// GAP frames sent.
    pub gaps: u64,
    /// Sessions that ended with a protocol error.
    pub protocol_errors: u64,
    /// Sessions ended because the mirror did not read within the write timeout.
    pub write_timeouts: u64,
    /// Connections closed because no HELLO came within [`ServeOptions::hello_timeout`].
    pub hello_timeouts: u64,
    /// UDP datagrams the kernel refused to send (one per destination and copy; EMSGSIZE,
    /// which lowers the datagram budget instead, is not counted).
    pub udp_send_errors: u64,
    /// The UDP sender's counters.
    pub udp: UdpCounters,
}

#[derive(Default)]
struct Totals {
    sessions: AtomicU64,
    refused: AtomicU64,
    tcp_records: AtomicU64,
    naks: AtomicU64,
    gaps: AtomicU64,
    protocol_errors: AtomicU64,
    write_timeouts: AtomicU64,
    hello_timeouts: AtomicU64,
    udp_send_errors: AtomicU64,
}

/// A bound server, ready to [`Server::run`].
pub struct Server {
    opts: ServeOptions,
    ring: RingFile,
    listener: TcpListener,
    udp: Option<UdpSocket>,
    cfg: SourceConfig,
    sender: Mutex<UdpSender<MAX_UNICAST>>,
    totals: Totals,
}

/// Bytes a session reads from its mirror per pass of its loop (HELLO and NAKs are small).
const SESSION_READ_PASS: usize = 256 * 1024;

/// How often the accept loop checks whether the ring's path names a new ring.
const REPLACED_CHECK: StdDuration = StdDuration::from_millis(500);

/// Serves `opts.path` until `stop`, following the path: when the ring there is replaced by a
/// new one (a restarted producer, or a hub whose mirror recreated its ring for a restarted
/// source), every session ends, the new ring is opened and served on the same addresses,
/// and mirrors reconnect and see the new ring (spec §21.1 restart detection). `on_replaced`
/// is told each time. Returns the counters of the last ring served.
pub fn run_following(
    opts: &ServeOptions,
    stop: &AtomicBool,
    mut on_replaced: impl FnMut(&Path),
) -> Result<ServeSummary, ReplicaError> {
    loop {
        // The new ring may still be being created (magic last): retry briefly.
        let mut tries = 0;
        let server = loop {
            match Server::bind(opts.clone()) {
                Ok(s) => break s,
                Err(ReplicaError::Ring(_)) if tries < 50 && !stop.load(Ordering::Relaxed) => {
                    tries += 1;
                    std::thread::sleep(StdDuration::from_millis(20));
                }
                Err(e) => return Err(e),
            }
        };
        match server.run(stop) {
            Err(ReplicaError::SourceReplaced { path }) => on_replaced(&path),
            r => return r,
        }
    }
}

fn session_byte() -> u8 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    ((t.subsec_nanos() ^ t.as_secs() as u32) & 0xFF) as u8
}

impl Server {
    /// Opens the ring, binds the listener and the UDP socket.
    pub fn bind(opts: ServeOptions) -> Result<Server, ReplicaError> {
        Server::build(opts, None)
    }

    /// Like [`Server::bind`] but accepts on `listener`, already bound (`opts.bind` is
    /// ignored): a caller can learn the address before it settles the other options.
    pub fn with_listener(
        opts: ServeOptions,
        listener: TcpListener,
    ) -> Result<Server, ReplicaError> {
        Server::build(opts, Some(listener))
    }

    fn build(opts: ServeOptions, listener: Option<TcpListener>) -> Result<Server, ReplicaError> {
        if opts.once && (opts.multicast.is_some() || opts.udp.is_some()) {
            return Err(ReplicaError::arg(
                "--once",
                "with --multicast/--udp",
                "--once serves one TCP mirror only",
            ));
        }
        if let Some(m) = opts.multicast
            && !m.ip().is_multicast()
        {
            return Err(ReplicaError::arg(
                "--multicast",
                m,
                "not an IPv4 multicast group",
            ));
        }
        let ring = RingFile::open(&opts.path, Expect::RAW)?;
        let listener = match listener {
            Some(l) => l,
            None => TcpListener::bind(opts.bind)
                .map_err(|e| ReplicaError::io(format!("bind {}", opts.bind), e))?,
        };
        listener
            .set_nonblocking(true)
            .map_err(|e| ReplicaError::io("listener", e))?;
        let udp = if opts.multicast.is_some() || opts.udp.is_some() {
            let mc = opts.multicast.map(|_| MulticastOut {
                ttl: opts.ttl,
                iface: opts.iface,
            });
            let s = source_udp(opts.udp.unwrap_or(0), mc)
                .map_err(|e| ReplicaError::io("UDP socket", e))?;
            Some(s)
        } else {
            None
        };
        let mtu = opts.mtu.clamp(24, 65_536);
        let udp_port = match &udp {
            Some(s) => s
                .local_addr()
                .map_err(|e| ReplicaError::io("UDP socket", e))?
                .port(),
            None => 0,
        };
        let session = session_byte();
        let pacing = match opts.linger_us {
            Some(us) => Pacing::Fixed {
                linger: Duration::from_micros(us),
            },
            None => Pacing::default(),
        };
        let batch = opts.batch.max(1);
        let announced_mtu = mtu.min(65_535) as u16;
        let cfg = SourceConfig {
            batch,
            pacing,
            unicast: opts.udp.map(|_| UdpOffer {
                group: [0; 4],
                port: udp_port,
                mtu: announced_mtu,
                ttl: 0,
            }),
            multicast: opts.multicast.map(|m| UdpOffer {
                group: m.ip().octets(),
                port: m.port(),
                mtu: announced_mtu,
                ttl: opts.ttl,
            }),
            session,
            ..SourceConfig::default()
        };
        let w = RingSource(*ring.ring()) /* a temporary: `ring` outlives it */
            .write_seq();
        let sender = UdpSender::new(
            UdpConfig {
                multicast: opts.multicast.map(peer_v4),
                mtu,
                duplicate: opts.dup.max(1),
                heartbeat: Duration::from_nanos(
                    u64::try_from(opts.heartbeat.as_nanos()).unwrap_or(u64::MAX),
                ),
                batch,
                pacing,
            },
            session,
            w,
            now(),
        );
        Ok(Server {
            opts,
            ring,
            listener,
            udp,
            cfg,
            sender: Mutex::new(sender),
            totals: Totals::default(),
        })
    }

    /// The TCP address mirrors connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().unwrap_or(self.opts.bind)
    }

    /// The UDP socket's address (unicast mirrors PUNCH it), if UDP is configured.
    pub fn udp_addr(&self) -> Option<SocketAddr> {
        self.udp.as_ref().and_then(|s| s.local_addr().ok())
    }

    /// The session byte.
    pub fn session_byte(&self) -> u8 {
        self.cfg.session
    }

    fn sender(&self) -> MutexGuard<'_, UdpSender<MAX_UNICAST>> {
        // A panicking session thread must not take the server down with it.
        self.sender.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Serves until `stop` is set (or, with `once`, until the one mirror disconnects).
    pub fn run(&self, stop: &AtomicBool) -> Result<ServeSummary, ReplicaError> {
        if self.opts.log {
            let g = self.ring.ring().geometry();
            eprintln!(
                "serve: {} (capacity {}, {} B records) on tcp {}{}{} session {}",
                self.opts.path.display(),
                g.capacity,
                g.record_len(),
                self.local_addr(),
                self.opts
                    .multicast
                    .map(|m| format!(", multicast {m}"))
                    .unwrap_or_default(),
                self.udp_addr()
                    .filter(|_| self.opts.udp.is_some())
                    .map(|a| format!(", unicast udp {}", a.port()))
                    .unwrap_or_default(),
                self.cfg.session
            );
        }
        let halt = AtomicBool::new(false);
        let active = AtomicUsize::new(0);
        std::thread::scope(|sc| -> Result<(), ReplicaError> {
            let udp = self
                .udp
                .as_ref()
                .map(|s| sc.spawn(|| self.udp_loop(s, &halt)));
            let r = self.accept_loop(sc, stop, &halt, &active);
            halt.store(true, Ordering::Relaxed);
            if let Some(h) = udp {
                let _ = h.join();
            }
            r
        })?;
        Ok(self.summary())
    }

    /// Counters so far.
    pub fn summary(&self) -> ServeSummary {
        let t = &self.totals;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ServeSummary {
            sessions: l(&t.sessions),
            refused: l(&t.refused),
            tcp_records: l(&t.tcp_records),
            naks: l(&t.naks),
            gaps: l(&t.gaps),
            protocol_errors: l(&t.protocol_errors),
            write_timeouts: l(&t.write_timeouts),
            hello_timeouts: l(&t.hello_timeouts),
            udp_send_errors: l(&t.udp_send_errors),
            udp: self.sender().counters(),
        }
    }

    fn accept_loop<'s>(
        &'s self,
        sc: &'s std::thread::Scope<'s, '_>,
        stop: &'s AtomicBool,
        halt: &'s AtomicBool,
        active: &'s AtomicUsize,
    ) -> Result<(), ReplicaError> {
        let mut threads = Vec::new();
        let mut last_status = std::time::Instant::now();
        let mut last_check = std::time::Instant::now();
        let mut last = self.summary();
        // Relaxed: a plain flag; whatever it guards is joined afterwards.
        while !stop.load(Ordering::Relaxed) {
            let mut fd = [pollin(&self.listener)];
            poll(&mut fd, StdDuration::from_millis(100))
                .map_err(|e| ReplicaError::io("poll", e))?;
            threads.retain(|h: &std::thread::ScopedJoinHandle<'_, ()>| !h.is_finished());
            if last_check.elapsed() >= REPLACED_CHECK {
                last_check = std::time::Instant::now();
                if self.replaced() {
                    return Err(ReplicaError::SourceReplaced {
                        path: self.opts.path.clone(),
                    });
                }
            }
            if self.opts.log && last_status.elapsed() >= StdDuration::from_secs(1) {
                let s = self.summary();
                eprintln!(
                    "serve: {} mirrors, tcp {} rec/s, udp {} frames/s, naks {}, punches {}, rejected {}, udp send errors {}",
                    active.load(Ordering::Relaxed),
                    s.tcp_records - last.tcp_records,
                    s.udp.data_frames - last.udp.data_frames,
                    s.naks,
                    s.udp.punches,
                    s.udp.rejected,
                    s.udp_send_errors,
                );
                last = s;
                last_status = std::time::Instant::now();
            }
            let (stream, addr) = match self.listener.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // ECONNABORTED, EMFILE…: log and keep serving.
                    if self.opts.log {
                        eprintln!("serve: accept: {e}");
                    }
                    std::thread::sleep(StdDuration::from_millis(10));
                    continue;
                }
            };
            if self.opts.once {
                self.serve_one(stream, addr, stop);
                return Ok(());
            }
            // Relaxed: a count read only by this thread's admission check and status line.
            if active.load(Ordering::Relaxed) >= self.opts.max_sessions {
                self.totals.refused.fetch_add(1, Ordering::Relaxed);
                if self.opts.log {
                    eprintln!(
                        "serve: refusing {addr}: {} sessions already active",
                        self.opts.max_sessions
                    );
                }
                continue;
            }
            active.fetch_add(1, Ordering::Relaxed);
            threads.push(sc.spawn(move || {
                self.serve_one(stream, addr, halt);
                active.fetch_sub(1, Ordering::Relaxed);
            }));
        }
        Ok(())
    }

    /// Whether the path now names another ring file (a removed file is not a replacement:
    /// the frozen ring is still served until a new one appears).
    fn replaced(&self) -> bool {
        matches!(crate::sys::path_id(&self.opts.path), Ok(Some(id)) if id != self.ring.inode())
    }

    fn serve_one(&self, mut stream: TcpStream, addr: SocketAddr, stop: &AtomicBool) {
        self.totals.sessions.fetch_add(1, Ordering::Relaxed);
        let Some(p) = peer(addr) else {
            if self.opts.log {
                // The protocol carries IPv4 addresses (unicast tokens, NAT punching).
                eprintln!(
                    "serve: {addr}: an IPv6 peer; the replication protocol is IPv4 only, closed"
                );
            }
            return;
        };
        if let Err(e) = tune_tcp(&stream).and_then(|_| stream.set_nonblocking(true)) {
            if self.opts.log {
                eprintln!("serve: {addr}: {e}");
            }
            return;
        }
        if self.opts.log {
            eprintln!("serve: mirror {addr} connected");
        }
        let src = RingSource(*self.ring.ring());
        let mut s = SourceSession::new(self.cfg, p, now());
        let mut seen = SourceCounters::default();
        let end = self.session_loop(&mut s, &mut stream, &src, stop, &mut seen);
        self.account(s.counters(), &mut seen);
        if let Some(t) = s.token() {
            self.sender().unregister(t);
        }
        let c = s.counters();
        if self.opts.log {
            eprintln!(
                "serve: mirror {addr} ({:?}) ended: {end}; sent {} records, {} gaps, {} naks answered",
                s.transport(),
                c.records,
                c.gaps,
                c.naks
            );
        }
    }

    fn session_loop(
        &self,
        s: &mut SourceSession,
        stream: &mut TcpStream,
        src: &RingSource,
        stop: &AtomicBool,
        seen: &mut SourceCounters,
    ) -> String {
        let unicast = self.cfg.unicast.is_some();
        let mut rbuf = [0u8; 4096];
        // Room for the longest frame the ring can need: a record longer than the 1 MiB
        // budget goes alone (spec §22) instead of becoming a GAP. Zeroed pages of a large
        // buffer stay untouched until such a record comes.
        let mut buf = vec![0u8; max_frame_len(&src.geometry(), self.cfg.tcp_budget)];
        let mut waiter = RingWaiter::new(self.opts.spin, self.opts.anticipate);
        let mut live = false;
        // The mirror has shut down its write side (read returned 0).
        let mut eof = false;
        let accepted = std::time::Instant::now();
        let hello_timeout = self.opts.hello_timeout;
        // Relaxed: a plain flag.
        while !stop.load(Ordering::Relaxed) {
            // Nothing has been sent before the HELLO is in (GEOMETRY answers it).
            if !live && !hello_timeout.is_zero() && accepted.elapsed() >= hello_timeout {
                self.totals.hello_timeouts.fetch_add(1, Ordering::Relaxed);
                return format!(
                    "no HELLO {} ms after connecting (hello timeout {} ms)",
                    accepted.elapsed().as_millis(),
                    hello_timeout.as_millis()
                );
            }
            // A peer that writes without pause (a NAK flood) must not keep the session
            // from the stop flag and its own sending: the rest waits for the next pass.
            let mut read = 0usize;
            while !eof && read < SESSION_READ_PASS {
                match stream.read(&mut rbuf) {
                    Ok(0) => eof = true,
                    Ok(n) => {
                        read += n;
                        let r = if unicast {
                            let mut g = self.sender();
                            let reg: &mut dyn TokenRegistry = &mut *g;
                            s.handle_stream(now(), &rbuf[..n], src, Some(reg))
                        } else {
                            s.handle_stream(now(), &rbuf[..n], src, None)
                        };
                        if let Err(e) = r {
                            self.totals.protocol_errors.fetch_add(1, Ordering::Relaxed);
                            return e.to_string();
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return e.to_string(),
                }
            }
            let mut sent = false;
            while let Some(n) = s.poll_transmit(now(), src, &mut buf) {
                if !live && self.opts.log {
                    // Which transport the mirror got: one that asked for unicast gets
                    // multicast or TCP when all MAX_UNICAST tokens are taken.
                    match stream.peer_addr() {
                        Ok(a) => eprintln!("serve: mirror {a} live over {:?}", s.transport()),
                        Err(_) => eprintln!("serve: a mirror live over {:?}", s.transport()),
                    }
                }
                live = true;
                sent = true;
                if let Err(e) = write_all_within(stream, &buf[..n], TCP_WRITE_TIMEOUT) {
                    if e.kind() == io::ErrorKind::TimedOut {
                        self.totals.write_timeouts.fetch_add(1, Ordering::Relaxed);
                    }
                    return format!("write: {e}");
                }
            }
            if sent {
                yield_to_receiver();
            }
            self.account(s.counters(), seen);
            // A TCP-mode source never reads after HELLO (spec §19.3), so a mirror that
            // half-closes its side after HELLO is still served, as by ringfire; one that is
            // really gone resets the connection on the next write (a heartbeat at the
            // latest), seen below or as that write's error. Before HELLO, and in UDP modes,
            // whose sessions read NAKs, EOF ends the session.
            let tcp_live = live && s.transport() == Transport::Tcp;
            if eof && !tcp_live {
                return "disconnected".into();
            }
            if eof && reset(stream) {
                return "disconnected (reset after it closed its write side)".into();
            }
            let t = now();
            if tcp_live {
                // Sleep on the ring; check the socket (EOF) at least every few ms.
                let max = until(t, s.poll_timeout(), StdDuration::from_millis(5));
                waiter.wait(self.ring.ring(), s.cursor(), max);
            } else {
                // Awaiting HELLO, or a UDP-mode session that only answers NAKs.
                let max = until(t, s.poll_timeout(), StdDuration::from_millis(50));
                let mut fd = [pollin(stream)];
                if let Err(e) = poll(&mut fd, max) {
                    return e.to_string();
                }
            }
        }
        "server stopping".into()
    }

    /// Adds what a session did since `seen` to the totals (for the live status line).
    fn account(&self, c: SourceCounters, seen: &mut SourceCounters) {
        let t = &self.totals;
        // Relaxed: statistics only.
        t.tcp_records
            .fetch_add(c.records - seen.records, Ordering::Relaxed);
        t.naks.fetch_add(c.naks - seen.naks, Ordering::Relaxed);
        t.gaps.fetch_add(c.gaps - seen.gaps, Ordering::Relaxed);
        *seen = c;
    }

    fn udp_loop(&self, sock: &UdpSocket, halt: &AtomicBool) {
        let src = RingSource(*self.ring.ring());
        let mut buf = vec![0u8; 65_536];
        let mut rbuf = [0u8; 64];
        let mut dests: Vec<SocketAddrV4> = Vec::with_capacity(MAX_UNICAST + 1);
        let mut out = SendMany::with_capacity(MAX_UNICAST + 1);
        let mut faults = Faults::new(self.opts.drop_every, self.opts.swap_every);
        let mut errs = SendErrors::new(&self.totals.udp_send_errors, self.opts.log);
        let mut waiter = RingWaiter::new(self.opts.spin, self.opts.anticipate);
        // Relaxed: a plain flag.
        while !halt.load(Ordering::Relaxed) {
            // PUNCH intake, bounded per iteration.
            for _ in 0..64 {
                match sock.recv_from(&mut rbuf) {
                    Ok((n, from)) => {
                        let from = peer(from).unwrap_or(PeerAddr::new([0; 4], 0));
                        let _ = self.sender().handle_datagram(now(), from, &rbuf[..n]);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    // ICMP errors from earlier sends (ECONNREFUSED) and the like.
                    Err(_) => {}
                }
            }
            let mut sent_any = false;
            for _ in 0..256 {
                let len = {
                    let mut g = self.sender();
                    let Some(len) = g.poll_transmit(now(), &src, &mut buf) else {
                        break;
                    };
                    dests.clear();
                    dests.extend(g.destinations().map(super::io::sock_v4));
                    len
                };
                sent_any = true;
                let frame = &buf[..len];
                // Off, this is the only cost of fault injection: one predictable branch.
                let data = faults.on && frame.first() == Some(&(Kind::Data as u8));
                if data && !faults.admit(frame) {
                    continue;
                }
                if self.deliver(sock, &mut out, frame, &dests, &mut errs)
                    && data
                    && let Some(late) = faults.take_held()
                {
                    self.deliver(sock, &mut out, late, &dests, &mut errs);
                }
            }
            if sent_any {
                yield_to_receiver();
            } else {
                let (cursor, at, lingering) = {
                    let g = self.sender();
                    (g.cursor(), g.poll_timeout(), g.linger_deadline().is_some())
                };
                let mut max = until(now(), at, StdDuration::from_millis(1));
                if !lingering && let Some(left) = waiter.window_left() {
                    // A heartbeat that falls due while the next record is anticipated waits
                    // for the window's end (at most MAX_WINDOW later than the 1 ms): the
                    // record, if it comes, makes it unnecessary and is not sent behind it.
                    max = max.max(left.min(MAX_WINDOW));
                }
                waiter.wait(self.ring.ring(), cursor, max);
            }
        }
    }

    /// [`deliver`], lowering the sender's datagram budget on EMSGSIZE (spec §20.3).
    fn deliver(
        &self,
        sock: &UdpSocket,
        out: &mut SendMany,
        frame: &[u8],
        dests: &[SocketAddrV4],
        errs: &mut SendErrors<'_>,
    ) -> bool {
        let ok = deliver(sock, out, frame, dests, self.opts.dup, errs);
        if !ok {
            self.sender().handle_emsgsize(frame.len());
        }
        ok
    }
}

/// Whether `stream` has been reset or closed in both directions (POLLERR or POLLHUP),
/// checked without waiting.
fn reset(stream: &TcpStream) -> bool {
    let mut fd = [libc::pollfd {
        fd: std::os::fd::AsRawFd::as_raw_fd(stream),
        events: 0,
        revents: 0,
    }];
    poll(&mut fd, StdDuration::ZERO).is_ok_and(|n| n > 0)
        && fd[0].revents & (libc::POLLERR | libc::POLLHUP) != 0
}

/// Sends `frame` `dup` times (at least once) to every destination. A destination the
/// kernel refuses is skipped, counted and logged in `errs`: the others still get every
/// copy. False, with nothing more sent, on EMSGSIZE: the frame is too long for the path,
/// whichever the destination.
fn deliver(
    sock: &UdpSocket,
    out: &mut SendMany,
    frame: &[u8],
    dests: &[SocketAddrV4],
    dup: u8,
    errs: &mut SendErrors<'_>,
) -> bool {
    let mut too_long = false;
    for _ in 0..dup.max(1) {
        out.send(sock, frame, dests, |to, e| {
            if is_emsgsize(&e) {
                too_long = true;
                return false;
            }
            errs.record(to, &e);
            true
        });
        if too_long {
            return false;
        }
    }
    true
}

/// How often a UDP send error already logged may be logged again (with the count since).
const SEND_ERROR_LOG_EVERY: StdDuration = StdDuration::from_secs(10);
/// Distinct errors whose log lines are rate-limited separately; others are only counted.
const SEND_ERROR_KINDS: usize = 16;

/// UDP send failures of the sender thread: each counted in the server's totals, and
/// each kind of error (errno) logged the first time it happens, then at most once every
/// [`SEND_ERROR_LOG_EVERY`] with the number since.
struct SendErrors<'a> {
    count: &'a AtomicU64,
    log: bool,
    /// (errno, when last logged, failures since then).
    seen: Vec<(i32, std::time::Instant, u64)>,
}

impl<'a> SendErrors<'a> {
    fn new(count: &'a AtomicU64, log: bool) -> SendErrors<'a> {
        SendErrors {
            count,
            log,
            seen: Vec::with_capacity(SEND_ERROR_KINDS),
        }
    }

    fn record(&mut self, to: SocketAddrV4, e: &io::Error) {
        // Relaxed: statistics only.
        self.count.fetch_add(1, Ordering::Relaxed);
        if !self.log {
            return;
        }
        let errno = e.raw_os_error().unwrap_or(-1);
        let now = std::time::Instant::now();
        let room = self.seen.len() < SEND_ERROR_KINDS;
        match self.seen.iter_mut().find(|s| s.0 == errno) {
            None if room => {
                self.seen.push((errno, now, 0));
                eprintln!(
                    "serve: UDP send to {to} failed: {e}; the other destinations still get the datagram, and further failures are counted (udp send errors)"
                );
            }
            None => {}
            Some(s) if now.duration_since(s.1) >= SEND_ERROR_LOG_EVERY => {
                eprintln!(
                    "serve: UDP send to {to} failed: {e} ({} more such failures in the last {} s)",
                    s.2,
                    now.duration_since(s.1).as_secs()
                );
                s.1 = now;
                s.2 = 0;
            }
            Some(s) => s.2 += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(s: &UdpSocket) -> SocketAddrV4 {
        match s.local_addr().unwrap() {
            SocketAddr::V4(a) => a,
            a => panic!("not v4: {a}"),
        }
    }

    /// A destination the kernel refuses at once (port 0: EINVAL) in the middle of the list:
    /// the destinations after it still get every copy, and each failed copy is counted.
    #[test]
    fn a_failing_destination_is_counted_and_skipped() {
        let rx: Vec<UdpSocket> = (0..2)
            .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
            .collect();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let dests = [
            v4(&rx[0]),
            SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0),
            v4(&rx[1]),
        ];
        let count = AtomicU64::new(0);
        let mut errs = SendErrors::new(&count, false);
        let mut out = SendMany::default();
        assert!(deliver(&tx, &mut out, &[5u8; 32], &dests, 3, &mut errs));
        assert_eq!(count.load(Ordering::Relaxed), 3, "one failure per copy");
        let mut buf = [0u8; 64];
        for r in &rx {
            r.set_read_timeout(Some(StdDuration::from_secs(2))).unwrap();
            for copy in 0..3 {
                assert_eq!(r.recv_from(&mut buf).unwrap().0, 32, "copy {copy}");
            }
        }
    }

    /// Each kind of error is logged once, then rate-limited: later ones are only counted.
    #[test]
    fn send_errors_are_logged_once_per_kind() {
        let count = AtomicU64::new(0);
        let mut errs = SendErrors::new(&count, true);
        let to = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9);
        for _ in 0..5 {
            errs.record(to, &io::Error::from_raw_os_error(libc::EINVAL));
            errs.record(to, &io::Error::from_raw_os_error(libc::ENETUNREACH));
        }
        assert_eq!(count.load(Ordering::Relaxed), 10);
        let kinds: Vec<(i32, u64)> = errs.seen.iter().map(|s| (s.0, s.2)).collect();
        assert_eq!(kinds, [(libc::EINVAL, 4), (libc::ENETUNREACH, 4)]);
    }
}
