//! A tool's command run as a child process of this binary (`cargo xtask -C ROOT ...`): its
//! stdout and stderr captured (never the server's own stdout, the protocol channel of the stdio
//! transport), progress reported from the records its runs stream to disk, and cancellation as
//! Ctrl-C: SIGINT (the command stops sending and writes what it measured), SIGINT again after a
//! grace period (what is in flight is cancelled), then a kill.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use infergate_model::redact::Redactor;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::Command;
use tokio::sync::mpsc;

use super::progress::Progress;

/// Output kept of each stream (the end of it, when longer).
const KEEP_BYTES: usize = 64 * 1024;
/// After the first SIGINT: how long the command may finish its requests in flight.
const GRACE: Duration = Duration::from_secs(2);
/// After the second SIGINT: how long it may take to write its files before it is killed.
const WRITE_WAIT: Duration = Duration::from_secs(15);
/// How often the run directories are looked at for new records.
const POLL: Duration = Duration::from_millis(500);

/// What to run: the arguments after `cargo xtask -C ROOT`, and where its runs stream records.
pub struct Job {
    pub args: Vec<String>,
    /// A directory (relative to the root) whose `requests.jsonl` files, at any depth up to
    /// four, count as progress.
    pub watch: Option<PathBuf>,
    /// The records the whole job is expected to write, when known.
    pub total: Option<f64>,
}

/// How the command ended.
pub struct Finished {
    /// The exit code; `None` when it was killed by a signal.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// The run was cancelled by the client (SIGINT sent).
    pub cancelled: bool,
}

impl Job {
    /// The command line as `cargo xtask ...` (redacted), for results and messages.
    pub(crate) fn command_line(&self, redactor: &Redactor) -> String {
        let args: Vec<String> = self.args.iter().map(|a| crate::text::quote(a)).collect();
        redactor.redact(&format!("cargo xtask {}", args.join(" ")))
    }

    /// Run the job in `root` until it ends or `cancel` fires; progress goes to `progress`.
    pub async fn run(
        &self,
        root: &Path,
        redactor: &Redactor,
        progress: &Progress,
        cancel: impl std::future::Future<Output = ()>,
    ) -> anyhow::Result<Finished> {
        let exe = std::env::current_exe().context("cannot find this program to run the tool")?;
        let mut child = Command::new(exe)
            .arg("-C")
            .arg(root)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("cannot start the tool's command")?;
        let (lines_tx, mut lines) = mpsc::unbounded_channel();
        let out = tokio::spawn(keep(child.stdout.take(), None));
        let err = tokio::spawn(keep(child.stderr.take(), Some(lines_tx)));
        let watch = self.watch.as_ref().map(|w| root.join(w));
        let mut records = RecordCount::default();
        let mut tick = tokio::time::interval(POLL);
        let mut cancelled = false;
        tokio::pin!(cancel);
        let status = loop {
            tokio::select! {
                status = child.wait() => break status.context("cannot wait for the tool's command")?,
                () = &mut cancel => {
                    cancelled = true;
                    break stop(&mut child).await?;
                }
                Some(line) = lines.recv() => progress.message(&redactor.redact(&line)).await,
                _ = tick.tick() => {
                    if let Some(dir) = &watch {
                        progress.advance(records.count(dir) as f64, self.total).await;
                    }
                }
            }
        };
        if let Some(dir) = &watch {
            progress.advance(records.count(dir) as f64, self.total).await;
        }
        let stdout = out.await.unwrap_or_default();
        let stderr = err.await.unwrap_or_default();
        Ok(Finished {
            code: status.code(),
            stdout: redactor.redact(&stdout),
            stderr: redactor.redact(&stderr),
            cancelled,
        })
    }
}

