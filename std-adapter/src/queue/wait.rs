//! Blocking waits on a queue's futex words: spin, then sleep with the Dekker handshake
//! against the peer's `notify_*` (see the module docs of `crate::wait`), made asymmetric
//! with `membarrier` so the notifier's side costs no fence (see `notify`).

use std::time::{Duration, Instant};

use ringwire_core::queue::QueueView;
use ringwire_core::sync::{A32, Ordering, fence};

use super::mem::QueueMem;
use crate::sys;

/// Spins this many times before sleeping.
const SPINS: u32 = 64;
/// Longest single sleep, so a lost wake-up (a peer that does not notify) costs little.
const MAX_SLEEP: Duration = Duration::from_millis(10);

/// Which waiting words a side sleeps on.
#[derive(Clone, Copy)]
pub(super) enum Side {
    /// Consumers waiting for items.
    Data,
    /// Producers waiting for space.
    Space,
}

fn words(view: &QueueView, side: Side) -> (A32<'_>, A32<'_>) {
    match side {
        Side::Data => (view.data_futex(), view.data_waiters()),
        Side::Space => (view.space_futex(), view.space_waiters()),
    }
}

/// After a push (`Side::Data`) or a pop (`Side::Space`): wakes the other side's sleepers.
///
/// Why not a fence per operation: a SeqCst fence (`mfence` or a locked instruction on
/// x86, `dmb ish` on Arm) costs tens of cycles on every push and pop even though sleepers
/// are rare, and checking only on batch boundaries would still pay it per `try_push`. So
/// the fast side pays nothing and the slow side pays instead, as the broadcast ring does:
/// when this process registered for `membarrier(GLOBAL_EXPEDITED)` (`mem.unfenced_notify()`)
/// the check is a compiler fence and a relaxed load, and every sleeper (`wait_for`) issues
/// the membarrier between announcing itself and re-checking the queue. If registration
/// failed, this process keeps the fenced check, which pairs with the sleeper's SeqCst fence.
#[inline]
pub(super) fn notify(mem: &QueueMem, side: Side) {
    let view = mem.queue();
    let bumped = match (side, mem.unfenced_notify()) {
        (Side::Data, true) => view.notify_data_unfenced(),
        (Side::Data, false) => view.notify_data(),
        (Side::Space, true) => view.notify_space_unfenced(),
        (Side::Space, false) => view.notify_space(),
    };
    if bumped {
        sys::futex_wake_all(words(view, side).0.as_ptr());
    }
}

/// Waits until `ready()` or the deadline, spinning first, then sleeping on the side's
/// futex. Returns when `ready()` may have become true (callers retry their operation).
pub(super) fn wait_for(
    view: &QueueView,
    side: Side,
    deadline: Instant,
    mut ready: impl FnMut() -> bool,
) {
    for _ in 0..SPINS {
        if ready() {
            return;
        }
        std::hint::spin_loop();
    }
    let (word, waiters) = words(view, side);
    // Acquire: if the peer's bump is seen here, so is the change before it.
    let v = word.load(Ordering::Acquire);
    // SeqCst: announces the sleeper; pairs with the peer's fence-then-load in notify_*.
    waiters.fetch_add(1, Ordering::SeqCst);
    // SeqCst fence: the re-check below cannot move before the announcement (pairs with a
    // fenced notifier).
    fence(Ordering::SeqCst);
    // A full barrier on every running thread of every registered process, so an unfenced
    // notifier (see `notify`) that has not seen our announcement has its push or pop
    // visible to the re-check below. Fails harmlessly where unsupported, and then no
    // notifier is unfenced.
    sys::membarrier_global();
    if !ready() {
        let left = deadline.saturating_duration_since(Instant::now());
        if !left.is_zero() {
            let _ = sys::futex_wait(word.as_ptr(), v, left.min(MAX_SLEEP));
        }
    }
    // Relaxed: a stale non-zero count only costs the peer one spare wake.
    waiters.fetch_sub(1, Ordering::Relaxed);
}
