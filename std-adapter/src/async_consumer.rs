//! [`AsyncRingConsumer<T>`]: a [`RingConsumer<T>`] for async code, with
//! `async fn recv` and a [`Stream`] of records (feature `tokio`).
//!
//! It works under any executor (the tests and the example use tokio's); the only things it
//! hands to the executor are [`Waker`]s.
//!
//! # How it waits
//!
//! Each `AsyncRingConsumer` owns one waiter thread (named `ringwire-async`; only
//! [`AsyncRingConsumer::from_consumer`] goes on without one if it cannot start). A poll first
//! tries the ring; when it is empty, the poll stores the task's [`Waker`] and the cursor
//! it waits for in a mutex shared with the waiter, marks the waiter *armed*, and then tries
//! the ring once more before returning `Pending`. The armed waiter sleeps on the ring's
//! futex word with [`FutexWait`] (spec §11, the protocol documented in
//! [`wait`]), one bounded sleep after another, and as soon as
//! `write_seq >= cursor` it disarms itself and wakes the stored waker. A waiter that is
//! not armed blocks on a condition variable, not on the ring, so the producer never pays
//! for it. An idle awaiting consumer therefore costs one sleeping thread, woken once per
//! futex timeout (default [`DEFAULT_FUTEX_TIMEOUT`], 50 ms) to re-check the ring; a busy
//! one costs nothing beyond the `try_recv` calls while records keep coming.
//!
//! ringfire's knobs shorten the path for records that come close together, at the price of
//! executor time: [`AsyncRingConsumer::with_spins`] has a poll try the ring more times before
//! it gives up, and [`AsyncRingConsumer::with_yields`] has that many empty polls in a row
//! return `Pending` with the task woken at once (another turn of the executor) before one
//! arms the waiter. Both default to 0. [`AsyncRingConsumer::with_idle_sleep`] sets the
//! futex timeout.
//!
//! # Why no wake-up is lost
//!
//! The waker is stored (under the mutex) before the poll returns `Pending`, and an armed
//! waiter disarms itself only when it has seen `write_seq >= cursor`, waking the stored
//! waker right after; so a task left `Pending` is always woken once its record is
//! published. What §11 adds is promptness: the waiter's every sleep is one
//! `FutexWait::wait` with the cursor read under the mutex after the poll armed it, which
//! checks `write_seq` first and, when it does sleep, reads the futex word, announces itself
//! in `waiting_consumers`, issues the membarrier and checks again, so a publish it does not
//! see bumps the word and issues `FUTEX_WAKE` after the word was read and the sleep ends at
//! once (see [`wait`]). A publish between the poll's first try and the arming is caught by
//! the poll's second try, or else by the waiter's first check. Only a producer that never
//! wakes anyone (ringfire's Python producer) leaves the record to the end of the sleep,
//! one futex timeout at most. A poll that arms the waiter and then finds a record in its
//! second try leaves the waiter armed; its later wake is spurious, which wakers allow.
//!
//! A woken task whose poll finds nothing (a write still in flight on a sparse mirror ring,
//! say) just arms the waiter again; this is the same re-check loop as
//! [`RingConsumer::recv_blocking`] with [`FutexWait`].
//!
//! # Cancellation and drop
//!
//! A record is taken from the ring only inside a poll that returns it, so dropping a
//! `recv()` future (a `select!` branch that lost, a timeout) loses no record.
//!
//! Dropping the consumer sets the waiter's stop flag under the mutex and notifies the
//! condition variable; while the waiter is inside a futex sleep it also issues `FUTEX_WAKE`
//! on the ring's word (other sleepers of the ring wake spuriously, re-check and sleep
//! again), repeating it after pauses of 20 µs growing to 2 ms in case one came just before
//! the waiter entered its sleep. It then joins the waiter thread, before the ring is
//! unmapped. The waiter checks the flag under the mutex before every sleep, so the drop
//! returns within microseconds to a few milliseconds, not a futex timeout (and should every
//! wake miss, still within one timeout, since every sleep is finite). No thread outlives
//! the consumer.
//! [`AsyncRingConsumer::into_inner`] ends the waiter the same way.

use std::fmt;
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::Duration;

use futures_core::{FusedStream, Stream};
use ringwire_core::RingView;
use zerocopy::FromBytes;

