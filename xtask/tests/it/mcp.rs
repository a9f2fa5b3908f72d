//! `cargo xtask mcp` driven by a real client, the Python `mcp` SDK from PyPI
//! (`fixtures/mcp_client.py`): the tools listed with their schemas, `bench` on the timing
//! simulator with progress notifications, `gate` of that run, `adr_check` of a branch that
//! changes a governed key without a record, `adr_lint` and `explain_record`, malformed calls
//! answered with JSON-RPC errors, an API key redacted out of a result, and a long bench
//! cancelled (its run directory written as Ctrl-C writes it). Every structured result is
//! validated against the tool's declared output schema. Without the SDK the test is skipped
//! loudly; under `CI=true` it fails (`.ci/run` installs it).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::gitrepo::GitRepo;
use crate::support::governed::{BENCH, ENGINE, Governed};

const ENGINE_TEXT: &str = "\
# Inference parameters (governed by docs/adr).
[engine]
model = \"m\"

[scheduler]
max_num_seqs = 256
enable_chunked_prefill = false
";

/// The timing simulator: `default` measures in well under a second, `slow` takes a second a
/// request (the run the client cancels). A target names the test's API key variable.
const BENCH_TEXT: &str = "\
[profile.default.sim]
mode = \"timing\"
[profile.default.sim.timing]
ttft_ms = 2
itl_ms = 1
[profile.default.workload]
input_lengths = [8]
repeats = 4
max_tokens = 4
[profile.default.load]
concurrency = 2
warmup_requests = 0

[profile.slow.sim.timing]
ttft_ms = 20
itl_ms = 20
[profile.slow.workload]
max_tokens = 50

[targets.gw]
base_url = \"http://127.0.0.1:9/v1\"
api_key_env = \"INFERGATE_TEST_KEY\"
";

/// A key no output may show.
const KEY: &str = "sk-mcp-test-0123456789abcdef";

/// `main` with the engine config, ADR-0001 and its gate.toml; HEAD on `pr`, one commit that
/// changes `scheduler.max_num_seqs` without a record; the work tree checked out.
fn repository() -> GitRepo {
    let (mut g, _) =
        Governed::default().with(ENGINE, ENGINE_TEXT).with(BENCH, BENCH_TEXT).on_branch_pr();
    g.commit_files("Lower max_num_seqs", &[(ENGINE, Some(&ENGINE_TEXT.replace("256", "128")))]);
    g.checkout();
    g
}

/// The driver's imports, and the SDK's major version its API is written for (2.x).
const CLIENT_CHECK: &str = "import importlib.metadata as m, jsonschema, mcp\n\
    v = m.version('mcp')\n\
    assert v.split('.')[0] == '2', f'mcp {v} is installed, the test drives mcp 2.x'";

/// Whether `python3` imports the SDK 2.x and jsonschema; otherwise why not.
fn client_available() -> Result<(), String> {
    let o = Command::new("python3").args(["-c", CLIENT_CHECK]).output();
    match o {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(String::from_utf8_lossy(&o.stderr).lines().last().unwrap_or("").to_string()),
        Err(e) => Err(format!("python3: {e}")),
    }
}

/// Skipped loudly without the SDK (a failure under `CI=true`): whether to go on.
fn have_client() -> bool {
    let Err(why) = client_available() else { return true };
    let why = format!(
        "MCP client test SKIPPED: the Python `mcp` SDK 2.x is not installed \
         (python3 -m pip install 'mcp>=2.3,<3'): {why}"
    );
    assert!(!std::env::var("CI").is_ok_and(|v| v == "true" || v == "1"), "CI=true: {why}");
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "\n*** {why} ***\n");
    false
}

/// Run the client script with `args`; the report it prints last. Proxies are removed (the
/// server is on loopback) and the test's API key is in its environment, and so in the server's.
fn client(args: &[&std::ffi::OsStr]) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures/mcp_client.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .args(args)
        .env("INFERGATE_TEST_KEY", KEY)
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start python3");
    // The client bounds each wait itself; this bounds the whole in case the server hangs.
    if crate::support::poll_for(Duration::from_secs(300), || child.try_wait().unwrap()).is_none() {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the client failed:\n{stderr}\n{stdout}");
    assert!(!stdout.contains(KEY) && !stderr.contains(KEY), "the key leaked:\n{stderr}");
    serde_json::from_str(stdout.lines().last().expect("a report")).unwrap()
}

