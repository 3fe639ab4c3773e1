//! Every `AttachError` variant, each produced by a deliberately corrupted ring (spec §1.3).
// Heap-memory rings need `Region::from_raw_parts`, which loom builds do not have.
#![cfg(not(loom))]

use ringwire_core::broadcast::{NoWake, Producer};
use ringwire_core::layout::{arena_off, hdr};
use ringwire_core::{AttachError, Expect, Geometry, RingView};

mod broadcast_common;

use broadcast_common::{Heap, heap};

fn ring(geo: &Geometry) -> Heap {
    broadcast_common::ring(geo).0
}

/// Lossless ring: capacity 4, stride 16, 2 registry slots at 128, slots at 256, 320 bytes.
fn spmc() -> Heap {
    let h = ring(&Geometry::spmc(4, 16, 8, 2, true).unwrap());
    assert_eq!(h.region.len(), 320);
    h
}

/// Blob ring of spec §3: slots at 0x100, arena at 0x180, 704 bytes.
fn blob() -> Heap {
    let h = ring(&Geometry::blob(4, 32, 2, 256).unwrap());
    assert_eq!(h.region.len(), 704);
    h
}

fn set64(h: &Heap, off: usize, v: u64) {
    // SAFETY: every offset used is a header or arena-header field inside the region.
    unsafe { h.region.a64(off) }.store(v, ringwire_core::sync::Ordering::Relaxed);
}

fn set32(h: &Heap, off: usize, v: u32) {
    // SAFETY: as for set64, for 4-aligned header fields.
    unsafe { h.region.a32(off) }.store(v, ringwire_core::sync::Ordering::Relaxed);
}

fn attach(h: &Heap) -> Result<RingView, AttachError> {
    RingView::attach(h.region, Expect::RAW)
}

fn err(h: &Heap) -> AttachError {
    let e = attach(h).unwrap_err();
    assert!(!e.to_string().is_empty());
    e
}

#[test]
fn intact_rings_attach() {
    assert!(attach(&spmc()).is_ok());
    assert!(attach(&blob()).is_ok());
}

#[test]
fn too_short() {
    let h = heap(120);
    assert_eq!(err(&h), AttachError::TooShort { len: 120 });
}

#[test]
fn bad_magic() {
    let h = spmc();
    set64(&h, hdr::MAGIC, 0x1234);
    assert_eq!(err(&h), AttachError::BadMagic { found: 0x1234 });
    // Zero means the creator has not finished.
    let h = heap(256);
    assert_eq!(err(&h), AttachError::BadMagic { found: 0 });
}

#[test]
fn bad_version() {
    let h = spmc();
    set32(&h, hdr::VERSION, 1);
    assert_eq!(err(&h), AttachError::BadVersion { found: 1 });
}

#[test]
fn element_size_mismatch() {
    let h = spmc();
    let e = RingView::attach(
        h.region,
        Expect {
            element_size: Some(24),
            ..Expect::RAW
        },
    )
    .unwrap_err();
    assert_eq!(
        e,
        AttachError::ElementSizeMismatch {
            expected: 24,
            found: 16
        }
    );
}

#[test]
fn element_size_too_small() {
    let h = spmc();
    set32(&h, hdr::ELEMENT_SIZE, 4);
    assert_eq!(err(&h), AttachError::ElementSizeTooSmall { found: 4 });
}

#[test]
fn capacity_not_power_of_two() {
    let h = spmc();
    set64(&h, hdr::CAPACITY, 3);
    assert_eq!(err(&h), AttachError::CapacityNotPowerOfTwo { found: 3 });
    set64(&h, hdr::CAPACITY, 0);
    assert_eq!(err(&h), AttachError::CapacityNotPowerOfTwo { found: 0 });
}

#[test]
fn bad_mask() {
    let h = spmc();
    set64(&h, hdr::MASK, 7);
    assert_eq!(
        err(&h),
        AttachError::BadMask {
            capacity: 4,
            mask: 7
        }
    );
}

