//! Blackboard files (spec §14): [`BlackboardProducer<V>`] creates one with the same flock
//! protocol as a ring (mode 0o660, magic last, unlink on drop), [`BlackboardConsumer<V>`]
//! attaches and reads values. The seqlock protocol is the core's [`Blackboard`].
//!
//! As a ring producer, a blackboard producer replaces only a stale blackboard, or one
//! whose creation never finished (all zeros, or a header whose magic, written last, is
//! still 0), and refuses any other non-empty file at its path ([`Error::NotReplaced`]);
//! its drop unlinks the board by the absolute path taken at creation, where a symbolic
//! link points, and only while that path still names its file.

use std::fs::{File, OpenOptions};
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use memmap2::MmapRaw;
use ringwire_core::blackboard::{
    Blackboard, BlackboardError, MAX_VALUE_ALIGN, MAX_VALUE_SIZE, TryRead,
    checked_slot_size_aligned, total_len_aligned,
};
use zerocopy::{FromBytes, Immutable, IntoBytes};

use crate::cli::sigbus::Mapped;
use crate::error::{Error, Result};
use crate::file::{
    CleanupMode, FileKind, absolute, map_file, not_empty, open_exclusive, open_regular,
    remove_if_ours,
};
use crate::sys;

/// Spins before a reader starts yielding to a writer that holds a key.
const SPINS_BEFORE_YIELD: u32 = 10_000;
/// How long a key's seqlock may stay at the same odd value (a writer stuck mid-write)
/// before a reader reports the writer stalled.
pub const STALL_TIMEOUT: Duration = Duration::from_millis(100);
/// How long a read goes on when the key is mid-write at every look although its seqlock
/// moves (a writer that never stops rewriting the key, or a hostile one): then the read
/// ends with [`Error::KeyBusy`] instead of spinning for ever.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(1);

fn bb_err(path: &Path) -> impl Fn(BlackboardError) -> Error + '_ {
    move |source| Error::Blackboard {
        path: path.to_path_buf(),
        source,
    }
}

/// Checks, read-only, that the blackboard file at `path` is whole: magic, version, slot
/// size, and a length of at least 128 + slot_count × slot_size (a truncated board is
/// [`BlackboardError::TooShort`], naming both lengths). For `stat` and `heal`, which
/// otherwise look at the header alone.
pub(crate) fn check_file(path: &Path) -> Result<()> {
    map_read_only(path).map(drop)
}

/// The blackboard at `path`, mapped read-only and checked as [`check_file`] says; the
/// mapping lives as long as the returned `MmapRaw`.
fn map_read_only(path: &Path) -> Result<(Mapped<MmapRaw>, Blackboard)> {
    not_empty(path, "blackboard")?;
    let file = open_regular(path, OpenOptions::new().read(true))?;
    let (map, region) = map_file(path, &file, true)?;
    let bb = Blackboard::attach(region, None).map_err(bb_err(path))?;
    Ok((map, bb))
}

/// The keys of the blackboard at `path` whose seqlock is odd, and still the same odd value
/// `settle` later: each a write that has not finished in that time, so almost surely one
/// whose writer died mid-write (readers of such a key get [`Error::WriterStalled`]). For
/// `heal`; the file is mapped read-only.
pub(crate) fn stalled_keys(path: &Path, settle: std::time::Duration) -> Result<Vec<usize>> {
    let (_map, bb) = map_read_only(path)?;
    let mut first = Vec::new();
    for k in 0..bb.slot_count() as usize {
        let s = bb.seqlock(k).map_err(bb_err(path))?;
        if s % 2 == 1 {
            first.push((k, s));
        }
    }
    if first.is_empty() {
        return Ok(Vec::new());
    }
    crate::sys::sleep(settle);
    // One look at each key found odd: a board of many odd keys (a corrupt file) costs a
    // pass over them, not a search of the first list for each.
    let mut stalled = Vec::new();
    for (k, s) in first {
        if bb.seqlock(k).map_err(bb_err(path))? == s {
            stalled.push(k);
        }
    }
    Ok(stalled)
}

/// Refuses, at compile time, a value type aligned above [`MAX_VALUE_ALIGN`]: slots start at
/// file offset 128, so such a value could not sit at its alignment.
const fn assert_value_align<V>() {
    assert!(
        align_of::<V>() <= MAX_VALUE_ALIGN,
        "blackboard value types aligned above 128 bytes are not supported: slots start at offset 128 of the file"
    );
}

