//! Unit tests of the queues in heap buffers (small sizes under Miri).

use std::string::ToString;
use std::vec;
use std::vec::Vec;

use super::*;
use crate::AttachError;
use crate::blackboard::BLACKBOARD_MAGIC;
use crate::layout::RING_MAGIC;
use crate::region::Region;
use crate::ring::{Expect, RingView};
use crate::sync::Ordering;
use crate::testutil::{Word, words};

/// Thread iterations: small under Miri so it finishes in seconds.
const N: u64 = if cfg!(miri) { 60 } else { 20_000 };

/// The word of two adjacent u32 header fields, `first` at the lower address: the header
/// is in the host's byte order, as ring memory is.
fn fields(first: u32, second: u32) -> u64 {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&first.to_ne_bytes());
    b[4..].copy_from_slice(&second.to_ne_bytes());
    u64::from_ne_bytes(b)
}

/// Appends record `n` of `item` bytes to `out` for the FIFO models: each 8-byte word (the
/// last one cut to fit) is a different mix of `n`, its index and `salt`, so an item in the
/// wrong slot or a word in the wrong place within an item does not compare equal. Built a
/// word at a time: made a byte at a time, the records took most of these tests' time under
/// Miri.
fn record(n: u64, item: usize, salt: u64, out: &mut Vec<u8>) {
    let end = out.len() + item;
    for k in 0..item.div_ceil(8) as u64 {
        let w =
            n.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ k.wrapping_mul(0xc2b2_ae3d_27d4_eb4f) ^ salt;
        out.extend_from_slice(&w.to_le_bytes());
    }
    out.truncate(end);
}

/// The records 0, 1, ... of one size and salt ([`record`]), each made once and kept back to
/// back: the FIFO models push and compare each record at least twice, and under Miri
/// making a record (on the heap) each time took most of those tests' time.
struct Records {
    item: usize,
    salt: u64,
    bytes: Vec<u8>,
}

impl Records {
    fn new(item: usize, salt: u64) -> Records {
        Records {
            item,
            salt,
            bytes: Vec::new(),
        }
    }

    /// Records `from..to`, back to back.
    fn span(&mut self, from: u64, to: u64) -> &[u8] {
        let mut have = (self.bytes.len() / self.item) as u64;
        while have < to {
            record(have, self.item, self.salt, &mut self.bytes);
            have += 1;
        }
        &self.bytes[from as usize * self.item..to as usize * self.item]
    }

    /// Record `n`.
    fn one(&mut self, n: u64) -> &[u8] {
        self.span(n, n + 1)
    }
}

/// A heap buffer of `len` bytes (rounded up to words) and a region over it.
struct Buf(Vec<Word>);

impl Buf {
    fn new(len: u64) -> Buf {
        Buf(words((len as usize).div_ceil(8)))
    }
    fn region(&mut self) -> Region {
        let len = self.0.len() * 8;
        // SAFETY: the buffer outlives every region made from it in these tests, and is
        // only touched through the region while one exists.
        unsafe { Region::from_raw_parts(self.0.as_mut_ptr().cast(), len) }.unwrap()
    }
    /// [`QueueView::init`] over the whole buffer.
    fn init(&mut self, g: &QueueGeometry) -> Result<QueueView, QueueInitError> {
        let r = self.region();
        // SAFETY: every test calls this on a fresh buffer, before any other view of it
        // exists.
        unsafe { QueueView::init(r, g) }
    }
}

fn queue(kind: QueueKind, cap: u64, item: usize, stride: usize) -> (Buf, QueueView) {
    queue_of(&QueueGeometry::new(kind, cap, item, stride).unwrap())
}

/// A fixed-size SPSC queue of `cap` items of `item` bytes, in a buffer of its own.
fn fixed_queue(cap: u64, item: usize) -> (Buf, QueueView) {
    queue_of(&QueueGeometry::spsc_fixed(cap, item).unwrap())
}

/// A queue of geometry `g` in a buffer of its exact size.
fn queue_of(g: &QueueGeometry) -> (Buf, QueueView) {
    let mut b = Buf::new(g.total_len().unwrap());
    let q = b.init(g).unwrap();
    (b, q)
}

#[test]
fn geometry_rules_and_errors() {
    let g = QueueGeometry::cache_lines(QueueKind::Mpmc, 8, 56).unwrap();
    assert_eq!((g.slot_stride, g.slots_offset), (64, 384));
    assert_eq!(g.total_len(), Some(384 + 8 * 64));
    let g = QueueGeometry::cache_lines(QueueKind::Spsc, 8, 57).unwrap();
    assert_eq!(g.slot_stride, 128);
    assert_eq!(
        QueueGeometry::new(QueueKind::Spsc, 12, 8, 16),
        Err(QueueGeometryError::CapacityNotPowerOfTwo { capacity: 12 })
    );
    assert_eq!(
        QueueGeometry::new(QueueKind::Spsc, 8, 9, 16),
        Err(QueueGeometryError::BadStride {
            stride: 16,
            item_size: 9
        })
    );
    assert_eq!(
        QueueGeometry::new(QueueKind::Mpmc, 1, 8, 16),
        Err(QueueGeometryError::MpmcCapacityTooSmall { capacity: 1 })
    );
    assert!(QueueGeometry::new(QueueKind::Spsc, 1, 8, 16).is_ok());
    assert_eq!(
        QueueGeometry::new(QueueKind::Spsc, 8, 0, 16),
        Err(QueueGeometryError::BadItemSize { item_size: 0 })
    );
    assert_eq!(
        QueueGeometry::new(QueueKind::Spsc, 1 << 62, 56, 64),
        Err(QueueGeometryError::TooLarge {
            capacity: 1 << 62,
            slot_stride: 64
        })
    );
}

/// [`MAX_ITEM_SIZE`] is the largest item size a queue takes: every way of making a
/// geometry accepts it (with the smallest stride for it, the largest a 32-bit stride
/// field holds that is a multiple of 8), and refuses one byte more as an item size. Only
/// where such a queue fits the address space: on a 32-bit target it is `TooLarge`.
#[cfg(target_pointer_width = "64")]
#[test]
fn the_largest_item_size_makes_every_kind_of_geometry() {
    let max = MAX_ITEM_SIZE as usize;
    let with_word = (max + 8).next_multiple_of(8);
    for kind in [QueueKind::Spsc, QueueKind::Mpmc] {
        let g = QueueGeometry::new(kind, 2, max, with_word);
        assert_eq!(g.map(|g| g.item_size), Ok(MAX_ITEM_SIZE), "{kind:?}");
        assert_eq!(
            QueueGeometry::new(kind, 2, max + 1, with_word + 8),
            Err(QueueGeometryError::BadItemSize {
                item_size: max as u64 + 1
            })
        );
    }
    let g = QueueGeometry::spsc_fixed(2, max).unwrap();
    assert_eq!((g.item_size, g.fixed), (MAX_ITEM_SIZE, true));
    assert_eq!(
        QueueGeometry::spsc_fixed(2, max + 1),
        Err(QueueGeometryError::BadItemSize {
            item_size: max as u64 + 1
        })
    );
    // A stride past the header's 32-bit field says so.
    let e = QueueGeometry::new(QueueKind::Spsc, 2, 8, 1 << 32).unwrap_err();
    assert_eq!(
        e.to_string(),
        "slot stride 4294967296 is not a multiple of 8 from 8 + item size 8 up to 4294967288"
    );
}

#[test]
fn magics_read_as_ascii_and_differ_from_ringfire() {
    assert_eq!(&SPSC_MAGIC.to_le_bytes(), b"RWSPSCQ1");
    assert_eq!(&MPMC_MAGIC.to_le_bytes(), b"RWMPMCQ1");
    assert_ne!(SPSC_MAGIC, RING_MAGIC);
}

#[test]
fn init_then_attach_round_trip() {
    let (mut b, q) = queue(QueueKind::Mpmc, 4, 20, 32);
    let g = *q.geometry();
    let a = QueueView::attach(b.region(), QueueExpect::raw(QueueKind::Mpmc)).unwrap();
    assert_eq!(*a.geometry(), g);
    assert_eq!(a.header(), g.header());
    // MPMC stamps start at the slot index; the cursors at 0.
    for i in 0..4 {
        assert_eq!(a.slot_word(i).load(Ordering::Relaxed), i);
    }
    assert_eq!(a.enq().load(Ordering::Relaxed), 0);
    assert_eq!(b.0[0].0, MPMC_MAGIC);
}

