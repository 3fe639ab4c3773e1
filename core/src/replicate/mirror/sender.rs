//! Which multicast sender a mirror takes DATA from (beyond spec §21.4, which filters
//! multicast datagrams by the session byte only).
//!
//! A second sender on the group and port whose session byte collides with the source's
//! (1 in 256: another source, an old serve still running, a misconfigured host) had its
//! DATA applied as if it were the source's: records of another ring in the mirror ring.
//!
//! The sender's address cannot be known in advance: a source sends from the address of its
//! multicast interface (its `--iface`, or its route's) and from a port the protocol never
//! announces (ringfire's and ringwire's alike, an ephemeral one with multicast only), and
//! that address is often not the one the mirror reached it at over TCP. So a sender is
//! *tried*: the first DATA datagram of the session from an untried sender is set aside (not
//! applied), and its first record is asked for over TCP, where only the source answers
//! (a one-record NAK). When the source's copy arrives (any TCP DATA holding that record) it
//! is compared with the datagram's:
//!
//! - the same: that sender (address and port) is the source's. From then on DATA and
//!   heartbeats are taken from it only; every other sender's are dropped and counted in
//!   [`MirrorCounters::udp_wrong_source`](super::MirrorCounters::udp_wrong_source);
//! - different: the sender is refused for the rest of the connection (its datagrams are
//!   dropped and counted as wrong-source);
//! - not comparable (a GAP past the record: the source no longer holds it): the trial ends
//!   without a verdict, and the next DATA datagram starts another;
//! - no answer of the source's at all (no TCP DATA or GAP, for this NAK or an earlier
//!   one) for [`SENDER_TRIAL_TIMEOUT`]: the source does not hold the record (a sender far
//!   ahead of it), and the sender is refused. While answers keep coming the trial waits:
//!   the source answers NAKs in order, and this one may wait behind a long history.
//!
//! DATA set aside meanwhile is not lost: the records it held are asked for by NAK as soon as
//! a datagram or heartbeat shows them, as for any loss.
//!
//! Until a sender is confirmed, no heartbeat's claim counts in a figure a driver shows
//! ([`Mirror::source_seq`], [`Mirror::source_claim`]: the lag of a progress line): a
//! far-ahead one from a stranger showed a lag of 2^40 until the NAK it caused went
//! unanswered [`NAK_UNANSWERED_LIMIT`](super::NAK_UNANSWERED_LIMIT) times (160 ms at the
//! default `nak_timeout`). The heartbeats of the sender on trial are held with its trial:
//! confirmed, its highest claim is taken then as any heartbeat's (and makes the mirror NAK);
//! refused or unsettled, it is dropped. Those of other senders still make the mirror NAK,
//! and count in nothing else: only the source answers NAKs (over TCP), and a source that
//! sends no DATA (idle, with a history to fetch: spec §19.3) is never tried, so its
//! heartbeats are the only way to learn of that history.
//!
//! The comparison holds against accidents, not against a sender that copies the source's
//! datagrams from the group (or forges the source's address): UDP carries no proof of
//! origin.

use super::{MIN_NAK_TIMEOUT, Mirror, State};
use crate::replicate::PeerAddr;
use crate::replicate::time::{Duration, Instant};
use crate::wire::{DataRepr, NakRepr};

/// How long the source may send no answer to any NAK (no TCP DATA or GAP) while a sender
/// is on trial before the sender is refused: the source answers a NAK for a record it has
/// sent within a round trip once it has answered the NAKs before it.
pub const SENDER_TRIAL_TIMEOUT: Duration = Duration::from_secs(1);

/// Senders refused on one connection that are remembered (the oldest is forgotten first).
const REFUSED: usize = 4;

/// A multicast sender on trial.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Trial {
    from: PeerAddr,
    /// The first record of its first DATA datagram, asked for over TCP.
    seq: u64,
    /// [`digest`] of that record.
    digest: u64,
    /// When the source last answered a NAK (or the trial started), as seen at a send, with
    /// [`Mirror::answers`] then; and when the trial's NAK is (re)sent next.
    quiet_since: Instant,
    answers: u64,
    due: Instant,
    /// The highest heartbeat of the sender since its trial began: taken if it is confirmed.
    claim: Option<u64>,
}

/// The multicast sender checks of one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Senders {
    trial: Option<Trial>,
    refused: [Option<PeerAddr>; REFUSED],
    /// Where the next refused sender goes in `refused`.
    next_refused: usize,
}

/// What to do with a multicast datagram of the session, by its sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// From the confirmed sender, or datagrams are not checked by their sender: handle it.
    Take,
    /// From a refused sender, or another than the confirmed one.
    Wrong,
    /// DATA while no sender is confirmed, or a heartbeat of the sender on trial (its claim
    /// held with the trial): set aside, not applied.
    SetAside,
    /// A heartbeat while no sender is confirmed, from one not on trial: its claim may make
    /// the mirror NAK, and counts in nothing else.
    Unconfirmed,
}

