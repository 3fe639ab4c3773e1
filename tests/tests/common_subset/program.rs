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

    // A blackboard, its key count a `usize` as ringfire takes and gives it.
    let path = dir.join("state");
    let keys: usize = 16;
    let mut board = rf::BlackboardProducer::<Tick>::create(&path, keys)?;
    board.write(3, &tick(3))?;
    let reader = rf::BlackboardConsumer::<Tick>::attach(&path)?;
    assert_eq!(reader.read(3)?, Some(tick(3)));
    assert_eq!(reader.read(4)?, None);
    let (written, read): (usize, usize) = (board.slot_count(), reader.slot_count());
    assert_eq!((written, read), (keys, keys));
    assert!(reader.read(keys).is_err(), "key out of range");
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

/// The reader registry: a producer's and a consumer's view of it, a consumer's own
/// registration, a blob producer's list of readers; each checked.
pub fn run_more_registry(dir: &Path) -> Result<(), Box<dyn Error>> {
    let me = std::process::id();
    let info = |slot_index, name: &str, cursor_seq, lag| rf::ReaderInfo {
        slot_index,
        pid: me,
        name: name.to_string(),
        cursor_seq,
        lag,
    };
    // A lossy ring without readers has no registry.
    let path = dir.join("registry-none");
    let producer = rf::RingProducer::<Tick>::create(&path, 8)?;
    let consumer = rf::RingConsumer::<Tick>::attach(&path)?;
    assert!(producer.registry().is_none());
    assert!(consumer.registry().is_none() && consumer.registration().is_none());
    drop((consumer, producer));

    // A ring with four registry slots, a reader that has caught up and one that has not.
    let path = dir.join("registry");
    let mut producer = rf::RingProducerBuilder::new(16)
        .max_readers(4)
        .build::<Tick, _>(&path)?;
    for s in 1..=6 {
        producer.push(&tick(s));
    }
    let mut fast = rf::RingConsumer::<Tick>::builder()
        .start_from_oldest()
        .consumer_name("fast")
        .attach(&path)?;
    let slow = rf::RingConsumer::<Tick>::attach(&path)?;
    while fast.try_recv().is_some() {}
    let registry = producer.registry().ok_or("the ring has a registry")?;
    assert_eq!(registry.capacity(), 4);
    let readers = registry.active_readers(producer.sequence());
    assert_eq!(readers, [info(0, "fast", 7, 0), info(1, "consumer", 1, 6)]);
    assert_eq!(
        slow.registry().map(|r| r.active_readers(6)),
        Some(readers),
        "a consumer sees the same"
    );
    assert_eq!(
        (registry.min_cursor(), registry.min_reader_seq()),
        (Some(1), Some(1))
    );
    assert_eq!((registry.reader_lag(6), registry.headroom(6, 16)), (6, 10));
    assert_eq!(registry.prune_dead_readers(), 0);
    // A registration is the slot listed; update_cursor publishes a cursor for it.
    let registration = fast.registration().ok_or("fast is registered")?;
    assert_eq!(registration.slot_index(), 0);
    assert_eq!(slow.registration().map(|r| r.slot_index()), Some(1));
    registration.update_cursor(4);
    assert_eq!(registry.active_readers(6)[0], info(0, "fast", 4, 3));
    drop(slow);
    assert_eq!(registry.active_readers(6), [info(0, "fast", 4, 3)]);
    assert_eq!((registry.reader_lag(6), registry.headroom(6, 16)), (3, 13));
    drop(fast);
    assert!(registry.active_readers(6).is_empty());
    assert_eq!(registry.min_reader_seq(), None);

    // A blob producer lists its readers.
    let path = dir.join("registry-blob");
    let mut producer = rf::BlobProducer::<u32>::create(&path, 8, 1024)?;
    let mut consumer = rf::BlobConsumer::<u32>::attach(&path)?;
    producer.push(&1, b"one")?;
    producer.push(&2, b"two")?;
    let mut meta = 0u32;
    let mut buf = [0u8; 16];
    assert_eq!(consumer.recv(&mut meta, &mut buf)?, Some(3));
    assert_eq!(producer.active_readers(), [info(0, "anonymous", 2, 1)]);
    assert_eq!(
        consumer.registry().map(|r| r.active_readers(2)),
        Some(producer.active_readers())
    );
    drop(consumer);
    assert!(producer.active_readers().is_empty());
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

/// The lossy MPMC ring: a creator and an attached producer, competing consumers, the three
/// wait strategies, exact loss counts on a small ring, cleanup modes and the creator's lock,
/// record types refused, threads sharing one producer, a sleeper woken by a push; each
/// checked.
pub fn run_more_mpmc(dir: &Path) -> Result<(), Box<dyn Error>> {
    // A creator and an attached producer; two consumers compete for the tickets.
    let path = dir.join("mpmc");
    let producer = rf::MpmcProducer::<Tick>::create(&path, 8)?;
    assert_eq!(producer.capacity(), 8);
    assert!(
        rf::MpmcProducer::<Tick>::create(&path, 8).is_err(),
        "the creator holds the ring's lock"
    );
    let second = rf::MpmcProducer::<Tick>::attach(&path)?;
    assert_eq!(second.capacity(), 8);
    let mut a = rf::MpmcQueueConsumer::<Tick>::attach(&path)?;
    let mut b = rf::MpmcQueueConsumer::<Tick>::attach(&path)?;
    assert_eq!(a.try_recv(), None);
    assert_eq!(producer.push(&tick(1)), 1);
    assert_eq!(second.push(&tick(2)), 2);
    assert_eq!(producer.push(&tick(3)), 3);
    assert_eq!(b.try_recv(), Some(tick(1)));
    assert_eq!(a.try_recv(), Some(tick(2)));
    assert_eq!(b.try_recv(), Some(tick(3)));
    assert_eq!((a.try_recv(), b.try_recv()), (None, None));

    // The wait strategies, on records already published.
    for s in 4..=6 {
        assert_eq!(second.push(&tick(s)), s);
    }
    assert_eq!(a.recv_blocking(&mut rf::BusySpin::new()), tick(4));
    assert_eq!(b.recv_blocking(&mut rf::YieldBackoff::new(64)), tick(5));
    let mut futex = rf::FutexWait::new(100, Some(Duration::from_millis(5)));
    assert_eq!(a.recv_blocking(&mut futex), tick(6));

    // 20 more pushes into 8 slots: tickets 7..=26, of which only 19..=26 are still there.
    // The first consumer to look skips the other 12 in one step and counts them.
    for s in 7..=26 {
        assert_eq!(producer.push(&tick(s)), s);
    }
    assert_eq!(a.try_recv(), Some(tick(19)));
    assert_eq!(a.dropped_count(), 12);
    assert_eq!(b.try_recv(), Some(tick(20)));
    assert_eq!(b.dropped_count(), 0);
    let mut rest = Vec::new();
    while let Some(t) = a.try_recv() {
        rest.push(t);
        if let Some(t) = b.try_recv() {
            rest.push(t);
        }
    }
    assert_eq!(rest, (21..=26).map(tick).collect::<Vec<_>>());
    assert_eq!((a.dropped_count(), b.dropped_count()), (12, 0));

    // Cleanup: an attached producer leaves the file; the creator unlinks it on drop.
    drop(second);
    assert!(path.exists());
    drop((a, b));
    drop(producer);
    assert!(!path.exists(), "the creator unlinks the ring");

    // Persistent: the ring outlives its creator; a new creator replaces it with a fresh one.
    let mut keep = rf::MpmcProducer::<Tick>::create(&path, 16)?;
    keep.set_cleanup_mode(rf::CleanupMode::Persistent);
    assert_eq!(keep.push(&tick(1)), 1);
    drop(keep);
    assert!(path.exists());
    let mut late = rf::MpmcQueueConsumer::<Tick>::attach(&path)?;
    assert_eq!(late.try_recv(), Some(tick(1)));
    let fresh = rf::MpmcProducer::<Tick>::create(&path, 16)?;
    assert_eq!(fresh.push(&tick(2)), 1, "a fresh ring starts at ticket 1");
    assert_eq!(
        late.try_recv(),
        None,
        "the old mapping is the replaced ring"
    );
    let mut on_fresh = rf::MpmcQueueConsumer::<Tick>::attach(&path)?;
    assert_eq!(on_fresh.try_recv(), Some(tick(2)));
    // An attached producer told to unlink does so.
    let mut joiner = rf::MpmcProducer::<Tick>::attach(&path)?;
    joiner.set_cleanup_mode(rf::CleanupMode::UnlinkOnDrop);
    drop(joiner);
    assert!(!path.exists());
    drop((fresh, late, on_fresh));

    // Refused: another record stride, another type of the same size, a capacity that is
    // not a power of two.
    let path = dir.join("mpmc-typed");
    let _owner = rf::MpmcProducer::<Tick>::create(&path, 8)?;
    assert!(rf::MpmcQueueConsumer::<u64>::attach(&path).is_err());
    assert!(rf::MpmcQueueConsumer::<[u8; 32]>::attach(&path).is_err());
    assert!(rf::MpmcProducer::<[u8; 32]>::attach(&path).is_err());
    assert!(rf::MpmcProducer::<Tick>::create(dir.join("mpmc-odd"), 6).is_err());
    assert!(!dir.join("mpmc-odd").exists());
    // A broadcast ring has no tickets: ringwire refuses to attach a queue consumer, and the
    // one ringfire attaches never receives anything.
    let path = dir.join("mpmc-broadcast");
    let mut broadcast = rf::RingProducer::<Tick>::create(&path, 8)?;
    broadcast.push(&tick(1));
    if let Ok(mut c) = rf::MpmcQueueConsumer::<Tick>::attach(&path) {
        assert_eq!(c.try_recv(), None);
    }

    // Threads: two share one producer (push takes &self), two consumers compete. The ring
    // holds every record, so nothing is lost and each record arrives exactly once.
    let path = dir.join("mpmc-threads");
    let producer = rf::MpmcProducer::<Tick>::create(&path, 1024)?;
    let consumers = [
        rf::MpmcQueueConsumer::<Tick>::attach(&path)?,
        rf::MpmcQueueConsumer::<Tick>::attach(&path)?,
    ];
    let total = std::sync::atomic::AtomicUsize::new(0);
    let t0 = std::time::Instant::now();
    let mut got: Vec<Tick> = std::thread::scope(|s| {
        let (producer, total) = (&producer, &total);
        let readers: Vec<_> = consumers
            .into_iter()
            .map(|mut c| {
                s.spawn(move || {
                    let mut mine = Vec::new();
                    while total.load(std::sync::atomic::Ordering::SeqCst) < 400 {
                        assert!(t0.elapsed() < Duration::from_secs(30), "consumers stuck");
                        match c.try_recv() {
                            Some(t) => {
                                mine.push(t);
                                total.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            }
                            None => std::thread::yield_now(),
                        }
                    }
                    assert_eq!(c.dropped_count(), 0);
                    mine
                })
            })
            .collect();
        for p in 0..2u64 {
            s.spawn(move || {
                for i in 0..200 {
                    producer.push(&tick(p * 1_000 + i));
                }
            });
        }
        readers
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    got.sort_by_key(|t| t.seq);
    let want: Vec<Tick> = (0..2u64)
        .flat_map(|p| (0..200).map(move |i| tick(p * 1_000 + i)))
        .collect();
    assert_eq!(got, want);

    // A sleeping consumer is woken by a push from another thread.
    let path = dir.join("mpmc-wake");
    let producer = rf::MpmcProducer::<Tick>::create(&path, 8)?;
    let mut consumer = rf::MpmcQueueConsumer::<Tick>::attach(&path)?;
    let woken = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(20));
            producer.push(&tick(42));
        });
        consumer.recv_blocking(&mut rf::FutexWait::default())
    });
    assert_eq!(woken, tick(42));
    assert_eq!(consumer.dropped_count(), 0);
    Ok(())
}

