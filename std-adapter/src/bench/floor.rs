//! The physical floor of a machine, measured so that every other figure can be reported
//! against it: a bare cache-line ping-pong between two cores, the time per line to move
//! lines from one core to the other in bulk ([`line_transfer`], the floor of a queue of
//! 64-byte items), and the loopback datagram rate.
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
/// ends them at the first multiple of 4,096 rounds past it (the count says how many). Each
/// pass of [`line_transfer`] stops past it too, at the end of a lap.
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

/// Lines of the line-transfer floor ([`line_transfer`]): 4,096 lines, 256 KiB, the ring of
/// a 4,096-slot queue of 64-byte items.
pub const TRANSFER_LINES: usize = 4096;

/// How far ahead the reader of [`line_transfer`] prefetches its loads, and its writer its
/// stores (where the CPU has a prefetch for writing), in lines, in the passes it makes (0:
/// no software prefetch). Only 0 where there is no prefetch instruction to issue (outside
/// x86-64).
#[cfg(target_arch = "x86_64")]
pub const TRANSFER_AHEAD: &[usize] = &[0, 8, 16, 32, 64];
/// See the x86-64 definition.
#[cfg(not(target_arch = "x86_64"))]
pub const TRANSFER_AHEAD: &[usize] = &[0];

/// The 10th, 50th and 90th percentiles of a set of per-line times, in ns.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Spread {
    /// Laps timed.
    pub count: usize,
    /// 10th percentile.
    pub p10: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
}

impl Spread {
    /// The spread of `v`, as the benches report theirs: the median of
    /// [`median_min_max`](super::median_min_max) (the mean of the two middle figures for an
    /// even count) and the tails of [`nearest_rank_tails`](super::nearest_rank_tails); all
    /// zero for no samples.
    fn of(mut v: Vec<f64>) -> Spread {
        let Some((p50, _, _)) = super::median_min_max(&v) else {
            return Spread::default();
        };
        v.sort_by(f64::total_cmp);
        let (p10, p90) = super::nearest_rank_tails(&v, 10);
        Spread {
            count: v.len(),
            p10,
            p50,
            p90,
        }
    }

    /// `{"count":..,"p10_ns":..,"p50_ns":..,"p90_ns":..}`.
    pub fn to_json(&self) -> String {
        format!(
            "{{\"count\":{},\"p10_ns\":{:.2},\"p50_ns\":{:.2},\"p90_ns\":{:.2}}}",
            self.count, self.p10, self.p50, self.p90
        )
    }
}

impl std::fmt::Display for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "p50 {:.2} ns a line (p10 {:.2}, p90 {:.2}; {} laps)",
            self.p50, self.p10, self.p90, self.count
        )
    }
}

/// What [`line_transfer`] measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LineTransfer {
    /// Reading every word of [`TRANSFER_LINES`] lines the other core has just written, per
    /// line, at the prefetch distance with the lowest median.
    pub read: Spread,
    /// That distance, in lines (one of [`TRANSFER_AHEAD`]).
    pub read_ahead: usize,
    /// Writing every word of the lines the other core has just read, per line (until the
    /// stores are done: a SeqCst fence ends the timed part), at the prefetch-for-writing
    /// distance with the lowest median (where the CPU has no such prefetch, the passes
    /// differ only in the reader's distance).
    pub write: Spread,
    /// That distance, in lines (one of [`TRANSFER_AHEAD`]).
    pub write_ahead: usize,
}

/// Waits until `flag` holds a value `done` accepts, and returns it, giving the core away
/// now and then (the wait is not timed; unpinned, the other thread may need this core).
fn wait_until(flag: &AtomicU64, done: impl Fn(u64) -> bool) -> u64 {
    let mut spins = 0u32;
    loop {
        let v = flag.load(Ordering::Acquire);
        if done(v) {
            return v;
        }
        spins += 1;
        if spins.is_multiple_of(1024) {
            std::thread::yield_now();
        }
        std::hint::spin_loop();
    }
}

/// The eight words of line `i` of `buf`.
fn line_words(buf: &[Block], i: usize) -> &[AtomicU64] {
    &buf[i >> 1].0[(i & 1) * 8..][..8]
}

