//! Shared helpers for ringwire's cross-crate tests.
