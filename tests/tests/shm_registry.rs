//! ringfire's reader-registry calls on ringwire's handles (`registry()`, `registration()`,
//! `active_readers()`), checked against ringfire 0.5.2 over the same ring files: both crates
//! list the same slots, pids, names, cursors and lags for readers of either crate at
//! different positions, a dropped reader disappears, a dead one (a killed helper process, a
//! slot of a pid that cannot exist) is pruned, and a registration names its listed slot.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ringwire::core::broadcast::registry;
use ringwire::{
    BlobConsumer, BlobProducer, DEFAULT_MAX_READERS, FlowControl, RingConsumer, RingProducer,
    RingProducerBuilder,
};
use ringwire_tests::records::Rec;
use ringwire_tests::shm::{ShmPath, view};

const HELPER: &str = env!("CARGO_BIN_EXE_shm_helper");

/// A pid above Linux's largest `pid_max` (2^22): no process can have it.
const IMPOSSIBLE_PID: u32 = 1 << 30;

/// One listed reader, crate-neutral: (slot, pid, name, cursor_seq, lag).
type Row = (usize, u32, String, u64, u64);

fn rw_rows(v: Vec<ringwire::ReaderInfo>) -> Vec<Row> {
    v.into_iter()
        .map(|r| (r.slot_index, r.pid, r.name, r.cursor_seq, r.lag))
        .collect()
}

fn rf_rows(v: Vec<ringfire::ReaderInfo>) -> Vec<Row> {
    v.into_iter()
        .map(|r| (r.slot_index, r.pid, r.name, r.cursor_seq, r.lag))
        .collect()
}

fn row(slot: usize, pid: u32, name: &str, cursor: u64, lag: u64) -> Row {
    (slot, pid, name.to_string(), cursor, lag)
}

/// A lossy ringwire ring of 16 with 8 registry slots and records 1..=`n`.
fn rw_ring(tag: &str, n: u64) -> (ShmPath, RingProducer<Rec>) {
    let p = ShmPath::new(tag);
    let mut prod = RingProducerBuilder::new(16)
        .max_readers(8)
        .build::<Rec, _>(&p)
        .unwrap();
    for s in 1..=n {
        prod.push(&Rec::new(s));
    }
    (p, prod)
}

fn rw_named(p: &ShmPath, name: &str) -> RingConsumer<Rec> {
    RingConsumer::<Rec>::builder()
        .start_from_oldest()
        .consumer_name(name)
        .attach(p)
        .unwrap()
}

fn rf_named(p: &ShmPath, name: &str) -> ringfire::RingConsumer<Rec> {
    ringfire::RingConsumer::<Rec>::builder()
        .start_from_oldest()
        .consumer_name(name)
        .attach(p.path())
        .unwrap()
}

#[test]
fn a_ringwire_ring_lists_the_same_readers_on_both_crates() {
    let me = std::process::id();
    let (p, mut prod) = rw_ring("reg-rw", 10);
    let mut a = rw_named(&p, "rw-a");
    for _ in 0..3 {
        a.try_recv().unwrap();
    }
    let mut b = rf_named(&p, "rf-b");
    for _ in 0..7 {
        b.try_recv().unwrap();
    }
    let mut c = RingConsumer::<Rec>::attach_latest(&p).unwrap();
    assert_eq!(c.try_recv().map(|r| r.seq), Some(10));
    let mut d = ringfire::RingConsumer::<Rec>::attach(p.path()).unwrap();

    let expect = vec![
        row(0, me, "rw-a", 4, 7),
        row(1, me, "rf-b", 8, 3),
        row(2, me, "consumer", 11, 0),
        row(3, me, "consumer", 1, 10),
    ];
    let reg = prod.registry().expect("a registry of 8");
    assert_eq!(rw_rows(reg.active_readers(prod.sequence())), expect);
    assert_eq!(
        rw_rows(a.registry().unwrap().active_readers(10)),
        expect,
        "a consumer's registry lists the same"
    );
    let rf_reg = d.registry().expect("ringfire sees the registry");
    assert_eq!(rf_rows(rf_reg.active_readers(10)), expect);
    // Each listed lag is that reader's own idea of its backlog.
    assert_eq!((a.lag(), b.lag(), c.lag(), d.lag()), (7, 3, 0, 10));

    // The producer-side figures agree with ringfire's registry and the producer's own.
    assert_eq!((reg.capacity(), rf_reg.capacity()), (8, 8));
    assert_eq!(reg.min_cursor(), Some(1));
    assert_eq!(reg.min_reader_seq(), rf_reg.min_reader_seq());
    assert_eq!(reg.min_reader_seq(), Some(1));
    assert_eq!(reg.reader_lag(10), 10);
    assert_eq!(reg.reader_lag(10), rf_reg.reader_lag(10));
    assert_eq!(reg.reader_lag(10), prod.reader_lag());
    assert_eq!(reg.headroom(10, 16), 6);
    assert_eq!(reg.headroom(10, 16), rf_reg.headroom(10, 16));
    assert_eq!(reg.headroom(10, 16), prod.headroom());

    // The lag is what the reader then receives; the cursors move on both lists.
    let mut got = 0;
    while a.try_recv().is_some() {
        got += 1;
    }
    assert_eq!(got, 7);
    assert_eq!(d.try_recv().map(|r| r.seq), Some(1));
    prod.push(&Rec::new(11));
    let expect = vec![
        row(0, me, "rw-a", 11, 1),
        row(1, me, "rf-b", 8, 4),
        row(2, me, "consumer", 11, 1),
        row(3, me, "consumer", 2, 10),
    ];
    let reg = prod.registry().unwrap();
    assert_eq!(rw_rows(reg.active_readers(prod.sequence())), expect);
    assert_eq!(
        rf_rows(d.registry().unwrap().active_readers(prod.sequence())),
        expect
    );
    assert_eq!(reg.min_cursor(), Some(2));
    drop((b, c));
}

