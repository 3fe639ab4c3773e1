//! Mirror tests: the resume check (see the mirror module docs), a mirror reconnecting to
//! a source that may have restarted or been replaced.

use super::*;

/// A u64 ring of capacity 8 whose record n is `n | tag << 56`, published up to `w`: two
/// incarnations (tags) hold different bytes under the same sequence.
fn tagged(mem: &mut Mem, w: u64, tag: u64) -> RingSource {
    let geo = Geometry::spmc(8, 16, 8, 0, false).unwrap();
    // SAFETY: each test gives a `Mem` of its own to one source: no other view of it exists.
    let v = unsafe { RingView::init(mem.region(), &geo) }.unwrap();
    let src = RingSource(v);
    push_tagged(&src, w, tag);
    src
}

pub(super) fn push_tagged(src: &RingSource, upto: u64, tag: u64) {
    for s in src.write_seq() + 1..=upto {
        src.0.write_slot(s, &(s | tag << 56).to_le_bytes());
    }
    src.0.publish(upto);
}

/// A TCP source session on `src` answering the mirror's HELLO, everything it sends fed to
/// the mirror.
fn tcp_session(m: &mut Mirror<'_>, src: &RingSource, sink: &mut Sink) {
    let mut b = [0u8; 64];
    let t = m.poll_transmit(ms(0), &mut b).expect("HELLO");
    let cfg = SourceConfig {
        pacing: Pacing::Fixed {
            linger: Duration::ZERO,
        },
        ..SourceConfig::default()
    };
    let mut s = SourceSession::new(cfg, MIRROR_IP, ms(0));
    s.handle_stream(ms(0), &b[..t.len], src, None).unwrap();
    let mut out = [0u8; 1024];
    while let Some(n) = s.poll_transmit(ms(0), src, &mut out) {
        feed(m, &out[..n], sink).unwrap();
    }
}

/// The tag of every record `from..=to` of the mirror ring (`None` where it holds none),
/// and its write_seq.
fn mirror_tags(sink: &Sink, from: u64, to: u64) -> (Vec<Option<u64>>, u64) {
    let v = sink.inner.view().unwrap();
    let mut b = [0u8; 8];
    let tags = (from..=to)
        .map(|s| {
            (v.read_slot(s, &mut b) == crate::ring::SlotRead::Ok).then(|| {
                let r = u64::from_le_bytes(b);
                assert_eq!(r & !(0xff << 56), s, "record {s} under its sequence");
                r >> 56
            })
        })
        .collect();
    (tags, v.write_seq().load(crate::sync::Ordering::Relaxed))
}

/// A mirror that holds records 1..=5 of incarnation 1, mirrored over TCP.
fn holding_five(sink: &mut Sink) -> Mirror<'static> {
    let mut smem = Mem::new(4096);
    let a = tagged(&mut smem, 5, 1);
    let mut m = tcp_mirror_from_oldest(&*sink);
    tcp_session(&mut m, &a, sink);
    assert_eq!(m.next(), 6);
    m.reconnect(Start::Resume, &*sink);
    m
}

/// Resuming at the same source: HELLO asks for the last record held, the source's copy
/// matches and is dropped, and the ring continues without a duplicate or a loss.
#[test]
fn resume_checks_the_last_record_held_and_continues_the_same_ring() {
    let mut smem = Mem::new(4096);
    let a = tagged(&mut smem, 5, 1);
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let mut m = tcp_mirror_from_oldest(&sink);
    tcp_session(&mut m, &a, &mut sink);
    push_tagged(&a, 8, 1);
    m.reconnect(Start::Resume, &sink);
    assert_eq!(m.hello().seq, 5, "one record of overlap");
    tcp_session(&mut m, &a, &mut sink);
    let c = m.counters();
    assert_eq!(
        (c.resumes_verified, c.resumes_unverified, c.restarts, c.gaps),
        (1, 0, 0, 0)
    );
    assert_eq!(sink.creations, 1);
    assert_eq!(sink.writes, (1..=8).collect::<Vec<u64>>(), "5 written once");
    assert_eq!(m.resume_check(), Some((5, Holds::Same)));
    assert_eq!(mirror_tags(&sink, 1, 8), (vec![Some(1); 8], 8));
    assert_eq!(c.records_written, 8);
}

