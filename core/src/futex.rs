//! The sleep/wake handshake of spec §11 on a futex word and a waiter count, both sides.
//!
//! A *notifier* changes shared state (a producer publishes `write_seq`, a queue push moves
//! its cursor) and then calls [`FutexPair::notify`] or [`FutexPair::notify_unfenced`]: if a
//! sleeper has announced itself, the word is bumped and the caller issues `FUTEX_WAKE` (the
//! core has no system calls). A *sleeper* that found nothing calls [`FutexPair::announce`],
//! which reads the word, counts itself in the waiter count, orders that announcement before
//! a re-check of the state, and tells it whether to sleep and on which word value; the
//! caller then issues `FUTEX_WAIT(word, value)` with a finite timeout and drops the
//! [`Announced`] to retire.
//!
//! # Why no wake-up is lost
//!
//! The two sides form a Dekker pair: the notifier stores the state, then loads the waiter
//! count; the sleeper increments the count, then loads the state. With a full fence on
//! each side between the two steps, at least one of them sees the other's store: either
//! the sleeper's re-check sees the change and it does not sleep, or the notifier sees the
//! sleeper and bumps the word. The sleeper read the word *before* announcing itself, so a
//! bump after its announcement changes the word from the value it will wait on: the kernel
//! compares the value and queues the sleeper under one lock, so `FUTEX_WAIT` either fails
//! at once or is already queued when `FUTEX_WAKE` runs.
//!
//! [`FutexPair::notify`] pays for its half with a SeqCst fence on every call.
//! [`FutexPair::notify_unfenced`] pays nothing beyond a relaxed load: its fence is supplied
//! by the sleeper, whose `barrier` (the std side's `membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED)`)
//! runs a full memory barrier on every running thread of every process registered for it.
//! It is correct only when the notifier's process is registered and every sleeper issues
//! that barrier; a sleeper without it (firmware, a failed registration) is bounded by its
//! own timeout. Under loom, the barrier's effect on the notifier is modelled by a SeqCst
//! fence in `notify_unfenced` (`core/tests/loom_futex.rs` checks both variants, and that
//! the model catches a sleeper that re-checks before it announces).

use core::time::Duration;

use portable_atomic::Ordering::Relaxed;
use portable_atomic::{AtomicBool, AtomicU32, AtomicU64};

use crate::sync::{A32, Ordering, fence};

/// A futex word and the count of sleepers announced on it.
#[derive(Clone, Copy)]
pub struct FutexPair<'a> {
    /// Bumped by a notifier that saw a sleeper; sleepers wait on its value.
    pub word: A32<'a>,
    /// Sleepers announced and not yet retired. A retire never takes it below 0 (see
    /// [`Announced`]'s drop); ringfire's readers, which share it, decrement it plainly.
    ///
    /// A clear while sleepers are counted (the std SPSC queue's attach clears a dead
    /// sleeper's count) leaves it short: the retire of a sleeper counted before the clear
    /// takes the increment of one counted after it, if there is one then. The shared word
    /// cannot tell the two apart, and no process-local mark can (the clear is another
    /// handle's, usually in another process), so the shortfall is borne, and bounded: it is
    /// at most the number of sleepers counted at the clear, and falls by one at each retire
    /// that finds the count at 0. While it lasts, a notify that reads 0 with a sleeper
    /// counted makes no wake, and that sleeper wakes at its own timeout (spec §11 requires
    /// a finite one) or at a notify after another sleeper announces itself. A sleeper that
    /// sleeps alone after the late retire misses one wake: the sleep that retire lands in
    /// (`tests::a_late_retire_after_a_clear_costs_a_newer_sleeper_one_sleep`).
    pub waiters: A32<'a>,
}

impl<'a> FutexPair<'a> {
    /// Notifier side with its own fence: call after the state change; when it returns
    /// `true`, the word was bumped and the caller wakes the sleepers.
    #[inline(always)]
    pub fn notify(self) -> bool {
        self.bump_if_sleepers(false)
    }

    /// Notifier side without a hardware fence: a compiler fence and one relaxed load, which
    /// stays in this core's cache while nobody sleeps. Only correct when every sleeper's
    /// `barrier` is a membarrier this process is registered for (module docs).
    #[inline(always)]
    pub fn notify_unfenced(self) -> bool {
        self.bump_if_sleepers(true)
    }

