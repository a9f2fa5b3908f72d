//! The pre-run checks of a target (`Client::preflight`): the model list, the one-token probe,
//! `/tokenize`, and the requests outside the measurement they make (`call_json`, `post_json`,
//! `count_tokens`, `preconnect`); their errors say what to change (`PreflightError`).

use super::*;

/// A request outside the measurement (a preflight check, a token count) that got no whole
/// answer: the server could not be reached, or a client timeout expired. The detail has any
/// secret removed and, for a timeout, names the setting to raise.
#[derive(Debug, thiserror::Error)]
#[error("{}", if *timed_out {
    format!("{check} ({url}) timed out: {detail}")
} else {
    format!("{check}: cannot reach {url}: {detail}")
})]
pub struct Unreachable {
    /// What the request was for (`preflight: the model list`, ...).
    pub check: String,
    pub url: String,
    pub detail: String,
    /// A client timeout expired (else the connection failed).
    pub timed_out: bool,
}

/// Why a target cannot be measured, found before any measured request: each message says what
/// to change.
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    #[error(transparent)]
    Unreachable(#[from] Unreachable),
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The server refused the request for its key (or its lack of one).
    #[error("{}", auth_hint(*status, target, api_key_env.as_deref()))]
    Auth { status: u16, target: String, api_key_env: Option<String> },
    /// The model is not listed by `/v1/models`, and the one-token probe with it failed too.
    #[error("model `{model}` is not served at {api_base}: /v1/models does not list it (it offers: {}) \
        and the one-token probe with it answered {probe}",
        if offered.is_empty() { "(nothing)".to_string() } else { offered.join(", ") })]
    ModelNotServed { model: String, api_base: String, offered: Vec<String>, probe: String },
    /// A preflight request was answered with a redirect to another host, which is not followed.
    #[error(
        "{check}: {url} answered {status} redirecting to {location}, another host than the target's; \
         set base_url to where the server is, or client.cross_host_redirects = true to follow \
         (the summary notes where requests went)"
    )]
    Redirected { check: String, url: String, status: u16, location: String },
    #[error(
        "no model configured for target `{target}` and {models_url} lists none; set model = \"...\""
    )]
    NoModel { target: String, models_url: String },
    /// The endpoint or the model is unknown to the server (404 on the probe).
    #[error("{hint}; the server said: {text}")]
    NotFound { hint: String, text: String },
    #[error("a one-token probe to {url} answered {status}: {text}")]
    Probe { url: String, status: u16, text: String },
}

impl PreflightError {
    /// The same error with secrets and URL user information removed from every text it holds.
    pub fn redacted(self, r: &Redactor) -> PreflightError {
        let r = |s: String| r.redact(&s);
        match self {
            PreflightError::Unreachable(Unreachable { check, url, detail, timed_out }) => {
                PreflightError::Unreachable(Unreachable {
                    check,
                    url: r(url),
                    detail: r(detail),
                    timed_out,
                })
            }
            PreflightError::ModelNotServed { model, api_base, offered, probe } => {
                PreflightError::ModelNotServed {
                    model: r(model),
                    api_base: r(api_base),
                    offered: offered.into_iter().map(r).collect(),
                    probe: r(probe),
                }
            }
            PreflightError::Redirected { check, url, status, location } => {
                PreflightError::Redirected {
                    check,
                    url: r(url),
                    status,
                    location: r(shown_location(&location)),
                }
            }
            PreflightError::NoModel { target, models_url } => {
                PreflightError::NoModel { target, models_url: r(models_url) }
            }
            PreflightError::NotFound { hint, text } => {
                PreflightError::NotFound { hint: r(hint), text: r(text) }
            }
            PreflightError::Probe { url, status, text } => {
                PreflightError::Probe { url: r(url), status, text: r(text) }
            }
            other @ (PreflightError::Client(_) | PreflightError::Auth { .. }) => other,
        }
    }
}

pub(super) fn auth_hint(status: u16, target: &str, api_key_env: Option<&str>) -> String {
    match api_key_env {
        None => format!(
            "the server answered {status}: it requires an API key. Name the variable holding it with \
             api_key_env in [targets.{target}] and export it"
        ),
        Some(var) => format!(
            "the server answered {status} to the key from ${var}: check its value (it is sent as \
             `Authorization: Bearer <key>`; a wrong key, a key for another server or a stray newline \
             are the usual causes)"
        ),
    }
}

