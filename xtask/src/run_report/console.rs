//! Console tables of a run's summary, and the rows they share with `report.html`.

use infergate_model::Summary;
use infergate_model::metrics::Stats;
use infergate_model::server_metrics::GaugeStats;

use crate::console::ConsoleTable;
use crate::text::{BLANK, fmt_opt};

/// The latency table: one row per metric.
pub fn latency_table(s: &Summary) -> ConsoleTable {
    let mut t = ConsoleTable::framed([
        "metric (ms)",
        "count",
        "mean",
        "stdev",
        "p50",
        "p90",
        "p95",
        "p99",
        "p99.9",
        "max",
    ])
    .right_aligned(1..10);
    for (name, stats, blank_row) in latency_rows(s) {
        let mut row = vec![name.to_string()];
        match stats {
            Some(st) => {
                row.push(st.count.to_string());
                for v in [st.mean, st.stdev, st.p50, st.p90, st.p95, st.p99, st.p999, st.max] {
                    // NaN: a statistic the tool of an imported run did not report.
                    row.push(if v.is_nan() { BLANK.to_string() } else { format!("{v:.2}") });
                }
            }
            None => {
                if !blank_row {
                    continue;
                }
                row.extend((0..9).map(|_| BLANK.to_string()));
            }
        }
        t.row(row);
    }
    t
}

