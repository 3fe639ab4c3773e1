//! Edge geometries and states across ringwire and ringfire 0.5.2: typed rings of capacity
//! 1, 2 and 8 holding zero-sized, 1-, 3- and 13-byte, page-sized, `u128`, `f32` and
//! over-aligned (32, 64, 256) records, made by either project and read by both in every
//! start mode (the files the two make for the same pushes are identical); blob rings with
//! arenas of 64 to 256 bytes that wrap on every record and registries of 0, 1 and 3 slots;
//! blackboards of 0 to 65 slots with odd value sizes; starts and seeks past the end and
//! near `u64::MAX`; and each project's producers refusing the other's live files.

use ringwire_tests::shm::ShmPath;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

macro_rules! rec {
    ($name:ident, $n:expr, $align:expr) => {
        #[repr(C, align($align))]
        #[derive(Clone, Copy, Debug, PartialEq, FromBytes, IntoBytes, Immutable, KnownLayout)]
        struct $name([u8; $n]);
    };
}
rec!(B1, 1, 1);
rec!(B3, 3, 1);
rec!(B13, 13, 1);
rec!(B4096, 4096, 1);
rec!(A32, 32, 32);
rec!(A64x3, 192, 64);
rec!(A256, 256, 256);

trait Mk: Copy + std::fmt::Debug + PartialEq + FromBytes + IntoBytes + Immutable + 'static {
    fn mk(i: u64) -> Self;
}
macro_rules! mk_arr {
    ($($t:ident),*) => {$(
        impl Mk for $t {
            fn mk(i: u64) -> Self {
                let mut v = <$t as zerocopy::FromZeros>::new_zeroed();
                for (k, b) in v.0.iter_mut().enumerate() {
                    *b = (i as u8).wrapping_mul(31).wrapping_add(k as u8);
                }
                v
            }
        }
    )*};
}
mk_arr!(B1, B3, B13, B4096, A32, A64x3, A256);
impl Mk for u128 {
    fn mk(i: u64) -> Self {
        (u128::from(!i) << 64) | u128::from(i)
    }
}
impl Mk for f32 {
    fn mk(i: u64) -> Self {
        i as f32 * 0.25
    }
}
impl Mk for () {
    fn mk(_: u64) -> Self {}
}
impl Mk for [u16; 5] {
    fn mk(i: u64) -> Self {
        [i as u16, 1, 2, 3, (i >> 16) as u16]
    }
}

/// Pushes `n` records with one side and reads with both in every start mode.
fn cross<T: Mk>(cap: u64, n: u64) {
    let tn = std::any::type_name::<T>();
    // ringfire writes, ringwire reads.
    {
        let p = ShmPath::new("edge-rf");
        let mut prod = ringfire::RingProducer::<T>::create(p.path(), cap).unwrap();
        for i in 1..=n {
            prod.push(&T::mk(i));
        }
        compare_readers::<T>(&p, n, tn, "rf-prod");
    }
    // ringwire writes, both read.
    {
        let p = ShmPath::new("edge-rw");
        let mut prod = ringwire::RingProducer::<T>::create(p.path(), cap).unwrap();
        for i in 1..=n {
            prod.push(&T::mk(i));
        }
        compare_readers::<T>(&p, n, tn, "rw-prod");
        // ringfire's file bytes vs ringwire's for the same pushes.
        let q = ShmPath::new("edge-rf2");
        let mut prod2 = ringfire::RingProducer::<T>::create(q.path(), cap).unwrap();
        for i in 1..=n {
            prod2.push(&T::mk(i));
        }
        let a = std::fs::read(p.path()).unwrap();
        let b = std::fs::read(q.path()).unwrap();
        assert_eq!(a.len(), b.len(), "{tn} cap {cap} file len");
        assert!(a == b, "{tn} cap {cap}: files differ");
    }
}

