//! The engine model: continuous batching (or another `[batch]` strategy) driven by
//! `configs/engine.toml`.
//!
//! [`Engine`] is a pure, synchronous state machine. A driver adds requests, and calls
//! [`Engine::step`] with the current time; the engine picks the step's work through its
//! [`Scheduler`], prices it with the [`CostModel`], advances every request and returns when the
//! step ends together with the tokens it produced ([`Engine::outputs`]) and the requests it
//! failed ([`Engine::failed`]). With [`Engine::record_decisions`] on, every decision is kept for
//! the decision log ([`Engine::take_decisions`]). Two drivers run the same engine:
//!
//! - [`Simulation`] (virtual time): a discrete-event run over a list of arrivals, no sleeping,
//!   deterministic; per-request records and engine counters come back in a [`SimReport`].
//! - `EngineBackend` (real time): a tokio task behind the simulator's HTTP
//!   server that sleeps each step's duration and streams `GenEvent`s.
//!
//! The cost model, the constants and what the model does not capture are in `README.md` next to
//! this file.

use std::sync::Arc;

mod core;
/// The scheduler's decisions and report, as data (the model crate's).
pub use infergate_model::scheduler as decisions;
pub(crate) mod kv;
pub(crate) mod noise;
pub(crate) mod profile;
pub(crate) mod scheduler;
pub(crate) mod spec;
pub(crate) mod stats;
pub(crate) mod strategies;
mod virtual_time;

mod backend;
#[cfg(test)]
mod strategy_tests;
#[cfg(test)]
mod tests;

pub use self::core::{Core, Failure, Limits, Req, Scheduled, Status, WaitQueue};
pub use backend::EngineBackend;
pub use decisions::{
    Admitted, BatchEvent, DECISION_LOG_FILE, Decision, DecisionKind, FormReason, OomBatch,
    RequestRef, SchedulerReport, WaitReason,
};
/// Nearest-rank quantile (the model's, as every other statistic).
pub use infergate_model::stats::quantile;
pub use noise::StepNoise;
pub use scheduler::{Batch, Continuous, Scheduler};
pub use spec::{CostModel, EngineSpec, MemoryPlan, SpecError};
pub use stats::{EngineStats, Gauges};
pub use strategies::{BatchFormer, OOM_STATUS, Strategy};
pub use virtual_time::{
    CLIENT_REACTION_NS, Load, SimOutcome, SimRecord, SimReport, SimRequest, Simulation, simulate,
};

pub use infergate_model::scheduler::Nanos;

/// Seconds to [`Nanos`] (negative and non-finite values are 0).
pub(crate) fn secs_to_nanos(s: f64) -> Nanos {
    if s.is_finite() && s > 0.0 { (s * 1e9).round() as Nanos } else { 0 }
}

pub(crate) fn nanos_to_secs(n: Nanos) -> f64 {
    n as f64 / 1e9
}

/// A request's handle inside one engine (a slot index, reused after the request ends).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReqKey(pub u32);

/// Prompt tokens. Prefix caching compares them block by block.
#[derive(Clone, Debug, PartialEq)]
pub enum Prompt {
    /// Token ids (the simulator tokenizer's output).
    Tokens(Arc<[u32]>),
    /// `len` tokens whose first `prefix_len` are shared by every prompt of `prefix_group`; the
    /// rest are unique to the request. Avoids materialising token ids in large simulations.
    Synthetic { len: u32, prefix_group: u64, prefix_len: u32 },
}

impl Prompt {
    /// A prompt of unique tokens.
    pub fn unique(len: u32) -> Prompt {
        Prompt::Synthetic { len, prefix_group: 0, prefix_len: 0 }
    }

    pub fn len(&self) -> u32 {
        match self {
            Prompt::Tokens(t) => t.len() as u32,
            Prompt::Synthetic { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A request as the engine receives it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct EngineRequest {
    /// Caller's id, unique for the engine's life (also salts the request's synthetic tokens).
    pub id: u64,
    /// The client's name for the request (its `x-request-id`), for the decision log.
    pub label: Option<Arc<str>>,
    pub prompt: Prompt,
    pub max_tokens: u32,
    /// Where generation stops by itself; `None`: at max_tokens.
    pub output_len: Option<u32>,
    /// Lower = more urgent (`priority` policy).
    pub priority: i64,
    pub arrival: Nanos,
}

/// Why generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    /// Stopped by itself before max_tokens.
    Stop,
    /// Reached max_tokens.
    Length,
}

impl Finish {
    pub fn as_str(self) -> &'static str {
        match self {
            Finish::Stop => "stop",
            Finish::Length => "length",
        }
    }
}

/// A request the engine refuses (the server answers with `status`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Rejection {
    pub status: u16,
    pub message: String,
}

/// What a step produced for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Output {
    pub key: ReqKey,
    pub id: u64,
    /// New output tokens (the engine samples one token per request per step).
    pub tokens: u32,
    /// These are the request's first tokens.
    pub first: bool,
    pub finished: Option<Finish>,
}

