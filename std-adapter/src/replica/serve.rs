//! `ringwire serve`: streams a ring to mirrors (spec §19, §20). One thread accepts TCP
//! mirrors and runs one thread per session (at most [`ServeOptions::max_sessions`]); one
//! thread runs the UDP sender (multicast and/or unicast) when UDP is configured. With
//! unicast only and no mirror punched yet, that thread waits on its socket for a PUNCH and
//! leaves the ring alone: it neither builds frames for no one nor sleeps on the ring's
//! futex, which would make the source's producer pay a wake-up for most of its pushes.
//!
//! Beyond the reference: a PUNCH is accepted only from the IP of its token's TCP peer, the
//! number of sessions is bounded, and idle threads sleep on the ring's futex (or spin for a
//! bounded, adaptive time with `--spin`) instead of sleep-polling. A NAK is answered with
//! at most 65,535 records, less what the connection has queued or answered in its latest
//! run of contiguous answers, so a mirror's repeats of one NAK are not answered again; a
//! peer whose NAKs go back to records answered before that run gets them again, at its own
//! read rate (see the core's `source` module). A stopping server ends its sessions between
//! frames and while it waits for a slow reader's room, not only once their answers are out.
//! A session whose mirror's host is gone ends by TCP keep-alive, and a unicast one also
//! once its PUNCHes stop ([`ServeOptions::punch_timeout`]). A connection refused (at the
//! session limit, or when no thread can be started for it) is closed so that the mirror
//! reads a refusal, not a reset, and repeated refusals and accept errors are logged at a
//! bounded rate, as are the sessions of a mirror that fails and reconnects at once
//! (`session_log`).
//!
//! The ring is mapped read-write when this process may (sleeping on the futex means
//! announcing the sleeper in the ring's header, a store); without write access (a 0644 ring
//! of another user, a read-only file system) it is mapped read-only, as spec §1.1 says a
//! network source maps it, and idle threads poll it with a short, growing sleep instead
//! (`PollWait`), which is logged once.
//!
//! The ring's path is followed (see [`run_following`]): a new ring at the path ends every
//! session, `--once` ones included. A creator that recreates its ring in place (ringfire's
//! legacy non-exclusive mode, spec §1.2 step 4: the same inode truncated, resized and
//! initialised again) is seen as a replacement when the file's length, the header's magic
//! or geometry changed, or `write_seq` went back, checked every 500 ms; but serving such a
//! ring is unsupported: a thread that reads the mapping between the truncation and the
//! resize takes SIGBUS, which ends the process. In the `ringwire` binary its SIGBUS handler
//! (`cli::sigbus`) says so first: `ringwire: PATH shrank while it was mapped (…);
//! stopping`, and the exit status is 1; a program that runs [`run_following`] itself dies
//! of the signal, as the library installs no handler. Creators that make a fresh inode
//! (every exclusive creator, ringwire's and ringfire's default) are safe to follow.

use std::io::{self, Read};
use std::net::{
    IpAddr, Ipv4Addr, Shutdown, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket,
};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration as StdDuration;

use ringwire_core::replicate::collect::max_frame_len;
use ringwire_core::replicate::udp_sender::UdpCounters;
use ringwire_core::replicate::{
    Duration, Pacing, PeerAddr, RecordSource, RingSource, SourceConfig, SourceCounters,
    SourceSession, TokenRegistry, Transport, UdpConfig, UdpOffer, UdpSender,
};
use ringwire_core::wire::Kind;
use ringwire_core::{AttachError, Expect, RingView};

use super::anticipate::MAX_WINDOW;
use super::faults::Faults;
use super::io::{
    RingWaiter, Written, lazy_zeroed, now, peer, peer_v4, poll, pollin, std_dur, until,
    write_all_unless, yield_to_receiver,
};
use super::session_log::{BriefSessions, SessionLog};
use super::spin::SpinPolicy;
use super::{RateLog, ReplicaError, more_since};
use crate::net::mmsg::SendMany;
use crate::net::sockets::{
    MulticastOut, TCP_WRITE_TIMEOUT, is_emsgsize, reports_an_earlier_datagram, source_udp_on,
    tune_tcp,
};
use crate::wait::Idle;
use crate::{ReadOnlyRing, RingFile};

/// Unicast mirrors one server can register.
pub const MAX_UNICAST: usize = 64;

/// [`ServeOptions::hello_timeout`] by default: a mirror sends HELLO right after it
/// connects, so this is a round trip plus a great deal of slack.
pub const HELLO_TIMEOUT: StdDuration = StdDuration::from_secs(5);

/// [`ServeOptions::punch_timeout`] by default: four of the 5 s PUNCH keep-alives that a
/// unicast mirror sends (spec §21.4, ringfire's and ours), so three lost in a row do not end
/// a session.
pub const PUNCH_TIMEOUT: StdDuration = StdDuration::from_secs(20);

/// Settings of `ringwire serve` (spec §26.1).
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// The source ring (must exist).
    pub path: PathBuf,
    /// TCP listen address.
    pub bind: SocketAddr,
    /// Multicast group and port.
    pub multicast: Option<SocketAddrV4>,
    /// Multicast sending interface: with `multicast`, an address no interface of this host
    /// has is refused by [`Server::bind`] ([`ReplicaError::InvalidArgument`] for `--iface`).
    pub iface: Option<Ipv4Addr>,
    /// Datagram budget (clamped to 24..=65536).
    pub mtu: usize,
    /// Multicast TTL.
    pub ttl: u8,
    /// Fixed frame linger in µs, at most 1 s (the core's `MAX_LINGER`; a longer one
    /// waits 1 s); `None` = adaptive.
    pub linger_us: Option<u64>,
    /// Enable unicast from this UDP port (0 = an ephemeral port).
    pub udp: Option<u16>,
    /// Copies of every datagram (1..=255).
    pub dup: u8,
    /// Idle time of the UDP sender before it sends a HEARTBEAT (at least
    /// `ringwire_core::replicate::MIN_HEARTBEAT`, 100 µs).
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
    /// A unicast session whose mirror has sent no accepted PUNCH this long (since it went
    /// live, or since its last one) is ended and its token unregistered: a live mirror
    /// punches every 5 s as a NAT keep-alive, so its host is gone or can no longer reach
    /// this server, and every datagram sent to it (× `dup`) is wasted. Zero never, as
    /// ringfire's server. Default [`PUNCH_TIMEOUT`]. (A session whose mirror's host is gone
    /// in any mode is also ended by TCP keep-alive, see `net::sockets::tune_tcp`.)
    pub punch_timeout: StdDuration,
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
            punch_timeout: PUNCH_TIMEOUT,
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
    /// Connections refused: `max_sessions` were active, or no thread could be started for
    /// the session (those are also in `spawn_failures`).
    pub refused: u64,
    /// Connections refused because the system would not start a thread for them (EAGAIN:
    /// a thread or process limit).
    pub spawn_failures: u64,
    /// Records sent over TCP (live TCP mode and NAK answers).
    pub tcp_records: u64,
    /// NAKs received.
    pub naks: u64,
    /// GAP frames sent.
    pub gaps: u64,
    /// Sessions that ended with a protocol error.
    pub protocol_errors: u64,
    /// Sessions ended because the mirror did not read within the write timeout, or took a
    /// frame more slowly on average than [`MIN_WRITE_RATE`](super::io::MIN_WRITE_RATE).
    pub write_timeouts: u64,
    /// Connections closed because no HELLO came within [`ServeOptions::hello_timeout`].
    pub hello_timeouts: u64,
    /// Sessions that ended without a HELLO, however they ended: closed or reset by the
    /// peer (a port probe), closed at [`ServeOptions::hello_timeout`] (those are also in
    /// `hello_timeouts`), a malformed HELLO (also in `protocol_errors`), a server stopping,
    /// or a connection refused before its HELLO was read (IPv6, no frame buffer). Refused
    /// connections (`refused`) are not sessions and are not counted here.
    pub closed_without_hello: u64,
    /// Unicast sessions ended because no PUNCH came within [`ServeOptions::punch_timeout`].
    pub punch_timeouts: u64,
    /// UDP datagrams the kernel refused to send (one per destination and copy; EMSGSIZE,
    /// which lowers the datagram budget instead, is not counted).
    pub udp_send_errors: u64,
    /// Receives on the UDP socket that failed in this host (EBADF, ENOMEM…: not an ICMP
    /// report of an earlier datagram). PUNCHes cannot be read while they fail, so unicast
    /// sessions then end at their punch timeout.
    pub udp_receive_errors: u64,
    /// The UDP sender's counters.
    pub udp: UdpCounters,
}

#[derive(Default)]
struct Totals {
    sessions: AtomicU64,
    refused: AtomicU64,
    spawn_failures: AtomicU64,
    tcp_records: AtomicU64,
    naks: AtomicU64,
    gaps: AtomicU64,
    protocol_errors: AtomicU64,
    write_timeouts: AtomicU64,
    hello_timeouts: AtomicU64,
    closed_without_hello: AtomicU64,
    punch_timeouts: AtomicU64,
    udp_send_errors: AtomicU64,
    udp_receive_errors: AtomicU64,
}

/// A bound server, ready to [`Server::run`].
pub struct Server {
    opts: ServeOptions,
    ring: ServedRing,
    listener: TcpListener,
    udp: Option<UdpSocket>,
    cfg: SourceConfig,
    sender: Mutex<UdpSender<MAX_UNICAST>>,
    totals: Totals,
    /// Sessions that ended at once, without a record, for their log lines.
    brief: BriefSessions,
    /// Tests: how many of the next session threads fail to start, as if the system refused
    /// them (EAGAIN).
    #[cfg(test)]
    fail_spawns: AtomicU64,
    /// Tests: the errno every receive of `take_punches` fails with (0: none).
    #[cfg(test)]
    fail_receives: std::sync::atomic::AtomicI32,
    /// Tests: passes of session loops (a loop that spins makes millions).
    #[cfg(test)]
    session_passes: AtomicU64,
    /// The highest `write_seq` [`Server::replaced`] has seen: a lower one is a ring
    /// recreated in place.
    high_write_seq: AtomicU64,
}

/// The served ring's mapping: read-write when the process may open the file so (its idle
/// threads then sleep on the ring's futex), read-only otherwise.
enum Mapping {
    ReadWrite(RingFile),
    ReadOnly(ReadOnlyRing),
}

/// The served ring, validated (spec §1.3), with the mapping that keeps its view valid.
struct ServedRing {
    mapping: Mapping,
    /// Why the ring is mapped read-only (the error of the read-write open), if it is.
    read_only: Option<io::Error>,
}

/// Whether an open error means "no write access" rather than "no ring": EACCES and EPERM
/// (permission bits, an immutable file), EROFS (a read-only file system).
fn no_write_access(e: &crate::Error) -> Option<&io::Error> {
    match e {
        crate::Error::Io {
            op: "open", source, ..
        } if matches!(
            source.raw_os_error(),
            Some(libc::EACCES | libc::EPERM | libc::EROFS)
        ) =>
        {
            Some(source)
        }
        _ => None,
    }
}

#[cfg(test)]
thread_local! {
    /// Tests: open the ring read-only even where the process could write it (root).
    static FORCE_READ_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Tests: one pause of a session running on this thread, between a read pass that
    /// found nothing before the HELLO and the HELLO deadline's judgement, as a server
    /// stopped or descheduled right there would make.
    static PAUSE_BEFORE_JUDGING: std::cell::Cell<Option<StdDuration>> =
        const { std::cell::Cell::new(None) };
}

impl ServedRing {
    /// Opens `path` read-write, or read-only when write access is refused; refuses a ring
    /// whose header is corrupt in a way the attach checks leave to writers
    /// ([`ServedRing::corrupt`]).
    fn open(path: &Path) -> Result<ServedRing, crate::Error> {
        let ring = ServedRing::open_any(path)?;
        match ring.corrupt() {
            Some(e) => Err(crate::Error::attach(path, e)),
            None => Ok(ring),
        }
    }

