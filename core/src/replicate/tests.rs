//! Unit tests of the source, UDP sender and mirror state machines against rings in memory.

use super::*;
use crate::layout::Geometry;
use crate::region::Region;
use crate::ring::RingView;
use crate::wire::{
    DataRepr, FrameRepr, GEOMETRY_RESET, GEOMETRY_UDP_FOLLOWS, GapRepr, GeometryRepr,
    HeartbeatRepr, HelloRepr, MulticastRepr, NakRepr, PunchRepr, RecordFormat,
};
use holdback::HeldEntry;

const FMT: RecordFormat = RecordFormat::Fixed { record_len: 8 };
const MIRROR_IP: PeerAddr = PeerAddr::new([10, 0, 0, 2], 40000);
const SOURCE: PeerAddr = PeerAddr::new([10, 0, 0, 1], 9000);
const UDP_SRC: PeerAddr = PeerAddr::new([10, 0, 0, 1], 17403);

fn ms(n: u64) -> Instant {
    Instant::from_nanos(n * 1_000_000)
}

struct Mem(Vec<u64>);
impl Mem {
    fn new(bytes: usize) -> Mem {
        Mem(vec![0; bytes / 8])
    }
    fn region(&mut self) -> Region {
        // SAFETY: the vector is 8-aligned, outlives the test's use of the region and is only
        // accessed through it.
        unsafe { Region::from_raw_parts(self.0.as_mut_ptr().cast(), self.0.len() * 8) }.unwrap()
    }
}

/// A u64 ring of capacity 8 holding records 1..=w (record n = n).
fn source(mem: &mut Mem, w: u64) -> FixedSource {
    let geo = Geometry::spmc(8, 16, 8, 0, false).unwrap();
    let v = RingView::init(mem.region(), &geo).unwrap();
    for s in 1..=w {
        v.write_slot(s, &s.to_le_bytes());
    }
    v.publish(w);
    FixedSource(v)
}

fn push(src: &FixedSource, upto: u64) {
    let w = src.write_seq();
    for s in w + 1..=upto {
        src.0.write_slot(s, &s.to_le_bytes());
    }
    src.0.publish(upto);
}

fn hello(seq: u64, flags: u8) -> [u8; 32] {
    let mut b = [0u8; 32];
    HelloRepr { seq, flags }.emit(&mut b).unwrap();
    b
}

fn frames(bytes: &[u8]) -> Vec<FrameRepr<'_>> {
    let mut v = Vec::new();
    let mut off = 0;
    while off < bytes.len() {
        let n = crate::wire::frame_len(&bytes[off..]).unwrap();
        v.push(FrameRepr::parse(&bytes[off..off + n], FMT).unwrap());
        off += n;
    }
    v
}

fn session_after_hello<R: RecordSource>(
    cfg: SourceConfig,
    src: &R,
    seq: u64,
    flags: u8,
) -> (SourceSession, GeometryRepr) {
    let mut s = SourceSession::new(cfg, MIRROR_IP, ms(0));
    s.handle_stream(ms(0), &hello(seq, flags), src, None)
        .unwrap();
    let mut buf = [0u8; 256];
    let n = s.poll_transmit(ms(0), src, &mut buf).unwrap();
    let FrameRepr::Geometry(g) = frames(&buf[..n])[0] else {
        panic!("no GEOMETRY")
    };
    (s, g)
}

#[test]
fn hello_to_cursor_section_19_1() {
    let mut mem = Mem::new(4096);
    let src = source(&mut mem, 20); // oldest retained = 13
    let cfg = SourceConfig::default();
    for (seq, cursor, flags) in [
        (0, 21, 0),
        (u64::MAX, 13, 0),
        (25, 21, GEOMETRY_RESET),
        (22, 21, GEOMETRY_RESET),
        (21, 21, 0),
        (15, 15, 0),
        (3, 13, 0),
    ] {
        let (mut s, g) = session_after_hello(cfg, &src, seq, 1);
        assert_eq!(
            (s.cursor(), g.seq, g.flags),
            (cursor, cursor, flags),
            "HELLO seq {seq}"
        );
        assert_eq!(s.transport(), Transport::Tcp);
        assert_eq!((g.capacity, g.element_size, g.slots_offset), (8, 16, 128));
        // Beyond the reference: resuming below the window (3 < 13) first gets GAP(13).
        let mut buf = [0u8; 256];
        let Some(n) = s.poll_transmit(ms(0), &src, &mut buf) else {
            assert_eq!(
                cursor, 21,
                "HELLO seq {seq}: nothing to send only past write_seq"
            );
            continue;
        };
        let first = frames(&buf[..n])[0];
        if seq == 3 {
            assert_eq!(first, FrameRepr::Gap(GapRepr { seq: 13 }));
        } else {
            assert!(
                matches!(first, FrameRepr::Data(_)),
                "HELLO seq {seq}: {first:?}"
            );
        }
    }
}

