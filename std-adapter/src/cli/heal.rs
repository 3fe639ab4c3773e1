//! `ringwire heal <PATH> [--producers-dead]`: heals the stuck slots that `stat` reports, in a
//! ringwire MPMC queue file (`claimed_unpublished`, `taken_unfreed`) or a lossy MPMC ring
//! (`mid_write_slots`), when their holders are known dead. A corrupt file it finds (a queue
//! at rest with a stamp its cursors rule out, a lossy ring whose header its consumers
//! refuse at attach, whose `write_seq` is at or past `claim_seq`, or with a slot at or past
//! `claim_seq`) is reported, exit 1, and not healed.

use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ringwire_core::blackboard::BLACKBOARD_MAGIC;
use ringwire_core::layout::{Flags, RING_MAGIC};
use ringwire_core::queue::compat::{
    LossyMpmcConsumer, LossyMpmcProducer, TAKEOVER_NS, slots_past_claim,
};
use ringwire_core::queue::{QueueExpect, QueueKind, StuckSlot};
use ringwire_core::sync::Ordering;
use ringwire_core::{AttachError, Expect, RingView};

use super::out_err;
use super::stat::first_128;
use crate::error::{Error, Result};
use crate::file::{ReadOnlyRing, RingFile};
use crate::queue::{AtOpen, QueueFileError, QueueMem, ReadOnlyQueue};

/// How long a slot must stay stuck, between two scans, to be reported as stuck rather than
/// in use: twice the lossy ring's takeover deadline, far longer than any push or pop copy.
const SETTLE: Duration = Duration::from_nanos(2 * TAKEOVER_NS);

pub(super) fn run(path: &Path, producers_dead: bool, out: &mut dyn Write) -> Result<()> {
    let (_, h) = first_128(path)?;
    // In the host's byte order, as the writers store it.
    let magic = u64::from_ne_bytes(h[0..8].try_into().unwrap_or([0; 8]));
    let oe = out_err();
    let p = crate::shown::path(path);
    if let Some(kind) = QueueKind::from_magic(magic) {
        if producers_dead {
            return Err(flag_misplaced(
                path,
                "a queue file, healed when no other process has it open",
            ));
        }
        return heal_queue(path, kind, out);
    }
    if magic == BLACKBOARD_MAGIC {
        if producers_dead {
            return Err(flag_misplaced(path, "a blackboard"));
        }
        crate::blackboard::check_file(path)?;
        let stalled = crate::blackboard::stalled_keys(path, SETTLE)?;
        let Some(first) = stalled.first() else {
            return writeln!(
                out,
                "{p}: no blackboard key left mid-write; nothing to heal"
            )
            .map_err(oe);
        };
        // A key's seqlock belongs to its single writer: nothing else may store it, so
        // heal reports the key and leaves it to that writer's next write.
        return Err(Error::NotHealed {
            path: path.to_path_buf(),
            what: format!(
                "{} blackboard key(s) left mid-write for over {} ms (the first: {first}; \
                 all: {stalled:?}): readers of them get 'writer stalled'. heal does not \
                 repair a key: a new write of it by its writer does",
                stalled.len(),
                SETTLE.as_millis()
            ),
        });
    }
    if magic != RING_MAGIC {
        return Err(Error::attach(path, AttachError::BadMagic { found: magic }));
    }
    heal_ring(path, producers_dead, out)
}

/// `--producers-dead` given for `path`, which is `what` and not a lossy MPMC ring.
fn flag_misplaced(path: &Path, what: &str) -> Error {
    Error::InvalidArgument {
        path: path.to_path_buf(),
        what: format!("--producers-dead is for a lossy MPMC ring; this is {what}"),
    }
}

/// A queue file's open error as the CLI's error type.
fn queue_err(e: QueueFileError) -> Error {
    match e {
        QueueFileError::Attach { path, err } => Error::QueueAttach { path, source: err },
        QueueFileError::Io { path, op, source } => Error::Io { path, op, source },
        // The message names the file.
        other => Error::InvalidArgument {
            path: PathBuf::new(),
            what: other.to_string(),
        },
    }
}

/// Whether an open for writing failed for want of write access: the file's permissions
/// (`EACCES`), a read-only file system (`EROFS`) or an immutable file (`EPERM`).
fn lacks_write_access(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EACCES | libc::EROFS | libc::EPERM)
    )
}

/// Why a file that could not be opened for writing (`err`) was not healed.
fn needs_write_access(path: &Path, err: &std::io::Error) -> String {
    format!(
        "healing needs write access to {}, which this process does not have (open \
         read-write: {err}); run heal again as a user who may write the file",
        crate::shown::path(path)
    )
}

