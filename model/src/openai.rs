//! Reading OpenAI-compatible responses: streamed `chat.completion.chunk` / `text_completion`
//! events and whole (non-streamed) bodies, into timings, token counts and an outcome class.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::outcome::Outcome;
use crate::record::{ServerTimings, StreamViolations, TokenSource, UnexpectedBody};
use crate::redact::Redactor;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    #[serde(default)]
    pub completion_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(default, borrow)]
    choices: Option<Vec<Choice<'a>>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
    #[serde(default, borrow)]
    object: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    message: Option<Cow<'a, str>>,
    #[serde(default)]
    timings: Option<RawTimings>,
}

#[derive(Deserialize)]
struct RawTimings {
    #[serde(default)]
    prompt_ms: Option<f64>,
    #[serde(default)]
    predicted_ms: Option<f64>,
    #[serde(default)]
    prompt_n: Option<u64>,
    #[serde(default)]
    predicted_n: Option<u64>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    /// Chat, non-streamed.
    #[serde(default, borrow)]
    message: Option<Delta<'a>>,
    /// Completions.
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(default)]
    tool_calls: Option<Vec<IgnoredAny>>,
}

/// What one content event carried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    Reasoning,
    Answer,
}

fn nonempty(s: &Option<Cow<'_, str>>) -> bool {
    s.as_deref().is_some_and(|s| !s.is_empty())
}

impl Delta<'_> {
    /// Content or a tool call: the answer's part of a delta.
    fn has_answer(&self) -> bool {
        nonempty(&self.content) || self.tool_calls.as_ref().is_some_and(|t| !t.is_empty())
    }

    /// Reasoning when it carries only reasoning text; the answer when it carries content or a
    /// tool call (content inside `<think>` is told apart by the tracker).
    fn part(&self) -> Part {
        if self.has_answer() { Part::Answer } else { Part::Reasoning }
    }

    fn has_output(&self) -> bool {
        self.has_answer() || nonempty(&self.reasoning_content) || nonempty(&self.reasoning)
    }
}

/// Irregularities seen in a stream (counted; they do not by themselves fail a request).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamIntegrity {
    /// Events after `[DONE]`.
    pub events_after_done: u64,
    /// Content after the choice reported a finish reason.
    pub content_after_finish: u64,
    /// Chunks carrying a choice other than index 0, or several choices (interleaved choices:
    /// requests send no `n`, so a server may stream one choice, index 0). Only the first choice
    /// index seen is measured.
    pub choice_index_changes: u64,
    /// Events that are comments (`: ping`).
    pub comments: u64,
    /// Content chunks repeating the previous one's cumulative token count (continuous usage,
    /// e.g. vLLM's `stream_options.continuous_usage_stats`): the same event delivered twice.
    pub duplicated_events: u64,
    /// Content chunks whose cumulative token count is lower than an earlier one's: out of order.
    pub reordered_events: u64,
    /// 1 when the stream reported a finish reason but ended without `data: [DONE]`.
    pub missing_done: u64,
}

impl StreamIntegrity {
    /// Irregularities that break the stream protocol (comments are allowed).
    pub fn violations(&self) -> u64 {
        self.events_after_done
            + self.content_after_finish
            + self.choice_index_changes
            + self.duplicated_events
            + self.reordered_events
            + self.missing_done
    }

    /// The violations of this stream by kind, as a request's record keeps them.
    pub fn by_kind(&self) -> StreamViolations {
        StreamViolations {
            content_after_finish: self.content_after_finish,
            interleaved_choices: self.choice_index_changes,
            events_after_done: self.events_after_done,
            duplicated_events: self.duplicated_events,
            reordered_events: self.reordered_events,
            missing_done: self.missing_done,
        }
    }

    /// Add another stream's counts.
    pub fn add(&mut self, o: &StreamIntegrity) {
        self.events_after_done += o.events_after_done;
        self.content_after_finish += o.content_after_finish;
        self.choice_index_changes += o.choice_index_changes;
        self.comments += o.comments;
        self.duplicated_events += o.duplicated_events;
        self.reordered_events += o.reordered_events;
        self.missing_done += o.missing_done;
    }
}

/// Whether the client should keep reading the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// The stream failed (error event, error object, malformed chunk): stop reading.
    Stop,
}

/// How the transport ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamEnd {
    /// The server closed the body normally.
    Eof { partial_event: bool },
    /// Reading the body failed (connection reset, decode error).
    ReadError(String),
    /// The request or stall timeout fired.
    Timeout(String),
    /// The run was interrupted and the grace period ran out.
    Interrupted,
    /// The bench closed the stream on purpose (`[profile.*.cancel]`): why.
    CancelledOnPurpose(String),
    /// The tracker itself asked to stop.
    Stopped,
    /// A line or an event's data went past `client.max_event_kib`: reading stopped there.
    Oversized(String),
}

/// The result of reading a response.
#[derive(Clone, Debug, PartialEq)]
pub struct ResponseResult {
    pub class: Outcome,
    pub error: Option<String>,
    pub first_token_ms: Option<f64>,
    pub last_token_ms: Option<f64>,
    pub itl_ms: Vec<f64>,
    pub content_events: u64,
    pub output_tokens: Option<u64>,
    pub prompt_tokens: Option<u64>,
    pub token_source: Option<TokenSource>,
    pub count_mismatch: bool,
    /// `usage.completion_tokens` the server reported that contradicts the response (see
    /// [`usage_contradicts`]): not used.
    pub rejected_usage: Option<u64>,
    pub finish_reason: Option<String>,
    pub server_timings: Option<ServerTimings>,
    pub integrity: StreamIntegrity,
    pub done_seen: bool,
    /// Generated text, when capture was requested.
    pub text: Option<String>,
    /// What came instead of an event stream, when it was recognised (gzip, HTML).
    pub unexpected_body: Option<UnexpectedBody>,
    /// Content events of reasoning sections, and when the first reasoning and the first
    /// answer event arrived (streams only).
    pub reasoning_events: u64,
    pub first_reasoning_ms: Option<f64>,
    pub first_answer_ms: Option<f64>,
}

