//! Test helper: a flag set when a guard is dropped.

use std::sync::atomic::{AtomicBool, Ordering};

/// Sets the flag when dropped, however the scope ends: a failed assertion in a thread scope
/// then still tells the other threads to stop (or that no more work comes), and the test
/// fails instead of hanging.
pub(crate) struct SetOnDrop<'a>(pub(crate) &'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        // Release: what the dropping thread did before is seen by a thread that sees the flag.
        self.0.store(true, Ordering::Release);
    }
}