/// An MPMC queue file. It is scanned read-only first: with nothing stuck, it is not opened
/// read-write (so reporting needs read access only, and nothing is written), and one that
/// no other process has open is checked at rest as a lone open would. Otherwise,
/// opening it as its only live handle heals every stuck slot (the file locks prove each
/// holder dead, see [`QueueMem::healed_at_open`]). Otherwise the handle is closed at once (an
/// open handle would keep a restarted process from proving itself alone and healing), and
/// what stays stuck across two read-only scans [`SETTLE`] apart is reported, not healed, as
/// it is when the file cannot be opened for writing. An SPSC queue is only validated,
/// read-only: it has no stuck slots.
fn heal_queue(path: &Path, kind: QueueKind, out: &mut dyn Write) -> Result<()> {
    let oe = out_err();
    let p = crate::shown::path(path);
    if kind == QueueKind::Spsc {
        ReadOnlyQueue::open(path, kind)?;
        return writeln!(
            out,
            "{p}: an SPSC queue has no stuck slots; nothing to heal"
        )
        .map_err(oe);
    }
    let in_flight_pass = "(other processes have the queue open; pushes and pops in flight pass)";
    let q = ReadOnlyQueue::open(path, kind)?;
    if q.stuck_slots().is_empty() {
        if open_elsewhere(path, &q)? {
            return writeln!(out, "{p}: no stuck positions {in_flight_pass}").map_err(oe);
        }
        refuse_stamps_at_rest(path, &q)?;
        return writeln!(out, "{p}: no stuck positions; nothing to heal").map_err(oe);
    }
    drop(q);
    let (why, none_left) = match QueueMem::open(path, QueueExpect::raw(kind)).map(|q| q.at_open()) {
        Ok(AtOpen::Alone { healed, refused }) => {
            if healed > 0 {
                writeln!(
                    out,
                    "healed {healed} stuck position(s): no other process had the queue open, \
                     so their holders were dead"
                )
                .map_err(&oe)?;
            }
            let Some((stuck, e)) = refused else {
                return if healed == 0 {
                    writeln!(out, "{p}: no stuck positions; nothing to heal").map_err(oe)
                } else {
                    Ok(())
                };
            };
            return Err(Error::NotHealed {
                path: path.to_path_buf(),
                what: format!(
                    "position {} ({}) is stuck and its heal was refused, although no other \
                     process had the queue open (a corrupt queue file?): {e}",
                    stuck.pos, stuck.kind
                ),
            });
        }
        Ok(AtOpen::NotAlone) => (
            "another process has the queue open, so their holders may be alive. Stop every \
             process using the queue and run heal again (or heal in code with \
             MpmcQueue::heal_stuck_slot once a holder is known dead)"
                .to_string(),
            in_flight_pass,
        ),
        Ok(AtOpen::Unprovable) => (
            "this file system has no record locks, so heal cannot prove that no other process \
             has the queue open (heal in code with MpmcQueue::heal_stuck_slot once a holder \
             is known dead)"
                .to_string(),
            in_flight_pass,
        ),
        Err(QueueFileError::Io {
            op: "open", source, ..
        }) if lacks_write_access(&source) => (
            needs_write_access(path, &source),
            "(those seen were pushes and pops in flight); nothing to heal",
        ),
        Err(e) => return Err(queue_err(e)),
    };
    let q = ReadOnlyQueue::open(path, kind)?;
    let first: Vec<StuckSlot> = q.stuck_slots();
    if !first.is_empty() {
        crate::sys::sleep(SETTLE);
    }
    let stuck: Vec<StuckSlot> = q
        .stuck_slots()
        .into_iter()
        .filter(|s| first.contains(s))
        .collect();
    match stuck.first() {
        None => writeln!(out, "{p}: no stuck positions {none_left}").map_err(oe),
        Some(s) => Err(Error::NotHealed {
            path: path.to_path_buf(),
            what: format!(
                "{} position(s) stuck (the first: {}, {}) and not healed: {why}",
                stuck.len(),
                s.pos,
                s.kind
            ),
        }),
    }
}

/// Whether another process has the queue file `q` at `path` open: what the read-write open
/// would prove, without taking a lock (another handle's record lock, or the creator's
/// flock). `true` when the file system cannot tell.
pub(super) fn open_elsewhere(path: &Path, q: &ReadOnlyQueue) -> Result<bool> {
    Ok(q.locked_by_others()
        .map_err(|e| Error::io(path, "fcntl", e))?
        != Some(false)
        || !flock_holders(path)
            .map_err(|e| Error::io(path, "read /proc/locks", e))?
            .is_empty())
}

