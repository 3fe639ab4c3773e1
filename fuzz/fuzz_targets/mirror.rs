//! Feeds a mirror arbitrary sequences of TCP stream bytes and datagrams (from the source's
//! address and from elsewhere) with time advancing. The mirror must never panic, never
//! write a sequence twice or out of order within one ring incarnation, and never apply a
//! datagram from another address than the one it takes datagrams from.
//!
//! On a blob ring every record written must read back with its blob.
//!
//! Input: byte 0 picks a prelude (bits 0-1 — 0: none; 1: a valid TCP-mode handshake;
//! 2: multicast; 3: unicast; bit 2: of a blob ring; bit 3: a resume, the mirror ring already
//! holding records 1..=4 of the prelude's layout, so the resume check runs), then records of
//! `[op, len_lo, len_hi, bytes...]` with op % 4 = 0 stream bytes, 1 datagram from the source,
//! 2 datagram from a stranger, 3 advance time by `len` microseconds and poll.
//!
//! On a resume the mirror never writes the last record held again in the same ring: it
//! continues after it, or recreates the ring.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringwire_core::broadcast::blob::{BlobRead, read_blob, split_descriptor};
use ringwire_core::layout::Geometry;
use ringwire_core::region::Region;
use ringwire_core::replicate::holdback::HeldEntry;
use ringwire_core::replicate::{
    HoldBack, Holds, Instant, Mirror, MirrorConfig, PeerAddr, RecordSink, RegionSink, SinkError,
    Start, StreamBuf,
};
use ringwire_core::ring::{RingView, SlotRead};
use ringwire_core::wire::{GEOMETRY_UDP_FOLLOWS, GeometryRepr, MulticastRepr};

struct Checked {
    inner: RegionSink,
    last: u64,
}

impl RecordSink for Checked {
    fn existing(&self) -> Option<(Geometry, u64)> {
        self.inner.existing()
    }
    fn recreate(&mut self, geo: &Geometry) -> Result<(), SinkError> {
        self.last = 0;
        self.inner.recreate(geo)
    }
    fn write(&mut self, seq: u64, fixed: &[u8], blob: &[u8]) {
        assert!(seq > self.last, "write {seq} after {}", self.last);
        assert!(seq != 0 && seq != u64::MAX);
        self.last = seq;
        self.inner.write(seq, fixed, blob);
        if let Some(v) = self.inner.view() {
            check_blob_record(v, seq, fixed, blob);
        }
    }
    fn publish(&mut self, seq: u64) {
        assert_eq!(seq, self.last, "publish of an unwritten sequence");
        self.inner.publish(seq);
    }
    fn holds(&self, seq: u64, fixed: &[u8], blob: &[u8]) -> Holds {
        self.inner.holds(seq, fixed, blob)
    }
}

const SOURCE: PeerAddr = PeerAddr::new([10, 0, 0, 1], 9000);
const UDP_SRC: PeerAddr = PeerAddr::new([10, 0, 0, 1], 17403);
const STRANGER: PeerAddr = PeerAddr::new([6, 6, 6, 6], 1);

/// On a blob ring, a record just written reads back as the source's meta with a BlobRef of
/// this arena whose bytes are the blob (same length; the source's flags unless empty), or,
/// for a blob the arena cannot hold, is not there at all.
fn check_blob_record(v: &RingView, seq: u64, fixed: &[u8], blob: &[u8]) {
    let g = v.geometry();
    if !g.has_arena() {
        return;
    }
    let mut d = vec![0u8; g.record_len()];
    let Some((_, src)) = split_descriptor(fixed) else {
        return;
    };
    if blob.len() as u64 > g.arena_size {
        assert_ne!(
            v.read_slot(seq, &mut d),
            SlotRead::Ok,
            "oversized blob written"
        );
        return;
    }
    assert_eq!(v.read_slot(seq, &mut d), SlotRead::Ok);
    let (meta, r) = split_descriptor(&d).unwrap();
    assert_eq!(meta, &fixed[..fixed.len() - 16]);
    assert_eq!(r.len as usize, blob.len());
    assert_eq!(r.flags, if blob.is_empty() { 0 } else { src.flags });
    let mut got = vec![0u8; blob.len()];
    assert_eq!(read_blob(v, &r, &mut got), BlobRead::Ok(blob.len()));
    assert_eq!(got, blob);
}

