//! An async reader of a ring in `/dev/shm`: a producer thread publishes ticks in bursts with
//! pauses, a tokio task reads them with `recv().await` and then as a `Stream`.
//!
//! ```sh
//! cargo run -p ringwire --features tokio --example async_reader
//! ```

use std::future::poll_fn;
use std::pin::Pin;
use std::time::{Duration, Instant};

use futures_core::Stream;
use ringwire::{AsyncRingConsumer, RingConsumer, RingProducer};

const BURSTS: u64 = 5;
const PER_BURST: u64 = 4;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ringwire::Result<()> {
    let path = format!("/dev/shm/ringwire-async-example-{}", std::process::id());
    // The producer owns the file and removes it when dropped (the default cleanup mode).
    let mut tx = RingProducer::<u64>::create(&path, 1024)?;
    let rx = RingConsumer::<u64>::builder()
        .start_from_head()
        .consumer_name("async-example")
        .attach(&path)?;
    let mut rx = AsyncRingConsumer::new(rx)?;

    let start = Instant::now();
    let producer = std::thread::spawn(move || {
        for burst in 0..BURSTS {
            // The reader is idle (its waiter asleep on the ring's futex) during each pause.
            std::thread::sleep(Duration::from_millis(100));
            for i in 0..PER_BURST {
                tx.push(&(burst * PER_BURST + i));
            }
        }
        tx
    });

    // The first half with recv().await …
    for _ in 0..BURSTS * PER_BURST / 2 {
        let (seq, v) = rx.recv_seq().await;
        println!("{:>7.1?}  recv   seq {seq:>3}  value {v}", start.elapsed());
    }
    // … the rest as a Stream (StreamExt::next from futures-util or tokio-stream does the same).
    let mut stream = Pin::new(&mut rx);
    for _ in 0..BURSTS * PER_BURST / 2 {
        let v = poll_fn(|cx| stream.as_mut().poll_next(cx)).await;
        println!("{:>7.1?}  stream value {v:?}", start.elapsed());
    }

    let stats = rx.waiter_stats();
    println!(
        "lapped {}; waiter: {} futex sleeps, {} woken by the producer, {} timed out",
        rx.lapped_count(),
        stats.sleeps,
        stats.woken,
        stats.timed_out
    );
    drop(rx); // ends the waiter thread before the producer removes the file
    drop(producer.join().expect("producer thread"));
    // A named consumer keeps a checkpoint beside the ring (spec §13); this one is not needed.
    let _ = std::fs::remove_file(ringwire::checkpoint::default_path(
        path.as_ref(),
        "async-example",
    ));
    Ok(())
}
