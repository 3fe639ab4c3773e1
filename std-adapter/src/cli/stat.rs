//! `ringwire stat <PATH> [--json]` (spec §26).

use std::borrow::Cow;
use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::path::Path;

use ringwire_core::blackboard::BLACKBOARD_MAGIC;
use ringwire_core::layout::{Flags, RING_MAGIC, oldest_retained};
use ringwire_core::queue::QueueKind;
use ringwire_core::queue::compat::{LossyMpmcConsumer, scan_slots};
use serde_json::{Value, json};

use super::out_err;
use crate::error::{Error, Result};
use crate::file::{ReadOnlyRing, RegistryEntry, open_regular};
use crate::queue::{QueueSnapshot, ReadOnlyQueue};
use crate::sys::reader_alive;

/// The largest slot area (capacity × stride) whose MPMC slots `stat` scans for the write
/// marker and for sequences past `claim_seq` (one scan for both): the whole `ringwire stat`
/// of a 256 MiB ring (2^22 slots of 64 bytes) in `/dev/shm` took 50–60 ms on this project's
/// VM with one scan, and maps every page it reads.
const MID_WRITE_SCAN_MAX_BYTES: u64 = 256 << 20;

pub(super) fn first_128(path: &Path) -> Result<(u64, [u8; 128])> {
    let mut f = open_regular(path, OpenOptions::new().read(true))?;
    let len = f.metadata().map_err(|e| Error::io(path, "fstat", e))?.len();
    let mut h = [0u8; 128];
    if len < 128 {
        // A queue's magic names the queue, whose header is longer still.
        let mut m = [0u8; 8];
        if f.read_exact(&mut m).is_ok() && QueueKind::from_magic(u64::from_ne_bytes(m)).is_some() {
            return Err(Error::QueueAttach {
                path: path.to_path_buf(),
                source: ringwire_core::queue::QueueAttachError::TooShort { len },
            });
        }
        // A consumer's offset file is named as such; anything else is a short ring.
        return Err(crate::file::short_ring(path, &f, len));
    }
    f.read_exact(&mut h)
        .map_err(|e| Error::io(path, "read", e))?;
    Ok((len, h))
}