fuzz_target!(|data: &[u8]| {
    let Some((&prelude, mut rest)) = data.split_first() else {
        return;
    };
    let mut mem = vec![0u64; 8192];
    // SAFETY: `mem` outlives every use of the region in this function and nothing else
    // touches it.
    let region = unsafe { Region::from_raw_parts(mem.as_mut_ptr().cast(), mem.len() * 8) }.unwrap();
    // SAFETY: a fresh buffer of this sink alone, single-threaded; the mirror ring is read
    // only through the sink's current view.
    let inner = unsafe { RegionSink::new(region) };
    let mut sink = Checked { inner, last: 0 };
    let udp = prelude % 4 > 1;
    // Bit 2: a blob ring (24-byte descriptors, a 1 KiB arena after the slots).
    let blob = prelude & 4 != 0;
    let g = GeometryRepr {
        flags: if udp { GEOMETRY_UDP_FOLLOWS } else { 0 },
        seq: 1,
        capacity: 16,
        element_size: if blob { 32 } else { 16 },
        ring_flags: if blob { 0x0111 } else { 0x11 },
        schema_sig: 0,
        registry_count: 0,
        slots_offset: 128,
        arena_offset: if blob { 128 + 16 * 32 } else { 0 },
        arena_size: if blob { 1024 } else { 0 },
    };
    // Bit 3: resume a ring that holds 1..=4 (record n: bytes of n; blobs of n bytes).
    let resume = prelude & 8 != 0;
    if resume {
        sink.inner.recreate(&g.mirror_geometry()).unwrap();
        for n in 1..=4u64 {
            let mut d = vec![n as u8; g.element_size as usize - 8];
            if blob {
                let at = d.len() - 16;
                d[at..].fill(0);
                d[at + 8..at + 12].copy_from_slice(&(n as u32).to_le_bytes());
            }
            let b = if blob {
                vec![n as u8; n as usize]
            } else {
                vec![]
            };
            sink.inner.write(n, &d, &b);
        }
        sink.inner.publish(4);
        sink.last = 4;
    }
    let mut idx = [HeldEntry::default(); 64];
    let mut held = [0u8; 4096];
    let mut sbuf_mem = [0u8; 4096];
    let mut sbuf = StreamBuf::new(&mut sbuf_mem);
    let mut m = Mirror::new(
        MirrorConfig {
            start: if resume { Start::Resume } else { Start::Oldest },
            ..MirrorConfig::default()
        },
        SOURCE,
        &sink,
        HoldBack::new(&mut idx, &mut held),
    );
    if resume {
        assert_eq!(m.hello().seq, 4, "a resume asks for the last record held");
    }
    let mut now = 0u64;
    let mut out = [0u8; 64];
    while m
        .poll_transmit(Instant::from_nanos(now), &mut out)
        .is_some()
    {}
    if prelude % 4 != 0 {
        let mut b = [0u8; 96];
        let mut n = g.emit(&mut b).unwrap();
        if udp {
            let group = if prelude % 4 == 2 {
                [239, 1, 1, 1]
            } else {
                [0; 4]
            };
            n += MulticastRepr {
                group,
                port: 17403,
                mtu: 1472,
                ttl: 0,
                session: 0x22,
                token: 1,
            }
            .emit(&mut b[n..])
            .unwrap();
        }
        sbuf.push(&b[..n]);
    }
    let t = |n: u64| Instant::from_nanos(n);
    loop {
        while let Some(f) = sbuf.next_frame() {
            match f {
                Ok(f) => {
                    if m.handle_tcp_frame(t(now), f, &mut sink).is_err() {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
        let [op, lo, hi, tail @ ..] = rest else {
            break;
        };
        let len = usize::from(u16::from_le_bytes([*lo, *hi]));
        let (body, tail) = tail.split_at(len.min(tail.len()));
        rest = tail;
        match op % 4 {
            0 => {
                let mut off = 0;
                while off < body.len() {
                    let k = sbuf.push(&body[off..]);
                    off += k;
                    if k == 0 {
                        break;
                    }
                    while let Some(f) = sbuf.next_frame() {
                        match f {
                            Ok(f) => {
                                if m.handle_tcp_frame(t(now), f, &mut sink).is_err() {
                                    return;
                                }
                            }
                            Err(_) => return,
                        }
                    }
                }
            }
            1 => {
                let mut it = core::iter::once((UDP_SRC, body));
                let _ = m.handle_datagrams(t(now), &mut it, &mut sink);
            }
            2 => {
                // A datagram from another address than the one the mirror takes datagrams
                // from (over unicast the address it punched, over multicast the sender it
                // confirmed) is never applied, and before there is one nothing is applied
                // either. The stranger may become that address: over multicast a sender is
                // confirmed by its record matching the source's over TCP (a TCP frame: the
                // input plays the source); over unicast a datagram from the punched port at
                // another IP is adopted while nothing was heard yet (this datagram).
                let src = m.udp_source();
                let before = m.counters().records_written;
                m.handle_datagram(t(now), STRANGER, body, &mut sink);
                let after = m.udp_source();
                if after != src {
                    assert!(
                        after == Some(STRANGER) && src.is_some_and(|a| a.port == STRANGER.port),
                        "a stranger's datagram moved the mirror's source from {src:?} to {after:?}"
                    );
                }
                if m.counters().records_written != before {
                    assert_eq!(
                        after,
                        Some(STRANGER),
                        "a stranger's datagram applied while the source is {src:?}"
                    );
                }
            }
            _ => {
                now += len as u64 * 1000;
                let mut k = 0;
                while m.poll_transmit(t(now), &mut out).is_some() {
                    k += 1;
                    assert!(k < 8, "poll_transmit does not settle");
                }
                // Once polled dry, the next timer lies in the future (no busy loop).
                if let Some(d) = m.poll_timeout() {
                    assert!(
                        d > t(now),
                        "timeout {d:?} not after now {now} once polled dry"
                    );
                }
            }
        }
    }
});
