//! `report.html`: one self-contained page (inline CSS and SVG, no script, no network: its
//! Content-Security-Policy forbids every fetch) per run, sweep or strategy comparison.

use bench::server_metrics::GaugeStats;
use std::fmt::Write;

use bench::Summary;

use super::console::{latency_rows, overview_rows};
use super::input::{Input, RunInput};
use crate::chart::figures::{self, CDFS, Samples, cdf, latency_samples};
use crate::chart::{Chart, Mark, MarkAxis, esc, render};
use crate::text::{BLANK, fmt_opt};
use crate::thresholds::Thresholds;

/// The page for `input`; `thresholds` (gate.toml) draws the limits that gate its runs.
pub fn render_page(input: &Input, thresholds: Option<&Thresholds>) -> String {
    let mut p = Page::default();
    match input {
        Input::Run(run) => run_page(&mut p, run, thresholds),
        Input::Sweep { sweep, stages, notes, .. } => {
            p.title = format!("Sweep {}", sweep.sweep_id);
            p.meta = format!("{} stages of {}", sweep.stages.len(), sweep.dimension.name());
            p.html.push_str("<h2>Stages</h2>\n");
            p.html.push_str(&sweep_table(sweep));
            p.section("Latency and throughput against load");
            for chart in [
                Some(figures::sweep_throughput(sweep)),
                Some(figures::sweep_latency(sweep)),
                figures::sweep_gpu(sweep),
            ]
            .into_iter()
            .flatten()
            {
                p.figure(&chart);
            }
            overlaid(&mut p, stages, thresholds);
            p.notes(notes.iter().chain(&sweep.notes));
        }
        Input::Tune { tune, notes, .. } => {
            p.title = format!("Tune: profile {}", tune.profile);
            p.meta = format!(
                "{} configurations of {} on {}, {} search; winner {}",
                tune.rows.len(),
                tune.engine_config,
                tune.engine,
                tune.search,
                tune.winner
                    .as_deref()
                    .unwrap_or("none (no measured configuration meets every SLO)")
            );
            p.html.push_str("<h2>Configurations</h2>\n");
            p.html.push_str(&tune_table(tune));
            p.section("Fronts");
            let points = tune.pareto_points();
            p.figure(&figures::pareto(
                "pareto-throughput",
                "Output throughput against TTFT P99",
                "output throughput (tokens/s)",
                &points,
                |q| q.throughput,
                |q| q.pareto,
            ));
            p.figure(&figures::pareto(
                "pareto-goodput",
                "Goodput against TTFT P99",
                "goodput (requests/s)",
                &points,
                |q| q.goodput,
                |q| q.goodput_pareto,
            ));
            p.notes(notes.iter());
        }
        Input::TrialSet { index, trials, notes, .. } => {
            p.title = format!("Trial set {}", index.run_id);
            p.meta = format!(
                "profile {}, {} of {} trials measured, {:.0}% intervals",
                index.profile,
                index.trials.len(),
                index.planned,
                index.confidence * 100.0
            );
            p.html.push_str("<h2>Estimates</h2>\n");
            p.html.push_str(&estimates_table(index));
            overlaid(&mut p, trials, thresholds);
            p.notes(notes.iter());
        }
        Input::Comparison { comparison, runs, notes, .. } => {
            p.title = format!("Batching strategies: profile {}", comparison.profile);
            p.meta = format!("engine config {}", comparison.engine_config);
            p.html.push_str("<h2>Strategies</h2>\n");
            p.html.push_str(&comparison_table(comparison));
            overlaid(&mut p, runs, thresholds);
            p.notes(notes.iter().chain(&comparison.notes));
        }
    }
    p.finish()
}

#[derive(Default)]
struct Page {
    title: String,
    meta: String,
    html: String,
}

impl Page {
    fn section(&mut self, title: &str) {
        let _ = writeln!(self.html, "<h2>{}</h2>", esc(title));
    }

    fn figure(&mut self, chart: &Chart) {
        let _ = writeln!(self.html, "<figure>{}</figure>", render(chart));
    }