/// The latency rows: (name, stats, shown blank when not measured). The server's queue time is
/// a row only when the server reported it.
pub(crate) fn latency_rows(s: &Summary) -> [(&'static str, &Option<Stats>, bool); 5] {
    [
        ("TTFT", &s.metrics.ttft_ms, true),
        ("TPOT", &s.metrics.tpot_ms, true),
        ("ITL", &s.metrics.itl_ms, true),
        ("E2E", &s.metrics.e2e_ms, true),
        ("queue (server)", &s.metrics.queue_ms, false),
    ]
}

/// Requests, throughput, goodput, schedule.
pub fn overview_table(s: &Summary) -> ConsoleTable {
    let mut t = ConsoleTable::framed(["", "value"]);
    for (k, v) in overview_rows(s) {
        t.row([k, v]);
    }
    t
}

/// The plateau's bounds, requests and TTFT P99, or why there is none (docs/metrics.md,
/// "Steady state").
fn plateau_text(s: &Summary) -> String {
    let Some(p) = &s.plateau else { return String::new() };
    if let Some(why) = &p.reason {
        return format!("none: {why}");
    }
    let secs = |ms: Option<f64>| fmt_opt(ms.map(|v| v / 1000.0), 1);
    format!(
        "{}-{} s, {} requests; TTFT p99 {} ms, {} req/s",
        secs(p.start_ms),
        secs(p.end_ms),
        p.requests,
        fmt_opt(p.metrics.ttft_ms.as_ref().map(|t| t.p99), 1),
        fmt_opt(p.throughput.requests_per_s, 2)
    )
}

/// The rows of the overview: what each line is, and its value (blank when not measured).
pub(crate) fn overview_rows(s: &Summary) -> Vec<(String, String)> {
    let classes: Vec<String> =
        s.requests.by_class.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let mut rows: Vec<(String, String)> = vec![
        ("status".into(), format!("{:?}", s.status).to_lowercase()),
        (
            "target".into(),
            format!("{}{}", s.target.url, if s.simulated { " (simulated)" } else { "" }),
        ),
        ("model".into(), s.target.model.clone()),
        (
            "requests".into(),
            format!(
                "{} measured: {} (+{} warmup)",
                s.requests.total,
                classes.join(", "),
                s.requests.warmup
            ),
        ),
        ("window".into(), format!("{} s", fmt_opt(s.timing.window.duration_s, 3))),
        (
            "throughput".into(),
            format!(
                "{} req/s, {} output tok/s, {} total tok/s",
                fmt_opt(s.throughput.requests_per_s, 2),
                fmt_opt(s.throughput.output_tokens_per_s, 1),
                fmt_opt(s.throughput.total_tokens_per_s, 1)
            ),
        ),
        (
            "goodput".into(),
            match s.goodput.ratio {
                Some(r) => format!(
                    "{} req/s ({:.1}% of requests met {})",
                    fmt_opt(s.goodput.requests_per_s, 2),
                    r * 100.0,
                    slo_text(s)
                ),
                None if s.goodput.slo.is_empty() => format!("{BLANK} (no SLO configured)"),
                None => format!("{BLANK} (not measurable for this run)"),
            },
        ),
        ("ITL jitter".into(), fmt_opt(s.metrics.itl_jitter, 3)),
        (
            "output tokens".into(),
            format!(
                "{} (from usage {}, from chunks {})",
                s.tokens.output_total.map_or(BLANK.to_string(), |n| n.to_string()),
                s.tokens.from_usage,
                s.tokens.from_chunks
            ),
        ),
        (
            "send lag p50 / p99".into(),
            match &s.schedule.stats.lag_ms {
                Some(l) => format!("{:.2} / {:.2} ms", l.p50, l.p99),
                None => BLANK.to_string(),
            },
        ),
    ];
    if s.plateau.is_some() {
        // Beside the whole window.
        rows.insert(5, ("plateau".into(), plateau_text(s)));
    }
    if let Some(r) = s.schedule.stats.requested_rate {
        rows.push((
            "rate requested / achieved".into(),
            format!("{r:.2} / {} req/s", fmt_opt(s.schedule.stats.achieved_rate, 2)),
        ));
    }
    if let Some(c) = s.cost.per_1m_output_tokens {
        rows.push(("cost per 1M output tokens".into(), format!("{c:.4}")));
    }
    rows.extend(cancellation_rows(s));
    let gpu = s.server.as_ref().and_then(|v| v.gpu.as_ref());
    if let Some(j) = gpu.and_then(|g| g.energy_j) {
        let per_1m = gpu.and_then(|g| g.joules_per_1m_output_tokens);
        rows.push((
            "energy (GPU)".into(),
            format!("{j:.1} J over the window, {} J per 1M output tokens", fmt_opt(per_1m, 1)),
        ));
    }
    rows.extend(server_rows(s));
    rows
}

/// Rows of a run that cancelled requests on purpose: how many, the engine's token goodput,
/// and what it computed for nobody (`server.cancelled`). None for other runs.
fn cancellation_rows(s: &Summary) -> Vec<(String, String)> {
    let Some(c) = &s.requests.cancellation else { return Vec::new() };
    let waste = s.server.as_ref().and_then(|v| v.cancelled.as_ref());
    let stopped = match waste.and_then(|w| w.stopped) {
        Some(true) => "stopped",
        Some(false) => "went on",
        None => BLANK,
    };
    vec![
        (
            "cancelled on purpose".into(),
            format!(
                "{} ({} before their first token, {} tokens received)",
                s.requests.cancelled, c.before_first_token, c.tokens_received
            ),
        ),
        ("token goodput".into(), fmt_opt(s.goodput.token_ratio, 3)),
        (
            "engine after cancels".into(),
            format!(
                "{stopped}: {} decode tokens for nobody ({} of what was left), prefill {}, \
                 slot held {} ms",
                fmt_opt(waste.and_then(|w| w.decode_tokens), 0),
                fmt_opt(waste.and_then(|w| w.decode_share), 3),
                fmt_opt(waste.and_then(|w| w.prefill_tokens), 0),
                fmt_opt(waste.and_then(|w| w.hold_ms_mean), 1)
            ),
        ),
    ]
}

/// Rows for the server-side metrics (`summary.server`), when they were scraped.
fn server_rows(s: &Summary) -> Vec<(String, String)> {
    let Some(server) = &s.server else { return Vec::new() };
    let gauge = |g: &Option<GaugeStats>, decimals: usize| {
        format!(
            "p50 {} / p99 {} / max {}",
            fmt_opt(g.as_ref().map(|g| g.p50), decimals),
            fmt_opt(g.as_ref().map(|g| g.p99), decimals),
            fmt_opt(g.as_ref().map(|g| g.max), decimals)
        )
    };
    vec![
        (
            "server tokens (whole run)".into(),
            format!(
                "{} (goodput ratio {}, preemptions {})",
                fmt_opt(server.generation_tokens, 0),
                fmt_opt(server.goodput_ratio, 3),
                fmt_opt(server.preemptions, 0)
            ),
        ),
        ("server running".into(), gauge(&server.running, 1)),
        ("server waiting".into(), gauge(&server.waiting, 1)),
        ("server KV cache usage".into(), gauge(&server.kv_cache_usage, 3)),
    ]
}

fn slo_text(s: &Summary) -> String {
    let slo = &s.goodput.slo;
    let mut parts = Vec::new();
    if let Some(v) = slo.ttft_ms {
        parts.push(format!("TTFT <= {v} ms"));
    }
    if let Some(v) = slo.tpot_ms {
        parts.push(format!("TPOT <= {v} ms"));
    }
    if let Some(v) = slo.e2e_ms {
        parts.push(format!("E2E <= {v} ms"));
    }
    parts.join(", ")
}

/// The whole console report of a run.
pub fn render(s: &Summary) -> String {
    let mut out = format!("{}\n{}\n", overview_table(s), latency_table(s));
    for n in &s.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}
