//! `ringwire bench`: measurements reported as HDR percentiles, with `--json` and `--plot`.
//!
//! * `floor`: the machine's physical floor (cache-line ping-pong between two cores, loopback
//!   datagram rate), the reference every other figure is reported against.
//! * `handoff`: producer → consumer on one ring across two processes, open loop at a fixed
//!   rate, latency from each record's *scheduled* publish time (the producer spins to it and
//!   stamps it, CLOCK_MONOTONIC) to its read, so a producer stall is not hidden; the reader
//!   checks every record's sequence and reports received, lapped and missing.
//! * `stress`: source → serve → mirror → reader over loopback in this process, open loop at
//!   each rate; delivered %, reorders, duplicates, gaps and push-to-read p50/p99 per rate.
//!   Any loss, reorder, duplicate, gap or corrupt record is an `ERROR` row and exit status 1.
//! * `mirror`: the same pipeline at 1,000 msg/s on every transport, default and spin.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Subcommand;

use crate::bench::floor::{
    MOVING_LINES, cacheline_round_trip, loopback_datagram_rate, moving_line_round_trip, pin_to,
    timer_overhead,
};
use crate::bench::loopback::{TRANSPORTS, Waiting, measure};
use crate::bench::plot::{Chart, Scale, Series};
use crate::bench::table::{RunRow, failures, stress_table};
use crate::bench::{Latency, Pacer, SeqTracker, StressReport, fmt_ns, mono_ns};
use crate::replica::cli::TransportArg;
use crate::replica::demo::Transport;
use crate::{Error, Result, RingConsumer, RingProducer};

/// The benchmark modes.
#[derive(Debug, Subcommand)]
pub enum BenchMode {
    /// The machine's floor: a bare cache-line ping-pong between two cores (the same two
    /// lines every time, and through rings of one-line slots, a new line each time, as a
    /// ring's records move) and the loopback datagram rate.
    Floor {
        /// Round trips to time (at least 1).
        #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
        rounds: u64,
        /// Datagrams for the loopback rate (at least 1).
        #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..))]
        datagrams: u64,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Draw the round-trip percentile curve into this SVG file.
        #[arg(long)]
        plot: Option<PathBuf>,
    },
    /// Producer → consumer on one ring across two processes, open loop: latency
    /// percentiles from each record's scheduled publish time to its read, and a sequence
    /// check of every record.
    Handoff {
        /// Records per second (open loop: the producer never waits for the reader).
        #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=50_000_000))]
        rate: u64,
        /// How long to publish, in seconds.
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3600))]
        seconds: u64,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Draw the latency percentile curve into this SVG file.
        #[arg(long)]
        plot: Option<PathBuf>,
        /// How the reader waits: `spin` (busy-poll) or `futex` (sleep on the ring's futex,
        /// woken by the producer; at low rates this measures the wake-up latency).
        #[arg(long, value_enum, default_value_t = ReaderWait::Spin)]
        wait: ReaderWait,
        /// Internal: run as the reader process of the ring at this path.
        #[arg(long, hide = true)]
        reader: Option<PathBuf>,
        /// Internal: records the reader waits for.
        #[arg(long, hide = true, default_value_t = 0)]
        count: u64,
    },
    /// Open-loop replication over loopback at each rate: delivered %, reorders, duplicates,
    /// gaps, push-to-read p50/p99. Exits 1 if any run lost, reordered, duplicated or
    /// corrupted a record.
    Stress {
        /// Transports to run (comma-separated; default: all three).
        #[arg(
            long,
            value_enum,
            value_delimiter = ',',
            default_value = "tcp,multicast,unicast"
        )]
        transport: Vec<TransportArg>,
        /// Offered rates in records per second (comma-separated, each 1..=5000000).
        #[arg(long, value_delimiter = ',', default_value = "1000,20000,100000,500000,1000000",
              value_parser = clap::value_parser!(u64).range(1..=5_000_000))]
        rates: Vec<u64>,
        /// Seconds of publishing per rate (1..=60).
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=60))]
        seconds: u64,
        /// Server, mirror and reader spin (bounded) before sleeping.
        #[arg(long)]
        spin: bool,
        /// Print JSON instead of the table.
        #[arg(long)]
        json: bool,
        /// Draw p50 and p99 against the rate into this SVG file.
        #[arg(long)]
        plot: Option<PathBuf>,
    },
    /// Push-to-read p50/p99 of a mirror on this host at a fixed rate, by TCP, multicast and
    /// unicast, default and spin configurations.
    Mirror {
        /// Records per second (1..=5000000).
        #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..=5_000_000))]
        rate: u64,
        /// Seconds per configuration (1..=60).
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=60))]
        seconds: u64,
        /// Print JSON instead of the table.
        #[arg(long)]
        json: bool,
    },
}

