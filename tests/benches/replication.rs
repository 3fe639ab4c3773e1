//! ringwire serve+mirror against ringfire's `ReplicaServer`+`Mirror`, side by side in one run:
//! push-to-read p50/p99 of a mirror on this host by TCP, multicast and unicast, default and
//! spin configurations, plus the 1,000,000 msg/s loopback-multicast delivery check of issue 7.
//!
//! Both sides run the same pipeline with the same settings: a 65,536-slot source ring of
//! 64-byte records fed open loop by a pacer (it sleeps until each record is due and never
//! waits for the mirror), a server on 127.0.0.1, a mirror starting at the oldest record,
//! multicast on loopback with TTL 0, unicast with a 1,472-byte datagram budget, frames of up
//! to 256 records with adaptive linger (both defaults), and a reader on the mirror ring.
//! Latency is one-way: each record is stamped with the process's monotonic clock just before
//! its push and the reader reads the same clock when the record is readable on the mirror.
//! The producer sleeps to each record's scheduled time, and the timer wakes it late; stamping
//! the scheduled time would add that lateness of the load generator to every sample, so it
//! is stamped at the push and the producer's lateness (push time − scheduled time) is
//! recorded in a second histogram per run ("producer late" columns, `producer_lateness` in
//! the JSON): that is how much a producer stall could hide.
//! "spin" means the server and mirror spin when idle (`--spin` / `.spin(true)`) and the
//! reader polls instead of sleeping: ringwire's bounded adaptive spin (polls, yielding the
//! core between bursts, for up to 2 ms before a futex sleep: the whole 1 ms gap between
//! records at 1,000 msg/s) and ringfire's `YieldBackoff::default()` (64 spins, then a
//! `sched_yield` per poll, never a sleep: ringfire's nearest match; its `FutexWait` with a
//! spin limit spins some tens of µs and then sleeps on the futex for most of that gap);
//! "default" means each side's defaults with the reader sleeping
//! on the ring's futex (ringwire's server, mirror and reader anticipate a steady stream's
//! next record, see `ringwire::replica::anticipate`; ringfire's reader is
//! `FutexWait::default()`, 32 spins then futex sleeps of at most 50 ms). "no-anticipate" (ringwire only) is
//! ringwire's default without anticipation (`--no-anticipate`): everything parks until
//! woken.
//!
//! Each row also gives the CPU each side used: user + system time of the configuration's
//! process over its wall time, in cores (the pipeline, producer and reader included); in
//! the JSON rows it is `cpu_cores` (`null` when the child did not report it).
//!
//! Every configuration runs in a fresh child process (ringfire's server threads never stop,
//! so they must not outlive their measurement). Run:
//!
//! ```text
//! cargo bench -p ringwire-tests --bench replication [-- --rate 1000 --seconds 5 --mc-rate 1000000 --mc-seconds 3]
//! ```
//!
//! It prints a markdown table, then one line `JSON: {...}` with every row, and under
//! `failed` every configuration whose child process gave no row (it crashed or its output
//! did not parse): `{"implementation", "transport", "config", "rate", "error"}`. Such a
//! configuration also prints a `RUN FAILED:` line and counts as a run with errors.
//!
//! One configuration alone, in this process:
//!
//! ```text
//! cargo bench -p ringwire-tests --bench replication -- --one ringwire|ringfire tcp|multicast|unicast default|spin|no-anticipate RATE SECONDS
//! ```

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringfire::replication::{Mirror, MirrorStart, MulticastConfig, ReplicaServer};
use ringfire::wait::{FutexWait, WaitStrategy, YieldBackoff};
use ringfire::{RingConsumer, RingProducer};
use ringwire::bench::loopback::{TRANSPORTS, Waiting, measure, transport_name};
use ringwire::bench::table::{RunRow, failures, lateness_cell};
use ringwire::bench::{Latency, Pacer, SeqTracker, fmt_ns};
use ringwire::replica::demo::Transport;

/// One 64-byte record: stamp, sequence, and filler derived from the sequence.
#[derive(Clone, Copy)]
#[repr(C)]
struct Msg {
    stamp_ns: u64,
    seq: u64,
    fill: [u64; 6],
}

fn fill(seq: u64) -> [u64; 6] {
    core::array::from_fn(|i| {
        seq.wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(i as u32 * 7)
    })
}

