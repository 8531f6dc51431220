//! A metadata run: its namespace (the target directory, or the objects under an s3:// prefix)
//! opened once, each worker's state carried from phase to phase, phases run one at a time (so an orchestrator can put a barrier between them, as mdtest
//! does between its phases across ranks), and the clean-up of whatever still exists.

use serde::Serialize;

use crate::error::{Error, Result};

use super::control::MetaControl;
use super::names::Shape;
use super::namespace::{LocalNamespace, Namespace};
use super::objects::ObjectNamespace;
use super::result::MetaPhaseResult;
use super::spec::{DirMode, MetaPhase, MetaSpec};
use super::worker::{self, owns_tree, PhaseCtx, WorkerPhase, WorkerState};

/// What the clean-up removed.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct CleanupReport {
    pub files_removed: u64,
    pub dirs_removed: u64,
}

pub struct MetaRun {
    spec: MetaSpec,
    shape: Shape,
    /// Where every name lives: the target directory, or the objects under an s3:// prefix.
    ns: Box<dyn Namespace>,
    /// The object namespace's endpoints (None for a directory), for the result's target record.
    server: Option<String>,
    states: Vec<WorkerState>,
    next: usize,
}

impl MetaRun {
    /// Validate the spec and open its namespace: the target directory (which must exist), or
    /// the s3:// prefix (a LIST there checks endpoint, credentials and bucket; nothing written).
    pub fn new(spec: MetaSpec) -> Result<MetaRun> {
        spec.validate()?;
        let (ns, server): (Box<dyn Namespace>, Option<String>) = if spec.is_s3() {
            let objects = ObjectNamespace::open(&spec)?;
            let server = objects.server();
            (Box::new(objects), Some(server))
        } else {
            (Box::new(LocalNamespace::open(&spec.target)?), None)
        };
        Ok(MetaRun {
            shape: Shape::of(&spec),
            states: vec![WorkerState::default(); spec.threads as usize],
            spec,
            ns,
            server,
            next: 0,
        })
    }

    /// An s3:// target's endpoint URL(s), comma-separated; None for a directory.
    pub fn server(&self) -> Option<&str> {
        self.server.as_deref()
    }

    /// Whether none of the namespace's names existed when the run was opened: for an s3://
    /// prefix, that it held no object (a run's own prefix must be new); a directory is checked
    /// by its maker.
    pub fn is_new(&self) -> bool {
        self.ns.was_new()
    }

    pub fn spec(&self) -> &MetaSpec {
        &self.spec
    }

    pub fn workers(&self) -> usize {
        self.states.len()
    }

    /// The phase `run_next` will run, or None when all ran (or the run was stopped).
    pub fn next_phase(&self) -> Option<MetaPhase> {
        self.spec.phases.get(self.next).copied()
    }

    /// Each worker's files and directories that exist now.
    pub fn states(&self) -> &[WorkerState] {
        &self.states
    }

    /// Take over what a run with the same spec in another process left (each worker's state, as
    /// `states` gives it there) and run `next` next: a process then stats, reads or removes files
    /// another one created (mdtest -N, the neighbour shift io500 uses). `next` must be one of the
    /// spec's phases after create; the states must fit the spec.
    pub fn adopt(&mut self, states: Vec<WorkerState>, next: MetaPhase) -> Result<()> {
        if states.len() != self.states.len() {
            return Err(Error::spec(format!("meta adopt: {} worker states for a run of {} workers", states.len(), self.states.len())));
        }
        let at = self.spec.phases.iter().position(|p| *p == next).ok_or_else(|| {
            Error::spec(format!("meta adopt: {} is not one of this run's phases", next.name()))
        })?;
        if matches!(next, MetaPhase::Mkdir | MetaPhase::Create) {
            return Err(Error::spec(format!("meta adopt: a run can be taken over after create, not at {}", next.name())));
        }
        let dirs = self.shape.total_dirs();
        if let Some(bad) = states.iter().find(|s| s.created > self.spec.files || s.renamed > s.created || s.removed > s.created || s.dirs > dirs) {
            return Err(Error::spec(format!("meta adopt: a worker state does not fit the spec: {bad:?}")));
        }
        self.states = states;
        self.next = at;
        Ok(())
    }

    /// Run no further phases (after an error or an interrupt).
    pub fn stop(&mut self) {
        self.next = self.spec.phases.len();
    }

