//! The words of a threshold: how a measured value is compared with its limit ([`Comparator`])
//! and what a failure does ([`Action`]).

use std::fmt;

use serde::{Deserialize, Serialize};

/// How a measured value is compared with a threshold's limit: `measured <comparator> limit`
/// must hold for the check to pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Comparator {
    #[serde(rename = "<=")]
    Le,
    #[serde(rename = "<")]
    Lt,
    #[serde(rename = ">=")]
    Ge,
    #[serde(rename = ">")]
    Gt,
    /// Exact equality; meant for counts (`requests.failed == 0`).
    #[serde(rename = "==")]
    Eq,
}

pub const COMPARATOR_CHOICES: &str = "<=, <, >=, >, ==";

/// A comparator that is not one of [`COMPARATOR_CHOICES`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown comparator `{0}`; valid: {COMPARATOR_CHOICES}")]
pub struct UnknownComparator(pub String);

impl Comparator {
    pub fn parse(s: &str) -> Result<Comparator, UnknownComparator> {
        match s.trim() {
            "<=" => Ok(Comparator::Le),
            "<" => Ok(Comparator::Lt),
            ">=" => Ok(Comparator::Ge),
            ">" => Ok(Comparator::Gt),
            "==" => Ok(Comparator::Eq),
            other => Err(UnknownComparator(other.to_string())),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Comparator::Le => "<=",
            Comparator::Lt => "<",
            Comparator::Ge => ">=",
            Comparator::Gt => ">",
            Comparator::Eq => "==",
        }
    }

    /// Whether `measured <self> limit` holds.
    pub fn holds(self, measured: f64, limit: f64) -> bool {
        match self {
            Comparator::Le => measured <= limit,
            Comparator::Lt => measured < limit,
            Comparator::Ge => measured >= limit,
            Comparator::Gt => measured > limit,
            Comparator::Eq => measured == limit,
        }
    }

    /// Where a value breaks the limit, in words: `above`, `below`, `different from`.
    pub fn breaking_side(self) -> &'static str {
        match self {
            Comparator::Le | Comparator::Lt => "above",
            Comparator::Ge | Comparator::Gt => "below",
            Comparator::Eq => "different from",
        }
    }
}

impl fmt::Display for Comparator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a failed threshold does: `block` fails the gate (exit 1), `warn` only reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Block,
    Warn,
}

/// An action that is not `block` or `warn`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown action `{0}`; valid: block, warn")]
pub struct UnknownAction(pub String);

impl Action {
    pub fn parse(s: &str) -> Result<Action, UnknownAction> {
        match s.trim().to_ascii_lowercase().as_str() {
            "block" => Ok(Action::Block),
            "warn" => Ok(Action::Warn),
            _ => Err(UnknownAction(s.trim().to_string())),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Action::Block => "block",
            Action::Warn => "warn",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparators_hold_as_documented() {
        for (c, below, at, above) in [
            (Comparator::Le, true, true, false),
            (Comparator::Lt, true, false, false),
            (Comparator::Ge, false, true, true),
            (Comparator::Gt, false, false, true),
            (Comparator::Eq, false, true, false),
        ] {
            assert_eq!(c.holds(0.999, 1.0), below, "{c} just under");
            assert_eq!(c.holds(1.0, 1.0), at, "{c} at");
            assert_eq!(c.holds(1.001, 1.0), above, "{c} just over");
            assert_eq!(Comparator::parse(c.as_str()), Ok(c));
        }
        let e = Comparator::parse("=<").unwrap_err();
        assert_eq!(e, UnknownComparator("=<".into()));
        assert!(e.to_string().contains("<=, <, >=, >, =="), "{e}");
        assert_eq!(Comparator::Le.breaking_side(), "above");
        assert_eq!(Comparator::Gt.breaking_side(), "below");
    }

    #[test]
    fn actions_parse_case_insensitively() {
        assert_eq!(Action::parse(" Block "), Ok(Action::Block));
        assert_eq!(Action::parse("warn"), Ok(Action::Warn));
        let e = Action::parse(" stop ").unwrap_err();
        assert_eq!(e.to_string(), "unknown action `stop`; valid: block, warn");
    }
}
