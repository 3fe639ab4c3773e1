//! How a consumer waits when it has caught up: [`BusySpin`], [`YieldBackoff`] and
//! [`FutexWait`] (spec §11). The lossless queues' blocking calls (`push_timeout`,
//! `pop_timeout` in [`crate::queue`]) take the same strategies: a queue consumer waits on
//! the queue's data pair for items, a producer on its space pair for room
//! ([`WaitStrategy::wait_on`]).
//!
//! # How `FutexWait` never loses a wake-up
//!
//! The producer (the core's `RingView::publish`, used by every ringwire producer) stores
//! `write_seq` (release), then with only a compiler fence loads `waiting_consumers`; if it
//! is non-zero it bumps `futex_word` and the adapter issues `FUTEX_WAKE` (shared, not
//! private, since sleepers may be in other processes). A ringfire producer does the same.
//!
//! The sleeper (`ringwire_core::futex::FutexPair::announce`) reads `futex_word` into `v`,
//! increments `waiting_consumers` (SeqCst), calls `membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED)`
//! and only then re-checks `write_seq`. The membarrier runs a full memory barrier on every
//! running thread of every process registered for it (ring creators register, spec §1.2
//! step 1), so the producer's store→load pair is ordered against the sleeper's: either the
//! re-check sees the new `write_seq` and the sleeper does not sleep, or the producer's load
//! sees the increment and bumps `futex_word` after the sleeper read `v`, so `FUTEX_WAIT(v)`
//! either fails at once (the word changed) or is already queued when `FUTEX_WAKE` runs (the
//! kernel checks the value and queues under one lock). The loom model
//! `core/tests/loom_futex.rs` checks this handshake, the queues' use of it too.
//!
//! [`FutexWait::with_deferred_barrier`] moves the membarrier (and a second re-check) a set
//! time into the sleep. Until then only the fences order the two sides, so a producer whose
//! publish races the announcement within its store-buffer drain time can miss the sleeper;
//! the deferred barrier bounds that delay to the set time. The replication threads park
//! with it (2 ms, in 2 ms slices: [`FutexWait::with_slices`]): the barrier's IPIs then fall
//! only in parks longer than a slice, not on every hand-off.
//!
//! Every sleep has a finite timeout: a producer that never wakes anyone (ringfire's Python
//! producer), or a process where membarrier is unavailable, delays a reader by at most that
//! long (`RingView::publish_fenced` closes the window without membarrier). Where the
//! kernel refuses `FUTEX_WAIT` altogether (a seccomp profile's EPERM or ENOSYS), a sleep
//! goes on as naps of [`FUTEX_ERROR_NAP`], looking at the ring after each: a record then
//! costs up to a nap, and an idle reader stays idle instead of spinning on the refusals.

use std::time::{Duration, Instant};

use ringwire_core::RingView;
use ringwire_core::broadcast::{LOOKASIDE_POLLS, Wake};
use ringwire_core::futex::{FutexPair, WakeGate};
use ringwire_core::layout::{Flags, SLOT_WRITING};
use ringwire_core::sync::Ordering;

use crate::sys::{self, FutexOutcome};

/// What a consumer does while the ring has nothing new at its cursor.
pub trait WaitStrategy: Send {
    /// True for a strategy that only spins (never yields or sleeps). A consumer waiting
    /// with it polls with the eager read (the payload is copied with every load of the
    /// sequence word, see `RingView::read_slot_eager`): the record arrives sooner, and
    /// keeping the payload lines shared while polling costs nothing a spinning reader
    /// would not pay anyway.
    const SPINS: bool = false;
    /// Waits a bounded time, and never past `deadline` when one is given, until `ready()`
    /// may hold. It may return early (spuriously); callers re-check and call it again. A
    /// strategy that sleeps does so on `pair` with the §11 handshake, so `pair` must be
    /// the one the other side notifies after each change `ready` looks for (a ring's
    /// futex pair, a queue's data or space pair).
    fn wait_on(
        &mut self,
        pair: FutexPair<'_>,
        deadline: Option<Instant>,
        ready: impl FnMut() -> bool,
    );
    /// Waits a bounded time for the record at `cursor` to be published (`write_seq >=
    /// cursor`; on an MPMC-flagged ring, that ticket's slot, even while `write_seq` is
    /// below it, or `write_seq` a lap past it): [`WaitStrategy::wait_on`] with the ring's
    /// futex pair and no deadline.
    #[inline]
    fn wait(&mut self, ring: &RingView, cursor: u64) {
        self.wait_until(ring, cursor, None);
    }
    /// [`WaitStrategy::wait`], never past `deadline` when one is given (the consumers'
    /// `recv_timeout`).
    #[inline]
    fn wait_until(&mut self, ring: &RingView, cursor: u64, deadline: Option<Instant>) {
        self.wait_on(ring.futex(), deadline, || published(ring, cursor));
    }
    /// Called after a message was received: resets any backoff state.
    fn reset(&mut self);
}

/// `now + timeout`, or `None` (no deadline) when that is past what an `Instant` holds.
pub(crate) fn deadline_after(timeout: Duration) -> Option<Instant> {
    Instant::now().checked_add(timeout)
}

/// Whether `deadline` (from [`deadline_after`]) is still ahead.
pub(crate) fn before(deadline: Option<Instant>) -> bool {
    deadline.is_none_or(|d| Instant::now() < d)
}

