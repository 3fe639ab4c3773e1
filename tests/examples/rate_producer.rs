//! Creates a ring of 65,536 64-byte records at PATH and pushes RATE records a second into it
//! for SECS seconds (a millisecond's share at a time, then a sleep to the next
//! millisecond), for trying `serve`, `mirror` and `top` by hand. Prints how many it pushed.
//!
//! `cargo run --release -p ringwire-tests --example rate_producer -- PATH [RATE] [SECS]`
//! (RATE defaults to 1,000,000, SECS to 5). The ring file is removed when the producer ends
//! (`RingProducer::create`'s default cleanup), as ringfire's producer removes its own.
//!
//! What an idle `serve --udp` cost the producer (the serve module docs): run this with
//! RATE 1000000 and SECS 7, start `ringwire serve --bind 127.0.0.1:0 --udp 0 PATH` half a
//! second in, and read both processes' CPU time (`utime + stime` in `/proc/PID/stat`)
//! over 5 s.
use std::time::{Duration, Instant};

use ringwire::RingProducer;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .expect("usage: rate_producer PATH [RATE] [SECS]");
    let rate: u64 = args.next().map_or(1_000_000, |a| a.parse().expect("RATE"));
    let secs: u64 = args.next().map_or(5, |a| a.parse().expect("SECS"));
    let mut producer = RingProducer::<[u8; 64]>::create(&path, 65_536).expect("create the ring");
    let per_ms = rate / 1000;
    let t0 = Instant::now();
    let (mut pushed, mut ms) = (0u64, 0u64);
    while t0.elapsed() < Duration::from_secs(secs) {
        for _ in 0..per_ms {
            producer.push(&[pushed as u8; 64]);
            pushed += 1;
        }
        ms += 1;
        let due = t0 + Duration::from_millis(ms);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    println!(
        "pushed {pushed} records in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}
