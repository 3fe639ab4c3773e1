//! Mirror tests: the TCP stream (GAPs, jumps, restarts, reconnects), `compare_received`
//! and zero-sized records.

use super::*;

#[test]
fn skipped_record_counts_saturate_under_hostile_jumps() {
    // Found by the mirror fuzz target: jumps of nearly 2^64, twice (a restart in between
    // brings `next` back down), overflowed the sum. Jumps now stop below SEQ_LIMIT (2^63),
    // so it takes three.
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let mut m = tcp_mirror_from_oldest(&sink);
    let _ = m.poll_transmit(ms(0), &mut [0u8; 64]);
    feed(&mut m, &geometry_frames(0, 1, None), &mut sink).unwrap();
    let far = crate::layout::SEQ_LIMIT - 1;
    for _ in 0..3 {
        let mut gap = [0u8; 16];
        GapRepr { seq: far }.emit(&mut gap).unwrap();
        feed(&mut m, &gap, &mut sink).unwrap();
        // Backwards: a restarted source, `next` back to 1.
        feed(&mut m, &data(1, 1, 0), &mut sink).unwrap();
    }
    assert_eq!(m.counters().gaps, 6);
    assert_eq!(m.counters().records_skipped, u64::MAX);
}

#[test]
fn mirror_tcp_gap_jump_and_restart() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let mut m = tcp_mirror_from_oldest(&sink);
    let _ = m.poll_transmit(ms(0), &mut [0u8; 64]);
    feed(&mut m, &geometry_frames(0, 1, None), &mut sink).unwrap();
    feed(&mut m, &data(1, 2, 0), &mut sink).unwrap();
    let mut gap = [0u8; 16];
    GapRepr { seq: 6 }.emit(&mut gap).unwrap();
    feed(&mut m, &gap, &mut sink).unwrap();
    feed(&mut m, &data(8, 1, 0), &mut sink).unwrap();
    assert_eq!(sink.writes, [1, 2, 8]);
    assert_eq!(m.counters().gaps, 2);
    // 3..=5 by the GAP, 6..=7 by the jump.
    assert_eq!(m.counters().records_skipped, 5);
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
    assert_eq!(sink.replaced, [Replace::Backwards { seq: 1, next: 9 }]);
    // A restart starts a new ring: nothing of it was skipped.
    assert_eq!(m.counters().records_skipped, 5);
    // A heartbeat below next is only recorded (spec §21.3): no restart, nothing wiped.
    feed(&mut m, &data(2, 5, 0), &mut sink).unwrap();
    let mut hb = [0u8; 16];
    HeartbeatRepr { flags: 0, seq: 3 }.emit(&mut hb).unwrap();
    feed(&mut m, &hb, &mut sink).unwrap();
    assert_eq!((m.counters().restarts, m.next(), sink.creations), (1, 7, 2));
    assert_eq!(m.source_seq(), Some(3));
    // Only DATA, GAP and HEARTBEAT are allowed in TCP mode.
    let mut nak = [0u8; 24];
    NakRepr { from: 1, to: 2 }.emit(&mut nak).unwrap();
    assert_eq!(
        feed(&mut m, &nak, &mut sink),
        Err(MirrorError::UnexpectedFrame {
            kind: crate::wire::Kind::Nak,
            seq: 1,
            expected: "DATA, GAP or HEARTBEAT"
        })
    );
    assert_eq!(feed(&mut m, &hb, &mut sink), Err(MirrorError::Closed));
    assert_eq!(m.poll_timeout(), None, "a closed mirror has no timers");
}

#[test]
fn mirror_reconnect_resumes() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
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
        FrameRepr::Hello(HelloRepr { seq: 3, flags: 1 })
    );
    // Same layout, no RESET: the ring is adopted; the source's 3 matches the mirror's, and
    // the mirror continues at 4.
    feed(&mut m, &geometry_frames(0, 3, None), &mut sink).unwrap();
    feed(&mut m, &data(3, 3, 0), &mut sink).unwrap();
    assert_eq!(
        (sink.creations, sink.writes.as_slice()),
        (1, &[1u64, 2, 3, 4, 5][..])
    );
    assert_eq!(
        (m.counters().resumes_verified, m.counters().restarts),
        (1, 0)
    );
}

