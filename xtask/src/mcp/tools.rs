//! The tools of `cargo xtask mcp`: each one's arguments (JSON Schema from the type, unknown
//! fields refused), its structured result (JSON Schema from the type) and what it runs. The
//! commands that measure or write (`bench`, `gate`, `compare`, `adr_new`, `acceptance`) run as child
//! processes of this binary ([`super::child`]) with their output under `target/mcp/`; their
//! result holds the JSON of the file they wrote (`bench`: summary.json, trials.json or
//! capacity.json), read back through its typed artifact. The
//! checks that only read (`adr_lint`, `adr_check`, `explain_record`) run in the server.
//!
//! No argument of a tool can become a flag of its command: an option's value is one word with its
//! flag (`--set=VALUE`), and the positional arguments (a run directory, a title) come after `--`,
//! so `{"run": "--help"}` names a directory called `--help`.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::child::{Finished, Job};

/// Where the tools write what they measure, under the repository root.
pub(crate) const OUT_DIR: &str = "target/mcp";

/// `bench`: measure a profile.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BenchArgs {
    /// The bench profile of configs/bench.toml (default `default`: the embedded simulator
    /// unless the profile names a target).
    #[serde(default)]
    pub profile: Option<String>,
    /// Settings over the profile, `KEY=VALUE` as `cargo xtask bench --set` takes them
    /// (`load.concurrency=8`, `workload.max_tokens=64`).
    #[serde(default)]
    pub overrides: Vec<String>,
    /// Measure the profile this many times: a trial set (trials.json) with every gated
    /// metric's estimate and interval.
    #[serde(default)]
    pub trials: Option<u32>,
    /// Measured requests per run (the profile's when absent).
    #[serde(default)]
    pub requests: Option<u64>,
    /// A target of configs/bench.toml to measure instead of the profile's.
    #[serde(default)]
    pub target: Option<String>,
    /// Search the capacity under the SLO instead of measuring one run: the highest load at
    /// which the profile's goodput SLO holds (`cargo xtask bench --capacity`); the result is
    /// capacity.json.
    #[serde(default)]
    pub capacity: Option<CapacityArgs>,
}

/// Which load a capacity search varies.
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CapacityDimension {
    /// Closed loop: concurrent requests.
    Concurrency,
    /// Open loop: requests per second.
    Rate,
}

/// A capacity search's settings, as `cargo xtask bench --capacity` takes them (docs/capacity.md);
/// each absent one has the command's default.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CapacityArgs {
    /// The load searched (`--capacity`).
    pub dimension: CapacityDimension,
    /// The SLO attainment a load must reach, within (0, 1] (default 0.95).
    #[serde(default)]
    pub target: Option<f64>,
    /// Percentile limits every load must hold too, `METRIC<=VALUE`
    /// (`metrics.ttft_ms.p99<=350`).
    #[serde(default)]
    pub limits: Vec<String>,
    /// The first load probed (default 1).
    #[serde(default)]
    pub start: Option<f64>,
    /// The highest load probed.
    #[serde(default)]
    pub max: Option<f64>,
    /// The bracket's relative width at which the search stops, within (0, 1) (default 0.1).
    #[serde(default)]
    pub resolution: Option<f64>,
    /// Trials a probe measures before its first decision and the most it grows to, `MIN..MAX`
    /// or `N` (default `3..5`).
    #[serde(default)]
    pub trials: Option<String>,
    /// What the search may spend: requests (`5000`), a time (`20m`) or both (`5000,20m`).
    #[serde(default)]
    pub budget: Option<String>,
    /// Coverage of each probe's decision, within (0, 1) (default 0.95).
    #[serde(default)]
    pub confidence: Option<f64>,
    /// Each trial's length in seconds (default: trials are counted in requests).
    #[serde(default)]
    pub stage_duration: Option<f64>,
    /// The share of each trial dropped as warmup, within 0..0.9 (default 1/3).
    #[serde(default)]
    pub warmup_fraction: Option<f64>,
}

