//! `cargo xtask tune`: a grid of engine configurations measured one by one, the Pareto front
//! of throughput (and goodput) against TTFT P99, and the winner (docs/tune.md).
//!
//! The search and the result are pure (`infergate_policy::tune`) and build without the
//! `runtime` feature, so `adr new --tune DIR` reads `tune.json` in the pull-request build: [`grid`] (axes, `[tune]` tables,
//! variants), [`model`] (`tune.json`, the fronts, the winner, the search order) and [`apply`]
//! (the winner written into the governed file). [`cmd`] runs it (engines, runs, resume).

#[cfg(feature = "runtime")]
pub mod cmd;

pub use infergate_policy::tune::{apply, grid, model};

#[cfg(feature = "runtime")]
pub use cmd::TuneCmd;
pub use model::{TUNE_FILE, TuneFile, TuneRow};
