//! The measurement harness behind `ringwire bench`: HDR latency summaries, open-loop load
//! with sequence tracking, the machine's physical floor, and SVG charts.

pub mod floor;
pub mod hist;
pub mod plot;
pub mod stress;

pub use hist::{Latency, Summary, fmt_ns, median_min_max};
pub use stress::{Arrival, Pacer, SeqTracker, StressReport};