/// The producer restarted and its new ring has passed the mirror's position before the
/// mirror reconnects: no RESET (the mirror asks for less than the new ring holds), so
/// before the check the mirror appended the new ring's 6.. to the old ring's 1..=5. The
/// source's record 5 differs from the mirror's: the ring is recreated and holds the new
/// ring's records only.
#[test]
fn resume_at_a_restarted_source_past_the_position_recreates_the_ring() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let mut m = holding_five(&mut sink);
    let mut smem = Mem::new(4096);
    let b = tagged(&mut smem, 7, 2);
    tcp_session(&mut m, &b, &mut sink);
    let c = m.counters();
    assert_eq!(
        (c.restarts, c.resumes_verified, c.resumes_unverified),
        (1, 0, 0)
    );
    assert_eq!(sink.creations, 2);
    assert_eq!(m.resume_check(), Some((5, Holds::Different)));
    assert_eq!(sink.replaced, [Replace::Differs { seq: 5 }]);
    assert_eq!(
        sink.writes,
        [5, 6, 7],
        "the new ring from the record compared"
    );
    let (tags, w) = mirror_tags(&sink, 1, 7);
    assert_eq!(w, 7);
    assert_eq!(
        tags,
        [None, None, None, None, Some(2), Some(2), Some(2)],
        "nothing of the old ring is left"
    );
    // The new ring's later records follow.
    push_tagged(&b, 9, 2);
    m.reconnect(Start::Resume, &sink);
    tcp_session(&mut m, &b, &mut sink);
    assert_eq!(mirror_tags(&sink, 5, 9), (vec![Some(2); 5], 9));
    assert_eq!(
        (m.counters().restarts, m.counters().resumes_verified),
        (1, 1)
    );
}

/// What the check cannot see: a source that no longer holds the last record (GEOMETRY
/// `seq` past it, a GAP past it, DATA after it) leaves the resume unverified and counted;
/// the mirror goes on after it as the reference does, counting only real holes.
#[test]
fn resume_the_source_cannot_answer_is_counted_unverified() {
    let gap = |seq| {
        let mut b = vec![0u8; 16];
        GapRepr { seq }.emit(&mut b).unwrap();
        b
    };
    // A ringwire source whose ring has lapped the mirror's 5: GEOMETRY 9, then GAP(9).
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let mut m = holding_five(&mut sink);
    let mut smem = Mem::new(4096);
    let a = tagged(&mut smem, 16, 1);
    tcp_session(&mut m, &a, &mut sink);
    let c = m.counters();
    assert_eq!((c.resumes_unverified, c.restarts, c.gaps), (1, 0, 1));
    assert_eq!(c.records_skipped, 3, "6..=8");
    assert_eq!(m.resume_check(), Some((5, Holds::Unknown)));
    assert_eq!(m.pending_resume_check(), None);
    assert_eq!(mirror_tags(&sink, 9, 16).1, 16);
    // GEOMETRY at 5, then: GAP(6), record 5 lost at the source (nothing skipped); GAP(8);
    // DATA from 7 (6 skipped).
    for (frame, skipped) in [(gap(6), 0), (gap(8), 2), (tagged_data(7, 1, 0, 1), 1)] {
        let mut mem = Mem::new(4096);
        let mut sink = Sink::on(&mut mem);
        let mut m = holding_five(&mut sink);
        let _ = m.poll_transmit(ms(0), &mut [0u8; 64]);
        feed(&mut m, &geometry_frames(0, 5, None), &mut sink).unwrap();
        assert_eq!(m.pending_resume_check(), Some(5));
        feed(&mut m, &frame, &mut sink).unwrap();
        let c = m.counters();
        assert_eq!(
            (c.resumes_unverified, c.restarts, c.records_skipped),
            (1, 0, skipped),
            "{frame:?}"
        );
        assert_eq!(c.gaps, u64::from(skipped > 0));
        assert_eq!(m.resume_check(), Some((5, Holds::Unknown)));
        assert_eq!(sink.creations, 1);
    }
}

/// TCP DATA entirely below the record to compare went backwards: a restart, as before.
#[test]
fn resume_data_below_the_record_compared_is_a_restart() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let mut m = holding_five(&mut sink);
    let _ = m.poll_transmit(ms(0), &mut [0u8; 64]);
    feed(&mut m, &geometry_frames(0, 5, None), &mut sink).unwrap();
    feed(&mut m, &tagged_data(2, 2, 0, 2), &mut sink).unwrap();
    assert_eq!((m.counters().restarts, m.next()), (1, 4));
    assert_eq!(m.pending_resume_check(), None);
    assert_eq!(mirror_tags(&sink, 1, 3), (vec![None, Some(2), Some(2)], 3));
}