fn parse_transport(s: &str) -> Option<Transport> {
    TRANSPORTS.into_iter().find(|&t| transport_name(t) == s)
}

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--one") {
        return one(&args[i + 1..]);
    }
    let rate: u64 = arg(&args, "--rate", 1_000);
    let seconds: u64 = arg(&args, "--seconds", 5);
    let mc_rate: u64 = arg(&args, "--mc-rate", 1_000_000);
    let mc_seconds: u64 = arg(&args, "--mc-seconds", 3);
    let mut rows: Vec<RunRow> = Vec::new();
    // (implementation, transport, config, rate, why, text of its RUN FAILED line)
    let mut failed_runs: Vec<Failed> = Vec::new();
    let mut cpu: Vec<Cpu> = Vec::new();
    for t in TRANSPORTS {
        for config in ["default", "spin", "no-anticipate"] {
            for imp in ["ringwire", "ringfire"] {
                if config == "no-anticipate" && imp == "ringfire" {
                    // ringfire has no such configuration.
                    continue;
                }
                match child(imp, transport_name(t), config, rate, seconds) {
                    Ok((r, c)) => {
                        cpu.push((imp, transport_name(t), config, c));
                        rows.push(r)
                    }
                    Err(e) => failed_runs.push(Failed {
                        implementation: imp,
                        transport: transport_name(t),
                        config,
                        rate,
                        line: format!("{imp} {} {config}: {e}", transport_name(t)),
                        error: e,
                    }),
                }
            }
        }
    }
    let mut mc_rows = Vec::new();
    let mut mc_cpu: Vec<Cpu> = Vec::new();
    for imp in ["ringwire", "ringfire"] {
        match child(imp, "multicast", "default", mc_rate, mc_seconds) {
            Ok((r, c)) => {
                mc_cpu.push((imp, "multicast", "default", c));
                mc_rows.push(r)
            }
            Err(e) => failed_runs.push(Failed {
                implementation: imp,
                transport: "multicast",
                config: "default",
                rate: mc_rate,
                line: format!("{imp} multicast {mc_rate} msg/s: {e}"),
                error: e,
            }),
        }
    }
    print_tables(&rows, &mc_rows, &cpu, failed_runs.len(), rate, seconds);
    for f in &failed_runs {
        println!("RUN FAILED: {}", f.line);
    }
    let json: Vec<String> = rows
        .iter()
        .zip(&cpu)
        .chain(mc_rows.iter().zip(&mc_cpu))
        .map(|(r, c)| json_with_cpu(&r.to_json(), c.3))
        .collect();
    let failed: Vec<String> = failed_runs.iter().map(Failed::to_json).collect();
    println!(
        "JSON: {{\"bench\":\"replication\",\"rows\":[{}],\"failed\":[{}]}}",
        json.join(","),
        failed.join(",")
    );
    if failed_runs.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// A configuration whose child process gave no row.
struct Failed {
    implementation: &'static str,
    transport: &'static str,
    config: &'static str,
    rate: u64,
    error: String,
    /// Its `RUN FAILED:` line.
    line: String,
}

impl Failed {
    fn to_json(&self) -> String {
        serde_json::json!({
            "implementation": self.implementation,
            "transport": self.transport,
            "config": self.config,
            "rate": self.rate,
            "error": self.error,
        })
        .to_string()
    }
}

/// A row's JSON object with the configuration's CPU (cores) added as `cpu_cores`.
fn json_with_cpu(row: &str, cores: Option<f64>) -> String {
    let cores = cores
        .filter(|x| x.is_finite())
        .map_or("null".to_string(), |x| format!("{x:.3}"));
    match row.strip_suffix('}') {
        Some(body) => format!("{body},\"cpu_cores\":{cores}}}"),
        None => row.to_string(),
    }
}

