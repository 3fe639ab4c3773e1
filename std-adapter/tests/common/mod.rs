//! Shared by the integration tests of this package.

use std::path::PathBuf;

/// A unique ring path `/dev/shm/ringwire-{test binary}-{tag}-{pid}-{counter}/ring`. Its
/// directory, with whatever the test left in it (the ring, a named consumer's checkpoint),
/// is removed on drop.
#[allow(dead_code)] // not every test binary makes rings
pub struct TmpRing(pub PathBuf);

#[allow(dead_code)] // as above
impl TmpRing {
    pub fn new(tag: &str) -> TmpRing {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        // Relaxed: only makes the name unique within this process.
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = PathBuf::from(format!(
            "/dev/shm/ringwire-{}-{tag}-{}-{n}",
            env!("CARGO_CRATE_NAME"),
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).expect("create the test ring's directory");
        TmpRing(dir.join("ring"))
    }

    /// [`TmpRing::new`] with a FIFO (a named pipe) made at the path.
    pub fn fifo(tag: &str) -> TmpRing {
        let t = TmpRing::new(tag);
        let c = std::ffi::CString::new(t.0.to_str().expect("a UTF-8 path")).expect("no NUL");
        // SAFETY: `c` is a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
        t
    }
}

impl Drop for TmpRing {
    fn drop(&mut self) {
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Runs the `ringwire` binary with `args`: (exit code, stdout, stderr).
#[allow(dead_code)] // only the CLI tests run the binary
pub fn ringwire(args: &[&str]) -> (i32, String, String) {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_ringwire"))
        .args(args)
        .output()
        .expect("run the ringwire binary");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Runs the `ringwire` binary with `args`, stdin empty and stdout written to /dev/full:
/// (exit code, stderr).
#[allow(dead_code)] // only the CLI tests run the binary
pub fn ringwire_to_dev_full(args: &[&str]) -> (Option<i32>, String) {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("open /dev/full");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_ringwire"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(full)
        .output()
        .expect("run the ringwire binary");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}
