//! The known-answer server in a process of its own (`known-answer-server`, the simulator's
//! timing mode): the client under test and the server that gives the answers share no runtime,
//! no thread and no process, so a stall of the client's process delays only the client's
//! reading, which is exactly the error the tests measure, instead of delaying the server's
//! answers and the client's reading alike so that the two cancel out. The server's own
//! per-request records come back when it stops: when each chunk was due by the schedule and
//! when it was handed to the connection.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use bench::config::{TimingConfig, UsageMode};
use bench::sim::SimRecord;

/// The server's process; [`Apart::finish`] stops it and returns its records. Dropped without
/// `finish` (a failed test), the process is killed.
pub struct Apart {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    base_url: String,
}

/// Start `known-answer-server` on 127.0.0.1 with this timing and usage mode.
pub fn start_timing_sim_apart(timing: &TimingConfig, usage: UsageMode) -> Apart {
    let usage = serde_json::to_value(usage).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_known-answer-server"))
        .arg(serde_json::to_string(timing).unwrap())
        .arg(usage.as_str().unwrap())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start known-answer-server");
    let stdin = child.stdin.take();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).expect("the server's first line");
    let base_url = line
        .trim()
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("known-answer-server said {line:?}"))
        .to_string();
    Apart { child, stdin, stdout, base_url }
}

impl Apart {
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The model name the simulator serves.
    pub fn model(&self) -> &str {
        "sim/timing"
    }

    /// Stop the server (close its input) and read its records.
    pub async fn finish(mut self) -> Vec<SimRecord> {
        let stdin = self.stdin.take();
        tokio::task::spawn_blocking(move || {
            drop(stdin);
            let records: Vec<SimRecord> = (&mut self.stdout)
                .lines()
                .map(|l| serde_json::from_str(&l.expect("read a record")).expect("a record"))
                .collect();
            let status = self.child.wait().expect("wait for known-answer-server");
            assert!(status.success(), "known-answer-server ended with {status}");
            records
        })
        .await
        .expect("join")
    }
}

impl Drop for Apart {
    fn drop(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.flush();
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
