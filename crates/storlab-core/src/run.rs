//! Runs one phase: starts a thread per worker, releases them together, lets the front end watch
//! progress and ask for a stop (Ctrl-C), and merges the workers' statistics into the phase result.

use std::sync::atomic::Ordering;

use serde::Serialize;

use crate::error::Error;
use crate::histogram::Histogram;
use crate::plan::{Plan, TargetInfo};
use crate::stats::{DirResult, DirStats, Histo, ProgressLog, SyncResult};
use crate::rbw::RbwResult;
use crate::spec::RbwMode;
use crate::verify::{VerifyKind, VerifyTally};
use crate::spec::GroupSpec;
use crate::worker::{run_worker, WorkerSummary};
use crate::workload::Dir;

pub use crate::control::{Control, StallEvent};

#[derive(Debug, Serialize, Clone)]
pub struct EngineInfo {
    pub name: String,
    pub setup_flags: Vec<String>,
    /// The backends' own counters summed over the workers (s3: slowdown_retries), absent when
    /// the backend keeps none.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub counters: std::collections::BTreeMap<&'static str, u64>,
}

/// How the workers of a phase add up (definitions in docs/methodology.md). Times are seconds
/// since the phase start.
#[derive(Debug, Serialize, Clone, Default)]
pub struct Aggregate {
    pub workers: usize,
    pub bytes: u64,
    pub first_start_s: f64,
    pub last_start_s: f64,
    pub first_done_s: f64,
    pub last_done_s: f64,
    /// All bytes over (last done - first start), as IOR reports.
    pub bw_bytes: f64,
    /// The window in which every worker was active: [last start, first done]; None if empty.
    pub deskew_window_s: Option<[f64; 2]>,
    pub deskew_bytes: Option<f64>,
    /// Bytes moved inside that window over its length, as Xdd reports.
    pub deskew_bw_bytes: Option<f64>,
    /// last done - first done: how long the stragglers kept going alone.
    pub straggler_s: f64,
    /// The worker with the lowest own bandwidth, and that bandwidth.
    pub slowest_worker: Option<usize>,
    pub slowest_bw_bytes: Option<f64>,
}

impl Aggregate {
    pub fn of(workers: &[WorkerSummary], logs: &[ProgressLog]) -> Aggregate {
        if workers.is_empty() {
            return Aggregate::default();
        }
        let fold = |f: fn(&WorkerSummary) -> f64, min: bool| {
            workers.iter().map(f).fold(if min { f64::INFINITY } else { f64::NEG_INFINITY }, |a, b| if min { a.min(b) } else { a.max(b) })
        };
        let first_start_s = fold(|w| w.start_s, true);
        let last_start_s = fold(|w| w.start_s, false);
        let first_done_s = fold(|w| w.end_s, true);
        let last_done_s = fold(|w| w.end_s, false);
        let bytes: u64 = workers.iter().map(|w| w.bytes()).sum();
        let span = last_done_s - first_start_s;
        let (deskew_window_s, deskew_bytes, deskew_bw_bytes) = if first_done_s > last_start_s {
            let (t0, t1) = (last_start_s * 1e9, first_done_s * 1e9);
            let b: f64 = logs.iter().map(|l| l.bytes_between(t0, t1)).sum();
            (Some([last_start_s, first_done_s]), Some(b), Some(b / (first_done_s - last_start_s)))
        } else {
            (None, None, None)
        };
        let own_bw = |w: &WorkerSummary| {
            let d = w.end_s - w.start_s;
            if d > 0.0 { w.bytes() as f64 / d } else { 0.0 }
        };
        let slowest = workers.iter().min_by(|a, b| own_bw(a).total_cmp(&own_bw(b)));
        Aggregate {
            workers: workers.len(),
            bytes,
            first_start_s,
            last_start_s,
            first_done_s,
            last_done_s,
            bw_bytes: if span > 0.0 { bytes as f64 / span } else { 0.0 },
            deskew_window_s,
            deskew_bytes,
            deskew_bw_bytes,
            straggler_s: last_done_s - first_done_s,
            slowest_worker: slowest.map(|w| w.id),
            slowest_bw_bytes: slowest.map(own_bw),
        }
    }
}

