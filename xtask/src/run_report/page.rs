//! `report.html`: one self-contained page (inline CSS and SVG, no script, no network: its
//! Content-Security-Policy forbids every fetch) per run, trial set, sweep, capacity search,
//! strategy comparison or tune. This module builds the page's view (`Page`: headings, tables of rows and cells,
//! figures, paragraphs, notes) from what the run directory holds; `page.html` renders it
//! (`crate::template`).

use infergate_model::Summary;
use infergate_model::server_metrics::GaugeStats;
use serde::Serialize;

use super::console::{latency_rows, overview_rows};
use super::input::{Input, RunInput};
use crate::chart::figures::{self, CDFS, Samples, cdf, latency_samples};
use crate::chart::{Chart, Mark, MarkAxis, render};
use crate::text::{BLANK, fmt_opt};
use crate::thresholds::Thresholds;

/// The page for `input`; `thresholds` (gate.toml) draws the limits that gate its runs.
pub(crate) fn render_page(
    input: &Input,
    thresholds: Option<&Thresholds>,
) -> anyhow::Result<String> {
    let mut p = Page::default();
    match input {
        Input::Run(run) => run_page(&mut p, run, thresholds),
        Input::Sweep { sweep, stages, notes, .. } => {
            p.title = format!("Sweep {}", sweep.sweep_id);
            p.meta = format!("{} stages of {}", sweep.stages.len(), sweep.dimension.name());
            p.section("Stages");
            p.table("stages", sweep_table(sweep));
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
        Input::Capacity { capacity, trials, notes, .. } => {
            capacity_page(&mut p, capacity, trials, notes, thresholds);
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
            p.section("Configurations");
            p.table("tune", tune_table(tune));
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
            p.section("Estimates");
            p.table("estimates", estimates_table(index));
            overlaid(&mut p, trials, thresholds);
            p.notes(notes.iter());
        }
        Input::Comparison { comparison, runs, notes, .. } => {
            p.title = format!("Batching strategies: profile {}", comparison.profile);
            p.meta = format!("engine config {}", comparison.engine_config);
            p.section("Strategies");
            p.table("strategies", comparison_table(comparison));
            overlaid(&mut p, runs, thresholds);
            p.notes(notes.iter().chain(&comparison.notes));
        }
    }
    p.finish()
}

/// The page's view: what `page.html` renders. Every value in it is text already formatted
/// (numbers to their decimals, blanks as the blank mark); the template adds only markup.
#[derive(Default, Serialize)]
struct Page {
    title: String,
    meta: String,
    blocks: Vec<Block>,
}

/// One part of the page's body, in order.
#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Block {
    Heading {
        text: String,
    },
    Table {
        class: &'static str,
        rows: Vec<Row>,
    },
    /// A chart's SVG, which the project drew itself (its texts escaped by the chart).
    Figure {
        svg: String,
    },
    Paragraph {
        class: &'static str,
        spans: Vec<Span>,
    },
    Notes {
        items: Vec<String>,
    },
}

#[derive(Serialize)]
struct Row {
    fail: bool,
    cells: Vec<Cell>,
}

impl Row {
    fn new(cells: Vec<Cell>) -> Row {
        Row { fail: false, cells }
    }

    /// A header row: every cell a `th`, left-aligned where `left` says.
    fn head(cells: &[(&str, bool)]) -> Row {
        let cells = cells
            .iter()
            .map(|(t, left)| Cell {
                tag: "th",
                class: if *left { "l" } else { "" },
                text: t.to_string(),
            })
            .collect();
        Row::new(cells)
    }

    fn failed(mut self, fail: bool) -> Row {
        self.fail = fail;
        self
    }
}

#[derive(Serialize)]
struct Cell {
    tag: &'static str,
    class: &'static str,
    text: String,
}

impl Cell {
    /// A measured value (right-aligned); a value not measured is the blank cell.
    fn value(v: &str) -> Cell {
        Cell::measured(v, "")
    }

    /// A measured value, left-aligned; blank as [`Cell::value`].
    fn value_left(v: &str) -> Cell {
        Cell::measured(v, "l")
    }

