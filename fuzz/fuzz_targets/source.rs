//! Feeds the source side (two `SourceSession`s and the server's `UdpSender`) arbitrary
//! sequences of TCP stream bytes, well-formed HELLOs and NAKs, PUNCH and garbage datagrams
//! from the right and wrong addresses, ring publishes (enough to lap the ring), time steps
//! and `poll_transmit` drains into buffers of various sizes.
//!
//! Checked: no panic; every drain settles within a fixed number of calls and then reports a
//! timer in the future; every emitted frame decodes with `FrameRepr::parse` in the ring's
//! record format and covers the output exactly; every DATA record equals the record the
//! ring holds (held) under that sequence; a TCP-mode stream is contiguous (DATA continues
//! where the previous frame or GAP left off); UDP frames carry the session byte; a PUNCH is
//! accepted only from the IP of the TCP peer its token belongs to; `pending_naks()` stays
//! under a fixed cap; counters never decrease; a session that returned an error keeps
//! returning `Closed` and keeps no NAK queued.
//!
//! Repairs (UDP modes) are checked against a model of the session's NAK queue, kept as
//! spec §20.4 and the session's trimming rule say: a NAK is cut to at most
//! `MAX_NAK_RECORDS` records from its start and to what the connection has not already
//! answered (one span of answered sequences, which a range that does not continue it
//! replaces), dropped if a queued range holds it, and queued 16 deep; when the queue is
//! full it joins the last queued range if it starts past it and both fit one NAK, or else
//! the oldest is evicted; it is trimmed again when its turn comes. Every repair DATA and GAP
//! must continue the range being answered or start the next range in queue order (so lie
//! inside a range still queued, and never in an evicted one); no record goes out twice in
//! repair DATA on a connection whose NAK starts never went back (a mirror's only grow;
//! `SOURCE_FUZZ_STRICT_ONCE=1` checks every connection); a range ends without a frame only
//! past its end or at a record not published yet; the queue length and the NAK,
//! redundant-NAK and retransmitted-record counters equal the model's.
//!
//! Input: byte 0 picks the ring and the configuration (bit 0: blob ring; bits 1-2: UDP
//! offers none/multicast/unicast/both; bits 3-4: batch; bit 5: small TCP budget; bit 6:
//! zero linger; bit 7: small UDP MTU), then ops of one byte (low nibble: what; bit 4: which
//! peer) with their argument bytes (missing bytes read as 0).
#![no_main]

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use ringwire_core::broadcast::blob::BlobWriter;
use ringwire_core::layout::Geometry;
use ringwire_core::region::Region;
use ringwire_core::replicate::mirror::MAX_NAK_RECORDS;
use ringwire_core::replicate::udp_sender::UdpCounters;
use ringwire_core::replicate::{
    Duration, Instant, Pacing, PeerAddr, RecordSource, RingSource, SourceConfig, SourceCounters,
    SourceError, SourceSession, Transport, UdpConfig, UdpOffer, UdpSender,
};
use ringwire_core::ring::RingView;
use ringwire_core::wire::{
    FrameRepr, GEOMETRY_UDP_FOLLOWS, HEADER_LEN, HELLO_OLDEST, HeaderRepr, HelloRepr, Kind,
    MAX_UDP_FRAME, NakRepr, PunchRepr, RecordFormat, frame_len,
};

/// Ring capacity: small, so publishes lap it often.
const CAP: u64 = 8;
/// Most `poll_transmit` calls one drain may take: every retained record (batch 1), a GAP per
/// lost record and per queued NAK range, GEOMETRY, a heartbeat, for 17 NAK ranges.
const DRAIN_LIMIT: usize = 1_000;
/// The session's NAK queue depth.
const NAK_QUEUE: usize = 16;
/// `pending_naks()` cap: the NAK queue plus the range being answered.
const NAK_CAP: usize = NAK_QUEUE + 1;
const SESSION: u8 = 0x5a;
/// TCP heartbeat interval of the sessions.
const TCP_BEAT: Duration = Duration::from_millis(200);
/// UDP heartbeat interval of the sender.
const UDP_BEAT: Duration = Duration::from_millis(1);
const PEERS: [PeerAddr; 2] = [
    PeerAddr::new([10, 0, 0, 2], 40000),
    PeerAddr::new([10, 0, 0, 3], 40001),
];
const STRANGER: [u8; 4] = [6, 6, 6, 6];
/// Buffer sizes a drain may use (the API asks for at least 64 bytes).
const BUF_SIZES: [usize; 8] = [64, 80, 96, 100, 160, 512, 4096, 70_000];

