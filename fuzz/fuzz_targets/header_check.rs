//! Feeds the header checks a creator runs on a stale file whose magic is 0 (is it a ring,
//! queue or blackboard whose creation never finished, or somebody's data?) with arbitrary
//! headers and file lengths, edge values near `u64::MAX` included: `Geometry::from_header`,
//! `QueueGeometry::from_header` and `blackboard::header_describes`. They read untrusted
//! bytes, so each must return (no overflow panic) and mean what the attachers mean:
//!
//! * a header a check accepts describes a layout inside the length given, accepted at every
//!   greater length too, and a region of that length holding the header with its magic
//!   attaches (and one the check refuses does not);
//! * the ring, queue or blackboard a real constructor makes, its magic zeroed again as a
//!   creator that died before its last store leaves it, is accepted by its kind's check
//!   at the file's length, with the same geometry.
//!
//! Input: byte 0 picks the check and whether the header is arbitrary (128 input bytes, then
//! fix-ups that make fields plausible, so that the accepting paths are reached) or made by
//! a constructor from a few parameter bytes; then the length (an edge value or arbitrary).
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringwire_core::Geometry;
use ringwire_core::blackboard::{self, BLACKBOARD_MAGIC, BLACKBOARD_VERSION, Blackboard};
use ringwire_core::layout::{RING_MAGIC, RING_VERSION, RingHeader, arena_off, hdr, reg};
use ringwire_core::queue::{
    FLAG_FIXED, QUEUE_VERSION, QueueExpect, QueueGeometry, QueueHeader, QueueKind, QueueView, qhdr,
};
use ringwire_core::region::Region;
use ringwire_core::ring::{Expect, RingView};

/// Regions up to this size are built to cross-check a check with the attacher.
const MAX_REGION: u64 = 1 << 16;

struct Input<'a> {
    d: &'a [u8],
}

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        match self.d.split_first() {
            Some((&b, rest)) => {
                self.d = rest;
                b
            }
            None => 0,
        }
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | u64::from(self.u32()) << 32
    }
    fn header(&mut self) -> [u8; 128] {
        let mut h = [0u8; 128];
        for b in &mut h {
            *b = self.u8();
        }
        h
    }
    /// A file length: small, around `near` (the length the header needs), or an edge value.
    fn len(&mut self, near: u64) -> u64 {
        let k = self.u8();
        let small = u64::from(self.u8());
        match k % 10 {
            0 => small,
            1 => near.saturating_sub(small),
            2 => near.saturating_add(small),
            3 => u64::MAX - small,
            4 => (i64::MAX as u64).wrapping_add(small).wrapping_sub(128),
            5 => u64::from(u32::MAX).wrapping_add(small).wrapping_sub(128),
            6 => 1 << (small % 64),
            7 => self.u64(),
            _ => near,
        }
    }
    /// An interesting 64-bit field value.
    fn field(&mut self) -> u64 {
        let k = self.u8();
        match k % 8 {
            0 => 0,
            1 => u64::MAX - u64::from(k >> 3),
            2 => 1 << (k >> 2),
            3 => u64::from(u32::MAX),
            4 => self.u64(),
            _ => u64::from(k >> 3),
        }
    }
}

/// A header struct read from its 128 bytes.
fn from_bytes<T: Copy>(b: &[u8; 128]) -> T {
    assert_eq!(size_of::<T>(), 128);
    // SAFETY: T is RingHeader or QueueHeader, 128-byte `repr(C)` structs of integer fields
    // (zerocopy FromBytes): every bit pattern is a value; the read is unaligned-safe.
    unsafe { core::ptr::read_unaligned(b.as_ptr().cast::<T>()) }
}

/// The 128 bytes of a header struct.
fn to_bytes<T: Copy>(h: &T) -> [u8; 128] {
    assert_eq!(size_of::<T>(), 128);
    let mut b = [0u8; 128];
    // SAFETY: as in from_bytes (IntoBytes: no padding, so every byte is initialised).
    unsafe { core::ptr::write_unaligned(b.as_mut_ptr().cast::<T>(), *h) };
    b
}