fn compare_readers<T: Mk>(p: &ShmPath, n: u64, tn: &str, who: &str) {
    for mode in 0..5u8 {
        let seq = n / 2;
        let mut rf = {
            let b = ringfire::RingConsumer::<T>::builder();
            let b = match mode {
                0 => b.start_from_latest(),
                1 => b.start_from_head(),
                2 => b.start_from_oldest(),
                3 => b.start_from_sequence(seq),
                _ => b.start_from_sequence(0),
            };
            b.attach(p.path()).unwrap()
        };
        let mut rw = {
            let b = ringwire::RingConsumer::<T>::builder();
            let b = match mode {
                0 => b.start_from_latest(),
                1 => b.start_from_head(),
                2 => b.start_from_oldest(),
                3 => b.start_from_sequence(seq),
                _ => b.start_from_sequence(0),
            };
            b.attach(p.path()).unwrap()
        };
        assert_eq!(rf.cursor(), rw.cursor(), "{who} {tn} mode {mode} cursor");
        assert_eq!(rf.lag(), rw.lag(), "{who} {tn} mode {mode} lag");
        let mut a = vec![];
        let mut b = vec![];
        while let Some(x) = rf.try_recv() {
            a.push(x);
            assert!(a.len() < 100_000);
        }
        while let Some(x) = rw.try_recv() {
            b.push(x);
            assert!(b.len() < 100_000);
        }
        assert_eq!(a, b, "{who} {tn} mode {mode} records");
        assert_eq!(
            rf.lapped_count(),
            rw.lapped_count(),
            "{who} {tn} mode {mode} lapped"
        );
        assert_eq!(
            rf.cursor(),
            rw.cursor(),
            "{who} {tn} mode {mode} end cursor"
        );
    }
}

#[test]
fn typed_edges_both_ways() {
    for (cap, n) in [
        (1u64, 0u64),
        (1, 1),
        (1, 5),
        (2, 1),
        (2, 2),
        (2, 7),
        (8, 30),
    ] {
        cross::<()>(cap, n);
        cross::<B1>(cap, n);
        cross::<B3>(cap, n);
        cross::<B13>(cap, n);
        cross::<B4096>(cap, n);
        cross::<A32>(cap, n);
        cross::<A64x3>(cap, n);
        cross::<A256>(cap, n);
        cross::<u128>(cap, n);
        cross::<f32>(cap, n);
        cross::<[u16; 5]>(cap, n);
    }
}

fn blob_drain_rf<M: Mk + Default>(p: &ShmPath) -> (Vec<(M, Vec<u8>)>, u64, u64) {
    let mut c = ringfire::BlobConsumer::<M>::attach(p.path()).unwrap();
    let mut out = vec![0u8; 1 << 16];
    let mut v = vec![];
    let mut m = M::default();
    while let Some(n) = c.recv(&mut m, &mut out).unwrap() {
        v.push((m, out[..n].to_vec()));
        assert!(v.len() < 10_000);
    }
    (v, c.lapped_count(), c.cursor())
}
fn blob_drain_rw<M: Mk + Default>(p: &ShmPath) -> (Vec<(M, Vec<u8>)>, u64, u64) {
    let mut c = ringwire::BlobConsumer::<M>::attach(p.path()).unwrap();
    let mut out = vec![0u8; 1 << 16];
    let mut v = vec![];
    let mut m = M::default();
    while let Some(n) = c.recv(&mut m, &mut out).unwrap() {
        v.push((m, out[..n].to_vec()));
        assert!(v.len() < 10_000);
    }
    (v, c.lapped_count(), c.cursor())
}

fn blob_case<M: Mk + Default>(cap: u64, arena: usize, readers: usize, lens: &[usize]) {
    let a = ShmPath::new("edge-blob-rf");
    let b = ShmPath::new("edge-blob-rw");
    let mut pf = ringfire::BlobProducerBuilder::new(cap, arena)
        .max_readers(readers)
        .build::<M, _>(a.path())
        .unwrap();
    let mut pw = ringwire::BlobProducerBuilder::new(cap, arena)
        .max_readers(readers)
        .build::<M, _>(b.path())
        .unwrap();
    for (i, &len) in lens.iter().enumerate() {
        let data: Vec<u8> = (0..len).map(|k| (k as u8) ^ (i as u8)).collect();
        let rf = pf.push(&M::mk(i as u64), &data).map_err(|e| e.to_string());
        let rw = pw.push(&M::mk(i as u64), &data).map_err(|e| e.to_string());
        assert_eq!(
            rf.is_ok(),
            rw.is_ok(),
            "cap {cap} arena {arena} len {len}: {rf:?} {rw:?}"
        );
    }
    let fa = std::fs::read(a.path()).unwrap();
    let fb = std::fs::read(b.path()).unwrap();
    assert_eq!(fa.len(), fb.len());
    // ringwire stores blobs in whole 8-byte words (zero-padded), so the files are compared
    // up to the arena data, and only for metas without padding after them: ringfire copies
    // a `BlobPacket<M>` built on its stack, padding and all (spec §4.1).
    let ao = u64::from_le_bytes(fa[80..88].try_into().unwrap()) as usize + 64;
    let (fa, fb) = (&fa[..ao], &fb[..ao]);
    let diffs: Vec<(usize, u8, u8)> = fa
        .iter()
        .zip(fb.iter())
        .enumerate()
        .filter(|(_, (x, y))| x != y)
        .map(|(i, (x, y))| (i, *x, *y))
        .take(40)
        .collect();
    assert!(
        fa == fb || !size_of::<M>().is_multiple_of(8),
        "cap {cap} arena {arena} readers {readers} lens {lens:?}: files differ at {diffs:x?}"
    );
    for p in [&a, &b] {
        let x = blob_drain_rf::<M>(p);
        let y = blob_drain_rw::<M>(p);
        assert_eq!(
            x, y,
            "cap {cap} arena {arena} readers {readers} lens {lens:?}"
        );
    }
}

