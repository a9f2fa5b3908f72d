//! `cargo xtask dataset refresh`: a seeded share of a dataset replaced by the slowest or failed
//! requests of a window of a production request log, scrubbed, with its provenance written
//! beside it (`<out>.provenance.json`); the log's malformed lines counted and named. The flags
//! and the report; the refresh itself is `infergate_model::refresh`. See docs/workloads.md.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use infergate_model::refresh::log::Format;
use infergate_model::refresh::provenance::{Provenance, provenance_path};
use infergate_model::refresh::replace::{self, Metric, Options, RefreshError, WindowSpec};
use infergate_model::refresh::scrub::{MIN_KEY_BYTES, Scrubber};
use xshell::Shell;

use crate::exit::Status;
use crate::outpath::Output;
use crate::settings::{SETTINGS_FILE, Settings};
use crate::text::join_clean;

/// The variable the user-id key is read from unless `--user-id-key-env` names another.
pub(crate) const DEFAULT_KEY_ENV: &str = "INFERGATE_USER_ID_KEY";

/// The longest window, in days (a century: any real log's whole span, and far from the
/// millisecond clock's limits).
const MAX_WINDOW_DAYS: f64 = 36_525.0;

/// Malformed log lines named on the console (all are in the provenance, up to its limit).
const SHOWN_MALFORMED: usize = 20;

#[derive(Debug, Subcommand)]
pub enum DatasetCmd {
    /// Replace a seeded share of a dataset with the slowest or failed requests of a window of
    /// a production log, scrubbed; write the provenance beside the output.
    Refresh(RefreshArgs),
}

/// The log's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Told by the first JSON object: `startTime` without `timestamp` is LiteLLM's.
    Auto,
    /// `{"timestamp", "request", "latency_ms" / "ttft_ms", "status"}` (docs/workloads.md).
    Infergate,
    /// LiteLLM's `StandardLoggingPayload`, one a line.
    Litellm,
}

/// What "slowest" ranks by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum By {
    /// `latency_ms`, the request's end-to-end latency.
    Latency,
    /// `ttft_ms`, the time to the first token.
    Ttft,
}

#[derive(Debug, Args)]
pub struct RefreshArgs {
    /// The production request log: JSONL, one request a line (docs/workloads.md).
    #[arg(long, value_name = "FILE")]
    pub log: PathBuf,
    /// The log's format.
    #[arg(long, value_enum, default_value_t = LogFormat::Auto)]
    pub format: LogFormat,
    /// The dataset to refresh (an acceptance or bench JSONL dataset).
    #[arg(long, value_name = "FILE")]
    pub dataset: PathBuf,
    /// Where the refreshed dataset is written; its provenance goes to FILE.provenance.json.
    /// Never the log, never inside `.git/`; an existing file (the dataset itself, to refresh
    /// it in place) only with --force.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Replace the output and its provenance when they exist.
    #[arg(long)]
    pub force: bool,
    /// Share of the dataset's items replaced, in (0, 1].
    #[arg(long, default_value_t = 0.1)]
    pub share: f64,
    /// Seed of the choice of the items replaced.
    #[arg(long)]
    pub seed: u64,
    /// Start of the window: epoch seconds or RFC 3339 (default: the log's first request, or
    /// --window-days before --window-end).
    #[arg(long = "window-start", value_name = "TIME")]
    pub since: Option<String>,
    /// End of the window, included: epoch seconds or RFC 3339 (default: the log's newest
    /// request).
    #[arg(long = "window-end", value_name = "TIME")]
    pub until: Option<String>,
    /// The window's length in days, ending at --window-end or the log's newest request (when
    /// --window-start is not given).
    #[arg(long, value_name = "DAYS", default_value_t = 7.0)]
    pub window_days: f64,
    /// What "slowest" ranks by.
    #[arg(long, value_enum, default_value_t = By::Latency)]
    pub by: By,
    /// At most this share of each kind's picks (structured, other) are failed requests
    /// (status >= 400 or 0); the slowest fill the rest.
    #[arg(long, default_value_t = 0.5)]
    pub failed_share: f64,
    /// The structured share (items with a JSON Schema) the result keeps at least, or the
    /// dataset's own when lower.
    #[arg(long, default_value_t = 0.4)]
    pub min_structured_share: f64,
    /// Refuse the log when more than this share of its non-blank lines are malformed.
    #[arg(long, default_value_t = 0.01)]
    pub max_malformed_share: f64,
    /// A PII pattern (regular expression) removed besides e-mail addresses and those of
    /// configs/xtask.toml `[dataset] pii_patterns`; repeatable.
    #[arg(long = "pii-pattern", value_name = "REGEX")]
    pub pii_patterns: Vec<String>,
    /// The environment variable holding the key user ids are hashed with (HMAC-SHA256).
    #[arg(long, value_name = "VAR", default_value = DEFAULT_KEY_ENV)]
    pub user_id_key_env: String,
}