impl ResponseResult {
    /// A response that failed before any content: only a class and a reason.
    pub fn failed(class: Outcome, msg: String) -> ResponseResult {
        ResponseResult::bare(class, Some(msg))
    }

    /// A class and an optional reason, nothing measured yet.
    pub fn bare(class: Outcome, error: Option<String>) -> ResponseResult {
        ResponseResult {
            class,
            error,
            first_token_ms: None,
            last_token_ms: None,
            itl_ms: Vec::new(),
            content_events: 0,
            output_tokens: None,
            prompt_tokens: None,
            token_source: None,
            count_mismatch: false,
            rejected_usage: None,
            finish_reason: None,
            server_timings: None,
            integrity: StreamIntegrity::default(),
            done_seen: false,
            text: None,
            unexpected_body: None,
            reasoning_events: 0,
            first_reasoning_ms: None,
            first_answer_ms: None,
        }
    }

    /// Set aside a `usage.completion_tokens` that contradicts the response (see
    /// [`usage_contradicts`]; `streamed`: the response was an event stream, whose content events
    /// bound the count; `max_tokens`: the limit the request sent). The reported count moves to
    /// `rejected_usage`; the output count becomes the stream's own (its content events), or
    /// blank for a whole body, whose content cannot be counted in tokens.
    pub fn check_usage(&mut self, streamed: bool, max_tokens: Option<u64>) {
        let (Some(reported), Some(TokenSource::Usage)) = (self.output_tokens, self.token_source)
        else {
            return;
        };
        let events = streamed.then_some(self.content_events);
        if !usage_contradicts(reported, events, max_tokens) {
            return;
        }
        self.rejected_usage = Some(reported);
        self.count_mismatch = false;
        (self.output_tokens, self.token_source) = match events {
            Some(n) if n > 0 => (Some(n), Some(TokenSource::Chunks)),
            _ => (None, None),
        };
    }
}

/// The most output tokens one content event of a stream is believed to carry. Engines send one
/// event per decoding step or a few steps (speculative decoding, a stream interval), a handful
/// of tokens; a server reporting more per event than this is not counting what it streamed.
pub(crate) const MAX_TOKENS_PER_EVENT: u64 = 256;

/// Whether a reported `usage.completion_tokens` contradicts the response: more than the
/// `max_tokens` the request sent (when it sent one), or, for a stream with `content_events`,
/// more than [`MAX_TOKENS_PER_EVENT`] per content event.
pub(crate) fn usage_contradicts(
    reported: u64,
    content_events: Option<u64>,
    max_tokens: Option<u64>,
) -> bool {
    max_tokens.is_some_and(|m| reported > m)
        || content_events.is_some_and(|e| reported > e.saturating_mul(MAX_TOKENS_PER_EVENT))
}

impl UnexpectedBody {
    /// What a request's error text says about such a body.
    pub fn hint(self) -> &'static str {
        match self {
            UnexpectedBody::Gzip => {
                "the body is gzip-compressed (Content-Encoding: gzip or gzip's magic bytes), which \
                 the client did not ask for: a proxy or the server compressed the event stream"
            }
            UnexpectedBody::Html => "the body is an HTML page (a proxy or gateway answered?)",
        }
    }
}

/// How many of a body's first bytes [`recognise_body`] looks at.
pub const SNIFF_BYTES: usize = 64;

/// A body that is not an event stream, recognised by its `Content-Encoding`, its `Content-Type`
/// or its first bytes (`head`, up to [`SNIFF_BYTES`]): gzip (`1f 8b`) or an HTML page
/// (`<!doctype html` or `<html`, after white space, any case).
pub fn recognise_body(
    content_encoding: Option<&str>,
    content_type: Option<&str>,
    head: &[u8],
) -> Option<UnexpectedBody> {
    let has =
        |v: Option<&str>, what: &str| v.is_some_and(|v| v.to_ascii_lowercase().contains(what));
    if has(content_encoding, "gzip") || head.starts_with(&[0x1f, 0x8b]) {
        return Some(UnexpectedBody::Gzip);
    }
    let text = String::from_utf8_lossy(head)
        .trim_start_matches(['\u{feff}', ' ', '\t', '\r', '\n'])
        .to_ascii_lowercase();
    if has(content_type, "text/html")
        || text.starts_with("<!doctype html")
        || text.starts_with("<html")
    {
        return Some(UnexpectedBody::Html);
    }
    None
}

/// Follows one streamed response event by event. Times are the arrival times of the bytes that
/// completed each event, in ms on the run clock.
#[derive(Debug, Default)]
pub struct StreamTracker {
    first: Option<f64>,
    last: Option<f64>,
    itl: Vec<f64>,
    content_events: u64,
    usage: Option<Usage>,
    finish_reason: Option<String>,
    done: bool,
    failure: Option<(Outcome, String)>,
    timings: Option<ServerTimings>,
    integrity: StreamIntegrity,
    first_index: Option<u64>,
    text: Option<String>,
    /// Highest cumulative completion-token count seen on a content chunk.
    last_cumulative: Option<u64>,
    /// Removes secrets from server text before it is cut to length.
    redactor: Redactor,
    /// Reasoning: content events of a reasoning section (`reasoning_content`, `reasoning`, or
    /// content inside `<think>`...`</think>`), the first one's time, and whether a `<think>`
    /// section is open.
    reasoning_events: u64,
    first_reasoning: Option<f64>,
    /// The first content event of the answer (content outside a reasoning section, a tool call,
    /// a completion's text).
    first_answer: Option<f64>,
    in_think: bool,
}