/// `size_of::<V>()` as the header's 32-bit `value_size`, or an error naming it when it does
/// not fit: truncated, a board was made or attached with another type's value size.
fn value_size_u32<V>(path: &Path) -> Result<u32> {
    u32::try_from(size_of::<V>()).map_err(|_| Error::InvalidArgument {
        path: path.to_path_buf(),
        what: format!(
            "value type of {} bytes does not fit the header's 32-bit value_size (at most {MAX_VALUE_SIZE})",
            size_of::<V>()
        ),
    })
}

/// The writer of a blackboard file (one writer per key; this type writes all keys).
///
/// As with a [`RingProducer`](crate::RingProducer), a copy inherited through `fork` shares
/// the lock and must not write in the child; dropping it there leaves the file and the
/// lock to the parent.
pub struct BlackboardProducer<V> {
    bb: Blackboard,
    _map: Mapped<MmapRaw>,
    file: File,
    id: (u64, u64),
    path: PathBuf,
    /// `path` made absolute at creation, for the unlink on drop: a relative path looked up
    /// after a change of the working directory names another file or none, and the board
    /// was left behind (as a ring's was, see `RingFile`).
    abs_path: PathBuf,
    cleanup: CleanupMode,
    /// The creating process: while it lives, only it unlinks and unlocks on drop (see
    /// `RingFile`'s drop).
    pid: u32,
    /// Its incarnation, so that a later process given the same pid is not taken for it.
    incarnation: Option<ringwire_core::broadcast::registry::Incarnation>,
    _v: PhantomData<fn(&V)>,
}

impl<V: IntoBytes + Immutable + 'static> BlackboardProducer<V> {
    /// Creates a blackboard of `slot_count` values at `path` (flock held for the
    /// producer's life, a stale file replaced by a fresh inode). Each value sits where
    /// ringfire's `BlackboardSlot<V>` puts it: at +8 in its slot, or at its alignment for a
    /// type aligned above 8 (`u128`, `#[repr(C, align(16))]`, up to 128); a type aligned
    /// above 128 is refused at compile time:
    ///
    /// ```compile_fail
    /// #[repr(C, align(256))]
    /// #[derive(zerocopy::IntoBytes, zerocopy::Immutable)]
    /// struct Wide([u64; 32]);
    /// let _ = ringwire::BlackboardProducer::<Wide>::create("/dev/shm/never-made", 4);
    /// ```
    ///
    /// A value type larger than [`MAX_VALUE_SIZE`] is refused: above `u32::MAX` bytes with
    /// [`Error::InvalidArgument`] naming its size, up to it with
    /// [`BlackboardError::ValueTooLarge`]. `slot_count` is a `usize`, as ringfire takes it;
    /// one above `u32::MAX`, more than the header's 32-bit `slot_count` holds, is
    /// [`Error::InvalidArgument`], and so is an empty `path`.
    pub fn create(path: impl AsRef<Path>, slot_count: usize) -> Result<Self> {
        const { assert_value_align::<V>() };
        let path = path.as_ref();
        not_empty(path, "blackboard")?;
        let value_size = value_size_u32::<V>(path)?;
        // Refused before the file is made: sized for every slot first, it failed there
        // instead (a length no file has, or no room), or reserved gigabytes for nothing.
        if checked_slot_size_aligned(size_of::<V>(), align_of::<V>())
            .is_none_or(|ss| u32::try_from(ss).is_err())
        {
            return Err(bb_err(path)(BlackboardError::ValueTooLarge { value_size }));
        }
        let count = u32::try_from(slot_count).map_err(|_| Error::InvalidArgument {
            path: path.to_path_buf(),
            what: format!(
                "slot_count {slot_count} does not fit the header's 32-bit slot_count (at most {})",
                u32::MAX
            ),
        })?;
        // At most `isize::MAX` bytes, the most a mapping (a Region) holds, as for a ring.
        let total = total_len_aligned(size_of::<V>(), align_of::<V>(), slot_count)
            .filter(|&n| n <= isize::MAX as usize)
            .ok_or_else(|| Error::InvalidArgument {
                path: path.to_path_buf(),
                what: format!("slot_count {slot_count} makes the blackboard too large"),
            })?;
        let file = open_exclusive(path, 0o660, total as u64, FileKind::Blackboard)?;
        let id = sys::file_id(&file).map_err(|e| Error::io(path, "fstat", e))?;
        // A half-made file is removed while we still hold its lock, as a ring's is.
        let cleanup_on_error = |e: Error| {
            remove_if_ours(path, id);
            e
        };
        let (map, region) = map_file(path, &file, false).map_err(cleanup_on_error)?;
        // SAFETY: `region` is the mapping just made of a fresh file under the creator's
        // lock: no other view of it exists yet (other processes' mappings only poll the
        // magic, stored last).
        let bb =
            unsafe { Blackboard::init_aligned(region, value_size, align_of::<V>() as u32, count) }
                .map_err(bb_err(path))
                .map_err(cleanup_on_error)?;
        Ok(BlackboardProducer {
            bb,
            _map: map,
            file,
            id,
            path: path.to_path_buf(),
            abs_path: absolute(path),
            cleanup: CleanupMode::UnlinkOnDrop,
            pid: std::process::id(),
            incarnation: sys::own_incarnation(),
            _v: PhantomData,
        })
    }

    /// Keep the file (or not) when dropped.
    pub fn set_cleanup_mode(&mut self, mode: CleanupMode) {
        self.cleanup = mode;
    }

    /// Writes `value` under `key`; a key at or past [`BlackboardProducer::slot_count`] is
    /// refused with [`Error::Blackboard`] ([`BlackboardError::KeyOutOfRange`]) and nothing
    /// is written.
    pub fn write(&mut self, key: usize, value: &V) -> Result<()> {
        self.bb
            .write(key, value.as_bytes())
            .map_err(bb_err(&self.path))
    }

    /// Number of keys (a `usize`, as ringfire gives it).
    pub fn slot_count(&self) -> usize {
        self.bb.slot_count() as usize
    }
}

