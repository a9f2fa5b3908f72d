//! `summary.json`: the public, versioned result of one run.
//!
//! Everything downstream (decision records, gates, comparisons, users' scripts) reads this file.
//! Field names are an interface: add fields freely, rename or remove only with a new
//! [`SCHEMA_VERSION`]. A value that was not measured is `null`, never an estimate.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use crate::metric::{Better, MetricDef, MetricKind, Scale, known_metrics};
use crate::metric::{MetricPath, Reading, Series, Statistic};
use crate::metrics::{
    Goodput, LatencyMetrics, RequestCounts, RunMetrics, ScheduleStats, Throughput, TokenCounts,
    Window,
};
pub use crate::params::flatten_params;

pub const SCHEMA_VERSION: u32 = 1;

/// Tool name and version recorded in every summary.
pub const TOOL_NAME: &str = "infergate";
pub const TOOL_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The text of a value that was not measured where text is written (tables, notes); `null` in
/// `summary.json`.
pub const BLANK: &str = "—";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Every scheduled request was sent and finished.
    Complete,
    /// Stopped by Ctrl-C: what was measured until then is here.
    Interrupted,
    /// No measured request succeeded.
    Failed,
    /// Stopped by an error of the bench itself (a write to the run directory failed): what was
    /// recorded until then is here, and a note says why.
    Aborted,
    /// Stopped early: the server fell behind the open loop's schedule by a growing margin
    /// (`steady.stop_oversaturated`); what was measured until then is here (possibly no
    /// successful request: a stop during the warmup), and a note says what the watch saw.
    Oversaturated,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolInfo {
    pub name: String,
    pub version: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GitInfo {
    pub commit: String,
    pub dirty: bool,
}

/// Where the requests went. Never holds credentials: only the name of the key's variable.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TargetInfo {
    /// Target name from the config, or `embedded-sim`.
    pub name: String,
    /// API base actually used (always ends in `/v1`).
    pub api_base: String,
    /// Full URL of the endpoint the requests went to.
    pub url: String,
    /// `chat` or `completions`.
    pub endpoint: String,
    pub stream: bool,
    pub model: String,
    /// Name of the environment variable the API key was read from, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// The `/v1/models` answer (null when the server does not offer it).
    #[serde(default)]
    pub models: Option<serde_json::Value>,
    /// Name of the output-length field sent (`max_tokens` or `max_completion_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens_field: Option<String>,
}

/// The machine and software the run was measured with, for reproduction.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    pub os: String,
    pub arch: String,
    pub cpus: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_gib: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// How busy the client host was while the load ran (a bench run's; blank elsewhere).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<crate::hostnoise::HostNoise>,
    /// The GPUs of the client host (`nvidia-smi`), when it has any: part of the noise
    /// history's fingerprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuInfo>,
    /// The bench's own timing error measured on this host by `cargo xtask selftest` within
    /// `selftest::RECENT_DAYS` before the run: the floor its timings rest on. Absent without a
    /// recent one on the same host, never estimated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selftest: Option<crate::selftest::SelftestRecord>,
}

/// A host's GPUs as `nvidia-smi` names them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuInfo {
    pub name: String,
    pub driver: String,
    pub count: u32,
}

impl GpuInfo {
    /// `INFERGATE_GPU` (`name,driver[,count]`) when set, else the first line of `nvidia-smi
    /// --query-gpu=name,driver_version --format=csv,noheader` and its line count; `None` without
    /// an NVIDIA GPU.
    pub fn detect() -> Option<GpuInfo> {
        if let Ok(v) = std::env::var("INFERGATE_GPU") {
            return GpuInfo::parse(&v, 1);
        }
        let out = std::process::Command::new("nvidia-smi")
            .args(["--query-gpu=name,driver_version", "--format=csv,noheader"])
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())?;
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        GpuInfo::parse(lines.first()?, lines.len() as u32)
    }

    fn parse(line: &str, count: u32) -> Option<GpuInfo> {
        let mut parts = line.split(',').map(str::trim);
        let name = parts.next().filter(|n| !n.is_empty())?.to_string();
        let driver = parts.next().unwrap_or("").to_string();
        let count = parts.next().and_then(|c| c.parse().ok()).unwrap_or(count);
        Some(GpuInfo { name, driver, count })
    }
}

impl Environment {
    /// This host as the run records it. `INFERGATE_CPU_MODEL` and `INFERGATE_HOSTNAME`, when
    /// set, stand for what `/proc` says (a container's `/proc` may name its host's CPU; the test
    /// suite sets awkward values to check that nothing assumes a shape of either).
    pub fn detect() -> Self {
        let set = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let cpu_model = set("INFERGATE_CPU_MODEL").or_else(|| {
            std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
        });
        let memory_gib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some((kb / 1024.0 / 1024.0 * 10.0).round() / 10.0)
        });
        let hostname = set("INFERGATE_HOSTNAME").or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        });
        Environment {
            os: std::env::consts::OS.to_string(),
            arch: std::env::consts::ARCH.to_string(),
            cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            cpu_model,
            memory_gib,
            hostname,
            noise: None,
            gpu: GpuInfo::detect(),
            selftest: None,
        }
    }

    /// A short, stable identifier of the environment (FNV-1a over its fields).
    pub fn fingerprint(&self) -> String {
        let text = format!(
            "{}|{}|{}|{}|{}",
            self.os,
            self.arch,
            self.cpus,
            self.cpu_model.as_deref().unwrap_or(""),
            self.memory_gib.map(|m| m.to_string()).unwrap_or_default()
        );
        format!("{:016x}", crate::hash::fnv1a(text.as_bytes()))
    }
}

