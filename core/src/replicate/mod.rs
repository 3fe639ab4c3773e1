//! Sans-IO replication state machines (spec §19–§25): no clocks, no sockets, no allocation.
//!
//! Input comes in through `handle_*(now, …)`; output goes out through
//! `poll_transmit(now, …, &mut buf)` into caller buffers; timers are reported by
//! `poll_timeout()`. Time is an [`Instant`] the caller supplies.
//!
//! | file | what |
//! |---|---|
//! | `source.rs` | one source TCP session: HELLO → cursor, transport choice, TCP streaming, NAK answers |
//! | `udp_sender.rs` | the source's UDP sender: pacing, heartbeats, duplicates, EMSGSIZE, PUNCH |
//! | `mirror/` | the mirror: `mod.rs` handshake, adopt/recreate, datagram filter, output; `apply.rs` DATA/GAP in order, hold-back, restart; `nak.rs` NAK request and repeat; `sender.rs` which multicast sender is heard |
//! | `holdback.rs` | the mirror's hold-back store over caller memory |
//! | `collect.rs`, `pacing.rs` | collecting records into frames, frame linger |
//! | `ring_io.rs` | the traits the machines read and write rings through |
//!
//! A driver (the std adapter, firmware, or the test simulator) does, for a source: accept a
//! connection → [`SourceSession::new`]; bytes read → [`SourceSession::handle_stream`] (with
//! the server's [`UdpSender`] as token registry); then `poll_transmit` until `None`, again
//! whenever the ring's `write_seq` moves and at `poll_timeout()`; on error or EOF close and
//! [`UdpSender::unregister`] the session's token. The server's [`UdpSender`] is polled the same
//! way and each datagram goes `duplicate()` times to each of `destinations()`; while it has
//! none ([`UdpSender::has_destinations`]), the driver may call
//! [`UdpSender::pass_to_head`] instead and wait for a PUNCH. For a mirror:
//! [`Mirror::new`], send what `poll_transmit` returns (HELLO first), cut TCP bytes into frames
//! with [`StreamBuf`] and pass each to [`Mirror::handle_tcp_frame`], pass datagrams (with their
//! source address) to [`Mirror::handle_datagrams`], and poll again at `poll_timeout()`. When
//! the TCP connection ends, pass what [`StreamBuf::buffered`] holds to
//! [`Mirror::handle_tcp_eof`] (a close), [`Mirror::handle_tcp_reset`] (a reset, an error) or
//! [`Mirror::handle_tcp_given_up`] (the driver gives it up: a write timed out, a wait failed):
//! part of a frame there is a [`MirrorError::TruncatedFrame`].
//!
//! Blob rings plug in through [`RecordSource`] (a reader that copies descriptor + blob and
//! reports lost blobs) and [`RecordSink`] (a writer that reserves arena space); the codec,
//! collect and apply logic already handle variable-length records.

pub mod collect;
pub mod holdback;
pub mod mirror;
pub mod pacing;
pub mod ring_io;
pub mod source;
pub mod stream;
pub mod time;
pub mod udp_sender;

#[cfg(all(test, not(loom)))]
mod tests;

pub use holdback::{HeldEntry, HoldBack};
pub use mirror::{Mirror, MirrorConfig, MirrorCounters, MirrorError, Start, StreamEnd};
pub use pacing::{MAX_LINGER, Pacer, Pacing};
pub use ring_io::{
    Holds, ReadRecord, RecordSink, RecordSource, RegionSink, Replace, RingSource, SinkError,
    compare_received, write_received,
};
pub use source::{
    SourceConfig, SourceCounters, SourceError, SourceSession, TokenRegistry, Transport, UdpOffer,
};
pub use stream::StreamBuf;
pub use time::{Duration, Instant};
pub use udp_sender::{UdpConfig, UdpSender};

/// The shortest idle time before a HEARTBEAT ([`SourceConfig::heartbeat`],
/// [`UdpConfig::heartbeat`]); a shorter one, zero included, is taken as this. Taken as is,
/// a zero one made every `poll_transmit` of an idle stream a HEARTBEAT: a driver that sends
/// until `poll_transmit` has nothing left never stopped (the TCP session), and serve's UDP
/// thread sent over 100,000 datagrams a second.
pub const MIN_HEARTBEAT: Duration = Duration::from_micros(100);

/// An IPv4 address and port, as an opaque value the driver maps to its sockets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PeerAddr {
    /// IPv4 octets in dotted order.
    pub ip: [u8; 4],
    /// UDP or TCP port.
    pub port: u16,
}

impl PeerAddr {
    /// `a.b.c.d:port`.
    pub const fn new(ip: [u8; 4], port: u16) -> PeerAddr {
        PeerAddr { ip, port }
    }
}

/// Where a mirror's outgoing bytes go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Channel {
    /// Append to the TCP stream.
    Tcp,
    /// Send as one datagram to this address.
    Udp(PeerAddr),
}

/// One output of `poll_transmit`: `len` bytes at the front of the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Transmit {
    /// Where to send them.
    pub channel: Channel,
    /// How many bytes.
    pub len: usize,
}
