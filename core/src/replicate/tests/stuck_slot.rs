//! A producer killed while rewriting a slot: the slot keeps the write marker below
//! `write_seq`. Every path of the source (TCP streaming, NAK answers, the UDP sender)
//! sends a GAP past the record it held, and the records behind it, instead of waiting at
//! it for ever. An MPMC-flagged ring's ticket still being written stays pending.

use super::*;
use crate::layout::SLOT_WRITING;
use crate::sync::Ordering;
use crate::wire::{HELLO_OLDEST, Kind};

/// Records 1..=20 in a ring of 8, and the producer died writing 21, in the slot of 13 (the
/// oldest retained).
fn stuck(mem: &mut Mem) -> RingSource {
    let src = source(mem, 20);
    src.0.slot_seq(21).store(SLOT_WRITING, Ordering::Relaxed);
    src
}

const GAP: u8 = Kind::Gap as u8;
const DATA: u8 = Kind::Data as u8;

#[test]
fn reads_as_overwritten_on_a_single_writer_ring() {
    let mut mem = Mem::new(4096);
    let src = stuck(&mut mem);
    let mut d = [0u8; 8];
    assert_eq!(
        src.read_record(13, &mut d),
        ReadRecord::Overwritten { seen: 21 }
    );
    assert_eq!(src.read_record(14, &mut d), ReadRecord::Ok(8));
    // Not published yet: pending, as before.
    assert_eq!(src.read_record(21, &mut d), ReadRecord::Pending);
    src.0.slot_seq(22).store(SLOT_WRITING, Ordering::Relaxed);
    assert_eq!(src.read_record(22, &mut d), ReadRecord::Pending);
}

#[test]
fn tcp_stream_sends_a_gap_and_the_records_behind_it() {
    let mut mem = Mem::new(4096);
    let src = stuck(&mut mem);
    let (mut s, g) = session_after_hello(SourceConfig::default(), &src, HELLO_OLDEST, 0);
    assert_eq!(g.seq, 13);
    let out = drain(|b| s.poll_transmit(ms(10), &src, b));
    assert_eq!(out, [(GAP, 14, 0), (DATA, 14, 7)]);
    assert_eq!(s.cursor(), 21);
}

#[test]
fn nak_answer_sends_a_gap_and_the_records_behind_it() {
    let mut mem = Mem::new(4096);
    let src = stuck(&mut mem);
    let (mut s, _) = session_after_hello(multicast_config(), &src, 0, 1);
    let _ = drain(|b| s.poll_transmit(ms(0), &src, b));
    let mut nak = [0u8; 24];
    NakRepr { from: 13, to: 20 }.emit(&mut nak).unwrap();
    s.handle_stream(ms(1), &nak, &src, None).unwrap();
    let out = drain(|b| s.poll_transmit(ms(1), &src, b));
    assert_eq!(out, [(GAP, 14, 0), (DATA, 14, 7)]);
    assert_eq!(s.pending_naks(), 0);
}

#[test]
fn udp_sender_skips_it_and_sends_the_records_behind_it() {
    let mut mem = Mem::new(4096);
    let src = source(&mut mem, 12);
    let mut u: UdpSender<2> = UdpSender::new(UdpConfig::default(), 0x22, 12, ms(0));
    push(&src, 20);
    src.0.slot_seq(21).store(SLOT_WRITING, Ordering::Relaxed);
    let out = drain(|b| u.poll_transmit(ms(0), &src, b));
    assert_eq!(out, [(DATA, 14, 7)]);
    assert_eq!(u.counters().skipped, 1);
    assert_eq!(u.cursor(), 21);
}

/// On an MPMC-flagged ring a marked slot below `write_seq` is a ticket that may still be
/// written: pending, as before.
#[test]
fn an_mpmc_ticket_being_written_stays_pending() {
    let mut mem = Mem::new(4096);
    let geo = Geometry::mpmc(8, 16, 8).unwrap();
    // SAFETY: a `Mem` of this test alone: no other view of it exists.
    let v = unsafe { RingView::init(mem.region(), &geo) }.unwrap();
    v.slot_seq(2).store(SLOT_WRITING, Ordering::Relaxed);
    for s in [1u64, 3] {
        v.write_slot(s, &s.to_le_bytes());
    }
    v.write_seq().store(3, Ordering::Release);
    let src = RingSource(v);
    let mut d = [0u8; 8];
    assert_eq!(src.read_record(2, &mut d), ReadRecord::Pending);
}
