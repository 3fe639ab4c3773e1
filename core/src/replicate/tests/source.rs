//! Source session, UDP sender and collect tests.

use super::*;

/// The multicast offer the tests make: group 239.1.1.1:5000, MTU 1472, TTL 1.
const MULTICAST: UdpOffer = UdpOffer {
    group: [239, 1, 1, 1],
    port: 5000,
    mtu: 1472,
    ttl: 1,
};

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
    let offer = MULTICAST;
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

/// A zero heartbeat interval is taken as `MIN_HEARTBEAT`: an idle stream gets one
/// HEARTBEAT per interval, TCP and UDP. Taken as is, every `poll_transmit` was one, so the
/// TCP session's send loop (until `None`) never ended and serve's UDP thread flooded the
/// group with over 100,000 datagrams a second.
#[test]
fn a_zero_heartbeat_interval_sends_one_heartbeat_per_min_heartbeat() {
    use crate::replicate::MIN_HEARTBEAT;
    let mut mem = Mem::new(4096);
    let src = source(&mut mem, 5);
    let cfg = SourceConfig {
        heartbeat: Duration::ZERO,
        pacing: Pacing::Fixed {
            linger: Duration::ZERO,
        },
        ..SourceConfig::default()
    };
    let (mut s, _) = session_after_hello(cfg, &src, u64::MAX, 1);
    let mut buf = [0u8; 256];
    let mut frames_at = |s: &mut SourceSession, at: Instant| {
        let mut n = 0;
        while n < 1000 && s.poll_transmit(at, &src, &mut buf).is_some() {
            n += 1;
        }
        n
    };
    // The DATA of 1..=5, then at most one HEARTBEAT at the same instant.
    assert!(frames_at(&mut s, ms(1)) <= 2);
    let next = s.poll_timeout().unwrap();
    assert!(next >= ms(1) + MIN_HEARTBEAT, "{next:?}");
    assert_eq!(frames_at(&mut s, next), 1);
    assert_eq!(frames_at(&mut s, next), 0);

    let udp = UdpConfig {
        heartbeat: Duration::ZERO,
        ..UdpConfig::default()
    };
    let mut u: UdpSender<2> = UdpSender::new(udp, 0x22, 5, ms(0));
    let mut beats = 0;
    while beats < 1000 && u.poll_transmit(ms(1), &src, &mut buf).is_some() {
        beats += 1;
    }
    assert_eq!(beats, 1, "HEARTBEATs at one instant");
    assert_eq!(u.poll_timeout(), Some(ms(1) + MIN_HEARTBEAT));
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
        multicast: Some(MULTICAST),
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
    let e = s.handle_stream(ms(2), &gap, &src, None).unwrap_err();
    assert!(matches!(e, SourceError::UnexpectedFrame { .. }), "{e:?}");
    assert_eq!(e.to_string(), "unexpected GAP frame (seq 1): expected NAK");
}

/// A NAK and a bad frame in one read (found by the `source` fuzz target: a NAK header, then
/// a HELLO whose first 8 bytes complete the NAK's payload and whose rest is not a frame):
/// the read fails, and the closed session keeps no NAK it will never answer; every later
/// read, empty or not, and every poll say it is closed.
#[test]
fn a_session_closed_by_a_bad_frame_keeps_no_naks() {
    let mut mem = Mem::new(4096);
    let src = source(&mut mem, 20);
    let mut s = multicast_session(&src);
    s.handle_stream(ms(1), &nak(13, 15), &src, None).unwrap();
    assert_eq!(s.pending_naks(), 1);
    let mut bytes = nak(16, 18).to_vec();
    bytes.extend_from_slice(&[0u8; 16]); // kind 0: not a frame
    assert_eq!(
        s.handle_stream(ms(1), &bytes, &src, None),
        Err(SourceError::Protocol(WireError::UnknownKind { kind: 0 }))
    );
    assert_eq!(s.pending_naks(), 0);
    assert_eq!(
        s.counters().naks,
        2,
        "both NAKs were read before the bad frame"
    );
    let mut buf = [0u8; 256];
    assert_eq!(s.poll_transmit(ms(2), &src, &mut buf), None);
    assert_eq!(
        s.handle_stream(ms(2), &nak(1, 2), &src, None),
        Err(SourceError::Closed)
    );
    assert_eq!(s.pending_naks(), 0);
}

