//! The multicast sender check (`mirror/sender.rs`): a sender's first DATA is compared with
//! the source's copy over TCP before anything of it is applied, and only the sender that
//! matched is heard from then on.

use super::*;
use crate::replicate::mirror::{MAX_NAK_RECORDS, SENDER_TRIAL_TIMEOUT};

/// The source's multicast address: another IP than the TCP peer's (its LAN interface).
const LAN: PeerAddr = PeerAddr::new([192, 168, 1, 7], 41_234);
/// Another sender on the group and port with the source's session byte.
const STRANGER: PeerAddr = PeerAddr::new([192, 168, 1, 9], 41_234);

fn heartbeat(seq: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    HeartbeatRepr { flags: 0x22, seq }.emit(&mut b).unwrap();
    b
}

/// The tag (top byte) of each record of `from..=to` in the mirror ring, `None` where it
/// holds none.
fn tags(sink: &Sink, from: u64, to: u64) -> Vec<Option<u64>> {
    let v = sink.inner.view().unwrap();
    let mut b = [0u8; 8];
    (from..=to)
        .map(|s| {
            (v.read_slot(s, &mut b) == crate::ring::SlotRead::Ok).then(|| {
                let r = u64::from_le_bytes(b);
                assert_eq!(r & !(0xff << 56), s, "record {s} under its sequence");
                r >> 56
            })
        })
        .collect()
}

/// The source's sender, at another IP than the one dialled, is confirmed by its first
/// record, which the source sends over TCP too; until then DATA of every sender is set
/// aside, afterwards only its own is applied and another sender's is dropped and counted.
#[test]
fn the_sender_whose_record_the_source_confirms_is_the_only_one_heard() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let (mut idx, mut dm) = ([HeldEntry::default(); 8], [0u8; 512]);
    let mut m = multicast_mirror_checked(&mut sink, HoldBack::new(&mut idx, &mut dm));
    assert_eq!((m.udp_source(), m.sender_on_trial()), (None, None));
    assert!(!m.handle_datagram(ms(1), LAN, &data(1, 2, 0x22), &mut sink));
    assert_eq!(m.sender_on_trial(), Some((LAN, 1)));
    // Another sender's DATA while the first is on trial: set aside as well.
    assert!(!m.handle_datagram(ms(1), STRANGER, &tagged_data(3, 1, 0x22, 9), &mut sink));
    assert!(sink.writes.is_empty());
    assert_eq!(m.counters().udp_unconfirmed, 2);
    // Its first record is asked for over TCP, and again each nak_timeout.
    assert_eq!(nak_out(&mut m, ms(1)), Some((1, 1)));
    assert_eq!(nak_out(&mut m, ms(2)), None);
    assert_eq!(m.poll_timeout(), Some(ms(21)));
    assert_eq!(nak_out(&mut m, ms(21)), Some((1, 1)));
    // The source's copy is the same: confirmed, and the copy written.
    m.handle_tcp_frame(ms(22), &data(1, 1, 0), &mut sink)
        .unwrap();
    assert_eq!((m.udp_source(), m.sender_on_trial()), (Some(LAN), None));
    assert_eq!(sink.writes, [1]);
    assert!(m.handle_datagram(ms(23), LAN, &data(2, 2, 0x22), &mut sink));
    assert!(!m.handle_datagram(ms(23), STRANGER, &tagged_data(4, 2, 0x22, 9), &mut sink));
    assert!(!m.handle_datagram(ms(23), STRANGER, &heartbeat(1 << 40), &mut sink));
    assert_eq!(sink.writes, [1, 2, 3]);
    let c = m.counters();
    assert_eq!((c.udp_wrong_source, c.garbage_dropped), (2, 2));
    // The stranger's far-ahead heartbeat was not taken.
    assert_eq!(m.source_claim(), None);
    assert_eq!(m.outstanding_nak(), None);
    assert_eq!(tags(&sink, 1, 3), [Some(0); 3]);
}

