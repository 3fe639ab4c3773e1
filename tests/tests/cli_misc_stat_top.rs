//! `ringwire stat` prints plain values and tags ring JSON with `"type": "ring"`; `top`
//! clears the screen only on a terminal and follows a ring replaced at its path (by a fresh
//! inode or recreated in place), then stops with "ring removed" (exit 1) once the path is
//! gone.
//!
//! The binary comes from [`ringwire_bin`]: build it first
//! (`cargo build -p ringwire --bin ringwire`) or set `RINGWIRE_BIN`.

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringwire::RingProducer;
use ringwire::core::layout::SEQ_LIMIT;
use ringwire::core::sync::Ordering;
use ringwire_tests::netns::{ringwire_bin, run_ringwire as ringwire};
use ringwire_tests::records::Rec;
use ringwire_tests::shm::ShmPath;
use ringwire_tests::{wait_exit, wait_until};

#[test]
fn stat_text_prints_plain_values_and_json_says_ring() {
    let p = ShmPath::new("cli-misc-stat");
    let _checkpoint = p.sibling("_algo_1.offset");
    let mut prod = RingProducer::<Rec>::builder(16)
        .max_readers(2)
        .build::<Rec, _>(p.path())
        .unwrap();
    let _cons = ringwire::RingConsumer::<Rec>::builder()
        .consumer_name("algo 1")
        .attach(p.path())
        .unwrap();
    for seq in 1..=3 {
        prod.push(&Rec::new(seq));
    }
    let path = p.path().to_str().unwrap();
    let (code, out, err) = ringwire(&["stat", path]);
    assert_eq!(code, 0, "{err}");
    for line in [
        "  magic              0x52494E4746495245\n",
        "  mode               SPMC\n",
        "  flow_control       LossyLatestWins\n",
        "  write_seq          3\n",
    ] {
        assert!(out.contains(line), "{line:?} not in\n{out}");
    }
    assert!(out.contains(" name algo 1 cursor "), "{out}");
    assert!(!out.contains('"'), "quoted values:\n{out}");

    let (code, out, err) = ringwire(&["stat", path, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["type"], "ring", "{v}");
    assert_eq!(v["mode"], "SPMC");
    assert_eq!(v["readers"][0]["name"], "algo 1");
    assert!(
        v["mid_write_slots"].is_null(),
        "only MPMC rings have it: {v}"
    );
    drop(prod);
}

#[test]
fn stat_counts_a_lossy_mpmc_rings_slots_left_mid_write() {
    let p = ShmPath::new("cli-misc-stat-mpmc");
    let prod = ringwire::MpmcProducer::<u64>::create(p.path(), 8).unwrap();
    prod.push(&1);
    let path = p.path().to_str().unwrap();
    let (code, out, err) = ringwire(&["stat", path]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("  mode               MPMC\n"), "{out}");
    assert!(out.contains("  mid_write_slots    0 ("), "{out}");
    // A producer that died while copying ticket 2 left its slot at the write marker.
    let v = ringwire_tests::shm::view(prod.file());
    v.claim_seq().fetch_add(1, Ordering::SeqCst);
    v.slot_seq(2).store(u64::MAX, Ordering::SeqCst);
    let (code, out, err) = ringwire(&["stat", path]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("  mid_write_slots    1 ("), "{out}");
    let (_, out, _) = ringwire(&["stat", path, "--json"]);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["mid_write_slots"], 1, "{j}");
    assert_eq!(prod.next_mid_write_slot(0), Some(2));
    prod.heal_mid_write_slot(2).unwrap();
    let (_, out, _) = ringwire(&["stat", path]);
    assert!(out.contains("  mid_write_slots    0 ("), "{out}");
}

/// A pseudo-terminal: (master, slave path).
fn pty() -> (OwnedFd, String) {
    // SAFETY: posix_openpt returns a new descriptor or -1; grantpt, unlockpt and ptsname_r
    // act on that descriptor and write at most `buf.len()` bytes.
    unsafe {
        let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(m >= 0, "posix_openpt");
        let master = OwnedFd::from_raw_fd(m);
        assert_eq!(libc::grantpt(m), 0);
        assert_eq!(libc::unlockpt(m), 0);
        let mut buf = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(m, buf.as_mut_ptr(), buf.len()), 0);
        let name = std::ffi::CStr::from_ptr(buf.as_ptr());
        (master, name.to_string_lossy().into_owned())
    }
}

