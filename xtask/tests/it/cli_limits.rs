//! Out-of-range numbers on the command line and in config files: `cargo xtask bench` refuses
//! them before anything runs, with exit 2 and a message naming the flag (or file and line) and
//! the valid range; never a panic, an abort or a run of centuries.

use std::path::Path;
use std::process::{Command, Output};

fn xtask(root: &Path, args: &[&str]) -> Output {
    crate::support::xtask_output(root, args)
}

/// A repository root whose default profile runs the timing simulator.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("configs")).unwrap();
    let text = "[profile.default.sim]\nmode = \"timing\"\n[profile.default.sim.timing]\n\
                ttft_ms = 2\nitl_ms = 1\n[profile.default.workload]\ninput_lengths = [8]\n\
                repeats = 2\nmax_tokens = 2\n[profile.default.load]\nconcurrency = 2\n";
    std::fs::write(dir.path().join("configs/bench.toml"), text).unwrap();
    dir
}

fn assert_refused(o: &Output, names: &str, range: &str) {
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{names}: {e}");
    assert!(!e.contains("panicked"), "{e}");
    assert!(e.contains(names), "names {names}: {e}");
    assert!(e.contains(&format!("must be within {range}")), "{names}: {e}");
}

#[test]
fn huge_tiny_and_non_finite_flags_exit_2_naming_the_flag_and_the_range() {
    let r = repo();
    for (args, names, range) in [
        (&["--rate", "1", "--duration", "1e300"][..], "--duration 1e300", "(0, 604800] seconds"),
        (&["--rate", "1e-300"][..], "--rate 1e-300", "[0.001, 1000000] requests per second"),
        (&["--rate", "NaN"][..], "--rate NaN", "[0.001"),
        (&["--max-tokens", "4000000000"][..], "--max-tokens 4000000000", "1..=1048576 tokens"),
        (&["--concurrency", "4000000000"][..], "--concurrency 4000000000", "1..=100000"),
        (
            &["--set", "client.request_timeout_s=1e20"][..],
            "--set client.request_timeout_s=1e20",
            "(0, 604800] seconds",
        ),
        (&["--set", "client.stall_timeout_s=1e300"][..], "--set client.stall_timeout_s", "(0,"),
        (&["--set", "client.grace_s=1e300"][..], "--set client.grace_s=1e300", "[0, 604800]"),
        (&["--set", "load.warmup_s=1e300"][..], "--set load.warmup_s=1e300", "[0, 604800]"),
        (&["--set", "sim.timing.itl_ms=1e300"][..], "--set sim.timing.itl_ms", "[0, 604800000]"),
        (&["--set", "sim.timing.ttft_ms=1e300"][..], "--set sim.timing.ttft_ms", "[0, 604800000]"),
        (&["--set", "sim.faults.stall_ms=1e300"][..], "--set sim.faults.stall_ms", "[0, 6048"),
        (
            &["--set", "workload.input_lengths=[4000000000]"][..],
            "--set workload.input_lengths=[4000000000]",
            "1..=1048576 tokens",
        ),
    ] {
        let mut all = vec!["bench", "-q", "--out", "runs/x"];
        all.extend_from_slice(args);
        let o = xtask(r.path(), &all);
        assert_refused(&o, names, range);
        assert!(!r.path().join("runs/x").exists(), "nothing is written for {names}");
    }
}

#[test]
fn an_engine_config_with_an_absurd_memory_size_is_refused_at_its_line() {
    let r = repo();
    let engine = "[engine]\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\n[device]\n\
                  name = \"H100-SXM-80GB\"\nmemory_gib = 1e300\n";
    std::fs::write(r.path().join("configs/engine.toml"), engine).unwrap();
    let o = xtask(r.path(), &["bench", "-q", "--set", "sim.mode=engine", "--out", "runs/e"]);
    assert_refused(&o, "configs/engine.toml:5", "(0, 1024] GiB");
    for f in ["requests.jsonl", "summary.json"] {
        assert!(!r.path().join("runs/e").join(f).exists(), "{f}");
    }
}

/// With an open-file limit (soft and hard) of 128, a run at concurrency 200 against the embedded
/// simulator (two files per connection) is refused before anything is sent, with the arithmetic.
#[cfg(target_os = "linux")]
#[test]
fn a_concurrency_beyond_the_open_file_limit_is_refused_with_exit_2() {
    let r = repo();
    let o = Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 128 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_xtask"))
        .arg("-C")
        .arg(r.path())
        .args(["bench", "-q", "--concurrency", "200", "--out", "runs/fd"])
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .output()
        .expect("run xtask under sh");
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("concurrency 200 needs 464 open files"), "{e}");
    assert!(e.contains("ulimit -n 464") && e.contains("at most 32"), "{e}");
    assert!(!r.path().join("runs/fd/requests.jsonl").exists(), "nothing was sent");
}
