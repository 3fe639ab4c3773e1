//! The mirror's NAK logic (spec §21.4 `request`, `on_source_seq`, NAK repeat): one
//! outstanding range, asking only for what is still missing.

use super::{MAX_NAK_RECORDS, MIN_NAK_TIMEOUT, Mirror};
use crate::replicate::time::Duration;
use crate::replicate::time::Instant;
use crate::wire::NakRepr;

/// The outstanding NAK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Nak {
    pub(super) from: u64,
    pub(super) to: u64,
    /// Not sent before this ([`MirrorConfig::nak_delay`](super::MirrorConfig::nak_delay)
    /// after the hole was first seen).
    pub(super) due: Instant,
    pub(super) sent: Option<Instant>,
}

impl Mirror<'_> {
    pub(super) fn note_source_seq(&mut self, s: u64) {
        self.source_seq = Some(self.source_seq.map_or(s, |o| o.max(s)));
    }

    /// Spec §21.4 `on_source_seq`: a heartbeat shows how far the source has sent.
    pub(super) fn on_source_seq(&mut self, now: Instant, s: u64) {
        self.note_source_seq(s);
        if s >= self.next {
            self.request(now, self.next, s);
        }
    }

    /// What of `from..=to` is still missing: at most [`MAX_NAK_RECORDS`] records, stopping
    /// before the first held frame; `None` if nothing is.
    fn missing(&self, from: u64, to: u64) -> Option<(u64, u64)> {
        let mut to = to.min(from.saturating_add(MAX_NAK_RECORDS - 1));
        if let Some(e) = self.holdback.first_from(from)
            && e.seq <= to
        {
            to = e.seq - 1;
        }
        (from <= to).then_some((from, to))
    }

    /// Spec §21.4 `request`, asking only for what is missing: the range stops before the
    /// first held frame, and a range inside the outstanding NAK is not asked again before
    /// that NAK is due for a repeat (the reference only suppresses an identical `from`).
    /// A newly seen hole is asked for [`MirrorConfig::nak_delay`](super::MirrorConfig::nak_delay)
    /// later (at once by default); a hole that overlaps the outstanding NAK keeps its time.
    pub(super) fn request(&mut self, now: Instant, from: u64, to: u64) {
        let Some((from, to)) = self.missing(from, to) else {
            return;
        };
        let mut due = now + self.cfg.nak_delay;
        if let Some(n) = self.nak {
            let fresh = n.sent.is_none_or(|t| now < t + self.nak_repeat());
            // Already asked for (and not yet due for a repeat): the answer may be in flight.
            if n.from <= from && n.to >= to && fresh {
                return;
            }
            if from <= n.to {
                due = due.min(n.due);
            }
        }
        self.nak = Some(Nak {
            from,
            to,
            due,
            sent: None,
        });
    }

    /// The NAK repeat interval: the configured one, at least [`MIN_NAK_TIMEOUT`].
    fn nak_repeat(&self) -> Duration {
        self.cfg.nak_timeout.max(MIN_NAK_TIMEOUT)
    }

    /// When the outstanding NAK is to be sent: its first send once due, then a repeat every
    /// `nak_timeout`.
    pub(super) fn nak_deadline(&self) -> Option<Instant> {
        self.nak
            .map(|n| n.sent.map_or(n.due, |t| t + self.nak_repeat()))
    }

    /// The NAK to send now, if any: a new one once due (a hole that the delay let reordered
    /// datagrams fill is not asked for), or the outstanding one once `nak_timeout` has
    /// passed; either shrunk to what is still missing (spec §21.4 step 3, improved).
    pub(super) fn due_nak(&mut self, now: Instant) -> Option<NakRepr> {
        let n = self.nak?;
        if self.nak_deadline().is_some_and(|t| now < t) {
            return None;
        }
        let Some((from, to)) = self.missing(n.from.max(self.next), n.to) else {
            self.nak = None;
            return None;
        };
        self.nak = Some(Nak {
            from,
            to,
            due: n.due,
            sent: Some(now),
        });
        Some(NakRepr { from, to })
    }
}