/// The multiplexer over three rings: channel numbers and names, round-robin order across
/// unequal backlogs (and after a channel is added), priority order, batches, a lapped
/// channel, attach errors and access to each channel's consumer; each checked.
pub fn run_more_mux(dir: &Path) -> Result<(), Box<dyn Error>> {
    let paths: Vec<_> = ["mux-a", "mux-b", "mux-c", "mux-d"]
        .iter()
        .map(|n| dir.join(n))
        .collect();
    let mut producers = Vec::new();
    for p in &paths[..3] {
        producers.push(rf::RingProducer::<Tick>::create(p, 64)?);
    }
    // Channel 3's ring holds 8: it laps its reader.
    producers.push(rf::RingProducer::<Tick>::create(&paths[3], 8)?);

    let mut mux = rf::RingMultiplexer::<Tick>::default();
    assert!(mux.is_empty());
    assert_eq!(mux.try_recv_any(), None);
    assert_eq!(mux.try_recv_priority(), None);
    assert!(mux.recv_batch_any(4).is_empty());
    assert_eq!(mux.add(rf::RingConsumer::<Tick>::attach(&paths[0])?), 0);
    assert_eq!(
        mux.add_named("b", rf::RingConsumer::<Tick>::attach(&paths[1])?),
        1
    );
    assert_eq!(mux.attach_named("c", &paths[2])?, 2);
    assert!(mux.attach(dir.join("missing")).is_err());
    assert!(mux.attach_named("gone", dir.join("missing")).is_err());
    assert_eq!(mux.len(), 3);
    assert_eq!(mux.channel_name(0), Some("channel_0"));
    assert_eq!(mux.channel_name(1), Some("b"));
    assert_eq!(mux.channel_name(2), Some("c"));
    assert_eq!(mux.channel_name(3), None);
    assert!(mux.consumer(3).is_none());

    // Backlogs of 3, 1 and 2: one record per channel per turn.
    for (ch, seqs) in [(0, 1..=3), (1, 11..=11), (2, 21..=22)] {
        for s in seqs {
            producers[ch].push(&tick(s));
        }
    }
    assert_eq!(mux.try_recv_any(), Some((0, tick(1))));
    assert_eq!(mux.try_recv_any(), Some((1, tick(11))));
    assert_eq!(
        mux.recv_batch_any(10),
        [(2, tick(21)), (0, tick(2)), (2, tick(22)), (0, tick(3))]
    );
    assert_eq!(mux.try_recv_any(), None);

    // Priority: the lowest index first, whatever the turn; the turn stays at channel 1.
    producers[2].push(&tick(23));
    producers[1].push(&tick(12));
    producers[0].push(&tick(4));
    assert_eq!(mux.try_recv_priority(), Some((0, tick(4))));
    assert_eq!(mux.try_recv_priority(), Some((1, tick(12))));
    producers[0].push(&tick(5));
    producers[1].push(&tick(13));
    assert_eq!(mux.try_recv_any(), Some((1, tick(13))));
    assert_eq!(mux.try_recv_any(), Some((2, tick(23))));
    // Channel 2 was the last of three: the turn wraps to 0 and stays there once a fourth
    // channel is added.
    assert_eq!(mux.attach(&paths[3])?, 3);
    for s in 31..=50 {
        producers[3].push(&tick(s));
    }
    assert_eq!(mux.try_recv_any(), Some((0, tick(5))));
    // 31..=42 were overwritten: skipped, counted by channel 3's consumer.
    assert_eq!(mux.try_recv_any(), Some((3, tick(43))));
    assert_eq!(mux.consumer(3).map(|c| c.lapped_count()), Some(12));
    assert_eq!(mux.consumer(0).map(|c| c.lapped_count()), Some(0));
    let c3 = mux.consumer_mut(3).ok_or("channel 3")?;
    assert_eq!(c3.try_recv(), Some(tick(44)));
    assert_eq!(c3.cursor(), 15);
    let rest = mux.recv_batch_any(100);
    assert_eq!(rest, (45..=50).map(|s| (3, tick(s))).collect::<Vec<_>>());
    assert_eq!(mux.try_recv_any(), None);
    Ok(())
}