impl Mk for u32 {
    fn mk(i: u64) -> Self {
        i as u32 * 3
    }
}
impl Mk for u64 {
    fn mk(i: u64) -> Self {
        i * 5
    }
}

#[test]
fn blob_edges_both_ways() {
    let lens_sets: [&[usize]; 6] = [
        &[],
        &[0],
        &[64, 64, 64, 1, 63, 65],
        &[1, 2, 3, 4, 5, 6, 7, 8, 9],
        &[33, 1, 33, 2, 64, 3, 31],
        &[200, 10, 256, 128, 129],
    ];
    for lens in lens_sets {
        for (cap, arena) in [(1u64, 64usize), (2, 64), (1, 128), (4, 256), (8, 64)] {
            for readers in [0usize, 1, 3] {
                blob_case::<u64>(cap, arena, readers, lens);
                blob_case::<()>(cap, arena, readers, lens);
                blob_case::<u32>(cap, arena, readers, lens);
            }
        }
    }
}

#[test]
fn blackboard_edges_both_ways() {
    fn case<V: Mk>(slots: usize) {
        let a = ShmPath::new("edge-bb-rf");
        let b = ShmPath::new("edge-bb-rw");
        let rf =
            ringfire::BlackboardProducer::<V>::create(a.path(), slots).map_err(|e| e.to_string());
        let rw =
            ringwire::BlackboardProducer::<V>::create(b.path(), slots).map_err(|e| e.to_string());
        let tn = std::any::type_name::<V>();
        assert_eq!(
            rf.is_ok(),
            rw.is_ok(),
            "{tn} {slots}: {:?} {:?}",
            rf.as_ref().err(),
            rw.as_ref().err()
        );
        let (Ok(mut rf), Ok(mut rw)) = (rf, rw) else {
            return;
        };
        for k in 0..slots {
            if k % 2 == 0 {
                rf.write(k, &V::mk(k as u64)).unwrap();
                rw.write(k, &V::mk(k as u64)).unwrap();
            }
        }
        let x = rf.write(slots, &V::mk(0)).is_err();
        let y = rw.write(slots, &V::mk(0)).is_err();
        assert!(x && y);
        let fa = std::fs::read(a.path()).unwrap();
        let fb = std::fs::read(b.path()).unwrap();
        assert!(
            fa == fb,
            "{tn} {slots}: files differ ({} vs {})",
            fa.len(),
            fb.len()
        );
        for p in [&a, &b] {
            let cf = ringfire::BlackboardConsumer::<V>::attach(p.path()).unwrap();
            let cw = ringwire::BlackboardConsumer::<V>::attach(p.path()).unwrap();
            assert_eq!(cf.slot_count(), cw.slot_count());
            for k in 0..=slots {
                let x = cf.read(k).map_err(|e| e.to_string());
                let y = cw.read(k).map_err(|e| e.to_string());
                assert_eq!(x.is_ok(), y.is_ok(), "{tn} key {k}");
                if let (Ok(x), Ok(y)) = (x, y) {
                    assert_eq!(x, y, "{tn} key {k}");
                }
            }
        }
    }
    for slots in [0usize, 1, 2, 3, 7, 65] {
        case::<()>(slots);
        case::<B1>(slots);
        case::<B3>(slots);
        case::<B13>(slots);
        case::<[u16; 5]>(slots);
        case::<B4096>(slots);
        case::<u128>(slots);
        case::<A32>(slots);
        case::<A64x3>(slots);
    }
}

