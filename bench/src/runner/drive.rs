//! Step 3, drive the load: connections opened first, the server-side scraper, the collector
//! thread that streams each record to disk as it arrives, Ctrl-C and the grace period, and the
//! open or closed loop that admits requests.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::client::{Call, Phase, RequestSlot, Sampling, request_body};
use infergate_model::config::{LoadConfig, LoadMode, Profile};
use infergate_model::metrics::{MetricsAccumulator, Slo};
use infergate_model::record::RequestRecord;
use infergate_model::rundir::{RecordWriter, RunDirError};
use infergate_model::schedule::ArrivalSchedule;
use infergate_model::server_metrics::ServerSection;
use infergate_model::session::History;
use infergate_model::summary::{Connections, WorkloadInfo};
use infergate_model::workload::{Payload, WorkItem};

use super::connect::Connection;
use super::pace::Pacer;
use super::prepare::{Prepared, Prompts};
use super::{RunControl, RunError};

/// Step 3's result: every request's record accumulated, and what the load saw.
pub(crate) struct Driven {
    pub acc: MetricsAccumulator,
    /// The run clock's origin (record times are ms since it).
    pub clock: Instant,
    pub interrupted: bool,
    pub workload: WorkloadInfo,
    /// Server-side metrics over the window, when scraped.
    pub server: Option<ServerSection>,
    /// The first write of `requests.jsonl` that failed: the run stopped there.
    pub write_error: Option<String>,
    /// The connections opened before the window.
    pub connections: Connections,
    /// How busy the client host was while the load ran (`environment.noise`).
    pub host_noise: infergate_model::hostnoise::HostNoise,
    /// The over-saturation watch stopped the open loop (`steady.stop_oversaturated`).
    pub oversaturated: Option<infergate_model::steady::Oversaturation>,
}

/// An open loop's requests scheduled (admitted at their intended time) and completed so far,
/// warmup included: what the over-saturation watch reads.
#[derive(Default)]
struct Flow {
    scheduled: std::sync::atomic::AtomicU64,
    completed: std::sync::atomic::AtomicU64,
}

/// What the load loop needs to build and send one request.
struct Shared {
    conn: Connection,
    prepared: Prepared,
    sampling: Sampling,
    run_id: String,
    clock: Instant,
    records: std::sync::mpsc::Sender<RequestRecord>,
    /// Requests cancelled on purpose (`[profile.*.cancel]`).
    cancel: infergate_model::config::CancelConfig,
}

impl Shared {
    fn prompts(&self) -> Option<&Prompts> {
        self.prepared.prompts.as_ref()
    }

    async fn one(&self, id: u64, warmup: bool, intended: Instant, phase: watch::Receiver<Phase>) {
        self.send(id, warmup, intended, phase, None).await;
    }

    /// Send request `id` and stream its record; a session's turn sends its own messages and
    /// keeps the answer's text. Returns whether it ended `ok`, and the answer's text when kept.
    async fn send(
        &self,
        id: u64,
        warmup: bool,
        intended: Instant,
        phase: watch::Receiver<Phase>,
        turn: Option<TurnCall>,
    ) -> (bool, Option<String>) {
        let workload = &self.prepared.workload;
        let item_idx = turn.as_ref().map_or_else(|| workload.item_index(id), |t| t.item as u64);
        let mut item = &workload.items[item_idx as usize];
        let with_history;
        if let Some(t) = &turn {
            with_history =
                WorkItem { payload: Payload::Messages(t.messages.clone()), ..item.clone() };
            item = &with_history;
        }
        let prompt = match (&item.payload, self.prompts()) {
            (Payload::Prompt(p), _) if !p.is_empty() => p.clone(),
            (Payload::Prompt(_), Some(pr)) => pr.text(item_idx, id),
            _ => String::new(),
        };
        let resolved = &self.conn.resolved;
        let body = request_body(
            resolved.endpoint,
            &resolved.model,
            resolved.stream,
            resolved.max_tokens_field,
            item,
            &prompt,
            &self.sampling,
        );
        let body = Bytes::from(serde_json::to_vec(&body).expect("request bodies serialize"));
        let request_id = format!("{}-{id}", self.run_id);
        let call = Call {
            url: &resolved.url,
            body,
            stream: resolved.stream,
            request_id: &request_id,
            clock: self.clock,
            capture_text: turn.is_some(),
            // Warmup requests are never cancelled: they prepare the engine for the window.
            cancel: (!warmup)
                .then(|| self.cancel.plan(id))
                .flatten()
                .map(|plan| crate::client::Cancel::of(&plan, intended)),
        };
        let ex = self.conn.client.execute(call, phase).await;
        let slot = RequestSlot {
            id,
            warmup,
            item: item_idx,
            intended,
            counted_input_tokens: self.prompts().and_then(|p| p.counted_tokens(item_idx)),
        };
        let (mut record, text) = ex.into_record(slot, self.clock);
        if record.class == infergate_model::Outcome::Cancelled {
            record.max_tokens = Some(item.max_tokens.into());
        }
        if let Some(t) = &turn {
            (record.session, record.turn) = (Some(t.session), Some(t.turn));
        }
        let ok = record.class == infergate_model::Outcome::Ok;
        let _ = self.records.send(record);
        (ok, text)
    }