/// Whether a broadcast consumer at `cursor` may find something to do: `write_seq` has
/// reached it, or (MPMC-flagged rings) the record is published or a whole lap behind and
/// counts as lost. On an MPMC-flagged ring the slot is looked at even while `write_seq` is
/// below the cursor: a producer stores its ticket there before its `fetch_max` of
/// `write_seq` (spec §8.1), and one stopped between the two (killed, stopped, descheduled)
/// would leave a waiter asleep at a readable record until its timeout.
///
/// On a ring with one writer, a published cursor whose slot reads [`SLOT_WRITING`] is
/// something to do too: a later lap is overwriting the record, or a producer that died
/// mid-write left the marker for good, and the consumer counts the record lapped and moves
/// past it (`Consumer`'s and `BlobReader`'s receive, on the [`LOOKASIDE_POLLS`]th empty poll
/// in a row, so a waiter there returns at once up to that many times). Users of this test that only wait (the
/// replication source's waiters) must act on such a slot too, not poll it (`RingSource`
/// reports it overwritten).
///
/// A consumer that keeps finding nothing at a published cursor (a corrupt header: a
/// `write_seq` ahead of the slots) would make a waiter trusting this test spin; the
/// consumers' receive loops therefore wait through [`Idle`], which then waits for the ring
/// to change instead.
#[inline(always)]
pub(crate) fn published(ring: &RingView, cursor: u64) -> bool {
    // Acquire: a reader that sees the new write_seq also sees the slots published before it.
    let w = ring.write_seq().load(Ordering::Acquire);
    if ring.geometry().flags.has(Flags::MODE_MPMC) {
        // Even below write_seq: a producer stores its ticket before its fetch_max (§8.1).
        return mpmc_ready(ring, cursor, w);
    }
    w >= cursor
}

/// What a consumer's receive loop waits for after an empty poll.
///
/// [`published`] says "something to do" as soon as `write_seq` has reached the cursor, which
/// a consumer at a slot left mid-write needs (it passes the slot on its
/// [`LOOKASIDE_POLLS`]th empty poll).
/// But on a ring whose header is corrupt (a `write_seq` ahead of the slots on a ring that
/// is neither sparse nor MPMC-flagged) the consumer finds nothing to do there however often
/// it polls, and a wait that trusted `published` would return at once for ever: a waiter
/// spinning at 100% CPU. So once a loop has polled [`LOOKASIDE_POLLS`] times in a row at one
/// cursor, it loads `write_seq` and the cursor's slot before each poll; when that many polls
/// in a row saw both unchanged (so the consumer's look past the slot ran on what they hold,
/// and found nothing), the wait is for either of them to change, not for `published`
/// alone. Loaded before the poll, they cannot miss a record: one published after the loads
/// changes them, one published before is what the poll reads.
///
/// Spinning strategies ([`WaitStrategy::SPINS`]) ignore what they wait for; for them the
/// loads are skipped (a spinner at the head would pull the header's line on every spin).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Idle {
    /// The cursor of the polls counted.
    cursor: u64,
    /// Empty polls at `cursor`, up to [`LOOKASIDE_POLLS`].
    polls: u32,
    /// `write_seq` and the cursor's slot sequence, loaded before the last poll.
    seen: Option<(u64, u64)>,
    /// Polls in a row that found `seen` unchanged.
    same: u32,
}

impl Idle {
    /// Before each poll of a receive loop at `cursor`.
    #[inline]
    pub(crate) fn before_poll<W: WaitStrategy>(&mut self, ring: &RingView, cursor: u64) {
        if W::SPINS {
            return;
        }
        if cursor != self.cursor {
            *self = Idle {
                cursor,
                ..Idle::default()
            };
        }
        if self.polls < LOOKASIDE_POLLS {
            self.polls += 1;
            return;
        }
        self.look(ring);
    }

    #[cold]
    fn look(&mut self, ring: &RingView) {
        // Acquire, write_seq first: as `published`, so a record `w` covers is in its slot.
        let w = ring.write_seq().load(Ordering::Acquire);
        // Acquire: pairs with the writer's release store of the sequence word.
        let now = (w, ring.slot_seq(self.cursor).load(Ordering::Acquire));
        if self.seen == Some(now) {
            self.same = self.same.saturating_add(1);
        } else {
            self.seen = Some(now);
            self.same = 1;
        }
    }

    /// For a waiter called after each empty poll at `cursor` (the replication source's
    /// waiters, whose poll is the caller's): counts the poll and, past
    /// [`LOOKASIDE_POLLS`] of them, loads `write_seq` and the cursor's slot as
    /// [`Idle::before_poll`] does, then returns what to wait for. Loaded after the poll, they
    /// still cannot miss a record: one published since the poll changes what they load,
    /// which restarts the count of unchanged looks, so the wait is for `published` alone.
    #[inline]
    pub(crate) fn after_empty_poll(&mut self, ring: &RingView, cursor: u64) -> WaitFor {
        self.before_poll::<FutexWait>(ring, cursor);
        self.target(cursor)
    }

    /// What the wait after an empty poll at `cursor` waits for.
    #[inline]
    pub(crate) fn target(&self, cursor: u64) -> WaitFor {
        let stuck = cursor == self.cursor && self.same >= LOOKASIDE_POLLS;
        WaitFor {
            cursor,
            unchanged: self.seen.filter(|_| stuck),
        }
    }

