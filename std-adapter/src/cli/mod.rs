//! The `ringwire` command line: `stat`, `top`, `dump` and `prune` with ringfire's meanings
//! (spec §26), `heal`, `version`, `bench`, and the replication drivers `serve`, `mirror` and
//! `demo`.
//! A bad flag value is an error with a message instead of being silently replaced by a
//! default. As ringfire's, a usage error (no arguments, an unknown subcommand or flag, a bad
//! value) exits 1; `--help`, `help` and `--version`, `version` print to stdout and exit 0.
//! When the reader of stdout goes away (`ringwire stat … | head -1`), the command stops
//! without a message and dies of `SIGPIPE`, as Unix filters do.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

mod bench;
mod dump;
mod heal;
mod prune;
pub(crate) mod sigbus;
mod stat;
mod top;

pub use stat::stat_json;

/// Inspect, measure and replicate shared-memory rings compatible with ringfire 0.5 (and
/// ringwire's queue and blackboard files).
#[derive(Debug, Parser)]
#[command(name = "ringwire", version, mut_subcommands = negative_values)]
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
    ///
    /// A corrupt file is an error naming it and the value seen (exit 1): a header no ring
    /// has, a ring's write_seq at or past 2^63 (every producer refuses it), an MPMC ring's
    /// write_seq at or past its claim_seq (no producer publishes it), queue cursors no
    /// run leaves, an MPMC queue file no process has open with a slot holding a stamp its
    /// cursors rule out (as heal reports it: every open refuses such a file; checked in a
    /// slot area of up to 256 MiB), an MPMC ring's header its consumers refuse at attach
    /// (read_seq past claim_seq, claim_seq at or past 2^63), an MPMC ring's slot holding a
    /// sequence at or past claim_seq (which no producer writes; slots are checked, as
    /// mid_write_slots are counted, in a slot area of up to 256 MiB).
    ///
    /// Readers are the registry slots with a pid and a nonzero active word, as ringfire
    /// lists them (top lists the same); one whose active word is not 1 (a corrupt slot,
    /// which producers do not count) is marked so. The JSON has ringfire's keys, plus
    /// `type`, an MPMC ring's `mid_write_slots` and each reader's `active` word. Its `path`
    /// shows each byte that is not UTF-8 as U+FFFD; such a path also has `path_bytes`, the
    /// path's bytes as an array of numbers, which name the file exactly.
    Stat {
        /// The ring, blackboard or queue file.
        path: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Refresh write_seq, msg/s, MB/s, the retained window, sleepers and readers (those
    /// stat lists; for a ringwire queue file: items in and out per second, items queued,
    /// sleepers).
    ///
    /// MB/s is msg/s × element_size in 10^6 bytes a second: the slot stride, each record's
    /// 8-byte sequence word included (a blob ring's descriptors, not its blobs), as
    /// ringfire's top counts it.
    ///
    /// The first refresh comes one interval after the start, so that its rates are
    /// measured over an interval. The screen is cleared before each refresh only when
    /// stdout is a terminal. A file replaced at the path (a restarted producer, or one
    /// recreating it in place) is followed, its rates counted from the reopen (a frame of a
    /// file replaced again within the refresh shows no rates: "-"); a path that
    /// stays removed for a second ends top with "ring removed" ("queue removed") (exit 1).
    /// A corrupt ring is an error naming the value (exit 1), also when it becomes one while
    /// top runs: a write_seq at or past 2^63, which every producer refuses, or an MPMC
    /// ring's at or past its claim_seq, which no producer publishes. So are a queue's
    /// cursors that no run leaves (those stat refuses), at the open or later.
    Top {
        /// The ring or queue file.
        path: PathBuf,
        /// Refresh interval in milliseconds, from 1 to 3600000 (an hour).
        #[arg(long = "interval-ms", default_value_t = 500,
              value_parser = refresh_ms)]
        interval_ms: u64,
        /// Stop after this many refreshes (a positive integer; default: run forever).
        #[arg(long, value_parser = at_least_1)]
        iterations: Option<u64>,
    },
    /// Print the newest records: sequence, slot, slot sequence word and a preview (and the
    /// blob's, on a blob ring; a mirror ring's holes are named as such; a slot whose word no
    /// writer leaves there, another slot's sequence or one at or past 2^63, is named
    /// corrupt).
    ///
    /// A ring whose write_seq is at or past 2^63 (a corrupt header every producer refuses,
    /// which places no record), or an MPMC ring's at or past its claim_seq (no producer
    /// publishes such a record), is an error naming it (exit 1).
    Dump {
        /// The ring file.
        path: PathBuf,
        /// How many of the newest records (at least 1).
        #[arg(long, default_value_t = 10, value_parser = at_least_1)]
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
    /// Heal the stuck slots `stat` reports in an MPMC queue file or a lossy MPMC ring.
    ///
    /// A queue file is healed when no other process has it open (file locks prove every
    /// holder of a stuck slot dead); otherwise the slots still stuck 20 ms later are reported
    /// and heal exits 1. A queue file no process has open is checked slot by slot as a lone
    /// open checks it, and a stamp its cursors rule out (a corrupt file) is reported, exit 1.
    /// In a lossy MPMC ring, slots left mid-write in two scans 20 ms apart are healed only
    /// with --producers-dead, and only if no producer shows itself alive (tickets moving, or
    /// the creator's lock held); otherwise they are reported and heal exits 1. A lossy ring
    /// with a slot whose sequence is at or past claim_seq (corrupt: every push landing there
    /// is discarded), whose header its consumers refuse at attach (read_seq past
    /// claim_seq, claim_seq at or past 2^63), or whose write_seq is at or past claim_seq, is
    /// reported, exit 1, and not healed. Reporting
    /// needs read access only: stuck slots of a file heal may not write are reported, with
    /// that reason, and heal exits 1. A blackboard key left mid-write (its seqlock odd in two
    /// looks 20 ms apart) is reported and heal exits 1; only a new write of the key by its
    /// writer repairs it.
    Heal {
        /// The queue, ring or blackboard file.
        path: PathBuf,
        /// Every producer of the lossy MPMC ring has exited or was killed (one merely paused
        /// while copying leaves the same mark): a slot left mid-write is a dead producer's.
        #[arg(long)]
        producers_dead: bool,
    },
    /// Measure: floor (the machine's floor), handoff (a hand-off across processes), stress
    /// (replication over loopback at several rates) or mirror (a mirror's latency on this
    /// host).
    Bench {
        /// Which measurement.
        #[command(subcommand)]
        mode: bench::BenchMode,
    },
    /// Stream a ring to mirrors over TCP, UDP multicast or UDP unicast.
    ///
    /// Runs until SIGINT, SIGTERM or SIGHUP, then ends its sessions, prints a last line,
    /// "serve: done: …" with its totals, and exits 0 (a second signal, 200 ms or more after
    /// the first, ends it at once). With --once it ends with its one mirror's session
    /// instead (see --once for its exit status); a session cut short by a new ring at PATH
    /// does not count: the mirror is served the new ring when it reconnects. A ring removed
    /// from PATH is served as it was until a new one appears there; a new ring at PATH (a
    /// restarted producer) is served in its place on the same addresses, and mirrors
    /// reconnect to it. Exits 1 with "Error: …" when it cannot start (PATH is not a ring, an
    /// address cannot be bound, an --iface address no interface of this host has) or cannot
    /// serve the new ring at PATH. Everything it says goes to stderr.
    Serve(crate::replica::cli::ServeArgs),
    /// Keep a local copy of a remote ring.
    ///
    /// Runs until SIGINT, SIGTERM or SIGHUP: whenever a connect fails or a connection ends
    /// (the source went away or stopped answering, a protocol error) it says why, in a
    /// "mirror: connection ended (…)" line for a connection, waits --reconnect-ms and
    /// reconnects, resuming where the mirror ring stopped. When stopped, it prints a last
    /// line, "mirror: done: …" with its totals, and exits 0 (a second signal, 200 ms or
    /// more after the first, ends it at once). With --once it ends with its first
    /// connection instead (see --once). Exits 1 with "Error: …" on what reconnecting cannot
    /// mend: an --iface address no interface of this host has (checked at start), the
    /// mirror ring removed from PATH or replaced there while it writes, PATH held by another
    /// producer, a source ring over --max-ring-size. Everything it says goes to
    /// stderr.
    Mirror(crate::replica::cli::MirrorArgs),
    /// Source, serve, mirror and a latency reader on this machine, over loopback.
    ///
    /// Prints push→read latency on the mirror ring every second (stderr), then the whole
    /// run's percentiles, what was published, delivered and missed, and the CPU the process
    /// used, in cores (stdout). Exits non-zero if a record arrives corrupt, twice, out of
    /// order or not at all (missed counts too: records gone from the mirror ring before the
    /// reader got to them), with the reason on stderr. If serve or the mirror fails (before
    /// the mirror ring appears too, say on a full /dev/shm), the run ends at once with that
    /// error, exit 1. Stopped by SIGINT, SIGTERM or SIGHUP, it prints what it has, says how
    /// many records were published before, and exits 1.
    Demo(crate::replica::cli::DemoArgs),
    /// Print the version (as --version does).
    Version,
}

