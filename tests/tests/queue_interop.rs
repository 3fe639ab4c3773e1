//! ringfire refuses ringwire's native queue files (they carry their own magics), and
//! ringwire's queue attach refuses ringfire rings with an error that says so.

use ringwire::queue::{MpmcQueue, QueueFileError, QueueMem, SpscProducer};
use ringwire_core::queue::{MPMC_MAGIC, QueueAttachError, QueueExpect, QueueKind, SPSC_MAGIC};

fn tmp(name: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("rw-qinterop-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

/// ringfire's error for a queue file names the magic it found.
fn refused<T>(r: ringfire::Result<T>, magic: u64) {
    match r {
        Err(ringfire::RingfireError::InvalidMagic { actual, .. }) => assert_eq!(actual, magic),
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(_) => panic!("ringfire accepted a ringwire queue file"),
    }
}

#[test]
fn ringfire_readers_refuse_queue_files() {
    let spsc = tmp("spsc");
    let _p = SpscProducer::<u64>::create(&spsc, 8).unwrap();
    refused(ringfire::RingConsumer::<u64>::attach(&spsc), SPSC_MAGIC);
    refused(
        ringfire::MpmcQueueConsumer::<u64>::attach(&spsc),
        SPSC_MAGIC,
    );
    let mpmc = tmp("mpmc");
    let _q = MpmcQueue::<u64>::create(&mpmc, 8).unwrap();
    refused(ringfire::RingConsumer::<u64>::attach(&mpmc), MPMC_MAGIC);
    refused(
        ringfire::MpmcQueueConsumer::<u64>::attach(&mpmc),
        MPMC_MAGIC,
    );
    refused(ringfire::MpmcProducer::<u64>::attach(&mpmc), MPMC_MAGIC);
    std::fs::remove_file(&spsc).unwrap();
    std::fs::remove_file(&mpmc).unwrap();
}

#[test]
fn queue_attach_refuses_a_ringfire_ring() {
    let path = tmp("ring");
    let _prod = ringfire::RingProducer::<u64>::create(&path, 8).unwrap();
    match QueueMem::open(&path, QueueExpect::raw(QueueKind::Spsc)) {
        Err(
            e @ QueueFileError::Attach {
                err:
                    QueueAttachError::BadMagic {
                        found: 0x5249_4E47_4649_5245,
                    },
                ..
            },
        ) => assert!(e.to_string().contains("ringfire")),
        other => panic!("{other:?}"),
    }
}