/// Why the target's tokenizer gave no count.
#[derive(Debug, thiserror::Error)]
pub enum TokenizeError {
    #[error(transparent)]
    Unreachable(#[from] Unreachable),
    #[error("/tokenize answered {status}: {text}")]
    Status { status: u16, text: String },
    #[error("/tokenize answered something that is not JSON")]
    NotJson,
    #[error("/tokenize answer has neither `count` nor `tokens`")]
    NoCount,
}

/// A preflight answer: status, the body as JSON when it is JSON, its first characters with any
/// secret removed, and whether the simulator announced itself.
pub(super) struct Reply {
    pub(super) status: u16,
    pub(super) json: Option<Value>,
    pub(super) text: String,
    pub(super) simulator: bool,
    /// The `Location` of a redirect that was not followed (as [`shown_location`] shows it).
    pub(super) location: Option<String>,
    /// Where the answer came from, when a followed redirect led to another origin (shown).
    pub(super) redirected_to: Option<String>,
    /// What the answer said about keeping its connection open.
    pub(super) keep_alive: KeepAliveWords,
}

impl Reply {
    /// A redirect to another host the client did not follow, as the preflight error it is.
    pub(super) fn refused_redirect(&self, check: &str, url: &str) -> Result<(), PreflightError> {
        match &self.location {
            Some(location) if (300..400).contains(&self.status) => {
                Err(PreflightError::Redirected {
                    check: check.to_string(),
                    url: url.to_string(),
                    status: self.status,
                    location: location.clone(),
                })
            }
            _ => Ok(()),
        }
    }
}

/// The names of the pre-run checks, as errors and notes show them.
pub(super) const CHECK_MODELS: &str = "preflight, the model list";
pub(super) const CHECK_PROBE: &str = "preflight, the one-token probe";
pub(super) const CHECK_REUSE: &str = "preflight, the connection-reuse check";
pub(super) const CHECK_TOKENIZE: &str = "preflight, /tokenize";
pub(super) const CHECK_COUNT: &str = "counting prompt tokens with /tokenize";

/// The models a `/v1/models` answer offers (None: unknown), or the status that refused the key.
pub(super) fn offered_models(r: &Reply) -> Result<Option<Vec<String>>, u16> {
    match r.status {
        200 => {
            Ok(r.json.as_ref().and_then(|b| b.get("data")).and_then(|d| d.as_array()).map(|d| {
                d.iter()
                    .filter_map(|m| m.get("id").and_then(|i| i.as_str()).map(str::to_string))
                    .collect()
            }))
        }
        401 | 403 => Err(r.status),
        _ => Ok(None),
    }
}

/// The model to request: the configured one (listed or not: the probe decides whether an
/// unlisted one is served), else the first one offered.
pub(super) fn choose_model(
    configured: Option<&str>,
    offered: Option<&[String]>,
    target_name: &str,
    api_base: &str,
) -> Result<String, PreflightError> {
    match (configured, offered) {
        (Some(m), _) => Ok(m.to_string()),
        (None, Some(list)) if !list.is_empty() => Ok(list[0].clone()),
        (None, _) => Err(PreflightError::NoModel {
            target: target_name.to_string(),
            models_url: format!("{api_base}/models"),
        }),
    }
}

/// The refusal of a model `/v1/models` does not list and the probe did not serve either.
pub(super) fn not_listed(
    model: &str,
    api_base: &str,
    offered: &[String],
    probe: String,
) -> PreflightError {
    PreflightError::ModelNotServed {
        model: model.to_string(),
        api_base: api_base.to_string(),
        offered: offered.to_vec(),
        probe,
    }
}

/// The one-token request preflight sends.
pub(super) struct Probe<'a> {
    endpoint: Endpoint,
    model: &'a str,
}

impl Probe<'_> {
    pub(super) fn body(&self, field: &str) -> Value {
        let mut b = match self.endpoint {
            Endpoint::Chat => {
                json!({"model": self.model, "messages": [{"role": "user", "content": "hello"}]})
            }
            Endpoint::Completions => json!({"model": self.model, "prompt": "hello"}),
        };
        b[field] = json!(1);
        b["stream"] = json!(false);
        b
    }
}

/// Why the probe refused the target: an auth answer (described by the caller, who knows the
/// key's variable) or another preflight error.
pub(super) enum ProbeRefused {
    Auth(u16),
    Other(PreflightError),
}

impl From<PreflightError> for ProbeRefused {
    fn from(e: PreflightError) -> Self {
        ProbeRefused::Other(e)
    }
}