/// The source ring and what was published into it.
enum Ring {
    Fixed(RingSource),
    Blob {
        src: RingSource,
        writer: BlobWriter,
        /// Expected wire bytes (descriptor + blob) of the recent records.
        recs: HashMap<u64, Vec<u8>>,
    },
}

fn fixed_record(seq: u64) -> [u8; 16] {
    let mut r = [0u8; 16];
    r[..8].copy_from_slice(&seq.to_le_bytes());
    r[8..].copy_from_slice(&(seq ^ 0xa5a5_a5a5_5a5a_5a5a).to_le_bytes());
    r
}

impl Ring {
    fn src(&self) -> &dyn RecordSource {
        match self {
            Ring::Fixed(f) => f,
            Ring::Blob { src, .. } => src,
        }
    }
    fn fmt(&self) -> RecordFormat {
        self.src().format()
    }
    fn publish(&mut self, n: u64, blob_len: u8) {
        match self {
            Ring::Fixed(f) => {
                let w = f.write_seq();
                for s in w + 1..=w + n {
                    f.0.write_slot(s, &fixed_record(s));
                    f.0.publish(s);
                }
            }
            Ring::Blob { writer, recs, .. } => {
                let p = writer.view().geometry().record_len();
                for _ in 0..n {
                    let seq = writer.next_seq();
                    // Lengths vary with the sequence: empty, small and arena-lapping blobs.
                    let len = (usize::from(blob_len) * (seq as usize % 3)) % 200;
                    let blob: Vec<u8> = (0..len).map(|i| (seq as u8) ^ (i as u8)).collect();
                    let mut desc = vec![seq as u8; p];
                    let pushed = writer.push(&mut desc, &blob, 0).expect("blob push");
                    assert_eq!(pushed.seq, seq);
                    desc.extend_from_slice(&blob);
                    recs.insert(seq, desc);
                }
                let w = writer.next_seq() - 1;
                recs.retain(|&s, _| s + 4 * CAP > w);
            }
        }
    }
    /// The record `seq` as it must appear in a DATA frame.
    fn expected(&self, seq: u64) -> Vec<u8> {
        match self {
            Ring::Fixed(_) => fixed_record(seq).to_vec(),
            Ring::Blob { recs, .. } => recs
                .get(&seq)
                .unwrap_or_else(|| panic!("record {seq} sent but never published"))
                .clone(),
        }
    }
}

/// Reads op arguments; missing bytes read as 0.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        for x in &mut b {
            *x = self.byte();
        }
        u64::from_le_bytes(b)
    }
    fn bytes(&mut self, n: usize) -> &[u8] {
        let (a, b) = self.0.split_at(n.min(self.0.len()));
        self.0 = b;
        a
    }
}

/// One simulated mirror connection and what the checks remember about it.
struct Peer {
    addr: PeerAddr,
    s: SourceSession,
    closed: bool,
    counters: SourceCounters,
    /// GEOMETRY seen (with its seq).
    geometry: Option<u64>,
    /// A GEOMETRY with UDP_FOLLOWS went out; MULTICAST must be the next frame.
    mc_pending: bool,
    /// TCP mode: the sequence the next DATA must carry.
    next: u64,
    /// The session's NAK handling as the checks model it (UDP modes).
    naks: NakModel,
    /// When the last TCP DATA or HEARTBEAT went out.
    last_tx: Option<Instant>,
    /// The stream bytes fed, not yet a whole frame.
    shadow: Vec<u8>,
}

impl Peer {
    fn new(cfg: SourceConfig, addr: PeerAddr, now: Instant) -> Peer {
        Peer {
            addr,
            s: SourceSession::new(cfg, addr, now),
            closed: false,
            counters: SourceCounters::default(),
            geometry: None,
            mc_pending: false,
            next: 0,
            naks: NakModel::default(),
            last_tx: None,
            shadow: Vec::new(),
        }
    }
}

/// `SOURCE_FUZZ_STRICT_ONCE=1` checks that no record goes out twice in repair DATA even on
/// a connection whose NAK starts went back (a known gap of the session: see the README).
fn strict_once() -> bool {
    static STRICT: OnceLock<bool> = OnceLock::new();
    *STRICT.get_or_init(|| std::env::var_os("SOURCE_FUZZ_STRICT_ONCE").is_some_and(|v| v == "1"))
}

