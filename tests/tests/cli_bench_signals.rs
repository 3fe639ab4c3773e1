//! `ringwire bench` as a process: SIGINT/SIGTERM stop `handoff` in order (its reader
//! process killed and reaped, its ring removed, exit status 1), the reader dies with a killed
//! parent, an interrupted `stress` run is marked `interrupted` and fails, a bad `--plot`
//! path fails before measuring, and `floor` names the cores it pinned.
//!
//! These run the built `ringwire` binary (see [`ringwire_bin`]: `target/<profile>/ringwire`,
//! or `$RINGWIRE_BIN`); `cargo test --workspace` builds it, a targeted run needs
//! `cargo build -p ringwire --bin ringwire` first.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use ringwire_tests::netns::ringwire_bin;
use ringwire_tests::shm::ShmPath;
use ringwire_tests::wait_until;

/// A started `ringwire`, killed on drop if still running (a failed assertion leaves no
/// process behind).
struct Proc(Option<Child>);

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Proc {
    fn start(args: &[&str]) -> Proc {
        Proc(Some(
            Command::new(ringwire_bin())
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn ringwire"),
        ))
    }

    fn pid(&self) -> u32 {
        self.0.as_ref().expect("running").id()
    }

    fn signal(&self, sig: libc::c_int) {
        // SAFETY: kill with a live child's pid (not yet reaped: we hold its Child).
        assert_eq!(unsafe { libc::kill(self.pid() as libc::pid_t, sig) }, 0);
    }

    /// Waits for the exit and the end of its output (at most `within` in all: a process
    /// the ringwire left running holds its stdout and stderr open), returning status,
    /// stdout and stderr.
    fn finish(mut self, within: Duration) -> (ExitStatus, String, String) {
        let t0 = Instant::now();
        let pid = self.pid();
        let c = self.0.as_mut().expect("running");
        // The outputs are small (a line or a JSON object): the pipes cannot fill.
        while c.try_wait().expect("try_wait").is_none() {
            assert!(
                t0.elapsed() < within,
                "ringwire {pid} still running after {within:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let child = self.0.take().expect("running");
        let (tx, rx) = std::sync::mpsc::channel();
        // Ends when every holder of the pipes has exited (at most the reader's 30 s).
        std::thread::spawn(move || tx.send(child.wait_with_output()));
        let left = within.saturating_sub(t0.elapsed());
        let Output {
            status,
            stdout,
            stderr,
        } = rx
            .recv_timeout(left)
            .unwrap_or_else(|_| {
                panic!("ringwire {pid} exited, but a process it started still holds its output")
            })
            .expect("output");
        (
            status,
            String::from_utf8_lossy(&stdout).into_owned(),
            String::from_utf8_lossy(&stderr).into_owned(),
        )
    }
}

/// The children of `pid` (from every `/proc/<n>/stat`).
fn children(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(n) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{n}/stat")) else {
            continue;
        };
        // pid (comm) state ppid …: comm may hold spaces, so split after its ')'.
        let rest = &stat[stat.rfind(')').map_or(0, |i| i + 1)..];
        let ppid = rest.split_whitespace().nth(1).and_then(|p| p.parse().ok());
        if ppid == Some(pid) {
            found.push(n);
        }
    }
    found
}

/// True when `pid` no longer runs: gone, or a zombie (a reparented child that this
/// container's init may never reap).
fn dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            let rest = &stat[stat.rfind(')').map_or(0, |i| i + 1)..];
            matches!(rest.split_whitespace().next(), Some("Z" | "X"))
        }
    }
}

/// Records published so far in the source rings of the demo pipelines that process `pid`
/// runs (`bench stress`: `/dev/shm/ringwire-demo-<pid>-<tag>-source`). A run publishes only
/// once its mirror's reader is attached.
fn published(pid: u32) -> u64 {
    let prefix = format!("ringwire-demo-{pid}-");
    std::fs::read_dir("/dev/shm")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with(&prefix) && name.ends_with("-source")
        })
        .map(|e| ringwire::ReadOnlyRing::open(e.path()).map_or(0, |r| r.write_seq()))
        .sum()
}

/// Whether process `pid` has a handler installed for `sig` (its `SigCgt` mask in /proc).
fn catches(pid: u32, sig: libc::c_int) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .is_some_and(|m| m & (1 << (sig - 1)) != 0)
}

fn handoff_ring(pid: u32) -> PathBuf {
    PathBuf::from(format!("/dev/shm/ringwire-bench-handoff-{pid}"))
}

/// Starts a long hand-off (the signal under test ends it) and waits until its reader runs and records flow; returns a guard
/// that removes the hand-off's ring, the process and its reader's pid. Destructure them in
/// this order (`let (_cleanup, p, reader) = …`): the process, declared later, is then
/// killed before the guard removes the ring.
fn running_handoff(wait: &str) -> (ShmPath, Proc, u32) {
    let p = Proc::start(&[
        "bench",
        "handoff",
        "--rate",
        "1000",
        // Far longer than any startup: a run that ended on its own before the signal
        // would exit 0, not 1 (5 s left ~4.5 s for startup and the waits below).
        "--seconds",
        "300",
        "--wait",
        wait,
    ]);
    let ring = handoff_ring(p.pid());
    // Removed even if the wait below fails (a ring whose process is killed stays behind);
    // `p` moved into a binding declared after the guard, so that it is dropped (the process
    // killed) before the guard removes the ring.
    let cleanup = ShmPath::adopt(&ring);
    let p = p;
    let mut reader = None;
    wait_until(
        "the hand-off's reader process",
        Duration::from_secs(10),
        || {
            reader = children(p.pid()).first().copied();
            reader.is_some() && ring.exists()
        },
    );
    // Attached and publishing.
    std::thread::sleep(Duration::from_millis(500));
    (cleanup, p, reader.expect("reader"))
}

