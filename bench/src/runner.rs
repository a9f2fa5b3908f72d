//! One bench run: resolve the target (or start the embedded simulator), build the workload, drive
//! the load, stream per-request records to the run directory, and write the summary.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::client::{
    Call, Client, ClientOptions, Phase, Resolved, Sampling, read_api_key, request_body,
};
use crate::config::{LoadMode, Profile, ResolvedProfile, Target};
use crate::metrics::MetricsAccumulator;
use crate::record::{RequestRecord, round_us};
use crate::rundir::{self, RecordWriter, RunDirError};
use crate::schedule::ArrivalSchedule;
use crate::sim::{self, SimHandle};
use crate::summary::{
    EngineParams, Environment, GitInfo, RunStatus, ScheduleSummary, Summary, Timing, ToolInfo,
    WorkloadInfo,
};
use crate::workload::{LengthBasis, Payload, PromptBuilder, PromptFit, Workload};
use crate::{TOOL_NAME, TOOL_VERSION};

/// Everything one run needs.
pub struct RunSpec {
    pub profile: ResolvedProfile,
    /// Run directory to create.
    pub out_dir: PathBuf,
    pub run_id: String,
    pub git: Option<GitInfo>,
    /// Engine parameters to record (the target's governed config), when known.
    pub engine: Option<EngineParams>,
    /// Hide the progress bar and informational lines.
    pub quiet: bool,
    /// Handle Ctrl-C (stop sending, grace period, then cancel). Tests drive [`RunControl`] instead.
    pub handle_signals: bool,
    /// Keep generated text in memory (for acceptance checks); not written to requests.jsonl.
    pub capture_text: bool,
    /// Request log-probs with this many alternatives (acceptance's numeric layer).
    pub logprobs: Option<u32>,
    /// Repository root, for relative paths in the config (datasets, engine configs).
    pub root: PathBuf,
}

impl RunSpec {
    /// A quiet run of `profile` against `target` into `out_dir`, without signal handling (for
    /// tools and tests that drive [`RunControl`] themselves).
    pub fn quiet(
        mut profile: Profile,
        target: (String, Target),
        out_dir: PathBuf,
        run_id: impl Into<String>,
    ) -> RunSpec {
        profile.target = Some(target.0.clone());
        let root = out_dir.parent().map(Path::to_path_buf).unwrap_or_default();
        RunSpec {
            profile: ResolvedProfile {
                name: "default".into(),
                profile,
                target: Some(target),
                file: None,
            },
            out_dir,
            run_id: run_id.into(),
            git: None,
            engine: None,
            quiet: true,
            handle_signals: false,
            capture_text: false,
            logprobs: None,
            root,
        }
    }
}

/// Lets the caller interrupt a run as Ctrl-C would.
#[derive(Clone)]
pub struct RunControl {
    tx: Arc<watch::Sender<Phase>>,
    interrupted: Arc<AtomicBool>,
}

impl Default for RunControl {
    fn default() -> Self {
        RunControl { tx: Arc::new(watch::channel(Phase::Running).0), interrupted: Arc::default() }
    }
}

impl RunControl {
    /// Stop sending new requests; in-flight ones get the grace period.
    pub fn interrupt(&self) {
        self.interrupted.store(true, Ordering::SeqCst);
        self.tx.send_if_modified(|p| {
            if *p == Phase::Running {
                *p = Phase::Draining;
                true
            } else {
                false
            }
        });
    }

    /// Cancel everything in flight now.
    pub fn abort(&self) {
        self.interrupted.store(true, Ordering::SeqCst);
        let _ = self.tx.send(Phase::Abort);
    }

    pub fn was_interrupted(&self) -> bool {
        self.interrupted.load(Ordering::SeqCst)
    }