#[test]
fn producers_exclude_each_other_every_kind() {
    // A creator of the other project, tried while a live producer holds the path, must be
    // refused as a producer already there (`None`: it was created).
    fn rf_busy(what: &str, e: Option<ringfire::RingfireError>) {
        assert!(
            matches!(e, Some(ringfire::RingfireError::ProducerAlreadyExists)),
            "ringfire's {what}: {e:?}"
        );
    }
    fn rw_busy(what: &str, e: Option<ringwire::Error>) {
        assert!(
            matches!(e, Some(ringwire::Error::ProducerAlreadyExists { .. })),
            "ringwire's {what}: {e:?}"
        );
    }
    // A file of another kind: ringwire names it so (as once its producer is gone), where
    // ringfire takes its live producer for one of its own kind.
    fn rw_other_kind(what: &str, e: Option<ringwire::Error>) {
        assert!(
            matches!(e, Some(ringwire::Error::NotReplaced { .. })),
            "ringwire's {what}: {e:?}"
        );
    }
    let p = ShmPath::new("excl-a");
    let path = p.path();
    use ringfire::{
        BlackboardProducer as RfBoard, BlobProducer as RfBlob, MpmcProducer as RfMpmc,
        RingProducer as RfRing,
    };
    use ringwire::{
        BlackboardProducer as RwBoard, BlobProducer as RwBlob, MpmcProducer as RwMpmc,
        RingProducer as RwRing,
    };
    // ringwire live, ringfire refused.
    {
        let _w = RwRing::<u64>::create(path, 8).unwrap();
        rf_busy("ring over a ring", RfRing::<u64>::create(path, 8).err());
        rf_busy(
            "blob ring over a ring",
            RfBlob::<u64>::create(path, 8, 64).err(),
        );
        rf_busy(
            "blackboard over a ring",
            RfBoard::<u64>::create(path, 8).err(),
        );
        rf_busy(
            "mpmc ring over a ring",
            RfMpmc::<u64>::create(path, 8).err(),
        );
    }
    {
        let _w = RwBoard::<u64>::create(path, 8).unwrap();
        rf_busy(
            "ring over a blackboard",
            RfRing::<u64>::create(path, 8).err(),
        );
    }
    {
        let _w = RwMpmc::<u64>::create(path, 8).unwrap();
        rf_busy(
            "ring over an mpmc ring",
            RfRing::<u64>::create(path, 8).err(),
        );
        rf_busy(
            "mpmc ring over an mpmc ring",
            RfMpmc::<u64>::create(path, 8).err(),
        );
    }
    // ringfire live, ringwire refused.
    {
        let _f = RfRing::<u64>::create(path, 8).unwrap();
        rw_busy("ring over a ring", RwRing::<u64>::create(path, 8).err());
        rw_busy(
            "blob ring over a ring",
            RwBlob::<u64>::create(path, 8, 64).err(),
        );
        rw_other_kind(
            "blackboard over a ring",
            RwBoard::<u64>::create(path, 8).err(),
        );
        rw_busy(
            "mpmc ring over a ring",
            RwMpmc::<u64>::create(path, 8).err(),
        );
    }
    {
        let _f = RfBoard::<u64>::create(path, 8).unwrap();
        rw_other_kind(
            "ring over a blackboard",
            RwRing::<u64>::create(path, 8).err(),
        );
    }
    {
        let _f = RfMpmc::<u64>::create(path, 8).unwrap();
        rw_busy(
            "ring over an mpmc ring",
            RwRing::<u64>::create(path, 8).err(),
        );
        rw_busy(
            "mpmc ring over an mpmc ring",
            RwMpmc::<u64>::create(path, 8).err(),
        );
    }
    // Stale (persistent) rings of either are replaced by the other.
    {
        let f = ringfire::RingProducerBuilder::new(8)
            .cleanup_mode(ringfire::CleanupMode::Persistent)
            .build::<u64, _>(p.path())
            .unwrap();
        drop(f);
        let mut w = ringwire::RingProducer::<u32>::create(p.path(), 4).unwrap();
        assert_eq!(w.push(&7), 1);
        let mut c = ringfire::RingConsumer::<u32>::attach(p.path()).unwrap();
        assert_eq!(c.try_recv(), Some(7));
    }
}