/// The queue kind of the file at `path` if its magic is a ringwire queue's; `None` for
/// anything else (a ring, or a file too short to say), which the caller's own open reports.
pub(super) fn queue_kind(path: &Path) -> Result<Option<QueueKind>> {
    let mut f = open_regular(path, OpenOptions::new().read(true))?;
    let mut m = [0u8; 8];
    Ok(match f.read_exact(&mut m) {
        // File magics are stored in the host's byte order, as every header word is.
        Ok(()) => QueueKind::from_magic(u64::from_ne_bytes(m)),
        Err(_) => None,
    })
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// ringfire's `stat --json` names a blackboard's type so; its ring JSON has no `type`
/// (ours says "ring") and it has no queue files (ours say "queue").
const BLACKBOARD_TYPE: &str = "Blackboard";

fn blackboard_json(path: &Path, len: u64, h: &[u8; 128]) -> Value {
    json!({
        "type": BLACKBOARD_TYPE,
        "path": path.display().to_string(),
        "file_size": len,
        "version": le32(h, 8),
        "value_size": le32(h, 12),
        "slot_size": le32(h, 16),
        "slot_count": le32(h, 20),
    })
}

fn queue_json(path: &Path, len: u64, kind: QueueKind) -> Result<Value> {
    let q = ReadOnlyQueue::open(path, kind)?;
    // An MPMC queue no process has open is judged slot by slot as the next open judges it
    // (as heal judges it): a stamp its cursors rule out makes every open refuse the file.
    // One load per slot, so a large queue is not scanned (as a large MPMC ring's slots).
    let g = *q.geometry();
    if kind == QueueKind::Mpmc
        && g.capacity.saturating_mul(u64::from(g.slot_stride)) <= MID_WRITE_SCAN_MAX_BYTES
        && !super::heal::open_elsewhere(path, &q)?
    {
        super::heal::refuse_stamps_at_rest(path, &q)?;
    }
    let q = q.snapshot();
    let g = q.geometry;
    let queued = queued(&q);
    Ok(json!({
        "type": "queue",
        "path": path.display().to_string(),
        "file_size": len,
        "kind": kind.name(),
        "fixed_items": g.fixed,
        "capacity": g.capacity,
        "item_size": g.item_size,
        "slot_stride": g.slot_stride,
        "schema_sig": format!("0x{:016X}", q.schema_sig),
        "enqueue": q.enqueue,
        "dequeue": q.dequeue,
        "queued": queued,
        "utilization_pct": ((queued as f64 / g.capacity as f64) * 10_000.0).round() / 100.0,
        "claimed_unpublished": q.claimed_unpublished,
        "taken_unfreed": q.taken_unfreed,
        "data_waiters": q.data_waiters,
        "data_futex": q.data_futex,
        "space_waiters": q.space_waiters,
        "space_futex": q.space_futex,
    }))
}

/// Items in the queue of snapshot `q` (a validated one). An SPSC queue's cursors count
/// modulo 2^64, as its handles count them (a queue whose enqueue cursor wrapped past 2^64
/// before its dequeue cursor holds `enqueue - dequeue` wrapped, not 0); an MPMC queue's stay
/// below 2^61, the dequeue cursor loaded first at most the enqueue cursor.
pub(super) fn queued(q: &QueueSnapshot) -> u64 {
    match q.geometry.kind {
        QueueKind::Spsc => q.enqueue.wrapping_sub(q.dequeue),
        QueueKind::Mpmc => q.enqueue.saturating_sub(q.dequeue),
    }
}

/// The `stat --json` object of the ring (or blackboard, or ringwire queue) at `path`. A
/// corrupt ring is an error naming the value: a `write_seq` every producer refuses
/// ([`Error::Attach`] with
/// [`AttachError::WriteSeqExhausted`](ringwire_core::AttachError::WriteSeqExhausted)), an
/// MPMC ring's `write_seq` at or past its `claim_seq`, which no producer publishes
/// ([`AttachError::WriteSeqPastClaimSeq`](ringwire_core::AttachError::WriteSeqPastClaimSeq)), an
/// MPMC ring whose header every consumer refuses at attach ([`Error::Attach`] with
/// [`AttachError::ReadSeqPastClaimSeq`](ringwire_core::AttachError::ReadSeqPastClaimSeq),
/// [`AttachError::ClaimSeqExhausted`](ringwire_core::AttachError::ClaimSeqExhausted)), or
/// one with a slot holding a sequence at or past `claim_seq` ([`Error::CorruptSlots`]; the
/// slots are checked, as `mid_write_slots` are counted, in a slot area of up to 256 MiB).
///
/// `path` is the path as text, each byte that is not UTF-8 replaced by U+FFFD; a path that is
/// not UTF-8 also has `path_bytes`, its bytes as an array of numbers, which name the file
/// exactly (`bytes(v["path_bytes"])` in Python, `os.fsdecode` for a `str`).
pub fn stat_json(path: &Path) -> Result<Value> {
    let mut v = file_json(path)?;
    if let (None, Some(map)) = (path.to_str(), v.as_object_mut()) {
        use std::os::unix::ffi::OsStrExt;
        map.insert("path_bytes".into(), json!(path.as_os_str().as_bytes()));
    }
    Ok(v)
}

/// [`stat_json`] but for `path_bytes`.
fn file_json(path: &Path) -> Result<Value> {
    let (len, h) = first_128(path)?;
    // In the host's byte order, as the writers store it.
    let magic = u64::from_ne_bytes(h[0..8].try_into().unwrap_or([0; 8]));
    if magic == BLACKBOARD_MAGIC {
        crate::blackboard::check_file(path)?;
        return Ok(blackboard_json(path, len, &h));
    }
    if let Some(kind) = QueueKind::from_magic(magic) {
        return queue_json(path, len, kind);
    }
    if magic != RING_MAGIC {
        return Err(Error::attach(
            path,
            ringwire_core::AttachError::BadMagic { found: magic },
        ));
    }
    let ring = ReadOnlyRing::open(path)?;
    let g = *ring.geometry();
    // A write_seq every producer refuses, or an MPMC ring's past its claim_seq, is a
    // corrupt header: no window can be shown.
    let w = ring.checked_write_seq()?;
    // One load per slot touches every page of the slot area: a large ring is not scanned.
    let scan = g.capacity.saturating_mul(u64::from(g.element_size)) <= MID_WRITE_SCAN_MAX_BYTES;
    let mut slots = None;
    if g.flags.has(Flags::MODE_MPMC) {
        // A header every consumer refuses at attach is corrupt: stat says so with the
        // consumer's own check (it only loads), as it refuses a queue's corrupt cursors.
        LossyMpmcConsumer::new(*ring.ring()).map_err(|e| Error::attach(path, e))?;
        // Then the slots against that claim_seq: one past it is corrupt, as heal says.
        slots = scan.then(|| scan_slots(ring.ring())).flatten();
        if let Some(source) = slots.and_then(|s| s.past_claim) {
            return Err(Error::CorruptSlots {
                path: path.to_path_buf(),
                source,
            });
        }
    }
    let hd = ring.header();
    let (oldest, active) = if w == 0 {
        (0, 0)
    } else {
        let o = oldest_retained(w, g.capacity);
        (o, w - o + 1)
    };
    let flags = Flags(hd.flags);
    let mode = if flags.has(Flags::MODE_MPMC) {
        "MPMC"
    } else if flags.has(Flags::MODE_SPMC) {
        "SPMC"
    } else {
        "UNKNOWN"
    };
    let flow = if flags.has(Flags::POLICY_LOSSLESS_BACKPRESSURE) {
        "LosslessBackpressure"
    } else {
        "LossyLatestWins"
    };
    let (waiting, futex) = ring.futex_state();
    let util = (active as f64 / g.capacity as f64) * 100.0;
    // `type` is ringwire's (ringfire's ring JSON has none; its other keys are ringfire's).
    let mut o = json!({
        "type": "ring",
        "path": path.display().to_string(),
        "file_size": len,
        "magic": format!("0x{:016X}", hd.magic),
        "version": hd.version,
        "mode": mode,
        "flow_control": flow,
        "capacity": g.capacity,
        "element_size": g.element_size,
        "write_seq": w,
        "claim_seq": hd.claim_seq,
        "read_seq": hd.read_seq,
        "oldest_seq": oldest,
        "utilization_pct": (util * 100.0).round() / 100.0,
        "waiting_consumers": waiting,
        "futex_word": futex,
        "has_arena": flags.has(Flags::WITH_ARENA),
        "has_registry": flags.has(Flags::WITH_REGISTRY),
    });
    if let (true, Some(map)) = (flags.has(Flags::MODE_MPMC), o.as_object_mut()) {
        // Slots whose word is the write marker: a push in flight, or a producer that died
        // while copying (every push landing there then drops its message); null unscanned.
        map.insert("mid_write_slots".into(), json!(slots.map(|s| s.mid_write)));
    }
    if let (true, Some(map)) = (flags.has(Flags::WITH_ARENA), o.as_object_mut()) {
        // Both keys whenever the flag is set (spec §26), as ringfire: 0 and 0 when the
        // header has no arena (offset 0); none without the flag, even with an arena.
        let (capacity, reserved) = ring.arena_reserved().map_or((0, 0), |r| (g.arena_size, r));
        map.insert("arena_capacity".into(), json!(capacity));
        map.insert("arena_reserved".into(), json!(reserved));
    }
    let mut readers = Vec::new();
    for i in 0..g.registry_count {
        let Some(e) = ring.registry_entry(i) else {
            break;
        };
        if listed(&e).is_some() {
            let lag = reader_lag(w, e.cursor);
            // `active` is ringwire's (ringfire's readers have the other keys): 1 for a live
            // reader, any other word a corrupt slot (see `listed`).
            readers.push(json!({
                "slot": i, "pid": e.pid, "name": e.name_str(), "cursor": e.cursor,
                "lag": lag, "alive": reader_alive(e.pid, e.token), "active": e.active,
            }));
        }
    }
    if let Some(map) = o.as_object_mut() {
        map.insert("readers".into(), Value::Array(readers));
    }
    Ok(o)
}

/// A registry slot as `stat` and `top` list it: one rule for both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Listed {
    /// `pid != 0 && active == 1`: a live reader (spec §9), which producers count.
    Live,
    /// `pid != 0` with an `active` word neither 0 nor 1, which no reader or producer writes
    /// (a corrupt slot). Listed, as ringfire's `stat` lists `pid != 0 && active != 0` (spec
    /// §26), with the word and the note that producers do not count it (they count
    /// `active == 1` only, spec §9).
    CorruptActive(u32),
}

