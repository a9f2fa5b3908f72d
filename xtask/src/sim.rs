//! `cargo xtask sim`: serve the engine simulator standalone.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use infergate_model::config::Override;
use xshell::Shell;

use crate::exit::Status;

#[derive(Debug, Args)]
pub struct SimCmd {
    /// Address to bind (loopback by default).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// Port (0: chosen by the OS).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Bench profile whose [sim] section configures the simulator.
    #[arg(short, long, default_value = "default")]
    pub profile: String,
    /// Bench config file (default: configs/bench.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Override a field of the profile, e.g. --set sim.timing.ttft_ms=80.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Inject a fault with a probability, e.g. --fault http_503=0.05 (repeatable).
    #[arg(long = "fault", value_name = "NAME=P")]
    pub faults: Vec<String>,
    /// Require `Authorization: Bearer $VAR` on completion requests.
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,
    /// The known-answer server of `cargo xtask selftest` (`bench::known_answer::server`): this
    /// `[sim.timing]` table as JSON, served on one thread on 127.0.0.1 until standard input
    /// closes, then the per-request records on standard output.
    #[arg(long, hide = true, value_name = "TIMING_JSON")]
    pub known_answer: Option<String>,
    /// The known-answer server's connections (its open-file limit is raised for them).
    #[arg(long, hide = true, default_value_t = 0, requires = "known_answer")]
    pub open_files: u32,
}

impl SimCmd {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        if let Some(timing) = &self.known_answer {
            let timing = serde_json::from_str(timing).context("--known-answer TIMING_JSON")?;
            let usage = infergate_model::config::UsageMode::Final;
            bench::known_answer::server::serve(timing, usage, self.open_files)?;
            return Ok(Status::Success);
        }
        let root = sh.current_dir();
        let cfg = crate::measure::bench::load_config(&root, self.config.as_deref())?;
        let mut overrides = Vec::new();
        for s in &self.sets {
            overrides.push(Override::parse(s).map_err(anyhow::Error::msg)?);
        }
        for f in &self.faults {
            let o = Override::parse(f).map_err(anyhow::Error::msg)?;
            let faults = infergate_model::config::ConfigKey::literal("sim.faults");
            overrides.push(Override { key: o.key.under(&faults), ..o });
        }
        let profile = cfg.resolve(&self.profile, &overrides)?.profile;
        if profile.sim.save_scheduler_decision {
            eprintln!(
                "note: save_scheduler_decision writes the decision log into a bench run's \
                 directory; the standalone simulator keeps none"
            );
        }
        let rt = crate::measure::runtime()?;
        // The engine model's step loop is a task: build the simulator inside the runtime.
        let _runtime = rt.enter();
        let mut embedded = infergate_sim::embedded(&profile.sim, &root)?;
        if let Some(var) = &self.api_key_env {
            let key = bench::client::read_api_key(var, "sim")?;
            embedded.options.api_key = Some(key);
        }
        if !self.host.is_loopback() {
            eprintln!(
                "warning: serving on {} (not loopback): the simulator is reachable from the network",
                self.host
            );
        }
        rt.block_on(async {
            // Ctrl-C and SIGTERM both stop it (heard from here on).
            let mut signals = bench::runner::StopSignals::listen();
            let handle = infergate_sim::start(
                embedded.options,
                embedded.backend,
                SocketAddr::new(self.host, self.port),
            )
            .await
            .with_context(|| format!("cannot listen on {}:{}", self.host, self.port))?;
            println!("infergate simulator ({})", handle.describe());
            println!("serving {} at {}/v1 (Ctrl-C to stop)", handle.model(), handle.base_url());
            let name = signals.next().await;
            eprintln!("{name}: stopping the simulator");
            handle.shutdown().await;
            Ok(Status::Interrupted)
        })
    }
}
