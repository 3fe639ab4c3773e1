//! `ringwire top <PATH> [--interval-ms N] [--iterations N]` (spec §26).
//!
//! Each frame comes one refresh interval after the counters its rates start from were
//! sampled (the first one too: it waits an interval after the open). Before it, `top`
//! checks that the path still names the mapped file. A producer restart replaces a ring
//! with a fresh inode (spec §27 quirk 20), and the old mapping freezes: `top` then follows
//! the new file, as `tail -F` does, with a line saying so (its rates count from the reopen,
//! one interval before the frame). A file replaced again during that interval is reopened
//! and shown at once, without rates, so that a producer restarting faster than the refresh
//! still gets a frame each refresh or two. A path that stays missing (or names a file that never
//! becomes a valid ring or queue) for [`REOPEN_GRACE`] ends `top` with an error (exit 1):
//! `ring removed`, or why the new file cannot be opened.
//! A ring whose `write_seq` is at or past 2^63 (a corrupt header every producer refuses),
//! or an MPMC ring's at or past its `claim_seq` (which no producer publishes), ends `top`
//! with that error, at the open or at the first frame that reads it: its rates and window
//! would be nonsense. So do a queue's cursors that no run leaves (the checks of
//! `ReadOnlyQueue::open`, run again before each frame's reads).
//!
//! A creator that recreates its ring in place (ringfire's legacy non-exclusive mode, spec
//! §1.2 step 4: the same inode truncated, resized and initialised again) is followed too:
//! the file counts as replaced when its length differs from the mapped length, its header's
//! magic or geometry changed (a queue's kind, capacity, stride, item size or slots offset),
//! or its `write_seq` (a queue's cursors) went back. The file is checked again after a
//! frame's reads, and a frame read from a file recreated after the first check is not
//! shown: it held the new file's counters against the old geometry. The length is checked
//! before the mapping is read; but a file truncated between that check and the frame's
//! reads still makes them fault. The binary's SIGBUS handler (`cli::sigbus`) then ends `top` with
//! `ringwire: PATH shrank while it was mapped (…); stopping` and status 1, where it used
//! to die of the signal without a word; `top` cannot go on following the file after that.
//! Creators that make a fresh inode (every exclusive creator, ringwire's and ringfire's
//! default) are safe to follow.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

use ringwire_core::layout::{RING_MAGIC, oldest_retained};
use ringwire_core::queue::QueueKind;

use super::out_err;
use super::stat::{escape_controls, listed, queue_kind, queued, reader_lag};
use crate::error::{Error, Result};
use crate::file::ReadOnlyRing;
use crate::queue::ReadOnlyQueue;
use crate::sys::{path_id, reader_alive};

/// How long a replaced or removed path may take to name a valid ring or queue again: a
/// restarting producer unlinks the stale file, creates the new one and then sizes and
/// initializes it.
const REOPEN_GRACE: Duration = Duration::from_secs(1);

/// What `top` watches: a ring or a ringwire queue, with the counters of the last refresh.
enum Watched {
    Ring {
        ring: ReadOnlyRing,
        prev: u64,
    },
    Queue {
        q: ReadOnlyQueue,
        kind: QueueKind,
        prev: (u64, u64),
    },
}

/// A file opened by `top`, the (device, inode) of the path when it was opened and the
/// mapped length.
struct Target {
    watched: Watched,
    id: (u64, u64),
    len: u64,
}

fn stat_err(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::io(path, "stat", e)
}

/// Opens the ring or queue at `path`, with the path's (device, inode) before and after the
/// open equal, so that the id is the mapped file's (up to 8 attempts while it changes).
fn open(path: &Path) -> Result<Target> {
    for _ in 0..8 {
        let before = path_id(path).map_err(stat_err(path))?;
        let watched = match queue_kind(path)? {
            Some(kind) => {
                let q = ReadOnlyQueue::open(path, kind)?;
                let s = q.snapshot();
                Watched::Queue {
                    q,
                    kind,
                    prev: (s.enqueue, s.dequeue),
                }
            }
            None => {
                let ring = ReadOnlyRing::open(path)?;
                // A corrupt header is refused at the open, as stat refuses it.
                let prev = ring.checked_write_seq()?;
                Watched::Ring { ring, prev }
            }
        };
        let after = path_id(path).map_err(stat_err(path))?;
        match (before, after) {
            (Some(b), Some(a)) if a == b => {
                let len = match &watched {
                    Watched::Ring { ring, .. } => ring.file_len(),
                    Watched::Queue { q, .. } => q.file_len(),
                };
                return Ok(Target {
                    watched,
                    id: a,
                    len: len as u64,
                });
            }
            // Replaced (or removed) during the open: open what the path names now.
            _ => crate::sys::sleep(Duration::from_millis(1)),
        }
    }
    Err(Error::InvalidArgument {
        path: path.to_path_buf(),
        what: "replaced during each of 8 attempts to open it".into(),
    })
}