/// A zeroed buffer of `len` bytes (rounded up to words) and a region over exactly `len`.
fn buffer(len: u64) -> (Vec<u64>, Region) {
    let len = len as usize;
    let mut mem = vec![0u64; len.div_ceil(8)];
    // SAFETY: `mem` outlives the region at every caller (declared first, dropped last);
    // single-threaded.
    let region = unsafe { Region::from_raw_parts(mem.as_mut_ptr().cast(), len) }.unwrap();
    (mem, region)
}

/// The first 128 bytes of a buffer.
fn head(mem: &[u64]) -> [u8; 128] {
    let mut b = [0u8; 128];
    for (i, w) in mem[..16].iter().enumerate() {
        b[i * 8..][..8].copy_from_slice(&w.to_ne_bytes());
    }
    b
}

fn put_head(mem: &mut [u64], b: &[u8; 128]) {
    for (i, w) in mem[..16].iter_mut().enumerate() {
        *w = u64::from_ne_bytes(b[i * 8..][..8].try_into().unwrap());
    }
}

/// What a creator's check requires besides the header describing the file: some byte past
/// the magic is not zero (a header of zeros is the all-zero case, checked apart).
fn has_header(b: &[u8; 128]) -> bool {
    b[8..].iter().any(|&x| x != 0)
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input { d: data };
    match inp.u8() % 6 {
        0 => ring_arbitrary(&mut inp),
        1 => ring_made(&mut inp),
        2 => queue_arbitrary(&mut inp),
        3 => queue_made(&mut inp),
        4 => board_arbitrary(&mut inp),
        _ => board_made(&mut inp),
    }
});

/// Bytes a ring of header `h` needs, as `from_header` measures them: the slots, the arena and
/// (when it has an offset) the registry, even an empty one.
fn ring_need(g: &Geometry) -> u64 {
    let mut need = g.total_len().unwrap().max(g.slots_end().unwrap());
    if g.registry_offset != 0 {
        need = need.max(u64::from(g.registry_offset) + u64::from(g.registry_count) * 64);
    }
    need
}

