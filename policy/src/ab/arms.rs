//! What each arm of `bench ab` runs, and what is gated: the working tree's engine config, the
//! candidate's settings, and the budgets. Pure: the base revision and its committed config are
//! read by the command (`xtask::gate::ab::base`).

use anyhow::{Context, bail};
use infergate_model::ab::BudgetCheck;
use infergate_model::config::{ConfigKey, EngineConfig, Source};
use infergate_model::summary::Scale;

use crate::thresholds::load::Load;
use crate::thresholds::{Action, Thresholds, evaluate};
use crate::tune::grid::{self, Variant};

/// Engine-config settings: dotted key and value.
pub type EngineSets = Vec<(ConfigKey, toml::Value)>;

/// `--candidate-set` split into engine-config settings (an engine-config key,
/// [`ConfigKey::is_engine_key`]) and bench settings (`sim.slowdown`, `load.concurrency`, and
/// what is no key, for the bench's `--set` to refuse).
pub fn split_sets(sets: &[String], flag: &str) -> anyhow::Result<(EngineSets, Vec<String>)> {
    let (mut engine, mut bench) = (Vec::new(), Vec::new());
    for s in sets {
        let Some((key, value)) = s.split_once('=') else {
            bail!("{flag} `{s}` is not KEY=VALUE");
        };
        match ConfigKey::parse(key.trim()) {
            Ok(key) if key.is_engine_key() => engine.push((key, grid::parse_value(value))),
            _ => bench.push(s.clone()),
        }
    }
    Ok((engine, bench))
}

/// The candidate's engine config: the working tree's with the engine settings applied (a
/// validated variant; errors name the key).
pub fn candidate_text(
    governed: &Source,
    engine_sets: &[(ConfigKey, toml::Value)],
) -> anyhow::Result<String> {
    if engine_sets.is_empty() {
        EngineConfig::from_source(governed)?;
        return Ok(governed.text.clone());
    }
    let name = engine_sets
        .iter()
        .map(|(k, v)| format!("{k}={}", grid::value_text(v)))
        .collect::<Vec<_>>()
        .join(",");
    Ok(grid::variant_text(governed, &Variant { name, settings: engine_sets.to_vec() })?)
}

/// The checks of the gate: each metric a live threshold of the profile names (blocking as the
/// threshold's action; counts left out, they are observed, not compared), with its record's
/// budget when it states one, else `budget`; without any live threshold for the profile, the
/// default metrics, blocking. The thresholds are selected for the candidate's `environment`
/// (the simulated device of its engine config; `None` for a real engine, whose GPU is known
/// once it runs: every environment's metrics of the profile). A threshold bound to a load
/// ("holds the SLO at concurrency 24") names its metric only when both arms run that `load`
/// ([`not_applicable`] says why the others are left out).
pub fn checks(
    thresholds: Option<&Thresholds>,
    profile: &str,
    environment: Option<&infergate_model::envkey::EnvironmentKey>,
    load: Option<&Load>,
    budget: (f64, &str),
) -> anyhow::Result<Vec<BudgetCheck>> {
    let mut out: Vec<BudgetCheck> = Vec::new();
    if let Some(t) = thresholds {
        for b in t.budgets.iter().filter(|b| b.applies_to(profile)) {
            let source = format!("ADR-{:04} line {}", b.adr, b.line);
            let check =
                BudgetCheck::new(b.metric, b.worse_by, b.detect, b.action == Action::Block, source)
                    .with_context(|| {
                        format!("the budget of {} in {}:{}", b.metric, b.file, b.line)
                    })?;
            out.push(check);
        }
        for th in evaluate::select(t, profile, environment).applying {
            if out.iter().any(|c| c.metric == th.metric)
                || th.metric.scale() == Scale::Count
                || th.load.is_some_and(|l| Some(&l) != load)
            {
                continue;
            }
            let at = th.load.map_or(String::new(), |l| format!(", at {l}"));
            let source =
                format!("{} on ADR-{:04}'s metric (line {}{at})", budget.1, th.adr, th.line);
            out.push(BudgetCheck::new(
                th.metric,
                budget.0,
                None,
                th.action == Action::Block,
                source,
            )?);
        }
    }
    if out.is_empty() {
        for &m in infergate_model::ab::default_metrics() {
            let source = format!("{} (default metrics)", budget.1);
            out.push(BudgetCheck::new(m, budget.0, None, true, source)?);
        }
    }
    Ok(out)
}

