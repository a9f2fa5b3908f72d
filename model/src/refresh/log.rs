//! Production request logs read for a dataset refresh: JSONL, one request a line,
//! `{"timestamp": epoch seconds or RFC 3339, "request": an OpenAI chat or completions body,
//! "latency_ms" and/or "ttft_ms", "status": HTTP code}` (other fields are kept only to find the
//! secrets they hold), or LiteLLM's documented `StandardLoggingPayload` ([`Format`]). Lines are streamed ([`LineReader`]: a line longer than
//! [`MAX_LINE_BYTES`] is skipped whole and reported, never held); a line that is not a usable
//! request is a [`Malformed`] with its line number and what is wrong, never dropped silently.

use std::io::{BufRead, Read};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::workload::{WorkItem, json_error};

/// The longest log line read (longer ones are malformed, their bytes skipped).
pub(crate) const MAX_LINE_BYTES: usize = 16 << 20;

/// Timestamps after this many epoch seconds (year 5138) are refused: milliseconds by mistake.
const MAX_EPOCH_S: f64 = 1e11;

/// One usable request of the log.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// 1-based line number in the log.
    pub line: u64,
    /// Milliseconds since the Unix epoch.
    pub ts_ms: i64,
    /// The request body as logged (a chat or completions body).
    pub request: Map<String, Value>,
    pub latency_ms: Option<f64>,
    pub ttft_ms: Option<f64>,
    /// The HTTP status (0: no response).
    pub status: u16,
    /// Values of secret-named fields of the line outside the request (`headers.authorization`,
    /// `api_key`): removed from the request in every spelling if it echoes them.
    pub secrets: Vec<String>,
}

impl Entry {
    /// Failed: status >= 400, or 0 (no response).
    pub fn failed(&self) -> bool {
        self.status == 0 || self.status >= 400
    }
}

/// A line that is not a usable request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Malformed {
    pub line: u64,
    pub message: String,
}

/// What one line of the log is.
#[derive(Clone, Debug, PartialEq)]
pub enum Line {
    Blank,
    Request(Box<Entry>),
    Malformed(Malformed),
}

/// Whether a field name names a secret: its value is never copied and is removed wherever the
/// request repeats it.
pub(crate) fn is_secret_field(name: &str) -> bool {
    let n = name.to_ascii_lowercase().replace(['-', '_'], "");
    // `max_tokens` and its kin are limits, not secrets.
    !n.starts_with("max")
        && (n == "authorization"
            || n == "password"
            || n.ends_with("apikey")
            || n.ends_with("secret")
            || n.ends_with("token"))
}

/// Why a value is not a timestamp.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TimestampError {
    #[error("`timestamp` is not a finite number")]
    NotFinite,
    #[error(
        "`timestamp` {0} is not epoch seconds within 0..=1e11 (milliseconds? then divide by 1000)"
    )]
    OutOfRange(String),
    /// The text as far as a timestamp goes (the field may hold anything), and why.
    #[error("`timestamp` \"{shown}\" is not RFC 3339 (2026-12-04T10:00:00Z): {why}")]
    NotRfc3339 { shown: String, why: String },
    #[error("`timestamp` must be epoch seconds (a number) or an RFC 3339 string")]
    Type,
}

/// A timestamp: epoch seconds (a number, fractions allowed) or an RFC 3339 string; in
/// milliseconds since the epoch.
pub fn parse_timestamp(v: &Value) -> Result<i64, TimestampError> {
    match v {
        Value::Number(n) => {
            let s = n.as_f64().ok_or(TimestampError::NotFinite)?;
            if !(0.0..=MAX_EPOCH_S).contains(&s) {
                return Err(TimestampError::OutOfRange(n.to_string()));
            }
            Ok((s * 1000.0).round() as i64)
        }
        Value::String(s) => chrono::DateTime::parse_from_rfc3339(s.trim())
            .map(|t| t.timestamp_millis())
            .map_err(|e| {
                let shown: String = s.chars().take(40).collect();
                let cut = if shown.len() < s.len() { "…" } else { "" };
                TimestampError::NotRfc3339 { shown: format!("{shown}{cut}"), why: e.to_string() }
            }),
        _ => Err(TimestampError::Type),
    }
}

