//! ringfire's in-process replication API (`ReplicaServer`, `Mirror` and their settings) as a
//! thin layer over this crate's drivers, [`super::serve`] and [`super::mirror`], so that a
//! program serving or mirroring a ring in-process builds against either crate.
//!
//! Differences a caller can observe, all from running on the drivers:
//! - [`Mirror::connect`] starts the copy on a helper thread as soon as the handshake is done;
//!   [`Mirror::run`] waits for that thread. Records therefore reach the mirror ring between
//!   `connect` and `run` too, and [`Mirror::step`] copies nothing itself: it waits, at most
//!   [`Mirror::STEP_WAIT`], for the thread's progress, and reports its end.
//! - [`MirrorHandle::shutdown`] stops the mirror within about 100 ms instead of closing its
//!   socket; `run` then returns `Ok(())` as it does when the source hangs up.
//! - Counters read while the mirror runs may trail it by a few batches (see
//!   [`MirrorProgress`]); after `run` they are exact.
//! - A source that breaks the protocol ends `run` (or `step`, or `connect` during the
//!   handshake) with an error naming the source and what it sent, as one that hangs up
//!   after the handshake ends it with `Ok(())`. So does a source that stays silent: no
//!   GEOMETRY within [`MirrorOptions::handshake_timeout`], or nothing at all (no record, no
//!   heartbeat) for [`MirrorOptions::silence_timeout`] after it; ringfire's mirror waits
//!   forever.
//! - [`ReplicaServer::run`] can be stopped, through [`ReplicaServer::shutdown_handle`].
//!   When the served path comes to name a new ring (a restarted producer), it ends every
//!   session and serves the new ring on the same address, over UDP too; ringfire's server
//!   serves the new ring only to connections made after the restart, over TCP.
//! - `MulticastConfig`'s fault-injection knobs (`drop_every`, `swap_every`) are counted as
//!   ringfire counts them ([`ServeOptions::drop_every`]) and, as there, apply to unicast
//!   mirrors too, but only when multicast is configured.
//!
//! [`MirrorProgress`]: super::mirror::MirrorProgress

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use ringwire_core::replicate::Start;
use ringwire_core::wire::GeometryRepr;

use super::ReplicaError;
use super::mirror::{self, MirrorOptions, MirrorProgress, MirrorSnapshot, MirrorSummary};
use super::serve::{ServeOptions, Server};
use crate::ReadOnlyRing;

/// Datagram budgets ringfire accepts: a frame header plus one word, up to 64 KiB.
const MTU_RANGE: (usize, usize) = (24, 65_536);
/// ringfire's default datagram budget (a 1500-byte link).
const DEFAULT_MTU: usize = 1472;
/// The mirror's default UDP receive buffer (the driver's own).
const DEFAULT_RCVBUF: usize = 8 << 20;

/// The source ring's layout as the handshake announces it: what a mirror needs to build an
/// identical ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Slots in the ring (a power of two).
    pub capacity: u64,
    /// Slot size in bytes, the 8-byte sequence word included.
    pub element_size: u32,
    /// The source ring's header flags.
    pub flags: u32,
    /// Schema signature (0 = none).
    pub schema_sig: u64,
    /// Reader registry slots.
    pub registry_count: u32,
    /// Byte offset of the first slot.
    pub slots_offset: u32,
    /// Byte offset of the blob arena (0 = fixed-size records only).
    pub arena_offset: u64,
    /// Blob arena capacity in bytes (0 = none).
    pub arena_size: u64,
}

impl Geometry {
    /// Record bytes per slot, without the sequence word (for a blob ring: the descriptor).
    pub fn payload_len(&self) -> usize {
        (self.element_size as usize).saturating_sub(8)
    }

    /// Whether records carry variable-length bytes in an arena.
    pub fn has_arena(&self) -> bool {
        self.arena_offset != 0
    }
}

