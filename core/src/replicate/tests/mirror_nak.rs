//! Mirror tests: NAKs the source leaves unanswered (a far-ahead UDP heartbeat) and their
//! back-off.

use super::mirror_udp::far_ahead_heartbeat;
use super::*;

/// A UDP heartbeat far ahead of what the source has (forged, or from a confused sender on
/// the group) is asked for with a NAK that the source never answers (spec §20.4: nothing
/// to collect, it stops silently). Repeated every `nak_timeout` as spec §21.4 step 3 says,
/// it went out for ever, 50 a second. After `NAK_UNANSWERED_LIMIT` unanswered sends its
/// repeats back off, doubling up to `MAX_NAK_BACKOFF` times `nak_timeout`, counted once;
/// heartbeats repeating the claim do not undo that; datagrams are still applied; the first
/// answer (a GAP over TCP) ends the back-off.
#[test]
fn mirror_udp_nak_the_source_never_answers_backs_off() {
    use crate::replicate::mirror::{MAX_NAK_BACKOFF, NAK_UNANSWERED_LIMIT};
    // Under Miri 4 s in steps of 20 ms (200 steps, not 10,000; every 10th ms for 10 s took
    // 29 s of CPU there), records 5..=8 at 3.001 s: each send is due at 1 ms + a multiple
    // of 20 ms, so the sends fall on the steps taken, at the times they have natively,
    // through two at the longest back-off (2.681 s, 3.961 s); only the native run also
    // sees that none goes out in between.
    let (step, end, data_at) = if cfg!(miri) {
        (20, 4_000, 3_001)
    } else {
        (1, 10_000, 5_000)
    };
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let (mut idx, mut dm) = ([HeldEntry::default(); 8], [0u8; 512]);
    let mut m = udp_mirror(&mut sink, HoldBack::new(&mut idx, &mut dm), false);
    let hb = far_ahead_heartbeat(&mut m, &mut sink);
    // 10 s in steps of 1 ms, the forged heartbeat repeated every step; records 5..=8
    // arrive at 5 s.
    let mut sent = Vec::new();
    for t in (1..=end).step_by(step) {
        if t > 1 {
            assert!(m.handle_datagram(ms(t), UDP_SRC, &hb, &mut sink));
        }
        if t == data_at {
            assert!(m.handle_datagram(ms(t), UDP_SRC, &data(5, 4, 0x22), &mut sink));
            assert_eq!(m.next(), 9, "a datagram is applied while the NAK backs off");
        }
        if let Some(range) = nak_out(&mut m, ms(t)) {
            // From then on the heartbeat claims 4 more (the NAK's range starts at `next`).
            let want = if t < data_at {
                (5, 5 + 65_534)
            } else {
                (9, 9 + 65_534)
            };
            assert_eq!(range, want, "at {t} ms");
            sent.push(t);
        }
    }
    let gaps: Vec<u64> = sent.windows(2).map(|w| w[1] - w[0]).collect();
    let limit = NAK_UNANSWERED_LIMIT as usize;
    // `limit` unanswered sends 20 ms apart, then each repeat waits twice as long, up to
    // `MAX_NAK_BACKOFF` times 20 ms.
    let (mut want, mut at, mut each) = (vec![20; limit], 1 + 20 * limit as u64, 20);
    loop {
        each = (each * 2).min(20 * u64::from(MAX_NAK_BACKOFF));
        if at + each > end {
            break;
        }
        at += each;
        want.push(each);
    }
    assert_eq!(gaps, want, "sent at {sent:?}");
    assert_eq!(m.counters().naks_unanswered, 1);
    assert_eq!(m.counters().naks_sent, sent.len() as u64);
    let last = *sent.last().unwrap();
    assert_eq!(
        m.nak_backed_off(),
        Some(((9, 9 + 65_534), Duration::from_millis(1_280)))
    );
    // An answer: a GAP over TCP (the source no longer has 9..=10). The next repeat is due
    // a plain `nak_timeout` after the last send, and the back-off is over.
    let mut gap = [0u8; 16];
    GapRepr { seq: 11 }.emit(&mut gap).unwrap();
    feed(&mut m, &gap, &mut sink).unwrap();
    assert_eq!(m.nak_backed_off(), None);
    assert_eq!(m.poll_timeout(), Some(ms(last + 20)));
    assert_eq!(nak_out(&mut m, ms(last + 20)), Some((11, 9 + 65_534)));
}

/// While a NAK that the source leaves unanswered is backed off, a hole that a datagram past
/// it shows (the source sent what lies beyond it) is still asked for a plain `nak_timeout`
/// after the last send, not at the backed-off repeat.
#[test]
fn mirror_udp_hole_shown_by_a_datagram_is_asked_for_during_a_back_off() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let (mut idx, mut dm) = ([HeldEntry::default(); 8], [0u8; 512]);
    let mut m = udp_mirror(&mut sink, HoldBack::new(&mut idx, &mut dm), false);
    far_ahead_heartbeat(&mut m, &mut sink);
    let mut last = 0;
    for t in 1..=2_000 {
        if nak_out(&mut m, ms(t)).is_some() {
            last = t;
        }
    }
    let (_, wait) = m.nak_backed_off().expect("backed off by 2 s");
    assert!(wait >= Duration::from_millis(320), "{wait:?}");
    let t = last + 20;
    assert!(m.poll_timeout() > Some(ms(t)), "the repeat is backed off");
    // 5..=6 are lost, 7..=8 arrive.
    assert!(m.handle_datagram(ms(t), UDP_SRC, &data(7, 2, 0x22), &mut sink));
    assert_eq!(nak_out(&mut m, ms(t)), Some((5, 5 + 65_534)));
}