/// A TCP-mode source reads nothing after HELLO (spec §19.3), whether the bytes after it come
/// in the same read as the HELLO or after GEOMETRY went out: the session is served either
/// way. Bytes in the HELLO's read were parsed as frames and ended the session (a NAK, which
/// a TCP-mode session does not take: "unexpected NAK frame"), while the same bytes a moment
/// later were dropped: the outcome hung on how the stream was segmented.
#[test]
fn bytes_after_hello_in_the_same_read_are_ignored_in_tcp_mode() {
    let mut mem = Mem::new(4096);
    let src = source(&mut mem, 5);
    for tail in [&nak(1, 3)[..], &[0xFF; 40][..], &hello(0, 1)[..]] {
        let mut s = SourceSession::new(SourceConfig::default(), MIRROR_IP, ms(0));
        let mut bytes = hello(u64::MAX, 1).to_vec();
        bytes.extend_from_slice(tail);
        assert_eq!(s.handle_stream(ms(0), &bytes, &src, None), Ok(()));
        assert_eq!(s.transport(), Transport::Tcp);
        let mut buf = [0u8; 256];
        let n = s.poll_transmit(ms(0), &src, &mut buf).unwrap();
        assert!(matches!(frames(&buf[..n])[0], FrameRepr::Geometry(_)));
        let n = s.poll_transmit(ms(0), &src, &mut buf).unwrap();
        assert!(matches!(
            frames(&buf[..n])[0],
            FrameRepr::Data(DataRepr { seq: 1, .. })
        ));
    }
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

/// With no destination, `pass_to_head` moves the cursor past what the ring has published
/// without building a frame; the first DATA after a PUNCH starts at the records published
/// after that. A multicast group is always a destination.
#[test]
fn udp_sender_passes_records_while_no_one_listens() {
    let mut mem = Mem::new(4096);
    let src = source(&mut mem, 0);
    let mut u: UdpSender<2> = UdpSender::new(UdpConfig::default(), 0x22, 0, ms(0));
    let token = u.register(MIRROR_IP).unwrap();
    assert!(!u.has_destinations(), "registered, not punched");
    push(&src, 5);
    assert_eq!(u.pass_to_head(&src), 5);
    assert_eq!((u.cursor(), u.pass_to_head(&src)), (6, 0));
    assert_eq!(u.counters(), super::udp_sender::UdpCounters::default());
    let mut p = [0u8; 16];
    PunchRepr {
        session: 0x22,
        token,
    }
    .emit(&mut p)
    .unwrap();
    assert!(u.handle_datagram(ms(1), MIRROR_IP, &p));
    assert!(u.has_destinations());
    push(&src, 8);
    let mut buf = [0u8; 256];
    let n = u.poll_transmit(ms(2), &src, &mut buf).unwrap();
    assert!(matches!(
        frames(&buf[..n])[0],
        FrameRepr::Data(DataRepr {
            seq: 6,
            count: 3,
            ..
        })
    ));
    let group = UdpConfig {
        multicast: Some(PeerAddr::new([239, 1, 1, 1], 7401)),
        ..UdpConfig::default()
    };
    assert!(UdpSender::<2>::new(group, 0x22, 0, ms(0)).has_destinations());
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

/// A byte budget of 0 (or anything up to the header) used to stall the stream: no frame
/// could take a record. It is one record per frame.
#[test]
fn tcp_budget_at_or_below_the_header_sends_one_record_per_frame() {
    for budget in [0, 1, 16] {
        let mut mem = Mem::new(1024);
        let src = source(&mut mem, 3);
        let cfg = SourceConfig {
            tcp_budget: budget,
            pacing: Pacing::Fixed {
                linger: Duration::ZERO,
            },
            ..SourceConfig::default()
        };
        let (mut s, _) = session_after_hello(cfg, &src, u64::MAX, 1);
        let mut buf = [0u8; 256];
        let mut got = vec![];
        for _ in 0..10 {
            let Some(n) = s.poll_transmit(ms(1), &src, &mut buf) else {
                break;
            };
            for f in frames(&buf[..n]) {
                if let FrameRepr::Data(d) = f {
                    got.push((d.seq, d.count));
                }
            }
        }
        assert_eq!(got, [(1, 1), (2, 1), (3, 1)], "budget {budget}");
    }
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

/// Fuzz finding (source target): with a UDP transport, GEOMETRY + MULTICAST take 96 bytes.
/// A caller's 64-byte buffer (the documented minimum) got `None` forever while
/// `poll_timeout` stayed in the past: a busy loop, and the mirror never got its handshake.
#[test]
fn udp_handshake_goes_out_through_a_64_byte_buffer() {
    let mut mem = Mem::new(4096);
    let src = source(&mut mem, 3);
    let cfg = SourceConfig {
        multicast: Some(MULTICAST),
        session: 0x22,
        ..SourceConfig::default()
    };
    let mut s = SourceSession::new(cfg, MIRROR_IP, ms(0));
    s.handle_stream(ms(0), &hello(0, 0), &src, None).unwrap();
    let mut buf = [0u8; 64];
    let mut got = Vec::new();
    while let Some(n) = s.poll_transmit(ms(0), &src, &mut buf) {
        assert!(got.len() < 4, "poll_transmit does not settle");
        got.extend(frames(&buf[..n]).iter().map(|f| match f {
            FrameRepr::Geometry(g) => (1, g.flags),
            FrameRepr::Multicast(m) => (7, m.session),
            f => panic!("{f:?}"),
        }));
    }
    assert_eq!(got, [(1, GEOMETRY_UDP_FOLLOWS), (7, 0x22)]);
    assert_eq!(s.poll_timeout(), None);
    // A buffer that holds both still sends them in one write (spec §19.2).
    let mut s = SourceSession::new(cfg, MIRROR_IP, ms(0));
    s.handle_stream(ms(0), &hello(0, 0), &src, None).unwrap();
    let mut buf = [0u8; 96];
    let n = s.poll_transmit(ms(0), &src, &mut buf).unwrap();
    assert_eq!((n, frames(&buf[..n]).len()), (96, 2));
    assert_eq!(s.poll_transmit(ms(0), &src, &mut buf), None);
}

/// A u64 ring of capacity 2^17 holding records 1..=w (record n = n): room for more than
/// one NAK's worth of records.
fn big_source(mem: &mut Mem, w: u64) -> RingSource {
    let geo = Geometry::spmc(1 << 17, 16, 8, 0, false).unwrap();
    // SAFETY: the test gives this `Mem` to this one source: no other view of it exists.
    let v = unsafe { RingView::init(mem.region(), &geo) }.unwrap();
    for s in 1..=w {
        v.write_slot(s, &s.to_le_bytes());
    }
    v.publish(w);
    RingSource(v)
}

fn big_mem() -> Mem {
    let geo = Geometry::spmc(1 << 17, 16, 8, 0, false).unwrap();
    Mem::new(geo.total_len().unwrap() as usize)
}

/// A ring of `capacity` slots of `stride` bytes holding records 1..=w (record n starts
/// with n, in 8 bytes), in `mem`, made anew here at the ring's size.
fn record_source(mem: &mut Mem, capacity: u64, stride: usize, w: u64) -> RingSource {
    let geo = Geometry::spmc(capacity, stride, 8, 0, false).unwrap();
    *mem = Mem::new(geo.total_len().unwrap() as usize);
    // SAFETY: the test gives this `Mem` to this one source: no other view of it exists.
    let v = unsafe { RingView::init(mem.region(), &geo) }.unwrap();
    for s in 1..=w {
        v.write_slot(s, &s.to_le_bytes());
    }
    v.publish(w);
    RingSource(v)
}

fn nak(from: u64, to: u64) -> [u8; 24] {
    let mut b = [0u8; 24];
    NakRepr { from, to }.emit(&mut b).unwrap();
    b
}

/// Sends everything the session has to send now: the (first, last) sequence of each DATA
/// frame and the sequence of each GAP, in order.
fn drain_answers(s: &mut SourceSession, src: &RingSource) -> (Vec<(u64, u64)>, Vec<u64>) {
    let mut buf = vec![0u8; 64 << 10];
    let (mut data, mut gaps) = (Vec::new(), Vec::new());
    while let Some(n) = s.poll_transmit(ms(1), src, &mut buf) {
        for f in frames(&buf[..n]) {
            match f {
                FrameRepr::Data(d) => data.push((d.seq, d.seq + u64::from(d.count) - 1)),
                FrameRepr::Gap(g) => gaps.push(g.seq),
                f => panic!("{f:?}"),
            }
        }
    }
    (data, gaps)
}

fn multicast_session(src: &RingSource) -> SourceSession {
    let cfg = SourceConfig {
        multicast: Some(MULTICAST),
        ..SourceConfig::default()
    };
    let (mut s, g) = session_after_hello(cfg, src, 0, 1);
    assert_eq!(g.flags, GEOMETRY_UDP_FOLLOWS);
    let mut buf = [0u8; 256];
    assert_eq!(s.poll_transmit(ms(0), src, &mut buf), None);
    s
}

fn records(data: &[(u64, u64)]) -> u64 {
    data.iter().map(|(a, b)| b - a + 1).sum()
}

/// A NAK for everything (1, u64::MAX) is answered with at most 65,535 records, the most a
/// mirror may ask for in one NAK (spec §21.4, §22), not with the whole ring.
#[test]
#[cfg_attr(
    miri,
    ignore = "a 100,000-record ring and 65,535-record answers take tens of minutes under Miri; the same session code runs under Miri in the smaller NAK tests, and this test in every plain cargo test"
)]
fn a_nak_is_answered_with_at_most_65535_records() {
    let mut mem = big_mem();
    let src = big_source(&mut mem, 100_000);
    let mut s = multicast_session(&src);
    s.handle_stream(ms(1), &nak(1, u64::MAX), &src, None)
        .unwrap();
    let (data, gaps) = drain_answers(&mut s, &src);
    assert_eq!(gaps, []);
    assert_eq!(records(&data), 65_535);
    assert_eq!(data.first().map(|d| d.0), Some(1));
    assert_eq!(data.last().map(|d| d.1), Some(65_535));
    // NAK(0, …) starts at 1, and is cut at 65,535 records from there too.
    let mut s = multicast_session(&src);
    s.handle_stream(ms(1), &nak(0, u64::MAX), &src, None)
        .unwrap();
    let (data, _) = drain_answers(&mut s, &src);
    assert_eq!((data[0].0, data.last().unwrap().1), (1, 65_535));
}

/// Sixteen NAK(1, u64::MAX) in a row, then the same NAK again while its answer is still
/// going out, then again once it has gone: the records go out once; every repeat is
/// dropped and counted. A NAK that continues past what was answered gets only the rest.
#[test]
#[cfg_attr(
    miri,
    ignore = "a 100,000-record ring and 65,535-record answers take tens of minutes under Miri; the same session code runs under Miri in the smaller NAK tests, and this test in every plain cargo test"
)]
fn repeated_naks_are_answered_once() {
    let mut mem = big_mem();
    let src = big_source(&mut mem, 100_000);
    let mut s = multicast_session(&src);
    let flood: Vec<u8> = (0..16).flat_map(|_| nak(1, u64::MAX)).collect();
    s.handle_stream(ms(1), &flood, &src, None).unwrap();
    let mut buf = vec![0u8; 64 << 10];
    let n = s.poll_transmit(ms(1), &src, &mut buf).unwrap();
    let FrameRepr::Data(first) = frames(&buf[..n])[0] else {
        panic!("no DATA")
    };
    assert_eq!(first.seq, 1);
    // Mid-answer: a mirror repeats its NAK every 20 ms while the answer is on its way.
    s.handle_stream(ms(2), &nak(1, 65_535), &src, None).unwrap();
    s.handle_stream(ms(2), &nak(300, 1_000), &src, None)
        .unwrap();
    let (data, gaps) = drain_answers(&mut s, &src);
    assert_eq!(gaps, []);
    assert_eq!(u64::from(first.count) + records(&data), 65_535);
    let c = s.counters();
    assert_eq!((c.naks, c.naks_redundant), (18, 17), "{c:?}");
    assert_eq!(c.records_retransmitted, 65_535);
    // After the answer: the same NAK again is dropped; a NAK reaching past the answer gets
    // only what is past it.
    s.handle_stream(ms(3), &nak(1, u64::MAX), &src, None)
        .unwrap();
    assert_eq!(drain_answers(&mut s, &src), (vec![], vec![]));
    s.handle_stream(ms(3), &nak(60_000, 70_000), &src, None)
        .unwrap();
    let (data, _) = drain_answers(&mut s, &src);
    assert_eq!(
        (data[0].0, data.last().unwrap().1, records(&data)),
        (65_536, 70_000, 4_465)
    );
    // A range apart from what was answered is answered, once however often it is queued.
    s.handle_stream(
        ms(4),
        &[nak(80_000, 80_010), nak(80_000, 80_010)].concat(),
        &src,
        None,
    )
    .unwrap();
    assert_eq!(drain_answers(&mut s, &src).0, [(80_000, 80_010)]);
    assert_eq!(s.counters().naks_redundant, 19);
}

