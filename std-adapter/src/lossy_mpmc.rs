//! ringfire's lossy multi-producer ring (spec §8) with typed handles under ringfire's names:
//! [`MpmcProducer<T>`] and [`MpmcQueueConsumer<T>`].
//!
//! Any number of producers, in any processes, push into one ring; any number of consumers
//! compete for what was pushed, and each message that is delivered goes to exactly one of
//! them. Producers never wait for consumers, so **this ring loses messages**:
//!
//! * a producer whose slot already holds a message of a later lap throws its own message
//!   away (*discarded*), and one whose slot stays mid-write by another producer for more
//!   than 10 ms gives up on it (*dropped*); [`MpmcProducer::push`] returns the ticket
//!   either way, [`MpmcProducer::push_outcome`] tells which. A slot left mid-write by a
//!   producer that died while copying drops a message on every lap until a process that
//!   knows that producer dead heals it ([`MpmcProducer::heal_mid_write_slot`]; `ringwire
//!   stat` counts such slots as `mid_write_slots`);
//! * a consumer that falls a whole ring behind the producers skips the tickets that were
//!   overwritten, and one whose claimed ticket was overwritten (or never written) before it
//!   could read it loses that ticket. Each consumer counts the tickets it lost in
//!   [`MpmcQueueConsumer::dropped_count`]; over all consumers, every ticket handed out is
//!   either received once or counted once, but for a ticket a consumer holds (waiting for
//!   its producer to publish it) when the consumer is dropped after another consumer took a
//!   later ticket, which is neither. Beyond ringfire, a consumer dropped before any later
//!   ticket was taken gives its ticket back, and the next consumer receives it;
//! * a consumer whose ticket was claimed by a producer that died before publishing it
//!   waits on that ticket, receiving nothing, until producers have claimed a whole ring's
//!   worth of tickets after it (then it counts the ticket lost and goes on). Messages
//!   published behind it meanwhile go to other consumers; with one consumer, or once
//!   producers stop, they wait with it. ringfire's consumer does the same.
//!
//! When nothing may be lost, use the lossless queues of [`crate::queue`] (`SpscProducer` /
//! `SpscConsumer`, `MpmcQueue`): their producers wait for room instead. Those are ringwire's
//! own file format; this module is the one ringfire programs share rings through.
//!
//! The protocol is the core's [`LossyMpmcProducer`] / [`LossyMpmcConsumer`]; this file maps
//! the file, checks the record type (stride and schema signature, spec §1.3 and §12), turns
//! `T` into slot bytes and back, wakes futex sleepers and waits with a [`WaitStrategy`].

use std::marker::PhantomData;
use std::mem::{MaybeUninit, align_of, size_of};
use std::path::Path;
use std::time::{Duration, Instant};

use ringwire_core::layout::{SLOT_WRITING, schema_signature_of, slot_payload_offset, slot_stride};
use ringwire_core::queue::compat::{LossyMpmcConsumer, LossyMpmcProducer};
use ringwire_core::sync::Ordering;
use ringwire_core::{Expect, Geometry, RingView};
use zerocopy::{FromBytes, Immutable, IntoBytes};

pub use ringwire_core::queue::compat::{LossyHealError, LossyPush};

use crate::error::{Error, Result};
use crate::file::{CleanupMode, CreateOptions, RingFile};
use crate::sys;
use crate::wait::{WaitStrategy, before, deadline_after};

/// A whole slot as ringfire lays it out (`Slot<T>`, spec §4.1): the sequence word, then `T`
/// at offset 8, or at `align_of::<T>()` for an over-aligned type. Its size is the slot
/// stride; its bytes from offset 8 on are what the core's MPMC calls copy.
#[repr(C)]
struct SlotImage<T> {
    _seq: u64,
    data: T,
}

/// Stride, payload offset and the §1.3 expectations of a record type.
struct Shape<T>(PhantomData<T>);

impl<T> Shape<T> {
    /// The slot stride, checked against the image's size once per type at compile time.
    const STRIDE: usize = {
        let s = slot_stride(size_of::<T>(), align_of::<T>());
        assert!(s == size_of::<SlotImage<T>>());
        s
    };
    /// Where `T` starts in a slot.
    const POFF: usize = slot_payload_offset(align_of::<T>());

    fn geometry(path: &Path, capacity: u64) -> Result<Geometry> {
        Ok(
            Geometry::mpmc(capacity, Self::STRIDE, align_of::<T>().max(8))
                .map_err(|source| Error::Geometry {
                    path: path.to_path_buf(),
                    source,
                })?
                .with_schema(schema_signature_of::<T>()),
        )
    }

