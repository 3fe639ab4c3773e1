//! Command-line arguments of `ringwire serve`, `ringwire mirror` and `ringwire demo` (spec
//! §26 meanings). Unlike ringfire, which silently replaces an unparsable value by its
//! default, every invalid value is rejected with a message.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{ArgGroup, Args, ValueEnum};
use ringwire_core::replicate::{MAX_LINGER, Start};

use super::demo::{DemoOptions, Transport};
use super::mirror::MirrorOptions;
use super::serve::{ServeOptions, run_following};
use super::{ReplicaError, signal};

/// `--linger-us`'s largest value: the core pacer's [`MAX_LINGER`] in microseconds.
const MAX_LINGER_US: u64 = MAX_LINGER.as_nanos() / 1_000;

/// `ringwire serve`: stream a ring to mirrors.
#[derive(Args, Debug, Clone)]
#[command(group(ArgGroup::new("udp_delivery").args(["multicast", "udp"]).multiple(true)))]
pub struct ServeArgs {
    /// The source ring file (must exist): a fixed-record ring or a blob ring (records with
    /// their blobs; mirrors recreate the arena). Mapped read-write to sleep on its futex when
    /// idle; without write access it is mapped read-only and polled (logged once).
    pub path: PathBuf,
    /// TCP listen address, HOST:PORT, e.g. 0.0.0.0:7400. IPv4 (mirrors connect over IPv4
    /// only), or [::]:PORT, which accepts IPv4 mirrors too; a host name binds its IPv4
    /// address (localhost:7400 is 127.0.0.1:7400). With --udp or --multicast, the UDP socket
    /// binds this address's IP as well (its port is --udp's, or any free one).
    // The text is also the --help line, so "[::]" stays as typed, not as a doc link.
    #[allow(rustdoc::broken_intra_doc_links)]
    #[arg(long, value_name = "ADDR", value_parser = parse_bind)]
    pub bind: SocketAddr,
    /// Send live data to this IPv4 multicast group, e.g. 239.1.1.1:7401 (one port per stream).
    #[arg(long, value_name = "GROUP:PORT", value_parser = parse_group)]
    pub multicast: Option<SocketAddrV4>,
    /// Multicast sending interface address (only with --multicast; default: the --bind
    /// address when it names one, else the kernel's choice, as 0.0.0.0). An address no interface of
    /// this host has at start is refused (exit 1, naming it): one that comes later, as by
    /// DHCP, needs serve started after it, or under a supervisor that restarts it.
    #[arg(long, value_name = "ADDR", requires = "multicast")]
    pub iface: Option<Ipv4Addr>,
    /// UDP datagram budget in bytes, frame header included (24..=65536; only with
    /// --multicast or --udp). Frames are filled up to it; a record too long to fit in it
    /// alone still goes alone, in a longer datagram (or, over 65,507 bytes, by NAK over TCP).
    #[arg(long, value_name = "N", default_value_t = 1472, requires = "udp_delivery",
          value_parser = clap::value_parser!(u32).range(24..=65536))]
    pub mtu: u32,
    /// Multicast TTL, 0..=255 hops (only with --multicast; 1 keeps it on the local network).
    #[arg(long, value_name = "N", default_value_t = 1, requires = "multicast")]
    pub ttl: u8,
    /// Fixed frame linger in microseconds, 0..=1000000 (default: adaptive, 50 µs pace).
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u64).range(0..=MAX_LINGER_US))]
    pub linger_us: Option<u64>,
    /// Enable UDP unicast delivery from this UDP port (0 = any free port).
    #[arg(long, value_name = "PORT")]
    pub udp: Option<u16>,
    /// Send every datagram N times (1..=255; only with --multicast or --udp).
    #[arg(long, value_name = "N", default_value_t = 1, requires = "udp_delivery",
          value_parser = clap::value_parser!(u8).range(1..=255))]
    pub dup: u8,
    /// Records per DATA frame (1..=65535).
    #[arg(long, value_name = "N", default_value_t = 256,
          value_parser = clap::value_parser!(u16).range(1..=65535))]
    pub batch: u16,
    /// When idle, poll the ring (yielding the core between checks) for up to 2 ms before
    /// sleeping on its futex; after 3 fruitless polls in a row it sleeps at once until
    /// records come closer together again. Costs CPU while records flow.
    #[arg(long)]
    pub spin: bool,
    /// Do not anticipate: by default, once records have come at a steady interval
    /// (100 µs to 100 ms apart, varying by less than a quarter of it), each idle sleep ends
    /// just before the next one is due and a short poll catches it, which hides the wake-up
    /// latency at a bounded CPU cost (at most a quarter of the interval per record).
    #[arg(long)]
    pub no_anticipate: bool,
    /// Serve the first TCP connection as a mirror and exit when it ends (not with
    /// --multicast or --udp): 0 when the peer goes away (it closes or resets the
    /// connection, before or after its HELLO, as a port probe does); 1 when the session
    /// ends in an error: a protocol error, no HELLO within 5 s, a write that timed out.
    #[arg(long, conflicts_with_all = ["multicast", "udp"])]
    pub once: bool,
    /// Most concurrent mirrors (1..=4096); further connections are refused. Not with
    /// --once, which serves one.
    #[arg(long, value_name = "N", default_value_t = 64, conflicts_with = "once",
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub max_mirrors: u32,
    /// Seconds a UDP unicast session may go without a PUNCH from its mirror before it is
    /// ended (0..=86400; 0 never, as ringfire's server). Mirrors punch every 5 s; the
    /// default, 20, lets three in a row be lost. Only with --udp.
    #[arg(long, value_name = "S", default_value_t = super::serve::PUNCH_TIMEOUT.as_secs(), requires = "udp",
          value_parser = clap::value_parser!(u64).range(0..=86_400))]
    pub punch_timeout: u64,
}

