//! The per-request record: one line of `requests.jsonl`, written as each request finishes.
//!
//! Times are milliseconds (microsecond resolution) on the run's monotonic clock, counted from the
//! run's start. `intended_ms` is when the load schedule meant to send the request; every latency is
//! measured from it, so time a request spent waiting for the client or a stalled server counts.

use serde::{Deserialize, Serialize};

use crate::outcome::Outcome;

/// Where a request's output-token count came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// `usage.completion_tokens` reported by the server.
    Usage,
    /// Count of content-bearing stream events (no usage reported).
    Chunks,
}

/// Breaks of the streaming protocol in one response, by kind (docs/metrics.md). They are counted,
/// not failures: the request keeps the class its content earned.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamViolations {
    /// Content events after the measured choice reported a `finish_reason` (still measured).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub content_after_finish: u64,
    /// Chunks carrying a choice other than index 0, or several choices (requests send no `n`,
    /// so one choice, index 0, is all a server may stream). Only the first choice index seen is
    /// measured; the others' content is not.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub interleaved_choices: u64,
    /// Events after `data: [DONE]` (ignored).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub events_after_done: u64,
    /// Content events repeating the previous one's cumulative token count (continuous usage).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub duplicated_events: u64,
    /// Content events whose cumulative token count went backwards (continuous usage).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reordered_events: u64,
    /// 1 when a `finish_reason` came but the stream ended without `data: [DONE]`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub missing_done: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl StreamViolations {
    /// Each kind with its count, zeros included, in a fixed order (the names of the JSON fields).
    pub fn kinds(&self) -> [(&'static str, u64); 6] {
        [
            ("content_after_finish", self.content_after_finish),
            ("interleaved_choices", self.interleaved_choices),
            ("events_after_done", self.events_after_done),
            ("duplicated_events", self.duplicated_events),
            ("reordered_events", self.reordered_events),
            ("missing_done", self.missing_done),
        ]
    }

    /// No violation at all.
    pub fn is_empty(&self) -> bool {
        self.kinds().iter().all(|(_, n)| *n == 0)
    }
}

/// What came instead of an event stream, recognised so that its `truncated` request says why.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnexpectedBody {
    /// A gzip-compressed body (`Content-Encoding: gzip` or gzip's magic bytes); the client asks
    /// for no compression.
    Gzip,
    /// An HTML page (`Content-Type: text/html` or a body starting with `<!doctype html` or
    /// `<html`): usually a proxy's or gateway's error page.
    Html,
}

impl UnexpectedBody {
    pub fn name(self) -> &'static str {
        match self {
            UnexpectedBody::Gzip => "gzip",
            UnexpectedBody::Html => "html",
        }
    }
}

/// Timings a server reports about itself (llama.cpp's `timings` object), kept beside the client's
/// measurements as a cross-check.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerTimings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_n: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_n: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// Sequence number in the run (0-based, in schedule order).
    pub id: u64,
    /// Warmup requests are recorded but excluded from every metric.
    pub warmup: bool,
    /// Outcome class (see [`Outcome`]).
    pub class: Outcome,
    /// Error detail for failed requests (never contains credentials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// HTTP status of the response, when one arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Index of the workload item (prompt) used.
    pub item: u64,
    /// The session this request is a turn of (sessions workloads only; numbered from 0 in the
    /// order sessions started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<u64>,
    /// The turn of its session, from 1 (sessions workloads only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// Intended send time.
    pub intended_ms: f64,
    /// Actual send time (request handed to the connection).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_ms: Option<f64>,
    /// Arrival of the first event carrying content, reasoning or tool calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_token_ms: Option<f64>,
    /// Arrival of the last event carrying content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_token_ms: Option<f64>,
    /// When the request ended (stream closed, error, timeout or cancel).
    pub end_ms: f64,
    /// Prompt tokens: from `usage.prompt_tokens` when reported, else the workload's count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Output tokens (see `token_source`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_source: Option<TokenSource>,
    /// Number of content-bearing events received.
    pub content_events: u64,
    /// True when usage reported a token count different from the number of content events.
    #[serde(default)]
    pub count_mismatch: bool,
    /// `usage.completion_tokens` as the server reported it when it contradicts the response
    /// (more than the request's `max_tokens`, or more than
    /// [`MAX_TOKENS_PER_EVENT`](crate::openai::MAX_TOKENS_PER_EVENT) per content event): not
    /// used. `output_tokens` is then the stream's own count (content events), or blank for a
    /// whole body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected_usage: Option<u64>,
    /// Breaks of the streaming protocol (counted; the request keeps its class).
    #[serde(default, skip_serializing_if = "StreamViolations::is_empty")]
    pub stream_violations: StreamViolations,
    /// What the body was when a stream was expected and something else came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unexpected_body: Option<UnexpectedBody>,
    /// Gaps between consecutive content events, in ms.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub itl_ms: Vec<f64>,
    /// Queue time the server reported for this request (simulator header), in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_ms: Option<f64>,
    /// The server's own timings (llama.cpp), when sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_timings: Option<ServerTimings>,
    /// Finish reason reported by the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// A reasoning model's stream: content events of its reasoning sections
    /// (`reasoning_content`, `reasoning`, `<think>`...`</think>`), and when the first reasoning
    /// and the first answer event arrived (ms on the run clock; absent without reasoning).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_events: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_reasoning_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_answer_ms: Option<f64>,
    /// The `max_tokens` a request cancelled on purpose had asked for (absent for the others):
    /// what an engine that ignores the cancel computes for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
}