/// The message of an error object, whole (cut after redaction by the caller).
fn error_message(v: &serde_json::Value) -> String {
    v.get("message")
        .and_then(|m| m.as_str())
        .map(str::to_string)
        .or_else(|| v.as_str().map(str::to_string))
        .unwrap_or_else(|| v.to_string())
}

/// How many characters of a server's error message are kept.
pub const MESSAGE_CHARS: usize = 300;
/// How many characters of a `finish_reason` are kept.
pub(crate) const FINISH_REASON_CHARS: usize = 64;
/// How many characters of an unparseable chunk or body are kept.
pub(crate) const CHUNK_CHARS: usize = 120;

/// At most `n` characters of `s` (with an ellipsis when cut).
pub fn truncate_chars(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

impl StreamTracker {
    pub fn new(capture_text: bool) -> Self {
        StreamTracker { text: capture_text.then(String::new), ..Default::default() }
    }

    /// The same tracker removing these secrets from the server text it keeps.
    pub fn with_redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    /// Whether content text belongs to a `<think>` section (the model's reasoning written
    /// inline): from a `<think>` before any answer to its `</think>`; an event that closes the
    /// section and carries more text is the answer's first.
    fn think_part(&mut self, text: &str) -> Part {
        if !self.in_think {
            if self.first_answer.is_none()
                && let Some(open) = text.find("<think>")
                && text[..open].trim().is_empty()
            {
                self.in_think = true;
                return self.think_part_open(&text[open + "<think>".len()..]);
            }
            return Part::Answer;
        }
        self.think_part_open(text)
    }

    fn think_part_open(&mut self, text: &str) -> Part {
        match text.find("</think>") {
            Some(close) => {
                self.in_think = false;
                let rest = &text[close + "</think>".len()..];
                if rest.trim().is_empty() { Part::Reasoning } else { Part::Answer }
            }
            None => Part::Reasoning,
        }
    }

    /// Content events received so far (the client's own count of output tokens).
    pub fn content_events(&self) -> u64 {
        self.content_events
    }

    /// Whether the stream already said it is complete (a finish reason or `[DONE]`).
    pub fn completed(&self) -> bool {
        self.done || self.finish_reason.is_some()
    }

    pub fn on_comment(&mut self) {
        self.integrity.comments += 1;
    }

    /// One event (its `event:` type and `data`) that arrived at `t_ms`.
    pub fn on_event(&mut self, event_type: &str, data: &str, t_ms: f64) -> Flow {
        if self.failure.is_some() {
            return Flow::Stop;
        }
        if self.done {
            self.integrity.events_after_done += 1;
            return Flow::Continue;
        }
        if event_type == "error" {
            let msg = serde_json::from_str::<serde_json::Value>(data)
                .map(|v| error_message(v.get("error").unwrap_or(&v)))
                .unwrap_or_else(|_| data.to_string());
            let msg = self.redactor.clip(&msg, MESSAGE_CHARS);
            self.failure = Some((Outcome::StreamError, format!("error event: {msg}")));
            return Flow::Stop;
        }
        let trimmed = data.trim();
        if trimmed == "[DONE]" {
            self.done = true;
            return Flow::Continue;
        }
        let chunk: Chunk<'_> = match serde_json::from_str(trimmed) {
            Ok(c) => c,
            Err(e) => {
                self.failure = Some((
                    Outcome::Malformed,
                    format!(
                        "unparseable chunk ({}): {}",
                        self.redactor.redact(&e.to_string()),
                        self.redactor.clip(trimmed, CHUNK_CHARS)
                    ),
                ));
                return Flow::Stop;
            }
        };
        if let Some(err) = &chunk.error {
            let msg = self.redactor.clip(&error_message(err), MESSAGE_CHARS);
            self.failure = Some((Outcome::StreamError, format!("error object: {msg}")));
            return Flow::Stop;
        }
        if chunk.object.as_deref() == Some("error") {
            let msg = chunk.message.as_deref().unwrap_or("(no message)");
            self.failure = Some((
                Outcome::StreamError,
                format!("error object: {}", self.redactor.clip(msg, MESSAGE_CHARS)),
            ));
            return Flow::Stop;
        }
        let cumulative = chunk.usage.and_then(|u| u.completion_tokens);
        if let Some(u) = chunk.usage {
            self.usage = Some(u);
        }
        if let Some(t) = chunk.timings {
            self.timings = Some(ServerTimings {
                prompt_ms: t.prompt_ms,
                predicted_ms: t.predicted_ms,
                prompt_n: t.prompt_n,
                predicted_n: t.predicted_n,
            });
        }
        let mut has_output = false;
        let choices = chunk.choices.as_deref().unwrap_or_default();
        if choices.len() > 1 || choices.iter().any(|c| c.index.unwrap_or(0) != 0) {
            self.integrity.choice_index_changes += 1;
        }
        for choice in choices {
            // The first choice seen is the one measured; another one's content is counted as
            // interleaved (above), never measured.
            let index = choice.index.unwrap_or(0);
            if *self.first_index.get_or_insert(index) != index {
                continue;
            }
            let out =
                choice.delta.as_ref().or(choice.message.as_ref()).is_some_and(Delta::has_output)
                    || choice.text.as_deref().is_some_and(|t| !t.is_empty());
            if out {
                if self.finish_reason.is_some() {
                    self.integrity.content_after_finish += 1;
                }
                has_output = true;
                let delta = choice.delta.as_ref().or(choice.message.as_ref());
                let part = match delta {
                    Some(d) if d.part() == Part::Reasoning => Part::Reasoning,
                    Some(d) => self.think_part(d.content.as_deref().unwrap_or_default()),
                    None => self.think_part(choice.text.as_deref().unwrap_or_default()),
                };
                match part {
                    Part::Reasoning => {
                        self.reasoning_events += 1;
                        self.first_reasoning.get_or_insert(t_ms);
                    }
                    Part::Answer => {
                        self.first_answer.get_or_insert(t_ms);
                    }
                }
                if let Some(buf) = &mut self.text {
                    if let Some(c) = choice.delta.as_ref().and_then(|d| d.content.as_deref()) {
                        buf.push_str(c);
                    }
                    if let Some(c) = choice.text.as_deref() {
                        buf.push_str(c);
                    }
                }
            }
            if let Some(r) = &choice.finish_reason {
                self.finish_reason = Some(self.redactor.clip(r, FINISH_REASON_CHARS));
            }
        }
        if let (true, Some(n)) = (has_output, cumulative) {
            match self.last_cumulative {
                Some(prev) if n == prev => self.integrity.duplicated_events += 1,
                Some(prev) if n < prev => self.integrity.reordered_events += 1,
                _ => {}
            }
            self.last_cumulative = Some(self.last_cumulative.map_or(n, |p| p.max(n)));
        }
        if has_output {
            self.content_events += 1;
            if let Some(prev) = self.last {
                self.itl.push(t_ms - prev);
            }
            if self.first.is_none() {
                self.first = Some(t_ms);
            }
            self.last = Some(t_ms);
        }
        Flow::Continue
    }

    /// Classify the response now that the transport ended.
    pub fn finish(mut self, end: StreamEnd) -> ResponseResult {
        let completed = self.done || self.finish_reason.is_some();
        if self.finish_reason.is_some() && !self.done && self.failure.is_none() {
            self.integrity.missing_done = 1;
        }
        let (class, error) = if let Some((class, msg)) = self.failure {
            (class, Some(msg))
        } else if let StreamEnd::Oversized(m) = end {
            (Outcome::Malformed, Some(m))
        } else if completed {
            if self.content_events == 0 {
                (Outcome::Empty, Some("the response completed without any content".to_string()))
            } else {
                (Outcome::Ok, None)
            }
        } else {
            match end {
                StreamEnd::Timeout(m) => (Outcome::Timeout, Some(m)),
                StreamEnd::Interrupted => {
                    (Outcome::Interrupted, Some("in flight when the run was interrupted".into()))
                }
                StreamEnd::CancelledOnPurpose(why) => (Outcome::Cancelled, Some(why)),
                StreamEnd::ReadError(m) => (
                    Outcome::Truncated,
                    Some(format!("connection failed before finish_reason or [DONE]: {m}")),
                ),
                StreamEnd::Eof { partial_event } => (
                    Outcome::Truncated,
                    Some(if partial_event {
                        "stream ended inside an event, before finish_reason or [DONE]".to_string()
                    } else {
                        "stream ended without finish_reason or [DONE]".to_string()
                    }),
                ),
                StreamEnd::Stopped => (Outcome::Truncated, Some("stream stopped early".into())),
                StreamEnd::Oversized(m) => (Outcome::Malformed, Some(m)),
            }
        };
        let usage_tokens = self.usage.and_then(|u| u.completion_tokens);
        let (output_tokens, token_source) = match usage_tokens {
            Some(n) => (Some(n), Some(TokenSource::Usage)),
            None if self.content_events > 0 => {
                (Some(self.content_events), Some(TokenSource::Chunks))
            }
            None => (None, None),
        };
        let mut result = ResponseResult {
            class,
            error,
            first_token_ms: self.first,
            last_token_ms: self.last,
            itl_ms: self.itl,
            content_events: self.content_events,
            output_tokens,
            prompt_tokens: self.usage.and_then(|u| u.prompt_tokens),
            token_source,
            count_mismatch: usage_tokens.is_some_and(|n| n != self.content_events),
            rejected_usage: None,
            finish_reason: self.finish_reason,
            server_timings: self.timings,
            integrity: self.integrity,
            done_seen: self.done,
            text: self.text,
            unexpected_body: None,
            reasoning_events: self.reasoning_events,
            first_reasoning_ms: self.first_reasoning,
            first_answer_ms: self.first_answer,
        };
        // The request's max_tokens is the caller's to add (`check_usage` again).
        result.check_usage(true, None);
        result
    }
}

