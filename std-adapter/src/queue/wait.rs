//! Blocking waits on a queue's futex words through a [`WaitStrategy`] (a [`FutexWait`]
//! sleeps with the Dekker handshake against the peer's `notify_*`, see the module docs of
//! `crate::wait`), made asymmetric with `membarrier` so the notifier's side costs no fence
//! (see `notify_on`).

use std::time::{Duration, Instant};

use ringwire_core::futex::{FutexPair, WakeGate};
use ringwire_core::queue::QueueView;

use crate::sys;
use crate::wait::{FutexWait, WaitStrategy};
pub(super) use crate::wait::{before, deadline_after};

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

/// After a push (`Side::Data`) or a pop (`Side::Space`) through `view` (the handle's own
/// copy of its queue's view, so the push or pop reads nothing of the shared `QueueMem`):
/// wakes the other side's sleepers. `unfenced` is the mapping's
/// `QueueMem::unfenced_notify`, copied into the handle.
///
/// Why not a fence per operation: a SeqCst fence (`mfence` or a locked instruction on
/// x86, `dmb ish` on Arm) costs tens of cycles on every push and pop even though sleepers
/// are rare, and checking only on batch boundaries would still pay it per `try_push`. So
/// the fast side pays nothing and the slow side pays instead, as the broadcast ring does:
/// when this process registered for `membarrier(GLOBAL_EXPEDITED)` (`unfenced`) the check
/// is a compiler fence and a relaxed load, and every sleeper (a [`FutexWait`]) issues the
/// membarrier between announcing itself and re-checking the queue (or, with
/// `FutexWait::with_deferred_barrier`, that long into its sleep). If registration failed,
/// this process keeps the fenced check, which pairs with the sleeper's SeqCst fence.
#[inline(always)]
pub(super) fn notify_on(view: &QueueView, unfenced: bool, side: Side) {
    if sleepers_on(view, unfenced, side) {
        wake_on(view, side);
    }
}

/// The look of [`notify_on`] alone (`FutexPair::sleepers`): true when the side has
/// sleepers, and the caller then makes its sleeper-only change, if any, and calls
/// [`wake_on`]. Kept apart so that callers can keep that second half out of line (see
/// `SpscBytesConsumer::after_pop`).
#[inline(always)]
pub(super) fn sleepers_on(view: &QueueView, unfenced: bool, side: Side) -> bool {
    pair(view, side).sleepers(unfenced)
}

/// The rest of [`notify_on`] after [`sleepers_on`] returned true: bumps the side's futex
/// word and wakes its sleepers. Out of line: it runs only when someone sleeps, and inlined
/// it would make every push and pop too large to inline into a caller's polling loop.
#[cold]
#[inline(never)]
pub(super) fn wake_on(view: &QueueView, side: Side) {
    let p = pair(view, side);
    p.bump();
    sys::futex_wake_all(p.word.as_ptr());
}

/// [`notify_on`] for the MPMC handles: the wake goes through `gate` (the mapping's, for
/// `side`), which stops making a `FUTEX_WAKE` per push or pop for a sleeper that died
/// asleep while other handles keep the file open (`WakeGate`, `crate::FutexWake` on the
/// broadcast ring). A sleeper's announcement raises the count above the part taken for
/// dead, so it is still woken by the next push or pop. Not for the SPSC handles: taking a
/// role clears its side's count (`spsc_bytes::attach`), which the gate would take for a
/// sleeper leaving, so a new sleeper there could wait for a rationed wake; and a dead SPSC
/// peer's count costs at most a queue's worth of wakes before the queue fills or drains.
#[inline(always)]
pub(super) fn notify_gated<'g>(
    view: &QueueView,
    unfenced: bool,
    side: Side,
    gate: impl FnOnce() -> &'g WakeGate,
) {
    if sleepers_on(view, unfenced, side) {
        // `gate` is looked up only here: a push or pop with no sleeper reads nothing but
        // the handle and the queue.
        wake_gated(view, side, gate());
    }
}

/// The rest of [`notify_gated`], out of line as [`wake_on`] is.
#[cold]
#[inline(never)]
fn wake_gated(view: &QueueView, side: Side, gate: &WakeGate) {
    let p = pair(view, side);
    p.bump();
    crate::wait::gated_wake(gate, p);
}

/// The strategy of `push_blocking` / `pop_blocking`: 64 spins, then futex sleeps of at
/// most 10 ms each (so a peer that never notifies costs little), cut at the deadline.
pub(super) fn default_wait() -> FutexWait {
    FutexWait::new(SPINS, Some(MAX_SLEEP))
}

/// Waits with `wait` for `ready()` on the side's futex pair, never past `deadline`
/// (`None`: no deadline). Returns when `ready()` may have become true; callers retry.
pub(super) fn wait_side<W: WaitStrategy>(
    wait: &mut W,
    view: &QueueView,
    side: Side,
    deadline: Option<Instant>,
    ready: impl FnMut() -> bool,
) {
    wait.wait_on(pair(view, side), deadline, ready);
}