#[test]
fn attach_errors_carry_the_bad_value() {
    let (mut b, _q) = queue(QueueKind::Spsc, 4, 8, 16);
    let r = b.region();
    let expect = QueueExpect::raw(QueueKind::Spsc);
    // Wrong kind.
    assert_eq!(
        QueueView::attach(r, QueueExpect::raw(QueueKind::Mpmc)).unwrap_err(),
        QueueAttachError::WrongKind {
            expected: QueueKind::Mpmc,
            found: QueueKind::Spsc
        }
    );
    // Item size and schema.
    let e = QueueExpect {
        item_size: Some(4),
        ..expect
    };
    assert_eq!(
        QueueView::attach(r, e).unwrap_err(),
        QueueAttachError::ItemSizeMismatch {
            expected: 4,
            found: 8
        }
    );
    let e = QueueExpect {
        schema_sig: Some(7),
        ..expect
    };
    assert!(
        QueueView::attach(r, e).is_ok(),
        "header sig 0 accepts any type"
    );
    // Too short.
    // SAFETY: a prefix of the same live buffer.
    let short = unsafe { Region::from_raw_parts(b.0.as_mut_ptr().cast(), 200) }.unwrap();
    assert_eq!(
        QueueView::attach(short, expect).unwrap_err(),
        QueueAttachError::TooShort { len: 200 }
    );
    // SAFETY: as above.
    let tiny = unsafe { Region::from_raw_parts(b.0.as_mut_ptr().cast(), 4) }.unwrap();
    assert_eq!(
        QueueView::attach(tiny, expect).unwrap_err(),
        QueueAttachError::TooShort { len: 4 }
    );
    // Slots past the end.
    // SAFETY: as above.
    let cut = unsafe { Region::from_raw_parts(b.0.as_mut_ptr().cast(), 384 + 3 * 16) }.unwrap();
    assert_eq!(
        QueueView::attach(cut, expect).unwrap_err(),
        QueueAttachError::SlotsPastEnd {
            end: Some(384 + 64),
            len: 384 + 48
        }
    );
    // Corrupt fields, one at a time (word index = byte offset / 8).
    let cases: [(usize, u64, QueueAttachError); 8] = [
        (1, fields(9, 1), QueueAttachError::BadVersion { found: 9 }),
        // A version-1 queue (per-slot length words always, the old MPMC stamps).
        (1, fields(1, 1), QueueAttachError::BadVersion { found: 1 }),
        (1, fields(2, 2), QueueAttachError::KindMismatch { kind: 2 }),
        (7, fields(2, 0), QueueAttachError::BadFlags { flags: 2 }),
        (
            7,
            fields(1 << 31, 0),
            QueueAttachError::BadFlags { flags: 1 << 31 },
        ),
        (
            2,
            6,
            QueueAttachError::BadCapacity {
                capacity: 6,
                mask: 3,
            },
        ),
        (
            4,
            fields(12, 8),
            QueueAttachError::BadStride {
                stride: 12,
                item_size: 8,
            },
        ),
        (5, 400, QueueAttachError::BadSlotsOffset { offset: 400 }),
    ];
    // Values above 2^32 whose low 32 bits are the queue's real ones (384 and 4), which a
    // 32-bit build narrowing them to usize before the checks would accept: the checks are
    // made in u64 (this runs under Miri on i686 as on 64-bit hosts).
    const G: u64 = 1 << 32;
    let wide = [
        (
            5,
            G + 384,
            QueueAttachError::SlotsPastEnd {
                end: Some(G + 384 + 64),
                len: 448,
            },
        ),
        (
            2,
            G + 4,
            QueueAttachError::BadCapacity {
                capacity: G + 4,
                mask: 3,
            },
        ),
    ];
    for (word, val, err) in cases.into_iter().chain(wide) {
        let saved = b.0[word];
        b.0[word] = Word(val);
        assert_eq!(QueueView::attach(b.region(), expect).unwrap_err(), err);
        b.0[word] = saved;
    }
    // 2^32 slots (mask 2^32 - 1): none once narrowed.
    b.0[2] = Word(G);
    b.0[3] = Word(G - 1);
    assert_eq!(
        QueueView::attach(b.region(), expect).unwrap_err(),
        QueueAttachError::SlotsPastEnd {
            end: Some(384 + 16 * G),
            len: 448
        }
    );
    b.0[2] = Word(4);
    b.0[3] = Word(3);
    assert!(QueueView::attach(b.region(), expect).is_ok());
    // Magic 0 (creation unfinished) and ringfire's magic.
    b.0[0] = Word(0);
    assert_eq!(
        QueueView::attach(b.region(), expect).unwrap_err(),
        QueueAttachError::BadMagic { found: 0 }
    );
    // A ring's or a blackboard's magic is named as such (a wrong path), as the ring's
    // attach names a queue's and std's Error::BadFileMagic names each.
    for (magic, owner) in [
        (RING_MAGIC, "a ring file"),
        (BLACKBOARD_MAGIC, "a blackboard"),
    ] {
        b.0[0] = Word(magic);
        let e = QueueView::attach(b.region(), expect).unwrap_err();
        assert_eq!(e, QueueAttachError::BadMagic { found: magic });
        assert_eq!(
            std::format!("{e}"),
            std::format!("bad queue magic {magic:#018x} (the magic of {owner})")
        );
    }
    b.0[0] = Word(RING_MAGIC);
    // A small ringfire ring (shorter than a queue's fixed part) is named by its magic.
    // SAFETY: a prefix of the same live buffer.
    let small = unsafe { Region::from_raw_parts(b.0.as_mut_ptr().cast(), 256) }.unwrap();
    assert_eq!(
        QueueView::attach(small, expect).unwrap_err(),
        QueueAttachError::BadMagic { found: RING_MAGIC }
    );
}

/// ringwire's own ring attach refuses a queue's magic (ringfire's reader is checked in
/// tests/tests/queue_interop.rs).
#[test]
fn ring_attach_refuses_a_queue() {
    let (mut b, _q) = queue(QueueKind::Spsc, 4, 8, 16);
    assert_eq!(
        RingView::attach(b.region(), Expect::RAW).unwrap_err(),
        AttachError::BadMagic { found: SPSC_MAGIC }
    );
}

#[test]
fn init_refuses_a_small_region() {
    let g = QueueGeometry::new(QueueKind::Spsc, 4, 8, 16).unwrap();
    let mut b = Buf::new(400);
    assert_eq!(
        b.init(&g).unwrap_err(),
        QueueInitError::RegionTooSmall {
            need: Some(448),
            len: 400
        }
    );
}

#[test]
fn init_names_what_is_wrong_with_a_hand_built_geometry() {
    // Capacity 3 fits easily in 4096 bytes: the error must say what is wrong with it, not
    // that the region is too small.
    let g = QueueGeometry {
        capacity: 3,
        ..QueueGeometry::new(QueueKind::Mpmc, 4, 8, 64).unwrap()
    };
    let mut b = Buf::new(4096);
    let e = b.init(&g).unwrap_err();
    assert_eq!(
        e,
        QueueInitError::BadGeometry {
            reason: QueueAttachError::BadCapacity {
                capacity: 3,
                mask: 2
            }
        }
    );
    assert_eq!(
        e.to_string(),
        "invalid geometry: capacity 3 is not a power of two (at least 2 for MPMC) or mask 0x2 \
         is not capacity - 1"
    );
    // FIXED on an MPMC queue, likewise.
    let g = QueueGeometry {
        fixed: true,
        ..QueueGeometry::new(QueueKind::Mpmc, 4, 8, 64).unwrap()
    };
    assert!(matches!(
        b.init(&g),
        Err(QueueInitError::BadGeometry {
            reason: QueueAttachError::BadFlags { .. }
        })
    ));
}

/// A hand-built geometry of capacity 0 made init compute its header's mask as
/// `capacity - 1`, an overflow panic in debug builds, before validation could refuse it.
#[test]
fn init_refuses_a_hand_built_capacity_of_zero() {
    let mut b = Buf::new(4096);
    for kind in [QueueKind::Spsc, QueueKind::Mpmc] {
        let g = QueueGeometry {
            capacity: 0,
            ..QueueGeometry::new(kind, 4, 8, 16).unwrap()
        };
        assert_eq!(
            b.init(&g).unwrap_err(),
            QueueInitError::BadGeometry {
                reason: QueueAttachError::BadCapacity {
                    capacity: 0,
                    mask: u64::MAX
                }
            },
            "{kind:?}"
        );
    }
}

#[test]
fn spsc_push_pop_variable_lengths() {
    let (_b, q) = queue(QueueKind::Spsc, 4, 20, 32);
    let mut p = SpscProducer::new(q).unwrap();
    let mut c = SpscConsumer::new(q).unwrap();
    let mut buf = [0u8; 32];
    assert_eq!(c.try_pop(&mut buf), Err(PopError::Empty));
    p.try_push(b"hello").unwrap();
    p.try_push(b"").unwrap();
    p.try_push(&[7u8; 20]).unwrap();
    assert_eq!(
        p.try_push(&[0u8; 21]),
        Err(PushError::TooLong {
            index: 0,
            len: 21,
            max: 20
        })
    );
    p.try_push(b"x").unwrap();
    assert_eq!(p.try_push(b"full"), Err(PushError::Full));
    assert_eq!(c.try_pop(&mut buf), Ok(5));
    assert_eq!(&buf[..5], b"hello");
    assert_eq!(c.try_pop(&mut buf), Ok(0));
    // A buffer too small leaves the item in place.
    assert_eq!(
        c.try_pop(&mut buf[..3]),
        Err(PopError::BufferTooSmall { len: 3, need: 20 })
    );
    assert_eq!(c.try_pop(&mut buf), Ok(20));
    assert_eq!(&buf[..20], &[7u8; 20]);
    assert_eq!(c.try_pop(&mut buf), Ok(1));
    assert_eq!(c.try_pop(&mut buf), Err(PopError::Empty));
    assert_eq!(p.free(), 4);
}

