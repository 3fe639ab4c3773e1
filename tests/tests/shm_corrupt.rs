//! Corrupt ring files: each damage gives its own error naming the file and the bad value,
//! and random header bytes never make attach panic (acceptance line 3).

use proptest::prelude::*;
use ringwire::core::layout::{RING_MAGIC, hdr};
use ringwire::core::{AttachError, Expect, Geometry};
use ringwire::{CleanupMode, CreateOptions, Error, ReadOnlyRing, RingFile};
use ringwire_tests::shm::{ShmPath, patch, view};

fn persistent() -> CreateOptions {
    CreateOptions {
        cleanup: CleanupMode::Persistent,
        ..CreateOptions::default()
    }
}

/// A valid plain ring (capacity 8, stride 16, 2 registry slots): 384 bytes.
fn plain_ring(tag: &str) -> ShmPath {
    let p = ShmPath::new(tag);
    let geo = Geometry::spmc(8, 16, 8, 2, false).unwrap();
    drop(RingFile::create(&p, &geo, &persistent()).unwrap());
    assert_eq!(std::fs::metadata(&p).unwrap().len(), 384);
    p
}

/// A valid blob ring (capacity 4, stride 32, 2 readers, arena 256): 704 bytes.
fn blob_ring(tag: &str) -> ShmPath {
    let p = ShmPath::new(tag);
    let geo = Geometry::blob(4, 32, 2, 256).unwrap();
    drop(RingFile::create(&p, &geo, &persistent()).unwrap());
    assert_eq!(std::fs::metadata(&p).unwrap().len(), 704);
    p
}

/// Attaches both read-write and read-only; both must fail the same way. Returns the error
/// and its message, which must name the file.
fn attach_err(p: &ShmPath) -> (AttachError, String) {
    let e = RingFile::open(p, Expect::RAW).expect_err("corrupt ring attached");
    let ro = ReadOnlyRing::open(p).expect_err("corrupt ring attached read-only");
    assert_eq!(e.attach_error(), ro.attach_error());
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!("ring {}: ", p.path().display())),
        "message does not name the file: {msg}"
    );
    (e.attach_error().expect("not an attach error"), msg)
}

#[test]
fn valid_rings_attach() {
    let p = plain_ring("valid");
    let r = RingFile::open(&p, Expect::RAW).unwrap();
    assert_eq!(view(&r).capacity(), 8);
    let b = blob_ring("valid-blob");
    let r = ReadOnlyRing::open(&b).unwrap();
    assert_eq!(r.geometry().arena_size, 256);
}

#[test]
fn truncated_below_header() {
    let p = plain_ring("trunc");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(100)
        .unwrap();
    let (e, msg) = attach_err(&p);
    assert_eq!(e, AttachError::TooShort { len: 100 });
    assert!(msg.contains("file is 100 bytes"), "{msg}");
}

#[test]
fn empty_file() {
    let p = ShmPath::new("empty");
    std::fs::write(&p, b"").unwrap();
    let (e, msg) = attach_err(&p);
    assert_eq!(e, AttachError::TooShort { len: 0 });
    assert!(msg.contains("file is 0 bytes"), "{msg}");
}

#[test]
fn truncated_slots() {
    let p = plain_ring("trunc-slots");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(300)
        .unwrap();
    let (e, msg) = attach_err(&p);
    assert_eq!(
        e,
        AttachError::SlotsPastEnd {
            end: Some(384),
            len: 300
        }
    );
    assert!(
        msg.contains("slots end at byte 384") && msg.contains("300 bytes"),
        "{msg}"
    );
}

#[test]
fn wrong_magic() {
    let p = plain_ring("magic");
    patch(p.path(), hdr::MAGIC as u64, &0xDEAD_BEEFu64.to_le_bytes());
    let (e, msg) = attach_err(&p);
    assert_eq!(e, AttachError::BadMagic { found: 0xDEAD_BEEF });
    assert!(msg.contains("bad magic 0x00000000deadbeef"), "{msg}");
}

