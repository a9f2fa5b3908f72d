//! One measured request's execution (`Client::execute`): the exchange with every event
//! timestamped when its bytes arrive, the body or the stream read within the request's
//! timeouts, a cancel on purpose, and the runner's phases.

use super::*;

/// Outcome of one request at the transport level, plus the parsed response.
#[derive(Clone, Debug)]
pub struct Exchange {
    pub sent: Option<Instant>,
    pub status: Option<u16>,
    pub queue_ms: Option<f64>,
    pub result: ResponseResult,
    pub end: Instant,
}

/// Where one request sits in its run: what the record of its exchange needs besides the
/// exchange.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RequestSlot {
    pub id: u64,
    pub warmup: bool,
    /// The workload item it sent.
    pub item: u64,
    /// When it was meant to be sent (latencies count from here).
    pub intended: Instant,
    /// Prompt tokens counted with the target's tokenizer before the run, when known (used when
    /// the server reports no usage).
    pub counted_input_tokens: Option<u32>,
}

impl Exchange {
    /// The per-request record of this exchange, times in ms on the run clock that started at
    /// `clock`, and the generated text when it was kept.
    pub(crate) fn into_record(
        self,
        slot: RequestSlot,
        clock: Instant,
    ) -> (RequestRecord, Option<String>) {
        let ms = |t: Instant| round_us((t - clock).as_secs_f64() * 1000.0);
        let r = self.result;
        let record = RequestRecord {
            id: slot.id,
            warmup: slot.warmup,
            class: r.class,
            error: r.error,
            status: self.status,
            item: slot.item,
            session: None,
            turn: None,
            intended_ms: ms(slot.intended),
            sent_ms: self.sent.map(ms),
            first_token_ms: r.first_token_ms.map(round_us),
            last_token_ms: r.last_token_ms.map(round_us),
            end_ms: ms(self.end),
            input_tokens: r.prompt_tokens.or(slot.counted_input_tokens.map(u64::from)),
            output_tokens: r.output_tokens,
            token_source: r.token_source,
            content_events: r.content_events,
            count_mismatch: r.count_mismatch,
            rejected_usage: r.rejected_usage,
            stream_violations: r.integrity.by_kind(),
            unexpected_body: r.unexpected_body,
            itl_ms: r.itl_ms.into_iter().map(round_us).collect(),
            queue_ms: self.queue_ms,
            server_timings: r.server_timings,
            finish_reason: r.finish_reason,
            reasoning_events: r.reasoning_events,
            first_reasoning_ms: r.first_reasoning_ms.map(round_us),
            first_answer_ms: r.first_answer_ms.filter(|_| r.reasoning_events > 0).map(round_us),
            max_tokens: None,
        };
        (record, r.text)
    }
}

/// One request to execute.
#[derive(Clone, Debug)]
pub struct Call<'a> {
    pub url: &'a str,
    pub body: bytes::Bytes,
    pub stream: bool,
    /// Sent as `x-request-id` (servers may log it; the simulator records it).
    pub request_id: &'a str,
    /// The run clock's origin: event times are ms since this instant.
    pub clock: Instant,
    /// Keep the generated text.
    pub capture_text: bool,
    /// Close the request on purpose (`[profile.*.cancel]`): `None` for most requests.
    pub cancel: Option<Cancel>,
}

/// When the client closes one request on purpose, as a client that gives up does.
#[derive(Clone, Debug, Default)]
pub struct Cancel {
    /// Once this many content events arrived.
    pub after_tokens: Option<u64>,
    /// At this instant (the intended send time plus the planned ms).
    pub at: Option<Instant>,
    /// The planned ms, for the record's message.
    pub after_ms: Option<f64>,
    /// A header sent with the request carrying the deadline, and its value (seconds).
    pub header: Option<(String, String)>,
}