fn ring_arbitrary(inp: &mut Input) {
    let mut h: RingHeader = from_bytes(&inp.header());
    let fix = inp.u32();
    if fix & 1 != 0 {
        h.version = RING_VERSION;
    }
    if fix & 2 != 0 {
        h.capacity = 1 << (inp.u8() % 64);
    }
    if fix & 4 != 0 {
        h.mask = h.capacity.wrapping_sub(1);
    }
    if fix & 8 != 0 {
        h.element_size = u32::from(inp.u8()) * 8;
    }
    if fix & 16 != 0 {
        h.slots_offset = 128 + 64 * u64::from(inp.u8());
    } else if fix & 32 != 0 {
        h.slots_offset = inp.field();
    }
    if fix & 64 != 0 {
        h.reader_registry_offset = 0;
    } else if fix & 128 != 0 {
        h.reader_registry_offset = 64 * u32::from(inp.u8() % 8);
        h.reader_registry_count = u32::from(inp.u8() % 8);
    }
    if fix & 256 != 0 {
        h.arena_offset = 0;
        h.arena_size = 0;
    } else if fix & 512 != 0 {
        h.arena_offset = inp.field() & !63;
        h.arena_size = inp.field();
    }
    if fix & 1024 != 0 {
        h.capacity = inp.field();
    }
    let align = 1u64 << (inp.u8() % 9);
    // The length the header needs when the fields are sane (a guess otherwise).
    let near = h
        .capacity
        .checked_mul(u64::from(h.element_size))
        .and_then(|s| s.checked_add(h.slots_offset))
        .unwrap_or(0)
        .max(
            h.arena_offset
                .saturating_add(64)
                .saturating_add(h.arena_size),
        );
    let len = inp.len(near);
    // The stale file's magic is 0; the creator puts the kind's in.
    h.magic = 0;
    let stale = to_bytes(&h);
    h.magic = RING_MAGIC;
    let got = Geometry::from_header(&h, len, align);
    if let Ok(g) = got {
        check_ring_geometry(&h, &g, len, align);
        let need = ring_need(&g);
        // Accepted at every greater length, refused at every smaller one.
        for more in [len.saturating_add(1), len.saturating_add(4096), u64::MAX] {
            assert_eq!(Geometry::from_header(&h, more, align), Ok(g), "{more}");
        }
        assert_eq!(Geometry::from_header(&h, need, align), Ok(g));
        assert!(Geometry::from_header(&h, need - 1, align).is_err());
        // A header of a real ring is never all zero past its magic.
        assert!(has_header(&stale));
        if need <= MAX_REGION {
            // The ring the constructor makes at this geometry is accepted again.
            let (mut mem, region) = buffer(need);
            // SAFETY: a fresh buffer, ours alone.
            let view = unsafe { RingView::init(region, &g) }.expect("init at an accepted geometry");
            assert_eq!(*view.geometry(), g);
            mem[0] = 0;
            let mut made: RingHeader = from_bytes(&head(&mem));
            assert!(has_header(&head(&mem)));
            made.magic = RING_MAGIC;
            assert_eq!(Geometry::from_header(&made, need, 8), Ok(g));
        }
    }
    // The attacher agrees with the check on a region of that length holding the header.
    if (128..=MAX_REGION).contains(&len) {
        let (mut mem, region) = buffer(len);
        put_head(&mut mem, &to_bytes(&h));
        if let Ok(g) = got
            && g.arena_offset != 0
        {
            mem[(g.arena_offset as usize + arena_off::CAPACITY) / 8] = g.arena_size;
            mem[(g.arena_offset as usize + arena_off::MASK) / 8] = g.arena_size - 1;
        }
        let expect = Expect {
            slot_align: align,
            ..Expect::RAW
        };
        match (RingView::attach(region, expect), got) {
            (Ok(v), Ok(g)) => assert_eq!(*v.geometry(), g),
            (Err(a), Err(b)) => assert_eq!(a, b),
            (a, b) => panic!("attach {a:?} but from_header {b:?}"),
        }
    }
}

/// Every layout rule an accepted geometry must keep, checked from scratch.
fn check_ring_geometry(h: &RingHeader, g: &Geometry, len: u64, align: u64) {
    assert_eq!(g.capacity, h.capacity);
    assert_eq!(g.element_size, h.element_size);
    assert_eq!(g.slots_offset, h.slots_offset);
    assert_eq!(g.arena_offset, h.arena_offset);
    assert_eq!(g.arena_size, h.arena_size);
    assert_eq!(g.registry_offset, h.reader_registry_offset);
    assert_eq!(g.registry_count, h.reader_registry_count);
    assert_eq!(g.schema_sig, h.schema_sig);
    assert!(g.capacity.is_power_of_two() && h.mask == g.capacity - 1);
    assert!(g.element_size >= 8 && g.element_size.is_multiple_of(8));
    assert!(g.slots_offset >= hdr::SIZE as u64 && g.slots_offset.is_multiple_of(8));
    let slots_end =
        u128::from(g.capacity) * u128::from(g.element_size) + u128::from(g.slots_offset);
    assert!(slots_end <= u128::from(len));
    assert_eq!(g.slots_offset % align.max(8), 0);
    if g.registry_offset != 0 {
        let end = u64::from(g.registry_offset) + u64::from(g.registry_count) * reg::SIZE as u64;
        assert!(end <= len && g.registry_offset.is_multiple_of(64));
        if g.registry_count > 0 {
            assert!(u64::from(g.registry_offset) >= 128 && end <= g.slots_offset);
        }
    }
    if g.arena_offset != 0 {
        let end = u128::from(g.arena_offset) + 64 + u128::from(g.arena_size);
        assert!(end <= u128::from(len));
        assert!(u128::from(g.arena_offset) >= slots_end && g.arena_offset.is_multiple_of(64));
        assert!(g.arena_size.is_power_of_two() && g.arena_size >= 64 && g.element_size >= 24);
    }
}