/// The async multiplexer: channels added the four ways, `try_recv_any` and `recv_any`
/// sharing the turn, a wait woken by a publish from another thread, and a pending
/// `recv_any` dropped without losing the record published meanwhile; each checked.
pub async fn run_more_mux_async(dir: &Path) -> Result<(), Box<dyn Error>> {
    let paths: Vec<_> = ["amux-a", "amux-b", "amux-c", "amux-d"]
        .iter()
        .map(|n| dir.join(n))
        .collect();
    let mut producers = Vec::new();
    for p in &paths {
        producers.push(rf::RingProducer::<Tick>::create(p, 64)?);
    }
    let mut mux = rf::AsyncRingMultiplexer::<Tick>::new();
    assert!(mux.is_empty());
    assert_eq!(mux.try_recv_any(), None);
    assert_eq!(mux.attach(&paths[0])?, 0);
    assert_eq!(mux.attach_named("b", &paths[1])?, 1);
    let c = rf::RingConsumer::<Tick>::attach(&paths[2])?;
    assert_eq!(mux.add(rf::AsyncRingConsumer::from_consumer(c)), 2);
    let d = rf::AsyncRingConsumer::<Tick>::attach(&paths[3])?
        .with_idle_sleep(Duration::from_micros(200));
    assert_eq!(mux.add_named("d", d), 3);
    assert!(mux.attach(dir.join("missing")).is_err());
    assert_eq!(mux.len(), 4);
    assert_eq!(mux.channel_name(1), Some("b"));
    assert_eq!(mux.channel_name(2), Some("channel_2"));
    assert_eq!(mux.channel_name(3), Some("d"));
    assert_eq!(mux.channel_name(4), None);

    producers[0].push_batch(&[tick(1), tick(2)]);
    producers[3].push(&tick(31));
    assert_eq!(mux.recv_any().await, (0, tick(1)));
    assert_eq!(mux.try_recv_any(), Some((3, tick(31))));
    assert_eq!(mux.recv_any().await, (0, tick(2)));
    assert_eq!(mux.try_recv_any(), None);

    // A wait ended by a publish on channel 2 from another thread.
    let mut p2 = producers.remove(2);
    let late = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        p2.push(&tick(21));
        p2
    });
    assert_eq!(mux.recv_any().await, (2, tick(21)));
    let mut p2 = late.join().map_err(|_| "publisher panicked")?;

    // Polled once (pending), a record published, the future dropped unpolled: the next
    // recv_any has it.
    {
        let mut pending = std::pin::pin!(mux.recv_any());
        let first = std::future::poll_fn(|cx| {
            std::task::Poll::Ready(std::future::Future::poll(pending.as_mut(), cx).is_pending())
        })
        .await;
        assert!(first, "nothing was published yet");
        p2.push(&tick(22));
    }
    assert_eq!(mux.recv_any().await, (2, tick(22)));
    assert_eq!(mux.try_recv_any(), None);
    Ok(())
}

