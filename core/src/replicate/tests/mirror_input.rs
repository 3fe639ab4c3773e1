//! Mirror tests of what it accepts from the network: datagram addresses, heartbeats below
//! what was received, sequences at the limit, blobs longer than the arena, RESET, a full
//! hold-back store drained in one step, and zero-sized records held back.

use super::*;
use crate::layout::SEQ_LIMIT;
use crate::wire::{Kind, WireError};

fn heartbeat(flags: u8, seq: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    HeartbeatRepr { flags, seq }.emit(&mut b).unwrap();
    b
}

fn gap(seq: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    GapRepr { seq }.emit(&mut b).unwrap();
    b
}

fn ring_write_seq(sink: &Sink) -> u64 {
    sink.inner
        .view()
        .unwrap()
        .write_seq()
        .load(crate::sync::Ordering::Relaxed)
}

/// With `check_udp_source` off, multicast datagrams are filtered by the session byte only,
/// as spec §21.4 has it: any sender's are applied, heartbeats included. (With it on, the
/// default, the sender is tried first: `mirror_sender.rs`.)
#[test]
fn multicast_datagrams_with_the_check_off_are_not_checked_by_source_address() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let (mut idx, mut dm) = ([HeldEntry::default(); 8], [0u8; 512]);
    let mut m = udp_mirror(&mut sink, HoldBack::new(&mut idx, &mut dm), false);
    assert_eq!(m.udp_source(), None);
    // The mirror connected to 10.0.0.1; the source multicasts from its LAN interface.
    let lan = PeerAddr::new([192, 168, 1, 7], 41_234);
    assert!(m.handle_datagram(ms(1), lan, &data(1, 2, 0x22), &mut sink));
    assert!(m.handle_datagram(ms(1), UDP_SRC, &data(3, 1, 0x22), &mut sink));
    assert_eq!(sink.writes, [1, 2, 3]);
    // Its heartbeats show a tail loss, which is asked for.
    assert!(m.handle_datagram(ms(2), lan, &heartbeat(0x22, 5), &mut sink));
    assert_eq!(nak_out(&mut m, ms(2)), Some((4, 5)));
    // The session byte still filters.
    assert!(!m.handle_datagram(ms(3), lan, &data(4, 1, 0x23), &mut sink));
    let c = m.counters();
    assert_eq!((c.garbage_dropped, c.udp_wrong_source), (1, 0));
}

/// Once a unicast datagram was heard from the address punched, one from another address is
/// dropped, and counted apart from other garbage (the std driver warns about it once).
#[test]
fn unicast_datagrams_from_another_address_are_dropped_and_counted() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let (mut idx, mut dm) = ([HeldEntry::default(); 8], [0u8; 512]);
    let mut m = udp_mirror(&mut sink, HoldBack::new(&mut idx, &mut dm), true);
    assert_eq!(m.udp_source(), Some(UDP_SRC));
    let other_port = PeerAddr::new(UDP_SRC.ip, UDP_SRC.port + 1);
    // Another port at the source's IP is not the source, even first.
    assert!(!m.handle_datagram(ms(1), other_port, &data(1, 1, 0x22), &mut sink));
    assert!(m.handle_datagram(ms(2), UDP_SRC, &data(1, 1, 0x22), &mut sink));
    assert_eq!(sink.writes, [1]);
    let lan = PeerAddr::new([192, 168, 1, 7], UDP_SRC.port);
    assert!(!m.handle_datagram(ms(3), lan, &data(2, 1, 0x22), &mut sink));
    assert!(!m.handle_datagram(ms(3), lan, &heartbeat(0x22, 9), &mut sink));
    // Another session from there is plain garbage.
    assert!(!m.handle_datagram(ms(3), lan, &data(2, 1, 0x23), &mut sink));
    assert!(sink.writes == [1] && m.outstanding_nak().is_none());
    let c = m.counters();
    assert_eq!((c.garbage_dropped, c.udp_wrong_source), (4, 3));
    assert_eq!(m.udp_source(), Some(UDP_SRC));
    // With the check off, any address is accepted.
    let cfg = MirrorConfig {
        check_udp_source: false,
        ..MirrorConfig::default()
    };
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let mut m = udp_mirror_with(&mut sink, HoldBack::new(&mut [], &mut []), true, cfg);
    assert_eq!(m.udp_source(), None);
    assert!(m.handle_datagram(ms(1), lan, &data(1, 1, 0x22), &mut sink));
}

