//! `thresholds/gate.toml`: the thresholds of the live records, each with its provenance.
//!
//! [`parse`] reads and validates the file (metrics known, units the registry's, limits finite);
//! [`render_file`] writes it in the order it is given (the records' order: record number, then
//! line). Which thresholds the records put there is `crate::adr::live`'s business.

use std::collections::BTreeMap;
use std::path::Path;

use infergate_model::config::{ConfigError, ConfigKey, Source};
use infergate_model::metric::{MetricPath, Scale};
use serde::{Deserialize, Serialize};

pub use super::load::Load;
use super::rule::{Action, Comparator};
pub use infergate_model::envkey::EnvironmentKey;

/// Where the thresholds live, relative to the repository root.
pub const GATE_FILE: &str = "thresholds/gate.toml";
/// The `version` of the gate.toml format this tool writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// One threshold in gate.toml: `measured <comparator> limit` must hold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Threshold {
    /// Dotted summary.json path from the metric registry.
    pub metric: MetricPath,
    pub comparator: Comparator,
    /// In `unit`, the registry unit of the metric.
    pub limit: f64,
    pub unit: String,
    pub action: Action,
    /// The bench profile whose runs this threshold gates (the record's measured scenario);
    /// absent: every run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The scenario the record measured, as settings of the run's resolved profile
    /// (`load.concurrency = 64`): a run of the profile with other values is not the scenario
    /// these limits were set for. Empty: any run of the profile.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scenario: BTreeMap<ConfigKey, toml::Value>,
    /// The environment the limit holds for (GPU model and count, engine, model, dtype), in
    /// its text form (`infergate_model::envkey`): runs measured elsewhere are not gated by it. Absent: any
    /// environment (records written before thresholds were keyed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<EnvironmentKey>,
    /// The load the threshold is bound to (`concurrency 24`: "holds the SLO at load L", from a
    /// capacity search): it is decided on runs measured at that load only, and listed as not
    /// applicable on the others. Absent: every run of the profile and scenario.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<Load>,
    /// Provenance: record number, file (relative to the repository root) and table-row line.
    pub adr: u32,
    pub file: String,
    pub line: usize,
}

impl Threshold {
    /// Whether this threshold gates runs of bench profile `profile`.
    pub fn applies_to(&self, profile: &str) -> bool {
        self.profile.as_deref().is_none_or(|p| p == profile)
    }

    /// Whether this threshold holds for a run measured on `env`: it names that environment or
    /// none. `None` (the environment is not known yet): every threshold may hold.
    pub fn holds_for(&self, env: Option<&EnvironmentKey>) -> bool {
        match (&self.environment, env) {
            (Some(mine), Some(env)) => mine == env,
            _ => true,
        }
    }

    /// The environment as `adr list` and reports show it: its text form, or `any`.
    pub fn environment_text(&self) -> String {
        environment_text(self.environment.as_ref())
    }

    /// `<= 201 ms`, and ` at concurrency 24` after it for a load-bound threshold.
    pub fn limit_text(&self) -> String {
        let at = self.load.map_or(String::new(), |l| format!(" at {l}"));
        format!("{} {}{at}", self.comparator, crate::text::with_unit(self.limit, &self.unit))
    }
}

/// An environment key's text form, or `any` for a threshold that names none.
pub fn environment_text(env: Option<&EnvironmentKey>) -> String {
    env.map_or_else(|| ANY_ENVIRONMENT.to_string(), ToString::to_string)
}

/// How a threshold without an environment key is shown (and may be written in a record's
/// Environment column): it holds for any environment.
pub const ANY_ENVIRONMENT: &str = "any";

/// A regression budget of a live record: how much worse than the baseline arm of an A/B gate
/// (`bench ab`) a metric may be. Relative for a positive metric (`0.05`: 5% worse), in points
/// for a share.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    pub metric: MetricPath,
    pub worse_by: f64,
    /// The regression the gate must catch (absent: twice `worse_by`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detect: Option<f64>,
    pub action: Action,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    pub adr: u32,
    pub file: String,
    pub line: usize,
}

