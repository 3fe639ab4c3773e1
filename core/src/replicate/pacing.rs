//! Frame linger (spec §23): how long a sender may wait for more records before sending a
//! frame that is not yet full.

use super::time::{Duration, Instant};

/// The longest a frame may linger, in either mode (1 s): a longer linger (up to
/// `Duration::from_micros(u64::MAX)` through an API) would hold a quiet ring's records back
/// for as long as the batch takes to fill, which on a ring that goes quiet is for ever, and
/// no replica wants a record that late. [`Pacer::new`] clamps to it; the CLI's
/// `--linger-us` takes no more.
pub const MAX_LINGER: Duration = Duration::from_secs(1);

/// The pacing policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Pacing {
    /// Linger `max(0, pace − time since the previous frame)`; the reference uses 50 µs. A
    /// pace over [`MAX_LINGER`] counts as [`MAX_LINGER`].
    Adaptive {
        /// The pace (50 µs by default).
        pace: Duration,
    },
    /// Linger up to `linger` after the first record was found (0 = send at once), at most
    /// [`MAX_LINGER`].
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
    /// waits. A linger or pace over [`MAX_LINGER`] is taken as [`MAX_LINGER`].
    pub const fn new(mode: Pacing) -> Pacer {
        let mode = match mode {
            Pacing::Fixed { linger } if linger.as_nanos() > MAX_LINGER.as_nanos() => {
                Pacing::Fixed { linger: MAX_LINGER }
            }
            Pacing::Adaptive { pace } if pace.as_nanos() > MAX_LINGER.as_nanos() => {
                Pacing::Adaptive { pace: MAX_LINGER }
            }
            mode => mode,
        };
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

    /// Before the clamp, a fixed linger of `u64::MAX` µs put the send time 584 years on,
    /// so a quiet ring's records never left.
    #[test]
    fn a_linger_or_pace_over_the_maximum_waits_the_maximum() {
        for mode in [
            Pacing::Fixed {
                linger: Duration::from_micros(u64::MAX),
            },
            Pacing::Fixed {
                linger: Duration::from_micros(1_000_001),
            },
        ] {
            let mut p = Pacer::new(mode);
            assert_eq!(p.send_at(us(7)), us(7) + MAX_LINGER, "{mode:?}");
            assert_eq!(p.deadline(), Some(us(7) + MAX_LINGER), "{mode:?}");
        }
        let mut p = Pacer::new(Pacing::Adaptive {
            pace: Duration::from_secs(3600),
        });
        assert_eq!(p.send_at(us(7)), us(7));
        p.on_send(us(7));
        assert_eq!(p.send_at(us(8)), us(7) + MAX_LINGER);
        // The maximum itself is kept as it is.
        let mut p = Pacer::new(Pacing::Fixed { linger: MAX_LINGER });
        assert_eq!(p.send_at(us(0)), us(0) + MAX_LINGER);
    }
}
