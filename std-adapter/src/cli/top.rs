//! `ringwire top <PATH> [--interval-ms N] [--iterations N]` (spec §26).

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use ringwire_core::layout::oldest_retained;

use super::out_err;
use crate::error::Result;
use crate::file::ReadOnlyRing;
use crate::sys::pid_alive;

pub(super) fn run(
    path: &Path,
    interval_ms: u64,
    iterations: Option<u64>,
    out: &mut dyn Write,
) -> Result<()> {
    let ring = ReadOnlyRing::open(path)?;
    let oe = out_err(path);
    let g = *ring.geometry();
    let interval = Duration::from_millis(interval_ms);
    let mut prev = (Instant::now(), ring.write_seq());
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
        let w = ring.write_seq();
        let dt = now.duration_since(prev.0).as_secs_f64().max(1e-9);
        let rate = w.saturating_sub(prev.1) as f64 / dt;
        let mbps = rate * f64::from(g.element_size) / 1e6;
        prev = (now, w);
        let window = if w == 0 {
            "empty".to_string()
        } else {
            format!("[{}, {w}]", oldest_retained(w, g.capacity))
        };
        let (sleeping, _) = ring.futex_state();
        // Clear the screen and home the cursor.
        write!(out, "\x1b[2J\x1b[H").map_err(&oe)?;
        writeln!(
            out,
            "ringwire top {}  (refresh {interval_ms} ms)",
            path.display()
        )
        .map_err(&oe)?;
        writeln!(
            out,
            "write_seq {w}  msg/s {rate:.0}  MB/s {mbps:.2}  window {window}  sleeping {sleeping}"
        )
        .map_err(&oe)?;
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
                )
                .map_err(&oe)?;
            }
        }
        out.flush().map_err(&oe)?;
    }
}
