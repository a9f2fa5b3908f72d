//! Scraping a target's Prometheus `/metrics` (and `nvidia-smi`) during a run.
//!
//! The runner starts a [`Scraper`] just before the load: it scrapes once at once (a target
//! without metrics is then skipped with a note), then every `interval_s` in a task, and once more
//! when [`Scraper::finish`] is called right after the last request ended. `server_metrics`
//! turns the scrapes into the `server` section over the measured window.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use infergate_model::config::ScrapeConfig;
use infergate_model::promtext;
use infergate_model::server_metrics::{self, GpuSample, Reading, Scrape, ServerSection};

/// The metrics URL of a target: its `metrics_url`, else `<server root>/metrics`.
pub fn metrics_url(root: &str, configured: Option<&str>) -> String {
    configured
        .map(str::to_string)
        .unwrap_or_else(|| format!("{}/metrics", root.trim_end_matches('/')))
}

/// Whether an executable of this name is on `PATH`.
pub(crate) fn on_path(cmd: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| is_executable(&dir.join(cmd))))
}

fn is_executable(p: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        p.is_file()
    }
}

/// The `nvidia-smi` query the scraper runs.
pub(crate) const NVIDIA_SMI_ARGS: [&str; 2] =
    ["--query-gpu=utilization.gpu,memory.used,power.draw", "--format=csv,noheader,nounits"];

fn sample_gpu(t: Instant) -> Option<(Instant, String)> {
    let out = std::process::Command::new("nvidia-smi").args(NVIDIA_SMI_ARGS).output().ok()?;
    out.status.success().then(|| (t, String::from_utf8_lossy(&out.stdout).into_owned()))
}

#[derive(Default)]
struct Collected {
    scrapes: Vec<(Instant, Option<Reading>)>,
    gpu: Vec<(Instant, String)>,
    engine: Option<&'static str>,
}

/// A running scraper.
pub(crate) struct Scraper {
    url: String,
    interval: Duration,
    http: reqwest::Client,
    gpu: bool,
    data: Arc<Mutex<Collected>>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

/// The largest metrics page read (bytes): engines' pages are a few hundred KiB; a larger one is
/// refused rather than held in memory.
pub(crate) const METRICS_PAGE_BYTES: usize = 16 << 20;

/// Why a metrics page could not be had. The messages are those a run's notes and `watch` print.
#[derive(Debug, thiserror::Error)]
pub enum ScrapeError {
    /// The request or the reading of its body failed (connection, timeout).
    #[error("{0}")]
    Request(#[from] reqwest::Error),
    #[error("HTTP {0}")]
    Status(u16),
    #[error("the metrics page is larger than {METRICS_PAGE_BYTES} bytes")]
    TooLarge,
    #[error("cannot build an HTTP client ({0})")]
    Client(reqwest::Error),
}

async fn scrape_once(
    http: &reqwest::Client,
    url: &str,
) -> Result<promtext::Exposition, ScrapeError> {
    let mut resp = http.get(url).send().await?;
    let status = resp.status();
    if !status.is_success() {
        return Err(ScrapeError::Status(status.as_u16()));
    }
    let mut page = Vec::new();
    while let Some(chunk) = resp.chunk().await? {
        if page.len() + chunk.len() > METRICS_PAGE_BYTES {
            return Err(ScrapeError::TooLarge);
        }
        page.extend_from_slice(&chunk);
    }
    Ok(promtext::parse(&String::from_utf8_lossy(&page)))
}

/// One metrics page scraped on demand (`cargo xtask watch`), with the run scraper's page-size
/// limit and errors. It sends no credentials.
pub struct MetricsPage {
    http: reqwest::Client,
    url: String,
}

impl MetricsPage {
    /// A page at `url`, each scrape bounded by `timeout` (loopback pages bypass any proxy).
    pub fn new(url: &str, timeout: Duration) -> Result<MetricsPage, ScrapeError> {
        let mut builder = crate::client::http_builder().timeout(timeout);
        if crate::client::is_loopback(url) {
            builder = builder.no_proxy();
        }
        let http = builder.build().map_err(ScrapeError::Client)?;
        Ok(MetricsPage { http, url: url.to_string() })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Fetch and parse the page.
    pub async fn scrape(&self) -> Result<promtext::Exposition, ScrapeError> {
        scrape_once(&self.http, &self.url).await
    }
}

impl Scraper {
    /// Start scraping `url`, sending `headers` with every scrape (the target's own headers and
    /// key, when the page is on the target's server: see [`crate::client::Client::metrics_headers`]).
    /// `None` with a note when scraping is disabled or the first scrape fails (the target has
    /// no metrics endpoint); notes about `nvidia-smi` go to `notes` too.
    pub async fn start(
        cfg: &ScrapeConfig,
        url: String,
        headers: reqwest::header::HeaderMap,
        loopback: bool,
        gpu: bool,
        notes: &mut Vec<String>,
    ) -> Option<Scraper> {
        if !cfg.enabled {
            return None;
        }
        let interval = Duration::from_secs_f64(cfg.interval_s);
        let mut builder = crate::client::http_builder()
            .default_headers(headers)
            .timeout(interval.max(Duration::from_secs(2)));
        if loopback {
            builder = builder.no_proxy();
        }
        let http = match builder.build() {
            Ok(c) => c,
            Err(e) => {
                notes.push(format!("server metrics skipped: cannot build an HTTP client ({e})"));
                return None;
            }
        };
        let first = match scrape_once(&http, &url).await {
            Ok(e) if !e.samples.is_empty() => e,
            Ok(_) => {
                notes.push(format!("server metrics skipped: {url} exposes no metrics"));
                return None;
            }
            Err(e) => {
                notes.push(format!("server metrics skipped: no Prometheus metrics at {url} ({e})"));
                return None;
            }
        };
        let wanted = gpu && cfg.gpu;
        let gpu = wanted && on_path("nvidia-smi");
        if wanted && !gpu {
            notes.push("nvidia-smi not found: no GPU utilisation samples".into());
        }
        let data = Arc::new(Mutex::new(Collected {
            scrapes: vec![(Instant::now(), Some(Reading::from_exposition(&first)))],
            gpu: Vec::new(),
            engine: Some(server_metrics::detect_engine(&first)),
        }));
        let (stop, mut stopped) = watch::channel(false);
        let task = {
            let (http, url, data) = (http.clone(), url.clone(), data.clone());
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(interval);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                tick.tick().await; // the first tick is immediate: the start scrape is taken
                loop {
                    tokio::select! {
                        _ = tick.tick() => {}
                        _ = stopped.wait_for(|s| *s) => return,
                    }
                    let t = Instant::now();
                    let gpu_sample =
                        gpu.then(|| tokio::task::spawn_blocking(move || sample_gpu(t)));
                    let r =
                        scrape_once(&http, &url).await.ok().map(|e| Reading::from_exposition(&e));
                    let g = match gpu_sample {
                        Some(h) => h.await.ok().flatten(),
                        None => None,
                    };
                    let mut d = data.lock().unwrap();
                    d.scrapes.push((t, r));
                    d.gpu.extend(g);
                }
            })
        };
        Some(Scraper { url, interval, http, gpu, data, stop, task })
    }

