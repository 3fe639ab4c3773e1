//! Thin, safe wrappers over the Linux system calls the adapter needs: `flock`, inode
//! comparison, `futex`, `membarrier` and process liveness. Each wrapper keeps its `unsafe`
//! to one line with the reason it holds.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Once, OnceLock};
use std::time::Duration;

use ringwire_core::broadcast::registry;

/// `flock(fd, LOCK_EX | LOCK_NB)`.
pub(crate) fn try_lock_exclusive(file: &File) -> io::Result<()> {
    // SAFETY: flock only reads the descriptor number, which `file` keeps open.
    let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `flock(fd, LOCK_SH | LOCK_NB)`: fails with `WouldBlock` while another open file holds
/// the exclusive lock.
pub(crate) fn try_lock_shared(file: &File) -> io::Result<()> {
    // SAFETY: as in try_lock_exclusive.
    let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `flock(fd, LOCK_UN)`; errors are ignored (closing the descriptor releases it anyway).
pub(crate) fn unlock(file: &File) {
    // SAFETY: as in try_lock_exclusive.
    let _ = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
}

/// Forks this process has been through since [`fork_generation`] was first called (a
/// child's count is its parent's plus one). Handles that keep state of their process (a
/// registry slot named by its pid) record the value when they take it and compare it on
/// use: a relaxed load of this static, where `getpid` would be a system call per receive.
static FORK_GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The `pthread_atfork` child handler: runs in the child of every `fork` (not of a bare
/// `clone` or `vfork`, which `std::process::Command` uses only to exec at once).
extern "C" fn count_fork_in_child() {
    // Relaxed: the child has one thread while its handlers run; later loads are its own.
    // An atomic add is async-signal-safe, as a handler run by `fork` must be.
    FORK_GENERATION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// This process's fork generation, installing the handler that counts forks on the first
/// call (a handle calls it when it takes its process state, before any fork it must
/// notice). Should `pthread_atfork` fail (out of memory), forks go uncounted, as they did
/// before the handler existed.
pub(crate) fn fork_generation() -> u64 {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: registers a handler that is a plain `extern "C" fn` for the life of the
        // process; it touches only an atomic static.
        let _ = unsafe { libc::pthread_atfork(None, None, Some(count_fork_in_child)) };
    });
    // Relaxed: see `FORK_GENERATION`.
    FORK_GENERATION.load(std::sync::atomic::Ordering::Relaxed)
}

/// Whether this process is a child forked since [`fork_generation`] returned `generation`
/// (in this process or an ancestor).
#[inline(always)]
pub(crate) fn forked_since(generation: u64) -> bool {
    // Relaxed: the value only changes in a child, before any of its code runs.
    FORK_GENERATION.load(std::sync::atomic::Ordering::Relaxed) != generation
}

/// (device, inode) of an open file.
pub(crate) fn file_id(file: &File) -> io::Result<(u64, u64)> {
    let m = file.metadata()?;
    Ok((m.dev(), m.ino()))
}

/// (device, inode) of a path, or `None` when the path does not exist.
pub(crate) fn path_id(path: &Path) -> io::Result<Option<(u64, u64)>> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(Some((m.dev(), m.ino()))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

const MEMBARRIER_CMD_GLOBAL_EXPEDITED: libc::c_long = 2;
const MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED: libc::c_long = 4;

/// Registers this process for expedited global membarriers (spec §1.2 step 1), once per
/// process. Errors are ignored here: a writer asks [`fenced_publish`] whether its own
/// publishes must fence instead.
pub(crate) fn membarrier_register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: membarrier takes two integers and touches no memory of ours.
        let _ = unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED,
                0,
            )
        };
    });
}

/// Registers this process for expedited global membarriers, once per process, and tells
/// whether the kernel accepted: only then may this process's queue handles skip the fence
/// before their sleeper check (see `queue::wait`).
pub(crate) fn membarrier_registered() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        // SAFETY: membarrier takes two integers and touches no memory of ours.
        let r = unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED,
                0,
            )
        };
        r == 0
    })
}