/// The source's position a heartbeat far ahead claimed (2^40, which the source does not
/// have) is cut back to what the source has shown once the NAK for it goes unanswered
/// `NAK_UNANSWERED_LIMIT` times; the same claim repeated during the back-off is not
/// believed either, nor again after an answer ends the back-off; a later heartbeat raises
/// it as before. Before, `source_seq` kept 2^40 for the rest of the connection, and the
/// std driver's progress line said "lag 1099511627775" for ever.
#[test]
fn mirror_udp_a_far_ahead_claim_the_source_leaves_unanswered_is_dropped() {
    use crate::replicate::mirror::NAK_UNANSWERED_LIMIT;
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let (mut idx, mut dm) = ([HeldEntry::default(); 8], [0u8; 512]);
    let mut m = udp_mirror(&mut sink, HoldBack::new(&mut idx, &mut dm), false);
    let hb = far_ahead_heartbeat(&mut m, &mut sink);
    // Believed at first: the NAK is what tests it.
    assert_eq!(m.source_seq(), Some(1 << 40));
    let mut sends = 0;
    for t in 1..=400 {
        sends += u32::from(nak_out(&mut m, ms(t)).is_some());
    }
    assert!(sends > NAK_UNANSWERED_LIMIT, "{sends} NAKs");
    assert!(m.nak_backed_off().is_some());
    assert_eq!(m.counters().naks_unanswered, 1);
    // Records 1..=4 are all the source has shown.
    assert_eq!(m.source_seq(), Some(4));
    assert_eq!(m.source_claim(), Some(1 << 40));
    // Repeated during the back-off: not believed.
    assert!(m.handle_datagram(ms(401), UDP_SRC, &hb, &mut sink));
    assert_eq!(m.source_seq(), Some(4));
    // 7..=8 arrive (5..=6 lost): shown, so believed as far as that.
    assert!(m.handle_datagram(ms(402), UDP_SRC, &data(7, 2, 0x22), &mut sink));
    assert!(m.handle_datagram(ms(403), UDP_SRC, &hb, &mut sink));
    assert_eq!(m.source_seq(), Some(8));
    // An answer over TCP (5..=6) ends the back-off; the claim does not come back.
    feed(&mut m, &data(5, 2, 0), &mut sink).unwrap();
    assert_eq!(m.next(), 9);
    assert_eq!(m.nak_backed_off(), None);
    assert_eq!(m.source_seq(), Some(8));
    // A real heartbeat past it is believed.
    let mut beat = [0u8; 16];
    HeartbeatRepr {
        flags: 0x22,
        seq: 10,
    }
    .emit(&mut beat)
    .unwrap();
    assert!(m.handle_datagram(ms(404), UDP_SRC, &beat, &mut sink));
    assert_eq!(m.source_seq(), Some(10));
}

/// A heartbeat that extends the outstanding NAK (the source claims one record more each
/// millisecond, none of which arrive) makes the mirror ask for the new part at once; that
/// send is no repeat, and does not count the send before it as unanswered, which had had
/// a millisecond for its answer, not `nak_timeout`. Counted, eight such heartbeats in 8 ms
/// counted the NAK unanswered and backed it off before the source could have answered.
#[test]
fn mirror_udp_extending_a_nak_does_not_count_its_last_send_unanswered() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let (mut idx, mut dm) = ([HeldEntry::default(); 8], [0u8; 512]);
    let mut m = udp_mirror(&mut sink, HoldBack::new(&mut idx, &mut dm), false);
    assert!(m.handle_datagram(ms(1), UDP_SRC, &data(1, 4, 0x22), &mut sink));
    let beat = |s: u64| {
        let mut b = [0u8; 16];
        HeartbeatRepr {
            flags: 0x22,
            seq: s,
        }
        .emit(&mut b)
        .unwrap();
        b
    };
    let mut sent = Vec::new();
    // Heartbeats claiming 8, 9, ... 19 at 1 ms steps, all within one nak_timeout.
    for k in 0..12u64 {
        let t = 2 + k;
        assert!(m.handle_datagram(ms(t), UDP_SRC, &beat(8 + k), &mut sink));
        if let Some(r) = nak_out(&mut m, ms(t)) {
            sent.push(r);
        }
    }
    assert_eq!(sent.first(), Some(&(5, 8)), "{sent:?}");
    assert!(sent.len() > 8, "{sent:?}");
    assert_eq!(m.counters().naks_unanswered, 0, "{sent:?}");
    assert_eq!(m.nak_backed_off(), None);
}