/// A mirror ring as a mirror that joined at sequence `from` leaves it: records `from..=to`
/// (record n = n) written by a TCP mirror starting at the oldest, whose source offered
/// `from` first. Its slots below `from` were never written. Returns the ring, as served.
fn mirror_ring(mem: &mut Mem, from: u64, to: u64) -> RingSource {
    let mut sink = Sink::on(mem);
    let mut m = tcp_mirror_from_oldest(&sink);
    let _ = m.poll_transmit(ms(0), &mut [0u8; 64]);
    let mut input = geometry_frames(0, from, None);
    input.extend(data(from, (to - from + 1) as u16, 0));
    feed(&mut m, &input, &mut sink).unwrap();
    assert_eq!(m.next(), to + 1);
    RingSource(*sink.inner.view().unwrap())
}

/// Writes records `seqs` into `src` as its mirror writes them, then publishes the last.
fn mirror_writes(src: &RingSource, seqs: impl IntoIterator<Item = u64>) {
    let mut last = None;
    for s in seqs {
        write_received(&src.0, s, &s.to_le_bytes(), &[]);
        last = Some(s);
    }
    src.0.publish(last.unwrap());
}

/// Beyond §19.1: a HELLO whose previous record is a hole of a sparse ring (a hub that
/// recreated its ring for a restarted source and holds nothing below where it resumed)
/// gets RESET, so the mirror recreates its ring instead of appending this ring's records
/// to another's. A record the ring holds, a hole the mirror never passed (it asks for the
/// hole itself), and a ring without holes keep §19.1's answer.
#[test]
fn hello_after_a_hole_of_a_sparse_ring_is_told_to_reset() {
    let mut mem = Mem::new(4096);
    // A mirror that joined at 10: 10..=12 held, 5..=9 never written (oldest 5).
    let src = mirror_ring(&mut mem, 10, 12);
    let cfg = SourceConfig::default();
    for (seq, cursor, flags) in [
        // The record asked for and the one before lie in the hole: the mirror followed
        // another ring.
        (8, 8, GEOMETRY_RESET),
        (9, 9, GEOMETRY_RESET),
        // A record the ring holds (a leaf that followed it through the hole asks for 10,
        // its last record, to check it), the first of the hole, one after a held record,
        // and the end: no reset.
        (10, 10, 0),
        (5, 5, 0),
        (11, 11, 0),
        (13, 13, 0),
        // Below the window, past the end, oldest and latest: as §19.1.
        (3, 5, 0),
        (20, 13, GEOMETRY_RESET),
        (u64::MAX, 5, 0),
        (0, 13, 0),
    ] {
        let (s, g) = session_after_hello(cfg, &src, seq, 1);
        assert_eq!(
            (s.cursor(), g.seq, g.flags),
            (cursor, cursor, flags),
            "HELLO seq {seq}"
        );
    }
    // The same slots in a ring without the SPARSE flag are records not published yet
    // (§4.3), never a reason to reset.
    let mut mem = Mem::new(4096);
    let plain = source(&mut mem, 20);
    for seq in 14..=21 {
        let (_, g) = session_after_hello(cfg, &plain, seq, 1);
        assert_eq!(g.flags, 0, "HELLO seq {seq}");
    }
}