use crate::consumer::{RecvStatus, RingConsumer};
use crate::error::{Error, Result};
use crate::wait::{self, DEFAULT_FUTEX_TIMEOUT, FutexStats, FutexWait, WaitStrategy};

/// Name of every waiter thread (visible in `/proc/<pid>/task/*/comm`).
pub const WAITER_THREAD_NAME: &str = "ringwire-async";

/// An async reader of a typed broadcast ring: [`AsyncRingConsumer::recv`] and a
/// [`Stream`] of records. See the [module docs](self) for how it waits.
pub struct AsyncRingConsumer<T> {
    // Field order matters: `waiter` drops first and joins the waiter thread, which uses a
    // copy of the ring view, before `consumer` drops and unmaps the ring.
    waiter: Waiter,
    consumer: RingConsumer<T>,
    /// Extra tries of the ring, with a spin-loop hint between them, before a poll gives up.
    max_spins: u32,
    /// Polls that find the ring empty and hand back to the executor before one arms the waiter.
    max_yields: u32,
    /// Such polls since the last record.
    yielded: u32,
}

/// The shortest futex sleep [`AsyncRingConsumer::with_idle_sleep`] and
/// [`AsyncRingConsumer::with_timeout`] accept; shorter ones are raised to it.
pub const MIN_IDLE_SLEEP: Duration = Duration::from_micros(10);

/// The waiter thread's handle; dropping it stops and joins the thread.
struct Waiter {
    shared: Arc<Shared>,
    ring: RingView,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled when the waiter is armed or told to stop.
    wake_waiter: Condvar,
}

struct State {
    /// The waker of the last poll that found the ring empty.
    waker: Option<Waker>,
    /// The sequence the task waits for (its consumer's cursor at that poll).
    cursor: u64,
    /// The task waits: sleep on the ring until `write_seq >= cursor`.
    armed: bool,
    /// The waiter is inside `FutexWait::wait` (maybe asleep on the ring's futex).
    in_futex: bool,
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
    /// could not start it).
    pub fn has_waiter(&self) -> bool {
        self.waiter.thread.is_some()
    }

