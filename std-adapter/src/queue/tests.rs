//! Tests of the std queues: durability, role locks, type checks, threads, blocking waits,
//! and a producer killed between claim and publish.

use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use ringwire_core::queue::{
    PopError, PushError, QueueAttachError, QueueExpect, QueueKind, StuckKind, StuckSlot,
};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::*;
use crate::test_tmp::TmpPath;
use crate::wait::WaitStrategy;

/// Kills and reaps a child process when dropped, so a failing test leaves none running.
struct KillOnDrop(std::process::Child);
impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[derive(IntoBytes, FromBytes, Immutable, KnownLayout, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Order {
    id: u64,
    px: f64,
    qty: u32,
    side: u32,
}

fn order(id: u64) -> Order {
    Order {
        id,
        px: id as f64 * 0.5,
        qty: id as u32 * 3,
        side: (id % 2) as u32,
    }
}

#[test]
fn spsc_file_survives_both_sides_dropping() {
    let path = TmpPath::shm("queue-durable");
    {
        let mut p = SpscProducer::<Order>::create(&path, 16).unwrap();
        let mut c = SpscConsumer::<Order>::open(&path).unwrap();
        assert_eq!(
            p.push_slice(&(0..10).map(order).collect::<Vec<_>>()),
            Ok(10)
        );
        assert_eq!(c.try_pop(), Ok(Some(order(0))));
        assert_eq!(c.try_pop(), Ok(Some(order(1))));
        p.flush().unwrap();
    }
    // Both handles are gone (and the creator's lock with them); the file keeps the items.
    let mut c = SpscConsumer::<Order>::open(&path).unwrap();
    let mut p = SpscProducer::<Order>::open(&path).unwrap();
    p.try_push(&order(10)).unwrap();
    let mut out = [order(0); 16];
    assert_eq!(c.pop_slice(&mut out), Ok(9));
    assert_eq!(out[..9], (2..=10).map(order).collect::<Vec<_>>()[..]);
    assert_eq!(c.try_pop(), Ok(None));
}

/// A queue too large for the address space is refused with the values that make it so
/// (the capacity and slot size, or the item length), and the largest item length the
/// core names ([`ringwire_core::queue::MAX_ITEM_SIZE`]) makes a byte queue's geometry.
#[test]
fn a_queue_too_large_for_the_address_space_names_its_capacity_and_item_size() {
    assert_eq!(
        spsc_channel::<u64>(1 << 62).unwrap_err().to_string(),
        "queue anonymous: capacity 4611686018427387904 of 8-byte slots does not fit in the \
         address space"
    );
    let path = TmpPath::shm("queue-too-large");
    assert_eq!(
        MpmcQueue::<u64>::create(&path, 1 << 62)
            .unwrap_err()
            .to_string(),
        format!(
            "queue {}: capacity 4611686018427387904 of 16-byte slots does not fit in the \
             address space",
            path.display()
        )
    );
    assert!(!path.exists());
    let max = ringwire_core::queue::MAX_ITEM_SIZE;
    assert_eq!(
        spsc_bytes_channel(4, usize::MAX).unwrap_err().to_string(),
        format!(
            "queue anonymous: item size {} is over the largest a queue takes ({max})",
            usize::MAX
        )
    );
    assert_eq!(
        bytes_geometry(2, max as usize).map(|g| g.item_size),
        Ok(max)
    );
}

/// A queue whose geometry is valid but whose memory cannot be had (2^61 bytes, past any
/// address space) is an `mmap` error naming the length, so the capacity to change shows.
#[test]
fn a_mapping_that_fails_names_its_length() {
    let e = spsc_channel::<u64>(1 << 58).unwrap_err();
    let QueueFileError::Io { op, source, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(
        (*op, source.kind()),
        ("mmap", std::io::ErrorKind::OutOfMemory)
    );
    assert_eq!(
        e.to_string(),
        "queue anonymous: mmap failed: cannot map 2305843009213694336 bytes: Cannot allocate \
         memory (os error 12)"
    );
}

/// `create` at the path of a live ring or blackboard, whose producer holds the file's
/// creation lock, refuses it as what it is, a file that is no queue
/// ([`QueueFileError::NotReplaced`] naming it), not as a queue in use by its creator
/// (whose advice, "open it instead", fails there), and leaves it as it was.
#[test]
fn create_over_a_live_ring_or_blackboard_says_it_is_no_queue() {
    let path = TmpPath::shm("queue-over-live-ring");
    let ring = crate::RingProducer::<u64>::create(&path, 8).unwrap();
    let board_path = TmpPath::shm("queue-over-live-board");
    let board = crate::BlackboardProducer::<u64>::create(&board_path, 4).unwrap();
    for (path, magic, said) in [
        (&path, ringwire_core::layout::RING_MAGIC, "(a ring)"),
        (
            &board_path,
            ringwire_core::blackboard::BLACKBOARD_MAGIC,
            "(a blackboard)",
        ),
    ] {
        let before = std::fs::read(path).unwrap();
        let creates = [
            SpscProducer::<u64>::create(path, 8).map(drop),
            SpscBytesProducer::create(path, 8, 8).map(drop),
            MpmcQueue::<u64>::create(path, 8).map(drop),
        ];
        for e in creates.into_iter().map(Result::unwrap_err) {
            assert!(
                matches!(&e, QueueFileError::NotReplaced { len, magic: Some(m), .. }
                    if *len == before.len() as u64 && *m == magic),
                "{e:?}"
            );
            assert!(
                e.to_string().contains(&format!("{said} is not a queue")),
                "{e}"
            );
        }
        assert_eq!(std::fs::read(path).unwrap(), before);
    }
    drop((ring, board));
}

/// The queue's (data_waiters, space_waiters).
fn waiter_counts(view: &ringwire_core::queue::QueueView) -> (u32, u32) {
    (
        view.data_waiters().load(Ordering::Relaxed),
        view.space_waiters().load(Ordering::Relaxed),
    )
}

/// Stores waiter counts as sleepers that died asleep leave them.
fn set_waiter_counts(view: &ringwire_core::queue::QueueView, data: u32, space: u32) {
    view.data_waiters().store(data, Ordering::Relaxed);
    view.space_waiters().store(space, Ordering::Relaxed);
}

#[test]
fn spsc_roles_clear_the_waiter_count_they_sleep_on_when_taken() {
    let path = TmpPath::shm("queue-rolewaiters");
    // The creator stays alive as the producer, so the file is never opened by a handle
    // alone on it: only the role locks can prove a count stale here.
    let mut p = SpscProducer::<u64>::create(&path, 4).unwrap();
    let raw = QueueMem::open(&path, QueueExpect::raw(QueueKind::Spsc)).unwrap();
    // SAFETY: `raw` outlives every use of its view.
    let view = unsafe { raw.view() };
    // A consumer died asleep on data; the live producer may be asleep on space.
    set_waiter_counts(view, 1, 1);
    let mut c = SpscConsumer::<u64>::open(&path).unwrap();
    assert_eq!(waiter_counts(view), (0, 1));
    // A producer died asleep on space; the live consumer may be asleep on data.
    drop(p);
    set_waiter_counts(view, 1, 1);
    p = SpscProducer::<u64>::open(&path).unwrap();
    assert_eq!(waiter_counts(view), (1, 0));
    // Both sides work on after that.
    view.data_waiters().store(0, Ordering::Relaxed);
    p.try_push(&5).unwrap();
    assert_eq!(c.try_pop(), Ok(Some(5)));
}

#[test]
fn a_producer_asleep_on_a_full_queue_gets_the_slots_of_single_pops_back() {
    // 1024 slots: a single pop hands its slot back only every 64th pop, or at once when
    // the producer sleeps on the full queue, or when the consumer is dropped. The producer
    // sleeps in one futex wait of 20 s, so only a wake-up ends it within the 10 s asserted.
    let path = TmpPath::shm("queue-releasewake");
    let mut p = SpscProducer::<u64>::create(&path, 1024).unwrap();
    let mut c = SpscConsumer::<u64>::open(&path).unwrap();
    assert_eq!(c.release_every(), 64);
    let raw = QueueMem::open(&path, QueueExpect::raw(QueueKind::Spsc)).unwrap();
    // SAFETY: `raw` outlives every use of its view.
    let view = unsafe { raw.view() };
    let until_asleep = || {
        let t0 = Instant::now();
        while waiter_counts(view).1 == 0 {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the producer never slept"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    let push_asleep = |p: &mut SpscProducer<u64>, v: u64| {
        let mut wait = crate::FutexWait::new(0, Some(Duration::from_secs(20)));
        p.push_timeout(&v, &mut wait, Duration::from_secs(30))
    };
    for i in 0..1024u64 {
        p.try_push(&i).unwrap();
    }
    std::thread::scope(|s| {
        let pusher = s.spawn(|| push_asleep(&mut p, 1024));
        until_asleep();
        // Without the hand-back the producer would see the queue full for 63 more pops.
        let t0 = Instant::now();
        assert_eq!(c.try_pop(), Ok(Some(0)));
        assert_eq!(pusher.join().unwrap(), Ok(()));
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    });
    // A pop made before the producer sleeps keeps its slot; dropping the consumer hands it
    // back and wakes the producer.
    assert_eq!(c.try_pop(), Ok(Some(1)));
    assert_eq!(p.try_push(&1025), Err(PushError::Full));
    std::thread::scope(|s| {
        let pusher = s.spawn(|| push_asleep(&mut p, 1025));
        until_asleep();
        let t0 = Instant::now();
        drop(c);
        assert_eq!(pusher.join().unwrap(), Ok(()));
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    });
    let mut c = SpscConsumer::<u64>::open(&path).unwrap();
    for want in 2..=1025 {
        assert_eq!(c.try_pop(), Ok(Some(want)));
    }
    assert_eq!(c.try_pop(), Ok(None));
}

#[test]
fn mpmc_waiter_counts_are_cleared_by_an_opener_alone_on_the_file() {
    let path = TmpPath::shm("queue-alonewaiters");
    let creator = MpmcQueue::<u64>::create(&path, 4).unwrap();
    // SAFETY: the handles outlive every use of their views.
    let view = |q: &MpmcQueue<u64>| *unsafe { q.core() }.view();
    // Counts left by sleepers that died asleep; a live sleeper's look the same.
    set_waiter_counts(&view(&creator), 1, 2);
    // The creator lives (its flock): nothing is cleared.
    let a = MpmcQueue::<u64>::open(&path).unwrap();
    assert_eq!(waiter_counts(&view(&a)), (1, 2));
    drop(creator);
    // `a` lives (its shared lock on the file): nothing is cleared.
    let b = MpmcQueue::<u64>::open(&path).unwrap();
    assert_eq!(waiter_counts(&view(&b)), (1, 2));
    drop((a, b));
    let c = MpmcQueue::<u64>::open(&path).unwrap();
    assert_eq!(waiter_counts(&view(&c)), (0, 0));
    // The probe gave back its whole-file lock: other handles open, a create is refused.
    let d = MpmcQueue::<u64>::open(&path).unwrap();
    assert!(matches!(
        MpmcQueue::<u64>::create(&path, 4),
        Err(QueueFileError::InUse { .. })
    ));
    d.try_push(&9).unwrap();
    assert_eq!(c.try_pop(), Ok((Some(9), 0)));
}

#[test]
fn spsc_roles_are_exclusive_and_types_are_checked() {
    let path = TmpPath::shm("queue-roles");
    let _p = SpscProducer::<Order>::create(&path, 4).unwrap();
    assert!(matches!(
        SpscProducer::<Order>::open(&path),
        Err(QueueFileError::RoleTaken {
            role: "producer",
            ..
        })
    ));
    let c = SpscConsumer::<Order>::open(&path).unwrap();
    assert!(matches!(
        SpscConsumer::<Order>::open(&path),
        Err(QueueFileError::RoleTaken {
            role: "consumer",
            ..
        })
    ));
    drop(c);
    SpscConsumer::<Order>::open(&path).unwrap();
    // Another item type, or the other queue kind, is refused with the values seen.
    match SpscConsumer::<u64>::open(&path) {
        Err(QueueFileError::Attach {
            err:
                QueueAttachError::ItemSizeMismatch {
                    expected: 8,
                    found: 24,
                },
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    match MpmcQueue::<Order>::open(&path) {
        Err(QueueFileError::Attach {
            err:
                QueueAttachError::WrongKind {
                    expected: QueueKind::Mpmc,
                    found: QueueKind::Spsc,
                },
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    // A second creator while the first lives is refused: the file is in use by its creator
    // (not "being created", which it no longer is).
    assert!(matches!(
        SpscProducer::<Order>::create(&path, 4),
        Err(QueueFileError::InUse {
            holder: "creator",
            ..
        })
    ));
}

/// An opener proving itself alone on the file holds a whole-file write lock for the length
/// of its probe; a role taken meanwhile (a producer attaching right after its `create`)
/// waits for the probe instead of reporting its role taken. A real role holder's lock is
/// still refused at once.
#[test]
fn a_role_taken_during_an_openers_probe_waits_for_it() {
    let path = TmpPath::shm("queue-probewait");
    let g = geometry_for::<u64>(QueueKind::Spsc, 8).unwrap();
    let mem = QueueMem::create(&path, &g).unwrap();
    let ofd_lock = |f: &std::fs::File, kind: libc::c_int, start: i64, len: i64| {
        mem::ofd_lock(f, kind, start, len).unwrap()
    };
    let open = || {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap()
    };
    // The probe's lock: a write lock from byte 0 to the end of the file and beyond.
    let prober = open();
    assert!(ofd_lock(&prober, libc::F_WRLCK, 0, 0));
    let held = Duration::from_millis(50);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(held);
            assert!(ofd_lock(&prober, libc::F_UNLCK, 0, 0));
        });
        let lock = mem.lock_role(ringwire_core::queue::qhdr::ENQ as i64, "producer");
        assert!(matches!(lock, Ok(mem::RoleLock::Held { .. })), "{lock:?}");
        assert!(t0.elapsed() >= held);
    });
    // Another handle holding the consumer's role byte is refused after the short grace for
    // a handle closed an instant ago, not after waiting as for a probe. Both end in
    // `RoleTaken`, so only the time tells them apart: the check is that the refusal comes
    // before `PROBE_WAIT`, which a wait for a probe cannot (a broken grace takes that long
    // on any machine; a right one, 50 ms plus what the scheduler adds).
    let consumer = open();
    assert!(ofd_lock(
        &consumer,
        libc::F_WRLCK,
        ringwire_core::queue::qhdr::DEQ as i64,
        1
    ));
    let t0 = Instant::now();
    assert!(matches!(
        mem.lock_role(ringwire_core::queue::qhdr::DEQ as i64, "consumer"),
        Err(QueueFileError::RoleTaken {
            role: "consumer",
            ..
        })
    ));
    assert!(t0.elapsed() < mem::PROBE_WAIT, "{:?}", t0.elapsed());
}

/// An opener proving itself alone holds a write lock from byte 0 for its probe (one pass
/// over the slots of an MPMC file, which can take tens of ms): `open` waits for it instead
/// of failing with `Locked` after a few ms.
#[test]
fn an_open_waits_for_another_openers_long_probe() {
    let path = TmpPath::shm("queue-longprobe");
    let g = geometry_for::<u64>(QueueKind::Mpmc, 8).unwrap();
    drop(QueueMem::create(&path, &g).unwrap());
    let prober = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    // The probe's lock: a write lock from byte 0 to the end of the file and beyond.
    let lock = |kind: libc::c_int| assert!(mem::ofd_lock(&prober, kind, 0, 0).unwrap());
    lock(libc::F_WRLCK);
    let held = Duration::from_millis(60);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(held);
            lock(libc::F_UNLCK);
        });
        let opened = QueueMem::open(&path, QueueExpect::raw(QueueKind::Mpmc));
        assert!(opened.is_ok(), "{opened:?}");
        assert!(t0.elapsed() >= held);
    });
}

/// Openers probing the file (each takes and gives back a write lock from byte 0) never make
/// a producer's role lock fail: neither while a probe gives its lock back (what it holds
/// then still starts at byte 0) nor when the probe ends between the refused lock and the
/// look at who holds it.
///
/// A role lock whose descriptor another process still holds for an instant after its
/// handle closed (a child forked meanwhile, until it execs: simulated by a duplicate
/// descriptor closed 20 ms later) does not make the next handle's role lock fail.
#[test]
fn a_role_lock_held_an_instant_longer_by_a_forked_descriptor_is_waited_for() {
    let path = TmpPath::shm("queue-forkedrole");
    let g = geometry_for::<u64>(QueueKind::Spsc, 8).unwrap();
    let mem = QueueMem::create(&path, &g).unwrap();
    let enq = ringwire_core::queue::qhdr::ENQ as i64;
    let mem::RoleLock::Held { _file: first } = mem.lock_role(enq, "producer").unwrap() else {
        panic!("no role lock taken on /dev/shm");
    };
    let child_copy = first.try_clone().unwrap();
    drop(first);
    std::thread::scope(|s| {
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            drop(child_copy);
        });
        let second = mem.lock_role(enq, "producer");
        assert!(
            matches!(second, Ok(mem::RoleLock::Held { .. })),
            "{second:?}"
        );
    });
}