/// Serves a ring over loopback TCP with `ReplicaServer::serve_one` and mirrors it in-process
/// with `Mirror`: first from the oldest record, then again resuming the same mirror ring;
/// a consumer on the mirror ring sees every record in order.
pub fn run_more_replica(dir: &Path) -> Result<(), Box<dyn Error>> {
    // Stops a running mirror if an assertion fails, so its threads end with the test.
    struct StopMirror(rf::MirrorHandle);
    impl Drop for StopMirror {
        fn drop(&mut self) {
            let _ = self.0.shutdown();
        }
    }
    let within = |what: &str, done: &dyn Fn() -> bool| {
        let t0 = std::time::Instant::now();
        while !done() {
            assert!(t0.elapsed() < Duration::from_secs(10), "timed out: {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    // serve_one returns once its mirror hung up (ringfire may report the hang-up).
    let served_out = |served: std::thread::JoinHandle<Result<(), String>>| {
        within("serve_one to return", &|| served.is_finished());
        if let Err(e) = served.join().expect("server thread") {
            assert!(
                e.contains("reset") || e.contains("Broken pipe"),
                "serve_one: {e}"
            );
        }
    };
    let source = dir.join("replica-source");
    let copy = dir.join("replica-copy");
    let mut producer = rf::RingProducer::<Tick>::create(&source, 4096)?;
    for s in 1..=100 {
        producer.push(&tick(s));
    }

    // First connection: everything the source holds, then live records.
    let server = rf::ReplicaServer::bind(&source, (std::net::Ipv4Addr::LOCALHOST, 0))?
        .batch(32)
        .linger(Some(Duration::from_micros(100)))
        .duplicate(1)
        .spin(false);
    assert_eq!(server.ring_path(), source.as_path());
    let addr = server.local_addr()?;
    assert!(addr.ip().is_loopback() && addr.port() != 0);
    let served = std::thread::spawn(move || server.serve_one().map_err(|e| e.to_string()));
    let mut mirror = rf::Mirror::builder()
        .start(rf::MirrorStart::Oldest)
        .nak_timeout(Duration::from_millis(20))
        .file_mode(0o600)
        .connect(addr, &copy)?;
    assert_eq!(mirror.first_sequence(), 1);
    assert!(!mirror.resumed());
    assert!(!mirror.is_multicast() && !mirror.is_unicast());
    assert_eq!(mirror.path(), copy.as_path());
    assert_eq!(mirror.peer_addr()?, addr);
    let geometry: rf::Geometry = mirror.geometry();
    assert_eq!(geometry.capacity, 4096);
    assert_eq!(geometry.payload_len(), std::mem::size_of::<Tick>());
    assert!(!geometry.has_arena());
    let stop = StopMirror(mirror.handle()?);
    let runner = std::thread::spawn(move || {
        let r = mirror.run().map_err(|e| e.to_string());
        (r, mirror)
    });
    let mut reader = rf::RingConsumer::<Tick>::builder()
        .start_from_oldest()
        .attach(&copy)?;
    let expect = |to: u64, reader: &mut rf::RingConsumer<Tick>, next: &mut u64| {
        let t0 = std::time::Instant::now();
        while *next <= to {
            match reader.try_recv() {
                Some(t) => {
                    assert_eq!(t, tick(*next));
                    *next += 1;
                }
                None => {
                    assert!(t0.elapsed() < Duration::from_secs(10), "record {next} late");
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
    };
    let mut next = 1;
    expect(100, &mut reader, &mut next);
    for s in 101..=3000 {
        producer.push(&tick(s));
    }
    expect(3000, &mut reader, &mut next);
    stop.0.shutdown()?;
    let (ran, mirror) = runner.join().expect("mirror thread");
    assert_eq!(ran, Ok(()));
    assert_eq!(mirror.sequence(), 3000);
    assert!(mirror.source_sequence() >= 3000);
    assert_eq!(mirror.gaps(), 0);
    assert!(mirror.frames() > 0);
    assert_eq!(
        (mirror.datagrams(), mirror.naks(), mirror.retransmitted()),
        (0, 0, 0)
    );
    drop(mirror);
    served_out(served);

    // Second connection: the same mirror ring continues where it stopped.
    let server = rf::ReplicaServer::bind(&source, "127.0.0.1:0")?;
    let addr = server.local_addr()?;
    let served = std::thread::spawn(move || server.serve_one().map_err(|e| e.to_string()));
    let mut mirror = rf::Mirror::builder()
        .start(rf::MirrorStart::Resume)
        .connect(addr, &copy)?;
    assert!(mirror.resumed());
    assert_eq!(mirror.first_sequence(), 3001);
    assert_eq!(mirror.sequence(), 3000);
    let stop = StopMirror(mirror.handle()?);
    let runner = std::thread::spawn(move || {
        let r = mirror.run().map_err(|e| e.to_string());
        (r, mirror)
    });
    for s in 3001..=3500 {
        producer.push(&tick(s));
    }
    expect(3500, &mut reader, &mut next);
    stop.0.shutdown()?;
    let (ran, mirror) = runner.join().expect("mirror thread");
    assert_eq!(ran, Ok(()));
    assert_eq!((mirror.sequence(), mirror.gaps()), (3500, 0));
    drop(mirror);
    served_out(served);
    assert_eq!(reader.try_recv(), None);
    Ok(())
}

/// ringfire's free-standing names: the header constants, the layout signature and
/// `CycleStamp`, checked against the bytes of a ring this program creates.
pub fn run_more_names(dir: &Path) -> Result<(), Box<dyn Error>> {
    let path = dir.join("names");
    let create = |capacity| -> Result<rf::RingProducer<Tick>, rf::RingfireError> {
        rf::RingProducer::<Tick>::create(&path, capacity)
    };
    let mut producer = create(64)?;
    producer.push(&tick(1));
    let bytes = std::fs::read(&path)?;
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    assert_eq!(u64_at(0), rf::RINGFIRE_MAGIC);
    assert_eq!(rf::header::RINGFIRE_MAGIC, rf::RINGFIRE_MAGIC);
    assert_eq!(u32_at(8), rf::RINGFIRE_VERSION);
    let flags = u32_at(48);
    assert_eq!(
        flags & (rf::FLAG_MODE_SPMC | rf::FLAG_POLICY_LATEST_WINS),
        rf::FLAG_MODE_SPMC | rf::FLAG_POLICY_LATEST_WINS
    );
    for other in [
        rf::FLAG_MODE_MPMC,
        rf::FLAG_POLICY_LOSSLESS_BACKPRESSURE,
        rf::FLAG_WITH_ARENA,
        rf::FLAG_SPARSE,
    ] {
        assert_eq!(flags & other, 0, "flags {flags:#06x}");
    }
    assert_eq!(rf::SLOT_WRITING, u64::MAX);
    assert_ne!(rf::BLACKBOARD_MAGIC, rf::RINGFIRE_MAGIC);
    assert_eq!(rf::BLACKBOARD_VERSION, 1);
    // The schema signature in the header is the record type's layout signature.
    assert_eq!(u64_at(72), rf::compute_layout_signature::<Tick>());
    assert_eq!(
        <Tick as rf::LayoutSignature>::layout_signature(),
        rf::signature::compute_layout_signature::<Tick>()
    );
    assert_ne!(
        rf::compute_layout_signature::<Tick>(),
        rf::compute_layout_signature::<[u8; 32]>()
    );
    assert_eq!(rf::fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    // A stamp, then another: one counter, the same CPU numbering.
    let a = rf::tsc::CycleStamp::now();
    std::thread::sleep(Duration::from_millis(1));
    let b = rf::CycleStamp::now();
    assert!(
        b.diff_cycles(&a) > 0 && a.diff_cycles(&b) == 0,
        "{a:?} {b:?}"
    );
    assert!(a.elapsed_cycles() >= b.diff_cycles(&a));
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(usize::from(b.core_id) < cpus.max(64), "{b:?}");
    assert_eq!(rf::CycleStamp::cycles_to_ns(4_500, 4.5), 1_000.0);
    Ok(())
}
