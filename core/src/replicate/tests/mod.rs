//! Unit tests of the source, UDP sender and mirror state machines against rings in memory.
//! Shared helpers live here; the tests are in `source*.rs`, `mirror*.rs` and
//! the files named for what they test.

mod corrupt_slot;
mod long_frame;
mod mirror;
mod mirror_blob;
mod mirror_handshake;
mod mirror_input;
mod mirror_nak;
mod mirror_resume;
mod mirror_sender;
mod mirror_truncated;
mod mirror_udp;
mod mpmc_tickets;
mod source;
mod source_nak;
mod source_sparse;
mod source_udp;
mod stuck_slot;

pub(super) use super::*;
use crate::layout::Geometry;
use crate::region::Region;
use crate::ring::RingView;
use crate::testutil::{Word, words};
use crate::wire::{
    DataRepr, FrameRepr, GEOMETRY_RESET, GEOMETRY_UDP_FOLLOWS, GapRepr, GeometryRepr,
    HeartbeatRepr, HelloRepr, Kind, MulticastRepr, NakRepr, PunchRepr, RecordFormat, WireError,
};
pub(super) use holdback::HeldEntry;

pub(super) const FMT: RecordFormat = RecordFormat::Fixed { record_len: 8 };
pub(super) const MIRROR_IP: PeerAddr = PeerAddr::new([10, 0, 0, 2], 40000);
pub(super) const SOURCE: PeerAddr = PeerAddr::new([10, 0, 0, 1], 9000);
pub(super) const UDP_SRC: PeerAddr = PeerAddr::new([10, 0, 0, 1], 17403);

pub(super) fn ms(n: u64) -> Instant {
    Instant::from_nanos(n * 1_000_000)
}

pub(super) struct Mem(pub(super) Vec<Word>);
impl Mem {
    fn new(bytes: usize) -> Mem {
        Mem(words(bytes / 8))
    }
    fn region(&mut self) -> Region {
        // SAFETY: the vector is 8-aligned, outlives the test's use of the region and is only
        // accessed through it.
        unsafe { Region::from_raw_parts(self.0.as_mut_ptr().cast(), self.0.len() * 8) }.unwrap()
    }
}

/// A u64 ring of capacity 8 holding records 1..=w (record n = n).
pub(super) fn source(mem: &mut Mem, w: u64) -> RingSource {
    let geo = Geometry::spmc(8, 16, 8, 0, false).unwrap();
    // SAFETY: each test gives a `Mem` of its own to one source or one sink: no other view
    // of it exists yet.
    let v = unsafe { RingView::init(mem.region(), &geo) }.unwrap();
    for s in 1..=w {
        v.write_slot(s, &s.to_le_bytes());
    }
    v.publish(w);
    RingSource(v)
}

pub(super) fn push(src: &RingSource, upto: u64) {
    let w = src.write_seq();
    for s in w + 1..=upto {
        src.0.write_slot(s, &s.to_le_bytes());
    }
    src.0.publish(upto);
}

pub(super) fn hello(seq: u64, flags: u8) -> [u8; 32] {
    let mut b = [0u8; 32];
    HelloRepr { seq, flags }.emit(&mut b).unwrap();
    b
}

pub(super) fn frames(bytes: &[u8]) -> Vec<FrameRepr<'_>> {
    let mut v = Vec::new();
    let mut off = 0;
    while off < bytes.len() {
        let n = crate::wire::frame_len(&bytes[off..]).unwrap();
        v.push(FrameRepr::parse(&bytes[off..off + n], FMT).unwrap());
        off += n;
    }
    v
}

/// Everything `poll` returns until it returns `None`, as (kind, seq, count).
pub(super) fn drain(mut poll: impl FnMut(&mut [u8]) -> Option<usize>) -> Vec<(u8, u64, u16)> {
    let mut buf = [0u8; 512];
    let mut out = Vec::new();
    for _ in 0..64 {
        let Some(n) = poll(&mut buf) else { break };
        out.push(match frames(&buf[..n])[0] {
            FrameRepr::Gap(g) => (Kind::Gap as u8, g.seq, 0),
            FrameRepr::Data(d) => (Kind::Data as u8, d.seq, d.count),
            FrameRepr::Heartbeat(h) => (Kind::Heartbeat as u8, h.seq, 0),
            f => panic!("{f:?}"),
        });
    }
    out
}

/// A source configuration that offers multicast (group 239.1.2.3:5000), so that a TCP
/// session answers NAKs rather than resending from its cursor.
pub(super) fn multicast_config() -> SourceConfig {
    SourceConfig {
        multicast: Some(UdpOffer {
            group: [239, 1, 2, 3],
            port: 5000,
            mtu: 1472,
            ttl: 1,
        }),
        ..SourceConfig::default()
    }
}

