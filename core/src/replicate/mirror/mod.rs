//! The mirror (spec §19, §21): HELLO, GEOMETRY checks, the adopt-or-recreate decision,
//! applying DATA in order with a hold-back store, NAK and its repeat, GAP, tail-loss
//! detection from heartbeats and restart detection.
//!
//! Beyond the reference: a unicast datagram is accepted only from the address punched, a
//! multicast one only from the sender whose DATA matched the source's copy over TCP (the
//! `sender` module), a repeated NAK asks only for what is still missing, a step handles a bounded number of
//! datagrams, sequences at or past [`SEQ_LIMIT`] are refused, the first NAK of a hole may
//! wait [`MirrorConfig::nak_delay`] for reordered datagrams, a resume is checked
//! against the source's copy of the last record held, a NAK the source leaves unanswered
//! [`NAK_UNANSWERED_LIMIT`] times in a row is repeated less and less often (spec §21.4
//! repeats it every `nak_timeout` for ever; see the `nak` module), and a held ring without
//! [`Flags::SPARSE`] is replaced rather than adopted ([`Replace::NotSparse`]; the std
//! adapter's file sink refuses such a ring before connecting, since no mirror makes one).
//!
//! # Checking a resume
//!
//! A source restarted with a new ring numbers from 1 again. The reference detects that
//! only when the mirror asks for more than the new ring holds (GEOMETRY RESET, §21.5) or,
//! in TCP mode, when DATA goes backwards. A new ring that has already passed the mirror's
//! position when the mirror reconnects (a mirror that was down while the producer restarted
//! and published) passes both tests, and the reference mirror appends the new ring's
//! records to the old ring's: readers see one ring made of two.
//!
//! So a resuming mirror that holds records up to `w` sends HELLO `w` instead of `w + 1`,
//! asking for one record of overlap. Every source, ringfire's included, answers it as any
//! HELLO (§19.1): from `w` if it still holds `w`. The first copy of `w` that arrives (TCP
//! DATA; in UDP modes a datagram or the answer to the NAK the mirror sends for it at once)
//! is compared with the mirror's own record `w` ([`RecordSink::holds`]):
//!
//! - the same: the copy is dropped and the mirror continues after `w`
//!   ([`MirrorCounters::resumes_verified`]);
//! - different: the source restarted. The mirror ring is recreated as for RESET and
//!   continues from that copy ([`MirrorCounters::restarts`]);
//! - not comparable (the source no longer holds `w`: GEOMETRY `seq` past it, a GAP past
//!   it; or the sink cannot read `w` back): the mirror continues after `w` unchecked, as
//!   the reference does ([`MirrorCounters::resumes_unverified`]).
//!
//! Records that carry nothing of their ring's identity (two rings that hold the same bytes
//! under `w`) cannot be told apart this way.
//!
//! Asking for `w` also changes one case of RESET: a restarted source whose new ring holds
//! exactly `w - 1` records is asked for its next record, not past it, so it sends no RESET
//! (§19.1 resets only past `write_seq + 1`); the check waits for the new ring's record `w`
//! and recreates the mirror ring when it comes. Until the new producer publishes `w` the
//! mirror keeps the old ring's records (and, in UDP modes, repeats its NAK for `w` every
//! repair interval). In exchange, a resume from a source whose `write_seq` trails a record
//! it has already served (a producer publishing a batch) is no longer taken for a restart.

use core::fmt;

mod apply;
mod nak;
mod sender;

use nak::Nak;
pub use nak::{MAX_NAK_BACKOFF, NAK_UNANSWERED_LIMIT};
pub use sender::SENDER_TRIAL_TIMEOUT;
use sender::{Senders, Verdict};

use super::holdback::HoldBack;
use super::ring_io::{Holds, RecordSink, Replace, SinkError};
use super::time::{Duration, Instant, earliest};
use super::{Channel, PeerAddr, Transmit};
use crate::layout::{Flags, SEQ_LIMIT};
use crate::wire::{
    DataRepr, Frame, GEOMETRY_RESET, GEOMETRY_UDP_FOLLOWS, GapRepr, GeometryRepr, HEADER_LEN,
    HELLO_CAN_UNICAST, HELLO_OLDEST, HELLO_PREFER_UNICAST, HeartbeatRepr, HelloRepr, Kind,
    MulticastRepr, PunchRepr, RecordFormat, WireError,
};

/// Datagrams handled per [`Mirror::handle_datagrams`] call.
pub const DATAGRAMS_PER_STEP: usize = 32;
/// Most records one NAK asks for.
pub const MAX_NAK_RECORDS: u64 = 65_535;
/// The shortest NAK repeat interval ([`MirrorConfig::nak_timeout`]). A NAK due again at
/// once (a zero timeout) was handed out by every `poll_transmit` with the same `now`, so a
/// driver that sends until `poll_transmit` has nothing left (ours) sent it for ever and
/// never read the retransmission that would end it: the mirror thread hung, writing NAKs.
/// A repeat sooner than this would only ask again for records already on their way.
pub const MIN_NAK_TIMEOUT: Duration = Duration::from_millis(1);

/// The shortest PUNCH interval and keep-alive ([`MirrorConfig::punch_interval`],
/// [`MirrorConfig::punch_keepalive`]); a shorter one, zero included, is taken as this.
/// Taken as is, a zero one made the next PUNCH due at once: every `poll_transmit` with the
/// same `now` handed one out, so a driver that sends until `poll_transmit` has nothing left
/// (ours) sent PUNCHes for ever. A source answers the first PUNCH that reaches it; more
/// than one a millisecond only adds load on it and the path.
pub const MIN_PUNCH_INTERVAL: Duration = Duration::from_millis(1);

