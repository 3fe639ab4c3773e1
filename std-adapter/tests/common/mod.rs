//! Shared by the integration tests of this package.

use std::path::PathBuf;

/// A unique /dev/shm path (test binary, tag, pid, counter) removed on drop.
pub struct TmpRing(pub PathBuf);

impl TmpRing {
    pub fn new(tag: &str) -> TmpRing {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        // Relaxed: only makes the name unique within this process.
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        TmpRing(PathBuf::from(format!(
            "/dev/shm/ringwire-{}-{tag}-{}-{n}",
            env!("CARGO_CRATE_NAME"),
            std::process::id()
        )))
    }
}

impl Drop for TmpRing {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
