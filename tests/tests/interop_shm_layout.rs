//! Layout-level interop with the published ringfire 0.5.2 crate: rings made by ringfire are
//! attached and validated by ringwire, rings made by ringwire are read by ringfire, and the
//! two projects' producers exclude each other through the same flock.

use ringfire::{BlobProducer, FlowControl, RingConsumer, RingProducer, RingProducerBuilder};
use ringwire::core::layout::{Flags, schema_signature_of, slot_stride};
use ringwire::core::{AttachError, Expect, Geometry, SlotRead};
use ringwire::{CreateOptions, Error, ReadOnlyRing, RingFile};
use ringwire_tests::shm::{ShmPath, view};

#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Tick {
    px: f64,
    qty: u32,
    side: u8,
}

fn tick(i: u64) -> Tick {
    Tick {
        px: i as f64 * 0.5,
        qty: (i * 7) as u32,
        side: (i % 3) as u8,
    }
}

fn parse_tick(b: &[u8]) -> Tick {
    Tick {
        px: f64::from_ne_bytes(b[0..8].try_into().unwrap()),
        qty: u32::from_ne_bytes(b[8..12].try_into().unwrap()),
        side: b[12],
    }
}

fn expect_of<T>() -> Expect {
    Expect {
        element_size: Some(slot_stride(size_of::<T>(), align_of::<T>()) as u32),
        schema_sig: Some(schema_signature_of::<T>()),
        slot_align: align_of::<T>().max(8) as u64,
    }
}

#[test]
fn ringfire_spmc_ring_attached_and_read_by_ringwire() {
    let p = ShmPath::new("rf-spmc");
    let mut prod = RingProducer::<Tick>::create(p.path(), 64).unwrap();
    for i in 1..=100 {
        prod.push(&tick(i));
    }
    let ring = RingFile::open(&p, expect_of::<Tick>()).unwrap();
    let h = view(&ring).header();
    assert_eq!(h.version, 2);
    assert_eq!(h.capacity, 64);
    assert_eq!(h.mask, 63);
    assert_eq!(h.element_size, 24);
    assert_eq!(h.flags, Flags::MODE_SPMC | Flags::POLICY_LATEST_WINS);
    assert_eq!(h.slots_offset, 128);
    assert_eq!(h.reader_registry_offset, 0);
    assert_eq!(h.arena_offset, 0);
    assert_eq!(h.schema_sig, schema_signature_of::<Tick>());
    assert_eq!(h.write_seq, 100);
    assert_eq!(ring.file_len(), 128 + 64 * 24);
    // Every retained record reads back tear-free with ringfire's bytes.
    let mut buf = [0u8; 16];
    for seq in 37..=100 {
        assert_eq!(view(&ring).read_slot(seq, &mut buf), SlotRead::Ok);
        assert_eq!(parse_tick(&buf), tick(seq));
    }
    assert_eq!(
        view(&ring).read_slot(36, &mut buf),
        SlotRead::Overwritten { seen: 100 }
    );
    assert_eq!(view(&ring).read_slot(101, &mut buf), SlotRead::Pending);
}

#[test]
fn ringfire_byte_array_and_lossless_layouts() {
    let p = ShmPath::new("rf-u8x64");
    let _prod = RingProducer::<[u8; 64]>::create(p.path(), 16).unwrap();
    let ring = ReadOnlyRing::open(&p).unwrap();
    let g = *ring.geometry();
    assert_eq!((g.element_size, g.capacity, g.slots_offset), (72, 16, 128));
    let ours = Geometry::spmc(16, 72, 1, 0, false)
        .unwrap()
        .with_schema(schema_signature_of::<[u8; 64]>());
    assert_eq!(g, ours);
    assert_eq!(g.schema_sig, 0x5d85_c2aa_ca19_8040);

    let p2 = ShmPath::new("rf-lossless");
    let _prod2 = RingProducerBuilder::new(8)
        .flow_control(FlowControl::LosslessBackpressure)
        .build::<u64, _>(p2.path())
        .unwrap();
    let ring2 = ReadOnlyRing::open(&p2).unwrap();
    let ours2 = Geometry::spmc(8, 16, 8, 0, true)
        .unwrap()
        .with_schema(schema_signature_of::<u64>());
    assert_eq!(*ring2.geometry(), ours2);
    assert_eq!(ring2.header().flags, 0x0212);
    assert_eq!(ring2.header().slots_offset, 0x880);
}