impl<V> Drop for BlackboardProducer<V> {
    fn drop(&mut self) {
        if self.pid != std::process::id() && sys::process_running(self.pid, self.incarnation) {
            // A copy inherited through fork leaves the file and the lock to the creator
            // while it lives (see `RingFile`'s drop).
            return;
        }
        // Only while the path still names our inode, and where a symbolic link points, as
        // a ring producer's drop does.
        if self.cleanup == CleanupMode::UnlinkOnDrop {
            remove_if_ours(&self.abs_path, self.id);
        }
        sys::unlock(&self.file);
    }
}

/// A reader of a blackboard file.
///
/// It reads the file it mapped at attach. A producer that restarts replaces the file at the
/// path with a fresh one (spec §1.2), and this reader then goes on reading the old board's
/// last values, which never change again: [`BlackboardConsumer::is_replaced`] tells, and a
/// new attach follows the new board.
pub struct BlackboardConsumer<V> {
    bb: Blackboard,
    _map: Mapped<MmapRaw>,
    path: PathBuf,
    /// `path` made absolute at attach, for `is_replaced`: a change of the working
    /// directory since must not look like a replaced board.
    abs_path: PathBuf,
    // (device, inode) of the mapped file.
    id: (u64, u64),
    _v: PhantomData<fn() -> V>,
}

