//! `ringwire bench`: measurements reported as HDR percentiles, with `--json` and `--plot`.
//!
//! * `floor`: the machine's physical floor (cache-line ping-pong between two cores, lines
//!   moved between them in bulk, loopback datagram rate), the reference every other figure
//!   is reported against.
//! * `handoff`: producer → consumer on one ring across two processes, open loop at a fixed
//!   rate, latency from each record's *scheduled* publish time (the producer spins to it and
//!   stamps it, CLOCK_MONOTONIC) to its read, so a producer stall is not hidden; the reader
//!   checks every record's sequence and reports received, lapped and missing.
//! * `stress`: source → serve → mirror → reader over loopback in this process, open loop at
//!   each rate; delivered %, reorders, duplicates, gaps and push-to-read p50/p99 per rate.
//!   Any loss, reorder, duplicate, gap or corrupt record is an `ERROR` row and exit status 1;
//!   a run that cannot start (no multicast on this host) is a `FAILED` line after the table,
//!   the other runs still run, and the exit status is 1.
//! * `mirror`: the same pipeline at 1,000 msg/s on every transport, default and spin.
//!
//! SIGINT, SIGTERM and SIGHUP stop every mode but `floor` in order: `handoff` kills and reaps its
//! reader process and removes its ring, `stress` and `mirror` report the runs made so far
//! with the one cut short marked `INTERRUPTED`; all then exit non-zero. A `--plot` file is
//! checked before measuring, so a bad path fails at once rather than after the run.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use clap::Subcommand;

use crate::bench::floor::{
    MOVING_LINES, TRANSFER_LINES, cacheline_round_trip, cpu_pair, line_transfer,
    loopback_datagram_rate, moving_line_round_trip, pin_to, timer_overhead,
};
use crate::bench::loopback::{TRANSPORTS, Waiting, measure, transport_name};
use crate::bench::plot::{Chart, Scale, Series};
use crate::bench::table::{RunRow, failures, status_cell, stress_table_marked};
use crate::bench::{Latency, Pacer, SeqTracker, StressReport, fmt_ns, mono_ns};
use crate::replica::cli::TransportArg;
use crate::replica::demo::Transport;
use crate::{Error, Result, RingConsumer, RingProducer};