    fn expect() -> Expect {
        Expect {
            element_size: u32::try_from(Self::STRIDE).ok(),
            schema_sig: Some(schema_signature_of::<T>()),
            slot_align: align_of::<T>().max(8) as u64,
        }
    }
}

/// A producer of a lossy MPMC ring of `T` records (spec §8.1); any number of them, in any
/// processes, may push into one ring.
///
/// The producer that [creates](MpmcProducer::create) the ring holds its exclusive lock for
/// its whole life and unlinks the file when dropped (unless told otherwise with
/// [`MpmcProducer::set_cleanup_mode`]). Producers that [attach](MpmcProducer::attach) take no
/// lock and leave the file alone. [`MpmcProducer::push`] takes `&self`: one handle can be
/// shared by threads.
pub struct MpmcProducer<T> {
    // Declared before `file`: the core handle's copy of the view must go first.
    inner: LossyMpmcProducer,
    file: RingFile,
    _t: PhantomData<fn(&T)>,
}

impl<T: IntoBytes + Immutable + 'static> MpmcProducer<T> {
    /// Creates a lossy MPMC ring of `capacity` slots (a power of two) at `path` (spec §1.2:
    /// mode 0o660, an exclusive `flock` held until drop, a stale ring replaced by a fresh
    /// inode). The file is unlinked when this producer is dropped.
    pub fn create(path: impl AsRef<Path>, capacity: u64) -> Result<Self> {
        let path = path.as_ref();
        let geo = Shape::<T>::geometry(path, capacity)?;
        let file = RingFile::create(path, &geo, &CreateOptions::default())?;
        Self::with_file(file)
    }

    /// Attaches another producer to the MPMC ring at `path`, created by ringwire or
    /// ringfire. Refuses a ring of another record type (its stride or schema signature
    /// differs, [`Error::Attach`]), a ring that is not MPMC (a broadcast ring has no ticket
    /// counters), and one whose `claim_seq` is at or past 2^63 (a corrupt header:
    /// [`AttachError::ClaimSeqExhausted`](ringwire_core::AttachError::ClaimSeqExhausted)).
    /// Takes no lock and never unlinks the file. A `write_seq` at or past `claim_seq` (a
    /// corrupt header, which `ringwire stat` refuses) is accepted: pushes publish as usual,
    /// and `write_seq` stays where it is until tickets pass it
    /// ([`MpmcProducer::published_sequence`] reports it meanwhile).
    pub fn attach(path: impl AsRef<Path>) -> Result<Self> {
        // Sleepers' membarrier must reach this process too (spec §1.2 step 1, §11).
        sys::membarrier_register();
        let file = RingFile::open(path, Shape::<T>::expect())?;
        Self::with_file(file)
    }

    fn with_file(file: RingFile) -> Result<Self> {
        // The copy lives in the handle, which owns `file` and drops it last.
        let mut inner =
            LossyMpmcProducer::new(*file.ring()).map_err(|e| Error::attach(file.path(), e))?;
        inner.set_fenced_publish(sys::fenced_publish());
        Ok(MpmcProducer {
            inner,
            file,
            _t: PhantomData,
        })
    }

    /// Pushes `item` and returns the ticket (sequence) it was given. The message can still
    /// be lost: discarded when its slot already holds a later lap, dropped when the slot
    /// stays mid-write by another producer for more than 10 ms
    /// ([`MpmcProducer::push_outcome`] says which); the ticket is returned in every case.
    ///
    /// Never waits for consumers. It waits only for the previous lap of its own slot to be
    /// published, for at most 10 ms. After that, as in ringfire (spec §8.1), a slot whose
    /// previous writer took its ticket but never started writing (a producer that died
    /// between the two) is taken over, and this message published. A slot left mid-write
    /// (its writer died while copying, the slot's word stuck at the write marker) is never
    /// taken over: this push and every later one that lands on that slot, one in
    /// [`MpmcProducer::capacity`], waits the 10 ms and drops its message, until a process
    /// that knows the writer is dead heals it ([`MpmcProducer::heal_mid_write_slot`];
    /// ringfire has no such repair, only a new ring clears it there).
    #[inline]
    pub fn push(&self, item: &T) -> u64 {
        match self.push_outcome(item) {
            LossyPush::Published { seq, .. }
            | LossyPush::Discarded { seq }
            | LossyPush::Dropped { seq } => seq,
        }
    }

    /// [`MpmcProducer::push`], telling whether the message was published, discarded or
    /// dropped. After [`LossyPush::Published`] sleeping consumers have already been woken;
    /// a discarded or dropped message published nothing, so nobody is woken for it.
    #[inline]
    pub fn push_outcome(&self, item: &T) -> LossyPush {
        let out = if Shape::<T>::POFF == 8 {
            self.inner.push(item.as_bytes(), stall_clock())
        } else {
            self.push_over_aligned(item)
        };
        if let LossyPush::Published { wake: true, .. } = out {
            self.file.wake_after_publish();
        }
        out
    }

    /// The push of a type whose payload starts past offset 8: the core copies the slot
    /// bytes from offset 8, so the record goes through a zeroed image of the whole slot.
    #[inline(never)]
    fn push_over_aligned(&self, item: &T) -> LossyPush {
        let mut image = MaybeUninit::<SlotImage<T>>::zeroed();
        let bytes = image_bytes(&mut image);
        bytes[Shape::<T>::POFF..][..size_of::<T>()].copy_from_slice(item.as_bytes());
        self.inner.push(&bytes[8..], stall_clock())
    }

    /// Number of slots.
    pub fn capacity(&self) -> u64 {
        self.file.ring().capacity()
    }

    /// The first slot at or after index `from` that is mid-write (its sequence word is the
    /// write marker), or `None`. A live producer's slot looks the same while it copies; a
    /// slot still found so after its writer is known dead is stuck (see
    /// [`MpmcProducer::heal_mid_write_slot`]). `ringwire stat` counts such slots.
    pub fn next_mid_write_slot(&self, from: u64) -> Option<u64> {
        self.inner.next_mid_write_slot(from)
    }

    /// Heals slot `index`, left mid-write by a producer that died while copying: every later
    /// push landing on it would otherwise wait 10 ms and drop its message, lap after lap.
    /// The slot is marked never written, so the torn message is never delivered (its ticket
    /// is counted lost, as before), and the next push that lands there takes the slot over
    /// after the usual 10 ms wait; later laps use it at once. A consumer waiting on the
    /// dead producer's ticket is not released by the heal itself, only by that takeover (or
    /// a ring's worth of later tickets). See [`LossyMpmcProducer::heal_mid_write_slot`].
    ///
    /// The ring does not record which producer writes a slot, and a live producer that was
    /// descheduled while copying shows the same marker: healing its slot can deliver a torn
    /// message. So heal only when every producer that could be writing the slot is known
    /// dead, exited or killed (a paused one, resumed, finishes its copy over the new
    /// owner's), from one healer at a time; `ringwire heal --producers-dead` checks what it
    /// can of that first. Fails, healing nothing, when the slot is not mid-write or not in
    /// the ring.
    pub fn heal_mid_write_slot(&self, index: u64) -> std::result::Result<(), LossyHealError> {
        self.inner.heal_mid_write_slot(index)
    }

    /// Whether dropping this producer unlinks the file: [`CleanupMode::UnlinkOnDrop`] is the
    /// default of a creating producer, [`CleanupMode::Persistent`] of an attached one. An
    /// attached producer told to unlink does so, without a lock; a creator unlinks while it
    /// still holds its lock. Either way only while the path still names this ring's file.
    pub fn set_cleanup_mode(&mut self, mode: CleanupMode) {
        self.file.set_cleanup(mode);
    }

    /// The ring header's `write_seq`: the highest ticket published so far, by any producer
    /// (lower tickets may still be in flight, or lost).
    pub fn published_sequence(&self) -> u64 {
        self.file.write_seq()
    }

    /// The ring file's path.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// The ring file (geometry, header snapshot, inode).
    pub fn file(&self) -> &RingFile {
        &self.file
    }
}

