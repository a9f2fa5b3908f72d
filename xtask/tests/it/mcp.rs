//! `cargo xtask mcp` driven by a real client, the Python `mcp` SDK from PyPI
//! (`fixtures/mcp_client.py`): the tools listed with their schemas, `bench` on the timing
//! simulator with progress notifications, `gate` of that run, `adr_check` of a branch that
//! changes a governed key without a record, `adr_lint` and `explain_record`, malformed calls
//! answered with JSON-RPC errors, an API key redacted out of a result, and a long bench
//! cancelled (its run directory written as Ctrl-C writes it). Every structured result is
//! validated against the tool's declared output schema. Without the SDK the test is skipped
//! loudly; under `CI=true` it fails (`.ci/run` installs it).
//!
//! The hostile-input tests speak raw JSON-RPC and HTTP, without any client library: tool
//! arguments that look like flags are values (a run directory named `--help`), a line over the
//! transport's limit is answered and the server goes on, messages that are JSON but no JSON-RPC
//! get `-32600` with their `id`, `explain_record` does not follow a link out of the repository,
//! and the HTTP transport refuses a foreign `Origin` or `Host` with 403.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

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
/// errors, JSON that is no JSON-RPC message `-32600` with its `id` (a number or a string), a
/// record that does not exist an error result (answers may come in any order), and the server
/// goes on answering, and exits 0 when its stdin closes.
#[test]
fn stdout_holds_only_the_protocol_and_malformed_calls_get_errors() {
    let g = repository();
    let mut raw = Raw::start(g.path());
    let lines = [
        "this is not JSON",
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"adr_lint","arguments":{"x":1}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"no/such/method"}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"explain_record","arguments":{"record":"7"}}}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"explain_record","arguments":{"record":"1"}}}"#,
        // JSON, but no JSON-RPC message: params that are no object, a wrong version, no method.
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":"x"}"#,
        r#"{"jsonrpc":"1.0","id":"seven","method":"ping"}"#,
        r#"{"id":8}"#,
        // An invalid notification gets no answer; nothing to echo in an array.
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":"x"}"#,
        "[1, 2]",
        r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#,
    ];
    for l in lines {
        raw.send(l);
    }
    let ids =
        [json!(2), json!(3), json!(4), json!(5), json!(6), json!("seven"), json!(8), json!(9)];
    let answers: std::collections::BTreeMap<String, Value> = ids
        .into_iter()
        .map(|id| (id.as_str().map_or_else(|| id.to_string(), String::from), raw.answer(id)))
        .collect();
    assert_eq!(answers["2"]["error"]["code"], -32602);
    assert!(answers["2"]["error"]["message"].as_str().unwrap().contains("unknown field `x`"));
    assert_eq!(answers["3"]["error"]["code"], -32601);
    assert_eq!(answers["4"]["result"]["isError"], true);
    assert!(
        answers["4"]["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("no record numbered 7")
    );
    let explained = &answers["5"]["result"]["structuredContent"];
    assert_eq!(explained["thresholds"][0]["limit"], 302.0);
    assert_eq!(explained["rollback_conditions"].as_array().map(Vec::len), Some(0), "prose only");
    for id in ["6", "seven", "8"] {
        assert_eq!(answers[id]["error"]["code"], -32600, "{id}: {}", answers[id]);
        let why = answers[id]["error"]["message"].as_str().unwrap();
        assert!(why.starts_with("Invalid request: not a JSON-RPC 2.0 request"), "{why}");
    }
    assert_eq!(answers["9"]["result"], json!({}), "the server goes on answering");
    // At the end of its input the server answers what it was sent, then exits: the one answer
    // left is the array's, with no id to echo.
    let rest = raw.close();
    assert_eq!(rest.len(), 1, "each line answered at most once: {rest:?}");
    assert_eq!((rest[0].get("id"), &rest[0]["error"]["code"]), (None, &json!(-32600)));
}