impl Budget {
    /// `metrics.ttft_ms.p99 at most 5% worse than the baseline (ADR-0001)`; points for a share.
    pub fn text(&self) -> String {
        let share = self.metric.scale() == Scale::Share;
        let n = infergate_model::stats::sig_text(self.worse_by * 100.0);
        let amount = if share { format!("{n} points") } else { format!("{n}%") };
        format!("{} at most {amount} worse than the baseline (ADR-{:04})", self.metric, self.adr)
    }

    /// Whether this budget gates A/B gates of bench profile `profile`.
    pub fn applies_to(&self, profile: &str) -> bool {
        self.profile.as_deref().is_none_or(|p| p == profile)
    }
}

/// The contents of gate.toml.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Thresholds {
    pub version: u32,
    #[serde(default, rename = "threshold")]
    pub thresholds: Vec<Threshold>,
    /// Regression budgets, checked by `bench ab` (an absolute gate has no baseline for them).
    #[serde(default, rename = "budget", skip_serializing_if = "Vec::is_empty")]
    pub budgets: Vec<Budget>,
}

impl Thresholds {
    /// Read and validate a gate.toml (metrics known, units the registry's, limits finite).
    pub fn load(path: &Path) -> Result<Thresholds, ConfigError> {
        parse(&Source::read(path)?)
    }
}

/// Parse and validate gate.toml text. Errors name the file and, where known, the line.
pub fn parse(source: &Source) -> Result<Thresholds, ConfigError> {
    let t: Thresholds = source.parse().map_err(|e| unknown_metric(source).unwrap_or(e))?;
    if t.version != FORMAT_VERSION {
        return Err(source.error_at(
            &["version"],
            format!(
                "version {} is not supported; this tool reads version {FORMAT_VERSION}",
                t.version
            ),
        ));
    }
    for (i, th) in t.thresholds.iter().enumerate() {
        let at = format!("threshold #{} (from {}:{})", i + 1, th.file, th.line);
        let def = th.metric.def();
        if th.unit != def.unit {
            return Err(source.error(
                None,
                format!(
                    "{at}: unit `{}` is not `{}`, the unit of {}",
                    th.unit, def.unit, th.metric
                ),
            ));
        }
        if !th.limit.is_finite() {
            return Err(source.error(None, format!("{at}: limit is not a finite number")));
        }
    }
    for (i, b) in t.budgets.iter().enumerate() {
        let at = format!("budget #{} (from {}:{})", i + 1, b.file, b.line);
        infergate_model::ab::BudgetCheck::new(b.metric, b.worse_by, b.detect, true, "")
            .map_err(|e| source.error(None, format!("{at}: {e}")))?;
    }
    Ok(t)
}

/// The error of a gate.toml whose version is this tool's and one of whose thresholds or budgets
/// names a metric the registry does not know (which its metric field refuses), as the checks
/// after reading say it: the threshold or budget, where it comes from, the metric. `None` when
/// the file has no such metric (its error is another).
fn unknown_metric(source: &Source) -> Option<ConfigError> {
    #[derive(Deserialize)]
    struct Named {
        metric: String,
        file: String,
        line: usize,
    }
    #[derive(Deserialize)]
    struct Metrics {
        version: u32,
        #[serde(default)]
        threshold: Vec<Named>,
        #[serde(default)]
        budget: Vec<Named>,
    }
    let m: Metrics = toml::from_str(&source.text).ok()?;
    if m.version != FORMAT_VERSION {
        return None;
    }
    let unknown = |n: &Named| MetricPath::parse(&n.metric).is_err();
    if let Some((i, th)) = m.threshold.iter().enumerate().find(|(_, n)| unknown(n)) {
        let at = format!("threshold #{} (from {}:{})", i + 1, th.file, th.line);
        return Some(source.error(
            None,
            format!(
                "{at}: unknown metric `{}`; see docs/adr/README.md for the metric names",
                th.metric
            ),
        ));
    }
    let (i, b) = m.budget.iter().enumerate().find(|(_, n)| unknown(n))?;
    let at = format!("budget #{} (from {}:{})", i + 1, b.file, b.line);
    let e = infergate_model::ab::BudgetError::Unknown(b.metric.clone());
    Some(source.error(None, format!("{at}: {e}")))
}

