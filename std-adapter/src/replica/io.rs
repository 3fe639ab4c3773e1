//! What the drivers share: the clock handed to the state machines, address conversions,
//! `ppoll`, writes with a deadline on non-blocking sockets, idle waiting on a ring and frame
//! buffers allocated without an abort.

use std::io::{self, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::AsRawFd;
use std::sync::OnceLock;
use std::sync::atomic::AtomicBool;
use std::time::Duration as StdDuration;

use ringwire_core::RingView;
use ringwire_core::replicate::{Duration, Instant, PeerAddr};

use super::anticipate::Anticipator;
use super::spin::SpinPolicy;
use crate::wait::{FutexWait, Idle, WaitFor, WaitStrategy};

static EPOCH: OnceLock<std::time::Instant> = OnceLock::new();

/// Called by a sender right after it handed frames to the kernel: gives up the CPU once, so
/// that a thread woken by those frames on this CPU (a mirror on the same host, the reader
/// behind it) runs now rather than after this thread's bookkeeping and its next park. Where
/// nothing else is runnable on this CPU it returns at once.
///
/// Measured with `cargo bench -p ringwire-tests --bench replication` (`--one ringwire …
/// default 1000 3`) on this project's 2-vCPU VM, where the server and the mirror share a
/// vCPU: push-to-read p50 at 1,000 records/s went from 17–23 µs to 9–12 µs on TCP,
/// multicast and unicast.
pub(crate) fn yield_to_receiver() {
    std::thread::yield_now();
}

/// The state machines' clock: nanoseconds since the first call in this process, plus one
/// second so that no real time is ever `Instant::ZERO`.
pub fn now() -> Instant {
    let e = *EPOCH.get_or_init(std::time::Instant::now);
    Instant::from_nanos(e.elapsed().as_nanos() as u64 + 1_000_000_000)
}

/// Converts a core duration to std.
pub fn std_dur(d: Duration) -> StdDuration {
    StdDuration::from_nanos(d.as_nanos())
}

/// How long from `now` until `at` (zero if past), capped at `cap`.
pub fn until(now: Instant, at: Option<Instant>, cap: StdDuration) -> StdDuration {
    match at {
        Some(t) => std_dur(t.saturating_since(now)).min(cap),
        None => cap,
    }
}

/// A std IPv4 socket address as the core's [`PeerAddr`]; `None` for IPv6.
pub fn peer(a: SocketAddr) -> Option<PeerAddr> {
    match a {
        SocketAddr::V4(v4) => Some(peer_v4(v4)),
        SocketAddr::V6(v6) => v6
            .ip()
            .to_ipv4_mapped()
            .map(|ip| PeerAddr::new(ip.octets(), v6.port())),
    }
}

/// A std IPv4 socket address as a [`PeerAddr`].
pub fn peer_v4(a: SocketAddrV4) -> PeerAddr {
    PeerAddr::new(a.ip().octets(), a.port())
}

/// A [`PeerAddr`] as a std socket address.
pub fn sock_v4(p: PeerAddr) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::from(p.ip), p.port)
}

/// `ppoll` on `fds` for at most `timeout`; returns how many are ready (0 on timeout or
/// EINTR, so a signal makes the caller re-check its stop flag).
pub fn poll(fds: &mut [libc::pollfd], timeout: StdDuration) -> io::Result<usize> {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: `fds` is a valid, exclusively borrowed array of `fds.len()` pollfd entries and
    // `ts` a valid timespec; both outlive the call; a null sigmask leaves the mask alone.
    let r = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(0)
        } else {
            Err(e)
        };
    }
    Ok(r as usize)
}

/// A pollfd for reading `fd`.
pub fn pollin(fd: &impl AsRawFd) -> libc::pollfd {
    libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }
}

/// Slowest average rate, in bytes a second, at which a peer may take a frame: a frame of
/// `len` bytes that has not gone out `timeout + len / MIN_WRITE_RATE` after its first
/// write ends the connection ([`TooSlow`]), whatever the peer took meanwhile. 4 KiB/s is
/// half a 64 kbit/s line, below any link a ring is replicated over (a 1 MiB frame gets
/// 256 s more than the timeout), while a peer that reads a few bytes now and then, just
/// often enough to beat the timeout on each write, can no longer hold a session (and a
/// long NAK answer, frame after frame) for as long as it likes.
pub const MIN_WRITE_RATE: u64 = 4096;