/// A source bound to 0.0.0.0 and reached at a secondary address (ringfire's server at
/// 127.0.0.2) sends from the route's address: the session's first datagram from the
/// source's port at another IP names the address, which is then the only one accepted.
#[test]
fn the_first_unicast_datagram_from_the_sources_port_at_another_ip_names_the_source() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let (mut idx, mut dm) = ([HeldEntry::default(); 8], [0u8; 512]);
    let mut m = udp_mirror(&mut sink, HoldBack::new(&mut idx, &mut dm), true);
    let route = PeerAddr::new([192, 168, 1, 7], UDP_SRC.port);
    assert!(m.handle_datagram(ms(1), route, &data(1, 2, 0x22), &mut sink));
    assert_eq!(m.udp_source(), Some(route));
    assert!(m.handle_datagram(ms(1), route, &heartbeat(0x22, 4), &mut sink));
    assert_eq!(sink.writes, [1, 2]);
    assert_eq!(nak_out(&mut m, ms(1)), Some((3, 4)));
    // The address dialled is now the other one.
    assert!(!m.handle_datagram(ms(2), UDP_SRC, &data(3, 1, 0x22), &mut sink));
    assert_eq!(m.counters().udp_wrong_source, 1);
}

/// A producer wrote slots 4 and 5 but had not yet stored write_seq = 5 (it stalled or died
/// mid-batch). The source streams 1..=5 (collect follows the slot words), then idles with a
/// TCP HEARTBEAT carrying write_seq = 3. The mirror records it and keeps its ring (spec
/// §21.3); a real restart is still detected when it reconnects (RESET).
#[test]
fn tcp_heartbeat_below_what_was_received_is_recorded_only() {
    let mut smem = Mem::new(4096);
    let src = source(&mut smem, 3);
    src.0.write_slot(4, &4u64.to_le_bytes());
    src.0.write_slot(5, &5u64.to_le_bytes());
    let (mut s, _g) =
        session_after_hello(SourceConfig::default(), &src, crate::wire::HELLO_OLDEST, 1);
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let mut m = tcp_mirror_from_oldest(&sink);
    let _ = m.poll_transmit(ms(0), &mut [0u8; 64]);
    feed(&mut m, &geometry_frames(0, 1, None), &mut sink).unwrap();
    let mut buf = vec![0u8; 4096];
    let mut heartbeats = 0;
    for t in [1, 251, 501] {
        while let Some(n) = s.poll_transmit(ms(t), &src, &mut buf) {
            heartbeats += frames(&buf[..n])
                .iter()
                .filter(|f| matches!(f, FrameRepr::Heartbeat(h) if h.seq == 3))
                .count();
            feed(&mut m, &buf[..n], &mut sink).unwrap();
        }
    }
    assert!(
        heartbeats >= 2,
        "the source sent {heartbeats} heartbeats of 3"
    );
    let c = m.counters();
    assert_eq!((sink.creations, c.restarts, c.gaps), (1, 0, 0));
    assert_eq!(
        (m.next(), ring_write_seq(&sink), m.source_seq()),
        (6, 5, Some(3))
    );
    assert_eq!(sink.writes, [1, 2, 3, 4, 5]);

    // The producer restarts: a fresh source ring at 1..=2. The mirror reconnects to resume
    // (HELLO 5: one record of overlap), past the new ring's end: RESET, a fresh mirror ring
    // from 3 (spec §19.1), one restart.
    let mut smem2 = Mem::new(4096);
    let src2 = source(&mut smem2, 2);
    m.reconnect(Start::Resume, &sink);
    let mut b = [0u8; 64];
    let t = m.poll_transmit(ms(600), &mut b).unwrap();
    assert_eq!(
        frames(&b[..t.len])[0],
        FrameRepr::Hello(HelloRepr { seq: 5, flags: 1 })
    );
    let mut s2 = SourceSession::new(SourceConfig::default(), MIRROR_IP, ms(600));
    s2.handle_stream(ms(600), &b[..t.len], &src2, None).unwrap();
    while let Some(n) = s2.poll_transmit(ms(600), &src2, &mut buf) {
        feed(&mut m, &buf[..n], &mut sink).unwrap();
    }
    assert_eq!((sink.creations, m.counters().restarts, m.next()), (2, 1, 3));
    push(&src2, 4);
    while let Some(n) = s2.poll_transmit(ms(601), &src2, &mut buf) {
        feed(&mut m, &buf[..n], &mut sink).unwrap();
    }
    assert_eq!((sink.writes.as_slice(), m.next()), (&[3u64, 4][..], 5));
}

