//! A mirror ring in the middle of a DATA frame longer than the ring: the mirror writes
//! every record of a frame before its one publish, so until then slots hold sequences more
//! than a lap past `write_seq` (a tiny source ring and a fast producer send such frames).
//! The lap rule cannot tell such a slot from a corrupt one, and takes the record as lost
//! alone; but a record behind the oldest that `write_seq` leaves in the ring is overwritten
//! whatever its slot holds. A hub serving that ring, behind it, skips to the oldest
//! retained record with one GAP, as the §4.3 reader's lap rule moves a reader there, instead
//! of one GAP per record up to it.

use super::*;
use crate::wire::{HELLO_OLDEST, Kind};

const GAP: u8 = Kind::Gap as u8;
const DATA: u8 = Kind::Data as u8;

/// Records `from..=to` written as a mirror writes a frame, not published.
fn write_frame(src: &RingSource, from: u64, to: u64) {
    for s in from..=to {
        src.0.write_slot(s, &s.to_le_bytes());
    }
}

#[test]
fn a_record_behind_the_ring_during_a_long_frame_is_overwritten() {
    let mut mem = Mem::new(4096);
    // Capacity 8, published up to 40 (slots 33..=40), then 41..=60 written: slots 53..=60.
    let src = source(&mut mem, 40);
    write_frame(&src, 41, 60);
    let mut d = [0u8; 8];
    assert_eq!(
        src.read_record(5, &mut d),
        ReadRecord::Overwritten { seen: 40 }
    );
    // In the last lap `write_seq` left, the slot may be corrupt as far as the ring can
    // tell: lost alone.
    assert_eq!(src.read_record(33, &mut d), ReadRecord::Lost);
    assert_eq!(src.read_record(40, &mut d), ReadRecord::Lost);
    // Not published yet: its writer stores it (here it did, for 53 and up).
    assert_eq!(src.read_record(41, &mut d), ReadRecord::Pending);
    assert_eq!(src.read_record(53, &mut d), ReadRecord::Ok(8));
}

#[test]
fn a_tcp_session_behind_the_ring_sends_one_gap_to_its_oldest_record() {
    let mut mem = Mem::new(4096);
    let src = source(&mut mem, 12);
    let (mut s, g) = session_after_hello(SourceConfig::default(), &src, HELLO_OLDEST, 0);
    assert_eq!(g.seq, 5);
    push(&src, 40);
    write_frame(&src, 41, 60);
    let out = drain(|b| s.poll_transmit(ms(10), &src, b));
    // One GAP to 33, the oldest record of write_seq 40, then one per record of the last lap
    // (lost alone), and nothing for 41 on, not published yet. It was a GAP per record from
    // 6 to 41: 36 frames.
    let want: Vec<_> = (33..=41).map(|seq| (GAP, seq, 0)).collect();
    assert_eq!(out, want);
    assert_eq!(s.cursor(), 41);
    src.0.publish(60);
    let mut out = drain(|b| s.poll_transmit(ms(20), &src, b));
    out.extend(drain(|b| s.poll_transmit(ms(30), &src, b)));
    assert_eq!(out, [(GAP, 53, 0), (DATA, 53, 8)]);
}
