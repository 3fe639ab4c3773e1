//! The narrow interfaces between the replication state machines and rings: a
//! [`RecordSource`] the source reads raw records from, and a [`RecordSink`] the mirror
//! writes them into, both implemented here over [`RingView`] for fixed-record and blob rings.

use core::fmt;

use zerocopy::{FromBytes, IntoBytes};

use crate::broadcast::blob::{
    BLOB_REF_LEN, BlobRead, descriptor_to_wire, read_blob, reserve, split_descriptor,
    split_wire_descriptor, write_blob,
};
use crate::error::InitError;
use crate::layout::{
    BlobRef, Flags, Geometry, LaterSeq, SEQ_LIMIT, SLOT_WRITING, later_seq, oldest_retained,
};
use crate::region::Region;
use crate::ring::{Expect, RingView, SlotRead};
use crate::sync::Ordering;
use crate::wire::RecordFormat;

use super::mirror::Start;

/// Outcome of reading one raw record for sending (spec §20.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadRecord {
    /// The record is in `dst[..n]`.
    Ok(usize),
    /// Not published yet.
    Pending,
    /// Overwritten; `seen` is the sequence found (0 if a write was in flight). A slot at or
    /// below `write_seq` found being rewritten on a single-writer ring is overwritten too
    /// (see [`RingSource`]); `seen` is then the earliest sequence that rewrite can be.
    Overwritten {
        /// The sequence seen.
        seen: u64,
    },
    /// The record cannot be sent (a blob out of bounds or overwritten in the arena).
    Lost,
    /// `dst` is smaller than the record's `need` bytes.
    TooLarge {
        /// Bytes the record takes.
        need: usize,
    },
}

/// Most slots [`RecordSource::hole_end`] looks at in one call on a [`RingSource`]: a
/// longer hole is passed in steps of this many (a GAP, or a skip on UDP, each), so that
/// the work of one answer stays bounded whatever the ring's capacity.
pub(crate) const HOLE_SCAN: u64 = 4096;

/// A ring the source reads raw records from.
pub trait RecordSource {
    /// The ring's layout (sent in GEOMETRY).
    fn geometry(&self) -> Geometry;
    /// The current `write_seq` (acquire).
    fn write_seq(&self) -> u64;
    /// Copies record `seq` as it goes on the wire into the front of `dst` (spec §18.4: on
    /// a blob ring the descriptor, its BlobRef little-endian, then the blob).
    fn read_record(&self, seq: u64, dst: &mut [u8]) -> ReadRecord;
    /// `oldest_retained(write_seq, capacity)`.
    fn oldest(&self) -> u64 {
        oldest_retained(self.write_seq(), self.geometry().capacity)
    }
    /// The wire record format.
    fn format(&self) -> RecordFormat {
        RecordFormat::of(&self.geometry())
    }
    /// If record `seq`, found [`ReadRecord::Pending`], is a hole that will never be
    /// written, the sequence after the hole: the first the ring may still deliver (or, for
    /// a long hole, a sequence inside it up to which everything is hole, where the caller
    /// asks again: [`RingSource`] looks at a bounded number of slots per call). `None`
    /// when `seq` may yet be published (the default: a ring without holes).
    ///
    /// A source that took such a hole for a record not published yet would wait at it
    /// until the ring's writer laps the slot, forever if the writer stops there: see
    /// [`RingSource`]'s answer for sparse mirror rings.
    fn hole_end(&self, seq: u64) -> Option<u64> {
        let _ = seq;
        None
    }
}