#[test]
fn a_real_client_drives_the_tools_with_progress_cancellation_and_errors() {
    if !have_client() {
        return;
    }
    let g = repository();
    let report = client(&[env!("CARGO_BIN_EXE_xtask").as_ref(), g.path().as_os_str()]);

    // The files behind the results: the measured run, and the cancelled one as Ctrl-C leaves it.
    let run =
        infergate_model::Summary::read(&g.path().join(report["run"].as_str().unwrap())).unwrap();
    assert_eq!(
        (run.status, run.requests.total),
        (infergate_model::summary::RunStatus::Complete, 6)
    );
    let cancelled =
        infergate_model::Summary::read(&g.path().join(report["cancelled_run"].as_str().unwrap()))
            .unwrap();
    assert_eq!(cancelled.status, infergate_model::summary::RunStatus::Interrupted);
    assert_eq!(report["cancelled_status"], "interrupted");
    assert!(cancelled.requests.total >= 1 && cancelled.requests.total < 100_000);
    let after = report["cancelled_after_s"].as_f64().unwrap();
    assert!(after < 20.0, "the cancelled run took {after} s to stop");
    // The gate decided the record's threshold on the 6 requests (inconclusive only on a busy
    // host, which it refuses to decide on).
    let verdicts = report["gate_verdicts"].as_array().unwrap();
    match report["gate_exit"].as_i64() {
        Some(0) => assert!(verdicts.iter().all(|v| v == "pass"), "{report}"),
        Some(3) => assert!(verdicts.iter().any(|v| v == "inconclusive"), "{report}"),
        other => panic!("gate exit {other:?}: {report}"),
    }
    let check = report["adr_check_report"].as_str().unwrap();
    assert!(check.contains("configs/engine.toml: scheduler.max_num_seqs 256 -> 128"), "{check}");
    assert!(report["unknown_tool"].as_str().unwrap().contains("no_such_tool"));
    assert!(report["validated_outputs"].as_u64().unwrap() >= 9, "{report}");
    let record = std::fs::read_to_string(g.path().join(report["new_record"].as_str().unwrap()));
    assert!(record.unwrap().contains("- Status: Proposed"));
    assert!(report["progress_notifications"].as_u64().unwrap() >= 2);
}

#[test]
fn the_same_tools_answer_over_streamable_http() {
    if !have_client() {
        return;
    }
    let g = repository();
    let mut server = crate::support::Reaped(
        crate::support::xtask_command(g.path(), &["mcp", "--http", "0"])
            .env("INFERGATE_TEST_KEY", KEY)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Whatever else the server says goes on being read, so that it never writes to a closed pipe.
    let mut stderr = crate::support::Lines::of(server.0.stderr.take().unwrap());
    let line = stderr.wait_for(Duration::from_secs(60), "the server's address", |l| {
        l.contains("http://127.0.0.1:")
    });
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    let report = client(&["--http".as_ref(), url.as_ref(), g.path().as_os_str()]);
    let run =
        infergate_model::Summary::read(&g.path().join(report["run"].as_str().unwrap())).unwrap();
    assert_eq!(run.requests.total, 6);
}

/// Without any client library: the server's stdout holds nothing but JSON-RPC messages; a
/// line that is not JSON is dropped, an unknown method and arguments off the schema get JSON-RPC
/// errors, a record that does not exist an error result (answers may come in any order), and the
/// server goes on answering, and exits 0 when its stdin closes.
#[test]
fn stdout_holds_only_the_protocol_and_malformed_calls_get_errors() {
    use std::io::{BufRead, Write};
    let g = repository();
    let mut server = crate::support::Reaped(
        crate::support::xtask_command(g.path(), &["mcp"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut stdin = server.0.stdin.take().unwrap();
    let lines = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        "this is not JSON",
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"adr_lint","arguments":{"x":1}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"no/such/method"}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"explain_record","arguments":{"record":"7"}}}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"explain_record","arguments":{"record":"1"}}}"#,
    ];
    for l in lines {
        writeln!(stdin, "{l}").unwrap();
    }
    // At the end of its input the server answers what it was sent, then exits.
    drop(stdin);
    let mut answers = std::collections::BTreeMap::new();
    let stdout = std::io::BufReader::new(server.0.stdout.take().unwrap());
    for line in stdout.lines() {
        let line = line.unwrap();
        let v: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not a JSON-RPC message on stdout: {line:?}: {e}"));
        assert_eq!(v["jsonrpc"], "2.0", "{line}");
        let id = v["id"].as_u64().expect("only responses: no notification was asked for");
        answers.insert(id, v);
    }
    assert_eq!(answers.keys().copied().collect::<Vec<_>>(), [1, 2, 3, 4, 5], "each answered once");
    assert_eq!(answers[&1]["result"]["serverInfo"]["name"], "infergate");
    assert_eq!(answers[&2]["error"]["code"], -32602);
    assert!(answers[&2]["error"]["message"].as_str().unwrap().contains("unknown field `x`"));
    assert_eq!(answers[&3]["error"]["code"], -32601);
    assert_eq!(answers[&4]["result"]["isError"], true);
    assert!(
        answers[&4]["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("no record numbered 7")
    );
    let explained = &answers[&5]["result"]["structuredContent"];
    assert_eq!(explained["thresholds"][0]["limit"], 302.0);
    assert_eq!(explained["rollback_conditions"].as_array().map(Vec::len), Some(0), "prose only");
    let status = server.0.wait().unwrap();
    assert_eq!(status.code(), Some(0));
}

/// The A/B gate as a tool: this repository's configs at `main`, a candidate twice as slow
/// (`sim.slowdown=2`): progress as its trials record, the verdict in the exit code, and
/// `ab.json` as the result, the same document the file holds.
#[test]
fn an_ab_gate_reports_progress_and_returns_ab_json() {
    if !have_client() {
        return;
    }
    let g = crate::support::configs_repo();
    let report =
        client(&["--ab".as_ref(), env!("CARGO_BIN_EXE_xtask").as_ref(), g.path().as_os_str()]);
    assert_eq!(report["exit_code"], 1, "a clear regression fails: {report}");
    let file: infergate_model::ab::AbFile =
        infergate_model::artifact::read(&g.path().join(report["wrote"].as_str().unwrap())).unwrap();
    assert_eq!(file.status, Some(infergate_model::ab::AbStatus::Fail));
    assert_eq!(report["ab"], serde_json::to_value(&file).unwrap());
}
