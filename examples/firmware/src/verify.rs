//! The mirror's checks:
//!
//! - [`CheckingSink`], as the mirror writes: every record it writes, from the first to the
//!   last (those around the GAP after the stall included), is an intact sample for its
//!   sequence, sequences only grow, and the record reads back from the mirror ring as
//!   written. The sample's own checksum is what catches a corrupted record here: the byte
//!   pipe has none (see the README).
//! - [`same_window`], at the end: the mirror ring holds the source ring's retained window,
//!   slot for slot, and a reader of the mirror gets those records intact.

use ringwire_core::broadcast::{Consumer, StartMode};
use ringwire_core::replicate::{Holds, RecordSink, RegionSink, SinkError};
use ringwire_core::sync::Ordering;
use ringwire_core::{Geometry, RingView, SlotRead, oldest_retained};

use crate::sample::{self, Sample};

/// Where the mirror went wrong.
#[derive(Clone, Copy, Debug)]
#[allow(dead_code)] // the fields are read through Debug when the failure is printed
pub enum Mismatch {
    /// Different slot count or stride.
    Shape,
    /// Different newest sequence.
    WriteSeq { source: u64, mirror: u64 },
    /// The slot of `seq` holds a different sequence word in one of the rings.
    SlotSeq { seq: u64, source: u64, mirror: u64 },
    /// The record `seq` could not be read cleanly from one of the rings.
    Unreadable { seq: u64 },
    /// The payloads of `seq` differ, or are not the sample written as `seq`.
    Payload { seq: u64 },
    /// A reader of the mirror got something other than the window, in order.
    MirrorRead { expected: u64, got: Option<u64> },
    /// The mirror wrote `seq` after `after`: out of order or twice.
    Order { after: u64, seq: u64 },
    /// The record the mirror wrote under `seq` does not read back from its ring as written.
    WrittenBack { seq: u64 },
}

/// The mirror's [`RegionSink`], checking every record the mirror writes through it (see
/// the module docs). The first failed check is kept for [`CheckingSink::result`]; the
/// record is still written, so the run goes on as it would without the check.
pub struct CheckingSink {
    inner: RegionSink,
    /// The last sequence written (0: none yet).
    last: u64,
    checked: u64,
    failed: Option<Mismatch>,
}

impl CheckingSink {
    /// Wraps the mirror's sink.
    pub fn new(inner: RegionSink) -> CheckingSink {
        CheckingSink {
            inner,
            last: 0,
            checked: 0,
            failed: None,
        }
    }

    /// The mirror ring, once the handshake created it.
    pub fn view(&self) -> Option<&RingView> {
        self.inner.view()
    }

    /// How many records the mirror wrote, all checked; or the first that failed.
    pub fn result(&self) -> Result<u64, Mismatch> {
        match self.failed {
            Some(m) => Err(m),
            None => Ok(self.checked),
        }
    }

    fn check(&self, seq: u64, fixed: &[u8], blob: &[u8]) -> Result<(), Mismatch> {
        if seq <= self.last {
            return Err(Mismatch::Order {
                after: self.last,
                seq,
            });
        }
        let Ok(bytes) = <&[u8; sample::LEN]>::try_from(fixed) else {
            return Err(Mismatch::Payload { seq });
        };
        if !blob.is_empty() || !Sample::from_bytes(bytes).is_valid_for(seq) {
            return Err(Mismatch::Payload { seq });
        }
        // The sink's own view, taken after any recreate and not kept: the mirror is the
        // ring's only user (the sink's safety contract in `link`).
        let mut back = [0u8; sample::LEN];
        match self.inner.view() {
            Some(v) if v.read_slot(seq, &mut back) == SlotRead::Ok && back == *bytes => Ok(()),
            _ => Err(Mismatch::WrittenBack { seq }),
        }
    }
}

impl RecordSink for CheckingSink {
    fn existing(&self) -> Option<(Geometry, u64)> {
        self.inner.existing()
    }
    fn recreate(&mut self, geo: &Geometry) -> Result<(), SinkError> {
        // A new ring numbers from wherever the source says; order is checked within a ring.
        self.last = 0;
        self.inner.recreate(geo)
    }
    fn write(&mut self, seq: u64, fixed: &[u8], blob: &[u8]) {
        self.inner.write(seq, fixed, blob);
        self.checked += 1;
        if self.failed.is_none()
            && let Err(m) = self.check(seq, fixed, blob)
        {
            self.failed = Some(m);
        }
        self.last = seq;
    }
    fn publish(&mut self, seq: u64) {
        self.inner.publish(seq);
    }
    fn holds(&self, seq: u64, fixed: &[u8], blob: &[u8]) -> Holds {
        self.inner.holds(seq, fixed, blob)
    }
}

/// Compares the retained windows of `source` and `mirror`; returns the window.
pub fn same_window(source: &RingView, mirror: &RingView) -> Result<(u64, u64), Mismatch> {
    let (sg, mg) = (source.geometry(), mirror.geometry());
    if sg.capacity != mg.capacity || sg.element_size != mg.element_size {
        return Err(Mismatch::Shape);
    }
    // Acquire: slots up to write_seq are visible (both writers have stopped by now anyway).
    let w = source.write_seq().load(Ordering::Acquire);
    let wm = mirror.write_seq().load(Ordering::Acquire);
    if w != wm {
        return Err(Mismatch::WriteSeq {
            source: w,
            mirror: wm,
        });
    }
    let oldest = oldest_retained(w, sg.capacity);
    for seq in oldest..=w {
        let (s, m) = (
            source.slot_seq(seq).load(Ordering::Acquire),
            mirror.slot_seq(seq).load(Ordering::Acquire),
        );
        if s != seq || m != seq {
            return Err(Mismatch::SlotSeq {
                seq,
                source: s,
                mirror: m,
            });
        }
        let (mut a, mut b) = ([0u8; sample::LEN], [0u8; sample::LEN]);
        if source.read_slot(seq, &mut a) != SlotRead::Ok
            || mirror.read_slot(seq, &mut b) != SlotRead::Ok
        {
            return Err(Mismatch::Unreadable { seq });
        }
        if a != b || !Sample::from_bytes(&b).is_valid_for(seq) {
            return Err(Mismatch::Payload { seq });
        }
    }
    // And through the API a mirror-side application would use: a consumer from the oldest.
    let mut c = Consumer::new(*mirror, StartMode::Oldest);
    let mut buf = [0u8; sample::LEN];
    for expected in oldest..=w {
        let got = c.try_recv(&mut buf);
        if got != Some(expected) || !Sample::from_bytes(&buf).is_valid_for(expected) {
            return Err(Mismatch::MirrorRead { expected, got });
        }
    }
    if let Some(extra) = c.try_recv(&mut buf) {
        return Err(Mismatch::MirrorRead {
            expected: w + 1,
            got: Some(extra),
        });
    }
    Ok((oldest, w))
}
