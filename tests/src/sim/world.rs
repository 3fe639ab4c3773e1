//! The simulation loop and its checks.

use std::collections::HashSet;

use ringwire_core::layout::oldest_retained;
use ringwire_core::replicate::holdback::HeldEntry;
use ringwire_core::replicate::{
    Channel, Duration, HoldBack, Instant, Mirror, MirrorConfig, MirrorCounters, PeerAddr,
    RecordSource, RingSource, SourceConfig, SourceSession, Start, StreamBuf, UdpConfig, UdpOffer,
    UdpSender,
};
use ringwire_core::ring::SlotRead;
use ringwire_core::wire::{Frame, GapRepr, Kind, NakRepr, frame_len};

use super::link::{Datagrams, Impair, Stream};
use super::ring::{CheckedSink, SourceRing, holds_record};
use super::rng::Rng;

/// How a mirror receives live data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// DATA over TCP.
    Tcp,
    /// UDP multicast, repairs over TCP.
    Multicast,
    /// UDP unicast after PUNCH, repairs over TCP.
    Unicast,
}

/// One mirror of a scenario.
#[derive(Clone, Copy, Debug)]
pub struct MirrorSpec {
    /// Transport.
    pub mode: Mode,
    /// Start position.
    pub start: Start,
    /// Its path's impairments.
    pub imp: Impair,
    /// When its TCP connection breaks (ns); it reconnects at once with `Start::Resume`.
    pub disconnect: Option<u64>,
    /// The mirror's [`MirrorConfig::nak_delay`] (ns).
    pub nak_delay: u64,
}

/// Everything a run needs.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Source ring slots.
    pub capacity: u64,
    /// Bytes per record (a blob ring's descriptor: at least 16).
    pub record_len: usize,
    /// Arena bytes of a blob ring (a power of two), or 0 for a fixed-record ring.
    pub arena: u64,
    /// Records the producer writes.
    pub records: u64,
    /// Gap between writes, uniform in this range (ns).
    pub interval: (u64, u64),
    /// Records per frame.
    pub batch: u16,
    /// UDP datagram budget.
    pub mtu: usize,
    /// Copies of every UDP datagram.
    pub duplicate: u8,
    /// The mirrors.
    pub mirrors: Vec<MirrorSpec>,
    /// RNG seed for everything random during the run.
    pub seed: u64,
    /// When the source restarts (ns): a fresh ring from sequence 1, a new session byte, every
    /// connection broken; mirrors reconnect with `Start::Resume`.
    pub source_restart: Option<u64>,
    /// TCP bytes in flight before the source stops writing (the socket buffers).
    pub tcp_window: usize,
    /// Give up (and report non-convergence) at this simulated time (ns).
    pub deadline: u64,
}