/// Where the mirror wants to start (spec §18.1 HELLO `seq`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Start {
    /// Only new data.
    Latest,
    /// The oldest the source retains.
    Oldest,
    /// From this sequence (0 means 1).
    Sequence(u64),
    /// Continue the existing local ring, or oldest if there is none.
    Resume,
}

/// Mirror settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MirrorConfig {
    /// Start position.
    pub start: Start,
    /// Ask for UDP unicast even if the source has multicast.
    pub prefer_unicast: bool,
    /// NAK repeat interval (default 20 ms; a shorter one than [`MIN_NAK_TIMEOUT`], zero
    /// included, is taken as that). A NAK the source left unanswered
    /// [`NAK_UNANSWERED_LIMIT`] times in a row is repeated less often, up to every
    /// [`MAX_NAK_BACKOFF`] times this, until the source answers.
    pub nak_timeout: Duration,
    /// How long a hole in the UDP stream waits for its datagrams before the first NAK
    /// (default zero: at once, as spec §21.4). On a path that reorders (WAN unicast, bonded
    /// links) a hole is usually filled by a late datagram within the path's reordering
    /// spread; a delay a little above that spread keeps those records from being
    /// retransmitted over TCP as well, at the cost of this much more latency for a real loss.
    pub nak_delay: Duration,
    /// PUNCH interval until something was heard (default 200 ms; a shorter one than
    /// [`MIN_PUNCH_INTERVAL`], zero included, is taken as that).
    pub punch_interval: Duration,
    /// PUNCH keep-alive afterwards (default 5 s; floored as `punch_interval`).
    pub punch_keepalive: Duration,
    /// Accept unicast datagrams only from one address: the source's UDP port at the TCP
    /// peer's IP (where the PUNCHes go), or, when the first datagram of the session comes
    /// from that port at another IP, that address. Default true. Drops are counted in
    /// [`MirrorCounters::udp_wrong_source`].
    ///
    /// The second case is a source bound to 0.0.0.0 reached at a secondary address (a VIP,
    /// 127.0.0.2): its kernel sends from the route's address, not the one dialled.
    /// ringwire's server answers from the dialled address; ringfire's cannot, and spec §21.4
    /// checks no address at all, so refusing it would make such a source unusable.
    ///
    /// Multicast datagrams (spec §21.4 filters them by the session byte only) are accepted
    /// only from the sender whose first DATA matched the source's copy of its first record,
    /// fetched over TCP; until one has, DATA is set aside
    /// ([`MirrorCounters::udp_unconfirmed`]), and heartbeats only make the mirror NAK: their
    /// claims count in no figure ([`Mirror::source_seq`]) before their sender is confirmed
    /// (see [`Mirror::sender_on_trial`]). Their source is the address of the interface the
    /// source sends from (its default route's, or `--iface`) and a port never announced,
    /// which need not be, and with a server bound to 0.0.0.0 often is not, the address the
    /// mirror reached it at over TCP: that is why the sender is tried rather than known.
    pub check_udp_source: bool,
}

impl Default for MirrorConfig {
    fn default() -> MirrorConfig {
        MirrorConfig {
            start: Start::Resume,
            prefer_unicast: false,
            nak_timeout: Duration::from_millis(20),
            nak_delay: Duration::ZERO,
            punch_interval: Duration::from_millis(200),
            punch_keepalive: Duration::from_secs(5),
            check_udp_source: true,
        }
    }
}

/// What the mirror has seen and done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MirrorCounters {
    /// TCP frames handled.
    pub frames: u64,
    /// Datagrams received.
    pub datagrams: u64,
    /// NAK frames sent (first sends and repeats).
    pub naks_sent: u64,
    /// NAKs whose repeats back off: the source left [`NAK_UNANSWERED_LIMIT`] sends in a
    /// row unanswered, so it does not have what they ask for (a UDP heartbeat claimed more
    /// than it sent: another sender on the group or port with the session byte; see
    /// [`Mirror::nak_backed_off`]).
    pub naks_unanswered: u64,
    /// Records written from TCP DATA in UDP modes (answers to NAKs).
    pub records_retransmitted: u64,
    /// Holes skipped (GAP, a jump ahead, a restart, a blob the mirror's arena cannot hold).
    pub gaps: u64,
    /// Sequence numbers those holes skipped (GAP frames, jumps ahead and blobs longer than
    /// the arena; a restart starts a new ring and counts none): records the mirror ring will
    /// never hold.
    pub records_skipped: u64,
    /// DATA frames dropped as duplicates or stale.
    pub duplicates_dropped: u64,
    /// Datagrams dropped as malformed, foreign or for another session.
    pub garbage_dropped: u64,
    /// Of `garbage_dropped`: datagrams with the session's byte dropped because they came
    /// from another address than the source's: over unicast the one punched, over
    /// multicast the sender confirmed, or one refused ([`MirrorConfig::check_udp_source`];
    /// see [`Mirror::udp_source`]).
    pub udp_wrong_source: u64,
    /// Multicast DATA datagrams of the session set aside, not applied, because no sender was
    /// confirmed yet (see [`MirrorConfig::check_udp_source`]); their records are asked for
    /// by NAK like lost ones. Not in `garbage_dropped`.
    pub udp_unconfirmed: u64,
    /// Records written into the ring (not those counted in `records_skipped`).
    pub records_written: u64,
    /// DATA frames dropped because the hold-back store was full.
    pub holdback_dropped: u64,
    /// Source restarts detected: a RESET answering a resume, TCP DATA below what was
    /// already written, or a resume whose last record held differs from the source's copy
    /// (see the module docs).
    pub restarts: u64,
    /// Resumes whose last record held was the same as the source's copy.
    pub resumes_verified: u64,
    /// Resumes that could not be checked: the source no longer held the last record the
    /// mirror held (past its retention, or lost), or the sink could not read it back. A
    /// source that restarted and passed the mirror's position goes unnoticed then.
    pub resumes_unverified: u64,
}

