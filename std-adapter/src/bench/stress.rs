//! Open-loop load: a pacer that publishes on a fixed schedule and never waits for the
//! receiver, and a tracker that matches what came back by sequence and flags every
//! reorder, duplicate and gap.

use std::time::{Duration, Instant};

/// Sends on a fixed schedule: message `i` (from 0) is due at `start + i / rate`. A sender that
/// falls behind sends at once and does not skip (open loop: it never waits for the receiver).
///
/// What a record's latency is measured from depends on how the caller waits for `due`:
///
/// * a producer that *spins* until `due` (`ringwire bench handoff`) stamps each record with
///   its scheduled time ([`Pacer::due_ns`], on `CLOCK_MONOTONIC` like
///   [`crate::bench::mono_ns`]), so a producer stall shows in the latency of every record
///   behind it (no coordinated omission); the async_wake bench's producer does the same in
///   its own loop (it spins, and stamps the scheduled time on its own `Instant` epoch);
/// * a producer that *sleeps* until `due` (`ringwire demo`, `ringwire bench stress`/`mirror`,
///   the replication bench) stamps each record at its push: the OS timer wakes it tens of
///   µs late, and stamping `due` would add that lateness of the load generator to every
///   sample. Those callers instead record the producer's lateness
///   (push time − due) in a second histogram and report it beside the latency, which bounds
///   how much a producer stall could have hidden.
#[derive(Clone, Debug)]
pub struct Pacer {
    start: Instant,
    interval_ns: f64,
    count: u64,
}

impl Pacer {
    /// A pacer for `rate` messages per second starting now. `rate` must be > 0.
    pub fn new(rate: f64) -> Pacer {
        Pacer {
            start: Instant::now(),
            interval_ns: 1e9 / rate.max(f64::MIN_POSITIVE),
            count: 0,
        }
    }

    /// The scheduled time of message `i`.
    pub fn due(&self, i: u64) -> Instant {
        self.start + Duration::from_nanos((i as f64 * self.interval_ns) as u64)
    }

    /// The scheduled time of message `i` in ns on `CLOCK_MONOTONIC`
    /// ([`crate::bench::mono_ns`]), given `start_ns`, that clock's reading taken as the
    /// schedule's start.
    pub fn due_ns(&self, start_ns: u64, i: u64) -> u64 {
        start_ns + (i as f64 * self.interval_ns) as u64
    }

    /// The next message index and its scheduled time.
    pub fn next_due(&mut self) -> (u64, Instant) {
        let i = self.count;
        self.count += 1;
        (i, self.due(i))
    }

    /// Messages scheduled within the first `d` of the run (the run's send count).
    pub fn count_within(&self, d: Duration) -> u64 {
        (d.as_nanos() as f64 / self.interval_ns).floor() as u64
    }
}

/// What one received sequence number was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// The next sequence, or a later one after a hole (see [`StressReport::gap_events`]).
    InOrder,
    /// Seen before.
    Duplicate,
    /// Below the highest sequence seen, and not seen before.
    Reordered,
    /// Not a sequence that was sent (0 or above the send count).
    Bogus,
}

/// Matches received sequences against sent ones (sequences are 1-based).
///
/// One bit per sequence of a window: [`SeqTracker::new`] covers every sequence (exact, one
/// bit each), [`SeqTracker::windowed`] only the newest `window` below the highest sequence
/// seen (memory bounded whatever the run's length).
#[derive(Clone, Debug)]
pub struct SeqTracker {
    /// Bit `s % window` is set when sequence `s` (in the window) was seen.
    seen: Vec<u64>,
    /// Sequences covered below (and including) `highest`; a multiple of 64.
    window: u64,
    max_seq: u64,
    highest: u64,
    delivered: u64,
    duplicates: u64,
    reorders: u64,
    gap_events: u64,
    bogus: u64,
}

/// The outcome of a stress run.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StressReport {
    /// Messages sent.
    pub sent: u64,
    /// Distinct messages received.
    pub delivered: u64,
    /// Received more than once.
    pub duplicates: u64,
    /// Received after a higher sequence.
    pub reorders: u64,
    /// Jumps forward past a sequence not yet received.
    pub gap_events: u64,
    /// Sent and never received.
    pub missing: u64,
    /// Sequences that were never sent.
    pub bogus: u64,
}