/// How the hand-off reader waits for records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ReaderWait {
    /// Busy-poll the ring.
    Spin,
    /// Sleep on the ring's futex between records (`FutexWait`).
    Futex,
}

/// One 64-byte record: sequence, monotonic-clock stamp, filler.
type Stamp = [u64; 8];

/// Runs a benchmark mode.
pub fn run(mode: BenchMode, out: &mut dyn Write) -> Result<()> {
    match mode {
        BenchMode::Floor {
            rounds,
            datagrams,
            json,
            plot,
        } => floor(rounds, datagrams, json, plot, out),
        BenchMode::Handoff {
            reader: Some(path),
            count,
            wait,
            ..
        } => handoff_reader(&path, count, wait, out),
        BenchMode::Handoff {
            rate,
            seconds,
            json,
            plot,
            wait,
            ..
        } => handoff(rate, seconds, json, plot, wait, out),
        BenchMode::Stress {
            transport,
            rates,
            seconds,
            spin,
            json,
            plot,
        } => {
            let ts: Vec<Transport> = transport.into_iter().map(to_transport).collect();
            let runs: Vec<(Transport, u64, bool)> = ts
                .iter()
                .flat_map(|&t| rates.iter().map(move |&r| (t, r, spin)))
                .collect();
            let rows = measure_all(&runs, seconds)?;
            report_rows("stress", &rows, json, out)?;
            if let Some(p) = plot {
                plot_rates(&p, &rows)?;
            }
            verdict(&rows)
        }
        BenchMode::Mirror {
            rate,
            seconds,
            json,
        } => {
            let runs: Vec<(Transport, u64, bool)> = TRANSPORTS
                .iter()
                .flat_map(|&t| [(t, rate, false), (t, rate, true)])
                .collect();
            let rows = measure_all(&runs, seconds)?;
            report_rows("mirror", &rows, json, out)?;
            verdict(&rows)
        }
    }
}

fn to_transport(t: TransportArg) -> Transport {
    match t {
        TransportArg::Tcp => Transport::Tcp,
        TransportArg::Multicast => Transport::Multicast,
        TransportArg::Unicast => Transport::Unicast,
    }
}

/// Runs each (transport, rate, spin) in turn, printing progress on stderr.
fn measure_all(runs: &[(Transport, u64, bool)], seconds: u64) -> Result<Vec<RunRow>> {
    let stop = crate::replica::signal::install();
    let mut rows = Vec::with_capacity(runs.len());
    for &(t, rate, spin) in runs {
        // Relaxed: a plain flag set by the signal handler.
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        let waiting = if spin {
            Waiting::Spin
        } else {
            Waiting::Default
        };
        let row = measure(t, rate, seconds, waiting, stop).map_err(|e| {
            Error::io(
                Path::new("loopback"),
                "bench run",
                std::io::Error::other(e.to_string()),
            )
        })?;
        eprintln!(
            "bench: {} {} {rate} msg/s: {}",
            row.transport,
            row.config,
            row.errors().unwrap_or_else(|| "ok".into())
        );
        rows.push(row);
    }
    Ok(rows)
}

fn report_rows(what: &str, rows: &[RunRow], json: bool, out: &mut dyn Write) -> Result<()> {
    if json {
        let items: Vec<String> = rows.iter().map(RunRow::to_json).collect();
        return write_out(
            out,
            &format!(
                "{{\"bench\":\"{what}\",\"clock\":\"CLOCK_MONOTONIC push-to-read, one process\",\"failures\":{},\"rows\":[{}]}}",
                failures(rows),
                items.join(",")
            ),
        );
    }
    write_out(
        out,
        "push-to-read one way (CLOCK_MONOTONIC, one process), open loop over loopback:",
    )?;
    write_out(out, stress_table(rows).trim_end())
}

