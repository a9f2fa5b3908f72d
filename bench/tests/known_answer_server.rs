//! `known-answer-server`: the simulator's timing mode in a process of its own, the server of the
//! known-answer tests (`bench/tests/timing`); its logic is `bench::known_answer::server`, which
//! `cargo xtask selftest` runs too.
//!
//! Usage: `known-answer-server TIMING_JSON [USAGE]`, where `TIMING_JSON` is a `[sim.timing]`
//! table as JSON and `USAGE` is `final` (the default), `last_chunk`, `every` or `none`. It binds
//! 127.0.0.1 on a free port, prints `listening http://ADDR` on standard output, serves until its
//! standard input closes, then prints its per-request records (`SimRecord`) as JSON lines and
//! exits. Exit code 2 on bad arguments.

use std::process::ExitCode;

use anyhow::Context;
use infergate_model::config::{TimingConfig, UsageMode};

/// The most concurrent connections the timing tests open.
const OPEN_FILES: u32 = 256;

fn main() -> ExitCode {
    match serve() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("known-answer-server: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn serve() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let usage_line = "usage: known-answer-server TIMING_JSON [final|last_chunk|every|none]";
    let timing: TimingConfig =
        serde_json::from_str(&args.next().context(usage_line)?).context("TIMING_JSON")?;
    let usage: UsageMode = match args.next() {
        Some(u) => serde_json::from_value(serde_json::Value::String(u)).context(usage_line)?,
        None => UsageMode::Final,
    };
    bench::known_answer::server::serve(timing, usage, OPEN_FILES)
}
