//! Rings in heap memory for the simulator, and a mirror sink that checks every write.

use ringwire_core::broadcast::blob::{BlobRead, BlobWriter, read_blob, split_descriptor};
use ringwire_core::layout::Geometry;
use ringwire_core::region::Region;
use ringwire_core::replicate::{Holds, RecordSink, RegionSink, SinkError};
use ringwire_core::ring::RingView;

/// The deterministic payload of record `seq` (`len` bytes).
pub fn payload(seq: u64, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    let mut x = seq.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0xA5A5;
    while v.len() < len {
        v.extend_from_slice(&x.to_le_bytes());
        x = x.rotate_left(13).wrapping_add(seq);
    }
    v.truncate(len);
    v[..8.min(len)].copy_from_slice(&seq.to_le_bytes()[..8.min(len)]);
    v
}

/// The deterministic blob of record `seq` of a blob ring: 0 to 200 bytes.
pub fn blob_payload(seq: u64) -> Vec<u8> {
    payload(seq ^ 0xb10b, (seq * 53 % 201) as usize)
}

/// Whether record `seq` as it reads from a ring (`record` the slot payload) holds the
/// deterministic content: the payload itself, or on a blob ring (`view` has an arena) the
/// payload's first `len - 16` bytes as meta and a blob that reads back as
/// [`blob_payload`] (a blob overwritten in the arena since counts as right: it is never
/// delivered).
pub fn holds_record(view: &RingView, seq: u64, record: &[u8]) -> bool {
    if !view.geometry().has_arena() {
        return record == payload(seq, record.len()).as_slice();
    }
    let Some((meta, r)) = split_descriptor(record) else {
        return false;
    };
    let mut blob = vec![0u8; r.len as usize];
    meta == &payload(seq, record.len())[..meta.len()]
        && match read_blob(view, &r, &mut blob) {
            BlobRead::Ok(n) => blob[..n] == blob_payload(seq)[..],
            BlobRead::Lost => true,
            BlobRead::BufferTooSmall { .. } => false,
        }
}

/// Heap memory a ring lives in; the Region stays valid while this value lives.
pub struct Mem {
    words: Box<[u64]>,
}

impl Mem {
    /// `bytes` of zeroed memory.
    pub fn new(bytes: usize) -> Mem {
        Mem {
            words: vec![0u64; bytes.div_ceil(8)].into_boxed_slice(),
        }
    }
    /// A region over the memory.
    pub fn region(&mut self) -> Region {
        let len = self.words.len() * 8;
        // SAFETY: the boxed slice is 8-aligned, lives as long as `self`, and is only
        // accessed through the Region (atomics) while the simulation runs.
        unsafe { Region::from_raw_parts(self.words.as_mut_ptr().cast(), len) }
            .expect("heap memory is aligned")
    }
}

/// A source ring and its producer.
pub struct SourceRing {
    _mem: Mem,
    /// The ring.
    pub view: RingView,
    /// Last published sequence.
    pub written: u64,
    /// The producer of a blob ring.
    blobs: Option<BlobWriter>,
}

impl SourceRing {
    /// A fixed-record ring of `capacity` slots and `record_len` payload bytes, or with
    /// `arena > 0` a blob ring whose descriptors take `record_len` bytes (at least 16, a
    /// multiple of 8) and whose arena holds `arena` bytes (a power of two).
    pub fn new(capacity: u64, record_len: usize, arena: u64) -> SourceRing {
        let geo = if arena == 0 {
            Geometry::spmc(capacity, 8 + record_len, 8, 0, false)
        } else {
            Geometry::blob(capacity, 8 + record_len, 0, arena)
        }
        .expect("geometry");
        let mut mem = Mem::new(geo.total_len().unwrap() as usize);
        // SAFETY: fresh memory of this ring alone: no other view of it exists yet.
        let view = unsafe { RingView::init(mem.region(), &geo) }.expect("init");
        SourceRing {
            _mem: mem,
            view,
            written: 0,
            blobs: (arena > 0).then(|| BlobWriter::new(view).expect("blob ring")),
        }
    }
    /// Publishes the next record.
    pub fn push(&mut self) -> u64 {
        self.written += 1;
        let mut p = payload(self.written, self.view.geometry().record_len());
        match &mut self.blobs {
            None => {
                self.view.write_slot(self.written, &p);
                self.view.publish(self.written);
            }
            Some(w) => {
                let pushed = w
                    .push(&mut p, &blob_payload(self.written), 0)
                    .expect("blob push");
                assert_eq!(pushed.seq, self.written);
            }
        }
        self.written
    }
}

/// A mirror ring that records and checks every write.
pub struct CheckedSink {
    _mem: Mem,
    inner: RegionSink,
    /// `(sequence, time)` of every write, in order.
    pub writes: Vec<(u64, u64)>,
    /// Simulated time, set by the world before each call.
    pub now: u64,
    /// Order, duplicate and content violations.
    pub violations: Vec<String>,
    /// Ring (re)creations.
    pub creations: u32,
    /// Index in `writes` where the current ring's writes begin.
    pub since_creation: usize,
    last: u64,
}

impl CheckedSink {
    /// Room for a ring of `bytes`.
    pub fn new(bytes: usize) -> CheckedSink {
        let mut mem = Mem::new(bytes);
        // SAFETY: fresh memory of this sink alone, in the simulation's one thread; the mirror
        // ring is read only through `view`, the sink's current view, between the mirror's
        // calls.
        let inner = unsafe { RegionSink::new(mem.region()) };
        CheckedSink {
            _mem: mem,
            inner,
            writes: Vec::new(),
            now: 0,
            violations: Vec::new(),
            creations: 0,
            since_creation: 0,
            last: 0,
        }
    }
    /// The mirror ring.
    pub fn view(&self) -> Option<&RingView> {
        self.inner.view()
    }
}

impl RecordSink for CheckedSink {
    fn existing(&self) -> Option<(Geometry, u64)> {
        self.inner.existing()
    }
    fn recreate(&mut self, geo: &Geometry) -> Result<(), SinkError> {
        self.creations += 1;
        self.since_creation = self.writes.len();
        self.last = 0;
        self.inner.recreate(geo)
    }
    fn write(&mut self, seq: u64, fixed: &[u8], blob: &[u8]) {
        if seq <= self.last {
            self.violations.push(format!(
                "write of {seq} after {} (out of order or twice)",
                self.last
            ));
        }
        let right = if self.inner.view().is_some_and(|v| v.geometry().has_arena()) {
            split_descriptor(fixed).is_some_and(|(meta, _)| {
                meta == &payload(seq, fixed.len())[..meta.len()] && blob == blob_payload(seq)
            })
        } else {
            fixed == payload(seq, fixed.len()).as_slice()
        };
        if !right {
            self.violations
                .push(format!("record {seq} has wrong content"));
        }
        self.last = seq;
        self.writes.push((seq, self.now));
        self.inner.write(seq, fixed, blob);
    }
    fn publish(&mut self, seq: u64) {
        if seq != self.last {
            self.violations
                .push(format!("publish {seq} but last written {}", self.last));
        }
        self.inner.publish(seq);
    }
    fn holds(&self, seq: u64, fixed: &[u8], blob: &[u8]) -> Holds {
        self.inner.holds(seq, fixed, blob)
    }
}
