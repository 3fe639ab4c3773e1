//! Runs every reader- and writer-side API of ringwire-core over a region that another
//! process (or a bit flip) scribbles on: the region is initialised validly, then the input
//! patches its bytes (header fields included) between operations. Every call must return;
//! errors are values, never panics; delivered data stays inside the caller's buffers.
//!
//! Input: byte 0 picks the kind (broadcast ring, blob ring, MPMC ring, SPSC queue, fixed
//! SPSC queue, MPMC queue, blackboard, mirror ring), bytes 1-2 a small geometry (so that
//! init and attach succeed; a mirror ring's GEOMETRY takes a few more bytes and may fail
//! the wire checks, which ends the run), then up to `MAX_OPS` operations `[op, args...]`: byte patches, word stores of
//! interesting values, re-attach, and calls into the kind's APIs.
#![no_main]

use core::cell::Cell;
use core::sync::atomic::Ordering::Relaxed;

use libfuzzer_sys::fuzz_target;
use ringwire_core::blackboard::{Blackboard, TryRead};
use ringwire_core::broadcast::blob::{
    BlobRead, BlobReader, BlobWriter, read_blob, reserve, set_descriptor_ref, split_descriptor,
    write_blob,
};
use ringwire_core::broadcast::raw::{RawRead, read_record};
use ringwire_core::broadcast::registry::{
    self, gate_limit, live_reader, live_readers, min_live_cursor, prune_dead, publish_cursor,
};
use ringwire_core::broadcast::{Consumer, NoWake, Producer, StartMode, TypedConsumer};
use ringwire_core::layout::{BlobRef, Flags, Geometry, SEQ_LIMIT, oldest_retained};
use ringwire_core::queue::compat::{LossyMpmcConsumer, LossyMpmcProducer, LossyPush};
use ringwire_core::queue::spsc::check_spsc_cursors;
use ringwire_core::queue::{
    MpmcQueue, Popped, QueueExpect, QueueGeometry, QueueKind, QueueView, SpscConsumer,
    SpscProducer, StuckKind, StuckSlot,
};
use ringwire_core::region::Region;
use ringwire_core::replicate::collect::collect;
use ringwire_core::replicate::{
    Instant, PeerAddr, ReadRecord, RecordSink, RecordSource, RegionSink, RingSource, SourceConfig,
    SourceSession, UdpConfig, UdpSender,
};
use ringwire_core::ring::{Expect, RingView, SlotRead};
use ringwire_core::wire::{GeometryRepr, HEADER_LEN, HelloRepr};

const MAX_OPS: usize = 512;

/// The fuzzer's bytes, consumed front to back; reads past the end give zeros.
struct Input<'a> {
    d: &'a [u8],
}

impl<'a> Input<'a> {
    fn done(&self) -> bool {
        self.d.is_empty()
    }
    fn u8(&mut self) -> u8 {
        match self.d.split_first() {
            Some((&b, rest)) => {
                self.d = rest;
                b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        for x in &mut b {
            *x = self.u8();
        }
        u64::from_le_bytes(b)
    }
    fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (a, b) = self.d.split_at(n.min(self.d.len()));
        self.d = b;
        a
    }
    /// A sequence-like value: small ones most of the time, edge values sometimes.
    fn seq(&mut self) -> u64 {
        let k = self.u8();
        match k % 8 {
            0 => 0,
            1 => u64::MAX,
            2 => u64::MAX - 1,
            3 => 1 << 63,
            4 => self.u64(),
            _ => u64::from(k / 8),
        }
    }
}

/// Scribbles on the region the way another process with write access could.
struct Scribbler {
    base: *mut u8,
    len: usize,
}

impl Scribbler {
    /// Copies input bytes over `[off, off + n)` (clamped to the region).
    fn patch(&self, inp: &mut Input) {
        let off = usize::from(inp.u16()) % self.len;
        let n = usize::from(inp.u8() % 64).min(self.len - off);
        let src = inp.bytes(n);
        // SAFETY: `off + src.len() <= len`, inside the buffer; single-threaded, and the
        // core only reaches this memory through the region's raw pointer too.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), self.base.add(off), src.len()) };
    }

    /// Stores an interesting 64-bit value at an 8-aligned offset.
    fn word(&self, inp: &mut Input) {
        let words = self.len / 8;
        let off = (usize::from(inp.u16()) % words) * 8;
        let v = match inp.u8() % 12 {
            0 => 0,
            1 => 1,
            2 => u64::MAX,
            3 => u64::MAX - 1,
            4 => 1 << 63,
            5 => 1 << 62,
            6 => 1 << 61,
            7 => i64::MAX as u64,
            8 => u64::from(u32::MAX),
            9 => u64::from(inp.u8()),
            _ => inp.u64(),
        };
        // SAFETY: an 8-aligned word inside the buffer (base is 8-aligned).
        unsafe { core::ptr::write(self.base.add(off).cast::<u64>(), v) };
    }
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input { d: data };
    let kind = inp.u8() % 8;
    let g1 = inp.u8();
    let g2 = inp.u8();
    match kind {
        0..=2 => ring_kind(kind, g1, g2, &mut inp),
        3..=5 => queue_kind(kind, g1, g2, &mut inp),
        6 => blackboard_kind(g1, g2, &mut inp),
        _ => mirror_kind(g1, g2, &mut inp),
    }
});

