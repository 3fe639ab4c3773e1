//! Blob rings over serve → mirror (spec §18.4 arena records, §20.1, §21.2): every message
//! reaches the mirror ring under the source's sequence number with its meta, blob bytes and
//! flags, and the mirror ring is a blob ring that ringwire's and ringfire's blob consumers
//! read. Both directions against the published ringfire 0.5.2 (`ReplicaServer`, `Mirror`)
//! and ringwire to ringwire over TCP, multicast and unicast; an 8-aligned meta, and a
//! 16-aligned one (`u128`, at slot offset 16) over TCP and multicast; empty blobs around one
//! as long as the whole arena, over TCP in all three directions.

use std::fmt::Debug;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ringwire::replica::mirror::{self};
use ringwire::replica::serve::Server;
use ringwire::{BlobConsumer, BlobProducer, ReadOnlyRing};
use ringwire_tests::replica::{Mode, SetOnDrop, mirror_options, serve_options};
use ringwire_tests::shm::ShmPath;
use ringwire_tests::wait_until;
use zerocopy::{FromBytes, Immutable, IntoBytes};

/// The meta of most tests, aligned to 8.
type Meta = [u64; 2];
/// Ring capacity (messages) and arena bytes: large enough that nothing is overwritten.
const CAP: u64 = 1 << 15;
const ARENA: usize = 32 << 20;
/// Messages per run.
const N: u64 = 20_000;

/// A meta type the tests push: message n's meta holds n and a check word.
trait TestMeta: Copy + Debug + PartialEq + IntoBytes + FromBytes + Immutable + 'static {
    fn of(n: u64) -> Self;
}

impl TestMeta for [u64; 2] {
    fn of(n: u64) -> Self {
        [n, n.wrapping_mul(0x9e37_79b9_7f4a_7c15)]
    }
}

/// Aligned to 16: both projects put it at slot offset 16, after 8 bytes of padding.
impl TestMeta for u128 {
    fn of(n: u64) -> Self {
        (u128::from(n.wrapping_mul(0x9e37_79b9_7f4a_7c15)) << 64) | u128::from(n)
    }
}

/// Message n's blob: 0 to 699 bytes (every 7th empty), and in ringwire-to-ringwire runs
/// every 1,000th is 3,000 bytes, more than one 1,472-byte datagram budget.
fn blob(n: u64, big: bool) -> Vec<u8> {
    let len = if big && n.is_multiple_of(1000) {
        3000
    } else if n.is_multiple_of(7) {
        0
    } else {
        (n * 131 % 700) as usize
    };
    (0..len).map(|i| (n as usize * 31 + i * 7) as u8).collect()
}

/// Blob lengths longer than the 1 MiB TCP frame budget (spec §22: such a record goes alone
/// in its frame), one longer than the mirror's initial 2 MiB stream buffer, between small ones.
const HUGE: [usize; 7] = [10, 3 << 20, 0, (1 << 20) + 5000, 100, (5 << 20) + 3, 7];

/// Message n (1..=7) of the `HUGE` load.
fn huge_blob(n: u64, _big: bool) -> Vec<u8> {
    long_blob(n, HUGE[n as usize - 1])
}

/// The `len` bytes of message n of a load of long blobs: byte i is
/// `n * 131 + i * 7 + i / 4096`, truncated. An index loop, not an iterator chain: a debug
/// build took seconds of every test of the whole arena to make its 32 MiB three times.
fn long_blob(n: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    let mut i = 0;
    while i < len {
        v[i] = (n as usize * 131 + i * 7 + i / 4096) as u8;
        i += 1;
    }
    v
}

/// Message n (1..=3) of the `EDGES` load: an empty blob, one of the whole arena, and an
/// empty one after it. The arena is then exactly full, not wrapped, so ringfire's reader
/// keeps the last empty blob too (it drops empty ones once the arena has wrapped).
fn edge_blob(n: u64, _big: bool) -> Vec<u8> {
    long_blob(n, if n == 2 { ARENA } else { 0 })
}

