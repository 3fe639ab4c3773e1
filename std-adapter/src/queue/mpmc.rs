//! Typed MPMC handle: [`MpmcQueue`].

use std::io;
use std::marker::PhantomData;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ringwire_core::queue::{
    self as q, HealError, PopError, Popped, PushError, QueueKind, StuckKind, StuckSlot,
};

use super::mem::{QueueFileError, QueueMem};
use super::wait::{Side, before, deadline_after, default_wait, notify_gated, wait_side};
use super::{Item, expect_for, geometry_for, wrong_kind};
use crate::wait::WaitStrategy;

/// A handle on an MPMC queue of `T`; clone it for more producers and consumers.
///
/// ```
/// use ringwire::queue::MpmcQueue;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let q = MpmcQueue::<u64>::anonymous(64)?;
/// let producers: Vec<_> = (0..2u64)
///     .map(|p| {
///         let q = q.clone();
///         std::thread::spawn(move || {
///             for i in 0..10 {
///                 q.push_blocking(&(p * 100 + i), std::time::Duration::from_secs(5))
///                     .expect("room within 5 s");
///             }
///         })
///     })
///     .collect();
/// // Every item exactly once; items of one producer in the order it pushed them.
/// let mut got = Vec::new();
/// while got.len() < 20 {
///     if let (Some(v), _healed) = q.pop_blocking(std::time::Duration::from_secs(5))? {
///         got.push(v);
///     }
/// }
/// for p in producers {
///     p.join().unwrap();
/// }
/// let mine: Vec<u64> = got.iter().copied().filter(|v| *v < 100).collect();
/// assert_eq!(mine, (0..10).collect::<Vec<_>>());
/// got.sort();
/// assert_eq!(got, (0..10).chain(100..110).collect::<Vec<_>>());
/// # Ok(())
/// # }
/// ```
///
/// # Contention
///
/// A `try_push` or `try_pop` that keeps finding its position taken by other handles of its
/// side backs off with spin hints, and after 127 of them in one call yields the thread
/// (`std::thread::yield_now`, as crossbeam's `ArrayQueue` does; see
/// [`ringwire_core::queue::MpmcQueue::with_yield`]): with more threads than cores, the
/// thread that would free a slot or bring an item may be waiting for this core.
///
/// # No end of the items
///
/// Unlike an anonymous SPSC channel ([`SpscConsumer::is_abandoned`](super::SpscConsumer::is_abandoned)),
/// an MPMC queue, anonymous or not, never tells a consumer that no item will come any more,
/// and a blocking pop on a queue nobody pushes to waits out its whole timeout. The queue
/// cannot know: every handle both pushes and pops, and one handle may be shared by
/// reference among threads (it is `Sync`; scoped threads need no clone), so neither the
/// drop of the other handles nor a count of them proves that nobody will push again. A pop
/// that returned early on "this is the last handle" would end a consumer while a scoped
/// thread still pushes through the same handle. Producers that finish say so themselves:
/// one sentinel item per consumer, or a flag the consumers check between pops with short
/// timeouts.
#[derive(Debug, Clone)]
pub struct MpmcQueue<T: Item> {
    inner: q::MpmcQueue,
    // `mem.unfenced_notify()`, kept here with `inner`'s view so a push or pop reads only
    // this handle and the queue (see `wait::notify_on`).
    unfenced: bool,
    mem: Arc<QueueMem>,
    _t: PhantomData<fn(T) -> T>,
}

impl<T: Item> MpmcQueue<T> {
    /// Creates a fresh queue file of `capacity` items.
    pub fn create(path: impl AsRef<Path>, capacity: u64) -> Result<Self, QueueFileError> {
        let path = path.as_ref();
        let g = geometry_for::<T>(QueueKind::Mpmc, capacity)
            .map_err(|e| QueueFileError::geometry(Some(path), e))?;
        Self::from_mem(Arc::new(QueueMem::create(path, &g)?))
    }