/// Time in the run: wall-clock start/end and the measured window on the run's monotonic clock.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    pub started_at: String,
    pub ended_at: String,
    /// Measured window (ms since the run's start on the monotonic clock).
    pub window: Window,
}

impl Timing {
    /// From `started_at` to now (RFC 3339, milliseconds, UTC); the window is set with the
    /// metrics.
    pub fn since(started_at: chrono::DateTime<chrono::Utc>) -> Timing {
        let at = |t: chrono::DateTime<chrono::Utc>| {
            t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        };
        Timing {
            started_at: at(started_at),
            ended_at: at(chrono::Utc::now()),
            window: Window::default(),
        }
    }
}

/// Schedule adherence plus whether the client fell behind its schedule.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ScheduleSummary {
    #[serde(flatten)]
    pub stats: ScheduleStats,
    /// True when the load generator could not keep its schedule (see the README).
    pub fell_behind: bool,
}

/// What was sent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkloadInfo {
    /// Distinct workload items (prompts or dataset lines).
    pub items: u64,
    /// How prompt lengths were counted.
    pub length_basis: crate::workload::LengthBasis,
    /// Prompt lengths: the configured distribution, requested and realised.
    #[serde(default)]
    pub input_length: crate::lengths::LengthReport,
    /// Output lengths: the configured distribution, requested (`max_tokens`) and realised.
    #[serde(default)]
    pub output_length: crate::lengths::LengthReport,
    /// The files the workload was read from (trace, dataset, empirical lengths), with the hash
    /// of their content.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<crate::workload::WorkloadFile>,
    /// The replayed trace (trace mode only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::trace::TraceInfo>,
    /// The slice of the workload this run measured (an A/B gate's trial).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice: Option<crate::workload::WorkloadSlice>,
}

impl Default for WorkloadInfo {
    fn default() -> Self {
        WorkloadInfo::new(0, crate::workload::LengthBasis::Dataset)
    }
}

impl WorkloadInfo {
    /// `items` items whose lengths were counted on `length_basis`; no length report yet.
    pub fn new(items: u64, length_basis: crate::workload::LengthBasis) -> WorkloadInfo {
        WorkloadInfo {
            items,
            length_basis,
            input_length: Default::default(),
            output_length: Default::default(),
            files: Vec::new(),
            trace: None,
            slice: None,
        }
    }
}

/// Cost of the measured window from the device price (blank when the price is unknown).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    pub price_per_hour: Option<f64>,
    pub devices: Option<u32>,
    pub device_seconds: Option<f64>,
    /// device_seconds x price / 3600.
    pub total: Option<f64>,
    pub per_request: Option<f64>,
    pub per_1m_output_tokens: Option<f64>,
    /// `estimated` (configured price x measured time) or `billed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basis: Option<String>,
}

/// The sections of `summary.json`'s `extra`: each written by the step that knows it, each absent
/// when the run was not such a run. The metric paths that reach into them (`extra.sweep.knee`,
/// `extra.acceptance.numeric.cos_min`) are their JSON paths.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sections {
    /// A stage of a sweep (`bench --sweep`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepStage>,
    /// A shard of a sharded run (`bench --shard I/N`): what the merge aligns and checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<crate::shard::ShardRecord>,
    /// What the engine model's scheduler did (runs on the simulator's engine mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<crate::scheduler::SchedulerReport>,
    /// The connections opened before the window (every measured run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<Connections>,
    /// A merge of a sharded run's shards (`bench merge`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeReport>,
    /// One of an acceptance's two runs (`accept`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acceptance: Option<AcceptanceSection>,
    /// Sections this version does not know (a newer tool's), kept as they are when the
    /// summary is written again.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

impl Sections {
    pub fn is_empty(&self) -> bool {
        self.sweep.is_none()
            && self.shard.is_none()
            && self.scheduler.is_none()
            && self.connections.is_none()
            && self.merge.is_none()
            && self.acceptance.is_none()
            && self.other.is_empty()
    }
}

/// The connections a run opened before its window, against those its load needs at once
/// (`extra.connections`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Connections {
    /// Connections the load keeps busy at once (closed loop: its concurrency; open loop: its
    /// `max_concurrency`, else 16).
    pub wanted: u64,
    /// Connections open before the window (0 when the server closes them after each response:
    /// then every request opens its own).
    #[serde(rename = "opened_before_window")]
    pub opened: u64,
    /// Whether connections are reused between requests.
    pub reused: bool,
    /// Connections opened once the load started: each one's setup is in the TTFT of the request
    /// that waited for it (with reuse off, one per request).
    pub cold_requests: u64,
}

impl Connections {
    /// The note when connections could not all be opened before the window.
    pub fn note(&self) -> Option<String> {
        (self.reused && self.opened < self.wanted).then(|| {
            format!(
                "{} of {} connections could be opened before the window; {} requests opened \
                 theirs during the load (connection setup is in their TTFT)",
                self.opened, self.wanted, self.cold_requests
            )
        })
    }
}

/// How the shards merged (`extra.merge` of the merged run): each shard, the missing ones, the
/// spread of their windows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MergeReport {
    /// N, the shards the run was split into.
    pub shard_count: u32,
    pub shards: Vec<MergedShard>,
    /// Indexes of the shards no directory was given for.
    pub missing: Vec<u32>,
    /// Every shard is here and ended complete.
    pub complete: bool,
    /// Earliest to latest load start (ms, wall clock).
    pub start_spread_ms: f64,
    /// Earliest to latest end of a shard's measured window (ms, aligned).
    pub end_spread_ms: Option<f64>,
    /// The window every shard was measuring in (latest start to earliest end, aligned ms).
    pub common_window: crate::metrics::Window,
    /// Ok measured requests that ended inside the common window, per second of it: the
    /// shards' throughput summed over the time they all ran (blank without a common window).
    #[serde(default)]
    pub common_requests_per_s: Option<f64>,
    /// The shards' histogram logs added together equal the merged histograms (`null`: some
    /// shard's log is missing or unreadable).
    pub histograms_agree: Option<bool>,
}

