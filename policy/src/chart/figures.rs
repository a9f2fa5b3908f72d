//! The charts themselves, from measured values: latency CDFs (one series per run, overlaid),
//! a sweep's latency and throughput against load with the knee and the SLOs, a capacity
//! search's SLO attainment against load with the target and the bracket, a run's per-request
//! timeline and its failures by class over time.

use infergate_model::record::RequestRecord;
use infergate_model::sweep::{StageResult, SweepSummary};

use super::axis::label;
use super::{Axis, Band, Chart, Mark, MarkAxis, Series};

/// Most points drawn per CDF: quantiles at evenly spaced ranks, so a 10,000-request run's page
/// stays small; the note says when values were thinned.
pub const CDF_POINTS: usize = 400;
/// Most requests drawn in a timeline; above it every k-th request is drawn, and the note says so.
pub const TIMELINE_REQUESTS: usize = 2000;
/// Time bins of the failures-over-time chart.
pub const ERROR_BINS: usize = 30;

/// The CDF of `values`: `(value, % of values <= it)` at no more than [`CDF_POINTS`] ranks
/// (always the first and the last).
pub fn cdf_points(values: &[f64]) -> Vec<(f64, Option<f64>)> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return vec![];
    }
    let m = n.min(CDF_POINTS);
    let mut out = Vec::with_capacity(m);
    for k in 0..m {
        let i = if m == 1 { n - 1 } else { (k * (n - 1) + (m - 1) / 2) / (m - 1) };
        out.push((v[i], Some(100.0 * (i + 1) as f64 / n as f64)));
    }
    out.dedup();
    out
}

/// The latency CDFs of a run: chart id and metric.
pub const CDFS: [(&str, &str); 4] =
    [("ttft-cdf", "TTFT"), ("tpot-cdf", "TPOT"), ("itl-cdf", "ITL"), ("e2e-cdf", "E2E")];

/// Per-request latencies of one run, in the order of [`CDFS`]: chart id, metric, values (ms).
pub type Samples = [(&'static str, &'static str, Vec<f64>); 4];

/// The per-request latencies of the ok requests among `measured` (warmup already left out):
/// TTFT, TPOT, ITL (every gap) and E2E, as the summary's metrics count them.
pub fn latency_samples(measured: &[&RequestRecord]) -> Samples {
    let ok: Vec<&&RequestRecord> = measured.iter().filter(|r| r.class.is_ok()).collect();
    [
        ("ttft-cdf", "TTFT", ok.iter().filter_map(|r| r.ttft_ms()).collect()),
        ("tpot-cdf", "TPOT", ok.iter().filter_map(|r| r.tpot_ms()).collect()),
        ("itl-cdf", "ITL", ok.iter().flat_map(|r| r.itl_ms.iter().copied()).collect()),
        ("e2e-cdf", "E2E", ok.iter().filter_map(|r| r.e2e_ms()).collect()),
    ]
}

/// A latency CDF of the series named `label` (`TTFT`): one series per named sample (runs
/// overlaid), lines at `marks`.
pub fn cdf(id: &str, label: &str, samples: &[(String, Vec<f64>)], marks: Vec<Mark>) -> Chart {
    let mut chart = Chart::new(
        id,
        format!("{label}: cumulative distribution"),
        Axis::linear(format!("{label} (ms)")),
        Axis::linear("requests at or below (%)"),
    );
    let mut counts = Vec::new();
    for (i, (name, values)) in samples.iter().enumerate() {
        chart.series.push(Series::line(name.clone(), i, cdf_points(values)));
        counts.push(if samples.len() == 1 {
            format!("n = {}", values.len())
        } else {
            format!("{name}: n = {}", values.len())
        });
    }
    let mut note = counts.join(", ");
    if samples.iter().any(|s| s.1.len() > CDF_POINTS) {
        note.push_str(&format!("; drawn at {CDF_POINTS} evenly spaced ranks"));
    }
    chart.notes.push(note);
    chart.empty = format!("no {label} was measured (blank, not zero)");
    chart.marks = marks;
    chart
}

fn series_of(s: &SweepSummary, f: fn(&StageResult) -> Option<f64>) -> Vec<(f64, Option<f64>)> {
    s.stages.iter().map(|r| (r.load, f(r))).collect()
}