#[test]
fn transport_selection_section_19_2() {
    let mut mem = Mem::new(4096);
    let src = source(&mut mem, 0);
    let offer = UdpOffer {
        group: [239, 1, 1, 1],
        port: 5000,
        mtu: 1472,
        ttl: 1,
    };
    let uni = UdpOffer {
        group: [0; 4],
        port: 17403,
        mtu: 1472,
        ttl: 0,
    };
    let both = SourceConfig {
        unicast: Some(uni),
        multicast: Some(offer),
        session: 0x22,
        ..SourceConfig::default()
    };
    let only_uni = SourceConfig {
        multicast: None,
        ..both
    };
    let mut udp: UdpSender<4> = UdpSender::new(UdpConfig::default(), 0x22, 0, ms(0));
    let mut pick = |cfg: SourceConfig, flags: u8| {
        let mut s = SourceSession::new(cfg, MIRROR_IP, ms(0));
        s.handle_stream(ms(0), &hello(0, flags), &src, Some(&mut udp))
            .unwrap();
        let mut buf = [0u8; 256];
        let n = s.poll_transmit(ms(0), &src, &mut buf).unwrap();
        let f = frames(&buf[..n]);
        let mc = f.iter().find_map(|f| match f {
            FrameRepr::Multicast(m) => Some(*m),
            _ => None,
        });
        (s.transport(), mc, f.len())
    };
    let (t, mc, n) = pick(both, 0x01);
    assert_eq!((t, n), (Transport::Multicast, 2));
    assert_eq!(mc.unwrap().group, [239, 1, 1, 1]);
    let (t, mc, _) = pick(both, 0x03);
    assert_eq!(t, Transport::Unicast { token: 1 });
    assert_eq!(
        mc.unwrap(),
        MulticastRepr {
            group: [0; 4],
            port: 17403,
            mtu: 1472,
            ttl: 0,
            session: 0x22,
            token: 1
        }
    );
    assert_eq!(pick(only_uni, 0x01).0, Transport::Unicast { token: 2 });
    assert_eq!(pick(only_uni, 0x00), (Transport::Tcp, None, 1));
    assert_eq!(
        pick(SourceConfig::default(), 0x03),
        (Transport::Tcp, None, 1)
    );
}

#[test]
fn tcp_stream_data_heartbeat_gap() {
    let mut mem = Mem::new(4096);
    let src = source(&mut mem, 5);
    let cfg = SourceConfig {
        batch: 3,
        pacing: Pacing::Fixed {
            linger: Duration::ZERO,
        },
        ..SourceConfig::default()
    };
    let (mut s, _) = session_after_hello(cfg, &src, u64::MAX, 1);
    let mut buf = [0u8; 256];
    let mut got = Vec::new();
    while let Some(n) = s.poll_transmit(ms(1), &src, &mut buf) {
        let FrameRepr::Data(d) = frames(&buf[..n])[0] else {
            panic!()
        };
        got.push((d.seq, d.count, d.records[0]));
    }
    assert_eq!(got, [(1, 3, 1), (4, 2, 4)]);
    // Idle: a heartbeat 200 ms after the last DATA, with write_seq.
    assert_eq!(s.poll_timeout(), Some(ms(201)));
    assert!(s.poll_transmit(ms(200), &src, &mut buf).is_none());
    let n = s.poll_transmit(ms(201), &src, &mut buf).unwrap();
    assert_eq!(
        frames(&buf[..n])[0],
        FrameRepr::Heartbeat(HeartbeatRepr { flags: 0, seq: 5 })
    );
    // Lapped: the ring moved 20 past the cursor (6): GAP(oldest = 18), then DATA from 18.
    push(&src, 25);
    let n = s.poll_transmit(ms(202), &src, &mut buf).unwrap();
    assert_eq!(frames(&buf[..n])[0], FrameRepr::Gap(GapRepr { seq: 18 }));
    let n = s.poll_transmit(ms(202), &src, &mut buf).unwrap();
    assert!(matches!(
        frames(&buf[..n])[0],
        FrameRepr::Data(DataRepr {
            seq: 18,
            count: 3,
            ..
        })
    ));
    assert_eq!(s.counters().gaps, 1);
    // After HELLO a TCP-mode source ignores what the mirror sends.
    assert_eq!(s.handle_stream(ms(3), &[0xFF; 40], &src, None), Ok(()));
}

