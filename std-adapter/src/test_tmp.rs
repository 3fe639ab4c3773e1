//! Test helper: a scratch path for one test, removed when the guard drops.
//!
//! A test that removed its file as its last statement left the file behind whenever an
//! assertion before that failed; the guard is dropped on that unwinding too. Forked children
//! leave through `_exit` (see `test_fork`), so a child's copy of a guard removes nothing.

use std::ffi::OsStr;
use std::ops::Deref;
use std::path::{Path, PathBuf};

/// A path named by a test's tag and this process's pid, empty when made and removed (a file,
/// or a directory with what is in it) when dropped.
pub(crate) struct TmpPath(PathBuf);

impl TmpPath {
    /// `ringwire-{tag}-{pid}` in the system's temporary directory.
    pub(crate) fn new(tag: &str) -> TmpPath {
        Self::under(&std::env::temp_dir(), tag)
    }

    /// `ringwire-{tag}-{pid}` in `/dev/shm`, where rings usually live (the temporary
    /// directory where there is no `/dev/shm`).
    pub(crate) fn shm(tag: &str) -> TmpPath {
        let shm = Path::new("/dev/shm");
        if shm.is_dir() {
            Self::under(shm, tag)
        } else {
            Self::new(tag)
        }
    }

    fn under(dir: &Path, tag: &str) -> TmpPath {
        let path = dir.join(format!("ringwire-{tag}-{}", std::process::id()));
        remove(&path);
        TmpPath(path)
    }

    /// A guard of its own for this path with extension `ext`, for a file a test makes
    /// beside this one.
    pub(crate) fn beside(&self, ext: &str) -> TmpPath {
        let path = self.0.with_extension(ext);
        remove(&path);
        TmpPath(path)
    }

    /// The path, for the places that want a `&PathBuf` or an owned copy.
    pub(crate) fn path(&self) -> &PathBuf {
        &self.0
    }
}

impl Deref for TmpPath {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TmpPath {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

/// Also makes `&TmpPath` an `Into<PathBuf>`, as `&Path` is.
impl AsRef<OsStr> for TmpPath {
    fn as_ref(&self) -> &OsStr {
        self.0.as_os_str()
    }
}

impl Drop for TmpPath {
    fn drop(&mut self) {
        remove(&self.0);
    }
}

/// Removes what is at `path` (not following a link there), ignoring that nothing is.
fn remove(path: &Path) {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => {
            let _ = std::fs::remove_dir_all(path);
        }
        Ok(_) => {
            let _ = std::fs::remove_file(path);
        }
        Err(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guard_removes_its_file_or_directory_also_when_its_test_unwinds() {
        let file = TmpPath::new("tmp-file");
        std::fs::write(&file, b"x").unwrap();
        let kept = file.path().clone();
        drop(file);
        assert!(!kept.exists());

        let dir = std::panic::catch_unwind(|| {
            let dir = TmpPath::shm("tmp-dir");
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join("inside"), b"x").unwrap();
            let path = dir.path().clone();
            std::panic::panic_any(path);
        })
        .unwrap_err();
        let dir = dir.downcast::<PathBuf>().unwrap();
        assert!(!dir.exists(), "{}", dir.display());
    }

    #[test]
    fn a_new_guard_clears_what_an_earlier_run_left() {
        let first = TmpPath::new("tmp-stale");
        std::fs::write(&first, b"old").unwrap();
        std::mem::forget(first);
        let second = TmpPath::new("tmp-stale");
        assert!(!second.exists());
    }
}