fn ring_made(inp: &mut Input) {
    let p = inp.u8();
    let cap = 1u64 << (inp.u8() % 10);
    let stride = 8 * (usize::from(inp.u8() % 32) + 1);
    let align = 1usize << (inp.u8() % 9);
    let readers = u32::from(inp.u8() % 40);
    let sig = if p & 8 != 0 { inp.u64() } else { 0 };
    let g = match p % 4 {
        0 | 1 => Geometry::spmc(cap, stride, align, readers, p & 4 != 0),
        2 => Geometry::blob(cap, stride.max(24), readers, 64 << (inp.u8() % 10)),
        _ => Geometry::mpmc(cap, stride, align),
    };
    let Ok(g) = g else { return };
    let g = g.with_schema(sig);
    let total = g.total_len().unwrap();
    if total > MAX_REGION {
        return;
    }
    // The file may be longer than the ring (a creator sizes it to the ring, but a longer
    // one is still a ring to the attacher).
    let len = total + u64::from(inp.u8()) * u64::from(inp.u8() % 2);
    let (mut mem, region) = buffer(len);
    // SAFETY: a fresh buffer, ours alone.
    let view = unsafe { RingView::init(region, &g) }.expect("init of a constructor's ring");
    let g = *view.geometry();
    // The creator died before its last store.
    mem[0] = 0;
    let b = head(&mem);
    assert!(has_header(&b));
    let mut h: RingHeader = from_bytes(&b);
    h.magic = RING_MAGIC;
    assert_eq!(Geometry::from_header(&h, len, 8), Ok(g));
    let typed = if p % 4 == 2 { 8 } else { align.max(8) as u64 };
    assert_eq!(Geometry::from_header(&h, len, typed), Ok(g));
    assert!(Geometry::from_header(&h, total - 1, 8).is_err());
    assert_eq!(Geometry::from_header(&h, u64::MAX, 8), Ok(g));
}

