//! `gate --json FILE`: the gate's verdicts as a typed artifact (`gate.json`): the exit status
//! and, per gated run, the report the console table shows (every check with its threshold,
//! estimate, interval and verdict). `cargo xtask mcp`'s `gate` tool returns this document.

use serde::{Deserialize, Serialize};

use super::evaluate::GateReport;
use crate::exit::Status;

/// The gate's result: its exit status and one report per gated run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateFile {
    pub format_version: u32,
    /// The exit code's name (`success`, `policy-violated`, `inconclusive`: docs/exit-codes.md).
    pub status: String,
    pub exit_code: u8,
    /// Problems that fail the gate whatever the verdicts (an incomplete trial set).
    pub problems: Vec<String>,
    pub runs: Vec<GateRun>,
}

/// One gated run: a single run or trial set (no label), or a sweep's stage or a comparison's
/// strategy (`stage 2/3 concurrency=128`, `strategy fixed`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateRun {
    pub label: Option<String>,
    pub report: GateReport,
}

impl GateFile {
    pub fn new(status: Status, problems: Vec<String>, runs: Vec<GateRun>) -> GateFile {
        GateFile {
            format_version: <GateFile as infergate_model::artifact::Artifact>::VERSION,
            status: status.exit().name.to_string(),
            exit_code: status.code(),
            problems,
            runs,
        }
    }
}

impl infergate_model::artifact::Artifact for GateFile {
    const FILE: &'static str = "gate.json";
    const VERSION: u32 = 1;
    const WHAT: &'static str = "a gate's report";
}