/// Lets every option of `sub` and its subcommands take a value that looks like a negative
/// number, so that the option's own parser refuses it by name (`invalid value '-1' for
/// '--batch <N>'`). Without it clap reads `--batch -1` as a flag `-1` and says "unexpected
/// argument '-1' found", which names neither the option nor what is wrong with the value.
fn negative_values(sub: clap::Command) -> clap::Command {
    sub.mut_args(|a| {
        if !a.is_positional() && a.get_action().takes_values() {
            a.allow_negative_numbers(true)
        } else {
            a
        }
    })
    .mut_subcommands(negative_values)
}

/// Parses a count that must be at least 1. clap's `range(1..)` would reject 0 with
/// "0 is not in 1..18446744073709551615", which reads as if the maximum were excluded.
fn at_least_1(s: &str) -> Result<u64, String> {
    match s.parse::<u64>().map_err(|e| e.to_string())? {
        0 => Err("must be at least 1".into()),
        n => Ok(n),
    }
}

/// The longest `top` refresh, in milliseconds: an hour. A larger one (up to u64::MAX ms was
/// taken) printed nothing for longer than anyone waits, and a removed file went unnoticed
/// as long.
const MAX_REFRESH_MS: u64 = 3_600_000;

/// Parses `top --interval-ms`: 1 to [`MAX_REFRESH_MS`].
fn refresh_ms(s: &str) -> Result<u64, String> {
    match at_least_1(s)? {
        n if n > MAX_REFRESH_MS => Err(format!(
            "{n} ms is over an hour: the most is {MAX_REFRESH_MS}"
        )),
        n => Ok(n),
    }
}