    /// Run the next phase with a fresh `control` (made for `next_phase()`), blocking until every
    /// worker finished. A failed or interrupted phase ends the run: no later phase follows it.
    pub fn run_next(&mut self, control: &MetaControl) -> Result<MetaPhaseResult> {
        let phase = self.next_phase().ok_or_else(|| Error::spec("meta: every phase has run"))?;
        if control.phase != phase || control.base.progress.len() != self.states.len() {
            return Err(Error::spec(format!("meta: the control was made for {}, the next phase is {}", control.phase.name(), phase.name())));
        }
        self.next += 1;
        let MetaRun { spec, shape, ns, states, .. } = self;
        let ctx = PhaseCtx { spec, shape, ns: ns.as_ref(), phase, control };
        let (outputs, panicked) = control.base.run_workers(
            states.iter_mut(),
            |w| format!("storlab-meta{w}"),
            |w, st| {
                let (out, err) = worker::run(&ctx, w, st);
                (Some(out), err)
            },
            || {},
        );
        if panicked {
            control.fail(Error::engine(format!("meta: a worker thread panicked during {}", phase.name())));
        }
        let mut done: Vec<WorkerPhase> = outputs.into_iter().flatten().collect();
        done.sort_by_key(|w| w.id);

        let (reason, error) = control.base.stop_reason();
        let stop = (reason, error.as_ref().map(|e| e.message.clone()), error.map(|e| format!("{:?}", e.kind).to_lowercase()));
        if stop.0 != "done" {
            self.stop();
        }
        let stonewall = self.spec.stonewall.filter(|_| !self.spec.stonewall_create_only || phase == MetaPhase::Create);
        let mut result = MetaPhaseResult::merge(phase, &done, control.start(), control.base.start_unix_s(), stonewall, stop);
        if matches!(phase, MetaPhase::Mkdir | MetaPhase::Rmdir) {
            result.skipped = self.ns.no_dirs();
        }
        Ok(result)
    }

    /// Remove every file and directory of this run that still exists (not timed) and run no
    /// further phases. A parallel pass (one thread per worker) does the bulk; a sequential pass
    /// then retries whatever failed, so a clean-up after running out of file descriptors or
    /// threads still completes. Entries already gone are skipped; an entry that cannot be removed
    /// is reported with its path.
    pub fn cleanup(&mut self) -> Result<CleanupReport> {
        self.stop();
        let MetaRun { spec, shape, ns, states, .. } = self;
        let (spec, shape, ns) = (&*spec, &*shape, ns.as_ref());
        let one = |w: usize, st: &mut WorkerState| -> (u64, u64, Option<Error>) {
            let (files, e1) = worker::remove_leftover_files(spec, shape, ns, w, st);
            let (dirs, e2) = if spec.dir == DirMode::Unique && e1.is_none() {
                worker::remove_tree(spec, shape, ns, w, st)
            } else {
                (0, None)
            };
            (files, dirs, e1.or(e2))
        };
        let mut report = CleanupReport::default();
        let mut add = |(f, d, _): &(u64, u64, Option<Error>)| {
            report.files_removed += f;
            report.dirs_removed += d;
        };
        std::thread::scope(|s| {
            let handles: Vec<_> = states
                .iter_mut()
                .enumerate()
                .filter_map(|(w, st)| std::thread::Builder::new().spawn_scoped(s, move || one(w, st)).ok())
                .collect();
            // a thread that could not be spawned or panicked leaves its worker to the second pass
            handles.into_iter().filter_map(|h| h.join().ok()).for_each(|r| add(&r));
        });
        let mut first_err = None;
        for (w, st) in states.iter_mut().enumerate() {
            let r = one(w, st);
            add(&r);
            first_err = first_err.or(r.2);
        }
        if spec.dir == DirMode::Shared && owns_tree(spec, 0) && first_err.is_none() {
            let (d, e) = worker::remove_tree(spec, shape, ns, 0, &mut states[0]);
            report.dirs_removed += d;
            first_err = e;
        }
        if first_err.is_none() {
            // what the states do not know of (an object store: a PUT cut short by a failure)
            match ns.sweep(spec) {
                Ok(n) => report.files_removed += n,
                Err(e) => first_err = Some(e),
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(report),
        }
    }
}

/// The outcome of `run_all`.
#[derive(Debug, Serialize)]
pub struct MetaOutcome {
    pub phases: Vec<MetaPhaseResult>,
    /// None when `keep` was set (nothing removed).
    pub cleanup: Option<CleanupReport>,
    pub cleanup_error: Option<String>,
}

/// Run every phase of a spec, stop at the first failed one, then clean up unless `keep`.
pub fn run_all(spec: MetaSpec) -> Result<MetaOutcome> {
    let keep = spec.keep;
    let mut run = MetaRun::new(spec)?;
    let mut phases = Vec::new();
    while let Some(p) = run.next_phase() {
        let control = MetaControl::new(run.workers(), p);
        phases.push(run.run_next(&control)?);
    }
    let (cleanup, cleanup_error) = if keep {
        (None, None)
    } else {
        match run.cleanup() {
            Ok(r) => (Some(r), None),
            Err(e) => (None, Some(e.message)),
        }
    };
    Ok(MetaOutcome { phases, cleanup, cleanup_error })
}