#[test]
fn start_modes_past_the_end_and_seeks() {
    for (cap, n) in [(1u64, 0u64), (1, 3), (4, 2), (4, 9), (8, 100)] {
        let p = ShmPath::new("edge-seq");
        let mut prod = ringfire::RingProducer::<u64>::create(p.path(), cap).unwrap();
        for i in 1..=n {
            prod.push(&(i * 10));
        }
        for start in [
            n,
            n + 1,
            n + 2,
            n + 5,
            1 << 62,
            (1 << 63) - 1,
            1 << 63,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut rf = ringfire::RingConsumer::<u64>::builder()
                .start_from_sequence(start)
                .attach(p.path())
                .unwrap();
            let mut rw = ringwire::RingConsumer::<u64>::builder()
                .start_from_sequence(start)
                .attach(p.path())
                .unwrap();
            let ctx = format!("cap {cap} n {n} start {start}");
            assert_eq!(
                (rf.cursor(), rf.lag(), rf.lapped_count()),
                (rw.cursor(), rw.lag(), rw.lapped_count()),
                "{ctx}"
            );
            assert_eq!(rf.try_recv(), rw.try_recv(), "{ctx}");
            assert_eq!(
                (rf.cursor(), rf.lag(), rf.lapped_count()),
                (rw.cursor(), rw.lag(), rw.lapped_count()),
                "{ctx} after recv"
            );
        }
        for target in [0u64, 1, n, n + 1, n + 7, u64::MAX] {
            let mut rf = ringfire::RingConsumer::<u64>::attach(p.path()).unwrap();
            let mut rw = ringwire::RingConsumer::<u64>::attach(p.path()).unwrap();
            let ctx = format!("cap {cap} n {n} seek {target}");
            assert_eq!(rf.seek(target), rw.seek(target), "{ctx}");
            assert_eq!(
                (rf.cursor(), rf.lag(), rf.lapped_count()),
                (rw.cursor(), rw.lag(), rw.lapped_count()),
                "{ctx}"
            );
            assert_eq!(rf.try_recv(), rw.try_recv(), "{ctx}");
            assert_eq!(rf.jump_to_latest(), rw.jump_to_latest(), "{ctx} jl");
            assert_eq!(
                (rf.cursor(), rf.lapped_count()),
                (rw.cursor(), rw.lapped_count()),
                "{ctx} jl"
            );
            assert_eq!(rf.jump_to_oldest(), rw.jump_to_oldest(), "{ctx} jo");
            assert_eq!(
                (rf.cursor(), rf.lapped_count()),
                (rw.cursor(), rw.lapped_count()),
                "{ctx} jo"
            );
        }
    }
}

/// A ring whose file name is not UTF-8: ringfire names its consumers' default checkpoint
/// `ring_<name>.offset` (its fallback stem), so a ringwire consumer of the same name must
/// find the offset a ringfire consumer committed there, and the other way round.
#[test]
fn default_checkpoint_of_a_ring_whose_name_is_not_utf8_is_ringfires() {
    use std::os::unix::ffi::OsStrExt;
    let dir = ringwire_tests::shm::ShmDir::new("ckpt-nonutf8");
    let ring = dir.join(std::ffi::OsStr::from_bytes(b"md\xff.ring"));
    let mut prod = ringfire::RingProducer::<u64>::create(&ring, 16).unwrap();
    for i in 1..=10u64 {
        prod.push(&i);
    }
    assert_eq!(
        ringwire::checkpoint::default_path(&ring, "algo 1"),
        dir.join("ring_algo_1.offset")
    );
    // ringfire commits after 3, ringwire resumes at 4 and commits after 6.
    {
        let mut c = ringfire::RingConsumer::<u64>::builder()
            .consumer_name("algo 1")
            .start_from_oldest()
            .attach(&ring)
            .unwrap();
        for want in 1..=3 {
            assert_eq!(c.try_recv(), Some(want));
        }
        c.commit_offset().unwrap();
    }
    {
        let mut c = ringwire::RingConsumer::<u64>::builder()
            .consumer_name("algo 1")
            .start_from_oldest()
            .attach(&ring)
            .unwrap();
        for want in 4..=6 {
            assert_eq!(c.try_recv(), Some(want));
        }
        c.commit_offset().unwrap();
    }
    let mut c = ringfire::RingConsumer::<u64>::builder()
        .consumer_name("algo 1")
        .start_from_oldest()
        .attach(&ring)
        .unwrap();
    assert_eq!(c.try_recv(), Some(7));
}