impl RequestRecord {
    /// A request that streamed an answer: scheduled and sent at `intended_ms`, its first
    /// content event at `first_token_ms`, then one event per gap of `itl_ms`, ending 1 ms
    /// after its last event; one output token per event, counted by the stream. What a
    /// client (or an importer of another tool's per-request data) knows of a request that
    /// went well, and the base the tests build their records from (`..RequestRecord::ok(..)`).
    pub fn ok(id: u64, intended_ms: f64, first_token_ms: f64, itl_ms: Vec<f64>) -> RequestRecord {
        let last = itl_ms.iter().fold(first_token_ms, |t, g| t + g);
        let events = itl_ms.len() as u64 + 1;
        RequestRecord {
            first_token_ms: Some(first_token_ms),
            last_token_ms: Some(last),
            end_ms: last + 1.0,
            output_tokens: Some(events),
            content_events: events,
            itl_ms,
            ..RequestRecord::failed(id, intended_ms, Outcome::Ok, Some(200), first_token_ms)
        }
    }

    /// A request of class `class` that ended at `end_ms` without an answer: sent at
    /// `intended_ms`, `status` when a response arrived.
    pub fn failed(
        id: u64,
        intended_ms: f64,
        class: Outcome,
        status: Option<u16>,
        end_ms: f64,
    ) -> RequestRecord {
        RequestRecord {
            id,
            warmup: false,
            class,
            error: None,
            status,
            item: id,
            session: None,
            turn: None,
            intended_ms,
            sent_ms: Some(intended_ms),
            first_token_ms: None,
            last_token_ms: None,
            end_ms,
            input_tokens: None,
            output_tokens: None,
            token_source: None,
            content_events: 0,
            count_mismatch: false,
            rejected_usage: None,
            stream_violations: StreamViolations::default(),
            unexpected_body: None,
            itl_ms: Vec::new(),
            queue_ms: None,
            server_timings: None,
            finish_reason: None,
            reasoning_events: 0,
            first_reasoning_ms: None,
            first_answer_ms: None,
            max_tokens: None,
        }
    }

    /// Time to first token: first content event minus intended send.
    pub fn ttft_ms(&self) -> Option<f64> {
        self.first_token_ms.map(|t| t - self.intended_ms)
    }

    /// Time to the first reasoning token: first reasoning event minus intended send.
    pub fn ttfrt_ms(&self) -> Option<f64> {
        self.first_reasoning_ms.map(|t| t - self.intended_ms)
    }

    /// Time to the first answer token of a reasoning stream: first answer event minus
    /// intended send (a stream without reasoning has no separate answer time: its TTFT).
    pub fn ttfat_ms(&self) -> Option<f64> {
        self.first_reasoning_ms?;
        self.first_answer_ms.map(|t| t - self.intended_ms)
    }

    /// A reasoning stream's time per reasoning token: from the first reasoning event to the
    /// first answer event, over the reasoning events (the gaps that span holds).
    pub fn tpot_reasoning_ms(&self) -> Option<f64> {
        let (first, answer) = (self.first_reasoning_ms?, self.first_answer_ms?);
        (self.reasoning_events > 0).then(|| (answer - first) / self.reasoning_events as f64)
    }

    /// A reasoning stream's time per answer token after the answer's first: from the first
    /// answer event to the last event, over the answer events less one (two or more).
    pub fn tpot_answer_ms(&self) -> Option<f64> {
        self.first_reasoning_ms?;
        let (answer, last) = (self.first_answer_ms?, self.last_token_ms?);
        let n = self.content_events.checked_sub(self.reasoning_events)?;
        (n >= 2).then(|| (last - answer) / (n - 1) as f64)
    }

    /// End-to-end latency: last content event minus intended send.
    pub fn e2e_ms(&self) -> Option<f64> {
        self.last_token_ms.map(|t| t - self.intended_ms)
    }

    /// Time per output token after the first: (E2E - TTFT) / (N - 1), for N >= 2.
    pub fn tpot_ms(&self) -> Option<f64> {
        let n = self.output_tokens?;
        if n < 2 {
            return None;
        }
        let first = self.first_token_ms?;
        let last = self.last_token_ms?;
        Some((last - first) / (n - 1) as f64)
    }

    /// Schedule lag: actual send minus intended send.
    pub fn lag_ms(&self) -> Option<f64> {
        self.sent_ms.map(|s| s - self.intended_ms)
    }
}

/// Round a millisecond value to microsecond resolution (what the run directory stores).
pub fn round_us(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}