/// Whether this process's ring writers must publish with a full fence of their own
/// (`publish_fenced`): a sleeper's membarrier only reaches processes registered for it,
/// and without it a writer with only a compiler fence could miss the sleeper (spec §11,
/// `RingView::bump_futex_if_waiting`). False wherever the registration succeeded.
pub(crate) fn fenced_publish() -> bool {
    !membarrier_registered()
}

/// `membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED)`: makes a ringfire producer, which only has
/// a compiler fence between its publish and its waiter check, see our waiter count (§11).
pub(crate) fn membarrier_global() {
    #[cfg(test)]
    {
        MEMBARRIERS.with(|n| n.set(n.get() + 1));
        sleep(MEMBARRIER_DELAY.with(|d| d.get()));
    }
    // SAFETY: as in membarrier_register.
    let _ = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0) };
}

#[cfg(test)]
thread_local! {
    /// The barriers this thread has run (unit tests count them).
    pub(crate) static MEMBARRIERS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// How long this thread's barriers take on top of the system call: unit tests set it to
    /// stand in for a barrier slowed by many CPUs or a busy hypervisor.
    pub(crate) static MEMBARRIER_DELAY: std::cell::Cell<Duration> =
        const { std::cell::Cell::new(Duration::ZERO) };
}

/// How a `FUTEX_WAIT` ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FutexOutcome {
    /// Woken by `FUTEX_WAKE` (or spuriously).
    Woken,
    /// The word no longer held the expected value (EAGAIN).
    Changed,
    /// The timeout passed (ETIMEDOUT).
    TimedOut,
    /// A signal interrupted the wait (EINTR).
    Interrupted,
    /// The kernel refused the wait with another error (its errno): a seccomp filter's
    /// EPERM or ENOSYS, say. Unlike the others it will most likely come back on the next
    /// try, at once.
    Failed(i32),
}

/// A `timespec`'s seconds (`time_t`: 64 bits here, 32 on 32-bit targets without 64-bit
/// time) from a count of seconds, saturating: an `as` cast would wrap a long timeout on a
/// 32-bit `time_t` into a short or negative one (2^32 + 5 s into 5 s).
trait TimeT: Sized {
    fn saturating_from_secs(secs: u64) -> Self;
}

macro_rules! time_t_from_secs {
    ($($t:ty),*) => {$(
        impl TimeT for $t {
            fn saturating_from_secs(secs: u64) -> Self {
                <$t>::try_from(secs).unwrap_or(<$t>::MAX)
            }
        }
    )*};
}
// Both widths, whichever `libc::time_t` is: the tests check the 32-bit one on any host.
time_t_from_secs!(i32, i64);

/// `FUTEX_WAIT` (shared, not private: the word lives in a file mapping shared between
/// processes) on `word` while it still holds `expected`, for at most `timeout`.
pub(crate) fn futex_wait(word: *mut u32, expected: u32, timeout: Duration) -> FutexOutcome {
    let ts = libc::timespec {
        tv_sec: TimeT::saturating_from_secs(timeout.as_secs()),
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `word` points at a live, 4-aligned u32 inside a mapping the caller keeps open;
    // the kernel only reads it, and `ts` outlives the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word,
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
        )
    };
    if r == 0 {
        return FutexOutcome::Woken;
    }
    match io::Error::last_os_error().raw_os_error() {
        Some(libc::EAGAIN) => FutexOutcome::Changed,
        Some(libc::ETIMEDOUT) => FutexOutcome::TimedOut,
        Some(libc::EINTR) => FutexOutcome::Interrupted,
        e => FutexOutcome::Failed(e.unwrap_or(0)),
    }
}