/// Where a mirror starts.
fn parse_from(s: &str) -> Result<Start, String> {
    match s {
        "latest" => Ok(Start::Latest),
        "oldest" => Ok(Start::Oldest),
        "resume" => Ok(Start::Resume),
        n => n
            .parse::<u64>()
            // As given, 0 included (the HELLO asks for record 1): the notice names it.
            .map(Start::Sequence)
            .map_err(|_| format!("'{n}' is not latest, oldest, resume or a sequence number")),
    }
}

fn parse_group(s: &str) -> Result<SocketAddrV4, String> {
    let a: SocketAddrV4 = s
        .parse()
        .map_err(|_| format!("'{s}' is not GROUP:PORT (e.g. 239.1.1.1:7401)"))?;
    if !a.ip().is_multicast() {
        return Err(format!(
            "{} is not an IPv4 multicast group (224.0.0.0/4)",
            a.ip()
        ));
    }
    if a.port() == 0 {
        return Err("the multicast port must not be 0".into());
    }
    Ok(a)
}

/// `mirror`'s SOURCE as given: an IPv4 address and port, or a host name and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceArg {
    /// An IPv4 address and port, as written.
    Addr(SocketAddr),
    /// `HOST:PORT` with a host name, resolved before each connection attempt (see
    /// [`MirrorOptions::source_name`]).
    Name(String),
}

