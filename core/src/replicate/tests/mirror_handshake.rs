//! Mirror tests: the HELLO of each start, and a held ring adopted or replaced at the
//! handshake.

use super::mirror_resume::push_tagged;
use super::*;

#[test]
fn mirror_hello_per_start_and_adopt_or_recreate() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let (mut idx, mut data_mem) = ([HeldEntry::default(); 4], [0u8; 256]);
    for (start, seq) in [
        (Start::Latest, 0),
        (Start::Oldest, u64::MAX),
        (Start::Sequence(0), 1),
        (Start::Sequence(7), 7),
        (Start::Sequence(u64::MAX), u64::MAX - 1),
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
    // Resume: HELLO 3, one record of overlap to check the resume; same layout, no RESET:
    // adopted. The source's copy of 3 is the mirror's: dropped, the mirror continues at 4.
    {
        let mut m = Mirror::new(
            MirrorConfig::default(),
            SOURCE,
            &sink,
            HoldBack::new(&mut idx, &mut data_mem),
        );
        assert_eq!(m.hello().seq, 3);
        let _ = m.poll_transmit(ms(0), &mut [0u8; 64]);
        feed(&mut m, &geometry_frames(0, 3, None), &mut sink).unwrap();
        assert_eq!(m.pending_resume_check(), Some(3));
        feed(&mut m, &data(3, 1, 0), &mut sink).unwrap();
        assert_eq!((sink.creations, m.next()), (1, 4));
        assert_eq!(m.counters().resumes_verified, 1);
        assert_eq!(sink.writes, [1, 2, 3], "3 was not written again");
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
    // The first creation replaced nothing; the RESET replaced the ring held, and said so.
    assert_eq!(sink.replaced, [Replace::Reset { source_next: 2 }]);
}

/// A held ring without FLAG_SPARSE (a plain ring at the mirror's path) of the source's very
/// layout is not adopted: the mirror leaves holes (GAP, jumps), and that ring's readers
/// would take each for a record being written and stall there for a lap. It is replaced,
/// with the reason, by a mirror ring (SPARSE), which a later resume adopts.
#[test]
fn a_held_ring_without_sparse_is_replaced_not_adopted() {
    let mut mem = Mem::new(4096);
    let geo = Geometry::spmc(8, 16, 8, 0, false).unwrap();
    assert!(!geo.flags.has(crate::layout::Flags::SPARSE));
    {
        // SAFETY: the `Mem` is this test's; this view is gone before the sink attaches.
        let v = unsafe { RingView::init(mem.region(), &geo) }.unwrap();
        push_tagged(&RingSource(v), 3, 0);
    }
    let mut sink = Sink::on(&mut mem);
    assert_eq!(sink.existing(), Some((geo, 3)));
    let mut m = Mirror::new(
        MirrorConfig::default(),
        SOURCE,
        &sink,
        HoldBack::new(&mut [], &mut []),
    );
    assert_eq!(m.hello().seq, 3, "asked as any resume");
    let _ = m.poll_transmit(ms(0), &mut [0u8; 64]);
    // The same layout and no RESET: ringfire would adopt it (spec §21.1 compares no flags).
    feed(&mut m, &geometry_frames(0, 3, None), &mut sink).unwrap();
    assert_eq!(sink.creations, 1, "adopted");
    assert_eq!(sink.replaced, [Replace::NotSparse]);
    assert_eq!(m.pending_resume_check(), None);
    let (now, w) = sink.existing().unwrap();
    assert!(now.flags.has(crate::layout::Flags::SPARSE));
    assert_eq!((w, m.next()), (0, 3));
    feed(&mut m, &data(3, 2, 0), &mut sink).unwrap();
    assert_eq!(sink.writes, [3, 4]);
    // The mirror's own ring is resumed: adopted, checked, nothing replaced.
    m.reconnect(Start::Resume, &sink);
    assert_eq!(m.hello().seq, 4);
    let _ = m.poll_transmit(ms(0), &mut [0u8; 64]);
    feed(&mut m, &geometry_frames(0, 4, None), &mut sink).unwrap();
    assert_eq!(m.pending_resume_check(), Some(4));
    feed(&mut m, &data(4, 2, 0), &mut sink).unwrap();
    assert_eq!((sink.creations, m.counters().resumes_verified), (1, 1));
    assert_eq!(sink.writes, [3, 4, 5]);
    assert_eq!(sink.replaced, [Replace::NotSparse]);
}

/// The other reasons a held ring is replaced at the handshake: a start other than resume
/// (whatever the ring held), and another layout.
#[test]
fn a_held_ring_is_replaced_with_the_reason_at_the_handshake() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let session = |start, geometry: &[u8], sink: &mut Sink| {
        let mut m = Mirror::new(
            MirrorConfig {
                start,
                ..MirrorConfig::default()
            },
            SOURCE,
            &*sink,
            HoldBack::new(&mut [], &mut []),
        );
        let _ = m.poll_transmit(ms(0), &mut [0u8; 64]);
        feed(&mut m, geometry, sink).unwrap();
        let next = m.next();
        feed(&mut m, &data(next, 1, 0), sink).unwrap();
    };
    session(Start::Oldest, &geometry_frames(0, 1, None), &mut sink);
    assert_eq!(
        (sink.creations, sink.replaced.len()),
        (1, 0),
        "nothing held"
    );
    session(Start::Latest, &geometry_frames(0, 5, None), &mut sink);
    session(Start::Sequence(7), &geometry_frames(0, 7, None), &mut sink);
    let other = Geometry::spmc(16, 16, 8, 0, false).unwrap();
    let mut frame = [0u8; 64];
    let n = GeometryRepr::from_source(&other, 0, 7)
        .unwrap()
        .emit(&mut frame)
        .unwrap();
    session(Start::Resume, &frame[..n], &mut sink);
    assert_eq!(sink.creations, 4);
    assert_eq!(
        sink.replaced,
        [
            Replace::FreshStart(Start::Latest),
            Replace::FreshStart(Start::Sequence(7)),
            Replace::Layout,
        ]
    );
    assert_eq!(sink.existing().map(|(g, w)| (g.capacity, w)), Some((16, 7)));
}