    /// [`FutexPair::notify`] and [`FutexPair::notify_unfenced`]: the look, then the bump
    /// when it saw a sleeper. A notifier that makes some state change only when someone
    /// sleeps (the SPSC consumer's hand-back of its popped slots) calls
    /// [`FutexPair::sleepers`], makes the change, then calls [`FutexPair::bump`]: the bump, a
    /// release, orders the change before the woken sleeper's re-check, and a sleeper that
    /// announces itself after the look sees no such change.
    #[inline(always)]
    fn bump_if_sleepers(self, unfenced: bool) -> bool {
        if self.sleepers(unfenced) {
            self.bump();
            true
        } else {
            false
        }
    }

    /// The first half of [`FutexPair::notify`]: the fence (a compiler fence when
    /// `unfenced`) after the caller's state change, then the look at the waiter count.
    /// When it returns `true` the caller makes its sleeper-only change, if any, and calls
    /// [`FutexPair::bump`]. Split so that a caller can keep that rarely taken second half
    /// out of line: its polling loop then stays small enough to inline.
    #[inline(always)]
    pub fn sleepers(self, unfenced: bool) -> bool {
        if unfenced {
            // Under loom a SeqCst fence models the barrier the sleeper's membarrier forces
            // onto this thread.
            #[cfg(loom)]
            fence(Ordering::SeqCst);
            // Compiler-only: keeps the caller's state store before the load below in
            // program order; the hardware ordering comes from the sleeper's membarrier.
            #[cfg(not(loom))]
            core::sync::atomic::compiler_fence(Ordering::SeqCst);
        } else {
            // SeqCst fence: the caller's state store is ordered before the waiter-count
            // load, pairing with the sleeper's SeqCst increment and fence (module docs).
            fence(Ordering::SeqCst);
        }
        // Relaxed: ordered by the fence before it (or the sleeper's barrier); a stale
        // non-zero only costs one needless wake.
        self.waiters.load(Ordering::Relaxed) > 0
    }

    /// The second half of [`FutexPair::notify`], after [`FutexPair::sleepers`]
    /// returned `true`: bumps the word; the caller then wakes the sleepers.
    #[inline(always)]
    pub fn bump(self) {
        // Release: a woken sleeper that reads the new value sees the state change.
        self.word.fetch_add(1, Ordering::Release);
    }

    /// Sleeper side: reads the word, announces this sleeper, fences, runs `barrier` (the
    /// membarrier on the std side; nothing where there is none), then re-checks with
    /// `ready`. The returned [`Announced`] says whether to sleep and on which value; drop
    /// it after the sleep (or at once when there is nothing to sleep for) to retire.
    #[inline]
    pub fn announce(self, barrier: impl FnOnce(), ready: impl FnOnce() -> bool) -> Announced<'a> {
        // Acquire: if a notifier's bump is seen here, so is the state change before it.
        // Relaxed, C11 lets the fences below fall in the other order and `ready` miss the
        // change while the sleep is on the bumped value; loom, whose fence order is the
        // order it runs them in, cannot reach that outcome (found by mutation: no model
        // fails with this load relaxed).
        let value = self.word.load(Ordering::Acquire);
        // SeqCst: announces the sleeper; one half of the Dekker pair (module docs).
        self.waiters.fetch_add(1, Ordering::SeqCst);
        // SeqCst fence: the re-check below cannot be ordered before the announcement.
        fence(Ordering::SeqCst);
        barrier();
        let sleep_on = if ready() { None } else { Some(value) };
        Announced {
            waiters: self.waiters,
            sleep_on,
        }
    }
}

/// A sleeper counted in a [`FutexPair`]'s waiters; dropping it retires the count.
#[must_use = "drop it after the sleep: until then notifiers keep bumping the word"]
pub struct Announced<'a> {
    waiters: A32<'a>,
    sleep_on: Option<u32>,
}

impl Announced<'_> {
    /// `Some(value)`: the re-check found nothing, sleep with `FUTEX_WAIT(word, value)`.
    /// `None`: the state changed meanwhile, do not sleep.
    pub fn sleep_on(&self) -> Option<u32> {
        self.sleep_on
    }
}

impl Drop for Announced<'_> {
    /// Retires the sleeper, saturating at 0: a count cleared while this sleeper was counted
    /// (a role taken over with a dead sleeper's count, `spsc_bytes::attach` on the std side)
    /// no longer holds its increment, and a plain decrement there wrapped to `u32::MAX`,
    /// after which every notify found a "sleeper" and made a `FUTEX_WAKE` for nobody. A
    /// sleeper counted after that clear may lose its increment to this retire instead, and
    /// sleep to its timeout (the bound: [`FutexPair::waiters`]).
    fn drop(&mut self) {
        // Relaxed, load and CAS: a stale non-zero count only costs a notifier one spare
        // wake. The loop retries only when another sleeper announced or retired meanwhile.
        let mut n = self.waiters.load(Ordering::Relaxed);
        while n > 0 {
            match self
                .waiters
                .compare_exchange(n, n - 1, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(now) => n = now,
            }
        }
    }
}