impl From<Unreachable> for ProbeRefused {
    fn from(e: Unreachable) -> Self {
        ProbeRefused::Other(e.into())
    }
}

/// How many connections the client sets up at once (TCP and TLS handshakes; requests beyond
/// wait for a slot): what bounds [`Client::preconnect`].
pub(crate) const PRECONNECT_AT_ONCE: usize = 64;

/// How many rounds of requests [`Client::preconnect`] sends at most.
pub(super) const PRECONNECT_ROUNDS: usize = 3;

/// How long [`Client::preconnect`] keeps opening connections.
pub(crate) const PRECONNECT_TIME: Duration = Duration::from_secs(30);

/// What is kept of a preflight answer (`/v1/models`, `/tokenize`, the probe request).
pub(crate) const PREFLIGHT_BODY_BYTES: usize = 4 * 1024 * 1024;

impl Client {
    /// A request outside the measurement (`check` names it): its answer, the body read up to
    /// [`PREFLIGHT_BODY_BYTES`] with its first characters kept (any secret removed), under the
    /// client's request and stall timeouts. `body: None` sends a GET.
    pub(super) async fn call_json(
        &self,
        check: &str,
        url: &str,
        body: Option<&Value>,
    ) -> Result<Reply, Unreachable> {
        let deadline = Instant::now() + self.opts.request_timeout;
        let req = match body {
            None => self.http.get(url),
            Some(b) => self.http.post(url).body(b.to_string()),
        };
        let failed = |detail: String, timed_out: bool| Unreachable {
            check: check.to_string(),
            url: self.redactor.redact(url),
            detail,
            timed_out,
        };
        let (until, wait) = self.next_wait(deadline);
        let resp =
            match tokio::time::timeout_at(until, req.headers(self.headers.clone()).send()).await {
                Err(_) => return Err(failed(self.expired(wait, "response headers"), true)),
                Ok(Err(e)) => {
                    let detail = format!("{}{}", self.err_text(&e), self.connect_hint());
                    return Err(failed(detail, e.is_timeout()));
                }
                Ok(Ok(r)) => r,
            };
        let status = resp.status().as_u16();
        let keep_alive = keep_alive_words(resp.version(), resp.headers());
        let simulator = resp.headers().contains_key(wire::SIMULATOR_HEADER);
        let location = resp
            .headers()
            .get(reqwest::header::LOCATION)
            .filter(|_| resp.status().is_redirection())
            .map(|l| self.redactor.redact(&shown_location(&String::from_utf8_lossy(l.as_bytes()))));
        let redirected_to = reqwest::Url::parse(url)
            .ok()
            .filter(|asked| !same_origin(asked, resp.url()))
            .map(|_| self.redactor.redact(&shown_location(resp.url().as_str())));
        let text = self.read_within(resp, PREFLIGHT_BODY_BYTES, deadline).await.map_err(
            |(wait, got)| {
                failed(
                    format!(
                        "the answer stopped after {got} bytes: {}",
                        self.expired(wait, "bytes")
                    ),
                    true,
                )
            },
        )?;
        Ok(Reply {
            status,
            json: serde_json::from_str(&text).ok(),
            text: self.redactor.clip(&text, MESSAGE_CHARS),
            simulator,
            location,
            redirected_to,
            keep_alive,
        })
    }

