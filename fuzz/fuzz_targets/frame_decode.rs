//! Decodes arbitrary bytes as one frame with every record format; a frame that decodes must
//! re-encode to bytes that decode to the same value. Never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringwire_core::wire::{FrameRepr, RecordFormat, frame_len};

fuzz_target!(|data: &[u8]| {
    let _ = frame_len(data);
    for fmt in [
        RecordFormat::Fixed { record_len: 8 },
        RecordFormat::Fixed { record_len: 1 },
        RecordFormat::Blob { desc_len: 24 },
        RecordFormat::Blob { desc_len: 16 },
    ] {
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
});
