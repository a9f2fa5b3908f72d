//! Configuration files: `configs/bench.toml` (targets and bench profiles) and
//! `configs/engine.toml` (the governed inference parameters).

pub mod bench;
pub mod cancel;
pub mod engine;
pub mod lengths;
pub mod limits;
pub mod noise;
pub mod source;
pub mod steady;

pub use bench::*;
pub use cancel::{CancelConfig, CancelPlan};
pub use engine::{
    BatchSection, BatchStrategy, DeviceSection, Dtype, EngineConfig, EngineSection, Quantization,
    SchedulerPolicy, SchedulerSection, SimSection, TokenIntervalSection, UnknownStrategy,
};
pub use lengths::LengthDist;
pub use noise::NoiseConfig;
pub use source::{ConfigError, Source};
pub use steady::SteadyConfig;