/// One shard as merged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MergedShard {
    pub index: u32,
    pub dir: String,
    pub status: RunStatus,
    /// The host it ran on (a pod's name on Kubernetes), when known.
    #[serde(default)]
    pub hostname: Option<String>,
    pub load_started_at: String,
    /// Its load clock's origin on the merged timeline (ms after the earliest shard's).
    pub offset_ms: f64,
    pub requests: u64,
    /// Its measured window on the merged timeline.
    pub window: crate::metrics::Window,
    /// Where its files disagree with its summary (count, last record, histogram log): the
    /// shard, and so the merge, is incomplete.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

/// An acceptance's verdicts as each of its two runs' summaries carries them (`extra.acceptance`;
/// the whole report is `acceptance.json`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AcceptanceSection {
    /// `baseline` or `candidate`: which of the two runs this summary is.
    pub role: String,
    /// The report, relative to the run's directory (`../acceptance.json`).
    pub file: String,
    pub run_id: String,
    /// Every layer that ran passed, and one did.
    pub passed: bool,
    pub baseline: Option<String>,
    pub candidate: Option<String>,
    pub numeric: NumericVerdict,
    pub engine: EngineVerdict,
    pub business: BusinessVerdict,
    /// What the failed layers tell the team to do.
    pub actions: Vec<String>,
}

/// The numeric layer of an acceptance, in short: its verdict (null when it did not run) and
/// its checks' values.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NumericVerdict {
    pub verdict: Option<String>,
    pub cos_min: Option<f64>,
    pub rtol_max: Option<f64>,
    pub first_divergence: Option<Divergence>,
}

/// The engine layer of an acceptance, in short.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineVerdict {
    pub verdict: Option<String>,
    pub ttft_p99_ms: Option<f64>,
    pub itl_jitter: Option<f64>,
    pub stream_violations: Option<f64>,
}

/// The business layer of an acceptance, in short.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BusinessVerdict {
    pub verdict: Option<String>,
    pub schema_pass_rate: Option<f64>,
    pub judge_mean: Option<f64>,
}

/// Where and why two runs first diverge.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Divergence {
    /// Item (prompt, or `.npy` row group) index.
    pub item: usize,
    /// Output position (row) within it.
    pub position: usize,
    /// `token` (the chosen tokens differ), `cos` or `rtol`.
    pub reason: String,
    pub baseline_token: Option<String>,
    pub candidate_token: Option<String>,
    pub cos: Option<f64>,
    pub rtol: Option<f64>,
}

/// A sweep's stage, as its summary says it (`extra.sweep`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepStage {
    pub sweep_id: String,
    /// The sweep's own file, relative to the stage's directory (`../sweep.json`).
    pub file: String,
    /// What the sweep varies, as `--sweep` names it (`concurrency`, `rate`).
    pub dimension: String,
    /// This stage's number (from 1) and how many the sweep ran.
    pub stage: usize,
    pub stages: usize,
    /// This stage's load (concurrency or requests/s).
    pub load: Option<f64>,
    /// The sweep's knee (its load), when a stage met the SLOs.
    pub knee: Option<f64>,
    pub is_knee: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub schema_version: u32,
    pub run_id: String,
    pub status: RunStatus,
    /// True when the target is the built-in engine simulator (a model, not a real engine).
    pub simulated: bool,
    pub tool: ToolInfo,
    #[serde(default)]
    pub git: Option<GitInfo>,
    pub environment: Environment,
    pub environment_fingerprint: String,
    pub target: TargetInfo,
    /// The settings the run was made with: the fully resolved bench profile, or an acceptance
    /// side's.
    pub config: RunConfig,
    /// Profile name the config was resolved from.
    pub profile: String,
    /// Engine parameters (the governed configs/engine*.toml) when known, with the file it came from.
    #[serde(default)]
    pub engine: Option<EngineParams>,
    /// The command that made the run, as it can be pasted into a shell (null when the caller,
    /// a library user, did not say).
    #[serde(default)]
    pub invocation: Option<Invocation>,
    pub timing: Timing,
    pub requests: RequestCounts,
    pub tokens: TokenCounts,
    pub metrics: LatencyMetrics,
    pub throughput: Throughput,
    pub goodput: Goodput,
    pub schedule: ScheduleSummary,
    #[serde(default)]
    pub workload: WorkloadInfo,
    /// Per turn index of a sessions workload (absent for other workloads).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<crate::metrics::TurnMetrics>,
    /// The run's plateau and the metrics of the requests sent within it (null for summaries
    /// that are not one bench run's: merges, acceptance sides).
    #[serde(default)]
    pub plateau: Option<crate::steady::Plateau>,
    #[serde(default)]
    pub cost: Cost,
    /// Server-side metrics scraped during the window (null when not scraped).
    #[serde(default)]
    pub server: Option<crate::server_metrics::ServerSection>,
    /// What was reset on the engine before this run, when the run is a trial of a set or an
    /// A/B gate (absent for other runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<Isolation>,
    /// The sections the steps around a run add to it (a sweep's stage, a shard, the engine
    /// model's scheduler, an acceptance's verdicts, the connections, a merge).
    #[serde(default, skip_serializing_if = "Sections::is_empty")]
    pub extra: Sections,
    /// Warnings and notes for the reader (approximations, skipped measurements).
    #[serde(default)]
    pub notes: Vec<String>,
}

