//! Simulated links: an ordered byte stream with delay, a window and partitions (TCP), and a
//! datagram link with loss, duplication, reordering, delay and partitions (UDP).

use std::collections::VecDeque;

use super::rng::Rng;

/// Impairments of one mirror's path (both directions).
#[derive(Clone, Copy, Debug)]
pub struct Impair {
    /// One-way delay in ns.
    pub delay: u64,
    /// Extra random delay on datagrams, 0..jitter ns (reorders them).
    pub jitter: u64,
    /// Datagram loss probability.
    pub loss: f64,
    /// Datagram duplication probability.
    pub dup: f64,
    /// A partition `[start, end)` in ns: datagrams dropped, stream bytes held.
    pub partition: Option<(u64, u64)>,
}

impl Impair {
    fn cut(&self, t: u64) -> bool {
        self.partition.is_some_and(|(a, b)| t >= a && t < b)
    }
}

/// One direction of a TCP connection.
#[derive(Debug, Default)]
pub struct Stream {
    q: VecDeque<(u64, Vec<u8>)>,
    last: u64,
    in_flight: usize,
}

impl Stream {
    /// Bytes sent but not yet delivered.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }
    /// Drops everything in flight (the connection broke).
    pub fn clear(&mut self) {
        self.q.clear();
        self.in_flight = 0;
    }
    /// Sends `bytes` at `now`.
    pub fn send(&mut self, now: u64, bytes: &[u8], imp: &Impair) {
        let mut at = now + imp.delay;
        if let Some((a, b)) = imp.partition
            && (imp.cut(now) || (now < a && at >= a))
        {
            // Retransmitted after the partition heals.
            at = at.max(b + imp.delay);
        }
        at = at.max(self.last);
        self.last = at;
        self.in_flight += bytes.len();
        self.q.push_back((at, bytes.to_vec()));
    }
    /// Next delivery time.
    pub fn next_at(&self) -> Option<u64> {
        self.q.front().map(|e| e.0)
    }
    /// Takes what is due at `now`.
    pub fn take(&mut self, now: u64) -> Option<Vec<u8>> {
        if self.q.front()?.0 <= now {
            let (_, b) = self.q.pop_front()?;
            self.in_flight -= b.len();
            Some(b)
        } else {
            None
        }
    }
}

/// One direction of datagrams.
#[derive(Debug, Default)]
pub struct Datagrams {
    q: Vec<(u64, u64, Vec<u8>)>,
    n: u64,
    /// Datagrams lost by impairment (not partition).
    pub lost: u64,
}

impl Datagrams {
    /// Sends one datagram at `now`; returns false if it was dropped.
    pub fn send(&mut self, now: u64, bytes: &[u8], imp: &Impair, rng: &mut Rng) -> bool {
        let copies = if rng.chance(imp.dup) { 2 } else { 1 };
        let mut any = false;
        for _ in 0..copies {
            let at = now + imp.delay + rng.range(0, imp.jitter + 1);
            if imp.cut(now) || imp.cut(at) {
                continue;
            }
            if rng.chance(imp.loss) {
                self.lost += 1;
                continue;
            }
            self.n += 1;
            self.q.push((at, self.n, bytes.to_vec()));
            any = true;
        }
        any
    }
    /// Next delivery time.
    pub fn next_at(&self) -> Option<u64> {
        self.q.iter().map(|e| e.0).min()
    }
    /// Takes the earliest datagram due at `now`.
    pub fn take(&mut self, now: u64) -> Option<Vec<u8>> {
        let i = (0..self.q.len())
            .filter(|&i| self.q[i].0 <= now)
            .min_by_key(|&i| (self.q[i].0, self.q[i].1))?;
        Some(self.q.swap_remove(i).2)
    }
}
