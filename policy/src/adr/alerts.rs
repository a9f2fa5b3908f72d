//! `adr alerts`: the rollback conditions of the live records as Prometheus alerting rules
//! (`deploy/prometheus/infergate-rules.yml`) and the same rules as a Kubernetes
//! `PrometheusRule` (`deploy/k8s/infergate-prometheusrule.yml`). Pure: live conditions in, the
//! two files' text out; the command in `adr/mod.rs` writes or checks them.
//!
//! One rule group per engine (vLLM, SGLang, llama.cpp), one alert per condition the engine has
//! a series for (`crate::thresholds::series`); the others are listed in the files' header as
//! not exportable, with the reason. `for:` is the condition's window, `severity` comes from its
//! action, and the labels and annotations carry the record, its file and line, the measured
//! baseline and the rollback instruction. A latency quantile is written on the engine's default
//! bucket bounds (`series::resolve`): the share of requests over the bound at or above the
//! limit, with the effective limit in the `decided` annotation. Each condition also has an
//! absent-data alert (`...NoData`, severity `warning`): its window held no observation.

use infergate_model::EngineKind;
use yaml_rust2::Yaml;

use super::live::LiveCondition;
use crate::text::yaml;
use crate::thresholds::series::{
    NotExportable, Source, absent_promql, decided_as, default_bounds, promql, resolve, source,
};

pub const RULES_FILE: &str = "deploy/prometheus/infergate-rules.yml";
pub const K8S_FILE: &str = "deploy/k8s/infergate-prometheusrule.yml";

/// The two generated files and what went into them.
#[derive(Clone, Debug, PartialEq)]
pub struct Rendered {
    pub rules: String,
    pub k8s: String,
    /// Alerts written (over all engines).
    pub alerts: usize,
    /// `ADR-NNNN metric on engines: why`, one per condition and reason.
    pub not_exportable: Vec<String>,
    /// The live regression budgets, which no alert can evaluate (one line each).
    pub budgets: Vec<String>,
    /// The live load-bound thresholds ("holds the SLO at concurrency 24"), which no alert can
    /// evaluate either (one line each).
    pub load_bound: Vec<String>,
}

/// `metrics.ttft_ms.p99` -> `MetricsTtftMsP99`.
fn camel(s: &str) -> String {
    s.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut c = w.chars();
            c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
        })
        .collect()
}

/// The alert name of a condition: `InfergateAdr0001MetricsTtftMsP99RollBack`.
pub fn alert_name(c: &LiveCondition) -> String {
    format!(
        "InfergateAdr{:04}{}{}",
        c.adr,
        camel(c.condition.metric.as_str()),
        camel(c.condition.action.as_str())
    )
}

/// An engine as the rules name it: the prefix of its metric names (`vllm`, `sglang`,
/// `llamacpp`), which the label and the group name carry.
fn prom_name(engine: EngineKind) -> &'static str {
    engine.metric_prefix().unwrap_or(engine.as_str())
}

/// The series a condition is written over on `engine`, a latency quantile resolved on the
/// engine's default buckets; or why there is none.
pub fn engine_source(c: &LiveCondition, engine: EngineKind) -> Result<Source, NotExportable> {
    let src = source(c.condition.metric, engine)?;
    match src.family().and_then(default_bounds) {
        Some(bounds) => resolve(&src, &c.condition, bounds),
        None => Ok(src),
    }
}

/// A YAML string.
fn st(v: impl Into<String>) -> Yaml {
    Yaml::String(v.into())
}

/// A YAML mapping in the order given.
fn map<const N: usize>(pairs: [(&str, Yaml); N]) -> Yaml {
    Yaml::Hash(pairs.into_iter().map(|(k, v)| (st(k), v)).collect())
}