#[test]
fn payload_copies_take_the_callers_length_and_refuse_more_than_the_item() {
    let (_b, q) = queue(QueueKind::Spsc, 4, 20, 32);
    // Longer than the item size: nothing is written (callers check first; this is the
    // backstop that keeps the copy inside the slot).
    q.write_payload(1, &[0xAA; 24]);
    let mut word = [0u8; 32];
    q.read_payload(1, &mut word[..20]);
    assert_eq!(word, [0u8; 32]);
    q.write_payload(1, &[0x5A; 13]);
    // Reading more than the item size reads nothing.
    let mut big = [0xEEu8; 24];
    q.read_payload(1, &mut big);
    assert_eq!(big, [0xEE; 24]);
    // Exactly the caller's length: 13 bytes, then the zero fill of the partial last word.
    let mut out = [0xEEu8; 20];
    q.read_payload(1, &mut out);
    assert_eq!(out[..13], [0x5A; 13]);
    assert_eq!(out[13..16], [0; 3]);
    assert_eq!(out[16..], [0; 4]);

    // A pop into a buffer of exactly the item's length and into a longer one: the bytes
    // past the item stay as they were.
    let mut p = SpscProducer::new(q).unwrap();
    let mut c = SpscConsumer::new(q).unwrap();
    p.try_push(&[3u8; 7]).unwrap();
    p.try_push(&[4u8; 20]).unwrap();
    let mut buf = [0xEEu8; 32];
    assert_eq!(c.try_pop(&mut buf[..7]), Ok(7));
    assert_eq!(buf[..7], [3u8; 7]);
    assert_eq!(buf[7..], [0xEE; 25]);
    let mut buf = [0xEEu8; 32];
    assert_eq!(c.try_pop(&mut buf), Ok(20));
    assert_eq!(buf[..20], [4u8; 20]);
    assert_eq!(buf[20..], [0xEE; 12]);
}

#[test]
fn spsc_slices_move_with_one_index_store() {
    let (_b, q) = queue(QueueKind::Spsc, 8, 16, 24);
    let mut p = SpscProducer::new(q).unwrap();
    let mut c = SpscConsumer::new(q).unwrap();
    let items: Vec<Vec<u8>> = (0..6u8).map(|i| vec![i; i as usize + 1]).collect();
    assert_eq!(p.push_slice(&items), Ok(6));
    assert_eq!(q.enq().load(Ordering::Relaxed), 6);
    // Only 2 of the next 6 fit.
    assert_eq!(p.push_slice(&items), Ok(2));
    assert_eq!(q.enq().load(Ordering::Relaxed), 8);
    assert_eq!(p.push_slice(&items), Ok(0));
    // An overlong item anywhere rejects the whole batch.
    let bad = [vec![0u8; 3], vec![0u8; 17]];
    assert_eq!(
        p.push_slice(&bad),
        Err(PushError::TooLong {
            index: 1,
            len: 17,
            max: 16
        })
    );
    let mut bufs = [[0u8; 16]; 5];
    let mut lens = [0usize; 5];
    assert_eq!(c.pop_slice(&mut bufs, &mut lens), Ok(5));
    assert_eq!(q.deq().load(Ordering::Relaxed), 5);
    for k in 0..5 {
        assert_eq!(lens[k], k + 1);
        assert_eq!(&bufs[k][..k + 1], &items[k][..]);
    }
    // Stops before an item whose buffer is too small; returns what it popped, and the
    // error only when it is the first item.
    let mut small = [vec![0u8; 16], vec![]];
    let mut lens = [0usize; 2];
    assert_eq!(c.pop_slice(&mut small, &mut lens), Ok(1));
    assert_eq!(lens[0], 6);
    assert_eq!(
        c.pop_slice(&mut small[1..], &mut lens[1..]),
        Err(PopError::BufferTooSmall { len: 0, need: 1 })
    );
    assert_eq!(c.pop_slice(&mut bufs, &mut lens[..1]), Ok(1));
    assert_eq!(bufs[0][0], 0);
}

#[test]
fn spsc_fixed_records_round_trip_and_length_mismatch() {
    let (_b, q) = queue(QueueKind::Spsc, 4, 8, 16);
    let mut p = SpscProducer::new(q).unwrap();
    let mut c = SpscConsumer::new(q).unwrap();
    let recs: Vec<u8> = (1..=5u64).flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(p.push_fixed(&recs, 8), Ok(4));
    let mut out = [0u8; 16];
    assert_eq!(c.pop_fixed(&mut out, 8), Ok(2));
    assert_eq!(out[..8], 1u64.to_le_bytes());
    assert_eq!(out[8..], 2u64.to_le_bytes());
    p.try_push(b"abc").unwrap();
    let mut out = [0u8; 32];
    assert_eq!(c.pop_fixed(&mut out, 8), Ok(2));
    assert_eq!(
        c.pop_fixed(&mut out, 8),
        Err(PopError::LengthMismatch {
            len: 3,
            expected: 8
        })
    );
    let mut buf = [0u8; 8];
    assert_eq!(c.try_pop(&mut buf), Ok(3));
}

#[test]
fn spsc_fixed_layout_has_no_length_words() {
    let g = QueueGeometry::spsc_fixed(4, 8).unwrap();
    assert_eq!((g.slot_stride, g.fixed, g.payload_offset()), (8, true, 0));
    assert_eq!(g.total_len(), Some(384 + 4 * 8));
    assert_eq!(g.header().flags, FLAG_FIXED);
    let g64 = QueueGeometry::spsc_fixed(4, 64).unwrap();
    assert_eq!(g64.slot_stride, 64, "a 64-byte item fills exactly one line");
    assert_eq!(QueueGeometry::spsc_fixed(4, 13).unwrap().slot_stride, 16);
    assert_eq!(
        QueueGeometry::spsc_fixed(4, 0),
        Err(QueueGeometryError::BadItemSize { item_size: 0 })
    );
    assert_eq!(
        QueueGeometry::spsc_fixed(3, 8),
        Err(QueueGeometryError::CapacityNotPowerOfTwo { capacity: 3 })
    );
    let mut b = Buf::new(g.total_len().unwrap());
    let q = b.init(&g).unwrap();
    let a = QueueView::attach(b.region(), QueueExpect::raw(QueueKind::Spsc)).unwrap();
    assert_eq!(*a.geometry(), g);
    let mut p = SpscProducer::new(q).unwrap();
    let mut c = SpscConsumer::new(q).unwrap();
    assert_eq!(
        p.try_push(b"abc"),
        Err(PushError::WrongLength {
            index: 0,
            len: 3,
            expected: 8
        })
    );
    for lap in 0..3u64 {
        let recs: Vec<u8> = (0..4u64)
            .flat_map(|v| (lap * 10 + v).to_le_bytes())
            .collect();
        assert_eq!(p.push_fixed(&recs, 8), Ok(4));
        assert_eq!(p.try_push(&[0u8; 8]), Err(PushError::Full));
        // The slots hold the items and nothing else: word i of the slot area holds the
        // bytes of item i (pushed little-endian).
        for i in 0..4 {
            assert_eq!(u64::from_le(b.0[48 + i].0), lap * 10 + i as u64);
        }
        let mut one = [0u8; 8];
        assert_eq!(c.try_pop(&mut one), Ok(8));
        assert_eq!(u64::from_le_bytes(one), lap * 10);
        let mut out = [0u8; 32];
        assert_eq!(
            c.pop_fixed(&mut out, 4),
            Err(PopError::LengthMismatch {
                len: 8,
                expected: 4
            })
        );
        assert_eq!(c.pop_fixed(&mut out, 8), Ok(3));
        assert_eq!(out[16..24], (lap * 10 + 3).to_le_bytes());
    }
    // An MPMC header with FLAG_FIXED is refused.
    let (mut bm, _qm) = queue(QueueKind::Mpmc, 4, 8, 16);
    bm.0[7] = Word(fields(FLAG_FIXED, 0));
    assert_eq!(
        QueueView::attach(bm.region(), QueueExpect::raw(QueueKind::Mpmc)).unwrap_err(),
        QueueAttachError::BadFlags { flags: FLAG_FIXED }
    );
}

#[test]
fn spsc_fixed_single_items_keep_fifo_order_and_every_check() {
    // try_push/try_pop of exactly the item size take the decoded-slot path: packed (8, 64)
    // and padded (12 in a 16-byte stride) items, single pushes and pops in random runs
    // against a FIFO model across many wraps, mixed with batches, with Full and Empty
    // exactly when the model says so.
    for item in [8usize, 12, 64] {
        let (_b, q) = fixed_queue(4, item);
        let mut p = SpscProducer::new(q).unwrap();
        let mut c = SpscConsumer::new(q).unwrap();
        let mut recs = Records::new(item, 1);
        let (mut next_in, mut next_out) = (0u64, 0u64);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut out = vec![0u8; item];
        for _ in 0..if cfg!(miri) { 60 } else { 3_000 } {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            for _ in 0..x % 6 {
                let r = p.try_push(recs.one(next_in));
                if next_in - next_out == 4 {
                    assert_eq!(r, Err(PushError::Full), "item {item}");
                } else {
                    assert_eq!(r, Ok(()), "item {item}");
                    next_in += 1;
                }
            }
            if x & 0x100 != 0 {
                // A batch in between moves the cursors the same way.
                let free = 4 - (next_in - next_out);
                let n = p.push_fixed(recs.span(next_in, next_in + 2), item).unwrap() as u64;
                assert_eq!(n, free.min(2));
                next_in += n;
            }
            for _ in 0..(x >> 16) % 6 {
                let r = c.try_pop(&mut out);
                if next_in == next_out {
                    assert_eq!(r, Err(PopError::Empty), "item {item}");
                } else {
                    assert_eq!(r, Ok(item), "item {item}");
                    assert_eq!(out, recs.one(next_out), "item {item}, position {next_out}");
                    next_out += 1;
                }
            }
        }
        assert!(
            next_out > 1_000.min(next_in / 2),
            "item {item}: items moved"
        );
        while next_out < next_in {
            assert_eq!(c.try_pop(&mut out), Ok(item));
            assert_eq!(out, recs.one(next_out), "item {item}, position {next_out}");
            next_out += 1;
        }
        // A buffer of another length takes the general path: a longer one gets the item,
        // a shorter one is refused and loses nothing.
        assert_eq!(p.try_push(recs.one(next_in)), Ok(()));
        let mut short = vec![0u8; item - 1];
        assert_eq!(
            c.try_pop(&mut short),
            Err(PopError::BufferTooSmall {
                len: item - 1,
                need: item
            })
        );
        let mut long = vec![0u8; item + 8];
        assert_eq!(c.try_pop(&mut long), Ok(item));
        assert_eq!(long[..item], *recs.one(next_in));
        // An item of another length is refused without touching the queue.
        assert_eq!(
            p.try_push(&vec![0u8; item + 1]),
            Err(PushError::WrongLength {
                index: 0,
                len: item + 1,
                expected: item as u32
            })
        );
        assert_eq!(c.try_pop(&mut out), Err(PopError::Empty));
    }
}

