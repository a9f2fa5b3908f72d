//! The flags every measuring command shares (`bench`, `noise`, `bench ab`, `tune`): the profile,
//! the bench config it comes from and the overrides, one group ([`MeasureFlags`]) flattened into
//! each, so a flag is defined once with one help text and read once into the `BenchCmd` a
//! command measures through.

use std::path::PathBuf;

use clap::Args;

/// The profile a measuring command runs and where it comes from.
#[derive(Clone, Debug, Args)]
pub struct MeasureFlags {
    /// Profile from the bench config.
    #[arg(short, long, default_value = "default")]
    pub profile: String,
    /// Bench config file (default: configs/bench.toml; built-in defaults when that file is
    /// absent).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Override a profile field for every run: KEY=VALUE, e.g. --set
    /// workload.input_lengths=[128,512]; in bench ab an engine-config key (like
    /// engine.gpu_memory_utilization=0.45) changes both arms' engine configs.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
}