impl From<&GeometryRepr> for Geometry {
    fn from(g: &GeometryRepr) -> Geometry {
        Geometry {
            capacity: g.capacity,
            element_size: g.element_size,
            flags: g.ring_flags,
            schema_sig: g.schema_sig,
            registry_count: g.registry_count,
            slots_offset: g.slots_offset,
            arena_offset: g.arena_offset,
            arena_size: g.arena_size,
        }
    }
}

/// Where a [`ReplicaServer`] sends live records by UDP multicast.
#[derive(Debug, Clone, Copy)]
pub struct MulticastConfig {
    /// The IPv4 multicast group.
    pub group: Ipv4Addr,
    /// The group's UDP port.
    pub port: u16,
    /// Local address of the sending interface; unspecified lets the routing table choose.
    pub interface: Ipv4Addr,
    /// Datagram budget, frame header included.
    pub mtu: usize,
    /// Multicast TTL (0 keeps datagrams on this host).
    pub ttl: u8,
    /// How long the sender may stay silent before a HEARTBEAT, which lets mirrors notice a
    /// lost last datagram.
    pub heartbeat: Duration,
    /// Fault injection for tests: skip every n-th DATA datagram (0 = never). Applies to
    /// every UDP destination, unicast mirrors too; see [`ServeOptions::drop_every`].
    #[doc(hidden)]
    pub drop_every: u64,
    /// Fault injection for tests: send every n-th DATA datagram after the one that follows
    /// it (0 = never), so mirrors see datagrams out of order; see
    /// [`ServeOptions::swap_every`].
    #[doc(hidden)]
    pub swap_every: u64,
}

impl MulticastConfig {
    /// `group:port` with a 1472-byte budget, TTL 1, the default interface and 1 ms
    /// heartbeats.
    pub fn new(group: Ipv4Addr, port: u16) -> Self {
        MulticastConfig {
            group,
            port,
            interface: Ipv4Addr::UNSPECIFIED,
            mtu: DEFAULT_MTU,
            ttl: 1,
            heartbeat: Duration::from_millis(1),
            drop_every: 0,
            swap_every: 0,
        }
    }

    /// Sends from the interface with this address (one this host has: another is refused
    /// when the server starts).
    pub fn interface(mut self, interface: Ipv4Addr) -> Self {
        self.interface = interface;
        self
    }

    /// Sets the datagram budget (kept within 24..=65536 bytes).
    pub fn mtu(mut self, mtu: usize) -> Self {
        self.mtu = mtu.clamp(MTU_RANGE.0, MTU_RANGE.1);
        self
    }

    /// Sets the TTL.
    pub fn ttl(mut self, ttl: u8) -> Self {
        self.ttl = ttl;
        self
    }

    /// Sets the longest silence before a HEARTBEAT (at least 100 µs,
    /// `ringwire_core::replicate::MIN_HEARTBEAT`).
    pub fn heartbeat(mut self, heartbeat: Duration) -> Self {
        self.heartbeat = heartbeat;
        self
    }

    /// Fault injection for tests: skips every `n`-th DATA datagram, counted from 1 over the
    /// DATA datagrams the server builds (0 = never), as ringfire does.
    #[doc(hidden)]
    pub fn drop_every(mut self, n: u64) -> Self {
        self.drop_every = n;
        self
    }

    /// Fault injection for tests: sends every `n`-th DATA datagram right after the next one
    /// (0 = never), as ringfire does.
    #[doc(hidden)]
    pub fn swap_every(mut self, n: u64) -> Self {
        self.swap_every = n;
        self
    }
}

/// Serves one ring to mirrors over TCP, and optionally UDP multicast and/or unicast: the
/// settings of ringfire's server, run by [`Server`].
#[derive(Debug)]
pub struct ReplicaServer {
    listener: TcpListener,
    /// The driver's settings, kept up to date by the setters (`once` and `mtu` are settled
    /// per call, see [`ReplicaServer::options`]).
    opts: ServeOptions,
    /// The datagram budgets given with `multicast` and `unicast`: the smaller one applies.
    multicast_mtu: Option<usize>,
    unicast_mtu: Option<usize>,
    stop: Arc<AtomicBool>,
}

