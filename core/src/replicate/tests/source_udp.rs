//! Source tests of the UDP sender and `collect`: records passed while no one listens, PUNCH,
//! EMSGSIZE, heartbeats and duplicates, the byte budget, an MTU above the largest datagram,
//! and a blob record's byte order on the wire.

use super::*;

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