#[test]
fn a_ringfire_ring_lists_the_same_readers_and_registrations_name_their_slots() {
    let me = std::process::id();
    let p = ShmPath::new("reg-rf");
    let mut prod = ringfire::RingProducerBuilder::new(16)
        .flow_control(ringfire::FlowControl::LosslessBackpressure)
        .max_readers(4)
        .build::<Rec, _>(p.path())
        .unwrap();
    let mut rf = rf_named(&p, "rf");
    let mut rw = rw_named(&p, "rw");
    for s in 1..=5 {
        prod.push(&Rec::new(s));
    }
    assert_eq!(rw.try_recv().map(|r| r.seq), Some(1));
    assert_eq!(rw.try_recv().map(|r| r.seq), Some(2));
    let expect = vec![row(0, me, "rf", 1, 5), row(1, me, "rw", 3, 3)];
    let rf_reg = prod.registry().expect("a lossless ring has a registry");
    assert_eq!(rf_rows(rf_reg.active_readers(prod.sequence())), expect);
    let reg = rw.registry().expect("ringwire sees the registry");
    assert_eq!(rw_rows(reg.active_readers(5)), expect);
    assert_eq!(reg.capacity(), 4);

    // Each registration is the slot listed under its name, in both crates' terms.
    let mine = rw.registration().expect("registered");
    assert_eq!(mine.slot_index(), 1);
    assert_eq!(rw.registry_slot(), Some(1));
    assert_eq!(rf.registration().map(|r| r.slot_index()), Some(0));

    // update_cursor publishes to that slot; both crates list the new cursor, and the
    // consumer's next receive publishes its real one again.
    rf.try_recv().unwrap();
    mine.update_cursor(5);
    let expect = vec![row(0, me, "rf", 2, 4), row(1, me, "rw", 5, 1)];
    assert_eq!(rf_rows(rf_reg.active_readers(5)), expect);
    assert_eq!(rw_rows(reg.active_readers(5)), expect);
    assert_eq!(rw.try_recv().map(|r| r.seq), Some(3));
    let reg = rw.registry().unwrap();
    assert_eq!(rw_rows(reg.active_readers(5))[1], row(1, me, "rw", 4, 2));
    assert_eq!(rf_rows(rf_reg.active_readers(5))[1], row(1, me, "rw", 4, 2));
}

