//! Shared by the integration tests of this package.

use std::path::{Path, PathBuf};

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
        remove_default_checkpoints(&self.0);
    }
}

/// Removes the checkpoints a named consumer of the ring at `ring` left at the default path
/// (`<stem>_<name>.offset` beside it, spec §13).
fn remove_default_checkpoints(ring: &Path) {
    let (Some(dir), Some(stem)) = (ring.parent(), ring.file_stem()) else {
        return;
    };
    let prefix = format!("{}_", stem.to_string_lossy());
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(&prefix) && name.ends_with(".offset") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}