/// Why [`write_all_unless`] gave up on a peer that kept taking bytes, but too slowly: the
/// error inside its `TimedOut` [`io::Error`] (`get_ref()` and `downcast_ref` find it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooSlow {
    /// Bytes of the frame the peer had taken.
    pub taken: usize,
    /// The frame's length.
    pub len: usize,
    /// How long the frame had been going out.
    pub elapsed: StdDuration,
    /// The slowest average rate allowed ([`MIN_WRITE_RATE`]), bytes a second.
    pub min_rate: u64,
}

impl std::fmt::Display for TooSlow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "peer took {} of {} bytes in {} ms, slower on average than the minimum of {} bytes/s",
            self.taken,
            self.len,
            self.elapsed.as_millis(),
            self.min_rate
        )
    }
}

impl std::error::Error for TooSlow {}

/// Writes all of `bytes` to a non-blocking stream, giving up once the peer has taken no
/// byte for `timeout` (the source's TCP write timeout, spec §20.2 and §24: a limit on each
/// write, as SO_SNDTIMEO sets one, not on a frame): a mirror that stops reading cannot
/// hold a session thread forever, and one that reads slowly still gets a frame that takes
/// longer than `timeout` to go out (a slow link, one large blob). It also gives up, with
/// [`TooSlow`], on a frame still going out `timeout` plus its length at
/// [`MIN_WRITE_RATE`] after it began.
pub fn write_all_within<S: Write + AsRawFd>(
    s: &mut S,
    bytes: &[u8],
    timeout: StdDuration,
) -> io::Result<()> {
    write_all_unless(s, bytes, timeout, &AtomicBool::new(false)).map(|_| ())
}

/// How [`write_all_unless`] ended without an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Written {
    /// Every byte was written.
    All,
    /// The stop flag was set while the peer had no room: some bytes may be unwritten, and
    /// the stream must not be written again (a frame may have been cut).
    Stopped,
}

/// Longest wait for room between two checks of the stop flag in [`write_all_unless`].
const STOP_CHECK: StdDuration = StdDuration::from_millis(20);

/// [`write_all_within`] that also gives up, with [`Written::Stopped`], once `stop` is set:
/// a slow reader (each write may wait up to `timeout`) cannot keep a stopping server
/// waiting.
pub fn write_all_unless<S: Write + AsRawFd>(
    s: &mut S,
    bytes: &[u8],
    timeout: StdDuration,
    stop: &AtomicBool,
) -> io::Result<Written> {
    write_all_at_rate(s, bytes, timeout, MIN_WRITE_RATE, stop)
}

/// [`write_all_unless`] with `min_rate` (bytes a second, at least 1) for
/// [`MIN_WRITE_RATE`].
fn write_all_at_rate<S: Write + AsRawFd>(
    s: &mut S,
    mut bytes: &[u8],
    timeout: StdDuration,
    min_rate: u64,
    stop: &AtomicBool,
) -> io::Result<Written> {
    let (len, start) = (bytes.len(), std::time::Instant::now());
    // No deadline when `timeout` is past what an `Instant` holds (`Duration::MAX`).
    let mut deadline = crate::wait::deadline_after(timeout);
    let at_rate = len as u128 * 1_000_000_000 / u128::from(min_rate.max(1));
    let at_rate = StdDuration::from_nanos(u64::try_from(at_rate).unwrap_or(u64::MAX));
    let whole = timeout
        .checked_add(at_rate)
        .and_then(|d| start.checked_add(d));
    let too_slow = |left: usize| {
        let e = TooSlow {
            taken: len - left,
            len,
            elapsed: start.elapsed(),
            min_rate,
        };
        io::Error::new(io::ErrorKind::TimedOut, e)
    };
    while !bytes.is_empty() {
        match s.write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                bytes = &bytes[n..];
                if !bytes.is_empty() && !crate::wait::before(whole) {
                    return Err(too_slow(bytes.len()));
                }
                // The peer took bytes: the timeout runs from here.
                deadline = crate::wait::deadline_after(timeout);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // Relaxed: a plain flag.
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    return Ok(Written::Stopped);
                }
                let now = std::time::Instant::now();
                let left = |d: Option<std::time::Instant>| {
                    d.map_or(STOP_CHECK, |d| d.saturating_duration_since(now))
                };
                if left(deadline).is_zero() {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "peer did not read within the write timeout",
                    ));
                }
                if left(whole).is_zero() {
                    return Err(too_slow(bytes.len()));
                }
                let left = left(deadline).min(left(whole));
                let mut fd = [libc::pollfd {
                    fd: s.as_raw_fd(),
                    events: libc::POLLOUT,
                    revents: 0,
                }];
                poll(&mut fd, left.min(STOP_CHECK))?;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Written::All)
}