impl Cancel {
    /// The plan of a request intended at `intended`.
    pub fn of(plan: &infergate_model::config::CancelPlan, intended: Instant) -> Cancel {
        let at = plan.after_ms.map(|ms| intended + Duration::from_secs_f64(ms / 1000.0));
        let header = match (&plan.header, plan.after_ms) {
            (Some(h), Some(ms)) => Some((h.clone(), format!("{:.3}", ms / 1000.0))),
            _ => None,
        };
        Cancel { after_tokens: plan.after_tokens, at, after_ms: plan.after_ms, header }
    }

    pub(super) fn why_time(&self) -> String {
        format!(
            "cancelled on purpose {} ms after its intended send (cancel)",
            infergate_model::config::limits::number(self.after_ms.unwrap_or_default())
        )
    }

    pub(super) fn why_tokens(n: u64) -> String {
        format!("cancelled on purpose after {n} output tokens (cancel.after_tokens)")
    }
}

/// Sleep until `at`, or forever without it.
pub(super) async fn until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Signals from the runner to requests in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Running,
    /// No new requests; in-flight ones may finish.
    Draining,
    /// Abort everything in flight now (`interrupted`).
    Abort,
}

/// The output-length limit a request body sent (`max_tokens` or `max_completion_tokens`, the
/// lower when both), read back from the bytes that went out.
pub(super) fn sent_max_tokens(body: &[u8]) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct Limits {
        #[serde(default)]
        max_tokens: Option<u64>,
        #[serde(default)]
        max_completion_tokens: Option<u64>,
    }
    let l: Limits = serde_json::from_slice(body).ok()?;
    match (l.max_tokens, l.max_completion_tokens) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// What is kept of an error body (bytes): enough for any server's message, and the reading stops
/// there (the connection is dropped), so a huge error body costs no memory.
pub(crate) const ERROR_BODY_BYTES: usize = 64 * 1024;

impl Client {
    /// Execute one request. Latencies are computed later from `intended`; here every event is
    /// timestamped on arrival (before JSON parsing) on the run clock.
    pub async fn execute(&self, call: Call<'_>, mut phase: watch::Receiver<Phase>) -> Exchange {
        let Call { url, body, stream, request_id, clock, capture_text, cancel } = call;
        let cancel = cancel.unwrap_or_default();
        let sent_body = body.clone();
        let deadline = Instant::now() + self.opts.request_timeout;
        let sent = Instant::now();
        let mut req =
            self.http.post(url).headers(self.headers.clone()).header("x-request-id", request_id);
        if let Some((name, value)) = &cancel.header {
            req = req.header(name.as_str(), value.as_str());
        }
        let req = req.body(body);
        let abort = async move {
            let _ = phase.wait_for(|p| *p == Phase::Abort).await;
        };
        tokio::pin!(abort);
        let failed = |class: Outcome, msg: String, sent: Option<Instant>| Exchange {
            sent,
            status: None,
            queue_ms: None,
            result: ResponseResult::failed(class, msg),
            end: Instant::now(),
        };
        // A streamed answer sends its headers before the first token: the stall timeout bounds
        // their wait too. A non-streamed answer arrives whole, headers after the whole
        // generation, so only the request timeout bounds it.
        let (until, wait) =
            if stream { self.next_wait(deadline) } else { (deadline, Wait::Request) };
        let resp = tokio::select! {
            r = tokio::time::timeout_at(until, req.send()) => r,
            _ = &mut abort => return failed(Outcome::Interrupted, "in flight when the run was interrupted".into(), Some(sent)),
            _ = self::until(cancel.at) => return failed(Outcome::Cancelled, cancel.why_time(), Some(sent)),
        };
        let mut resp = match resp {
            Err(_) => {
                return failed(
                    Outcome::Timeout,
                    self.expired(wait, "response headers"),
                    Some(sent),
                );
            }
            Ok(Err(e)) => {
                let class = if e.is_timeout() { Outcome::Timeout } else { Outcome::ConnectError };
                return failed(
                    class,
                    format!("{}{}", self.err_text(&e), self.connect_hint()),
                    Some(sent),
                );
            }
            Ok(Ok(r)) => r,
        };
        let status = resp.status().as_u16();
        let queue_ms = resp
            .headers()
            .get(infergate_model::wire::QUEUE_TIME_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<f64>().ok());
        if !resp.status().is_success() {
            // A redirect still here is one to another host the client does not follow.
            let location = resp
                .headers()
                .get(reqwest::header::LOCATION)
                .filter(|_| resp.status().is_redirection())
                .map(|l| shown_location(&String::from_utf8_lossy(l.as_bytes())));
            let text = read_capped(resp, ERROR_BODY_BYTES, Duration::from_secs(5)).await;
            let message = match location {
                Some(to) => format!(
                    "HTTP {status}: a redirect to {to} (another host) not followed; \
                     client.cross_host_redirects = true follows it"
                ),
                None => {
                    format!("HTTP {status}: {}", self.redactor.clip(text.trim(), MESSAGE_CHARS))
                }
            };
            let mut ex = failed(Outcome::Http(status), self.redactor.redact(&message), Some(sent));
            ex.status = Some(status);
            return ex;
        }
        let (mut result, end) = if stream {
            let result = self
                .read_stream(&mut resp, deadline, &mut abort, clock, capture_text, &cancel)
                .await;
            (result, Instant::now())
        } else {
            self.read_body(&mut resp, deadline, &mut abort, clock, capture_text, &cancel).await
        };
        // After the response: the body is parsed again outside every measured time.
        result.check_usage(stream, sent_max_tokens(&sent_body));
        Exchange { sent: Some(sent), status: Some(status), queue_ms, result, end }
    }

