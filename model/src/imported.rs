//! The settings of a run imported from another tool's results (`summary.config` of a run
//! `cargo xtask import` wrote, [`crate::summary::RunConfig::Imported`]): where it came from and
//! the load its tool describes. The importers are [`crate::foreign`].

use serde::{Deserialize, Serialize};

use crate::workload::WorkloadFile;

/// Where an imported run came from (`summary.config.imported`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportSource {
    /// The tool that measured the run (`vllm-bench`, `guidellm`, `aiperf`).
    pub tool: String,
    /// Its version, when the file records it.
    pub tool_version: Option<String>,
    /// The version of the file's format, when the file records it.
    pub format_version: Option<String>,
    /// The files read, as given, with the hash of their content (the results file first).
    pub files: Vec<WorkloadFile>,
    /// Where the tool's definitions differ from infergate's.
    pub definitions: Vec<String>,
}

/// The load an imported run's tool describes, in a profile's words (`load.mode`,
/// `load.concurrency`, ...), each blank when the source does not say.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportedLoad {
    /// `closed` (a fixed number of requests in flight) or `open` (a send rate).
    pub mode: Option<String>,
    pub concurrency: Option<u64>,
    /// Requests per second (open loop).
    pub rate: Option<f64>,
    /// `poisson`, `constant`, or the tool's own word.
    pub arrival: Option<String>,
    /// Requests the tool was asked to send.
    pub requests: Option<u64>,
}

/// `summary.config` of an imported run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportedConfig {
    pub imported: ImportSource,
    pub load: ImportedLoad,
}