/// gate.toml text: a header naming the records directory `adr_dir`, then one `[[threshold]]`
/// per threshold in the given order.
pub fn render_file(t: &Thresholds, adr_dir: &str) -> String {
    let s = |v: &str| toml::Value::String(v.to_string()).to_string();
    let mut out = format!(
        "# Generated by infergate (`adr thresholds`) from the live (Accepted, not superseded)\n\
         # decision records in {adr_dir}. Do not edit: change or supersede a record and regenerate.\n\
         # `adr thresholds --check` fails when this file is out of date.\n\
         # A threshold with a `profile` gates runs of that bench profile only; one with an\n\
         # `environment` gates runs measured on that GPU, engine, model and dtype only.\n\
         {}version = {}\n",
        if t.thresholds.iter().any(|th| th.load.is_some()) {
            "# One with a `load` gates runs measured at that load only (\"holds the SLO at\n\
             # concurrency 24\"); a run at another load lists it as not applicable.\n"
        } else {
            ""
        },
        t.version
    );
    for th in &t.thresholds {
        let profile =
            th.profile.as_ref().map_or(String::new(), |p| format!("profile = {}\n", s(p)));
        let profile = if th.scenario.is_empty() {
            profile
        } else {
            let items: Vec<String> =
                th.scenario.iter().map(|(k, v)| format!("{} = {v}", s(k.as_str()))).collect();
            format!("{profile}scenario = {{ {} }}\n", items.join(", "))
        };
        let profile = match &th.environment {
            Some(env) => format!("{profile}environment = {}\n", s(&env.to_string())),
            None => profile,
        };
        let profile = match &th.load {
            Some(load) => format!("{profile}load = {}\n", s(&load.to_string())),
            None => profile,
        };
        out.push_str(&format!(
            "\n[[threshold]]\nmetric = {}\ncomparator = {}\nlimit = {}\nunit = {}\naction = {}\n{profile}adr = {}\nfile = {}\nline = {}\n",
            s(th.metric.as_str()),
            s(th.comparator.as_str()),
            toml::Value::Float(th.limit),
            s(&th.unit),
            s(th.action.as_str()),
            th.adr,
            s(&th.file),
            th.line,
        ));
    }
    for b in &t.budgets {
        let profile = b.profile.as_ref().map_or(String::new(), |p| format!("profile = {}\n", s(p)));
        let detect =
            b.detect.map_or(String::new(), |d| format!("detect = {}\n", toml::Value::Float(d)));
        out.push_str(&format!(
            "\n[[budget]]\nmetric = {}\nworse_by = {}\n{detect}action = {}\n{profile}adr = {}\nfile = {}\nline = {}\n",
            s(b.metric.as_str()),
            toml::Value::Float(b.worse_by),
            s(b.action.as_str()),
            b.adr,
            s(&b.file),
            b.line,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(profile: Option<&str>) -> Threshold {
        Threshold {
            metric: infergate_model::metric::MetricPath::named("goodput.ratio"),
            comparator: Comparator::Ge,
            limit: 0.95,
            unit: "ratio".into(),
            action: Action::Block,
            profile: profile.map(str::to_string),
            scenario: BTreeMap::new(),
            environment: None,
            load: None,
            adr: 2,
            file: "docs/adr/0002-t.md".into(),
            line: 11,
        }
    }

    #[test]
    fn rendered_files_read_back_and_scope_by_profile() {
        let budget = Budget {
            metric: infergate_model::metric::MetricPath::named("metrics.ttft_ms.p99"),
            worse_by: 0.05,
            detect: Some(0.12),
            action: Action::Block,
            profile: Some("x".into()),
            adr: 2,
            file: "docs/adr/0002-t.md".into(),
            line: 14,
        };
        let t = Thresholds {
            version: FORMAT_VERSION,
            thresholds: vec![one(None), one(Some("x"))],
            budgets: vec![budget.clone()],
        };
        let text = render_file(&t, "docs/adr");
        assert!(
            text.contains(
                "[[budget]]\nmetric = \"metrics.ttft_ms.p99\"\nworse_by = 0.05\ndetect = 0.12\n"
            ),
            "{text}"
        );
        assert!(budget.applies_to("x") && !budget.applies_to("y"));
        let bad = text.replace("worse_by = 0.05", "worse_by = 0.0");
        let e = parse(&Source::new("gate.toml", bad)).unwrap_err();
        assert!(e.to_string().contains("budget #1 (from docs/adr/0002-t.md:14)"), "{e}");
        assert!(text.starts_with("# Generated by infergate (`adr thresholds`)"), "{text}");
        assert!(text.contains("\nprofile = \"x\"\nadr = 2\n"), "{text}");
        assert_eq!(parse(&Source::new("gate.toml", text)).unwrap(), t);
        assert!(one(None).applies_to("any"));
        assert!(one(Some("x")).applies_to("x") && !one(Some("x")).applies_to("y"));
    }

    /// A load-bound threshold is written with its load and the header line that explains it;
    /// a file without one keeps the header it had.
    #[test]
    fn a_load_bound_threshold_reads_back_with_its_load() {
        let plain =
            Thresholds { version: FORMAT_VERSION, thresholds: vec![one(None)], budgets: vec![] };
        assert!(
            !render_file(&plain, "docs/adr").contains("load"),
            "{}",
            render_file(&plain, "docs/adr")
        );
        let load = Load::new(super::super::load::Dimension::Concurrency, 24.0);
        let bound = Threshold { load: Some(load), ..one(Some("x")) };
        let t = Thresholds {
            version: FORMAT_VERSION,
            thresholds: vec![one(None), bound],
            budgets: vec![],
        };
        let text = render_file(&t, "docs/adr");
        assert!(
            text.contains("# One with a `load` gates runs measured at that load only"),
            "{text}"
        );
        assert!(text.contains("profile = \"x\"\nload = \"concurrency 24\"\nadr = 2\n"), "{text}");
        assert_eq!(parse(&Source::new("gate.toml", text.clone())).unwrap(), t);
        assert_eq!(t.thresholds[1].limit_text(), ">= 0.95 at concurrency 24");
        let bad = text.replace("concurrency 24", "concurrency 2.5");
        let e = parse(&Source::new("gate.toml", bad)).unwrap_err();
        assert!(e.to_string().contains("whole number"), "{e}");
    }

    #[test]
    fn gate_files_with_bad_units_or_keys_are_refused() {
        let ok = "version = 1\n[[threshold]]\nmetric = \"goodput.ratio\"\ncomparator = \">=\"\nlimit = 0.9\nunit = \"ratio\"\naction = \"block\"\nadr = 1\nfile = \"x.md\"\nline = 3\n";
        assert!(parse(&Source::new("g.toml", ok)).is_ok());
        let e = parse(&Source::new("g.toml", ok.replace("\"ratio\"", "\"%\""))).unwrap_err();
        assert!(e.to_string().contains("unit `%` is not `ratio`"), "{e}");
        let e = parse(&Source::new("g.toml", ok.replace("line = 3", "line = 3\nextra = 1")))
            .unwrap_err();
        assert_eq!(e.line, Some(11), "{e}");
        let e = parse(&Source::new("g.toml", ok.replace("\">=\"", "\"=>\""))).unwrap_err();
        assert_eq!(e.line, Some(4), "{e}");
        let e =
            parse(&Source::new("g.toml", ok.replace("version = 1", "version = 2"))).unwrap_err();
        assert!(e.to_string().contains("version 2 is not supported"), "{e}");
        let e =
            parse(&Source::new("g.toml", ok.replace("goodput.ratio", "goodput.rate"))).unwrap_err();
        assert!(e.to_string().contains("unknown metric `goodput.rate`"), "{e}");
        // Named as the threshold's, with where it comes from, though the metric field itself
        // refuses the name when the file is read.
        assert!(
            e.to_string().ends_with(
                "threshold #1 (from x.md:3): unknown metric `goodput.rate`; see \
                 docs/adr/README.md for the metric names"
            ),
            "{e}"
        );
        let budget = "version = 1\n[[budget]]\nmetric = \"metrics.ttft_ms.p98\"\nworse_by = 0.05\naction = \"block\"\nadr = 1\nfile = \"x.md\"\nline = 7\n";
        let e = parse(&Source::new("g.toml", budget)).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("budget #1 (from x.md:7): `metrics.ttft_ms.p98` is not a known metric"),
            "{e}"
        );
    }
}
