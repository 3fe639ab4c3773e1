//! ringfire's free-standing names in ringwire (`ringwire::{header, signature, tsc}`) give
//! ringfire's values: the header constants, the layout signature of any type, FNV-1a-64 of
//! any bytes, and `CycleStamp`'s counter and CPU.

#[cfg(target_arch = "x86_64")]
use ringwire::bench::floor::pin_to;

#[test]
fn the_header_constants_are_ringfires() {
    let pairs: [(u64, u64); 3] = [
        (ringwire::RINGFIRE_MAGIC, ringfire::RINGFIRE_MAGIC),
        (ringwire::BLACKBOARD_MAGIC, ringfire::BLACKBOARD_MAGIC),
        (ringwire::SLOT_WRITING, ringfire::SLOT_WRITING),
    ];
    for (ours, theirs) in pairs {
        assert_eq!(ours, theirs);
    }
    let pairs: [(u32, u32); 9] = [
        (ringwire::RINGFIRE_VERSION, ringfire::RINGFIRE_VERSION),
        (ringwire::BLACKBOARD_VERSION, ringfire::BLACKBOARD_VERSION),
        (
            ringwire::FLAG_POLICY_LATEST_WINS,
            ringfire::FLAG_POLICY_LATEST_WINS,
        ),
        (
            ringwire::FLAG_POLICY_LOSSLESS_BACKPRESSURE,
            ringfire::FLAG_POLICY_LOSSLESS_BACKPRESSURE,
        ),
        (ringwire::FLAG_MODE_SPMC, ringfire::FLAG_MODE_SPMC),
        (ringwire::FLAG_MODE_MPMC, ringfire::FLAG_MODE_MPMC),
        (ringwire::FLAG_WITH_ARENA, ringfire::FLAG_WITH_ARENA),
        (ringwire::FLAG_WITH_REGISTRY, ringfire::FLAG_WITH_REGISTRY),
        (ringwire::FLAG_SPARSE, ringfire::FLAG_SPARSE),
    ];
    for (i, (ours, theirs)) in pairs.into_iter().enumerate() {
        assert_eq!(ours, theirs, "pair {i}");
    }
}

#[allow(dead_code)]
#[repr(C)]
struct Quote<T> {
    px: f64,
    side: T,
}

macro_rules! same_signature {
    ($($t:ty),* $(,)?) => {$(
        assert_eq!(
            ringwire::compute_layout_signature::<$t>(),
            ringfire::compute_layout_signature::<$t>(),
            "{}",
            stringify!($t)
        );
        assert_eq!(
            <$t as ringwire::LayoutSignature>::layout_signature(),
            <$t as ringfire::LayoutSignature>::layout_signature(),
        );
    )*};
}

#[test]
fn layout_signatures_are_ringfires() {
    same_signature!(
        u8,
        u64,
        [u8; 64],
        (u8, u64),
        Quote<u8>,
        Quote<std::num::Wrapping<u16>>,
        Option<std::string::String>,
        [Quote<u32>; 3],
        &'static str,
        std::collections::HashMap<u64, Vec<u8>>,
    );
}

#[test]
fn fnv1a64_is_ringfires_on_any_bytes() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for len in 0..600usize {
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert_eq!(
            ringwire::fnv1a64(&bytes),
            ringfire::fnv1a64(&bytes),
            "{bytes:?}"
        );
    }
}

/// Both crates read the TSC on x86-64; elsewhere ours counts nanoseconds (see
/// `ringwire::tsc`).
#[cfg(target_arch = "x86_64")]
#[test]
fn cycle_stamps_read_ringfires_counter_and_cpu() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut checked = 0;
    for cpu in 0..cpus.min(8) {
        checked += std::thread::scope(|s| {
            s.spawn(|| {
                if !pin_to(cpu) {
                    return 0;
                }
                let before = ringfire::CycleStamp::now();
                let ours = ringwire::CycleStamp::now();
                let after = ringfire::CycleStamp::now();
                assert!(
                    before.tsc <= ours.tsc && ours.tsc <= after.tsc,
                    "{before:?} {ours:?} {after:?}"
                );
                assert_eq!(
                    (ours.core_id, ours.numa_node),
                    (before.core_id, before.numa_node)
                );
                assert_eq!(usize::from(ours.core_id), cpu);
                1
            })
            .join()
            .unwrap()
        });
    }
    assert!(checked > 0, "no CPU could be pinned");
    assert_eq!(
        ringwire::CycleStamp::counter_frequency_hz(),
        ringfire::CycleStamp::counter_frequency_hz()
    );
}

/// A record carrying a stamp, as ringfire writes it (ringfire takes any `Copy` type).
mod theirs {
    #[derive(Clone, Copy, Debug)]
    #[repr(C)]
    pub struct Stamped {
        pub stamp: ringfire::CycleStamp,
        pub seq: u64,
    }
}