    fn subscribe(&self) -> watch::Receiver<Phase> {
        self.tx.subscribe()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{0}")]
    Target(String),
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    RunDir(#[from] RunDirError),
    #[error("cannot start the embedded simulator: {0}")]
    Simulator(String),
}

/// The result of a run.
pub struct RunOutcome {
    pub summary: Summary,
    pub dir: PathBuf,
    /// Texts of ok requests by request id (when `capture_text`).
    pub texts: Vec<(u64, String)>,
}

impl RunOutcome {
    pub fn status(&self) -> RunStatus {
        self.summary.status
    }
}

/// A new run id: UTC time plus a random suffix.
pub fn new_run_id() -> String {
    let now = chrono::Utc::now();
    // Distinguishes runs started within the same second (nanoseconds and process id mixed).
    let nanos = now.timestamp_subsec_nanos() as u64;
    let suffix = (crate::hash::fnv1a(&(nanos ^ (std::process::id() as u64) << 32).to_le_bytes())
        & 0xffff) as u32;
    format!("{}-{suffix:04x}", now.format("%Y%m%dT%H%M%SZ"))
}

struct Console {
    quiet: bool,
}

impl Console {
    fn info(&self, msg: &str) {
        if !self.quiet {
            eprintln!("{msg}");
        }
    }
}

/// The prompts of a synthetic workload: per item, the word count that fits its token target.
struct Prompts {
    builder: PromptBuilder,
    words: Vec<usize>,
    counted: Vec<Option<u32>>,
}

/// What the load loop needs to build and send one request.
struct Shared {
    client: Client,
    resolved: Resolved,
    workload: Workload,
    prompts: Option<Prompts>,
    sampling: Sampling,
    run_id: String,
    clock: Instant,
    capture_text: bool,
    records: std::sync::mpsc::Sender<(RequestRecord, Option<String>)>,
}

impl Shared {
    async fn one(&self, id: u64, warmup: bool, intended: Instant, phase: watch::Receiver<Phase>) {
        let item_idx = self.workload.item_index(id);
        let item = &self.workload.items[item_idx as usize];
        let prompt = match (&item.payload, &self.prompts) {
            (Payload::Prompt(p), _) if !p.is_empty() => p.clone(),
            (Payload::Prompt(_), Some(pr)) => {
                pr.builder.build(item_idx, id, pr.words[item_idx as usize])
            }
            _ => String::new(),
        };
        let body = request_body(
            self.resolved.endpoint,
            &self.resolved.model,
            self.resolved.stream,
            self.resolved.max_tokens_field,
            item,
            &prompt,
            &self.sampling,
        );
        let body = Bytes::from(serde_json::to_vec(&body).expect("request bodies serialize"));
        let request_id = format!("{}-{id}", self.run_id);
        let ex = self
            .client
            .execute(
                Call {
                    url: &self.resolved.url,
                    body,
                    stream: self.resolved.stream,
                    request_id: &request_id,
                    clock: self.clock,
                    capture_text: self.capture_text,
                },
                phase,
            )
            .await;
        let ms = |t: Instant| round_us((t - self.clock).as_secs_f64() * 1000.0);
        let r = ex.result;
        let counted = self.prompts.as_ref().and_then(|p| p.counted[item_idx as usize]);
        let record = RequestRecord {
            id,
            warmup,
            class: r.class,
            error: r.error,
            status: ex.status,
            item: item_idx,
            intended_ms: ms(intended),
            sent_ms: ex.sent.map(ms),
            first_token_ms: r.first_token_ms.map(round_us),
            last_token_ms: r.last_token_ms.map(round_us),
            end_ms: ms(ex.end),
            input_tokens: r.prompt_tokens.or(counted.map(u64::from)),
            output_tokens: r.output_tokens,
            token_source: r.token_source,
            content_events: r.content_events,
            count_mismatch: r.count_mismatch,
            itl_ms: r.itl_ms.into_iter().map(round_us).collect(),
            queue_ms: ex.queue_ms,
            server_timings: r.server_timings,
            finish_reason: r.finish_reason,
        };
        let _ = self.records.send((record, r.text));
    }
}

/// Decides which request comes next and whether the load is over.
struct Admission {
    warmup_requests: u64,
    warmup_until: Option<Instant>,
    requests: Option<u64>,
    duration: Option<Duration>,
    state: Mutex<AdmissionState>,
}

#[derive(Default)]
struct AdmissionState {
    next_id: u64,
    measured: u64,
    measure_start: Option<Instant>,
}

impl Admission {
    /// Admit a request intended at `at`: its id and whether it is warmup, or `None` when the
    /// load is complete.
    fn admit(&self, at: Instant) -> Option<(u64, bool)> {
        let mut s = self.state.lock().unwrap();
        let warmup = if self.warmup_requests > 0 {
            s.next_id < self.warmup_requests
        } else {
            self.warmup_until.is_some_and(|u| at < u)
        };
        if !warmup {
            let start = *s.measure_start.get_or_insert(match self.warmup_until {
                Some(u) if self.warmup_requests == 0 => u,
                _ => at,
            });
            if self.requests.is_some_and(|n| s.measured >= n) {
                return None;
            }
            if self.duration.is_some_and(|d| at.saturating_duration_since(start) >= d) {
                return None;
            }
            s.measured += 1;
        }
        let id = s.next_id;
        s.next_id += 1;
        Some((id, warmup))
    }
}

fn resolve_path(root: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() { p.to_path_buf() } else { root.join(p) }
}

/// Run a bench. Returns an error only when nothing could be measured (bad target, bad
/// config, unwritable directory); request failures are part of the outcome.
pub async fn run(spec: RunSpec, control: RunControl) -> Result<RunOutcome, RunError> {
    let console = Console { quiet: spec.quiet };
    let profile: &Profile = &spec.profile.profile;
    let dir = rundir::create(&spec.out_dir)?;
    let started_at = chrono::Utc::now();
    let started_sys = SystemTime::now();
    let mut notes: Vec<String> = Vec::new();

    // Target: a configured server, or the embedded simulator on an OS-chosen loopback port.
    let mut sim_handle: Option<SimHandle> = None;
    let mut engine = spec.engine.clone();
    let (target_name, target, api_key_env) = match &spec.profile.target {
        Some((name, t)) => (name.clone(), t.clone(), t.api_key_env.clone()),
        None => {
            let embedded = sim::embedded_for_run(&profile.sim, &spec.root, &dir)
                .map_err(RunError::Simulator)?;
            if engine.is_none() {
                engine = embedded.engine.clone();
            }
            let handle = sim::start(embedded.options, embedded.backend, ([127, 0, 0, 1], 0).into())
                .await
                .map_err(|e| RunError::Simulator(e.to_string()))?;
            console.info(&format!(
                "embedded simulator on {} ({})",
                handle.base_url(),
                handle.describe()
            ));
            let t = Target::at(handle.base_url()).with_model(handle.model());
            sim_handle = Some(handle);
            ("embedded-sim".to_string(), t, None)
        }
    };
    let simulated = sim_handle.is_some();
    let api_key = match &api_key_env {
        Some(var) => Some(read_api_key(var, &target_name).map_err(RunError::Target)?),
        None => None,
    };
    let client_opts = ClientOptions {
        request_timeout: Duration::from_secs_f64(profile.client.request_timeout_s),
        stall_timeout: Duration::from_secs_f64(profile.client.stall_timeout_s),
        proxy: profile.client.proxy,
    };
    let (client, client_notes) =
        Client::new(client_opts, api_key.as_deref(), &target.base_url).map_err(RunError::Target)?;
    for n in &client_notes {
        console.info(&format!("note: {n}"));
    }
    notes.extend(client_notes);
    let resolved = client
        .preflight(
            &target_name,
            &target,
            profile.model.as_deref(),
            profile.endpoint,
            profile.stream,
            api_key_env.as_deref(),
        )
        .await
        .map_err(RunError::Target)?;
    let client = if resolved.reuse_connections {
        client
    } else {
        client.without_reuse().map_err(RunError::Target)?
    };
    console.info(&format!("target: {} (model {})", resolved.url, resolved.model));
    for n in &resolved.notes {
        console.info(&format!("note: {n}"));
    }
    notes.extend(resolved.notes.iter().cloned());

    // Workload.
    let wl = &profile.workload;
    let mut workload = match &wl.dataset {
        Some(path) => {
            let path = resolve_path(&spec.root, path);
            let text = std::fs::read_to_string(&path).map_err(|e| {
                RunError::Config(format!("cannot read the dataset {}: {e}", path.display()))
            })?;
            Workload::from_jsonl(&path, &text, wl).map_err(|e| RunError::Config(e.to_string()))?
        }
        None => Workload::synthetic(wl),
    };
    let prompts = if workload.basis == LengthBasis::Dataset {
        None
    } else {
        let builder = PromptBuilder::new(wl.seed, wl.shared_prefix_tokens as usize);
        let mut words = Vec::with_capacity(workload.len());
        let mut counted = Vec::with_capacity(workload.len());
        if resolved.tokenize {
            workload.basis = LengthBasis::Tokenize;
            let fits =
                fit_all(&client, &resolved, &builder, &workload).await.map_err(RunError::Target)?;
            for (w, n) in fits {
                words.push(w);
                counted.push(Some(n));
            }
        } else {
            for item in &workload.items {
                words.push(item.target_tokens.unwrap_or(1) as usize);
                counted.push(None);
            }
        }
        Some(Prompts { builder, words, counted })
    };
    if workload.basis == LengthBasis::Approximate {
        notes.push("prompt lengths are approximate: the target has no /tokenize (one token per word assumed)".into());
    }
    if profile.endpoint == crate::config::Endpoint::Chat && workload.basis != LengthBasis::Dataset {
        notes.push(
            "input_lengths count the prompt text; the chat template adds a few tokens (input_tokens records the server's count)".into(),
        );
    }

    // The load. Connections are opened first, so connection setup stays out of the window.
    let load = &profile.load;
    let connections = match load.mode {
        LoadMode::Closed => load.concurrency,
        LoadMode::Open => load.max_concurrency.unwrap_or(16),
    };
    if resolved.reuse_connections && connections > 1 {
        client.preconnect(&resolved.api_base, connections.min(256) as usize).await;
    }
    // Server-side metrics: the first scrape is taken just before the load starts.
    let scraper = crate::scrape::Scraper::start(
        &profile.scrape,
        crate::scrape::metrics_url(&resolved.root, target.metrics_url.as_deref()),
        crate::client::is_loopback(&resolved.api_base),
        !simulated,
        &mut notes,
    )
    .await;
    let clock = Instant::now();
    let requests = match (load.requests, load.duration_s) {
        (Some(n), _) => Some(n),
        (None, Some(_)) => None,
        (None, None) => Some(workload.len() as u64),
    };
    let admission = Arc::new(Admission {
        warmup_requests: load.warmup_requests,
        warmup_until: (load.warmup_s > 0.0).then(|| clock + Duration::from_secs_f64(load.warmup_s)),
        requests,
        duration: load.duration_s.map(Duration::from_secs_f64),
        state: Mutex::default(),
    });
    let (rec_tx, rec_rx) = std::sync::mpsc::channel::<(RequestRecord, Option<String>)>();
    let shared = Arc::new(Shared {
        client,
        resolved: resolved.clone(),
        workload,
        prompts,
        sampling: Sampling {
            temperature: wl.temperature,
            top_p: wl.top_p,
            seed: wl.seed,
            ignore_eos: wl.ignore_eos,
            logprobs: spec.logprobs,
        },
        run_id: spec.run_id.clone(),
        clock,
        capture_text: spec.capture_text,
        records: rec_tx,
    });

    // Collector: writes each record as it arrives and accumulates the metrics.
    let writer = RecordWriter::create(&dir)?;
    let total_hint = requests.map(|n| n + load.warmup_requests);
    let progress = make_progress(spec.quiet, total_hint, load.duration_s);
    let slo = profile.slo.clone();
    let collector = std::thread::spawn(
        move || -> Result<(MetricsAccumulator, Vec<(u64, String)>), RunDirError> {
            let mut writer = writer;
            let mut acc = MetricsAccumulator::new(slo);
            let mut texts = Vec::new();
            for (rec, text) in rec_rx {
                writer.write(&rec)?;
                acc.add(&rec);
                if let (Some(t), true) = (text, rec.class.is_ok()) {
                    texts.push((rec.id, t));
                }
                if let Some(pb) = &progress {
                    pb.inc(1);
                    let (total, ok) = acc.progress();
                    pb.set_message(format!("ok {ok}, failed {}", total - ok));
                }
            }
            if let Some(pb) = &progress {
                pb.finish_and_clear();
            }
            writer.finish()?;
            Ok((acc, texts))
        },
    );

    // Ctrl-C: first stops sending and starts the grace period, second (or the end of the grace
    // period) cancels what is still in flight.
    let grace = Duration::from_secs_f64(profile.client.grace_s);
    let signal_task = spec.handle_signals.then(|| {
        let control = control.clone();
        let quiet = spec.quiet;
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_err() {
                return;
            }
            if !quiet {
                eprintln!("\ninterrupted: no new requests; waiting up to {grace:?} for those in flight (Ctrl-C again to cancel them)");
            }
            control.interrupt();
            let _ = tokio::signal::ctrl_c().await;
            control.abort();
        })
    });
    let grace_task = {
        let control = control.clone();
        let mut rx = control.subscribe();
        tokio::spawn(async move {
            if rx.wait_for(|p| *p != Phase::Running).await.is_ok() {
                tokio::time::sleep(grace).await;
                control.abort();
            }
        })
    };