    /// Waits with `wait` for [`Idle::target`] at `cursor`, never past `deadline`.
    #[inline]
    pub(crate) fn wait<W: WaitStrategy>(
        &self,
        wait: &mut W,
        ring: &RingView,
        cursor: u64,
        deadline: Option<Instant>,
    ) {
        let target = self.target(cursor);
        wait.wait_on(ring.futex(), deadline, || target.ready(ring));
    }
}

/// What a waiting consumer waits for ([`Idle::target`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct WaitFor {
    /// The consumer's cursor.
    pub(crate) cursor: u64,
    /// When the consumer is stuck at `cursor`: the `write_seq` and slot sequence it polled
    /// with, to wait for a change of.
    unchanged: Option<(u64, u64)>,
}

impl WaitFor {
    /// Whether the consumer may find something to do now.
    #[inline]
    pub(crate) fn ready(&self, ring: &RingView) -> bool {
        published(ring, self.cursor)
            && self.unchanged.is_none_or(|(w, s)| {
                // Acquire: as in `Idle::look`.
                ring.write_seq().load(Ordering::Acquire) != w
                    || ring.slot_seq(self.cursor).load(Ordering::Acquire) != s
            })
    }
}

/// On an MPMC-flagged ring `write_seq` is the highest ticket published, not the last of a
/// contiguous run: the ticket at `cursor` may still be claimed, or its producer dead, and
/// a ticket stored in its slot may be above it. The consumer can act once that slot is
/// published (or holds a later lap) or `write_seq` is a lap past it (its lap rule then
/// counts the ticket lost); before that, a waiter must sleep, not spin.
#[cold]
fn mpmc_ready(ring: &RingView, cursor: u64, write_seq: u64) -> bool {
    // Acquire: pairs with the producer's release store of the slot's sequence word.
    let s = ring.slot_seq(cursor).load(Ordering::Acquire);
    // Below write_seq, only a ticket a producer may have stored (under claim_seq): a
    // corrupt word there would otherwise keep every waiter awake at a record never coming.
    let stored = write_seq >= cursor || s <= ring.newest_writable(write_seq);
    (s != SLOT_WRITING && s >= cursor && stored)
        || write_seq >= cursor.saturating_add(ring.capacity())
}

/// Polls with a spin-loop hint: lowest latency, one core busy while waiting.
#[derive(Clone, Copy, Debug, Default)]
pub struct BusySpin;

impl BusySpin {
    /// A busy spinner.
    pub fn new() -> Self {
        BusySpin
    }
}

impl WaitStrategy for BusySpin {
    const SPINS: bool = true;

    #[inline]
    fn wait_on(&mut self, _: FutexPair<'_>, _: Option<Instant>, _: impl FnMut() -> bool) {
        std::hint::spin_loop();
    }
    fn reset(&mut self) {}
}

/// Spins up to `max_spins` times, then yields the CPU on every further wait.
#[derive(Clone, Copy, Debug)]
pub struct YieldBackoff {
    max_spins: u32,
    spins: u32,
}

impl Default for YieldBackoff {
    /// 64 spins before yielding, as ringfire's.
    fn default() -> Self {
        YieldBackoff::new(64)
    }
}

impl YieldBackoff {
    /// Spin `max_spins` times before yielding.
    pub fn new(max_spins: u32) -> Self {
        YieldBackoff {
            max_spins,
            spins: 0,
        }
    }
}

impl WaitStrategy for YieldBackoff {
    fn wait_on(&mut self, _: FutexPair<'_>, _: Option<Instant>, _: impl FnMut() -> bool) {
        if self.spins < self.max_spins {
            self.spins += 1;
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
    fn reset(&mut self) {
        self.spins = 0;
    }
}

/// Default futex sleep timeout (spec §11).
pub const DEFAULT_FUTEX_TIMEOUT: Duration = Duration::from_millis(50);
/// Timeout used when `None` is configured: sleeps are always finite.
pub const NONE_FUTEX_TIMEOUT: Duration = Duration::from_millis(10);
/// The shortest sleep [`FutexWait`] makes: a shorter timeout is raised to it, and a wait
/// with less than this left before the caller's deadline spins out the rest instead of
/// sleeping. A sleep of a few nanoseconds would cost the handshake's `membarrier`, which
/// interrupts every CPU, and a futex system call that returns at once: a zero timeout made
/// every wait a busy spin, a 1 ns one about 400,000 barriers a second.
pub const MIN_FUTEX_SLEEP: Duration = Duration::from_micros(10);

/// Counters of how a [`FutexWait`]'s sleeps ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FutexStats {
    /// Sleeps entered (`FUTEX_WAIT` calls).
    pub sleeps: u64,
    /// Returned because of `FUTEX_WAKE`.
    pub woken: u64,
    /// Returned at once because `futex_word` had already changed.
    pub changed: u64,
    /// Returned because the timeout passed.
    pub timed_out: u64,
    /// Interrupted by a signal; the caller re-checks anyway.
    pub interrupted: u64,
    /// `FUTEX_WAIT` calls the kernel refused with an error other than the expected ones (a
    /// seccomp filter's EPERM or ENOSYS): the sleep went on in naps of [`FUTEX_ERROR_NAP`]
    /// instead. Non-zero means sleeping readers here poll every millisecond and are woken
    /// only by their naps.
    pub failed: u64,
    /// Waits skipped because the re-check after announcing the sleeper found a message.
    pub rechecked: u64,
    /// Deferred barriers run ([`FutexWait::with_deferred_barrier`]): sleeps that outlasted
    /// their unbarriered part.
    pub late_barriers: u64,
    /// Sleeps ended by the re-check after a deferred barrier or a slice
    /// ([`FutexWait::with_slices`]): the message came without a wake-up reaching this
    /// sleeper in time (published unannounced, by a writer that wakes nobody, a wake-up
    /// lost to the race the barrier closes, or one still on its way from a producer held
    /// up between its publish and its `FUTEX_WAKE` for longer than the deferral).
    pub late_found: u64,
}

/// How many of [`FutexWait`]'s spins run between two looks at the clock (when the caller
/// gave a deadline).
const SPINS_PER_CLOCK: u32 = 64;

/// Spins a little, then sleeps on the ring's shared futex word until the producer publishes
/// (spec §11). The producer pays nothing while nobody sleeps.
///
/// A sleeper killed while asleep (SIGKILL, a crash) stays counted in the ring's
/// `waiting_consumers`: spec §11 has no way to retire it. From then on every publish bumps
/// the futex word and looks for a sleeper to wake, until the ring is recreated; ringwire's
/// producers ([`FutexWake`]) soon stop making a system call for it each time, ringfire's
/// do not. `ringwire stat` shows the count.
#[derive(Clone, Debug)]
pub struct FutexWait {
    spin_limit: u32,
    timeout: Duration,
    barrier_after: Option<Duration>,
    /// Longest futex wait between two looks at `ready` (`Duration::MAX`: one wait).
    slice: Duration,
    stats: FutexStats,
}

impl Default for FutexWait {
    fn default() -> Self {
        FutexWait::new(32, Some(DEFAULT_FUTEX_TIMEOUT))
    }
}

impl FutexWait {
    /// Spins `spin_limit` times before sleeping (fewer when a deadline comes first); each
    /// sleep lasts at most `timeout` (`None` means 10 ms: a sleep is never unbounded; a
    /// timeout under [`MIN_FUTEX_SLEEP`] is raised to it).
    pub fn new(spin_limit: u32, timeout: Option<Duration>) -> Self {
        FutexWait {
            spin_limit,
            timeout: timeout.unwrap_or(NONE_FUTEX_TIMEOUT).max(MIN_FUTEX_SLEEP),
            barrier_after: None,
            slice: Duration::MAX,
            stats: FutexStats::default(),
        }
    }