/// `mirror`'s SOURCE. A host name is not resolved here: a name that does not resolve yet
/// (DNS not up when the mirror starts at boot) must be retried as a refused connect is, as
/// ringfire's mirror retries it, not end the mirror with a usage error.
fn parse_source(s: &str) -> Result<SourceArg, String> {
    let ipv4_only = "mirrors connect to IPv4 sources only (the replication protocol carries \
                     IPv4 addresses)";
    let (a, port) = match s.parse::<SocketAddr>() {
        Ok(a) if a.is_ipv4() => (Some(a), a.port()),
        Ok(_) => return Err(format!("'{s}' is not an IPv4 address: {ipv4_only}")),
        Err(_) => {
            let bad = || format!("'{s}' is not HOST:PORT (e.g. 10.0.0.5:7400 or src-host:7400)");
            let (host, port) = s.rsplit_once(':').ok_or_else(bad)?;
            let port: u16 = port.parse().map_err(|_| bad())?;
            // Only a host name's characters: not an unbracketed IPv6 address (`::1:7400`)
            // or a URL, which no resolution turns into an IPv4 source.
            let name_char = |b: u8| b.is_ascii_alphanumeric() || b"-._".contains(&b);
            if host.is_empty() || !host.bytes().all(name_char) {
                return Err(bad());
            }
            if host.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
                // An IPv4 address in a short form the resolver reads (`127.1`), as it did
                // for ringfire: no name to look up again. One it does not read
                // (`300.1.2.3`) is no address.
                let a = s
                    .to_socket_addrs()
                    .ok()
                    .and_then(|mut a| a.find(SocketAddr::is_ipv4));
                (Some(a.ok_or_else(bad)?), port)
            } else {
                (None, port)
            }
        }
    };
    if port == 0 {
        return Err(format!(
            "'{s}': port 0 is not a source's port (serve prints the port it listens on)"
        ));
    }
    Ok(a.map_or_else(|| SourceArg::Name(s.to_string()), SourceArg::Addr))
}

/// `serve --bind`: an IP address and port as written, or a host name and port, which binds
/// the name's first IPv4 address. ringfire binds whatever its listener resolves, so a
/// `--bind localhost:7400` that works there must work here; of a name's addresses only an
/// IPv4 one is any use, as mirrors connect over IPv4 only.
fn parse_bind(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        // A literal IPv6 address is judged by the server, which says why only [::] is
        // of use.
        return Ok(a);
    }
    let addrs = s.to_socket_addrs().map_err(|e| {
        // A name the resolver does not know is no fault of the syntax.
        let shaped = s
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if shaped {
            format!("'{s}': its host does not resolve: {e}")
        } else {
            format!("'{s}' is not HOST:PORT: {e}")
        }
    })?;
    addrs.into_iter().find(SocketAddr::is_ipv4).ok_or_else(|| {
        format!(
            "'{s}' has no IPv4 address: mirrors connect over IPv4 only (the replication \
             protocol carries IPv4 addresses)"
        )
    })
}