/// The probing thread keeps probing until the locking side says stop, and the locking side
/// keeps making attempts until the probe count has advanced by `OVERLAP` during them, so
/// the attempts provably ran while probes did, however late either thread gets the CPU.
/// A probe holds its lock for a few system calls only, so attempts land in that window
/// rarely: with a lock_role that refuses on a probe's lock, 100 overlapping probes went
/// unnoticed in most runs, 3000 in some, 20,000 in none (each run had hundreds of refusals
/// at least). Both sides are bounded in count and time; a machine too loaded to reach
/// `OVERLAP` within `LIMIT` must still show `MIN_OVERLAP`. No other test's child is forked
/// meanwhile (`no_forks`): a child forked while an attempt held its lock keeps a copy of the
/// descriptor, and with it the role, until it exits. That refused attempts in a full run of
/// the crate's tests ("6 of 70746 attempts refused"), which no probe caused.
#[test]
fn openers_probing_the_file_never_make_a_role_lock_fail() {
    let _no_forks = crate::test_fork::no_forks();
    use std::sync::atomic::{AtomicBool, AtomicU64};
    const OVERLAP: u64 = 20_000;
    const MIN_OVERLAP: u64 = 100;
    const MAX_PROBES: u64 = 200_000;
    const MAX_ATTEMPTS: u64 = 1_000_000;
    const LIMIT: Duration = Duration::from_secs(20);
    let path = TmpPath::shm("queue-probestorm");
    let g = geometry_for::<u64>(QueueKind::Spsc, 8).unwrap();
    let mem = QueueMem::create(&path, &g).unwrap();
    let stop = AtomicBool::new(false);
    let probes = AtomicU64::new(0);
    let probing_ended = AtomicBool::new(false);
    let (mut taken, mut attempts, mut refused) = (0u64, 0u64, Vec::new());
    let mut during = 0u64;
    std::thread::scope(|s| {
        s.spawn(|| {
            // Tells the locking side, even if a probe panics, that no more probes come.
            let _ended = crate::test_guard::SetOnDrop(&probing_ended);
            let t0 = Instant::now();
            let mut n = 0u64;
            while !stop.load(Ordering::Acquire) && n < MAX_PROBES && t0.elapsed() < LIMIT {
                drop(QueueMem::open(&path, QueueExpect::raw(QueueKind::Spsc)).unwrap());
                n += 1;
                probes.store(n, Ordering::Release);
            }
        });
        // The probe count when the first attempt starts: only probes made after it count.
        let start = probes.load(Ordering::Acquire);
        let t0 = Instant::now();
        while during < OVERLAP && attempts < MAX_ATTEMPTS && t0.elapsed() < LIMIT {
            let ended = probing_ended.load(Ordering::Acquire);
            attempts += 1;
            match mem.lock_role(ringwire_core::queue::qhdr::ENQ as i64, "producer") {
                Ok(mem::RoleLock::Held { _file: f }) => {
                    taken += 1;
                    drop(f);
                }
                other => refused.push(format!("{other:?}")),
            }
            during = probes.load(Ordering::Acquire) - start;
            if ended {
                break;
            }
        }
        stop.store(true, Ordering::Release);
    });
    assert!(
        refused.is_empty(),
        "{} of {attempts} attempts refused: {:?}",
        refused.len(),
        refused.first()
    );
    assert!(
        during >= MIN_OVERLAP,
        "only {during} probes ran during {attempts} lock attempts: nothing was tested"
    );
    assert!(taken > 0, "no role lock taken in {attempts} attempts");
}