    fn notes<'a>(&mut self, notes: impl Iterator<Item = &'a String>) {
        let notes: Vec<&String> = notes.collect();
        if notes.is_empty() {
            return;
        }
        self.section("Notes");
        self.html.push_str("<ul class=\"note\">\n");
        for n in notes {
            let _ = writeln!(self.html, "<li>{}</li>", esc(n));
        }
        self.html.push_str("</ul>\n");
    }

    fn finish(self) -> String {
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
             <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n\
             <title>{t}</title>\n<style>{css}</style></head>\n<body>\n<h1>{t}</h1>\n<p class=\"meta\">{m}; written by {tool} {ver}. \
             Blank ({BLANK}) marks a value that was not measured, never zero.</p>\n{body}</body></html>\n",
            t = esc(&self.title),
            css = crate::chart::style::PAGE_CSS,
            m = esc(&self.meta),
            tool = bench::TOOL_NAME,
            ver = bench::TOOL_VERSION,
            body = self.html
        )
    }
}

/// A cell: blank cells are marked so that they read as not measured.
fn td(v: &str) -> String {
    td_class(v, None)
}

/// A cell of class `class` (`l`: left-aligned), or the blank cell when there is no value.
fn td_class(v: &str, class: Option<&str>) -> String {
    match class {
        _ if v == BLANK || v.is_empty() => format!("<td class=\"blank\">{BLANK}</td>"),
        Some(c) => format!("<td class=\"{c}\">{}</td>", esc(v)),
        None => format!("<td>{}</td>", esc(v)),
    }
}

fn run_page(p: &mut Page, run: &RunInput, thresholds: Option<&Thresholds>) {
    let s = &run.summary;
    p.title = format!("Run {}", s.run_id);
    p.meta = format!(
        "profile {}, {} {}, started {}",
        s.profile,
        s.target.model,
        if s.simulated { "(embedded simulator)" } else { "" },
        s.timing.started_at
    );
    p.section("Summary");
    p.html.push_str("<table class=\"overview\">\n");
    for (k, v) in overview_rows(s) {
        let _ = writeln!(
            p.html,
            "<tr><th class=\"l\">{}</th>{}</tr>",
            esc(&k),
            td_class(&v, Some("l"))
        );
    }
    p.html.push_str("</table>\n");
    p.html.push_str(&latency_table(s));
    failures(p, run);
    let measured = run.measured();
    p.section("Latency distributions");
    for (id, metric, values) in latency_samples(&measured) {
        let chart = cdf(id, metric, &[(run.name.clone(), values)], marks(s, metric, thresholds));
        p.figure(&chart);
    }
    p.section("Requests over time");
    p.figure(&figures::timeline(&measured));
    p.figure(&figures::errors_over_time(&measured));
    p.section("Server gauges");
    p.html.push_str(&server_section(s));
    for chart in figures::server_over_time(&gauge_samples(s)) {
        p.figure(&chart);
    }
    p.figure(&figures::gpu_over_time(&gpu_samples(s)));
    p.notes(run.records_note.iter().chain(&s.notes));
}

/// The latency table of a run (ms), blanks as blanks.
fn latency_table(s: &Summary) -> String {
    let mut h = String::from(
        "<table class=\"latency\"><tr><th class=\"l\">metric (ms)</th><th>count</th><th>mean</th><th>stdev</th>\
         <th>p50</th><th>p90</th><th>p95</th><th>p99</th><th>p99.9</th><th>max</th></tr>\n",
    );
    for (name, stats, blank_row) in latency_rows(s) {
        match stats {
            Some(st) => {
                let _ = write!(h, "<tr><td class=\"l\">{name}</td><td>{}</td>", st.count);
                for v in [st.mean, st.stdev, st.p50, st.p90, st.p95, st.p99, st.p999, st.max] {
                    let _ = write!(h, "<td>{v:.2}</td>");
                }
                h.push_str("</tr>\n");
            }
            None if blank_row => {
                let _ = writeln!(h, "<tr><td class=\"l\">{name}</td>{}</tr>", td(BLANK).repeat(9));
            }
            None => {}
        }
    }
    h.push_str("</table>\n");
    h
}