impl Scenario {
    /// A random scenario for `seed`: 3 mirrors (TCP, multicast, unicast in random order),
    /// loss up to 20%, duplication, reordering, delay, and on about half the seeds a
    /// partition on one path longer than the source ring holds.
    pub fn random(seed: u64) -> Scenario {
        let mut r = Rng::new(seed);
        let capacity = [16u64, 32, 64][r.range(0, 3) as usize];
        let interval = (r.range(10_000, 40_000), r.range(40_000, 150_000));
        let mean = (interval.0 + interval.1) / 2;
        let records = r.range(150, 350);
        let mut modes = [Mode::Tcp, Mode::Multicast, Mode::Unicast];
        for i in (1..3).rev() {
            modes.swap(i, r.range(0, i as u64 + 1) as usize);
        }
        let part_on = if r.chance(0.6) {
            Some(r.range(0, 3) as usize)
        } else {
            None
        };
        let cut_on = if r.chance(0.4) {
            Some(r.range(0, 3) as usize)
        } else {
            None
        };
        let cut_at = r.range(500_000, records * mean);
        // Drawn from a stream of its own so the rest of each seed's scenario is unchanged.
        let mut rd = Rng::new(seed ^ 0x6e61_6b5f_6465_6c61);
        let mirrors = modes
            .iter()
            .enumerate()
            .map(|(i, &mode)| {
                let partition = (part_on == Some(i)).then(|| {
                    let start = r.range(1_000_000, records * mean / 2);
                    // Longer than the ring holds: at least two ring-fulls of writes.
                    let len = 2 * capacity * interval.1 + r.range(0, 10_000_000);
                    (start, start + len)
                });
                MirrorSpec {
                    mode,
                    start: [
                        Start::Latest,
                        Start::Oldest,
                        Start::Sequence(1),
                        Start::Resume,
                    ][r.range(0, 4) as usize],
                    imp: Impair {
                        delay: r.range(10_000, 300_000),
                        jitter: r.range(0, 200_000),
                        loss: r.range(0, 21) as f64 / 100.0,
                        dup: r.range(0, 11) as f64 / 100.0,
                        partition,
                    },
                    disconnect: (cut_on == Some(i)).then_some(cut_at),
                    // Half the mirrors NAK at once, half wait up to 0.4 ms.
                    nak_delay: if rd.chance(0.5) {
                        0
                    } else {
                        rd.range(0, 400_000)
                    },
                }
            })
            .collect();
        Scenario {
            capacity,
            record_len: 8 * r.range(1, 6) as usize,
            arena: 0,
            records,
            interval,
            batch: r.range(4, 64) as u16,
            mtu: [200, 600, 1472][r.range(0, 3) as usize],
            duplicate: 1 + r.range(0, 2) as u8,
            mirrors,
            seed,
            source_restart: None,
            tcp_window: r.range(256, 4096) as usize,
            deadline: 10_000_000_000,
        }
    }
}

/// What happened to one mirror.
#[derive(Debug)]
pub struct MirrorReport {
    /// Its spec.
    pub spec: MirrorSpec,
    /// Reconnections with `Start::Resume`.
    pub reconnects: u32,
    /// If the source restarted: whether this mirror held records at that moment.
    pub held_at_restart: Option<bool>,
    /// Its counters.
    pub counters: MirrorCounters,
    /// First sequence it was due (its `next` when the handshake finished).
    pub start: u64,
    /// Records written.
    pub written: usize,
    /// GAPs it received: (its next before, GAP seq).
    pub gaps: Vec<(u64, u64)>,
    /// Everything that went wrong.
    pub violations: Vec<String>,
    /// For each lost live datagram's records: (seq, expected arrival, first NAK covering it,
    /// time written), in ns.
    pub recoveries: Vec<(u64, u64, Option<u64>, Option<u64>)>,
}

/// The outcome of a run.
#[derive(Debug)]
pub struct Report {
    /// Per mirror.
    pub mirrors: Vec<MirrorReport>,
    /// Last sequence the source published.
    pub source_written: u64,
    /// GAPs the source sent: (time, seq, whether everything below seq was really gone).
    pub source_gaps: Vec<(u64, u64, bool)>,
    /// Simulated end time (ns).
    pub end: u64,
    /// Records the source sessions sent in answer to NAKs (the last session of each mirror).
    pub source_retransmitted: u64,
    /// Timers found not in the future after every machine had sent all it had (at most 10).
    pub past_timers: Vec<String>,
}

impl Report {
    /// Every violation, prefixed with the mirror index and mode.
    pub fn violations(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .mirrors
            .iter()
            .enumerate()
            .flat_map(|(i, m)| {
                m.violations
                    .iter()
                    .map(move |s| format!("mirror {i} ({:?}): {s}", m.spec.mode))
            })
            .collect();
        for (t, seq, ok) in &self.source_gaps {
            if !ok {
                v.push(format!(
                    "source sent GAP({seq}) at {t} ns while it still retained records below it"
                ));
            }
        }
        v.extend(self.past_timers.iter().cloned());
        v
    }
}

