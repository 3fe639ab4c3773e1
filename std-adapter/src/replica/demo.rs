//! `ringwire demo`: everything on one machine. A source ring in `/dev/shm` is fed with
//! synthetic market data at a fixed rate (open loop), served, mirrored over loopback, and a
//! reader on the mirror ring prints live push-to-read latency percentiles. Both ring files are
//! removed at the end, also on error or Ctrl-C.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration as StdDuration;

use ringwire_core::broadcast::{Consumer, Producer, StartMode};
use ringwire_core::replicate::Start;
use ringwire_core::{Expect, Geometry};

use super::ReplicaError;
use super::io::{RingWaiter, now};
use super::mirror::{MirrorOptions, run_noting_errors};
use super::serve::{ServeOptions, Server};
use super::signal;
use crate::bench::hist::{Latency, Summary, fmt_ns};
use crate::bench::stress::{Pacer, SeqTracker, StressReport};
use crate::{CreateOptions, RingFile};

/// Bytes of one demo record.
pub const RECORD_LEN: usize = 64;
/// Source and mirror ring capacity.
const CAPACITY: u64 = 1 << 16;
/// Sequences the reader's tracker remembers below the highest it has seen. The reader
/// reads the mirror ring's slots in order, so it can never be handed a record more than
/// [`CAPACITY`] behind the newest it has read: a window 64 times larger checks every
/// record exactly, for any rate × seconds, in a 512 KiB bitmap (one bit per record of a
/// `bench stress` run at its maxima, 5,000,000 msg/s for 60 s, would be 37.5 MB).
const TRACK_WINDOW: u64 = 64 * CAPACITY;

/// The demo's transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// TCP.
    Tcp,
    /// Multicast on loopback (iface 127.0.0.1).
    Multicast,
    /// UDP unicast on loopback.
    Unicast,
}

/// The name `--transport` takes: `tcp`, `multicast` or `unicast`.
impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Transport::Tcp => "tcp",
            Transport::Multicast => "multicast",
            Transport::Unicast => "unicast",
        })
    }
}

/// Demo settings.
#[derive(Clone, Copy, Debug)]
pub struct DemoOptions {
    /// Transport.
    pub transport: Transport,
    /// Run time in seconds.
    pub seconds: u64,
    /// Records per second.
    pub rate: u64,
    /// Spin (bounded) when idle.
    pub spin: bool,
    /// Anticipate a steady stream's next record (serve, mirror and reader; see
    /// [`super::anticipate`]).
    pub anticipate: bool,
    /// Print the start line and a live line every second on stderr (the final summary is
    /// [`DemoReport::summary_line`], for the caller to print).
    pub live: bool,
}

/// The demo's outcome.
#[derive(Clone, Copy, Debug)]
pub struct DemoReport {
    /// Records published on the source.
    pub published: u64,
    /// Records the reader got from the mirror ring.
    pub delivered: u64,
    /// Records the reader found overwritten or skipped.
    pub missed: u64,
    /// Records whose payload did not match what was published.
    pub corrupt: u64,
    /// Push-to-read latency over the whole run.
    pub latency: Summary,
    /// How late the producer pushed each record after its scheduled time (push time − due).
    /// The producer sleeps to each due time and stamps at the push (the timer's own lateness
    /// is not the pipeline's), so this is how much a producer stall could hide from
    /// `latency`.
    pub producer_lateness: Summary,
    /// The sequence numbers carried inside the records the reader got, matched against
    /// what was published: loss, reorders, duplicates and gaps as the reader saw them.
    /// [`run`] always fills it in, whatever the run's length.
    pub stream: Option<StressReport>,
    /// Wall time of the publishing schedule, from the first publish to the end of the last
    /// record's interval (or to the last publish, if that came later, or to the stop):
    /// `published` over this is the rate the producer achieved (an open-loop producer that
    /// falls behind publishes late, not less).
    pub publish_time: StdDuration,
    /// CPU time (user + system) the whole process used over `publish_time`: producer,
    /// server, mirror and reader together. Over `publish_time` it is the cores the run
    /// cost, which is what `--spin` and anticipation trade against latency.
    pub cpu_time: StdDuration,
}

