//! `cargo xtask watch --target NAME`: the live records' rollback conditions evaluated on a
//! canary without Prometheus. It scrapes the target's `/metrics` every interval, computes each
//! condition's value over its sliding window from the histogram and counter increases between
//! scrapes (`crate::thresholds::series`, the definition `adr alerts` writes as PromQL), prints a
//! status line per scrape, and ends with exit 1 (after running `--on-rollback`, when given) as
//! soon as a `roll back` condition has held for its whole window. `investigate` conditions are
//! reported and watching goes on. `--duration` ends a quiet watch with exit 0, or with exit 4
//! (`no-data`) when a condition could not be evaluated for its window: no data is not good
//! news. A latency quantile is decided on the engine's own bucket bounds, read from the first
//! scrape ([`crate::thresholds::series::resolve`]).
//!
//! The evaluation ([`Watch`]) is pure: scrapes with their times in, transitions out; the command
//! below does the scraping, printing and exiting.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use infergate_model::EngineKind;
use xshell::Shell;

use crate::exit::Status;
use crate::text::num;
use crate::thresholds::rollback::Window;
use crate::thresholds::series::{
    Scrape, Source, bounds_in, decided_as, default_bounds, detect_engine, resolve, source,
};
use infergate_policy::adr::live::{LiveCondition, live_rollback};
use infergate_policy::adr::{ADR_DIR, load_records};

#[derive(Debug, Args)]
pub struct WatchCmd {
    /// The target of the bench configuration whose metrics are watched (its `metrics_url`, else
    /// `<server root>/metrics`).
    #[arg(long, value_name = "NAME")]
    pub target: String,
    /// Bench configuration file (default configs/bench.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Time between scrapes: `1s`, `15s`, `1m`.
    #[arg(long, default_value = "15s", value_parser = Window::parse)]
    pub interval: Window,
    /// Stop after this long (seconds, or 90s, 10m, 1h; whole seconds, at most a day) and exit 0
    /// when no rollback condition held; without it, watch until a condition holds or Ctrl-C.
    #[arg(long, value_name = "DURATION", value_parser = watch_duration)]
    pub duration: Option<Window>,
    /// A shell command run (`sh -c`) when a rollback condition has held for its window, before
    /// exiting 1; it gets INFERGATE_ADR, INFERGATE_METRIC, INFERGATE_VALUE and INFERGATE_RECORD.
    #[arg(long, value_name = "CMD")]
    pub on_rollback: Option<String>,
    /// Directory of the records, relative to the repository root.
    #[arg(long, default_value = ADR_DIR, value_name = "DIR")]
    pub dir: PathBuf,
}

/// `--duration`: what every command's `--duration` takes (`text::parse_duration_s`), in whole
/// seconds within a rollback window's bounds.
fn watch_duration(s: &str) -> Result<Window, String> {
    let seconds = crate::text::parse_duration_s(s)?;
    if seconds.fract() != 0.0 {
        return Err(format!("`{s}`: watch for whole seconds"));
    }
    Window::parse(&format!("{seconds}s"))
        .map_err(|_| format!("`{s}`: watch for at most a day (24h)"))
}

/// One watched condition and where its episode stands.
#[derive(Clone, Debug)]
pub(crate) struct Watched {
    pub live: LiveCondition,
    pub source: Source,
    /// How the condition is decided on the engine's buckets, when that is not its own words
    /// (a latency quantile: the share of requests over a bucket bound).
    pub decided: Option<String>,
    /// When the condition started to hold (seconds on the scrape clock), while it holds.
    pub since_s: Option<f64>,
    /// The value at the last evaluation (`None`: no data in the window).
    pub value: Option<f64>,
    /// This episode was already reported (an `investigate` condition is reported once per
    /// episode).
    pub reported: bool,
    /// The last evaluation with data (the watch's start until there is one).
    pub last_data_s: f64,
    /// An evaluation had data.
    pub evaluated: bool,
    /// The condition went without data for its whole window at least once.
    pub unevaluated: bool,
    /// The current stretch without data was reported.
    pub no_data_reported: bool,
}

/// What an evaluation found: conditions that have held for their whole window now.
#[derive(Clone, Debug, PartialEq)]
pub struct Held {
    pub index: usize,
    pub value: f64,
    pub held_s: f64,
}

