//! Mirror tests of blob rings: blob records applied, replicated between real rings, empty
//! blobs and the BlobRef's byte order.

use super::mirror::unlingering_session_after_hello;
use super::*;

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
    let mut m = tcp_mirror_from_oldest(&sink);
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

/// A real blob ring (8 slots, 8-byte meta, 512-byte arena) replicated over TCP into a
/// mirror blob ring in memory: every message that is still intact at the source arrives
/// with its meta, blob bytes and flags; a blob overwritten in the source arena before it
/// was sent becomes a GAP and a hole, never wrong bytes; zero-length blobs get `{0, 0, 0}`.
#[test]
fn blob_ring_replicates_between_real_rings() {
    use crate::broadcast::blob::{BlobReader, BlobWriter, split_descriptor};

    let geo = Geometry::blob(8, 32, 0, 512).unwrap();
    let mut smem = Mem::new(geo.total_len().unwrap() as usize);
    // SAFETY: the test's own buffer, no other view of it exists yet.
    let v = unsafe { RingView::init(smem.region(), &geo) }.unwrap();
    let mut w = BlobWriter::new(v).unwrap();
    const LENS: [usize; 10] = [0, 100, 100, 60, 0, 148, 40, 10, 0, 120];
    let blob_of = |n: u64| -> Vec<u8> {
        (0..LENS[n as usize])
            .map(|i| (n as usize * 7 + i) as u8)
            .collect()
    };
    let push = |w: &mut BlobWriter, n: u64| {
        let mut d = [0u8; 24];
        d[..8].copy_from_slice(&(n * 1000).to_le_bytes());
        let p = w.push(&mut d, &blob_of(n), n as u32 + 1).unwrap();
        assert_eq!(p.seq, n);
    };
    for n in 1..=6 {
        push(&mut w, n);
    }
    let src = RingSource(*w.view());
    // Blobs take 64-byte-rounded spans: 1 at [0, 128), 2 at [128, 256), 3 at [256, 320),
    // none for 4, 5 at [320, 512), 6 on the next lap at [512, 576): 1 is overwritten.
    let mut buf = [0u8; 512];
    assert_eq!(src.read_record(1, &mut buf), ReadRecord::Lost);
    assert_eq!(src.read_record(2, &mut buf), ReadRecord::Ok(24 + 100));
    assert_eq!(src.read_record(4, &mut buf), ReadRecord::Ok(24));
    assert_eq!(src.read_record(6, &mut buf), ReadRecord::Ok(24 + 40));
    assert_eq!(
        src.read_record(5, &mut buf[..30]),
        ReadRecord::TooLarge { need: 24 + 148 }
    );
    assert_eq!(src.read_record(7, &mut buf), ReadRecord::Pending);

    let mut mmem = Mem::new(1 << 12);
    let mut sink = Sink::on(&mut mmem);
    let mut m = tcp_mirror_from_oldest(&sink);
    let mut s = unlingering_session_after_hello(&mut m, &src);
    let mut out = [0u8; 2048];
    let mut pump = |m: &mut Mirror<'_>, s: &mut SourceSession, sink: &mut Sink| {
        while let Some(n) = s.poll_transmit(ms(0), &src, &mut out) {
            feed(m, &out[..n], sink).unwrap();
        }
    };
    pump(&mut m, &mut s, &mut sink);
    // Later messages (9 overwrites 2's span, which was already sent).
    for n in 7..=9 {
        push(&mut w, n);
    }
    pump(&mut m, &mut s, &mut sink);
    assert_eq!(
        sink.writes,
        [2, 3, 4, 5, 6, 7, 8, 9],
        "1 was lost at the source"
    );

    let mirror = sink.inner.view().unwrap();
    assert!(mirror.geometry().has_arena());
    // SPMC, LATEST_WINS, SPARSE, WITH_ARENA; no WITH_REGISTRY: the count is 0 (§21.1).
    assert_eq!(mirror.geometry().flags.0, 0x0511);
    let mut r = BlobReader::new(*mirror).unwrap();
    let (mut d, mut blob) = ([0u8; 24], [0u8; 512]);
    let mut got = vec![];
    while let Some(rx) = r.recv(&mut d, &mut blob).unwrap() {
        let (meta, br) = split_descriptor(&d).unwrap();
        assert_eq!(meta, (rx.seq * 1000).to_le_bytes(), "meta of {}", rx.seq);
        assert_eq!(&blob[..rx.len], &blob_of(rx.seq)[..], "blob of {}", rx.seq);
        // Zero-length blobs lose their flags (spec §21.2).
        let flags = if rx.len == 0 { 0 } else { rx.seq as u32 + 1 };
        assert_eq!(br.flags, flags, "flags of {}", rx.seq);
        got.push(rx.seq);
    }
    // The mirror's arena is the source's size, filled in the same order from 2 on: 9's blob
    // (at [512, 640) there too) overwrote 2's, so a reader now skips 2 as lapped, as a
    // reader of the source does.
    assert_eq!(got, [3, 4, 5, 6, 7, 8, 9]);
    assert_eq!(r.lapped_count(), 1);
}

