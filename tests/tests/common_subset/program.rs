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
    assert!(
        consumer.commit_offset().is_err(),
        "no offset file was configured"
    );
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

/// Receive status, jumps and seeks on a small lossy ring; headroom and reader lag on a
/// lossless one; ringfire's other attach forms and offset commits; each checked.
pub fn run_more_ring(dir: &Path) -> Result<(), Box<dyn Error>> {
    // A lossy ring of 8 without a registry: recv_status, laps, jumps, seek.
    let path = dir.join("more");
    let mut producer = rf::RingProducer::<Tick>::create(&path, 8)?;
    let mut consumer = rf::RingConsumer::<Tick>::attach(&path)?;
    assert_eq!(consumer.recv_status(), rf::RecvStatus::Empty);
    producer.push_batch(&[tick(1), tick(2), tick(3)]);
    assert_eq!(producer.published_sequence(), 3);
    assert_eq!(consumer.recv_status(), rf::RecvStatus::Ok(tick(1)));
    for s in 4..=20 {
        producer.push(&tick(s));
    }
    // write_seq 20 holds 13..=20; the cursor was at 2: 2..=12 are gone.
    assert_eq!(
        consumer.recv_status(),
        rf::RecvStatus::Lapped {
            skipped: 11,
            item: tick(13)
        }
    );
    assert_eq!(consumer.recv_status(), rf::RecvStatus::Ok(tick(14)));
    assert_eq!(consumer.lapped_count(), 11);
    // Jump to the newest: 15..=19 skipped, 20 delivered next.
    assert_eq!(consumer.jump_to_latest(), 5);
    assert_eq!(consumer.cursor(), 20);
    assert_eq!(consumer.lapped_count(), 16);
    assert_eq!(consumer.try_recv(), Some(tick(20)));
    assert_eq!(consumer.jump_to_latest(), 0);
    assert_eq!(consumer.jump_to_oldest(), 0);
    for s in 21..=30 {
        producer.push(&tick(s));
    }
    // write_seq 30 holds 23..=30; the cursor is at 21: 21 and 22 are gone.
    assert_eq!(consumer.jump_to_oldest(), 2);
    assert_eq!(consumer.lapped_count(), 18);
    assert_eq!(consumer.try_recv(), Some(tick(23)));
    assert_eq!(consumer.seek(25), 0);
    assert_eq!(consumer.try_recv(), Some(tick(25)));
    assert_eq!(consumer.seek(5), 18);
    assert_eq!(consumer.cursor(), 23);
    assert_eq!(consumer.lapped_count(), 36);
    assert_eq!(consumer.lag(), 8);
    // Without a registry the producer sees no reader: full headroom, no lag, no wait.
    assert_eq!(producer.flow_control(), rf::FlowControl::LossyLatestWins);
    assert_eq!(producer.headroom(), 8);
    assert_eq!(producer.reader_lag(), 0);
    producer.wait_for_headroom();
    assert_eq!(producer.published_sequence(), producer.sequence());

    // Other attach forms, offset paths and commits.
    let mut latest = rf::RingConsumer::<Tick>::attach_latest(&path)?;
    assert_eq!(latest.try_recv(), Some(tick(30)));
    assert!(latest.offset_path().is_none());
    let offsets = dir.join("more.offset");
    let mut resumable = rf::RingConsumer::<Tick>::attach_from_offset(&path, &offsets)?;
    assert_eq!(resumable.offset_path(), Some(offsets.as_path()));
    assert_eq!(
        resumable.try_recv(),
        Some(tick(30)),
        "nothing saved: the newest"
    );
    resumable.commit_offset()?;
    producer.push(&tick(31));
    let elsewhere = dir.join("elsewhere.offset");
    resumable.commit_offset_to(&elsewhere, "elsewhere")?;
    assert!(
        resumable.commit_offset_to(&path, "x").is_err(),
        "the ring is no offset file"
    );
    drop(resumable);
    let mut resumed = rf::RingConsumer::<Tick>::attach_from_offset(&path, &offsets)?;
    assert_eq!(resumed.try_recv(), Some(tick(31)));
    let mut other = rf::RingConsumer::<Tick>::builder()
        .offset_shm(&elsewhere)
        .attach(&path)?;
    assert_eq!(other.offset_path(), Some(elsewhere.as_path()));
    assert_eq!(other.try_recv(), Some(tick(31)));
    let mut from_options = rf::RingConsumer::<Tick>::attach_with_options(
        &path,
        rf::RingConsumerBuilder::new().start_from_sequence(29),
    )?;
    assert_eq!(from_options.try_recv(), Some(tick(29)));
    drop((consumer, latest, resumed, other, from_options, producer));

    // A lossless ring: the producer's view of its slowest registered reader.
    let path = dir.join("more-lossless");
    let mut producer = rf::RingProducer::<Tick>::create_with_options(
        &path,
        rf::RingProducerBuilder::new(8).flow_control(rf::FlowControl::LosslessBackpressure),
    )?;
    assert_eq!(
        producer.flow_control(),
        rf::FlowControl::LosslessBackpressure
    );
    assert_eq!(producer.headroom(), 8);
    assert_eq!(producer.reader_lag(), 0);
    let mut slow = rf::RingConsumer::<Tick>::attach(&path)?;
    for s in 1..=5 {
        producer.push(&tick(s));
    }
    assert_eq!(producer.headroom(), 3);
    assert_eq!(producer.reader_lag(), 5);
    assert_eq!(slow.try_recv(), Some(tick(1)));
    assert_eq!(slow.try_recv(), Some(tick(2)));
    assert_eq!(producer.headroom(), 5);
    assert_eq!(producer.reader_lag(), 3);
    let mut s = 6;
    while producer.try_push(&tick(s)).is_ok() {
        s += 1;
    }
    assert_eq!(producer.sequence(), 10);
    assert_eq!(producer.published_sequence(), 10);
    assert_eq!(producer.headroom(), 0);
    assert_eq!(producer.reader_lag(), 8);
    // wait_for_headroom returns once the reader moves on (here from another thread).
    let reader = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        let first = slow.try_recv();
        (first, slow)
    });
    producer.wait_for_headroom();
    let (first, slow) = reader.join().map_err(|_| "reader thread panicked")?;
    assert_eq!(first, Some(tick(3)));
    assert_eq!(producer.headroom(), 1);
    producer.push(&tick(11));
    assert_eq!(producer.headroom(), 0);
    drop(slow);
    // No registered reader left: nothing to wait for.
    assert_eq!(producer.headroom(), 8);
    producer.wait_for_headroom();
    Ok(())
}