#[test]
fn a_dropped_reader_disappears_from_both_lists() {
    let (p, prod) = rw_ring("reg-drop", 4);
    let x = rw_named(&p, "x");
    let y = rf_named(&p, "y");
    let z = rw_named(&p, "z");
    let rf_view = ringfire::RingConsumer::<Rec>::attach_latest(p.path()).unwrap();
    let rf_reg = rf_view.registry().unwrap();
    let names =
        |v: Vec<Row>| -> Vec<(usize, String)> { v.into_iter().map(|r| (r.0, r.2)).collect() };
    let both = |prod: &RingProducer<Rec>| {
        let rw = rw_rows(prod.registry().unwrap().active_readers(prod.sequence()));
        let rf = rf_rows(rf_reg.active_readers(prod.sequence()));
        assert_eq!(rw, rf);
        names(rw)
    };
    let s = |i: usize, n: &str| (i, n.to_string());
    assert_eq!(
        both(&prod),
        [s(0, "x"), s(1, "y"), s(2, "z"), s(3, "consumer")]
    );
    drop(x);
    assert_eq!(both(&prod), [s(1, "y"), s(2, "z"), s(3, "consumer")]);
    drop(y);
    assert_eq!(both(&prod), [s(2, "z"), s(3, "consumer")]);
    // The first free slot is taken again, and the registration says which.
    let w = rw_named(&p, "w");
    assert_eq!(w.registration().map(|r| r.slot_index()), Some(0));
    assert_eq!(both(&prod), [s(0, "w"), s(2, "z"), s(3, "consumer")]);
    drop((w, z));
    assert_eq!(both(&prod), [s(3, "consumer")]);
    drop(rf_view);
    let reg = prod.registry().unwrap();
    assert!(reg.active_readers(prod.sequence()).is_empty());
    assert_eq!((reg.min_cursor(), reg.min_reader_seq()), (None, None));
    assert_eq!((reg.reader_lag(4), reg.headroom(4, 16)), (0, 16));
}

