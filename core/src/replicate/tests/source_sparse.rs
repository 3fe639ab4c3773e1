//! Source tests of sparse (hub) rings: a HELLO after a hole, `collect` at a hole, GAPs over
//! holes in TCP mode and in NAK answers, the UDP sender past a hole, and a long hole passed
//! in bounded steps.

use super::source_nak::{drain_answers, multicast_session, nak};
use super::*;

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