/// The clock the core reads while a push waits for its slot: only after thousands of spins,
/// on every 64th, where ringfire also yields the CPU (a producer waiting on a descheduled
/// one must let it run). Monotonic nanoseconds from the first call.
fn stall_clock() -> impl FnMut() -> u64 {
    let mut start: Option<Instant> = None;
    move || {
        std::thread::yield_now();
        let ns = start.get_or_insert_with(Instant::now).elapsed().as_nanos();
        u64::try_from(ns).unwrap_or(u64::MAX)
    }
}

/// The bytes of a zeroed slot image.
fn image_bytes<T>(image: &mut MaybeUninit<SlotImage<T>>) -> &mut [u8] {
    // SAFETY: the image was created zeroed, so all its `size_of` bytes are initialised, and
    // the returned slice is the only reference to them while it lives.
    unsafe {
        std::slice::from_raw_parts_mut(image.as_mut_ptr().cast::<u8>(), size_of::<SlotImage<T>>())
    }
}

impl<T> std::fmt::Debug for MpmcProducer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpmcProducer")
            .field("file", &self.file)
            .finish()
    }
}

/// A consumer of a lossy MPMC ring of `T` records (spec §8.2): consumers compete, and each
/// message delivered goes to exactly one of them. Tickets this consumer lost are counted in
/// [`MpmcQueueConsumer::dropped_count`].
pub struct MpmcQueueConsumer<T> {
    // Declared before `file`: the core handle's copy of the view must go first.
    inner: LossyMpmcConsumer,
    /// The process's fork generation at attach: a copy inherited by a forked child does
    /// not give back its parent's ticket on drop (see the `Drop` impl).
    fork_generation: u64,
    file: RingFile,
    _t: PhantomData<fn() -> T>,
}