/// A repair frame: DATA for `seq..end`, or a GAP to `end`.
#[derive(Clone, Copy, Debug)]
enum Repair {
    Data { seq: u64, end: u64 },
    Gap { end: u64 },
}

/// The NAK queue, the answered span and the counters a session should have, given the
/// NAKs it read and the repairs it sent (see the module docs).
#[derive(Debug, Default)]
struct NakModel {
    /// Queued ranges (`from..=to`, as trimmed when read), oldest first.
    queue: VecDeque<(u64, u64)>,
    /// The range being answered: (next sequence, last sequence).
    current: Option<(u64, u64)>,
    /// Sequences `a..b` answered with DATA or skipped by a GAP: the latest contiguous run.
    answered: Option<(u64, u64)>,
    /// Sequences sent in repair DATA on this connection.
    sent: HashSet<u64>,
    /// Highest start of a non-empty NAK read on this connection.
    max_start: u64,
    /// A non-empty NAK started below an earlier one's start. The session keeps one span of
    /// answered sequences, enough for a mirror (whose NAK starts only grow) but not for
    /// NAKs that go back: those can be answered with records sent before (see the README).
    backwards: bool,
    naks: u64,
    redundant: u64,
    retransmitted: u64,
}

impl NakModel {
    /// What of `from..=to` the session answers: at most `MAX_NAK_RECORDS` records from its
    /// start, none below 1, and starting past the answered span if it starts inside it.
    fn trim(&self, from: u64, to: u64) -> Option<(u64, u64)> {
        let mut from = from.max(1);
        let to = to.min(from.saturating_add(MAX_NAK_RECORDS - 1));
        if let Some((a, b)) = self.answered
            && (a..b).contains(&from)
        {
            from = b;
        }
        (from <= to).then_some((from, to))
    }

    /// A NAK read from the stream (no range is being answered between drains).
    fn read(&mut self, from: u64, to: u64) {
        assert!(self.current.is_none());
        self.naks += 1;
        if from <= to {
            self.backwards |= from.max(1) < self.max_start;
            self.max_start = self.max_start.max(from.max(1));
        }
        let Some((f, t)) = self.trim(from, to) else {
            self.redundant += 1;
            return;
        };
        if self.queue.iter().any(|&(qf, qt)| qf <= f && t <= qt) {
            self.redundant += 1;
            return;
        }
        if self.queue.len() == NAK_QUEUE {
            // A range past the last queued one's start joins it if the two fit one NAK.
            if let Some(last) = self.queue.back_mut()
                && f > last.0
                && t - last.0 < MAX_NAK_RECORDS
            {
                last.1 = last.1.max(t);
                return;
            }
            self.queue.pop_front();
        }
        self.queue.push_back((f, t));
    }

    /// The session takes the next queued range: trimmed again, it continues the answered
    /// span or starts a new one.
    fn pop(&mut self) -> bool {
        let Some((from, to)) = self.queue.pop_front() else {
            return false;
        };
        match self.trim(from, to) {
            None => self.redundant += 1,
            Some((f, t)) => {
                self.answered = match self.answered {
                    Some((a, b)) if (a..=b).contains(&f) => Some((a, b)),
                    _ => Some((f, f)),
                };
                self.current = Some((f, t));
            }
        }
        true
    }

    /// The range being answered ends without a further frame. The session stops silently
    /// only past the range or at a record not published yet (it is coming over UDP): any
    /// other record it can read is sent, and one it cannot (overwritten, lost, too large)
    /// is skipped with a GAP. `w` is the ring's `write_seq`, fixed during a drain.
    fn end_silently(&mut self, w: u64, why: &dyn Fn() -> String) {
        if let Some((c, t)) = self.current.take() {
            assert!(
                c > t || c > w,
                "the NAK range ..={t} stopped at published record {c} (write_seq {w}) \
                 without an answer; {}",
                why()
            );
        }
    }