/// `FUTEX_WAKE` every waiter on `word` (shared futex). Returns the number woken.
pub(crate) fn futex_wake_all(word: *mut u32) -> i64 {
    // SAFETY: `word` points at a live u32 inside a mapping the caller keeps open; FUTEX_WAKE
    // does not access the memory, it only names the futex.
    unsafe { libc::syscall(libc::SYS_futex, word, libc::FUTEX_WAKE, i32::MAX) }
}

/// The clock `id` (`CLOCK_MONOTONIC`, `CLOCK_MONOTONIC_COARSE`, …) in nanoseconds,
/// saturating. One `clock_gettime`, so async-signal-safe.
pub(crate) fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the kernel (or the vDSO) to fill.
    unsafe { libc::clock_gettime(id, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// Sleeps for `d` on `CLOCK_MONOTONIC`, up to a deadline taken once at the start: a
/// signal whose handler was installed without `SA_RESTART` ends the sleep early, and the
/// sleep goes on to the same deadline. `std::thread::sleep` goes on with the time the
/// kernel says was left, which includes the timer's slack (50 µs by default), so under
/// signals coming every 50 µs or so (a profiler's timer, a `setitimer` storm) a 1 ms sleep
/// never ended.
pub(crate) fn sleep(d: Duration) {
    if d.is_zero() {
        return;
    }
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the kernel (or the vDSO) to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    let mut nsec = ts.tv_nsec as u64 + u64::from(d.subsec_nanos());
    let carry = nsec / 1_000_000_000;
    nsec %= 1_000_000_000;
    // Past what a timespec holds, the deadline is the end of time (the kernel caps it).
    let secs = libc::time_t::saturating_from_secs(d.as_secs()).saturating_add(carry as _);
    let deadline = libc::timespec {
        tv_sec: ts.tv_sec.saturating_add(secs),
        tv_nsec: nsec as libc::c_long,
    };
    loop {
        // SAFETY: `deadline` is a valid timespec that outlives the call; a null remainder
        // is allowed with TIMER_ABSTIME.
        let r = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &deadline,
                std::ptr::null_mut(),
            )
        };
        match r {
            0 => return,
            libc::EINTR => continue,
            // Not expected for a valid deadline; std's sleep still bounds the wait.
            _ => return std::thread::sleep(d),
        }
    }
}