/// A buffer of `len` bytes (rounded up to words) and a region over exactly `len` bytes.
fn buffer(len: usize) -> (Vec<u64>, Region, Scribbler) {
    let mut mem = vec![0u64; len.div_ceil(8)];
    let base: *mut u8 = mem.as_mut_ptr().cast();
    // SAFETY: `mem` is returned to the caller, which keeps it alive as long as the region
    // and every view on it (they are dropped first, being declared later); nothing else
    // touches it but the scribbler, single-threaded.
    let region = unsafe { Region::from_raw_parts(base, len) }.unwrap();
    (mem, region, Scribbler { base, len })
}

fn ring_geometry(kind: u8, g1: u8, g2: u8) -> Option<Geometry> {
    let cap = 1u64 << (g1 & 3);
    let stride = [16usize, 24, 32, 64][usize::from((g1 >> 2) & 3)];
    let readers = u32::from((g1 >> 4) & 3);
    let lossless = g2 & 1 != 0;
    let mut g = match kind {
        0 => Geometry::spmc(cap, stride, 8, readers, lossless).ok()?,
        1 => Geometry::blob(cap, stride.max(32), readers, 64 << ((g2 >> 1) & 3)).ok()?,
        _ => Geometry::mpmc(cap.max(2), stride, 8).ok()?,
    };
    if g2 & 0x10 != 0 {
        g.flags = Flags(g.flags.0 | Flags::SPARSE);
    }
    Some(g)
}

/// Everything a process attached to a ring may hold.
struct RingState {
    view: RingView,
    a: Consumer,
    b: Option<Consumer>,
    producer: Option<Producer<NoWake>>,
    blob_reader: Option<BlobReader>,
    blob_writer: Option<BlobWriter>,
    lossy_p: Option<LossyMpmcProducer>,
    lossy_c: Option<LossyMpmcConsumer>,
    last_a: u64,
}

impl RingState {
    fn new(view: RingView) -> RingState {
        let a = Consumer::new(view, StartMode::Oldest);
        RingState {
            view,
            last_a: a.cursor(),
            a,
            b: None,
            producer: Producer::new(view, NoWake).ok().map(|mut p| {
                p.set_is_alive(alive);
                p
            }),
            blob_reader: BlobReader::new(view).ok(),
            blob_writer: BlobWriter::new(view).ok(),
            lossy_p: LossyMpmcProducer::new(view).ok(),
            lossy_c: LossyMpmcConsumer::new(view).ok(),
        }
    }
}

fn start_mode(inp: &mut Input) -> StartMode {
    match inp.u8() % 4 {
        0 => StartMode::Latest,
        1 => StartMode::Head,
        2 => StartMode::Oldest,
        _ => StartMode::Sequence(inp.seq()),
    }
}

/// A payload offset as a typed caller passes it: a multiple of 8 in `8..=element_size`
/// (the core documents other values as a caller bug, caught by a debug assertion).
fn payload_offset(view: &RingView, inp: &mut Input) -> usize {
    let words = (view.geometry().element_size as usize / 8).max(1);
    8 * (1 + usize::from(inp.u8()) % words)
}

fn alive(pid: u32, _token: u64) -> bool {
    pid % 2 == 1
}

/// A typed consumer over a ring whose stride is `size_of::<$t>() + 8`: a few receives.
macro_rules! typed_ops {
    ($view:expr, $inp:expr, $t:ty) => {{
        let c = Consumer::new($view, start_mode($inp));
        if let Ok(mut t) = TypedConsumer::<$t>::new(c) {
            for _ in 0..($inp.u8() % 4) {
                let before = t.inner().cursor();
                match $inp.u8() % 5 {
                    0 => {
                        if let Some((s, _v)) = t.try_recv_seq() {
                            assert!(s >= before && s < u64::MAX);
                            assert_eq!(t.inner().cursor(), s + 1);
                        }
                    }
                    1 => {
                        let _ = t.try_recv();
                    }
                    2 => {
                        let _ = t.try_recv_seq_eager();
                    }
                    3 => {
                        let _ = t.try_recv_eager();
                    }
                    _ => {
                        let mut out = [<$t>::default(); 4];
                        let n = t.recv_batch(&mut out);
                        assert!(n <= out.len());
                    }
                }
            }
        }
    }};
}

