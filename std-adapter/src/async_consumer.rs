//! [`AsyncRingConsumer<T>`]: a [`RingConsumer<T>`] for async code, with
//! `async fn recv` and a [`Stream`] of records (feature `tokio`).
//!
//! It works under any executor (the tests and the example use tokio's); the only things it
//! hands to the executor are [`Waker`]s, and under tokio it also spends the task's
//! cooperative budget ([below](#sharing-the-executor)).
//!
//! # How it waits
//!
//! Each `AsyncRingConsumer` owns one waiter thread (named `ringwire-async`; only
//! [`AsyncRingConsumer::from_consumer`] goes on without one if it cannot start). A poll first
//! tries the ring; when it is empty, the poll stores the task's [`Waker`], the cursor it
//! waits for and the ring of the consumer it wraps now in a mutex shared with the waiter,
//! marks the waiter *armed*, and then tries the ring once more before returning `Pending`.
//! The armed waiter sleeps on that ring's futex word with [`FutexWait`] (spec §11, the
//! protocol documented in [`wait`]), one bounded sleep after another, and as soon as
//! `write_seq >= cursor` (on an MPMC-flagged ring: the cursor's ticket is published, or
//! `write_seq` is a lap past it) it disarms itself and wakes the stored waker. That holds
//! also when the cursor's slot still holds the write marker (a later lap's write, or one a
//! producer that died mid-write left for good): the consumer looks past such a slot on its
//! 64th empty poll in a row and counts the record lapped, so the waiter wakes the task
//! for those polls (a poll tries the ring twice, so up to 32 wakes) until it passes.
//! Once 64 polls in a row at one cursor have found `write_seq` and the cursor's slot
//! unchanged and nothing to read (a corrupt header: `write_seq` ahead of the slots), the
//! poll arms the waiter to wait for either to change instead, so such a ring leaves the
//! task and the waiter asleep, not waking each other. After a sleep that ran to its
//! timeout the waiter also looks at the consumer's registry slot: one that shows another
//! cursor than the consumer's (a corrupt file scribbled on it) keeps a lossless producer
//! waiting for a reader that, caught up, waits for the producer, so the waiter then wakes
//! the task, and the consumer publishes its cursor again on its 64th empty poll in a row
//! (a sync receive loop gets there after as many futex timeouts). A waiter that is not
//! armed blocks on a condition variable, not on the ring, so the producer never pays for
//! it. An idle awaiting consumer therefore costs one sleeping thread, woken once per futex
//! timeout (default [`DEFAULT_FUTEX_TIMEOUT`], 50 ms) to re-check the ring; a busy one
//! costs nothing beyond the `try_recv` calls while records keep coming (and, under tokio, a
//! turn of the executor once the task's budget is spent).
//!
//! ringfire's knobs shorten the path for records that come close together, at the price of
//! executor time: [`AsyncRingConsumer::with_spins`] has a poll try the ring more times before
//! it gives up, and [`AsyncRingConsumer::with_yields`] has that many empty polls in a row
//! return `Pending` with the task woken at once (another turn of the executor) before one
//! arms the waiter. Both default to 0. [`AsyncRingConsumer::with_idle_sleep`] sets the
//! futex timeout.
//!
//! # Sharing the executor
//!
//! Under tokio every receive ([`AsyncRingConsumer::recv`], `recv_seq`, `recv_detailed`,
//! `recv_batch`, `poll_recv`, `poll_recv_seq` and the [`Stream`]) takes part in the task's
//! cooperative budget ([`tokio::task::coop`]) as tokio's own channels do: a poll that
//! returns a record (or, for `recv_batch`, a batch) spends one unit, a poll that finds
//! nothing spends none, and once the budget is spent a poll returns `Pending` at once,
//! without looking at the ring, and the runtime polls the task again after its other tasks
//! and its drivers had their turn. A task looping on `recv().await` over a ring that always
//! has a record ready therefore yields after each budget's worth of records (128 units per
//! task poll in tokio 1.54, shared with the task's other tokio resources) instead of holding
//! its thread for as long as the producer keeps up, which would starve the other tasks of
//! a current-thread runtime (timers, a shutdown signal, another consumer); ringfire's
//! `AsyncRingConsumer` does hold it. While the budget has room the check is a thread-local
//! read and decrement, inlined in the poll. [`tokio::task::coop::unconstrained`] opts a
//! future out. Under another executor (no tokio runtime on the thread) the budget is
//! unlimited and every poll goes to the ring. The non-async `try_recv` and `recv_status`
//! spend no budget.
//!
//! # Why no wake-up is lost
//!
//! The waker is stored (under the mutex) before the poll returns `Pending`, and an armed
//! waiter disarms itself only when it has seen `write_seq >= cursor` (at a cursor the
//! consumer is stuck at: that, and `write_seq` or the cursor's slot changed since the poll
//! loaded them, before its tries) or, after a sleep that timed out, the consumer's registry
//! slot showing another cursor (see above), waking the stored waker right after; so a task
//! left `Pending` is always woken once its record is published. What §11 adds is
//! promptness: the waiter's every sleep is one `FutexWait::wait_on` with what the poll
//! armed it for (read under the mutex), which checks the ring first and, when it does
//! sleep, reads the futex word, announces itself in `waiting_consumers`, issues the
//! membarrier and checks again, so a publish it does not see bumps the word and issues
//! `FUTEX_WAKE` after the word was read and the sleep ends at once (see [`wait`]). A
//! publish between the poll's first try and the arming is caught by the poll's second try,
//! or else by the waiter's first check. Only a producer that never wakes anyone (ringfire's
//! Python producer) leaves the record to the end of the sleep, one futex timeout at most. A
//! poll that arms the waiter and then finds a record in its second try leaves the waiter
//! armed; its later wake is spurious, which wakers allow.
//!
//! A woken task whose poll finds nothing (a hole of a sparse mirror ring, say) just arms
//! the waiter again; this is the same re-check loop as [`RingConsumer::recv_blocking`]
//! with [`FutexWait`].
//!
//! # The ring the waiter watches
//!
//! [`AsyncRingConsumer::get_mut`] hands out the wrapped consumer, which the caller may
//! replace (with a consumer of the ring that replaced this one, say). The waiter therefore
//! never keeps a ring of its own: each arming passes the current consumer's ring, shared
//! (`Arc<RingFile>`), and the waiter takes a reference of it for every check and sleep, so
//! the mapping it reads stays mapped however the consumer was replaced or dropped. An
//! arming with another ring than the one the waiter sleeps on ends that sleep (as a
//! publish would: a flag the sleeper re-checks, the futex word bumped, `FUTEX_WAKE`), and
//! the waiter moves to the new ring at once.
//!
//! # After `fork`
//!
//! A forked child inherits the consumer but not the waiter thread (nor, possibly, an
//! unlocked mutex: the parent's waiter may have held it). The waiter remembers the process
//! that started it (its pid and how many forks led to it, so that a descendant that got
//! the pid back after the starter exited is told apart); in another,
//! [`AsyncRingConsumer::has_waiter`] is `false`, the first
//! poll that waits starts the child's own waiter with a fresh mutex, and dropping the
//! consumer neither stops nor joins the parent's thread. What the parent's waiter state
//! held (its waker, a reference of the ring) stays allocated in the child until it exits.
//!
//! # Cancellation and drop
//!
//! A record is taken from the ring only inside a poll that returns it, so dropping a
//! `recv()` future (a `select!` branch that lost, a timeout) loses no record.
//!
//! Dropping the consumer sets the waiter's stop flag under the mutex and notifies the
//! condition variable; while the waiter is inside a futex sleep it also ends that sleep
//! as a retargeting arming does (other sleepers of the ring wake spuriously, re-check and
//! sleep again), then repeats `FUTEX_WAKE` after pauses of 20 µs growing to 2 ms while the
//! thread runs. It then joins the waiter thread. The waiter checks the flag under the
//! mutex before every sleep, so the drop returns within microseconds to a few
//! milliseconds, not a futex timeout (and should every wake miss, still within one
//! timeout, since every sleep is finite). No thread outlives the consumer.
//! [`AsyncRingConsumer::into_inner`] ends the waiter the same way.

use std::fmt;
use std::future::poll_fn;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::Duration;

use futures_core::{FusedStream, Stream};
use ringwire_core::RingView;
use ringwire_core::broadcast::registry;
use zerocopy::FromBytes;