/// A RESET answering a sequence asked for explicitly only says it is past the source's end:
/// the mirror starts a ring at GEOMETRY `seq`, and counts no restart. Answering a resume it
/// is one.
#[test]
fn reset_counts_a_restart_only_when_resuming() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    for (start, restarts) in [(Start::Sequence(100), 0), (Start::Resume, 1)] {
        let cfg = MirrorConfig {
            start,
            ..MirrorConfig::default()
        };
        let mut m = Mirror::new(cfg, SOURCE, &sink, HoldBack::new(&mut [], &mut []));
        let _ = m.poll_transmit(ms(0), &mut [0u8; 64]);
        feed(&mut m, &geometry_frames(GEOMETRY_RESET, 4, None), &mut sink).unwrap();
        feed(&mut m, &data(4, 2, 0), &mut sink).unwrap();
        assert_eq!(
            (m.counters().restarts, m.next()),
            (restarts, 6),
            "{start:?}"
        );
    }
    assert_eq!(sink.creations, 2);
}

/// A TCP-mode mirror after a handshake at 1.
fn tcp_mirror(sink: &mut Sink) -> Mirror<'static> {
    let mut m = tcp_mirror_from_oldest(&*sink);
    let _ = m.poll_transmit(ms(0), &mut [0u8; 64]);
    feed(&mut m, &geometry_frames(0, 1, None), sink).unwrap();
    m
}

/// DATA, GAP and HEARTBEAT whose sequences reach SEQ_LIMIT are protocol errors on TCP and
/// garbage on UDP; nothing of them is written or published, so the mirror ring never holds a
/// `write_seq` producers refuse as corrupt.
#[test]
fn sequences_at_or_past_the_limit_are_refused() {
    let refused = |kind, seq| Err(MirrorError::Protocol(WireError::SeqLimit { kind, seq }));
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let mut m = tcp_mirror(&mut sink);
    assert_eq!(
        feed(&mut m, &data(u64::MAX - 1, 1, 0), &mut sink),
        refused(Kind::Data, u64::MAX - 1)
    );
    assert!(sink.writes.is_empty());
    assert_eq!(ring_write_seq(&sink), 0);
    // Up to the last sequence below the limit is fine; one record past it is not.
    let mut m = tcp_mirror(&mut sink);
    feed(&mut m, &data(SEQ_LIMIT - 2, 1, 0), &mut sink).unwrap();
    assert_eq!(
        feed(&mut m, &data(SEQ_LIMIT - 1, 2, 0), &mut sink),
        refused(Kind::Data, SEQ_LIMIT)
    );
    assert_eq!(sink.writes, [SEQ_LIMIT - 2]);
    assert_eq!(ring_write_seq(&sink), SEQ_LIMIT - 2);
    let mut m = tcp_mirror(&mut sink);
    assert_eq!(
        feed(&mut m, &gap(SEQ_LIMIT), &mut sink),
        refused(Kind::Gap, SEQ_LIMIT)
    );
    let mut m = tcp_mirror(&mut sink);
    assert_eq!(
        feed(&mut m, &heartbeat(0, u64::MAX), &mut sink),
        refused(Kind::Heartbeat, u64::MAX)
    );
    // UDP: dropped as garbage, no NAK asked for them; a repair over TCP is a protocol error.
    let (mut idx, mut dm) = ([HeldEntry::default(); 8], [0u8; 512]);
    let mut m = udp_mirror(&mut sink, HoldBack::new(&mut idx, &mut dm), false);
    assert!(!m.handle_datagram(ms(1), UDP_SRC, &data(u64::MAX - 1, 1, 0x22), &mut sink));
    assert!(!m.handle_datagram(ms(1), UDP_SRC, &heartbeat(0x22, SEQ_LIMIT), &mut sink));
    assert_eq!(m.counters().garbage_dropped, 2);
    assert_eq!(m.outstanding_nak(), None);
    assert_eq!(
        feed(&mut m, &data(SEQ_LIMIT, 1, 0), &mut sink),
        refused(Kind::Data, SEQ_LIMIT)
    );
    assert!(sink.writes.is_empty());
}