/// Runs one configuration in a child process and parses its row.
fn child(
    imp: &str,
    t: &str,
    config: &str,
    rate: u64,
    seconds: u64,
) -> Result<(RunRow, Option<f64>), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new(exe)
        .args([
            "--one",
            imp,
            t,
            config,
            &rate.to_string(),
            &seconds.to_string(),
        ])
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().rfind(|l| l.starts_with("ROW "));
    let Some(line) = line else {
        return Err(format!(
            "no result ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    };
    let v: serde_json::Value = serde_json::from_str(&line[4..]).map_err(|e| e.to_string())?;
    let cores = text
        .lines()
        .rfind(|l| l.starts_with("CPU "))
        .and_then(|l| l[4..].trim().parse::<f64>().ok());
    let row = row_from_json(&v).ok_or_else(|| format!("bad row {line}"))?;
    Ok((row, cores))
}

fn row_from_json(v: &serde_json::Value) -> Option<RunRow> {
    let u = |k: &str| v[k].as_u64();
    let l = &v["latency"];
    Some(RunRow {
        implementation: v["implementation"].as_str()?.into(),
        transport: v["transport"].as_str()?.into(),
        config: v["config"].as_str()?.into(),
        rate: u("rate")?,
        seconds: u("seconds")?,
        achieved_rate: v["achieved_rate"].as_f64()?,
        stream: Some(ringwire::bench::StressReport {
            sent: u("sent")?,
            delivered: u("delivered")?,
            duplicates: u("duplicates")?,
            reorders: u("reorders")?,
            gap_events: u("gaps")?,
            missing: u("missing")?,
            bogus: u("bogus")?,
        }),
        corrupt: u("corrupt")?,
        latency: summary_from_json(l)?,
        producer_lateness: summary_from_json(&v["producer_lateness"]),
    })
}

fn summary_from_json(l: &serde_json::Value) -> Option<ringwire::bench::Summary> {
    let lu = |k: &str| l[k].as_u64();
    Some(ringwire::bench::Summary {
        count: lu("count")?,
        p50: lu("p50_ns")?,
        p90: lu("p90_ns")?,
        p99: lu("p99_ns")?,
        p999: lu("p999_ns")?,
        max: lu("max_ns")?,
        mean: l["mean_ns"].as_f64()?,
    })
}

fn status(r: &RunRow) -> String {
    r.errors().map_or("ok".into(), |e| format!("ERROR: {e}"))
}

/// CPU use of one configuration's process: (implementation, transport, config, cores).
type Cpu = (&'static str, &'static str, &'static str, Option<f64>);

/// `crashed`: configurations whose child gave no row (each a run with errors).
fn print_tables(
    rows: &[RunRow],
    mc_rows: &[RunRow],
    cpu: &[Cpu],
    crashed: usize,
    rate: u64,
    seconds: u64,
) {
    println!("### Mirror on this host, {rate} msg/s, {seconds} s per configuration");
    println!();
    println!(
        "| transport | config | ringwire p50 | ringfire p50 | p50 ratio (target ≤ 0.8) | ringwire p99 | ringfire p99 | ringwire CPU | ringfire CPU | ringwire producer late p50 / p99 / max | ringfire producer late p50 / p99 / max | ringwire | ringfire |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|");
    for t in TRANSPORTS {
        for config in ["default", "spin", "no-anticipate"] {
            let find = |imp: &str| {
                rows.iter().find(|r| {
                    r.implementation == imp
                        && r.transport == transport_name(t)
                        && r.config == config
                })
            };
            let (w, f) = (find("ringwire"), find("ringfire"));
            let p = |r: Option<&RunRow>, q: fn(&RunRow) -> u64| {
                r.map_or("—".into(), |r| fmt_ns(q(r)))
            };
            let ratio = match (w, f) {
                (Some(w), Some(f)) if f.latency.p50 > 0 => {
                    let x = w.latency.p50 as f64 / f.latency.p50 as f64;
                    format!("{x:.2} ({})", if x <= 0.8 { "met" } else { "not met" })
                }
                _ => "—".into(),
            };
            let cores = |imp: &str| {
                cpu.iter()
                    .find(|c| c.0 == imp && c.1 == transport_name(t) && c.2 == config)
                    .and_then(|c| c.3)
                    .map_or("—".into(), |x| format!("{x:.2} cores"))
            };
            println!(
                "| {} | {config} | {} | {} | {ratio} | {} | {} | {} | {} | {} | {} | {} | {} |",
                transport_name(t),
                p(w, |r| r.latency.p50),
                p(f, |r| r.latency.p50),
                p(w, |r| r.latency.p99),
                p(f, |r| r.latency.p99),
                cores("ringwire"),
                cores("ringfire"),
                lateness_cell(w.and_then(|r| r.producer_lateness.as_ref())),
                lateness_cell(f.and_then(|r| r.producer_lateness.as_ref())),
                w.map_or("no run".into(), status),
                f.map_or("no run".into(), status),
            );
        }
    }
    println!();
    if let Some(r) = mc_rows.first() {
        println!(
            "### Loopback multicast at {} msg/s of 64-byte records, {} s (target: 100% delivered, 0 reorders)",
            r.rate, r.seconds
        );
        println!();
    }
    println!(
        "| implementation | achieved msg/s | sent | delivered | reorders | duplicates | gaps | p50 | p99 | producer late p50 / p99 / max | status |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for r in mc_rows {
        let s = r.stream.unwrap_or_default();
        println!(
            "| {} | {:.0} | {} | {}% | {} | {} | {} | {} | {} | {} | {} |",
            r.implementation,
            r.achieved_rate,
            s.sent,
            // Rounded down: a run that lost records never reads 100.000%.
            r.delivered_pct_text(3),
            s.reorders,
            s.duplicates,
            s.gap_events,
            fmt_ns(r.latency.p50),
            fmt_ns(r.latency.p99),
            lateness_cell(r.producer_lateness.as_ref()),
            status(r)
        );
    }
    println!();
    println!(
        "{} of {} runs with errors ({crashed} of them gave no row: see RUN FAILED below).",
        failures(rows) + failures(mc_rows) + crashed,
        rows.len() + mc_rows.len() + crashed
    );
}

/// Child mode: `--one IMPL TRANSPORT CONFIG RATE SECONDS`; prints `ROW {json}`.
fn one(a: &[String]) -> ExitCode {
    let (Some(imp), Some(t), Some(config), Some(rate), Some(seconds)) = (
        a.first(),
        a.get(1).and_then(|s| parse_transport(s)),
        a.get(2),
        a.get(3).and_then(|s| s.parse::<u64>().ok()),
        a.get(4).and_then(|s| s.parse::<u64>().ok()),
    ) else {
        eprintln!(
            "usage: --one ringwire|ringfire tcp|multicast|unicast default|spin|no-anticipate RATE SECONDS"
        );
        return ExitCode::FAILURE;
    };
    let Some(waiting) = Waiting::from_name(config) else {
        eprintln!("unknown configuration {config}");
        return ExitCode::FAILURE;
    };
    let spin = waiting == Waiting::Spin;
    let t0 = Instant::now();
    let row = match imp.as_str() {
        "ringwire" => {
            measure(t, rate, seconds, waiting, &AtomicBool::new(false)).map_err(|e| e.to_string())
        }
        "ringfire" if waiting == Waiting::Parked => {
            Err("ringfire has no no-anticipate configuration".into())
        }
        "ringfire" => ringfire_run(t, rate, seconds, spin),
        other => Err(format!("unknown implementation {other}")),
    };
    match row {
        Ok(r) => {
            println!("ROW {}", r.to_json());
            let cpu = ringwire::sys::process_cpu_time().as_secs_f64();
            println!("CPU {:.3}", cpu / t0.elapsed().as_secs_f64());
            // ringfire's server threads never return: end the process here.
            std::process::exit(0)
        }
        Err(e) => {
            eprintln!("{imp} {}: {e}", transport_name(t));
            std::process::exit(1)
        }
    }
}

/// What the ringfire-side reader shares with the main thread.
struct Seen {
    lat: Latency,
    tracker: SeqTracker,
    corrupt: u64,
}

fn ringfire_run(t: Transport, rate: u64, seconds: u64, spin: bool) -> Result<RunRow, String> {
    let pid = std::process::id();
    let src = PathBuf::from(format!("/dev/shm/ringwire-bench-rf-{pid}-src"));
    let dst = PathBuf::from(format!("/dev/shm/ringwire-bench-rf-{pid}-dst"));
    let r = ringfire_pipeline(&src, &dst, t, rate, seconds, spin);
    let _ = std::fs::remove_file(&src);
    let _ = std::fs::remove_file(&dst);
    r
}

fn ringfire_pipeline(
    src: &PathBuf,
    dst: &PathBuf,
    t: Transport,
    rate: u64,
    seconds: u64,
    spin: bool,
) -> Result<RunRow, String> {
    let e = |what: &'static str| move |err: ringfire::RingfireError| format!("{what}: {err}");
    let mut producer = RingProducer::<Msg>::create(src, 1 << 16).map_err(e("create source"))?;
    let mut server = ReplicaServer::bind(src, "127.0.0.1:0")
        .map_err(e("bind"))?
        .spin(spin);
    let tag = pid_tag();
    match t {
        Transport::Tcp => {}
        Transport::Multicast => {
            let group = Ipv4Addr::new(239, 254, (tag >> 8) as u8, tag as u8);
            let cfg = MulticastConfig::new(group, 30_000 + (tag % 20_000) as u16)
                .interface(Ipv4Addr::LOCALHOST)
                .ttl(0);
            server = server.multicast(cfg);
        }
        Transport::Unicast => {
            // ringfire announces the configured port as is, so port 0 cannot be used: take
            // a free one.
            let port = std::net::UdpSocket::bind("0.0.0.0:0")
                .and_then(|s| s.local_addr())
                .map_err(|e| format!("free udp port: {e}"))?
                .port();
            server = server.unicast(port, 1472);
        }
    }
    let addr = server
        .local_addr()
        .map_err(|e| format!("local_addr: {e}"))?;
    server.spawn().map_err(|e| format!("spawn server: {e}"))?;
    let mut mirror = Mirror::builder()
        .start(MirrorStart::Oldest)
        .spin(spin)
        .interface(Ipv4Addr::LOCALHOST)
        .unicast(t == Transport::Unicast)
        .connect(addr, dst)
        .map_err(e("mirror connect"))?;
    let ok = match t {
        Transport::Tcp => !mirror.is_multicast() && !mirror.is_unicast(),
        Transport::Multicast => mirror.is_multicast(),
        Transport::Unicast => mirror.is_unicast(),
    };
    if !ok {
        return Err(format!("mirror did not negotiate {}", transport_name(t)));
    }
    std::thread::spawn(move || mirror.run());
    let mut reader = RingConsumer::<Msg>::builder()
        .start_from_oldest()
        .attach(dst)
        .map_err(e("attach mirror ring"))?;
    let max_seq = rate * seconds + 1;
    let seen = Arc::new(Mutex::new(Seen {
        lat: Latency::new(),
        tracker: SeqTracker::new(max_seq),
        corrupt: 0,
    }));
    let got = Arc::new(AtomicU64::new(0));
    let epoch = Instant::now();
    let now_ns = move || epoch.elapsed().as_nanos() as u64;
    {
        let (seen, got) = (seen.clone(), got.clone());
        // The reader blocks in recv_blocking; the process exits under it when done.
        std::thread::spawn(move || {
            let record = |m: Msg| {
                let lat = now_ns().saturating_sub(m.stamp_ns);
                let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
                s.lat.record(lat);
                s.tracker.record(m.seq);
                if m.fill != fill(m.seq) {
                    s.corrupt += 1;
                }
                drop(s);
                // Relaxed: a progress count polled by the main thread.
                got.fetch_add(1, Ordering::Relaxed);
            };
            if spin {
                // Spins, then yields the core per poll, never sleeps (see the file's header).
                read_forever(&mut reader, YieldBackoff::default(), record)
            } else {
                // ringfire's own default (0.5.2: 32 spins, then futex sleeps of ≤ 50 ms).
                read_forever(&mut reader, FutexWait::default(), record)
            }
        });
    }
    let mut pacer = Pacer::new(rate as f64);
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut sent = 0u64;
    let mut late = Latency::new();
    let t_first = Instant::now();
    loop {
        let (_, due) = pacer.next_due();
        if due >= end {
            break;
        }
        let wait = due.saturating_duration_since(Instant::now());
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
        sent += 1;
        // Stamped at the push (as the ringwire side); the timer's lateness is kept apart.
        late.record(Instant::now().saturating_duration_since(due).as_nanos() as u64);
        producer.push(&Msg {
            stamp_ns: now_ns(),
            seq: sent,
            fill: fill(sent),
        });
    }
    let publish_time = t_first.elapsed();
    // Let the last records arrive (same 2 s drain as the ringwire side).
    let t0 = Instant::now();
    // Relaxed: a progress count.
    while got.load(Ordering::Relaxed) < sent && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let s = seen.lock().unwrap_or_else(|p| p.into_inner());
    Ok(RunRow {
        implementation: "ringfire".into(),
        transport: transport_name(t).into(),
        config: if spin { "spin" } else { "default" }.into(),
        rate,
        seconds,
        achieved_rate: sent as f64 / publish_time.as_secs_f64().max(1e-9),
        stream: Some(s.tracker.finish(sent)),
        corrupt: s.corrupt,
        latency: s.lat.summary(),
        producer_lateness: Some(late.summary()),
    })
}

/// The ringfire reader's loop: every record, waited for with `w`, goes to `record`.
fn read_forever<W: WaitStrategy>(
    reader: &mut RingConsumer<Msg>,
    mut w: W,
    mut record: impl FnMut(Msg),
) -> ! {
    loop {
        record(reader.recv_blocking(&mut w));
    }
}

fn pid_tag() -> u32 {
    std::process::id().wrapping_mul(37)
}