/// Tool arguments reach the commands as values, never as flags: a run directory named `--help`
/// is looked for as a path (a usage error naming it, not the help text), and so is every other
/// argument that starts with `-`.
#[test]
fn tool_arguments_that_look_like_flags_are_values() {
    let g = repository();
    let mut raw = Raw::start(g.path());
    raw.call(2, "gate", json!({"run": "--help"}));
    raw.call(3, "compare", json!({"a": "--help", "b": "-V", "metrics": ["--out"]}));
    raw.call(
        4,
        "adr_new",
        json!({"title": "--help", "baseline": "--version", "experiments": ["-h"]}),
    );
    raw.call(5, "bench", json!({"profile": "--help"}));
    raw.call(6, "explain_record", json!({"record": "--help"}));
    let command_error = |answer: &Value| {
        let r = &answer["result"];
        assert_eq!(r["isError"], true, "{answer}");
        let out = &r["structuredContent"];
        assert_eq!(
            (&out["exit_code"], &out["status"]),
            (&json!(2), &json!("usage-error")),
            "{out}"
        );
        let (console, diagnostics) =
            (out["console"].as_str().unwrap(), out["diagnostics"].as_str().unwrap());
        for text in [console, diagnostics] {
            assert!(!text.contains("Usage:") && !text.contains("Print help"), "{out}");
        }
        (out["command"].as_str().unwrap().to_string(), diagnostics.to_string())
    };
    let (command, why) = command_error(&raw.answer(json!(2)));
    assert!(command.ends_with(" -- --help"), "{command}");
    assert!(why.contains("--help"), "names the run it looked for: {why}");
    let (command, why) = command_error(&raw.answer(json!(3)));
    assert!(command.contains("--metric=--out") && command.ends_with(" -- --help -V"), "{command}");
    assert!(why.contains("unknown metric `--out`"), "a metric, not a flag: {why}");
    let (command, why) = command_error(&raw.answer(json!(4)));
    assert!(command.contains("--baseline=--version --exp=-h") && command.ends_with(" -- --help"));
    assert!(why.contains("--version"), "names the baseline it looked for: {why}");
    let (_, why) = command_error(&raw.answer(json!(5)));
    assert!(why.contains("--help"), "names the profile: {why}");
    let explained = raw.answer(json!(6));
    assert_eq!(explained["result"]["isError"], true, "{explained}");
    let text = explained["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("no record at --help"), "{text}");
    assert!(raw.close().is_empty());
    let records = std::fs::read_dir(g.path().join("docs/adr")).unwrap();
    let records: Vec<String> =
        records.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(records.iter().all(|r| !r.contains("help")), "adr_new wrote a record: {records:?}");
}

/// `bench` with `capacity` runs `bench --capacity` and returns `capacity.json`, the document
/// the file holds: on the timing simulator every load holds the SLO, so the search ends at the
/// highest load it may probe. Settings the command refuses are its usage error, naming the flag.
#[test]
fn a_capacity_search_returns_capacity_json() {
    use infergate_model::capacity::{CapacityFile, StopReason};
    let g = repository();
    let mut raw = Raw::start(g.path());
    let capacity = json!({"dimension": "concurrency", "max": 2, "trials": "2"});
    raw.call(2, "bench", json!({"overrides": ["slo.ttft_ms=1000"], "capacity": capacity}));
    let bad = json!({"dimension": "rate", "target": 2});
    raw.call(3, "bench", json!({"overrides": ["slo.ttft_ms=1000"], "capacity": bad}));
    let answer = raw.answer(json!(2));
    let out = &answer["result"]["structuredContent"];
    assert_eq!((&out["exit_code"], &out["status"]), (&json!(0), &json!("success")), "{out}");
    assert!(out["command"].as_str().unwrap().contains(" --capacity=concurrency "), "{out}");
    let file = CapacityFile::read(&g.path().join(out["wrote"].as_str().unwrap())).unwrap();
    assert_eq!(out["result"], serde_json::to_value(&file).unwrap());
    assert_eq!((file.bracket.pass, file.bracket.fail), (Some(2.0), None));
    assert_eq!(file.search.stop, Some(StopReason::MaxLoad));
    let refused = raw.answer(json!(3));
    let out = &refused["result"]["structuredContent"];
    assert_eq!(out["exit_code"], 2, "{out}");
    assert!(out["diagnostics"].as_str().unwrap().contains("--capacity-target"), "{out}");
    assert_eq!(out["wrote"], Value::Null, "nothing written: {out}");
    assert!(raw.close().is_empty());
}

/// A line longer than the transport's 16 MiB is read past, not held: answered with `-32600`
/// and the request's id, and the next request is served. The server's peak memory grows by
/// less than two limits while it reads a line of three (it holds at most one limit's bytes).
#[test]
fn an_over_long_line_is_answered_and_the_next_request_served() {
    const LIMIT: usize = 16 * 1024 * 1024;
    let g = repository();
    let mut raw = Raw::start(g.path());
    let before = peak_memory(&raw);
    let head = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"explain_record","arguments":{"record":""#;
    let tail = r#""}}}"#;
    for (id, size) in [(7, LIMIT + 1), (8, 3 * LIMIT)] {
        let head = head.replace(":7,", &format!(":{id},"));
        let mut line = head.clone().into_bytes();
        line.resize(size - tail.len(), b'a');
        line.extend_from_slice(tail.as_bytes());
        raw.send(std::str::from_utf8(&line).unwrap());
        let answer = raw.answer(json!(id));
        assert_eq!(answer["error"]["code"], -32600, "{answer}");
        let why = answer["error"]["message"].as_str().unwrap();
        assert!(why.contains(&format!("longer than {LIMIT} bytes")), "{why}");
    }
    raw.send(r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"explain_record","arguments":{"record":"1"}}}"#);
    let answer = raw.answer(json!(9));
    assert_eq!(answer["result"]["structuredContent"]["thresholds"][0]["limit"], 302.0);
    if cfg!(target_os = "linux") {
        let after = peak_memory(&raw).expect("the server's VmHWM");
        let grew = after.saturating_sub(before.expect("the server's VmHWM"));
        assert!(grew < 2 * LIMIT, "the server's peak memory grew by {grew} bytes");
    }
    assert!(raw.close().is_empty());
}

/// The peak resident memory of the server, in bytes (Linux's `VmHWM`; `None` elsewhere).
fn peak_memory(raw: &Raw) -> Option<usize> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", raw.server.0.id())).ok()?;
    let kib: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())?;
    Some(kib * 1024)
}