    /// Runs the handshake's `membarrier` only once a sleep has lasted `after`, not before
    /// it starts. On a VM the barrier's IPIs cost tens of microseconds of the sleeper's
    /// CPU (and interrupt the other CPUs) at the moment the sleeper has just handed a record
    /// on; deferred, they fall in the idle time between records.
    ///
    /// The price: until the barrier runs, only the fences of the handshake order the
    /// producer's publish against this sleeper's announcement. A producer whose store of
    /// `write_seq` is still in its store buffer while its load of `waiting_consumers` runs
    /// ahead, both within the few hundred nanoseconds of the announcement, can leave the
    /// sleeper asleep. Such a lost wake-up costs at most `after` (the sleep is cut there,
    /// the barrier runs and the ring is re-checked); a sleep whose whole timeout is at most
    /// `after` never runs the barrier and costs at most its timeout. Use it where a rare
    /// delay of `after` is cheaper than the barrier on every sleep (the replication
    /// threads, which sleep between the records of a steady stream); the default runs the
    /// barrier first and loses no wake-up.
    pub fn with_deferred_barrier(mut self, after: Duration) -> Self {
        self.barrier_after = Some(after);
        self
    }

    /// Sleeps in futex waits of at most `slice`, looking at what it waits for after each,
    /// instead of one wait for the whole timeout: a writer that never wakes sleepers (a DMA
    /// engine or FPGA filling the ring, a writer without the §11 handshake) is then seen
    /// within `slice` rather than at the end of the sleep. The sleep stays announced from
    /// start to end, so a deferred barrier still runs once per sleep. A zero `slice` is
    /// taken as 1 µs.
    pub fn with_slices(mut self, slice: Duration) -> Self {
        self.slice = slice.max(Duration::from_micros(1));
        self
    }

    /// The configured sleep timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Changes the sleep timeout for the sleeps to come (raised to [`MIN_FUTEX_SLEEP`]);
    /// the stats carry on.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout.max(MIN_FUTEX_SLEEP);
    }

    /// How the sleeps so far ended.
    pub fn stats(&self) -> FutexStats {
        self.stats
    }
}

