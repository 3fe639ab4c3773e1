//! The record the SysTick handler publishes: one "sensor sample", 24 bytes on the wire.

/// Payload bytes of one record; the ring's slot adds its 8-byte sequence word.
pub const LEN: usize = 24;

/// One sample. `n` is the ring sequence the handler wrote it under, so a reader can tell a
/// record that arrived under the wrong sequence from the right one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Sample number (equal to the record's ring sequence).
    pub n: u64,
    /// SysTick count when it was taken.
    pub tick: u32,
    /// A 12-bit "ADC" reading, a pure function of `n` so readers can recompute it.
    pub reading: u32,
    /// FNV-1a of the 16 bytes above: catches torn or scribbled records.
    pub check: u64,
}

impl Sample {
    /// The sample the handler takes at `tick` as record `n`.
    pub fn take(n: u64, tick: u32) -> Sample {
        let reading = reading_for(n);
        Sample {
            n,
            tick,
            reading,
            check: checksum(n, tick, reading),
        }
    }

    /// Little-endian wire form (the same bytes land in the ring slot and in DATA frames).
    pub fn to_bytes(self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        b[0..8].copy_from_slice(&self.n.to_le_bytes());
        b[8..12].copy_from_slice(&self.tick.to_le_bytes());
        b[12..16].copy_from_slice(&self.reading.to_le_bytes());
        b[16..24].copy_from_slice(&self.check.to_le_bytes());
        b
    }

    /// Decodes a record's bytes.
    pub fn from_bytes(b: &[u8; LEN]) -> Sample {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap_or([0; 4]));
        Sample {
            n: u64_at(0),
            tick: u32_at(8),
            reading: u32_at(12),
            check: u64_at(16),
        }
    }

    /// True when this is an intact sample stored under ring sequence `seq`.
    pub fn is_valid_for(&self, seq: u64) -> bool {
        self.n == seq
            && self.reading == reading_for(seq)
            && self.check == checksum(self.n, self.tick, self.reading)
    }
}

/// A sawtooth-ish 12-bit signal with some scatter, computable from the sample number alone.
fn reading_for(n: u64) -> u32 {
    ((n.wrapping_mul(0x9E37_79B9) >> 7) as u32 ^ (n as u32).wrapping_mul(37)) & 0x0FFF
}

fn checksum(n: u64, tick: u32, reading: u32) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let bytes = n
        .to_le_bytes()
        .into_iter()
        .chain(tick.to_le_bytes())
        .chain(reading.to_le_bytes());
    for b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}