    fn measured(v: &str, class: &'static str) -> Cell {
        if v == BLANK || v.is_empty() {
            Cell { tag: "td", class: "blank", text: BLANK.to_string() }
        } else {
            Cell { tag: "td", class, text: v.to_string() }
        }
    }

    /// Text that is never a measurement (a name, a list that may be empty), left-aligned.
    fn text(v: impl Into<String>) -> Cell {
        Cell { tag: "td", class: "l", text: v.into() }
    }

    /// Text that is never a measurement, right-aligned.
    fn plain(v: impl Into<String>) -> Cell {
        Cell { tag: "td", class: "", text: v.into() }
    }

    /// A row's own header cell, left-aligned.
    fn row_head(v: impl Into<String>) -> Cell {
        Cell { tag: "th", class: "l", text: v.into() }
    }
}

#[derive(Serialize)]
struct Span {
    text: String,
    code: bool,
}

impl Span {
    fn text(t: impl Into<String>) -> Span {
        Span { text: t.into(), code: false }
    }

    fn code(t: impl Into<String>) -> Span {
        Span { text: t.into(), code: true }
    }
}

/// What the template receives: the page and the facts every page states.
#[derive(Serialize)]
struct PageView<'a> {
    #[serde(flatten)]
    page: &'a Page,
    tool: &'static str,
    version: &'static str,
    blank: &'static str,
    css: &'static str,
}

impl Page {
    fn section(&mut self, title: &str) {
        self.blocks.push(Block::Heading { text: title.to_string() });
    }

    fn table(&mut self, class: &'static str, rows: Vec<Row>) {
        self.blocks.push(Block::Table { class, rows });
    }

    fn paragraph(&mut self, class: &'static str, spans: Vec<Span>) {
        self.blocks.push(Block::Paragraph { class, spans });
    }

    fn figure(&mut self, chart: &Chart) {
        self.blocks.push(Block::Figure { svg: render(chart) });
    }

    fn notes<'a>(&mut self, notes: impl Iterator<Item = &'a String>) {
        let items: Vec<String> = notes.cloned().collect();
        if items.is_empty() {
            return;
        }
        self.section("Notes");
        self.blocks.push(Block::Notes { items });
    }

    fn finish(self) -> anyhow::Result<String> {
        let view = PageView {
            page: &self,
            tool: infergate_model::TOOL_NAME,
            version: infergate_model::TOOL_VERSION,
            blank: BLANK,
            css: crate::chart::style::PAGE_CSS,
        };
        crate::template::render(crate::template::PAGE, &view)
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
    let overview = overview_rows(s)
        .into_iter()
        .map(|(k, v)| Row::new(vec![Cell::row_head(k), Cell::value_left(&v)]));
    p.table("overview", overview.collect());
    p.table("latency", latency_table(s));
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
    server_section(p, s);
    for chart in figures::server_over_time(&gauge_samples(s)) {
        p.figure(&chart);
    }
    p.figure(&figures::gpu_over_time(&gpu_samples(s)));
    served_section(p, s);
    p.notes(run.records_note.iter().chain(&s.notes));
}

/// What the engine said it runs (`engine.served`) beside its engine config file's values, a
/// key the two contradict marked failed.
fn served_section(p: &mut Page, s: &Summary) {
    let Some(e) = &s.engine else { return };
    p.section("Served configuration");
    if e.served.is_empty() {
        let text = "Not revealed: the engine answered none of the configuration endpoints \
                    (docs/deployments.md).";
        p.paragraph("note", vec![Span::text(text)]);
        return;
    }
    let file = infergate_model::summary::flatten_params(&e.params);
    let file_head = format!("{} says", e.file);
    let head =
        [("key", true), (file_head.as_str(), true), ("server says", true), ("read from", true)];
    let mut rows = vec![Row::head(&head)];
    for v in &e.served {
        let config = file.get(v.key.as_str()).map(infergate_model::served::show);
        let differs = e.mismatches.iter().any(|m| m.key == v.key);
        rows.push(
            Row::new(vec![
                Cell::row_head(v.key.to_string()),
                Cell::value_left(config.as_deref().unwrap_or(BLANK)),
                Cell::text(infergate_model::served::show(&v.value)),
                Cell::text(v.source.clone()),
            ])
            .failed(differs),
        );
    }
    p.table("served", rows);
    if !e.mismatches.is_empty() {
        let text = format!(
            "The server runs another configuration than {}: {} (a gate does not pass this run).",
            e.file,
            e.mismatches.iter().map(|m| m.key.as_str()).collect::<Vec<_>>().join(", ")
        );
        p.paragraph("note", vec![Span::text(text)]);
    }
}

