//! Source tests of NAK answers (spec §20.4): the answer to a range, the 65,535-record cap,
//! repeats answered once, more NAKs than the queue holds, and a session closed in the middle
//! of a read.

use super::source::MULTICAST;
use super::*;

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

pub(super) fn nak(from: u64, to: u64) -> [u8; 24] {
    let mut b = [0u8; 24];
    NakRepr { from, to }.emit(&mut b).unwrap();
    b
}

/// Sends everything the session has to send now: the (first, last) sequence of each DATA
/// frame and the sequence of each GAP, in order.
pub(super) fn drain_answers(
    s: &mut SourceSession,
    src: &RingSource,
) -> (Vec<(u64, u64)>, Vec<u64>) {
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

pub(super) fn multicast_session(src: &RingSource) -> SourceSession {
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
