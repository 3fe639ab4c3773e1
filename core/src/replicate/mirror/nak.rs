//! The mirror's NAK logic (spec §21.4 `request`, `on_source_seq`, NAK repeat): one
//! outstanding range, asking only for what is still missing.

use super::{MAX_NAK_RECORDS, Mirror};
use crate::replicate::time::Instant;
use crate::wire::NakRepr;

/// The outstanding NAK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Nak {
    pub(super) from: u64,
    pub(super) to: u64,
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

    /// Spec §21.4 `request`, asking only for what is missing: the range stops before the
    /// first held frame, and a range inside the outstanding NAK is not asked again before
    /// that NAK is due for a repeat (the reference only suppresses an identical `from`).
    pub(super) fn request(&mut self, now: Instant, from: u64, to: u64) {
        let mut to = to.min(from.saturating_add(MAX_NAK_RECORDS - 1));
        if let Some(e) = self.holdback.first_from(from)
            && e.seq <= to
        {
            to = e.seq - 1;
        }
        if from > to {
            return;
        }
        if let Some(n) = self.nak {
            let fresh = n.sent.is_none_or(|t| now < t + self.cfg.nak_timeout);
            // Already asked for (and not yet due for a repeat): the answer may be in flight.
            if n.from <= from && n.to >= to && fresh {
                return;
            }
        }
        self.nak = Some(Nak {
            from,
            to,
            sent: None,
        });
    }

    /// The NAK to send now, if any: a new one, or the outstanding one once `nak_timeout`
    /// has passed, shrunk to what is still missing (spec §21.4 step 3, improved).
    pub(super) fn due_nak(&mut self, now: Instant) -> Option<NakRepr> {
        if let Some(n) = self.nak
            && n.sent.is_some_and(|t| now >= t + self.cfg.nak_timeout)
        {
            self.nak = None;
            self.request(now, n.from.max(self.next), n.to);
        }
        let n = self.nak.as_mut().filter(|n| n.sent.is_none())?;
        n.sent = Some(now);
        Some(NakRepr {
            from: n.from,
            to: n.to,
        })
    }
}