/// How `stat` and `top` list registry slot `e`; `None` for a slot they leave out (free, or
/// a pid with `active` 0: a reader registering or leaving).
pub(super) fn listed(e: &RegistryEntry) -> Option<Listed> {
    match (e.pid, e.active) {
        (0, _) | (_, 0) => None,
        (_, 1) => Some(Listed::Live),
        (_, word) => Some(Listed::CorruptActive(word)),
    }
}

impl Listed {
    /// What a text line adds after the reader's fields: nothing for a live reader.
    pub(super) fn note(self) -> String {
        match self {
            Listed::Live => String::new(),
            Listed::CorruptActive(word) => format!(
                " (active word {word}, not 1: a corrupt slot, which producers do not count)"
            ),
        }
    }
}

/// `s` with its control characters escaped (`\n`, `\u{1b}`, ...), so that a reader's name
/// read from a ring cannot break a line or send escape sequences to a terminal.
pub(super) fn escape_controls(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// A reader's lag as ringfire's `stat` and `top` compute it: the records from its cursor
/// (the next sequence it reads; 0 before its first, counted as 1) to `write_seq`, 0 for a
/// cursor past it. Saturating: no overflow at `write_seq` u64::MAX.
pub(super) fn reader_lag(write_seq: u64, cursor: u64) -> u64 {
    write_seq.saturating_sub(cursor.saturating_sub(1))
}

/// A JSON value as text: a string without its quotes (control characters escaped, see
/// [`escape_controls`]), anything else as JSON.
fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => escape_controls(s).into_owned(),
        other => other.to_string(),
    }
}

