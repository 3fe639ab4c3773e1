//! `ringwire dump <PATH> [--tail N] [--hex]` (spec §26). On a blob ring each record's line
//! also previews its blob, or says it was overwritten in the arena; on a mirror ring
//! (SPARSE) a record the mirror never received is shown as a hole. A `write_seq` at or past
//! 2^63 (a corrupt header every producer refuses), or an MPMC ring's at or past its
//! `claim_seq` (no producer publishes a ticket it has not claimed), is an error naming it:
//! the window it would define holds records never published. On a ring being written, each
//! line's `seq_word` is the word its verdict was drawn from, in one look at the slot. A
//! slot holding a word no writer leaves there (another slot's sequence, or one at or past
//! 2^63) is named corrupt, not taken for a later lap's write.

use std::io::Write;
use std::path::Path;

use ringwire_core::SlotRead;
use ringwire_core::layout::{Flags, SEQ_LIMIT, SLOT_WRITING, oldest_retained};

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

/// Whether `word`, the sequence word of record `seq`'s slot (`mask` the ring's), is one no
/// writer of any ring leaves there: each stores the write marker or a sequence of that
/// slot (congruent to `seq` modulo the capacity), below 2^63; 0 is a slot never written.
fn corrupt_word(word: u64, seq: u64, mask: u64) -> bool {
    word != SLOT_WRITING && word != 0 && (word >= SEQ_LIMIT || word & mask != seq & mask)
}