fn load_axis(s: &SweepSummary) -> Axis {
    let loads: Vec<f64> = s.stages.iter().map(|r| r.load).collect();
    let unit = match s.dimension {
        infergate_model::sweep::Dimension::Concurrency => "concurrent requests",
        infergate_model::sweep::Dimension::Rate => "requests/s",
    };
    let mut axis = Axis::loads(format!("{} ({unit})", s.dimension.name()), &loads);
    if axis.scale == super::Scale::Log {
        axis.title.push_str(", log scale");
    }
    axis
}

fn knee_mark(s: &SweepSummary) -> Option<Mark> {
    s.knee.as_ref().map(|k| Mark {
        axis: MarkAxis::X,
        value: k.load,
        label: format!("knee: {}={}", s.dimension.name(), label(k.load)),
        knee: true,
    })
}

fn sweep_note(s: &SweepSummary) -> String {
    let n: u64 = s.stages.iter().map(|r| r.requests).sum();
    format!("{} stages, n = {n} measured requests; each point is one stage", s.stages.len())
}

/// Latency p99 against load, the SLOs and the knee marked.
pub fn sweep_latency(s: &SweepSummary) -> Chart {
    let mut chart = Chart::new(
        "sweep-latency",
        "Latency p99 against load",
        load_axis(s),
        Axis::linear("p99 latency (ms)"),
    );
    let mut lines = vec![
        ("TTFT p99", series_of(s, |r| r.ttft_p99_ms)),
        ("TPOT p99", series_of(s, |r| r.tpot_p99_ms)),
    ];
    if s.stages.iter().any(|r| r.e2e_p99_ms.is_some()) || s.slo.e2e_ms.is_some() {
        lines.push(("E2E p99", series_of(s, |r| r.e2e_p99_ms)));
    }
    for (i, (name, pts)) in lines.into_iter().enumerate() {
        let mut series = Series::line(name, i, pts);
        series.markers = true;
        chart.series.push(series);
    }
    for (name, v) in [("TTFT", s.slo.ttft_ms), ("TPOT", s.slo.tpot_ms), ("E2E", s.slo.e2e_ms)] {
        if let Some(v) = v {
            chart.marks.push(Mark::limit(
                MarkAxis::Y,
                v,
                format!("SLO {name} p99 <= {} ms", label(v)),
            ));
        }
    }
    chart.marks.extend(knee_mark(s));
    chart.notes.push(sweep_note(s));
    chart
}

/// Output throughput (and requests per second) against load, the knee marked.
pub fn sweep_throughput(s: &SweepSummary) -> Chart {
    let mut chart = Chart::new(
        "sweep-throughput",
        "Output throughput against load",
        load_axis(s),
        Axis::linear("output throughput (tokens/s)"),
    );
    let mut series = Series::line("output tok/s", 0, series_of(s, |r| r.output_tokens_per_s));
    series.markers = true;
    chart.series.push(series);
    chart.marks.extend(knee_mark(s));
    chart.notes.push(sweep_note(s));
    chart
}

/// GPU utilisation against load, when any stage sampled it.
pub fn sweep_gpu(s: &SweepSummary) -> Option<Chart> {
    if s.stages.iter().all(|r| r.gpu_utilization_pct.is_none()) {
        return None;
    }
    let mut chart = Chart::new(
        "sweep-gpu",
        "GPU utilisation against load (nvidia-smi, mean over the window)",
        load_axis(s),
        Axis::linear("GPU utilisation (%)"),
    );
    let mut series = Series::line("GPU util", 0, series_of(s, |r| r.gpu_utilization_pct));
    series.markers = true;
    chart.series.push(series);
    chart.marks.extend(knee_mark(s));
    chart.notes.push(sweep_note(s));
    Some(chart)
}

/// The charts of a sweep, stacked into one SVG document (`sweep.svg`).
pub fn sweep_svg(s: &SweepSummary) -> String {
    let charts: Vec<Chart> = [Some(sweep_throughput(s)), Some(sweep_latency(s)), sweep_gpu(s)]
        .into_iter()
        .flatten()
        .collect();
    stack(&charts)
}