/// `compare_received` on a fixed-record ring: the same bytes, other bytes, a sequence the
/// ring does not hold (not yet, or no more).
#[test]
fn compare_received_fixed_records() {
    let geo = Geometry::spmc(4, 16 + 8, 8, 0, false).unwrap();
    let mut mem = Mem::new(geo.total_len().unwrap() as usize);
    // SAFETY: the test's own buffer, no other view of it exists yet.
    let v = unsafe { RingView::init(mem.region(), &geo) }.unwrap();
    let rec = |s: u64| [s.to_le_bytes(), [7; 8]].concat();
    for s in 1..=6 {
        v.write_slot(s, &rec(s));
    }
    v.publish(6);
    assert_eq!(compare_received(&v, 6, &rec(6), &[]), Holds::Same);
    let mut other = rec(6);
    other[15] ^= 1;
    assert_eq!(compare_received(&v, 6, &other, &[]), Holds::Different);
    assert_eq!(
        compare_received(&v, 6, &rec(6)[..8], &[]),
        Holds::Different,
        "another length"
    );
    assert_eq!(compare_received(&v, 7, &rec(7), &[]), Holds::Unknown);
    assert_eq!(
        compare_received(&v, 2, &rec(2), &[]),
        Holds::Unknown,
        "lapped"
    );
    // Records without payload bytes: the sequence word decides.
    let geo = Geometry::spmc(4, 8, 8, 0, false).unwrap();
    let mut mem = Mem::new(geo.total_len().unwrap() as usize);
    // SAFETY: as above.
    let v = unsafe { RingView::init(mem.region(), &geo) }.unwrap();
    v.write_slot(1, &[]);
    assert_eq!(compare_received(&v, 1, &[], &[]), Holds::Same);
    assert_eq!(compare_received(&v, 2, &[], &[]), Holds::Unknown);
}

/// `compare_received` on a blob ring: meta, length, flags (not for an empty blob) and the
/// blob's bytes, past the first compare chunk too; a blob since overwritten in the arena
/// leaves the descriptor to decide.
#[test]
fn compare_received_blob_records() {
    use crate::broadcast::blob::set_descriptor_ref;
    use crate::layout::BlobRef;

    let geo = Geometry::blob(8, 32, 0, 1024).unwrap();
    let mut mem = Mem::new(geo.total_len().unwrap() as usize);
    // SAFETY: the test's own buffer, no other view of it exists yet.
    let v = unsafe { RingView::init(mem.region(), &geo) }.unwrap();
    // A descriptor as it comes on the wire: meta, then the source's BlobRef.
    let desc = |meta: u64, len: usize, flags: u32| {
        let mut d = [0u8; 24];
        d[..8].copy_from_slice(&meta.to_le_bytes());
        let r = BlobRef {
            offset: 4096,
            len: len as u32,
            flags,
        };
        assert!(set_descriptor_ref(&mut d, &r));
        d
    };
    let blob: Vec<u8> = (0..600).map(|i| (i * 7) as u8).collect();
    write_received(&v, 1, &desc(11, 600, 3), &blob);
    write_received(&v, 2, &desc(22, 0, 9), &[]);
    v.publish(2);
    assert_eq!(
        compare_received(&v, 1, &desc(11, 600, 3), &blob),
        Holds::Same
    );
    assert_eq!(
        compare_received(&v, 1, &desc(12, 600, 3), &blob),
        Holds::Different,
        "meta"
    );
    assert_eq!(
        compare_received(&v, 1, &desc(11, 600, 4), &blob),
        Holds::Different,
        "flags"
    );
    assert_eq!(
        compare_received(&v, 1, &desc(11, 599, 3), &blob[..599]),
        Holds::Different,
        "length"
    );
    let mut late = blob.clone();
    late[599] ^= 0x80;
    assert_eq!(
        compare_received(&v, 1, &desc(11, 600, 3), &late),
        Holds::Different,
        "a byte past the first chunk"
    );
    // An empty blob's flags are not kept (spec §21.2), so they are not compared.
    assert_eq!(compare_received(&v, 2, &desc(22, 0, 1), &[]), Holds::Same);
    assert_eq!(
        compare_received(&v, 2, &desc(22, 5, 9), b"abcde"),
        Holds::Different
    );
    // 1's blob is overwritten in the arena: the descriptor alone decides.
    write_received(&v, 3, &desc(33, 1000, 0), &[5; 1000]);
    v.publish(3);
    assert_eq!(
        compare_received(&v, 1, &desc(11, 600, 3), &late),
        Holds::Same
    );
    assert_eq!(
        compare_received(&v, 1, &desc(12, 600, 3), &blob),
        Holds::Different
    );
}

