//! ringfire's fault injection for tests (its `MulticastConfig::drop_every` and
//! `swap_every`): which DATA datagrams the UDP sender of [`super::serve`] drops or sends late.

/// ringfire's fault injection (its `MulticastConfig::drop_every` and `swap_every`), counted
/// as ringfire counts. The n-th DATA datagram the UDP sender builds (n from 1; heartbeats and
/// records too long for any datagram do not count, a datagram then refused with EMSGSIZE
/// does) is held when n is a multiple of `swap_every` and none is held yet, else dropped
/// when n is a multiple of `drop_every`. A held datagram goes out right after the next DATA
/// datagram whose copies all went out without error; heartbeats do not release it, so on an
/// idle ring it waits (mirrors NAK its records once a heartbeat announces them), and it is
/// never sent if the server stops first.
#[derive(Debug)]
pub(super) struct Faults {
    /// Either knob is set.
    pub(super) on: bool,
    drop_every: u64,
    swap_every: u64,
    /// DATA datagrams built so far.
    built: u64,
    /// The held datagram, when `holding`; its room is reserved once, up front.
    held: Vec<u8>,
    holding: bool,
}

impl Faults {
    pub(super) fn new(drop_every: u64, swap_every: u64) -> Faults {
        Faults {
            on: drop_every != 0 || swap_every != 0,
            drop_every,
            swap_every,
            built: 0,
            held: Vec::with_capacity(if swap_every != 0 { 65_536 } else { 0 }),
            holding: false,
        }
    }

    /// Counts a DATA datagram just built; true if it goes out now, false if it is dropped
    /// or held (a copy is kept for [`Faults::take_held`]).
    pub(super) fn admit(&mut self, frame: &[u8]) -> bool {
        self.built += 1;
        if self.swap_every != 0 && self.built.is_multiple_of(self.swap_every) && !self.holding {
            self.held.clear();
            self.held.extend_from_slice(frame);
            self.holding = true;
            return false;
        }
        self.drop_every == 0 || !self.built.is_multiple_of(self.drop_every)
    }

    /// The held datagram, to send now: call after a DATA datagram went out without error.
    pub(super) fn take_held(&mut self) -> Option<&[u8]> {
        std::mem::take(&mut self.holding).then_some(&self.held[..])
    }
}

#[cfg(test)]
mod tests {
    use super::Faults;

    /// Builds datagrams 1..=n (each one byte, its number) through `f` as `udp_loop` does;
    /// `fails(k)` says whether delivering datagram k errs. Returns what went out, in order.
    fn run(mut f: Faults, n: u8, fails: impl Fn(u8) -> bool) -> Vec<u8> {
        let mut wire = Vec::new();
        for k in 1..=n {
            if f.on && !f.admit(&[k]) {
                continue;
            }
            if fails(k) {
                continue;
            }
            wire.push(k);
            if let Some(late) = f.take_held() {
                wire.extend_from_slice(late);
            }
        }
        wire
    }

    #[test]
    fn off_sends_everything_in_order() {
        let f = Faults::new(0, 0);
        assert!(!f.on);
        assert_eq!(run(f, 9, |_| false), (1..=9).collect::<Vec<_>>());
    }

    #[test]
    fn drop_every_skips_each_nth_counting_from_one() {
        let want: Vec<u8> = (1..=22).filter(|k| k % 7 != 0).collect();
        assert_eq!(run(Faults::new(7, 0), 22, |_| false), want);
    }

    #[test]
    fn swap_every_sends_each_nth_after_its_successor() {
        assert_eq!(
            run(Faults::new(0, 5), 12, |_| false),
            [1, 2, 3, 4, 6, 5, 7, 8, 9, 11, 10, 12]
        );
        // Every one: each odd datagram waits for the even one after it.
        assert_eq!(run(Faults::new(0, 1), 6, |_| false), [2, 1, 4, 3, 6, 5]);
        // The last one held stays held.
        assert_eq!(run(Faults::new(0, 3), 6, |_| false), [1, 2, 4, 3, 5]);
    }

    /// Holding wins over dropping; a held datagram waits through dropped and failed ones
    /// for the next one sent, and meanwhile another multiple of `swap_every` is not held.
    #[test]
    fn held_waits_for_the_next_datagram_sent() {
        assert_eq!(
            run(Faults::new(3, 5), 16, |_| false),
            [1, 2, 4, 7, 5, 8, 11, 10, 13, 14, 16, 15]
        );
        assert_eq!(run(Faults::new(0, 2), 7, |k| k == 3), [1, 4, 2, 5, 7, 6]);
    }
}
