//! Cutting frames out of a TCP byte stream into caller memory.

use crate::wire::{HEADER_LEN, WireError, frame_total};

/// A reassembly buffer over caller memory. Push stream bytes in, take whole frames out.
#[derive(Debug)]
pub struct StreamBuf<'a> {
    buf: &'a mut [u8],
    start: usize,
    end: usize,
}

impl<'a> StreamBuf<'a> {
    /// A buffer able to hold frames of up to `buf.len()` bytes. One shorter than a frame
    /// header ([`HEADER_LEN`], 16 bytes) holds no frame: once it is full,
    /// [`StreamBuf::next_frame`] returns [`WireError::BufferTooSmall`].
    pub fn new(buf: &'a mut [u8]) -> StreamBuf<'a> {
        StreamBuf {
            buf,
            start: 0,
            end: 0,
        }
    }

    /// Forgets buffered bytes (the connection was closed).
    pub fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
    }

    /// Copies as many of `bytes` as fit; returns how many were taken. Call
    /// [`StreamBuf::next_frame`] until it returns `None`, then push the rest.
    pub fn push(&mut self, bytes: &[u8]) -> usize {
        if self.start > 0 && self.end == self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let n = bytes.len().min(self.buf.len() - self.end);
        self.buf[self.end..self.end + n].copy_from_slice(&bytes[..n]);
        self.end += n;
        n
    }

    /// The bytes buffered that no frame has been taken from: once
    /// [`StreamBuf::next_frame`] has returned `None`, what arrived of a frame not yet whole
    /// (empty at a frame boundary).
    pub fn buffered(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// The next complete frame, `None` if more bytes are needed, or an error if the frame
    /// announced is larger than the buffer, or the buffer is full without a whole header
    /// (the stream cannot continue).
    pub fn next_frame(&mut self) -> Option<Result<&[u8], WireError>> {
        // Full without a whole header: only a buffer under HEADER_LEN (a longer one is
        // compacted before it fills). `push` would take 0 bytes and this return `None` for ever.
        if self.end - self.start == self.buf.len() && self.buf.len() < HEADER_LEN {
            return Some(Err(WireError::BufferTooSmall {
                need: HEADER_LEN,
                have: self.buf.len(),
            }));
        }
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            return None;
        }
        let avail = &self.buf[self.start..self.end];
        let too_long = |len| WireError::FrameTooLarge {
            len,
            max: self.buf.len().saturating_sub(HEADER_LEN),
        };
        let total = match frame_total(avail)? {
            Ok(t) if t <= self.buf.len() => t,
            // Too long for the buffer, or for a usize (32-bit targets).
            Ok(t) => return Some(Err(too_long((t - HEADER_LEN) as u32))),
            Err(WireError::FrameTooLarge { len, .. }) => return Some(Err(too_long(len))),
            Err(e) => return Some(Err(e)),
        };
        if avail.len() < total {
            if self.start > 0 && self.start + total > self.buf.len() {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            return None;
        }
        let s = self.start;
        self.start += total;
        Some(Ok(&self.buf[s..s + total]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{GapRepr, NakRepr};

    #[test]
    fn splits_and_joins() {
        let mut stream = [0u8; 40];
        GapRepr { seq: 5 }.emit(&mut stream).unwrap();
        NakRepr { from: 1, to: 2 }.emit(&mut stream[16..]).unwrap();
        let mut mem = [0u8; 30];
        let mut sb = StreamBuf::new(&mut mem);
        let mut got = 0;
        let mut fed = 0;
        while fed < 40 {
            let n = sb.push(&stream[fed..(fed + 7).min(40)]);
            fed += n;
            while let Some(f) = sb.next_frame() {
                let f = f.unwrap();
                assert_eq!(f.len(), [16, 24][got]);
                got += 1;
            }
        }
        assert_eq!(got, 2);
        let mut small = [0u8; 20];
        let mut sb = StreamBuf::new(&mut small);
        sb.push(&stream[16..36]);
        assert!(matches!(
            sb.next_frame(),
            Some(Err(WireError::FrameTooLarge { len: 8, max: 4 }))
        ));
    }

    /// A buffer shorter than a header never holds one: once full it reports so, instead of
    /// `None` for ever while `push` takes 0 bytes (a firmware read loop would spin).
    #[test]
    fn a_buffer_shorter_than_a_header_is_refused_once_full() {
        let mut frame = [0u8; 16];
        GapRepr { seq: 5 }.emit(&mut frame).unwrap();
        let mut mem = [0u8; 8];
        let mut sb = StreamBuf::new(&mut mem);
        assert_eq!(sb.push(&frame[..3]), 3);
        assert_eq!(sb.next_frame(), None, "not full yet: more bytes may come");
        let mut fed = 3;
        let mut got = None;
        for _ in 0..4 {
            fed += sb.push(&frame[fed..]);
            if let Some(r) = sb.next_frame() {
                got = Some(r.map(<[u8]>::len));
                break;
            }
        }
        assert_eq!(fed, 8);
        let refused = Err(WireError::BufferTooSmall {
            need: HEADER_LEN,
            have: 8,
        });
        assert_eq!(got, Some(refused));
        assert_eq!(sb.next_frame().map(|r| r.map(<[u8]>::len)), Some(refused));
        let mut sb = StreamBuf::new(&mut []);
        assert_eq!(
            sb.next_frame(),
            Some(Err(WireError::BufferTooSmall {
                need: HEADER_LEN,
                have: 0
            }))
        );
    }

    /// A header announcing `len = u32::MAX` (a hostile peer) is refused as too large, on
    /// every target (on 32-bit the total does not even fit a `usize`).
    #[test]
    fn a_huge_len_is_refused() {
        let mut hdr = [0u8; 16];
        crate::wire::HeaderRepr {
            kind: crate::wire::Kind::Data,
            flags: 0,
            count: 1,
            len: u32::MAX,
            seq: 1,
        }
        .emit(&mut hdr)
        .unwrap();
        let mut mem = [0u8; 64];
        let mut sb = StreamBuf::new(&mut mem);
        sb.push(&hdr);
        assert_eq!(
            sb.next_frame(),
            Some(Err(WireError::FrameTooLarge {
                len: u32::MAX,
                max: 48
            }))
        );
    }
}