/// A sender whose first record differs from the source's copy is refused: nothing of it is
/// written, its later datagrams are counted as wrong-source, and the source's own sender is
/// tried next and confirmed.
#[test]
fn a_sender_whose_record_differs_from_the_sources_copy_is_refused() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let (mut idx, mut dm) = ([HeldEntry::default(); 8], [0u8; 512]);
    let mut m = multicast_mirror_checked(&mut sink, HoldBack::new(&mut idx, &mut dm));
    assert!(!m.handle_datagram(ms(1), STRANGER, &tagged_data(1, 2, 0x22, 9), &mut sink));
    assert_eq!(nak_out(&mut m, ms(1)), Some((1, 1)));
    m.handle_tcp_frame(ms(2), &data(1, 1, 0), &mut sink)
        .unwrap();
    assert_eq!((m.udp_source(), m.sender_on_trial()), (None, None));
    assert_eq!(sink.writes, [1], "the source's copy only");
    assert!(!m.handle_datagram(ms(3), STRANGER, &tagged_data(2, 2, 0x22, 9), &mut sink));
    assert_eq!(m.counters().udp_wrong_source, 1);
    assert_eq!(
        m.sender_on_trial(),
        None,
        "a refused sender is not tried again"
    );
    // The source's datagram: tried, confirmed, and what was set aside asked for.
    assert!(!m.handle_datagram(ms(4), UDP_SRC, &data(3, 1, 0x22), &mut sink));
    assert_eq!(nak_out(&mut m, ms(4)), Some((3, 3)));
    m.handle_tcp_frame(ms(5), &data(3, 1, 0), &mut sink)
        .unwrap();
    assert_eq!(m.udp_source(), Some(UDP_SRC));
    assert_eq!(nak_out(&mut m, ms(5)), Some((2, 2)));
    m.handle_tcp_frame(ms(6), &data(2, 1, 0), &mut sink)
        .unwrap();
    assert!(m.handle_datagram(ms(7), UDP_SRC, &data(4, 1, 0x22), &mut sink));
    assert!(!m.handle_datagram(ms(7), STRANGER, &tagged_data(5, 1, 0x22, 9), &mut sink));
    assert_eq!(tags(&sink, 1, 4), [Some(0); 4]);
    let c = m.counters();
    assert_eq!((c.udp_wrong_source, c.udp_unconfirmed), (2, 2));
}

/// A sender far ahead of the source (a record the source does not have, so it answers
/// nothing, spec §20.4) is refused once its trial has run `SENDER_TRIAL_TIMEOUT`; its NAK
/// is not repeated after that.
#[test]
fn a_sender_the_source_never_answers_for_is_refused_after_the_trial_timeout() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let mut m = multicast_mirror_checked(&mut sink, HoldBack::new(&mut [], &mut []));
    assert!(!m.handle_datagram(ms(1), STRANGER, &data(1 << 40, 1, 0x22), &mut sink));
    let end = ms(1) + SENDER_TRIAL_TIMEOUT;
    let mut t = ms(1);
    let mut sends = 0;
    for _ in 0..1000 {
        if nak_out(&mut m, t) == Some((1 << 40, 1 << 40)) {
            sends += 1;
        }
        match m.poll_timeout() {
            Some(next) if next <= end => t = next,
            _ => break,
        }
    }
    assert_eq!(t, end, "the last deadline is the trial's end");
    assert_eq!(nak_out(&mut m, end), None);
    assert_eq!(sends, 50, "every 20 ms for 1 s");
    assert_eq!((m.sender_on_trial(), m.poll_timeout()), (None, None));
    assert!(!m.handle_datagram(end, STRANGER, &data(1, 1, 0x22), &mut sink));
    assert_eq!(m.counters().udp_wrong_source, 1);
    assert!(sink.writes.is_empty());
}

