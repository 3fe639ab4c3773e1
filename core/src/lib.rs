#![doc = include_str!("../README.md")]
#![cfg_attr(not(any(test, loom)), no_std)]
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

#[cfg(loom)]
extern crate std;

pub mod blackboard;
pub mod broadcast;
pub mod error;
// Not under Miri: formatting holds no unsafe code or atomics for it to check, and the
// thousands of values took 200 s there per target (three targets in CI).
#[cfg(all(test, not(loom), not(miri)))]
mod error_fmt_tests;
#[cfg(all(test, not(loom), not(miri)))]
mod fmt_check;
pub mod futex;
pub mod layout;
pub mod maptable;
pub mod queue;
pub mod region;
pub mod replicate;
pub mod ring;
pub mod sync;
#[cfg(all(test, not(loom)))]
mod testutil;
pub mod wire;

pub use error::{AttachError, GeometryError, InitError};
pub use layout::{Flags, Geometry, oldest_retained};
pub use region::{Region, RegionError};
pub use ring::{Expect, RingView, SlotRead};