/// Ctrl-C as a user gives it: SIGINT, SIGINT again after [`GRACE`], a kill after
/// [`WRITE_WAIT`]; the exit status.
async fn stop(child: &mut tokio::process::Child) -> anyhow::Result<std::process::ExitStatus> {
    for wait in [GRACE, WRITE_WAIT] {
        interrupt(child);
        if let Ok(status) = tokio::time::timeout(wait, child.wait()).await {
            return status.context("cannot wait for the tool's command");
        }
    }
    child.start_kill().context("cannot kill the tool's command")?;
    child.wait().await.context("cannot wait for the tool's command")
}

fn interrupt(child: &tokio::process::Child) {
    let pid = child.id().and_then(|id| rustix::process::Pid::from_raw(id as i32));
    if let Some(pid) = pid {
        // It may have ended in between: nothing to stop then.
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
    }
}

/// Read a stream to its end, keeping its last [`KEEP_BYTES`]; each line also goes to `lines`.
async fn keep(
    stream: Option<impl AsyncRead + Unpin>,
    lines: Option<mpsc::UnboundedSender<String>>,
) -> String {
    let Some(stream) = stream else { return String::new() };
    let mut reader = BufReader::new(stream);
    let mut kept = String::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&line);
        if let Some(tx) = &lines {
            let trimmed = text.trim();
            if !trimmed.is_empty() {
                let _ = tx.send(trimmed.to_string());
            }
        }
        kept.push_str(&text);
        if kept.len() > 2 * KEEP_BYTES {
            let cut = kept.len() - KEEP_BYTES;
            let cut = (cut..kept.len()).find(|&i| kept.is_char_boundary(i)).unwrap_or(cut);
            kept = format!("[... earlier output left out ...]\n{}", &kept[cut..]);
        }
    }
    kept
}

/// The records streamed so far into the `requests.jsonl` files under a directory, read
/// incrementally (each file from where the last count ended).
#[derive(Default)]
struct RecordCount {
    files: BTreeMap<PathBuf, (u64, u64)>,
}

impl RecordCount {
    fn count(&mut self, dir: &Path) -> u64 {
        let mut found = Vec::new();
        find_records(dir, 4, &mut found);
        for path in found {
            let (offset, lines) = self.files.entry(path.clone()).or_default();
            if let Ok((read, newlines)) = count_from(&path, *offset) {
                *offset += read;
                *lines += newlines;
            }
        }
        self.files.values().map(|(_, n)| n).sum()
    }
}

fn find_records(dir: &Path, depth: u32, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() && depth > 0 {
            find_records(&path, depth - 1, found);
        } else if e.file_name() == infergate_model::rundir::REQUESTS_FILE {
            found.push(path);
        }
    }
}

/// Bytes read from `offset` to the last complete line, and the lines among them.
fn count_from(path: &Path, offset: u64) -> std::io::Result<(u64, u64)> {
    let mut f = std::fs::File::open(path)?;
    f.seek(SeekFrom::Start(offset))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)?;
    let complete = buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let lines = buf[..complete].iter().filter(|&&b| b == b'\n').count();
    Ok((complete as u64, lines as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_counted_incrementally_and_only_in_complete_lines() {
        let t = tempfile::tempdir().unwrap();
        let trial = t.path().join("trial-01");
        std::fs::create_dir_all(&trial).unwrap();
        let file = trial.join(infergate_model::rundir::REQUESTS_FILE);
        std::fs::write(&file, "{}\n{}\n{\"half").unwrap();
        let mut c = RecordCount::default();
        assert_eq!(c.count(t.path()), 2);
        std::fs::write(&file, "{}\n{}\n{\"half\": 1}\n{}\n").unwrap();
        assert_eq!(c.count(t.path()), 4);
        std::fs::create_dir_all(t.path().join("trial-02")).unwrap();
        std::fs::write(
            t.path().join("trial-02").join(infergate_model::rundir::REQUESTS_FILE),
            "{}\n",
        )
        .unwrap();
        assert_eq!(c.count(t.path()), 5);
        assert_eq!(c.count(&t.path().join("absent")), 5, "what was counted stays counted");
    }
}
