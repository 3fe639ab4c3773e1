//! The source's UDP sender (spec §20.3): one per server, sending live DATA and HEARTBEAT
//! datagrams to the multicast group and to every punched unicast mirror, and validating
//! PUNCHes (§19.4).

use heapless::Vec;

use super::PeerAddr;
use super::collect::{Stop, collect};
use super::pacing::{Pacer, Pacing};
use super::ring_io::RecordSource;
use super::source::TokenRegistry;
use super::time::{Duration, Instant, earliest};
use crate::layout::oldest_retained;
use crate::wire::{Frame, HEADER_LEN, HeaderRepr, HeartbeatRepr, Kind, MAX_UDP_FRAME, PunchRepr};

/// UDP sender settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpConfig {
    /// Multicast group address and port, if multicast is configured.
    pub multicast: Option<PeerAddr>,
    /// Datagram budget before clamping to [24, 65536] (default 1472). Frames of several
    /// records stop at [`MAX_UDP_FRAME`] (65,507 bytes) whatever the budget.
    pub mtu: usize,
    /// Copies of every datagram (1..=255).
    pub duplicate: u8,
    /// Idle time before a HEARTBEAT (default 1 ms; at least
    /// [`MIN_HEARTBEAT`](super::MIN_HEARTBEAT)).
    pub heartbeat: Duration,
    /// Records per frame.
    pub batch: u16,
    /// Frame linger.
    pub pacing: Pacing,
}