/// `ringwire mirror`: keep a local copy of a remote ring.
#[derive(Args, Debug, Clone)]
pub struct MirrorArgs {
    /// The source's TCP address, HOST:PORT: IPv4 only (the replication protocol carries
    /// IPv4 addresses). A host name is resolved before each connection attempt, to its
    /// first IPv4 address; one that does not resolve is a failed attempt, retried as a
    /// refused connect is.
    #[arg(value_parser = parse_source)]
    pub source: SourceArg,
    /// The local mirror ring file (created, or adopted with --from resume). A file there
    /// that is neither a ring nor empty, or that is a lossy MPMC ring, is refused before
    /// connecting (exit 1) and left as it is.
    pub path: PathBuf,
    /// Start at: latest, oldest, resume (continue the local ring; with no ring at PATH, or
    /// one that cannot be resumed, start at the source's oldest record) or a sequence
    /// number (one the source no longer holds, or has not written yet, starts at its oldest
    /// or its next record, with a notice). Reconnections resume once a connection has made
    /// the mirror ring; until then (a source not up yet) they start here again.
    #[arg(long, value_name = "WHERE", default_value = "latest", value_parser = parse_from)]
    pub from: Start,
    /// Ask for UDP unicast delivery even if the source has multicast.
    #[arg(long)]
    pub unicast: bool,
    /// Multicast join interface address [default: this host's address of the TCP
    /// connection to the source, e.g. 127.0.0.1 for a source on this host]. Used only when
    /// the source delivers by multicast (with --unicast, only if the source has no
    /// unicast); otherwise ignored with a warning. An address no interface of this host
    /// has at start is refused, whatever the source's transport (exit 1, naming it, not
    /// retried): one that comes later, as by DHCP, needs the mirror started after it, or
    /// under a supervisor that restarts it. A join that fails later is retried.
    #[arg(long, value_name = "ADDR", default_value_t = Ipv4Addr::UNSPECIFIED, hide_default_value = true)]
    pub iface: Ipv4Addr,
    /// When idle, poll the sockets (yielding the core between checks) for up to 2 ms
    /// before blocking; after 3 fruitless polls in a row it blocks at once until datagrams
    /// come closer together again. Costs CPU while records flow.
    #[arg(long)]
    pub spin: bool,
    /// Do not anticipate: by default, once datagrams or frames have come at a steady interval
    /// (100 µs to 100 ms apart, varying by less than a quarter of it), each idle sleep ends
    /// just before the next is due and a short poll catches it, which hides the wake-up
    /// latency at a bounded CPU cost (at most a quarter of the interval per record).
    #[arg(long)]
    pub no_anticipate: bool,
    /// Exit when the source disconnects: 0 when it hangs up after the handshake; 1 on a
    /// connect error, a protocol error, a source that closes the connection before its
    /// GEOMETRY (a server at its session limit refuses this way), a source that stays
    /// silent past the handshake or liveness deadline, or a multicast group it announces
    /// that cannot be joined here. Without it, the mirror reconnects after each of these.
    #[arg(long)]
    pub once: bool,
    /// Milliseconds between connection attempts (0..=3600000; 0 reconnects at once, as
    /// ringfire's, and then retries a refused or failed connection without pause, logging
    /// at most one line a second). Not with --once, which does not reconnect.
    #[arg(long, value_name = "N", default_value_t = 500, conflicts_with = "once",
          value_parser = clap::value_parser!(u64).range(0..=3_600_000))]
    pub reconnect_ms: u64,
    /// Microseconds a hole in the UDP stream waits for late (reordered) datagrams before the
    /// first NAK (0..=1000000; 0 asks at once). On a path that reorders, set it a little
    /// above the path's reordering spread: the records then come once, by UDP, instead of
    /// also being retransmitted over TCP; a real loss is repaired this much later. UDP
    /// delivery only: ignored, with a warning, if the source serves over TCP only.
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub nak_delay_us: u64,
    /// The largest mirror ring this mirror creates, in bytes, or with a binary suffix
    /// (K, M, G, T: 64M is 64 MiB). A source whose ring needs more is refused: the mirror
    /// exits 1 with an error and creates nothing (a ring already at PATH is kept). The
    /// source's geometry decides the ring's size, so this bounds what a misconfigured or
    /// hostile source can make this host reserve (in /dev/shm, memory) [default: no limit
    /// but the filesystem's free space].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_ring_size: Option<u64>,
}

/// A size in bytes: a number, or one with a binary suffix K, M, G or T, optionally
/// followed by `iB` or `B`, in any case (`4096`, `64M`, `2GiB`, `1kb` = 1024). Zero is
/// refused.
fn parse_size(s: &str) -> Result<u64, String> {
    let lower = s.trim().to_ascii_lowercase();
    let split = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (digits, unit) = lower.split_at(split);
    let shift = match unit {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(bad_size(s)),
    };
    let too_large = || format!("'{s}' is more than 2^64 - 1 bytes");
    let n: u64 = digits.parse().map_err(|_| {
        // `digits` holds only digits: a number too long for a u64, not a malformed size.
        if digits.is_empty() {
            bad_size(s)
        } else {
            too_large()
        }
    })?;
    let v = n.checked_mul(1u64 << shift).ok_or_else(too_large)?;
    if v == 0 {
        return Err("the size must be at least 1 byte".into());
    }
    Ok(v)
}

fn bad_size(s: &str) -> String {
    format!("'{s}' is not a size: a number of bytes, or one with a suffix K, M, G or T (e.g. 64M)")
}

/// Which transport the demo's mirror uses.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportArg {
    /// DATA over the TCP connection.
    Tcp,
    /// UDP multicast on loopback, repairs over TCP.
    Multicast,
    /// UDP unicast, repairs over TCP.
    Unicast,
}