/// The first value of `list` that comes again later in it.
fn repeated<T: PartialEq>(list: &[T]) -> Option<&T> {
    list.iter()
        .enumerate()
        .find(|&(i, v)| list[i + 1..].contains(v))
        .map(|(_, v)| v)
}

/// The name a user types for `v`, a value of an enum flag.
fn value_name(v: &impl clap::ValueEnum) -> String {
    v.to_possible_value()
        .map_or_else(String::new, |p| p.get_name().to_string())
}

/// Parses the command line as [`Cli::try_parse_from`] does, with two usage errors of its
/// own:
/// * a value given twice in a comma list (`bench stress --transport tcp,tcp`), which clap
///   takes, is refused: each value is a run, and it would run twice;
/// * a value that is not UTF-8 is named, with the flag it is given to (`invalid value
///   "\xff" for '--tail <N>'`), where clap says only "invalid UTF-8 was detected in one or
///   more arguments". Paths take any bytes (they are `PathBuf`s); numbers, addresses and
///   names are text.
pub fn parse_from<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::error::ErrorKind;
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    let cli = match Cli::try_parse_from(&args) {
        Err(e) if e.kind() == ErrorKind::InvalidUtf8 => {
            let Some((value, long)) = not_utf8(&args) else {
                return Err(e);
            };
            let shown = crate::shown::path(std::path::Path::new(value));
            return Err(usage_error(&args, ErrorKind::InvalidUtf8, long, |flag| {
                let what = "is not UTF-8 (only a path may hold such bytes)";
                match flag {
                    Some(flag) => format!("invalid value {shown} for '{flag}': it {what}"),
                    None => format!("argument {shown} {what}"),
                }
            }));
        }
        r => r?,
    };
    if let Command::Bench { mode } = &cli.command
        && let Some((long, value)) = mode.repeated()
    {
        return Err(usage_error(
            &args,
            ErrorKind::ValueValidation,
            Some(long),
            |flag| {
                let flag = flag.unwrap_or_else(|| format!("--{long}"));
                format!(
                    "invalid value '{value}' for '{flag}': given more than once (each value is a run)"
                )
            },
        ));
    }
    Ok(cli)
}

