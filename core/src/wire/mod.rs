//! The replication wire protocol version 1 (spec §17–§18): one file per frame kind.
//!
//! Each kind has a view over bytes (a checked [`Frame`] plus typed payload getters) and a
//! `Repr` with `parse`, `emit` and `buffer_len`. [`FrameRepr::parse`] decodes any frame.
//! Everything is little-endian and allocation-free.

mod any;
mod data;
mod error;
mod gap;
mod geometry;
mod header;
mod heartbeat;
mod hello;
mod multicast;
mod nak;
mod punch;

pub use any::FrameRepr;
pub use data::{DataRecord, DataRecords, DataRepr, RecordFormat};
pub use error::WireError;
pub use gap::GapRepr;
pub use geometry::{GEOMETRY_LEN, GeometryPayload, GeometryRepr, RawGeometry, geometry_field};
pub use header::{
    Frame, HEADER_LEN, HeaderRepr, RawHeader, field, frame_len, frame_total, total_len,
};
pub use heartbeat::HeartbeatRepr;
pub use hello::{HELLO_LEN, HelloPayload, HelloRepr, RawHello, hello_field};
pub use multicast::{
    MULTICAST_LEN, MulticastPayload, MulticastRepr, RawMulticast, multicast_field,
};
pub use nak::{NAK_LEN, NakRepr};
pub use punch::PunchRepr;

/// Replication magic carried in HELLO (`"RRIMGNIR"` on the wire).
pub const REPL_MAGIC: u64 = 0x5249_4E47_4D49_5252;
/// Wire protocol version.
pub const REPL_VERSION: u32 = 1;
/// HELLO `seq` asking for the newest data only.
pub const HELLO_LATEST: u64 = 0;
/// HELLO `seq` asking for the oldest retained data.
pub const HELLO_OLDEST: u64 = u64::MAX;
/// GEOMETRY flag: the source restarted (the mirror wanted data past its end).
pub const GEOMETRY_RESET: u8 = 0x01;
/// GEOMETRY flag: a MULTICAST frame follows and live data comes over UDP.
pub const GEOMETRY_UDP_FOLLOWS: u8 = 0x02;
/// HELLO flag: the mirror can receive UDP unicast.
pub const HELLO_CAN_UNICAST: u8 = 0x01;
/// HELLO flag: the mirror prefers unicast over multicast.
pub const HELLO_PREFER_UNICAST: u8 = 0x02;
/// Largest DATA frame sent in one IPv4 UDP datagram.
pub const MAX_UDP_FRAME: usize = 65_507;
/// Largest datagram a mirror accepts.
pub const MAX_DATAGRAM: usize = 65_536;

/// Frame kinds (spec §18).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum Kind {
    /// Mirror → source, first TCP frame.
    Hello = 1,
    /// Source → mirror, reply to HELLO.
    Geometry = 2,
    /// Records.
    Data = 3,
    /// Everything below `seq` still missing is gone.
    Gap = 4,
    /// Idle keep-alive carrying a sequence.
    Heartbeat = 5,
    /// Mirror asks for a range again.
    Nak = 6,
    /// UDP delivery parameters, after GEOMETRY.
    Multicast = 7,
    /// Mirror → source UDP hole punch.
    Punch = 8,
}

impl Kind {
    /// The kind for a wire byte.
    pub const fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Hello,
            2 => Kind::Geometry,
            3 => Kind::Data,
            4 => Kind::Gap,
            5 => Kind::Heartbeat,
            6 => Kind::Nak,
            7 => Kind::Multicast,
            8 => Kind::Punch,
            _ => return None,
        })
    }

    /// The kind's name as the spec writes it (`GEOMETRY`), for messages.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Hello => "HELLO",
            Kind::Geometry => "GEOMETRY",
            Kind::Data => "DATA",
            Kind::Gap => "GAP",
            Kind::Heartbeat => "HEARTBEAT",
            Kind::Nak => "NAK",
            Kind::Multicast => "MULTICAST",
            Kind::Punch => "PUNCH",
        }
    }
}

/// Parses a control frame (`len` must be 0) of kind `want`; returns `(flags, seq)`.
fn parse_control<T: AsRef<[u8]>>(frame: &Frame<T>, want: Kind) -> Result<(u8, u64), WireError> {
    frame.fixed_payload(want, 0)?;
    Ok((frame.flags(), frame.seq()))
}
