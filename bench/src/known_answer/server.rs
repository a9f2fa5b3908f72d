//! The known-answer server: the simulator's timing mode in a process of its own, for the
//! self-test (`cargo xtask sim --known-answer`, hidden) and the timing tests
//! (`known-answer-server`), which both run [`serve`] in that process and drive it from the other
//! side with [`ServerProcess`].
//!
//! The known answers must not share a runtime, a thread or a process with the client they
//! check: a stall of the client's process then delays only the client's reading, which is the
//! error measured, instead of delaying the server's answers and the client's reading alike so
//! that the two cancel out. The server schedules each chunk at a due time and records when it
//! handed the chunk over, so a late server shows as its own lateness.
//!
//! Protocol: the process binds 127.0.0.1 on a free port, prints `listening http://ADDR` on
//! standard output, serves until its standard input closes, then prints its per-request records
//! (`SimRecord`) as JSON lines and exits.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;

use anyhow::Context;

use infergate_model::config::{TimingConfig, UsageMode};
use infergate_sim::{SimOptions, SimRecord, TimingBackend};

/// The model name the known-answer server serves.
pub const MODEL: &str = "sim/timing";

/// Serve the timing mode on one thread (it serves every connection and keeps every timer: the
/// process is the server) until standard input closes, then print the records. `open_files`:
/// the connections it must hold (the open-file limit is raised for them).
pub fn serve(timing: TimingConfig, usage: UsageMode, open_files: u32) -> anyhow::Result<()> {
    crate::fdlimit::ensure_open_files(open_files, false)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let opts = SimOptions { usage, ..SimOptions::default() };
        let backend = Arc::new(TimingBackend::new(timing));
        let handle = infergate_sim::start(opts, backend, ([127, 0, 0, 1], 0).into()).await?;
        {
            let mut out = std::io::stdout().lock();
            writeln!(out, "listening {}", handle.base_url())?;
            out.flush()?;
        }
        // Serve until the other side closes our standard input (or goes away).
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

/// The server's process; [`ServerProcess::finish`] stops it and returns its records. Dropped
/// without `finish` (a failed run), the process is killed.
pub struct ServerProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    base_url: String,
}

impl ServerProcess {
    /// Start `command` (a program that runs [`serve`]; its arguments already given) and wait for
    /// its address.
    pub fn start(mut command: Command) -> anyhow::Result<ServerProcess> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start the known-answer server {command:?}"))?;
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().context("no stdout")?);
        let mut line = String::new();
        stdout.read_line(&mut line).context("the known-answer server's first line")?;
        let Some(base_url) = line.trim().strip_prefix("listening ").map(str::to_string) else {
            let _ = child.kill();
            let status = child.wait()?;
            anyhow::bail!("the known-answer server said {line:?} and ended with {status}");
        };
        Ok(ServerProcess { child, stdin, stdout, base_url })
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The model name the server serves.
    pub fn model(&self) -> &str {
        MODEL
    }

    /// Stop the server (close its input) and read its records.
    pub async fn finish(mut self) -> anyhow::Result<Vec<SimRecord>> {
        let stdin = self.stdin.take();
        tokio::task::spawn_blocking(move || {
            drop(stdin);
            let mut records = Vec::new();
            for (i, l) in (&mut self.stdout).lines().enumerate() {
                let l = l.context("read the known-answer server's records")?;
                let r = serde_json::from_str(&l)
                    .with_context(|| format!("the known-answer server's record {}", i + 1))?;
                records.push(r);
            }
            let status = self.child.wait().context("wait for the known-answer server")?;
            anyhow::ensure!(status.success(), "the known-answer server ended with {status}");
            Ok(records)
        })
        .await
        .context("join")?
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.flush();
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
