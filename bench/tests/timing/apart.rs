//! The known-answer server in a process of its own (`known-answer-server`, the simulator's
//! timing mode; `bench::known_answer::server`): the client under test and the server that gives the
//! answers share no runtime, no thread and no process, so a stall of the client's process
//! delays only the client's reading, which is exactly the error the tests measure, instead of
//! delaying the server's answers and the client's reading alike so that the two cancel out. The
//! server's own per-request records come back when it stops: when each chunk was due by the
//! schedule and when it was handed to the connection.

use std::process::Command;

use bench::known_answer::server::ServerProcess;
use infergate_model::config::{TimingConfig, UsageMode};
use infergate_sim::SimRecord;

/// The server's process; [`Apart::finish`] stops it and returns its records. Dropped without
/// `finish` (a failed test), the process is killed.
pub struct Apart(ServerProcess);

/// Start `known-answer-server` on 127.0.0.1 with this timing and usage mode.
pub fn start_timing_sim_apart(timing: &TimingConfig, usage: UsageMode) -> Apart {
    let usage = serde_json::to_value(usage).unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_known-answer-server"));
    c.arg(serde_json::to_string(timing).unwrap()).arg(usage.as_str().unwrap());
    Apart(ServerProcess::start(c).expect("start known-answer-server"))
}

impl Apart {
    pub fn base_url(&self) -> &str {
        self.0.base_url()
    }

    /// The model name the simulator serves.
    pub fn model(&self) -> &str {
        self.0.model()
    }

    /// Stop the server (close its input) and read its records.
    pub async fn finish(self) -> Vec<SimRecord> {
        self.0.finish().await.expect("the known-answer server's records")
    }
}