/// Longest futex wait of a park between two looks at the ring, and the longest park that
/// runs no §11 membarrier. The barrier closes a sub-microsecond race between a producer's
/// publish and this thread's announcement (a wake-up lost to it costs at most this long),
/// but each one is an IPI to every CPU running a process registered for it: the producer's
/// among them. Run in every park, as it was (100 µs into each), an idle TCP session sent
/// about 450 a second and a UDP one (a heartbeat every 1 ms) about 1,000, and a stream at
/// 1,000 records/s one per record. Now a park of at most this long runs none, and a longer
/// one runs one, this far into it, and stays announced (no second barrier) to its end.
const SLICE: StdDuration = StdDuration::from_millis(2);

/// Idle waiting for a ring to publish `cursor`: a futex sleep with a short timeout (the
/// producer wakes sleepers, spec §11), or with `spin` a bounded, yielding poll first (see
/// [`SpinPolicy`]), so that on a machine with fewer cores than busy threads polling never
/// keeps the producer off its core, and a sparse stream parks instead of polling. A steady
/// stream's next record is anticipated ([`Anticipator`]): the sleep ends just before it
/// is due and a short poll catches it.
#[derive(Debug)]
pub struct RingWaiter {
    policy: SpinPolicy,
    anticipate: Anticipator,
    /// The cursor of the last wait.
    cursor: u64,
    /// Empty polls at the cursor, to wait for the ring to change where `write_seq` has
    /// reached the cursor but the slot never holds its record (see [`Idle`]).
    idle: Idle,
}

impl RingWaiter {
    /// A waiter; `spin` enables the bounded, adaptive poll, `anticipate` the anticipated
    /// wake-ups of a steady stream.
    pub fn new(spin: bool, anticipate: bool) -> RingWaiter {
        RingWaiter {
            policy: SpinPolicy::new(spin),
            anticipate: Anticipator::new(anticipate),
            cursor: 0,
            idle: Idle::default(),
        }
    }

    /// The polling state (wins, losses, whether the next wait polls).
    pub fn policy(&self) -> &SpinPolicy {
        &self.policy
    }

    /// The arrival model (windows hit and lost).
    pub fn anticipator(&self) -> &Anticipator {
        &self.anticipate
    }

    /// How long until the current polling window closes, if one is open or ahead.
    pub fn window_left(&self) -> Option<StdDuration> {
        let now = std::time::Instant::now();
        self.anticipate
            .window_end(now)
            .map(|to| to.saturating_duration_since(now))
    }

    /// Returns once there is something to do at `cursor` (the consumers' wait test,
    /// `wait::published`: `write_seq >= cursor`, or on an MPMC-flagged ring the ticket
    /// published or a lap behind), or after about `max`. Called after each poll of the ring
    /// that found nothing at `cursor`: once [`LOOKASIDE_POLLS`] of them in a row saw
    /// `write_seq` and the cursor's slot unchanged (a corrupt header whose `write_seq` is
    /// ahead of the slots, a writer that does not follow spec §4.2), it waits for either
    /// to change instead, as the consumers do (`Idle`); trusting `published` there would
    /// return at once for ever, a serve thread spinning on the source's host.
    ///
    /// [`LOOKASIDE_POLLS`]: ringwire_core::broadcast::LOOKASIDE_POLLS
    pub fn wait(&mut self, view: &RingView, cursor: u64, max: StdDuration) {
        let target = self.idle.after_empty_poll(view, cursor);
        let ready = || target.ready(view);
        if cursor > self.cursor {
            // The caller moved on: what it waited for last time came in between.
            let _ = self.anticipate.found();
        }
        self.cursor = cursor;
        if ready() || self.policy.poll(max, ready) {
            self.anticipate.arrived(std::time::Instant::now());
            return;
        }
        let t0 = std::time::Instant::now();
        let got = self
            .anticipate
            .wait(max, ready, |d| park_on(view, target, d));
        self.policy.parked(t0.elapsed(), got);
    }
}