/// Exit status 1 (through an error) when any row has errors.
fn verdict(rows: &[RunRow]) -> Result<()> {
    match failures(rows) {
        0 => Ok(()),
        n => Err(Error::io(
            Path::new("loopback"),
            "delivery check",
            std::io::Error::other(format!(
                "{n} of {} runs lost, reordered, duplicated or corrupted records (ERROR rows)",
                rows.len()
            )),
        )),
    }
}

fn plot_rates(path: &Path, rows: &[RunRow]) -> Result<()> {
    let mut series = Vec::new();
    for t in TRANSPORTS {
        let name = crate::bench::loopback::transport_name(t);
        let mine: Vec<&RunRow> = rows.iter().filter(|r| r.transport == name).collect();
        if mine.is_empty() {
            continue;
        }
        for (q, pick) in [("p50", 0), ("p99", 1)] {
            series.push(Series {
                name: format!("{name} {q}"),
                points: mine
                    .iter()
                    .map(|r| {
                        let v = if pick == 0 {
                            r.latency.p50
                        } else {
                            r.latency.p99
                        };
                        (r.rate as f64, v.max(1) as f64)
                    })
                    .collect(),
            });
        }
    }
    let chart = Chart {
        title: "push-to-read over loopback, open loop".into(),
        x_label: "rate (msg/s)".into(),
        y_label: "latency (ns)".into(),
        x_scale: Scale::Log,
        y_scale: Scale::Log,
        series,
    };
    std::fs::write(path, chart.to_svg()).map_err(|e| Error::io(path, "write plot", e))
}

fn write_out(out: &mut dyn Write, s: &str) -> Result<()> {
    writeln!(out, "{s}").map_err(|e| Error::io(Path::new("stdout"), "write output", e))
}

fn plot_curve(path: &Path, title: &str, lat: &Latency) -> Result<()> {
    let chart = Chart {
        title: title.into(),
        x_label: "percentile".into(),
        y_label: "latency (ns)".into(),
        x_scale: Scale::Linear,
        y_scale: Scale::Log,
        series: vec![Series {
            name: "ringwire".into(),
            points: lat
                .curve()
                .into_iter()
                .map(|(p, v)| (p, v as f64))
                .collect(),
        }],
    };
    std::fs::write(path, chart.to_svg()).map_err(|e| Error::io(path, "write plot", e))
}

fn floor(
    rounds: u64,
    datagrams: u64,
    json: bool,
    plot: Option<PathBuf>,
    out: &mut dyn Write,
) -> Result<()> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pin = (cpus >= 2).then_some((0, 1));
    let lat = cacheline_round_trip(rounds, pin);
    let moving = moving_line_round_trip(rounds, pin).summary();
    let timer = timer_overhead(10_000);
    // Sender and receiver on two cores too (the ping-pong above left this thread pinned).
    let rate = loopback_datagram_rate(datagrams, 64, Duration::from_secs(30), pin)
        .map_err(|e| Error::io(Path::new("127.0.0.1"), "loopback datagrams", e))?;
    let s = lat.summary();
    if json {
        write_out(
            out,
            &format!(
                "{{\"cacheline_round_trip\":{},\"moving_line_round_trip\":{},\"timer_overhead_ns\":{timer},\"pinned\":{},\"loopback_64b\":{{\"sent\":{},\"received\":{},\"per_sec\":{:.0}}}}}",
                s.to_json(),
                moving.to_json(),
                pin.is_some(),
                rate.sent,
                rate.received,
                rate.per_sec
            ),
        )?;
    } else {
        write_out(out, &format!("cache-line round trip (cores {pin:?}): {s}"))?;
        write_out(
            out,
            &format!(
                "moving-line round trip (a ring of {MOVING_LINES} one-line slots per direction): {moving}"
            ),
        )?;
        write_out(
            out,
            &format!(
                "  (each sample includes one clock read pair, median {})",
                fmt_ns(timer)
            ),
        )?;
        write_out(
            out,
            &format!(
                "loopback 64-byte datagrams: {:.0}/s received ({} sent, {} received)",
                rate.per_sec, rate.sent, rate.received
            ),
        )?;
    }
    if let Some(p) = plot {
        plot_curve(&p, "cache-line round trip between two cores", &lat)?;
    }
    Ok(())
}

