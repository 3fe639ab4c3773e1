//! `ringwire heal <PATH> [--producers-stopped]`: heals the stuck slots that `stat` reports,
//! in a ringwire MPMC queue file (`claimed_unpublished`, `taken_unfreed`) or a lossy MPMC
//! ring (`mid_write_slots`), when it can tell their holders are dead.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ringwire_core::blackboard::BLACKBOARD_MAGIC;
use ringwire_core::layout::{Flags, RING_MAGIC};
use ringwire_core::queue::compat::{LossyMpmcProducer, TAKEOVER_NS};
use ringwire_core::queue::{MpmcQueue, QueueExpect, QueueKind, StuckSlot};
use ringwire_core::{AttachError, Expect};

use super::out_err;
use super::stat::first_128;
use crate::error::{Error, Result};
use crate::file::RingFile;
use crate::queue::{QueueFileError, QueueMem};

/// How long a slot must stay stuck, between two scans, to be reported as stuck rather than
/// in use: twice the lossy ring's takeover deadline, far longer than any push or pop copy.
const SETTLE: Duration = Duration::from_nanos(2 * TAKEOVER_NS);

pub(super) fn run(path: &Path, producers_stopped: bool, out: &mut dyn Write) -> Result<()> {
    let (_, h) = first_128(path)?;
    let magic = u64::from_le_bytes(h[0..8].try_into().unwrap_or([0; 8]));
    let oe = out_err(path);
    let p = path.display();
    if let Some(kind) = QueueKind::from_magic(magic) {
        return heal_queue(path, kind, out);
    }
    if magic == BLACKBOARD_MAGIC {
        return writeln!(out, "{p}: a blackboard has no stuck slots; nothing to heal").map_err(oe);
    }
    if magic != RING_MAGIC {
        return Err(Error::attach(path, AttachError::BadMagic { found: magic }));
    }
    heal_ring(path, producers_stopped, out)
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

/// An MPMC queue file: opening it as its only live handle heals every stuck slot (the file
/// locks prove each holder dead, see [`QueueMem::healed_at_open`]); with other handles open,
/// what stays stuck is reported and left alone.
fn heal_queue(path: &Path, kind: QueueKind, out: &mut dyn Write) -> Result<()> {
    let oe = out_err(path);
    let p = path.display();
    let mem = QueueMem::open(path, QueueExpect::raw(kind)).map_err(queue_err)?;
    if kind == QueueKind::Spsc {
        return writeln!(
            out,
            "{p}: an SPSC queue has no stuck slots; nothing to heal"
        )
        .map_err(oe);
    }
    let healed = mem.healed_at_open();
    if healed > 0 {
        writeln!(
            out,
            "healed {healed} stuck position(s): no other process had the queue open, so their \
             holders were dead"
        )
        .map_err(&oe)?;
    }
    // SAFETY: the copy is used only below, while `mem` (the mapping) lives.
    let q = MpmcQueue::new(unsafe { *mem.view() }).map_err(|source| Error::QueueAttach {
        path: path.to_path_buf(),
        source,
    })?;
    let scan = || -> BTreeSet<(u64, String)> {
        let mut found = BTreeSet::new();
        let mut from = 0;
        while let Some(StuckSlot { pos, kind }) = q.next_stuck_slot(from) {
            found.insert((pos, kind.to_string()));
            from = pos + 1;
        }
        found
    };
    let first = scan();
    if first.is_empty() {
        return if healed == 0 {
            writeln!(out, "{p}: no stuck positions; nothing to heal").map_err(oe)
        } else {
            Ok(())
        };
    }
    std::thread::sleep(SETTLE);
    let stuck: Vec<_> = first.intersection(&scan()).cloned().collect();
    match stuck.first() {
        None => writeln!(
            out,
            "{p}: no stuck positions (only pushes and pops in flight)"
        )
        .map_err(oe),
        Some((pos, kind)) => Err(Error::NotHealed {
            path: path.to_path_buf(),
            what: format!(
                "{} position(s) stuck (the first: {pos}, {kind}) and not healed: another \
                 process has the queue open, so their holders may be alive. Stop every \
                 process using the queue and run heal again (or heal in code with \
                 MpmcQueue::heal_stuck_slot once a holder is known dead)",
                stuck.len()
            ),
        }),
    }
}

/// A lossy MPMC ring (spec §8): slots left mid-write, found in two scans [`SETTLE`] apart,
/// are healed only with `--producers-stopped`, the caller's word that no producer can be
/// writing them (the ring records no writer).
fn heal_ring(path: &Path, producers_stopped: bool, out: &mut dyn Write) -> Result<()> {
    let oe = out_err(path);
    let p = path.display();
    let ring = RingFile::open(path, Expect::RAW)?;
    if !ring.ring().geometry().flags.has(Flags::MODE_MPMC) {
        return writeln!(
            out,
            "{p}: a single-writer ring has no stuck slots (its next producer rewrites them); \
             nothing to heal"
        )
        .map_err(oe);
    }
    let prod = LossyMpmcProducer::new(*ring.ring()).map_err(|e| Error::attach(path, e))?;
    let scan = || -> BTreeSet<u64> {
        let mut found = BTreeSet::new();
        let mut from = 0;
        while let Some(i) = prod.next_mid_write_slot(from) {
            found.insert(i);
            from = i + 1;
        }
        found
    };
    let first = scan();
    if !first.is_empty() {
        std::thread::sleep(SETTLE);
    }
    let stuck: Vec<u64> = first.intersection(&scan()).copied().collect();
    let Some(&first_slot) = stuck.first() else {
        return writeln!(out, "{p}: no slot left mid-write; nothing to heal").map_err(oe);
    };
    if !producers_stopped {
        return Err(Error::NotHealed {
            path: path.to_path_buf(),
            what: format!(
                "{} slot(s) left mid-write (the first: {first_slot}) and not healed: a producer \
                 that died while copying leaves them so, but so does one still copying, and the \
                 ring does not record which. Once every producer of this ring is stopped or \
                 dead, run heal again with --producers-stopped",
                stuck.len()
            ),
        });
    }
    let mut refused = Vec::new();
    for &i in &stuck {
        match prod.heal_mid_write_slot(i) {
            Ok(()) => writeln!(out, "healed slot {i} (left mid-write)").map_err(&oe)?,
            Err(e) => refused.push(format!("{e}")),
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
                 running: {e})",
                refused.len()
            ),
        }),
    }
}