    /// Run session number `n` (the workload's sessions in order, cycling) turn by turn: each
    /// turn sent with the history, after the previous answer and the think time. A turn that
    /// does not end `ok` ends the session. False when the load is over.
    async fn session(&self, n: u64, admission: &Admission, phase: watch::Receiver<Phase>) -> bool {
        let plan = self.prepared.sessions.as_ref().expect("a sessions workload");
        let session = &plan.sessions[(n % plan.sessions.len() as u64) as usize];
        let mut history = History::new(session);
        // When the previous turn's answer ended: the next turn is due a think time later, and
        // its latencies count from then (a late wake-up is the bench's, not the server's).
        let mut answered_at = Instant::now();
        for k in 0..session.turns {
            let mut intended = answered_at;
            if k > 0 {
                let think = plan.think.as_ref().map(|t| t.lock().unwrap().sample());
                if let Some(ms) = think {
                    intended += Duration::from_millis(ms.into());
                    let mut p = phase.clone();
                    tokio::select! {
                        _ = tokio::time::sleep_until(intended) => {}
                        _ = p.wait_for(|p| *p != Phase::Running) => return false,
                    }
                }
            }
            if *phase.borrow() != Phase::Running {
                return false;
            }
            if k == 0 {
                intended = Instant::now();
            }
            let Some((id, warmup)) = admission.admit(intended) else { return false };
            let item = session.first_item + k;
            let own = match &self.prepared.workload.items[item].payload {
                Payload::Messages(m) => m.clone(),
                Payload::Prompt(p) => vec![serde_json::json!({"role": "user", "content": p})],
            };
            let messages = history.request(&own);
            let call = TurnCall { item, messages, session: n, turn: k as u32 + 1 };
            match self.send(id, warmup, intended, phase.clone(), Some(call)).await {
                (true, Some(answer)) => history.answered(&own, &answer),
                _ => return true,
            }
            answered_at = Instant::now();
        }
        true
    }
}

/// A session's turn: its workload item and the messages it sends (history and its own).
struct TurnCall {
    item: usize,
    messages: Vec<serde_json::Value>,
    session: u64,
    turn: u32,
}

/// Decides which request comes next and whether the load is over.
pub(crate) struct Admission {
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
    /// The admission of a load whose clock starts at `clock`; `items` is the workload's size
    /// (what is sent once when neither a request count nor a duration is set).
    pub fn new(load: &LoadConfig, clock: Instant, items: usize) -> Admission {
        Admission {
            warmup_requests: load.warmup_requests,
            warmup_until: (load.warmup_s > 0.0)
                .then(|| clock + Duration::from_secs_f64(load.warmup_s)),
            requests: measured_requests(load, items),
            duration: load.duration_s.map(Duration::from_secs_f64),
            state: Mutex::default(),
        }
    }