fn ring_kind(kind: u8, g1: u8, g2: u8, inp: &mut Input) {
    let Some(geo) = ring_geometry(kind, g1, g2) else {
        return;
    };
    let total = geo.total_len().unwrap() as usize;
    let (_mem, region, scr) = buffer(total);
    // SAFETY: a fresh buffer, no other view of it exists yet.
    let init = unsafe { RingView::init(region, &geo) }.expect("init of a valid geometry");
    let view = RingView::attach(region, Expect::RAW).expect("attach of a fresh ring");
    assert_eq!(view.geometry(), init.geometry());
    ring_ops(&geo, region, &scr, total, view, inp);
}

/// A mirror ring (spec §21.1): the layout a GEOMETRY frame from the input describes, in a
/// region that may be longer than the ring (a file kept from a larger ring). Every GEOMETRY
/// the wire checks accept must give a ring that the mirror's sink creates and a reader
/// attaches to with the same geometry; the ring then gets the same operations as the
/// others.
fn mirror_kind(g1: u8, g2: u8, inp: &mut Input) {
    let capacity = if g1 & 0x80 != 0 {
        inp.u64()
    } else {
        1 << (g1 & 7)
    };
    let e = inp.u8();
    let element_size = if e & 0x80 != 0 {
        u32::from(e & 0x7f)
    } else {
        8 * (1 + u32::from(e % 16))
    };
    let registry_count = u32::from((g1 >> 3) & 7);
    let s = inp.u8();
    let slots_offset = if s & 0x80 != 0 {
        u32::from(inp.u16())
    } else {
        128 + 64 * (registry_count + u32::from(s % 4))
    };
    // Kept clear of u64::MAX so the arena offset after it cannot overflow here (the
    // wire checks refuse such a layout anyway).
    let slots_end = capacity
        .saturating_mul(u64::from(element_size))
        .saturating_add(u64::from(slots_offset))
        .min(u64::MAX >> 1);
    let (arena_offset, arena_size) = match g2 % 4 {
        0 | 1 => (0, 0),
        2 => (
            slots_end.next_multiple_of(64) + 64 * u64::from(inp.u8() % 4),
            64 << (inp.u8() % 8),
        ),
        _ => (inp.seq(), u64::from(inp.u16())),
    };
    let g = GeometryRepr {
        flags: 0,
        seq: 1,
        capacity,
        element_size,
        ring_flags: u32::from(inp.u16()),
        schema_sig: inp.seq(),
        registry_count,
        slots_offset,
        arena_offset,
        arena_size,
    };
    if g.check().is_err() {
        return;
    }
    let geo = g.mirror_geometry();
    let need = geo
        .total_len()
        .expect("a checked GEOMETRY's length fits a u64");
    if need > 1 << 20 {
        return;
    }
    let total = need as usize + 8 * usize::from((g2 >> 2) % 16);
    let (_mem, region, scr) = buffer(total);
    {
        // SAFETY: a fresh buffer; the sink goes at the end of this block, before any other
        // view of it is made.
        let mut sink = unsafe { RegionSink::new(region) };
        assert!(sink.existing().is_none(), "a zeroed region holds no ring");
        sink.recreate(&geo)
            .expect("a mirror creates the ring of every GEOMETRY the wire checks accept");
        assert!(matches!(sink.existing(), Some((eg, 0)) if eg == geo));
    }
    let view = RingView::attach(region, Expect::RAW).expect("attach of a mirror ring");
    assert!(g.matches(view.geometry()));
    ring_ops(&geo, region, &scr, total, view, inp);
}