/// Blob ring extras (receive status through a lap, the producer's view of its reader,
/// `push_with`, rings without meta), a blackboard's `read_copy` and a checkpoint's time
/// stamp, each checked.
pub fn run_more_blob(dir: &Path) -> Result<(), Box<dyn Error>> {
    // Receive status: a 4-slot ring lapped by the producer.
    let path = dir.join("blob-status");
    let mut producer = rf::BlobProducer::<u32>::create(&path, 4, 4096)?;
    let mut consumer = rf::BlobConsumer::<u32>::attach(&path)?;
    let mut meta = 0u32;
    let mut buf = vec![0u8; 256];
    assert_eq!(
        consumer.recv_status(&mut meta, &mut buf)?,
        rf::BlobRecvStatus::Empty
    );
    assert_eq!(
        (producer.min_reader_seq(), producer.headroom()),
        (Some(1), 4)
    );
    producer.push(&1, b"one")?;
    assert_eq!(producer.reader_lag(), 1);
    assert_eq!(
        consumer.recv_status(&mut meta, &mut buf)?,
        rf::BlobRecvStatus::Ok { payload_len: 3 }
    );
    assert_eq!((meta, &buf[..3]), (1, &b"one"[..]));
    // 2..=11 into four slots: the reader at 2 skips 2..=7 and gets 8.
    for n in 2..=11u32 {
        producer.push(&n, &vec![n as u8; n as usize])?;
    }
    assert_eq!(
        (producer.reader_lag(), producer.headroom()),
        (10, 0),
        "lapped"
    );
    assert_eq!(
        consumer.recv_status(&mut meta, &mut buf)?,
        rf::BlobRecvStatus::Lapped {
            skipped: 6,
            payload_len: 8
        }
    );
    assert_eq!((meta, &buf[..8]), (8, &[8u8; 8][..]));
    assert_eq!(consumer.lapped_count(), 6);
    // The consumer's registry slot now says 9: 9, 10 and 11 are unread.
    assert_eq!(producer.min_reader_seq(), Some(9));
    assert_eq!((producer.reader_lag(), producer.headroom()), (3, 1));
    for n in 9..=11u32 {
        assert_eq!(
            consumer.recv_status(&mut meta, &mut buf)?,
            rf::BlobRecvStatus::Ok {
                payload_len: n as usize
            }
        );
        assert_eq!(meta, n);
    }
    assert_eq!(
        consumer.recv_status(&mut meta, &mut buf)?,
        rf::BlobRecvStatus::Empty
    );
    assert_eq!(producer.min_reader_seq(), Some(12));
    assert_eq!((producer.reader_lag(), producer.headroom()), (0, 4));
    drop(consumer);
    assert_eq!(producer.min_reader_seq(), None);
    assert_eq!((producer.reader_lag(), producer.headroom()), (0, 4));

    // `push_with`: the closure writes the payload; a payload longer than the arena is an
    // error and publishes nothing.
    let path = dir.join("blob-fill");
    let mut producer = rf::BlobProducer::<u32>::create(&path, 16, 4096)?;
    let mut consumer = rf::BlobConsumer::<u32>::attach(&path)?;
    let (seq, written) = producer.push_with(&77, 5, |payload| {
        payload.copy_from_slice(b"hello");
        payload.len()
    })?;
    assert_eq!((seq, written), (1, 5));
    let mut ran = false;
    assert!(producer.push_with(&78, 4097, |_| ran = true).is_err());
    assert!(!ran);
    assert_eq!(producer.sequence(), 1);
    let (seq, ()) = producer.push_with(&79, 4096, |payload| payload.fill(9))?;
    assert_eq!(seq, 2);
    let mut big = vec![0u8; 4096];
    // The full-arena blob overwrote "hello": skipped, then the big one arrives.
    assert_eq!(
        consumer.recv_status(&mut meta, &mut big)?,
        rf::BlobRecvStatus::Lapped {
            skipped: 1,
            payload_len: 4096
        }
    );
    assert_eq!(meta, 79);
    assert!(big.iter().all(|&b| b == 9));
    producer.push_with(&80, 5, |payload| payload.copy_from_slice(b"world"))?;
    assert_eq!(consumer.recv(&mut meta, &mut buf)?, Some(5));
    assert_eq!((meta, &buf[..5]), (80, &b"world"[..]));
    assert_eq!(consumer.recv(&mut meta, &mut buf)?, None);

    // A blob ring without meta.
    let path = dir.join("blob-raw");
    let mut producer = rf::BlobProducer::<()>::create(&path, 8, 1024)?;
    let mut consumer = rf::BlobConsumer::<()>::attach(&path)?;
    assert_eq!(consumer.recv_payload(&mut buf)?, None);
    assert_eq!(producer.push_payload(b"raw bytes")?, 1);
    assert_eq!(producer.push_payload(&[5; 100])?, 2);
    assert_eq!(consumer.recv_payload(&mut buf)?, Some(9));
    assert_eq!(&buf[..9], b"raw bytes");
    assert!(
        consumer.recv_payload(&mut buf[..99]).is_err(),
        "buffer too small"
    );
    assert_eq!(consumer.recv_payload(&mut buf)?, Some(100));
    assert_eq!(&buf[..100], &[5u8; 100][..]);
    assert_eq!(consumer.recv_payload(&mut buf)?, None);

    // A blackboard read into the caller's value.
    let path = dir.join("board");
    let mut board = rf::BlackboardProducer::<Tick>::create(&path, 4)?;
    let reader = rf::BlackboardConsumer::<Tick>::attach(&path)?;
    let mut value = tick(0);
    assert!(!reader.read_copy(1, &mut value)?, "never written");
    assert_eq!(value, tick(0));
    board.write(1, &tick(5))?;
    assert!(reader.read_copy(1, &mut value)?);
    assert_eq!(value, tick(5));
    assert!(reader.read_copy(4, &mut value).is_err(), "key out of range");
    assert_eq!(value, tick(5));

    // A checkpoint's wall-clock stamp: set on creation, moved by each save.
    let checkpoint = rf::OffsetCheckpoint::open_or_create(dir.join("stamp.offset"), "stamp")?;
    let created = checkpoint.updated_nanos();
    assert!(created > 0);
    std::thread::sleep(Duration::from_millis(2));
    checkpoint.save(3);
    assert!(checkpoint.updated_nanos() > created);
    assert_eq!(checkpoint.load(), Some(3));
    Ok(())
}