#[test]
fn adaptive_pacing_lingers_then_sends() {
    let mut mem = Mem::new(4096);
    let src = source(&mut mem, 0);
    let cfg = SourceConfig {
        batch: 4,
        ..SourceConfig::default()
    };
    let (mut s, _) = session_after_hello(cfg, &src, 0, 1);
    let us = |n: u64| Instant::from_nanos(n * 1000);
    let mut buf = [0u8; 256];
    push(&src, 1);
    assert!(
        s.poll_transmit(us(100), &src, &mut buf).is_some(),
        "first frame never waits"
    );
    push(&src, 2);
    assert!(
        s.poll_transmit(us(110), &src, &mut buf).is_none(),
        "lingers up to 50 µs after the last send"
    );
    assert_eq!(s.poll_timeout(), Some(us(150)));
    push(&src, 5);
    // Full (batch 4 reached): goes out at once.
    let n = s.poll_transmit(us(120), &src, &mut buf).unwrap();
    assert!(matches!(
        frames(&buf[..n])[0],
        FrameRepr::Data(DataRepr {
            seq: 2,
            count: 4,
            ..
        })
    ));
}

#[test]
fn nak_answers_section_20_4() {
    let mut mem = Mem::new(4096);
    let src = source(&mut mem, 20);
    let cfg = SourceConfig {
        multicast: Some(UdpOffer {
            group: [239, 1, 1, 1],
            port: 5000,
            mtu: 1472,
            ttl: 1,
        }),
        ..SourceConfig::default()
    };
    let (mut s, g) = session_after_hello(cfg, &src, 0, 1);
    assert_eq!(g.flags, GEOMETRY_UDP_FOLLOWS);
    let mut buf = [0u8; 256];
    let _ = s.poll_transmit(ms(0), &src, &mut buf);
    let mut nak = [0u8; 24];
    NakRepr { from: 10, to: 22 }.emit(&mut nak).unwrap();
    // Split across two reads.
    s.handle_stream(ms(1), &nak[..5], &src, None).unwrap();
    s.handle_stream(ms(1), &nak[5..], &src, None).unwrap();
    let mut out = Vec::new();
    while let Some(n) = s.poll_transmit(ms(1), &src, &mut buf) {
        out.push(match frames(&buf[..n])[0] {
            FrameRepr::Gap(g) => (4, g.seq, 0),
            FrameRepr::Data(d) => (3, d.seq, d.count),
            f => panic!("{f:?}"),
        });
    }
    // 10..12 are gone (oldest 13): GAP(13); 13..20 as DATA; 21..22 not published: silence.
    assert_eq!(out, [(4, 13, 0), (3, 13, 8)]);
    assert_eq!(s.counters().records_retransmitted, 8);
    // Anything but a NAK closes a UDP-mode session.
    let mut gap = [0u8; 16];
    GapRepr { seq: 1 }.emit(&mut gap).unwrap();
    assert!(matches!(
        s.handle_stream(ms(2), &gap, &src, None),
        Err(SourceError::UnexpectedFrame { .. })
    ));
}

#[test]
fn source_rejects_bad_hello() {
    let mut mem = Mem::new(4096);
    let src = source(&mut mem, 0);
    let mut s = SourceSession::new(SourceConfig::default(), MIRROR_IP, ms(0));
    let mut h = hello(0, 1);
    h[24] = 9;
    assert!(matches!(
        s.handle_stream(ms(0), &h, &src, None),
        Err(SourceError::Protocol(_))
    ));
    let mut s = SourceSession::new(SourceConfig::default(), MIRROR_IP, ms(0));
    let mut big = [0u8; 16];
    big[0] = 1;
    big[4..8].copy_from_slice(&1000u32.to_le_bytes());
    assert!(s.handle_stream(ms(0), &big, &src, None).is_err());
}