/// Whether the path no longer names `t`'s file as it was opened: another file or none, or
/// the mapped file recreated in place (see the module docs): its length, magic or geometry
/// changed, or its counters went back. The length is checked before the mapping is read.
fn is_replaced(path: &Path, t: &Target) -> Result<bool> {
    let m = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(stat_err(path)(e)),
    };
    if (m.dev(), m.ino()) != t.id || m.len() != t.len {
        return Ok(true);
    }
    Ok(match &t.watched {
        Watched::Ring { ring, prev } => {
            let (h, g) = (ring.header(), ring.geometry());
            h.magic != RING_MAGIC
                || h.capacity != g.capacity
                || h.element_size != g.element_size
                || h.slots_offset != g.slots_offset
                || h.reader_registry_offset != g.registry_offset
                || h.reader_registry_count != g.registry_count
                || h.arena_offset != g.arena_offset
                || h.write_seq < *prev
        }
        Watched::Queue { q, kind, prev } => {
            let (h, g) = (q.header(), q.geometry());
            let (enq, deq) = q.cursors();
            h.magic != kind.magic()
                || h.kind != kind.code()
                || h.capacity != g.capacity
                || h.slot_stride != g.slot_stride
                || h.item_size != g.item_size
                || h.slots_offset != g.slots_offset
                || enq < prev.0
                || deq < prev.1
        }
    })
}

/// The file now at `path`, which no longer names the watched one; retried for
/// [`REOPEN_GRACE`] while it is missing or not yet a valid ring or queue. `noun` names the
/// old file ("ring", "queue") in the error when the path stays missing.
fn reopen(path: &Path, noun: &str) -> Result<Target> {
    let t0 = Instant::now();
    loop {
        let err = match open(path) {
            Ok(t) => return Ok(t),
            Err(e) => e,
        };
        if t0.elapsed() >= REOPEN_GRACE {
            return Err(match path_id(path) {
                Ok(None) => Error::InvalidArgument {
                    path: path.to_path_buf(),
                    what: format!("{noun} removed"),
                },
                _ => err,
            });
        }
        crate::sys::sleep(Duration::from_millis(10));
    }
}

pub(super) fn run(
    path: &Path,
    interval_ms: u64,
    iterations: Option<u64>,
    clear: bool,
    out: &mut dyn Write,
) -> Result<()> {
    run_with(path, interval_ms, iterations, clear, out, || {})
}