impl DemoReport {
    /// What went wrong for the reader, if anything: records that arrived corrupt, twice,
    /// out of order or never sent, and records published but not delivered: missed (gone
    /// from the mirror ring before the reader got to them, because it was lapped or the
    /// mirror skipped them after a GAP) or never seen at all. A broadcast ring allows a
    /// reader to be lapped, but the demo shows the whole path carrying every record, so a
    /// missed one fails the run, as in `bench stress`.
    pub fn problem(&self) -> Option<String> {
        let mut found = Vec::new();
        if self.corrupt > 0 {
            found.push(format!("{} arrived corrupt", records(self.corrupt)));
        }
        if let Some(s) = &self.stream {
            for (n, what) in [
                (s.duplicates, "arrived twice"),
                (s.reorders, "arrived out of order"),
                (s.bogus, "carried a sequence never published"),
            ] {
                if n > 0 {
                    found.push(format!("{} {what}", records(n)));
                }
            }
        }
        if self.missed > 0 {
            found.push(format!(
                "{} of {} published missed (gone from the mirror ring before the reader got \
                 to them: the reader was lapped or the mirror skipped them after a GAP)",
                records(self.missed),
                self.published
            ));
        }
        let lost = self
            .published
            .saturating_sub(self.delivered.saturating_add(self.missed));
        if lost > 0 {
            found.push(format!(
                "{} of {} published never reached the reader",
                records(lost),
                self.published
            ));
        }
        (!found.is_empty()).then(|| found.join(", "))
    }

    /// [`DemoReport::problem`] for a run over `transport`. When a UDP transport delivered
    /// nothing at all, the likeliest cause is the host (a firewall dropping UDP on loopback:
    /// the mirror then hears neither data nor heartbeats, so it has nothing to repair over
    /// TCP), and the problem names the transport that needs no UDP.
    pub fn problem_over(&self, transport: Transport) -> Option<String> {
        let p = self.problem()?;
        if transport != Transport::Tcp && self.delivered == 0 && self.published > 0 {
            return Some(format!(
                "{p}; no record came over UDP: is UDP on loopback filtered? \
                 `ringwire demo --transport tcp` needs none"
            ));
        }
        Some(p)
    }

    /// The one-line summary `ringwire demo` prints on stdout at the end.
    pub fn summary_line(&self, transport: Transport) -> String {
        let l = self.latency;
        format!(
            "demo: {transport}: published {}, delivered {}, missed {}, corrupt {}; push→read p50 {} p90 {} p99 {} p99.9 {} max {}; producer late (push − due) p50 {} p99 {} max {}; cpu {:.2} cores",
            self.published,
            self.delivered,
            self.missed,
            self.corrupt,
            fmt_ns(l.p50),
            fmt_ns(l.p90),
            fmt_ns(l.p99),
            fmt_ns(l.p999),
            fmt_ns(l.max),
            fmt_ns(self.producer_lateness.p50),
            fmt_ns(self.producer_lateness.p99),
            fmt_ns(self.producer_lateness.max),
            self.cores()
        )
    }

    /// Cores the process used while publishing: [`DemoReport::cpu_time`] over
    /// [`DemoReport::publish_time`] (0 if nothing was published).
    pub fn cores(&self) -> f64 {
        let wall = self.publish_time.as_secs_f64();
        if wall > 0.0 {
            self.cpu_time.as_secs_f64() / wall
        } else {
            0.0
        }
    }
}

/// "1 record", "2 records".
fn records(n: u64) -> String {
    format!("{n} record{}", if n == 1 { "" } else { "s" })
}

/// The synthetic record for sequence `seq` stamped at `ns`: stamp, sequence, a symbol, a
/// price and a quantity that depend on the sequence (so the reader can check the bytes).
pub fn record(seq: u64, ns: u64) -> [u8; RECORD_LEN] {
    let mut r = [0u8; RECORD_LEN];
    r[0..8].copy_from_slice(&ns.to_le_bytes());
    r[8..16].copy_from_slice(&seq.to_le_bytes());
    let sym = [b"ESZ6", b"NQZ6", b"CLF7", b"GCG7"][(seq % 4) as usize];
    r[16..20].copy_from_slice(sym);
    let price = 5_000_000_000u64 + (seq.wrapping_mul(2_654_435_761) % 100_000);
    r[24..32].copy_from_slice(&price.to_le_bytes());
    r[32..40].copy_from_slice(&(1 + seq % 97).to_le_bytes());
    r
}

/// True when `r` is what [`record`] made for `seq` (whatever its stamp).
pub fn check_record(seq: u64, r: &[u8]) -> bool {
    let Some(stamp) = r.get(0..8) else {
        return false;
    };
    let ns = u64::from_le_bytes(stamp.try_into().unwrap_or_default());
    r == record(seq, ns)
}