impl CapacityArgs {
    /// The flags of `bench --capacity`, each one word.
    fn push(&self, args: &mut Vec<String>) {
        let dim = match self.dimension {
            CapacityDimension::Concurrency => "concurrency",
            CapacityDimension::Rate => "rate",
        };
        push_opt(args, "--capacity", Some(dim));
        let n = |v: Option<f64>| v.map(|v| v.to_string());
        push_opt(args, "--capacity-target", n(self.target).as_deref());
        push_each(args, "--capacity-limit", &self.limits);
        push_opt(args, "--capacity-start", n(self.start).as_deref());
        push_opt(args, "--capacity-max", n(self.max).as_deref());
        push_opt(args, "--capacity-resolution", n(self.resolution).as_deref());
        push_opt(args, "--capacity-trials", self.trials.as_deref());
        push_opt(args, "--capacity-budget", self.budget.as_deref());
        push_opt(args, "--confidence", n(self.confidence).as_deref());
        push_opt(args, "--stage-duration", n(self.stage_duration).as_deref());
        push_opt(args, "--warmup-fraction", n(self.warmup_fraction).as_deref());
    }

    /// The requests the search may send, when its budget says.
    fn budget_requests(&self) -> Option<f64> {
        let budget = self.budget.as_deref()?.parse::<infergate_model::capacity::Budget>().ok()?;
        budget.requests.map(|r| r as f64)
    }
}

/// `gate`: a run against the live records' thresholds, or an A/B gate.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GateArgs {
    /// A run directory, trial set, sweep or strategy comparison (relative to the repository
    /// root). Exactly one of `run` and `ab`.
    #[serde(default)]
    pub run: Option<String>,
    /// With `run`: the thresholds file (default thresholds/gate.toml).
    #[serde(default)]
    pub thresholds: Option<String>,
    /// Measure the base revision's engine config against the working tree's in one job and
    /// decide each metric on the paired difference (`cargo xtask bench ab`).
    #[serde(default)]
    pub ab: Option<AbArgs>,
    /// Neither read nor append the noise history (the git ref `refs/infergate/history`), which
    /// the gate of a trial set and the A/B gate otherwise pool with and append to.
    #[serde(default)]
    pub no_history: bool,
}

/// The A/B gate's settings (`cargo xtask bench ab`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AbArgs {
    /// The baseline's revision (default: the merge base of HEAD and origin/main, else main).
    #[serde(default)]
    pub base: Option<String>,
    /// The bench profile both arms run (default `default`).
    #[serde(default)]
    pub profile: Option<String>,
    /// Settings for both arms, `KEY=VALUE` (bench settings, or engine keys such as
    /// `engine.gpu_memory_utilization=0.45`).
    #[serde(default)]
    pub sets: Vec<String>,
    /// Settings for the candidate only, `KEY=VALUE`.
    #[serde(default)]
    pub candidate_sets: Vec<String>,
    /// The requests the whole gate may send, both arms, warmups included.
    #[serde(default)]
    pub max_requests: Option<u64>,
    /// Measured requests per trial.
    #[serde(default)]
    pub trial_requests: Option<u32>,
    /// The engine of each arm: `sim` (default), `llama-cpp` or `vllm`.
    #[serde(default)]
    pub engine: Option<String>,
}

/// `compare`: two runs or trial sets metric by metric.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CompareArgs {
    /// The baseline: a run directory or a trial set's directory.
    pub a: String,
    /// The candidate.
    pub b: String,
    /// Metrics to compare (dotted summary.json names); default: latencies, throughput,
    /// goodput and failures.
    #[serde(default)]
    pub metrics: Vec<String>,
}

/// `adr_new`: draft the next decision record from measured runs.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AdrNewArgs {
    /// The decision's title.
    pub title: String,
    /// The baseline run (a run, trial set, sweep, acceptance, comparison or capacity
    /// directory).
    #[serde(default)]
    pub baseline: Option<String>,
    /// The experiment runs, in order.
    #[serde(default)]
    pub experiments: Vec<String>,
    /// A tune directory instead of baseline and experiments.
    #[serde(default)]
    pub tune: Option<String>,
    /// The experiment the record adopts (1..=n; 0 keeps the baseline).
    #[serde(default)]
    pub choose: Option<usize>,
    /// Headroom of the proposed thresholds (`10%` or a fraction).
    #[serde(default)]
    pub headroom: Option<String>,
    /// Who decides.
    #[serde(default)]
    pub deciders: Option<String>,
}

/// `adr_lint`, `adr_check`: no argument but the revisions.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoArgs {}

