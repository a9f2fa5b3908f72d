//! The usual client failures are diagnosed before measuring, in terms of what to change, and
//! API keys never appear in any file or message.

mod common;

use std::path::Path;

use bench::config::{Target, TimingConfig};
use bench::runner::{self, RunControl, RunError, RunSpec};
use bench::sim::SimOptions;
use common::*;

const PROFILE: &str = r#"
[profile.default]
[profile.default.load]
concurrency = 2
requests = 4
[profile.default.workload]
input_lengths = [8]
repeats = 2
max_tokens = 4
"#;

fn target(base_url: &str, model: Option<&str>, key_env: Option<&str>) -> Target {
    Target {
        model: model.map(str::to_string),
        api_key_env: key_env.map(str::to_string),
        ..Target::at(base_url)
    }
}

async fn try_run(t: Target, dir: &Path) -> Result<runner::RunOutcome, RunError> {
    let spec = RunSpec::quiet(profile(PROFILE, &[]), ("t".into(), t), dir.join("run"), "diag");
    runner::run(spec, RunControl::default()).await
}

fn fast() -> TimingConfig {
    TimingConfig { ttft_ms: 2.0, itl_ms: 1.0, ..TimingConfig::default() }
}

fn files_contain(dir: &Path, needle: &str) -> bool {
    std::fs::read_dir(dir).unwrap().any(|e| {
        let p = e.unwrap().path();
        std::fs::read(&p).map(|b| String::from_utf8_lossy(&b).contains(needle)).unwrap_or(false)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_model_lists_what_the_server_offers() {
    let dir = tempfile::tempdir().unwrap();
    let h = start_timing_sim(fast(), SimOptions::default()).await;
    let err = try_run(target(&h.base_url(), Some("gpt-nope"), None), dir.path())
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("gpt-nope") && err.contains("sim/timing"), "{err}");
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn base_url_with_or_without_v1_and_a_wrong_path() {
    let dir = tempfile::tempdir().unwrap();
    let h = start_timing_sim(fast(), SimOptions::default()).await;
    for base in [h.base_url(), format!("{}/v1", h.base_url()), format!("{}/v1/", h.base_url())] {
        let d = dir.path().join(base.len().to_string());
        let out = try_run(target(&base, None, None), &d).await.unwrap();
        assert_eq!(out.summary.target.url, format!("{}/v1/chat/completions", h.base_url()));
        assert_eq!(out.summary.target.model, "sim/timing", "the first offered model is used");
        assert_eq!(out.summary.requests.ok, 4);
    }
    let err = try_run(
        target(&format!("{}/api", h.base_url()), Some("sim/timing"), None),
        &dir.path().join("x"),
    )
    .await
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("does not exist") && err.contains("/v1"), "{err}");
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_refused_is_explained() {
    let dir = tempfile::tempdir().unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let err = try_run(target(&format!("http://127.0.0.1:{port}"), Some("m"), None), dir.path())
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains(&format!("127.0.0.1:{port}")) && err.to_lowercase().contains("refused"),
        "{err}"
    );
}

/// Environment variables are process-wide: every case that sets one runs in this one test,
/// one after the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_come_from_the_environment_and_never_leak() {
    const VAR: &str = "INFERGATE_TEST_KEY_7f3a";
    const SECRET: &str = "sk-test-5ecret-value-91";
    let dir = tempfile::tempdir().unwrap();
    let h = start_timing_sim(
        fast(),
        SimOptions { api_key: Some(SECRET.into()), ..SimOptions::default() },
    )
    .await;
    let base = h.base_url();

    // No key configured: the server's 401 is explained in terms of api_key_env.
    let err =
        try_run(target(&base, None, None), &dir.path().join("a")).await.err().unwrap().to_string();
    assert!(err.contains("401") && err.contains("api_key_env"), "{err}");

    // Variable named but unset.
    // SAFETY: this test binary's tests do not read this variable concurrently; only this test
    // sets or reads INFERGATE_TEST_KEY_7f3a.
    unsafe { std::env::remove_var(VAR) };
    let err = try_run(target(&base, None, Some(VAR)), &dir.path().join("b"))
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains(VAR) && err.contains("not set"), "{err}");

    // A key with a trailing newline is refused before any request, without echoing it.
    unsafe { std::env::set_var(VAR, format!("{SECRET}\n")) };
    let err = try_run(target(&base, None, Some(VAR)), &dir.path().join("c"))
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("newline") && !err.contains(SECRET), "{err}");

    // A wrong key: 401 explained, the key not shown.
    unsafe { std::env::set_var(VAR, "sk-wrong-key-0000") };
    let err = try_run(target(&base, None, Some(VAR)), &dir.path().join("d"))
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("401") && err.contains(VAR) && err.contains("Bearer"), "{err}");
    assert!(!err.contains("sk-wrong-key-0000"), "{err}");

    // The right key: the run works and the key is in no file of the run directory.
    unsafe { std::env::set_var(VAR, SECRET) };
    let out = try_run(target(&base, None, Some(VAR)), &dir.path().join("e")).await.unwrap();
    assert_eq!(out.summary.requests.ok, 4);
    assert_eq!(out.summary.target.api_key_env.as_deref(), Some(VAR));
    assert!(!files_contain(&out.dir, SECRET), "the key leaked into the run directory");
    assert!(files_contain(&out.dir, VAR), "the variable's name is recorded");
    unsafe { std::env::remove_var(VAR) };
    h.shutdown().await;
}