pub(super) fn session_after_hello<R: RecordSource>(
    cfg: SourceConfig,
    src: &R,
    seq: u64,
    flags: u8,
) -> (SourceSession, GeometryRepr) {
    let mut s = SourceSession::new(cfg, MIRROR_IP, ms(0));
    s.handle_stream(ms(0), &hello(seq, flags), src, None)
        .unwrap();
    let mut buf = [0u8; 256];
    let n = s.poll_transmit(ms(0), src, &mut buf).unwrap();
    let FrameRepr::Geometry(g) = frames(&buf[..n])[0] else {
        panic!("no GEOMETRY")
    };
    (s, g)
}

/// A sink that records writes into a ring in memory.
pub(super) struct Sink {
    pub(super) inner: RegionSink,
    pub(super) writes: Vec<u64>,
    pub(super) creations: u32,
    /// The reasons given for replacing a held ring, in order.
    pub(super) replaced: Vec<Replace>,
}
impl Sink {
    /// A recording sink on `mem`, nothing written yet.
    pub(super) fn on(mem: &mut Mem) -> Sink {
        // SAFETY: each test gives a `Mem` of its own to one source or one sink, and reads the
        // mirror ring in its one thread between the mirror's calls, through views taken
        // after the last recreate.
        let inner = unsafe { RegionSink::new(mem.region()) };
        Sink {
            inner,
            writes: vec![],
            creations: 0,
            replaced: vec![],
        }
    }
}
impl RecordSink for Sink {
    fn existing(&self) -> Option<(Geometry, u64)> {
        self.inner.existing()
    }
    fn recreate(&mut self, geo: &Geometry) -> Result<(), SinkError> {
        self.creations += 1;
        self.writes.clear();
        self.inner.recreate(geo)
    }
    fn replacing(&mut self, why: Replace) {
        assert!(
            self.inner.existing().is_some(),
            "{why:?}: nothing to replace"
        );
        self.replaced.push(why);
    }
    fn write(&mut self, seq: u64, fixed: &[u8], blob: &[u8]) {
        self.writes.push(seq);
        self.inner.write(seq, fixed, blob)
    }
    fn publish(&mut self, seq: u64) {
        self.inner.publish(seq)
    }
    fn holds(&self, seq: u64, fixed: &[u8], blob: &[u8]) -> Holds {
        self.inner.holds(seq, fixed, blob)
    }
}

pub(super) fn geometry_frames(flags: u8, seq: u64, mc: Option<MulticastRepr>) -> Vec<u8> {
    let g = GeometryRepr::from_source(&Geometry::spmc(8, 16, 8, 0, false).unwrap(), flags, seq)
        .unwrap();
    let mut b = vec![0u8; 96];
    let mut n = g.emit(&mut b).unwrap();
    if let Some(m) = mc {
        n += m.emit(&mut b[n..]).unwrap();
    }
    b.truncate(n);
    b
}

pub(super) fn data(seq: u64, count: u16, flags: u8) -> Vec<u8> {
    tagged_data(seq, count, flags, 0)
}

/// DATA of records `seq..seq + count` of incarnation `tag` (in each record's top byte; 0 for
/// [`data`]'s records).
pub(super) fn tagged_data(seq: u64, count: u16, flags: u8, tag: u64) -> Vec<u8> {
    // A word at a time: a byte-wise iterator took much of a mirror test's time under Miri.
    let mut recs = Vec::with_capacity(usize::from(count) * 8);
    for s in seq..seq + u64::from(count) {
        recs.extend_from_slice(&(s | tag << 56).to_le_bytes());
    }
    let mut b = vec![0u8; 16 + recs.len()];
    DataRepr {
        flags,
        seq,
        count,
        records: &recs,
    }
    .emit(&mut b)
    .unwrap();
    b
}

/// The MULTICAST payload of the mirror tests' UDP sessions: group 239.1.1.1, no token.
pub(super) fn multicast_repr(session: u8) -> MulticastRepr {
    MulticastRepr {
        group: [239, 1, 1, 1],
        port: 17403,
        mtu: 1472,
        ttl: 0,
        session,
        token: 0,
    }
}

pub(super) fn feed<S: RecordSink>(
    m: &mut Mirror<'_>,
    bytes: &[u8],
    sink: &mut S,
) -> Result<(), MirrorError> {
    let mut off = 0;
    while off < bytes.len() {
        let n = crate::wire::frame_len(&bytes[off..]).unwrap();
        m.handle_tcp_frame(ms(0), &bytes[off..off + n], sink)?;
        off += n;
    }
    Ok(())
}

/// A TCP-mode mirror starting at the oldest record, without hold-back storage.
pub(super) fn tcp_mirror_from_oldest(sink: &impl RecordSink) -> Mirror<'static> {
    Mirror::new(
        MirrorConfig {
            start: Start::Oldest,
            ..MirrorConfig::default()
        },
        SOURCE,
        sink,
        HoldBack::new(&mut [], &mut []),
    )
}

