//! Runs one phase: starts a thread per worker, releases them together, lets the front end watch
//! progress and ask for a stop (Ctrl-C), and merges the workers' statistics into the phase result.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex, OnceLock};
use std::time::Instant;

use serde::Serialize;

use crate::error::Error;
use crate::histogram::Histogram;
use crate::plan::{Plan, TargetInfo};
use crate::stats::{DirResult, DirStats, Histo, SyncResult, WorkerProgress};
use crate::worker::{run_worker, WorkerSummary};

/// Shared between the coordinator, the workers and the front end.
pub struct Control {
    /// Ask workers to stop issuing (Ctrl-C or another worker's error).
    pub stop: AtomicBool,
    pub interrupted: AtomicBool,
    pub error: Mutex<Option<Error>>,
    pub progress: Vec<WorkerProgress>,
    /// Workers plus the coordinator meet here before the clock starts.
    pub ready: Barrier,
    start: OnceLock<Instant>,
    pub finished: AtomicBool,
}

impl Control {
    pub fn new(workers: usize) -> Control {
        Control {
            stop: AtomicBool::new(false),
            interrupted: AtomicBool::new(false),
            error: Mutex::new(None),
            progress: (0..workers).map(|_| WorkerProgress::default()).collect(),
            ready: Barrier::new(workers + 1),
            start: OnceLock::new(),
            finished: AtomicBool::new(false),
        }
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

    /// Sum of completed bytes and operations so far (including ramp).
    pub fn progress_totals(&self) -> (u64, u64) {
        self.progress.iter().fold((0, 0), |(b, o), p| {
            (b + p.bytes.load(Ordering::Relaxed), o + p.ops.load(Ordering::Relaxed))
        })
    }

    fn fail(&self, e: Error) {
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(e);
        }
        self.stop.store(true, Ordering::SeqCst);
    }
}

#[derive(Debug, Serialize, Clone)]
pub struct EngineInfo {
    pub name: String,
    pub setup_flags: Vec<String>,
}

/// The engine's part of a phase result (docs/result-format.md); the front end adds the rest.
#[derive(Debug, Serialize, Clone)]
pub struct PhaseResult {
    pub name: String,
    pub complete: bool,
    pub stop_reason: &'static str,
    pub error: Option<String>,
    pub error_kind: Option<String>,
    /// Measured window: end of the ramp to the last worker's end.
    pub seconds: f64,
    pub ramp_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read: Option<DirResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write: Option<DirResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync: Option<SyncResult>,
    pub workers: Vec<WorkerSummary>,
    pub targets: Vec<TargetInfo>,
    pub engine: EngineInfo,
}

/// Run a built plan to the end (or until stopped). Blocking; call from a thread of its own when
/// the caller wants to watch progress.
pub fn run_phase(plan: &Plan, control: &Control) -> PhaseResult {
    let outcomes = std::thread::scope(|s| {
        let handles: Vec<_> = plan
            .workers
            .iter()
            .map(|w| {
                std::thread::Builder::new()
                    .name(format!("storlab-w{}", w.id))
                    .spawn_scoped(s, move || {
                        let r = run_worker(plan, w, control);
                        if let Err(e) = &r {
                            control.fail(e.clone());
                        }
                        control.progress[w.id].done.store(true, Ordering::Release);
                        r
                    })
                    .expect("spawn worker thread")
            })
            .collect();
        let _ = control.start.set(Instant::now());
        control.ready.wait();
        handles.into_iter().map(|h| h.join()).collect::<Vec<_>>()
    });

    let ramp_s = plan.spec.groups[0].ramp;
    let interval_s = plan.spec.groups[0].interval;
    let mut read = DirStats::default();
    let mut write = DirStats::default();
    let mut sync = Histogram::new();
    let mut workers = Vec::new();
    let mut flags: Vec<String> = Vec::new();
    for o in outcomes {
        match o {
            Ok(Ok(w)) => {
                read.merge(&w.read);
                write.merge(&w.write);
                sync.merge(&w.sync);
                for f in w.setup_flags {
                    if !flags.contains(&f) {
                        flags.push(f);
                    }
                }
                workers.push(w.summary);
            }
            Ok(Err(_)) => {} // recorded in control.error
            Err(_) => control.fail(Error::engine("a worker thread panicked")),
        }
    }
    control.finished.store(true, Ordering::Release);

    let end_s = workers.iter().map(|w| w.end_s).fold(0.0f64, f64::max);
    let seconds = (end_s - ramp_s).max(0.0);
    let error = control.error.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let interrupted = control.interrupted.load(Ordering::SeqCst);
    let (stop_reason, complete) = match (&error, interrupted) {
        (Some(_), _) => ("error", false),
        (None, true) => ("interrupted", false),
        (None, false) => ("done", true),
    };
    let does = |reads: bool| {
        plan.spec.groups.iter().any(|g| {
            let p = g.rw.read_percent(g.rwmix_read);
            if reads { p > 0 } else { p < 100 }
        })
    };
    let uring = plan.spec.groups.iter().any(|g| g.engine == crate::spec::EngineKind::IoUring);
    let engine_name = serde_json::to_value(plan.spec.groups[0].engine)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    PhaseResult {
        name: plan.spec.name.clone(),
        complete,
        stop_reason,
        error: error.as_ref().map(|e| e.message.clone()),
        error_kind: error.as_ref().map(|e| format!("{:?}", e.kind).to_lowercase()),
        seconds,
        ramp_s,
        read: does(true).then(|| DirResult::from_stats(&read, seconds, interval_s, uring)),
        write: does(false).then(|| DirResult::from_stats(&write, seconds, interval_s, uring)),
        sync: (sync.count() > 0).then(|| SyncResult { ops: sync.count(), lat_ns: sync.summary(), lat_hist: Histo::of(&sync) }),
        workers,
        targets: plan.targets.clone(),
        engine: EngineInfo { name: engine_name, setup_flags: flags },
    }
}