    /// Admit a request intended at `at`: its id and whether it is warmup, or `None` when the
    /// load is complete.
    pub(crate) fn admit(&self, at: Instant) -> Option<(u64, bool)> {
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

/// Measured requests to send: the configured count, none when a duration bounds the load,
/// else the workload once.
fn measured_requests(load: &LoadConfig, items: usize) -> Option<u64> {
    match (load.requests, load.duration_s) {
        (Some(n), _) => Some(n),
        (None, Some(_)) => None,
        (None, None) => Some(items as u64),
    }
}

/// What driving a run's load needs besides the connection and the prepared workload.
pub struct Load<'a> {
    /// The profile measured (a shard's holds its part of the load).
    pub profile: &'a Profile,
    pub run_id: &'a str,
    /// The seed of an open loop's arrival stream (a shard's own, [`super::input::RunInput`]).
    pub arrival_seed: u64,
    /// The target is the embedded simulator in this process (its CPU is not host noise).
    pub embedded: bool,
    /// No progress bar.
    pub quiet: bool,
}

/// Drive the load a run's profile describes against `conn`. Notes (the scraper's) go to
/// `notes`; records stream into the run directory `dir`.
pub async fn drive(
    run: Load<'_>,
    conn: &Connection,
    prepared: Prepared,
    dir: &Path,
    control: &RunControl,
    notes: &mut Vec<String>,
) -> Result<Driven, RunError> {
    let profile = run.profile;
    let load = &profile.load;
    let resolved = &conn.resolved;
    let mut connections = preconnect(conn, load, control).await;
    if control.was_interrupted() {
        return Err(RunError::Interrupted { dir: dir.to_path_buf() });
    }
    control.start_load();
    let opened_before = conn.client.connections_opened();
    // Server-side metrics: the first scrape is taken just before the load starts.
    let metrics_url =
        crate::scrape::metrics_url(&resolved.root, conn.target.metrics_url.as_deref());
    let scraper = crate::scrape::Scraper::start(
        &profile.scrape,
        metrics_url.clone(),
        conn.client.metrics_headers(&metrics_url, &resolved.root),
        crate::client::is_loopback(&resolved.api_base),
        !conn.simulated(),
        notes,
    )
    .await;
    // A local target's own CPU is not host noise (infergate_model::hostnoise).
    let target_proc =
        infergate_model::hostnoise::TargetWatch::find(&resolved.api_base, run.embedded);
    let noise_start = infergate_model::hostnoise::ProcSample::read_with(&target_proc);
    let clock = Instant::now();
    let admission = Arc::new(Admission::new(load, clock, prepared.workload.len()));
    let workload = workload_info(&prepared, &profile.workload);
    let replay = prepared.replay.as_ref().map(|r| r.offsets.clone());
    let (rec_tx, rec_rx) = std::sync::mpsc::channel::<RequestRecord>();
    let wl = &profile.workload;
    let shared = Arc::new(Shared {
        conn: conn.clone(),
        prepared,
        sampling: Sampling {
            temperature: wl.temperature,
            top_p: wl.top_p,
            seed: wl.seed,
            ignore_eos: wl.ignore_eos,
            logprobs: None,
        },
        run_id: run.run_id.to_string(),
        clock,
        records: rec_tx,
        cancel: profile.cancel.clone(),
    });
    let total_hint =
        measured_requests(load, workload.items as usize).map(|n| n + load.warmup_requests);
    let progress = make_progress(run.quiet, total_hint);
    let writer = match &control.record_sink {
        Some(sink) => RecordWriter::create_through(dir, |f| sink(f))?,
        None => RecordWriter::create(dir)?,
    };
    let collector = spawn_collector(writer, profile.slo.clone(), rec_rx, progress, control);
    let grace = Duration::from_secs_f64(profile.client.grace_s);
    let grace_task = spawn_grace_period(control, grace);
    let flow = Arc::new(Flow::default());
    let open = matches!(load.mode, LoadMode::Open | LoadMode::Trace);
    let watch = (open && shared.prepared.sessions.is_none() && profile.steady.stop_oversaturated)
        .then(|| spawn_saturation_watch(&profile.steady, flow.clone(), clock, control));
    let loops = Loops { shared: &shared, flow: &flow, admission: &admission, control, clock };
    run_loop(load, run.arrival_seed, replay, loops).await;
    grace_task.abort();
    let oversaturated = match watch {
        Some(w) => {
            w.abort();
            w.await.ok().flatten()
        }
        None => None,
    };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let host_noise = infergate_model::hostnoise::HostNoise::between(
        noise_start,
        infergate_model::hostnoise::ProcSample::read_with(&target_proc),
        cpus,
        &target_proc,
    );
    connections.cold_requests = conn.client.connections_opened() - opened_before;
    drop(shared); // closes the record channel
    let (acc, write_error) = match collector.join() {
        Ok(collected) => collected,
        Err(_) => (
            MetricsAccumulator::new(profile.slo.clone()),
            Some("the record writer stopped unexpectedly".into()),
        ),
    };
    let server = match scraper {
        Some(scraper) => {
            let m = acc.finish(None);
            let window = m.window.start_ms.zip(m.window.end_ms);
            let drain =
                profile.cancel.is_on().then(|| Duration::from_secs_f64(profile.cancel.drain_s));
            Some(scraper.finish(clock, window, acc.run_totals(), drain).await)
        }
        None => None,
    };
    let interrupted = control.was_interrupted() && write_error.is_none();
    Ok(Driven {
        acc,
        clock,
        interrupted,
        workload,
        server,
        write_error,
        connections,
        host_noise,
        oversaturated,
    })
}

/// What the load loops share.
struct Loops<'a> {
    shared: &'a Arc<Shared>,
    flow: &'a Arc<Flow>,
    admission: &'a Arc<Admission>,
    control: &'a RunControl,
    clock: Instant,
}