/// A sparse mirror ring's slot below `write_seq` that never held its sequence is a hole
/// that will never be filled, not a record still to come (spec §7): collect reports where
/// it ends. On a ring without the SPARSE flag the same slot stays pending (§4.3).
#[test]
fn collect_reports_the_end_of_a_hole_in_a_sparse_ring() {
    use collect::{Stop, collect};
    let mut mem = Mem::new(4096);
    // A mirror that joined at 10: 10..=12 held, oldest retained 5 (capacity 8).
    let src = mirror_ring(&mut mem, 10, 12);
    assert!(src.geometry().flags.has(crate::layout::Flags::SPARSE));
    assert_eq!(src.oldest(), 5);
    let mut buf = [0u8; 256];
    for at in 5..10 {
        assert_eq!(
            src.read_record(at, &mut buf),
            ReadRecord::Pending,
            "slot {at}"
        );
        assert_eq!(src.hole_end(at), Some(10), "hole at {at}");
        let c = collect(&src, at, 100, 1 << 20, &mut buf);
        assert_eq!((c.count, c.stop), (0, Stop::Hole { next: 10 }));
        assert!(c.is_full(), "no lingering at a hole");
    }
    // Past write_seq: not published yet.
    let c = collect(&src, 10, 100, 1 << 20, &mut buf);
    assert_eq!((c.count, c.stop), (3, Stop::Pending));
    assert_eq!(src.hole_end(13), None);
    // A hole in the middle (the mirror skipped 14..=15 on a GAP) ends a frame at once.
    mirror_writes(&src, [13]);
    mirror_writes(&src, [16, 17]);
    let c = collect(&src, 12, 100, 1 << 20, &mut buf);
    assert_eq!((c.count, c.stop), (2, Stop::Hole { next: 16 }));
    assert!(c.is_full());
    // A hole at the end (skipped, nothing published after it) is not known yet.
    let c = collect(&src, 18, 100, 1 << 20, &mut buf);
    assert_eq!((c.count, c.stop), (0, Stop::Pending));

    // The same slots in a ring without the SPARSE flag: pending, as ringfire reads them.
    let mut mem = Mem::new(4096);
    let geo = Geometry::spmc(8, 16, 8, 0, false).unwrap();
    // SAFETY: the test gives this `Mem` to this one source: no other view of it exists.
    let plain = RingSource(unsafe { RingView::init(mem.region(), &geo) }.unwrap());
    mirror_writes(&plain, 10..=12);
    assert_eq!(plain.hole_end(5), None);
    let c = collect(&plain, 5, 100, 1 << 20, &mut buf);
    assert_eq!((c.count, c.stop), (0, Stop::Pending));
}

