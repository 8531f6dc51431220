//! storlab-core: the I/O engine of storlab. No Python in here.
//!
//! Data flows one way: a JSON job spec (`spec`) is validated and built into an immutable plan
//! (`plan`: targets opened, sizes and alignment resolved, each worker's work fixed); `run` starts
//! one thread per worker (`worker`), each driving a backend (`engine`: psync, io_uring, null; nbd,
//! nfs and s3 for the network targets of `remote`) and owning its statistics (`stats`,
//! `histogram`); the phase result merges them.

pub mod blocksize;
pub(crate) mod buffer;
pub mod cancel;
pub mod control;
pub mod cpus;
pub mod distribution;
pub(crate) mod engine;
pub mod error;
pub mod group;
pub mod histogram;
pub mod iolog;
pub mod meta;
pub(crate) mod pace;
pub mod plan;
pub(crate) mod rbw;
pub mod remote;
pub(crate) mod rng;
#[cfg(test)]
pub(crate) mod scratch;
pub mod rules;
pub mod run;
pub mod spec;
pub mod stats;
pub(crate) mod verify;
pub(crate) mod worker;
pub(crate) mod workload;

pub use cancel::Cancel;
pub use error::{Error, ErrorKind, Result};
pub use plan::Plan;
pub use run::{run_phase, Control, PhaseOutcome, PhaseResult};
pub use spec::{GroupSpec, PhaseSpec};

/// Build and run one phase from its JSON spec, blocking until it ends.
pub fn run_json(spec_json: &str) -> Result<PhaseResult> {
    let plan = Plan::build(PhaseSpec::from_json(spec_json)?)?;
    let control = Control::for_plan(&plan);
    Ok(run_phase(&plan, &control).result)
}