fn handoff_stops_on(sig: libc::c_int, wait: &str) {
    // The guard removes the ring even if an assertion below fails (ringwire's own clean-up
    // is under test).
    let (_cleanup, p, reader) = running_handoff(wait);
    let (pid, ring) = (p.pid(), handoff_ring(p.pid()));
    p.signal(sig);
    let (status, _, stderr) = p.finish(Duration::from_secs(5));
    // Stopped in order (not killed by the signal), and an error.
    assert_eq!(status.code(), Some(1), "{status}: {stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(!ring.exists(), "{} left behind", ring.display());
    // The reader was killed and reaped by its parent: not running, not even a zombie.
    assert!(
        std::fs::metadata(format!("/proc/{reader}")).is_err(),
        "reader {reader} of {pid} still exists after its parent exited"
    );
}

#[test]
fn handoff_sigterm_stops_the_reader_and_removes_the_ring() {
    handoff_stops_on(libc::SIGTERM, "spin");
}

#[test]
fn handoff_sigint_stops_the_reader_and_removes_the_ring() {
    handoff_stops_on(libc::SIGINT, "futex");
}

#[test]
fn handoff_reader_dies_with_a_killed_parent() {
    // Nothing could remove the ring of a process killed outright: the guard does.
    let (_cleanup, p, reader) = running_handoff("spin");
    p.signal(libc::SIGKILL);
    let _ = p.finish(Duration::from_secs(5));
    // Without PR_SET_PDEATHSIG it polled for up to 30 s.
    wait_until(
        "the reader to die with its parent",
        Duration::from_secs(2),
        || dead(reader),
    );
}

#[test]
fn stress_interrupted_run_is_marked_and_fails() {
    let p = Proc::start(&[
        "bench",
        "stress",
        "--transport",
        "tcp",
        "--rates",
        "1000,2000",
        "--seconds",
        "10",
        "--json",
    ]);
    // Signalled only once its SIGINT handler is in place (a slow start must not turn this
    // into a kill by the signal), and once the first run publishes: a signal before that
    // stops the run before it measured anything, and leaves it among those not run (a fixed
    // 700 ms let a loaded machine signal a run still starting). The run is long, so that
    // the signal comes well inside it.
    wait_until("ringwire's SIGINT handler", Duration::from_secs(20), || {
        catches(p.pid(), libc::SIGINT)
    });
    wait_until("the first run's records", Duration::from_secs(60), || {
        published(p.pid()) > 0
    });
    p.signal(libc::SIGINT);
    let (status, stdout, stderr) = p.finish(Duration::from_secs(15));
    assert_eq!(status.code(), Some(1), "{status}: {stderr}\n{stdout}");
    let v: serde_json::Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(v["interrupted"], true, "{v}");
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 1, "{v}");
    assert_eq!(
        (rows[0]["rate"].as_u64(), rows[0]["status"].as_str()),
        (Some(1000), Some("interrupted")),
        "{v}"
    );
    assert_eq!(rows[0]["interrupted"], true, "{v}");
    // Cut short: fewer than the 10,000 records of a whole run.
    let sent = rows[0]["sent"].as_u64().unwrap();
    assert!(sent > 0 && sent < 10_000, "{v}");
    assert_eq!(v["not_run"][0]["rate"], 2000, "{v}");
    assert!(stderr.contains("interrupted"), "{stderr}");
}

#[test]
fn a_bad_plot_path_fails_before_measuring() {
    for mode in [
        &["handoff", "--rate", "1000", "--seconds", "3"][..],
        &[
            "stress",
            "--transport",
            "tcp",
            "--rates",
            "1000",
            "--seconds",
            "2",
        ][..],
        &["floor", "--rounds", "1000000", "--datagrams", "200000"][..],
    ] {
        let t0 = Instant::now();
        let out = Command::new(ringwire_bin())
            .arg("bench")
            .args(mode)
            .args(["--plot", "/nonexistent-fixb-dir/x.svg"])
            .stdin(Stdio::null())
            .output()
            .expect("run ringwire");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{mode:?}: {stderr}");
        assert!(
            stderr.contains("/nonexistent-fixb-dir/x.svg") && stderr.contains("create plot"),
            "{mode:?}: {stderr}"
        );
        // Nothing measured: the handoff alone would take 3 s.
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "{mode:?} took {:?}",
            t0.elapsed()
        );
        assert!(out.stdout.is_empty(), "{mode:?}");
    }
}

#[test]
fn floor_names_the_cores_it_pinned() {
    let out = Command::new(ringwire_bin())
        // Few laps of the line transfer, which this test does not read: at its default of
        // 1,000 laps a debug build spent 12 s of the binary's 12.2 s there.
        .args(["bench", "floor", "--rounds", "1000", "--datagrams", "1000"])
        .args(["--laps", "10"])
        .stdin(Stdio::null())
        .output()
        .expect("run ringwire");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let first = stdout.lines().next().unwrap_or_default();
    assert!(!first.contains("Some("), "{first}");
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus >= 2 {
        let inner = first
            .strip_prefix("cache-line round trip (cores ")
            .and_then(|r| r.split_once("):"))
            .map(|(c, _)| c);
        let cores: Option<Vec<u32>> = inner.map(|c| {
            c.split(" and ")
                .filter_map(|n| n.parse().ok())
                .collect::<Vec<_>>()
        });
        assert!(
            cores.as_ref().is_some_and(|c| c.len() == 2 && c[0] < c[1]),
            "{first}"
        );
    } else {
        assert!(
            first.starts_with("cache-line round trip (not pinned"),
            "{first}"
        );
    }
}