    /// A repair frame: it continues the range being answered, or that range ended without
    /// a frame (see `end_silently`) and the frame answers the next queued one.
    fn repair(&mut self, r: Repair, w: u64) {
        let outstanding = (self.current, self.queue.clone());
        let why = || format!("then {r:?} (answering, then queued: {outstanding:?})");
        loop {
            if let Some((c, t)) = self.current {
                let fits = c <= t
                    && match r {
                        Repair::Data { seq, end } => seq == c && end - 1 <= t,
                        Repair::Gap { end } => end > c,
                    };
                if fits {
                    let end = match r {
                        Repair::Data { seq, end } => {
                            for s in seq..end {
                                assert!(
                                    self.sent.insert(s) || (self.backwards && !strict_once()),
                                    "record {s} sent twice in repair DATA on one connection"
                                );
                            }
                            self.retransmitted += end - seq;
                            end
                        }
                        Repair::Gap { end } => end,
                    };
                    self.current = Some((end, t));
                    if let Some((_, b)) = &mut self.answered {
                        *b = (*b).max(end);
                    }
                    return;
                }
                self.end_silently(w, &why);
            }
            assert!(
                self.pop(),
                "{r:?} answers no NAK range outstanding (answering, then queued: {outstanding:?})"
            );
        }
    }

    /// The session was polled dry: it took every queued range and answered none further.
    fn drained(&mut self, w: u64) {
        let left = (self.current, self.queue.clone());
        let why = || format!("polled dry (answering, then queued: {left:?})");
        self.end_silently(w, &why);
        while self.pop() {
            self.end_silently(w, &why);
        }
    }
}

/// Live (not closed) sessions' unicast tokens and their TCP IPs.
fn live_tokens(peers: &[Peer]) -> Vec<(u32, [u8; 4])> {
    peers
        .iter()
        .filter(|p| !p.closed)
        .filter_map(|p| p.s.token().map(|t| (t, p.addr.ip)))
        .collect()
}

fn feed(p: &mut Peer, now: Instant, bytes: &[u8], ring: &Ring, udp: &mut UdpSender<2>) {
    let was_closed = p.closed;
    let r = p.s.handle_stream(now, bytes, ring.src(), Some(udp));
    if was_closed && !bytes.is_empty() {
        assert_eq!(r, Err(SourceError::Closed), "input accepted after close");
    }
    if r.is_err() {
        if !p.closed {
            // The driver closes the connection and forgets its token.
            if let Some(t) = p.s.token() {
                udp.unregister(t);
            }
        }
        p.closed = true;
        p.shadow.clear();
    } else {
        // Follow the stream as the session cuts it, to know which NAK ranges it was given.
        p.shadow.extend_from_slice(bytes);
        while let Some(total) = frame_len(&p.shadow) {
            if total > p.shadow.len() {
                break;
            }
            if let Ok(FrameRepr::Nak(n)) = FrameRepr::parse(&p.shadow[..total], ring.fmt())
                && p.s.transport() != Transport::Tcp
            {
                p.naks.read(n.from, n.to);
            }
            p.shadow.drain(..total);
        }
        if p.shadow.len() > 4096 {
            p.shadow.clear();
        }
    }
    if p.closed {
        // NAKs read in the same call as the frame that closed it included.
        assert_eq!(p.s.pending_naks(), 0, "a closed session keeps NAKs queued");
    } else {
        assert_eq!(
            p.s.pending_naks(),
            p.naks.queue.len(),
            "NAK queue differs from the model's {:?}",
            p.naks.queue
        );
    }
    check_session(p);
}

fn check_session(p: &mut Peer) {
    let c = p.s.counters();
    let o = p.counters;
    assert!(
        c.data_frames >= o.data_frames
            && c.records >= o.records
            && c.gaps >= o.gaps
            && c.heartbeats >= o.heartbeats
            && c.naks >= o.naks
            && c.records_retransmitted >= o.records_retransmitted,
        "session counters went back: {o:?} -> {c:?}"
    );
    p.counters = c;
    if !p.closed {
        let m = &p.naks;
        assert_eq!(
            (c.naks, c.naks_redundant, c.records_retransmitted),
            (m.naks, m.redundant, m.retransmitted),
            "NAK counters differ from the model's (naks, redundant, retransmitted)"
        );
    }
    assert!(
        p.s.pending_naks() <= NAK_CAP,
        "pending_naks {} over the cap",
        p.s.pending_naks()
    );
}

fn check_udp_counters(prev: &mut UdpCounters, c: UdpCounters) {
    let o = *prev;
    assert!(
        c.data_frames >= o.data_frames
            && c.heartbeats >= o.heartbeats
            && c.oversized_skipped >= o.oversized_skipped
            && c.skipped >= o.skipped
            && c.punches >= o.punches
            && c.rejected >= o.rejected,
        "UDP counters went back: {o:?} -> {c:?}"
    );
    *prev = c;
}