/// Stops a [`ReplicaServer`] from another thread (ringwire only: ringfire's server runs
/// until the process ends).
#[derive(Debug, Clone)]
pub struct ReplicaServerHandle {
    stop: Arc<AtomicBool>,
}

impl ReplicaServerHandle {
    /// Makes `run`, `serve_one` and the thread of `spawn` return `Ok(())` within about
    /// 100 ms, ending every session; later calls return at once.
    pub fn shutdown(&self) {
        // Relaxed: a plain flag; the server's threads are joined before run returns.
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl ReplicaServer {
    /// Checks that a ring exists at `ring_path` and listens on `addr`; nothing is served
    /// before [`ReplicaServer::run`] (or `serve_one`, `spawn`).
    pub fn bind<P: AsRef<Path>, A: ToSocketAddrs>(
        ring_path: P,
        addr: A,
    ) -> Result<Self, ReplicaError> {
        let ring_path = ring_path.as_ref();
        // A check only: read access is enough, as it is to serve (spec §1.1).
        crate::ReadOnlyRing::open(ring_path)?;
        let listener = TcpListener::bind(addr).map_err(|e| ReplicaError::io("bind", e))?;
        let bind = listener
            .local_addr()
            .map_err(|e| ReplicaError::io("bind", e))?;
        let mut opts = ServeOptions::new(ring_path, bind);
        opts.log = false;
        Ok(ReplicaServer {
            listener,
            opts,
            multicast_mtu: None,
            unicast_mtu: None,
            stop: Arc::new(AtomicBool::new(false)),
        })
    }

    /// Also sends live records by UDP unicast from `port` (0 = any free port) to each mirror
    /// that asks, in datagrams of at most `mtu` bytes. With multicast too, the smaller of
    /// the two budgets applies to both.
    pub fn unicast(mut self, port: u16, mtu: usize) -> Self {
        self.opts.udp = Some(port);
        self.unicast_mtu = Some(mtu.clamp(MTU_RANGE.0, MTU_RANGE.1));
        self
    }

    /// Sends every datagram `copies` times (at least once).
    pub fn duplicate(mut self, copies: u8) -> Self {
        self.opts.dup = copies.max(1);
        self
    }

    /// How long a frame may wait for more records: `Some(d)` fixed (whole microseconds, at
    /// most 1 s: a longer one waits 1 s), `None` (the default) the driver's adaptive pacing.
    pub fn linger(mut self, linger: Option<Duration>) -> Self {
        self.opts.linger_us = linger.map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
        self
    }

    /// Most records per DATA frame (1..=65535, default 256).
    pub fn batch(mut self, batch: usize) -> Self {
        self.opts.batch = batch.clamp(1, u16::MAX as usize) as u16;
        self
    }

    /// Polls the ring for a bounded, adaptive time before sleeping when idle.
    pub fn spin(mut self, spin: bool) -> Self {
        self.opts.spin = spin;
        self
    }

    /// Sends live records to a multicast group; TCP then carries the handshake and
    /// retransmissions.
    pub fn multicast(mut self, config: MulticastConfig) -> Self {
        self.opts.multicast = Some(SocketAddrV4::new(config.group, config.port));
        self.opts.iface = (!config.interface.is_unspecified()).then_some(config.interface);
        self.opts.ttl = config.ttl;
        self.opts.heartbeat = config.heartbeat;
        self.opts.drop_every = config.drop_every;
        self.opts.swap_every = config.swap_every;
        self.multicast_mtu = Some(config.mtu);
        self
    }

    /// The TCP address mirrors connect to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The served ring.
    pub fn ring_path(&self) -> &Path {
        &self.opts.path
    }

    /// A handle that stops this server (ringwire only).
    pub fn shutdown_handle(&self) -> ReplicaServerHandle {
        ReplicaServerHandle {
            stop: self.stop.clone(),
        }
    }

    /// The driver's settings for one `run` (`once` false) or `serve_one` (`once` true,
    /// TCP only, like ringfire's).
    fn options(&self, once: bool) -> ServeOptions {
        let mut o = self.opts.clone();
        o.once = once;
        if once {
            o.multicast = None;
            o.udp = None;
        }
        o.mtu = match (
            o.multicast.and(self.multicast_mtu),
            o.udp.and(self.unicast_mtu),
        ) {
            (Some(m), Some(u)) => m.min(u),
            (Some(m), None) | (None, Some(m)) => m,
            (None, None) => DEFAULT_MTU,
        };
        o
    }

    fn serve(&self, once: bool) -> Result<(), ReplicaError> {
        let listener = self
            .listener
            .try_clone()
            .map_err(|e| ReplicaError::io("listener", e))?;
        let opts = self.options(once);
        let server = Server::with_listener(opts.clone(), listener)?;
        crate::replica::serve::follow_from(server, &opts, &self.stop, |_| {}).map(drop)
    }

    /// Serves every mirror that connects, each on its own thread, until
    /// [`ReplicaServerHandle::shutdown`].
    ///
    /// When the ring's path comes to name a new ring (its producer restarted), every
    /// session ends and the new ring is served on the same address: mirrors reconnect and
    /// find the new ring (spec §21.5), as ringfire's server, which opens the ring again for
    /// every connection, lets them. (Its sessions already running go on sending the old
    /// ring, which never advances, and its UDP sender stays on the old ring.) Mirrors that
    /// connect while the path has no ring yet are refused. Fails if the ring is not there
    /// when `run` starts.
    pub fn run(&self) -> Result<(), ReplicaError> {
        self.serve(false)
    }

    /// Serves the first mirror that connects on the calling thread, over TCP only, and
    /// returns when it disconnects (or at shutdown). As ringfire's, it serves the ring at
    /// the path when the mirror connects, a new one if the producer restarted meanwhile;
    /// one replaced during the session ends it, and the mirror that reconnects is served
    /// the new ring instead. `Ok` when the mirror went away,
    /// [`ReplicaError::SessionFailed`] when its session ended in an error (a protocol
    /// error, no HELLO in time, a write that timed out), as ringfire's `serve_one` returns
    /// such errors.
    pub fn serve_one(&self) -> Result<(), ReplicaError> {
        self.serve(true)
    }

    /// [`ReplicaServer::run`] on a new thread.
    pub fn spawn(self) -> io::Result<JoinHandle<Result<(), ReplicaError>>> {
        std::thread::Builder::new()
            .name("ringwire-serve".into())
            .spawn(move || self.run())
    }
}

/// Where a new mirror begins in the source's stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MirrorStart {
    /// Records published after the handshake.
    #[default]
    Latest,
    /// The oldest record the source still holds, then live.
    Oldest,
    /// After the last record of the mirror ring already at the path, or `Oldest` if none.
    Resume,
    /// This sequence, or the oldest the source still holds if that is later.
    Sequence(u64),
}

impl From<MirrorStart> for Start {
    fn from(s: MirrorStart) -> Start {
        match s {
            MirrorStart::Latest => Start::Latest,
            MirrorStart::Oldest => Start::Oldest,
            MirrorStart::Resume => Start::Resume,
            MirrorStart::Sequence(n) => Start::Sequence(n),
        }
    }
}

/// Settings of a [`Mirror`], ended by [`MirrorBuilder::connect`].
#[derive(Debug, Clone, Copy)]
pub struct MirrorBuilder {
    start: MirrorStart,
    spin: bool,
    file_mode: u32,
    interface: Ipv4Addr,
    rcvbuf: usize,
    nak_timeout: Duration,
    unicast: bool,
    handshake_timeout: Duration,
    silence_timeout: Duration,
}

impl Default for MirrorBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl MirrorBuilder {
    /// Latest records, no spinning, mode 0o660, any interface, 8 MiB receive buffer,
    /// NAKs repeated every 20 ms.
    pub fn new() -> Self {
        MirrorBuilder {
            start: MirrorStart::Latest,
            spin: false,
            file_mode: 0o660,
            interface: Ipv4Addr::UNSPECIFIED,
            rcvbuf: DEFAULT_RCVBUF,
            nak_timeout: Duration::from_millis(20),
            unicast: false,
            handshake_timeout: mirror::HANDSHAKE_TIMEOUT,
            silence_timeout: mirror::SILENCE_TIMEOUT,
        }
    }