impl DatasetCmd {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        match self {
            DatasetCmd::Refresh(a) => refresh(&sh.current_dir(), a),
        }
    }
}

/// A window end: epoch seconds or RFC 3339, in epoch milliseconds.
fn parse_time(flag: &str, text: &str) -> anyhow::Result<i64> {
    let v = match text.trim().parse::<f64>() {
        Ok(n) => serde_json::json!(n),
        Err(_) => serde_json::Value::String(text.to_string()),
    };
    infergate_model::refresh::log::parse_timestamp(&v).map_err(|e| anyhow::anyhow!("--{flag}: {e}"))
}

fn options(root: &Path, a: &RefreshArgs) -> anyhow::Result<Options> {
    let share_flag = |name: &str, v: f64| {
        if (0.0..=1.0).contains(&v) {
            Ok(())
        } else {
            Err(anyhow::anyhow!("--{name} {v} is not in [0, 1]"))
        }
    };
    share_flag("failed-share", a.failed_share)?;
    share_flag("min-structured-share", a.min_structured_share)?;
    share_flag("max-malformed-share", a.max_malformed_share)?;
    if !(a.window_days.is_finite() && a.window_days > 0.0 && a.window_days <= MAX_WINDOW_DAYS) {
        bail!("--window-days {} must be a number of days in (0, {MAX_WINDOW_DAYS}]", a.window_days);
    }
    let since = a.since.as_deref().map(|t| parse_time("window-start", t)).transpose()?;
    let until = a.until.as_deref().map(|t| parse_time("window-end", t)).transpose()?;
    let window = match (since, until) {
        (None, None) => WindowSpec::Days(a.window_days),
        (None, Some(u)) => WindowSpec::Between {
            since: Some(u - (a.window_days * 86_400_000.0).round() as i64),
            until: Some(u),
        },
        (s, u) => WindowSpec::Between { since: s, until: u },
    };
    if let WindowSpec::Between { since: Some(s), until: Some(u) } = window
        && s > u
    {
        bail!("--window-start is after --window-end: the window is empty");
    }
    let settings = match std::fs::read_to_string(root.join(SETTINGS_FILE)) {
        Ok(t) => {
            let source = infergate_model::config::Source::new(SETTINGS_FILE, t);
            let s = Settings::parse(&source)?;
            for p in &s.dataset.pii_patterns {
                Scrubber::check_pattern(p)
                    .map_err(|e| source.error_at(&["dataset", "pii_patterns"], e.to_string()))?;
            }
            s
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Settings::default(),
        Err(e) => return Err(e).with_context(|| format!("cannot read {SETTINGS_FILE}")),
    };
    let mut pii = settings.dataset.pii_patterns.clone();
    pii.extend(a.pii_patterns.iter().cloned());
    let key = match std::env::var(&a.user_id_key_env) {
        Ok(k) if k.len() >= MIN_KEY_BYTES => Some(k.into_bytes()),
        Ok(_) => bail!(
            "{} holds a key shorter than {MIN_KEY_BYTES} bytes: user ids hashed with it could \
             be recovered by trying keys; set a longer random one",
            a.user_id_key_env
        ),
        Err(_) => None,
    };
    let name = |p: &Path| p.to_string_lossy().replace('\\', "/");
    Ok(Options {
        log: join_clean(root, &a.log),
        log_name: name(&a.log),
        dataset: join_clean(root, &a.dataset),
        dataset_name: name(&a.dataset),
        out_name: name(&a.out),
        share: a.share,
        seed: a.seed,
        window,
        format: match a.format {
            LogFormat::Auto => Format::Auto,
            LogFormat::Infergate => Format::Infergate,
            LogFormat::Litellm => Format::LiteLlm,
        },
        by: match a.by {
            By::Latency => Metric::LatencyMs,
            By::Ttft => Metric::TtftMs,
        },
        failed_share: a.failed_share,
        min_structured_share: a.min_structured_share,
        max_malformed_share: a.max_malformed_share,
        pii_patterns: pii,
        key,
        key_env: a.user_id_key_env.clone(),
    })
}

fn refresh(root: &Path, a: RefreshArgs) -> anyhow::Result<Status> {
    let prov = provenance_path(&a.out);
    let outputs = [
        Output { flag: "--out", path: &a.out },
        Output { flag: "--out's provenance", path: &prov },
    ];
    // The log is never written over; the dataset only with --force (a refresh in place).
    let mut inputs = vec![("--log", a.log.as_path())];
    if !a.force {
        inputs.push(("--dataset", a.dataset.as_path()));
    }
    crate::outpath::check(root, &outputs, &inputs, a.force)?;
    let opts = options(root, &a)?;
    let done = match replace::refresh(&opts) {
        Ok(done) => done,
        Err(e) => {
            if let RefreshError::TooManyMalformed { named, .. } = &e {
                for m in named.iter().take(SHOWN_MALFORMED) {
                    eprintln!("malformed {m}");
                }
            }
            return Err(e.into());
        }
    };
    let out = join_clean(root, &a.out);
    let prov_path = provenance_path(&out);
    infergate_model::rundir::write_atomic(&out, done.text.as_bytes())
        .with_context(|| format!("cannot write {}", a.out.display()))?;
    infergate_model::artifact::write_at(&prov_path, &done.provenance)?;
    report(&done.provenance, &opts);
    println!("wrote {} and {}", a.out.display(), provenance_path(&a.out).display());
    Ok(Status::Success)
}

/// The console report: the log, the malformed lines, the window, the replacements.
fn report(p: &Provenance, opts: &Options) {
    let log = &p.log;
    println!(
        "log {} ({}): {} lines ({} blank), {} malformed, {}",
        log.file, log.format, log.lines, log.blank, log.malformed, log.sha256
    );
    for m in log.malformed_lines.iter().take(SHOWN_MALFORMED) {
        println!("  malformed {m}");
    }
    if log.malformed as usize > SHOWN_MALFORMED {
        println!(
            "  ... and {} more (the provenance names the first {})",
            log.malformed as usize - SHOWN_MALFORMED,
            log.malformed_lines.len()
        );
    }
    println!(
        "window {} .. {} ({}): {} requests, {} failed, {} structured",
        p.window.since,
        p.window.until,
        p.window.chosen_by,
        p.window.requests,
        p.selection.failed,
        p.selection.structured
    );
    println!("selection: {}", replace::rule_text(opts));
    println!(
        "replaced {} of {} items (seed {}, share {}); structured {} -> {} of {}",
        p.replaced.len(),
        p.dataset.items,
        p.seed,
        p.share,
        p.dataset.structured_before,
        p.dataset.structured_after,
        p.dataset.items
    );
    for r in &p.replaced {
        println!(
            "  item {} {} <- {}:{} {} ({})",
            r.item, r.old_id, log.file, r.log_line, r.new_id, r.why
        );
    }
    println!(
        "scrubbed: {} secrets, {} PII matches, {} user ids hashed",
        p.scrub.secrets_removed, p.scrub.pii_removed, p.scrub.user_ids_hashed
    );
}
