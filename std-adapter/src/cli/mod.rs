//! The `ringwire` command line: `stat`, `top`, `dump` and `prune` with ringfire's meanings
//! (spec §26), except that a bad flag value is an error with a message instead of being
//! silently replaced by a default.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod dump;
mod prune;
mod stat;
mod top;

pub use stat::stat_json;

/// `ringwire`: shared-memory rings compatible with ringfire 0.5.
#[derive(Debug, Parser)]
#[command(name = "ringwire", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print a ring's header, counters, retained window, futex state, arena and readers
    /// (also describes a blackboard file, and a ringwire SPSC or MPMC queue file: geometry,
    /// cursors, items queued, a claimed but unpublished position, futex state).
    Stat {
        /// The ring, blackboard or queue file.
        path: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Refresh write_seq, msg/s, MB/s, the retained window, sleepers and readers (for a
    /// ringwire queue file: items in and out per second, items queued, sleepers).
    Top {
        /// The ring or queue file.
        path: PathBuf,
        /// Refresh interval in milliseconds (at least 1).
        #[arg(long = "interval-ms", default_value_t = 500,
              value_parser = clap::value_parser!(u64).range(1..))]
        interval_ms: u64,
        /// Stop after this many refreshes (a positive integer; default: run forever).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        iterations: Option<u64>,
    },
    /// Print the newest records: sequence, slot, slot sequence word and a preview.
    Dump {
        /// The ring file.
        path: PathBuf,
        /// How many of the newest records (at least 1).
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
        tail: u64,
        /// Preview the first 16 bytes as hex instead of 32 bytes as ASCII.
        #[arg(long)]
        hex: bool,
    },
    /// Free the registry slots of dead readers.
    Prune {
        /// The ring file.
        path: PathBuf,
    },
    /// Measure: the machine's floor, or a hand-off across processes.
    Bench {
        /// Which measurement.
        #[command(subcommand)]
        mode: bench::BenchMode,
    },
    /// Stream a ring to mirrors over TCP, UDP multicast or UDP unicast.
    Serve(crate::replica::cli::ServeArgs),
    /// Keep a local copy of a remote ring.
    Mirror(crate::replica::cli::MirrorArgs),
    /// Source, serve, mirror and a latency reader on this machine, over loopback.
    ///
    /// Prints push→read latency on the mirror ring every second (stderr), then the whole
    /// run's percentiles, what was published, delivered and missed, and the CPU the process
    /// used, in cores (stdout). Exits non-zero if a record arrives corrupt or not at all.
    Demo(crate::replica::cli::DemoArgs),
}

/// Runs one command, writing its output to `out`.
pub fn run(cli: Cli, out: &mut dyn Write) -> crate::Result<()> {
    match cli.command {
        Command::Stat { path, json } => stat::run(&path, json, out),
        Command::Top {
            path,
            interval_ms,
            iterations,
        } => top::run(&path, interval_ms, iterations, out),
        Command::Dump { path, tail, hex } => dump::run(&path, tail, hex, out),
        Command::Prune { path } => prune::run(&path, out),
        Command::Bench { mode } => bench::run(mode, out),
        // Long-running drivers with their own stop signal and exit code: `main` runs them.
        Command::Serve(_) | Command::Mirror(_) | Command::Demo(_) => {
            Err(crate::Error::InvalidArgument {
                path: PathBuf::new(),
                what: "serve, mirror and demo run through cli::main, not cli::run".into(),
            })
        }
    }
}

/// The binary's entry point: parses `std::env::args`, runs, prints `Error: …` and exits 1
/// on failure.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Command::Serve(a) => return a.run(),
        Command::Mirror(a) => return a.run(),
        Command::Demo(a) => return a.run(),
        _ => {}
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match run(cli, &mut out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = out.flush();
            eprintln!("Error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Maps an output error (a closed pipe, …) to the adapter's error type.
fn out_err(path: &std::path::Path) -> impl Fn(std::io::Error) -> crate::Error + '_ {
    move |e| crate::Error::io(path, "write output", e)
}
