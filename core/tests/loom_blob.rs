//! loom model of the blob arena (spec §10.3, §10.4): a writer reserves, copies and publishes
//! blobs into an arena so small that every blob overwrites the previous one, while a reader
//! receives them. The reader must never accept bytes other than those written for the
//! descriptor it read.
//!
//! Run: `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p ringwire-core
//! --release --test loom_blob` (LOOM_MAX_PREEMPTIONS defaults to 3 here).
#![cfg(loom)]

use loom::thread;
use ringwire_core::broadcast::blob::{self, BlobRead, BlobReader, BlobWriter};
use ringwire_core::{Geometry, Region, RingView};

/// Two slots, no registry slots, a 64-byte arena: each 16-byte blob takes the whole arena
/// (reservations are rounded to 64), so blob n + 1 overwrites blob n word by word.
fn ring() -> RingView {
    let geo = Geometry::blob(2, 32, 0, 64).unwrap();
    let region = Region::loom_new(geo.total_len().unwrap() as usize);
    // SAFETY: a fresh loom region, no other view of it exists yet.
    unsafe { RingView::init(region, &geo) }.unwrap()
}

/// The blob of message `seq`: two words that differ from every other message's, so a copy
/// that mixes two writes is visible.
fn content(seq: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&(seq * 0x0101_0101).to_ne_bytes());
    b[8..].copy_from_slice(&(!seq).to_ne_bytes());
    b
}

fn builder() -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    b
}

fn spawn_writer(view: RingView, n: u64) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut w = BlobWriter::new(view).unwrap();
        for seq in 1..=n {
            let mut d = [0u8; 24];
            d[0] = seq as u8;
            let p = w.push(&mut d, &content(seq), 0).unwrap();
            assert_eq!(p.seq, seq);
        }
    })
}

#[test]
fn reader_never_accepts_a_torn_or_foreign_blob() {
    builder().check(|| {
        let view = ring();
        // Attached before the writer starts (always at 1 with two slots): its load of
        // `write_seq` racing the pushes only multiplied the interleavings.
        let mut r = BlobReader::new(view.clone()).unwrap();
        let writer = spawn_writer(view.clone(), 2);
        let (mut desc, mut out) = ([0u8; 24], [0u8; 16]);
        assert_eq!(r.cursor(), 1);
        let (mut last, mut delivered) = (0, 0);
        for _ in 0..2 {
            if let Some(m) = r.recv(&mut desc, &mut out).unwrap() {
                assert!(
                    m.seq > last,
                    "sequence went backwards: {} after {last}",
                    m.seq
                );
                last = m.seq;
                delivered += 1;
                assert_eq!(m.len, 16);
                assert_eq!(desc[0], m.seq as u8, "descriptor of another message");
                assert_eq!(out, content(m.seq), "blob bytes differ for seq {}", m.seq);
            }
        }
        // Every sequence the reader passed was either delivered or counted as lapped.
        assert_eq!(delivered + r.lapped_count(), r.cursor() - 1);
        writer.join().unwrap();
    });
}

/// The same race one level down: read a descriptor once, then validate its blob with
/// `read_blob` while the writer may be overwriting the arena.
#[test]
fn read_blob_is_exact_or_lost() {
    builder().check(|| {
        let view = ring();
        let writer = spawn_writer(view.clone(), 2);
        let mut desc = [0u8; 24];
        if view.read_slot(1, &mut desc) == ringwire_core::SlotRead::Ok {
            let (_, r) = blob::split_descriptor(&desc).unwrap();
            assert_eq!((r.offset, r.len), (0, 16));
            let mut out = [0u8; 16];
            match blob::read_blob(&view, &r, &mut out) {
                BlobRead::Ok(n) => {
                    assert_eq!(n, 16);
                    assert_eq!(out, content(1));
                }
                BlobRead::Lost => {}
                BlobRead::BufferTooSmall { need } => panic!("buffer too small for {need}"),
            }
        }
        writer.join().unwrap();
        // Once the writer is done blob 1 is gone and blob 2 is intact.
        let mut desc = [0u8; 24];
        assert_eq!(view.read_slot(2, &mut desc), ringwire_core::SlotRead::Ok);
        let (_, r2) = blob::split_descriptor(&desc).unwrap();
        let mut out = [0u8; 16];
        assert_eq!(blob::read_blob(&view, &r2, &mut out), BlobRead::Ok(16));
        assert_eq!(out, content(2));
        let r1 = ringwire_core::layout::BlobRef {
            offset: 0,
            len: 16,
            flags: 0,
        };
        assert_eq!(blob::read_blob(&view, &r1, &mut out), BlobRead::Lost);
    });
}

/// Three pushes into two slots: the reader can now also be lapped in the slot ring (spec
/// §4.3 lap handling) as well as in the arena. It still only accepts exact blobs, and
/// accounts for every sequence it passes.
#[test]
fn reader_lapped_in_slots_and_arena() {
    builder().check(|| {
        let view = ring();
        // Attached before the writer starts, so at 1. Attached during the pushes, it started
        // at 2 only once `write_seq` was 3, the last word the writer writes: a read of a ring no
        // one writes any more, which the end of this model and the model above cover; the load
        // racing the pushes doubled the interleavings (1.35 M to 0.68 M executions without it).
        let mut r = BlobReader::new(view.clone()).unwrap();
        let writer = spawn_writer(view.clone(), 3);
        let start = r.cursor();
        assert_eq!(start, 1);
        let (mut desc, mut out) = ([0u8; 24], [0u8; 16]);
        let mut delivered = 0;
        for _ in 0..2 {
            if let Some(m) = r.recv(&mut desc, &mut out).unwrap() {
                delivered += 1;
                assert_eq!(desc[0], m.seq as u8, "descriptor of another message");
                assert_eq!(out, content(m.seq), "blob bytes differ for seq {}", m.seq);
            }
        }
        assert_eq!(delivered + r.lapped_count(), r.cursor() - start);
        writer.join().unwrap();
        // After the writer is done only message 3 is still readable, and the reader gets
        // there whatever happened before.
        if let Some(m) = r.recv(&mut desc, &mut out).unwrap() {
            assert_eq!(m.seq, 3);
            assert_eq!(out, content(3));
        }
        assert_eq!(r.cursor(), 4);
    });
}