/// The conditions on one target, evaluated scrape by scrape.
#[derive(Clone, Debug, Default)]
pub(crate) struct Watch {
    pub watched: Vec<Watched>,
    scrapes: Vec<Scrape>,
}

impl Watch {
    /// The conditions `engine` has a series for, a latency quantile resolved on the bucket
    /// bounds of `first` (the first scrape; the engine's defaults where it has none yet); the
    /// others with the reason. `started_s`: the watch's first scrape, from which a condition
    /// without data counts as not evaluated.
    pub fn new(
        conds: Vec<LiveCondition>,
        engine: EngineKind,
        first: &infergate_model::promtext::Exposition,
        started_s: f64,
    ) -> (Watch, Vec<(LiveCondition, String)>) {
        let mut watched = Vec::new();
        let mut skipped = Vec::new();
        for live in conds {
            let resolved = source(live.condition.metric, engine).and_then(|src| {
                let Some(family) = src.family() else { return Ok(src) };
                let mut bounds = bounds_in(first, family);
                if bounds.is_empty() {
                    bounds = default_bounds(family).unwrap_or_default().to_vec();
                }
                resolve(&src, &live.condition, &bounds)
            });
            match resolved {
                Ok(source) => watched.push(Watched {
                    decided: decided_as(&source, &live.condition),
                    live,
                    source,
                    since_s: None,
                    value: None,
                    reported: false,
                    last_data_s: started_s,
                    evaluated: false,
                    unevaluated: false,
                    no_data_reported: false,
                }),
                Err(why) => skipped.push((live, why.0)),
            }
        }
        (Watch { watched, scrapes: Vec::new() }, skipped)
    }

    /// Add a scrape (times increasing) and evaluate: the conditions that have held for their
    /// window (`for:` in Prometheus: true at every evaluation since `since_s`, and `now - since`
    /// at least the window). Scrapes older than every window are dropped.
    pub fn push(&mut self, scrape: Scrape) -> Vec<Held> {
        let now = scrape.at_s;
        self.scrapes.push(scrape);
        let longest = self.watched.iter().map(|w| w.live.condition.window.seconds).max();
        let keep_from = now - 2.0 * longest.unwrap_or(0) as f64;
        // Keep the last scrape at or before the oldest window start, and everything after it.
        if let Some(cut) = self.scrapes.iter().rposition(|s| s.at_s <= keep_from) {
            self.scrapes.drain(..cut);
        }
        let mut held = Vec::new();
        for (index, w) in self.watched.iter_mut().enumerate() {
            let c = &w.live.condition;
            w.value = c.window.value(&w.source, &self.scrapes);
            if w.value.is_some() {
                w.last_data_s = now;
                w.evaluated = true;
                w.no_data_reported = false;
            }
            match w.value.filter(|v| w.source.breaks(c, *v)) {
                Some(v) => {
                    let since = *w.since_s.get_or_insert(now);
                    if now - since >= c.window.seconds as f64 {
                        held.push(Held { index, value: v, held_s: now - since });
                    }
                }
                None => {
                    w.since_s = None;
                    w.reported = false;
                }
            }
        }
        held
    }

    /// A scrape at `now_s` that failed (or held no engine series): no condition has data. A
    /// breaking episode is not ended by it (the next scrape decides), but the time without data
    /// counts.
    pub(crate) fn push_failed(&mut self, _now_s: f64) {
        for w in &mut self.watched {
            w.value = None;
        }
    }

    /// The conditions whose stretch without data has just reached their window (each reported
    /// once per stretch): they could not be evaluated for it.
    pub(crate) fn newly_without_data(&mut self, now_s: f64) -> Vec<usize> {
        let mut out = Vec::new();
        for (i, w) in self.watched.iter_mut().enumerate() {
            let gap = now_s - w.last_data_s;
            if w.value.is_none() && gap >= w.live.condition.window.seconds as f64 {
                w.unevaluated = true;
                if !w.no_data_reported {
                    w.no_data_reported = true;
                    out.push(i);
                }
            }
        }
        out
    }

    /// The conditions that could not be evaluated: a stretch without data as long as their
    /// window, or no data at all.
    pub fn not_evaluated(&self) -> Vec<&Watched> {
        self.watched.iter().filter(|w| w.unevaluated || !w.evaluated).collect()
    }

