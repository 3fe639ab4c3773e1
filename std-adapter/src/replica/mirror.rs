//! `ringwire mirror`: keeps a local copy of a remote ring (spec §19, §21). Connects, sends
//! HELLO, creates or adopts the mirror ring at GEOMETRY, then applies DATA from TCP or from
//! UDP (`recvmmsg` batches), NAKs holes and PUNCHes unicast sources. When idle it blocks in
//! `ppoll` on both sockets until the state machine's next timer; with `--spin` it first
//! polls without blocking for a bounded, adaptive time. Every later connection resumes.

use std::io::{self, Read};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream, ToSocketAddrs, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration as StdDuration;

use ringwire_core::replicate::collect::max_frame_len;
use ringwire_core::replicate::holdback::HeldEntry;
use ringwire_core::replicate::mirror::{MAX_NAK_BACKOFF, MIN_NAK_TIMEOUT, NAK_UNANSWERED_LIMIT};
use ringwire_core::replicate::{
    Channel, Duration, HoldBack, Holds, Mirror, MirrorConfig, MirrorCounters, MirrorError, Start,
    StreamBuf,
};
use ringwire_core::wire::{Frame, GeometryRepr, Kind, MulticastRepr, WireError, total_len};

use super::anticipate::Anticipator;
use super::io::{
    ZeroedBuf, lazy_zeroed, now, peer, peer_v4, poll, pollin, sock_v4, std_dur, until,
    write_all_within,
};
use super::sink::FileSink;
use super::spin::SpinPolicy;
use super::{RateLog, ReplicaError, more_since};
use crate::net::mmsg::{MAX_DATAGRAM, RecvBatch};
use crate::net::sockets::{
    TCP_WRITE_TIMEOUT, connect_tcp, multicast_receiver, reports_an_earlier_datagram,
    unicast_receiver,
};

/// Hold-back entries (spec §22).
const HOLDBACK_ENTRIES: usize = 8192;
/// Hold-back record bytes.
const HOLDBACK_BYTES: usize = 16 << 20;
/// The TCP frame buffer to start with: the 1 MiB frame budget of spec §22 with room to
/// spare. A longer frame the ring's geometry allows (one record longer than the budget goes
/// alone) grows it to [`max_frame_len`] at once; anything longer is a protocol error.
const STREAM_BUF: usize = (2 << 20) + 64;
/// Datagrams per `recvmmsg`.
const RECV_BATCH: usize = 64;
/// How often a connection checks that the mirror ring's path still names the ring it
/// writes (as `serve` checks its source's).
const ORPHAN_CHECK: StdDuration = StdDuration::from_millis(500);
/// Longest blocking wait (the stop flag is checked at least this often).
const MAX_BLOCK: StdDuration = StdDuration::from_millis(100);

/// Settings of `ringwire mirror` (spec §26.2).
#[derive(Clone, Debug)]
pub struct MirrorOptions {
    /// The source's TCP address (unused with [`MirrorOptions::source_name`]).
    pub source: SocketAddr,
    /// The source as `HOST:PORT` with a host name, resolved again before each connection
    /// attempt, as ringfire's mirror resolves its SOURCE at each connect: the attempt goes to
    /// the name's first IPv4 address, and a name that does not resolve (DNS not up yet at
    /// boot) or has no IPv4 address is a failed attempt, retried as a refused connect is.
    /// `None` (the default): [`MirrorOptions::source`].
    pub source_name: Option<String>,
    /// The local mirror ring.
    pub path: PathBuf,
    /// Where the first connection starts; later ones resume.
    pub start: Start,
    /// Ask for UDP unicast even if the source has multicast.
    pub unicast: bool,
    /// Multicast join interface; unspecified (the default) joins on the mirror's own address
    /// of its TCP connection to the source (127.0.0.1 for a source on this host, whose
    /// datagrams leave by loopback), or on the kernel's choice if that is not IPv4. Another
    /// address no interface of this host has is refused by [`run`] before it connects
    /// ([`ReplicaError::InvalidArgument`] for `--iface`), whatever the source's transport.
    pub iface: Ipv4Addr,
    /// Poll without blocking for a bounded time before blocking.
    pub spin: bool,
    /// Anticipate a steady stream's next datagram or frame (see [`super::anticipate`]).
    pub anticipate: bool,
    /// Exit when the source disconnects.
    pub once: bool,
    /// Delay between connection attempts.
    pub reconnect: StdDuration,
    /// How long a hole in the UDP stream waits for reordered datagrams before its first
    /// NAK ([`MirrorConfig::nak_delay`]); zero asks at once.
    pub nak_delay: StdDuration,
    /// How long an unanswered NAK waits before it is repeated ([`MirrorConfig::nak_timeout`]).
    pub nak_timeout: StdDuration,
    /// Permission bits of a created mirror ring (before the umask).
    pub file_mode: u32,
    /// Receive buffer of the UDP socket; `None` keeps the driver's 8 MiB.
    pub rcvbuf: Option<usize>,
    /// Status line every second and connection summaries on stderr.
    pub log: bool,
    /// A source that has not sent its GEOMETRY this long after the TCP connect is given up
    /// on: the connection is closed and logged, and the mirror reconnects (with `once`, it
    /// fails). Zero waits forever, as ringfire's mirror does.
    pub handshake_timeout: StdDuration,
    /// After the handshake, a source from which nothing at all has come for this long (no
    /// record, no heartbeat: a ringwire or ringfire source sends a TCP HEARTBEAT every
    /// 200 ms when idle, and a UDP one every 1 ms by default) is given up on like a silent
    /// handshake. Over TCP what counts is whole frames, or 4 KiB of a frame in progress: a
    /// source that trickles a few bytes of a frame it never completes is silent too. The
    /// default, 5 s, is 25 TCP heartbeat intervals, and the source's own write timeout for
    /// a mirror that stops reading (spec §24); a library source configured with a UDP
    /// heartbeat longer than about a tenth of it needs a longer one here. Zero waits
    /// forever, as ringfire's mirror does.
    pub silence_timeout: StdDuration,
    /// The largest mirror ring (file length, bytes) the mirror creates: a source whose
    /// GEOMETRY needs more is refused (a fatal error, as a ring that cannot be created),
    /// and a ring already there is kept. `None` (the default, as ringfire's mirror): no
    /// limit but the filesystem's free space, so a source decides how much of a tmpfs (of
    /// memory) this host reserves.
    pub max_ring_len: Option<u64>,
}

/// [`MirrorOptions::handshake_timeout`] by default.
pub const HANDSHAKE_TIMEOUT: StdDuration = StdDuration::from_secs(5);
/// [`MirrorOptions::silence_timeout`] by default.
pub const SILENCE_TIMEOUT: StdDuration = StdDuration::from_secs(5);

impl MirrorOptions {
    /// Defaults (spec §26.2) for `source` and `path`.
    pub fn new(source: SocketAddr, path: impl Into<PathBuf>) -> MirrorOptions {
        MirrorOptions {
            source,
            source_name: None,
            path: path.into(),
            start: Start::Latest,
            unicast: false,
            iface: Ipv4Addr::UNSPECIFIED,
            spin: false,
            anticipate: true,
            once: false,
            reconnect: StdDuration::from_millis(500),
            nak_delay: StdDuration::ZERO,
            nak_timeout: StdDuration::from_millis(20),
            file_mode: 0o660,
            rcvbuf: None,
            log: true,
            handshake_timeout: HANDSHAKE_TIMEOUT,
            silence_timeout: SILENCE_TIMEOUT,
            max_ring_len: None,
        }
    }
}

/// What a mirror did over all its connections.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MirrorSummary {
    /// Connections that completed a TCP connect.
    pub connections: u64,
    /// Attempts that failed and were retried or ended `--once`: connects that did not
    /// complete, and connections that failed (a protocol error, a handshake or silence
    /// timeout, a source at its session limit, a multicast group that cannot be joined
    /// here). These connections are also in `connections`.
    pub failed_attempts: u64,
    /// The last sequence written into the mirror ring: its `write_seq` (0 if none), what
    /// the "connection ended" and "done" log lines show. With `--from latest` nothing is
    /// written until the source publishes after the handshake.
    pub last_seq: u64,
    /// Counters summed over connections.
    pub counters: MirrorCounters,
    /// Datagrams whose sender was not the source or that were truncated.
    pub foreign_datagrams: u64,
    /// PUNCHes (UDP unicast) the kernel refused to send (a firewall, no route to the
    /// source). A source learns where to send its datagrams from the PUNCHes that reach
    /// it: while every one fails, no live record comes.
    pub punch_errors: u64,
}

/// What a running mirror has done so far, as [`MirrorProgress`] shows it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MirrorSnapshot {
    /// Handshakes completed (the mirror ring exists after the first).
    pub handshakes: u64,
    /// The GEOMETRY of the latest handshake; its `seq` is the first sequence offered.
    pub geometry: Option<GeometryRepr>,
    /// The latest connection kept the ring already at the path instead of creating one
    /// (false from the moment a resume check recreates it).
    pub resumed: bool,
    /// Live records come over UDP (multicast or unicast).
    pub udp: bool,
    /// ... over UDP unicast.
    pub unicast: bool,
    /// The session byte of the source's UDP announcement (0 over TCP).
    pub session: u8,
    /// The stream's position: the sequence before the next one the mirror expects, so
    /// the last one written once records flow (0 before any handshake). Right after a
    /// handshake at `latest` it is the source's `write_seq` although nothing is written
    /// yet (ringfire's `Mirror::sequence`); [`MirrorSummary::last_seq`] is the ring's.
    pub last_seq: u64,
    /// The highest sequence the source has announced on this connection, as far as it is
    /// believed (`Mirror::source_seq` in ringwire-core: a heartbeat claim the source does
    /// not back up when asked for it is dropped).
    pub source_seq: Option<u64>,
    /// Counters summed over connections.
    pub counters: MirrorCounters,
    /// The range of the most recent NAK seen outstanding.
    pub last_nak: Option<(u64, u64)>,
    /// PUNCHes not sent, summed over connections ([`MirrorSummary::punch_errors`]).
    pub punch_errors: u64,
}

/// A running mirror's state for other threads of the process ([`run_observed`]). The driver
/// refreshes it at each handshake, whenever it is about to wait for input, when a new NAK
/// is outstanding, after every 64 busy rounds and when a connection ends: under load it
/// trails the ring by a few batches, and it costs the driver nothing per record (nor a
/// wake-up call per refresh unless a thread is in [`MirrorProgress::wait_changed`]).
#[derive(Debug, Default)]
pub struct MirrorProgress {
    state: Mutex<MirrorSnapshot>,
    /// Signalled after a refresh while `waiters` > 0, and when the driver returns.
    changed: Condvar,
    /// Threads in `wait_changed`; changed and read only under the `state` lock.
    waiters: AtomicUsize,
    /// The driver has returned; set under the `state` lock.
    ended: AtomicBool,
}

impl MirrorProgress {
    /// Nothing seen yet.
    pub fn new() -> MirrorProgress {
        MirrorProgress::default()
    }

    /// A copy of the latest state.
    pub fn snapshot(&self) -> MirrorSnapshot {
        *self.lock()
    }

    /// Waits until the state differs from `seen` or the driver has returned, for at most
    /// `max`, and returns the state then.
    pub fn wait_changed(&self, seen: &MirrorSnapshot, max: StdDuration) -> MirrorSnapshot {
        let g = self.lock();
        // Relaxed here and below: the `state` lock orders these.
        self.waiters.fetch_add(1, Ordering::Relaxed);
        let (g, _) = self
            .changed
            .wait_timeout_while(g, max, |s| s == seen && !self.ended.load(Ordering::Relaxed))
            .unwrap_or_else(|p| p.into_inner());
        self.waiters.fetch_sub(1, Ordering::Relaxed);
        *g
    }