/// Sleeps on the ring's futex for at most `d` (a short `d` with a plain sleep), until the
/// ring has something at `target`'s cursor: a [`FutexWait`] sleep announced once for the
/// whole park, futex waits of at most [`SLICE`] with a look at the ring after each, and the
/// membarrier only once the park outlasts its first slice (see [`SLICE`]).
fn park_on(view: &RingView, target: WaitFor, d: StdDuration) {
    if d < StdDuration::from_micros(20) {
        if !d.is_zero() {
            crate::sys::sleep(d);
        }
        return;
    }
    FutexWait::new(0, Some(d))
        .with_deferred_barrier(SLICE)
        .with_slices(SLICE)
        .wait_on(view.futex(), None, || target.ready(view));
}

/// A ring whose `write_seq` is ahead of its slots (a corrupt header, a writer that does not
/// follow §4.2): the source finds nothing at its cursor however often it looks, so a waiter
/// that trusted `published` (`write_seq >= cursor`) returned at once for ever and the serve
/// thread spun. Checks that the waiter `make(spin)` builds (called after each empty poll,
/// as the source's threads call theirs), with and without spinning, sleeps after
/// [`LOOKASIDE_POLLS`] quick returns, and that a record that then lands in the slot still
/// ends the next wait at once. `r` must be fresh: nothing published at sequence 1.
///
/// [`LOOKASIDE_POLLS`]: ringwire_core::broadcast::LOOKASIDE_POLLS
#[cfg(test)]
pub(crate) fn check_waits_sleep_at_a_write_seq_ahead_of_the_slots<W>(
    r: &RingView,
    make: impl Fn(bool) -> W,
) where
    W: FnMut(&RingView, u64, StdDuration),
{
    use ringwire_core::sync::Ordering as O;
    // Release: as a writer's publish.
    r.write_seq().store(5, O::Release);
    for spin in [false, true] {
        let mut wait = make(spin);
        let t0 = std::time::Instant::now();
        let mut waits = 0u32;
        while t0.elapsed() < StdDuration::from_millis(200) {
            wait(r, 1, StdDuration::from_millis(20));
            waits += 1;
        }
        // 64 quick returns, then about 10 waits of 20 ms; without the rule, millions.
        assert!(waits < 200, "spin {spin}: {waits} waits in 200 ms");
    }
    let mut wait = make(false);
    for _ in 0..100 {
        wait(r, 1, StdDuration::from_millis(1));
    }
    let dt = time_until_published(r, false, || wait(r, 1, StdDuration::from_secs(10)));
    assert!(dt < StdDuration::from_secs(5), "{dt:?}");
}

/// How long `wait` takes while another thread publishes record 1 of `r` 20 ms in, and then
/// wakes the ring's sleepers if `wake` (without, the futex word is bumped for an announced
/// sleeper but nobody wakes it: a writer without §11, hardware).
#[cfg(test)]
fn time_until_published(r: &RingView, wake: bool, wait: impl FnOnce()) -> StdDuration {
    let t0 = std::time::Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            crate::sys::sleep(StdDuration::from_millis(20));
            r.write_slot(1, &[7; 8]);
            if r.publish(1) && wake {
                crate::wait::wake_all(r);
            }
        });
        wait();
    });
    t0.elapsed()
}

/// `n` zero bytes whose memory is committed only as it is written, or `None` if they cannot
/// be mapped.
///
/// A mirror's stream buffer grows, at the first DATA header announcing a frame longer than
/// it, to the ring's longest frame (a blob as long as the arena, up to 4 GiB), and serve
/// gives each session a buffer that long. Zero-filling it (`Vec::resize`) would commit all
/// of it on a header alone, before a byte of the frame came. The bytes are an anonymous
/// mapping of their own, whose pages the kernel commits only as they are written and which
/// is unmapped when the buffer is dropped. `calloc` was not enough: once glibc has freed one
/// large block it serves blocks of up to 32 MiB from its per-thread arenas, zero-filling
/// them there (committing them whole) and keeping them committed after they are freed, so a
/// serve of a blob ring with a 16 MiB arena held 16 MiB per session from the accept and
/// some 400 MiB with no session at all after a few hundred had come and gone. A failed
/// mapping is an error, not an abort: serve's session buffers are made so too.
pub(crate) fn lazy_zeroed(n: usize) -> Option<ZeroedBuf> {
    if n == 0 {
        return Some(ZeroedBuf(None));
    }
    memmap2::MmapMut::map_anon(n)
        .ok()
        .map(|m| ZeroedBuf(Some(m)))
}