/// Kills and reaps the child when dropped (a failed assertion included).
struct Kid(Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The helper process reading the ring at `path` as reader `name`, once it has attached.
fn attached_reader(path: &std::path::Path, name: &str) -> Kid {
    let mut child = Kid(Command::new(HELPER)
        .args([
            "read",
            path.to_str().unwrap(),
            "1000",
            &format!("name={name}"),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap());
    let mut line = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "attached");
    child
}

#[test]
fn a_killed_reader_process_is_pruned() {
    let (p, prod) = rw_ring("reg-kill", 3);
    let mut child = attached_reader(p.path(), "child");
    let pid = child.0.id();
    let reg = prod.registry().unwrap();
    // The helper reads 1..=3 and then waits: its cursor settles at 4.
    let deadline = Instant::now() + Duration::from_secs(30);
    while reg.min_cursor() != Some(4) {
        assert!(Instant::now() < deadline, "the helper never read 1..=3");
        std::thread::sleep(Duration::from_millis(1));
    }
    let listed = vec![row(0, pid, "child", 4, 0)];
    assert_eq!(rw_rows(reg.active_readers(3)), listed);
    let rf = ringfire::RingConsumer::<Rec>::attach_latest(p.path()).unwrap();
    let rf_reg = rf.registry().unwrap();
    assert_eq!(rf_rows(rf_reg.active_readers(3))[..1], listed);
    drop(rf);

    child.0.kill().unwrap();
    child.0.wait().unwrap();
    // Still registered until someone checks liveness: min_cursor does not.
    assert_eq!(reg.min_cursor(), Some(4));
    assert_eq!(reg.prune_dead_readers(), 1);
    assert_eq!(reg.prune_dead_readers(), 0);
    assert_eq!(reg.min_cursor(), None);
    assert!(reg.active_readers(3).is_empty());
}

#[test]
fn a_slot_of_a_dead_pid_is_pruned_by_either_crate() {
    let me = std::process::id();
    let (p, prod) = rw_ring("reg-ghost", 6);
    let mut live = rw_named(&p, "live");
    for _ in 0..4 {
        live.try_recv().unwrap();
    }
    let rf = ringfire::RingConsumer::<Rec>::attach_latest(p.path()).unwrap();
    let rf_reg = rf.registry().unwrap();
    // A registration by a pid that cannot exist, as a reader killed in another namespace.
    let ghost = |cursor| {
        registry::register(view(prod.file()), IMPOSSIBLE_PID, "ghost", cursor, |_| true).unwrap()
    };
    let reg = prod.registry().unwrap();
    assert_eq!(ghost(2), 2);
    // The ghost holds back min_cursor (no liveness check) until pruned.
    assert_eq!(reg.min_cursor(), Some(2));
    assert_eq!(
        reg.min_reader_seq(),
        Some(5),
        "pruned, then the live reader"
    );
    assert_eq!(reg.min_cursor(), Some(5));

    // active_readers prunes before listing, on both crates.
    let alive = vec![row(0, me, "live", 5, 2), row(1, me, "consumer", 6, 1)];
    assert_eq!(ghost(3), 2);
    assert_eq!(rw_rows(reg.active_readers(6)), alive);
    assert_eq!(reg.prune_dead_readers(), 0, "already pruned");
    assert_eq!(ghost(3), 2);
    assert_eq!(reg.min_cursor(), Some(3));
    assert_eq!(rf_rows(rf_reg.active_readers(6)), alive);
    assert_eq!(reg.min_cursor(), Some(5), "ringfire pruned it");
    assert_eq!(reg.prune_dead_readers(), 0);

    // So do reader_lag and headroom, and ringfire's.
    assert_eq!(ghost(1), 2);
    assert_eq!((reg.reader_lag(6), reg.headroom(6, 16)), (2, 14));
    assert_eq!(ghost(1), 2);
    assert_eq!(rf_reg.headroom(6, 16), 14);
    assert_eq!(ghost(1), 2);
    assert_eq!(prod.headroom(), 14);
    assert_eq!(reg.prune_dead_readers(), 0);

    assert!(ringwire::registry::is_process_alive(me));
    assert!(!ringwire::registry::is_process_alive(IMPOSSIBLE_PID));
    assert!(!ringwire::registry::is_process_alive(0));
}

#[test]
fn blob_rings_list_the_same_readers_on_both_crates() {
    let me = std::process::id();
    let mut out = [0u8; 64];
    let mut meta = 0u64;

    // A ringwire blob ring with a reader of each crate.
    let p = ShmPath::new("reg-blob-rw");
    let mut prod = BlobProducer::<u64>::create(&p, 8, 4096).unwrap();
    let mut rw = BlobConsumer::<u64>::attach_with_name(&p, "rw-blob").unwrap();
    for n in 1..=3u64 {
        prod.push(&n, &[n as u8; 5]).unwrap();
    }
    assert_eq!(rw.recv(&mut meta, &mut out).unwrap(), Some(5));
    let rf = ringfire::BlobConsumer::<u64>::attach(p.path()).unwrap();
    let expect = vec![row(0, me, "rw-blob", 2, 2), row(1, me, "anonymous", 1, 3)];
    assert_eq!(rw_rows(prod.active_readers()), expect);
    let reg = rw.registry().expect("blob rings have a registry");
    assert_eq!(reg.capacity(), 32);
    assert_eq!(rw_rows(reg.active_readers(3)), expect);
    assert_eq!(rf_rows(rf.registry().unwrap().active_readers(3)), expect);
    drop(rf);
    assert_eq!(rw_rows(prod.active_readers()), expect[..1]);

    // A ringfire blob ring with a ringwire reader.
    let p = ShmPath::new("reg-blob-rf");
    let mut prod = ringfire::BlobProducer::<u64>::create(p.path(), 8, 4096).unwrap();
    let mut rw = BlobConsumer::<u64>::attach(&p).unwrap();
    for n in 1..=4u64 {
        prod.push(&n, &[n as u8; 7]).unwrap();
    }
    assert_eq!(rw.recv(&mut meta, &mut out).unwrap(), Some(7));
    let expect = vec![row(0, me, "anonymous", 2, 3)];
    assert_eq!(rf_rows(prod.active_readers()), expect);
    assert_eq!(
        rw_rows(rw.registry().unwrap().active_readers(prod.sequence())),
        expect
    );
    drop(rw);
    assert!(prod.active_readers().is_empty());
}

#[test]
fn rings_without_a_registry_or_a_free_slot() {
    // A lossy ring built without readers has no registry, for either crate.
    let p = ShmPath::new("reg-none");
    let prod = RingProducer::<Rec>::create(&p, 8).unwrap();
    assert!(prod.registry().is_none());
    let c = RingConsumer::<Rec>::attach(&p).unwrap();
    assert!(c.registry().is_none());
    assert!(c.registration().is_none());
    let rf = ringfire::RingConsumer::<Rec>::attach(p.path()).unwrap();
    assert!(rf.registry().is_none() && rf.registration().is_none());
    drop((c, rf, prod));

    // A full lossy registry: the registry is there, the late readers are unregistered.
    let p = ShmPath::new("reg-full");
    let prod = RingProducerBuilder::new(8)
        .max_readers(1)
        .build::<Rec, _>(&p)
        .unwrap();
    let first = RingConsumer::<Rec>::attach(&p).unwrap();
    assert_eq!(first.registration().map(|r| r.slot_index()), Some(0));
    let late = RingConsumer::<Rec>::attach(&p).unwrap();
    assert_eq!(late.registry().map(|r| r.capacity()), Some(1));
    assert!(late.registration().is_none());
    let rf_late = ringfire::RingConsumer::<Rec>::attach(p.path()).unwrap();
    assert!(rf_late.registry().is_some() && rf_late.registration().is_none());
    assert_eq!(prod.registry().unwrap().active_readers(0).len(), 1);
    drop((first, late, rf_late, prod));

    // A lossless ring asked for no readers gets DEFAULT_MAX_READERS, as in ringfire.
    let p = ShmPath::new("reg-default");
    let prod = RingProducerBuilder::new(8)
        .flow_control(FlowControl::LosslessBackpressure)
        .build::<Rec, _>(&p)
        .unwrap();
    assert_eq!(DEFAULT_MAX_READERS, ringfire::DEFAULT_MAX_READERS);
    assert_eq!(
        prod.registry().map(|r| r.capacity()),
        Some(DEFAULT_MAX_READERS)
    );
    let rf = ringfire::RingConsumer::<Rec>::attach(p.path()).unwrap();
    assert_eq!(
        rf.registry().map(|r| r.capacity()),
        Some(DEFAULT_MAX_READERS)
    );
}

/// A lossless ring of 8 u64 records with 2 registry slots.
fn lossless_ring(tag: &str) -> (ShmPath, RingProducer<u64>) {
    let p = ShmPath::new(tag);
    let prod = RingProducerBuilder::new(8)
        .max_readers(2)
        .flow_control(FlowControl::LosslessBackpressure)
        .build::<u64, _>(&p)
        .unwrap();
    (p, prod)
}

/// A registry entry forged with a live pid (ours) never moves, and a lossless producer's
/// `push` waits for it for ever. `push_timeout` and `wait_for_headroom_timeout` give up
/// after their timeout with an error naming the slot, pid, name and cursor that hold the
/// producer back; `Duration::ZERO` is one look (dead readers pruned first), and
/// `Duration::MAX` no limit.
#[test]
fn a_bounded_lossless_push_names_the_reader_that_holds_it() {
    let me = std::process::id();
    let (p, mut prod) = lossless_ring("reg-bounded");
    let forged = registry::register(view(prod.file()), me, "forged\n", 1, |_| true).unwrap();
    assert_eq!(forged, 0);
    for s in 1..=8u64 {
        assert_eq!(prod.push_timeout(&s, Duration::ZERO).unwrap(), s);
    }
    let check = |e: ringwire::Error, waited_at_least: Duration| {
        let text = e.to_string();
        match e {
            ringwire::Error::Backpressure {
                seq,
                waited,
                reader: Some(r),
                ..
            } => {
                assert_eq!(seq, 9, "{text}");
                assert!(waited >= waited_at_least, "{text}");
                assert!(waited < Duration::from_secs(5), "{text}");
                assert_eq!(
                    row(r.slot_index, r.pid, &r.name, r.cursor_seq, r.lag),
                    row(0, me, "forged\n", 1, 8)
                );
            }
            other => panic!("not Backpressure: {other:?}"),
        }
        // The name is escaped: the message stays on one line.
        for part in [
            p.path().to_str().unwrap(),
            "record 9",
            "slot 0",
            &format!("pid {me}"),
            "\"forged\\n\"",
            "cursor 1",
        ] {
            assert!(text.contains(part), "{part:?} not in {text:?}");
        }
        assert!(!text.contains('\n'), "{text:?}");
    };
    check(
        prod.push_timeout(&9, Duration::ZERO).unwrap_err(),
        Duration::ZERO,
    );
    let t0 = Instant::now();
    check(
        prod.push_timeout(&9, Duration::from_millis(50))
            .unwrap_err(),
        Duration::from_millis(50),
    );
    assert!(t0.elapsed() >= Duration::from_millis(50));
    check(
        prod.wait_for_headroom_timeout(Duration::from_millis(20))
            .unwrap_err(),
        Duration::from_millis(20),
    );
    // Nothing was written by the refused pushes.
    assert_eq!((prod.sequence(), prod.next_sequence()), (8, 9));

    // The entry gone, a dead pid's instead: pruned on the one look of a zero timeout.
    registry::unregister(view(prod.file()), 0, me).unwrap();
    registry::register(view(prod.file()), IMPOSSIBLE_PID, "ghost", 1, |_| true).unwrap();
    assert_eq!(prod.push_timeout(&9, Duration::ZERO).unwrap(), 9);

    // A real reader that drains while the producer waits, without a limit and with one.
    let mut rx = RingConsumer::<u64>::builder()
        .start_from_head()
        .attach(&p)
        .unwrap();
    for s in 10..=17u64 {
        prod.push_timeout(&s, Duration::ZERO).unwrap();
    }
    assert!(prod.push_timeout(&18, Duration::ZERO).is_err());
    let reader = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(30));
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while got.last() != Some(&19) && Instant::now() < deadline {
            match rx.try_recv() {
                Some(v) => got.push(v),
                None => std::thread::yield_now(),
            }
        }
        got
    });
    assert_eq!(prod.push_timeout(&18, Duration::MAX).unwrap(), 18);
    assert_eq!(prod.push_timeout(&19, Duration::from_secs(10)).unwrap(), 19);
    let got = reader.join().unwrap();
    assert_eq!(got, (10..=19).collect::<Vec<u64>>());

    // A reader that never reads and detaches while the producer waits for it.
    let idle = RingConsumer::<u64>::builder()
        .start_from_head()
        .attach(&p)
        .unwrap();
    for s in 20..=27u64 {
        prod.push_timeout(&s, Duration::ZERO).unwrap();
    }
    assert!(prod.push_timeout(&28, Duration::ZERO).is_err());
    let leaver = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(30));
        drop(idle);
    });
    let t0 = Instant::now();
    assert_eq!(prod.push_timeout(&28, Duration::from_secs(10)).unwrap(), 28);
    assert!(t0.elapsed() < Duration::from_secs(5));
    leaver.join().unwrap();
}