/// A capacity search's SLO attainment against load: each probe's attainment with its interval
/// over trials, coloured by its verdict, the target as a line and the bracket shaded between
/// the highest load decided pass and the lowest decided fail. A probe without an interval (an
/// over-saturated trial, an open probe) is drawn at its trials' mean where they measured one.
pub fn capacity_attainment(f: &infergate_model::capacity::CapacityFile) -> Chart {
    use infergate_model::capacity::Dimension;
    use infergate_model::stats::Verdict;
    let dim = f.search.spec.dimension;
    let unit = match dim {
        Dimension::Concurrency => "concurrent requests",
        Dimension::Rate => "requests/s",
    };
    let mut loads: Vec<f64> = f.search.probes.iter().map(|p| p.load).collect();
    loads.sort_by(f64::total_cmp);
    loads.dedup();
    let mut x = Axis::loads(format!("{} ({unit})", dim.name()), &loads);
    if x.scale == super::Scale::Log {
        x.title.push_str(", log scale");
    }
    let y = Axis { include: vec![1.0], ..Axis::linear("SLO attainment (share of requests)") };
    let mut chart = Chart::new("capacity-attainment", "SLO attainment against load", x, y);
    let groups = [
        ("pass", Some(Verdict::Pass), 2),
        ("fail", Some(Verdict::Fail), 3),
        ("inconclusive", Some(Verdict::Inconclusive), 1),
        ("open", None, 7),
    ];
    for (name, verdict, color) in groups {
        let mut probes: Vec<_> = f.search.probes.iter().filter(|p| p.verdict == verdict).collect();
        if probes.is_empty() {
            continue;
        }
        probes.sort_by(|a, b| a.load.total_cmp(&b.load));
        let point = |p: &infergate_model::capacity::Probe| {
            p.attainment.as_ref().map(|e| e.value).or_else(|| {
                let v: Vec<f64> = p.trials.iter().filter_map(|t| t.attainment).collect();
                (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
            })
        };
        let mut series =
            Series::line(name, color, probes.iter().map(|p| (p.load, point(p))).collect());
        series.scatter = true;
        series.intervals = probes
            .iter()
            .filter_map(|p| p.attainment.as_ref().map(|e| (p.load, e.lo, e.hi)))
            .collect();
        chart.series.push(series);
    }
    let target = f.search.spec.target;
    chart.marks.push(Mark::limit(MarkAxis::Y, target, format!("target {}", label(target))));
    let b = &f.bracket;
    match (b.pass, b.fail) {
        (Some(pass), Some(fail)) => {
            chart.bands.push(Band { from: pass, to: fail, label: format!("capacity {}", b.text()) })
        }
        (pass, fail) => {
            for (v, what) in [(pass, "highest pass"), (fail, "lowest fail")] {
                if let Some(v) = v {
                    chart.marks.push(Mark {
                        axis: MarkAxis::X,
                        value: v,
                        label: format!("{what}: {}={}", dim.name(), label(v)),
                        knee: true,
                    });
                }
            }
        }
    }
    let over = f.search.probes.iter().filter(|p| p.binding.as_deref() == Some("oversaturated"));
    let over: Vec<String> = over.map(|p| label(p.load)).collect();
    let trials: usize = f.search.probes.iter().map(|p| p.trials.len()).sum();
    let mut note = format!(
        "{} probes, {trials} trials; each point is a probe's attainment, the bar its \
         confidence interval over trials",
        f.search.probes.len()
    );
    if !over.is_empty() {
        note.push_str(&format!("; over-saturated at {}", over.join(", ")));
    }
    chart.notes.push(note);
    chart.empty = "no probe measured an SLO attainment (blank, not zero)".into();
    chart
}

/// Charts one above the other in one SVG document.
pub fn stack(charts: &[Chart]) -> String {
    let mut y = 0.0;
    let mut body = String::new();
    for chart in charts {
        let svg = super::render(chart);
        let h = svg_height(&svg);
        body.push_str(&svg.replacen("<svg ", &format!("<svg y=\"{y}\" "), 1));
        y += h;
    }
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{y}\" viewBox=\"0 0 {w} {y}\">\n{body}</svg>\n",
        w = super::style::WIDTH
    )
}