/// The loop the load's mode asks for, to its end.
async fn run_loop(load: &LoadConfig, arrival_seed: u64, replay: Option<Vec<f64>>, l: Loops<'_>) {
    let Loops { shared, flow, admission, control, clock } = l;
    match load.mode {
        _ if shared.prepared.sessions.is_some() => {
            session_loop(load, shared, admission, control).await
        }
        LoadMode::Closed => closed_loop(load.concurrency, shared, admission, control).await,
        LoadMode::Open => {
            let rate = load.rate.expect("validated: open loop has a rate");
            let schedule = ArrivalSchedule::new(load.arrival, rate, load.burstiness, arrival_seed);
            open_loop(load, schedule, clock, (shared, flow), admission, control).await
        }
        LoadMode::Trace => {
            let offsets = replay.unwrap_or_default();
            open_loop(load, offsets.into_iter(), clock, (shared, flow), admission, control).await
        }
    }
}

/// The over-saturation watch of an open loop ([`infergate_model::steady::SaturationWatch`]): samples the
/// flow a few times a second; when the server has fallen behind by a growing margin it stops
/// the sending (in-flight requests get the grace period) and returns what it saw. Aborted when
/// the load ends first (`None`).
fn spawn_saturation_watch(
    cfg: &infergate_model::config::SteadyConfig,
    flow: Arc<Flow>,
    clock: Instant,
    control: &RunControl,
) -> tokio::task::JoinHandle<Option<infergate_model::steady::Oversaturation>> {
    use std::sync::atomic::Ordering::Relaxed;
    let mut watch = infergate_model::steady::SaturationWatch::new(cfg);
    let every = Duration::from_secs_f64((cfg.oversaturation_s / 8.0).min(0.25));
    let control = control.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        let mut phase = control.subscribe();
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = phase.wait_for(|p| *p != Phase::Running) => return None,
            }
            let t = clock.elapsed().as_secs_f64() * 1000.0;
            let seen = watch.observe(t, flow.scheduled.load(Relaxed), flow.completed.load(Relaxed));
            if let Some(o) = seen {
                control.stop_sending();
                return Some(o);
            }
        }
    })
}

/// Connections are opened first, so connection setup stays out of the window (a stop ends the
/// wait).
async fn preconnect(conn: &Connection, load: &LoadConfig, control: &RunControl) -> Connections {
    let resolved = &conn.resolved;
    let wanted = match load.mode {
        LoadMode::Closed => load.concurrency,
        LoadMode::Open | LoadMode::Trace => load.max_concurrency.unwrap_or(16),
    };
    let mut connections = Connections {
        wanted: wanted.into(),
        opened: 0,
        reused: resolved.reuse_connections,
        cold_requests: 0,
    };
    if resolved.reuse_connections {
        tokio::select! {
            n = conn.client.preconnect(&resolved.api_base, wanted as usize) => connections.opened = n as u64,
            _ = control.stopped() => {}
        }
    }
    connections
}