/// The alert of a condition on an engine, and its absent-data alert.
fn rule(c: &LiveCondition, engine: EngineKind, src: &Source) -> [Yaml; 2] {
    let cond = &c.condition;
    let label = format!("ADR-{:04}", c.adr);
    let at = format!("{}:{}", c.file, cond.line);
    let what = cond.render().replace('`', "");
    let instruction = if cond.action.blocks() {
        format!(
            "roll back the decision of {label} ({}): its Rollback conditions section ({at}) says \
             what rolling back restores",
            c.title
        )
    } else {
        format!("investigate without rolling back ({label}, {at})")
    };
    let labels = |severity: &str, action: &str| {
        map([
            ("severity", st(severity)),
            ("engine", st(prom_name(engine))),
            ("adr", st(format!("{:04}", c.adr))),
            ("metric", st(cond.metric.as_str())),
            ("action", st(action)),
        ])
    };
    let mut annotations = yaml_rust2::yaml::Hash::new();
    for (k, v) in [
        ("summary", format!("{label}: {what} ({})", prom_name(engine))),
        ("record", at.clone()),
        ("baseline", cond.note.clone().unwrap_or_else(|| "not stated in the record".into())),
        ("rollback", instruction),
    ] {
        annotations.insert(st(k), st(v));
    }
    let value = match (src, decided_as(src, cond)) {
        (Source::ShareOver { .. }, Some(how)) => {
            annotations.insert(st("decided"), st(how));
            "{{ $value | humanizePercentage }} of requests over the bucket bound".to_string()
        }
        _ => format!("{{{{ $value }}}} {}", cond.unit),
    };
    annotations.insert(st("value"), st(value));
    let alert = map([
        ("alert", st(alert_name(c))),
        ("expr", st(promql(src, cond))),
        ("for", st(cond.window.to_string())),
        ("labels", labels(cond.action.severity(), cond.action.as_str())),
        ("annotations", Yaml::Hash(annotations)),
    ]);
    // No data is not good news: the window held no observation.
    let no_data = map([
        ("alert", st(format!("{}NoData", alert_name(c)))),
        ("expr", st(absent_promql(src, cond))),
        ("labels", labels("warning", "no data")),
        (
            "annotations",
            map([
                (
                    "summary",
                    st(format!(
                        "{label}: {} cannot be evaluated: no observation in {} ({})",
                        cond.metric,
                        cond.window,
                        prom_name(engine)
                    )),
                ),
                ("record", st(at)),
                (
                    "rollback",
                    st(
                        "no data is not good news: check that the engine serves requests and exports its metrics",
                    ),
                ),
            ]),
        ),
    ]);
    [alert, no_data]
}

/// The `groups:` list, one group per engine, and how many alerts it holds.
fn groups(conds: &[LiveCondition]) -> (Yaml, usize) {
    let mut alerts = 0;
    let mut groups = Vec::new();
    for engine in EngineKind::with_metrics() {
        let mut rules = Vec::new();
        for c in conds {
            if let Ok(src) = engine_source(c, engine) {
                rules.extend(rule(c, engine, &src));
                alerts += 1;
            }
        }
        groups.push(map([
            ("name", st(format!("infergate-rollback-{}", prom_name(engine)))),
            ("rules", Yaml::Array(rules)),
        ]));
    }
    (Yaml::Array(groups), alerts)
}

/// Which conditions have no series on which engines, and why.
fn not_exportable(conds: &[LiveCondition]) -> Vec<String> {
    let mut out = Vec::new();
    for c in conds {
        let mut by_reason: Vec<(String, Vec<&str>)> = Vec::new();
        for engine in EngineKind::with_metrics() {
            if let Err(why) = engine_source(c, engine) {
                match by_reason.iter_mut().find(|(r, _)| *r == why.0) {
                    Some((_, engines)) => engines.push(prom_name(engine)),
                    None => by_reason.push((why.0, vec![prom_name(engine)])),
                }
            }
        }
        for (why, engines) in by_reason {
            out.push(format!(
                "ADR-{:04} {} ({}:{}) on {}: {why}",
                c.adr,
                c.condition.render().replace('`', ""),
                c.file,
                c.condition.line,
                engines.join(", ")
            ));
        }
    }
    out
}

