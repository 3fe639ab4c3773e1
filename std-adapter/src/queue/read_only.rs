//! A queue file mapped read-only, for `ringwire stat`: loads only, so inspecting a queue
//! needs no write permission and cannot disturb it.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use memmap2::MmapRaw;
use ringwire_core::queue::{
    MpmcQueue as CoreMpmc, QueueAttachError, QueueExpect, QueueGeometry, QueueHeader, QueueKind,
    QueueView, StuckKind, StuckSlot, qhdr,
};
use ringwire_core::sync::Ordering;

use crate::error::{Error, Result};

/// A validated queue file behind a `PROT_READ` mapping.
pub struct ReadOnlyQueue {
    view: QueueView,
    map: crate::cli::sigbus::Mapped<MmapRaw>,
    file: File,
    path: PathBuf,
}

/// A relaxed snapshot of a queue's header and cursors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueSnapshot {
    /// The validated geometry.
    pub geometry: QueueGeometry,
    /// The header's schema signature (0: any item type).
    pub schema_sig: u64,
    /// The enqueue cursor (SPSC tail; MPMC: the next position to claim).
    pub enqueue: u64,
    /// The dequeue cursor (MPMC: the next position to pop; SPSC: the head the consumer last
    /// handed back, up to `release_every - 1` items behind its pops while it works through
    /// a backlog, so `enqueue - dequeue` can count items already popped).
    pub dequeue: u64,
    /// Consumers asleep or about to sleep, and their futex word.
    pub data_waiters: u32,
    /// `data_futex`.
    pub data_futex: u32,
    /// Producers of a full queue asleep or about to sleep.
    pub space_waiters: u32,
    /// `space_futex`.
    pub space_futex: u32,
    /// MPMC: the first position claimed by a producer and not published (a push in
    /// flight, or a producer that died mid-push: see `next_stuck_slot`).
    pub claimed_unpublished: Option<u64>,
    /// MPMC: the first position below the dequeue cursor whose slot a consumer took and has
    /// not freed (a pop copying out, or a consumer that died mid-pop: see
    /// `next_stuck_slot`). While it stays, producers find the queue full at that slot.
    pub taken_unfreed: Option<u64>,
}

impl ReadOnlyQueue {
    /// Opens a queue file of either kind and validates it (every attach check). An empty
    /// `path` is [`Error::InvalidArgument`].
    pub fn open(path: impl AsRef<Path>, kind: QueueKind) -> Result<Self> {
        let path = path.as_ref();
        // An `Error::Io` leaves an empty path out of its text, which would name nothing.
        crate::file::not_empty(path, "queue")?;
        let file = crate::file::open_regular(path, OpenOptions::new().read(true))?;
        let attach_err = |source| Error::QueueAttach {
            path: path.to_path_buf(),
            source,
        };
        // `map_file` refuses a file shorter than a ring's header with a ring's error; the
        // queue's says that its header is longer still.
        let len = file
            .metadata()
            .map_err(|e| Error::io(path, "fstat", e))?
            .len();
        if len < qhdr::SIZE as u64 {
            return Err(crate::file::offset_file_given_for(path, &file, "queue")
                .unwrap_or_else(|| attach_err(QueueAttachError::TooShort { len })));
        }
        let (map, region) = crate::file::map_file(path, &file, true)?;
        let view = QueueView::attach(region, QueueExpect::raw(kind)).map_err(attach_err)?;
        let q = ReadOnlyQueue {
            view,
            map,
            file,
            path: path.to_path_buf(),
        };
        // Attaching checks an MPMC queue's cursors; an SPSC queue's are checked here, for
        // the readers that describe the file (`stat`, `top`, `heal`), whose figures would
        // otherwise be impossible ones (an SPSC handle finds out at its first push or pop).
        if kind == QueueKind::Spsc {
            q.check_cursors()?;
        }
        Ok(q)
    }

    /// Checks the cursors as [`open`](Self::open) did, on the file as it is now (loads
    /// only): an MPMC queue's as every attach checks them, an SPSC queue's at most a lap
    /// apart. `top` runs it before each frame, so that cursors a corrupting write left
    /// while it runs end it with the error naming them, instead of a frame with `queued
    /// 40/8`.
    pub(crate) fn check_cursors(&self) -> Result<()> {
        let r = match self.view.geometry().kind {
            QueueKind::Spsc => ringwire_core::queue::spsc::check_spsc_cursors(&self.view),
            QueueKind::Mpmc => CoreMpmc::new(self.view).and_then(|q| q.check_cursors()),
        };
        r.map_err(|source| Error::QueueAttach {
            path: self.path.clone(),
            source,
        })
    }

