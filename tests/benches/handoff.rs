//! Hand-off benchmarks, ringwire against the published ringfire 0.5.2 in the same run, with
//! the machine's floor (a bare cache-line ping-pong) beside them:
//!
//! * `push_drain/*`: one producer pushes 64-byte records while a reader drains them on the
//!   other core; time per push while the reader receives every record, keeping pace with
//!   the pushes (`*_a64`: the 64-byte-aligned record, as below). A writer whose reader is
//!   not reading its lines (the reader descheduled or stalled, far behind, or lapped)
//!   pushes several times faster than one whose reader keeps pace: a different
//!   measurement. So a sample (one `iter_custom` call) is taken again with a fresh ring,
//!   up to [`PUSH_DRAIN_TRIES`] times, when its reader received fewer than all the timed
//!   records or missed one in the sequence (`lapped`), or was more than
//!   [`Drained::max_lag`] records behind when the pushes ended (`behind`: 64, at most half
//!   the try's pushes); if no try was clean the last one's time is kept. A record received
//!   twice or out of order fails the run. Every call
//!   is logged as `<bench id> <tries> <clean|lapped|behind>` (the kept try's outcome) in
//!   `$CRITERION_HOME/push_drain_samples.txt` (criterion's own `<target>/criterion` without
//!   it), which scripts/bench.sh counts per implementation.
//! * `round_trip_2proc/*`: a 64-byte record goes to an echo process through one ring and
//!   comes back through another; time per round trip. `ringwire`/`ringfire`: `[u8; 64]`
//!   (72-byte slots: a slot's second line also holds the next slot's sequence word);
//!   `*_a64`: the same bytes in a 64-byte-aligned type (spec §4.1: 128-byte slots, the
//!   sequence word and the payload each on a line no other slot touches).
//! * `floor/cacheline_round_trip`: the same round trip through two bare cache lines;
//!   `floor/moving_line_round_trip`: through two rings of one-line slots, a new line each
//!   round trip (the floor of a ring whose records move through memory).
//!
//! `cargo bench -p ringwire-tests --bench handoff`

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use criterion::Criterion;
use ringwire::bench::floor::{cacheline_round_trips, moving_line_round_trips, pin_to};
use ringwire::{BusySpin, RingConsumer, RingProducer};
use ringwire_tests::push_drain::Drained;
use ringwire_tests::records::Aligned64;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

type Rec = [u8; 64];
const CAP: u64 = 1 << 16;
const STOP: u64 = u64::MAX;

fn shm_path(tag: &str) -> PathBuf {
    PathBuf::from(format!("/dev/shm/rw-bench-{}-{tag}", std::process::id()))
}

/// The bytes after the sequence: a pattern, not zeros.
const TEMPLATE: Rec = {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        t[i] = (i as u8).wrapping_mul(37).wrapping_add(11);
        i += 1;
    }
    t
};

/// Record `seq`: the sequence in the first 8 bytes, the rest from [`TEMPLATE`] read through
/// `black_box`, so that neither crate's push can be compiled into stores of immediate
/// constants (a real producer copies bytes it has just loaded).
fn rec(seq: u64) -> Rec {
    let mut r = std::hint::black_box(TEMPLATE);
    r[..8].copy_from_slice(&seq.to_ne_bytes());
    r
}

fn seq_of(r: &[u8]) -> u64 {
    u64::from_ne_bytes(r[..8].try_into().unwrap_or([0; 8]))
}

/// A 64-byte record type of the round trip: `[u8; 64]` (a 72-byte slot, whose lines it
/// shares with its neighbours) or [`Aligned64`] (spec §4.1: a 128-byte slot, the sequence
/// word and the payload each on a line of their own).
trait RtRecord: Copy + FromBytes + IntoBytes + Immutable + KnownLayout + Send + Sync + 'static {
    fn make(seq: u64) -> Self;
}

impl RtRecord for Rec {
    fn make(seq: u64) -> Self {
        rec(seq)
    }
}

