//! `ringwire bench`: measurements reported as HDR percentiles, with `--json` and `--plot`.
//!
//! * `floor`: the machine's physical floor (cache-line ping-pong between two cores, loopback
//!   datagram rate), the reference every other figure is reported against.
//! * `handoff`: producer → consumer on one ring across two processes, open loop at a fixed
//!   rate, push-to-read latency from the record's monotonic-clock stamp.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Subcommand;

use crate::bench::floor::{cacheline_round_trip, loopback_datagram_rate, pin_to, timer_overhead};
use crate::bench::plot::{Chart, Scale, Series};
use crate::bench::{Latency, Pacer, fmt_ns, mono_ns};
use crate::{Error, Result, RingConsumer, RingProducer};

/// The benchmark modes.
#[derive(Debug, Subcommand)]
pub enum BenchMode {
    /// The machine's floor: a bare cache-line ping-pong between two cores and the loopback
    /// datagram rate.
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
    /// Producer → consumer on one ring across two processes, open loop: push-to-read
    /// latency percentiles.
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
        /// Internal: run as the reader process of the ring at this path.
        #[arg(long, hide = true)]
        reader: Option<PathBuf>,
        /// Internal: records the reader waits for.
        #[arg(long, hide = true, default_value_t = 0)]
        count: u64,
    },
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
            ..
        } => handoff_reader(&path, count, out),
        BenchMode::Handoff {
            rate,
            seconds,
            json,
            plot,
            ..
        } => handoff(rate, seconds, json, plot, out),
    }
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
    let timer = timer_overhead(10_000);
    let rate = loopback_datagram_rate(datagrams, 64, Duration::from_secs(30))
        .map_err(|e| Error::io(Path::new("127.0.0.1"), "loopback datagrams", e))?;
    let s = lat.summary();
    if json {
        write_out(
            out,
            &format!(
                "{{\"cacheline_round_trip\":{},\"timer_overhead_ns\":{timer},\"pinned\":{},\"loopback_64b\":{{\"sent\":{},\"received\":{},\"per_sec\":{:.0}}}}}",
                s.to_json(),
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
    let mut pacer = Pacer::new(rate as f64);
    for _ in 0..total {
        let (i, due) = pacer.next_due();
        while Instant::now() < due {
            std::hint::spin_loop();
        }
        let mut r: Stamp = [0; 8];
        r[0] = i + 1;
        r[1] = mono_ns();
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
                "handoff across processes at {rate} msg/s for {seconds} s: sent {total}, received {}, lapped {}",
                v["received"], v["lapped"]
            ),
        )?;
        let p = |k: &str| fmt_ns(v["summary"][k].as_u64().unwrap_or(0));
        write_out(
            out,
            &format!(
                "push-to-read: p50={} p90={} p99={} p99.9={} max={}",
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

fn handoff_reader(path: &Path, count: u64, out: &mut dyn Write) -> Result<()> {
    pin_to(1);
    let mut cons = RingConsumer::<Stamp>::builder()
        .start_from_oldest()
        .attach(path)?;
    write_out(out, "ready")?;
    out.flush()
        .map_err(|e| Error::io(path, "write output", e))?;
    let mut lat = Latency::new();
    let mut received = 0u64;
    // Bounded: the producer publishes `count` records within its run; give up 30 s after the
    // last record arrived.
    let mut last = Instant::now();
    while received < count && last.elapsed() < Duration::from_secs(30) {
        if let Some(r) = cons.try_recv() {
            lat.record(mono_ns().saturating_sub(r[1]));
            received += 1;
            last = Instant::now();
        } else {
            std::hint::spin_loop();
        }
    }
    let curve: Vec<String> = lat
        .curve()
        .iter()
        .map(|(p, v)| format!("[{p},{v}]"))
        .collect();
    write_out(
        out,
        &format!(
            "{{\"received\":{received},\"lapped\":{},\"summary\":{},\"curve\":[{}]}}",
            cons.lapped_count(),
            lat.summary().to_json(),
            curve.join(",")
        ),
    )
}