/// TCP mode: a mirror of a hub ring that asks for the oldest record, or resumes behind the
/// hub's first record, gets a GAP over the never-written slots, then the hub's records; a
/// hole the hub left later (a GAP it was sent) is passed on as a GAP too. It used to get
/// GEOMETRY and then only heartbeats: the session waited at the first hole for ever.
#[test]
fn tcp_source_sends_a_gap_over_a_hole_in_a_sparse_ring() {
    let mut mem = Mem::new(4096);
    let src = mirror_ring(&mut mem, 10, 12);
    let cfg = SourceConfig {
        pacing: Pacing::Fixed {
            linger: Duration::ZERO,
        },
        ..SourceConfig::default()
    };
    let mut buf = [0u8; 1024];
    // The oldest retained is 5 (capacity 8); a mirror resuming at 7 starts there.
    for (hello, start) in [(crate::wire::HELLO_OLDEST, 5), (7, 7)] {
        let (mut s, g) = session_after_hello(cfg, &src, hello, 1);
        assert_eq!(g.seq, start);
        let mut out = Vec::new();
        while let Some(n) = s.poll_transmit(ms(1), &src, &mut buf) {
            out.extend(frames(&buf[..n]).iter().map(|f| match f {
                FrameRepr::Data(d) => (3, d.seq, d.count),
                FrameRepr::Gap(g) => (4, g.seq, 0),
                f => panic!("{f:?}"),
            }));
        }
        assert_eq!(out, [(4, 10, 0), (3, 10, 3)], "HELLO {hello}");
        assert_eq!(s.cursor(), 13);
        // A hole in the middle: 14..=15 skipped by the hub.
        if hello == 7 {
            mirror_writes(&src, [13]);
            mirror_writes(&src, [16, 17]);
            let mut out = Vec::new();
            while let Some(n) = s.poll_transmit(ms(2), &src, &mut buf) {
                out.extend(frames(&buf[..n]).iter().map(|f| match f {
                    FrameRepr::Data(d) => (3, d.seq, d.count),
                    FrameRepr::Gap(g) => (4, g.seq, 0),
                    f => panic!("{f:?}"),
                }));
            }
            assert_eq!(out, [(3, 13, 1), (4, 16, 0), (3, 16, 2)]);
            assert_eq!(s.counters().gaps, 2);
        }
    }
}