use crate::consumer::{RecvStatus, RingConsumer};
use crate::error::{Error, Result};
use crate::file::RingFile;
use crate::wait::{
    self, DEFAULT_FUTEX_TIMEOUT, FutexStats, FutexWait, Idle, WaitFor, WaitStrategy,
};

/// Name of every waiter thread (visible in `/proc/<pid>/task/*/comm`).
pub const WAITER_THREAD_NAME: &str = "ringwire-async";

/// An async reader of a typed broadcast ring: [`AsyncRingConsumer::recv`] and a
/// [`Stream`] of records. See the [module docs](self) for how it waits.
///
/// Under tokio each record a receive returns spends a unit of the task's cooperative budget,
/// so a task reading a ring that is never empty still yields to the runtime's other tasks
/// now and then ([sharing the executor](self#sharing-the-executor)).
pub struct AsyncRingConsumer<T> {
    // The waiter thread shares the ownership of every mapping it reads (module docs), so
    // the field order does not matter for safety; the waiter still drops first, so that
    // its thread is gone before the consumer's registry slot is given back.
    waiter: Waiter,
    consumer: RingConsumer<T>,
    /// Extra tries of the ring, with a spin-loop hint between them, before a poll gives up.
    max_spins: u32,
    /// Polls that find the ring empty and hand back to the executor before one arms the waiter.
    max_yields: u32,
    /// Such polls since the last record.
    yielded: u32,
    /// The empty polls at the consumer's cursor, for what the waiter waits for.
    idle: Idle,
}

/// The shortest futex sleep [`AsyncRingConsumer::with_idle_sleep`] and
/// [`AsyncRingConsumer::with_timeout`] accept; shorter ones are raised to it.
pub const MIN_IDLE_SLEEP: Duration = crate::wait::MIN_FUTEX_SLEEP;

/// The waiter thread's handle; dropping it stops and joins the thread.
struct Waiter {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// The process that started `thread`, and its fork generation then. A child forked
    /// since has the handle but not the thread: there the waiter counts as absent, and is
    /// neither told to stop nor joined. The generation tells such a child even when it has
    /// the starter's pid (the starter exited and the pid was reused); the pid, where forks
    /// go uncounted (see `sys::fork_generation`).
    pid: u32,
    fork_generation: u64,
    /// The futex timeout, also kept here (not only under the mutex) for the waiter a forked
    /// child starts: the parent's thread may have held that mutex when it forked.
    timeout: Duration,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled when the waiter is armed or told to stop.
    wake_waiter: Condvar,
    /// Ends the waiter's current futex sleep early (it re-checks it with the ring): it is
    /// told to stop, or to watch another ring. Cleared by the waiter, under the mutex,
    /// before each sleep; set under the mutex too, then notified on the ring it sleeps on.
    interrupt: AtomicBool,
}

struct State {
    /// The waker of the last poll that found the ring empty.
    waker: Option<Waker>,
    /// What the task waits for: its consumer's cursor at that poll to be published, or,
    /// at a cursor the consumer is stuck at, the ring to change (`wait::Idle`).
    target: WaitFor,
    /// The ring to watch: the mapping of the consumer wrapped at the last poll that armed
    /// the waiter (or at construction). Shared ownership: the waiter reads no ring that
    /// is not kept mapped by an `Arc` it holds, whatever the consumer is replaced with.
    ring: Arc<RingFile>,
    /// The registry slot of the consumer wrapped at the last arming, if it holds one: after
    /// a sleep that timed out the waiter wakes the task when that slot shows another
    /// cursor than `target`'s, so that the consumer's polls publish its cursor again.
    registry_slot: Option<u32>,
    /// The task waits: sleep on `ring` until the record at `cursor` may be read.
    armed: bool,
    /// The ring the waiter is in `FutexWait::wait_on` on (maybe asleep on its futex).
    sleeping_on: Option<Arc<RingFile>>,
    /// The consumer is being dropped: end the thread.
    stop: bool,
    /// The longest futex sleep, for the sleeps to come.
    timeout: Duration,
    /// How the waiter's futex sleeps ended so far.
    stats: FutexStats,
}

fn lock(shared: &Shared) -> MutexGuard<'_, State> {
    // Nothing panics while holding the lock (wakers run outside it), so a poisoned lock's
    // state is still consistent.
    shared.state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    fn new(ring: Arc<RingFile>, timeout: Duration) -> Arc<Shared> {
        Arc::new(Shared {
            state: Mutex::new(State {
                waker: None,
                target: WaitFor::default(),
                ring,
                registry_slot: None,
                armed: false,
                sleeping_on: None,
                stop: false,
                timeout,
                stats: FutexStats::default(),
            }),
            wake_waiter: Condvar::new(),
            interrupt: AtomicBool::new(false),
        })
    }
}

