//! `ringwire dump <PATH> [--tail N] [--hex]` (spec §26). On a blob ring each record's line
//! also previews its blob, or says it was overwritten in the arena; on a mirror ring
//! (SPARSE) a record the mirror never received is shown as a hole. A `write_seq` at or past
//! 2^63 (a corrupt header every producer refuses), or an MPMC ring's at or past its
//! `claim_seq` (no producer publishes a ticket it has not claimed), is an error naming it:
//! the window it would define holds records never published.

use std::io::Write;
use std::path::Path;

use ringwire_core::SlotRead;
use ringwire_core::layout::{Flags, SLOT_WRITING, oldest_retained};

use super::out_err;
use crate::error::Result;
use crate::file::{BlobLost, ReadOnlyRing};

fn preview(bytes: &[u8], hex: bool) -> String {
    if hex {
        let n = bytes.len().min(16);
        let h: Vec<String> = bytes[..n].iter().map(|b| format!("{b:02X}")).collect();
        format!("{} ({} bytes)", h.join(" "), bytes.len())
    } else {
        let n = bytes.len().min(32);
        let s: String = bytes[..n]
            .iter()
            .map(|&b| {
                if (0x20..0x7f).contains(&b) {
                    b as char
                } else {
                    '.'
                }
            })
            .collect();
        format!("\"{s}\" ({} bytes)", bytes.len())
    }
}

pub(super) fn run(path: &Path, tail: u64, hex: bool, out: &mut dyn Write) -> Result<()> {
    let ring = ReadOnlyRing::open(path)?;
    let oe = out_err();
    let g = *ring.geometry();
    // A write_seq every producer refuses, or an MPMC ring's past its claim_seq, is a
    // corrupt header: it places no record.
    let newest = ring.checked_write_seq()?;
    if newest == 0 {
        return writeln!(
            out,
            "ring {} is empty (write_seq 0)",
            crate::shown::path(path)
        )
        .map_err(oe);
    }
    let oldest = oldest_retained(newest, g.capacity);
    let first = newest.saturating_sub(tail - 1).max(oldest).max(1);
    let sparse = g.flags.has(Flags::SPARSE);
    let mut buf = vec![0u8; g.record_len()];
    for seq in first..=newest {
        let word = ring.slot_seq_word(seq);
        let word_s = if word == SLOT_WRITING {
            "WRITING".to_string()
        } else {
            word.to_string()
        };
        let body = match ring.read_slot(seq, &mut buf) {
            SlotRead::Ok => match ring.read_blob(&buf) {
                None => preview(&buf, hex),
                Some(Ok(blob)) => format!("{} blob {}", preview(&buf, hex), preview(&blob, hex)),
                Some(Err(BlobLost)) => format!("{} blob (overwritten)", preview(&buf, hex)),
            },
            // write_seq has passed every sequence shown: on a ring with one writer, the
            // write marker is a later lap's write, or a writer that died mid-write.
            SlotRead::Pending if ring.ring().rewritten_under(seq).is_some() => {
                "(lost: its slot is being rewritten, or was left mid-write by a writer that died)"
                    .to_string()
            }
            // A mirror ring (SPARSE) publishes past the records it never received: a slot
            // still holding an older sequence is a hole, which its readers skip.
            SlotRead::Pending if sparse && word != SLOT_WRITING && word < seq => {
                "(hole: a record this mirror ring never received; readers skip it)".to_string()
            }
            SlotRead::Pending => "(not published yet)".to_string(),
            SlotRead::Overwritten { seen } => format!("(overwritten by {seen})"),
        };
        writeln!(
            out,
            "seq {seq} slot {} seq_word {word_s} {body}",
            seq & g.mask()
        )
        .map_err(&oe)?;
    }
    Ok(())
}
