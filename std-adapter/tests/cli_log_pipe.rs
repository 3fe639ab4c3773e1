//! `serve` and `mirror` outlive the reader of their log: once stderr's pipe is closed, their
//! status lines fail to write (`EPIPE`, since `SIGPIPE` is ignored) and are dropped, and the
//! processes keep running and stop cleanly on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ringwire::core::Geometry;
use ringwire::{CreateOptions, RingFile};

mod common;
use common::TmpRing;

/// A spawned `ringwire` killed (and reaped) on drop, so a failed assertion leaves no process.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(args: &[&str]) -> Proc {
    Proc(
        Command::new(env!("CARGO_BIN_EXE_ringwire"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ringwire"),
    )
}

/// Reads stderr lines until one contains `what`, then closes the pipe's read end.
fn first_line_then_close(p: &mut Proc, what: &str) -> String {
    let mut r = BufReader::new(p.0.stderr.take().expect("piped stderr"));
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            r.read_line(&mut line).expect("read stderr") > 0,
            "stderr ended before a line with {what:?}"
        );
        if line.contains(what) {
            return line;
        }
    }
}

/// SIGTERM, then the exit code (None: killed by a signal), within 10 s.
fn terminate(p: &mut Proc) -> Option<i32> {
    let pid = p.0.id().to_string();
    let ok = Command::new("kill").args(["-TERM", &pid]).status();
    assert!(ok.is_ok_and(|s| s.success()), "kill -TERM {pid}");
    let t0 = Instant::now();
    loop {
        if let Some(s) = p.0.try_wait().expect("wait") {
            return s.code();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn serve_and_mirror_keep_running_after_their_log_pipe_closes() {
    let src = TmpRing::new("logpipe-src");
    let mir = TmpRing::new("logpipe-mir");
    let geo = Geometry::spmc(64, 64, 8, 0, false).unwrap();
    let ring = RingFile::create(&src.0, &geo, &CreateOptions::default()).unwrap();

    let mut serve = spawn(&["serve", src.0.to_str().unwrap(), "--bind", "127.0.0.1:0"]);
    let line = first_line_then_close(&mut serve, " on tcp ");
    let addr = line
        .split(" on tcp ")
        .nth(1)
        .and_then(|rest| rest.split([',', ' ']).next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    let mut mirror = spawn(&["mirror", &addr, mir.0.to_str().unwrap()]);
    first_line_then_close(&mut mirror, "mirror:");
    // Status lines come every second (and a connection logs on both sides): let several
    // of them meet the closed pipes.
    std::thread::sleep(Duration::from_millis(2500));
    assert!(
        mirror.0.try_wait().unwrap().is_none(),
        "mirror exited with its log pipe closed: {:?}",
        mirror.0.try_wait()
    );
    assert!(
        serve.0.try_wait().unwrap().is_none(),
        "serve exited with its log pipe closed: {:?}",
        serve.0.try_wait()
    );
    assert_eq!(terminate(&mut mirror), Some(0), "mirror");
    assert_eq!(terminate(&mut serve), Some(0), "serve");
    drop(ring);
}
