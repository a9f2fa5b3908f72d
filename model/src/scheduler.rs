//! The scheduler's decisions, as data: why requests wait, the batches a strategy forms or fails,
//! the decision log (`scheduler_decisions.jsonl` in a run directory) and the report a run's
//! summary carries.
//!
//! One log line per decision the engine takes:
//!
//! - `step`: a step ran. `admitted` lists the requests that joined the running batch in it (with
//!   their token counts), `tokens` the tokens computed, `kv_blocks_in_use` the pool after the
//!   step's allocations; strategies that form batches add `batch`, and on the step that forms a
//!   batch `batch_tokens` (its prompt + max output tokens) and `kv_blocks_needed`.
//! - `wait`: nothing ran although requests wait (a batching window is open); `wake_at_ms` is when
//!   the window closes.
//! - `oom`: a batch needed more KV cache than the device holds; `failed` lists its requests,
//!   which got an error. The queue behind it is served on.
//!
//! Any decision with requests still waiting says why in `wait_reason` (a code) and
//! `wait_detail` (a sentence). Times are engine milliseconds (virtual time, or since the
//! simulator started).

use serde::{Deserialize, Serialize};

/// Engine time in nanoseconds (virtual time, or since the backend started).
pub type Nanos = u64;

/// Engine nanoseconds as milliseconds (one rounding, so logs show `67.449857`, not noise).
pub fn nanos_to_ms(t: Nanos) -> f64 {
    t as f64 / 1e6
}

/// File name of the decision log in a run directory.
pub const DECISION_LOG_FILE: &str = "scheduler_decisions.jsonl";

/// How many out-of-memory batches a report lists in full (all are counted).
pub const MAX_REPORTED_OOM_BATCHES: usize = 20;

/// Why requests are still waiting after a scheduling decision.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum WaitReason {
    /// Continuous: a running request was preempted this step, so nothing is admitted.
    Preempted,
    /// Continuous: the step's token budget (`max_num_batched_tokens`) is used up.
    StepTokens,
    /// Continuous: `max_num_seqs` requests are running.
    MaxNumSeqs,
    /// Continuous without chunked prefill: the next prompt does not fit what is left of the step.
    PromptDoesNotFit,
    /// Continuous: the KV block pool cannot hold the next request.
    KvCache,
    /// A formed batch runs to completion; nothing joins it.
    BatchRunning { batch: u64 },
    /// The batching window is open: `requests` (with `tokens` prompt + max output tokens) wait
    /// for more requests until `until`.
    Filling { requests: u32, tokens: u64, until: Nanos },
}

impl WaitReason {
    /// Short machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            WaitReason::Preempted => "preempted",
            WaitReason::StepTokens => "max_num_batched_tokens",
            WaitReason::MaxNumSeqs => "max_num_seqs",
            WaitReason::PromptDoesNotFit => "prompt_does_not_fit_step",
            WaitReason::KvCache => "kv_cache_full",
            WaitReason::BatchRunning { .. } => "batch_running",
            WaitReason::Filling { .. } => "filling_batch",
        }
    }

    /// A sentence for the log.
    pub fn detail(&self, target: Option<&str>) -> String {
        match self {
            WaitReason::Preempted => {
                "a running request was preempted in this step; nothing is admitted".into()
            }
            WaitReason::StepTokens => "the step's token budget is used up".into(),
            WaitReason::MaxNumSeqs => "max_num_seqs requests are running".into(),
            WaitReason::PromptDoesNotFit => {
                "the next prompt does not fit what is left of the step (no chunked prefill)".into()
            }
            WaitReason::KvCache => "the KV block pool cannot hold the next request".into(),
            WaitReason::BatchRunning { batch } => {
                format!("batch {batch} runs to completion; nothing joins it")
            }
            WaitReason::Filling { requests, tokens, until } => format!(
                "{requests} request(s), {tokens} tokens waiting for {} until {:.3} ms",
                target.unwrap_or("the batch to fill"),
                nanos_to_ms(*until)
            ),
        }
    }
}

/// Why a batch was formed when it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FormReason {
    /// Serial: the next request, as soon as the engine is free.
    Next,
    /// Enough requests (or tokens) were waiting.
    Full,
    /// The oldest request waited `max_wait_ms`.
    WindowClosed,
}

/// A request as the decision log names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestRef {
    /// The engine's request id (the simulator's request number; in virtual time the index in
    /// the load).
    pub id: u64,
    /// The client's `x-request-id`, when it sent one (the bench sends `<run id>-<request id>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    pub prompt_tokens: u32,
    pub max_tokens: u32,
}

