//! Mirror tests over UDP: the hold-back store, NAKs (repeat, delay, every hole at once),
//! PUNCHes, heartbeats and the source session filter.

use super::*;

#[test]
fn mirror_udp_holdback_nak_repeat_only_missing() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let (mut idx, mut dm) = ([HeldEntry::default(); 8], [0u8; 512]);
    let mut m = udp_mirror(&mut sink, HoldBack::new(&mut idx, &mut dm), false);
    let d = |s, c| data(s, c, 0x22);
    assert!(m.handle_datagram(ms(1), UDP_SRC, &d(1, 2), &mut sink));
    assert!(m.handle_datagram(ms(1), UDP_SRC, &d(7, 2), &mut sink));
    assert!(m.handle_datagram(ms(1), UDP_SRC, &d(7, 2), &mut sink)); // duplicate copy
    assert_eq!(nak_out(&mut m, ms(1)), Some((3, 6)));
    assert_eq!(nak_out(&mut m, ms(2)), None, "no repeat before nak_timeout");
    // 3..4 arrive; the repeat 20 ms later asks only for 5..6.
    assert!(m.handle_datagram(ms(5), UDP_SRC, &d(3, 2), &mut sink));
    assert_eq!(m.poll_timeout(), Some(ms(21)));
    assert_eq!(nak_out(&mut m, ms(21)), Some((5, 6)));
    // A retransmission over TCP fills the hole; the held 7..8 follow in order.
    feed(&mut m, &data(5, 2, 0), &mut sink).unwrap();
    assert_eq!(sink.writes, [1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(m.outstanding_nak(), None);
    let c = m.counters();
    assert_eq!(
        (c.records_retransmitted, c.duplicates_dropped, c.naks_sent),
        (2, 1, 2)
    );
    // Tail loss: a heartbeat shows 12 was sent; ask for 9..12.
    let mut hb = [0u8; 16];
    HeartbeatRepr {
        flags: 0x22,
        seq: 12,
    }
    .emit(&mut hb)
    .unwrap();
    assert!(m.handle_datagram(ms(30), UDP_SRC, &hb, &mut sink));
    assert_eq!(nak_out(&mut m, ms(30)), Some((9, 12)));
    // GAP over TCP: 9..10 are gone.
    let mut gap = [0u8; 16];
    GapRepr { seq: 11 }.emit(&mut gap).unwrap();
    feed(&mut m, &gap, &mut sink).unwrap();
    assert_eq!(m.next(), 11);
    assert_eq!(nak_out(&mut m, ms(51)), Some((11, 12)));
}

/// A zero NAK timeout repeats the NAK at most every `MIN_NAK_TIMEOUT`. Taken as is, the
/// NAK was due again at once: every `poll_transmit` with the same `now` handed it out, and
/// the std driver, which sends until nothing is left, wrote NAKs for ever without reading
/// the retransmission (a `Mirror` built with `nak_timeout(Duration::ZERO)` hung).
#[test]
fn mirror_zero_nak_timeout_repeats_at_most_every_min_nak_timeout() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let (mut idx, mut dm) = ([HeldEntry::default(); 8], [0u8; 512]);
    let cfg = MirrorConfig {
        nak_timeout: Duration::ZERO,
        ..MirrorConfig::default()
    };
    let mut m = udp_mirror_with(&mut sink, HoldBack::new(&mut idx, &mut dm), false, cfg);
    assert!(m.handle_datagram(ms(1), UDP_SRC, &data(1, 2, 0x22), &mut sink));
    assert!(m.handle_datagram(ms(1), UDP_SRC, &data(7, 2, 0x22), &mut sink));
    assert_eq!(nak_out(&mut m, ms(1)), Some((3, 6)));
    let mut sent = 1;
    for _ in 0..1000 {
        if nak_out(&mut m, ms(1)).is_none() {
            break;
        }
        sent += 1;
    }
    assert_eq!(sent, 1, "the NAK was sent again with the same `now`");
    let min = crate::replicate::mirror::MIN_NAK_TIMEOUT;
    assert_eq!(m.poll_timeout(), Some(ms(1) + min));
    assert_eq!(nak_out(&mut m, ms(1) + min), Some((3, 6)));
}

