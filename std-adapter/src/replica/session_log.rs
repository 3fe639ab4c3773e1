//! serve's lines about one session: "connected", "live over …" and "ended …", quiet for
//! mirrors that come and go at once. A mirror that fails right after its handshake (a
//! multicast group it cannot join) and retries with `--reconnect-ms 0` makes thousands of
//! sessions a second; three lines each buried everything else. A session is *brief* when
//! it ends within [`BRIEF`] of its accept without having sent a record. While brief
//! sessions keep ending (the latest less than [`BRIEF`] ago), a new session's "connected"
//! and "live" lines are held back until it has lasted [`BRIEF`] or sent a record; one that
//! ends brief before that is told in a single line, rate-limited with the count of those
//! left out ([`RateLog`]), and the rest of that count at the server's end
//! ([`BriefSessions::flush`]). The first brief session of a run is told in full.

use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ringwire_core::replicate::Transport;

use super::{RateLog, more_since};

/// A session that ends within this of its accept, having sent no record, is brief.
pub(crate) const BRIEF: Duration = Duration::from_secs(1);

/// The tail of the brief sessions' line ([`more_since`]).
const LIKE_IT: &str = "brief sessions without a record since the last one logged";

/// A server's brief sessions: when the latest ended, and the rate limit of their lines.
pub(crate) struct BriefSessions {
    state: Mutex<(Option<Instant>, RateLog)>,
}

impl BriefSessions {
    /// At most one line per `every` for brief sessions whose lines were held back.
    pub(crate) fn new(every: Duration) -> BriefSessions {
        BriefSessions {
            state: Mutex::new((None, RateLog::new(every))),
        }
    }

    fn lock(&self) -> MutexGuard<'_, (Option<Instant>, RateLog)> {
        // Plain data: a panicking session thread leaves nothing half-updated that matters.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The line for the brief sessions left out since the last one told, if any: for the
    /// server's end, once its sessions are over.
    pub(crate) fn flush(&self) -> Option<String> {
        let line = self.lock().1.take_pending_line(LIKE_IT)?;
        Some(format!("serve: {line}"))
    }
}

/// The lines of one session; nothing when the server's log is off.
pub(crate) struct SessionLog<'a> {
    brief: &'a BriefSessions,
    on: bool,
    addr: SocketAddr,
    accepted: Instant,
    /// The "connected" line is held back: a brief session ended less than [`BRIEF`] ago.
    held: bool,
    /// The transport the session went live over, once it did.
    live: Option<Transport>,
}

impl<'a> SessionLog<'a> {
    /// A session accepted from `addr` now: says so, unless brief sessions are ending.
    pub(crate) fn connected(brief: &'a BriefSessions, on: bool, addr: SocketAddr) -> Self {
        let accepted = Instant::now();
        let held = on
            && brief
                .lock()
                .0
                .is_some_and(|t| accepted.duration_since(t) < BRIEF);
        if on && !held {
            diag!("serve: mirror {addr} connected");
        }
        SessionLog {
            brief,
            on,
            addr,
            accepted,
            held,
            live: None,
        }
    }

    /// The session's first reply went out: over `t` (one that asked for unicast gets
    /// multicast or TCP when all tokens are taken).
    pub(crate) fn live(&mut self, t: Transport) {
        self.live = Some(t);
        if self.on && !self.held {
            diag!("serve: mirror {} live over {t:?}", self.addr);
        }
    }

    /// Whether [`SessionLog::live`] was called: the session took a HELLO and answered it.
    pub(crate) fn went_live(&self) -> bool {
        self.live.is_some()
    }

    /// Called on each pass of the session: tells the held-back lines once the session has
    /// lasted [`BRIEF`] or sent a record (`records` so far).
    pub(crate) fn tick(&mut self, records: u64) {
        if self.held && (records > 0 || self.accepted.elapsed() >= BRIEF) {
            self.tell_held();
        }
    }

    fn tell_held(&mut self) {
        self.held = false;
        diag!(
            "serve: mirror {} connected {} ms ago (held back while brief sessions ended)",
            self.addr,
            self.accepted.elapsed().as_millis()
        );
        if let Some(t) = self.live {
            diag!("serve: mirror {} live over {t:?}", self.addr);
        }
    }

    /// The session ended by `end` over `t`, having sent `records` records, `gaps` gaps and
    /// answered `naks` NAKs.
    pub(crate) fn ended(
        mut self,
        t: Transport,
        end: &dyn std::fmt::Display,
        records: u64,
        gaps: u64,
        naks: u64,
    ) {
        if !self.on {
            return;
        }
        let lasted = self.accepted.elapsed();
        let brief = lasted < BRIEF && records == 0;
        if brief {
            let mut g = self.brief.lock();
            g.0 = Some(Instant::now());
            if self.held {
                let what = format!("{}: {end}", self.addr);
                if let Some(n) = g.1.hit_with(|| what) {
                    drop(g);
                    diag!(
                        "serve: mirror {} ({t:?}) ended {} ms after connecting, no record sent: {end}{}",
                        self.addr,
                        lasted.as_millis(),
                        more_since(n, LIKE_IT)
                    );
                }
                return;
            }
        }
        if self.held {
            self.tell_held();
        }
        diag!(
            "serve: mirror {} ({t:?}) ended: {end}; sent {records} records, {gaps} gaps, {naks} naks answered",
            self.addr
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// While brief sessions end, the next one's lines are held back, and if it ends brief
    /// too it is only counted (after one line), until the flush at the end; a session that
    /// lasts is told.
    #[test]
    fn brief_sessions_are_counted_and_flushed() {
        let b = BriefSessions::new(Duration::from_secs(60));
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let first = SessionLog::connected(&b, true, addr);
        assert!(!first.held, "nothing ended yet");
        first.ended(Transport::Tcp, &"disconnected", 0, 0, 0);
        assert_eq!(b.flush(), None, "told in full");
        // The second is held, then told in one line (the first of the rate limit).
        let second = SessionLog::connected(&b, true, addr);
        assert!(second.held);
        second.ended(Transport::Tcp, &"disconnected", 0, 0, 0);
        assert_eq!(b.flush(), None);
        for i in 0..5 {
            let s = SessionLog::connected(&b, true, addr);
            assert!(s.held);
            s.ended(Transport::Tcp, &format!("gone {i}"), 0, 0, 0);
        }
        let line = b.flush().expect("five left out");
        assert!(line.contains("(5 more brief sessions"), "{line}");
        assert!(line.contains("last: 127.0.0.1:9: gone 4"), "{line}");
        assert_eq!(b.flush(), None, "flushed once");
        // A held session that sends a record is told, and its end is not brief.
        let mut s = SessionLog::connected(&b, true, addr);
        s.live(Transport::Tcp);
        s.tick(0);
        assert!(s.held);
        s.tick(1);
        assert!(!s.held);
        s.ended(Transport::Tcp, &"disconnected", 1, 0, 0);
        assert_eq!(b.flush(), None);
        // With the log off nothing is held or counted.
        let s = SessionLog::connected(&b, false, addr);
        assert!(!s.held);
        s.ended(Transport::Tcp, &"disconnected", 0, 0, 0);
        assert_eq!(b.flush(), None);
    }
}