/// What the summary says of the workload before the load: its size, how lengths were counted
/// and the lengths its items request.
fn workload_info(
    prepared: &Prepared,
    wl: &infergate_model::config::WorkloadConfig,
) -> WorkloadInfo {
    use infergate_model::lengths::length_stats;
    let mut info = WorkloadInfo::new(prepared.workload.len() as u64, prepared.workload.basis);
    let (input, output) = prepared.workload.requested_lengths();
    info.input_length.distribution = wl.input_distribution.clone();
    info.input_length.requested = input.and_then(length_stats);
    info.output_length.distribution = wl.output_distribution.clone();
    info.output_length.requested = length_stats(output);
    info.trace = prepared.replay.as_ref().map(|r| r.info.clone());
    info.files = prepared.files.clone();
    info
}

/// The collector: writes each record as it arrives and accumulates the metrics of those
/// written. At the first failed write (a full disk) it stops the run (what is in flight is
/// cancelled) and keeps only what was written; it returns the error's text.
fn spawn_collector(
    mut writer: RecordWriter,
    slo: Slo,
    records: std::sync::mpsc::Receiver<RequestRecord>,
    progress: Option<indicatif::ProgressBar>,
    control: &RunControl,
) -> std::thread::JoinHandle<(MetricsAccumulator, Option<String>)> {
    let control = control.clone();
    std::thread::spawn(move || {
        let mut acc = MetricsAccumulator::new(slo);
        let failed = |e: RunDirError| {
            control.abort();
            Some(error_chain(&e))
        };
        let mut error = None;
        for rec in records {
            if error.is_some() {
                continue; // drained so senders finish; nothing more is kept
            }
            if let Err(e) = writer.write(&rec) {
                error = failed(e);
                continue;
            }
            acc.add(&rec);
            if let Some(pb) = &progress {
                pb.inc(1);
                let (total, ok) = acc.progress();
                pb.set_message(format!("ok {ok}, failed {}", total - ok));
            }
        }
        if let Some(pb) = &progress {
            pb.finish_and_clear();
        }
        if error.is_none() {
            error = writer.finish().err().and_then(failed);
        }
        (acc, error)
    })
}

/// An error and its causes on one line (`cannot write X: No space left on device`).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Once the run stops sending, what is still in flight gets `grace`, then is cancelled.
fn spawn_grace_period(control: &RunControl, grace: Duration) -> tokio::task::JoinHandle<()> {
    let control = control.clone();
    let mut rx = control.subscribe();
    tokio::spawn(async move {
        if rx.wait_for(|p| *p != Phase::Running).await.is_ok() {
            tokio::time::sleep(grace).await;
            control.cancel_in_flight();
        }
    })
}

