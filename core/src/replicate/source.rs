//! One source session per mirror TCP connection (spec §19.1, §19.2, §20.2, §20.4).
//!
//! After HELLO the session answers with GEOMETRY (and MULTICAST), then either streams
//! DATA/GAP/HEARTBEAT over TCP, or — when live data goes over UDP — answers NAKs from the
//! ring. Live UDP data is the [`super::UdpSender`]'s job.
//!
//! NAKs are read only from this session's own TCP stream, so a NAK is always answered to the
//! address the session belongs to; PUNCHes are checked against the TCP peer's IP by the
//! UDP sender.
//!
//! Beyond the reference, a NAK cannot make the source send more than the mirror could have
//! asked for: its range is cut to [`MAX_NAK_RECORDS`] records (the cap the spec puts on the
//! mirror's requests, §21.4 and §22), and what this connection is answering, has queued, or
//! has answered in its latest run of contiguous answers is cut from it. A record sent on the
//! session's TCP stream reaches the mirror, so a NAK for it again only repeats one sent
//! before the answer came (a mirror repeats its NAK every 20 ms while a long answer is on its
//! way). A mirror's NAKs start at its next missing record, which only grows, so the latest
//! run covers every repeat a mirror makes; a peer whose NAKs go back to records answered
//! before that run gets them again, up to [`MAX_NAK_RECORDS`] per NAK and at the pace it
//! reads its own TCP stream (the `source` fuzz target checks once-only answers for NAK
//! starts that never go back; `SOURCE_FUZZ_STRICT_ONCE=1` shows the rest). Without this,
//! 24 bytes of NAK(1, u64::MAX) were answered with the whole ring, and each repeat of it
//! with the whole ring again.

use core::fmt;

use heapless::Deque;

use super::PeerAddr;
use super::collect::{Stop, collect};
use super::mirror::MAX_NAK_RECORDS;
use super::pacing::{Pacer, Pacing};
use super::ring_io::RecordSource;
use super::time::{Duration, Instant, earliest};
use crate::layout::oldest_retained;
use crate::wire::{
    Frame, GEOMETRY_RESET, GEOMETRY_UDP_FOLLOWS, GapRepr, GeometryRepr, HEADER_LEN,
    HELLO_CAN_UNICAST, HELLO_OLDEST, HELLO_PREFER_UNICAST, HeaderRepr, HeartbeatRepr, HelloRepr,
    Kind, MulticastRepr, NakRepr, WireError, frame_total,
};

/// A UDP transport the source offers (spec §18.3 fields).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct UdpOffer {
    /// Multicast group (unused for unicast).
    pub group: [u8; 4],
    /// Group port, or the source's unicast port.
    pub port: u16,
    /// Datagram budget announced.
    pub mtu: u16,
    /// Multicast TTL (0 for unicast).
    pub ttl: u8,
}

/// Source session settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceConfig {
    /// Records per DATA frame (1..=65535, default 256).
    pub batch: u16,
    /// TCP frame byte budget including the header (default 1 MiB). A frame takes records
    /// while it is below the budget, and a record larger than the budget goes alone, so a
    /// budget at or below the 16-byte header is taken as one record per frame.
    pub tcp_budget: usize,
    /// Frame linger on the TCP stream.
    pub pacing: Pacing,
    /// Idle time before a TCP HEARTBEAT (default 200 ms; at least
    /// [`MIN_HEARTBEAT`](super::MIN_HEARTBEAT)).
    pub heartbeat: Duration,
    /// Unicast delivery, if the server has it.
    pub unicast: Option<UdpOffer>,
    /// Multicast delivery, if the server has it.
    pub multicast: Option<UdpOffer>,
    /// The server's session byte.
    pub session: u8,
}

impl Default for SourceConfig {
    fn default() -> SourceConfig {
        SourceConfig {
            batch: 256,
            tcp_budget: 1 << 20,
            pacing: Pacing::default(),
            heartbeat: Duration::from_millis(200),
            unicast: None,
            multicast: None,
            session: 0,
        }
    }
}

/// How this session's live data travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Transport {
    /// DATA over this TCP connection.
    Tcp,
    /// UDP multicast; this connection carries NAKs and repairs.
    Multicast,
    /// UDP unicast after a PUNCH carrying `token`.
    Unicast {
        /// The token registered for this connection.
        token: u32,
    },
}