impl WaitStrategy for FutexWait {
    fn wait_on(
        &mut self,
        pair: FutexPair<'_>,
        deadline: Option<Instant>,
        mut ready: impl FnMut() -> bool,
    ) {
        for i in 0..self.spin_limit {
            if ready() {
                return;
            }
            // The spins count against the deadline too: a long spin limit must not run
            // past it (checked every 64 spins, so the clock costs little).
            if i % SPINS_PER_CLOCK == SPINS_PER_CLOCK - 1 && !before(deadline) {
                return;
            }
            std::hint::spin_loop();
        }
        if ready() {
            return;
        }
        // Each sleep is at most the timeout, and never runs past the caller's deadline.
        let timeout = match deadline {
            Some(d) => self
                .timeout
                .min(d.saturating_duration_since(Instant::now())),
            None => self.timeout,
        };
        if timeout < MIN_FUTEX_SLEEP {
            // The deadline is too close for a sleep: the caller spins out the rest.
            return;
        }
        // The §11 handshake (module docs): read the word, announce, membarrier, re-check;
        // with a deferred barrier, the barrier and a second re-check come `after` into the
        // sleep instead (`with_deferred_barrier`).
        let word = pair.word.as_ptr();
        let deferred = self.barrier_after;
        // The sleep's time runs from here: a barrier that takes long (many CPUs, a busy
        // hypervisor) shortens the futex wait after it instead of pushing it past the deadline.
        let started = Instant::now();
        let announced = pair.announce(
            || {
                if deferred.is_none() {
                    sys::membarrier_global();
                }
            },
            &mut ready,
        );
        match announced.sleep_on() {
            None => self.stats.rechecked += 1,
            Some(v) => {
                self.stats.sleeps += 1;
                let outcome = self.sleep(word, v, started, timeout, &mut ready);
                match outcome {
                    None => self.stats.late_found += 1,
                    Some(FutexOutcome::Woken) => self.stats.woken += 1,
                    Some(FutexOutcome::Interrupted) => self.stats.interrupted += 1,
                    Some(FutexOutcome::Changed) => self.stats.changed += 1,
                    Some(FutexOutcome::TimedOut) => self.stats.timed_out += 1,
                    // Counted in `failed` by `sleep` already.
                    Some(FutexOutcome::Failed(_)) => {}
                }
            }
        }
        // Retires the announcement.
        drop(announced);
    }

    fn reset(&mut self) {}
}

impl FutexWait {
    /// The sleep of an announced sleeper on `word` (read as `v`) until `timeout` after
    /// `started` (taken before the announcement and its barrier): futex waits cut at the
    /// deferred barrier's time and at every slice. `None` when `ready()`,
    /// looked at after the barrier or a slice, found something to do; otherwise how the
    /// last wait ended.
    fn sleep(
        &mut self,
        word: *mut u32,
        v: u32,
        started: Instant,
        timeout: Duration,
        ready: &mut impl FnMut() -> bool,
    ) -> Option<FutexOutcome> {
        // A barrier only for a sleep longer than the deferral (`with_deferred_barrier`).
        let mut barrier_at = self.barrier_after.filter(|&after| after < timeout);
        loop {
            // Elapsed time, not an end instant: `timeout` may be as long as `Duration::MAX`,
            // which no `Instant` can be moved by.
            let elapsed = started.elapsed();
            let left = timeout.saturating_sub(elapsed);
            if left.is_zero() {
                return Some(FutexOutcome::TimedOut);
            }
            let mut wait = left.min(self.slice);
            let until_barrier = barrier_at.map(|at| at.saturating_sub(elapsed));
            let at_barrier = until_barrier.is_some_and(|u| u <= wait);
            if let Some(u) = until_barrier.filter(|_| at_barrier) {
                wait = u;
            }
            match sys::futex_wait(word, v, wait) {
                FutexOutcome::TimedOut => {}
                // Refused, and it will be again at once (`FUTEX_ERROR_NAP`): the sleep goes
                // on as naps, looking at what it waits for after each, still cut at the
                // barrier's time, the slice and the timeout.
                FutexOutcome::Failed(errno) => {
                    self.stats.failed += 1;
                    futex_refused(errno);
                    let nap = wait.min(FUTEX_ERROR_NAP);
                    sys::sleep(nap);
                    if nap < wait {
                        if ready() {
                            return None;
                        }
                        continue;
                    }
                }
                // Woken, the word bumped since it was read (a publish), or a signal: the
                // caller looks at what it waits for.
                o => return Some(o),
            }
            if at_barrier {
                barrier_at = None;
                // Not in a sleep that is over anyway (its last wait ran to its end, timer
                // slack included): the barrier is an IPI to every registered CPU.
                if started.elapsed() < timeout {
                    // Still announced: a producer that publishes from now on bumps the
                    // word, so the waits that follow fail or are woken.
                    sys::membarrier_global();
                    self.stats.late_barriers += 1;
                }
            } else if wait == left {
                return Some(FutexOutcome::TimedOut);
            }
            if ready() {
                return None;
            }
        }
    }
}

/// How long a [`FutexWait`] sleep naps when the kernel refuses its `FUTEX_WAIT` (see
/// [`FutexStats::failed`]) before looking again at what it waits for. A refused wait
/// returns at once, and will be refused again: returning to the caller would make its
/// wait loop a busy spin. Naps keep an idle reader idle (a few µs of CPU per nap) and see
/// a record within about a nap, since no `FUTEX_WAKE` can reach the sleeper.
pub const FUTEX_ERROR_NAP: Duration = Duration::from_millis(1);

/// Says once per process, on stderr, that the kernel refuses futex waits, and why.
#[cold]
fn futex_refused(errno: i32) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        diag!(
            "ringwire: FUTEX_WAIT refused ({}); sleeping readers nap {} ms at a time instead",
            std::io::Error::from_raw_os_error(errno),
            FUTEX_ERROR_NAP.as_millis()
        );
    });
}

/// Wakes every futex sleeper of `ring` after [`RingView::publish`] (or
/// `bump_futex_if_waiting`) returned `true`: one `FUTEX_WAKE`, every time. A producer
/// calling it after each publish is better served by [`FutexWake`], which stops paying
/// for a sleeper that died asleep.
pub fn wake_all(ring: &RingView) {
    sys::futex_wake_all(ring.futex_word().as_ptr());
}

