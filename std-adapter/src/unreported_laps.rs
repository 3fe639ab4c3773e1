//! [`UnreportedLaps`]: the losses a `recv_status` call found before returning `Empty`,
//! kept to be reported with the next record ([`RingConsumer`](crate::RingConsumer)'s and
//! [`BlobConsumer`](crate::BlobConsumer)'s `recv_status`).
//!
//! A reader can count lost records and still return nothing: lapped, it moves to the oldest
//! retained record and finds that slot being rewritten. Those losses belong to the record
//! the next call returns, which would otherwise report only its own.

/// After calls that returned `Empty`: the cursor the last one left, and the reader's
/// lapped count when the first one began.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct UnreportedLaps(Option<(u64, u64)>);

impl UnreportedLaps {
    /// The lapped count a call that starts at `cursor`, with the reader's lapped count at
    /// `lapped`, reports its losses from: the count when the `Empty` calls just before it
    /// began, if the cursor has not moved since the last of them (nothing else, a seek,
    /// a jump or another kind of receive, took records or losses in between); else `lapped`.
    pub(crate) fn since(&self, cursor: u64, lapped: u64) -> u64 {
        match self.0 {
            Some((at, since)) if at == cursor => since,
            _ => lapped,
        }
    }

    /// A call that began with the count `since` (what [`UnreportedLaps::since`] gave it)
    /// returned `Empty` and left the cursor at `cursor`.
    pub(crate) fn empty(&mut self, cursor: u64, since: u64) {
        self.0 = Some((cursor, since));
    }

    /// A call that began with the count `since` at `lapped_before` failed (a buffer too
    /// short for the next record) and left the cursor at `cursor` and the count at `lapped`.
    /// The losses the `Empty` calls before it stored (`lapped_before - since`) are still
    /// the next record's; the failed call's own are reported by no call, as in ringfire.
    pub(crate) fn failed(&mut self, cursor: u64, since: u64, lapped_before: u64, lapped: u64) {
        let stored = lapped_before.saturating_sub(since);
        self.0 = (stored > 0).then(|| (cursor, lapped.saturating_sub(stored)));
    }

    /// A call returned a record, and reported with it the losses before it.
    pub(crate) fn reported(&mut self) {
        self.0 = None;
    }
}