/// `explain_record` reads only files inside the repository: a record that is a symbolic link
/// to a file outside is refused, naming where it leads (by number it is no record: the records
/// are the directory's files).
#[cfg(unix)]
#[test]
fn explain_record_does_not_follow_a_link_out_of_the_repository() {
    let g = repository();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("secret.md");
    std::fs::write(&target, "# ADR-0009: Not in this repository\n\n- Status: Accepted\n").unwrap();
    std::os::unix::fs::symlink(&target, g.path().join("docs/adr/0009-elsewhere.md")).unwrap();
    let mut raw = Raw::start(g.path());
    raw.call(2, "explain_record", json!({"record": "docs/adr/0009-elsewhere.md"}));
    raw.call(3, "explain_record", json!({"record": "9"}));
    let answer = raw.answer(json!(3));
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("no record numbered 9"), "{text}");
    {
        let answer = raw.answer(json!(2));
        assert_eq!(answer["result"]["isError"], true, "{answer}");
        let text = answer["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("docs/adr/0009-elsewhere.md resolves to"), "{text}");
        assert!(text.contains("outside the repository"), "{text}");
        assert!(text.contains(&target.canonicalize().unwrap().display().to_string()), "{text}");
        assert!(!text.contains("Not in this repository"), "nothing of the file is shown: {text}");
    }
    assert!(raw.close().is_empty());
}