#[test]
fn spsc_single_pops_hand_slots_back_every_few_pops_or_when_caught_up() {
    assert_eq!(
        [2, 16, 32, 64, 1024, 4096, 1 << 20].map(spsc::default_release_every),
        [1, 1, 2, 4, 64, 64, 64]
    );
    // 64 slots: a single pop hands its slot back every 4th pop, or when the consumer has
    // popped everything it last saw.
    let (_b, q) = fixed_queue(64, 8);
    let mut p = SpscProducer::new(q).unwrap();
    let mut c = SpscConsumer::new(q).unwrap();
    assert_eq!(c.release_every(), 4);
    for i in 0..64u64 {
        p.try_push(&i.to_le_bytes()).unwrap();
    }
    assert_eq!(p.try_push(&[0; 8]), Err(PushError::Full));
    let mut out = [0u8; 8];
    let mut pop = |c: &mut SpscConsumer, want: u64| {
        assert_eq!(c.try_pop(&mut out), Ok(8));
        assert_eq!(u64::from_le_bytes(out), want);
    };
    for i in 0..3 {
        pop(&mut c, i);
        assert_eq!(c.unreleased(), i + 1);
        assert_eq!(q.deq().load(Ordering::Relaxed), 0);
        assert_eq!(p.free(), 0);
    }
    pop(&mut c, 3);
    assert_eq!((c.unreleased(), q.deq().load(Ordering::Relaxed)), (0, 4));
    assert_eq!(p.free(), 4);
    // release() hands a partial run back at once; a second call stores nothing new.
    pop(&mut c, 4);
    c.release();
    assert_eq!((c.unreleased(), p.free()), (0, 5));
    c.release();
    assert_eq!(q.deq().load(Ordering::Relaxed), 5);
    // Popping the last item the consumer knows of hands everything back, off the beat.
    for i in 5..62 {
        pop(&mut c, i);
    }
    assert_eq!(c.unreleased(), 1);
    pop(&mut c, 62);
    pop(&mut c, 63);
    assert_eq!((c.unreleased(), p.free()), (0, 64));
    // The same rule for a queue of byte strings (the general path).
    let (_b2, q2) = queue(QueueKind::Spsc, 64, 16, 32);
    let mut p2 = SpscProducer::new(q2).unwrap();
    let mut c2 = SpscConsumer::new(q2).unwrap();
    assert_eq!(p2.push_slice(&[b"a", b"b", b"c"]), Ok(3));
    let mut buf = [0u8; 16];
    assert_eq!(c2.try_pop(&mut buf), Ok(1));
    assert_eq!((c2.unreleased(), q2.deq().load(Ordering::Relaxed)), (1, 0));
    assert_eq!(c2.try_pop(&mut buf), Ok(1));
    assert_eq!(c2.try_pop(&mut buf), Ok(1));
    assert_eq!((c2.unreleased(), q2.deq().load(Ordering::Relaxed)), (0, 3));
    // A batch pop stores the head at its end, taking any held slots with it.
    for i in 64..70u64 {
        p.try_push(&i.to_le_bytes()).unwrap();
    }
    pop(&mut c, 64);
    assert_eq!(c.unreleased(), 1);
    let mut two = [0u8; 16];
    assert_eq!(c.pop_fixed(&mut two, 8), Ok(2));
    assert_eq!((c.unreleased(), q.deq().load(Ordering::Relaxed)), (0, 67));
    // Dropping the consumer hands its popped slots back: the next one resumes after them.
    pop(&mut c, 67);
    assert_eq!(q.deq().load(Ordering::Relaxed), 67);
    drop(c);
    assert_eq!(q.deq().load(Ordering::Relaxed), 68);
    let mut c = SpscConsumer::new(q).unwrap();
    pop(&mut c, 68);
    // 1 stores the head after every pop; setting a run shorter than the slots held stores
    // it at once; the value is clamped to 1 ..= capacity.
    c.set_release_every(1);
    assert_eq!(c.unreleased(), 0);
    pop(&mut c, 69);
    assert_eq!(q.deq().load(Ordering::Relaxed), 70);
    c.set_release_every(0);
    assert_eq!(c.release_every(), 1);
    c.set_release_every(1000);
    assert_eq!(c.release_every(), 64);
    // The clamp is the capacity, not the default's 64.
    let g = QueueGeometry::spsc_fixed(1024, 8).unwrap();
    let mut b = Buf::new(g.total_len().unwrap());
    let mut c = SpscConsumer::new(b.init(&g).unwrap()).unwrap();
    assert_eq!(c.release_every(), 64);
    c.set_release_every(1000);
    assert_eq!(c.release_every(), 1000);
    c.set_release_every(5000);
    assert_eq!(c.release_every(), 1024);
}

/// `try_pop_fixed` (the typed handles' pop): the item into a buffer of exactly the item size
/// of a fixed-size queue, `Ok(false)` when empty, and for a buffer of another length, or on
/// a queue of byte strings, `LengthMismatch` with nothing popped.
#[test]
fn spsc_try_pop_fixed_pops_only_into_an_item_sized_buffer() {
    let (_b, q) = fixed_queue(4, 8);
    let mut p = SpscProducer::new(q).unwrap();
    let mut c = SpscConsumer::new(q).unwrap();
    let mut out = [0u8; 16];
    assert_eq!(c.try_pop_fixed(&mut out[..8]), Ok(false));
    for i in 1..=4u64 {
        p.try_push(&i.to_le_bytes()).unwrap();
    }
    for len in [0, 7, 9, 16] {
        assert_eq!(
            c.try_pop_fixed(&mut out[..len]),
            Err(PopError::LengthMismatch { len, expected: 8 })
        );
    }
    assert_eq!(c.ready(), Ok(4));
    for i in 1..=4u64 {
        assert_eq!(c.try_pop_fixed(&mut out[..8]), Ok(true));
        assert_eq!(u64::from_le_bytes(out[..8].try_into().unwrap()), i);
    }
    assert_eq!(c.try_pop_fixed(&mut out[..8]), Ok(false));
    // The slots went back: the producer fills the queue again.
    assert_eq!(p.free(), 4);
    // A queue of byte strings has no fixed item size.
    let (_b2, q2) = queue(QueueKind::Spsc, 4, 8, 16);
    let mut p2 = SpscProducer::new(q2).unwrap();
    let mut c2 = SpscConsumer::new(q2).unwrap();
    p2.try_push(&[1; 8]).unwrap();
    assert_eq!(
        c2.try_pop_fixed(&mut out[..8]),
        Err(PopError::LengthMismatch {
            len: 8,
            expected: 8
        })
    );
    assert_eq!(c2.try_pop(&mut out[..8]), Ok(8));
}

