//! Blocking waits on a queue's futex words: spin, then sleep with the Dekker handshake
//! against the peer's `notify_*` (see the module docs of `crate::wait`), made asymmetric
//! with `membarrier` so the notifier's side costs no fence (see `notify`).

use std::time::{Duration, Instant};

use ringwire_core::futex::FutexPair;
use ringwire_core::queue::QueueView;

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

fn pair(view: &QueueView, side: Side) -> FutexPair<'_> {
    match side {
        Side::Data => view.data_pair(),
        Side::Space => view.space_pair(),
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
        sys::futex_wake_all(pair(view, side).word.as_ptr());
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
    // The §11 handshake (`ringwire_core::futex`): read the word, announce, fence, then a
    // full barrier on every running thread of every registered process, so an unfenced
    // notifier (see `notify`) that has not seen our announcement has its push or pop
    // visible to the re-check. The membarrier fails harmlessly where unsupported, and then
    // no notifier is unfenced.
    let pair = pair(view, side);
    let announced = pair.announce(sys::membarrier_global, ready);
    if let Some(v) = announced.sleep_on() {
        let left = deadline.saturating_duration_since(Instant::now());
        if !left.is_zero() {
            let _ = sys::futex_wait(pair.word.as_ptr(), v, left.min(MAX_SLEEP));
        }
    }
    // Retires the announcement.
    drop(announced);
}