    /// Asks for UDP unicast even from a source that offers multicast (no effect on a
    /// source without unicast).
    pub fn unicast(mut self, prefer: bool) -> Self {
        self.unicast = prefer;
        self
    }

    /// Where the first record comes from.
    pub fn start(mut self, start: MirrorStart) -> Self {
        self.start = start;
        self
    }

    /// Polls the sockets for a bounded, adaptive time before blocking.
    pub fn spin(mut self, spin: bool) -> Self {
        self.spin = spin;
        self
    }

    /// Permission bits of a created mirror ring (the umask applies).
    pub fn file_mode(mut self, mode: u32) -> Self {
        self.file_mode = mode;
        self
    }

    /// Local address of the interface that joins the multicast group (one this host has:
    /// another is refused when the mirror starts, before it connects).
    pub fn interface(mut self, interface: Ipv4Addr) -> Self {
        self.interface = interface;
        self
    }

    /// Receive buffer of the UDP socket, in bytes.
    pub fn rcvbuf(mut self, bytes: usize) -> Self {
        self.rcvbuf = bytes;
        self
    }

    /// How long a NAK waits for its retransmission before it is sent again (at least
    /// 1 ms, `ringwire_core::replicate::mirror::MIN_NAK_TIMEOUT`).
    pub fn nak_timeout(mut self, timeout: Duration) -> Self {
        self.nak_timeout = timeout;
        self
    }

