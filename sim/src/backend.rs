//! What the simulator's HTTP server asks of an engine: admit a generation request and report,
//! as events, when it is scheduled, when each group of tokens is ready and how it finished.
//!
//! Two backends implement it: the timing backend (fixed TTFT / inter-token gap, the bench's
//! known-answer oracle) and the engine model (continuous batching driven by configs/engine.toml).
//! The server turns the events into OpenAI-compatible responses, applies faults and owns the
//! wire format, so both backends serve exactly the same protocol.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

/// A generation request as the engine sees it.
#[derive(Clone, Debug)]
pub struct GenRequest {
    /// Server-assigned id, unique for the server's life.
    pub id: u64,
    /// Prompt token ids from the simulator's tokenizer (identical prefixes share ids).
    pub prompt: Vec<u32>,
    /// Upper bound of output tokens.
    pub max_tokens: u32,
    /// Where generation would stop by itself (end of sequence or end of a structured document);
    /// `None`: the backend decides. With `ignore_eos` the server passes `None` for plain text.
    pub natural_len: Option<u32>,
    pub ignore_eos: bool,
    /// Lower value = more urgent (vLLM's convention), used by the `priority` policy.
    pub priority: i64,
    /// When the request arrived at the server.
    pub arrival: Instant,
    /// The client's `x-request-id`, when it sent one (for the engine's decision log).
    pub request_id: Option<String>,
}

impl GenRequest {
    /// Tokens this request will produce if nothing interrupts it.
    pub(crate) fn target_len(&self) -> u32 {
        match self.natural_len {
            Some(n) => n.min(self.max_tokens).max(1),
            None => self.max_tokens.max(1),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// Reached `max_tokens`.
    Length,
    /// Stopped by itself (end of sequence, end of document).
    Stop,
}

impl FinishReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Length => "length",
            FinishReason::Stop => "stop",
        }
    }
}

/// What a backend reports about one request, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum GenEvent {
    /// The request was scheduled for the first time; `queue` = first scheduled step - arrival.
    Scheduled { queue: Duration },
    /// `count` more output tokens are ready (`count >= 1`). `due`: when a backend with an exact
    /// schedule (timing mode) meant them to leave, so the server can report how late it handed
    /// them over; `None` where no such schedule exists.
    Tokens { count: u32, due: Option<std::time::Instant> },
    /// Generation ended normally.
    Finished { reason: FinishReason },
    /// The engine failed the request (e.g. out of memory); the server answers with an error.
    Failed { status: u16, message: String },
}

/// An engine behind the simulator's HTTP server.
///
/// `submit` returns the channel on which the request's events arrive. When the server drops the
/// receiver (the client disconnected), the backend must free the request at its next step and
/// count the tokens it computed but never delivered as waste. The server says when the client
/// left with [`Backend::client_gone`] as it notices, before it drops the receiver.
pub trait Backend: Send + Sync + 'static {
    fn submit(&self, req: GenRequest) -> mpsc::UnboundedReceiver<GenEvent>;

    /// Append the backend's metrics in Prometheus text format (with `# HELP` / `# TYPE`).
    fn render_metrics(&self, out: &mut String);

    /// Short description for `/v1/models` and logs (e.g. `timing 50ms+10ms/token`).
    fn describe(&self) -> String;

    /// Maximum context length the backend accepts (prompt + output), if limited.
    fn max_model_len(&self) -> Option<u32> {
        None
    }

    /// The engine config served, as vLLM's `GET /server_info?config_format=json` answers it;
    /// `None` for a backend without one (the timing mode).
    fn server_info(&self) -> Option<serde_json::Value> {
        None
    }

    /// Forget the prefix cache (`POST /reset_prefix_cache`): the blocks forgotten; `None` for
    /// a backend without one.
    fn reset_prefix_cache(&self) -> Option<u64> {
        None
    }

    /// Leading tokens of every streamed chat answer sent as reasoning (`reasoning_content`).
    fn reasoning_tokens(&self) -> u32 {
        0
    }

    /// The client of request `id` (a [`GenRequest::id`]) disconnected now.
    fn client_gone(&self, _id: u64) {}

    /// What the backend's scheduler did so far (engine backends; `None` otherwise).
    fn scheduler_report(&self) -> Option<infergate_model::scheduler::SchedulerReport> {
        None
    }
}