/// `adr_check`: the pull-request rule between two revisions.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AdrCheckArgs {
    /// The branch the change merges into (`origin/main`, a SHA, a tag).
    pub base: String,
    /// The change's revision (default HEAD).
    #[serde(default)]
    pub head: Option<String>,
}

/// `acceptance`: the three-layer acceptance of a candidate engine against a baseline.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AcceptArgs {
    /// The baseline target (a `[targets.NAME]` of configs/bench.toml).
    pub baseline: String,
    /// The candidate target.
    pub candidate: String,
    /// The JSONL dataset (default configs/acceptance/dataset.jsonl).
    #[serde(default)]
    pub dataset: Option<String>,
    /// A target that scores semantic similarity (reported, never gating).
    #[serde(default)]
    pub judge: Option<String>,
    /// Evaluate every layer even when an earlier one failed.
    #[serde(default)]
    pub all: bool,
    /// Request pairs in flight.
    #[serde(default)]
    pub concurrency: Option<u32>,
}

/// The result of a tool that ran a command.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CommandOutput {
    /// The command that ran (`cargo xtask bench --profile default ...`).
    pub command: String,
    /// Its exit code (docs/exit-codes.md); null when it was stopped by a signal.
    pub exit_code: Option<i32>,
    /// The exit code's name: `success`, `policy-violated`, `usage-error`, `inconclusive`,
    /// `interrupted`; `cancelled` when the client cancelled the call.
    pub status: String,
    /// What the command wrote (a run directory, a file, a record), relative to the repository
    /// root.
    pub wrote: Option<String>,
    /// The JSON of the file it wrote (summary.json, trials.json, the gate's report, ab.json,
    /// compare.json, acceptance.json), as the file holds it; null when it wrote none.
    pub result: Option<serde_json::Value>,
    /// What the command printed (its console report), secrets removed.
    pub console: String,
    /// Its errors, warnings and notes (stderr), secrets removed.
    pub diagnostics: String,
}

/// `adr_lint`'s result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct LintOutput {
    /// Whether every record passes.
    pub passed: bool,
    /// Records read.
    pub records: usize,
    pub problems: Vec<ProblemOut>,
}

/// A problem in a file.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ProblemOut {
    pub path: String,
    pub line: usize,
    pub message: String,
}

/// `adr_check`'s result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CheckOutput {
    /// Whether the change may merge (exit code 0).
    pub passed: bool,
    pub exit_code: u8,
    /// `base (sha)`, `head (sha)`.
    pub base: String,
    pub head: String,
    pub merge_base: String,
    /// The governed files compared.
    pub governed: Vec<String>,
    /// Changed governed keys no added record names with their new value.
    pub uncovered: Vec<KeyChangeOut>,
    /// Every changed governed key, covered or not.
    pub changes: Vec<KeyChangeOut>,
    /// Rule violations besides uncovered keys (lint, stale gate.toml, edited Accepted records).
    pub violations: Vec<String>,
    /// The report as `cargo xtask adr check` prints it, with the `adr new` command to write.
    pub report: String,
}

/// One changed governed key.
#[derive(Debug, Serialize, JsonSchema)]
pub struct KeyChangeOut {
    pub file: String,
    pub key: String,
    /// The value at the merge base (TOML), null when added.
    pub old: Option<String>,
    /// The value at head (TOML), null when removed.
    pub new: Option<String>,
    /// The records that cover it (`ADR-0007`).
    pub covered_by: Vec<String>,
}

/// A unique directory or file name under [`OUT_DIR`] for one call of `tool`.
pub(crate) fn out_path(tool: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%3f");
    Path::new(OUT_DIR).join(format!("{tool}-{stamp}-{}-{n}", std::process::id()))
}

impl BenchArgs {
    /// The command, writing into `out`.
    pub fn job(&self, out: &Path) -> Job {
        let mut args = vec!["bench".to_string()];
        push_opt(&mut args, "--profile", self.profile.as_deref());
        push_opt(&mut args, "--target", self.target.as_deref());
        push_each(&mut args, "--set", &self.overrides);
        push_opt(&mut args, "--trials", self.trials.map(|n| n.to_string()).as_deref());
        push_opt(&mut args, "--requests", self.requests.map(|n| n.to_string()).as_deref());
        if let Some(c) = &self.capacity {
            c.push(&mut args);
        }
        push_opt(&mut args, "--out", Some(&out.to_string_lossy()));
        let total = match &self.capacity {
            Some(c) => c.budget_requests(),
            None => self.requests.map(|r| (r * u64::from(self.trials.unwrap_or(1))) as f64),
        };
        Job { args, watch: Some(out.to_path_buf()), total }
    }
}