#[test]
fn udp_sender_punch_emsgsize_heartbeat_duplicates() {
    let mut mem = Mem::new(4096);
    let src = source(&mut mem, 0);
    let cfg = UdpConfig {
        mtu: 64,
        duplicate: 3,
        ..UdpConfig::default()
    };
    let mut u: UdpSender<2> = UdpSender::new(cfg, 0x22, 0, ms(0));
    let token = u.register(MIRROR_IP).unwrap();
    let mut p = [0u8; 17];
    PunchRepr {
        session: 0x22,
        token,
    }
    .emit(&mut p)
    .unwrap();
    let nat = PeerAddr::new(MIRROR_IP.ip, 61000);
    assert!(!u.handle_datagram(ms(0), nat, &p), "17 bytes");
    assert!(
        !u.handle_datagram(ms(0), PeerAddr::new([10, 9, 9, 9], 61000), &p[..16]),
        "foreign address"
    );
    let mut bad = p;
    bad[1] = 0x23;
    assert!(!u.handle_datagram(ms(0), nat, &bad[..16]), "wrong session");
    bad = p;
    bad[8] = 9;
    assert!(!u.handle_datagram(ms(0), nat, &bad[..16]), "unknown token");
    assert_eq!(u.destinations().count(), 0);
    assert!(u.handle_datagram(ms(0), nat, &p[..16]));
    assert_eq!(u.destinations().collect::<Vec<_>>(), [nat]);
    assert_eq!(u.duplicate(), 3);
    // Budget 64: 16 + 6 x 8 = 64 bytes per frame.
    push(&src, 8);
    let mut buf = [0u8; 256];
    let n = u.poll_transmit(ms(1), &src, &mut buf).unwrap();
    assert_eq!(n, 64);
    assert_eq!(
        frames(&buf[..n])[0],
        FrameRepr::Data(DataRepr {
            flags: 0x22,
            seq: 1,
            count: 6,
            records: &buf[16..64]
        })
    );
    u.handle_emsgsize(n);
    assert_eq!(u.budget(), 63);
    u.handle_emsgsize(10);
    assert_eq!(u.budget(), 17);
    let n = u.poll_transmit(ms(1), &src, &mut buf).unwrap();
    assert!(matches!(
        frames(&buf[..n])[0],
        FrameRepr::Data(DataRepr {
            seq: 7,
            count: 1,
            ..
        })
    ));
    while u.poll_transmit(ms(1), &src, &mut buf).is_some() {}
    assert_eq!(u.poll_timeout(), Some(ms(2)));
    let n = u.poll_transmit(ms(2), &src, &mut buf).unwrap();
    assert_eq!(
        frames(&buf[..n])[0],
        FrameRepr::Heartbeat(HeartbeatRepr {
            flags: 0x22,
            seq: 8
        })
    );
    // Lapped on UDP: skip to the oldest retained, no GAP.
    push(&src, 30);
    let n = u.poll_transmit(ms(3), &src, &mut buf).unwrap();
    assert!(matches!(
        frames(&buf[..n])[0],
        FrameRepr::Data(DataRepr { seq: 23, .. })
    ));
    assert_eq!(u.counters().skipped, 14);
    u.unregister(token);
    assert_eq!(u.destinations().count(), 0);
}

/// A sink that records writes into a ring in memory.
struct Sink {
    inner: RegionSink,
    writes: Vec<u64>,
    creations: u32,
}
impl RecordSink for Sink {
    fn existing(&self) -> Option<(Geometry, u64)> {
        self.inner.existing()
    }
    fn recreate(&mut self, geo: &Geometry) -> Result<(), SinkError> {
        self.creations += 1;
        self.writes.clear();
        self.inner.recreate(geo)
    }
    fn write(&mut self, seq: u64, fixed: &[u8], blob: &[u8]) {
        self.writes.push(seq);
        self.inner.write(seq, fixed, blob)
    }
    fn publish(&mut self, seq: u64) {
        self.inner.publish(seq)
    }
}

fn geometry_frames(flags: u8, seq: u64, mc: Option<MulticastRepr>) -> Vec<u8> {
    let g = GeometryRepr::from_source(&Geometry::spmc(8, 16, 8, 0, false).unwrap(), flags, seq)
        .unwrap();
    let mut b = vec![0u8; 96];
    let mut n = g.emit(&mut b).unwrap();
    if let Some(m) = mc {
        n += m.emit(&mut b[n..]).unwrap();
    }
    b.truncate(n);
    b
}

fn data(seq: u64, count: u16, flags: u8) -> Vec<u8> {
    let recs: Vec<u8> = (seq..seq + u64::from(count))
        .flat_map(|s| s.to_le_bytes())
        .collect();
    let mut b = vec![0u8; 16 + recs.len()];
    DataRepr {
        flags,
        seq,
        count,
        records: &recs,
    }
    .emit(&mut b)
    .unwrap();
    b
}

fn feed<S: RecordSink>(m: &mut Mirror<'_>, bytes: &[u8], sink: &mut S) -> Result<(), MirrorError> {
    let mut off = 0;
    while off < bytes.len() {
        let n = crate::wire::frame_len(&bytes[off..]).unwrap();
        m.handle_tcp_frame(ms(0), &bytes[off..off + n], sink)?;
        off += n;
    }
    Ok(())
}

