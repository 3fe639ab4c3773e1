//! `--spin`: poll before parking, bounded and adaptive, without starving other threads.
//!
//! A thread that spins with `PAUSE` holds its core for a whole scheduler slice, so when
//! busy threads outnumber cores (the source's producer, serve, mirror and a reader on a
//! 2-core host) the thread that has work waits milliseconds for a core: ringfire 0.5.2's
//! `--spin` collapses to 2–3 ms p50 that way. [`SpinPolicy`] polls instead, yielding the
//! core (`sched_yield`) between short bursts of checks, so a runnable thread always gets
//! the core at once, and it stops polling when polling does not pay:
//!
//! * a wait polls for at most [`SPIN_WINDOW`] (and never past the caller's timer);
//! * [`MISSES_TO_PARK`] waits in a row that found nothing within the window switch polling
//!   off: later waits park at once (futex or `ppoll`), so an idle or sparse stream costs
//!   no CPU;
//! * a parked wait that ended with data within the window switches polling back on: the
//!   stream has become dense enough for polling to win again.

use std::time::{Duration, Instant};

/// Longest a single wait polls before parking.
pub const SPIN_WINDOW: Duration = Duration::from_millis(2);
/// Consecutive fruitless polling windows after which waits park at once.
pub const MISSES_TO_PARK: u32 = 3;
/// Checks between two `sched_yield` calls.
const CHECKS_PER_YIELD: u32 = 2;

/// The polling state of one waiting thread (see the module docs).
#[derive(Debug)]
pub struct SpinPolicy {
    enabled: bool,
    polling: bool,
    misses: u32,
    /// Waits that polling ended with data.
    pub wins: u64,
    /// Polling windows that ran out without data.
    pub losses: u64,
}

impl SpinPolicy {
    /// A policy; `enabled` is `--spin` (without it, [`SpinPolicy::poll`] never polls).
    pub fn new(enabled: bool) -> SpinPolicy {
        SpinPolicy {
            enabled,
            polling: enabled,
            misses: 0,
            wins: 0,
            losses: 0,
        }
    }

    /// Whether the next wait will poll before parking.
    pub fn is_polling(&self) -> bool {
        self.polling
    }

    /// Polls `ready` for up to [`SPIN_WINDOW`] (at most `max`), yielding the core between
    /// bursts of checks. Returns `true` when `ready` did; `false` means: park now.
    pub fn poll(&mut self, max: Duration, mut ready: impl FnMut() -> bool) -> bool {
        if !self.polling {
            return false;
        }
        let lim = SPIN_WINDOW.min(max);
        let t0 = Instant::now();
        let mut n = 0u32;
        loop {
            if ready() {
                self.wins += 1;
                self.misses = 0;
                return true;
            }
            if t0.elapsed() >= lim {
                break;
            }
            n += 1;
            if n.is_multiple_of(CHECKS_PER_YIELD) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        // Cut short by the caller's timer: says nothing about the stream.
        if lim == SPIN_WINDOW {
            self.losses += 1;
            self.misses += 1;
            if self.misses >= MISSES_TO_PARK {
                self.polling = false;
            }
        }
        false
    }

    /// Reports a parked wait: it lasted `waited` and ended with data (`got`) or without.
    /// Data within the window means polling would have won: poll again.
    pub fn parked(&mut self, waited: Duration, got: bool) {
        if self.enabled && !self.polling && got && waited < SPIN_WINDOW {
            self.polling = true;
            self.misses = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disabled_never_polls() {
        let mut p = SpinPolicy::new(false);
        let mut calls = 0;
        assert!(!p.poll(Duration::from_secs(1), || {
            calls += 1;
            true
        }));
        assert_eq!(calls, 0);
        p.parked(Duration::from_micros(1), true);
        assert!(!p.is_polling());
    }

    #[test]
    fn polling_wins_when_data_comes_within_the_window() {
        let mut p = SpinPolicy::new(true);
        let t0 = Instant::now();
        let d = Duration::from_micros(300);
        assert!(p.poll(Duration::from_secs(1), || t0.elapsed() >= d));
        assert!(t0.elapsed() >= d);
        assert_eq!((p.wins, p.losses), (1, 0));
        assert!(p.is_polling());
    }

    #[test]
    fn fruitless_windows_switch_to_parking_and_dense_data_switches_back() {
        let mut p = SpinPolicy::new(true);
        for i in 0..MISSES_TO_PARK {
            assert!(p.is_polling(), "after {i} misses");
            let t0 = Instant::now();
            assert!(!p.poll(Duration::from_secs(1), || false));
            assert!(t0.elapsed() >= SPIN_WINDOW);
        }
        assert!(!p.is_polling());
        assert_eq!(p.losses, u64::from(MISSES_TO_PARK));
        // Parked: returns at once without calling `ready`.
        assert!(!p.poll(Duration::from_secs(1), || panic!("polled while parked")));
        // A slow parked wait keeps parking; a quick one with data resumes polling.
        p.parked(SPIN_WINDOW * 3, true);
        assert!(!p.is_polling());
        p.parked(Duration::from_micros(100), false);
        assert!(!p.is_polling());
        p.parked(Duration::from_micros(100), true);
        assert!(p.is_polling());
    }

    #[test]
    fn a_window_cut_short_by_the_callers_timer_is_not_a_miss() {
        let mut p = SpinPolicy::new(true);
        for _ in 0..MISSES_TO_PARK * 2 {
            assert!(!p.poll(Duration::from_micros(50), || false));
        }
        assert!(p.is_polling());
        assert_eq!(p.losses, 0);
    }
}