/// PUNCHes handed out by `poll_transmit` at one `now`, up to 1,000.
fn punches_at(m: &mut Mirror<'_>, now: Instant) -> usize {
    let mut b = [0u8; 64];
    let mut n = 0;
    while n < 1000 {
        match m.poll_transmit(now, &mut b) {
            Some(t) if t.channel == Channel::Udp(UDP_SRC) => n += 1,
            Some(t) => panic!("not a punch: {t:?}"),
            None => break,
        }
    }
    n
}

/// A zero `punch_interval` or `punch_keepalive` (public in the core, not settable from the
/// std side) made the next PUNCH due at once: every `poll_transmit` with the same `now`
/// handed one out, so a driver that sends until nothing is left sent PUNCHes for ever
/// (the NAK timeout's hang, over UDP). Both are floored at `MIN_PUNCH_INTERVAL`.
#[test]
fn mirror_zero_punch_intervals_punch_at_most_every_min_punch_interval() {
    let min = crate::replicate::mirror::MIN_PUNCH_INTERVAL;
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let (mut idx, mut dm) = ([HeldEntry::default(); 8], [0u8; 512]);
    let cfg = MirrorConfig {
        punch_interval: Duration::ZERO,
        punch_keepalive: Duration::ZERO,
        ..MirrorConfig::default()
    };
    let mut m = udp_mirror_with(&mut sink, HoldBack::new(&mut idx, &mut dm), true, cfg);
    // Not heard yet: the fast rate.
    assert_eq!(punches_at(&mut m, ms(1)), 1);
    assert_eq!(m.poll_timeout(), Some(ms(1) + min));
    assert_eq!(punches_at(&mut m, ms(1) + min), 1);
    // Heard: the keep-alive.
    let t = ms(1) + min + min;
    assert!(m.handle_datagram(t, UDP_SRC, &data(1, 1, 0x22), &mut sink));
    assert_eq!(punches_at(&mut m, t), 1);
    assert_eq!(m.poll_timeout(), Some(t + min));
    assert_eq!(punches_at(&mut m, t + min), 1);
}

/// Records 1..=4 at 1 ms, then a heartbeat of session 0x22 claiming sequence 2^40 (far
/// ahead of anything the source sent): the heartbeat's bytes, for repeating it.
pub(super) fn far_ahead_heartbeat(m: &mut Mirror<'_>, sink: &mut Sink) -> [u8; 16] {
    assert!(m.handle_datagram(ms(1), UDP_SRC, &data(1, 4, 0x22), sink));
    let mut hb = [0u8; 16];
    HeartbeatRepr {
        flags: 0x22,
        seq: 1 << 40,
    }
    .emit(&mut hb)
    .unwrap();
    assert!(m.handle_datagram(ms(1), UDP_SRC, &hb, sink));
    hb
}

/// A heartbeat far ahead of the stream (forged by any host that can read the session byte
/// off the multicast group, or from a confused source) is asked for once (spec §21.4
/// `on_source_seq`), not again after every datagram that then arrives in order: each of
/// those requests starts at the new `next`, so none is covered by the outstanding NAK, and
/// each would make the source send the live stream a second time over TCP.
#[test]
fn mirror_udp_heartbeat_far_ahead_is_asked_for_once_not_after_every_datagram() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let (mut idx, mut dm) = ([HeldEntry::default(); 8], [0u8; 512]);
    let mut m = udp_mirror(&mut sink, HoldBack::new(&mut idx, &mut dm), false);
    far_ahead_heartbeat(&mut m, &mut sink);
    assert_eq!(nak_out(&mut m, ms(1)), Some((5, 5 + 65_534)));
    // 100 datagrams of 4 records in order, within one nak_timeout: no further NAK.
    let mut naks = 0;
    for k in 0..100u64 {
        let at = Instant::from_nanos(1_000_000 + (k + 1) * 100_000);
        assert!(m.handle_datagram(at, UDP_SRC, &data(5 + 4 * k, 4, 0x22), &mut sink));
        naks += usize::from(nak_out(&mut m, at).is_some());
    }
    assert_eq!((m.next(), naks), (405, 0));
    // The outstanding NAK is repeated after nak_timeout, for what is still missing.
    assert_eq!(nak_out(&mut m, ms(21)), Some((405, 5 + 65_534)));
}