/// The latency table of a run (ms), blanks as blanks.
fn latency_table(s: &Summary) -> Vec<Row> {
    let head =
        ["metric (ms)", "count", "mean", "stdev", "p50", "p90", "p95", "p99", "p99.9", "max"];
    let head: Vec<(&str, bool)> = head.iter().enumerate().map(|(i, h)| (*h, i == 0)).collect();
    let mut rows = vec![Row::head(&head)];
    for (name, stats, blank_row) in latency_rows(s) {
        let mut cells = vec![Cell::text(name)];
        match stats {
            Some(st) => {
                cells.push(Cell::plain(st.count.to_string()));
                for v in [st.mean, st.stdev, st.p50, st.p90, st.p95, st.p99, st.p999, st.max] {
                    // NaN: a statistic the tool of an imported run did not report.
                    let text = if v.is_nan() { BLANK.to_string() } else { format!("{v:.2}") };
                    cells.push(Cell::value(&text));
                }
            }
            None if blank_row => cells.extend((0..9).map(|_| Cell::value(BLANK))),
            None => continue,
        }
        rows.push(Row::new(cells));
    }
    rows
}

/// Failed requests by class with a few of their errors; a run without failures says so.
fn failures(p: &mut Page, run: &RunInput) {
    let s = &run.summary;
    p.section("Failures");
    if s.requests.failed == 0 {
        let text = format!("No failed request among {} measured.", s.requests.total);
        p.paragraph("", vec![Span::text(text)]);
        return;
    }
    let mut rows = vec![Row::head(&[("class", true), ("requests", false), ("first error", true)])];
    for (class, n) in s.requests.by_class.iter().filter(|(c, _)| c.as_str() != "ok") {
        let first = run
            .records
            .iter()
            .find(|r| !r.warmup && r.class.to_string() == *class)
            .and_then(|r| r.error.clone())
            .unwrap_or_else(|| BLANK.to_string());
        let cells = vec![Cell::text(class), Cell::plain(n.to_string()), Cell::value_left(&first)];
        rows.push(Row::new(cells).failed(true));
    }
    p.table("failures", rows);
}