impl Default for UdpConfig {
    fn default() -> UdpConfig {
        UdpConfig {
            multicast: None,
            mtu: 1472,
            duplicate: 1,
            heartbeat: Duration::from_millis(1),
            batch: 256,
            pacing: Pacing::default(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Unicast {
    token: u32,
    tcp_ip: [u8; 4],
    addr: Option<PeerAddr>,
    /// This host's address of the token's TCP connection (what the mirror dialled), if the
    /// driver told it.
    local_ip: Option<[u8; 4]>,
    /// When the last PUNCH was accepted.
    punched: Option<Instant>,
}

/// Counters of the UDP sender.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdpCounters {
    /// DATA frames built.
    pub data_frames: u64,
    /// HEARTBEAT frames built.
    pub heartbeats: u64,
    /// Records skipped because their frame exceeded 65,507 bytes or EMSGSIZE.
    pub oversized_skipped: u64,
    /// Records skipped on a lap, a loss or a hole (a sparse ring).
    pub skipped: u64,
    /// PUNCHes accepted.
    pub punches: u64,
    /// Datagrams rejected (bad frame, unknown token, wrong session or address).
    pub rejected: u64,
}

/// The UDP sender of one server, with room for `N` unicast mirrors.
#[derive(Debug)]
pub struct UdpSender<const N: usize> {
    cfg: UdpConfig,
    session: u8,
    budget: usize,
    cursor: u64,
    pacer: Pacer,
    last_beat: Instant,
    peers: Vec<Unicast, N>,
    next_token: u32,
    last_len: usize,
    counters: UdpCounters,
}

impl<const N: usize> UdpSender<N> {
    /// A sender for session byte `session` starting after the ring's current `write_seq`.
    pub fn new(cfg: UdpConfig, session: u8, write_seq: u64, now: Instant) -> UdpSender<N> {
        let mtu = cfg.mtu.clamp(24, 65_536);
        UdpSender {
            cfg: UdpConfig {
                duplicate: cfg.duplicate.max(1),
                batch: cfg.batch.max(1),
                ..cfg
            },
            session,
            budget: mtu.max(17),
            cursor: write_seq.saturating_add(1),
            pacer: Pacer::new(cfg.pacing),
            last_beat: now,
            peers: Vec::new(),
            next_token: 1,
            last_len: 0,
            counters: UdpCounters::default(),
        }
    }

    /// The session byte.
    pub fn session(&self) -> u8 {
        self.session
    }
    /// The current datagram budget.
    pub fn budget(&self) -> usize {
        self.budget
    }
    /// Next sequence to send.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }
    /// Copies of each datagram to send to each destination.
    pub fn duplicate(&self) -> u8 {
        self.cfg.duplicate
    }
    /// Counters.
    pub fn counters(&self) -> UdpCounters {
        self.counters
    }

    /// Whether a datagram would reach anyone: a multicast group is configured, or a unicast
    /// mirror has punched.
    #[must_use]
    pub fn has_destinations(&self) -> bool {
        self.cfg.multicast.is_some() || self.peers.iter().any(|p| p.addr.is_some())
    }

    /// Moves the cursor past every record `ring` has published without building a frame,
    /// and returns how many it passed: for a driver with no destination
    /// ([`UdpSender::has_destinations`]), whose frames would go nowhere. Building and
    /// sending them to no one would have moved the cursor the same way, so the first mirror
    /// to punch is sent what the ring publishes from then on either way (and fetches what
    /// it lacks by NAK over TCP). Call it until the first PUNCH is taken, right before
    /// taking PUNCHes, so the cursor is current when one is.
    pub fn pass_to_head<R: RecordSource + ?Sized>(&mut self, ring: &R) -> u64 {
        let head = ring.write_seq().saturating_add(1);
        let passed = head.saturating_sub(self.cursor);
        if passed > 0 {
            self.cursor = head;
            // A frame lingering for more records is given up with them.
            self.pacer.idle();
        }
        passed
    }

    /// Every destination of a datagram: the multicast group first, then each punched peer.
    pub fn destinations(&self) -> impl Iterator<Item = PeerAddr> + '_ {
        self.destinations_from().map(|(a, _)| a)
    }

    /// [`UdpSender::destinations`], each with the address to send from: a punched peer's
    /// [`UdpSender::set_local_ip`], `None` for the multicast group and peers without one.
    /// A unicast mirror accepts datagrams only from the address it connected to (spec
    /// §21.4), which on a host with several addresses need not be the one the kernel picks.
    pub fn destinations_from(&self) -> impl Iterator<Item = (PeerAddr, Option<[u8; 4]>)> + '_ {
        self.cfg.multicast.map(|m| (m, None)).into_iter().chain(
            self.peers
                .iter()
                .filter_map(|p| p.addr.map(|a| (a, p.local_ip))),
        )
    }

    /// Records this host's address of `token`'s TCP connection: datagrams to its peer are
    /// to be sent from it ([`UdpSender::destinations_from`]). Unknown tokens are ignored.
    pub fn set_local_ip(&mut self, token: u32, ip: [u8; 4]) {
        if let Some(p) = self.peers.iter_mut().find(|p| p.token == token) {
            p.local_ip = Some(ip);
        }
    }

    /// When a PUNCH with `token` was last accepted; `None` if none was, or if the token is
    /// not registered. A mirror punches every 5 s as a NAT keep-alive (spec §21.4), so a
    /// driver can end the session of a token unpunched for several of those: the mirror's
    /// host is gone, and every datagram sent to it is wasted.
    pub fn last_punch(&self, token: u32) -> Option<Instant> {
        self.peers
            .iter()
            .find(|p| p.token == token)
            .and_then(|p| p.punched)
    }

    /// Forgets a unicast token (its TCP connection ended, for any reason).
    pub fn unregister(&mut self, token: u32) {
        self.peers.retain(|p| p.token != token);
    }

    /// A datagram arrived on the unicast socket from `from`. Accepts a PUNCH only if it is
    /// exactly 16 bytes, kind 8, carries the session byte and a registered token, **and**
    /// comes from the IP address of that token's TCP connection. Returns true if accepted.
    pub fn handle_datagram(&mut self, now: Instant, from: PeerAddr, bytes: &[u8]) -> bool {
        let ok = Frame::new_checked(bytes)
            .and_then(|f| PunchRepr::parse(&f))
            .ok()
            .filter(|p| p.session == self.session)
            .and_then(|p| self.peers.iter_mut().find(|u| u.token == p.token))
            .filter(|u| u.tcp_ip == from.ip)
            .map(|u| {
                u.addr = Some(from);
                u.punched = Some(now);
            })
            .is_some();
        if ok {
            self.counters.punches += 1;
        } else {
            self.counters.rejected += 1;
        }
        ok
    }

    /// `sendto` of the last datagram (of `frame_len` bytes) failed with EMSGSIZE: lower the
    /// budget permanently. The records are recovered by NAK.
    pub fn handle_emsgsize(&mut self, frame_len: usize) {
        self.budget = self.budget.min(frame_len.saturating_sub(1)).max(17);
    }

    /// Length of the last datagram returned by `poll_transmit`.
    pub fn last_len(&self) -> usize {
        self.last_len
    }

    /// When a frame whose records are waiting for more may leave (its linger ends), if
    /// records are waiting.
    #[must_use]
    pub fn linger_deadline(&self) -> Option<Instant> {
        self.pacer.deadline()
    }

    /// When `poll_transmit` must be called even if the ring does not move.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        earliest(
            self.pacer.deadline(),
            Some(self.last_beat + self.cfg.heartbeat.max(super::MIN_HEARTBEAT)),
        )
    }

    /// Builds the next datagram in `buf` and returns its length; the caller sends it
    /// [`UdpSender::duplicate`] times to each of [`UdpSender::destinations`]. `None` when
    /// there is nothing to send now. Call until `None` whenever the ring moves and at
    /// [`UdpSender::poll_timeout`].
    #[must_use]
    pub fn poll_transmit<R: RecordSource + ?Sized>(
        &mut self,
        now: Instant,
        ring: &R,
        buf: &mut [u8],
    ) -> Option<usize> {
        // Beyond the reference, which fills frames to the whole budget (up to 65,536) and
        // then skips every one past 65,507 bytes: a frame of several records stops at the
        // largest datagram, so only a record too long for one alone goes by NAK.
        let budget = self.budget.min(MAX_UDP_FRAME);
        // Bounded work: a few laps or skips, then give the caller control back.
        for _ in 0..64 {
            let c = collect(ring, self.cursor, self.cfg.batch, budget, buf);
            if c.count > 0 {
                if !c.is_full() && now < self.pacer.send_at(now) {
                    return None;
                }
                self.pacer.on_send(now);
                let len = HEADER_LEN + c.bytes;
                let seq = self.cursor;
                self.cursor += u64::from(c.count);
                if len > MAX_UDP_FRAME {
                    // One record larger than any IPv4 datagram: mirrors fetch it over TCP by
                    // NAK.
                    self.counters.oversized_skipped += u64::from(c.count);
                    continue;
                }
                HeaderRepr {
                    kind: Kind::Data,
                    flags: self.session,
                    count: c.count,
                    len: c.bytes as u32,
                    seq,
                }
                .emit(buf)
                .ok()?;
                self.last_beat = now;
                self.last_len = len;
                self.counters.data_frames += 1;
                return Some(len);
            }
            self.pacer.idle();
            match c.stop {
                Stop::Lapped { seen } => {
                    let r = oldest_retained(ring.write_seq().max(seen), ring.geometry().capacity);
                    if r <= self.cursor {
                        break;
                    }
                    self.counters.skipped += r - self.cursor;
                    self.cursor = r;
                }
                Stop::Lost => {
                    self.counters.skipped += 1;
                    self.cursor += 1;
                }
                // A hole in a sparse ring (`RingSource`) is skipped like a lost record.
                Stop::Hole { next } => {
                    self.counters.skipped += next - self.cursor;
                    self.cursor = next;
                }
                Stop::Pending | Stop::Full => break,
            }
        }
        if now >= self.last_beat + self.cfg.heartbeat.max(super::MIN_HEARTBEAT) {
            self.last_beat = now;
            self.counters.heartbeats += 1;
            self.last_len = HEADER_LEN;
            return HeartbeatRepr {
                flags: self.session,
                seq: self.cursor - 1,
            }
            .emit(buf)
            .ok();
        }
        None
    }
}