/// [`run`], calling `before_reads` between each frame's check of the file and its reads
/// (where a test recreates the file in place).
fn run_with(
    path: &Path,
    interval_ms: u64,
    iterations: Option<u64>,
    clear: bool,
    out: &mut dyn Write,
    mut before_reads: impl FnMut(),
) -> Result<()> {
    let mut t = open(path)?;
    let oe = out_err();
    let interval = Duration::from_millis(interval_ms);
    // When the counters were last sampled: `open` just sampled them, and each frame does.
    let mut since = Instant::now();
    let mut n = 0u64;
    let noun = |t: &Target| match t.watched {
        Watched::Ring { .. } => "ring",
        Watched::Queue { .. } => "queue",
    };
    loop {
        if iterations.is_some_and(|max| n >= max) {
            return Ok(());
        }
        // Every frame, the first included, comes one interval after the counters it starts
        // from were sampled, so its rates are over a real interval (ringfire's top waits so
        // too). A file replaced meanwhile is reopened and the wait starts again: the
        // frame's rates then count from the reopen. A file replaced again during that
        // second wait (a producer restarting faster than the refresh) is reopened and shown
        // at once without rates: waiting for a quiet interval could print nothing for as
        // long as the restarts go on.
        let mut replaced = 0;
        let frame = loop {
            while replaced < 2 {
                crate::sys::sleep(interval);
                if !is_replaced(path, &t)? {
                    break;
                }
                t = reopen(path, noun(&t))?;
                since = Instant::now();
                replaced += 1;
            }
            before_reads();
            let now = Instant::now();
            // No rates when the counters were sampled just now, by the second reopen.
            let dt = (replaced < 2).then(|| now.duration_since(since).as_secs_f64().max(1e-9));
            let mut frame = Vec::new();
            // A write_seq that became corrupt (one every producer refuses, or an MPMC ring's
            // past its claim_seq), or queue cursors that did (ones the open refuses), end top
            // with the error, as at the open: its rates and window would be nonsense.
            let corrupt = match &mut t.watched {
                Watched::Ring { ring, prev } => match ring.checked_write_seq() {
                    Ok(w) => ring_frame(ring, w, prev, &mut frame, dt).map(|()| None),
                    Err(e) => Ok(Some(e)),
                },
                Watched::Queue { q, kind, prev } => match q.check_cursors() {
                    Ok(()) => queue_frame(q, *kind, prev, &mut frame, dt).map(|()| None),
                    Err(e) => Ok(Some(e)),
                },
            }
            .map_err(&oe)?;
            // A file recreated in place after the check above was read with the geometry
            // it had before: its counters against the old capacity ("queued 3/1024" of a
            // queue of 4). Such a frame is not shown; the new file is opened, as above.
            if !is_replaced(path, &t)? {
                if let Some(e) = corrupt {
                    return Err(e);
                }
                since = now;
                break frame;
            }
            t = reopen(path, noun(&t))?;
            since = Instant::now();
            replaced += 1;
        };
        n += 1;
        if clear {
            // Clear the screen and home the cursor.
            write!(out, "\x1b[2J\x1b[H").map_err(&oe)?;
        }
        writeln!(
            out,
            "ringwire top {}  (refresh {interval_ms} ms)",
            crate::shown::path(path)
        )
        .map_err(&oe)?;
        match replaced {
            0 => {}
            1 => writeln!(
                out,
                "  (the file was replaced: now showing the new one; rates count from its opening)"
            )
            .map_err(&oe)?,
            _ => writeln!(
                out,
                "  (the file was replaced again during the refresh: now showing the newest one; \
                 no rates until it stays for an interval)"
            )
            .map_err(&oe)?,
        }
        out.write_all(&frame).map_err(&oe)?;
        out.flush().map_err(&oe)?;
    }
}

/// `w` (the ring's write_seq, below 2^63), rates, window, sleepers and readers of a ring.
fn ring_frame(
    ring: &ReadOnlyRing,
    w: u64,
    prev: &mut u64,
    out: &mut dyn Write,
    dt: Option<f64>,
) -> std::io::Result<()> {
    let g = *ring.geometry();
    let rates = match dt {
        Some(dt) => {
            let rate = w.saturating_sub(*prev) as f64 / dt;
            let mbps = rate * f64::from(g.element_size) / 1e6;
            format!("msg/s {rate:.0}  MB/s {mbps:.2}")
        }
        None => "msg/s -  MB/s -".to_string(),
    };
    *prev = w;
    let window = if w == 0 {
        "empty".to_string()
    } else {
        format!("[{}, {w}]", oldest_retained(w, g.capacity))
    };
    let (sleeping, _) = ring.futex_state();
    writeln!(
        out,
        "write_seq {w}  {rates}  window {window}  sleeping {sleeping}"
    )?;
    // Up to the first slot the view does not have (at once without a registry, whose
    // header count a corrupt or hand-made file may still set to 2^32 - 1), as `stat`.
    for i in 0..g.registry_count {
        let Some(e) = ring.registry_entry(i) else {
            break;
        };
        // The slots stat lists, by the same rule.
        if let Some(how) = listed(&e) {
            let lag = reader_lag(w, e.cursor);
            writeln!(
                out,
                "  reader {i} pid {} ({}) {} cursor {} lag {lag}{}",
                e.pid,
                if reader_alive(e.pid, e.token) {
                    "alive"
                } else {
                    "dead"
                },
                escape_controls(&e.name_str()),
                e.cursor,
                how.note()
            )?;
        }
    }
    Ok(())
}

