//! Thresholds: `measured <comparator> limit` rules, from their proposal to the gate's verdict.
//!
//! - [`rule`]: [`Comparator`] and [`Action`], the words of a threshold;
//! - [`units`]: limits in the registry unit of their metric (and the `%` / `s` aliases);
//! - [`file`](mod@file): `thresholds/gate.toml`, the model ([`Threshold`], [`Thresholds`]), its reader and
//!   writer;
//! - [`load`](mod@load): the load a threshold is bound to ("holds the SLO at concurrency 24", from
//!   a capacity search), decided only on runs measured at that load;
//! - [`propose`]: limits proposed from measured values with a headroom (`adr new`);
//! - [`evaluate`](mod@evaluate): a run or trial set against thresholds, decided from estimates
//!   with intervals ([`GateReport`], [`Verdict`]: pass, fail, inconclusive);
//! - [`render`]: the gate report as a table and as GitHub annotations;
//! - [`runs`]: the gate over several runs (a sweep's stages, a comparison's strategies);
//! - [`report_file`]: the gate's verdicts as JSON (`gate --json`, `gate.json`);
//! - [`rollback`]: rollback conditions (metric, side, limit, window, action) and their grammar;
//! - [`series`]: a condition over an engine's own Prometheus series: PromQL, and the same value
//!   from two scrapes.
//!
//! This module depends on the bench crate's data model and on `crate::text` / `crate::exit`
//! only: the records (`crate::adr`) and the commands (`gate`, `bench --gate`) depend on it, never
//! the other way. It builds without the `runtime` feature.

pub mod evaluate;
pub mod file;
pub mod load;
pub mod propose;
pub mod render;
pub mod report_file;
pub mod rollback;
pub mod rule;
pub mod runs;
pub mod series;
pub mod units;

pub use evaluate::{Check, CheckOutcome, Effect, GateOptions, GateReport, Verdict, evaluate};
pub use file::{Budget, FORMAT_VERSION, GATE_FILE, Threshold, Thresholds};
pub use render::{budgets_note, print_report, render_github, render_report, render_table};
pub use rule::{Action, Comparator};
pub use runs::GateVerdicts;