impl StressReport {
    /// Delivered as a percentage of sent.
    pub fn delivered_pct(&self) -> f64 {
        if self.sent == 0 {
            100.0
        } else {
            100.0 * self.delivered as f64 / self.sent as f64
        }
    }

    /// True when everything arrived exactly once and in order.
    pub fn is_clean(&self) -> bool {
        self.missing == 0
            && self.duplicates == 0
            && self.reorders == 0
            && self.gap_events == 0
            && self.bogus == 0
    }

    /// A one-line description of every error, or `None` when clean.
    pub fn errors(&self) -> Option<String> {
        if self.is_clean() {
            return None;
        }
        Some(format!(
            "{} missing, {} duplicates, {} reorders, {} gaps, {} bogus",
            self.missing, self.duplicates, self.reorders, self.gap_events, self.bogus
        ))
    }
}

impl SeqTracker {
    /// A tracker for up to `max_seq` sequences, exact: one bit each (`max_seq / 8` bytes).
    pub fn new(max_seq: u64) -> SeqTracker {
        SeqTracker::windowed(max_seq, max_seq.saturating_add(1))
    }

    /// A tracker for up to `max_seq` sequences that remembers only the `window` newest
    /// (rounded up to a multiple of 64, at most `max_seq + 1`): memory is `window / 8`
    /// bytes however large `max_seq` is. Exact for every sequence within `window` of the
    /// highest seen; a sequence older than that is counted a reorder, and not delivered
    /// (whether it is a duplicate cannot be told any more). A reader of a ring of `n` slots
    /// can never be handed a record `n` behind the newest it has read, so a window of at
    /// least `n` is exact for it.
    pub fn windowed(max_seq: u64, window: u64) -> SeqTracker {
        let window = window
            .clamp(1, max_seq.saturating_add(1))
            .div_ceil(64)
            .saturating_mul(64);
        SeqTracker {
            seen: vec![0; (window / 64) as usize],
            window,
            max_seq,
            highest: 0,
            delivered: 0,
            duplicates: 0,
            reorders: 0,
            gap_events: 0,
            bogus: 0,
        }
    }

    /// Bytes of memory the tracker's bitmap takes.
    pub fn memory_bytes(&self) -> usize {
        self.seen.len() * 8
    }

    /// The word and bit of sequence `seq`.
    fn bit(&self, seq: u64) -> (usize, u64) {
        let p = seq % self.window;
        ((p / 64) as usize, 1 << (p % 64))
    }

    /// Forgets the sequences `n` sequences after `highest` will replace in the window (those
    /// `window` below them).
    fn advance(&mut self, n: u64) {
        if n >= self.window {
            self.seen.fill(0);
            return;
        }
        let mut pos = (self.highest + 1) % self.window;
        let mut left = n;
        while left > 0 {
            let (w, b) = ((pos / 64) as usize, pos % 64);
            let take = left.min(64 - b);
            let mask = if take == 64 {
                u64::MAX
            } else {
                ((1u64 << take) - 1) << b
            };
            self.seen[w] &= !mask;
            left -= take;
            // The window is a multiple of 64: a word never straddles its end.
            pos = (pos + take) % self.window;
        }
    }

    /// Classifies and records one received sequence.
    pub fn record(&mut self, seq: u64) -> Arrival {
        if seq == 0 || seq > self.max_seq {
            self.bogus += 1;
            return Arrival::Bogus;
        }
        if seq > self.highest {
            self.advance(seq - self.highest);
            let (w, b) = self.bit(seq);
            self.seen[w] |= b;
            self.delivered += 1;
            if seq > self.highest + 1 {
                self.gap_events += 1;
            }
            self.highest = seq;
            return Arrival::InOrder;
        }
        if self.highest - seq >= self.window {
            // Older than the window: late, and possibly seen before (unknowable now).
            self.reorders += 1;
            return Arrival::Reordered;
        }
        let (w, b) = self.bit(seq);
        if self.seen[w] & b != 0 {
            self.duplicates += 1;
            return Arrival::Duplicate;
        }
        self.seen[w] |= b;
        self.delivered += 1;
        self.reorders += 1;
        Arrival::Reordered
    }

