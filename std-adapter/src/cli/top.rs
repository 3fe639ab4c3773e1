//! `ringwire top <PATH> [--interval-ms N] [--iterations N]` (spec §26).

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use ringwire_core::layout::oldest_retained;
use ringwire_core::queue::QueueKind;

use super::out_err;
use super::stat::queue_kind;
use crate::error::Result;
use crate::file::ReadOnlyRing;
use crate::queue::ReadOnlyQueue;
use crate::sys::pid_alive;

/// Runs `frame` every `interval_ms` (at once the first time) until `iterations`, each time
/// on a cleared screen under a title line. `frame` gets the seconds since the previous one.
fn refresh(
    path: &Path,
    interval_ms: u64,
    iterations: Option<u64>,
    out: &mut dyn Write,
    mut frame: impl FnMut(&mut dyn Write, f64) -> std::io::Result<()>,
) -> Result<()> {
    let oe = out_err(path);
    let interval = Duration::from_millis(interval_ms);
    let mut prev = Instant::now();
    let mut n = 0u64;
    loop {
        if iterations.is_some_and(|max| n >= max) {
            return Ok(());
        }
        if n > 0 {
            std::thread::sleep(interval);
        }
        n += 1;
        let now = Instant::now();
        let dt = now.duration_since(prev).as_secs_f64().max(1e-9);
        prev = now;
        // Clear the screen and home the cursor.
        write!(out, "\x1b[2J\x1b[H").map_err(&oe)?;
        writeln!(
            out,
            "ringwire top {}  (refresh {interval_ms} ms)",
            path.display()
        )
        .map_err(&oe)?;
        frame(out, dt).map_err(&oe)?;
        out.flush().map_err(&oe)?;
    }
}

pub(super) fn run(
    path: &Path,
    interval_ms: u64,
    iterations: Option<u64>,
    out: &mut dyn Write,
) -> Result<()> {
    if let Some(kind) = queue_kind(path)? {
        return run_queue(path, kind, interval_ms, iterations, out);
    }
    let ring = ReadOnlyRing::open(path)?;
    let g = *ring.geometry();
    let mut prev = ring.write_seq();
    refresh(path, interval_ms, iterations, out, |out, dt| {
        let w = ring.write_seq();
        let rate = w.saturating_sub(prev) as f64 / dt;
        let mbps = rate * f64::from(g.element_size) / 1e6;
        prev = w;
        let window = if w == 0 {
            "empty".to_string()
        } else {
            format!("[{}, {w}]", oldest_retained(w, g.capacity))
        };
        let (sleeping, _) = ring.futex_state();
        writeln!(
            out,
            "write_seq {w}  msg/s {rate:.0}  MB/s {mbps:.2}  window {window}  sleeping {sleeping}"
        )?;
        for i in 0..g.registry_count {
            if let Some(e) = ring.registry_entry(i).filter(|e| e.is_live()) {
                let lag = if w >= e.cursor { w - e.cursor + 1 } else { 0 };
                writeln!(
                    out,
                    "  reader {i} pid {} ({}) {} cursor {} lag {lag}",
                    e.pid,
                    if pid_alive(e.pid) { "alive" } else { "dead" },
                    e.name_str(),
                    e.cursor
                )?;
            }
        }
        Ok(())
    })
}

/// `top` of a ringwire queue: items in and out per second, items queued, sleepers.
fn run_queue(
    path: &Path,
    kind: QueueKind,
    interval_ms: u64,
    iterations: Option<u64>,
    out: &mut dyn Write,
) -> Result<()> {
    let q = ReadOnlyQueue::open(path, kind)?;
    let s = q.snapshot();
    let cap = s.geometry.capacity;
    let mut prev = (s.enqueue, s.dequeue);
    refresh(path, interval_ms, iterations, out, |out, dt| {
        let s = q.snapshot();
        let rate_in = s.enqueue.saturating_sub(prev.0) as f64 / dt;
        let rate_out = s.dequeue.saturating_sub(prev.1) as f64 / dt;
        prev = (s.enqueue, s.dequeue);
        writeln!(
            out,
            "{} queue  in/s {rate_in:.0}  out/s {rate_out:.0}  queued {}/{cap}  sleeping consumers {} producers {}",
            kind.name(),
            s.enqueue.saturating_sub(s.dequeue),
            s.data_waiters,
            s.space_waiters
        )?;
        if let Some(pos) = s.claimed_unpublished {
            writeln!(
                out,
                "  position {pos} claimed, not published (a push in flight, or a producer that died mid-push)"
            )?;
        }
        Ok(())
    })
}