/// The messages a test pushes and then finds on the mirror ring.
#[derive(Clone, Copy)]
struct Load {
    /// Ring capacity.
    cap: u64,
    /// Messages 1..=n.
    n: u64,
    /// Message k's blob; `big` (ringwire to ringwire runs) may add longer ones.
    blob: fn(u64, bool) -> Vec<u8>,
    /// In bursts of 100 a millisecond apart (~100,000 msg/s), not all at once.
    paced: bool,
    /// A frame exceeds the mirror's initial stream buffer, which must grow.
    grows: bool,
}

/// 20,000 messages of up to 3,000 bytes.
const STREAM: Load = Load {
    cap: CAP,
    n: N,
    blob,
    paced: true,
    grows: false,
};

/// Seven messages of up to 5 MiB.
const LONG: Load = Load {
    cap: 64,
    n: HUGE.len() as u64,
    blob: huge_blob,
    paced: false,
    grows: true,
};

/// The blob ring's edges: empty blobs around one as long as the arena.
const EDGES: Load = Load {
    cap: 8,
    n: 3,
    blob: edge_blob,
    paced: false,
    grows: true,
};

fn mcast(idx: u16) -> SocketAddrV4 {
    let pid = std::process::id();
    SocketAddrV4::new(
        Ipv4Addr::new(239, 252, (pid >> 8) as u8, pid as u8),
        21_000 + (pid % 1000) as u16 * 16 + idx,
    )
}

fn mirror_write_seq(path: &Path) -> u64 {
    ReadOnlyRing::open(path).map_or(0, |r| r.write_seq())
}

/// Publishes the load's messages.
fn publish(load: &Load, push: &mut impl FnMut(u64)) {
    for n in 1..=load.n {
        push(n);
        if load.paced && n.is_multiple_of(100) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Reads the mirror ring with ringwire's and ringfire's blob consumers: each gets every
/// message of the load, in order, with its meta and blob bytes.
fn check_mirror<M: TestMeta>(path: &Path, load: &Load, big: bool) {
    // The longest blob an arena of the tests holds.
    let mut out = vec![0u8; ARENA];
    let mut rw = BlobConsumer::<M>::attach(path).expect("ringwire consumer on the mirror");
    let mut m = M::of(0);
    for n in 1..=load.n {
        let got = rw.recv_seq(&mut m, &mut out).unwrap();
        let (seq, len) = got.unwrap_or_else(|| panic!("ringwire consumer: {n} missing"));
        assert_eq!(seq, n);
        assert_eq!(m, M::of(n), "meta of {n}");
        assert!(out[..len] == (load.blob)(n, big)[..], "blob of {n}");
    }
    assert_eq!(rw.recv(&mut m, &mut out).unwrap(), None);
    assert_eq!(rw.lapped_count(), 0);
    let mut rf = ringfire::BlobConsumer::<M>::attach(path).expect("ringfire consumer");
    for n in 1..=load.n {
        let len = rf.recv(&mut m, &mut out).unwrap();
        let len = len.unwrap_or_else(|| panic!("ringfire consumer: {n} missing"));
        assert_eq!(m, M::of(n), "ringfire: meta of {n}");
        assert!(
            out[..len] == (load.blob)(n, big)[..],
            "ringfire: blob of {n}"
        );
    }
    assert_eq!(rf.lapped_count(), 0);
}

/// ringwire `BlobProducer` → ringwire serve → ringwire mirror.
fn ringwire_to_ringwire<M: TestMeta>(mode: Mode, idx: u16, load: &Load) {
    let src = ShmPath::new(&format!("rwb-src-{idx}"));
    let dst = ShmPath::new(&format!("rwb-dst-{idx}"));
    let mut producer = BlobProducer::<M>::create(src.path(), load.cap, ARENA).unwrap();
    let server = Server::bind(serve_options(src.path(), mode, mcast(idx), 1)).unwrap();
    let mo = mirror_options(server.local_addr(), dst.path(), mode);
    let stop = AtomicBool::new(false);
    let (srv, mir) = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let s = sc.spawn(|| server.run(&stop));
        let m = sc.spawn(|| mirror::run(&mo, &stop));
        wait_until("the mirror ring", Duration::from_secs(10), || {
            ReadOnlyRing::open(dst.path()).is_ok()
        });
        publish(load, &mut |n| {
            assert_eq!(producer.push(&M::of(n), &(load.blob)(n, true)).unwrap(), n);
        });
        wait_until("the mirror to catch up", Duration::from_secs(60), || {
            mirror_write_seq(dst.path()) >= load.n
        });
        stop.store(true, Ordering::Relaxed);
        (s.join().unwrap().unwrap(), m.join().unwrap().unwrap())
    });
    assert_eq!(mir.last_seq, load.n);
    assert_eq!(mir.counters.gaps, 0, "{mir:?}");
    if mode != Mode::Tcp {
        assert!(mir.counters.datagrams > 0, "{mir:?}");
        assert!(srv.udp.data_frames > 0, "{srv:?}");
    }
    if load.grows {
        assert!(
            mir.connections >= 2,
            "the stream buffer never grew: {mir:?}"
        );
    }
    // Nothing was lost, so the mirror filled its arena exactly as the source did: the two
    // files' slots and arenas hold the same bytes (the mirror adds SPARSE to the flags).
    let (a, b) = (
        std::fs::read(src.path()).unwrap(),
        std::fs::read(dst.path()).unwrap(),
    );
    assert_eq!(a.len(), b.len());
    assert!(a[128..] == b[128..], "slots, registry and arena differ");
    check_mirror::<M>(dst.path(), load, true);
}