/// A ring read as the source sends it (spec §20.1): the §4.3 tear-free protocol on the
/// slot bytes `[8, S)`, and for a blob ring the descriptor followed by its blob, copied with
/// the bounds and lap tests of §10.4 (a blob that is out of bounds or overwritten is
/// [`ReadRecord::Lost`]).
///
/// Beyond the reference: on a sparse ring (`FLAG_SPARSE`, a mirror ring served onward)
/// [`RecordSource::hole_end`] finds holes as the §7 reader does. A mirror leaves holes
/// where it skipped sequences (a GAP, a jump ahead, a blob its arena cannot hold), and a
/// mirror ring created mid-stream (a start past 1, or recreated for a restarted source at
/// the sequence it had reached) has its slots below its first record never written, while
/// a start cursor from `oldest_retained` (§19.1, a mirror of it asking for the oldest or
/// resuming behind it) can lie there. ringfire's server reads such a hole as a record not
/// published yet (§4.3, §20.1) and waits at it until the writer laps the slot; its mirror
/// then never catches up with a writer that stopped.
///
/// Also beyond the reference: on a ring that is not MPMC-flagged, a slot at or below
/// `write_seq` that holds the write marker is [`ReadRecord::Overwritten`], not pending. Its
/// single writer stored the record's sequence there before it published `write_seq` past
/// it, so the marker belongs to a later lap's write of the slot: in progress, or never to
/// end if that writer died mid-write. The record is gone either way, and the source sends a
/// GAP past it (§20.2 lap rule, with `seen` = the record's sequence plus the capacity, the
/// earliest that rewrite can be) instead of waiting at it for ever with the records behind
/// it unsent. On an MPMC-flagged ring `write_seq` is the highest ticket published, and a
/// marked slot below it may be a ticket still being written: pending, as in §4.3.
#[derive(Clone, Debug)]
#[cfg_attr(not(loom), derive(Copy))]
pub struct RingSource(pub RingView);

impl RecordSource for RingSource {
    fn geometry(&self) -> Geometry {
        *self.0.geometry()
    }
    fn write_seq(&self) -> u64 {
        // Acquire: records up to the value read are visible to the reads that follow.
        self.0.write_seq().load(Ordering::Acquire)
    }
    fn read_record(&self, seq: u64, dst: &mut [u8]) -> ReadRecord {
        let p = self.0.geometry().record_len();
        let Some((d, rest)) = dst.split_at_mut_checked(p) else {
            return ReadRecord::TooLarge { need: p };
        };
        match self.0.read_slot(seq, d) {
            SlotRead::Ok if !self.0.geometry().has_arena() => ReadRecord::Ok(p),
            SlotRead::Ok => read_blob_after(&self.0, d, rest),
            SlotRead::Pending => self.pending(seq),
            SlotRead::Overwritten { seen } => self.overwritten(seq, seen),
        }
    }
    /// Hole detection on sparse rings, as the §7 reader does (steps 1–3). A mirror writes
    /// sequences in increasing order and publishes `write_seq` after the records up to it,
    /// so a slot at or below `write_seq` (loaded first) that holds an older sequence than
    /// the one asked for will never hold it.
    fn hole_end(&self, seq: u64) -> Option<u64> {
        let v = &self.0;
        let geo = v.geometry();
        if !geo.flags.has(Flags::SPARSE) {
            return None;
        }
        // Acquire: every record the writer wrote at or below `w` is visible to the slot
        // loads below (it published `w` with a release store after writing them).
        let w = v.write_seq().load(Ordering::Acquire);
        // Only a corrupt header holds a write_seq at SEQ_LIMIT or past it: no skipping there
        // (the sequence after a hole could not be named).
        if w < seq || w >= SEQ_LIMIT {
            return None;
        }
        // Acquire, as the §4.3 reader: a slot found holding `s` is then readable.
        let seen = v.slot_seq(seq).load(Ordering::Acquire);
        if seen == SLOT_WRITING || seen >= seq {
            return None;
        }
        // From the oldest the ring retains, past `seq`, at most HOLE_SCAN slots: every slot
        // looked at that does not hold its own sequence is a hole too (as `seq`'s), so the
        // hole reaches at least past the last one, where the next call goes on.
        let start = oldest_retained(w, geo.capacity).max(seq.saturating_add(1));
        let last = w.min(start.saturating_add(HOLE_SCAN - 1));
        let next = (start..=last)
            .find(|&s| v.slot_seq(s).load(Ordering::Acquire) == s)
            .unwrap_or(last + 1);
        Some(next)
    }
}

