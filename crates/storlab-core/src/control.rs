//! What the coordinator, the workers and the front end of a running phase share: the stop and
//! interrupt flags, the first error, each worker's live progress, the start line and clock, and
//! the stalls found. A module of its own so that `run` (the coordinator) and `worker` each depend
//! on it, not on each other.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Condvar, Mutex, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::error::Error;
use crate::plan::Plan;
use crate::stats::WorkerProgress;

/// Shared between the coordinator, the workers and the front end.
pub struct Control {
    /// Ask workers to stop issuing (Ctrl-C or another worker's error).
    pub stop: AtomicBool,
    pub interrupted: AtomicBool,
    pub error: Mutex<Option<Error>>,
    pub progress: Vec<WorkerProgress>,
    /// Workers plus the coordinator meet here once every worker is set up (buffers, engine).
    pub ready: Barrier,
    /// The start line: set up and met, the workers wait here until the phase is released, which
    /// starts the clock. The coordinator releases it at once, unless the front end `hold`s it to
    /// release it itself (`release`): an MPI rank arms its phase before the ranks' barrier, so
    /// the barrier's end starts I/O, not thread creation and set-up.
    held: AtomicBool,
    released: Mutex<bool>,
    release_signal: Condvar,
    start: OnceLock<Instant>,
    /// The same moment on the wall clock (seconds since the Unix epoch), to line up MPI ranks.
    start_unix_s: OnceLock<f64>,
    pub finished: AtomicBool,
    /// Stalled requests seen so far, in the order found.
    pub stalls: Mutex<Vec<StallEvent>>,
}

/// A request outstanding longer than `stall_after` (reported once per request, while the run goes on).
#[derive(Debug, Serialize, Clone)]
pub struct StallEvent {
    pub worker: usize,
    pub target: String,
    pub offset: u64,
    /// Age of the request when it was found, and when that was (since the phase start).
    pub age_s: f64,
    pub at_s: f64,
}

impl Control {
    /// `slots_per_worker`: the queue depth of each worker, in worker order.
    pub fn new(slots_per_worker: &[usize]) -> Control {
        let workers = slots_per_worker.len();
        Control {
            stop: AtomicBool::new(false),
            interrupted: AtomicBool::new(false),
            error: Mutex::new(None),
            progress: slots_per_worker.iter().map(|&qd| WorkerProgress::with_slots(qd)).collect(),
            ready: Barrier::new(workers + 1),
            held: AtomicBool::new(false),
            released: Mutex::new(false),
            release_signal: Condvar::new(),
            start: OnceLock::new(),
            start_unix_s: OnceLock::new(),
            finished: AtomicBool::new(false),
            stalls: Mutex::new(Vec::new()),
        }
    }

    /// A Control for the workers of a plan.
    pub fn for_plan(plan: &Plan) -> Control {
        let qds: Vec<usize> = plan.workers.iter().map(|w| plan.group(w).qd as usize).collect();
        Control::new(&qds)
    }

    /// The front end will release the phase itself (`release`); call before `run_phase`.
    pub fn hold(&self) {
        self.held.store(true, Ordering::SeqCst);
    }

    /// Start the clock and let the workers go (once; later calls change nothing).
    pub fn release(&self) {
        let mut released = self.released.lock().unwrap_or_else(|p| p.into_inner());
        if !*released {
            self.set_start();
            *released = true;
            self.release_signal.notify_all();
        }
    }