/// The consumer's single-pop hand-back, against a model of the rule as the module docs
/// state it (store when the head reaches the tail last read, or `release_every` pops after
/// the last store), over a pseudo-random mix of pushes, single pops (fixed and sized
/// buffers), batch pops, `release`, `release_if_ahead` and `set_release_every`, on a queue
/// small enough to fill and wrap. After every step the stored head is the model's.
#[test]
fn spsc_single_pop_hand_back_follows_the_stated_rule() {
    for fixed in [true, false] {
        let g = if fixed {
            QueueGeometry::spsc_fixed(16, 8).unwrap()
        } else {
            QueueGeometry::new(QueueKind::Spsc, 16, 8, 16).unwrap()
        };
        let mut b = Buf::new(g.total_len().unwrap());
        let q = b.init(&g).unwrap();
        let mut p = SpscProducer::new(q).unwrap();
        let mut c = SpscConsumer::new(q).unwrap();
        // The model: head, the tail as last read, the head as last stored, the run length.
        let (mut head, mut seen, mut stored, mut every) = (0u64, 0u64, 0u64, c.release_every());
        let (mut next, mut rng) = (0u64, 0x2545_f491_4f6c_dd1du64);
        let mut stores = 0;
        let steps = if cfg!(miri) { 600 } else { 20_000 };
        for step in 0..steps {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            match rng % 16 {
                0..=4 => {
                    for _ in 0..(rng >> 8) % 6 {
                        // A push finds room while the head last stored is under a lap
                        // behind (the producer reads it again when its copy shows none).
                        let pushed = p.try_push(&next.to_le_bytes());
                        if next - stored < 16 {
                            assert_eq!(pushed, Ok(()), "step {step}");
                            next += 1;
                        } else {
                            assert_eq!(pushed, Err(PushError::Full), "step {step}");
                        }
                    }
                }
                5..=11 => {
                    // A single pop reads the tail only when the one it last read shows
                    // no item.
                    if seen == head {
                        seen = q.enq().load(Ordering::Relaxed);
                    }
                    let mut out = [0u8; 16];
                    let dst = if rng & 0x100 == 0 {
                        &mut out[..8]
                    } else {
                        &mut out[..]
                    };
                    let got = c.try_pop(dst);
                    if seen == head {
                        assert_eq!(got, Err(PopError::Empty), "step {step}");
                    } else {
                        assert_eq!(got, Ok(8), "step {step}");
                        assert_eq!(u64::from_le_bytes(out[..8].try_into().unwrap()), head);
                        head += 1;
                        if head == seen || head - stored >= every {
                            stored = head;
                            stores += 1;
                        }
                    }
                }
                12 => {
                    let mut two = [0u8; 16];
                    // A batch reads the tail when the one it last read shows fewer items.
                    if seen - head < 2 {
                        seen = q.enq().load(Ordering::Relaxed);
                    }
                    let n = c.pop_fixed(&mut two, 8).unwrap() as u64;
                    assert_eq!(n, (seen - head).min(2), "step {step}");
                    if n > 0 {
                        head += n;
                        stored = head;
                    }
                }
                13 => {
                    c.release();
                    stored = head;
                }
                14 => {
                    c.release_if_ahead();
                    stored = head;
                }
                _ => {
                    c.set_release_every((rng >> 8) % 7);
                    every = ((rng >> 8) % 7).clamp(1, 16);
                    if head - stored >= every {
                        stored = head;
                    }
                }
            }
            assert_eq!(q.deq().load(Ordering::Relaxed), stored, "step {step}");
            assert_eq!(c.unreleased(), head - stored, "step {step}");
        }
        // The mix took the rule's every branch many times.
        assert!(
            stores > steps / 20 && next > steps / 4,
            "{stores} stores, {next} items"
        );
    }
}

#[test]
fn spsc_fixed_single_items_report_corrupt_cursors() {
    // The one-compare room and readiness checks of the fixed-size path fall back to the
    // full checks, so bad cursors are named, never read as Full or Empty for ever, and a
    // tail more than a lap ahead is never read as items.
    let (_b, q) = fixed_queue(4, 8);
    let mut buf = [0u8; 8];
    q.enq().store(100, Ordering::Relaxed);
    let mut c = SpscConsumer::new(q).unwrap();
    assert_eq!(
        c.try_pop(&mut buf),
        Err(PopError::CorruptCursors { head: 0, tail: 100 })
    );
    q.deq().store(5, Ordering::Relaxed);
    q.enq().store(2, Ordering::Relaxed);
    let mut c = SpscConsumer::new(q).unwrap();
    assert_eq!(
        c.try_pop(&mut buf),
        Err(PopError::CorruptCursors { head: 5, tail: 2 })
    );
    let mut p = SpscProducer::new(q).unwrap();
    assert_eq!(
        p.try_push(&[1; 8]),
        Err(PushError::CorruptCursors { tail: 2, head: 5 })
    );
    q.deq().store(0, Ordering::Relaxed);
    q.enq().store(9, Ordering::Relaxed);
    let mut p = SpscProducer::new(q).unwrap();
    assert_eq!(
        p.try_push(&[1; 8]),
        Err(PushError::CorruptCursors { tail: 9, head: 0 })
    );
    // A full sound queue is only full, an empty one only empty.
    q.enq().store(4, Ordering::Relaxed);
    let mut p = SpscProducer::new(q).unwrap();
    assert_eq!(p.try_push(&[1; 8]), Err(PushError::Full));
    q.deq().store(4, Ordering::Relaxed);
    let mut c = SpscConsumer::new(q).unwrap();
    assert_eq!(c.try_pop(&mut buf), Err(PopError::Empty));
}

#[test]
fn spsc_fixed_batches_across_the_wrap_keep_fifo_order() {
    // Packed items (size = stride: 8, 16, 64) move as contiguous runs split at the wrap;
    // a 12-byte item (stride 16) takes the per-item path. Batches of 1 to 7 items on a
    // queue of 8 slots start at every offset and straddle the wrap; a model checks FIFO.
    for item in [8usize, 12, 16, 64] {
        let (_b, q) = fixed_queue(8, item);
        let mut p = SpscProducer::new(q).unwrap();
        let mut c = SpscConsumer::new(q).unwrap();
        let mut recs = Records::new(item, 2);
        let (mut next_in, mut next_out) = (0u64, 0u64);
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..if cfg!(miri) { 40 } else { 2_000 } {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let want = (x % 7 + 1) as usize;
            let free = 8 - (next_in - next_out);
            let pushed = p
                .push_fixed(recs.span(next_in, next_in + want as u64), item)
                .unwrap();
            assert_eq!(pushed as u64, free.min(want as u64), "item {item}");
            next_in += pushed as u64;
            let want = ((x >> 8) % 7 + 1) as usize;
            let mut out = vec![0u8; want * item];
            let ready = next_in - next_out;
            let popped = c.pop_fixed(&mut out, item).unwrap();
            assert_eq!(popped as u64, ready.min(want as u64), "item {item}");
            for k in 0..popped {
                assert_eq!(
                    out[k * item..(k + 1) * item],
                    *recs.one(next_out),
                    "item size {item}, position {next_out}"
                );
                next_out += 1;
            }
        }
        assert!(
            next_out > 1_000.min(next_in / 2),
            "item {item}: the batches moved"
        );
    }
}

#[test]
fn spsc_packed_batches_mix_with_single_items_across_long_spans_and_the_wrap() {
    // push_fixed / pop_fixed of a packed queue's own item size (8, 24 and 64 bytes, each
    // its stride) copy one span up to the wrap and one after it, in steps of 128 bytes and
    // a rest, and a batch in steps of 512 bytes with prefetches between them. On 32 slots, batches of 0 to 39 items start at every slot: spans longer than
    // a step, ending mid-step and mid-item-step, wrapping, and more than the room or the
    // items there are. Single pushes and pops (which address each slot on their own) are
    // mixed in at random, so a batch copy that put items in the wrong slots is caught even
    // if its push and pop agreed. Records carry a trailing partial record, which is
    // ignored, and a pop leaves its buffer alone past the items it popped. Canary words
    // after the slot area show that no copy ran past it. The same on 512 slots with
    // batches of up to 519 items: there more than `prefetch_ahead` (64) slots are often
    // free and published, so every path prefetches ("Prefetching" in the spsc docs).
    // Not under Miri, where prefetches compile to nothing and 512 slots take minutes.
    const CANARY: u64 = 0x5a5a_1234_a5a5_4321;
    let caps: &[u64] = if cfg!(miri) { &[32] } else { &[32, 512] };
    for (cap, item) in caps.iter().flat_map(|&c| [8usize, 24, 64].map(|i| (c, i))) {
        let g = QueueGeometry::spsc_fixed(cap, item).unwrap();
        assert_eq!(g.slot_stride as usize, item, "packed");
        let len = g.total_len().unwrap();
        let mut b = Buf::new(len + 64);
        let tail_words = len as usize / 8..b.0.len();
        for w in &mut b.0[tail_words.clone()] {
            *w = Word(CANARY);
        }
        let q = b.init(&g).unwrap();
        let mut p = SpscProducer::new(q).unwrap();
        let mut c = SpscConsumer::new(q).unwrap();
        let mut recs = Records::new(item, 3);
        let (mut next_in, mut next_out) = (0u64, 0u64);
        let mut x = 0x6a09_e667_f3bc_c908u64;
        let mut one = vec![0u8; item];
        for _ in 0..if cfg!(miri) { 30 } else { 3_000 } {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Single pops hand their slots back a few at a time (`release_every`).
            let free = cap - (next_in - (next_out - c.unreleased()));
            if x & 1 == 0 {
                let want = x % (cap + 8);
                let partial = ((x >> 8) % item as u64) as usize;
                let mut batch = recs.span(next_in, next_in + want).to_vec();
                batch.resize(batch.len() + partial, 0xee);
                let n = p.push_fixed(&batch, item).unwrap() as u64;
                assert_eq!(n, free.min(want), "item {item}");
                next_in += n;
            } else {
                for k in 0..(x >> 8) % 5 {
                    let r = p.try_push(recs.one(next_in));
                    if k >= free {
                        assert_eq!(r, Err(PushError::Full), "item {item}");
                    } else {
                        assert_eq!(r, Ok(()), "item {item}");
                        next_in += 1;
                    }
                }
            }
            let ready = next_in - next_out;
            if x & 2 == 0 {
                let want = ((x >> 16) % (cap + 8)) as usize;
                let partial = ((x >> 24) % item as u64) as usize;
                let mut out = vec![0x77u8; want * item + partial];
                let n = c.pop_fixed(&mut out, item).unwrap();
                assert_eq!(n as u64, ready.min(want as u64), "item {item}");
                for k in 0..n {
                    assert_eq!(
                        out[k * item..(k + 1) * item],
                        *recs.one(next_out),
                        "item size {item}, position {next_out}"
                    );
                    next_out += 1;
                }
                assert!(
                    out[n * item..].iter().all(|&v| v == 0x77),
                    "item {item}: a pop of {n} wrote past them"
                );
            } else {
                for _ in 0..(x >> 16) % 5 {
                    match c.try_pop(&mut one) {
                        Ok(len) => {
                            assert_eq!(len, item);
                            assert_eq!(one, recs.one(next_out), "item {item}, position {next_out}");
                            next_out += 1;
                        }
                        Err(e) => {
                            assert_eq!(e, PopError::Empty);
                            assert_eq!(next_in, next_out, "item {item}");
                        }
                    }
                }
            }
        }
        assert!(
            next_out > 10_000.min(next_in / 2),
            "item {item}: the batches moved ({next_out})"
        );
        assert!(
            b.0[tail_words].iter().all(|w| w.0 == CANARY),
            "item {item}: a copy ran past the slot area"
        );
    }
}