/// Over UDP the source streams no history: the mirror asks for the record to compare at
/// once (NAK 5..5). Live datagrams past it wait in the hold-back store. A different answer
/// recreates the ring, and the held datagrams (from this source) follow in it.
#[test]
fn resume_over_udp_naks_the_record_to_compare() {
    let mc = multicast_repr(0x33);
    for (tag, restarts, verified) in [(2, 1, 0), (1, 0, 1)] {
        let mut mem = Mem::new(4096);
        let mut sink = Sink::on(&mut mem);
        let _ = holding_five(&mut sink);
        let (mut idx, mut dm) = ([HeldEntry::default(); 8], [0u8; 512]);
        // A new connection with hold-back storage.
        let mut m = Mirror::new(
            multicast_unchecked(),
            SOURCE,
            &sink,
            HoldBack::new(&mut idx, &mut dm),
        );
        let _ = m.poll_transmit(ms(0), &mut [0u8; 64]);
        assert_eq!(m.hello().seq, 5);
        feed(
            &mut m,
            &geometry_frames(GEOMETRY_UDP_FOLLOWS, 5, Some(mc)),
            &mut sink,
        )
        .unwrap();
        assert!(m.is_udp());
        assert_eq!(nak_out(&mut m, ms(0)), Some((5, 5)));
        assert!(m.handle_datagram(ms(1), UDP_SRC, &tagged_data(9, 2, 0x33, tag), &mut sink));
        assert_eq!(m.pending_resume_check(), Some(5));
        // The repeat asks for everything up to the held datagram.
        assert_eq!(nak_out(&mut m, ms(20)), Some((5, 8)));
        feed(&mut m, &tagged_data(5, 4, 0, tag), &mut sink).unwrap();
        let c = m.counters();
        assert_eq!(
            (c.restarts, c.resumes_verified, sink.creations),
            (restarts, verified, 1 + restarts as u32),
            "tag {tag}"
        );
        // The ring holds 8: 3..=10.
        let (tags, w) = mirror_tags(&sink, 3, 10);
        assert_eq!(w, 10);
        if tag == 2 {
            assert_eq!(tags[..2], [None; 2]);
            assert_eq!(tags[2..], [Some(2); 6]);
        } else {
            assert_eq!(tags, [Some(1); 8]);
        }
        assert_eq!(m.outstanding_nak(), None);
    }
}

/// A live datagram that carries the record to compare settles the check before the NAK is
/// answered; the late answer is then a duplicate.
#[test]
fn resume_over_udp_checks_a_live_datagram() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let _ = holding_five(&mut sink);
    let (mut idx, mut dm) = ([HeldEntry::default(); 8], [0u8; 512]);
    let mut m = Mirror::new(
        multicast_unchecked(),
        SOURCE,
        &sink,
        HoldBack::new(&mut idx, &mut dm),
    );
    let _ = m.poll_transmit(ms(0), &mut [0u8; 64]);
    let mc = multicast_repr(0x33);
    feed(
        &mut m,
        &geometry_frames(GEOMETRY_UDP_FOLLOWS, 5, Some(mc)),
        &mut sink,
    )
    .unwrap();
    assert!(m.handle_datagram(ms(1), UDP_SRC, &tagged_data(4, 3, 0x33, 1), &mut sink));
    assert_eq!(m.pending_resume_check(), None);
    assert_eq!(m.outstanding_nak(), None, "nothing missing any more");
    feed(&mut m, &tagged_data(5, 1, 0, 1), &mut sink).unwrap();
    let c = m.counters();
    assert_eq!(
        (c.resumes_verified, c.restarts, c.duplicates_dropped),
        (1, 0, 1)
    );
    assert_eq!(mirror_tags(&sink, 1, 6), (vec![Some(1); 6], 6));
}

/// A sink that cannot recreate its ring.
struct NoRecreate(Sink);

impl RecordSink for NoRecreate {
    fn existing(&self) -> Option<(Geometry, u64)> {
        self.0.existing()
    }
    fn recreate(&mut self, _: &Geometry) -> Result<(), SinkError> {
        Err(SinkError::Storage)
    }
    fn write(&mut self, seq: u64, fixed: &[u8], blob: &[u8]) {
        self.0.write(seq, fixed, blob)
    }
    fn publish(&mut self, seq: u64) {
        self.0.publish(seq)
    }
    fn holds(&self, seq: u64, fixed: &[u8], blob: &[u8]) -> Holds {
        self.0.holds(seq, fixed, blob)
    }
}

/// A restart found by a datagram whose ring cannot be recreated closes the mirror, and the
/// driver learns why from `failure`; nothing is written.
#[test]
fn resume_restart_that_cannot_recreate_the_ring_closes_the_mirror() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let _ = holding_five(&mut sink);
    let mut sink = NoRecreate(sink);
    let mut m = Mirror::new(
        multicast_unchecked(),
        SOURCE,
        &sink,
        HoldBack::new(&mut [], &mut []),
    );
    let _ = m.poll_transmit(ms(0), &mut [0u8; 64]);
    let mc = multicast_repr(0x33);
    feed(
        &mut m,
        &geometry_frames(GEOMETRY_UDP_FOLLOWS, 5, Some(mc)),
        &mut sink,
    )
    .unwrap();
    assert_eq!(m.failure(), None);
    assert!(!m.handle_datagram(ms(1), UDP_SRC, &tagged_data(5, 2, 0x33, 2), &mut sink));
    assert_eq!(m.failure(), Some(MirrorError::Sink(SinkError::Storage)));
    assert!(!m.is_live());
    assert_eq!(sink.0.writes, [1, 2, 3, 4, 5], "only the first session's");
    // A new connection starts over.
    m.reconnect(Start::Resume, &sink);
    assert_eq!(m.failure(), None);
}