    /// Whether the phase was released (its clock started).
    pub fn is_released(&self) -> bool {
        *self.released.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wait at the start line until the phase is released.
    pub(crate) fn wait_for_release(&self) {
        let mut released = self.released.lock().unwrap_or_else(|p| p.into_inner());
        while !*released {
            released = self.release_signal.wait(released).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Start the phase clock (monotonic and wall clock, the same moment); once per phase.
    fn set_start(&self) {
        let _ = self.start.set(Instant::now());
        let unix = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
        let _ = self.start_unix_s.set(unix);
    }

    /// The phase start on the wall clock (seconds since the Unix epoch; 0 before it started).
    pub fn start_unix_s(&self) -> f64 {
        self.start_unix_s.get().copied().unwrap_or(0.0)
    }

    pub fn phase_start(&self) -> Instant {
        *self.start.get().expect("phase start is set before workers are released")
    }

    /// Elapsed seconds since the phase started (0 before it started).
    pub fn elapsed_s(&self) -> f64 {
        self.start.get().map(|t| t.elapsed().as_secs_f64()).unwrap_or(0.0)
    }

    /// Ctrl-C: stop issuing, finish what is in flight, report a partial result.
    pub fn interrupt(&self) {
        self.interrupted.store(true, Ordering::SeqCst);
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Sum of completed bytes, operations and their completion latencies (ns) so far (including
    /// ramp).
    pub fn progress_totals(&self) -> (u64, u64, u64) {
        self.progress.iter().fold((0, 0, 0), |(b, o, l), p| {
            (b + p.bytes.load(Ordering::Relaxed), o + p.ops.load(Ordering::Relaxed), l + p.clat_ns.load(Ordering::Relaxed))
        })
    }

    pub(crate) fn fail(&self, e: Error) {
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(e);
        }
        self.stop.store(true, Ordering::SeqCst);
    }

    /// How the phase ended: ("error", the first error), ("interrupted", None) or ("done", None).
    pub(crate) fn stop_reason(&self) -> (&'static str, Option<Error>) {
        let error = self.error.lock().unwrap_or_else(|p| p.into_inner()).clone();
        match (error, self.interrupted.load(Ordering::SeqCst)) {
            (Some(e), _) => ("error", Some(e)),
            (None, true) => ("interrupted", None),
            (None, false) => ("done", None),
        }
    }

    /// One phase's threads, for the I/O engine and the metadata benchmark alike: one scoped
    /// thread per worker (named `name(i)`) runs `work(i, input)`, the coordinator starts the clock
    /// (or, when the front end holds the phase, meets the set-up workers and waits for the
    /// release), runs `coordinate` (the stall watch) and joins them.
    /// A worker's error is recorded here (which stops the others), and every worker is marked
    /// done however it ends, a panic included, so a watch loop on the progress always ends.
    /// Returns each worker's output in worker order (None when it panicked) and whether any did;
    /// `finished` is set once all are joined.
    pub(crate) fn run_workers<I: Send, T: Send>(
        &self,
        inputs: impl IntoIterator<Item = I>,
        name: impl Fn(usize) -> String,
        work: impl Fn(usize, I) -> (Option<T>, Option<Error>) + Sync,
        coordinate: impl FnOnce(),
    ) -> (Vec<Option<T>>, bool) {
        // The coordinator sleeps between its checks; each worker wakes it as it finishes, so a
        // phase ends when its last worker does, not at the coordinator's next check.
        let coordinator = std::thread::current();
        let outputs: Vec<std::thread::Result<Option<T>>> = std::thread::scope(|s| {
            let work = &work;
            let coordinator = &coordinator;
            let handles: Vec<_> = inputs
                .into_iter()
                .enumerate()
                .map(|(i, input)| {
                    std::thread::Builder::new()
                        .name(name(i))
                        .spawn_scoped(s, move || {
                            struct Done<'a>(&'a AtomicBool, &'a std::thread::Thread);
                            impl Drop for Done<'_> {
                                fn drop(&mut self) {
                                    self.0.store(true, Ordering::Release);
                                    self.1.unpark();
                                }
                            }
                            let _done = Done(&self.progress[i].done, coordinator);
                            let (out, err) = work(i, input);
                            if let Some(e) = err {
                                self.fail(e);
                            }
                            out
                        })
                        .expect("spawn a worker thread")
                })
                .collect();
            if self.held.load(Ordering::SeqCst) {
                self.ready.wait();
                self.wait_for_release();
            } else {
                self.release();
                self.ready.wait();
            }
            coordinate();
            handles.into_iter().map(|h| h.join()).collect()
        });
        let panicked = outputs.iter().any(|o| o.is_err());
        self.finished.store(true, Ordering::Release);
        (outputs.into_iter().map(|o| o.ok().flatten()).collect(), panicked)
    }
}