/// The test crate's 64-byte record aligned to 64 bytes, filled like [`rec`] (its own
/// `Aligned64::new` computes a checksum, too slow for a push benchmark).
impl RtRecord for Aligned64 {
    fn make(seq: u64) -> Self {
        Aligned64(rec(seq))
    }
}

fn rt_seq<T: RtRecord>(r: &T) -> u64 {
    seq_of(r.as_bytes())
}

/// Attaches to a ring another process is creating: retries until it exists and validates.
fn ringwire_attach<T: RtRecord>(path: &Path) -> RingConsumer<T> {
    let deadline = Instant::now() + SETUP_DEADLINE;
    loop {
        match RingConsumer::<T>::builder().start_from_head().attach(path) {
            Ok(c) => return c,
            Err(e) if Instant::now() > deadline => panic!("{}: {e}", path.display()),
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

fn ringfire_attach<T: RtRecord>(path: &Path) -> ringfire::RingConsumer<T> {
    let deadline = Instant::now() + SETUP_DEADLINE;
    loop {
        match ringfire::RingConsumer::<T>::attach(path) {
            Ok(c) => return c,
            Err(e) if Instant::now() > deadline => panic!("{}: {e}", path.display()),
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

// ---------- push with a draining reader ----------
//
// Both crates run through the same harness: only the ring calls differ. The figure is the
// push cost while the reader drains on the other core:
// * the reader thread is spawned from a thread pinned to core 0, so it starts there and
//   moves to core 1 in its first call; the producer yields (does not spin) until it has
//   attached, otherwise the reader may not run at all before the pushes end (it measured as
//   pushes with no reader in some samples and with one in others);
// * one lap of the ring is pushed and drained untimed first, so the first touch of every
//   page of the fresh /dev/shm file (both sides' page faults) is not counted as push time;
// * the reader counts the timed records it has when it sees the pushes end, then drains the
//   ring until it is empty, so its final count is exact: every timed record, or fewer if it
//   was lapped (it also checks the sequences: a gap is a lap too). A try whose reader was lapped or far behind is taken again (see
//   `push_drain_sample`). Criterion 0.5 samples linearly: sample k of 100 is k·d pushes,
//   d = ceil(measurement time / (warm-up time per push · 5050)). At `--measurement-time 2`
//   and ~32 ns a push, d ≈ 12,400: samples run from ~12,400 to ~1,240,000 pushes, 95 of the
//   100 longer than the 65,536-slot ring (criterion's warm-up calls, doubling from 1 push,
//   reach the millions too). In a sample longer than the ring, a reader descheduled or
//   stalled for longer than the writer takes to push one lap is lapped: the first check
//   (`lapped`, it received fewer than all the timed records, or with a gap) catches it. The
//   second (`behind`: more than 64 records, at most half the sample's, still to come at the
//   stop) catches a reader still behind when the pushes end, the only one that can
//   fire in a sample shorter than the ring. Neither catches a stall shorter than one lap
//   that the reader makes up before the pushes end: such a sample keeps up to one lap of
//   pushes made with no reader on the writer's lines (at most ~5% of the longest samples,
//   up to all of one shorter than the ring).
// RW_PUSH_DRAIN_DIAG=1 prints, per try, the share of the timed records the reader had when
// the pushes ended and in all.

/// The most tries of one sample whose reader did not keep pace before its time is kept
/// anyway (and logged as such): a panic would end a whole scripts/bench.sh run.
const PUSH_DRAIN_TRIES: u32 = 50;

/// Progress of the reader thread, seen by the producer between the untimed and timed parts.
#[derive(Default)]
struct DrainGate {
    /// The reader has attached (and pinned itself).
    attached: AtomicBool,
    /// The reader has received the last record of the untimed lap.
    caught_up: AtomicBool,
    /// The timed pushes are over.
    stop: AtomicBool,
}

/// Waits (yielding the core, which the reader may still need) until `flag` is set.
fn wait_for(flag: &AtomicBool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    // Acquire: pairs with the reader's release store.
    while !flag.load(Ordering::Acquire) {
        assert!(Instant::now() < deadline, "push_drain reader did not start");
        std::thread::yield_now();
    }
}

/// The reader's side: `recv` is one `try_recv` of the crate under test, returning the
/// record's sequence. Drains the untimed lap (up to record `CAP`), then counts the records
/// it receives until `stop` and after it until the ring is empty, checking their sequences
/// ([`Drained::take`]): every timed record when it kept pace, fewer (or a gap) when it was
/// lapped. The draining loop is the same for both crates.
fn drain(gate: &DrainGate, mut recv: impl FnMut() -> Option<u64>) -> Drained {
    // Release: the producer starts pushing only after this.
    gate.attached.store(true, Ordering::Release);
    while recv().is_none_or(|s| s < CAP) {}
    // Release: the producer starts the clock only after this.
    gate.caught_up.store(true, Ordering::Release);
    let mut got = Drained::new(CAP + 1);
    // Acquire: pairs with the producer's release store after its last push, so the drain
    // below finds every record that is still in the ring.
    while !gate.stop.load(Ordering::Acquire) {
        if let Some(s) = recv() {
            got.take(s);
        }
    }
    got.stop();
    while let Some(s) = recv() {
        got.take(s);
    }
    got
}

/// One try of a sample of `iters` pushes: `reader` attaches to the ring at `path` and runs
/// [`drain`] on core 1; `push(range)` pushes the records of `range` with the producer of the
/// crate under test, on core 0 (the loop is inside it, so each crate's loop compiles the
/// same way). Returns the time of the timed pushes and what the reader got of them.
fn push_drain<R>(
    iters: u64,
    path: &Path,
    mut push: impl FnMut(std::ops::RangeInclusive<u64>),
    reader: R,
) -> (Duration, Drained)
where
    R: FnOnce(&Path, &DrainGate) -> Drained + Send + 'static,
{
    pin_to(0);
    let gate = Arc::new(DrainGate::default());
    let handle = {
        let (path, gate) = (path.to_path_buf(), gate.clone());
        std::thread::spawn(move || {
            pin_to(1);
            reader(&path, &gate)
        })
    };
    wait_for(&gate.attached);
    push(1..=CAP);
    wait_for(&gate.caught_up);
    let t0 = Instant::now();
    push(CAP + 1..=CAP + iters);
    let dt = t0.elapsed();
    // Release: see `drain`.
    gate.stop.store(true, Ordering::Release);
    // A reader that panicked (a record duplicated or out of order) fails the run.
    let got = handle
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e));
    if std::env::var_os("RW_PUSH_DRAIN_DIAG").is_some() {
        // Per try: how much of the timed stream the reader had when the pushes ended, and
        // in all (below 1: it was lapped).
        eprintln!(
            "push_drain {} iters {iters} by-stop {} ({:.3}) received {} ({:.3}) {:.2} ns/push",
            path.display(),
            got.by_stop,
            got.by_stop as f64 / iters as f64,
            got.total,
            got.total as f64 / iters as f64,
            dt.as_nanos() as f64 / iters as f64
        );
    }
    (dt, got)
}

/// Where every `iter_custom` call of `push_drain` is logged: `$CRITERION_HOME`, else
/// criterion's own default, `<target dir>/criterion` (`$CARGO_TARGET_DIR`, else the target
/// directory this bench binary was built in: `<target>/release/deps/handoff-…`).
fn push_drain_log() -> PathBuf {
    let home = std::env::var_os("CRITERION_HOME")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR").map(|t| PathBuf::from(t).join("criterion"))
        })
        .or_else(|| {
            let exe = std::env::current_exe().ok()?;
            Some(exe.ancestors().nth(3)?.join("criterion"))
        })
        .unwrap_or_else(|| PathBuf::from("target/criterion"));
    home.join("push_drain_samples.txt")
}

/// One criterion sample (`iter_custom` call) of the bench `id`: `one(iters)` is a try on a
/// fresh ring, returning the time and what the reader received. A try whose reader did not
/// keep pace ([`Drained::outcome`]) measured the writer without a reader on its lines: it
/// is taken again, up to [`PUSH_DRAIN_TRIES`] tries, the last one's time kept if none was
/// clean. Logs `<id> <tries> <outcome>` to [`push_drain_log`].
fn push_drain_sample(
    id: &str,
    iters: u64,
    mut one: impl FnMut(u64) -> (Duration, Drained),
) -> Duration {
    let mut tries = 0;
    let (dt, outcome) = loop {
        tries += 1;
        let (dt, got) = one(iters);
        let outcome = got.outcome(iters);
        if outcome == "clean" || tries >= PUSH_DRAIN_TRIES {
            break (dt, outcome);
        }
    };
    let log = push_drain_log();
    let line = format!("{id} {tries} {outcome}\n");
    let written = log
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
        })
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        // The figure is still right; only the count of re-takes is lost.
        eprintln!("push_drain: cannot log to {}: {e}", log.display());
    }
    dt
}