impl GateArgs {
    /// The command and the file or directory it writes: `gate --json=FILE -- RUN`, or
    /// `bench ab ... --out=DIR -- [BASE_REV]`.
    pub fn job(&self, out: &Path) -> Result<Job, GateJobError> {
        match (&self.run, &self.ab) {
            (Some(run), None) => {
                let mut args = vec!["gate".to_string()];
                push_opt(&mut args, "--thresholds", self.thresholds.as_deref());
                push_opt(&mut args, "--json", Some(&out.to_string_lossy()));
                if self.no_history {
                    args.push("--no-history".into());
                }
                push_positional(&mut args, &[run]);
                Ok(Job { args, watch: None, total: None })
            }
            (None, Some(ab)) if self.thresholds.is_none() => Ok(ab.job(out, self.no_history)),
            (None, Some(_)) => Err(GateJobError::ThresholdsWithAb),
            (Some(_), Some(_)) => Err(GateJobError::RunAndAb),
            (None, None) => Err(GateJobError::NothingToGate),
        }
    }
}

/// `gate` arguments that name no command: what to give instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum GateJobError {
    #[error(
        "`thresholds` goes with `run`; an A/B gate takes the live records' budgets and thresholds"
    )]
    ThresholdsWithAb,
    #[error("give `run` (a run to gate) or `ab` (an A/B gate), not both")]
    RunAndAb,
    #[error("give `run` (a run directory to gate) or `ab` (an A/B gate)")]
    NothingToGate,
}

impl AbArgs {
    fn job(&self, out: &Path, no_history: bool) -> Job {
        let mut args = vec!["bench".to_string(), "ab".to_string()];
        push_opt(&mut args, "--profile", self.profile.as_deref());
        push_each(&mut args, "--set", &self.sets);
        push_each(&mut args, "--candidate-set", &self.candidate_sets);
        push_opt(&mut args, "--max-requests", self.max_requests.map(|n| n.to_string()).as_deref());
        push_opt(
            &mut args,
            "--trial-requests",
            self.trial_requests.map(|n| n.to_string()).as_deref(),
        );
        push_opt(&mut args, "--engine", self.engine.as_deref());
        push_opt(&mut args, "--out", Some(&out.to_string_lossy()));
        if no_history {
            args.push("--no-history".into());
        }
        if let Some(rev) = &self.base {
            push_positional(&mut args, &[rev]);
        }
        Job { args, watch: Some(out.to_path_buf()), total: self.max_requests.map(|n| n as f64) }
    }
}

impl CompareArgs {
    pub fn job(&self, out: &Path) -> Job {
        let mut args = vec!["compare".to_string()];
        push_each(&mut args, "--metric", &self.metrics);
        push_opt(&mut args, "--out", Some(&out.to_string_lossy()));
        push_positional(&mut args, &[&self.a, &self.b]);
        Job { args, watch: None, total: None }
    }
}

impl AdrNewArgs {
    pub fn job(&self) -> Job {
        let mut args = vec!["adr".to_string(), "new".to_string()];
        push_opt(&mut args, "--baseline", self.baseline.as_deref());
        push_each(&mut args, "--exp", &self.experiments);
        push_opt(&mut args, "--tune", self.tune.as_deref());
        push_opt(&mut args, "--choose", self.choose.map(|n| n.to_string()).as_deref());
        push_opt(&mut args, "--headroom", self.headroom.as_deref());
        push_opt(&mut args, "--deciders", self.deciders.as_deref());
        push_positional(&mut args, &[&self.title]);
        Job { args, watch: None, total: None }
    }
}