#[test]
fn spsc_packed_batches_report_corrupt_cursors_as_before() {
    // The packed batch paths read a corrupt cursor again and name it, as the general path
    // does: even for a batch of no whole item on the consumer side (the general path read
    // the tail for it too), but not for an empty batch on the producer side.
    let (_b, q) = fixed_queue(4, 8);
    q.deq().store(9, Ordering::Relaxed);
    let mut p = SpscProducer::new(q).unwrap();
    let corrupt = PushError::CorruptCursors { tail: 0, head: 9 };
    assert_eq!(p.push_fixed(&[0; 16], 8), Err(corrupt));
    assert_eq!(p.push_fixed(&[0; 7], 8), Ok(0));
    q.deq().store(0, Ordering::Relaxed);
    let recs: Vec<u8> = (1..=6u64).flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(p.push_fixed(&recs, 8), Ok(4));
    q.enq().store(100, Ordering::Relaxed);
    let mut c = SpscConsumer::new(q).unwrap();
    let corrupt = PopError::CorruptCursors { head: 0, tail: 100 };
    let mut out = [0u8; 24];
    assert_eq!(c.pop_fixed(&mut out, 8), Err(corrupt));
    assert_eq!(c.pop_fixed(&mut out[..7], 8), Err(corrupt));
    q.enq().store(4, Ordering::Relaxed);
    assert_eq!(c.pop_fixed(&mut out, 8), Ok(3));
    assert_eq!(out[16..], 3u64.to_le_bytes());
    assert_eq!(q.deq().load(Ordering::Relaxed), 3);
}

#[test]
fn packed_item_copies_refuse_another_length_or_more_items_than_slots() {
    // The view's span copies check what they are given, not only their callers: an item
    // length other than the packed one, or more items than the queue has slots, copies
    // nothing (either would address bytes outside the slots they were meant for).
    let g = QueueGeometry::spsc_fixed(4, 8).unwrap();
    let mut b = Buf::new(g.total_len().unwrap() + 64);
    let q = b.init(&g).unwrap();
    assert_eq!(q.packed_len(), 8);
    let src: Vec<u8> = (1..=5u64).flat_map(|v| v.to_le_bytes()).collect();
    q.write_items(0, &src, 16);
    q.write_items(0, &src, 4);
    q.write_items(0, &src, 0);
    q.write_items(0, &src, 8);
    assert!(b.0[48..].iter().all(|w| w.0 == 0), "nothing written");
    q.write_items(3, &src[..32], 8);
    let mut dst = [0xffu8; 40];
    q.read_items(3, &mut dst, 8);
    assert_eq!(dst, [0xffu8; 40], "five items do not fit in four slots");
    q.read_items(3, &mut dst[..32], 4);
    q.read_items(3, &mut dst[..32], 0);
    assert_eq!(dst, [0xffu8; 40]);
    q.read_items(3, &mut dst[..39], 8);
    assert_eq!(
        dst[..32],
        src[..32],
        "four items from slot 3 on, wrapping after one"
    );
    assert_eq!(dst[32..], [0xffu8; 8]);
    assert_eq!(b.0[48].0, u64::from_le(2), "item 2 went to slot 0");
    // A queue whose items do not fill their slots has no packed item size.
    let (_b, q) = fixed_queue(4, 12);
    assert_eq!(q.packed_len(), usize::MAX);
    let (_b, q) = queue(QueueKind::Spsc, 4, 8, 16);
    assert_eq!(q.packed_len(), usize::MAX);
}

#[test]
fn spsc_wraps_many_laps_and_resumes_after_both_sides_drop() {
    let (mut b, q) = queue(QueueKind::Spsc, 4, 8, 16);
    let mut next_in = 0u64;
    let mut next_out = 0u64;
    for round in 0..10u64 {
        // Fresh handles from a fresh attach every round: the cursors live in the region.
        let q = QueueView::attach(b.region(), QueueExpect::raw(QueueKind::Spsc)).unwrap();
        let mut p = SpscProducer::new(q).unwrap();
        let mut c = SpscConsumer::new(q).unwrap();
        while p.try_push(&next_in.to_le_bytes()).is_ok() {
            next_in += 1;
        }
        for _ in 0..(round % 4 + 1) {
            let mut buf = [0u8; 8];
            assert_eq!(c.try_pop(&mut buf), Ok(8));
            assert_eq!(u64::from_le_bytes(buf), next_out);
            next_out += 1;
        }
    }
    assert!(next_in > 20);
    assert_eq!(q.enq().load(Ordering::Relaxed), next_in);
    assert_eq!(q.deq().load(Ordering::Relaxed), next_out);
}

/// The fixed-size fast paths (one compare with a position set when the other side's cursor
/// is read) against cursors that are corrupt from the start or turn corrupt after sound
/// reads, and that are then put right: every push and pop reads the cursor again, fails
/// with `CorruptCursors` while it is corrupt, moves nothing, and carries on once it is not.
#[test]
fn spsc_fixed_fast_paths_read_a_corrupt_cursor_again() {
    let (_b, q) = fixed_queue(4, 8);
    let mut out = [0u8; 8];
    // The producer: a head ahead of the tail, then put right.
    q.deq().store(5, Ordering::Relaxed);
    let mut p = SpscProducer::new(q).unwrap();
    for _ in 0..2 {
        assert_eq!(
            p.try_push(&1u64.to_le_bytes()),
            Err(PushError::CorruptCursors { tail: 0, head: 5 })
        );
    }
    q.deq().store(0, Ordering::Relaxed);
    for i in 1..=4u64 {
        assert_eq!(p.try_push(&i.to_le_bytes()), Ok(()));
    }
    assert_eq!(p.try_push(&[0; 8]), Err(PushError::Full));
    // Full on a sound head, then the head turns corrupt (more than a lap behind).
    q.deq().store(u64::MAX - 3, Ordering::Relaxed);
    assert_eq!(
        p.try_push(&[0; 8]),
        Err(PushError::CorruptCursors {
            tail: 4,
            head: u64::MAX - 3
        })
    );
    q.deq().store(2, Ordering::Relaxed);
    assert_eq!(p.try_push(&5u64.to_le_bytes()), Ok(()));
    assert_eq!(p.try_push(&6u64.to_le_bytes()), Ok(()));
    assert_eq!(p.try_push(&[0; 8]), Err(PushError::Full));
    q.deq().store(0, Ordering::Relaxed);
    // The consumer: a tail more than a capacity ahead, then put right.
    q.enq().store(100, Ordering::Relaxed);
    let mut c = SpscConsumer::new(q).unwrap();
    for _ in 0..2 {
        assert_eq!(
            c.try_pop_fixed(&mut out),
            Err(PopError::CorruptCursors { head: 0, tail: 100 })
        );
        assert_eq!(
            c.try_pop(&mut out),
            Err(PopError::CorruptCursors { head: 0, tail: 100 })
        );
    }
    // (Slots 0 and 1 hold positions 4 and 5 by now.)
    q.enq().store(2, Ordering::Relaxed);
    assert_eq!(c.try_pop(&mut out), Ok(8));
    assert_eq!(u64::from_le_bytes(out), 5);
    assert_eq!(c.try_pop(&mut out), Ok(8));
    assert_eq!(c.try_pop(&mut out), Err(PopError::Empty));
    // Empty on a sound tail, then the tail turns corrupt (behind the head).
    q.enq().store(1, Ordering::Relaxed);
    assert_eq!(
        c.try_pop_fixed(&mut out),
        Err(PopError::CorruptCursors { head: 2, tail: 1 })
    );
    q.enq().store(4, Ordering::Relaxed);
    assert_eq!(c.try_pop_fixed(&mut out), Ok(true));
    assert_eq!(u64::from_le_bytes(out), 3);
    assert_eq!(c.try_pop_fixed(&mut out), Ok(true));
    assert_eq!(u64::from_le_bytes(out), 4);
    assert_eq!(c.try_pop_fixed(&mut out), Ok(false));
    assert_eq!(q.deq().load(Ordering::Relaxed), 4);
}