/// A reader only turns a slot's bytes into a `V`, so `V` needs [`FromBytes`] and nothing
/// more (ringfire's reader takes any `Copy` type): a value type with padding, which has no
/// [`IntoBytes`], can be read from a board its writer filled through a padding-free twin.
impl<V: FromBytes + 'static> BlackboardConsumer<V> {
    /// Attaches to the blackboard at `path`; its `value_size` must be `size_of::<V>()`, and
    /// values are read where [`BlackboardProducer::create`] puts a `V`. The header records
    /// no alignment: a board written for a value of the same size but another alignment is
    /// refused when its slot size differs ([`BlackboardError::SlotSizeMismatch`]), but where
    /// both get the same slot (`[u64; 2]` against `u128`: 64 bytes) the two cannot be told
    /// apart and the value is read at the wrong offset, by ringfire as well.
    pub fn attach(path: impl AsRef<Path>) -> Result<Self> {
        const { assert_value_align::<V>() };
        let path = path.as_ref();
        not_empty(path, "blackboard")?;
        let value_size = value_size_u32::<V>(path)?;
        let file = open_regular(path, OpenOptions::new().read(true).write(true))?;
        let len = file
            .metadata()
            .map_err(|e| Error::io(path, "fstat", e))?
            .len();
        if len < 128 {
            return Err(
                crate::file::offset_file_given_for(path, &file, "blackboard")
                    .unwrap_or_else(|| bb_err(path)(BlackboardError::TooShort { need: 128, len })),
            );
        }
        let id = sys::file_id(&file).map_err(|e| Error::io(path, "fstat", e))?;
        let (map, region) = map_file(path, &file, false)?;
        let bb = Blackboard::attach_aligned(region, value_size, align_of::<V>() as u32)
            .map_err(bb_err(path))?;
        Ok(BlackboardConsumer {
            bb,
            _map: map,
            path: path.to_path_buf(),
            abs_path: absolute(path),
            id,
            _v: PhantomData,
        })
    }

    /// True when the path no longer names the mapped file: the producer restarted and
    /// replaced the board with a fresh file (or removed it). The values this reader reads
    /// then never change again; attach anew to follow the new board.
    pub fn is_replaced(&self) -> bool {
        !matches!(sys::path_id(&self.abs_path), Ok(Some(id)) if id == self.id)
    }

    /// Reads `key`: `Ok(None)` if it was never written. Retries while the writer holds the
    /// key (spinning, then yielding). A writer stuck mid-write (the same odd seqlock value)
    /// for 100 ms ([`STALL_TIMEOUT`]) is [`Error::WriterStalled`]; a writer that keeps
    /// writing is progress, not a stall, but a read that finds the key mid-write at every
    /// look for over a second ([`BUSY_TIMEOUT`]) ends with [`Error::KeyBusy`], so that no
    /// writer, however it writes, keeps a reader here for ever.
    pub fn read(&self, key: usize) -> Result<Option<V>> {
        // Bytes, not a `V`: a `V` with padding cannot be viewed as a `[u8]` (`IntoBytes`),
        // its padding being uninitialised.
        let mut v = MaybeUninit::<V>::uninit();
        // SAFETY: the pointer is to `v`'s own `size_of::<V>()` bytes, writable; zeroed in
        // place (no move of `v` after it), so every byte is initialised from here on.
        unsafe { v.as_mut_ptr().cast::<u8>().write_bytes(0, size_of::<V>()) };
        // SAFETY: `v`'s bytes are initialised (above) and stay so (the reads only copy
        // bytes into them); the slice borrows `v` mutably until the loop ends, and nothing
        // else touches `v` meanwhile.
        let bytes =
            unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), size_of::<V>()) };
        let begun = Instant::now();
        let mut start = begun;
        let mut last = 0u64;
        let mut spins = 0u32;
        loop {
            match self.bb.try_read(key, bytes).map_err(bb_err(&self.path))? {
                // SAFETY: every byte of `v` is initialised (zeroed, then the value copied
                // over them) and `V: FromBytes` makes any bytes a valid `V`.
                TryRead::Value => return Ok(Some(unsafe { v.assume_init() })),
                TryRead::Never => return Ok(None),
                TryRead::Busy { seqlock } if seqlock != last => {
                    last = seqlock;
                    start = Instant::now();
                }
                TryRead::Busy { .. } => {}
            }
            spins = spins.saturating_add(1);
            if spins < SPINS_BEFORE_YIELD {
                std::hint::spin_loop();
                continue;
            }
            if start.elapsed() > STALL_TIMEOUT {
                return Err(Error::WriterStalled {
                    path: self.path.clone(),
                    key,
                });
            }
            if begun.elapsed() > BUSY_TIMEOUT {
                return Err(Error::KeyBusy {
                    path: self.path.clone(),
                    key,
                });
            }
            std::thread::yield_now();
        }
    }

    /// [`BlackboardConsumer::read`] into `out`: `Ok(true)` and `out` holds the value, or
    /// `Ok(false)` when `key` was never written. `out` is left as it was on `Ok(false)` and
    /// on errors (a key out of range, a stalled writer).
    pub fn read_copy(&self, key: usize, out: &mut V) -> Result<bool> {
        // Through `read` so that a torn attempt never reaches `out`.
        Ok(self.read(key)?.map(|v| *out = v).is_some())
    }

    /// Number of keys (a `usize`, as ringfire gives it).
    pub fn slot_count(&self) -> usize {
        self.bb.slot_count() as usize
    }
}

impl<V> std::fmt::Debug for BlackboardProducer<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlackboardProducer")
            .field("path", &self.path)
            .finish()
    }
}