/// Why the session must be closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum SourceError {
    /// A frame could not be decoded.
    Protocol(WireError),
    /// A valid frame the session does not accept in its state.
    UnexpectedFrame {
        /// Its kind.
        kind: Kind,
        /// Its `seq` field.
        seq: u64,
        /// The frames the session takes in that state (e.g. "HELLO").
        expected: &'static str,
    },
    /// Input after the session was closed.
    Closed,
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceError::Protocol(e) => write!(f, "protocol error: {e}"),
            SourceError::UnexpectedFrame {
                kind,
                seq,
                expected,
            } => write!(
                f,
                "unexpected {} frame (seq {seq}): expected {expected}",
                kind.name()
            ),
            SourceError::Closed => f.write_str("session closed"),
        }
    }
}

// No `source`: the text above already includes the wrapped error's.
impl core::error::Error for SourceError {}

/// Allocates unicast tokens (implemented by the server's UDP sender).
pub trait TokenRegistry {
    /// Registers a unicast mirror whose TCP peer is `tcp_peer`; `None` if no room.
    fn register(&mut self, tcp_peer: PeerAddr) -> Option<u32>;
}

/// What a session has sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceCounters {
    /// DATA frames.
    pub data_frames: u64,
    /// Records in them.
    pub records: u64,
    /// GAP frames.
    pub gaps: u64,
    /// HEARTBEAT frames.
    pub heartbeats: u64,
    /// NAKs received.
    pub naks: u64,
    /// Records sent in answer to NAKs.
    pub records_retransmitted: u64,
    /// NAKs dropped whole: they asked for nothing (`from > to`), or everything they asked
    /// for was already answered on this connection, is being answered, or is asked for by
    /// a NAK already queued.
    pub naks_redundant: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    AwaitHello,
    Handshake,
    Live,
    Closed,
}

/// Most NAKs queued while earlier ones are answered.
const NAK_QUEUE: usize = 16;
/// Longest frame the source reads (HELLO).
const MAX_IN: usize = 64;

/// One source session.
#[derive(Debug)]
pub struct SourceSession {
    cfg: SourceConfig,
    peer: PeerAddr,
    state: State,
    inbuf: [u8; MAX_IN],
    inlen: usize,
    /// GEOMETRY and MULTICAST still to send (taken as they go out).
    geometry: Option<GeometryRepr>,
    multicast: Option<MulticastRepr>,
    transport: Transport,
    cursor: u64,
    pacer: Pacer,
    last_beat: Instant,
    gap: Option<u64>,
    naks: Deque<NakRepr, NAK_QUEUE>,
    /// The NAK range being answered: (next sequence, last sequence).
    repair: Option<(u64, u64)>,
    /// Sequences `a..b` this connection has answered NAKs for, with DATA or with a GAP
    /// past them: the latest run of contiguous answers. One span is enough for a mirror,
    /// whose NAKs start at its next missing record, a sequence that only grows.
    answered: Option<(u64, u64)>,
    counters: SourceCounters,
}

impl SourceSession {
    /// A session for a connection from `peer`, accepted at `now`.
    pub fn new(cfg: SourceConfig, peer: PeerAddr, now: Instant) -> SourceSession {
        let batch = cfg.batch.max(1);
        let tcp_budget = cfg.tcp_budget.max(HEADER_LEN + 1);
        SourceSession {
            cfg: SourceConfig {
                batch,
                tcp_budget,
                ..cfg
            },
            peer,
            state: State::AwaitHello,
            inbuf: [0; MAX_IN],
            inlen: 0,
            geometry: None,
            multicast: None,
            transport: Transport::Tcp,
            cursor: 1,
            pacer: Pacer::new(cfg.pacing),
            last_beat: now,
            gap: None,
            naks: Deque::new(),
            repair: None,
            answered: None,
            counters: SourceCounters::default(),
        }
    }