impl<T: FromBytes + 'static> AsyncRingConsumer<T> {
    /// Attaches to the ring at `path` as [`RingConsumer::attach`] does (ringfire's
    /// `AsyncRingConsumer::attach`) and wraps the consumer as [`AsyncRingConsumer::new`].
    pub fn attach(path: impl AsRef<std::path::Path>) -> Result<Self> {
        Self::new(RingConsumer::attach(path)?)
    }

    /// Wraps `consumer`, starting its waiter thread; futex sleeps last at most
    /// [`DEFAULT_FUTEX_TIMEOUT`]. Errors when the thread cannot be spawned.
    pub fn new(consumer: RingConsumer<T>) -> Result<Self> {
        Self::with_timeout(consumer, DEFAULT_FUTEX_TIMEOUT)
    }

    /// Like [`AsyncRingConsumer::new`], with each futex sleep bounded by `timeout` (which
    /// also bounds how long a drop can wait for the waiter, and how late a record from a
    /// producer that never wakes sleepers arrives). A timeout under [`MIN_IDLE_SLEEP`] is
    /// raised to it. [`AsyncRingConsumer::with_idle_sleep`] changes it later.
    pub fn with_timeout(consumer: RingConsumer<T>, timeout: Duration) -> Result<Self> {
        let (consumer, spawned) = Self::build(consumer, timeout, spawn_waiter);
        match spawned {
            Ok(()) => Ok(consumer),
            Err(source) => Err(Error::Io {
                path: consumer.consumer.file().path().to_path_buf(),
                op: "spawn the async consumer's waiter thread",
                source,
            }),
        }
    }

    /// Wraps `consumer` as [`AsyncRingConsumer::new`] does, without failing (ringfire's
    /// `AsyncRingConsumer::from_consumer`). Should the waiter thread not start (the process
    /// is out of threads), the consumer still delivers every record, but a poll that finds
    /// the ring empty asks the executor to poll it again at once: it waits by spinning
    /// through the executor instead of sleeping. [`AsyncRingConsumer::has_waiter`] tells.
    pub fn from_consumer(consumer: RingConsumer<T>) -> Self {
        Self::build(consumer, DEFAULT_FUTEX_TIMEOUT, spawn_waiter).0
    }

    /// Whether the waiter thread runs (always, unless [`AsyncRingConsumer::from_consumer`]
    /// could not start it). In a child forked from the process that started it, `false`
    /// until a poll that waits starts the child's own waiter (fork copies no thread but
    /// the caller's); likewise after the thread ended unexpectedly (a panic it did not
    /// catch), until a poll that waits starts another.
    pub fn has_waiter(&self) -> bool {
        self.waiter.runs_here()
    }

    /// Wraps `consumer` and starts its waiter thread with `spawn`; on failure the consumer
    /// has no waiter (see [`AsyncRingConsumer::from_consumer`]) and the error comes back.
    fn build(
        consumer: RingConsumer<T>,
        timeout: Duration,
        spawn: impl FnOnce(Arc<Shared>) -> std::io::Result<JoinHandle<()>>,
    ) -> (Self, std::io::Result<()>) {
        let timeout = timeout.max(MIN_IDLE_SLEEP);
        let shared = Shared::new(Arc::clone(consumer.shared_file()), timeout);
        let (thread, spawned) = match spawn(Arc::clone(&shared)) {
            Ok(t) => (Some(t), Ok(())),
            Err(e) => (None, Err(e)),
        };
        let waiter = Waiter {
            shared,
            thread,
            pid: std::process::id(),
            fork_generation: crate::sys::fork_generation(),
            timeout,
        };
        let consumer = AsyncRingConsumer {
            waiter,
            consumer,
            max_spins: 0,
            max_yields: 0,
            yielded: 0,
            idle: Idle::default(),
        };
        (consumer, spawned)
    }

    /// Has each poll that finds the ring empty try it `spins` more times, with a spin-loop
    /// hint between tries, before it yields or arms the waiter (ringfire's `with_spins`).
    /// Default 0: spinning inside a poll holds the executor's thread, so it pays only where
    /// records come microseconds apart and the task has the thread to itself.
    pub fn with_spins(mut self, spins: u32) -> Self {
        self.max_spins = spins;
        self
    }

    /// Lets up to `yields` polls in a row find the ring empty and hand the thread back to
    /// the executor, asking to be polled again at once, before a poll arms the waiter
    /// thread and the task sleeps (ringfire's `with_yields`). The count starts again after
    /// each record. A record that comes within those polls skips the waiter's wake-up (a
    /// thread hand-off of microseconds); other tasks still run between the polls. Default 0:
    /// the first empty poll arms the waiter, so an idle task costs no executor time.
    pub fn with_yields(mut self, yields: u32) -> Self {
        self.max_yields = yields;
        self
    }

    /// Bounds each of the waiter's futex sleeps by `sleep` from its next sleep on
    /// (ringfire's `with_idle_sleep`; the same bound as [`AsyncRingConsumer::with_timeout`]).
    /// A producer's publish ends a sleep at once, so this is the longest an idle consumer
    /// goes without re-checking the ring: how late a record comes from a producer that
    /// never wakes sleepers, and how often an idle waiter wakes. ringfire polls on a timer
    /// of this period instead (its default is 50 µs); ours defaults to
    /// [`DEFAULT_FUTEX_TIMEOUT`]. A sleep under [`MIN_IDLE_SLEEP`] is raised to it.
    pub fn with_idle_sleep(mut self, sleep: Duration) -> Self {
        let sleep = sleep.max(MIN_IDLE_SLEEP);
        self.waiter.timeout = sleep;
        if self.waiter.is_ours() {
            lock(&self.waiter.shared).timeout = sleep;
        }
        self
    }

    /// The next record; waits (without blocking the executor) until one is published.
    /// Overwritten records are skipped and counted in [`AsyncRingConsumer::lapped_count`],
    /// as with [`RingConsumer::try_recv`]. Cancel-safe: dropping the future loses nothing.
    ///
    /// A ring whose producer stopped, or was replaced by a restarted one
    /// ([`RingConsumer::is_replaced`] through [`AsyncRingConsumer::get_ref`]), never
    /// advances: bound the wait (`tokio::time::timeout`) where that matters.
    pub async fn recv(&mut self) -> T {
        poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// [`AsyncRingConsumer::recv`] with the record's sequence number.
    pub async fn recv_seq(&mut self) -> (u64, T) {
        poll_fn(|cx| self.poll_recv_seq(cx)).await
    }

    /// [`AsyncRingConsumer::recv`] with how many records were lost just before this one
    /// (ringfire's `recv_detailed`): `(record, 0)` when none were. The count is the rise of
    /// [`AsyncRingConsumer::lapped_count`] over the whole wait, so it includes records a
    /// poll found lost with nothing yet to return (the reader lapped while the producer was
    /// rewriting the oldest retained slot: [`RingConsumer::recv_status`] says `Empty` then;
    /// ringfire's `recv_detailed` counts only its last poll's). Losses found by an earlier
    /// `recv_detailed` dropped before it returned are counted in `lapped_count` only.
    pub async fn recv_detailed(&mut self) -> (T, u64) {
        let before = self.consumer.lapped_count();
        poll_fn(|cx| {
            self.poll_with(cx, |c| {
                let item = c.try_recv()?;
                Some((item, c.lapped_count().saturating_sub(before)))
            })
        })
        .await
    }

    /// Waits as [`AsyncRingConsumer::recv`] does until at least one record is there, then
    /// copies up to `buf.len()` of them into `buf` and returns how many (ringfire's async
    /// `recv_batch`). An empty `buf` returns 0 at once. Cancel-safe.
    pub async fn recv_batch(&mut self, buf: &mut [T]) -> usize {
        if buf.is_empty() {
            return 0;
        }
        poll_fn(|cx| self.poll_with(cx, |c| Some(c.recv_batch(buf)).filter(|&n| n > 0))).await
    }

    /// Polls for the next record: `Ready` with it, or `Pending` with `cx`'s waker
    /// registered with the waiter thread. Under tokio, also `Pending` (with the task to be
    /// polled again once it has yielded) when the task's cooperative budget is spent; see
    /// [sharing the executor](self#sharing-the-executor).
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<T> {
        self.poll_with(cx, RingConsumer::try_recv)
    }

    /// [`AsyncRingConsumer::poll_recv`] with the record's sequence number.
    pub fn poll_recv_seq(&mut self, cx: &mut Context<'_>) -> Poll<(u64, T)> {
        self.poll_with(cx, RingConsumer::try_recv_seq)
    }

    /// [`AsyncRingConsumer::poll_ring`] as one unit of the task's cooperative budget.
    fn poll_with<R>(
        &mut self,
        cx: &mut Context<'_>,
        take: impl FnMut(&mut RingConsumer<T>) -> Option<R>,
    ) -> Poll<R> {
        budgeted(cx, |cx| self.poll_ring(cx, take))
    }

    /// [`AsyncRingConsumer::poll_recv`] without the budget, for a caller that spends it
    /// once for several of these polls (the multiplexer's).
    pub(crate) fn poll_recv_unbudgeted(&mut self, cx: &mut Context<'_>) -> Poll<T> {
        self.poll_ring(cx, RingConsumer::try_recv)
    }

    /// Takes a record with `take`, or registers `cx`'s waker (with the waiter, or for an
    /// immediate re-poll) and returns `Pending`.
    fn poll_ring<R>(
        &mut self,
        cx: &mut Context<'_>,
        mut take: impl FnMut(&mut RingConsumer<T>) -> Option<R>,
    ) -> Poll<R> {
        let mut spins = 0;
        // The waiter sleeps on FutexWait, which looks at what it waits for.
        self.idle
            .before_poll::<FutexWait>(self.consumer.file().ring(), self.consumer.cursor());
        loop {
            if let Some(r) = take(&mut self.consumer) {
                self.yielded = 0;
                return Poll::Ready(r);
            }
            if spins == self.max_spins {
                break;
            }
            spins += 1;
            std::hint::spin_loop();
        }
        // Without a waiter thread (see from_consumer) every wait is a yield.
        if self.yielded < self.max_yields || !self.waiter.ready_here(&self.consumer) {
            self.yielded = self.yielded.saturating_add(1);
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        // The ring and cursor of the consumer wrapped now: `get_mut` may have replaced it.
        self.waiter.arm(
            cx.waker(),
            self.consumer.shared_file(),
            self.idle.target(self.consumer.cursor()),
            self.consumer.registry_slot(),
        );
        // Re-check after arming: a publish the first try missed but this one also misses
        // is one the armed waiter sees (module docs).
        match take(&mut self.consumer) {
            Some(r) => {
                self.yielded = 0;
                Poll::Ready(r)
            }
            None => Poll::Pending,
        }
    }

    /// The next record if one is there now, without waiting.
    pub fn try_recv(&mut self) -> Option<T> {
        let r = self.consumer.try_recv();
        if r.is_some() {
            // A record: the empty polls' yields start again (`with_yields`), as after a
            // record a poll takes.
            self.yielded = 0;
        }
        r
    }

    /// [`RingConsumer::recv_status`]: the next record if one is there now, and whether
    /// records were lost just before it, without waiting.
    pub fn recv_status(&mut self) -> RecvStatus<T> {
        let r = self.consumer.recv_status();
        if !matches!(r, RecvStatus::Empty) {
            // As in `try_recv`.
            self.yielded = 0;
        }
        r
    }

    /// [`RingConsumer::jump_to_latest`]: skips to the newest published record.
    pub fn jump_to_latest(&mut self) -> u64 {
        self.consumer.jump_to_latest()
    }

    /// [`RingConsumer::jump_to_oldest`]: skips to the oldest retained record if the
    /// cursor is behind it.
    pub fn jump_to_oldest(&mut self) -> u64 {
        self.consumer.jump_to_oldest()
    }

    /// Published records not read yet ([`RingConsumer::lag`]).
    pub fn lag(&self) -> u64 {
        self.consumer.lag()
    }

    /// Messages this reader lost (overwritten before read, or skipped at start).
    pub fn lapped_count(&self) -> u64 {
        self.consumer.lapped_count()
    }

    /// The next sequence to read.
    pub fn cursor(&self) -> u64 {
        self.consumer.cursor()
    }

    /// Number of slots of the ring.
    pub fn capacity(&self) -> u64 {
        self.consumer.capacity()
    }

    /// How the waiter thread's futex sleeps ended so far (zeros in a forked child until
    /// its own waiter starts).
    pub fn waiter_stats(&self) -> FutexStats {
        if self.waiter.is_ours() {
            lock(&self.waiter.shared).stats
        } else {
            FutexStats::default()
        }
    }

    /// The wrapped consumer (for `lag`, `seek`, `commit_offset`, `is_replaced`, …).
    pub fn get_ref(&self) -> &RingConsumer<T> {
        &self.consumer
    }

    /// The wrapped consumer, mutably. It may be replaced, say by a consumer of the ring
    /// that replaced this one ([`RingConsumer::is_replaced`]): the next poll that waits
    /// moves the waiter to the new consumer's ring and cursor, and the old mapping lives
    /// on only as long as the waiter still uses it.
    pub fn get_mut(&mut self) -> &mut RingConsumer<T> {
        // The consumer may be replaced: its polls are counted afresh.
        self.idle = Idle::default();
        &mut self.consumer
    }

    /// Ends the waiter thread (see the module docs on drop) and returns the consumer.
    pub fn into_inner(self) -> RingConsumer<T> {
        let AsyncRingConsumer {
            waiter, consumer, ..
        } = self;
        drop(waiter);
        consumer
    }
}

impl Waiter {
    /// Whether `thread` was started by this process (not inherited through `fork`).
    fn is_ours(&self) -> bool {
        self.pid == std::process::id() && !crate::sys::forked_since(self.fork_generation)
    }

    /// Whether a waiter thread of this process runs (and has not ended).
    fn runs_here(&self) -> bool {
        self.is_ours() && self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Whether a waiter thread of this process runs, after starting one in a forked child
    /// whose parent had one. The parent's thread, its mutex (which that thread may have
    /// held when the process forked) and the waker stored there are left alone: the child
    /// starts over with its own, watching `consumer`'s ring. Should the thread not start,
    /// the child's consumer goes on without a waiter (see `from_consumer`).
    ///
    /// A thread of this process that has ended although it was not told to stop (a panic
    /// outside the guard around the wake) is replaced too, by one on the same shared state
    /// (its lock recovers from poisoning), so a `Pending` task is not left unwoken.
    fn ready_here<T: FromBytes + 'static>(&mut self, consumer: &RingConsumer<T>) -> bool {
        if self.thread.is_none() {
            return false;
        }
        if self.is_ours() && self.thread.as_ref().is_some_and(JoinHandle::is_finished) {
            // The panic was reported when it happened; joining only collects the thread.
            let _ = self.thread.take().map(JoinHandle::join);
            self.thread = spawn_waiter(Arc::clone(&self.shared)).ok();
        } else if !self.is_ours() {
            // Never joined, never dropped: the thread and whatever the state holds belong to
            // the parent; the child keeps their bytes until it exits.
            std::mem::forget(self.thread.take());
            let fresh = Shared::new(Arc::clone(consumer.shared_file()), self.timeout);
            std::mem::forget(std::mem::replace(&mut self.shared, fresh));
            self.pid = std::process::id();
            self.fork_generation = crate::sys::fork_generation();
            self.thread = spawn_waiter(Arc::clone(&self.shared)).ok();
        }
        self.thread.is_some()
    }

    /// Stores `waker`, `ring`, `target` and the consumer's `registry_slot` and arms the
    /// waiter thread. When `ring` is not the ring the waiter sleeps on, that sleep is
    /// ended, so the waiter moves to `ring` at once.
    fn arm(
        &self,
        waker: &Waker,
        ring: &Arc<RingFile>,
        target: WaitFor,
        registry_slot: Option<u32>,
    ) {
        let mut st = lock(&self.shared);
        match &mut st.waker {
            Some(w) if w.will_wake(waker) => {}
            slot => *slot = Some(waker.clone()),
        }
        st.target = target;
        st.registry_slot = registry_slot;
        let mut old = None;
        let mut interrupt = None;
        if !Arc::ptr_eq(&st.ring, ring) {
            old = Some(std::mem::replace(&mut st.ring, Arc::clone(ring)));
            interrupt = st.sleeping_on.clone();
            if interrupt.is_some() {
                // Seq-cst: the notification below is the §11 notifier side, and this is
                // the state change its fence orders before the waiter-count load.
                self.shared.interrupt.store(true, Ordering::SeqCst);
            }
        }
        let was_armed = std::mem::replace(&mut st.armed, true);
        drop(st);
        if let Some(r) = interrupt {
            interrupt_sleep(&r);
        }
        // The last owner of a replaced consumer's mapping may be this `Arc`: unmapped here,
        // outside the lock.
        drop(old);
        if !was_armed {
            self.shared.wake_waiter.notify_one();
        }
    }
}

/// Ends a waiter's futex sleep on `ring` after its interrupt flag was set, as a producer's
/// publish does (spec §11): bump the futex word if a sleeper is announced, then
/// `FUTEX_WAKE`. Its re-check after announcing sees the flag, or its `FUTEX_WAIT` sees the
/// new word or is woken, so the interrupt is never lost. Other sleepers of the ring wake
/// once, re-check and sleep again.
fn interrupt_sleep(ring: &RingFile) {
    if ring.ring().futex().notify() {
        wait::wake_all(ring.ring());
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        if !self.is_ours() {
            // A forked child's copy of its parent's waiter: the thread is not in this
            // process (nothing to stop or join) and its mutex may have been held when the
            // process forked, so neither is touched. `shared` only loses a count here: the
            // thread's copy of it (its closure's) keeps it allocated.
            std::mem::forget(self.thread.take());
            return;
        }
        let mut st = lock(&self.shared);
        st.stop = true;
        st.waker = None;
        let sleeping = st.sleeping_on.clone();
        if sleeping.is_some() {
            // Seq-cst: as in `arm`.
            self.shared.interrupt.store(true, Ordering::SeqCst);
        }
        drop(st);
        self.shared.wake_waiter.notify_one();
        let Some(thread) = self.thread.take() else {
            return;
        };
        if thread.thread().id() == std::thread::current().id() {
            // Dropped by the waiter thread itself, inside the task's wake (an executor that
            // frees the task from its waker): a thread cannot wait for its own end. It is
            // not asleep; once the wake returns it sees `stop` and exits, and its handle is
            // let go here.
            return;
        }
        if let Some(r) = &sleeping {
            interrupt_sleep(r);
        }
        drop(sleeping);
        let mut pause = Duration::from_micros(20);
        while !thread.is_finished() {
            // Should a wake have missed anyway, repeat it while the waiter sleeps; its
            // timeout bounds the wait in any case.
            let sleeping = lock(&self.shared).sleeping_on.clone();
            if let Some(r) = sleeping {
                wait::wake_all(r.ring());
            }
            crate::sys::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(2));
        }
        // The thread's body does not panic (a waker's panic is caught around the wake); a
        // panic that ended it anyway is not re-raised from a drop.
        let _ = thread.join();
    }
}

