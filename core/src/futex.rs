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
    /// Sleepers announced and not yet retired.
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
    fn drop(&mut self) {
        // Relaxed: a stale non-zero count only costs a notifier one spare wake.
        self.waiters.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How long every `FUTEX_WAKE` of a [`WakeGate`] must have woken nobody, and at least
/// [`STALE_SLEEPER_WAKES`] of them, before it takes the sleeper count for a dead sleeper's.
pub const STALE_SLEEPER_AFTER: Duration = Duration::from_millis(10);

/// How many `FUTEX_WAKE`s in a row must have woken nobody (over at least
/// [`STALE_SLEEPER_AFTER`]) before a [`WakeGate`] takes the count for a dead sleeper's.
pub const STALE_SLEEPER_WAKES: u32 = 64;

/// While a [`WakeGate`] takes the sleeper count for a dead sleeper's and the count has not
/// risen, it makes a `FUTEX_WAKE` on every this-many-th notify, if the last was at least
/// [`STALE_WAKE_INTERVAL`] ago.
pub const STALE_WAKE_EVERY: u32 = 64;

/// See [`STALE_WAKE_EVERY`].
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
/// seen since, if lower). After that a notify wakes only when the count is above the stale
/// part (a sleeper announced itself since), and otherwise on every [`STALE_WAKE_EVERY`]-th
/// notify if the last wake was [`STALE_WAKE_INTERVAL`] ago or more. A wake that wakes more
/// sleepers than the count has above the stale part proves part of it alive and ends it
/// all.
///
/// Why a sleeper who announces while only the stale part is counted is never missed: the
/// count is read after the notify's own look at it, so it sees that announcement whenever
/// the look did (coherence), and the handshake (module docs) makes either the look see it
/// or the sleeper's re-check see the change. `core/tests/loom_futex.rs` checks it with the
/// gate rationing. Who can be late: a live sleeper counted in the stale part (one that was
/// announced, and not yet in its `FUTEX_WAIT`, at every read of the run), or one
/// that announces while another leaves (the count does not rise); the next rationed wake
/// or its own timeout ends its sleep.
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
    /// Publishes since the last rationed wake or look at the clock.
    skipped: AtomicU32,
    /// When the last rationed wake was made.
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
            skipped: AtomicU32::new(0),
            last_wake: AtomicU64::new(0),
        }
    }

    /// Whether part of the count is taken for dead sleepers' right now.
    pub fn suspects_stale_sleeper(&self) -> bool {
        self.suspect.load(Relaxed)
    }

    /// One wake after a notify that found a sleeper counted: `syscall` (the `FUTEX_WAKE`,
    /// returning how many it woke, negative on an error), unless part of the count is
    /// taken for dead sleepers' and the wake is not due (see the type's docs). `count` reads the
    /// ring's sleeper count, `now` the clock (nanoseconds); the clock is read only on a
    /// wake that woke nobody and on every [`STALE_WAKE_EVERY`]-th skipped one.
    #[inline]
    pub fn wake(
        &self,
        count: impl Fn() -> u32,
        now: impl Fn() -> u64,
        syscall: impl FnOnce() -> i64,
    ) {
        if self.suspect.load(Relaxed) {
            self.rationed(count(), now, syscall);
            return;
        }
        if syscall() > 0 {
            if self.futile_since.load(Relaxed) != 0 {
                self.futile_since.store(0, Relaxed);
                self.futile.store(0, Relaxed);
            }
            return;
        }
        self.woke_nobody(now(), count);
    }

    /// The bookkeeping of a wake that woke nobody, out of the way of the one that did.
    ///
    /// The count is read after every such wake. A count of 0 ends the run: whoever the
    /// notify's look saw has retired, so no sleeper that died asleep is counted (its count
    /// never goes away). Otherwise the lowest count the run saw becomes the stale part: a
    /// live reader that keeps announcing itself and finding the next record at its re-check
    /// (it never sleeps, so no wake wakes it) is counted at some of those reads and not at
    /// others, and taking the count at the last one alone took it for a dead sleeper, after
    /// which its sleeps were not woken until their own timeout.
    #[cold]
    fn woke_nobody(&self, t: u64, count: impl Fn() -> u32) {
        let c = count();
        if c == 0 {
            self.futile_since.store(0, Relaxed);
            self.futile.store(0, Relaxed);
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
            self.skipped.store(0, Relaxed);
            self.last_wake.store(t, Relaxed);
            self.suspect.store(true, Relaxed);
        }
    }

    /// A wake while part of the count (`stale`) is taken for dead sleepers'.
    #[inline]
    fn rationed(&self, c: u32, now: impl Fn() -> u64, syscall: impl FnOnce() -> i64) {
        let mut stale = self.stale.load(Relaxed);
        if c < stale {
            // Some of it was alive after all, and has left: the rest may still be dead.
            stale = c;
            self.stale.store(c, Relaxed);
        }
        if c == stale {
            let k = self.skipped.load(Relaxed) + 1;
            if k < STALE_WAKE_EVERY {
                self.skipped.store(k, Relaxed);
                return;
            }
            self.skipped.store(0, Relaxed);
            let t = now();
            if t.saturating_sub(self.last_wake.load(Relaxed))
                < STALE_WAKE_INTERVAL.as_nanos() as u64
            {
                return;
            }
            self.last_wake.store(t, Relaxed);
        }
        // More woken than the sleepers who announced since: part of `stale` was alive.
        if syscall() > i64::from(c - stale) {
            self.suspect.store(false, Relaxed);
            self.futile_since.store(0, Relaxed);
            self.futile.store(0, Relaxed);
        }
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

    /// A gate that has made `STALE_SLEEPER_WAKES` wakes that woke nobody over 10 ms, from
    /// 1 ms to 11 ms, on a ring counting `count` sleepers.
    fn suspecting(count: u32) -> WakeGate {
        let g = WakeGate::default();
        let n = u64::from(STALE_SLEEPER_WAKES);
        let at = (0..n).map(|i| MS + i * 10 * MS / (n - 1));
        assert_eq!(wakes(&g, at, count, 0), n as usize);
        assert!(g.suspect.load(Relaxed));
        g
    }

    /// Wakes that woke nobody are all made until they have gone on for 10 ms and 64 wakes;
    /// then, while the count stays put, only every 64th publish may wake, and only 100 µs
    /// after the last wake.
    #[test]
    fn a_gate_rations_wakes_only_after_10_ms_and_64_of_them_woke_nobody() {
        // 10 s of wakes that woke nobody, but only 63 of them: every one is made.
        let g = WakeGate::default();
        let n = u64::from(STALE_SLEEPER_WAKES) - 1;
        assert_eq!(wakes(&g, (1..=n).map(|i| i * 160 * MS), 1, 0), n as usize);
        assert!(!g.suspect.load(Relaxed));
        // 1,000 of them within 9 ms: every one is made.
        let g = WakeGate::default();
        assert_eq!(wakes(&g, (1..=1000).map(|i| i * 9 * US), 1, 0), 1000);
        assert!(!g.suspect.load(Relaxed));
        // Then, 10 ms after the first, they are rationed. Of 1,000 publishes 1 µs apart
        // (1 ms in all), every 64th looks at the clock, and those 128 µs after the last
        // wake (the 128th, 256th, ... 896th) wake: 7.
        let g = suspecting(1);
        assert_eq!(wakes(&g, (1..=1000).map(|i| 11 * MS + i * US), 1, 0), 7);
        // Publishes 1 ms apart: every 64th wakes.
        assert_eq!(wakes(&g, (1..=640).map(|i| 20 * MS + i * MS), 1, 0), 10);
        assert!(g.suspect.load(Relaxed));
    }

    /// While rationing, a count above the stale part (a sleeper announced since) makes
    /// every publish wake, without ending the rationing; a lower count lowers the stale
    /// part.
    #[test]
    fn a_gate_wakes_sleepers_who_announce_while_it_rations() {
        let g = suspecting(2);
        // A live sleeper joins the two dead ones: each wake wakes it.
        assert_eq!(wakes(&g, (1..=100).map(|i| 11 * MS + i * US), 3, 1), 100);
        assert!(g.suspect.load(Relaxed));
        // It left; the count is back to the stale part: rationed again.
        assert_eq!(wakes(&g, (1..=62).map(|i| 12 * MS + i * US), 2, 0), 0);
        // One of the two was alive and left: the stale part is now 1, and a newcomer that
        // makes it 2 again is woken at once.
        assert_eq!(wakes(&g, [13 * MS], 1, 0), 0);
        assert_eq!(wakes(&g, (1..=10).map(|i| 13 * MS + i * US), 2, 1), 10);
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
                let made = wakes(g, [MS + i * 20 * MS / n], count, 0);
                if live_only {
                    assert_eq!(made, 1, "wake {i} of the run");
                }
            }
        };
        let g = WakeGate::default();
        run(&g, true);
        assert!(!g.suspect.load(Relaxed));
        // The reader sleeps for real: the next publish wakes it.
        assert_eq!(wakes(&g, [25 * MS], 1, 1), 1);
        // One dead sleeper and the same live reader: rationed, with the dead one's count
        // as the stale part, so the live reader's sleep (count 2) is woken at once.
        let g = WakeGate::default();
        run(&g, false);
        assert!(g.suspect.load(Relaxed));
        assert_eq!(wakes(&g, (1..=10).map(|i| 25 * MS + i * US), 2, 1), 10);
        assert_eq!(wakes(&g, (1..=10).map(|i| 26 * MS + i * US), 1, 0), 0);
    }

    /// A wake that wakes more sleepers than announced since the suspicion began ends the
    /// rationing at once, and in the normal state a wake that wakes someone restarts the
    /// count, so wakes that woke nobody between ones that did never add up.
    #[test]
    fn a_wake_that_wakes_a_sleeper_taken_for_dead_ends_the_rationing() {
        let g = suspecting(1);
        // The rationed wake (the 64th publish, 128 µs on) wakes the sleeper taken for dead.
        assert_eq!(wakes(&g, (1..=63).map(|i| 11 * MS + i * US), 1, 1), 0);
        assert_eq!(wakes(&g, [11 * MS + 128 * US], 1, 1), 1);
        assert!(!g.suspect.load(Relaxed));
        assert_eq!(wakes(&g, (1..=500).map(|i| 12 * MS + i * US), 1, 1), 500);
        // A wake made for a newcomer that wakes two: the other was the one taken for dead.
        let g = suspecting(1);
        assert_eq!(wakes(&g, [11 * MS + US], 2, 2), 1);
        assert!(!g.suspect.load(Relaxed));
        // 20 ms of wakes that woke nobody, with one that woke someone every 5 ms.
        let g = WakeGate::default();
        for burst in 0..4 {
            let t0 = MS + burst * 5 * MS;
            assert_eq!(wakes(&g, (0..100).map(|i| t0 + i * 40 * US), 1, 0), 100);
            assert_eq!(wakes(&g, [t0 + 4 * MS + 500 * US], 1, 1), 1);
        }
        assert!(!g.suspect.load(Relaxed));
    }
}