impl RingSource {
    /// The verdict on record `seq` whose slot holds the later sequence `seen`: overwritten,
    /// unless no lap of the ring could have stored `seen` there. A single writer stores a
    /// sequence at most a lap past the `write_seq` loaded after it (its batch fills at most
    /// the ring), an MPMC ring's producers none at or past `claim_seq` (tickets in flight
    /// may be more than a lap past `write_seq`: [`RingView::newest_writable`]), and no
    /// writer one at or past [`SEQ_LIMIT`]. A slot
    /// holding another value is corrupt, and read as a lap it moved the reader to that
    /// value's oldest retained sequence: a GAP far ahead, after which the reader (the UDP
    /// sender for every UDP mirror) sent nothing more, `write_seq` never getting there. The
    /// record is [`ReadRecord::Lost`] once published, and [`ReadRecord::Pending`] before
    /// (its writer stores the right sequence there when it writes it).
    ///
    /// A mirror writes such slots too: it writes every record of a DATA frame before its
    /// one publish, and a frame may hold more records than the ring (a tiny source ring, a
    /// fast producer). A record behind the oldest that `write_seq` leaves in the ring is
    /// overwritten whatever its slot holds, so it is [`ReadRecord::Overwritten`] with
    /// `seen` = `write_seq`, and the reader skips to that oldest record at once, as the
    /// §4.3 reader's lap rule moves it there. Taken as lost alone, it moved the reader one
    /// record at a time, a TCP session sending a GAP for each (thousands for a session
    /// that far behind) until the mirror's publish.
    #[cold]
    fn overwritten(&self, seq: u64, seen: u64) -> ReadRecord {
        let w = self.write_seq();
        match later_seq(seq, seen, w, self.0.newest_writable(w), self.0.capacity()) {
            LaterSeq::Lap => ReadRecord::Overwritten { seen },
            LaterSeq::Behind { .. } => ReadRecord::Overwritten { seen: w },
            LaterSeq::Lost => ReadRecord::Lost,
            LaterSeq::NotYet => ReadRecord::Pending,
        }
    }

    /// The verdict on record `seq` found pending: [`ReadRecord::Overwritten`] when its slot
    /// is being rewritten for a later lap on a single-writer ring (see [`RingSource`]),
    /// otherwise [`ReadRecord::Pending`].
    #[cold]
    fn pending(&self, seq: u64) -> ReadRecord {
        match self.0.rewritten_under(seq) {
            Some(_) => ReadRecord::Overwritten {
                seen: seq.saturating_add(self.0.capacity()),
            },
            // Not published yet, published since, or a hole of a sparse ring: the caller
            // reads again (or asks `hole_end`).
            None => ReadRecord::Pending,
        }
    }
}

/// The blob of the descriptor `d` (a whole slot payload) copied into `rest`, and the
/// descriptor's BlobRef put in wire order (little-endian; the slot holds it in the host's).
fn read_blob_after(view: &RingView, d: &mut [u8], rest: &mut [u8]) -> ReadRecord {
    let Some((_, r)) = split_descriptor(d) else {
        return ReadRecord::Lost;
    };
    match read_blob(view, &r, rest) {
        BlobRead::Ok(n) => {
            // Cannot fail: `d` holds a BlobRef (split above).
            descriptor_to_wire(d);
            ReadRecord::Ok(d.len() + n)
        }
        BlobRead::Lost => ReadRecord::Lost,
        BlobRead::BufferTooSmall { need } => ReadRecord::TooLarge {
            need: d.len() + need as usize,
        },
    }
}

/// Writes one received record into a mirror ring (spec §21.2 steps 1–4): a fixed record's
/// bytes as they came; for a blob ring, the blob into this ring's own arena first, then the
/// source's descriptor with its last 16 bytes replaced by the new [`BlobRef`] (same length
/// and flags, this arena's offset; a zero-length blob is `{0, 0, 0}`), in the host's byte
/// order where the frame had it little-endian. A blob this arena
/// cannot hold (longer than the arena, from a corrupt or hostile source) is not written:
/// the sequence stays a hole, which readers skip (§7).
pub fn write_received(view: &RingView, seq: u64, fixed: &[u8], blob: &[u8]) {
    if !view.geometry().has_arena() {
        view.write_slot(seq, fixed);
        return;
    }
    let Some((meta, src)) = split_wire_descriptor(fixed) else {
        return;
    };
    let Ok(r) = reserve(view, blob.len(), src.flags) else {
        return;
    };
    if write_blob(view, &r, blob).is_err() {
        return;
    }
    view.write_slot_pieces(seq, meta, r.as_bytes());
}