    /// A whole (non-streamed) body, parsed when it arrived complete; with the time it ended.
    pub(super) async fn read_body(
        &self,
        resp: &mut reqwest::Response,
        deadline: Instant,
        abort: &mut std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
        clock: Instant,
        capture_text: bool,
        cancel: &Cancel,
    ) -> (ResponseResult, Instant) {
        let mut buf = Vec::new();
        let end = loop {
            match self.next_chunk(resp, deadline, abort, cancel).await {
                Ok(b) if buf.len() + b.len() > self.opts.max_event_bytes => {
                    break StreamEnd::Oversized(format!(
                        "the body went past {} bytes (client.max_event_kib)",
                        self.opts.max_event_bytes
                    ));
                }
                Ok(b) => buf.extend_from_slice(&b),
                Err(end) => break end,
            }
        };
        let now = Instant::now();
        let mut result = match end {
            StreamEnd::Eof { .. } => openai::read_body(
                &buf,
                (now - clock).as_secs_f64() * 1000.0,
                capture_text,
                &self.redactor,
            ),
            StreamEnd::Interrupted => ResponseResult::failed(
                Outcome::Interrupted,
                "in flight when the run was interrupted".into(),
            ),
            StreamEnd::CancelledOnPurpose(why) => ResponseResult::failed(Outcome::Cancelled, why),
            StreamEnd::Timeout(m) => ResponseResult::failed(Outcome::Timeout, m),
            StreamEnd::ReadError(m) => ResponseResult::failed(
                Outcome::Truncated,
                format!("connection failed mid-body: {m}"),
            ),
            StreamEnd::Oversized(m) => ResponseResult::failed(Outcome::Malformed, m),
            // Only the stream tracker asks to stop; a body is read to its end.
            StreamEnd::Stopped => {
                ResponseResult::failed(Outcome::Truncated, "body reading stopped early".into())
            }
        };
        self.redact_result(&mut result);
        (result, now)
    }

