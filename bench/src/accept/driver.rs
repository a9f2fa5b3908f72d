//! Running an acceptance: the requests, interleaved between baseline and candidate, and the
//! files of the run directory. Each dataset item goes to both targets at the same moment (the
//! pair is sent concurrently), `concurrency` pairs at a time, so both see the same load.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;

use super::business::{self, SchemaFailure, SchemaStats};
use super::dataset::{self, Item};
use super::numeric::{self, NumericStats, Position};
use super::*;
use crate::client::{Call, Exchange, Phase, RequestSlot, Sampling, request_body};
use crate::runner::{self, ConnectError, Connection, connect::Wants};
use infergate_model::config::{ClientConfig, Endpoint, Target};
use infergate_model::metrics::{MetricsAccumulator, RunMetrics, Slo};
use infergate_model::openai::StreamIntegrity;
use infergate_model::rundir::{self, RecordWriter};
use infergate_model::summary::{
    AcceptanceConfig, EngineParams, GitInfo, RunConfig, RunHeader, Summary, WorkloadInfo,
};
use infergate_model::workload::{LengthBasis, Payload};

/// A target of the acceptance.
#[derive(Clone, Debug)]
pub struct TargetSpec {
    pub name: String,
    pub target: Target,
    /// Its governed engine parameters (recorded, and the source of the cost).
    pub engine: Option<EngineParams>,
}

/// Everything an acceptance run needs.
#[derive(Clone, Debug)]
pub struct AcceptSpec {
    pub out_dir: PathBuf,
    pub run_id: String,
    pub baseline: Option<TargetSpec>,
    pub candidate: Option<TargetSpec>,
    /// An LLM that scores semantic similarity (reported, never gating).
    pub judge: Option<TargetSpec>,
    pub dataset: Option<PathBuf>,
    /// The dataset as the user named it (relative to the repository root): the name of the
    /// summaries' workload file, with the hash of its content. Default: the path.
    pub dataset_name: Option<String>,
    pub endpoint: Endpoint,
    /// Pairs in flight (the production concurrency: batching amplifies numeric drift).
    pub concurrency: u32,
    /// Items of the dataset (from its start) used for the numeric layer.
    pub numeric_items: usize,
    /// Output tokens compared per numeric item.
    pub numeric_max_tokens: u32,
    pub top_logprobs: u32,
    /// Sampling of the engine/business requests (the numeric layer is greedy).
    pub temperature: f64,
    pub seed: u64,
    /// Output tokens for items that do not set `max_tokens`.
    pub max_tokens: u32,
    pub thresholds: AcceptThresholds,
    /// Evaluate every layer even after one failed.
    pub all: bool,
    /// Logits dumps (baseline, candidate) for the numeric layer instead of log-probs.
    pub logits: Option<(PathBuf, PathBuf)>,
    pub client: ClientConfig,
    pub git: Option<GitInfo>,
    pub quiet: bool,
}

impl AcceptSpec {
    /// Defaults around two targets.
    pub fn new(out_dir: PathBuf, run_id: String) -> AcceptSpec {
        AcceptSpec {
            out_dir,
            run_id,
            baseline: None,
            candidate: None,
            judge: None,
            dataset: None,
            dataset_name: None,
            endpoint: Endpoint::Chat,
            concurrency: 8,
            numeric_items: 16,
            numeric_max_tokens: 32,
            top_logprobs: 5,
            temperature: 0.01,
            seed: 42,
            max_tokens: 128,
            thresholds: AcceptThresholds::default(),
            all: false,
            logits: None,
            client: ClientConfig::default(),
            git: None,
            quiet: true,
        }
    }
}

