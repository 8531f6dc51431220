//! Cancelling a long step between its chunks (laying a plan's files out, a multipart upload): the
//! one question such a step asks, in a module of its own below `plan` and `remote`, which ask it.

use std::sync::atomic::{AtomicBool, Ordering};

/// What a long step that can be stopped (laying a plan's files out, a multipart upload) asks
/// between its chunks: whether to stop now. A flag another thread sets is one; the Python
/// bindings pass a check that runs Python's signal handlers on the calling thread itself, so a
/// plan builds on the thread that asked for it, with no second thread to hand over to (a
/// hand-over costs a scheduling round where ranks outnumber the cores).
pub trait Cancel {
    fn requested(&self) -> bool;
}

impl Cancel for AtomicBool {
    fn requested(&self) -> bool {
        self.load(Ordering::Relaxed)
    }
}
