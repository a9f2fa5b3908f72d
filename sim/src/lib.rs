//! The embedded engine simulator: what `cargo xtask bench` measures when a profile names no
//! target. An OpenAI-compatible server backed by a timing model (exact, known-answer
//! schedules) or the engine model (continuous batching driven by the engine config).
//!
//! The engine model itself (`engine`) is pure, synchronous and runs in virtual time
//! (`predict` checks a sweep stage with it); the server and its backends run on tokio.

pub(crate) mod backend;
pub mod engine;
pub mod predict;
pub mod server;
pub(crate) mod text;
pub(crate) mod timing;

use std::path::Path;
use std::sync::Arc;

pub use crate::backend::{Backend, FinishReason, GenEvent, GenRequest};
pub use crate::server::{SimHandle, SimOptions, SimRecord, start};
pub use crate::timing::TimingBackend;
use infergate_model::config::{ConfigError, SimConfig, SimMode};

/// An embedded simulator ready to start: its backend and server options, and the engine
/// config it models (relative to the root it was built with), whose parameters a run records.
pub struct Embedded {
    pub backend: Arc<dyn Backend>,
    pub options: SimOptions,
    pub engine_config: Option<String>,
}

/// Why an embedded simulator cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error(transparent)]
    EngineConfig(#[from] ConfigError),
    #[error("cannot create {}", path.display())]
    DecisionLog {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Build the embedded simulator a bench profile describes. `root` resolves the engine
/// config's relative path. Must be called inside a tokio runtime (the engine model's step
/// loop is a task).
pub fn embedded(cfg: &SimConfig, root: &Path) -> Result<Embedded, EmbedError> {
    build(cfg, root, None)
}

/// [`embedded`] for a bench run: with `save_scheduler_decision` on, the engine model
/// appends its scheduling decisions to `scheduler_decisions.jsonl` in `run_dir`.
pub fn embedded_for_run(
    cfg: &SimConfig,
    root: &Path,
    run_dir: &Path,
) -> Result<Embedded, EmbedError> {
    build(cfg, root, cfg.save_scheduler_decision.then_some(run_dir))
}

fn build(cfg: &SimConfig, root: &Path, log_dir: Option<&Path>) -> Result<Embedded, EmbedError> {
    let options = |model: String| SimOptions {
        model,
        usage: cfg.usage,
        faults: cfg.faults.clone(),
        api_key: None,
        corruption_rate: cfg.corruption_rate,
        logprob_drift: cfg.logprob_drift,
        only_max_completion_tokens: false,
        keep_prompts: false,
    };
    match cfg.mode {
        SimMode::Timing => Ok(Embedded {
            backend: Arc::new(TimingBackend::new(cfg.timing.clone())),
            options: options("sim/timing".into()),
            engine_config: None,
        }),
        SimMode::Engine => {
            let path = root.join(&cfg.engine_config);
            let mut spec = crate::engine::EngineSpec::load(&path)?;
            if cfg.slowdown != 1.0 {
                spec = spec.slower(cfg.slowdown);
            }
            let model = format!("sim/{}", spec.config.engine.model);
            let engine = crate::engine::Engine::new(&spec).with_noise(&cfg.noise);
            let backend = match log_dir {
                Some(dir) => {
                    let path = dir.join(crate::engine::DECISION_LOG_FILE);
                    crate::engine::EngineBackend::with_engine_and_log(&spec, engine, &path)
                        .map_err(|source| EmbedError::DecisionLog { path, source })?
                }
                None => crate::engine::EngineBackend::with_engine(&spec, engine),
            };
            let ignore = cfg.on_cancel == infergate_model::config::OnCancel::Ignore;
            let backend =
                backend.ignoring_cancels(ignore).with_reasoning_tokens(cfg.reasoning_tokens);
            Ok(Embedded {
                backend: Arc::new(backend),
                options: options(model),
                engine_config: Some(cfg.engine_config.clone()),
            })
        }
    }
}