/// The first value in `args` that is not UTF-8 where clap wants text (a path may be any
/// bytes), and the long flag it may be the value of: `--name=value` in one argument, or
/// `--name` before it. Each argument that is not UTF-8 is tried alone, the others made text.
fn not_utf8(args: &[std::ffi::OsString]) -> Option<(&std::ffi::OsStr, Option<&str>)> {
    use std::os::unix::ffi::OsStrExt;
    let text = |a: &std::ffi::OsString| a.to_str().is_some();
    let i = (0..args.len()).filter(|&i| !text(&args[i])).find(|&i| {
        let alone = args.iter().enumerate().map(|(j, a)| {
            if j == i || text(a) {
                a.clone()
            } else {
                "p".into()
            }
        });
        matches!(Cli::try_parse_from(alone), Err(e) if e.kind() == clap::error::ErrorKind::InvalidUtf8)
    })?;
    let bytes = args[i].as_bytes();
    if let Some(b) = bytes.strip_prefix(b"--")
        && let Some(end) = b.iter().position(|&c| c == b'=')
        && let Ok(long) = std::str::from_utf8(&b[..end])
    {
        return Some((std::ffi::OsStr::from_bytes(&b[end + 1..]), Some(long)));
    }
    let before = args[..i]
        .last()
        .and_then(|a| a.to_str()?.strip_prefix("--"))
        .filter(|a| !a.contains('='));
    Some((args[i].as_os_str(), before))
}

/// A usage error of `kind` saying `what(flag)`, with the usage of the subcommand `args`
/// name. `flag` is `long` as clap shows it (`--transport <TRANSPORT>`), if that subcommand
/// has such an option taking a value.
fn usage_error(
    args: &[std::ffi::OsString],
    kind: clap::error::ErrorKind,
    long: Option<&str>,
    what: impl FnOnce(Option<String>) -> String,
) -> clap::Error {
    let mut cmd = Cli::command();
    cmd.build();
    let mut sub = &cmd;
    for a in args.iter().skip(1) {
        match a.to_str().and_then(|name| sub.find_subcommand(name)) {
            Some(s) => sub = s,
            None => break,
        }
    }
    let flag = long.and_then(|long| {
        sub.get_arguments()
            .find(|a| a.get_long() == Some(long) && a.get_action().takes_values())
            .map(|a| a.to_string())
    });
    clap::Error::raw(kind, what(flag)).format(&mut sub.clone())
}

/// Runs one command, writing its output to `out` (any writer, so `top` never clears the
/// screen).
pub fn run(cli: Cli, out: &mut dyn Write) -> crate::Result<()> {
    run_to(cli, out, false)
}

/// [`run`], with `top` clearing the screen before each refresh when `tty`.
fn run_to(cli: Cli, out: &mut dyn Write, tty: bool) -> crate::Result<()> {
    match cli.command {
        Command::Stat { path, json } => stat::run(&path, json, out),
        Command::Top {
            path,
            interval_ms,
            iterations,
        } => top::run(&path, interval_ms, iterations, tty, out),
        Command::Dump { path, tail, hex } => dump::run(&path, tail, hex, out),
        Command::Prune { path } => prune::run(&path, out),
        Command::Heal {
            path,
            producers_dead,
        } => heal::run(&path, producers_dead, out),
        Command::Bench { mode } => bench::run(mode, out),
        Command::Version => {
            writeln!(out, "ringwire {}", env!("CARGO_PKG_VERSION")).map_err(out_err())
        }
        // Long-running drivers with their own stop signal and exit code: `main` runs them.
        Command::Serve(_) | Command::Mirror(_) | Command::Demo(_) => {
            Err(crate::Error::InvalidArgument {
                path: PathBuf::new(),
                what: "serve, mirror and demo run through cli::main, not cli::run".into(),
            })
        }
    }
}

