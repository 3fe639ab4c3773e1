//! `ringwire heal`: an MPMC queue file's stuck slots are healed when no other process has
//! it open and reported (exit 1) otherwise; a lossy MPMC ring's slots left mid-write are
//! healed only with `--producers-dead`; a blackboard key left mid-write is reported (exit
//! 1); other files have nothing to heal.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ringwire::MpmcProducer;
use ringwire::core::Geometry;
use ringwire::core::layout::hdr;
use ringwire::core::queue::PopError;
use ringwire::lossy_mpmc::LossyPush;
use ringwire::queue::MpmcQueue;
use ringwire::{CleanupMode, CreateOptions, RingFile};

mod common;
use common::{TmpRing, ringwire};

#[test]
fn a_queue_files_stuck_claim_is_healed_once_no_other_process_has_it_open() {
    let t = TmpRing::new("heal-q");
    let path = t.0.to_str().unwrap();
    let q = MpmcQueue::<u64>::create(&t.0, 8).unwrap();
    q.try_push(&10).unwrap();
    // A producer claims position 1 and dies before writing it.
    let stuck = q.claim().unwrap();
    q.try_push(&12).unwrap();
    // This process still has the queue open, as its creator and as another opener: the
    // holder may be alive.
    let other = MpmcQueue::<u64>::open(&t.0).unwrap();
    for _ in 0..2 {
        let (code, out, err) = ringwire(&["heal", path]);
        assert_eq!(code, 1, "{out}");
        assert!(
            err.contains(&format!(
                "{path}: 1 position(s) stuck (the first: {stuck}, claimed by a producer) and not \
                 healed: another process has the queue open"
            )) && err.contains("Stop every process using the queue"),
            "{err}"
        );
    }
    let (code, _, err) = ringwire(&["heal", path, "--producers-dead"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("--producers-dead is for a lossy MPMC ring"),
        "{err}"
    );
    drop(other);
    let (_, out, _) = ringwire(&["stat", path, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["claimed_unpublished"], stuck);

    drop(q);
    await_closed_elsewhere(&t.0);
    let (code, out, err) = ringwire(&["heal", path]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("healed 1 stuck position(s)"), "{out}");
    let (_, out, _) = ringwire(&["stat", path, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["claimed_unpublished"].is_null(), "{v}");
    // The consumers pass the healed position: 10, then 12.
    let q = MpmcQueue::<u64>::open(&t.0).unwrap();
    assert_eq!(q.try_pop_with_pos(|_| ()), Ok(Some((0, 10))));
    let mut healed = Vec::new();
    assert_eq!(q.try_pop_with_pos(|p| healed.push(p)), Ok(Some((2, 12))));
    assert_eq!(healed, [stuck]);
    drop(q);
    await_closed_elsewhere(&t.0);
    let (code, out, err) = ringwire(&["heal", path]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("no stuck positions; nothing to heal"), "{out}");

    // A corrupt file (cursors at and past 2^61, past any position a queue reaches): the
    // open refuses the cursors, and heal says so.
    let mut bytes = std::fs::read(&t.0).unwrap();
    bytes[128..136].copy_from_slice(&((1u64 << 61) + 1).to_le_bytes());
    bytes[256..264].copy_from_slice(&(1u64 << 61).to_le_bytes());
    // Slot 0's stamp (at the slots' offset, 384) says position 2^61 is being written.
    bytes[384..392].copy_from_slice(&(1u64 << 61).to_le_bytes());
    std::fs::write(&t.0, &bytes).unwrap();
    let (code, out, err) = ringwire(&["heal", path]);
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains("corrupt queue cursors: enqueue 2305843009213693953, dequeue 2305843009213693952 (capacity 8)"),
        "{err}"
    );
}

/// A queue file one of whose slots holds a stamp that no state of its cursors leaves there
/// (scribbled; or cursors and slots from different times, after a machine crash), with
/// nothing stuck: heal found nothing stuck and said "nothing to heal", exit 0, while every
/// pop stopped at that position with a corrupt-queue error and a lone `MpmcQueue::open`
/// refused the file. With no other process on the file, heal now checks its slots as that
/// open does and reports the same error; a queue in use is not judged (its pushes and pops
/// in flight would look the same).
#[test]
fn heal_reports_a_scribbled_stamp_that_a_lone_open_refuses() {
    let t = TmpRing::new("heal-q-stamp");
    let path = t.0.to_str().unwrap();
    let q = MpmcQueue::<u64>::create(&t.0, 8).unwrap();
    for v in 0..3 {
        q.try_push(&v).unwrap();
    }
    // Position 1's stamp (slot 1: the slots' offset 384, plus a 16-byte stride).
    let mut bytes = std::fs::read(&t.0).unwrap();
    bytes[400..408].copy_from_slice(&u64::MAX.to_le_bytes());
    std::fs::write(&t.0, &bytes).unwrap();
    // Every pop stops at position 1.
    assert_eq!(q.try_pop(), Ok((Some(0), 0)));
    for _ in 0..2 {
        assert_eq!(
            q.try_pop(),
            Err(PopError::Corrupt {
                pos: 1,
                word: u64::MAX
            })
        );
    }
    let what = "the slot of position 1 holds stamp 0xffffffffffffffff, which no state with \
                enqueue cursor 3 and dequeue cursor 1 leaves there";
    let (code, out, err) = ringwire(&["heal", path]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("no stuck positions (other processes have the queue open"),
        "{out}"
    );
    drop(q);
    // Between its fork and its exec, a child another test spawns holds copies of this
    // process's descriptors: an open or a heal may find the file not alone for that
    // instant, so each is tried again until it is.
    let deadline = Instant::now() + Duration::from_secs(30);
    let open = loop {
        match MpmcQueue::<u64>::open(&t.0) {
            Err(e) => break e.to_string(),
            Ok(q) if Instant::now() < deadline => drop(q),
            Ok(_) => panic!("the lone open never refused the file"),
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(open.contains(what), "{open}");
    let (code, out, err) = loop {
        let r = ringwire(&["heal", path]);
        if r.0 != 0 || Instant::now() >= deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(code, 1, "{out}");
    assert!(err.contains(path) && err.contains(what), "{err}");
}

/// The `stat --json` object of `path`.
fn stat(path: &str) -> serde_json::Value {
    let (code, out, err) = ringwire(&["stat", path, "--json"]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

/// A lossy ring whose slot holds a sequence at or past `claim_seq`, which no producer
/// writes (a ticket is claimed before its slot is written): a corrupt ring, on which every
/// push landing on that slot is discarded, lap after lap. heal said "no slot left
/// mid-write; nothing to heal", exit 0; it now reports the slot, its sequence and
/// `claim_seq`, exit 1, and heals nothing, with or without `--producers-dead`.
#[test]
fn heal_reports_a_lossy_ring_slot_holding_a_sequence_past_claim_seq() {
    let t = TmpRing::new("heal-lossy-ahead");
    let path = t.0.to_str().unwrap();
    let mut p = MpmcProducer::<u64>::create(&t.0, 4).unwrap();
    p.set_cleanup_mode(CleanupMode::Persistent);
    for v in 1..=2 {
        assert_eq!(p.push(&v), v);
    }
    {
        // SAFETY: the view is used while `p` keeps the mapping.
        let v = unsafe { p.file().view() };
        v.slot_seq(3).store(1 << 62, Ordering::SeqCst);
        v.slot_seq(2).store(u64::MAX, Ordering::SeqCst);
    }
    // Tickets 3 and 7 land on slot 3: discarded.
    for t in 3..=7 {
        let out = p.push_outcome(&t);
        assert_eq!(
            matches!(out, LossyPush::Discarded { .. }),
            t % 4 == 3,
            "{t}: {out:?}"
        );
    }
    drop(p);
    let before = std::fs::read(&t.0).unwrap();
    for args in [&["heal", path][..], &["heal", path, "--producers-dead"]] {
        let (code, out, err) = ringwire(args);
        assert_eq!(code, 1, "{out}");
        assert!(
            err.contains(&format!(
                "{path}: 1 slot(s) hold a sequence at or past claim_seq 8 (the first: slot 3, \
                 sequence 4611686018427387904)"
            )) && err.contains("corrupt"),
            "{err}"
        );
    }
    // (stat refuses this ring too, so the file itself shows the mid-write slot kept.)
    assert!(
        std::fs::read(&t.0).unwrap() == before,
        "heal wrote the corrupt ring"
    );
}

/// A lossy ring whose header a consumer refuses at attach: `read_seq` past `claim_seq`, or
/// `claim_seq` at or past 2^63. On the first, heal said "no slot left mid-write; nothing to
/// heal", exit 0, and with `--producers-dead` healed a slot left mid-write beside it, exit 0;
/// on the second it gave the producer's attach error. It now reports the consumer's refusal
/// as a corrupt ring, exit 1, and writes nothing, with or without `--producers-dead`.
#[test]
fn heal_reports_a_lossy_ring_header_a_consumer_refuses() {
    let t = TmpRing::new("heal-lossy-header");
    let path = t.0.to_str().unwrap();
    let mut p = MpmcProducer::<u64>::create(&t.0, 4).unwrap();
    p.set_cleanup_mode(CleanupMode::Persistent);
    p.push(&1);
    let in_flight = {
        // SAFETY: the view is used while `p` keeps the mapping.
        let v = unsafe { p.file().view() };
        // Ticket 2 is claimed, and its slot is left as it was (its push in flight)...
        v.claim_seq().fetch_add(1, Ordering::SeqCst);
        let in_flight = std::fs::read(&t.0).unwrap();
        // ... or marked by a producer that died while copying: heal would heal it.
        v.slot_seq(2).store(u64::MAX, Ordering::SeqCst);
        in_flight
    };
    drop(p);
    await_closed_elsewhere(&t.0);
    let stuck = std::fs::read(&t.0).unwrap();
    let corrupt = [
        (
            hdr::READ_SEQ,
            102,
            "MPMC read_seq 102 is past claim_seq 3 (a corrupt header): consumers would take no \
             ticket until 99 more were claimed",
        ),
        (
            hdr::CLAIM_SEQ,
            1 << 63,
            "claim_seq 0x8000000000000000 is at or past the sequence limit 0x8000000000000000 \
             (a corrupt header): it leaves no valid ticket",
        ),
    ];
    for sound in [&in_flight, &stuck] {
        for (field, value, what) in corrupt {
            let mut bytes = sound.clone();
            bytes[field..field + 8].copy_from_slice(&u64::to_ne_bytes(value));
            std::fs::write(&t.0, &bytes).unwrap();
            for args in [&["heal", path, "--producers-dead"][..], &["heal", path]] {
                let (code, out, err) = ringwire(args);
                assert_eq!(code, 1, "{args:?}: {out}");
                assert!(err.contains(&format!("{path}: {what}")), "{args:?}: {err}");
                assert!(
                    err.contains(
                        "; every consumer refuses the ring at attach. heal changes nothing in it"
                    ),
                    "{err}"
                );
                assert_eq!(std::fs::read(&t.0).unwrap(), bytes, "{args:?}: written");
            }
        }
    }
    // The same ring with its sound header: nothing to heal, or the mid-write slot healed.
    std::fs::write(&t.0, &in_flight).unwrap();
    let (code, out, err) = ringwire(&["heal", path]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("no slot left mid-write; nothing to heal"),
        "{out}"
    );
    std::fs::write(&t.0, &stuck).unwrap();
    heals_slot_2_with_producers_dead(path);
}

#[test]
fn a_lossy_rings_slot_left_mid_write_is_healed_only_once_its_producers_are_dead() {
    let t = TmpRing::new("heal-lossy");
    let path = t.0.to_str().unwrap();
    let mut p = MpmcProducer::<u64>::create(&t.0, 4).unwrap();
    let (code, out, err) = ringwire(&["heal", path]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("no slot left mid-write; nothing to heal"),
        "{out}"
    );
    p.push(&1);
    // A producer took ticket 2, marked its slot and died while copying.
    {
        // SAFETY: the view is used while `p` keeps the mapping.
        let v = unsafe { p.file().view() };
        v.claim_seq().fetch_add(1, Ordering::SeqCst);
        v.slot_seq(2).store(u64::MAX, Ordering::SeqCst);
    }
    // The creating producer is alive (its lock is held): refused, even with the flag.
    for args in [&["heal", path][..], &["heal", path, "--producers-dead"]] {
        let (code, out, err) = ringwire(args);
        assert_eq!(code, 1, "{out}");
        assert!(
            err.contains(&format!(
                "{path}: 1 slot(s) left mid-write (the first: 2) and not healed: the ring's \
                 creating producer (pid {}",
                std::process::id()
            )),
            "{err}"
        );
    }
    assert_eq!(stat(path)["mid_write_slots"], 1);

    // Every producer exits; the ring stays.
    p.set_cleanup_mode(CleanupMode::Persistent);
    drop(p);
    await_closed_elsewhere(&t.0);
    let (code, out, err) = ringwire(&["heal", path]);
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains(&format!(
            "{path}: 1 slot(s) left mid-write (the first: 2) and not healed: a producer that \
             died while copying"
        )) && err.contains("run heal again with --producers-dead"),
        "{err}"
    );
    assert_eq!(stat(path)["mid_write_slots"], 1);
    heals_slot_2_with_producers_dead(path);
    let _ = std::fs::remove_file(&t.0);
}

/// `heal --producers-dead` on the lossy ring at `path`, whose slot 2 is left mid-write,
/// heals it.
fn heals_slot_2_with_producers_dead(path: &str) {
    let (code, out, err) = ringwire(&["heal", path, "--producers-dead"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("healed slot 2 (left mid-write)\nhealed 1 slot(s) left mid-write\n"),
        "{out}"
    );
    assert_eq!(stat(path)["mid_write_slots"], 0);
}

/// A busy ring: an attached producer (which holds no lock) pushes while a slot stays
/// mid-write, between heal's two scans. The tickets move between them, so nothing is healed,
/// flag or not. The push is made while heal is held (traced) at the start of the sleep
/// between its scans: a producer pushing on a timer instead pushed nothing in that 20 ms
/// when kept off a core, and the slot was healed.
#[test]
fn a_lossy_ring_whose_producers_push_is_not_healed() {
    let t = TmpRing::new("heal-busy");
    let path = t.0.to_str().unwrap();
    let mut creator = MpmcProducer::<u64>::create(&t.0, 8).unwrap();
    creator.push(&1);
    {
        // SAFETY: the view is used while `creator` keeps the mapping.
        let v = unsafe { creator.file().view() };
        v.claim_seq().fetch_add(1, Ordering::SeqCst);
        v.slot_seq(2).store(u64::MAX, Ordering::SeqCst);
    }
    creator.set_cleanup_mode(CleanupMode::Persistent);
    drop(creator);
    let p = MpmcProducer::<u64>::attach(&t.0).unwrap();
    let (code, out, err) = ringwire_at_first_sleep(&["heal", path, "--producers-dead"], || {
        p.push(&7);
    });
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains("and not healed: producers are pushing (claim_seq "),
        "{err}"
    );
    let _ = std::fs::remove_file(&t.0);
}

/// Runs the `ringwire` binary with `args` under ptrace and calls `at_sleep` while it is
/// stopped on entry to its first `clock_nanosleep`, then lets it go on: (exit code, stdout,
/// stderr). Fails if it exits without sleeping.
fn ringwire_at_first_sleep(args: &[&str], at_sleep: impl FnOnce()) -> (i32, String, String) {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ringwire"));
    cmd.args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    // SAFETY: the closure only makes the async-signal-safe ptrace call; the child then
    // stops at its exec, traced by this thread (the one that forked it).
    unsafe {
        cmd.pre_exec(|| {
            if libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().expect("run the ringwire binary");
    let pid = child.id() as libc::pid_t;
    // Waits for the child's next stop: the signal it stopped for, `None` once it exited.
    let next_stop = || {
        let mut status = 0;
        // SAFETY: `status` is a valid, writable int; `pid` is our child.
        let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(waited, pid, "waitpid");
        libc::WIFSTOPPED(status).then(|| libc::WSTOPSIG(status))
    };
    assert!(next_stop().is_some(), "the child did not stop at its exec");
    let mut sig = 0;
    loop {
        // SAFETY: `pid` is our tracee, stopped; it runs on to its next system call entry or
        // exit, receiving `sig` (a signal it stopped for, passed on).
        let resumed = unsafe { libc::ptrace(libc::PTRACE_SYSCALL, pid, 0, sig) };
        assert_eq!(resumed, 0, "PTRACE_SYSCALL");
        sig = match next_stop() {
            Some(libc::SIGTRAP) => 0,
            Some(s) => s,
            None => panic!("ringwire {args:?} exited without sleeping"),
        };
        // At a system call stop, the call it is in (entry or exit; the entry comes first).
        let call = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
        if sig == 0
            && call.split_whitespace().next() == Some(&libc::SYS_clock_nanosleep.to_string())
        {
            break;
        }
    }
    at_sleep();
    // SAFETY: `pid` is our tracee, stopped at a system call stop; it goes on untraced.
    assert_eq!(unsafe { libc::ptrace(libc::PTRACE_DETACH, pid, 0, 0) }, 0);
    let o = child.wait_with_output().expect("wait for ringwire");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A single-writer ring of 16 slots at `t`, removed when the handle is dropped.
fn single_writer_ring(t: &TmpRing) -> RingFile {
    let geo = Geometry::spmc(16, 16, 8, 0, false).unwrap();
    let opts = CreateOptions {
        cleanup: CleanupMode::UnlinkOnDrop,
        ..CreateOptions::default()
    };
    RingFile::create(&t.0, &geo, &opts).unwrap()
}

#[test]
fn files_without_stuck_slots_have_nothing_to_heal_and_bad_files_are_errors() {
    let t = TmpRing::new("heal-other");
    let path = t.0.to_str().unwrap();
    let ring = single_writer_ring(&t);
    let (code, out, err) = ringwire(&["heal", path]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("a single-writer ring has no stuck slots"),
        "{out}"
    );
    drop(ring);

    let prod = ringwire::queue::SpscProducer::<u64>::create(&t.0, 8).unwrap();
    drop(prod);
    // A sleeper's count left by a process killed asleep: heal only reads an SPSC queue (an
    // open as its only handle would reset the count).
    let mut bytes = std::fs::read(&t.0).unwrap();
    bytes[68..72].copy_from_slice(&3u32.to_le_bytes());
    std::fs::write(&t.0, &bytes).unwrap();
    let (code, out, err) = ringwire(&["heal", path]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("an SPSC queue has no stuck slots"), "{out}");
    assert_eq!(stat(path)["data_waiters"], 3);
    let _ = std::fs::remove_file(&t.0);

    std::fs::write(&t.0, [7u8; 200]).unwrap();
    let (code, out, err) = ringwire(&["heal", path]);
    assert_eq!(code, 1, "{out}");
    assert!(err.contains(path) && err.contains("magic"), "{err}");
    let (code, _, err) = ringwire(&["heal"]);
    assert_eq!(code, 1);
    assert!(err.contains("<PATH>"), "{err}");
}

/// Runs the `ringwire` binary with `args` as uid and gid 65534 (nobody), with no
/// supplementary groups (std drops them when root sets the uid): (exit code, stdout, stderr).
fn ringwire_as_nobody(args: &[&str]) -> (i32, String, String) {
    use std::os::unix::process::CommandExt;
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_ringwire"))
        .args(args)
        .uid(65534)
        .gid(65534)
        .output()
        .expect("run the ringwire binary as nobody");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Makes the file at `path` root's 0644 file (readable, not writable, by nobody) in a
/// directory nobody may enter; returns its bytes, to check that heal writes nothing.
fn readable_by_nobody(path: &std::path::Path) -> Vec<u8> {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: getuid has no preconditions.
    assert_eq!(unsafe { libc::getuid() }, 0, "run as root");
    let dir = path.parent().unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::read(path).unwrap()
}

/// Heal of a single-writer ring it may only read (root's 0644 file, healed as nobody):
/// nothing to heal, as before (exit 0), where `stat` already worked. Nothing is written.
#[test]
#[ignore = "needs root: runs heal as uid 65534 on a root-owned 0644 ring"]
fn heal_reports_a_single_writer_ring_it_may_not_write() {
    let t = TmpRing::new("heal-ro-spmc");
    let path = t.0.to_str().unwrap();
    let _ring = single_writer_ring(&t);
    let bytes = readable_by_nobody(&t.0);
    let (code, _, err) = ringwire_as_nobody(&["stat", path]);
    assert_eq!(code, 0, "stat as nobody: {err}");
    let (code, out, err) = ringwire_as_nobody(&["heal", path]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("a single-writer ring has no stuck slots"),
        "{out}"
    );
    assert_eq!(std::fs::read(&t.0).unwrap(), bytes);
}

/// Heal of a lossy MPMC ring it may only read (root's 0644 file, healed as nobody): with
/// nothing stuck, reported as before (exit 0); a slot left mid-write is reported with the
/// reason it stays (no write access, and without --producers-dead that flag's) and exit 1.
/// Nothing is written. Root then heals it, as before.
#[test]
#[ignore = "needs root: runs heal as uid 65534 on a root-owned 0644 ring"]
fn heal_reports_a_lossy_rings_slot_left_mid_write_it_may_not_write() {
    let t = TmpRing::new("heal-ro-lossy");
    let path = t.0.to_str().unwrap();
    let mut p = MpmcProducer::<u64>::create(&t.0, 4).unwrap();
    p.push(&1);
    let bytes = readable_by_nobody(&t.0);
    let (code, out, err) = ringwire_as_nobody(&["heal", path]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("no slot left mid-write; nothing to heal"),
        "{out}"
    );
    assert_eq!(std::fs::read(&t.0).unwrap(), bytes);
    // A producer took ticket 2, marked its slot and died while copying; every producer
    // has exited since.
    {
        // SAFETY: the view is used while `p` keeps the mapping.
        let v = unsafe { p.file().view() };
        v.claim_seq().fetch_add(1, Ordering::SeqCst);
        v.slot_seq(2).store(u64::MAX, Ordering::SeqCst);
    }
    p.set_cleanup_mode(CleanupMode::Persistent);
    drop(p);
    await_closed_elsewhere(&t.0);
    let bytes = readable_by_nobody(&t.0);
    let needs = format!(
        "{path}: 1 slot(s) left mid-write (the first: 2) and not healed: healing needs write \
         access to {path}, which this process does not have"
    );
    let (code, out, err) = ringwire_as_nobody(&["heal", path]);
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains(&needs)
            && err.contains("Permission denied")
            && err.contains("Besides: a producer that died while copying")
            && err.contains("run heal again with --producers-dead"),
        "{err}"
    );
    let (code, out, err) = ringwire_as_nobody(&["heal", path, "--producers-dead"]);
    assert_eq!(code, 1, "{out}");
    assert!(err.contains(&needs) && !err.contains("Besides"), "{err}");
    assert_eq!(std::fs::read(&t.0).unwrap(), bytes);
    assert_eq!(stat(path)["mid_write_slots"], 1);
    // Who may write the file heals it, as before.
    heals_slot_2_with_producers_dead(path);
}

/// Heal of an MPMC queue it may only read (root's 0644 file, healed as nobody, no other
/// process has it open): a stuck claim is reported, with no write access as the reason,
/// and heal exits 1; with nothing stuck it exits 0. Nothing is written. Root then heals it.
#[test]
#[ignore = "needs root: runs heal as uid 65534 on a root-owned 0644 queue"]
fn heal_reports_a_queue_it_may_not_write() {
    let t = TmpRing::new("heal-ro-q");
    let path = t.0.to_str().unwrap();
    let q = MpmcQueue::<u64>::create(&t.0, 8).unwrap();
    q.try_push(&10).unwrap();
    // A producer claims position 1 and dies before writing it.
    let stuck = q.claim().unwrap();
    q.try_push(&12).unwrap();
    drop(q);
    await_closed_elsewhere(&t.0);
    let bytes = readable_by_nobody(&t.0);
    let (code, out, err) = ringwire_as_nobody(&["heal", path]);
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains(&format!(
            "{path}: 1 position(s) stuck (the first: {stuck}, claimed by a producer) and not \
             healed: healing needs write access to {path}, which this process does not have"
        )) && err.contains("Permission denied"),
        "{err}"
    );
    assert_eq!(std::fs::read(&t.0).unwrap(), bytes);
    assert_eq!(stat(path)["claimed_unpublished"], stuck);

    let (code, out, err) = ringwire(&["heal", path]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("healed 1 stuck position(s)"), "{out}");
    let bytes = readable_by_nobody(&t.0);
    let (code, out, err) = ringwire_as_nobody(&["heal", path]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("no stuck positions; nothing to heal"), "{out}");
    assert_eq!(std::fs::read(&t.0).unwrap(), bytes);
}

/// Returns once no process but this one has a descriptor of `path` open (`/proc/<pid>/fd`);
/// fails after 30 s. A child that another test of this binary forked holds a copy of every
/// descriptor this process had then, and so of the locks heal looks for (a flock, an OFD
/// record lock), until it execs (they are close-on-exec): a heal that must find nobody
/// comes after this.
fn await_closed_elsewhere(path: &std::path::Path) {
    let me = std::process::id();
    let open_elsewhere = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|&pid| pid != me)
            .find(|pid| {
                std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
                    fds.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
                        .any(|target| target == path)
                })
            })
    };
    let t0 = std::time::Instant::now();
    while let Some(pid) = open_elsewhere() {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(30),
            "process {pid} still has {} open",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// An MPMC queue with nothing stuck is only read now (heal opens it read-write only to
/// heal), and heal still says whether other processes have it open: its creator (by its
/// flock), another opener (by its record lock), then nobody.
#[test]
fn a_queue_with_nothing_stuck_says_whether_others_have_it_open() {
    let t = TmpRing::new("heal-q-none");
    let path = t.0.to_str().unwrap();
    let others = "no stuck positions (other processes have the queue open; pushes and pops in \
                  flight pass)";
    let q = MpmcQueue::<u64>::create(&t.0, 8).unwrap();
    q.try_push(&10).unwrap();
    let (code, out, err) = ringwire(&["heal", path]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(others), "{out}");
    let other = MpmcQueue::<u64>::open(&t.0).unwrap();
    drop(q);
    let (code, out, err) = ringwire(&["heal", path]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(others), "{out}");
    drop(other);
    await_closed_elsewhere(&t.0);
    let (code, out, err) = ringwire(&["heal", path]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("{path}: no stuck positions; nothing to heal")),
        "{out}"
    );
}

/// A blackboard key whose seqlock stays odd (its writer killed mid-write) makes every read
/// of it fail with "writer stalled": heal reports the key (exit 1), where it said a
/// blackboard has no stuck slots. A board with none is fine (exit 0). Nothing is written.
#[test]
fn heal_reports_a_blackboard_key_left_mid_write() {
    let t = TmpRing::new("heal-bb");
    let path = t.0.to_str().unwrap();
    // Removed when dropped (the default cleanup mode).
    let mut board = ringwire::BlackboardProducer::<[u64; 5]>::create(&t.0, 4).unwrap();
    board.write(1, &[7; 5]).unwrap();
    let (code, out, err) = ringwire(&["heal", path]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("no blackboard key left mid-write"), "{out}");
    // Key 1's seqlock (at 128 + 64) left odd, as by a writer killed mid-write.
    let mut bytes = std::fs::read(&t.0).unwrap();
    bytes[192..200].copy_from_slice(&5u64.to_le_bytes());
    std::fs::write(&t.0, &bytes).unwrap();
    let (code, out, err) = ringwire(&["heal", path]);
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains("1 blackboard key(s) left mid-write for over")
            && err.contains("(the first: 1; all: [1])"),
        "{err}"
    );
    assert_eq!(std::fs::read(&t.0).unwrap(), bytes);
    drop(board);
}