    fn open_any(path: &Path) -> Result<ServedRing, crate::Error> {
        #[cfg(test)]
        if FORCE_READ_ONLY.with(|f| f.get()) {
            return ServedRing::open_read_only(path, io::Error::other("forced by a test"));
        }
        match RingFile::open(path, Expect::RAW) {
            Ok(ring) => Ok(ServedRing {
                mapping: Mapping::ReadWrite(ring),
                read_only: None,
            }),
            Err(e) => match no_write_access(&e) {
                Some(why) => {
                    ServedRing::open_read_only(path, io::Error::new(why.kind(), why.to_string()))
                }
                None => Err(e),
            },
        }
    }

    fn open_read_only(path: &Path, why: io::Error) -> Result<ServedRing, crate::Error> {
        Ok(ServedRing {
            mapping: Mapping::ReadOnly(ReadOnlyRing::open(path)?),
            read_only: Some(why),
        })
    }

    /// The view: a copy of it must not outlive this struct, which owns the mapping; no copy
    /// leaves the server (whose threads are scoped to it). Through a read-only mapping only
    /// loads are made: serving reads the ring, and the idle waiter polls instead of
    /// announcing a futex sleeper.
    fn view(&self) -> &RingView {
        match &self.mapping {
            Mapping::ReadWrite(r) => r.ring(),
            Mapping::ReadOnly(r) => r.ring(),
        }
    }

    /// Why the ring cannot be served, if its header says so
    /// ([`RingView::checked_write_seq`], as `stat`, `dump` and `top` judge it): a
    /// `write_seq` at or past [`SEQ_LIMIT`](ringwire_core::layout::SEQ_LIMIT), which no
    /// writer reaches (a producer refuses to attach to it), or an MPMC ring's at or past its
    /// `claim_seq`, which no producer publishes. Served, the first put sequences every mirror
    /// refuses into GEOMETRY and HEARTBEAT frames, and froze live sessions, with nothing in
    /// serve's log to say why; the second offers mirrors records that were never written.
    fn corrupt(&self) -> Option<AttachError> {
        self.view().checked_write_seq().err()
    }

    /// The mapped file's length.
    fn len(&self) -> u64 {
        match &self.mapping {
            Mapping::ReadWrite(r) => r.file_len() as u64,
            Mapping::ReadOnly(r) => r.file_len() as u64,
        }
    }

    /// (device, inode) of the mapped file.
    fn id(&self) -> (u64, u64) {
        match &self.mapping {
            Mapping::ReadWrite(r) => r.inode(),
            Mapping::ReadOnly(r) => r.inode(),
        }
    }

    /// An idle waiter fit for the mapping: the futex needs stores, a read-only one polls.
    fn waiter(&self, spin: bool, anticipate: bool) -> IdleWait {
        if self.read_only.is_some() {
            IdleWait::Poll(PollWait::new(spin))
        } else {
            IdleWait::Futex(RingWaiter::new(spin, anticipate))
        }
    }
}

/// First sleep of [`PollWait`] once the ring has nothing new.
const POLL_MIN: StdDuration = StdDuration::from_micros(20);
/// Longest sleep of [`PollWait`]: the most latency polling adds to a record that comes
/// after a quiet spell.
const POLL_MAX: StdDuration = StdDuration::from_micros(500);

/// Idle waiting on a read-only mapping, where the futex protocol (which announces the
/// sleeper in the ring's header) is not possible: with `--spin` the bounded, yielding poll
/// of [`SpinPolicy`] first, then sleeps that double from [`POLL_MIN`] to [`POLL_MAX`] while
/// nothing comes, back to the shortest once a record does. Like [`RingWaiter`], it waits
/// for the ring to change once 64 waits in a row at one cursor saw `write_seq` and the slot
/// unchanged (the loads of [`Idle`] need no stores).
#[derive(Debug)]
struct PollWait {
    policy: SpinPolicy,
    /// Sleeps in a row that found nothing.
    misses: u32,
    /// Empty polls at the cursor (see [`RingWaiter::wait`]).
    idle: Idle,
}

impl PollWait {
    fn new(spin: bool) -> PollWait {
        PollWait {
            policy: SpinPolicy::new(spin),
            misses: 0,
            idle: Idle::default(),
        }
    }

    /// Returns once there is something to do at `cursor` (as [`RingWaiter::wait`]), or
    /// after about `max`.
    fn wait(&mut self, view: &RingView, cursor: u64, max: StdDuration) {
        let target = self.idle.after_empty_poll(view, cursor);
        let ready = || target.ready(view);
        if ready() || self.policy.poll(max, ready) {
            self.misses = 0;
            return;
        }
        let t0 = std::time::Instant::now();
        loop {
            let left = max.saturating_sub(t0.elapsed());
            if left.is_zero() {
                self.policy.parked(t0.elapsed(), false);
                return;
            }
            let nap = POLL_MIN
                .saturating_mul(1 << self.misses.min(8))
                .min(POLL_MAX)
                .min(left);
            crate::sys::sleep(nap);
            if ready() {
                self.misses = 0;
                self.policy.parked(t0.elapsed(), true);
                return;
            }
            self.misses = self.misses.saturating_add(1);
        }
    }
}

/// How a server thread waits for the ring when idle.
enum IdleWait {
    /// On the ring's futex (a read-write mapping).
    Futex(RingWaiter),
    /// By polling (a read-only mapping).
    Poll(PollWait),
}

impl IdleWait {
    fn wait(&mut self, view: &RingView, cursor: u64, max: StdDuration) {
        match self {
            IdleWait::Futex(w) => w.wait(view, cursor, max),
            IdleWait::Poll(w) => w.wait(view, cursor, max),
        }
    }

    fn window_left(&self) -> Option<StdDuration> {
        match self {
            IdleWait::Futex(w) => w.window_left(),
            IdleWait::Poll(_) => None,
        }
    }
}

/// Whether a failed [`Server::bind`] may succeed if retried at once: the ring is still being
/// created (an empty or short file, magic not yet written, spec §1.2), or, when following a
/// replaced ring (`following`), not yet at its path. Anything else (a missing path at the
/// first start, a directory, a FIFO, another magic, a queue file, no permission) cannot go
/// away by waiting.
fn transient(e: &ReplicaError, following: bool) -> bool {
    let ReplicaError::Ring(e) = e else {
        return false;
    };
    match e {
        crate::Error::Io {
            op: "open", source, ..
        } => following && source.kind() == io::ErrorKind::NotFound,
        _ => matches!(
            e.attach_error(),
            Some(AttachError::TooShort { .. } | AttachError::BadMagic { found: 0 })
        ),
    }
}

/// The IPv4 address the UDP socket binds: `--bind`'s when it names one (an IPv4 address or
/// an IPv4-mapped IPv6 one), else `0.0.0.0`. One exception keeps multicast sendable: a
/// socket bound to a loopback address cannot send by a non-loopback `--iface` (the kernel
/// refuses such a source address there), so that combination binds `0.0.0.0`.
fn udp_bind_ip(bind: SocketAddr, iface: Option<Ipv4Addr>) -> Ipv4Addr {
    let ip = match bind.ip() {
        IpAddr::V4(a) => a,
        IpAddr::V6(a) => a.to_ipv4_mapped().unwrap_or(Ipv4Addr::UNSPECIFIED),
    };
    match iface {
        Some(i) if ip.is_loopback() && !i.is_loopback() => Ipv4Addr::UNSPECIFIED,
        _ => ip,
    }
}

/// Refuses a TCP address no mirror could use: the replication protocol carries IPv4
/// addresses (unicast tokens and NAT punching, spec §19.2), so mirrors connect over IPv4
/// only; an IPv6 address other than `[::]` (which accepts IPv4 connections too) or an
/// IPv4-mapped one would refuse every mirror.
fn check_bind(option: &'static str, a: SocketAddr) -> Result<(), ReplicaError> {
    match a.ip() {
        IpAddr::V6(v6) if !v6.is_unspecified() && v6.to_ipv4_mapped().is_none() => {
            Err(ReplicaError::arg(
                option,
                a,
                "mirrors connect over IPv4 only (the replication protocol carries IPv4 \
                 addresses); bind an IPv4 address, or [::] to accept IPv4 mirrors on a \
                 dual-stack socket",
            ))
        }
        _ => Ok(()),
    }
}

/// Bytes a session reads from its mirror per pass of its loop (HELLO and NAKs are small).
const SESSION_READ_PASS: usize = 256 * 1024;

/// How often the accept loop checks whether the ring's path names a new ring.
const REPLACED_CHECK: StdDuration = StdDuration::from_millis(500);

/// How many times, 20 ms apart, the first start retries a ring still being created (about
/// 1 s): a ring given on the command line exists already, or is about to.
const FIRST_START_TRIES: u32 = 50;

/// Pause between two attempts to open a ring that is not ready yet.
const RETRY_EVERY: StdDuration = StdDuration::from_millis(20);

/// How often an idle session looks at its socket and at the server's stop flag.
const IDLE_CHECK: StdDuration = StdDuration::from_millis(50);

/// Longest wait of the UDP thread for a first PUNCH, between looks at the stop flag.
const UNHEARD_POLL: StdDuration = StdDuration::from_millis(50);

/// How often a server waiting for a replacement ring to be created says so.
const WAITING_LOG_EVERY: StdDuration = StdDuration::from_secs(5);

/// Serves `opts.path` until `stop`, following the path: when the ring there is replaced by a
/// new one (a restarted producer, or a hub whose mirror recreated its ring for a restarted
/// source), every session ends, the new ring is opened and served on the same addresses,
/// and mirrors reconnect and see the new ring (spec §21.1 restart detection). `on_replaced`
/// is told each time, once the new ring is open and about to be served (never of a file at
/// the path that cannot be served, which ends this with its error). Returns the counters
/// of the last ring served.
///
/// At the first start a ring still being created (spec §1.2: sized, then initialised,
/// magic last) is retried for about a second, and any other error is returned at once.
/// After a replacement the new ring is waited for as long as it takes (until `stop`):
/// creating a large ring (`ftruncate` and `posix_fallocate` of gigabytes) takes seconds,
/// and a path without a file yet is a producer that has not started again. A line is
/// logged every few seconds while it waits, and mirrors that connect meanwhile are refused
/// with an orderly close.
///
/// The first server's TCP listener serves every ring that follows: bound again, a `--bind`
/// port of 0 became another port that no mirror knew, and a fixed one was closed for the
/// gap (mirrors refused, and another process free to take it).
pub fn run_following(
    opts: &ServeOptions,
    stop: &AtomicBool,
    on_replaced: impl FnMut(&Path),
) -> Result<ServeSummary, ReplicaError> {
    match bind_when_ready(opts, stop, None)? {
        Some(first) => follow_from(first, opts, stop, on_replaced),
        // Not reached: the first start fails instead when stopped.
        None => Ok(ServeSummary::default()),
    }
}

/// [`run_following`] from a server already built (`first`, on the listener every later
/// ring is served on): the in-process `ReplicaServer`'s loop, whose listener was bound
/// before its options were settled.
pub(crate) fn follow_from(
    first: Server,
    opts: &ServeOptions,
    stop: &AtomicBool,
    mut on_replaced: impl FnMut(&Path),
) -> Result<ServeSummary, ReplicaError> {
    let mut last: Option<ServeSummary> = None;
    let mut listener: Option<TcpListener> = None;
    let mut next = Some(first);
    // The path whose ring was replaced, told once the new ring is open and served: a file
    // at the path that cannot be served (not a ring) ends serve with its error instead.
    let mut replaced: Option<PathBuf> = None;
    loop {
        let server = match next.take() {
            Some(s) => s,
            None => match bind_when_ready(opts, stop, listener.as_ref())? {
                Some(s) => s,
                // Stopped while waiting for the new ring: the last one's counters.
                None => return Ok(last.unwrap_or_default()),
            },
        };
        if let Some(path) = replaced.take() {
            on_replaced(&path);
        }
        match server.run(stop) {
            Err(ReplicaError::SourceReplaced { path }) => {
                last = Some(server.summary());
                if listener.is_none() {
                    listener = Some(
                        server
                            .listener
                            .try_clone()
                            .map_err(|e| ReplicaError::io("listener", e))?,
                    );
                }
                // Its UDP socket is closed before the next server binds the same port.
                drop(server);
                replaced = Some(path);
            }
            r => return r,
        }
    }
}