#[test]
fn the_first_flush_of_a_file_queue_syncs_its_directory() {
    let path = TmpPath::shm("queue-flushdir");
    let g = geometry_for::<u64>(QueueKind::Spsc, 8).unwrap();
    let mem = QueueMem::create(&path, &g).unwrap();
    assert!(!mem.dir_synced());
    mem.flush().unwrap();
    assert!(mem.dir_synced());
    mem.flush().unwrap();
    let anon = QueueMem::anonymous(&g).unwrap();
    anon.flush().unwrap();
    assert!(anon.dir_synced());
}

/// A flush that fails names the queue: a caller flushing several queues learns which one.
/// The failure is a real one, without root: the queue's file and its directory are
/// removed while the handle keeps the mapping, so the msync succeeds and the first flush's
/// sync of the directory cannot open it (ENOENT). The error keeps the OS error's kind, and
/// its inner error is the typed [`QueueFileError::Io`], with the path, the call and the OS
/// error (whose errno it keeps). Through every handle type's `flush`.
#[test]
fn a_failed_flush_names_the_queue_file() {
    let dir = TmpPath::shm("queue-flushgone");
    std::fs::create_dir(&dir).unwrap();
    let spsc = dir.join("spsc");
    let mpmc = dir.join("mpmc");
    let bytes = dir.join("bytes");
    let producer = SpscProducer::<u64>::create(&spsc, 8).unwrap();
    let consumer = SpscConsumer::<u64>::open(&spsc).unwrap();
    let queue = MpmcQueue::<u64>::create(&mpmc, 8).unwrap();
    let bytes_producer = SpscBytesProducer::create(&bytes, 8, 16).unwrap();
    let bytes_consumer = SpscBytesConsumer::open(&bytes).unwrap();
    for f in [&spsc, &mpmc, &bytes] {
        std::fs::remove_file(f).unwrap();
    }
    std::fs::remove_dir(&dir).unwrap();
    let failures = [
        (&spsc, producer.flush()),
        (&spsc, consumer.flush()),
        (&mpmc, queue.flush()),
        (&bytes, bytes_producer.flush()),
        (&bytes, bytes_consumer.flush()),
    ];
    for (path, r) in failures {
        let e = r.expect_err("the flush of a queue whose directory is gone");
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}");
        let text = e.to_string();
        assert!(
            text.starts_with(&format!("queue {}: ", path.display())),
            "{text}"
        );
        match e.get_ref().and_then(|i| i.downcast_ref::<QueueFileError>()) {
            Some(QueueFileError::Io {
                path: named,
                op,
                source,
            }) => {
                assert_eq!(named, path);
                assert_eq!(*op, "directory fsync");
                assert_eq!(source.raw_os_error(), Some(libc::ENOENT), "{source}");
            }
            other => panic!("inner error {other:?} of {text}"),
        }
    }
}

/// On a file system without record locks (every `F_OFD_*` call fails with `ENOLCK`,
/// `EINVAL` or `EOPNOTSUPP`; injected, as mounting such a file system needs root), SPSC and
/// MPMC handles behave alike: they open, work, and say they are unguarded. SPSC handles
/// failed to open there (`fcntl failed: No locks available`) while MPMC handles went on
/// without their lock. The creator's `flock` still works here, so an MPMC creator stays
/// guarded; with the locks working every handle is.
#[test]
fn without_record_locks_spsc_and_mpmc_handles_open_alike_unguarded() {
    for errno in [libc::ENOLCK, libc::EINVAL, libc::EOPNOTSUPP] {
        let spsc = TmpPath::shm(&format!("queue-nolocks-spsc-{errno}"));
        let bytes = spsc.beside("bytes");
        let mpmc = spsc.beside("mpmc");
        let no_locks = mem::locks_fail_with(errno);
        // Every handle opens, whatever the errno.
        fn ok<T>(errno: i32, r: Result<T, QueueFileError>) -> T {
            r.unwrap_or_else(|e| panic!("errno {errno}: {e}"))
        }

        let mut tx = ok(errno, SpscProducer::<u64>::create(&spsc, 8));
        let mut rx = ok(errno, SpscConsumer::<u64>::open(&spsc));
        assert!(!tx.is_guarded() && !rx.is_guarded(), "errno {errno}");
        tx.try_push(&7).unwrap();
        assert_eq!(rx.try_pop().unwrap(), Some(7));
        drop(tx);
        let mut tx = ok(errno, SpscProducer::<u64>::open(&spsc));
        assert!(!tx.is_guarded());
        tx.try_push(&8).unwrap();
        assert_eq!(rx.try_pop().unwrap(), Some(8));
        // The documented cost: nothing can refuse a second producer there.
        let second = ok(errno, SpscProducer::<u64>::open(&spsc));
        assert!(!second.is_guarded());

        let mut btx = ok(errno, SpscBytesProducer::create(&bytes, 8, 16));
        let mut brx = ok(errno, SpscBytesConsumer::open(&bytes));
        assert!(!btx.is_guarded() && !brx.is_guarded());
        btx.try_push(b"abc").unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(brx.try_pop(&mut buf).unwrap(), Some(3));

        let creator = ok(errno, MpmcQueue::<u64>::create(&mpmc, 8));
        let opened = ok(errno, MpmcQueue::<u64>::open(&mpmc));
        assert!(
            creator.is_guarded() && !opened.is_guarded(),
            "errno {errno}"
        );
        assert_eq!(opened.healed_at_open(), 0);
        let raw = ok(
            errno,
            QueueMem::open(&mpmc, QueueExpect::raw(QueueKind::Mpmc)),
        );
        assert!(!raw.is_guarded());
        assert_eq!(raw.at_open(), AtOpen::Unprovable);
        creator.try_push(&1).unwrap();
        assert_eq!(opened.try_pop().unwrap(), (Some(1), 0));

        // The same files with the locks working: every handle guarded.
        drop((tx, rx, second, btx, brx, opened, raw));
        drop(no_locks);
        let tx = SpscProducer::<u64>::open(&spsc).unwrap();
        let rx = SpscConsumer::<u64>::open(&spsc).unwrap();
        let brx = SpscBytesConsumer::open(&bytes).unwrap();
        let opened = MpmcQueue::<u64>::open(&mpmc).unwrap();
        assert!(tx.is_guarded() && rx.is_guarded() && brx.is_guarded() && opened.is_guarded());
    }
    let (tx, rx) = spsc_channel::<u64>(8).unwrap();
    assert!(tx.is_guarded() && rx.is_guarded());
    assert!(MpmcQueue::<u64>::anonymous(8).unwrap().is_guarded());
}