/// [`long_blob`] makes the bytes its doc names, at the lengths around a 4 KiB step.
#[test]
fn long_blob_is_its_pattern() {
    for n in 1..=7u64 {
        for len in [0, 1, 4095, 4096, 4097, 3 * 4096 + 5] {
            let want: Vec<u8> = (0..len)
                .map(|i| (n as usize * 131 + i * 7 + i / 4096) as u8)
                .collect();
            assert_eq!(long_blob(n, len), want, "n {n}, len {len}");
        }
    }
}

#[test]
fn ringwire_blob_ring_over_tcp() {
    ringwire_to_ringwire::<Meta>(Mode::Tcp, 0, &STREAM);
}

#[test]
fn ringwire_blob_ring_over_multicast() {
    ringwire_to_ringwire::<Meta>(Mode::Multicast, 1, &STREAM);
}

#[test]
fn ringwire_blob_ring_over_unicast() {
    ringwire_to_ringwire::<Meta>(Mode::Unicast, 2, &STREAM);
}

/// A 16-aligned meta (`u128`, at slot offset 16 of both rings) arrives with every blob.
#[test]
fn ringwire_blob_ring_with_a_u128_meta_over_tcp() {
    ringwire_to_ringwire::<u128>(Mode::Tcp, 12, &STREAM);
}

/// The same by multicast, where the mirror rebuilds the slots from datagram records.
#[test]
fn ringwire_blob_ring_with_a_u128_meta_over_multicast() {
    ringwire_to_ringwire::<u128>(Mode::Multicast, 13, &STREAM);
}

/// Blobs of up to 5 MiB: none becomes a GAP, each goes alone in its frame, and the mirror
/// grows its stream buffer (a reconnect that resumes) at the first frame over 2 MiB, to the
/// ring's longest frame.
#[test]
fn blobs_longer_than_the_frame_budget_go_alone_over_tcp() {
    ringwire_to_ringwire::<Meta>(Mode::Tcp, 8, &LONG);
}

/// The same by multicast: the long ones do not fit a datagram and are fetched over TCP.
#[test]
fn blobs_longer_than_a_datagram_are_fetched_over_tcp_in_multicast_mode() {
    ringwire_to_ringwire::<Meta>(Mode::Multicast, 9, &LONG);
}

/// A hub: source → (mirror + serve of the mirror ring) → leaf. The hub serves a SPARSE
/// mirror blob ring; the leaf's ring holds every message under the source's sequence.
/// An empty blob, a blob of the whole arena and an empty one, ringwire to ringwire.
#[test]
fn empty_and_whole_arena_blobs_over_tcp() {
    ringwire_to_ringwire::<Meta>(Mode::Tcp, 16, &EDGES);
}