/// Reads every word of `lines` lines of `buf`, prefetching `ahead` lines ahead, and returns
/// their sum (so that the loads are not dropped, and so that the caller checks what came).
#[inline(never)]
fn read_lines(buf: &[Block], lines: usize, ahead: usize) -> u64 {
    let mut sum = 0u64;
    for i in 0..lines {
        #[cfg(target_arch = "x86_64")]
        if ahead > 0 && i + ahead < lines {
            // SAFETY: SSE is part of x86-64's baseline, so the target feature is there; a
            // prefetch is a hint that reads nothing the program sees and cannot fault, and
            // the address is a line of `buf` anyway.
            unsafe {
                core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                    line_words(buf, i + ahead).as_ptr().cast(),
                )
            };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = ahead;
        for w in line_words(buf, i) {
            sum = sum.wrapping_add(w.load(Ordering::Relaxed));
        }
    }
    sum
}

/// Stores `v` into every word of `lines` lines of `buf`, prefetching for writing `ahead`
/// lines ahead where the CPU has such a prefetch (`prefetch_w`: see
/// [`ringwire_core::queue::has_prefetch_write`], which the SPSC producer follows too).
#[inline(never)]
fn write_lines(buf: &[Block], lines: usize, v: u64, ahead: usize, prefetch_w: bool) {
    for i in 0..lines {
        #[cfg(target_arch = "x86_64")]
        if prefetch_w && ahead > 0 && i + ahead < lines {
            // SAFETY: `prefetch_w` says CPUID has PRFCHW (or 3DNowPrefetch), so `prefetchw`
            // exists; a prefetch reads and writes nothing the program sees and cannot fault,
            // and the address is a line of `buf` anyway.
            unsafe {
                core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_ET0 }>(
                    line_words(buf, i + ahead).as_ptr().cast(),
                )
            };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (ahead, prefetch_w);
        for w in line_words(buf, i) {
            w.store(v, Ordering::Relaxed);
        }
    }
}

/// One pass of [`line_transfer`]: `laps` laps in which the other thread writes every
/// line (timed: the write samples) and this one then reads them all (timed: the read
/// samples), each prefetching `ahead` lines ahead (the writer for writing, where the CPU
/// can). Ends early past `limit`, looked at every lap.
fn transfer_pass(
    laps: u64,
    ahead: usize,
    pin: Option<(usize, usize)>,
    limit: Duration,
) -> (Vec<f64>, Vec<f64>) {
    let lines = TRANSFER_LINES;
    let buf = ring(lines);
    // Lap numbers: `written` by the writer when a lap's lines are written, `read` by the
    // reader when it has read them; `u64::MAX` in `read` stops the writer.
    let (written, read) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let writer = {
        let (buf, written, read) = (buf.clone(), written.clone(), read.clone());
        std::thread::spawn(move || {
            if let Some((_, b)) = pin {
                pin_to(b);
            }
            let prefetch_w = ringwire_core::queue::has_prefetch_write();
            let mut times = Vec::with_capacity(laps as usize);
            for lap in 1..=laps {
                let t0 = Instant::now();
                write_lines(&buf, lines, lap, ahead, prefetch_w);
                // The stores are done (not only issued) when the fence returns.
                std::sync::atomic::fence(Ordering::SeqCst);
                let dt = t0.elapsed();
                // The first lap writes lines nobody has read: not a sample.
                if lap > 1 {
                    times.push(dt.as_nanos() as f64 / lines as f64);
                }
                written.store(lap, Ordering::Release);
                if wait_until(&read, |r| r == lap || r == u64::MAX) == u64::MAX {
                    break;
                }
            }
            times
        })
    };
    if let Some((a, _)) = pin {
        pin_to(a);
    }
    let deadline = Instant::now().checked_add(limit);
    let mut times = Vec::with_capacity(laps as usize);
    for lap in 1..=laps {
        wait_until(&written, |w| w == lap);
        let t0 = Instant::now();
        let sum = read_lines(&buf, lines, ahead);
        let dt = t0.elapsed();
        // Every word of the lap holds the lap number: anything else would be a torn or
        // lost hand-off, which this measurement must not report as a time.
        assert_eq!(
            sum,
            lap.wrapping_mul(8 * lines as u64),
            "lap {lap}: wrong words"
        );
        times.push(dt.as_nanos() as f64 / lines as f64);
        let stop = deadline.is_some_and(|d| Instant::now() > d);
        read.store(if stop { u64::MAX } else { lap }, Ordering::Release);
        if stop {
            break;
        }
    }
    let written = writer.join().unwrap_or_default();
    (times, written)
}

