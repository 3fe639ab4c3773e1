//! Replication drivers over real sockets: `serve` on the source host, `mirror` everywhere
//! else, and the one-machine `demo` (spec §16–§26). The protocol lives in the core's sans-IO
//! state machines ([`ringwire_core::replicate`]); this module only moves bytes between them,
//! the sockets, the clock and the ring files.
//!
//! | file | what |
//! |---|---|
//! | `serve.rs` | TCP accept loop, one thread per session, the UDP sender thread |
//! | `session_log.rs` | serve's connected/live/ended lines, quiet for mirrors that come and go at once |
//! | `mirror.rs` | connect, handshake, TCP or UDP live mode, reconnect with resume |
//! | `sink.rs` | the mirror's ring file as a `RecordSink` (adopt or recreate, flock held) |
//! | `io.rs` | clock, address conversions, `poll`, non-blocking writes, idle waiting |
//! | `signal.rs` | SIGINT/SIGTERM/SIGHUP to an `AtomicBool` |
//! | `spin.rs` | `--spin`: bounded, yielding, adaptive polling before parking |
//! | `anticipate.rs` | default idle waiting: park until just before a steady stream's next record is due, then poll briefly |
//! | `demo.rs` | `ringwire demo`: source, serve, mirror and a latency reader in one process |
//! | `cli.rs` | clap arguments of `serve`, `mirror` and `demo` |
//! | `compat.rs` | ringfire's in-process `ReplicaServer`/`Mirror` API over these drivers |

pub mod anticipate;
pub mod cli;
pub mod compat;
pub mod demo;
mod faults;
pub mod io;
pub mod mirror;
pub mod serve;
mod session_log;
pub mod signal;
pub mod sink;
pub mod spin;

use std::fmt;
use std::path::PathBuf;

/// Why a driver could not run.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReplicaError {
    /// A ring file could not be created, opened or validated.
    Ring(crate::Error),
    /// A socket operation failed.
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// An option value is invalid.
    InvalidArgument {
        /// The option.
        option: &'static str,
        /// The value given.
        value: String,
        /// Why it is rejected.
        why: String,
    },
    /// The mirror's state machine gave up (protocol error, bad ring).
    Mirror(ringwire_core::replicate::MirrorError),
    /// The served ring's path now names a different ring (its producer restarted, or the
    /// mirror of a hub recreated it): the mapped one will never advance again.
    /// [`serve::run_following`] serves the new one.
    SourceReplaced {
        /// The ring's path.
        path: PathBuf,
    },
    /// `serve --once`: the one mirror's session ended by an error, not by the mirror going
    /// away (a protocol error, no HELLO in time, a write that timed out).
    SessionFailed {
        /// The mirror's address.
        peer: String,
        /// What ended the session.
        why: String,
    },
    /// `ringwire demo` ran, but its reader did not get every record intact, once and in
    /// order (see [`demo::DemoReport::problem`]).
    DemoFailed {
        /// What the reader found.
        what: String,
    },
}

impl ReplicaError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> ReplicaError {
        ReplicaError::Io {
            what: what.into(),
            source,
        }
    }
    pub(crate) fn arg(option: &'static str, value: impl fmt::Display, why: &str) -> ReplicaError {
        ReplicaError::InvalidArgument {
            option,
            value: value.to_string(),
            why: why.to_string(),
        }
    }
}

impl fmt::Display for ReplicaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplicaError::Ring(e) => e.fmt(f),
            ReplicaError::Io { what, source } => write!(f, "{what}: {source}"),
            ReplicaError::InvalidArgument { option, value, why } => {
                write!(f, "invalid value '{value}' for {option}: {why}")
            }
            ReplicaError::SourceReplaced { path } => write!(
                f,
                "{}: replaced by a new ring (restarted producer or recreated mirror ring)",
                crate::shown::path(path)
            ),
            ReplicaError::Mirror(e) => write!(f, "mirror: {e}"),
            ReplicaError::SessionFailed { peer, why } => {
                write!(f, "the session of mirror {peer} failed: {why}")
            }
            ReplicaError::DemoFailed { what } => write!(f, "demo: {what}"),
        }
    }
}

/// As [`Error`](crate::Error)'s: the wrapped error's text is in this one's, so `source()` is
/// that error's own source (a ring error's is its `source()`: `Ring` shows it whole).
impl std::error::Error for ReplicaError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReplicaError::Ring(e) => e.source(),
            ReplicaError::Io { source, .. } => source.source(),
            _ => None,
        }
    }
}

/// Refuses an `--iface` address no interface of this host has (a typo, another host's
/// address) at start: a mirror would otherwise fail every join and retry for ever, and
/// serve would fail with the kernel's "Cannot assign requested address". Unspecified
/// (0.0.0.0) lets the kernel choose. An address that comes later (DHCP) is refused too:
/// start after it, or under a supervisor that restarts. The kernel judges it
/// ([`multicast_if_usable`](crate::net::sockets::multicast_if_usable)), as serve and the
/// mirror meet it, not the interface list: that misses 127.0.0.2 and AnyIP ranges, which
/// the kernel takes. If it cannot be asked, the address is judged when it is used. `use_`
/// says, after the reason, what the address was for.
pub(crate) fn check_iface(iface: std::net::Ipv4Addr, use_: &str) -> Result<(), ReplicaError> {
    if iface.is_unspecified() || crate::net::sockets::multicast_if_usable(iface).unwrap_or(true) {
        return Ok(());
    }
    Err(ReplicaError::arg(
        "--iface",
        iface,
        &format!("no interface of this host has this address{use_}"),
    ))
}