/// [`Server::bind`], retried while the ring is not ready yet (see [`run_following`]);
/// `None` when `stop` was set while waiting after a replacement. After one (`following`:
/// the listener of the servers before), the new server accepts on that listener, and the
/// connections that come while it waits are refused.
fn bind_when_ready(
    opts: &ServeOptions,
    stop: &AtomicBool,
    following: Option<&TcpListener>,
) -> Result<Option<Server>, ReplicaError> {
    let started = std::time::Instant::now();
    let mut logged = started;
    let mut tries = 0;
    loop {
        let built = match following {
            Some(l) => l
                .try_clone()
                .map_err(|e| ReplicaError::io("listener", e))
                .and_then(|l| Server::with_listener(opts.clone(), l)),
            None => Server::bind(opts.clone()),
        };
        let e = match built {
            Ok(s) => return Ok(Some(s)),
            Err(e) => e,
        };
        let following_on = following;
        let following = following.is_some();
        // Relaxed: a plain flag.
        let stopping = stop.load(Ordering::Relaxed);
        if !transient(&e, following) {
            return Err(e);
        }
        if following {
            if stopping {
                return Ok(None);
            }
            if opts.log && logged.elapsed() >= WAITING_LOG_EVERY {
                logged = std::time::Instant::now();
                diag!("{}", waiting_line(&opts.path, started.elapsed(), &e));
            }
        } else if stopping || tries >= FIRST_START_TRIES {
            return Err(e);
        }
        // Those that came before this attempt found no ring; those that come during the
        // pause are judged after the next one.
        if let Some(l) = following_on {
            refuse_waiting(l);
        }
        tries += 1;
        crate::sys::sleep(RETRY_EVERY);
    }
}

/// The line said every [`WAITING_LOG_EVERY`] while serve waits, `waited` so far, for a new
/// ring at `path` to become usable (`e`: why it is not yet). It names the path once: the
/// reason of an error about that path comes without it.
fn waiting_line(path: &std::path::Path, waited: StdDuration, e: &ReplicaError) -> String {
    let why = match e {
        ReplicaError::Ring(e) if e.path() == path => e.reason().to_string(),
        e => e.to_string(),
    };
    format!(
        "serve: {}: waiting for the new ring ({} s so far): {why}",
        crate::shown::path(path),
        waited.as_secs()
    )
}