/// Why a log line is not a usable request (what [`Malformed`] reports).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    /// The line is not JSON; the parser's message.
    #[error("not valid JSON: {0}")]
    Json(String),
    #[error("expected a JSON object")]
    NotAnObject,
    /// A field the format requires is absent.
    #[error("missing `{0}`")]
    Missing(&'static str),
    #[error(transparent)]
    Timestamp(#[from] TimestampError),
    #[error("`status` must be an HTTP status code (0 for no response, else 100..=599)")]
    Status,
    /// A duration field that is not a non-negative number.
    #[error("`{0}` must be a non-negative number of milliseconds")]
    Duration(String),
    #[error("a successful request needs `latency_ms` or `ttft_ms`")]
    NoDuration,
    #[error("`request` must be a JSON object (the request body)")]
    RequestNotAnObject,
    /// The request is not a dataset item; what the dataset reader says.
    #[error("`request`: {0}")]
    Request(String),
    /// A LiteLLM time field that is not epoch seconds.
    #[error("`{0}` must be epoch seconds within 0..=1e11")]
    EpochSeconds(String),
    #[error("`status` must be \"success\" or \"failure\"")]
    LiteLlmStatus,
    #[error("a successful request needs `endTime` or `completionStartTime`")]
    NoTimes,
    #[error("`model_parameters` must be a JSON object")]
    ModelParameters,
    #[error("`messages` must be a list of messages or a prompt string")]
    Messages,
}

/// A non-negative finite duration in milliseconds, when present.
fn duration(o: &Map<String, Value>, key: &str) -> Result<Option<f64>, LineError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_f64()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .map(Some)
            .ok_or_else(|| LineError::Duration(key.to_string())),
    }
}

/// The values of secret-named fields anywhere in `v` (strings; `Bearer ` prefixes cut).
fn collect_secrets(v: &Value, under_secret: bool, out: &mut Vec<String>) {
    match v {
        Value::String(s) if under_secret => {
            let s = s.trim();
            out.push(s.to_string());
            if let Some(t) = s.strip_prefix("Bearer ").or_else(|| s.strip_prefix("bearer ")) {
                out.push(t.trim().to_string());
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect_secrets(x, under_secret, out)),
        Value::Object(o) => {
            for (k, x) in o {
                collect_secrets(x, under_secret || is_secret_field(k), out);
            }
        }
        _ => {}
    }
}

/// The formats of a log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Told by the first JSON object of the log: `startTime` without `timestamp` is LiteLLM's.
    Auto,
    /// `{"timestamp", "request", "latency_ms" / "ttft_ms", "status"}`.
    Infergate,
    /// LiteLLM's `StandardLoggingPayload`, one a line (what its logging integrations write):
    /// `startTime`, `endTime`, `completionStartTime` (epoch seconds), `status` (`success` or
    /// `failure`, with `error_information.error_code`), `messages`, `model_parameters`.
    LiteLlm,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Auto => "auto",
            Format::Infergate => "infergate",
            Format::LiteLlm => "litellm",
        }
    }
}

