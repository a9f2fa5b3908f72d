//! `known-answer-server`: the simulator's timing mode in a process of its own, the server of the
//! known-answer tests (`bench/tests/timing`).
//!
//! The known answers must not share a runtime, a thread or a process with the client they
//! check: a stall of the client's process then delays only the client's reading, which is the
//! error the tests measure, instead of delaying the server's answers and the client's reading
//! alike so that the two cancel out. The server schedules each chunk at a due time and records
//! when it handed the chunk over, so a late server shows as its own lateness.
//!
//! Usage: `known-answer-server TIMING_JSON [USAGE]`, where `TIMING_JSON` is a `[sim.timing]`
//! table as JSON and `USAGE` is `final` (the default), `last_chunk`, `every` or `none`. It binds
//! 127.0.0.1 on a free port, prints `listening http://ADDR` on standard output, serves until its
//! standard input closes, then prints its per-request records (`SimRecord`) as JSON lines and
//! exits. Exit code 2 on bad arguments.

use std::io::{Read, Write};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use bench::config::{TimingConfig, UsageMode};
use bench::sim::{self, SimOptions, TimingBackend};

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
    // One thread serves every connection and keeps every timer: the process is the server.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let opts = SimOptions { usage, ..SimOptions::default() };
        let backend = Arc::new(TimingBackend::new(timing));
        let handle = sim::start(opts, backend, ([127, 0, 0, 1], 0).into()).await?;
        {
            let mut out = std::io::stdout().lock();
            writeln!(out, "listening {}", handle.base_url())?;
            out.flush()?;
        }
        // Serve until the test closes our standard input (or goes away).
        tokio::task::spawn_blocking(|| std::io::stdin().read_to_end(&mut Vec::new())).await??;
        let records = handle.records();
        handle.shutdown().await;
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        for r in &records {
            serde_json::to_writer(&mut out, r)?;
            writeln!(out)?;
        }
        out.flush()?;
        Ok(())
    })
}
