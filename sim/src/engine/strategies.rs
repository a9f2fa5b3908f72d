//! Batching strategies besides continuous batching: serial, fixed-size batches and token-budget
//! batches. They form a batch from the waiting queue, run it to completion (nothing joins it
//! meanwhile) and only then form the next one. They share the engine's cost model, KV pool and
//! metrics with [`Continuous`](super::Continuous).
//!
//! A batch reserves the KV cache of its whole lifetime when it is formed: every request's prompt
//! plus `max_tokens` (a static batch cannot preempt, so it must know it fits). A batch whose
//! reservation exceeds the free KV blocks fails the way a static-batching engine does when it
//! runs out of memory: every request in it gets an error, and the queue behind it is served on.

use std::sync::Arc;

use infergate_model::config::{BatchSection, BatchStrategy};

use super::core::Core;
use super::decisions::{BatchEvent, FormReason, OomBatch, RequestRef, WaitReason, nanos_to_ms};
use super::scheduler::{Batch, Continuous, Scheduler};
use super::{Nanos, ReqKey, secs_to_nanos};

/// HTTP status of requests failed by an out-of-memory batch (an engine error, as vLLM answers
/// an internal error).
pub const OOM_STATUS: u16 = 500;

/// A batching strategy with its parameters, resolved from `[batch]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Strategy {
    /// vLLM's continuous batching.
    Continuous,
    /// One request at a time.
    Serial,
    /// Batches of `size` requests, or fewer when the oldest has waited `max_wait`.
    Fixed { size: u32, max_wait: Nanos },
    /// Batches of up to `budget` prompt + max output tokens, or fewer when the oldest has waited
    /// `max_wait`.
    TokenBudget { budget: u64, max_wait: Nanos },
}

impl Strategy {
    /// The strategy a `[batch]` section selects, once the model's context length is known.
    pub fn from_config(batch: &BatchSection, max_model_len: u32, max_num_seqs: u32) -> Strategy {
        let max_wait = secs_to_nanos(batch.max_wait_ms() / 1e3);
        match batch.strategy {
            BatchStrategy::Continuous => Strategy::Continuous,
            BatchStrategy::Serial => Strategy::Serial,
            BatchStrategy::Fixed => {
                Strategy::Fixed { size: batch.fixed_batch_size_for(max_num_seqs), max_wait }
            }
            BatchStrategy::TokenBudget => Strategy::TokenBudget {
                budget: batch.max_token_budget_for(max_model_len) as u64,
                max_wait,
            },
        }
    }

    pub fn kind(&self) -> BatchStrategy {
        match self {
            Strategy::Continuous => BatchStrategy::Continuous,
            Strategy::Serial => BatchStrategy::Serial,
            Strategy::Fixed { .. } => BatchStrategy::Fixed,
            Strategy::TokenBudget { .. } => BatchStrategy::TokenBudget,
        }
    }

    /// The strategy with its parameters, in words.
    pub fn describe(&self) -> String {
        let ms = nanos_to_ms;
        match self {
            Strategy::Continuous => "continuous batching".into(),
            Strategy::Serial => "serial (one request at a time)".into(),
            Strategy::Fixed { size, max_wait } => {
                format!("fixed batches of {size} requests (wait up to {} ms)", ms(*max_wait))
            }
            Strategy::TokenBudget { budget, max_wait } => {
                format!("token-budget batches of {budget} tokens (wait up to {} ms)", ms(*max_wait))
            }
        }
    }

    /// A scheduler running this strategy.
    pub fn scheduler(&self) -> Box<dyn Scheduler> {
        match self {
            Strategy::Continuous => Box::<Continuous>::default(),
            s => Box::new(BatchFormer::new(*s).expect("a batch-forming strategy")),
        }
    }
}

/// Serial, fixed and token-budget batching: form a batch, run it to completion, repeat.
#[derive(Debug)]
pub struct BatchFormer {
    strategy: Strategy,
    name: &'static str,
    /// Number of the batch running (or the last one), 1-based.
    batch: u64,
    hits: Vec<u32>,
}

impl BatchFormer {
    /// A scheduler for a batch-forming strategy (`None` for continuous batching).
    pub fn new(strategy: Strategy) -> Option<BatchFormer> {
        (strategy != Strategy::Continuous).then(|| BatchFormer {
            strategy,
            name: strategy.kind().as_str(),
            batch: 0,
            hits: Vec::new(),
        })
    }

    /// Blocks a request reserves for its lifetime: prompt + max_tokens.
    fn reservation(core: &Core, key: ReqKey) -> (u64, u64) {
        let r = core.req(key);
        let tokens = r.prompt_len as u64 + r.max_tokens as u64;
        (tokens, tokens.div_ceil(core.limits.block_size as u64))
    }