    /// Whether the [`run_observed`] fed by this has returned (false again once another
    /// starts with it).
    pub fn ended(&self) -> bool {
        let _g = self.lock();
        self.ended.load(Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, MirrorSnapshot> {
        // Plain data: a panic elsewhere leaves nothing half-updated that matters.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Releases `g`, held across a refresh, and wakes the threads in `wait_changed`.
    fn publish(&self, g: MutexGuard<'_, MirrorSnapshot>) {
        let wake = self.waiters.load(Ordering::Relaxed) > 0;
        drop(g);
        if wake {
            self.changed.notify_all();
        }
    }

    fn set_ended(&self, ended: bool) {
        let g = self.lock();
        self.ended.store(ended, Ordering::Relaxed);
        self.publish(g);
    }
}

/// Marks a [`MirrorProgress`] ended when [`run_observed`] returns, or unwinds.
struct EndOnDrop<'a>(&'a MirrorProgress);

impl Drop for EndOnDrop<'_> {
    fn drop(&mut self) {
        self.0.set_ended(true);
    }
}

/// Busy rounds between two refreshes of a [`MirrorProgress`].
const PROGRESS_ROUNDS: u32 = 64;

fn add(a: &mut MirrorCounters, b: &MirrorCounters) {
    a.frames += b.frames;
    a.datagrams += b.datagrams;
    a.naks_sent += b.naks_sent;
    a.naks_unanswered += b.naks_unanswered;
    a.records_retransmitted += b.records_retransmitted;
    a.gaps += b.gaps;
    a.records_skipped += b.records_skipped;
    a.duplicates_dropped += b.duplicates_dropped;
    a.garbage_dropped += b.garbage_dropped;
    a.udp_wrong_source += b.udp_wrong_source;
    a.udp_unconfirmed += b.udp_unconfirmed;
    a.records_written += b.records_written;
    a.holdback_dropped += b.holdback_dropped;
    a.restarts += b.restarts;
    a.resumes_verified += b.resumes_verified;
    a.resumes_unverified += b.resumes_unverified;
}

enum End {
    Stopped,
    /// The source hung up or reset the connection after the handshake, between frames: a
    /// clean end, `--once` returns `Ok`.
    Closed(String),
    /// The connection failed: a protocol error, a source that closed it before GEOMETRY (a
    /// server at its session limit refuses this way) or inside a frame, a timeout (no
    /// GEOMETRY, a silent source, a write it did not read), a read failing with an error
    /// that is not a reset (ETIMEDOUT), a socket of this host's that
    /// failed (made non-blocking, waited on, received from: not an ICMP report), or a UDP
    /// socket the source's MULTICAST frame announces that cannot be opened here. `--once`
    /// returns `Err` (spec §26.2: a mirror error exits 1); otherwise the mirror reconnects.
    Failed(io::Error),
    Fatal(ReplicaError),
    /// A frame of this many bytes (header included) is longer than the stream buffer but
    /// within what the ring's geometry allows: grow the buffer and reconnect at once.
    Grow(usize),
}

/// Whether a DATA frame of `total` bytes may come for the mirror's ring: a record longer
/// than the 1 MiB budget travels alone (spec §22), up to a blob as long as the arena. A
/// frame beyond that, or any frame before the ring exists, is a protocol error.
fn fits_ring(sink: &FileSink, total: usize) -> bool {
    sink.view()
        .is_some_and(|v| total <= max_frame_len(v.geometry(), STREAM_BUF))
}

/// Bytes of a TCP frame still in progress that count as hearing from the source for
/// [`MirrorOptions::silence_timeout`]. Not every byte: a source that sends one byte of a
/// frame now and then, and never the rest, would keep the connection open for ever. Not
/// only whole frames either: a 1 MiB frame (the TCP budget, spec §22) takes longer than
/// the default 5 s on a link under 1.7 Mbit/s, and a mirror that gave it up would
/// reconnect, be sent the same frame again, and never get past it.
const SILENCE_PROGRESS: usize = 4 << 10;

/// How often a PUNCH the kernel keeps refusing is logged again (the first at once).
const PUNCH_LOG_EVERY: StdDuration = StdDuration::from_secs(10);

/// Bytes one pass of the mirror loop reads from TCP before it looks at the stop flag, the
/// UDP socket and its NAKs again (a 1 MiB DATA frame budget, spec §22).
const TCP_READ_PASS: usize = 1 << 20;

/// Records one pass of the mirror loop writes before it looks at the stop flag, the timers
/// and the other socket again. Bytes alone do not bound the work: a DATA frame of
/// zero-sized records is 16 bytes for up to 65,535 of them, and a pass of 1 MiB of such
/// frames from a hostile source was 4.3 billion slot writes (minutes of deafness to
/// SIGTERM). A million is more than a pass of the smallest records with bytes brings.
const RECORDS_PER_PASS: u64 = 1 << 20;

/// Sleeps `d` in slices, returning early when `stop` is set; a `d` past what an `Instant`
/// holds ([`MirrorOptions::reconnect`] set to `Duration::MAX`) sleeps until `stop` is set.
fn nap(d: StdDuration, stop: &AtomicBool) {
    let until = crate::wait::deadline_after(d);
    // Relaxed: a plain flag.
    while !stop.load(Ordering::Relaxed) {
        let left = until.map_or(NAP_SLICE, |t| {
            t.saturating_duration_since(std::time::Instant::now())
        });
        if left.is_zero() {
            break;
        }
        crate::sys::sleep(left.min(NAP_SLICE));
    }
}

/// Longest sleep of [`nap`] between two checks of the stop flag.
const NAP_SLICE: StdDuration = StdDuration::from_millis(20);

/// Runs the mirror until `stop` is set (or, with `once`, until the source disconnects).
pub fn run(opts: &MirrorOptions, stop: &AtomicBool) -> Result<MirrorSummary, ReplicaError> {
    run_observed(opts, stop, None)
}

/// [`run`], keeping `progress` up to date for other threads.
pub fn run_observed(
    opts: &MirrorOptions,
    stop: &AtomicBool,
    progress: Option<&MirrorProgress>,
) -> Result<MirrorSummary, ReplicaError> {
    run_inner(opts, stop, progress, None)
}

/// [`run`], keeping in `last_error` why the latest connect failed or connection ended, so
/// a caller that turned the log off (the demo) can still say why the mirror never came up.
pub(crate) fn run_noting_errors(
    opts: &MirrorOptions,
    stop: &AtomicBool,
    last_error: &Mutex<Option<String>>,
) -> Result<MirrorSummary, ReplicaError> {
    run_inner(opts, stop, None, Some(last_error))
}

fn run_inner(
    opts: &MirrorOptions,
    stop: &AtomicBool,
    progress: Option<&MirrorProgress>,
    last_error: Option<&Mutex<Option<String>>>,
) -> Result<MirrorSummary, ReplicaError> {
    let note = |why: String| {
        if let Some(m) = last_error {
            *m.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
        }
    };
    let _end = progress.map(|p| {
        p.set_ended(false);
        EndOnDrop(p)
    });
    if opts.source_name.is_none() && peer(opts.source).is_none() {
        return Err(ReplicaError::arg(
            "SOURCE",
            opts.source,
            "only IPv4 sources are supported",
        ));
    }
    super::check_iface(opts.iface, " (to join a multicast source's group on)")?;
    let mut sink = FileSink::open(&opts.path)?;
    if opts.log
        && let Some(e) = sink.not_adopted()
    {
        diag!("{}", not_usable_line(sink.path(), e, opts.start));
    }
    sink.set_mode(opts.file_mode);
    sink.set_max_len(opts.max_ring_len);
    // Failed attempts (a refused connect, or a connection that failed: a group it cannot
    // join, a source at its session limit) are logged at most once a second: with
    // `--reconnect-ms 0` they are retried at once, many times a second. The count of those
    // not shown goes with the next line, or, when the mirror stops or fails, with its last.
    let mut failures = RateLog::new(StdDuration::from_secs(1));
    let r = connections(opts, stop, progress, &note, sink, &mut failures);
    if opts.log
        && let Some(line) = failures.take_pending_line(FAILED_ATTEMPTS)
    {
        diag!("mirror: {line}");
    }
    r
}

/// The line that says, before connecting, that the file at `path` is not a usable ring
/// (`e` says why) and what happens to it at the handshake of a run started with `start`: a
/// new ring replaces it, and a resume starts from the source's oldest record instead.
fn not_usable_line(path: &std::path::Path, e: &crate::Error, start: Start) -> String {
    let instead = match start {
        Start::Resume => {
            "cannot resume it: a new ring replaces it at the handshake, from the source's \
             oldest record"
        }
        _ => "a new ring replaces it at the handshake",
    };
    format!(
        "mirror: the file at {} is not a usable ring ({}); {instead}",
        crate::shown::path(path),
        super::sink::unusable_reason(e)
    )
}

/// Where a connection attempt goes: [`MirrorOptions::source`], or
/// [`MirrorOptions::source_name`] resolved now (its first IPv4 address); with the source as
/// messages name it (`host:7400 (10.0.0.5:7400)`, or the name alone when it did not resolve).
fn attempt_addr(
    opts: &MirrorOptions,
) -> (
    String,
    io::Result<(SocketAddr, ringwire_core::replicate::PeerAddr)>,
) {
    let (shown, addr) = match &opts.source_name {
        None => (opts.source.to_string(), Ok(opts.source)),
        Some(name) => {
            let a = name.to_socket_addrs().and_then(|mut addrs| {
                addrs.find(SocketAddr::is_ipv4).ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::NotFound,
                        "no IPv4 address (mirrors connect to IPv4 sources only)",
                    )
                })
            });
            let shown = match &a {
                Ok(a) => format!("{name} ({a})"),
                Err(_) => name.clone(),
            };
            (shown, a)
        }
    };
    // Always IPv4 here: `run_inner` refused any other `source`, and a name gives its IPv4 one.
    let r = addr.and_then(|a| {
        peer(a)
            .map(|p| (a, p))
            .ok_or_else(|| io::ErrorKind::InvalidInput.into())
    });
    (shown, r)
}

/// The tail of the mirror's rate-limited failure lines ([`more_since`], [`RateLog`]).
const FAILED_ATTEMPTS: &str = "failed attempts since the last report";

/// [`run_inner`]'s loop: connects, runs the connection, naps, reconnects, until `stop` (or
/// with `once`, the end of the first connection).
fn connections(
    opts: &MirrorOptions,
    stop: &AtomicBool,
    progress: Option<&MirrorProgress>,
    note: &dyn Fn(String),
    mut sink: FileSink,
    failures: &mut RateLog,
) -> Result<MirrorSummary, ReplicaError> {
    let mut sum = MirrorSummary::default();
    let mut bufs = Buffers::new()?;
    let mut start = opts.start;
    // Options the source's transport made useless have been warned about.
    let mut warned = false;
    // Datagrams dropped for their source address have been warned about.
    let mut warned_source = false;
    // Relaxed: a plain flag.
    while !stop.load(Ordering::Relaxed) {
        let (source, attempt) = attempt_addr(opts);
        match attempt.and_then(|(a, src)| Ok((src, connect_tcp(a, StdDuration::from_secs(2))?))) {
            Err(e) => {
                sum.failed_attempts += 1;
                if opts.once {
                    return Err(ReplicaError::io(format!("connect {source}"), e));
                }
                let why = format!("connect {source}: {e}");
                note(why.clone());
                if opts.log
                    && let Some(n) = failures.hit_with(|| why)
                {
                    diag!(
                        "mirror: connect {source}: {e}; retrying{}",
                        more_since(n, FAILED_ATTEMPTS)
                    );
                }
            }
            Ok((src, stream)) => {
                sum.connections += 1;
                let mut c = Conn::new(opts, src, stream, start, &sink, &mut bufs);
                c.warned = warned;
                c.warned_source = warned_source;
                if let Some(p) = progress {
                    c.observer = Some(Observer::new(p, &sum, &sink));
                }
                let end = c.run(&mut sink, stop);
                warned = c.warned;
                warned_source = c.warned_source;
                let k = c.m.counters();
                add(&mut sum.counters, &k);
                sum.foreign_datagrams += c.foreign;
                sum.punch_errors += c.punch_errors;
                sum.last_seq = last_written(&sink);
                if let Some(p) = progress {
                    let mut s = p.lock();
                    s.counters = sum.counters;
                    s.punch_errors = sum.punch_errors;
                    if c.observer.as_ref().is_some_and(|o| o.shook) {
                        s.last_seq = c.m.next().saturating_sub(1);
                    }
                    p.publish(s);
                }
                let why = match &end {
                    End::Closed(s) => Some(format!("connection to {source} ended: {s}")),
                    End::Failed(e) => {
                        sum.failed_attempts += 1;
                        Some(format!("connection to {source} failed: {e}"))
                    }
                    End::Fatal(e) => Some(e.to_string()),
                    End::Stopped | End::Grow(_) => None,
                };
                if let Some(w) = &why {
                    note(w.clone());
                }
                // A failure repeated within the second is only counted (see `failures`).
                let shown = match &end {
                    End::Failed(_) if !opts.once => failures.hit_with(|| why.unwrap_or_default()),
                    _ => Some(0),
                };
                if opts.log
                    && let Some(n) = shown
                {
                    let why = match &end {
                        End::Stopped => "stopped".to_string(),
                        End::Closed(s) => s.clone(),
                        End::Failed(e) => e.to_string(),
                        End::Fatal(e) => e.to_string(),
                        End::Grow(n) => {
                            format!(
                                "a {n}-byte frame: stream buffer grown to the ring's longest \
                                 frame, resuming at once"
                            )
                        }
                    };
                    let mut wrong = match k.udp_wrong_source {
                        0 => String::new(),
                        n => format!(", {n} datagrams dropped for their source address"),
                    };
                    if c.punch_errors > 0 {
                        wrong += &format!(", {} PUNCHes not sent", c.punch_errors);
                    }
                    let more = more_since(n, FAILED_ATTEMPTS);
                    diag!(
                        "mirror: connection ended ({why}): last seq written {} (the mirror ring's write_seq, 0 = none), frames {}, datagrams {}, naks {}, retransmitted {}, gaps {} ({} records), restarts {}{wrong}{more}",
                        sum.last_seq,
                        k.frames,
                        k.datagrams,
                        k.naks_sent,
                        k.records_retransmitted,
                        k.gaps,
                        k.records_skipped,
                        k.restarts
                    );
                }
                match end {
                    End::Stopped => break,
                    End::Fatal(e) => return Err(e),
                    End::Closed(_) if opts.once => break,
                    End::Closed(_) => {}
                    End::Failed(e) if opts.once => {
                        return Err(ReplicaError::io(format!("source {source}"), e));
                    }
                    End::Failed(_) => {}
                    End::Grow(n) => {
                        // The buffered bytes go with the connection; the source resends
                        // from the record after the last one written. To the longest frame
                        // the ring can need at once (its pages are committed only as frames
                        // fill them): grown to this frame only, a source announcing a longer
                        // one on each connection had the mirror reconnect at once for ever.
                        // Where that much address space is refused (strict overcommit), to
                        // this frame.
                        let longest = sink
                            .view()
                            .map_or(n, |v| max_frame_len(v.geometry(), STREAM_BUF).max(n));
                        bufs.stream = match lazy_zeroed(longest) {
                            Some(b) => b,
                            None => zeroed(n, "mirror stream buffer", "for a frame that long")?,
                        };
                        start = Start::Resume;
                        continue;
                    }
                }
            }
        }
        // Later connections resume (spec §26.2), once this run has made the mirror ring: a
        // resume before that (a source not up yet, at its session limit) would ask for the
        // ring found at the path, or for the oldest record, not where the user asked.
        if sink.created() > 0 {
            start = Start::Resume;
        }
        nap(opts.reconnect, stop);
    }
    sum.last_seq = last_written(&sink);
    Ok(sum)
}

/// The last sequence written into the mirror ring: its `write_seq` (0 if none, or no ring).
fn last_written(sink: &FileSink) -> u64 {
    // Relaxed: this process is the ring's only writer.
    sink.view().map_or(0, |v| {
        v.write_seq().load(ringwire_core::sync::Ordering::Relaxed)
    })
}

/// The notice for a mirror started with `--from N` (`typed`), which asked for record `asked`
/// (N within 1..u64::MAX, the HELLO's range) and learned from the source's GEOMETRY that it
/// starts at `from`; `None` when that is the record asked for. It names N as given: it named
/// the record asked for, `--from 1` for a `--from 0` and `--from 18446744073709551614` for
/// a `--from 18446744073709551615`.
fn start_notice(typed: u64, asked: u64, from: u64) -> Option<String> {
    match from.cmp(&asked) {
        std::cmp::Ordering::Equal => None,
        std::cmp::Ordering::Greater => Some(format!(
            "mirror: notice: --from {typed}: the source no longer holds record {asked} (past \
             its retention); mirroring from its oldest, record {from}"
        )),
        // Not `asked`, which is below `typed` only for u64::MAX: not written either.
        std::cmp::Ordering::Less => Some(format!(
            "mirror: notice: --from {typed}: the source has not written record {typed} yet; \
             mirroring from its next record, {from}"
        )),
    }
}

/// The options the transport chosen at the handshake leaves unused (`iface` without
/// multicast, `nak_delay` and `unicast` without UDP), as a warning.
fn unused_options(opts: &MirrorOptions, udp: bool, unicast: bool) -> Option<String> {
    let transport = match (udp, unicast) {
        (false, _) => "TCP only",
        (true, true) => "UDP unicast",
        (true, false) => return None,
    };
    let mut unused = Vec::new();
    if !udp && opts.unicast {
        unused.push("--unicast (UDP delivery only)".to_string());
    }
    if !opts.iface.is_unspecified() {
        unused.push(format!("--iface {} (multicast only)", opts.iface));
    }
    if !udp && !opts.nak_delay.is_zero() {
        unused.push(format!(
            "--nak-delay-us {} (UDP delivery only)",
            opts.nak_delay.as_micros()
        ));
    }
    (!unused.is_empty()).then(|| {
        format!(
            "mirror: warning: the source serves this mirror over {transport}: {} ignored",
            unused.join(" and ")
        )
    })
}

/// [`lazy_zeroed`], or the error that says what could not be allocated.
fn zeroed(n: usize, what: &str, why: &str) -> Result<ZeroedBuf, ReplicaError> {
    lazy_zeroed(n).ok_or_else(|| {
        ReplicaError::io(
            what,
            io::Error::new(
                io::ErrorKind::OutOfMemory,
                format!("cannot allocate {n} bytes {why}"),
            ),
        )
    })
}

struct Buffers {
    idx: Vec<HeldEntry>,
    /// The two large ones are mappings of their own (see [`lazy_zeroed`]): committed as
    /// they are written, and given back when the run ends.
    data: ZeroedBuf,
    stream: ZeroedBuf,
    out: Vec<u8>,
    tmp: Vec<u8>,
}

impl Buffers {
    fn new() -> Result<Buffers, ReplicaError> {
        Ok(Buffers {
            idx: vec![HeldEntry::default(); HOLDBACK_ENTRIES],
            data: zeroed(HOLDBACK_BYTES, "mirror hold-back store", "for it")?,
            stream: zeroed(STREAM_BUF, "mirror stream buffer", "for it")?,
            out: vec![0u8; 128],
            tmp: vec![0u8; 64 * 1024],
        })
    }
}

struct Conn<'a> {
    opts: &'a MirrorOptions,
    stream: TcpStream,
    m: Mirror<'a>,
    sbuf: StreamBuf<'a>,
    out: &'a mut [u8],
    tmp: &'a mut [u8],
    udp: Option<UdpSocket>,
    batch: Option<RecvBatch>,
    foreign: u64,
    /// The last wait ended with input and recorded it as an arrival.
    woken: bool,
    spin: SpinPolicy,
    anticipate: Anticipator,
    /// The UDP announcement of this connection: unicast, and the session byte.
    announced: Option<(bool, u8)>,
    /// Where this connection's datagrams come from, as the silence timeout names it
    /// ("UDP multicast 239.1.2.3:5000 joined on 10.0.0.2").
    udp_path: Option<String>,
    observer: Option<Observer<'a>>,
    /// When the TCP connection was made (the handshake deadline runs from here).
    opened: std::time::Instant,
    /// When the source was last heard from: a whole TCP frame, [`SILENCE_PROGRESS`] bytes
    /// of one, or a datagram the machine took ([`Mirror::handle_datagram`] true: over
    /// multicast, once a sender is confirmed, only that sender's; never a refused one's).
    heard: std::time::Instant,
    /// Bytes read since `heard` that completed no frame.
    partial: usize,
    /// The bytes of `tmp` read from TCP and not yet taken by the stream buffer (a pass
    /// that ended early, see [`Conn::read_tcp`], leaves them for the next).
    pending: std::ops::Range<usize>,
    /// [`unused_options`] has been checked (and logged) once in this run.
    warned: bool,
    /// A datagram of the session dropped for its source address has been logged once in
    /// this run.
    warned_source: bool,
    /// PUNCHes the kernel refused to send on this connection, and the limit of their log
    /// lines.
    punch_errors: u64,
    punch_log: RateLog,
    /// The NAKs left unanswered ([`MirrorCounters::naks_unanswered`]) that
    /// [`Conn::log_unanswered_nak`] has seen, and the limit of its log lines.
    seen_unanswered: u64,
    unanswered_log: RateLog,
    /// The restarts and resume check [`Conn::log_news`] has logged.
    seen_restarts: u64,
    logged_check: Option<(u64, Holds)>,
    /// `--from N`: N and the record asked for, until [`Conn::note_start`] has compared it
    /// with where the source starts.
    asked: Option<(u64, u64)>,
    /// Tests: the errno every read of the TCP stream fails with (0: none).
    #[cfg(test)]
    fail_reads: i32,
}

