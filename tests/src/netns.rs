//! Network-namespace topologies for the root-only replication tests (`tests/netns_*.rs`).
//!
//! A [`Net`] is a private bridge namespace plus one namespace per host, each joined to the
//! bridge by a veth pair (`eth0` inside the host, `v-<host>` on the bridge). Names start with
//! `rwt-<pid>-`, so parallel runs never collide, and everything is removed on drop (also after a
//! failed assertion): the namespaces by `ip netns del`, the processes by their [`Proc`] guards.
//!
//! Processes run *built binaries* under `ip netns exec`. `env!("CARGO_BIN_EXE_ringwire")` does
//! not exist for another package's binary, so [`ringwire_bin`] finds `ringwire` in the test
//! executable's profile directory (`target/<profile>/`), or takes `RINGWIRE_BIN` from the
//! environment; `.ci/root-tests` builds it first. This package's `impair_proxy` comes from
//! `env!("CARGO_BIN_EXE_impair_proxy")` in the tests.
//!
//! Impairments are nftables rules: loss in the receiving host's `input` hook, duplication in
//! the bridge namespace's `netdev` egress hook of the port leading to the host (`dup to` the
//! same port), both restricted to one UDP destination port.

use std::fs::File;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The bridge namespace's bridge device.
const BRIDGE: &str = "br0";

/// Runs `cmd args…`, panicking with its stderr when it fails (test setup only).
pub fn sh(cmd: &str, args: &[&str]) {
    let out = Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {}: {}\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The `ringwire` binary: `$RINGWIRE_BIN`, or `target/<profile>/ringwire` next to the
/// directory of the running test executable (`target/<profile>/deps/`).
pub fn ringwire_bin() -> PathBuf {
    sibling_bin("RINGWIRE_BIN", "ringwire")
}

/// Runs `ringwire args…` (any bytes: `&str`s, or `OsStr`s that are not UTF-8) to completion
/// with stdin closed: (exit code, stdout, stderr); the code is -1 for a death by signal.
pub fn run_ringwire<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> (i32, String, String) {
    let o = std::process::Command::new(ringwire_bin())
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run the ringwire binary");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn sibling_bin(var: &str, name: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(var) {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("exe dir");
    let dir = if deps.ends_with("deps") {
        deps.parent().expect("profile dir")
    } else {
        deps
    };
    let p = dir.join(name);
    assert!(
        p.is_file(),
        "{} not found: build it first ({}; or set {var})",
        p.display(),
        build_command(dir, name)
    );
    p
}

/// The `cargo build` that puts the `ringwire` package's binary `name` into `profile_dir`
/// (`target/<profile>/`): `--release` for `release`, nothing for `debug` (a plain `cargo
/// test`), `--profile <name>` for any other.
fn build_command(profile_dir: &Path, name: &str) -> String {
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => String::new(),
        Some("release") => " --release".to_owned(),
        Some(other) => format!(" --profile {other}"),
    };
    format!("cargo build{profile} -p ringwire --bin {name}")
}

/// Deletes namespaces `rwt-<pid>-*` left behind by processes that no longer exist.
fn remove_stale() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix("rwt-") else {
            continue;
        };
        let pid = rest.split('-').next().unwrap_or("");
        if !pid.is_empty() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
}

/// A bridge namespace and host namespaces joined to it; removed on drop.
#[derive(Debug)]
pub struct Net {
    prefix: String,
    namespaces: Vec<String>,
}

impl Net {
    /// A new, empty topology whose names start with `rwt-<pid>-<tag>-`.
    pub fn new(tag: &str) -> Net {
        remove_stale();
        let mut net = Net {
            prefix: format!("rwt-{}-{tag}-", std::process::id()),
            namespaces: Vec::new(),
        };
        let br = net.add_ns("br");
        sh(
            "ip",
            &[
                "-n",
                &br,
                "link",
                "add",
                BRIDGE,
                "type",
                "bridge",
                "mcast_snooping",
                "0",
            ],
        );
        sh("ip", &["-n", &br, "link", "set", BRIDGE, "up"]);
        net
    }

    fn add_ns(&mut self, host: &str) -> String {
        let ns = self.ns(host);
        let _ = Command::new("ip").args(["netns", "del", &ns]).output();
        sh("ip", &["netns", "add", &ns]);
        self.namespaces.push(ns.clone());
        sh("ip", &["-n", &ns, "link", "set", "lo", "up"]);
        ns
    }

    /// The namespace name of `host`.
    pub fn ns(&self, host: &str) -> String {
        format!("{}{host}", self.prefix)
    }

    /// Adds host namespace `host` with `eth0` at `ip/24` on the bridge and a multicast route.
    pub fn add_host(&mut self, host: &str, ip: Ipv4Addr) -> String {
        let ns = self.add_ns(host);
        let br = self.ns("br");
        let port = format!("v-{host}");
        sh(
            "ip",
            &[
                "-n", &br, "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns",
                &ns,
            ],
        );
        sh("ip", &["-n", &br, "link", "set", &port, "master", BRIDGE]);
        sh("ip", &["-n", &br, "link", "set", &port, "up"]);
        sh(
            "ip",
            &["-n", &ns, "addr", "add", &format!("{ip}/24"), "dev", "eth0"],
        );
        sh("ip", &["-n", &ns, "link", "set", "eth0", "up"]);
        sh(
            "ip",
            &["-n", &ns, "route", "add", "224.0.0.0/4", "dev", "eth0"],
        );
        ns
    }

    /// Runs `nft` inside `host`'s namespace.
    fn nft(&self, host: &str, script: &str) {
        sh("ip", &["netns", "exec", &self.ns(host), "nft", script]);
    }

