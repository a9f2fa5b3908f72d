//! infergate's measuring core: everything about measuring an OpenAI-compatible inference server.
//!
//! Data flows one way: config -> workload -> load schedule -> client -> per-request records ->
//! metrics -> summary. Each step is a typed value; files appear only at the run directory.
//!
//! Without the `runtime` feature this crate is the pure data model (configs, records, metrics,
//! summaries, SSE parsing) that the decision-record tooling reads without compiling an async
//! runtime or an HTTP stack.

pub mod config;
pub mod metrics;
pub mod outcome;
pub mod record;
pub mod sim;
pub mod summary;

pub use outcome::Outcome;
pub use record::RequestRecord;
pub use summary::Summary;

/// Tool name and version recorded in every summary.
pub const TOOL_NAME: &str = "infergate";
pub const TOOL_VERSION: &str = env!("CARGO_PKG_VERSION");