/// Failed requests by class with a few of their errors; a run without failures says so.
fn failures(p: &mut Page, run: &RunInput) {
    let s = &run.summary;
    p.section("Failures");
    if s.requests.failed == 0 {
        let _ = writeln!(p.html, "<p>No failed request among {} measured.</p>", s.requests.total);
        return;
    }
    p.html.push_str("<table class=\"failures\"><tr><th class=\"l\">class</th><th>requests</th><th class=\"l\">first error</th></tr>\n");
    for (class, n) in s.requests.by_class.iter().filter(|(c, _)| c.as_str() != "ok") {
        let first = run
            .records
            .iter()
            .find(|r| !r.warmup && r.class.to_string() == *class)
            .and_then(|r| r.error.clone())
            .unwrap_or_else(|| BLANK.to_string());
        let _ = writeln!(
            p.html,
            "<tr class=\"fail\"><td class=\"l\">{}</td><td>{n}</td><td class=\"l\">{}</td></tr>",
            esc(class),
            esc(&first)
        );
    }
    p.html.push_str("</table>\n");
}

/// Lines on a CDF: the run's SLO for the metric, and the gate's thresholds on it that apply
/// to the run's profile.
fn marks(s: &Summary, metric: &str, thresholds: Option<&Thresholds>) -> Vec<Mark> {
    let key = format!("{}_ms", metric.to_lowercase());
    let mut out = Vec::new();
    let slo = &s.goodput.slo;
    let v = match metric {
        "TTFT" => slo.ttft_ms,
        "TPOT" => slo.tpot_ms,
        "E2E" => slo.e2e_ms,
        _ => None,
    };
    if let Some(v) = v {
        out.push(Mark::limit(
            MarkAxis::X,
            v,
            format!("SLO {metric} <= {} ms", crate::chart::axis::label(v)),
        ));
    }
    for t in thresholds.map(|t| t.thresholds.as_slice()).unwrap_or_default() {
        let Some(stat) = t.metric.strip_prefix(&format!("metrics.{key}.")) else { continue };
        if stat == "stdev" || !t.applies_to(&s.profile) || t.unit != "ms" {
            continue;
        }
        out.push(Mark::limit(
            MarkAxis::X,
            t.limit,
            format!(
                "gate {metric} {stat} {} {} ms (ADR-{:04})",
                t.comparator,
                crate::chart::axis::label(t.limit),
                t.adr
            ),
        ));
    }
    out
}

/// The server's gauges as the run directory keeps them (`summary.server`): their statistics
/// over the window. Their time series are not kept, so no chart over time is drawn.
fn server_section(s: &Summary) -> String {
    let Some(server) = &s.server else {
        return "<p class=\"note\">Not scraped: the run has no server metrics (blank).</p>\n"
            .into();
    };
    let mut h = String::from(
        "<table class=\"server\"><tr><th class=\"l\">gauge</th><th>p50</th><th>p99</th><th>max</th></tr>\n",
    );
    for (gauge, label, decimals) in [
        (&server.running, "running requests", 1),
        (&server.waiting, "waiting requests", 1),
        (&server.kv_cache_usage, "KV cache usage (ratio)", 3),
    ] {
        let _ = write!(h, "<tr><td class=\"l\">{label}</td>");
        let stats: [fn(&GaugeStats) -> f64; 3] = [|g| g.p50, |g| g.p99, |g| g.max];
        for stat in stats {
            h.push_str(&td(&fmt_opt(gauge.as_ref().map(stat), decimals)));
        }
        h.push_str("</tr>\n");
    }
    let gpu = server.gpu.as_ref().and_then(|g| g.utilization_pct.as_ref()).map(|u| u.mean);
    let _ = writeln!(
        h,
        "<tr><td class=\"l\">GPU utilisation mean (%)</td>{}{}{}</tr>",
        td(&fmt_opt(gpu, 0)),
        td(BLANK),
        td(BLANK)
    );
    h.push_str(
        "</table>\n<p class=\"note\">Statistics over the measured window; the charts below show \
         every scrape of the run (summary.json, <code>server.samples</code>).</p>\n",
    );
    h
}

/// The server's scrapes (`summary.server.samples`): time (ms on the run clock) and running,
/// waiting and KV cache usage (null: blank).
fn gauge_samples(s: &Summary) -> Vec<(f64, [Option<f64>; 3])> {
    let samples = s.server.as_ref().map(|v| v.samples.as_slice()).unwrap_or_default();
    samples.iter().map(|v| (v.t_ms, [v.running, v.waiting, v.kv_cache_usage])).collect()
}