/// Why the mirror stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum MirrorError {
    /// A TCP frame could not be decoded (fatal on TCP).
    Protocol(WireError),
    /// A valid TCP frame that is not allowed in the current state.
    UnexpectedFrame {
        /// Its kind.
        kind: Kind,
        /// Its `seq` field.
        seq: u64,
        /// The frames the mirror takes in that state (e.g. "GEOMETRY").
        expected: &'static str,
    },
    /// The local ring could not be created.
    Sink(SinkError),
    /// Input after an error.
    Closed,
    /// The TCP stream ended inside a frame: part of its header or payload arrived, the
    /// rest never will ([`Mirror::handle_tcp_eof`], [`Mirror::handle_tcp_reset`],
    /// [`Mirror::handle_tcp_given_up`]). The records of the frames before it stay written.
    TruncatedFrame {
        /// How the connection ended: closed, reset, or given up by the driver.
        end: StreamEnd,
        /// Its kind, if the kind byte arrived and names one.
        kind: Option<Kind>,
        /// Bytes of it that arrived.
        got: usize,
        /// Bytes it takes in all (header and payload), once its `len` field arrived.
        expected: Option<usize>,
        /// Its `seq` field, once the whole header arrived.
        seq: Option<u64>,
        /// The next sequence the mirror expected ([`Mirror::next`]).
        next: u64,
    },
}

impl fmt::Display for MirrorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MirrorError::Protocol(e) => write!(f, "protocol error: {e}"),
            MirrorError::UnexpectedFrame {
                kind,
                seq,
                expected,
            } => write!(
                f,
                "unexpected {} frame (seq {seq}): expected {expected}",
                kind.name()
            ),
            MirrorError::Sink(e) => e.fmt(f),
            MirrorError::Closed => f.write_str("mirror closed"),
            MirrorError::TruncatedFrame {
                end,
                kind,
                got,
                expected,
                seq,
                next,
            } => {
                f.write_str(match end {
                    StreamEnd::Closed => "the connection closed in the middle of ",
                    StreamEnd::Reset => "the connection was reset in the middle of ",
                    StreamEnd::GivenUp => "the mirror gave the connection up in the middle of ",
                })?;
                match kind {
                    Some(k) => write!(f, "a {} frame", k.name())?,
                    None => f.write_str("a frame of unknown kind")?,
                }
                if let Some(s) = seq {
                    write!(f, " (seq {s})")?;
                }
                match expected {
                    Some(t) => write!(f, ": {got} of its {t} bytes arrived")?,
                    None => write!(f, ": {got} of its {HEADER_LEN}-byte header arrived")?,
                }
                write!(f, "; the mirror was waiting for record {next}")
            }
        }
    }
}

// No `source`: the text above already includes the wrapped error's.
impl core::error::Error for MirrorError {}

/// How a TCP connection ended inside a frame ([`MirrorError::TruncatedFrame`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum StreamEnd {
    /// The source closed it ([`Mirror::handle_tcp_eof`]).
    Closed,
    /// It was reset: ECONNRESET, ECONNABORTED or EPIPE ([`Mirror::handle_tcp_reset`]).
    Reset,
    /// The driver gave it up while it was still open: a write that timed out, a read that
    /// failed otherwise than by a reset (ETIMEDOUT), a wait on its socket that failed
    /// ([`Mirror::handle_tcp_given_up`]).
    GivenUp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Punch {
    to: PeerAddr,
    token: u32,
    heard: bool,
    last_heard: Instant,
    due: Instant,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Hello,
    AwaitGeometry,
    AwaitMulticast,
    LiveTcp,
    LiveUdp,
    Closed,
}

/// The mirror state machine. `'a` is the caller memory of its hold-back store.
#[derive(Debug)]
pub struct Mirror<'a> {
    cfg: MirrorConfig,
    source: PeerAddr,
    state: State,
    hello: HelloRepr,
    geometry: Option<GeometryRepr>,
    fmt: RecordFormat,
    next: u64,
    /// Longest blob the mirror ring's arena holds (blob rings).
    max_blob: u64,
    session: u8,
    /// The address datagrams must come from: over unicast the one punched, over multicast
    /// the sender confirmed. `None` over TCP and before a multicast sender is confirmed.
    udp_from: Option<PeerAddr>,
    /// Multicast: the sender on trial and the refused ones (the `sender` module).
    senders: Senders,
    punch: Option<Punch>,
    nak: Option<Nak>,
    /// TCP DATA and GAP frames handled in UDP modes: the source's answers to NAKs.
    answers: u64,
    /// The source's position as far as it is believed: the highest heartbeat since the
    /// last NAK the source left unanswered ([`Mirror::source_seq`]).
    source_seq: Option<u64>,
    /// The highest heartbeat of the connection, believed or not ([`Mirror::source_claim`]).
    source_claim: Option<u64>,
    /// A resume awaiting its check: the last sequence the mirror held when it adopted its
    /// ring, whose copy from the source is compared with its own (see the module docs).
    /// While it is set, `next` equals it, so that copy is the next record in order.
    verify: Option<u64>,
    /// How the resume check of this connection ended: the sequence compared, the verdict.
    checked: Option<(u64, Holds)>,
    /// The error that closed the mirror.
    failure: Option<MirrorError>,
    holdback: HoldBack<'a>,
    counters: MirrorCounters,
}