/// The async consumer's other calls: ringfire's tuning knobs, receive with the loss count,
/// status, jumps, lag and batches.
pub async fn run_more_async(dir: &Path) -> Result<(), Box<dyn Error>> {
    let path = dir.join("async-more");
    let mut producer = rf::RingProducer::<Tick>::create(&path, 8)?;
    let mut consumer =
        rf::AsyncRingConsumer::from_consumer(rf::RingConsumer::<Tick>::attach(&path)?)
            .with_spins(16)
            .with_yields(4)
            .with_idle_sleep(Duration::from_micros(200));
    assert_eq!(consumer.capacity(), 8);
    assert_eq!(consumer.recv_status(), rf::RecvStatus::Empty);
    for s in 1..=20 {
        producer.push(&tick(s));
    }
    assert_eq!(consumer.lag(), 20);
    // 13..=20 are retained: 1..=12 are lost before the first record.
    assert_eq!(consumer.recv_detailed().await, (tick(13), 12));
    assert_eq!(consumer.recv_status(), rf::RecvStatus::Ok(tick(14)));
    assert_eq!(consumer.jump_to_latest(), 5);
    assert_eq!(consumer.recv().await, tick(20));
    assert_eq!(consumer.jump_to_oldest(), 0);
    assert_eq!(consumer.lapped_count(), 17);
    let late = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        producer.push_batch(&[tick(21), tick(22), tick(23)]);
        producer
    });
    let mut buf = [tick(0); 4];
    let mut got = Vec::new();
    while got.len() < 3 {
        let n = consumer.recv_batch(&mut buf).await;
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, [tick(21), tick(22), tick(23)]);
    drop(late.join());
    Ok(())
}