/// A title line, then `  key value` for each key, keys padded to `w` columns.
fn fields(
    out: &mut dyn Write,
    v: &Value,
    title: &str,
    keys: &[&str],
    w: usize,
) -> std::io::Result<()> {
    writeln!(out, "{title}")?;
    for k in keys {
        writeln!(out, "  {k:<w$} {}", plain(&v[*k]))?;
    }
    Ok(())
}

pub(super) fn run(path: &Path, json: bool, out: &mut dyn Write) -> Result<()> {
    let v = stat_json(path)?;
    let oe = out_err();
    if json {
        let s = serde_json::to_string_pretty(&v).map_err(|e| Error::io(path, "json", e.into()))?;
        return writeln!(out, "{s}").map_err(oe);
    }
    let p = crate::shown::path(path);
    if v["type"] == BLACKBOARD_TYPE {
        let keys = [
            "file_size",
            "version",
            "slot_count",
            "value_size",
            "slot_size",
        ];
        return fields(out, &v, &format!("Blackboard {p}"), &keys, 18).map_err(&oe);
    }
    if v["type"] == "queue" {
        let keys = [
            "file_size",
            "kind",
            "fixed_items",
            "capacity",
            "item_size",
            "slot_stride",
            "schema_sig",
        ];
        fields(out, &v, &format!("Queue {p}"), &keys, 19).map_err(&oe)?;
        let keys = ["enqueue", "dequeue", "queued", "utilization_pct"];
        fields(out, &v, "Cursors", &keys, 19).map_err(&oe)?;
        if !v["claimed_unpublished"].is_null() {
            writeln!(
                out,
                "  claimed_unpublished {} (a push in flight, or a producer that died mid-push)",
                v["claimed_unpublished"]
            )
            .map_err(&oe)?;
        }
        if !v["taken_unfreed"].is_null() {
            writeln!(
                out,
                "  taken_unfreed       {} (a pop in flight, or a consumer that died mid-pop)",
                v["taken_unfreed"]
            )
            .map_err(&oe)?;
        }
        let keys = ["data_waiters", "data_futex", "space_waiters", "space_futex"];
        return fields(out, &v, "Futex", &keys, 19).map_err(&oe);
    }
    let keys = [
        "file_size",
        "magic",
        "version",
        "mode",
        "flow_control",
        "capacity",
        "element_size",
    ];
    fields(out, &v, &format!("Ring {p}"), &keys, 18).map_err(&oe)?;
    let keys = [
        "write_seq",
        "claim_seq",
        "read_seq",
        "oldest_seq",
        "utilization_pct",
    ];
    fields(out, &v, "Sequences", &keys, 18).map_err(&oe)?;
    match &v["mid_write_slots"] {
        Value::Null if v["mode"] == "MPMC" => writeln!(
            out,
            "  mid_write_slots    not counted (slot area over {} MiB)",
            MID_WRITE_SCAN_MAX_BYTES >> 20
        )
        .map_err(&oe)?,
        Value::Null => {}
        n => writeln!(
            out,
            "  mid_write_slots    {n} (a push in flight, or a producer that died mid-write)"
        )
        .map_err(&oe)?,
    }
    fields(out, &v, "Futex", &["waiting_consumers", "futex_word"], 18).map_err(&oe)?;
    if v["has_arena"] == true {
        writeln!(
            out,
            "Arena\n  capacity           {}\n  reserved           {}",
            v["arena_capacity"], v["arena_reserved"]
        )
        .map_err(&oe)?;
    }
    match v["readers"].as_array() {
        Some(rs) if !rs.is_empty() => {
            writeln!(out, "Readers").map_err(&oe)?;
            for r in rs {
                let note = match r["active"].as_u64() {
                    Some(word) if word != 1 => {
                        Listed::CorruptActive(u32::try_from(word).unwrap_or(u32::MAX)).note()
                    }
                    _ => String::new(),
                };
                writeln!(
                    out,
                    "  slot {} pid {} {} name {} cursor {} lag {}{note}",
                    r["slot"],
                    r["pid"],
                    if r["alive"] == true { "alive" } else { "dead" },
                    plain(&r["name"]),
                    r["cursor"],
                    r["lag"]
                )
                .map_err(&oe)?;
            }
        }
        _ if v["has_registry"] == true => writeln!(out, "Readers: none").map_err(&oe)?,
        _ => writeln!(out, "Readers: no registry").map_err(&oe)?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use ringwire_core::queue::QueueAttachError;

    use super::{reader_lag, stat_json};
    use crate::Error;
    use crate::queue::MpmcQueue;

    /// `stat` and `heal` of a queue file cut below 128 bytes (a ring's header) but holding
    /// a queue's magic name it a queue too short for its 384-byte header. They read the
    /// first 128 bytes before looking at the magic, and said "ring …: file is 100 bytes,
    /// shorter than the 128-byte ring header".
    #[test]
    fn a_queue_file_cut_below_a_rings_header_is_a_short_queue() {
        let path = crate::test_tmp::TmpPath::shm("stat-queue-cut");
        drop(MpmcQueue::<u64>::create(&path, 16).unwrap());
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(100).unwrap();
        let heal = |p| super::super::heal::run(p, false, &mut Vec::new());
        for (what, e) in [
            ("stat", stat_json(&path).unwrap_err()),
            ("heal", heal(&path).unwrap_err()),
        ] {
            assert!(
                matches!(
                    e,
                    Error::QueueAttach {
                        source: QueueAttachError::TooShort { len: 100 },
                        ..
                    }
                ),
                "{what}: {e:?}"
            );
        }
        // Anything else that short is still a short ring, the CLI's default.
        f.set_len(0).unwrap();
        let e = stat_json(&path).unwrap_err();
        assert!(e.to_string().contains("128-byte ring header"), "{e}");
    }

    /// `stat --json` of a file whose name is not UTF-8 gave only a lossy "path" (U+FFFD for
    /// each stray byte), which names a file that does not exist. The JSON now also carries
    /// the name's bytes as `path_bytes`, from which the exact path is rebuilt; a UTF-8 path
    /// has no such key. Ring and queue files alike.
    #[test]
    fn json_of_a_path_that_is_not_utf8_carries_its_bytes() {
        use std::ffi::OsStr;
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::fs::MetadataExt;

        use crate::file::{CleanupMode, CreateOptions, RingFile};
        use ringwire_core::Geometry;

        let dir = crate::test_tmp::TmpPath::shm("stat-json-non-utf8");
        std::fs::create_dir(&dir).unwrap();
        let ring = dir.join(OsStr::from_bytes(b"ring-\xff\xfe-x"));
        let opts = CreateOptions {
            cleanup: CleanupMode::Persistent,
            ..CreateOptions::default()
        };
        let r =
            RingFile::create(&ring, &Geometry::spmc(8, 16, 8, 0, false).unwrap(), &opts).unwrap();
        let queue = dir.join(OsStr::from_bytes(b"queue-\x80"));
        let q = MpmcQueue::<u64>::create(&queue, 16).unwrap();
        for path in [&ring, &queue] {
            let v = stat_json(path).unwrap();
            let lossy = v["path"].as_str().expect("path is still a string");
            assert!(lossy.contains('\u{fffd}'), "{v}");
            let bytes: Vec<u8> = v["path_bytes"]
                .as_array()
                .unwrap_or_else(|| panic!("no path_bytes: {v}"))
                .iter()
                .map(|b| u8::try_from(b.as_u64().unwrap()).unwrap())
                .collect();
            assert_eq!(bytes, path.as_os_str().as_bytes(), "{v}");
            // The bytes name the very file stat read.
            let rebuilt = std::path::Path::new(OsStr::from_bytes(&bytes));
            let (a, b) = (
                std::fs::metadata(rebuilt).unwrap(),
                std::fs::metadata(path).unwrap(),
            );
            assert_eq!((a.dev(), a.ino()), (b.dev(), b.ino()));
        }
        let plain = dir.join("ring-plain");
        std::fs::copy(&ring, &plain).unwrap();
        let v = stat_json(&plain).unwrap();
        assert_eq!(v["path"], plain.to_str().unwrap(), "{v}");
        assert!(v.get("path_bytes").is_none(), "{v}");
        drop((r, q));
    }

    #[test]
    fn reader_lag_is_ringfires() {
        // (write_seq, cursor, ringfire's write_seq.saturating_sub(cursor.saturating_sub(1)))
        for (w, cursor, lag) in [
            (40, 0, 40),
            (40, 1, 40),
            (40, 40, 1),
            (40, 41, 0),
            (40, 50, 0),
            (0, 0, 0),
            (0, 1, 0),
            (u64::MAX, 0, u64::MAX),
            (u64::MAX, u64::MAX, 1),
        ] {
            assert_eq!(reader_lag(w, cursor), lag, "write_seq {w} cursor {cursor}");
        }
    }
}