/// `concurrency` workers, each sending its next request as soon as its last one ended.
async fn closed_loop(
    concurrency: u32,
    shared: &Arc<Shared>,
    admission: &Arc<Admission>,
    control: &RunControl,
) {
    let mut tasks = JoinSet::new();
    for _ in 0..concurrency {
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
    while tasks.join_next().await.is_some() {}
}

/// `concurrency` sessions in flight: each worker runs one session to its end, then starts the
/// next one (`load.concurrency` counts sessions), until the admission ends the load; without a
/// request count or a duration, each session runs once.
async fn session_loop(
    load: &LoadConfig,
    shared: &Arc<Shared>,
    admission: &Arc<Admission>,
    control: &RunControl,
) {
    let once = load.requests.is_none() && load.duration_s.is_none();
    let sessions = shared.prepared.sessions.as_ref().map_or(0, |s| s.sessions.len());
    let limit = once.then_some(sessions as u64);
    let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut tasks = JoinSet::new();
    for _ in 0..load.concurrency {
        let (shared, admission, next) = (shared.clone(), admission.clone(), next.clone());
        let phase = control.subscribe();
        tasks.spawn(async move {
            while *phase.borrow() == Phase::Running {
                let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if limit.is_some_and(|l| n >= l) {
                    break;
                }
                if !shared.session(n, &admission, phase.clone()).await {
                    break;
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
}

/// Requests sent at the intended offsets (ms from `clock`: an arrival schedule or a trace's
/// times), whatever is in flight (up to `max_concurrency`).
async fn open_loop(
    load: &LoadConfig,
    offsets: impl Iterator<Item = f64>,
    clock: Instant,
    (shared, flow): (&Arc<Shared>, &Arc<Flow>),
    admission: &Arc<Admission>,
    control: &RunControl,
) {
    use std::sync::atomic::Ordering::Relaxed;
    let cap = load.max_concurrency.map(|n| Arc::new(Semaphore::new(n as usize)));
    let mut phase = control.subscribe();
    let mut tasks = JoinSet::new();
    let pacer = Pacer::start().ok();
    for offset in offsets {
        let intended = clock + Duration::from_secs_f64(offset / 1000.0);
        let coarse = if pacer.is_some() { Pacer::coarse_deadline(intended) } else { intended };
        tokio::select! {
            _ = tokio::time::sleep_until(coarse) => {}
            _ = phase.wait_for(|p| *p != Phase::Running) => break,
        }
        if let Some(p) = &pacer {
            p.until(intended).await;
        }
        let Some((id, warmup)) = admission.admit(intended) else { break };
        flow.scheduled.fetch_add(1, Relaxed);
        let permit = match &cap {
            Some(sem) => tokio::select! {
                p = sem.clone().acquire_owned() => Some(p.expect("semaphore never closed")),
                _ = phase.wait_for(|p| *p != Phase::Running) => break,
            },
            None => None,
        };
        let (shared, flow) = (shared.clone(), flow.clone());
        let p = control.subscribe();
        tasks.spawn(async move {
            shared.one(id, warmup, intended, p).await;
            flow.completed.fetch_add(1, Relaxed);
            drop(permit);
        });
        // Reap finished tasks so the set does not grow with the run.
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
}

fn make_progress(quiet: bool, total: Option<u64>) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let pb = match total {
        Some(n) => indicatif::ProgressBar::new(n),
        None => indicatif::ProgressBar::new_spinner(),
    };
    let template = match total {
        Some(_) => "{elapsed_precise} [{bar:30}] {pos}/{len} requests  {msg}",
        None => "{elapsed_precise} {spinner} {pos} requests  {msg}",
    };
    pb.set_style(
        indicatif::ProgressStyle::with_template(template)
            .expect("valid template")
            .progress_chars("=> "),
    );
    pb.enable_steady_tick(Duration::from_millis(200));
    Some(pb)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(toml: &str) -> LoadConfig {
        toml::from_str(toml).expect("a load section")
    }

    #[test]
    fn warmup_requests_come_first_then_the_measured_count() {
        let clock = Instant::now();
        let a = Admission::new(&load("warmup_requests = 2\nrequests = 3"), clock, 10);
        let got: Vec<_> = std::iter::from_fn(|| a.admit(clock)).take(10).collect();
        assert_eq!(got, vec![(0, true), (1, true), (2, false), (3, false), (4, false)]);
    }

    #[test]
    fn without_a_count_or_a_duration_the_workload_is_sent_once() {
        let clock = Instant::now();
        let a = Admission::new(&load(""), clock, 4);
        assert_eq!(std::iter::from_fn(|| a.admit(clock)).take(10).count(), 4);
    }

    #[test]
    fn a_duration_ends_the_load_and_a_warmup_window_starts_the_measurement() {
        let clock = Instant::now();
        let a = Admission::new(&load("warmup_s = 1.0\nduration_s = 2.0"), clock, 4);
        let at = |s: f64| clock + Duration::from_secs_f64(s);
        assert_eq!(a.admit(at(0.5)), Some((0, true)), "inside the warmup window");
        assert_eq!(a.admit(at(1.0)), Some((1, false)), "measurement starts at the window's end");
        assert_eq!(a.admit(at(2.9)), Some((2, false)));
        assert_eq!(a.admit(at(3.0)), None, "two seconds after the warmup window");
    }
}
