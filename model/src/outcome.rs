//! Outcome classes: every request ends in exactly one.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// How a request ended. Exactly one per request; only [`Outcome::Ok`] enters latency metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    /// Completed: content was received and the stream ended with a finish reason or `[DONE]`.
    Ok,
    /// The server answered with a non-2xx HTTP status.
    Http(u16),
    /// No HTTP response: connection refused, DNS, TLS, reset before the response head.
    ConnectError,
    /// The request exceeded the request timeout or the stream stalled longer than the stall timeout.
    Timeout,
    /// The server reported an error inside the response: an `event: error` or an error object.
    StreamError,
    /// The stream ended (or the connection dropped) before a finish reason or `[DONE]`.
    Truncated,
    /// A chunk that is not valid JSON or not a completion object.
    Malformed,
    /// The response completed without any content, reasoning or tool-call token.
    Empty,
    /// Cancelled by the bench on purpose (`[profile.*.cancel]`): the stream was closed after the
    /// planned tokens or time, the way a client that gives up closes it.
    Cancelled,
    /// Still in flight when the run was interrupted and the grace period ran out.
    Interrupted,
}

impl Outcome {
    pub fn is_ok(self) -> bool {
        self == Outcome::Ok
    }

    /// All class names except the open-ended `http_<status>` family.
    pub const FIXED_CLASSES: [&'static str; 9] = [
        "ok",
        "connect_error",
        "timeout",
        "stream_error",
        "truncated",
        "malformed",
        "empty",
        "cancelled",
        "interrupted",
    ];
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Ok => f.write_str("ok"),
            Outcome::Http(s) => write!(f, "http_{s}"),
            Outcome::ConnectError => f.write_str("connect_error"),
            Outcome::Timeout => f.write_str("timeout"),
            Outcome::StreamError => f.write_str("stream_error"),
            Outcome::Truncated => f.write_str("truncated"),
            Outcome::Malformed => f.write_str("malformed"),
            Outcome::Empty => f.write_str("empty"),
            Outcome::Cancelled => f.write_str("cancelled"),
            Outcome::Interrupted => f.write_str("interrupted"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error(
    "unknown outcome class `{0}`: expected one of ok, http_<status>, connect_error, timeout, stream_error, truncated, malformed, empty, cancelled, interrupted"
)]
pub struct UnknownOutcome(String);

impl FromStr for Outcome {
    type Err = UnknownOutcome;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "ok" => Outcome::Ok,
            "connect_error" => Outcome::ConnectError,
            "timeout" => Outcome::Timeout,
            "stream_error" => Outcome::StreamError,
            "truncated" => Outcome::Truncated,
            "malformed" => Outcome::Malformed,
            "empty" => Outcome::Empty,
            "cancelled" => Outcome::Cancelled,
            "interrupted" => Outcome::Interrupted,
            other => match other.strip_prefix("http_").and_then(|c| c.parse::<u16>().ok()) {
                Some(code) if (100..=999).contains(&code) => Outcome::Http(code),
                _ => return Err(UnknownOutcome(other.to_string())),
            },
        })
    }
}

impl Serialize for Outcome {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Outcome {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The class names, written out: what requests.jsonl, summary.json and the docs say.
    const NAMES: [(Outcome, &str); 12] = [
        (Outcome::Ok, "ok"),
        (Outcome::Http(429), "http_429"),
        (Outcome::Http(503), "http_503"),
        (Outcome::ConnectError, "connect_error"),
        (Outcome::Timeout, "timeout"),
        (Outcome::StreamError, "stream_error"),
        (Outcome::Truncated, "truncated"),
        (Outcome::Malformed, "malformed"),
        (Outcome::Empty, "empty"),
        (Outcome::Cancelled, "cancelled"),
        (Outcome::Interrupted, "interrupted"),
        (Outcome::Http(500), "http_500"),
    ];

    #[test]
    fn classes_have_their_documented_names() {
        for (o, name) in NAMES {
            assert_eq!(o.to_string(), name);
            assert_eq!(name.parse::<Outcome>().unwrap(), o, "{name}");
            assert_eq!(serde_json::to_string(&o).unwrap(), format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<Outcome>(&format!("\"{name}\"")).unwrap(), o);
        }
        assert!("http_".parse::<Outcome>().is_err());
        assert!("http_42".parse::<Outcome>().is_err());
        assert!("http_1000".parse::<Outcome>().is_err());
        assert!("fine".parse::<Outcome>().is_err());
    }

    /// Every class is named in docs/metrics.md's list, and the list names no other class.
    #[test]
    fn the_docs_list_every_class() {
        let doc = include_str!("../../docs/metrics.md");
        let section = doc.split("## Outcome classes").nth(1).expect("the section exists");
        let section = section.split("\n## ").next().unwrap();
        let listed: Vec<&str> = section
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|w| {
                w.chars().all(|c| c.is_ascii_lowercase() || c == '_' || c == '<' || c == '>')
            })
            .filter(|w| !w.contains("stall") && !w.contains("max_event"))
            .collect();
        let mut expected: Vec<String> =
            NAMES
                .iter()
                .map(|(o, n)| {
                    if matches!(o, Outcome::Http(_)) {
                        "http_<status>".into()
                    } else {
                        n.to_string()
                    }
                })
                .collect();
        expected.sort();
        expected.dedup();
        let mut got: Vec<String> = listed
            .iter()
            .filter(|w| !["finish_reason", "event: error"].contains(w))
            .map(|w| w.to_string())
            .collect();
        got.sort();
        got.dedup();
        assert_eq!(got, expected);
    }
}