    /// Drops `pct` % of the UDP datagrams matching `matcher` (an nft match such as
    /// `udp dport 7401`) arriving at `host` (nftables input hook).
    pub fn loss(&self, host: &str, matcher: &str, pct: u32) {
        self.nft(host, "add table inet imp");
        self.nft(
            host,
            "add chain inet imp in { type filter hook input priority 0 ; }",
        );
        self.nft(
            host,
            &format!("add rule inet imp in {matcher} numgen random mod 100 < {pct} counter drop"),
        );
    }

    /// Duplicates about `pct` % of the datagrams matching `matcher` on their way to `host`: a
    /// netdev egress rule on the host's bridge port sends a copy out of the same port (the
    /// copy passes the rule again, so a few are sent three times or more).
    pub fn duplicate(&self, host: &str, matcher: &str, pct: u32) {
        let dev = format!("v-{host}");
        let table = format!("dup_{host}");
        self.nft("br", &format!("add table netdev {table}"));
        self.nft(
            "br",
            &format!("add chain netdev {table} out {{ type filter hook egress device {dev} priority 0 ; }}"),
        );
        self.nft(
            "br",
            &format!(
                "add rule netdev {table} out {matcher} numgen random mod 100 < {pct} counter dup to {dev}"
            ),
        );
    }

    /// Packets the loss rule of `host` dropped so far.
    pub fn lost(&self, host: &str) -> u64 {
        self.counter(host, "inet imp")
    }

    /// Packets the duplication rule towards `host` copied so far.
    pub fn duplicated(&self, host: &str) -> u64 {
        self.counter("br", &format!("netdev dup_{host}"))
    }

    /// The sum of the `counter packets N` of an nft table in `host`'s namespace.
    fn counter(&self, host: &str, table: &str) -> u64 {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.ns(host),
                "nft",
                &format!("list table {table}"),
            ])
            .output()
            .expect("nft list");
        let text = String::from_utf8_lossy(&out.stdout);
        let words: Vec<&str> = text.split_whitespace().collect();
        words
            .windows(2)
            .filter(|w| w[0] == "packets")
            .filter_map(|w| w[1].parse::<u64>().ok())
            .sum()
    }

    /// Blocks all traffic into `host` (nftables input drop), simulating a cut cable.
    pub fn cut(&self, host: &str) {
        self.nft(host, "add table inet cut");
        self.nft(
            host,
            "add chain inet cut in { type filter hook input priority -10 ; policy drop ; }",
        );
        self.nft(host, "add rule inet cut in iif lo accept");
    }

    /// Undoes [`Net::cut`].
    pub fn heal(&self, host: &str) {
        self.nft(host, "delete table inet cut");
    }

    /// Starts `program args…` in `host`'s namespace; stderr and stdout go to a log file.
    pub fn spawn(&self, host: &str, label: &str, program: &Path, args: &[String]) -> Proc {
        let log = PathBuf::from(format!("/tmp/{}{label}.log", self.prefix));
        let f = File::create(&log).expect("log file");
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns(host)])
            .arg(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(f.try_clone().expect("log fd"))
            .stderr(f)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", program.display()));
        Proc {
            label: label.to_string(),
            child: Some(child),
            log,
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in self.namespaces.iter().rev() {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

/// A child process (`ip netns exec` execs the program, so the pid is the program's), killed
/// on drop. Its output is in a log file, removed on drop.
#[derive(Debug)]
pub struct Proc {
    label: String,
    child: Option<Child>,
    log: PathBuf,
}

impl Proc {
    /// The log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// SIGTERM, then SIGKILL after `grace`; returns the exit status and the log.
    pub fn stop(&mut self, grace: Duration) -> (Option<ExitStatus>, String) {
        let Some(mut c) = self.child.take() else {
            return (None, self.log());
        };
        // kill(1) rather than FFI: the pid is our unreaped child, so it cannot be reused.
        let _ = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .stderr(Stdio::null())
            .status();
        let t0 = Instant::now();
        let status = loop {
            match c.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if t0.elapsed() < grace => std::thread::sleep(Duration::from_millis(20)),
                _ => {
                    let _ = c.kill();
                    break c.wait().ok();
                }
            }
        };
        (status, self.log())
    }

    /// SIGKILL at once (a crash), waiting for the process to end.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The label given at spawn.
    pub fn label(&self) -> &str {
        &self.label
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let (_, log) = self.stop(Duration::from_secs(2));
        if std::thread::panicking() {
            eprintln!("--- {} log ---\n{log}", self.label);
        }
        let _ = std::fs::remove_file(&self.log);
    }
}

/// Extracts the number before `what` in the last line starting with `prefix` (e.g. the
/// `N gaps` of `mirror: done: …`).
pub fn count_in(log: &str, prefix: &str, what: &str) -> Option<u64> {
    let line = log.lines().rev().find(|l| l.starts_with(prefix))?;
    let at = line.find(what)?;
    line[..at].split_whitespace().last()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::build_command;
    use std::path::Path;

    #[test]
    fn the_build_hint_builds_into_the_directory_searched() {
        // A plain `cargo test` searches target/debug/, which `--release` does not build.
        assert_eq!(
            build_command(Path::new("/t/debug"), "ringwire"),
            "cargo build -p ringwire --bin ringwire"
        );
        assert_eq!(
            build_command(Path::new("/t/release"), "ringwire"),
            "cargo build --release -p ringwire --bin ringwire"
        );
        assert_eq!(
            build_command(Path::new("/t/profiling"), "ringwire"),
            "cargo build --profile profiling -p ringwire --bin ringwire"
        );
    }
}
