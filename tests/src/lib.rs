//! Shared helpers for ringwire's cross-crate tests.
#![deny(missing_docs)]

pub mod records;
pub mod shm;
pub mod sim;