/// Rate limit of one kind of log line: the first is printed, then at most one per
/// interval, with the number left out since. What is left out after the last line printed
/// is still there to say when the caller stops ([`RateLog::take_pending`]).
pub(crate) struct RateLog {
    every: std::time::Duration,
    /// When the line was last printed.
    last: Option<std::time::Instant>,
    /// Occurrences not printed since.
    skipped: u64,
    /// The text of the latest occurrence not printed, if the caller gave it ([`RateLog::hit_with`]).
    last_skipped: Option<String>,
}

impl RateLog {
    /// A limit of one line per `every`.
    pub(crate) fn new(every: std::time::Duration) -> RateLog {
        RateLog {
            every,
            last: None,
            skipped: 0,
            last_skipped: None,
        }
    }

    /// Records an occurrence: `Some(skipped since the last line printed)` if a line is due.
    pub(crate) fn hit(&mut self) -> Option<u64> {
        let now = std::time::Instant::now();
        match self.last {
            Some(t) if now.duration_since(t) < self.every => {
                self.skipped += 1;
                None
            }
            _ => {
                self.last = Some(now);
                self.last_skipped = None;
                Some(std::mem::take(&mut self.skipped))
            }
        }
    }

    /// [`RateLog::hit`], keeping `what()` (called only then) when the occurrence is not
    /// printed, for [`RateLog::take_pending`].
    pub(crate) fn hit_with(&mut self, what: impl FnOnce() -> String) -> Option<u64> {
        let due = self.hit();
        if due.is_none() {
            self.last_skipped = Some(what());
        }
        due
    }

    /// The occurrences not printed since the last line, with the text of the latest (empty
    /// if it came through [`RateLog::hit`]), and forgets them: `None` if there are none. For
    /// the caller's last line, when it stops.
    pub(crate) fn take_pending(&mut self) -> Option<(u64, String)> {
        let n = std::mem::take(&mut self.skipped);
        let what = self.last_skipped.take().unwrap_or_default();
        (n > 0).then_some((n, what))
    }

    /// [`RateLog::take_pending`] as the caller's last line: `({n} more {what}; last: {text})`.
    pub(crate) fn take_pending_line(&mut self, what: &str) -> Option<String> {
        self.take_pending()
            .map(|(n, last)| format!("({n} more {what}; last: {last})"))
    }

    /// Moves the last line printed `by` into the past (tests).
    #[cfg(test)]
    pub(crate) fn age(&mut self, by: std::time::Duration) {
        self.last = self.last.and_then(|t| t.checked_sub(by));
    }
}

/// The tail of a line [`RateLog`] let through: ` ({skipped} more {what})`, how many were not
/// printed since the last one; nothing when none was left out.
pub(crate) fn more_since(skipped: u64, what: &str) -> String {
    if skipped == 0 {
        String::new()
    } else {
        format!(" ({skipped} more {what})")
    }
}

impl From<crate::Error> for ReplicaError {
    fn from(e: crate::Error) -> ReplicaError {
        ReplicaError::Ring(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// `--iface` is refused only for an address no interface of this host has, naming the
    /// flag, the address and what it was for; 0.0.0.0 is the kernel's choice.
    #[test]
    fn iface_addresses_this_host_lacks_are_refused() {
        use std::net::Ipv4Addr;
        assert!(check_iface(Ipv4Addr::UNSPECIFIED, "").is_ok());
        assert!(check_iface(Ipv4Addr::LOCALHOST, "").is_ok());
        let e = check_iface(Ipv4Addr::new(192, 0, 2, 1), " (for a test)").unwrap_err();
        assert!(
            matches!(
                e,
                ReplicaError::InvalidArgument {
                    option: "--iface",
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "invalid value '192.0.2.1' for --iface: no interface of this host has this address \
             (for a test)"
        );
    }

    /// An address no interface lists but the kernel takes as a multicast interface (all of
    /// 127/8 over a loopback that is up, an AnyIP `ip route add local` range) is not refused:
    /// serve sends and a mirror joins on it. The getifaddrs check refused 127.0.0.2.
    #[test]
    fn iface_addresses_the_kernel_takes_are_not_refused() {
        use std::net::Ipv4Addr;
        let a = Ipv4Addr::new(127, 0, 0, 2);
        // The kernel's own judgement, as serve's and the mirror's sockets meet it.
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let joined = socket2::SockRef::from(&s).join_multicast_v4(&Ipv4Addr::new(239, 1, 2, 3), &a);
        assert!(joined.is_ok(), "{joined:?}");
        assert!(check_iface(a, "").is_ok(), "{:?}", check_iface(a, ""));
    }

    /// What a [`RateLog`] left out after its last line is still there when its user stops
    /// (a mirror stopped between two reports said nothing of the failures since the last),
    /// with the text of the latest, and only once.
    #[test]
    fn a_rate_log_keeps_what_it_left_out_for_the_last_line() {
        let mut r = RateLog::new(Duration::from_secs(60));
        assert_eq!(r.take_pending(), None, "nothing yet");
        assert_eq!(
            r.hit_with(|| unreachable!("printed: no text kept")),
            Some(0)
        );
        assert_eq!(r.take_pending(), None, "the one occurrence was printed");
        for i in 1..=5 {
            assert_eq!(r.hit_with(|| format!("failure {i}")), None);
        }
        assert_eq!(r.take_pending(), Some((5, "failure 5".to_string())));
        assert_eq!(r.take_pending(), None, "taken once");
        // Left out, then printed: the line that went out carried the count.
        assert_eq!(r.hit_with(|| "failure 6".into()), None);
        r.age(Duration::from_secs(60));
        assert_eq!(r.hit_with(|| "failure 7".into()), Some(1));
        assert_eq!(r.take_pending(), None);
        // Through `hit`: counted, without a text.
        assert_eq!(r.hit(), None);
        assert_eq!(r.take_pending(), Some((1, String::new())));
    }
}