/// Spec §9 liveness: `kill(pid, 0)` succeeds or fails with EPERM. `pid > i32::MAX` and 0
/// are dead.
pub fn pid_alive(pid: u32) -> bool {
    if pid == 0 || pid > i32::MAX as u32 {
        return false;
    }
    // SAFETY: signal 0 performs only the permission and existence check.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Whether the process `pid`, which was `incarnation` when it was seen (its
/// [`own_incarnation`] then), still runs: [`reader_alive`]'s rules with `incarnation` for
/// a token's. Where `/proc` shows it, a zombie (exited, not reaped yet) does not run, nor
/// does a later process that was given the same pid; `kill(pid, 0)` alone counts either
/// alive, the zombie for as long as it stays unreaped and the pid for as long as its new
/// process lives.
pub(crate) fn process_running(pid: u32, incarnation: Option<registry::Incarnation>) -> bool {
    alive_as(pid, incarnation)
}

/// What a registry slot's reader looks like from here: [`pid_alive`], and then, where
/// `/proc` belongs to this process's PID namespace, two more rules (see the core's
/// [`registry`] module):
///
/// * a process in state `Z` (a zombie its parent has not reaped) or `X` is dead, unless it
///   still counts more than one thread (its main thread exited, others run);
/// * when `token` carries its registrant's incarnation
///   ([`registry::token_incarnation`]) from this PID namespace, a process at `pid` that
///   started at another time is not the registrant, and the reader is dead.
///
/// Where `/proc` is missing, unreadable (`hidepid`, say) or another namespace's, or the
/// token comes from another PID namespace (the pid means something else there), the pid
/// alone decides, as in the reference. One `kill` and at most one read of
/// `/proc/<pid>/stat` per call; what this process needs to know of itself is read once.
pub fn reader_alive(pid: u32, token: u64) -> bool {
    alive_as(pid, registry::token_incarnation(pid, token))
}

/// [`reader_alive`] of a process whose incarnation, if known, is `incarnation`.
fn alive_as(pid: u32, incarnation: Option<registry::Incarnation>) -> bool {
    if !pid_alive(pid) {
        return false;
    }
    let Some(me) = proc_self() else {
        return true;
    };
    if incarnation.is_some_and(|i| i.pid_ns != me.pid_ns) {
        return true;
    }
    let Some(stat) = read_stat(pid) else {
        return true;
    };
    // A process whose main thread exited while others run shows its main thread's state,
    // `Z`, with those threads counted: alive.
    if matches!(stat.state, b'Z' | b'X') && stat.threads <= 1 {
        return false;
    }
    incarnation.is_none_or(|i| i.may_have_started_at(me.initial_ticks(stat.start)))
}

/// This process's incarnation for a registration's token (start time and PID namespace),
/// or `None` when `/proc` does not show it (a token without one is judged by the pid
/// alone).
pub fn own_incarnation() -> Option<registry::Incarnation> {
    incarnation_in("/proc/self")
}

/// The incarnation of the process `pid` (as [`own_incarnation`] gives its own).
#[cfg(test)]
pub(crate) fn incarnation_of(pid: u32) -> Option<registry::Incarnation> {
    incarnation_in(&format!("/proc/{pid}"))
}

/// The incarnation of the process whose `/proc` directory is `dir`.
fn incarnation_in(dir: &str) -> Option<registry::Incarnation> {
    let stat = read_stat_at(&format!("{dir}/stat"))?;
    let ns = std::fs::metadata(format!("{dir}/ns/pid")).ok()?.ino();
    let offset = proc_self().map_or_else(boot_offset_ticks, |me| me.boot_offset);
    Some(registry::Incarnation::new(
        stat.start.wrapping_sub(offset as u64),
        ns,
    ))
}

/// What this process knows of itself to judge others by `/proc`.
#[derive(Clone, Copy, Debug)]
struct ProcSelf {
    /// Our PID namespace, cut as a token carries it.
    pid_ns: u16,
    /// The boot clock offset of our time namespace, in clock ticks: a start time read from
    /// `/proc` here is the initial namespace's plus this.
    boot_offset: i64,
}

impl ProcSelf {
    /// A start time read from `/proc` here, in the initial time namespace's ticks.
    fn initial_ticks(self, start: u64) -> u64 {
        start.wrapping_sub(self.boot_offset as u64)
    }
}

/// [`ProcSelf`], or `None` when `/proc` is not this process's PID namespace's (or cannot
/// be read): its `/proc/<pid>` would be another process than our `kill(pid, 0)` reached.
/// Taken once per process: a forked child (new pid, perhaps a new namespace after
/// `unshare`) takes its own. The lock is only tried, so that a child forked while another
/// thread held it never waits for it; the loser reads `/proc` itself.
fn proc_self() -> Option<ProcSelf> {
    type Cached = Option<(u32, u64, Option<ProcSelf>)>;
    static CACHE: std::sync::Mutex<Cached> = std::sync::Mutex::new(None);
    let key = (std::process::id(), fork_generation());
    let mut guard = CACHE.try_lock().ok();
    if let Some(Some((pid, generation, me))) = guard.as_deref()
        && (*pid, *generation) == key
    {
        return *me;
    }
    let me = read_proc_self(key.0);
    if let Some(g) = guard.as_deref_mut() {
        *g = Some((key.0, key.1, me));
    }
    me
}

fn read_proc_self(pid: u32) -> Option<ProcSelf> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    // NSpid lists our pid in each namespace from /proc's down to ours: one entry, equal to
    // getpid, when /proc is ours. Kernels before 4.1 have no NSpid: /proc/self/stat's pid
    // field is then the best we have.
    let ours = match status.lines().find_map(|l| l.strip_prefix("NSpid:")) {
        Some(list) => list.split_whitespace().eq([pid.to_string().as_str()]),
        None => std::fs::read_to_string("/proc/self/stat")
            .ok()?
            .split(' ')
            .next()
            .is_some_and(|p| p == pid.to_string()),
    };
    if !ours {
        return None;
    }
    let ns = std::fs::metadata("/proc/self/ns/pid").ok()?.ino();
    Some(ProcSelf {
        pid_ns: registry::Incarnation::new(0, ns).pid_ns,
        boot_offset: boot_offset_ticks(),
    })
}