/// Reads everything both readers deliver from a patched ring, polling up to `polls` times
/// past each empty result (ringfire looks for holes every 64th empty poll).
/// What a reader delivered, its lapped count and its cursor.
type Drained = (Vec<u64>, u64, u64);

fn drain_both(p: &ShmPath, start: u64) -> (Drained, Drained) {
    let mut rf = ringfire::RingConsumer::<u64>::builder()
        .start_from_sequence(start)
        .attach(p.path())
        .unwrap();
    let mut rw = ringwire::RingConsumer::<u64>::builder()
        .start_from_sequence(start)
        .attach(p.path())
        .unwrap();
    let (mut a, mut b) = (vec![], vec![]);
    for _ in 0..1000 {
        if let Some(x) = rf.try_recv() {
            a.push(x);
        }
        if let Some(x) = rw.try_recv() {
            b.push(x);
        }
    }
    (
        (a, rf.lapped_count(), rf.cursor()),
        (b, rw.lapped_count(), rw.cursor()),
    )
}

#[test]
fn holes_in_sparse_and_mpmc_rings_read_alike() {
    use ringwire_tests::shm::patch;
    // (flags, holes as (seq, value left in its slot), start)
    type Holes = &'static [(u64, u64)];
    let cases: [(u32, Holes, u64); 7] = [
        (0x0411, &[(15, 7)], 13),
        (0x0411, &[(15, 7), (16, 8)], 13),
        (0x0411, &[(20, 12)], 13),
        (0x0411, &[(13, 5), (20, 12)], 1),
        (0x0411, &[(15, 0)], 15),
        (0x0021, &[(15, 7)], 13),
        (0x0021, &[(15, 7), (19, 11)], 10),
    ];
    for (flags, holes, start) in cases {
        let p = ShmPath::new("edge-holes");
        let mut prod = ringfire::RingProducerBuilder::new(8)
            .cleanup_mode(ringfire::CleanupMode::Persistent)
            .build::<u64, _>(p.path())
            .unwrap();
        for i in 1..=20u64 {
            prod.push(&(i * 100));
        }
        drop(prod);
        patch(p.path(), 48, &flags.to_le_bytes());
        if flags & 0x0020 != 0 {
            // An MPMC ring's next ticket to claim, as its producers would have left it: at 0
            // it is below write_seq, a corrupt header both crates' tools refuse and
            // ringwire's readers refuse at attach.
            patch(p.path(), 40, &21u64.to_le_bytes());
        }
        for &(seq, left) in holes {
            patch(p.path(), 128 + (seq & 7) * 16, &left.to_le_bytes());
        }
        let (x, y) = drain_both(&p, start);
        assert_eq!(x, y, "flags {flags:#x} holes {holes:?} start {start}");
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, FromBytes, IntoBytes, Immutable, KnownLayout)]
struct Quote {
    bid: f64,
    ask: f64,
}
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, FromBytes, IntoBytes, Immutable, KnownLayout)]
struct Pair([u64; 2]);
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, FromBytes, IntoBytes, Immutable, KnownLayout)]
struct Nested {
    q: Quote,
    n: [u32; 3],
    f: f32,
}
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, PartialEq, FromBytes, IntoBytes, Immutable, KnownLayout)]
struct Quote16 {
    bid: f64,
    ask: f64,
}

fn sig_case<
    P: FromBytes + IntoBytes + Immutable + Copy + 'static,
    C: FromBytes + Copy + 'static,