/// The same record as ringwire reads it: same short name, so the same schema signature.
mod ours {
    #[derive(
        Clone, Copy, Debug, zerocopy::FromBytes, zerocopy::KnownLayout, zerocopy::Immutable,
    )]
    #[repr(C)]
    pub struct Stamped {
        pub stamp: ringwire::CycleStamp,
        pub seq: u64,
    }
}

/// The same record as ringwire writes it (a stamp is not `IntoBytes`, for its tail
/// padding): the stamp's fields, then that padding as a field.
mod ours_written {
    #[derive(Clone, Copy, Debug, zerocopy::IntoBytes, zerocopy::Immutable)]
    #[repr(C)]
    pub struct Stamped {
        pub tsc: u64,
        pub core_id: u16,
        pub numa_node: u16,
        pub pad: u32,
        pub seq: u64,
    }
}

#[test]
fn cycle_stamps_have_ringfires_layout() {
    use ringfire::CycleStamp as Theirs;
    use ringwire::CycleStamp as Ours;
    use std::mem::{align_of, offset_of, size_of};
    assert_eq!(
        (size_of::<Ours>(), align_of::<Ours>()),
        (size_of::<Theirs>(), align_of::<Theirs>())
    );
    assert_eq!(
        [
            offset_of!(Ours, tsc),
            offset_of!(Ours, core_id),
            offset_of!(Ours, numa_node)
        ],
        [
            offset_of!(Theirs, tsc),
            offset_of!(Theirs, core_id),
            offset_of!(Theirs, numa_node)
        ]
    );
    assert_eq!(
        ringwire::compute_layout_signature::<ours::Stamped>(),
        ringfire::compute_layout_signature::<theirs::Stamped>()
    );
}

/// Records carrying ringfire's stamps, and bare stamps, written by ringfire and read by a
/// ringwire consumer field for field (ringwire's `CycleStamp` was not `FromBytes`, so no
/// record carrying it could be read at all: this did not compile).
#[test]
fn ringfire_records_carrying_a_cycle_stamp_read_the_same_in_ringwire() {
    let stamped = ringwire_tests::shm::ShmPath::new("names-stamped");
    let bare = ringwire_tests::shm::ShmPath::new("names-stamp");
    let mut tx = ringfire::RingProducer::<theirs::Stamped>::create(stamped.path(), 64).unwrap();
    let mut tx_bare =
        ringfire::RingProducer::<ringfire::CycleStamp>::create(bare.path(), 64).unwrap();
    let mut rx = ringwire::RingConsumer::<ours::Stamped>::attach(&stamped).unwrap();
    let mut rx_bare = ringwire::RingConsumer::<ringwire::CycleStamp>::attach(&bare).unwrap();
    // Distinct bits in every field (a field read at another offset shows), then real stamps.
    let mut sent: Vec<ringfire::CycleStamp> = (0..4u16)
        .map(|i| ringfire::CycleStamp {
            tsc: 0x0123_4567_89ab_cdef ^ u64::from(i),
            core_id: 0x0abc + i,
            numa_node: 0x00f0 + i,
        })
        .collect();
    sent.extend((0..4).map(|_| ringfire::CycleStamp::now()));
    for (seq, stamp) in (1u64..).zip(&sent) {
        tx.push(&theirs::Stamped { stamp: *stamp, seq });
        tx_bare.push(stamp);
    }
    for (seq, stamp) in (1u64..).zip(&sent) {
        let want = ringwire::CycleStamp {
            tsc: stamp.tsc,
            core_id: stamp.core_id,
            numa_node: stamp.numa_node,
        };
        let got = rx.try_recv().expect("a record");
        assert_eq!((got.stamp, got.seq), (want, seq));
        assert_eq!(rx_bare.try_recv(), Some(want));
    }
    assert!(rx.try_recv().is_none() && rx_bare.try_recv().is_none());
}

/// The way the docs give for ringwire's producer to write a stamp: ringfire reads it as its
/// own stamped record.
#[test]
fn a_ringwire_record_holding_a_stamps_fields_reads_as_ringfires_stamped_record() {
    let path = ringwire_tests::shm::ShmPath::new("names-stamped-rw");
    let mut tx = ringwire::RingProducer::<ours_written::Stamped>::create(&path, 64).unwrap();
    let mut rx = ringfire::RingConsumer::<theirs::Stamped>::attach(path.path()).unwrap();
    let stamp = ringwire::CycleStamp::now();
    tx.push(&ours_written::Stamped {
        tsc: stamp.tsc,
        core_id: stamp.core_id,
        numa_node: stamp.numa_node,
        pad: 0,
        seq: 7,
    });
    let got = rx.try_recv().expect("a record");
    assert_eq!(
        (
            got.stamp.tsc,
            got.stamp.core_id,
            got.stamp.numa_node,
            got.seq
        ),
        (stamp.tsc, stamp.core_id, stamp.numa_node, 7)
    );
    assert!(rx.try_recv().is_none());
}