#[test]
fn blob_ring_through_a_hub() {
    let src = ShmPath::new("rwb-hub-src");
    let hub = ShmPath::new("rwb-hub-mid");
    let leaf = ShmPath::new("rwb-hub-leaf");
    let mut producer = BlobProducer::<Meta>::create(src.path(), CAP, ARENA).unwrap();
    let first = Server::bind(serve_options(src.path(), Mode::Multicast, mcast(7), 1)).unwrap();
    let mo_hub = mirror_options(first.local_addr(), hub.path(), Mode::Multicast);
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let s1 = sc.spawn(|| first.run(&stop));
        let m1 = sc.spawn(|| mirror::run(&mo_hub, &stop));
        wait_until("the hub ring", Duration::from_secs(10), || {
            ReadOnlyRing::open(hub.path()).is_ok()
        });
        let second = Server::bind(serve_options(hub.path(), Mode::Tcp, mcast(0), 1)).unwrap();
        let mo_leaf = mirror_options(second.local_addr(), leaf.path(), Mode::Tcp);
        let stop = &stop;
        let s2 = sc.spawn(move || second.run(stop));
        let m2 = sc.spawn(move || mirror::run(&mo_leaf, stop));
        wait_until("the leaf ring", Duration::from_secs(10), || {
            ReadOnlyRing::open(leaf.path()).is_ok()
        });
        publish(&STREAM, &mut |n| {
            assert_eq!(producer.push(&Meta::of(n), &blob(n, true)).unwrap(), n);
        });
        wait_until("the leaf to catch up", Duration::from_secs(60), || {
            mirror_write_seq(leaf.path()) >= N
        });
        stop.store(true, Ordering::Relaxed);
        for m in [m1, m2] {
            let sum = m.join().unwrap().unwrap();
            assert_eq!(sum.counters.gaps, 0, "{sum:?}");
        }
        for s in [s1, s2] {
            s.join().unwrap().unwrap();
        }
    });
    check_mirror::<Meta>(leaf.path(), &STREAM, true);
}

/// ringfire 0.5.2 `BlobProducer` + `ReplicaServer` → ringwire mirror. ringfire's server
/// threads serve every connection (the mirror reconnects when it grows its buffer) and
/// cannot be stopped: they are left to the end of the test process.
fn ringfire_to_ringwire<M: TestMeta>(mode: Mode, idx: u16, load: &Load) {
    use ringfire::replication::{MulticastConfig, ReplicaServer};
    let src = ShmPath::new(&format!("rfb-src-{idx}"));
    let dst = ShmPath::new(&format!("rfb-dst-{idx}"));
    let mut producer = ringfire::BlobProducer::<M>::create(src.path(), load.cap, ARENA).unwrap();
    let mut server = ReplicaServer::bind(src.path(), (Ipv4Addr::LOCALHOST, 0)).unwrap();
    if mode == Mode::Multicast {
        let g = mcast(idx);
        server = server.multicast(
            MulticastConfig::new(*g.ip(), g.port())
                .interface(Ipv4Addr::LOCALHOST)
                .ttl(0),
        );
    }
    let addr = server.local_addr().unwrap();
    let mo = mirror_options(addr, dst.path(), mode);
    drop(server.spawn().unwrap());
    let stop = AtomicBool::new(false);
    let sum = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let m = sc.spawn(|| mirror::run(&mo, &stop));
        wait_until("the mirror ring", Duration::from_secs(10), || {
            ReadOnlyRing::open(dst.path()).is_ok()
        });
        publish(load, &mut |n| {
            assert_eq!(producer.push(&M::of(n), &(load.blob)(n, false)).unwrap(), n);
        });
        wait_until("the mirror to catch up", Duration::from_secs(60), || {
            mirror_write_seq(dst.path()) >= load.n
        });
        stop.store(true, Ordering::Relaxed);
        m.join().unwrap().unwrap()
    });
    assert_eq!(sum.last_seq, load.n);
    assert_eq!(sum.counters.gaps, 0, "{sum:?}");
    if mode == Mode::Multicast {
        assert!(sum.counters.datagrams > 0, "{sum:?}");
    }
    if load.grows {
        assert!(
            sum.connections >= 2,
            "the stream buffer never grew: {sum:?}"
        );
    }
    check_mirror::<M>(dst.path(), load, false);
    drop(producer);
}

#[test]
fn ringfire_blob_serve_to_ringwire_mirror_tcp() {
    ringfire_to_ringwire::<Meta>(Mode::Tcp, 3, &STREAM);
}

#[test]
fn ringfire_blob_serve_to_ringwire_mirror_multicast() {
    ringfire_to_ringwire::<Meta>(Mode::Multicast, 4, &STREAM);
}