/// Parse one log line (already known not to be blank) in `format`; `Auto` is settled by the
/// first JSON object.
pub fn parse_line(format: &mut Format, line_no: u64, text: &str) -> Result<Entry, LineError> {
    let v: Value = serde_json::from_str(text).map_err(|e| LineError::Json(json_error(&e)))?;
    let Value::Object(o) = v else { return Err(LineError::NotAnObject) };
    if *format == Format::Auto {
        let litellm = o.contains_key("startTime") && !o.contains_key("timestamp");
        *format = if litellm { Format::LiteLlm } else { Format::Infergate };
    }
    let mut e = match format {
        Format::LiteLlm => litellm_entry(o)?,
        _ => infergate_entry(o)?,
    };
    e.line = line_no;
    // The request must be a dataset item: messages or a prompt string.
    let as_item = Value::Object(std::mem::take(&mut e.request));
    WorkItem::from_dataset_line(std::path::Path::new(""), 0, &as_item, 1)
        .map_err(|err| LineError::Request(err.message))?;
    let Value::Object(request) = as_item else { unreachable!("built as an object") };
    e.request = request;
    Ok(e)
}

/// Parse one line of infergate's format (already known not to be blank).
pub fn parse_entry(line_no: u64, text: &str) -> Result<Entry, LineError> {
    parse_line(&mut Format::Infergate, line_no, text)
}

fn infergate_entry(mut o: Map<String, Value>) -> Result<Entry, LineError> {
    let ts_ms = parse_timestamp(o.get("timestamp").ok_or(LineError::Missing("timestamp"))?)?;
    let status = match o.get("status").ok_or(LineError::Missing("status"))? {
        Value::Number(n) => {
            n.as_u64().filter(|s| *s == 0 || (100..=599).contains(s)).map(|s| s as u16)
        }
        _ => None,
    }
    .ok_or(LineError::Status)?;
    let latency_ms = duration(&o, "latency_ms")?;
    let ttft_ms = duration(&o, "ttft_ms")?;
    if latency_ms.is_none() && ttft_ms.is_none() && status < 400 && status != 0 {
        return Err(LineError::NoDuration);
    }
    let request = match o.remove("request") {
        Some(Value::Object(r)) => r,
        Some(_) => return Err(LineError::RequestNotAnObject),
        None => return Err(LineError::Missing("request")),
    };
    let mut secrets = Vec::new();
    collect_secrets(&Value::Object(o), false, &mut secrets);
    Ok(Entry { line: 0, ts_ms, request, latency_ms, ttft_ms, status, secrets })
}

/// Epoch seconds of a LiteLLM time field.
fn epoch_s(o: &Map<String, Value>, key: &str) -> Result<Option<f64>, LineError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_f64()
            .filter(|s| (0.0..=MAX_EPOCH_S).contains(s))
            .map(Some)
            .ok_or_else(|| LineError::EpochSeconds(key.to_string())),
    }
}

/// One LiteLLM `StandardLoggingPayload`: the request is `model_parameters` with `messages` (a
/// list: chat; a string: a completions prompt); a failure's status is its
/// `error_information.error_code` when that is an HTTP code, else 0.
fn litellm_entry(mut o: Map<String, Value>) -> Result<Entry, LineError> {
    let start = epoch_s(&o, "startTime")?.ok_or(LineError::Missing("startTime"))?;
    let end = epoch_s(&o, "endTime")?;
    let first = epoch_s(&o, "completionStartTime")?;
    let ms = |t: Option<f64>| t.filter(|t| *t >= start).map(|t| (t - start) * 1000.0);
    let status = match o.get("status").and_then(Value::as_str) {
        Some("success") => 200,
        Some("failure") => o
            .get("error_information")
            .and_then(|i| i.get("error_code"))
            .and_then(|c| {
                c.as_str().map(str::to_string).or_else(|| c.as_u64().map(|n| n.to_string()))
            })
            .and_then(|c| c.parse::<u16>().ok())
            .filter(|c| (100..=599).contains(c))
            .unwrap_or(0),
        _ => return Err(LineError::LiteLlmStatus),
    };
    let (latency_ms, ttft_ms) = (ms(end), ms(first));
    if latency_ms.is_none() && ttft_ms.is_none() && status == 200 {
        return Err(LineError::NoTimes);
    }
    let mut request = match o.remove("model_parameters") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(p)) => p,
        Some(_) => return Err(LineError::ModelParameters),
    };
    match o.remove("messages") {
        Some(m @ Value::Array(_)) => request.insert("messages".into(), m),
        Some(p @ Value::String(_)) => request.insert("prompt".into(), p),
        _ => return Err(LineError::Messages),
    };
    let mut secrets = Vec::new();
    collect_secrets(&Value::Object(o), false, &mut secrets);
    let ts_ms = (start * 1000.0).round() as i64;
    Ok(Entry { line: 0, ts_ms, request, latency_ms, ttft_ms, status, secrets })
}

