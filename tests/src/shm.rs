//! Unique `/dev/shm` paths that are removed even when a test fails.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// `/dev/shm/ringwire-test-{tag}-{pid}-{n}`, `n` counting within this process.
fn unique(tag: &str) -> PathBuf {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    PathBuf::from(format!(
        "/dev/shm/ringwire-test-{tag}-{}-{n}",
        std::process::id()
    ))
}

/// A unique path under `/dev/shm` (test name, pid and a counter). Dropping it removes the
/// file, so a failed assertion does not leave rings behind.
#[derive(Debug)]
pub struct ShmPath(PathBuf);

impl ShmPath {
    /// A fresh path whose file name starts with `ringwire-test-{tag}`.
    pub fn new(tag: &str) -> ShmPath {
        let p = unique(tag);
        let _ = std::fs::remove_file(&p);
        ShmPath(p)
    }

    /// A guard for a file another program names and creates (a ringwire process's own
    /// ring): removed on drop, so a test that fails before that program cleans up leaves
    /// nothing behind.
    pub fn adopt(path: impl Into<PathBuf>) -> ShmPath {
        ShmPath(path.into())
    }

    /// The path.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// A sibling path with a suffix (e.g. a checkpoint file), also removed on drop of the
    /// returned guard.
    pub fn sibling(&self, suffix: &str) -> ShmPath {
        let mut s = self.0.clone().into_os_string();
        s.push(suffix);
        let p = PathBuf::from(s);
        let _ = std::fs::remove_file(&p);
        ShmPath(p)
    }
}

impl AsRef<Path> for ShmPath {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for ShmPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        remove_default_checkpoints(&self.0);
    }
}

/// A fresh directory under `/dev/shm` (test name, pid and a counter), removed with
/// everything in it on drop, so also when an assertion fails.
#[derive(Debug)]
pub struct ShmDir(PathBuf);

impl ShmDir {
    /// Creates the directory `/dev/shm/ringwire-test-{tag}-{pid}-{n}`.
    pub fn new(tag: &str) -> ShmDir {
        let p = unique(tag);
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir(&p)
            .unwrap_or_else(|e| panic!("create the directory {}: {e}", p.display()));
        ShmDir(p)
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The path of `name` in the directory.
    pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.0.join(name)
    }
}

impl AsRef<Path> for ShmDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for ShmDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
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

/// Overwrites `bytes` at `offset` of the file at `path`.
pub fn patch(path: &Path, offset: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open for patch");
    f.write_all_at(bytes, offset).expect("patch");
}

/// A ring file's view, borrowed for a test's direct protocol calls while the file is alive.
pub fn view(r: &ringwire::RingFile) -> &ringwire::core::RingView {
    // SAFETY: the returned borrow cannot outlive `r`; tests never copy it out.
    unsafe { r.view() }
}