fn unique_paths() -> [PathBuf; 2] {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    let base = format!("/dev/shm/ringwire-demo-{}-{t:08x}", std::process::id());
    [
        PathBuf::from(format!("{base}-source")),
        PathBuf::from(format!("{base}-mirror")),
    ]
}

fn wait_for_file(p: &Path, stop: &AtomicBool, within: StdDuration) -> Option<RingFile> {
    let t0 = std::time::Instant::now();
    // Relaxed: a plain flag.
    while t0.elapsed() < within && !stop.load(Ordering::Relaxed) {
        if let Ok(r) = RingFile::open(p, Expect::RAW) {
            return Some(r);
        }
        crate::sys::sleep(StdDuration::from_millis(5));
    }
    None
}

/// How long the demo waits for the mirror ring to appear before it gives up.
const START_TIMEOUT: StdDuration = StdDuration::from_secs(10);

/// Why the run never started: a signal came first, or the mirror ring did not appear in
/// time, with the mirror's last connect or protocol error (its log is off in the demo). On
/// a host without multicast or UDP on loopback (a container whose loopback refuses group
/// memberships, a firewall), the default transport is what fails, so a UDP transport's
/// failure names the one that needs neither: a new user's first run otherwise ends on a
/// socket error with no way on.
fn not_started(
    interrupted: bool,
    mirror_error: Option<String>,
    transport: Transport,
) -> ReplicaError {
    let what = if interrupted {
        "interrupted by SIGINT, SIGTERM or SIGHUP before the mirror started".to_string()
    } else {
        let hint = match transport {
            Transport::Tcp => "",
            Transport::Multicast | Transport::Unicast => {
                "; `--transport tcp` needs neither multicast nor UDP"
            }
        };
        format!(
            "the mirror did not start within {} s: {}{hint}",
            START_TIMEOUT.as_secs(),
            match mirror_error {
                Some(e) => format!("its last error: {e}"),
                None => "it reported no connect or protocol error".into(),
            }
        )
    };
    ReplicaError::DemoFailed { what }
}

/// Runs started by this process (for unique multicast groups and ports).
static RUNS: AtomicU64 = AtomicU64::new(0);

