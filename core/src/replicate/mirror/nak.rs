//! The mirror's NAK logic (spec §21.4 `request`, `on_source_seq`, NAK repeat): one
//! outstanding range, asking only for what is still missing.
//!
//! Beyond the reference, a NAK the source leaves unanswered is repeated less and less
//! often. A source answers every NAK for records it has sent (DATA, or a GAP for what it
//! lost) and ignores one for records it does not have (spec §20.4: it stops silently). So a
//! NAK that [`NAK_UNANSWERED_LIMIT`] sends in a row drew no answer asks for what the source
//! does not have: a UDP heartbeat far ahead of it, from a confused or hostile sender on the
//! group that knows the session byte, or the record a resume check waits for at a restarted
//! source. Repeated every `nak_timeout` (20 ms) as the reference does, such a NAK went out
//! for ever; from then on each repeat waits twice as long as the one before, up to
//! [`MAX_NAK_BACKOFF`] times `nak_timeout`, and is counted once in
//! [`MirrorCounters::naks_unanswered`](super::MirrorCounters::naks_unanswered). Datagrams
//! are still applied meanwhile, and the first answer (any TCP DATA or GAP) ends the back-off.

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
    /// Sends of this range in a row, before its last one, that no answer followed
    /// ([`Mirror::answers`] unchanged until the next repeat; a send of only the part added
    /// since is not counted): from [`NAK_UNANSWERED_LIMIT`] on its repeats back off.
    pub(super) unanswered: u32,
    /// [`Mirror::answers`] at the last send of the whole range (a send of only the part
    /// added since does not move it).
    pub(super) answers_at_send: u64,
}

/// Sends in a row that the source leaves unanswered before a NAK's repeats back off (see
/// the module docs): 160 ms at the default `nak_timeout`, several round trips of any path
/// a mirror runs on.
pub const NAK_UNANSWERED_LIMIT: u32 = 8;

/// The longest NAK repeat interval of the back-off, in `nak_timeout`s (1.28 s at the
/// default): a NAK that was unanswered only for a while (a restarted source reaching the
/// record a resume check waits for) is still asked again that often.
pub const MAX_NAK_BACKOFF: u32 = 64;

/// Held frames [`Mirror::missing`] trims off either end of a range, at most: enough for
/// the late datagrams at a NAK's ends, while a call's work stays bounded (a trim past a
/// long run of held frames would walk them all).
const TRIM_STEPS: usize = 8;