/// Refuses the connections waiting on `listener` (non-blocking, as every server's) while
/// there is no ring to serve them, at most 64 a call: left queued, their mirrors would wait
/// for a GEOMETRY that may be long in coming, then give up, and be served as new the
/// moment the ring is there.
fn refuse_waiting(listener: &TcpListener) {
    for _ in 0..64 {
        match listener.accept() {
            Ok((stream, _)) => refuse(stream),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
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
        if let (Some(g), Some(i)) = (opts.multicast, opts.iface) {
            super::check_iface(i, &format!(" (to send multicast {g} by)"))?;
        }
        match &listener {
            Some(l) => {
                if let Ok(a) = l.local_addr() {
                    check_bind("the listener", a)?;
                }
            }
            None => check_bind("--bind", opts.bind)?,
        }
        let ring = ServedRing::open(&opts.path)?;
        let listener = match listener {
            Some(l) => l,
            None => TcpListener::bind(opts.bind)
                .map_err(|e| ReplicaError::io(format!("bind {}", opts.bind), e))?,
        };
        if opts.log
            && let Some(why) = &ring.read_only
        {
            diag!(
                "serve: {}: no write access ({why}): mapped read-only; idle threads poll the \
                 ring (sleeps of at most {} µs) instead of sleeping on its futex",
                crate::shown::path(&opts.path),
                POLL_MAX.as_micros()
            );
        }
        listener
            .set_nonblocking(true)
            .map_err(|e| ReplicaError::io("listener", e))?;
        let udp_ip = udp_bind_ip(opts.bind, opts.iface);
        let udp = if opts.multicast.is_some() || opts.udp.is_some() {
            let mc = opts.multicast.map(|_| MulticastOut {
                ttl: opts.ttl,
                // Multicast leaves by the interface of the address bound, unless told.
                iface: opts.iface.or((!udp_ip.is_unspecified()).then_some(udp_ip)),
            });
            let what = match (opts.multicast, mc.and_then(|m| m.iface)) {
                (Some(g), Some(i)) => {
                    format!("UDP socket (multicast {g} from interface address {i})")
                }
                (Some(g), None) => format!("UDP socket (multicast {g})"),
                (None, _) => "UDP socket".to_string(),
            };
            let s = source_udp_on(udp_ip, opts.udp.unwrap_or(0), mc)
                .map_err(|e| ReplicaError::io(what, e))?;
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
        let w = RingSource(*ring.view()) /* a temporary: `ring` outlives it */
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
            brief: BriefSessions::new(LOG_EVERY),
            #[cfg(test)]
            fail_spawns: AtomicU64::new(0),
            #[cfg(test)]
            fail_receives: std::sync::atomic::AtomicI32::new(0),
            #[cfg(test)]
            session_passes: AtomicU64::new(0),
            high_write_seq: AtomicU64::new(w),
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
            let g = self.ring.view().geometry();
            diag!(
                "serve: {} (capacity {}, {} B records) on tcp {}{}{} session {}",
                crate::shown::path(&self.opts.path),
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
        let r = std::thread::scope(|sc| -> Result<(), ReplicaError> {
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
        });
        // Once every session is over.
        if self.opts.log
            && let Some(line) = self.brief.flush()
        {
            diag!("{line}");
        }
        r?;
        Ok(self.summary())
    }

    /// Counters so far.
    pub fn summary(&self) -> ServeSummary {
        let t = &self.totals;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ServeSummary {
            sessions: l(&t.sessions),
            refused: l(&t.refused),
            spawn_failures: l(&t.spawn_failures),
            tcp_records: l(&t.tcp_records),
            naks: l(&t.naks),
            gaps: l(&t.gaps),
            protocol_errors: l(&t.protocol_errors),
            write_timeouts: l(&t.write_timeouts),
            hello_timeouts: l(&t.hello_timeouts),
            closed_without_hello: l(&t.closed_without_hello),
            punch_timeouts: l(&t.punch_timeouts),
            udp_send_errors: l(&t.udp_send_errors),
            udp_receive_errors: l(&t.udp_receive_errors),
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
        let mut accept_errors = RateLog::new(LOG_EVERY);
        let mut refusals = RateLog::new(LOG_EVERY);
        let mut spawn_errors = RateLog::new(LOG_EVERY);
        let mut last_status = std::time::Instant::now();
        let mut last_check = std::time::Instant::now();
        let mut removed_told = false;
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
                // A header corrupted while served ends the server as it refuses one at the
                // start (a ring replaced at the path is the new ring's to judge).
                if let Some(e) = self.ring.corrupt() {
                    return Err(self.corrupt_error(e));
                }
                // Said once: a removed ring is still served, frozen (see `replaced`).
                if self.opts.log && !removed_told && !self.opts.path.exists() {
                    removed_told = true;
                    diag!(
                        "serve: {} was removed (its producer is gone?): still serving the ring as it was, until a new one appears at that path",
                        crate::shown::path(&self.opts.path)
                    );
                }
            }
            if self.opts.log && last_status.elapsed() >= StdDuration::from_secs(1) {
                let s = self.summary();
                diag!(
                    "serve: {} mirrors, tcp {} rec/s, udp {} frames/s, naks {}, punches {}, rejected {}, udp send errors {}, udp receive errors {}",
                    active.load(Ordering::Relaxed),
                    s.tcp_records - last.tcp_records,
                    s.udp.data_frames - last.udp.data_frames,
                    s.naks,
                    s.udp.punches,
                    s.udp.rejected,
                    s.udp_send_errors,
                    s.udp_receive_errors,
                );
                last = s;
                last_status = std::time::Instant::now();
            }
            // A mirror waiting to be accepted is served the ring at the path now, as
            // ringfire's server (which opens the ring for each connection) serves it: were
            // the ring replaced since the last check, this one would be sent the old ring,
            // frozen, and told to resume there. Left queued, it is accepted by the server of
            // the new ring (`run_following`); with `--once` too, whose one mirror is then
            // served the new ring.
            if fd[0].revents & libc::POLLIN != 0 && self.replaced() {
                return Err(ReplicaError::SourceReplaced {
                    path: self.opts.path.clone(),
                });
            }
            let (stream, addr) = match self.listener.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // ECONNABORTED, EMFILE…: log and keep serving. EMFILE leaves the
                    // connection queued, so this repeats every pass: log it rate-limited.
                    if self.opts.log
                        && let Some(more) = accept_errors.hit()
                    {
                        diag!("serve: accept: {e}{}", more_since(more, LIKE_IT));
                    }
                    crate::sys::sleep(StdDuration::from_millis(10));
                    continue;
                }
            };
            if self.opts.once {
                // As ringfire's `serve --once`: the mirror going away (however abruptly) is
                // the end of the job; anything else that ended its session is an error.
                return match self.serve_one(stream, addr, stop) {
                    SessionEnd::Disconnected(_) | SessionEnd::Stopping => Ok(()),
                    SessionEnd::Replaced => Err(ReplicaError::SourceReplaced {
                        path: self.opts.path.clone(),
                    }),
                    SessionEnd::Corrupt(e) => Err(self.corrupt_error(e)),
                    SessionEnd::Failed(why) => Err(ReplicaError::SessionFailed {
                        peer: addr.to_string(),
                        why,
                    }),
                };
            }
            // Relaxed: a count read only by this thread's admission check and status line.
            if active.load(Ordering::Relaxed) >= self.opts.max_sessions {
                self.totals.refused.fetch_add(1, Ordering::Relaxed);
                if self.opts.log
                    && let Some(more) = refusals.hit()
                {
                    diag!(
                        "serve: refusing {addr}: {} sessions already active{}",
                        self.opts.max_sessions,
                        more_since(more, LIKE_IT)
                    );
                }
                refuse(stream);
                continue;
            }
            active.fetch_add(1, Ordering::Relaxed);
            match self.spawn_session(sc, stream, addr, halt, active) {
                Ok(h) => threads.push(h),
                Err((e, stream)) => {
                    active.fetch_sub(1, Ordering::Relaxed);
                    self.totals.refused.fetch_add(1, Ordering::Relaxed);
                    self.totals.spawn_failures.fetch_add(1, Ordering::Relaxed);
                    if self.opts.log
                        && let Some(more) = spawn_errors.hit()
                    {
                        diag!(
                            "serve: refusing {addr}: cannot start a session thread: {e}{}",
                            more_since(more, LIKE_IT)
                        );
                    }
                    if let Some(stream) = stream {
                        refuse(stream);
                    }
                }
            }
        }
        Ok(())
    }

    /// Starts the thread of a session. When the system refuses the thread (EAGAIN at a
    /// thread or process limit), the error comes back with the connection, for the caller to
    /// refuse it: the server goes on accepting.
    fn spawn_session<'s>(
        &'s self,
        sc: &'s std::thread::Scope<'s, '_>,
        stream: TcpStream,
        addr: SocketAddr,
        halt: &'s AtomicBool,
        active: &'s AtomicUsize,
    ) -> Result<std::thread::ScopedJoinHandle<'s, ()>, (io::Error, Option<TcpStream>)> {
        // A failed spawn drops the closure, and the stream with it: the closure takes the
        // stream from this slot instead, so that the caller can still close it in order.
        let slot = Arc::new(Mutex::new(Some(stream)));
        let theirs = Arc::clone(&slot);
        let take =
            |s: &Mutex<Option<TcpStream>>| s.lock().unwrap_or_else(|p| p.into_inner()).take();
        #[cfg(test)]
        if self
            .fail_spawns
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err((io::Error::from_raw_os_error(libc::EAGAIN), take(&slot)));
        }
        std::thread::Builder::new()
            .name("serve session".into())
            .spawn_scoped(sc, move || {
                if let Some(stream) = take(&theirs) {
                    self.serve_one(stream, addr, halt);
                }
                active.fetch_sub(1, Ordering::Relaxed);
            })
            .map_err(|e| (e, take(&slot)))
    }

    /// Whether the path now names another ring file (a removed file is not a replacement:
    /// the frozen ring is still served until a new one appears), or the mapped one was
    /// recreated in place (see the module docs): its length, magic or geometry changed, or
    /// its `write_seq` went back. The length is checked before the mapping is read.
    fn replaced(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        let Ok(m) = std::fs::metadata(&self.opts.path) else {
            return false;
        };
        if (m.dev(), m.ino()) != self.ring.id() || m.len() != self.ring.len() {
            return true;
        }
        let v = self.ring.view();
        let (h, g) = (v.header(), v.geometry());
        if h.magic != ringwire_core::layout::RING_MAGIC
            || h.capacity != g.capacity
            || h.element_size != g.element_size
            || h.slots_offset != g.slots_offset
        {
            return true;
        }
        // Relaxed: only this value is compared; no other memory is read through it.
        self.high_write_seq
            .fetch_max(h.write_seq, Ordering::Relaxed)
            > h.write_seq
    }

    fn serve_one(&self, stream: TcpStream, addr: SocketAddr, stop: &AtomicBool) -> SessionEnd {
        self.totals.sessions.fetch_add(1, Ordering::Relaxed);
        let mut hello = false;
        let end = self.serve_session(stream, addr, stop, &mut hello);
        if !hello {
            // Every way a session can end before its HELLO, not only the HELLO timeout: a
            // port probe that connects and closes at once is one too.
            self.totals
                .closed_without_hello
                .fetch_add(1, Ordering::Relaxed);
        }
        end
    }

    /// [`Server::serve_one`]; sets `hello` once the session has taken a HELLO (its answer,
    /// GEOMETRY, is about to go out).
    fn serve_session(
        &self,
        mut stream: TcpStream,
        addr: SocketAddr,
        stop: &AtomicBool,
        hello: &mut bool,
    ) -> SessionEnd {
        let Some(p) = peer(addr) else {
            // The protocol carries IPv4 addresses (unicast tokens, NAT punching).
            let end = SessionEnd::Failed(
                "an IPv6 peer; the replication protocol is IPv4 only, closed".into(),
            );
            if self.opts.log {
                diag!("serve: {addr}: {end}");
            }
            return end;
        };
        if let Err(e) = tune_tcp(&stream).and_then(|_| stream.set_nonblocking(true)) {
            let end = SessionEnd::Failed(e.to_string());
            if self.opts.log {
                diag!("serve: {addr}: {end}");
            }
            return end;
        }
        // Room for the longest frame the ring can need: a record longer than the 1 MiB
        // budget goes alone (spec §22) instead of becoming a GAP. Zeroed pages of a large
        // buffer stay untouched until such a record comes. For a blob ring it is as long as
        // the arena (up to 4 GiB): an allocation that fails refuses this connection only.
        let want = max_frame_len(self.ring.view().geometry(), self.cfg.tcp_budget);
        let Some(mut buf) = lazy_zeroed(want) else {
            let end = SessionEnd::Failed(format!(
                "cannot allocate {want} bytes for its frame buffer (the ring's longest frame), \
                 closed before GEOMETRY"
            ));
            if self.opts.log {
                diag!("serve: {addr}: {end}");
            }
            refuse(stream);
            return end;
        };
        let mut log = SessionLog::connected(&self.brief, self.opts.log, addr);
        let mut s = SourceSession::new(self.cfg, p, now());
        let mut seen = SourceCounters::default();
        let end = self.session_loop(&mut s, &mut stream, &mut buf, stop, &mut seen, &mut log);
        *hello = log.went_live();
        self.account(s.counters(), &mut seen);
        if let Some(t) = s.token() {
            self.sender().unregister(t);
        }
        let c = s.counters();
        log.ended(s.transport(), &end, c.records, c.gaps, c.naks);
        end
    }

    fn session_loop(
        &self,
        s: &mut SourceSession,
        stream: &mut TcpStream,
        buf: &mut [u8],
        stop: &AtomicBool,
        seen: &mut SourceCounters,
        log: &mut SessionLog<'_>,
    ) -> SessionEnd {
        let src = &RingSource(*self.ring.view());
        let unicast = self.cfg.unicast.is_some();
        // The address the mirror dialled: unicast datagrams go from it (see `udp_loop`).
        let local_ip = stream.local_addr().ok().and_then(|a| match a.ip() {
            IpAddr::V4(a) => Some(a),
            IpAddr::V6(a) => a.to_ipv4_mapped(),
        });
        let mut rbuf = [0u8; 4096];
        let mut waiter = self.ring.waiter(self.opts.spin, self.opts.anticipate);
        let mut live = false;
        // When the session went live: a unicast mirror's first PUNCH is due from then.
        let mut live_at = now();
        // The mirror has shut down its write side (read returned 0).
        let mut eof = false;
        let accepted = std::time::Instant::now();
        let hello_timeout = self.opts.hello_timeout;
        // A `--once` session runs on the accept loop's thread, which cannot check the path
        // meanwhile: it checks it itself.
        let mut last_check = std::time::Instant::now();
        // Relaxed: a plain flag.
        while !stop.load(Ordering::Relaxed) {
            #[cfg(test)]
            self.session_passes.fetch_add(1, Ordering::Relaxed);
            if self.opts.once && last_check.elapsed() >= REPLACED_CHECK {
                last_check = std::time::Instant::now();
                if self.replaced() {
                    return SessionEnd::Replaced;
                }
                if let Some(e) = self.ring.corrupt() {
                    return SessionEnd::Corrupt(e);
                }
            }
            // A peer that writes without pause (a NAK flood) must not keep the session
            // from the stop flag and its own sending: the rest waits for the next pass.
            let mut read = 0usize;
            let looked = std::time::Instant::now();
            while !eof && read < SESSION_READ_PASS {
                match stream.read(&mut rbuf) {
                    Ok(0) => eof = true,
                    Ok(n) => {
                        read += n;
                        let r = if unicast {
                            let mut g = self.sender();
                            let reg: &mut dyn TokenRegistry = &mut *g;
                            let r = s.handle_stream(now(), &rbuf[..n], src, Some(reg));
                            if let (Some(t), Some(ip)) = (s.token(), local_ip) {
                                g.set_local_ip(t, ip.octets());
                            }
                            r
                        } else {
                            s.handle_stream(now(), &rbuf[..n], src, None)
                        };
                        if let Err(e) = r {
                            self.totals.protocol_errors.fetch_add(1, Ordering::Relaxed);
                            return SessionEnd::Failed(e.to_string());
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return SessionEnd::of_io("", &e),
                }
            }
            let mut sent = false;
            while let Some(n) = s.poll_transmit(now(), src, buf) {
                if !live {
                    live_at = now();
                    log.live(s.transport());
                }
                live = true;
                sent = true;
                match write_all_unless(stream, &buf[..n], TCP_WRITE_TIMEOUT, stop) {
                    Ok(Written::All) => {}
                    Ok(Written::Stopped) => return SessionEnd::Stopping,
                    Err(e) => {
                        if e.kind() == io::ErrorKind::TimedOut {
                            self.totals.write_timeouts.fetch_add(1, Ordering::Relaxed);
                        }
                        return SessionEnd::of_io("write: ", &e);
                    }
                }
                // A long answer to NAKs (up to 65,535 records per NAK, each frame up to
                // the write timeout for a slow reader) must not keep a stopping server.
                // Relaxed: a plain flag.
                if stop.load(Ordering::Relaxed) {
                    return SessionEnd::Stopping;
                }
            }
            // Nothing has been sent before the HELLO is in (GEOMETRY answers it). Judged
            // after the read, up to when it began: a server that was not running (stopped,
            // descheduled) while the HELLO came finds it waiting, and has answered it by
            // now; a pause after the read is not time it could have seen a HELLO in.
            #[cfg(test)]
            if !live
                && read == 0
                && let Some(p) = PAUSE_BEFORE_JUDGING.with(std::cell::Cell::take)
            {
                std::thread::sleep(p);
            }
            let waited = looked.saturating_duration_since(accepted);
            if !live && !hello_timeout.is_zero() && waited >= hello_timeout {
                self.totals.hello_timeouts.fetch_add(1, Ordering::Relaxed);
                return SessionEnd::Failed(format!(
                    "no HELLO {} ms after connecting (hello timeout {} ms)",
                    waited.as_millis(),
                    hello_timeout.as_millis()
                ));
            }
            if sent {
                yield_to_receiver();
            }
            log.tick(s.counters().records);
            self.account(s.counters(), seen);
            // A TCP-mode source never reads after HELLO (spec §19.3), so a mirror that
            // half-closes its side after HELLO is still served, as by ringfire; one that is
            // really gone resets the connection on the next write (a heartbeat at the
            // latest), seen below or as that write's error. Before HELLO, and in UDP modes,
            // whose sessions read NAKs, EOF ends the session.
            let tcp_live = live && s.transport() == Transport::Tcp;
            if eof && !tcp_live {
                return SessionEnd::Disconnected("disconnected".into());
            }
            if eof && reset(stream) {
                return SessionEnd::Disconnected(
                    "disconnected (reset after it closed its write side)".into(),
                );
            }
            let t = now();
            let punch_timeout = self.opts.punch_timeout;
            if live
                && !punch_timeout.is_zero()
                && let Some(token) = s.token()
            {
                let silent = self.punch_silence(token, live_at, t, punch_timeout);
                if silent >= punch_timeout {
                    self.totals.punch_timeouts.fetch_add(1, Ordering::Relaxed);
                    return SessionEnd::Failed(format!(
                        "no PUNCH for {} ms (punch timeout {} ms; a unicast mirror sends one \
                         every 5 s): its host is gone or cannot reach this server",
                        silent.as_millis(),
                        punch_timeout.as_millis()
                    ));
                }
            }
            if tcp_live {
                // Sleep on the ring; check the socket (EOF) and `stop` every 50 ms, as a
                // UDP-mode session does. Each park ends with the futex handshake's
                // membarrier, an IPI to every CPU running a registered process (the
                // producer's among them): parks of a few ms made an idle session send
                // hundreds a second.
                let max = until(t, s.poll_timeout(), IDLE_CHECK);
                waiter.wait(self.ring.view(), s.cursor(), max);
            } else {
                // Awaiting HELLO, or a UDP-mode session that only answers NAKs.
                let max = until(t, s.poll_timeout(), IDLE_CHECK);
                let mut fd = [pollin(stream)];
                if let Err(e) = poll(&mut fd, max) {
                    return SessionEnd::of_io("", &e);
                }
            }
        }
        SessionEnd::Stopping
    }

    /// The error a corrupt header ends the server with ([`ServedRing::corrupt`]).
    fn corrupt_error(&self, e: AttachError) -> ReplicaError {
        ReplicaError::Ring(crate::Error::attach(&self.opts.path, e))
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

    /// PUNCH intake: hands what waits on the UDP socket to the sender, at most 64
    /// datagrams (the socket is non-blocking). Returns whether a receive failed in this
    /// host ([`ServeSummary::udp_receive_errors`]), which ended the pass.
    fn take_punches(&self, sock: &UdpSocket) -> bool {
        let mut rbuf = [0u8; 64];
        for _ in 0..64 {
            match self.receive(sock, &mut rbuf) {
                Ok((n, from)) => {
                    let from = peer(from).unwrap_or(PeerAddr::new([0; 4], 0));
                    let _ = self.sender().handle_datagram(now(), from, &rbuf[..n]);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // The ICMP error of an earlier send (a unicast mirror gone): the socket is fine.
                Err(e) if reports_an_earlier_datagram(&e) => {}
                // This host's socket failing: the next tries would fail alike.
                Err(e) => {
                    // Relaxed: statistics only.
                    let before = self
                        .totals
                        .udp_receive_errors
                        .fetch_add(1, Ordering::Relaxed);
                    if self.opts.log && before == 0 {
                        diag!(
                            "serve: UDP receive failed: {e}; PUNCHes cannot be read while it fails (unicast sessions then end at their punch timeout); further failures are counted (udp receive errors)"
                        );
                    }
                    return true;
                }
            }
        }
        false
    }

    /// One receive on the UDP socket (tests: failing with `fail_receives`' errno when set).
    fn receive(&self, sock: &UdpSocket, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        #[cfg(test)]
        match self.fail_receives.load(Ordering::Relaxed) {
            0 => {}
            errno => return Err(io::Error::from_raw_os_error(errno)),
        }
        sock.recv_from(buf)
    }

    /// How long the unicast session of `token`, live since `live_at`, has gone without a
    /// PUNCH at `t`. Once that reaches `timeout`, the PUNCHes waiting on the UDP socket are
    /// taken first (the UDP thread takes them too): a server that was not running (stopped,
    /// descheduled) while its mirrors punched finds their PUNCHes waiting, and its session
    /// threads, judging before the UDP thread had taken them, ended live sessions.
    fn punch_silence(
        &self,
        token: u32,
        live_at: ringwire_core::replicate::Instant,
        t: ringwire_core::replicate::Instant,
        timeout: StdDuration,
    ) -> StdDuration {
        let silence = || {
            let heard = self.sender().last_punch(token).unwrap_or(live_at);
            std_dur(t.saturating_since(heard))
        };
        let s = silence();
        match &self.udp {
            Some(sock) if s >= timeout => {
                self.take_punches(sock);
                silence()
            }
            _ => s,
        }
    }

    fn udp_loop(&self, sock: &UdpSocket, halt: &AtomicBool) {
        let src = RingSource(*self.ring.view());
        let mut buf = vec![0u8; 65_536];
        let mut dests: Vec<SocketAddrV4> = Vec::with_capacity(MAX_UNICAST + 1);
        // Each destination's source address. A unicast mirror takes datagrams only from the
        // address it connected to; on a socket bound to 0.0.0.0 the kernel would pick the
        // route's source instead (127.0.0.1 for a mirror that dialled 127.0.0.2, the primary
        // address for one that dialled a secondary one or a VIP), so each goes from the
        // local address of its session's TCP connection. A socket bound to one address
        // sends from it anyway.
        let mut froms: Vec<Option<Ipv4Addr>> = Vec::with_capacity(MAX_UNICAST + 1);
        let choose_source = sock.local_addr().is_ok_and(|a| a.ip().is_unspecified());
        let mut out = SendMany::with_capacity(MAX_UNICAST + 1);
        let mut faults = Faults::new(self.opts.drop_every, self.opts.swap_every);
        let mut errs = SendErrors::new(&self.totals.udp_send_errors, self.opts.log);
        let mut waiter = self.ring.waiter(self.opts.spin, self.opts.anticipate);
        // Relaxed: a plain flag.
        while !halt.load(Ordering::Relaxed) {
            // No destination yet (no unicast mirror has punched; a multicast group always is
            // one): frames would go nowhere, so pass the ring's records before taking
            // PUNCHes, which leaves the cursor current for the first mirror to punch.
            let unheard = {
                let mut g = self.sender();
                let none = !g.has_destinations();
                if none {
                    g.pass_to_head(&src);
                }
                none
            };
            let failing = self.take_punches(sock);
            if unheard && !self.sender().has_destinations() {
                // Still none: wait for a PUNCH on the socket, not for records on the ring.
                // Asleep on the ring's futex, this thread would make the source's producer
                // pay a FUTEX_WAKE for most of its pushes, and itself build every frame,
                // for no one (at 1M records/s: the producer's CPU time went from 2% to 30%
                // of a core, serve's from 0 to 7%). A socket whose receive just failed
                // here is not polled but slept on: with a datagram waiting (ENOMEM) or a
                // descriptor gone bad (EBADF), the poll returns at once and this loop
                // would spin on a core, a failed receive a pass.
                if failing || super::io::poll(&mut [super::io::pollin(sock)], UNHEARD_POLL).is_err()
                {
                    crate::sys::sleep(UNHEARD_POLL);
                }
                continue;
            }
            let mut sent_any = false;
            for _ in 0..256 {
                let len = {
                    let mut g = self.sender();
                    let Some(len) = g.poll_transmit(now(), &src, &mut buf) else {
                        break;
                    };
                    dests.clear();
                    froms.clear();
                    for (to, from) in g.destinations_from() {
                        dests.push(super::io::sock_v4(to));
                        froms.push(from.filter(|_| choose_source).map(Ipv4Addr::from));
                    }
                    len
                };
                sent_any = true;
                let frame = &buf[..len];
                // Off, this is the only cost of fault injection: one predictable branch.
                let data = faults.on && frame.first() == Some(&(Kind::Data as u8));
                if data && !faults.admit(frame) {
                    continue;
                }
                if self.deliver(sock, &mut out, frame, (&dests, &froms), &mut errs)
                    && data
                    && let Some(late) = faults.take_held()
                {
                    self.deliver(sock, &mut out, late, (&dests, &froms), &mut errs);
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
                waiter.wait(self.ring.view(), cursor, max);
            }
        }
    }

    /// [`deliver`], lowering the sender's datagram budget on EMSGSIZE (spec §20.3).
    fn deliver(
        &self,
        sock: &UdpSocket,
        out: &mut SendMany,
        frame: &[u8],
        dests: (&[SocketAddrV4], &[Option<Ipv4Addr>]),
        errs: &mut SendErrors<'_>,
    ) -> bool {
        let ok = deliver(sock, out, frame, dests, self.opts.dup, errs);
        if !ok {
            self.sender().handle_emsgsize(frame.len());
        }
        ok
    }
}

/// Closes a connection the server will not serve so that the mirror reads an orderly end
/// before GEOMETRY, which it reports as a refusal ("closed the connection before GEOMETRY
/// (refused: …)"), instead of "Connection reset by peer". Closing a socket with unread
/// input (the mirror's HELLO) makes the kernel send a reset; a FIN sent first reaches the
/// mirror before it, and a mirror that has the FIN reads the end of the stream even after
/// the reset. What is already in is read too, so that usually no reset is sent at all.
fn refuse(stream: TcpStream) {
    let _ = stream.shutdown(Shutdown::Write);
    if stream.set_nonblocking(true).is_ok() {
        let mut sink = [0u8; 512];
        // Bounded: a HELLO is 32 bytes; a peer that sends more is not waited for.
        for _ in 0..8 {
            match (&stream).read(&mut sink) {
                Ok(n) if n > 0 => {}
                _ => break,
            }
        }
    }
}

/// The tail of serve's rate-limited lines ([`more_since`]).
const LIKE_IT: &str = "like it since the last one logged";

/// How often a repeated log line (an accept error, a refused connection) is printed again.
const LOG_EVERY: StdDuration = StdDuration::from_secs(10);

/// How a mirror's session ended; its `Display` is the reason serve logs.
#[derive(Debug, Clone, PartialEq, Eq)]
enum SessionEnd {
    /// The mirror went away: it closed the connection, reset it, or its end broke (EOF,
    /// `ECONNRESET`, `ECONNABORTED`, `EPIPE`), the text saying which.
    Disconnected(String),
    /// The server is stopping.
    Stopping,
    /// A `--once` session's ring was replaced at its path.
    Replaced,
    /// A `--once` session's ring got a corrupt header ([`ServedRing::corrupt`]).
    Corrupt(AttachError),
    /// Anything else: a protocol error, no HELLO or PUNCH in time, a write that timed out,
    /// another socket error.
    Failed(String),
}

impl SessionEnd {
    /// A socket error: a disconnect for the kinds a mirror going away gives (the ones
    /// ringfire's `serve --once` swallows), a failure for the others.
    fn of_io(what: &str, e: &io::Error) -> SessionEnd {
        use io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
        let text = format!("{what}{e}");
        match e.kind() {
            BrokenPipe | ConnectionAborted | ConnectionReset | UnexpectedEof => {
                SessionEnd::Disconnected(text)
            }
            _ => SessionEnd::Failed(text),
        }
    }
}

impl std::fmt::Display for SessionEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionEnd::Disconnected(why) | SessionEnd::Failed(why) => f.write_str(why),
            SessionEnd::Stopping => f.write_str("server stopping"),
            SessionEnd::Replaced => f.write_str("the ring was replaced at its path"),
            SessionEnd::Corrupt(e) => write!(f, "the ring's header is corrupt: {e}"),
        }
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

/// Sends `frame` `dup` times (at least once) to every destination (`dests.0[i]`, from
/// `dests.1[i]` when that is `Some`, see [`SendMany::send_from`]). A destination the
/// kernel refuses is skipped, counted and logged in `errs`: the others still get every
/// copy. False, with nothing more sent, on EMSGSIZE: the frame is too long for the path,
/// whichever the destination.
fn deliver(
    sock: &UdpSocket,
    out: &mut SendMany,
    frame: &[u8],
    dests: (&[SocketAddrV4], &[Option<Ipv4Addr>]),
    dup: u8,
    errs: &mut SendErrors<'_>,
) -> bool {
    let mut too_long = false;
    for _ in 0..dup.max(1) {
        out.send_from(sock, frame, dests.0, dests.1, |to, e| {
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
                diag!(
                    "serve: UDP send to {to} failed: {e}; the other destinations still get the datagram, and further failures are counted (udp send errors)"
                );
            }
            None => {}
            Some(s) if now.duration_since(s.1) >= SEND_ERROR_LOG_EVERY => {
                diag!(
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
#[path = "serve_restart_tests.rs"]
mod restart_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_tmp::TmpPath;

    fn v4(s: &UdpSocket) -> SocketAddrV4 {
        match s.local_addr().unwrap() {
            SocketAddr::V4(a) => a,
            a => panic!("not v4: {a}"),
        }
    }

    /// The line serve says while it waits for a replaced ring names the path once: the
    /// reason was the error's whole text, which names it too ("serve: P: waiting for the new
    /// ring (5 s so far): ring P: file is 0 bytes, ...").
    #[test]
    fn the_waiting_line_names_the_path_once() {
        let path = TmpPath::shm("serve-waiting-once");
        std::fs::write(&path, b"").unwrap();
        let e = match crate::file::ReadOnlyRing::open(&path) {
            Err(e) => ReplicaError::Ring(e),
            Ok(_) => panic!("an empty file opened as a ring"),
        };
        assert!(transient(&e, true), "{e}");
        let p = crate::shown::path(&path).to_string();
        let line = waiting_line(&path, StdDuration::from_millis(5_400), &e);
        assert_eq!(
            line,
            format!(
                "serve: {p}: waiting for the new ring (5 s so far): file is 0 bytes, shorter \
                 than the 128-byte ring header"
            )
        );
        assert_eq!(line.matches(&p).count(), 1, "{line}");
        let gone = ReplicaError::Ring(crate::Error::io(
            path.path(),
            "open",
            io::Error::from_raw_os_error(libc::ENOENT),
        ));
        assert!(transient(&gone, true), "{gone}");
        let line = waiting_line(&path, StdDuration::from_secs(10), &gone);
        assert_eq!(line.matches(&p).count(), 1, "{line}");
        assert!(
            line.ends_with("(10 s so far): open failed: No such file or directory (os error 2)"),
            "{line}"
        );
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
        assert!(deliver(
            &tx,
            &mut out,
            &[5u8; 32],
            (&dests, &[]),
            3,
            &mut errs
        ));
        assert_eq!(count.load(Ordering::Relaxed), 3, "one failure per copy");
        let mut buf = [0u8; 64];
        for r in &rx {
            r.set_read_timeout(Some(StdDuration::from_secs(2))).unwrap();
            for copy in 0..3 {
                assert_eq!(r.recv_from(&mut buf).unwrap().0, 32, "copy {copy}");
            }
        }
    }

    /// A read-only mapping's poll waits too, on a ring whose `write_seq` is ahead of its
    /// slots, sleep after 64 quick returns (see the check's docs); before, `spin false:
    /// 1673516 waits in 200 ms`.
    #[test]
    fn a_poll_wait_sleeps_at_a_write_seq_ahead_of_the_slots() {
        let s = TmpPath::shm("serve-poll-stuck");
        let ring = source_ring(s.path(), 16);
        super::super::io::check_waits_sleep_at_a_write_seq_ahead_of_the_slots(
            ring.ring(),
            |spin| {
                let mut w = PollWait::new(spin);
                move |r: &RingView, cursor, max| w.wait(r, cursor, max)
            },
        );
    }

    fn source_ring(path: &Path, capacity: u64) -> RingFile {
        let geo = ringwire_core::Geometry::spmc(capacity, 16, 8, 0, false).unwrap();
        RingFile::create(path, &geo, &crate::CreateOptions::default()).unwrap()
    }

    fn publish(ring: &RingFile, seqs: std::ops::RangeInclusive<u64>) {
        for seq in seqs {
            ring.ring().write_slot(seq, &seq.to_le_bytes());
            if ring.ring().publish(seq) {
                ring.wake_all();
            }
        }
    }

    /// A quiet server offering UDP unicast, of a 16-slot ring at a scratch path `name`
    /// (the path and ring are returned to be kept as long as the server).
    fn unicast_server(name: &str) -> (TmpPath, RingFile, Server) {
        let src = TmpPath::shm(name);
        let ring = source_ring(src.path(), 16);
        let mut so = quiet(src.path());
        so.udp = Some(0);
        let server = Server::bind(so).unwrap();
        (src, ring, server)
    }

    fn quiet(path: &Path) -> ServeOptions {
        let mut o = ServeOptions::new(path, SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
        o.log = false;
        o
    }

    /// Options of a quiet mirror of `server` into `path` from the oldest record, asking for
    /// UDP unicast delivery when `unicast`.
    fn mirror_from_oldest(
        server: &Server,
        path: &Path,
        unicast: bool,
    ) -> super::super::mirror::MirrorOptions {
        let mut mo = super::super::mirror::MirrorOptions::new(server.local_addr(), path);
        mo.start = ringwire_core::replicate::Start::Oldest;
        mo.unicast = unicast;
        mo.log = false;
        mo
    }

    /// Sets its stop flags when dropped: a failed join or assertion in a thread scope then
    /// ends the server and mirror threads, and the test fails instead of hanging.
    struct StopOnDrop<'a>(&'a [&'a AtomicBool]);

    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.iter().for_each(|f| f.store(true, Ordering::Relaxed));
        }
    }

    /// With `--udp` and no mirror punched yet, the UDP thread waits on its socket, not on
    /// the ring: asleep on the ring's futex, it made the source's producer pay a FUTEX_WAKE
    /// for most of its pushes, and built every frame for no one. The first mirror to punch
    /// is then sent the live records over UDP.
    #[test]
    fn an_unheard_udp_sender_leaves_the_ring_alone_until_a_mirror_punches() {
        use super::super::mirror::{MirrorProgress, run_observed};
        let src = TmpPath::shm("serve-unheard-src");
        let mir = TmpPath::shm("serve-unheard-mir");
        let ring = source_ring(src.path(), 1024);
        publish(&ring, 1..=10);
        let mut so = quiet(src.path());
        so.udp = Some(0);
        let server = Server::bind(so).unwrap();
        let stop = AtomicBool::new(false);
        let mstop = AtomicBool::new(false);
        let progress = MirrorProgress::new();
        let mo = mirror_from_oldest(&server, mir.path(), true);
        let (asleep, frames, last, sum) = std::thread::scope(|sc| {
            let stops = [&stop, &mstop];
            let _stop = StopOnDrop(&stops);
            let srv = sc.spawn(|| server.run(&stop));
            // Records every 5 ms for 400 ms, the ring's sleeper count sampled every 1 ms
            // between them: a thread asleep on the futex between records shows there.
            let mut asleep = 0;
            let mut seq = 10;
            for k in 0..400 {
                if k % 5 == 0 {
                    seq += 1;
                    publish(&ring, seq..=seq);
                }
                std::thread::sleep(StdDuration::from_millis(1));
                asleep += usize::from(ring.ring().waiting_consumers().load(Ordering::Relaxed) > 0);
            }
            let frames = server.summary().udp.data_frames;
            let m = sc.spawn(|| run_observed(&mo, &mstop, Some(&progress)));
            let t0 = std::time::Instant::now();
            let mut seen = progress.snapshot();
            while !(seen.last_seq >= 200 && seen.udp) && t0.elapsed() < StdDuration::from_secs(20) {
                seq += 1;
                publish(&ring, seq..=seq);
                seen = progress.wait_changed(&seen, StdDuration::from_millis(2));
            }
            mstop.store(true, Ordering::Relaxed);
            let sum = m.join().unwrap().unwrap();
            stop.store(true, Ordering::Relaxed);
            srv.join().unwrap().unwrap();
            (asleep, frames, seen, sum)
        });
        assert_eq!(asleep, 0, "samples with a sleeper counted on the ring");
        assert_eq!(frames, 0, "DATA frames built before any mirror punched");
        assert!(last.udp && last.last_seq >= 200, "{last:?}");
        let c = sum.counters;
        assert_eq!(c.gaps, 0);
        // The live records came in datagrams, not only as answers to NAKs over TCP.
        assert!(
            c.records_written - c.records_retransmitted >= 20,
            "records over UDP: {c:?}"
        );
    }

    /// A unicast session past its PUNCH timeout whose PUNCH waits on the UDP socket, not
    /// yet taken by the UDP thread (a server that was stopped while its mirror punched, and
    /// whose session thread runs first when it continues), is not silent. The session
    /// judged by what the UDP thread had taken, so it ended a live session ("no PUNCH for
    /// …") that a ringfire mirror, which never gives up on a silent source, kept waiting on.
    #[test]
    fn a_punch_waiting_on_the_socket_counts_before_the_punch_timeout_is_judged() {
        use ringwire_core::replicate::Instant;
        use ringwire_core::wire::PunchRepr;
        let (_src, _ring, server) = unicast_server("serve-punch-waiting");
        let token = server
            .sender()
            .register(PeerAddr::new([127, 0, 0, 1], 40000))
            .unwrap();
        // Live since half a second ago, never punched.
        let live_at = Instant::from_nanos(now().as_nanos() - 500_000_000);
        let timeout = StdDuration::from_millis(100);
        let silent = server.punch_silence(token, live_at, now(), timeout);
        assert!(silent >= StdDuration::from_millis(500), "{silent:?}");
        // The mirror's PUNCH arrives; nobody runs the UDP thread.
        let mut p = [0u8; 16];
        PunchRepr {
            session: server.session_byte(),
            token,
        }
        .emit(&mut p)
        .unwrap();
        let mirror = UdpSocket::bind("127.0.0.1:0").unwrap();
        mirror.send_to(&p, server.udp_addr().unwrap()).unwrap();
        let silent = server.punch_silence(token, live_at, now(), timeout);
        assert!(silent < timeout, "{silent:?}");
        assert!(server.sender().last_punch(token).is_some());
    }

    /// A `--once` server of a 16-slot ring holding records 1 to 5, with a 300 ms HELLO
    /// timeout, for the HELLO deadline tests; the scratch file and the ring go with it.
    fn hello_timeout_server(name: &str) -> (TmpPath, RingFile, Server) {
        let src = TmpPath::shm(&format!("serve-{name}"));
        let ring = source_ring(src.path(), 16);
        publish(&ring, 1..=5);
        let mut so = quiet(src.path());
        so.once = true;
        so.hello_timeout = StdDuration::from_millis(300);
        let server = Server::bind(so).unwrap();
        (src, ring, server)
    }

    /// A TCP-mode mirror that half-closes after HELLO is still served (spec §19.3: the
    /// source never reads after HELLO). When it then resets the connection, the session
    /// ends at its next pass, by the check for a reset after EOF (`reset`), as "disconnected
    /// (reset after it closed its write side)". Without that check the session learns of
    /// the reset only from its next write, an idle heartbeat (200 ms by default, which then
    /// fails: "write: Broken pipe"; 60 s here, so the session is still there when the test
    /// stops it 2 s after the reset), holding a session slot for a mirror that is gone.
    #[test]
    fn a_mirror_reset_after_its_half_close_ends_the_session_before_a_write() {
        use crate::test_guard::SetOnDrop;
        let src = TmpPath::shm("serve-halfclose-reset");
        let ring = source_ring(src.path(), 16);
        publish(&ring, 1..=3);
        let mut server = Server::bind(quiet(src.path())).unwrap();
        // No heartbeat write finds the reset first.
        server.cfg.heartbeat = Duration::from_secs(60);
        let mut c = TcpStream::connect(server.local_addr()).unwrap();
        c.set_read_timeout(Some(StdDuration::from_secs(5))).unwrap();
        let (stream, addr) = server.listener.accept().unwrap();
        let stop = AtomicBool::new(false);
        let end = std::thread::scope(|sc| {
            let _stop = SetOnDrop(&stop);
            let session = sc.spawn(|| server.serve_one(stream, addr, &stop));
            send_hello(&mut c);
            assert_eq!(
                first_answer(&mut c),
                Some(ringwire_core::wire::Kind::Geometry as u8)
            );
            c.shutdown(std::net::Shutdown::Write).unwrap();
            // The pass after the next one started after the FIN came, and has read it.
            let passes = || server.session_passes.load(Ordering::Relaxed);
            let p0 = passes();
            let t0 = std::time::Instant::now();
            while passes() < p0 + 2 {
                assert!(
                    t0.elapsed() < StdDuration::from_secs(5),
                    "the session is stuck"
                );
                std::thread::sleep(StdDuration::from_millis(5));
            }
            // A reset, not a FIN: SO_LINGER on with 0 s, then a disconnect (`connect` to
            // AF_UNSPEC), which sends the RST at once even while a child forked by another
            // test holds a copy of the descriptor (a close would wait for it).
            socket2::SockRef::from(&c)
                .set_linger(Some(StdDuration::ZERO))
                .unwrap();
            // SAFETY: `sockaddr` is plain data, all zeros but the family.
            let mut unspec: libc::sockaddr = unsafe { std::mem::zeroed() };
            unspec.sa_family = libc::AF_UNSPEC as libc::sa_family_t;
            let len = std::mem::size_of::<libc::sockaddr>() as libc::socklen_t;
            // SAFETY: `c` keeps the descriptor open; the kernel reads `len` bytes of `unspec`.
            let r = unsafe { libc::connect(std::os::fd::AsRawFd::as_raw_fd(&c), &unspec, len) };
            assert_eq!(r, 0, "disconnect: {}", io::Error::last_os_error());
            drop(c);
            let t0 = std::time::Instant::now();
            while !session.is_finished() && t0.elapsed() < StdDuration::from_secs(2) {
                std::thread::sleep(StdDuration::from_millis(5));
            }
            stop.store(true, Ordering::Relaxed);
            session.join().unwrap()
        });
        assert_eq!(
            end,
            SessionEnd::Disconnected("disconnected (reset after it closed its write side)".into())
        );
    }

    /// Sends a mirror's HELLO (from the oldest record) on `c`.
    fn send_hello(c: &mut TcpStream) {
        use ringwire_core::wire::HelloRepr;
        use std::io::Write;
        let mut hello = [0u8; 32];
        let n = HelloRepr { seq: 0, flags: 0 }.emit(&mut hello).unwrap();
        c.write_all(&hello[..n]).unwrap();
    }

    /// The first byte the server sends on `c` (its first frame's kind), if one comes
    /// within `c`'s read timeout.
    fn first_answer(c: &mut TcpStream) -> Option<u8> {
        use std::io::Read;
        let mut b = [0u8; 1];
        c.read(&mut b).ok().filter(|&n| n == 1).map(|_| b[0])
    }

    /// A server stopped (SIGSTOP) between accepting a mirror and reading its HELLO, for
    /// longer than the HELLO timeout, finds the HELLO waiting when it runs again and answers
    /// it. It judged the deadline before reading, so it closed the connection ("no HELLO
    /// 1000 ms after connecting") of a mirror that had sent its HELLO at once.
    #[test]
    fn a_server_paused_past_the_hello_timeout_reads_the_hello_before_it_judges() {
        use ringwire_core::wire::Kind;
        let (_src, _ring, server) = hello_timeout_server("paused-hello");
        let addr = server.local_addr();
        let mut first = None;
        let status = crate::test_fork::forked_with(
            20,
            || match server.run(&AtomicBool::new(false)) {
                // `--once`: the mirror went away after its session.
                Ok(_) => 0,
                Err(e) if e.to_string().contains("no HELLO") => 3,
                Err(_) => 4,
            },
            |pid| {
                let mut c = TcpStream::connect(addr).unwrap();
                c.set_read_timeout(Some(StdDuration::from_secs(5))).unwrap();
                // The child accepts and starts the session meanwhile.
                std::thread::sleep(StdDuration::from_millis(200));
                // SAFETY: kill only signals our own child.
                unsafe { libc::kill(pid, libc::SIGSTOP) };
                send_hello(&mut c);
                std::thread::sleep(StdDuration::from_secs(1));
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGCONT) };
                first = first_answer(&mut c);
            },
        );
        crate::test_fork::assert_exited_0(status, "a server paused for 1 s");
        assert_eq!(first, Some(Kind::Geometry as u8), "the answer to HELLO");
    }

    /// A server paused between a read pass that found no HELLO yet and the HELLO deadline's
    /// judgement (stopped or descheduled right there) judges up to when the pass began, so
    /// a HELLO that came during the pause is read and answered next. Judged up to the
    /// judgement, a 1 s pause closed the connection ("no HELLO 1000 ms after connecting") of
    /// a mirror that had sent its HELLO 100 ms in.
    #[test]
    fn a_pause_between_the_read_and_the_hello_judgement_is_not_waiting() {
        use ringwire_core::wire::Kind;
        let (_src, _ring, server) = hello_timeout_server("judged-hello");
        let addr = server.local_addr();
        let mirror = std::thread::spawn(move || {
            let mut c = TcpStream::connect(addr).unwrap();
            c.set_read_timeout(Some(StdDuration::from_secs(5))).unwrap();
            // The server accepts, finds nothing to read and pauses meanwhile.
            std::thread::sleep(StdDuration::from_millis(100));
            send_hello(&mut c);
            first_answer(&mut c)
        });
        PAUSE_BEFORE_JUDGING.with(|c| c.set(Some(StdDuration::from_secs(1))));
        let r = server.run(&AtomicBool::new(false));
        let paused = PAUSE_BEFORE_JUDGING.with(std::cell::Cell::take).is_none();
        let first = mirror.join().unwrap();
        assert!(paused, "the session never paused");
        r.expect("a pause after the read was taken for waiting on the HELLO");
        assert_eq!(first, Some(Kind::Geometry as u8), "the answer to HELLO");
    }

    /// A ring whose header holds a `write_seq` at or past `SEQ_LIMIT` (no writer gets
    /// there: a corrupt header) is refused at the start, as a producer refuses it, and a
    /// running server whose ring gets one ends with the same error, naming the value,
    /// `--once` included. Both served it: a GEOMETRY and HEARTBEATs carrying sequences that
    /// every mirror refuses, live sessions frozen, and no word from serve about why.
    #[test]
    fn a_write_seq_past_the_sequence_limit_is_a_corrupt_ring() {
        use ringwire_core::layout::SEQ_LIMIT;
        let s = TmpPath::shm("serve-seq-limit");
        let ring = source_ring(s.path(), 16);
        publish(&ring, 1..=5);
        let bad = SEQ_LIMIT + 3;
        let is_bad = |e: &ReplicaError| {
            matches!(e, ReplicaError::Ring(r)
                if r.attach_error() == Some(AttachError::WriteSeqExhausted { write_seq: bad }))
                && e.to_string().contains(&format!("{bad:#x}"))
        };
        for once in [false, true] {
            ring.ring().write_seq().store(5, Ordering::Release);
            let mut so = quiet(s.path());
            so.once = once;
            let server = Server::bind(so).unwrap();
            let addr = server.local_addr();
            let stop = AtomicBool::new(false);
            let (r, first, took) = std::thread::scope(|sc| {
                let stops = [&stop];
                let _stop = StopOnDrop(&stops);
                let srv = sc.spawn(|| server.run(&stop));
                let mut c = TcpStream::connect(addr).unwrap();
                c.set_read_timeout(Some(StdDuration::from_secs(5))).unwrap();
                send_hello(&mut c);
                let first = first_answer(&mut c);
                ring.ring().write_seq().store(bad, Ordering::Release);
                ring.wake_all();
                // A server that serves on is stopped after 5 s.
                let t0 = std::time::Instant::now();
                while !srv.is_finished() && t0.elapsed() < StdDuration::from_secs(5) {
                    std::thread::sleep(StdDuration::from_millis(10));
                }
                let took = t0.elapsed();
                stop.store(true, Ordering::Relaxed);
                (srv.join().unwrap(), first, took)
            });
            assert_eq!(first, Some(Kind::Geometry as u8), "once {once}");
            let e = r
                .err()
                .unwrap_or_else(|| panic!("once {once}: served on for {took:?}"));
            assert!(is_bad(&e), "once {once}: {e}");
        }
        let e = Server::bind(quiet(s.path()))
            .err()
            .expect("bound a corrupt ring");
        assert!(is_bad(&e), "{e}");
        // Not taken for a ring still being created: refused at once.
        let t0 = std::time::Instant::now();
        let e = run_following(&quiet(s.path()), &AtomicBool::new(false), |_| {}).unwrap_err();
        assert!(is_bad(&e), "{e}");
        assert!(
            t0.elapsed() < StdDuration::from_millis(500),
            "{:?}",
            t0.elapsed()
        );
    }

    /// An MPMC ring whose `write_seq` is at or past its `claim_seq` (below 2^63: a corrupt
    /// header, since a producer claims a ticket before it publishes it) is refused at the
    /// start, naming both values, as `stat` refuses it; served, it offered mirrors records
    /// that were never written.
    #[test]
    fn an_mpmc_write_seq_past_claim_seq_is_a_corrupt_ring() {
        let s = TmpPath::shm("serve-mpmc-past-claim");
        let p = crate::lossy_mpmc::MpmcProducer::<u64>::create(s.path(), 16).unwrap();
        for v in 1..=3u64 {
            p.push(&v);
        }
        Server::bind(quiet(s.path())).expect("a sound MPMC ring is served");
        let ring = ServedRing::open_any(s.path()).unwrap();
        let claim_seq = ring.view().claim_seq().load(Ordering::Relaxed);
        for w in [claim_seq, claim_seq + 5] {
            ring.view().write_seq().store(w, Ordering::Release);
            let e = Server::bind(quiet(s.path()))
                .err()
                .expect("bound a corrupt ring");
            assert!(
                matches!(&e, ReplicaError::Ring(r)
                if r.attach_error() == Some(AttachError::WriteSeqPastClaimSeq {
                    write_seq: w,
                    claim_seq,
                })),
                "{e}"
            );
            assert!(e.to_string().contains(&format!("write_seq {w}")), "{e}");
        }
    }

    /// A ring that is mapped read-only (as when serve has no write access) is served over
    /// TCP and unicast UDP: records present at the start, and records published later,
    /// which idle threads find by polling (the futex would need a store).
    #[test]
    fn a_read_only_ring_is_served_by_polling() {
        use super::super::mirror::{MirrorProgress, run_observed};
        for unicast in [false, true] {
            let src = TmpPath::shm(&format!("serve-ro-src-{unicast}"));
            let mir = TmpPath::shm(&format!("serve-ro-mir-{unicast}"));
            let ring = source_ring(src.path(), 1024);
            publish(&ring, 1..=100);
            let mut so = quiet(src.path());
            so.udp = unicast.then_some(0);
            FORCE_READ_ONLY.with(|f| f.set(true));
            let server = Server::bind(so);
            FORCE_READ_ONLY.with(|f| f.set(false));
            let server = server.unwrap();
            assert!(server.ring.read_only.is_some());
            assert!(matches!(server.ring.mapping, Mapping::ReadOnly(_)));
            let stop = AtomicBool::new(false);
            let mstop = AtomicBool::new(false);
            let progress = MirrorProgress::new();
            let mo = mirror_from_oldest(&server, mir.path(), unicast);
            let reached = |n: u64| {
                let t0 = std::time::Instant::now();
                let mut seen = progress.snapshot();
                while seen.last_seq < n && t0.elapsed() < StdDuration::from_secs(20) {
                    seen = progress.wait_changed(&seen, StdDuration::from_millis(100));
                }
                seen
            };
            let (got, sum) = std::thread::scope(|sc| {
                let stops = [&stop, &mstop];
                let _stop = StopOnDrop(&stops);
                let srv = sc.spawn(|| server.run(&stop));
                let m = sc.spawn(|| run_observed(&mo, &mstop, Some(&progress)));
                let first = reached(100);
                // Live records, with pauses long enough for the server threads to idle.
                for k in 0..10 {
                    std::thread::sleep(StdDuration::from_millis(20));
                    publish(&ring, 101 + k * 20..=120 + k * 20);
                }
                let last = reached(300);
                mstop.store(true, Ordering::Relaxed);
                let sum = m.join().unwrap().unwrap();
                stop.store(true, Ordering::Relaxed);
                srv.join().unwrap().unwrap();
                ((first.last_seq, last.last_seq, last.udp), sum)
            });
            assert_eq!(got, (100, 300, unicast), "unicast {unicast}");
            assert_eq!(sum.last_seq, 300);
            assert_eq!(sum.counters.gaps, 0);
        }
    }

    #[test]
    fn polling_waits_at_most_max_and_returns_when_ready() {
        let p = TmpPath::shm("serve-poll");
        let ring = source_ring(p.path(), 16);
        let mut w = PollWait::new(false);
        let t0 = std::time::Instant::now();
        w.wait(ring.ring(), 1, StdDuration::from_millis(20));
        let dt = t0.elapsed();
        assert!(dt >= StdDuration::from_millis(19), "{dt:?}");
        assert!(dt < StdDuration::from_millis(500), "{dt:?}");
        assert!(w.misses > 0);
        publish(&ring, 1..=1);
        let t0 = std::time::Instant::now();
        w.wait(ring.ring(), 1, StdDuration::from_secs(5));
        // Ready before the call: returns at once. 1 s leaves room for a loaded machine's
        // scheduling and still tells "at once" from waiting out the 5 s.
        let dt = t0.elapsed();
        assert!(dt < StdDuration::from_secs(1), "{dt:?}");
        assert_eq!(w.misses, 0);
    }

    /// Errors that waiting cannot cure fail at once; only an unfinished creation (and, after
    /// a replacement, a missing path) is retried.
    #[test]
    fn only_transient_open_errors_are_retried() {
        let missing = TmpPath::shm("serve-missing");
        let dir = TmpPath::shm("serve-dir");
        std::fs::create_dir(dir.path()).unwrap();
        let fifo = TmpPath::shm("serve-fifo");
        let c = std::ffi::CString::new(fifo.path().as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let magic = TmpPath::shm("serve-magic");
        std::fs::write(magic.path(), [0xA5u8; 4096]).unwrap();
        let queue = TmpPath::shm("serve-queue");
        let q = crate::queue::MpmcQueue::<u64>::create(queue.path(), 64).unwrap();
        let stop = AtomicBool::new(false);
        for p in [&missing, &dir, &fifo, &magic, &queue] {
            let t0 = std::time::Instant::now();
            let r = run_following(&quiet(p.path()), &stop, |_| {});
            let dt = t0.elapsed();
            let e = r
                .err()
                .unwrap_or_else(|| panic!("{}: served", p.path().display()));
            assert!(
                dt < StdDuration::from_millis(300),
                "{}: failed after {dt:?}: {e}",
                p.path().display()
            );
            assert!(!transient(&e, false), "{e}");
        }
        drop(q);
        // After a replacement, a path not there yet may be the new ring on its way.
        let e = Server::bind(quiet(missing.path())).err().unwrap();
        assert!(transient(&e, true), "{e}");
        // An empty file becoming a ring (the creation protocol sizes it, magic last) is
        // waited for.
        let growing = TmpPath::shm("serve-growing");
        std::fs::write(growing.path(), b"").unwrap();
        let e = Server::bind(quiet(growing.path())).err().unwrap();
        assert!(transient(&e, false), "{e}");
        std::thread::scope(|sc| {
            sc.spawn(|| {
                std::thread::sleep(StdDuration::from_millis(200));
                let ring = source_ring(growing.path(), 16);
                std::thread::sleep(StdDuration::from_millis(300));
                stop.store(true, Ordering::Relaxed);
                drop(ring);
            });
            run_following(&quiet(growing.path()), &stop, |_| {}).unwrap();
        });
    }

    /// The multicast interface error names the interface address and the group.
    #[test]
    fn a_bad_multicast_interface_is_named() {
        let p = TmpPath::shm("serve-iface");
        let _ring = source_ring(p.path(), 16);
        let mut so = quiet(p.path());
        so.multicast = Some(SocketAddrV4::new(Ipv4Addr::new(239, 255, 77, 9), 17_401));
        so.iface = Some(Ipv4Addr::new(198, 51, 100, 199));
        let e = Server::bind(so).err().expect("refused").to_string();
        assert!(e.contains("198.51.100.199"), "{e}");
        assert!(e.contains("239.255.77.9:17401"), "{e}");
    }

    /// The UDP socket binds --bind's IP when it names one.
    #[test]
    fn the_udp_socket_binds_the_tcp_address_ip() {
        let p = TmpPath::shm("serve-udpip");
        let _ring = source_ring(p.path(), 16);
        for (bind, want) in [
            ("127.0.0.1:0", Ipv4Addr::LOCALHOST),
            ("0.0.0.0:0", Ipv4Addr::UNSPECIFIED),
            ("[::]:0", Ipv4Addr::UNSPECIFIED),
        ] {
            let mut so = quiet(p.path());
            so.bind = bind.parse().unwrap();
            so.udp = Some(0);
            let server = Server::bind(so).unwrap();
            assert_eq!(server.udp_addr().unwrap().ip(), want, "--bind {bind}");
        }
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        let lo = Some(Ipv4Addr::LOCALHOST);
        let eth = Some(Ipv4Addr::new(192, 0, 2, 2));
        assert_eq!(
            udp_bind_ip(a("[::ffff:127.0.0.1]:1"), None),
            Ipv4Addr::LOCALHOST
        );
        assert_eq!(udp_bind_ip(a("127.0.0.1:1"), lo), Ipv4Addr::LOCALHOST);
        assert_eq!(udp_bind_ip(a("127.0.0.1:1"), eth), Ipv4Addr::UNSPECIFIED);
        assert_eq!(
            udp_bind_ip(a("192.0.2.2:1"), lo),
            Ipv4Addr::new(192, 0, 2, 2)
        );
    }

    /// Multicast without --iface leaves by the interface of --bind's address: a socket bound
    /// to 127.0.0.1 reaches a receiver joined on loopback.
    #[test]
    fn multicast_from_a_loopback_bind_reaches_loopback_receivers() {
        let p = TmpPath::shm("serve-mcbind");
        let _ring = source_ring(p.path(), 16);
        let port = 21_000 + (std::process::id() % 20_000) as u16;
        let group = Ipv4Addr::new(239, 255, 77, 3);
        let rx = crate::net::sockets::multicast_receiver(group, port, Ipv4Addr::LOCALHOST).unwrap();
        let mut so = quiet(p.path());
        so.multicast = Some(SocketAddrV4::new(group, port));
        so.ttl = 0;
        let server = Server::bind(so).unwrap();
        let tx = server.udp.as_ref().unwrap();
        tx.send_to(b"tick", (group, port)).unwrap();
        rx.set_nonblocking(false).unwrap();
        rx.set_read_timeout(Some(StdDuration::from_secs(2)))
            .unwrap();
        let mut buf = [0u8; 16];
        let (n, from) = rx.recv_from(&mut buf).unwrap();
        assert_eq!(
            (&buf[..n], from.ip()),
            (&b"tick"[..], IpAddr::V4(Ipv4Addr::LOCALHOST))
        );
    }

    /// An IPv6 listen address no (IPv4-only) mirror could reach is refused; [::] is not.
    #[test]
    fn an_ipv6_only_bind_is_refused() {
        let p = TmpPath::shm("serve-v6");
        let _ring = source_ring(p.path(), 16);
        let mut so = quiet(p.path());
        so.bind = "[::1]:0".parse().unwrap();
        let e = Server::bind(so).err().expect("refused").to_string();
        assert!(e.contains("IPv4"), "{e}");
        assert!(check_bind("--bind", "[::]:0".parse().unwrap()).is_ok());
        assert!(check_bind("--bind", "[::ffff:127.0.0.1]:0".parse().unwrap()).is_ok());
    }

    /// The system refusing a session's thread (EAGAIN at a thread or process limit; here
    /// injected) refuses that connection alone, counted, with an orderly close (the mirror
    /// reads the end of the stream before any byte, which it reports as a refusal), and the
    /// server goes on: the next connection is served. `Scope::spawn` panicked there, which
    /// took the accept loop, and every later mirror, down.
    #[test]
    fn a_session_thread_that_cannot_start_refuses_only_its_connection() {
        let src = TmpPath::shm("serve-spawn-src");
        let ring = source_ring(src.path(), 1024);
        publish(&ring, 1..=50);
        let server = Server::bind(quiet(src.path())).unwrap();
        server.fail_spawns.store(2, Ordering::Relaxed);
        let addr = server.local_addr();
        let stop = AtomicBool::new(false);
        let mut hello = [0u8; 32];
        let k = ringwire_core::wire::HelloRepr { seq: 0, flags: 0 }
            .emit(&mut hello)
            .unwrap();
        let firsts = std::thread::scope(|sc| {
            let stops = [&stop];
            let _stop = StopOnDrop(&stops);
            let srv = sc.spawn(|| server.run(&stop));
            let firsts: Vec<io::Result<(usize, u8)>> = (0..3)
                .map(|_| {
                    let mut c = TcpStream::connect(addr)?;
                    c.set_read_timeout(Some(StdDuration::from_secs(5)))?;
                    std::io::Write::write_all(&mut c, &hello[..k])?;
                    let mut b = [0u8; 16];
                    let n = c.read(&mut b)?;
                    Ok((n, b[0]))
                })
                .collect();
            stop.store(true, Ordering::Relaxed);
            srv.join().unwrap().unwrap();
            firsts
        });
        let firsts: Vec<(usize, u8)> = firsts.into_iter().map(|r| r.unwrap()).collect();
        assert_eq!(firsts, [(0, 0), (0, 0), (16, Kind::Geometry as u8)]);
        let sum = server.summary();
        assert_eq!(
            (sum.spawn_failures, sum.refused, sum.sessions),
            (2, 2, 1),
            "{sum:?}"
        );
    }

    /// A repeated log line is printed the first time, then at most once per LOG_EVERY,
    /// with the number left out since.
    #[test]
    fn repeated_log_lines_are_rate_limited() {
        let mut r = RateLog::new(LOG_EVERY);
        assert_eq!(r.hit(), Some(0));
        assert_eq!((0..99).filter_map(|_| r.hit()).count(), 0);
        r.age(LOG_EVERY);
        assert_eq!(r.hit(), Some(99));
        assert_eq!(r.hit(), None);
        assert_eq!(more_since(0, LIKE_IT), "");
        assert!(more_since(99, LIKE_IT).contains("99 more"));
    }

    /// Sends `bytes` from a fresh loopback socket to the server's UDP socket `sock`.
    fn send_datagram_to(sock: &UdpSocket, bytes: &[u8]) {
        let to = sock.local_addr().unwrap().port();
        let tx = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        tx.send_to(bytes, (Ipv4Addr::LOCALHOST, to)).unwrap();
    }

    /// A receive on the UDP socket that fails in this host (ENOMEM, injected) is counted and
    /// ends the pass, where every receive error was passed over in silence and the pass
    /// tried 64 times; the ICMP report of an earlier datagram (ECONNREFUSED) is passed over
    /// and not counted; and once receives work again the socket's datagrams are taken.
    #[test]
    fn a_udp_receive_failing_here_is_counted_and_ends_the_pass() {
        let (_src, _ring, server) = unicast_server("serve-recv-fail");
        let sock = server.udp.as_ref().expect("a UDP socket");
        server.fail_receives.store(libc::ENOMEM, Ordering::Relaxed);
        server.take_punches(sock);
        server.take_punches(sock);
        assert_eq!(server.summary().udp_receive_errors, 2, "one failure a pass");
        server
            .fail_receives
            .store(libc::ECONNREFUSED, Ordering::Relaxed);
        server.take_punches(sock);
        assert_eq!(server.summary().udp_receive_errors, 2, "an ICMP report");
        server.fail_receives.store(0, Ordering::Relaxed);
        send_datagram_to(sock, b"not a punch");
        let t0 = std::time::Instant::now();
        while server.summary().udp.rejected == 0 && t0.elapsed() < StdDuration::from_secs(5) {
            server.take_punches(sock);
            std::thread::sleep(StdDuration::from_millis(1));
        }
        let sum = server.summary();
        assert_eq!(
            (sum.udp.rejected, sum.udp_receive_errors),
            (1, 2),
            "{sum:?}"
        );
    }

    /// While receives on its UDP socket fail in this host with a datagram waiting (ENOMEM,
    /// injected), the UDP thread of a server no mirror has punched sleeps between passes
    /// instead of polling the socket, which reports the datagram at once: a failed receive
    /// every `UNHEARD_POLL` (50 ms), where it spun on a core (184,000 failed receives in
    /// the 300 ms, one run of a debug build).
    #[test]
    fn a_failing_udp_socket_does_not_spin_the_udp_thread() {
        let (_src, _ring, server) = unicast_server("serve-recv-spin");
        let sock = server.udp.as_ref().expect("a UDP socket");
        server.fail_receives.store(libc::ENOMEM, Ordering::Relaxed);
        send_datagram_to(sock, b"waiting");
        let halt = AtomicBool::new(false);
        let run = StdDuration::from_millis(300);
        let t0 = std::time::Instant::now();
        std::thread::scope(|s| {
            s.spawn(|| server.udp_loop(sock, &halt));
            std::thread::sleep(run);
            halt.store(true, Ordering::Relaxed);
        });
        let passes = t0.elapsed().as_millis() / UNHEARD_POLL.as_millis() + 2;
        let failed = server.summary().udp_receive_errors;
        assert!(
            (1..=u64::try_from(passes).unwrap()).contains(&failed),
            "{failed} failed receives in {:?}",
            t0.elapsed()
        );
    }

    /// Every session that ends without a HELLO is counted as closed without one, not only
    /// those the HELLO timeout closes: two port probes that connect and close at once, one
    /// that resets, one that sends a malformed HELLO, and one left open until the HELLO
    /// timeout; a mirror that sends its HELLO is not. Before, only the timed-out one was
    /// counted ("1 closed without HELLO" for five).
    #[test]
    fn every_session_ended_without_a_hello_is_counted() {
        use std::io::Write;
        let src = TmpPath::shm("serve-no-hello");
        let ring = source_ring(src.path(), 16);
        publish(&ring, 1..=3);
        let mut so = quiet(src.path());
        so.hello_timeout = StdDuration::from_millis(300);
        let server = Server::bind(so).unwrap();
        let addr = server.local_addr();
        let stop = AtomicBool::new(false);
        let sum = std::thread::scope(|sc| {
            let _stop = StopOnDrop(&[&stop]);
            let run = sc.spawn(|| server.run(&stop));
            let ended = |n: u64| {
                let t0 = std::time::Instant::now();
                while server.summary().sessions < n && t0.elapsed() < StdDuration::from_secs(5) {
                    std::thread::sleep(StdDuration::from_millis(5));
                }
            };
            for _ in 0..2 {
                drop(TcpStream::connect(addr).unwrap());
            }
            let reset = TcpStream::connect(addr).unwrap();
            socket2::SockRef::from(&reset)
                .set_linger(Some(StdDuration::ZERO))
                .unwrap();
            drop(reset);
            let mut bad = TcpStream::connect(addr).unwrap();
            bad.write_all(&[0xAB; 32]).unwrap();
            let idle = TcpStream::connect(addr).unwrap();
            let mut good = TcpStream::connect(addr).unwrap();
            good.set_read_timeout(Some(StdDuration::from_secs(5)))
                .unwrap();
            send_hello(&mut good);
            assert_eq!(
                first_answer(&mut good),
                Some(ringwire_core::wire::Kind::Geometry as u8)
            );
            ended(6);
            // The idle one is closed by the HELLO timeout; the others end at once.
            let t0 = std::time::Instant::now();
            while server.summary().closed_without_hello < 5
                && t0.elapsed() < StdDuration::from_secs(5)
            {
                std::thread::sleep(StdDuration::from_millis(5));
            }
            drop((bad, idle, good));
            stop.store(true, Ordering::Relaxed);
            run.join().unwrap().unwrap()
        });
        assert_eq!(sum.sessions, 6, "{sum:?}");
        assert_eq!(sum.hello_timeouts, 1, "{sum:?}");
        assert_eq!(sum.protocol_errors, 1, "{sum:?}");
        assert_eq!(sum.closed_without_hello, 5, "{sum:?}");
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
