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
    /// `from`, or, after the range was extended to a new hole while the NAK for the old
    /// range was on its way, the first record past that range: the new part, sent alone
    /// at `due` (unless the whole range is due for its repeat by then).
    pub(super) ask_from: u64,
}

/// Held frames [`Mirror::missing`] trims off either end of a range, at most: enough for
/// the late datagrams at a NAK's ends, while a call's work stays bounded (a trim past a
/// long run of held frames would walk them all).
const TRIM_STEPS: usize = 8;

impl Mirror<'_> {
    pub(super) fn note_source_seq(&mut self, s: u64) {
        self.source_seq = Some(self.source_seq.map_or(s, |o| o.max(s)));
    }

    /// Spec §21.4 `on_source_seq`: a heartbeat shows how far the source has sent.
    pub(super) fn on_source_seq(&mut self, now: Instant, s: u64) {
        self.note_source_seq(s);
        if s >= self.next {
            self.request(now, self.next, self.last_missing(s));
        }
    }

    /// `to` if no held frame holds it, or else the last record of the first hole: the end
    /// of a range to ask for that is known to be missing. Holes past the first one end
    /// before held frames that arrived after them, and were asked for then.
    pub(super) fn last_missing(&self, to: u64) -> u64 {
        match self.holdback.last_at_or_below(to) {
            Some(e) if e.end() > to => self
                .holdback
                .first()
                .map_or(to, |f| f.seq.saturating_sub(1).min(to)),
            _ => to,
        }
    }

    /// What of `from..=to` is still missing: at most [`MAX_NAK_RECORDS`] records, without
    /// the held frames at either end (up to [`TRIM_STEPS`] of them); `None` if nothing is.
    /// Held frames between two holes stay in the range: one NAK asks for every hole, as the
    /// reference's does, and a round trip repairs them all. A range cut at the first held
    /// frame asked for one hole a round trip, and a mirror losing datagrams more often
    /// than that never caught up.
    fn missing(&self, from: u64, to: u64) -> Option<(u64, u64)> {
        let (mut from, mut to) = (from, to);
        for _ in 0..TRIM_STEPS {
            match self.holdback.last_at_or_below(from) {
                Some(e) if e.end() > from => from = e.end(),
                _ => break,
            }
        }
        to = to.min(from.saturating_add(MAX_NAK_RECORDS - 1));
        for _ in 0..TRIM_STEPS {
            match self.holdback.last_at_or_below(to) {
                Some(e) if e.end() > to && e.seq > from => to = e.seq - 1,
                Some(e) if e.end() > to => return None,
                _ => break,
            }
        }
        (from <= to).then_some((from, to))
    }

    /// Spec §21.4 `request`, asking only for what is missing: the range leaves out the
    /// held frames at its ends, and a range inside the outstanding NAK is not asked again
    /// before that NAK is due for a repeat (the reference only suppresses an identical
    /// `from`). A range that meets the outstanding NAK joins it, so one NAK covers every
    /// hole; if that NAK was sent, only the part past it is sent now. A newly seen hole is
    /// asked for [`MirrorConfig::nak_delay`](super::MirrorConfig::nak_delay) later (at once
    /// by default); a hole the outstanding NAK already covered keeps its time.
    pub(super) fn request(&mut self, now: Instant, from: u64, to: u64) {
        let Some((from, to)) = self.missing(from, to) else {
            return;
        };
        let (mut from, mut to, mut ask_from) = (from, to, from);
        let mut due = now + self.cfg.nak_delay;
        if let Some(n) = self.nak {
            let fresh = n.sent.is_none_or(|t| now < t + self.nak_repeat());
            // Already asked for (and not yet due for a repeat): the answer may be in flight.
            if n.from <= from && n.to >= to && fresh {
                return;
            }
            if from <= n.to.saturating_add(1) {
                // A range that meets the outstanding one joins it: the holes of both are
                // still wanted (a range that ended lower no longer drops the holes above).
                let first = from.min(n.from).max(self.next);
                to = to.max(n.to).min(first.saturating_add(MAX_NAK_RECORDS - 1));
                from = first;
                if let Some(sent) = n.sent
                    && fresh
                    && from >= n.from
                {
                    // The old range is on its way: only the new hole goes, after its delay
                    // (a part added earlier and not sent yet keeps its time); the repeat
                    // asks for both.
                    ask_from = if n.ask_from > n.from {
                        due = due.min(n.due);
                        n.ask_from
                    } else {
                        // The hole that ends at `to` (which is missing) starts after the
                        // held frame below it; what lies between the old range and that
                        // frame is held (each hole was asked for when the datagram after
                        // it came), so it is not asked for.
                        let hole = self.holdback.last_at_or_below(to).map_or(0, |e| e.end());
                        hole.max(n.to + 1)
                    };
                    self.nak = Some(Nak {
                        from,
                        to,
                        due,
                        sent: Some(sent),
                        ask_from,
                    });
                    return;
                } else {
                    // Not sent yet, or due for its repeat: all of it goes at the old time.
                    due = due.min(n.due);
                    ask_from = from;
                }
            }
        }
        self.nak = Some(Nak {
            from,
            to,
            due,
            sent: None,
            ask_from,
        });
    }

    /// The NAK repeat interval: the configured one, at least [`MIN_NAK_TIMEOUT`].
    fn nak_repeat(&self) -> Duration {
        self.cfg.nak_timeout.max(MIN_NAK_TIMEOUT)
    }

    /// When the outstanding NAK is to be sent: its first send once due, then a repeat every
    /// `nak_timeout`, and the new part of a range extended since its last send once that
    /// part is due.
    pub(super) fn nak_deadline(&self) -> Option<Instant> {
        self.nak.map(|n| match n.sent {
            None => n.due,
            Some(t) if n.ask_from > n.from => n.due.min(t + self.nak_repeat()),
            Some(t) => t + self.nak_repeat(),
        })
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
        // A range extended while its older part was on its way, and not yet due for its
        // repeat: the new part only. If that has come meanwhile, nothing goes now.
        let repeat = n.sent.is_none_or(|t| now >= t + self.nak_repeat());
        let ask = if repeat { from } else { from.max(n.ask_from) };
        self.nak = Some(Nak {
            from,
            to,
            due: n.due,
            sent: Some(now),
            ask_from: from,
        });
        let (from, to) = self.missing(ask, to)?;
        Some(NakRepr { from, to })
    }
}