    /// The chosen transport (meaningful after HELLO).
    pub fn transport(&self) -> Transport {
        self.transport
    }
    /// The next sequence this session will send on TCP.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }
    /// The TCP peer.
    pub fn peer(&self) -> PeerAddr {
        self.peer
    }
    /// Counters.
    pub fn counters(&self) -> SourceCounters {
        self.counters
    }
    /// The unicast token to unregister when the connection ends.
    pub fn token(&self) -> Option<u32> {
        match self.transport {
            Transport::Unicast { token } => Some(token),
            _ => None,
        }
    }

    /// Feeds bytes read from the TCP connection. On error the caller closes the connection
    /// (and unregisters [`SourceSession::token`]). Call `poll_transmit` afterwards.
    pub fn handle_stream<'t, R: RecordSource + ?Sized>(
        &mut self,
        now: Instant,
        mut bytes: &[u8],
        ring: &R,
        tokens: Option<&mut (dyn TokenRegistry + 't)>,
    ) -> Result<(), SourceError> {
        let mut tokens = tokens;
        while !bytes.is_empty() {
            if self.state == State::Closed {
                return Err(SourceError::Closed);
            }
            if self.tcp_after_hello() {
                // A TCP-mode source never reads after HELLO (spec §19.3); drop the bytes.
                return Ok(());
            }
            let take = bytes.len().min(MAX_IN - self.inlen);
            self.inbuf[self.inlen..self.inlen + take].copy_from_slice(&bytes[..take]);
            self.inlen += take;
            bytes = &bytes[take..];
            while let Some(total) = frame_total(&self.inbuf[..self.inlen]) {
                let too_long = |len| WireError::FrameTooLarge {
                    len,
                    max: MAX_IN - HEADER_LEN,
                };
                let total = match total {
                    Ok(t) if t <= MAX_IN => t,
                    // Too long for the buffer, or for a usize (32-bit targets).
                    r => {
                        self.close();
                        return Err(SourceError::Protocol(match r {
                            Ok(t) => too_long((t - HEADER_LEN) as u32),
                            Err(WireError::FrameTooLarge { len, .. }) => too_long(len),
                            Err(e) => e,
                        }));
                    }
                };
                if total > self.inlen {
                    break;
                }
                let mut frame = [0u8; MAX_IN];
                frame[..total].copy_from_slice(&self.inbuf[..total]);
                self.inbuf.copy_within(total..self.inlen, 0);
                self.inlen -= total;
                let r = self.handle_frame(now, &frame[..total], ring, tokens.as_deref_mut());
                if r.is_err() {
                    self.close();
                    return r;
                }
                if self.tcp_after_hello() {
                    // Whatever came after the HELLO in this read is dropped too, as it is
                    // once GEOMETRY has gone out: the outcome does not hang on segmentation.
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// A TCP-mode session past its HELLO, which reads nothing more (spec §19.3).
    fn tcp_after_hello(&self) -> bool {
        matches!(self.state, State::Handshake | State::Live) && self.transport == Transport::Tcp
    }

    /// Closes the session after a protocol error: it transmits nothing more and drops the
    /// NAK ranges it had queued, which no one will read (a NAK that arrived in the same read
    /// as the bad frame included), so [`SourceSession::pending_naks`] is 0.
    fn close(&mut self) {
        self.state = State::Closed;
        self.naks.clear();
        self.repair = None;
    }

    fn handle_frame<'t, R: RecordSource + ?Sized>(
        &mut self,
        now: Instant,
        bytes: &[u8],
        ring: &R,
        tokens: Option<&mut (dyn TokenRegistry + 't)>,
    ) -> Result<(), SourceError> {
        let frame = Frame::new_checked(bytes).map_err(SourceError::Protocol)?;
        let kind = frame
            .kind()
            .ok_or(SourceError::Protocol(WireError::UnknownKind {
                kind: frame.kind_byte(),
            }))?;
        match (self.state, kind) {
            (State::AwaitHello, Kind::Hello) => {
                let h = HelloRepr::parse(&frame).map_err(SourceError::Protocol)?;
                self.on_hello(now, h, ring, tokens)
            }
            (State::Handshake | State::Live, Kind::Nak) if self.transport != Transport::Tcp => {
                let n = NakRepr::parse(&frame).map_err(SourceError::Protocol)?;
                self.counters.naks += 1;
                let Some(n) = self.trim_nak(n) else {
                    self.counters.naks_redundant += 1;
                    return Ok(());
                };
                if self.naks.iter().any(|q| q.from <= n.from && n.to <= q.to) {
                    self.counters.naks_redundant += 1;
                    return Ok(());
                }
                if self.naks.is_full() {
                    // A ringwire mirror asks for each new hole as it sees it, in rising
                    // order: one past the last queued range joins it (the records between
                    // go out too), so no hole waits for the mirror's repeat. Otherwise the
                    // oldest queued NAK is dropped: the mirror repeats its NAKs.
                    if let Some(last) = self.naks.back_mut()
                        && n.from > last.from
                        && n.to - last.from < MAX_NAK_RECORDS
                    {
                        last.to = last.to.max(n.to);
                        return Ok(());
                    }
                    self.naks.pop_front();
                }
                let _ = self.naks.push_back(n);
                Ok(())
            }
            (state, kind) => Err(SourceError::UnexpectedFrame {
                kind,
                seq: frame.seq(),
                expected: match state {
                    State::AwaitHello => "HELLO",
                    // A TCP-mode session reads nothing after HELLO: only NAKs get here.
                    State::Handshake | State::Live | State::Closed => "NAK",
                },
            }),
        }
    }

    fn on_hello<'t, R: RecordSource + ?Sized>(
        &mut self,
        now: Instant,
        h: HelloRepr,
        ring: &R,
        tokens: Option<&mut (dyn TokenRegistry + 't)>,
    ) -> Result<(), SourceError> {
        let geo = ring.geometry();
        let w = ring.write_seq();
        let oldest = oldest_retained(w, geo.capacity);
        let (cursor, mut flags) = match h.seq {
            0 => (w.saturating_add(1), 0),
            HELLO_OLDEST => (oldest, 0),
            s if s > w.saturating_add(1) => (w.saturating_add(1), GEOMETRY_RESET),
            // Beyond the reference: the record asked for and the one before it are both
            // holes of this (sparse) ring, which never held them, while the mirror holds
            // the one before (ringfire's mirror asks for its `write_seq + 1`) or both
            // (ringwire's asks for its last record, to check it): the mirror followed
            // another ring. A mirror ring served onward (a hub) that recreated its ring for
            // a restarted source holds nothing below where it resumed, and a leaf behind it
            // would otherwise keep the old source's records and append the new one's after
            // them (its resume check finds a GAP where it looks for its last record).
            // RESET makes it recreate its ring. A leaf that followed this ring through a
            // hole is not told to: a slot's sequence only grows, so a record this ring held
            // is never a hole again, and the record a leaf asks for after a hole it passed is
            // one this ring holds (which ringwire's mirror then checks). Only a leaf moved
            // to another hub that missed those records is told to start again, and loses
            // its history, not its consistency.
            s if s > oldest && ring.hole_end(s - 1).is_some() && ring.hole_end(s).is_some() => {
                (s, GEOMETRY_RESET)
            }
            s => (s.max(oldest), 0),
        };
        self.cursor = cursor;
        let wants_unicast = h.flags & HELLO_CAN_UNICAST != 0
            && (h.flags & HELLO_PREFER_UNICAST != 0 || self.cfg.multicast.is_none());
        let token = match (self.cfg.unicast, tokens) {
            (Some(_), Some(t)) if wants_unicast => t.register(self.peer),
            _ => None,
        };
        let session = self.cfg.session;
        self.multicast = match (token, self.cfg.unicast, self.cfg.multicast) {
            (Some(token), Some(u), _) => {
                self.transport = Transport::Unicast { token };
                Some(MulticastRepr {
                    group: [0; 4],
                    port: u.port,
                    mtu: u.mtu,
                    ttl: 0,
                    session,
                    token,
                })
            }
            (_, _, Some(m)) => {
                self.transport = Transport::Multicast;
                Some(MulticastRepr {
                    group: m.group,
                    port: m.port,
                    mtu: m.mtu,
                    ttl: m.ttl,
                    session,
                    token: 0,
                })
            }
            _ => None,
        };
        if self.multicast.is_some() {
            flags |= GEOMETRY_UDP_FOLLOWS;
        } else if h.seq != 0 && h.seq != HELLO_OLDEST && h.seq < cursor {
            // Beyond the reference: a TCP mirror resuming below the retention window is told
            // with a GAP that what it asked for is gone (a ringfire mirror skips to it too).
            // UDP mirrors learn it from the GAP that answers their NAK.
            self.gap = Some(cursor);
        }
        self.geometry =
            Some(GeometryRepr::from_source(&geo, flags, cursor).map_err(SourceError::Protocol)?);
        self.state = State::Handshake;
        self.last_beat = now;
        Ok(())
    }

    /// When `poll_transmit` must be called next even if nothing else happens: the linger
    /// deadline or the TCP heartbeat. Also call it after every `handle_stream` and whenever
    /// the ring's `write_seq` moves.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (self.state, self.transport) {
            (State::Handshake, _) => Some(self.last_beat),
            (State::Live, Transport::Tcp) => earliest(
                self.pacer.deadline(),
                Some(self.last_beat + self.cfg.heartbeat.max(super::MIN_HEARTBEAT)),
            ),
            _ => None,
        }
    }

    /// Writes the next TCP bytes into `buf` (at least 64 bytes; DATA frames are limited to
    /// its size) and returns how many; `None` when there is nothing to send now. Call until
    /// it returns `None`.
    #[must_use]
    pub fn poll_transmit<R: RecordSource + ?Sized>(
        &mut self,
        now: Instant,
        ring: &R,
        buf: &mut [u8],
    ) -> Option<usize> {
        match self.state {
            State::AwaitHello | State::Closed => None,
            State::Handshake => {
                // GEOMETRY and MULTICAST go out in one write when `buf` holds both (spec
                // §19.2); a 64-byte buffer gets GEOMETRY now and MULTICAST on the next call.
                let mut n = 0;
                if let Some(g) = self.geometry {
                    n = g.emit(buf).ok()?;
                    self.geometry = None;
                }
                if let Some(m) = self.multicast {
                    match m.emit(&mut buf[n..]) {
                        Ok(k) => {
                            n += k;
                            self.multicast = None;
                        }
                        Err(_) if n > 0 => return Some(n),
                        Err(_) => return None,
                    }
                }
                self.state = State::Live;
                Some(n)
            }
            State::Live if self.transport == Transport::Tcp => self.poll_tcp(now, ring, buf),
            State::Live => self.poll_repair(ring, buf),
        }
    }

    fn emit_gap(&mut self, seq: u64, buf: &mut [u8]) -> Option<usize> {
        self.counters.gaps += 1;
        GapRepr { seq }.emit(buf).ok()
    }

    fn emit_data(&mut self, count: u16, bytes: usize, buf: &mut [u8]) -> Option<usize> {
        HeaderRepr {
            kind: Kind::Data,
            flags: 0,
            count,
            len: bytes as u32,
            seq: self.cursor,
        }
        .emit(buf)
        .ok()?;
        self.cursor += u64::from(count);
        self.counters.data_frames += 1;
        self.counters.records += u64::from(count);
        Some(HEADER_LEN + bytes)
    }

    fn poll_tcp<R: RecordSource + ?Sized>(
        &mut self,
        now: Instant,
        ring: &R,
        buf: &mut [u8],
    ) -> Option<usize> {
        if let Some(g) = self.gap.take() {
            return self.emit_gap(g, buf);
        }
        let budget = self.cfg.tcp_budget.min(buf.len());
        let c = collect(ring, self.cursor, self.cfg.batch, budget, buf);
        if c.count > 0 {
            if !c.is_full() && now < self.pacer.send_at(now) {
                return None;
            }
            self.pacer.on_send(now);
            self.last_beat = now;
            return self.emit_data(c.count, c.bytes, buf);
        }
        self.pacer.idle();
        match c.stop {
            Stop::Lapped { seen } => {
                let r = oldest_retained(ring.write_seq().max(seen), ring.geometry().capacity);
                if r > self.cursor {
                    self.cursor = r;
                    return self.emit_gap(r, buf);
                }
            }
            Stop::Lost => {
                self.cursor += 1;
                let c = self.cursor;
                return self.emit_gap(c, buf);
            }
            // Beyond the reference, which waits at a hole (see `RingSource`): as for a lost
            // record, a GAP past it.
            Stop::Hole { next } => {
                self.cursor = next;
                return self.emit_gap(next, buf);
            }
            Stop::Pending | Stop::Full => {}
        }
        if now >= self.last_beat + self.cfg.heartbeat.max(super::MIN_HEARTBEAT) {
            self.last_beat = now;
            self.counters.heartbeats += 1;
            return HeartbeatRepr {
                flags: 0,
                seq: ring.write_seq(),
            }
            .emit(buf)
            .ok();
        }
        None
    }

    /// A NAK's range as this session answers it, `None` if nothing of it is left: at least
    /// 1, at most [`MAX_NAK_RECORDS`] records from its start, and without what this
    /// connection has answered already or is answering now (see the module docs).
    fn trim_nak(&self, n: NakRepr) -> Option<NakRepr> {
        let mut from = n.from.max(1);
        let to = n.to.min(from.saturating_add(MAX_NAK_RECORDS - 1));
        if let Some((a, b)) = self.answered
            && (a..b).contains(&from)
        {
            from = b;
        }
        if let Some((next, last)) = self.repair
            && from >= next
            && from <= last
        {
            from = last.saturating_add(1);
        }
        (from <= to).then_some(NakRepr { from, to })
    }

    /// Records that sequences before `next` have been answered (sent, or skipped by a GAP).
    fn answered_to(&mut self, next: u64) {
        if let Some((_, b)) = &mut self.answered {
            *b = (*b).max(next);
        }
    }

    /// Spec §20.4: answer queued NAKs, one frame per call.
    fn poll_repair<R: RecordSource + ?Sized>(&mut self, ring: &R, buf: &mut [u8]) -> Option<usize> {
        loop {
            let (cursor, to) = match self.repair {
                Some(r) => r,
                None => {
                    // Trimmed again: the answers since it was queued may cover it now.
                    let n = self.naks.pop_front()?;
                    let Some(n) = self.trim_nak(n) else {
                        self.counters.naks_redundant += 1;
                        continue;
                    };
                    let cursor = n.from;
                    // A range that continues the span answered so far extends it.
                    self.answered = match self.answered {
                        Some((a, b)) if (a..=b).contains(&cursor) => Some((a, b)),
                        _ => Some((cursor, cursor)),
                    };
                    self.repair = Some((cursor, n.to));
                    let oldest = ring.oldest();
                    if cursor < oldest {
                        self.repair = (oldest <= n.to).then_some((oldest, n.to));
                        self.cursor = oldest;
                        self.answered_to(oldest);
                        return self.emit_gap(oldest, buf);
                    }
                    continue;
                }
            };
            if cursor > to {
                self.repair = None;
                continue;
            }
            self.cursor = cursor;
            let max = (to - cursor + 1).min(u64::from(self.cfg.batch)) as u16;
            let budget = self.cfg.tcp_budget.min(buf.len());
            let c = collect(ring, cursor, max, budget, buf);
            if c.count > 0 {
                let n = self.emit_data(c.count, c.bytes, buf);
                self.counters.records_retransmitted += u64::from(c.count);
                self.repair = Some((self.cursor, to));
                self.answered_to(self.cursor);
                return n;
            }
            match c.stop {
                Stop::Lapped { seen } => {
                    let r = oldest_retained(ring.write_seq().max(seen), ring.geometry().capacity);
                    if r > cursor {
                        self.repair = Some((r, to));
                        self.answered_to(r);
                        return self.emit_gap(r, buf);
                    }
                    self.repair = None;
                }
                Stop::Lost => {
                    self.repair = Some((cursor + 1, to));
                    self.answered_to(cursor + 1);
                    return self.emit_gap(cursor + 1, buf);
                }
                // A hole is no record to come over UDP: a GAP past it (it may reach past
                // `to`: the sequences up to `next` are holes too).
                Stop::Hole { next } => {
                    self.repair = Some((next, to));
                    self.answered_to(next);
                    return self.emit_gap(next, buf);
                }
                // Not published yet: it will come over UDP; stop silently.
                Stop::Pending | Stop::Full => self.repair = None,
            }
        }
    }

    /// NAK ranges queued or being answered (0 once the session has closed).
    pub fn pending_naks(&self) -> usize {
        self.naks.len() + usize::from(self.repair.is_some())
    }
}