/// A lock call that fails otherwise (`EIO`, which no file system without locks gives)
/// refuses SPSC and MPMC handles alike, with the file and the call named.
#[test]
fn a_lock_failure_other_than_no_locks_refuses_spsc_and_mpmc_alike() {
    let spsc = TmpPath::shm("queue-lockeio");
    let mpmc = spsc.beside("mpmc");
    drop(SpscProducer::<u64>::create(&spsc, 8).unwrap());
    drop(MpmcQueue::<u64>::create(&mpmc, 8).unwrap());
    let _eio = mem::locks_fail_with(libc::EIO);
    let refusals = [
        (&spsc, SpscProducer::<u64>::open(&spsc).map(drop)),
        (&spsc, SpscConsumer::<u64>::open(&spsc).map(drop)),
        (&mpmc, MpmcQueue::<u64>::open(&mpmc).map(drop)),
    ];
    for (path, r) in refusals {
        match r {
            Err(QueueFileError::Io {
                path: named,
                op: "fcntl",
                source,
            }) => {
                assert_eq!(&named, path.path());
                assert_eq!(source.raw_os_error(), Some(libc::EIO));
            }
            other => panic!("{}: {other:?}", path.display()),
        }
    }
}

/// An SPSC producer `create` whose role lock fails (an `fcntl` error other than a file
/// system without record locks) removes the file it made. It left a complete queue file
/// that nobody used, which an `open` then attached to and the next `create` replaced as
/// stale.
#[test]
fn an_spsc_create_whose_role_lock_fails_leaves_no_file() {
    let typed = TmpPath::shm("queue-role-eio");
    let bytes = typed.beside("bytes");
    let _eio = mem::locks_fail_with(libc::EIO);
    let made = [
        (&typed, SpscProducer::<u64>::create(&typed, 8).map(drop)),
        (&bytes, SpscBytesProducer::create(&bytes, 8, 16).map(drop)),
    ];
    for (path, r) in made {
        match r {
            Err(QueueFileError::Io {
                op: "fcntl",
                source,
                ..
            }) if source.raw_os_error() == Some(libc::EIO) => {}
            other => panic!("{}: {other:?}", path.display()),
        }
        assert!(!path.exists(), "{} was left behind", path.display());
    }
}

/// Typed batches against a FIFO model on a queue of 16 `T`s: `push_slice` and `pop_slice`
/// of 0 to 20 items (more than the room, or the items there are, as often as not) at
/// every slot, across the wrap, mixed with single pushes and pops; a pop leaves its buffer
/// alone past the items it popped.
fn typed_batches_keep_fifo_order<T: Item + Copy + PartialEq + std::fmt::Debug>(
    make: impl Fn(u64) -> T,
) {
    const CAP: u64 = 16;
    let (mut p, mut c) = spsc_channel::<T>(CAP).unwrap();
    // Every single pop hands its slot back at once, so the model's room is the producer's.
    c.set_release_every(1);
    let (mut next_in, mut next_out) = (0u64, 0u64);
    let mut x = 0xbb67_ae85_84ca_a73bu64;
    for _ in 0..2_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let free = CAP - (next_in - next_out);
        if x & 1 == 0 {
            let want = x % 21;
            let items: Vec<T> = (next_in..next_in + want).map(&make).collect();
            let n = p.push_slice(&items).unwrap() as u64;
            assert_eq!(n, free.min(want));
            next_in += n;
        } else if free > 0 {
            p.try_push(&make(next_in)).unwrap();
            next_in += 1;
        } else {
            assert_eq!(p.try_push(&make(next_in)), Err(PushError::Full));
        }
        let ready = next_in - next_out;
        if x & 2 == 0 {
            let want = ((x >> 8) % 21) as usize;
            let fill = make(1 << 40);
            let mut out = vec![fill; want];
            let n = c.pop_slice(&mut out).unwrap();
            assert_eq!(n as u64, ready.min(want as u64));
            for v in &out[..n] {
                assert_eq!(*v, make(next_out), "position {next_out}");
                next_out += 1;
            }
            assert!(out[n..].iter().all(|v| *v == fill), "written past the pop");
        } else if let Some(v) = c.try_pop().unwrap() {
            assert_eq!(v, make(next_out), "position {next_out}");
            next_out += 1;
        } else {
            assert_eq!(ready, 0);
        }
    }
    assert!(next_out > 1_000, "the batches moved: {next_out}");
}

#[test]
fn spsc_typed_batches_wrap_and_fill_partly_for_packed_and_padded_items() {
    // u64, 64-byte and 24-byte items fill their slots (the batch is a span copy); a
    // 12-byte item sits in a 16-byte slot and moves item by item.
    typed_batches_keep_fifo_order(|i| i);
    typed_batches_keep_fifo_order(|i| [i, !i, i ^ 2, i ^ 3, i ^ 4, i ^ 5, i ^ 6, i.rotate_left(7)]);
    typed_batches_keep_fifo_order(order);
    typed_batches_keep_fifo_order(|i| [i as u32, (i >> 32) as u32, !(i as u32)]);
}

#[test]
fn spsc_anonymous_channel_across_threads() {
    let (mut p, mut c) = spsc_channel::<u64>(8).unwrap();
    const N: u64 = 10_000;
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut i = 0;
            while i < N {
                if p.try_push(&i).is_ok() {
                    i += 1;
                } else {
                    std::thread::yield_now();
                }
            }
        });
        let mut want = 0;
        let mut buf = [0u64; 5];
        while want < N {
            let n = c.pop_slice(&mut buf).unwrap();
            for v in &buf[..n] {
                assert_eq!(*v, want);
                want += 1;
            }
            if n == 0 {
                std::thread::yield_now();
            }
        }
    });
}

#[test]
fn blocking_pop_and_push_wake_up_and_time_out() {
    let (mut p, mut c) = spsc_channel::<u64>(2).unwrap();
    // Times out on an empty queue, after the timeout.
    let t0 = Instant::now();
    assert_eq!(c.pop_blocking(Duration::from_millis(30)), Ok(None));
    let waited = t0.elapsed();
    assert!(waited >= Duration::from_millis(30), "{waited:?}");
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            p.try_push(&7).unwrap();
            p.try_push(&8).unwrap();
            // Full now: blocks until the consumer pops.
            p.push_blocking(&9, Duration::from_secs(10)).unwrap();
        });
        let t0 = Instant::now();
        assert_eq!(c.pop_blocking(Duration::from_secs(10)), Ok(Some(7)));
        assert!(t0.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(c.pop_blocking(Duration::from_secs(10)), Ok(Some(8)));
        assert_eq!(c.pop_blocking(Duration::from_secs(10)), Ok(Some(9)));
    });
    let q = MpmcQueue::<u64>::anonymous(2).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(20));
            q.push_blocking(&1, Duration::from_secs(10)).unwrap();
        });
        assert_eq!(q.pop_blocking(Duration::from_secs(10)), Ok((Some(1), 0)));
    });
    assert_eq!(q.pop_blocking(Duration::from_millis(5)), Ok((None, 0)));
}