impl<const N: usize> TokenRegistry for UdpSender<N> {
    fn register(&mut self, tcp_peer: PeerAddr) -> Option<u32> {
        if self.peers.is_full() {
            return None;
        }
        // Once the counter wraps, skip tokens still registered: a duplicate would let one
        // connection's unregister drop another's. At most N are in use, so this ends.
        let mut token = self.next_token;
        while self.peers.iter().any(|p| p.token == token) {
            token = token.wrapping_add(1).max(1);
        }
        self.peers
            .push(Unicast {
                token,
                tcp_ip: tcp_peer.ip,
                addr: None,
                local_ip: None,
                punched: None,
            })
            .ok()?;
        self.next_token = token.wrapping_add(1).max(1);
        Some(token)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::wire::PunchRepr;

    fn punch(u: &mut UdpSender<4>, from: PeerAddr, token: u32) -> bool {
        let mut b = [0u8; 16];
        PunchRepr { session: 7, token }.emit(&mut b).unwrap();
        u.handle_datagram(Instant::ZERO, from, &b)
    }

    /// After the u32 token counter wraps, a new connection must not get a token still held
    /// by a live one: its unregister would also drop the live mirror's registration.
    #[test]
    fn wrapped_token_counter_skips_tokens_in_use() {
        let mut u: UdpSender<4> = UdpSender::new(UdpConfig::default(), 7, 0, Instant::ZERO);
        let live = PeerAddr::new([10, 0, 0, 2], 40000);
        let other = PeerAddr::new([10, 0, 0, 9], 40000);
        assert_eq!(u.register(live), Some(1));
        u.next_token = u32::MAX;
        assert_eq!(u.register(other), Some(u32::MAX));
        let t = u.register(other).unwrap();
        assert!(t != 1 && t != u32::MAX && t != 0, "token {t} reused");
        u.unregister(t);
        u.unregister(u32::MAX);
        assert!(
            punch(&mut u, live, 1),
            "the live mirror lost its registration"
        );
        assert_eq!(u.destinations().count(), 1);
    }

    /// A punched peer is sent to from the local address recorded for its token; the
    /// multicast group and peers without one from the kernel's choice.
    #[test]
    fn destinations_carry_the_local_address_of_their_connection() {
        let group = PeerAddr::new([239, 1, 1, 1], 7400);
        let cfg = UdpConfig {
            multicast: Some(group),
            ..UdpConfig::default()
        };
        let mut u: UdpSender<4> = UdpSender::new(cfg, 7, 0, Instant::ZERO);
        let (a, b) = (
            PeerAddr::new([10, 0, 0, 2], 40000),
            PeerAddr::new([10, 0, 0, 3], 40000),
        );
        let (ta, tb) = (u.register(a).unwrap(), u.register(b).unwrap());
        u.set_local_ip(ta, [10, 0, 0, 100]);
        u.set_local_ip(99, [10, 0, 0, 101]);
        assert!(punch(&mut u, a, ta) && punch(&mut u, b, tb));
        let d: heapless::Vec<_, 4> = u.destinations_from().collect();
        assert_eq!(
            &d[..],
            &[(group, None), (a, Some([10, 0, 0, 100])), (b, None)]
        );
    }

    /// The time of a token's last accepted PUNCH; rejected ones do not count.
    #[test]
    fn last_punch_is_the_last_accepted_one() {
        let mut u: UdpSender<4> = UdpSender::new(UdpConfig::default(), 7, 0, Instant::ZERO);
        let m = PeerAddr::new([10, 0, 0, 2], 40000);
        let t = u.register(m).unwrap();
        assert_eq!(u.last_punch(t), None);
        let mut b = [0u8; 16];
        PunchRepr {
            session: 7,
            token: t,
        }
        .emit(&mut b)
        .unwrap();
        let at = |ms: u64| Instant::from_nanos(ms * 1_000_000);
        assert!(u.handle_datagram(at(5), m, &b));
        assert!(!u.handle_datagram(at(9), PeerAddr::new([10, 0, 0, 3], 1), &b));
        assert_eq!(u.last_punch(t), Some(at(5)));
        assert!(u.handle_datagram(at(7000), m, &b));
        assert_eq!(u.last_punch(t), Some(at(7000)));
        u.unregister(t);
        assert_eq!(u.last_punch(t), None);
    }
}