/// `top` of a ringwire queue: items in and out per second, items queued, sleepers.
fn queue_frame(
    q: &ReadOnlyQueue,
    kind: QueueKind,
    prev: &mut (u64, u64),
    out: &mut dyn Write,
    dt: Option<f64>,
) -> std::io::Result<()> {
    let s = q.snapshot();
    let cap = s.geometry.capacity;
    let rates = match dt {
        Some(dt) => {
            let rate_in = s.enqueue.saturating_sub(prev.0) as f64 / dt;
            let rate_out = s.dequeue.saturating_sub(prev.1) as f64 / dt;
            format!("in/s {rate_in:.0}  out/s {rate_out:.0}")
        }
        None => "in/s -  out/s -".to_string(),
    };
    *prev = (s.enqueue, s.dequeue);
    writeln!(
        out,
        "{} queue  {rates}  queued {}/{cap}  sleeping consumers {} producers {}",
        kind.name(),
        queued(&s),
        s.data_waiters,
        s.space_waiters
    )?;
    if let Some(pos) = s.claimed_unpublished {
        writeln!(
            out,
            "  position {pos} claimed, not published (a push in flight, or a producer that died mid-push)"
        )?;
    }
    if let Some(pos) = s.taken_unfreed {
        writeln!(
            out,
            "  position {pos} popped, slot not freed (a pop in flight, or a consumer that died mid-pop)"
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::SpscProducer;
    use crate::test_tmp::TmpPath;

    /// The bytes of an SPSC queue of `capacity` u64 items holding `items`, made by the queue
    /// API at `aside` (its producer gone, the file removed).
    fn queue_image(aside: &Path, capacity: u64, items: u64) -> Vec<u8> {
        let mut q = SpscProducer::<u64>::create(aside, capacity).unwrap();
        for i in 0..items {
            q.try_push(&i).unwrap();
        }
        let bytes = std::fs::read(aside).unwrap();
        drop(q);
        std::fs::remove_file(aside).unwrap();
        bytes
    }

    /// A ring whose `write_seq` jumps to 2^63 or past (a corrupt header every producer
    /// refuses) while top runs: top printed a frame of it, "msg/s 9223372036854775808…"
    /// and a window of records that are not there, and went on. It now ends with the
    /// producer's refusal naming the value, as at the open, after the sound frame only.
    #[test]
    fn a_write_seq_jumping_past_the_limit_ends_top_with_the_error() {
        use crate::file::{CleanupMode, CreateOptions, RingFile};
        use ringwire_core::layout::SEQ_LIMIT;
        use ringwire_core::{AttachError, Geometry};
        let path = TmpPath::shm("top-write-seq-jump");
        let opts = CreateOptions {
            cleanup: CleanupMode::Persistent,
            ..CreateOptions::default()
        };
        let r = RingFile::create(
            path.path(),
            &Geometry::spmc(8, 16, 8, 0, false).unwrap(),
            &opts,
        )
        .unwrap();
        // SAFETY: the view is used while `r` keeps the mapping.
        let v = unsafe { r.view() };
        for s in 1..=3u64 {
            v.write_slot(s, &s.to_le_bytes());
            v.publish(s);
        }
        let bad = SEQ_LIMIT + 5;
        let mut out = Vec::new();
        let mut reads = 0;
        let e = run_with(path.path(), 1, Some(3), false, &mut out, || {
            reads += 1;
            if reads == 2 {
                v.write_seq()
                    .store(bad, ringwire_core::sync::Ordering::SeqCst);
            }
        })
        .unwrap_err();
        let out = String::from_utf8(out).unwrap();
        assert_eq!(
            e.attach_error(),
            Some(AttachError::WriteSeqExhausted { write_seq: bad }),
            "{e}\n{out}"
        );
        let frames: Vec<&str> = out.lines().filter(|l| l.starts_with("write_seq")).collect();
        assert_eq!(frames.len(), 1, "{out}");
        assert!(frames[0].starts_with("write_seq 3 "), "{out}");
    }

    /// A registry slot whose `active` word is neither 0 nor 1 (nothing writes that: a corrupt
    /// slot) was listed by `stat`, which lists `pid != 0 && active != 0` as ringfire's does
    /// (spec §26), and left out by `top`, which counted live readers (`active == 1`, spec
    /// §9): the two disagreed on the readers of one ring. Both now list it by one rule, with
    /// its word and that producers do not count it; the live reader has no such note.
    #[test]
    fn stat_and_top_list_a_slot_with_a_corrupt_active_word_alike() {
        use crate::file::{CleanupMode, CreateOptions, RingFile};
        use ringwire_core::Geometry;
        use ringwire_core::layout::reg;
        use ringwire_core::sync::Ordering::SeqCst;
        let path = TmpPath::shm("top-stat-corrupt-active");
        let opts = CreateOptions {
            cleanup: CleanupMode::Persistent,
            ..CreateOptions::default()
        };
        let r = RingFile::create(
            path.path(),
            &Geometry::spmc(8, 16, 8, 3, false).unwrap(),
            &opts,
        )
        .unwrap();
        // SAFETY: the view is used while `r` keeps the mapping.
        let v = unsafe { r.view() };
        let me = std::process::id();
        // Slot 0 a live reader, slot 1 a corrupt active word, slot 2 a pid left with
        // active 0 (an unregistering reader): not listed.
        for (slot, active) in [(0, 1), (1, 7), (2, 0)] {
            v.registry_a32(slot, reg::PID).unwrap().store(me, SeqCst);
            v.registry_a32(slot, reg::ACTIVE)
                .unwrap()
                .store(active, SeqCst);
        }
        let note = "(active word 7, not 1: a corrupt slot, which producers do not count)";
        let mut stat_out = Vec::new();
        super::super::stat::run(path.path(), false, &mut stat_out).unwrap();
        let stat_out = String::from_utf8(stat_out).unwrap();
        let stat_lines: Vec<&str> = stat_out
            .lines()
            .filter(|l| l.starts_with("  slot "))
            .collect();
        let mut top_out = Vec::new();
        run(path.path(), 1, Some(1), false, &mut top_out).unwrap();
        let top_out = String::from_utf8(top_out).unwrap();
        let top_lines: Vec<&str> = top_out
            .lines()
            .filter(|l| l.starts_with("  reader "))
            .collect();
        for (what, lines, out) in [
            ("stat", &stat_lines, &stat_out),
            ("top", &top_lines, &top_out),
        ] {
            assert_eq!(lines.len(), 2, "{what}:\n{out}");
            assert!(!lines[0].contains("active word"), "{what}:\n{out}");
            assert!(lines[1].ends_with(note), "{what}:\n{out}");
        }
        assert!(
            stat_lines[1].starts_with(&format!("  slot 1 pid {me} ")),
            "{stat_out}"
        );
        assert!(
            top_lines[1].starts_with(&format!("  reader 1 pid {me} ")),
            "{top_out}"
        );
        // The JSON lists the same slots, with their word.
        let j = super::super::stat::stat_json(path.path()).unwrap();
        let listed: Vec<(u64, u64)> = j["readers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["slot"].as_u64().unwrap(), r["active"].as_u64().unwrap()))
            .collect();
        assert_eq!(listed, [(0, 1), (1, 7)], "{j}");
    }

    /// A queue recreated in place (the same inode truncated and written again with another
    /// capacity, as ringfire's legacy creator does) after a frame's check and before its
    /// reads: that frame showed the new file's items against the old capacity, "queued
    /// 3/1024". It is not shown; the new file's is, with the line that says it was replaced.
    #[test]
    fn a_queue_recreated_in_place_before_the_reads_is_not_shown_with_the_old_capacity() {
        use std::io::Write as _;
        let path = TmpPath::shm("top-in-place");
        let aside = TmpPath::shm("top-in-place-aside");
        std::fs::write(path.path(), queue_image(aside.path(), 1024, 0)).unwrap();
        let new = queue_image(aside.path(), 4, 3);
        let mut out = Vec::new();
        let mut reads = 0;
        run_with(path.path(), 1, Some(2), false, &mut out, || {
            reads += 1;
            if reads == 1 {
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .truncate(true)
                    .open(path.path())
                    .unwrap();
                f.write_all(&new).unwrap();
            }
        })
        .unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(!out.contains("queued 3/1024"), "stale capacity:\n{out}");
        let frames: Vec<&str> = out.lines().filter(|l| l.contains(" queued ")).collect();
        assert_eq!(frames.len(), 2, "{out}");
        assert!(frames.iter().all(|l| l.contains("queued 3/4 ")), "{out}");
        assert!(
            out.contains("the file was replaced: now showing the new one"),
            "{out}"
        );
    }
}
