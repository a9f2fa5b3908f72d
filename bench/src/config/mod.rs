//! Configuration files: `configs/bench.toml` (targets and bench profiles).

pub mod bench;
pub mod source;

pub use bench::*;
pub use source::{ConfigError, Source};