/// The live thresholds of the profile bound to another load than the arms run (`load`:
/// `None` when the arms run none, or different ones), one note each: what the threshold
/// decides, the load the arms run, and the settings that compare the arms at its load. An A/B
/// gate decides paired differences at the load both arms run; "holds the SLO at load L" is a
/// question about load L.
pub fn not_applicable(
    thresholds: Option<&Thresholds>,
    profile: &str,
    environment: Option<&infergate_model::envkey::EnvironmentKey>,
    load: Option<&Load>,
) -> Vec<String> {
    let Some(t) = thresholds else { return Vec::new() };
    let arms = load.map_or_else(|| "no one concurrency or rate".to_string(), |l| l.to_string());
    evaluate::select(t, profile, environment)
        .applying
        .into_iter()
        .filter_map(|th| {
            let want = th.load.filter(|l| Some(l) != load)?;
            let sets = match want.dimension {
                crate::thresholds::load::Dimension::Concurrency => format!(
                    "--set load.mode=closed --set load.concurrency={}",
                    infergate_model::stats::sig_text(want.value)
                ),
                crate::thresholds::load::Dimension::Rate => {
                    format!("--set load.mode=open --set load.rate={}", want.value)
                }
            };
            Some(format!(
                "not applicable: ADR-{:04} {} {} (line {}): the arms run {arms}; compare them at \
                 that load with `bench ab {sets}`, or decide it with `{}`",
                th.adr,
                th.metric,
                th.limit_text(),
                th.line,
                crate::thresholds::load::gate_command(profile, &want)
            ))
        })
        .collect()
}

/// A short stable hash of a config's text.
pub fn config_hash(text: &str) -> String {
    format!("fnv1a:{:016x}", infergate_model::hash::fnv1a(text.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidate_settings_split_into_engine_and_bench_keys() {
        let sets = vec![
            "scheduler.max_num_seqs=128".to_string(),
            "sim.slowdown=1.1".to_string(),
            "load.concurrency=4".to_string(),
        ];
        let (engine, bench) = split_sets(&sets, "--candidate-set").unwrap();
        assert_eq!(
            engine,
            vec![(ConfigKey::literal("scheduler.max_num_seqs"), toml::Value::Integer(128))]
        );
        assert_eq!(bench, vec!["sim.slowdown=1.1", "load.concurrency=4"]);
        assert!(split_sets(&["nope".to_string()], "--set").is_err());
        let base = Source::new(
            "configs/engine.toml",
            "[engine]\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\n[scheduler]\nmax_num_seqs = 64\n",
        );
        let text = candidate_text(&base, &engine).unwrap();
        assert!(text.contains("max_num_seqs = 128"), "{text}");
        assert_eq!(candidate_text(&base, &[]).unwrap(), base.text);
        let bad = candidate_text(
            &base,
            &[(ConfigKey::literal("scheduler.max_num_seqs"), toml::Value::Integer(-1))],
        );
        assert!(bad.is_err());
    }

    #[test]
    fn without_live_thresholds_the_default_metrics_are_gated() {
        let c = checks(None, "default", None, None, (0.05, "--budget 5%")).unwrap();
        let metrics: Vec<_> = c.iter().map(|c| c.metric).collect();
        assert_eq!(metrics, infergate_model::ab::default_metrics());
        assert!(c.iter().all(|c| c.blocking && c.budget == 0.05));
    }

    /// A threshold bound to a load names its metric only when the arms run that load; else it
    /// is a note naming the arms' load and the settings that measure its own.
    #[test]
    fn a_load_bound_threshold_is_checked_only_at_its_load() {
        let at = |metric: &str, load: Option<&str>, line: usize| crate::thresholds::Threshold {
            metric: infergate_model::metric::MetricPath::named(metric),
            comparator: crate::thresholds::Comparator::Ge,
            limit: 0.95,
            unit: "ratio".into(),
            action: Action::Block,
            profile: Some("default".into()),
            scenario: Default::default(),
            environment: None,
            load: load.map(|l| l.parse().unwrap()),
            adr: 2,
            file: "docs/adr/0002-x.md".into(),
            line,
        };
        let t = Thresholds {
            version: 1,
            thresholds: vec![
                at("error_rate", None, 30),
                at("goodput.ratio", Some("concurrency 8"), 31),
            ],
            budgets: vec![],
        };
        let budget = (0.05, "--budget 5%");
        let c8: Load = "concurrency 8".parse().unwrap();
        let c4: Load = "concurrency 4".parse().unwrap();
        let metrics = |load: Option<&Load>| -> Vec<String> {
            checks(Some(&t), "default", None, load, budget)
                .unwrap()
                .into_iter()
                .map(|c| c.metric.to_string())
                .collect()
        };
        assert_eq!(metrics(Some(&c8)), ["error_rate", "goodput.ratio"]);
        assert_eq!(metrics(Some(&c4)), ["error_rate"]);
        assert_eq!(metrics(None), ["error_rate"]);
        assert!(not_applicable(Some(&t), "default", None, Some(&c8)).is_empty());
        let notes = not_applicable(Some(&t), "default", None, Some(&c4));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].starts_with(
                "not applicable: ADR-0002 goodput.ratio >= 0.95 at concurrency 8 (line 31): the \
                 arms run concurrency 4; compare them at that load with `bench ab --set \
                 load.mode=closed --set load.concurrency=8`"
            ) && notes[0].contains("bench --profile default --concurrency 8 --gate`"),
            "{notes:?}"
        );
    }
}