/// UDP modes: a NAK that reaches into a hole is answered with a GAP past it (even past the
/// NAK's end: everything up to there is hole), then DATA; it used to be answered with
/// silence, as for records not published yet, and the mirror asked again for ever.
#[test]
fn a_nak_into_a_hole_of_a_sparse_ring_is_answered_with_a_gap() {
    let mut mem = Mem::new(4096);
    let src = mirror_ring(&mut mem, 10, 12);
    let mut s = multicast_session(&src);
    s.handle_stream(ms(1), &nak(5, 12), &src, None).unwrap();
    assert_eq!(drain_answers(&mut s, &src), (vec![(10, 12)], vec![10]));
    let mut s = multicast_session(&src);
    s.handle_stream(ms(1), &nak(6, 7), &src, None).unwrap();
    assert_eq!(drain_answers(&mut s, &src), (vec![], vec![10]));
}

/// The UDP sender started on an empty hub ring (its cursor at 1) skips the slots the hub's
/// mirror never wrote, as it skips lost records (no GAP on UDP), and sends the records
/// after them; it used to wait at 1 for ever, its heartbeats announcing 0.
#[test]
fn udp_sender_skips_a_hole_in_a_sparse_ring() {
    let mut mem = Mem::new(4096);
    let src = mirror_ring(&mut mem, 10, 12);
    let mut u: UdpSender<2> = UdpSender::new(UdpConfig::default(), 0x22, 0, ms(0));
    let mut buf = [0u8; 256];
    let n = u.poll_transmit(ms(1), &src, &mut buf).unwrap();
    assert!(matches!(
        frames(&buf[..n])[0],
        FrameRepr::Data(DataRepr {
            flags: 0x22,
            seq: 10,
            count: 3,
            ..
        })
    ));
    assert_eq!(u.counters().skipped, 9);
}