impl AcceptArgs {
    pub fn job(&self, out: &Path) -> Job {
        let mut args = vec!["acceptance".to_string()];
        push_opt(&mut args, "--baseline-target", Some(&self.baseline));
        push_opt(&mut args, "--candidate-target", Some(&self.candidate));
        push_opt(&mut args, "--dataset", self.dataset.as_deref());
        push_opt(&mut args, "--judge", self.judge.as_deref());
        if self.all {
            args.push("--all".into());
        }
        push_opt(&mut args, "--concurrency", self.concurrency.map(|n| n.to_string()).as_deref());
        push_opt(&mut args, "--out", Some(&out.to_string_lossy()));
        Job { args, watch: Some(out.to_path_buf()), total: None }
    }
}

/// `--flag=value`: a value that starts with `-` is never taken for a flag.
fn push_opt(args: &mut Vec<String>, flag: &str, value: Option<&str>) {
    if let Some(v) = value {
        args.push(format!("{flag}={v}"));
    }
}

fn push_each(args: &mut Vec<String>, flag: &str, values: &[String]) {
    for v in values {
        push_opt(args, flag, Some(v));
    }
}

/// The positional arguments, last and after `--`: each is a value, whatever it starts with.
fn push_positional(args: &mut Vec<String>, values: &[&String]) {
    args.push("--".into());
    args.extend(values.iter().map(|v| v.to_string()));
}

impl CommandOutput {
    /// The output of a finished command, with the JSON of what it wrote.
    pub fn new(
        command: String,
        done: &Finished,
        wrote: Option<&Path>,
        result: Option<serde_json::Value>,
    ) -> CommandOutput {
        let status = if done.cancelled {
            "cancelled".to_string()
        } else {
            match done.code {
                Some(c) => crate::exit::EXIT_CODES
                    .iter()
                    .find(|e| i32::from(e.code) == c)
                    .map_or_else(|| format!("exit code {c}"), |e| e.name.to_string()),
                None => "killed".to_string(),
            }
        };
        CommandOutput {
            command,
            exit_code: done.code,
            status,
            wrote: wrote.map(|p| p.to_string_lossy().replace('\\', "/")),
            result,
            console: done.stdout.clone(),
            diagnostics: done.stderr.clone(),
        }
    }

    /// Whether the command could not do what it was asked (a usage or tool error, a kill):
    /// the call's result is then an error result. A failed gate is a result, not an error.
    pub(crate) fn is_error(&self) -> bool {
        !matches!(self.exit_code, Some(0 | 1 | 3 | 4 | 130))
    }

    /// The short text beside the structured result: the status, then the console report, or
    /// the diagnostics when the command failed.
    pub fn text(&self, headline: &str) -> String {
        let mut t = format!("{headline}\n{} -> {}", self.command, self.status);
        if let Some(w) = &self.wrote {
            t.push_str(&format!("; wrote {w}"));
        }
        t.push('\n');
        let body = if self.is_error() { &self.diagnostics } else { &self.console };
        t.push_str(clip(body, 6000));
        t
    }
}

/// The end of `text`, at most about `n` bytes.
fn clip(text: &str, n: usize) -> &str {
    if text.len() <= n {
        return text;
    }
    let start = (text.len() - n..text.len()).find(|&i| text.is_char_boundary(i)).unwrap_or(0);
    &text[start..]
}

/// `adr_lint` in the server: every record against the format rules.
pub fn lint(root: &Path) -> anyhow::Result<LintOutput> {
    let report =
        infergate_policy::adr::lint::lint_dir(root, Path::new(infergate_policy::adr::ADR_DIR))?;
    let problems: Vec<ProblemOut> = report
        .problems
        .iter()
        .map(|p| ProblemOut {
            path: p.path.to_string_lossy().replace('\\', "/"),
            line: p.line,
            message: p.message.clone(),
        })
        .collect();
    Ok(LintOutput { passed: problems.is_empty(), records: report.files, problems })
}

