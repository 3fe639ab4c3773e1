//! The physical floor of a machine, measured so that every other figure can be reported
//! against it: a bare cache-line ping-pong between two cores, and the loopback datagram rate.
//! The ping-pong polls in a tight loop with no PAUSE hint (which costs tens of ns on recent
//! x86): the floor is the fastest hand-off the two cores can do.

use std::net::UdpSocket;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::hist::Latency;

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

/// The first two CPUs this process may run on (its affinity mask, which a cpuset or
/// `taskset` can narrow to CPUs other than 0 and 1), or `None` with fewer than two.
pub fn cpu_pair() -> Option<(usize, usize)> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most its size into it, and
    // CPU_ISSET reads inside it (i < CPU_SETSIZE).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        let mut cpus = (0..libc::CPU_SETSIZE as usize).filter(|&i| libc::CPU_ISSET(i, &set));
        Some((cpus.next()?, cpus.next()?))
    }
}

/// Lets the calling thread run on every CPU this process's cgroup/cpuset allows (undoes
/// [`pin_to`], including a pin inherited from the spawning thread).
pub fn unpin() {
    // SAFETY: cpu_set_t is plain data, CPU_SET stays inside it (i < CPU_SETSIZE), and
    // sched_setaffinity only reads the set we pass; CPUs outside the cpuset are ignored.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for i in 0..(libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(i, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Lines of the moving-line ping-pong ([`moving_line_round_trip`]): a ring of 4,096 one-line
/// slots per direction, 256 KiB each.
pub const MOVING_LINES: usize = 4096;

/// Two cache lines, 128-byte aligned (the pair an adjacent-line prefetcher fetches together).
#[repr(C, align(128))]
struct Block([AtomicU64; 16]);

/// A ring of `lines` one-line slots (a power of two), each slot's value in the first word
/// of its line; consecutive slots are neighbouring lines, as a ring's are. Whole 128-byte
/// blocks are allocated, so a one-slot ring has its line's block to itself and shares no
/// prefetch pair with another allocation.
fn ring(lines: usize) -> Arc<Vec<Block>> {
    Arc::new(
        (0..lines.div_ceil(2))
            .map(|_| Block(core::array::from_fn(|_| AtomicU64::new(0))))
            .collect(),
    )
}

/// The slot of value `v` in a ring of `LINES` slots. With `LINES` a constant the index is
/// one too for the fixed-line floor (`LINES == 1`), so its loop is a bare store and poll.
#[inline(always)]
fn slot<const LINES: usize>(ring: &[Block], v: u64) -> &AtomicU64 {
    let k = (v % LINES as u64) as usize;
    &ring[k >> 1].0[(k & 1) * 8]
}

/// Ends the echo thread.
const STOP: u64 = u64::MAX;

/// Two rings of `LINES` one-line slots, one per direction, and an echo thread that answers
/// value `v` found in `ping`'s slot of `v` by storing it into `pong`'s. Values are 1, 2, 3,
/// ... in order; [`STOP`], sent on drop, ends the echo.
struct PingPong<const LINES: usize> {
    ping: Arc<Vec<Block>>,
    pong: Arc<Vec<Block>>,
    /// The value of the next round trip.
    next: u64,
    echo: Option<std::thread::JoinHandle<()>>,
}

impl<const LINES: usize> PingPong<LINES> {
    fn start(pin: Option<(usize, usize)>) -> Self {
        const { assert!(LINES.is_power_of_two()) };
        let (ping, pong) = (ring(LINES), ring(LINES));
        let echo = {
            let (ping, pong) = (ping.clone(), pong.clone());
            std::thread::spawn(move || {
                if let Some((_, b)) = pin {
                    pin_to(b);
                }
                // Plain slices in locals: the loop reloads nothing but the polled word.
                let (ping, pong): (&[Block], &[Block]) = (&ping, &pong);
                let mut want = 1u64;
                // Bounded by STOP, which the measuring side sends when it drops.
                loop {
                    // Acquire/Release: the value itself is the message; ordering keeps the
                    // measurement honest on weakly ordered CPUs too.
                    let v = slot::<LINES>(ping, want).load(Ordering::Acquire);
                    if v == want {
                        slot::<LINES>(pong, want).store(v, Ordering::Release);
                        want += 1;
                    } else if v == STOP {
                        break;
                    }
                }
            })
        };
        if let Some((a, _)) = pin {
            pin_to(a);
        }
        // One untimed round (value 1): the echo is running when this returns.
        round::<LINES>(&ping, &pong, 1);
        PingPong {
            ping,
            pong,
            next: 2,
            echo: Some(echo),
        }
    }
}

/// Round trip `i` through `ping` and `pong`: a tight poll, no PAUSE. The rings are plain
/// slices so that a caller's loop keeps them in registers and reloads only the polled word.
#[inline(always)]
fn round<const LINES: usize>(ping: &[Block], pong: &[Block], i: u64) {
    slot::<LINES>(ping, i).store(i, Ordering::Release);
    while slot::<LINES>(pong, i).load(Ordering::Acquire) != i {}
}

impl<const LINES: usize> Drop for PingPong<LINES> {
    fn drop(&mut self) {
        // The echo looks for the next value where it will be: STOP goes there.
        slot::<LINES>(&self.ping, self.next).store(STOP, Ordering::Release);
        if let Some(e) = self.echo.take() {
            let _ = e.join();
        }
    }
}

/// How long the timed ping-pongs may run: a machine too loaded to finish the rounds asked for
/// ends them at the first multiple of 4,096 rounds past it (the count says how many).
const TIMED_LIMIT: Duration = Duration::from_secs(30);

/// `rounds` timed round trips through rings of `LINES` one-line slots, ended early past
/// `limit` (looked at every 4,096 rounds; a `limit` past what an `Instant` holds is none).
fn timed_rounds<const LINES: usize>(
    rounds: u64,
    pin: Option<(usize, usize)>,
    limit: Duration,
) -> Latency {
    let mut pp = PingPong::<LINES>::start(pin);
    let mut lat = Latency::new();
    let deadline = Instant::now().checked_add(limit);
    let (ping, pong): (&[Block], &[Block]) = (&pp.ping, &pp.pong);
    let mut next = pp.next;
    for n in 1..=rounds {
        let t0 = Instant::now();
        round::<LINES>(ping, pong, next);
        lat.record(t0.elapsed().as_nanos() as u64);
        next += 1;
        if n % 4096 == 0 && deadline.is_some_and(|d| Instant::now() > d) {
            break;
        }
    }
    pp.next = next;
    lat
}

/// `rounds` back-to-back round trips, timed as a whole.
fn bulk_rounds<const LINES: usize>(rounds: u64, pin: Option<(usize, usize)>) -> Duration {
    let mut pp = PingPong::<LINES>::start(pin);
    let (ping, pong): (&[Block], &[Block]) = (&pp.ping, &pp.pong);
    let first = pp.next;
    let t0 = Instant::now();
    for i in first..first + rounds {
        round::<LINES>(ping, pong, i);
    }
    let dt = t0.elapsed();
    pp.next = first + rounds;
    dt
}

/// Cache-line ping-pong: `rounds` round trips of a value through two cache lines owned by
/// two threads, the same two lines every time. Each round trip is timed (the timer's own
/// cost, ~20 ns, is included, and is reported separately by [`timer_overhead`]). `pin`
/// places the two threads on CPUs.
pub fn cacheline_round_trip(rounds: u64, pin: Option<(usize, usize)>) -> Latency {
    timed_rounds::<1>(rounds, pin, TIMED_LIMIT)
}

/// The same ping-pong as [`cacheline_round_trip`] without per-round timing: the total time of
/// `rounds` back-to-back round trips (for criterion's `iter_custom`, where the timer must not
/// be part of what is measured).
pub fn cacheline_round_trips(rounds: u64, pin: Option<(usize, usize)>) -> Duration {
    bulk_rounds::<1>(rounds, pin)
}

/// [`cacheline_round_trip`] through rings of [`MOVING_LINES`] one-line slots: round trip `i`
/// uses line `i % MOVING_LINES` of each ring, so every hand-off is on a line the other core
/// last touched a lap ago, as in a ring. This is the floor of any ring whose records move
/// through memory (a one-word record, no sequence check, no PAUSE); the fixed-line
/// ping-pong above is below it.
pub fn moving_line_round_trip(rounds: u64, pin: Option<(usize, usize)>) -> Latency {
    timed_rounds::<MOVING_LINES>(rounds, pin, TIMED_LIMIT)
}

/// [`moving_line_round_trip`] timed as a whole, as [`cacheline_round_trips`].
pub fn moving_line_round_trips(rounds: u64, pin: Option<(usize, usize)>) -> Duration {
    bulk_rounds::<MOVING_LINES>(rounds, pin)
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
/// `count` or `max_time`, whichever comes first. The rate is the datagrams received over the
/// interval they were received in: from the start of sending to the last arrival.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DatagramRate {
    /// Datagrams handed to the kernel.
    pub sent: u64,
    /// Datagrams received.
    pub received: u64,
    /// Received per second, from the start of sending to the last datagram received.
    pub per_sec: f64,
}

/// Measures [`DatagramRate`] on loopback. `pin` places the sender (the calling thread) and
/// the receiver on two CPUs; without it the receiver may run on every CPU this process may
/// use, whatever the calling thread is pinned to.
pub fn loopback_datagram_rate(
    count: u64,
    size: usize,
    max_time: Duration,
    pin: Option<(usize, usize)>,
) -> std::io::Result<DatagramRate> {
    let rx = UdpSocket::bind("127.0.0.1:0")?;
    rx.set_read_timeout(Some(Duration::from_millis(200)))?;
    let to = rx.local_addr()?;
    let tx = UdpSocket::bind("127.0.0.1:0")?;
    let done = Arc::new(AtomicBool::new(false));
    let receiver = {
        let done = done.clone();
        std::thread::spawn(move || {
            // A spawned thread inherits the spawner's affinity (the floor's ping-pong pins
            // it): place the receiver explicitly, or let it run anywhere.
            match pin {
                Some((_, b)) => {
                    pin_to(b);
                }
                None => unpin(),
            }
            let mut buf = vec![0u8; 65536];
            let mut n = 0u64;
            let mut last = None;
            loop {
                match rx.recv(&mut buf) {
                    Ok(_) => {
                        n += 1;
                        last = Some(Instant::now());
                    }
                    // A quiet socket after the sender finished: everything has arrived.
                    Err(_) if done.load(Ordering::Acquire) => break,
                    Err(_) => {}
                }
            }
            (n, last)
        })
    };
    if let Some((a, _)) = pin {
        pin_to(a);
    }
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
    done.store(true, Ordering::Release);
    let (received, last) = receiver.join().unwrap_or((0, None));
    // Everything counted arrived between t0 (nothing is sent before it) and `last`.
    let dt = last.map_or(Duration::ZERO, |l| l.saturating_duration_since(t0));
    Ok(DatagramRate {
        sent,
        received,
        per_sec: if received == 0 {
            0.0
        } else {
            received as f64 / dt.as_secs_f64().max(1e-9)
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // The two threads of a ping-pong poll without yielding and are not pinned here: on a
    // loaded 2-core machine a round trip waits for both to be on a core at once, and 10,000
    // of them took 112 s beside two busy processes. So the times are bounded by the wall time
    // of the call that measured them, not by a fixed figure.

    #[test]
    fn ping_pong_records_every_round_trip() {
        let t0 = Instant::now();
        let lat = cacheline_round_trip(2_000, None);
        let wall = t0.elapsed();
        assert_eq!(lat.len(), 2_000);
        // A round trip cannot be faster than the timer granularity allows to see as zero;
        // it must be positive and inside the call that timed it.
        let s = lat.summary();
        assert!(
            s.p50 > 0 && u128::from(s.p50) <= wall.as_nanos(),
            "{s} in {wall:?}"
        );
    }

    #[test]
    fn tight_ping_pong_terminates_and_takes_time() {
        let t0 = Instant::now();
        let d = cacheline_round_trips(10_000, None);
        let wall = t0.elapsed();
        assert!(d > Duration::ZERO && d <= wall, "{d:?} in {wall:?}");
    }

    #[test]
    fn moving_line_ping_pong_laps_its_rings() {
        // More rounds than lines: each ring is lapped twice and the echo keeps answering.
        // Without the floor's time limit, which a loaded machine reached after 4,096 rounds.
        let rounds = 2 * MOVING_LINES as u64 + 5;
        let t0 = Instant::now();
        let lat = timed_rounds::<MOVING_LINES>(rounds, None, Duration::MAX);
        let wall = t0.elapsed();
        assert_eq!(lat.len(), rounds);
        let s = lat.summary();
        assert!(
            s.p50 > 0 && u128::from(s.p50) <= wall.as_nanos(),
            "{s} in {wall:?}"
        );
        let t0 = Instant::now();
        let d = moving_line_round_trips(3 * MOVING_LINES as u64, None);
        let wall = t0.elapsed();
        assert!(d > Duration::ZERO && d <= wall, "{d:?} in {wall:?}");
    }

    #[test]
    fn the_timed_ping_pong_ends_at_its_limit() {
        // Past the limit at once: the first look, after 4,096 rounds, ends the run.
        let lat = timed_rounds::<1>(3 * 4096, None, Duration::ZERO);
        assert_eq!(lat.len(), 4096);
    }

    #[test]
    fn cpu_pair_is_two_allowed_cpus() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        match cpu_pair() {
            Some((a, b)) => {
                assert!(cpus >= 2 && a < b, "{a} {b}");
                // Both are CPUs this thread may be pinned to.
                let t = std::thread::spawn(move || pin_to(a) && pin_to(b));
                assert!(t.join().unwrap());
            }
            None => assert_eq!(cpus, 1),
        }
    }

    #[test]
    fn loopback_rate_counts_what_arrived() {
        let r = loopback_datagram_rate(2_000, 64, Duration::from_secs(5), None).unwrap();
        assert!(r.sent > 0 && r.received <= r.sent, "{r:?}");
        assert!(r.received > 0 && r.per_sec > 0.0, "{r:?}");
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cpus >= 2 {
            let r = loopback_datagram_rate(2_000, 64, Duration::from_secs(5), Some((0, 1)));
            assert!(r.unwrap().received > 0);
            unpin();
        }
    }
}