/// For an MPMC queue file no other process has open (the caller checked, with
/// [`open_elsewhere`]): its slots judged as a lone open judges them, which refuses the file
/// when one holds a stamp its cursors rule out (every pop stops there), as that error. A
/// process that opens the file meanwhile can show a push or pop in flight so: the verdict
/// stands only if it holds after a pause, with nobody on the file still. `Ok` for an SPSC
/// queue. Loads only.
pub(super) fn refuse_stamps_at_rest(path: &Path, q: &ReadOnlyQueue) -> Result<()> {
    if let Err(e) = q.check_stamps_at_rest() {
        crate::sys::sleep(SETTLE);
        if q.check_stamps_at_rest() == Err(e) && !open_elsewhere(path, q)? {
            return Err(Error::QueueAttach {
                path: path.to_path_buf(),
                source: e,
            });
        }
    }
    Ok(())
}

/// The pids holding a `flock` on the file at `path`, from `/proc/locks`: on a ring, its
/// creator's lock, held for the creating producer's life (spec §1.2). Reading it takes no
/// lock, so it cannot make a concurrent create fail.
fn flock_holders(path: &Path) -> std::io::Result<Vec<i64>> {
    let m = std::fs::metadata(path)?;
    let (maj, min) = (libc::major(m.dev()), libc::minor(m.dev()));
    // The kernel's format: "<id>: FLOCK ADVISORY WRITE <pid> <maj:02x>:<min:02x>:<inode> …"
    // (a waiter's line has "->" after the id).
    let key = format!("{maj:02x}:{min:02x}:{}", m.ino());
    let locks = std::fs::read_to_string("/proc/locks")?;
    Ok(locks
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(1) == Some(&"FLOCK") && f.get(5) == Some(&key.as_str()))
                .then(|| f.get(4).and_then(|pid| pid.parse().ok()))
                .flatten()
        })
        .collect())
}

/// Why the lossy MPMC ring in `view` is corrupt, if its header is: a `write_seq` at or past
/// `claim_seq` or 2^63 ([`RingView::checked_write_seq`], as stat, dump and top refuse it), or
/// one a consumer refuses at attach ([`LossyMpmcConsumer::new`]: `read_seq` past
/// `claim_seq`, or `claim_seq` at or past 2^63), where its consumers stop at attach,
/// however sound its slots. heal then heals nothing: nothing in the file records what the
/// scribbled counter held.
fn header_refused(view: &RingView) -> Option<String> {
    // write_seq first, as stat checks it; consumers never read it, so none refuses it.
    if let Err(e) = view.checked_write_seq() {
        return Some(format!(
            "{e}. heal changes nothing in it; a new ring replaces it"
        ));
    }
    // The consumer's own check, over the read-only mapping: its attach only loads.
    let e = LossyMpmcConsumer::new(*view).err()?;
    Some(format!(
        "{e}; every consumer refuses the ring at attach. heal changes nothing in it; a new \
         ring replaces it"
    ))
}

/// Why the lossy MPMC ring in `view` is corrupt, if a slot holds a sequence at or past
/// `claim_seq` ([`slots_past_claim`]). heal then heals nothing: the header and the slots
/// disagree, and clearing the slot would not say which one is wrong.
fn sequences_past_claims(view: &RingView) -> Option<String> {
    let found = slots_past_claim(view)?;
    Some(format!(
        "{found}. heal changes nothing in it; a new ring replaces it"
    ))
}