/// `nvidia-smi` samples of the run (`summary.server.gpu.samples`): time (ms on the run clock)
/// and the mean utilisation over the GPUs.
fn gpu_samples(s: &Summary) -> Vec<(f64, f64)> {
    let samples = s.server.as_ref().and_then(|v| v.gpu.as_ref()).map(|g| g.samples.as_slice());
    samples
        .unwrap_or_default()
        .iter()
        .filter(|v| !v.utilization_pct.is_empty())
        .map(|v| (v.t_ms, v.utilization_pct.iter().sum::<f64>() / v.utilization_pct.len() as f64))
        .collect()
}

/// CDFs of several runs overlaid (a sweep's stages, a comparison's strategies).
fn overlaid(p: &mut Page, runs: &[RunInput], thresholds: Option<&Thresholds>) {
    p.section("Latency distributions");
    let samples: Vec<(String, Samples)> =
        runs.iter().map(|r| (r.name.clone(), latency_samples(&r.measured()))).collect();
    for (k, (id, metric)) in CDFS.into_iter().enumerate() {
        let series: Vec<(String, Vec<f64>)> =
            samples.iter().map(|(n, s)| (n.clone(), s[k].2.clone())).collect();
        let m = runs.first().map(|r| marks(&r.summary, metric, thresholds)).unwrap_or_default();
        p.figure(&cdf(id, metric, &series, m));
    }
    p.section("Failures");
    p.html.push_str("<table class=\"failures\"><tr><th class=\"l\">run</th><th>measured</th><th>failed</th><th class=\"l\">by class</th></tr>\n");
    for r in runs {
        let s = &r.summary.requests;
        let classes: Vec<String> = s
            .by_class
            .iter()
            .filter(|(c, _)| c.as_str() != "ok")
            .map(|(c, n)| format!("{c} {n}"))
            .collect();
        let _ = writeln!(
            p.html,
            "<tr{}><td class=\"l\">{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
            if s.failed > 0 { " class=\"fail\"" } else { "" },
            esc(&r.name),
            s.total,
            s.failed,
            esc(&classes.join(", "))
        );
    }
    p.html.push_str("</table>\n");
}

fn sweep_table(s: &bench::sweep::SweepSummary) -> String {
    let mut h = format!(
        "<table class=\"stages\"><tr><th>{}</th><th>ok/total</th><th>req/s</th><th>output tok/s</th><th>TTFT p99 ms</th>\
         <th>TPOT p99 ms</th><th>E2E p99 ms</th><th class=\"l\">SLO</th></tr>\n",
        s.dimension.name()
    );
    for r in &s.stages {
        let knee = s.knee.as_ref().is_some_and(|k| k.stage == r.stage);
        let _ = writeln!(
            h,
            "<tr{}><td>{}{}</td><td>{}/{}</td>{}{}{}{}{}<td class=\"l\">{}</td></tr>",
            if r.failed > 0 { " class=\"fail\"" } else { "" },
            crate::chart::axis::label(r.load),
            if knee { " (knee)" } else { "" },
            r.ok,
            r.requests,
            td(&fmt_opt(r.requests_per_s, 2)),
            td(&fmt_opt(r.output_tokens_per_s, 1)),
            td(&fmt_opt(r.ttft_p99_ms, 1)),
            td(&fmt_opt(r.tpot_p99_ms, 1)),
            td(&fmt_opt(r.e2e_p99_ms, 1)),
            esc(&if r.meets_slo { "met".to_string() } else { r.violations.join("; ") })
        );
    }
    h.push_str("</table>\n");
    h
}

/// A trial set's estimates: metric, estimate [interval], trials and method, each trial's value.
fn estimates_table(index: &bench::trials::TrialsFile) -> String {
    let mut h = String::from(
        "<table class=\"estimates\"><tr><th class=\"l\">metric</th><th>estimate</th><th>interval</th>\
         <th class=\"l\">n, method</th><th class=\"l\">per trial</th></tr>\n",
    );
    for (metric, m) in &index.metrics {
        let per_trial: Vec<String> = m.per_trial.iter().map(|v| fmt_opt(*v, 3)).collect();
        let (value, interval, how) = match &m.estimate {
            Some(e) => (
                fmt_opt(Some(e.value), 3),
                format!("[{}, {}]", fmt_opt(Some(e.lo), 3), fmt_opt(Some(e.hi), 3)),
                format!(
                    "{} trials, {} requests, {}{}",
                    e.trials,
                    e.requests,
                    e.method.as_str(),
                    if e.undersampled { ", UNDERSAMPLED" } else { "" }
                ),
            ),
            None => (BLANK.to_string(), BLANK.to_string(), m.blank.clone().unwrap_or_default()),
        };
        let _ = writeln!(
            h,
            "<tr><td class=\"l\">{}</td>{}{}<td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
            esc(metric),
            td(&value),
            td(&interval.replace(&format!("[{BLANK}, {BLANK}]"), BLANK)),
            esc(&how),
            esc(&per_trial.join(", "))
        );
    }
    h.push_str("</table>\n");
    h
}