#[test]
fn top_clears_the_screen_only_on_a_terminal() {
    let p = ShmPath::new("cli-misc-top-tty");
    let mut prod = RingProducer::<Rec>::create(p.path(), 16).unwrap();
    prod.push(&Rec::new(1));
    let path = p.path().to_str().unwrap();
    let args = ["top", path, "--interval-ms", "5", "--iterations", "2"];

    let (code, out, err) = ringwire(&args);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.matches("write_seq 1 ").count(), 2, "{out}");
    assert!(!out.contains('\x1b'), "escapes into a pipe: {out:?}");

    let (master, slave) = pty();
    let tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&slave)
        .unwrap();
    let mut child = Command::new(ringwire_bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(tty)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_exit(&mut child, Duration::from_secs(10), "top --iterations 2");
    assert!(child.wait().unwrap().success());
    // The child is gone and our copy of the slave is closed: read what is buffered, then
    // the master reports EIO.
    let mut m = std::fs::File::from(master);
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = m.read(&mut buf) {
        bytes.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&bytes);
    assert_eq!(text.matches("\x1b[2J\x1b[H").count(), 2, "{text:?}");
    drop(prod);
}

/// A child killed when dropped (a failed assertion included), with its stdout collected by
/// a thread.
struct Top {
    child: Child,
    out: Arc<Mutex<String>>,
}

impl Top {
    fn spawn(args: &[&str]) -> Top {
        let mut child = Command::new(ringwire_bin())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = Arc::new(Mutex::new(String::new()));
        let mut so = child.stdout.take().unwrap();
        let sink = out.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = so.read(&mut buf) {
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Top { child, out }
    }

    fn out(&self) -> String {
        self.out.lock().unwrap().clone()
    }

    /// Everything top wrote to stderr (once it has exited).
    fn err(&mut self) -> String {
        let mut err = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        err
    }
}

impl Drop for Top {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn top_follows_a_replaced_ring_and_stops_when_it_is_removed() {
    let p = ShmPath::new("cli-misc-top-follow");
    let next = p.sibling(".next");
    let mut a = RingProducer::<Rec>::create(p.path(), 16).unwrap();
    for seq in 1..=5 {
        a.push(&Rec::new(seq));
    }
    let path = p.path().to_str().unwrap();
    let mut top = Top::spawn(&["top", path, "--interval-ms", "20"]);
    let within = Duration::from_secs(10);
    wait_until("the first ring's frame", within, || {
        top.out().contains("write_seq 5 ")
    });

    // A restarted producer: a fresh inode at the path (made aside, renamed over it).
    let mut b = RingProducer::<Rec>::create(next.path(), 16).unwrap();
    b.push(&Rec::new(1));
    b.push(&Rec::new(2));
    std::fs::rename(next.path(), p.path()).unwrap();
    wait_until("a frame of the new ring", within, || {
        top.out().contains("write_seq 2 ")
    });
    assert!(top.out().contains("the file was replaced"), "{}", top.out());