/// With a NAK delay, a hole that a reordered datagram fills within the delay is never asked
/// for; a real loss is asked for once the delay has passed, every hole in one NAK.
#[test]
fn mirror_udp_nak_delay_lets_reordered_datagrams_fill_holes() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let (mut idx, mut dm) = ([HeldEntry::default(); 8], [0u8; 512]);
    let cfg = MirrorConfig {
        nak_delay: Duration::from_millis(5),
        ..MirrorConfig::default()
    };
    let mut m = udp_mirror_with(&mut sink, HoldBack::new(&mut idx, &mut dm), false, cfg);
    let d = |s, c| data(s, c, 0x22);
    assert!(m.handle_datagram(ms(1), UDP_SRC, &d(1, 2), &mut sink));
    // 5..6 overtakes 3..4.
    assert!(m.handle_datagram(ms(1), UDP_SRC, &d(5, 2), &mut sink));
    assert_eq!(nak_out(&mut m, ms(1)), None, "the hole waits for the delay");
    assert_eq!(m.poll_timeout(), Some(ms(6)));
    assert!(m.handle_datagram(ms(3), UDP_SRC, &d(3, 2), &mut sink));
    assert_eq!(m.outstanding_nak(), None);
    assert_eq!(nak_out(&mut m, ms(6)), None);
    assert_eq!(sink.writes, [1, 2, 3, 4, 5, 6]);
    // A real loss of 7..10: asked for 5 ms after 11 showed the hole; 8 came meanwhile,
    // and the NAK asks for both holes around it in one go (8 comes again).
    assert!(m.handle_datagram(ms(10), UDP_SRC, &d(11, 1), &mut sink));
    assert!(m.handle_datagram(ms(12), UDP_SRC, &d(8, 1), &mut sink));
    assert_eq!(nak_out(&mut m, ms(14)), None);
    assert_eq!(nak_out(&mut m, ms(15)), Some((7, 10)));
    feed(&mut m, &data(7, 4, 0), &mut sink).unwrap();
    assert_eq!(nak_out(&mut m, ms(16)), None);
    assert_eq!(sink.writes, (1..=11).collect::<Vec<u64>>());
    let c = m.counters();
    assert_eq!((c.naks_sent, c.records_retransmitted), (1, 4));
}

