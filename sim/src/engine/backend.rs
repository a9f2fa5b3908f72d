//! The engine in real time, behind the simulator's HTTP server: a tokio task runs the step loop,
//! sleeping each step's modelled duration, and turns the engine's outputs into `GenEvent`s.

use std::fs::File;
use std::io::{self, Write as _};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

use crate::backend::{Backend, FinishReason, GenEvent, GenRequest};
use infergate_model::config::EngineConfig;

use super::{
    Decision, Engine, EngineRequest, EngineSpec, Finish, Nanos, Output, Prompt, ReqKey,
    SchedulerReport, SpecError,
};

/// The engine model as a [`Backend`].
///
/// Events per request: `Scheduled` when the step that first schedules it starts, then `Tokens`
/// at the end of every step that samples a token for it, then `Finished`; or `Failed` at once
/// for a request the engine refuses, and when the decision that fails it is taken for a request
/// whose batch ran out of memory. A request whose receiver was dropped is freed when the next
/// step starts; tokens produced after the drop count as waste.
///
/// With a decision log, every scheduling decision is appended to it as a JSON line as it is
/// taken (see `decisions.rs`).
#[derive(Debug)]
pub struct EngineBackend {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    wake: Notify,
    stop: AtomicBool,
    start: Instant,
    /// Keep computing requests whose client went away (`sim.on_cancel = "ignore"`).
    ignore_cancels: AtomicBool,
    /// Leading tokens of every streamed chat answer sent as reasoning (`sim.reasoning_tokens`).
    reasoning_tokens: AtomicU32,
    describe: String,
    max_model_len: u32,
    /// The engine config served, as `GET /server_info` answers it.
    server_info: serde_json::Value,
    log: Option<Mutex<DecisionLog>>,
}

/// The decision log file.
#[derive(Debug)]
struct DecisionLog {
    file: File,
    name: String,
    error: Option<String>,
}

impl DecisionLog {
    fn append(&mut self, decisions: &[Decision]) {
        if self.error.is_some() || decisions.is_empty() {
            return;
        }
        let mut buf = Vec::with_capacity(decisions.len() * 256);
        for d in decisions {
            serde_json::to_writer(&mut buf, d).expect("decisions serialize");
            buf.push(b'\n');
        }
        if let Err(e) = self.file.write_all(&buf) {
            self.error = Some(format!("cannot write {}: {e}", self.name));
        }
    }
}

#[derive(Debug)]
struct State {
    engine: Engine,
    /// Indexed by the engine's request slot.
    senders: Vec<Option<mpsc::UnboundedSender<GenEvent>>>,
    /// The server's id of the request in each slot.
    ids: Vec<u64>,
}

impl EngineBackend {
    /// Resolve a config and start the engine. Must be called inside a tokio runtime.
    pub fn from_config(config: &EngineConfig) -> Result<EngineBackend, SpecError> {
        Ok(EngineBackend::new(&EngineSpec::new(config)?))
    }

    /// Start a continuous-batching engine for `spec`. Must be called inside a tokio runtime.
    pub fn new(spec: &EngineSpec) -> EngineBackend {
        EngineBackend::with_engine(spec, Engine::new(spec))
    }

    /// Start a given engine (e.g. one with another scheduler).
    pub fn with_engine(spec: &EngineSpec, engine: Engine) -> EngineBackend {
        EngineBackend::start(spec, engine, None)
    }

    /// Start an engine for `spec` that appends every scheduling decision to the file at `path`
    /// (created, or appended to), one JSON object per line. Must be called inside a tokio
    /// runtime.
    pub fn with_decision_log(spec: &EngineSpec, path: &Path) -> io::Result<EngineBackend> {
        EngineBackend::with_engine_and_log(spec, Engine::new(spec), path)
    }

