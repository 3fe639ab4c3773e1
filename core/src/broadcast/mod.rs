//! The single-writer broadcast ring (spec §4–§7, §9, §10).
//!
//! * [`Producer`]: the ring's one writer. Publishes records (§4.2), wakes sleepers (§11),
//!   optionally waits for registered readers (§6), and offers the raw mirror API a replication
//!   mirror writes with (§21.2).
//! * [`Consumer`]: one reader with its own cursor. Start modes (§5), tear-free reads and lap
//!   handling (§4.3), hole skipping on sparse mirror rings (§7), registration and cursor
//!   publication (§9).
//! * [`TypedConsumer`]: a consumer that hands out records as a zerocopy type.
//! * [`raw`]: record access for a replication source that does not know the record type
//!   (§20.1).
//! * [`registry`]: the reader registry and the lossless gate; [`blob`]: the blob arena.

pub mod blob;
mod consumer;
mod producer;
pub mod raw;
pub mod registry;
mod typed;

pub use consumer::{Consumer, LOOKASIDE_POLLS, StartMode};
pub use producer::{Full, NoWake, Producer, SeqExhausted, TryPushError, Wake};
pub use typed::TypedConsumer;
