//! Batching strategies. A [`Scheduler`] decides, at the start of each step, which requests
//! compute how many tokens; the engine runs the step, applies the cost model and advances the
//! requests. [`Continuous`] is vLLM's continuous batching; other strategies (serial, fixed
//! batches, token budgets) plug in through the same trait and share the cost model, the KV
//! pool and the metrics.

use super::core::Core;
use super::decisions::{BatchEvent, WaitReason};
use super::{Nanos, ReqKey};

/// The work of one step.
#[derive(Debug, Default)]
pub struct Batch {
    /// Requests and the tokens each computes in the step.
    pub items: Vec<(ReqKey, u32)>,
    /// With nothing to run now: when the scheduler wants to be asked again (a batching window
    /// closing), if ever.
    pub wake_at: Option<Nanos>,
    /// Why requests are still waiting after this decision (for the decision log).
    pub wait: Option<WaitReason>,
    /// Batches the scheduler formed or failed in this decision (strategies that form batches).
    pub events: Vec<BatchEvent>,
    /// The batch the step's work belongs to (strategies that form batches).
    pub batch_id: Option<u64>,
}

impl Batch {
    pub fn clear(&mut self) {
        self.items.clear();
        self.wake_at = None;
        self.wait = None;
        self.events.clear();
        self.batch_id = None;
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn tokens(&self) -> u64 {
        self.items.iter().map(|&(_, n)| n as u64).sum()
    }
}

/// A batching strategy.
pub trait Scheduler: Send + std::fmt::Debug {
    /// Name for logs and metrics (`continuous`, `serial`, ...).
    fn name(&self) -> &'static str;

    /// Fill `batch` with the next step's work. Use the [`Core`] primitives (`try_allocate`,
    /// `prefix_hit`, `try_admit`, `preempt`) so KV accounting and metrics stay consistent.
    /// An empty batch means nothing can run now.
    fn schedule(&mut self, core: &mut Core, now: Nanos, batch: &mut Batch);
}

/// Continuous batching as vLLM's V1 scheduler does it.
///
/// 1. Running requests first, in admission order: each gets the tokens it needs (1 when
///    decoding, the rest of its prompt when prefilling in chunks), capped by what is left of
///    `max_num_batched_tokens`. When the KV pool cannot hold them, the policy's victim is
///    preempted (recompute) until it can; if the victim is the request itself, scheduling of
///    running requests stops.
/// 2. If nothing was preempted, waiting requests are admitted in queue order while fewer than
///    `max_num_seqs` run and budget is left. Cached prefix blocks are reused. Without chunked
///    prefill a request whose uncached prompt does not fit the remaining budget stops admission
///    (head-of-line: it waits for a step that fits it); with chunked prefill it takes what is
///    left and continues in later steps. Admission also stops when the KV pool is short.
#[derive(Debug, Default)]
pub struct Continuous {
    hits: Vec<u32>,
}

impl Scheduler for Continuous {
    fn name(&self) -> &'static str {
        "continuous"
    }

    fn schedule(&mut self, core: &mut Core, now: Nanos, batch: &mut Batch) {
        let mut budget = core.limits.max_num_batched_tokens;
        let mut preempted = false;
        let mut i = 0;
        'running: while i < core.running.len() && budget > 0 {
            let key = core.running[i];
            let n = core.req(key).tokens_needed().min(budget);
            if n == 0 {
                i += 1;
                continue;
            }
            while !core.try_allocate(key, n) {
                let Some(victim) = core.preemption_victim() else { break 'running };
                let pos = core.running.iter().position(|k| *k == victim).expect("victim runs");
                let undone = core.req(victim).scheduled;
                if undone > 0 {
                    // Already given tokens in this step (priority policy): take them back.
                    batch.items.retain(|(k, _)| *k != victim);
                    budget += undone;
                }
                core.preempt(victim);
                preempted = true;
                if victim == key {
                    break 'running;
                }
                if pos < i {
                    i -= 1;
                }
            }
            batch.items.push((key, n));
            core.req_mut(key).scheduled = n;
            budget -= n;
            i += 1;
        }
        if preempted {
            if !core.waiting.is_empty() {
                batch.wait = Some(WaitReason::Preempted);
            }
            return;
        }
        loop {
            if core.waiting.is_empty() {
                break;
            }
            if budget == 0 {
                batch.wait = Some(WaitReason::StepTokens);
                break;
            }
            if core.running.len() as u32 >= core.limits.max_num_seqs {
                batch.wait = Some(WaitReason::MaxNumSeqs);
                break;
            }
            let Some(key) = core.waiting.peek() else { break };
            let hit = core.prefix_hit(key, &mut self.hits);
            let need = core.req(key).num_tokens() - hit;
            if !core.limits.chunked_prefill && need > budget {
                batch.wait = Some(WaitReason::PromptDoesNotFit);
                break;
            }
            let n = need.min(budget);
            if !core.try_admit(key, &self.hits, n, now) {
                batch.wait = Some(WaitReason::KvCache);
                break;
            }
            batch.items.push((key, n));
            core.req_mut(key).scheduled = n;
            budget -= n;
        }
    }
}
