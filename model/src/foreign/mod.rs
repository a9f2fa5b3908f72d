//! Other tools' results read into infergate's run directory (`cargo xtask import`): the JSON
//! `vllm bench serve --save-result` writes ([`vllm`]), guidellm's benchmarks report
//! ([`guidellm`]) and AIPerf's `profile_export_aiperf.json` with its per-request
//! `profile_export.jsonl` ([`aiperf`]).
//!
//! An imported summary holds every statistic the source reported, in infergate's units (seconds
//! become milliseconds by one multiplication), and nothing else: a statistic the source did not
//! report is blank (`null`; NaN inside a [`Stats`]), never estimated. Where the source defines a
//! metric otherwise than infergate does (its TTFT counted from when the request was sent, not
//! from when the schedule meant it to be; its percentile method), the summary's notes and its
//! `config.imported.definitions` say so. Per-request data, when the source holds it, becomes
//! `requests.jsonl` records, each in exactly one outcome class. A file of the wrong shape is
//! refused with its name, the field (a JSON path) and what is valid.
//!
//! These files are not [`crate::artifact::Artifact`]s: their formats and version fields are the
//! tools' own (guidellm's nested in `metadata`, AIPerf's a `"1.4"` string, none in vLLM's), so
//! each reader checks its version itself and reports errors in the artifacts' shape.

pub(crate) mod aiperf;
pub(crate) mod guidellm;
pub(crate) mod vllm;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

pub use crate::imported::{ImportSource, ImportedConfig, ImportedLoad};
use crate::metrics::{
    Goodput, LatencyMetrics, RequestCounts, Stats, Throughput, TokenCounts, Window,
};
use crate::outcome::Outcome;
use crate::record::RequestRecord;
use crate::summary::{
    Environment, RunConfig, RunStatus, SCHEMA_VERSION, ScheduleSummary, Summary, TargetInfo,
    Timing, ToolInfo, WorkloadInfo,
};
use crate::workload::{LengthBasis, WorkloadFile};

/// The formats `import` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `vllm bench serve --save-result` (with `--save-detailed`: per-request arrays).
    VllmBench,
    /// guidellm's benchmarks report (`benchmarks.json`), report schema version 2.
    Guidellm,
    /// AIPerf's `profile_export_aiperf.json` (schema 1.x), with `profile_export.jsonl` beside it.
    Aiperf,
}

impl Format {
    pub const ALL: [Format; 3] = [Format::VllmBench, Format::Guidellm, Format::Aiperf];

    /// The name on the command line and in `config.imported.tool`.
    pub fn name(self) -> &'static str {
        match self {
            Format::VllmBench => "vllm-bench",
            Format::Guidellm => "guidellm",
            Format::Aiperf => "aiperf",
        }
    }

    pub fn parse(name: &str) -> Result<Format, UnknownFormat> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == name)
            .ok_or_else(|| UnknownFormat(name.to_string()))
    }
}

/// A format name that is none of [`Format::ALL`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown format `{0}`; the formats are vllm-bench, guidellm, aiperf")]
pub struct UnknownFormat(pub String);

/// Why a file could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}:{column}: not valid JSON: {message}", path.display())]
    Syntax { path: PathBuf, line: usize, column: usize, message: String },
    /// A field of the wrong shape: the file, its line for a JSON Lines file, the field's JSON
    /// path, what is wrong.
    #[error("{}{}: not {what}: field `{field}`: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Field { path: PathBuf, line: Option<usize>, what: &'static str, field: String, message: String },
    #[error("{}: field `{field}` is {found}: infergate imports {what} of format {reads}", path.display())]
    Version { path: PathBuf, what: &'static str, field: String, found: String, reads: &'static str },
}

impl ImportError {
    fn field(path: &Path, what: &'static str, field: &str, message: impl Into<String>) -> Self {
        ImportError::Field {
            path: path.to_path_buf(),
            line: None,
            what,
            field: field.to_string(),
            message: message.into(),
        }
    }
}