#[test]
fn mirror_hello_per_start_and_adopt_or_recreate() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink {
        inner: RegionSink::new(mem.region()),
        writes: vec![],
        creations: 0,
    };
    let (mut idx, mut data_mem) = ([HeldEntry::default(); 4], [0u8; 256]);
    for (start, seq) in [
        (Start::Latest, 0),
        (Start::Oldest, u64::MAX),
        (Start::Sequence(0), 1),
        (Start::Sequence(7), 7),
        (Start::Resume, u64::MAX),
    ] {
        let m = Mirror::new(
            MirrorConfig {
                start,
                ..MirrorConfig::default()
            },
            SOURCE,
            &sink,
            HoldBack::new(&mut [], &mut []),
        );
        assert_eq!(m.hello(), HelloRepr { seq, flags: 1 });
    }
    let pu = MirrorConfig {
        prefer_unicast: true,
        ..MirrorConfig::default()
    };
    assert_eq!(
        Mirror::new(pu, SOURCE, &sink, HoldBack::new(&mut [], &mut []))
            .hello()
            .flags,
        3
    );
    // First session: creates the ring, writes 1..=3.
    {
        let mut m = Mirror::new(
            MirrorConfig::default(),
            SOURCE,
            &sink,
            HoldBack::new(&mut idx, &mut data_mem),
        );
        let mut b = [0u8; 64];
        assert_eq!(
            m.poll_transmit(ms(0), &mut b).map(|t| t.channel),
            Some(Channel::Tcp)
        );
        feed(&mut m, &geometry_frames(0, 1, None), &mut sink).unwrap();
        feed(&mut m, &data(1, 3, 0), &mut sink).unwrap();
        assert_eq!((sink.creations, m.next()), (1, 4));
    }
    // Resume: HELLO 4, same layout, no RESET: adopted, next stays 4.
    {
        let mut m = Mirror::new(
            MirrorConfig::default(),
            SOURCE,
            &sink,
            HoldBack::new(&mut idx, &mut data_mem),
        );
        assert_eq!(m.hello().seq, 4);
        let _ = m.poll_transmit(ms(0), &mut [0u8; 64]);
        feed(&mut m, &geometry_frames(0, 4, None), &mut sink).unwrap();
        assert_eq!((sink.creations, m.next()), (1, 4));
    }
    // Resume after a source restart: RESET forces a fresh ring at GEOMETRY seq.
    {
        let mut m = Mirror::new(
            MirrorConfig::default(),
            SOURCE,
            &sink,
            HoldBack::new(&mut idx, &mut data_mem),
        );
        let _ = m.poll_transmit(ms(0), &mut [0u8; 64]);
        feed(&mut m, &geometry_frames(GEOMETRY_RESET, 2, None), &mut sink).unwrap();
        assert_eq!((sink.creations, m.next()), (2, 2));
    }
}

#[test]
fn mirror_tcp_gap_jump_and_restart() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink {
        inner: RegionSink::new(mem.region()),
        writes: vec![],
        creations: 0,
    };
    let mut m = Mirror::new(
        MirrorConfig {
            start: Start::Oldest,
            ..MirrorConfig::default()
        },
        SOURCE,
        &sink,
        HoldBack::new(&mut [], &mut []),
    );
    let _ = m.poll_transmit(ms(0), &mut [0u8; 64]);
    feed(&mut m, &geometry_frames(0, 1, None), &mut sink).unwrap();
    feed(&mut m, &data(1, 2, 0), &mut sink).unwrap();
    let mut gap = [0u8; 16];
    GapRepr { seq: 6 }.emit(&mut gap).unwrap();
    feed(&mut m, &gap, &mut sink).unwrap();
    feed(&mut m, &data(8, 1, 0), &mut sink).unwrap();
    assert_eq!(sink.writes, [1, 2, 8]);
    assert_eq!(m.counters().gaps, 2);
    assert_eq!(
        sink.inner
            .view()
            .unwrap()
            .write_seq()
            .load(crate::sync::Ordering::Relaxed),
        8
    );
    // Backwards: the source restarted. Fresh ring, next = 1.
    feed(&mut m, &data(1, 1, 0), &mut sink).unwrap();
    assert_eq!(
        (
            sink.creations,
            sink.writes.as_slice(),
            m.counters().restarts
        ),
        (2, &[1u64][..], 1)
    );
    // A heartbeat far below next also means a new source ring.
    feed(&mut m, &data(2, 5, 0), &mut sink).unwrap();
    let mut hb = [0u8; 16];
    HeartbeatRepr { flags: 0, seq: 3 }.emit(&mut hb).unwrap();
    feed(&mut m, &hb, &mut sink).unwrap();
    assert_eq!((m.counters().restarts, m.next()), (2, 4));
    // Only DATA, GAP and HEARTBEAT are allowed in TCP mode.
    let mut nak = [0u8; 24];
    NakRepr { from: 1, to: 2 }.emit(&mut nak).unwrap();
    assert_eq!(
        feed(&mut m, &nak, &mut sink),
        Err(MirrorError::UnexpectedFrame {
            kind: crate::wire::Kind::Nak
        })
    );
    assert_eq!(feed(&mut m, &hb, &mut sink), Err(MirrorError::Closed));
}

