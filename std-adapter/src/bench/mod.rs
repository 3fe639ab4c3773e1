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
    crate::sys::clock_ns(libc::CLOCK_MONOTONIC)
}
