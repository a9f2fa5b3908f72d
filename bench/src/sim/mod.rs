//! The embedded engine simulator: an OpenAI-compatible server backed by a timing model (exact,
//! known-answer schedules) or an engine model (continuous batching driven by the engine config).

pub mod backend;
pub mod server;
pub mod text;
pub mod timing;

pub use backend::{Backend, FinishReason, GenEvent, GenRequest};
pub use server::{SimHandle, SimOptions, SimRecord, start};
pub use timing::TimingBackend;

use std::path::Path;
use std::sync::Arc;

use crate::config::{SimConfig, SimMode};
use crate::summary::EngineParams;

/// An embedded simulator ready to start: its backend, server options and the engine
/// parameters it models (recorded in summaries).
pub struct Embedded {
    pub backend: Arc<dyn Backend>,
    pub options: SimOptions,
    pub engine: Option<EngineParams>,
}

/// Build the embedded simulator a bench profile describes. `root` resolves relative paths.
pub fn embedded(cfg: &SimConfig, root: &Path) -> Result<Embedded, String> {
    let _ = root;
    let options = |model: String| SimOptions {
        model,
        usage: cfg.usage,
        faults: cfg.faults.clone(),
        api_key: None,
        corruption_rate: cfg.corruption_rate,
        logprob_drift: cfg.logprob_drift,
    };
    match cfg.mode {
        SimMode::Timing => Ok(Embedded {
            backend: Arc::new(TimingBackend::new(cfg.timing.clone())),
            options: options("sim/timing".into()),
            engine: None,
        }),
        SimMode::Engine => Err(format!(
            "sim.mode = \"engine\" needs the engine model ({}), which this build does not include",
            cfg.engine_config
        )),
    }
}