/// Removes the benchmark ring even if the run fails.
struct Unlink(PathBuf);
impl Drop for Unlink {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn handoff(
    rate: u64,
    seconds: u64,
    json: bool,
    plot: Option<PathBuf>,
    wait: ReaderWait,
    out: &mut dyn Write,
) -> Result<()> {
    let path = PathBuf::from(format!(
        "/dev/shm/ringwire-bench-handoff-{}",
        std::process::id()
    ));
    let _guard = Unlink(path.clone());
    let mut prod = RingProducer::<Stamp>::create(&path, 1 << 16)?;
    let total = rate * seconds;
    let exe =
        std::env::current_exe().map_err(|e| Error::io(Path::new("ringwire"), "current_exe", e))?;
    let mut child = Command::new(exe)
        .args(["bench", "handoff", "--reader"])
        .arg(&path)
        .args(["--count", &total.to_string()])
        .args([
            "--wait",
            if wait == ReaderWait::Futex {
                "futex"
            } else {
                "spin"
            },
        ])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| Error::io(&path, "spawn reader", e))?;
    // The reader announces itself on stdout once attached.
    let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
    match lines.next() {
        Some(Ok(l)) if l == "ready" => {}
        other => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::InvalidArgument {
                path: path.clone(),
                what: format!("reader process did not start: {other:?}"),
            });
        }
    }
    pin_to(0);
    let pacer = Pacer::new(rate as f64);
    let start_ns = mono_ns();
    for i in 0..total {
        // The producer spins to each record's scheduled time and stamps the record with that
        // time, not with the time it got there: a producer stall then shows in the latency
        // of every record behind it (no coordinated omission).
        let due = pacer.due_ns(start_ns, i);
        while mono_ns() < due {
            std::hint::spin_loop();
        }
        let mut r: Stamp = [0; 8];
        r[0] = i + 1;
        r[1] = due;
        prod.push(&r);
    }
    let result = lines.next();
    let _ = child.wait();
    let line = match result {
        Some(Ok(l)) => l,
        other => {
            return Err(Error::InvalidArgument {
                path,
                what: format!("reader process failed: {other:?}"),
            });
        }
    };
    let v: serde_json::Value = serde_json::from_str(&line).map_err(|e| Error::InvalidArgument {
        path: path.clone(),
        what: format!("reader output {line:?}: {e}"),
    })?;
    if json {
        write_out(
            out,
            &format!("{{\"rate\":{rate},\"seconds\":{seconds},\"sent\":{total},\"reader\":{v}}}"),
        )?;
    } else {
        write_out(
            out,
            &format!(
                "handoff across processes at {rate} msg/s for {seconds} s: sent {total}, received {}, lapped {}, missing {}; sequence check: {}",
                v["received"],
                v["lapped"],
                v["missing"],
                v["seq_errors"].as_str().unwrap_or("ok")
            ),
        )?;
        let p = |k: &str| fmt_ns(v["summary"][k].as_u64().unwrap_or(0));
        write_out(
            out,
            &format!(
                "scheduled-time-to-read: p50={} p90={} p99={} p99.9={} max={}",
                p("p50_ns"),
                p("p90_ns"),
                p("p99_ns"),
                p("p999_ns"),
                p("max_ns")
            ),
        )?;
    }
    if let Some(plot) = plot {
        let points = v["curve"]
            .as_array()
            .map(|pts| {
                pts.iter()
                    .filter_map(|p| Some((p[0].as_f64()?, p[1].as_f64()?)))
                    .collect()
            })
            .unwrap_or_default();
        let chart = Chart {
            title: format!("push-to-read across processes at {rate} msg/s"),
            x_label: "percentile".into(),
            y_label: "latency (ns)".into(),
            x_scale: Scale::Linear,
            y_scale: Scale::Log,
            series: vec![Series {
                name: "ringwire".into(),
                points,
            }],
        };
        std::fs::write(&plot, chart.to_svg()).map_err(|e| Error::io(&plot, "write plot", e))?;
    }
    Ok(())
}