/// The operations on a ring of geometry `geo` in `region` (`total` bytes), attached as
/// `view`.
fn ring_ops(
    geo: &Geometry,
    region: Region,
    scr: &Scribbler,
    total: usize,
    view: RingView,
    inp: &mut Input,
) {
    let mut st = RingState::new(view);
    let mut buf = [0u8; 256];
    let mut blob = [0u8; 1024];

    for _ in 0..MAX_OPS {
        if inp.done() {
            break;
        }
        // The record length of the ring as the handles see it (a re-attach may change it).
        let rec = st.view.geometry().record_len();
        let op = inp.u8();
        match op % 20 {
            0 => scr.patch(inp),
            1 => scr.word(inp),
            2 => {
                let expect = match inp.u8() % 3 {
                    0 => Expect::RAW,
                    1 => Expect {
                        element_size: Some(geo.element_size),
                        schema_sig: Some(0),
                        slot_align: 8,
                    },
                    _ => Expect {
                        element_size: None,
                        schema_sig: None,
                        slot_align: 64,
                    },
                };
                // A process attaching now; a failure leaves the old handles (attached
                // before the damage) in place, as in a running process.
                if let Ok(v) = RingView::attach(region, expect) {
                    let g = v.geometry();
                    assert!(g.total_len().is_some_and(|n| n <= total as u64));
                    st = RingState::new(v);
                }
            }
            3 => {
                let n = rec.min(buf.len());
                if let Some(s) = st.a.try_recv(&mut buf[..n]) {
                    assert!((1..u64::MAX).contains(&s));
                    assert!(s >= st.last_a, "delivered {s} below cursor {}", st.last_a);
                    assert_eq!(st.a.cursor(), s + 1);
                }
                st.last_a = st.a.cursor();
            }
            4 => {
                let n = rec.min(buf.len());
                if let Some(s) = st.a.try_recv_eager(&mut buf[..n]) {
                    assert!(s >= st.last_a);
                    assert_eq!(st.a.cursor(), s + 1);
                }
                st.last_a = st.a.cursor();
            }
            5 => {
                let max = usize::from(inp.u8() % 8);
                let n = usize::from(inp.u8()) % (rec + 8);
                let mut calls = 0;
                let got = st.a.recv_batch(&mut buf[..n.min(256)], max, |_s, p| {
                    calls += 1;
                    assert_eq!(p.len(), n.min(256).min(rec));
                });
                assert!(got <= max && got == calls);
                st.last_a = st.a.cursor();
            }
            6 => {
                let (cursor, lapped) = (st.a.cursor(), st.a.lapped());
                let op = inp.u8() % 3;
                let skipped = match op {
                    0 => st.a.seek(inp.seq()),
                    1 => st.a.jump_to_latest(),
                    _ => st.a.jump_to_oldest(),
                };
                if op != 0 {
                    // The jumps only move forward, by what they report as skipped.
                    assert_eq!(st.a.cursor().checked_sub(cursor), Some(skipped));
                }
                assert_eq!(st.a.lapped(), lapped.saturating_add(skipped));
                st.last_a = st.a.cursor();
                let _ = (st.a.lag(), st.a.registry_slot());
                let _ = registry::slowest_unread(&st.view, inp.seq());
            }
            7 => {
                if inp.u8().is_multiple_of(2) {
                    let _ = st.a.register(u32::from(inp.u8()) | 1, "fuzz", alive);
                } else {
                    let _ = st.a.unregister();
                }
                st.last_a = st.a.cursor();
            }
            8 => {
                let mut c = Consumer::new(st.view, start_mode(inp));
                let n = rec.min(buf.len());
                for _ in 0..(inp.u8() % 8) {
                    let before = c.cursor();
                    if let Some(s) = c.try_recv(&mut buf[..n]) {
                        assert!(s >= before);
                    }
                }
                if inp.u8().is_multiple_of(2) {
                    let _ = c.register(u32::from(inp.u8()) | 1, "fuzz-b", alive);
                }
                st.b = Some(c);
            }
            9 => match st.view.geometry().element_size {
                16 => typed_ops!(st.view, inp, u64),
                24 => typed_ops!(st.view, inp, [u64; 2]),
                32 => typed_ops!(st.view, inp, [u64; 3]),
                64 => typed_ops!(st.view, inp, [u64; 7]),
                _ => {
                    let c = Consumer::new(st.view, StartMode::Latest);
                    assert!(TypedConsumer::<u64>::new(c).is_err());
                }
            },
            10 => {
                let seq = inp.seq();
                let n = usize::from(inp.u8()).min(buf.len());
                match read_record(&st.view, seq, &mut buf[..n]) {
                    RawRead::Lapped { resume_at } => assert!(resume_at > seq),
                    RawRead::Record | RawRead::Pending => {}
                }
            }
            11 => registry_ops(&st.view, inp),
            12 => producer_ops(&mut st, inp, &mut buf),
            13 => {
                if let Some(r) = &mut st.blob_reader {
                    let n = st.view.geometry().record_len().min(buf.len());
                    let bl = usize::from(inp.u16()) % (blob.len() + 1);
                    let before = r.cursor();
                    if let Ok(Some(got)) = r.recv(&mut buf[..n], &mut blob[..bl]) {
                        assert!(got.len <= bl);
                        assert!(got.seq >= before);
                    }
                    let _ = r.lapped_count();
                    match inp.u8() % 4 {
                        0 => {
                            let _ = r.register(u32::from(inp.u8()) | 1, "blob", alive);
                        }
                        1 => {
                            let _ = r.unregister();
                        }
                        _ => {}
                    }
                }
            }
            14 => {
                if let Some(w) = &mut st.blob_writer {
                    let n = st.view.geometry().record_len().min(buf.len());
                    let bl = usize::from(inp.u16()) % (blob.len() + 1);
                    let dl = if inp.u8().is_multiple_of(4) {
                        n.saturating_sub(1)
                    } else {
                        n
                    };
                    let _ = w.push(&mut buf[..dl], &blob[..bl], 0);
                    let _ = w.next_seq();
                }
            }
            15 => {
                let r = BlobRef {
                    offset: inp.seq(),
                    len: match inp.u8() % 4 {
                        0 => u32::MAX,
                        1 => u32::from(inp.u16()),
                        _ => u32::from(inp.u8()),
                    },
                    flags: 0,
                };
                match read_blob(&st.view, &r, &mut blob) {
                    BlobRead::Ok(n) => assert_eq!(n, r.len as usize),
                    BlobRead::BufferTooSmall { need } => assert!(need as usize > blob.len()),
                    BlobRead::Lost => {}
                }
                let len = usize::from(inp.u16());
                if let Ok(nr) = reserve(&st.view, len, 0) {
                    assert_eq!(nr.len as usize, len);
                    let bytes = &blob[..len.min(blob.len())];
                    let _ = write_blob(&st.view, &nr, bytes);
                }
                let _ = write_blob(&st.view, &r, &blob[..(r.len as usize).min(blob.len())]);
                let mut d = [0u8; 40];
                assert!(set_descriptor_ref(&mut d, &r));
                assert_eq!(split_descriptor(&d).map(|x| x.1), Some(r));
            }
            16 => {
                let clock = Cell::new(u64::from(inp.u8()));
                // Each reading of the clock moves it 1 ms on, so a takeover deadline passes.
                let now = || {
                    let t = clock.get();
                    clock.set(t + 1_000_000);
                    t
                };
                if let Some(p) = &st.lossy_p {
                    let n = usize::from(inp.u8()).min(buf.len());
                    match p.push(&buf[..n], now) {
                        LossyPush::Published { .. }
                        | LossyPush::Discarded { .. }
                        | LossyPush::Dropped { .. } => {}
                    }
                }
                if let Some(c) = &mut st.lossy_c {
                    let n = rec.min(buf.len());
                    for _ in 0..(inp.u8() % 4) {
                        let _ = c.try_recv(&mut buf[..n]);
                    }
                    let _ = (c.dropped(), c.pending());
                }
            }
            17 => {
                let src = RingSource(st.view);
                let g = src.geometry();
                let w = src.write_seq();
                assert_eq!(src.oldest(), oldest_retained(w, g.capacity));
                let _ = src.format();
                let seq = inp.seq();
                let n = usize::from(inp.u8()).min(buf.len());
                match src.read_record(seq, &mut buf[..n]) {
                    // A blob ring's record is its descriptor and its blob.
                    ReadRecord::Ok(k) if g.has_arena() => {
                        assert!(k >= g.record_len() && k <= n, "{k} of {n}")
                    }
                    ReadRecord::Ok(k) => assert_eq!(k, g.record_len()),
                    ReadRecord::TooLarge { need } => assert!(need > n),
                    _ => {}
                }
                // SAFETY: single-threaded, so nothing accesses the region while the sink
                // recreates; it recreates only with `st.view`'s geometry, the layout of every
                // other view of the region, and is dropped at the end of this operation.
                let mut sink = unsafe { RegionSink::new(region) };
                if sink.existing().is_some() {
                    let s = inp.seq();
                    sink.write(s, &buf[..rec.min(buf.len())], &[]);
                    sink.publish(s);
                    let _ = sink.take_wake();
                }
                if inp.u8().is_multiple_of(4) {
                    let _ = sink.recreate(st.view.geometry());
                }
            }
            18 => {
                if inp.u8().is_multiple_of(2) {
                    view_ops(&st.view, inp, &mut buf);
                } else {
                    source_ops(&st.view, inp);
                }
            }
            _ => {
                // Drop the extra handles (runs Consumer's unregister on drop).
                st.b = None;
                if let Some(p) = &mut st.producer {
                    let _ = (p.gate_limit(), p.write_seq(), p.next_seq(), p.is_lossless());
                }
            }
        }
    }
}