/// Verification outcome of a phase.
#[derive(Debug, Serialize, Clone)]
pub struct VerifyResult {
    pub kind: VerifyKind,
    #[serde(flatten)]
    pub tally: VerifyTally,
    /// Blocks read back and checked after the phase wrote them (included in `checked_blocks`).
    pub readback_blocks: u64,
    /// Longest worker's read-back time; outside the phase's measured window.
    pub readback_s: f64,
}

/// The data a phase's writes carried (its first writing group's): how it was made, and how many
/// writes repeated an earlier one.
#[derive(Debug, Serialize, Clone)]
pub struct DataResult {
    /// "random" (scrambled unless `scrambled` is false), "pattern" (buffer_pattern), "verify"
    /// (stamped blocks), "fill" (verify = fill).
    pub kind: &'static str,
    pub scrambled: bool,
    pub compress_percentage: u32,
    pub compress_chunk: u64,
    pub dedupe_percentage: u32,
    pub repeated_writes: u64,
}

impl DataResult {
    fn of(g: &GroupSpec, repeated_writes: u64) -> DataResult {
        let kind = match (g.verify, g.buffer_pattern.is_some()) {
            (VerifyKind::Fill, _) => "fill",
            (VerifyKind::Off, true) => "pattern",
            (VerifyKind::Off, false) => "random",
            _ => "verify",
        };
        DataResult { kind, scrambled: g.scrambles_writes(), compress_percentage: g.compress_percentage,
                     compress_chunk: g.compress_chunk, dedupe_percentage: g.dedupe_percentage, repeated_writes }
    }
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
    /// Wall-clock time of the phase start (seconds since the Unix epoch).
    pub start_unix_s: f64,
    pub aggregate: Aggregate,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read: Option<DirResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write: Option<DirResult>,
    /// Present only for phases whose patterns trim (trim, randtrim, trimwrite, a replayed trim).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trim: Option<DirResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync: Option<SyncResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify: Option<VerifyResult>,
    /// What the writes carried: absent for a phase that does not write.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<DataResult>,
    /// Requests outstanding longer than stall_after.
    pub stalls: Vec<StallEvent>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rbw: Option<RbwResult>,
    pub workers: Vec<WorkerSummary>,
    pub targets: Vec<TargetInfo>,
    pub engine: EngineInfo,
}

/// The coordinator's watch while workers run: any request outstanding longer than its group's
/// `stall_after` is recorded once (worker, target, offset, age); with `stall_abort` the phase
/// stops with an error. Returns when every worker is done: each finishing worker unparks this
/// thread (`Control::run_workers`), so a short phase does not wait out a check interval.
fn watch_for_stalls(plan: &Plan, control: &Control) {
    // Per worker and slot: the issue time already reported, so each request is reported once.
    let mut reported: Vec<Vec<u64>> = control.progress.iter().map(|p| vec![0; p.slots.len()]).collect();
    let start = control.phase_start();
    loop {
        let all_done = control.progress.iter().all(|p| p.done.load(Ordering::Acquire));
        if all_done {
            return;
        }
        std::thread::park_timeout(std::time::Duration::from_millis(20));
        if control.progress.iter().all(|p| p.done.load(Ordering::Acquire)) {
            return;
        }
        let now_ns = start.elapsed().as_nanos() as u64;
        for (w, p) in plan.workers.iter().zip(control.progress.iter()) {
            let g = plan.group(w);
            for (slot, watch) in p.slots.iter().enumerate() {
                let issued = watch.issue_ns.load(Ordering::Relaxed);
                if issued == 0 || issued == reported[w.id][slot] {
                    continue;
                }
                let age_ns = now_ns.saturating_sub(issued - 1);
                if (age_ns as f64) < g.stall_after * 1e9 {
                    continue;
                }
                reported[w.id][slot] = issued;
                let event = StallEvent {
                    worker: w.id,
                    target: plan.targets[w.target].path.clone(),
                    offset: watch.offset.load(Ordering::Relaxed),
                    age_s: age_ns as f64 / 1e9,
                    at_s: now_ns as f64 / 1e9,
                };
                if g.stall_abort {
                    control.fail(Error::io(format!(
                        "stalled I/O: a request at offset {} on {} has been outstanding for {:.1} s (stall_after {} s)",
                        event.offset, event.target, event.age_s, g.stall_after
                    )));
                }
                control.stalls.lock().unwrap_or_else(|e| e.into_inner()).push(event);
            }
        }
    }
}