impl<T: FromBytes + 'static> MpmcQueueConsumer<T> {
    /// Attaches a competing consumer to the MPMC ring at `path`, created by ringwire or
    /// ringfire. Refuses ([`Error::Attach`]) a ring of another record type (its stride or
    /// schema signature differs), a ring that is not MPMC, such as a broadcast ring
    /// (ringfire attaches to one and then never receives anything), and one whose header
    /// is corrupt: `read_seq` past `claim_seq`
    /// ([`AttachError::ReadSeqPastClaimSeq`](ringwire_core::AttachError::ReadSeqPastClaimSeq):
    /// ringfire's consumers would receive nothing until producers caught up, and count
    /// nothing lost), or a `claim_seq` at or past 2^63, which a producer refuses too
    /// ([`AttachError::ClaimSeqExhausted`](ringwire_core::AttachError::ClaimSeqExhausted):
    /// no ticket drawn from it can hold a message). A `write_seq` at or past `claim_seq` (a
    /// corrupt header, which `ringwire stat` refuses) is accepted: a consumer never reads
    /// `write_seq`, and receives every ticket as on a sound ring.
    pub fn attach(path: impl AsRef<Path>) -> Result<Self> {
        let file = RingFile::open(path, Shape::<T>::expect())?;
        // The copy lives in the handle, which owns `file` and drops it last.
        let inner =
            LossyMpmcConsumer::new(*file.ring()).map_err(|e| Error::attach(file.path(), e))?;
        Ok(MpmcQueueConsumer {
            inner,
            fork_generation: sys::fork_generation(),
            file,
            _t: PhantomData,
        })
    }

    /// The next message, or `None` when there is none, or when the ticket this consumer
    /// claimed is not published yet (it keeps the ticket and tries it again next time; a
    /// ticket whose producer died stays with it until a ring's worth of tickets are claimed
    /// after it, see the module docs). Never waits.
    #[inline]
    pub fn try_recv(&mut self) -> Option<T> {
        self.try_recv_seq().map(|(_, v)| v)
    }

    /// [`MpmcQueueConsumer::try_recv`] with the message's ticket (its sequence).
    #[inline]
    pub fn try_recv_seq(&mut self) -> Option<(u64, T)> {
        let mut image = MaybeUninit::<SlotImage<T>>::zeroed();
        let bytes = image_bytes(&mut image);
        let seq = self.inner.try_recv(&mut bytes[8..])?;
        // SAFETY: every byte of the image is initialised (zeroed, then partly overwritten
        // with slot bytes), and both fields accept any bytes (`u64`, and `T: FromBytes`).
        let image = unsafe { image.assume_init() };
        Some((seq, image.data))
    }

    /// Waits with `wait` until a message arrives. Each wait is bounded, so a ring that no
    /// producer pushes to any more, or a ticket held for a producer that died (module docs),
    /// keeps this looping: [`MpmcQueueConsumer::recv_timeout`] gives up instead.
    pub fn recv_blocking<W: WaitStrategy>(&mut self, wait: &mut W) -> T {
        loop {
            if let Some(v) = self.try_recv() {
                wait.reset();
                return v;
            }
            self.wait_once(wait, None);
        }
    }

    /// Like [`MpmcQueueConsumer::recv_blocking`], giving up after `timeout`; a sleeping
    /// strategy ([`FutexWait`](crate::FutexWait)) never sleeps past it.
    pub fn recv_timeout<W: WaitStrategy>(&mut self, wait: &mut W, timeout: Duration) -> Option<T> {
        let deadline = deadline_after(timeout);
        loop {
            if let Some(v) = self.try_recv() {
                wait.reset();
                return Some(v);
            }
            if !before(deadline) {
                return None;
            }
            self.wait_once(wait, deadline);
        }
    }

    /// One bounded wait on the ring's futex pair (every publish notifies it) until a
    /// receive may succeed: with a claimed ticket, until its slot was written (or
    /// overwritten) or the producers are a lap past it, which is when `try_recv` settles
    /// it; without one, until a producer claims a ticket this consumer may take.
    fn wait_once<W: WaitStrategy>(&self, wait: &mut W, deadline: Option<Instant>) {
        let ring = self.file.ring();
        let pending = self.inner.pending();
        wait.wait_on(ring.futex(), deadline, || ready(ring, pending));
    }

    /// Messages this consumer lost: tickets skipped because the producers were a whole
    /// ring ahead, and claimed tickets whose slot was overwritten (or never written) before
    /// it could be read.
    pub fn dropped_count(&self) -> u64 {
        self.inner.dropped()
    }

    /// Number of slots.
    pub fn capacity(&self) -> u64 {
        self.file.ring().capacity()
    }

    /// The ring file's path.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// The ring file (geometry, header snapshot, inode).
    pub fn file(&self) -> &RingFile {
        &self.file
    }
}

