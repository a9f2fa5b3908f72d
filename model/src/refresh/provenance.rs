//! `<dataset>.provenance.json`: where a refreshed dataset's new items came from, written by
//! `cargo xtask dataset refresh` beside the dataset it writes and cited by `adr new` (the
//! source log's hash, the window, the selection rule, the seed and share, each replaced item
//! and the log line that replaced it, the malformed log lines). A typed artifact
//! ([`crate::artifact`]); it needs none of the refresh's own crates, so the record tooling reads
//! it in every build.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::artifact::{self, Artifact, ArtifactError};

/// The provenance file of a dataset: the dataset's path with `.provenance.json` appended.
pub fn provenance_path(dataset: &Path) -> PathBuf {
    let mut name = dataset.as_os_str().to_os_string();
    name.push(".provenance.json");
    PathBuf::from(name)
}

/// The same for a `/`-separated path relative to the repository root (as summaries and git
/// trees name files).
pub fn provenance_name(dataset: &str) -> String {
    format!("{dataset}.provenance.json")
}

/// Read a provenance file.
pub fn read(path: &Path) -> Result<Provenance, ArtifactError> {
    artifact::read::<Provenance>(path)
}

/// The provenance of one refresh.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    pub format_version: u32,
    /// `infergate 0.1.0`: the tool that wrote it (the seeded choice is reproducible with it).
    pub tool: String,
    pub log: LogSource,
    pub window: Window,
    pub selection: Selection,
    pub scrub: Scrub,
    pub seed: u64,
    /// The share of the dataset replaced (0.1 = 10%).
    pub share: f64,
    pub dataset: DatasetSides,
    /// Each replaced item, in dataset order.
    pub replaced: Vec<Replacement>,
}

impl Artifact for Provenance {
    const FILE: &'static str = "dataset.provenance.json";
    const VERSION: u32 = 1;
    const WHAT: &'static str = "a refreshed dataset's provenance";
}

/// The production log the new items came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogSource {
    /// The log file as given on the command line.
    pub file: String,
    /// `sha256:` and the 64 hex digits of the file's bytes.
    pub sha256: String,
    /// `infergate` (the documented JSONL) or `litellm` (LiteLLM spend logs).
    pub format: String,
    /// Lines in the file, blank ones included.
    pub lines: u64,
    pub blank: u64,
    /// Lines that are not a usable request, each named in `malformed_lines`.
    pub malformed: u64,
    /// `file:line: what is wrong`, in file order (the first [`MAX_NAMED_MALFORMED`]).
    pub malformed_lines: Vec<String>,
}

/// The most malformed lines a provenance names one by one (all are counted).
pub const MAX_NAMED_MALFORMED: usize = 1000;

/// The time window requests were selected from (RFC 3339, both ends included).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Window {
    pub since: String,
    pub until: String,
    /// How it was chosen: `--window-start/--window-end` or `the 7 days up to the log's newest request`.
    pub chosen_by: String,
    /// Usable requests of the log inside the window.
    pub requests: u64,
}

/// Which requests were candidates and how they were ranked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Selection {
    /// The rule in words.
    pub rule: String,
    /// `latency_ms` or `ttft_ms`: what "slowest" ranks by.
    pub by: String,
    /// At most this share of each kind's picks are failed requests.
    pub failed_share: f64,
    /// Failed requests of the window (status >= 400 or 0).
    pub failed: u64,
    /// Requests of the window with a JSON Schema (`response_format` json_schema or `schema`).
    pub structured: u64,
}

/// What was removed from the selected requests.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scrub {
    /// The secret patterns applied (names), and the secret-named fields blanked.
    pub secret_patterns: Vec<String>,
    /// The PII patterns applied (regular expressions).
    pub pii_patterns: Vec<String>,
    /// Secrets replaced in the written items (patterns, secret fields, values of the log's
    /// secret fields found in the request).
    pub secrets_removed: u64,
    pub pii_removed: u64,
    pub user_ids_hashed: u64,
    /// `hmac-sha256` keyed by the variable `key_env`, when user ids were hashed.
    pub user_id_hash: String,
    pub key_env: String,
    /// `hmac-sha256:` and 16 hex digits of the key's HMAC over a fixed text: tells whether two
    /// refreshes used the same key, says nothing of the key. Absent when no key was needed.
    pub key_id: Option<String>,
}

/// The dataset before and after.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetSides {
    /// The dataset read, as given, and its hash (`fnv1a:`, as `summary.workload.files`).
    pub input: String,
    pub input_hash: String,
    /// The dataset written, as given, and its hash: a run whose workload file has this hash
    /// ran the refreshed dataset.
    pub output: String,
    pub output_hash: String,
    pub items: usize,
    pub structured_before: usize,
    pub structured_after: usize,
}

/// One replaced item.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Replacement {
    /// Position of the item in the dataset (0-based, request lines only).
    pub item: usize,
    /// The id of the item replaced, and the id of the new one.
    pub old_id: String,
    pub new_id: String,
    /// The log line (1-based) whose request replaced it.
    pub log_line: u64,
    pub structured: bool,
    /// `failed (status 503)` or `slow (latency_ms 51200)`.
    pub why: String,
}

impl Provenance {
    /// One sentence for a record: what was replaced, from which log, window and seed.
    pub fn summary_line(&self) -> String {
        format!(
            "{} of {} items replaced by the {} of `{}` ({}) from {} to {}, seed {}",
            self.replaced.len(),
            self.dataset.items,
            self.selection.rule,
            self.log.file,
            self.log.sha256,
            self.window.since,
            self.window.until,
            self.seed
        )
    }
}