/// Feeds a [`MirrorProgress`] from one connection.
struct Observer<'a> {
    progress: &'a MirrorProgress,
    /// Counters of the earlier connections.
    base: MirrorCounters,
    /// PUNCHes not sent on the earlier connections.
    base_punch_errors: u64,
    /// Rings the sink had created when the connection began.
    created: u64,
    shook: bool,
    rounds: u32,
    nak: Option<(u64, u64)>,
}

impl<'a> Observer<'a> {
    fn new(progress: &'a MirrorProgress, base: &MirrorSummary, sink: &FileSink) -> Observer<'a> {
        Observer {
            progress,
            base: base.counters,
            base_punch_errors: base.punch_errors,
            created: sink.created(),
            shook: false,
            rounds: 0,
            nak: None,
        }
    }
}

impl<'a> Conn<'a> {
    fn new(
        opts: &'a MirrorOptions,
        src: ringwire_core::replicate::PeerAddr,
        stream: TcpStream,
        start: Start,
        sink: &FileSink,
        b: &'a mut Buffers,
    ) -> Conn<'a> {
        let cfg = MirrorConfig {
            start,
            prefer_unicast: opts.unicast,
            nak_delay: Duration::from_nanos(
                u64::try_from(opts.nak_delay.as_nanos()).unwrap_or(u64::MAX),
            ),
            nak_timeout: Duration::from_nanos(
                u64::try_from(opts.nak_timeout.as_nanos()).unwrap_or(u64::MAX),
            ),
            ..MirrorConfig::default()
        };
        let m = Mirror::new(cfg, src, sink, HoldBack::new(&mut b.idx, &mut b.data));
        let hello_seq = m.hello().seq;
        Conn {
            opts,
            stream,
            m,
            sbuf: StreamBuf::new(&mut b.stream),
            out: &mut b.out,
            tmp: &mut b.tmp,
            udp: None,
            batch: None,
            foreign: 0,
            woken: false,
            spin: SpinPolicy::new(opts.spin),
            anticipate: Anticipator::new(opts.anticipate),
            announced: None,
            udp_path: None,
            observer: None,
            opened: std::time::Instant::now(),
            heard: std::time::Instant::now(),
            partial: 0,
            pending: 0..0,
            warned: false,
            warned_source: false,
            punch_errors: 0,
            punch_log: RateLog::new(PUNCH_LOG_EVERY),
            seen_unanswered: 0,
            unanswered_log: RateLog::new(PUNCH_LOG_EVERY),
            seen_restarts: 0,
            logged_check: None,
            asked: match start {
                Start::Sequence(n) => Some((n, hello_seq)),
                _ => None,
            },
            #[cfg(test)]
            fail_reads: 0,
        }
    }

    /// Once, when the source's GEOMETRY has said where it starts: a mirror started with
    /// `--from N` says so when that is not record N (N past the source's retention, or not
    /// written yet), instead of silently mirroring from elsewhere.
    fn note_start(&mut self) {
        let Some((typed, asked)) = self.asked else {
            return;
        };
        let Some(g) = self.m.geometry() else {
            return;
        };
        self.asked = None;
        if self.opts.log
            && let Some(w) = start_notice(typed, asked, g.seq)
        {
            diag!("{w}");
        }
    }

    /// Logs what the machine found since the last call: how the resume check (see
    /// [`Mirror`]'s docs) ended, a ring file replaced (with the reason), and a source
    /// restart whose ring could not be replaced.
    fn log_news(&mut self, sink: &mut FileSink) {
        let c = self.m.counters();
        let check = self.m.resume_check();
        let replaced = sink.take_replaced();
        if self.opts.log {
            let news = check != self.logged_check;
            match check {
                Some((w, Holds::Same)) if news => diag!(
                    "mirror: resumed after {w}: the source's record {w} is the one this mirror held"
                ),
                // The ring replaced for it says so below (a check that could not replace
                // the ring ends the connection, which says why).
                Some((_, Holds::Different)) => {}
                Some((w, Holds::Unknown)) if news => diag!(
                    "mirror: warning: resume after {w} not verified: the source no longer \
                     holds record {w} (past its retention, or lost), or this mirror cannot \
                     read its own; a source restarted since would go unnoticed"
                ),
                _ => {}
            }
            let by_check = news && matches!(check, Some((_, Holds::Different)));
            if let Some(r) = &replaced {
                diag!("mirror: {r}");
            } else if c.restarts > self.seen_restarts + u64::from(by_check) {
                // A ring that could not be recreated (no room, over --max-ring-size): the
                // connection's end says why.
                diag!(
                    "mirror: the source restarted with a new ring (it numbers below this \
                     mirror): mirror ring {} not recreated",
                    crate::shown::path(sink.path()),
                );
            }
        }
        self.seen_restarts = c.restarts;
        self.logged_check = check;
    }

    /// Once per run, when live data first flows: warns about options the transport the
    /// source chose leaves unused (known only now, from its GEOMETRY and MULTICAST).
    fn warn_unused(&mut self) {
        if self.warned || !self.m.is_live() {
            return;
        }
        self.warned = true;
        let unicast = self.announced.is_some_and(|(u, _)| u);
        if self.opts.log
            && let Some(w) = unused_options(self.opts, self.m.is_udp(), unicast)
        {
            diag!("{w}");
        }
    }

    /// Refreshes the observer's [`MirrorProgress`] when there is news or `idle`, else
    /// every [`PROGRESS_ROUNDS`] calls.
    fn observe(&mut self, sink: &FileSink, idle: bool) {
        let Some(o) = &mut self.observer else {
            return;
        };
        let nak = self.m.outstanding_nak();
        let shake = !o.shook && self.m.geometry().is_some();
        let new_nak = nak.is_some() && nak != o.nak;
        o.rounds = o.rounds.wrapping_add(1);
        if !(shake || idle || new_nak || o.rounds.is_multiple_of(PROGRESS_ROUNDS)) {
            return;
        }
        if nak.is_some() {
            o.nak = nak;
        }
        let mut counters = o.base;
        add(&mut counters, &self.m.counters());
        let mut s = o.progress.lock();
        if shake {
            o.shook = true;
            s.handshakes += 1;
            s.geometry = self.m.geometry().copied();
        }
        if o.shook {
            // Not only at the handshake: a resume check that finds a restarted source
            // recreates the ring later in the connection (module docs of the core mirror).
            s.resumed = sink.created() == o.created;
            s.last_seq = self.m.next().saturating_sub(1);
        }
        let (unicast, session) = self.announced.unwrap_or((false, 0));
        s.udp = self.udp.is_some();
        s.unicast = unicast;
        s.session = session;
        s.source_seq = self.m.source_seq();
        s.counters = counters;
        s.punch_errors = o.base_punch_errors + self.punch_errors;
        if new_nak {
            s.last_nak = nak;
        }
        o.progress.publish(s);
    }