>(
    same: bool,
) {
    use ringwire::core::AttachError;
    let ctx = format!(
        "{} read as {}",
        std::any::type_name::<P>(),
        std::any::type_name::<C>()
    );
    assert_eq!(
        ringwire::signature::compute_layout_signature::<P>(),
        ringfire::signature::compute_layout_signature::<P>(),
        "{ctx}"
    );
    let p = ShmPath::new("edge-sig");
    let _rw = ringwire::RingProducer::<P>::create(p.path(), 4).unwrap();
    let rf = ringfire::RingConsumer::<C>::attach(p.path());
    let rw = ringwire::RingConsumer::<C>::attach(p.path());
    assert_eq!(rf.is_ok(), same, "{ctx}");
    assert_eq!(rw.is_ok(), same, "{ctx}");
    if same {
        return;
    }
    let rf = rf.err().unwrap();
    let rw = rw.err().unwrap();
    let rf_kind = match rf {
        ringfire::RingfireError::SchemaMismatch { .. } => "schema",
        ringfire::RingfireError::ElementSizeMismatch { .. } => "size",
        ref e => panic!("{ctx}: ringfire {e}"),
    };
    let rw_kind = match &rw {
        ringwire::Error::Attach {
            source: AttachError::SchemaMismatch { .. },
            ..
        } => "schema",
        ringwire::Error::Attach {
            source: AttachError::ElementSizeMismatch { .. },
            ..
        } => "size",
        e => panic!("{ctx}: ringwire {e}"),
    };
    assert_eq!(rf_kind, rw_kind, "{ctx}: {rf} / {rw}");
}

#[test]
fn schema_signatures_and_mismatches_agree() {
    sig_case::<Quote, Quote>(true);
    sig_case::<Quote, Pair>(false);
    sig_case::<Quote, u128>(false);
    sig_case::<Quote, Quote16>(false);
    sig_case::<Nested, Nested>(true);
    sig_case::<Nested, [u8; 32]>(false);
    sig_case::<[f64; 2], [u64; 2]>(false);
    sig_case::<[f32; 4], [f32; 4]>(true);
    sig_case::<u128, u128>(true);
    sig_case::<u128, Quote16>(false);
    sig_case::<(), ()>(true);
    sig_case::<(), u8>(false);
    sig_case::<u64, i64>(false);
    sig_case::<u64, u32>(false);
}

/// A `write_seq` just below 2^63 reads alike; at or past it (a corrupt header, which no
/// producer of either crate publishes) ringfire's reader attaches and ringwire's refuses
/// with `AttachError::WriteSeqExhausted`, as both crates' producers and ringwire's tools do.
#[test]
fn write_seq_near_its_limit_reads_alike() {
    use ringwire_tests::shm::patch;
    for w in [
        (1u64 << 62) + 3,
        (1 << 63) - 1,
        1 << 63,
        (1 << 63) + 2,
        u64::MAX - 2,
    ] {
        let p = ShmPath::new("edge-wlimit");
        let prod = ringfire::RingProducerBuilder::new(4)
            .cleanup_mode(ringfire::CleanupMode::Persistent)
            .build::<u64, _>(p.path())
            .unwrap();
        drop(prod);
        // Records w-3..=w, as a producer that got there would have left them.
        for s in w - 3..=w {
            patch(p.path(), 128 + (s & 3) * 16, &s.to_le_bytes());
            patch(
                p.path(),
                128 + (s & 3) * 16 + 8,
                &(s ^ 0xABCD).to_le_bytes(),
            );
        }
        patch(p.path(), 32, &w.to_le_bytes());
        for mode in 0..4 {
            let mut rf = {
                let b = ringfire::RingConsumer::<u64>::builder();
                match mode {
                    0 => b.start_from_latest(),
                    1 => b.start_from_oldest(),
                    2 => b.start_from_head(),
                    _ => b.start_from_sequence(w - 1),
                }
                .attach(p.path())
                .unwrap()
            };
            let rw = {
                let b = ringwire::RingConsumer::<u64>::builder();
                match mode {
                    0 => b.start_from_latest(),
                    1 => b.start_from_oldest(),
                    2 => b.start_from_head(),
                    _ => b.start_from_sequence(w - 1),
                }
                .attach(p.path())
            };
            if w >= 1 << 63 {
                let e = rw.expect_err("ringwire attached to a corrupt ring");
                assert_eq!(
                    e.attach_error(),
                    Some(ringwire::core::AttachError::WriteSeqExhausted { write_seq: w }),
                    "w {w:#x} mode {mode}: {e}"
                );
                drop(rf);
                continue;
            }
            let mut rw = match rw {
                Ok(c) => c,
                Err(e) => panic!("w {w:#x} mode {mode}: ringwire refused: {e}"),
            };
            let (mut a, mut b) = (vec![], vec![]);
            for _ in 0..200 {
                if let Some(x) = rf.try_recv() {
                    a.push(x);
                }
                if let Some(x) = rw.try_recv() {
                    b.push(x);
                }
            }
            assert_eq!(
                (a, rf.cursor(), rf.lapped_count()),
                (b, rw.cursor(), rw.lapped_count()),
                "w {w:#x} mode {mode}"
            );
        }
    }
}

