//! The `ringwire` binary's usage errors, help, version and stdout handling: exit codes as
//! ringfire's CLI (spec §26: usage errors exit 1, `version` is accepted), accurate help text,
//! and a quiet end (killed by `SIGPIPE`, nothing on stderr) when stdout's reader goes away.
//!
//! The binary comes from [`ringwire_bin`]: build it first
//! (`cargo build -p ringwire --bin ringwire`) or set `RINGWIRE_BIN`.

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

use ringwire::RingProducer;
use ringwire_tests::netns::{ringwire_bin, run_ringwire as ringwire};
use ringwire_tests::records::Rec;
use ringwire_tests::shm::ShmPath;
use ringwire_tests::wait_exit;

#[test]
fn usage_errors_exit_1_as_ringfire() {
    for args in [
        &[][..],
        &["frobnicate", "/x"],
        &["stat"],
        &["stat", "/x", "--bogus"],
        &["dump", "/x", "--tail", "ten"],
        &["top", "/x", "--iterations", "0"],
        // Over the core pacer's 1 s maximum linger.
        &["serve", "/x", "--linger-us", "1000001"],
    ] {
        let (code, out, err) = ringwire(args);
        assert_eq!(code, 1, "{args:?}: {out}{err}");
        assert!(out.is_empty(), "{args:?}: {out}");
        assert!(
            err.starts_with("error:") || err.contains("Usage: ringwire"),
            "{args:?}: {err}"
        );
    }
}

/// A value repeated in a comma list (or in a list flag given twice) is a usage error naming
/// it: `bench stress --transport tcp,tcp` ran every rate twice, and reported two rows of each.
/// The check runs before any measurement, so these runs end at once.
#[test]
fn a_value_repeated_in_a_comma_list_is_a_usage_error_naming_it() {
    for (args, flag, value) in [
        (
            &["--transport", "tcp,tcp"][..],
            "--transport <TRANSPORT>",
            "tcp",
        ),
        (
            &["--transport", "tcp", "--transport", "tcp"],
            "--transport <TRANSPORT>",
            "tcp",
        ),
        (
            &["--transport", "unicast,tcp,unicast"],
            "--transport <TRANSPORT>",
            "unicast",
        ),
        (&["--rates", "1000,20000,1000"], "--rates <RATES>", "1000"),
        (
            &["--rates", "1000", "--rates", "1000"],
            "--rates <RATES>",
            "1000",
        ),
    ] {
        let args = [&["bench", "stress"][..], args].concat();
        let (code, out, err) = ringwire(&args);
        assert_eq!(code, 1, "{args:?}: {out}{err}");
        assert!(out.is_empty(), "{args:?}: {out}");
        let want = format!("error: invalid value '{value}' for '{flag}': given more than once");
        assert!(err.starts_with(&want), "{args:?}: {err}");
    }
}