#[test]
fn mirror_udp_filters_source_session_and_bounds_steps() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let (mut idx, mut dm) = ([HeldEntry::default(); 8], [0u8; 512]);
    let mut m = udp_mirror(&mut sink, HoldBack::new(&mut idx, &mut dm), true);
    // The first punch goes out at once to (source IP, port), every 200 ms until heard.
    let mut b = [0u8; 64];
    let t = m.poll_transmit(ms(0), &mut b).unwrap();
    assert_eq!(t.channel, Channel::Udp(UDP_SRC));
    assert_eq!(
        frames(&b[..t.len])[0],
        FrameRepr::Punch(PunchRepr {
            session: 0x22,
            token: 5
        })
    );
    assert_eq!(m.poll_timeout(), Some(ms(200)));
    assert_eq!(m.udp_source(), Some(UDP_SRC));
    // Wrong port, wrong session, short: garbage.
    assert!(!m.handle_datagram(
        ms(1),
        PeerAddr::new(UDP_SRC.ip, 1),
        &data(1, 1, 0x22),
        &mut sink
    ));
    assert!(!m.handle_datagram(ms(1), UDP_SRC, &data(1, 1, 0x23), &mut sink));
    assert!(!m.handle_datagram(ms(1), UDP_SRC, &[3, 0x22, 1], &mut sink));
    assert_eq!((m.counters().garbage_dropped, sink.writes.len()), (3, 0));
    // The one from a wrong address is also counted apart (the driver warns about them).
    assert_eq!(m.counters().udp_wrong_source, 1);
    // Heard: the next punch is a keep-alive 5 s later.
    let pkts: Vec<Vec<u8>> = (1..=40).map(|s| data(s, 1, 0x22)).collect();
    let mut it = pkts.iter().map(|p| (UDP_SRC, p.as_slice()));
    assert_eq!(m.handle_datagrams(ms(2), &mut it, &mut sink), 32);
    assert_eq!(sink.writes.len(), 32);
    assert_eq!(m.handle_datagrams(ms(2), &mut it, &mut sink), 8);
    // Heard from the source: the source's port at another IP is now a wrong address.
    assert!(!m.handle_datagram(
        ms(2),
        PeerAddr::new([1, 2, 3, 4], UDP_SRC.port),
        &data(41, 1, 0x22),
        &mut sink
    ));
    assert_eq!(m.counters().udp_wrong_source, 2);
    assert_eq!(sink.writes.len(), 40);
    let t = m.poll_transmit(ms(200), &mut b).unwrap();
    assert_eq!(t.channel, Channel::Udp(UDP_SRC));
    // Heartbeats keep the path "heard": the keep-alive is 5 s after the last punch.
    let mut hb = [0u8; 16];
    HeartbeatRepr {
        flags: 0x22,
        seq: 40,
    }
    .emit(&mut hb)
    .unwrap();
    assert!(m.handle_datagram(ms(201), UDP_SRC, &hb, &mut sink));
    assert!(m.poll_transmit(ms(300), &mut b).is_none());
    assert_eq!(m.poll_timeout(), Some(ms(401)));
    assert!(m.handle_datagram(ms(400), UDP_SRC, &hb, &mut sink));
    assert_eq!(m.poll_timeout(), Some(ms(600)));
    // Silence for a punch interval: punch again at the fast rate.
    assert!(m.poll_transmit(ms(599), &mut b).is_none());
    let t = m.poll_transmit(ms(600), &mut b).unwrap();
    assert_eq!(t.channel, Channel::Udp(UDP_SRC));
    assert_eq!(m.poll_timeout(), Some(ms(800)));
}

/// Every other datagram lost: holes at 2, 4, 6 and 8, each followed by a datagram that
/// arrived. All of them are asked for at once, in one NAK, so one round trip repairs them.
/// The NAK used to stop before the first held datagram: NAK(2, 2), and 4 was asked for only
/// when the answer for 2 had come, one round trip per hole. A mirror losing a datagram every
/// round trip or more often then fell behind for good, until the source lapped it and the
/// records were lost (GAP) where one NAK a round trip would have repaired them all.
#[test]
fn mirror_udp_asks_for_every_hole_in_one_round_trip() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let (mut idx, mut dm) = ([HeldEntry::default(); 8], [0u8; 512]);
    let mut m = udp_mirror(&mut sink, HoldBack::new(&mut idx, &mut dm), false);
    for s in [1, 3, 5, 7, 9] {
        assert!(m.handle_datagram(ms(1), UDP_SRC, &data(s, 1, 0x22), &mut sink));
    }
    let mut asked = Vec::new();
    while let Some(k) = nak_out(&mut m, ms(1)) {
        asked.push(k);
        assert!(asked.len() < 8, "{asked:?}");
    }
    for hole in [2, 4, 6, 8] {
        assert!(
            asked.iter().any(|&(a, b)| a <= hole && hole <= b),
            "hole {hole} not asked for at once: {asked:?}"
        );
    }
    assert_eq!(asked, [(2, 8)]);
    // A new hole while that NAK is on its way: only the new hole is sent; the repeat asks
    // for everything still missing.
    assert!(m.handle_datagram(ms(2), UDP_SRC, &data(11, 1, 0x22), &mut sink));
    assert_eq!(nak_out(&mut m, ms(2)), Some((10, 10)));
    assert_eq!(nak_out(&mut m, ms(3)), None);
    assert_eq!(m.poll_timeout(), Some(ms(22)));
    assert_eq!(nak_out(&mut m, ms(22)), Some((2, 10)));
    // The answer (the held 3, 5, 7 and 9 come again and are dropped) completes the ring.
    feed(&mut m, &data(2, 9, 0), &mut sink).unwrap();
    assert_eq!(sink.writes, (1..=11).collect::<Vec<u64>>());
    assert_eq!(m.outstanding_nak(), None);
    assert_eq!(nak_out(&mut m, ms(50)), None);
}