/// The replication source over the ring: a raw collect from any cursor, then a TCP session
/// that says HELLO (from a start the input picks) and is polled a bounded number of times.
fn source_ops(view: &RingView, inp: &mut Input) {
    let src = RingSource(*view);
    let mut out = [0u8; 512];
    let cursor = inp.seq();
    let max_records = u16::from(inp.u8());
    let max_bytes = usize::from(inp.u16());
    let c = collect(&src, cursor, max_records, max_bytes, &mut out);
    assert!(c.count <= max_records);
    assert!(HEADER_LEN + c.bytes <= out.len().max(HEADER_LEN));

    // The multicast sender: it starts after write_seq and follows the ring.
    let mut now = 0u64;
    let mut udp = UdpSender::<4>::new(
        UdpConfig {
            multicast: Some(PeerAddr::new([239, 1, 1, 1], 17403)),
            mtu: usize::from(inp.u16()),
            batch: u16::from(inp.u8()),
            ..UdpConfig::default()
        },
        7,
        src.write_seq(),
        Instant::from_nanos(now),
    );
    for _ in 0..(inp.u8() % 8) {
        now += 1_000_000 * u64::from(inp.u8());
        let mut k = 0;
        while let Some(len) = udp.poll_transmit(Instant::from_nanos(now), &src, &mut out) {
            assert!(len <= out.len());
            k += 1;
            if k == 8 {
                break;
            }
        }
        let _ = (udp.poll_timeout(), udp.cursor(), udp.counters());
    }

    let cfg = SourceConfig {
        batch: u16::from(inp.u8()).max(1),
        tcp_budget: 64 + usize::from(inp.u16()),
        ..SourceConfig::default()
    };
    let peer = PeerAddr::new([10, 0, 0, 2], 40000);
    let mut s = SourceSession::new(cfg, peer, Instant::from_nanos(now));
    let hello = HelloRepr {
        seq: inp.seq(),
        flags: 0,
    };
    let mut hb = [0u8; 64];
    let n = hello.emit(&mut hb).unwrap();
    if s.handle_stream(Instant::from_nanos(now), &hb[..n], &src, None)
        .is_err()
    {
        return;
    }
    for _ in 0..(inp.u8() % 16) {
        now += 1_000_000 * u64::from(inp.u8());
        let mut k = 0;
        while let Some(len) = s.poll_transmit(Instant::from_nanos(now), &src, &mut out) {
            assert!(len <= out.len());
            k += 1;
            if k == 8 {
                break;
            }
        }
        let _ = (s.poll_timeout(), s.cursor(), s.counters());
    }
}

