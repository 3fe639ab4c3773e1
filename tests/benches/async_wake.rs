//! Publish-to-read latency of the async consumers: a producer thread (core 0) publishes
//! records open loop at a fixed rate, spinning on the clock to each record's scheduled time,
//! and a task on a current-thread tokio runtime (core 1) awaits each one with
//! `recv().await`; a record's latency is the time from its *scheduled* publish time (its
//! stamp) to the `recv` that returned it, so a producer stall shows in the latency of every
//! record behind it rather than hiding (coordinated omission). The producer's lateness
//! (push time − scheduled time) is reported beside it (`producer late`, `producer_lateness`
//! in the JSON); with a spinning producer it is tens of ns unless the producer was
//! preempted. At 1,000 msg/s the task is idle between records, so this is the wake-up path;
//! at 100,000 msg/s records come every 10 µs.
//!
//! * `ringwire`: `AsyncRingConsumer` as built (an empty poll arms the waiter thread, which
//!   sleeps on the ring's futex and wakes the task);
//! * `ringwire_yields`: the same with ringfire's defaults set through its knobs,
//!   `with_spins(32).with_yields(8)` (empty polls spin and go back to the executor first);
//! * `ringfire`: ringfire 0.5.2's `AsyncRingConsumer` (32 spins, 8 yields, then tokio sleeps
//!   of 50 µs).
//!
//! The consumer side's CPU (the runtime thread and any helper thread: the process's CPU
//! time less the producer thread's) is reported in cores. Every record's sequence is
//! checked, so a consumer that skips or repeats one fails its row (`RUN FAILED` on stderr,
//! exit status 1; the other rows are still printed): on this 2-core VM a consumer
//! descheduled for 41 ms at 100,000 msg/s is lapped by the 4,096-record ring.
//!
//! `cargo bench -p ringwire-tests --bench async_wake -- [--seconds S] [--json]`

use std::time::{Duration, Instant};

use ringwire::bench::floor::pin_to;
use ringwire::bench::hist::{Latency, Summary};
use ringwire::sys::{process_cpu_time, thread_cpu_time};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// A record: its sequence and its scheduled publish time (ns since the run's epoch).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
struct Stamp {
    seq: u64,
    at_ns: u64,
}

const RATES: [u64; 2] = [1_000, 100_000];
const IMPLS: [&str; 3] = ["ringwire", "ringwire_yields", "ringfire"];

struct Row {
    summary: Summary,
    lateness: Summary,
    cpu_cores: f64,
}

/// Publishes `n` records at `rate` through `push`, pacing by spinning on the clock. Each
/// record is stamped with its scheduled time. Returns the producer thread's CPU time and its
/// lateness (push time − scheduled time) per record.
fn produce(epoch: Instant, rate: u64, n: u64, mut push: impl FnMut(&Stamp)) -> (Duration, Latency) {
    pin_to(0);
    let cpu0 = thread_cpu_time();
    let mut late = Latency::new();
    let start = Instant::now() + Duration::from_millis(20);
    for seq in 1..=n {
        let due = start + Duration::from_nanos(seq * 1_000_000_000 / rate);
        while Instant::now() < due {
            std::hint::spin_loop();
        }
        late.record(Instant::now().saturating_duration_since(due).as_nanos() as u64);
        push(&Stamp {
            seq,
            at_ns: due.duration_since(epoch).as_nanos() as u64,
        });
    }
    (thread_cpu_time() - cpu0, late)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("tokio runtime")
}

