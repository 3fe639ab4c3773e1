//! Rings of tagged records for the source-restart tests (`replica_restart`,
//! `replica_hub_restart`): record `seq` of the ring tagged `tag` carries the sequence and
//! then the tag, so two rings' records under one sequence differ, and a census of a mirror
//! ring tells whose records it holds.

use std::path::Path;

use ringwire::core::broadcast::{Producer, Wake};
use ringwire::core::{Geometry, RingView, SlotRead};
use ringwire::{CleanupMode, CreateOptions, ReadOnlyRing, RingFile};

use crate::shm::ShmPath;

/// Payload bytes per record: the sequence, then the ring's tag.
pub const LEN: usize = 24;
/// Slots: more than any ring of these tests publishes, so nothing is lapped and the oldest
/// retained sequence stays 1.
pub const CAP: u64 = 1 << 13;

/// Wakes the ring's futex sleepers after each publish.
pub struct FutexWake;
impl Wake for FutexWake {
    fn wake(&self, view: &RingView) {
        ringwire::wait::wake_all(view);
    }
}

/// Record `seq` of the ring tagged `tag`: same sequence, different bytes per ring.
pub fn record(tag: u8, seq: u64) -> [u8; LEN] {
    let mut r = [tag; LEN];
    r[..8].copy_from_slice(&seq.to_le_bytes());
    r
}

/// A ring with records 1..=n of `tag`, put at `path` whole: created under a temporary name
/// (`{tmp}-{tag}` in /dev/shm) and renamed over whatever is at `path`, as a restarted
/// producer's ring appears to a server that follows the path, with all its records already
/// published. Returns the ring, for more records.
pub fn ring_at(path: &Path, tmp: &str, tag: u8, n: u64) -> RingFile {
    let tmp = ShmPath::new(&format!("{tmp}-{tag}"));
    let geo = Geometry::spmc(CAP, LEN + 8, 8, 0, false).expect("geometry");
    let opts = CreateOptions {
        cleanup: CleanupMode::Persistent,
        ..CreateOptions::default()
    };
    let ring = RingFile::create(tmp.path(), &geo, &opts).expect("create");
    publish(&ring, tag, 1, n);
    std::fs::rename(tmp.path(), path).expect("rename");
    ring
}

/// Publishes records `from..=to` of `tag` into `ring`.
pub fn publish(ring: &RingFile, tag: u8, from: u64, to: u64) {
    // SAFETY: `ring` outlives the producer, dropped at the end of this function.
    let mut p = Producer::new(*unsafe { ring.view() }, FutexWake).expect("producer");
    for seq in from..=to {
        assert_eq!(p.push(&record(tag, seq)), Ok(seq));
    }
}

/// The ring's write_seq, and how many of its records carry each tag (0, 1, and 2 or more);
/// panics on a record that is not under its own sequence. `(0, [0; 3])` if there is no
/// ring at `path`.
pub fn census(path: &Path) -> (u64, [u64; 3]) {
    let Ok(m) = ReadOnlyRing::open(path) else {
        return (0, [0; 3]);
    };
    let w = m.write_seq();
    let mut tags = [0u64; 3];
    let mut b = [0u8; LEN];
    for seq in 1..=w {
        if m.read_slot(seq, &mut b) == SlotRead::Ok {
            assert_eq!(b[..8], seq.to_le_bytes(), "record {seq} under its sequence");
            tags[usize::from(b[8]).min(2)] += 1;
        }
    }
    (w, tags)
}