fn registry_ops(view: &RingView, inp: &mut Input) {
    match inp.u8() % 8 {
        0 => {
            let pid = u32::from(inp.u8());
            let _ = registry::register(view, pid, "reg", inp.seq(), |p| alive(p, 0));
        }
        1 => {
            let _ = registry::unregister(view, u32::from(inp.u8()), u32::from(inp.u8()));
        }
        2 => {
            let _ = publish_cursor(view, u32::from(inp.u8()), inp.seq());
        }
        3 => {
            let _ = live_reader(view, u32::from(inp.u8()));
        }
        4 => {
            // The iterator is bounded by the registry count the view validated.
            let n = live_readers(view).count();
            assert!(n <= view.geometry().registry_count as usize);
            let _ = min_live_cursor(view);
        }
        5 => {
            let freed = prune_dead(view, |p| alive(p, 0));
            assert!(freed <= view.geometry().registry_count);
        }
        6 => {
            let _ = gate_limit(view, inp.seq());
        }
        _ => {
            let raw = view.registry_name(u32::from(inp.u8())).unwrap_or([0; 32]);
            let _ = registry::name_bytes(&raw);
        }
    }
}

fn producer_ops(st: &mut RingState, inp: &mut Input, buf: &mut [u8; 256]) {
    let Some(p) = &mut st.producer else {
        return;
    };
    let n = usize::from(inp.u8()).min(buf.len());
    match inp.u8() % 9 {
        0 => {
            let _ = p.try_push(&buf[..n]);
        }
        1 => {
            let poff = payload_offset(p.view(), inp);
            let _ = p.try_push_at(poff, &buf[..n]);
        }
        2 => {
            let before = p.next_seq();
            match p.push(&buf[..n]) {
                Ok(s) => assert!(s < SEQ_LIMIT && p.next_seq() == s + 1, "pushed {s:#x}"),
                // Refused only at the limit, with nothing written.
                Err(e) => assert!(e.seq == before && before >= SEQ_LIMIT && p.next_seq() == before),
            }
        }
        3 => {
            let poff = payload_offset(p.view(), inp);
            let _ = p.push_at(poff, &buf[..n]);
        }
        4 => {
            let k = usize::from(inp.u8() % 4);
            let recs = [&buf[..n], &buf[..n / 2], &buf[..0], &buf[..n]];
            let first = p.next_seq();
            match p.push_batch(recs[..k].iter().copied()) {
                Ok(r) => assert!(r.end - r.start == k as u64 && r.end <= SEQ_LIMIT),
                // Stopped at the limit: the records before it were written.
                Err(e) => {
                    assert!(e.seq == SEQ_LIMIT && p.next_seq() == e.seq && e.seq - first < k as u64)
                }
            }
        }
        5 => {
            let s = inp.seq();
            let _ = p.write_raw(s, &buf[..n]);
        }
        6 => {
            let _ = p.commit();
        }
        7 => p.skip_to(inp.seq()),
        _ => {
            let _ = p.refresh_gate();
            p.set_fenced_publish(inp.u8().is_multiple_of(2));
        }
    }
}

fn view_ops(view: &RingView, inp: &mut Input, buf: &mut [u8; 256]) {
    let seq = inp.seq();
    let poff = payload_offset(view, inp);
    let n = usize::from(inp.u8()).min(buf.len());
    match inp.u8() % 10 {
        0 => check_slot_read(seq, view.read_slot(seq, &mut buf[..n])),
        1 => check_slot_read(seq, view.read_slot_eager(seq, &mut buf[..n])),
        2 => check_slot_read(seq, view.read_slot_at(seq, poff, &mut buf[..n])),
        3 => check_slot_read(seq, view.read_slot_eager_at(seq, poff, &mut buf[..n])),
        4 => view.write_slot_at(seq, poff, &buf[..n]),
        5 => {
            let _ = view.publish(seq);
        }
        6 => {
            let _ = view.publish_fenced(seq);
            let _ = view.bump_futex_if_waiting();
        }
        7 => {
            let i = u32::from(inp.u8());
            let mut name = [0u8; 32];
            name[..4].copy_from_slice(b"name");
            view.set_registry_name(i, &name);
            let _ = view.registry_name(i);
            let _ = view.registry_slot_offset(i);
        }
        8 => {
            let _ = view.arena_reserved();
            let _ = view.arena_data_offset();
            let _ = view.header();
            let off = view.slot_offset(seq);
            assert!(off + view.geometry().element_size as usize <= view.region().len());
        }
        _ => {
            let _ = (
                view.capacity(),
                view.slot_seq(seq)
                    .load(core::sync::atomic::Ordering::Relaxed),
            );
        }
    }
}