/// Most datagrams in a case of the loss-pattern proptest below. Under Miri 30 (up to 90
/// records): its 4 cases of up to 297 records were the slowest test of the Miri step (a
/// sixth of its `[miri b]` half), and a longer run of losses, copies and swaps only
/// repeats the same steps.
const LOSS_GRAMS: usize = if cfg!(miri) { 30 } else { 100 };

proptest::proptest! {
    // 4 cases under Miri, as in the other proptests: there the 256 took most of a minute.
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: if cfg!(miri) { 4 } else { 256 },
        failure_persistence: None,
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// Up to 200 records in datagrams of 1 to 3 records, some lost, some duplicated, some
    /// overtaking others, then a heartbeat for the last: the NAKs sent at once cover every
    /// record missing, each asks for at least one of them and nothing past the last, and
    /// no timer is left due. Answered from the source ring in one round trip, the ring is
    /// complete, with nothing left to ask.
    #[test]
    fn every_loss_pattern_is_asked_for_at_once_and_repaired_in_one_round_trip(
        cuts in proptest::collection::vec(1u16..=3, 1..LOSS_GRAMS),
        fate in proptest::collection::vec(0u8..8, LOSS_GRAMS),
        swaps in proptest::collection::vec((0usize..LOSS_GRAMS, 1usize..4), 0..20),
    ) {
        let mut mem = Mem::new(4096);
        let mut sink = Sink::on(&mut mem);
        let (mut idx, mut dm) = ([HeldEntry::default(); 256], [0u8; 8192]);
        let mut m = udp_mirror(&mut sink, HoldBack::new(&mut idx, &mut dm), false);
        // Datagrams in order, then some swapped with a later one (reordering).
        let mut grams = Vec::new();
        let mut seq = 1;
        for &c in &cuts {
            grams.push((seq, c));
            seq += u64::from(c);
        }
        let last = seq - 1;
        for &(i, d) in &swaps {
            if i + d < grams.len() {
                grams.swap(i, i + d);
            }
        }
        // fate 0..=1: lost; 2: sent twice; else once.
        let mut got = vec![false; last as usize + 1];
        for (k, &(s, c)) in grams.iter().enumerate() {
            let copies = match fate[k % fate.len()] { 0 | 1 => 0, 2 => 2, _ => 1 };
            for _ in 0..copies {
                m.handle_datagram(ms(1), UDP_SRC, &data(s, c, 0x22), &mut sink);
                for r in s..s + u64::from(c) {
                    got[r as usize] = true;
                }
            }
        }
        let mut hb = [0u8; 16];
        HeartbeatRepr { flags: 0x22, seq: last }.emit(&mut hb).unwrap();
        m.handle_datagram(ms(1), UDP_SRC, &hb, &mut sink);
        let mut asked = Vec::new();
        while let Some((a, b)) = nak_out(&mut m, ms(1)) {
            proptest::prop_assert!(asked.len() < 64, "NAKs without end: {:?}", asked);
            proptest::prop_assert!(a <= b && b <= last, "NAK({}, {}) past {}", a, b, last);
            proptest::prop_assert!((a..=b).any(|r| !got[r as usize]), "NAK({}, {}) asks for nothing missing", a, b);
            asked.push((a, b));
        }
        proptest::prop_assert!(m.poll_timeout().is_none_or(|t| t > ms(1)));
        for r in 1..=last {
            proptest::prop_assert!(
                got[r as usize] || asked.iter().any(|&(a, b)| a <= r && r <= b),
                "record {} missing but not asked for: {:?}", r, asked
            );
        }
        // The source answers every NAK, in order, in frames of up to 4 records.
        for &(a, b) in &asked {
            let mut s = a;
            while s <= b {
                let n = (b - s + 1).min(4) as u16;
                feed(&mut m, &data(s, n, 0), &mut sink).unwrap();
                s += u64::from(n);
            }
        }
        proptest::prop_assert_eq!(m.next(), last + 1);
        proptest::prop_assert_eq!(&sink.writes, &(1..=last).collect::<Vec<u64>>());
        proptest::prop_assert_eq!(m.outstanding_nak(), None);
        proptest::prop_assert_eq!(nak_out(&mut m, ms(100)), None);
    }
}
