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
}