    /// A streamed body: every event stamped with the arrival time of the bytes that complete
    /// it (ms on the run clock that started at `clock`).
    pub(super) async fn read_stream(
        &self,
        resp: &mut reqwest::Response,
        deadline: Instant,
        abort: &mut std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
        clock: Instant,
        capture_text: bool,
        cancel: &Cancel,
    ) -> ResponseResult {
        let header =
            |name| resp.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
        let (encoding, content_type) =
            (header(reqwest::header::CONTENT_ENCODING), header(CONTENT_TYPE));
        // The body's first bytes, to say what it was when it was no event stream.
        let mut head = Vec::with_capacity(openai::SNIFF_BYTES);
        let mut parser = SseParser::with_limit(self.opts.max_event_bytes);
        let mut tracker = StreamTracker::new(capture_text).with_redactor(self.redactor.clone());
        let mut items = Vec::with_capacity(8);
        let end = 'read: loop {
            match self.next_chunk(resp, deadline, abort, cancel).await {
                Err(end) => break end,
                Ok(bytes) => {
                    // The arrival time of these bytes stamps every event they complete.
                    let t = (Instant::now() - clock).as_secs_f64() * 1000.0;
                    let room = openai::SNIFF_BYTES - head.len();
                    head.extend_from_slice(&bytes[..room.min(bytes.len())]);
                    items.clear();
                    parser.feed(&bytes, &mut items);
                    for item in items.drain(..) {
                        let flow = match item {
                            SseItem::Event(ev) => tracker.on_event(&ev.event, &ev.data, t),
                            SseItem::Comment(_) => {
                                tracker.on_comment();
                                Flow::Continue
                            }
                        };
                        if flow == Flow::Stop {
                            break 'read StreamEnd::Stopped;
                        }
                    }
                    // A planned cancel closes the stream once its tokens arrived (the events
                    // of these bytes are all counted: a client reads what it was handed).
                    if let Some(n) = cancel.after_tokens
                        && tracker.content_events() >= n
                        && !tracker.completed()
                    {
                        break 'read StreamEnd::CancelledOnPurpose(Cancel::why_tokens(n));
                    }
                    if parser.overflowed() {
                        break 'read StreamEnd::Oversized(format!(
                            "an SSE line or event's data went past {} bytes (client.max_event_kib)",
                            self.opts.max_event_bytes
                        ));
                    }
                }
            }
        };
        let end = match end {
            StreamEnd::Eof { .. } => {
                StreamEnd::Eof { partial_event: parser.finish().partial_event }
            }
            other => other,
        };
        let mut result = tracker.finish(end);
        if result.class == Outcome::Truncated && result.content_events == 0 {
            let kind = openai::recognise_body(encoding.as_deref(), content_type.as_deref(), &head);
            if let Some(kind) = kind {
                result.unexpected_body = Some(kind);
                let why = result.error.take().unwrap_or_default();
                result.error = Some(format!("{why}: {}", kind.hint()));
            }
        }
        self.redact_result(&mut result);
        result
    }

    /// A response's error and kept output text without secrets (acceptance stores outputs).
    pub(super) fn redact_result(&self, result: &mut ResponseResult) {
        if self.redactor.is_empty() {
            return;
        }
        for text in [&mut result.error, &mut result.text].into_iter().flatten() {
            *text = self.redactor.redact(text);
        }
    }

    /// The next bytes of a response body, or how the body ended: at its end (`Eof`), by the
    /// request or stall timeout, a read error, or the run's abort.
    pub(super) async fn next_chunk(
        &self,
        resp: &mut reqwest::Response,
        deadline: Instant,
        abort: &mut std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
        cancel: &Cancel,
    ) -> Result<bytes::Bytes, StreamEnd> {
        let next = tokio::select! {
            c = tokio::time::timeout_at(deadline.min(Instant::now() + self.opts.stall_timeout), resp.chunk()) => c,
            _ = abort.as_mut() => return Err(StreamEnd::Interrupted),
            _ = until(cancel.at) => return Err(StreamEnd::CancelledOnPurpose(cancel.why_time())),
        };
        match next {
            Err(_) => Err(StreamEnd::Timeout(self.timeout_msg(deadline))),
            Ok(Err(e)) => Err(StreamEnd::ReadError(self.err_text(&e))),
            Ok(Ok(None)) => Err(StreamEnd::Eof { partial_event: false }),
            Ok(Ok(Some(b))) => Ok(b),
        }
    }
}