/// One step, as run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepInfo {
    pub start: Nanos,
    pub end: Nanos,
    pub forward_ns: f64,
    pub interval_ns: f64,
    pub prefill_tokens: u64,
    pub decode_seqs: u64,
    pub seqs: u64,
}

/// The engine.
#[derive(Debug)]
pub struct Engine {
    core: Core,
    scheduler: Box<dyn Scheduler>,
    /// The strategy the spec selects (what `describe` reports).
    strategy: Strategy,
    cost: CostModel,
    model_name: String,
    gpu_memory_utilization: f64,
    batch: Batch,
    outputs: Vec<Output>,
    now: Nanos,
    /// Decisions not yet taken by the driver, when recording.
    decisions: Option<Vec<Decision>>,
    /// The first out-of-memory batches (all are counted in the stats).
    oom: Vec<OomBatch>,
    /// Seeded noise on every step's time (`[sim.noise]`), when on.
    noise: Option<StepNoise>,
}

impl Engine {
    /// Forget every cached prefix of free KV blocks (`/reset_prefix_cache`); the blocks
    /// forgotten.
    pub fn reset_prefix_cache(&mut self) -> u64 {
        self.core.pool.reset_prefix_cache()
    }

    /// An engine with the spec's batching strategy (`[batch]`, continuous by default).
    pub fn new(spec: &EngineSpec) -> Engine {
        Engine::with_scheduler(spec, spec.strategy.scheduler())
    }

    /// An engine with another batching strategy.
    pub(crate) fn with_scheduler(spec: &EngineSpec, scheduler: Box<dyn Scheduler>) -> Engine {
        let limits = Limits {
            max_num_seqs: spec.max_num_seqs,
            max_num_batched_tokens: spec.max_num_batched_tokens,
            max_model_len: spec.max_model_len,
            block_size: spec.block_size,
            chunked_prefill: spec.chunked_prefill,
            prefix_caching: spec.prefix_caching,
            policy: spec.policy,
        };
        Engine {
            core: Core::new(limits, spec.num_blocks),
            scheduler,
            strategy: spec.strategy,
            cost: spec.cost.clone(),
            model_name: spec.served_model_name.clone(),
            gpu_memory_utilization: spec.config.engine.gpu_memory_utilization,
            batch: Batch::default(),
            outputs: Vec::new(),
            now: 0,
            decisions: None,
            oom: Vec::new(),
            noise: None,
        }
    }

    /// This engine with the noise a bench profile's `[sim.noise]` describes (none when off).
    pub fn with_noise(mut self, cfg: &infergate_model::config::NoiseConfig) -> Engine {
        self.noise = StepNoise::new(cfg);
        self
    }

    /// The noise's factor for this run (1 without noise).
    pub fn run_factor(&self) -> f64 {
        self.noise.as_ref().map_or(1.0, StepNoise::run_factor)
    }

    /// Keep every scheduling decision for [`Engine::take_decisions`] (the decision log).
    pub fn record_decisions(&mut self, on: bool) {
        if on {
            self.decisions.get_or_insert_with(Vec::new);
        } else {
            self.decisions = None;
        }
    }