fn check_slot_read(want: u64, r: SlotRead) {
    if let SlotRead::Overwritten { seen } = r {
        assert!(seen != want || seen == 0);
    }
}

fn queue_kind(kind: u8, g1: u8, g2: u8, inp: &mut Input) {
    let cap = 1u64 << (g1 & 3);
    let item = 1 + usize::from(g1 >> 2) % 40;
    let qk = if kind == 5 {
        QueueKind::Mpmc
    } else {
        QueueKind::Spsc
    };
    let geo = match kind {
        4 => QueueGeometry::spsc_fixed(cap, item),
        _ if g2 & 1 != 0 => QueueGeometry::cache_lines(qk, cap.max(2), item),
        _ => QueueGeometry::new(qk, cap.max(2), item, (item + 8).next_multiple_of(8)),
    };
    let Ok(geo) = geo else {
        return;
    };
    let total = geo.total_len().unwrap() as usize;
    let (_mem, region, scr) = buffer(total);
    // SAFETY: a fresh buffer, no other view of it exists yet.
    unsafe { QueueView::init(region, &geo) }.expect("init of a valid queue");
    let mut q = QueueView::attach(region, QueueExpect::raw(qk)).expect("attach of a fresh queue");
    let mut prod = SpscProducer::new(q).ok();
    let mut cons = SpscConsumer::new(q).ok();
    let mut mpmc = MpmcQueue::new(q).ok();
    assert_eq!(mpmc.is_some(), qk == QueueKind::Mpmc);
    let mut buf = [0u8; 128];
    let isz = geo.item_size as usize;

    for _ in 0..MAX_OPS {
        if inp.done() {
            break;
        }
        let op = inp.u8();
        match op % 16 {
            0 => scr.patch(inp),
            1 => scr.word(inp),
            2 => {
                let expect = if inp.u8().is_multiple_of(2) {
                    QueueExpect::raw(qk)
                } else {
                    QueueExpect {
                        kind: qk,
                        item_size: Some(geo.item_size),
                        schema_sig: Some(0),
                    }
                };
                if let Ok(v) = QueueView::attach(region, expect) {
                    let g = v.geometry();
                    assert!(g.total_len().is_some_and(|n| n <= total as u64));
                    q = v;
                    prod = SpscProducer::new(q).ok();
                    cons = SpscConsumer::new(q).ok();
                    mpmc = MpmcQueue::new(q).ok();
                }
            }
            3 => {
                if let Some(p) = &mut prod {
                    let n = usize::from(inp.u8()) % (isz + 9);
                    let _ = p.try_push(&buf[..n.min(buf.len())]);
                    let _ = (p.free(), p.tail());
                }
            }
            4 => {
                if let Some(p) = &mut prod {
                    let k = usize::from(inp.u8() % 4);
                    let n = usize::from(inp.u8()) % (isz + 1);
                    let items = [&buf[..n], &buf[..n / 2], &buf[..1], &buf[..n]];
                    if let Ok(m) = p.push_slice(&items[..k]) {
                        assert!(m <= k);
                    }
                }
            }
            5 => {
                if let Some(p) = &mut prod {
                    let il = usize::from(inp.u8() % 48);
                    let n = usize::from(inp.u8()).min(buf.len());
                    let _ = p.push_fixed(&buf[..n], il);
                }
            }
            6 => {
                if let Some(c) = &mut cons {
                    let n = usize::from(inp.u8()).min(buf.len());
                    if let Ok(k) = c.try_pop(&mut buf[..n]) {
                        assert!(k <= n);
                    }
                    let _ = (c.ready(), c.head());
                }
            }
            7 => {
                if let Some(c) = &mut cons {
                    let n = usize::from(inp.u8()) % 64;
                    let mut bufs = [[0u8; 64]; 4];
                    let mut lens = [usize::MAX; 4];
                    let k = usize::from(inp.u8() % 5);
                    let mut views: Vec<&mut [u8]> = bufs.iter_mut().map(|b| &mut b[..n]).collect();
                    if let Ok(m) = c.pop_slice(&mut views[..k], &mut lens[..k]) {
                        assert!(m <= k);
                        for l in &lens[..m] {
                            assert!(*l <= n);
                        }
                    }
                }
            }
            8 => {
                if let Some(c) = &mut cons {
                    let il = usize::from(inp.u8() % 48);
                    let n = usize::from(inp.u8()).min(buf.len());
                    if let Ok(m) = c.pop_fixed(&mut buf[..n], il) {
                        assert!(m * il <= n);
                    }
                }
            }
            9 => {
                if let Some(m) = &mpmc {
                    let n = usize::from(inp.u8()) % (isz + 9);
                    let _ = m.try_push(&buf[..n.min(buf.len())]);
                }
            }
            10 => {
                if let Some(m) = &mpmc {
                    let n = usize::from(inp.u8()).min(buf.len());
                    match m.try_pop(&mut buf[..n]) {
                        Ok(Popped::Item { .. }) => {
                            // The attached geometry's size: a re-attach (op 2) may have
                            // read another one from a scribbled header.
                            let need = m.item_size();
                            assert!(n >= need, "popped into {n} bytes, item size {need}")
                        }
                        Ok(Popped::Healed { .. }) | Err(_) => {}
                    }
                }
            }
            11 => {
                if let Some(m) = &mpmc {
                    if let Ok(pos) = m.claim()
                        && inp.u8().is_multiple_of(2)
                    {
                        let n = usize::from(inp.u8()) % (isz + 9);
                        let _ = m.write_claimed(pos, &buf[..n.min(buf.len())]);
                    }
                    let _ = m.write_claimed(inp.seq(), &buf[..isz.min(buf.len())]);
                }
            }
            12 => {
                if let Some(m) = &mpmc {
                    let _ = (
                        m.has_item(),
                        m.has_space(),
                        m.len(),
                        m.is_empty(),
                        m.item_size(),
                    );
                }
            }
            13 => {
                if let Some(m) = &mpmc {
                    let from = inp.seq();
                    if let Some(s) = m.next_stuck_slot(from) {
                        let _ = m.heal_stuck_slot(s);
                    }
                    let kind = [StuckKind::Claimed, StuckKind::MidWrite, StuckKind::MidPop]
                        [inp.seq() as usize % 3];
                    let _ = m.heal_stuck_slot(StuckSlot {
                        pos: inp.seq(),
                        kind,
                    });
                }
            }
            14 => {
                let _ = (q.notify_data(), q.notify_space());
                let _ = (q.notify_data_unfenced(), q.notify_space_unfenced());
                let _ = (q.header(), q.capacity());
                // The check a queue file's open and `stat` make: with nothing running
                // meanwhile, a queue it passes holds at most a lap of items.
                if qk == QueueKind::Spsc && check_spsc_cursors(&q).is_ok() {
                    let held = q.enq().load(Relaxed).wrapping_sub(q.deq().load(Relaxed));
                    assert!(held <= q.capacity(), "{held} items in {}", q.capacity());
                }
            }
            _ => {
                let pos = inp.seq();
                let off = q.slot_offset(pos);
                assert!(off + q.geometry().slot_stride as usize <= q.region().len());
                let _ = q.slot_word(pos).load(core::sync::atomic::Ordering::Relaxed);
            }
        }
    }
}