/// How long every `FUTEX_WAKE` of a [`WakeGate`] must have woken nobody, and at least
/// [`STALE_SLEEPER_WAKES`] of them, before it takes the sleeper count for a dead sleeper's.
pub const STALE_SLEEPER_AFTER: Duration = Duration::from_millis(100);

/// How many `FUTEX_WAKE`s in a row must have woken nobody (over at least
/// [`STALE_SLEEPER_AFTER`]) before a [`WakeGate`] takes the count for a dead sleeper's.
pub const STALE_SLEEPER_WAKES: u32 = 256;

/// While a [`WakeGate`] takes part of the sleeper count for dead sleepers' and the count
/// has not risen above that part, it makes a `FUTEX_WAKE` on a notify only if the last was
/// at least this long ago.
pub const STALE_WAKE_INTERVAL: Duration = Duration::from_micros(100);

/// A notifier's watch over its wakes, for a waiter count that holds sleepers who died
/// asleep: decides which wakes to make (spec §11 cannot retire such a count; every notify
/// would otherwise find a sleeper and make a `FUTEX_WAKE` that wakes nobody, for good).
///
/// After a notify that returned `true`, the caller passes [`WakeGate::wake`] the waiter
/// count's reader, a clock and its `FUTEX_WAKE` (returning how many it woke). A live
/// sleeper is woken by the first wake after it sleeps (or never sleeps: its re-check finds
/// the change). When every wake has woken nobody for [`STALE_SLEEPER_AFTER`] and
/// [`STALE_SLEEPER_WAKES`] wakes, and the count read after each of them never fell to 0
/// (a count of 0 proves that no dead sleeper is counted, and starts the run again), the
/// lowest of those counts is taken as dead sleepers' (the *stale part*; the lowest count
/// seen since, if lower). After that a notify wakes when the count is above the stale part
/// (a sleeper announced itself since), and otherwise only if the last wake was
/// [`STALE_WAKE_INTERVAL`] ago or more. A wake that wakes more sleepers than the count has
/// above the stale part proves part of it alive and ends it all, as does a count read at 0.
/// The wakes made for a count above the stale part are watched the same way: once they have
/// woken nobody for as long and as many, the count never back at the stale part meanwhile,
/// the lowest count they saw becomes the stale part (another sleeper died asleep after the
/// rationing began).
///
/// Why a sleeper who announces while only the stale part is counted is never missed: the
/// count is read after the notify's own look at it, so it sees that announcement whenever
/// the look did (coherence), and the handshake (module docs) makes either the look see it
/// or the sleeper's re-check see the change. `core/tests/loom_futex.rs` checks it with the
/// gate rationing. Who can be late: a live sleeper counted in the stale part (one that was
/// announced, and not yet in its `FUTEX_WAIT`, at every read of the run: several readers
/// taking turns on an overloaded machine can do that), or one that announces while another
/// leaves (the count does not rise). Such a sleeper is woken by the first notify made
/// [`STALE_WAKE_INTERVAL`] or more after the last wake: at most that late while records
/// keep coming, and at once for a record that comes after a pause. Only a record that
/// comes within that interval of the last wake, with none after it, leaves it asleep until
/// its own timeout. A coarse clock (the std side reads `CLOCK_MONOTONIC_COARSE`, which
/// moves once per scheduler tick) makes the interval one tick.
///
/// The state is atomics, not cells, so that a notifier shared by threads stays `Sync`; it
/// is process-local and only steers a heuristic (Relaxed throughout, and not loom atomics:
/// the models drive it from one thread).
#[derive(Debug, Default)]
pub struct WakeGate {
    /// When the current run of wakes that woke nobody began (0: the last wake woke someone).
    futile_since: AtomicU64,
    /// How many wakes that run holds.
    futile: AtomicU32,
    /// The lowest sleeper count read after a wake of that run.
    futile_min: AtomicU32,
    /// Part of the count is taken for dead sleepers': wakes are rationed.
    suspect: AtomicBool,
    /// That part: the lowest count of the run that began the suspicion, or the lowest seen
    /// since.
    stale: AtomicU32,
    /// When the last wake was made while rationing (or the rationing began).
    last_wake: AtomicU64,
}

