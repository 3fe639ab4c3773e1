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
        ) => assert!(
            e.to_string()
                .ends_with(": bad queue magic 0x52494e4746495245 (the magic of a ring file)"),
            "{e}"
        ),
        other => panic!("{other:?}"),
    }
}

/// The lossy MPMC ring (spec §8) both ways: ringfire and ringwire producers on one ring,
/// ringfire and ringwire competing consumers on it, every ticket delivered once.
#[test]
fn lossy_mpmc_ring_shared_with_ringfire() {
    use ringwire::lossy_mpmc::LossyPush;
    use ringwire::{MpmcProducer, MpmcQueueConsumer};
    use ringwire_tests::shm::ShmPath;

    // Ring created by ringfire.
    let path = ShmPath::new("qinterop-lossy-rf");
    let rf_prod = ringfire::MpmcProducer::<u64>::create(&path, 8).unwrap();
    let rw_prod = MpmcProducer::<u64>::attach(&path).unwrap();
    assert_eq!(rf_prod.push(&1), 1);
    assert!(matches!(
        rw_prod.push_outcome(&2),
        LossyPush::Published { seq: 2, .. }
    ));
    assert_eq!(rf_prod.push(&3), 3);
    let mut rf_cons = ringfire::MpmcQueueConsumer::<u64>::attach(&path).unwrap();
    let mut rw_cons = MpmcQueueConsumer::<u64>::attach(&path).unwrap();
    assert_eq!(rw_cons.try_recv_seq(), Some((1, 1)));
    assert_eq!(rf_cons.try_recv(), Some(2));
    assert_eq!(rw_cons.try_recv_seq(), Some((3, 3)));
    assert_eq!(rf_cons.try_recv(), None);
    assert_eq!((rw_cons.dropped_count(), rf_cons.dropped_count()), (0, 0));
    drop((rw_prod, rw_cons));
    drop(rf_prod);

    // Ring created by ringwire.
    let path = ShmPath::new("qinterop-lossy-rw");
    let rw_prod = MpmcProducer::<u64>::create(&path, 8).unwrap();
    let rf_prod = ringfire::MpmcProducer::<u64>::attach(&path).unwrap();
    for v in [10u64, 11] {
        assert!(matches!(
            rw_prod.push_outcome(&v),
            LossyPush::Published { .. }
        ));
    }
    assert_eq!(rf_prod.push(&12), 3);
    let mut rf_cons = ringfire::MpmcQueueConsumer::<u64>::attach(&path).unwrap();
    assert_eq!(rf_cons.try_recv(), Some(10));
    assert_eq!(rf_cons.try_recv(), Some(11));
    let mut rw_cons = MpmcQueueConsumer::<u64>::attach(&path).unwrap();
    assert_eq!(rw_cons.try_recv_seq(), Some((3, 12)));
    assert_eq!(rf_cons.try_recv(), None);
}
