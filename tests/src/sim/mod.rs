//! A deterministic network simulator for the sans-IO replication state machines: simulated
//! time, a seeded RNG, one source ring served to several mirrors over simulated TCP and UDP
//! links with loss, duplication, reordering, delay and partitions.

pub mod link;
pub mod ring;
pub mod rng;
pub mod world;

pub use link::Impair;
pub use rng::Rng;
pub use world::{MirrorReport, MirrorSpec, Mode, Report, Scenario, run};