/// Stdout that remembers whether a write failed because its reader went away (`EPIPE`:
/// Rust ignores `SIGPIPE`, so the write returns the error instead of killing the process).
struct Stdout<W> {
    inner: W,
    reader_gone: bool,
}

impl<W: Write> Stdout<W> {
    fn note<T>(&mut self, r: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &r {
            self.reader_gone |= e.kind() == std::io::ErrorKind::BrokenPipe;
        }
        r
    }
}

impl<W: Write> Write for Stdout<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let r = self.inner.write(buf);
        self.note(r)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        let r = self.inner.flush();
        self.note(r)
    }
}

/// Ends the process as a Unix filter whose reader went away does: killed by `SIGPIPE`, with
/// no message (status 141 in a shell). Only here is `SIGPIPE`'s default action restored, so
/// the sockets of `serve` and `mirror` never raise it.
pub(crate) fn die_of_sigpipe() -> ExitCode {
    // SAFETY: plain signal-disposition calls with valid arguments; no handler is installed.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(libc::SIGPIPE);
    }
    // Not reached unless SIGPIPE cannot be delivered: the shell's status for it.
    ExitCode::from(128 + libc::SIGPIPE as u8)
}

/// Whether stdout is a terminal.
fn stdout_is_tty() -> bool {
    // SAFETY: isatty only inspects the descriptor.
    unsafe { libc::isatty(libc::STDOUT_FILENO) == 1 }
}

/// The binary's entry point: parses `std::env::args` (a usage error prints clap's message
/// and exits 1, as ringfire's; help and version exit 0), runs, prints `Error: …` and exits 1
/// on failure, and dies of `SIGPIPE` when stdout's reader went away. It first installs the
/// SIGBUS handler (see the `sigbus` module), so that a file truncated while the command
/// has it mapped ends the command with a line naming the file and status 1.
pub fn main() -> ExitCode {
    sigbus::install();
    let cli = match parse_from(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) => {
            let printed = e.print().and_then(|()| {
                // clap prints help through a buffered stdout: flush it to see the error.
                if e.use_stderr() {
                    Ok(())
                } else {
                    std::io::stdout().flush()
                }
            });
            match printed {
                Err(p) if p.kind() == std::io::ErrorKind::BrokenPipe => return die_of_sigpipe(),
                Err(p) => {
                    let to = if e.use_stderr() { "stderr" } else { "stdout" };
                    diag!("Error: write {to}: {p}");
                    return ExitCode::FAILURE;
                }
                Ok(()) => {}
            }
            // Help and version go to stdout and succeed; everything else is a usage error.
            return if e.use_stderr() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match &cli.command {
        Command::Serve(a) => return a.run(),
        Command::Mirror(a) => return a.run(),
        Command::Demo(a) => return a.run(),
        _ => {}
    }
    let mut out = Stdout {
        inner: std::io::stdout().lock(),
        reader_gone: false,
    };
    let result = run_to(cli, &mut out, stdout_is_tty());
    let flushed = out.flush();
    if out.reader_gone {
        return die_of_sigpipe();
    }
    match result.and(flushed.map_err(out_err())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            diag!("Error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Maps an output error (a closed pipe, …) to the adapter's error type.
/// The error of a failed write of a command's output: named after stdout, where the
/// commands write, not after the ring or queue file the output describes (`stat R >
/// /dev/full` said `R: write output failed`, as if R's file system were full).
fn out_err() -> impl Fn(std::io::Error) -> crate::Error {
    |e| crate::Error::io(std::path::Path::new("stdout"), "write output", e)
}