/// fio's rate_min / rate_iops_min, checked per worker over its whole measured window (fio checks
/// every ratecycle instead): the first worker and direction below its floor, as one line.
fn rate_floor_missed(plan: &Plan, workers: &[WorkerSummary]) -> Option<Error> {
    for s in workers {
        let g = plan.group(&plan.workers[s.id]);
        let seconds = s.end_s - s.start_s;
        if seconds <= 0.0 {
            continue;
        }
        let done = [(s.read_bytes, s.read_ops), (s.write_bytes, s.write_ops), (s.trim_bytes, s.trim_ops)];
        for d in Dir::ALL {
            let (bytes, ops) = done[d.index()];
            if ops == 0 && !plan.group_does(plan.workers[s.id].group, d) {
                continue; // a direction this worker never does has no floor to meet
            }
            let (bw, iops) = (bytes as f64 / seconds, ops as f64 / seconds);
            let (bw_min, iops_min) = (g.rate_min[d.index()], g.rate_iops_min[d.index()]);
            let who = if g.name.is_empty() { format!("worker {}", s.id) } else { format!("{} worker {}", g.name, s.id) };
            if bw_min > 0 && bw < bw_min as f64 {
                return Some(Error::io(format!(
                    "rate_min not met: {} {:.1} MiB/s < {:.1} MiB/s ({who} on {})",
                    d.name(), bw / 1048576.0, bw_min as f64 / 1048576.0, s.target
                )));
            }
            if iops_min > 0 && iops < iops_min as f64 {
                return Some(Error::io(format!(
                    "rate_iops_min not met: {} {iops:.0} IOPS < {iops_min} IOPS ({who} on {})", d.name(), s.target
                )));
            }
        }
    }
    None
}

/// A finished phase: the result, and each worker's progress log for later window queries.
pub struct PhaseOutcome {
    pub result: PhaseResult,
    pub logs: Vec<ProgressLog>,
}

impl PhaseOutcome {
    /// Bytes all workers moved in [t0, t1] seconds after the phase start.
    pub fn bytes_in_window(&self, t0_s: f64, t1_s: f64) -> f64 {
        self.logs.iter().map(|l| l.bytes_between(t0_s * 1e9, t1_s * 1e9)).sum()
    }
}