fn udp_mirror<'a>(sink: &mut Sink, hb: HoldBack<'a>, unicast: bool) -> Mirror<'a> {
    let mut m = Mirror::new(
        MirrorConfig {
            start: Start::Oldest,
            ..MirrorConfig::default()
        },
        SOURCE,
        sink,
        hb,
    );
    let _ = m.poll_transmit(ms(0), &mut [0u8; 64]);
    let mc = MulticastRepr {
        group: if unicast { [0; 4] } else { [239, 1, 1, 1] },
        port: 17403,
        mtu: 1472,
        ttl: 0,
        session: 0x22,
        token: 5,
    };
    feed(
        &mut m,
        &geometry_frames(GEOMETRY_UDP_FOLLOWS, 1, Some(mc)),
        sink,
    )
    .unwrap();
    assert!(m.is_udp());
    m
}

fn nak_out(m: &mut Mirror<'_>, now: Instant) -> Option<(u64, u64)> {
    let mut b = [0u8; 64];
    let t = m.poll_transmit(now, &mut b)?;
    assert_eq!(t.channel, Channel::Tcp);
    match frames(&b[..t.len])[0] {
        FrameRepr::Nak(n) => Some((n.from, n.to)),
        f => panic!("{f:?}"),
    }
}

#[test]
fn mirror_udp_holdback_nak_repeat_only_missing() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink {
        inner: RegionSink::new(mem.region()),
        writes: vec![],
        creations: 0,
    };
    let (mut idx, mut dm) = ([HeldEntry::default(); 8], [0u8; 512]);
    let mut m = udp_mirror(&mut sink, HoldBack::new(&mut idx, &mut dm), false);
    let d = |s, c| data(s, c, 0x22);
    assert!(m.handle_datagram(ms(1), UDP_SRC, &d(1, 2), &mut sink));
    assert!(m.handle_datagram(ms(1), UDP_SRC, &d(7, 2), &mut sink));
    assert!(m.handle_datagram(ms(1), UDP_SRC, &d(7, 2), &mut sink)); // duplicate copy
    assert_eq!(nak_out(&mut m, ms(1)), Some((3, 6)));
    assert_eq!(nak_out(&mut m, ms(2)), None, "no repeat before nak_timeout");
    // 3..4 arrive; the repeat 20 ms later asks only for 5..6.
    assert!(m.handle_datagram(ms(5), UDP_SRC, &d(3, 2), &mut sink));
    assert_eq!(m.poll_timeout(), Some(ms(21)));
    assert_eq!(nak_out(&mut m, ms(21)), Some((5, 6)));
    // A retransmission over TCP fills the hole; the held 7..8 follow in order.
    feed(&mut m, &data(5, 2, 0), &mut sink).unwrap();
    assert_eq!(sink.writes, [1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(m.outstanding_nak(), None);
    let c = m.counters();
    assert_eq!(
        (c.records_retransmitted, c.duplicates_dropped, c.naks_sent),
        (2, 1, 2)
    );
    // Tail loss: a heartbeat shows 12 was sent; ask for 9..12.
    let mut hb = [0u8; 16];
    HeartbeatRepr {
        flags: 0x22,
        seq: 12,
    }
    .emit(&mut hb)
    .unwrap();
    assert!(m.handle_datagram(ms(30), UDP_SRC, &hb, &mut sink));
    assert_eq!(nak_out(&mut m, ms(30)), Some((9, 12)));
    // GAP over TCP: 9..10 are gone.
    let mut gap = [0u8; 16];
    GapRepr { seq: 11 }.emit(&mut gap).unwrap();
    feed(&mut m, &gap, &mut sink).unwrap();
    assert_eq!(m.next(), 11);
    assert_eq!(nak_out(&mut m, ms(51)), Some((11, 12)));
}

#[test]
fn mirror_udp_filters_source_session_and_bounds_steps() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink {
        inner: RegionSink::new(mem.region()),
        writes: vec![],
        creations: 0,
    };
    let (mut idx, mut dm) = ([HeldEntry::default(); 8], [0u8; 512]);
    let mut m = udp_mirror(&mut sink, HoldBack::new(&mut idx, &mut dm), true);
    // The first punch goes out at once to (source IP, port), every 200 ms until heard.
    let mut b = [0u8; 64];
    let t = m.poll_transmit(ms(0), &mut b).unwrap();
    assert_eq!(t.channel, Channel::Udp(UDP_SRC));
    assert_eq!(
        frames(&b[..t.len])[0],
        FrameRepr::Punch(PunchRepr {
            session: 0x22,
            token: 5
        })
    );
    assert_eq!(m.poll_timeout(), Some(ms(200)));
    // Wrong port, wrong IP, wrong session, short: garbage.
    assert!(!m.handle_datagram(
        ms(1),
        PeerAddr::new(UDP_SRC.ip, 1),
        &data(1, 1, 0x22),
        &mut sink
    ));
    assert!(!m.handle_datagram(
        ms(1),
        PeerAddr::new([1, 2, 3, 4], 17403),
        &data(1, 1, 0x22),
        &mut sink
    ));
    assert!(!m.handle_datagram(ms(1), UDP_SRC, &data(1, 1, 0x23), &mut sink));
    assert!(!m.handle_datagram(ms(1), UDP_SRC, &[3, 0x22, 1], &mut sink));
    assert_eq!((m.counters().garbage_dropped, sink.writes.len()), (4, 0));
    // Heard: the next punch is a keep-alive 5 s later.
    let pkts: Vec<Vec<u8>> = (1..=40).map(|s| data(s, 1, 0x22)).collect();
    let mut it = pkts.iter().map(|p| (UDP_SRC, p.as_slice()));
    assert_eq!(m.handle_datagrams(ms(2), &mut it, &mut sink), 32);
    assert_eq!(sink.writes.len(), 32);
    assert_eq!(m.handle_datagrams(ms(2), &mut it, &mut sink), 8);
    let t = m.poll_transmit(ms(200), &mut b).unwrap();
    assert_eq!(t.channel, Channel::Udp(UDP_SRC));
    assert_eq!(m.poll_timeout(), Some(ms(5200)));
}