fn queue_arbitrary(inp: &mut Input) {
    let mut h: QueueHeader = from_bytes(&inp.header());
    let fix = inp.u32();
    if fix & 1 != 0 {
        h.version = QUEUE_VERSION;
    }
    if fix & 2 != 0 {
        h.kind = 1 + u32::from(inp.u8() % 2);
    }
    if fix & 4 != 0 {
        h.capacity = 1 << (inp.u8() % 64);
    }
    if fix & 8 != 0 {
        h.mask = h.capacity.wrapping_sub(1);
    }
    if fix & 16 != 0 {
        h.flags = u32::from(inp.u8() % 2) * FLAG_FIXED;
    }
    if fix & 32 != 0 {
        h.slot_stride = u32::from(inp.u8()) * 8;
        h.item_size = u32::from(inp.u8());
    } else if fix & 64 != 0 {
        h.slot_stride = (inp.field() as u32) & !7;
        h.item_size = inp.field() as u32;
    }
    if fix & 128 != 0 {
        h.slots_offset = 384 + 64 * u64::from(inp.u8() % 16);
    } else if fix & 256 != 0 {
        h.slots_offset = inp.field() & !63;
    }
    if fix & 512 != 0 {
        h.capacity = inp.field();
    }
    let near = h
        .capacity
        .checked_mul(u64::from(h.slot_stride))
        .and_then(|s| s.checked_add(h.slots_offset))
        .unwrap_or(0);
    let len = inp.len(near);
    // As the creator does: the kind the header names gives the magic.
    let kind = [QueueKind::Spsc, QueueKind::Mpmc]
        .into_iter()
        .find(|k| k.code() == h.kind);
    h.magic = kind.map_or(inp.u64(), QueueKind::magic);
    let got = QueueGeometry::from_header(&h, len);
    if let Ok(g) = got {
        let kind = kind.expect("an accepted header names a kind");
        assert_eq!(g.kind, kind);
        assert_eq!(g.capacity, h.capacity);
        assert_eq!(g.slot_stride, h.slot_stride);
        assert_eq!(g.item_size, h.item_size);
        assert_eq!(g.slots_offset, h.slots_offset);
        assert_eq!(g.schema_sig, h.schema_sig);
        assert_eq!(g.fixed, h.flags == FLAG_FIXED);
        assert!(g.capacity.is_power_of_two() && h.mask == g.capacity - 1);
        assert!(kind == QueueKind::Spsc || g.capacity >= 2);
        assert!(!g.fixed || kind == QueueKind::Spsc);
        let word = if g.fixed { 0 } else { 8 };
        assert!(g.item_size > 0 && g.slot_stride.is_multiple_of(8));
        assert!(u64::from(g.slot_stride) >= word + u64::from(g.item_size));
        assert!(
            g.slots_offset >= qhdr::MIN_SLOTS_OFFSET as u64 && g.slots_offset.is_multiple_of(64)
        );
        let end = u128::from(g.capacity) * u128::from(g.slot_stride) + u128::from(g.slots_offset);
        assert!(end <= u128::from(len));
        let need = end as u64;
        for more in [len.saturating_add(1), u64::MAX] {
            assert_eq!(QueueGeometry::from_header(&h, more), Ok(g));
        }
        assert!(QueueGeometry::from_header(&h, need - 1).is_err());
        let stale = {
            let mut s = h;
            s.magic = 0;
            to_bytes(&s)
        };
        assert!(has_header(&stale));
        if need <= MAX_REGION {
            let (mut mem, region) = buffer(need);
            // SAFETY: a fresh buffer, ours alone.
            let view =
                unsafe { QueueView::init(region, &g) }.expect("init at an accepted geometry");
            assert_eq!(*view.geometry(), g);
            mem[0] = 0;
            assert!(has_header(&head(&mem)));
            let mut made: QueueHeader = from_bytes(&head(&mem));
            made.magic = kind.magic();
            assert_eq!(QueueGeometry::from_header(&made, need), Ok(g));
        }
    }
    if let Some(kind) = kind
        && (8..=MAX_REGION).contains(&len)
    {
        let (mut mem, region) = buffer(len.max(128));
        let region = if len < 128 {
            // SAFETY: inside the same buffer, which outlives it.
            unsafe { Region::from_raw_parts(mem.as_mut_ptr().cast(), len as usize) }.unwrap()
        } else {
            region
        };
        put_head(&mut mem, &to_bytes(&h));
        match (QueueView::attach(region, QueueExpect::raw(kind)), got) {
            (Ok(v), Ok(g)) => assert_eq!(*v.geometry(), g),
            (Err(_), Err(_)) => {}
            (a, b) => panic!("attach {a:?} but from_header {b:?}"),
        }
    }
}

fn queue_made(inp: &mut Input) {
    let p = inp.u8();
    let kind = if p & 1 == 0 {
        QueueKind::Spsc
    } else {
        QueueKind::Mpmc
    };
    let cap = 1u64 << (inp.u8() % 10);
    let item = usize::from(inp.u8()) + usize::from(inp.u8() % 4) * 256;
    let stride = item + 8 + usize::from(inp.u8() % 8) * 8;
    let g = match (p >> 1) % 3 {
        0 => QueueGeometry::new(kind, cap, item, stride & !7),
        1 => QueueGeometry::cache_lines(kind, cap, item),
        _ => QueueGeometry::spsc_fixed(cap, item),
    };
    let Ok(g) = g else { return };
    let g = if p & 8 != 0 {
        g.with_schema(inp.u64())
    } else {
        g
    };
    let total = g.total_len().unwrap();
    if total > MAX_REGION {
        return;
    }
    let len = total + u64::from(inp.u8()) * u64::from(inp.u8() % 2);
    let (mut mem, region) = buffer(len);
    // SAFETY: a fresh buffer, ours alone.
    let view = unsafe { QueueView::init(region, &g) }.expect("init of a constructor's queue");
    let g = *view.geometry();
    mem[0] = 0;
    let b = head(&mem);
    assert!(has_header(&b));
    let mut h: QueueHeader = from_bytes(&b);
    // As the creator does: the kind the header names gives the magic.
    let named = [QueueKind::Spsc, QueueKind::Mpmc]
        .into_iter()
        .find(|k| k.code() == h.kind)
        .expect("a queue's header names its kind");
    assert_eq!(named, g.kind);
    h.magic = named.magic();
    assert_eq!(QueueGeometry::from_header(&h, len), Ok(g));
    assert_eq!(QueueGeometry::from_header(&h, u64::MAX), Ok(g));
    assert!(QueueGeometry::from_header(&h, total - 1).is_err());
}

