//! ringwire: rings in `/dev/shm` files, waiting strategies, serve/mirror drivers and the
//! `ringwire` command-line tool, around the `no_std` core in `ringwire-core`.
//!
//! Ring files are created and attached exactly as ringfire 0.5.2 does (spec §1.2, §1.3), so
//! rings made by either project are interchangeable.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub use ringwire_core as core;

pub mod bench;
pub mod error;
pub mod file;
pub mod net;
pub mod replica;
pub mod sys;
pub mod wait;

pub use error::{Error, Result};
pub use file::{CleanupMode, CreateOptions, ReadOnlyRing, RegistryEntry, RingFile};
