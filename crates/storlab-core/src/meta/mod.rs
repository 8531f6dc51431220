//! The metadata benchmark (`storlab meta`, after mdtest and NERSC's METABENCH): each worker thread
//! creates N files in a directory tree of its own or one shared by all, then stats, reads,
//! renames and removes them and removes the tree, each operation its own timed phase with
//! per-operation latency histograms. The names live in a `namespace`: a local directory (`ops`)
//! or the objects under an s3:// prefix (`objects`: PUT, HEAD, GET, LIST, DELETE; no
//! directories, no rename). No Python in here.
//!
//! `spec` (plain data, validated) → `run::MetaRun` (namespace opened, per-worker state kept
//! between phases) → `worker` threads doing one operation per item (names from `names`) →
//! `result` merged per phase. The front end runs one phase at a time and calls `cleanup` unless
//! the user asked to keep the files.
//!
//! `scan` is find's directory scan (io500's find phase): names, sizes and times, no benchmark.

pub mod control;
pub mod names;
pub mod namespace;
pub mod objects;
pub mod ops;
pub mod result;
pub mod run;
pub mod scan;
pub mod spec;
pub mod worker;

pub use result::{MetaPhaseResult, MetaWorkerSummary};
pub use control::MetaControl;
pub use run::{run_all, CleanupReport, MetaOutcome, MetaRun};
pub use spec::{DirMode, MetaPhase, MetaSpec, Order};
pub use worker::WorkerState;

#[cfg(test)]
mod tests;