/// Starts the waiter thread. It reads only rings it holds an `Arc` of (`State::ring`).
fn spawn_waiter(shared: Arc<Shared>) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(WAITER_THREAD_NAME.to_string())
        .spawn(move || run_waiter(&shared))
}

/// The waiter thread: wait to be armed, sleep on the ring until the record at the cursor
/// may be read, wake the task, repeat; return when told to stop. Each round takes the
/// ring and cursor the last arming stored.
fn run_waiter(shared: &Shared) {
    let mut st = lock(shared);
    let mut futex = FutexWait::new(0, Some(st.timeout));
    // The last sleep ran to its timeout: the ring stood still for that long.
    let mut timed_out = false;
    loop {
        if st.stop {
            return;
        }
        if !st.armed {
            st = shared
                .wake_waiter
                .wait(st)
                .unwrap_or_else(PoisonError::into_inner);
            continue;
        }
        let target = st.target;
        let idle = std::mem::take(&mut timed_out);
        if target.ready(st.ring.ring())
            || (idle && registry_stale(st.ring.ring(), st.registry_slot, target.cursor))
        {
            st.armed = false;
            let waker = st.waker.take();
            drop(st);
            if let Some(w) = waker {
                // A waker that panics must not end this thread: every later `Pending` poll
                // would wait for a wake that never comes. The panic is reported by the panic
                // hook and the thread goes on (the waker is dropped inside the guard too).
                let _ = std::panic::catch_unwind(AssertUnwindSafe(move || w.wake()));
            }
            st = lock(shared);
            continue;
        }
        let ring = Arc::clone(&st.ring);
        futex.set_timeout(st.timeout);
        // Relaxed: under the mutex, which orders it against the stores of `arm` and drop.
        shared.interrupt.store(false, Ordering::Relaxed);
        st.sleeping_on = Some(Arc::clone(&ring));
        drop(st);
        let timeouts = futex.stats().timed_out;
        // One bounded §11 sleep; it returns early when the target is ready, or when
        // `arm` or drop interrupts it (their flag is part of what it re-checks).
        futex.wait_on(ring.ring().futex(), None, || {
            // Seq-cst: the sleeper's re-check, paired with the interrupter's store.
            target.ready(ring.ring()) || shared.interrupt.load(Ordering::SeqCst)
        });
        st = lock(shared);
        let done = st.sleeping_on.take();
        st.stats = futex.stats();
        timed_out = st.stats.timed_out != timeouts;
        if !Arc::ptr_eq(&st.ring, &ring) {
            // Possibly the last owners of a replaced mapping: unmapped outside the lock.
            drop(st);
            drop(done);
            drop(ring);
            st = lock(shared);
        }
    }
}