    // The path removed for good: top says so and exits 1.
    std::fs::remove_file(p.path()).unwrap();
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = top.child.try_wait().unwrap() {
            break s;
        }
        assert!(t0.elapsed() < within, "top still running: {}", top.out());
        std::thread::sleep(Duration::from_millis(10));
    };
    let err = top.err();
    assert_eq!(status.code(), Some(1), "{err}");
    assert_eq!(err.trim(), format!("Error: {path}: ring removed"));
    drop((a, b));
}

/// Output that cannot be written is an error named after stdout, not after the ring the
/// output describes (`stat R > /dev/full` said `R: write output failed`, as if R's file
/// system were full).
#[test]
fn an_output_write_error_names_stdout_not_the_ring() {
    struct Full;
    impl std::io::Write for Full {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::from_raw_os_error(libc::ENOSPC))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    use clap::Parser;
    let p = ShmPath::new("cli-out-full");
    let mut prod = RingProducer::<Rec>::create(p.path(), 16).unwrap();
    prod.push(&Rec::new(1));
    let path = p.path().to_str().unwrap();
    for cmd in [&["stat", path][..], &["dump", path], &["prune", path]] {
        let args = [&["ringwire"][..], cmd].concat();
        let cli = ringwire::cli::Cli::try_parse_from(args).unwrap();
        let e = ringwire::cli::run(cli, &mut Full).unwrap_err().to_string();
        assert!(e.starts_with("stdout: write output"), "{cmd:?}: {e}");
        assert!(!e.contains(path), "{cmd:?}: {e}");
    }
}

/// Waits until `top`'s output satisfies `f`, failing at once (with its exit status and
/// stderr) if `top` exits first: a read past the end of a file that shrank under it shows
/// as exit status 1 and "ringwire: PATH shrank while it was mapped" (it was "signal: 7
/// (SIGBUS)" before the binary had a SIGBUS handler).
fn wait_for_top(top: &mut Top, what: &str, f: impl Fn(&str) -> bool) {
    let t0 = Instant::now();
    loop {
        if f(&top.out()) {
            return;
        }
        if let Some(s) = top.child.try_wait().unwrap() {
            let mut err = String::new();
            let _ = top.child.stderr.take().unwrap().read_to_string(&mut err);
            panic!("top exited ({s}) before {what}: {err}\n{}", top.out());
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}:\n{}",
            top.out()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A creator without the exclusive lock (ringfire's legacy mode, spec §1.2 step 4) reuses
/// the inode: it truncates the file and sizes it for the new geometry. `top` used to compare
/// only (device, inode), so it kept the old mapping: reading the old registry past the new
/// end of the file killed it with SIGBUS, and without a registry it showed the window of
/// the old capacity and no replacement.
#[test]
fn top_follows_a_ring_recreated_in_place() {
    let p = ShmPath::new("cli-misc-top-in-place");
    let path = p.path().to_str().unwrap();
    let legacy = |capacity, readers| {
        RingProducer::<Rec>::builder(capacity)
            .max_readers(readers)
            .exclusive_lock(false)
            .cleanup_mode(ringwire::CleanupMode::Persistent)
            .build::<Rec, _>(p.path())
            .unwrap()
    };
    // With a registry of 100 slots: the old mapping's registry lies past the new file end.
    let mut a = legacy(1024, 100);
    let old_len = a.file().file_len();
    for seq in 1..=5 {
        a.push(&Rec::new(seq));
    }
    let mut top = Top::spawn(&["top", path, "--interval-ms", "50"]);
    wait_for_top(&mut top, "the first ring's frame", |o| {
        o.contains("write_seq 5 ")
    });
    let mut b = legacy(16, 0);
    assert!(b.file().file_len() < old_len / 4);
    for seq in 1..=20 {
        b.push(&Rec::new(seq));
    }
    // The new capacity's window, not [1, 20] of the old one.
    wait_for_top(&mut top, "a frame of the new ring", |o| {
        o.contains("write_seq 20 ") && o.contains("window [5, 20]")
    });
    let out = top.out();
    assert!(out.contains("the file was replaced"), "{out}");
    assert!(!out.contains("window [1, 20]"), "stale capacity:\n{out}");
    drop(top);
    drop((a, b));
}

/// The rate of `top`'s first frame is measured over one interval. It used to be printed
/// right after the open sampled `write_seq`, so `--iterations 1` divided what was pushed
/// in those few microseconds by them: 0, or millions of msg/s for a slow producer.
#[test]
fn tops_first_frame_rate_is_over_one_interval() {
    let p = ShmPath::new("cli-misc-top-first-rate");
    let mut prod = RingProducer::<Rec>::create(p.path(), 1024).unwrap();
    prod.push(&Rec::new(1));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // At most one record a millisecond: at most 1,000 msg/s over any real interval.
    let pusher = std::thread::spawn({
        let stop = stop.clone();
        move || {
            let mut seq = 2;
            while !stop.load(Ordering::Relaxed) {
                prod.push(&Rec::new(seq));
                seq += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
            prod
        }
    });
    let path = p.path().to_str().unwrap();
    let t0 = Instant::now();
    let (code, out, err) = ringwire(&["top", path, "--interval-ms", "400", "--iterations", "1"]);
    let took = t0.elapsed();
    stop.store(true, Ordering::Relaxed);
    let prod = pusher.join().unwrap();
    assert_eq!(code, 0, "{err}");
    let rate: f64 = out
        .split("msg/s ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("no rate in {out}"));
    assert!(
        rate > 0.0 && rate <= 1100.0,
        "implausible first rate {rate}:\n{out}"
    );
    assert!(
        took >= Duration::from_millis(400),
        "no wait: {took:?}\n{out}"
    );
    drop(prod);
}

/// Registry slot 0 of `prod`'s ring as a live reader (this process) named `name`, at
/// `cursor`.
fn forge_reader(prod: &RingProducer<Rec>, name: &[u8], cursor: u64) {
    use ringwire::core::layout::reg;
    use std::os::unix::fs::FileExt;
    let v = ringwire_tests::shm::view(prod.file());
    let off = v.registry_slot_offset(0).unwrap();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(prod.file().path())
        .unwrap();
    f.write_all_at(name, (off + reg::NAME) as u64).unwrap();
    let a32 = |field| v.registry_a32(0, field).unwrap();
    a32(reg::PID).store(std::process::id(), Ordering::SeqCst);
    a32(reg::ACTIVE).store(1, Ordering::SeqCst);
    v.registry_a64(0, reg::CURSOR_SEQ)
        .unwrap()
        .store(cursor, Ordering::SeqCst);
}

/// A ring of 64 `Rec`s with two reader slots, holding records `1..=records`.
fn ring_with_two_reader_slots(p: &ShmPath, records: u64) -> RingProducer<Rec> {
    let mut prod = RingProducer::<Rec>::builder(64)
        .max_readers(2)
        .build::<Rec, _>(p.path())
        .unwrap();
    for seq in 1..=records {
        prod.push(&Rec::new(seq));
    }
    prod
}

/// A reader's name comes from the ring file: `top` printed it raw, so a name with a newline
/// and an escape sequence forged a reader line and reached the terminal. It is escaped as
/// `stat` escapes it.
#[test]
fn top_escapes_control_characters_in_reader_names() {
    let p = ShmPath::new("cli-misc-top-name");
    let prod = ring_with_two_reader_slots(&p, 3);
    forge_reader(&prod, b"evil\nfake reader 9\x1b[31m", 2);
    let path = p.path().to_str().unwrap();
    let (code, out, err) = ringwire(&["top", path, "--interval-ms", "5", "--iterations", "1"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !out.contains('\x1b'),
        "an escape reached the output: {out:?}"
    );
    assert!(
        !out.lines().any(|l| l.starts_with("fake reader")),
        "a forged line: {out:?}"
    );
    assert!(
        out.contains(r"evil\nfake reader 9\u{1b}[31m cursor 2 "),
        "{out:?}"
    );
    let (code, out, err) = ringwire(&["stat", path]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(r" name evil\nfake reader 9\u{1b}[31m cursor 2 "),
        "{out:?}"
    );
    drop(prod);
}

/// A reader's lag is ringfire's `write_seq - (cursor - 1)`, saturating. `stat` and `top`
/// computed `write_seq - cursor + 1`: 41 for cursor 0 at write_seq 40 (ringfire: 40), and
/// an overflow at write_seq u64::MAX (a panic in a debug build, 0 in a release one). Both
/// now refuse a write_seq at or past 2^63 (a corrupt header, see
/// `stat_dump_and_top_of_a_ring_whose_write_seq_is_past_the_limit_are_errors` in
/// std-adapter/tests/cli.rs); the largest one they show is 2^63 - 1, and `reader_lag`'s unit
/// test covers u64::MAX.
#[test]
fn reader_lag_at_cursor_0_is_ringfires() {
    let p = ShmPath::new("cli-misc-lag-0");
    let prod = ring_with_two_reader_slots(&p, 40);
    forge_reader(&prod, b"zero", 0);
    let path = p.path().to_str().unwrap();
    let lag_of = |want: u64| {
        let (code, out, err) = ringwire(&["stat", path]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains(&format!(" cursor 0 lag {want}\n")), "{out}");
        let (code, out, err) = ringwire(&["stat", path, "--json"]);
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["readers"][0]["lag"], want, "{v}");
        let (code, out, err) = ringwire(&["top", path, "--interval-ms", "5", "--iterations", "1"]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains(&format!(" cursor 0 lag {want}\n")), "{out}");
    };
    lag_of(40);
    ringwire_tests::shm::view(prod.file())
        .write_seq()
        .store(SEQ_LIMIT - 1, Ordering::SeqCst);
    lag_of(SEQ_LIMIT - 1);
    drop(prod);
}

/// A ring whose header has the arena flag and no arena (offset 0): `stat` printed
/// `capacity null` and `reserved null` and `--json` had neither key; spec §26 lists both
/// whenever `has_arena` is true, and ringfire prints 0.
#[test]
fn stat_of_an_arena_flag_without_an_arena_prints_0() {
    use ringwire::core::layout::{Flags, hdr};
    use std::os::unix::fs::FileExt;
    let p = ShmPath::new("cli-misc-stat-arena-flag");
    let mut prod = RingProducer::<Rec>::create(p.path(), 16).unwrap();
    prod.push(&Rec::new(1));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(p.path())
        .unwrap();
    let mut flags = [0u8; 4];
    f.read_exact_at(&mut flags, hdr::FLAGS as u64).unwrap();
    let flags = u32::from_le_bytes(flags) | Flags::WITH_ARENA;
    f.write_all_at(&flags.to_le_bytes(), hdr::FLAGS as u64)
        .unwrap();
    let path = p.path().to_str().unwrap();
    let (code, out, err) = ringwire(&["stat", path]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("Arena\n  capacity           0\n  reserved           0\n"),
        "{out}"
    );
    let (code, out, err) = ringwire(&["stat", path, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["has_arena"], true, "{v}");
    assert_eq!(v["arena_capacity"], 0, "{v}");
    assert_eq!(v["arena_reserved"], 0, "{v}");
    drop(prod);
}

/// A queue file recreated in place (the same inode truncated and rewritten with another
/// geometry) is followed as a ring is: `top` used to keep the old geometry and show the
/// new file's items against the old capacity ("queued 3/1024"), with no replacement.
#[test]
fn top_follows_a_queue_recreated_in_place() {
    use ringwire::queue::SpscProducer;
    use std::io::Write;
    let p = ShmPath::new("cli-misc-top-queue-in-place");
    let aside = p.sibling(".aside");
    // A queue file's bytes, made aside by the queue API (its producer gone).
    let image = |capacity, items: u64| {
        let mut q = SpscProducer::<u64>::create(aside.path(), capacity).unwrap();
        for i in 0..items {
            q.try_push(&i).unwrap();
        }
        let bytes = std::fs::read(aside.path()).unwrap();
        drop(q);
        let _ = std::fs::remove_file(aside.path());
        bytes
    };
    let old = image(1024, 0);
    std::fs::write(p.path(), &old).unwrap();
    let path = p.path().to_str().unwrap();
    let mut top = Top::spawn(&["top", path, "--interval-ms", "50"]);
    wait_for_top(&mut top, "the first queue's frame", |o| {
        o.contains("queued 0/1024")
    });
    let new = image(4, 3);
    assert!(new.len() < old.len());
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(p.path())
        .unwrap();
    f.write_all(&new).unwrap();
    drop(f);
    wait_for_top(&mut top, "a frame of the new queue", |o| {
        o.contains("queued 3/4 ")
    });
    let out = top.out();
    assert!(out.contains("the file was replaced"), "{out}");
    assert!(!out.contains("queued 3/1024"), "stale capacity:\n{out}");
}

/// A ring without a registry (offset 0) whose header still holds a huge registry count, as
/// a corrupt or hand-made file may: the geometry check accepts it (the count means nothing
/// without the offset), and `top` walked every one of the 2^32 - 1 absent slots before
/// printing its frame, so that it never printed one. `stat` stops at the first absent slot.
#[test]
fn top_of_a_registry_count_without_a_registry_prints_its_frame() {
    let p = ShmPath::new("cli-misc-top-regcount");
    let prod = ringwire::MpmcProducer::<u64>::create(p.path(), 8).unwrap();
    prod.push(&1);
    ringwire_tests::shm::patch(
        p.path(),
        ringwire::core::layout::hdr::REGISTRY_COUNT as u64,
        &u32::MAX.to_ne_bytes(),
    );
    let path = p.path().to_str().unwrap();
    let (code, out, err) = ringwire(&["stat", path, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["has_registry"], false, "{v}");
    let mut top = Command::new(ringwire_bin())
        .args(["top", path, "--interval-ms", "1", "--iterations", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_exit(&mut top, Duration::from_secs(10), "top of the ring");
    let o = top.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{o:?}");
    assert!(out.contains("write_seq 1  msg/s "), "{out}");
    drop(prod);
}

/// A ring replaced at its path faster than the refresh interval (a producer restarting in
/// a loop): every frame still comes, showing the newest file. `top` used to reopen and
/// wait again for as long as each wait ended with the file replaced, printing nothing.
#[test]
fn top_prints_frames_of_a_ring_replaced_faster_than_it_refreshes() {
    let p = ShmPath::new("cli-misc-top-fast-replace");
    let next = p.sibling(".next");
    let make = |at: &std::path::Path| {
        let mut r = RingProducer::<Rec>::builder(16)
            .cleanup_mode(ringwire::CleanupMode::Persistent)
            .build::<Rec, _>(at)
            .unwrap();
        for seq in 1..=7 {
            r.push(&Rec::new(seq));
        }
    };
    make(p.path());
    let path = p.path().to_str().unwrap();
    let mut top = Top::spawn(&["top", path, "--interval-ms", "100", "--iterations", "2"]);
    // A fresh inode every 10 ms (made aside, renamed over the path), for at most 10 s or
    // until top has printed its two frames and exited.
    let t0 = Instant::now();
    let mut replacements = 0;
    while top.child.try_wait().unwrap().is_none() && t0.elapsed() < Duration::from_secs(10) {
        make(next.path());
        std::fs::rename(next.path(), p.path()).unwrap();
        replacements += 1;
        std::thread::sleep(Duration::from_millis(10));
    }
    let status = top.child.try_wait().unwrap();
    let out = top.out();
    assert!(
        status.is_some_and(|s| s.success()),
        "top still running or failed after {replacements} replacements: {status:?}\n{out}"
    );
    wait_until(
        "top's two frames on its stdout",
        Duration::from_secs(5),
        || top.out().matches("write_seq 7 ").count() == 2,
    );
    assert!(top.out().contains("the file was replaced"), "{}", top.out());
}

/// A path with a newline and an ESC in it is shown quoted and escaped (`"…\n…\x1b…"`) in
/// every line that names it: `stat`, `dump`, `prune`, `top` and an error. It was printed raw:
/// the newline split the line, the ESC reached the terminal.
#[test]
fn paths_with_control_characters_are_shown_escaped() {
    let p = ShmPath::new("cli-ctl");
    let p = p.sibling("-a\nb\x1b[2J");
    let prod = RingProducer::<Rec>::create(p.path(), 16).unwrap();
    let path = p.path().to_str().unwrap();
    let escaped = format!("\"{}\"", path.replace('\n', r"\n").replace('\x1b', r"\x1b"));
    let missing = format!("{path}-missing");
    // `dump` names the ring only when it is empty.
    for (args, code, stderr) in [
        (vec!["dump", path], 0, false),
        (vec!["stat", path], 0, false),
        (vec!["prune", path], 0, false),
        (
            vec!["top", path, "--interval-ms", "5", "--iterations", "1"],
            0,
            false,
        ),
        (vec!["stat", &missing], 1, true),
    ] {
        let (got, out, err) = ringwire(&args);
        assert_eq!(got, code, "{args:?}: {err}");
        let text = if stderr { err } else { out };
        assert!(
            !text.contains('\x1b'),
            "{args:?}: an ESC reached the output: {text:?}"
        );
        let line = text
            .lines()
            .find(|l| l.contains("ringwire-test-cli-ctl"))
            .unwrap_or_else(|| panic!("{args:?}: no line names the path: {text:?}"));
        let want = if stderr {
            format!("{}-missing\"", &escaped[..escaped.len() - 1])
        } else {
            escaped.clone()
        };
        assert!(line.contains(&want), "{args:?}: {want:?} not in {line:?}");
    }
    drop(prod);
}

/// Queue cursors made corrupt while `top` runs (a stray write: the enqueue cursor 40 in a
/// queue of 8 holding 1 item, cursors the open and `stat` refuse): `top` went on printing
/// frames of them, "queued 40/8" with an in/s of the jump for an SPSC queue, "queued
/// 4611686018427387904/8" for one set to 2^62, and exited 0 once its iterations were done.
/// It now ends at the next frame with the open's error naming the file and the cursors
/// (exit 1), as it ends for a ring's write_seq that becomes corrupt.
#[test]
fn queue_cursors_made_corrupt_while_top_runs_end_it_with_the_error() {
    use ringwire::core::queue::layout::qhdr;
    use ringwire::queue::{MpmcQueue, SpscProducer};
    for kind in ["spsc", "mpmc"] {
        let p = ShmPath::new(&format!("cli-misc-top-cursors-{kind}"));
        // The live handle keeps the file; top maps it read-only.
        let handle: Box<dyn std::any::Any> = if kind == "spsc" {
            let mut q = SpscProducer::<u64>::create(p.path(), 8).unwrap();
            q.try_push(&7).unwrap();
            Box::new(q)
        } else {
            let q = MpmcQueue::<u64>::create(p.path(), 8).unwrap();
            q.try_push(&7).unwrap();
            Box::new(q)
        };
        let path = p.path().to_str().unwrap();
        let mut top = Top::spawn(&["top", path, "--interval-ms", "20", "--iterations", "400"]);
        wait_for_top(&mut top, "the sound frame", |o| o.contains("queued 1/8 "));
        ringwire_tests::shm::patch(p.path(), qhdr::ENQ as u64, &40u64.to_ne_bytes());
        wait_exit(
            &mut top.child,
            Duration::from_secs(10),
            "top of a corrupt queue",
        );
        let status = top.child.wait().unwrap();
        let err = top.err();
        let out = top.out();
        assert_eq!(status.code(), Some(1), "{kind}: {err}\n{out}");
        assert!(
            !out.contains("queued 40/8"),
            "{kind}: a frame of the corrupt cursors:\n{out}"
        );
        assert!(
            err.contains(&format!("queue {path}:")) && err.contains("enqueue 40, dequeue 0"),
            "{kind}: {err}"
        );
        drop(handle);
    }
}

/// `top`'s MB/s is msg/s × element_size (the slot stride, 16 bytes for a ring of u64, its
/// sequence word included), as ringfire's top counts it; the help gave no unit or basis, so
/// a reader took it for the records' 8 payload bytes and read twice the real rate. The help
/// now says what it counts, and a frame's two figures agree with it.
#[test]
fn tops_mb_per_second_is_msg_per_second_times_element_size_as_its_help_says() {
    let (code, help, err) = ringwire(&["top", "--help"]);
    assert_eq!(code, 0, "{err}");
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        help.contains(
            "MB/s is msg/s × element_size in 10^6 bytes a second: the slot stride, each \
             record's 8-byte sequence word included"
        ),
        "{help}"
    );
    let p = ShmPath::new("cli-misc-top-mbps");
    let mut prod = RingProducer::<u64>::create(p.path(), 1024).unwrap();
    assert_eq!(prod.file().geometry().element_size, 16);
    let path = p.path().to_str().unwrap().to_string();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let out = std::thread::scope(|s| {
        s.spawn(|| {
            let mut i = 0u64;
            // Relaxed: a plain stop flag.
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                prod.push(&i);
                i += 1;
            }
        });
        let r = ringwire(&["top", &path, "--interval-ms", "200", "--iterations", "1"]);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        r
    });
    let (code, out, err) = out;
    assert_eq!(code, 0, "{err}");
    let figure = |key: &str| -> f64 {
        let rest = out
            .split(key)
            .nth(1)
            .unwrap_or_else(|| panic!("{key}: {out}"));
        rest.split_whitespace().next().unwrap().parse().unwrap()
    };
    let (rate, mbps) = (figure("msg/s "), figure("MB/s "));
    assert!(rate > 100_000.0, "too few records to tell: {out}");
    let want = rate * 16.0 / 1e6;
    assert!(
        (mbps - want).abs() <= 0.006,
        "MB/s {mbps}, msg/s × 16 B = {want}: {out}"
    );
}