fn push_drain_ringwire<T: RtRecord>(iters: u64, tag: &str) -> (Duration, Drained) {
    let path = shm_path(tag);
    let mut prod = RingProducer::<T>::create(&path, CAP).expect("create");
    push_drain(
        iters,
        &path,
        |seqs| {
            for i in seqs {
                prod.push(&T::make(i));
            }
        },
        |path, gate| {
            let mut c = RingConsumer::<T>::attach(path).expect("attach");
            drain(gate, || c.try_recv().map(|r| rt_seq(&r)))
        },
    )
}

fn push_drain_ringfire<T: RtRecord>(iters: u64, tag: &str) -> (Duration, Drained) {
    let path = shm_path(tag);
    let mut prod = ringfire::RingProducer::<T>::create(&path, CAP).expect("create");
    push_drain(
        iters,
        &path,
        |seqs| {
            for i in seqs {
                prod.push(&T::make(i));
            }
        },
        |path, gate| {
            let mut c = ringfire::RingConsumer::<T>::attach(path).expect("attach");
            drain(gate, || c.try_recv().map(|r| rt_seq(&r)))
        },
    )
}

// ---------- two-process round trip ----------

/// Makes this (echo) process die with its parent, so a benchmark that is killed or panics
/// never leaves a spinning echo behind. `parent` is the pid that spawned us.
fn die_with_parent(parent: u32) {
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes a signal number and touches no memory of ours.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    // The parent may have exited before the prctl: then we were re-parented already.
    if std::os::unix::process::parent_id() != parent {
        std::process::exit(1);
    }
}