/// A blob record goes on the wire with its BlobRef little-endian, as every integer of the
/// protocol (spec §18.4); the slot holds it in the host's byte order. A big-endian source
/// sent it as it lay in the slot, so a DATA parser (its own mirror's, any peer's) read a
/// blob of 100 bytes as one of 0x6400_0000 and refused the frame as truncated.
#[test]
fn blob_records_go_on_the_wire_with_a_little_endian_blob_ref() {
    use crate::broadcast::blob::BlobWriter;
    use crate::wire::Frame;

    let geo = Geometry::blob(4, 32, 0, 256).unwrap();
    let mut mem = Mem::new(geo.total_len().unwrap() as usize);
    // SAFETY: the test's own buffer, no other view of it exists yet.
    let v = unsafe { RingView::init(mem.region(), &geo) }.unwrap();
    let mut w = BlobWriter::new(v).unwrap();
    let mut d = [0xAAu8; 24];
    w.push(&mut d, &[7u8; 100], 0x0102_0304).unwrap();
    let mut rec = [0u8; 256];
    assert_eq!(RingSource(v).read_record(1, &mut rec), ReadRecord::Ok(124));
    assert_eq!(rec[..8], [0xAA; 8], "meta as it was");
    assert_eq!(rec[8..16], 0u64.to_le_bytes(), "arena offset");
    assert_eq!(rec[16..20], 100u32.to_le_bytes(), "blob length");
    assert_eq!(rec[20..24], 0x0102_0304u32.to_le_bytes(), "flags");
    assert_eq!(rec[24..124], [7u8; 100]);
    let mut out = [0u8; 256];
    let data = DataRepr {
        flags: 0,
        seq: 1,
        count: 1,
        records: &rec[..124],
    };
    let n = data.emit(&mut out).unwrap();
    let f = Frame::new_checked(&out[..n]).unwrap();
    assert_eq!(DataRepr::parse(&f, RecordFormat::of(&geo)), Ok(data));
}

/// Twenty NAKs for separate holes read at once (a mirror asks for each new hole as it sees
/// it, while the source is busy with an earlier answer): every hole is answered. The queue
/// holds 16 NAKs; the oldest ones were dropped when more came, and their holes waited for
/// the mirror's repeat of its whole range.
#[test]
fn more_naks_than_the_queue_holds_are_all_answered() {
    let mut mem = Mem::new(1 << 16);
    let geo = Geometry::spmc(256, 16, 8, 0, false).unwrap();
    // SAFETY: a fresh `Mem` of this test alone.
    let v = unsafe { RingView::init(mem.region(), &geo) }.unwrap();
    let src = RingSource(v);
    push(&src, 100);
    let mut s = multicast_session(&src);
    let holes: Vec<u64> = (1..=20).map(|k| 4 * k).collect();
    let burst: Vec<u8> = holes.iter().flat_map(|&h| nak(h, h + 1)).collect();
    s.handle_stream(ms(1), &burst, &src, None).unwrap();
    let (data, gaps) = drain_answers(&mut s, &src);
    assert_eq!(gaps, []);
    for h in holes {
        assert!(
            data.iter().any(|&(a, b)| a <= h && h < b),
            "hole {h} not answered: {data:?}"
        );
    }
    // Not much more than was asked for: 40 records.
    assert!(records(&data) <= 80, "{data:?}");
}

