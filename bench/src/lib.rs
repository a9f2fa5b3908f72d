//! infergate's measuring core: everything about measuring an OpenAI-compatible inference server.
//!
//! Data flows one way: config -> workload -> load schedule -> client -> per-request records ->
//! metrics -> summary. Each step is a typed value; files appear only at the run directory.
//!
//! Without the `runtime` feature this crate is the pure data model (configs, records, metrics,
//! summaries, SSE parsing) that the decision-record tooling reads without compiling an async
//! runtime or an HTTP stack.

pub mod ab;
#[cfg(feature = "runtime")]
pub mod accept;
pub mod artifact;
#[cfg(feature = "runtime")]
pub mod client;
pub mod compare;
pub mod config;
pub mod cost;
pub mod engine_series;
pub mod envkey;
pub mod fdlimit;
pub mod floor;
pub mod foreign;
pub mod hash;
pub mod history;
pub mod hostnoise;
pub mod import;
pub mod imported;
#[cfg(feature = "runtime")]
pub mod known_answer;
pub mod lengths;
pub mod merge;
pub mod metrics;
pub mod openai;
pub mod outcome;
pub mod promtext;
pub mod record;
pub mod redact;
pub mod refresh;
pub mod rundir;
#[cfg(feature = "runtime")]
pub mod runner;
pub mod schedule;
#[cfg(feature = "runtime")]
pub mod scrape;
pub mod selftest;
pub mod server_metrics;
pub mod session;
pub mod shard;
pub mod sim;
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

pub use outcome::Outcome;
pub use record::RequestRecord;
pub use summary::{BLANK, Summary, TOOL_NAME, TOOL_VERSION};
