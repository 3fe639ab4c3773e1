//! Applying DATA and GAP to the mirror ring in order (spec §21.2–§21.4): the TCP rules, the
//! UDP `apply` with its hold-back store, restart handling and the resume check.

use super::{Mirror, MirrorCounters, MirrorError};
use crate::replicate::holdback::HoldError;
use crate::replicate::ring_io::{Holds, RecordSink, Replace};
use crate::replicate::time::Instant;
use crate::wire::{DataRepr, RecordFormat};

impl Mirror<'_> {
    pub(super) fn restart<S: RecordSink + ?Sized>(
        &mut self,
        next: u64,
        sink: &mut S,
    ) -> Result<(), MirrorError> {
        let g = self.geometry.ok_or(MirrorError::Closed)?;
        if sink.existing().is_some() {
            sink.replacing(Replace::Backwards {
                seq: next,
                next: self.next,
            });
        }
        sink.recreate(&g.mirror_geometry())
            .map_err(MirrorError::Sink)?;
        self.holdback.clear();
        self.nak = None;
        self.source_seq = None;
        self.source_claim = None;
        self.verify = None;
        self.next = next.max(1);
        self.counters.gaps += 1;
        self.counters.restarts += 1;
        Ok(())
    }

    /// A resume that cannot be checked continues after the record it held last, as the
    /// reference's does.
    pub(super) fn resume_unchecked(&mut self) {
        if let Some(w) = self.verify.take() {
            self.counters.resumes_unverified += 1;
            self.checked = Some((w, Holds::Unknown));
            self.next = w + 1;
        }
    }

    /// Settles a pending resume check with `d`, which holds its record (`d.seq <= w <
    /// d.end()`): see [`Mirror::settle`].
    fn check_resume<S: RecordSink + ?Sized>(
        &mut self,
        d: &DataRepr<'_>,
        from: u64,
        sink: &mut S,
    ) -> Result<(), MirrorError> {
        let held = self.verdict(d, sink);
        self.settle(held, from, sink)
    }

    /// Whether the mirror ring holds the source's copy in `d` of the record a pending
    /// resume check compares.
    fn verdict<S: RecordSink + ?Sized>(&self, d: &DataRepr<'_>, sink: &S) -> Holds {
        let Some(w) = self.verify else {
            return Holds::Unknown;
        };
        d.iter(self.fmt)
            .find(|r| r.seq == w)
            .map_or(Holds::Unknown, |r| sink.holds(w, r.fixed, r.blob))
    }

    /// Ends a pending resume check with the verdict `held`: the same record continues the
    /// ring after it; a different one means the source restarted, and the ring is recreated
    /// (as for RESET, spec §21.1) to take the source's records from `from` on.
    fn settle<S: RecordSink + ?Sized>(
        &mut self,
        held: Holds,
        from: u64,
        sink: &mut S,
    ) -> Result<(), MirrorError> {
        let Some(w) = self.verify else {
            return Ok(());
        };
        match held {
            Holds::Same => {
                self.verify = None;
                self.checked = Some((w, held));
                self.counters.resumes_verified += 1;
                self.next = w + 1;
            }
            Holds::Unknown => self.resume_unchecked(),
            Holds::Different => {
                let g = self.geometry.ok_or(MirrorError::Closed)?;
                sink.replacing(Replace::Differs { seq: w });
                sink.recreate(&g.mirror_geometry())
                    .map_err(MirrorError::Sink)?;
                self.verify = None;
                self.checked = Some((w, held));
                self.counters.restarts += 1;
                // Held data and the outstanding NAK stay: they come from this source.
                self.next = from.max(1);
            }
        }
        Ok(())
    }

    /// TCP mode (spec §21.3): backwards means a restarted source, forwards a hole.
    pub(super) fn apply_tcp<S: RecordSink + ?Sized>(
        &mut self,
        d: DataRepr<'_>,
        sink: &mut S,
    ) -> Result<(), MirrorError> {
        match self.verify {
            Some(w) if d.seq <= w && w < d.end() => {
                self.check_resume(&d, d.seq, sink)?;
                // Records of `d` below where the check left `next` are skipped.
                self.write_tcp(d, sink);
                return Ok(());
            }
            // The source skipped the record to compare.
            Some(w) if d.seq > w => self.resume_unchecked(),
            // Entirely below it: backwards, the restart rule below.
            _ => {}
        }
        if d.seq < self.next {
            self.restart(d.seq, sink)?;
        } else if d.seq > self.next {
            self.counters.gaps += 1;
            // Saturating: a hostile source can jump by nearly 2^64 more than once.
            self.counters.records_skipped = self
                .counters
                .records_skipped
                .saturating_add(d.seq - self.next);
            self.next = d.seq;
        }
        self.write_tcp(d, sink);
        Ok(())
    }

    fn write_tcp<S: RecordSink + ?Sized>(&mut self, d: DataRepr<'_>, sink: &mut S) {
        write_frame(
            d,
            self.fmt,
            self.max_blob,
            &mut self.next,
            sink,
            &mut self.counters,
        );
    }

    /// Spec §21.4 `apply`; returns how many of `d`'s own records were written. An error
    /// (a ring that a restart found by the resume check could not recreate) is fatal.
    pub(super) fn apply<S: RecordSink + ?Sized>(
        &mut self,
        now: Instant,
        d: DataRepr<'_>,
        sink: &mut S,
    ) -> Result<u64, MirrorError> {
        if d.end() <= self.next {
            self.counters.duplicates_dropped += 1;
            return Ok(0);
        }
        if d.seq > self.next {
            match self.holdback.insert(d.seq, d.count, d.records) {
                Ok(()) => {}
                Err(HoldError::Duplicate { .. }) => self.counters.duplicates_dropped += 1,
                Err(HoldError::Full { .. }) => self.counters.holdback_dropped += 1,
            }
            self.request(now, self.next, self.last_missing(d.seq - 1));
            return Ok(0);
        }
        // In order: `d` holds `next`, which is the record to compare while a check waits.
        self.check_resume(&d, self.next, sink)?;
        let before = self.counters.records_written;
        write_frame(
            d,
            self.fmt,
            self.max_blob,
            &mut self.next,
            sink,
            &mut self.counters,
        );
        let own = self.counters.records_written - before;
        self.after_progress(now, sink)?;
        Ok(own)
    }

    /// Drains the hold-back store in order, then asks for the next hole.
    pub(super) fn after_progress<S: RecordSink + ?Sized>(
        &mut self,
        now: Instant,
        sink: &mut S,
    ) -> Result<(), MirrorError> {
        while let Some(e) = self.holdback.first() {
            if e.end() <= self.next {
                self.holdback.pop_first();
                self.counters.duplicates_dropped += 1;
                continue;
            }
            if e.seq > self.next {
                self.request(now, self.next, e.seq - 1);
                break;
            }
            if self.verify.is_some() {
                let d = DataRepr {
                    flags: 0,
                    seq: e.seq,
                    count: e.count,
                    records: self.holdback.records(&e),
                };
                let held = self.verdict(&d, sink);
                self.settle(held, self.next, sink)?;
            }
            let d = DataRepr {
                flags: 0,
                seq: e.seq,
                count: e.count,
                records: self.holdback.records(&e),
            };
            write_frame(
                d,
                self.fmt,
                self.max_blob,
                &mut self.next,
                sink,
                &mut self.counters,
            );
            self.holdback.pop_first();
        }
        if self.nak.is_some_and(|n| self.next > n.to) {
            self.nak = None;
        }
        Ok(())
    }
}

/// Writes the records of `d` at or after `*next` (spec §21.2), then publishes the last one
/// written, once. A blob longer than `max_blob`, the mirror ring's arena (from a corrupt or
/// hostile source), cannot be held: its sequence is left a hole, which readers skip (§7),
/// and counted as skipped, not written.
fn write_frame<S: RecordSink + ?Sized>(
    d: DataRepr<'_>,
    fmt: RecordFormat,
    max_blob: u64,
    next: &mut u64,
    sink: &mut S,
    c: &mut MirrorCounters,
) {
    let end = d.end();
    if end <= *next {
        return;
    }
    let (mut last, mut in_hole) = (None, false);
    for r in d.iter(fmt) {
        if r.seq < *next {
            continue;
        }
        if r.blob.len() as u64 > max_blob {
            // Consecutive ones make one hole.
            c.gaps += u64::from(!in_hole);
            c.records_skipped = c.records_skipped.saturating_add(1);
            in_hole = true;
            continue;
        }
        in_hole = false;
        sink.write(r.seq, r.fixed, r.blob);
        c.records_written += 1;
        last = Some(r.seq);
    }
    *next = end;
    if let Some(s) = last {
        sink.publish(s);
    }
}