/// One implementation at one rate: the latency of every record and the consumer's CPU.
fn run(imp: &str, rate: u64, seconds: u64) -> Result<Row, String> {
    let path = std::path::PathBuf::from(format!(
        "/dev/shm/ringwire-bench-async-{imp}-{rate}-{}",
        std::process::id()
    ));
    let n = rate * seconds;
    let epoch = Instant::now();
    let cpu0 = process_cpu_time();
    let wall0 = Instant::now();
    // The consumer runs on this thread (pinned to core 1, and so is the waiter thread it
    // starts); the producer on a scoped thread.
    pin_to(1);
    let (hist, (producer_cpu, late)) = match imp {
        "ringfire" => {
            let mut tx = ringfire::RingProducer::<Stamp>::create(&path, 4096)
                .map_err(|e| format!("ringfire create: {e}"))?;
            let rx = ringfire::RingConsumer::<Stamp>::attach(&path)
                .map_err(|e| format!("ringfire attach: {e}"))?;
            let mut rx = ringfire::AsyncRingConsumer::from_consumer(rx);
            std::thread::scope(|s| {
                let p = s.spawn(|| produce(epoch, rate, n, |r| tx.push(r)));
                let hist = runtime().block_on(async {
                    let mut h = Latency::new();
                    for want in 1..=n {
                        let r = rx.recv().await;
                        h.record((epoch.elapsed().as_nanos() as u64).saturating_sub(r.at_ns));
                        if r.seq != want {
                            return Err(skipped(want, r.seq));
                        }
                    }
                    Ok(h)
                });
                (hist, p.join().expect("producer"))
            })
        }
        _ => {
            let mut tx = ringwire::RingProducer::<Stamp>::create(&path, 4096)
                .map_err(|e| format!("ringwire create: {e}"))?;
            let rx = ringwire::RingConsumer::<Stamp>::attach(&path)
                .map_err(|e| format!("ringwire attach: {e}"))?;
            let mut rx = ringwire::AsyncRingConsumer::new(rx)
                .map_err(|e| format!("ringwire async consumer: {e}"))?;
            if imp == "ringwire_yields" {
                rx = rx.with_spins(32).with_yields(8);
            }
            std::thread::scope(|s| {
                let p = s.spawn(|| {
                    produce(epoch, rate, n, |r| {
                        tx.push(r);
                    })
                });
                let hist = runtime().block_on(async {
                    let mut h = Latency::new();
                    for want in 1..=n {
                        let r = rx.recv().await;
                        h.record((epoch.elapsed().as_nanos() as u64).saturating_sub(r.at_ns));
                        if r.seq != want {
                            return Err(skipped(want, r.seq));
                        }
                    }
                    Ok(h)
                });
                (hist, p.join().expect("producer"))
            })
        }
    };
    let wall = wall0.elapsed();
    let _ = std::fs::remove_file(&path);
    let hist = hist?;
    let consumer_cpu = (process_cpu_time() - cpu0).saturating_sub(producer_cpu);
    Ok(Row {
        summary: hist.summary(),
        lateness: late.summary(),
        cpu_cores: consumer_cpu.as_secs_f64() / wall.as_secs_f64(),
    })
}

/// The error of a consumer that returned `got` where it waited for `want`, its kind before
/// the colon (the JSON carries the kind): a consumer stalled for a whole ring (4,096
/// records: 41 ms at 100,000 msg/s) is lapped and skips ahead, which the lossy ring allows
/// but this latency figure cannot use.
fn skipped(want: u64, got: u64) -> String {
    if got > want {
        format!(
            "lapped: record {want} was followed by {got}, {} records skipped",
            got - want
        )
    } else {
        format!("out of order: record {want} was followed by {got}")
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.iter().any(|a| a == "--json");
    let mut seconds = 2;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--seconds" => {
                seconds = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|&s| s > 0)
                    .unwrap_or_else(|| {
                        eprintln!("--seconds needs a whole number of seconds above 0");
                        std::process::exit(2)
                    })
            }
            // cargo bench passes --bench; criterion-style filters are not used here.
            "--json" | "--bench" => {}
            other => {
                eprintln!("unknown argument {other:?}; use [--seconds S] [--json]");
                std::process::exit(2)
            }
        }
    }
    let mut obj = Vec::new();
    if !json {
        println!(
            "| rate | consumer | p50 | p99 | p99.9 | max | producer late p50 / p99 / max | consumer CPU |"
        );
        println!("|---:|---|---:|---:|---:|---:|---:|---:|");
    }
    let mut failed = false;
    for rate in RATES {
        let mut fields = Vec::new();
        for imp in IMPLS {
            match run(imp, rate, seconds) {
                Ok(row) => {
                    let (s, l) = (row.summary, row.lateness);
                    if !json {
                        println!(
                            "| {rate} msg/s | {imp} | {} | {} | {} | {} | {} / {} / {} | {:.2} cores |",
                            ns(s.p50),
                            ns(s.p99),
                            ns(s.p999),
                            ns(s.max),
                            ns(l.p50),
                            ns(l.p99),
                            ns(l.max),
                            row.cpu_cores
                        );
                    }
                    fields.push(format!(
                        "\"{imp}\":{{\"summary\":{},\"producer_lateness\":{},\"cpu_cores\":{:.3}}}",
                        s.to_json(),
                        l.to_json(),
                        row.cpu_cores
                    ));
                }
                Err(e) => {
                    eprintln!("RUN FAILED: {imp} at {rate} msg/s: {e}");
                    let kind = e.split_once(':').map_or(e.as_str(), |(k, _)| k);
                    fields.push(format!("\"{imp}\":{{\"error\":{kind:?}}}"));
                    failed = true;
                }
            }
        }
        obj.push(format!("\"r{rate}\":{{{}}}", fields.join(",")));
    }
    if json {
        println!("{{\"seconds\":{seconds},{}}}", obj.join(","));
    }
    if failed {
        std::process::exit(1);
    }
}

fn ns(v: u64) -> String {
    if v >= 10_000 {
        format!("{:.1} µs", v as f64 / 1000.0)
    } else {
        format!("{v} ns")
    }
}