/// Whether a mirror ring holds a record with given bytes under a sequence
/// ([`RecordSink::holds`]): how a resuming mirror tells a source that continues the ring
/// it mirrored from one that restarted with a new ring and numbers from 1 again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Holds {
    /// The ring holds the record under that sequence, byte for byte.
    Same,
    /// The ring holds another record under that sequence.
    Different,
    /// The ring cannot tell: it does not hold that sequence (any more), or the sink cannot
    /// read its records back.
    Unknown,
}

/// Bytes compared per step by [`compare_received`]: it reads the ring in pieces this long,
/// so comparing a record of any length takes no allocation.
const COMPARE_CHUNK: usize = 256;

/// Whether the mirror ring `view` holds record `seq` as it came on the wire (spec §18.4):
/// `fixed` is the slot payload, and on a blob ring the source's descriptor, whose blob
/// `blob` is (the inverse of [`write_received`]).
///
/// On a blob ring the meta bytes, the blob's length, its flags (unless it is empty:
/// [`write_received`] writes `{0, 0, 0}` then) and the blob's bytes in this ring's arena
/// are compared. If the arena no longer holds the blob intact (only blobs reserved after
/// it can have overwritten it), the verdict rests on the descriptor alone.
///
/// Only the ring's writer may call this: the record is read in pieces, each checked
/// against the slot's sequence word, so a write to the slot between two pieces would go
/// unnoticed.
pub fn compare_received(view: &RingView, seq: u64, fixed: &[u8], blob: &[u8]) -> Holds {
    let geo = view.geometry();
    if fixed.len() != geo.record_len() {
        return Holds::Different;
    }
    let (meta, theirs) = if geo.has_arena() {
        match split_wire_descriptor(fixed) {
            Some((meta, r)) => (meta, Some(r)),
            // Validation guarantees room for a BlobRef in a blob ring's records.
            None => return Holds::Unknown,
        }
    } else {
        (fixed, None)
    };
    // The sequence word alone first: a record may have no payload bytes at all.
    match view.read_slot(seq, &mut []) {
        SlotRead::Ok => {}
        SlotRead::Pending | SlotRead::Overwritten { .. } => return Holds::Unknown,
    }
    let mut buf = [0u8; COMPARE_CHUNK];
    let mut off = 0;
    for want in meta.chunks(COMPARE_CHUNK) {
        let got = &mut buf[..want.len()];
        // Offsets stay multiples of 8: every chunk but the last is COMPARE_CHUNK long.
        match view.read_slot_at(seq, 8 + off, got) {
            SlotRead::Ok if got == want => off += want.len(),
            SlotRead::Ok => return Holds::Different,
            SlotRead::Pending | SlotRead::Overwritten { .. } => return Holds::Unknown,
        }
    }
    let Some(theirs) = theirs else {
        return Holds::Same;
    };
    let mut tail = [0u8; BLOB_REF_LEN];
    match view.read_slot_at(seq, 8 + off, &mut tail) {
        SlotRead::Ok => {}
        SlotRead::Pending | SlotRead::Overwritten { .. } => return Holds::Unknown,
    }
    let Ok(ours) = BlobRef::read_from_bytes(&tail[..]) else {
        return Holds::Unknown;
    };
    if ours.len as usize != blob.len() || (!blob.is_empty() && ours.flags != theirs.flags) {
        return Holds::Different;
    }
    let mut at = 0usize;
    for want in blob.chunks(COMPARE_CHUNK) {
        // A piece of the blob is a blob of its own for `read_blob`: its bounds and lap
        // tests then cover exactly the bytes read.
        let Some(offset) = ours.offset.checked_add(at as u64) else {
            return Holds::Same;
        };
        let piece = BlobRef {
            offset,
            len: want.len() as u32,
            flags: ours.flags,
        };
        match read_blob(view, &piece, &mut buf) {
            BlobRead::Ok(_) if &buf[..want.len()] == want => at += want.len(),
            BlobRead::Ok(_) => return Holds::Different,
            // Overwritten in this arena since (or a descriptor this ring never wrote):
            // the descriptor matched, and that is all that can be compared.
            BlobRead::Lost | BlobRead::BufferTooSmall { .. } => return Holds::Same,
        }
    }
    Holds::Same
}