/// `ringwire demo`: source, serve, mirror and a latency reader on this machine.
#[derive(Args, Debug, Clone)]
pub struct DemoArgs {
    /// How the mirror receives live data.
    #[arg(long, value_enum, default_value_t = TransportArg::Multicast)]
    pub transport: TransportArg,
    /// How long to run (1..=86400 s): the feed publishes --rate × --seconds records, and a
    /// producer that cannot keep up runs on until it has published them all.
    #[arg(long, value_name = "N", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub seconds: u64,
    /// Records per second the synthetic feed publishes (1..=5000000).
    #[arg(long, value_name = "N", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..=5_000_000))]
    pub rate: u64,
    /// serve, mirror and reader poll (bounded, yielding, adaptive) before sleeping.
    #[arg(long)]
    pub spin: bool,
    /// serve, mirror and reader do not anticipate the feed's next record (see `serve
    /// --help`).
    #[arg(long)]
    pub no_anticipate: bool,
}

fn exit(r: Result<(), ReplicaError>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            diag!("Error: {e}");
            ExitCode::FAILURE
        }
    }
}

impl ServeArgs {
    /// The driver's options.
    pub fn options(&self) -> ServeOptions {
        ServeOptions {
            multicast: self.multicast,
            iface: self.iface,
            mtu: self.mtu as usize,
            ttl: self.ttl,
            linger_us: self.linger_us,
            udp: self.udp,
            dup: self.dup,
            batch: self.batch,
            spin: self.spin,
            anticipate: !self.no_anticipate,
            once: self.once,
            max_sessions: self.max_mirrors as usize,
            punch_timeout: Duration::from_secs(self.punch_timeout),
            ..ServeOptions::new(&self.path, self.bind)
        }
    }

    /// Runs `ringwire serve` until SIGINT/SIGTERM/SIGHUP.
    pub fn run(&self) -> ExitCode {
        let stop = signal::install();
        let opts = self.options();
        let replaced = |path: &Path| {
            diag!(
                "serve: {} was replaced by a new ring; sessions restarted on it",
                crate::shown::path(path)
            )
        };
        exit(run_following(&opts, stop, replaced).map(|sum| {
            diag!(
                "serve: done: {} sessions ({} refused, {} of them for want of a thread; {} closed without HELLO ({} at the hello timeout); {} unicast sessions ended without PUNCH), {} records over tcp, {} naks, {} gaps; udp {} data frames, {} heartbeats, {} punches, {} rejected datagrams, {} send errors, {} receive errors",
                sum.sessions,
                sum.refused,
                sum.spawn_failures,
                sum.closed_without_hello,
                sum.hello_timeouts,
                sum.punch_timeouts,
                sum.tcp_records,
                sum.naks,
                sum.gaps,
                sum.udp.data_frames,
                sum.udp.heartbeats,
                sum.udp.punches,
                sum.udp.rejected,
                sum.udp_send_errors,
                sum.udp_receive_errors
            );
        }))
    }
}

impl MirrorArgs {
    /// The driver's options.
    pub fn options(&self) -> MirrorOptions {
        let (source, source_name) = match &self.source {
            SourceArg::Addr(a) => (*a, None),
            // Unused: the name is resolved before each attempt.
            SourceArg::Name(n) => (
                SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
                Some(n.clone()),
            ),
        };
        MirrorOptions {
            source_name,
            start: self.from,
            unicast: self.unicast,
            iface: self.iface,
            spin: self.spin,
            anticipate: !self.no_anticipate,
            once: self.once,
            reconnect: Duration::from_millis(self.reconnect_ms),
            nak_delay: Duration::from_micros(self.nak_delay_us),
            max_ring_len: self.max_ring_size,
            ..MirrorOptions::new(source, &self.path)
        }
    }

