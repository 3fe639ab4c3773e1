// One program written against ringfire's API the way its README writes it, compiled once with
// `rf` = ringfire and once with `rf` = ringwire (see ../common_subset.rs). Nothing here may
// name either crate directly.

use std::error::Error;
use std::path::Path;
use std::time::Duration;

use super::Tick;

fn tick(seq: u64) -> Tick {
    Tick {
        seq,
        bid: 1_000 + seq,
        ask: 1_001 + seq,
        asset: (seq % 7) as u32,
        flags: 0,
    }
}

/// Records, a lossless builder ring, start modes, a checkpoint, wait strategies, a blob ring
/// and a blackboard, each checked.
pub fn run(dir: &Path) -> Result<(), Box<dyn Error>> {
    // A plain ring: create, push, push_batch; attach, try_recv, recv_batch, recv_blocking.
    let path = dir.join("ticks");
    let mut producer = rf::RingProducer::<Tick>::create(&path, 1024)?;
    let mut consumer = rf::RingConsumer::<Tick>::attach(&path)?;
    producer.push(&tick(1));
    let batch: Vec<Tick> = (2..=10).map(tick).collect();
    producer.push_batch(&batch);
    producer.try_push(&tick(11))?;
    assert_eq!(consumer.try_recv(), Some(tick(1)));
    let mut buf = [tick(0); 4];
    assert_eq!(consumer.recv_batch(&mut buf), 4);
    assert_eq!(buf, [tick(2), tick(3), tick(4), tick(5)]);
    let mut spin = rf::BusySpin::new();
    assert_eq!(consumer.recv_blocking(&mut spin), tick(6));
    let mut backoff = rf::YieldBackoff::new(64);
    assert_eq!(consumer.recv_blocking(&mut backoff), tick(7));
    let mut futex = rf::FutexWait::new(100, Some(Duration::from_millis(5)));
    assert_eq!(consumer.recv_blocking(&mut futex), tick(8));
    assert_eq!(consumer.cursor(), 9);
    assert_eq!(consumer.lag(), 3);
    assert_eq!(consumer.lapped_count(), 0);
    assert!(consumer.commit_offset().is_err(), "no offset file was configured");
    assert_eq!(producer.sequence(), 11);
    assert_eq!(producer.capacity(), 1024);

    // A lossless ring from the builder; consumers from both builder forms.
    let path = dir.join("reliable");
    let mut producer = rf::RingProducerBuilder::new(64)
        .flow_control(rf::FlowControl::LosslessBackpressure)
        .max_readers(8)
        .build::<Tick, _>(&path)?;
    let mut latest = rf::RingConsumerBuilder::<Tick>::new()
        .start_mode(rf::ConsumerStartMode::Latest)
        .attach(&path)?;
    for s in 1..=3 {
        producer.push(&tick(s));
    }
    let mut oldest = rf::RingConsumer::<Tick>::builder()
        .start_from_oldest()
        .consumer_name("replay")
        .attach(&path)?;
    assert_eq!(oldest.try_recv(), Some(tick(1)));
    let mut from_two = rf::RingConsumer::<Tick>::builder()
        .start_from_sequence(2)
        .attach(&path)?;
    assert_eq!(from_two.try_recv(), Some(tick(2)));
    // `Latest` attached before anything was published starts at the first record.
    assert_eq!(latest.try_recv(), Some(tick(1)));
    let mut head = rf::RingConsumer::<Tick>::builder()
        .start_from_head()
        .attach(&path)?;
    let mut newest = rf::RingConsumer::<Tick>::builder()
        .start_from_latest()
        .attach(&path)?;
    assert_eq!(head.try_recv(), None);
    assert_eq!(newest.try_recv(), Some(tick(3)));
    producer.push(&tick(4));
    assert_eq!(head.try_recv(), Some(tick(4)));
    assert_eq!(newest.try_recv(), Some(tick(4)));

    // A consumer offset checkpoint, committed and resumed.
    let offsets = dir.join("worker1.offset");
    let mut worker = rf::RingConsumerBuilder::<Tick>::new()
        .start_mode(rf::ConsumerStartMode::Oldest)
        .offset_file(&offsets)
        .consumer_name("worker1")
        .attach(&path)?;
    assert_eq!(worker.try_recv(), Some(tick(1)));
    assert_eq!(worker.try_recv(), Some(tick(2)));
    worker.commit_offset()?;
    drop(worker);
    let mut resumed = rf::RingConsumerBuilder::<Tick>::new()
        .offset_file(&offsets)
        .consumer_name("worker1")
        .attach(&path)?;
    assert_eq!(resumed.try_recv(), Some(tick(3)));
    drop((latest, oldest, from_two, head, newest, resumed, producer));

    // Variable-length payloads.
    let path = dir.join("book");
    let mut producer = rf::BlobProducerBuilder::new(64, 1 << 16).build::<u32, _>(&path)?;
    let mut consumer = rf::BlobConsumer::<u32>::attach(&path)?;
    let json = br#"{"event":"snapshot","bids":[[82000.5,1.2]]}"#;
    let seq = producer.push(&42, json)?;
    assert_eq!(seq, 1);
    producer.push(&7, b"second")?;
    let mut meta = 0u32;
    let mut scratch = vec![0u8; 4096];
    let len = consumer.recv(&mut meta, &mut scratch)?;
    assert_eq!((len, meta), (Some(json.len()), 42));
    assert_eq!(&scratch[..json.len()], json);
    let seen = consumer.view(|symbol, bytes| (*symbol, bytes.to_vec()))?;
    assert_eq!(seen, Some((7, b"second".to_vec())));
    assert_eq!(consumer.recv(&mut meta, &mut scratch)?, None);
    assert_eq!(consumer.lapped_count(), 0);
    let path = dir.join("book2");
    let mut producer = rf::BlobProducer::<u32>::create(&path, 16, 4096)?;
    producer.push(&1, b"x")?;

    // A blackboard.
    let path = dir.join("state");
    let mut board = rf::BlackboardProducer::<Tick>::create(&path, 16)?;
    board.write(3, &tick(3))?;
    let reader = rf::BlackboardConsumer::<Tick>::attach(&path)?;
    assert_eq!(reader.read(3)?, Some(tick(3)));
    assert_eq!(reader.read(4)?, None);
    Ok(())
}

/// The async consumer: attach, then `recv().await` for records pushed before and after;
/// `from_consumer` around a consumer attached beforehand.
pub async fn run_async(dir: &Path) -> Result<(), Box<dyn Error>> {
    let path = dir.join("async");
    let mut producer = rf::RingProducer::<Tick>::create(&path, 64)?;
    producer.push(&tick(1));
    let mut consumer = rf::AsyncRingConsumer::<Tick>::attach(&path)?;
    // The same, wrapping a consumer attached beforehand.
    let mut wrapped =
        rf::AsyncRingConsumer::from_consumer(rf::RingConsumer::<Tick>::attach(&path)?);
    assert_eq!(consumer.recv().await, tick(1));
    let late = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        producer.push(&tick(2));
        producer
    });
    assert_eq!(consumer.recv().await, tick(2));
    assert_eq!(consumer.lapped_count(), 0);
    drop(late.join());
    assert_eq!(wrapped.recv().await, tick(1));
    assert_eq!(wrapped.recv().await, tick(2));
    Ok(())
}
