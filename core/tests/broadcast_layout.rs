//! Byte-level checks of fixed-record rings built in heap memory against spec §2–§4.
// Heap-memory rings need `Region::from_raw_parts`, which loom builds do not have.
#![cfg(not(loom))]

use ringwire_core::broadcast::{Consumer, NoWake, Producer, StartMode};
use ringwire_core::layout::{schema_signature, slot_stride};
use ringwire_core::{Expect, Geometry, RingView};

mod broadcast_common;

use broadcast_common::{bytes, ring};

// Ring memory holds its integers in the host's byte order (spec §0.1: native layout, which
// is little-endian on every host ringfire runs on): the fields are read back that way, and
// the spelling of the magic on disk is checked where the host is little-endian.
fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes(b[off..off + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(b[off..off + 8].try_into().unwrap())
}

/// Header fields (spec §2) as read from raw bytes at their documented offsets.
#[derive(Debug, PartialEq)]
struct Hdr {
    version: u32,
    element_size: u32,
    capacity: u64,
    mask: u64,
    write_seq: u64,
    claim_seq: u64,
    flags: u32,
    futex_word: u32,
    waiting: u32,
    align_pad: u32,
    read_seq: u64,
    schema_sig: u64,
    arena_offset: u64,
    arena_size: u64,
    registry_offset: u32,
    registry_count: u32,
    slots_offset: u64,
}

fn hdr(b: &[u8]) -> Hdr {
    // The magic reads "ERIFGNIR" on disk (on a little-endian host, as ringfire writes it).
    if cfg!(target_endian = "little") {
        assert_eq!(&b[0..8], b"ERIFGNIR");
    }
    assert_eq!(u64_at(b, 0), 0x5249_4E47_4649_5245);
    assert!(
        b[112..128].iter().all(|&x| x == 0),
        "header padding is zero"
    );
    Hdr {
        version: u32_at(b, 8),
        element_size: u32_at(b, 12),
        capacity: u64_at(b, 16),
        mask: u64_at(b, 24),
        write_seq: u64_at(b, 32),
        claim_seq: u64_at(b, 40),
        flags: u32_at(b, 48),
        futex_word: u32_at(b, 52),
        waiting: u32_at(b, 56),
        align_pad: u32_at(b, 60),
        read_seq: u64_at(b, 64),
        schema_sig: u64_at(b, 72),
        arena_offset: u64_at(b, 80),
        arena_size: u64_at(b, 88),
        registry_offset: u32_at(b, 96),
        registry_count: u32_at(b, 100),
        slots_offset: u64_at(b, 104),
    }
}

fn fresh(element_size: u32, capacity: u64, flags: u32, reg: (u32, u32), slots: u64) -> Hdr {
    Hdr {
        version: 2,
        element_size,
        capacity,
        mask: capacity - 1,
        write_seq: 0,
        claim_seq: 0,
        flags,
        futex_word: 0,
        waiting: 0,
        align_pad: 0,
        read_seq: 0,
        schema_sig: 0,
        arena_offset: 0,
        arena_size: 0,
        registry_offset: reg.0,
        registry_count: reg.1,
        slots_offset: slots,
    }
}

#[test]
fn lossy_u64_ring_bytes() {
    // RingProducer<u64>: stride 16, no registry, slots at 128, file 128 + 8 * 16.
    let stride = slot_stride(8, 8);
    assert_eq!(stride, 16);
    let geo = Geometry::spmc(8, stride, 8, 0, false)
        .unwrap()
        // The signature ringfire writes for u64 on x86-64 (on i686 a u64 is aligned to 4,
        // which changes the signature of the type, not the header's bytes).
        .with_schema(schema_signature("u64", 8, 8));
    let (h, view) = ring(&geo);
    assert_eq!(h.region.len(), 256);
    let b = bytes(&h);
    let mut want = fresh(16, 8, 0x0011, (0, 0), 128);
    want.schema_sig = 0xaf4c_548b_cc96_4472;
    assert_eq!(hdr(&b), want);
    assert!(
        b[128..].iter().all(|&x| x == 0),
        "every slot starts at seq 0"
    );

    // Publish three records: slot k at 128 + 16k holds seq then the payload (a u64 record,
    // in the host's byte order as a typed producer writes it).
    let mut p = Producer::new(view, NoWake).unwrap();
    for v in [0x1111_u64, 0x2222, 0x3333] {
        p.push(&v.to_ne_bytes()).unwrap();
    }
    let b = bytes(&h);
    assert_eq!(u64_at(&b, 32), 3, "write_seq");
    for (seq, v) in [(1u64, 0x1111_u64), (2, 0x2222), (3, 0x3333)] {
        let off = 128 + 16 * seq as usize;
        assert_eq!(u64_at(&b, off), seq);
        assert_eq!(u64_at(&b, off + 8), v);
    }
    assert_eq!(u64_at(&b, 128), 0, "slot 0 untouched: sequences start at 1");
    // A typed attach with the same stride and signature succeeds.
    let expect = Expect {
        element_size: Some(16),
        schema_sig: Some(schema_signature("u64", 8, 8)),
        slot_align: 8,
    };
    assert!(RingView::attach(h.region, expect).is_ok());
}

#[test]
fn lossless_ring_bytes_match_section_3() {
    // Lossless with n = 0 raises n to 32: registry at 128, slots at 128 + 2048 = 0x880.
    let geo = Geometry::spmc(8, 16, 8, 0, true).unwrap();
    let (h, _view) = ring(&geo);
    let b = bytes(&h);
    assert_eq!(hdr(&b), fresh(16, 8, 0x0212, (128, 32), 0x880));
    assert_eq!(h.region.len(), 0x880 + 8 * 16);
    assert!(
        b[128..].iter().all(|&x| x == 0),
        "registry and slots zeroed"
    );
}

#[test]
fn lossy_ring_with_readers_and_over_aligned_records() {
    // An explicit reader count gives a lossy ring a registry: 0x0211, slots at
    // roundup(128 + 3 * 64, 64) = 320.
    let (h, _v) = ring(&Geometry::spmc(4, 16, 8, 3, false).unwrap());
    assert_eq!(hdr(&bytes(&h)), fresh(16, 4, 0x0211, (128, 3), 320));
    // A 32-byte record with 32-byte alignment: stride 64 (payload at +32).
    assert_eq!(slot_stride(32, 32), 64);
    let (h, _v) = ring(&Geometry::spmc(4, 64, 32, 0, false).unwrap());
    assert_eq!(hdr(&bytes(&h)), fresh(64, 4, 0x0011, (0, 0), 128));
    assert_eq!(h.region.len(), 128 + 4 * 64);
}

#[test]
fn blob_layout_examples_of_section_3() {
    let g = Geometry::blob(4, 32, 32, 256).unwrap();
    assert_eq!(
        (g.slots_offset, g.arena_offset, g.total_len()),
        (0x880, 0x900, Some(2624))
    );
    let g = Geometry::blob(4, 32, 2, 256).unwrap();
    assert_eq!(
        (g.slots_offset, g.arena_offset, g.total_len()),
        (0x100, 0x180, Some(704))
    );
}

#[test]
fn overwrite_marker_and_lap_in_bytes() {
    // Capacity 2: message 3 goes into slot 1, where message 1 was.
    let (h, view) = ring(&Geometry::spmc(2, 16, 8, 0, false).unwrap());
    let mut p = Producer::new(view, NoWake).unwrap();
    let mut c = Consumer::new(view, StartMode::Oldest);
    for v in 1..=3u64 {
        p.push(&(v * 100).to_ne_bytes()).unwrap();
    }
    let b = bytes(&h);
    assert_eq!((u64_at(&b, 128 + 16), u64_at(&b, 128 + 24)), (3, 300));
    assert_eq!((u64_at(&b, 128), u64_at(&b, 136)), (2, 200));
    let mut d = [0u8; 8];
    assert_eq!(c.try_recv(&mut d), Some(2));
    assert_eq!(u64::from_ne_bytes(d), 200);
    assert_eq!(c.lapped(), 1);
    // A slot whose sequence word holds the write marker u64::MAX is "pending".
    view.slot_seq(4)
        .store(u64::MAX, ringwire_core::sync::Ordering::Relaxed);
    assert_eq!(u64_at(&bytes(&h), 128), u64::MAX);
    assert_eq!(c.try_recv(&mut d), Some(3));
    assert_eq!(c.try_recv(&mut d), None);
}

#[test]
fn a_payload_offset_outside_the_slot_is_taken_as_8_in_every_build() {
    // Slots of 24 bytes: a payload offset must be 8 or 16. Any other is documented to be
    // taken as 8 (debug builds asserted on it before).
    // (Slot alignment 8: a 24-byte stride is no multiple of 16, which spmc refuses.)
    let (h, view) = ring(&Geometry::spmc(4, 24, 8, 0, false).unwrap());
    let mut p = Producer::new(view, NoWake).unwrap();
    for (seq, poff) in [(1u64, 12usize), (2, 0), (3, 200), (4, 16)] {
        assert_eq!(p.push_at(poff, &[seq as u8; 16]), Ok(seq));
    }
    let b = bytes(&h);
    let slot = |seq: u64| view.geometry().slots_offset as usize + (seq as usize % 4) * 24;
    for seq in 1..=3u64 {
        assert_eq!(&b[slot(seq) + 8..slot(seq) + 24], &[seq as u8; 16]);
    }
    // Offset 16 is valid: 8 bytes of payload room, the rest cut.
    assert_eq!(&b[slot(4) + 16..slot(4) + 24], &[4u8; 8]);
    let mut dst = [0u8; 16];
    assert_eq!(
        view.read_slot_at(2, 12, &mut dst),
        ringwire_core::ring::SlotRead::Ok
    );
    assert_eq!(dst, [2u8; 16]);
}