    /// [`EngineBackend::with_decision_log`] for a given engine (e.g. one with noise).
    pub(crate) fn with_engine_and_log(
        spec: &EngineSpec,
        mut engine: Engine,
        path: &Path,
    ) -> io::Result<EngineBackend> {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
        let name = path
            .file_name()
            .map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
        engine.record_decisions(true);
        let log = DecisionLog { file, name, error: None };
        Ok(EngineBackend::start(spec, engine, Some(log)))
    }

    /// The same engine computing requests whose client went away to their end
    /// (`sim.on_cancel = "ignore"`) instead of freeing them at the next step.
    pub fn ignoring_cancels(self, ignore: bool) -> EngineBackend {
        self.shared.ignore_cancels.store(ignore, Ordering::Relaxed);
        self
    }

    /// The same engine answering every streamed chat request with `n` reasoning tokens first
    /// (`sim.reasoning_tokens`): they are computed and timed like any other token.
    pub fn with_reasoning_tokens(self, n: u32) -> EngineBackend {
        self.shared.reasoning_tokens.store(n, Ordering::Relaxed);
        self
    }

    fn start(spec: &EngineSpec, engine: Engine, log: Option<DecisionLog>) -> EngineBackend {
        let shared = Arc::new(Shared {
            state: Mutex::new(State { engine, senders: Vec::new(), ids: Vec::new() }),
            wake: Notify::new(),
            stop: AtomicBool::new(false),
            start: Instant::now(),
            ignore_cancels: AtomicBool::new(false),
            reasoning_tokens: AtomicU32::new(0),
            describe: spec.describe(),
            max_model_len: spec.max_model_len,
            server_info: spec.server_info(),
            log: log.map(Mutex::new),
        });
        tokio::spawn(drive(Arc::clone(&shared)));
        EngineBackend { shared }
    }
}

impl Drop for EngineBackend {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake.notify_one();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn since_start(&self, t: Instant) -> Nanos {
        t.saturating_duration_since(self.start).as_nanos() as Nanos
    }
}

fn reason(f: Finish) -> FinishReason {
    match f {
        Finish::Stop => FinishReason::Stop,
        Finish::Length => FinishReason::Length,
    }
}

impl Backend for EngineBackend {
    fn submit(&self, req: GenRequest) -> mpsc::UnboundedReceiver<GenEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        let request = EngineRequest {
            id: req.id,
            label: req.request_id.map(Into::into),
            prompt: Prompt::Tokens(req.prompt.into()),
            max_tokens: req.max_tokens,
            output_len: req.natural_len,
            priority: req.priority,
            arrival: self.shared.since_start(req.arrival),
        };
        let mut st = self.shared.lock();
        match st.engine.add_request(request) {
            Ok(ReqKey(slot)) => {
                let slot = slot as usize;
                if st.senders.len() <= slot {
                    st.senders.resize_with(slot + 1, || None);
                    st.ids.resize(slot + 1, 0);
                }
                st.senders[slot] = Some(tx);
                st.ids[slot] = req.id;
                drop(st);
                self.shared.wake.notify_one();
            }
            Err(r) => {
                let _ = tx.send(GenEvent::Failed { status: r.status, message: r.message });
            }
        }
        rx
    }

    fn render_metrics(&self, out: &mut String) {
        self.shared.lock().engine.render_metrics(out);
    }

    fn client_gone(&self, id: u64) {
        let now = self.shared.since_start(Instant::now());
        let mut guard = self.shared.lock();
        let st = &mut *guard;
        let live = |slot: &usize| st.senders[*slot].is_some() && st.ids[*slot] == id;
        if let Some(slot) = (0..st.senders.len()).find(live) {
            st.engine.client_gone(ReqKey(slot as u32), now);
        }
    }

    fn describe(&self) -> String {
        self.shared.describe.clone()
    }

    fn max_model_len(&self) -> Option<u32> {
        Some(self.shared.max_model_len)
    }

    fn server_info(&self) -> Option<serde_json::Value> {
        Some(self.shared.server_info.clone())
    }

    fn reasoning_tokens(&self) -> u32 {
        self.shared.reasoning_tokens.load(Ordering::Relaxed)
    }

    fn reset_prefix_cache(&self) -> Option<u64> {
        Some(self.shared.lock().engine.reset_prefix_cache())
    }

    fn scheduler_report(&self) -> Option<SchedulerReport> {
        let mut report = self.shared.lock().engine.scheduler_report();
        if let Some(log) = &self.shared.log {
            let log = log.lock().unwrap_or_else(PoisonError::into_inner);
            report.decision_log = Some(log.name.clone());
            report.decision_log_error = log.error.clone();
        }
        Some(report)
    }
}

