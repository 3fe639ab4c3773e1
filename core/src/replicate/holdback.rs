//! The mirror's hold-back store (spec §21.4 `apply`): DATA that arrived ahead of `next`,
//! kept in caller-supplied memory until the hole before it is filled.
//!
//! The index is a ring of entries sorted by first sequence (its head advances when the
//! lowest entry leaves); record bytes are appended to a caller byte buffer and left in
//! place when their entry leaves. So [`HoldBack::pop_first`] moves nothing, and emptying
//! the store costs one step per entry (a mirror step that fills a hole drains it). Space
//! freed in the middle of the byte buffer is reclaimed by one compaction when a frame no
//! longer fits after the last one appended but fits in the bytes free overall: the
//! capacity is still every byte of the buffer, without allocation or lasting
//! fragmentation. An empty store starts again at the front of both.

/// Most entries kept, as in the reference.
pub const MAX_HELD: usize = 8192;

/// One held DATA frame. Caller memory for the index is a slice of these.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeldEntry {
    /// First sequence.
    pub seq: u64,
    /// Record count.
    pub count: u16,
    off: u32,
    len: u32,
}

impl HeldEntry {
    /// Sequence after the last record (saturating at `u64::MAX`: [`HoldBack::insert`] takes
    /// any `seq`, and the fields are public).
    pub const fn end(&self) -> u64 {
        self.seq.saturating_add(self.count as u64)
    }
}

/// Why a frame was not held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum HoldError {
    /// An entry with the same first sequence is already held (the first copy wins).
    Duplicate {
        /// The frame's first sequence.
        seq: u64,
    },
    /// No index slot or not enough bytes left.
    Full {
        /// The frame's first sequence.
        seq: u64,
        /// Its record bytes.
        len: usize,
        /// Frames held.
        held: usize,
        /// Frames the index holds at most (`min(entries.len(), MAX_HELD)`).
        max_held: usize,
        /// Bytes free in the data buffer (of at most 4 GiB used), a held zero-sized record
        /// taking one.
        bytes_free: usize,
    },
}

impl core::fmt::Display for HoldError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            HoldError::Duplicate { seq } => write!(
                f,
                "a frame starting at sequence {seq} is already held (the first copy wins)"
            ),
            HoldError::Full {
                seq,
                len,
                held,
                max_held,
                bytes_free,
            } => write!(
                f,
                "no room to hold the frame at sequence {seq} ({len} bytes): {held} of \
                 {max_held} frames held, {bytes_free} bytes free"
            ),
        }
    }
}

impl core::error::Error for HoldError {}

/// The store.
#[derive(Debug)]
pub struct HoldBack<'a> {
    entries: &'a mut [HeldEntry],
    data: &'a mut [u8],
    /// Index in `entries` of the lowest entry; entry `i` is at `(head + i) % cap`.
    head: usize,
    n: usize,
    /// Where the next frame's bytes are appended.
    tail: usize,
    /// Bytes of the held entries (`tail` minus the bytes of entries that left since the
    /// last compaction).
    live: usize,
    /// Records of the held entries: each takes at least one byte of the room (see
    /// [`HoldBack::insert`]).
    records: usize,
    entries_moved: u64,
    bytes_moved: u64,
}