impl<V> std::fmt::Debug for BlackboardConsumer<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlackboardConsumer")
            .field("path", &self.path)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use crate::test_tmp::TmpPath;
    use std::os::unix::fs::FileExt;
    use std::time::{Duration, Instant};

    use super::*;

    /// A board created through a relative path is unlinked by its producer's drop after the
    /// process changed its working directory, and a reader attached through that path does
    /// not take the change for a replaced board. Both looked the relative path up again from
    /// the new directory: the drop found nothing there (or another file) and left the board
    /// in place for good, and `is_replaced` said true. Through a relative symbolic link the
    /// drop removes the board where the link points and leaves the link, as a ring's does.
    /// In a forked child, whose `chdir` the test harness's other threads do not see; it
    /// exits with one bit set for each fault found.
    #[test]
    fn a_relative_board_path_is_removed_after_a_chdir_even_through_a_link() {
        let dir = std::env::temp_dir();
        let [board_at, target_at, link_at] =
            ["board", "target", "link"].map(|tag| TmpPath::new(&format!("bb-chdir-{tag}")));
        // The names alone, looked up from the working directory.
        let [board, target, link] =
            [&board_at, &target_at, &link_at].map(|p| p.file_name().unwrap().to_owned());
        // A relative link: it names the target beside it, from wherever it is looked up.
        std::os::unix::fs::symlink(&target, &link_at).unwrap();
        let status = crate::test_fork::forked(10, || {
            if std::env::set_current_dir(&dir).is_err() {
                return 128;
            }
            let (Ok(mut bb), Ok(via_link)) = (
                BlackboardProducer::<u64>::create(&board, 4),
                BlackboardProducer::<u64>::create(&link, 4),
            ) else {
                return 129;
            };
            let Ok(rx) = BlackboardConsumer::<u64>::attach(&board) else {
                return 130;
            };
            if bb.write(0, &5).is_err() || std::env::set_current_dir("/").is_err() {
                return 131;
            }
            let mut faults = 0;
            if rx.is_replaced() || !matches!(rx.read(0), Ok(Some(5))) {
                faults |= 1;
            }
            drop(bb);
            drop(via_link);
            if board_at.exists() {
                faults |= 2;
            }
            if !rx.is_replaced() {
                faults |= 4;
            }
            if target_at.exists() {
                faults |= 8;
            }
            if !std::fs::symlink_metadata(&link_at).is_ok_and(|m| m.file_type().is_symlink()) {
                faults |= 16;
            }
            faults
        });
        // 1: the reader called its board replaced after the chdir; 2: the board was left
        // behind; 4: the reader did not see it removed; 8: the file behind the link was
        // left; 16: the link was removed.
        crate::test_fork::assert_exited_0(status, "a board dropped after a chdir");
    }

    /// `heal`'s look for keys left mid-write compared every key still odd after the settle
    /// with every key odd before it: quadratic in the number of odd keys, so a board whose
    /// seqlocks are all odd (a corrupt or hostile file; 100,000 keys are a 6.4 MB file)
    /// kept `ringwire heal` busy for minutes. Each key is now looked at once per pass.
    #[test]
    fn stalled_keys_takes_linear_time_on_a_board_of_odd_seqlocks() {
        const KEYS: usize = 100_000;
        const SETTLE: Duration = Duration::from_millis(900);
        let path = TmpPath::new("bb-odd");
        let bb = BlackboardProducer::<u64>::create(&path, KEYS).unwrap();
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        let mut bytes = vec![0u8; 64 * KEYS];
        // Every seqlock odd; key 7's changes during the settle below (a live writer), a
        // third of the way into it, so that neither pass's look at it races the change.
        for k in 0..KEYS {
            bytes[64 * k..][..8].copy_from_slice(&1u64.to_ne_bytes());
        }
        file.write_all_at(&bytes, 128).unwrap();
        let t0 = Instant::now();
        let stalled = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(SETTLE / 3);
                file.write_all_at(&3u64.to_ne_bytes(), 128 + 64 * 7)
                    .unwrap();
            });
            stalled_keys(&path, SETTLE).unwrap()
        });
        let took = t0.elapsed();
        drop(bb);
        let mut want: Vec<usize> = (0..KEYS).collect();
        want.remove(7);
        assert_eq!(stalled, want);
        // A hang guard, not a speed target: the quadratic look took 24 s here in a debug
        // build, the linear one takes the settle and 0.1 s.
        assert!(
            took < SETTLE + Duration::from_secs(10),
            "stalled_keys took {took:?}"
        );
    }

    /// A value type with padding (no `IntoBytes`) can be read: a reader only turns bytes
    /// into values, as ringfire's (`V: Copy`) does. Written here through a padding-free
    /// twin with the same layout, its padding bytes set, as any writer may leave them.
    #[test]
    fn a_value_type_with_padding_is_read() {
        #[derive(FromBytes, Clone, Copy, Debug, PartialEq)]
        #[repr(C)]
        struct Padded {
            flag: u8,
            // 7 padding bytes here
            count: u64,
            tag: u16,
            // 6 padding bytes here
        }
        #[derive(IntoBytes, Immutable)]
        #[repr(C)]
        struct Twin {
            flag: u8,
            pad: [u8; 7],
            count: u64,
            tag: u16,
            tail: [u8; 6],
        }
        const _: () = assert!(size_of::<Padded>() == size_of::<Twin>());
        const _: () = assert!(align_of::<Padded>() == align_of::<Twin>());
        let t = TmpPath::new("bb-padded");
        let mut tx = BlackboardProducer::<Twin>::create(&t, 4).unwrap();
        let written = Twin {
            flag: 0x5a,
            pad: [0xee; 7],
            count: 0x0102_0304_0506_0708,
            tag: 0xbeef,
            tail: [0xdd; 6],
        };
        tx.write(2, &written).unwrap();
        let rx = BlackboardConsumer::<Padded>::attach(&t).unwrap();
        let mut out = Padded {
            flag: 0,
            count: 0,
            tag: 0,
        };
        let copied = rx.read_copy(2, &mut out).unwrap();
        assert_eq!(
            (rx.read(2).unwrap(), rx.read(1).unwrap(), copied, out),
            (
                Some(Padded {
                    flag: 0x5a,
                    count: 0x0102_0304_0506_0708,
                    tag: 0xbeef,
                }),
                None,
                true,
                Padded {
                    flag: 0x5a,
                    count: 0x0102_0304_0506_0708,
                    tag: 0xbeef,
                }
            )
        );
    }

    /// A value type over `u32::MAX` bytes does not fit the header's `value_size`. Its size
    /// was cut to 32 bits: 2^32 + 8 became 8, so a consumer of it attached to a board of
    /// `u64` values, and a producer wrote a board saying its values were 8 bytes.
    #[test]
    fn a_value_type_over_u32_max_bytes_is_refused_naming_its_size() {
        type Huge = [u8; (1 << 32) + 8];
        let path = TmpPath::shm("bb-huge-value");
        let _board = BlackboardProducer::<u64>::create(&path, 2).unwrap();
        let refused = |r: &Result<usize>| {
            let Err(e) = r else { return false };
            let msg = e.to_string();
            matches!(e, Error::InvalidArgument { .. })
                && msg.contains("4294967304 bytes")
                && msg.contains(&*path.to_string_lossy())
        };
        let attached = BlackboardConsumer::<Huge>::attach(&path).map(|c| c.slot_count());
        assert!(refused(&attached), "{attached:?}");
        let other = path.beside("other");
        // Zero keys: the file is a header alone, which the cut size did not stop.
        let created = BlackboardProducer::<Huge>::create(&other, 0).map(|b| b.slot_count());
        assert!(refused(&created), "{created:?}");
        assert!(!other.exists());
    }

    /// A value type whose slot does not fit the header's 32-bit `slot_size` (above
    /// `MAX_VALUE_SIZE`, or at it and aligned above 8) is refused with `ValueTooLarge` as
    /// `create` says, before any file is made. The check ran only once the file was made
    /// and sized for every slot: with many keys the sizing failed first (an `ftruncate`
    /// error for a length past `i64::MAX`, or `ENOSPC` from the reservation, naming no value
    /// size), and with few it reserved gigabytes of memory before the refusal.
    #[test]
    fn a_value_type_too_large_for_a_slot_is_refused_before_the_file_is_made() {
        #[repr(C, align(16))]
        #[derive(IntoBytes, Immutable)]
        struct WideAligned([u8; MAX_VALUE_SIZE as usize + 8]);
        type Wide = [u8; MAX_VALUE_SIZE as usize + 1];
        let path = TmpPath::new("bb-wide-value");
        let too_large = |e: Error, value_size: u32| {
            let msg = e.to_string();
            assert!(
                matches!(
                    e,
                    Error::Blackboard { source: BlackboardError::ValueTooLarge { value_size: v }, .. }
                        if v == value_size
                ),
                "{e:?}"
            );
            assert!(
                msg.contains(&format!("value_size {value_size} is too large")),
                "{msg}"
            );
        };
        // u32::MAX keys: 2^64 - 2^32 + 128 bytes, a length no file can have.
        let e = BlackboardProducer::<Wide>::create(&path, u32::MAX as usize).unwrap_err();
        too_large(e, MAX_VALUE_SIZE + 1);
        let e = BlackboardProducer::<WideAligned>::create(&path, u32::MAX as usize).unwrap_err();
        // 2^32 - 64 bytes at +16 need a slot of 2^32.
        too_large(e, MAX_VALUE_SIZE + 8);
        assert!(!path.exists());
    }

    /// A board larger than `isize::MAX` bytes, the most a mapping holds, is refused naming
    /// its slot count, as a ring too large is. Only a size past `usize::MAX` was: one between
    /// the two went on to the file's sizing, whose error was a bare conversion failure of
    /// `ftruncate`'s length.
    #[test]
    fn a_board_larger_than_a_mapping_can_be_is_refused_naming_its_slot_count() {
        type Half = [u8; 1 << 31];
        let path = TmpPath::new("bb-past-isize");
        // 2^32 - 1 slots of 2^31 + 64 bytes: past isize::MAX, short of usize::MAX.
        let e = BlackboardProducer::<Half>::create(&path, u32::MAX as usize).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, Error::InvalidArgument { .. }), "{e:?}");
        assert!(
            msg.contains("slot_count 4294967295 makes the blackboard too large"),
            "{msg}"
        );
        assert!(!path.exists());
    }

    /// `create` takes the key count as a `usize`, as ringfire does (it took a `u32`, so a
    /// ringfire program passing a `usize` did not compile); one above `u32::MAX`, which the
    /// header's 32-bit `slot_count` cannot hold, is refused naming it and makes no file.
    #[cfg(target_pointer_width = "64")]
    #[test]
    fn a_slot_count_past_the_headers_32_bits_is_refused_naming_it() {
        let path = TmpPath::new("bb-many-keys");
        let keys = u32::MAX as usize + 1;
        let e = BlackboardProducer::<u64>::create(&path, keys).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, Error::InvalidArgument { .. }), "{e:?}");
        assert!(
            msg.contains("slot_count 4294967296 does not fit the header's 32-bit slot_count"),
            "{msg}"
        );
        assert!(!path.exists());
        let board = BlackboardProducer::<u64>::create(&path, 3).unwrap();
        let reader = BlackboardConsumer::<u64>::attach(&path).unwrap();
        assert_eq!((board.slot_count(), reader.slot_count()), (3usize, 3usize));
    }

    /// An empty path is refused by name, as a ring's is. It was opened: the `ENOENT` came
    /// back with no path to show, "open failed: No such file or directory".
    #[test]
    fn an_empty_board_path_is_said_to_be_empty() {
        let created = BlackboardProducer::<u64>::create("", 4).map(drop);
        let attached = BlackboardConsumer::<u64>::attach("").map(drop);
        for e in [created, attached, check_file(Path::new(""))] {
            let e = e.unwrap_err();
            assert!(matches!(e, Error::InvalidArgument { .. }), "{e:?}");
            assert_eq!(e.to_string(), "the blackboard file's path is empty");
        }
    }

    /// A consumer offset file given for a blackboard (a swapped path: both lie in
    /// `/dev/shm`) is named by its magic, as the ring's opens name it; it was reported as a
    /// board cut short, "file is 64 bytes, the blackboard needs 128". The file is left as
    /// it was.
    #[test]
    fn an_offset_file_attached_as_a_blackboard_is_named_by_its_magic() {
        let path = TmpPath::shm("bb-on-offset-file");
        let ck = crate::OffsetCheckpoint::open_or_create(&path, "algo").unwrap();
        ck.save(41);
        let before = std::fs::read(&path).unwrap();
        let Err(e) = BlackboardConsumer::<u64>::attach(&path) else {
            panic!("an offset file attached as a blackboard");
        };
        assert!(matches!(e, Error::BadFileMagic { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!(
                "blackboard {}: bad magic 0x53484d5f4f464653 (the magic of a consumer offset \
                 file)",
                path.display()
            )
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            before,
            "the offset file changed"
        );
        assert_eq!(ck.load(), Some(41));
    }
}