/// A GEOMETRY whose `seq` (the first record offered) is at or past SEQ_LIMIT is a protocol
/// error like DATA, GAP and HEARTBEAT past it: the mirror neither creates a ring for it nor
/// starts there. It used to be taken as the next sequence expected, and a UDP mirror then
/// sat at `next = u64::MAX`, refusing every record as past the limit, without an error.
#[test]
fn geometry_at_or_past_the_limit_is_refused() {
    let refused = |seq| {
        Err(MirrorError::Protocol(WireError::SeqLimit {
            kind: Kind::Geometry,
            seq,
        }))
    };
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    for (flags, mc) in [
        (0, None),
        (GEOMETRY_UDP_FOLLOWS, Some(multicast_repr(0x22))),
    ] {
        let made = sink.creations;
        for seq in [SEQ_LIMIT, u64::MAX] {
            let mut m = tcp_mirror_from_oldest(&sink);
            let _ = m.poll_transmit(ms(0), &mut [0u8; 64]);
            assert_eq!(
                feed(&mut m, &geometry_frames(flags, seq, mc), &mut sink),
                refused(seq),
                "flags {flags:#x}"
            );
            assert_eq!(
                m.failure(),
                Some(MirrorError::Protocol(WireError::SeqLimit {
                    kind: Kind::Geometry,
                    seq,
                }))
            );
            assert!(!m.is_udp());
            assert_eq!(sink.creations, made, "no ring made for it");
        }
        // The last sequence below the limit is a valid start.
        let mut m = tcp_mirror_from_oldest(&sink);
        let _ = m.poll_transmit(ms(0), &mut [0u8; 64]);
        feed(
            &mut m,
            &geometry_frames(flags, SEQ_LIMIT - 1, mc),
            &mut sink,
        )
        .unwrap();
        assert_eq!(m.next(), SEQ_LIMIT - 1);
        assert_eq!(m.is_udp(), mc.is_some());
    }
}

/// A blob ring record: an 8-byte meta and a BlobRef of `blob.len()`, then the blob.
fn blob_record(out: &mut Vec<u8>, seq: u64, blob_len: usize) {
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(&(blob_len as u32).to_le_bytes());
    out.extend_from_slice(&7u32.to_le_bytes());
    out.extend(core::iter::repeat_n(seq as u8, blob_len));
}

/// A blob longer than the mirror's arena (a corrupt or hostile source) leaves a hole that is
/// counted as skipped, not written; the frame publishes its last record written.
#[test]
fn blob_longer_than_the_arena_is_a_counted_hole() {
    let geo = Geometry::blob(8, 32, 0, 512).unwrap();
    let mut mem = Mem::new(geo.total_len().unwrap() as usize);
    let mut sink = Sink::on(&mut mem);
    let mut m = tcp_mirror_from_oldest(&sink);
    let _ = m.poll_transmit(ms(0), &mut [0u8; 64]);
    let mut b = [0u8; 64];
    let n = GeometryRepr::from_source(&geo, 0, 1)
        .unwrap()
        .emit(&mut b)
        .unwrap();
    feed(&mut m, &b[..n], &mut sink).unwrap();
    let mut recs = vec![];
    for (seq, len) in [(1, 10), (2, 600), (3, 513), (4, 512), (5, 600)] {
        blob_record(&mut recs, seq, len);
    }
    let d = DataRepr {
        flags: 0,
        seq: 1,
        count: 5,
        records: &recs,
    };
    let mut frame = vec![0u8; d.buffer_len()];
    d.emit(&mut frame).unwrap();
    feed(&mut m, &frame, &mut sink).unwrap();
    assert_eq!(sink.writes, [1, 4]);
    let c = m.counters();
    // 2..=3 are one hole, 5 another.
    assert_eq!((c.records_written, c.gaps, c.records_skipped), (2, 2, 3));
    assert_eq!((m.next(), ring_write_seq(&sink)), (6, 4));
    let mut got = [0u8; 24];
    let v = sink.inner.view().unwrap();
    assert_eq!(v.read_slot(4, &mut got), crate::ring::SlotRead::Ok);
    assert_ne!(v.read_slot(2, &mut got), crate::ring::SlotRead::Ok);
}

