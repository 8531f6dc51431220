//! What the coordinator, the workers and the front end share during one metadata phase: the
//! engine's `Control` (stop flag, first error, per-worker progress, start line and clock) and the
//! phase being run. A module of its own so `run` and `worker` each depend on it, not on each other.

use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::control::Control;
use crate::error::Error;

use super::spec::MetaPhase;

/// One metadata phase's shared state; the clock is `Control`'s, one per phase.
pub struct MetaControl {
    pub base: Control,
    pub phase: MetaPhase,
}

impl MetaControl {
    pub fn new(workers: usize, phase: MetaPhase) -> MetaControl {
        // no request slots: the stall monitor watches queued I/O, which a metadata phase has none of
        MetaControl { base: Control::new(&vec![0; workers]), phase }
    }

    /// The phase start; set by the coordinator before it releases the workers (Control::run_workers).
    pub fn start(&self) -> Instant {
        self.base.phase_start()
    }

    /// Seconds since the phase started (0 before).
    pub fn elapsed_s(&self) -> f64 {
        self.base.elapsed_s()
    }

    /// Ctrl-C: workers stop after their current operation.
    pub fn interrupt(&self) {
        self.base.interrupt();
    }

    /// Record the first error and stop every worker.
    pub fn fail(&self, e: Error) {
        self.base.fail(e);
    }

    /// (bytes, operations, seconds since the start, workers finished) so far.
    pub fn progress(&self) -> (u64, u64, f64, usize) {
        let (bytes, ops, _clat_ns) = self.base.progress_totals();
        let done = self.base.progress.iter().filter(|p| p.done.load(Ordering::Acquire)).count();
        (bytes, ops, self.elapsed_s(), done)
    }
}