/// Reads a log line by line with 1-based numbers, hashing every byte it reads (SHA-256); a
/// line longer than [`MAX_LINE_BYTES`] is skipped to its end and reported as malformed.
pub struct LineReader<R> {
    inner: R,
    hasher: Sha256,
    line: u64,
    buf: Vec<u8>,
    format: Format,
}

impl<R: BufRead> LineReader<R> {
    /// A reader of a log in `format` (`Auto`: told by its first JSON object).
    pub fn new(inner: R, format: Format) -> LineReader<R> {
        LineReader { inner, hasher: Sha256::new(), line: 0, buf: Vec::new(), format }
    }

    /// The log's format (still `Auto` before its first JSON object).
    pub fn format(&self) -> Format {
        self.format
    }

    /// Lines read so far.
    pub fn lines(&self) -> u64 {
        self.line
    }

    /// `sha256:` and the hex digest of every byte read (call after the last line).
    pub fn sha256(self) -> String {
        let d = self.hasher.finalize();
        let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
        format!("sha256:{hex}")
    }

    /// The next line, classified; `None` at the end of the file.
    pub(crate) fn next_line(&mut self) -> std::io::Result<Option<Line>> {
        self.buf.clear();
        let mut too_long = false;
        let mut any = false;
        loop {
            let chunk = self.inner.fill_buf()?;
            if chunk.is_empty() {
                break;
            }
            any = true;
            let (take, done) = match chunk.iter().position(|b| *b == b'\n') {
                Some(i) => (i + 1, true),
                None => (chunk.len(), false),
            };
            self.hasher.update(&chunk[..take]);
            if self.buf.len() + take > MAX_LINE_BYTES + 1 {
                too_long = true;
            } else {
                self.buf.extend_from_slice(&chunk[..take]);
            }
            self.inner.consume(take);
            if done {
                break;
            }
        }
        if !any {
            return Ok(None);
        }
        self.line += 1;
        let line = self.line;
        let malformed = |message: String| Ok(Some(Line::Malformed(Malformed { line, message })));
        if too_long {
            return malformed(format!("longer than {} MiB", MAX_LINE_BYTES >> 20));
        }
        let Ok(text) = std::str::from_utf8(&self.buf) else {
            return malformed("not UTF-8".into());
        };
        let text = text.trim_start_matches('\u{feff}').trim();
        if text.is_empty() {
            return Ok(Some(Line::Blank));
        }
        Ok(Some(match parse_line(&mut self.format, line, text) {
            Ok(e) => Line::Request(Box::new(e)),
            Err(e) => Line::Malformed(Malformed { line, message: e.to_string() }),
        }))
    }
}