/// An MTU of 65,536 (the most `--mtu` takes) with a batch large enough to fill it: every
/// frame was collected up to the 65,536-byte budget, past the 65,507 bytes an IPv4
/// datagram carries, and skipped whole. With u64 records (8 bytes each) every frame came
/// to exactly 65,536 bytes, so nothing at all went out over UDP: every record had to be
/// fetched by NAK over TCP. Frames now stop at 65,507 bytes.
#[test]
fn an_mtu_above_the_largest_datagram_still_sends_full_frames() {
    use crate::wire::MAX_UDP_FRAME;
    // Under Miri one frame of records of 1,040 bytes, 63 of which also fill the
    // 65,536-byte budget exactly (and 62 fit in 65,507), from a ring of 128 slots: there
    // each word read costs, and one frame of 8,186 records of 8 bytes took 64 s of CPU
    // (three frames of 1,040-byte records over 40 s).
    let (n_frames, stride, capacity, written) = if cfg!(miri) {
        (1, 1_048, 128, 128)
    } else {
        (3, 16, 1 << 17, 30_000)
    };
    let record = stride - 8;
    let mut mem = Mem::new(0);
    // More than the frames hold: none of them waits for more records.
    let src = record_source(&mut mem, capacity, stride, written);
    let cfg = UdpConfig {
        mtu: 65_536,
        batch: u16::MAX,
        ..UdpConfig::default()
    };
    let mut u: UdpSender<2> = UdpSender::new(cfg, 0x22, 0, ms(0));
    let mut buf = vec![0u8; 65_536];
    let mut next = 1;
    for _ in 0..n_frames {
        let n = u
            .poll_transmit(ms(1), &src, &mut buf)
            .expect("a DATA frame");
        assert!(n <= MAX_UDP_FRAME, "a {n}-byte datagram");
        let FrameRepr::Data(d) = FrameRepr::parse(&buf[..n], src.format()).unwrap() else {
            panic!("not DATA")
        };
        assert_eq!(d.seq, next, "records skipped before this frame");
        // As many records as 65,507 bytes hold after the header.
        assert_eq!(usize::from(d.count), (MAX_UDP_FRAME - 16) / record);
        next += u64::from(d.count);
    }
    assert_eq!(u.counters().oversized_skipped, 0);
}

/// A hub ring (sparse) of `capacity` slots, created by a mirror that joined at `from` and
/// wrote `from..=to` (record n = n): every slot it retains below `from` is a hole.
fn big_hub(mem: &mut Mem, capacity: u64, from: u64, to: u64) -> RingSource {
    let g = GeometryRepr::from_source(&Geometry::spmc(capacity, 16, 8, 0, false).unwrap(), 0, 1)
        .unwrap()
        .mirror_geometry();
    *mem = Mem::new(g.total_len().unwrap() as usize);
    // SAFETY: the test gives this `Mem` to this one ring: no other view of it exists.
    let v = unsafe { RingView::init(mem.region(), &g) }.unwrap();
    let src = RingSource(v);
    mirror_writes(&src, from..=to);
    src
}

/// Finding where a hole ends looks at a bounded number of slots: a hole as long as the
/// ring is passed in several GAPs, not found in one scan of the whole ring. The scan was
/// one atomic load per slot up to the end of the hole, for each NAK into it and twice for
/// each HELLO: on a hub of 2^24 slots created less than a lap ago, tens of milliseconds of
/// CPU per 24-byte NAK, which a mirror alternating two NAKs (so that neither is dropped as
/// already answered) could ask for 16 at a time, for ever.
#[test]
fn a_long_hole_is_passed_in_bounded_steps() {
    use crate::replicate::ring_io::HOLE_SCAN;
    let mut mem = Mem::new(8);
    // Capacity 16384, records 20000..=20002: oldest 3619, 3619..=19999 a hole. Under Miri
    // capacity 8192: oldest 11811, a hole of 8189 slots, still more than one step, passed
    // in two GAPs (checked below) instead of four.
    let capacity: u64 = if cfg!(miri) { 1 << 13 } else { 1 << 14 };
    let oldest = 20_003 - capacity;
    let src = big_hub(&mut mem, capacity, 20_000, 20_002);
    assert_eq!(src.oldest(), oldest);
    let end = src.hole_end(oldest).expect("a hole");
    assert!(end <= oldest + 1 + HOLE_SCAN, "one call scanned to {end}");
    assert!(end > oldest);
    assert_eq!(src.hole_end(19_999), Some(20_000), "the hole's last slot");
    // A NAK into the hole, as a mirror that asks for the oldest sends it: GAPs, each a
    // bounded step, to the hub's first record, then the records.
    let mut s = multicast_session(&src);
    s.handle_stream(ms(1), &nak(oldest, 20_002), &src, None)
        .unwrap();
    let (data, gaps) = drain_answers(&mut s, &src);
    assert_eq!(data, [(20_000, 20_002)]);
    assert_eq!(gaps.last(), Some(&20_000));
    assert!(gaps.len() >= 2, "one GAP over the whole hole: {gaps:?}");
    let mut at = oldest;
    for g in &gaps {
        assert!(*g > at && *g <= at + 1 + HOLE_SCAN, "GAP {g} after {at}");
        at = *g;
    }
}
