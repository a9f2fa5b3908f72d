//! `cargo xtask`: infergate's command line.
//!
//! `main` stays thin; each subcommand is a module with a clap struct and a
//! `run(self, sh: &Shell)` method. The exit codes are listed once, in [`exit::EXIT_CODES`], and
//! documented in `docs/exit-codes.md`; ARCHITECTURE.md maps the modules.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use xshell::Shell;

#[cfg(feature = "runtime")]
pub mod accept;
pub mod adr;
pub mod adr_check;
pub mod cli_doc;
pub mod compare;
#[cfg(feature = "runtime")]
pub mod dataset;
pub mod decide_flags;
pub mod deploy;
pub mod engine;
pub mod engine_flags;
#[cfg(feature = "runtime")]
pub mod engine_process;
pub mod gate;
pub mod git;
pub mod gitinfo;
pub mod history;
pub mod history_store;
pub mod import;
pub mod init;
#[cfg(feature = "mcp")]
pub mod mcp;
#[cfg(feature = "runtime")]
pub mod measure;
pub mod model;
#[cfg(feature = "runtime")]
pub mod noise;
pub mod outpath;
#[cfg(feature = "runtime")]
pub mod plan;
pub mod report;
pub mod run_report;
#[cfg(feature = "runtime")]
pub mod selftest;
#[cfg(feature = "runtime")]
pub mod sim;
pub mod spelling;
pub mod test_cmd;
pub mod tune;
#[cfg(feature = "runtime")]
pub mod watch;

// The shared helpers that are pure live in the policy crate; the commands use them under the
// same names.
pub use infergate_policy::{chart, console, exit, settings, template, text, thresholds};

pub use exit::Status;

#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    version,
    about = "infergate: measure LLM inference servers, record decisions, enforce them in CI",
    propagate_version = true
)]
pub struct Cli {
    /// Repository root to work in. Default: the git repository that holds the current
    /// directory (the nearest directory upwards with a `.git`); outside any git repository, the
    /// source tree this binary was built from when the current directory is inside it; else the
    /// current directory.
    #[arg(short = 'C', long = "root", global = true, value_name = "DIR")]
    pub root: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Measure an OpenAI-compatible server (the embedded simulator when no target is set);
    /// `bench merge` joins the run directories of a sharded run.
    #[cfg(feature = "runtime")]
    #[command(args_conflicts_with_subcommands = true)]
    Bench(Box<measure::bench::BenchCli>),
    /// Serve the engine simulator standalone.
    #[cfg(feature = "runtime")]
    Sim(sim::SimCmd),
    /// The bench's own timing error on this machine at a concurrency and event rate, against
    /// the known-answer server in a process of its own; later runs record it.
    #[cfg(feature = "runtime")]
    Selftest(selftest::SelftestCmd),
    /// Accept a candidate engine against a baseline: numeric, engine and business layers.
    #[cfg(feature = "runtime")]
    Acceptance(accept::AcceptCmd),
    /// The governed engine parameters (configs/engine.toml) for a real engine.
    #[command(subcommand)]
    Engine(engine::EngineCmd),
    /// Deployment: `deploy render` writes the Kubernetes manifests of a sharded run.
    #[command(subcommand)]
    Deploy(deploy::DeployCmd),
    /// Datasets: `dataset refresh` replaces a share of a dataset with the slowest or failed
    /// requests of a production log, scrubbed, with their provenance.
    #[cfg(feature = "runtime")]
    #[command(subcommand)]
    Dataset(dataset::DatasetCmd),
    /// Set up this git repository for infergate: bench and engine configs (`--from` the team's
    /// deployment files), decision records, thresholds, workflows; never overwrites.
    Init(init::InitCmd),
    /// Decision records: new, list, accept, supersede, lint, check, thresholds.
    Adr(adr::AdrCmd),
    /// Check a run against thresholds/gate.toml (exit 1 when a blocking threshold fails).
    Gate(gate::GateCmd),
    /// The history of measured sets (`refs/infergate/history`): each metric's series along
    /// main with its change points (`--fail-on-regression`: exit 1 on an unexplained
    /// regression); list, export, merge.
    Trend(history::HistoryCmd),
    /// N trials of the unchanged configuration: each metric's run-to-run CV and the trials per
    /// arm an A/B gate needs to see a given change; the trials go into the noise history.
    #[cfg(feature = "runtime")]
    Noise(noise::NoiseCmd),
    /// Compare two runs or trial sets metric by metric, with intervals and significance.
    Compare(compare::CompareCmd),
    /// Import another tool's results (vllm-bench, guidellm, aiperf) as a run directory.
    Import(import::ImportCmd),
    /// Write report.html for a run, trial set, sweep, strategy comparison or tune directory.
    Report(report::ReportCmd),
    /// Measure a grid of engine configurations, each in its own engine, and pick the winner.
    #[cfg(feature = "runtime")]
    Tune(Box<tune::TuneCmd>),
    /// Run every test of the workspace (with the real engine when LLAMA_SERVER is set).
    #[command(hide = true)]
    Test(test_cmd::TestCmd),
    /// Watch a target's /metrics against the live records' rollback conditions (exit 1 when a
    /// rollback condition holds for its window).
    #[cfg(feature = "runtime")]
    Watch(watch::WatchCmd),
    /// A Model Context Protocol server for coding agents (stdio; `--http PORT` for streamable
    /// HTTP on 127.0.0.1): bench, gate, compare, adr_new, adr_lint, adr_check, acceptance
    /// and explain_record as tools (docs/mcp.md).
    #[cfg(feature = "mcp")]
    Mcp(mcp::McpCmd),
}