impl WakeGate {
    /// A gate that has seen no wake.
    pub const fn new() -> WakeGate {
        WakeGate {
            futile_since: AtomicU64::new(0),
            futile: AtomicU32::new(0),
            futile_min: AtomicU32::new(0),
            suspect: AtomicBool::new(false),
            stale: AtomicU32::new(0),
            last_wake: AtomicU64::new(0),
        }
    }

    /// Whether part of the count is taken for dead sleepers' right now.
    pub fn suspects_stale_sleeper(&self) -> bool {
        self.suspect.load(Relaxed)
    }

    /// One wake after a notify that found a sleeper counted: `syscall` (the `FUTEX_WAKE`,
    /// returning how many it woke, negative on an error), unless part of the count is
    /// taken for dead sleepers' and the wake is not due (see the type's docs). `count` reads
    /// the ring's sleeper count, `now` a monotonic clock in nanoseconds that never reads 0;
    /// the clock is read on a wake that woke nobody and, while rationing, on every notify
    /// that does not raise the count.
    #[inline]
    pub fn wake(
        &self,
        count: impl Fn() -> u32,
        now: impl Fn() -> u64,
        syscall: impl FnOnce() -> i64,
    ) {
        if self.suspect.load(Relaxed) {
            self.rationed(count, now, syscall);
            return;
        }
        if syscall() > 0 {
            if self.futile_since.load(Relaxed) != 0 {
                self.end_run();
            }
            return;
        }
        self.woke_nobody(now(), count, 0);
    }

    /// The bookkeeping of a wake that woke nobody, out of the way of the one that did.
    ///
    /// `floor` is the part of the count already taken for dead sleepers' (0 before any
    /// suspicion, the stale part while rationing). The count is read after every such wake.
    /// A count at `floor` ends the run: whoever the notify's look saw above it has retired,
    /// so no further sleeper that died asleep is counted (its count never goes away).
    /// Otherwise the lowest count the run saw becomes the stale part: a live reader that
    /// keeps announcing itself and finding the next record at its re-check (it never
    /// sleeps, so no wake wakes it) is counted at some of those reads and not at others, and
    /// taking the count at the last one alone took it for a dead sleeper, after which its
    /// sleeps were not woken until their own timeout.
    #[cold]
    fn woke_nobody(&self, t: u64, count: impl Fn() -> u32, floor: u32) {
        let c = count();
        if c <= floor {
            self.end_run();
            return;
        }
        let since = self.futile_since.load(Relaxed);
        let n = self.futile.load(Relaxed).saturating_add(1);
        self.futile.store(n, Relaxed);
        if since == 0 {
            self.futile_since.store(t, Relaxed);
            self.futile_min.store(c, Relaxed);
            return;
        }
        let min = self.futile_min.load(Relaxed).min(c);
        self.futile_min.store(min, Relaxed);
        if n >= STALE_SLEEPER_WAKES
            && t.saturating_sub(since) >= STALE_SLEEPER_AFTER.as_nanos() as u64
        {
            self.stale.store(min, Relaxed);
            self.last_wake.store(t, Relaxed);
            self.suspect.store(true, Relaxed);
            // The wakes made for a count above the stale part start a run of their own.
            self.end_run();
        }
    }

    /// A wake while part of the count (`stale`) is taken for dead sleepers'.
    ///
    /// The wakes made for a count above `stale` are watched as the wakes before the
    /// suspicion were: when they too wake nobody for [`STALE_SLEEPER_AFTER`] and
    /// [`STALE_SLEEPER_WAKES`] wakes, the count never back at `stale` meanwhile, the lowest
    /// count they saw becomes the stale part. Without that, a second sleeper that died
    /// asleep after the rationing began kept the count above the stale part for good, and
    /// every notify made a `FUTEX_WAKE` that woke nobody again.
    #[inline]
    fn rationed(
        &self,
        count: impl Fn() -> u32,
        now: impl Fn() -> u64,
        syscall: impl FnOnce() -> i64,
    ) {
        let c = count();
        if c == 0 {
            // Whoever the notify's look saw has retired: nobody dead is counted.
            self.end_rationing();
            return;
        }
        let mut stale = self.stale.load(Relaxed);
        if c < stale {
            // Some of it was alive after all, and has left: the rest may still be dead.
            stale = c;
            self.stale.store(c, Relaxed);
        }
        // Every wake made counts as the last: it wakes every sleeper of the word.
        let t = now();
        if c == stale {
            if self.futile_since.load(Relaxed) != 0 {
                // Whoever was counted above the stale part has retired: not dead.
                self.end_run();
            }
            if t.saturating_sub(self.last_wake.load(Relaxed))
                < STALE_WAKE_INTERVAL.as_nanos() as u64
            {
                return;
            }
        }
        self.last_wake.store(t, Relaxed);
        let woken = syscall();
        // More woken than the sleepers who announced since: part of `stale` was alive.
        if woken > i64::from(c - stale) {
            self.end_rationing();
        } else if woken > 0 {
            // A sleeper above the stale part was alive.
            self.end_run();
        } else if c > stale {
            self.woke_nobody(t, count, stale);
        }
    }