/// The echo side, run in a child process: read `ping`, write the same record to `pong`.
/// Both rings wait with their own `recv_blocking(&mut BusySpin)`, the normal API of a
/// spinning reader. `kind` is the crate, with `_a64` for the [`Aligned64`] record.
fn echo(kind: &str, ping: &Path, pong: &Path) {
    pin_to(1);
    match kind {
        "ringwire" => echo_ringwire::<Rec>(ping, pong),
        "ringwire_a64" => echo_ringwire::<Aligned64>(ping, pong),
        "ringfire" => echo_ringfire::<Rec>(ping, pong),
        "ringfire_a64" => echo_ringfire::<Aligned64>(ping, pong),
        other => panic!("unknown echo kind {other:?}"),
    }
}

fn echo_ringwire<T: RtRecord>(ping: &Path, pong: &Path) {
    let mut prod = RingProducer::<T>::create(pong, CAP).expect("create pong");
    let mut c = ringwire_attach::<T>(ping);
    loop {
        let r = c.recv_blocking(&mut BusySpin);
        prod.push(&r);
        if rt_seq(&r) == STOP {
            break;
        }
    }
}

fn echo_ringfire<T: RtRecord>(ping: &Path, pong: &Path) {
    let mut prod = ringfire::RingProducer::<T>::create(pong, CAP).expect("create pong");
    let mut c = ringfire_attach::<T>(ping);
    c.jump_to_latest();
    loop {
        let r = c.recv_blocking(&mut ringfire::BusySpin);
        prod.push(&r);
        if rt_seq(&r) == STOP {
            break;
        }
    }
}

