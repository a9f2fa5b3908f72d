//! `cargo xtask selftest`: the bench's own timing error on this machine, at the concurrency and
//! event rate the user names, against the known-answer server in a process of its own
//! (`cargo xtask sim --known-answer`, hidden; `infergate_model::selftest`).
//!
//! It prints the bench's TTFT error and inter-token gap error (p50 / p99) and the server's
//! lateness apart, judged against the known-answer bounds, and writes them to
//! `target/selftest/latest.json`, which later runs on this host record as
//! `environment.selftest` for [`infergate_model::selftest::RECENT_DAYS`] days. Exit 1 (policy-violated)
//! when the bench's error broke a bound while the machine was quiet; exit 3 (inconclusive) when
//! the machine stalled every attempt.

use std::process::Command;

use anyhow::Context;
use bench::known_answer::run::{self, Plan};
use clap::Args;
use infergate_model::config::TimingConfig;
use infergate_model::floor::SelftestFile;
use infergate_model::selftest::{self, SelftestOutcome, SelftestRecord};
use xshell::Shell;

use crate::exit::Status;

/// The default rate's ceiling (tokens per second in all): two cores carry it with the server on
/// schedule at concurrency 1000 (a gap of 100 ms per stream), where 100 per stream (100,000 in
/// all) made the server late (p99 6-9 ms on the quiet machine) and the bench's TTFT error p99
/// 217-684 ms (docs/performance.md).
const DEFAULT_MAX_RATE: f64 = 10_000.0;

#[derive(Debug, Args)]
pub struct SelftestCmd {
    /// Concurrent streams.
    #[arg(long, default_value_t = 32)]
    pub concurrency: u32,
    /// Tokens per second across all streams, one token per event (default: 100 per stream, a
    /// token every 10 ms on each, and at most 10,000 in all).
    #[arg(long, value_name = "R")]
    pub tokens_per_s: Option<f64>,
    /// Measured requests (default: 10 per stream, at least 100 and at most 100,000); 64 tokens
    /// each, after one warmup request per stream.
    #[arg(long)]
    pub requests: Option<u64>,
    /// Also write the result as JSON to FILE (`-`: to standard output, instead of the text):
    /// the record written to target/selftest/latest.json.
    #[arg(long, value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,
}

impl SelftestCmd {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        let root = sh.current_dir();
        let rate = self
            .tokens_per_s
            .unwrap_or((100.0 * f64::from(self.concurrency)).min(DEFAULT_MAX_RATE));
        let requests = self
            .requests
            .unwrap_or((10 * u64::from(self.concurrency)).clamp(100, run::MAX_REQUESTS));
        let plan = Plan::new(self.concurrency, rate, requests)?;
        // Both processes hold one end of every connection.
        bench::fdlimit::ensure_open_files(plan.concurrency, true)?;
        let exe =
            std::env::current_exe().context("cannot find this program to start the server")?;
        let server = move |timing: &TimingConfig, open_files: u32| {
            let mut c = Command::new(&exe);
            c.args(["sim", "--known-answer"])
                .arg(serde_json::to_string(timing).expect("a timing config serialises"))
                .args(["--open-files", &open_files.to_string()]);
            c
        };
        eprintln!(
            "self-test: concurrency {}, {} tokens/s ({:.3} ms per token on each stream), {} requests of {} tokens",
            plan.concurrency,
            plan.tokens_per_s,
            plan.itl_ms(),
            plan.requests,
            run::MAX_TOKENS
        );
        let work = root.join("target").join("selftest");
        let rt = crate::measure::runtime()?;
        let outcome =
            rt.block_on(run::run(&plan, &server, &work, &mut |line| eprintln!("{line}")))?;
        let fingerprint = infergate_model::summary::Environment::detect().fingerprint();
        let record = outcome.record(&plan, fingerprint, load_avg());
        let path = SelftestFile::new(record.clone()).write(&root)?;
        if let Some(file) = &self.json {
            crate::outpath::write_json(&root, file, &record)?;
        }
        if self.json.as_deref() != Some(std::path::Path::new("-")) {
            print!("{}", text(&record));
        }
        eprintln!("written {}", path.display());
        Ok(match outcome.verdict {
            SelftestOutcome::WithinBounds => Status::Success,
            SelftestOutcome::BenchError => {
                eprintln!("error: {}", outcome.message);
                Status::PolicyViolated
            }
            SelftestOutcome::MachineStalled => {
                eprintln!("{}", outcome.message);
                let late = outcome.figures.server_late_ms.p50;
                if late > selftest::SERVER_LATE_P50_MS {
                    eprintln!(
                        "the known-answer server was {late:.1} ms late at p50: this machine does not carry {} tokens/s with both processes on schedule; lower --tokens-per-s, or measure when the machine is quiet",
                        plan.tokens_per_s
                    );
                }
                Status::Inconclusive
            }
        })
    }
}

fn load_avg() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    infergate_model::hostnoise::parse_loadavg(&text).ok()
}

/// The result for a reader: the three distributions beside their bounds, the verdict, and a
/// row for docs/performance.md's table.
pub fn text(r: &SelftestRecord) -> String {
    use selftest::*;
    let f = &r.figures;
    let row = |what: &str, s: &Spread, bound: String| {
        format!(
            "{what:<28} {:>9.3} {:>9.3} {:>9.3} {:>9.3}   {bound}\n",
            s.p50, s.p99, s.min, s.max
        )
    };
    let mut out = format!(
        "{:<28} {:>9} {:>9} {:>9} {:>9}   bound p50 / p99\n",
        "(ms)", "p50", "p99", "min", "max"
    );
    out += &row(
        "bench TTFT error",
        &f.ttft_error_ms,
        format!("{TTFT_ERROR_P50_MS} / {TTFT_ERROR_P99_MS}, min {TTFT_ERROR_MIN_MS}"),
    );
    out += &row(
        "bench gap error",
        &f.gap_error_ms,
        format!("{GAP_ERROR_P50_MS} / {GAP_ERROR_P99_MS}"),
    );
    out += &row(
        "server lateness",
        &f.server_late_ms,
        format!("{SERVER_LATE_P50_MS} / {SERVER_LATE_P99_MS} (the machine's, not the bench's)"),
    );
    let late = if f.server_on_schedule() {
        "the server's lateness within its bounds"
    } else {
        "the server was late: the machine delayed it (not the bench's error)"
    };
    out += &format!(
        "{} requests, {} gaps, {} attempt(s); {late}\n{}\n",
        f.ttft_error_ms.n,
        f.gap_error_ms.n,
        r.attempts,
        r.verdict.words()
    );
    let load = r.load_avg_1m.map_or("load unknown".to_string(), |l| format!("load {l:.2}"));
    out += &format!(
        "| {} | {} | {:.3} / {:.3} | {:.3} / {:.3} | {:.3} / {:.3} | {}, {} |\n",
        r.concurrency,
        r.tokens_per_s,
        f.ttft_error_ms.p50,
        f.ttft_error_ms.p99,
        f.gap_error_ms.p50,
        f.gap_error_ms.p99,
        f.server_late_ms.p50,
        f.server_late_ms.p99,
        load,
        r.at,
    );
    out
}