    /// The first `cap` bytes of a body (lossy UTF-8; the rest is not read), under the stall
    /// timeout and the request's `deadline`; a read error ends the body. On a timeout: which
    /// one expired, and how many bytes had come.
    pub(super) async fn read_within(
        &self,
        mut resp: reqwest::Response,
        cap: usize,
        deadline: Instant,
    ) -> Result<String, (Wait, usize)> {
        let mut buf = Vec::new();
        while buf.len() < cap {
            let (until, wait) = self.next_wait(deadline);
            match tokio::time::timeout_at(until, resp.chunk()).await {
                Err(_) => return Err((wait, buf.len())),
                Ok(Ok(Some(b))) => buf.extend_from_slice(&b[..b.len().min(cap - buf.len())]),
                Ok(_) => break,
            }
        }
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    /// POST a JSON body under the client's timeouts: status, the body as JSON when it is JSON,
    /// and its text.
    pub(crate) async fn post_json(
        &self,
        url: &str,
        body: &Value,
    ) -> Result<(u16, Option<Value>, String), Unreachable> {
        let r = self.call_json("request", url, Some(body)).await?;
        Ok((r.status, r.json, r.text))
    }

    /// Check the target before measuring: models, auth, endpoint path, output-length field,
    /// tokenizer. Every failure is explained in terms of what to change. Every request is bound
    /// by the client's request and stall timeouts.
    pub async fn preflight(
        &self,
        target_name: &str,
        target: &Target,
        model_override: Option<&str>,
        endpoint: Endpoint,
        stream: bool,
        api_key_env: Option<&str>,
    ) -> Result<Resolved, PreflightError> {
        let (root, api_base) = split_base_url(&target.base_url);
        let mut notes = Vec::new();
        let auth = |status: u16| PreflightError::Auth {
            status,
            target: target_name.to_string(),
            api_key_env: api_key_env.map(str::to_string),
        };
        let models_url = format!("{api_base}/models");
        let models = self.call_json(CHECK_MODELS, &models_url, None).await?;
        models.refused_redirect(CHECK_MODELS, &models_url)?;
        let offered = match offered_models(&models) {
            Ok(offered) => offered,
            Err(status) => return Err(auth(status)),
        };
        if offered.is_none() {
            notes.push(match models.status {
                404 => format!("{models_url} answered 404; the model list is unknown"),
                s => format!("{models_url} answered {s}: {}", models.text),
            });
        }
        let configured = model_override.or(target.model.as_deref());
        let model = choose_model(configured, offered.as_deref(), target_name, &api_base)?;
        // A gateway may serve a model it does not list: the probe decides.
        let unlisted = offered.as_ref().filter(|list| !list.contains(&model));
        let url = format!("{api_base}/{}", endpoint.path());
        let probe = Probe { endpoint, model: &model };
        let probed = self.probe(&url, &probe, target, &mut notes).await;
        let (field, status, redirected_to) = match (probed, unlisted) {
            (Ok((_, status, _)), Some(list)) if !(200..300).contains(&status) => {
                return Err(not_listed(&model, &api_base, list, format!("{status}")));
            }
            (Err(ProbeRefused::Other(e)), Some(list)) => {
                return Err(not_listed(&model, &api_base, list, e.to_string()));
            }
            (Err(ProbeRefused::Auth(status)), _) => return Err(auth(status)),
            (Err(ProbeRefused::Other(e)), None) => return Err(e),
            (Ok(answer), _) => answer,
        };
        if let Some(list) = unlisted {
            notes.push(format!(
                "model `{model}` is not listed by {models_url} (it offers: {}); the one-token probe \
                 with it was answered, so it is measured",
                if list.is_empty() { "(nothing)".to_string() } else { list.join(", ") }
            ));
        }
        if let Some(to) = redirected_to.or(models.redirected_to.clone()) {
            notes.push(format!(
                "{url} redirects to another host (client.cross_host_redirects = true): \
                 requests were answered by {to}"
            ));
        }
        let mut reuse_connections = true;
        if (200..300).contains(&status) {
            let mut b = probe.body(field);
            b["stream"] = json!(stream);
            let mut words = None;
            reuse_connections = self.keeps_connections_alive(&url, &b, &mut words).await;
            if !reuse_connections {
                notes.push(closes_connections_note(words));
            }
        }
        let client = if reuse_connections { self.clone() } else { self.without_reuse()? };
        let tokenize = client.offers_tokenize(&root, &model).await?;
        if !tokenize {
            notes.push("the target offers no /tokenize: prompt lengths are approximate (one token per word)".into());
        }
        Ok(Resolved {
            root,
            api_base,
            url,
            endpoint,
            stream,
            model,
            max_tokens_field: field,
            models: models.json.filter(|_| models.status == 200),
            tokenize,
            simulated: models.simulator,
            reuse_connections,
            notes,
        })
    }

    /// The one-token probe outside the measurement: path, auth, output-length field. Returns the
    /// field to send, the probe's status (an overloaded or failing server is measured anyway)
    /// and where a followed redirect to another host led.
    pub(super) async fn probe(
        &self,
        url: &str,
        probe: &Probe<'_>,
        target: &Target,
        notes: &mut Vec<String>,
    ) -> Result<(&'static str, u16, Option<String>), ProbeRefused> {
        let mut field = match target.max_tokens_field {
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
            _ => "max_tokens",
        };
        let mut reply = self.call_json(CHECK_PROBE, url, Some(&probe.body(field))).await?;
        if reply.status == 400
            && target.max_tokens_field == MaxTokensField::Auto
            && reply.text.contains("max_tokens")
        {
            let second = self
                .call_json(CHECK_PROBE, url, Some(&probe.body("max_completion_tokens")))
                .await?;
            if (200..300).contains(&second.status) {
                field = "max_completion_tokens";
                notes.push(
                    "the server rejects max_tokens; max_completion_tokens is sent instead".into(),
                );
            }
            reply = second;
        }
        reply.refused_redirect(CHECK_PROBE, url)?;
        let Reply { status, text, redirected_to, .. } = reply;
        match status {
            200..=299 => {}
            // An overloaded or failing server is what a load test is for: measure it anyway.
            429 | 500..=599 => notes.push(format!(
                "the one-token probe to {url} answered {status} ({text}); measuring anyway"
            )),
            401 | 403 => return Err(ProbeRefused::Auth(status)),
            404 => {
                let hint = if text.contains("model") {
                    format!("the server does not know model `{}`", probe.model)
                } else {
                    format!(
                        "{url} does not exist: check base_url (`{}` was used; it is accepted with or without /v1) \
                         and whether the server offers the {} endpoint",
                        target.base_url,
                        probe.endpoint.name()
                    )
                };
                return Err(PreflightError::NotFound { hint, text }.into());
            }
            s => {
                return Err(PreflightError::Probe { url: url.to_string(), status: s, text }.into());
            }
        }
        Ok((field, status, redirected_to))
    }

    /// Whether the target counts tokens at `/tokenize` (vLLM and llama.cpp shapes).
    pub(super) async fn offers_tokenize(
        &self,
        root: &str,
        model: &str,
    ) -> Result<bool, Unreachable> {
        let r = self
            .call_json(
                CHECK_TOKENIZE,
                &format!("{root}/tokenize"),
                Some(&json!({"model": model, "prompt": "hello world", "content": "hello world"})),
            )
            .await?;
        Ok(r.status == 200
            && r.json
                .as_ref()
                .is_some_and(|b| b.get("count").is_some() || b.get("tokens").is_some()))
    }

    /// Open `n` connections to the server so that connection setup happens before the measured
    /// window rather than inside the first requests' TTFT; returns how many were opened.
    ///
    /// `n` concurrent `GET /v1/models` (each needs a connection of its own while the others are
    /// in flight); the connector sets up at most [`PRECONNECT_AT_ONCE`] at a time, and the
    /// opening stops after [`PRECONNECT_TIME`].
    pub(crate) async fn preconnect(&self, api_base: &str, n: usize) -> usize {
        let url = format!("{api_base}/models");
        // Counted since the client was made: the preflight's connections may carry some.
        let until = Instant::now() + PRECONNECT_TIME;
        let available = || self.connections_opened().min(n as u64);
        // A request answered on a connection free again while others were still being set up
        // may leave its own unopened: a further round opens what is missing.
        for _ in 0..PRECONNECT_ROUNDS {
            let gets = (0..n).map(|_| {
                let req = self.http.get(&url).headers(self.headers.clone());
                async move {
                    if let Ok(resp) = req.send().await {
                        // Read to the end (up to what is kept) so the connection is reusable.
                        read_capped(resp, PREFLIGHT_BODY_BYTES, Duration::from_secs(10)).await;
                    }
                }
            });
            let _ = tokio::time::timeout_at(until, futures_util::future::join_all(gets)).await;
            if available() >= n as u64 || Instant::now() >= until {
                break;
            }
        }
        available() as usize
    }

    /// Count tokens with the target's `/tokenize` (vLLM and llama.cpp shapes).
    pub(crate) async fn count_tokens(
        &self,
        root: &str,
        model: &str,
        text: &str,
    ) -> Result<u32, TokenizeError> {
        let r = self
            .call_json(
                CHECK_COUNT,
                &format!("{root}/tokenize"),
                Some(&json!({"model": model, "prompt": text, "content": text})),
            )
            .await?;
        let (status, body, msg) = (r.status, r.json, r.text);
        if status != 200 {
            return Err(TokenizeError::Status { status, text: msg });
        }
        let body = body.ok_or(TokenizeError::NotJson)?;
        body.get("count")
            .and_then(|c| c.as_u64())
            .or_else(|| body.get("tokens").and_then(|t| t.as_array()).map(|t| t.len() as u64))
            .map(|n| n as u32)
            .ok_or(TokenizeError::NoCount)
    }
}