/// What was done before a trial.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "how")]
pub enum Isolation {
    /// The engine was started for this run (the embedded simulator).
    FreshEngine,
    /// An endpoint reset the engine's caches (`POST /reset_prefix_cache`).
    Reset(String),
    /// The engine offers none of the resets: what was tried.
    NotOffered(String),
}

impl Isolation {
    pub fn text(&self) -> String {
        match self {
            Isolation::FreshEngine => {
                "fresh engine (the embedded simulator, built for the run)".into()
            }
            Isolation::Reset(how) => format!("caches reset ({how})"),
            Isolation::NotOffered(tried) => {
                format!("the engine offers no cache reset ({tried}): caches carried over")
            }
        }
    }

    pub fn done(&self) -> bool {
        !matches!(self, Isolation::NotOffered(_))
    }
}

/// How a run was started: the command line, and which of its runs this is when it made several.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Invocation {
    /// The command line, shell-quoted (`cargo xtask bench --profile tuned --out runs/tuned`),
    /// secrets removed. For a sweep's stage or a comparison's strategy it is the command of the
    /// whole sweep or comparison.
    pub command: String,
    /// Which run of the command this one is when it made several: the sweep stage's load
    /// (`concurrency 32`) or the strategy (`continuous`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineParams {
    /// The file the parameters were read from (the file the run used), relative to the
    /// repository root when possible.
    pub file: String,
    /// The parameters, section by section, as in the file.
    pub params: serde_json::Value,
    /// The governed file `file` was generated from, when it is a variant (a strategy
    /// comparison's `engine-<strategy>.toml` derives from `configs/engine.toml`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derived_from: Option<String>,
    /// The keys the variant sets otherwise than `derived_from`, with that file's values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<ParamChange>,
    /// The engine that said what it runs (`llama.cpp`, `vLLM`, `SGLang`, `TGI`), when one did
    /// ([`crate::served`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_by: Option<String>,
    /// What the engine said it runs, read from its own endpoints before and after the load:
    /// each value with its engine config key and where it was read. Empty: nothing revealed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub served: Vec<crate::served::ServedValue>,
    /// The keys `params` sets and the engine answered otherwise: the run measured another
    /// configuration than the file says (a gate does not pass it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mismatches: Vec<crate::served::ServedMismatch>,
}

impl EngineParams {
    /// Record what the engine said it runs, and the keys of the file it contradicts.
    pub fn set_served(&mut self, reading: &crate::served::ServedReading) {
        self.served_by = reading.engine.clone();
        self.served = reading.values.clone();
        self.mismatches = crate::served::mismatches(&self.params, &self.served);
    }
}

/// One key a variant engine config sets otherwise than the governed file it derives from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ParamChange {
    /// Dotted key (`batch.strategy`).
    pub key: String,
    /// The governed file's value; null when the file does not set the key (the variant adds it).
    pub from: Option<serde_json::Value>,
    /// The variant's value.
    pub to: serde_json::Value,
}

impl EngineParams {
    /// Read a governed engine config (`file` relative to `root`) as recorded in summaries.
    pub fn read(root: &Path, file: &str) -> Result<EngineParams, crate::config::ConfigError> {
        let source = crate::config::Source::read_in(root, Path::new(file))?;
        let table: toml::Table = toml::from_str(&source.text).map_err(|e| source.toml_error(&e))?;
        let params = serde_json::to_value(table).expect("TOML tables convert to JSON");
        Ok(EngineParams {
            file: file.to_string(),
            params,
            derived_from: None,
            changes: vec![],
            served_by: None,
            served: vec![],
            mismatches: vec![],
        })
    }

    /// The parameters of a variant `file` generated from the governed file `base` (its
    /// parameters `base_params`): recorded with the variant's name and values, the file it
    /// derives from and each key it sets otherwise.
    pub fn derived(
        file: &str,
        params: serde_json::Value,
        base: &str,
        base_params: &serde_json::Value,
    ) -> EngineParams {
        let (was, now) = (flatten_params(base_params), flatten_params(&params));
        let changes = now
            .into_iter()
            .filter(|(k, v)| !was.get(k).is_some_and(|w| same_value(w, v)))
            .map(|(key, to)| ParamChange { from: was.get(&key).cloned(), key, to })
            .collect();
        EngineParams {
            file: file.to_string(),
            params,
            derived_from: Some(base.to_string()),
            changes,
            served_by: None,
            served: vec![],
            mismatches: vec![],
        }
    }
}

/// Two parameter values are the same when equal, numbers by value (`5` and `5.0`).
fn same_value(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// The settings a run was made with (`summary.config`): a bench run's resolved profile, the
/// settings of one side of an acceptance run (an object with `"acceptance": true`), or where an
/// imported run came from and the load its tool describes (an object with `"imported"`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum RunConfig {
    Profile(Box<crate::config::Profile>),
    Acceptance(AcceptanceConfig),
    Imported(Box<crate::imported::ImportedConfig>),
}

/// What one side of an acceptance run was sent with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcceptanceConfig {
    /// Always true: what tells this object from a profile.
    pub acceptance: bool,
    pub concurrency: u32,
    pub temperature: f64,
    pub seed: u64,
    /// The dataset file (None: the default one).
    pub dataset: Option<String>,
    /// The side's metrics page, when scraped.
    pub metrics_url: Option<String>,
}

impl RunConfig {
    /// The resolved profile of a bench run (None for an acceptance side).
    pub fn profile(&self) -> Option<&crate::config::Profile> {
        match self {
            RunConfig::Profile(p) => Some(p),
            RunConfig::Acceptance(_) | RunConfig::Imported(_) => None,
        }
    }

