//! Time supplied by the caller: [`Instant`] is nanoseconds since an arbitrary epoch the
//! caller picks (a monotonic clock on std, a timer on firmware, simulated time in tests).

use core::ops::{Add, Sub};

/// A point in time: nanoseconds since the caller's epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Instant(u64);

/// A span of time in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Duration(u64);

impl Instant {
    /// The epoch.
    pub const ZERO: Instant = Instant(0);
    /// `n` nanoseconds after the epoch.
    pub const fn from_nanos(n: u64) -> Instant {
        Instant(n)
    }
    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// `self - earlier`, or zero if `earlier` is later.
    pub const fn saturating_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
}

impl Duration {
    /// Zero.
    pub const ZERO: Duration = Duration(0);
    /// From nanoseconds.
    pub const fn from_nanos(n: u64) -> Duration {
        Duration(n)
    }
    /// From microseconds (saturating).
    pub const fn from_micros(us: u64) -> Duration {
        Duration(us.saturating_mul(1_000))
    }
    /// From milliseconds (saturating).
    pub const fn from_millis(ms: u64) -> Duration {
        Duration(ms.saturating_mul(1_000_000))
    }
    /// From seconds (saturating).
    pub const fn from_secs(s: u64) -> Duration {
        Duration(s.saturating_mul(1_000_000_000))
    }
    /// Nanoseconds.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    /// Saturates at the end of time instead of wrapping.
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturates at zero.
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_since(earlier)
    }
}

impl Sub<Duration> for Duration {
    type Output = Duration;
    /// Saturates at zero.
    fn sub(self, d: Duration) -> Duration {
        Duration(self.0.saturating_sub(d.0))
    }
}

/// The earlier of two optional deadlines.
pub fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = Instant::from_nanos(5);
        assert_eq!(t + Duration::from_micros(1), Instant::from_nanos(1_005));
        assert_eq!(
            Instant::from_nanos(u64::MAX) + Duration::from_secs(1),
            Instant::from_nanos(u64::MAX)
        );
        assert_eq!(t - Instant::from_nanos(9), Duration::ZERO);
        assert_eq!(Duration::from_millis(2).as_nanos(), 2_000_000);
        assert_eq!(earliest(Some(t), None), Some(t));
        assert_eq!(earliest(Some(t), Some(Instant::ZERO)), Some(Instant::ZERO));
    }
}
