//! infergate's data model: what a measurement is, with no network and no async runtime.
//!
//! Configs (schema, resolution, validation), workloads and load schedules, per-request records,
//! metrics and their registry, run summaries and every other file a run writes (each one typed
//! artifact), statistics (estimates, sequential A/B tests, change points), the history, and the
//! scheduler's decision log. The decision-record tooling (`adr check`, `adr thresholds`, `gate`)
//! builds on this crate alone; the client and runner (`infergate-bench`) and the engine simulator
//! (`infergate-sim`) build on it.

pub mod ab;
pub mod artifact;
pub mod capacity;
pub mod compare;
pub mod config;
pub mod cost;
pub mod engine_kind;
pub mod engine_series;
pub mod envkey;
pub mod fileio;
pub mod floor;
pub mod foreign;
pub mod hash;
pub mod history;
pub mod hostnoise;
pub mod import;
pub mod imported;
pub mod lengths;
pub mod merge;
pub mod metric;
pub mod metrics;
pub mod openai;
pub mod outcome;
pub mod params;
pub mod promtext;
pub mod record;
pub mod redact;
pub mod refresh;
pub mod rundir;
pub mod schedule;
pub mod scheduler;
pub mod selftest;
pub mod served;
pub mod server_metrics;
pub mod session;
pub mod shard;
pub mod sources;
pub mod sse;
pub mod stats;
pub mod steady;
pub mod strategy_compare;
pub mod summary;
pub mod sweep;
pub mod trace;
pub mod trials;
pub mod wire;
pub mod workload;

pub use engine_kind::EngineKind;
pub use outcome::Outcome;
pub use record::RequestRecord;
pub use summary::{BLANK, Summary, TOOL_NAME, TOOL_VERSION};