/// Read a whole (non-streamed) response body that arrived complete at `t_ms`. Non-streamed
/// responses have no TTFT and no ITL; E2E is the arrival of the body.
pub fn read_body(
    body: &[u8],
    t_ms: f64,
    capture_text: bool,
    redactor: &Redactor,
) -> ResponseResult {
    let mut result = ResponseResult::bare(Outcome::Ok, None);
    let chunk: Chunk<'_> = match serde_json::from_slice(body) {
        Ok(c) => c,
        Err(e) => {
            result.class = Outcome::Malformed;
            result.error = Some(format!(
                "unparseable body ({}): {}",
                redactor.redact(&e.to_string()),
                redactor.clip(&String::from_utf8_lossy(body), CHUNK_CHARS)
            ));
            return result;
        }
    };
    if let Some(err) = &chunk.error {
        result.class = Outcome::StreamError;
        result.error =
            Some(format!("error object: {}", redactor.clip(&error_message(err), MESSAGE_CHARS)));
        return result;
    }
    let choices = chunk.choices.unwrap_or_default();
    let Some(choice) = choices.first() else {
        result.class = Outcome::Malformed;
        result.error = Some("response has no `choices`".into());
        return result;
    };
    let text = choice
        .message
        .as_ref()
        .and_then(|m| m.content.clone())
        .or_else(|| choice.text.clone())
        .unwrap_or_default();
    let has_output = choice.message.as_ref().is_some_and(Delta::has_output) || !text.is_empty();
    result.finish_reason =
        choice.finish_reason.as_ref().map(|r| redactor.clip(r, FINISH_REASON_CHARS));
    result.server_timings = chunk.timings.map(|t| ServerTimings {
        prompt_ms: t.prompt_ms,
        predicted_ms: t.predicted_ms,
        prompt_n: t.prompt_n,
        predicted_n: t.predicted_n,
    });
    if let Some(u) = chunk.usage {
        result.output_tokens = u.completion_tokens;
        result.prompt_tokens = u.prompt_tokens;
        result.token_source = u.completion_tokens.map(|_| TokenSource::Usage);
    }
    if capture_text {
        result.text = Some(text.to_string());
    }
    if !has_output {
        result.class = Outcome::Empty;
        result.error = Some("the response has no content".into());
        return result;
    }
    result.content_events = 1;
    result.last_token_ms = Some(t_ms);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(events: &[(&str, &str, f64)], end: StreamEnd) -> ResponseResult {
        let mut t = StreamTracker::new(true);
        for (ty, data, at) in events {
            if t.on_event(ty, data, *at) == Flow::Stop {
                return t.finish(StreamEnd::Stopped);
            }
        }
        t.finish(end)
    }

    const ROLE: &str = r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#;
    const FINISH: &str = r#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#;
    const USAGE: &str = r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}}"#;
    const EOF: StreamEnd = StreamEnd::Eof { partial_event: false };

    fn tok(s: &str) -> String {
        format!(r#"{{"choices":[{{"index":0,"delta":{{"content":"{s}"}},"finish_reason":null}}]}}"#)
    }

    #[test]
    fn role_chunk_is_not_a_token_and_usage_chunk_counts() {
        let (a, b, c) = (tok("a"), tok("b"), tok("c"));
        let r = run(
            &[
                ("message", ROLE, 1.0),
                ("message", &a, 50.0),
                ("message", &b, 60.0),
                ("message", &c, 72.0),
                ("message", FINISH, 72.5),
                ("message", USAGE, 73.0),
                ("message", "[DONE]", 73.0),
            ],
            EOF,
        );
        assert_eq!(r.class, Outcome::Ok);
        assert_eq!(r.first_token_ms, Some(50.0));
        assert_eq!(r.last_token_ms, Some(72.0));
        assert_eq!(r.itl_ms, vec![10.0, 12.0]);
        assert_eq!(r.output_tokens, Some(3));
        assert_eq!(r.token_source, Some(TokenSource::Usage));
        assert!(!r.count_mismatch);
        assert_eq!(r.text.as_deref(), Some("abc"));
        assert_eq!(r.prompt_tokens, Some(5));
    }

    #[test]
    fn several_tokens_in_one_chunk_without_usage_counts_chunks_and_with_usage_mismatches() {
        let two = tok("ab");
        let r = run(&[("message", &two, 5.0), ("message", FINISH, 6.0)], EOF);
        assert_eq!(r.class, Outcome::Ok);
        assert_eq!(r.output_tokens, Some(1));
        assert_eq!(r.token_source, Some(TokenSource::Chunks));
        let r =
            run(&[("message", &two, 5.0), ("message", FINISH, 6.0), ("message", USAGE, 6.0)], EOF);
        assert_eq!(r.output_tokens, Some(3));
        assert!(r.count_mismatch);
    }

    #[test]
    fn reasoning_and_tool_calls_count_as_output() {
        let reasoning = r#"{"choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]}"#;
        let tools = r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f"}}]}}]}"#;
        let r = run(
            &[("message", reasoning, 3.0), ("message", tools, 4.0), ("message", "[DONE]", 5.0)],
            EOF,
        );
        assert_eq!(r.class, Outcome::Ok);
        assert_eq!(r.first_token_ms, Some(3.0));
        assert_eq!(r.content_events, 2);
    }

    #[test]
    fn completions_text_counts() {
        let t = r#"{"choices":[{"index":0,"text":" hi","finish_reason":null}]}"#;
        let r = run(&[("message", t, 3.0), ("message", "[DONE]", 5.0)], EOF);
        assert_eq!(r.class, Outcome::Ok);
        assert_eq!(r.text.as_deref(), Some(" hi"));
    }

    #[test]
    fn classes() {
        let a = tok("a");
        // finish_reason without [DONE] is complete.
        assert_eq!(run(&[("message", &a, 1.0), ("message", FINISH, 2.0)], EOF).class, Outcome::Ok);
        // [DONE] without finish_reason is complete.
        assert_eq!(
            run(&[("message", &a, 1.0), ("message", "[DONE]", 2.0)], EOF).class,
            Outcome::Ok
        );
        // Neither: truncated, whatever the transport said.
        assert_eq!(run(&[("message", &a, 1.0)], EOF).class, Outcome::Truncated);
        assert_eq!(
            run(&[("message", &a, 1.0)], StreamEnd::ReadError("reset".into())).class,
            Outcome::Truncated
        );
        assert_eq!(
            run(&[("message", &a, 1.0)], StreamEnd::Timeout("stall".into())).class,
            Outcome::Timeout
        );
        assert_eq!(
            run(&[("message", &a, 1.0)], StreamEnd::Interrupted).class,
            Outcome::Interrupted
        );
        // No content.
        assert_eq!(
            run(&[("message", ROLE, 1.0), ("message", FINISH, 2.0)], EOF).class,
            Outcome::Empty
        );
        assert_eq!(run(&[("message", "[DONE]", 2.0)], EOF).class, Outcome::Empty);
        // Error event, error object, vLLM's error object, malformed chunk.
        let r = run(&[("message", &a, 1.0), ("error", r#"{"error":{"message":"oom"}}"#, 2.0)], EOF);
        assert_eq!(r.class, Outcome::StreamError);
        assert!(r.error.unwrap().contains("oom"));
        let r = run(&[("message", r#"{"error":{"message":"bad","code":500}}"#, 2.0)], EOF);
        assert_eq!(r.class, Outcome::StreamError);
        let r = run(&[("message", r#"{"object":"error","message":"nope"}"#, 2.0)], EOF);
        assert_eq!(r.class, Outcome::StreamError);
        let r = run(&[("message", &a, 1.0), ("message", "{\"choices\":[", 2.0)], EOF);
        assert_eq!(r.class, Outcome::Malformed);
        assert_eq!(run(&[("message", "17", 2.0)], EOF).class, Outcome::Malformed);
    }

    #[test]
    fn integrity_counters() {
        let a = tok("a");
        let other = r#"{"choices":[{"index":1,"delta":{"content":"x"}}]}"#;
        let r = run(
            &[
                ("message", &a, 1.0),
                ("message", FINISH, 2.0),
                ("message", &a, 3.0),
                ("message", other, 3.5),
                ("message", "[DONE]", 4.0),
                ("message", &a, 5.0),
            ],
            EOF,
        );
        assert_eq!(r.class, Outcome::Ok);
        assert_eq!(r.integrity.content_after_finish, 1, "choice 1's content is not measured");
        assert_eq!(r.integrity.choice_index_changes, 1);
        assert_eq!(r.integrity.events_after_done, 1);
        assert_eq!(r.text.as_deref(), Some("aa"));
        assert_eq!(r.integrity.by_kind().interleaved_choices, 1);
    }

    #[test]
    fn interleaved_choices_are_violations_and_only_the_first_choice_is_measured() {
        let both = r#"{"choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"X"}}]}"#;
        let one = r#"{"choices":[{"index":1,"delta":{"content":"Y"}}]}"#;
        let b = tok("b");
        let r = run(
            &[
                ("message", both, 1.0),
                ("message", one, 2.0),
                ("message", &b, 3.0),
                ("message", FINISH, 4.0),
                ("message", "[DONE]", 4.0),
            ],
            EOF,
        );
        assert_eq!(r.class, Outcome::Ok, "the content arrived: counted, not failed");
        assert_eq!(r.integrity.choice_index_changes, 2);
        assert_eq!((r.content_events, r.text.as_deref()), (2, Some("ab")));
        assert_eq!(r.itl_ms, vec![2.0], "choice 1's events are no gaps of choice 0");
        // A server numbering its one choice 1: every chunk is a violation, the choice measured.
        let r =
            run(&[("message", one, 1.0), ("message", one, 2.0), ("message", "[DONE]", 3.0)], EOF);
        assert_eq!(
            (r.class, r.content_events, r.integrity.choice_index_changes),
            (Outcome::Ok, 2, 2)
        );
    }

    fn usage(n: u64) -> String {
        format!(r#"{{"choices":[],"usage":{{"prompt_tokens":5,"completion_tokens":{n}}}}}"#)
    }

    #[test]
    fn usage_that_contradicts_the_stream_is_set_aside_for_the_streams_own_count() {
        let (a, b, c) = (tok("a"), tok("b"), tok("c"));
        let stream = |n: u64| {
            let u = usage(n);
            run(
                &[
                    ("message", &a, 10.0),
                    ("message", &b, 20.0),
                    ("message", &c, 30.0),
                    ("message", FINISH, 30.0),
                    ("message", &u, 30.0),
                    ("message", "[DONE]", 30.0),
                ],
                EOF,
            )
        };
        // Plausible: several tokens per event is what usage is for.
        let r = stream(3 * MAX_TOKENS_PER_EVENT);
        assert_eq!((r.output_tokens, r.token_source), (Some(768), Some(TokenSource::Usage)));
        assert!(r.count_mismatch && r.rejected_usage.is_none());
        for reported in [3 * MAX_TOKENS_PER_EVENT + 1, 1_000_000_000, u64::MAX] {
            let mut r = stream(reported);
            assert_eq!(r.class, Outcome::Ok);
            assert_eq!(r.rejected_usage, Some(reported));
            assert_eq!((r.output_tokens, r.token_source), (Some(3), Some(TokenSource::Chunks)));
            assert!(!r.count_mismatch);
            r.check_usage(true, Some(4));
            assert_eq!(r.rejected_usage, Some(reported), "checking twice changes nothing");
        }
        // Past the request's max_tokens, within the per-event bound.
        let mut r = stream(5);
        r.check_usage(true, Some(4));
        assert_eq!((r.rejected_usage, r.output_tokens), (Some(5), Some(3)));
        let mut r = stream(4);
        r.check_usage(true, Some(4));
        assert_eq!((r.rejected_usage, r.output_tokens), (None, Some(4)));
        // A whole body: only max_tokens bounds it, and a rejected count leaves it blank.
        let body = |n: u64| {
            format!(
                r#"{{"choices":[{{"index":0,"message":{{"content":"hi"}},"finish_reason":"stop"}}],"usage":{{"completion_tokens":{n}}}}}"#
            )
        };
        let mut r = read_body(body(1_000_000_000).as_bytes(), 1.0, false, &Redactor::default());
        r.check_usage(false, None);
        assert_eq!((r.rejected_usage, r.output_tokens), (None, Some(1_000_000_000)));
        r.check_usage(false, Some(16));
        assert_eq!(
            (r.rejected_usage, r.output_tokens, r.token_source),
            (Some(1_000_000_000), None, None)
        );
        assert!(usage_contradicts(1, Some(0), None), "no content event carries no token");
        assert!(!usage_contradicts(u64::MAX, None, None), "nothing to contradict");
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig { cases: 512, ..Default::default() })]

            /// Any event data (chunks with numbers of any size, any text): no panic; a failure
            /// says what was wrong, within what is kept; a usage count is never past what the
            /// stream could carry.
            #[test]
            fn any_events_end_in_one_class_with_a_bounded_reason(
                events in proptest::collection::vec(
                    prop_oneof![
                        "\\PC{0,40}",
                        (0u64..4, any::<u64>()).prop_map(|(i, n)| content(i, "x", Some(n))),
                        any::<u64>().prop_map(usage),
                        Just(FINISH.to_string()),
                        Just("[DONE]".to_string()),
                    ],
                    0..12,
                ),
            ) {
                let all: Vec<(&str, &str, f64)> =
                    events.iter().enumerate().map(|(i, e)| ("message", e.as_str(), i as f64)).collect();
                let r = run(&all, EOF);
                if let Some(e) = &r.error {
                    prop_assert!(e.chars().count() <= 2 * CHUNK_CHARS + 160, "{e}");
                }
                if r.class == Outcome::Malformed {
                    prop_assert!(r.error.as_deref().unwrap_or_default().starts_with("unparseable chunk ("));
                }
                if let (Some(n), Some(TokenSource::Usage)) = (r.output_tokens, r.token_source) {
                    prop_assert!(n <= r.content_events.saturating_mul(MAX_TOKENS_PER_EVENT));
                }
            }
        }
    }

    #[test]
    fn bodies_that_are_no_event_stream_are_recognised() {
        let gzip = [0x1f, 0x8b, 0x08, 0x00];
        assert_eq!(recognise_body(None, None, &gzip), Some(UnexpectedBody::Gzip));
        assert_eq!(recognise_body(Some("GZIP"), None, b"data: x"), Some(UnexpectedBody::Gzip));
        assert_eq!(
            recognise_body(None, None, b"\r\n  <!DOCTYPE HTML PUBLIC"),
            Some(UnexpectedBody::Html)
        );
        assert_eq!(recognise_body(None, None, b"<html><body>502"), Some(UnexpectedBody::Html));
        assert_eq!(
            recognise_body(None, Some("text/html; charset=utf-8"), b"Bad Gateway"),
            Some(UnexpectedBody::Html)
        );
        assert_eq!(recognise_body(None, Some("text/event-stream"), b"data: {"), None);
        assert_eq!(recognise_body(None, None, b""), None);
        assert!(UnexpectedBody::Html.hint().contains("HTML page"));
        assert!(UnexpectedBody::Gzip.hint().contains("gzip-compressed"));
    }

    #[test]
    fn bodies() {
        let body = br#"{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":4,"completion_tokens":2}}"#;
        let r = read_body(body, 80.0, true, &Redactor::default());
        assert_eq!(r.class, Outcome::Ok);
        assert_eq!(r.last_token_ms, Some(80.0));
        assert_eq!(r.first_token_ms, None);
        assert_eq!(r.output_tokens, Some(2));
        assert_eq!(
            read_body(b"<html>", 1.0, false, &Redactor::default()).class,
            Outcome::Malformed
        );
        assert_eq!(
            read_body(br#"{"choices":[]}"#, 1.0, false, &Redactor::default()).class,
            Outcome::Malformed
        );
        assert_eq!(
            read_body(br#"{"error":{"message":"x"}}"#, 1.0, false, &Redactor::default()).class,
            Outcome::StreamError
        );
        let empty = br#"{"choices":[{"index":0,"message":{"content":""},"finish_reason":"stop"}]}"#;
        assert_eq!(read_body(empty, 1.0, false, &Redactor::default()).class, Outcome::Empty);
    }

    #[test]
    fn reasoning_is_told_from_the_answer_by_field_and_by_think_tags() {
        let end = StreamEnd::Eof { partial_event: false };
        let done = [("message", "[DONE]", 9.0)];
        let r_field = |at: f64| {
            let d = serde_json::json!({"choices":[{"index":0,"delta":{"reasoning_content":"hm"}}]});
            ("message", d.to_string(), at)
        };
        let fin = r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#;
        // reasoning_content twice, then content: the answer starts at the third event.
        let (a, b) = (r_field(1.0), r_field(2.0));
        let c = content(0, "Hi", None);
        let events = [
            (a.0, a.1.as_str(), a.2),
            (b.0, b.1.as_str(), b.2),
            ("message", c.as_str(), 3.0),
            ("message", fin, 4.0),
            done[0],
        ];
        let r = run(&events, end.clone());
        assert_eq!(r.class, Outcome::Ok);
        assert_eq!((r.reasoning_events, r.content_events), (2, 3));
        assert_eq!(
            (r.first_reasoning_ms, r.first_answer_ms, r.first_token_ms),
            (Some(1.0), Some(3.0), Some(1.0))
        );
        // Inline <think> sections: the closing event with more text is the answer's first.
        for (texts, reasoning, answer_at) in [
            (vec!["<think>", "hmm", "</think>", "Hi"], 3, Some(4.0)),
            (vec!["<think>hmm", "</think>Hi"], 1, Some(2.0)),
            (vec!["Hi", "<think>not a section"], 0, Some(1.0)),
        ] {
            let chunks: Vec<String> = texts.iter().map(|t| content(0, t, None)).collect();
            let mut events: Vec<(&str, &str, f64)> = chunks
                .iter()
                .enumerate()
                .map(|(i, c)| ("message", c.as_str(), i as f64 + 1.0))
                .collect();
            events.push(("message", fin, 8.0));
            events.push(done[0]);
            let r = run(&events, end.clone());
            assert_eq!(r.reasoning_events, reasoning, "{texts:?}");
            assert_eq!(r.first_answer_ms, answer_at, "{texts:?}");
        }
    }

    fn content(i: u64, text: &str, cumulative: Option<u64>) -> String {
        let mut v = serde_json::json!({"choices":[{"index":i,"delta":{"content":text}}]});
        if let Some(n) = cumulative {
            v["usage"] = serde_json::json!({"prompt_tokens": 3, "completion_tokens": n});
        }
        v.to_string()
    }

    #[test]
    fn a_clean_stream_has_no_integrity_violations() {
        let evs = [content(0, "a", Some(1)), content(0, "b", Some(2)), FINISH.to_string()];
        let mut all: Vec<(&str, &str, f64)> = evs.iter().map(|e| ("", e.as_str(), 1.0)).collect();
        all.push(("", "[DONE]", 2.0));
        let r = run(&all, StreamEnd::Eof { partial_event: false });
        assert_eq!(r.class, Outcome::Ok);
        assert_eq!(r.integrity.violations(), 0, "{:?}", r.integrity);
    }

    #[test]
    fn server_text_is_redacted_before_it_is_cut() {
        const KEY: &str = "sk-LEAKCHECK-0123456789";
        let r = Redactor::new([KEY]);
        let escaped = KEY.replace('-', "\\\\u002d");
        for spelling in [KEY.to_string(), escaped] {
            for pad in [0, 100, 110, 119, 120, 121, 280, 290, 299, 300, 301] {
                let msg = format!("{}{spelling}{}", "x".repeat(pad), "y".repeat(400));
                let event = serde_json::json!({"error": {"message": msg}}).to_string();
                let chunk = format!("{{{}{spelling}{}", "x".repeat(pad), "y".repeat(400));
                let obj = serde_json::json!({"object": "error", "message": msg}).to_string();
                let mut results = Vec::new();
                for (ty, data) in [("error", &event), ("error", &msg), ("message", &event)]
                    .into_iter()
                    .chain([("message", &chunk), ("message", &obj)])
                {
                    let mut t = StreamTracker::new(false).with_redactor(r.clone());
                    assert_eq!(t.on_event(ty, data, 1.0), Flow::Stop);
                    results.push(t.finish(StreamEnd::Stopped));
                }
                results.push(read_body(chunk.as_bytes(), 1.0, false, &r));
                results.push(read_body(event.as_bytes(), 1.0, false, &r));
                for res in results {
                    let e = res.error.unwrap();
                    assert!(r.is_clean(&e) && !e.contains("LEAK"), "{pad}: {e}");
                }
            }
        }
    }

    #[test]
    fn crafted_bad_streams_are_counted() {
        let eof = || StreamEnd::Eof { partial_event: false };
        // Duplicated and reordered events (cumulative usage on every chunk).
        let evs = [
            content(0, "a", Some(1)),
            content(0, "b", Some(2)),
            content(0, "b", Some(2)),
            content(0, "d", Some(4)),
            content(0, "c", Some(3)),
            FINISH.to_string(),
            "[DONE]".to_string(),
        ];
        let all: Vec<(&str, &str, f64)> = evs.iter().map(|e| ("", e.as_str(), 1.0)).collect();
        let r = run(&all, eof());
        assert_eq!((r.integrity.duplicated_events, r.integrity.reordered_events), (1, 1));
        // Choice index change, content after finish_reason, events after [DONE], no [DONE].
        let evs = [
            content(0, "a", None),
            content(1, "b", None),
            FINISH.to_string(),
            content(0, "late", None),
        ];
        let all: Vec<(&str, &str, f64)> = evs.iter().map(|e| ("", e.as_str(), 1.0)).collect();
        let r = run(&all, eof());
        assert_eq!(r.integrity.choice_index_changes, 1);
        assert_eq!(r.integrity.content_after_finish, 1);
        assert_eq!(r.integrity.missing_done, 1);
        assert_eq!(r.class, Outcome::Ok, "irregularities are counted, not failures");
        let evs = [
            content(0, "a", None),
            FINISH.to_string(),
            "[DONE]".to_string(),
            content(0, "x", None),
        ];
        let all: Vec<(&str, &str, f64)> = evs.iter().map(|e| ("", e.as_str(), 1.0)).collect();
        let r = run(&all, eof());
        assert_eq!((r.integrity.events_after_done, r.integrity.missing_done), (1, 0));
        assert_eq!(r.integrity.violations(), 1);
        // A truncated stream is a failure, not a missing [DONE].
        let a = content(0, "a", None);
        let r = run(&[("", a.as_str(), 1.0)], eof());
        assert_eq!((r.class, r.integrity.missing_done), (Outcome::Truncated, 0));
    }
}
