//! Batching strategies side by side (`cargo xtask bench --compare-strategies`): the engine config
//! of each strategy, and the comparison table built from the runs' summaries.
//!
//! Each strategy runs the same bench profile against the embedded simulator with an engine
//! config that differs from the base file only in `[batch]` (the strategy and its parameter,
//! written out explicitly), so every run directory is a normal run whose `engine.params` names
//! its strategy. The table reads only the summaries.
//!
//! Cost, from the base file's `[device]`:
//!
//! ```text
//! device_seconds          = measured window seconds x device count
//! cost                    = device_seconds x price_per_hour / 3600
//! cost per 1M output tok  = cost / output tokens x 1e6
//! ```
//!
//! (device count = `[device] count`, else `tensor_parallel_size`). A summary that carries its
//! own `cost` section supplies those figures instead; the definitions are the same.

use serde::{Deserialize, Serialize};

use crate::config::{BatchStrategy, ConfigError, EngineConfig, Source};
use crate::summary::{RunStatus, Summary};

/// File name of the comparison in the comparison directory.
pub const COMPARISON_FILE: &str = "comparison.json";
/// The format of `comparison.json` this tool writes.
pub const COMPARISON_FORMAT: u32 = 1;

impl crate::artifact::Artifact for StrategyComparison {
    const FILE: &'static str = COMPARISON_FILE;
    const VERSION: u32 = COMPARISON_FORMAT;
    const WHAT: &'static str = "a strategy comparison";
    const UNVERSIONED: Option<u64> = Some(0);

    /// Format 0 is format 1 without its version field.
    fn upgrade(
        found: u64,
        mut doc: serde_json::Value,
    ) -> Result<serde_json::Value, crate::artifact::UpgradeError> {
        use crate::artifact::UpgradeError;
        match (found, doc.as_object_mut()) {
            (0, Some(o)) => {
                o.insert("format_version".into(), COMPARISON_FORMAT.into());
                Ok(doc)
            }
            (0, None) => Err(UpgradeError::NotAnObject),
            _ => Err(UpgradeError::NeverWritten { found }),
        }
    }
}

/// Why a list of strategies cannot be compared.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StrategyListError {
    #[error(transparent)]
    Unknown(#[from] crate::config::UnknownStrategy),
    #[error("strategy `{0}` is listed twice")]
    Twice(BatchStrategy),
    #[error("name at least one strategy: serial, fixed, token_budget, continuous")]
    Empty,
}

/// Parse `serial,fixed,token_budget,continuous` (order kept, duplicates refused).
pub fn parse_strategies(list: &str) -> Result<Vec<BatchStrategy>, StrategyListError> {
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let s = BatchStrategy::parse(name)?;
        if out.contains(&s) {
            return Err(StrategyListError::Twice(s));
        }
        out.push(s);
    }
    if out.is_empty() {
        return Err(StrategyListError::Empty);
    }
    Ok(out)
}

/// The base engine config with `[batch] strategy = <strategy>` and the strategy's own parameter
/// written out (`fixed_batch_size`, `max_token_budget`, `max_wait_ms` at their effective values),
/// as the text of a new file. Everything else is kept. Errors name the base file and line.
pub fn variant_config(base: &Source, strategy: BatchStrategy) -> Result<String, ConfigError> {
    let config = EngineConfig::from_source(base)?;
    let mut table: toml::Table = toml::from_str(&base.text).map_err(|e| base.toml_error(&e))?;
    let batch = table
        .entry("batch")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()))
        .as_table_mut()
        .ok_or_else(|| base.error_at(&["batch"], "`batch` must be a table ([batch])"))?;
    batch.insert("strategy".into(), strategy.as_str().into());
    let b = &config.batch;
    match strategy {
        BatchStrategy::Fixed => {
            let size = b.fixed_batch_size_for(config.scheduler.max_num_seqs);
            batch.insert("fixed_batch_size".into(), (size as i64).into());
            batch.insert("max_wait_ms".into(), b.max_wait_ms().into());
        }
        BatchStrategy::TokenBudget => {
            let len = config.engine.max_model_len.unwrap_or(0);
            batch.insert("max_token_budget".into(), (b.max_token_budget_for(len) as i64).into());
            batch.insert("max_wait_ms".into(), b.max_wait_ms().into());
        }
        BatchStrategy::Serial | BatchStrategy::Continuous => {}
    }
    let body = toml::to_string(&table).expect("TOML tables serialize");
    let text = format!(
        "# {} with [batch] strategy = \"{strategy}\", written by \
         `cargo xtask bench --compare-strategies`.\n\n{body}",
        base.path.display()
    );
    // The variant must be as valid as its base.
    EngineConfig::from_source(&Source::new(base.path.clone(), text.clone()))?;
    Ok(text)
}