/// Checks one DATA frame's records against the ring; returns (seq, end).
fn check_data(ring: &Ring, f: &FrameRepr<'_>) -> Option<(u64, u64)> {
    let FrameRepr::Data(d) = f else {
        return None;
    };
    let fmt = ring.fmt();
    let w = ring.src().write_seq();
    assert!(
        d.end() - 1 <= w,
        "DATA up to {} past write_seq {w}",
        d.end() - 1
    );
    let mut n = 0u64;
    for (i, r) in d.iter(fmt).enumerate() {
        assert_eq!(r.seq, d.seq + i as u64, "sequences not consecutive");
        let mut got = r.fixed.to_vec();
        got.extend_from_slice(r.blob);
        assert_eq!(
            got,
            ring.expected(r.seq),
            "record {} differs from the ring's",
            r.seq
        );
        n += 1;
    }
    assert_eq!(
        n,
        u64::from(d.count),
        "DATA iterates fewer records than its count"
    );
    Some((d.seq, d.end()))
}

/// Splits `out` into frames; each must decode in the ring's format.
fn frames<'a>(out: &'a [u8], fmt: RecordFormat) -> Vec<FrameRepr<'a>> {
    let mut v = Vec::new();
    let mut off = 0;
    while off < out.len() {
        let n = frame_len(&out[off..]).expect("emitted bytes end in a partial header");
        assert!(off + n <= out.len(), "emitted frame runs past the output");
        let f = FrameRepr::parse(&out[off..off + n], fmt)
            .unwrap_or_else(|e| panic!("emitted frame does not decode: {e:?}"));
        v.push(f);
        off += n;
    }
    v
}

fn drain_session(p: &mut Peer, now: Instant, ring: &Ring, buf: &mut [u8]) {
    let fmt = ring.fmt();
    let src = ring.src();
    let mut calls = 0;
    while let Some(n) = p.s.poll_transmit(now, src, buf) {
        calls += 1;
        assert!(
            calls <= DRAIN_LIMIT,
            "session poll_transmit does not settle"
        );
        assert!(
            n <= buf.len() && n > 0,
            "poll_transmit returned {n} for a {}-byte buffer",
            buf.len()
        );
        assert!(!p.closed, "a closed session transmits");
        let fs = frames(&buf[..n], fmt);
        let tcp = p.s.transport() == Transport::Tcp;
        for f in &fs {
            if p.mc_pending {
                assert!(
                    matches!(f, FrameRepr::Multicast(_)),
                    "MULTICAST must follow a GEOMETRY with UDP_FOLLOWS, got {f:?}"
                );
            }
            match f {
                FrameRepr::Geometry(g) => {
                    assert!(p.geometry.is_none(), "second GEOMETRY");
                    assert!(
                        g.matches(&src.geometry()),
                        "GEOMETRY does not describe the ring"
                    );
                    let udp = g.flags & GEOMETRY_UDP_FOLLOWS != 0;
                    assert_eq!(udp, !tcp, "UDP_FOLLOWS flag vs transport");
                    p.mc_pending = udp;
                    p.geometry = Some(g.seq);
                    p.next = g.seq;
                }
                FrameRepr::Multicast(m) => {
                    assert!(p.mc_pending, "MULTICAST not right after a UDP GEOMETRY");
                    p.mc_pending = false;
                    assert_eq!(m.session, SESSION);
                    match p.s.transport() {
                        Transport::Unicast { token } => {
                            assert_eq!((m.group, m.token), ([0; 4], token));
                        }
                        Transport::Multicast => assert_eq!(m.token, 0),
                        Transport::Tcp => panic!("MULTICAST in TCP mode"),
                    }
                }
                FrameRepr::Data(d) => {
                    assert!(p.geometry.is_some(), "DATA before GEOMETRY");
                    assert_eq!(d.flags, 0, "TCP DATA with flags");
                    let (seq, end) = check_data(ring, f).unwrap();
                    if tcp {
                        assert_eq!(seq, p.next, "TCP stream not contiguous");
                        p.next = end;
                        p.last_tx = Some(now);
                    } else {
                        p.naks.repair(Repair::Data { seq, end }, src.write_seq());
                    }
                }
                FrameRepr::Gap(g) => {
                    assert!(p.geometry.is_some(), "GAP before GEOMETRY");
                    if tcp {
                        assert!(g.seq >= p.next, "TCP GAP goes back: {} < {}", g.seq, p.next);
                        p.next = g.seq;
                    } else {
                        p.naks.repair(Repair::Gap { end: g.seq }, src.write_seq());
                    }
                }
                FrameRepr::Heartbeat(h) => {
                    assert!(tcp, "TCP HEARTBEAT in a UDP mode");
                    if let Some(t) = p.last_tx {
                        assert!(now >= t + TCP_BEAT, "TCP HEARTBEAT too early");
                    }
                    p.last_tx = Some(now);
                    assert!(h.seq <= src.write_seq());
                }
                other => panic!("source emitted {other:?} on TCP"),
            }
        }
        check_session(p);
    }
    if !p.closed && p.s.transport() != Transport::Tcp {
        assert_eq!(p.s.pending_naks(), 0, "NAKs left after polling dry");
        p.naks.drained(src.write_seq());
        check_session(p);
    }
    // Polled dry: the next timer lies in the future (no busy loop).
    if let Some(t) = p.s.poll_timeout() {
        assert!(
            t > now,
            "session timeout {t:?} not after {now:?} once polled dry"
        );
    }
}