impl<'a> Mirror<'a> {
    /// A mirror that will connect to the source whose TCP address is `source`. `sink` is the
    /// local ring (consulted for [`Start::Resume`]); `holdback` is the hold-back store.
    pub fn new<S: RecordSink + ?Sized>(
        cfg: MirrorConfig,
        source: PeerAddr,
        sink: &S,
        holdback: HoldBack<'a>,
    ) -> Mirror<'a> {
        let seq = match cfg.start {
            Start::Latest => 0,
            Start::Oldest => HELLO_OLDEST,
            // u64::MAX on the wire means "oldest" (HELLO_OLDEST): a sequence that high is
            // asked for as the one below it, ahead of anything a source holds.
            Start::Sequence(n) => n.clamp(1, HELLO_OLDEST - 1),
            // One record of overlap, to check the resume: `w`, not `w + 1` (module docs).
            Start::Resume => sink
                .existing()
                .map_or(HELLO_OLDEST, |(_, w)| w.clamp(1, HELLO_OLDEST - 1)),
        };
        let flags = HELLO_CAN_UNICAST
            | if cfg.prefer_unicast {
                HELLO_PREFER_UNICAST
            } else {
                0
            };
        Mirror {
            cfg,
            source,
            state: State::Hello,
            hello: HelloRepr { seq, flags },
            geometry: None,
            fmt: RecordFormat::Fixed { record_len: 8 },
            next: 1,
            max_blob: u64::MAX,
            session: 0,
            udp_from: None,
            senders: Senders::default(),
            punch: None,
            nak: None,
            answers: 0,
            source_seq: None,
            source_claim: None,
            verify: None,
            checked: None,
            failure: None,
            holdback,
            counters: MirrorCounters::default(),
        }
    }

    /// The next sequence the mirror will write: the one after the last it holds. (While a
    /// resume check is pending, the record it compares comes first; see
    /// [`Mirror::pending_resume_check`].)
    pub fn next(&self) -> u64 {
        self.verify.map_or(self.next, |w| w + 1)
    }
    /// Counters.
    pub fn counters(&self) -> MirrorCounters {
        self.counters
    }
    /// The GEOMETRY received, once the handshake is done.
    pub fn geometry(&self) -> Option<&GeometryRepr> {
        self.geometry.as_ref()
    }
    /// True between a GEOMETRY that announces UDP delivery and the MULTICAST frame that
    /// completes the handshake: the only time a MULTICAST frame is acted on.
    pub fn awaits_multicast(&self) -> bool {
        self.state == State::AwaitMulticast
    }
    /// True once live data flows (over TCP or UDP).
    pub fn is_live(&self) -> bool {
        matches!(self.state, State::LiveTcp | State::LiveUdp)
    }
    /// True when live data comes over UDP.
    pub fn is_udp(&self) -> bool {
        self.state == State::LiveUdp
    }
    /// How far the source has sent, as far as it is believed: the highest sequence its
    /// heartbeats announced, except that a claim past what the source has shown (records
    /// it sent, held or written, and GAPs) is cut back to that when a NAK goes unanswered
    /// [`NAK_UNANSWERED_LIMIT`] times in a row (the source does not have what it was asked
    /// for), and claims that come while that NAK's repeats are backed off count only as far
    /// as that too. So a heartbeat far ahead (a forged or confused one) does not leave a
    /// lag of 2^40 in a driver's progress line for the rest of the connection, also not
    /// after the back-off ends; later heartbeats raise it as before. In TCP mode, which
    /// sends no NAKs, it is the highest heartbeat. Over multicast with
    /// [`MirrorConfig::check_udp_source`], only heartbeats of the confirmed sender count
    /// (those it sent on trial once it is confirmed): another's, far ahead, moved it until
    /// the NAK it caused went unanswered.
    pub fn source_seq(&self) -> Option<u64> {
        self.source_seq
    }
    /// The highest sequence a heartbeat announced on this connection, believed or not
    /// (see [`Mirror::source_seq`]; over multicast, of the confirmed sender only).
    pub fn source_claim(&self) -> Option<u64> {
        self.source_claim
    }
    /// The last sequence the source has shown it holds: the last the mirror has (or skipped
    /// at a GAP), or the end of the highest frame it holds back.
    pub(super) fn shown(&self) -> u64 {
        let held = self
            .holdback
            .last_at_or_below(u64::MAX)
            .map_or(0, |e| e.end().saturating_sub(1));
        self.next().saturating_sub(1).max(held)
    }
    /// The outstanding NAK range, if any.
    pub fn outstanding_nak(&self) -> Option<(u64, u64)> {
        self.nak.map(|n| (n.from, n.to))
    }
    /// The outstanding NAK range if its repeats are backed off (the source left
    /// [`NAK_UNANSWERED_LIMIT`] sends in a row of it unanswered, and none has come since),
    /// with how long the next repeat waits after the last send.
    pub fn nak_backed_off(&self) -> Option<((u64, u64), Duration)> {
        let n = self.nak?;
        self.backs_off(&n)
            .then(|| ((n.from, n.to), self.repeat_after(&n)))
    }
    /// The HELLO this mirror sends.
    pub fn hello(&self) -> HelloRepr {
        self.hello
    }
    /// The sequence whose copy from the source a resume still waits for, to compare it with
    /// the mirror's own (see the module docs).
    pub fn pending_resume_check(&self) -> Option<u64> {
        self.verify
    }
    /// How the resume check of this connection ended, once it has: the sequence compared
    /// and whether the source's copy was the mirror's ([`Holds::Same`]), another record
    /// (`Different`: the ring was recreated) or could not be compared (`Unknown`).
    pub fn resume_check(&self) -> Option<(u64, Holds)> {
        self.checked
    }
    /// The error that closed the mirror, if one did. [`Mirror::handle_tcp_frame`] returns
    /// its errors, but [`Mirror::handle_datagram`] only reports whether it took the
    /// datagram (a ring that a resume check found restarted may fail to be recreated
    /// there), so a driver looks here when it returns false.
    pub fn failure(&self) -> Option<MirrorError> {
        self.failure
    }
    /// The only address datagrams are accepted from, with
    /// [`MirrorConfig::check_udp_source`]: over UDP unicast the source's UDP port at the TCP
    /// peer's IP (where the PUNCHes go), or the address the session's first datagram came
    /// from if that is the same port at another IP; over multicast the sender confirmed (see
    /// [`Mirror::sender_on_trial`]). `None` when datagrams are not checked by address (TCP,
    /// the check off) or no multicast sender is confirmed yet.
    pub fn udp_source(&self) -> Option<PeerAddr> {
        self.udp_from.filter(|_| self.cfg.check_udp_source)
    }

    /// Starts a new connection to the same source (after EOF, an error or a restart): the
    /// next `poll_transmit` sends a fresh HELLO for `start` (usually [`Start::Resume`]).
    /// Counters are kept; held data and the outstanding NAK are dropped.
    pub fn reconnect<S: RecordSink + ?Sized>(&mut self, start: Start, sink: &S) {
        let fresh = Mirror::new(
            MirrorConfig { start, ..self.cfg },
            self.source,
            sink,
            HoldBack::new(&mut [], &mut []),
        );
        self.cfg.start = start;
        self.state = State::Hello;
        self.hello = fresh.hello;
        self.geometry = None;
        self.udp_from = None;
        self.reset_senders();
        self.punch = None;
        self.nak = None;
        self.source_seq = None;
        self.source_claim = None;
        self.verify = None;
        self.checked = None;
        self.failure = None;
        self.holdback.clear();
    }

    fn fail(&mut self, e: MirrorError) -> MirrorError {
        self.state = State::Closed;
        self.failure = Some(e);
        e
    }

    /// Handles one complete TCP frame (cut from the stream with [`super::StreamBuf`]).
    /// An error is fatal: the caller closes the connection (and may reconnect with
    /// [`Start::Resume`]).
    pub fn handle_tcp_frame<S: RecordSink + ?Sized>(
        &mut self,
        now: Instant,
        bytes: &[u8],
        sink: &mut S,
    ) -> Result<(), MirrorError> {
        let r = self.tcp_frame(now, bytes, sink);
        r.map_err(|e| self.fail(e))
    }

    fn tcp_frame<S: RecordSink + ?Sized>(
        &mut self,
        now: Instant,
        bytes: &[u8],
        sink: &mut S,
    ) -> Result<(), MirrorError> {
        if self.state == State::Closed {
            return Err(MirrorError::Closed);
        }
        let frame = Frame::new_checked(bytes).map_err(MirrorError::Protocol)?;
        let kind = frame
            .kind()
            .ok_or(MirrorError::Protocol(WireError::UnknownKind {
                kind: frame.kind_byte(),
            }))?;
        self.counters.frames += 1;
        let p = MirrorError::Protocol;
        match (self.state, kind) {
            (State::AwaitGeometry, Kind::Geometry) => {
                let g = GeometryRepr::parse(&frame).map_err(p)?;
                // Its `seq` becomes the next sequence expected (or the one to compare).
                below_limit(Kind::Geometry, g.seq).map_err(p)?;
                self.geometry = Some(g);
                if g.flags & GEOMETRY_UDP_FOLLOWS != 0 {
                    self.state = State::AwaitMulticast;
                    Ok(())
                } else {
                    self.finish_handshake(now, None, sink)
                }
            }
            (State::AwaitMulticast, Kind::Multicast) => {
                let m = MulticastRepr::parse(&frame).map_err(p)?;
                self.finish_handshake(now, Some(m), sink)
            }
            (State::LiveTcp | State::LiveUdp, Kind::Data) => {
                let d = DataRepr::parse(&frame, self.fmt).map_err(p)?;
                below_limit(Kind::Data, d.end() - 1).map_err(p)?;
                if self.state == State::LiveTcp {
                    self.apply_tcp(d, sink)
                } else {
                    self.note_answer();
                    let claim = self.sender_answer(&d);
                    self.counters.records_retransmitted += self.apply(now, d, sink)?;
                    // The sender just confirmed: its claims held on trial count now.
                    if let Some(s) = claim {
                        self.on_source_seq(now, s);
                    }
                    Ok(())
                }
            }
            (State::LiveTcp | State::LiveUdp, Kind::Gap) => {
                let g = GapRepr::parse(&frame).map_err(p)?;
                below_limit(Kind::Gap, g.seq).map_err(p)?;
                if self.verify.is_some_and(|w| g.seq > w) {
                    // The source no longer holds the record to compare (lapped or lost).
                    self.resume_unchecked();
                }
                if g.seq > self.next {
                    self.counters.gaps += 1;
                    // Saturating: a hostile source can jump by nearly 2^64 more than once.
                    self.counters.records_skipped = self
                        .counters
                        .records_skipped
                        .saturating_add(g.seq - self.next);
                    self.next = g.seq;
                }
                if self.state == State::LiveUdp {
                    self.note_answer();
                    self.sender_gap(g.seq);
                    self.after_progress(now, sink)?;
                }
                Ok(())
            }
            (State::LiveTcp, Kind::Heartbeat) => {
                let h = HeartbeatRepr::parse(&frame).map_err(p)?;
                below_limit(Kind::Heartbeat, h.seq).map_err(p)?;
                // Spec §21.3: recorded only. A heartbeat below what was already received is
                // no restart: the source collects records by their slot words but announces
                // `write_seq`, which a producer that stalled or died mid-batch left behind.
                // A restarted source shows itself by DATA below `next`, or by a RESET
                // when the mirror reconnects.
                self.note_source_seq(h.seq);
                Ok(())
            }
            (State::LiveUdp, Kind::Heartbeat) => {
                let h = HeartbeatRepr::parse(&frame).map_err(p)?;
                below_limit(Kind::Heartbeat, h.seq).map_err(p)?;
                self.on_source_seq(now, h.seq);
                Ok(())
            }
            (State::LiveUdp, Kind::Multicast) => Ok(()),
            (state, kind) => Err(MirrorError::UnexpectedFrame {
                kind,
                seq: frame.seq(),
                expected: match state {
                    State::Hello => "nothing before HELLO is sent",
                    State::AwaitGeometry => "GEOMETRY",
                    State::AwaitMulticast => "MULTICAST",
                    State::LiveTcp | State::LiveUdp | State::Closed => "DATA, GAP or HEARTBEAT",
                },
            }),
        }
    }

    /// Handles the end of the TCP stream (the source closed the connection). `partial` is
    /// what arrived of a frame not yet whole ([`StreamBuf::buffered`](super::StreamBuf::buffered),
    /// after every whole frame went to [`Mirror::handle_tcp_frame`]). Empty, the stream
    /// ended at a frame boundary: a clean end (spec §21.3), `Ok`. Otherwise the frame was
    /// cut short: [`MirrorError::TruncatedFrame`], and the mirror is closed; what the frames
    /// before it wrote stays. Either way the connection is over
    /// ([`Mirror::reconnect`] starts another).
    pub fn handle_tcp_eof(&mut self, partial: &[u8]) -> Result<(), MirrorError> {
        self.handle_tcp_end(partial, StreamEnd::Closed)
    }

    /// Handles a TCP connection that was reset (by the source: ECONNRESET, or EPIPE on a
    /// write after it) rather than closed, as [`Mirror::handle_tcp_eof`] does a close:
    /// `Ok` between frames (whether that is a clean end is the driver's to say), and a
    /// [`MirrorError::TruncatedFrame`] ([`StreamEnd::Reset`]) when part of a frame had
    /// arrived.
    pub fn handle_tcp_reset(&mut self, partial: &[u8]) -> Result<(), MirrorError> {
        self.handle_tcp_end(partial, StreamEnd::Reset)
    }

    /// Handles a TCP connection the driver gives up while it is still open (a write that
    /// timed out, a read that failed otherwise than by a reset, a wait on its socket that
    /// failed), as [`Mirror::handle_tcp_reset`] does
    /// a reset: `Ok` between frames (the driver says how the connection ends), and a
    /// [`MirrorError::TruncatedFrame`] ([`StreamEnd::GivenUp`]) when part of a frame had
    /// arrived.
    pub fn handle_tcp_given_up(&mut self, partial: &[u8]) -> Result<(), MirrorError> {
        self.handle_tcp_end(partial, StreamEnd::GivenUp)
    }

    fn handle_tcp_end(&mut self, partial: &[u8], end: StreamEnd) -> Result<(), MirrorError> {
        if partial.is_empty() {
            return Ok(());
        }
        // The header's fields as far as they arrived (`len` before `seq`, both before the
        // header ends).
        use crate::wire::field;
        let len = partial
            .get(field::LEN..field::SEQ)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes);
        let seq = partial
            .get(field::SEQ..field::PAYLOAD)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes);
        let e = MirrorError::TruncatedFrame {
            end,
            kind: Kind::from_u8(partial[field::KIND]),
            got: partial.len(),
            expected: len.and_then(|l| crate::wire::total_len(l).ok()),
            seq,
            next: self.next(),
        };
        Err(self.fail(e))
    }

    /// The adopt-or-recreate decision of spec §21.1.
    fn finish_handshake<S: RecordSink + ?Sized>(
        &mut self,
        now: Instant,
        m: Option<MulticastRepr>,
        sink: &mut S,
    ) -> Result<(), MirrorError> {
        let g = self.geometry.ok_or(MirrorError::Closed)?;
        // Why the held ring is not kept, if there is one.
        let replace = sink.existing().map(|(have, w)| {
            if self.cfg.start != Start::Resume {
                Err(Replace::FreshStart(self.cfg.start))
            } else if g.flags & GEOMETRY_RESET != 0 {
                Err(Replace::Reset { source_next: g.seq })
            } else if !g.matches(&have) {
                Err(Replace::Layout)
            } else if !have.flags.has(Flags::SPARSE) {
                // Beyond spec §21.1 (no flags compared): the mirror leaves holes, and the
                // readers of a ring without SPARSE stall at a hole for a lap.
                Err(Replace::NotSparse)
            } else {
                Ok(w)
            }
        });
        let adopt = match replace {
            Some(Ok(w)) => Some(w),
            Some(Err(why)) => {
                sink.replacing(why);
                None
            }
            None => None,
        };
        let mg = g.mirror_geometry();
        self.verify = None;
        self.next = match adopt {
            // The HELLO asked for `w` to check it (module docs), and the source offers it
            // (a conforming source never offers less than was asked for).
            Some(w) if w >= 1 && self.hello.seq == w && g.seq <= w => {
                self.verify = Some(w);
                w
            }
            Some(w) => {
                if w >= 1 && self.hello.seq == w {
                    // GEOMETRY `seq` past `w`: the source no longer holds it.
                    self.counters.resumes_unverified += 1;
                    self.checked = Some((w, Holds::Unknown));
                }
                w.saturating_add(1)
            }
            None => {
                if g.flags & GEOMETRY_RESET != 0 && self.cfg.start == Start::Resume {
                    // The source's ring restarted below what we had. (For a sequence asked
                    // for explicitly, RESET only says it is past the source's end.)
                    self.counters.restarts += 1;
                }
                sink.recreate(&mg).map_err(MirrorError::Sink)?;
                g.seq.max(1)
            }
        };
        self.fmt = RecordFormat::of(&mg);
        self.max_blob = mg.arena_size;
        self.holdback.clear();
        match m {
            None => self.state = State::LiveTcp,
            Some(m) => {
                self.state = State::LiveUdp;
                self.session = m.session;
                if m.is_unicast() {
                    let to = PeerAddr::new(self.source.ip, m.port);
                    self.udp_from = Some(to);
                    self.punch = Some(Punch {
                        to,
                        token: m.token,
                        heard: false,
                        last_heard: now,
                        due: now,
                    });
                } else {
                    // Multicast: a sender is confirmed by its first DATA (the `sender`
                    // module; `MirrorConfig::check_udp_source`).
                    self.udp_from = None;
                    self.reset_senders();
                }
                // UDP carries only new records (§19.3): ask for the one to compare now.
                if let Some(w) = self.verify {
                    self.request(now, w, w);
                }
            }
        }
        Ok(())
    }

    /// Whether `from`, not [`Mirror::udp_source`], is accepted from now on: a datagram of
    /// this session from the source's UDP port at another IP, before any datagram was heard
    /// (see [`MirrorConfig::check_udp_source`]). Once one address was heard, it is the only
    /// one.
    fn adopt_udp_source(&mut self, from: PeerAddr) -> bool {
        let first = self.punch.as_ref().is_some_and(|p| !p.heard);
        let adopt = first && self.udp_from.is_some_and(|a| a.port == from.port);
        if adopt {
            self.udp_from = Some(from);
        }
        adopt
    }

    /// Handles one datagram from `from`. Returns false if it was dropped as garbage (a unicast
    /// one with the session's byte from another address than [`Mirror::udp_source`] is also
    /// counted in [`MirrorCounters::udp_wrong_source`]). Prefer [`Mirror::handle_datagrams`],
    /// which bounds the work of one step.
    ///
    /// True is what a driver may take as a sign that the source is alive (the std mirror's
    /// silence timeout does). With [`MirrorConfig::check_udp_source`] over multicast that is:
    /// once a sender is confirmed, its DATA and heartbeats only; before, the heartbeats of
    /// the sender on trial and of untried senders (an idle source sends no DATA, so it is
    /// never tried: its heartbeats are all that shows it alive); never a refused sender's
    /// datagrams, nor DATA set aside. Over unicast: datagrams from [`Mirror::udp_source`].
    pub fn handle_datagram<S: RecordSink + ?Sized>(
        &mut self,
        now: Instant,
        from: PeerAddr,
        bytes: &[u8],
        sink: &mut S,
    ) -> bool {
        self.counters.datagrams += 1;
        let ok =
            self.state == State::LiveUdp && bytes.len() >= HEADER_LEN && bytes[1] == self.session;
        if !ok {
            self.counters.garbage_dropped += 1;
            return false;
        }
        if self.udp_source().is_some_and(|a| a != from) && !self.adopt_udp_source(from) {
            return self.wrong_source();
        }
        if let Some(p) = &mut self.punch {
            p.heard = true;
            p.last_heard = now;
        }
        let Ok(frame) = Frame::new_checked(bytes) else {
            self.counters.garbage_dropped += 1;
            return false;
        };
        match frame.kind() {
            Some(Kind::Data) => match DataRepr::parse(&frame, self.fmt)
                .and_then(|d| below_limit(Kind::Data, d.end() - 1).map(|()| d))
            {
                Ok(d) => match self.sort_data(now, from, &d) {
                    Verdict::Take => match self.apply(now, d, sink) {
                        Ok(_) => true,
                        Err(e) => {
                            self.fail(e);
                            false
                        }
                    },
                    Verdict::Wrong => self.wrong_source(),
                    Verdict::SetAside | Verdict::Unconfirmed => {
                        self.counters.udp_unconfirmed += 1;
                        false
                    }
                },
                Err(_) => {
                    self.counters.garbage_dropped += 1;
                    false
                }
            },
            Some(Kind::Heartbeat) => match HeartbeatRepr::parse(&frame)
                .and_then(|h| below_limit(Kind::Heartbeat, h.seq).map(|()| h))
            {
                Ok(h) => match self.sort_heartbeat(from, h.seq) {
                    Verdict::Wrong => self.wrong_source(),
                    Verdict::Take => {
                        self.on_source_seq(now, h.seq);
                        true
                    }
                    // Not confirmed: the claim counts in no figure (the `sender` module).
                    Verdict::Unconfirmed => {
                        self.ask_through(now, h.seq);
                        true
                    }
                    Verdict::SetAside => true,
                },
                Err(_) => {
                    self.counters.garbage_dropped += 1;
                    false
                }
            },
            _ => {
                self.counters.garbage_dropped += 1;
                false
            }
        }
    }

    /// Counts a datagram of the session dropped for its sender; false (not taken).
    fn wrong_source(&mut self) -> bool {
        self.counters.garbage_dropped += 1;
        self.counters.udp_wrong_source += 1;
        false
    }

    /// Handles at most [`DATAGRAMS_PER_STEP`] datagrams from `datagrams`; returns how many
    /// were taken (the rest stay in the iterator for the next step).
    pub fn handle_datagrams<'d, S, I>(
        &mut self,
        now: Instant,
        datagrams: &mut I,
        sink: &mut S,
    ) -> usize
    where
        S: RecordSink + ?Sized,
        I: Iterator<Item = (PeerAddr, &'d [u8])>,
    {
        let mut n = 0;
        while n < DATAGRAMS_PER_STEP {
            let Some((from, bytes)) = datagrams.next() else {
                break;
            };
            self.handle_datagram(now, from, bytes, sink);
            n += 1;
        }
        n
    }

    /// The PUNCH interval: the configured one, at least [`MIN_PUNCH_INTERVAL`].
    fn punch_interval(&self) -> Duration {
        self.cfg.punch_interval.max(MIN_PUNCH_INTERVAL)
    }

    /// The PUNCH keep-alive: the configured one, at least [`MIN_PUNCH_INTERVAL`].
    fn punch_keepalive(&self) -> Duration {
        self.cfg.punch_keepalive.max(MIN_PUNCH_INTERVAL)
    }

    /// When `poll_transmit` must be called next: a NAK repeat or a PUNCH.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Hello => Some(Instant::ZERO),
            State::LiveUdp => {
                let nak = self.nak_deadline();
                let punch = self.punch.map(|p| {
                    if p.heard {
                        p.due.min(p.last_heard + self.punch_interval())
                    } else {
                        p.due
                    }
                });
                earliest(earliest(nak, punch), self.sender_deadline())
            }
            _ => None,
        }
    }

    /// Writes the next outgoing frame into `buf` (at least 32 bytes): HELLO first, then
    /// NAKs (on TCP) and PUNCHes (on UDP). Call until `None` after every `handle_*` call and
    /// at [`Mirror::poll_timeout`].
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let tcp = |len| {
            Some(Transmit {
                channel: Channel::Tcp,
                len,
            })
        };
        match self.state {
            State::Hello => {
                let len = self.hello.emit(buf).ok()?;
                self.state = State::AwaitGeometry;
                return tcp(len);
            }
            State::LiveUdp => {}
            _ => return None,
        }
        if let Some(k) = self.due_nak(now) {
            let len = k.emit(buf).ok()?;
            self.counters.naks_sent += 1;
            return tcp(len);
        }
        // The record of a multicast sender on trial, asked for apart from the holes.
        if let Some(k) = self.due_sender_nak(now) {
            let len = k.emit(buf).ok()?;
            self.counters.naks_sent += 1;
            return tcp(len);
        }
        // Beyond the reference: when the source falls silent for a punch interval (its
        // datagrams carry a heartbeat every millisecond), the path or the registration was
        // lost — e.g. "heard" came from datagrams still in flight for an earlier connection —
        // so punch at the fast rate again instead of waiting for the 5 s keep-alive.
        let (interval, keepalive) = (self.punch_interval(), self.punch_keepalive());
        if let Some(p) = &mut self.punch
            && p.heard
            && now >= p.last_heard + interval
        {
            p.heard = false;
            p.due = p.due.min(now);
        }
        if let Some(p) = &mut self.punch
            && now >= p.due
        {
            let len = PunchRepr {
                session: self.session,
                token: p.token,
            }
            .emit(buf)
            .ok()?;
            p.due = now + if p.heard { keepalive } else { interval };
            return Some(Transmit {
                channel: Channel::Udp(p.to),
                len,
            });
        }
        None
    }
}

/// Refuses a sequence at or past [`SEQ_LIMIT`] (the last record of DATA, the `seq` of
/// GEOMETRY, GAP and HEARTBEAT): no ring holds one, and a mirror that wrote or published it would leave a
/// ring producers refuse as corrupt.
fn below_limit(kind: Kind, seq: u64) -> Result<(), WireError> {
    if seq < SEQ_LIMIT {
        Ok(())
    } else {
        Err(WireError::SeqLimit { kind, seq })
    }
}
