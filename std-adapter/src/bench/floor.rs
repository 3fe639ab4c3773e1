//! The physical floor of a machine, measured so that every other figure can be reported
//! against it: a bare cache-line ping-pong between two cores, and the loopback datagram rate.
//! The ping-pong polls in a tight loop with no PAUSE hint (which costs tens of ns on recent
//! x86): the floor is the fastest hand-off the two cores can do.

use std::net::UdpSocket;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::hist::Latency;

#[repr(align(128))]
struct Line(AtomicU64);

/// Pins the calling thread to `cpu`. Returns false if the kernel refused (for example the
/// CPU does not exist).
pub fn pin_to(cpu: usize) -> bool {
    if cpu >= libc::CPU_SETSIZE as usize {
        return false;
    }
    // SAFETY: cpu_set_t is plain data, CPU_SET stays inside it (cpu < CPU_SETSIZE), and
    // sched_setaffinity only reads the set we pass.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Cache-line ping-pong: `rounds` round trips of a value through two cache lines owned by
/// two threads. Each round trip is timed (the timer's own cost, ~20 ns, is included, and
/// is reported separately by [`timer_overhead`]). `pin` places the two threads on CPUs.
pub fn cacheline_round_trip(rounds: u64, pin: Option<(usize, usize)>) -> Latency {
    let ping = Arc::new(Line(AtomicU64::new(0)));
    let pong = Arc::new(Line(AtomicU64::new(0)));
    let stop = Arc::new(AtomicBool::new(false));
    let echo = {
        let (ping, pong, stop) = (ping.clone(), pong.clone(), stop.clone());
        std::thread::spawn(move || {
            if let Some((_, b)) = pin {
                pin_to(b);
            }
            let mut last = 0;
            // Bounded by `stop`, which the measuring thread always sets.
            while !stop.load(Ordering::Relaxed) {
                // Acquire/Release: the value itself is the message; ordering keeps the
                // measurement honest on weakly ordered CPUs too.
                let v = ping.0.load(Ordering::Acquire);
                if v != last {
                    last = v;
                    pong.0.store(v, Ordering::Release);
                }
            }
        })
    };
    if let Some((a, _)) = pin {
        pin_to(a);
    }
    let mut lat = Latency::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    for i in 1..=rounds {
        let t0 = Instant::now();
        ping.0.store(i, Ordering::Release);
        while pong.0.load(Ordering::Acquire) != i {}
        lat.record(t0.elapsed().as_nanos() as u64);
        if i % 4096 == 0 && Instant::now() > deadline {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = echo.join();
    lat
}

/// The same ping-pong as [`cacheline_round_trip`] without per-round timing: the total time of
/// `rounds` back-to-back round trips (for criterion's `iter_custom`, where the timer must not
/// be part of what is measured).
pub fn cacheline_round_trips(rounds: u64, pin: Option<(usize, usize)>) -> Duration {
    let ping = Arc::new(Line(AtomicU64::new(0)));
    let pong = Arc::new(Line(AtomicU64::new(0)));
    let echo = {
        let (ping, pong) = (ping.clone(), pong.clone());
        std::thread::spawn(move || {
            if let Some((_, b)) = pin {
                pin_to(b);
            }
            // u64::MAX ends the echo; every other value is answered.
            let mut last = 0;
            loop {
                // Acquire/Release: as in `cacheline_round_trip`.
                let v = ping.0.load(Ordering::Acquire);
                if v != last {
                    last = v;
                    pong.0.store(v, Ordering::Release);
                    if v == u64::MAX {
                        break;
                    }
                }
            }
        })
    };
    if let Some((a, _)) = pin {
        pin_to(a);
    }
    // One warm-up round so the measured rounds do not include thread start-up.
    let round = |v: u64| {
        ping.0.store(v, Ordering::Release);
        while pong.0.load(Ordering::Acquire) != v {}
    };
    round(u64::MAX - 1);
    let t0 = Instant::now();
    for i in 1..=rounds {
        round(i);
    }
    let dt = t0.elapsed();
    round(u64::MAX);
    let _ = echo.join();
    dt
}

/// The cost of one `Instant::now()` pair, in ns (median of `n`).
pub fn timer_overhead(n: u32) -> u64 {
    let mut lat = Latency::new();
    for _ in 0..n.max(1) {
        let t0 = Instant::now();
        lat.record(t0.elapsed().as_nanos() as u64);
    }
    lat.quantile(0.5)
}

/// Loopback datagram rate: one thread sends `count` datagrams of `size` bytes to a socket on
/// 127.0.0.1 as fast as the kernel takes them; the receiver counts what arrives. Stops after
/// `count` or `max_time`, whichever comes first.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DatagramRate {
    /// Datagrams handed to the kernel.
    pub sent: u64,
    /// Datagrams received.
    pub received: u64,
    /// Received per second over the sending period.
    pub per_sec: f64,
}

/// Measures [`DatagramRate`] on loopback.
pub fn loopback_datagram_rate(
    count: u64,
    size: usize,
    max_time: Duration,
) -> std::io::Result<DatagramRate> {
    let rx = UdpSocket::bind("127.0.0.1:0")?;
    rx.set_read_timeout(Some(Duration::from_millis(200)))?;
    let to = rx.local_addr()?;
    let tx = UdpSocket::bind("127.0.0.1:0")?;
    let done = Arc::new(AtomicBool::new(false));
    let receiver = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 65536];
            let mut n = 0u64;
            loop {
                match rx.recv(&mut buf) {
                    Ok(_) => n += 1,
                    // A quiet socket after the sender finished: everything has arrived.
                    Err(_) if done.load(Ordering::Acquire) => break,
                    Err(_) => {}
                }
            }
            n
        })
    };
    let payload = vec![0xA5u8; size.clamp(1, 65507)];
    let t0 = Instant::now();
    let mut sent = 0u64;
    while sent < count {
        if tx.send_to(&payload, to).is_ok() {
            sent += 1;
        }
        if sent.is_multiple_of(1024) && t0.elapsed() > max_time {
            break;
        }
    }
    let dt = t0.elapsed();
    done.store(true, Ordering::Release);
    let received = receiver.join().unwrap_or(0);
    Ok(DatagramRate {
        sent,
        received,
        per_sec: received as f64 / dt.as_secs_f64().max(1e-9),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_pong_records_every_round_trip() {
        let lat = cacheline_round_trip(2_000, None);
        assert_eq!(lat.len(), 2_000);
        // A round trip cannot be faster than the timer granularity allows to see as zero;
        // it must be positive and below a generous bound (scheduling on a shared VM).
        let s = lat.summary();
        assert!(s.p50 > 0 && s.p50 < 50_000_000, "{s}");
    }

    #[test]
    fn tight_ping_pong_terminates_and_takes_time() {
        let d = cacheline_round_trips(10_000, None);
        assert!(d > Duration::ZERO && d < Duration::from_secs(30), "{d:?}");
    }

    #[test]
    fn loopback_rate_counts_what_arrived() {
        let r = loopback_datagram_rate(2_000, 64, Duration::from_secs(5)).unwrap();
        assert!(r.sent > 0 && r.received <= r.sent, "{r:?}");
        assert!(r.received > 0, "{r:?}");
    }
}