/// What the checks remember about the UDP sender.
struct UdpSeen {
    /// The sequence the next DATA may start at, at the earliest.
    next: u64,
    /// When the last DATA or HEARTBEAT went out.
    last_tx: Option<Instant>,
    counters: UdpCounters,
}

fn drain_udp(
    udp: &mut UdpSender<2>,
    now: Instant,
    ring: &Ring,
    buf: &mut [u8],
    seen: &mut UdpSeen,
) {
    let fmt = ring.fmt();
    let mut calls = 0;
    while let Some(n) = udp.poll_transmit(now, ring.src(), buf) {
        calls += 1;
        assert!(calls <= DRAIN_LIMIT, "UDP poll_transmit does not settle");
        assert!(
            n <= MAX_UDP_FRAME && n <= buf.len(),
            "datagram of {n} bytes"
        );
        assert_eq!(udp.last_len(), n);
        let fs = frames(&buf[..n], fmt);
        assert_eq!(fs.len(), 1, "one frame per datagram");
        match &fs[0] {
            f @ FrameRepr::Data(d) => {
                assert_eq!(d.flags, SESSION);
                let (seq, end) = check_data(ring, f).unwrap();
                assert!(seq >= seen.next, "UDP DATA goes back");
                seen.next = end;
                seen.last_tx = Some(now);
            }
            FrameRepr::Heartbeat(h) => {
                assert_eq!(h.flags, SESSION);
                assert_eq!(h.seq + 1, udp.cursor());
                if let Some(t) = seen.last_tx {
                    assert!(now >= t + UDP_BEAT, "UDP HEARTBEAT too early");
                }
                seen.last_tx = Some(now);
            }
            other => panic!("UDP sender emitted {other:?}"),
        }
    }
    if let Some(t) = udp.poll_timeout() {
        assert!(
            t > now,
            "UDP timeout {t:?} not after {now:?} once polled dry"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&cfgb, rest)) = data.split_first() else {
        return;
    };
    let mut inp = Input(rest);
    let mut mem = vec![0u64; 4096];
    // SAFETY: `mem` outlives every use of the region in this function and nothing else
    // touches it.
    let region = unsafe { Region::from_raw_parts(mem.as_mut_ptr().cast(), mem.len() * 8) }.unwrap();
    let mut ring = if cfgb & 1 == 0 {
        let geo = Geometry::spmc(CAP, 24, 8, 0, false).unwrap();
        // SAFETY: a fresh buffer, no other view of it exists yet.
        Ring::Fixed(RingSource(unsafe { RingView::init(region, &geo) }.unwrap()))
    } else {
        let geo = Geometry::blob(CAP, 40, 1, 512).unwrap();
        // SAFETY: a fresh buffer, no other view of it exists yet.
        let v = unsafe { RingView::init(region, &geo) }.unwrap();
        Ring::Blob {
            src: RingSource(v),
            writer: BlobWriter::new(v).unwrap(),
            recs: HashMap::new(),
        }
    };
    ring.publish(5, 37);
    let mc = UdpOffer {
        group: [239, 1, 2, 3],
        port: 5000,
        mtu: 1472,
        ttl: 1,
    };
    let uc = UdpOffer {
        group: [0; 4],
        port: 17403,
        mtu: 1472,
        ttl: 0,
    };
    let offers = (cfgb >> 1) & 3;
    let cfg = SourceConfig {
        batch: [1, 3, 256, 65535][usize::from((cfgb >> 3) & 3)],
        tcp_budget: if cfgb & 0x20 != 0 { 100 } else { 1 << 20 },
        pacing: if cfgb & 0x40 != 0 {
            Pacing::Fixed {
                linger: Duration::ZERO,
            }
        } else {
            Pacing::default()
        },
        heartbeat: TCP_BEAT,
        unicast: (offers & 2 != 0).then_some(uc),
        multicast: (offers & 1 != 0).then_some(mc),
        session: SESSION,
    };
    let mut now = Instant::from_nanos(1_000_000_000);
    let mut udp: UdpSender<2> = UdpSender::new(
        UdpConfig {
            multicast: (offers & 1 != 0).then_some(PeerAddr::new([239, 1, 2, 3], 5000)),
            mtu: if cfgb & 0x80 != 0 { 100 } else { 1472 },
            duplicate: 1,
            heartbeat: UDP_BEAT,
            batch: cfg.batch,
            pacing: cfg.pacing,
        },
        SESSION,
        ring.src().write_seq(),
        now,
    );
    let mut seen = UdpSeen {
        next: udp.cursor(),
        last_tx: None,
        counters: UdpCounters::default(),
    };
    let mut peers = [Peer::new(cfg, PEERS[0], now), Peer::new(cfg, PEERS[1], now)];
    let mut big = vec![0u8; 70_000];
    let mut steps = 0;
    while !inp.0.is_empty() && steps < 2_000 {
        steps += 1;
        let op = inp.byte();
        let k = usize::from(op >> 4) & 1;
        let w = ring.src().write_seq();
        match op & 0x0f {
            // Raw stream bytes.
            0 => {
                let n = usize::from(inp.byte());
                let b = inp.bytes(n).to_vec();
                feed(&mut peers[k], now, &b, &ring, &mut udp);
            }
            // A well-formed HELLO, maybe split in two reads.
            1 => {
                let seq = match inp.byte() % 6 {
                    0 => 0,
                    1 => HELLO_OLDEST,
                    2 => w + 1,
                    3 => w + u64::from(inp.byte()),
                    4 => w.saturating_sub(u64::from(inp.byte())),
                    _ => inp.u64(),
                };
                let flags = inp.byte();
                let flags = if flags & 0x80 != 0 { flags } else { flags & 3 };
                let mut b = [0u8; 32];
                HelloRepr { seq, flags }.emit(&mut b).unwrap();
                let at = usize::from(inp.byte()) % 33;
                feed(&mut peers[k], now, &b[..at], &ring, &mut udp);
                feed(&mut peers[k], now, &b[at..], &ring, &mut udp);
            }
            // Well-formed NAKs (a flood when the count is large), in one read.
            2 => {
                let count = usize::from(inp.byte() % 64) + 1;
                let mut b = Vec::with_capacity(24 * count);
                for _ in 0..count {
                    let (from, to) = match inp.byte() % 4 {
                        0 => {
                            let from = w.saturating_sub(u64::from(inp.byte()));
                            (from, from + u64::from(inp.byte()))
                        }
                        1 => (u64::from(inp.byte()), u64::from(inp.byte())),
                        2 => (inp.u64(), inp.u64()),
                        _ => (0, u64::MAX),
                    };
                    let mut f = [0u8; 24];
                    NakRepr { from, to }.emit(&mut f).unwrap();
                    b.extend_from_slice(&f);
                }
                feed(&mut peers[k], now, &b, &ring, &mut udp);
            }
            // A frame header with an arbitrary kind and length, and some of its payload.
            3 => {
                let kind = inp.byte() % 10;
                let len = u32::from_le_bytes([inp.byte(), inp.byte(), inp.byte(), 0]);
                let mut b = vec![0u8; HEADER_LEN];
                let h = HeaderRepr {
                    kind: Kind::from_u8(kind).unwrap_or(Kind::Nak),
                    flags: inp.byte(),
                    count: 0,
                    len,
                    seq: inp.u64(),
                };
                h.emit(&mut b).unwrap();
                b[0] = kind;
                let more = usize::from(inp.byte());
                b.extend_from_slice(inp.bytes(more));
                feed(&mut peers[k], now, &b, &ring, &mut udp);
            }
            // A PUNCH from the peer's IP or a stranger's, with the right or a wrong session
            // and token.
            4 => {
                let sel = inp.byte();
                let ip = if sel & 1 == 0 {
                    peers[k].addr.ip
                } else {
                    STRANGER
                };
                let from = PeerAddr::new(ip, u16::from(inp.byte()) + 1024);
                let session = if sel & 2 == 0 { SESSION } else { inp.byte() };
                let token = if sel & 4 == 0 {
                    peers[k].s.token().unwrap_or(1)
                } else {
                    u32::from(inp.byte())
                };
                let mut b = [0u8; 16];
                PunchRepr { session, token }.emit(&mut b).unwrap();
                if sel & 8 != 0 {
                    // High bits of seq: the reference reads the token as `seq as u32`.
                    b[12] = inp.byte();
                }
                let live = live_tokens(&peers);
                let ok = udp.handle_datagram(now, from, &b);
                let valid = session == SESSION && live.contains(&(token, ip));
                assert_eq!(
                    ok, valid,
                    "PUNCH {session:#x}/{token} from {ip:?}, live {live:?}"
                );
                check_udp_counters(&mut seen.counters, udp.counters());
                assert!(udp.destinations().count() <= 3);
            }
            // A garbage datagram.
            5 => {
                let n = usize::from(inp.byte());
                let b = inp.bytes(n).to_vec();
                let ip = if n & 1 == 0 {
                    peers[k].addr.ip
                } else {
                    STRANGER
                };
                let before = udp.destinations().count();
                let ok = udp.handle_datagram(now, PeerAddr::new(ip, 7), &b);
                if ok {
                    let f = ringwire_core::wire::Frame::new_checked(&b[..]).unwrap();
                    let p = PunchRepr::parse(&f).unwrap();
                    assert!(p.session == SESSION && live_tokens(&peers).contains(&(p.token, ip)));
                } else {
                    assert_eq!(before, udp.destinations().count());
                }
                check_udp_counters(&mut seen.counters, udp.counters());
            }
            // Publish records (enough to lap the ring several times at most).
            6 => {
                let n = u64::from(inp.byte() % 48);
                let bl = inp.byte();
                ring.publish(n, bl);
            }
            // Time passes.
            7 => {
                let b = inp.byte();
                let d = if b & 0x80 != 0 {
                    Duration::from_millis(u64::from(b & 0x7f) * 10)
                } else {
                    Duration::from_micros(u64::from(b) * 37)
                };
                now = now + d;
            }
            // Drain one session into a buffer of the chosen size.
            8 | 13 => {
                let size = BUF_SIZES[usize::from(inp.byte()) % BUF_SIZES.len()];
                drain_session(&mut peers[k], now, &ring, &mut big[..size]);
            }
            // Drain the UDP sender; maybe report EMSGSIZE for the last datagram.
            9 => {
                let sel = inp.byte();
                let size = BUF_SIZES[usize::from(sel) % BUF_SIZES.len()];
                drain_udp(&mut udp, now, &ring, &mut big[..size.max(100)], &mut seen);
                if sel & 0x80 != 0 && udp.last_len() > 0 {
                    udp.handle_emsgsize(udp.last_len());
                    assert!(udp.budget() >= 17);
                }
                check_udp_counters(&mut seen.counters, udp.counters());
            }
            // The connection ends: unregister its token and accept a new one.
            10 => {
                if let Some(t) = peers[k].s.token() {
                    udp.unregister(t);
                }
                peers[k] = Peer::new(cfg, PEERS[k], now);
            }
            // Everything that is due: drain all with a large buffer.
            11 => {
                for p in &mut peers {
                    drain_session(p, now, &ring, &mut big[..4096]);
                }
                drain_udp(&mut udp, now, &ring, &mut big[..4096], &mut seen);
                check_udp_counters(&mut seen.counters, udp.counters());
            }
            // A HELLO and NAKs back to back in one read (NAKs before GEOMETRY went out).
            12 => {
                let mut b = [0u8; 80];
                HelloRepr {
                    seq: HELLO_OLDEST,
                    flags: inp.byte() & 3,
                }
                .emit(&mut b)
                .unwrap();
                NakRepr {
                    from: w.saturating_sub(u64::from(inp.byte())),
                    to: w + 2,
                }
                .emit(&mut b[32..])
                .unwrap();
                NakRepr { from: 1, to: w }.emit(&mut b[56..]).unwrap();
                feed(&mut peers[k], now, &b, &ring, &mut udp);
            }
            // Publish a single record.
            _ => ring.publish(1, inp.byte()),
        }
        for p in &mut peers {
            check_session(p);
        }
    }
});