/// The echo process; reaped (killed if it does not exit) on drop, which then removes the
/// pong ring's file (the echo's own producer removes it when the echo exits normally, not
/// when it crashed or was killed).
struct EchoChild(Child, PathBuf);

impl EchoChild {
    fn spawn(kind: &str, ping: &Path, pong: &Path) -> EchoChild {
        let exe = std::env::current_exe().expect("current exe");
        let child = Command::new(exe)
            .env("RW_BENCH_ECHO", kind)
            .env("RW_BENCH_PARENT", std::process::id().to_string())
            .env("RW_BENCH_PING", ping)
            .env("RW_BENCH_PONG", pong)
            .spawn()
            .expect("spawn echo process");
        EchoChild(child, pong.to_path_buf())
    }
}

impl Drop for EchoChild {
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && !matches!(self.0.try_wait(), Ok(Some(_))) {
            std::thread::sleep(Duration::from_millis(10));
        }
        if !matches!(self.0.try_wait(), Ok(Some(_))) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
        let _ = std::fs::remove_file(&self.1);
    }
}

/// How long any wait of a round trip's set-up (the echo's rings appearing, the start-up
/// handshake) may take before the bench panics instead of hanging.
const SETUP_DEADLINE: Duration = Duration::from_secs(30);

/// The start-up handshake of a round trip, before anything is timed: the echo attaches to
/// the ping ring asynchronously, and a record pushed before its cursor was placed may never
/// reach it (ringwire's `start_from_head` starts after the newest record). So record 1 is
/// pushed again every millisecond until it comes back (`try_recv` polls the pong ring and
/// returns the sequence of what it received), then record 2 is pushed once: the echo has
/// attached by then, so record 2 cannot be skipped, and once it is back every extra echo
/// of record 1 has been read, leaving the pong ring empty. Panics after
/// [`SETUP_DEADLINE`] or when the echo process exits. Returns the last sequence used.
fn handshake(
    name: &str,
    child: &mut EchoChild,
    mut push: impl FnMut(u64),
    mut try_recv: impl FnMut() -> Option<u64>,
) -> u64 {
    let deadline = Instant::now() + SETUP_DEADLINE;
    let mut wait_for_echo = |seq: u64, resend: bool, push: &mut dyn FnMut(u64)| loop {
        push(seq);
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(1) || !resend {
            match try_recv() {
                Some(s) if s == seq => return,
                Some(_) => {}
                None => {
                    if Instant::now() > deadline {
                        panic!(
                            "{name}: the echo process did not echo start-up record {seq} within {} s",
                            SETUP_DEADLINE.as_secs()
                        );
                    }
                    if let Ok(Some(st)) = child.0.try_wait() {
                        panic!("{name}: the echo process exited during start-up ({st})");
                    }
                    std::thread::yield_now();
                }
            }
        }
    };
    wait_for_echo(1, true, &mut push);
    wait_for_echo(2, false, &mut push);
    2
}

/// Runs the round-trip benchmark `name` with `one(seq)` doing one round trip, after
/// [`handshake`] returned `seq` (the last sequence used); `one(STOP)` ends the echo. Both
/// sides wait with the ring's `recv_blocking(&mut BusySpin)` (a PAUSE hint between polls, as
/// each crate's BusySpin does).
fn bench_round_trip(c: &mut Criterion, name: &str, mut seq: u64, mut one: impl FnMut(u64)) {
    c.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let t0 = Instant::now();
            for _ in 0..iters {
                seq += 1;
                one(seq);
            }
            t0.elapsed()
        })
    });
}