/// FNV-1a (64-bit) over a record's fixed part and blob, each with its length.
fn digest(fixed: &[u8], blob: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let lens = [fixed.len() as u64, blob.len() as u64];
    for b in lens[0]
        .to_le_bytes()
        .iter()
        .chain(fixed)
        .chain(&lens[1].to_le_bytes())
        .chain(blob)
    {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl Mirror<'_> {
    /// Whether datagrams are checked by their multicast sender: live over multicast (no
    /// PUNCH) with [`MirrorConfig::check_udp_source`](super::MirrorConfig::check_udp_source).
    fn checks_multicast_sender(&self) -> bool {
        self.state == State::LiveUdp && self.punch.is_none() && self.cfg.check_udp_source
    }

    /// The multicast sender on trial, if any, and the record of its asked for over TCP.
    pub fn sender_on_trial(&self) -> Option<(PeerAddr, u64)> {
        self.senders.trial.map(|t| (t.from, t.seq))
    }

    /// The verdict on a datagram of the session from `from` whatever it holds, if there is
    /// one: `None` while no sender is confirmed and `from` is not refused.
    fn sort_by_sender(&self, from: PeerAddr) -> Option<Verdict> {
        if !self.checks_multicast_sender() {
            return Some(Verdict::Take);
        }
        if let Some(a) = self.udp_from {
            return Some(if a == from {
                Verdict::Take
            } else {
                Verdict::Wrong
            });
        }
        self.senders
            .refused
            .contains(&Some(from))
            .then_some(Verdict::Wrong)
    }

    /// Sorts a DATA datagram of the session from `from` (see the module docs), starting a
    /// trial of `from` when it is the first DATA of an untried sender.
    pub(super) fn sort_data(&mut self, now: Instant, from: PeerAddr, d: &DataRepr<'_>) -> Verdict {
        if let Some(v) = self.sort_by_sender(from) {
            return v;
        }
        if self.senders.trial.is_none()
            && let Some(r) = d.iter(self.fmt).next()
        {
            self.senders.trial = Some(Trial {
                from,
                seq: r.seq,
                digest: digest(r.fixed, r.blob),
                quiet_since: now,
                answers: self.answers,
                due: now,
                claim: None,
            });
        }
        Verdict::SetAside
    }

    /// Sorts a heartbeat of the session from `from` announcing `seq` (see the module docs):
    /// the claim of the sender on trial is held with its trial.
    pub(super) fn sort_heartbeat(&mut self, from: PeerAddr, seq: u64) -> Verdict {
        if let Some(v) = self.sort_by_sender(from) {
            return v;
        }
        match &mut self.senders.trial {
            Some(t) if t.from == from => {
                t.claim = t.claim.max(Some(seq));
                Verdict::SetAside
            }
            _ => Verdict::Unconfirmed,
        }
    }

    /// Settles the trial with the source's DATA `d` (over TCP) if it holds the record tried.
    /// Returns the highest heartbeat the sender sent on trial if `d` confirms it: the
    /// caller takes it as a heartbeat of the source's once `d` is applied.
    #[must_use]
    pub(super) fn sender_answer(&mut self, d: &DataRepr<'_>) -> Option<u64> {
        let t = self.senders.trial?;
        if t.seq < d.seq || t.seq >= d.end() {
            return None;
        }
        let r = d.iter(self.fmt).find(|r| r.seq == t.seq)?;
        self.senders.trial = None;
        if digest(r.fixed, r.blob) == t.digest {
            self.udp_from = Some(t.from);
            t.claim
        } else {
            self.refuse(t.from);
            None
        }
    }

    /// A GAP to `seq` from the source: a trial of a record below it cannot be settled.
    pub(super) fn sender_gap(&mut self, seq: u64) {
        if self.senders.trial.is_some_and(|t| t.seq < seq) {
            self.senders.trial = None;
        }
    }

    fn refuse(&mut self, from: PeerAddr) {
        let i = self.senders.next_refused % REFUSED;
        self.senders.refused[i] = Some(from);
        self.senders.next_refused = (i + 1) % REFUSED;
    }

    /// When the trial's NAK is due next (or its timeout, which comes with a send).
    pub(super) fn sender_deadline(&self) -> Option<Instant> {
        self.senders.trial.map(|t| t.due)
    }

    /// The trial's NAK if it is due now (sent, then repeated every `nak_timeout`); a trial
    /// whose source has answered nothing for [`SENDER_TRIAL_TIMEOUT`] refuses its sender
    /// instead.
    pub(super) fn due_sender_nak(&mut self, now: Instant) -> Option<NakRepr> {
        let mut t = self.senders.trial?;
        if now < t.due {
            return None;
        }
        if self.answers != t.answers {
            (t.answers, t.quiet_since) = (self.answers, now);
        }
        let end = t.quiet_since + SENDER_TRIAL_TIMEOUT;
        if now >= end {
            self.senders.trial = None;
            self.refuse(t.from);
            return None;
        }
        let repeat = self.cfg.nak_timeout.max(MIN_NAK_TIMEOUT);
        self.senders.trial = Some(Trial {
            due: (now + repeat).min(end),
            ..t
        });
        Some(NakRepr {
            from: t.seq,
            to: t.seq,
        })
    }

    /// Forgets the sender checks (a new connection).
    pub(super) fn reset_senders(&mut self) {
        self.senders = Senders::default();
    }
}

#[cfg(test)]
mod tests {
    use super::digest;

    #[test]
    fn digest_tells_the_split_between_fixed_part_and_blob() {
        assert_ne!(digest(b"ab", b"c"), digest(b"a", b"bc"));
        assert_ne!(digest(b"ab", b""), digest(b"ba", b""));
        assert_eq!(digest(b"ab", b"c"), digest(b"ab", b"c"));
    }
}