#[test]
fn a_split_push_publishes_at_write_claimed_to_a_waiting_pop() {
    let q = MpmcQueue::<u64>::anonymous(4).unwrap();
    let pos = q.claim().unwrap();
    // Claimed, not written: consumers wait at that position.
    assert_eq!(q.try_pop(), Ok((None, 0)));
    assert_eq!(q.len(), 1);
    std::thread::scope(|s| {
        let popper = s.spawn(|| q.pop_blocking(Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(30));
        q.write_claimed(pos, &42).unwrap();
        assert_eq!(popper.join().unwrap(), Ok((Some(42), 0)));
    });
    // A position is written once.
    assert!(q.write_claimed(pos, &43).is_err());
    assert!(q.is_empty());
}

/// A claim this process will not write after all is given back: a pop waiting at its
/// position passes it (one healed position) and takes the item pushed after it, instead of
/// waiting at the claim until its timeout (no heal could prove the holder of the claim
/// dead while this process lives).
#[test]
fn an_abandoned_claim_lets_a_pop_waiting_at_it_pass() {
    let q = MpmcQueue::<u64>::anonymous(4).unwrap();
    let pos = q.claim().unwrap();
    q.try_push(&8).unwrap();
    assert_eq!(q.try_pop(), Ok((None, 0)), "consumers wait at the claim");
    std::thread::scope(|s| {
        let popper = s.spawn(|| {
            let t0 = Instant::now();
            (q.pop_blocking(Duration::from_secs(20)), t0.elapsed())
        });
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(q.abandon_claim(pos), Ok(()));
        let (got, waited) = popper.join().unwrap();
        assert_eq!(got, Ok((Some(8), 1)));
        assert!(waited < Duration::from_secs(10), "not before {waited:?}");
    });
    assert_eq!(
        q.write_claimed(pos, &9),
        Err(PushError::Healed { pos }),
        "a late write for it writes nothing"
    );
    assert!(q.is_empty());
}

/// Whether the thread `tid` of this process is blocked in the futex system call.
pub(crate) fn asleep_in_futex(tid: i32) -> bool {
    crate::test_proc::blocked_in(tid, libc::SYS_futex).is_some()
}

/// Runs the blocking SPSC and MPMC calls with waiters from `make`: an empty pop times out
/// after its timeout; a pop waits for a push made later; a push into a full queue waits for
/// a pop made later; a pop waiting at a position claimed by a producer that died returns
/// soon after the position is healed (with `sleeps_in_futex`, the heal comes once the pop
/// is asleep in the futex, so that only a wake-up by the heal ends its sleep early).
/// Returns the consumer's waiter of the SPSC part for the caller to check.
fn queues_wait_with<W: WaitStrategy + Send>(
    mut make: impl FnMut() -> W,
    sleeps_in_futex: bool,
) -> W {
    let (mut p, mut c) = spsc_channel::<u64>(2).unwrap();
    let mut pop_wait = make();
    let t0 = Instant::now();
    assert_eq!(
        c.pop_timeout(&mut pop_wait, Duration::from_millis(20)),
        Ok(None)
    );
    assert!(t0.elapsed() >= Duration::from_millis(20));
    std::thread::scope(|s| {
        let mut push_wait = make();
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            p.try_push(&7).unwrap();
            p.try_push(&8).unwrap();
            // Full: waits until the consumer pops 7.
            p.push_timeout(&9, &mut push_wait, Duration::from_secs(20))
                .unwrap();
        });
        assert_eq!(
            c.pop_timeout(&mut pop_wait, Duration::from_secs(20)),
            Ok(Some(7))
        );
        std::thread::sleep(Duration::from_millis(30));
        for want in [8, 9] {
            assert_eq!(
                c.pop_timeout(&mut pop_wait, Duration::from_secs(20)),
                Ok(Some(want))
            );
        }
    });
    let q = MpmcQueue::<u64>::anonymous(2).unwrap();
    let mut mpmc_wait = make();
    assert_eq!(
        q.pop_timeout(&mut mpmc_wait, Duration::from_millis(5)),
        Ok((None, 0))
    );
    std::thread::scope(|s| {
        let mut push_wait = make();
        let q = &q;
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            for v in 1..=3 {
                q.push_timeout(&v, &mut push_wait, Duration::from_secs(20))
                    .unwrap();
            }
        });
        for want in 1..=3 {
            assert_eq!(
                q.pop_timeout(&mut mpmc_wait, Duration::from_secs(20)),
                Ok((Some(want), 0))
            );
            // Lets the producer fill the queue and wait for space.
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let q = MpmcQueue::<u64>::anonymous(4).unwrap();
    // Claimed and never published, as by a producer that died; an item queued behind it.
    let stuck = q.claim().unwrap();
    q.try_push(&7).unwrap();
    let mut heal_wait = make();
    let tid = AtomicI32::new(0);
    std::thread::scope(|s| {
        let popper = s.spawn(|| {
            // SAFETY: gettid has no preconditions.
            tid.store(unsafe { libc::gettid() }, Ordering::SeqCst);
            let r = q.pop_timeout(&mut heal_wait, Duration::from_secs(20));
            (r, Instant::now())
        });
        if sleeps_in_futex {
            let t0 = Instant::now();
            while !asleep_in_futex(tid.load(Ordering::SeqCst)) {
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "the pop never slept"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let healed_at = Instant::now();
        assert_eq!(
            q.heal_stuck_slot(StuckSlot {
                pos: stuck,
                kind: StuckKind::Claimed
            }),
            Ok(())
        );
        let (r, done) = popper.join().unwrap();
        assert_eq!(r, Ok((Some(7), 1)));
        // A pop the heal did not wake sleeps out its 20 s.
        let took = done - healed_at;
        assert!(
            took < Duration::from_secs(10),
            "woken {took:?} after the heal"
        );
    });
    pop_wait
}

#[test]
fn queues_wait_with_every_broadcast_strategy() {
    queues_wait_with(crate::BusySpin::new, false);
    queues_wait_with(crate::YieldBackoff::default, false);
    // Sleeps of up to 20 s: a pop that returns in time was woken by the push (or found
    // the word already bumped), never by its timeout.
    let w = queues_wait_with(
        || crate::FutexWait::new(8, Some(Duration::from_secs(20))),
        true,
    );
    let st = w.stats();
    assert!(st.sleeps >= 1, "{st:?}");
    assert_eq!(
        st.timed_out, 1,
        "only the empty pop's sleep, cut at its 20 ms: {st:?}"
    );
    assert!(st.woken + st.changed + st.rechecked >= 1, "{st:?}");
}

#[test]
fn a_futex_wait_never_sleeps_past_the_timeout_of_the_call() {
    // Each sleep may last 30 s; the calls' 30 ms deadlines cut them.
    let mut wait = crate::FutexWait::new(0, Some(Duration::from_secs(30)));
    let (mut p, mut c) = spsc_channel::<u64>(1).unwrap();
    let t0 = Instant::now();
    assert_eq!(
        c.pop_timeout(&mut wait, Duration::from_millis(30)),
        Ok(None)
    );
    p.try_push(&1).unwrap();
    assert_eq!(
        p.push_timeout(&2, &mut wait, Duration::from_millis(30)),
        Err(PushError::Full)
    );
    let q = MpmcQueue::<u64>::anonymous(2).unwrap();
    assert_eq!(
        q.pop_timeout(&mut wait, Duration::from_millis(30)),
        Ok((None, 0))
    );
    q.try_push(&1).unwrap();
    q.try_push(&1).unwrap();
    assert_eq!(
        q.push_timeout(&2, &mut wait, Duration::from_millis(30)),
        Err(PushError::Full)
    );
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(120), "{took:?}");
    assert!(
        took < Duration::from_secs(20),
        "a sleep outlived its call: {took:?}"
    );
    // A timeout too long for an Instant means no deadline, not a panic.
    assert_eq!(c.pop_timeout(&mut wait, Duration::MAX), Ok(Some(1)));
}

/// The child half of `producer_killed_mid_push_is_healed_from_another_process`: run only
/// by that test, in a child process (hence ignored).
#[test]
#[ignore = "child process of producer_killed_mid_push_is_healed_from_another_process"]
fn child_claims_and_hangs() {
    let path = std::env::var("RINGWIRE_QUEUE_CHILD").expect("run by the parent test");
    let q = MpmcQueue::<u64>::open(&path).unwrap();
    q.try_push(&1).unwrap();
    // Claim position 1 and never publish it: the parent kills us here.
    let _pos = q.claim().unwrap();
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Leaves `q` as a consumer that took position `pos` (the next to pop) and died before
/// freeing its slot would: the state its CAS of the dequeue cursor leaves, which a real pop
/// cannot be stopped at from outside.
pub(super) fn kill_consumer_mid_pop(q: &MpmcQueue<u64>, pos: u64) {
    // SAFETY: `q` outlives this use of the core queue.
    let core = unsafe { q.core() };
    core.view()
        .deq()
        .compare_exchange(pos, pos + 1, Ordering::Relaxed, Ordering::Relaxed)
        .expect("`pos` is the next position to pop");
}

/// Runs `child_claims_and_hangs` on the queue file at `path` (it pushes 1 at position 0
/// and claims position 1), waits until `q` shows the claim, then kills it with SIGKILL and
/// reaps it: a producer known to have died mid-push.
fn kill_a_child_mid_push(q: &MpmcQueue<u64>, path: &Path) {
    let mut child = KillOnDrop(
        std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "queue::tests::child_claims_and_hangs",
                "--ignored",
                "--test-threads=1",
            ])
            .env("RINGWIRE_QUEUE_CHILD", path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while q.next_stuck_slot(0).map(|s| s.pos) != Some(1) {
        assert!(Instant::now() < deadline, "the child never claimed");
        std::thread::sleep(Duration::from_millis(2));
    }
    child.0.kill().unwrap();
    child.0.wait().unwrap();
}

#[test]
fn producer_killed_mid_push_is_healed_from_another_process() {
    let path = TmpPath::shm("queue-killed");
    let q = MpmcQueue::<u64>::create(&path, 8).unwrap();
    // kill -9, and reap: the producer is now known to be dead.
    kill_a_child_mid_push(&q, &path);
    q.try_push(&3).unwrap();
    assert_eq!(q.try_pop(), Ok((Some(1), 0)));
    // Consumers wait on the dead producer's position...
    assert_eq!(q.try_pop(), Ok((None, 0)));
    assert_eq!(
        q.next_stuck_slot(0),
        Some(StuckSlot {
            pos: 1,
            kind: StuckKind::Claimed
        })
    );
    // ...until it is healed; then they pass it, and the count says one item was lost.
    assert_eq!(
        q.heal_stuck_slot(StuckSlot {
            pos: 1,
            kind: StuckKind::Claimed
        }),
        Ok(())
    );
    assert_eq!(q.try_pop(), Ok((Some(3), 1)));
    assert_eq!(q.next_stuck_slot(0), None);
}

/// Stuck slots whose holders are all dead are healed by the next handle that opens the file
/// alone: a queue whose processes all exited, one killed mid-push and one mid-pop, is
/// drained and refilled after a restart instead of stopping at those slots. While another
/// handle has the file open, nothing is healed (its holder may be that handle's process).
#[test]
fn an_opener_alone_on_the_file_heals_slots_whose_holders_died() {
    let path = TmpPath::shm("queue-alonehealed");
    let q = MpmcQueue::<u64>::create(&path, 4).unwrap();
    kill_a_child_mid_push(&q, &path);
    q.try_push(&2).unwrap();
    kill_consumer_mid_pop(&q, 0);
    let stuck = |q: &MpmcQueue<u64>| {
        let first = q.next_stuck_slot(0);
        let second = first.and_then(|s| q.next_stuck_slot(s.pos + 1));
        [first, second]
    };
    let both = [
        Some(StuckSlot {
            pos: 0,
            kind: StuckKind::MidPop,
        }),
        Some(StuckSlot {
            pos: 1,
            kind: StuckKind::Claimed,
        }),
    ];
    assert_eq!(stuck(&q), both);
    // Another handle is open (the creator): nothing is healed.
    let other = MpmcQueue::<u64>::open(&path).unwrap();
    assert_eq!(other.healed_at_open(), 0);
    assert_eq!(stuck(&other), both);
    drop((q, other));
    let q = MpmcQueue::<u64>::open(&path).unwrap();
    assert_eq!(q.healed_at_open(), 2);
    assert_eq!(stuck(&q), [None, None]);
    // Position 1 is passed (its item was never written), then item 2 comes.
    assert_eq!(q.try_pop(), Ok((Some(2), 1)));
    // Slot 0 was freed: four more pushes fit, the second of them into it.
    for v in 10..14 {
        assert_eq!(q.try_push(&v).map(|_| ()), Ok(()), "push {v}");
    }
    for v in 10..14 {
        assert_eq!(q.try_pop(), Ok((Some(v), 0)));
    }
}

#[test]
fn mpmc_file_shared_by_threads_and_reopened() {
    let path = TmpPath::shm("queue-mpmc");
    let q = MpmcQueue::<Order>::create(&path, 8).unwrap();
    const N: u64 = 2_000;
    let total: u64 = std::thread::scope(|s| {
        let mut producers = Vec::new();
        for t in 0..2u64 {
            let q = MpmcQueue::<Order>::open(&path).unwrap();
            producers.push(s.spawn(move || {
                let mut i = 0;
                while i < N {
                    if q.try_push(&order(t * N + i)).is_ok() {
                        i += 1;
                    } else {
                        std::thread::yield_now();
                    }
                }
            }));
        }
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let q = q.clone();
                s.spawn(move || {
                    let mut sum = 0;
                    let mut n = 0;
                    // SAFETY: `q` (a clone of the handle) outlives this use of its core.
                    let deq = || unsafe { q.core() }.view().deq();
                    while deq().load(ringwire_core::sync::Ordering::Relaxed) < 2 * N - 4 {
                        match q.try_pop().unwrap() {
                            (Some(o), 0) => {
                                assert_eq!(o, order(o.id));
                                sum += o.id;
                                n += 1;
                            }
                            (None, 0) => std::thread::yield_now(),
                            other => panic!("{other:?}"),
                        }
                    }
                    (sum, n)
                })
            })
            .collect();
        let (mut sum, mut n) = (0, 0);
        for h in hs {
            let (s2, n2) = h.join().unwrap();
            sum += s2;
            n += n2;
        }
        for p in producers {
            p.join().unwrap();
        }
        // The last few stay queued; drain them through a fresh handle on the file.
        drop(q);
        let q2 = MpmcQueue::<Order>::open(&path).unwrap();
        while let (Some(o), 0) = q2.try_pop().unwrap() {
            sum += o.id;
            n += 1;
        }
        assert_eq!(n, 2 * N);
        sum
    });
    assert_eq!(total, (0..2 * N).sum::<u64>());
}