/// While the source answers other NAKs (a long history asked for before the trial's), the
/// trial waits past `SENDER_TRIAL_TIMEOUT`: it counts only time without any answer.
#[test]
fn a_trial_waits_while_the_source_answers_other_naks() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let (mut idx, mut dm) = ([HeldEntry::default(); 8], [0u8; 512]);
    let mut m = multicast_mirror_checked(&mut sink, HoldBack::new(&mut idx, &mut dm));
    assert!(m.handle_datagram(ms(1), LAN, &heartbeat(5), &mut sink));
    assert_eq!(nak_out(&mut m, ms(1)), Some((1, 5)));
    assert!(!m.handle_datagram(ms(2), LAN, &data(6, 1, 0x22), &mut sink));
    assert_eq!(nak_out(&mut m, ms(2)), Some((6, 6)));
    // The history comes slowly: one record every 600 ms.
    for s in 1..=5 {
        let t = ms(2 + 600 * s);
        m.handle_tcp_frame(t, &data(s, 1, 0), &mut sink).unwrap();
        // Repeats of the trial's NAK meanwhile (the hole NAK is answered as it goes).
        while let Some(due) = m.poll_timeout().filter(|&d| d <= t) {
            let _ = nak_out(&mut m, due);
        }
        assert_eq!(m.sender_on_trial(), Some((LAN, 6)), "at {s}");
    }
    m.handle_tcp_frame(ms(3100), &data(6, 1, 0), &mut sink)
        .unwrap();
    assert_eq!(m.udp_source(), Some(LAN));
    assert_eq!(sink.writes, [1, 2, 3, 4, 5, 6]);
}

/// A GAP past the record tried (the source no longer holds it) ends the trial without a
/// verdict: the sender is tried again with its next DATA.
#[test]
fn a_trial_the_source_cannot_settle_is_tried_again() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let (mut idx, mut dm) = ([HeldEntry::default(); 8], [0u8; 512]);
    let mut m = multicast_mirror_checked(&mut sink, HoldBack::new(&mut idx, &mut dm));
    assert!(!m.handle_datagram(ms(1), LAN, &data(1, 1, 0x22), &mut sink));
    assert_eq!(nak_out(&mut m, ms(1)), Some((1, 1)));
    let mut g = [0u8; 16];
    GapRepr { seq: 3 }.emit(&mut g).unwrap();
    m.handle_tcp_frame(ms(2), &g, &mut sink).unwrap();
    assert_eq!((m.udp_source(), m.sender_on_trial()), (None, None));
    assert!(!m.handle_datagram(ms(3), LAN, &data(3, 1, 0x22), &mut sink));
    assert_eq!(m.sender_on_trial(), Some((LAN, 3)));
    assert_eq!(m.counters().udp_wrong_source, 0);
}

/// Before a sender is confirmed, heartbeats of any sender are taken, but only to make the
/// mirror NAK, which the source alone answers: an idle source's history is fetched, and
/// the claim counts in no figure.
#[test]
fn heartbeats_are_taken_before_a_sender_is_confirmed() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let (mut idx, mut dm) = ([HeldEntry::default(); 8], [0u8; 512]);
    let mut m = multicast_mirror_checked(&mut sink, HoldBack::new(&mut idx, &mut dm));
    assert!(m.handle_datagram(ms(1), LAN, &heartbeat(3), &mut sink));
    assert_eq!(nak_out(&mut m, ms(1)), Some((1, 3)));
    assert_eq!((m.source_seq(), m.source_claim()), (None, None));
    m.handle_tcp_frame(ms(2), &data(1, 3, 0), &mut sink)
        .unwrap();
    assert_eq!(sink.writes, [1, 2, 3]);
    assert_eq!(m.udp_source(), None);
}