/// A tune's rows: configuration, status, trials, goodput, throughput, the P99s, SLO, fronts.
fn tune_table(t: &crate::tune::model::TuneFile) -> String {
    let mut h = String::from(
        "<table class=\"tune\"><tr><th class=\"l\">configuration</th><th class=\"l\">status</th><th>trials</th>\
         <th>goodput req/s</th><th>output tok/s</th><th>TTFT p99 ms</th><th>TPOT p99 ms</th><th>E2E p99 ms</th>\
         <th class=\"l\">SLO</th><th class=\"l\">front</th></tr>\n",
    );
    for r in &t.rows {
        let winner = t.winner.as_deref() == Some(r.name.as_str());
        let status = match &r.error {
            Some(e) => format!("{:?}: {e}", r.status).to_lowercase(),
            None => format!("{:?}", r.status).to_lowercase(),
        };
        // The row's own verdict on its SLOs, with the objectives it misses or cannot decide.
        let slo = match r.slo {
            None => BLANK.to_string(),
            Some(c) => {
                let which: Vec<&str> =
                    r.slo_misses.iter().chain(&r.slo_undecided).map(String::as_str).collect();
                if which.is_empty() {
                    c.as_str().to_string()
                } else {
                    format!("{}: {}", c.as_str(), which.join("; "))
                }
            }
        };
        let front = match (r.pareto, r.goodput_pareto) {
            (true, true) => "throughput, goodput",
            (true, false) => "throughput",
            (false, true) => "goodput",
            (false, false) => "",
        };
        let _ = writeln!(
            h,
            "<tr{}><td class=\"l\">{}{}</td><td class=\"l\">{}</td><td>{}</td>{}{}{}{}{}<td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
            if r.status == crate::tune::model::RowStatus::Failed { " class=\"fail\"" } else { "" },
            esc(&r.name),
            if winner { " (winner)" } else { "" },
            esc(&status),
            r.trials,
            td(&fmt_opt(r.goodput_rps, 3)),
            td(&fmt_opt(r.output_tokens_per_s, 1)),
            td(&fmt_opt(r.ttft_p99_ms, 1)),
            td(&fmt_opt(r.tpot_p99_ms, 1)),
            td(&fmt_opt(r.e2e_p99_ms, 1)),
            esc(&slo),
            esc(front)
        );
    }
    h.push_str("</table>\n");
    h
}

fn comparison_table(c: &bench::strategy_compare::StrategyComparison) -> String {
    let mut h = String::from(
        "<table class=\"strategies\"><tr><th class=\"l\">strategy</th><th class=\"l\">batching</th><th>ok</th><th>failed</th>\
         <th>mean TTFT ms</th><th>mean E2E ms</th><th>mean queue ms</th><th>output tok/s</th><th>cost/1M tok</th></tr>\n",
    );
    for r in &c.rows {
        let _ = writeln!(
            h,
            "<tr{}><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td>{}{}{}{}{}</tr>",
            if r.failed > 0 { " class=\"fail\"" } else { "" },
            r.strategy.as_str(),
            esc(&r.batching),
            r.ok,
            r.failed,
            td(&fmt_opt(r.mean_ttft_ms, 1)),
            td(&fmt_opt(r.mean_e2e_ms, 1)),
            td(&fmt_opt(r.mean_queue_ms, 1)),
            td(&fmt_opt(r.output_tokens_per_s, 1)),
            td(&fmt_opt(r.cost_per_1m_output_tokens, 4))
        );
    }
    h.push_str("</table>\n");
    h
}