    /// How long `connect` waits for the source's GEOMETRY before it fails (ringwire only;
    /// default 5 s, zero waits forever as ringfire's does). See
    /// [`MirrorOptions::handshake_timeout`].
    pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = timeout;
        self
    }

    /// How long the copy waits with nothing at all from the source (no record, no
    /// heartbeat) before it ends with an error (ringwire only; default 5 s, zero waits
    /// forever as ringfire's does). See [`MirrorOptions::silence_timeout`].
    pub fn silence_timeout(mut self, timeout: Duration) -> Self {
        self.silence_timeout = timeout;
        self
    }

    /// Connects to the server at `source` (IPv4) and returns once the mirror ring at
    /// `ring_path` exists, adopted or created; copying has begun on a helper thread. Fails
    /// if the source refuses the connection, closes it or breaks the protocol before its
    /// GEOMETRY, or does not send it within the handshake timeout.
    pub fn connect<A: ToSocketAddrs, P: AsRef<Path>>(
        self,
        source: A,
        ring_path: P,
    ) -> Result<Mirror, ReplicaError> {
        let addrs = source
            .to_socket_addrs()
            .map_err(|e| ReplicaError::io("resolve the source address", e))?;
        let mut seen = None;
        let source = addrs
            .inspect(|a| seen = Some(*a))
            .find(SocketAddr::is_ipv4)
            .ok_or_else(|| {
                ReplicaError::arg(
                    "source",
                    seen.map_or_else(|| "(no address)".into(), |a| a.to_string()),
                    "an IPv4 address is needed",
                )
            })?;
        let mut o = MirrorOptions::new(source, ring_path.as_ref());
        o.start = self.start.into();
        o.unicast = self.unicast;
        o.iface = self.interface;
        o.spin = self.spin;
        o.once = true;
        o.nak_timeout = self.nak_timeout;
        o.file_mode = self.file_mode;
        o.rcvbuf = (self.rcvbuf != DEFAULT_RCVBUF).then_some(self.rcvbuf);
        o.handshake_timeout = self.handshake_timeout;
        o.silence_timeout = self.silence_timeout;
        o.log = false;
        Mirror::start(o)
    }
}