    /// Runs `ringwire mirror` until SIGINT/SIGTERM/SIGHUP (or the end of the connection with --once).
    pub fn run(&self) -> ExitCode {
        let stop = signal::install();
        exit(super::mirror::run(&self.options(), stop).map(|s| {
            let c = s.counters;
            diag!(
                "mirror: done: {} connections, {} failed attempts, last seq written {} (the mirror ring's write_seq, 0 = none), {} records written, {} frames, {} datagrams, {} naks, {} retransmitted, {} gaps ({} records), {} restarts, resumes {} checked against the source and {} unchecked, {} dropped{}",
                s.connections,
                s.failed_attempts,
                s.last_seq,
                c.records_written,
                c.frames,
                c.datagrams,
                c.naks_sent,
                c.records_retransmitted,
                c.gaps,
                c.records_skipped,
                c.restarts,
                c.resumes_verified,
                c.resumes_unverified,
                c.garbage_dropped + c.holdback_dropped + s.foreign_datagrams,
                match s.punch_errors {
                    0 => String::new(),
                    n => format!(", {n} PUNCHes not sent"),
                }
            );
        }))
    }
}

impl DemoArgs {
    /// Runs `ringwire demo`.
    pub fn run(&self) -> ExitCode {
        let stop = signal::install();
        let opts = DemoOptions {
            transport: match self.transport {
                TransportArg::Tcp => Transport::Tcp,
                TransportArg::Multicast => Transport::Multicast,
                TransportArg::Unicast => Transport::Unicast,
            },
            seconds: self.seconds,
            rate: self.rate,
            spin: self.spin,
            anticipate: !self.no_anticipate,
            live: true,
        };
        let report = match super::demo::run(&opts, stop) {
            Ok(r) => r,
            Err(e) => return exit(Err(e)),
        };
        if let Err(e) = print_summary(&report.summary_line(opts.transport)) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                return crate::cli::die_of_sigpipe();
            }
            return exit(Err(ReplicaError::io(
                "demo: write the summary to stdout",
                e,
            )));
        }
        // Relaxed: a plain flag set by the signal handler.
        let what = if stop.load(std::sync::atomic::Ordering::Relaxed) {
            let mut what = format!(
                "interrupted by SIGINT, SIGTERM or SIGHUP after {} of {} records",
                report.published,
                self.rate.saturating_mul(self.seconds)
            );
            if let Some(p) = report.problem_over(opts.transport) {
                what += &format!("; {p}");
            }
            Some(what)
        } else {
            report.problem_over(opts.transport)
        };
        exit(match what {
            None => Ok(()),
            Some(what) => Err(ReplicaError::DemoFailed { what }),
        })
    }
}

