//! The engine's part of a metadata phase result (docs/meta.md): operation counts and rates summed
//! over workers, latency histograms merged by bucket addition, and per-worker item counts, so a
//! stonewalled phase shows exactly what each worker finished.

use serde::Serialize;

use crate::histogram::{Histogram, LatencySummary};
use crate::stats::{Histo, SyncResult};

use super::spec::MetaPhase;
use super::worker::WorkerPhase;

/// One worker's line of a phase; times in seconds since the phase start. `read_*`/`write_*`
/// count file data (bytes, and files with data) so the shape matches `storlab run` results.
#[derive(Debug, Serialize, Clone)]
pub struct MetaWorkerSummary {
    pub id: usize,
    /// This worker's tree root.
    pub target: String,
    pub start_s: f64,
    pub end_s: f64,
    pub ops: u64,
    pub stonewalled: bool,
    pub read_bytes: u64,
    pub read_ops: u64,
    pub write_bytes: u64,
    pub write_ops: u64,
}

#[derive(Debug, Serialize, Clone)]
pub struct MetaPhaseResult {
    pub name: &'static str,
    pub complete: bool,
    /// done | interrupted | error
    pub stop_reason: &'static str,
    pub error: Option<String>,
    pub error_kind: Option<String>,
    /// Operations of all workers (files, or directories for mkdir/rmdir).
    pub ops: u64,
    /// Phase start (all workers released together) to the last worker's end.
    pub seconds: f64,
    /// ops / seconds.
    pub ops_per_s: f64,
    /// Per-operation latency (a create includes its write, fsync and close; list: per request).
    pub lat_ns: LatencySummary,
    pub lat_hist: Histo,
    /// Operations each worker finished (index = worker id).
    pub items_per_worker: Vec<u64>,
    /// Whether any worker stopped at the time limit.
    pub stonewalled: bool,
    pub stonewall_s: Option<f64>,
    /// File data written (create) or read (read), and its rate over `seconds`.
    pub bytes: u64,
    pub bw_bytes: f64,
    /// fsync of each file after its data (part of the create latency too).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_sync: Option<SyncResult>,
    /// fsync of the changed directories at the end of the phase (inside `seconds`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir_sync: Option<SyncResult>,
    /// list: the LIST requests made (`ops` counts the names they returned, `lat_ns` is per request).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// Why the phase did nothing where it has no meaning (mkdir and rmdir on an object store).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<&'static str>,
    /// Wall-clock time of the phase start (seconds since the Unix epoch), to line up MPI ranks.
    pub start_unix_s: f64,
    pub workers: Vec<MetaWorkerSummary>,
}

fn sync_result(h: &Histogram) -> Option<SyncResult> {
    (h.count() > 0).then(|| SyncResult { ops: h.count(), lat_ns: h.summary(), lat_hist: Histo::of(h) })
}

impl MetaPhaseResult {
    /// Merge the workers of a finished phase, in worker order (a failed worker's statistics
    /// cover what it finished before the error).
    pub fn merge(
        phase: MetaPhase,
        done: &[WorkerPhase],
        start: std::time::Instant,
        start_unix_s: f64,
        stonewall_s: Option<f64>,
        stop: (&'static str, Option<String>, Option<String>),
    ) -> MetaPhaseResult {
        let mut lat = Histogram::new();
        let mut file_sync = Histogram::new();
        let mut dir_sync = Histogram::new();
        let (mut ops, mut bytes) = (0u64, 0u64);
        // The phase starts when the workers leave the start barrier (the first to wake), not when
        // the coordinator started the clock before their set-up (thread start, opening the tree,
        // the visit order): mdtest likewise starts its timer after the barrier that follows set-up.
        let released = done.iter().map(|w| w.start).min().unwrap_or(start).max(start);
        let start_unix_s = start_unix_s + released.saturating_duration_since(start).as_secs_f64();
        let rel = |t: std::time::Instant| t.saturating_duration_since(released).as_secs_f64();
        let mut workers = Vec::with_capacity(done.len());
        let mut seconds = 0.0f64;
        for w in done {
            lat.merge(&w.lat);
            file_sync.merge(&w.file_sync);
            dir_sync.merge(&w.dir_sync);
            ops += w.ops;
            bytes += w.bytes;
            seconds = seconds.max(rel(w.end));
            let data_ops = if phase == MetaPhase::Create || phase == MetaPhase::Read { w.ops } else { 0 };
            let (read, write) = match phase {
                MetaPhase::Read => ((w.bytes, data_ops), (0, 0)),
                MetaPhase::Create => ((0, 0), (w.bytes, data_ops)),
                _ => ((0, 0), (0, 0)),
            };
            workers.push(MetaWorkerSummary {
                id: w.id,
                target: w.tree_root.clone(),
                start_s: rel(w.start),
                end_s: rel(w.end),
                ops: w.ops,
                stonewalled: w.stonewalled,
                read_bytes: read.0,
                read_ops: if read.0 > 0 { read.1 } else { 0 },
                write_bytes: write.0,
                write_ops: if write.0 > 0 { write.1 } else { 0 },
            });
        }
        let rate = |x: u64| if seconds > 0.0 { x as f64 / seconds } else { 0.0 };
        let (stop_reason, error, error_kind) = stop;
        MetaPhaseResult {
            name: phase.name(),
            complete: stop_reason == "done",
            stop_reason,
            error,
            error_kind,
            ops,
            seconds,
            ops_per_s: rate(ops),
            lat_ns: lat.summary(),
            lat_hist: Histo::of(&lat),
            items_per_worker: done.iter().map(|w| w.ops).collect(),
            stonewalled: done.iter().any(|w| w.stonewalled),
            stonewall_s: if phase.is_item_phase() { stonewall_s } else { None },
            bytes,
            bw_bytes: rate(bytes),
            file_sync: sync_result(&file_sync),
            dir_sync: sync_result(&dir_sync),
            requests: (phase == MetaPhase::List).then(|| done.iter().map(|w| w.requests).sum()),
            skipped: None,
            start_unix_s,
            workers,
        }
    }
}