fn header(kind: &str, missing: &[String], budgets: &[String], load_bound: &[String]) -> String {
    let mut o = format!(
        "# Generated by infergate (`adr alerts`) from the rollback conditions of the live\n\
         # (Accepted, not superseded) decision records in docs/adr: {kind}.\n\
         # Do not edit: change or supersede a record and regenerate.\n\
         # `adr alerts --check` fails when this file is out of date.\n"
    );
    if !missing.is_empty() {
        o.push_str("#\n# Not exportable (no series of the engine measures it; the gate checks it on bench runs):\n");
        for m in missing {
            o.push_str(&format!("#   {m}\n"));
        }
    }
    if !budgets.is_empty() {
        o.push_str(
            "#\n# Not an alert: regression budgets compare a candidate with a baseline measured in the same\n\
             # job (`bench ab`); a live series has no baseline to compare with:\n",
        );
        for b in budgets {
            o.push_str(&format!("#   {b}\n"));
        }
    }
    if !load_bound.is_empty() {
        o.push_str(
            "#\n# Not an alert: a threshold bound to a load (\"holds the SLO at load L\") is decided by the\n\
             # gate on a run measured at that load; production traffic does not run at a chosen load,\n\
             # so no series of the deployed engine can evaluate it:\n",
        );
        for t in load_bound {
            o.push_str(&format!("#   {t}\n"));
        }
    }
    o
}

/// Both files from the live records: their rollback conditions, with their regression budgets
/// and load-bound thresholds listed as what no alert can evaluate (`adr alerts`, and `adr
/// check`'s comparison with the committed files).
pub fn render_records(adrs: &[super::Adr]) -> (Vec<LiveCondition>, Rendered) {
    let conds = super::live::live_rollback(adrs);
    let bound: Vec<crate::thresholds::Threshold> =
        super::live::live_thresholds(adrs).into_iter().filter(|t| t.load.is_some()).collect();
    let r = render_with(&conds, &super::live::live_budgets(adrs), &bound);
    (conds, r)
}

/// A load-bound threshold as the files list it: `ADR-0002 goodput.ratio >= 0.95 at concurrency
/// 24 (profile `default`, docs/adr/0002-x.md:40)`.
fn load_bound_text(t: &crate::thresholds::Threshold) -> String {
    let profile = t.profile.as_ref().map_or(String::new(), |p| format!("profile `{p}`, "));
    format!("ADR-{:04} {} {} ({profile}{}:{})", t.adr, t.metric, t.limit_text(), t.file, t.line)
}

/// Both files for the live conditions; the live records' regression budgets are listed as
/// what no alert can evaluate.
pub fn render(conds: &[LiveCondition], budgets: &[crate::thresholds::Budget]) -> Rendered {
    render_with(conds, budgets, &[])
}