/// Keeps a local copy of a served ring: the records under the source's sequence numbers,
/// written by [`mirror::run`] on a helper thread. That thread stays in the process that
/// connected: in a child forked from it, the inherited copy's [`Mirror::run`] and
/// [`Mirror::step`] fail, and dropping it leaves the parent's copy running.
pub struct Mirror {
    opts: MirrorOptions,
    stop: Arc<AtomicBool>,
    progress: Arc<MirrorProgress>,
    thread: Option<JoinHandle<Result<MirrorSummary, ReplicaError>>>,
    /// The GEOMETRY of the first handshake, its `seq` moved past the last record a resumed
    /// ring held (what ringfire reports).
    first: GeometryRepr,
    /// The `seq` that GEOMETRY offered.
    offered: u64,
    /// The progress the last [`Mirror::step`] saw.
    seen: MirrorSnapshot,
    /// The process that started `thread`: a copy inherited through fork has the handle
    /// but not the thread, which `fork` does not copy (see `Mirror::forked_copy`).
    pid: u32,
}

/// Stops a running [`Mirror`] from another thread.
#[derive(Debug, Clone)]
pub struct MirrorHandle {
    stop: Arc<AtomicBool>,
}

impl MirrorHandle {
    /// Ends the mirror: [`Mirror::run`] returns `Ok(())` within about 100 ms (the copy stops
    /// then even if `run` was never called). Never fails; `io::Result` as in ringfire.
    pub fn shutdown(&self) -> io::Result<()> {
        // Relaxed: a plain flag; the thread is joined before anything it wrote is read.
        self.stop.store(true, Ordering::Relaxed);
        Ok(())
    }
}

/// How often `connect` looks whether the handshake is done.
const HANDSHAKE_POLL: Duration = Duration::from_millis(1);

fn joined(
    h: JoinHandle<Result<MirrorSummary, ReplicaError>>,
) -> Result<MirrorSummary, ReplicaError> {
    h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
}

impl Mirror {
    /// [`MirrorBuilder::new`].
    pub fn builder() -> MirrorBuilder {
        MirrorBuilder::new()
    }

    /// Connects with the default settings (latest records only).
    pub fn connect<A: ToSocketAddrs, P: AsRef<Path>>(
        source: A,
        ring_path: P,
    ) -> Result<Self, ReplicaError> {
        MirrorBuilder::new().connect(source, ring_path)
    }

    fn start(opts: MirrorOptions) -> Result<Mirror, ReplicaError> {
        // The last record of a ring a resume may continue, read before the mirror writes.
        let held = match opts.start {
            Start::Resume => ReadOnlyRing::open(&opts.path).map_or(0, |r| r.write_seq()),
            _ => 0,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let progress = Arc::new(MirrorProgress::new());
        let thread = {
            let (opts, stop, progress) = (opts.clone(), stop.clone(), progress.clone());
            std::thread::Builder::new()
                .name("ringwire-mirror".into())
                .spawn(move || mirror::run_observed(&opts, &stop, Some(&progress)))
                .map_err(|e| ReplicaError::io("start the mirror thread", e))?
        };
        loop {
            let seen = progress.snapshot();
            if let Some(mut first) = seen.geometry {
                // A resume asks for the last record it holds again, to check it against the
                // source's copy (see the core mirror's docs): the first record the source
                // sends to be kept is the one after it, as in ringfire.
                let offered = first.seq;
                if seen.resumed {
                    first.seq = first.seq.max(held + 1);
                }
                return Ok(Mirror {
                    opts,
                    stop,
                    progress,
                    thread: Some(thread),
                    first,
                    offered,
                    seen,
                    pid: std::process::id(),
                });
            }
            if thread.is_finished() {
                joined(thread)?;
                return Err(ReplicaError::io(
                    format!("handshake with {}", opts.source),
                    io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the source closed the connection before GEOMETRY",
                    ),
                ));
            }
            crate::sys::sleep(HANDSHAKE_POLL);
        }
    }

    /// A handle that stops this mirror from another thread.
    pub fn handle(&self) -> io::Result<MirrorHandle> {
        Ok(MirrorHandle {
            stop: self.stop.clone(),
        })
    }

    fn snap(&self) -> MirrorSnapshot {
        self.progress.snapshot()
    }