    /// One line: each condition's value and, while it holds, for how long of its window.
    pub(crate) fn status_line(&self, now_s: f64) -> String {
        let parts: Vec<String> = self
            .watched
            .iter()
            .map(|w| {
                let c = &w.live.condition;
                let window = c.window.seconds as f64;
                let (value, limit) = match (&w.source, w.value) {
                    (Source::ShareOver { bound_s, max_share, .. }, v) => (
                        v.map(|v| format!("{}% over {} ms", num(v * 100.0), num(bound_s * 1000.0))),
                        format!("> {}%", num(max_share * 100.0)),
                    ),
                    (_, v) => (
                        v.map(|v| crate::text::with_unit(v, &c.unit)),
                        format!("{} {}", c.comparator, num(c.limit)),
                    ),
                };
                let value = value.unwrap_or_else(|| {
                    let gap = (now_s - w.last_data_s).max(0.0);
                    let word = if gap >= window { "NO DATA" } else { "no data" };
                    format!("{word} {:.0}s/{}", gap.min(window), c.window)
                });
                let state = match w.since_s {
                    Some(since) => {
                        format!(" BREAKING {:.0}s/{}", (now_s - since).max(0.0), c.window)
                    }
                    None => String::new(),
                };
                format!("{} {value} ({limit}){state}", c.metric)
            })
            .collect();
        format!("[{:>5.0}s] {}", now_s, parts.join(" | "))
    }
}

impl WatchCmd {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        let root = sh.current_dir();
        let cfg = crate::measure::bench::load_config(&root, self.config.as_deref())?;
        let target = cfg.target(&self.target).map_err(anyhow::Error::msg)?.clone();
        let adrs = load_records(&root, &self.dir)?;
        let conds = live_rollback(&adrs);
        if conds.is_empty() {
            bail!(
                "no live record in {} states a rollback condition (`- `METRIC` above LIMIT UNIT \
                 for WINDOW: roll back`, docs/adr/README.md#rollback-conditions): nothing to watch",
                self.dir.display()
            );
        }
        let base = target.base_url.trim_end_matches('/');
        let server_root = base.strip_suffix("/v1").unwrap_or(base);
        let url = bench::scrape::metrics_url(server_root, target.metrics_url.as_deref());
        let shown = infergate_model::redact::strip_userinfo(&url).into_owned();
        let interval = Duration::from_secs(self.interval.seconds);
        let page = bench::scrape::MetricsPage::new(&url, interval.max(Duration::from_secs(2)))
            .map_err(anyhow::Error::msg)?;
        let rt = crate::measure::runtime()?;
        rt.block_on(self.watch(page, &shown, conds))
    }

    async fn watch(
        &self,
        page: bench::scrape::MetricsPage,
        shown: &str,
        conds: Vec<LiveCondition>,
    ) -> anyhow::Result<Status> {
        let mut signals = bench::runner::StopSignals::listen();
        let start = tokio::time::Instant::now();
        let mut tick = tokio::time::interval(Duration::from_secs(self.interval.seconds));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut watch: Option<Watch> = None;
        let mut conds = Some(conds);
        let end = self.duration.map(|d| start + Duration::from_secs(d.seconds));
        loop {
            // The scheduled time of the tick, not when the scrape came back: evaluations are
            // `interval` apart, as Prometheus's are, so a condition that holds at each of them
            // has held exactly its window after window / interval of them.
            let scheduled = tokio::select! {
                t = tick.tick() => t,
                name = signals.next() => {
                    eprintln!("{name}: stopping the watch");
                    return Ok(Status::Interrupted);
                }
            };
            if let (Some(end), Some(d)) = (end, self.duration)
                && tokio::time::Instant::now() >= end
            {
                return Ok(finish(watch.as_ref(), d, shown));
            }
            let now_s = scheduled.saturating_duration_since(start).as_secs_f64();
            let exposition = match page.scrape().await {
                Ok(e) => Some(e),
                Err(e) => {
                    let e = infergate_model::redact::strip_userinfo(&e.to_string()).into_owned();
                    println!("[{now_s:>5.0}s] scrape of {shown} failed: {e} (no data)");
                    None
                }
            };
            let engine = exposition.as_ref().and_then(detect_engine);
            if exposition.is_some() && engine.is_none() {
                println!(
                    "[{now_s:>5.0}s] {shown} has no vllm:, sglang: or llamacpp: metrics (no data)"
                );
            }
            let (Some(exposition), Some(engine)) = (exposition, engine) else {
                if let Some(w) = watch.as_mut() {
                    w.push_failed(now_s);
                    report_no_data(w, now_s);
                }
                continue;
            };
            if watch.is_none() {
                let (w, skipped) =
                    Watch::new(conds.take().unwrap_or_default(), engine, &exposition, 0.0);
                println!(
                    "watching {shown} ({}): {} every {}",
                    engine.as_str(),
                    crate::text::plural(w.watched.len(), "rollback condition"),
                    self.interval
                );
                for wd in &w.watched {
                    if let Some(how) = &wd.decided {
                        println!(
                            "decided as: {} {}: {how}",
                            label(&wd.live),
                            wd.live.condition.metric
                        );
                    }
                }
                for (c, why) in &skipped {
                    println!("not watched: {} {}: {why}", label(c), c.condition.render());
                }
                if w.watched.is_empty() {
                    bail!(
                        "no rollback condition of the live records has a series on {}",
                        engine.as_str()
                    );
                }
                watch = Some(w);
            }
            let Some(w) = watch.as_mut() else { continue };
            let held = w.push(Scrape { at_s: now_s, exposition });
            println!("{}", w.status_line(now_s));
            report_no_data(w, now_s);
            for h in held {
                let wd = &mut w.watched[h.index];
                let c = &wd.live.condition;
                let what = format!(
                    "{} {} held for {}s (now {}); {}:{}",
                    label(&wd.live),
                    c.render().replace('`', ""),
                    h.held_s.round(),
                    value_text(&wd.source, h.value, &c.unit),
                    wd.live.file,
                    c.line
                );
                if !c.action.blocks() {
                    if !wd.reported {
                        println!("INVESTIGATE: {what}");
                        wd.reported = true;
                    }
                    continue;
                }
                println!("ROLL BACK: {what}");
                if let Some(cmd) = &self.on_rollback {
                    let status = std::process::Command::new("sh")
                        .arg("-c")
                        .arg(cmd)
                        .env("INFERGATE_ADR", format!("{:04}", wd.live.adr))
                        .env("INFERGATE_METRIC", c.metric.as_str())
                        .env("INFERGATE_VALUE", h.value.to_string())
                        .env("INFERGATE_RECORD", format!("{}:{}", wd.live.file, c.line))
                        .status()
                        .with_context(|| "cannot run the --on-rollback command")?;
                    println!("--on-rollback ran: {status}");
                }
                return Ok(Status::PolicyViolated);
            }
        }
    }
}

