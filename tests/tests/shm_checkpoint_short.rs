//! A non-empty file shorter than a checkpoint (64 bytes) is not a fresh checkpoint: it is
//! refused with a typed error naming it and left as it was, never extended and overwritten.
//! Only a missing or empty file is created.

use ringwire::{Error, OffsetCheckpoint, RingConsumer, RingProducer};
use ringwire_tests::records::Rec;
use ringwire_tests::shm::ShmPath;

const TEXT: &[u8; 16] = b"not a checkpoint";

fn assert_bad_magic(r: Result<impl std::fmt::Debug, Error>, file: &ShmPath, found: u64) {
    let e = r.expect_err("a short file that is not a checkpoint must be refused");
    assert!(
        matches!(&e, Error::BadFileMagic { path, kind: "offset file", found: f }
            if path == file.path() && *f == found),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        format!(
            "offset file {}: bad magic {found:#018x}",
            file.path().display()
        )
    );
}

#[test]
fn a_16_byte_text_file_is_refused_and_keeps_its_bytes() {
    let ring = ShmPath::new("ckpt-short");
    let mut prod = RingProducer::<Rec>::create(&ring, 64).unwrap();
    prod.push(&Rec::new(1));
    let file = ring.sibling(".notes");
    std::fs::write(&file, TEXT).unwrap();
    let found = u64::from_le_bytes(TEXT[..8].try_into().unwrap());

    assert_bad_magic(
        RingConsumer::<Rec>::attach_from_offset(&ring, &file),
        &file,
        found,
    );
    assert_eq!(std::fs::read(&file).unwrap(), TEXT);
    assert_bad_magic(OffsetCheckpoint::open_or_create(&file, "c"), &file, found);
    assert_eq!(std::fs::read(&file).unwrap(), TEXT);
    let c = RingConsumer::<Rec>::attach(&ring).unwrap();
    assert_bad_magic(c.commit_offset_to(&file, "c"), &file, found);
    assert_eq!(std::fs::read(&file).unwrap(), TEXT);

    // Shorter than the magic: the bytes there are what is reported.
    std::fs::write(&file, b"ab\n").unwrap();
    assert_bad_magic(
        OffsetCheckpoint::open_or_create(&file, "c"),
        &file,
        u64::from_le_bytes(*b"ab\n\0\0\0\0\0"),
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"ab\n");
}

#[test]
fn a_truncated_checkpoint_is_too_short_and_an_empty_file_is_created() {
    let file = ShmPath::new("ckpt-truncated");
    OffsetCheckpoint::open_or_create(&file, "c")
        .unwrap()
        .save(9);
    let whole = std::fs::read(&file).unwrap();
    assert_eq!(whole.len(), 64);
    std::fs::write(&file, &whole[..40]).unwrap();
    match OffsetCheckpoint::open_or_create(&file, "c") {
        Err(
            e @ Error::TooShort {
                len: 40, need: 64, ..
            },
        ) => {
            assert_eq!(e.path(), file.path());
            assert_eq!(
                e.to_string(),
                format!(
                    "offset file {}: 40 bytes, shorter than the 64 it needs",
                    file.path().display()
                )
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(std::fs::read(&file).unwrap(), whole[..40]);

    // An empty file is a new checkpoint.
    std::fs::write(&file, b"").unwrap();
    let cp = OffsetCheckpoint::open_or_create(&file, "c").unwrap();
    assert_eq!((cp.load(), cp.name()), (None, "c"));
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 64);
}