const SOURCE_IP: [u8; 4] = [10, 0, 0, 1];
const UNICAST_PORT: u16 = 17403;
const GROUP: PeerAddr = PeerAddr::new([239, 1, 1, 1], 5000);
const BUF: usize = 64 * 1024;

struct Node<'a> {
    spec: MirrorSpec,
    udp_addr: PeerAddr,
    mirror: Mirror<'a>,
    sink: CheckedSink,
    sbuf: StreamBuf<'a>,
    session: SourceSession,
    scfg: SourceConfig,
    s2m: Stream,
    m2s: Stream,
    udp_in: Datagrams,
    udp_out: Datagrams,
    gaps: Vec<(u64, u64)>,
    start: Option<u64>,
    closed: Option<String>,
    naks: Vec<(u64, u64, u64)>,
    lost: Vec<(u64, u64, u64)>,
    reconnects: u32,
    /// Ring creations when the source restarted, and whether the ring held records.
    restarted: Option<(u32, bool)>,
}

fn t(now: u64) -> Instant {
    Instant::from_nanos(now)
}

/// Runs a scenario to convergence (or its deadline) and checks it.
pub fn run(sc: &Scenario) -> Report {
    let mut rng = Rng::new(sc.seed.wrapping_mul(31).wrapping_add(7));
    let mut ring = SourceRing::new(sc.capacity, sc.record_len, sc.arena);
    let ring_bytes = ring.view.geometry().total_len().unwrap() as usize;
    let mut session_byte = (sc.seed & 0xFF) as u8;
    let udp_cfg = UdpConfig {
        multicast: Some(GROUP),
        mtu: sc.mtu,
        duplicate: sc.duplicate,
        batch: sc.batch,
        ..UdpConfig::default()
    };
    let mut restart_at = sc.source_restart;
    let mut udp: UdpSender<16> = UdpSender::new(udp_cfg, session_byte, 0, t(0));
    let mut mem: Vec<(Vec<HeldEntry>, Vec<u8>, Vec<u8>)> = sc
        .mirrors
        .iter()
        .map(|_| {
            (
                vec![HeldEntry::default(); 1024],
                vec![0u8; 256 * 1024],
                vec![0u8; BUF],
            )
        })
        .collect();
    let mut nodes: Vec<Node<'_>> = mem
        .iter_mut()
        .zip(&sc.mirrors)
        .enumerate()
        .map(|(i, ((idx, data, sbuf), spec))| {
            let sink = CheckedSink::new(ring_bytes);
            let ip = [10, 0, 0, 2 + i as u8];
            let mirror = Mirror::new(
                MirrorConfig {
                    start: spec.start,
                    prefer_unicast: spec.mode == Mode::Unicast,
                    nak_delay: Duration::from_nanos(spec.nak_delay),
                    ..MirrorConfig::default()
                },
                PeerAddr::new(SOURCE_IP, 9000),
                &sink,
                HoldBack::new(idx, data),
            );
            let udp_offers = spec.mode != Mode::Tcp;
            let scfg = SourceConfig {
                batch: sc.batch,
                unicast: udp_offers.then_some(UdpOffer {
                    group: [0; 4],
                    port: UNICAST_PORT,
                    mtu: sc.mtu as u16,
                    ttl: 0,
                }),
                multicast: udp_offers.then_some(UdpOffer {
                    group: GROUP.ip,
                    port: GROUP.port,
                    mtu: sc.mtu as u16,
                    ttl: 1,
                }),
                session: session_byte,
                ..SourceConfig::default()
            };
            let session = SourceSession::new(scfg, PeerAddr::new(ip, 40000), t(0));
            Node {
                spec: *spec,
                udp_addr: PeerAddr::new(ip, 50000 + i as u16),
                mirror,
                sink,
                sbuf: StreamBuf::new(sbuf),
                session,
                scfg,
                s2m: Stream::default(),
                m2s: Stream::default(),
                udp_in: Datagrams::default(),
                udp_out: Datagrams::default(),
                gaps: Vec::new(),
                start: None,
                closed: None,
                naks: Vec::new(),
                lost: Vec::new(),
                reconnects: 0,
                restarted: None,
            }
        })
        .collect();

    let mut buf = vec![0u8; BUF];
    let mut now = 0u64;
    let mut produced = 0u64;
    let mut next_write = rng.range(sc.interval.0, sc.interval.1);
    let mut source_gaps = Vec::new();
    let mut past_timers = Vec::new();
    loop {
        // Producer.
        while produced < sc.records && next_write <= now {
            ring.push();
            produced += 1;
            next_write += rng.range(sc.interval.0, sc.interval.1);
        }
        if restart_at.is_some_and(|r| r <= now) {
            restart_at = None;
            ring = SourceRing::new(sc.capacity, sc.record_len, sc.arena);
            session_byte ^= 0x5A;
            udp = UdpSender::new(udp_cfg, session_byte, 0, t(now));
            for n in nodes.iter_mut() {
                n.s2m.clear();
                n.m2s.clear();
                n.sbuf.clear();
                n.scfg.session = session_byte;
                n.session = SourceSession::new(n.scfg, n.session.peer(), t(now));
                n.mirror.reconnect(Start::Resume, &n.sink);
                n.start = None;
                n.gaps.clear();
                n.lost.clear();
                // A mirror that holds records must see RESET and make a fresh ring; one that
                // holds none may adopt its empty ring.
                let holds = n.sink.writes.len() > n.sink.since_creation;
                n.restarted = Some((n.sink.creations, holds));
            }
        }
        let src = RingSource(ring.view);
        // Deliveries.
        for n in nodes.iter_mut() {
            if n.closed.is_some() {
                continue;
            }
            if n.spec.disconnect.is_some_and(|d| d <= now) {
                // The connection breaks: bytes in flight are gone, both ends start over.
                n.spec.disconnect = None;
                n.reconnects += 1;
                n.s2m.clear();
                n.m2s.clear();
                n.sbuf.clear();
                if let Some(tok) = n.session.token() {
                    udp.unregister(tok);
                }
                n.session = SourceSession::new(n.scfg, n.session.peer(), t(now));
                n.mirror.reconnect(Start::Resume, &n.sink);
            }
            while let Some(bytes) = n.m2s.take(now) {
                if let Err(e) = n
                    .session
                    .handle_stream(t(now), &bytes, &src, Some(&mut udp))
                {
                    n.closed = Some(format!("source closed the session: {e}"));
                }
            }
            while let Some(bytes) = n.s2m.take(now) {
                let mut off = 0;
                while off < bytes.len() && n.closed.is_none() {
                    off += n.sbuf.push(&bytes[off..]);
                    while let Some(f) = n.sbuf.next_frame() {
                        let f = match f {
                            Ok(f) => f,
                            Err(e) => {
                                n.closed = Some(format!("stream: {e}"));
                                break;
                            }
                        };
                        let before = n.mirror.next();
                        if f[0] == Kind::Gap as u8
                            && let Ok(g) = GapRepr::parse(&Frame::new_checked(f).unwrap())
                        {
                            n.gaps.push((before, g.seq));
                        }
                        n.sink.now = now;
                        if let Err(e) = n.mirror.handle_tcp_frame(t(now), f, &mut n.sink) {
                            n.closed = Some(format!("mirror closed: {e}"));
                            break;
                        }
                        if n.start.is_none() && n.mirror.is_live() {
                            n.start = Some(n.mirror.next());
                        }
                    }
                }
            }
            let mut k = 0;
            while k < 32 {
                let Some(d) = n.udp_in.take(now) else { break };
                n.sink.now = now;
                n.mirror.handle_datagram(
                    t(now),
                    PeerAddr::new(SOURCE_IP, UNICAST_PORT),
                    &d,
                    &mut n.sink,
                );
                k += 1;
            }
            while let Some(d) = n.udp_out.take(now) {
                let _ = udp.handle_datagram(t(now), n.udp_addr, &d);
            }
        }
        // Source UDP sender.
        while let Some(len) = udp.poll_transmit(t(now), &src, &mut buf) {
            let dests: Vec<PeerAddr> = udp.destinations().collect();
            let data = buf[0] == Kind::Data as u8;
            let (seq, count) = (
                u64::from_le_bytes(buf[8..16].try_into().unwrap()),
                u64::from(u16::from_le_bytes([buf[2], buf[3]])),
            );
            for d in dests {
                for n in nodes.iter_mut() {
                    let to_it = if d == GROUP {
                        n.spec.mode == Mode::Multicast
                    } else {
                        d == n.udp_addr
                    };
                    if !to_it || n.closed.is_some() {
                        continue;
                    }
                    let mut arrived = false;
                    for _ in 0..udp.duplicate() {
                        arrived |= n.udp_in.send(now, &buf[..len], &n.spec.imp, &mut rng);
                    }
                    if data && !arrived && n.spec.imp.partition.is_none() {
                        for s in seq..seq + count {
                            n.lost.push((s, now + n.spec.imp.delay, 0));
                        }
                    }
                }
            }
        }
        // Source sessions and mirrors.
        for n in nodes.iter_mut() {
            if n.closed.is_some() {
                continue;
            }
            while n.s2m.in_flight() < sc.tcp_window {
                let Some(len) = n.session.poll_transmit(t(now), &src, &mut buf) else {
                    break;
                };
                let mut off = 0;
                while let Some(fl) = frame_len(&buf[off..len]) {
                    if buf[off] == Kind::Gap as u8 {
                        let g = u64::from_le_bytes(buf[off + 8..off + 16].try_into().unwrap());
                        let oldest = oldest_retained(src.write_seq(), sc.capacity);
                        source_gaps.push((now, g, g <= oldest));
                    }
                    off += fl;
                    if off >= len {
                        break;
                    }
                }
                n.s2m.send(now, &buf[..len], &n.spec.imp);
            }
            while let Some(tx) = n.mirror.poll_transmit(t(now), &mut buf) {
                match tx.channel {
                    Channel::Tcp => {
                        if buf[0] == Kind::Nak as u8 {
                            let k = NakRepr::parse(&Frame::new_checked(&buf[..tx.len]).unwrap())
                                .unwrap();
                            n.naks.push((now, k.from, k.to));
                        }
                        n.m2s.send(now, &buf[..tx.len], &n.spec.imp);
                    }
                    Channel::Udp(to) => {
                        assert_eq!(to, PeerAddr::new(SOURCE_IP, UNICAST_PORT), "punch target");
                        n.udp_out.send(now, &buf[..tx.len], &n.spec.imp, &mut rng);
                    }
                }
            }
        }
        // Done?
        let converged = produced == sc.records
            && nodes.iter().all(|n| {
                n.closed.is_some()
                    || (n.mirror.is_live()
                        && n.mirror.next() > ring.written
                        && n.mirror.outstanding_nak().is_none())
            });
        if converged || now >= sc.deadline {
            break;
        }
        // Next event.
        let mut next = u64::MAX;
        if produced < sc.records {
            next = next.min(next_write);
        }
        let mut at = |x: Option<Instant>| {
            if let Some(x) = x {
                next = next.min(x.as_nanos());
            }
        };
        at(udp.poll_timeout());
        // After every machine was polled until it had nothing to send, its timer must be
        // in the future: one due now would have been served, and a driver that sleeps until
        // it would spin.
        let mut past = |who: &str, x: Option<Instant>| {
            if let Some(x) = x.filter(|x| x.as_nanos() <= now)
                && past_timers.len() < 10
            {
                past_timers.push(format!(
                    "{who} timer at {} ns not after now {now} ns",
                    x.as_nanos()
                ));
            }
        };
        past("UDP sender", udp.poll_timeout());
        for n in &nodes {
            if n.closed.is_some() {
                continue;
            }
            if n.s2m.in_flight() < sc.tcp_window {
                at(n.session.poll_timeout());
                past("source session", n.session.poll_timeout());
            }
            at(n.mirror.poll_timeout());
            past("mirror", n.mirror.poll_timeout());
            at(n.spec.disconnect.map(Instant::from_nanos));
            at(restart_at.map(Instant::from_nanos));
            for x in [
                n.s2m.next_at(),
                n.m2s.next_at(),
                n.udp_in.next_at(),
                n.udp_out.next_at(),
            ] {
                at(x.map(Instant::from_nanos));
            }
        }
        now = if next <= now {
            now + 1_000
        } else {
            next.min(sc.deadline)
        };
    }
    let _ = Duration::ZERO;
    let source_written = ring.written;
    let source_retransmitted = nodes
        .iter()
        .map(|n| n.session.counters().records_retransmitted)
        .sum();
    let mirrors = nodes
        .into_iter()
        .map(|n| check(n, source_written, now))
        .collect();
    Report {
        mirrors,
        source_written,
        source_gaps,
        end: now,
        source_retransmitted,
        past_timers,
    }
}

