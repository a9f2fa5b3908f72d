//! Configuration files: `configs/bench.toml` (targets and bench profiles) and
//! `configs/engine.toml` (the governed inference parameters).

pub mod bench;
pub(crate) mod cancel;
pub mod engine;
pub mod key;
pub(crate) mod lengths;
pub mod limits;
pub(crate) mod noise;
pub(crate) mod source;
pub(crate) mod steady;

pub use bench::*;
pub use cancel::{CancelConfig, CancelPlan};
pub use engine::{
    BatchSection, BatchStrategy, DeviceSection, Dtype, EngineConfig, EngineSection, Quantization,
    SchedulerPolicy, SchedulerSection, SimSection, TokenIntervalSection, UnknownStrategy,
};
pub use key::{ConfigKey, KeyError, NotATable};
pub use lengths::LengthDist;
pub use noise::NoiseConfig;
pub use source::{ConfigError, Invalid, Source};
pub use steady::SteadyConfig;