/// A sender on trial that claims a head far ahead (its DATA, then its heartbeats) moves no
/// figure a driver shows: `source_seq` (the progress line's lag) and `source_claim` stay as
/// the source's TCP heartbeat left them, and nothing but its trial record is asked for;
/// refused at the trial's end, its claim is dropped. Before, its heartbeat showed a lag of
/// 2^40 until the NAK it caused went unanswered `NAK_UNANSWERED_LIMIT` times. Another
/// untried sender's heartbeat still makes the mirror NAK (an idle source's history), and
/// counts nowhere else.
#[test]
fn an_unconfirmed_senders_far_ahead_heartbeat_leaves_the_reported_head_as_it_was() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let (mut idx, mut dm) = ([HeldEntry::default(); 8], [0u8; 512]);
    let mut m = multicast_mirror_checked(&mut sink, HoldBack::new(&mut idx, &mut dm));
    m.handle_tcp_frame(ms(1), &heartbeat(2), &mut sink).unwrap();
    assert_eq!(nak_out(&mut m, ms(1)), Some((1, 2)));
    m.handle_tcp_frame(ms(2), &data(1, 2, 0), &mut sink)
        .unwrap();
    let head = |m: &Mirror<'_>| (m.source_seq(), m.source_claim(), m.next());
    assert_eq!(head(&m), (Some(2), Some(2), 3));
    let far = 1 << 40;
    assert!(!m.handle_datagram(ms(3), STRANGER, &data(far, 1, 0x22), &mut sink));
    assert_eq!(m.sender_on_trial(), Some((STRANGER, far)));
    for t in 3..=10 {
        assert!(m.handle_datagram(ms(t), STRANGER, &heartbeat(far + t), &mut sink));
        assert_eq!(head(&m), (Some(2), Some(2), 3), "at {t} ms");
        assert_eq!(m.outstanding_nak(), None, "at {t} ms");
    }
    // Only the trial's record is asked for, until the trial's end refuses the sender.
    let end = ms(3) + SENDER_TRIAL_TIMEOUT;
    let mut t = ms(3);
    while t < end {
        assert_eq!(nak_out(&mut m, t), Some((far, far)), "at {t:?}");
        t = m.poll_timeout().expect("the trial's next NAK or end");
    }
    assert_eq!(nak_out(&mut m, end), None);
    assert_eq!(m.sender_on_trial(), None);
    assert!(!m.handle_datagram(end, STRANGER, &heartbeat(far), &mut sink));
    assert_eq!(head(&m), (Some(2), Some(2), 3));
    assert_eq!(m.outstanding_nak(), None);
    // Another untried sender, not on trial: a NAK, and no figure.
    assert!(m.handle_datagram(end, LAN, &heartbeat(far), &mut sink));
    assert_eq!(head(&m), (Some(2), Some(2), 3));
    assert_eq!(nak_out(&mut m, end), Some((3, 3 + MAX_NAK_RECORDS - 1)));
    assert_eq!(sink.writes, [1, 2]);
}

/// The heartbeats a sender sends on trial are held, not lost: once the source confirms it,
/// the highest counts as a heartbeat of the source's, and the records it shows are asked
/// for.
#[test]
fn a_senders_heartbeats_on_trial_count_once_it_is_confirmed() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let (mut idx, mut dm) = ([HeldEntry::default(); 8], [0u8; 512]);
    let mut m = multicast_mirror_checked(&mut sink, HoldBack::new(&mut idx, &mut dm));
    assert!(!m.handle_datagram(ms(1), LAN, &data(1, 1, 0x22), &mut sink));
    assert!(m.handle_datagram(ms(1), LAN, &heartbeat(4), &mut sink));
    assert!(m.handle_datagram(ms(1), LAN, &heartbeat(3), &mut sink));
    assert_eq!((m.source_seq(), m.source_claim()), (None, None));
    assert_eq!(nak_out(&mut m, ms(1)), Some((1, 1)));
    assert_eq!(nak_out(&mut m, ms(1)), None);
    m.handle_tcp_frame(ms(2), &data(1, 1, 0), &mut sink)
        .unwrap();
    assert_eq!(m.udp_source(), Some(LAN));
    assert_eq!((m.source_seq(), m.source_claim()), (Some(4), Some(4)));
    assert_eq!(nak_out(&mut m, ms(2)), Some((2, 4)));
}

/// The check off: the session byte is the only filter (spec §21.4), no sender is tried.
#[test]
fn without_the_check_no_sender_is_tried() {
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let mut m = udp_mirror(&mut sink, HoldBack::new(&mut [], &mut []), false);
    assert!(m.handle_datagram(ms(1), STRANGER, &data(1, 1, 0x22), &mut sink));
    assert!(m.handle_datagram(ms(1), LAN, &data(2, 1, 0x22), &mut sink));
    assert_eq!(m.sender_on_trial(), None);
    assert_eq!(sink.writes, [1, 2]);
}