    let mut tasks = JoinSet::new();
    match load.mode {
        LoadMode::Closed => {
            for _ in 0..load.concurrency {
                let shared = shared.clone();
                let admission = admission.clone();
                let phase = control.subscribe();
                tasks.spawn(async move {
                    loop {
                        if *phase.borrow() != Phase::Running {
                            break;
                        }
                        let intended = Instant::now();
                        let Some((id, warmup)) = admission.admit(intended) else { break };
                        shared.one(id, warmup, intended, phase.clone()).await;
                    }
                });
            }
        }
        LoadMode::Open => {
            let rate = load.rate.expect("validated: open loop has a rate");
            let cap = load.max_concurrency.map(|n| Arc::new(Semaphore::new(n as usize)));
            let mut phase = control.subscribe();
            for offset in ArrivalSchedule::new(load.arrival, rate, load.burstiness, wl.seed) {
                let intended = clock + Duration::from_secs_f64(offset / 1000.0);
                tokio::select! {
                    _ = tokio::time::sleep_until(intended) => {}
                    _ = phase.wait_for(|p| *p != Phase::Running) => break,
                }
                let Some((id, warmup)) = admission.admit(intended) else { break };
                let permit = match &cap {
                    Some(sem) => tokio::select! {
                        p = sem.clone().acquire_owned() => Some(p.expect("semaphore never closed")),
                        _ = phase.wait_for(|p| *p != Phase::Running) => break,
                    },
                    None => None,
                };
                let shared = shared.clone();
                let p = control.subscribe();
                tasks.spawn(async move {
                    shared.one(id, warmup, intended, p).await;
                    drop(permit);
                });
                // Reap finished tasks so the set does not grow with the run.
                while tasks.try_join_next().is_some() {}
            }
        }
    }
    while tasks.join_next().await.is_some() {}
    grace_task.abort();
    if let Some(t) = signal_task {
        t.abort();
    }
    let interrupted = control.was_interrupted();
    let workload_info =
        WorkloadInfo { items: shared.workload.len() as u64, length_basis: shared.workload.basis };
    drop(shared); // closes the record channel
    let (acc, texts) = collector.join().expect("collector thread does not panic")?;
    let server = match scraper {
        Some(scraper) => {
            let m = acc.finish(None);
            let window = m.window.start_ms.zip(m.window.end_ms);
            Some(scraper.finish(clock, window, acc.run_totals()).await)
        }
        None => None,
    };
    let mut scheduler = None;
    if let Some(h) = sim_handle.take() {
        scheduler = h.scheduler_report();
        h.shutdown().await;
    }