    pub fn profile_mut(&mut self) -> Option<&mut crate::config::Profile> {
        match self {
            RunConfig::Profile(p) => Some(p),
            RunConfig::Acceptance(_) | RunConfig::Imported(_) => None,
        }
    }

    /// Where an imported run came from (None for a run infergate measured).
    pub fn imported(&self) -> Option<&crate::imported::ImportedConfig> {
        match self {
            RunConfig::Imported(c) => Some(c),
            _ => None,
        }
    }

    /// The settings as JSON, as `summary.json` holds them: for a setting looked up by its
    /// dotted path (`load.concurrency`, a record's scenario key) and for diffs of every setting.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("settings serialise")
    }

    /// The same settings with every secret `redactor` knows removed from their text. A profile
    /// whose secret sits where its text cannot change (a name a type checks) is kept as the
    /// default profile, which the caller notes.
    pub fn redacted(self, redactor: &crate::redact::Redactor) -> (RunConfig, bool) {
        let json = self.to_json();
        if redactor.is_clean(&json.to_string()) {
            return (self, false);
        }
        match serde_json::from_value(redactor.redact_json(&json)) {
            Ok(config) => (config, false),
            Err(_) => (RunConfig::Profile(Box::default()), true),
        }
    }
}

impl<'de> Deserialize<'de> for RunConfig {
    /// An object with `"acceptance"` is an acceptance side's settings, any other a profile:
    /// each read strictly, so an error names the field that is wrong.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RunConfig, D::Error> {
        use serde::de::Error;
        let v = serde_json::Value::deserialize(d)?;
        if v.get("acceptance").is_some() {
            serde_json::from_value(v).map(RunConfig::Acceptance).map_err(D::Error::custom)
        } else if v.get("imported").is_some() {
            serde_json::from_value(v).map(|c| RunConfig::Imported(Box::new(c))).map_err(|e| {
                D::Error::custom(format!(
                    "not an imported run's settings ({e}); see docs/import.md"
                ))
            })
        } else {
            serde_json::from_value(v).map(|p| RunConfig::Profile(Box::new(p))).map_err(|e| {
                D::Error::custom(format!("not a bench profile ({e}); see docs/configuration.md"))
            })
        }
    }
}

/// What a summary records about how a run was made: everything but its measurements.
#[derive(Clone, Debug)]
pub struct RunHeader {
    pub run_id: String,
    /// The target announced itself as the built-in simulator.
    pub simulated: bool,
    pub git: Option<GitInfo>,
    pub target: TargetInfo,
    /// The resolved configuration the run was made with.
    pub config: RunConfig,
    pub profile: String,
    pub engine: Option<EngineParams>,
    pub started_at: chrono::DateTime<chrono::Utc>,
    pub workload: WorkloadInfo,
    pub notes: Vec<String>,
}

impl Summary {
    /// The summary of a finished run (bench runs and each side of an acceptance): its header,
    /// its metrics and the environment it ran in. Ended now; `failed` when no measured request
    /// succeeded, else `complete` (an interrupted run says so itself). The caller adds the cost
    /// of its window (`cost::for_summary`, which reads the summary).
    pub fn of_run(h: RunHeader, metrics: RunMetrics) -> Summary {
        let environment = Environment::detect();
        let mut s = Summary {
            schema_version: SCHEMA_VERSION,
            run_id: h.run_id,
            status: RunStatus::Complete,
            simulated: h.simulated,
            tool: ToolInfo { name: TOOL_NAME.into(), version: TOOL_VERSION.into() },
            git: h.git,
            environment_fingerprint: environment.fingerprint(),
            environment,
            target: h.target,
            config: h.config,
            profile: h.profile,
            engine: h.engine,
            invocation: None,
            timing: Timing::since(h.started_at),
            requests: Default::default(),
            tokens: Default::default(),
            metrics: Default::default(),
            throughput: Default::default(),
            goodput: Default::default(),
            schedule: ScheduleSummary::default(),
            workload: h.workload,
            turns: Vec::new(),
            plateau: None,
            cost: Default::default(),
            server: None,
            isolation: None,
            extra: Default::default(),
            notes: h.notes,
        };
        s.set_metrics(metrics);
        s.status = if s.requests.ok == 0 { RunStatus::Failed } else { RunStatus::Complete };
        s
    }

    /// Place the computed metrics into the summary.
    /// The token ratio comes from the server section, not from the records: it is kept.
    pub fn set_metrics(&mut self, m: RunMetrics) {
        self.requests = m.requests;
        self.tokens = m.tokens;
        self.metrics = m.latency;
        self.throughput = m.throughput;
        let token_ratio = self.goodput.token_ratio;
        self.goodput = m.goodput;
        self.goodput.token_ratio = token_ratio;
        self.timing.window = m.window;
        self.schedule.stats = m.schedule;
        self.turns = m.turns;
    }

    /// The summary of a run directory, or of a `summary.json` path.
    pub fn read(path: &Path) -> Result<Summary, crate::artifact::ArtifactError> {
        crate::artifact::read(path)
    }
}

impl crate::artifact::Artifact for Summary {
    const FILE: &'static str = "summary.json";
    const VERSION: u32 = SCHEMA_VERSION;
    const VERSION_FIELD: &'static str = "schema_version";
    const WHAT: &'static str = "a run summary";
}

impl Summary {
    /// Whether gates and records read this run's plateau figures: its profile says
    /// `steady.gate = true`.
    pub fn gates_on_plateau(&self) -> bool {
        self.config.profile().is_some_and(|p| p.steady.gate)
    }

