//! Blob metas and blackboard values aligned above 8 bytes, against ringfire 0.5.2 both
//! ways: a 16-aligned meta (`u128`, `#[repr(C, align(16))]`) sits at slot offset 16 of a
//! blob ring, a value aligned to 16, 32, 64 or 128 at its alignment in a blackboard slot,
//! and the files both projects make for the same writes are identical. A blob ring made for a meta of
//! another alignment is a typed error.

use std::fmt::Debug;

use ringwire::core::AttachError;
use ringwire::core::blackboard::BlackboardError;
use ringwire::{BlackboardConsumer, BlackboardProducer, BlobConsumer, BlobProducer, Error};
use ringwire_tests::shm::ShmPath;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// A 32-byte meta aligned to 16, without padding (every byte is written by both sides).
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
struct Meta16 {
    id: u64,
    px: u64,
    qty: u32,
    side: u32,
    ts: u64,
}

fn meta16(i: u64) -> Meta16 {
    Meta16 {
        id: i,
        px: i.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        qty: (i * 7) as u32,
        side: (i % 3) as u32,
        ts: !i,
    }
}

fn meta_u128(i: u64) -> u128 {
    (u128::from(!i) << 64) | u128::from(i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// A 32-byte blackboard value aligned to 32: ringfire puts it at +32 of a 64-byte slot.
#[repr(C, align(32))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
struct Val32([u64; 4]);

/// 96 bytes aligned to 32: at +32 of a 128-byte slot.
#[repr(C, align(32))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
struct Val32x3([u64; 12]);

/// A 64-byte blackboard value aligned to 64: ringfire puts it at +64 of a 128-byte slot.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
struct Val64([u64; 8]);

/// 128 bytes aligned to 128: at +128 of a 256-byte slot.
#[repr(C, align(128))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
struct Val128([u64; 16]);

/// 384 bytes aligned to 128: at +128 of a 512-byte slot.
#[repr(C, align(128))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
struct Val128x3([u64; 48]);

/// Value `i` of a blackboard value type made of `u64` words: word k is `i * 100 + k`.
fn words<V: FromBytes + IntoBytes>(i: u64) -> V {
    let mut v = V::new_zeroed();
    for (k, w) in v.as_mut_bytes().chunks_exact_mut(8).enumerate() {
        w.copy_from_slice(&(i * 100 + k as u64).to_le_bytes());
    }
    v
}

fn payload(i: u64) -> Vec<u8> {
    (0..(i * 13 % 90 + 1)).map(|k| (i + k) as u8).collect()
}

const CAP: u64 = 16;
const ARENA: usize = 4096;
/// Messages pushed: fewer than the capacity, so a reader attached afterwards reads them all.
const MSGS: u64 = 12;

fn u32_at(f: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(f[o..o + 4].try_into().unwrap())
}

fn u64_at(f: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(f[o..o + 8].try_into().unwrap())
}

/// The same messages through a ringfire and a ringwire blob ring: identical files, ringfire's
/// stride and the meta at slot offset 16, then each project reads the other's ring.
fn blob_ring_both_ways<M>(tag: &str, meta: fn(u64) -> M)
where
    M: Copy + Debug + PartialEq + IntoBytes + FromBytes + Immutable + 'static,
{
    assert_eq!(align_of::<M>(), 16);
    let rf_path = ShmPath::new(&format!("{tag}-rf"));
    let rw_path = ShmPath::new(&format!("{tag}-rw"));
    let mut rf = ringfire::BlobProducer::<M>::create(rf_path.path(), CAP, ARENA).unwrap();
    let mut rw = BlobProducer::<M>::create(&rw_path, CAP, ARENA).unwrap();
    for i in 1..=MSGS {
        assert_eq!(rf.push(&meta(i), &payload(i)).unwrap(), i);
        assert_eq!(rw.push(&meta(i), &payload(i)).unwrap(), i);
    }
    let rf_file = std::fs::read(rf_path.path()).unwrap();
    let rw_file = std::fs::read(rw_path.path()).unwrap();
    let stride = size_of::<ringfire::header::Slot<ringfire::BlobPacket<M>>>();
    assert_eq!(stride, size_of::<M>() + 32, "meta at +16, BlobRef last");
    assert_eq!(u32_at(&rw_file, 12) as usize, stride, "element_size");
    let slots = u64_at(&rw_file, 104) as usize;
    for i in 1..=MSGS {
        let s = &rw_file[slots + stride * i as usize..][..stride];
        assert_eq!(u64_at(s, 0), i, "slot {i}'s sequence");
        assert_eq!(&s[8..16], &[0u8; 8], "slot {i}: bytes [8, 16) not zero");
        assert_eq!(
            &s[16..16 + size_of::<M>()],
            meta(i).as_bytes(),
            "slot {i}'s meta"
        );
    }
    assert_eq!(rf_file.len(), rw_file.len());
    if let Some(at) = (0..rf_file.len()).find(|&o| rf_file[o] != rw_file[o]) {
        panic!("the files differ first at byte {at:#x} (slots at {slots:#x}, stride {stride})");
    }

    // ringfire -> ringwire
    let mut cons = BlobConsumer::<M>::attach(&rf_path).unwrap();
    let (mut m, mut out) = (meta(0), vec![0u8; 128]);
    for i in 1..=MSGS {
        let got = cons.recv_seq(&mut m, &mut out).unwrap();
        assert_eq!(got, Some((i, payload(i).len())), "message {i}");
        assert_eq!((m, &out[..payload(i).len()]), (meta(i), &payload(i)[..]));
    }
    assert_eq!(cons.recv(&mut m, &mut out).unwrap(), None);
    // ringwire -> ringfire
    let mut cons = ringfire::BlobConsumer::<M>::attach(rw_path.path()).unwrap();
    for i in 1..=MSGS {
        let got = cons.recv(&mut m, &mut out).unwrap();
        assert_eq!(got, Some(payload(i).len()), "message {i}");
        assert_eq!((m, &out[..payload(i).len()]), (meta(i), &payload(i)[..]));
    }
    assert_eq!(cons.recv(&mut m, &mut out).unwrap(), None);
    // And the live producers go on: one more message each way, `view` included.
    rf.push(&meta(99), b"late").unwrap();
    rw.push(&meta(98), b"later").unwrap();
    let mut rw_cons = BlobConsumer::<M>::attach(&rf_path).unwrap();
    let mut last = None;
    while let Some(v) = rw_cons.view(|m, b| (*m, b.to_vec())).unwrap() {
        last = Some(v);
    }
    assert_eq!(last, Some((meta(99), b"late".to_vec())));
    assert_eq!(cons.recv(&mut m, &mut out).unwrap(), Some(5));
    assert_eq!((m, &out[..5]), (meta(98), &b"later"[..]));
}

#[test]
fn blob_ring_with_a_u128_meta_both_ways() {
    blob_ring_both_ways("blob-u128", meta_u128);
}

#[test]
fn blob_ring_with_a_repr_align16_meta_both_ways() {
    blob_ring_both_ways("blob-a16", meta16);
}

/// The attach error of a blob consumer of `M` on `path`.
fn blob_attach_error<M: FromBytes + 'static>(path: &ShmPath) -> AttachError {
    let e = BlobConsumer::<M>::attach(path).unwrap_err();
    e.attach_error()
        .unwrap_or_else(|| panic!("not an attach error: {e}"))
}

/// A blob ring made for an 8-aligned meta opened with a 16-aligned one, or the reverse, is
/// refused: by its stride when the strides differ, else by its schema signature (which
/// hashes the alignment).
#[test]
fn a_blob_ring_of_another_meta_alignment_is_a_typed_error() {
    // 8-aligned, 16 bytes: stride 40 against u128's 48.
    let p = ShmPath::new("blob-a8-as-a16");
    let _rf = ringfire::BlobProducer::<[u64; 2]>::create(p.path(), CAP, ARENA).unwrap();
    assert_eq!(
        blob_attach_error::<u128>(&p),
        AttachError::ElementSizeMismatch {
            expected: 48,
            found: 40
        }
    );
    // 8-aligned, 24 bytes: the same stride 48 as u128; the signature tells them apart.
    let p = ShmPath::new("blob-a8-same-stride");
    let _rw = BlobProducer::<[u64; 3]>::create(&p, CAP, ARENA).unwrap();
    let e = blob_attach_error::<u128>(&p);
    assert!(
        matches!(e, AttachError::SchemaMismatch { .. }),
        "{e:?} for a [u64; 3] ring opened as u128"
    );
    // The reverse: rings of 16-aligned metas opened with 8-aligned ones.
    let p = ShmPath::new("blob-a16-as-a8");
    let _rf = ringfire::BlobProducer::<u128>::create(p.path(), CAP, ARENA).unwrap();
    assert!(matches!(
        blob_attach_error::<[u64; 3]>(&p),
        AttachError::SchemaMismatch { .. }
    ));
    assert_eq!(
        blob_attach_error::<[u64; 2]>(&p),
        AttachError::ElementSizeMismatch {
            expected: 40,
            found: 48
        }
    );
    let p = ShmPath::new("blob-meta16-as-a8");
    let _rw = BlobProducer::<Meta16>::create(&p, CAP, ARENA).unwrap();
    assert_eq!(
        blob_attach_error::<[u64; 4]>(&p),
        AttachError::ElementSizeMismatch {
            expected: 56,
            found: 64
        }
    );
    // ringfire refuses ringwire's ring of the wrong meta too.
    assert!(ringfire::BlobConsumer::<[u64; 4]>::attach(p.path()).is_err());
}

/// The same writes to a ringfire and a ringwire blackboard of `V`: identical files, the
/// value at `value_at` in ringfire's slot size (`slot_size`), then each project reads the
/// other's board.
fn blackboard_both_ways<V>(tag: &str, val: fn(u64) -> V, value_at: usize, slot_size: usize)
where
    V: Copy + Debug + PartialEq + IntoBytes + FromBytes + Immutable + 'static,
{
    const KEYS: u32 = 6;
    let rf_path = ShmPath::new(&format!("{tag}-rf"));
    let rw_path = ShmPath::new(&format!("{tag}-rw"));
    let mut rf = ringfire::BlackboardProducer::<V>::create(rf_path.path(), KEYS as usize).unwrap();
    let mut rw = BlackboardProducer::<V>::create(&rw_path, KEYS as usize).unwrap();
    // Key 5 stays unwritten; key 1 is written twice.
    for (k, i) in [(0, 10), (1, 11), (2, 12), (3, 13), (4, 14), (1, 21)] {
        rf.write(k, &val(i)).unwrap();
        rw.write(k, &val(i)).unwrap();
    }
    let rf_file = std::fs::read(rf_path.path()).unwrap();
    let rw_file = std::fs::read(rw_path.path()).unwrap();
    let slot = size_of::<ringfire::header::BlackboardSlot<V>>();
    assert_eq!(slot, slot_size, "ringfire's BlackboardSlot size");
    assert_eq!(u32_at(&rw_file, 16) as usize, slot, "slot_size");
    assert_eq!(rw_file.len(), 128 + KEYS as usize * slot);
    let s1 = &rw_file[128 + slot..][..slot];
    assert_eq!(u64_at(s1, 0), 4, "key 1's seqlock after two writes");
    assert_eq!(&s1[value_at..][..size_of::<V>()], val(21).as_bytes());
    assert!(
        s1[8..value_at].iter().all(|&b| b == 0),
        "bytes before the value"
    );
    assert_eq!(rf_file, rw_file);

    // ringfire -> ringwire
    let cons = BlackboardConsumer::<V>::attach(&rf_path).unwrap();
    for (k, i) in [(0, 10), (1, 21), (2, 12), (3, 13), (4, 14)] {
        assert_eq!(cons.read(k).unwrap(), Some(val(i)), "key {k}");
    }
    assert_eq!(cons.read(5).unwrap(), None);
    // ringwire -> ringfire
    let cons = ringfire::BlackboardConsumer::<V>::attach(rw_path.path()).unwrap();
    for (k, i) in [(0, 10), (1, 21), (2, 12), (3, 13), (4, 14)] {
        assert_eq!(cons.read(k).unwrap(), Some(val(i)), "key {k}");
    }
    assert_eq!(cons.read(5).unwrap(), None);
    // Live updates cross too.
    rf.write(5, &val(55)).unwrap();
    rw.write(5, &val(56)).unwrap();
    let rw_cons = BlackboardConsumer::<V>::attach(&rf_path).unwrap();
    assert_eq!(rw_cons.read(5).unwrap(), Some(val(55)));
    assert_eq!(cons.read(5).unwrap(), Some(val(56)));
}

#[test]
fn blackboard_of_u128_values_both_ways() {
    blackboard_both_ways("bb-u128", meta_u128, 16, 64);
}

#[test]
fn blackboard_of_repr_align16_values_both_ways() {
    blackboard_both_ways("bb-a16", meta16, 16, 64);
}

#[test]
fn blackboard_of_repr_align32_values_both_ways() {
    blackboard_both_ways("bb-a32", words::<Val32>, 32, 64);
    blackboard_both_ways("bb-a32x3", words::<Val32x3>, 32, 128);
}

#[test]
fn blackboard_of_repr_align64_values_both_ways() {
    blackboard_both_ways("bb-a64", words::<Val64>, 64, 128);
}

#[test]
fn blackboard_of_repr_align128_values_both_ways() {
    blackboard_both_ways("bb-a128", words::<Val128>, 128, 256);
    blackboard_both_ways("bb-a128x3", words::<Val128x3>, 128, 512);
}

/// A board whose slot size is not the one the reader's type gets is a typed error, as
/// ringfire's "slot stride mismatch": 128 bytes aligned to 8 take 192-byte slots, aligned
/// to 128 they sit at +128 of 256-byte slots. Where both alignments give the same slot size
/// (`[u64; 2]` and `u128`: 64) the header cannot tell them apart, for ringfire either.
#[test]
fn a_blackboard_of_another_slot_size_is_a_typed_error() {
    let p = ShmPath::new("bb-a8-as-a128");
    let _rf = ringfire::BlackboardProducer::<[u64; 16]>::create(p.path(), 2).unwrap();
    let e = BlackboardConsumer::<Val128>::attach(&p).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Blackboard {
                source: BlackboardError::SlotSizeMismatch {
                    expected: 256,
                    found: 192,
                    value_align: 128
                },
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string().contains("slot_size 192 is not the 256"),
        "{e}"
    );
    // The reverse: ringwire's board, read by both projects as the 8-aligned type.
    let p = ShmPath::new("bb-a128-as-a8");
    let _rw = BlackboardProducer::<Val128>::create(&p, 2).unwrap();
    assert!(ringfire::BlackboardConsumer::<[u64; 16]>::attach(p.path()).is_err());
    let e = BlackboardConsumer::<[u64; 16]>::attach(&p).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Blackboard {
                source: BlackboardError::SlotSizeMismatch {
                    expected: 192,
                    found: 256,
                    value_align: 8
                },
                ..
            }
        ),
        "{e}"
    );
}