/// What the loop does next.
enum Next {
    /// Deliver the step's outputs when it ends.
    StepEnds(Nanos),
    /// Nothing to run; a scheduler may want to be asked again at a time.
    Idle(Option<Nanos>),
}

async fn drive(shared: Arc<Shared>) {
    let mut due: Vec<Output> = Vec::new();
    let mut decisions: Vec<Decision> = Vec::new();
    loop {
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        let next = {
            let mut guard = shared.lock();
            let st = &mut *guard;
            // Clients that went away are freed at this step (unless the engine ignores them:
            // then they run to their end, and every token they get is waste).
            let ignore = shared.ignore_cancels.load(Ordering::Relaxed);
            let now = shared.since_start(Instant::now());
            for (slot, tx) in st.senders.iter_mut().enumerate() {
                let key = ReqKey(slot as u32);
                if tx.as_ref().is_some_and(|t| t.is_closed()) || st.engine.is_gone(key) {
                    if ignore {
                        st.engine.client_gone(key, now);
                    } else {
                        *tx = None;
                        st.engine.abort(key, now);
                    }
                }
            }
            let step = st.engine.step(now);
            // Requests whose batch failed get their error now.
            for f in st.engine.failed() {
                if let Some(tx) = st.senders.get_mut(f.key.0 as usize).and_then(Option::take) {
                    let message = f.message.to_string();
                    let _ = tx.send(GenEvent::Failed { status: f.status, message });
                }
            }
            if shared.log.is_some() {
                decisions = st.engine.take_decisions();
            }
            match step {
                Some(info) => {
                    for s in st.engine.newly_scheduled() {
                        if let Some(tx) = &st.senders[s.key.0 as usize] {
                            let queue = Duration::from_nanos(s.queue_ns);
                            let _ = tx.send(GenEvent::Scheduled { queue });
                        }
                    }
                    due.clear();
                    due.extend_from_slice(st.engine.outputs());
                    Next::StepEnds(info.end)
                }
                None => Next::Idle(st.engine.wake_at()),
            }
        };
        if let Some(log) = &shared.log {
            log.lock().unwrap_or_else(PoisonError::into_inner).append(&decisions);
            decisions.clear();
        }
        match next {
            Next::StepEnds(end) => {
                tokio::time::sleep_until(shared.start + Duration::from_nanos(end)).await;
                deliver(&shared, &due);
            }
            Next::Idle(Some(t)) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(shared.start + Duration::from_nanos(t)) => {}
                    _ = shared.wake.notified() => {}
                }
            }
            Next::Idle(None) => shared.wake.notified().await,
        }
    }
}

fn deliver(shared: &Shared, due: &[Output]) {
    let mut guard = shared.lock();
    let st = &mut *guard;
    let mut wasted = 0;
    for o in due {
        let slot = o.key.0 as usize;
        let Some(tx) = st.senders.get_mut(slot).and_then(Option::take) else {
            wasted += o.tokens;
            continue;
        };
        if tx.send(GenEvent::Tokens { count: o.tokens, due: None }).is_err() {
            wasted += o.tokens;
        }
        match o.finished {
            Some(f) => {
                let _ = tx.send(GenEvent::Finished { reason: reason(f) });
            }
            None => st.senders[slot] = Some(tx),
        }
    }
    if wasted > 0 {
        st.engine.record_undelivered(wasted);
    }
}