/// The line-transfer floor: the time per 64-byte line to move [`TRANSFER_LINES`] lines
/// from one core to the other in bulk, with no queue protocol: the other core writes every
/// word of every line, then this one reads them all; and the time for the other core to
/// write lines this one has just read. A queue moving 64-byte items between the two cores
/// makes both moves for every item (the producer's stores take its lines back, the
/// consumer's loads bring them over), so this is what its time per item is made of: the
/// larger of the two bounds it. The reader and the writer make `laps` laps at each
/// distance of [`TRANSFER_AHEAD`] (one pass each), and for each side the best distance's
/// laps are reported. Each pass stops past 30 s, looked at every lap.
pub fn line_transfer(laps: u64, pin: Option<(usize, usize)>) -> LineTransfer {
    line_transfer_within(laps, pin, TIMED_LIMIT)
}

/// [`line_transfer`] with each pass stopped past `limit` (a `limit` past what an `Instant`
/// holds is none).
fn line_transfer_within(laps: u64, pin: Option<(usize, usize)>, limit: Duration) -> LineTransfer {
    let mut best_read: Option<(Spread, usize)> = None;
    let mut best_write: Option<(Spread, usize)> = None;
    for &ahead in TRANSFER_AHEAD {
        let (r, w) = transfer_pass(laps.max(1), ahead, pin, limit);
        for (best, s) in [
            (&mut best_read, Spread::of(r)),
            (&mut best_write, Spread::of(w)),
        ] {
            // A pass with no write samples (stopped after its first lap) is no candidate.
            if s.count > 0 && best.is_none_or(|(b, _)| s.p50 < b.p50) {
                *best = Some((s, ahead));
            }
        }
    }
    let (read, read_ahead) = best_read.unwrap_or_default();
    let (write, write_ahead) = best_write.unwrap_or_default();
    LineTransfer {
        read,
        read_ahead,
        write,
        write_ahead,
    }
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
    fn line_transfer_times_every_lap_at_every_distance() {
        let laps = 5;
        let t = line_transfer_within(laps, None, Duration::MAX);
        // Every lap read is timed; the writer's first lap of each pass is not a sample.
        // Each figure is one pass's: the best distance's.
        assert_eq!(t.read.count, laps as usize);
        assert_eq!(t.write.count, laps as usize - 1);
        assert!(TRANSFER_AHEAD.contains(&t.read_ahead), "{t:?}");
        assert!(TRANSFER_AHEAD.contains(&t.write_ahead), "{t:?}");
        for s in [t.read, t.write] {
            assert!(s.p10 > 0.0 && s.p10 <= s.p50 && s.p50 <= s.p90, "{t:?}");
        }
    }

    #[test]
    fn line_transfer_passes_end_at_their_limit() {
        // Past the limit at once: each pass stops after its first lap, and its writer,
        // waiting for the next, is let go.
        let t = line_transfer_within(1_000, None, Duration::ZERO);
        assert_eq!(t.read.count, 1);
        assert_eq!(t.write.count, 0);
        assert_eq!(t.write, Spread::default());
    }

    #[test]
    fn spread_takes_the_benches_median_and_tails() {
        let s = Spread::of((1..=11).rev().map(f64::from).collect());
        assert_eq!((s.count, s.p10, s.p50, s.p90), (11, 2.0, 6.0, 10.0));
        // An even count: the mean of the two middle figures.
        let s = Spread::of((1..=16).map(f64::from).collect());
        assert_eq!((s.p10, s.p50, s.p90), (2.0, 8.5, 15.0));
        assert_eq!(Spread::of(vec![]), Spread::default());
        assert_eq!(
            Spread::of(vec![2.5]).to_json(),
            r#"{"count":1,"p10_ns":2.50,"p50_ns":2.50,"p90_ns":2.50}"#
        );
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
