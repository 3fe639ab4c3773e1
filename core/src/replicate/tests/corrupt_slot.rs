//! A slot whose sequence word holds a value no writer stored there: later than any lap of
//! the ring could be (past `write_seq + capacity`), or at or past `SEQ_LIMIT`. Read as a
//! lap, it moved the reader to the "oldest retained" of that value: a GAP billions of
//! records ahead, after which a TCP session, or the UDP sender and with it every UDP
//! mirror, sent nothing more, the ring's `write_seq` never getting there. Such a slot is a
//! record lost when the ring has published it, and a record not written yet otherwise
//! (its writer stores the right sequence there when it gets to it).

use super::*;
use crate::layout::SEQ_LIMIT;
use crate::sync::Ordering;
use crate::wire::{HELLO_OLDEST, Kind};

const GAP: u8 = Kind::Gap as u8;
const DATA: u8 = Kind::Data as u8;

/// Values no writer of a ring of 8 at `write_seq` 12 stores: one lap too many, far ahead,
/// and past the sequence limit (u64::MAX is the write marker, read as pending already).
const CORRUPT: [u64; 4] = [12 + 8 + 1, 1 << 40, SEQ_LIMIT, u64::MAX - 1];

#[test]
fn reads_as_pending_ahead_of_write_seq_and_lost_behind_it() {
    for bad in CORRUPT {
        let mut mem = Mem::new(4096);
        let src = source(&mut mem, 12);
        let mut d = [0u8; 8];
        // The slot of 13, not written yet, holds the oldest record, 5.
        src.0.slot_seq(13).store(bad, Ordering::Relaxed);
        assert_eq!(src.read_record(13, &mut d), ReadRecord::Pending, "{bad:#x}");
        assert_eq!(src.read_record(5, &mut d), ReadRecord::Lost, "{bad:#x}");
        src.0.slot_seq(10).store(bad, Ordering::Relaxed);
        assert_eq!(src.read_record(10, &mut d), ReadRecord::Lost, "{bad:#x}");
        // A real lap is still one.
        src.0.slot_seq(9).store(17, Ordering::Relaxed);
        assert_eq!(
            src.read_record(9, &mut d),
            ReadRecord::Overwritten { seen: 17 }
        );
    }
}

#[test]
fn the_udp_sender_waits_at_it_and_goes_on_once_it_is_written() {
    for bad in CORRUPT {
        let mut mem = Mem::new(4096);
        let src = source(&mut mem, 12);
        let mut u: UdpSender<2> = UdpSender::new(UdpConfig::default(), 0x22, 12, ms(0));
        src.0.slot_seq(13).store(bad, Ordering::Relaxed);
        let out = drain(|b| u.poll_transmit(ms(0), &src, b));
        assert_eq!(out, [], "{bad:#x}");
        assert_eq!(u.cursor(), 13, "{bad:#x}");
        push(&src, 16);
        let out = drain(|b| u.poll_transmit(ms(1), &src, b));
        assert_eq!(out, [(DATA, 13, 4)], "{bad:#x}");
        assert_eq!(u.counters().skipped, 0);
    }
}

#[test]
fn a_tcp_session_sends_a_gap_past_a_published_one_and_waits_at_a_future_one() {
    for bad in CORRUPT {
        let mut mem = Mem::new(4096);
        let src = source(&mut mem, 12);
        src.0.slot_seq(10).store(bad, Ordering::Relaxed);
        // The slot of 13, not written yet, holds the oldest record, 5.
        src.0.slot_seq(13).store(bad, Ordering::Relaxed);
        let (mut s, g) = session_after_hello(SourceConfig::default(), &src, HELLO_OLDEST, 0);
        assert_eq!(g.seq, 5);
        // The last frame may linger for more records first.
        let mut out = drain(|b| s.poll_transmit(ms(10), &src, b));
        out.extend(drain(|b| s.poll_transmit(ms(20), &src, b)));
        assert_eq!(
            out,
            [(GAP, 6, 0), (DATA, 6, 4), (GAP, 11, 0), (DATA, 11, 2)],
            "{bad:#x}"
        );
        assert_eq!(s.cursor(), 13, "{bad:#x}");
        push(&src, 14);
        let mut out = drain(|b| s.poll_transmit(ms(30), &src, b));
        out.extend(drain(|b| s.poll_transmit(ms(40), &src, b)));
        assert_eq!(out, [(DATA, 13, 2)], "{bad:#x}");
    }
}

#[test]
fn a_nak_answer_sends_a_gap_past_it() {
    for bad in CORRUPT {
        let mut mem = Mem::new(4096);
        let src = source(&mut mem, 12);
        src.0.slot_seq(10).store(bad, Ordering::Relaxed);
        let (mut s, _) = session_after_hello(multicast_config(), &src, 0, 1);
        let _ = drain(|b| s.poll_transmit(ms(0), &src, b));
        let mut nak = [0u8; 24];
        NakRepr { from: 8, to: 12 }.emit(&mut nak).unwrap();
        s.handle_stream(ms(1), &nak, &src, None).unwrap();
        let out = drain(|b| s.poll_transmit(ms(1), &src, b));
        assert_eq!(out, [(DATA, 8, 2), (GAP, 11, 0), (DATA, 11, 2)], "{bad:#x}");
        assert_eq!(s.pending_naks(), 0);
    }
}
