//! The words of a threshold: how a measured value is compared with its limit ([`Comparator`],
//! the measuring library's, shared with its statistics) and what a failure does ([`Action`]).

use std::fmt;

use serde::{Deserialize, Serialize};

pub use infergate_model::stats::{COMPARATOR_CHOICES, Comparator, UnknownComparator};

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
    fn actions_parse_case_insensitively() {
        assert_eq!(Action::parse(" Block "), Ok(Action::Block));
        assert_eq!(Action::parse("warn"), Ok(Action::Warn));
        let e = Action::parse(" stop ").unwrap_err();
        assert_eq!(e.to_string(), "unknown action `stop`; valid: block, warn");
    }
}