/// A 4-slot MPMC file holding items 10 and 11 at positions 0 and 1, its cursors then set to
/// `enq` and `deq` (a corrupt file), and its creator handle (still open).
fn mpmc_file_with_cursors(name: &str, enq: u64, deq: u64) -> (TmpPath, MpmcQueue<u64>) {
    let path = TmpPath::shm(&format!("queue-{name}"));
    let q = MpmcQueue::<u64>::create(&path, 4).unwrap();
    assert_eq!(q.try_push(&10), Ok(0));
    assert_eq!(q.try_push(&11), Ok(1));
    // SAFETY: `q` outlives this use of the core queue.
    let v = unsafe { q.core() }.view();
    v.deq().store(deq, Ordering::Relaxed);
    v.enq().store(enq, Ordering::Relaxed);
    (path, q)
}

/// The attach error of opening `path` as `MpmcQueue<u64>`, and of `stat`'s read-only open.
fn open_errors(path: &Path) -> (QueueAttachError, String) {
    let e = match MpmcQueue::<u64>::open(path) {
        Err(QueueFileError::Attach { err, .. }) => err,
        other => panic!("open: {other:?}"),
    };
    let ro = ReadOnlyQueue::open(path, QueueKind::Mpmc)
        .unwrap_err()
        .to_string();
    (e, ro)
}

#[test]
fn an_mpmc_file_with_its_dequeue_cursor_past_the_enqueue_cursor_is_refused() {
    let (path, q) = mpmc_file_with_cursors("deqpast", 2, 10);
    // A handle open before the damage: the push lands where no consumer comes, and the pop
    // says the queue is corrupt instead of waiting out its timeout.
    assert_eq!(q.try_push(&12), Ok(2));
    // A pop given 30 s that ends with the error well before them did not wait for an item.
    let t0 = Instant::now();
    assert_eq!(
        q.pop_blocking(Duration::from_secs(30)),
        Err(PopError::Corrupt { pos: 10, word: 3 })
    );
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    drop(q);
    let (e, ro) = open_errors(&path);
    assert_eq!(
        e,
        QueueAttachError::BadCursors {
            enqueue: 3,
            dequeue: 10,
            capacity: 4
        }
    );
    assert!(
        ro.contains("corrupt queue cursors: enqueue 3, dequeue 10"),
        "{ro}"
    );
}

#[test]
fn an_mpmc_file_whose_cursors_are_ahead_of_its_slots_is_refused_not_wedged() {
    // The header page written back before a machine crash, the slot pages not.
    let (path, q) = mpmc_file_with_cursors("aheadofslots", 102, 100);
    let corrupt = PushError::Corrupt { pos: 102, word: 2 };
    assert_eq!(q.try_push(&12), Err(corrupt));
    assert_eq!(
        q.push_blocking(&12, Duration::from_millis(200)),
        Err(corrupt)
    );
    assert_eq!(q.try_pop(), Err(PopError::Corrupt { pos: 100, word: 1 }));
    drop(q);
    let (e, ro) = open_errors(&path);
    assert_eq!(
        e,
        QueueAttachError::StampOffLap {
            pos: 102,
            stamp: 2,
            enqueue: 102,
            dequeue: 100
        }
    );
    assert!(
        ro.contains("corrupt queue: the slot of position 102"),
        "{ro}"
    );
}

#[test]
fn an_mpmc_file_whose_enqueue_cursor_is_laps_ahead_is_refused_not_healed() {
    let (path, q) = mpmc_file_with_cursors("enqlaps", 1000, 0);
    drop(q);
    let (e, _) = open_errors(&path);
    assert_eq!(
        e,
        QueueAttachError::BadCursors {
            enqueue: 1000,
            dequeue: 0,
            capacity: 4
        }
    );
    let (path, q) = mpmc_file_with_cursors("enqflags", (1 << 61) + 2, 0);
    drop(q);
    assert!(matches!(
        open_errors(&path).0,
        QueueAttachError::BadCursors { .. }
    ));
}

#[test]
fn an_opener_alone_refuses_a_stamp_of_a_lap_the_cursors_rule_out() {
    // Cursors at 4 and 6 with items 4 and 5, but slot 3 written back from before position
    // 3 was pushed and popped (stamp 3, where 7 belongs): push 7 would find it full for
    // good. The slots at the cursors are sound, so only an opener alone on the file, which
    // can read every slot at rest, sees it.
    let path = TmpPath::shm("queue-stampofflap");
    let q = MpmcQueue::<u64>::create(&path, 4).unwrap();
    for v in 0..4 {
        assert_eq!(q.try_push(&v), Ok(v));
        assert_eq!(q.try_pop(), Ok((Some(v), 0)));
    }
    assert_eq!(q.try_push(&4), Ok(4));
    assert_eq!(q.try_push(&5), Ok(5));
    // SAFETY: `q` outlives this use of the core queue.
    unsafe { q.core() }
        .view()
        .slot_word(3)
        .store(3, Ordering::Relaxed);
    // Not alone: nothing can be told from a queue in use.
    let other = MpmcQueue::<u64>::open(&path).unwrap();
    assert_eq!(other.healed_at_open(), 0);
    drop((q, other));
    let err = QueueAttachError::StampOffLap {
        pos: 7,
        stamp: 3,
        enqueue: 6,
        dequeue: 4,
    };
    match MpmcQueue::<u64>::open(&path) {
        Err(QueueFileError::Attach { err: e, .. }) => assert_eq!(e, err),
        other => panic!("open alone: {other:?}"),
    }
    // Refused, not healed: the file is as it was, and the next opener says the same.
    assert!(matches!(
        MpmcQueue::<u64>::open(&path),
        Err(QueueFileError::Attach { .. })
    ));
}