/// Whether a receive may make progress (see [`MpmcQueueConsumer::wait_once`]). A producer
/// that claims a ticket and then loses its message does not notify; a sleeper waiting for
/// that claim is bounded by its strategy's timeout.
fn ready(ring: &RingView, pending: Option<u64>) -> bool {
    match pending {
        Some(t) => {
            // Acquire: pairs with the producer's release store of the slot's sequence.
            let s = ring.slot_seq(t).load(Ordering::Acquire);
            // Relaxed: only decides whether to look again; try_recv re-reads everything.
            (s != SLOT_WRITING && s >= t)
                || ring.claim_seq().load(Ordering::Relaxed) > t.saturating_add(ring.capacity())
        }
        // Relaxed: as above.
        None => ring.claim_seq().load(Ordering::Relaxed) > ring.read_seq().load(Ordering::Relaxed),
    }
}

/// A consumer dropped while it holds a claimed ticket (its producer has not published it
/// yet) gives the ticket back to the other consumers if none has taken a later one
/// ([`LossyMpmcConsumer::give_back`]); otherwise the message is lost uncounted, as in
/// ringfire. A copy inherited by a forked child leaves the ticket alone: its parent still
/// holds it and may receive it.
impl<T> Drop for MpmcQueueConsumer<T> {
    fn drop(&mut self) {
        if !sys::forked_since(self.fork_generation) {
            let _ = self.inner.give_back();
        }
    }
}

impl<T> std::fmt::Debug for MpmcQueueConsumer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpmcQueueConsumer")
            .field("file", &self.file)
            .field("pending", &self.inner.pending())
            .field("dropped", &self.inner.dropped())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_fork::{assert_exited_0, forked};
    use crate::test_tmp::TmpPath;

    /// A consumer's copy inherited by a forked child and dropped there leaves the ticket its
    /// parent holds alone: given back, another consumer would take it while the parent still
    /// waits on it, and the message would be received twice.
    #[test]
    fn a_forked_childs_copy_dropped_leaves_its_parents_ticket() {
        let path = TmpPath::new("lossy-fork");
        let prod = MpmcProducer::<u64>::create(&path, 8).unwrap();
        let ring = prod.file.ring();
        // A producer drew ticket 1 and has not written it yet.
        assert_eq!(ring.claim_seq().fetch_add(1, Ordering::Relaxed), 1);
        let mut c = MpmcQueueConsumer::<u64>::attach(&path).unwrap();
        assert_eq!(c.try_recv(), None);
        assert_eq!(c.inner.pending(), Some(1));
        let status = forked(10, || {
            // SAFETY: this child never touches the original again (it leaves through
            // `_exit`), so the bitwise copy is its only copy of the consumer.
            let copy = unsafe { std::ptr::read(&c) };
            drop(copy);
            0
        });
        assert_exited_0(status, "drop of the copy in the child");
        assert_eq!(
            ring.read_seq().load(Ordering::Relaxed),
            2,
            "the child gave its parent's ticket back"
        );
        ring.write_slot(1, &7u64.to_ne_bytes());
        ring.write_seq().fetch_max(1, Ordering::Release);
        assert_eq!(c.try_recv(), Some(7));
        // The parent's own drop, holding nothing, changes nothing.
        drop(c);
        assert_eq!(ring.read_seq().load(Ordering::Relaxed), 2);
    }
}
