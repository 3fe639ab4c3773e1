//! Creating a ring, a queue, a blackboard or a checkpoint on a tmpfs without room for it is
//! a typed error naming the file and `fallocate`, never a SIGBUS (at creation, or later in
//! a producer), and leaves no file behind; on the tmpfs remounted read-only, a checkpoint
//! whose directory cannot be made is an error naming that directory. Root only (it mounts an 8 MB tmpfs): ignored by
//! default; `.ci/run` runs it as root with
//! `cargo test -p ringwire-tests --release --test shm_enospc -- --ignored --test-threads=1`.
//!
//! The test re-executes its own binary as a child process in a private mount namespace
//! (`unshare(CLONE_NEWNS)` and a private `/` before `exec`), and the child mounts the tmpfs
//! on an empty temporary directory. The mount belongs to the child's namespace and dies
//! with it however the child ends (a SIGBUS included), and a guard removes the directory:
//! nothing is left mounted or on disk even when the test fails.

use std::ffi::CString;
use std::io::{ErrorKind, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use ringwire::core::Geometry;
use ringwire::queue::{MpmcQueue, QueueFileError, SpscProducer};
use ringwire::{BlackboardProducer, CreateOptions, Error, OffsetCheckpoint, RingFile};

/// Set in the child: the directory to mount the tmpfs on.
const CHILD_ENV: &str = "RINGWIRE_ENOSPC_MOUNT";
const TEST_NAME: &str = "creating_what_does_not_fit_a_tmpfs_is_a_typed_error_and_leaves_nothing";
/// The tmpfs size; every file below needs about twice as much.
const TMPFS_SIZE: &str = "size=8m,mode=0700";
const CHILD_TIMEOUT: Duration = Duration::from_secs(120);

#[test]
#[ignore = "needs root: mounts a small tmpfs"]
fn creating_what_does_not_fit_a_tmpfs_is_a_typed_error_and_leaves_nothing() {
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        return child(Path::new(&dir));
    }
    let dir = TempDir::new();
    let mut cmd = Command::new(std::env::current_exe().expect("test binary path"));
    cmd.args([
        "--exact",
        TEST_NAME,
        "--ignored",
        "--test-threads=1",
        "--nocapture",
    ])
    .env(CHILD_ENV, &dir.0)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    // SAFETY: the closure runs in the forked child before exec and makes only two system
    // calls, both async-signal-safe; it touches no memory the parent's threads own.
    unsafe {
        cmd.pre_exec(|| {
            // A mount namespace of its own, with `/` private so that the tmpfs mounted in
            // it does not propagate back to the host's namespace.
            if libc::unshare(libc::CLONE_NEWNS) != 0
                || libc::mount(
                    c"none".as_ptr(),
                    c"/".as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
    let child = cmd
        .spawn()
        .expect("spawn the child test in a mount namespace");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    let out = match rx.recv_timeout(CHILD_TIMEOUT) {
        Ok(out) => out.expect("wait for the child"),
        Err(_) => {
            // SAFETY: kill only sends a signal to the child we started and have not reaped.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            panic!("the child did not finish within {CHILD_TIMEOUT:?}");
        }
    };
    // A child killed by SIGBUS (a file sized but not reserved) has no exit code.
    assert!(
        out.status.success(),
        "child: {:?}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "the child did not run the test: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// An empty directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        let p = std::env::temp_dir().join(format!("ringwire-enospc-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir(&p).expect("create the mount point");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs in the child's own mount namespace.
fn child(dir: &Path) {
    let target = CString::new(dir.as_os_str().as_bytes()).unwrap();
    let data = CString::new(TMPFS_SIZE).unwrap();
    // SAFETY: every pointer is a NUL-terminated string that outlives the call.
    let r = unsafe {
        libc::mount(
            c"tmpfs".as_ptr(),
            target.as_ptr(),
            c"tmpfs".as_ptr(),
            0,
            data.as_ptr().cast(),
        )
    };
    assert_eq!(r, 0, "mount tmpfs: {}", std::io::Error::last_os_error());

    // A ring of 32768 slots of 512 bytes: 16 MB.
    let ring = dir.join("ring");
    let geo = Geometry::spmc(1 << 15, 512, 8, 0, false).unwrap();
    match RingFile::create(&ring, &geo, &CreateOptions::default()) {
        Err(
            e @ Error::Io {
                op: "fallocate", ..
            },
        ) => check_message(&e, &ring, e.path()),
        other => panic!("ring: expected a fallocate error, got {other:?}"),
    }
    assert_nothing_left(dir);

    // An SPSC queue of 2M u64 (16 MB), and an MPMC queue of 1M u64 (16-byte slots).
    let q = dir.join("spsc");
    match SpscProducer::<u64>::create(&q, 1 << 21) {
        Err(
            e @ QueueFileError::Io {
                op: "fallocate", ..
            },
        ) => check_message(&e, &q, &q),
        other => panic!("spsc queue: expected a fallocate error, got {other:?}"),
    }
    assert_nothing_left(dir);
    let q = dir.join("mpmc");
    match MpmcQueue::<u64>::create(&q, 1 << 20) {
        Err(
            e @ QueueFileError::Io {
                op: "fallocate", ..
            },
        ) => check_message(&e, &q, &q),
        other => panic!("mpmc queue: expected a fallocate error, got {other:?}"),
    }
    assert_nothing_left(dir);

    // A blackboard of 256K 56-byte values (64-byte slots): 16 MB.
    let bb = dir.join("board");
    match BlackboardProducer::<[u64; 7]>::create(&bb, 1 << 18) {
        Err(
            e @ Error::Io {
                op: "fallocate", ..
            },
        ) => check_message(&e, &bb, e.path()),
        other => panic!("blackboard: expected a fallocate error, got {other:?}"),
    }
    assert_nothing_left(dir);

    // A checkpoint needs only 64 bytes: fill the tmpfs first (after writing one page of
    // zeros, used below).
    let zeros = dir.join("zeros.offset");
    std::fs::write(&zeros, [0u8; 64]).unwrap();
    let filler = dir.join("filler");
    fill(&filler);
    let cp = dir.join("consumer.offset");
    let refused = |what: &str| match OffsetCheckpoint::open_or_create(&cp, "consumer") {
        Err(
            e @ Error::Io {
                op: "fallocate", ..
            },
        ) => check_message(&e, &cp, e.path()),
        other => panic!("{what}: expected a fallocate error, got {other:?}"),
    };
    refused("checkpoint");
    // A creation cut short after sizing its file leaves 64 bytes with no page behind them
    // (sparse): finishing it must reserve the page, not store into it (a SIGBUS). The
    // error names the file, which is left as it was.
    std::fs::File::create(&cp).unwrap().set_len(64).unwrap();
    refused("unfinished checkpoint");
    assert_eq!(std::fs::read(&cp).unwrap(), [0u8; 64]);
    // The same 64 zero bytes with their page written are finished on the full file system.
    std::fs::remove_file(&cp).unwrap();
    let finished = OffsetCheckpoint::open_or_create(&zeros, "consumer").unwrap();
    assert_eq!(finished.load(), None);
    drop(finished);
    std::fs::remove_file(&zeros).unwrap();
    std::fs::remove_file(&filler).unwrap();
    assert_nothing_left(dir);

    // What fits is still created, and used to the last slot.
    let geo = Geometry::spmc(1 << 10, 512, 8, 0, false).unwrap();
    let r = RingFile::create(&ring, &geo, &CreateOptions::default()).unwrap();
    drop(r);
    let mut p = SpscProducer::<u64>::create(&q, 1 << 10).unwrap();
    for i in 0..1 << 10 {
        p.try_push(&i).unwrap();
    }
    drop(p);
    std::fs::remove_file(&q).unwrap();
    assert_nothing_left(dir);

    // Read-only now: a checkpoint whose directory cannot be made names that directory and
    // why, not only its own path as missing.
    // SAFETY: every pointer is a NUL-terminated string that outlives the call, or null.
    let r = unsafe {
        libc::mount(
            std::ptr::null(),
            target.as_ptr(),
            std::ptr::null(),
            libc::MS_REMOUNT | libc::MS_RDONLY,
            std::ptr::null(),
        )
    };
    assert_eq!(
        r,
        0,
        "remount read-only: {}",
        std::io::Error::last_os_error()
    );
    let sub = dir.join("offsets");
    match OffsetCheckpoint::open_or_create(sub.join("consumer.offset"), "consumer") {
        Err(e @ Error::Io { op: "mkdir", .. }) => {
            assert_eq!(e.path(), sub);
            let msg = e.to_string();
            assert!(msg.contains("Read-only file system"), "{msg}");
        }
        other => panic!("checkpoint in a new directory: expected a mkdir error, got {other:?}"),
    }
    assert_nothing_left(dir);
    // SAFETY: the path is a NUL-terminated string that outlives the call.
    assert_eq!(unsafe { libc::umount(target.as_ptr()) }, 0);
}

/// The error says which file, what failed and how many bytes, and that the disk is full.
fn check_message(e: &dyn std::error::Error, want: &Path, got: &Path) {
    assert_eq!(got, want);
    let msg = e.to_string();
    eprintln!("{msg}");
    assert!(msg.contains(&want.display().to_string()), "{msg}");
    assert!(msg.contains("fallocate failed"), "{msg}");
    assert!(msg.contains("bytes"), "{msg}");
    assert!(msg.contains("No space left on device"), "{msg}");
}

fn assert_nothing_left(dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// Writes `path` until the file system is full.
fn fill(path: &Path) {
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![1u8; 64 << 10];
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::StorageFull => break,
            Err(e) => panic!("fill {}: {e}", path.display()),
        }
    }
}