#[test]
fn unfinished_creation_magic_zero() {
    let p = plain_ring("magic0");
    patch(p.path(), hdr::MAGIC as u64, &0u64.to_le_bytes());
    let (e, msg) = attach_err(&p);
    assert_eq!(e, AttachError::BadMagic { found: 0 });
    assert!(msg.contains("magic is 0"), "{msg}");
}

#[test]
fn wrong_version() {
    let p = plain_ring("version");
    patch(p.path(), hdr::VERSION as u64, &3u32.to_le_bytes());
    let (e, msg) = attach_err(&p);
    assert_eq!(e, AttachError::BadVersion { found: 3 });
    assert!(msg.contains("ring version 3 is not supported"), "{msg}");
}

#[test]
fn capacity_not_power_of_two() {
    let p = plain_ring("cap");
    patch(p.path(), hdr::CAPACITY as u64, &1000u64.to_le_bytes());
    let (e, msg) = attach_err(&p);
    assert_eq!(e, AttachError::CapacityNotPowerOfTwo { found: 1000 });
    assert!(
        msg.ends_with("capacity 1000 is not a power of two"),
        "{msg}"
    );
}

#[test]
fn capacity_zero() {
    let p = plain_ring("cap0");
    patch(p.path(), hdr::CAPACITY as u64, &0u64.to_le_bytes());
    let (e, _) = attach_err(&p);
    assert_eq!(e, AttachError::CapacityNotPowerOfTwo { found: 0 });
}

/// Spec §1.3 check 6's second half: a capacity that is a power of two but a mask that is
/// not `capacity - 1` (a reader masking sequences with it would index the wrong slots).
#[test]
fn mask_that_is_not_capacity_minus_one() {
    for mask in [0u64, 3, 8, u64::MAX] {
        let p = plain_ring("mask");
        patch(p.path(), hdr::MASK as u64, &mask.to_le_bytes());
        let (e, msg) = attach_err(&p);
        assert_eq!(e, AttachError::BadMask { capacity: 8, mask });
        assert!(
            msg.ends_with(&format!("mask {mask:#x} is not capacity 8 - 1")),
            "{msg}"
        );
    }
}

