//! The end-of-run check: the mirror ring holds the source ring's retained window, slot for
//! slot, and a reader of the mirror gets those records intact.

use ringwire_core::broadcast::{Consumer, StartMode};
use ringwire_core::sync::Ordering;
use ringwire_core::{RingView, SlotRead, oldest_retained};

use crate::sample::{self, Sample};

/// Where the two rings differ.
#[derive(Debug)]
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