#[test]
fn bad_slots_offset() {
    let h = spmc();
    set64(&h, hdr::SLOTS_OFFSET, 64);
    assert_eq!(
        err(&h),
        AttachError::BadSlotsOffset {
            offset: 64,
            align: 8
        }
    );
    set64(&h, hdr::SLOTS_OFFSET, 260);
    assert_eq!(
        err(&h),
        AttachError::BadSlotsOffset {
            offset: 260,
            align: 8
        }
    );
}

/// A reader's slot alignment that is not a power of two (`Expect::slot_align` is a plain
/// `u64`) made `slots_offset` a multiple of it alone: with 12, a header's `slots_offset` of
/// 132 attached, and the first slot access was a 64-bit atomic at a misaligned offset (a
/// debug assertion in debug builds, undefined behaviour in release).
#[test]
fn slots_offset_off_the_word_grid_for_a_non_power_of_two_alignment() {
    // No registry: slots at 128; two slots of 16 bytes from 132 still end inside 192.
    let h = ring(&Geometry::spmc(4, 16, 8, 0, false).unwrap());
    set64(&h, hdr::CAPACITY, 2);
    set64(&h, hdr::MASK, 1);
    set64(&h, hdr::SLOTS_OFFSET, 132);
    for slot_align in [12, 20, 44, 132] {
        let e = RingView::attach(
            h.region,
            Expect {
                slot_align,
                ..Expect::RAW
            },
        )
        .unwrap_err();
        assert_eq!(
            e,
            AttachError::BadSlotsOffset {
                offset: 132,
                align: 8
            },
            "slot_align {slot_align}"
        );
    }
    // At a word-aligned offset, a multiple of the reader's alignment, the ring attaches.
    set64(&h, hdr::SLOTS_OFFSET, 144);
    let view = RingView::attach(
        h.region,
        Expect {
            slot_align: 12,
            ..Expect::RAW
        },
    )
    .unwrap();
    let mut dst = [0u8; 8];
    assert_eq!(
        view.read_slot(1, &mut dst),
        ringwire_core::SlotRead::Pending
    );
}

#[test]
fn slots_past_end() {
    let h = spmc();
    set64(&h, hdr::CAPACITY, 8);
    set64(&h, hdr::MASK, 7);
    assert_eq!(
        err(&h),
        AttachError::SlotsPastEnd {
            end: Some(384),
            len: 320
        }
    );
    // capacity * element_size overflows u64.
    set64(&h, hdr::CAPACITY, 1 << 63);
    set64(&h, hdr::MASK, (1 << 63) - 1);
    assert_eq!(
        err(&h),
        AttachError::SlotsPastEnd {
            end: None,
            len: 320
        }
    );
}

#[test]
fn registry_misaligned() {
    let h = spmc();
    set32(&h, hdr::REGISTRY_OFFSET, 160);
    assert_eq!(err(&h), AttachError::RegistryMisaligned { offset: 160 });
}

#[test]
fn registry_past_end() {
    let h = spmc();
    set32(&h, hdr::REGISTRY_COUNT, 10);
    assert_eq!(
        err(&h),
        AttachError::RegistryPastEnd {
            end: 128 + 640,
            len: 320
        }
    );
}

#[test]
fn registry_overlapping_the_slots() {
    let h = spmc();
    // 3 slots end at 320: inside the file, but over the slots at 256.
    set32(&h, hdr::REGISTRY_COUNT, 3);
    assert_eq!(
        err(&h),
        AttachError::Overlap {
            what: "registry",
            start: 128,
            end: 320,
            slots_offset: 256,
            slots_end: 320,
        }
    );
}

#[test]
fn arena_misaligned() {
    let h = blob();
    set64(&h, hdr::ARENA_OFFSET, 0x190);
    assert_eq!(err(&h), AttachError::ArenaMisaligned { offset: 0x190 });
}

#[test]
fn arena_past_end() {
    let h = blob();
    set64(&h, hdr::ARENA_SIZE, 512);
    assert_eq!(
        err(&h),
        AttachError::ArenaPastEnd {
            end: Some(0x180 + 64 + 512),
            len: 704
        }
    );
    set64(&h, hdr::ARENA_SIZE, u64::MAX);
    assert_eq!(
        err(&h),
        AttachError::ArenaPastEnd {
            end: None,
            len: 704
        }
    );
}