/// Runs the demo; `stop` ends it early (Ctrl-C), and so does a stage that stops (serve or
/// the mirror failed, the reader gave up), with that stage's error.
pub fn run(opts: &DemoOptions, stop: &AtomicBool) -> Result<DemoReport, ReplicaError> {
    // Removed when dropped, or by a second Ctrl-C (see `signal`).
    let [src_path, mir_path] = unique_paths();
    let files = [
        signal::remove_on_exit(&src_path),
        signal::remove_on_exit(&mir_path),
    ];
    let geo = Geometry::spmc(CAPACITY, RECORD_LEN + 8, 8, 0, false)
        .map_err(|e| ReplicaError::arg("--rate", e, "geometry"))?;
    let src = RingFile::create(&src_path, &geo, &CreateOptions::default())?;
    let pid = std::process::id();
    // Runs in one process (stress rates, parallel tests) each get their own group and port.
    // Relaxed: a counter that only has to be unique.
    let run_no = RUNS.fetch_add(1, Ordering::Relaxed) as u32;
    let tag = pid.wrapping_mul(31).wrapping_add(run_no);
    let group = Ipv4Addr::new(239, 255, (tag >> 8) as u8, tag as u8);
    let port = 30_000 + (tag % 20_000) as u16;
    let mut so = ServeOptions::new(&src_path, SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
    so.log = false;
    so.spin = opts.spin;
    so.anticipate = opts.anticipate;
    match opts.transport {
        Transport::Tcp => {}
        Transport::Multicast => {
            so.multicast = Some(SocketAddrV4::new(group, port));
            so.iface = Some(Ipv4Addr::LOCALHOST);
            so.ttl = 0;
        }
        Transport::Unicast => so.udp = Some(0),
    }
    let server = Server::bind(so)?;
    let mut mo = MirrorOptions::new(server.local_addr(), &mir_path);
    mo.start = Start::Oldest;
    mo.unicast = opts.transport == Transport::Unicast;
    mo.iface = Ipv4Addr::LOCALHOST;
    mo.spin = opts.spin;
    mo.anticipate = opts.anticipate;
    mo.log = false;
    mo.reconnect = StdDuration::from_millis(100);
    if opts.live {
        diag!(
            "demo: {} over loopback, {} msg/s of {RECORD_LEN}-byte records for {} s",
            opts.transport,
            opts.rate,
            opts.seconds
        );
    }
    let mirror_error = &std::sync::Mutex::new(None);
    let halt = &AtomicBool::new(false);
    let ready = &AtomicBool::new(false);
    let published = &AtomicU64::new(0);
    let read_upto = &AtomicU64::new(0);
    // Every record the pacer can schedule within the run; anything above is bogus.
    let max_seq = opts.rate.saturating_mul(opts.seconds).saturating_add(1);
    let (server, mo, mir_path) = (&server, &mo, &mir_path);
    // Publishing runs on this thread, inside the scope: wall time, CPU time, lateness.
    let mut produced: Option<(StdDuration, StdDuration, Latency)> = None;
    let result = std::thread::scope(|sc| {
        let srv = sc.spawn(move || server.run(halt));
        let mir = sc.spawn(move || run_noting_errors(mo, halt, mirror_error));
        let rd = ReaderCtx {
            published,
            read_upto,
            halt,
            ready,
            live: opts.live,
            spin: opts.spin,
            anticipate: opts.anticipate,
            max_seq,
        };
        let reader = sc.spawn(move || reader(mir_path, &rd));
        let t0 = std::time::Instant::now();
        // A stage that stopped (the mirror could not create its ring) is waited for no
        // longer: its error ends the run. Relaxed: plain flags; the reader owns its mapping.
        while !ready.load(Ordering::Relaxed)
            && !stop.load(Ordering::Relaxed)
            && !reader.is_finished()
            && !srv.is_finished()
            && !mir.is_finished()
            && t0.elapsed() < START_TIMEOUT
        {
            crate::sys::sleep(StdDuration::from_millis(5));
        }
        if ready.load(Ordering::Relaxed) {
            let (t0, cpu0) = (std::time::Instant::now(), crate::sys::process_cpu_time());
            // A stage that ended (serve or mirror failed, the reader gave up) ends the run
            // with its error now, not after the rest of `--seconds` of publishing to nobody.
            // Relaxed: a plain flag.
            let ended = || {
                stop.load(Ordering::Relaxed)
                    || srv.is_finished()
                    || mir.is_finished()
                    || reader.is_finished()
            };
            let late = produce(&src, opts, &ended, published);
            let cpu = crate::sys::process_cpu_time().saturating_sub(cpu0);
            produced = Some((t0.elapsed(), cpu, late));
            // Let the last records arrive.
            let t0 = std::time::Instant::now();
            while !reader.is_finished()
                && read_upto.load(Ordering::Relaxed) < published.load(Ordering::Relaxed)
                && t0.elapsed() < StdDuration::from_secs(2)
            {
                crate::sys::sleep(StdDuration::from_millis(5));
            }
        }
        halt.store(true, Ordering::Relaxed);
        let rep = reader.join().ok().flatten();
        let m = mir.join();
        let s = srv.join();
        if let Ok(Err(e)) = s {
            return Err(e);
        }
        if let Ok(Err(e)) = m {
            return Err(e);
        }
        rep.ok_or_else(|| {
            // Relaxed: a plain flag.
            let interrupted = stop.load(Ordering::Relaxed);
            let last = mirror_error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            not_started(interrupted, last, opts.transport)
        })
    })?;
    let (delivered, missed, corrupt, lat, tracker) = result;
    let sent = published.load(Ordering::Relaxed);
    let (publish_time, cpu_time, lateness) =
        produced.unwrap_or((StdDuration::ZERO, StdDuration::ZERO, Latency::new()));
    let report = DemoReport {
        published: sent,
        delivered,
        missed,
        corrupt,
        latency: lat.summary(),
        producer_lateness: lateness.summary(),
        stream: Some(tracker.finish(sent)),
        publish_time,
        cpu_time,
    };
    drop(src);
    drop(files);
    Ok(report)
}

/// Publishes stamped records on the pacer's schedule until the time is up or `ended()`
/// (a signal, or a stage of the run that stopped). Returns the producer's lateness: for
/// every record, push time − scheduled time.
fn produce(
    src: &RingFile,
    opts: &DemoOptions,
    ended: &dyn Fn() -> bool,
    published: &AtomicU64,
) -> Latency {
    let mut late = Latency::new();
    // The copy lives in `p`, which this function drops before returning; `src` outlives it.
    let Ok(mut p) = Producer::new(*src.ring(), crate::FutexWake::new()) else {
        return late;
    };
    p.set_fenced_publish(crate::sys::fenced_publish());
    let mut pacer = Pacer::new(opts.rate as f64);
    // Counted, not timed against a clock read after the pacer's start: that `end` lay a
    // little past `rate × seconds` records, and at millions a second the extra records
    // were past the run's `max_seq` and reported as never published.
    let records = opts.rate.saturating_mul(opts.seconds);
    while !ended() {
        let (i, due) = pacer.next_due();
        if i >= records {
            break;
        }
        let wait = due.saturating_duration_since(std::time::Instant::now());
        if !wait.is_zero() {
            crate::sys::sleep(wait);
        }
        let seq = p.next_seq();
        // Stamped at the push, not at `due`: the sleep's wake-up lateness belongs to the load
        // generator, and is recorded apart so a reader can see what it could hide.
        late.record(
            std::time::Instant::now()
                .saturating_duration_since(due)
                .as_nanos() as u64,
        );
        if p.push(&record(seq, now().as_nanos())).is_err() {
            // No sequence left below the limit (a corrupt header): nothing more is published.
            break;
        }
        // Relaxed: a progress count read after the producer stops.
        published.store(seq, Ordering::Relaxed);
    }
    // The run lasts its whole schedule, `records` intervals: ending at the last push, one
    // interval short, made `published / publish_time` overstate the rate (4 msg/s at 2 for
    // 1 s) and ended a 1 msg/s run of 1 s at once. Slept in steps so a signal still stops
    // it promptly.
    let end = pacer.due(records);
    while !ended() {
        let left = end.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        crate::sys::sleep(left.min(StdDuration::from_millis(50)));
    }
    late
}

type ReaderOut = (u64, u64, u64, Latency, SeqTracker);

/// What the reader shares with the run.
struct ReaderCtx<'a> {
    /// The last sequence published (for the live line).
    published: &'a AtomicU64,
    /// The last sequence the reader got (for the end-of-run drain).
    read_upto: &'a AtomicU64,
    halt: &'a AtomicBool,
    ready: &'a AtomicBool,
    live: bool,
    spin: bool,
    anticipate: bool,
    /// The highest sequence the run can publish.
    max_seq: u64,
}