    /// Wraps `consumer` and starts its waiter thread with `spawn`; on failure the consumer
    /// has no waiter (see [`AsyncRingConsumer::from_consumer`]) and the error comes back.
    fn build(
        consumer: RingConsumer<T>,
        timeout: Duration,
        spawn: impl FnOnce(RingView, Arc<Shared>) -> std::io::Result<JoinHandle<()>>,
    ) -> (Self, std::io::Result<()>) {
        let timeout = timeout.max(MIN_IDLE_SLEEP);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                waker: None,
                cursor: 0,
                armed: false,
                in_futex: false,
                stop: false,
                timeout,
                stats: FutexStats::default(),
            }),
            wake_waiter: Condvar::new(),
        });
        let ring = *consumer.file().ring();
        let (thread, spawned) = match spawn(ring, Arc::clone(&shared)) {
            Ok(t) => (Some(t), Ok(())),
            Err(e) => (None, Err(e)),
        };
        let waiter = Waiter {
            shared,
            ring,
            thread,
        };
        let consumer = AsyncRingConsumer {
            waiter,
            consumer,
            max_spins: 0,
            max_yields: 0,
            yielded: 0,
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
    pub fn with_idle_sleep(self, sleep: Duration) -> Self {
        lock(&self.waiter.shared).timeout = sleep.max(MIN_IDLE_SLEEP);
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
    /// (ringfire's `recv_detailed`; see [`RingConsumer::recv_status`]): `(record, 0)` when
    /// none were.
    pub async fn recv_detailed(&mut self) -> (T, u64) {
        poll_fn(|cx| {
            self.poll_with(cx, |c| match c.recv_status() {
                RecvStatus::Ok(item) => Some((item, 0)),
                RecvStatus::Lapped { skipped, item } => Some((item, skipped)),
                RecvStatus::Empty => None,
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
    /// registered with the waiter thread.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<T> {
        self.poll_with(cx, RingConsumer::try_recv)
    }

    /// [`AsyncRingConsumer::poll_recv`] with the record's sequence number.
    pub fn poll_recv_seq(&mut self, cx: &mut Context<'_>) -> Poll<(u64, T)> {
        self.poll_with(cx, RingConsumer::try_recv_seq)
    }

    fn poll_with<R>(
        &mut self,
        cx: &mut Context<'_>,
        mut take: impl FnMut(&mut RingConsumer<T>) -> Option<R>,
    ) -> Poll<R> {
        let mut spins = 0;
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
        if self.yielded < self.max_yields || self.waiter.thread.is_none() {
            self.yielded = self.yielded.saturating_add(1);
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.waiter.arm(cx.waker(), self.consumer.cursor());
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
        self.consumer.try_recv()
    }

    /// [`RingConsumer::recv_status`]: the next record if one is there now, and whether
    /// records were lost just before it, without waiting.
    pub fn recv_status(&mut self) -> RecvStatus<T> {
        self.consumer.recv_status()
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

    /// How the waiter thread's futex sleeps ended so far.
    pub fn waiter_stats(&self) -> FutexStats {
        lock(&self.waiter.shared).stats
    }

    /// The wrapped consumer (for `lag`, `seek`, `commit_offset`, `is_replaced`, …).
    pub fn get_ref(&self) -> &RingConsumer<T> {
        &self.consumer
    }

    /// The wrapped consumer, mutably.
    pub fn get_mut(&mut self) -> &mut RingConsumer<T> {
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
    /// Stores `waker` and `cursor` and arms the waiter thread.
    fn arm(&self, waker: &Waker, cursor: u64) {
        let mut st = lock(&self.shared);
        match &mut st.waker {
            Some(w) if w.will_wake(waker) => {}
            slot => *slot = Some(waker.clone()),
        }
        st.cursor = cursor;
        let was_armed = std::mem::replace(&mut st.armed, true);
        drop(st);
        if !was_armed {
            self.shared.wake_waiter.notify_one();
        }
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        let mut st = lock(&self.shared);
        st.stop = true;
        st.waker = None;
        drop(st);
        self.shared.wake_waiter.notify_one();
        let Some(thread) = self.thread.take() else {
            return;
        };
        let mut pause = Duration::from_micros(20);
        while !thread.is_finished() {
            if lock(&self.shared).in_futex {
                // Ends the waiter's futex sleep now rather than at its timeout; repeated
                // while it lasts, in case a wake came before the waiter entered the sleep.
                // Every other sleeper on this ring wakes once, re-checks and sleeps again.
                wait::wake_all(&self.ring);
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(2));
        }
        // The thread's body does not panic (wakers run outside it and return nothing); a
        // panic in an executor's waker is not re-raised from a drop.
        let _ = thread.join();
    }
}

/// Starts the waiter thread on `ring`. The ring view is a copy of the consumer's; the thread
/// is joined (Waiter's drop) before the consumer unmaps the ring, as the Region contract asks.
fn spawn_waiter(ring: RingView, shared: Arc<Shared>) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(WAITER_THREAD_NAME.to_string())
        .spawn(move || run_waiter(ring, &shared))
}

/// The waiter thread: wait to be armed, sleep on the ring until `write_seq >= cursor`,
/// wake the task, repeat; return when told to stop.
fn run_waiter(ring: RingView, shared: &Shared) {
    let mut st = lock(shared);
    let mut futex = FutexWait::new(0, Some(st.timeout));
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
        if wait::published(&ring, st.cursor) {
            st.armed = false;
            let waker = st.waker.take();
            drop(st);
            if let Some(w) = waker {
                w.wake();
            }
            st = lock(shared);
            continue;
        }
        let cursor = st.cursor;
        futex.set_timeout(st.timeout);
        st.in_futex = true;
        drop(st);
        // One bounded §11 sleep; it returns early when the cursor is published.
        futex.wait(&ring, cursor);
        st = lock(shared);
        st.in_futex = false;
        st.stats = futex.stats();
    }
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

    #[tokio::test(flavor = "current_thread")]
    async fn without_a_waiter_thread_every_record_still_arrives() {
        let path =
            std::env::temp_dir().join(format!("ringwire-async-no-waiter-{}", std::process::id()));
        let mut tx = RingProducer::<u64>::create(&path, 64).unwrap();
        tx.push(&1);
        let consumer = RingConsumer::<u64>::attach(&path).unwrap();
        let (mut rx, spawned) =
            AsyncRingConsumer::build(consumer, DEFAULT_FUTEX_TIMEOUT, |_, _| {
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
}
