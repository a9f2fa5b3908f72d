//! Waiting on something a test can observe (a file, a line a child prints, a count a server
//! keeps, an exit), never on a fixed delay: each wait re-checks its condition, often at first
//! and then every 50 ms, up to a deadline, and a wait that runs out names what it waited for.

use std::io::{BufRead, BufReader, Read};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// The longest pause between two checks of a condition.
const MAX_PAUSE: Duration = Duration::from_millis(50);

/// `cond`'s first value within `within` (checked once more at the deadline), or `None`.
pub fn poll_for<T>(within: Duration, mut cond: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + within;
    let mut pause = Duration::from_millis(1);
    loop {
        if let Some(v) = cond() {
            return Some(v);
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

/// `cond`'s first value; panics naming `what` when none came within `within`.
pub fn wait_for<T>(within: Duration, what: &str, cond: impl FnMut() -> Option<T>) -> T {
    poll_for(within, cond).unwrap_or_else(|| panic!("waited {within:?} for {what}: it never came"))
}

/// Returns once `cond` holds; panics naming `what` when it did not within `within`.
pub fn wait_until(within: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    wait_for(within, what, || cond().then_some(()))
}

/// The lines a child writes to one of its pipes, read on a thread of their own to the pipe's
/// end (so the child never blocks on a full pipe, nor writes to a closed one).
pub struct Lines {
    rx: Receiver<String>,
    /// Every line taken from `rx` so far, for the message of a wait that runs out.
    seen: Vec<String>,
}

impl Lines {
    pub fn of(pipe: impl Read + Send + 'static) -> Lines {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                // Once the test stops listening the rest is drained unread.
                let _ = tx.send(line);
            }
        });
        Lines { rx, seen: Vec::new() }
    }

    /// The first line from here on for which `pred` holds; panics naming `what` (and quoting
    /// what was printed) when none came within `within`, or the pipe closed first.
    pub fn wait_for(
        &mut self,
        within: Duration,
        what: &str,
        pred: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if pred(&line) {
                        return line;
                    }
                }
                Err(e) => {
                    let why = match e {
                        RecvTimeoutError::Timeout => format!("waited {within:?}"),
                        RecvTimeoutError::Disconnected => "the output ended".to_string(),
                    };
                    panic!("{why} for {what}; it printed:\n{}", self.seen.join("\n"))
                }
            }
        }
    }

    /// Every line, those already seen and the rest until the pipe closes (the child has ended).
    pub fn all(mut self) -> String {
        self.seen.extend(self.rx.iter());
        let mut text = self.seen.join("\n");
        text.push('\n');
        text
    }
}