/// A ring of zero-sized records (element_size 8: the slot holds only its sequence word, as
/// a `RingProducer::<()>` or a C ring of empty structs makes) is valid (spec §18.2), and its
/// DATA frames carry `len = count * 0 = 0`. The mirror used to refuse them as
/// `BadRecordLen { record_len: 0 }`, so such a ring could never be mirrored.
#[test]
fn zero_sized_records_are_mirrored() {
    let geo = Geometry::spmc(8, 8, 8, 0, false).unwrap();
    assert_eq!(geo.record_len(), 0);
    let mut smem = Mem::new(geo.total_len().unwrap() as usize);
    // SAFETY: the test's own buffer, no other view of it exists yet.
    let v = unsafe { RingView::init(smem.region(), &geo) }.unwrap();
    for s in 1..=5 {
        v.write_slot(s, &[]);
    }
    v.publish(5);
    let src = RingSource(v);

    let mut mmem = Mem::new(4096);
    let mut sink = Sink::on(&mut mmem);
    let mut m = tcp_mirror_from_oldest(&sink);
    let mut s = unlingering_session_after_hello(&mut m, &src);
    let mut out = [0u8; 1024];
    let mut pump = |m: &mut Mirror<'_>, s: &mut SourceSession, sink: &mut Sink| {
        while let Some(n) = s.poll_transmit(ms(0), &src, &mut out) {
            feed(m, &out[..n], sink).unwrap();
        }
    };
    pump(&mut m, &mut s, &mut sink);
    for seq in 6..=9 {
        v.write_slot(seq, &[]);
        v.publish(seq);
    }
    pump(&mut m, &mut s, &mut sink);
    assert_eq!(sink.writes, (1..=9).collect::<Vec<_>>());
    assert_eq!(m.next(), 10);
    let mirror = sink.inner.view().unwrap();
    assert_eq!(mirror.geometry().element_size, 8);
    assert_eq!(mirror.write_seq().load(crate::sync::Ordering::Relaxed), 9);
    // Capacity 8: the last eight are held.
    for seq in 2..=9 {
        assert_eq!(mirror.read_slot(seq, &mut []), crate::ring::SlotRead::Ok);
    }
}

/// A TCP source session that never lingers (each record sent as soon as it can be), after
/// the HELLO `m` sends.
pub(super) fn unlingering_session_after_hello(
    m: &mut Mirror<'_>,
    src: &RingSource,
) -> SourceSession {
    let cfg = SourceConfig {
        pacing: Pacing::Fixed {
            linger: Duration::ZERO,
        },
        ..SourceConfig::default()
    };
    let mut s = SourceSession::new(cfg, MIRROR_IP, ms(0));
    let mut b = [0u8; 64];
    let t = m.poll_transmit(ms(0), &mut b).expect("HELLO");
    s.handle_stream(ms(0), &b[..t.len], src, None).unwrap();
    s
}