fn svg_height(svg: &str) -> f64 {
    svg.split("height=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .and_then(|h| h.parse().ok())
        .unwrap_or(super::style::HEIGHT)
}

/// Every k-th of `n` requests so that at most [`TIMELINE_REQUESTS`] are drawn.
pub fn timeline_stride(n: usize) -> usize {
    n.div_ceil(TIMELINE_REQUESTS).max(1)
}

/// `2nd`, `3rd`, `5th`, `11th`, `21st`.
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// One row per measured request (by intended send time): waiting to be sent (intended to
/// sent), waiting for the first token (sent to first token) and decoding (first to last
/// token). Sampled above [`TIMELINE_REQUESTS`] requests.
pub fn timeline(records: &[&RequestRecord]) -> Chart {
    let mut chart = Chart::new(
        "timeline",
        "Per-request timeline",
        Axis::linear("time since the run started (s)"),
        Axis::linear("request (in intended send order)"),
    );
    let mut sorted: Vec<&RequestRecord> = records.to_vec();
    sorted.sort_by(|a, b| a.intended_ms.total_cmp(&b.intended_ms).then(a.id.cmp(&b.id)));
    let stride = timeline_stride(sorted.len());
    let (mut wait, mut first, mut decode, mut failed) = (vec![], vec![], vec![], vec![]);
    let s = |ms: f64| ms / 1000.0;
    for (row, r) in sorted.iter().enumerate().step_by(stride) {
        let y = row as f64;
        let sent = r.sent_ms.unwrap_or(r.end_ms);
        wait.push((y, s(r.intended_ms), s(sent)));
        match (r.first_token_ms, r.class.is_ok()) {
            (Some(ft), true) => {
                first.push((y, s(sent), s(ft)));
                decode.push((y, s(ft), s(r.last_token_ms.unwrap_or(r.end_ms))));
            }
            (None, true) => first.push((y, s(sent), s(r.end_ms))),
            (_, false) => failed.push((y, s(sent), s(r.end_ms))),
        }
    }
    chart.series = vec![
        Series::spans("waiting to be sent", 5, wait),
        Series::spans("to first token", 1, first),
        Series::spans("decoding", 0, decode),
        Series::spans("failed (sent to end)", 3, failed),
    ];
    chart.notes.push(if stride > 1 {
        format!(
            "n = {} measured requests; every {} drawn ({} rows)",
            sorted.len(),
            ordinal(stride),
            sorted.len().div_ceil(stride)
        )
    } else {
        format!("n = {} measured requests, each drawn", sorted.len())
    });
    chart.empty = "no measured request (blank)".into();
    chart
}

/// Failed requests by outcome class over time (by when they ended), in [`ERROR_BINS`] bins
/// over the run; a run without failures says so.
pub fn errors_over_time(records: &[&RequestRecord]) -> Chart {
    let mut chart = Chart::new(
        "errors",
        "Failed requests by class over time",
        Axis::linear("time since the run started (s)"),
        Axis::linear("failed requests per bin (count)"),
    );
    let failed: Vec<&&RequestRecord> = records.iter().filter(|r| !r.class.is_ok()).collect();
    let start = records.iter().map(|r| r.intended_ms).fold(f64::INFINITY, f64::min);
    let end = records.iter().map(|r| r.end_ms).fold(f64::NEG_INFINITY, f64::max);
    let mut classes: Vec<String> = failed.iter().map(|r| r.class.to_string()).collect();
    classes.sort();
    classes.dedup();
    if failed.is_empty() || end <= start {
        chart.empty = format!("no failed request among {} measured", records.len());
        chart.notes.push(format!("n = {} measured requests, 0 failed", records.len()));
        return chart;
    }
    let width = (end - start) / ERROR_BINS as f64;
    for (i, class) in classes.iter().enumerate() {
        let mut bins = vec![0u64; ERROR_BINS];
        for r in failed.iter().filter(|r| &r.class.to_string() == class) {
            let b = (((r.end_ms - start) / width) as usize).min(ERROR_BINS - 1);
            bins[b] += 1;
        }
        let pts = bins
            .iter()
            .enumerate()
            .map(|(b, n)| ((start + (b as f64 + 0.5) * width) / 1000.0, Some(*n as f64)))
            .collect();
        let mut series = Series::line(class.clone(), i + 3, pts);
        series.markers = true;
        chart.series.push(series);
    }
    chart.notes.push(format!(
        "n = {} measured requests, {} failed; bins of {} s",
        records.len(),
        failed.len(),
        label(width / 1000.0)
    ));
    chart
}

/// GPU utilisation over time from `nvidia-smi` samples `(t_ms, mean % over the GPUs)`.
pub fn gpu_over_time(samples: &[(f64, f64)]) -> Chart {
    let mut chart = Chart::new(
        "gpu",
        "GPU utilisation over time (nvidia-smi)",
        Axis::linear("time since the run started (s)"),
        Axis::linear("GPU utilisation, mean over GPUs (%)"),
    );
    let pts = samples.iter().map(|(t, u)| (t / 1000.0, Some(*u))).collect();
    chart.series.push(Series::line("GPU util", 0, pts));
    chart.notes.push(format!("n = {} samples", samples.len()));
    chart.empty = "not sampled: nvidia-smi was not available (blank)".into();
    chart
}

/// The server's gauges over time from its scrapes (`summary.server.samples`: time in ms and
/// running, waiting, KV cache usage as a ratio): requests running and waiting, and KV cache usage
/// in percent. A failed scrape, or a gauge the server does not expose, is a blank.
pub fn server_over_time(samples: &[(f64, [Option<f64>; 3])]) -> [Chart; 2] {
    let t = Axis::linear("time since the run started (s)");
    let mut queue = Chart::new(
        "server-queue",
        "Server: requests running and waiting (scraped)",
        t.clone(),
        Axis::linear("requests (count)"),
    );
    let mut kv = Chart::new(
        "server-kv",
        "Server: KV cache usage (scraped)",
        t,
        Axis::linear("KV cache usage (%)"),
    );
    let series = |k: usize, scale: f64| {
        samples.iter().map(|(t, g)| (t / 1000.0, g[k].map(|v| v * scale))).collect()
    };
    queue.series.push(Series::line("running", 0, series(0, 1.0)));
    queue.series.push(Series::line("waiting", 1, series(1, 1.0)));
    kv.series.push(Series::line("KV cache usage", 2, series(2, 100.0)));
    for c in [&mut queue, &mut kv] {
        c.notes.push(format!(
            "n = {} scrapes of the server's /metrics, the whole run (warmup included)",
            samples.len()
        ));
        c.empty = "not scraped, or not exposed by the server (blank)".into();
    }
    [queue, kv]
}

/// One configuration of a tune on the Pareto charts.
#[derive(Clone, Debug, PartialEq)]
pub struct ParetoPoint {
    pub name: String,
    pub ttft_p99_ms: Option<f64>,
    /// Output tokens per second.
    pub throughput: Option<f64>,
    /// Requests per second that met every SLO.
    pub goodput: Option<f64>,
    /// On the front of throughput against TTFT P99.
    pub pareto: bool,
    /// On the front of goodput against TTFT P99.
    pub goodput_pareto: bool,
    pub winner: bool,
}

/// A tune's configurations as dots of `y` against TTFT P99, the front as a line through its
/// configurations (by TTFT P99), the winner as its own dot.
pub fn pareto(
    id: &str,
    title: &str,
    y_title: &str,
    points: &[ParetoPoint],
    y: impl Fn(&ParetoPoint) -> Option<f64>,
    on_front: impl Fn(&ParetoPoint) -> bool,
) -> Chart {
    let mut chart = Chart::new(id, title, Axis::linear("TTFT P99 (ms)"), Axis::linear(y_title));
    let drawn: Vec<&ParetoPoint> = points.iter().filter(|p| p.ttft_p99_ms.is_some()).collect();
    let mut all = Series::line(
        "configurations",
        1,
        drawn.iter().map(|p| (p.ttft_p99_ms.unwrap_or_default(), y(p))).collect(),
    );
    all.scatter = true;
    let mut front: Vec<(f64, Option<f64>)> = drawn
        .iter()
        .filter(|p| on_front(p))
        .map(|p| (p.ttft_p99_ms.unwrap_or_default(), y(p)))
        .collect();
    front.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut front = Series::line("Pareto front", 0, front);
    front.markers = true;
    chart.series.push(front);
    chart.series.push(all);
    let winner: Vec<(f64, Option<f64>)> = drawn
        .iter()
        .filter(|p| p.winner)
        .map(|p| (p.ttft_p99_ms.unwrap_or_default(), y(p)))
        .collect();
    if !winner.is_empty() {
        let mut w = Series::line("winner", 2, winner);
        w.scatter = true;
        chart.series.push(w);
    }
    chart.notes.push(format!(
        "{} configurations measured, each one point; the front: no other configuration has \
         a lower TTFT P99 and a higher value at once",
        points.len()
    ));
    chart
}

/// `pareto.svg` of a tune: throughput and goodput against TTFT P99, one above the other.
pub fn pareto_svg(points: &[ParetoPoint]) -> String {
    stack(&[
        pareto(
            "pareto-throughput",
            "Output throughput against TTFT P99",
            "output throughput (tokens/s)",
            points,
            |p| p.throughput,
            |p| p.pareto,
        ),
        pareto(
            "pareto-goodput",
            "Goodput against TTFT P99",
            "goodput (requests/s within every SLO)",
            points,
            |p| p.goodput,
            |p| p.goodput_pareto,
        ),
    ])
}
