//! Shared helpers for ringwire's cross-crate tests.
#![deny(missing_docs)]

pub mod netns;
pub mod records;
pub mod replica;
pub mod shm;
pub mod sim;

use std::time::{Duration, Instant};

/// Polls `f` every 5 ms until it holds; panics naming `what` once `within` has passed.
pub fn wait_until(what: &str, within: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(
            t0.elapsed() < within,
            "timed out after {within:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}