/// The benchmark modes.
#[derive(Debug, Subcommand)]
pub enum BenchMode {
    /// The machine's floor: a bare cache-line ping-pong between two cores (the same two
    /// lines every time, and through rings of one-line slots, a new line each time, as a
    /// ring's records move), the time per line to move 4,096 lines from one core to the
    /// other in bulk, and the loopback datagram rate.
    Floor {
        /// Round trips to time (at least 1). Each ping-pong stops early past 30 s, at a
        /// multiple of 4,096 rounds; the report's count says how many were timed.
        #[arg(long, default_value_t = 1_000_000, value_parser = super::at_least_1)]
        rounds: u64,
        /// Datagrams for the loopback rate (at least 1).
        #[arg(long, default_value_t = 200_000, value_parser = super::at_least_1)]
        datagrams: u64,
        /// Laps of the line transfer at each prefetch distance (at least 1). Each pass stops
        /// early past 30 s; the report's count says how many laps were timed.
        #[arg(long, default_value_t = 1_000, value_parser = super::at_least_1)]
        laps: u64,
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
        /// Records per second (1..=50000000; open loop: the producer never waits for the
        /// reader).
        #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=50_000_000))]
        rate: u64,
        /// How long to publish, in seconds (1..=3600).
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

impl BenchMode {
    /// A value given twice in one of the mode's comma lists (or in the same flag given
    /// twice): the flag's long name and the value. Each value is a run, so a repeated one would be
    /// measured twice and reported as two rows.
    pub(super) fn repeated(&self) -> Option<(&'static str, String)> {
        match self {
            BenchMode::Stress {
                transport, rates, ..
            } => super::repeated(transport)
                .map(|t| ("transport", super::value_name(t)))
                .or_else(|| super::repeated(rates).map(|r| ("rates", r.to_string()))),
            _ => None,
        }
    }
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

/// Slots of the hand-off ring.
const HANDOFF_SLOTS: u64 = 1 << 16;

/// Sequences the hand-off reader's tracker remembers (512 KiB of bits), whatever
/// `--rate` × `--seconds` is (up to 1.8e11 records: one bit each would be 22.5 GB). The ring
/// holds [`HANDOFF_SLOTS`] records, so the reader can never be handed one more than that
/// behind the newest it has read: a window 64 times larger checks every record exactly.
const HANDOFF_WINDOW: u64 = 64 * HANDOFF_SLOTS;

/// Runs a benchmark mode.
pub fn run(mode: BenchMode, out: &mut dyn Write) -> Result<()> {
    match mode {
        BenchMode::Floor {
            rounds,
            datagrams,
            laps,
            json,
            plot,
        } => floor(rounds, datagrams, laps, json, plot, out),
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
            if let Some(p) = &plot {
                check_plot_path(p)?;
            }
            let ts: Vec<Transport> = transport.into_iter().map(to_transport).collect();
            let runs: Vec<(Transport, u64, bool)> = ts
                .iter()
                .flat_map(|&t| rates.iter().map(move |&r| (t, r, spin)))
                .collect();
            let m = measure_all(&runs, seconds)?;
            report_rows("stress", &m, json, out)?;
            if let Some(p) = plot {
                plot_rates(&p, m.complete())?;
            }
            verdict("bench stress", &m)
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
            let m = measure_all(&runs, seconds)?;
            report_rows("mirror", &m, json, out)?;
            verdict("bench mirror", &m)
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

/// What [`measure_all`] measured.
#[derive(Debug, Default)]
struct Measured {
    /// One row per run made, in order.
    rows: Vec<RunRow>,
    /// A signal (SIGINT/SIGTERM/SIGHUP) stopped the runs.
    interrupted: bool,
    /// The last row's run was cut short by the signal: its figures cover part of its time.
    cut_short: bool,
    /// The runs the signal kept from starting (transport, rate, spin).
    not_run: Vec<(Transport, u64, bool)>,
    /// The runs that could not run (transport, rate, spin) and why: the pipeline did not
    /// start, e.g. multicast unavailable on this host. The other runs still run and are
    /// reported; one failed run used to discard every row measured before it.
    failed: Vec<((Transport, u64, bool), String)>,
}

impl Measured {
    /// The rows of runs that ran their whole time.
    fn complete(&self) -> &[RunRow] {
        &self.rows[..self.rows.len() - usize::from(self.cut_short)]
    }

    /// The index of the row cut short, if any.
    fn cut_short_row(&self) -> Option<usize> {
        self.cut_short.then(|| self.rows.len() - 1)
    }

    /// The runs that failed, one per line: `FAILED: tcp default 1000 msg/s: why`.
    fn failed_lines(&self) -> Vec<String> {
        self.failed
            .iter()
            .map(|&((t, rate, spin), ref e)| {
                let cfg = if spin { "spin" } else { "default" };
                format!("FAILED: {} {cfg} {rate} msg/s: {e}", transport_name(t))
            })
            .collect()
    }

    /// What the signal did, for the report and the error.
    fn interruption(&self) -> String {
        let name = |t: Transport, rate: u64, spin: bool| {
            let cfg = if spin { "spin" } else { "default" };
            format!("{} {cfg} {rate} msg/s", transport_name(t))
        };
        let mut what = String::from("interrupted by SIGINT, SIGTERM or SIGHUP");
        if let Some(r) = self.cut_short_row().map(|i| &self.rows[i]) {
            what += &format!(": {} {} {} msg/s cut short", r.transport, r.config, r.rate);
        }
        if !self.not_run.is_empty() {
            let names: Vec<String> = self
                .not_run
                .iter()
                .map(|&(t, r, s)| name(t, r, s))
                .collect();
            what += &format!(
                "{} {} not run ({})",
                if self.cut_short { ";" } else { ":" },
                self.not_run.len(),
                names.join(", ")
            );
        }
        what
    }
}

/// Runs each (transport, rate, spin) in turn, printing progress on stderr, until done or
/// SIGINT/SIGTERM/SIGHUP.
fn measure_all(runs: &[(Transport, u64, bool)], seconds: u64) -> Result<Measured> {
    let stop = crate::replica::signal::install();
    measure_until(runs, stop, |t, rate, waiting| {
        measure(t, rate, seconds, waiting, stop).map_err(|e| e.to_string())
    })
}

/// [`measure_all`] with the run itself and the stop flag given (for tests).
fn measure_until(
    runs: &[(Transport, u64, bool)],
    stop: &AtomicBool,
    mut run_one: impl FnMut(Transport, u64, Waiting) -> std::result::Result<RunRow, String>,
) -> Result<Measured> {
    let mut m = Measured::default();
    for (k, &(t, rate, spin)) in runs.iter().enumerate() {
        // Relaxed: a plain flag set by the signal handler.
        if stop.load(Ordering::Relaxed) {
            m.interrupted = true;
            m.not_run = runs[k..].to_vec();
            break;
        }
        let waiting = if spin {
            Waiting::Spin
        } else {
            Waiting::Default
        };
        let result = run_one(t, rate, waiting);
        // A signal during the run ended it before its time was up.
        let cut = stop.load(Ordering::Relaxed);
        let row = match result {
            Ok(row) => row,
            // Stopped before it measured anything (the pipeline never started).
            Err(_) if cut => {
                m.interrupted = true;
                m.not_run = runs[k..].to_vec();
                break;
            }
            Err(e) => {
                diag!(
                    "bench: {} {} {rate} msg/s: FAILED: {e}",
                    transport_name(t),
                    waiting.name()
                );
                m.failed.push(((t, rate, spin), e));
                continue;
            }
        };
        diag!(
            "bench: {} {} {rate} msg/s: {}",
            row.transport,
            row.config,
            status_cell(&row, cut)
        );
        m.rows.push(row);
        if cut {
            m.interrupted = true;
            m.cut_short = true;
            m.not_run = runs[k + 1..].to_vec();
            break;
        }
    }
    Ok(m)
}

fn report_rows(what: &str, m: &Measured, json: bool, out: &mut dyn Write) -> Result<()> {
    let cut = m.cut_short_row();
    if json {
        let items: Vec<String> = m
            .rows
            .iter()
            .enumerate()
            .map(|(i, r)| r.to_json_marked(cut == Some(i)))
            .collect();
        let not_run: Vec<String> = m
            .not_run
            .iter()
            .map(|&(t, rate, spin)| {
                format!(
                    "{{\"transport\":\"{}\",\"config\":\"{}\",\"rate\":{rate}}}",
                    transport_name(t),
                    if spin { "spin" } else { "default" }
                )
            })
            .collect();
        let failed: Vec<String> = m
            .failed
            .iter()
            .map(|&((t, rate, spin), ref e)| {
                format!(
                    "{{\"transport\":\"{}\",\"config\":\"{}\",\"rate\":{rate},\"error\":{}}}",
                    transport_name(t),
                    if spin { "spin" } else { "default" },
                    serde_json::Value::from(e.as_str())
                )
            })
            .collect();
        return write_out(
            out,
            &format!(
                "{{\"bench\":\"{what}\",\"clock\":\"CLOCK_MONOTONIC push-to-read, one process\",\"failures\":{},\"interrupted\":{},\"not_run\":[{}],\"failed\":[{}],\"rows\":[{}]}}",
                failures(m.complete()),
                m.interrupted,
                not_run.join(","),
                failed.join(","),
                items.join(",")
            ),
        );
    }
    write_out(
        out,
        "push-to-read one way (CLOCK_MONOTONIC, one process), open loop over loopback:",
    )?;
    write_out(out, stress_table_marked(&m.rows, cut).trim_end())?;
    for l in m.failed_lines() {
        write_out(out, &l)?;
    }
    if m.interrupted {
        write_out(out, &m.interruption())?;
    }
    Ok(())
}

/// The error of a run a signal stopped (`ErrorKind::Interrupted`; exit status 1).
fn interrupted(op: &'static str, what: String) -> Error {
    Error::io(
        Path::new(""),
        op,
        std::io::Error::new(std::io::ErrorKind::Interrupted, what),
    )
}

/// Exit status 1 (through an error) when any complete run has errors, or a signal stopped
/// the runs.
fn verdict(op: &'static str, m: &Measured) -> Result<()> {
    let rows = m.complete();
    let mut errors = match failures(rows) {
        0 => None,
        n => Some(format!(
            "{n} of {} runs lost, reordered, duplicated or corrupted records (ERROR rows)",
            rows.len()
        )),
    };
    if !m.failed.is_empty() {
        let n = m.failed.len();
        let f = format!(
            "{n} run{} failed to start (FAILED lines): {}",
            if n == 1 { "" } else { "s" },
            m.failed_lines()
                .iter()
                .map(|l| l.trim_start_matches("FAILED: "))
                .collect::<Vec<_>>()
                .join("; ")
        );
        errors = Some(match errors {
            Some(e) => format!("{e}; {f}"),
            None => f,
        });
    }
    if m.interrupted {
        let mut what = m.interruption();
        if let Some(e) = errors {
            what += &format!("; {e}");
        }
        return Err(interrupted(op, what));
    }
    match errors {
        None => Ok(()),
        Some(e) => Err(Error::io(
            Path::new("loopback"),
            "delivery check",
            std::io::Error::other(e),
        )),
    }
}

/// Checks before measuring that the `--plot` file can be written, so that a bad path fails
/// at once instead of after the run. Leaves nothing behind: an existing file is opened
/// without truncating it, a new one is created and removed again. A FIFO (a named pipe, or
/// `/dev/stdout` piped to another program) is not opened: opening one for writing waits for
/// a reader, and the check's close would end the stream of a reader already there before
/// the chart is written. The chart is written to it after the run, which then waits for a
/// reader as any writer of a FIFO does. A socket is refused: it cannot be opened.
fn check_plot_path(path: &Path) -> Result<()> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    if let Ok(m) = std::fs::metadata(path) {
        let t = m.file_type();
        if t.is_fifo() {
            return Ok(());
        }
        if t.is_socket() {
            return Err(Error::InvalidArgument {
                path: path.to_path_buf(),
                what: "a socket, not a file the plot can be written to".into(),
            });
        }
    }
    let open = |create: bool| {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(create)
            // Never wait in open (a FIFO put at the path since the check above).
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
    };
    match open(false) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => open(true).map(|_| {
            let _ = std::fs::remove_file(path);
        }),
        Err(e) => Err(e),
    }
    .map_err(|e| Error::io(path, "create plot", e))
}

/// Writes the latency-by-rate chart of `rows` to `path`; with no row (a signal stopped the
/// first run) it says so and leaves `path` as it was, instead of an empty chart.
fn plot_rates(path: &Path, rows: &[RunRow]) -> Result<()> {
    if rows.is_empty() {
        diag!(
            "bench: no run completed: plot {} not written",
            crate::shown::path(path)
        );
        return Ok(());
    }
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
    laps: u64,
    json: bool,
    plot: Option<PathBuf>,
    out: &mut dyn Write,
) -> Result<()> {
    if let Some(p) = &plot {
        check_plot_path(p)?;
    }
    let pin = cpu_pair();
    let lat = cacheline_round_trip(rounds, pin);
    let moving = moving_line_round_trip(rounds, pin).summary();
    let transfer = line_transfer(laps, pin);
    let timer = timer_overhead(10_000);
    // Sender and receiver on two cores too (the ping-pong above left this thread pinned).
    let rate = loopback_datagram_rate(datagrams, 64, Duration::from_secs(30), pin)
        .map_err(|e| Error::io(Path::new("127.0.0.1"), "loopback datagrams", e))?;
    let s = lat.summary();
    if json {
        write_out(
            out,
            &format!(
                "{{\"cacheline_round_trip\":{},\"moving_line_round_trip\":{},\"line_transfer\":{{\"lines\":{TRANSFER_LINES},\"read\":{},\"read_ahead_lines\":{},\"write\":{},\"write_ahead_lines\":{}}},\"timer_overhead_ns\":{timer},\"pinned\":{},\"cores\":{},\"loopback_64b\":{{\"sent\":{},\"received\":{},\"per_sec\":{:.0}}}}}",
                s.to_json(),
                moving.to_json(),
                transfer.read.to_json(),
                transfer.read_ahead,
                transfer.write.to_json(),
                transfer.write_ahead,
                pin.is_some(),
                pin.map_or("null".into(), |(a, b)| format!("[{a},{b}]")),
                rate.sent,
                rate.received,
                rate.per_sec
            ),
        )?;
    } else {
        write_out(
            out,
            &format!("cache-line round trip ({}): {s}", cores_text(pin)),
        )?;
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
                "line transfer ({TRANSFER_LINES} lines in bulk, {}): reading lines the other thread wrote {} (prefetching {} lines ahead); writing lines the other thread read {} ({})",
                cores_text(pin),
                transfer.read,
                transfer.read_ahead,
                transfer.write,
                if ringwire_core::queue::has_prefetch_write() {
                    format!(
                        "prefetching for writing {} lines ahead",
                        transfer.write_ahead
                    )
                } else {
                    "no prefetch for writing on this CPU".to_owned()
                }
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

/// Where the floor's two threads ran, for its report: `cores 0 and 1`, or `not pinned`.
fn cores_text(pin: Option<(usize, usize)>) -> String {
    match pin {
        Some((a, b)) => format!("cores {a} and {b}"),
        None => "not pinned: fewer than two usable CPUs".into(),
    }
}

/// The hand-off's reader process: killed and reaped on drop (a failed or interrupted run
/// leaves no reader behind), its stdout lines delivered through a channel so that waiting
/// for them can watch the stop flag.
struct ReaderProc {
    child: Child,
    lines: Receiver<String>,
    pump: Option<std::thread::JoinHandle<()>>,
}

/// The outcome of waiting for a line of the reader.
#[derive(Debug)]
enum Line {
    Got(String),
    /// The reader closed its stdout (it exited).
    Ended,
    TimedOut,
    Interrupted,
}

impl ReaderProc {
    fn spawn(path: &Path, count: u64, wait: ReaderWait) -> Result<ReaderProc> {
        let exe = std::env::current_exe()
            .map_err(|e| Error::io(Path::new("ringwire"), "current_exe", e))?;
        let parent = std::process::id();
        let mut cmd = Command::new(exe);
        cmd.args(["bench", "handoff", "--reader"])
            .arg(path)
            .args(["--count", &count.to_string()])
            .args([
                "--wait",
                if wait == ReaderWait::Futex {
                    "futex"
                } else {
                    "spin"
                },
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        // SAFETY: runs in the forked child before exec; prctl and getppid are
        // async-signal-safe system calls, and nothing is allocated (the error is a raw OS
        // error).
        unsafe {
            cmd.pre_exec(move || {
                // The reader dies with this process (even of SIGKILL) instead of polling a
                // core until its 30 s timeout.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // This process died before the prctl: no signal will come.
                if libc::getppid() as u32 != parent {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| Error::io(path, "spawn reader", e))?;
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        // Bounded by the reader's stdout, which closes when it exits (or is killed).
        let pump = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(l) = line else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Ok(ReaderProc {
            child,
            lines,
            pump: Some(pump),
        })
    }

    /// The reader's next line, waiting at most `within` and returning early on `stop`.
    fn next_line(&self, stop: &AtomicBool, within: Duration) -> Line {
        let t0 = Instant::now();
        loop {
            // Relaxed: a plain flag set by the signal handler.
            if stop.load(Ordering::Relaxed) {
                return Line::Interrupted;
            }
            match self.lines.recv_timeout(Duration::from_millis(20)) {
                Ok(l) => return Line::Got(l),
                Err(RecvTimeoutError::Disconnected) => return Line::Ended,
                Err(RecvTimeoutError::Timeout) if t0.elapsed() >= within => {
                    return Line::TimedOut;
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for ReaderProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(p) = self.pump.take() {
            let _ = p.join();
        }
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
    if let Some(p) = &plot {
        check_plot_path(p)?;
    }
    let stop = crate::replica::signal::install();
    let path = PathBuf::from(format!(
        "/dev/shm/ringwire-bench-handoff-{}",
        std::process::id()
    ));
    // Declared before the reader: dropped after it, once the reader is dead. Removes the
    // ring even if the run fails, or a second Ctrl-C ends the process.
    let _guard = crate::replica::signal::remove_on_exit(&path);
    let mut prod = RingProducer::<Stamp>::create(&path, HANDOFF_SLOTS)?;
    let total = rate * seconds;
    let reader = ReaderProc::spawn(&path, total, wait)?;
    let stopped = |when: String| {
        interrupted(
            "bench handoff",
            format!(
                "interrupted by SIGINT, SIGTERM or SIGHUP {when}; reader process {} killed, {} removed",
                reader.pid(),
                crate::shown::path(&path)
            ),
        )
    };
    // The reader announces itself on stdout once attached.
    match reader.next_line(stop, Duration::from_secs(30)) {
        Line::Got(l) if l == "ready" => {}
        Line::Interrupted => return Err(stopped("before the run started".into())),
        other => {
            return Err(Error::InvalidArgument {
                path: path.clone(),
                what: format!("reader process did not start: {other:?}"),
            });
        }
    }
    pin_to(0);
    let pacer = Pacer::new(rate as f64);
    let start_ns = mono_ns();
    let mut published = 0;
    'publish: while published < total {
        // Relaxed: a plain flag set by the signal handler.
        if stop.load(Ordering::Relaxed) {
            break;
        }
        // The producer spins to each record's scheduled time and stamps the record with that
        // time, not with the time it got there: a producer stall then shows in the latency
        // of every record behind it (no coordinated omission).
        let due = pacer.due_ns(start_ns, published);
        while mono_ns() < due {
            if stop.load(Ordering::Relaxed) {
                break 'publish;
            }
            std::hint::spin_loop();
        }
        let mut r: Stamp = [0; 8];
        r[0] = published + 1;
        r[1] = due;
        prod.push(&r);
        published += 1;
    }
    if published < total {
        return Err(stopped(format!("after {published} of {total} records")));
    }
    // The reader stops 30 s after the last record it got at the latest.
    let line = match reader.next_line(stop, Duration::from_secs(40)) {
        Line::Got(l) => l,
        Line::Interrupted => return Err(stopped("while the reader finished".into())),
        other => {
            return Err(Error::InvalidArgument {
                path: path.clone(),
                what: format!("reader process failed: {other:?}"),
            });
        }
    };
    drop(reader);
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
    // Every record's sequence (1..=count) is checked: loss, duplicates, reorders and gaps
    // (exactly, in a window of the newest sequences: memory is bounded however long the run).
    let mut seqs = handoff_tracker(count);
    // The parent is watched (PR_SET_PDEATHSIG, set when it spawned this process, kills the
    // reader with it; this covers a reader started some other way): when it is gone,
    // nothing more will come.
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() };
    // Bounded: the producer publishes `count` records within its run; stop at the last one,
    // give up 30 s after the last record arrived, or when the parent exits.
    let mut last = Instant::now();
    let mut next_check = last;
    let mut futex = crate::wait::FutexWait::default();
    while received < count {
        let now = Instant::now();
        if now.duration_since(last) >= Duration::from_secs(30) {
            break;
        }
        if now >= next_check {
            // SAFETY: as above.
            if unsafe { libc::getppid() } != parent {
                return Err(Error::InvalidArgument {
                    path: path.to_path_buf(),
                    what: format!("the benchmark process (pid {parent}) exited; reader stopped"),
                });
            }
            next_check = now + Duration::from_millis(100);
        }
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

/// The hand-off reader's sequence tracker for `count` records: [`HANDOFF_WINDOW`] bits.
fn handoff_tracker(count: u64) -> SeqTracker {
    SeqTracker::windowed(count, HANDOFF_WINDOW)
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
    use crate::test_tmp::TmpPath;

    /// An interrupted `bench stress --plot FILE` with no run completed leaves FILE alone.
    #[test]
    fn no_completed_run_leaves_the_plot_file_alone() {
        let dir = TmpPath::new("plot");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("chart.svg");
        std::fs::write(&path, "an earlier chart").unwrap();
        let r = plot_rates(&path, &[]);
        let kept = std::fs::read_to_string(&path);
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(kept.unwrap(), "an earlier chart");
    }

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

    fn complete(rows: Vec<RunRow>) -> Measured {
        Measured {
            rows,
            ..Measured::default()
        }
    }

    fn check(rows: Vec<RunRow>) -> Result<()> {
        verdict("bench stress", &complete(rows))
    }

    #[test]
    fn any_error_row_fails_the_run() {
        assert!(check(vec![row(&[1, 2, 3], 3), row(&[1, 2], 2)]).is_ok());
        let e = check(vec![row(&[1, 2, 3], 3), row(&[2, 1], 2)]).unwrap_err();
        assert!(e.to_string().contains("1 of 2 runs"), "{e}");
        assert!(check(vec![row(&[1, 1], 1)]).is_err());
        assert!(check(vec![row(&[1], 2)]).is_err());
    }

    /// Three runs; the signal comes during run number `signal_in` (from 0), or never.
    fn measure_fake(signal_in: Option<usize>, fails: bool) -> Result<Measured> {
        let stop = AtomicBool::new(false);
        let runs = [
            (Transport::Tcp, 1_000, false),
            (Transport::Tcp, 2_000, false),
            (Transport::Unicast, 3_000, true),
        ];
        let mut n = 0;
        measure_until(&runs, &stop, |_, rate, _| {
            if Some(n) == signal_in {
                stop.store(true, Ordering::Relaxed);
            }
            n += 1;
            if fails && stop.load(Ordering::Relaxed) {
                return Err("the mirror never started".into());
            }
            let mut r = row(&[1, 2], 2);
            r.rate = rate;
            Ok(r)
        })
    }

    #[test]
    fn a_signal_during_a_run_marks_it_and_fails_the_bench() {
        let m = measure_fake(None, false).unwrap();
        assert!(!m.interrupted && m.rows.len() == 3 && m.not_run.is_empty());
        assert!(verdict("bench stress", &m).is_ok());

        let m = measure_fake(Some(0), false).unwrap();
        assert!(m.interrupted && m.cut_short, "{m:?}");
        assert_eq!((m.rows.len(), m.complete().len()), (1, 0));
        assert_eq!(m.not_run.len(), 2);
        let e = verdict("bench stress", &m).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("1000 msg/s cut short")
                && text.contains("2 not run (tcp default 2000 msg/s, unicast spin 3000 msg/s)"),
            "{text}"
        );
        assert!(
            matches!(&e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::Interrupted)
        );
        // The table and JSON say so; the cut-short run is not counted as a failure.
        let mut out = Vec::new();
        report_rows("stress", &m, false, &mut out).unwrap();
        let table = String::from_utf8(out).unwrap();
        assert!(
            table.contains("| INTERRUPTED: cut short by a signal |"),
            "{table}"
        );
        assert!(!table.contains("| ok |"), "{table}");
        assert!(table.contains("2 not run"), "{table}");
        let mut out = Vec::new();
        report_rows("stress", &m, true, &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["interrupted"], true);
        assert_eq!(v["failures"], 0);
        assert_eq!(v["rows"][0]["status"], "interrupted");
        assert_eq!(v["not_run"][1]["config"], "spin");
        assert_eq!(v["not_run"][1]["rate"], 3000);

        // A run that completed before the signal stays ok; the one it hit does not.
        let m = measure_fake(Some(1), false).unwrap();
        assert_eq!((m.complete().len(), m.cut_short_row()), (1, Some(1)));
        // A run the signal kept from starting is not a row, and not an error of its own.
        let m = measure_fake(Some(1), true).unwrap();
        assert!(m.interrupted && !m.cut_short, "{m:?}");
        assert_eq!((m.rows.len(), m.not_run.len()), (1, 2));
        assert!(verdict("bench stress", &m).is_err());
    }

    #[test]
    fn the_plot_path_is_checked_before_measuring_and_left_as_it_was() {
        let dir = TmpPath::new("plot-check");
        std::fs::create_dir(&dir).unwrap();
        let new = dir.join("x.svg");
        check_plot_path(&new).unwrap();
        assert!(!new.exists(), "the check left a file behind");
        std::fs::write(&new, "old").unwrap();
        check_plot_path(&new).unwrap();
        assert_eq!(std::fs::read_to_string(&new).unwrap(), "old");
        for bad in [dir.join("missing/x.svg"), dir.path().clone()] {
            let e = check_plot_path(&bad).unwrap_err().to_string();
            assert!(
                e.contains(&*bad.to_string_lossy()) && e.contains("create plot"),
                "{e}"
            );
        }
    }

    #[test]
    fn handoff_tracker_memory_is_bounded_at_the_largest_run() {
        // --rate 50000000 --seconds 3600: one bit per record would be 22.5 GB.
        let t = handoff_tracker(50_000_000 * 3600);
        assert!(t.memory_bytes() <= 1 << 20, "{}", t.memory_bytes());
        // Exact for anything the ring can hand the reader.
        const { assert!(HANDOFF_WINDOW >= HANDOFF_SLOTS) };
        let mut t = handoff_tracker(3 * HANDOFF_WINDOW);
        for s in 1..=2 * HANDOFF_WINDOW {
            t.record(s);
        }
        assert_eq!(
            t.record(2 * HANDOFF_WINDOW - HANDOFF_SLOTS),
            crate::bench::Arrival::Duplicate
        );
        assert!(t.finish(2 * HANDOFF_WINDOW).missing == 0);
    }

    #[test]
    fn floor_names_its_cores() {
        assert_eq!(cores_text(Some((0, 1))), "cores 0 and 1");
        assert_eq!(cores_text(Some((2, 5))), "cores 2 and 5");
        assert!(cores_text(None).starts_with("not pinned"));
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

    /// A run that cannot start (multicast unavailable on this host) is reported as FAILED
    /// with its reason, the other runs still run and are reported, and the bench fails.
    /// Before, the first such run ended the bench with an error and no table, discarding
    /// the rows already measured.
    #[test]
    fn a_run_that_cannot_start_is_reported_and_the_others_still_run() {
        let stop = AtomicBool::new(false);
        let runs = [
            (Transport::Tcp, 1_000, false),
            (Transport::Multicast, 1_000, false),
            (Transport::Unicast, 1_000, false),
        ];
        let m = measure_until(&runs, &stop, |t, rate, _| {
            if t == Transport::Multicast {
                return Err("demo: the mirror did not start within 10 s: \"no group\"".into());
            }
            let mut r = row(&[1, 2], 2);
            r.rate = rate;
            Ok(r)
        })
        .expect("measured");
        assert_eq!((m.rows.len(), m.failed.len()), (2, 1), "{m:?}");
        let mut out = Vec::new();
        report_rows("stress", &m, false, &mut out).unwrap();
        let table = String::from_utf8(out).unwrap();
        assert_eq!(table.matches("| ok |").count(), 2, "{table}");
        assert!(
            table.contains("FAILED: multicast default 1000 msg/s: demo: the mirror did not start"),
            "{table}"
        );
        let mut out = Vec::new();
        report_rows("stress", &m, true, &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["rows"].as_array().map(Vec::len), Some(2), "{v}");
        assert_eq!(v["failed"][0]["transport"], "multicast", "{v}");
        assert_eq!(
            v["failed"][0]["error"], "demo: the mirror did not start within 10 s: \"no group\"",
            "{v}"
        );
        let e = verdict("bench stress", &m).unwrap_err().to_string();
        assert!(
            e.contains("1 run failed to start (FAILED lines): multicast default"),
            "{e}"
        );
    }

    #[test]
    fn json_report_counts_failures() {
        let mut out = Vec::new();
        let m = complete(vec![row(&[1], 1), row(&[2], 2)]);
        report_rows("stress", &m, true, &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["failures"], 1);
        assert_eq!(v["rows"].as_array().map(Vec::len), Some(2));
        assert_eq!(v["rows"][1]["gaps"], 1);
        assert_eq!(v["interrupted"], false);
        assert_eq!(v["not_run"].as_array().map(Vec::len), Some(0));
    }
}
