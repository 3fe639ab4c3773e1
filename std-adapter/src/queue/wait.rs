//! Blocking waits on a queue's futex words: spin, then sleep with the Dekker handshake
//! against the peer's `notify_*` (see the module docs of `crate::wait`).

use std::time::{Duration, Instant};

use ringwire_core::queue::QueueView;
use ringwire_core::sync::{A32, Ordering, fence};

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
pub(super) fn notify(view: &QueueView, side: Side) {
    let bumped = match side {
        Side::Data => view.notify_data(),
        Side::Space => view.notify_space(),
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
    // SeqCst fence: the re-check below cannot move before the announcement.
    fence(Ordering::SeqCst);
    if !ready() {
        let left = deadline.saturating_duration_since(Instant::now());
        if !left.is_zero() {
            let _ = sys::futex_wait(word.as_ptr(), v, left.min(MAX_SLEEP));
        }
    }
    // Relaxed: a stale non-zero count only costs the peer one spare wake.
    waiters.fetch_sub(1, Ordering::Relaxed);
}