/// A lossy MPMC ring (spec §8): slots left mid-write are healed only with
/// `--producers-dead`, the caller's word that every producer has exited or was killed (the
/// ring records no writer, and a producer paused while copying shows the same mark), and
/// only when nothing shows a live producer: the creator's `flock`, or tickets claimed or
/// published between two scans [`SETTLE`] apart. Without the flag they are reported. A
/// corrupt ring (a header a consumer refuses at attach, or a slot's sequence at or past
/// `claim_seq`) is reported and not healed. The ring is classified and scanned through a
/// read-only mapping; it is opened read-write only once slots are found stuck, and one that
/// cannot be (no write access) is reported.
fn heal_ring(path: &Path, producers_dead: bool, out: &mut dyn Write) -> Result<()> {
    let oe = out_err();
    let p = crate::shown::path(path);
    let ring = ReadOnlyRing::open(path)?;
    let view = ring.ring();
    if !view.geometry().flags.has(Flags::MODE_MPMC) {
        if producers_dead {
            return Err(flag_misplaced(path, "a single-writer ring"));
        }
        return writeln!(
            out,
            "{p}: a single-writer ring has no stuck slots (its next producer rewrites them); \
             nothing to heal"
        )
        .map_err(oe);
    }
    // The header first: the slots' check trusts its claim_seq.
    if let Some(what) = header_refused(view).or_else(|| sequences_past_claims(view)) {
        return Err(Error::NotHealed {
            path: path.to_path_buf(),
            what,
        });
    }
    // Over the read-only mapping: its scans only load.
    let prod = LossyMpmcProducer::new(*view).map_err(|e| Error::attach(path, e))?;
    // Relaxed (both): compared between scans only; the heal's CAS decides.
    let tickets = || {
        (
            view.claim_seq().load(Ordering::Relaxed),
            view.write_seq().load(Ordering::Relaxed),
        )
    };
    let scan = || -> BTreeSet<u64> {
        let mut found = BTreeSet::new();
        let mut from = 0;
        while let Some(i) = prod.next_mid_write_slot(from) {
            found.insert(i);
            from = i + 1;
        }
        found
    };
    let before = tickets();
    let first = scan();
    if first.is_empty() {
        return writeln!(out, "{p}: no slot left mid-write; nothing to heal").map_err(oe);
    }
    crate::sys::sleep(SETTLE);
    let stuck: Vec<u64> = first.intersection(&scan()).copied().collect();
    let after = tickets();
    let Some(&first_slot) = stuck.first() else {
        return writeln!(
            out,
            "{p}: no slot left mid-write (only pushes in flight); nothing to heal"
        )
        .map_err(oe);
    };
    let not_healed = |why: String| Error::NotHealed {
        path: path.to_path_buf(),
        what: format!(
            "{} slot(s) left mid-write (the first: {first_slot}) and not healed: {why}",
            stuck.len()
        ),
    };
    // Something to heal: now the read-write handle, which the heal stores through.
    let writable = match RingFile::open(path, Expect::RAW) {
        Ok(rw) if rw.inode() == ring.inode() => Ok(rw),
        Ok(_) => {
            return Err(not_healed(
                "the ring file was replaced while heal scanned it; run heal again".into(),
            ));
        }
        Err(Error::Io {
            op: "open", source, ..
        }) if lacks_write_access(&source) => Err(source),
        Err(e) => return Err(e),
    };
    let why = if after != before {
        Some(format!(
            "producers are pushing (claim_seq {} -> {}, write_seq {} -> {} in {} ms), so \
             those may be their writes in flight",
            before.0,
            after.0,
            before.1,
            after.1,
            SETTLE.as_millis()
        ))
    } else if let Some(pid) = flock_holders(path)
        .map_err(|e| Error::io(path, "read /proc/locks", e))?
        .first()
    {
        Some(format!(
            "the ring's creating producer (pid {pid}, holding its lock) is alive; heal once \
             every producer of the ring has exited or was killed"
        ))
    } else if !producers_dead {
        Some(
            "a producer that died while copying leaves a slot so, but so does one paused while \
             copying, and the ring does not record which. Once every producer of this ring has \
             exited or was killed, run heal again with --producers-dead"
                .into(),
        )
    } else {
        None
    };
    let rw = match (writable, why) {
        (Err(source), why) => {
            let besides = why.map(|w| format!(". Besides: {w}")).unwrap_or_default();
            return Err(not_healed(format!(
                "{}{besides}",
                needs_write_access(path, &source)
            )));
        }
        (Ok(_), Some(why)) => return Err(not_healed(why)),
        (Ok(rw), None) => rw,
    };
    let prod = LossyMpmcProducer::new(*rw.ring()).map_err(|e| Error::attach(path, e))?;
    let mut refused = Vec::new();
    for &i in &stuck {
        match prod.heal_mid_write_slot(i) {
            Ok(()) => writeln!(out, "healed slot {i} (left mid-write)").map_err(&oe)?,
            Err(e) => refused.push(e),
        }
    }
    writeln!(
        out,
        "healed {} slot(s) left mid-write",
        stuck.len() - refused.len()
    )
    .map_err(&oe)?;
    match refused.first() {
        None => Ok(()),
        // A slot whose write finished between the scan and the heal had a live writer.
        Some(e) => Err(Error::NotHealed {
            path: path.to_path_buf(),
            what: format!(
                "{} slot(s) not healed, their writer finished meanwhile (so a producer is \
                 running): {e}",
                refused.len()
            ),
        }),
    }
}
