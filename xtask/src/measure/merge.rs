//! `cargo xtask bench merge DIR...`: the shard run directories of a sharded run
//! (`bench --shard I/N`) merged into one run directory (`infergate_model::merge`), its report and the
//! table of the shards (status, requests, start offset, window).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use infergate_model::merge::{MergeReport, MergedShard};
use infergate_model::summary::{Invocation, RunStatus, Summary};
use xshell::Shell;

use crate::console::ConsoleTable;
use crate::exit::Status;
use crate::text::fmt_opt;

#[derive(Clone, Debug, Args)]
pub struct MergeCmd {
    /// The shards' run directories, one per shard (any order).
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// The merged run directory (default: target/bench/<run id>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Only the shards' table and the directory, not the run's tables.
    #[arg(short, long)]
    pub quiet: bool,
}

impl MergeCmd {
    /// Merge; exit 1 when the merge is incomplete (a shard missing or not complete) or no
    /// request succeeded: the merged directory is written and says why.
    pub fn run(self, sh: &Shell, command: Option<String>) -> anyhow::Result<Status> {
        let root = sh.current_dir();
        let dirs: Vec<PathBuf> = self.dirs.iter().map(|d| root.join(d)).collect();
        let out = match &self.out {
            Some(d) => root.join(d),
            None => {
                let first = Summary::read(&dirs[0]).context("cannot read the first shard")?;
                crate::measure::default_out_dir(&root, "bench", &first.run_id)
            }
        };
        let invocation = command.map(|command| Invocation { command, part: None });
        let merged = infergate_model::merge::merge(&dirs, &out, invocation)
            .with_context(|| format!("cannot merge the shards into {}", out.display()))?;
        let s = &merged.summary;
        if !self.quiet {
            println!("{}", crate::run_report::render(s));
        }
        println!("{}", shard_table(&merged.report));
        println!("{}", spread_line(&merged.report));
        println!("merged run directory: {}", out.display());
        Ok(match s.status {
            RunStatus::Complete => Status::Success,
            _ => {
                let why = s.notes.first().cloned().unwrap_or_default();
                eprintln!("error: the merged run is {}: {why}", status_word(s.status));
                Status::PolicyViolated
            }
        })
    }
}

fn status_word(s: RunStatus) -> String {
    let v = serde_json::to_value(s).unwrap_or_default();
    v.as_str().unwrap_or_default().to_string()
}

/// The shards as merged, one row each, then the missing ones.
pub(crate) fn shard_table(report: &MergeReport) -> ConsoleTable {
    let mut t = ConsoleTable::framed([
        "shard",
        "status",
        "requests",
        "start offset ms",
        "window s",
        "directory",
    ])
    .right_aligned(2..5);
    let row = |s: &MergedShard| {
        let n = report.shard_count;
        vec![
            format!("{}/{n}", s.index),
            if s.problems.is_empty() {
                status_word(s.status)
            } else {
                format!("incomplete ({})", s.problems.join("; "))
            },
            s.requests.to_string(),
            format!("{:.3}", s.offset_ms),
            fmt_opt(s.window.duration_s, 3),
            s.dir.to_string(),
        ]
    };
    for s in &report.shards {
        t.row(row(s));
    }
    for i in &report.missing {
        t.row([format!("{i}/{}", report.shard_count), "missing".into()]);
    }
    t
}

/// The spread of the shards' windows, one line.
pub(crate) fn spread_line(report: &MergeReport) -> String {
    format!(
        "shards' loads started {:.3} ms apart and ended {} ms apart; common window {} s, {} ok \
         requests/s in it",
        report.start_spread_ms,
        fmt_opt(report.end_spread_ms, 3),
        fmt_opt(report.common_window.duration_s, 3),
        fmt_opt(report.common_requests_per_s, 2)
    )
}