#[test]
fn spsc_corrupt_cursor_is_an_error_not_a_hang() {
    let (_b, q) = queue(QueueKind::Spsc, 4, 8, 16);
    q.enq().store(100, Ordering::Relaxed);
    let mut c = SpscConsumer::new(q).unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(
        c.try_pop(&mut buf),
        Err(PopError::CorruptCursors { head: 0, tail: 100 })
    );
    q.enq().store(1, Ordering::Relaxed);
    q.slot_word(0).store(9, Ordering::Relaxed);
    assert_eq!(
        c.try_pop(&mut buf),
        Err(PopError::Corrupt { pos: 0, word: 9 })
    );
    // A length word of 2^32 + 8 is 8 once narrowed to a 32-bit usize: checked in u64.
    q.slot_word(0).store((1 << 32) + 8, Ordering::Relaxed);
    assert_eq!(
        c.try_pop(&mut buf),
        Err(PopError::Corrupt {
            pos: 0,
            word: (1 << 32) + 8
        })
    );
    q.slot_word(0).store(9, Ordering::Relaxed);
    // A head ahead of the tail reads as no free slot, never as a huge free count, and a
    // push says why: the queue would never drain.
    q.deq().store(5, Ordering::Relaxed);
    let mut p = SpscProducer::new(q).unwrap();
    let corrupt = PushError::CorruptCursors { tail: 1, head: 5 };
    assert_eq!(p.try_push(b"x"), Err(corrupt));
    assert_eq!(p.push_slice(&[b"x"]), Err(corrupt));
    assert_eq!(p.push_fixed(&[0; 16], 8), Err(corrupt));
    assert_eq!(p.commit_in_place(&[Some(1)]), Err(corrupt));
    assert_eq!(p.free(), 0);
    assert_eq!(p.cursors_corrupt(), Some(corrupt));
    // So does a head more than a lap behind the tail.
    q.deq().store(0, Ordering::Relaxed);
    q.enq().store(9, Ordering::Relaxed);
    let mut p = SpscProducer::new(q).unwrap();
    assert_eq!(
        p.try_push(b"x"),
        Err(PushError::CorruptCursors { tail: 9, head: 0 })
    );
    // A full sound queue is only full.
    q.enq().store(4, Ordering::Relaxed);
    let mut p = SpscProducer::new(q).unwrap();
    assert_eq!(p.try_push(b"x"), Err(PushError::Full));
    assert_eq!(p.push_slice(&[b"x"]), Ok(0));
    assert_eq!(p.cursors_corrupt(), None);
}

#[test]
fn spsc_consumer_names_bad_cursors_not_a_bad_control_word() {
    // A tail more than a lap ahead of the head, or behind it, is a cursor fault: the slot's
    // control word is sound and must not be blamed.
    let (_b, q) = queue(QueueKind::Spsc, 4, 8, 16);
    q.deq().store(5, Ordering::Relaxed);
    q.enq().store(2, Ordering::Relaxed);
    let mut c = SpscConsumer::new(q).unwrap();
    let mut buf = [0u8; 8];
    let e = c.try_pop(&mut buf).unwrap_err();
    assert_eq!(e, PopError::CorruptCursors { head: 5, tail: 2 });
    assert_eq!(
        std::format!("{e}"),
        "the enqueue cursor 2 is not within a lap ahead of the dequeue cursor 5 \
         (a corrupt queue file): nothing was popped"
    );
    assert_eq!(c.ready(), Err(e));
    q.enq().store(10, Ordering::Relaxed);
    assert_eq!(
        c.try_pop(&mut buf),
        Err(PopError::CorruptCursors { head: 5, tail: 10 })
    );
    // A full lap is sound.
    q.enq().store(9, Ordering::Relaxed);
    assert_eq!(c.ready(), Ok(4));
}

/// Moves items 0..N from a producer thread running `produce(&mut p, i)` (returns how many
/// it pushed from item `i` on) to a consumer popping batches of up to 4, which checks each
/// item's number and its length, `len_of(i)` (at most 16).
fn spsc_threads_move(
    q: QueueView,
    len_of: fn(u64) -> usize,
    mut produce: impl FnMut(&mut SpscProducer, u64) -> u64 + Send,
) {
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut p = SpscProducer::new(q).unwrap();
            let mut i = 0u64;
            while i < N {
                i += produce(&mut p, i);
                std::thread::yield_now();
            }
        });
        let mut c = SpscConsumer::new(q).unwrap();
        let mut want = 0u64;
        while want < N {
            let mut bufs = [[0u8; 16]; 4];
            let mut lens = [0usize; 4];
            let n = c.pop_slice(&mut bufs, &mut lens).unwrap();
            for k in 0..n {
                assert_eq!(lens[k], len_of(want));
                assert_eq!(u64::from_le_bytes(bufs[k][..8].try_into().unwrap()), want);
                want += 1;
            }
            std::thread::yield_now();
        }
    });
}

#[test]
fn spsc_threads_deliver_everything_in_order() {
    let (_b, q) = queue(QueueKind::Spsc, 8, 16, 24);
    spsc_threads_move(
        q,
        |_| 8,
        |p, i| {
            // Alternate single pushes and batches of 3.
            if i.is_multiple_of(2) {
                u64::from(p.try_push(&i.to_le_bytes()).is_ok())
            } else {
                let batch: Vec<[u8; 8]> = (i..(i + 3).min(N)).map(|v| v.to_le_bytes()).collect();
                p.push_slice(&batch).unwrap() as u64
            }
        },
    );
}

#[test]
fn notify_fenced_and_unfenced_bump_only_when_someone_sleeps() {
    let (_buf, v) = queue(QueueKind::Spsc, 4, 8, 16);
    type Notify = fn(&QueueView) -> bool;
    type Word = fn(&QueueView) -> crate::sync::A32<'_>;
    let cases: [(Notify, Word, Word); 4] = [
        (
            QueueView::notify_data,
            QueueView::data_waiters,
            QueueView::data_futex,
        ),
        (
            QueueView::notify_data_unfenced,
            QueueView::data_waiters,
            QueueView::data_futex,
        ),
        (
            QueueView::notify_space,
            QueueView::space_waiters,
            QueueView::space_futex,
        ),
        (
            QueueView::notify_space_unfenced,
            QueueView::space_waiters,
            QueueView::space_futex,
        ),
    ];
    for (notify, waiters, futex) in cases {
        let before = futex(&v).load(Ordering::Relaxed);
        // Nobody sleeps: no bump, no wake.
        assert!(!notify(&v));
        assert_eq!(futex(&v).load(Ordering::Relaxed), before);
        // A sleeper announced itself: the word moves and the caller must wake.
        waiters(&v).fetch_add(1, Ordering::SeqCst);
        assert!(notify(&v));
        assert_eq!(futex(&v).load(Ordering::Relaxed), before.wrapping_add(1));
        waiters(&v).fetch_sub(1, Ordering::SeqCst);
    }
}

/// Writes `bytes` into the free slot `k` after the tail the way the kernel would: plain
/// (non-atomic) stores through the slot's address. Whole words, zero-padded: Miri's
/// weak-memory model crashes on a non-atomic store covering part of a word that atomics
/// used before, which the code under test never does.
fn write_in_place(p: &mut SpscProducer, k: u64, bytes: &[u8]) {
    let (at, max) = p.free_payload(k).expect("slot k is free");
    assert!(bytes.len() <= max && at.cast::<u64>().is_aligned());
    for (i, chunk) in bytes.chunks(8).enumerate() {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        // SAFETY: free_payload gave a free, 8-aligned slot payload of `max` bytes (a whole
        // number of words in the slot), which this producer owns until it commits.
        unsafe { at.cast::<u64>().add(i).write(u64::from_ne_bytes(w)) };
    }
}

#[test]
fn spsc_in_place_writes_publish_in_order_and_dropped_slots_close_up() {
    let (_b, q) = queue(QueueKind::Spsc, 4, 20, 32);
    let mut p = SpscProducer::new(q).unwrap();
    let mut c = SpscConsumer::new(q).unwrap();
    assert_eq!(p.free_payload(3).map(|(_, max)| max), Some(20));
    assert!(p.free_payload(4).is_none(), "only 4 slots");
    let mut buf = [0u8; 20];
    for lap in 0..3u8 {
        // Slots 0..4 written; slot 1 is dropped (a truncated datagram), so 2 and 3 move
        // down and three items come out, in order, with their lengths.
        let items: [&[u8]; 4] = [&[lap; 5], &[0xee; 20], &[lap + 1; 20], &[]];
        for (k, it) in items.iter().enumerate() {
            write_in_place(&mut p, k as u64, it);
        }
        assert_eq!(
            c.try_pop(&mut buf),
            Err(PopError::Empty),
            "nothing before the commit"
        );
        assert_eq!(
            p.commit_in_place(&[Some(5), None, Some(20), Some(0)]),
            Ok(3)
        );
        for want in [&items[0], &items[2], &items[3]] {
            let len = c.try_pop(&mut buf).unwrap();
            assert_eq!(&buf[..len], *want);
        }
        assert_eq!(c.try_pop(&mut buf), Err(PopError::Empty));
        // The dropped slot is free again: the next lap starts one slot further on.
        write_in_place(&mut p, 0, b"x");
        assert_eq!(p.commit_in_place(&[Some(1)]), Ok(1));
        assert_eq!(c.try_pop(&mut buf), Ok(1));
        assert_eq!(buf[0], b'x');
    }

    // Errors publish nothing.
    write_in_place(&mut p, 0, b"kept out");
    assert_eq!(
        p.commit_in_place(&[Some(8), Some(21)]),
        Err(PushError::TooLong {
            index: 1,
            len: 21,
            max: 20
        })
    );
    assert_eq!(
        p.commit_in_place(&[Some(1); 5]),
        Err(PushError::Full),
        "more slots than are free"
    );
    assert_eq!(c.try_pop(&mut buf), Err(PopError::Empty));
    assert_eq!(p.commit_in_place(&[None, None]), Ok(0));
    assert_eq!(p.commit_in_place(&[]), Ok(0));
    assert_eq!(c.try_pop(&mut buf), Err(PopError::Empty));

    // A full queue has no free payload; a fixed-size queue takes only whole items.
    assert_eq!(p.push_slice(&[b"a", b"b", b"c", b"d"]), Ok(4));
    assert!(p.free_payload(0).is_none());
    let g = QueueGeometry::spsc_fixed(2, 8).unwrap();
    let mut bf = Buf::new(g.total_len().unwrap());
    let mut pf = SpscProducer::new(bf.init(&g).unwrap()).unwrap();
    assert_eq!(
        pf.commit_in_place(&[Some(4)]),
        Err(PushError::WrongLength {
            index: 0,
            len: 4,
            expected: 8
        })
    );
    write_in_place(&mut pf, 1, &7u64.to_le_bytes());
    assert_eq!(pf.commit_in_place(&[None, Some(8)]), Ok(1));
    let mut cf = SpscConsumer::new(*pf.view()).unwrap();
    let mut one = [0u8; 8];
    assert_eq!(cf.try_pop(&mut one), Ok(8));
    assert_eq!(u64::from_le_bytes(one), 7);
}

