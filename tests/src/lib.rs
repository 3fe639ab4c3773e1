//! Shared helpers for ringwire's cross-crate tests.
pub mod sim;
