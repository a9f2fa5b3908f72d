//! A repository governed by decision records, as `adr check` and the MCP server meet one: the
//! engine config, ADR-0001 (Accepted) deciding two of its keys and the gate.toml `adr
//! thresholds` writes for it, committed on `main`, with HEAD on a branch `pr` at that commit.

use std::collections::BTreeMap;
use std::path::Path;

use git2::Oid;
use xtask::adr::live::generate;
use xtask::adr::parse_adr;
use xtask::thresholds::file::render_file;

use super::gitrepo::GitRepo;

pub const ENGINE: &str = "configs/engine.toml";
pub const BENCH: &str = "configs/bench.toml";
pub const GATE: &str = "thresholds/gate.toml";
pub const ADR1: &str = "docs/adr/0001-use-the-defaults.md";
pub const README: &str = "docs/adr/README.md";

pub const ENGINE_TEXT: &str = "\
# Inference parameters (governed by docs/adr).
[engine]
model = \"m\"
gpu_memory_utilization = 0.90   # share of GPU memory

[scheduler]
max_num_seqs = 256
enable_chunked_prefill = false
";

/// A lint-clean record with these decision lines and links.
pub fn record(n: u32, title: &str, status: &str, decisions: &str, links: &str) -> String {
    format!(
        "# ADR-{n:04}: {title}\n\n- Status: {status}\n- Date: 2025-05-01\n- Deciders: Platform team\n\n\
         ## Context\n\nLong prompts block decode at concurrency 64.\n\n\
         ## Metrics matrix\n\n| Config | TTFT P99 (ms) | Conclusion |\n|---|---:|---|\n| Baseline | 274 | chosen |\n\n\
         ## Decision\n\n{decisions}\n\n\
         ## CI gate thresholds\n\n| Metric | Comparator | Limit | Unit | Action |\n|---|---|---|---|---|\n\
         | `metrics.ttft_ms.p99` | <= | 302 | ms | block |\n\n\
         ## Rollback conditions\n\nTTFT P99 above 302 ms on a gate run: revert.\n\n\
         ## Consequences\n\nReviews read numbers.\n\n\
         ## Links\n\n{links}\n"
    )
}

/// ADR-0001, Accepted: `scheduler.max_num_seqs = 256`, `scheduler.enable_chunked_prefill =
/// false` and a TTFT P99 threshold.
pub fn adr1() -> String {
    record(
        1,
        "Use the defaults",
        "Accepted",
        "- configs/engine.toml: scheduler.max_num_seqs = 256\n\
         - configs/engine.toml: scheduler.enable_chunked_prefill = false",
        "None.",
    )
}

/// gate.toml as `adr thresholds` writes it for these records (path, text).
pub fn gate_for(records: &[(&str, &str)]) -> String {
    let adrs: Vec<_> = records.iter().map(|(p, t)| parse_adr(Path::new(p), t)).collect();
    render_file(&generate(&adrs).unwrap(), "docs/adr")
}

/// The files of the first commit: [`ENGINE_TEXT`], a bench config of the default profile,
/// [`adr1`] and its gate.toml, the records' README; each replaced, added or left out as a test
/// needs.
pub struct Governed {
    files: BTreeMap<String, String>,
}

impl Default for Governed {
    fn default() -> Self {
        let a1 = adr1();
        let files = [
            (ENGINE, ENGINE_TEXT.to_string()),
            (BENCH, "[profile.default]\n".to_string()),
            (GATE, gate_for(&[(ADR1, &a1)])),
            (ADR1, a1),
            (README, "# Records\n".to_string()),
        ];
        Governed { files: files.into_iter().map(|(p, t)| (p.to_string(), t)).collect() }
    }
}

impl Governed {
    /// File `path` holds `text` (added, or in place of the default one).
    pub fn with(mut self, path: &str, text: &str) -> Self {
        self.files.insert(path.to_string(), text.to_string());
        self
    }

    /// No file `path`.
    pub fn without(mut self, path: &str) -> Self {
        self.files.remove(path);
        self
    }

    /// ADR-0001 reads `text`, and gate.toml is the one written for it.
    pub fn adr1(self, text: &str) -> Self {
        let gate = gate_for(&[(ADR1, text)]);
        self.with(ADR1, text).with(GATE, &gate)
    }

    /// The files committed ("Initial") on `main`; HEAD on a new branch `pr` at that commit.
    /// Returns the repository and the commit.
    pub fn on_branch_pr(self) -> (GitRepo, Oid) {
        let mut g = GitRepo::init();
        let files: Vec<(&str, Option<&str>)> =
            self.files.iter().map(|(p, t)| (p.as_str(), Some(t.as_str()))).collect();
        let base = g.commit_files("Initial", &files);
        g.branch("pr", base);
        (g, base)
    }
}