fn check(n: Node<'_>, source_written: u64, end: u64) -> MirrorReport {
    let mut v = n.sink.violations.clone();
    if let Some(c) = &n.closed {
        v.push(c.clone());
    }
    let start = n.start.unwrap_or(u64::MAX);
    if n.start.is_none() {
        v.push("handshake never finished".into());
    }
    // One ring, plus one more if the mirror held records when the source restarted (RESET).
    let creations = match n.restarted {
        None => 1..=1,
        Some((c, true)) => c + 1..=c + 1,
        Some((c, false)) => c.max(1)..=c + 1,
    };
    if !creations.contains(&n.sink.creations) {
        v.push(format!(
            "ring created {} times, expected {creations:?}",
            n.sink.creations
        ));
    }
    // Only the current ring (the source's current incarnation) is checked for completeness.
    let written: HashSet<u64> = n.sink.writes[n.sink.since_creation..]
        .iter()
        .map(|w| w.0)
        .collect();
    let mut missing = Vec::new();
    if n.start.is_some() {
        for s in start..=source_written {
            if !written.contains(&s) && !n.gaps.iter().any(|&(b, g)| b <= s && s < g) {
                missing.push(s);
            }
        }
    }
    if !missing.is_empty() {
        v.push(format!(
            "{} sequences neither written nor covered by a GAP (first {:?}) at end {end} ns; next {}",
            missing.len(),
            &missing[..missing.len().min(5)],
            n.mirror.next()
        ));
    }
    for &(b, g) in &n.gaps {
        if (b..g).any(|s| written.contains(&s)) {
            v.push(format!(
                "GAP({g}) covered sequences from {b} that were written"
            ));
        }
    }
    if let Some(view) = n.sink.view() {
        let w = view
            .write_seq()
            .load(ringwire_core::sync::Ordering::Acquire);
        let mut dst = vec![0u8; view.geometry().record_len()];
        for s in oldest_retained(w, view.capacity())..=w {
            if view.read_slot(s, &mut dst) == SlotRead::Ok && !holds_record(view, s, &dst) {
                v.push(format!("mirror ring holds wrong bytes for {s}"));
            }
        }
    }
    let recoveries = n
        .lost
        .iter()
        .map(|&(s, expect, _)| {
            let nak = n
                .naks
                .iter()
                .find(|k| k.0 >= expect && k.1 <= s && s <= k.2)
                .map(|k| k.0);
            let w = n.sink.writes.iter().find(|w| w.0 == s).map(|w| w.1);
            (s, expect, nak, w)
        })
        .collect();
    MirrorReport {
        spec: n.spec,
        reconnects: n.reconnects,
        held_at_restart: n.restarted.map(|r| r.1),
        counters: n.mirror.counters(),
        start,
        written: n.sink.writes.len(),
        gaps: n.gaps,
        violations: v,
        recoveries,
    }
}
