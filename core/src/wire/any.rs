//! [`FrameRepr`]: decode any frame kind from one buffer.

use super::{
    DataRepr, Frame, GapRepr, GeometryRepr, HeartbeatRepr, HelloRepr, Kind, MulticastRepr, NakRepr,
    PunchRepr, RecordFormat, WireError,
};

/// Any frame, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameRepr<'a> {
    /// HELLO.
    Hello(HelloRepr),
    /// GEOMETRY.
    Geometry(GeometryRepr),
    /// DATA (validated against the record format given to [`FrameRepr::parse`]).
    Data(DataRepr<'a>),
    /// GAP.
    Gap(GapRepr),
    /// HEARTBEAT.
    Heartbeat(HeartbeatRepr),
    /// NAK.
    Nak(NakRepr),
    /// MULTICAST.
    Multicast(MulticastRepr),
    /// PUNCH.
    Punch(PunchRepr),
}

impl<'a> FrameRepr<'a> {
    /// Decodes exactly one frame from `bytes`. DATA payloads are checked against `fmt`.
    pub fn parse(bytes: &'a [u8], fmt: RecordFormat) -> Result<FrameRepr<'a>, WireError> {
        let frame = Frame::new_checked(bytes)?;
        let kind = frame.kind().ok_or(WireError::UnknownKind {
            kind: frame.kind_byte(),
        })?;
        Ok(match kind {
            Kind::Hello => FrameRepr::Hello(HelloRepr::parse(&frame)?),
            Kind::Geometry => FrameRepr::Geometry(GeometryRepr::parse(&frame)?),
            Kind::Data => {
                let d = DataRepr::parse(&frame, fmt)?;
                FrameRepr::Data(DataRepr {
                    records: &bytes[super::HEADER_LEN..],
                    ..d
                })
            }
            Kind::Gap => FrameRepr::Gap(GapRepr::parse(&frame)?),
            Kind::Heartbeat => FrameRepr::Heartbeat(HeartbeatRepr::parse(&frame)?),
            Kind::Nak => FrameRepr::Nak(NakRepr::parse(&frame)?),
            Kind::Multicast => FrameRepr::Multicast(MulticastRepr::parse(&frame)?),
            Kind::Punch => FrameRepr::Punch(PunchRepr::parse(&frame)?),
        })
    }

    /// Bytes the frame takes.
    pub fn buffer_len(&self) -> usize {
        match self {
            FrameRepr::Hello(r) => r.buffer_len(),
            FrameRepr::Geometry(r) => r.buffer_len(),
            FrameRepr::Data(r) => r.buffer_len(),
            FrameRepr::Gap(r) => r.buffer_len(),
            FrameRepr::Heartbeat(r) => r.buffer_len(),
            FrameRepr::Nak(r) => r.buffer_len(),
            FrameRepr::Multicast(r) => r.buffer_len(),
            FrameRepr::Punch(r) => r.buffer_len(),
        }
    }

    /// Writes the frame into `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        match self {
            FrameRepr::Hello(r) => r.emit(buf),
            FrameRepr::Geometry(r) => r.emit(buf),
            FrameRepr::Data(r) => r.emit(buf),
            FrameRepr::Gap(r) => r.emit(buf),
            FrameRepr::Heartbeat(r) => r.emit(buf),
            FrameRepr::Nak(r) => r.emit(buf),
            FrameRepr::Multicast(r) => r.emit(buf),
            FrameRepr::Punch(r) => r.emit(buf),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_frame_reencodes() {
        let hello: [u8; 32] = [
            1, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x52, 0x52, 0x49, 0x4d, 0x47, 0x4e,
            0x49, 0x52, 1, 0, 0, 0, 1, 0, 0, 0,
        ];
        let fmt = RecordFormat::Fixed { record_len: 8 };
        let r = FrameRepr::parse(&hello, fmt).unwrap();
        assert!(matches!(
            r,
            FrameRepr::Hello(HelloRepr { seq: 0, flags: 1 })
        ));
        let mut out = [0u8; 32];
        assert_eq!(r.emit(&mut out), Ok(r.buffer_len()));
        assert_eq!(out, hello);
        assert_eq!(
            FrameRepr::parse(&hello[..20], fmt),
            Err(WireError::Truncated { need: 32, have: 20 })
        );
    }
}