    /// Opens an existing queue file. A handle that finds itself the only live handle on the
    /// file (no other process or handle has it open) heals every stuck slot, since their
    /// holders must have died: see [`MpmcQueue::healed_at_open`]. On a file system without
    /// record locks nothing can be proved, nothing is healed, and the handle opens without
    /// its lock: see [`MpmcQueue::is_guarded`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self, QueueFileError> {
        Self::from_mem(Arc::new(QueueMem::open(
            path,
            expect_for::<T>(QueueKind::Mpmc),
        )?))
    }

    /// A queue of `capacity` items in anonymous memory, for threads of one process.
    pub fn anonymous(capacity: u64) -> Result<Self, QueueFileError> {
        let g = geometry_for::<T>(QueueKind::Mpmc, capacity)
            .map_err(|e| QueueFileError::geometry(None, e))?;
        Self::from_mem(Arc::new(QueueMem::anonymous(&g)?))
    }

    fn from_mem(mem: Arc<QueueMem>) -> Result<Self, QueueFileError> {
        // The copy lives in the handle, which holds the mapping (`Arc<QueueMem>`).
        let inner = q::MpmcQueue::new(*mem.queue())
            .map_err(|e| wrong_kind(&mem, e))?
            .with_yield(std::thread::yield_now);
        Ok(MpmcQueue {
            inner,
            unfenced: mem.unfenced_notify(),
            mem,
            _t: PhantomData,
        })
    }

    /// Wakes the `side` sleepers after a push (`Data`) or a pop (`Space`).
    #[inline(always)]
    fn wake(&self, side: Side) {
        notify_gated(self.inner.view(), self.unfenced, side, || {
            self.mem.wake_gate(side)
        });
    }

    /// Pushes one item and returns its position, or fails with [`PushError::Full`].
    pub fn try_push(&self, item: &T) -> Result<u64, PushError> {
        let pos = self.inner.try_push(item.as_bytes())?;
        self.wake(Side::Data);
        Ok(pos)
    }

    /// Pushes one item, waiting up to `timeout` for space; [`PushError::Full`] after that.
    /// Waits by spinning briefly, then sleeping on the queue's futex (see
    /// [`MpmcQueue::push_timeout`] to choose the strategy).
    pub fn push_blocking(&self, item: &T, timeout: Duration) -> Result<u64, PushError> {
        self.push_timeout(item, &mut default_wait(), timeout)
    }

    /// Pushes one item, waiting for space with `wait` (any of the broadcast consumers'
    /// strategies: [`BusySpin`](crate::BusySpin), [`YieldBackoff`](crate::YieldBackoff),
    /// [`FutexWait`](crate::FutexWait), which sleeps on the queue's space futex and never
    /// past the timeout) for up to `timeout`; [`PushError::Full`] after that.
    pub fn push_timeout<W: WaitStrategy>(
        &self,
        item: &T,
        wait: &mut W,
        timeout: Duration,
    ) -> Result<u64, PushError> {
        let deadline = deadline_after(timeout);
        loop {
            match self.try_push(item) {
                Err(PushError::Full) if before(deadline) => {
                    wait_side(wait, self.mem.queue(), Side::Space, deadline, || {
                        self.inner.has_space()
                    });
                }
                r => {
                    wait.reset();
                    return r;
                }
            }
        }
    }

    /// Pops one item, waiting up to `timeout`; `Ok((None, healed))` after that. Waits by
    /// spinning briefly, then sleeping on the queue's futex (see
    /// [`MpmcQueue::pop_timeout`] to choose the strategy).
    pub fn pop_blocking(&self, timeout: Duration) -> Result<(Option<T>, u64), PopError> {
        self.pop_timeout(&mut default_wait(), timeout)
    }

    /// Pops one item, waiting for one with `wait` (as in [`MpmcQueue::push_timeout`]; a
    /// [`FutexWait`](crate::FutexWait) sleeps on the queue's data futex) for up to
    /// `timeout`; `Ok((None, healed))` after that.
    pub fn pop_timeout<W: WaitStrategy>(
        &self,
        wait: &mut W,
        timeout: Duration,
    ) -> Result<(Option<T>, u64), PopError> {
        let mut healed = 0;
        let item = self.pop_timeout_with_pos(wait, timeout, |_| healed += 1)?;
        Ok((item.map(|(_, t)| t), healed))
    }

    /// [`MpmcQueue::pop_timeout`] that also tells positions: the item's (the one its
    /// [`MpmcQueue::try_push`] returned, its ticket in the global FIFO order) with it, and
    /// each healed position passed on the way to `on_healed`.
    pub fn pop_timeout_with_pos<W: WaitStrategy>(
        &self,
        wait: &mut W,
        timeout: Duration,
        mut on_healed: impl FnMut(u64),
    ) -> Result<Option<(u64, T)>, PopError> {
        let deadline = deadline_after(timeout);
        loop {
            match self.try_pop_with_pos(&mut on_healed)? {
                None if before(deadline) => {
                    wait_side(wait, self.mem.queue(), Side::Data, deadline, || {
                        self.inner.has_item()
                    });
                }
                r => {
                    wait.reset();
                    return Ok(r);
                }
            }
        }
    }

    /// Pops the next item in global FIFO order; `Ok(None)` when nothing is ready. Healed
    /// positions (items lost with a dead producer) are passed and counted in the returned
    /// pair's second field.
    pub fn try_pop(&self) -> Result<(Option<T>, u64), PopError> {
        let mut healed = 0;
        let item = self.try_pop_with_pos(|_| healed += 1)?;
        Ok((item.map(|(_, t)| t), healed))
    }

    /// [`MpmcQueue::try_pop`] that also tells positions, as
    /// [`MpmcQueue::pop_timeout_with_pos`] does.
    pub fn try_pop_with_pos(
        &self,
        mut on_healed: impl FnMut(u64),
    ) -> Result<Option<(u64, T)>, PopError> {
        let mut t = T::new_zeroed();
        // The common case inline; passing healed positions goes on out of line.
        match self.inner.try_pop_fixed(t.as_mut_bytes()) {
            Ok(Popped::Item { pos }) => {
                self.wake(Side::Space);
                Ok(Some((pos, t)))
            }
            Ok(Popped::Healed { pos }) => {
                self.wake(Side::Space);
                on_healed(pos);
                self.pop_past_healed(&mut on_healed)
            }
            Err(PopError::Empty | PopError::Pending { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// [`MpmcQueue::try_pop_with_pos`] after a healed position: pops on, passing healed
    /// positions, until an item, an empty queue or one lap (at most one lap of healed
    /// positions can precede an item).
    #[cold]
    #[inline(never)]
    fn pop_past_healed(
        &self,
        on_healed: &mut dyn FnMut(u64),
    ) -> Result<Option<(u64, T)>, PopError> {
        let mut t = T::new_zeroed();
        for _ in 0..self.inner.view().capacity() {
            match self.inner.try_pop_fixed(t.as_mut_bytes()) {
                Ok(Popped::Item { pos }) => {
                    self.wake(Side::Space);
                    return Ok(Some((pos, t)));
                }
                Ok(Popped::Healed { pos }) => {
                    self.wake(Side::Space);
                    on_healed(pos);
                }
                Err(PopError::Empty | PopError::Pending { .. }) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// Claims the next position for an item without writing it, or fails with
    /// [`PushError::Full`]; [`MpmcQueue::write_claimed`] then writes and publishes it.
    /// Until then consumers wait at that position, and a claim whose producer died is what
    /// [`MpmcQueue::next_stuck_slot`] finds. A claim this process will not write after all
    /// (an error between the two calls) is given back with [`MpmcQueue::abandon_claim`]:
    /// left as it is, it stops every consumer at its position until the position is healed,
    /// which nobody can do safely while this process lives. [`MpmcQueue::try_push`] does
    /// both in one step.
    pub fn claim(&self) -> Result<u64, PushError> {
        self.inner.claim()
    }

    /// Gives back a position [`MpmcQueue::claim`] returned and that will not be written: it
    /// is healed as a dead producer's claim would be, so consumers pass it (counted as
    /// healed, no item) instead of waiting at it, and consumers asleep at it are woken. See
    /// [`q::MpmcQueue::abandon_claim`] for what a later `write_claimed` for it does and for
    /// the positions it refuses.
    pub fn abandon_claim(&self, pos: u64) -> Result<(), HealError> {
        self.heal_stuck_slot(StuckSlot {
            pos,
            kind: StuckKind::Claimed,
        })
    }

    /// Writes `item` into the position `pos` returned by [`MpmcQueue::claim`] (once) and
    /// publishes it; [`PushError::Healed`] if the position was healed meanwhile,
    /// [`PushError::AlreadyPublished`] if called again for it while its item is queued (see
    /// [`q::MpmcQueue::write_claimed`]).
    pub fn write_claimed(&self, pos: u64, item: &T) -> Result<(), PushError> {
        self.inner.write_claimed(pos, item.as_bytes())?;
        self.wake(Side::Data);
        Ok(())
    }

    /// The core queue, for raw access (its view, cursors and stamps).
    ///
    /// # Safety
    /// The core queue is `Copy` and does not borrow the mapping: neither the returned
    /// reference nor any copy of it may be used after this handle and all its clones are
    /// dropped, which unmaps the memory (as for [`QueueMem::view`]). Pushes through it do
    /// not wake consumers sleeping on the queue's futex.
    ///
    /// Safe code cannot take a copy that outlives the mapping:
    ///
    /// ```compile_fail,E0133
    /// let q = ringwire::queue::MpmcQueue::<u64>::anonymous(16).unwrap();
    /// let core = *q.core();
    /// drop(q);
    /// let _ = core.try_push(&7u64.to_ne_bytes());
    /// ```
    pub unsafe fn core(&self) -> &q::MpmcQueue {
        &self.inner
    }

    /// True when the path no longer names this queue's file (see
    /// [`QueueMem::is_replaced`]): handles that open the path share another queue.
    pub fn is_replaced(&self) -> bool {
        self.mem.is_replaced()
    }

    /// See [`q::MpmcQueue::next_stuck_slot`]: the first position at or after `from` that a
    /// producer or a consumer holds, and which of them.
    pub fn next_stuck_slot(&self, from: u64) -> Option<StuckSlot> {
        self.inner.next_stuck_slot(from)
    }

    /// See [`q::MpmcQueue::heal_stuck_slot`] and its caller contract (confirm that the
    /// producer or consumer holding the position is dead, then pass the [`StuckSlot`] that
    /// [`MpmcQueue::next_stuck_slot`] reported). A position a producer held is then ready to
    /// pop (consumers pass it), so consumers asleep at it are woken as by a push; that frees
    /// no slot (the pop that passes it does, and wakes producers then). A slot a consumer
    /// held is freed, so producers asleep on the full queue are woken as by a pop.
    pub fn heal_stuck_slot(&self, stuck: StuckSlot) -> Result<(), HealError> {
        self.inner.heal_stuck_slot(stuck)?;
        self.wake(match stuck.kind {
            StuckKind::Claimed | StuckKind::MidWrite => Side::Data,
            StuckKind::MidPop => Side::Space,
        });
        Ok(())
    }

    /// Positions this handle healed when it opened the file: when [`MpmcQueue::open`] finds
    /// no other live handle on the file (file locks prove it, and keep others out while it
    /// heals), every stuck slot's holder is dead, so it heals each one as
    /// [`MpmcQueue::heal_stuck_slot`] would: a position a producer claimed and never
    /// published is passed by the consumers (its item was never written), and a slot a
    /// consumer took and never freed is freed (its item left with that consumer). 0 when
    /// other handles had the file open: then stuck slots are left to a caller that can
    /// confirm their holders dead. Always 0 for `create` and `anonymous`.
    pub fn healed_at_open(&self) -> u64 {
        self.mem.healed_at_open()
    }

    /// Whether a lock on the file guards this handle: while it lives, `create` refuses to
    /// replace the file ([`QueueFileError::InUse`]), and an open can tell whether it is the
    /// only live handle (and then heal). False only for a handle [`MpmcQueue::open`] made
    /// on a file system without record locks (`fcntl(F_OFD_SETLK)` fails there with
    /// `ENOLCK`, `EINVAL` or `EOPNOTSUPP`, as on some network and FUSE file systems): it
    /// works as any other, but a `create` of the path may replace the file under it, and
    /// stuck slots are left to [`MpmcQueue::heal_stuck_slot`] (`healed_at_open` is 0). SPSC
    /// handles open there too, without their role locks
    /// ([`SpscProducer::is_guarded`](super::SpscProducer::is_guarded)). Always true for
    /// `create` (the creator's `flock` guards it) and `anonymous`.
    pub fn is_guarded(&self) -> bool {
        self.mem.is_guarded()
    }

    /// Items claimed and not yet popped.
    pub fn len(&self) -> u64 {
        self.inner.len()
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// See [`QueueMem::flush`].
    pub fn flush(&self) -> io::Result<()> {
        self.mem.flush()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicI32, Ordering};
    use std::time::{Duration, Instant};

    use ringwire_core::queue::{StuckKind, StuckSlot};

    use super::MpmcQueue;
    use crate::FutexWait;
    use crate::queue::tests::asleep_in_futex;

    #[test]
    fn healing_a_consumer_killed_mid_pop_wakes_a_producer_asleep_on_the_full_queue() {
        let q = MpmcQueue::<u64>::anonymous(2).unwrap();
        q.try_push(&1).unwrap();
        q.try_push(&2).unwrap();
        // A consumer took position 0 and was killed before freeing its slot.
        crate::queue::tests::kill_consumer_mid_pop(&q, 0);
        let tid = AtomicI32::new(0);
        std::thread::scope(|s| {
            let pusher = s.spawn(|| {
                // SAFETY: gettid has no preconditions.
                tid.store(unsafe { libc::gettid() }, Ordering::SeqCst);
                // Each futex sleep lasts up to 20 s: only a wake-up ends it early.
                let mut wait = FutexWait::new(0, Some(Duration::from_secs(20)));
                let r = q.push_timeout(&3, &mut wait, Duration::from_secs(20));
                (r, Instant::now())
            });
            let t0 = Instant::now();
            while !asleep_in_futex(tid.load(Ordering::SeqCst)) {
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "the push never slept"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
            let stuck = q.next_stuck_slot(0).unwrap();
            assert_eq!(
                stuck,
                StuckSlot {
                    pos: 0,
                    kind: StuckKind::MidPop
                }
            );
            let healed_at = Instant::now();
            assert_eq!(q.heal_stuck_slot(stuck), Ok(()));
            let (r, done) = pusher.join().unwrap();
            assert_eq!(r, Ok(2));
            let took = done - healed_at;
            assert!(
                took < Duration::from_secs(10),
                "woken {took:?} after the heal"
            );
        });
        assert_eq!(q.try_pop_with_pos(|_| ()), Ok(Some((1, 2))));
        assert_eq!(q.try_pop_with_pos(|_| ()), Ok(Some((2, 3))));
        assert_eq!(q.try_pop(), Ok((None, 0)));
    }

    /// A consumer killed asleep in another process leaves its count in `data_waiters`,
    /// which other live handles keep (only a lone open clears it). The pushes' wakes then
    /// wake nobody, and the mapping's gate rations them; a live consumer that sleeps later
    /// is still woken by the next push, not by its 10 s timeout.
    #[test]
    fn pushes_ration_their_wakes_for_a_consumer_killed_asleep() {
        let path = crate::test_tmp::TmpPath::shm("queue-mpmc-dead-sleeper");
        let q = MpmcQueue::<u64>::create(&path, 64).unwrap();
        let data = super::Side::Data;
        // A child process opens the queue and sleeps on it, empty, until its alarm kills it.
        let status = crate::test_fork::forked(1, || {
            let Ok(c) = MpmcQueue::<u64>::open(&path) else {
                return 2;
            };
            let mut wait = FutexWait::new(0, Some(Duration::from_secs(60)));
            let _ = c.pop_timeout(&mut wait, Duration::from_secs(60));
            3
        });
        let killed = libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGALRM;
        let counted = q.mem.queue().data_waiters().load(Ordering::Relaxed);
        let end = Instant::now() + Duration::from_secs(10);
        let mut moved = 0u64;
        while !q.mem.wake_gate(data).suspects_stale_sleeper() && Instant::now() < end {
            q.try_push(&moved).unwrap();
            assert_eq!(q.try_pop(), Ok((Some(moved), 0)));
            moved += 1;
        }
        let suspected = q.mem.wake_gate(data).suspects_stale_sleeper();
        let took = std::thread::scope(|s| {
            let consumer = s.spawn(|| {
                let t0 = Instant::now();
                let mut wait = FutexWait::new(0, Some(Duration::from_secs(10)));
                let r = q.pop_timeout(&mut wait, Duration::from_secs(20));
                (r, t0.elapsed())
            });
            std::thread::sleep(Duration::from_millis(50));
            q.try_push(&u64::MAX).unwrap();
            consumer.join().unwrap()
        });
        drop(q);
        assert!(
            killed,
            "the sleeper child was not killed by its alarm: {status:#x}"
        );
        assert_eq!(counted, 1, "the dead sleeper is counted");
        assert!(suspected, "no rationing after {moved} pushes in 10 s");
        assert_eq!(took.0, Ok((Some(u64::MAX), 0)));
        assert!(
            took.1 < Duration::from_secs(5),
            "the live consumer slept {took:?}"
        );
    }
}