#[test]
fn spsc_in_place_writes_from_another_thread_are_seen_whole() {
    // The producer writes with plain stores (as the kernel does) and publishes with the
    // tail's release store; under Miri the race detector checks that nothing races.
    let (_b, q) = queue(QueueKind::Spsc, 8, 16, 24);
    let len_of = |v: u64| (v % 9) as usize + 8;
    spsc_threads_move(q, len_of, |p, i| {
        let mut lens = Vec::new();
        while lens.len() < 3 && i + (lens.len() as u64) < N {
            let k = lens.len() as u64;
            if p.free_payload(k).is_none() {
                break;
            }
            let mut item = [0u8; 16];
            item[..8].copy_from_slice(&(i + k).to_le_bytes());
            write_in_place(p, k, &item[..len_of(i + k)]);
            lens.push(Some(len_of(i + k)));
        }
        p.commit_in_place(&lens).unwrap() as u64
    });
}

#[test]
fn spsc_release_if_ahead_never_moves_the_consumer_index_back() {
    let (_b, q) = queue(QueueKind::Spsc, 64, 8, 16);
    let mut p = SpscProducer::new(q).unwrap();
    let mut c = SpscConsumer::new(q).unwrap();
    c.set_release_every(64);
    for v in 1..=4u64 {
        p.try_push(&v.to_le_bytes()).unwrap();
    }
    let mut buf = [0u8; 8];
    // Relaxed: single-threaded test.
    let deq = || q.deq().load(Ordering::Relaxed);
    assert_eq!(c.try_pop(&mut buf), Ok(8));
    // SAFETY: stands in for the copy a fork makes; it stores nothing when dropped below
    // (its head is then behind the index), and `c` is not dropped twice.
    let mut copy = unsafe { core::ptr::read(&c) };
    assert_eq!(c.try_pop(&mut buf), Ok(8));
    c.release();
    assert_eq!(deq(), 2);
    // The copy's head, 1, is behind: nothing is stored, now or at its drop.
    copy.release_if_ahead();
    assert_eq!(copy.unreleased(), 0);
    drop(copy);
    assert_eq!(deq(), 2, "the copy moved the consumer index back");
    // A copy that popped on by itself (its original gone) hands its pops back.
    // SAFETY: as above; `c` is forgotten, so the copy is the only consumer left.
    let mut copy = unsafe { core::ptr::read(&c) };
    core::mem::forget(c);
    assert_eq!(copy.try_pop(&mut buf), Ok(8));
    copy.release_if_ahead();
    assert_eq!(deq(), 3);
}

#[test]
fn spsc_prefetch_distance_is_64_slots_or_4_kib() {
    use super::view::{PREFETCH_BYTES, PREFETCH_SLOTS, prefetch_ahead_for};
    assert_eq!((PREFETCH_SLOTS, PREFETCH_BYTES), (64, 4096));
    for (stride, ahead) in [
        (0, 64),
        (8, 64),
        (64, 64),
        (65, 63),
        (512, 8),
        (4096, 1),
        (4097, 1),
        (u64::MAX, 1),
    ] {
        assert_eq!(prefetch_ahead_for(stride), ahead, "stride {stride}");
    }
    // A view decodes it from its stride: 8-byte and 64-byte items, and 1500-byte datagrams.
    for (g, ahead) in [
        (QueueGeometry::spsc_fixed(512, 8).unwrap(), 64),
        (QueueGeometry::spsc_fixed(512, 64).unwrap(), 64),
        // A 1536-byte stride (1500 bytes and the length word, in whole lines): 2 slots.
        (
            QueueGeometry::cache_lines(QueueKind::Spsc, 16, 1500).unwrap(),
            2,
        ),
    ] {
        let (_b, q) = queue_of(&g);
        assert_eq!(q.prefetch_ahead(), ahead, "{g:?}");
        // A producer prefetches as far, or never on a CPU without a prefetch for writing.
        let write = if super::view::has_prefetch_write() {
            ahead
        } else {
            u64::MAX
        };
        assert_eq!(q.prefetch_ahead_write(), write, "{g:?}");
    }
}

/// Whether the kernel lists `flag` for this CPU in /proc/cpuinfo (its reading of CPUID,
/// and of the OS's own support where a feature needs it).
#[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri)))]
fn kernel_cpu_flag(flag: &str) -> bool {
    let info = std::fs::read_to_string("/proc/cpuinfo").expect("/proc/cpuinfo");
    let flags = info
        .lines()
        .find(|l| l.starts_with("flags"))
        .expect("a flags line");
    flags.split_whitespace().any(|f| f == flag)
}

/// `prefetchw` is issued only where CPUID has it: the kernel's reading of the same CPUID
/// bit (`3dnowprefetch` in /proc/cpuinfo) agrees.
#[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri)))]
#[test]
fn spsc_prefetch_for_writing_follows_cpuid() {
    assert_eq!(
        super::view::has_prefetch_write(),
        kernel_cpu_flag("3dnowprefetch")
    );
}

/// The wide copy is used only where CPUID has AVX and the OS saves its registers: the
/// kernel's reading of the same bits (`avx` in /proc/cpuinfo, listed only when both hold)
/// agrees.
#[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri)))]
#[test]
fn spsc_wide_copy_follows_cpuid() {
    assert_eq!(super::view::has_wide_copy(), kernel_cpu_flag("avx"));
}

/// A packed queue's span copies, word by word and (where the CPU has it) wide, write and
/// read exactly the span's bytes: every length from 0 to 520 bytes in words (whole
/// 128-byte wide steps, a rest of words, or both) at several offsets, against a plain
/// byte copy, with the bytes around the span left alone.
#[test]
fn spsc_span_copies_move_exactly_their_bytes() {
    use super::view::{has_wide_copy, read_span, write_span};
    // The region, written and read whole for each case. Under Miri the longest span (40
    // words) at the last offset (256) plus 64 bytes after it: the bytes around a span are
    // still checked, and the whole-region copies of 1,024 bytes took most of the time there.
    const AREA: usize = if cfg!(miri) { 640 } else { 1024 };
    let wides: &[bool] = if has_wide_copy() {
        &[false, true]
    } else {
        &[false]
    };
    // Lengths in words. Under Miri (no wide copy there) the lengths around the steps of
    // 16 words and the offsets of different 64-byte alignment, not every one: the copy
    // loops are the same at every length, and all of them took three minutes there.
    let lens: Vec<usize> = if cfg!(miri) {
        vec![0, 1, 2, 15, 16, 17, 31, 32, 33, 40]
    } else {
        (0..=65).collect()
    };
    let offs: &[usize] = if cfg!(miri) {
        &[0, 56, 256]
    } else {
        &[0, 8, 56, 64, 120, 256]
    };
    let pattern = |k: usize, salt: u8| (k as u8).wrapping_mul(29) ^ (k >> 8) as u8 ^ salt;
    let before: Vec<u8> = (0..AREA).map(|k| pattern(k, 0xa3)).collect();
    // Each case's source is a prefix of one pattern, made once rather than a byte at a
    // time for each case (slow under Miri).
    let longest = lens.iter().max().unwrap() * 8;
    let sources: Vec<u8> = (0..longest).map(|k| pattern(k, 0x5c)).collect();
    for &wide in wides {
        for len in lens.iter().map(|w| w * 8) {
            for &off in offs {
                let src = &sources[..len];
                // Writing: the region starts as one pattern; only [off, off + len) changes.
                let mut b = Buf::new(AREA as u64);
                let r = b.region();
                // SAFETY: the whole buffer, 8-aligned, nothing else uses it.
                unsafe { r.write_words(0, &before) };
                // SAFETY: off and len are multiples of 8 and off + len <= AREA.
                unsafe { write_span(&r, off, src, wide) };
                let mut after = vec![0u8; AREA];
                // SAFETY: as above.
                unsafe { r.read_words(0, &mut after) };
                let mut want = before.clone();
                want[off..off + len].copy_from_slice(src);
                assert_eq!(after, want, "write_span, wide {wide}, off {off}, len {len}");
                // Reading it back: exactly `len` bytes, into a buffer that is longer.
                let mut dst = vec![0x11u8; len + 16];
                // SAFETY: as above.
                unsafe { read_span(&r, off, &mut dst[..len], wide) };
                assert_eq!(
                    dst[..len],
                    src[..],
                    "read_span, wide {wide}, off {off}, len {len}"
                );
                assert!(
                    dst[len..].iter().all(|&v| v == 0x11),
                    "read_span, wide {wide}, off {off}, len {len}: wrote past the buffer"
                );
            }
        }
    }
}
