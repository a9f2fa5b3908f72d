//! `cargo xtask bench ab [BASE_REV]`: the governed engine configuration of a base revision (the
//! baseline) and of the working tree (the candidate) measured side by side in one job on this
//! machine, and each gated metric decided on the paired difference against its regression
//! budget ([`infergate_model::ab`]).
//!
//! - [`args`]: the flags.
//! - [`base`]: the base revision and its governed config, read with git2.
//! - [`arms`] (`infergate_policy::ab::arms`): what each arm runs: the working tree's config, `--set` for both and `--candidate-set` for the candidate (engine-config keys make a
//!   variant of the candidate's config, the rest are bench settings), the budgets from the live
//!   records.
//! - [`measure`]: *(runtime)* the trials: each an ordinary run directory, each arm in its own
//!   engine (an in-process simulator per trial, or a llama.cpp / vLLM process per arm), caches
//!   reset between trials, `ab.json` rewritten after every trial and look.
//! - [`job`]: *(runtime)* the whole command, flags to exit code.
//! - [`report`] (`infergate_policy::ab::report`): the console table and GitHub annotations.
//!
//! Exit codes are the gate's: 0 pass, 1 fail, 3 inconclusive, 130 interrupted.

pub mod args;
pub mod base;
#[cfg(feature = "runtime")]
pub mod job;
#[cfg(feature = "runtime")]
pub mod measure;

pub use infergate_policy::ab::{arms, report};

pub use args::AbArgs;
#[cfg(feature = "runtime")]
pub use job::run;