/// An SPSC consumer's copy inherited through fork, dropped in the child after its parent's
/// consumer moved on, hands nothing back. Before, its drop stored the head it had at the
/// fork: the queue's consumer index went back, and the next consumer popped again items
/// already popped (and, the producer having refilled their slots meanwhile, newer items
/// out of order).
#[test]
fn a_forked_childs_copy_of_an_spsc_consumer_dropped_hands_nothing_back() {
    let path = TmpPath::shm("queue-forkedconsumer");
    let flag = TmpPath::shm("queue-forkedconsumer-go");
    let forked = TmpPath::shm("queue-forkedconsumer-forked");
    let mut tx = SpscProducer::<u64>::create(&path, 64).unwrap();
    for v in 1..=10 {
        tx.try_push(&v).unwrap();
    }
    let mut rx = SpscConsumer::<u64>::open(&path).unwrap();
    assert_eq!((rx.try_pop(), rx.try_pop()), (Ok(Some(1)), Ok(Some(2))));
    let at = &rx as *const SpscConsumer<u64> as usize;
    let child = {
        let (flag, forked) = (flag.path().clone(), forked.path().clone());
        // The child waits for the parent's consumer to finish, so the fork runs on a
        // thread of its own.
        std::thread::spawn(move || {
            crate::test_fork::forked(20, || {
                // SAFETY: `at` is `rx`'s address, which the fork copied; this child never
                // touches the original (it leaves through `_exit`), so the bitwise copy is
                // its only copy of the consumer.
                let copy = unsafe { std::ptr::read(at as *const SpscConsumer<u64>) };
                if std::fs::write(&forked, b"").is_err() {
                    return 3;
                }
                let t0 = Instant::now();
                while !flag.exists() {
                    if t0.elapsed() > Duration::from_secs(10) {
                        return 2;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                drop(copy);
                0
            })
        })
    };
    let t0 = Instant::now();
    while !forked.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the child never forked"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let rest: Vec<u64> = std::iter::from_fn(|| rx.try_pop().unwrap()).collect();
    assert_eq!(rest, (3..=10).collect::<Vec<_>>());
    drop(rx);
    std::fs::write(&flag, b"go").unwrap();
    crate::test_fork::assert_exited_0(child.join().unwrap(), "the copy's drop");
    // Every item was popped once: the next consumer finds the queue empty.
    let mut next = SpscConsumer::<u64>::open(&path).unwrap();
    assert_eq!(next.try_pop(), Ok(None));
    tx.try_push(&11).unwrap();
    assert_eq!(next.try_pop(), Ok(Some(11)));
}

/// The other side of the test above: a child's copy that pops on by itself (as after a
/// daemon's fork, its parent's consumer unused) hands its pops back when dropped, so the
/// next consumer goes on after them.
#[test]
fn a_forked_childs_copy_that_popped_on_by_itself_hands_its_pops_back() {
    let path = TmpPath::shm("queue-forkedpopper");
    let mut tx = SpscProducer::<u64>::create(&path, 64).unwrap();
    for v in 1..=4 {
        tx.try_push(&v).unwrap();
    }
    let rx = SpscConsumer::<u64>::open(&path).unwrap();
    let status = crate::test_fork::forked(10, || {
        // SAFETY: this child never touches the original again (it leaves through
        // `_exit`), so the bitwise copy is its only copy of the consumer.
        let mut copy = unsafe { std::ptr::read(&rx) };
        if (copy.try_pop(), copy.try_pop()) != (Ok(Some(1)), Ok(Some(2))) {
            return 2;
        }
        drop(copy);
        0
    });
    crate::test_fork::assert_exited_0(status, "pops in the child");
    drop(rx);
    let mut next = SpscConsumer::<u64>::open(&path).unwrap();
    assert_eq!(next.try_pop(), Ok(Some(3)));
}

/// The parent's side of that daemon case: its consumer popped items before the fork, not
/// handed back yet (fewer than `release_every`), and is dropped only after the child's
/// copy popped on and handed its pops back (a parent that waits for its daemon to be
/// ready, then returns from `main`). Its drop must hand nothing back. It stored the head
/// it had at the fork: the queue's consumer index went back from 6 to 2, and the next
/// consumer popped again the items the child had popped (3, where 7 is next).
#[test]
fn a_consumer_dropped_after_its_forked_copy_popped_on_hands_nothing_back() {
    let path = TmpPath::shm("queue-forkedparent");
    let mut tx = SpscProducer::<u64>::create(&path, 64).unwrap();
    for v in 1..=8 {
        tx.try_push(&v).unwrap();
    }
    let mut rx = SpscConsumer::<u64>::open(&path).unwrap();
    assert_eq!(rx.release_every(), 4);
    assert_eq!((rx.try_pop(), rx.try_pop()), (Ok(Some(1)), Ok(Some(2))));
    let status = crate::test_fork::forked(10, || {
        // SAFETY: this child never touches the original again (it leaves through
        // `_exit`), so the bitwise copy is its only copy of the consumer.
        let mut copy = unsafe { std::ptr::read(&rx) };
        for want in 3..=6 {
            if copy.try_pop() != Ok(Some(want)) {
                return 2;
            }
        }
        drop(copy);
        0
    });
    crate::test_fork::assert_exited_0(status, "pops in the child");
    let peek = ReadOnlyQueue::open(&path, QueueKind::Spsc).unwrap();
    assert_eq!(peek.snapshot().dequeue, 6, "the child handed its pops back");
    drop(rx);
    assert_eq!(peek.snapshot().dequeue, 6, "the parent's drop moved it");
    let mut next = SpscConsumer::<u64>::open(&path).unwrap();
    assert_eq!(next.try_pop(), Ok(Some(7)));
}

/// A queue file cut below 128 bytes (a ring's header) is reported by `ReadOnlyQueue` (what
/// `stat`, `top` and `heal` read a queue through) as a queue too short for its 384-byte
/// header, as the queue handles report it. It was a ring's error ("ring …: file is 100
/// bytes, shorter than the 128-byte ring header", `Error::Attach`), which names the wrong
/// kind of file and the wrong length.
#[test]
fn a_queue_file_cut_below_a_rings_header_is_still_a_short_queue() {
    let path = TmpPath::shm("queue-cut");
    drop(SpscProducer::<u64>::create(&path, 16).unwrap());
    for len in [100, 8, 0] {
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(len).unwrap();
        let e = ReadOnlyQueue::open(&path, QueueKind::Spsc).unwrap_err();
        assert!(
            matches!(
                e,
                crate::Error::QueueAttach {
                    source: QueueAttachError::TooShort { len: l },
                    ..
                } if l == len
            ),
            "{len} bytes: {e:?}"
        );
        let msg = e.to_string();
        assert!(
            msg.starts_with("queue ") && msg.contains("384-byte queue header"),
            "{msg}"
        );
    }
}

/// A queue created and opened through a relative path is not "replaced" after the process
/// changes its working directory, and its `flush` still syncs the directory the file is
/// in. Both looked the relative path up again from the new directory: `is_replaced` said
/// true of a queue still at its path (a handle told to reopen then found none, or another
/// queue), and `flush` synced another directory, or failed when the path's directory is
/// not there (here). In a forked child, whose `chdir` the test harness's other threads do
/// not see; it exits with one bit set for each fault found.
#[test]
fn a_relative_queue_path_still_names_the_queue_after_a_chdir() {
    let path = TmpPath::shm("queue-chdir");
    let _removed = path.beside("removed");
    let _spsc = path.beside("spsc");
    let (dir, name) = (path.parent().unwrap(), path.file_name().unwrap());
    let (top, sub) = (dir.parent().unwrap(), dir.file_name().unwrap());
    let status = crate::test_fork::forked(10, || {
        // A relative path with a directory in it: `sub/name` from the parent of `sub`.
        if std::env::set_current_dir(top).is_err() {
            return 128;
        }
        let rel = Path::new(sub).join(name);
        let (Ok(tx), Ok(removed)) = (
            MpmcQueue::<u64>::create(&rel, 8),
            SpscProducer::<u64>::create(rel.with_extension("removed"), 8),
        ) else {
            return 129;
        };
        let Ok(other) = MpmcQueue::<u64>::open(&rel) else {
            return 130;
        };
        let spsc = rel.with_extension("spsc");
        let (Ok(_spsc_producer), Ok(spsc_mem)) = (
            SpscProducer::<u64>::create(&spsc, 8),
            QueueMem::open(&spsc, QueueExpect::raw(QueueKind::Spsc)),
        ) else {
            return 132;
        };
        // A queue really gone from its path, which must still be seen as such.
        if std::fs::remove_file(path.with_extension("removed")).is_err()
            || tx.try_push(&1).is_err()
            || std::env::set_current_dir("/").is_err()
        {
            return 131;
        }
        let mut faults = 0;
        if tx.is_replaced() || other.is_replaced() || !removed.is_replaced() {
            faults |= 1;
        }
        if tx.flush().is_err() || other.flush().is_err() {
            faults |= 2;
        }
        if other.try_pop().ok() != Some((Some(1), 0)) {
            faults |= 4;
        }
        // An SPSC role taken on a mapping opened before the chdir (as a handle built from
        // it would be): its lock lands on the mapped file.
        let deq = ringwire_core::queue::qhdr::DEQ as i64;
        if !matches!(
            spsc_mem.lock_role(deq, "consumer"),
            Ok(mem::RoleLock::Held { .. })
        ) {
            faults |= 8;
        }
        faults
    });
    // 1: a queue called replaced after the chdir (or the removed one not); 2: a flush
    // failed; 4: the item pushed was not popped through the other handle; 8: a role lock
    // taken after the chdir failed.
    crate::test_fork::assert_exited_0(status, "a queue after a chdir");
}

/// Runs `call` on a thread that records its id, waits until that thread sleeps in the futex
/// system call, runs `then`, and returns what `call` returned and how long it took after
/// `then`.
fn once_asleep<R: Send>(call: impl FnOnce() -> R + Send, then: impl FnOnce()) -> (R, Duration) {
    let tid = AtomicI32::new(0);
    std::thread::scope(|s| {
        let sleeper = s.spawn(|| {
            // SAFETY: gettid has no preconditions.
            tid.store(unsafe { libc::gettid() }, Ordering::SeqCst);
            let r = call();
            (r, Instant::now())
        });
        let t0 = Instant::now();
        while !asleep_in_futex(tid.load(Ordering::SeqCst)) {
            assert!(t0.elapsed() < Duration::from_secs(10), "never slept");
            std::thread::sleep(Duration::from_millis(1));
        }
        let at = Instant::now();
        then();
        let (r, done) = sleeper.join().unwrap();
        (r, done - at)
    })
}

/// A waiter with 20 s futex sleeps: only a wake-up ends one within the 5 s the tests below
/// allow (their calls' own timeouts are 10 s).
fn long_sleeps() -> crate::FutexWait {
    crate::FutexWait::new(0, Some(Duration::from_secs(20)))
}

#[test]
fn a_blocking_pop_on_a_channel_whose_producer_is_dropped_returns_after_the_last_item() {
    // A consumer asleep on the empty queue is woken by the producer's drop.
    let (p, mut c) = spsc_channel::<u64>(4).unwrap();
    let (r, took) = once_asleep(
        || c.pop_timeout(&mut long_sleeps(), Duration::from_secs(10)),
        || drop(p),
    );
    assert_eq!(r, Ok(None));
    assert!(
        took < Duration::from_secs(5),
        "woken {took:?} after the drop"
    );
    // The same for a queue of byte strings.
    let (p, mut c) = spsc_bytes_channel(4, 16).unwrap();
    let mut buf = [0u8; 16];
    let (r, took) = once_asleep(
        || c.pop_timeout(&mut buf, &mut long_sleeps(), Duration::from_secs(10)),
        || drop(p),
    );
    assert_eq!(r, Ok(None));
    assert!(
        took < Duration::from_secs(5),
        "woken {took:?} after the drop"
    );
    assert!(c.is_abandoned());
    let (mut p, mut c) = spsc_channel::<u64>(4).unwrap();
    assert!(!c.is_abandoned() && !p.is_abandoned());
    // Items pushed before the drop still come, then the wait ends at once, whatever its
    // timeout.
    p.try_push(&1).unwrap();
    p.push_slice(&[2, 3]).unwrap();
    drop(p);
    assert!(c.is_abandoned());
    for want in 1..=3 {
        assert_eq!(c.pop_blocking(Duration::from_secs(10)), Ok(Some(want)));
    }
    let t0 = Instant::now();
    assert_eq!(c.pop_blocking(Duration::MAX), Ok(None));
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    // A queue file's consumer is never abandoned: another producer may open the file.
    let path = TmpPath::shm("queue-abandon");
    let p = SpscProducer::<u64>::create(&path, 4).unwrap();
    let mut c = SpscConsumer::<u64>::open(&path).unwrap();
    drop(p);
    assert!(!c.is_abandoned());
    let t0 = Instant::now();
    assert_eq!(c.pop_blocking(Duration::from_millis(30)), Ok(None));
    assert!(t0.elapsed() >= Duration::from_millis(30));
}

#[test]
fn a_blocking_push_on_a_channel_whose_consumer_is_dropped_stops_waiting() {
    let (mut p, c) = spsc_channel::<u64>(2).unwrap();
    p.push_slice(&[1, 2]).unwrap();
    let (r, took) = once_asleep(
        || p.push_timeout(&3, &mut long_sleeps(), Duration::from_secs(10)),
        || drop(c),
    );
    assert_eq!(r, Err(PushError::Full));
    assert!(
        took < Duration::from_secs(5),
        "woken {took:?} after the drop"
    );
    assert!(p.is_abandoned());
    let t0 = Instant::now();
    assert_eq!(p.push_blocking(&3, Duration::MAX), Err(PushError::Full));
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    // A queue of byte strings, and `wait_for_space`, which then reports no free slot.
    let (mut p, c) = spsc_bytes_channel(2, 16).unwrap();
    p.push_slice(&[b"a", b"b"]).unwrap();
    let (free, took) = once_asleep(
        || p.wait_for_space(&mut long_sleeps(), Duration::from_secs(10)),
        || drop(c),
    );
    assert_eq!(free, 0);
    assert!(
        took < Duration::from_secs(5),
        "woken {took:?} after the drop"
    );
    assert_eq!(
        p.push_timeout(b"c", &mut long_sleeps(), Duration::MAX),
        Err(PushError::Full)
    );
}

/// An empty path (an unset variable, say) is named as `""` in the message, not left out so
/// that it reads "queue : open failed".
#[test]
fn an_empty_queue_path_is_named_in_the_message() {
    let open = MpmcQueue::<u64>::open("").unwrap_err().to_string();
    assert!(open.starts_with("queue \"\": "), "{open}");
    let create = SpscProducer::<u64>::create("", 8).unwrap_err().to_string();
    assert!(create.starts_with("queue \"\": "), "{create}");
}

/// The read-only open (`ringwire stat`, `top`, `heal`) refuses an empty path by name, as
/// the ring's and the blackboard's opens do: it said only "open failed: No such file or
/// directory (os error 2)", naming neither the queue nor its path (an `Error::Io` leaves
/// an empty path out of its text).
#[test]
fn a_read_only_open_of_an_empty_path_says_the_path_is_empty() {
    for kind in [QueueKind::Spsc, QueueKind::Mpmc] {
        let Err(e) = ReadOnlyQueue::open("", kind) else {
            panic!("an empty path opened");
        };
        assert!(
            matches!(&e, crate::Error::InvalidArgument { path, .. } if path.as_os_str().is_empty()),
            "{e:?}"
        );
        assert_eq!(e.to_string(), "the queue file's path is empty");
    }
}

/// A consumer offset file given for a queue (a swapped path: both lie in `/dev/shm`) is
/// named by its magic, as the ring's opens name it; the queue's opens said only "bad queue
/// magic 0x53484d5f4f464653". The file is left as it was.
#[test]
fn an_offset_file_opened_as_a_queue_is_named_by_its_magic() {
    let path = TmpPath::shm("queue-on-offset-file");
    let ck = crate::OffsetCheckpoint::open_or_create(&path, "algo").unwrap();
    ck.save(41);
    let before = std::fs::read(&path).unwrap();
    let errs = [
        SpscProducer::<u64>::open(&path)
            .err()
            .map(|e| e.to_string()),
        SpscConsumer::<u64>::open(&path)
            .err()
            .map(|e| e.to_string()),
        SpscBytesConsumer::open(&path).err().map(|e| e.to_string()),
        MpmcQueue::<u64>::open(&path).err().map(|e| e.to_string()),
    ];
    let want = format!(
        "queue {}: bad queue magic 0x53484d5f4f464653 (the magic of a consumer offset file)",
        path.display()
    );
    for e in errs {
        assert_eq!(e.as_deref(), Some(want.as_str()));
    }
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the offset file changed"
    );
    assert_eq!(ck.load(), Some(41));
}

/// The read-only open (`ringwire stat`, `top`, `heal`) names a consumer offset file by its
/// magic too; it reported it as a queue cut short, "file is 64 bytes, shorter than the
/// 384-byte queue header".
#[test]
fn an_offset_file_opened_read_only_as_a_queue_is_named_by_its_magic() {
    let path = TmpPath::shm("ro-queue-on-offset-file");
    let ck = crate::OffsetCheckpoint::open_or_create(&path, "algo").unwrap();
    ck.save(41);
    for kind in [QueueKind::Spsc, QueueKind::Mpmc] {
        let Err(e) = ReadOnlyQueue::open(&path, kind) else {
            panic!("an offset file opened as a queue");
        };
        assert!(matches!(e, crate::Error::BadFileMagic { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!(
                "queue {}: bad magic 0x53484d5f4f464653 (the magic of a consumer offset file)",
                path.display()
            )
        );
    }
    assert_eq!(ck.load(), Some(41));
}
