//! `cargo xtask engine`: the governed engine parameters (`configs/engine.toml`) for a real
//! engine.
//!
//! `engine args` prints the command line that starts vLLM (or SGLang) with exactly the
//! parameters of the file ([`crate::engine_flags`] renders it); notes on parameters that do not
//! map one to one go to stderr. `engine serve` starts an engine (`crate::engine_process`, with the `runtime` feature).

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use infergate_model::config::{BatchStrategy, EngineConfig, Source};
use xshell::Shell;

use crate::engine_flags::{Format, RENDERED, engine_value, render, write};
use crate::exit::Status;
use infergate_model::EngineKind;

#[derive(Debug, Subcommand)]
pub enum EngineCmd {
    /// Print the command line that starts an engine with the parameters of an engine config.
    Args(ArgsCmd),
    /// Start a real engine (llama.cpp or vLLM) with the parameters of an engine config.
    #[cfg(feature = "runtime")]
    Serve(crate::engine_process::ServeCmd),
    /// Install the small real model the tests use into the cache (once) and print its path.
    #[command(hide = true)]
    Model,
}

impl EngineCmd {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        match self {
            EngineCmd::Args(cmd) => cmd.run(sh),
            #[cfg(feature = "runtime")]
            EngineCmd::Serve(cmd) => cmd.run(sh),
            EngineCmd::Model => {
                println!("{}", crate::model::ensure(sh)?.display());
                Ok(Status::Success)
            }
        }
    }
}

#[derive(Debug, Args)]
pub struct ArgsCmd {
    /// The engine config file (engine parameters).
    #[arg(long = "engine-config", value_name = "FILE", default_value = "configs/engine.toml")]
    pub config: PathBuf,
    /// Engine whose flags to render.
    #[arg(long, value_parser = engine_value(&RENDERED), default_value = "vllm")]
    pub engine: EngineKind,
    /// Where the parameters go: a shell command, or the fragment of a deployment file (Helm
    /// values, a container's args, vLLM's --config YAML, a compose command), so a governed
    /// source can be generated from the engine config instead of kept apart.
    #[arg(long, value_enum, default_value_t = Format::Shell)]
    pub format: Format,
}

impl ArgsCmd {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        let path = sh.current_dir().join(&self.config);
        let invalid = || format!("invalid engine config {}", self.config.display());
        let source = Source::read(&path).with_context(invalid)?;
        let cfg = EngineConfig::from_source(&source).with_context(invalid)?;
        if cfg.batch.strategy != BatchStrategy::Continuous {
            let err = infergate_model::config::engine::locate(
                &source,
                &infergate_model::config::ConfigKey::literal("batch.strategy"),
                &format!(
                    "\"{}\" is a simulator strategy; vLLM and SGLang batch continuously, so no \
                     engine runs this file as measured. Render a config with strategy = \
                     \"continuous\" (or without [batch])",
                    cfg.batch.strategy
                ),
            );
            return Err(anyhow::Error::new(err).context(invalid()));
        }
        let rendered = render(&cfg, self.engine).map_err(anyhow::Error::msg)?;
        let text = write(&rendered, self.engine, self.format).map_err(anyhow::Error::msg)?;
        print!("{text}");
        for note in &rendered.notes {
            eprintln!("note: {note}");
        }
        Ok(Status::Success)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "[engine]\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\ndtype = \"bfloat16\"\n\
        max_model_len = 8192\n[scheduler]\nmax_num_seqs = 128\nmax_num_batched_tokens = 8192\n\
        enable_chunked_prefill = false\n[device]\nname = \"H100-SXM-80GB\"\n";

    #[test]
    fn the_command_reads_the_file_and_reports_errors_with_their_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("configs")).unwrap();
        let file = dir.path().join("configs/engine.toml");
        std::fs::write(&file, BASE).unwrap();
        let sh = Shell::new().unwrap();
        sh.change_dir(dir.path());
        let cmd = || {
            EngineCmd::Args(ArgsCmd {
                config: "configs/engine.toml".into(),
                engine: EngineKind::Vllm,
                format: Format::Shell,
            })
        };
        assert_eq!(cmd().run(&sh).unwrap(), Status::Success);
        std::fs::write(&file, BASE.replace("max_num_seqs = 128", "max_num_seqs = 0")).unwrap();
        let err = cmd().run(&sh).unwrap_err();
        let text = crate::exit::render_error(&err);
        assert!(text.contains("configs/engine.toml:6:"), "{text}");
        assert!(text.contains("max_num_seqs"), "{text}");
        // A simulator-only batching strategy is refused at its line.
        std::fs::write(&file, format!("{BASE}[batch]\nstrategy = \"fixed\"\n")).unwrap();
        let err = cmd().run(&sh).unwrap_err();
        let text = crate::exit::render_error(&err);
        assert!(text.contains("configs/engine.toml:12:"), "{text}");
        assert!(text.contains("continuously"), "{text}");
        std::fs::write(&file, format!("{BASE}[batch]\nstrategy = \"continuous\"\n")).unwrap();
        assert_eq!(cmd().run(&sh).unwrap(), Status::Success);
    }
}
