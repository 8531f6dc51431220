//! `storlab._core`: thin PyO3 bindings over storlab-core. Nothing here measures anything; it moves
//! JSON specs in and JSON results out, releases the GIL around every long call, and maps core
//! errors to one Python exception carrying (kind, message).

use std::sync::{Arc, Mutex};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

mod meta;

use storlab_core::distribution::RandomDistribution;
use storlab_core::histogram;
use storlab_core::{run_phase, Control, Error, PhaseOutcome, PhaseSpec, Plan};

create_exception!(_core, CoreError, PyException, "An engine error: args are (kind, message).");

fn to_py(e: Error) -> PyErr {
    CoreError::new_err((format!("{:?}", e.kind).to_lowercase(), e.message))
}

/// A phase running on its own thread, which says on a channel when it has ended, so waiting for
/// it needs no polling.
pub(crate) struct Background<T> {
    handle: JoinHandle<T>,
    ended: Receiver<()>,
}

/// Start `work` on a named thread.
pub(crate) fn spawn_background<T: Send + 'static>(name: &str, work: impl FnOnce() -> T + Send + 'static)
                                                  -> PyResult<Background<T>> {
    let (tx, ended) = channel();
    let handle = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let value = work();
            let _ = tx.send(()); // the waiter may have gone; nothing to do then
            value
        })
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start the {name} thread: {e}")))?;
    Ok(Background { handle, ended })
}

/// Where a background thread stands after `join_within`.
pub(crate) enum Joined<T> {
    NotStarted,
    Running,
    Done(T),
}

/// Wait up to `timeout_s` seconds, with the GIL released, for the thread in `slot` to end; join it
/// when it has. Python gets control back at the timeout (for progress lines and Ctrl-C).
pub(crate) fn join_within<T: Send>(py: Python<'_>, slot: &Mutex<Option<Background<T>>>, timeout_s: f64,
                                   what: &str) -> PyResult<Joined<T>> {
    let mut guard = slot.lock().unwrap();
    let Some(bg) = guard.take() else {
        return Ok(Joined::NotStarted);
    };
    let timeout = Duration::from_secs_f64(timeout_s.max(0.0));
    // The receiver is not Sync: move it into the GIL-free section and back out.
    let (ended, bg) = py.detach(move || {
        let ended = !matches!(bg.ended.recv_timeout(timeout), Err(RecvTimeoutError::Timeout));
        (ended, bg)
    });
    if !ended {
        *guard = Some(bg);
        return Ok(Joined::Running);
    }
    let value = bg.handle.join().map_err(|_| PyRuntimeError::new_err(format!("{what} thread panicked")))?;
    Ok(Joined::Done(value))
}

/// One phase: built (targets opened, sized, laid out) on construction, run on `start`.
#[pyclass(module = "storlab._core")]
struct PhaseRun {
    plan: Arc<Plan>,
    control: Arc<Control>,
    thread: Mutex<Option<Background<PhaseOutcome>>>,
    result: Mutex<Option<String>>,
    outcome: Mutex<Option<PhaseOutcome>>,
}

#[pymethods]
impl PhaseRun {
    #[new]
    fn new(py: Python<'_>, spec_json: &str) -> PyResult<PhaseRun> {
        let spec_json = spec_json.to_owned();
        let plan = py
            .detach(move || PhaseSpec::from_json(&spec_json).and_then(Plan::build))
            .map_err(to_py)?;
        let control = Arc::new(Control::for_plan(&plan));
        Ok(PhaseRun { plan: Arc::new(plan), control, thread: Mutex::new(None), result: Mutex::new(None), outcome: Mutex::new(None) })
    }