fn blackboard_kind(g1: u8, g2: u8, inp: &mut Input) {
    let value_size = 1 + u32::from(g1 % 64);
    let slots = 1 + u32::from(g2 % 8);
    let Some(total) = ringwire_core::blackboard::total_len(value_size as usize, slots as usize)
    else {
        return;
    };
    let (_mem, region, scr) = buffer(total);
    // SAFETY: a fresh buffer, no other view of it exists yet.
    unsafe { Blackboard::init(region, value_size, slots) }.expect("init of a valid blackboard");
    let mut bb = Blackboard::attach(region, Some(value_size)).expect("attach of a fresh board");
    let mut buf = [0u8; 128];

    for _ in 0..MAX_OPS {
        if inp.done() {
            break;
        }
        match inp.u8() % 6 {
            0 => scr.patch(inp),
            1 => scr.word(inp),
            2 => {
                let how = inp.u8();
                let vs = if how.is_multiple_of(2) {
                    None
                } else {
                    Some(value_size)
                };
                // A reader of values aligned to 16..=128 bytes (or to a bad alignment);
                // the board was made for 8, so most of these are refused.
                let b = if how % 4 == 3 {
                    Blackboard::attach_aligned(region, value_size, 1 << (how / 4 % 8))
                } else {
                    Blackboard::attach(region, vs)
                };
                if let Ok(b) = b {
                    let end = 128 + b.slot_size() as usize * b.slot_count() as usize;
                    assert!(end <= total);
                    bb = b;
                }
            }
            3 => {
                let key = usize::from(inp.u8() % 12);
                let n = usize::from(inp.u8()).min(buf.len());
                let _ = bb.write(key, &buf[..n]);
            }
            4 => {
                let key = usize::from(inp.u8() % 12);
                let n = usize::from(inp.u8()).min(buf.len());
                match bb.try_read(key, &mut buf[..n]) {
                    Ok(TryRead::Value | TryRead::Never | TryRead::Busy { .. }) | Err(_) => {}
                }
            }
            _ => {
                let _ = (bb.value_size(), bb.slot_size(), bb.slot_count());
            }
        }
    }
}
