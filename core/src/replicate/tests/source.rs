//! Source session tests: HELLO and the start cursor, transport selection, the TCP stream
//! (DATA, heartbeats, GAPs, pacing, the frame budget), the UDP handshake's frames, and input
//! a session refuses.

use super::source_nak::nak;
use super::*;

/// The multicast offer the tests make: group 239.1.1.1:5000, MTU 1472, TTL 1.
pub(super) const MULTICAST: UdpOffer = UdpOffer {
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