#[test]
fn bad_arena() {
    let h = blob();
    set64(&h, hdr::ARENA_SIZE, 100);
    assert_eq!(
        err(&h),
        AttachError::BadArena {
            arena_size: 100,
            element_size: 32
        }
    );
}

#[test]
fn arena_overlapping_the_slots() {
    let h = blob();
    set64(&h, hdr::ARENA_OFFSET, 0x100);
    assert_eq!(
        err(&h),
        AttachError::Overlap {
            what: "arena",
            start: 0x100,
            end: 0x100 + 64 + 256,
            slots_offset: 0x100,
            slots_end: 0x180,
        }
    );
}

#[test]
fn arena_header_mismatch() {
    let h = blob();
    set64(&h, 0x180 + arena_off::CAPACITY, 128);
    assert_eq!(
        err(&h),
        AttachError::ArenaHeaderMismatch {
            arena_size: 256,
            arena_capacity: 128
        }
    );
}

#[test]
fn arena_mask_mismatch() {
    let h = blob();
    set64(&h, 0x180 + arena_off::MASK, 0xFF00);
    let e = err(&h);
    assert_eq!(
        e,
        AttachError::ArenaMaskMismatch {
            arena_capacity: 256,
            mask: 0xFF00
        }
    );
    assert_eq!(
        e.to_string(),
        "arena header mask 0xff00 is not its capacity 256 - 1"
    );
}

#[test]
fn schema_mismatch() {
    let h = spmc();
    set64(&h, hdr::SCHEMA_SIG, 0xAAAA);
    let expect = |sig| Expect {
        schema_sig: Some(sig),
        ..Expect::RAW
    };
    assert_eq!(
        RingView::attach(h.region, expect(0xBBBB)).unwrap_err(),
        AttachError::SchemaMismatch {
            expected: 0xBBBB,
            found: 0xAAAA
        }
    );
    assert!(RingView::attach(h.region, expect(0xAAAA)).is_ok());
    // 0 in the header means "unverified": any type is accepted.
    set64(&h, hdr::SCHEMA_SIG, 0);
    assert!(RingView::attach(h.region, expect(0xBBBB)).is_ok());
}

#[test]
fn wrong_kind() {
    let h = ring(&Geometry::mpmc(4, 16, 8).unwrap());
    let view = attach(&h).unwrap();
    let e = Producer::new(view, NoWake).unwrap_err();
    assert_eq!(
        e,
        AttachError::WrongKind {
            flags: 0x0021,
            need: "a single-writer ring"
        }
    );
    assert!(e.to_string().contains("0x0021"));
}

/// Header values above 2^32 whose low 32 bits are the ring's real ones: a 32-bit build that
/// narrowed them to usize before the checks would find the slots or the arena inside the
/// region and accept the ring. The checks are made in u64 before any offset is narrowed,
/// so every build refuses them (this runs under Miri on i686 as on 64-bit hosts).
#[test]
fn header_values_whose_low_32_bits_would_fit_are_refused_on_every_target() {
    const G: u64 = 1 << 32;
    let h = spmc();
    set64(&h, hdr::SLOTS_OFFSET, G + 256);
    assert_eq!(
        err(&h),
        AttachError::SlotsPastEnd {
            end: Some(G + 256 + 4 * 16),
            len: 320
        }
    );
    // 2^32 slots: none at all once narrowed to a 32-bit usize.
    let h = spmc();
    set64(&h, hdr::CAPACITY, G);
    set64(&h, hdr::MASK, G - 1);
    assert_eq!(
        err(&h),
        AttachError::SlotsPastEnd {
            end: Some(256 + 16 * G),
            len: 320
        }
    );
    let h = blob();
    set64(&h, hdr::ARENA_OFFSET, G + 0x180);
    assert_eq!(
        err(&h),
        AttachError::ArenaPastEnd {
            end: Some(G + 0x180 + 64 + 256),
            len: 704
        }
    );
    let h = blob();
    set64(&h, hdr::ARENA_SIZE, G);
    assert_eq!(
        err(&h),
        AttachError::ArenaPastEnd {
            end: Some(0x180 + 64 + G),
            len: 704
        }
    );
}