pub(super) fn udp_mirror<'a>(sink: &mut Sink, hb: HoldBack<'a>, unicast: bool) -> Mirror<'a> {
    udp_mirror_with(sink, hb, unicast, MirrorConfig::default())
}

/// [`udp_mirror`] with `cfg` (its start is set to oldest). A multicast mirror is made with
/// `check_udp_source` off: these tests feed DATA from any address and have it applied at
/// once; the multicast sender check has its own tests (`mirror_sender.rs`), which build
/// their mirrors with [`multicast_mirror_checked`].
pub(super) fn udp_mirror_with<'a>(
    sink: &mut Sink,
    hb: HoldBack<'a>,
    unicast: bool,
    cfg: MirrorConfig,
) -> Mirror<'a> {
    let cfg = MirrorConfig {
        check_udp_source: cfg.check_udp_source && unicast,
        ..cfg
    };
    udp_mirror_as(sink, hb, unicast, cfg)
}

/// The default configuration without the multicast sender check, for tests that feed
/// multicast DATA from any address (see [`udp_mirror_with`]).
pub(super) fn multicast_unchecked() -> MirrorConfig {
    MirrorConfig {
        check_udp_source: false,
        ..MirrorConfig::default()
    }
}

/// A multicast mirror (start oldest) that checks its datagrams' sender, as by default.
pub(super) fn multicast_mirror_checked<'a>(sink: &mut Sink, hb: HoldBack<'a>) -> Mirror<'a> {
    udp_mirror_as(sink, hb, false, MirrorConfig::default())
}

/// A UDP mirror with `cfg` as given (its start set to oldest), live after GEOMETRY and
/// MULTICAST (session 0x22; unicast from port 17403, or multicast to 239.1.1.1).
fn udp_mirror_as<'a>(
    sink: &mut Sink,
    hb: HoldBack<'a>,
    unicast: bool,
    cfg: MirrorConfig,
) -> Mirror<'a> {
    let mut m = Mirror::new(
        MirrorConfig {
            start: Start::Oldest,
            ..cfg
        },
        SOURCE,
        sink,
        hb,
    );
    let _ = m.poll_transmit(ms(0), &mut [0u8; 64]);
    let mc = MulticastRepr {
        group: if unicast { [0; 4] } else { [239, 1, 1, 1] },
        port: 17403,
        mtu: 1472,
        ttl: 0,
        session: 0x22,
        token: 5,
    };
    feed(
        &mut m,
        &geometry_frames(GEOMETRY_UDP_FOLLOWS, 1, Some(mc)),
        sink,
    )
    .unwrap();
    assert!(m.is_udp());
    m
}

pub(super) fn nak_out(m: &mut Mirror<'_>, now: Instant) -> Option<(u64, u64)> {
    let mut b = [0u8; 64];
    let t = m.poll_transmit(now, &mut b)?;
    assert_eq!(t.channel, Channel::Tcp);
    match frames(&b[..t.len])[0] {
        FrameRepr::Nak(n) => Some((n.from, n.to)),
        f => panic!("{f:?}"),
    }
}

/// A blob ring stand-in: record n is a 24-byte descriptor whose BlobRef.len is `n * 10`,
/// followed by that many bytes of `n`. Records 1..=w exist; `lost` cannot be sent.
pub(super) struct FakeBlobs {
    pub(super) w: u64,
    pub(super) lost: u64,
}

impl RecordSource for FakeBlobs {
    fn geometry(&self) -> Geometry {
        Geometry::blob(64, 32, 2, 4096).unwrap()
    }
    fn write_seq(&self) -> u64 {
        self.w
    }
    fn read_record(&self, seq: u64, dst: &mut [u8]) -> ReadRecord {
        if seq > self.w {
            return ReadRecord::Pending;
        }
        if seq == self.lost {
            return ReadRecord::Lost;
        }
        let blob = (seq * 10) as usize;
        let need = 24 + blob;
        let Some(d) = dst.get_mut(..need) else {
            return ReadRecord::TooLarge { need };
        };
        d.fill(seq as u8);
        d[8..24].fill(0);
        d[16..20].copy_from_slice(&(blob as u32).to_le_bytes());
        ReadRecord::Ok(need)
    }
}

/// Records blob writes.
#[derive(Default)]
pub(super) struct BlobSink {
    pub(super) geo: Option<Geometry>,
    pub(super) got: Vec<(u64, Vec<u8>, Vec<u8>)>,
    pub(super) published: u64,
}

impl RecordSink for BlobSink {
    fn existing(&self) -> Option<(Geometry, u64)> {
        self.geo.map(|g| (g, self.published))
    }
    fn recreate(&mut self, geo: &Geometry) -> Result<(), SinkError> {
        self.geo = Some(*geo);
        Ok(())
    }
    fn write(&mut self, seq: u64, fixed: &[u8], blob: &[u8]) {
        self.got.push((seq, fixed.to_vec(), blob.to_vec()));
    }
    fn publish(&mut self, seq: u64) {
        self.published = seq;
    }
}