    /// Reads what TCP has, up to [`TCP_READ_PASS`] bytes, [`RECORDS_PER_PASS`] records
    /// written and one mirror ring created; returns whether anything came. Bytes read and
    /// frames not yet handled when a pass ends wait in `tmp` and the stream buffer for the
    /// next.
    fn read_tcp(&mut self, sink: &mut FileSink) -> Result<bool, End> {
        let mut any = false;
        let mut read = 0usize;
        let until = self
            .m
            .counters()
            .records_written
            .saturating_add(RECORDS_PER_PASS);
        let created = sink.created();
        // A source that writes faster than we apply must not keep us from the stop flag,
        // the UDP socket and our NAKs: the rest waits for the next pass (it stays readable).
        loop {
            // The whole frames buffered, taking in the bytes read before as room frees.
            loop {
                while let Some(f) = self.sbuf.next_frame() {
                    let f = match f {
                        Ok(f) => f,
                        Err(WireError::FrameTooLarge { len, .. })
                            if total_len(len).is_ok_and(|t| fits_ring(sink, t)) =>
                        {
                            // Just checked: the total fits a usize.
                            return Err(End::Grow(total_len(len).unwrap_or(usize::MAX)));
                        }
                        // Before GEOMETRY, a header that does not decode is most
                        // likely a peer speaking another protocol (an HTTP server's
                        // reply reads as a frame of about 800 MB): said so.
                        Err(e) if self.m.geometry().is_none() => {
                            return Err(End::Failed(io::Error::new(
                                io::ErrorKind::InvalidData,
                                format!(
                                    "protocol error before GEOMETRY (not a replication \
                                     source?): {e}"
                                ),
                            )));
                        }
                        Err(e) => {
                            return Err(End::Failed(io::Error::new(
                                io::ErrorKind::InvalidData,
                                format!("protocol error: {e}"),
                            )));
                        }
                    };
                    // Only the MULTICAST the handshake waits for: one out of place is
                    // the state machine's protocol error, with no socket opened for it.
                    if f[0] == Kind::Multicast as u8
                        && self.udp.is_none()
                        && self.m.awaits_multicast()
                    {
                        let local = match self.stream.local_addr() {
                            Ok(SocketAddr::V4(a)) => Some(*a.ip()),
                            _ => None,
                        };
                        // A socket the source's announcement cannot be received on (a
                        // group not joinable here now: no such interface, no route) fails
                        // the connection, as any connection failure: the mirror reconnects
                        // (spec §26.2), `--once` exits 1.
                        let peer = match self.stream.peer_addr() {
                            Ok(SocketAddr::V4(a)) => Some(*a.ip()),
                            _ => None,
                        };
                        let opened = open_udp(self.opts, local, f, &mut self.udp, &mut self.batch)
                            .map_err(|e| End::Failed(io_error(e)))?;
                        self.announced = opened.map(|(unicast, session, _)| (unicast, session));
                        self.udp_path = opened.map(|(unicast, _, from)| match (unicast, peer) {
                            (true, Some(ip)) => format!("UDP unicast from {ip}:{}", from.port()),
                            (true, None) => format!("UDP unicast from port {}", from.port()),
                            (false, _) => format!(
                                "UDP multicast {from} joined on {}",
                                join_iface(self.opts, local)
                            ),
                        });
                    }
                    if let Err(e) = self.m.handle_tcp_frame(now(), f, sink) {
                        return Err(mirror_end(e, sink));
                    }
                    any = true;
                    // Whole frames are what show the source alive.
                    self.heard = std::time::Instant::now();
                    self.partial = 0;
                    // A ring created (a restart: DATA going backwards) ends the pass too:
                    // a source going backwards frame after frame had each 40-byte frame
                    // create a ring, 13,000 of them (minutes) in a pass of 1 MiB.
                    if self.m.counters().records_written >= until || sink.created() != created {
                        return Ok(true);
                    }
                }
                if self.pending.is_empty() {
                    break;
                }
                let taken = self.sbuf.push(&self.tmp[self.pending.clone()]);
                self.pending.start += taken;
            }
            if read >= TCP_READ_PASS {
                return Ok(any);
            }
            let n = match self.read_stream() {
                Ok(0) if self.m.geometry().is_none() => {
                    return Err(End::Failed(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "closed the connection before GEOMETRY (refused: a server at its \
                         session limit, or not a replication source)",
                    )));
                }
                // The handshake is not over either: no ring, no session.
                Ok(0) if self.m.awaits_multicast() => {
                    return Err(End::Failed(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "closed the connection after a GEOMETRY announcing UDP delivery, \
                         before the MULTICAST frame that completes the handshake",
                    )));
                }
                Ok(0) => {
                    // Every whole frame is handled (the loop above took them all): what
                    // is buffered is a frame cut short, which fails the connection (spec
                    // §21.3 ends cleanly only at a frame boundary).
                    return Err(match self.m.handle_tcp_eof(self.sbuf.buffered()) {
                        Ok(()) => End::Closed("source disconnected".into()),
                        Err(e) => End::Failed(io::Error::new(io::ErrorKind::UnexpectedEof, e)),
                    });
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(any),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.socket_failed("read", e)),
            };
            read += n;
            any = true;
            self.pending = 0..n;
            // Bytes of a frame in progress count only by the `SILENCE_PROGRESS`, so a byte
            // now and then cannot hold the connection open.
            self.partial += n;
            if self.partial >= SILENCE_PROGRESS {
                self.heard = std::time::Instant::now();
                self.partial = 0;
            }
        }
    }

    /// One read of the TCP stream into `tmp` (tests: failing with `fail_reads`' errno when
    /// set).
    fn read_stream(&mut self) -> io::Result<usize> {
        #[cfg(test)]
        if self.fail_reads != 0 {
            return Err(io::Error::from_raw_os_error(self.fail_reads));
        }
        self.stream.read(self.tmp)
    }

    /// How the connection ends on the error `e` of a `what` ("read", "write") on its
    /// socket (a reset by the source, ECONNRESET and the like): between
    /// frames a clean end, as a close there is; with part of a frame buffered a
    /// [`MirrorError::TruncatedFrame`] that fails it, as a close there does (the error's
    /// kind is `e`'s).
    fn broken(&mut self, what: &str, e: io::Error) -> End {
        // Before GEOMETRY a connection that ends fails, as a close there does (a source at
        // its session limit may reset instead); the HELLO's write may be what sees it.
        if self.m.geometry().is_none() || self.m.awaits_multicast() {
            let frame = if self.m.geometry().is_none() {
                "GEOMETRY"
            } else {
                "MULTICAST"
            };
            return End::Failed(io::Error::new(
                e.kind(),
                format!("{what} before {frame}: {e}"),
            ));
        }
        match self.m.handle_tcp_reset(self.sbuf.buffered()) {
            Ok(()) => End::Closed(format!("{what}: {e}")),
            Err(cut) => End::Failed(io::Error::new(e.kind(), cut)),
        }
    }

    /// How the connection ends on the error `e` of a `what` ("read", "write") on its socket.
    fn socket_failed(&mut self, what: &'static str, e: io::Error) -> End {
        match e.kind() {
            // The source's reset, on a read or first on a write (the socket reports it
            // once): [`Conn::broken`], a clean end between frames.
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => self.broken(what, e),
            // Anything else is not the source ending the stream: a write it did not read
            // within the timeout, a read failing with ETIMEDOUT (the kernel gave the
            // connection up: its retransmissions or keepalives went unanswered, the
            // source's host may be gone) or EHOSTUNREACH, a socket of this host's failing.
            // The mirror gives the connection up: [`Conn::given_up`], never a clean end.
            _ => self.given_up(what, e),
        }
    }

    /// How the connection ends when the mirror gives it up on the error `e` of a `what`
    /// ("read", "write", "poll", "recvmmsg") while it is still open: a write the source did
    /// not read within [`TCP_WRITE_TIMEOUT`], a read the kernel failed with an error that is
    /// not a reset (ETIMEDOUT), a wait on the sockets or a receive on the UDP socket that
    /// failed. Never a clean end (the source did not end the stream, and may
    /// have stopped in the middle of it, as a silent one does): it fails, of `e`'s kind,
    /// with a [`MirrorError::TruncatedFrame`]
    /// ([`StreamEnd::GivenUp`](ringwire_core::replicate::StreamEnd::GivenUp)) when part of
    /// a frame is buffered.
    fn given_up(&mut self, what: &'static str, e: io::Error) -> End {
        if self.m.geometry().is_none() || self.m.awaits_multicast() {
            return self.broken(what, e);
        }
        match self.m.handle_tcp_given_up(self.sbuf.buffered()) {
            Ok(()) => End::Failed(io::Error::new(e.kind(), format!("{what}: {e}"))),
            Err(cut) => End::Failed(io::Error::new(
                e.kind(),
                GivenUp {
                    what,
                    cause: e,
                    cut,
                },
            )),
        }
    }

    /// Receives up to a few `recvmmsg` batches; returns whether anything came.
    fn read_udp(&mut self, sink: &mut FileSink) -> Result<bool, End> {
        let (Some(sock), Some(batch)) = (&self.udp, &mut self.batch) else {
            return Ok(false);
        };
        let mut any = false;
        let until = self
            .m
            .counters()
            .records_written
            .saturating_add(RECORDS_PER_PASS);
        for _ in 0..8 {
            let n = match recv_batch(batch, sock) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if reports_an_earlier_datagram(&e) => continue,
                // This host's socket failed (EBADF, EFAULT, EINVAL, ENOMEM, ...): the source
                // did not end the connection, the mirror gives it up.
                Err(e) => return Err(self.given_up("recvmmsg", e)),
            };
            any |= n > 0;
            let t = now();
            for i in 0..n {
                match batch.get(i) {
                    Some((Some(bytes), Some(from))) => {
                        let from = peer_v4(from);
                        if self.m.handle_datagram(t, from, bytes, sink) {
                            self.heard = std::time::Instant::now();
                        } else if let Some(e) = self.m.failure() {
                            return Err(mirror_end(e, sink));
                        } else if !self.warned_source && self.m.counters().udp_wrong_source > 0 {
                            self.warned_source = true;
                            if self.opts.log {
                                let unicast = matches!(self.announced, Some((true, _)));
                                match self.m.udp_source() {
                                    Some(expected) if unicast => diag!(
                                        "mirror: warning: dropping datagrams of this session from {}: unicast datagrams are accepted only from {} (the source's UDP port at the address dialled, or at the address its first datagram came from); later drops are only counted",
                                        sock_v4(from),
                                        sock_v4(expected)
                                    ),
                                    Some(expected) => diag!(
                                        "mirror: warning: dropping datagrams of this session from {}: another sender on the group with the source's session byte; multicast datagrams are accepted only from {} (the sender whose DATA matched the source's copy over TCP); later drops are only counted",
                                        sock_v4(from),
                                        sock_v4(expected)
                                    ),
                                    None => diag!(
                                        "mirror: warning: dropping datagrams of this session from {}: another sender on the group with the source's session byte (its DATA did not match the source's copy over TCP); later drops are only counted",
                                        sock_v4(from)
                                    ),
                                }
                            }
                        }
                    }
                    _ => self.foreign += 1,
                }
            }
            // Between batches (the datagrams of one are taken off the socket): as for TCP.
            if n < RECV_BATCH || self.m.counters().records_written >= until {
                break;
            }
        }
        Ok(any)
    }

    fn transmit(&mut self) -> Result<(), End> {
        while let Some(tx) = self.m.poll_transmit(now(), self.out) {
            let bytes = &self.out[..tx.len];
            match tx.channel {
                Channel::Tcp => {
                    if let Err(e) = write_all_within(&mut self.stream, bytes, TCP_WRITE_TIMEOUT) {
                        return Err(self.socket_failed("write", e));
                    }
                    self.log_unanswered_nak();
                }
                Channel::Udp(to) => {
                    // A PUNCH lost on the way is repeated by the state machine; one the
                    // kernel refuses is too, and is counted and logged besides.
                    let sent = self.udp.as_ref().map(|u| u.send_to(bytes, sock_v4(to)));
                    if let Some(Err(e)) = sent {
                        self.punch_failed(to, &e);
                    }
                }
            }
        }
        Ok(())
    }

    /// Says so (at once, then at most every [`PUNCH_LOG_EVERY`]) when a NAK has gone
    /// unanswered [`NAK_UNANSWERED_LIMIT`] times in a row and its repeats back off: the
    /// source does not have what it asks for, which a heartbeat claimed (a foreign or
    /// confused sender with the session byte on the group or port, most likely).
    fn log_unanswered_nak(&mut self) {
        let n = self.m.counters().naks_unanswered;
        if n == self.seen_unanswered {
            return;
        }
        self.seen_unanswered = n;
        if !self.opts.log {
            return;
        }
        let Some(skipped) = self.unanswered_log.hit() else {
            return;
        };
        if let Some(((from, to), _)) = self.m.nak_backed_off() {
            let claimed = self
                .m
                .source_claim()
                .map_or(String::new(), |s| format!(", a heartbeat claimed {s}"));
            let longest = self.opts.nak_timeout.max(std_dur(MIN_NAK_TIMEOUT)) * MAX_NAK_BACKOFF;
            diag!(
                "mirror: warning: NAK {from}..={to} unanswered {NAK_UNANSWERED_LIMIT} times in a row: the source does not have those records{claimed}; its repeats back off, up to {} ms apart, until the source answers (datagrams are still taken){}",
                longest.as_millis(),
                more_since(skipped, "NAKs left unanswered since the last report")
            );
        }
    }

    /// Counts a PUNCH to `to` that the kernel refused with `e`, and says so (at once, then
    /// at most every [`PUNCH_LOG_EVERY`]): a unicast source learns where to send from the
    /// PUNCHes that reach it, so while they all fail the mirror gets no live data, and
    /// would otherwise show nothing but that.
    #[cold]
    fn punch_failed(&mut self, to: ringwire_core::replicate::PeerAddr, e: &io::Error) {
        self.punch_errors += 1;
        if self.opts.log
            && let Some(n) = self.punch_log.hit()
        {
            diag!(
                "mirror: warning: PUNCH to {} not sent: {e}; the source sends no datagrams \
                 to this mirror until one reaches it{}",
                sock_v4(to),
                more_since(n, "PUNCHes not sent since the last report")
            );
        }
    }

    /// Waits for input or the next timer: with `--spin` a bounded, yielding poll of both
    /// sockets first ([`SpinPolicy`]), then `ppoll` on both, ended early when a steady
    /// stream's next frame is due ([`Anticipator`]) for a short poll across its arrival.
    fn wait(&mut self) -> Result<(), End> {
        let max = until(now(), self.m.poll_timeout(), MAX_BLOCK);
        let mut fds = [pollin(&self.stream), pollin(&self.stream)];
        let n = match &self.udp {
            Some(u) => {
                fds[1] = pollin(u);
                2
            }
            None => 1,
        };
        let mut err = None;
        let polled = self
            .spin
            .poll(max, || match poll(&mut fds[..n], StdDuration::ZERO) {
                Ok(k) => k > 0,
                Err(e) => {
                    err = Some(e);
                    true
                }
            });
        if let Some(e) = err {
            return Err(self.given_up("poll", e));
        }
        if polled {
            self.anticipate.arrived(std::time::Instant::now());
            self.woken = true;
            return Ok(());
        }
        let t0 = std::time::Instant::now();
        // Both closures poll their own copy of the descriptors; the first error ends the wait.
        let err = std::cell::Cell::new(None);
        let poll_for = |d: StdDuration| {
            let mut f = fds;
            poll(&mut f[..n], d).unwrap_or_else(|e| {
                err.set(Some(e));
                1
            }) > 0
        };
        let got = self.anticipate.wait(
            max,
            || poll_for(StdDuration::ZERO),
            |d| {
                poll_for(d);
            },
        );
        if let Some(e) = err.into_inner() {
            return Err(self.given_up("poll", e));
        }
        self.spin.parked(t0.elapsed(), got);
        self.woken = got;
        Ok(())
    }

    /// The handshake or liveness deadline, once passed by `looked`: when the reads that
    /// found nothing began (what came after, they could not see).
    fn overdue(&self, looked: std::time::Instant) -> Option<End> {
        let timed_out =
            |what: String| Some(End::Failed(io::Error::new(io::ErrorKind::TimedOut, what)));
        let o = self.opts;
        if self.m.geometry().is_none() {
            let t = looked.saturating_duration_since(self.opened);
            if !o.handshake_timeout.is_zero() && t >= o.handshake_timeout {
                return timed_out(format!(
                    "no GEOMETRY {} ms after connecting (handshake timeout {} ms)",
                    t.as_millis(),
                    o.handshake_timeout.as_millis()
                ));
            }
        } else {
            let t = looked.saturating_duration_since(self.heard);
            if !o.silence_timeout.is_zero() && t >= o.silence_timeout {
                // In UDP modes the records and heartbeats do not come over TCP: a source
                // whose TCP connection is fine is silent when its datagrams do not arrive.
                let by = self.udp_path.as_ref().map_or(String::new(), |p| {
                    format!("; in this session they come by {p}, not over TCP")
                });
                return timed_out(format!(
                    "nothing from the source (no record, no heartbeat) for {} ms (silence timeout {} ms){by}",
                    t.as_millis(),
                    o.silence_timeout.as_millis()
                ));
            }
        }
        None
    }

    fn run(&mut self, sink: &mut FileSink, stop: &AtomicBool) -> End {
        if let Err(e) = set_nonblocking(&self.stream) {
            // A local failure, not the source's end of the stream: never a clean end.
            return End::Failed(io::Error::new(
                e.kind(),
                format!("making the TCP socket non-blocking: {e}"),
            ));
        }
        let mut status = Status::new();
        let mut checked = std::time::Instant::now();
        // Relaxed: a plain flag.
        while !stop.load(Ordering::Relaxed) {
            if checked.elapsed() >= ORPHAN_CHECK {
                checked = std::time::Instant::now();
                if let Some(e) = orphaned(sink) {
                    return End::Fatal(e);
                }
            }
            let r = (|| {
                let before = self.m.counters().records_written;
                let looked = std::time::Instant::now();
                let a = self.read_tcp(sink)?;
                let b = self.read_udp(sink)?;
                #[cfg(test)]
                if !(a || b)
                    && self.m.geometry().is_some()
                    && let Some(p) = PAUSE_BEFORE_JUDGING.with(std::cell::Cell::take)
                {
                    std::thread::sleep(p);
                }
                // Judged after the reads, up to when they began: a mirror that was not
                // running (stopped, descheduled) while the source went on sending finds
                // its frames waiting, which reset the clocks, and a pause between the
                // reads and this judgement is not silence the reads could have seen.
                // Judged before them, or up to now, that pause was taken for the source's
                // silence.
                if let Some(e) = self.overdue(looked) {
                    return Err(e);
                }
                // Input that wrote no record (a heartbeat, a control frame) is not one of
                // the stream's ticks.
                let ticked = self.m.counters().records_written > before;
                self.log_news(sink);
                if std::mem::take(&mut self.woken) && !ticked {
                    self.anticipate.not_a_tick();
                }
                self.transmit()?;
                self.note_start();
                self.warn_unused();
                self.observe(sink, !(a || b));
                if a || b {
                    if self.anticipate.found() && !ticked {
                        self.anticipate.not_a_tick();
                    }
                } else {
                    self.wait()?;
                }
                Ok(())
            })();
            if let Err(e) = r {
                // What the last frames settled is logged before the connection's end.
                self.log_news(sink);
                return e;
            }
            if self.opts.log {
                status.tick(&self.m, sink, self.foreign, self.punch_errors);
            }
        }
        End::Stopped
    }
}

#[cfg(test)]
thread_local! {
    /// Tests: one pause of the mirror running on this thread, between reads that found
    /// nothing (after the handshake) and the silence judgement, as a mirror stopped or
    /// descheduled right there would make.
    static PAUSE_BEFORE_JUDGING: std::cell::Cell<Option<StdDuration>> =
        const { std::cell::Cell::new(None) };
    /// Tests: the errno the next [`set_nonblocking`] on this thread fails with, which a
    /// socket that is open cannot be made to return from outside.
    static FAIL_SET_NONBLOCKING: std::cell::Cell<Option<i32>> =
        const { std::cell::Cell::new(None) };
    /// Tests: the errnos the next [`recv_batch`] calls on this thread fail with, first
    /// to last, before any reaches the socket (EBADF, EFAULT, ENOMEM and the like cannot
    /// be had from a socket that works).
    static FAIL_RECV: std::cell::RefCell<std::collections::VecDeque<i32>> =
        const { std::cell::RefCell::new(std::collections::VecDeque::new()) };
}

/// Makes the connection's socket non-blocking (in tests, first fails as
/// `FAIL_SET_NONBLOCKING` says).
fn set_nonblocking(s: &TcpStream) -> io::Result<()> {
    #[cfg(test)]
    if let Some(errno) = FAIL_SET_NONBLOCKING.with(std::cell::Cell::take) {
        return Err(io::Error::from_raw_os_error(errno));
    }
    s.set_nonblocking(true)
}

/// One `recvmmsg` batch from `sock` (in tests, first fails as `FAIL_RECV` says).
fn recv_batch(batch: &mut RecvBatch, sock: &UdpSocket) -> io::Result<usize> {
    #[cfg(test)]
    if let Some(errno) = FAIL_RECV.with(|f| f.borrow_mut().pop_front()) {
        return Err(io::Error::from_raw_os_error(errno));
    }
    batch.recv(sock)
}

/// A connection the mirror gave up ([`Conn::given_up`]) with part of a frame buffered: the
/// error of the `what` that made it give up, and the frame cut short (its
/// [`source`](std::error::Error::source)).
#[derive(Debug)]
struct GivenUp {
    what: &'static str,
    cause: io::Error,
    cut: MirrorError,
}

impl std::fmt::Display for GivenUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}; {}", self.what, self.cause, self.cut)
    }
}

impl std::error::Error for GivenUp {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.cut)
    }
}

/// How a connection ends on the state machine's error `e`: a ring that could not be
/// (re)created is fatal, anything else a protocol failure.
fn mirror_end(e: MirrorError, sink: &mut FileSink) -> End {
    match e {
        MirrorError::Sink(_) => End::Fatal(match sink.last_error.take() {
            Some(x) => ReplicaError::Ring(x),
            None => ReplicaError::Mirror(e),
        }),
        _ => End::Failed(io::Error::new(io::ErrorKind::InvalidData, e.to_string())),
    }
}

/// The once-a-second status line.
struct Status {
    at: std::time::Instant,
    written: u64,
}

impl Status {
    fn new() -> Status {
        Status {
            at: std::time::Instant::now(),
            written: 0,
        }
    }

    fn tick(&mut self, m: &Mirror<'_>, sink: &FileSink, foreign: u64, punch_errors: u64) {
        let dt = self.at.elapsed();
        if dt < StdDuration::from_secs(1) {
            return;
        }
        let c = m.counters();
        let rate = (c.records_written - self.written) as f64 / dt.as_secs_f64();
        let written = last_written(sink);
        // How far the stream is behind what the source has announced (0 right after a
        // handshake at `latest`, although nothing is written yet).
        let lag = m
            .source_seq()
            .map_or(0, |s| s.saturating_sub(m.next().saturating_sub(1)));
        // Beside "0 rec/s", the reason when it is that no PUNCH reaches the source.
        let punch = match punch_errors {
            0 => String::new(),
            n => format!(", PUNCHes not sent {n}"),
        };
        diag!(
            "mirror: {} rec/s, last seq written {written}, lag {lag}, naks {}, gaps {}, retransmitted {}, dropped {}{punch}",
            rate.round(),
            c.naks_sent,
            c.gaps,
            c.records_retransmitted,
            c.garbage_dropped + c.holdback_dropped + foreign
        );
        self.at = std::time::Instant::now();
        self.written = c.records_written;
    }
}

/// An error if the mirror ring's path no longer names the ring the sink writes (removed, or
/// replaced by another file): records written on would go into an inode no reader of the
/// path sees, so the mirror stops and says so.
fn orphaned(sink: &FileSink) -> Option<ReplicaError> {
    let ring = sink.ring()?;
    let what = match crate::sys::path_id(sink.path()) {
        Ok(Some(id)) if id == ring.inode() => return None,
        Ok(Some(id)) => format!(
            "replaced by another file (device/inode {:?}, the ring written is {:?})",
            id,
            ring.inode()
        ),
        Ok(None) => format!(
            "removed (the ring written is device/inode {:?})",
            ring.inode()
        ),
        // Inconclusive (a permission change on the directory…): keep writing.
        Err(_) => return None,
    };
    Some(ReplicaError::io(
        format!("mirror ring {}", crate::shown::path(sink.path())),
        io::Error::other(format!(
            "{what}; stopping rather than writing records no reader of the path would see"
        )),
    ))
}

/// The interface a multicast mirror joins on: `--iface`, or else `local`, the mirror's
/// address of its TCP connection to the source. The source sends its datagrams from the
/// interface of its own address (serve's `--iface`, else its bind address), which the
/// mirror's connection reached; joining on the kernel's choice for the group instead
/// (the default route's interface) gets nothing from a source on this host, which sends
/// by loopback.
fn join_iface(opts: &MirrorOptions, local: Option<Ipv4Addr>) -> Ipv4Addr {
    if opts.iface.is_unspecified() {
        local.unwrap_or(Ipv4Addr::UNSPECIFIED)
    } else {
        opts.iface
    }
}