/// A reader of a file for [`LineReader`].
pub fn open(
    path: &std::path::Path,
    format: Format,
) -> std::io::Result<LineReader<std::io::BufReader<impl Read>>> {
    let file = std::fs::File::open(path)?;
    Ok(LineReader::new(std::io::BufReader::with_capacity(1 << 16, file), format))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn timestamps_as_epoch_seconds_and_rfc3339() {
        assert_eq!(parse_timestamp(&json!(1_764_842_400)), Ok(1_764_842_400_000));
        assert_eq!(parse_timestamp(&json!(1_764_842_400.25)), Ok(1_764_842_400_250));
        assert_eq!(parse_timestamp(&json!("2025-12-04T10:00:00Z")), Ok(1_764_842_400_000));
        assert_eq!(parse_timestamp(&json!("2025-12-04T11:00:00.5+01:00")), Ok(1_764_842_400_500));
        let e = parse_timestamp(&json!(1_764_842_400_000u64)).unwrap_err().to_string();
        assert!(e.contains("milliseconds?"), "{e}");
        let long = "x".repeat(100);
        let e = parse_timestamp(&json!(long)).unwrap_err().to_string();
        assert!(e.starts_with(&format!("`timestamp` \"{}…\" is not", "x".repeat(40))), "{e}");
        let e = parse_timestamp(&json!("2025-12-04 10:00")).unwrap_err().to_string();
        assert!(e.starts_with("`timestamp` \"2025-12-04 10:00\" is not RFC 3339"), "{e}");
        assert!(parse_timestamp(&json!(-1)).is_err());
        assert!(parse_timestamp(&json!(true)).unwrap_err().to_string().contains("epoch seconds"));
    }

    #[test]
    fn lines_are_requests_blank_or_malformed_with_their_numbers() {
        let log = concat!(
            r#"{"timestamp": 1, "request": {"messages": [{"role": "user", "content": "hi"}]}, "latency_ms": 5, "status": 200, "headers": {"Authorization": "Bearer sk-abcdefgh12345678"}}"#,
            "\n\n",
            "{not json\n",
            r#"{"timestamp": 1, "request": {"prompt": 3}, "latency_ms": 5, "status": 200}"#,
            "\n",
            r#"{"timestamp": 1, "request": {"prompt": "x"}, "status": 200}"#,
            "\n",
            r#"{"timestamp": 1, "request": {"prompt": "x"}, "status": 503}"#,
            "\n",
            r#"{"timestamp": 1, "request": {"prompt": "x"}, "ttft_ms": -1, "status": 200}"#,
        );
        let mut r = LineReader::new(std::io::Cursor::new(log.as_bytes()), Format::Auto);
        let mut got = Vec::new();
        while let Some(l) = r.next_line().unwrap() {
            got.push(l);
        }
        assert_eq!(r.lines(), 7);
        assert_eq!(r.format(), Format::Infergate);
        let Line::Request(first) = &got[0] else { panic!("{:?}", got[0]) };
        assert_eq!((first.line, first.status, first.latency_ms), (1, 200, Some(5.0)));
        assert_eq!(first.secrets, vec!["Bearer sk-abcdefgh12345678", "sk-abcdefgh12345678"]);
        assert_eq!(got[1], Line::Blank);
        let bad: Vec<(u64, String)> = got
            .iter()
            .filter_map(|l| match l {
                Line::Malformed(m) => Some((m.line, m.message.clone())),
                _ => None,
            })
            .collect();
        let lines: Vec<u64> = bad.iter().map(|b| b.0).collect();
        assert_eq!(lines, vec![3, 4, 5, 7], "{bad:?}");
        assert!(bad[0].1.starts_with("not valid JSON"), "{bad:?}");
        assert_eq!(bad[1].1, "`request`: `prompt` must be a string");
        assert!(bad[2].1.contains("needs `latency_ms` or `ttft_ms`"), "{bad:?}");
        assert!(bad[3].1.contains("`ttft_ms` must be a non-negative"), "{bad:?}");
        let Line::Request(failed) = &got[5] else { panic!() };
        assert!(failed.failed());
        assert!(r.sha256().starts_with("sha256:"));
    }

    #[test]
    fn litellm_payloads_are_requests_with_their_times_and_status() {
        let ok = r#"{"id": "a", "startTime": 1764842400.0, "endTime": 1764842402.5, "completionStartTime": 1764842400.25, "status": "success", "messages": [{"role": "user", "content": "hi"}], "model_parameters": {"max_tokens": 10, "user": "u1"}, "metadata": {"user_api_key_hash": "h", "api_key": "sk-xyzxyzxyzxyzxyzxyz"}}"#;
        let mut f = Format::Auto;
        let e = parse_line(&mut f, 4, ok).unwrap();
        assert_eq!(f, Format::LiteLlm);
        assert_eq!((e.line, e.ts_ms, e.status), (4, 1_764_842_400_000, 200));
        assert_eq!((e.latency_ms, e.ttft_ms), (Some(2500.0), Some(250.0)));
        assert_eq!(e.request["max_tokens"], json!(10));
        assert_eq!(e.request["messages"][0]["content"], json!("hi"));
        assert_eq!(e.secrets, vec!["sk-xyzxyzxyzxyzxyzxyz"]);
        let failed = r#"{"startTime": 1764842400, "endTime": 1764842401, "status": "failure", "messages": "a prompt", "error_information": {"error_code": "429"}}"#;
        let e = parse_line(&mut f, 5, failed).unwrap();
        assert_eq!((e.status, e.request["prompt"].clone()), (429, json!("a prompt")));
        let no_code = r#"{"startTime": 1764842400, "status": "failure", "messages": "p"}"#;
        assert_eq!(parse_line(&mut f, 6, no_code).unwrap().status, 0);
        let bad =
            r#"{"startTime": 1764842400, "endTime": 1764842401, "status": "ok", "messages": "p"}"#;
        let e = parse_line(&mut f, 7, bad).unwrap_err().to_string();
        assert!(e.contains("\"success\" or \"failure\""), "{e}");
        // A log of infergate's format stays one even when a later line looks like LiteLLM's.
        let mut f = Format::Auto;
        let first =
            r#"{"timestamp": 1, "request": {"prompt": "x"}, "latency_ms": 5, "status": 200}"#;
        parse_line(&mut f, 1, first).unwrap();
        assert_eq!(f, Format::Infergate);
        assert_eq!(parse_line(&mut f, 2, ok).unwrap_err().to_string(), "missing `timestamp`");
    }

    #[test]
    fn statuses_are_http_codes_or_zero() {
        let line = |st: &str| {
            format!(
                r#"{{"timestamp": 1, "request": {{"prompt": "x"}}, "latency_ms": 5, "status": {st}}}"#
            )
        };
        for (st, failed) in
            [("0", true), ("200", false), ("399", false), ("400", true), ("599", true)]
        {
            assert_eq!(parse_entry(1, &line(st)).unwrap().failed(), failed, "{st}");
        }
        for st in ["42", "600", "-1", "\"200\"", "200.5"] {
            let e = parse_entry(1, &line(st)).unwrap_err().to_string();
            assert!(e.starts_with("`status` must be an HTTP status code"), "{st}: {e}");
        }
    }

    #[test]
    fn a_line_too_long_is_malformed_and_skipped_whole() {
        let mut log = vec![b'x'; MAX_LINE_BYTES + 10];
        log.extend_from_slice(b"\n{\"timestamp\": 2, \"request\": {\"prompt\": \"x\"}, \"latency_ms\": 1, \"status\": 200}\n");
        let mut r = LineReader::new(std::io::Cursor::new(&log), Format::Auto);
        let first = r.next_line().unwrap().unwrap();
        assert_eq!(
            first,
            Line::Malformed(Malformed { line: 1, message: "longer than 16 MiB".into() })
        );
        let Some(Line::Request(e)) = r.next_line().unwrap() else { panic!() };
        assert_eq!((e.line, e.ts_ms), (2, 2000));
        assert_eq!(r.next_line().unwrap(), None);
    }

    #[test]
    fn secret_fields_are_named_by_their_keys() {
        for k in ["authorization", "Authorization", "api_key", "x-api-key", "openai_api_key"] {
            assert!(is_secret_field(k), "{k}");
        }
        for k in ["max_tokens", "max_completion_tokens", "messages", "user", "content"] {
            assert!(!is_secret_field(k), "{k}");
        }
        assert!(is_secret_field("access_token") && is_secret_field("client_secret"));
    }
}