/// Runs `poll` as one unit of the task's tokio budget, as tokio's own channels do: when the
/// budget is spent, `Pending` at once with the task woken after it yields (so a loop on a
/// ring that is never empty does not hold its thread for ever); a `Ready` spends one unit,
/// a `Pending` none. Outside a tokio runtime the budget is unlimited.
#[inline]
pub(crate) fn budgeted<R>(
    cx: &mut Context<'_>,
    poll: impl FnOnce(&mut Context<'_>) -> Poll<R>,
) -> Poll<R> {
    let coop = std::task::ready!(tokio::task::coop::poll_proceed(cx));
    let r = poll(cx);
    if r.is_ready() {
        coop.made_progress();
    }
    r
}

/// Whether registry slot `slot` of `ring` (the waiting consumer's, if it holds one) shows
/// another cursor than the consumer's `cursor`: a corrupt file scribbled on it, say. A
/// lossless producer then waits for a reader that, caught up, waits for the producer; the
/// consumer publishes its cursor again on its 64th empty poll in a row (as a sync receive
/// loop polls after each futex timeout), so the waiter wakes the task for those polls.
fn registry_stale(ring: &RingView, slot: Option<u32>, cursor: u64) -> bool {
    slot.is_some_and(|s| registry::published_cursor(ring, s) != Some(cursor))
}

impl<T: FromBytes + 'static> Stream for AsyncRingConsumer<T> {
    type Item = T;

    /// Never ends: `Ready(Some(record))` or `Pending`, like [`AsyncRingConsumer::recv`].
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        self.get_mut().poll_recv(cx).map(Some)
    }
}

impl<T: FromBytes + 'static> FusedStream for AsyncRingConsumer<T> {
    /// Always `false`: the stream never ends.
    fn is_terminated(&self) -> bool {
        false
    }
}