#[test]
fn checkpoint_files_are_alike_and_read_both_ways() {
    for name in [
        "algo",
        "  padded  ",
        "",
        "exactly-thirty-one-bytes-long-x",
        "thirty-two-bytes-long-name-xxxxx",
        "ünïcödé ünïcödé ünïcödé ünïcödé",
        "日本語の名前は長いです日本語",
    ] {
        let a = ShmPath::new("edge-ckpt-rf");
        let b = ShmPath::new("edge-ckpt-rw");
        let rf = ringfire::checkpoint::OffsetCheckpoint::open_or_create(a.path(), name).unwrap();
        let rw = ringwire::OffsetCheckpoint::open_or_create(b.path(), name).unwrap();
        assert_eq!(rf.name(), rw.name(), "{name:?}");
        rf.save(12345);
        rw.save(12345);
        let mut fa = std::fs::read(a.path()).unwrap();
        let mut fb = std::fs::read(b.path()).unwrap();
        // pid (12..16) and updated_ns (24..32) differ by nature.
        for f in [&mut fa, &mut fb] {
            f[12..16].fill(0);
            f[24..32].fill(0);
        }
        assert_eq!(fa, fb, "{name:?}");
        // Each opens the other's file and sees the offset.
        let x = ringfire::checkpoint::OffsetCheckpoint::open_or_create(b.path(), name).unwrap();
        let y = ringwire::OffsetCheckpoint::open_or_create(a.path(), name).unwrap();
        assert_eq!((x.load(), y.load()), (Some(12345), Some(12345)), "{name:?}");
    }
}

#[test]
fn a_full_registry_refuses_the_other_projects_reader_on_a_lossless_ring() {
    for ours_first in [false, true] {
        let p = ShmPath::new("edge-reg1");
        let mut prod = ringfire::RingProducerBuilder::new(4)
            .flow_control(ringfire::FlowControl::LosslessBackpressure)
            .max_readers(1)
            .build::<u64, _>(p.path())
            .unwrap();
        if ours_first {
            let mut a = ringwire::RingConsumer::<u64>::attach(p.path()).unwrap();
            let b = ringfire::RingConsumer::<u64>::attach(p.path());
            assert!(
                matches!(b, Err(ringfire::RingfireError::NoAvailableReaderSlots)),
                "{:?}",
                b.err()
            );
            // The one registered reader holds the producer back at a full ring.
            for i in 1..=4 {
                assert!(prod.try_push(&i).is_ok());
            }
            assert!(prod.try_push(&5).is_err());
            assert_eq!(a.try_recv(), Some(1));
            assert!(prod.try_push(&5).is_ok());
        } else {
            let _a = ringfire::RingConsumer::<u64>::attach(p.path()).unwrap();
            let b = ringwire::RingConsumer::<u64>::attach(p.path());
            assert!(
                matches!(b, Err(ringwire::Error::Registry { .. })),
                "{:?}",
                b.err()
            );
        }
    }
    // And the same on a ringwire producer's ring.
    let p = ShmPath::new("edge-reg1w");
    let mut prod = ringwire::RingProducer::<u64>::builder(4)
        .flow_control(ringwire::FlowControl::LosslessBackpressure)
        .max_readers(1)
        .build::<u64, _>(p.path())
        .unwrap();
    let mut a = ringfire::RingConsumer::<u64>::attach(p.path()).unwrap();
    assert!(matches!(
        ringwire::RingConsumer::<u64>::attach(p.path()),
        Err(ringwire::Error::Registry { .. })
    ));
    for i in 1..=4 {
        assert!(prod.try_push(&i).is_ok());
    }
    assert!(prod.try_push(&5).is_err());
    assert_eq!(a.try_recv(), Some(1));
    assert!(prod.try_push(&5).is_ok());
}