/// Record `seq` read into `buf`, and the slot's sequence word that verdict was drawn from,
/// so that a line never shows a word the verdict contradicts while the ring is written
/// (`seq_word 2043` beside "overwritten by 2059", or "not published yet" for a record the
/// next lap was overwriting). `Ok` comes with `seq`, `Overwritten` with the word it saw
/// (the write marker for `seen: 0`, a write in progress during the copy). `Pending` comes
/// with the word loaded after the read; if that word is a later record's, the record was
/// overwritten meanwhile and is reported so; if it is `seq` itself (an MPMC push that was
/// in flight has landed), the record is read again, up to 3 times.
fn look(ring: &ReadOnlyRing, seq: u64, buf: &mut [u8]) -> (u64, SlotRead) {
    let mut tries = 0;
    loop {
        tries += 1;
        let read = ring.read_slot(seq, buf);
        let word = match read {
            SlotRead::Ok => seq,
            SlotRead::Overwritten { seen: 0 } => SLOT_WRITING,
            SlotRead::Overwritten { seen } => seen,
            SlotRead::Pending => ring.slot_seq_word(seq),
        };
        match read {
            SlotRead::Pending if word != SLOT_WRITING && word > seq => {
                return (word, SlotRead::Overwritten { seen: word });
            }
            SlotRead::Pending if word == seq && tries < 3 => continue,
            _ => return (word, read),
        }
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
    let mpmc = g.flags.has(Flags::MODE_MPMC);
    let mut buf = vec![0u8; g.record_len()];
    for seq in first..=newest {
        let (word, read) = look(&ring, seq, &mut buf);
        let word_s = if word == SLOT_WRITING {
            "WRITING".to_string()
        } else {
            word.to_string()
        };
        let body = match read {
            // No writer leaves this word in this slot: not a later lap's record, nor one
            // not published yet.
            _ if corrupt_word(word, seq, g.mask()) => format!(
                "(corrupt: slot {} holds sequence {word}, which no write of it leaves)",
                seq & g.mask()
            ),
            SlotRead::Ok => match ring.read_blob(&buf) {
                None => preview(&buf, hex),
                Some(Ok(blob)) => format!("{} blob {}", preview(&buf, hex), preview(&blob, hex)),
                Some(Err(BlobLost)) => format!("{} blob (overwritten)", preview(&buf, hex)),
            },
            // A write of the slot began while the record was copied: a later lap's.
            SlotRead::Overwritten { seen: 0 } => {
                "(overwritten while it was read: a later write of its slot began)".to_string()
            }
            SlotRead::Overwritten { seen } => format!("(overwritten by {seen})"),
            // write_seq has passed every sequence shown: on a ring with one writer, the
            // write marker is a later lap's write, or a writer that died mid-write.
            SlotRead::Pending if word == SLOT_WRITING && !mpmc => {
                "(lost: its slot is being rewritten, or was left mid-write by a writer that died)"
                    .to_string()
            }
            // A mirror ring (SPARSE) publishes past the records it never received: a slot
            // still holding an older sequence is a hole, which its readers skip.
            SlotRead::Pending if sparse && word != SLOT_WRITING && word < seq => {
                "(hole: a record this mirror ring never received; readers skip it)".to_string()
            }
            SlotRead::Pending => "(not published yet)".to_string(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_tmp::TmpPath;
    use crate::{CleanupMode, RingProducer};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    /// Whether a line of `dump` is consistent with itself: the slot sequence word it shows
    /// is the one its verdict was drawn from (`seq_word` 7 beside "(overwritten by 23)" is
    /// not), and it never names a sequence 0, which no record has. A single-writer ring
    /// without holes gives only a record, an overwritten one, or one being rewritten.
    fn consistent(line: &str) -> bool {
        let f: Vec<&str> = line.splitn(7, ' ').collect();
        let seq = f.get(1).and_then(|s| s.parse::<u64>().ok());
        let (Some(seq), Some(word), Some(body)) = (seq, f.get(5), f.get(6)) else {
            return false;
        };
        let seen = |w: &str| w.parse::<u64>().ok();
        if body.starts_with('"') {
            return seen(word) == Some(seq);
        }
        if let Some(by) = body
            .strip_prefix("(overwritten by ")
            .and_then(|b| b.strip_suffix(')'))
        {
            return seen(by).is_some_and(|by| by > seq) && seen(word) == seen(by);
        }
        (body.starts_with("(overwritten while") || body.starts_with("(lost:")) && *word == "WRITING"
    }

    /// `dump` of a ring its producer keeps writing: each line's seq_word and verdict come
    /// from one look at the slot. The word was loaded apart from the read that judged the
    /// record, so a write landing between them printed "seq_word 11720 (overwritten by
    /// 11736)" or "seq_word WRITING (overwritten by 11795)", and a record the next lap was
    /// overwriting, 16 behind write_seq, "seq_word 12695 (not published yet)" (the read saw
    /// the write marker, the second look the new record); a write begun during the copy
    /// printed "seq_word 193798 (overwritten by 0)". Without the fix this test failed in
    /// each of 6 runs; with it, no line has failed.
    #[test]
    fn a_ring_written_while_dumped_gives_lines_consistent_with_themselves() {
        let t = TmpPath::shm("dump-live");
        let mut prod = RingProducer::<[u64; 3]>::builder(16)
            .cleanup_mode(CleanupMode::Persistent)
            .build::<[u64; 3], _>(t.path())
            .unwrap();
        prod.push(&[1; 3]);
        let stop = AtomicBool::new(false);
        let (lines, bad) = std::thread::scope(|s| {
            s.spawn(|| {
                let mut i = 0u64;
                // Relaxed: a plain stop flag.
                while !stop.load(Ordering::Relaxed) {
                    prod.push(&[i; 3]);
                    i += 1;
                }
            });
            // Stops the writer however this closure ends: a failed run() must not leave the
            // scope waiting for it for ever.
            let _stop = crate::test_guard::SetOnDrop(&stop);
            let t0 = Instant::now();
            let (mut lines, mut bad) = (0, Vec::new());
            while t0.elapsed() < Duration::from_millis(400) && bad.len() < 5 {
                let mut out = Vec::new();
                run(t.path(), 16, false, &mut out).unwrap();
                for line in String::from_utf8(out).unwrap().lines() {
                    lines += 1;
                    if !consistent(line) {
                        bad.push(line.to_string());
                    }
                }
            }
            (lines, bad)
        });
        assert!(lines > 0);
        assert!(bad.is_empty(), "of {lines} lines: {bad:#?}");
    }
}