    /// Back to a wake per notify, with no run of wakes that woke nobody.
    #[cold]
    fn end_rationing(&self) {
        self.suspect.store(false, Relaxed);
        self.end_run();
    }

    /// No run of wakes that woke nobody (a wake woke someone, or nobody is counted).
    fn end_run(&self) {
        self.futile_since.store(0, Relaxed);
        self.futile.store(0, Relaxed);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::region::Region;
    use crate::testutil::HeapRegion;

    fn pair(r: &Region) -> FutexPair<'_> {
        // SAFETY: offsets 0 and 4 are 4-aligned inside the 64-byte region.
        unsafe {
            FutexPair {
                word: r.a32(0),
                waiters: r.a32(4),
            }
        }
    }

    #[test]
    fn notify_bumps_only_while_someone_is_announced() {
        let mem = HeapRegion::new(64);
        let r = mem.region();
        let p = pair(&r);
        assert!(!p.notify() && !p.notify_unfenced());
        assert_eq!(p.word.load(Ordering::Relaxed), 0);
        let a = p.announce(|| {}, || false);
        assert_eq!(a.sleep_on(), Some(0));
        assert_eq!(p.waiters.load(Ordering::Relaxed), 1);
        assert!(p.notify());
        assert!(p.notify_unfenced());
        assert_eq!(p.word.load(Ordering::Relaxed), 2);
        drop(a);
        assert_eq!(p.waiters.load(Ordering::Relaxed), 0);
        assert!(!p.notify());
        assert_eq!(p.word.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn announce_runs_the_barrier_before_the_recheck_and_sleeps_on_the_old_word() {
        let mem = HeapRegion::new(64);
        let r = mem.region();
        let p = pair(&r);
        p.word.store(7, Ordering::Relaxed);
        let mut order = [0u8; 2];
        let mut n = 0;
        let ready = core::cell::Cell::new(false);
        let a = p.announce(
            || {
                order[n] = b'b';
                n += 1;
                // A notifier that runs now sees the sleeper and bumps the word.
                assert!(p.notify());
            },
            || {
                ready.set(true);
                false
            },
        );
        order[n] = b'r';
        assert!(ready.get());
        assert_eq!(&order, b"br");
        // The value read before the announcement: FUTEX_WAIT on it fails at once, since
        // the notifier's bump changed the word.
        assert_eq!(a.sleep_on(), Some(7));
        assert_eq!(p.word.load(Ordering::Relaxed), 8);
        drop(a);
        let a = p.announce(|| {}, || true);
        assert_eq!(a.sleep_on(), None);
        assert_eq!(p.waiters.load(Ordering::Relaxed), 1);
        drop(a);
        assert_eq!(p.waiters.load(Ordering::Relaxed), 0);
    }

    /// A count cleared while a sleeper was announced (a dead sleeper's count cleared by the
    /// next holder of its role, with a live one counted in it) no longer holds that
    /// sleeper's increment: its retire leaves the count at 0 rather than wrapping it to
    /// `u32::MAX`, after which every notify found a sleeper. Retires of sleepers counted
    /// after the clear still count down to 0.
    #[test]
    fn a_retire_on_a_cleared_count_leaves_it_at_zero() {
        let mem = HeapRegion::new(64);
        let r = mem.region();
        let p = pair(&r);
        let a = p.announce(|| {}, || false);
        p.waiters.store(0, Ordering::Relaxed);
        let b = p.announce(|| {}, || false);
        let c = p.announce(|| {}, || false);
        assert_eq!(p.waiters.load(Ordering::Relaxed), 2);
        // `a` takes one of the two increments made after the clear.
        drop(a);
        assert_eq!(p.waiters.load(Ordering::Relaxed), 1);
        drop(b);
        assert_eq!(p.waiters.load(Ordering::Relaxed), 0);
        // At 0 already: `c`'s increment went to `a`.
        drop(c);
        assert_eq!(p.waiters.load(Ordering::Relaxed), 0);
        assert!(!p.notify() && !p.notify_unfenced());
        assert_eq!(p.word.load(Ordering::Relaxed), 0);
        // The count works on: a new sleeper is seen, and its retire takes it back to 0.
        let d = p.announce(|| {}, || false);
        assert!(p.notify());
        drop(d);
        assert_eq!(p.waiters.load(Ordering::Relaxed), 0);
    }

    /// The bound of a retire that comes after a clear of the count (`FutexPair::waiters`):
    /// sleeper A, counted before the clear, retires at any point among the announces and
    /// retires of sleeper B, counted after it. Only the sleep of B that A's retire lands in
    /// is overlooked by a notify (it ends at B's timeout), B's retire of that sleep ends the
    /// shortfall, and every sleep of B before or after it is seen. A retire between two of
    /// B's sleeps finds the count at 0 and costs nothing.
    #[test]
    fn a_late_retire_after_a_clear_costs_a_newer_sleeper_one_sleep() {
        const SLEEPS: usize = 3;
        // A's retire comes before B's step `at` (B's steps: announce, retire, announce, …).
        for at in 0..=2 * SLEEPS {
            let mem = HeapRegion::new(64);
            let r = mem.region();
            let p = pair(&r);
            let mut a = Some(p.announce(|| {}, || false));
            // The clear of the std SPSC queue's attach.
            p.waiters.swap(0, Ordering::Relaxed);
            let mut missed = [false; SLEEPS];
            for (sleep, missed) in missed.iter_mut().enumerate() {
                if at == 2 * sleep {
                    drop(a.take());
                }
                let b = p.announce(|| {}, || false);
                // Notifies while B sleeps, before and after A's retire lands.
                *missed |= !p.notify();
                if at == 2 * sleep + 1 {
                    drop(a.take());
                }
                *missed |= !p.notify();
                drop(b);
            }
            drop(a);
            let mut expected = [false; SLEEPS];
            if at % 2 == 1 {
                expected[at / 2] = true;
            }
            assert_eq!(missed, expected, "A's retire before B's step {at}");
            assert_eq!(p.waiters.load(Ordering::Relaxed), 0, "at {at}");
        }
    }

    const MS: u64 = 1_000_000;
    const US: u64 = 1_000;

    /// Drives `g` with one wake at each time of `at` (ns), the ring counting `count`
    /// sleepers and each wake waking `woken`; returns how many of them made the system call.
    fn wakes(g: &WakeGate, at: impl IntoIterator<Item = u64>, count: u32, woken: i64) -> usize {
        let calls = core::cell::Cell::new(0);
        for t in at {
            g.wake(
                || count,
                || t,
                || {
                    calls.set(calls.get() + 1);
                    woken
                },
            );
        }
        calls.get()
    }

    /// [`STALE_SLEEPER_AFTER`] in nanoseconds.
    const AFTER: u64 = STALE_SLEEPER_AFTER.as_nanos() as u64;
    /// [`STALE_WAKE_INTERVAL`] in nanoseconds.
    const EVERY: u64 = STALE_WAKE_INTERVAL.as_nanos() as u64;

    /// A gate that has made `STALE_SLEEPER_WAKES` wakes that woke nobody over
    /// `STALE_SLEEPER_AFTER`, from 1 ms on, on a ring counting `count` sleepers; returns it
    /// and the time of its last wake.
    fn suspecting(count: u32) -> (WakeGate, u64) {
        let g = WakeGate::default();
        let n = u64::from(STALE_SLEEPER_WAKES);
        let at = (0..n).map(|i| MS + i * AFTER / (n - 1));
        assert_eq!(wakes(&g, at, count, 0), n as usize);
        assert!(g.suspect.load(Relaxed));
        (g, MS + AFTER)
    }

    /// Wakes that woke nobody are all made until they have gone on for
    /// `STALE_SLEEPER_AFTER` and `STALE_SLEEPER_WAKES` wakes; then, while the count stays
    /// put, a notify wakes only `STALE_WAKE_INTERVAL` after the last wake.
    #[test]
    fn a_gate_rations_wakes_only_once_enough_of_them_woke_nobody_for_long_enough() {
        // 16 times as long, but one wake short: every one is made.
        let g = WakeGate::default();
        let n = u64::from(STALE_SLEEPER_WAKES) - 1;
        assert_eq!(
            wakes(&g, (1..=n).map(|i| i * 16 * AFTER / n), 1, 0),
            n as usize
        );
        assert!(!g.suspect.load(Relaxed));
        // 4 times as many, within nine tenths of the time: every one is made. (Under Miri,
        // where each wake is the same few relaxed atomics, just enough of them: `n + 1`,
        // `STALE_SLEEPER_WAKES`, the count at which only the time is short.)
        let g = WakeGate::default();
        let n = if cfg!(miri) { n + 1 } else { 4 * n };
        assert_eq!(
            wakes(&g, (1..=n).map(|i| i * 9 * AFTER / 10 / n), 1, 0),
            n as usize
        );
        assert!(!g.suspect.load(Relaxed));
        // Then they are rationed: of 1,000 notifies a tenth of the interval apart, every
        // tenth wakes (of 100 under Miri: the same steps, a tenth as many times).
        let (g, t0) = suspecting(1);
        let notifies: u64 = if cfg!(miri) { 100 } else { 1000 };
        let at = (1..=notifies).map(|i| t0 + i * EVERY / 10);
        assert_eq!(wakes(&g, at, 1, 0), notifies as usize / 10);
        // Notifies ten intervals apart all wake, as does one after a pause.
        let t0 = t0 + 1000 * EVERY;
        assert_eq!(wakes(&g, (1..=10).map(|i| t0 + i * 10 * EVERY), 1, 0), 10);
        assert_eq!(wakes(&g, [t0 + 1000 * EVERY], 1, 0), 1);
        assert!(g.suspect.load(Relaxed));
    }

    /// While rationing, a count above the stale part (a sleeper announced since) makes
    /// every notify wake, without ending the rationing; a lower count lowers the stale
    /// part, and a count of 0 ends the rationing.
    #[test]
    fn a_gate_wakes_sleepers_who_announce_while_it_rations() {
        let (g, t0) = suspecting(2);
        // A live sleeper joins the two dead ones: each wake wakes it.
        assert_eq!(wakes(&g, (1..=100).map(|i| t0 + i * US), 3, 1), 100);
        assert!(g.suspect.load(Relaxed));
        // It left; the count is back to the stale part: no wake within the interval.
        let t1 = t0 + 100 * US;
        assert_eq!(wakes(&g, (1..EVERY / US).map(|i| t1 + i * US), 2, 0), 0);
        // One of the two was alive and left (the interval is up: that notify wakes): the
        // stale part is now 1, and a newcomer that makes it 2 again is woken at once.
        assert_eq!(wakes(&g, [t1 + EVERY], 1, 0), 1);
        assert_eq!(wakes(&g, (1..=10).map(|i| t1 + EVERY + i * US), 2, 1), 10);
        assert!(g.suspect.load(Relaxed));
        // Everyone counted has left by the time a notify's wake reads the count: nobody
        // counted was dead.
        assert_eq!(wakes(&g, [t1 + EVERY + 20 * US], 0, 0), 0);
        assert!(!g.suspect.load(Relaxed));
        assert_eq!(
            wakes(&g, (1..=10).map(|i| t1 + EVERY + (20 + i) * US), 1, 0),
            10
        );
    }

    /// A second sleeper that dies asleep after the rationing began (readers killed asleep
    /// one restart after another) raises the count above the stale part for good. Every
    /// notify then made a `FUTEX_WAKE` that woke nobody, as if nothing were rationed. The
    /// wakes made above the stale part are watched as the first ones were: once they have
    /// woken nobody for `STALE_SLEEPER_AFTER` and `STALE_SLEEPER_WAKES` wakes, the count is
    /// the stale part, and a newcomer above it is still woken at once.
    #[test]
    fn a_sleeper_that_dies_asleep_while_the_gate_rations_is_rationed_too() {
        let (g, t0) = suspecting(1);
        // Count 2 from now on: every wake is made until the run is long enough.
        let n = u64::from(STALE_SLEEPER_WAKES);
        let start = t0 + US;
        let at = (0..n).map(|i| start + i * AFTER / (n - 1));
        assert_eq!(wakes(&g, at, 2, 0), n as usize);
        let end = start + AFTER;
        // Then the two dead sleepers are the stale part: no wake within the interval.
        let made = wakes(&g, (1..EVERY / US).map(|i| end + i * US), 2, 0);
        assert_eq!(made, 0, "wakes made for two dead sleepers");
        assert!(g.suspect.load(Relaxed));
        // A live newcomer above them is woken by every notify.
        let t1 = end + EVERY;
        assert_eq!(wakes(&g, (1..=10).map(|i| t1 + i * US), 3, 1), 10);
        assert!(g.suspect.load(Relaxed));
    }

    /// While the gate rations, a live reader that keeps announcing itself and finding the
    /// next record at its re-check is counted above the stale part at some notifies and not
    /// at others: it is not added to the stale part, and its next real sleep is woken by
    /// the next notify, however soon after the last wake.
    #[test]
    fn a_live_reader_above_the_stale_part_is_not_taken_for_dead() {
        let (g, t0) = suspecting(1);
        let n = 4 * u64::from(STALE_SLEEPER_WAKES);
        for i in 0..n {
            // Announced at odd notifies and at the last one.
            let count = 1 + u32::from(i % 2 == 1 || i == n - 1);
            wakes(&g, [t0 + US + i * 2 * AFTER / n], count, 0);
        }
        let last = t0 + US + (n - 1) * 2 * AFTER / n;
        assert_eq!(wakes(&g, [last + US], 2, 1), 1, "the live reader's sleep");
        assert!(g.suspect.load(Relaxed));
    }

    /// A live reader that keeps announcing itself and finding the next record at its
    /// re-check never sleeps, so the wakes its announcements cause wake nobody, and the
    /// count read after them is sometimes 1 (announced) and sometimes 0 (retired). That is
    /// no sleeper that died asleep: nothing is rationed, and the reader's next real sleep
    /// is woken by the next publish. (Taking the count after the last wake of the run for
    /// the stale part took the reader itself for dead when it happened to be announced
    /// then, and its sleeps waited out their timeout.) With a dead sleeper counted as well,
    /// the count never reaches 0 and the lowest count of the run is the stale part.
    #[test]
    fn a_live_reader_that_never_sleeps_is_not_taken_for_a_dead_sleeper() {
        let n = 2 * u64::from(STALE_SLEEPER_WAKES);
        let run = |g: &WakeGate, live_only: bool| {
            for i in 0..n {
                // The last read of the run finds the reader announced.
                let announced = i % 2 == 1 || i == n - 1;
                let count = u32::from(!live_only) + u32::from(announced);
                let made = wakes(g, [MS + i * 2 * AFTER / n], count, 0);
                if live_only {
                    assert_eq!(made, 1, "wake {i} of the run");
                }
            }
        };
        let end = MS + 2 * AFTER;
        let g = WakeGate::default();
        run(&g, true);
        assert!(!g.suspect.load(Relaxed));
        // The reader sleeps for real: the next publish wakes it.
        assert_eq!(wakes(&g, [end + 5 * MS], 1, 1), 1);
        // One dead sleeper and the same live reader: rationed, with the dead one's count
        // as the stale part, so the live reader's sleep (count 2) is woken at once.
        let g = WakeGate::default();
        run(&g, false);
        assert!(g.suspect.load(Relaxed));
        assert_eq!(wakes(&g, (1..=10).map(|i| end + i * US), 2, 1), 10);
        assert_eq!(wakes(&g, (11..=20).map(|i| end + i * US), 1, 0), 0);
    }

    /// A wake that wakes more sleepers than announced since the suspicion began ends the
    /// rationing at once, and in the normal state a wake that wakes someone restarts the
    /// count, so wakes that woke nobody between ones that did never add up.
    #[test]
    fn a_wake_that_wakes_a_sleeper_taken_for_dead_ends_the_rationing() {
        let (g, t0) = suspecting(1);
        // The wake made an interval on wakes the sleeper taken for dead.
        assert_eq!(wakes(&g, (1..EVERY / US).map(|i| t0 + i * US), 1, 1), 0);
        assert_eq!(wakes(&g, [t0 + EVERY], 1, 1), 1);
        assert!(!g.suspect.load(Relaxed));
        assert_eq!(wakes(&g, (1..=500).map(|i| t0 + EVERY + i * US), 1, 1), 500);
        // A wake made for a newcomer that wakes two: the other was the one taken for dead.
        let (g, t0) = suspecting(1);
        assert_eq!(wakes(&g, [t0 + US], 2, 2), 1);
        assert!(!g.suspect.load(Relaxed));
        // Twice the time of wakes that woke nobody, 4 times as many as needed, with one
        // that woke someone every half of the time.
        let g = WakeGate::default();
        let per = u64::from(STALE_SLEEPER_WAKES);
        for half in 0..4 {
            let t0 = MS + half * AFTER / 2;
            let at = (0..per).map(|i| t0 + i * (AFTER * 2 / 5) / per);
            assert_eq!(wakes(&g, at, 1, 0), per as usize);
            assert_eq!(wakes(&g, [t0 + AFTER * 9 / 20], 1, 1), 1);
        }
        assert!(!g.suspect.load(Relaxed));
    }
}
