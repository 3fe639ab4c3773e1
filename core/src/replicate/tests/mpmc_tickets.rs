//! A lossy MPMC ring (spec §8) with tickets written but not published yet: `write_seq` is
//! the highest ticket whose producer has done its `fetch_max` (§8.1 step 4), and the
//! producers of the tickets after it may each be anywhere in steps 1–4 (descheduled, or
//! dead), so a slot may hold a ticket more than a lap past `write_seq`, below `claim_seq`.
//! The source judged such a slot against `write_seq` alone, as if it were corrupt: a record
//! of the last lap was lost alone (a GAP per record), and one past `write_seq` was pending,
//! the session waiting at it with later records in the ring unsent until a publish. It
//! takes `claim_seq` as the bound, as the raw reader and the consumers do.

use super::*;
use crate::layout::SEQ_LIMIT;
use crate::queue::compat::{LossyMpmcProducer, LossyPush};
use crate::sync::Ordering;
use crate::wire::{HELLO_OLDEST, Kind};

const GAP: u8 = Kind::Gap as u8;
const DATA: u8 = Kind::Data as u8;

/// An MPMC ring of 4 u64 records (record n = n), tickets 1..=10 pushed and published.
fn mpmc_source(mem: &mut Mem) -> RingSource {
    let geo = Geometry::mpmc(4, 16, 8).unwrap();
    // SAFETY: a `Mem` of this test alone: no other view of it exists.
    let v = unsafe { RingView::init(mem.region(), &geo) }.unwrap();
    let p = LossyMpmcProducer::new(v).unwrap();
    for s in 1..=10u64 {
        assert!(matches!(
            p.push(&s.to_le_bytes(), || 0),
            LossyPush::Published { seq, .. } if seq == s
        ));
    }
    RingSource(v)
}

/// Tickets `claim_seq..=upto` claimed and written by producers that have not published
/// them yet (§8.1 steps 1–3, each slot's previous ticket found in it): the slots of 7..=10
/// then hold 19, 16, 17, 18, and `write_seq` is still 10.
fn in_flight(src: &RingSource, upto: u64) {
    let v = &src.0;
    while v.claim_seq().load(Ordering::Relaxed) <= upto {
        let t = v.claim_seq().fetch_add(1, Ordering::Relaxed);
        v.write_slot(t, &t.to_le_bytes());
    }
    assert_eq!(src.write_seq(), 10);
}

#[test]
fn a_ticket_more_than_a_lap_past_write_seq_is_a_lap() {
    let mut mem = Mem::new(4096);
    let src = mpmc_source(&mut mem);
    in_flight(&src, 19);
    let mut d = [0u8; 8];
    // Published, overwritten by 19: it was lost alone, the slot read as corrupt.
    assert_eq!(
        src.read_record(7, &mut d),
        ReadRecord::Overwritten { seen: 19 }
    );
    // Not published, overwritten by 19 already: it was pending until a publish.
    assert_eq!(
        src.read_record(11, &mut d),
        ReadRecord::Overwritten { seen: 19 }
    );
    assert_eq!(src.read_record(16, &mut d), ReadRecord::Ok(8));
}

#[test]
fn a_tcp_session_sends_one_gap_to_the_tickets_in_the_ring() {
    let mut mem = Mem::new(4096);
    let src = mpmc_source(&mut mem);
    let (mut s, g) = session_after_hello(SourceConfig::default(), &src, HELLO_OLDEST, 0);
    assert_eq!(g.seq, 7);
    in_flight(&src, 19);
    let out = drain(|b| s.poll_transmit(ms(10), &src, b));
    // It was GAP 8, 9, 10, 11, one per record of write_seq's last lap, and then nothing:
    // 16..=19 were left in the ring until a producer published.
    assert_eq!(out, [(GAP, 16, 0), (DATA, 16, 4)]);
    assert_eq!(s.cursor(), 20);
}

#[test]
fn the_udp_sender_skips_once_to_the_tickets_in_the_ring() {
    let mut mem = Mem::new(4096);
    let src = mpmc_source(&mut mem);
    let mut u: UdpSender<2> = UdpSender::new(UdpConfig::default(), 0x22, 6, ms(0));
    in_flight(&src, 19);
    let out = drain(|b| u.poll_transmit(ms(0), &src, b));
    // It skipped 7..=10 one at a time and waited at 11.
    assert_eq!(out, [(DATA, 16, 4)]);
    assert_eq!((u.counters().skipped, u.cursor()), (9, 20));
}

/// An MPMC ring whose `claim_seq` is at or past `SEQ_LIMIT` (a corrupt header: no
/// producer draws a ticket there) bounds nothing: a slot holding a value no ticket can be
/// is one lost record, as with `write_seq` alone, not a lap to that value's oldest
/// retained sequence (a GAP the ring never reaches).
#[test]
fn a_corrupt_claim_seq_makes_no_corrupt_slot_a_lap() {
    for claim in [SEQ_LIMIT, u64::MAX] {
        let mut mem = Mem::new(4096);
        let src = mpmc_source(&mut mem);
        src.0.claim_seq().store(claim, Ordering::Relaxed);
        src.0.slot_seq(9).store(u64::MAX - 1, Ordering::Relaxed);
        let mut d = [0u8; 8];
        assert_eq!(src.read_record(9, &mut d), ReadRecord::Lost, "{claim:#x}");
        assert_eq!(src.read_record(10, &mut d), ReadRecord::Ok(8), "{claim:#x}");
    }
}