    // Summary.
    let requested_rate = (load.mode == LoadMode::Open).then_some(load.rate).flatten();
    let metrics = acc.finish(requested_rate);
    let environment = Environment::detect();
    let mut summary = Summary {
        schema_version: crate::summary::SCHEMA_VERSION,
        run_id: spec.run_id.clone(),
        status: RunStatus::Complete,
        simulated,
        tool: ToolInfo { name: TOOL_NAME.into(), version: TOOL_VERSION.into() },
        git: spec.git.clone(),
        environment_fingerprint: environment.fingerprint(),
        environment,
        target: resolved.target_info(target_name, api_key_env),
        config: serde_json::to_value(profile).unwrap_or(Value::Null),
        profile: spec.profile.name.clone(),
        engine,
        timing: Timing::since(started_at),
        requests: Default::default(),
        tokens: Default::default(),
        metrics: Default::default(),
        throughput: Default::default(),
        goodput: Default::default(),
        schedule: ScheduleSummary::default(),
        workload: workload_info,
        cost: Default::default(),
        server: None,
        extra: Default::default(),
        notes,
    };
    summary.set_metrics(metrics);
    summary.server =
        server.map(|s| serde_json::to_value(s).expect("the server section serializes"));
    summary.cost = crate::cost::for_summary(&summary);
    if let Some(report) = scheduler {
        summary.notes.extend(report.notes());
        summary.extra.insert("scheduler".into(), serde_json::to_value(&report).unwrap_or_default());
    }
    if load.mode == LoadMode::Open {
        let lag_p99 = summary.schedule.stats.lag_ms.as_ref().map(|s| s.p99);
        let behind_rate = match (summary.schedule.stats.achieved_rate, requested_rate) {
            (Some(a), Some(r)) if summary.requests.total >= 20 => a < 0.95 * r,
            _ => false,
        };
        let behind_lag = lag_p99.is_some_and(|l| l > 10.0);
        if behind_rate || behind_lag {
            summary.schedule.fell_behind = true;
            let why = if load.max_concurrency.is_some() {
                " (max_concurrency held requests back; their wait is in every latency)"
            } else {
                " (the client could not keep up; results understate the load)"
            };
            summary.notes.push(format!(
                "the load fell behind its schedule: p99 send lag {} ms, achieved {} of {} requests/s{why}",
                lag_p99.map_or("—".to_string(), |l| format!("{l:.1}")),
                summary.schedule.stats.achieved_rate.map_or("—".to_string(), |a| format!("{a:.2}")),
                requested_rate.map_or("—".to_string(), |r| format!("{r:.2}")),
            ));
        }
    }
    if summary.tokens.count_mismatches > 0 {
        summary.notes.push(format!(
            "{} request(s) reported more tokens in usage than content events (several tokens per chunk): output counts come from usage",
            summary.tokens.count_mismatches
        ));
    }
    summary.status = if interrupted {
        RunStatus::Interrupted
    } else if summary.requests.ok == 0 {
        RunStatus::Failed
    } else {
        RunStatus::Complete
    };
    let window = summary.timing.window.duration_s.map(Duration::from_secs_f64).unwrap_or_default();
    rundir::write_histograms(&dir, &acc, started_sys, window)?;
    rundir::write_summary(&dir, &summary)?;
    Ok(RunOutcome { summary, dir, texts })
}

