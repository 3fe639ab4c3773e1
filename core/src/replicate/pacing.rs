//! Frame linger (spec §23): how long a sender may wait for more records before sending a
//! frame that is not yet full.

use super::time::{Duration, Instant};

/// The pacing policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Pacing {
    /// Linger `max(0, pace − time since the previous frame)`; the reference uses 50 µs.
    Adaptive {
        /// The pace (50 µs by default).
        pace: Duration,
    },
    /// Linger up to `linger` after the first record was found (0 = send at once).
    Fixed {
        /// The linger.
        linger: Duration,
    },
}

impl Default for Pacing {
    fn default() -> Pacing {
        Pacing::Adaptive {
            pace: Duration::from_micros(50),
        }
    }
}

/// Linger state of one sender.
#[derive(Clone, Copy, Debug)]
pub struct Pacer {
    mode: Pacing,
    last_send: Option<Instant>,
    first_seen: Option<Instant>,
}

impl Pacer {
    /// A pacer whose previous send lies far enough in the past that the first frame never
    /// waits.
    pub const fn new(mode: Pacing) -> Pacer {
        Pacer {
            mode,
            last_send: None,
            first_seen: None,
        }
    }

    /// When a frame holding records that is not full may leave. The first call after a
    /// send starts the linger at `now`.
    pub fn send_at(&mut self, now: Instant) -> Instant {
        let first = *self.first_seen.get_or_insert(now);
        match self.mode {
            Pacing::Fixed { linger } => first + linger,
            Pacing::Adaptive { pace } => match self.last_send {
                None => first,
                Some(last) => first.max(last + pace),
            },
        }
    }

    /// The pending linger deadline, if records are waiting.
    pub fn deadline(&self) -> Option<Instant> {
        let first = self.first_seen?;
        Some(match self.mode {
            Pacing::Fixed { linger } => first + linger,
            Pacing::Adaptive { pace } => self.last_send.map_or(first, |l| first.max(l + pace)),
        })
    }

    /// Nothing is waiting any more (the records were lapped or lost): drop the linger.
    pub fn idle(&mut self) {
        self.first_seen = None;
    }

    /// A frame was sent at `now`.
    pub fn on_send(&mut self, now: Instant) {
        self.last_send = Some(now);
        self.first_seen = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Instant {
        Instant::from_nanos(n * 1_000)
    }

    #[test]
    fn adaptive_first_frame_never_waits_then_paces() {
        let mut p = Pacer::new(Pacing::default());
        assert_eq!(p.send_at(us(100)), us(100));
        p.on_send(us(100));
        // 10 µs after the previous send: linger until 50 µs after it.
        assert_eq!(p.send_at(us(110)), us(150));
        assert_eq!(p.deadline(), Some(us(150)));
        // Later calls keep the first-seen time.
        assert_eq!(p.send_at(us(120)), us(150));
        p.on_send(us(150));
        assert_eq!(p.deadline(), None);
        // A record 80 µs after the previous frame goes out immediately.
        assert_eq!(p.send_at(us(230)), us(230));
    }

    #[test]
    fn fixed_linger() {
        let mut p = Pacer::new(Pacing::Fixed {
            linger: Duration::from_micros(20),
        });
        assert_eq!(p.send_at(us(7)), us(27));
        p.on_send(us(27));
        let mut z = Pacer::new(Pacing::Fixed {
            linger: Duration::ZERO,
        });
        assert_eq!(z.send_at(us(7)), us(7));
    }
}