impl<'a> HoldBack<'a> {
    /// A store over caller memory: at most `min(entries.len(), 8192)` frames whose records
    /// together fit in `data` (at most 4 GiB of it is used), a zero-sized record taking one
    /// byte.
    pub fn new(entries: &'a mut [HeldEntry], data: &'a mut [u8]) -> HoldBack<'a> {
        HoldBack {
            entries,
            data,
            head: 0,
            n: 0,
            tail: 0,
            live: 0,
            records: 0,
            entries_moved: 0,
            bytes_moved: 0,
        }
    }

    /// Number of held frames.
    pub fn len(&self) -> usize {
        self.n
    }
    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
    /// Bytes in use.
    pub fn bytes_used(&self) -> usize {
        self.live
    }
    /// Index entries moved so far (inserting below held entries, compaction): the work
    /// counter tests bound.
    pub fn entries_moved(&self) -> u64 {
        self.entries_moved
    }
    /// Record bytes moved so far (compaction only).
    pub fn bytes_moved(&self) -> u64 {
        self.bytes_moved
    }

    /// Entries the index holds at most.
    fn cap(&self) -> usize {
        self.entries.len().min(MAX_HELD)
    }
    /// Bytes of `data` in use at most (offsets and lengths are u32).
    fn limit(&self) -> usize {
        self.data.len().min(u32::MAX as usize)
    }
    /// The slot of entry `i` (`i < cap`, so `cap > 0`).
    fn slot(&self, i: usize) -> usize {
        (self.head + i) % self.cap()
    }
    fn get(&self, i: usize) -> HeldEntry {
        self.entries[self.slot(i)]
    }
    /// The number of entries whose first sequence is below `seq`.
    fn rank(&self, seq: u64) -> usize {
        let (mut lo, mut hi) = (0, self.n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.get(mid).seq < seq {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Holds a frame of `count` records starting at `seq`. The room it takes is its bytes,
    /// and at least one byte per record (the room held is the larger of the bytes held and
    /// the records held): zero-sized records take no bytes of `data`, and a frame holds up
    /// to 65,535 of them in 16 bytes, so a store that took such frames by their bytes alone
    /// held 537 million records (8,192 frames) for the one call that fills the hole before
    /// them to write.
    pub fn insert(&mut self, seq: u64, count: u16, records: &[u8]) -> Result<(), HoldError> {
        let pos = self.rank(seq);
        if pos < self.n && self.get(pos).seq == seq {
            return Err(HoldError::Duplicate { seq });
        }
        let len = records.len();
        // Records with bytes take at least one each, so `live >= self.records` for them.
        let bytes_free = self.limit() - self.live.max(self.records);
        if self.n >= self.cap() || len.max(usize::from(count)) > bytes_free {
            return Err(HoldError::Full {
                seq,
                len,
                held: self.n,
                max_held: self.cap(),
                bytes_free,
            });
        }
        if len > self.limit() - self.tail {
            self.compact();
        }
        let off = self.tail;
        self.data[off..off + len].copy_from_slice(records);
        self.tail += len;
        self.live += len;
        self.records += usize::from(count);
        // Entries from `pos` up move one slot towards the tail (none for a frame above all
        // held ones, the usual case).
        for i in (pos..self.n).rev() {
            let (from, to) = (self.slot(i), self.slot(i + 1));
            self.entries[to] = self.entries[from];
        }
        self.entries_moved += (self.n - pos) as u64;
        let at = self.slot(pos);
        self.entries[at] = HeldEntry {
            seq,
            count,
            // Both fit: `off + len <= limit() <= u32::MAX`.
            off: off as u32,
            len: len as u32,
        };
        self.n += 1;
        Ok(())
    }

    /// Packs the held bytes at the front of `data`, in the order they lie there.
    fn compact(&mut self) {
        let cap = self.cap();
        if self.head + self.n > cap {
            self.entries[..cap].rotate_left(self.head);
            self.entries_moved += cap as u64;
            self.head = 0;
        }
        let held = &mut self.entries[self.head..self.head + self.n];
        // Moving each entry's bytes down in offset order never overwrites bytes still to be
        // moved. The index is usually in offset order already (frames mostly arrive in
        // sequence order), which both sorts detect in one pass.
        held.sort_unstable_by_key(|e| e.off);
        let mut to = 0usize;
        for e in held.iter_mut() {
            let (off, len) = (e.off as usize, e.len as usize);
            if off != to {
                self.data.copy_within(off..off + len, to);
                self.bytes_moved += len as u64;
                e.off = to as u32;
            }
            to += len;
        }
        held.sort_unstable_by_key(|e| e.seq);
        self.entries_moved += 2 * self.n as u64;
        self.tail = to;
        self.live = to;
    }

    /// The held frame with the lowest first sequence.
    pub fn first(&self) -> Option<HeldEntry> {
        (self.n > 0).then(|| self.get(0))
    }

    /// The first held frame whose first sequence is `>= seq`.
    pub fn first_from(&self, seq: u64) -> Option<HeldEntry> {
        let i = self.rank(seq);
        (i < self.n).then(|| self.get(i))
    }

    /// The held frame with the highest first sequence at or below `seq`, if any. It holds
    /// `seq` if a held frame does, unless frames of different cuts overlap there (a UDP
    /// datagram and a TCP answer), where an earlier, longer one may hold it instead.
    pub fn last_at_or_below(&self, seq: u64) -> Option<HeldEntry> {
        let i = self.rank(seq.saturating_add(1));
        (i > 0).then(|| self.get(i - 1))
    }

    /// The record bytes of a held entry.
    pub fn records(&self, e: &HeldEntry) -> &[u8] {
        let off = e.off as usize;
        &self.data[off..off + e.len as usize]
    }

    /// Removes the lowest entry. Moves nothing: its bytes are reclaimed by a later
    /// compaction, or at once when the store becomes empty.
    pub fn pop_first(&mut self) {
        if self.n == 0 {
            return;
        }
        let e = self.get(0);
        self.head = self.slot(1);
        self.n -= 1;
        self.live -= e.len as usize;
        self.records -= usize::from(e.count);
        if self.n == 0 {
            self.clear();
        }
    }

    /// Drops everything (a ring recreation).
    pub fn clear(&mut self) {
        self.head = 0;
        self.n = 0;
        self.tail = 0;
        self.live = 0;
        self.records = 0;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::string::ToString;

    use super::*;

    /// HoldError had no Display (nor Error impl) and carried no values: a mirror's caller
    /// could only log "Full" or "Duplicate", not which frame, nor how full the store was.
    /// And `end` of an entry held at a sequence near u64::MAX (insert takes any) overflowed.
    #[test]
    fn refusals_name_the_frame_and_the_room_left() {
        let mut idx = [HeldEntry::default(); 2];
        let mut data = [0u8; 8];
        let mut h = HoldBack::new(&mut idx, &mut data);
        h.insert(u64::MAX, 3, b"abc").unwrap();
        assert_eq!(h.first().unwrap().end(), u64::MAX);
        let e = h.insert(u64::MAX, 1, b"z").unwrap_err();
        let e: &dyn core::error::Error = &e;
        assert_eq!(
            e.to_string(),
            "a frame starting at sequence 18446744073709551615 is already held (the first copy \
             wins)"
        );
        assert_eq!(
            h.insert(7, 1, b"123456").unwrap_err().to_string(),
            "no room to hold the frame at sequence 7 (6 bytes): 1 of 2 frames held, 5 bytes free"
        );
    }

    #[test]
    fn sorted_first_copy_wins_compacts() {
        let mut idx = [HeldEntry::default(); 3];
        let mut data = [0u8; 10];
        let mut h = HoldBack::new(&mut idx, &mut data);
        h.insert(20, 1, b"cc").unwrap();
        h.insert(10, 2, b"aaaa").unwrap();
        assert_eq!(
            h.insert(10, 2, b"zzzz"),
            Err(HoldError::Duplicate { seq: 10 })
        );
        assert_eq!(
            h.insert(30, 1, b"12345"),
            Err(HoldError::Full {
                seq: 30,
                len: 5,
                held: 2,
                max_held: 3,
                bytes_free: 4
            })
        );
        h.insert(15, 1, b"bb").unwrap();
        let e = h.insert(40, 1, b"").unwrap_err();
        assert_eq!(
            e.to_string(),
            "no room to hold the frame at sequence 40 (0 bytes): 3 of 3 frames held, 2 bytes free"
        );
        assert_eq!(h.first_from(11).map(|e| e.seq), Some(15));
        let e = h.first().unwrap();
        assert_eq!((e.seq, e.end(), h.records(&e)), (10, 12, &b"aaaa"[..]));
        h.pop_first();
        assert_eq!(h.bytes_used(), 4);
        let e = h.first().unwrap();
        assert_eq!((e.seq, h.records(&e)), (15, &b"bb"[..]));
        h.pop_first();
        let e = h.first().unwrap();
        assert_eq!((e.seq, h.records(&e)), (20, &b"cc"[..]));
        h.pop_first();
        assert!(h.is_empty());
        h.pop_first();
        assert_eq!(h.len(), 0);
    }

    /// 8192 datagrams of 1456 bytes held, then drained (a hole filled): no byte and no
    /// entry moves, and each entry keeps its bytes where they were put.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "16 MB held and compared 8192 times: minutes under Miri (the other tests run \
                  the same code with small stores)"
    )]
    fn draining_a_full_store_moves_nothing() {
        let mut idx = vec![HeldEntry::default(); MAX_HELD];
        let mut data = vec![0u8; 16 << 20];
        let mut h = HoldBack::new(&mut idx, &mut data);
        for i in 0..MAX_HELD as u64 {
            h.insert(10 + i * 182, 182, &[i as u8; 1456]).unwrap();
        }
        assert!(matches!(
            h.insert(1, 1, b"x"),
            Err(HoldError::Full { len: 1, .. })
        ));
        let held: Vec<HeldEntry> = (0..MAX_HELD as u64)
            .map(|i| h.first_from(10 + i * 182).unwrap())
            .collect();
        let last = held[MAX_HELD - 1];
        for (i, e) in held.iter().enumerate() {
            assert_eq!(h.first(), Some(*e), "entry {i} moved");
            h.pop_first();
            assert_eq!(h.records(&last), &[(MAX_HELD - 1) as u8; 1456][..]);
        }
        assert!(h.is_empty());
        assert_eq!((h.entries_moved(), h.bytes_moved()), (0, 0));
        // Emptied, the store starts again at the front.
        h.insert(5, 1, b"abc").unwrap();
        let e = h.first().unwrap();
        assert_eq!((e.off, h.records(&e)), (0, &b"abc"[..]));
    }

    /// Bytes freed in the middle are reclaimed by one compaction when a frame does not fit
    /// after the last one but fits overall; it moves each held byte once, and frames that
    /// fit after the last one move nothing.
    #[test]
    fn compaction_moves_each_held_byte_once_and_keeps_the_capacity() {
        let mut idx = [HeldEntry::default(); 16];
        let mut data = [0u8; 1000];
        let mut h = HoldBack::new(&mut idx, &mut data);
        for i in 0..10u64 {
            h.insert(100 + i, 1, &[i as u8; 100]).unwrap();
        }
        assert!(matches!(
            h.insert(200, 1, b"x"),
            Err(HoldError::Full { len: 1, .. })
        ));
        for _ in 0..4 {
            h.pop_first();
        }
        assert_eq!(h.bytes_used(), 600);
        assert_eq!(h.bytes_moved(), 0);
        // 400 bytes free, none after the last frame: one compaction of the 600 held.
        h.insert(110, 1, &[10; 100]).unwrap();
        assert_eq!(h.bytes_moved(), 600);
        for i in 11..14u64 {
            h.insert(100 + i, 1, &[i as u8; 100]).unwrap();
        }
        assert_eq!(h.bytes_moved(), 600);
        assert_eq!(h.bytes_used(), 1000);
        assert!(matches!(
            h.insert(300, 1, b"x"),
            Err(HoldError::Full { len: 1, .. })
        ));
        for i in 4..14u64 {
            let e = h.first().unwrap();
            assert_eq!((e.seq, h.records(&e)), (100 + i, &[i as u8; 100][..]));
            h.pop_first();
        }
        assert!(h.is_empty());
    }

    /// Out-of-order inserts, duplicates, the index wrapping around and compactions, against
    /// a sorted map: the same entries, bytes and refusals, and compactions that move at most
    /// the bytes held.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "safe code only (holdback.rs has no unsafe and no atomics): Miri checks \
                  nothing here that a native run does not, and its 120 steps were the slowest \
                  test of its Miri half"
    )]
    fn matches_a_sorted_map() {
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        for cap in [1usize, 3, 8] {
            let mut idx = vec![HeldEntry::default(); cap];
            let mut data = [0u8; 64];
            let mut h = HoldBack::new(&mut idx, &mut data);
            let mut model: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
            let mut low = 0u64;
            for step in 0..20_000 {
                if next(3) == 0 {
                    h.pop_first();
                    if let Some((&s, _)) = model.iter().next() {
                        model.remove(&s);
                        low = s;
                    }
                } else {
                    let seq = low + next(24);
                    let bytes = vec![(seq + step) as u8; next(20) as usize];
                    let live: usize = model.values().map(Vec::len).sum();
                    // Room taken: the bytes held, and at least one per record held (one per
                    // entry here).
                    let used = live.max(model.len());
                    let want = if model.contains_key(&seq) {
                        Err(HoldError::Duplicate { seq })
                    } else if model.len() == cap || bytes.len().max(1) > 64 - used {
                        Err(HoldError::Full {
                            seq,
                            len: bytes.len(),
                            held: model.len(),
                            max_held: cap,
                            bytes_free: 64 - used,
                        })
                    } else {
                        Ok(())
                    };
                    let moved = h.bytes_moved();
                    assert_eq!(h.insert(seq, 1, &bytes), want, "cap {cap} step {step}");
                    assert!(h.bytes_moved() - moved <= live as u64);
                    if want.is_ok() {
                        model.insert(seq, bytes);
                    }
                }
                assert_eq!(h.len(), model.len());
                assert_eq!(h.bytes_used(), model.values().map(Vec::len).sum::<usize>());
                assert_eq!(h.first().map(|e| e.seq), model.keys().next().copied());
                for (&s, b) in &model {
                    let e = h.first_from(s).unwrap();
                    assert_eq!((e.seq, h.records(&e)), (s, &b[..]), "cap {cap} step {step}");
                    let after = model.range(s + 1..).next().map(|(&k, _)| k);
                    assert_eq!(h.first_from(s + 1).map(|e| e.seq), after);
                }
            }
            // One entry is reclaimed by emptying the store; more need compactions.
            assert_eq!(h.bytes_moved() > 0, cap > 1, "cap {cap}: compactions");
        }
    }
}