impl Command {
    fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        match self {
            #[cfg(feature = "runtime")]
            Command::Bench(c) => c.run(sh),
            #[cfg(feature = "runtime")]
            Command::Sim(c) => c.run(sh),
            #[cfg(feature = "runtime")]
            Command::Selftest(c) => c.run(sh),
            #[cfg(feature = "runtime")]
            Command::Acceptance(c) => c.run(sh),
            Command::Engine(cmd) => cmd.run(sh),
            Command::Deploy(cmd) => cmd.run(sh),
            #[cfg(feature = "runtime")]
            Command::Dataset(cmd) => cmd.run(sh),
            Command::Init(cmd) => cmd.run(sh),
            Command::Adr(cmd) => cmd.run(sh),
            Command::Gate(cmd) => cmd.run(sh),
            Command::Compare(cmd) => cmd.run(sh),
            Command::Import(cmd) => cmd.run(sh),
            Command::Trend(cmd) => cmd.run(sh),
            #[cfg(feature = "runtime")]
            Command::Noise(cmd) => cmd.run(sh),
            Command::Report(cmd) => cmd.run(sh),
            #[cfg(feature = "runtime")]
            Command::Tune(cmd) => cmd.run(sh),
            Command::Test(cmd) => cmd.run(sh),
            #[cfg(feature = "runtime")]
            Command::Watch(cmd) => cmd.run(sh),
            #[cfg(feature = "mcp")]
            Command::Mcp(cmd) => cmd.run(sh),
        }
    }
}

/// The repository root commands work in when `-C` does not name one: see [`find_root`], from
/// the current directory.
pub(crate) fn project_root() -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    find_root(&cwd, &built_root())
}

/// The workspace root this binary was built from.
pub(crate) fn built_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// The root for a command started in `cwd`: the nearest directory at or above `cwd` that holds
/// `.git` (a directory, or the file of a worktree or submodule); outside any git repository,
/// `built` (the source tree of this binary) when `cwd` is inside it, so a source tree without
/// git still works from its subdirectories; else `cwd` itself. An installed binary thus works
/// on the repository it is run in, never silently on the tree it was compiled in.
pub(crate) fn find_root(cwd: &Path, built: &Path) -> PathBuf {
    if let Some(repo) = cwd.ancestors().find(|d| d.join(".git").exists()) {
        return repo.to_path_buf();
    }
    if cwd.starts_with(built) {
        return built.to_path_buf();
    }
    cwd.to_path_buf()
}

