//! Python bindings of the metadata benchmark (storlab_core::meta): `MetaRun(spec_json)` runs one
//! phase at a time on a background thread, so the front end can report progress, handle Ctrl-C and
//! (under MPI) hold a barrier between phases. Same shape as `PhaseRun`: start / wait (GIL
//! released) / interrupt / progress / result_json, plus cleanup.

use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use storlab_core::meta::{self, MetaControl, MetaPhase, MetaPhaseResult, MetaSpec};
use storlab_core::Result;

use crate::{join_within, spawn_background, to_py, Background, Joined};

fn json_err(e: serde_json::Error) -> PyErr {
    PyRuntimeError::new_err(e.to_string())
}

/// A metadata run: the target directory is opened on construction; each `start` runs the next
/// phase. Nothing is removed unless `cleanup` is called.
#[pyclass(module = "storlab._core", name = "MetaRun")]
struct MetaRun {
    run: Arc<Mutex<meta::MetaRun>>,
    workers: usize,
    phases: Vec<String>,
    server: Option<String>,
    control: Mutex<Option<Arc<MetaControl>>>,
    thread: Mutex<Option<Background<Result<MetaPhaseResult>>>>,
    result: Mutex<Option<String>>,
}

impl MetaRun {
    /// The run, unless a phase is running on the background thread right now.
    fn idle(&self) -> PyResult<MutexGuard<'_, meta::MetaRun>> {
        if self.thread.lock().unwrap().is_some() {
            return Err(PyRuntimeError::new_err("a meta phase is running; wait for it first"));
        }
        Ok(self.run.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

#[pymethods]
impl MetaRun {
    #[new]
    fn new(py: Python<'_>, spec_json: &str) -> PyResult<MetaRun> {
        let spec_json = spec_json.to_owned();
        let run = py.detach(move || MetaSpec::from_json(&spec_json).and_then(meta::MetaRun::new)).map_err(to_py)?;
        Ok(MetaRun {
            workers: run.workers(),
            phases: run.spec().phases.iter().map(|p| p.name().to_string()).collect(),
            server: run.server().map(str::to_string),
            run: Arc::new(Mutex::new(run)),
            control: Mutex::new(None),
            thread: Mutex::new(None),
            result: Mutex::new(None),
        })
    }

    #[getter]
    fn workers(&self) -> usize {
        self.workers
    }

    /// Names of the phases this run does, in order.
    #[getter]
    fn phases(&self) -> Vec<String> {
        self.phases.clone()
    }

    /// An s3:// target's endpoint URL(s), comma-separated, as the workers reach them (never a
    /// credential); None for a directory.
    #[getter]
    fn server(&self) -> Option<String> {
        self.server.clone()
    }

    /// Whether none of the run's names existed when it was opened: an s3:// prefix held no
    /// object (the LIST made when the run was opened); always True for a directory, whose
    /// folder its maker checks.
    fn is_new(&self) -> PyResult<bool> {
        Ok(self.idle()?.is_new())
    }

    /// Whether a phase is running on the background thread (until `wait` has seen it end).
    #[getter]
    fn running(&self) -> bool {
        self.thread.lock().unwrap().is_some()
    }

    /// Name of the phase `start` will run; None when all ran or the run was stopped.
    #[getter]
    fn next_phase(&self) -> PyResult<Option<String>> {
        Ok(self.idle()?.next_phase().map(|p| p.name().to_string()))
    }

    /// Start the next phase on a background thread.
    fn start(&self) -> PyResult<()> {
        let mut t = self.thread.lock().unwrap();
        if t.is_some() {
            return Err(PyRuntimeError::new_err("a meta phase is already running"));
        }
        let phase = self
            .run
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .next_phase()
            .ok_or_else(|| PyRuntimeError::new_err("every meta phase has run (or the run was stopped)"))?;
        let control = Arc::new(MetaControl::new(self.workers, phase));
        *self.control.lock().unwrap() = Some(control.clone());
        *self.result.lock().unwrap() = None;
        let run = self.run.clone();
        *t = Some(spawn_background("storlab-meta", move || {
            run.lock().unwrap_or_else(|p| p.into_inner()).run_next(&control)
        })?);
        Ok(())
    }

    /// Wait up to `timeout_s` seconds (GIL released); True once the phase has ended.
    fn wait(&self, py: Python<'_>, timeout_s: f64) -> PyResult<bool> {
        match join_within(py, &self.thread, timeout_s, "meta phase")? {
            Joined::NotStarted => Ok(self.result.lock().unwrap().is_some()),
            Joined::Running => Ok(false),
            Joined::Done(outcome) => {
                let result = outcome.map_err(to_py)?;
                *self.result.lock().unwrap() = Some(serde_json::to_string(&result).map_err(json_err)?);
                Ok(true)
            }
        }
    }

    /// Ask the workers of the running phase to stop (Ctrl-C); its result says interrupted.
    fn interrupt(&self) {
        if let Some(c) = self.control.lock().unwrap().as_ref() {
            c.interrupt();
        }
    }

    /// (phase, bytes, operations, seconds since the phase start, workers finished) of the
    /// current or last phase; None before the first `start`.
    fn progress(&self) -> Option<(String, u64, u64, f64, usize)> {
        self.control.lock().unwrap().as_ref().map(|c| {
            let (bytes, ops, elapsed, done) = c.progress();
            (c.phase.name().to_string(), bytes, ops, elapsed, done)
        })
    }

    /// The last finished phase's result as JSON, once `wait` returned True.
    fn result_json(&self) -> Option<String> {
        self.result.lock().unwrap().clone()
    }

    /// What exists of each worker's files and tree, as JSON: [{dirs, created, renamed, removed}].
    fn states_json(&self) -> PyResult<String> {
        let run = self.idle()?;
        let states: Vec<serde_json::Value> = run
            .states()
            .iter()
            .map(|s| serde_json::json!({"dirs": s.dirs, "created": s.created, "renamed": s.renamed, "removed": s.removed}))
            .collect();
        serde_json::to_string(&states).map_err(json_err)
    }

    /// Take over the state another process's run with the same spec left (`states_json` as
    /// `states_json` gives it there) and make `next_phase` the phase `start` runs next (mdtest -N:
    /// one rank stats, reads or removes the files another rank created). Raises CoreError when
    /// the states do not fit the spec or the phase is not one of this run's after create.
    fn adopt(&self, states_json: &str, next_phase: &str) -> PyResult<()> {
        let values: Vec<serde_json::Value> = serde_json::from_str(states_json).map_err(json_err)?;
        let field = |v: &serde_json::Value, k: &str| v.get(k).and_then(|x| x.as_u64()).unwrap_or(0);
        let states = values
            .iter()
            .map(|v| meta::WorkerState { dirs: field(v, "dirs"), created: field(v, "created"), renamed: field(v, "renamed"), removed: field(v, "removed") })
            .collect();
        let next = MetaPhase::ALL
            .into_iter()
            .find(|p| p.name() == next_phase)
            .ok_or_else(|| PyRuntimeError::new_err(format!("meta adopt: no phase named {next_phase:?}")))?;
        self.idle()?.adopt(states, next).map_err(to_py)
    }

    /// Run no further phases.
    fn stop(&self) -> PyResult<()> {
        self.idle()?.stop();
        Ok(())
    }

    /// Remove every file and directory of this run that still exists (GIL released) and run no
    /// further phases; returns {"files_removed", "dirs_removed"} as JSON. Raises CoreError naming
    /// the first entry that could not be removed.
    fn cleanup(&self, py: Python<'_>) -> PyResult<String> {
        drop(self.idle()?);
        let run = self.run.clone();
        let report = py.detach(move || run.lock().unwrap_or_else(|p| p.into_inner()).cleanup()).map_err(to_py)?;
        serde_json::to_string(&report).map_err(json_err)
    }
}

/// Names of the meta spec's fields, for the option-table consistency test.
#[pyfunction]
fn meta_spec_field_names() -> Vec<String> {
    MetaSpec::field_names()
}

/// Every meta option's default, bounds and allowed values as JSON (meta/spec.rs), as
/// `option_rules` gives them for the I/O options.
#[pyfunction]
fn meta_option_rules() -> PyResult<String> {
    serde_json::to_string(&MetaSpec::option_rules()).map_err(json_err)
}

/// Validate a meta spec without touching the system; raises CoreError on a bad spec.
#[pyfunction]
fn validate_meta_spec(spec_json: &str) -> PyResult<()> {
    MetaSpec::from_json(spec_json).map(|_| ()).map_err(to_py)
}

/// find's scan of `dirs` (not below; meta::scan): (sub-directories, files looked at, files found,
/// errors). A file is found when its name contains `name_contains`, its size is `size` and its
/// modification time is later than `newer_than` (each None: any). The GIL is released meanwhile.
#[pyfunction]
#[pyo3(signature = (dirs, name_contains=None, size=None, newer_than=None))]
fn scan_dirs(py: Python<'_>, dirs: Vec<String>, name_contains: Option<String>, size: Option<u64>,
             newer_than: Option<f64>) -> (Vec<String>, u64, u64, u64) {
    let criteria = meta::scan::FindCriteria { name_contains, size, newer_than };
    let dirs: Vec<std::path::PathBuf> = dirs.into_iter().map(Into::into).collect();
    let t = py.detach(move || meta::scan::scan_dirs(&dirs, &criteria));
    let subdirs = t.subdirs.into_iter().map(|p| p.to_string_lossy().into_owned()).collect();
    (subdirs, t.looked, t.found, t.errors)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<MetaRun>()?;
    m.add_function(wrap_pyfunction!(scan_dirs, m)?)?;
    m.add_function(wrap_pyfunction!(meta_spec_field_names, m)?)?;
    m.add_function(wrap_pyfunction!(validate_meta_spec, m)?)?;
    m.add_function(wrap_pyfunction!(meta_option_rules, m)?)?;
    Ok(())
}
