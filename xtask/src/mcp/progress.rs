//! Progress notifications of one tool call (`notifications/progress`), sent only when the client
//! asked for them with a progress token. The progress value is the records the call's runs have
//! written plus the lines of diagnostics its command printed: both only grow, so every
//! notification carries a larger value than the one before, as the protocol requires.

use std::sync::Mutex;

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};

/// The progress of one call.
pub struct Progress {
    to: Option<(Peer<RoleServer>, ProgressToken)>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    records: f64,
    lines: f64,
    sent: Option<f64>,
    total: Option<f64>,
    last_line: Option<String>,
}

impl Progress {
    /// Progress to `peer` under `token`; nothing is sent without a token.
    pub fn new(peer: Peer<RoleServer>, token: Option<ProgressToken>) -> Progress {
        Progress { to: token.map(|t| (peer, t)), state: Mutex::default() }
    }

    /// The first notification: what runs, and where it writes.
    pub async fn start(&self, what: &str) {
        self.state.lock().expect("progress state").last_line = Some(what.to_string());
        self.send().await;
    }

    /// A line the command printed.
    pub async fn message(&self, line: &str) {
        {
            let mut s = self.state.lock().expect("progress state");
            s.lines += 1.0;
            s.last_line = Some(line.to_string());
        }
        self.send().await;
    }

    /// The records written so far (of `total`, when known).
    pub async fn advance(&self, records: f64, total: Option<f64>) {
        {
            let mut s = self.state.lock().expect("progress state");
            if records <= s.records {
                return;
            }
            s.records = records;
            s.total = total;
        }
        self.send().await;
    }

    async fn send(&self) {
        let Some((peer, token)) = &self.to else { return };
        let param = {
            let mut s = self.state.lock().expect("progress state");
            let value = s.records + s.lines;
            if s.sent.is_some_and(|sent| value <= sent) {
                return;
            }
            s.sent = Some(value);
            let counted = match s.total {
                Some(t) => format!("{} of {t} requests recorded", s.records),
                None => format!("{} requests recorded", s.records),
            };
            let message = match &s.last_line {
                Some(l) => format!("{counted}; {l}"),
                None => counted,
            };
            ProgressNotificationParam::new(token.clone(), value).with_message(message)
        };
        // A client that went away cannot be told; the call goes on and ends as it would.
        let _ = peer.notify_progress(param).await;
    }
}
