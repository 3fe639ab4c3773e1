//! The reader's tally of `push_drain` (`benches/handoff.rs`): what a reader draining a
//! broadcast ring received of one try's timed pushes, and whether that try measured a
//! writer with a reader keeping pace.

/// How many timed records a reader may still lack when it sees the pushes end and count as
/// keeping pace, in a try of many pushes. In the runs this was set from, a reader that ran
/// on its core throughout lacked none of them in most tries and a few dozen at most (it
/// trails the writer by a few slots); one that was descheduled or stalled lacked hundreds
/// to all of them. A try of `iters` pushes allows at most half of them
/// ([`Drained::max_lag`]), so the check can fire in the shortest samples too.
pub const PUSH_DRAIN_MAX_LAG: u64 = 64;

/// What the reader of one try received of the timed records, counted by [`Drained::take`]
/// as they arrive.
#[derive(Clone, Copy, Debug)]
pub struct Drained {
    /// The sequence the next timed record should carry.
    next: u64,
    /// Timed records received before the reader saw the pushes end.
    pub by_stop: u64,
    /// Timed records received in all, the ring drained after the pushes ended: all of
    /// them unless the reader was lapped.
    pub total: u64,
    /// Whether a record came after a gap in the sequences (records it never got: lapped).
    pub gap: bool,
}

impl Drained {
    /// A tally whose first timed record carries sequence `first`.
    pub fn new(first: u64) -> Drained {
        Drained {
            next: first,
            by_stop: 0,
            total: 0,
            gap: false,
        }
    }

    /// Counts the record with sequence `seq`. A sequence past the next one means the
    /// reader missed records (it was lapped); one before it (a record again, or out of
    /// order) is a broken ring, and panics, so that the run fails rather than producing a
    /// number.
    pub fn take(&mut self, seq: u64) {
        assert!(
            seq >= self.next,
            "push_drain: record {seq} after record {} (duplicated or out of order)",
            self.next - 1
        );
        self.gap |= seq > self.next;
        self.next = seq + 1;
        self.total += 1;
    }

    /// Marks the moment the reader saw the pushes end: what it has now is `by_stop`.
    pub fn stop(&mut self) {
        self.by_stop = self.total;
    }

    /// How many of `iters` timed records the reader may lack at the stop and still count
    /// as keeping pace: [`PUSH_DRAIN_MAX_LAG`], at most half of them.
    pub fn max_lag(iters: u64) -> u64 {
        PUSH_DRAIN_MAX_LAG.min(iters / 2)
    }

    /// How the reader of a try of `iters` timed pushes fared: `clean` (every record, in
    /// order, at most [`Drained::max_lag`] behind when the pushes ended), `lapped` (fewer
    /// than all of them, or a gap in the sequences) or `behind`.
    pub fn outcome(&self, iters: u64) -> &'static str {
        if self.total < iters || self.gap {
            "lapped"
        } else if iters.saturating_sub(self.by_stop) > Drained::max_lag(iters) {
            "behind"
        } else {
            "clean"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(seqs: &[u64], stop_after: usize) -> Drained {
        let mut d = Drained::new(101);
        for (k, &s) in seqs.iter().enumerate() {
            if k == stop_after {
                d.stop();
            }
            d.take(s);
        }
        if stop_after >= seqs.len() {
            d.stop();
        }
        d
    }

    #[test]
    fn a_reader_with_every_record_in_time_is_clean() {
        let seqs: Vec<u64> = (101..=110).collect();
        assert_eq!(tally(&seqs, 10).outcome(10), "clean");
        // Up to half of a short try may arrive after the stop.
        assert_eq!(tally(&seqs, 5).outcome(10), "clean");
    }

    #[test]
    fn a_short_try_whose_reader_got_most_records_after_the_stop_is_behind() {
        // 10 pushes, 3 received by the stop: with the old fixed 64-record allowance this
        // try could never be "behind".
        let seqs: Vec<u64> = (101..=110).collect();
        let d = tally(&seqs, 3);
        assert_eq!((d.by_stop, d.total), (3, 10));
        assert_eq!(d.outcome(10), "behind");
        // A long try keeps the 64-record allowance.
        let seqs: Vec<u64> = (101..=1100).collect();
        assert_eq!(tally(&seqs, 1000 - 64).outcome(1000), "clean");
        assert_eq!(tally(&seqs, 1000 - 65).outcome(1000), "behind");
    }

    #[test]
    fn a_gap_is_lapped_even_when_the_count_is_complete() {
        // The count reaches iters only because the reader was given more records than the
        // try's (a miscount); the gap still says it missed some.
        let mut seqs: Vec<u64> = (101..=110).collect();
        seqs[4] = 120;
        seqs.iter_mut().skip(5).for_each(|s| *s += 15);
        let d = tally(&seqs, 10);
        assert_eq!(d.total, 10);
        assert_eq!(d.outcome(10), "lapped");
        // Fewer records than pushed: lapped.
        assert_eq!(tally(&[101, 102], 2).outcome(10), "lapped");
    }

    #[test]
    #[should_panic(expected = "record 103 after record 104")]
    fn a_record_again_fails_the_run() {
        tally(&[101, 102, 103, 104, 103], 5);
    }
}