/// The std side of the core's [`Wake`]: a shared `FUTEX_WAKE` of every sleeper on the
/// ring's futex word (the core has already bumped it), which stops paying for a sleeper
/// that died asleep.
///
/// # A sleeper that died asleep
///
/// A sleeper counts itself in the ring's `waiting_consumers` and uncounts itself when its
/// sleep ends. One killed asleep (SIGKILL, a crash, a Ctrl-C whose default action ends the
/// process) stays counted, and spec §11 has no way to retire it: from then on every
/// publish finds a sleeper and makes a `FUTEX_WAKE` system call that wakes nobody, about
/// 240 ns per push on this project's test VM instead of about 1 ns, until the ring is
/// recreated.
///
/// So this waker rations its wakes through a [`WakeGate`]. Once they have woken nobody for
/// 100 ms (and 256 wakes) with the count never back to 0 after one (a live reader that
/// keeps announcing itself and finding the record at its re-check lets it fall to 0 now
/// and then), the lowest count seen after them is taken as dead sleepers'. A publish then
/// wakes when the count is above that (a sleeper announced itself since), and otherwise
/// only if the last wake was a clock tick ago or more (the gate reads the kernel's coarse
/// monotonic clock, `CLOCK_MONOTONIC_COARSE`: 1 to 4 ms a tick). The publishes in between
/// still bump the futex word (the core does that before calling [`Wake::wake`]) and cost a
/// load of the count and a read of the coarse clock: 9.4 ns per push, against 249 ns with
/// a wake per publish and 1.1 ns with nobody counted (`cargo run --release -p
/// ringwire-tests --example stale_sleeper`). A sleeper that announces itself then is woken by the first
/// publish after it, as before. A sleeper that dies asleep once the rationing has begun (a
/// second reader killed while waiting) is added to the dead sleepers' part in the same
/// way, once the wakes made for it have woken nobody for as long. The gate's docs name the few that can be late, never later
/// than their own timeout (50 ms by default for [`FutexWait`]); `cargo run --release -p
/// ringwire-tests --example live_readers_rationing` looks for live readers taken for dead
/// (none in its runs here). [`FutexWake::strict`] wakes on every publish, whatever it
/// costs. `ringwire stat` shows the count; a ring recreated by its producer starts at 0.
#[derive(Debug, Default)]
pub struct FutexWake {
    gate: WakeGate,
    strict: bool,
}

impl FutexWake {
    /// The default: stops paying for a sleeper that died asleep (see the type's docs).
    pub fn new() -> Self {
        FutexWake::default()
    }

    /// Makes a `FUTEX_WAKE` after every publish that finds a sleeper counted, dead or
    /// alive (ringfire's producers do).
    pub fn strict() -> Self {
        FutexWake {
            gate: WakeGate::default(),
            strict: true,
        }
    }

    /// Whether this waker takes part of the sleeper count for dead sleepers right now (see
    /// the type's docs).
    pub fn suspects_stale_sleeper(&self) -> bool {
        self.gate.suspects_stale_sleeper()
    }

    /// Wakes the sleepers of `view`'s futex word after a publish that found one counted
    /// (what [`Wake::wake`] does), for producers that publish through [`RingView`] or the
    /// core's writers directly.
    #[inline]
    pub fn wake_after_publish(&self, view: &RingView) {
        if self.strict {
            sys::futex_wake_all(view.futex_word().as_ptr());
        } else {
            gated_wake(&self.gate, view.futex());
        }
    }
}

/// The `FUTEX_WAKE` of `pair`'s sleepers through `gate`, after a notify that found one
/// counted (the ring's [`FutexWake`], the MPMC queue handles).
pub(crate) fn gated_wake(gate: &WakeGate, pair: FutexPair<'_>) {
    gate.wake(
        // Relaxed: a reload of what the notify has just read; being later in program
        // order, it sees that value or a newer one (coherence).
        || pair.waiters.load(Ordering::Relaxed),
        coarse_ns,
        || sys::futex_wake_all(pair.word.as_ptr()),
    );
}

/// A clone starts afresh: it has seen none of the wakes of the original.
impl Clone for FutexWake {
    fn clone(&self) -> Self {
        FutexWake {
            gate: WakeGate::default(),
            strict: self.strict,
        }
    }
}

impl Wake for FutexWake {
    #[inline]
    fn wake(&self, view: &RingView) {
        self.wake_after_publish(view);
    }
}