    /// The metric a gate or a record reads for the metric a threshold names: its plateau figure
    /// (`plateau.metrics.ttft_ms.p99` for `metrics.ttft_ms.p99`) when the run gates on its
    /// plateau and the registry has one, else the metric itself. The one place that decides.
    pub fn gated_path(&self, metric: MetricPath) -> MetricPath {
        match metric.plateau() {
            Some(p) if self.gates_on_plateau() => p,
            _ => metric,
        }
    }

    /// The value a gate or a record reads for `metric` ([`Summary::gated_path`]).
    pub fn gated_metric(&self, metric: MetricPath) -> Option<f64> {
        self.metric(self.gated_path(metric))
    }

    /// Value of a known metric, including derived ones (`error_rate`). `None` when not measured.
    pub fn metric(&self, metric: MetricPath) -> Option<f64> {
        self.value_of(metric.reading())
    }

    /// The number a [`Reading`] names, read from the summary's fields; `None` when it was not
    /// measured (a section or a value absent, or a statistic an imported run's tool did not
    /// report, held as NaN).
    pub fn value_of(&self, reading: Reading) -> Option<f64> {
        use crate::metric::{
            AcceptanceFigure, CostFigure, GoodputFigure, Rate, RequestCount, ServerFigure,
        };
        let plateau = |on: bool| if on { self.plateau.as_ref().map(Some) } else { Some(None) };
        let v = match reading {
            Reading::Latency { series, stat, plateau: on } => {
                let m = plateau(on)?.map_or(&self.metrics, |p| &p.metrics);
                statistic(latency_series(m, series)?, stat)
            }
            Reading::ItlJitter { plateau: on } => {
                plateau(on)?.map_or(&self.metrics, |p| &p.metrics).itl_jitter?
            }
            Reading::Throughput { rate, plateau: on } => {
                let t = plateau(on)?.map_or(&self.throughput, |p| &p.throughput);
                match rate {
                    Rate::Requests => t.requests_per_s?,
                    Rate::OutputTokens => t.output_tokens_per_s?,
                    Rate::TotalTokens => t.total_tokens_per_s?,
                }
            }
            Reading::Goodput { figure, plateau: on } => {
                let g = plateau(on)?.map_or(&self.goodput, |p| &p.goodput);
                match figure {
                    GoodputFigure::RequestsPerS => g.requests_per_s?,
                    GoodputFigure::Ratio => g.ratio?,
                    GoodputFigure::TokenRatio => g.token_ratio?,
                }
            }
            Reading::Requests(c) => match c {
                RequestCount::Ok => self.requests.ok as f64,
                RequestCount::Failed => self.requests.failed as f64,
                RequestCount::Cancelled => self.requests.cancelled as f64,
            },
            Reading::ErrorRate => {
                // Of the requests the server was left to answer (cancelled ones are not its
                // failures).
                let answered = self.requests.total.saturating_sub(self.requests.cancelled);
                (answered > 0).then(|| self.requests.failed as f64 / answered as f64)?
            }
            Reading::ServerTokenMismatch => self.tokens.server_mismatch?,
            Reading::Cost(c) => match c {
                CostFigure::PerRequest => self.cost.per_request?,
                CostFigure::Per1mOutputTokens => self.cost.per_1m_output_tokens?,
            },
            Reading::Server(f) => {
                let s = self.server.as_ref()?;
                match f {
                    ServerFigure::GoodputRatio => s.goodput_ratio?,
                    ServerFigure::KvFragmentation => s.kv_fragmentation?,
                    ServerFigure::Preemptions => s.preemptions?,
                    ServerFigure::KvCacheUsageMax => s.kv_cache_usage.as_ref()?.max,
                    ServerFigure::PrefixCacheHitRate => s.prefix_cache_hit_rate?,
                    ServerFigure::GpuUtilizationMean => {
                        s.gpu.as_ref()?.utilization_pct.as_ref()?.mean
                    }
                    ServerFigure::GpuJoulesPer1mOutputTokens => {
                        s.gpu.as_ref()?.joules_per_1m_output_tokens?
                    }
                }
            }
            Reading::ScheduleLag(stat) => statistic(self.schedule.stats.lag_ms.as_ref()?, stat),
            Reading::Acceptance(f) => {
                let a = self.extra.acceptance.as_ref()?;
                match f {
                    AcceptanceFigure::CosMin => a.numeric.cos_min?,
                    AcceptanceFigure::RtolMax => a.numeric.rtol_max?,
                    AcceptanceFigure::StreamViolations => a.engine.stream_violations?,
                    AcceptanceFigure::SchemaPassRate => a.business.schema_pass_rate?,
                }
            }
            Reading::SweepKnee => self.extra.sweep.as_ref()?.knee?,
        };
        // A number `summary.json` cannot hold (NaN, infinite) is written `null`: not measured.
        v.is_finite().then_some(v)
    }
}

/// A latency series of `metrics` (or the plateau's).
fn latency_series(m: &LatencyMetrics, series: Series) -> Option<&crate::metrics::Stats> {
    match series {
        Series::Ttft => m.ttft_ms.as_ref(),
        Series::Tpot => m.tpot_ms.as_ref(),
        Series::Itl => m.itl_ms.as_ref(),
        Series::E2e => m.e2e_ms.as_ref(),
        Series::Queue => m.queue_ms.as_ref(),
        Series::Ttfrt => m.ttfrt_ms.as_ref(),
        Series::Ttfat => m.ttfat_ms.as_ref(),
        Series::TpotReasoning => m.tpot_reasoning_ms.as_ref(),
        Series::TpotAnswer => m.tpot_answer_ms.as_ref(),
    }
}