    /// The batch the queue offers now, if one should be formed: its members and why. Otherwise
    /// the reason to wait (and when to decide again).
    fn candidates(
        &self,
        core: &Core,
        now: Nanos,
    ) -> Result<(Vec<ReqKey>, FormReason), (WaitReason, Option<Nanos>)> {
        let max_seqs = core.limits.max_num_seqs as usize;
        let (members, full, max_wait) = match self.strategy {
            Strategy::Continuous | Strategy::Serial => {
                return Ok((core.waiting.first(1), FormReason::Next));
            }
            Strategy::Fixed { size, max_wait } => {
                let members = core.waiting.first(size as usize);
                let full = members.len() >= size as usize;
                (members, full, max_wait)
            }
            Strategy::TokenBudget { budget, max_wait } => {
                // Queue order; the first request that would cross the budget closes the batch.
                let queue = core.waiting.first(max_seqs + 1);
                let mut members = Vec::new();
                let mut tokens = 0;
                let mut full = false;
                for key in queue {
                    let (t, _) = Self::reservation(core, key);
                    if tokens + t > budget || members.len() >= max_seqs {
                        full = true;
                        break;
                    }
                    tokens += t;
                    members.push(key);
                }
                (members, full, max_wait)
            }
        };
        if full && !members.is_empty() {
            return Ok((members, FormReason::Full));
        }
        let oldest = core.waiting.keys().into_iter().map(|k| core.req(k).arrival).min();
        let until = oldest.unwrap_or(now).saturating_add(max_wait);
        if now >= until {
            return Ok((members, FormReason::WindowClosed));
        }
        let tokens = members.iter().map(|&k| Self::reservation(core, k).0).sum();
        let reason = WaitReason::Filling { requests: members.len() as u32, tokens, until };
        Err((reason, Some(until)))
    }

    /// Form batches until one fits (or the queue is empty or the window is open). Batches that
    /// do not fit the KV cache fail.
    fn form(&mut self, core: &mut Core, now: Nanos, batch: &mut Batch) {
        while !core.waiting.is_empty() {
            let (members, why) = match self.candidates(core, now) {
                Ok((members, _)) if members.is_empty() => return,
                Ok(c) => c,
                Err((reason, wake)) => {
                    batch.wait = Some(reason);
                    batch.wake_at = wake;
                    return;
                }
            };
            self.batch += 1;
            core.stats.batches += 1;
            let (mut batch_tokens, mut kv_blocks_needed) = (0, 0);
            for &k in &members {
                let (t, b) = Self::reservation(core, k);
                batch_tokens += t;
                kv_blocks_needed += b;
            }
            let free = core.pool.num_free() as u64;
            if kv_blocks_needed > free {
                let oom = OomBatch {
                    batch: self.batch,
                    t_ms: nanos_to_ms(now),
                    requests: members.iter().map(|&k| request_ref(core, k)).collect(),
                    batch_tokens,
                    kv_blocks_needed,
                    kv_blocks_free: free,
                    kv_blocks_total: core.pool.total() as u64,
                };
                let message: Arc<str> = oom.message().into();
                for &k in &members {
                    core.fail(k, OOM_STATUS, Arc::clone(&message));
                }
                core.stats.oom_batches += 1;
                batch.events.push(BatchEvent::OutOfMemory(oom));
                continue;
            }
            for &k in &members {
                debug_assert_eq!(core.waiting.peek(), Some(k));
                core.prefix_hit(k, &mut self.hits);
                let admitted = core.try_admit(k, &self.hits, 0, now);
                debug_assert!(admitted, "the reservation check leaves room for every member");
            }
            batch.events.push(BatchEvent::Formed {
                batch: self.batch,
                why,
                batch_tokens,
                kv_blocks_needed,
            });
            return;
        }
    }

    /// Give every member of the running batch the tokens it needs, under the step's token
    /// budget (prompts are chunked only with chunked prefill).
    fn run(&mut self, core: &mut Core, now: Nanos, batch: &mut Batch) {
        let mut budget = core.limits.max_num_batched_tokens;
        let mut i = 0;
        while i < core.running.len() && budget > 0 {
            let key = core.running[i];
            i += 1;
            let need = core.req(key).tokens_needed();
            if need == 0 || (!core.limits.chunked_prefill && need > budget) {
                continue;
            }
            let n = need.min(budget);
            if !core.try_allocate(key, n) {
                // Cannot happen after the reservation check; fail the batch rather than hang.
                self.fail_running(core, now, batch);
                return;
            }
            batch.items.push((key, n));
            core.req_mut(key).scheduled = n;
            budget -= n;
        }
    }

    fn fail_running(&mut self, core: &mut Core, now: Nanos, batch: &mut Batch) {
        for &(k, _) in &batch.items {
            core.req_mut(k).scheduled = 0;
        }
        batch.items.clear();
        let members = core.running.clone();
        let oom = OomBatch {
            batch: self.batch,
            t_ms: nanos_to_ms(now),
            requests: members.iter().map(|&k| request_ref(core, k)).collect(),
            batch_tokens: members.iter().map(|&k| Self::reservation(core, k).0).sum(),
            kv_blocks_needed: members.iter().map(|&k| Self::reservation(core, k).1).sum(),
            kv_blocks_free: core.pool.num_free() as u64,
            kv_blocks_total: core.pool.total() as u64,
        };
        let message: Arc<str> = oom.message().into();
        for k in members {
            core.fail(k, OOM_STATUS, Arc::clone(&message));
        }
        core.stats.oom_batches += 1;
        batch.events.push(BatchEvent::OutOfMemory(oom));
    }
}

/// How the decision log names a request.
pub(crate) fn request_ref(core: &Core, key: ReqKey) -> RequestRef {
    let r = core.req(key);
    RequestRef {
        id: r.id,
        request_id: r.label.as_deref().map(str::to_string),
        prompt_tokens: r.prompt_len,
        max_tokens: r.max_tokens,
    }
}

impl Scheduler for BatchFormer {
    fn name(&self) -> &'static str {
        self.name
    }

    fn schedule(&mut self, core: &mut Core, now: Nanos, batch: &mut Batch) {
        if core.running.is_empty() {
            self.form(core, now, batch);
        }
        if !core.running.is_empty() {
            self.run(core, now, batch);
            batch.batch_id = Some(self.batch);
            if !core.waiting.is_empty() {
                batch.wait = Some(WaitReason::BatchRunning { batch: self.batch });
            }
        }
    }
}