/// ringfire's ring of 16-aligned metas, served by ringfire, mirrored by ringwire.
#[test]
fn ringfire_blob_serve_with_a_u128_meta_to_ringwire_mirror_tcp() {
    ringfire_to_ringwire::<u128>(Mode::Tcp, 14, &STREAM);
}

/// ringfire's server sends a record longer than its 1 MiB budget alone; ringwire's mirror
/// takes it.
#[test]
fn long_blobs_from_a_ringfire_serve_to_a_ringwire_mirror_tcp() {
    ringfire_to_ringwire::<Meta>(Mode::Tcp, 10, &LONG);
}

/// The blob ring's edges from ringfire's serve to ringwire's mirror.
#[test]
fn empty_and_whole_arena_blobs_from_a_ringfire_serve_to_a_ringwire_mirror_tcp() {
    ringfire_to_ringwire::<Meta>(Mode::Tcp, 17, &EDGES);
}

/// ringwire `BlobProducer` + serve → ringfire 0.5.2 `Mirror`.
fn ringwire_to_ringfire<M: TestMeta>(mode: Mode, idx: u16, load: &Load) {
    use ringfire::replication::{Mirror, MirrorStart};
    let src = ShmPath::new(&format!("wfb-src-{idx}"));
    let dst = ShmPath::new(&format!("wfb-dst-{idx}"));
    let mut producer = BlobProducer::<M>::create(src.path(), load.cap, ARENA).unwrap();
    let server = Server::bind(serve_options(src.path(), mode, mcast(idx), 1)).unwrap();
    let addr = server.local_addr();
    let stop = AtomicBool::new(false);
    let (seq, gaps) = std::thread::scope(|sc| {
        let _stop = SetOnDrop(&stop);
        let s = sc.spawn(|| server.run(&stop));
        let m = sc.spawn(|| {
            let mut mir = Mirror::builder()
                .start(MirrorStart::Oldest)
                .interface(Ipv4Addr::LOCALHOST)
                .connect(addr, dst.path())
                .unwrap();
            let t0 = Instant::now();
            while mir.sequence() < load.n && t0.elapsed() < Duration::from_secs(60) {
                if !mir.step().unwrap() {
                    break;
                }
            }
            (mir.sequence(), mir.gaps())
        });
        wait_until("the ringfire mirror ring", Duration::from_secs(10), || {
            ReadOnlyRing::open(dst.path()).is_ok()
        });
        publish(load, &mut |n| {
            assert_eq!(producer.push(&M::of(n), &(load.blob)(n, false)).unwrap(), n);
        });
        let got = m.join().unwrap();
        stop.store(true, Ordering::Relaxed);
        s.join().unwrap().unwrap();
        got
    });
    assert_eq!(
        (seq, gaps),
        (load.n, 0),
        "ringfire mirror sequence and gaps"
    );
    check_mirror::<M>(dst.path(), load, false);
}

#[test]
fn ringwire_blob_serve_to_ringfire_mirror_tcp() {
    ringwire_to_ringfire::<Meta>(Mode::Tcp, 5, &STREAM);
}

#[test]
fn ringwire_blob_serve_to_ringfire_mirror_multicast() {
    ringwire_to_ringfire::<Meta>(Mode::Multicast, 6, &STREAM);
}

/// ringwire's ring of 16-aligned metas, served by ringwire, mirrored by ringfire.
#[test]
fn ringwire_blob_serve_with_a_u128_meta_to_ringfire_mirror_tcp() {
    ringwire_to_ringfire::<u128>(Mode::Tcp, 15, &STREAM);
}

/// ringwire's server sends a record longer than the 1 MiB budget alone; ringfire's mirror
/// takes it.
#[test]
fn long_blobs_from_a_ringwire_serve_to_a_ringfire_mirror_tcp() {
    ringwire_to_ringfire::<Meta>(Mode::Tcp, 11, &LONG);
}

/// The blob ring's edges from ringwire's serve to ringfire's mirror.
#[test]
fn empty_and_whole_arena_blobs_from_a_ringwire_serve_to_a_ringfire_mirror_tcp() {
    ringwire_to_ringfire::<Meta>(Mode::Tcp, 18, &EDGES);
}
