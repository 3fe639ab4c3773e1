//! The `ringwire` binary as a process: exit codes and messages.

use std::process::Command;
use std::sync::atomic::Ordering;

use ringwire::core::Geometry;
use ringwire::core::broadcast::registry;
use ringwire::{CleanupMode, CreateOptions, RingFile};

mod common;
use common::{TmpRing, ringwire, ringwire_to_dev_full};

fn make_ring(t: &TmpRing, readers: u32) -> RingFile {
    let geo = Geometry::spmc(16, 16, 8, readers, false).unwrap();
    let opts = CreateOptions {
        cleanup: CleanupMode::Persistent,
        ..CreateOptions::default()
    };
    RingFile::create(&t.0, &geo, &opts).unwrap()
}

#[test]
fn stat_json_of_a_ringwire_ring() {
    let t = TmpRing::new("stat");
    let r = make_ring(&t, 0);
    for s in 1..=20 {
        view(&r).write_slot(s, &s.to_le_bytes());
        view(&r).publish(s);
    }
    let (code, out, err) = ringwire(&["stat", t.0.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["write_seq"], 20);
    assert_eq!(v["capacity"], 16);
    assert_eq!(v["element_size"], 16);
    assert_eq!(v["oldest_seq"], 5);
}

#[test]
fn corrupt_ring_is_an_error_naming_file_and_value() {
    let t = TmpRing::new("corrupt");
    drop(make_ring(&t, 0));
    let mut bytes = std::fs::read(&t.0).unwrap();
    bytes[16..24].copy_from_slice(&1000u64.to_le_bytes());
    std::fs::write(&t.0, &bytes).unwrap();
    for cmd in ["stat", "dump", "top", "prune"] {
        let mut args = vec![cmd, t.0.to_str().unwrap()];
        if cmd == "top" {
            args.extend(["--iterations", "1"]);
        }
        let (code, _, err) = ringwire(&args);
        assert_eq!(code, 1, "{cmd}: {err}");
        assert_eq!(
            err.trim(),
            format!(
                "Error: ring {}: capacity 1000 is not a power of two",
                t.0.display()
            ),
            "{cmd}"
        );
    }
}

/// A lossy MPMC ring of 4 slots at a new path named after `name`, left on disk, holding
/// tickets 1 and 2 (`claim_seq` 3, `write_seq` 2, `read_seq` 1); and its bytes.
fn lossy_ring_of_two(name: &str) -> (TmpRing, Vec<u8>) {
    let t = TmpRing::new(name);
    let mut p = ringwire::MpmcProducer::<u64>::create(&t.0, 4).unwrap();
    p.set_cleanup_mode(CleanupMode::Persistent);
    p.push(&1);
    p.push(&2);
    drop(p);
    let sound = std::fs::read(&t.0).unwrap();
    (t, sound)
}

/// A lossy MPMC ring whose header every consumer refuses at attach (`read_seq` past
/// `claim_seq`, or `claim_seq` at or past 2^63): `stat` printed it as a sound ring's and
/// exited 0. It now gives the consumer's refusal, naming the file and the values, exit 1,
/// as for a corrupt SPSC queue's cursors. `dump` prints the records as before: it reads
/// as a broadcast reader does, which neither counter stops.
#[test]
fn stat_of_a_lossy_ring_header_its_consumers_refuse_is_an_error() {
    use ringwire::core::layout::hdr;
    let (t, sound) = lossy_ring_of_two("stat-lossy-header");
    let path = t.0.to_str().unwrap();
    let (code, dumped, err) = ringwire(&["dump", path]);
    assert_eq!(code, 0, "{err}");
    for (field, value, what) in [
        (
            hdr::READ_SEQ,
            102,
            "MPMC read_seq 102 is past claim_seq 3 (a corrupt header): consumers would take no \
             ticket until 99 more were claimed, and count none of them lost",
        ),
        (
            hdr::CLAIM_SEQ,
            u64::MAX,
            "claim_seq 0xffffffffffffffff is at or past the sequence limit 0x8000000000000000 \
             (a corrupt header): it leaves no valid ticket",
        ),
    ] {
        let mut bytes = sound.clone();
        bytes[field..field + 8].copy_from_slice(&value.to_ne_bytes());
        std::fs::write(&t.0, &bytes).unwrap();
        for args in [vec!["stat", path], vec!["stat", path, "--json"]] {
            let (code, out, err) = ringwire(&args);
            assert_eq!(code, 1, "{args:?}: {out}");
            assert_eq!(
                err.trim(),
                format!("Error: ring {path}: {what}"),
                "{args:?}"
            );
        }
        let (code, out, err) = ringwire(&["dump", path]);
        assert_eq!((code, out), (0, dumped.clone()), "{err}");
    }
    std::fs::write(&t.0, &sound).unwrap();
    let (code, out, err) = ringwire(&["stat", path, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (v["claim_seq"].clone(), v["read_seq"].clone()),
        (3.into(), 1.into())
    );
}

/// A ring (SPMC or MPMC, fixed records or blobs) whose `write_seq` is at or past 2^63: a
/// corrupt header, which every producer refuses (`AttachError::WriteSeqExhausted`). `stat`
/// printed it as a sound ring's ("oldest_seq 9223372036854775805"), `dump` printed a
/// "(not published yet)" line per record of a window no record is in, and `top` a frame of
/// it, all exit 0. Each now gives the producer's refusal, naming the file and the value,
/// exit 1, as `stat` does for the other corrupt headers; the sound file still reads.
#[test]
fn stat_dump_and_top_of_a_ring_whose_write_seq_is_past_the_limit_are_errors() {
    use ringwire::core::layout::{SEQ_LIMIT, hdr};
    let persistent = CreateOptions {
        cleanup: CleanupMode::Persistent,
        ..CreateOptions::default()
    };
    let geos = [
        Geometry::spmc(8, 16, 8, 2, false).unwrap(),
        Geometry::blob(8, 32, 0, 256).unwrap(),
    ];
    for (i, geo) in geos.iter().enumerate() {
        let t = TmpRing::new(&format!("stat-write-seq-{i}"));
        let r = RingFile::create(&t.0, geo, &persistent).unwrap();
        for s in 1..=3u64 {
            view(&r).write_slot(s, &s.to_le_bytes());
            view(&r).publish(s);
        }
        drop(r);
        write_seq_past_the_limit_is_refused(&t, hdr::WRITE_SEQ, SEQ_LIMIT);
    }
    let t = TmpRing::new("stat-write-seq-mpmc");
    let mut p = ringwire::MpmcProducer::<u64>::create(&t.0, 4).unwrap();
    p.set_cleanup_mode(CleanupMode::Persistent);
    for v in 1..=3 {
        p.push(&v);
    }
    drop(p);
    write_seq_past_the_limit_is_refused(&t, hdr::WRITE_SEQ, SEQ_LIMIT);
}

/// The ring at `t` with its `write_seq` (at byte `field`) set to values from `limit` up:
/// `stat` (text and JSON), `dump` and `top` refuse it, exit 1; with its own bytes back they
/// read it, exit 0.
fn write_seq_past_the_limit_is_refused(t: &TmpRing, field: usize, limit: u64) {
    let path = t.0.to_str().unwrap();
    let sound = std::fs::read(&t.0).unwrap();
    for bad in [limit, limit + 3, u64::MAX - 1, u64::MAX] {
        let mut bytes = sound.clone();
        bytes[field..field + 8].copy_from_slice(&bad.to_ne_bytes());
        std::fs::write(&t.0, &bytes).unwrap();
        let what = format!(
            "Error: ring {path}: write_seq {bad:#x} is at or past the sequence limit \
             0x8000000000000000 (a corrupt header): no record can follow it"
        );
        for args in [
            &["stat", path][..],
            &["stat", path, "--json"],
            &["dump", path],
            &["top", path, "--iterations", "1", "--interval-ms", "1"],
        ] {
            let (code, out, err) = ringwire(args);
            assert_eq!((code, out.as_str()), (1, ""), "{args:?}: {err}");
            assert_eq!(err.trim(), what, "{args:?}");
        }
    }
    std::fs::write(&t.0, &sound).unwrap();
    for args in [
        &["stat", path, "--json"][..],
        &["dump", path],
        &["top", path, "--iterations", "1", "--interval-ms", "1"],
    ] {
        let (code, out, err) = ringwire(args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(out.contains('3'), "{args:?}: {out}");
    }
}

/// A lossy MPMC ring whose `write_seq` is below 2^63 but at or past `claim_seq`: no producer
/// publishes a ticket before it claims it, so no sound ring shows that (loaded in that
/// order). `stat` printed it as a sound ring (exit 0), `dump` printed "(not published yet)"
/// for records no ticket was drawn for, `top` a frame of it, and `heal` said there was
/// nothing to heal. Each now refuses it as the neighbouring corrupt headers, naming the file
/// and both values, exit 1; the sound bytes read again. `write_seq` one below `claim_seq`
/// (every ticket drawn is published) is sound.
#[test]
fn a_lossy_ring_whose_write_seq_is_past_claim_seq_is_an_error() {
    use ringwire::core::layout::hdr;
    let (t, sound) = lossy_ring_of_two("lossy-write-seq-ahead");
    let path = t.0.to_str().unwrap();
    let top = ["top", path, "--iterations", "1", "--interval-ms", "1"];
    for bad in [3u64, 102, (1 << 63) - 1] {
        let mut bytes = sound.clone();
        bytes[hdr::WRITE_SEQ..hdr::WRITE_SEQ + 8].copy_from_slice(&bad.to_ne_bytes());
        std::fs::write(&t.0, &bytes).unwrap();
        let what = format!(
            "MPMC write_seq {bad} is at or past claim_seq 3 (a corrupt header): no producer \
             publishes a ticket it has not claimed, so the window it places holds records \
             never published"
        );
        for args in [
            &["stat", path][..],
            &["stat", path, "--json"],
            &["dump", path],
            &top,
        ] {
            let (code, out, err) = ringwire(args);
            assert_eq!((code, out.as_str()), (1, ""), "{args:?}: {err}");
            assert_eq!(
                err.trim(),
                format!("Error: ring {path}: {what}"),
                "{args:?}"
            );
        }
        for args in [&["heal", path][..], &["heal", path, "--producers-dead"]] {
            let (code, out, err) = ringwire(args);
            assert_eq!((code, out.as_str()), (1, ""), "{args:?}: {err}");
            assert_eq!(
                err.trim(),
                format!(
                    "Error: {path}: {what}. heal changes nothing in it; a new ring replaces it"
                ),
                "{args:?}"
            );
        }
        assert_eq!(std::fs::read(&t.0).unwrap(), bytes, "heal wrote nothing");
    }
    std::fs::write(&t.0, &sound).unwrap();
    for (args, shows) in [
        (&["stat", path, "--json"][..], "\"write_seq\": 2\n"),
        (&["dump", path], "seq 2 slot 2 seq_word 2 "),
        (&top, "write_seq 2 "),
        (&["heal", path], "no slot left mid-write; nothing to heal"),
    ] {
        let (code, out, err) = ringwire(args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(out.contains(shows), "{args:?}: {out}");
    }
}

/// A lossy MPMC ring whose `claim_seq` was scribbled to 0 (it is 1 on a new ring and only
/// grows): `stat` and `heal` said "MPMC write_seq 0 is at or past claim_seq 0", which reads
/// as nonsense for the ring nothing was published to. The case has its own words, naming
/// the value and `write_seq`, with or without records published; exit 1 as before.
#[test]
fn a_lossy_ring_whose_claim_seq_is_0_is_named_so() {
    use ringwire::core::layout::hdr;
    let (t, sound) = lossy_ring_of_two("lossy-claim-seq-0");
    let path = t.0.to_str().unwrap();
    for write_seq in [0u64, 2] {
        let mut bytes = sound.clone();
        bytes[hdr::CLAIM_SEQ..hdr::CLAIM_SEQ + 8].copy_from_slice(&0u64.to_ne_bytes());
        bytes[hdr::WRITE_SEQ..hdr::WRITE_SEQ + 8].copy_from_slice(&write_seq.to_ne_bytes());
        std::fs::write(&t.0, &bytes).unwrap();
        let what = format!(
            "MPMC claim_seq is 0 (a corrupt header): it holds the next ticket to claim, 1 on a \
             new ring and never lowered, so no producer leaves it at 0 (write_seq {write_seq})"
        );
        for args in [&["stat", path][..], &["stat", path, "--json"]] {
            let (code, out, err) = ringwire(args);
            assert_eq!((code, out.as_str()), (1, ""), "{args:?}: {err}");
            assert_eq!(
                err.trim(),
                format!("Error: ring {path}: {what}"),
                "{args:?}"
            );
        }
        let (code, out, err) = ringwire(&["heal", path]);
        assert_eq!((code, out.as_str()), (1, ""), "{err}");
        assert_eq!(
            err.trim(),
            format!("Error: {path}: {what}. heal changes nothing in it; a new ring replaces it")
        );
        assert_eq!(std::fs::read(&t.0).unwrap(), bytes, "heal wrote nothing");
    }
}

/// A lossy MPMC ring with a slot holding a sequence at or past `claim_seq`, which no
/// producer writes (a ticket is claimed before its slot is written): a corrupt ring, on
/// which every push landing on that slot is discarded. `heal` reported it, exit 1, while
/// `stat` printed the ring as a sound one, exit 0. `stat` now reports it as `heal` does
/// (the same check), naming the slot, its sequence and `claim_seq`, exit 1, text and JSON
/// alike. `dump` still shows what is there: the slot's word, as for any corrupt slot.
#[test]
fn stat_of_a_lossy_ring_with_a_slot_past_claim_seq_is_an_error() {
    let t = TmpRing::new("stat-lossy-slot-ahead");
    let path = t.0.to_str().unwrap();
    let mut p = ringwire::MpmcProducer::<u64>::create(&t.0, 4).unwrap();
    p.set_cleanup_mode(CleanupMode::Persistent);
    for v in 1..=2 {
        p.push(&v);
    }
    let (code, _, err) = ringwire(&["stat", path]);
    assert_eq!(code, 0, "{err}");
    // SAFETY: the view is used while `p` keeps the mapping.
    let v = unsafe { p.file().view() };
    v.slot_seq(2).store(1 << 62, Ordering::SeqCst);
    v.slot_seq(3).store(3, Ordering::SeqCst);
    for args in [&["stat", path][..], &["stat", path, "--json"]] {
        let (code, out, err) = ringwire(args);
        assert_eq!((code, out.as_str()), (1, ""), "{args:?}: {err}");
        assert_eq!(
            err.trim(),
            format!(
                "Error: ring {path}: 2 slot(s) hold a sequence at or past claim_seq 3 (the \
                 first: slot 2, sequence 4611686018427387904), which no producer writes: a \
                 corrupt ring, on which every push landing on such a slot is discarded until \
                 tickets reach its sequence"
            ),
            "{args:?}"
        );
    }
    let (code, out, err) = ringwire(&["dump", path]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("seq 2 slot 2 seq_word 4611686018427387904 "),
        "{out}"
    );
    // Sequence 3 is the next ticket: no longer past claim_seq once it is claimed.
    v.slot_seq(2).store(2, Ordering::SeqCst);
    v.claim_seq().store(4, Ordering::SeqCst);
    let (code, _, err) = ringwire(&["stat", path, "--json"]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn bad_flag_values_fail_with_a_message() {
    let t = TmpRing::new("flags");
    let _r = make_ring(&t, 0);
    let p = t.0.to_str().unwrap();
    for args in [
        vec!["dump", p, "--tail", "0"],
        vec!["dump", p, "--tail", "x"],
        vec!["top", p, "--interval-ms", "soon"],
        vec!["top", p, "--iterations", "0"],
        vec!["top", p, "--interval-ms", "0"],
        vec!["top", p, "--interval-ms", "3600001"],
        vec!["top", p, "--interval-ms", "18446744073709551615"],
        vec!["mirror", "127.0.0.1:1", p, "--nak-delay-us", "1000001"],
        vec!["mirror", "127.0.0.1:1", p, "--reconnect-ms", "3600001"],
        vec!["mirror", "127.0.0.1:1", p, "--reconnect-ms", "soon"],
        vec!["mirror", "127.0.0.1:1", p, "--from", "soon"],
        vec!["serve", p, "--bind", "127.0.0.1:0", "--mtu", "10"],
        vec!["serve", p, "--bind", "127.0.0.1:0", "--dup", "0"],
        vec!["serve", p, "--bind", "127.0.0.1:0", "--ttl", "256"],
        vec![
            "serve",
            p,
            "--bind",
            "127.0.0.1:0",
            "--linger-us",
            "1000001",
        ],
    ] {
        let (code, out, err) = ringwire(&args);
        assert_ne!(code, 0, "{args:?}");
        assert!(out.is_empty(), "{args:?}: {out}");
        assert!(err.contains("invalid value"), "{args:?}: {err}");
    }
    let (code, _, err) = ringwire(&["top", p, "--interval-ms", "3600001"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("3600001 ms is over an hour: the most is 3600000"),
        "{err}"
    );
    let (code, out, err) = ringwire(&["top", p, "--interval-ms", "3600000", "--iterations", "0"]);
    assert_ne!(code, 0, "{out}");
    assert!(
        err.contains("--iterations") && !err.contains("--interval-ms"),
        "the hour itself is taken: {err}"
    );
}

/// A negative value is refused by the option it was given to, naming it and the value, as
/// any other bad value is; clap took `-1` for an unknown flag ("unexpected argument '-1'
/// found", "to pass '-1' as a value, use '-- -1'"), naming neither.
#[test]
fn negative_values_are_refused_naming_the_flag() {
    let t = TmpRing::new("negative");
    let _r = make_ring(&t, 0);
    let p = t.0.to_str().unwrap();
    let serve = ["serve", p, "--bind", "127.0.0.1:0", "--udp", "0"];
    let mirror = ["mirror", "127.0.0.1:1", p];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        ([&serve[..], &["--batch", "-1"]].concat(), "--batch <N>"),
        ([&serve[..], &["--mtu", "-1472"]].concat(), "--mtu <N>"),
        ([&serve[..], &["--ttl", "-1"]].concat(), "--ttl <N>"),
        ([&serve[..], &["--dup", "-2"]].concat(), "--dup <N>"),
        (
            [&serve[..], &["--linger-us", "-50"]].concat(),
            "--linger-us <N>",
        ),
        (
            [&serve[..], &["--max-mirrors", "-1"]].concat(),
            "--max-mirrors <N>",
        ),
        (
            [&serve[..], &["--punch-timeout", "-1"]].concat(),
            "--punch-timeout <S>",
        ),
        (
            vec!["serve", p, "--bind", "127.0.0.1:0", "--udp", "-1"],
            "--udp <PORT>",
        ),
        (vec!["serve", p, "--bind", "-1"], "--bind <ADDR>"),
        ([&mirror[..], &["--from", "-3"]].concat(), "--from <WHERE>"),
        (
            [&mirror[..], &["--reconnect-ms", "-5"]].concat(),
            "--reconnect-ms <N>",
        ),
        (
            [&mirror[..], &["--nak-delay-us", "-1"]].concat(),
            "--nak-delay-us <N>",
        ),
        (
            [&mirror[..], &["--max-ring-size", "-1"]].concat(),
            "--max-ring-size <SIZE>",
        ),
        (
            vec!["top", p, "--interval-ms", "-1"],
            "--interval-ms <INTERVAL_MS>",
        ),
        (
            vec!["top", p, "--iterations", "-1"],
            "--iterations <ITERATIONS>",
        ),
        (vec!["dump", p, "--tail", "-1"], "--tail <TAIL>"),
        (vec!["demo", "--seconds", "-1"], "--seconds <N>"),
    ];
    for (args, flag) in cases {
        // Bounded: a command that accepted the value would run until killed.
        let (code, out, err) = ringwire_bounded(&args);
        assert_eq!(code, 1, "{args:?}: {out}{err}");
        let value = args.last().unwrap();
        assert!(
            err.contains(&format!("invalid value '{value}' for '{flag}'")),
            "{args:?}: {err}"
        );
    }
}

/// A `--max-ring-size` past 2^64 - 1 bytes written in digits is refused as too large, as one
/// past it by its suffix (`16777216T`) is. It was refused as "'99999999999999999999' is not
/// a size: a number of bytes, or one with a suffix K, M, G or T", though it is a number of
/// bytes: the message sent the user looking for a typo.
#[test]
fn a_max_ring_size_past_2_64_in_digits_is_refused_as_too_large() {
    let t = TmpRing::new("max-ring-size");
    let p = t.0.to_str().unwrap();
    for size in [
        "18446744073709551616",
        "99999999999999999999",
        "18446744073709551616K",
        "16777216T",
    ] {
        let (code, out, err) = ringwire(&["mirror", "127.0.0.1:1", p, "--max-ring-size", size]);
        assert_eq!(code, 1, "{size}: {err}");
        assert!(out.is_empty(), "{size}: {out}");
        let want = format!(
            "invalid value '{size}' for '--max-ring-size <SIZE>': '{size}' is more than 2^64 - 1 bytes"
        );
        assert!(err.contains(&want), "{size}: {err}");
        assert!(!t.0.exists(), "{size}: a mirror ring was made");
    }
}

/// Runs `ringwire ARGS` until its first stderr line, stops it with SIGTERM and returns its
/// exit code and stderr (bounded: killed if it has said nothing in 10 s or not ended 10 s
/// after the signal).
fn stopped_by_sigterm(args: &[&str]) -> (Option<i32>, String) {
    use std::io::Read;
    use std::time::{Duration, Instant};
    struct Kid(std::process::Child);
    impl Drop for Kid {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = Kid(Command::new(env!("CARGO_BIN_EXE_ringwire"))
        .args(args)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap());
    let mut stderr = child.0.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = stderr.read(&mut buf) {
            if tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut err = Vec::new();
    let first = rx.recv_timeout(Duration::from_secs(10));
    err.extend(first.unwrap_or_else(|_| panic!("{args:?}: nothing said within 10 s")));
    // SAFETY: kill(2) on our own child's pid (not yet reaped: we hold its Child).
    assert_eq!(unsafe { libc::kill(child.0.id() as i32, libc::SIGTERM) }, 0);
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{args:?}: still running 10 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    reader.join().unwrap();
    err.extend(rx.try_iter().flatten());
    (status.code(), String::from_utf8_lossy(&err).into_owned())
}

/// serve and mirror stopped by a signal end in an orderly way: a last line with their
/// totals, exit 0; their --help says so, as ringfire's (killed by the signal, no last
/// line) does otherwise. The help said nothing of how they stop or what they exit with.
#[test]
fn serve_and_mirror_stop_on_sigterm_as_their_help_says() {
    let t = TmpRing::new("stop");
    let _r = make_ring(&t, 0);
    let p = t.0.to_str().unwrap();
    let mirror_ring = t.0.with_file_name("mirror");
    for (args, last) in [
        (vec!["serve", p, "--bind", "127.0.0.1:0"], "serve: done: "),
        (
            // Nothing listens on port 1: the mirror retries until stopped.
            vec!["mirror", "127.0.0.1:1", mirror_ring.to_str().unwrap()],
            "mirror: done: ",
        ),
    ] {
        let (code, err) = stopped_by_sigterm(&args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        let line = err.lines().last().unwrap_or_default();
        assert!(line.starts_with(last), "{args:?}: {err}");
        let (code, help, _) = ringwire(&[args[0], "--help"]);
        assert_eq!(code, 0);
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
        for said in [
            "Runs until SIGINT, SIGTERM or SIGHUP",
            &format!("\"{last}…\" with its totals, and exits 0"),
        ] {
            assert!(help.contains(said), "{}: {said:?} not in {help}", args[0]);
        }
    }
}

/// A SOURCE host name is resolved before each connection attempt, as ringfire's mirror
/// resolves it at each connect: a name that does not resolve (DNS not up yet when the
/// mirror starts at boot) is a failed attempt, retried until the mirror is stopped, and
/// with --once an error naming it. It was resolved once, while the arguments were parsed:
/// such a mirror exited 1 at once with a usage error calling the name "not HOST:PORT".
#[test]
fn a_source_name_that_does_not_resolve_is_retried() {
    let t = TmpRing::new("unresolved");
    let p = t.0.to_str().unwrap();
    // `.invalid` never resolves (RFC 2606).
    let source = "nowhere.invalid:7400";
    let (code, err) = stopped_by_sigterm(&["mirror", source, p, "--reconnect-ms", "10"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.starts_with(&format!("mirror: connect {source}: ")) && err.contains("retrying"),
        "{err}"
    );
    assert!(!t.0.exists(), "no ring is made before a connection");
    let (code, _, err) = ringwire(&["mirror", source, p, "--once"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.starts_with(&format!("Error: connect {source}: ")),
        "{err}"
    );
    // What no resolution can mend is still refused at once.
    for bad in [
        "nowhere.invalid",
        "nowhere.invalid:0",
        "300.1.2.3:7400",
        "::1:7400",
    ] {
        let (code, _, err) = ringwire(&["mirror", bad, p, "--once"]);
        assert_eq!(code, 1, "{bad}: {err}");
        assert!(
            err.contains(&format!("invalid value '{bad}' for '<SOURCE>'")),
            "{bad}: {err}"
        );
    }
}

#[test]
fn top_runs_the_requested_iterations() {
    let t = TmpRing::new("top");
    let r = make_ring(&t, 0);
    view(&r).write_slot(1, &[1]);
    view(&r).publish(1);
    let (code, out, err) = ringwire(&[
        "top",
        t.0.to_str().unwrap(),
        "--interval-ms",
        "5",
        "--iterations",
        "3",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.matches("write_seq 1 ").count(), 3, "{out}");
}

#[test]
fn dump_of_an_empty_ring_prints_a_notice() {
    let t = TmpRing::new("empty");
    let _r = make_ring(&t, 0);
    let (code, out, _) = ringwire(&["dump", t.0.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.contains("is empty"), "{out}");
}

/// A slot whose sequence word no writer leaves there (a sequence of another slot, or one at
/// or past 2^63, which no producer writes): `dump` showed it as a later lap's write,
/// "(overwritten by 7)" for record 2 in slot 2 of a ring of 16, though record 7 lives in
/// slot 7. Such a line now says the slot is corrupt, naming the word; a later lap's
/// sequence (congruent, below 2^63) is still an overwrite.
#[test]
fn dump_names_a_slot_word_no_writer_leaves_corrupt() {
    use std::os::unix::fs::FileExt;
    let t = TmpRing::new("dump-corrupt-word");
    let r = make_ring(&t, 0);
    for s in 1..=5u64 {
        view(&r).write_slot(s, &s.to_le_bytes());
        view(&r).publish(s);
    }
    let slots = view(&r).geometry().slots_offset;
    let f = std::fs::OpenOptions::new().write(true).open(&t.0).unwrap();
    let word = |seq: u64, w: u64| f.write_all_at(&w.to_ne_bytes(), slots + 16 * seq).unwrap();
    word(2, 7);
    word(3, (1 << 63) + 3);
    word(4, 20);
    let (code, out, err) = ringwire(&["dump", t.0.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "seq 1 slot 1 seq_word 1 \"........\" (8 bytes)",
            "seq 2 slot 2 seq_word 7 (corrupt: slot 2 holds sequence 7, which no write of it \
             leaves)",
            "seq 3 slot 3 seq_word 9223372036854775811 (corrupt: slot 3 holds sequence \
             9223372036854775811, which no write of it leaves)",
            "seq 4 slot 4 seq_word 20 (overwritten by 20)",
            "seq 5 slot 5 seq_word 5 \"........\" (8 bytes)",
        ],
        "{out}"
    );
}

#[test]
fn dump_of_a_blob_ring_previews_each_blob_or_says_it_was_overwritten() {
    let t = TmpRing::new("blobdump");
    let mut p = ringwire::BlobProducer::<u64>::create(&t.0, 16, 256).unwrap();
    p.push(&1, b"first blob").unwrap();
    p.push(&2, b"").unwrap();
    // 4 blobs of 64-byte spans after the first: the 256-byte arena laps over blob 1.
    for m in 3..=6u64 {
        p.push(&m, format!("blob number {m}").repeat(4).as_bytes())
            .unwrap();
    }
    let (code, out, err) = ringwire(&["dump", t.0.to_str().unwrap(), "--tail", "16"]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 6, "{out}");
    assert!(
        lines[0].starts_with("seq 1 ") && lines[0].ends_with("blob (overwritten)"),
        "{out}"
    );
    assert!(lines[1].ends_with("blob \"\" (0 bytes)"), "{out}");
    assert!(
        lines[5].ends_with("blob \"blob number 6blob number 6blob n\" (52 bytes)"),
        "{out}"
    );
    let (code, out, _) = ringwire(&["dump", t.0.to_str().unwrap(), "--tail", "1", "--hex"]);
    assert_eq!(code, 0);
    assert!(
        out.trim_end()
            .ends_with("blob 62 6C 6F 62 20 6E 75 6D 62 65 72 20 36 62 6C 6F (52 bytes)"),
        "{out}"
    );
    drop(p);
}

#[test]
fn prune_frees_a_dead_readers_slot() {
    let t = TmpRing::new("prune");
    let r = make_ring(&t, 4);
    // A reader that is alive (us) and one whose pid cannot exist.
    let dead = i32::MAX as u32 - 1;
    registry::register(view(&r), std::process::id(), "me", 1, |_| true).unwrap();
    registry::register(view(&r), dead, "ghost", 1, |_| true).unwrap();
    let (code, out, err) = ringwire(&["prune", t.0.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("pruned dead reader pid {dead}")),
        "{out}"
    );
    assert!(out.contains("pruned 1 dead reader(s)"), "{out}");
    let live: Vec<u32> = registry::live_readers(view(&r)).map(|x| x.pid).collect();
    assert_eq!(live, vec![std::process::id()]);
}

/// `stat`, `top` and `prune` judge a registration by the start time its token carries: a
/// slot with our pid whose token names a process that started 1 s after us (a later
/// process with a dead reader's pid, as the slot sees it) is dead to all three; before, the
/// pid alone made it alive. Our own registration (the right start time) stays alive.
#[test]
fn stat_top_and_prune_judge_a_reused_pid_by_the_start_time_in_its_token() {
    use registry::{Incarnation, encode_name, register_owner_as};
    let t = TmpRing::new("reused");
    let r = make_ring(&t, 4);
    let me = std::process::id();
    let mine = ringwire::sys::own_incarnation().expect("this test needs /proc");
    let later = Incarnation {
        start: (mine.start + 100) & 0xF_FFFF,
        ..mine
    };
    for (name, inc) in [("mine", mine), ("later", later)] {
        register_owner_as(view(&r), me, &encode_name(name), 1, Some(inc), |_, _| true).unwrap();
    }
    let path = t.0.to_str().unwrap();
    let (code, out, err) = ringwire(&["stat", path, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let alive: Vec<(String, bool)> = v["readers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["alive"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        alive,
        [("mine".to_string(), true), ("later".to_string(), false)]
    );
    let (code, out, err) = ringwire(&["top", path, "--interval-ms", "5", "--iterations", "1"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("reader 0 pid {me} (alive) mine")),
        "{out}"
    );
    assert!(
        out.contains(&format!("reader 1 pid {me} (dead) later")),
        "{out}"
    );
    let (code, out, err) = ringwire(&["prune", path]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("pruned dead reader pid {me}")),
        "{out}"
    );
    assert!(out.contains("pruned 1 dead reader(s)"), "{out}");
    let live: Vec<u32> = registry::live_readers(view(&r)).map(|x| x.slot).collect();
    assert_eq!(live, vec![0]);
}

/// The ring's view, borrowed for the test's direct writes while `r` is alive.
fn view(r: &ringwire::RingFile) -> &ringwire::core::RingView {
    // SAFETY: the returned borrow cannot outlive `r`, and the tests never copy it.
    unsafe { r.view() }
}

#[test]
fn stat_describes_queue_files_and_other_commands_name_them() {
    // SPSC: 5 pushed, 2 popped.
    let t = TmpRing::new("spsc-q");
    let _ = std::fs::remove_file(&t.0);
    let mut p = ringwire::queue::SpscProducer::<u64>::create(&t.0, 8).unwrap();
    let mut c = ringwire::queue::SpscConsumer::<u64>::open(&t.0).unwrap();
    for i in 0..5u64 {
        p.try_push(&i).unwrap();
    }
    for _ in 0..2 {
        c.try_pop().unwrap().unwrap();
    }
    let path = t.0.to_str().unwrap();
    let (code, out, err) = ringwire(&["stat", path, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["type"], "queue");
    assert_eq!(v["kind"], "SPSC");
    assert_eq!(v["capacity"], 8);
    assert_eq!(v["item_size"], 8);
    assert_eq!(
        (v["enqueue"].clone(), v["dequeue"].clone()),
        (5.into(), 2.into())
    );
    assert_eq!(v["queued"], 3);
    assert!(v["claimed_unpublished"].is_null());
    let (code, out, err) = ringwire(&["top", path, "--interval-ms", "5", "--iterations", "2"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.matches("SPSC queue  in/s ").count(), 2, "{out}");
    assert!(
        out.contains("  queued 3/8  sleeping consumers 0 producers 0"),
        "{out}"
    );
    for cmd in ["dump", "prune"] {
        let (code, out, err) = ringwire(&[cmd, path]);
        assert_eq!(code, 1, "{cmd}: {out}");
        assert!(
            err.contains("this is a ringwire SPSC queue") && err.contains(path),
            "{cmd}: {err}"
        );
    }
    drop((p, c));

    // MPMC: 3 pushed, 1 popped, then a claim left unpublished (a producer dead mid-push).
    let t = TmpRing::new("mpmc-q");
    let _ = std::fs::remove_file(&t.0);
    let q = ringwire::queue::MpmcQueue::<u64>::create(&t.0, 16).unwrap();
    for i in 0..3u64 {
        q.try_push(&i).unwrap();
    }
    q.try_pop().unwrap();
    let stuck = q.claim().unwrap();
    let path = t.0.to_str().unwrap();
    let (code, out, err) = ringwire(&["stat", path]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with(&format!("Queue {path}\n")), "{out}");
    assert!(out.contains("kind                MPMC"), "{out}");
    assert!(out.contains("dequeue             1\n"), "{out}");
    assert!(
        out.contains(&format!("claimed_unpublished {stuck} (")),
        "{out}"
    );
    let (_, out, _) = ringwire(&["stat", path, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["claimed_unpublished"], stuck);
    assert_eq!(v["queued"], 3);
    let (code, out, err) = ringwire(&["top", path, "--iterations", "1"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("  position {stuck} claimed, not published")),
        "{out}"
    );
    assert!(!out.contains("slot not freed"), "{out}");
    assert!(v["taken_unfreed"].is_null());

    // A consumer that took position 1 and died before freeing its slot (the state its CAS
    // of the dequeue cursor leaves; a real pop cannot be stopped there from outside).
    // SAFETY: `q` outlives this use of the core queue.
    let core = unsafe { q.core() };
    core.view()
        .deq()
        .compare_exchange(1, 2, Ordering::Relaxed, Ordering::Relaxed)
        .unwrap();
    let (code, out, err) = ringwire(&["stat", path]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(
            "  taken_unfreed       1 (a pop in flight, or a consumer that died mid-pop)\n"
        ),
        "{out}"
    );
    let (_, out, _) = ringwire(&["stat", path, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["taken_unfreed"], 1);
    assert_eq!(v["claimed_unpublished"], stuck);
    let (code, out, err) = ringwire(&["top", path, "--iterations", "1"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("  position 1 popped, slot not freed"), "{out}");
    drop(q);

    // A corrupt queue file: the error names the file, and the value.
    let mut bytes = std::fs::read(&t.0).unwrap();
    bytes[16..24].copy_from_slice(&1000u64.to_le_bytes());
    std::fs::write(&t.0, &bytes).unwrap();
    let (code, out, err) = ringwire(&["stat", path]);
    assert_eq!(code, 1, "{out}");
    assert!(
        err.starts_with(&format!("Error: queue {path}: ")) && err.contains("1000"),
        "{err}"
    );
}

/// An MPMC queue file no process has open, one of whose slots holds a stamp its cursors rule
/// out (scribbled; or cursors and slots from different times, after a machine crash): every
/// open refuses it and `heal` reports it, but `stat` described it as a sound queue and
/// exited 0. It now gives that error, naming the file, the position and the stamp (exit 1),
/// and leaves the file as it was. A queue in use is still described: its pushes and pops in
/// flight look the same.
#[test]
fn stat_of_a_queue_at_rest_with_a_stamp_every_open_refuses_is_an_error() {
    use std::time::{Duration, Instant};
    let t = TmpRing::new("stat-q-stamp");
    let path = t.0.to_str().unwrap();
    let q = ringwire::queue::MpmcQueue::<u64>::create(&t.0, 8).unwrap();
    for v in 0..3 {
        q.try_push(&v).unwrap();
    }
    // Position 1's stamp (slot 1: the slots' offset 384, plus a 16-byte stride).
    let mut bytes = std::fs::read(&t.0).unwrap();
    bytes[400..408].copy_from_slice(&u64::MAX.to_le_bytes());
    std::fs::write(&t.0, &bytes).unwrap();
    let (code, out, err) = ringwire(&["stat", path]);
    assert_eq!(code, 0, "a queue in use is described: {err}");
    assert!(out.contains("  queued              3\n"), "{out}");
    drop(q);
    let what = format!(
        "Error: queue {path}: corrupt queue: the slot of position 1 holds stamp \
         0xffffffffffffffff, which no state with enqueue cursor 3 and dequeue cursor 0 leaves \
         there"
    );
    for json in [false, true] {
        let args: &[&str] = if json {
            &["stat", path, "--json"]
        } else {
            &["stat", path]
        };
        // Between its fork and its exec, a child another test spawns holds copies of this
        // process's descriptors: the file may not be alone for that instant, so stat is
        // tried again until it is.
        let deadline = Instant::now() + Duration::from_secs(30);
        let (code, out, err) = loop {
            let r = ringwire(args);
            if r.0 != 0 || Instant::now() >= deadline {
                break r;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(code, 1, "{args:?}: {out}");
        assert!(out.is_empty(), "{args:?}: {out}");
        assert!(err.starts_with(&what), "{args:?}: {err}");
    }
    assert_eq!(std::fs::read(&t.0).unwrap(), bytes, "stat changed the file");
}

#[test]
fn reconnect_ms_0_retries_at_once_and_logs_once_a_second() {
    use std::io::BufRead;
    use std::time::{Duration, Instant};
    /// Kills and reaps the mirror if the test fails before it is stopped (it retries forever).
    struct Kid(std::process::Child);
    impl Drop for Kid {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let t = TmpRing::new("reconnect0");
    // Port 1 on loopback: nothing listens, every connect is refused at once.
    let mut child = Kid(Command::new(env!("CARGO_BIN_EXE_ringwire"))
        .args([
            "mirror",
            "127.0.0.1:1",
            t.0.to_str().unwrap(),
            "--reconnect-ms",
            "0",
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap());
    // stderr line by line, read on a thread so that the wait below is bounded.
    let stderr = child.0.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // Until the second report (a second after the first), bounded: a fixed sleep left
    // little slack for a slow start on a loaded machine.
    let mut err = String::new();
    let retrying = |err: &str| err.lines().filter(|l| l.contains("; retrying")).count();
    let deadline = Instant::now() + Duration::from_secs(10);
    while retrying(&err) < 2 {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                err.push_str(&line);
                err.push('\n');
            }
            Err(_) => panic!("no second retry report within 10 s: {err}"),
        }
    }
    // SAFETY: kill(2) on our own child's pid (not yet reaped: we hold its Child).
    assert_eq!(unsafe { libc::kill(child.0.id() as i32, libc::SIGTERM) }, 0);
    let status = child.0.wait().unwrap();
    reader.join().unwrap();
    for line in rx.try_iter() {
        err.push_str(&line);
        err.push('\n');
    }
    assert!(status.success(), "{status}: {err}");
    let lines = retrying(&err);
    // One line at once and one a second after: 2 (3 if a third report raced the signal),
    // not thousands.
    assert!((2..=3).contains(&lines), "{err}");
    assert!(
        err.contains("more failed attempts since the last report"),
        "{err}"
    );
}

/// The number after `key` in `line` ("published 2001," gives 2001).
fn figure(line: &str, key: &str) -> f64 {
    let rest = line
        .split(key)
        .nth(1)
        .unwrap_or_else(|| panic!("no {key:?} in {line}"));
    let word = rest.split_whitespace().next().unwrap_or_default();
    word.trim_end_matches([',', ';'])
        .parse()
        .unwrap_or_else(|e| panic!("{key:?} in {line}: {e}"))
}

#[test]
fn demo_runs_the_whole_path_reports_cpu_and_removes_its_files() {
    // The README's first command, shortened: multicast (the default) for one second.
    let child = Command::new(env!("CARGO_BIN_EXE_ringwire"))
        .args(["demo", "--seconds", "1", "--rate", "2000"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let last = stdout.lines().last().unwrap_or_default();
    let published = figure(last, "published ");
    assert!((2_000.0..=2_001.0).contains(&published), "{last}");
    assert_eq!(figure(last, "delivered "), published, "{last}");
    assert_eq!(figure(last, "missed "), 0.0, "{last}");
    assert_eq!(figure(last, "corrupt "), 0.0, "{last}");
    // Four threads that mostly sleep at 2,000 msg/s: some CPU, and never more than the
    // machine has.
    let cores = figure(last, "cpu ");
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    assert!(cores > 0.0 && cores <= ncpu, "{last}");
    assert!(stderr.contains("msg/s"), "no live line: {stderr}");
    let prefix = format!("ringwire-demo-{pid}-");
    let left: Vec<_> = std::fs::read_dir("/dev/shm")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "demo left {left:?}");
}

/// `ringwire` with `args`, killed (and the test failed) if it runs longer than 10 s.
fn ringwire_bounded(args: &[&str]) -> (i32, String, String) {
    ringwire_within(args, std::time::Duration::from_secs(10))
}

/// `ringwire` with `args`, killed (and the test failed) if it runs longer than `max`.
fn ringwire_within(args: &[&str], max: std::time::Duration) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringwire"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > max {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ringwire {args:?} still running after {max:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let o = child.wait_with_output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn stat_dump_and_top_of_a_fifo_fail_at_once_naming_it() {
    let t = TmpRing::fifo("fifo");
    let p = t.0.to_str().unwrap();
    for args in [
        vec!["stat", p],
        vec!["dump", p],
        vec!["top", p, "--iterations", "1"],
    ] {
        let (code, out, err) = ringwire_bounded(&args);
        assert_eq!(code, 1, "{args:?}: {out}{err}");
        assert_eq!(
            err.trim(),
            format!("Error: {p}: not a regular file but a FIFO"),
            "{args:?}"
        );
    }
}

/// A mirror ring path that is not a regular file (a FIFO, a device) is refused before the
/// mirror connects, with the message the other commands give, instead of "read failed:
/// Illegal seek" (a FIFO) or a connection and an error at the handshake (/dev/null).
#[test]
fn mirror_to_a_fifo_or_a_device_fails_at_once_naming_it() {
    let t = TmpRing::fifo("mirror-fifo");
    // Port 1 refuses connections: a mirror that got as far as connecting says so.
    for (p, found) in [
        (t.0.to_str().unwrap(), "a FIFO"),
        ("/dev/null", "a character device"),
    ] {
        let (code, out, err) = ringwire_bounded(&["mirror", "127.0.0.1:1", p, "--once"]);
        assert_eq!(code, 1, "{p}: {out}{err}");
        assert_eq!(
            err.trim(),
            format!("Error: {p}: not a regular file but {found}"),
            "{p}"
        );
    }
}

/// A lossy MPMC ring at the mirror's path is refused before connecting (exit 1, naming the
/// path and what it is) and left byte for byte as it was: a mirror would have adopted it
/// when its layout matched the source's and written one writer's records into it.
#[test]
fn mirror_to_a_lossy_mpmc_ring_fails_at_once_and_leaves_it() {
    let t = TmpRing::new("mirror-mpmc");
    let mut tx = ringwire::MpmcProducer::<u64>::create(&t.0, 16).unwrap();
    tx.set_cleanup_mode(CleanupMode::Persistent);
    for v in 1..=3u64 {
        tx.push(&v);
    }
    drop(tx);
    let before = std::fs::read(&t.0).unwrap();
    let p = t.0.to_str().unwrap();
    let (code, out, err) = ringwire_bounded(&["mirror", "127.0.0.1:1", p, "--once"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains(p) && err.contains("a lossy MPMC ring"),
        "{err}"
    );
    assert!(!err.contains("connect"), "it connected first: {err}");
    assert_eq!(std::fs::read(&t.0).unwrap(), before, "the ring was touched");
}

/// `bench --plot FIFO` with a reader on the FIFO: the chart reaches the reader. The check
/// of the plot path before measuring used to open the FIFO for writing, which waits for a
/// reader (forever with none) and, with one, ended its stream before the chart was written.
#[test]
fn bench_plot_to_a_fifo_reaches_its_reader() {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let t = TmpRing::fifo("plot-fifo");
    let p = t.0.to_str().unwrap().to_owned();
    let path = t.0.clone();
    // The reader, as `cat FIFO` would: its open waits for the writer.
    let reader = std::thread::spawn(move || {
        let mut got = String::new();
        std::fs::File::open(&path)
            .and_then(|mut f| f.read_to_string(&mut got))
            .map(|_| got)
    });
    // One lap of the line transfer: its default 1,000 laps at each of five distances took
    // 5 s of this test's 10 s in a debug build on an idle 2-core machine, and went past the
    // limit beside a release build.
    let (code, out, err) = ringwire_bounded(&[
        "bench",
        "floor",
        "--rounds",
        "1",
        "--datagrams",
        "1",
        "--laps",
        "1",
        "--plot",
        &p,
    ]);
    // If the command never opened the FIFO, release the reader (a non-blocking open for
    // writing succeeds while a reader waits) so that the test fails instead of hanging.
    if !reader.is_finished() {
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&t.0);
    }
    let got = reader.join().unwrap().expect("the reader's open and read");
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        got.contains("<svg"),
        "the reader got {} bytes: {got:.200}",
        got.len()
    );
    assert!(
        got.trim_end().ends_with("</svg>"),
        "the whole chart: {got:.200}"
    );
}

/// A socket at the `--plot` path is refused before measuring, naming it.
#[test]
fn bench_plot_to_a_socket_fails_at_once() {
    let t = TmpRing::new("plot-sock");
    let _sock = std::os::unix::net::UnixListener::bind(&t.0).unwrap();
    let p = t.0.to_str().unwrap();
    for args in [
        &[
            "bench",
            "floor",
            "--rounds",
            "1",
            "--datagrams",
            "1",
            "--plot",
            p,
        ][..],
        &["bench", "handoff", "--seconds", "1", "--plot", p],
        &[
            "bench",
            "stress",
            "--seconds",
            "1",
            "--rates",
            "1",
            "--plot",
            p,
        ],
    ] {
        let (code, out, err) = ringwire_bounded(args);
        assert_eq!(code, 1, "{args:?}: {out}{err}");
        assert_eq!(
            err.trim(),
            format!("Error: {p}: a socket, not a file the plot can be written to"),
            "{args:?}"
        );
    }
}

/// `serve --dup` and `--mtu` act only on UDP delivery: without `--multicast` or `--udp`
/// they are rejected (exit 1, as ringfire's usage errors do, naming the flag and what it
/// needs), as `--ttl` is without `--multicast`, instead of being silently ignored.
#[test]
fn serve_dup_and_mtu_need_udp_delivery() {
    let t = TmpRing::new("dup-mtu");
    let _r = make_ring(&t, 0);
    let p = t.0.to_str().unwrap();
    for (flag, value) in [("--dup", "2"), ("--mtu", "1000")] {
        // Bounded: a serve that accepted the flag would run until killed.
        let (code, out, err) =
            ringwire_bounded(&["serve", p, "--bind", "127.0.0.1:0", flag, value]);
        assert_eq!(code, 1, "{flag}: {out}{err}");
        assert!(err.contains(flag), "{flag}: {err}");
        assert!(
            err.contains("--multicast") && err.contains("--udp"),
            "{flag}: {err}"
        );
    }
    // The unicast PUNCH timeout needs unicast delivery, and a value within its range.
    let (code, out, err) = ringwire_bounded(&[
        "serve",
        p,
        "--bind",
        "127.0.0.1:0",
        "--multicast",
        "239.1.1.1:7401",
        "--punch-timeout",
        "5",
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("--punch-timeout") && err.contains("--udp"),
        "{err}"
    );
    let (code, out, err) = ringwire_bounded(&[
        "serve",
        p,
        "--bind",
        "127.0.0.1:0",
        "--udp",
        "0",
        "--punch-timeout",
        "86401",
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("--punch-timeout") && err.contains("86401"),
        "{err}"
    );
}

/// A flag that --once makes useless is refused with it, as serve's UDP flags are without
/// UDP delivery, instead of being silently ignored: serve --once serves one mirror, so
/// `--max-mirrors` has nothing to limit; mirror --once never reconnects, so
/// `--reconnect-ms` has nothing to time.
#[test]
fn flags_that_once_makes_useless_are_refused_with_it() {
    let t = TmpRing::new("once-flags");
    let _r = make_ring(&t, 0);
    let p = t.0.to_str().unwrap();
    for (args, flag) in [
        (
            vec![
                "serve",
                p,
                "--bind",
                "127.0.0.1:0",
                "--once",
                "--max-mirrors",
                "2",
            ],
            "--max-mirrors",
        ),
        (
            vec![
                "mirror",
                "127.0.0.1:1",
                p,
                "--once",
                "--reconnect-ms",
                "100",
            ],
            "--reconnect-ms",
        ),
    ] {
        // Bounded: a serve --once that accepted the flag would wait for its mirror.
        let (code, out, err) = ringwire_bounded(&args);
        assert_eq!(code, 1, "{args:?}: {out}{err}");
        assert!(
            err.contains(flag) && err.contains("--once") && err.contains("cannot be used with"),
            "{args:?}: {err}"
        );
    }
    // --once without them still runs: the mirror gets as far as its connect (refused:
    // nothing listens on port 1).
    let mirror_ring = t.0.with_file_name("mirror");
    let m = mirror_ring.to_str().unwrap();
    let (code, _, err) = ringwire_bounded(&["mirror", "127.0.0.1:1", m, "--once"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("Connection refused"), "{err}");
}

/// Help or version text that cannot be written is an error (exit 1), not a success.
#[test]
fn help_that_cannot_be_written_exits_1() {
    for args in [&["--help"][..], &["--version"], &["stat", "--help"]] {
        let (code, err) = ringwire_to_dev_full(args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(
            err.contains("Error: write stdout: No space left on device"),
            "{args:?}: {err}"
        );
    }
}

/// `stat --json` names a blackboard as ringfire 0.5.2 does; a truncated board (shorter than
/// 128 + slot_count × slot_size) is an error naming both lengths, for `stat` and `heal`.
#[test]
fn a_truncated_blackboard_is_an_error_for_stat_and_heal() {
    let t = TmpRing::new("bb-trunc");
    let whole = t.0.with_file_name("whole");
    let cut = t.0.with_file_name("cut");
    let prod = ringwire::BlackboardProducer::<[u64; 5]>::create(&whole, 4).unwrap();
    let (code, out, err) = ringwire(&["stat", whole.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["type"], "Blackboard");
    let (code, out, err) = ringwire(&["stat", whole.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("slot_count"), "{out}");
    let bytes = std::fs::read(&whole).unwrap();
    assert_eq!(bytes.len(), 384, "128 + 4 slots of 64");
    std::fs::write(&cut, &bytes[..200]).unwrap();
    drop(prod);
    let cut = cut.to_str().unwrap();
    for args in [&["stat", cut][..], &["stat", cut, "--json"], &["heal", cut]] {
        let (code, out, err) = ringwire(args);
        assert_eq!(code, 1, "{args:?}: {out}");
        assert!(
            err.contains(&format!(
                "blackboard {cut}: file is 200 bytes, the blackboard needs 384"
            )),
            "{args:?}: {err}"
        );
    }
}

/// Numeric flags give their range in --help, and an open-ended one says "at least 1"
/// rather than "not in 1..18446744073709551615" (which reads as if the maximum were
/// excluded).
#[test]
fn numeric_flags_state_their_ranges() {
    let (code, out, _) = ringwire(&["bench", "handoff", "--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("1..=50000000"), "{out}");
    assert!(out.contains("1..=3600"), "{out}");
    for args in [
        &["top", "/dev/shm/none", "--interval-ms", "0"][..],
        &["top", "/dev/shm/none", "--iterations", "0"],
        &["dump", "/dev/shm/none", "--tail", "0"],
        &["bench", "floor", "--rounds", "0"],
        &["bench", "floor", "--datagrams", "0"],
    ] {
        let (code, _, err) = ringwire(args);
        assert_eq!(code, 1, "{args:?}");
        assert!(
            err.contains("invalid value '0'") && err.contains("must be at least 1"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("18446744073709551615"), "{args:?}: {err}");
    }
    let (code, _, err) = ringwire(&["dump", "/dev/shm/none", "--tail", "x"]);
    assert_eq!(code, 1);
    assert!(err.contains("invalid digit"), "{err}");
}

/// An SPSC queue file whose cursors no run of a producer and a consumer leaves (enqueue
/// behind dequeue, or more than a lap ahead): `stat`, `top` and `heal` name the file and the
/// cursors. `stat` used to print them as a sound queue's, with 4611686018427387904 items
/// queued in 8 slots (utilization 5.76e19 %), and exit 0.
#[test]
fn impossible_spsc_cursors_are_an_error_naming_file_and_values() {
    use ringwire::core::queue::layout::qhdr;
    let t = TmpRing::new("spsc-cursors");
    let _ = std::fs::remove_file(&t.0);
    let mut p = ringwire::queue::SpscProducer::<u64>::create(&t.0, 8).unwrap();
    for i in 0..3u64 {
        p.try_push(&i).unwrap();
    }
    let path = t.0.to_str().unwrap();
    let patch = |enq: u64, deq: u64| {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&t.0).unwrap();
        f.write_all_at(&enq.to_ne_bytes(), qhdr::ENQ as u64)
            .unwrap();
        f.write_all_at(&deq.to_ne_bytes(), qhdr::DEQ as u64)
            .unwrap();
    };
    for (enq, deq) in [(1u64 << 62, 0u64), (3, 100), (1000, 2)] {
        patch(enq, deq);
        for args in [
            vec!["stat", path],
            vec!["stat", path, "--json"],
            vec!["top", path, "--interval-ms", "1", "--iterations", "1"],
            vec!["heal", path],
        ] {
            let (code, out, err) = ringwire(&args);
            assert_eq!(code, 1, "{args:?}: {out}");
            assert_eq!(
                err.trim(),
                format!(
                    "Error: queue {path}: corrupt SPSC queue cursors: enqueue {enq}, dequeue \
                     {deq} (capacity 8); an SPSC queue needs enqueue - dequeue, modulo 2^64, \
                     at most the capacity"
                ),
                "{args:?}"
            );
        }
    }
    // Sound cursors, a lap apart and across the wrap of 2^64: described as before.
    for (enq, deq) in [(11u64, 3u64), (2, u64::MAX - 1)] {
        patch(enq, deq);
        let (code, out, err) = ringwire(&["stat", path, "--json"]);
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            (v["enqueue"].clone(), v["dequeue"].clone()),
            (enq.into(), deq.into())
        );
    }
    drop(p);
}

/// An SPSC queue's cursors count modulo 2^64, as its handles count them, and cursors across
/// that wrap are sound (enqueue 1, dequeue 2^64 - 1: two items, which a consumer pops), but
/// `stat` and `top` said "queued 0" of them, from a saturating difference. They now count 2.
#[test]
fn spsc_cursors_across_the_wrap_of_2_64_count_the_items_queued() {
    use ringwire::core::queue::layout::qhdr;
    use std::os::unix::fs::FileExt;
    let t = TmpRing::new("spsc-wrap");
    let _ = std::fs::remove_file(&t.0);
    let mut p = ringwire::queue::SpscProducer::<u64>::create(&t.0, 8).unwrap();
    for i in 0..2u64 {
        p.try_push(&i).unwrap();
    }
    let f = std::fs::OpenOptions::new().write(true).open(&t.0).unwrap();
    f.write_all_at(&1u64.to_ne_bytes(), qhdr::ENQ as u64)
        .unwrap();
    f.write_all_at(&u64::MAX.to_ne_bytes(), qhdr::DEQ as u64)
        .unwrap();
    let path = t.0.to_str().unwrap();
    let (code, out, err) = ringwire(&["stat", path, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (v["queued"].as_u64(), v["utilization_pct"].as_f64()),
        (Some(2), Some(25.0)),
        "{v}"
    );
    let (code, out, err) = ringwire(&["stat", path]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("  queued              2\n"), "{out}");
    let (code, out, err) = ringwire(&["top", path, "--interval-ms", "1", "--iterations", "1"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(" queued 2/8 "), "{out}");
    // What a consumer finds there.
    let mut c = ringwire::queue::SpscConsumer::<u64>::open(&t.0).unwrap();
    let mut popped = 0;
    while let Ok(Some(_)) = c.try_pop() {
        popped += 1;
        assert!(popped <= 8, "more items than slots");
    }
    assert_eq!(popped, 2);
    drop((c, p));
}

/// A mirror ring (SPARSE) whose write_seq passed records it never received (a hole where
/// the slot still holds the previous lap's record): `dump` calls it a hole, as its readers
/// skip it. It said "(not published yet)", as if a record below write_seq were to come.
#[test]
fn dump_of_a_mirror_ring_names_its_holes() {
    use ringwire::core::layout::Flags;
    let t = TmpRing::new("sparse-dump");
    let mut geo = Geometry::spmc(4, 16, 8, 0, false).unwrap();
    geo.flags = Flags(geo.flags.0 | Flags::SPARSE);
    let opts = CreateOptions {
        cleanup: CleanupMode::Persistent,
        ..CreateOptions::default()
    };
    let r = RingFile::create(&t.0, &geo, &opts).unwrap();
    // Records 1 to 4, then 6 and 7 of the next lap: 5 never arrived, its slot holds 1.
    for s in [1u64, 2, 3, 4, 6, 7] {
        view(&r).write_slot(s, &s.to_le_bytes());
        view(&r).publish(s);
    }
    let path = t.0.to_str().unwrap();
    let (code, out, err) = ringwire(&["dump", path, "--tail", "3"]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "seq 5 slot 1 seq_word 1 (hole: a record this mirror ring never received; readers \
         skip it)",
        "{out}"
    );
    assert!(lines[1].starts_with("seq 6 slot 2 seq_word 6 \""), "{out}");
    assert_eq!(lines.len(), 3, "{out}");
}

/// An `--iface` address no interface of this host has (a typo; 192.0.2.1 is TEST-NET-1,
/// RFC 5737) is refused at start by serve and mirror, naming the flag and the address, exit
/// 1 as other bad values. The mirror of a live multicast source failed every join and
/// retried for ever, logging the join's "No such device"; serve said only "Cannot assign
/// requested address (not an address of this host?)". 0.0.0.0 still lets the kernel choose.
#[test]
fn an_iface_address_this_host_lacks_is_refused_at_start() {
    use ringwire::replica::serve::{ServeOptions, Server};
    use std::net::{Ipv4Addr, SocketAddrV4};
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;
    /// Stops the server when dropped, also when an assertion fails in the scope.
    struct StopOnDrop<'a>(&'a AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let t = TmpRing::new("iface");
    let _r = make_ring(&t, 0);
    let p = t.0.to_str().unwrap();
    let port = 30_000 + (std::process::id() % 20_000) as u16;
    let group = SocketAddrV4::new(Ipv4Addr::new(239, 255, 103, 1), port);
    // Bounds for processes that must exit on their own at start, generous for a loaded machine.
    let max = Duration::from_secs(30);
    let serve = [
        "serve",
        p,
        "--bind",
        "127.0.0.1:0",
        "--multicast",
        &group.to_string(),
    ];
    let (code, out, err) = ringwire_within(&[&serve[..], &["--iface", "192.0.2.1"]].concat(), max);
    assert_eq!(code, 1, "serve: {out}{err}");
    assert_eq!(
        err.trim(),
        format!(
            "Error: invalid value '192.0.2.1' for --iface: no interface of this host has this \
             address (to send multicast {group} by)"
        )
    );
    let (code, err) = stopped_by_sigterm(&[&serve[..], &["--iface", "0.0.0.0"]].concat());
    assert_eq!(code, Some(0), "serve --iface 0.0.0.0: {err}");

    // A live multicast source on this host, which a mirror joining on 127.0.0.1 gets.
    let mut so = ServeOptions::new(&t.0, "127.0.0.1:0".parse().unwrap());
    so.multicast = Some(group);
    so.iface = Some(Ipv4Addr::LOCALHOST);
    so.ttl = 0;
    so.log = false;
    let server = Server::bind(so).unwrap();
    let source = server.local_addr().to_string();
    let dst = t.0.with_file_name("mirror");
    let stop = AtomicBool::new(false);
    let (code, out, err) = std::thread::scope(|sc| {
        let _stop = StopOnDrop(&stop);
        let served = sc.spawn(|| server.run(&stop));
        let r = ringwire_within(
            &[
                "mirror",
                &source,
                dst.to_str().unwrap(),
                "--iface",
                "192.0.2.1",
            ],
            max,
        );
        stop.store(true, Ordering::Relaxed);
        served.join().unwrap().unwrap();
        r
    });
    assert_eq!(code, 1, "mirror: {out}{err}");
    assert_eq!(
        err.trim(),
        "Error: invalid value '192.0.2.1' for --iface: no interface of this host has this \
         address (to join a multicast source's group on)"
    );
    assert_eq!(server.summary().sessions, 0, "refused before connecting");
    assert!(!dst.exists(), "refused before creating the mirror ring");
}

/// A read of a never-written (sparse) part of a ring on a full tmpfs faults (SIGBUS: the
/// tmpfs has no page to back it), as `dump` of a ring created by `ftruncate` alone, as
/// ringfire creates its rings, does on a full /dev/shm. The line said the file "shrank while
/// it was mapped (truncated or recreated in place by another process)", though it was whole;
/// it now says that the file is whole and its file system full, exit 1.
#[test]
#[ignore = "needs root: a mount namespace with a 16 KiB tmpfs"]
fn a_fault_on_a_full_tmpfs_says_so_not_that_the_file_shrank() {
    let t = TmpRing::new("fulltmpfs");
    // 8192 slots of 16 bytes: 128 KiB of slots, eight times the tmpfs.
    let geo = Geometry::spmc(8192, 16, 8, 0, false).unwrap();
    let len = {
        let opts = CreateOptions {
            cleanup: CleanupMode::Persistent,
            ..CreateOptions::default()
        };
        let r = RingFile::create(&t.0, &geo, &opts).unwrap();
        view(&r).write_seq().store(8192, Ordering::Release);
        std::fs::metadata(&t.0).unwrap().len()
    };
    let mut header = std::fs::read(&t.0).unwrap();
    header.truncate(128);
    let hdr = t.0.with_file_name("header");
    std::fs::write(&hdr, &header).unwrap();
    let dir = t.0.with_file_name("small");
    std::fs::create_dir(&dir).unwrap();
    let ring = dir.join("ring");
    // The header on the tmpfs, the rest of the ring a hole no page backs.
    let script = format!(
        "mount --make-rprivate / && mount -t tmpfs -o size=16k tmpfs {dir} && \
         cp {hdr} {ring} && truncate -s {len} {ring} && {bin} dump {ring} --tail 8192",
        dir = dir.display(),
        hdr = hdr.display(),
        ring = ring.display(),
        bin = env!("CARGO_BIN_EXE_ringwire"),
    );
    let out = Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run unshare");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err.lines().last(),
        Some(
            format!(
                "ringwire: {}: no page could back a part of it, though the file is still \
                 whole: its file system is full (a full tmpfs has no page for a part of a \
                 file never written); stopping",
                ring.display()
            )
            .as_str()
        ),
        "{err}"
    );
}

/// A consumer's offset file (spec §13, 64 bytes: `md_algo.offset` beside `md.eurusd` in
/// /dev/shm) given where a ring is wanted is named by its magic, as a queue or a blackboard
/// is: every command called it a ring cut short ("file is 64 bytes, shorter than the
/// 128-byte ring header"), which sends an operator looking for a truncated ring (and
/// `serve` retried it for a second as a ring still being created).
#[test]
fn an_offset_file_is_named_not_taken_for_a_short_ring() {
    let t = TmpRing::new("offset-file");
    let offset = t.0.with_file_name("md_algo.offset");
    let cp = ringwire::OffsetCheckpoint::open_or_create(&offset, "algo").unwrap();
    cp.save(42);
    drop(cp);
    assert_eq!(std::fs::metadata(&offset).unwrap().len(), 64);
    let p = offset.to_str().unwrap();
    for args in [
        &["stat", p][..],
        &["stat", p, "--json"],
        &["dump", p],
        &["top", p, "--iterations", "1", "--interval-ms", "1"],
        &["prune", p],
        &["heal", p],
        &["serve", p, "--bind", "127.0.0.1:0"],
    ] {
        let (code, out, err) = ringwire(args);
        assert_eq!(code, 1, "{args:?}: {out}{err}");
        assert!(out.is_empty(), "{args:?}: {out}");
        assert!(
            err.contains(&format!(
                "ring {p}: bad magic 0x53484d5f4f464653 (the magic of a consumer offset file)"
            )),
            "{args:?}: {err}"
        );
        assert!(!err.contains("shorter than"), "{args:?}: {err}");
    }
    // mirror refuses to replace it, before connecting, and says what it is.
    let (code, out, err) = ringwire(&["mirror", "127.0.0.1:9", p, "--once"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains(&format!(
            "{p}: a file of 64 bytes (a consumer offset file) is not a ring; a mirror replaces \
             only a ring or an empty file"
        )),
        "{err}"
    );
    assert_eq!(
        std::fs::metadata(&offset).unwrap().len(),
        64,
        "left as it was"
    );
    // A file cut below the ring header that is no offset file is still a short ring.
    let short = t.0.with_file_name("short");
    std::fs::write(&short, [0x41u8; 100]).unwrap();
    let (code, _, err) = ringwire(&["stat", short.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("file is 100 bytes, shorter than the 128-byte ring header"),
        "{err}"
    );
}
