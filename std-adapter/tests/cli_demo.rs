//! `ringwire demo` as a command: its exit status and messages.

use std::process::{Command, Stdio};

/// Runs `ringwire` with `args` and stdout written to /dev/full: (exit code, stderr).
fn ringwire_to_dev_full(args: &[&str]) -> (Option<i32>, String) {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("open /dev/full");
    let o = Command::new(env!("CARGO_BIN_EXE_ringwire"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(full)
        .output()
        .expect("run the ringwire binary");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A summary that cannot be written is an error (exit 1, with the reason), not a panic.
#[test]
fn demo_fails_cleanly_when_stdout_cannot_be_written() {
    let (code, err) = ringwire_to_dev_full(&[
        "demo",
        "--seconds",
        "1",
        "--rate",
        "1000",
        "--transport",
        "tcp",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains("Error: demo: write the summary to stdout") && err.contains("No space left"),
        "{err}"
    );
}