/// Lines on a CDF: the run's SLO for the metric, and the gate's thresholds on it that apply
/// to the run's profile and environment.
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
    let env = infergate_model::envkey::EnvironmentKey::of(s);
    let applying =
        thresholds.map(|t| crate::thresholds::evaluate::select(t, &s.profile, Some(&env)).applying);
    for t in applying.unwrap_or_default() {
        let infergate_model::metric::Reading::Latency { series, stat, plateau: false } =
            t.metric.reading()
        else {
            continue;
        };
        let stat = stat.key();
        if series.key() != key || stat == "stdev" || t.unit != "ms" {
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
fn server_section(p: &mut Page, s: &Summary) {
    let Some(server) = &s.server else {
        let text = "Not scraped: the run has no server metrics (blank).";
        p.paragraph("note", vec![Span::text(text)]);
        return;
    };
    let head = [("gauge", true), ("p50", false), ("p99", false), ("max", false)];
    let mut rows = vec![Row::head(&head)];
    for (gauge, label, decimals) in [
        (&server.running, "running requests", 1),
        (&server.waiting, "waiting requests", 1),
        (&server.kv_cache_usage, "KV cache usage (ratio)", 3),
    ] {
        let mut cells = vec![Cell::text(label)];
        let stats: [fn(&GaugeStats) -> f64; 3] = [|g| g.p50, |g| g.p99, |g| g.max];
        for stat in stats {
            cells.push(Cell::value(&fmt_opt(gauge.as_ref().map(stat), decimals)));
        }
        rows.push(Row::new(cells));
    }
    let gpu = server.gpu.as_ref().and_then(|g| g.utilization_pct.as_ref()).map(|u| u.mean);
    rows.push(Row::new(vec![
        Cell::text("GPU utilisation mean (%)"),
        Cell::value(&fmt_opt(gpu, 0)),
        Cell::value(BLANK),
        Cell::value(BLANK),
    ]));
    p.table("server", rows);
    let spans = vec![
        Span::text(
            "Statistics over the measured window; the charts below show every scrape of the run \
             (summary.json, ",
        ),
        Span::code("server.samples"),
        Span::text(")."),
    ];
    p.paragraph("note", spans);
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
    let head = [("run", true), ("measured", false), ("failed", false), ("by class", true)];
    let mut rows = vec![Row::head(&head)];
    for r in runs {
        let s = &r.summary.requests;
        let classes: Vec<String> = s
            .by_class
            .iter()
            .filter(|(c, _)| c.as_str() != "ok")
            .map(|(c, n)| format!("{c} {n}"))
            .collect();
        let cells = vec![
            Cell::text(r.name.clone()),
            Cell::plain(s.total.to_string()),
            Cell::plain(s.failed.to_string()),
            Cell::text(classes.join(", ")),
        ];
        rows.push(Row::new(cells).failed(s.failed > 0));
    }
    p.table("failures", rows);
}

/// A capacity search: the bracket in the header, the probes, the attainment against load, the
/// latency distributions of the trials at the bracket's ends.
fn capacity_page(
    p: &mut Page,
    f: &infergate_model::capacity::CapacityFile,
    trials: &[RunInput],
    notes: &[String],
    thresholds: Option<&Thresholds>,
) {
    let s = &f.search;
    let dim = s.spec.dimension.name();
    p.title = format!("Capacity under the SLO: profile {}", f.profile);
    p.meta = format!(
        "{dim} {}; SLO attainment >= {}; binding objective {}; {}; {} trials, {} requests",
        f.bracket.text(),
        infergate_model::stats::sig_text(s.spec.target),
        f.binding.as_deref().unwrap_or(BLANK),
        s.stop.map(|r| r.words()).unwrap_or("not finished"),
        s.trials,
        s.spent_requests
    );
    p.section("Probes");
    p.table("capacity", capacity_table(f));
    p.section("SLO attainment against load");
    p.figure(&figures::capacity_attainment(f));
    if !trials.is_empty() {
        overlaid(p, trials, thresholds);
    }
    p.notes(notes.iter().chain(&f.notes));
}

/// One row per probe, in the order measured: load, trials, attainment [interval], verdict,
/// binding objective, reason.
fn capacity_table(f: &infergate_model::capacity::CapacityFile) -> Vec<Row> {
    use infergate_model::stats::Verdict;
    let head = [
        (f.search.spec.dimension.name(), false),
        ("trials", false),
        ("attainment", false),
        ("verdict", true),
        ("binding", true),
        ("reason", true),
    ];
    let mut rows = vec![Row::head(&head)];
    for p in &f.search.probes {
        let att = p.attainment.as_ref().map(|e| e.interval().to_string()).unwrap_or_default();
        let verdict = match p.verdict {
            Some(Verdict::Pass) => "pass",
            Some(Verdict::Fail) => "fail",
            Some(Verdict::Inconclusive) => "inconclusive",
            None => "open",
        };
        let cells = vec![
            Cell::plain(crate::chart::axis::label(p.load)),
            Cell::plain(p.trials.len().to_string()),
            Cell::value(&att),
            Cell::text(verdict),
            Cell::text(p.binding.clone().unwrap_or_default()),
            Cell::text(p.reason.clone().unwrap_or_default()),
        ];
        rows.push(Row::new(cells).failed(p.verdict == Some(Verdict::Fail)));
    }
    rows
}

fn sweep_table(s: &infergate_model::sweep::SweepSummary) -> Vec<Row> {
    let head = [
        (s.dimension.name(), false),
        ("ok/total", false),
        ("req/s", false),
        ("output tok/s", false),
        ("TTFT p99 ms", false),
        ("TPOT p99 ms", false),
        ("E2E p99 ms", false),
        ("SLO", true),
    ];
    let mut rows = vec![Row::head(&head)];
    for r in &s.stages {
        let knee = s.knee.as_ref().is_some_and(|k| k.stage == r.stage);
        let load = crate::chart::axis::label(r.load);
        let slo = if r.meets_slo { "met".to_string() } else { r.violations.join("; ") };
        let cells = vec![
            Cell::plain(format!("{load}{}", if knee { " (knee)" } else { "" })),
            Cell::plain(format!("{}/{}", r.ok, r.requests)),
            Cell::value(&fmt_opt(r.requests_per_s, 2)),
            Cell::value(&fmt_opt(r.output_tokens_per_s, 1)),
            Cell::value(&fmt_opt(r.ttft_p99_ms, 1)),
            Cell::value(&fmt_opt(r.tpot_p99_ms, 1)),
            Cell::value(&fmt_opt(r.e2e_p99_ms, 1)),
            Cell::text(slo),
        ];
        rows.push(Row::new(cells).failed(r.failed > 0));
    }
    rows
}

/// A trial set's estimates: metric, estimate [interval], trials and method, each trial's value.
fn estimates_table(index: &infergate_model::trials::TrialsFile) -> Vec<Row> {
    let head = [
        ("metric", true),
        ("estimate", false),
        ("interval", false),
        ("n, method", true),
        ("per trial", true),
    ];
    let mut rows = vec![Row::head(&head)];
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
        let interval = interval.replace(&format!("[{BLANK}, {BLANK}]"), BLANK);
        rows.push(Row::new(vec![
            Cell::text(metric.clone()),
            Cell::value(&value),
            Cell::value(&interval),
            Cell::text(how),
            Cell::text(per_trial.join(", ")),
        ]));
    }
    rows
}

/// A tune's rows: configuration, status, trials, goodput, throughput, the P99s, SLO, fronts.
fn tune_table(t: &infergate_policy::tune::model::TuneFile) -> Vec<Row> {
    let head = [
        ("configuration", true),
        ("status", true),
        ("trials", false),
        ("goodput req/s", false),
        ("output tok/s", false),
        ("TTFT p99 ms", false),
        ("TPOT p99 ms", false),
        ("E2E p99 ms", false),
        ("SLO", true),
        ("front", true),
    ];
    let mut rows = vec![Row::head(&head)];
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
        let cells = vec![
            Cell::text(format!("{}{}", r.name, if winner { " (winner)" } else { "" })),
            Cell::text(status),
            Cell::plain(r.trials.to_string()),
            Cell::value(&fmt_opt(r.goodput_rps, 3)),
            Cell::value(&fmt_opt(r.output_tokens_per_s, 1)),
            Cell::value(&fmt_opt(r.ttft_p99_ms, 1)),
            Cell::value(&fmt_opt(r.tpot_p99_ms, 1)),
            Cell::value(&fmt_opt(r.e2e_p99_ms, 1)),
            Cell::value_left(&slo),
            Cell::text(front),
        ];
        rows.push(
            Row::new(cells).failed(r.status == infergate_policy::tune::model::RowStatus::Failed),
        );
    }
    rows
}

fn comparison_table(c: &infergate_model::strategy_compare::StrategyComparison) -> Vec<Row> {
    let head = [
        ("strategy", true),
        ("batching", true),
        ("ok", false),
        ("failed", false),
        ("mean TTFT ms", false),
        ("mean E2E ms", false),
        ("mean queue ms", false),
        ("output tok/s", false),
        ("cost/1M tok", false),
    ];
    let mut rows = vec![Row::head(&head)];
    for r in &c.rows {
        let cells = vec![
            Cell::text(r.strategy.as_str()),
            Cell::text(r.batching.clone()),
            Cell::plain(r.ok.to_string()),
            Cell::plain(r.failed.to_string()),
            Cell::value(&fmt_opt(r.mean_ttft_ms, 1)),
            Cell::value(&fmt_opt(r.mean_e2e_ms, 1)),
            Cell::value(&fmt_opt(r.mean_queue_ms, 1)),
            Cell::value(&fmt_opt(r.output_tokens_per_s, 1)),
            Cell::value(&fmt_opt(r.cost_per_1m_output_tokens, 4)),
        ];
        rows.push(Row::new(cells).failed(r.failed > 0));
    }
    rows
}