/// A blob ring stand-in: record n is a 24-byte descriptor whose BlobRef.len is `n * 10`,
/// followed by that many bytes of `n`. Records 1..=w exist; `lost` cannot be sent.
struct FakeBlobs {
    w: u64,
    lost: u64,
}

impl RecordSource for FakeBlobs {
    fn geometry(&self) -> Geometry {
        Geometry::blob(64, 32, 2, 4096).unwrap()
    }
    fn write_seq(&self) -> u64 {
        self.w
    }
    fn read_record(&self, seq: u64, dst: &mut [u8]) -> ReadRecord {
        if seq > self.w {
            return ReadRecord::Pending;
        }
        if seq == self.lost {
            return ReadRecord::Lost;
        }
        let blob = (seq * 10) as usize;
        let need = 24 + blob;
        let Some(d) = dst.get_mut(..need) else {
            return ReadRecord::TooLarge { need };
        };
        d.fill(seq as u8);
        d[8..24].fill(0);
        d[16..20].copy_from_slice(&(blob as u32).to_le_bytes());
        ReadRecord::Ok(need)
    }
}

#[test]
fn collect_byte_budget_holds_back_and_sends_oversized_alone() {
    use collect::{Stop, collect};
    let src = FakeBlobs { w: 10, lost: 0 };
    let mut buf = [0u8; 1024];
    // Budget 100: record 1 (34 B) + record 2 (44 B) = 16 + 78 = 94; record 3 (54 B) would
    // take the frame past 100, so it is held back.
    let c = collect(&src, 1, 100, 100, &mut buf);
    assert_eq!((c.count, c.bytes, c.stop), (2, 78, Stop::Full));
    // A single record larger than the budget still goes alone.
    let c = collect(&src, 9, 100, 50, &mut buf);
    assert_eq!((c.count, c.bytes), (1, 24 + 90));
    // ... unless the buffer cannot hold it: then it is lost.
    let c = collect(&src, 9, 100, 50, &mut buf[..100]);
    assert_eq!((c.count, c.stop), (0, Stop::Lost));
    // Record count limit and pending.
    assert_eq!(collect(&src, 1, 3, 1 << 20, &mut buf).count, 3);
    let c = collect(&src, 8, 100, 1 << 20, &mut buf);
    assert_eq!((c.count, c.stop), (3, Stop::Pending));
    // The frame parses as blob DATA.
    let c = collect(&src, 4, 3, 1 << 20, &mut buf);
    let n = 16 + c.bytes;
    crate::wire::HeaderRepr {
        kind: crate::wire::Kind::Data,
        flags: 0,
        count: c.count,
        len: c.bytes as u32,
        seq: 4,
    }
    .emit(&mut buf)
    .unwrap();
    let fmt = RecordFormat::of(&src.geometry());
    let FrameRepr::Data(d) = FrameRepr::parse(&buf[..n], fmt).unwrap() else {
        panic!()
    };
    let lens: Vec<usize> = d.iter(fmt).map(|r| r.blob.len()).collect();
    assert_eq!(lens, [40, 50, 60]);
}