/// A statistic of a latency series.
fn statistic(s: &crate::metrics::Stats, stat: Statistic) -> f64 {
    match stat {
        Statistic::Count => s.count as f64,
        Statistic::Mean => s.mean,
        Statistic::Stdev => s.stdev,
        Statistic::Min => s.min,
        Statistic::P50 => s.p50,
        Statistic::P90 => s.p90,
        Statistic::P95 => s.p95,
        Statistic::P99 => s.p99,
        Statistic::P999 => s.p999,
        Statistic::Max => s.max,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_gate_reads_the_plateau_figure_of_every_metric_the_registry_has_one_of() {
        let mut s: Summary = serde_json::from_value(serde_json::json!({
            "schema_version": SCHEMA_VERSION, "run_id": "r", "status": "complete",
            "simulated": true, "tool": {"name": "infergate", "version": "0"},
            "environment": Environment::default(), "environment_fingerprint": "",
            "target": TargetInfo::default(), "config": {}, "profile": "default",
            "timing": Timing::default(), "requests": RequestCounts::default(),
            "tokens": TokenCounts::default(), "metrics": LatencyMetrics::default(),
            "throughput": Throughput::default(), "goodput": Goodput::default(),
            "schedule": ScheduleSummary::default(),
        }))
        .unwrap();
        assert_eq!(s.plateau, None, "a summary without the section reads as none");
        let m = MetricPath::named;
        let gated = |s: &Summary, p: &str| s.gated_path(m(p)).as_str();
        assert_eq!(gated(&s, "metrics.ttft_ms.p99"), "metrics.ttft_ms.p99");
        s.config.profile_mut().unwrap().steady.gate = true;
        assert!(s.gates_on_plateau());
        assert_eq!(gated(&s, "metrics.ttft_ms.p99"), "plateau.metrics.ttft_ms.p99");
        assert_eq!(gated(&s, "throughput.requests_per_s"), "plateau.throughput.requests_per_s");
        // Metrics the plateau has no figure of are read as they are.
        assert_eq!(gated(&s, "requests.failed"), "requests.failed");
        assert_eq!(gated(&s, "server.kv_fragmentation"), "server.kv_fragmentation");
        let def = m("plateau.metrics.ttft_ms.p99").def();
        assert!(def.plateau);
        assert_eq!(
            def.samples,
            Some(Reading::Latency { series: Series::Ttft, stat: Statistic::Count, plateau: true })
        );
        assert_eq!(def.kind, MetricKind::Records { tail: Some(0.01) });
        assert_eq!(m("plateau.goodput.ratio").scale(), Scale::Share);
        s.plateau = Some(crate::steady::none("no measured request".into()));
        assert_eq!(
            s.gated_metric(m("metrics.ttft_ms.p99")),
            None,
            "blank, never the whole window's"
        );
    }

    /// Every registry entry's typed reading, and its sample count's, reads the number at its
    /// dotted path in the summary's JSON: checked on a summary where every figure is set, each
    /// to a number of its own.
    #[test]
    fn the_typed_reading_of_every_metric_reads_the_field_its_path_names() {
        use crate::metrics::Stats;
        let mut next = 0.0;
        let mut n = || {
            next += 1.0;
            next
        };
        let mut stats = || Stats {
            count: n() as u64,
            mean: n(),
            stdev: n(),
            min: n(),
            p50: n(),
            p90: n(),
            p95: n(),
            p99: n(),
            p999: n(),
            max: n(),
        };
        let mut latency = || LatencyMetrics {
            ttft_ms: Some(stats()),
            tpot_ms: Some(stats()),
            itl_ms: Some(stats()),
            e2e_ms: Some(stats()),
            itl_jitter: None,
            queue_ms: Some(stats()),
            ttfrt_ms: Some(stats()),
            ttfat_ms: Some(stats()),
            tpot_reasoning_ms: Some(stats()),
            tpot_answer_ms: Some(stats()),
        };
        let (mut whole, mut within) = (latency(), latency());
        let lag = stats();
        let mut n = || {
            next += 1.0;
            next
        };
        whole.itl_jitter = Some(n());
        within.itl_jitter = Some(n());
        let mut throughput = || Throughput {
            requests_per_s: Some(n()),
            output_tokens_per_s: Some(n()),
            total_tokens_per_s: Some(n()),
        };
        let (throughput_whole, throughput_within) = (throughput(), throughput());
        let mut goodput = || Goodput {
            requests_per_s: Some(n()),
            ratio: Some(n()),
            token_ratio: Some(n()),
            ..Goodput::default()
        };
        let (goodput_whole, goodput_within) = (goodput(), goodput());
        let gauge = |v: f64| crate::server_metrics::GaugeStats {
            samples: 3,
            mean: v,
            p50: v + 0.25,
            p99: v + 0.5,
            max: v + 0.75,
        };
        let mut doc = serde_json::json!({
            "schema_version": SCHEMA_VERSION, "run_id": "r", "status": "complete",
            "simulated": true, "tool": {"name": "infergate", "version": "0"},
            "environment": Environment::default(), "environment_fingerprint": "",
            "target": TargetInfo::default(), "config": {}, "profile": "default",
            "timing": Timing::default(),
        });
        let requests =
            RequestCounts { total: 900, ok: 700, failed: 150, cancelled: 50, ..Default::default() };
        doc["requests"] = serde_json::json!(requests);
        doc["tokens"] =
            serde_json::json!(TokenCounts { server_mismatch: Some(n()), ..Default::default() });
        doc["metrics"] = serde_json::json!(whole);
        doc["throughput"] = serde_json::json!(throughput_whole);
        doc["goodput"] = serde_json::json!(goodput_whole);
        let schedule = crate::metrics::ScheduleStats { lag_ms: Some(lag), ..Default::default() };
        doc["schedule"] =
            serde_json::json!(ScheduleSummary { stats: schedule, fell_behind: false });
        doc["plateau"] = serde_json::json!({
            "reason": null, "start_ms": 1.0, "end_ms": 2.0, "duration_s": 0.001,
            "requests": 1, "ok": 1, "slice_ms": 1.0, "unsteady_slices": 0,
            "metrics": within, "throughput": throughput_within, "goodput": goodput_within,
        });
        let cost =
            Cost { per_request: Some(n()), per_1m_output_tokens: Some(n()), ..Default::default() };
        doc["cost"] = serde_json::json!(cost);
        doc["server"] = serde_json::json!({
            "source": "", "engine": "vllm", "interval_s": 1.0, "scrapes": 1,
            "failed_scrapes": 0, "bracket": null, "generation_tokens": null,
            "prompt_tokens": null, "preemptions": n(), "wasted_tokens": null,
            "prefix_cache_hit_rate": n(), "goodput_ratio": n(), "running": null,
            "waiting": null, "kv_cache_usage": gauge(n()), "kv_fragmentation": n(),
            "kv_fragmentation_stats": null,
        });
        doc["server"]["gpu"] = serde_json::json!({
            "utilization_pct": gauge(n()), "memory_used_mib": null,
            "joules_per_1m_output_tokens": n(), "samples": [],
        });
        doc["extra"] = serde_json::json!({
            "sweep": {
                "sweep_id": "s", "file": "../sweep.json", "dimension": "concurrency",
                "stage": 1, "stages": 2, "load": n(), "knee": n(), "is_knee": false,
            },
        });
        let acceptance = AcceptanceSection {
            numeric: NumericVerdict {
                cos_min: Some(n()),
                rtol_max: Some(n()),
                ..Default::default()
            },
            engine: EngineVerdict { stream_violations: Some(n()), ..Default::default() },
            business: BusinessVerdict { schema_pass_rate: Some(n()), ..Default::default() },
            ..Default::default()
        };
        doc["extra"]["acceptance"] = serde_json::json!(acceptance);
        let s: Summary = serde_json::from_value(doc).expect("a summary");
        let json = serde_json::to_value(&s).unwrap();
        // The number at a dotted path, walked through the JSON the summary is written as.
        let walk = |path: &str| {
            json.pointer(&format!("/{}", path.replace('.', "/"))).and_then(|v| v.as_f64())
        };
        for m in MetricPath::all() {
            let got = s.metric(m);
            let want = match m.as_str() {
                // Derived: of the requests the server was left to answer.
                "error_rate" => Some(150.0 / 850.0),
                path => walk(path),
            };
            assert!(got.is_some(), "{m}: every figure is set");
            assert_eq!(got, want, "{m}");
            if let Some(samples) = m.def().samples {
                let Reading::Latency { series, stat: Statistic::Count, plateau } = samples else {
                    panic!("{m}: its samples are a latency series' count, not {samples:?}");
                };
                let on = if plateau { "plateau." } else { "" };
                let path = format!("{on}metrics.{}.count", series.key());
                assert_eq!(s.value_of(samples), walk(&path), "{m}: {path}");
                assert!(walk(&path).is_some(), "{path}");
            }
        }
        // A statistic an imported run's tool did not report (NaN) is not measured.
        let mut imported = s.clone();
        imported.metrics.ttft_ms.as_mut().unwrap().p50 = f64::NAN;
        assert_eq!(imported.metric(MetricPath::named("metrics.ttft_ms.p50")), None);
        assert!(imported.metric(MetricPath::named("metrics.ttft_ms.p99")).is_some());
    }

    #[test]
    fn a_summary_is_read_as_its_artifact_naming_the_file_the_field_and_the_version() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("summary.json");
        let write = |v: &serde_json::Value| std::fs::write(&file, v.to_string()).unwrap();
        let mut doc = serde_json::json!({
            "schema_version": SCHEMA_VERSION, "run_id": "r", "status": "complete",
            "simulated": true, "tool": {"name": "infergate", "version": "0"},
            "environment": Environment::default(), "environment_fingerprint": "",
            "target": TargetInfo::default(), "config": {}, "profile": "default",
            "timing": Timing::default(), "requests": RequestCounts::default(),
            "tokens": TokenCounts::default(), "metrics": LatencyMetrics::default(),
            "throughput": Throughput::default(), "goodput": Goodput::default(),
            "schedule": ScheduleSummary::default(),
        });
        write(&doc);
        // The directory or the file itself.
        assert_eq!(Summary::read(dir.path()).unwrap().run_id, "r");
        assert_eq!(Summary::read(&file).unwrap().run_id, "r");
        doc["requests"]["ok"] = serde_json::json!("many");
        write(&doc);
        let e = Summary::read(dir.path()).unwrap_err().to_string();
        assert!(e.contains("summary.json") && e.contains("field `requests.ok`"), "{e}");
        assert!(e.contains(&format!("a run summary of format {SCHEMA_VERSION}")), "{e}");
        doc["schema_version"] = serde_json::json!(SCHEMA_VERSION + 1);
        write(&doc);
        let e = Summary::read(dir.path()).unwrap_err().to_string();
        assert!(
            e.ends_with(&format!(
                "summary.json is a run summary of format {}, this tool reads format {SCHEMA_VERSION}",
                SCHEMA_VERSION + 1
            )),
            "{e}"
        );
        doc.as_object_mut().unwrap().remove("schema_version");
        write(&doc);
        let e = Summary::read(dir.path()).unwrap_err().to_string();
        assert!(e.contains("(none: no version field)"), "{e}");
    }
}