/// The boot clock offset of this process's time namespace in clock ticks, from
/// `/proc/self/timens_offsets` (0 where the kernel has no time namespaces).
fn boot_offset_ticks() -> i64 {
    let Ok(text) = std::fs::read_to_string("/proc/self/timens_offsets") else {
        return 0;
    };
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    // `c_long` is `i64` on 64-bit targets, `i32` on others: widening either way.
    boot_offset_in(&text, hz as i64)
}

/// The boottime line of a `timens_offsets` text in ticks of `hz` a second (0 without one).
fn boot_offset_in(text: &str, hz: i64) -> i64 {
    let hz = i128::from(hz.max(1));
    text.lines()
        .find_map(|l| {
            let mut f = l.split_whitespace();
            // The clock is named ("boottime") or numbered (CLOCK_BOOTTIME, 7).
            if !matches!(f.next()?, "boottime" | "7") {
                return None;
            }
            let secs: i128 = f.next()?.parse().ok()?;
            let nanos: i128 = f.next()?.parse().ok()?;
            let ticks = (secs * 1_000_000_000 + nanos) * hz / 1_000_000_000;
            i64::try_from(ticks).ok()
        })
        .unwrap_or(0)
}

/// The fields of `/proc/<pid>/stat` the liveness check reads.
struct Stat {
    /// Field 3: `R`, `S`, `D`, `Z`, `X`, …
    state: u8,
    /// Field 20: threads in the process.
    threads: u64,
    /// Field 22: clock ticks since boot (this time namespace's boot) when it started.
    start: u64,
}

fn read_stat(pid: u32) -> Option<Stat> {
    read_stat_at(&format!("/proc/{pid}/stat"))
}

/// One read of a `stat` file into a stack buffer. Field 2, the command, is in parentheses
/// and may hold spaces and parentheses itself: the fields are counted from its last `)`.
fn read_stat_at(path: &str) -> Option<Stat> {
    use std::io::Read;
    let mut buf = [0u8; 1024];
    let n = File::open(path).ok()?.read(&mut buf).ok()?;
    parse_stat(&buf[..n])
}

fn parse_stat(text: &[u8]) -> Option<Stat> {
    let close = text.iter().rposition(|&b| b == b')')?;
    let mut fields = text[close + 1..]
        .split(|&b| b == b' ')
        .filter(|f| !f.is_empty());
    let number = |f: &[u8]| std::str::from_utf8(f).ok()?.parse().ok();
    let state = *fields.next()?.first()?;
    // Fields 4 to 19 lie between the state and the thread count, 21 before the start time.
    let threads = number(fields.nth(16)?)?;
    let start = number(fields.nth(1)?)?;
    Some(Stat {
        state,
        threads,
        start,
    })
}

/// CPU time (user + system) the calling thread has used so far (`RUSAGE_THREAD`).
pub fn thread_cpu_time() -> Duration {
    cpu_time(libc::RUSAGE_THREAD)
}

/// CPU time (user + system) this process has used so far (`RUSAGE_SELF`).
pub fn process_cpu_time() -> Duration {
    cpu_time(libc::RUSAGE_SELF)
}