    /// The geometry the source announced.
    pub fn geometry(&self) -> Geometry {
        Geometry::from(&self.snap().geometry.unwrap_or(self.first))
    }

    /// The mirror ring's path.
    pub fn path(&self) -> &Path {
        &self.opts.path
    }

    /// The source's TCP address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.opts.source)
    }

    /// Whether live records come by UDP, multicast or unicast (ringfire's meaning).
    pub fn is_multicast(&self) -> bool {
        self.snap().udp
    }

    /// Whether live records come by UDP unicast.
    pub fn is_unicast(&self) -> bool {
        self.snap().unicast
    }

    /// The session byte of the source's UDP datagrams (0 over TCP).
    pub fn session(&self) -> u8 {
        self.snap().session
    }

    /// The range of the last NAK seen outstanding, if any.
    pub fn last_nak(&self) -> Option<(u64, u64)> {
        self.snap().last_nak
    }

    /// The first sequence the source offered at the handshake: after a resume, the one
    /// after the last record the ring held, as in ringfire; once the resume check has found
    /// a restarted source and recreated the ring (see [`Mirror::resumed`]), the sequence it
    /// offered, the first record of the new ring.
    pub fn first_sequence(&self) -> u64 {
        let s = self.snap();
        if s.handshakes == 1 && !s.resumed {
            self.offered
        } else {
            self.first.seq
        }
    }

    /// Whether the connection kept the ring already at the path instead of creating one:
    /// false from the handshake for a new ring, and from the moment a resume's check finds
    /// that the source restarted and recreates the ring (a verdict that can come after
    /// `connect` returns, with the source's copy of the last record held).
    pub fn resumed(&self) -> bool {
        self.snap().resumed
    }

    /// The last sequence written into the mirror ring.
    pub fn sequence(&self) -> u64 {
        self.snap().last_seq
    }

    /// The highest sequence the source has announced (data or heartbeats).
    pub fn source_sequence(&self) -> u64 {
        let s = self.snap();
        s.source_seq
            .unwrap_or(self.first.seq.saturating_sub(1))
            .max(s.last_seq)
    }

    /// Times the stream jumped forward over records the source no longer had.
    pub fn gaps(&self) -> u64 {
        self.snap().counters.gaps
    }

    /// Frames received over TCP.
    pub fn frames(&self) -> u64 {
        self.snap().counters.frames
    }

    /// UDP datagrams received.
    pub fn datagrams(&self) -> u64 {
        self.snap().counters.datagrams
    }

    /// NAKs sent.
    pub fn naks(&self) -> u64 {
        self.snap().counters.naks_sent
    }

    /// Records that came as retransmissions.
    pub fn retransmitted(&self) -> u64 {
        self.snap().counters.records_retransmitted
    }

    /// Fails when this handle is a copy inherited through `fork`: the copying thread runs in
    /// the process that connected (it goes on filling the ring there), none in this one, so
    /// waiting for it here would never end and its progress here never changes. The
    /// figures (`sequence`, `frames`, …) of such a copy stay those of the fork.
    fn forked_copy(&self) -> Result<(), ReplicaError> {
        if self.pid == std::process::id() {
            return Ok(());
        }
        Err(ReplicaError::io(
            "run the mirror",
            io::Error::other(
                "this Mirror was inherited through fork: its copy runs in the process that \
                 connected it (connect another in this process)",
            ),
        ))
    }

    /// The longest [`Mirror::step`] waits for progress: ringfire's UDP `step` also waits at
    /// most 10 ms for input.
    pub const STEP_WAIT: Duration = Duration::from_millis(10);

    /// Waits until the source closes the connection or [`MirrorHandle::shutdown`]; the
    /// copy itself runs since `connect`. The same as `while self.step()? {}`, but asleep
    /// until the end instead of waking at each step. Once `run` or `step` has seen the end,
    /// returns `Ok(())` at once.
    pub fn run(&mut self) -> Result<(), ReplicaError> {
        self.forked_copy()?;
        match self.thread.take() {
            Some(h) => joined(h).map(drop),
            None => Ok(()),
        }
    }

    /// `Ok(true)` once the mirror has made progress since the last call (records written,
    /// frames or datagrams received, a NAK sent), or after [`Mirror::STEP_WAIT`] without
    /// any while the copy goes on; `Ok(false)` once the copy has ended, because the source
    /// closed the connection or [`MirrorHandle::shutdown`] was called, or the error that
    /// ended it. After the end, `Ok(false)` at once.
    ///
    /// Unlike ringfire's, this `step` copies nothing: the helper thread started by
    /// `connect` does, whether or not `step` is called, so one `step` can return after many
    /// frames, or after none. ringfire's handles one TCP frame (blocking until it comes)
    /// or the datagrams queued (waiting at most 10 ms for them). A loop of `step` calls
    /// ends, as there, when the source hangs up, with every record it sent in the ring.
    pub fn step(&mut self) -> Result<bool, ReplicaError> {
        self.forked_copy()?;
        let Some(h) = &self.thread else {
            return Ok(false);
        };
        if !h.is_finished() {
            self.seen = self.progress.wait_changed(&self.seen, Self::STEP_WAIT);
            if !self.progress.ended() {
                return Ok(true);
            }
        }
        // The driver has returned: its thread ends right after.
        self.run().map(|()| false)
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        if self.forked_copy().is_err() {
            // The thread is the parent's: nothing to stop or join here (a join would wait
            // for, or fail on, a thread this process does not have). Its state, shared
            // with the thread through `Arc`s, is left allocated.
            std::mem::forget(self.thread.take());
            return;
        }
        // Relaxed: a plain flag; joined right after.
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
    }
}