/// The batch size or token budget of a strategy, in words, from the config.
pub(crate) fn batching_label(config: &EngineConfig) -> String {
    let b = &config.batch;
    let budget = config.max_num_batched_tokens();
    match b.strategy {
        BatchStrategy::Serial => "1 request".into(),
        BatchStrategy::Fixed => {
            let size = b.fixed_batch_size_for(config.scheduler.max_num_seqs);
            format!("{size} requests, wait {} ms", b.max_wait_ms())
        }
        BatchStrategy::TokenBudget => match b.max_token_budget {
            Some(n) => format!("{n} tokens, wait {} ms", b.max_wait_ms()),
            None => match config.engine.max_model_len {
                Some(len) => {
                    format!("{} tokens, wait {} ms", b.max_token_budget_for(len), b.max_wait_ms())
                }
                None => format!("default tokens, wait {} ms", b.max_wait_ms()),
            },
        },
        BatchStrategy::Continuous => format!(
            "<= {} seqs, {} tokens/step",
            config.scheduler.max_num_seqs,
            budget.map_or_else(|| "default".to_string(), |n| n.to_string())
        ),
    }
}

/// One strategy's row of the comparison. Blank (`null`) = not measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StrategyRow {
    pub strategy: BatchStrategy,
    /// Batch size or token budget.
    pub batching: String,
    /// The run directory.
    pub run_dir: String,
    pub status: RunStatus,
    pub ok: u64,
    pub failed: u64,
    pub mean_ttft_ms: Option<f64>,
    /// Mean completion time (end to end).
    pub mean_e2e_ms: Option<f64>,
    /// Mean queue time the server reported.
    pub mean_queue_ms: Option<f64>,
    /// Prompt + output tokens of the ok requests.
    pub total_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub output_tokens_per_s: Option<f64>,
    pub device_seconds: Option<f64>,
    pub cost: Option<f64>,
    pub cost_per_1m_output_tokens: Option<f64>,
}

impl StrategyRow {
    /// A row from a run's summary; `config` is the engine config the run used (batching label,
    /// device price and count).
    pub fn from_summary(
        strategy: BatchStrategy,
        config: &EngineConfig,
        summary: &Summary,
        run_dir: &str,
    ) -> StrategyRow {
        let m = &summary.metrics;
        let t = &summary.tokens;
        let device = config.device.as_ref();
        let devices = summary
            .cost
            .devices
            .or_else(|| device.map(|d| d.count.unwrap_or(config.gpus())))
            .unwrap_or(config.gpus());
        let price = summary.cost.price_per_hour.or(device.and_then(|d| d.price_per_hour));
        let device_seconds = summary
            .cost
            .device_seconds
            .or_else(|| summary.timing.window.duration_s.map(|s| s * devices as f64));
        let cost = summary.cost.total.or_else(|| Some(device_seconds? * price? / 3600.0));
        let cost_per_1m = summary.cost.per_1m_output_tokens.or_else(|| {
            let out = t.output_total.filter(|&n| n > 0)?;
            Some(cost? / out as f64 * 1e6)
        });
        StrategyRow {
            strategy,
            batching: batching_label(config),
            run_dir: run_dir.to_string(),
            status: summary.status,
            ok: summary.requests.ok,
            failed: summary.requests.failed,
            mean_ttft_ms: m.ttft_ms.as_ref().map(|s| s.mean),
            mean_e2e_ms: m.e2e_ms.as_ref().map(|s| s.mean),
            mean_queue_ms: m.queue_ms.as_ref().map(|s| s.mean),
            total_tokens: match (t.input_total, t.output_total) {
                (Some(i), Some(o)) => Some(i + o),
                _ => None,
            },
            output_tokens: t.output_total,
            output_tokens_per_s: summary.throughput.output_tokens_per_s,
            device_seconds,
            cost,
            cost_per_1m_output_tokens: cost_per_1m,
        }
    }
}