fn cpu_time(who: libc::c_int) -> Duration {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage for the kernel to fill.
    unsafe { libc::getrusage(who, &mut ru) };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seconds past a `time_t` saturate instead of wrapping (what a 32-bit target's futex
    /// waits and sleeps would get from a long timeout).
    #[test]
    fn seconds_saturate_into_a_time_t_of_either_width() {
        let huge = u64::from(u32::MAX) + 6;
        assert_eq!(
            (
                i32::saturating_from_secs(7),
                i32::saturating_from_secs(i32::MAX as u64),
                i32::saturating_from_secs(1 << 31),
                i32::saturating_from_secs(huge),
                i32::saturating_from_secs(u64::MAX),
            ),
            (7, i32::MAX, i32::MAX, i32::MAX, i32::MAX)
        );
        assert_eq!(
            (
                i64::saturating_from_secs(7),
                i64::saturating_from_secs(huge),
                i64::saturating_from_secs(1 << 63),
                i64::saturating_from_secs(u64::MAX),
            ),
            (7, huge as i64, i64::MAX, i64::MAX)
        );
        // This target's own `time_t`, as futex_wait and sleep use it.
        assert_eq!(
            libc::time_t::saturating_from_secs(Duration::MAX.as_secs()),
            libc::time_t::MAX
        );
    }

    #[test]
    fn stat_fields_are_counted_from_the_commands_last_parenthesis() {
        let line = |comm: &str| {
            format!(
                "4242 ({comm}) Z 1 4242 4242 0 -1 4194564 0 0 0 0 0 0 0 0 20 0 3 0 \
                 987654 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
            )
        };
        for comm in ["sleep", "a b", "x) S 9 (y", ")", "((", ""] {
            let st = parse_stat(line(comm).as_bytes()).unwrap();
            assert_eq!(
                (st.state, st.threads, st.start),
                (b'Z', 3, 987_654),
                "{comm:?}"
            );
        }
        // Cut short, or not a stat line at all: nothing, never a panic.
        let full = line("sleep");
        for cut in [0, 10, full.find(" 987654").unwrap()] {
            assert!(parse_stat(&full.as_bytes()[..cut]).is_none(), "{cut}");
        }
        assert!(
            parse_stat(b"4242 (x) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 nope").is_none()
        );
        // Our own, from /proc.
        let me = read_stat_at("/proc/self/stat").unwrap();
        assert!(
            matches!(me.state, b'R' | b'S' | b'D'),
            "{}",
            me.state as char
        );
    }

    /// A process whose main thread exited while another thread runs shows state `Z` in
    /// `/proc/<pid>/stat`, as a zombie does, but counts two threads: it is alive. (A child
    /// whose main thread leaves by the `exit` system call, which ends one thread, not the
    /// process; its other thread sleeps until killed.)
    #[test]
    fn a_process_whose_main_thread_exited_is_not_a_zombie() {
        let mut judged = None;
        let status = crate::test_fork::forked_with(
            10,
            || {
                std::thread::spawn(|| std::thread::sleep(Duration::from_secs(30)));
                // SAFETY: ends this thread only; the spawned one keeps the process alive,
                // and nothing of this thread's is used after.
                unsafe { libc::syscall(libc::SYS_exit, 0) };
                1
            },
            |pid| {
                let pid = pid as u32;
                let end = std::time::Instant::now() + Duration::from_secs(10);
                let mut stat = read_stat(pid);
                while stat.as_ref().is_none_or(|s| s.state != b'Z') {
                    if std::time::Instant::now() > end {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                    stat = read_stat(pid);
                }
                judged = Some((stat.map(|s| (s.state, s.threads)), reader_alive(pid, 0)));
                // SAFETY: kill takes two integers; the pid is our child, not yet reaped.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            },
        );
        assert!(libc::WIFSIGNALED(status), "{status:#x}");
        assert_eq!(judged, Some((Some((b'Z', 2)), true)));
    }

    #[test]
    fn a_time_namespaces_boot_offset_is_read_in_ticks() {
        let text = "monotonic 0 0\nboottime -3 -500000000\n";
        assert_eq!(boot_offset_in(text, 100), -350);
        assert_eq!(boot_offset_in("monotonic 5 0\n7 2 10000000\n", 100), 201);
        assert_eq!(boot_offset_in("monotonic 5 0\nboottime 0 0\n", 100), 0);
        assert_eq!(boot_offset_in("", 100), 0);
        assert_eq!(boot_offset_in("boottime x 0\n", 100), 0);
        assert_eq!(boot_offset_in("boottime 99999999999999999999 0\n", 100), 0);
    }

    /// Our own pid with our own incarnation is alive; with a start time a second off it is
    /// a later process's pid, dead; with a token from another PID namespace, or one without
    /// an incarnation, the pid alone decides (alive).
    #[test]
    fn a_reader_is_judged_by_its_tokens_start_time_in_its_own_namespace_only() {
        use registry::{Incarnation, encode_name, register_owner_as};
        let me = std::process::id();
        let mine = own_incarnation().expect("this test needs /proc");
        let path = std::env::temp_dir().join(format!("fixc-liveness-{me}"));
        let geo = ringwire_core::Geometry::spmc(4, 16, 8, 8, true).unwrap();
        let file = crate::file::RingFile::create(&path, &geo, &Default::default()).unwrap();
        let view = file.ring();
        let token = |inc| {
            register_owner_as(view, me, &encode_name("t"), 1, inc, |_, _| true)
                .unwrap()
                .token
        };
        let later = Incarnation {
            start: (mine.start + 100) & 0xF_FFFF,
            ..mine
        };
        let elsewhere = Incarnation {
            pid_ns: (mine.pid_ns + 1) & 0xFFF,
            ..later
        };
        assert!(reader_alive(me, token(Some(mine))));
        assert!(!reader_alive(me, token(Some(later))));
        assert!(reader_alive(me, token(Some(elsewhere))));
        assert!(reader_alive(me, token(None)));
        assert!(reader_alive(me, 0));
        assert!(!reader_alive(0, 0));
        assert!(!reader_alive(1 << 30, token(Some(mine))));
    }

    /// Signals every 40 µs to a handler installed without `SA_RESTART` (a forked child: the
    /// handler and the timer are process-wide) interrupt each sleep about 25 times a
    /// millisecond; each 1 ms sleep still ends near its deadline. `std::thread::sleep`
    /// never returned there: each restart asks for the time left plus the timer's slack.
    #[test]
    fn a_sleep_ends_at_its_deadline_under_a_signal_storm() {
        extern "C" fn on_signal(_: libc::c_int) {}
        let status = crate::test_fork::forked(10, || {
            // SAFETY: a zeroed sigaction and sigevent are valid values; the handler does
            // nothing; every pointer passed outlives its call.
            let timer = unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
                let mut ev: libc::sigevent = std::mem::zeroed();
                ev.sigev_notify = libc::SIGEV_SIGNAL;
                ev.sigev_signo = libc::SIGUSR1;
                let mut timer: libc::timer_t = std::mem::zeroed();
                if libc::timer_create(libc::CLOCK_MONOTONIC, &mut ev, &mut timer) != 0 {
                    return 2;
                }
                let every = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 40_000,
                };
                let spec = libc::itimerspec {
                    it_interval: every,
                    it_value: every,
                };
                libc::timer_settime(timer, 0, &spec, std::ptr::null_mut());
                timer
            };
            let t0 = std::time::Instant::now();
            for _ in 0..5 {
                sleep(Duration::from_millis(1));
            }
            let took = t0.elapsed();
            // SAFETY: the timer created above.
            unsafe { libc::timer_delete(timer) };
            if took < Duration::from_millis(5) {
                4
            } else if took < Duration::from_millis(500) {
                0
            } else {
                3
            }
        });
        crate::test_fork::assert_exited_0(status, "five 1 ms sleeps in a signal storm");
    }
}
