//! Replication over a byte link: the core's source session reads the ring and writes frames
//! into a byte pipe (a stand-in for a UART or radio link), and the core's mirror cuts them
//! back out and writes a second ring. The machines are sans-IO: this module only moves bytes
//! and supplies the time.

use ringwire_core::replicate::{
    Channel, Duration, HoldBack, Instant, Mirror, MirrorConfig, MirrorError, Pacing, PeerAddr,
    RegionSink, RingSource, SourceConfig, SourceError, SourceSession, Start, StreamBuf,
};
use ringwire_core::wire::WireError;
use ringwire_core::{Region, RegionError};

use crate::verify::CheckingSink;

/// Largest frame the source may send (header included): 10 records of 24 bytes.
pub const FRAME_BUDGET: usize = 256;
/// Bytes the link holds in flight (a UART's FIFOs and DMA buffers, say).
const LINK_BYTES: usize = 512;
/// Bytes the receiver takes per read: deliberately not a frame size, so frames arrive split
/// and the mirror's [`StreamBuf`] has to join them.
const RX_CHUNK: usize = 48;
/// The mirror's reverse-direction bytes: only its HELLO.
const UP_BYTES: usize = 64;

/// Why replication stopped.
#[derive(Debug)]
#[allow(dead_code)] // the fields are read through Debug when the failure is printed
pub enum ReplError {
    /// The source refused what the mirror sent.
    Source(SourceError),
    /// The mirror refused a frame.
    Mirror(MirrorError),
    /// The byte stream could not be cut into frames.
    Stream(WireError),
    /// The mirror wanted to send a datagram: it must stay on the byte stream.
    NotStream,
    /// The reassembly buffer took no bytes and held no whole frame.
    Stuck,
}

/// An in-order, lossless byte pipe of fixed size.
struct Pipe<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> Pipe<N> {
    const fn new() -> Self {
        Pipe {
            buf: [0; N],
            len: 0,
        }
    }
    /// Free room at the tail, at most `max` bytes.
    fn room(&mut self, max: usize) -> &mut [u8] {
        let end = (self.len + max).min(N);
        &mut self.buf[self.len..end]
    }
    fn wrote(&mut self, n: usize) {
        self.len += n;
    }
    fn free(&self) -> usize {
        N - self.len
    }
    /// Up to `max` bytes from the head.
    fn head(&self, max: usize) -> &[u8] {
        &self.buf[..self.len.min(max)]
    }
    fn consume(&mut self, n: usize) {
        self.buf.copy_within(n..self.len, 0);
        self.len -= n;
    }
}

/// One source session and one mirror joined by a byte pipe each way.
pub struct Replicator {
    ring: RingSource,
    source: SourceSession,
    down: Pipe<LINK_BYTES>,
    up: Pipe<UP_BYTES>,
    rx: StreamBuf<'static>,
    mirror: Mirror<'static>,
    sink: CheckingSink,
    /// Bytes carried source to mirror.
    pub bytes_down: u64,
}

impl Replicator {
    /// A mirror of `ring` into `mirror_mem`, reassembling frames in `rx_mem` (at least
    /// [`FRAME_BUDGET`] bytes). Nothing moves before the first [`Replicator::pump`]. Fails
    /// only if `mirror_mem` is not 8-aligned, which a `u64` buffer always is on Arm.
    pub fn new(
        ring: RingSource,
        mirror_mem: &'static mut [u64],
        rx_mem: &'static mut [u8],
        now: Instant,
    ) -> Result<Replicator, RegionError> {
        // The link has no address; the session API wants one, so both ends use a dummy.
        let peer = PeerAddr::new([0; 4], 0);
        let source = SourceSession::new(
            SourceConfig {
                batch: 64,
                tcp_budget: FRAME_BUDGET,
                // A frame leaves as soon as it has a record: the link is idle otherwise.
                pacing: Pacing::Fixed {
                    linger: Duration::ZERO,
                },
                ..SourceConfig::default()
            },
            peer,
            now,
        );
        // SAFETY: the static buffer is used by the sink alone (`mirror_mem` is borrowed
        // forever and the region made here is the only one over it), from the main thread
        // only (the SysTick handler touches the source ring alone). The mirror ring is read
        // only through `mirror_ring`, whose reference borrows the replicator and so is not
        // held across a `pump` that may recreate the ring (`run` reads it after the last).
        let sink = CheckingSink::new(unsafe { RegionSink::new(Region::from_static(mirror_mem)?) });
        let mirror = Mirror::new(
            MirrorConfig {
                start: Start::Oldest,
                ..MirrorConfig::default()
            },
            peer,
            &sink,
            // A byte stream never reorders, so there is nothing to hold back.
            HoldBack::new(&mut [], &mut []),
        );
        Ok(Replicator {
            ring,
            source,
            down: Pipe::new(),
            up: Pipe::new(),
            rx: StreamBuf::new(rx_mem),
            mirror,
            sink,
            bytes_down: 0,
        })
    }

    /// Moves everything that can move at `now`: the mirror's output to the source, the
    /// source's frames onto the link, the link's bytes into the mirror, until all are idle.
    pub fn pump(&mut self, now: Instant) -> Result<(), ReplError> {
        loop {
            let mut moved = false;
            while let Some(t) = self.mirror.poll_transmit(now, self.up.room(UP_BYTES)) {
                if t.channel != Channel::Tcp {
                    return Err(ReplError::NotStream);
                }
                self.up.wrote(t.len);
            }
            if self.up.len > 0 {
                let hello = self.up.head(UP_BYTES);
                self.source
                    .handle_stream(now, hello, &self.ring, None)
                    .map_err(ReplError::Source)?;
                self.up.consume(self.up.len);
                moved = true;
            }
            // Only ask for a frame when a whole one fits: the source cuts frames to the
            // buffer it is given, and a frame must not wait half-written.
            while self.down.free() >= FRAME_BUDGET {
                let room = self.down.room(FRAME_BUDGET);
                let Some(n) = self.source.poll_transmit(now, &self.ring, room) else {
                    break;
                };
                self.down.wrote(n);
                self.bytes_down += n as u64;
                moved = true;
            }
            while self.down.len > 0 {
                let taken = self.rx.push(self.down.head(RX_CHUNK));
                self.down.consume(taken);
                let mut frames = 0;
                while let Some(frame) = self.rx.next_frame() {
                    let frame = frame.map_err(ReplError::Stream)?;
                    self.mirror
                        .handle_tcp_frame(now, frame, &mut self.sink)
                        .map_err(ReplError::Mirror)?;
                    frames += 1;
                }
                if taken == 0 && frames == 0 {
                    return Err(ReplError::Stuck);
                }
                moved = true;
            }
            if !moved {
                return Ok(());
            }
        }
    }

    /// The mirror state machine (for its counters and state).
    pub fn mirror(&self) -> &Mirror<'static> {
        &self.mirror
    }

    /// The source session (for its counters).
    pub fn source(&self) -> &SourceSession {
        &self.source
    }

    /// The mirror's ring, once the handshake created it.
    pub fn mirror_ring(&self) -> Option<&ringwire_core::RingView> {
        self.sink.view()
    }

    /// The mirror's sink, which checked every record written (see [`CheckingSink`]).
    pub fn sink(&self) -> &CheckingSink {
        &self.sink
    }
}