/// The join interface `iface` ([`join_iface`]) and where it came from, for an error.
fn iface_origin(opts: &MirrorOptions, iface: Ipv4Addr) -> String {
    if !opts.iface.is_unspecified() {
        format!("{iface} (--iface)")
    } else if iface.is_unspecified() {
        "0.0.0.0 (the kernel's choice)".to_string()
    } else {
        format!("{iface}, the mirror's address of its TCP connection")
    }
}

/// A driver error as the `io::Error` of a failed connection, its kind kept where it has one.
fn io_error(e: ReplicaError) -> io::Error {
    match e {
        ReplicaError::Io { what, source } => {
            io::Error::new(source.kind(), format!("{what}: {source}"))
        }
        other => io::Error::other(other.to_string()),
    }
}

/// Opens the UDP socket a MULTICAST frame announces, before the machine sees the frame (its
/// first PUNCH goes out right after); `local` is the mirror's address of its TCP connection.
/// Returns whether it is unicast, the session byte, and the group and port (unicast: the
/// source's UDP port at 0.0.0.0).
fn open_udp(
    opts: &MirrorOptions,
    local: Option<Ipv4Addr>,
    f: &[u8],
    udp: &mut Option<UdpSocket>,
    batch: &mut Option<RecvBatch>,
) -> Result<Option<(bool, u8, SocketAddrV4)>, ReplicaError> {
    let Ok(m) = Frame::new_checked(f).and_then(|fr| MulticastRepr::parse(&fr)) else {
        return Ok(None); // the state machine reports the error
    };
    let group = SocketAddrV4::new(Ipv4Addr::from(m.group), m.port);
    let iface = join_iface(opts, local);
    let s = if m.is_unicast() {
        unicast_receiver().map_err(|e| {
            ReplicaError::io(
                format!(
                    "mirror UDP socket for unicast from source port {}: bind 0.0.0.0:0",
                    m.port
                ),
                e,
            )
        })
    } else {
        multicast_receiver(*group.ip(), group.port(), iface).map_err(|e| {
            ReplicaError::io(
                format!(
                    "mirror UDP socket: bind 0.0.0.0:{} and join multicast group {group} on interface {}",
                    group.port(),
                    iface_origin(opts, iface)
                ),
                e,
            )
        })
    }?;
    if let Some(n) = opts.rcvbuf {
        socket2::SockRef::from(&s)
            .set_recv_buffer_size(n)
            .map_err(|e| ReplicaError::io(format!("mirror UDP receive buffer {n}"), e))?;
    }
    if opts.log {
        if m.is_unicast() {
            diag!("mirror: unicast from source port {}", m.port);
        } else {
            diag!(
                "mirror: multicast {}:{} on {}",
                Ipv4Addr::from(m.group),
                m.port,
                join_iface(opts, local)
            );
        }
    }
    *udp = Some(s);
    *batch = Some(RecvBatch::new(RECV_BATCH, MAX_DATAGRAM));
    Ok(Some((m.is_unicast(), m.session, group)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_tmp::TmpPath;
    use ringwire_core::replicate::StreamEnd;

    /// Bytes of `buf` in resident pages (`mincore`).
    fn resident(buf: &[u8]) -> usize {
        // SAFETY: sysconf only reads its argument.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap();
        let start = buf.as_ptr() as usize / page * page;
        let end = (buf.as_ptr() as usize + buf.len()).div_ceil(page) * page;
        let mut vec = vec![0u8; (end - start) / page];
        // SAFETY: [start, end) covers `buf`'s pages, all mapped while `buf` lives; `vec` has
        // one byte per page.
        let r = unsafe { libc::mincore(start as *mut libc::c_void, end - start, vec.as_mut_ptr()) };
        assert_eq!(r, 0, "mincore: {}", io::Error::last_os_error());
        vec.iter().filter(|&&v| v & 1 != 0).count() * page
    }

    /// A stream buffer grown for a 1 GiB frame (a blob ring's geometry allows one as long as
    /// its arena) commits no memory until frame bytes are written into it: a header alone
    /// costs nothing. `Vec::resize` committed it all.
    #[test]
    fn a_grown_stream_buffer_commits_only_what_is_written() {
        const N: usize = 1 << 30;
        let mut b = lazy_zeroed(N).expect("1 GiB of address space");
        assert_eq!(b.len(), N);
        assert!(resident(&b) <= 1 << 20, "{} bytes resident", resident(&b));
        // What the stream writes is committed, and reads back; the rest reads as zero.
        b[..4 << 20].fill(7);
        assert!(resident(&b) >= 4 << 20, "{} bytes resident", resident(&b));
        assert!(resident(&b) <= 6 << 20, "{} bytes resident", resident(&b));
        assert_eq!((b[0], b[(4 << 20) - 1], b[4 << 20], b[N - 1]), (7, 7, 0, 0));
        assert_eq!(lazy_zeroed(0).map(|b| b.len()), Some(0));
        assert!(
            lazy_zeroed(usize::MAX).is_none(),
            "a length no allocation can have"
        );
    }

    /// A buffer made after others of its size were written and dropped on the same thread
    /// (serve's session threads, one after the other; a library `Mirror`'s thread) is not
    /// committed either. From `calloc` it was: once
    /// glibc had freed one 16 MiB block it served the next from the thread's arena,
    /// zero-filled there and kept committed after the free, so a serve of a blob ring with
    /// a 16 MiB arena grew from 4 MiB to about 400 MiB resident over a few hundred
    /// sessions and kept it with none left.
    #[test]
    fn a_buffer_made_after_others_were_dropped_is_not_committed_either() {
        const N: usize = 16 << 20;
        std::thread::spawn(|| {
            for round in 0..4 {
                let mut b = lazy_zeroed(N).expect("16 MiB");
                let r = resident(&b);
                assert!(
                    r <= 1 << 20,
                    "round {round}: {r} bytes resident before a write"
                );
                // A session that sent one long frame: all of it written.
                b.fill(7);
                assert_eq!(b[N - 1], 7);
            }
        })
        .join()
        .unwrap();
    }

    /// A mirror stopped (SIGSTOP) for longer than its silence timeout while the source went
    /// on sending finds the source's frames waiting when it runs again: that is not a silent
    /// source. It judged the silence before reading them, so a paused mirror closed a live
    /// connection ("nothing from the source … for 1000 ms") and `--once` exited 1.
    #[test]
    fn a_mirror_paused_past_its_silence_timeout_reads_before_it_judges() {
        let path = TmpPath::shm("paused");
        let (live, is_live) = std::sync::mpsc::channel();
        // A source that answers HELLO with GEOMETRY, sends a HEARTBEAT every 20 ms for 2 s
        // (paused mirror or not), then hangs up.
        let (addr, source) = fake_source(32, move |s| {
            heartbeats(
                s,
                StdDuration::from_millis(20),
                StdDuration::from_millis(100),
            );
            let _ = live.send(());
            heartbeats(
                s,
                StdDuration::from_millis(20),
                StdDuration::from_millis(1900),
            );
        });
        let mut o = MirrorOptions::new(addr, &path);
        o.once = true;
        o.log = false;
        o.silence_timeout = StdDuration::from_millis(300);
        let status = crate::test_fork::forked_with(
            20,
            || match run(&o, &AtomicBool::new(false)) {
                // `--once`: the source hung up after the handshake.
                Ok(_) => 0,
                Err(e) if e.to_string().contains("nothing from the source") => 3,
                Err(_) => 4,
            },
            |pid| {
                is_live
                    .recv_timeout(StdDuration::from_secs(10))
                    .expect("the mirror's handshake");
                // SAFETY: kill only signals our own child.
                unsafe { libc::kill(pid, libc::SIGSTOP) };
                std::thread::sleep(StdDuration::from_secs(1));
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGCONT) };
            },
        );
        source.join().unwrap();
        crate::test_fork::assert_exited_0(status, "a mirror paused for 1 s");
    }

    /// A mirror paused between reads that found nothing and the judgement of the source's
    /// silence (stopped or descheduled right there) judges up to when the reads began: the
    /// pause is not silence they could have seen, and the frames sent meanwhile are read
    /// next. Judged up to the judgement, a 1 s pause failed a live connection with "nothing
    /// from the source … for 1000 ms" (and made the forked test above fail 1 run in 8).
    #[test]
    fn a_pause_between_the_reads_and_the_judgement_is_not_silence() {
        let path = TmpPath::shm("judged");
        // Heartbeats every 20 ms for 1.5 s, then the source hangs up.
        let (addr, source) = fake_source(32, |s| {
            heartbeats(
                s,
                StdDuration::from_millis(20),
                StdDuration::from_millis(1500),
            );
        });
        let mut o = MirrorOptions::new(addr, &path);
        o.once = true;
        o.log = false;
        o.silence_timeout = StdDuration::from_millis(300);
        PAUSE_BEFORE_JUDGING.with(|c| c.set(Some(StdDuration::from_secs(1))));
        let r = run(&o, &AtomicBool::new(false));
        let paused = PAUSE_BEFORE_JUDGING.with(std::cell::Cell::take).is_none();
        source.join().unwrap();
        assert!(paused, "the mirror never paused");
        // `--once`: the source hung up after the handshake.
        r.expect("a pause after the reads was taken for the source's silence");
    }

    /// A multicast source whose sender was confirmed (its DATA matched its copy over TCP)
    /// and that then falls silent, its TCP connection open (wedged), is given up after the
    /// silence timeout although a stranger on the group keeps sending heartbeats with the
    /// session byte: once a sender is confirmed only its datagrams and TCP frames show the
    /// source alive, and a stranger's must not keep a dead source's connection up.
    #[test]
    fn a_confirmed_multicast_source_gone_silent_is_given_up_beside_a_strangers_heartbeats() {
        use crate::net::sockets::{MulticastOut, source_udp_on};
        use ringwire_core::wire::{DataRepr, GEOMETRY_UDP_FOLLOWS, HeartbeatRepr, NakRepr};
        use std::io::Write;
        const SESSION: u8 = 0x5a;
        const STRANGER_FOR: StdDuration = StdDuration::from_secs(6);
        let path = TmpPath::shm("mc-silent");
        let port = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|s| s.local_addr())
            .unwrap()
            .port();
        let group = SocketAddrV4::new(Ipv4Addr::new(239, 255, 107, 1), port);
        let sender = || {
            let out = MulticastOut {
                ttl: 0,
                iface: Some(Ipv4Addr::LOCALHOST),
            };
            source_udp_on(Ipv4Addr::LOCALHOST, 0, Some(out)).unwrap()
        };
        let (source_udp, stranger_udp) = (sender(), sender());
        let heartbeat = |seq| {
            let mut f = [0u8; 16];
            let flags = SESSION;
            HeartbeatRepr { flags, seq }.emit(&mut f).unwrap();
            f
        };
        let record = [7u8; 24];
        let data = |flags| {
            let mut f = [0u8; 64];
            let n = DataRepr {
                flags,
                seq: 1,
                count: 1,
                records: &record,
            }
            .emit(&mut f)
            .unwrap();
            f[..n].to_vec()
        };
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let mut o = MirrorOptions::new(listener.local_addr().unwrap(), &path);
        o.once = true;
        o.log = false;
        o.iface = Ipv4Addr::LOCALHOST;
        o.silence_timeout = StdDuration::from_millis(300);
        let (confirmed, is_confirmed) = std::sync::mpsc::channel();
        let done = AtomicBool::new(false);
        let progress = MirrorProgress::new();
        std::thread::scope(|sc| {
            // The source: GEOMETRY and MULTICAST, DATA of record 1 on the group until the
            // mirror asks for it over TCP (its sender's trial), the same record over TCP,
            // ten heartbeats on the group, then nothing until the mirror hangs up.
            sc.spawn(|| {
                let (mut s, _) = listener.accept().unwrap();
                answer_hello(&mut s, GEOMETRY_UDP_FOLLOWS, 32);
                let mut f = [0u8; 64];
                let n = MulticastRepr {
                    group: group.ip().octets(),
                    port,
                    mtu: 1472,
                    ttl: 0,
                    session: SESSION,
                    token: 0,
                }
                .emit(&mut f)
                .unwrap();
                s.write_all(&f[..n]).unwrap();
                s.set_read_timeout(Some(StdDuration::from_millis(10)))
                    .unwrap();
                let mut nak = [0u8; 24];
                let mut got = 0;
                for _ in 0..500 {
                    source_udp.send_to(&data(SESSION), group).unwrap();
                    match s.read(&mut nak[got..]) {
                        Ok(0) => panic!("the mirror hung up before its NAK"),
                        Ok(n) => got += n,
                        Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock) => {}
                        Err(e) if matches!(e.kind(), io::ErrorKind::TimedOut) => {}
                        Err(e) => panic!("reading the NAK: {e}"),
                    }
                    if got == nak.len() {
                        break;
                    }
                }
                assert_eq!(got, nak.len(), "no NAK within 5 s");
                let k = NakRepr::parse(&Frame::new_checked(&nak[..]).unwrap()).unwrap();
                assert_eq!((k.from, k.to), (1, 1), "the trial's NAK");
                s.write_all(&data(0)).unwrap();
                let _ = confirmed.send(());
                for _ in 0..10 {
                    source_udp.send_to(&heartbeat(1), group).unwrap();
                    std::thread::sleep(StdDuration::from_millis(10));
                }
                let silent = std::time::Instant::now();
                // Wedged: the connection stays open, its NAK repeats read, until the
                // mirror closes it (or 10 s).
                s.set_read_timeout(Some(StdDuration::from_millis(100)))
                    .unwrap();
                while silent.elapsed() < StdDuration::from_secs(10) {
                    match s.read(&mut nak) {
                        Ok(0) => break,
                        Err(e)
                            if !matches!(
                                e.kind(),
                                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                            ) =>
                        {
                            break;
                        }
                        _ => {}
                    }
                }
            });
            // The stranger: heartbeats with the session byte every 5 ms, from when the
            // source's sender is confirmed until the mirror ends or `STRANGER_FOR`.
            let stranger = sc.spawn(|| {
                // Taken by value: a `Receiver` is not `Sync`.
                let is_confirmed = is_confirmed;
                is_confirmed
                    .recv_timeout(StdDuration::from_secs(10))
                    .expect("the source's answer");
                let t0 = std::time::Instant::now();
                let mut sent = 0u64;
                while !done.load(Ordering::Relaxed) && t0.elapsed() < STRANGER_FOR {
                    stranger_udp.send_to(&heartbeat(1), group).unwrap();
                    sent += 1;
                    std::thread::sleep(StdDuration::from_millis(5));
                }
                sent
            });
            let t0 = std::time::Instant::now();
            let r = run_observed(&o, &AtomicBool::new(false), Some(&progress));
            let took = t0.elapsed();
            done.store(true, Ordering::Relaxed);
            let sent = stranger.join().unwrap();
            let e = r.expect_err("a silent source ends a `--once` mirror with an error");
            assert!(
                e.to_string().contains("nothing from the source"),
                "{e}; after {took:?}"
            );
            // The stranger sent for `STRANGER_FOR`: a mirror kept up by its heartbeats
            // ends no sooner.
            assert!(
                took < StdDuration::from_secs(3),
                "the silent source was given up only after {took:?}, the stranger having \
                 sent {sent} heartbeats"
            );
            let c = progress.snapshot().counters;
            assert_eq!(c.records_written, 1, "{c:?}");
            assert!(
                c.udp_wrong_source > 0,
                "the stranger's datagrams never reached the mirror: {c:?}"
            );
        });
    }

    /// Reads a mirror's HELLO on `s` and answers it with a GEOMETRY of a 64-slot ring of
    /// `element_size`-byte slots whose records start at 1, with the header `flags`; for the
    /// fake sources of these tests.
    fn answer_hello(s: &mut std::net::TcpStream, flags: u8, element_size: u32) {
        use std::io::Write;
        s.set_read_timeout(Some(StdDuration::from_secs(5))).unwrap();
        let mut hello = [0u8; 32];
        s.read_exact(&mut hello).unwrap();
        let mut f = [0u8; 128];
        let n = GeometryRepr {
            flags,
            seq: 1,
            capacity: 64,
            element_size,
            ring_flags: 0x0011,
            schema_sig: 0,
            registry_count: 0,
            slots_offset: 128,
            arena_offset: 0,
            arena_size: 0,
        }
        .emit(&mut f)
        .unwrap();
        s.write_all(&f[..n]).unwrap();
    }

    /// Sends a HEARTBEAT on `s`, then another every `every` until `lasting` has passed;
    /// stops early on a write error.
    fn heartbeats(s: &mut std::net::TcpStream, every: StdDuration, lasting: StdDuration) {
        use ringwire_core::wire::HeartbeatRepr;
        use std::io::Write;
        let mut f = [0u8; 16];
        let n = HeartbeatRepr { flags: 0, seq: 0 }.emit(&mut f).unwrap();
        let t0 = std::time::Instant::now();
        while s.write_all(&f[..n]).is_ok() && t0.elapsed() < lasting {
            std::thread::sleep(every);
        }
    }

    /// A source on 127.0.0.1 that answers HELLO with GEOMETRY (`answer_hello`) and a
    /// HEARTBEAT, then runs `then` on the connection, then hangs up. Returns the listener's
    /// address and the thread.
    fn fake_source(
        element_size: u32,
        then: impl FnOnce(&mut std::net::TcpStream) + Send + 'static,
    ) -> (SocketAddr, std::thread::JoinHandle<()>) {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        let source = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            answer_hello(&mut s, 0, element_size);
            heartbeats(&mut s, StdDuration::ZERO, StdDuration::ZERO);
            then(&mut s);
            // Not only a close: a test forking meanwhile may hold a copy of the descriptor,
            // which would keep the connection open.
            let _ = s.shutdown(std::net::Shutdown::Both);
        });
        (addr, source)
    }

    /// Sends DATA of records 1..=2 (24 bytes each, for 32-byte slots) whole, then the first
    /// 40 of the 64 bytes of DATA 3..=4: a connection closed in the middle of a frame.
    fn cut_data(s: &mut std::net::TcpStream) {
        use ringwire_core::wire::DataRepr;
        use std::io::Write;
        let records = [7u8; 2 * 24];
        let mut f = [0u8; 128];
        for seq in [1, 3] {
            let n = DataRepr {
                flags: 0,
                seq,
                count: 2,
                records: &records,
            }
            .emit(&mut f)
            .unwrap();
            assert_eq!(n, 64);
            let n = if seq == 1 { n } else { 40 };
            if s.write_all(&f[..n]).is_err() {
                return;
            }
        }
    }

    /// The error a frame cut short by [`cut_data`] leaves.
    const CUT: MirrorError = MirrorError::TruncatedFrame {
        end: StreamEnd::Closed,
        kind: Some(Kind::Data),
        got: 40,
        expected: Some(64),
        seq: Some(3),
        next: 3,
    };

    /// A source that closes the connection in the middle of a DATA frame: with `once` the
    /// mirror fails with the typed error (the frame's kind and seq, the bytes that came and
    /// those expected), where it ended as cleanly as at a frame boundary ("source
    /// disconnected", exit 0). The records of the frames before stay in the ring.
    #[test]
    fn a_connection_closed_inside_a_frame_fails_a_mirror_once() {
        let path = TmpPath::shm("cut-once");
        let msg = once_fails_truncated(
            &path,
            fake_source(32, cut_data),
            io::ErrorKind::UnexpectedEof,
            &CUT,
        );
        assert!(
            msg.contains("a DATA frame (seq 3): 40 of its 64 bytes arrived"),
            "{msg}"
        );
    }

    /// Runs a mirror `once` against `source` (its address and thread), which cuts DATA
    /// 3..=4 short after DATA 1..=2: the run fails with an I/O error of `kind` carrying
    /// `want`, and the ring at `path` holds the whole frame's records. Returns the error's
    /// text.
    fn once_fails_truncated(
        path: &TmpPath,
        (addr, source): (SocketAddr, std::thread::JoinHandle<()>),
        kind: io::ErrorKind,
        want: &MirrorError,
    ) -> String {
        let mut o = MirrorOptions::new(addr, path);
        o.once = true;
        o.log = false;
        o.start = Start::Oldest;
        let r = run(&o, &AtomicBool::new(false));
        source.join().unwrap();
        let e = r.expect_err("a frame cut short ended the connection cleanly");
        let ReplicaError::Io { source: cause, .. } = &e else {
            panic!("{e:?}");
        };
        assert_eq!(cause.kind(), kind, "{e}");
        let typed = cause
            .get_ref()
            .and_then(|c| c.downcast_ref::<MirrorError>());
        assert_eq!(typed, Some(want), "{e}");
        let ring = crate::ReadOnlyRing::open(path).unwrap();
        assert_eq!(ring.write_seq(), 2, "the whole frame's records");
        e.to_string()
    }

    /// Resets `s`, so that the mirror reads ECONNRESET, not an end of stream: SO_LINGER
    /// with a zero timeout then a close sends an RST, but only once no process holds the
    /// descriptor, and a test forking meanwhile holds a copy until its child exits (the
    /// mirror then waited out its silence timeout). So the socket is first disconnected
    /// (`connect` to AF_UNSPEC), which sends the RST at once whoever holds a copy.
    ///
    /// Everything written before has reached the mirror's host first (its send queue is
    /// empty): a reset drops what that queue still holds, such as a short write Nagle's
    /// algorithm kept back until the ACK of the one before, and the mirror then saw the
    /// reset at an earlier frame boundary (1 run in 150 beside two busy loops).
    fn reset(s: std::net::TcpStream) {
        use std::os::fd::AsRawFd;
        let t0 = std::time::Instant::now();
        loop {
            let mut queued: libc::c_int = 0;
            // SAFETY: SIOCOUTQ (TIOCOUTQ) writes one int, the bytes not yet acknowledged,
            // to `queued`, which outlives the call; `s` keeps the descriptor open.
            let r = unsafe { libc::ioctl(s.as_raw_fd(), libc::TIOCOUTQ, &mut queued) };
            assert_eq!(r, 0, "SIOCOUTQ: {}", io::Error::last_os_error());
            if queued == 0 {
                break;
            }
            assert!(
                t0.elapsed() < StdDuration::from_secs(10),
                "{queued} bytes still unacknowledged after 10 s"
            );
            std::thread::sleep(StdDuration::from_millis(1));
        }
        socket2::SockRef::from(&s)
            .set_linger(Some(StdDuration::ZERO))
            .unwrap();
        // SAFETY: `sockaddr` is plain data, all zeros but the family.
        let mut unspec: libc::sockaddr = unsafe { std::mem::zeroed() };
        unspec.sa_family = libc::AF_UNSPEC as libc::sa_family_t;
        let len = std::mem::size_of::<libc::sockaddr>() as libc::socklen_t;
        // SAFETY: `s` keeps the descriptor open; the kernel only reads `len` bytes of
        // `unspec`.
        let r = unsafe { libc::connect(s.as_raw_fd(), &unspec, len) };
        assert_eq!(r, 0, "disconnect: {}", io::Error::last_os_error());
        drop(s);
    }

    /// A source as [`fake_source`] that resets the connection after `then` instead of
    /// closing it.
    fn resetting_source(
        then: impl FnOnce(&mut std::net::TcpStream) + Send + 'static,
    ) -> (SocketAddr, std::thread::JoinHandle<()>) {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        let source = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            answer_hello(&mut s, 0, 32);
            heartbeats(&mut s, StdDuration::ZERO, StdDuration::ZERO);
            then(&mut s);
            reset(s);
        });
        (addr, source)
    }

    /// A source that resets the connection in the middle of a DATA frame fails a mirror
    /// `once` with the truncated frame, marked as a reset, and the error kind of the read
    /// (ConnectionReset). It ended cleanly ("read: Connection reset by peer", exit 0), as
    /// a reset between frames still does.
    #[test]
    fn a_connection_reset_inside_a_frame_fails_a_mirror_once() {
        let path = TmpPath::shm("reset-once");
        let want = MirrorError::TruncatedFrame {
            end: StreamEnd::Reset,
            kind: Some(Kind::Data),
            got: 40,
            expected: Some(64),
            seq: Some(3),
            next: 3,
        };
        let msg = once_fails_truncated(
            &path,
            resetting_source(cut_data),
            io::ErrorKind::ConnectionReset,
            &want,
        );
        assert!(
            msg.contains("was reset in the middle of a DATA frame (seq 3): 40 of its 64 bytes"),
            "{msg}"
        );
    }

    /// A reset between frames stays a clean end: `once` returns `Ok` with the records of
    /// the whole frames.
    #[test]
    fn a_connection_reset_between_frames_ends_a_mirror_once_cleanly() {
        let path = TmpPath::shm("reset-between");
        let (addr, source) = resetting_source(whole_data);
        let mut o = MirrorOptions::new(addr, &path);
        o.once = true;
        o.log = false;
        o.start = Start::Oldest;
        let r = run(&o, &AtomicBool::new(false));
        source.join().unwrap();
        let sum = r.expect("a reset between frames failed the mirror");
        assert_eq!(
            (sum.connections, sum.failed_attempts, sum.last_seq),
            (1, 0, 2)
        );
    }

    /// A write that finds the connection reset before GEOMETRY (the HELLO's, when the
    /// source resets at once: a server at its session limit may) fails the connection, as
    /// a read error or a close there does: `--once` exits 1. It ended it cleanly ("write:
    /// Broken pipe", exit 0) when the reset showed on the write rather than on a read.
    #[test]
    fn a_write_error_before_geometry_fails_the_connection() {
        let path = TmpPath::shm("write-before-geometry");
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let o = MirrorOptions::new(listener.local_addr().unwrap(), &path);
        let (source, attempt) = attempt_addr(&o);
        let (addr, src) = attempt.unwrap();
        let stream = TcpStream::connect(addr).unwrap();
        let sink = FileSink::open(&path).unwrap();
        let mut bufs = Buffers::new().unwrap();
        let mut c = Conn::new(&o, src, stream, Start::Latest, &sink, &mut bufs);
        for kind in [io::ErrorKind::BrokenPipe, io::ErrorKind::ConnectionReset] {
            match c.broken("write", io::Error::from(kind)) {
                End::Failed(e) => {
                    assert_eq!(e.kind(), kind, "{source}");
                    assert!(e.to_string().starts_with("write before GEOMETRY: "), "{e}");
                }
                End::Closed(s) => panic!("{kind:?}: a clean end: {s}"),
                _ => panic!("{kind:?}: neither failed nor closed"),
            }
        }
    }

    /// The mirror's own write path: `transmit` writing the HELLO to a source that has
    /// reset the connection (a server at its session limit may) ends the connection through
    /// [`Conn::socket_failed`], failed before GEOMETRY with the write's error kind. The
    /// tests above give `socket_failed` and `broken` their errors directly; this one fails
    /// if `transmit` stops handing its write errors on.
    #[test]
    fn a_hello_write_that_finds_a_reset_fails_the_connection() {
        let path = TmpPath::shm("hello-write-reset");
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let o = MirrorOptions::new(listener.local_addr().unwrap(), &path);
        let (_, attempt) = attempt_addr(&o);
        let (addr, src) = attempt.unwrap();
        let stream = TcpStream::connect(addr).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        reset(accepted);
        let sink = FileSink::open(&path).unwrap();
        let mut bufs = Buffers::new().unwrap();
        let mut c = Conn::new(&o, src, stream, Start::Latest, &sink, &mut bufs);
        let mut fd = [pollin(&c.stream)];
        let t0 = std::time::Instant::now();
        while fd[0].revents & (libc::POLLERR | libc::POLLHUP) == 0 {
            assert!(t0.elapsed() < StdDuration::from_secs(5), "no reset came");
            fd[0].revents = 0;
            poll(&mut fd, StdDuration::from_millis(100)).unwrap();
        }
        match c.transmit() {
            Err(End::Failed(e)) => {
                assert_eq!(e.kind(), io::ErrorKind::ConnectionReset, "{e}");
                assert!(e.to_string().starts_with("write before GEOMETRY: "), "{e}");
            }
            Err(End::Closed(s)) => panic!("a clean end: {s}"),
            Err(_) => panic!("neither failed nor closed"),
            Ok(()) => panic!("the HELLO's write to a reset connection ended nothing"),
        }
    }

    /// Sends DATA of records 1..=2 whole: the stream is at a frame boundary after it.
    fn whole_data(s: &mut std::net::TcpStream) {
        use ringwire_core::wire::DataRepr;
        use std::io::Write;
        let mut f = [0u8; 64];
        let n = DataRepr {
            flags: 0,
            seq: 1,
            count: 2,
            records: &[7u8; 2 * 24],
        }
        .emit(&mut f)
        .unwrap();
        let _ = s.write_all(&f[..n]);
    }

    /// [`CUT`], given up by the mirror rather than closed by the source.
    fn given_up_cut() -> MirrorError {
        MirrorError::TruncatedFrame {
            end: StreamEnd::GivenUp,
            kind: Some(Kind::Data),
            got: 40,
            expected: Some(64),
            seq: Some(3),
            next: 3,
        }
    }

    /// A source as [`fake_source`] that sends `frames`, then holds the connection open, not
    /// reading, until the sender returned is used or dropped (at most 20 s), then resets it
    /// (`by_reset`) or closes it.
    fn held_source(
        frames: fn(&mut std::net::TcpStream),
        by_reset: bool,
    ) -> (
        SocketAddr,
        std::thread::JoinHandle<()>,
        std::sync::mpsc::Sender<()>,
    ) {
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        let source = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            answer_hello(&mut s, 0, 32);
            heartbeats(&mut s, StdDuration::ZERO, StdDuration::ZERO);
            frames(&mut s);
            let _ = wait.recv_timeout(StdDuration::from_secs(20));
            if by_reset {
                reset(s);
            } else {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        });
        (addr, source, go)
    }

    /// Connects a mirror (`Start::Oldest`) to the source at `addr`, whose frames are those
    /// of [`held_source`], and reads until records 1..=2 are written and `buffered` bytes
    /// of a frame wait in the stream buffer (at most 10 s); then runs `f` on the
    /// connection and the mirror ring.
    fn with_conn_past_records_1_and_2(
        addr: SocketAddr,
        path: &TmpPath,
        buffered: usize,
        f: impl FnOnce(&mut Conn<'_>, &mut FileSink),
    ) {
        let mut o = MirrorOptions::new(addr, path);
        o.log = false;
        let (_, attempt) = attempt_addr(&o);
        let (addr, src) = attempt.unwrap();
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_nonblocking(true).unwrap();
        let mut sink = FileSink::open(path).unwrap();
        let mut bufs = Buffers::new().unwrap();
        let mut c = Conn::new(&o, src, stream, Start::Oldest, &sink, &mut bufs);
        assert!(c.transmit().is_ok(), "the HELLO was not written");
        let t0 = std::time::Instant::now();
        while c.m.counters().records_written < 2 || c.sbuf.buffered().len() != buffered {
            assert!(
                t0.elapsed() < StdDuration::from_secs(10),
                "{} records written, {} bytes buffered",
                c.m.counters().records_written,
                c.sbuf.buffered().len()
            );
            assert!(c.read_tcp(&mut sink).is_ok(), "the connection ended early");
            std::thread::sleep(StdDuration::from_millis(2));
        }
        f(&mut c, &mut sink);
        drop(c);
        assert_eq!(last_written(&sink), 2, "the whole frame's records");
    }

    /// [`with_conn_past_records_1_and_2`] on a ring named `name` against a [`held_source`]
    /// of `frames` (ending the connection by a reset when `by_reset`): `f` also gets the
    /// source's go-ahead, which a send lets the source end the connection by; after `f`
    /// the source is let go and joined.
    fn with_held_source(
        name: &str,
        frames: fn(&mut std::net::TcpStream),
        by_reset: bool,
        buffered: usize,
        f: impl FnOnce(&mut Conn<'_>, &mut FileSink, &std::sync::mpsc::Sender<()>),
    ) {
        let path = TmpPath::shm(name);
        let (addr, source, go) = held_source(frames, by_reset);
        with_conn_past_records_1_and_2(addr, &path, buffered, |c, sink| f(c, sink, &go));
        drop(go);
        source.join().unwrap();
    }

    /// A write the source does not read within the timeout: the mirror's own
    /// `write_all_within`, with 100 ms for 64 MiB that a source reading nothing never
    /// takes (loopback buffers hold a few MiB).
    fn timed_out_write(c: &mut Conn<'_>) -> io::Error {
        let e = write_all_within(
            &mut c.stream,
            &vec![0u8; 64 << 20],
            StdDuration::from_millis(100),
        )
        .expect_err("64 MiB written to a source that reads nothing");
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        e
    }

    /// The connection's end `end` failed it with an error of `kind`; returns the error.
    fn failed(end: End, kind: io::ErrorKind) -> io::Error {
        match end {
            End::Failed(e) => {
                assert_eq!(e.kind(), kind, "{e}");
                e
            }
            End::Closed(s) => panic!("a clean end: {s}"),
            _ => panic!("neither failed nor closed"),
        }
    }

    /// The connection's end `end` failed it with an error of `kind`, given up by the mirror
    /// with DATA 3 cut short ([`given_up_cut`]), whose text begins with `what`'s error:
    /// "`what`: `cause`; the mirror gave the connection up in the middle of a DATA frame
    /// (seq 3)". Returns the error.
    fn given_up_inside_data_3(end: End, kind: io::ErrorKind, what: &str) -> io::Error {
        let e = failed(end, kind);
        let cut = e
            .get_ref()
            .and_then(|g| g.downcast_ref::<GivenUp>())
            .map(|g| g.cut);
        assert_eq!(cut, Some(given_up_cut()), "{e}");
        let text = e.to_string();
        assert!(
            text.starts_with(what)
                && text.contains(
                    "; the mirror gave the connection up in the middle of a DATA frame (seq 3)"
                ),
            "{e}"
        );
        e
    }

    /// After GEOMETRY, a write that times out (the source reads nothing) with part of a
    /// frame buffered fails the connection with the frame cut short, marked as given up by
    /// the mirror, and says what failed. It ended cleanly ("write: peer did not read within
    /// the write timeout", `--once` exit 0) with 40 of DATA 3..=4's 64 bytes unread.
    #[test]
    fn a_write_timeout_inside_a_frame_fails_the_connection() {
        with_held_source("write-timeout-cut", cut_data, false, 40, |c, _, _| {
            let e = timed_out_write(c);
            let end = c.socket_failed("write", e);
            let e = given_up_inside_data_3(end, io::ErrorKind::TimedOut, "write: ");
            let want = given_up_cut();
            let cut = e
                .get_ref()
                .and_then(std::error::Error::source)
                .and_then(|c| c.downcast_ref::<MirrorError>());
            assert_eq!(cut, Some(&want), "the frame is the error's source");
            assert_eq!(
                e.to_string(),
                "write: peer did not read within the write timeout; the mirror gave the \
                 connection up in the middle of a DATA frame (seq 3): 40 of its 64 bytes \
                 arrived; the mirror was waiting for record 3"
            );
        });
    }

    /// After GEOMETRY, a write that times out between frames fails the connection too: the
    /// source stopped reading, as a silent one stopped writing, and `--once` reports it
    /// (exit 1) where it ended cleanly (exit 0).
    #[test]
    fn a_write_timeout_between_frames_fails_the_connection() {
        with_held_source("write-timeout-between", whole_data, false, 0, |c, _, _| {
            let e = timed_out_write(c);
            let e = failed(c.socket_failed("write", e), io::ErrorKind::TimedOut);
            assert_eq!(
                e.to_string(),
                "write: peer did not read within the write timeout"
            );
            assert_eq!(c.m.failure(), None, "no frame was cut");
        });
    }

    /// After GEOMETRY, a wait on the sockets that fails (`ppoll`: ENOMEM, EINVAL) fails the
    /// connection, with the frame cut short when part of one is buffered; it ended cleanly
    /// either way ("Cannot allocate memory", `--once` exit 0).
    #[test]
    fn a_failed_wait_fails_the_connection() {
        let enomem = || io::Error::from_raw_os_error(libc::ENOMEM);
        with_held_source("poll-error-cut", cut_data, false, 40, |c, _, _| {
            let end = c.given_up("poll", enomem());
            let what = format!("poll: {};", enomem());
            given_up_inside_data_3(end, io::ErrorKind::OutOfMemory, &what);
        });
        with_held_source("poll-error-between", whole_data, false, 0, |c, _, _| {
            let e = failed(c.given_up("poll", enomem()), io::ErrorKind::OutOfMemory);
            assert_eq!(e.to_string(), format!("poll: {}", enomem()));
        });
    }

    /// After GEOMETRY, a read the kernel fails with an error that is not a reset
    /// (ETIMEDOUT: the connection's retransmissions or keepalives went unanswered, the
    /// source's host may be gone; EHOSTUNREACH) fails the connection, with the frame cut
    /// short when part of one is buffered, marked as given up by the mirror. It ended
    /// cleanly between frames ("read: Connection timed out", `--once` exit 0), as a reset
    /// there does, which stays a clean end.
    #[test]
    fn a_read_error_that_is_not_a_reset_fails_the_connection() {
        let os = io::Error::from_raw_os_error;
        with_held_source("read-timeout-cut", cut_data, false, 40, |c, sink, _| {
            c.fail_reads = libc::ETIMEDOUT;
            let end = c.read_tcp(sink).expect_err("a failed read ended nothing");
            let what = format!("read: {};", os(libc::ETIMEDOUT));
            let e = given_up_inside_data_3(end, io::ErrorKind::TimedOut, &what);
            assert!(e.to_string().contains("(seq 3): 40 of its 64 bytes"), "{e}");
        });
        for (errno, kind) in [
            (libc::ETIMEDOUT, io::ErrorKind::TimedOut),
            (libc::EHOSTUNREACH, io::ErrorKind::HostUnreachable),
        ] {
            with_held_source(
                "read-timeout-between",
                whole_data,
                false,
                0,
                |c, sink, _| {
                    c.fail_reads = errno;
                    let end = c.read_tcp(sink).expect_err("a failed read ended nothing");
                    let e = failed(end, kind);
                    assert_eq!(e.to_string(), format!("read: {}", os(errno)));
                    assert_eq!(c.m.failure(), None, "no frame was cut");
                },
            );
        }
        // A reset read between frames stays a clean end.
        with_held_source("read-reset-between", whole_data, false, 0, |c, sink, _| {
            c.fail_reads = libc::ECONNRESET;
            match c.read_tcp(sink).expect_err("a failed read ended nothing") {
                End::Closed(s) => assert_eq!(s, format!("read: {}", os(libc::ECONNRESET))),
                End::Failed(e) => panic!("a reset between frames failed: {e}"),
                _ => panic!("neither failed nor closed"),
            }
        });
    }

    /// A socket that cannot be made non-blocking (an injected errno: an open socket does
    /// not fail this from outside) fails the connection at once, naming the step and the
    /// error; it ended cleanly (`--once` exit 0) with nothing mirrored.
    #[test]
    fn a_failed_set_nonblocking_fails_the_connection() {
        let path = TmpPath::shm("nonblocking-error");
        // Connected through the backlog, never accepted: nothing is read or written.
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let mut o = MirrorOptions::new(listener.local_addr().unwrap(), &path);
        o.log = false;
        let (_, attempt) = attempt_addr(&o);
        let (addr, src) = attempt.unwrap();
        let stream = TcpStream::connect(addr).unwrap();
        let mut sink = FileSink::open(&path).unwrap();
        let mut bufs = Buffers::new().unwrap();
        let mut c = Conn::new(&o, src, stream, Start::Oldest, &sink, &mut bufs);
        let ebadf = || io::Error::from_raw_os_error(libc::EBADF);
        FAIL_SET_NONBLOCKING.with(|f| f.set(Some(libc::EBADF)));
        let e = failed(c.run(&mut sink, &AtomicBool::new(false)), ebadf().kind());
        assert_eq!(
            e.to_string(),
            format!("making the TCP socket non-blocking: {}", ebadf())
        );
        assert_eq!(FAIL_SET_NONBLOCKING.with(std::cell::Cell::get), None);
        assert_eq!(c.m.geometry(), None, "no handshake was attempted");
    }

    /// Gives `c` a non-blocking UDP socket on loopback (as a MULTICAST frame would) and
    /// returns a socket connected to it to send datagrams with.
    fn with_udp(c: &mut Conn<'_>) -> UdpSocket {
        let rx = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        rx.set_nonblocking(true).unwrap();
        let tx = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        c.udp = Some(rx);
        c.batch = Some(RecvBatch::new(RECV_BATCH, MAX_DATAGRAM));
        tx
    }

    /// Has the next `recvmmsg` of `c` fail with `errno`, then reads UDP once.
    fn read_udp_failing(c: &mut Conn<'_>, sink: &mut FileSink, errno: i32) -> Result<bool, End> {
        FAIL_RECV.with(|f| f.borrow_mut().push_back(errno));
        let r = c.read_udp(sink);
        let left = FAIL_RECV.with(|f| f.borrow_mut().drain(..).count());
        assert_eq!(left, 0, "errno {errno} was not met");
        r
    }

    /// The errnos of `recvmmsg` that are this host's socket failing (recvmmsg(2)), which
    /// no datagram of ours can have the kernel report.
    const LOCAL_RECV_ERRORS: [i32; 6] = [
        libc::EBADF,
        libc::EFAULT,
        libc::EINVAL,
        libc::ENOMEM,
        libc::ENOTSOCK,
        libc::ENOTCONN,
    ];

    /// After GEOMETRY, a receive on the UDP socket that fails locally (an injected errno:
    /// a working socket gives none of these) fails the connection, naming `recvmmsg` and
    /// the error, with the frame cut short when part of one is buffered. It ended cleanly
    /// ("recvmmsg: Bad file descriptor", `--once` exit 0).
    #[test]
    fn a_failed_receive_fails_the_connection() {
        with_held_source("recv-error-between", whole_data, false, 0, |c, sink, _| {
            let _tx = with_udp(c);
            for errno in LOCAL_RECV_ERRORS {
                let want = io::Error::from_raw_os_error(errno);
                let Err(end) = read_udp_failing(c, sink, errno) else {
                    panic!("the connection goes on after {want}");
                };
                let e = failed(end, want.kind());
                assert_eq!(e.to_string(), format!("recvmmsg: {want}"));
                assert_eq!(c.m.failure(), None, "no frame was cut");
            }
        });
        with_held_source("recv-error-cut", cut_data, false, 40, |c, sink, _| {
            let _tx = with_udp(c);
            let enomem = io::Error::from_raw_os_error(libc::ENOMEM);
            let Err(end) = read_udp_failing(c, sink, libc::ENOMEM) else {
                panic!("the connection goes on after {enomem}");
            };
            let what = format!("recvmmsg: {enomem};");
            given_up_inside_data_3(end, io::ErrorKind::OutOfMemory, &what);
        });
    }

    /// A receive that finds nothing (EAGAIN) ends the pass only; one interrupted (EINTR)
    /// or reporting an ICMP error for an earlier datagram (a PUNCH refused, its host or
    /// network unreachable) is retried: the datagram behind it is taken in the same pass
    /// and the connection goes on. EHOSTUNREACH, ENETUNREACH and EHOSTDOWN ended it
    /// (cleanly, "recvmmsg: No route to host").
    #[test]
    fn benign_receive_errors_do_not_end_the_connection() {
        with_held_source("recv-benign", whole_data, false, 0, |c, sink, _| {
            let tx = with_udp(c);
            let datagrams = |c: &Conn<'_>| c.m.counters().datagrams;
            tx.send(b"not a frame").unwrap();
            let before = datagrams(c);
            let r = read_udp_failing(c, sink, libc::EAGAIN);
            assert!(
                matches!(r, Ok(false)),
                "EAGAIN: nothing received, the pass ends"
            );
            assert_eq!(datagrams(c), before);
            assert!(matches!(c.read_udp(sink), Ok(true)), "the datagram waits");
            assert_eq!(datagrams(c), before + 1);
            for errno in [
                libc::EINTR,
                libc::ECONNREFUSED,
                libc::EHOSTUNREACH,
                libc::ENETUNREACH,
                libc::EHOSTDOWN,
            ] {
                let what = io::Error::from_raw_os_error(errno);
                tx.send(b"not a frame").unwrap();
                let before = datagrams(c);
                match read_udp_failing(c, sink, errno) {
                    Ok(true) => {}
                    Ok(false) => panic!("{what}: the datagram behind it was not received"),
                    Err(End::Closed(s)) => panic!("{what}: a clean end: {s}"),
                    Err(End::Failed(e)) => panic!("{what}: failed: {e}"),
                    Err(_) => panic!("{what}: the connection ended"),
                }
                assert_eq!(datagrams(c), before + 1, "{what}");
            }
            assert_eq!(c.m.failure(), None);
        });
    }

    /// A real ICMP port unreachable: on a connected UDP socket (Linux reports these only
    /// there, or with IP_RECVERR) the kernel's ECONNREFUSED for a datagram sent to a port
    /// nobody holds is taken by the mirror's receive without ending the connection.
    #[test]
    fn a_refused_datagram_does_not_end_the_connection() {
        with_held_source("recv-refused", whole_data, false, 0, |c, sink, _| {
            let _tx = with_udp(c);
            let closed = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
            let to = closed.local_addr().unwrap();
            drop(closed);
            let rx = c.udp.as_ref().unwrap();
            rx.connect(to).unwrap();
            rx.send(b"punch").unwrap();
            let mut fd = [pollin(rx)];
            let t0 = std::time::Instant::now();
            while fd[0].revents & libc::POLLERR == 0 {
                assert!(
                    t0.elapsed() < StdDuration::from_secs(5),
                    "no ICMP error came"
                );
                fd[0].revents = 0;
                poll(&mut fd, StdDuration::from_millis(50)).unwrap();
            }
            match c.read_udp(sink) {
                Ok(_) => {}
                Err(End::Closed(s)) => panic!("a clean end: {s}"),
                Err(End::Failed(e)) => panic!("failed: {e}"),
                Err(_) => panic!("the connection ended"),
            }
            fd[0].revents = 0;
            poll(&mut fd, StdDuration::ZERO).unwrap();
            assert_eq!(fd[0].revents & libc::POLLERR, 0, "the error was not taken");
            assert_eq!(c.m.failure(), None);
        });
    }

    /// Has the source of `c`'s connection reset it (via `go`, see [`held_source`]), waits
    /// (at most 5 s) until the reset has arrived, then writes to the connection twice with
    /// the mirror's own `write_all_within`: the socket reports the reset once
    /// (ECONNRESET), then the broken pipe (EPIPE). Returns what `c` makes of each failed
    /// write ([`Conn::socket_failed`], as its `transmit` does).
    fn ends_of_writes_after_a_reset(
        c: &mut Conn<'_>,
        go: &std::sync::mpsc::Sender<()>,
    ) -> [End; 2] {
        go.send(()).unwrap();
        let mut fd = [pollin(&c.stream)];
        let t0 = std::time::Instant::now();
        while fd[0].revents & (libc::POLLERR | libc::POLLHUP) == 0 {
            assert!(t0.elapsed() < StdDuration::from_secs(5), "no reset came");
            fd[0].revents = 0;
            poll(&mut fd, StdDuration::from_millis(100)).unwrap();
        }
        [io::ErrorKind::ConnectionReset, io::ErrorKind::BrokenPipe].map(|kind| {
            let e = write_all_within(&mut c.stream, &[0u8; 24], StdDuration::from_secs(1))
                .expect_err("a write to a connection reset");
            assert_eq!(e.kind(), kind, "{e}");
            c.socket_failed("write", e)
        })
    }

    /// After GEOMETRY, a reset that shows on a write (ECONNRESET, then EPIPE) with part of
    /// a frame buffered fails the connection with the truncated frame marked as a reset and
    /// the error kind of the write, as a reset seen by a read does.
    #[test]
    fn a_reset_seen_by_a_write_inside_a_frame_fails_the_connection() {
        with_held_source("write-reset-cut", cut_data, true, 40, |c, _, go| {
            let want = MirrorError::TruncatedFrame {
                end: StreamEnd::Reset,
                kind: Some(Kind::Data),
                got: 40,
                expected: Some(64),
                seq: Some(3),
                next: 3,
            };
            let kinds = [io::ErrorKind::ConnectionReset, io::ErrorKind::BrokenPipe];
            for (end, kind) in ends_of_writes_after_a_reset(c, go).into_iter().zip(kinds) {
                let e = failed(end, kind);
                let cut = e.get_ref().and_then(|c| c.downcast_ref::<MirrorError>());
                assert_eq!(cut, Some(&want), "{e}");
                assert!(
                    e.to_string()
                        .starts_with("the connection was reset in the middle of a DATA frame"),
                    "{e}"
                );
            }
        });
    }

    /// After GEOMETRY, a reset that shows on a write between frames ends the connection
    /// cleanly, as one seen by a read there does (spec §21.3): `--once` returns `Ok`.
    #[test]
    fn a_reset_seen_by_a_write_between_frames_ends_the_connection_cleanly() {
        with_held_source("write-reset-between", whole_data, true, 0, |c, _, go| {
            let [reset, pipe] = ends_of_writes_after_a_reset(c, go);
            for (end, what) in [(reset, "reset by peer"), (pipe, "Broken pipe")] {
                match end {
                    End::Closed(s) => {
                        assert!(s.starts_with("write: ") && s.contains(what), "{s}");
                    }
                    End::Failed(e) => panic!("{what}: failed: {e}"),
                    _ => panic!("{what}: neither failed nor closed"),
                }
            }
            assert_eq!(c.m.failure(), None, "no frame was cut");
        });
    }

    /// The line that says a file is not a usable ring names its path once, with the reason
    /// and what the handshake does instead.
    #[test]
    fn an_unusable_ring_is_named_once_before_connecting() {
        let path = TmpPath::shm("unusable-once");
        std::fs::write(&path, b"").unwrap();
        let sink = FileSink::open(&path).expect("an empty file is replaced");
        let e = sink.not_adopted().expect("the reason kept");
        let p = crate::shown::path(&path).to_string();
        let line = not_usable_line(&path, e, Start::Resume);
        assert_eq!(
            line,
            format!(
                "mirror: the file at {p} is not a usable ring (file is 0 bytes, shorter than \
                 the 128-byte ring header); cannot resume it: a new ring replaces it at the \
                 handshake, from the source's oldest record"
            )
        );
        assert_eq!(line.matches(&p).count(), 1, "{line}");
        assert!(
            not_usable_line(&path, e, Start::Latest)
                .ends_with("header); a new ring replaces it at the handshake"),
        );
    }

    /// A source that closes the connection after a GEOMETRY announcing UDP delivery, before
    /// the MULTICAST that completes the handshake, fails a mirror `once` (no ring was made,
    /// no session held), as a close before GEOMETRY does. It ended cleanly ("source
    /// disconnected", exit 0) with nothing mirrored.
    #[test]
    fn a_connection_closed_before_multicast_fails_a_mirror_once() {
        use ringwire_core::wire::GEOMETRY_UDP_FOLLOWS;
        let path = TmpPath::shm("no-multicast");
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let mut o = MirrorOptions::new(listener.local_addr().unwrap(), &path);
        o.once = true;
        o.log = false;
        let source = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            answer_hello(&mut s, GEOMETRY_UDP_FOLLOWS, 32);
            let _ = s.shutdown(std::net::Shutdown::Both);
        });
        let r = run(&o, &AtomicBool::new(false));
        source.join().unwrap();
        let e = r.expect_err("a handshake cut short ended the connection cleanly");
        let ReplicaError::Io { source: cause, .. } = &e else {
            panic!("{e:?}");
        };
        assert_eq!(cause.kind(), io::ErrorKind::UnexpectedEof, "{e}");
        assert!(e.to_string().contains("before the MULTICAST frame"), "{e}");
        assert!(!path.exists(), "a ring was made");
    }

    /// Without `once`, a connection closed inside a frame is a failed connection, counted
    /// as one, and the mirror reconnects and resumes after the records it kept; so is one
    /// reset there.
    #[test]
    fn a_connection_closed_inside_a_frame_is_reconnected_without_once() {
        reconnected_after_a_cut(false);
        reconnected_after_a_cut(true);
    }

    fn reconnected_after_a_cut(by_reset: bool) {
        use std::io::ErrorKind::WouldBlock;
        let path = TmpPath::shm(if by_reset { "reset-again" } else { "cut-again" });
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let mut o = MirrorOptions::new(listener.local_addr().unwrap(), &path);
        o.log = false;
        o.start = Start::Oldest;
        o.reconnect = StdDuration::from_millis(10);
        let stop = AtomicBool::new(false);
        let (r, second_hello) = std::thread::scope(|sc| {
            let source = sc.spawn(|| {
                let accept = || {
                    let t0 = std::time::Instant::now();
                    loop {
                        match listener.accept() {
                            Ok((s, _)) => {
                                s.set_nonblocking(false).unwrap();
                                return Some(s);
                            }
                            Err(e) if e.kind() == WouldBlock && t0.elapsed().as_secs() < 10 => {
                                std::thread::sleep(StdDuration::from_millis(5));
                            }
                            Err(_) => return None,
                        }
                    }
                };
                let second = (|| {
                    let mut s = accept()?;
                    answer_hello(&mut s, 0, 32);
                    cut_data(&mut s);
                    if by_reset {
                        reset(s);
                    } else {
                        let _ = s.shutdown(std::net::Shutdown::Both);
                        drop(s);
                    }
                    let mut s = accept()?;
                    s.set_read_timeout(Some(StdDuration::from_secs(5))).unwrap();
                    let mut hello = [0u8; 32];
                    s.read_exact(&mut hello).ok()?;
                    Some((u64::from_le_bytes(hello[8..16].try_into().unwrap()), s))
                })();
                // Stopped while the second connection is open (it stays so until the mirror
                // returns): it ends as stopped, not failed.
                stop.store(true, Ordering::Relaxed);
                second
            });
            let r = run(&o, &stop);
            (r, source.join().unwrap().map(|(seq, _)| seq))
        });
        let sum = r.unwrap_or_else(|e| panic!("reset {by_reset}: the mirror failed: {e}"));
        assert_eq!(
            second_hello,
            Some(2),
            "reset {by_reset}: the second connection resumes at 2 (one record of overlap)"
        );
        assert_eq!(
            (sum.connections, sum.failed_attempts, sum.last_seq),
            (2, 1, 2),
            "reset {by_reset}"
        );
    }

    /// A source (hostile or wedged) that sends one byte of a frame every half silence
    /// timeout and never completes it is given up after the silence timeout, as a silent
    /// one is. Each byte reset the silence clock, so the trickle held the mirror connected
    /// for as long as it lasted.
    #[test]
    fn a_source_trickling_a_partial_frame_is_given_up_as_silent() {
        use ringwire_core::wire::DataRepr;
        use std::io::Write;
        let path = TmpPath::shm("trickle");
        let (started, trickle_started) = std::sync::mpsc::channel();
        // A DATA frame of 4 records of 24 bytes, 112 bytes: a byte every 150 ms for at
        // most 4 s, never the last one.
        let (addr, source) = fake_source(32, move |s| {
            let records = [7u8; 4 * 24];
            let mut f = [0u8; 128];
            let n = DataRepr {
                flags: 0,
                seq: 1,
                count: 4,
                records: &records,
            }
            .emit(&mut f)
            .unwrap();
            let _ = started.send(std::time::Instant::now());
            let t0 = std::time::Instant::now();
            for b in &f[..n - 1] {
                if t0.elapsed() >= StdDuration::from_secs(4) || s.write_all(&[*b]).is_err() {
                    return;
                }
                std::thread::sleep(StdDuration::from_millis(150));
            }
        });
        let mut o = MirrorOptions::new(addr, &path);
        o.once = true;
        o.log = false;
        o.silence_timeout = StdDuration::from_millis(300);
        let (r, ended) = (run(&o, &AtomicBool::new(false)), std::time::Instant::now());
        source.join().unwrap();
        let took = trickle_started
            .recv_timeout(StdDuration::ZERO)
            .map(|t| ended.saturating_duration_since(t));
        let e = r.expect_err("the mirror stayed connected until the source hung up");
        assert!(e.to_string().contains("nothing from the source"), "{e}");
        let took = took.expect("the trickle started");
        // 300 ms of silence after the heartbeat, with room for a loaded machine; the
        // trickle went on for 4 s.
        assert!(
            took < StdDuration::from_millis(1500),
            "given up after {took:?}"
        );
    }

    /// A frame that takes longer than the silence timeout to arrive (a whole 1 MiB frame
    /// on a link under 1.7 Mbit/s, at the default 5 s) is not silence while its bytes keep
    /// coming: every `SILENCE_PROGRESS` bytes of it count as hearing from the source.
    #[test]
    fn a_frame_slower_than_the_silence_timeout_is_not_silence() {
        use ringwire_core::wire::{DataRepr, HeartbeatRepr};
        use std::io::Write;
        let path = TmpPath::shm("slowframe");
        // 64 records of 1016 bytes (65,040 bytes), 8 KiB every 300 ms: about 2.4 s for
        // the frame, over twice the silence timeout, then heartbeats for 300 ms, then the
        // source hangs up.
        let (addr, source) = fake_source(1024, |s| {
            let records: Vec<u8> = (0..64 * 1016).map(|i| (i / 1016) as u8).collect();
            let mut f = vec![0u8; 16 + records.len()];
            let n = DataRepr {
                flags: 0,
                seq: 1,
                count: 64,
                records: &records,
            }
            .emit(&mut f)
            .unwrap();
            for piece in f[..n].chunks(8 << 10) {
                if s.write_all(piece).is_err() {
                    return;
                }
                std::thread::sleep(StdDuration::from_millis(300));
            }
            let mut hb = [0u8; 16];
            let n = HeartbeatRepr { flags: 0, seq: 64 }.emit(&mut hb).unwrap();
            for _ in 0..6 {
                if s.write_all(&hb[..n]).is_err() {
                    return;
                }
                std::thread::sleep(StdDuration::from_millis(50));
            }
        });
        let mut o = MirrorOptions::new(addr, &path);
        o.once = true;
        o.log = false;
        o.start = Start::Oldest;
        o.silence_timeout = StdDuration::from_secs(1);
        let r = run(&o, &AtomicBool::new(false));
        source.join().unwrap();
        let last = crate::RingConsumer::<[u8; 1016]>::attach(&path).map(|mut rx| {
            let mut last = None;
            while let Some(r) = rx.try_recv() {
                last = Some(r[0]);
            }
            last
        });
        r.expect("the mirror gave the slow frame up as silence");
        assert_eq!(
            last.ok().flatten(),
            Some(63),
            "the frame's records were mirrored"
        );
    }

    /// A PUNCH the kernel refuses to send (here a seccomp filter failing `sendto` with an
    /// address, as a firewall dropping it on its way out fails it with EPERM) is counted
    /// in the summary, the mirror's progress and its log lines. The error was dropped: a
    /// unicast mirror whose PUNCHes never left showed only that no data came.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[test]
    fn punches_the_kernel_refuses_are_counted() {
        use ringwire_core::wire::GEOMETRY_UDP_FOLLOWS;
        use std::io::Write;
        let path = TmpPath::shm("punch-err");
        // Where the PUNCHes would go; nothing is sent to it from this side.
        let udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = udp.local_addr().unwrap().port();
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let mut o = MirrorOptions::new(listener.local_addr().unwrap(), &path);
        o.once = true;
        o.log = false;
        o.unicast = true;
        // A source that answers HELLO with GEOMETRY and a unicast MULTICAST, then sends a
        // HEARTBEAT over TCP every 50 ms for 1 s (several PUNCH intervals) and hangs up.
        let source = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            answer_hello(&mut s, GEOMETRY_UDP_FOLLOWS, 32);
            let mut f = [0u8; 64];
            let n = MulticastRepr {
                group: [0; 4],
                port,
                mtu: 1472,
                ttl: 0,
                session: 0x22,
                token: 5,
            }
            .emit(&mut f)
            .unwrap();
            s.write_all(&f[..n]).unwrap();
            heartbeats(
                &mut s,
                StdDuration::from_millis(50),
                StdDuration::from_secs(1),
            );
            let _ = s.shutdown(std::net::Shutdown::Both);
        });
        let status = crate::test_fork::forked(20, || {
            if crate::test_fork::deny_sendto_an_address().is_err() {
                return 2;
            }
            let progress = MirrorProgress::new();
            match run_observed(&o, &AtomicBool::new(false), Some(&progress)) {
                Ok(sum) if sum.punch_errors == 0 => 3,
                Ok(sum) if progress.snapshot().punch_errors != sum.punch_errors => 4,
                Ok(_) => 0,
                Err(_) => 5,
            }
        });
        source.join().unwrap();
        drop(udp);
        // 3: the refused PUNCHes went uncounted.
        crate::test_fork::assert_exited_0(status, "a mirror whose PUNCHes are refused");
    }

    /// A reconnect delay past what an `Instant` holds (`Duration::MAX` from a library
    /// caller) naps until stopped, still watching the flag; `Instant::now() + d` panicked.
    #[test]
    fn a_nap_longer_than_time_waits_for_the_stop_flag() {
        let stop = AtomicBool::new(false);
        let t0 = std::time::Instant::now();
        std::thread::scope(|sc| {
            sc.spawn(|| {
                std::thread::sleep(StdDuration::from_millis(100));
                stop.store(true, Ordering::Relaxed);
            });
            nap(StdDuration::MAX, &stop);
        });
        let dt = t0.elapsed();
        assert!(dt >= StdDuration::from_millis(100), "{dt:?}");
        assert!(dt < StdDuration::from_secs(5), "{dt:?}");
        // A plain nap still ends on time without the flag.
        let t0 = std::time::Instant::now();
        nap(StdDuration::from_millis(30), &AtomicBool::new(false));
        assert!(t0.elapsed() >= StdDuration::from_millis(30));
    }

    /// A MULTICAST frame whose group cannot be joined here fails with an error naming the
    /// group, its port and the interface tried, and where that interface came from; it
    /// said only "mirror UDP socket: No such device".
    #[test]
    fn a_group_that_cannot_be_joined_is_named_with_the_interface() {
        let mut f = [0u8; 64];
        let group = Ipv4Addr::new(239, 255, 102, 7);
        let n = MulticastRepr {
            group: group.octets(),
            port: 7401,
            mtu: 1400,
            ttl: 0,
            session: 1,
            token: 0,
        }
        .emit(&mut f)
        .unwrap();
        // TEST-NET-1 (RFC 5737): no interface of this host has it.
        let bad = Ipv4Addr::new(192, 0, 2, 1);
        let (mut udp, mut batch) = (None, None);
        let e = open_udp(&opts(bad, 0), None, &f[..n], &mut udp, &mut batch).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("239.255.102.7:7401"), "{text}");
        assert!(text.contains("interface 192.0.2.1 (--iface)"), "{text}");
        assert!(udp.is_none() && batch.is_none());
        // The default interface, the mirror's address of its TCP connection.
        let e = open_udp(
            &opts(Ipv4Addr::UNSPECIFIED, 0),
            Some(bad),
            &f[..n],
            &mut udp,
            &mut batch,
        )
        .unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("interface 192.0.2.1, the mirror's address of its TCP connection"),
            "{text}"
        );
    }

    fn opts(iface: Ipv4Addr, nak_delay_us: u64) -> MirrorOptions {
        let mut o = MirrorOptions::new(SocketAddr::from((Ipv4Addr::LOCALHOST, 1)), "/nowhere");
        o.iface = iface;
        o.nak_delay = StdDuration::from_micros(nak_delay_us);
        o
    }

    /// An option the source's choice of transport leaves unused is named in one warning.
    #[test]
    fn options_the_transport_leaves_unused_are_named() {
        let lo = Ipv4Addr::LOCALHOST;
        let any = Ipv4Addr::UNSPECIFIED;
        let tcp = unused_options(&opts(lo, 300), false, false).expect("warned");
        assert!(tcp.contains("over TCP only"), "{tcp}");
        assert!(tcp.contains("--iface 127.0.0.1"), "{tcp}");
        assert!(tcp.contains("--nak-delay-us 300"), "{tcp}");
        let tcp = unused_options(&opts(any, 300), false, false).expect("warned");
        assert!(!tcp.contains("--iface"), "{tcp}");
        let uni = unused_options(&opts(lo, 300), true, true).expect("warned");
        assert!(uni.contains("unicast") && uni.contains("--iface"), "{uni}");
        assert!(!uni.contains("--nak-delay-us"), "{uni}");
        assert_eq!(unused_options(&opts(any, 300), true, true), None);
        assert_eq!(
            unused_options(&opts(lo, 300), true, false),
            None,
            "multicast"
        );
        assert_eq!(unused_options(&opts(any, 0), false, false), None);
        // --unicast against a source that serves TCP only (with UDP it was granted).
        let mut o = opts(any, 0);
        o.unicast = true;
        let tcp = unused_options(&o, false, false).expect("warned");
        assert!(tcp.contains("over TCP only: --unicast"), "{tcp}");
        assert_eq!(unused_options(&o, true, true), None);
    }
}
