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
///   behind it (no coordinated omission);
/// * a producer that *sleeps* until `due` (`ringwire demo`, `ringwire bench stress`/`mirror`,
///   the replication and async_wake benches) stamps each record at its push: the OS timer
///   wakes it tens of µs late, and stamping `due` would add that lateness of the load
///   generator to every sample. Those callers instead record the producer's lateness
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
#[derive(Clone, Debug)]
pub struct SeqTracker {
    seen: Vec<u64>,
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
    /// A tracker for up to `max_seq` sequences (bounded memory: one bit each).
    pub fn new(max_seq: u64) -> SeqTracker {
        SeqTracker {
            seen: vec![0; (max_seq as usize) / 64 + 1],
            max_seq,
            highest: 0,
            delivered: 0,
            duplicates: 0,
            reorders: 0,
            gap_events: 0,
            bogus: 0,
        }
    }

    /// Classifies and records one received sequence.
    pub fn record(&mut self, seq: u64) -> Arrival {
        let (w, b) = ((seq / 64) as usize, seq % 64);
        if seq == 0 || seq > self.max_seq {
            self.bogus += 1;
            return Arrival::Bogus;
        }
        if self.seen[w] & (1 << b) != 0 {
            self.duplicates += 1;
            return Arrival::Duplicate;
        }
        self.seen[w] |= 1 << b;
        self.delivered += 1;
        if seq < self.highest {
            self.reorders += 1;
            return Arrival::Reordered;
        }
        if seq > self.highest + 1 {
            self.gap_events += 1;
        }
        self.highest = seq;
        Arrival::InOrder
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
