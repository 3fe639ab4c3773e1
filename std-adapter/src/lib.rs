//! ringwire: rings in `/dev/shm` files, waiting strategies, serve/mirror drivers and the
//! `ringwire` command-line tool, around the `no_std` core in `ringwire-core`.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub use ringwire_core as core;

pub mod bench;
pub mod net;
pub mod queue;