    /// The report after `sent` messages were sent.
    pub fn finish(&self, sent: u64) -> StressReport {
        StressReport {
            sent,
            delivered: self.delivered,
            duplicates: self.duplicates,
            reorders: self.reorders,
            gap_events: self.gap_events,
            missing: sent.saturating_sub(self.delivered),
            bogus: self.bogus,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_run() {
        let mut t = SeqTracker::new(100);
        for s in 1..=100 {
            assert_eq!(t.record(s), Arrival::InOrder);
        }
        let r = t.finish(100);
        assert!(r.is_clean(), "{r:?}");
        assert_eq!(r.delivered_pct(), 100.0);
        assert_eq!(r.errors(), None);
    }

    #[test]
    fn detects_loss_reorder_duplicate_gap_bogus() {
        let mut t = SeqTracker::new(10);
        for s in [1, 2, 4, 3, 3, 6, 0, 11] {
            t.record(s);
        }
        let r = t.finish(10);
        assert_eq!(r.delivered, 5); // 1 2 3 4 6
        assert_eq!(r.duplicates, 1); // the second 3
        assert_eq!(r.reorders, 1); // 3 after 4
        assert_eq!(r.gap_events, 2); // 2 -> 4 and 4 -> 6
        assert_eq!(r.bogus, 2); // 0 and 11
        assert_eq!(r.missing, 5); // 5 7 8 9 10
        assert!(!r.is_clean());
        assert_eq!(r.delivered_pct(), 50.0);
        assert!(r.errors().unwrap().contains("1 duplicates"));
    }

    #[test]
    fn tail_loss_is_missing_not_a_gap() {
        let mut t = SeqTracker::new(10);
        for s in 1..=8 {
            t.record(s);
        }
        let r = t.finish(10);
        assert_eq!((r.missing, r.gap_events), (2, 0));
        assert!(!r.is_clean());
    }

    #[test]
    fn windowed_tracker_is_bounded_and_exact_within_its_window() {
        // The largest `bench handoff` run (50,000,000 msg/s for an hour): one bit per
        // record would be 22.5 GB.
        let t = SeqTracker::windowed(50_000_000 * 3600, 1 << 22);
        assert_eq!(t.memory_bytes(), (1 << 22) / 8);
        assert_eq!(SeqTracker::new(100).memory_bytes(), 16);
        // A window of 64 over 1,000 sequences: the same verdicts as the exact tracker for
        // everything within 64 of the highest, across many wraps of the window.
        let (mut w, mut e) = (SeqTracker::windowed(1_000, 64), SeqTracker::new(1_000));
        let mut seqs: Vec<u64> = (1..=1_000).filter(|s| s % 97 != 0).collect();
        seqs.extend([950, 970, 999, 1_000, 1_001, 0]);
        seqs.insert(300, 250); // a duplicate 50 behind
        seqs.insert(400, 388); // 388 % 97 == 0: late, 12 behind, not seen before
        for &s in &seqs {
            assert_eq!(w.record(s), e.record(s), "seq {s}");
        }
        assert_eq!(w.finish(1_000), e.finish(1_000));
        // Beyond the window: a reorder, not delivered (it cannot be told from a duplicate).
        let mut w = SeqTracker::windowed(1_000, 64);
        for s in 1..=200 {
            w.record(s);
        }
        assert_eq!(w.record(10), Arrival::Reordered);
        let r = w.finish(200);
        assert_eq!((r.delivered, r.reorders, r.duplicates), (200, 1, 0));
        // A jump past the whole window forgets everything before it.
        assert_eq!(w.record(900), Arrival::InOrder);
        assert_eq!(w.record(899), Arrival::Reordered);
        assert_eq!(w.record(899), Arrival::Duplicate);
        assert_eq!(w.record(200), Arrival::Reordered);
    }

    #[test]
    fn pacer_schedule_is_open_loop() {
        let mut p = Pacer::new(1_000.0);
        let (i0, t0) = p.next_due();
        let (i1, t1) = p.next_due();
        assert_eq!((i0, i1), (0, 1));
        assert_eq!(t1 - t0, Duration::from_millis(1));
        assert_eq!(p.due(1000) - p.due(0), Duration::from_secs(1));
        assert_eq!(p.count_within(Duration::from_secs(5)), 5_000);
        assert_eq!(p.due_ns(7, 0), 7);
        assert_eq!(p.due_ns(7, 3), 3_000_007);
    }
}