/// The bytes of [`lazy_zeroed`]: an anonymous mapping (none when empty), unmapped on drop.
pub(crate) struct ZeroedBuf(Option<memmap2::MmapMut>);

impl std::ops::Deref for ZeroedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.0.as_deref().unwrap_or(&[])
    }
}

impl std::ops::DerefMut for ZeroedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.0.as_deref_mut().unwrap_or(&mut [])
    }
}

impl std::fmt::Debug for ZeroedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ZeroedBuf({} bytes)", self.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringwire_core::{Geometry, Region};

    fn ring() -> RingView {
        let geo = Geometry::spmc(16, 16, 8, 0, false).unwrap();
        let words = geo.total_len().unwrap() as usize / 8;
        let mem: &'static mut [u64] = Box::leak(vec![0u64; words].into_boxed_slice());
        // SAFETY: a leaked buffer of this ring alone: no other view of it exists.
        unsafe { RingView::init(Region::from_static(mem).unwrap(), &geo) }.unwrap()
    }

    #[test]
    fn spin_that_never_wins_falls_back_to_parking() {
        let r = ring();
        let mut w = RingWaiter::new(true, false);
        assert!(w.policy().is_polling());
        for _ in 0..super::super::spin::MISSES_TO_PARK {
            w.wait(&r, 1, StdDuration::from_secs(1));
        }
        assert!(w.policy().losses >= 3, "{w:?}");
        assert!(!w.policy().is_polling(), "{w:?}");
        // Published: returns at once, whatever the policy.
        r.write_slot(1, &[7; 8]);
        r.publish(1);
        let t0 = std::time::Instant::now();
        w.wait(&r, 1, StdDuration::from_secs(5));
        assert!(t0.elapsed() < StdDuration::from_secs(1));
    }

    #[test]
    fn without_spin_the_wait_is_bounded_by_max() {
        let r = ring();
        let mut w = RingWaiter::new(false, false);
        let t0 = std::time::Instant::now();
        w.wait(&r, 1, StdDuration::from_millis(1));
        let dt = t0.elapsed();
        assert!(dt >= StdDuration::from_micros(500), "{dt:?}");
        assert!(dt < StdDuration::from_millis(500), "{dt:?}");
        assert_eq!(w.policy().wins + w.policy().losses, 0);
    }

    /// An idle park runs the §11 membarrier (an IPI to every CPU running a registered
    /// process) once it has lasted a slice, once per park: none in parks of up to 2 ms (a UDP
    /// session's, between 1 ms heartbeats), one in a 40 ms park. Each used to run one 100 µs
    /// in. A publish still ends a long park at once.
    #[test]
    fn a_park_runs_one_barrier_and_only_past_its_first_slice() {
        let barriers = || crate::sys::MEMBARRIERS.with(|n| n.get());
        let r = ring();
        let mut w = RingWaiter::new(false, false);
        let b0 = barriers();
        for _ in 0..10 {
            w.wait(&r, 1, StdDuration::from_micros(1_500));
        }
        assert_eq!(barriers() - b0, 0, "short parks");
        let t0 = std::time::Instant::now();
        w.wait(&r, 1, StdDuration::from_millis(40));
        let dt = t0.elapsed();
        assert!(dt >= StdDuration::from_millis(30), "{dt:?}");
        assert_eq!(barriers() - b0, 1, "one 40 ms park");
        // A producer publishing 20 ms into a 10 s park wakes it.
        let dt = time_until_published(&r, true, || w.wait(&r, 1, StdDuration::from_secs(10)));
        assert!(dt < StdDuration::from_secs(2), "{dt:?}");
        assert!(crate::wait::published(&r, 1));
    }

    /// A park only just longer than a slice runs no barrier once its first wait has run
    /// past the park's end (the wait's timer slack, about 50 µs, sees to that nearly always):
    /// the sleep is over, and the barrier is an IPI to every registered CPU. Before, every
    /// such park ran one.
    #[test]
    fn a_park_just_over_a_slice_runs_no_barrier_after_its_end() {
        let barriers = || crate::sys::MEMBARRIERS.with(|n| n.get());
        let r = ring();
        let b0 = barriers();
        for _ in 0..20 {
            park_on(
                &r,
                Idle::default().target(1),
                SLICE + StdDuration::from_micros(10),
            );
        }
        // A wait that ends within 10 µs of its timeout is rare, not impossible.
        assert!(
            barriers() - b0 <= 3,
            "{} barriers in 20 parks",
            barriers() - b0
        );
    }

    /// A park looks at the ring after every slice: a record published by a writer that
    /// makes no `FUTEX_WAKE` (hardware, a writer without §11) ends a 10 s park within a
    /// slice, not at its end.
    #[test]
    fn a_park_sees_a_record_published_without_a_wake_up() {
        let r = ring();
        let mut w = RingWaiter::new(false, false);
        let dt = time_until_published(&r, false, || w.wait(&r, 1, StdDuration::from_secs(10)));
        assert!(dt < StdDuration::from_secs(5), "{dt:?}");
        assert!(crate::wait::published(&r, 1));
    }

    #[test]
    fn a_write_seq_ahead_of_the_slots_leaves_the_waiter_asleep() {
        let r = ring();
        check_waits_sleep_at_a_write_seq_ahead_of_the_slots(&r, |spin| {
            let mut w = RingWaiter::new(spin, false);
            move |r: &RingView, cursor, max| w.wait(r, cursor, max)
        });
    }
    /// A peer that reads nothing: the write gives up soon after the stop flag is set, as
    /// [`Written::Stopped`], well before the write timeout; without the flag it times out.
    /// A timeout past what an `Instant` holds (`Duration::MAX`) is no deadline, not a panic.
    #[test]
    fn a_stopped_write_ends_before_its_timeout() {
        use std::sync::atomic::Ordering as O;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut w = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_r, _) = l.accept().unwrap();
        w.set_nonblocking(true).unwrap();
        let big = vec![7u8; 64 << 20];
        for timeout in [StdDuration::from_secs(30), StdDuration::MAX] {
            let stop = AtomicBool::new(false);
            let t0 = std::time::Instant::now();
            let r = std::thread::scope(|sc| {
                sc.spawn(|| {
                    std::thread::sleep(StdDuration::from_millis(200));
                    stop.store(true, O::Relaxed);
                });
                write_all_unless(&mut w, &big, timeout, &stop)
            });
            let dt = t0.elapsed();
            assert_eq!(r.unwrap(), Written::Stopped, "{timeout:?}");
            assert!(dt >= StdDuration::from_millis(200), "{timeout:?}: {dt:?}");
            assert!(dt < StdDuration::from_secs(2), "{timeout:?}: {dt:?}");
        }
        let e = write_all_within(&mut w, &big, StdDuration::from_millis(100)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    }

    /// The socket buffers of [`small_buffer_pair`]: well below the frames the slow-reader
    /// tests write, so the kernel holds little of a frame and the reader's pace decides.
    const SMALL_BUF: usize = 64 << 10;

    /// A loopback TCP connection with [`SMALL_BUF`]-byte buffers: the writer's end,
    /// non-blocking (as a session's socket is), and the reader's end, whose reads time out
    /// after 5 s.
    fn small_buffer_pair() -> (std::net::TcpStream, std::net::TcpStream) {
        let l = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        l.set_recv_buffer_size(SMALL_BUF).unwrap();
        l.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        l.listen(1).unwrap();
        let l: std::net::TcpListener = l.into();
        let w = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        socket2::SockRef::from(&w)
            .set_send_buffer_size(SMALL_BUF)
            .unwrap();
        w.set_nonblocking(true).unwrap();
        let (r, _) = l.accept().unwrap();
        r.set_read_timeout(Some(StdDuration::from_secs(5))).unwrap();
        (w, r)
    }

    /// The slow reader of the tests below: reads up to `chunk` bytes every 10 ms until
    /// `frame` bytes came, the stream ended or failed, or 10 s passed since `t0`; returns
    /// the bytes read.
    fn read_slowly(
        r: &mut std::net::TcpStream,
        chunk: usize,
        frame: usize,
        t0: std::time::Instant,
    ) -> usize {
        use std::io::Read;
        let mut buf = vec![0u8; chunk];
        let mut got = 0;
        while got < frame && t0.elapsed() < StdDuration::from_secs(10) {
            std::thread::sleep(StdDuration::from_millis(10));
            match r.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        got
    }

    /// A peer that reads, only slower than one frame per timeout: every write makes
    /// progress well within the timeout, so the frame goes through. The timeout used to
    /// bound the whole frame, so a mirror that needed more than 5 s for one frame (a slow
    /// link, a frame of one large blob) lost its session at that frame on every reconnect,
    /// where a timeout on each write (spec §20.2, as SO_SNDTIMEO sets one) only ends a peer
    /// that takes nothing for 5 s. Small socket buffers keep what the kernel holds well
    /// below the frame.
    #[test]
    fn a_slow_reader_gets_a_frame_longer_than_the_timeout_takes() {
        const FRAME: usize = 4 << 20;
        let (mut w, mut r) = small_buffer_pair();
        let frame = vec![5u8; FRAME];
        let timeout = StdDuration::from_millis(300);
        let t0 = std::time::Instant::now();
        let (written, read) = std::thread::scope(|sc| {
            // About 6 MiB/s: the frame takes some 700 ms, each chunk 10 ms.
            let reader = sc.spawn(move || read_slowly(&mut r, SMALL_BUF, FRAME, t0));
            let written = write_all_within(&mut w, &frame, timeout);
            if written.is_err() {
                let _ = w.shutdown(std::net::Shutdown::Both);
            }
            (written, reader.join().unwrap())
        });
        let dt = t0.elapsed();
        assert!(
            dt > timeout,
            "the frame took {dt:?}: not longer than the timeout"
        );
        written.unwrap_or_else(|e| panic!("after {dt:?}: {e}"));
        assert_eq!(read, FRAME);
    }

    /// A peer that keeps taking a little of a frame, often enough that no write waits as
    /// long as the timeout, but on average slower than the minimum rate: the write gives
    /// up with [`TooSlow`] once the frame has had the timeout plus its length at that rate
    /// (here 1 s + 1 MiB at 1 MiB/s), not after the whole frame went out at the peer's
    /// pace (about 5 s at 2 KiB every 10 ms). Before, such a peer held the frame (and a
    /// session, and a long NAK answer frame after frame) as long as it kept reading.
    #[test]
    fn a_trickling_reader_is_cut_off_at_the_minimum_rate() {
        const FRAME: usize = 1 << 20;
        let (mut w, mut r) = small_buffer_pair();
        let frame = vec![9u8; FRAME];
        let (timeout, rate) = (StdDuration::from_secs(1), 1 << 20);
        let t0 = std::time::Instant::now();
        let (written, read) = std::thread::scope(|sc| {
            // About 200 KiB/s, a fifth of the minimum rate.
            let reader = sc.spawn(move || read_slowly(&mut r, 2048, FRAME, t0));
            let written = write_all_at_rate(&mut w, &frame, timeout, rate, &AtomicBool::new(false));
            let dt = t0.elapsed();
            let _ = w.shutdown(std::net::Shutdown::Both);
            (written.map(|_| dt), reader.join().unwrap())
        });
        let e = written.expect_err("a trickling reader got the whole frame");
        let dt = t0.elapsed();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        let why = e
            .get_ref()
            .and_then(|e| e.downcast_ref::<TooSlow>())
            .unwrap_or_else(|| panic!("not TooSlow: {e}"));
        assert_eq!((why.len, why.min_rate), (FRAME, rate), "{why}");
        assert!(why.taken > 0 && why.taken < FRAME, "{why}");
        assert!(why.elapsed >= StdDuration::from_secs(2), "{why}");
        assert!(read < FRAME, "the reader got {read} bytes");
        assert!(dt < StdDuration::from_secs(4), "cut off after {dt:?}");
        assert!(e.to_string().contains("slower on average"), "{e}");
    }

    #[test]
    fn addresses_round_trip() {
        let a: SocketAddr = "10.1.2.3:4000".parse().unwrap();
        let p = peer(a).unwrap();
        assert_eq!(p, PeerAddr::new([10, 1, 2, 3], 4000));
        assert_eq!(SocketAddr::V4(sock_v4(p)), a);
        assert!(peer("[2001:db8::1]:1".parse().unwrap()).is_none());
        assert_eq!(
            until(
                Instant::from_nanos(10),
                Some(Instant::from_nanos(5)),
                StdDuration::from_secs(1)
            ),
            StdDuration::ZERO
        );
    }
}