fn board_arbitrary(inp: &mut Input) {
    let mut b = inp.header();
    let fix = inp.u8();
    let mut put = |off: usize, v: u32| b[off..][..4].copy_from_slice(&v.to_le_bytes());
    if fix & 1 != 0 {
        put(8, BLACKBOARD_VERSION);
    }
    if fix & 2 != 0 {
        put(12, u32::from(inp.u8()));
    }
    if fix & 4 != 0 {
        put(16, u32::from(inp.u8()) * 8);
    } else if fix & 8 != 0 {
        put(16, inp.field() as u32);
    }
    if fix & 16 != 0 {
        put(20, u32::from(inp.u8()));
    } else if fix & 32 != 0 {
        put(20, inp.field() as u32);
    }
    b[..8].fill(0);
    let word = |off: usize| u32::from_le_bytes(b[off..][..4].try_into().unwrap());
    let (vs, ss, count) = (word(12), word(16), word(20));
    let need = 128 + u64::from(ss) * u64::from(count);
    let len = inp.len(need);
    let got = blackboard::header_describes(&b, len);
    if got {
        assert_eq!(word(8), BLACKBOARD_VERSION);
        assert!(u64::from(ss) >= 8 + u64::from(vs) && ss.is_multiple_of(8));
        assert!(need <= len);
        assert!(blackboard::header_describes(&b, u64::MAX));
        assert!(blackboard::header_describes(&b, len.saturating_add(1)));
        assert!(blackboard::header_describes(&b, need));
        assert!(has_header(&b));
    }
    // Refused at a length that holds the slots: refused at every length.
    if need <= len {
        assert_eq!(blackboard::header_describes(&b, need), got);
    }
    if (128..=MAX_REGION).contains(&len) {
        let (mut mem, region) = buffer(len);
        let mut with = b;
        with[..8].copy_from_slice(&BLACKBOARD_MAGIC.to_ne_bytes());
        put_head(&mut mem, &with);
        match (Blackboard::attach(region, None), got) {
            (Ok(bb), true) => {
                assert_eq!((bb.value_size(), bb.slot_size()), (vs, ss));
            }
            (Err(_), false) => {}
            (a, b) => panic!("attach {:?} but header_describes {b}", a.map(|_| ())),
        }
    }
}

fn board_made(inp: &mut Input) {
    let vs = u32::from(inp.u8()) + u32::from(inp.u8() % 8) * 256;
    let align = 1u32 << (inp.u8() % 9);
    let count = u32::from(inp.u8()) + 1;
    // A big enough region: at most 128 + (2048 + 256) * 256 bytes.
    let need = {
        let (_, region) = buffer(128);
        // SAFETY: a fresh buffer (dropped with the region at the end of this block).
        match unsafe { Blackboard::init_aligned(region, vs, align, count) } {
            Err(ringwire_core::blackboard::BlackboardError::TooShort { need, .. }) => need,
            Ok(_) => 128,
            Err(_) => return,
        }
    };
    let len = need + u64::from(inp.u8()) * u64::from(inp.u8() % 2);
    let (mut mem, region) = buffer(len);
    // SAFETY: a fresh buffer, ours alone.
    let bb = unsafe { Blackboard::init_aligned(region, vs, align, count) }.expect("init");
    let ss = bb.slot_size();
    assert_eq!(need, 128 + u64::from(ss) * u64::from(count));
    mem[0] = 0;
    let b = head(&mem);
    assert!(has_header(&b));
    assert!(blackboard::header_describes(&b, len));
    assert!(blackboard::header_describes(&b, u64::MAX));
    assert!(!blackboard::header_describes(&b, need - 1));
}
