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
    let t0 = Instant::now();
    let (mut pushed, mut ms) = (0u64, 0u64);
    while t0.elapsed() < Duration::from_secs(secs) {
        ms += 1;
        while pushed < due_by(rate, ms) {
            producer.push(&[pushed as u8; 64]);
            pushed += 1;
        }
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

/// Records due by the end of millisecond `ms` at `rate` a second. Counted from the start
/// rather than as `rate / 1000` each millisecond, which pushed nothing at all below 1,000 a
/// second and dropped the remainder of any other rate (1,500 a second pushed 1,000).
fn due_by(rate: u64, ms: u64) -> u64 {
    (u128::from(rate) * u128::from(ms) / 1000) as u64
}

#[cfg(test)]
mod tests {
    use super::due_by;

    #[test]
    fn every_rate_is_pushed_in_full_each_second() {
        for rate in [1, 10, 999, 1_000, 1_500, 123_457, 1_000_000] {
            assert_eq!(due_by(rate, 1_000), rate, "rate {rate}");
            assert_eq!(due_by(rate, 5_000), 5 * rate, "rate {rate}");
            // Spread evenly: never ahead of the schedule by a record or more.
            for ms in 1..=1_000 {
                let ideal = rate as f64 * ms as f64 / 1_000.0;
                let d = due_by(rate, ms) as f64;
                assert!(d <= ideal && ideal - d < 1.0, "rate {rate} at {ms} ms: {d}");
            }
        }
    }
}