    /// The path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The mapped length in bytes (the file's when it was opened).
    pub fn file_len(&self) -> usize {
        self.map.len()
    }

    /// The validated geometry (as opened; [`header`](Self::header) reads the file's now).
    pub fn geometry(&self) -> &QueueGeometry {
        self.view.geometry()
    }

    /// A relaxed snapshot of the header.
    pub fn header(&self) -> QueueHeader {
        self.view.header()
    }

    /// (enqueue, dequeue) cursors, relaxed: unlike [`snapshot`](Self::snapshot), no slot
    /// is read.
    pub fn cursors(&self) -> (u64, u64) {
        // Relaxed: a monitoring snapshot; the dequeue cursor first, as in `snapshot`.
        let dequeue = self.view.deq().load(Ordering::Relaxed);
        (self.view.enq().load(Ordering::Relaxed), dequeue)
    }

    /// Every MPMC position a producer or a consumer holds right now (pushes and pops in
    /// flight, or holders that died: see `next_stuck_slot`), in order; none in an SPSC
    /// queue. Loads only.
    pub fn stuck_slots(&self) -> Vec<StuckSlot> {
        let Ok(q) = CoreMpmc::new(self.view) else {
            return Vec::new();
        };
        let mut found = Vec::new();
        let mut from = 0;
        // Stuck positions lie within two laps, and each step moves past one.
        while let Some(s) = q.next_stuck_slot(from) {
            found.push(s);
            from = s.pos + 1;
        }
        found
    }

    /// [`CoreMpmc::check_stamps_at_rest`] on an MPMC queue (meaningful only while no
    /// handle has the file open); `Ok` for an SPSC queue. Loads only.
    pub(crate) fn check_stamps_at_rest(&self) -> std::result::Result<(), QueueAttachError> {
        CoreMpmc::new(self.view).map_or(Ok(()), |q| q.check_stamps_at_rest())
    }

    /// Whether another open file description holds a record lock on the file (every live
    /// read-write handle holds one for its life; a read-only one, as this, holds none), by
    /// `F_OFD_GETLK`, which takes no lock; `None` when the file system has no record locks.
    /// The creator's `flock` is not seen here.
    pub(crate) fn locked_by_others(&self) -> std::io::Result<Option<bool>> {
        match super::mem::ofd_held_as(&self.file, libc::F_WRLCK, 0, 0) {
            Ok(held) => Ok(Some(held)),
            Err(e) if super::mem::locks_unsupported(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A relaxed snapshot (loads only).
    pub fn snapshot(&self) -> QueueSnapshot {
        let v = &self.view;
        let geometry = *v.geometry();
        // The dequeue cursor first, so a queue that moves meanwhile shows enqueue >= dequeue.
        let (enqueue, dequeue) = self.cursors();
        let (claimed_unpublished, taken_unfreed) = match geometry.kind {
            QueueKind::Mpmc => match CoreMpmc::new(*v) {
                Ok(q) => (
                    q.next_stuck_slot(dequeue)
                        .filter(|s| s.kind != StuckKind::MidPop)
                        .map(|s| s.pos),
                    // A consumer holds a position of the lap below the dequeue cursor.
                    q.next_stuck_slot(dequeue.saturating_sub(geometry.capacity))
                        .filter(|s| s.kind == StuckKind::MidPop && s.pos < dequeue)
                        .map(|s| s.pos),
                ),
                Err(_) => (None, None),
            },
            QueueKind::Spsc => (None, None),
        };
        QueueSnapshot {
            geometry,
            schema_sig: v.header().schema_sig,
            enqueue,
            dequeue,
            data_waiters: v.data_waiters().load(Ordering::Relaxed),
            data_futex: v.data_futex().load(Ordering::Relaxed),
            space_waiters: v.space_waiters().load(Ordering::Relaxed),
            space_futex: v.space_futex().load(Ordering::Relaxed),
            claimed_unpublished,
            taken_unfreed,
        }
    }
}

impl std::fmt::Debug for ReadOnlyQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadOnlyQueue")
            .field("path", &self.path)
            .field("geometry", self.view.geometry())
            .finish()
    }
}
