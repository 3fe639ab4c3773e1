//! `create` on a queue file that live handles still have open is refused with a typed
//! error naming the file and the holder; it used to replace the file, and the handles
//! then lost every item pushed to the new one without an error. A stale file (every
//! handle gone) is still replaced by a fresh, empty queue.

use std::time::Duration;

use ringwire::queue::{MpmcQueue, QueueFileError, SpscConsumer, SpscProducer};
use ringwire_tests::shm::ShmPath;

fn assert_in_use<T: std::fmt::Debug>(r: Result<T, QueueFileError>, path: &ShmPath, who: &str) {
    let e = r.expect_err("create must refuse a queue file a live handle has open");
    assert!(
        matches!(&e, QueueFileError::InUse { path: p, holder } if p == path.path() && *holder == who),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        format!(
            "queue {}: a live {who} still has it open; not replacing it (open it instead, or \
             close every handle first)",
            path.path().display()
        )
    );
}

#[test]
fn spsc_create_refuses_a_file_a_consumer_has_open_and_no_item_is_lost() {
    let path = ShmPath::new("qreplace-spsc");
    let mut p = SpscProducer::<u64>::create(&path, 8).unwrap();
    for i in 1..=3 {
        p.try_push(&i).unwrap();
    }
    drop(p);
    let mut c = SpscConsumer::<u64>::open(&path).unwrap();
    assert_eq!(c.try_pop(), Ok(Some(1)));
    // The reviewer's repro: this create used to succeed, orphaning `c`.
    assert_in_use(SpscProducer::<u64>::create(&path, 8), &path, "consumer");
    assert!(!c.is_replaced());
    // The producer that opens the file reaches the consumer: 100 is not lost.
    let mut p = SpscProducer::<u64>::open(&path).unwrap();
    p.try_push(&100).unwrap();
    assert!(!p.is_replaced());
    let mut got = Vec::new();
    while let Some(v) = c.pop_blocking(Duration::from_millis(100)).unwrap() {
        got.push(v);
    }
    assert_eq!(got, [2, 3, 100]);
    // With only the producer left, create names it.
    drop(c);
    assert_in_use(SpscProducer::<u64>::create(&path, 8), &path, "producer");
    drop(p);
    // Every handle gone: the stale file is replaced by a fresh, empty queue.
    let mut p = SpscProducer::<u64>::create(&path, 8).unwrap();
    p.try_push(&7).unwrap();
    let mut c = SpscConsumer::<u64>::open(&path).unwrap();
    assert_eq!(c.try_pop(), Ok(Some(7)));
    assert_eq!(c.try_pop(), Ok(None));
}

#[test]
fn mpmc_create_refuses_a_file_a_handle_has_open() {
    let path = ShmPath::new("qreplace-mpmc");
    let q = MpmcQueue::<u64>::create(&path, 8).unwrap();
    for i in 1..=3 {
        q.try_push(&i).unwrap();
    }
    drop(q);
    let h = MpmcQueue::<u64>::open(&path).unwrap();
    let clone = h.clone();
    drop(h);
    // A clone keeps the handle's file, and its lock, alive.
    assert_in_use(MpmcQueue::<u64>::create(&path, 8), &path, "handle");
    clone.try_push(&100).unwrap();
    let mut got = Vec::new();
    while let (Some(v), _) = clone.try_pop().unwrap() {
        got.push(v);
    }
    assert_eq!(got, [1, 2, 3, 100]);
    drop(clone);
    let q = MpmcQueue::<u64>::create(&path, 8).unwrap();
    assert!(q.is_empty());
}

#[test]
fn a_removed_queue_file_is_reported_replaced() {
    let path = ShmPath::new("qreplace-removed");
    let mut p = SpscProducer::<u64>::create(&path, 8).unwrap();
    let c = SpscConsumer::<u64>::open(&path).unwrap();
    assert!(!p.is_replaced() && !c.is_replaced());
    std::fs::remove_file(path.path()).unwrap();
    assert!(p.is_replaced() && c.is_replaced());
    p.try_push(&1).unwrap();
    let q = MpmcQueue::<u64>::create(&path, 8).unwrap();
    let other = MpmcQueue::<u64>::open(&path).unwrap();
    assert!(!q.is_replaced() && !other.is_replaced());
    std::fs::remove_file(path.path()).unwrap();
    assert!(q.is_replaced() && other.is_replaced());
}