/// The clock of the wake gates: `CLOCK_MONOTONIC_COARSE` in nanoseconds (at least 1: the
/// gate takes 0 for "never"). A few nanoseconds per read (the vDSO returns the time of the
/// last scheduler tick, no counter read), where `CLOCK_MONOTONIC` costs about 20 and was most
/// of a rationing producer's time per push. It advances once per tick (1 to 4 ms with the
/// kernel's `HZ`), so a gate's `STALE_WAKE_INTERVAL` becomes one tick.
pub(crate) fn coarse_ns() -> u64 {
    sys::clock_ns(libc::CLOCK_MONOTONIC_COARSE).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_tmp::TmpPath;

    #[test]
    fn futex_wait_spins_stop_at_the_deadline() {
        // A ring nothing is ever published to: only the deadline ends the wait.
        let t = TmpPath::new("wait-spins");
        let tx = crate::RingProducer::<u64>::create(&t, 8).unwrap();
        let ring = *tx.file().ring();
        let mut w = FutexWait::new(100_000_000, Some(DEFAULT_FUTEX_TIMEOUT));
        let t0 = Instant::now();
        w.wait_until(&ring, 1, deadline_after(Duration::from_millis(1)));
        let took = t0.elapsed();
        drop(tx);
        // 10^8 spins take seconds; the deadline is 1 ms (generous bound for a noisy VM).
        assert!(
            took < Duration::from_millis(200),
            "spun past the deadline: {took:?}"
        );
    }

    /// The loom models stand the sleeper's membarrier in with a fence on the producer's side
    /// (`core/src/futex.rs`), so they cannot see a std sleeper that forgets it: this checks
    /// that a `FutexWait` sleep (rings and queues wait through it) runs one, before its
    /// re-check by default, and deferred only once the sleep outlasts the deferral.
    #[test]
    fn a_futex_sleep_runs_the_membarrier() {
        let barriers = || sys::MEMBARRIERS.with(|n| n.get());
        let t = TmpPath::new("wait-mb");
        let tx = crate::RingProducer::<u64>::create(&t, 8).unwrap();
        let ring = *tx.file().ring();
        let b0 = barriers();
        let mut w = FutexWait::new(0, Some(Duration::from_millis(2)));
        w.wait(&ring, 1);
        let b1 = barriers();
        let mut d = FutexWait::new(0, Some(Duration::from_millis(2)))
            .with_deferred_barrier(Duration::from_millis(50));
        d.wait(&ring, 1);
        let b2 = barriers();
        let mut d = FutexWait::new(0, Some(Duration::from_millis(20)))
            .with_deferred_barrier(Duration::from_millis(1));
        d.wait(&ring, 1);
        let b3 = barriers();
        drop(tx);
        assert_eq!(w.stats().sleeps, 1, "{:?}", w.stats());
        assert_eq!((b1 - b0, b2 - b1, b3 - b2), (1, 0, 1));
    }

    /// A sleep ends at the caller's deadline however long the handshake's membarrier took:
    /// its time counts against the sleep, which does not start afresh after it. (The barrier
    /// is made 600 ms slow; without the fix the wait took 600 ms + the 1 s to the deadline.)
    #[test]
    fn a_slow_membarrier_does_not_push_the_sleep_past_the_deadline() {
        let t = TmpPath::new("wait-slowmb");
        let tx = crate::RingProducer::<u64>::create(&t, 8).unwrap();
        let ring = *tx.file().ring();
        let barriers = || sys::MEMBARRIERS.with(|n| n.get());
        sys::MEMBARRIER_DELAY.with(|d| d.set(Duration::from_millis(600)));
        let b0 = barriers();
        let mut w = FutexWait::new(0, Some(Duration::from_secs(10)));
        let t0 = Instant::now();
        // Nothing is ever published at cursor 1: only the deadline ends the wait.
        w.wait_until(&ring, 1, Some(t0 + Duration::from_secs(1)));
        let took = t0.elapsed();
        sys::MEMBARRIER_DELAY.with(|d| d.set(Duration::ZERO));
        drop(tx);
        assert_eq!(barriers() - b0, 1, "the sleep ran its barrier");
        let s = w.stats();
        assert_eq!((s.sleeps, s.timed_out), (1, 1), "{s:?}");
        // Generous on both sides for a loaded machine; the overshoot was 600 ms.
        assert!(
            took >= Duration::from_millis(990) && took < Duration::from_millis(1400),
            "a 1 s deadline with a 600 ms barrier took {took:?}"
        );
    }

    /// A writer that never wakes sleepers (hardware filling the ring) is seen within a slice
    /// by a sliced sleep, and only at the end of an unsliced one. Slices keep one barrier
    /// per sleep.
    #[test]
    fn a_sliced_sleep_sees_a_writer_that_wakes_nobody() {
        use std::sync::atomic::AtomicBool;
        let barriers = || sys::MEMBARRIERS.with(|n| n.get());
        // The ring lends its futex pair; what the sleeper waits for is a flag.
        let t = TmpPath::new("wait-sl");
        let tx = crate::RingProducer::<u64>::create(&t, 8).unwrap();
        let ring = *tx.file().ring();
        let pair = || ring.futex();
        // The flag is written once the sleeper has been seen in `waits` different
        // FUTEX_WAITs: past its re-check, so it cannot find the flag before it sleeps.
        let sleep = |w: &mut FutexWait, waits: usize| {
            let flag = AtomicBool::new(false);
            // SAFETY: gettid has no preconditions.
            let sleeper = unsafe { libc::gettid() };
            let t0 = Instant::now();
            std::thread::scope(|s| {
                s.spawn(|| {
                    let word = pair().word.as_ptr();
                    crate::test_proc::await_futex_waits(sleeper, word, waits);
                    // Written, and nobody woken: the futex word is not touched.
                    flag.store(true, Ordering::Release);
                });
                while !flag.load(Ordering::Acquire) {
                    w.wait_on(pair(), None, || flag.load(Ordering::Acquire));
                }
            });
            t0.elapsed()
        };
        let b0 = barriers();
        let mut sliced = FutexWait::new(0, Some(Duration::from_secs(20)))
            .with_deferred_barrier(Duration::from_millis(2))
            .with_slices(Duration::from_millis(2));
        // The second wait comes after the deferred barrier and its re-check: only a slice's
        // end can see the flag.
        sleep(&mut sliced, 2);
        let s = sliced.stats();
        assert_eq!(
            (s.sleeps, s.late_found, s.timed_out, s.late_barriers),
            (1, 1, 0, 1),
            "sliced: {s:?}"
        );
        assert_eq!(barriers() - b0, 1, "one barrier in the sliced sleep");
        let mut whole = FutexWait::new(0, Some(Duration::from_millis(300)));
        let took = sleep(&mut whole, 1);
        drop(tx);
        assert!(took >= Duration::from_millis(290), "unsliced: {took:?}");
        // Each sleep ran to its timeout (more than one if the writer looked late).
        let s = whole.stats();
        assert!(
            s.sleeps >= 1 && s.timed_out == s.sleeps && s.late_found == 0,
            "unsliced: {s:?}"
        );
    }

    /// On an MPMC-flagged ring a producer stores its ticket in the slot before its
    /// `fetch_max` of `write_seq` (spec §8.1). One stopped between the two (killed,
    /// SIGSTOPped, descheduled) leaves a readable record with `write_seq` below it and no
    /// wake-up on its way: a waiter at that record must not sleep its timeout out.
    #[test]
    fn an_mpmc_record_stored_before_write_seq_moves_ends_the_wait() {
        let t = TmpPath::new("wait-mpmc");
        let tx = crate::lossy_mpmc::MpmcProducer::<u64>::create(&t, 8).unwrap();
        let ring = *tx.file().ring();
        // Ticket 1 claimed and written as `LossyMpmcProducer::push` does, then the producer
        // stops before its fetch_max.
        // Relaxed: as the producer's claim.
        let ticket = ring.claim_seq().fetch_add(1, Ordering::Relaxed);
        ring.write_slot(ticket, &7u64.to_le_bytes());
        let mut w = FutexWait::new(0, Some(Duration::from_secs(2)));
        w.wait(&ring, ticket);
        let got = crate::RingConsumer::<u64>::attach(&t).unwrap().try_recv();
        let write_seq = ring.write_seq().load(Ordering::Relaxed);
        drop(tx);
        assert_eq!(
            (ticket, write_seq, got),
            (1, 0, Some(7)),
            "readable below write_seq"
        );
        assert_eq!(
            w.stats().sleeps,
            0,
            "slept at a readable record: {:?}",
            w.stats()
        );
    }

    /// The look below `write_seq` takes only a ticket a producer may have stored there
    /// (under `claim_seq`): a corrupt slot word past every claim, with `write_seq` below the
    /// cursor, is nothing to do, so a waiter sleeps instead of polling a record that no
    /// producer is writing.
    #[test]
    fn an_mpmc_slot_past_every_claim_below_write_seq_is_nothing_to_do() {
        let t = TmpPath::new("wait-mpmc-bad");
        let tx = crate::lossy_mpmc::MpmcProducer::<u64>::create(&t, 8).unwrap();
        let ring = *tx.file().ring();
        // Relaxed: as the producer's claim.
        let ticket = ring.claim_seq().fetch_add(1, Ordering::Relaxed);
        ring.write_slot(ticket, &7u64.to_le_bytes());
        let stored = published(&ring, ticket);
        // A value no ticket drawn so far can be (claim_seq is now 2).
        ring.slot_seq(ticket).store(1 << 40, Ordering::Release);
        let corrupt = published(&ring, ticket);
        drop(tx);
        assert_eq!((stored, corrupt), (true, false));
    }

    #[test]
    fn yield_backoff_default_spins_64_times_as_ringfire() {
        let b = YieldBackoff::default();
        assert_eq!((b.max_spins, b.spins), (64, 0));
    }

    /// A sleeper killed asleep stays counted (spec §11). The producer's wakes then wake
    /// nobody; it stops making a system call per publish, yet a live reader that sleeps
    /// later is woken by a publish, not by its 10 s timeout.
    #[test]
    fn a_producer_rations_its_wakes_for_a_sleeper_killed_asleep() {
        let t = TmpPath::new("wait-dead");
        let mut tx = crate::RingProducer::<u64>::create(&t, 1024).unwrap();
        let ring = *tx.file().ring();
        // A child sleeps for a record that never comes, until its alarm kills it (SIGALRM).
        let status = crate::test_fork::forked(1, || {
            let mut w = FutexWait::new(0, Some(Duration::from_secs(60)));
            w.wait(&ring, 1);
            0
        });
        let killed = libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGALRM;
        let counted = ring.waiting_consumers().load(Ordering::Relaxed);
        let mut pushed = 0u64;
        let end = Instant::now() + Duration::from_secs(10);
        while !tx.suspects_stale_sleeper() && Instant::now() < end {
            pushed += 1;
            tx.push(&pushed);
        }
        let suspected = tx.suspects_stale_sleeper();
        // A live reader sleeps for the next record, which comes 50 ms later.
        let next = pushed + 1;
        let (took, stats) = std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let mut w = FutexWait::new(0, Some(Duration::from_secs(10)));
                let t0 = Instant::now();
                while ring.write_seq().load(Ordering::Acquire) < next {
                    w.wait(&ring, next);
                }
                (t0.elapsed(), w.stats())
            });
            std::thread::sleep(Duration::from_millis(50));
            tx.push(&next);
            reader.join().unwrap()
        });
        let after = tx.suspects_stale_sleeper();
        drop(tx);
        assert!(
            killed,
            "the sleeper child was not killed by its alarm: {status:#x}"
        );
        assert_eq!(counted, 1, "the dead sleeper is counted");
        assert!(suspected, "no suspicion after {pushed} pushes in 10 s");
        assert!(
            took < Duration::from_secs(5),
            "the live reader slept {took:?}"
        );
        // The reader raised the count above the dead sleeper's, so the publish woke it,
        // and that wake (of no more sleepers than had announced since) leaves the dead
        // sleeper's count rationed.
        assert!(after, "{stats:?}");
    }
}
