//! A served ring replaced at its path (a restarted producer; a hub whose mirror recreated its
//! ring for a restarted source) is followed: `serve::run_following` ends the sessions,
//! serves the new ring on the same address, and the mirror reconnects, detects the new
//! source and recreates its ring with the new geometry and records.

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use ringwire::core::broadcast::{Producer, Wake};
use ringwire::core::replicate::Start;
use ringwire::core::{Geometry, RingView, SlotRead};
use ringwire::replica::mirror::{self, MirrorOptions};
use ringwire::replica::serve::{ServeOptions, run_following};
use ringwire::{CleanupMode, CreateOptions, ReadOnlyRing, RingFile};
use ringwire_tests::replica::SetOnDrop;
use ringwire_tests::shm::ShmPath;
use ringwire_tests::wait_until;

struct FutexWake;
impl Wake for FutexWake {
    fn wake(&self, view: &RingView) {
        ringwire::wait::wake_all(view);
    }
}

fn record(generation: u8, seq: u64) -> [u8; 16] {
    let mut r = [generation; 16];
    r[..8].copy_from_slice(&seq.to_le_bytes());
    r
}

/// Creates a ring at `path` (replacing what is there) and publishes `n` records.
fn make_ring(path: &Path, capacity: u64, generation: u8, n: u64) -> RingFile {
    let geo = Geometry::spmc(capacity, 24, 8, 0, false).unwrap();
    let opts = CreateOptions {
        cleanup: CleanupMode::Persistent,
        ..CreateOptions::default()
    };
    let ring = RingFile::create(path, &geo, &opts).unwrap();
    // SAFETY: `ring` outlives the producer, which is dropped at the end of this function.
    let mut p = Producer::new(*unsafe { ring.view() }, FutexWake).unwrap();
    for seq in 1..=n {
        assert_eq!(p.push(&record(generation, seq)), Ok(seq));
    }
    ring
}

/// The mirror ring at `path` has capacity `cap`, `write_seq` `last` and records
/// `from..=last` of `generation`.
fn mirror_holds(path: &Path, cap: u64, generation: u8, from: u64, last: u64) -> bool {
    let Ok(m) = ReadOnlyRing::open(path) else {
        return false;
    };
    if m.geometry().capacity != cap || m.write_seq() != last {
        return false;
    }
    let mut b = [0u8; 16];
    (from..=last)
        .all(|seq| m.read_slot(seq, &mut b) == SlotRead::Ok && b == record(generation, seq))
}

#[test]
fn serve_follows_a_ring_replaced_at_its_path() {
    let src = ShmPath::new("follow-src");
    let dst = ShmPath::new("follow-dst");
    let first = make_ring(src.path(), 64, 1, 40);
    // A fixed port, so that the mirror's reconnects reach the re-bound server.
    let addr = ringwire_tests::replica::free_addr();
    let mut so = ServeOptions::new(src.path(), addr);
    so.log = false;
    let mut mo = MirrorOptions::new(addr, dst.path());
    mo.start = Start::Oldest;
    mo.log = false;
    mo.reconnect = Duration::from_millis(50);
    let stop = AtomicBool::new(false);
    let replaced = Mutex::new(Vec::new());
    std::thread::scope(|sc| {
        // Stops serve and mirror when the test body ends, even by a failed assertion (the
        // scope joins them before the panic propagates).
        let guard = SetOnDrop(&stop);
        let s = sc.spawn(|| {
            run_following(&so, &stop, |p| {
                replaced.lock().unwrap().push(p.to_path_buf())
            })
        });
        let m = sc.spawn(|| mirror::run(&mo, &stop));
        wait_until("the first ring mirrored", Duration::from_secs(20), || {
            mirror_holds(dst.path(), 64, 1, 1, 40)
        });
        drop(first);
        // The producer restarts with another geometry: a fresh inode at the same path.
        let second = make_ring(src.path(), 128, 2, 25);
        // The mirror asks to resume past the new ring's end: the source answers RESET and
        // streams from its write_seq + 1 (spec §19.1); the mirror recreates its ring.
        wait_until("the mirror ring recreated", Duration::from_secs(20), || {
            ReadOnlyRing::open(dst.path()).is_ok_and(|m| m.geometry().capacity == 128)
        });
        // A restarted producer continues after the records already in the ring.
        // SAFETY: `second` is declared first, so it outlives the producer.
        let mut p = Producer::new(*unsafe { second.view() }, FutexWake).unwrap();
        for seq in 26..=60 {
            assert_eq!(p.push(&record(2, seq)), Ok(seq));
        }
        wait_until("the new records mirrored", Duration::from_secs(20), || {
            mirror_holds(dst.path(), 128, 2, 26, 60)
        });
        drop(guard);
        let sum = s.join().unwrap().expect("serve ends cleanly");
        assert!(sum.sessions >= 1, "{sum:?}");
        m.join().unwrap().expect("mirror ends cleanly");
    });
    assert_eq!(*replaced.lock().unwrap(), vec![src.path().to_path_buf()]);
}