/// Fit every synthetic item's prompt to its token target with the target's tokenizer
/// (eight requests at a time).
async fn fit_all(
    client: &Client,
    resolved: &Resolved,
    builder: &PromptBuilder,
    workload: &Workload,
) -> Result<Vec<(usize, u32)>, String> {
    use futures_util::StreamExt;
    // Calibrate words per token once on a sample.
    let sample = builder.build(0, 0, 200);
    let n = client.count_tokens(&resolved.root, &resolved.model, &sample).await?;
    let words_per_token = 200.0 / n.max(1) as f64;
    // Each job owns what it uses (clients and builders are cheap to clone), which keeps the
    // future `Send` for any caller.
    let jobs: Vec<_> = workload
        .items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let (client, builder) = (client.clone(), builder.clone());
            let (root, model) = (resolved.root.clone(), resolved.model.clone());
            let target = item.target_tokens.unwrap_or(1);
            async move {
                let mut fit = PromptFit::new(target, words_per_token);
                while let Some(words) = fit.next_words() {
                    let text = builder.build(i as u64, i as u64, words);
                    fit.observe(client.count_tokens(&root, &model, &text).await?);
                }
                Ok::<_, String>(fit.best().expect("at least one attempt"))
            }
        })
        .collect();
    let results: Vec<Result<(usize, u32), String>> =
        futures_util::stream::iter(jobs).buffered(8).collect().await;
    results.into_iter().collect()
}

fn make_progress(
    quiet: bool,
    total: Option<u64>,
    duration_s: Option<f64>,
) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let pb = match total {
        Some(n) => indicatif::ProgressBar::new(n),
        None => indicatif::ProgressBar::new_spinner(),
    };
    let template = match (total, duration_s) {
        (Some(_), _) => "{elapsed_precise} [{bar:30}] {pos}/{len} requests  {msg}",
        (None, _) => "{elapsed_precise} {spinner} {pos} requests  {msg}",
    };
    pb.set_style(
        indicatif::ProgressStyle::with_template(template)
            .expect("valid template")
            .progress_chars("=> "),
    );
    pb.enable_steady_tick(Duration::from_millis(200));
    Some(pb)
}
