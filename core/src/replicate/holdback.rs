//! The mirror's hold-back store (spec §21.4 `apply`): DATA that arrived ahead of `next`,
//! kept in caller-supplied memory until the hole before it is filled.
//!
//! Entries are kept sorted by first sequence in a caller slice; their record bytes are packed
//! in a caller byte buffer and compacted when an entry leaves, so there is no allocation and
//! no fragmentation.

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
    /// Sequence after the last record.
    pub const fn end(&self) -> u64 {
        self.seq + self.count as u64
    }
}

/// Why a frame was not held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HoldError {
    /// An entry with the same first sequence is already held (the first copy wins).
    Duplicate,
    /// No index slot or not enough bytes left.
    Full,
}

/// The store.
#[derive(Debug)]
pub struct HoldBack<'a> {
    entries: &'a mut [HeldEntry],
    data: &'a mut [u8],
    n: usize,
    used: usize,
}

impl<'a> HoldBack<'a> {
    /// A store over caller memory: at most `min(entries.len(), 8192)` frames whose records
    /// together fit in `data`.
    pub fn new(entries: &'a mut [HeldEntry], data: &'a mut [u8]) -> HoldBack<'a> {
        HoldBack {
            entries,
            data,
            n: 0,
            used: 0,
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
        self.used
    }

    /// Holds a frame of `count` records starting at `seq`.
    pub fn insert(&mut self, seq: u64, count: u16, records: &[u8]) -> Result<(), HoldError> {
        let pos = match self.entries[..self.n].binary_search_by_key(&seq, |e| e.seq) {
            Ok(_) => return Err(HoldError::Duplicate),
            Err(p) => p,
        };
        let cap = self.entries.len().min(MAX_HELD);
        let free = self.data.len() - self.used;
        if self.n >= cap || records.len() > free || self.used + records.len() > u32::MAX as usize {
            return Err(HoldError::Full);
        }
        let off = self.used;
        self.data[off..off + records.len()].copy_from_slice(records);
        self.used += records.len();
        self.entries.copy_within(pos..self.n, pos + 1);
        self.entries[pos] = HeldEntry {
            seq,
            count,
            off: off as u32,
            len: records.len() as u32,
        };
        self.n += 1;
        Ok(())
    }

    /// The held frame with the lowest first sequence.
    pub fn first(&self) -> Option<HeldEntry> {
        self.entries[..self.n].first().copied()
    }

    /// The first held frame whose first sequence is `>= seq`.
    pub fn first_from(&self, seq: u64) -> Option<HeldEntry> {
        let i = self.entries[..self.n].partition_point(|e| e.seq < seq);
        self.entries[..self.n].get(i).copied()
    }

    /// The record bytes of a held entry.
    pub fn records(&self, e: &HeldEntry) -> &[u8] {
        &self.data[e.off as usize..(e.off + e.len) as usize]
    }

    /// Removes the lowest entry and compacts the byte buffer.
    pub fn pop_first(&mut self) {
        if self.n == 0 {
            return;
        }
        let e = self.entries[0];
        self.entries.copy_within(1..self.n, 0);
        self.n -= 1;
        let (off, len) = (e.off as usize, e.len as usize);
        self.data.copy_within(off + len..self.used, off);
        self.used -= len;
        for x in &mut self.entries[..self.n] {
            if x.off as usize > off {
                x.off -= e.len;
            }
        }
    }

    /// Drops everything (a ring recreation).
    pub fn clear(&mut self) {
        self.n = 0;
        self.used = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_first_copy_wins_compacts() {
        let mut idx = [HeldEntry::default(); 3];
        let mut data = [0u8; 10];
        let mut h = HoldBack::new(&mut idx, &mut data);
        h.insert(20, 1, b"cc").unwrap();
        h.insert(10, 2, b"aaaa").unwrap();
        assert_eq!(h.insert(10, 2, b"zzzz"), Err(HoldError::Duplicate));
        assert_eq!(h.insert(30, 1, b"12345"), Err(HoldError::Full));
        h.insert(15, 1, b"bb").unwrap();
        assert_eq!(h.insert(40, 1, b""), Err(HoldError::Full));
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
}