#[test]
fn ringfire_blob_ring_layout_and_arena() {
    let p = ShmPath::new("rf-blob");
    let mut prod = BlobProducer::<u32>::create(p.path(), 4, 256).unwrap();
    prod.push(&1, &[7u8; 5]).unwrap();
    prod.push(&2, &[9u8; 70]).unwrap();
    let ring = RingFile::open(&p, Expect::RAW).unwrap();
    let ours = Geometry::blob(4, 32, 32, 256)
        .unwrap()
        .with_schema(schema_signature_of::<u32>());
    assert_eq!(*view(&ring).geometry(), ours);
    assert_eq!(ring.file_len(), 2624);
    assert_eq!(view(&ring).header().flags, 0x0311);
    let ro = ReadOnlyRing::open(&p).unwrap();
    assert_eq!(ro.arena_reserved(), Some(0xC0));
    // The second descriptor points at arena offset 0x40 with length 70 (spec §10.3).
    let mut payload = [0u8; 24];
    assert_eq!(ro.read_slot(2, &mut payload), SlotRead::Ok);
    assert_eq!(u32::from_ne_bytes(payload[0..4].try_into().unwrap()), 2);
    assert_eq!(u64::from_le_bytes(payload[8..16].try_into().unwrap()), 0x40);
    assert_eq!(u32::from_le_bytes(payload[16..20].try_into().unwrap()), 70);
}

#[test]
fn typed_attach_rejects_the_wrong_type() {
    let p = ShmPath::new("rf-wrongtype");
    let _prod = RingProducer::<Tick>::create(p.path(), 8).unwrap();
    let e = RingFile::open(&p, expect_of::<u64>()).unwrap_err();
    assert_eq!(
        e.attach_error(),
        Some(AttachError::ElementSizeMismatch {
            expected: 16,
            found: 24
        })
    );
    // Same stride, different type: the schema signature tells them apart.
    let e = RingFile::open(&p, expect_of::<[u8; 16]>()).unwrap_err();
    assert!(
        matches!(e.attach_error(), Some(AttachError::SchemaMismatch { found, .. }) if found == schema_signature_of::<Tick>()),
        "{e}"
    );
}

#[test]
fn ringwire_ring_read_by_ringfire_consumer() {
    let p = ShmPath::new("rw-to-rf");
    let geo = Geometry::spmc(64, 24, 8, 0, false)
        .unwrap()
        .with_schema(schema_signature_of::<Tick>());
    let ring = RingFile::create(&p, &geo, &CreateOptions::default()).unwrap();
    let mut cons = RingConsumer::<Tick>::attach(p.path()).unwrap();
    for i in 1..=40u64 {
        let t = tick(i);
        let mut bytes = [0u8; 16];
        bytes[0..8].copy_from_slice(&t.px.to_ne_bytes());
        bytes[8..12].copy_from_slice(&t.qty.to_ne_bytes());
        bytes[12] = t.side;
        view(&ring).write_slot(i, &bytes);
        if view(&ring).publish(i) {
            ring.wake_all();
        }
    }
    for i in 1..=40u64 {
        assert_eq!(cons.try_recv(), Some(tick(i)));
    }
    assert_eq!(cons.try_recv(), None);
    assert_eq!(cons.lapped_count(), 0);
}

#[test]
fn producers_of_both_projects_exclude_each_other() {
    let p = ShmPath::new("excl");
    {
        let _rf = RingProducer::<u64>::create(p.path(), 8).unwrap();
        let geo = Geometry::spmc(8, 16, 8, 0, false).unwrap();
        let e = RingFile::create(&p, &geo, &CreateOptions::default()).unwrap_err();
        assert!(matches!(e, Error::ProducerAlreadyExists { .. }), "{e}");
        assert!(e.to_string().contains("another producer holds its lock"));
    }
    let geo = Geometry::spmc(8, 16, 8, 0, false).unwrap();
    let _rw = RingFile::create(&p, &geo, &CreateOptions::default()).unwrap();
    assert!(RingProducer::<u64>::create(p.path(), 8).is_err());
}
