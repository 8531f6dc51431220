//! `storlab._core`: thin PyO3 bindings over storlab-core. Nothing here measures anything; it moves
//! JSON specs in and JSON results out, releases the GIL around every long call, and maps core
//! errors to one Python exception carrying (kind, message), kind being `ErrorKind::as_str`. Long calls wake up often enough to let
//! Python's signal handlers run: building a plan (laying out a large file) stops on a signal.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyRuntimeError, PyValueError};
use pyo3::types::{PyBool, PyFloat, PyInt, PyString};
use pyo3::prelude::*;

mod meta;
mod objects;

use storlab_core::blocksize;
use storlab_core::distribution::RandomDistribution;
use storlab_core::histogram;
use storlab_core::iolog::Replay;
use storlab_core::rules::{self, Num};
use storlab_core::spec::Rw;
use storlab_core::{run_phase, Cancel, Control, Error, ErrorKind, PhaseOutcome, PhaseSpec, Plan};

create_exception!(_core, CoreError, PyException, "An engine error: args are (kind, message).");

fn to_py(e: Error) -> PyErr {
    CoreError::new_err((e.kind.as_str(), e.message))
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

/// The cancel check of a plan built on the calling thread (`PhaseRun::new`): at most every
/// `SIGNAL_CHECK` it takes the GIL for a moment and runs Python's signal handlers, which only run
/// on the main thread; the first exception one raises stops the build and is kept to be raised.
/// Building there rather than on a thread of its own saves two hand-overs per phase, each a
/// scheduling round where MPI ranks outnumber the cores.
struct SignalCheck {
    next: Mutex<std::time::Instant>,
    raised: Mutex<Option<PyErr>>,
}

impl SignalCheck {
    fn new() -> Self {
        SignalCheck { next: Mutex::new(std::time::Instant::now() + SIGNAL_CHECK), raised: Mutex::new(None) }
    }

    fn raised(&self) -> Option<PyErr> {
        self.raised.lock().unwrap().take()
    }
}

impl Cancel for SignalCheck {
    fn requested(&self) -> bool {
        if self.raised.lock().unwrap().is_some() {
            return true;
        }
        let now = std::time::Instant::now();
        {
            let mut next = self.next.lock().unwrap();
            if now < *next {
                return false;
            }
            *next = now + SIGNAL_CHECK;
        }
        match Python::attach(|py| py.check_signals()) {
            Ok(()) => false,
            Err(signal) => {
                *self.raised.lock().unwrap() = Some(signal);
                true
            }
        }
    }
}

/// Where a background thread stands after `join_within`.
pub(crate) enum Joined<T> {
    NotStarted,
    Running,
    Done(T),
}

/// Python runs its signal handlers this often while waiting, so each signal is seen on its own
/// (two Ctrl-C 0.2 s apart are two signals, not one) and promptly.
const SIGNAL_CHECK: Duration = Duration::from_millis(50);

/// Wait up to `timeout_s` seconds, with the GIL released, for the thread in `slot` to end; join it
/// when it has. Python gets control back at the timeout (for progress lines), and every 50 ms to
/// run signal handlers: an exception one raises (Ctrl-C) is returned, the thread left running.
pub(crate) fn join_within<T: Send>(py: Python<'_>, slot: &Mutex<Option<Background<T>>>, timeout_s: f64,
                                   what: &str) -> PyResult<Joined<T>> {
    let mut guard = slot.lock().unwrap();
    let Some(mut bg) = guard.take() else {
        return Ok(Joined::NotStarted);
    };
    let deadline = std::time::Instant::now() + Duration::from_secs_f64(timeout_s.max(0.0));
    loop {
        let slice = deadline.saturating_duration_since(std::time::Instant::now()).min(SIGNAL_CHECK);
        // The receiver is not Sync: move it into the GIL-free section and back out.
        let (ended, back) = py.detach(move || {
            let ended = !matches!(bg.ended.recv_timeout(slice), Err(RecvTimeoutError::Timeout));
            (ended, bg)
        });
        bg = back;
        if ended {
            break;
        }
        if let Err(signal) = py.check_signals() {
            *guard = Some(bg);
            return Err(signal);
        }
        if std::time::Instant::now() >= deadline {
            *guard = Some(bg);
            return Ok(Joined::Running);
        }
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
    /// Build the plan on this thread with the GIL released; between layout chunks, every 50 ms,
    /// it runs Python's signal handlers (`SignalCheck`): one that raises (Ctrl-C, SIGTERM) stops
    /// the layout, the build removes the files it created, and that exception is raised here.
    #[new]
    fn new(py: Python<'_>, spec_json: &str) -> PyResult<PhaseRun> {
        let spec = PhaseSpec::from_json(spec_json).map_err(to_py)?;
        let check = SignalCheck::new();
        let built = py.detach(|| Plan::build_cancellable(spec, &check));
        // A signal seen between chunks, or one that failed a system call of the build (EINTR)
        // before the next look: the signal is what the caller hears of.
        let signal = check.raised().or_else(|| if built.is_err() { py.check_signals().err() } else { None });
        if let Some(signal) = signal {
            return Err(signal);
        }
        let plan = built.map_err(to_py)?;
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

    /// Set the phase up without starting it: its coordinator and workers are created and set up
    /// (buffers, engine) on threads of their own and wait at the start line for `start`. Under
    /// MPI a rank arms before the ranks' barrier, so the barrier's end starts I/O at once.
    fn arm(&self) -> PyResult<()> {
        let mut t = self.thread.lock().unwrap();
        if t.is_some() || self.result.lock().unwrap().is_some() {
            return Ok(());   // armed (or run) already
        }
        self.control.hold();
        let (plan, control) = (self.plan.clone(), self.control.clone());
        *t = Some(spawn_background("storlab-phase", move || run_phase(&plan, &control))?);
        Ok(())
    }

    /// Start the phase (arming it first when `arm` was not called): the clock starts now.
    fn start(&self) -> PyResult<()> {
        if self.control.is_released() {
            return Err(PyRuntimeError::new_err("phase already started"));
        }
        self.arm()?;
        self.control.release();
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

    /// (bytes done, ops done, seconds since start, workers finished, sum of the done ops'
    /// completion latencies in ns) — including the ramp.
    fn progress(&self) -> (u64, u64, f64, usize, u64) {
        let (b, o, clat_ns) = self.control.progress_totals();
        let done = self.control.progress.iter().filter(|p| p.done.load(std::sync::atomic::Ordering::Acquire)).count();
        (b, o, self.control.elapsed_s(), done, clat_ns)
    }

    /// The phase so far, for a checkpoint while it runs: seconds since the start (ramp included),
    /// and each worker's completed bytes and operations from its progress counters, by direction
    /// where its group only reads or only writes (a mixed group's split is not known mid-phase).
    fn snapshot_json(&self) -> PyResult<String> {
        let workers: Vec<serde_json::Value> = self.plan.workers.iter().zip(self.control.progress.iter()).map(|(w, p)| {
            let g = self.plan.group(w);
            let read_pct = g.rw.read_percent(g.rwmix_read);
            let (bytes, ops) = (p.bytes.load(Ordering::Relaxed), p.ops.load(Ordering::Relaxed));
            let direction = match (g.read_iolog.is_some(), g.rw, read_pct) {
                (true, _, _) | (_, Rw::Trimwrite, _) => None,
                (_, Rw::Trim | Rw::Randtrim, _) => Some("trim"),
                (_, _, 100) => Some("read"),
                (_, _, 0) => Some("write"),
                _ => None,
            };
            serde_json::json!({
                "id": w.id, "group": g.name, "target": self.plan.targets[w.target].path,
                "bytes": bytes, "ops": ops, "direction": direction,
                "done": p.done.load(Ordering::Acquire),
            })
        }).collect();
        let snapshot = serde_json::json!({
            "name": self.plan.spec.name,
            "elapsed_s": self.control.elapsed_s(),
            "ramp_s": self.plan.spec.groups[0].ramp,
            "workers": workers,
        });
        serde_json::to_string(&snapshot).map_err(|e| PyRuntimeError::new_err(e.to_string()))
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

impl Drop for PhaseRun {
    /// A phase armed but never started (an exception between `arm` and `start`): its threads
    /// are waiting at the start line; released with the stop flag set, they end at once.
    fn drop(&mut self) {
        if !self.control.is_released() {
            self.control.interrupt();
            self.control.release();
        }
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

/// Every path a phase's plan opens, as JSON `[{"path", "writes"}]`: the names the write-safety
/// gate must check (per-thread PATH.N included). The naming rule lives in storlab-core's spec.rs.
#[pyfunction]
fn opened_paths(spec_json: &str) -> PyResult<String> {
    let spec = PhaseSpec::from_json(spec_json).map_err(to_py)?;
    serde_json::to_string(&spec.opened_paths()).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// What an fio iolog (version 2 or 3) holds, as JSON `{"version", "files", "directions":
/// {"read", "write", "trim"}, "requests", "bytes"}`: the front end takes the target and the
/// pattern's direction from it. CoreError (kind "spec", one line naming file and line) when the
/// log cannot be read. The format lives in storlab-core's iolog.rs.
#[pyfunction]
fn iolog_summary(path: &str) -> PyResult<String> {
    let r = Replay::load(path).map_err(to_py)?;
    let [read, write, trim] = r.directions();
    let requests = r.entries.iter().filter(|e| matches!(e.action, storlab_core::iolog::Action::Io { .. })).count();
    let summary = serde_json::json!({
        "version": r.version, "files": r.files, "requests": requests, "bytes": r.bytes,
        "directions": {"read": read, "write": write, "trim": trim},
    });
    serde_json::to_string(&summary).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// The canonical text of a `random_distribution` value; ValueError (one line naming the option and
/// its forms) when it is not one. The rule lives in storlab-core's distribution.rs.
#[pyfunction]
fn random_distribution(text: &str) -> PyResult<String> {
    text.parse::<RandomDistribution>().map(|d| d.to_string()).map_err(PyValueError::new_err)
}

/// The canonical text of a `bssplit` value (fio's SIZE/PERCENT:... per direction); ValueError
/// (one line naming the option and its forms) when it is not one. The rule lives in blocksize.rs.
#[pyfunction]
fn bssplit(text: &str) -> PyResult<String> {
    blocksize::parse_bssplit(text).map(|l| blocksize::canonical(&l, false)).map_err(PyValueError::new_err)
}

/// The canonical text of a `bsrange` value (MIN-MAX per direction); ValueError when it is not one.
#[pyfunction]
fn bsrange(text: &str) -> PyResult<String> {
    blocksize::parse_bsrange(text).map(|l| blocksize::canonical(&l, true)).map_err(PyValueError::new_err)
}

/// The names of every error kind CoreError can carry, for the test that storlab.errors maps each.
/// The kind of network target a target string names ("nbd"), or None for a local path; and
/// whether its client library loads here (None when it does, else the one-line reason).
#[pyfunction]
fn remote_target(target: &str) -> Option<(&'static str, Option<String>)> {
    storlab_core::remote::RemoteKind::of(target).map(|k| (k.type_name(), k.client_available().err()))
}

/// Remove a network file a run made (nfs://), for a failed run's clean-up; raises CoreError.
#[pyfunction]
fn remove_remote_file(py: Python<'_>, url: &str) -> PyResult<()> {
    py.detach(|| storlab_core::remote::remove_file(url)).map_err(|m| to_py(storlab_core::Error::target(url, m)))
}

#[pyfunction]
fn error_kinds() -> Vec<&'static str> {
    ErrorKind::ALL.iter().map(|k| k.as_str()).collect()
}

/// Every engine option's default, bounds, unit and allowed values as JSON (rules.rs): the option
/// table takes them from here instead of writing them again.
#[pyfunction]
fn option_rules() -> PyResult<String> {
    serde_json::to_string(&rules::option_rules()).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// Check one value of an engine option against its rule: a number against the option's bounds,
/// a text against its allowed values. ValueError (one line naming the option and what it allows)
/// when it does not hold.
#[pyfunction]
fn check_option(name: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
    let checked = if value.is_instance_of::<PyString>() {
        rules::check_choice(name, &value.extract::<String>()?)
    } else if value.is_instance_of::<PyInt>() && !value.is_instance_of::<PyBool>() {
        // A negative or huge whole number is out of range whichever it is: compare it as a real.
        let number = match value.extract::<u64>() {
            Ok(v) => Num::Int(v),
            Err(_) => Num::Real(value.extract::<f64>().unwrap_or(f64::INFINITY)),
        };
        rules::check_number(name, number)
    } else if value.is_instance_of::<PyFloat>() {
        rules::check_number(name, Num::Real(value.extract::<f64>()?))
    } else {
        return Err(PyValueError::new_err(format!("{name}: expected a number or a text, got {}", value.repr()?)));
    };
    checked.map_err(|e| PyValueError::new_err(e.message))
}

/// Record `values_ns` in the engine's histogram; its non-empty buckets, summary and the value
/// at each quantile (0..1) as JSON, for the test that Python's stats.py computes the same.
#[pyfunction]
fn hist_record(values_ns: Vec<u64>, quantiles: Vec<f64>) -> PyResult<String> {
    let mut h = histogram::Histogram::new();
    values_ns.iter().for_each(|&v| h.record(v));
    let percentiles: Vec<u64> = quantiles.iter().map(|&q| h.percentile(q)).collect();
    let out = serde_json::json!({"buckets": h.sparse_buckets(), "summary": h.summary(), "percentiles": percentiles});
    serde_json::to_string(&out).map_err(|e| PyRuntimeError::new_err(e.to_string()))
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
    // the package's version (maturin takes it from the same Cargo.toml): storlab.__version__
    // without importlib.metadata, which costs a fifth of a command's start-up
    m.setattr("__version__", env!("CARGO_PKG_VERSION"))?; // a dunder: not in __all__
    m.add("HIST_SCHEME", histogram::SCHEME)?;
    m.add("HIST_BUCKETS", histogram::BUCKETS)?;
    m.add("MAX_DURATION_S", storlab_core::spec::MAX_DURATION_S)?;
    m.add("MAX_BYTES", storlab_core::spec::MAX_BYTES)?;
    m.add_class::<PhaseRun>()?;
    m.add_function(wrap_pyfunction!(spec_field_names, m)?)?;
    m.add_function(wrap_pyfunction!(validate_spec, m)?)?;
    m.add_function(wrap_pyfunction!(opened_paths, m)?)?;
    m.add_function(wrap_pyfunction!(random_distribution, m)?)?;
    m.add_function(wrap_pyfunction!(bssplit, m)?)?;
    m.add_function(wrap_pyfunction!(bsrange, m)?)?;
    m.add_function(wrap_pyfunction!(error_kinds, m)?)?;
    m.add_function(wrap_pyfunction!(remote_target, m)?)?;
    m.add_function(wrap_pyfunction!(remove_remote_file, m)?)?;
    m.add_function(wrap_pyfunction!(option_rules, m)?)?;
    m.add_function(wrap_pyfunction!(check_option, m)?)?;
    m.add_function(wrap_pyfunction!(hist_record, m)?)?;
    m.add_function(wrap_pyfunction!(iolog_summary, m)?)?;
    m.add_function(wrap_pyfunction!(hist_index, m)?)?;
    m.add_function(wrap_pyfunction!(hist_bounds, m)?)?;
    meta::register(m)?;
    objects::register(m)?;
    Ok(())
}