#[test]
fn help_and_version_print_to_stdout_and_exit_0() {
    for args in [&["--help"][..], &["-h"], &["help"], &["help", "stat"]] {
        let (code, out, err) = ringwire(args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(out.contains("Usage: ringwire"), "{args:?}: {out}");
    }
    let version = format!("ringwire {}\n", env!("CARGO_PKG_VERSION"));
    for args in [&["--version"][..], &["-V"], &["version"]] {
        let (code, out, err) = ringwire(args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert_eq!(out, version, "{args:?}");
    }
}

#[test]
fn help_describes_the_cli_and_lists_every_bench_mode() {
    let (_, out, _) = ringwire(&["--help"]);
    let about = out.lines().next().unwrap_or_default();
    // The CLI's own about, not the library crate's description.
    assert!(about.starts_with("Inspect, measure and replicate"), "{out}");
    assert!(!out.contains("waiting strategies"), "{out}");
    for cmd in [
        "stat", "top", "dump", "prune", "bench", "serve", "mirror", "demo", "version",
    ] {
        assert!(
            out.lines()
                .any(|l| l.trim_start().starts_with(&format!("{cmd} "))),
            "{cmd} not listed: {out}"
        );
    }
    let (_, out, _) = ringwire(&["bench", "--help"]);
    let about = out.lines().next().unwrap_or_default();
    for mode in ["floor", "handoff", "stress", "mirror"] {
        assert!(about.contains(mode), "{mode} not in bench's about: {about}");
        assert!(
            out.lines()
                .any(|l| l.trim_start().starts_with(&format!("{mode} "))),
            "{mode} not listed: {out}"
        );
    }
    // `ringwire bench` (no mode) lists the modes in its usage error.
    let (_, out, _) = ringwire(&["help", "bench"]);
    assert!(out.contains("stress") && out.contains("mirror"), "{out}");
}

/// A pipe whose read end is already closed: every write to the returned end fails with
/// `EPIPE`.
fn pipe_without_reader() -> OwnedFd {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors are fresh and owned here.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(r);
    w
}

/// `ringwire args…` writing into a pipe nobody reads; killed (and the test failed) after 10 s.
fn into_closed_pipe(args: &[&str]) -> (ExitStatus, String) {
    let mut child = Command::new(ringwire_bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(pipe_without_reader()))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_exit(
        &mut child,
        Duration::from_secs(10),
        &format!("ringwire {args:?} with its stdout's reader gone"),
    );
    let o = child.wait_with_output().unwrap();
    (o.status, String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn a_closed_stdout_ends_every_command_quietly_by_sigpipe() {
    let p = ShmPath::new("cli-misc-pipe");
    let mut prod = RingProducer::<Rec>::create(p.path(), 16).unwrap();
    for seq in 1..=20 {
        prod.push(&Rec::new(seq));
    }
    let path = p.path().to_str().unwrap();
    for args in [
        &["stat", path][..],
        &["stat", path, "--json"],
        &["dump", path, "--tail", "16"],
        &["top", path, "--interval-ms", "10"],
        &["prune", path],
        &["version"],
        &["--help"],
    ] {
        let (status, err) = into_closed_pipe(args);
        assert_eq!(
            status.signal(),
            Some(libc::SIGPIPE),
            "{args:?}: {status} {err}"
        );
        assert!(err.is_empty(), "{args:?}: {err}");
    }
    drop(prod);
}

/// Paths are bytes: a ring at a path that is not UTF-8 is read (and named with its bytes,
/// `\xff`). A value that is not UTF-8 where text is wanted is a usage error naming the value
/// and its flag; clap said only "invalid UTF-8 was detected in one or more arguments".
#[test]
fn paths_take_any_bytes_and_a_text_value_that_is_not_utf8_is_named() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let base = ShmPath::new("cli-not-utf8");
    let p = ShmPath::adopt(PathBuf::from(OsStr::from_bytes(
        &[base.path().as_os_str().as_bytes(), b"-\xff"].concat(),
    )));
    let mut prod = RingProducer::<Rec>::create(p.path(), 16).unwrap();
    prod.push(&Rec::new(1));
    let shown = format!("\"{}-\\xff\"", base.path().display());
    let path = p.path().as_os_str();
    for cmd in ["stat", "dump", "top"] {
        let mut args = vec![OsStr::new(cmd), path];
        if cmd == "top" {
            args.extend(["--iterations", "1", "--interval-ms", "5"].map(OsStr::new));
        }
        let (code, out, err) = ringwire(&args);
        assert_eq!(code, 0, "{cmd}: {err}");
        assert!(
            cmd == "dump" || out.contains(&shown),
            "{cmd}: {shown} not in {out}"
        );
    }
    drop(prod);

    let bad = OsStr::from_bytes(b"1\xff");
    for (args, want) in [
        (
            vec![OsStr::new("dump"), path, OsStr::new("--tail"), bad],
            "error: invalid value \"1\\xff\" for '--tail <TAIL>': it is not UTF-8",
        ),
        (
            vec![
                OsStr::new("serve"),
                path,
                OsStr::from_bytes(b"--bind=1\xff"),
            ],
            "error: invalid value \"1\\xff\" for '--bind <ADDR>': it is not UTF-8",
        ),
        (
            vec![OsStr::new("mirror"), bad, path],
            "error: argument \"1\\xff\" is not UTF-8",
        ),
    ] {
        let (code, out, err) = ringwire(&args);
        assert_eq!(code, 1, "{args:?}: {out}{err}");
        assert!(err.starts_with(want), "{args:?}: {err}");
    }
}