/// One datagram lost before 8192 held ones (the store's limit): the retransmission drains
/// them all in that one step, in order.
#[test]
#[cfg_attr(
    miri,
    ignore = "8192 datagrams through the mirror: minutes under Miri (the other hold-back \
              tests run the same code with small stores)"
)]
fn a_full_holdback_store_drains_in_one_step() {
    const HELD: usize = crate::replicate::holdback::MAX_HELD;
    const PER: u16 = 8;
    let mut idx = vec![HeldEntry::default(); HELD];
    let mut dm = vec![0u8; HELD * usize::from(PER) * 8];
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let mut m = udp_mirror(&mut sink, HoldBack::new(&mut idx, &mut dm), false);
    let per = u64::from(PER);
    let end = 1 + per * (HELD as u64 + 1);
    for seq in (1 + per..end).step_by(PER.into()) {
        assert!(m.handle_datagram(ms(1), UDP_SRC, &data(seq, PER, 0x22), &mut sink));
    }
    // Full: one more is dropped (and the hole still asked for).
    assert!(m.handle_datagram(ms(1), UDP_SRC, &data(end, 1, 0x22), &mut sink));
    assert_eq!(m.counters().holdback_dropped, 1);
    assert_eq!(nak_out(&mut m, ms(1)), Some((1, per)));
    feed(&mut m, &data(1, PER, 0), &mut sink).unwrap();
    assert_eq!(m.next(), end);
    assert_eq!(sink.writes, (1..end).collect::<Vec<u64>>());
    assert_eq!(ring_write_seq(&sink), end - 1);
    // `end` itself was dropped: asked for next.
    assert_eq!(m.outstanding_nak(), None);
    assert!(m.handle_datagram(ms(2), UDP_SRC, &heartbeat(0x22, end), &mut sink));
    assert_eq!(nak_out(&mut m, ms(2)), Some((end, end)));
}

/// Zero-sized records take no bytes of the hold-back store, while a DATA frame of them holds
/// up to 65,535 records in 16 bytes: the store took 8,192 such frames, 537 million records
/// for the one datagram that fills the hole before them to write in a single call (minutes
/// of a mirror deaf to everything else). Each held record now takes at least one byte of
/// the store, whose size bounds that work as it does for records with bytes.
#[test]
fn zero_sized_records_held_back_are_bounded_by_the_store() {
    // Frames of 4,096 records (enough to show it), a store of 6,000 bytes: room for one
    // frame, not two. Under Miri frames of 256 records and a store of 375 bytes, the same
    // proportions: writing the held frame's records out took most of its 21 s there.
    const FRAMES: u64 = 64;
    const PER: u16 = if cfg!(miri) { 256 } else { 4096 };
    const STORE: usize = if cfg!(miri) { 375 } else { 6000 };
    const _: () = assert!(STORE >= PER as usize && STORE < 2 * PER as usize);
    let geo = Geometry::spmc(8, 8, 8, 0, false).unwrap();
    assert_eq!(geo.record_len(), 0);
    let mut idx = vec![HeldEntry::default(); 8192];
    let mut dm = vec![0u8; STORE];
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let mut m = Mirror::new(
        MirrorConfig {
            start: Start::Oldest,
            ..multicast_unchecked()
        },
        SOURCE,
        &sink,
        HoldBack::new(&mut idx, &mut dm),
    );
    let _ = m.poll_transmit(ms(0), &mut [0u8; 64]);
    let mut hs = vec![0u8; 96];
    let n = GeometryRepr::from_source(&geo, GEOMETRY_UDP_FOLLOWS, 1)
        .unwrap()
        .emit(&mut hs)
        .unwrap();
    let k = multicast_repr(0x22).emit(&mut hs[n..]).unwrap();
    feed(&mut m, &hs[..n + k], &mut sink).unwrap();
    assert!(m.is_udp());
    let zero = |seq: u64, count: u16| {
        let mut b = [0u8; 16];
        crate::wire::HeaderRepr {
            kind: Kind::Data,
            flags: 0x22,
            count,
            len: 0,
            seq,
        }
        .emit(&mut b)
        .unwrap();
        b
    };
    let from = PeerAddr::new([10, 9, 9, 9], 1);
    for i in 0..FRAMES {
        assert!(m.handle_datagram(ms(1), from, &zero(2 + i * u64::from(PER), PER), &mut sink));
    }
    // One frame fits; the rest are dropped (and NAKed for later).
    assert_eq!(m.counters().holdback_dropped, FRAMES - 1);
    // The hole filled: what was held is written, and no more.
    assert!(m.handle_datagram(ms(1), from, &zero(1, 1), &mut sink));
    assert_eq!(sink.writes.len() as u64, 1 + u64::from(PER));
    assert_eq!(m.next(), 2 + u64::from(PER));
}