/// A source file's text and its [`WorkloadFile`] (path as given, content hash).
pub(crate) fn read_source(path: &Path) -> Result<(String, WorkloadFile), ImportError> {
    let bytes = std::fs::read(path)
        .map_err(|source| ImportError::Read { path: path.to_path_buf(), source })?;
    let file = WorkloadFile::of(&path.display().to_string(), &bytes);
    let text = String::from_utf8(bytes).map_err(|e| ImportError::Syntax {
        path: path.to_path_buf(),
        line: 1,
        column: 1,
        message: format!("not UTF-8 text ({e})"),
    })?;
    Ok((text, file))
}

/// The JSON text of `path` as a `T`, every error naming the file and the field.
pub(crate) fn parse_json<T: DeserializeOwned>(
    path: &Path,
    text: &str,
    what: &'static str,
) -> Result<T, ImportError> {
    let doc: serde_json::Value = serde_json::from_str(text).map_err(|e| ImportError::Syntax {
        path: path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    serde_path_to_error::deserialize(doc).map_err(|e| {
        ImportError::field(path, what, &e.path().to_string(), e.into_inner().to_string())
    })
}

/// Milliseconds from a value in `unit` (`ns`, `us`, `ms`, `s`/`sec`): one exact-as-floats
/// conversion; None for another unit.
pub(crate) fn ms_factor(unit: &str) -> Option<(f64, bool)> {
    // (factor, divide): nanoseconds are divided by 1e6, seconds multiplied by 1000.
    match unit {
        "ms" => Some((1.0, false)),
        "ns" => Some((1e6, true)),
        "us" => Some((1e3, true)),
        "s" | "sec" | "seconds" => Some((1000.0, false)),
        _ => None,
    }
}

/// `v` in milliseconds from `unit` (see [`ms_factor`]).
pub(crate) fn to_ms(v: f64, (factor, divide): (f64, bool)) -> f64 {
    if divide { v / factor } else { v * factor }
}

/// A distribution as the source reported it: each statistic it gives, already in ms.
#[derive(Clone, Debug, Default)]
pub(crate) struct Reported {
    pub count: Option<u64>,
    pub mean: Option<f64>,
    pub stdev: Option<f64>,
    pub min: Option<f64>,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    pub p999: Option<f64>,
    pub max: Option<f64>,
}

impl Reported {
    /// The statistics, each one the source did not report NaN (written `null`); None when it
    /// reported none. A count it did not report is 0 and `missing_count` gets the metric.
    pub fn stats(&self) -> Option<Stats> {
        let all = [
            self.mean, self.stdev, self.min, self.p50, self.p90, self.p95, self.p99, self.p999,
            self.max,
        ];
        if all.iter().all(Option::is_none) {
            return None;
        }
        let v = |x: Option<f64>| x.unwrap_or(f64::NAN);
        Some(Stats {
            count: self.count.unwrap_or(0),
            mean: v(self.mean),
            stdev: v(self.stdev),
            min: v(self.min),
            p50: v(self.p50),
            p90: v(self.p90),
            p95: v(self.p95),
            p99: v(self.p99),
            p999: v(self.p999),
            max: v(self.max),
        })
    }
}

/// What a format's reader makes of its file, before it becomes a summary.
#[derive(Clone, Debug, Default)]
pub struct Imported {
    pub tool: String,
    pub tool_version: Option<String>,
    pub format_version: Option<String>,
    pub files: Vec<WorkloadFile>,
    pub definitions: Vec<String>,
    pub load: ImportedLoad,
    /// The model, endpoint kind (`chat`, `completions`), URL and streaming, when the file says.
    pub model: Option<String>,
    pub endpoint: Option<String>,
    pub url: Option<String>,
    pub stream: Option<bool>,
    /// RFC 3339 start and end, when the file has them.
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    pub interrupted: bool,
    pub requests: RequestCounts,
    pub tokens: TokenCounts,
    pub latency: LatencyMetrics,
    pub throughput: Throughput,
    pub goodput_requests_per_s: Option<f64>,
    pub duration_s: Option<f64>,
    /// The per-request records (None: the source holds none).
    pub records: Option<Vec<RequestRecord>>,
    pub notes: Vec<String>,
}

impl Imported {
    /// The run's `summary.json`: the source's values where it measured them, blank elsewhere.
    pub fn summary(&self) -> Summary {
        let hash = self.files.first().map(|f| f.hash.trim_start_matches("fnv1a:").to_string());
        let run_id = format!("imported-{}-{}", self.tool, hash.as_deref().unwrap_or("file"));
        let environment = Environment::default();
        let status = if self.interrupted {
            RunStatus::Interrupted
        } else if self.requests.ok == 0 {
            RunStatus::Failed
        } else {
            RunStatus::Complete
        };
        let mut notes = vec![format!(
            "imported from {} ({}): measured by {}{}, not by infergate; values the source did \
             not report are blank",
            self.files.first().map_or("?", |f| f.path.as_str()),
            self.files.first().map_or("?", |f| f.hash.as_str()),
            self.tool,
            self.tool_version.as_deref().map(|v| format!(" {v}")).unwrap_or_default(),
        )];
        notes.extend(self.definitions.iter().cloned());
        notes.extend(self.notes.iter().cloned());
        let api_base = self.url.clone().unwrap_or_default();
        Summary {
            schema_version: SCHEMA_VERSION,
            run_id,
            status,
            simulated: false,
            tool: ToolInfo {
                name: self.tool.clone(),
                version: self.tool_version.clone().unwrap_or_else(|| "unknown".into()),
            },
            git: None,
            environment_fingerprint: environment.fingerprint(),
            environment,
            target: TargetInfo {
                name: format!("imported ({})", self.tool),
                url: api_base.clone(),
                api_base,
                endpoint: self.endpoint.clone().unwrap_or_default(),
                stream: self.stream.unwrap_or(true),
                model: self.model.clone().unwrap_or_default(),
                ..TargetInfo::default()
            },
            config: RunConfig::Imported(Box::new(ImportedConfig {
                imported: ImportSource {
                    tool: self.tool.clone(),
                    tool_version: self.tool_version.clone(),
                    format_version: self.format_version.clone(),
                    files: self.files.clone(),
                    definitions: self.definitions.clone(),
                },
                load: self.load.clone(),
            })),
            profile: format!("imported-{}", self.tool),
            engine: None,
            invocation: None,
            timing: Timing {
                started_at: self.started_at.clone().unwrap_or_default(),
                ended_at: self.ended_at.clone().unwrap_or_default(),
                window: Window {
                    start_ms: self.duration_s.map(|_| 0.0),
                    end_ms: self.duration_s.map(|d| d * 1000.0),
                    duration_s: self.duration_s,
                },
            },
            requests: self.requests.clone(),
            tokens: self.tokens.clone(),
            metrics: self.latency.clone(),
            throughput: self.throughput.clone(),
            goodput: Goodput { requests_per_s: self.goodput_requests_per_s, ..Goodput::default() },
            schedule: ScheduleSummary::default(),
            workload: WorkloadInfo::new(0, LengthBasis::Dataset),
            turns: Vec::new(),
            // The source's own file says nothing of a plateau: blank, never computed here.
            plateau: None,
            cost: Default::default(),
            server: None,
            isolation: None,
            extra: Default::default(),
            notes,
        }
    }
}

/// Read `file` (and, for AIPerf, the per-request export beside it) in `format`.
pub fn import(format: Format, file: &Path, index: Option<usize>) -> Result<Imported, ImportError> {
    match format {
        Format::VllmBench => vllm::read(file),
        Format::Guidellm => guidellm::read(file, index),
        Format::Aiperf => aiperf::read(file),
    }
}

/// Request counts from records: each in exactly one class (warmup ones apart).
pub(crate) fn counts_of(records: &[RequestRecord]) -> RequestCounts {
    let mut c = RequestCounts::default();
    for r in records {
        if r.warmup {
            c.warmup += 1;
            continue;
        }
        c.total += 1;
        match r.class {
            Outcome::Ok => c.ok += 1,
            Outcome::Cancelled => c.cancelled += 1,
            _ => c.failed += 1,
        }
        *c.by_class.entry(r.class.to_string()).or_insert(0) += 1;
    }
    c
}

/// The class of a failed request from what the source says of it: an HTTP status when it has
/// one, else a timeout or a connection failure when its error says so, else a stream error.
pub(crate) fn failure_class(status: Option<u16>, error: &str) -> Outcome {
    let lower = error.to_ascii_lowercase();
    match status {
        Some(s) if (400..600).contains(&s) => Outcome::Http(s),
        _ if lower.contains("timeout") || lower.contains("timed out") => Outcome::Timeout,
        _ if lower.contains("connect") => Outcome::ConnectError,
        _ => Outcome::StreamError,
    }
}

/// Per-statistic keys of a map (`mean_ttft_ms`), used by formats that flatten them.
pub(crate) type Extra = BTreeMap<String, serde_json::Value>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_imported_summary_reads_back_with_its_blanks_and_its_source() {
        let imported = Imported {
            tool: "vllm-bench".into(),
            files: vec![WorkloadFile::of("r.json", b"{}")],
            definitions: vec!["counted from the send".into()],
            load: ImportedLoad {
                mode: Some("closed".into()),
                concurrency: Some(4),
                ..Default::default()
            },
            requests: RequestCounts { total: 2, ok: 2, ..Default::default() },
            latency: LatencyMetrics {
                ttft_ms: Reported {
                    count: Some(2),
                    mean: Some(12.5),
                    p99: Some(20.0),
                    ..Default::default()
                }
                .stats(),
                ..Default::default()
            },
            ..Default::default()
        };
        let s = imported.summary();
        let text = serde_json::to_string(&s).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(json["metrics"]["ttft_ms"]["p50"].is_null(), "{json}");
        assert_eq!(json["config"]["imported"]["tool"], "vllm-bench");
        let back: Summary = serde_json::from_str(&text).unwrap();
        assert_eq!(back.metric("metrics.ttft_ms.p99"), Some(20.0));
        assert_eq!(back.metric("metrics.ttft_ms.p50"), None);
        assert!(back.metrics.ttft_ms.unwrap().p50.is_nan());
        let c = back.config.imported().expect("an imported run's settings");
        assert_eq!(c.load.concurrency, Some(4));
        assert_eq!(c.imported.files[0].hash, imported.files[0].hash);
        assert!(back.config.profile().is_none());
        // Its settings are read strictly: an unknown key is named.
        let bad = text.replace("\"definitions\"", "\"definitons\"");
        let e = serde_json::from_str::<Summary>(&bad).unwrap_err().to_string();
        assert!(e.contains("not an imported run's settings") && e.contains("definitons"), "{e}");
    }

    #[test]
    fn formats_are_named_and_failures_classed_from_what_the_source_says() {
        assert_eq!(Format::parse("aiperf"), Ok(Format::Aiperf));
        let e = Format::parse("genai-perf").unwrap_err().to_string();
        assert!(e.contains("vllm-bench, guidellm, aiperf"), "{e}");
        let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
        assert!(e.ends_with(&names.join(", ")), "the message lists every format: {e}");
        assert_eq!(failure_class(Some(503), "Service Unavailable"), Outcome::Http(503));
        assert_eq!(failure_class(None, "ReadTimeout: timed out"), Outcome::Timeout);
        assert_eq!(failure_class(None, "ClientConnectorError"), Outcome::ConnectError);
        assert_eq!(failure_class(None, "Traceback ..."), Outcome::StreamError);
        assert_eq!(to_ms(1.5, ms_factor("sec").unwrap()), 1500.0);
        assert_eq!(to_ms(2_500_000.0, ms_factor("ns").unwrap()), 2.5);
        assert_eq!(ms_factor("fortnights"), None);
    }
}