/// The whole comparison (`comparison.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StrategyComparison {
    /// [`COMPARISON_FORMAT`]; files written before it had the field are format 0, read alike.
    pub format_version: u32,
    /// Bench profile every strategy ran.
    pub profile: String,
    /// The base engine config the variants were derived from.
    pub engine_config: String,
    pub rows: Vec<StrategyRow>,
    pub notes: Vec<String>,
}

impl StrategyComparison {
    /// Read `comparison.json` of a comparison directory (or the file itself).
    pub fn read(
        path: &std::path::Path,
    ) -> Result<StrategyComparison, crate::artifact::ArtifactError> {
        crate::artifact::read(path)
    }

    /// The run directory of each strategy in the comparison directory `dir`, in the
    /// comparison's order (each strategy runs in `<dir>/<strategy>/`).
    pub fn run_dirs(&self, dir: &std::path::Path) -> Vec<(BatchStrategy, std::path::PathBuf)> {
        self.rows.iter().map(|r| (r.strategy, dir.join(r.strategy.as_str()))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Stats;

    const BASE: &str = "# the base\n[engine]\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\n\
        max_model_len = 8192\n[scheduler]\nmax_num_seqs = 64\n[device]\nname = \"H100-SXM-80GB\"\n\
        price_per_hour = 3.6\ncount = 2\n";

    fn parse(text: &str) -> EngineConfig {
        EngineConfig::from_source(&Source::new("v.toml", text)).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn strategy_lists_parse_in_order_and_refuse_unknown_names() {
        assert_eq!(
            parse_strategies("serial, fixed,token_budget,continuous").unwrap(),
            BatchStrategy::ALL
        );
        assert_eq!(parse_strategies("fixed").unwrap(), vec![BatchStrategy::Fixed]);
        let err = parse_strategies("serial,dynamic").unwrap_err().to_string();
        assert!(err.contains("dynamic") && err.contains("token_budget"), "{err}");
        assert!(parse_strategies("fixed,fixed").unwrap_err().to_string().contains("twice"));
        assert!(parse_strategies(" , ").is_err());
    }

    #[test]
    fn variants_change_only_the_batch_section_and_name_their_parameter() {
        let base = Source::new("configs/engine.toml", BASE);
        let original = parse(BASE);
        for s in BatchStrategy::ALL {
            let text = variant_config(&base, s).unwrap();
            let v = parse(&text);
            assert_eq!(v.batch.strategy, s);
            assert_eq!(
                (&v.engine, &v.scheduler, &v.device),
                (&original.engine, &original.scheduler, &original.device)
            );
            assert!(text.starts_with("# configs/engine.toml with [batch] strategy"), "{text}");
        }
        let fixed = parse(&variant_config(&base, BatchStrategy::Fixed).unwrap());
        assert_eq!((fixed.batch.fixed_batch_size, fixed.batch.max_wait_ms), (Some(8), Some(50.0)));
        let budget = parse(&variant_config(&base, BatchStrategy::TokenBudget).unwrap());
        assert_eq!(budget.batch.max_token_budget, Some(16384));
        assert_eq!(batching_label(&budget), "16384 tokens, wait 50 ms");
        assert_eq!(batching_label(&fixed), "8 requests, wait 50 ms");
        let serial = parse(&variant_config(&base, BatchStrategy::Serial).unwrap());
        assert_eq!(batching_label(&serial), "1 request");
        let cont = parse(&variant_config(&base, BatchStrategy::Continuous).unwrap());
        assert_eq!(batching_label(&cont), "<= 64 seqs, 8192 tokens/step");
        // Values set in the base file are kept.
        let base = Source::new("e.toml", format!("{BASE}[batch]\nfixed_batch_size = 4\n"));
        let fixed = parse(&variant_config(&base, BatchStrategy::Fixed).unwrap());
        assert_eq!(fixed.batch.fixed_batch_size, Some(4));
        // A broken base is reported at its line.
        let bad = Source::new("e.toml", BASE.replace("max_num_seqs = 64", "max_num_seqs = 0"));
        let err = variant_config(&bad, BatchStrategy::Serial).unwrap_err();
        assert_eq!(err.line, Some(6), "{err}");
    }

    fn stats(mean: f64) -> Stats {
        Stats {
            count: 1,
            mean,
            stdev: 0.0,
            min: mean,
            p50: mean,
            p90: mean,
            p95: mean,
            p99: mean,
            p999: mean,
            max: mean,
        }
    }

    fn summary() -> Summary {
        use crate::summary::*;
        Summary {
            schema_version: SCHEMA_VERSION,
            run_id: "r".into(),
            status: RunStatus::Complete,
            simulated: true,
            tool: ToolInfo { name: "infergate".into(), version: "0".into() },
            git: None,
            environment: Environment::default(),
            environment_fingerprint: String::new(),
            target: TargetInfo::default(),
            config: crate::summary::RunConfig::Profile(Box::default()),
            profile: "default".into(),
            engine: None,
            invocation: None,
            timing: Timing::default(),
            requests: Default::default(),
            tokens: Default::default(),
            metrics: Default::default(),
            throughput: Default::default(),
            goodput: Default::default(),
            schedule: ScheduleSummary::default(),
            workload: WorkloadInfo::default(),
            turns: Vec::new(),
            plateau: None,
            cost: Cost::default(),
            server: None,
            isolation: None,
            extra: Default::default(),
            notes: Vec::new(),
        }
    }

    #[test]
    fn rows_compute_device_seconds_and_cost_from_the_window() {
        let mut s = summary();
        s.timing.window.duration_s = Some(10.0);
        s.tokens.input_total = Some(1000);
        s.tokens.output_total = Some(4000);
        s.metrics.ttft_ms = Some(stats(50.0));
        s.metrics.e2e_ms = Some(stats(900.0));
        s.metrics.queue_ms = Some(stats(12.5));
        let cfg = parse(BASE);
        let row = StrategyRow::from_summary(BatchStrategy::Continuous, &cfg, &s, "runs/continuous");
        assert_eq!(row.device_seconds, Some(20.0), "10 s x 2 devices");
        assert!((row.cost.unwrap() - 0.02).abs() < 1e-12, "20 device-s x 3.6 / 3600");
        assert!((row.cost_per_1m_output_tokens.unwrap() - 5.0).abs() < 1e-9);
        assert_eq!(row.total_tokens, Some(5000));
        assert_eq!(
            (row.mean_ttft_ms, row.mean_e2e_ms, row.mean_queue_ms),
            (Some(50.0), Some(900.0), Some(12.5))
        );
        // No price: cost is blank, device-seconds are still known.
        let cfg = parse(&BASE.replace("price_per_hour = 3.6\n", ""));
        let row = StrategyRow::from_summary(BatchStrategy::Continuous, &cfg, &s, "r");
        assert_eq!(
            (row.device_seconds, row.cost, row.cost_per_1m_output_tokens),
            (Some(20.0), None, None)
        );
        // No window: nothing measured, nothing estimated.
        s.timing.window.duration_s = None;
        let row = StrategyRow::from_summary(BatchStrategy::Continuous, &parse(BASE), &s, "r");
        assert_eq!((row.device_seconds, row.cost), (None, None));
        // A summary with its own cost section wins.
        s.cost.device_seconds = Some(7.0);
        s.cost.total = Some(0.5);
        let row = StrategyRow::from_summary(BatchStrategy::Continuous, &parse(BASE), &s, "r");
        assert_eq!((row.device_seconds, row.cost), (Some(7.0), Some(0.5)));
        assert!((row.cost_per_1m_output_tokens.unwrap() - 125.0).abs() < 1e-9);
    }
}