/// On a lossy ring a bounded push never waits, whatever the registry holds.
#[test]
fn a_bounded_push_on_a_lossy_ring_never_waits() {
    let (_p, mut prod) = rw_ring("reg-bounded-lossy", 0);
    registry::register(view(prod.file()), std::process::id(), "stuck", 1, |_| true).unwrap();
    for s in 1..=40u64 {
        assert_eq!(prod.push_timeout(&Rec::new(s), Duration::ZERO).unwrap(), s);
    }
}

/// The state letter in `/proc/<pid>/stat` (`None` once the pid is gone).
fn proc_state(pid: u32) -> Option<char> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &text[text.rfind(')')? + 1..];
    after.split_whitespace().next()?.chars().next()
}

/// A reader process killed and not reaped by its parent (us) is a zombie: `kill(pid, 0)`
/// still succeeds, and a lossless producer used to wait for it until its push timeout (for
/// ever with `push`), `stat` listed it alive and `prune` kept it. Its state in `/proc` says
/// it is dead.
#[test]
fn a_zombie_reader_does_not_hold_a_lossless_producer() {
    let p = ShmPath::new("reg-zombie");
    let mut prod = RingProducerBuilder::new(16)
        .max_readers(2)
        .flow_control(FlowControl::LosslessBackpressure)
        .build::<Rec, _>(&p)
        .unwrap();
    let mut child = attached_reader(p.path(), "zombie");
    let pid = child.0.id();
    assert_eq!(
        rw_rows(prod.registry().unwrap().active_readers(0)),
        vec![row(0, pid, "zombie", 1, 0)]
    );
    // SIGKILL, and no wait: the child stays a zombie until the Kid is dropped.
    child.0.kill().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while proc_state(pid) != Some('Z') {
        assert!(Instant::now() < deadline, "pid {pid} never became a zombie");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(ringwire::registry::is_process_alive(pid), "a zombie exists");
    let token = view(prod.file())
        .registry_a64(0, ringwire::core::layout::reg::HEARTBEAT_TSC)
        .unwrap()
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(!ringwire::registry::is_reader_alive(pid, token));
    // Also with ringfire's token 0: a zombie is dead whoever registered it.
    assert!(!ringwire::registry::is_reader_alive(pid, 0));

    // The reader stopped at cursor 1: a whole ring fits, and the next push must prune it.
    for s in 1..=16 {
        assert_eq!(prod.push_timeout(&Rec::new(s), Duration::ZERO).unwrap(), s);
    }
    // Pruned while the push waits, not at its deadline's last look: well before 30 s. (Before
    // its first look at /proc the wait spins and yields 1,100 times, which took over 3 s on
    // the loaded 2-core machine.)
    let t0 = Instant::now();
    assert_eq!(
        prod.push_timeout(&Rec::new(17), Duration::from_secs(30))
            .unwrap(),
        17
    );
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    let reg = prod.registry().unwrap();
    assert_eq!(reg.min_cursor(), None, "the zombie's slot was freed");
    assert!(reg.active_readers(17).is_empty());
    assert_eq!(
        proc_state(pid),
        Some('Z'),
        "still unreaped: pruned as a zombie"
    );
}

/// A slot whose pid now belongs to another process (a `sleep`, standing for an unrelated
/// process that got a dead reader's pid) but whose token says its registrant started at
/// another time is dead: before, the slot stayed live for as long as that process lived.
/// The same pid with the right start time, with a token from another PID namespace (where
/// the pid means something else) or with a token that carries no start time (ringfire's 0,
/// an earlier ringwire's) is judged by the pid alone, as before.
#[test]
fn a_slot_whose_pid_was_reused_is_dead() {
    use registry::{Incarnation, encode_name, register_owner_as, token_incarnation};
    let me = std::process::id();
    let sleeper = Kid(Command::new("sleep").arg("30").spawn().unwrap());
    let pid = sleeper.0.id();
    let mine = ringwire::sys::own_incarnation().expect("this test needs /proc");
    // The sleeper's own incarnation, as a registration of its own would carry it.
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let start: u64 = text[text.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap();
    let theirs = Incarnation::new(start, u64::from(mine.pid_ns));
    let earlier = Incarnation::new(start.wrapping_sub(1000), u64::from(mine.pid_ns));
    let elsewhere = Incarnation {
        pid_ns: (mine.pid_ns + 1) & 0xFFF,
        ..earlier
    };

    let p = ShmPath::new("reg-reused");
    let mut prod = RingProducerBuilder::new(16)
        .max_readers(8)
        .flow_control(FlowControl::LosslessBackpressure)
        .build::<Rec, _>(&p)
        .unwrap();
    let forge = |pid, cursor, incarnation| {
        register_owner_as(
            view(prod.file()),
            pid,
            &encode_name("forged"),
            cursor,
            incarnation,
            |_, _| true,
        )
        .unwrap()
    };
    let reused = forge(pid, 1, Some(earlier));
    assert_eq!(token_incarnation(pid, reused.token), Some(earlier));
    assert!(ringwire::registry::is_process_alive(pid));
    assert!(!ringwire::registry::is_reader_alive(pid, reused.token));
    let kept = [
        forge(pid, 2, Some(theirs)),
        forge(pid, 3, Some(elsewhere)),
        forge(pid, 4, None),
        forge(me, 5, Some(mine)),
    ];
    for o in kept {
        assert!(ringwire::registry::is_reader_alive(o.pid, o.token), "{o:?}");
    }
    assert!(ringwire::registry::is_reader_alive(pid, 0));

    // A lossless producer is not held by the reused pid's slot (cursor 1), only by the
    // others (the slowest at 2).
    assert_eq!(prod.registry().unwrap().min_cursor(), Some(1));
    for s in 1..=17 {
        assert_eq!(prod.push_timeout(&Rec::new(s), Duration::ZERO).unwrap(), s);
    }
    let reg = prod.registry().unwrap();
    assert_eq!(reg.min_cursor(), Some(2));
    let slots: Vec<(usize, u32)> = reg
        .active_readers(17)
        .into_iter()
        .map(|r| (r.slot_index, r.pid))
        .collect();
    assert_eq!(slots, vec![(1, pid), (2, pid), (3, pid), (4, me)]);
    // Pruning cleared the freed slot's token as well as its pid.
    let token_of = |slot| {
        view(prod.file())
            .registry_a64(slot, ringwire::core::layout::reg::HEARTBEAT_TSC)
            .unwrap()
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    assert_eq!(token_of(0), 0);
    assert_eq!(token_of(1), kept[0].token);
    assert_eq!(reg.prune_dead_readers(), 0);
    drop(sleeper);
}