#[test]
fn tcp_source_sends_gap_after_a_lost_blob() {
    let src = FakeBlobs { w: 5, lost: 3 };
    let cfg = SourceConfig {
        pacing: Pacing::Fixed {
            linger: Duration::ZERO,
        },
        ..SourceConfig::default()
    };
    let (mut s, g) = session_after_hello(cfg, &src, u64::MAX, 1);
    assert_eq!(g.arena_size, 4096);
    let mut buf = [0u8; 1024];
    let fmt = RecordFormat::of(&src.geometry());
    let mut out = Vec::new();
    while let Some(n) = s.poll_transmit(ms(1), &src, &mut buf) {
        out.push(match FrameRepr::parse(&buf[..n], fmt).unwrap() {
            FrameRepr::Data(d) => (3, d.seq, d.count),
            FrameRepr::Gap(g) => (4, g.seq, 0),
            f => panic!("{f:?}"),
        });
    }
    // 1..2, then record 3 is lost: GAP(4) names the sequence after it, then 4..5.
    assert_eq!(out, [(3, 1, 2), (4, 4, 0), (3, 4, 2)]);
}

/// Records blob writes.
#[derive(Default)]
struct BlobSink {
    geo: Option<Geometry>,
    got: Vec<(u64, Vec<u8>, Vec<u8>)>,
    published: u64,
}

impl RecordSink for BlobSink {
    fn existing(&self) -> Option<(Geometry, u64)> {
        self.geo.map(|g| (g, self.published))
    }
    fn recreate(&mut self, geo: &Geometry) -> Result<(), SinkError> {
        self.geo = Some(*geo);
        Ok(())
    }
    fn write(&mut self, seq: u64, fixed: &[u8], blob: &[u8]) {
        self.got.push((seq, fixed.to_vec(), blob.to_vec()));
    }
    fn publish(&mut self, seq: u64) {
        self.published = seq;
    }
}

#[test]
fn mirror_applies_blob_data() {
    let src = FakeBlobs { w: 3, lost: 0 };
    let cfg = SourceConfig {
        pacing: Pacing::Fixed {
            linger: Duration::ZERO,
        },
        ..SourceConfig::default()
    };
    let mut sink = BlobSink::default();
    let mut m = Mirror::new(
        MirrorConfig {
            start: Start::Oldest,
            ..MirrorConfig::default()
        },
        SOURCE,
        &sink,
        HoldBack::new(&mut [], &mut []),
    );
    let mut b = [0u8; 64];
    let t = m.poll_transmit(ms(0), &mut b).unwrap();
    let mut s = SourceSession::new(cfg, MIRROR_IP, ms(0));
    s.handle_stream(ms(0), &b[..t.len], &src, None).unwrap();
    let mut buf = [0u8; 1024];
    while let Some(n) = s.poll_transmit(ms(0), &src, &mut buf) {
        feed(&mut m, &buf[..n], &mut sink).unwrap();
    }
    let g = sink.geo.unwrap();
    assert!(g.has_arena());
    assert_eq!(g.flags.0, 0x0711, "mirror of a blob ring");
    assert_eq!(sink.published, 3);
    let lens: Vec<(u64, usize, u8)> = sink
        .got
        .iter()
        .map(|(s, f, b)| (*s, b.len(), f[0]))
        .collect();
    assert_eq!(lens, [(1, 10, 1), (2, 20, 2), (3, 30, 3)]);
}

#[test]
fn mirror_reconnect_resumes() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink {
        inner: RegionSink::new(mem.region()),
        writes: vec![],
        creations: 0,
    };
    let (mut idx, mut dm) = ([HeldEntry::default(); 8], [0u8; 512]);
    let mut m = udp_mirror(&mut sink, HoldBack::new(&mut idx, &mut dm), false);
    assert!(m.handle_datagram(ms(1), UDP_SRC, &data(1, 3, 0x22), &mut sink));
    assert!(m.handle_datagram(ms(1), UDP_SRC, &data(6, 1, 0x22), &mut sink));
    assert!(m.outstanding_nak().is_some());
    m.reconnect(Start::Resume, &sink);
    assert!(!m.is_live() && m.outstanding_nak().is_none());
    let mut b = [0u8; 64];
    let t = m.poll_transmit(ms(2), &mut b).unwrap();
    assert_eq!(
        frames(&b[..t.len])[0],
        FrameRepr::Hello(HelloRepr { seq: 4, flags: 1 })
    );
    // Same layout, no RESET: the ring is adopted and the mirror continues at 4.
    feed(&mut m, &geometry_frames(0, 4, None), &mut sink).unwrap();
    feed(&mut m, &data(4, 2, 0), &mut sink).unwrap();
    assert_eq!(
        (sink.creations, sink.writes.as_slice()),
        (1, &[1u64, 2, 3, 4, 5][..])
    );
}