/// Why a mirror cannot (re)create its ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum SinkError {
    /// Initialising the ring failed (too small a region, inconsistent layout).
    Init(InitError),
    /// The sink's storage failed (a file that could not be created, locked or mapped);
    /// the sink keeps the detail.
    Storage,
}

impl fmt::Display for SinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SinkError::Init(e) => write!(f, "cannot create the mirror ring: {e}"),
            SinkError::Storage => f.write_str("cannot create the mirror ring's storage"),
        }
    }
}

// No `source`: the text above already includes the wrapped error's.
impl core::error::Error for SinkError {}

/// Why a mirror replaces the ring its sink holds ([`RecordSink::replacing`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Replace {
    /// The mirror was asked to start at `Start` (latest, oldest or a sequence), not to
    /// resume: a fresh ring whatever the one held.
    FreshStart(Start),
    /// GEOMETRY carried RESET (spec §19.1): the source's ring holds fewer records than the
    /// mirror asked for, so it restarted; `source_next` is the GEOMETRY's `seq`.
    Reset {
        /// The next record the source will send.
        source_next: u64,
    },
    /// The source's layout (capacity, element size, schema, registry, offsets, arena) is
    /// not the held ring's (spec §21.1).
    Layout,
    /// The held ring lacks [`Flags::SPARSE`]: its readers would take every hole the mirror
    /// leaves (a GAP, a jump) for a record being written and stall there. Beyond spec
    /// §21.1, which compares no flags.
    NotSparse,
    /// TCP DATA numbered below the next record expected (spec §21.3): the source restarted.
    Backwards {
        /// The DATA's first sequence.
        seq: u64,
        /// The sequence the mirror expected.
        next: u64,
    },
    /// The resume check found the source's record `seq` is not the one the ring holds:
    /// the source restarted with a new ring (see [`Mirror`](crate::replicate::Mirror)).
    Differs {
        /// The record compared.
        seq: u64,
    },
}

/// The ring a mirror writes into.
pub trait RecordSink {
    /// Geometry and `write_seq` of the ring the mirror holds now, if any (resume, §21.1).
    fn existing(&self) -> Option<(Geometry, u64)>;
    /// Replaces the ring with a fresh one of layout `geo` (spec §21.1 creation).
    fn recreate(&mut self, geo: &Geometry) -> Result<(), SinkError>;
    /// Called with the reason just before [`RecordSink::recreate`] replaces the ring that
    /// [`RecordSink::existing`] returns (not before a first creation), so a sink can say
    /// which ring it replaces and why. The default does nothing.
    fn replacing(&mut self, why: Replace) {
        let _ = why;
    }
    /// Writes one record under `seq` (§4.2 steps 1–4; blob rings reserve and copy `blob`).
    fn write(&mut self, seq: u64, fixed: &[u8], blob: &[u8]);
    /// Publishes `seq` as `write_seq` and wakes readers (§4.2 steps 5–6).
    fn publish(&mut self, seq: u64);
    /// Whether the ring holds record `seq` with these wire bytes (`fixed` and `blob` as for
    /// [`RecordSink::write`]). A resuming mirror asks this of the last record it holds
    /// when the source sends that record again; [`compare_received`] answers it for a
    /// ring in memory. The default, [`Holds::Unknown`], leaves every resume unchecked, as
    /// the reference mirror does.
    fn holds(&self, seq: u64, fixed: &[u8], blob: &[u8]) -> Holds {
        let _ = (seq, fixed, blob);
        Holds::Unknown
    }
}