/// `round_trip_2proc/{kind}`: ringwire's rings of `T`, the echo in a child process.
fn round_trip_ringwire<T: RtRecord>(c: &mut Criterion, kind: &str) {
    let (ping, pong) = (
        shm_path(&format!("rt-{kind}-ping")),
        shm_path(&format!("rt-{kind}-pong")),
    );
    let name = format!("round_trip_2proc/{kind}");
    let mut prod = RingProducer::<T>::create(&ping, CAP).expect("create ping");
    let mut child = EchoChild::spawn(kind, &ping, &pong);
    pin_to(0);
    let mut cons = ringwire_attach::<T>(&pong);
    let seq = handshake(
        &name,
        &mut child,
        |s| {
            prod.push(&T::make(s));
        },
        || cons.try_recv().map(|r| rt_seq(&r)),
    );
    bench_round_trip(c, &name, seq, |seq| {
        prod.push(&T::make(seq));
        while rt_seq(&cons.recv_blocking(&mut BusySpin)) != seq {}
    });
    prod.push(&T::make(STOP));
    drop(child);
}

/// `round_trip_2proc/{kind}`: ringfire's rings of `T`, the same way.
fn round_trip_ringfire<T: RtRecord>(c: &mut Criterion, kind: &str) {
    let (ping, pong) = (
        shm_path(&format!("rt-{kind}-ping")),
        shm_path(&format!("rt-{kind}-pong")),
    );
    let name = format!("round_trip_2proc/{kind}");
    let mut prod = ringfire::RingProducer::<T>::create(&ping, CAP).expect("create ping");
    let mut child = EchoChild::spawn(kind, &ping, &pong);
    pin_to(0);
    let mut cons = ringfire_attach::<T>(&pong);
    cons.jump_to_latest();
    let seq = handshake(
        &name,
        &mut child,
        |s| {
            prod.push(&T::make(s));
        },
        || cons.try_recv().map(|r| rt_seq(&r)),
    );
    bench_round_trip(c, &name, seq, |seq| {
        prod.push(&T::make(seq));
        while rt_seq(&cons.recv_blocking(&mut ringfire::BusySpin)) != seq {}
    });
    prod.push(&T::make(STOP));
    drop(child);
}

fn main() {
    if let Ok(kind) = std::env::var("RW_BENCH_ECHO") {
        let parent = std::env::var("RW_BENCH_PARENT").ok();
        die_with_parent(parent.and_then(|p| p.parse().ok()).unwrap_or(0));
        let ping = PathBuf::from(std::env::var_os("RW_BENCH_PING").unwrap_or_default());
        let pong = PathBuf::from(std::env::var_os("RW_BENCH_PONG").unwrap_or_default());
        echo(&kind, &ping, &pong);
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    let id = "push_drain/ringwire";
    c.bench_function(id, |b| {
        b.iter_custom(|n| push_drain_sample(id, n, |n| push_drain_ringwire::<Rec>(n, "push-rw")))
    });
    let id = "push_drain/ringfire";
    c.bench_function(id, |b| {
        b.iter_custom(|n| push_drain_sample(id, n, |n| push_drain_ringfire::<Rec>(n, "push-rf")))
    });
    let id = "push_drain/ringwire_a64";
    c.bench_function(id, |b| {
        b.iter_custom(|n| {
            push_drain_sample(id, n, |n| {
                push_drain_ringwire::<Aligned64>(n, "push-rw-a64")
            })
        })
    });
    let id = "push_drain/ringfire_a64";
    c.bench_function(id, |b| {
        b.iter_custom(|n| {
            push_drain_sample(id, n, |n| {
                push_drain_ringfire::<Aligned64>(n, "push-rf-a64")
            })
        })
    });
    round_trip_ringwire::<Rec>(&mut c, "ringwire");
    round_trip_ringfire::<Rec>(&mut c, "ringfire");
    round_trip_ringwire::<Aligned64>(&mut c, "ringwire_a64");
    round_trip_ringfire::<Aligned64>(&mut c, "ringfire_a64");
    c.bench_function("floor/cacheline_round_trip", |b| {
        b.iter_custom(|iters| cacheline_round_trips(iters, Some((0, 1))))
    });
    c.bench_function("floor/moving_line_round_trip", |b| {
        b.iter_custom(|iters| moving_line_round_trips(iters, Some((0, 1))))
    });
    c.final_summary();
}