/// A stride that is not a multiple of 8 would put slot sequence words (8-byte atomics) at
/// misaligned offsets; a registry that reaches into the slots would make two protocols
/// share words. Neither is in spec §1.3's list; both are refused with their own error.
#[test]
fn misaligned_stride_and_overlapping_registry() {
    let p = plain_ring("stride12");
    patch(p.path(), hdr::ELEMENT_SIZE as u64, &12u32.to_le_bytes());
    let (e, msg) = attach_err(&p);
    assert_eq!(e, AttachError::ElementSizeMisaligned { found: 12 });
    assert!(msg.contains("element_size 12"), "{msg}");
    // Two registry slots at 128 end at 256; slots moved down to 192 overlap the second.
    let p = plain_ring("overlap");
    patch(p.path(), hdr::SLOTS_OFFSET as u64, &192u64.to_le_bytes());
    let (e, msg) = attach_err(&p);
    assert!(
        matches!(
            e,
            AttachError::Overlap {
                what: "registry",
                start: 128,
                end: 256,
                slots_offset: 192,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(msg.contains("registry at bytes 128..256 overlaps"), "{msg}");
}

#[test]
fn element_size_too_small() {
    let p = plain_ring("elem");
    patch(p.path(), hdr::ELEMENT_SIZE as u64, &4u32.to_le_bytes());
    let (e, msg) = attach_err(&p);
    assert_eq!(e, AttachError::ElementSizeTooSmall { found: 4 });
    assert!(msg.contains("element_size 4 is smaller than 8"), "{msg}");
}

#[test]
fn slots_offset_outside_file() {
    let p = plain_ring("slots-off");
    patch(
        p.path(),
        hdr::SLOTS_OFFSET as u64,
        &(1u64 << 40).to_le_bytes(),
    );
    let (e, msg) = attach_err(&p);
    let end = (1u64 << 40) + 8 * 16;
    assert_eq!(
        e,
        AttachError::SlotsPastEnd {
            end: Some(end),
            len: 384
        }
    );
    assert!(msg.contains(&format!("slots end at byte {end}")), "{msg}");
}

#[test]
fn slots_offset_overflows() {
    let p = plain_ring("slots-ovf");
    patch(
        p.path(),
        hdr::SLOTS_OFFSET as u64,
        &(u64::MAX - 7).to_le_bytes(),
    );
    let (e, msg) = attach_err(&p);
    assert_eq!(
        e,
        AttachError::SlotsPastEnd {
            end: None,
            len: 384
        }
    );
    assert!(msg.contains("overflows"), "{msg}");
}

#[test]
fn slots_offset_inside_header() {
    let p = plain_ring("slots-low");
    patch(p.path(), hdr::SLOTS_OFFSET as u64, &64u64.to_le_bytes());
    let (e, msg) = attach_err(&p);
    assert_eq!(
        e,
        AttachError::BadSlotsOffset {
            offset: 64,
            align: 8
        }
    );
    assert!(msg.contains("slots_offset 64"), "{msg}");
}

#[test]
fn registry_past_end() {
    let p = plain_ring("reg");
    patch(p.path(), hdr::REGISTRY_COUNT as u64, &1000u32.to_le_bytes());
    let (e, msg) = attach_err(&p);
    assert_eq!(
        e,
        AttachError::RegistryPastEnd {
            end: 128 + 64 * 1000,
            len: 384
        }
    );
    assert!(
        msg.contains("reader registry ends at byte 64128") && msg.contains("384 bytes"),
        "{msg}"
    );
}

#[test]
fn registry_misaligned() {
    let p = plain_ring("reg-align");
    patch(p.path(), hdr::REGISTRY_OFFSET as u64, &130u32.to_le_bytes());
    let (e, msg) = attach_err(&p);
    assert_eq!(e, AttachError::RegistryMisaligned { offset: 130 });
    assert!(msg.contains("reader_registry_offset 130"), "{msg}");
}

#[test]
fn arena_past_end() {
    let p = blob_ring("arena");
    patch(p.path(), hdr::ARENA_SIZE as u64, &4096u64.to_le_bytes());
    let (e, msg) = attach_err(&p);
    assert_eq!(
        e,
        AttachError::ArenaPastEnd {
            end: Some(0x180 + 64 + 4096),
            len: 704
        }
    );
    assert!(msg.contains("arena ends at byte 4544"), "{msg}");
}

#[test]
fn arena_offset_outside_file() {
    let p = blob_ring("arena-off");
    patch(
        p.path(),
        hdr::ARENA_OFFSET as u64,
        &(1u64 << 50).to_le_bytes(),
    );
    let (e, _) = attach_err(&p);
    assert!(
        matches!(e, AttachError::ArenaPastEnd { end: Some(x), len: 704 } if x > 1 << 50),
        "{e:?}"
    );
}

#[test]
fn arena_header_disagrees() {
    let p = blob_ring("arena-hdr");
    patch(p.path(), 0x180, &128u64.to_le_bytes());
    let (e, msg) = attach_err(&p);
    assert_eq!(
        e,
        AttachError::ArenaHeaderMismatch {
            arena_size: 256,
            arena_capacity: 128
        }
    );
    assert!(msg.contains("arena header capacity 128"), "{msg}");
}

/// An arena header whose `mask` is not its capacity − 1 (spec §10.1) is corrupt: ringfire's
/// blob consumer refuses it ("arena mask does not match its capacity"), and so do we, where
/// we attached it (and `stat`, `dump` and `serve` took it for a sound ring).
#[test]
fn arena_mask_disagrees() {
    let p = blob_ring("arena-mask");
    patch(p.path(), 0x180 + 8, &127u64.to_le_bytes());
    assert!(ringfire::BlobConsumer::<u32>::attach(p.path()).is_err());
    let (e, msg) = attach_err(&p);
    assert_eq!(
        e,
        AttachError::ArenaMaskMismatch {
            arena_capacity: 256,
            mask: 127
        }
    );
    assert!(
        msg.contains("arena header mask 0x7f is not its capacity 256 - 1"),
        "{msg}"
    );
    // The typed blob consumer refuses it too, as ringfire's does.
    let blob = ringwire::BlobConsumer::<u32>::attach(&p).unwrap_err();
    assert_eq!(blob.attach_error(), Some(e));
}

#[test]
fn messages_are_distinct() {
    // One message per damage: no two checks share wording.
    let cases: Vec<(&str, u64, Vec<u8>)> = vec![
        ("d-magic", hdr::MAGIC as u64, 1u64.to_le_bytes().to_vec()),
        ("d-ver", hdr::VERSION as u64, 9u32.to_le_bytes().to_vec()),
        ("d-cap", hdr::CAPACITY as u64, 7u64.to_le_bytes().to_vec()),
        ("d-mask", hdr::MASK as u64, 3u64.to_le_bytes().to_vec()),
        (
            "d-slots",
            hdr::SLOTS_OFFSET as u64,
            4096u64.to_le_bytes().to_vec(),
        ),
        (
            "d-reg",
            hdr::REGISTRY_COUNT as u64,
            99u32.to_le_bytes().to_vec(),
        ),
    ];
    let mut seen = std::collections::HashSet::new();
    for (tag, off, bytes) in cases {
        let p = plain_ring(tag);
        patch(p.path(), off, &bytes);
        let (_, msg) = attach_err(&p);
        let body = msg.split_once(": ").unwrap().1.to_string();
        assert!(seen.insert(body.clone()), "duplicate message {body}");
    }
}

#[test]
fn missing_file_and_directory() {
    let p = ShmPath::new("missing");
    let e = RingFile::open(&p, Expect::RAW).unwrap_err();
    assert!(matches!(e, Error::Io { op: "open", .. }), "{e:?}");
    assert!(e.to_string().contains(&p.path().display().to_string()));
    let e = ReadOnlyRing::open("/dev/shm").unwrap_err();
    assert!(matches!(e, Error::NotRegularFile { .. }), "{e:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Random header bytes (often with a valid magic and version so the deeper checks run)
    /// and a random file length: attach returns Ok or an error, never panics, and a ring
    /// that does attach can be read everywhere its geometry claims.
    #[test]
    fn random_headers_never_panic(
        mut header in proptest::collection::vec(any::<u8>(), 128),
        tail in 0usize..4096,
        fix_magic in any::<bool>(),
        small in any::<bool>(),
    ) {
        if fix_magic {
            header[0..8].copy_from_slice(&RING_MAGIC.to_le_bytes());
            header[8..12].copy_from_slice(&2u32.to_le_bytes());
        }
        if small {
            // Keep the geometry numbers small so that some headers pass every check.
            header[12] &= 0x78; header[13] = 0; header[14] = 0; header[15] = 0;
            // The registry size comes from a random byte, taken before the capacity
            // store below overwrites it (byte 17 is byte 1 of a capacity <= 32: always 0).
            let n = header[17] % 4;
            let cap = 1u64 << (header[16] % 6);
            header[16..24].copy_from_slice(&cap.to_le_bytes());
            header[24..32].copy_from_slice(&(cap - 1).to_le_bytes());
            // No arena, a small registry right after the header, slots after it.
            for b in &mut header[80..112] { *b = 0; }
            if n > 0 {
                header[96] = 128;
                header[100] = n;
            }
            header[104..106].copy_from_slice(&(128u16 + 64 * u16::from(n)).to_le_bytes());
        }
        let p = ShmPath::new("prop");
        let mut bytes = header.clone();
        bytes.resize(128 + tail, 0);
        std::fs::write(&p, &bytes).unwrap();
        match ReadOnlyRing::open(&p) {
            Ok(r) => {
                let g = *r.geometry();
                prop_assert!(g.total_len().unwrap() <= bytes.len() as u64);
                let mut buf = vec![0u8; g.record_len()];
                for seq in 1..=g.capacity.min(64) {
                    let _ = r.read_slot(seq, &mut buf);
                }
                for i in 0..g.registry_count.min(64) {
                    prop_assert!(r.registry_entry(i).is_some());
                }
                let _ = r.arena_reserved();
            }
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(msg.contains(&p.path().display().to_string()));
            }
        }
        match RingFile::open(&p, Expect::RAW) {
            Ok(r) => prop_assert!(view(&r).geometry().total_len().is_some()),
            Err(e) => prop_assert!(e.attach_error().is_some()),
        }
    }
}