/// A value as the status line shows it: a share of requests over a bucket bound, or the value
/// in the metric's unit.
fn value_text(src: &Source, v: f64, unit: &str) -> String {
    match src {
        Source::ShareOver { bound_s, .. } => {
            format!("{}% of requests over {} ms", num(v * 100.0), num(bound_s * 1000.0))
        }
        _ => crate::text::with_unit(v, unit),
    }
}

/// Say so once when a condition's stretch without data reaches its window.
fn report_no_data(w: &mut Watch, now_s: f64) {
    for i in w.newly_without_data(now_s) {
        let wd = &w.watched[i];
        let c = &wd.live.condition;
        println!(
            "NO DATA: {} {} could not be evaluated for its window ({}, since {:.0}s): no \
             observation reached the watch; {}:{}",
            label(&wd.live),
            c.metric,
            c.window,
            wd.last_data_s,
            wd.live.file,
            c.line
        );
    }
}

/// The end of a `--duration` watch in which nothing held: success only when every condition
/// was evaluated throughout; no data is not good news.
fn finish(watch: Option<&Watch>, d: Window, shown: &str) -> Status {
    let Some(w) = watch else {
        println!(
            "NO DATA: {shown} never answered with engine metrics in {d}: no rollback condition \
             could be evaluated (not an all-clear)"
        );
        return Status::NoData;
    };
    let missing = w.not_evaluated();
    if missing.is_empty() {
        println!("no rollback condition held in {d}");
        return Status::Success;
    }
    let names: Vec<String> = missing
        .iter()
        .map(|m| {
            format!(
                "{} {} (for {})",
                label(&m.live),
                m.live.condition.metric,
                m.live.condition.window
            )
        })
        .collect();
    println!(
        "NO DATA: no rollback condition held in {d}, but {} could not be evaluated for its \
         window: {} (not an all-clear)",
        crate::text::plural(missing.len(), "condition"),
        names.join(", ")
    );
    Status::NoData
}