/// Run a built plan to the end (or until stopped). Blocking; call from a thread of its own when
/// the caller wants to watch progress.
pub fn run_phase(plan: &Plan, control: &Control) -> PhaseOutcome {
    let (outcomes, panicked) = control.run_workers(
        &plan.workers,
        |i| format!("storlab-w{}", plan.workers[i].id),
        |_, w| match run_worker(plan, w, control) {
            Ok(o) => (Some(o), None),
            Err(e) => (None, Some(e)),
        },
        || watch_for_stalls(plan, control),
    );
    if panicked {
        control.fail(Error::engine("a worker thread panicked"));
    }

    let ramp_s = plan.spec.groups[0].ramp;
    let interval_s = plan.spec.groups[0].interval;
    let mut dirs: [DirStats; 3] = Default::default();
    let mut sync = Histogram::new();
    let mut workers = Vec::new();
    let mut logs = Vec::new();
    let mut verify = VerifyTally::default();
    let (mut readback_blocks, mut readback_s) = (0u64, 0f64);
    let mut repeated_writes = 0u64;
    let keep = plan.spec.groups.iter().map(|g| g.verify_report as usize).max().unwrap_or(10);
    let mut flags: Vec<String> = Vec::new();
    let mut counters = std::collections::BTreeMap::new();
    for w in outcomes.into_iter().flatten() {
        for (name, n) in &w.counters {
            *counters.entry(*name).or_insert(0) += n;
        }
        for (all, one) in dirs.iter_mut().zip(w.dirs.iter()) {
            all.merge(one);
        }
        sync.merge(&w.sync);
        for f in w.setup_flags {
            if !flags.contains(&f) {
                flags.push(f);
            }
        }
        workers.push(w.summary);
        logs.push(w.log);
        verify.merge(&w.verify, keep);
        readback_blocks += w.readback.blocks;
        repeated_writes += w.repeated_writes;
        readback_s = readback_s.max(w.readback.seconds);
    }

    let aggregate = Aggregate::of(&workers, &logs);
    // The plain window: earliest start (not before the ramp ends) to the last finish.
    let seconds = if workers.is_empty() { 0.0 } else { (aggregate.last_done_s - aggregate.first_start_s.max(ramp_s)).max(0.0) };
    if let Some(e) = rate_floor_missed(plan, &workers) {
        control.fail(e);
    }
    let (stop_reason, error) = control.stop_reason();
    let complete = stop_reason == "done";
    let does = |d: Dir| (0..plan.spec.groups.len()).any(|gi| plan.group_does(gi, d));
    let [read, write, trim] = &dirs;
    let engine_name = serde_json::to_value(plan.spec.groups[0].engine)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let result = PhaseResult {
        name: plan.spec.name.clone(),
        complete,
        stop_reason,
        error: error.as_ref().map(|e| e.message.clone()),
        error_kind: error.as_ref().map(|e| format!("{:?}", e.kind).to_lowercase()),
        seconds,
        ramp_s,
        start_unix_s: control.start_unix_s(),
        aggregate,
        read: does(Dir::Read).then(|| DirResult::from_stats(read, seconds, interval_s)),
        write: does(Dir::Write).then(|| DirResult::from_stats(write, seconds, interval_s)),
        trim: does(Dir::Trim).then(|| DirResult::from_stats(trim, seconds, interval_s)),
        rbw: plan.spec.groups.iter().find(|g| g.rbw != RbwMode::Off).map(|g| {
            let sum = |f: fn(&crate::rbw::Channel) -> u64| plan.rbw_channels.iter().map(|c| f(c)).sum::<u64>();
            RbwResult {
                mode: g.rbw,
                lag_records: if g.rbw == RbwMode::Lag { g.rbw_lag } else { 0 },
                records_written: sum(|c| c.written.load(Ordering::Relaxed)),
                records_read: sum(|c| c.read.load(Ordering::Relaxed)),
                records_skipped: sum(|c| c.skipped.load(Ordering::Relaxed)),
                duplex_bw_bytes: if seconds > 0.0 { (read.bytes + write.bytes) as f64 / seconds } else { 0.0 },
            }
        }),
        stalls: control.stalls.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        verify: plan.spec.groups.iter().find(|g| g.verify != VerifyKind::Off).map(|g| VerifyResult { kind: g.verify, tally: verify, readback_blocks, readback_s }),
        data: (0..plan.spec.groups.len()).find(|&gi| plan.group_does(gi, Dir::Write))
            .map(|gi| DataResult::of(&plan.spec.groups[gi], repeated_writes)),
        sync: (sync.count() > 0).then(|| SyncResult { ops: sync.count(), lat_ns: sync.summary(), lat_hist: Histo::of(&sync) }),
        workers,
        targets: plan.targets.clone(),
        engine: EngineInfo { name: engine_name, setup_flags: flags, counters },
    };
    PhaseOutcome { result, logs }
}