/// The reader's sequence tracker for a run that can publish up to `max_seq` records:
/// [`TRACK_WINDOW`] bits, exact for everything the mirror ring can hand the reader.
fn stream_tracker(max_seq: u64) -> SeqTracker {
    SeqTracker::windowed(max_seq, TRACK_WINDOW)
}

/// Reads the mirror ring from sequence 1, recording push-to-read latency and feeding the
/// sequence carried in each record to a [`SeqTracker`]. The ring's rules are the core
/// [`Consumer`]'s: the lap rule of `layout::later_seq` (a corrupt slot loses its record
/// alone) and the hole skip of a sparse ring (spec §7), so a hole the mirror left after a
/// GAP counts as missed at once instead of stalling the reader until a lap overwrites it.
fn reader(path: &Path, cx: &ReaderCtx<'_>) -> Option<ReaderOut> {
    let (published, halt, ready, live) = (cx.published, cx.halt, cx.ready, cx.live);
    let ring = wait_for_file(path, halt, StdDuration::from_secs(10))?;
    // Relaxed: a plain flag.
    ready.store(true, Ordering::Relaxed);
    let view = ring.ring();
    // Unregistered: the demo's reader never holds the mirror back.
    let mut consumer = Consumer::new(*view, StartMode::Sequence(1));
    let mut total = Latency::new();
    let mut window = Latency::new();
    let mut waiter = RingWaiter::new(cx.spin, cx.anticipate);
    let mut tracker = stream_tracker(cx.max_seq);
    let mut buf = [0u8; RECORD_LEN];
    let (mut delivered, mut corrupt) = (0u64, 0u64);
    let mut last = std::time::Instant::now();
    let mut last_delivered = 0;
    // Relaxed: a plain flag.
    while !halt.load(Ordering::Relaxed) {
        let before = consumer.cursor();
        match consumer.try_recv(&mut buf) {
            Some(seq) => {
                let stamp = u64::from_le_bytes(buf[0..8].try_into().unwrap_or_default());
                let lat = now().as_nanos().saturating_sub(stamp);
                total.record(lat);
                window.record(lat);
                if !check_record(seq, &buf) {
                    corrupt += 1;
                }
                tracker.record(u64::from_le_bytes(
                    buf[8..16].try_into().unwrap_or_default(),
                ));
                delivered += 1;
            }
            None if consumer.cursor() == before => {
                waiter.wait(view, before, StdDuration::from_millis(5));
            }
            // Lapped or past a hole, nothing read yet: read on at once.
            None => {}
        }
        // Every sequence below the cursor is done with, read or missed (for the drain).
        // Relaxed: a progress count.
        cx.read_upto
            .store(consumer.cursor().saturating_sub(1), Ordering::Relaxed);
        if live && last.elapsed() >= StdDuration::from_secs(1) {
            let s = window.summary();
            diag!(
                "demo: {:>7.0} msg/s  p50 {:>8}  p99 {:>8}  max {:>8}  delivered {delivered} of {}",
                (delivered - last_delivered) as f64 / last.elapsed().as_secs_f64(),
                fmt_ns(s.p50),
                fmt_ns(s.p99),
                fmt_ns(s.max),
                // Relaxed: a progress count for display.
                published.load(Ordering::Relaxed)
            );
            window = Latency::new();
            last = std::time::Instant::now();
            last_delivered = delivered;
        }
    }
    Some((delivered, consumer.lapped(), corrupt, total, tracker))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(published: u64, delivered: u64, missed: u64, corrupt: u64) -> DemoReport {
        DemoReport {
            published,
            delivered,
            missed,
            corrupt,
            latency: Summary::default(),
            producer_lateness: Summary::default(),
            stream: Some(StressReport {
                sent: published,
                delivered,
                duplicates: 0,
                reorders: 0,
                gap_events: 0,
                missing: published - delivered,
                bogus: 0,
            }),
            publish_time: StdDuration::from_secs(2),
            cpu_time: StdDuration::from_millis(500),
        }
    }

    #[test]
    fn the_producer_publishes_exactly_rate_times_seconds_records_when_behind() {
        // 3,000,000 a second is more than a test build's producer keeps up with: behind its
        // schedule it pushes as fast as it can, and stops at the count (an `end` read after
        // the pacer started let it publish a few records past the run's `max_seq`).
        let files = unique_paths().map(signal::remove_on_exit);
        let geo = Geometry::spmc(CAPACITY, RECORD_LEN + 8, 8, 0, false).unwrap();
        let src = RingFile::create(files[0].path(), &geo, &CreateOptions::default()).unwrap();
        let opts = DemoOptions {
            transport: Transport::Tcp,
            seconds: 1,
            rate: 3_000_000,
            spin: false,
            anticipate: false,
            live: false,
        };
        let published = AtomicU64::new(0);
        produce(&src, &opts, &|| false, &published);
        assert_eq!(published.load(Ordering::Relaxed), 3_000_000);
        assert_eq!(src.ring().write_seq().load(Ordering::Relaxed), 3_000_000);
    }

    /// `published` over `publish_time` is the rate the producer achieved (`bench stress`'s
    /// "achieved" column), so the time spans the whole schedule, `rate × seconds` intervals.
    /// It was the time from the first push to the last, one interval short: at 2 msg/s for
    /// 1 s that read 4 msg/s, and at 1 msg/s (one push) thousands a second.
    #[test]
    fn publish_time_spans_the_whole_schedule() {
        let opts = DemoOptions {
            transport: Transport::Tcp,
            seconds: 1,
            rate: 2,
            spin: false,
            anticipate: true,
            live: false,
        };
        let r = run(&opts, &AtomicBool::new(false)).expect("demo run");
        assert_eq!((r.published, r.delivered), (2, 2), "{r:?}");
        let achieved = r.published as f64 / r.publish_time.as_secs_f64();
        assert!(
            achieved <= 2.0 && achieved > 1.0,
            "achieved {achieved} msg/s: {r:?}"
        );
    }

    #[test]
    fn a_report_names_what_went_wrong() {
        assert_eq!(report(100, 100, 0, 0).problem(), None);
        // A broadcast ring lets a reader be lapped, but the demo must carry every record.
        let p = report(100, 90, 10, 0).problem().expect("a problem");
        assert!(p.contains("10 records of 100 published missed"), "{p}");
        assert!(!p.contains("never reached"), "{p}");
        let p = report(100, 89, 10, 0).problem().expect("a problem");
        assert!(p.contains("10 records of 100 published missed"), "{p}");
        assert!(p.contains("1 record of 100 published never reached"), "{p}");
        let p = report(100, 97, 0, 2).problem().expect("a problem");
        assert!(p.contains("2 records arrived corrupt"), "{p}");
        assert!(
            p.contains("3 records of 100 published never reached"),
            "{p}"
        );
        let mut r = report(100, 100, 0, 0);
        if let Some(s) = r.stream.as_mut() {
            s.reorders = 4;
            s.duplicates = 1;
        }
        let p = r.problem().expect("a problem");
        assert!(p.contains("1 record arrived twice"), "{p}");
        assert!(p.contains("4 records arrived out of order"), "{p}");
    }

    /// `bench stress` and `bench mirror` accept 5,000,000 msg/s for 60 s: 3e8 records, past
    /// the 2^28 that one bit per record was capped at (beyond it every row read "ERROR:
    /// sequences not tracked" with nothing lost). The reader's tracker is bounded whatever
    /// the run's length and exact past 2^28 for every record the mirror ring can hand it.
    #[test]
    fn the_reader_tracks_sequences_past_2_pow_28_in_bounded_memory() {
        use crate::bench::Arrival;
        let max_seq = 5_000_000 * 60 + 1;
        let mut t = stream_tracker(max_seq);
        assert!(t.memory_bytes() <= 1 << 20, "{} bytes", t.memory_bytes());
        // A reader that meets the stream just below 2^28 (one gap from sequence 0) and
        // reads on in order past it, across three laps of the ring.
        let first = (1u64 << 28) - 10;
        let last = first + 3 * CAPACITY - 1;
        for s in first..=last {
            assert_eq!(t.record(s), Arrival::InOrder, "seq {s}");
        }
        // A record a whole ring behind the newest (the oldest a ring could still hold) is
        // told apart exactly: seen before, or late and not seen before.
        assert_eq!(t.record(last - CAPACITY), Arrival::Duplicate);
        assert_eq!(t.record(last + 2), Arrival::InOrder);
        assert_eq!(t.record(last + 1), Arrival::Reordered);
        assert_eq!(t.record(last + 1), Arrival::Duplicate);
        // The last sequence the schedule can publish, and one past it.
        assert_eq!(t.record(max_seq), Arrival::InOrder);
        assert_eq!(t.record(max_seq + 1), Arrival::Bogus);
        let r = t.finish(max_seq);
        assert_eq!(r.delivered, 3 * CAPACITY + 3);
        assert_eq!(r.missing, max_seq - (3 * CAPACITY + 3));
        assert_eq!(
            (r.duplicates, r.reorders, r.gap_events, r.bogus),
            (2, 1, 3, 1)
        );
    }

    #[test]
    fn a_run_that_never_started_says_why() {
        let refused = || Some("connect 127.0.0.1:1: refused".to_string());
        let e = not_started(true, refused(), Transport::Tcp).to_string();
        assert_eq!(
            e,
            "demo: interrupted by SIGINT, SIGTERM or SIGHUP before the mirror started"
        );
        let e = not_started(false, refused(), Transport::Tcp).to_string();
        assert_eq!(
            e,
            "demo: the mirror did not start within 10 s: its last error: connect \
             127.0.0.1:1: refused"
        );
        let e = not_started(false, None, Transport::Tcp).to_string();
        assert!(
            e.ends_with("it reported no connect or protocol error"),
            "{e}"
        );
    }

    /// A UDP transport that failed (here: a loopback that refuses the multicast group, as
    /// `net.ipv4.igmp_max_memberships=0` does) names the transport that needs no UDP.
    #[test]
    fn a_udp_transport_that_never_started_names_tcp() {
        let join = "mirror UDP socket: bind 0.0.0.0:43987 and join multicast group \
                    239.255.51.35:43987 on interface 127.0.0.1 (--iface): No buffer space \
                    available (os error 105)";
        for t in [Transport::Multicast, Transport::Unicast] {
            let e = not_started(false, Some(join.into()), t).to_string();
            assert!(e.contains(join), "{e}");
            assert!(
                e.ends_with("; `--transport tcp` needs neither multicast nor UDP"),
                "{e}"
            );
        }
        // Interrupted, nothing failed: no hint.
        let e = not_started(true, Some(join.into()), Transport::Multicast).to_string();
        assert!(!e.contains("--transport"), "{e}");
    }

    /// Nothing delivered over a UDP transport: the problem says so and names TCP; over
    /// TCP, or with some records delivered, it is the plain problem.
    #[test]
    fn a_udp_run_that_delivered_nothing_names_tcp() {
        let none = report(200, 0, 0, 0);
        for t in [Transport::Multicast, Transport::Unicast] {
            let p = none.problem_over(t).expect("a problem");
            assert!(
                p.starts_with("200 records of 200 published never reached"),
                "{p}"
            );
            assert!(p.contains("is UDP on loopback filtered?"), "{p}");
            assert!(
                p.ends_with("`ringwire demo --transport tcp` needs none"),
                "{p}"
            );
        }
        assert_eq!(none.problem_over(Transport::Tcp), none.problem());
        let some = report(200, 150, 0, 0);
        assert_eq!(some.problem_over(Transport::Multicast), some.problem());
        assert_eq!(report(0, 0, 0, 0).problem_over(Transport::Multicast), None);
    }

    /// A mirror ring of `capacity` slots (sparse, as `ringwire mirror` makes it) whose slots
    /// hold the demo records `seqs` (a slot given as `(slot seq, record seq)` holds that
    /// sequence word over the record of the other), `write_seq` published at `w`; then
    /// what the demo's reader makes of it once it is done with every sequence up to `w`
    /// (or after 30 s, when it never is): (delivered, missed, corrupt).
    fn read_mirror_ring(capacity: u64, slots: &[(u64, u64)], w: u64) -> (u64, u64, u64) {
        let files = unique_paths().map(signal::remove_on_exit);
        let mut geo = Geometry::spmc(capacity, RECORD_LEN + 8, 8, 0, false).unwrap();
        geo.flags.0 |= ringwire_core::Flags::SPARSE;
        let f = RingFile::create(files[1].path(), &geo, &CreateOptions::default()).unwrap();
        let view = f.ring();
        for &(slot_seq, rec) in slots {
            view.write_slot(slot_seq, &record(rec, now().as_nanos()));
            // Release: the reader's acquire load of the word sees the payload.
            view.slot_seq(slot_seq).store(slot_seq, Ordering::Release);
        }
        view.write_seq().store(w, Ordering::Release);
        let (published, read_upto) = (AtomicU64::new(w), AtomicU64::new(0));
        let (halt, ready) = (AtomicBool::new(false), AtomicBool::new(false));
        let cx = ReaderCtx {
            published: &published,
            read_upto: &read_upto,
            halt: &halt,
            ready: &ready,
            live: false,
            spin: false,
            anticipate: false,
            max_seq: w,
        };
        let (delivered, missed, corrupt, _, _) = std::thread::scope(|sc| {
            let rd = sc.spawn(|| reader(files[1].path(), &cx));
            // A generous bound: the checks are on the counts, not on the time.
            let t0 = std::time::Instant::now();
            while read_upto.load(Ordering::Relaxed) < w && t0.elapsed() < StdDuration::from_secs(30)
            {
                crate::sys::sleep(StdDuration::from_millis(5));
            }
            halt.store(true, Ordering::Relaxed);
            rd.join()
                .expect("reader thread")
                .expect("reader opened the ring")
        });
        (delivered, missed, corrupt)
    }

    /// The reader's verdicts on a mirror ring are the core's (`Consumer`: the lap rule of
    /// `layout::later_seq` and §7's hole skip), so delivered + missed is every sequence up
    /// to `write_seq`. Its own rule waited at a hole the mirror left after a GAP until a
    /// whole lap overwrote it (and then counted the records after the hole, which it could
    /// have read, as missed; a hole in the last lap of a run was never passed), and took a
    /// corrupt slot's sequence far past `write_seq` as a lap to it: more missed than
    /// published, and nothing read after.
    #[test]
    fn the_reader_skips_a_mirror_hole_and_a_corrupt_slot_as_the_core_does() {
        // Ordinary laps: 20 records on 8 slots, 1..=12 gone, 13..=20 read.
        let all: Vec<_> = (13..=20).map(|s| (s, s)).collect();
        assert_eq!(read_mirror_ring(8, &all, 20), (8, 12, 0));
        // A GAP from 4 to 10: 4..=9 were never written, their slots are empty.
        let holed: Vec<_> = (1..=3).chain(10..=20).map(|s| (s, s)).collect();
        assert_eq!(read_mirror_ring(64, &holed, 20), (14, 6, 0));
        // Slot of 5 holds a sequence no writer stored (5 + 1000 laps): 5 alone is lost.
        let mut corrupt: Vec<_> = (1..=20).filter(|&s| s != 5).map(|s| (s, s)).collect();
        corrupt.push((5 + 1000 * 64, 5));
        assert_eq!(read_mirror_ring(64, &corrupt, 20), (19, 1, 0));
        // A record whose bytes are not its sequence's: delivered, and corrupt.
        let mut wrong: Vec<_> = (1..=20).filter(|&s| s != 7).map(|s| (s, s)).collect();
        wrong.push((7, 8));
        assert_eq!(read_mirror_ring(64, &wrong, 20), (20, 0, 1));
    }

    #[test]
    fn cores_are_cpu_time_over_publish_time() {
        assert_eq!(report(1, 1, 0, 0).cores(), 0.25);
        let mut r = report(0, 0, 0, 0);
        r.publish_time = StdDuration::ZERO;
        assert_eq!(r.cores(), 0.0);
    }
}