/// [`render`], with the live load-bound thresholds listed as what no alert can evaluate too.
pub fn render_with(
    conds: &[LiveCondition],
    budgets: &[crate::thresholds::Budget],
    load_bound: &[crate::thresholds::Threshold],
) -> Rendered {
    let missing = not_exportable(conds);
    let budgets: Vec<String> =
        budgets.iter().map(|b| format!("{} ({}:{})", b.text(), b.file, b.line)).collect();
    let load_bound: Vec<String> = load_bound.iter().map(load_bound_text).collect();
    let (g, alerts) = groups(conds);
    let rules = format!(
        "{}{}",
        header(
            "Prometheus alerting rules (`rule_files:` of prometheus.yml)",
            &missing,
            &budgets,
            &load_bound
        ),
        yaml(&map([("groups", g.clone())]))
    );
    let k8s = map([
        ("apiVersion", st("monitoring.coreos.com/v1")),
        ("kind", st("PrometheusRule")),
        (
            "metadata",
            map([
                ("name", st("infergate-rollback")),
                (
                    "labels",
                    map([
                        ("app.kubernetes.io/name", st("infergate")),
                        ("app.kubernetes.io/component", st("rollback-alerts")),
                    ]),
                ),
            ]),
        ),
        ("spec", map([("groups", g)])),
    ]);
    let k8s = format!(
        "{}{}",
        header("the Prometheus Operator's PrometheusRule", &missing, &budgets, &load_bound),
        yaml(&k8s)
    );
    Rendered { rules, k8s, alerts, not_exportable: missing, budgets, load_bound }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thresholds::rollback::parse_condition;

    fn live(adr: u32, line: usize, text: &str) -> LiveCondition {
        let mut condition = parse_condition(text).unwrap().unwrap();
        condition.line = line;
        LiveCondition { adr, file: "docs/adr/0002-x.md".into(), title: "X's".into(), condition }
    }

    #[test]
    fn conditions_become_alerts_per_engine_and_the_rest_is_listed() {
        let conds = [
            live(
                2,
                40,
                "`metrics.ttft_ms.p99` above 250 ms for 5m: roll back (measured 201 in Exp-1)",
            ),
            live(2, 41, "`goodput.ratio` below 0.9 for 5m: roll back"),
            live(2, 44, "`server.kv_cache_usage.max` above 0.97 for 1m: investigate"),
        ];
        let r = render(&conds, &[]);
        // TTFT: vLLM and SGLang; KV usage: all three; goodput: none.
        assert_eq!(r.alerts, 5, "{}", r.rules);
        // Read back as YAML: the values are the conditions', whatever the quoting.
        let doc = &yaml_rust2::YamlLoader::load_from_str(&r.rules).unwrap()[0];
        let groups = doc["groups"].as_vec().unwrap();
        let names: Vec<&str> = groups.iter().map(|g| g["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            ["infergate-rollback-vllm", "infergate-rollback-sglang", "infergate-rollback-llamacpp"]
        );
        let alert = |group: usize, name: &str| {
            let rules = groups[group]["rules"].as_vec().unwrap();
            rules
                .iter()
                .find(|a| a["alert"].as_str() == Some(name))
                .unwrap_or_else(|| panic!("no {name} in group {group}:\n{}", r.rules))
                .clone()
        };
        let ttft = alert(0, "InfergateAdr0002MetricsTtftMsP99RollBack");
        // 250 ms is a vLLM bucket bound (the condition exactly); SGLang's next bound is 400 ms.
        assert_eq!(
            ttft["expr"].as_str().unwrap(),
            "(sum(rate(vllm:time_to_first_token_seconds_count[5m])) - sum(rate(vllm:time_to_first_token_seconds_bucket{le=~\"0\\\\.25\"}[5m]))) / sum(rate(vllm:time_to_first_token_seconds_count[5m])) > 0.01"
        );
        assert_eq!(ttft["for"].as_str(), Some("5m"));
        assert_eq!(ttft["labels"]["severity"].as_str(), Some("critical"));
        assert_eq!(ttft["labels"]["adr"].as_str(), Some("0002"), "the record number stays text");
        assert_eq!(ttft["annotations"]["baseline"].as_str(), Some("measured 201 in Exp-1"));
        assert_eq!(ttft["annotations"]["record"].as_str(), Some("docs/adr/0002-x.md:40"));
        assert!(ttft["annotations"]["rollback"].as_str().unwrap().contains("(X's)"));
        let sglang = alert(1, "InfergateAdr0002MetricsTtftMsP99RollBack");
        assert!(sglang["expr"].as_str().unwrap().contains("le=~\"0\\\\.4\"}"));
        assert!(sglang["annotations"]["decided"].as_str().unwrap().contains("the record's 250 ms lies inside a bucket of sglang:time_to_first_token_seconds, whose bound 400 ms is the effective limit"));
        let no_data = alert(0, "InfergateAdr0002MetricsTtftMsP99RollBackNoData");
        assert_eq!(
            no_data["expr"].as_str().unwrap(),
            "sum(increase(vllm:time_to_first_token_seconds_count[5m])) == 0 or (absent_over_time(vllm:time_to_first_token_seconds_count[5m]) and on() count(present_over_time(vllm:time_to_first_token_seconds_count[1d])))"
        );
        assert_eq!(no_data["labels"]["severity"].as_str(), Some("warning"));
        assert!(no_data["for"].is_badvalue(), "no data fires at once");
        let kv = alert(2, "InfergateAdr0002ServerKvCacheUsageMaxInvestigate");
        assert_eq!(kv["for"].as_str(), Some("1m"));
        assert_eq!(kv["labels"]["severity"].as_str(), Some("warning"));
        assert_eq!(r.not_exportable.len(), 2, "{:#?}", r.not_exportable);
        assert!(r.not_exportable[0].contains(
            "metrics.ttft_ms.p99 above 250 ms for 5m: roll back (docs/adr/0002-x.md:40) on llamacpp"
        ));
        assert!(r.not_exportable[1].contains("on vllm, sglang, llamacpp: goodput"));
        let k8s = &yaml_rust2::YamlLoader::load_from_str(&r.k8s).unwrap()[0];
        assert_eq!(k8s["kind"].as_str(), Some("PrometheusRule"));
        assert_eq!(&k8s["spec"]["groups"], &doc["groups"], "the same rules in both files");
        // A regression budget is listed as what no alert evaluates, in both files.
        let budget = crate::thresholds::Budget {
            metric: infergate_model::metric::MetricPath::named("metrics.ttft_ms.p99"),
            worse_by: 0.05,
            detect: None,
            action: crate::thresholds::Action::Block,
            profile: None,
            adr: 2,
            file: "docs/adr/0002-x.md".into(),
            line: 33,
        };
        let with = render(&conds, &[budget]);
        let line = "#   metrics.ttft_ms.p99 at most 5% worse than the baseline (ADR-0002) (docs/adr/0002-x.md:33)\n";
        assert!(
            with.rules.contains("# Not an alert: regression budgets") && with.rules.contains(line),
            "{}",
            with.rules
        );
        assert!(with.k8s.contains(line));
        assert_eq!(with.alerts, r.alerts, "a budget is no alert");
        assert!(!r.rules.contains("Not an alert"));
        // A load-bound threshold is listed as what no alert can evaluate, in both files.
        let bound = crate::thresholds::Threshold {
            metric: infergate_model::metric::MetricPath::named("goodput.ratio"),
            comparator: crate::thresholds::Comparator::Ge,
            limit: 0.95,
            unit: "ratio".into(),
            action: crate::thresholds::Action::Block,
            profile: Some("default".into()),
            scenario: Default::default(),
            environment: None,
            load: "concurrency 24".parse().ok(),
            adr: 2,
            file: "docs/adr/0002-x.md".into(),
            line: 35,
        };
        let with = render_with(&conds, &[], &[bound]);
        let line = "#   ADR-0002 goodput.ratio >= 0.95 at concurrency 24 (profile `default`, docs/adr/0002-x.md:35)\n";
        for file in [&with.rules, &with.k8s] {
            assert!(
                file.contains("# Not an alert: a threshold bound to a load") && file.contains(line),
                "{file}"
            );
        }
        assert_eq!(with.alerts, r.alerts, "a load-bound threshold is no alert");
        assert!(!r.rules.contains("bound to a load"));
        let empty = render(&[], &[]);
        assert!(empty.rules.ends_with("groups:\n  - name: infergate-rollback-vllm\n    rules: []\n  - name: infergate-rollback-sglang\n    rules: []\n  - name: infergate-rollback-llamacpp\n    rules: []\n"), "{}", empty.rules);
    }
}
