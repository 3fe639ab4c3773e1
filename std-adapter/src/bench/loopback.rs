//! One measured replication run on this host: the demo's source → serve → mirror → reader
//! pipeline over loopback (shared with `ringwire demo`, see [`crate::replica::demo`]), open
//! loop at a fixed rate, as a [`RunRow`].
//!
//! Latency is one-way push-to-read: the producer stamps each record with the process's
//! monotonic clock (`CLOCK_MONOTONIC`) just before pushing it into the source ring, and the
//! reader on the mirror ring reads the same clock when the record is readable there. The
//! producer sleeps to each record's scheduled time, so its lateness (push time − due) is
//! recorded too, in [`RunRow::producer_lateness`].

use std::sync::atomic::AtomicBool;

use super::table::RunRow;
use crate::replica::ReplicaError;
use crate::replica::demo::{self, DemoOptions, Transport};

/// The transports, in table order.
pub const TRANSPORTS: [Transport; 3] = [Transport::Tcp, Transport::Multicast, Transport::Unicast];

/// The lower-case name of a transport.
pub fn transport_name(t: Transport) -> &'static str {
    match t {
        Transport::Tcp => "tcp",
        Transport::Multicast => "multicast",
        Transport::Unicast => "unicast",
    }
}

/// How the server, mirror and reader wait when idle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waiting {
    /// `default`: park, anticipating a steady stream's next record
    /// ([`crate::replica::anticipate`]).
    Default,
    /// `spin`: poll (bounded) before parking (`--spin`).
    Spin,
    /// `no-anticipate`: park until woken (`--no-anticipate`).
    Parked,
}

impl Waiting {
    /// The configuration's name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Waiting::Default => "default",
            Waiting::Spin => "spin",
            Waiting::Parked => "no-anticipate",
        }
    }

    /// The configuration called `name`.
    pub fn from_name(name: &str) -> Option<Waiting> {
        [Waiting::Default, Waiting::Spin, Waiting::Parked]
            .into_iter()
            .find(|w| w.name() == name)
    }
}

/// Runs the pipeline for `seconds` at `rate` records per second, the server, mirror and
/// reader waiting as `waiting` says. `stop` ends the run early.
pub fn measure(
    transport: Transport,
    rate: u64,
    seconds: u64,
    waiting: Waiting,
    stop: &AtomicBool,
) -> Result<RunRow, ReplicaError> {
    let opts = DemoOptions {
        transport,
        seconds,
        rate,
        spin: waiting == Waiting::Spin,
        anticipate: waiting == Waiting::Default,
        live: false,
    };
    let r = demo::run(&opts, stop)?;
    Ok(RunRow {
        implementation: "ringwire".into(),
        transport: transport_name(transport).into(),
        config: waiting.name().into(),
        rate,
        seconds,
        achieved_rate: r.published as f64 / r.publish_time.as_secs_f64().max(1e-9),
        stream: r.stream,
        corrupt: r.corrupt,
        latency: r.latency,
        producer_lateness: Some(r.producer_lateness),
    })
}