    /// The decisions recorded since the last call, oldest first.
    pub fn take_decisions(&mut self) -> Vec<Decision> {
        self.decisions.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Requests the last step failed (their batch ran out of memory); their slots stay
    /// readable until the next step.
    pub fn failed(&self) -> &[Failure] {
        &self.core.failed
    }

    /// What the scheduler did so far.
    pub fn scheduler_report(&self) -> SchedulerReport {
        let s = &self.core.stats;
        SchedulerReport {
            strategy: self.scheduler.name().to_string(),
            describe: self.strategy.describe(),
            steps: s.steps,
            batches: (self.strategy != Strategy::Continuous).then_some(s.batches),
            failed_requests: s.failed_requests,
            oom_batches: s.oom_batches,
            oom: self.oom.clone(),
            decision_log: None,
            decision_log_error: None,
        }
    }

    /// Queue a request. Refused (400, as vLLM does) when its prompt is empty or prompt +
    /// max_tokens exceeds max_model_len.
    pub(crate) fn add_request(&mut self, req: EngineRequest) -> Result<ReqKey, Rejection> {
        let prompt_len = req.prompt.len();
        let max_model_len = self.core.limits.max_model_len;
        let max_tokens = req.max_tokens.max(1);
        let reject = |message: String| Rejection { status: 400, message };
        let label = req.label;
        let refusal = if prompt_len == 0 {
            Some(reject("the prompt is empty".into()))
        } else if prompt_len as u64 + max_tokens as u64 > max_model_len as u64 {
            Some(reject(format!(
                "This model's maximum context length is {max_model_len} tokens. However, you \
                 requested {} tokens ({prompt_len} in the messages, {max_tokens} in the \
                 completion). Please reduce the length of the messages or completion.",
                prompt_len as u64 + max_tokens as u64
            )))
        } else {
            None
        };
        if let Some(r) = refusal {
            self.core.stats.rejected += 1;
            return Err(r);
        }
        let target = req.output_len.map_or(max_tokens, |n| n.clamp(1, max_tokens));
        Ok(self.core.insert(
            req.id,
            label,
            req.prompt,
            prompt_len,
            target,
            max_tokens,
            req.priority,
            req.arrival,
        ))
    }

    /// The client of a request went away at `at`: from then on the request's slot, its KV
    /// blocks and any prefill whose first token reaches nobody are waste (counted when it is
    /// freed, by [`Engine::abort`], or when it ends). A second call, or one for a request that
    /// already ended, changes nothing.
    pub(crate) fn client_gone(&mut self, key: ReqKey, at: Nanos) {
        let Some(r) = self.core.try_req_mut(key) else { return };
        if r.status == Status::Done || r.gone_at.is_some() {
            return;
        }
        r.gone_at = Some(at);
        self.core.stats.abandoned += 1;
    }

    /// Whether the client of a live request went away ([`Engine::client_gone`]).
    pub(crate) fn is_gone(&self, key: ReqKey) -> bool {
        self.core.try_req(key).is_some_and(|r| r.status != Status::Done && r.gone_at.is_some())
    }

    /// Free a request whose client went away, at `now` (at or after [`Engine::client_gone`];
    /// without it, the client counts as gone now). Returns false when the request already
    /// ended. Tokens it produced after the client left are reported with
    /// [`Engine::record_undelivered`].
    pub fn abort(&mut self, key: ReqKey, now: Nanos) -> bool {
        self.client_gone(key, now);
        let aborted = self.core.abort(key, now);
        if aborted {
            self.core.stats.cancelled += 1;
        }
        aborted
    }

    /// Output tokens that could not be delivered (the client had disconnected): waste.
    pub(crate) fn record_undelivered(&mut self, tokens: u32) {
        self.core.stats.wasted_tokens += tokens as u64;
    }

    /// Whether any request is waiting or running.
    pub(crate) fn has_work(&self) -> bool {
        !self.core.running.is_empty() || !self.core.waiting.is_empty()
    }

    /// Run one step starting at `now`. `None` when nothing can run (idle, or the scheduler waits;
    /// see [`Engine::wake_at`]). Otherwise the step's timing; its tokens are in
    /// [`Engine::outputs`] and are due at `end`, and the requests it scheduled for the first
    /// time are in [`Engine::newly_scheduled`] (due at `start`).
    pub fn step(&mut self, now: Nanos) -> Option<StepInfo> {
        self.core.release_finished_slots();
        self.core.begin_step();
        self.outputs.clear();
        self.batch.clear();
        self.now = self.now.max(now);
        let now = self.now;
        if !self.has_work() {
            return None;
        }
        self.scheduler.schedule(&mut self.core, now, &mut self.batch);
        for e in &self.batch.events {
            if let BatchEvent::OutOfMemory(b) = e {
                if self.oom.len() < decisions::MAX_REPORTED_OOM_BATCHES {
                    self.oom.push(b.clone());
                }
            }
        }
        if self.decisions.is_some() {
            self.log_events(now);
        }
        if self.batch.is_empty() {
            if self.decisions.is_some() && (self.has_work() || self.batch.wait.is_some()) {
                let d = self.decision(now, DecisionKind::Wait, (0, 0));
                self.push_decision(d);
            }
            return None;
        }

        let core = &self.core;
        let (mut prefill, mut decode, mut kv_read) = (0u64, 0u64, 0u64);
        for &(key, n) in &self.batch.items {
            let r = core.req(key);
            if n == 1 && r.computed >= r.prompt_len {
                decode += 1;
            } else {
                prefill += n as u64;
            }
            kv_read += (r.computed + n) as u64;
        }
        let seqs = self.batch.items.len() as u64;
        if self.decisions.is_some() {
            let d = self.decision(now, DecisionKind::Step, (seqs, prefill + decode));
            self.push_decision(d);
        }
        let core = &mut self.core;
        let mut forward = self.cost.forward_ns(prefill, decode, kv_read);
        let mut interval = self.cost.interval_ns(seqs);
        let (factor, stall_ns) = self.noise.as_mut().map_or((1.0, 0.0), StepNoise::next_step);
        forward *= factor;
        interval *= factor;
        let dur = (self.cost.step_ns(forward, interval) + stall_ns).round().max(1.0) as Nanos;
        let end = now + dur;

        let s = &mut core.stats;
        s.steps += 1;
        s.forward_ns += forward.round() as u64;
        s.interval_ns += interval.round() as u64;
        s.step_ns += dur;
        s.prefill_tokens_computed += prefill;
        s.decode_tokens_computed += decode;
        s.iteration_tokens.observe((prefill + decode) as f64);

        for i in 0..self.batch.items.len() {
            let (key, n) = self.batch.items[i];
            let r = core.req_mut(key);
            let before = r.computed;
            r.computed += n;
            r.scheduled = 0;
            let after = r.computed;
            let recomputed = after.min(r.high_water).saturating_sub(before);
            r.high_water = r.high_water.max(after);
            if core.limits.prefix_caching {
                core.register_full_blocks(key, before, after);
            }
            let r = core.req_mut(key);
            if r.computed < r.num_tokens() {
                core.stats.recomputed_tokens += recomputed as u64;
                continue; // a chunk of a prefill: nothing sampled yet
            }
            r.generated += 1;
            let first = r.first_token.is_none();
            let (arrival, last, prompt_len, generated) =
                (r.arrival, r.last_token, r.prompt_len, r.generated);
            let scheduled_at = r.first_scheduled.unwrap_or(arrival);
            if first {
                r.first_token = Some(end);
            }
            r.last_token = end;
            let finished = (r.generated >= r.target).then_some(if r.target < r.max_tokens {
                Finish::Stop
            } else {
                Finish::Length
            });
            let first_token = r.first_token.unwrap_or(end);
            let id = r.id;
            let s = &mut core.stats;
            s.recomputed_tokens += recomputed as u64;
            s.generation_tokens += 1;
            if first {
                s.prompt_tokens += prompt_len as u64;
                s.ttft.observe(nanos_to_secs(end.saturating_sub(arrival)));
                s.prefill_time.observe(nanos_to_secs(end.saturating_sub(scheduled_at)));
            } else {
                s.itl.observe(nanos_to_secs(end.saturating_sub(last)));
            }
            if let Some(f) = finished {
                match f {
                    Finish::Stop => s.finished_stop += 1,
                    Finish::Length => s.finished_length += 1,
                }
                s.e2e.observe(nanos_to_secs(end.saturating_sub(arrival)));
                s.decode_time.observe(nanos_to_secs(end.saturating_sub(first_token)));
                if generated > 1 {
                    let decode = nanos_to_secs(end.saturating_sub(first_token));
                    s.tpot.observe(decode / (generated - 1) as f64);
                }
                s.request_prompt_tokens.observe(prompt_len as f64);
                s.request_generation_tokens.observe(generated as f64);
                core.count_abandoned(key, end);
                core.retire(key, true);
            }
            self.outputs.push(Output { key, id, tokens: 1, first, finished });
        }
        core.drop_ended_from_running();
        self.now = end;
        Some(StepInfo {
            start: now,
            end,
            forward_ns: forward,
            interval_ns: interval,
            prefill_tokens: prefill,
            decode_seqs: decode,
            seqs,
        })
    }

    fn push_decision(&mut self, d: Decision) {
        if let Some(log) = &mut self.decisions {
            log.push(d);
        }
    }

    /// Log records for the batches the scheduler failed in this decision.
    fn log_events(&mut self, now: Nanos) {
        let ooms: Vec<OomBatch> = self
            .batch
            .events
            .iter()
            .filter_map(|e| match e {
                BatchEvent::OutOfMemory(b) => Some(b.clone()),
                BatchEvent::Formed { .. } => None,
            })
            .collect();
        for b in ooms {
            let mut d = self.decision(now, DecisionKind::Oom, (0, 0));
            d.batch = Some(b.batch);
            d.admitted.clear();
            d.formed = None;
            d.batch_tokens = Some(b.batch_tokens);
            d.kv_blocks_needed = Some(b.kv_blocks_needed);
            d.failed = b.requests;
            self.push_decision(d);
        }
    }

    /// A decision record of the state after scheduling; `(seqs, tokens)` of the step.
    fn decision(&self, now: Nanos, kind: DecisionKind, (seqs, tokens): (u64, u64)) -> Decision {
        let core = &self.core;
        let batch = &self.batch;
        let formed = batch.events.iter().find_map(|e| match e {
            BatchEvent::Formed { why, batch_tokens, kv_blocks_needed, .. } => {
                Some((*why, *batch_tokens, *kv_blocks_needed))
            }
            BatchEvent::OutOfMemory(_) => None,
        });
        let admitted = if kind == DecisionKind::Step {
            core.admitted
                .iter()
                .map(|&(key, n)| Admitted {
                    request: strategies::request_ref(core, key),
                    cached_tokens: core.req(key).cached_tokens,
                    step_tokens: batch.items.iter().find(|(k, _)| *k == key).map_or(n, |&(_, n)| n),
                })
                .collect()
        } else {
            Vec::new()
        };
        let ms = decisions::nanos_to_ms;
        let target = match self.strategy {
            Strategy::Fixed { size, .. } => Some(format!("a batch of {size}")),
            Strategy::TokenBudget { budget, .. } => Some(format!("a budget of {budget} tokens")),
            _ => None,
        };
        Decision {
            t_ms: ms(now),
            strategy: self.scheduler.name().to_string(),
            decision: kind,
            step: (kind == DecisionKind::Step).then_some(core.stats.steps + 1),
            batch: batch.batch_id,
            formed: formed.map(|f| f.0),
            admitted,
            preempted: if kind == DecisionKind::Step { core.preempted.clone() } else { Vec::new() },
            failed: Vec::new(),
            seqs,
            tokens,
            batch_tokens: formed.map(|f| f.1),
            kv_blocks_needed: formed.map(|f| f.2),
            kv_blocks_in_use: core.pool.num_used() as u64,
            kv_blocks_total: core.pool.total() as u64,
            running: core.running.len() as u64,
            waiting: core.waiting.len() as u64,
            wait_reason: batch.wait.map(|w| w.code().to_string()),
            wait_detail: batch.wait.map(|w| w.detail(target.as_deref())),
            wake_at_ms: batch.wake_at.map(ms),
        }
    }

    /// Tokens produced by the last step.
    pub fn outputs(&self) -> &[Output] {
        &self.outputs
    }

    /// Requests the last step scheduled for the first time.
    pub(crate) fn newly_scheduled(&self) -> &[Scheduled] {
        &self.core.newly_scheduled
    }

    /// When an idle scheduler wants to be asked again (batching windows), if ever.
    pub(crate) fn wake_at(&self) -> Option<Nanos> {
        self.batch.wake_at
    }

    /// End of the last step (engine time).
    pub fn now(&self) -> Nanos {
        self.now
    }

    pub fn num_running(&self) -> usize {
        self.core.running.len()
    }

    pub fn num_waiting(&self) -> usize {
        self.core.waiting.len()
    }

    pub fn stats(&self) -> &EngineStats {
        &self.core.stats
    }

    /// The state schedulers work on (read-only).
    pub fn core(&self) -> &Core {
        &self.core
    }

    pub fn request(&self, key: ReqKey) -> &Req {
        self.core.req(key)
    }

    pub fn scheduler_name(&self) -> &'static str {
        self.scheduler.name()
    }

    /// The batching strategy the spec selected.
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    pub fn gauges(&self) -> Gauges {
        Gauges {
            running: self.core.running.len(),
            waiting: self.core.waiting.len(),
            kv_blocks_total: self.core.pool.total(),
            kv_blocks_used: self.core.pool.num_used(),
            kv_blocks_cached: self.core.pool.num_cached(),
            kv_fragmentation: self.core.kv_fragmentation(),
        }
    }

    /// Append the engine's metrics in Prometheus text format.
    pub fn render_metrics(&self, out: &mut String) {
        let info = stats::CacheInfo {
            block_size: self.core.limits.block_size,
            num_gpu_blocks: self.core.pool.total(),
            enable_prefix_caching: self.core.limits.prefix_caching,
            gpu_memory_utilization: self.gpu_memory_utilization,
            model_name: &self.model_name,
            strategy: self.scheduler.name(),
        };
        stats::render(out, &self.core.stats, &self.gauges(), &info);
    }
}