fn handoff_reader(path: &Path, count: u64, wait: ReaderWait, out: &mut dyn Write) -> Result<()> {
    pin_to(1);
    let mut cons = RingConsumer::<Stamp>::builder()
        .start_from_oldest()
        .attach(path)?;
    write_out(out, "ready")?;
    out.flush()
        .map_err(|e| Error::io(path, "write output", e))?;
    let mut lat = Latency::new();
    let mut received = 0u64;
    // Every record's sequence (1..=count) is checked: loss, duplicates, reorders and gaps.
    let mut seqs = SeqTracker::new(count);
    // Bounded: the producer publishes `count` records within its run; stop at the last one
    // and give up 30 s after the last record arrived.
    let mut last = Instant::now();
    let mut futex = crate::wait::FutexWait::default();
    while received < count && last.elapsed() < Duration::from_secs(30) {
        let r = match wait {
            ReaderWait::Spin => cons.try_recv(),
            ReaderWait::Futex => cons.recv_timeout(&mut futex, Duration::from_millis(100)),
        };
        if let Some(r) = r {
            lat.record(mono_ns().saturating_sub(r[1]));
            received += 1;
            seqs.record(r[0]);
            last = Instant::now();
            if r[0] == count {
                break;
            }
        } else if wait == ReaderWait::Spin {
            std::hint::spin_loop();
        }
    }
    write_out(
        out,
        &handoff_reader_json(&lat, received, cons.lapped_count(), &seqs.finish(count)),
    )
}

/// The reader's result line: what arrived, the sequence check, the latency summary and curve.
fn handoff_reader_json(lat: &Latency, received: u64, lapped: u64, s: &StressReport) -> String {
    let curve: Vec<String> = lat
        .curve()
        .iter()
        .map(|(p, v)| format!("[{p},{v}]"))
        .collect();
    let seq_errors = match s.errors() {
        Some(e) => format!("\"{e}\""),
        None => "null".into(),
    };
    format!(
        "{{\"received\":{received},\"lapped\":{lapped},\"missing\":{},\"duplicates\":{},\"reorders\":{},\"gaps\":{},\"bogus\":{},\"seq_errors\":{seq_errors},\"summary\":{},\"curve\":[{}]}}",
        s.missing,
        s.duplicates,
        s.reorders,
        s.gap_events,
        s.bogus,
        lat.summary().to_json(),
        curve.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::Summary;

    fn row(seqs: &[u64], sent: u64) -> RunRow {
        let mut t = SeqTracker::new(sent);
        for &s in seqs {
            t.record(s);
        }
        RunRow {
            implementation: "ringwire".into(),
            transport: "multicast".into(),
            config: "default".into(),
            rate: 1_000,
            seconds: 1,
            achieved_rate: 1_000.0,
            stream: Some(t.finish(sent)),
            corrupt: 0,
            latency: Summary::default(),
            producer_lateness: None,
        }
    }

    #[test]
    fn any_error_row_fails_the_run() {
        assert!(verdict(&[row(&[1, 2, 3], 3), row(&[1, 2], 2)]).is_ok());
        let e = verdict(&[row(&[1, 2, 3], 3), row(&[2, 1], 2)]).unwrap_err();
        assert!(e.to_string().contains("1 of 2 runs"), "{e}");
        assert!(verdict(&[row(&[1, 1], 1)]).is_err());
        assert!(verdict(&[row(&[1], 2)]).is_err());
    }

    #[test]
    fn handoff_reader_reports_loss_and_sequence_errors() {
        let mut lat = Latency::new();
        lat.record(100);
        let mut t = SeqTracker::new(4);
        for s in [1, 2, 3, 4] {
            t.record(s);
        }
        let v: serde_json::Value =
            serde_json::from_str(&handoff_reader_json(&lat, 4, 0, &t.finish(4))).unwrap();
        assert_eq!(
            (v["received"].as_u64(), v["missing"].as_u64()),
            (Some(4), Some(0))
        );
        assert!(v["seq_errors"].is_null(), "{v}");
        assert_eq!(v["summary"]["count"], 1);
        let mut t = SeqTracker::new(4);
        for s in [1, 3, 2] {
            t.record(s);
        }
        let v: serde_json::Value =
            serde_json::from_str(&handoff_reader_json(&lat, 3, 2, &t.finish(4))).unwrap();
        assert_eq!(
            (v["lapped"].as_u64(), v["missing"].as_u64()),
            (Some(2), Some(1))
        );
        assert_eq!(v["reorders"], 1);
        assert!(
            v["seq_errors"].as_str().unwrap().contains("1 missing"),
            "{v}"
        );
    }

    #[test]
    fn json_report_counts_failures() {
        let mut out = Vec::new();
        report_rows("stress", &[row(&[1], 1), row(&[2], 2)], true, &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["failures"], 1);
        assert_eq!(v["rows"].as_array().map(Vec::len), Some(2));
        assert_eq!(v["rows"][1]["gaps"], 1);
    }
}