impl Mirror<'_> {
    /// Records a heartbeat's `s`: see [`Mirror::source_seq`] for how far it is believed.
    pub(super) fn note_source_seq(&mut self, s: u64) {
        self.source_claim = Some(self.source_claim.map_or(s, |o| o.max(s)));
        let believed = if self.nak.is_some_and(|n| self.backs_off(&n)) {
            s.min(self.shown())
        } else {
            s
        };
        self.source_seq = Some(self.source_seq.map_or(believed, |o| o.max(believed)));
    }

    /// Spec §21.4 `on_source_seq`: a heartbeat shows how far the source has sent. Only a
    /// claim: a range it asks for that the outstanding NAK covers waits for that NAK's
    /// repeat, backed off or not (see the module docs), so that heartbeats repeating the
    /// claim do not undo the back-off.
    pub(super) fn on_source_seq(&mut self, now: Instant, s: u64) {
        self.note_source_seq(s);
        self.ask_through(now, s);
    }

    /// The NAK of [`Mirror::on_source_seq`] alone, for a heartbeat's claim `s` that counts
    /// in no figure (a multicast sender not confirmed: the `sender` module).
    pub(super) fn ask_through(&mut self, now: Instant, s: u64) {
        if s >= self.next {
            self.request_as(now, self.next, self.last_missing(s), true);
        }
    }

    /// Counts a TCP DATA or GAP frame in UDP modes: an answer to a NAK.
    pub(super) fn note_answer(&mut self) {
        self.answers = self.answers.wrapping_add(1);
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
    ///
    /// A hole shown by a datagram that arrived past it is real (the source sent what lies
    /// beyond it), so it is asked for again once `nak_timeout` has passed even while the
    /// outstanding NAK's repeats are backed off.
    pub(super) fn request(&mut self, now: Instant, from: u64, to: u64) {
        self.request_as(now, from, to, false);
    }

    /// [`Mirror::request`]; `claimed` when the range rests only on a heartbeat's claim
    /// ([`Mirror::on_source_seq`]), which waits for a backed-off repeat.
    fn request_as(&mut self, now: Instant, from: u64, to: u64, claimed: bool) {
        let Some((from, to)) = self.missing(from, to) else {
            return;
        };
        let (mut from, mut to, mut ask_from) = (from, to, from);
        let mut due = now + self.cfg.nak_delay;
        // What the source left unanswered so far carries over to a range that joins the
        // outstanding one.
        let (mut unanswered, mut answers_at_send) = (0, self.answers);
        if let Some(n) = self.nak {
            let repeat = if claimed {
                self.repeat_after(&n)
            } else {
                self.nak_repeat()
            };
            let fresh = n.sent.is_none_or(|t| now < t + repeat);
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
                    (unanswered, answers_at_send) = (n.unanswered, n.answers_at_send);
                    ask_from = if claimed && self.backs_off(&n) {
                        // A claim sends nothing before the backed-off repeat, which asks
                        // for the range it extended (a heartbeat repeated with the stream
                        // moving on made a NAK of each step).
                        due = n.due;
                        n.ask_from.max(from)
                    } else if n.ask_from > n.from {
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
                        unanswered,
                        answers_at_send,
                    });
                    return;
                } else {
                    // Not sent yet, or due for its repeat: all of it goes at the old time.
                    due = due.min(n.due);
                    ask_from = from;
                    (unanswered, answers_at_send) = (self.close_sends(&n), self.answers);
                }
            }
        }
        self.nak = Some(Nak {
            from,
            to,
            due,
            sent: None,
            ask_from,
            unanswered,
            answers_at_send,
        });
    }

    /// The NAK repeat interval: the configured one, at least [`MIN_NAK_TIMEOUT`].
    fn nak_repeat(&self) -> Duration {
        self.cfg.nak_timeout.max(MIN_NAK_TIMEOUT)
    }

    /// [`Nak::unanswered`] of a NAK that replaces `n`: `n`'s own plus its last send if no
    /// answer came after it, or 0 if one did. Counts the NAK in
    /// [`MirrorCounters::naks_unanswered`](super::MirrorCounters::naks_unanswered) when it
    /// reaches [`NAK_UNANSWERED_LIMIT`].
    fn close_sends(&mut self, n: &Nak) -> u32 {
        if self.answers != n.answers_at_send {
            return 0;
        }
        let unanswered = if n.sent.is_some() {
            n.unanswered.saturating_add(1)
        } else {
            n.unanswered
        };
        if unanswered == NAK_UNANSWERED_LIMIT && n.unanswered < NAK_UNANSWERED_LIMIT {
            self.counters.naks_unanswered += 1;
            // The source does not have what it was asked for: a heartbeat's claim past what
            // it has shown is dropped, and does not come back when the back-off ends.
            let shown = self.shown();
            self.source_seq = self.source_seq.map(|s| s.min(shown));
        }
        unanswered
    }

    /// Whether `n`'s repeats are backed off: [`NAK_UNANSWERED_LIMIT`] sends in a row went
    /// unanswered, and no answer has come since.
    pub(super) fn backs_off(&self, n: &Nak) -> bool {
        n.unanswered >= NAK_UNANSWERED_LIMIT && self.answers == n.answers_at_send
    }

    /// How long after its last send `n` is repeated: [`Mirror::nak_repeat`], or, once
    /// [`NAK_UNANSWERED_LIMIT`] sends in a row went unanswered and none has come since,
    /// twice that for each further unanswered send, up to [`MAX_NAK_BACKOFF`] times it.
    pub(super) fn repeat_after(&self, n: &Nak) -> Duration {
        let base = self.nak_repeat();
        if self.answers != n.answers_at_send {
            return base;
        }
        let doublings = n.unanswered.saturating_sub(NAK_UNANSWERED_LIMIT - 1);
        let factor = 1u32
            .checked_shl(doublings)
            .map_or(MAX_NAK_BACKOFF, |f| f.min(MAX_NAK_BACKOFF));
        Duration::from_nanos(base.as_nanos().saturating_mul(u64::from(factor)))
    }

    /// When the outstanding NAK is to be sent: its first send once due, then a repeat every
    /// `nak_timeout` (backed off while unanswered, see the module docs), and the new part
    /// of a range extended since its last send once that part is due.
    pub(super) fn nak_deadline(&self) -> Option<Instant> {
        self.nak.map(|n| match n.sent {
            None => n.due,
            Some(t) if n.ask_from > n.from => n.due.min(t + self.repeat_after(&n)),
            Some(t) => t + self.repeat_after(&n),
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
        let repeat = n.sent.is_none_or(|t| now >= t + self.repeat_after(&n));
        let ask = if repeat { from } else { from.max(n.ask_from) };
        // Only a repeat judges the send before it: sending the new part alone is no sign
        // that the source left the old part unanswered, which may have been sent a moment
        // ago (heartbeats extending the range each millisecond counted it unanswered
        // NAK_UNANSWERED_LIMIT times within one `nak_timeout`). An answer to either part
        // still resets the count, from the earlier send's `answers_at_send`.
        let (unanswered, answers_at_send) = if repeat {
            (self.close_sends(&n), self.answers)
        } else {
            (n.unanswered, n.answers_at_send)
        };
        self.nak = Some(Nak {
            from,
            to,
            due: n.due,
            sent: Some(now),
            ask_from: from,
            unanswered,
            answers_at_send,
        });
        let (from, to) = self.missing(ask, to)?;
        Some(NakRepr { from, to })
    }
}
