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
#[cfg(feature = "runtime")]
pub mod bench;
pub mod engine;
pub mod engine_flags;
pub mod exit;
pub mod gate;
pub mod gitinfo;
#[cfg(feature = "runtime")]
pub mod measure;
pub mod model;
#[cfg(feature = "runtime")]
pub mod plan;
pub mod report;
#[cfg(feature = "runtime")]
pub mod serve;
pub mod settings;
#[cfg(feature = "runtime")]
pub mod sim;
#[cfg(feature = "runtime")]
pub mod strategies;
#[cfg(feature = "runtime")]
pub mod sweep;
pub mod test_cmd;
pub mod text;
pub mod thresholds;

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
    /// Repository root to work in (default: this workspace).
    #[arg(short = 'C', long = "root", global = true, value_name = "DIR")]
    pub root: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Measure an OpenAI-compatible server (the embedded simulator when no target is set).
    #[cfg(feature = "runtime")]
    Bench(bench::BenchCmd),
    /// Serve the engine simulator standalone.
    #[cfg(feature = "runtime")]
    Sim(sim::SimCmd),
    /// Accept a candidate engine against a baseline: numeric, engine and business layers.
    #[cfg(feature = "runtime")]
    Accept(accept::AcceptCmd),
    /// The governed engine parameters (configs/engine.toml) for a real engine.
    #[command(subcommand)]
    Engine(engine::EngineCmd),
    /// Decision records: new, list, accept, supersede, lint, check, thresholds.
    Adr(adr::AdrCmd),
    /// Check a run against thresholds/gate.toml (exit 1 when a blocking threshold fails).
    Gate(gate::GateCmd),
    /// Run every test of the workspace (with the real engine when LLAMA_SERVER is set).
    Test(test_cmd::TestCmd),
}

impl Command {
    fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        match self {
            #[cfg(feature = "runtime")]
            Command::Bench(c) => c.run(sh),
            #[cfg(feature = "runtime")]
            Command::Sim(c) => c.run(sh),
            #[cfg(feature = "runtime")]
            Command::Accept(c) => c.run(sh),
            Command::Engine(cmd) => cmd.run(sh),
            Command::Adr(cmd) => cmd.run(sh),
            Command::Gate(cmd) => cmd.run(sh),
            Command::Test(cmd) => cmd.run(sh),
        }
    }
}

/// The workspace root this binary was built from.
pub fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

/// Parse arguments, run the command, map the result to an exit code. Errors are printed with
/// their context chain; nothing panics on user input.
pub fn main_impl<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            let exit = if e.use_stderr() { exit::USAGE_ERROR } else { exit::SUCCESS };
            return exit.exit_code();
        }
    };
    match run_cli(cli) {
        Ok(status) => status.exit_code(),
        Err(e) => {
            exit::print_error(&e);
            exit::USAGE_ERROR.exit_code()
        }
    }
}

/// Run a parsed command line.
pub fn run_cli(cli: Cli) -> anyhow::Result<Status> {
    let root = cli.root.unwrap_or_else(project_root);
    let sh = Shell::new()?;
    sh.change_dir(&root);
    cli.command.run(&sh)
}