/// A failure that stops the acceptance before any layer could be evaluated.
#[derive(Debug, thiserror::Error)]
pub enum AcceptError {
    /// The request itself cannot be carried out (what to change is in the message).
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Dataset(#[from] infergate_model::workload::DatasetError),
    #[error("the logits cannot be compared")]
    Logits(#[from] numeric::NumericError),
    #[error("cannot use the target `{name}`")]
    Connect {
        name: String,
        #[source]
        source: ConnectError,
    },
    #[error(transparent)]
    RunDir(#[from] rundir::RunDirError),
    #[error(transparent)]
    Report(#[from] infergate_model::artifact::ArtifactError),
}

/// One target of the acceptance, connected.
struct Side {
    conn: Connection,
    engine: Option<EngineParams>,
}

impl std::ops::Deref for Side {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        &self.conn
    }
}

/// Connect a target with the bench's connect step (streamed requests on `endpoint`).
async fn connect(
    t: &TargetSpec,
    cfg: &ClientConfig,
    endpoint: Endpoint,
) -> Result<Side, AcceptError> {
    let wants = Wants { model: None, endpoint, stream: true };
    // A CA bundle of an acceptance target is named by its full path (the CLI resolves it).
    let conn =
        runner::connect::connect(&t.name, &t.target, cfg, wants, std::path::Path::new(""), None)
            .await
            .map_err(|source| AcceptError::Connect { name: t.name.clone(), source })?;
    Ok(Side { conn, engine: t.engine.clone() })
}

fn prompt_of(item: &Item) -> String {
    match &item.work.payload {
        Payload::Prompt(p) => p.clone(),
        Payload::Messages(_) => String::new(),
    }
}

fn info(quiet: bool, msg: &str) {
    if !quiet {
        eprintln!("{msg}");
    }
}

/// Run an acceptance and write its directory. Errors only when nothing could be evaluated.
pub async fn run(spec: AcceptSpec) -> Result<AcceptanceReport, AcceptError> {
    let started_at = chrono::Utc::now();
    check_spec(&spec)?;
    let dir = rundir::create(&spec.out_dir)?;
    if dir.join(REPORT_FILE).exists() {
        return Err(AcceptError::Usage(format!(
            "{} already holds an acceptance; choose another --out directory",
            dir.display()
        )));
    }
    let (items, dataset_file) = match &spec.dataset {
        Some(p) => {
            let text = infergate_model::workload::read_dataset(p)?;
            let name = spec.dataset_name.clone().unwrap_or_else(|| p.display().to_string());
            let file = infergate_model::workload::WorkloadFile::of(&name, text.as_bytes());
            (dataset::parse(p, &text, spec.max_tokens)?, Some(file))
        }
        None => (Vec::new(), None),
    };
    let sides = match (&spec.baseline, &spec.candidate) {
        (Some(b), Some(c)) => {
            let b = connect(b, &spec.client, spec.endpoint).await?;
            let c = connect(c, &spec.client, spec.endpoint).await?;
            info(
                spec.quiet,
                &format!(
                    "baseline: {} ({}); candidate: {} ({})",
                    b.resolved.url, b.resolved.model, c.resolved.url, c.resolved.model
                ),
            );
            Some((b, c))
        }
        _ => None,
    };
    if sides.is_some() && items.is_empty() {
        return Err(AcceptError::Usage("the targets need a dataset (--dataset FILE)".into()));
    }
    let numeric = numeric_pass(&spec, &dir, sides.as_ref(), &items).await?;
    let numeric_failed = numeric.verdict == LayerOutcome::Fail;
    let mut layers = vec![numeric];
    let pass = match &sides {
        None => {
            layers.extend(not_evaluated_later(
                LayerOutcome::NotRun,
                "no targets: only logits were compared",
            ));
            None
        }
        Some(_) if numeric_failed && !spec.all => {
            layers.extend(not_evaluated_later(
                LayerOutcome::Skipped,
                "the numeric layer failed (use --all to evaluate every layer)",
            ));
            None
        }
        Some((b, c)) => Some(streamed_layers(&spec, &dir, b, c, &items, &mut layers).await?),
    };
    let mut report = new_report(&spec, started_at, sides.as_ref(), &items, layers);
    report.conclude();
    if let (Some(pass), Some((b, c))) = (pass, &sides) {
        for (i, (side, role)) in [(b, "baseline"), (c, "candidate")].into_iter().enumerate() {
            let mut s = side_summary(&spec, side, &items, &pass, i, started_at);
            s.workload.files.extend(dataset_file.clone());
            s.extra.acceptance = Some(report.summary_section(role));
            let sub = dir.join(role);
            rundir::write_histograms(
                &sub,
                &pass.accs[i],
                std::time::SystemTime::now(),
                Duration::from_secs_f64(s.timing.window.duration_s.unwrap_or(0.0)),
            )?;
            rundir::write_summary(&sub, &s)?;
        }
    }
    infergate_model::artifact::write(&dir, &report)?;
    Ok(report)
}

/// Refuse a spec that cannot be carried out, before anything is created.
fn check_spec(spec: &AcceptSpec) -> Result<(), AcceptError> {
    if spec.baseline.is_some() != spec.candidate.is_some() {
        return Err(AcceptError::Usage("give both a baseline and a candidate target".into()));
    }
    if spec.baseline.is_none() && spec.logits.is_none() {
        return Err(AcceptError::Usage(
            "nothing to compare: give --baseline and --candidate targets, or logits files".into(),
        ));
    }
    if spec.concurrency == 0 {
        return Err(AcceptError::Usage("concurrency must be at least 1".into()));
    }
    Ok(())
}

/// The engine and business layers, both not evaluated for the same reason.
fn not_evaluated_later(verdict: LayerOutcome, why: &str) -> Vec<Layer> {
    ["engine", "business"].map(|l| Layer::not_evaluated(l, verdict, why.into())).into()
}

/// The numeric layer, from logits files or from greedy requests with log-probs to both
/// sides; its per-item lines go to `numeric.jsonl`.
async fn numeric_pass(
    spec: &AcceptSpec,
    dir: &Path,
    sides: Option<&(Side, Side)>,
    items: &[Item],
) -> Result<Layer, AcceptError> {
    let th = &spec.thresholds;
    let (layer, lines) = if let Some((bp, cp)) = &spec.logits {
        let b = numeric::read_npy(bp)?;
        let c = numeric::read_npy(cp)?;
        let mut stats = NumericStats::default();
        stats.add_logits(&b, &c, &th.numeric())?;
        let line = json!({"item": 0, "source": "npy", "shape": b.shape, "positions": stats.positions,
            "cos_min": stats.cos_min, "rtol_max": stats.rtol_max, "first_divergence": stats.first_divergence});
        let note = format!("logits from {} and {}", bp.display(), cp.display());
        (numeric_layer(&stats, th, vec![note]), vec![line])
    } else {
        let (b, c) = sides.expect("checked: targets or logits");
        info(spec.quiet, "numeric layer: greedy decoding with log-probs");
        let (stats, lines, mut notes) = numeric_requests(spec, b, c, items).await;
        notes.push(format!(
            "{} items x up to {} tokens, top_logprobs {}, concurrency {}",
            stats.items, spec.numeric_max_tokens, spec.top_logprobs, spec.concurrency
        ));
        (numeric_layer(&stats, th, notes), lines)
    };
    write_jsonl(&dir.join(NUMERIC_FILE), &lines)?;
    Ok(layer)
}

/// The engine and business layers: one interleaved streamed pass over the whole dataset (the
/// business layer is skipped when the engine layer failed, unless `all`). Schema failures go
/// to `business-failures.jsonl`.
async fn streamed_layers(
    spec: &AcceptSpec,
    dir: &Path,
    b: &Side,
    c: &Side,
    items: &[Item],
    layers: &mut Vec<Layer>,
) -> Result<StreamPass, AcceptError> {
    let th = &spec.thresholds;
    info(
        spec.quiet,
        &format!(
            "engine and business layers: {} items, concurrency {}",
            items.len(),
            spec.concurrency
        ),
    );
    let pass = stream_pass(spec, dir, b, c, items).await?;
    let engine = engine_layer(
        &pass.metrics[1],
        &pass.metrics[0],
        &pass.integrity[1],
        &pass.integrity[0],
        th,
        vec![],
    );
    let engine_failed = engine.verdict == LayerOutcome::Fail;
    layers.push(engine);
    if engine_failed && !spec.all {
        layers.push(Layer::not_evaluated(
            "business",
            LayerOutcome::Skipped,
            "the engine layer failed (use --all to evaluate every layer)".into(),
        ));
        return Ok(pass);
    }
    let judge = match &spec.judge {
        Some(j) => Some(judge_pass(spec, j, items, &pass.texts).await),
        None => None,
    };
    let (layer, failures) = business_layer(items, &pass.texts, judge, th);
    let lines: Vec<Value> =
        failures.iter().map(|f| serde_json::to_value(f).expect("serializes")).collect();
    write_jsonl(&dir.join(FAILURES_FILE), &lines)?;
    layers.push(layer);
    Ok(pass)
}

/// The report of an acceptance before it is concluded: targets, dataset, settings, layers and
/// the notes on the dataset's size and shape.
fn new_report(
    spec: &AcceptSpec,
    started_at: chrono::DateTime<chrono::Utc>,
    sides: Option<&(Side, Side)>,
    items: &[Item],
    layers: Vec<Layer>,
) -> AcceptanceReport {
    let target_ref = |s: &Side| TargetRef {
        name: s.name.clone(),
        url: s.resolved.url.clone(),
        model: s.resolved.model.clone(),
        engine_config: s.engine.as_ref().map(|e| e.file.clone()),
    };
    let count = |c: &str| items.iter().filter(|i| i.category.as_deref() == Some(c)).count();
    let structured = items.iter().filter(|i| i.schema.is_some()).count();
    let mut notes = Vec::new();
    if !items.is_empty() && structured * 100 < 40 * items.len() {
        notes.push(format!(
            "only {structured} of {} items are structured (the reference asks for at least 40%)",
            items.len()
        ));
    }
    if !items.is_empty() && items.len() < 500 {
        notes.push(format!(
            "{} items: the reference asks for at least 500 prompts before a release decision",
            items.len()
        ));
    }
    AcceptanceReport {
        schema_version: REPORT_SCHEMA_VERSION,
        run_id: spec.run_id.clone(),
        started_at: started_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        baseline: sides.map(|(b, _)| target_ref(b)),
        candidate: sides.map(|(_, c)| target_ref(c)),
        dataset: json!({
            "path": spec.dataset.as_ref().map(|p| p.display().to_string()),
            "items": items.len(),
            "structured": structured,
            "long_context": count("long_context"),
            "multi_turn": count("multi_turn"),
        }),
        settings: json!({
            "endpoint": spec.endpoint.name(),
            "concurrency": spec.concurrency,
            "temperature": spec.temperature,
            "seed": spec.seed,
            "numeric_items": spec.numeric_items,
            "numeric_max_tokens": spec.numeric_max_tokens,
            "top_logprobs": spec.top_logprobs,
            "all": spec.all,
            "logits": spec.logits.as_ref().map(|(b, c)| json!([b.display().to_string(), c.display().to_string()])),
        }),
        thresholds: spec.thresholds.clone(),
        layers,
        passed: false,
        actions: Vec::new(),
        notes,
    }
}

fn write_jsonl(path: &Path, lines: &[Value]) -> Result<(), rundir::RunDirError> {
    let mut text = String::new();
    for l in lines {
        text.push_str(&l.to_string());
        text.push('\n');
    }
    rundir::write_atomic(path, text.as_bytes())
}

/// One side's log-probs of an item, or why there are none.
type Logprobs = Result<Vec<Position>, String>;

/// Greedy requests with log-probs to both targets; per item, the sequences are compared.
async fn numeric_requests(
    spec: &AcceptSpec,
    b: &Side,
    c: &Side,
    items: &[Item],
) -> (NumericStats, Vec<Value>, Vec<String>) {
    let sampling = Sampling {
        temperature: 0.0,
        top_p: 1.0,
        seed: spec.seed,
        ignore_eos: false,
        logprobs: Some(spec.top_logprobs),
    };
    let ask = |side: &Side, item: &Item| {
        let mut work = item.work.clone();
        work.max_tokens = work.max_tokens.min(spec.numeric_max_tokens);
        let body = request_body(
            spec.endpoint,
            &side.resolved.model,
            false,
            side.resolved.max_tokens_field,
            &work,
            &prompt_of(item),
            &sampling,
        );
        let (client, url) = (side.client.clone(), side.resolved.url.clone());
        async move {
            match client.post_json(&url, &body).await {
                Ok((200, Some(v), _)) => numeric::parse_logprobs(&v).map_err(|e| e.to_string()),
                Ok((status, _, text)) => Err(format!(
                    "HTTP {status}: {}",
                    infergate_model::openai::truncate_chars(&text, 200)
                )),
                Err(e) => Err(e.to_string()),
            }
        }
    };
    let n = spec.numeric_items.min(items.len());
    let results: Vec<(Logprobs, Logprobs)> =
        futures_util::stream::iter(items[..n].iter().map(|item| {
            let (fb, fc) = (ask(b, item), ask(c, item));
            async move { tokio::join!(fb, fc) }
        }))
        .buffered(spec.concurrency as usize)
        .collect()
        .await;
    let mut stats = NumericStats::default();
    let mut lines = Vec::new();
    let mut errors = Vec::new();
    let th = spec.thresholds.numeric();
    for (i, (rb, rc)) in results.into_iter().enumerate() {
        match (rb, rc) {
            (Ok(pb), Ok(pc)) => {
                let mut one = NumericStats::default();
                one.add_sequence(i, &pb, &pc, &th);
                stats.add_sequence(i, &pb, &pc, &th);
                let drift = numeric::position_drift(&pb, &pc, &th);
                lines.push(json!({"item": i, "id": items[i].id, "positions": one.positions, "cos_min": one.cos_min,
                    "rtol_max": one.rtol_max, "filled_entries": one.filled_entries, "first_divergence": one.first_divergence,
                    "per_position": drift}));
            }
            (rb, rc) => {
                let e = [("baseline", rb.err()), ("candidate", rc.err())]
                    .into_iter()
                    .filter_map(|(w, e)| e.map(|e| format!("{w}: {e}")))
                    .collect::<Vec<_>>()
                    .join("; ");
                lines.push(json!({"item": i, "id": items[i].id, "error": e}));
                errors.push(format!("item {} ({}) not compared: {e}", i, items[i].id));
            }
        }
    }
    if errors.len() > 5 {
        let more = errors.len() - 5;
        errors.truncate(5);
        errors.push(format!("... and {more} more items not compared"));
    }
    (stats, lines, errors)
}

/// What the streamed pass produced, per side (0 = baseline, 1 = candidate).
pub(crate) struct StreamPass {
    pub metrics: [RunMetrics; 2],
    pub accs: [MetricsAccumulator; 2],
    pub integrity: [StreamIntegrity; 2],
    /// Per item: the output text of each side (None: the request failed).
    pub texts: Vec<[Option<String>; 2]>,
}

async fn stream_pass(
    spec: &AcceptSpec,
    dir: &Path,
    b: &Side,
    c: &Side,
    items: &[Item],
) -> Result<StreamPass, AcceptError> {
    let sampling = Sampling {
        temperature: spec.temperature,
        top_p: 1.0,
        seed: spec.seed,
        ignore_eos: false,
        logprobs: None,
    };
    for side in [b, c] {
        if side.resolved.reuse_connections {
            let n = spec.concurrency.min(256) as usize;
            side.client.preconnect(&side.resolved.api_base, n).await;
        }
    }
    let clock = Instant::now();
    let (_tx, phase) = watch::channel(Phase::Running);
    let one = |side: &Side, item: &Item, id: u64| {
        let mut body = request_body(
            spec.endpoint,
            &side.resolved.model,
            true,
            side.resolved.max_tokens_field,
            &item.work,
            &prompt_of(item),
            &sampling,
        );
        // A cumulative token count on every chunk (vLLM) lets duplicated and reordered events
        // be detected; servers that do not know the option ignore it.
        body["stream_options"]["continuous_usage_stats"] = json!(true);
        let body = Bytes::from(serde_json::to_vec(&body).expect("bodies serialize"));
        let (client, url) = (side.client.clone(), side.resolved.url.clone());
        let request_id = format!("{}-{}-{id}", spec.run_id, side.name);
        let phase = phase.clone();
        async move {
            let call = Call {
                url: &url,
                body,
                stream: true,
                request_id: &request_id,
                clock,
                capture_text: true,
                cancel: None,
            };
            client.execute(call, phase).await
        }
    };
    let exchanges: Vec<(Instant, Exchange, Exchange)> =
        futures_util::stream::iter(items.iter().enumerate().map(|(i, item)| {
            let (fb, fc) = (one(b, item, i as u64), one(c, item, i as u64));
            async move {
                let intended = Instant::now();
                let (eb, ec) = tokio::join!(fb, fc);
                (intended, eb, ec)
            }
        }))
        .buffered(spec.concurrency as usize)
        .collect()
        .await;
    let mut writers = [
        RecordWriter::create(&rundir::create(&dir.join("baseline"))?)?,
        RecordWriter::create(&rundir::create(&dir.join("candidate"))?)?,
    ];
    let mut accs =
        [MetricsAccumulator::new(Slo::default()), MetricsAccumulator::new(Slo::default())];
    let mut integrity = [StreamIntegrity::default(), StreamIntegrity::default()];
    let mut texts = Vec::with_capacity(items.len());
    for (i, (intended, eb, ec)) in exchanges.into_iter().enumerate() {
        let mut pair = [None, None];
        for (k, ex) in [eb, ec].into_iter().enumerate() {
            integrity[k].add(&ex.result.integrity);
            let slot = RequestSlot {
                id: i as u64,
                warmup: false,
                item: i as u64,
                intended,
                counted_input_tokens: None,
            };
            let (record, text) = ex.into_record(slot, clock);
            writers[k].write(&record)?;
            accs[k].add(&record);
            if record.class.is_ok() {
                pair[k] = text;
            }
        }
        texts.push(pair);
    }
    let [wb, wc] = writers;
    wb.finish()?;
    wc.finish()?;
    let metrics = [accs[0].finish(None), accs[1].finish(None)];
    Ok(StreamPass { metrics, accs, integrity, texts })
}

/// Scores from the judge per item (None: no score for that item).
async fn judge_pass(
    spec: &AcceptSpec,
    judge: &TargetSpec,
    items: &[Item],
    texts: &[[Option<String>; 2]],
) -> Result<Vec<Option<f64>>, AcceptError> {
    let side = connect(judge, &spec.client, Endpoint::Chat).await?;
    let asks = items.iter().zip(texts).map(|(item, pair)| {
        let question = match &item.work.payload {
            Payload::Prompt(p) => p.clone(),
            Payload::Messages(m) => m.iter().map(infergate_model::wire::message_text).collect::<Vec<_>>().join("\n"),
        };
        let body = match pair {
            [Some(b), Some(c)] => {
                let mut body = json!({
                    "model": side.resolved.model,
                    "messages": [{"role": "user", "content": business::judge_prompt(&question, b, c)}],
                    "temperature": 0.0,
                    "stream": false,
                });
                body[side.resolved.max_tokens_field] = json!(16);
                Some(body)
            }
            _ => None,
        };
        let (client, url) = (side.client.clone(), side.resolved.url.clone());
        async move {
            let body = body?;
            match client.post_json(&url, &body).await {
                Ok((200, Some(v), _)) => v.pointer("/choices/0/message/content").and_then(|c| c.as_str()).and_then(business::parse_judge_score),
                _ => None,
            }
        }
    });
    Ok(futures_util::stream::iter(asks).buffered(spec.concurrency as usize).collect().await)
}

fn business_layer(
    items: &[Item],
    texts: &[[Option<String>; 2]],
    judge: Option<Result<Vec<Option<f64>>, AcceptError>>,
    th: &AcceptThresholds,
) -> (Layer, Vec<SchemaFailure>) {
    let mut stats = [SchemaStats::default(), SchemaStats::default()];
    let mut failures = Vec::new();
    for (item, pair) in items.iter().zip(texts) {
        let Some(schema) = &item.schema else { continue };
        for (k, role) in ["baseline", "candidate"].into_iter().enumerate() {
            let r = business::validate(schema, pair[k].as_deref());
            stats[k].add(r.is_ok());
            if let Err(error) = r {
                failures.push(SchemaFailure {
                    item: item.index,
                    id: item.id.clone(),
                    target: role.into(),
                    error: error.to_string(),
                    output: pair[k].clone(),
                });
            }
        }
    }
    let mut notes = Vec::new();
    let mut checks = Vec::new();
    if stats[1].structured == 0 {
        notes.push("no item carries a JSON Schema: nothing to validate".into());
    }
    checks.push(LayerCheck::at_least(
        "JSON Schema pass rate",
        stats[1].pass_rate,
        th.schema_pass_rate_min,
        "refuse release",
    ));
    let mut judge_details = Value::Null;
    match judge {
        None => {}
        Some(Err(e)) => notes.push(format!("the judge could not be used: {}", error_chain(&e))),
        Some(Ok(scores)) => {
            let got: Vec<f64> = scores.iter().flatten().copied().collect();
            let mean = (!got.is_empty()).then(|| got.iter().sum::<f64>() / got.len() as f64);
            let review: Vec<&str> = items
                .iter()
                .zip(&scores)
                .filter(|(_, s)| s.is_some_and(|s| s < th.judge_min))
                .map(|(i, _)| i.id.as_str())
                .collect();
            checks.push(
                LayerCheck::at_least(
                    "judge similarity (mean)",
                    mean,
                    th.judge_min,
                    "manual review",
                )
                .reported_only(),
            );
            judge_details = json!({"scored": got.len(), "unscored": scores.len() - got.len(), "mean": mean, "below_threshold": review});
        }
    }
    if stats[1].structured == 0 {
        let mut l = Layer::not_evaluated("business", LayerOutcome::NotRun, notes.join("; "));
        l.checks = checks.into_iter().filter(|c| !c.gating).collect();
        l.details = json!({"judge": judge_details});
        return (l, failures);
    }
    let details = json!({
        "candidate": stats[1],
        "baseline": stats[0],
        "failures": failures.len(),
        "judge": judge_details,
    });
    (Layer::evaluated("business", checks, details, notes), failures)
}

/// An error and its causes on one line (for a note).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        out.push_str(": ");
        out.push_str(&inner.to_string());
        src = inner.source();
    }
    out
}

fn side_summary(
    spec: &AcceptSpec,
    side: &Side,
    items: &[Item],
    pass: &StreamPass,
    k: usize,
    started_at: chrono::DateTime<chrono::Utc>,
) -> Summary {
    let header = RunHeader {
        run_id: format!("{}-{}", spec.run_id, if k == 0 { "baseline" } else { "candidate" }),
        simulated: side.simulated(),
        git: spec.git.clone(),
        target: side.target_info(),
        config: RunConfig::Acceptance(AcceptanceConfig {
            acceptance: true,
            concurrency: spec.concurrency,
            temperature: spec.temperature,
            seed: spec.seed,
            dataset: spec.dataset.as_ref().map(|p| p.display().to_string()),
            metrics_url: side.target.metrics_url.clone(),
        }),
        profile: "acceptance".into(),
        engine: side.engine.clone(),
        started_at,
        workload: WorkloadInfo::new(items.len() as u64, LengthBasis::Dataset),
        notes: vec!["requests of an acceptance run: the same items sent to the baseline and the candidate at the same moments".into()],
    };
    let mut s = Summary::of_run(header, pass.metrics[k].clone());
    s.cost = infergate_model::cost::for_summary(&s);
    s
}
