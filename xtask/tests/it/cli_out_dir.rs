//! Two `cargo xtask bench` runs into one `--out`: the second is refused before it writes
//! anything, and the first run's directory stays whole.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::wait_until;

fn xtask(root: &Path, args: &[&str]) -> Command {
    crate::support::xtask_command(root, args)
}

#[test]
fn a_second_run_into_a_directory_in_use_exits_2_and_the_first_stays_whole() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("configs")).unwrap();
    // About 2 s per request (itl 100 ms x 20 tokens): the first run is still writing when the
    // second starts.
    let text = "[profile.default.sim]\nmode = \"timing\"\n[profile.default.sim.timing]\n\
                ttft_ms = 5\nitl_ms = 100\n[profile.default.workload]\ninput_lengths = [8]\n\
                repeats = 4\nmax_tokens = 20\n[profile.default.load]\nconcurrency = 2\n";
    std::fs::write(dir.path().join("configs/bench.toml"), text).unwrap();
    let out = dir.path().join("runs/same");
    let first = xtask(dir.path(), &["bench", "-q", "--out", "runs/same"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The lock file exists a moment before it is locked; the records file is created after
    // the lock is taken, so once it is there the directory is held (the run lasts seconds).
    wait_until(Duration::from_secs(60), "the first run to lock its directory", || {
        out.join(".lock").exists()
    });
    wait_until(Duration::from_secs(60), "the first run to write its records", || {
        out.join("requests.jsonl").exists()
    });
    let second = xtask(dir.path(), &["bench", "-q", "--out", "runs/same"]).output().unwrap();
    let e = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{e}");
    assert!(
        e.contains("in use by another run") || e.contains("already holds a run"),
        "a clear refusal: {e}"
    );
    assert!(e.contains("choose another --out"), "{e}");
    let first = first.wait_with_output().unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", String::from_utf8_lossy(&first.stderr));
    let records = std::fs::read_to_string(out.join("requests.jsonl")).unwrap();
    assert_eq!(records.lines().count(), 4, "only the first run's records");
    for line in records.lines() {
        serde_json::from_str::<serde_json::Value>(line).expect("every line is JSON");
    }
    assert_eq!(infergate_model::Summary::read(&out).unwrap().requests.ok, 4);
}