/// A zero-length blob is written as `{0, 0, 0}` (spec §21.2): its flags are not kept.
#[test]
fn mirror_writes_empty_blobs_as_the_empty_ref() {
    use crate::broadcast::blob::split_descriptor;

    let geo = Geometry::blob(8, 32, 0, 512).unwrap();
    let mut mem = Mem::new(geo.total_len().unwrap() as usize);
    // SAFETY: the test's own buffer, no other view of it exists yet.
    let v = unsafe { RingView::init(mem.region(), &geo) }.unwrap();
    let mut d = [0u8; 24];
    d[..8].copy_from_slice(&5u64.to_le_bytes());
    d[8..].copy_from_slice(&[0xee; 16]);
    write_received(&v, 1, &d, &[]);
    // A blob longer than this arena (a hostile source) leaves the sequence a hole.
    write_received(&v, 2, &d, &[1; 600]);
    let mut got = [0u8; 24];
    assert_eq!(v.read_slot(1, &mut got), crate::ring::SlotRead::Ok);
    let (meta, r) = split_descriptor(&got).unwrap();
    assert_eq!((meta, r.offset, r.len, r.flags), (&d[..8], 0, 0, 0));
    assert_eq!(v.read_slot(2, &mut got), crate::ring::SlotRead::Pending);
}

/// A mirror reads the BlobRef of a received blob record little-endian, as the wire carries
/// it (spec §18.4), and stores its own in the host's byte order: a big-endian mirror took
/// the flags 0x0102_0304 of the frame for 0x0403_0201.
#[test]
fn a_received_blob_ref_is_read_little_endian_and_stored_native() {
    use crate::broadcast::blob::split_descriptor;

    let geo = Geometry::blob(4, 32, 0, 256).unwrap();
    let mut mem = Mem::new(geo.total_len().unwrap() as usize);
    // SAFETY: the test's own buffer, no other view of it exists yet.
    let v = unsafe { RingView::init(mem.region(), &geo) }.unwrap();
    let mut wire = [0x55u8; 24];
    wire[8..16].copy_from_slice(&0x1234_5678_9ABC_DEF0u64.to_le_bytes());
    wire[16..20].copy_from_slice(&5u32.to_le_bytes());
    wire[20..24].copy_from_slice(&0x0102_0304u32.to_le_bytes());
    write_received(&v, 1, &wire, b"hello");
    v.publish(1);
    let mut slot = [0u8; 24];
    assert_eq!(v.read_slot(1, &mut slot), crate::ring::SlotRead::Ok);
    let (meta, r) = split_descriptor(&slot).unwrap();
    assert_eq!(meta, [0x55; 8]);
    assert_eq!((r.offset, r.len, r.flags), (0, 5, 0x0102_0304));
    assert_eq!(compare_received(&v, 1, &wire, b"hello"), Holds::Same);
}
