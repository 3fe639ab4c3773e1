//! A file truncated by another process while a `ringwire` command has it mapped ends the
//! command with a line naming the file and status 1, where it used to die of SIGBUS
//! (signal 7) without a word; a SIGBUS with no such explanation still ends the process by
//! the signal, after a line saying what it was.
//!
//! The binary comes from [`ringwire_bin`]: build it first
//! (`cargo build -p ringwire --bin ringwire`) or set `RINGWIRE_BIN`.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ringwire::{CleanupMode, RingProducer};
use ringwire_tests::netns::ringwire_bin;
use ringwire_tests::records::Rec;
use ringwire_tests::shm::ShmDir;
use ringwire_tests::wait_exit;

/// Kills and reaps the child on drop, should the test fail before it ended.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// The ringwire binary run with `args`, stdin closed and stdout and stderr piped, once it
/// has printed its first line: the child, the rest of its stdout and that line.
fn ringwire(args: &[&str]) -> (Reaped, BufReader<std::process::ChildStdout>, String) {
    let child = Command::new(ringwire_bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the ringwire binary");
    let mut child = Reaped(child);
    let mut out = BufReader::new(child.0.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    (child, out, first)
}

/// A ring of `capacity` records, all written, left at `path` by a producer that is gone
/// (so that nothing of this process maps it when it is truncated).
fn full_ring(path: &Path, capacity: u64) {
    let mut prod = RingProducer::<Rec>::builder(capacity)
        .cleanup_mode(CleanupMode::Persistent)
        .build::<Rec, _>(path)
        .unwrap();
    for seq in 1..=capacity {
        prod.push(&Rec::new(seq));
    }
}

/// Reads all of `r` on a thread, returning it as a string when joined.
fn drain(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        s
    })
}

/// `dump` of a ring whose output is far larger than a pipe holds: it prints until the pipe
/// is full and then waits in a write, between two records, for the test to read. The test
/// reads the first line (so dump has mapped the ring and is reading it), truncates the
/// file to 0 as `: > file` does, and only then reads the rest: dump's next record is read
/// from a page past the end of the file, always. It died of SIGBUS there.
#[test]
fn dump_of_a_ring_truncated_under_it_names_the_file_and_exits_1() {
    const RECORDS: u64 = 16384;
    let dir = ShmDir::new("sigbus-dump");
    let ring = dir.join("ring");
    full_ring(&ring, RECORDS);
    let path = ring.to_str().unwrap();
    let (mut child, out, first) = ringwire(&["dump", path, "--tail", &RECORDS.to_string()]);
    assert!(first.starts_with("seq "), "dump's first line: {first:?}");
    // At least 16 times what a pipe holds (64 KiB by default) is still to come.
    assert!(RECORDS * first.len() as u64 > 16 * 65536, "{first:?}");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&ring)
        .unwrap()
        .set_len(0)
        .unwrap();
    let rest = drain(out);
    let err = drain(child.0.stderr.take().unwrap());
    wait_exit(
        &mut child.0,
        Duration::from_secs(20),
        "dump of a truncated ring",
    );
    let status = child.0.wait().unwrap();
    let (rest, err) = (rest.join().unwrap(), err.join().unwrap());
    assert_eq!(
        status.code(),
        Some(1),
        "status {status} (signal {:?}), stderr: {err}",
        status.signal()
    );
    assert_eq!(
        err,
        format!(
            "ringwire: {path} shrank while it was mapped (truncated or recreated in place by \
             another process); stopping\n"
        )
    );
    // It stopped at the truncation, well before the last record.
    let printed = 1 + rest.lines().count() as u64;
    assert!(printed < RECORDS, "{printed} lines printed");
    assert!(!rest.contains(&format!("seq {RECORDS} ")), "{rest}");
}

/// A SIGBUS that no truncated mapping explains (here one sent with kill) is still a crash:
/// a line saying so, then death by the signal, not an ordinary exit 1.
#[test]
fn a_sigbus_sent_by_kill_says_so_and_still_kills() {
    let dir = ShmDir::new("sigbus-kill");
    let ring = dir.join("ring");
    full_ring(&ring, 16);
    // After the first frame: main has long installed the handler.
    let (mut child, out, first) = ringwire(&["top", ring.to_str().unwrap(), "--interval-ms", "50"]);
    assert!(
        first.starts_with("ringwire top "),
        "top's first line: {first:?}"
    );
    let rest = drain(out);
    let err = drain(child.0.stderr.take().unwrap());
    let pid = child.0.id() as libc::pid_t;
    // SAFETY: kill only sends a signal to the child we started and have not reaped.
    let sent = unsafe { libc::kill(pid, libc::SIGBUS) };
    assert_eq!(sent, 0, "kill: {}", std::io::Error::last_os_error());
    wait_exit(&mut child.0, Duration::from_secs(20), "top sent SIGBUS");
    let status = child.0.wait().unwrap();
    let err = err.join().unwrap();
    let _ = rest.join();
    assert_eq!(
        status.signal(),
        Some(libc::SIGBUS),
        "status {status}, stderr: {err}"
    );
    assert_eq!(err, "ringwire: SIGBUS sent by another process\n");
}
