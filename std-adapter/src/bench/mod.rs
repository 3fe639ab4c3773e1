//! The measurement harness behind `ringwire bench`: HDR latency summaries, open-loop load
//! with sequence tracking, the machine's physical floor, and SVG charts.

pub mod floor;
pub mod hist;
pub mod loopback;
pub mod plot;
pub mod stress;
pub mod table;

pub use hist::{Latency, Summary, fmt_ns, median_min_max, nearest_rank_tails};
pub use stress::{Arrival, Pacer, SeqTracker, StressReport};
pub use table::RunRow;

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process on the host, so a stamp
/// written by one process can be compared by another.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the pointer we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