/// Parse arguments, run the command, map the result to an exit code. Errors are printed with
/// their context chain; nothing panics on user input.
pub fn main_impl<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let mut args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    // Under the name it was invoked by: `cargo infergate ARGS` runs `cargo-infergate infergate
    // ARGS`, whose first argument is the subcommand's name.
    let tool = text::set_tool(args.first().map_or(std::ffi::OsStr::new(""), |a| a.as_os_str()));
    if tool == "cargo infergate" && args.get(1).is_some_and(|a| a == "infergate") {
        args.remove(1);
    }
    // Old spellings still run for one release, each with a warning naming the new one.
    for old in spelling::rewrite(&mut args) {
        eprintln!("{}", spelling::warning(&old));
    }
    let command = <Cli as clap::CommandFactory>::command().name(tool).bin_name(tool);
    #[cfg_attr(not(feature = "runtime"), allow(unused_mut))]
    let mut cli = match command
        .try_get_matches_from(&args)
        .and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m))
    {
        Ok(cli) => cli,
        Err(e) => {
            // Help and errors in the invoked name, the texts written for `cargo xtask` too.
            use std::io::IsTerminal;
            let styled = e.render();
            let terminal = if e.use_stderr() {
                std::io::stderr().is_terminal()
            } else {
                std::io::stdout().is_terminal()
            };
            let shown = if terminal { styled.ansi().to_string() } else { styled.to_string() };
            let shown = text::as_invoked(&shown);
            if e.use_stderr() {
                eprint!("{shown}");
            } else {
                print!("{shown}");
            }
            let exit = if e.use_stderr() { exit::USAGE_ERROR } else { exit::SUCCESS };
            return exit.exit_code();
        }
    };
    // A run records the command that made it, as `cargo xtask ...` with these arguments.
    #[cfg(feature = "runtime")]
    match &mut cli.command {
        Command::Bench(b) => {
            b.args.command_line = Some(plan::command_line(args.get(1..).unwrap_or_default()));
        }
        Command::Tune(t) => {
            t.bench.command_line = Some(plan::command_line(args.get(1..).unwrap_or_default()));
        }
        _ => {}
    }
    match run_cli(cli) {
        Ok(status) => status.exit_code(),
        Err(e) => {
            exit::print_error(&e);
            exit::USAGE_ERROR.exit_code()
        }
    }
}

/// Run a parsed command line.
pub(crate) fn run_cli(cli: Cli) -> anyhow::Result<Status> {
    let root = cli.root.unwrap_or_else(project_root);
    let sh = Shell::new()?;
    sh.change_dir(&root);
    cli.command.run(&sh)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_is_the_git_repository_of_the_current_directory() {
        let t = tempfile::tempdir().unwrap();
        let (repo, built, plain) =
            (t.path().join("repo"), t.path().join("built"), t.path().join("plain"));
        for d in [repo.join("a/b"), built.join("xtask"), plain.join("x")] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::create_dir(repo.join(".git")).unwrap();
        // In a repository, from any depth: that repository, even when another tree built us.
        assert_eq!(find_root(&repo.join("a/b"), &built), repo);
        assert_eq!(find_root(&repo, &built), repo);
        // A worktree or submodule has a `.git` file; the nearest one wins.
        std::fs::write(repo.join("a/.git"), "gitdir: ../.git/worktrees/a\n").unwrap();
        assert_eq!(find_root(&repo.join("a/b"), &built), repo.join("a"));
        // Outside git: the built tree when inside it, else the current directory.
        assert_eq!(find_root(&built.join("xtask"), &built), built);
        if !t.path().ancestors().any(|d| d.join(".git").exists()) {
            assert_eq!(find_root(&plain.join("x"), &built), plain.join("x"));
        }
    }

    #[test]
    fn this_checkout_is_found_from_the_crate_directory() {
        // `cargo test` runs in xtask/; the workspace holds the `.git`.
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        let root = find_root(here, &built_root());
        assert!(root.join("Cargo.toml").exists() && root.join("configs").is_dir(), "{root:?}");
    }
}
