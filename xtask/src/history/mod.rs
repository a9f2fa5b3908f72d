//! `cargo xtask trend`: the history kept in git (`crate::history_store`). Without a
//! subcommand, each metric's series along main's first-parent commits with its change points
//! ([`series`], [`view`]), `--check` failing on an unexplained regression; `list`, `export` and
//! `merge` work on the entries. The gates append to it and pool from it
//! (`crate::history_store::gating`, `infergate_policy::history::priors`).

pub mod series;
pub mod view;

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use xshell::Shell;

use crate::console::ConsoleTable;
use crate::exit::Status;
use crate::history_store as store;
use crate::outpath::Output;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct HistoryCmd {
    #[command(subcommand)]
    pub action: Option<HistoryAction>,
    #[command(flatten)]
    pub series: view::SeriesArgs,
}

#[derive(Debug, Subcommand)]
pub enum HistoryAction {
    /// One line per entry: when, kind, profile, scenario, fingerprint, trials, commit.
    List,
    /// Every entry as CSV (one row per trial and metric) or JSONL (one entry a line).
    Export {
        #[arg(long, value_enum, default_value_t = Format::Csv)]
        format: Format,
        /// Write here instead of standard output (never inside `.git/`).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Replace --out when it exists.
        #[arg(long, requires = "out")]
        force: bool,
    },
    /// Join another copy of the history (a fetched ref or revision) into this one, by entry id.
    Merge {
        #[arg(value_name = "REF")]
        other: String,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Csv,
    Jsonl,
}

impl HistoryCmd {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        let root = sh.current_dir();
        let Some(action) = self.action else { return self.series.run(&root) };
        match action {
            HistoryAction::List => {
                let h = store::read(&root)?;
                println!("{}", h.describe());
                let mut t = ConsoleTable::markdown([
                    "measured",
                    "kind",
                    "run",
                    "profile",
                    "scenario",
                    "fingerprint",
                    "trials",
                    "commit",
                ]);
                for e in &h.entries {
                    let trials = e.values.values().map(Vec::len).max().unwrap_or(0);
                    let commit = e
                        .commit
                        .as_deref()
                        .map_or("—".to_string(), |c| c.chars().take(12).collect());
                    t.row(vec![
                        e.measured_at.clone(),
                        e.kind.as_str().to_string(),
                        e.run_id.clone(),
                        e.scenario.profile.clone(),
                        e.scenario.key(),
                        e.fingerprint.key(),
                        trials.to_string(),
                        commit,
                    ]);
                }
                println!("{t}");
                Ok(Status::Success)
            }
            HistoryAction::Export { format, out, force } => {
                let out = match &out {
                    Some(p) => {
                        let o = [Output { flag: "--out", path: p }];
                        crate::outpath::check(&root, &o, &[], force)?.pop()
                    }
                    None => None,
                };
                let h = store::read(&root)?;
                for p in &h.problems {
                    eprintln!("warning: left out of the export: {p}");
                }
                let text = match format {
                    Format::Csv => infergate_model::history::to_csv(&h.entries),
                    Format::Jsonl => infergate_model::history::to_jsonl(&h.entries),
                };
                match out {
                    Some(path) => {
                        infergate_model::rundir::write_atomic(&path, text.as_bytes())
                            .with_context(|| format!("cannot write {}", path.display()))?;
                    }
                    None => print!("{text}"),
                }
                Ok(Status::Success)
            }
            HistoryAction::Merge { other } => {
                let n = store::merge(&root, &other)?;
                println!("{n} entries of {other} joined into {}", store::HISTORY_REF);
                Ok(Status::Success)
            }
        }
    }
}
