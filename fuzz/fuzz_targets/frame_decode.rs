//! Two round trips, never a panic:
//!
//! - bytes: arbitrary bytes decode as one frame with every record format; a frame that
//!   decodes must re-encode to as many bytes, which decode to the same value;
//! - values: frames of every kind built from the fuzz bytes (every field set, mostly valid
//!   GEOMETRY layouts and multicast groups, DATA records in every format) must encode and
//!   decode back to the same value, or be refused by the decoder when a field breaks a
//!   wire rule. The bytes trip alone cannot see a decoder that drops a field (reads it as
//!   0): the re-encoded frame carries the 0 and decodes the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringwire_core::wire::{
    DataRepr, FrameRepr, GapRepr, GeometryRepr, HeartbeatRepr, HelloRepr, MulticastRepr, NakRepr,
    PunchRepr, RecordFormat, frame_len,
};

const FORMATS: [RecordFormat; 5] = [
    RecordFormat::Fixed { record_len: 8 },
    RecordFormat::Fixed { record_len: 1 },
    RecordFormat::Fixed { record_len: 0 },
    RecordFormat::Blob { desc_len: 24 },
    RecordFormat::Blob { desc_len: 16 },
];

/// Field values read from the fuzz bytes; missing bytes read as 0.
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | u64::from(self.u32()) << 32
    }
    /// A sequence: often one of the edge values the decoders treat specially.
    fn seq(&mut self) -> u64 {
        match self.u8() % 4 {
            0 => 0,
            1 => u64::MAX - u64::from(self.u8() % 4),
            _ => self.u64(),
        }
    }
}

/// `r` encodes and decodes to itself; or, when `valid` is false, the decoder refuses it.
fn value_trip(r: FrameRepr<'_>, fmt: RecordFormat, valid: bool) {
    let mut out = vec![0u8; r.buffer_len()];
    let n = r
        .emit(&mut out)
        .expect("emit into a buffer of buffer_len()");
    assert_eq!(n, r.buffer_len(), "emit wrote other than buffer_len()");
    assert_eq!(frame_len(&out), Some(n), "header length of {r:?}");
    match FrameRepr::parse(&out, fmt) {
        Ok(back) => {
            assert!(valid, "{r:?} breaks a wire rule but decodes as {back:?}");
            assert_eq!(back, r, "encode then decode changed the frame");
        }
        Err(e) => assert!(
            !valid,
            "{r:?} encodes to a frame that does not decode: {e:?}"
        ),
    }
}

/// A GEOMETRY, usually a valid layout (with or without registry and arena), sometimes raw.
fn geometry(f: &mut Fields<'_>) -> GeometryRepr {
    let raw = f.u8() & 7 == 0;
    let flags = f.u8();
    let seq = f.seq();
    let ring_flags = f.u32();
    let schema_sig = f.u64();
    if raw {
        return GeometryRepr {
            flags,
            seq,
            capacity: f.u64(),
            element_size: f.u32(),
            ring_flags,
            schema_sig,
            registry_count: f.u32(),
            slots_offset: f.u32(),
            arena_offset: f.u64(),
            arena_size: f.u64(),
        };
    }
    let capacity = 1u64 << (f.u8() % 40);
    let element_size = 8 * (u32::from(f.u8()) + 1);
    let registry_count = u32::from(f.u8() % 4);
    let slots_offset = 64 * (2 + registry_count + u32::from(f.u8() % 4));
    let (arena_offset, arena_size) = if f.u8() & 1 == 0 {
        (0, 0)
    } else {
        let slots_end = u64::from(slots_offset) + capacity * u64::from(element_size);
        (
            slots_end.next_multiple_of(64) + 64 * u64::from(f.u8() % 4),
            64u64 << (f.u8() % 30),
        )
    };
    GeometryRepr {
        flags,
        seq,
        capacity,
        element_size,
        ring_flags,
        schema_sig,
        registry_count,
        slots_offset,
        arena_offset,
        arena_size,
    }
}

/// DATA records in `fmt` (blob lengths written into each descriptor's BlobRef).
fn records(f: &mut Fields<'_>, fmt: RecordFormat, count: u16) -> Vec<u8> {
    let mut v = Vec::new();
    for _ in 0..count {
        match fmt {
            RecordFormat::Fixed { record_len } => v.extend((0..record_len).map(|_| f.u8())),
            RecordFormat::Blob { desc_len } => {
                let mut d: Vec<u8> = (0..desc_len).map(|_| f.u8()).collect();
                let blob = u32::from(f.u8() % 40);
                d[desc_len - 8..desc_len - 4].copy_from_slice(&blob.to_le_bytes());
                v.extend_from_slice(&d);
                v.extend((0..blob).map(|_| f.u8()));
            }
        }
    }
    v
}

fn values(data: &[u8]) {
    let mut f = Fields(data);
    let fmt = FORMATS[0];
    let hello = HelloRepr {
        seq: f.seq(),
        flags: f.u8(),
    };
    value_trip(FrameRepr::Hello(hello), fmt, true);
    let g = geometry(&mut f);
    value_trip(FrameRepr::Geometry(g), fmt, g.check().is_ok());
    value_trip(FrameRepr::Gap(GapRepr { seq: f.seq() }), fmt, true);
    let beat = HeartbeatRepr {
        flags: f.u8(),
        seq: f.seq(),
    };
    value_trip(FrameRepr::Heartbeat(beat), fmt, true);
    let nak = NakRepr {
        from: f.seq(),
        to: f.seq(),
    };
    value_trip(FrameRepr::Nak(nak), fmt, true);
    let group = match f.u8() % 3 {
        0 => [0; 4],
        1 => [0xe0 | (f.u8() & 0x0f), f.u8(), f.u8(), f.u8()],
        _ => [f.u8(), f.u8(), f.u8(), f.u8()],
    };
    let m = MulticastRepr {
        group,
        port: f.u16(),
        mtu: f.u16(),
        ttl: f.u8(),
        session: f.u8(),
        token: f.u32(),
    };
    let valid = (m.is_unicast() || group[0] & 0xf0 == 0xe0) && m.port != 0;
    value_trip(FrameRepr::Multicast(m), fmt, valid);
    let punch = PunchRepr {
        session: f.u8(),
        token: f.u32(),
    };
    value_trip(FrameRepr::Punch(punch), fmt, true);
    for fmt in FORMATS {
        let flags = f.u8();
        let seq = f.seq();
        let count = u16::from(f.u8() % 5);
        let recs = records(&mut f, fmt, count);
        let d = DataRepr {
            flags,
            seq,
            count,
            records: &recs,
        };
        let valid = count > 0 && seq != 0 && seq.checked_add(u64::from(count)).is_some();
        value_trip(FrameRepr::Data(d), fmt, valid);
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = frame_len(data);
    for fmt in FORMATS {
        if let Ok(r) = FrameRepr::parse(data, fmt) {
            let mut out = [0u8; 4096];
            if r.buffer_len() <= out.len() {
                let n = r.emit(&mut out).expect("emit into a large enough buffer");
                assert_eq!(n, data.len(), "re-encoded length differs");
                let again = FrameRepr::parse(&out[..n], fmt).expect("re-encoded frame decodes");
                assert_eq!(again, r, "round trip changed the frame");
            }
        }
    }
    values(data);
});
