//! The narrow interfaces between the replication state machines and rings: a
//! [`RecordSource`] the source reads raw records from, and a [`RecordSink`] the mirror
//! writes them into. Fixed-record rings implement both here over [`RingView`]; blob rings
//! plug in through the same traits.

use core::fmt;

use crate::error::InitError;
use crate::layout::{Geometry, oldest_retained};
use crate::region::Region;
use crate::ring::{Expect, RingView, SlotRead};
use crate::sync::Ordering;
use crate::wire::RecordFormat;

/// Outcome of reading one raw record for sending (spec §20.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadRecord {
    /// The record is in `dst[..n]`.
    Ok(usize),
    /// Not published yet.
    Pending,
    /// Overwritten; `seen` is the sequence found (0 if a write was in flight).
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

/// A ring the source reads raw records from.
pub trait RecordSource {
    /// The ring's layout (sent in GEOMETRY).
    fn geometry(&self) -> Geometry;
    /// The current `write_seq` (acquire).
    fn write_seq(&self) -> u64;
    /// Copies record `seq` as it goes on the wire into the front of `dst`.
    fn read_record(&self, seq: u64, dst: &mut [u8]) -> ReadRecord;
    /// `oldest_retained(write_seq, capacity)`.
    fn oldest(&self) -> u64 {
        oldest_retained(self.write_seq(), self.geometry().capacity)
    }
    /// The wire record format.
    fn format(&self) -> RecordFormat {
        RecordFormat::of(&self.geometry())
    }
}

/// A fixed-record ring read through the §4.3 tear-free protocol.
#[derive(Clone, Debug)]
#[cfg_attr(not(loom), derive(Copy))]
pub struct FixedSource(pub RingView);

impl RecordSource for FixedSource {
    fn geometry(&self) -> Geometry {
        *self.0.geometry()
    }
    fn write_seq(&self) -> u64 {
        // Acquire: records up to the value read are visible to the reads that follow.
        self.0.write_seq().load(Ordering::Acquire)
    }
    fn read_record(&self, seq: u64, dst: &mut [u8]) -> ReadRecord {
        let p = self.0.geometry().record_len();
        let Some(d) = dst.get_mut(..p) else {
            return ReadRecord::TooLarge { need: p };
        };
        match self.0.read_slot(seq, d) {
            SlotRead::Ok => ReadRecord::Ok(p),
            SlotRead::Pending => ReadRecord::Pending,
            SlotRead::Overwritten { seen } => ReadRecord::Overwritten { seen },
        }
    }
}

/// Why a mirror cannot (re)create its ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SinkError {
    /// This sink cannot hold blob rings.
    BlobUnsupported {
        /// The GEOMETRY arena offset.
        arena_offset: u64,
    },
    /// Initialising the ring failed (too small a region, inconsistent layout).
    Init(InitError),
    /// The sink's storage failed (a file that could not be created, locked or mapped);
    /// the sink keeps the detail.
    Storage,
}

impl fmt::Display for SinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SinkError::BlobUnsupported { arena_offset } => write!(
                f,
                "this mirror ring cannot hold blob records (arena_offset {arena_offset})"
            ),
            SinkError::Init(e) => write!(f, "cannot create the mirror ring: {e}"),
            SinkError::Storage => f.write_str("cannot create the mirror ring's storage"),
        }
    }
}

/// The ring a mirror writes into.
pub trait RecordSink {
    /// Geometry and `write_seq` of the ring the mirror holds now, if any (resume, §21.1).
    fn existing(&self) -> Option<(Geometry, u64)>;
    /// Replaces the ring with a fresh one of layout `geo` (spec §21.1 creation).
    fn recreate(&mut self, geo: &Geometry) -> Result<(), SinkError>;
    /// Writes one record under `seq` (§4.2 steps 1–4; blob rings reserve and copy `blob`).
    fn write(&mut self, seq: u64, fixed: &[u8], blob: &[u8]);
    /// Publishes `seq` as `write_seq` and wakes readers (§4.2 steps 5–6).
    fn publish(&mut self, seq: u64);
}

/// A fixed-record mirror ring in caller memory (a mapped file, a static buffer).
#[derive(Debug)]
pub struct RegionSink {
    region: Region,
    view: Option<RingView>,
    wake: bool,
}

impl RegionSink {
    /// Wraps `region`, adopting a valid fixed-record ring already in it (resume).
    #[allow(clippy::clone_on_copy)] // Region is Clone-only under loom.
    pub fn new(region: Region) -> RegionSink {
        let view = RingView::attach(region.clone(), Expect::RAW)
            .ok()
            .filter(|v| !v.geometry().has_arena());
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
        if geo.has_arena() {
            return Err(SinkError::BlobUnsupported {
                arena_offset: geo.arena_offset,
            });
        }
        self.view = None;
        self.view = Some(RingView::init(self.region.clone(), geo).map_err(SinkError::Init)?);
        Ok(())
    }
    fn write(&mut self, seq: u64, fixed: &[u8], _blob: &[u8]) {
        if let Some(v) = &self.view {
            v.write_slot(seq, fixed);
        }
    }
    fn publish(&mut self, seq: u64) {
        if let Some(v) = &self.view {
            self.wake |= v.publish(seq);
        }
    }
}