/// Writes `line` to stdout and flushes it: an error (a full disk, a closed pipe) is
/// returned instead of panicking as `println!` does.
fn print_summary(line: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[test]
    fn every_flag_of_serve_mirror_and_demo_is_documented() {
        let cli = crate::cli::Cli::command();
        for name in ["serve", "mirror", "demo"] {
            let sub = cli.find_subcommand(name).expect(name);
            let mut n = 0;
            for a in sub.get_arguments() {
                let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
                assert!(
                    !help.trim().is_empty(),
                    "{name} {:?} has no help",
                    a.get_id()
                );
                n += 1;
            }
            assert!(n >= 3, "{name}: {n} arguments");
        }
    }

    #[test]
    fn no_anticipate_turns_anticipation_off() {
        let parse = |args: &[&str]| match crate::cli::Cli::try_parse_from(args) {
            Ok(crate::cli::Cli {
                command: crate::cli::Command::Serve(s),
            }) => s.options().anticipate,
            Ok(crate::cli::Cli {
                command: crate::cli::Command::Mirror(m),
            }) => m.options().anticipate,
            other => panic!("{other:?}"),
        };
        let serve = [
            "ringwire",
            "serve",
            "/dev/shm/x",
            "--bind",
            "127.0.0.1:7400",
        ];
        assert!(parse(&serve));
        assert!(!parse(&[&serve[..], &["--no-anticipate"]].concat()));
        let mirror = ["ringwire", "mirror", "127.0.0.1:7400", "/dev/shm/y"];
        assert!(parse(&mirror));
        assert!(!parse(&[&mirror[..], &["--no-anticipate"]].concat()));
    }

    #[test]
    fn from_values() {
        assert_eq!(parse_from("latest"), Ok(Start::Latest));
        assert_eq!(parse_from("oldest"), Ok(Start::Oldest));
        assert_eq!(parse_from("resume"), Ok(Start::Resume));
        assert_eq!(parse_from("42"), Ok(Start::Sequence(42)));
        assert_eq!(parse_from("0"), Ok(Start::Sequence(0)));
        let e = parse_from("-3").unwrap_err();
        assert!(e.contains("-3"), "{e}");
    }

    #[test]
    fn groups_must_be_multicast_with_a_port() {
        assert_eq!(
            parse_group("239.1.1.1:7401"),
            Ok(SocketAddrV4::new(Ipv4Addr::new(239, 1, 1, 1), 7401))
        );
        assert!(
            parse_group("10.0.0.1:7401")
                .unwrap_err()
                .contains("10.0.0.1")
        );
        assert!(parse_group("239.1.1.1:0").is_err());
        assert!(parse_group("239.1.1.1").is_err());
    }

    #[test]
    fn sizes_take_binary_suffixes_and_refuse_nonsense() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size(" 1kb "), Ok(1024));
        assert_eq!(parse_size("3t"), Ok(3 << 40));
        assert_eq!(parse_size("7B"), Ok(7));
        for bad in ["", "M", "-1", "1.5G", "12Q", "1 G", "0x10", "G1"] {
            let e = parse_size(bad).unwrap_err();
            assert!(e.contains("not a size"), "{bad}: {e}");
        }
        assert!(parse_size("0").unwrap_err().contains("at least 1 byte"));
        assert!(parse_size("0K").unwrap_err().contains("at least 1 byte"));
        assert!(parse_size("16777216T").unwrap_err().contains("2^64"));
        let m = crate::cli::Cli::try_parse_from([
            "ringwire",
            "mirror",
            "127.0.0.1:7400",
            "/dev/shm/y",
            "--max-ring-size",
            "1G",
        ])
        .unwrap();
        match m.command {
            crate::cli::Command::Mirror(a) => assert_eq!(a.options().max_ring_len, Some(1 << 30)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn sources_are_ipv4_addresses_or_names() {
        assert_eq!(
            parse_source("127.0.0.1:7400"),
            Ok(SourceArg::Addr(SocketAddr::from((
                Ipv4Addr::LOCALHOST,
                7400
            ))))
        );
        // The resolver's short forms of IPv4 addresses, as ringfire's mirror takes them.
        assert_eq!(
            parse_source("127.1:7400"),
            Ok(SourceArg::Addr(SocketAddr::from((
                Ipv4Addr::LOCALHOST,
                7400
            ))))
        );
        // Names are resolved before each connection attempt, not while parsing.
        assert_eq!(
            parse_source("localhost:7400"),
            Ok(SourceArg::Name("localhost:7400".into()))
        );
        for bad in [
            "nowhere",
            ":7400",
            "host:",
            "host:70000",
            "::1:7400",
            "300.1.2.3:7400",
            "http://src:7400",
            "src host:7400",
        ] {
            let e = parse_source(bad).unwrap_err();
            assert!(e.contains("is not HOST:PORT"), "{bad}: {e}");
        }
        let e = parse_source("[::1]:7400").unwrap_err();
        assert!(e.contains("IPv4 sources only"), "{e}");
        // Refused at parse time, not after a connect that fails ('Connection refused').
        let e = parse_source("127.0.0.1:0").unwrap_err();
        assert!(e.contains("port 0"), "{e}");
    }

    /// `--bind` takes a host name, as ringfire's does (its listener binds what the name
    /// resolves to): `localhost:PORT` was refused as "invalid socket address syntax".
    #[test]
    fn bind_takes_a_host_name_and_port() {
        let bind = |b: &str| match crate::cli::Cli::try_parse_from([
            "ringwire",
            "serve",
            "/dev/shm/x",
            "--bind",
            b,
        ]) {
            Ok(crate::cli::Cli {
                command: crate::cli::Command::Serve(s),
            }) => Ok(s.bind),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e.to_string()),
        };
        assert_eq!(
            bind("localhost:7400"),
            Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, 7400)))
        );
        assert_eq!(
            bind("127.0.0.1:0"),
            Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        );
        // Literal IPv6 addresses pass as written: the server accepts [::] and names the rest.
        assert_eq!(bind("[::]:7400"), Ok("[::]:7400".parse().unwrap()));
        for bad in [
            "127.0.0.1",
            "localhost",
            "nowhere.invalid:7400",
            "1.2.3.4:70000",
        ] {
            let e = bind(bad).unwrap_err();
            assert!(e.contains("--bind") && e.contains(bad), "{bad}: {e}");
        }
        // A host the resolver does not know is said to be one, not bad syntax: the message
        // called `nowhere.invalid:7400` "not HOST:PORT".
        let e = bind("nowhere.invalid:7400").unwrap_err();
        assert!(e.contains("its host does not resolve"), "{e}");
        assert!(!e.contains("is not HOST:PORT"), "{e}");
        assert!(bind("localhost").unwrap_err().contains("is not HOST:PORT"));
    }

    fn help(sub: &str, arg: &str) -> String {
        let cli = crate::cli::Cli::command();
        let sub = cli.find_subcommand(sub).expect(sub);
        let a = sub.get_arguments().find(|a| a.get_id() == arg).expect(arg);
        let mut h = a.get_help().map(|h| h.to_string()).unwrap_or_default();
        h.push_str(&a.get_long_help().map(|h| h.to_string()).unwrap_or_default());
        h
    }

    /// Blob rings are served and mirrored: the help does not restrict serve to fixed-record
    /// rings.
    #[test]
    fn serve_help_accepts_blob_rings() {
        let h = help("serve", "path");
        assert!(h.contains("blob ring"), "{h}");
        assert!(!h.contains("fixed-record rings)"), "{h}");
    }

    /// `--mtu` is a budget frames are filled to, not a limit on every datagram: a record
    /// longer than it goes alone (spec §20.3, as ringfire's), and the help says so; it read
    /// as if no datagram would exceed it.
    #[test]
    fn mtu_help_says_a_longer_record_goes_alone() {
        let h = help("serve", "mtu");
        assert!(h.contains("still goes alone, in a longer datagram"), "{h}");
    }

    /// Mirrors take IPv4 sources only, and say so; serve's --bind says which addresses work.
    #[test]
    fn ipv4_only_is_documented() {
        let h = help("mirror", "source");
        assert!(h.contains("IPv4 only"), "{h}");
        let h = help("serve", "bind");
        assert!(h.contains("IPv4"), "{h}");
    }

    /// The options a source's transport may leave unused are still accepted (whether they
    /// are used is known at the handshake, where a warning names them), and say so.
    #[test]
    fn transport_dependent_mirror_flags_say_when_they_apply() {
        let m = crate::cli::Cli::try_parse_from([
            "ringwire",
            "mirror",
            "127.0.0.1:7400",
            "/dev/shm/y",
            "--unicast",
            "--iface",
            "127.0.0.1",
            "--nak-delay-us",
            "100",
        ]);
        assert!(m.is_ok(), "{m:?}");
        assert!(help("mirror", "iface").contains("warning"));
        assert!(help("mirror", "nak_delay_us").contains("warning"));
    }

    /// `--iface` says that an address this host lacks is refused at start, and what to do
    /// about one that comes later (DHCP): start after it, or under a supervisor.
    #[test]
    fn iface_help_says_what_happens_to_an_address_this_host_lacks() {
        for sub in ["serve", "mirror"] {
            let h = help(sub, "iface")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            for said in [
                "no interface of this host has at start is refused",
                "DHCP",
                "supervisor",
            ] {
                assert!(h.contains(said), "{sub}: {said:?} not in {h}");
            }
        }
    }
}