    /// Take the final scrape, stop, and compute the section: gauges over the measured `window`,
    /// counters over the whole `run` (ms on the run clock that started at `clock`).
    ///
    /// With `drain` (a run that cancelled requests on purpose), the final scrape waits until the
    /// engine runs and queues nothing, at most `drain`: the counters then hold what it computed
    /// for the cancelled requests after their clients left, and the section says how long that
    /// took and whether the engine stopped at all.
    pub async fn finish(
        self,
        clock: Instant,
        window: Option<(f64, f64)>,
        run: infergate_model::metrics::RunTotals,
        drain: Option<Duration>,
    ) -> ServerSection {
        let _ = self.stop.send(true);
        let _ = self.task.await;
        let ended = Instant::now();
        let mut t = ended;
        let mut last =
            scrape_once(&self.http, &self.url).await.ok().map(|e| Reading::from_exposition(&e));
        let idle = |r: &Option<Reading>| {
            r.as_ref().and_then(|r| Some(r.running? + r.waiting.unwrap_or(0.0) == 0.0))
        };
        let mut drained = None;
        if let Some(bound) = drain {
            let step = self.interval.min(Duration::from_millis(50));
            // Without the gauges there is nothing to wait for.
            while let Some(is_idle) = idle(&last) {
                if is_idle || t - ended >= bound {
                    drained = Some(((t - ended).as_secs_f64() * 1000.0, is_idle));
                    break;
                }
                tokio::time::sleep(step).await;
                t = Instant::now();
                last = scrape_once(&self.http, &self.url)
                    .await
                    .ok()
                    .map(|e| Reading::from_exposition(&e));
            }
        }
        let gpu_last = if self.gpu {
            tokio::task::spawn_blocking(move || sample_gpu(t)).await.ok().flatten()
        } else {
            None
        };
        let mut d = std::mem::take(&mut *self.data.lock().unwrap());
        d.scrapes.push((t, last));
        d.gpu.extend(gpu_last);
        let ms = |i: Instant| {
            if i >= clock {
                (i - clock).as_secs_f64() * 1000.0
            } else {
                -((clock - i).as_secs_f64() * 1000.0)
            }
        };
        let scrapes: Vec<Scrape> =
            d.scrapes.into_iter().map(|(i, reading)| Scrape { t_ms: ms(i), reading }).collect();
        let gpu = self.gpu.then(|| {
            d.gpu
                .iter()
                .filter_map(|(i, text)| server_metrics::parse_nvidia_smi(text, ms(*i)))
                .collect::<Vec<GpuSample>>()
        });
        // After a drain the counters run to the scrape that found the engine idle: what it
        // computed for nobody after the last request is counted too.
        let mut run = run;
        if drained.is_some()
            && let Some((start, end)) = run.span
        {
            run.span = Some((start, end.max(ms(t))));
        }
        let mut section = server_metrics::summarize(
            &self.url,
            d.engine.unwrap_or("unknown"),
            self.interval.as_secs_f64(),
            &scrapes,
            window,
            run,
            gpu,
        );
        if let Some((ms, stopped)) = drained {
            section.after_run = Some(server_metrics::AfterRun {
                busy_ms: (ms * 1000.0).round() / 1000.0,
                idle: stopped,
                waited_s: drain.unwrap_or_default().as_secs_f64(),
            });
        }
        section.cancelled = server_metrics::cancel_waste(&section, &run);
        section
    }
}