impl std::fmt::Debug for Mirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.snap();
        f.debug_struct("Mirror")
            .field("source", &self.opts.source)
            .field("path", &self.opts.path)
            .field("sequence", &s.last_seq)
            .field("udp", &s.udp)
            .field("unicast", &s.unicast)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::test_fork::{assert_exited_0, forked};

    /// A [`Mirror`] inherited through fork has no copying thread in the child (fork copies
    /// only the forking thread). Before, `step` on the copy reported progress every 10 ms
    /// for good, and dropping it joined a thread the child does not have: the join panicked
    /// ("threads should not terminate unexpectedly") inside the drop. Now the drop leaves
    /// the thread alone and `run` and `step` fail with an error that says why, while the
    /// parent's mirror goes on copying.
    #[test]
    fn a_forked_childs_copy_of_a_mirror_neither_hangs_nor_claims_progress() {
        let (src, dst) = (
            crate::test_tmp::TmpPath::new("compat-fork-src"),
            crate::test_tmp::TmpPath::new("compat-fork-dst"),
        );
        let mut tx = crate::RingProducer::<u64>::create(&src, 64).unwrap();
        tx.push(&1);
        let server = ReplicaServer::bind(&src, (Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = server.local_addr().unwrap();
        let stop = server.shutdown_handle();
        let srv = server.spawn().unwrap();
        let mut mirror = Mirror::builder()
            .start(MirrorStart::Oldest)
            .connect(addr, &dst)
            .unwrap();
        let t0 = Instant::now();
        while mirror.sequence() < 1 {
            assert!(t0.elapsed() < Duration::from_secs(20), "no first record");
            std::thread::sleep(Duration::from_millis(1));
        }
        let status = forked(5, || {
            // SAFETY: this child never touches the original again (it leaves through
            // `_exit`), so the bitwise copy is its only copy of the mirror.
            let mut copy = unsafe { std::ptr::read(&mirror) };
            if copy.step().is_ok() || copy.run().is_ok() {
                return 2;
            }
            drop(copy);
            0
        });
        assert_exited_0(status, "the mirror's copy in the child");
        // The parent's mirror still copies.
        tx.push(&2);
        let t0 = Instant::now();
        while mirror.sequence() < 2 {
            assert!(t0.elapsed() < Duration::from_secs(20), "the mirror stopped");
            assert!(mirror.step().unwrap());
        }
        drop(mirror);
        stop.shutdown();
        srv.join().unwrap().unwrap();
    }
}
