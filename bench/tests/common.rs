//! Helpers shared by the integration tests: start a simulator, run the bench against it.

#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use bench::config::{BenchConfig, Override, Profile, Source, Target, TimingConfig};
use bench::runner::{self, RunControl, RunOutcome, RunSpec};
use bench::sim::{self, SimHandle, SimOptions, TimingBackend};

/// Start a timing-mode simulator on an OS-chosen loopback port.
pub async fn start_timing_sim(timing: TimingConfig, opts: SimOptions) -> SimHandle {
    sim::start(opts, Arc::new(TimingBackend::new(timing)), ([127, 0, 0, 1], 0).into())
        .await
        .expect("start the simulator")
}

/// A profile from TOML text (the `[profile.default]` body) plus overrides.
pub fn profile(toml_text: &str, overrides: &[&str]) -> Profile {
    let cfg = BenchConfig::from_source(Source::new("test.toml", toml_text.to_string()))
        .expect("valid test config");
    let o: Vec<Override> = overrides.iter().map(|s| Override::parse(s).unwrap()).collect();
    cfg.resolve("default", &o).expect("valid test profile").profile
}

/// Run the bench against a running simulator.
pub async fn run_against(handle: &SimHandle, profile: Profile, dir: &Path) -> RunOutcome {
    run_with_control(handle, profile, dir, RunControl::default()).await
}

pub async fn run_with_control(
    handle: &SimHandle,
    profile: Profile,
    dir: &Path,
    control: RunControl,
) -> RunOutcome {
    run_url_with_control(&handle.base_url(), handle.model(), profile, dir, control).await
}

pub async fn run_against_url(
    base_url: &str,
    model: &str,
    profile: Profile,
    dir: &Path,
) -> RunOutcome {
    run_url_with_control(base_url, model, profile, dir, RunControl::default()).await
}

pub async fn run_url_with_control(
    base_url: &str,
    model: &str,
    profile: Profile,
    dir: &Path,
    control: RunControl,
) -> RunOutcome {
    let target = Target::at(base_url).with_model(model);
    let spec = RunSpec::quiet(profile, ("sim".into(), target), dir.join("run"), "test");
    runner::run(spec, control).await.expect("the run completes")
}