/// A mirror ring in caller memory (a mapped file, a static buffer).
#[derive(Debug)]
pub struct RegionSink {
    region: Region,
    view: Option<RingView>,
    wake: bool,
}

impl RegionSink {
    /// Wraps `region`, adopting a valid ring already in it (resume).
    ///
    /// # Safety
    /// The sink re-initialises `region` (as [`RingView::init`]) each time it recreates its
    /// ring, that is on every call of [`RecordSink::recreate`] on it. A
    /// [`Mirror`](crate::replicate::Mirror) makes that call from
    /// [`handle_tcp_frame`](crate::replicate::Mirror::handle_tcp_frame): at the end of
    /// every handshake, unless it starts with [`Start::Resume`](crate::replicate::Start)
    /// and the source's geometry and numbering continue the ring the sink holds (which has
    /// [`Flags::SPARSE`], as every ring a mirror creates); and when
    /// live on TCP, when a DATA or HEARTBEAT shows that the source's ring restarted. A
    /// resuming mirror also makes it from
    /// [`handle_datagram`](crate::replicate::Mirror::handle_datagram) (and so
    /// [`handle_datagrams`](crate::replicate::Mirror::handle_datagrams)) when the source's
    /// copy of the last record held differs from the sink's
    /// ([`pending_resume_check`](crate::replicate::Mirror::pending_resume_check)). So, for
    /// as long as the sink exists:
    ///
    /// - no other view or access of the region's memory (a reader of the mirror ring or
    ///   any other, in this thread or another) may be in use while a call that may
    ///   recreate runs: readers must not exist, or must be stopped around those calls (in
    ///   one thread, not interleaved with them). Other processes and devices, outside the
    ///   Rust abstract machine, are the caller's protocol concern, as for
    ///   [`Region::from_raw_parts`];
    /// - after a recreate, no view of the region made before it (a copy of the sink's
    ///   earlier [`view`](RegionSink::view) included) may be used unless its geometry is the
    ///   one the ring was recreated with; a view of a queue or blackboard never may.
    ///
    /// `new` itself only reads the region (to adopt a ring), as [`RingView::attach`] does.
    #[allow(clippy::clone_on_copy)] // Region is Clone-only under loom.
    pub unsafe fn new(region: Region) -> RegionSink {
        let view = RingView::attach(region.clone(), Expect::RAW).ok();
        RegionSink {
            region,
            view,
            wake: false,
        }
    }
    /// The ring, once created or adopted.
    pub fn view(&self) -> Option<&RingView> {
        self.view.as_ref()
    }
    /// True once if a publish found sleeping readers (the driver then issues FUTEX_WAKE).
    pub fn take_wake(&mut self) -> bool {
        core::mem::take(&mut self.wake)
    }
}

impl RecordSink for RegionSink {
    fn existing(&self) -> Option<(Geometry, u64)> {
        let v = self.view.as_ref()?;
        // Relaxed: only the mirror itself writes this ring's write_seq.
        Some((*v.geometry(), v.write_seq().load(Ordering::Relaxed)))
    }
    #[allow(clippy::clone_on_copy)] // Region is Clone-only under loom.
    fn recreate(&mut self, geo: &Geometry) -> Result<(), SinkError> {
        self.view = None;
        // SAFETY: the contract of `RegionSink::new`: nothing else accesses the region while
        // a call that may recreate runs, and views of it made before for another layout are
        // not used after.
        let view = unsafe { RingView::init(self.region.clone(), geo) };
        self.view = Some(view.map_err(SinkError::Init)?);
        Ok(())
    }
    fn write(&mut self, seq: u64, fixed: &[u8], blob: &[u8]) {
        if let Some(v) = &self.view {
            write_received(v, seq, fixed, blob);
        }
    }
    fn publish(&mut self, seq: u64) {
        if let Some(v) = &self.view {
            self.wake |= v.publish(seq);
        }
    }
    fn holds(&self, seq: u64, fixed: &[u8], blob: &[u8]) -> Holds {
        self.view
            .as_ref()
            .map_or(Holds::Unknown, |v| compare_received(v, seq, fixed, blob))
    }
}