/// What a batch-forming strategy did in one decision, besides the step itself.
#[derive(Clone, Debug, PartialEq)]
pub enum BatchEvent {
    /// A batch was formed (its members are the step's admitted requests).
    Formed { batch: u64, why: FormReason, batch_tokens: u64, kv_blocks_needed: u64 },
    /// A batch needed more KV blocks than are free: its requests fail.
    OutOfMemory(OomBatch),
}

/// A batch that ran out of KV cache memory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OomBatch {
    pub batch: u64,
    /// Engine time, ms.
    pub t_ms: f64,
    pub requests: Vec<RequestRef>,
    /// Prompt + max output tokens of its requests.
    pub batch_tokens: u64,
    pub kv_blocks_needed: u64,
    pub kv_blocks_free: u64,
    pub kv_blocks_total: u64,
}

impl OomBatch {
    /// The error its requests get, worded like the engine error a real server forwards.
    pub fn message(&self) -> String {
        format!(
            "CUDA out of memory (simulated): batch {} of {} request(s) needs {} KV cache blocks \
             for {} prompt + max output tokens, {} of {} are free; the batch's requests failed",
            self.batch,
            self.requests.len(),
            self.kv_blocks_needed,
            self.batch_tokens,
            self.kv_blocks_free,
            self.kv_blocks_total
        )
    }
}

/// A request admitted in a decision, with its token counts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Admitted {
    #[serde(flatten)]
    pub request: RequestRef,
    /// Prompt tokens found in the prefix cache.
    pub cached_tokens: u32,
    /// Tokens it computes in this step.
    pub step_tokens: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionKind {
    Step,
    Wait,
    Oom,
}

/// One line of `scheduler_decisions.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// Engine time of the decision (the step's start), ms.
    pub t_ms: f64,
    pub strategy: String,
    pub decision: DecisionKind,
    /// Step number (1-based) for `step`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    /// Batch number (1-based) for strategies that form batches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<u64>,
    /// Why the batch was formed now (on the step that forms it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub formed: Option<FormReason>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admitted: Vec<Admitted>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preempted: Vec<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<RequestRef>,
    /// Sequences in the step.
    pub seqs: u64,
    /// Tokens computed in the step (prefill chunks and one per decoding sequence).
    pub tokens: u64,
    /// Prompt + max output tokens of the batch (batch-forming strategies; on the forming step
    /// and on `oom`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_blocks_needed: Option<u64>,
    pub kv_blocks_in_use: u64,
    pub kv_blocks_total: u64,
    pub running: u64,
    pub waiting: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_detail: Option<String>,
    /// When the scheduler wants to decide again (a batching window closing), ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_at_ms: Option<f64>,
}

/// What the scheduler did over a run, for the run's summary (`extra.scheduler`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SchedulerReport {
    /// `continuous`, `serial`, `fixed` or `token_budget`.
    pub strategy: String,
    /// The strategy with its parameters, in words.
    pub describe: String,
    pub steps: u64,
    /// Batches formed (batch-forming strategies; null for continuous batching).
    pub batches: Option<u64>,
    /// Requests the engine failed (out of memory).
    pub failed_requests: u64,
    pub oom_batches: u64,
    /// The first out-of-memory batches, in full.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub oom: Vec<OomBatch>,
    /// The decision log's file name in the run directory, when it was saved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision_log: Option<String>,
    /// A problem writing the decision log (the run goes on without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision_log_error: Option<String>,
}

impl SchedulerReport {
    /// Notes for the run's summary: each out-of-memory batch by name ([`Self::oom_notes`]),
    /// then a problem with the decision log.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = self.oom_notes();
        if let Some(e) = &self.decision_log_error {
            notes.push(format!("the scheduler decision log is incomplete: {e}"));
        }
        notes
    }

    /// One note per out-of-memory batch, by name (the first ones in full, then a count of the
    /// others); empty when no batch ran out of memory.
    pub fn oom_notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        for b in &self.oom {
            let ids: Vec<String> = b
                .requests
                .iter()
                .map(|r| r.request_id.clone().unwrap_or_else(|| format!("#{}", r.id)))
                .collect();
            notes.push(format!(
                "out of memory: {} batch {} at {:.1} ms ({} request(s): {}) needed {} KV blocks \
                 for {} tokens, {} of {} free; its requests failed{}",
                self.strategy,
                b.batch,
                b.t_ms,
                b.requests.len(),
                ids.join(", "),
                b.kv_blocks_needed,
                b.batch_tokens,
                b.kv_blocks_free,
                b.kv_blocks_total,
                match &self.decision_log {
                    Some(f) => format!(" (see {f})"),
                    None => String::new(),
                }
            ));
        }
        let unlisted = self.oom_batches.saturating_sub(self.oom.len() as u64);
        if unlisted > 0 {
            notes.push(format!("out of memory: {unlisted} more batch(es) failed the same way"));
        }
        notes
    }
}
