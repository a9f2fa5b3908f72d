//! The report of an A/B gate from its `ab.json`: what ran, how much it measured, one row per
//! metric (baseline, candidate, the change with its interval, the budget, the verdict and where
//! the budget comes from), and GitHub annotations. Pure: a file in, text out.

use infergate_model::ab::{AbFile, Arm, CheckLook, NoiseSource, Verdict};
use infergate_model::summary::Scale;

use infergate_model::stats::sig_text;

use crate::console::ConsoleTable;
use crate::text::{BLANK, gh_escape, num};

/// A change as it reads: `+3.1%` or `-2.0 points`.
fn change_text(scale: Scale, v: f64) -> String {
    let pct = v * 100.0;
    let sign = if pct > 0.0 { "+" } else { "" };
    let n = if pct == 0.0 { "0".to_string() } else { sig_text(pct) };
    match scale {
        Scale::Positive => format!("{sign}{n}%"),
        _ => format!("{sign}{n} points"),
    }
}

fn verdict_text(c: &CheckLook) -> String {
    let v = match c.verdict {
        Verdict::Pass => "pass",
        Verdict::Fail => "FAIL",
        Verdict::Inconclusive => "inconclusive",
    };
    if c.blocking { v.to_string() } else { format!("{v} (warn)") }
}

/// The summary lines and the table of the last look.
pub fn render(file: &AbFile) -> String {
    let mut out = String::new();
    let d = &file.design;
    let trials = file.trials.len();
    out += &format!(
        "A/B gate of profile `{}`: baseline {} against candidate {} on {}\n",
        file.profile, file.baseline.source, file.candidate.source, file.baseline.engine
    );
    out += &format!(
        "plan: {} blocks of 4 trials x {} requests (ABBA/BAAB), {} looks, budget {} requests; \
         measured {trials} trials ({} per arm), {} requests\n",
        d.blocks,
        d.trial_requests,
        d.looks.len(),
        d.max_requests,
        file.trials_of(Arm::Baseline),
        file.requests
    );
    let Some(look) = file.looks.last() else {
        out += "no look was made: too few trials measured\n";
        return out;
    };
    out += &format!(
        "look {} of {} after {} blocks, levels: fail {} per metric, pass {} ({} / {} spending)\n",
        look.number,
        d.looks.len(),
        look.after_blocks,
        sig_text(look.alpha_fail),
        sig_text(look.alpha_pass),
        d.spending.fail,
        d.spending.pass
    );
    let mut table = ConsoleTable::framed([
        "metric",
        "baseline",
        "candidate",
        "change [interval]",
        "budget",
        "verdict",
        "source",
    ])
    .right_aligned(1..4);
    for (c, check) in look.checks.iter().zip(&file.checks) {
        let (base, cand, change) = match &c.change {
            Some(ch) => (
                sig_text(ch.baseline),
                sig_text(ch.candidate),
                format!(
                    "{} [{}, {}]",
                    change_text(check.scale, ch.value),
                    change_text(check.scale, ch.lo),
                    change_text(check.scale, ch.hi)
                ),
            ),
            None => (BLANK.into(), BLANK.into(), c.reason.clone().unwrap_or_default()),
        };
        table.row([
            c.metric.to_string(),
            base,
            cand,
            change,
            format!("{} (catches {})", check.budget_text(), check.detect_text()),
            verdict_text(c),
            check.source.to_string(),
        ]);
    }
    out += &table.to_string();
    out.push('\n');
    for c in &look.checks {
        if let Some(ch) = &c.change {
            match &ch.noise {
                NoiseSource::Pooled { history, history_df } => {
                    out += &format!(
                        "{}: noise pooled with {history} ({} degrees of freedom)\n",
                        c.metric,
                        num(*history_df)
                    )
                }
                NoiseSource::NoisierThanHistory { history, ratio } => {
                    out += &format!(
                        "{}: the trials are noisier than {history} ({}x its variance): their own spread decides\n",
                        c.metric,
                        num(*ratio)
                    )
                }
                NoiseSource::Own => {}
            }
        }
    }
    let busy = file.busy_trials();
    if !busy.is_empty() {
        out += &format!(
            "note: {} of {trials} trials ran on a busy client host; the verdict stands, since both \
             arms shared the host\n",
            busy.len()
        );
    }
    for note in &file.notes {
        out += &format!("note: {note}\n");
    }
    out += &format!("A/B verdict: {}\n", status_text(file.status));
    out
}

pub fn status_text(s: Option<Verdict>) -> &'static str {
    match s {
        Some(Verdict::Pass) => "pass",
        Some(Verdict::Fail) => "FAIL",
        Some(Verdict::Inconclusive) => {
            "inconclusive (exit 3: no blocking metric failed, not all passed)"
        }
        None => "none (interrupted before the first look)",
    }
}

/// `::error` / `::warning` annotations for the failed and undecided checks of the last look.
pub fn github(file: &AbFile) -> Vec<String> {
    let Some(look) = file.looks.last() else { return Vec::new() };
    let mut out = Vec::new();
    for (c, check) in look.checks.iter().zip(&file.checks) {
        let level = match (c.verdict, c.blocking) {
            (Verdict::Pass, _) => continue,
            (Verdict::Fail, true) => "error",
            _ => "warning",
        };
        let change = c.change.as_ref().map_or(c.reason.clone().unwrap_or_default(), |ch| {
            format!(
                "{} [{}, {}] against {}",
                change_text(check.scale, ch.value),
                change_text(check.scale, ch.lo),
                change_text(check.scale, ch.hi),
                file.baseline.source
            )
        });
        let msg = format!(
            "{} {}: {change}; budget {} ({})",
            c.metric,
            c.verdict.as_str(),
            check.budget_text(),
            check.source
        );
        out.push(format!(
            "::{level} title={}::{}",
            gh_escape("A/B gate", true),
            gh_escape(&msg, false)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_read_with_their_sign_and_scale() {
        assert_eq!(change_text(Scale::Positive, 0.031), "+3.1%");
        assert_eq!(change_text(Scale::Positive, -0.02), "-2%");
        assert_eq!(change_text(Scale::Share, -0.05), "-5 points");
        assert_eq!(change_text(Scale::Share, -0.0), "0 points");
        assert_eq!(change_text(Scale::Positive, 0.0123456), "+1.235%");
    }
}
