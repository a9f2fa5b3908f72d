//! The flags of `bench ab`, parsed once; [`AbArgs::settings`] resolves the numbers a gate runs
//! with (defaults from `infergate_model::ab`).

use std::path::PathBuf;

use clap::Args;
use infergate_model::ab::{self, Criteria, Spending};
use infergate_model::stats::{LOOK_RULE_CHOICES, LookRule};

use crate::text::parse_fraction;

use crate::engine_process::EngineFlags;
use crate::measure::flags::MeasureFlags;

/// `bench ab [BASE_REV]`: baseline and candidate in one job.
#[derive(Clone, Debug, Args)]
pub struct AbArgs {
    /// The base revision whose governed engine config is the baseline, measured against the
    /// working tree's (the candidate). Default: the merge base of HEAD and origin/main (else
    /// main).
    #[arg(value_name = "BASE_REV")]
    pub ab: Option<String>,
    /// The profile both arms run, its bench config and `--set` (an engine key there changes
    /// both arms' engine configs, any other is a bench setting).
    #[command(flatten)]
    pub flags: MeasureFlags,
    /// The governed engine config the arms differ in (default: the profile's
    /// target's `engine_config`, else its `sim.engine_config`).
    #[arg(long, value_name = "FILE")]
    pub engine_config: Option<String>,
    /// A setting for the candidate only: an engine-config key (`scheduler.*`,
    /// `engine.*`, ...) changes the candidate's config, any other a bench setting
    /// (`sim.slowdown=1.1`).
    #[arg(long = "candidate-set", value_name = "KEY=VALUE")]
    pub candidate_sets: Vec<String>,
    /// The gate's directory (default target/gate-ab/<run id>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The regression budget of the metrics whose live record states none: `5%`
    /// worse (points for shares), of the metrics the live thresholds gate, else of the default
    /// list.
    #[arg(long, value_name = "P", value_parser = parse_fraction)]
    pub budget: Option<f64>,
    /// The requests the whole gate may send, both arms, warmups included.
    #[arg(long, value_name = "N", default_value_t = ab::DEFAULT_MAX_REQUESTS)]
    pub max_requests: u64,
    /// Measured requests per trial (default: as many trials as the budget holds,
    /// aiming at 56 blocks of 4).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub trial_requests: Option<u32>,
    /// How many looks (the last after every block).
    #[arg(long, value_name = "K", default_value_t = ab::DEFAULT_LOOKS, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub looks: u32,
    /// How the looks share the error rates: pocock (default), obrien-fleming or
    /// bonferroni.
    #[arg(long, value_name = "RULE", value_parser = parse_rule)]
    pub spending: Option<LookRule>,
    /// The chance that an unchanged configuration fails (all looks and metrics).
    #[arg(long, value_name = "P", default_value_t = ab::DEFAULT_ALPHA_FAIL, value_parser = parse_alpha)]
    pub alpha_fail: f64,
    /// The chance that a configuration twice the budget worse passes.
    #[arg(long, value_name = "P", default_value_t = ab::DEFAULT_ALPHA_PASS, value_parser = parse_alpha)]
    pub alpha_pass: f64,
    /// Seed of the blocks' orders (ABBA or BAAB).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub engine: EngineFlags,
    /// Neither read nor append the noise history (`refs/infergate/history`).
    #[arg(long)]
    pub no_history: bool,
}

fn parse_alpha(s: &str) -> Result<f64, String> {
    match parse_fraction(s) {
        Ok(v) if v < 0.5 => Ok(v),
        _ => Err(format!("must be an error rate within (0, 0.5) such as 1% or 0.01, got `{s}`")),
    }
}

fn parse_rule(s: &str) -> Result<LookRule, String> {
    LookRule::parse(s)
        .ok_or_else(|| format!("`{s}` is not a spending rule; valid: {LOOK_RULE_CHOICES}"))
}

impl AbArgs {
    /// The error rates.
    pub fn criteria(&self) -> Criteria {
        Criteria { alpha_fail: self.alpha_fail, alpha_pass: self.alpha_pass }
    }

    pub fn spending(&self) -> Spending {
        self.spending.map(Spending::both).unwrap_or_default()
    }

    /// The budget of metrics without one of their own, and how it reads in a check's source.
    pub fn budget(&self) -> (f64, String) {
        match self.budget {
            Some(b) => (b, format!("--budget {}%", crate::text::num(b * 100.0))),
            None => (
                ab::DEFAULT_BUDGET,
                format!("--budget {}% (default)", crate::text::num(ab::DEFAULT_BUDGET * 100.0)),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_read_as_percent_or_share() {
        assert_eq!(parse_fraction("5%"), Ok(0.05));
        assert_eq!(parse_fraction(" 0.1 "), Ok(0.1));
        assert!(parse_fraction("0").is_err() && parse_fraction("100%").is_err());
        assert!(parse_fraction("x").unwrap_err().contains("such as 5%"));
        assert!(parse_alpha("50%").is_err() && parse_alpha("1%").is_ok());
        assert_eq!(parse_rule("obrien-fleming"), Ok(LookRule::ObrienFleming));
        assert!(parse_rule("wald").unwrap_err().contains("pocock"));
    }
}