impl<T: FromBytes + 'static> fmt::Debug for AsyncRingConsumer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncRingConsumer")
            .field("consumer", &self.consumer)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RingProducer;
    use crate::test_fork::{assert_exited_0, forked};
    use crate::test_tmp::TmpPath;
    use ringwire_core::layout::SLOT_WRITING;

    #[tokio::test(flavor = "current_thread")]
    async fn without_a_waiter_thread_every_record_still_arrives() {
        let path = TmpPath::new("async-no-waiter");
        // Room for every record: a reader starved for 64 publishes (13 ms here, on a loaded
        // machine) was lapped by a ring of 64 and waited for records it had lost.
        let mut tx = RingProducer::<u64>::create(&path, 128).unwrap();
        tx.push(&1);
        let consumer = RingConsumer::<u64>::attach(&path).unwrap();
        let (mut rx, spawned) = AsyncRingConsumer::build(consumer, DEFAULT_FUTEX_TIMEOUT, |_| {
            Err(std::io::Error::from(std::io::ErrorKind::WouldBlock))
        });
        assert!(spawned.is_err() && !rx.has_waiter());
        let late = std::thread::spawn(move || {
            for v in 2..=100u64 {
                std::thread::sleep(Duration::from_micros(200));
                tx.push(&v);
            }
            tx
        });
        let got = tokio::time::timeout(Duration::from_secs(60), async {
            let mut got = Vec::new();
            for _ in 1..=100 {
                got.push(rx.recv().await);
            }
            got
        })
        .await
        .expect("records arrive without a waiter thread");
        assert_eq!(got, (1..=100).collect::<Vec<u64>>());
        drop(late.join());
        // The usual constructor starts the thread.
        assert!(AsyncRingConsumer::from_consumer(rx.into_inner()).has_waiter());
    }

    /// A waker that records its wake and unparks the thread that made it.
    struct Flag {
        woken: std::sync::atomic::AtomicBool,
        thread: std::thread::Thread,
    }

    impl std::task::Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.woken.store(true, std::sync::atomic::Ordering::SeqCst);
            self.thread.unpark();
        }
    }

    impl Flag {
        fn new() -> Arc<Flag> {
            Arc::new(Flag {
                woken: std::sync::atomic::AtomicBool::new(false),
                thread: std::thread::current(),
            })
        }

        /// Whether a wake came within `bound` (and clears it).
        fn woken_within(&self, bound: Duration) -> bool {
            let end = std::time::Instant::now() + bound;
            loop {
                if self.woken.swap(false, std::sync::atomic::Ordering::SeqCst) {
                    return true;
                }
                let now = std::time::Instant::now();
                if now >= end {
                    return false;
                }
                std::thread::park_timeout(end - now);
            }
        }
    }

    /// One poll of `rx` with `flag`'s waker.
    fn poll_once<T: FromBytes + 'static>(
        rx: &mut AsyncRingConsumer<T>,
        flag: &Arc<Flag>,
    ) -> Poll<T> {
        let waker = Waker::from(Arc::clone(flag));
        rx.poll_recv(&mut Context::from_waker(&waker))
    }

    /// Waits (bounded) until a sleeper (the waiter thread) is announced on `rx`'s ring.
    fn until_asleep<T: FromBytes + 'static>(rx: &AsyncRingConsumer<T>) -> bool {
        until_sleeper(rx.get_ref().file().ring())
    }

    /// Waits (bounded) until a sleeper is announced on `ring`.
    fn until_sleeper(ring: &RingView) -> bool {
        let end = std::time::Instant::now() + Duration::from_secs(10);
        while ring
            .futex()
            .waiters
            .load(ringwire_core::sync::Ordering::Acquire)
            == 0
        {
            if std::time::Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    #[tokio::test(flavor = "current_thread")]
    async fn async_consumer_follows_a_consumer_swapped_in_through_get_mut() {
        let (a, b) = (TmpPath::new("async-swap-a"), TmpPath::new("async-swap-b"));
        let _ta = RingProducer::<u64>::create(a.path(), 64).unwrap();
        let mut tb = RingProducer::<u64>::create(b.path(), 64).unwrap();
        // A futex timeout far beyond the test's bound: only a wake can deliver in time.
        let mut rx = AsyncRingConsumer::new(RingConsumer::<u64>::attach(a.path()).unwrap())
            .unwrap()
            .with_idle_sleep(Duration::from_secs(60));
        assert!(
            tokio::time::timeout(Duration::from_millis(20), rx.recv())
                .await
                .is_err()
        );
        assert!(until_asleep(&rx), "the waiter never slept on ring a");
        // The old consumer stays alive: its mapping is not the issue here, the target is.
        let old = std::mem::replace(rx.get_mut(), RingConsumer::attach(b.path()).unwrap());
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            tb.push(&7);
            tb
        });
        let got = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("a record on the new ring wakes the task");
        assert_eq!(got, 7);
        drop(late.join());
        drop(old);
    }

    /// `recv()` futures dropped while they wait (the losing branch of a `select!`, over and
    /// over), each followed by a new one, while a lossless producer publishes from another
    /// thread: every record arrives once, in order. Before each chunk the producer waits
    /// until the reader's waiter sleeps, so every chunk meets a reader whose waits are being
    /// cancelled.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn recv_futures_dropped_mid_wait_lose_and_repeat_no_record() {
        const CHUNKS: u64 = 50;
        const PER_CHUNK: u64 = 100;
        let t = TmpPath::new("async-cancel-churn");
        let mut tx = RingProducer::<u64>::builder(64)
            .max_readers(2)
            .flow_control(crate::FlowControl::LosslessBackpressure)
            .build::<u64, _>(t.path())
            .unwrap();
        let mut rx =
            AsyncRingConsumer::new(RingConsumer::<u64>::attach(t.path()).unwrap()).unwrap();
        let producer = std::thread::spawn(move || {
            for c in 0..CHUNKS {
                if !until_sleeper(tx.file().ring()) {
                    return Err(c);
                }
                for v in c * PER_CHUNK..(c + 1) * PER_CHUNK {
                    tx.push(&v);
                }
            }
            Ok(tx)
        });
        let (mut got, mut cancelled) = (Vec::new(), 0u64);
        let read = tokio::time::timeout(Duration::from_secs(60), async {
            while got.len() < (CHUNKS * PER_CHUNK) as usize {
                tokio::select! {
                    v = rx.recv() => got.push(v),
                    () = tokio::task::yield_now() => cancelled += 1,
                }
            }
        })
        .await;
        let producer = producer.join().unwrap();
        assert!(read.is_ok(), "{} records in 60 s", got.len());
        assert!(producer.is_ok(), "the reader never slept: {producer:?}");
        assert_eq!(got, (0..CHUNKS * PER_CHUNK).collect::<Vec<u64>>());
        assert!(cancelled > 0, "no wait was cancelled");
        assert_eq!(rx.try_recv(), None);
        assert_eq!(rx.lapped_count(), 0);
    }

    /// An executor that frees a task from its waker drops the consumer on the waiter
    /// thread, inside that thread's wake. The drop returns, the waiter thread ends, and the
    /// consumer's registry slot is given back (the drop used to wait for the waiter thread,
    /// its own, for ever: the slot stayed held, and a lossless producer would stall).
    #[test]
    fn a_consumer_dropped_inside_its_own_wake_ends_its_waiter() {
        struct DropOnWake {
            slot: std::sync::Mutex<Option<AsyncRingConsumer<u64>>>,
            dropped: std::sync::atomic::AtomicBool,
        }
        impl std::task::Wake for DropOnWake {
            fn wake(self: Arc<Self>) {
                self.wake_by_ref();
            }
            fn wake_by_ref(self: &Arc<Self>) {
                let taken = self.slot.lock().unwrap().take();
                drop(taken);
                self.dropped
                    .store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let t = TmpPath::new("async-drop-in-wake");
        let mut tx = RingProducer::<u64>::builder(8)
            .max_readers(2)
            .build::<u64, _>(t.path())
            .unwrap();
        let rx = AsyncRingConsumer::new(RingConsumer::<u64>::attach(t.path()).unwrap()).unwrap();
        let task = Arc::new(DropOnWake {
            slot: std::sync::Mutex::new(Some(rx)),
            dropped: std::sync::atomic::AtomicBool::new(false),
        });
        {
            let mut slot = task.slot.lock().unwrap();
            let rx = slot.as_mut().unwrap();
            let waker = Waker::from(Arc::clone(&task));
            assert!(rx.poll_recv(&mut Context::from_waker(&waker)).is_pending());
            assert!(until_asleep(rx));
        }
        assert_eq!(tx.registry().unwrap().active_readers(0).len(), 1);
        tx.push(&1);
        let end = std::time::Instant::now() + Duration::from_secs(10);
        while !task.dropped.load(std::sync::atomic::Ordering::SeqCst) {
            assert!(
                std::time::Instant::now() < end,
                "the drop inside the wake never returned"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(tx.registry().unwrap().active_readers(1).is_empty());
    }

    /// `with_yields(n)`: the count of empty polls that yield starts again after each
    /// record, also one taken with `try_recv` (as the async multiplexer takes them): every
    /// round of one empty poll then a record yields, never arms the waiter.
    #[test]
    fn yields_start_again_after_a_record_taken_with_try_recv() {
        let t = TmpPath::new("async-yields");
        let mut tx = RingProducer::<u64>::create(t.path(), 8).unwrap();
        let rx = AsyncRingConsumer::new(RingConsumer::<u64>::attach(t.path()).unwrap()).unwrap();
        let mut rx = rx.with_yields(2);
        let flag = Flag::new();
        for v in 1..=4u64 {
            assert!(poll_once(&mut rx, &flag).is_pending());
            // A yield wakes the task at once; an armed waiter would not.
            assert!(
                flag.woken.swap(false, std::sync::atomic::Ordering::SeqCst),
                "round {v}: the empty poll armed the waiter instead of yielding"
            );
            tx.push(&v);
            assert_eq!(rx.try_recv(), Some(v));
        }
    }

    #[test]
    fn async_consumer_survives_the_old_consumer_dropped_after_a_swap() {
        let (a, b) = (
            TmpPath::new("async-swap-drop-a"),
            TmpPath::new("async-swap-drop-b"),
        );
        let (pa, pb) = (a.path().clone(), b.path().clone());
        let status = forked(30, move || {
            let (Ok(_ta), Ok(mut tb)) = (
                RingProducer::<u64>::create(&pa, 64),
                RingProducer::<u64>::create(&pb, 64),
            ) else {
                return 10;
            };
            let Ok(rx) = AsyncRingConsumer::new(RingConsumer::<u64>::attach(&pa).unwrap()) else {
                return 11;
            };
            let mut rx = rx.with_idle_sleep(Duration::from_millis(2));
            let flag = Flag::new();
            if poll_once(&mut rx, &flag).is_ready() || !until_asleep(&rx) {
                return 12;
            }
            // The old consumer is dropped here: ring a's mapping of it goes away.
            *rx.get_mut() = RingConsumer::attach(&pb).unwrap();
            // Several futex timeouts: a waiter still on ring a reads unmapped memory.
            std::thread::sleep(Duration::from_millis(50));
            if poll_once(&mut rx, &flag).is_ready() {
                return 13;
            }
            std::thread::scope(|s| {
                s.spawn(|| {
                    std::thread::sleep(Duration::from_millis(20));
                    tb.push(&9);
                });
                if !flag.woken_within(Duration::from_secs(10)) {
                    return 2;
                }
                match poll_once(&mut rx, &flag) {
                    Poll::Ready(9) => 0,
                    _ => 3,
                }
            })
        });
        assert_exited_0(status, "swap then drop the old consumer");
    }

    #[test]
    fn a_forked_child_gets_its_own_waiter_and_drops_without_hanging() {
        let t = TmpPath::new("async-fork");
        let mut tx = RingProducer::<u64>::create(t.path(), 64).unwrap();
        let mut rx = Some(
            AsyncRingConsumer::new(RingConsumer::<u64>::attach(t.path()).unwrap())
                .unwrap()
                .with_idle_sleep(Duration::from_secs(60)),
        );
        // The parent's waiter has woken the task once and sleeps on the ring again.
        let flag = Flag::new();
        let parent = rx.as_mut().unwrap();
        assert!(poll_once(parent, &flag).is_pending());
        tx.push(&1);
        assert!(flag.woken_within(Duration::from_secs(10)));
        assert!(matches!(poll_once(parent, &flag), Poll::Ready(1)));
        assert!(poll_once(parent, &flag).is_pending());
        let status = forked(30, || {
            let Some(mut inherited) = rx.take() else {
                return 10;
            };
            let flag = Flag::new();
            if poll_once(&mut inherited, &flag).is_ready() {
                return 11;
            }
            let code = std::thread::scope(|s| {
                // The record comes through the parent's producer (the same shared file).
                s.spawn(|| {
                    std::thread::sleep(Duration::from_millis(50));
                    tx.push(&42);
                });
                if !flag.woken_within(Duration::from_secs(10)) {
                    return 2;
                }
                match poll_once(&mut inherited, &flag) {
                    Poll::Ready(42) if inherited.has_waiter() => 0,
                    Poll::Ready(42) => 4,
                    _ => 3,
                }
            });
            // Ends the child's waiter (a hang here is ended by the alarm). The consumer is
            // the parent's (its registry slot): left as it is, as the producer is.
            std::mem::forget(inherited.into_inner());
            code
        });
        assert_exited_0(status, "an AsyncRingConsumer inherited through fork");
        // The parent's consumer is untouched: its waiter wakes it for the child's record.
        // (The parent's producer is not used again: its next sequence is the one the child
        // just published.)
        let parent = rx.as_mut().unwrap();
        assert!(parent.has_waiter());
        assert!(flag.woken_within(Duration::from_secs(10)));
        assert!(matches!(poll_once(parent, &flag), Poll::Ready(42)));
        assert!(poll_once(parent, &flag).is_pending());
    }

    /// A process forked (through a child) after the process that started the waiter
    /// exited can get that process's pid back: pids are reused. The waiter told its own
    /// thread from an inherited one by the pid alone, so in such a process it took the
    /// starter's thread for its own: `has_waiter` said true with no thread there, a poll
    /// armed a waiter that did not exist (the task was never woken), and the drop waited for
    /// that thread to end, for ever. In a PID namespace of its own, whose next pid the test
    /// sets (`ns_last_pid`) so that the grandchild gets the exited starter's pid.
    #[test]
    #[ignore = "needs root: a PID namespace whose next pid it sets (ns_last_pid)"]
    fn a_process_that_got_the_starters_pid_back_does_not_take_its_waiter_for_its_own() {
        use libc::c_int;
        use std::time::Instant;
        /// One byte of verdict for the namespace's init.
        fn verdict(wr: c_int, code: u8) -> i32 {
            // SAFETY: writes one byte from a live local to a pipe this process holds.
            unsafe { libc::write(wr, (&code as *const u8).cast(), 1) };
            0
        }
        /// The grandchild, with the starter's pid: its inherited waiter is not its own.
        fn successor(rx: AsyncRingConsumer<u64>, starter: libc::pid_t) -> i32 {
            if std::process::id() != starter as u32 {
                return 33;
            }
            let claimed = rx.has_waiter();
            // With the pid check alone this waited for ever for the starter's thread.
            drop(rx);
            if claimed { 2 } else { 0 }
        }
        /// The starter's child: waits until the starter is reaped, has the namespace give
        /// its pid to the next process, forks it and reports how it ended.
        fn heir(rx: AsyncRingConsumer<u64>, starter: libc::pid_t, wr: c_int) -> i32 {
            let end = Instant::now() + Duration::from_secs(10);
            // SAFETY: signal 0 checks existence only; a zombie still exists until reaped.
            while unsafe { libc::kill(starter, 0) } == 0 {
                if Instant::now() >= end {
                    return verdict(wr, 31);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            if std::fs::write("/proc/sys/kernel/ns_last_pid", (starter - 1).to_string()).is_err() {
                return verdict(wr, 32);
            }
            // SAFETY: the child runs `successor` only and leaves through `_exit`.
            let w = unsafe { libc::fork() };
            if w == 0 {
                // SAFETY: ends the child without running inherited destructors.
                unsafe { libc::_exit(successor(rx, starter)) }
            }
            let end = Instant::now() + Duration::from_secs(5);
            let mut status: c_int = 0;
            loop {
                // SAFETY: waits for our own child; `status` is a valid place.
                if unsafe { libc::waitpid(w, &mut status, libc::WNOHANG) } == w {
                    let code = if libc::WIFEXITED(status) {
                        libc::WEXITSTATUS(status) as u8
                    } else {
                        34
                    };
                    return verdict(wr, code);
                }
                if Instant::now() >= end {
                    // SAFETY: kill and reap our own child.
                    unsafe {
                        libc::kill(w, libc::SIGKILL);
                        libc::waitpid(w, &mut status, 0);
                    }
                    // 1: the drop never returned.
                    return verdict(wr, 1);
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        /// Starts a waiter, forks the heir and exits, its pid free for reuse.
        fn starter(path: &std::path::Path, wr: c_int) -> i32 {
            let Ok(rx) = RingConsumer::<u64>::attach(path).and_then(AsyncRingConsumer::new) else {
                return verdict(wr, 30);
            };
            // The waiter thread has reached its wait for an arming.
            std::thread::sleep(Duration::from_millis(50));
            // Taken here: once this process exits, the heir's parent is the init.
            let me = std::process::id() as libc::pid_t;
            // SAFETY: the child runs `heir` only and leaves through `_exit`.
            let c = unsafe { libc::fork() };
            if c == 0 {
                // SAFETY: as above.
                unsafe { libc::_exit(heir(rx, me, wr)) }
            }
            0
        }
        /// The namespace's init: forks the starter, reaps it, returns the heir's verdict.
        /// Its exit ends every other process of the namespace.
        fn init(path: &std::path::Path, rd: c_int, wr: c_int) -> i32 {
            // SAFETY: alarm takes an integer and touches no memory of ours.
            unsafe { libc::alarm(25) };
            // SAFETY: the child runs `starter` only and leaves through `_exit`.
            let p = unsafe { libc::fork() };
            if p == 0 {
                // SAFETY: as above.
                unsafe { libc::_exit(starter(path, wr)) }
            }
            let mut status: c_int = 0;
            // SAFETY: reaps our own child, freeing its pid.
            unsafe { libc::waitpid(p, &mut status, 0) };
            let mut pfd = libc::pollfd {
                fd: rd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: `pfd` is one valid pollfd.
            if unsafe { libc::poll(&mut pfd, 1, 20_000) } != 1 {
                return 21;
            }
            let mut code = 0u8;
            // SAFETY: reads one byte into a live local.
            if unsafe { libc::read(rd, (&mut code as *mut u8).cast(), 1) } != 1 {
                return 22;
            }
            i32::from(code)
        }
        let t = TmpPath::new("async-pid-reuse");
        let status = forked(40, || {
            let Ok(_tx) = RingProducer::<u64>::create(t.path(), 8) else {
                return 10;
            };
            // SAFETY: changes only the PID namespace this process's next children join.
            if unsafe { libc::unshare(libc::CLONE_NEWPID) } != 0 {
                return 11;
            }
            let mut fds: [c_int; 2] = [0; 2];
            // SAFETY: `fds` is a valid array of two ints for pipe to fill.
            if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
                return 12;
            }
            // SAFETY: the child runs `init` only and leaves through `_exit`.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                // SAFETY: as above.
                unsafe { libc::_exit(init(t.path(), fds[0], fds[1])) }
            }
            let mut status: c_int = 0;
            // SAFETY: waits for our own child.
            if pid < 0 || unsafe { libc::waitpid(pid, &mut status, 0) } != pid {
                return 13;
            }
            if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                14
            }
        });
        // 1: the drop waited for the starter's thread for ever; 2: `has_waiter` said true
        // with no waiter thread in the process; 30 and up: the set-up failed.
        assert_exited_0(
            status,
            "a waiter inherited by a process with its starter's pid",
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_waker_that_panics_leaves_a_working_waiter() {
        /// Records that it was woken, then panics.
        struct Panics(std::sync::atomic::AtomicBool);
        impl std::task::Wake for Panics {
            fn wake(self: Arc<Self>) {
                self.0.store(true, std::sync::atomic::Ordering::SeqCst);
                panic!("a waker that panics (expected by this test)");
            }
        }
        let t = TmpPath::new("async-panicking-waker");
        let mut tx = RingProducer::<u64>::create(t.path(), 8).unwrap();
        let mut rx =
            AsyncRingConsumer::new(RingConsumer::<u64>::attach(t.path()).unwrap()).unwrap();
        let panics = Arc::new(Panics(std::sync::atomic::AtomicBool::new(false)));
        let waker = Waker::from(Arc::clone(&panics));
        assert!(rx.poll_recv(&mut Context::from_waker(&waker)).is_pending());
        tx.push(&1);
        let end = std::time::Instant::now() + Duration::from_secs(10);
        while !panics.0.load(std::sync::atomic::Ordering::SeqCst) {
            assert!(std::time::Instant::now() < end, "the waiter never woke");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(rx.recv().await, 1);
        // The waiter is back in its loop once the panic has unwound and dropped its clone of
        // the waker. The panic hook's report comes first: with RUST_BACKTRACE set, a
        // backtrace whose symbols took more than 5 s to resolve on a loaded machine, which
        // the timed wait below is not about.
        let end = std::time::Instant::now() + Duration::from_secs(60);
        while Arc::strong_count(&panics) > 2 {
            assert!(std::time::Instant::now() < end, "the panic never unwound");
            std::thread::sleep(Duration::from_millis(1));
        }
        // The next wait needs the waiter again: a record published later still arrives.
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            tx.push(&2);
            tx
        });
        let t0 = std::time::Instant::now();
        // (The timeout polls `recv` once more when it fires, which finds the record: only
        // the time taken tells a wake from the waiter.)
        let got = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
        let took = t0.elapsed();
        assert!(
            took < Duration::from_secs(3),
            "the task was not woken after a waker panicked (took {took:?})"
        );
        assert_eq!(got, Ok(2));
        assert!(rx.has_waiter());
        drop(late.join());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_waiter_thread_that_ended_is_started_again() {
        let t = TmpPath::new("async-waiter-ended");
        let mut tx = RingProducer::<u64>::create(t.path(), 8).unwrap();
        let consumer = RingConsumer::<u64>::attach(t.path()).unwrap();
        // A "waiter" that ends at once, as one that died would.
        let (mut rx, spawned) = AsyncRingConsumer::build(consumer, DEFAULT_FUTEX_TIMEOUT, |_| {
            std::thread::Builder::new().spawn(|| ())
        });
        assert!(spawned.is_ok());
        let end = std::time::Instant::now() + Duration::from_secs(10);
        while rx.has_waiter() {
            assert!(std::time::Instant::now() < end, "the thread never ended");
            std::thread::sleep(Duration::from_millis(1));
        }
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            tx.push(&1);
            tx
        });
        let t0 = std::time::Instant::now();
        let got = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
        let took = t0.elapsed();
        assert!(took < Duration::from_secs(3), "not woken (took {took:?})");
        assert_eq!(got, Ok(1));
        assert!(rx.has_waiter());
        drop(late.join());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn async_consumer_sleeps_at_a_write_seq_ahead_of_the_slots() {
        let t = TmpPath::new("async-ahead");
        let mut tx = RingProducer::<u64>::create(t.path(), 8).unwrap();
        tx.push(&1);
        // Sleeps of up to 30 s: only a wake-up delivers the late record below in time.
        let mut rx = AsyncRingConsumer::new(RingConsumer::<u64>::attach(t.path()).unwrap())
            .unwrap()
            .with_idle_sleep(Duration::from_secs(30));
        assert_eq!(rx.recv().await, 1);
        // A corrupt header: write_seq claims records 2..=5, whose slots hold nothing.
        tx.file()
            .ring()
            .write_seq()
            .store(5, ringwire_core::sync::Ordering::Release);
        assert_asleep_for_500ms(&mut rx).await;
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            tx.push(&2);
            tx
        });
        let t0 = std::time::Instant::now();
        let got = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await;
        let took = t0.elapsed();
        assert!(took < Duration::from_secs(5), "not woken (took {took:?})");
        assert_eq!(got, Ok(2));
        drop(late.join());
    }

    /// `rx.recv()` finds nothing for 500 ms, and neither the task nor the waiter thread
    /// spins meanwhile (each uses under 100 ms of CPU).
    async fn assert_asleep_for_500ms(rx: &mut AsyncRingConsumer<u64>) {
        let (task0, waiter0) = (crate::sys::thread_cpu_time(), waiter_cpu(rx));
        assert!(
            tokio::time::timeout(Duration::from_millis(500), rx.recv())
                .await
                .is_err()
        );
        let (task, waiter) = (
            crate::sys::thread_cpu_time() - task0,
            waiter_cpu(rx) - waiter0,
        );
        assert!(task < Duration::from_millis(100), "the task spun: {task:?}");
        assert!(
            waiter < Duration::from_millis(100),
            "the waiter spun: {waiter:?}, {:?}",
            rx.waiter_stats()
        );
    }

    /// CPU time the waiter thread of `rx` has used so far.
    fn waiter_cpu<T>(rx: &AsyncRingConsumer<T>) -> Duration {
        use std::os::unix::thread::JoinHandleExt;
        let handle = rx.waiter.thread.as_ref().expect("a waiter thread");
        let mut clock: libc::clockid_t = 0;
        // SAFETY: the thread is joined only when `rx` drops, so its id is valid; `clock` is
        // a valid place for the result.
        let r = unsafe { libc::pthread_getcpuclockid(handle.as_pthread_t(), &mut clock) };
        assert_eq!(r, 0);
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec.
        assert_eq!(unsafe { libc::clock_gettime(clock, &mut ts) }, 0);
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }

    /// As the sync consumer's test of the same name: with the reader caught up, its registry
    /// cursor scribbled a lap back holds a lossless producer's push, and the push holds the
    /// reader. The waiter, which never woke the task while the ring stood still, held both
    /// for good (the consumer republishes its cursor only on its 64th empty poll in a row).
    #[tokio::test(flavor = "current_thread")]
    async fn a_registry_cursor_scribbled_back_does_not_hold_a_lossless_producer_for_good() {
        let t = TmpPath::new("async-scribbled-registry");
        let mut tx = RingProducer::<u64>::builder(8)
            .max_readers(2)
            .flow_control(crate::FlowControl::LosslessBackpressure)
            .build::<u64, _>(t.path())
            .unwrap();
        // Short sleeps: the waiter looks at the registry slot after each that times out.
        let mut rx = AsyncRingConsumer::new(RingConsumer::<u64>::attach(t.path()).unwrap())
            .unwrap()
            .with_idle_sleep(Duration::from_millis(1));
        tx.push_batch(&[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(rx.recv_batch(&mut [0; 8]).await, 8);
        // `update_cursor` stands in for the scribble (the same store).
        rx.get_ref().registration().unwrap().update_cursor(1);
        assert_eq!(tx.headroom(), 0);
        let pusher = std::thread::spawn(move || {
            tx.push(&9);
            tx
        });
        let got = tokio::time::timeout(Duration::from_secs(20), rx.recv()).await;
        if got.is_err() {
            // Lets the push through, so that the test ends.
            rx.get_ref().registration().unwrap().update_cursor(9);
        }
        drop(pusher.join().unwrap());
        assert_eq!(got, Ok(9), "the producer and the reader held each other");
    }

    /// A reader lapped while the producer rewrites its oldest retained slot: the poll that
    /// counts the lap (records 2..=8) finds record 9 mid-write and returns nothing, and the
    /// next poll counts 9 lost too and delivers 10. `recv_detailed` said 1 record was lost
    /// just before 10: the last poll's count alone, the first one's 7 dropped.
    #[test]
    fn recv_detailed_counts_the_losses_of_every_poll_it_took() {
        let t = TmpPath::new("async-detailed-lap");
        let mut tx = RingProducer::<u64>::create(t.path(), 8).unwrap();
        let mut rx =
            AsyncRingConsumer::new(RingConsumer::<u64>::attach(t.path()).unwrap()).unwrap();
        tx.push(&1);
        assert_eq!(rx.try_recv(), Some(1));
        for v in 2..=16u64 {
            tx.push(&v);
        }
        // The producer's write of record 17 into record 9's slot, under way.
        tx.file()
            .ring()
            .slot_seq(9)
            .store(SLOT_WRITING, ringwire_core::sync::Ordering::Release);
        let waker = Waker::from(Flag::new());
        let mut cx = Context::from_waker(&waker);
        {
            let mut recv = std::pin::pin!(rx.recv_detailed());
            assert!(recv.as_mut().poll(&mut cx).is_pending());
            // The write ends: record 9 is gone too.
            tx.push(&17);
            assert_eq!(recv.as_mut().poll(&mut cx), Poll::Ready((10, 8)));
        }
        assert_eq!(rx.lapped_count(), 8);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn async_consumer_passes_a_slot_left_mid_write_then_sleeps() {
        let t = TmpPath::new("async-stuck");
        let mut tx = RingProducer::<u64>::create(t.path(), 8).unwrap();
        for v in 1..=8u64 {
            tx.push(&v);
        }
        let mut rx =
            AsyncRingConsumer::new(RingConsumer::<u64>::attach(t.path()).unwrap()).unwrap();
        assert_eq!(rx.cursor(), 1);
        // A producer died overwriting the reader's slot with the next lap (write_seq 8 >= 1):
        // record 1 is lost, the records behind it are delivered (the consumer looks at the
        // marker on its 64th empty poll in a row).
        tx.file()
            .ring()
            .slot_seq(1)
            .store(SLOT_WRITING, ringwire_core::sync::Ordering::Release);
        let got = tokio::time::timeout(Duration::from_secs(1), rx.recv()).await;
        assert_eq!(got, Ok(2));
        assert_eq!(rx.lapped_count(), 1);
        for v in 3..=8u64 {
            assert_eq!(rx.recv().await, v);
        }
        // Caught up: the task and its waiter sleep until the next record.
        assert_asleep_for_500ms(&mut rx).await;
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            tx.push(&9);
            tx
        });
        let got = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await;
        assert_eq!(got, Ok(9));
        drop(late.join());
    }
}
