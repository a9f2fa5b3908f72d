//! What a trial set was measured with, typed ([`TrialRequest`], `trials.json`'s `request`): the
//! profile after every override, where it was resolved from (the bench config file, the
//! overrides in order, the target `--base-url` named) and so everything a later trial of the
//! set needs to be measured with exactly the same settings, trace replay included. A target's
//! API key appears only as the name of its environment variable.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::config::{Override, Profile, Target};

/// The request a trial set's trials were measured with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrialRequest {
    /// The bench config file named on the command line (`--config`), relative to the repository
    /// root; `None`: `configs/bench.toml`, else the built-in defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<PathBuf>,
    /// The command line's overrides in the order they applied (the load, trace replay and
    /// workload flags as the keys they set, then `--set`, then the trial settings).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<Override>,
    /// The target `--base-url` named (recorded under the name `cli`), with `--model` and
    /// `--api-key-env` (the variable's name, never its value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cli_target: Option<Target>,
    /// The profile after every override: what each trial ran (its summary's `config`, but for
    /// the trial's own noise seed and the set's warmup trials).
    pub profile: Profile,
}

impl TrialRequest {
    /// Whether a URL in the request holds a user or a password (`http://user:pass@host`): such a
    /// request is not written to any file, so its set can be gated but not added to.
    pub fn holds_credentials(&self) -> bool {
        let text = serde_json::to_string(self).expect("a request serialises");
        crate::redact::strip_userinfo(&text) != text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigKey;

    #[test]
    fn a_request_reads_back_with_its_overrides_typed() {
        let overrides = [
            Override::new(ConfigKey::literal("load.mode"), "trace", "--trace t.jsonl"),
            Override::new(ConfigKey::literal("load.time_scale"), 0.5, "--time-scale 0.5"),
            Override::parse("workload.input_lengths=[128, 512]").unwrap(),
        ];
        let request = TrialRequest {
            config: Some("configs/other.toml".into()),
            overrides: overrides.to_vec(),
            cli_target: Some(Target {
                api_key_env: Some("TEAM_KEY".into()),
                ..Target::at("http://h:1")
            }),
            profile: Profile::default(),
        };
        let text = serde_json::to_string(&request).unwrap();
        assert!(text.contains("\"api_key_env\":\"TEAM_KEY\""), "{text}");
        let back: TrialRequest = serde_json::from_str(&text).unwrap();
        assert_eq!(back, request);
        assert_eq!(back.overrides, overrides);
    }

    #[test]
    fn a_request_whose_url_holds_a_password_is_known_as_one() {
        let with = |url: &str| TrialRequest {
            config: None,
            overrides: Vec::new(),
            cli_target: Some(Target::at(url)),
            profile: Profile::default(),
        };
        assert!(!with("http://127.0.0.1:8000").holds_credentials());
        assert!(with("http://team:s3cret-pass@127.0.0.1:8000").holds_credentials());
    }
}