fn label(c: &LiveCondition) -> String {
    format!("ADR-{:04}", c.adr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thresholds::rollback::parse_condition;

    fn live(text: &str) -> LiveCondition {
        let mut condition = parse_condition(text).unwrap().unwrap();
        condition.line = 9;
        LiveCondition { adr: 1, file: "docs/adr/0001-x.md".into(), title: "X".into(), condition }
    }

    /// A scrape where `n` requests so far had a TTFT of `ttft_s` each (one bucket).
    fn scrape(at_s: f64, fast: f64, slow: f64) -> Scrape {
        let text = format!(
            "vllm:time_to_first_token_seconds_bucket{{le=\"0.1\"}} {fast}\n\
             vllm:time_to_first_token_seconds_bucket{{le=\"1\"}} {}\n\
             vllm:time_to_first_token_seconds_bucket{{le=\"+Inf\"}} {}\n",
            fast + slow,
            fast + slow
        );
        Scrape { at_s, exposition: infergate_model::promtext::parse(&text) }
    }

    #[test]
    fn a_condition_fires_after_holding_its_whole_window_and_resets_when_it_stops() {
        let (mut w, skipped) = Watch::new(
            vec![
                live("`metrics.ttft_ms.p99` above 100 ms for 5s: roll back"),
                live("`goodput.ratio` below 0.9 for 5s: roll back"),
            ],
            EngineKind::Vllm,
            &scrape(0.0, 0.0, 0.0).exposition,
            0.0,
        );
        assert_eq!((w.watched.len(), skipped.len()), (1, 1));
        // 100 ms is a bucket bound: the condition exactly, as a share of requests over it.
        assert!(w.watched[0].decided.as_deref().unwrap().contains("the condition exactly"));
        // Fast requests: never holds.
        for t in 0..6 {
            assert_eq!(w.push(scrape(t as f64, 10.0 * t as f64, 0.0)), vec![]);
        }
        // Slow ones from t = 6: the condition holds from t = 6 and has held its 5 s at t = 11.
        let mut fired = None;
        for t in 6..20 {
            let held = w.push(scrape(t as f64, 50.0, 10.0 * (t - 5) as f64));
            if !held.is_empty() {
                fired = Some((t, held[0].held_s));
                break;
            }
        }
        assert_eq!(fired, Some((11, 5.0)), "{}", w.status_line(20.0));
        // Only fast requests since: the tail is fast again and the episode resets.
        assert_eq!(w.push(scrape(30.0, 5000.0, 60.0)), vec![]);
        assert_eq!(w.watched[0].since_s, None);
    }

    /// vLLM's TTFT buckets around the canary: a bench P99 of 269.6 ms and a limit of
    /// 296 ms. Half the requests between 250 and 300 ms put Prometheus's interpolated P99 near
    /// the top of the (0.25, 0.5] bucket (495 ms); decided on the bucket bound the engine
    /// resolves (500 ms), nothing breaks. A 2x slower engine (everything above 500 ms) breaks.
    fn vllm_ttft(at_s: f64, under_250: f64, to_500: f64, over_500: f64) -> Scrape {
        let mut text = String::new();
        let total = under_250 + to_500 + over_500;
        for (le, c) in [
            ("0.1", 0.0),
            ("0.25", under_250),
            ("0.5", under_250 + to_500),
            ("0.75", total),
            ("+Inf", total),
        ] {
            text.push_str(&format!("vllm:time_to_first_token_seconds_bucket{{le=\"{le}\"}} {c}\n"));
        }
        text.push_str(&format!("vllm:time_to_first_token_seconds_count {total}\n"));
        Scrape { at_s, exposition: infergate_model::promtext::parse(&text) }
    }

    #[test]
    fn a_quantile_is_decided_on_the_bucket_bound_the_engine_resolves() {
        let cond = || vec![live("`metrics.ttft_ms.p99` above 296 ms for 5s: roll back")];
        let (mut w, _) =
            Watch::new(cond(), EngineKind::Vllm, &vllm_ttft(0.0, 0.0, 0.0, 0.0).exposition, 0.0);
        let how = w.watched[0].decided.clone().unwrap();
        assert!(
            how.starts_with("more than 1% of requests over 500 ms: the record's 296 ms"),
            "{how}"
        );
        let p99 = crate::thresholds::series::histogram_quantile(
            0.99,
            &[(0.25, 50.0), (0.5, 100.0), (f64::INFINITY, 100.0)],
        )
        .unwrap();
        assert!(p99 * 1000.0 > 480.0, "interpolated {p99}");
        for t in 1..30 {
            let n = t as f64;
            assert_eq!(
                w.push(vllm_ttft(n, 97.0 * n, 3.0 * n, 0.0)),
                vec![],
                "{}",
                w.status_line(n)
            );
        }
        assert!(
            w.status_line(29.0).contains("metrics.ttft_ms.p99 0% over 500 ms (> 1%)"),
            "{}",
            w.status_line(29.0)
        );
        assert!(w.not_evaluated().is_empty());
        // Twice as slow: every request over 500 ms.
        let (mut w, _) =
            Watch::new(cond(), EngineKind::Vllm, &vllm_ttft(0.0, 0.0, 0.0, 0.0).exposition, 0.0);
        let fired =
            (0..30).find(|t| !w.push(vllm_ttft(*t as f64, 0.0, 0.0, 100.0 * *t as f64)).is_empty());
        assert_eq!(fired, Some(6));
        // A limit above the highest bound cannot be decided: not watched, with the reason.
        let (w, skipped) = Watch::new(
            vec![live("`metrics.ttft_ms.p99` above 900 ms for 5s: roll back")],
            EngineKind::Vllm,
            &vllm_ttft(0.0, 0.0, 0.0, 0.0).exposition,
            0.0,
        );
        assert!(w.watched.is_empty());
        assert!(
            skipped[0].1.contains("no bucket bound at or above 900 ms (its highest is 750 ms)"),
            "{}",
            skipped[0].1
        );
    }

    #[test]
    fn no_data_for_a_window_is_reported_once_and_is_never_an_all_clear() {
        let cond = || vec![live("`metrics.ttft_ms.p99` above 250 ms for 5s: roll back")];
        let first = vllm_ttft(0.0, 0.0, 0.0, 0.0);
        // Nothing ever answered: every scrape failed.
        let (mut w, _) = Watch::new(cond(), EngineKind::Vllm, &first.exposition, 0.0);
        let mut reported = Vec::new();
        for t in 0..12 {
            w.push_failed(t as f64);
            reported.extend(w.newly_without_data(t as f64).into_iter().map(|i| (t, i)));
        }
        assert_eq!(reported, vec![(5, 0)], "once, when the gap reached the window");
        assert!(w.status_line(11.0).contains("NO DATA 5s/5s"), "{}", w.status_line(11.0));
        assert_eq!(w.not_evaluated().len(), 1);
        assert_eq!(finish(Some(&w), Window::parse("12s").unwrap(), "u"), Status::NoData);
        assert_eq!(finish(None, Window::parse("12s").unwrap(), "u"), Status::NoData);
        // Requests flowing throughout: evaluated, an all-clear.
        let (mut w, _) = Watch::new(cond(), EngineKind::Vllm, &first.exposition, 0.0);
        for t in 0..12 {
            let n = t as f64;
            w.push(vllm_ttft(n, 10.0 * n, 0.0, 0.0));
            assert!(w.newly_without_data(n).is_empty());
        }
        assert_eq!(finish(Some(&w), Window::parse("12s").unwrap(), "u"), Status::Success);
        // Requests stop for longer than the window: not evaluated for it, even when they resume.
        let mut reported = Vec::new();
        for t in 12..24 {
            w.push(vllm_ttft(t as f64, 110.0, 0.0, 0.0));
            reported.extend(w.newly_without_data(t as f64));
        }
        assert_eq!(reported, vec![0], "no request finished from 16 s on: reported at 21 s");
        for t in 24..29 {
            w.push(vllm_ttft(t as f64, 110.0 + 10.0 * (t - 23) as f64, 0.0, 0.0));
        }
        assert!(w.watched[0].value.is_some());
        assert_eq!(finish(Some(&w), Window::parse("29s").unwrap(), "u"), Status::NoData);
    }
}