    /// What the plan found out about each target, as JSON.
    fn targets_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.plan.targets).map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }

    #[getter]
    fn workers(&self) -> usize {
        self.plan.workers.len()
    }

    /// Start the phase on a background thread.
    fn start(&self) -> PyResult<()> {
        let mut t = self.thread.lock().unwrap();
        if t.is_some() || self.result.lock().unwrap().is_some() {
            return Err(PyRuntimeError::new_err("phase already started"));
        }
        let (plan, control) = (self.plan.clone(), self.control.clone());
        *t = Some(spawn_background("storlab-phase", move || run_phase(&plan, &control))?);
        Ok(())
    }

    /// Wait up to `timeout_s` seconds (GIL released); True once the phase has ended.
    fn wait(&self, py: Python<'_>, timeout_s: f64) -> PyResult<bool> {
        match join_within(py, &self.thread, timeout_s, "phase")? {
            Joined::NotStarted => Ok(self.result.lock().unwrap().is_some()),
            Joined::Running => Ok(false),
            Joined::Done(outcome) => {
                let json = serde_json::to_string(&outcome.result).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
                *self.result.lock().unwrap() = Some(json);
                *self.outcome.lock().unwrap() = Some(outcome);
                Ok(true)
            }
        }
    }

    /// Ask the workers to stop (Ctrl-C); the result will say complete=false, interrupted.
    fn interrupt(&self) {
        self.control.interrupt();
    }

    /// (bytes done, ops done, seconds since start, workers finished) — including the ramp.
    fn progress(&self) -> (u64, u64, f64, usize) {
        let (b, o) = self.control.progress_totals();
        let done = self.control.progress.iter().filter(|p| p.done.load(std::sync::atomic::Ordering::Acquire)).count();
        (b, o, self.control.elapsed_s(), done)
    }

    /// Bytes all workers moved between t0_s and t1_s seconds after the phase start (interpolated
    /// from their progress logs); for de-skew across MPI ranks. None before the phase ended.
    fn bytes_in_window(&self, t0_s: f64, t1_s: f64) -> Option<f64> {
        self.outcome.lock().unwrap().as_ref().map(|o| o.bytes_in_window(t0_s, t1_s))
    }

    /// Stalled requests found so far, from the `since`-th on, as a JSON list (for live reports).
    fn stalls_json(&self, since: usize) -> PyResult<String> {
        let stalls = self.control.stalls.lock().unwrap();
        serde_json::to_string(&stalls[since.min(stalls.len())..]).map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }

    /// The phase result as JSON, once `wait` returned True.
    fn result_json(&self) -> Option<String> {
        self.result.lock().unwrap().clone()
    }
}

/// Names of the job-spec fields, for the option-table consistency test.
#[pyfunction]
fn spec_field_names() -> Vec<String> {
    PhaseSpec::group_field_names()
}

/// Validate a phase spec without touching the system; raises CoreError on a bad spec.
#[pyfunction]
fn validate_spec(spec_json: &str) -> PyResult<()> {
    PhaseSpec::from_json(spec_json).map(|_| ()).map_err(to_py)
}

/// The canonical text of a `random_distribution` value; ValueError (one line naming the option and
/// its forms) when it is not one. The rule lives in storlab-core's distribution.rs.
#[pyfunction]
fn random_distribution(text: &str) -> PyResult<String> {
    text.parse::<RandomDistribution>().map(|d| d.to_string()).map_err(PyValueError::new_err)
}

#[pyfunction]
fn hist_index(v: u64) -> usize {
    histogram::index(v)
}

#[pyfunction]
fn hist_bounds(i: usize) -> (u64, u64) {
    histogram::bounds(i)
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("CoreError", m.py().get_type::<CoreError>())?;
    m.add("HIST_SCHEME", histogram::SCHEME)?;
    m.add("HIST_BUCKETS", histogram::BUCKETS)?;
    m.add("MAX_DURATION_S", storlab_core::spec::MAX_DURATION_S)?;
    m.add("MAX_BYTES", storlab_core::spec::MAX_BYTES)?;
    m.add_class::<PhaseRun>()?;
    m.add_function(wrap_pyfunction!(spec_field_names, m)?)?;
    m.add_function(wrap_pyfunction!(validate_spec, m)?)?;
    m.add_function(wrap_pyfunction!(random_distribution, m)?)?;
    m.add_function(wrap_pyfunction!(hist_index, m)?)?;
    m.add_function(wrap_pyfunction!(hist_bounds, m)?)?;
    meta::register(m)?;
    Ok(())
}
