//! `cargo xtask watch --target NAME`: the live records' rollback conditions evaluated on a
//! canary without Prometheus. It scrapes the target's `/metrics` every interval, computes each
//! condition's value over its sliding window from the histogram and counter increases between
//! scrapes (`crate::thresholds::series`, the definition `adr alerts` writes as PromQL), prints a
//! status line per scrape, and ends with exit 1 (after running `--on-rollback`, when given) as
//! soon as a `roll back` condition has held for its whole window. `investigate` conditions are
//! reported and watching goes on. `--duration` ends a quiet watch with exit 0.
//!
//! The evaluation ([`Watch`]) is pure: scrapes with their times in, transitions out; the command
//! below does the scraping, printing and exiting.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use xshell::Shell;

use crate::adr::live::{LiveCondition, live_rollback};
use crate::adr::{ADR_DIR, load_records};
use crate::exit::Status;
use crate::text::num;
use crate::thresholds::rollback::Window;
use crate::thresholds::series::{Engine, Scrape, Source, source};

#[derive(Debug, Args)]
pub struct WatchCmd {
    /// The target of the bench configuration whose metrics are watched (its `metrics_url`, else
    /// `<server root>/metrics`).
    #[arg(long)]
    pub target: String,
    /// Bench configuration file (default configs/bench.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Time between scrapes: `1s`, `15s`, `1m`.
    #[arg(long, default_value = "15s", value_parser = Window::parse)]
    pub interval: Window,
    /// Stop after this long and exit 0 when no rollback condition held; without it, watch until
    /// a condition holds or Ctrl-C.
    #[arg(long, value_parser = Window::parse)]
    pub duration: Option<Window>,
    /// A shell command run (`sh -c`) when a rollback condition has held for its window, before
    /// exiting 1; it gets INFERGATE_ADR, INFERGATE_METRIC, INFERGATE_VALUE and INFERGATE_RECORD.
    #[arg(long, value_name = "CMD")]
    pub on_rollback: Option<String>,
    /// Directory of the records, relative to the repository root.
    #[arg(long, default_value = ADR_DIR, value_name = "DIR")]
    pub dir: PathBuf,
}

/// One watched condition and where its episode stands.
#[derive(Clone, Debug)]
pub struct Watched {
    pub live: LiveCondition,
    pub source: Source,
    /// When the condition started to hold (seconds on the scrape clock), while it holds.
    pub since_s: Option<f64>,
    /// The value at the last evaluation (`None`: no data in the window).
    pub value: Option<f64>,
    /// This episode was already reported (an `investigate` condition is reported once per
    /// episode).
    pub reported: bool,
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
pub struct Watch {
    pub watched: Vec<Watched>,
    scrapes: Vec<Scrape>,
}

impl Watch {
    /// The conditions `engine` has a series for; the others with the reason.
    pub fn new(conds: Vec<LiveCondition>, engine: Engine) -> (Watch, Vec<(LiveCondition, String)>) {
        let mut watched = Vec::new();
        let mut skipped = Vec::new();
        for live in conds {
            match source(&live.condition.metric, engine) {
                Ok(source) => watched.push(Watched {
                    live,
                    source,
                    since_s: None,
                    value: None,
                    reported: false,
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
            match w.value.filter(|v| c.holds(*v)) {
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

    /// One line: each condition's value and, while it holds, for how long of its window.
    pub fn status_line(&self, now_s: f64) -> String {
        let parts: Vec<String> = self
            .watched
            .iter()
            .map(|w| {
                let c = &w.live.condition;
                let value = match w.value {
                    Some(v) => crate::text::with_unit(v, &c.unit),
                    None => "no data".to_string(),
                };
                let state = match w.since_s {
                    Some(since) => {
                        format!(" BREAKING {:.0}s/{}", (now_s - since).max(0.0), c.window)
                    }
                    None => String::new(),
                };
                format!("{} {value} ({} {}){state}", c.metric, c.comparator, num(c.limit))
            })
            .collect();
        format!("[{:>5.0}s] {}", now_s, parts.join(" | "))
    }
}

impl WatchCmd {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        let root = sh.current_dir();
        let cfg = crate::bench::load_config(&root, self.config.as_deref())?;
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
        let shown = bench::redact::strip_userinfo(&url).into_owned();
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
                println!("no rollback condition held in {d}");
                return Ok(Status::Success);
            }
            let now_s = scheduled.saturating_duration_since(start).as_secs_f64();
            let exposition = match page.scrape().await {
                Ok(e) => e,
                Err(e) => {
                    let e = bench::redact::strip_userinfo(&e).into_owned();
                    println!("[{now_s:>5.0}s] scrape of {shown} failed: {e} (no data)");
                    continue;
                }
            };
            if watch.is_none() {
                let Some(engine) = Engine::detect(&exposition) else {
                    println!(
                        "[{now_s:>5.0}s] {shown} has no vllm:, sglang: or llamacpp: metrics yet"
                    );
                    continue;
                };
                let (w, skipped) = Watch::new(conds.take().unwrap_or_default(), engine);
                println!(
                    "watching {shown} ({}): {} every {}",
                    engine.as_str(),
                    crate::text::plural(w.watched.len(), "rollback condition"),
                    self.interval
                );
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
            for h in held {
                let wd = &mut w.watched[h.index];
                let c = &wd.live.condition;
                let what = format!(
                    "{} {} held for {}s (now {}); {}:{}",
                    label(&wd.live),
                    c.render().replace('`', ""),
                    h.held_s.round(),
                    crate::text::with_unit(h.value, &c.unit),
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
                        .env("INFERGATE_METRIC", &c.metric)
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
        Scrape { at_s, exposition: bench::promtext::parse(&text) }
    }

    #[test]
    fn a_condition_fires_after_holding_its_whole_window_and_resets_when_it_stops() {
        let (mut w, skipped) = Watch::new(
            vec![
                live("`metrics.ttft_ms.p99` above 150 ms for 5s: roll back"),
                live("`goodput.ratio` below 0.9 for 5s: roll back"),
            ],
            Engine::Vllm,
        );
        assert_eq!((w.watched.len(), skipped.len()), (1, 1));
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
}
