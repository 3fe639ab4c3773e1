//! Mirror tests: a connection that ends, resets or is given up inside a frame.

use super::*;

/// A TCP mirror from the oldest record, past its handshake and DATA 1..=2 of 8-byte
/// records into `sink`: waiting for record 3.
fn tcp_mirror_past_records_1_and_2(sink: &mut Sink) -> Mirror<'static> {
    let mut m = tcp_mirror_from_oldest(&*sink);
    let _ = m.poll_transmit(ms(0), &mut [0u8; 64]);
    feed(&mut m, &geometry_frames(0, 1, None), sink).unwrap();
    feed(&mut m, &data(1, 2, 0), sink).unwrap();
    m
}

/// The stream's end at a frame boundary is a clean end; inside a frame (its header or its
/// payload cut short) it is a `TruncatedFrame` naming the kind, the bytes that arrived and
/// those expected, the frame's `seq` once its header arrived and where the mirror was. The
/// records of the frames before stay written.
#[test]
fn a_stream_ending_inside_a_frame_is_a_truncated_frame() {
    use crate::wire::Kind;
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let live = tcp_mirror_past_records_1_and_2;
    let mut m = live(&mut sink);
    assert_eq!(m.handle_tcp_eof(&[]), Ok(()));
    assert_eq!(m.failure(), None);
    // Two records of 8 bytes: 32 bytes in all.
    let cut_short = data(3, 2, 0);
    assert_eq!(cut_short.len(), 32);
    for (got, expected, seq) in [
        (1, None, None),
        (7, None, None),
        (8, Some(32), None),
        (16, Some(32), Some(3)),
        (31, Some(32), Some(3)),
    ] {
        let mut m = live(&mut sink);
        let e = MirrorError::TruncatedFrame {
            end: StreamEnd::Closed,
            kind: Some(Kind::Data),
            got,
            expected,
            seq,
            next: 3,
        };
        assert_eq!(m.handle_tcp_eof(&cut_short[..got]), Err(e), "{got} bytes");
        assert_eq!(m.failure(), Some(e));
        assert_eq!(
            sink.existing().map(|(_, w)| w),
            Some(2),
            "records 1..=2 kept"
        );
        assert_eq!(
            feed(&mut m, &data(3, 1, 0), &mut sink),
            Err(MirrorError::Closed)
        );
    }
    let mut m = live(&mut sink);
    let e = m.handle_tcp_eof(&cut_short[..20]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the connection closed in the middle of a DATA frame (seq 3): 20 of its 32 bytes \
         arrived; the mirror was waiting for record 3"
    );
    let e = live(&mut sink).handle_tcp_eof(&[0xee, 0, 0]).unwrap_err();
    assert!(
        matches!(
            e,
            MirrorError::TruncatedFrame {
                end: StreamEnd::Closed,
                kind: None,
                got: 3,
                expected: None,
                seq: None,
                next: 3
            }
        ),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "the connection closed in the middle of a frame of unknown kind: 3 of its 16-byte \
         header arrived; the mirror was waiting for record 3"
    );
}

/// A connection that ended inside a frame by `end`, handed to the mirror by `handle`:
/// between frames the core has nothing to say (`Ok`, the driver says how the connection
/// ends); inside a frame it is the same `TruncatedFrame` as a close there, marked with
/// `end`, the records before it kept, and its text beginning with `says`.
fn ended_inside_a_frame(
    end: StreamEnd,
    handle: fn(&mut Mirror<'_>, &[u8]) -> Result<(), MirrorError>,
    says: &str,
) {
    use crate::wire::Kind;
    let mut mem = Mem::new(4096);
    let mut sink = Sink::on(&mut mem);
    let live = tcp_mirror_past_records_1_and_2;
    let mut m = live(&mut sink);
    assert_eq!(handle(&mut m, &[]), Ok(()));
    assert_eq!(m.failure(), None);
    let cut_short = data(3, 2, 0);
    let mut m = live(&mut sink);
    let e = MirrorError::TruncatedFrame {
        end,
        kind: Some(Kind::Data),
        got: 20,
        expected: Some(32),
        seq: Some(3),
        next: 3,
    };
    assert_eq!(handle(&mut m, &cut_short[..20]), Err(e));
    assert_eq!(m.failure(), Some(e));
    assert_eq!(
        sink.existing().map(|(_, w)| w),
        Some(2),
        "records 1..=2 kept"
    );
    assert_eq!(
        e.to_string(),
        format!(
            "{says} in the middle of a DATA frame (seq 3): 20 of its 32 bytes arrived; the \
             mirror was waiting for record 3"
        )
    );
}

/// A connection reset (or failed otherwise) rather than closed.
#[test]
fn a_connection_reset_inside_a_frame_is_a_truncated_frame() {
    ended_inside_a_frame(
        StreamEnd::Reset,
        |m, b| m.handle_tcp_reset(b),
        "the connection was reset",
    );
}

/// A connection the driver gives up while it is still open (a write that timed out, a
/// failed wait on its socket): neither a close nor a reset.
#[test]
fn a_connection_given_up_inside_a_frame_is_a_truncated_frame() {
    ended_inside_a_frame(
        StreamEnd::GivenUp,
        |m, b| m.handle_tcp_given_up(b),
        "the mirror gave the connection up",
    );
}