/// The HTTP transport, as a browser on a foreign page would reach it (DNS rebinding): a
/// request whose `Origin` is not loopback nor `--allow-origin`'s, or whose `Host` is not a
/// loopback name, gets 403 and no session; a loopback origin, an allowed one and a request with
/// no `Origin` (a client that is no browser) are served.
#[test]
fn the_http_transport_refuses_foreign_origins_and_hosts() {
    let g = repository();
    let mut server = crate::support::Reaped(
        crate::support::xtask_command(
            g.path(),
            &["mcp", "--http", "0", "--allow-origin", "https://app.example"],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap(),
    );
    let mut stderr = crate::support::Lines::of(server.0.stderr.take().unwrap());
    let line = stderr.wait_for(Duration::from_secs(60), "the server's address", |l| {
        l.contains("http://127.0.0.1:")
    });
    let port: u16 = line
        .split("http://127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    let host = format!("127.0.0.1:{port}");
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;

    for (origin, host) in [
        (Some("http://evil.example"), host.as_str()),
        (Some("https://app.example:8443"), host.as_str()),
        (Some("http://127.0.0.1.evil.example"), host.as_str()),
        (Some("null"), host.as_str()),
        (None, "evil.example"),
        (None, &*format!("evil.example:{port}")),
    ] {
        let r = post(port, host, origin, None, init);
        assert_eq!(r.status, 403, "Origin {origin:?}, Host {host}: {r:?}");
        assert!(r.session.is_none(), "{r:?}");
    }
    let mut sessions = Vec::new();
    for origin in [
        None,
        Some(format!("http://127.0.0.1:{port}")),
        Some("http://localhost:3000".to_string()),
        Some("https://[::1]".to_string()),
        Some("https://app.example".to_string()),
    ] {
        let r = post(port, &host, origin.as_deref(), None, init);
        assert_eq!(r.status, 200, "Origin {origin:?}: {r:?}");
        assert!(r.body.contains(r#""serverInfo":{"name":"infergate""#), "{r:?}");
        sessions.push(r.session.expect("a session"));
    }
    // A session opened from a loopback page is no use to a foreign one.
    let session = sessions[1].as_str();
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(post(port, &host, None, Some(session), initialized).status, 202);
    let lint = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"adr_lint","arguments":{}}}"#;
    let refused = post(port, &host, Some("http://evil.example"), Some(session), lint);
    assert_eq!(refused.status, 403, "{refused:?}");
    let served = post(port, &host, Some("http://localhost"), Some(session), lint);
    assert_eq!(served.status, 200, "{served:?}");
    assert!(served.body.contains(r#""passed":true"#), "{served:?}");
}

/// What one HTTP request got back.
#[derive(Debug)]
struct Answer {
    status: u16,
    session: Option<String>,
    body: String,
}

/// One POST to `/mcp` (HTTP/1.0, so the body comes unchunked and ends when the server closes
/// the connection, or with the first JSON-RPC answer of an event stream).
fn post(port: u16, host: &str, origin: Option<&str>, session: Option<&str>, body: &str) -> Answer {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut request = format!(
        "POST /mcp HTTP/1.0\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(o) = origin {
        request.push_str(&format!("Origin: {o}\r\n"));
    }
    if let Some(id) = session {
        request.push_str(&format!("Mcp-Session-Id: {id}\r\nMcp-Protocol-Version: 2025-06-18\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    s.write_all(request.as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    let complete = |text: &str| {
        text.split_once("\r\n\r\n")
            .is_some_and(|(_, b)| b.contains("\"jsonrpc\"") && b.ends_with("\n\n"))
    };
    loop {
        let n = s.read(&mut buf).unwrap_or_else(|e| {
            panic!("reading the answer: {e}: {}", String::from_utf8_lossy(&got))
        });
        got.extend_from_slice(&buf[..n]);
        if n == 0 || complete(&String::from_utf8_lossy(&got)) {
            break;
        }
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let session = head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("mcp-session-id").then(|| value.trim().to_string())
    });
    Answer { status, session, body: body.to_string() }
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
    assert_eq!(file.status, Some(infergate_model::ab::Verdict::Fail));
    assert_eq!(report["ab"], serde_json::to_value(&file).unwrap());
}

/// `cargo xtask mcp` on stdio, spoken to line by line: every line of its stdout must be a
/// JSON-RPC message.
struct Raw {
    server: crate::support::Reaped,
    stdin: Option<ChildStdin>,
    stdout: crate::support::Lines,
    /// The lines read so far.
    read: usize,
    /// The messages read and not yet taken by [`Raw::answer`].
    unclaimed: Vec<Value>,
}

impl Raw {
    /// Started in `root` and initialized.
    fn start(root: &Path) -> Raw {
        let mut server = crate::support::Reaped(
            crate::support::xtask_command(root, &["mcp"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let stdin = server.0.stdin.take();
        let stdout = crate::support::Lines::of(server.0.stdout.take().unwrap());
        let mut raw = Raw { server, stdin, stdout, read: 0, unclaimed: Vec::new() };
        raw.send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#);
        assert_eq!(raw.answer(json!(1))["result"]["serverInfo"]["name"], "infergate");
        raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        raw
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// A `tools/call` of `tool` with `arguments`, as request `id`.
    fn call(&mut self, id: u64, tool: &str, arguments: Value) {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}});
        self.send(&request.to_string());
    }

    /// The answer to request `id` (answers may come in any order).
    fn answer(&mut self, id: Value) -> Value {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(i) = self.unclaimed.iter().position(|m| m.get("id") == Some(&id)) {
                return self.unclaimed.remove(i);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.stdout.wait_for(left, &format!("the answer to {id}"), |_| true);
            self.read += 1;
            self.unclaimed.push(message(&line));
        }
    }

    /// Close stdin: the server answers what it was sent and exits 0. The messages not taken.
    fn close(mut self) -> Vec<Value> {
        drop(self.stdin.take());
        let status = self.server.0.wait().unwrap();
        assert_eq!(status.code(), Some(0));
        let mut rest = std::mem::take(&mut self.unclaimed);
        let stdout =
            std::mem::replace(&mut self.stdout, crate::support::Lines::of(std::io::empty()));
        // `all` repeats the lines already read first.
        rest.extend(stdout.all().lines().skip(self.read).map(message));
        rest
    }
}

/// A line of the server's stdout: a JSON-RPC 2.0 message, or the test fails.
fn message(line: &str) -> Value {
    let v: Value = serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("not a JSON-RPC message on stdout: {line:?}: {e}"));
    assert_eq!(v["jsonrpc"], "2.0", "{line}");
    v
}
