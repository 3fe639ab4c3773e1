//! Test records whose contents are a function of their sequence number, so a reader can
//! check every field (and a checksum) without knowing what the writer sent.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// A mixing function (splitmix64 finaliser).
#[inline(always)]
pub fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A `#[repr(C)]` record without padding.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Rec {
    /// The sequence it was published under.
    pub seq: u64,
    /// A price.
    pub px: f64,
    /// A quantity.
    pub qty: u32,
    /// A side.
    pub side: u32,
    /// Checksum over the fields above.
    pub check: u64,
}

impl Rec {
    /// The record for sequence `seq`.
    pub fn new(seq: u64) -> Rec {
        let mut r = Rec {
            seq,
            px: seq as f64 * 0.25,
            qty: mix(seq) as u32,
            side: (seq % 2) as u32,
            check: 0,
        };
        r.check = r.checksum();
        r
    }

    fn checksum(&self) -> u64 {
        mix(self.seq
            ^ self.px.to_bits().rotate_left(17)
            ^ (u64::from(self.qty) << 32)
            ^ u64::from(self.side))
    }

    /// True when the checksum matches and the record is the one for `seq`.
    pub fn is_valid_for(&self, seq: u64) -> bool {
        self.check == self.checksum() && *self == Rec::new(seq)
    }
}

/// The 64-byte array record for `seq`: the sequence, then bytes derived from it, then a
/// checksum in the last 8 bytes.
pub fn bytes64(seq: u64) -> [u8; 64] {
    let mut b = [0u8; 64];
    b[..8].copy_from_slice(&seq.to_le_bytes());
    for (i, chunk) in b[8..56].chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&mix(seq.wrapping_add(i as u64 + 1)).to_le_bytes());
    }
    // Index loops, not iterator adapters: a debug build of the interop tests, 1,000,000
    // records a direction, spent much of its time in the adapters' calls.
    let mut sum = 0u64;
    let mut i = 0;
    while i < 56 {
        sum = mix(sum ^ u64::from(b[i]));
        i += 1;
    }
    b[56..].copy_from_slice(&sum.to_le_bytes());
    b
}

/// The blob payload of `seq` written into `buf` (length `min_len..=200`, varying with
/// `seq`); returns its length.
pub fn blob_payload(seq: u64, min_len: usize, buf: &mut [u8]) -> usize {
    let len = min_len + (mix(seq) % (201 - min_len as u64)) as usize;
    let out = &mut buf[..len];
    let mut i = 0;
    while i < len {
        out[i] = (mix(seq ^ ((i as u64) << 20)) & 0xff) as u8;
        i += 1;
    }
    len
}

/// A 64-byte record aligned to 64 bytes (spec §4.1, `align(T) > 8`): its slot is 128 bytes,
/// the sequence word alone on the first line and the payload on the second.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Aligned64(pub [u8; 64]);

impl Aligned64 {
    /// The record for `seq`: [`bytes64`] of it.
    pub fn new(seq: u64) -> Aligned64 {
        Aligned64(bytes64(seq))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`bytes64`] and [`blob_payload`] (index loops, for a debug build's speed) give the
    /// bytes of their docs' definitions, written here with iterators.
    #[test]
    fn the_loops_give_the_defined_bytes() {
        for seq in (0..3000).chain([u64::MAX - 1, u64::MAX, 1 << 40]) {
            let b = bytes64(seq);
            let sum = b[..56].iter().fold(0u64, |h, &x| mix(h ^ u64::from(x)));
            assert_eq!(b[56..], sum.to_le_bytes(), "bytes64({seq})");
            for min_len in [0, 1, 200] {
                let mut buf = [0u8; 256];
                let len = blob_payload(seq, min_len, &mut buf);
                assert!((min_len..=200).contains(&len), "{seq} {min_len}: {len}");
                assert_eq!(len, min_len + (mix(seq) % (201 - min_len as u64)) as usize);
                for (i, b) in buf[..len].iter().enumerate() {
                    assert_eq!(
                        *b,
                        (mix(seq ^ ((i as u64) << 20)) & 0xff) as u8,
                        "{seq} {i}"
                    );
                }
                assert!(buf[len..].iter().all(|&b| b == 0), "{seq}: past {len}");
            }
        }
    }
}