/// `adr_check` in the server: the pull-request rule between `base` and `head`.
pub fn check(root: &Path, args: &AdrCheckArgs) -> anyhow::Result<CheckOutput> {
    use crate::adr_check as check;
    let head = args.head.as_deref().unwrap_or("HEAD");
    let r = check::check(root, infergate_policy::adr::ADR_DIR, &args.base, head)?;
    let change = |c: &check::rule::Coverage| KeyChangeOut {
        file: c.change.file.clone(),
        key: c.change.key.clone(),
        old: c.change.old.as_ref().map(check::semdiff::inline),
        new: c.change.new.as_ref().map(check::semdiff::inline),
        covered_by: c.covered_by.iter().map(|n| n.label.clone()).collect(),
    };
    let status = r.outcome.status();
    Ok(CheckOutput {
        passed: status == crate::exit::Status::Success,
        exit_code: status.code(),
        base: format!("{} ({})", r.base.name, r.base.id),
        head: format!("{} ({})", r.head.name, r.head.id),
        merge_base: r.merge_base.clone(),
        governed: r.governed.clone(),
        uncovered: r.outcome.uncovered().map(change).collect(),
        changes: r.outcome.coverage.iter().map(change).collect(),
        violations: r.outcome.violations.iter().map(|v| v.to_string()).collect(),
        report: check::render(&r, false),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_become_the_commands_flags_as_one_word_each() {
        let b = BenchArgs {
            profile: Some("default".into()),
            overrides: vec!["load.concurrency=4".into(), "workload.max_tokens=-1".into()],
            trials: Some(3),
            requests: Some(20),
            target: None,
            capacity: None,
        };
        let job = b.job(Path::new("target/mcp/bench-x"));
        assert_eq!(
            job.args,
            [
                "bench",
                "--profile=default",
                "--set=load.concurrency=4",
                "--set=workload.max_tokens=-1",
                "--trials=3",
                "--requests=20",
                "--out=target/mcp/bench-x"
            ]
        );
        assert_eq!(job.total, Some(60.0));
        let c = BenchArgs {
            profile: None,
            overrides: vec![],
            trials: None,
            requests: None,
            target: None,
            capacity: Some(CapacityArgs {
                dimension: CapacityDimension::Rate,
                target: Some(0.99),
                limits: vec!["metrics.ttft_ms.p99<=350".into()],
                start: None,
                max: Some(64.0),
                resolution: None,
                trials: Some("2..3".into()),
                budget: Some("5000,20m".into()),
                confidence: None,
                stage_duration: None,
                warmup_fraction: Some(0.25),
            }),
        };
        let job = c.job(Path::new("target/mcp/bench-c"));
        assert_eq!(
            job.args,
            [
                "bench",
                "--capacity=rate",
                "--capacity-target=0.99",
                "--capacity-limit=metrics.ttft_ms.p99<=350",
                "--capacity-max=64",
                "--capacity-trials=2..3",
                "--capacity-budget=5000,20m",
                "--warmup-fraction=0.25",
                "--out=target/mcp/bench-c"
            ]
        );
        assert_eq!(job.total, Some(5000.0), "the budget's requests");
        let gate = |run: Option<&str>, ab: bool| GateArgs {
            run: run.map(String::from),
            thresholds: None,
            no_history: false,
            ab: ab.then(|| AbArgs {
                base: None,
                profile: None,
                sets: vec![],
                candidate_sets: vec!["sim.slowdown=1.2".into()],
                max_requests: Some(400),
                trial_requests: None,
                engine: None,
            }),
        };
        let out = Path::new("target/mcp/gate-x");
        assert_eq!(
            gate(Some("runs/a"), false).job(out).unwrap().args,
            ["gate", "--json=target/mcp/gate-x", "--", "runs/a"]
        );
        assert_eq!(
            gate(None, true).job(out).unwrap().args,
            [
                "bench",
                "ab",
                "--candidate-set=sim.slowdown=1.2",
                "--max-requests=400",
                "--out=target/mcp/gate-x"
            ]
        );
        assert!(gate(None, false).job(out).is_err());
        let quiet = GateArgs { no_history: true, ..gate(Some("runs/a"), false) };
        assert_eq!(
            quiet.job(out).unwrap().args,
            ["gate", "--json=target/mcp/gate-x", "--no-history", "--", "runs/a"]
        );
        assert!(gate(Some("r"), true).job(out).is_err());
    }

    /// Every string a tool takes, `--help` and `-x` included, reaches the command's parser as
    /// that value: the real command line parses with each field holding it.
    #[test]
    fn arguments_that_look_like_flags_are_parsed_as_values() {
        use crate::Command as C;
        let parse = |job: Job| {
            let mut argv = vec!["cargo xtask".to_string()];
            argv.extend(job.args);
            <crate::Cli as clap::Parser>::try_parse_from(&argv)
                .unwrap_or_else(|e| panic!("{argv:?} does not parse: {e}"))
                .command
        };
        let h = || "--help".to_string();
        let out = Path::new("target/mcp/x");

        let gate =
            GateArgs { run: Some(h()), thresholds: Some("-t".into()), ab: None, no_history: false };
        let C::Gate(g) = parse(gate.job(out).unwrap()) else { panic!("not gate") };
        assert_eq!((g.run.unwrap(), g.decide.thresholds), ("--help".into(), "-t".into()));

        let ab = AbArgs {
            base: Some("--json".into()),
            profile: Some(h()),
            sets: vec!["--out".into()],
            candidate_sets: vec!["-C".into()],
            max_requests: None,
            trial_requests: None,
            engine: None,
        };
        let gate = GateArgs { run: None, thresholds: None, ab: Some(ab), no_history: true };
        let C::Bench(b) = parse(gate.job(out).unwrap()) else { panic!("not bench") };
        let Some(crate::measure::bench::BenchAction::Ab(g)) = b.action else {
            panic!("not bench ab")
        };
        assert_eq!((g.ab.ab.as_deref(), g.ab.no_history), (Some("--json"), true));
        assert_eq!(
            (g.ab.flags.profile.as_str(), g.ab.flags.sets, g.ab.candidate_sets),
            ("--help", vec!["--out".to_string()], vec!["-C".to_string()])
        );

        let compare = CompareArgs { a: h(), b: "-V".into(), metrics: vec!["--out".into()] };
        let C::Compare(c) = parse(compare.job(out)) else { panic!("not compare") };
        assert_eq!(
            (c.a, c.b, c.metrics),
            ("--help".into(), "-V".into(), vec!["--out".to_string()])
        );

        let new = AdrNewArgs {
            title: h(),
            baseline: Some("-b".into()),
            experiments: vec!["--tune".into(), "-x".into()],
            tune: None,
            choose: Some(1),
            headroom: None,
            deciders: Some("--version".into()),
        };
        let C::Adr(a) = parse(new.job()) else { panic!("not adr") };
        let crate::adr::AdrSub::New(n) = a.command else { panic!("not adr new") };
        assert_eq!((n.title.as_str(), n.baseline.unwrap()), ("--help", "-b".into()));
        assert_eq!(n.experiments, [PathBuf::from("--tune"), PathBuf::from("-x")]);
        assert_eq!(n.deciders.as_deref(), Some("--version"));

        let bench = BenchArgs {
            profile: Some(h()),
            overrides: vec!["--out=/tmp".into()],
            trials: None,
            requests: None,
            target: Some("-q".into()),
            capacity: None,
        };
        let C::Bench(b) = parse(bench.job(out)) else { panic!("not bench") };
        let b = b.args;
        assert_eq!((b.flags.profile.as_str(), b.target.as_deref()), ("--help", Some("-q")));
        assert_eq!(
            (b.flags.sets, b.out),
            (vec!["--out=/tmp".to_string()], Some(out.to_path_buf()))
        );

        let accept = AcceptArgs {
            baseline: h(),
            candidate: "-V".into(),
            dataset: Some("--all".into()),
            judge: Some("-h".into()),
            all: false,
            concurrency: None,
        };
        let C::Acceptance(a) = parse(accept.job(out)) else { panic!("not acceptance") };
        assert_eq!((a.baseline.as_deref(), a.candidate.as_deref()), (Some("--help"), Some("-V")));
        assert_eq!((a.dataset, a.judge.as_deref(), a.all), ("--all".into(), Some("-h"), false));
    }

    #[test]
    fn a_failed_gate_is_a_result_and_a_usage_error_is_an_error() {
        let done = |code| Finished {
            code,
            stdout: "table".into(),
            stderr: "error: no such run".into(),
            cancelled: false,
        };
        let failed = CommandOutput::new("cargo xtask gate r".into(), &done(Some(1)), None, None);
        assert_eq!(failed.status, "policy-violated");
        assert!(!failed.is_error());
        assert!(failed.text("gate").contains("table"));
        let usage = CommandOutput::new("cargo xtask gate r".into(), &done(Some(2)), None, None);
        assert_eq!(usage.status, "usage-error");
        assert!(usage.is_error() && usage.text("gate").contains("no such run"));
        assert!(CommandOutput::new(String::new(), &done(None), None, None).is_error());
    }
}
