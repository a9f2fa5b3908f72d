//! `cargo xtask dataset refresh` on a 10,000-line production log with known slow and failed
//! requests, secrets and e-mail addresses in prompts, fields and headers, and malformed lines:
//! the exact lines picked for a seed, 10% of the dataset replaced kind for kind, nothing secret
//! in any byte written, the structured share kept, the same bytes from a second run, and every
//! malformed line counted and named.

use std::collections::BTreeSet;
use std::path::Path;

use bench::accept::dataset::{SAMPLE_SEED, generate, to_jsonl};
use infergate_model::refresh::provenance::{Provenance, read};
use serde_json::{Value, json};

use crate::support::xtask_command;

const KEY_VAR: &str = "INFERGATE_TEST_USER_ID_KEY";
const KEY: &str = "test-user-id-key-0123456789";
/// 2025-12-01T00:00:00Z.
const BASE: i64 = 1_764_547_200;
const LINES: usize = 10_000;
const ITEMS: usize = 200;

/// What each special line of the log is.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Regular,
    /// Slow, in the window: structured or not, with its latency.
    Slow(bool, f64),
    /// Failed, in the window: structured or not, status, latency.
    Failed(bool, u16, f64),
    /// The slowest of all but before the window.
    Early(bool),
    Malformed(&'static str),
}

/// The log's line `n` (1-based).
fn kind(n: usize) -> Kind {
    let i = n - 1;
    match n {
        7 => Kind::Malformed("{\"timestamp\": 1764547200, \"request\": "),
        1234 => Kind::Malformed(
            r#"{"timestamp": 1764621180, "request": {"prompt": "x"}, "latency_ms": 5}"#,
        ),
        5555 => Kind::Malformed(
            r#"{"timestamp": "yesterday ops@corp-example.com", "request": {"prompt": "x"}, "latency_ms": 5, "status": 200}"#,
        ),
        8000 => Kind::Malformed(
            r#"{"timestamp": 1765026000, "request": {"input": "x"}, "latency_ms": 5, "status": 200}"#,
        ),
        9999 => Kind::Malformed(
            r#"{"timestamp": 1765147080, "request": {"prompt": "x"}, "latency_ms": -5, "status": 200}"#,
        ),
        101 | 102 => Kind::Early(n == 101),
        _ if (3001..5001).contains(&n) && (n - 3001).is_multiple_of(100) => {
            Kind::Slow(true, 60_000.0 - ((n - 3001) / 100) as f64 * 100.0)
        }
        _ if (5011..7011).contains(&n) && (n - 5011).is_multiple_of(100) => {
            Kind::Slow(false, 50_000.0 - ((n - 5011) / 100) as f64 * 100.0)
        }
        _ if (7003..8003).contains(&n) && (n - 7003).is_multiple_of(100) => {
            let k = (n - 7003) / 100;
            Kind::Failed(true, if k.is_multiple_of(2) { 503 } else { 0 }, 10.0 + k as f64)
        }
        _ if (8050..9050).contains(&n) && (n - 8050).is_multiple_of(100) => {
            let k = (n - 8050) / 100;
            Kind::Failed(false, if k.is_multiple_of(2) { 500 } else { 429 }, 20.0 + k as f64)
        }
        _ => {
            let _ = i;
            Kind::Regular
        }
    }
}

fn secret_key(n: usize) -> String {
    format!("sk-live-{n:05}abcdefghijklmnop")
}
fn bearer(n: usize) -> String {
    format!("tok{n:05}QwErTyUiOpAsDfGh")
}
fn email(n: usize) -> String {
    format!("person{n}@corp-example.com")
}

/// One log line: timestamps alternate between epoch seconds and RFC 3339.
fn line(n: usize) -> String {
    let i = (n - 1) as i64;
    let ts_s = BASE + i * 60;
    let timestamp = if n.is_multiple_of(2) {
        json!(ts_s)
    } else {
        json!(chrono::DateTime::from_timestamp(ts_s, 0).unwrap().to_rfc3339())
    };
    let (structured, latency, status, secret) = match kind(n) {
        Kind::Malformed(text) => return text.to_string(),
        Kind::Regular => (n.is_multiple_of(3), 200.0 + ((n * 37) % 800) as f64, 200, false),
        Kind::Slow(s, l) => (s, l, 200, true),
        Kind::Failed(s, st, l) => (s, l, st, true),
        Kind::Early(s) => (s, 999_999.0, 200, true),
    };
    let content = if secret {
        format!(
            "Customer {} (key {}, token {}) reports: invoice 4711 is wrong",
            email(n),
            secret_key(n),
            bearer(n)
        )
    } else {
        format!("question number {n} about the weather")
    };
    let mut request = json!({
        "model": "prod-model",
        "stream": true,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": 64,
    });
    if structured {
        request["response_format"] = json!({"type": "json_schema", "json_schema": {"name": "ticket",
            "schema": {"type": "object", "required": ["summary"], "properties": {"summary": {"type": "string"}}}}});
    }
    if secret {
        request["user"] = json!(email(n));
        request["metadata"] = json!({"user_id": format!("u{n}"), "api_key": secret_key(n), "note": format!("cc {}", email(n))});
    }
    let mut v = json!({
        "timestamp": timestamp,
        "request": request,
        "latency_ms": latency,
        "ttft_ms": latency / 4.0,
        "status": status,
    });
    if secret {
        v["headers"] = json!({"Authorization": format!("Bearer {}", bearer(n))});
    }
    v.to_string()
}

fn write_inputs(root: &Path) {
    let log: Vec<String> = (1..=LINES).map(line).collect();
    std::fs::write(root.join("log.jsonl"), log.join("\n") + "\n").unwrap();
    std::fs::write(root.join("dataset.jsonl"), to_jsonl(&generate(ITEMS, SAMPLE_SEED))).unwrap();
}

fn refresh(root: &Path, seed: &str, out: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "dataset",
        "refresh",
        "--log",
        "log.jsonl",
        "--dataset",
        "dataset.jsonl",
        "--share",
        "0.1",
        "--seed",
        seed,
        "--window-days",
        "5",
        "--user-id-key-env",
        KEY_VAR,
        "--out",
        out,
    ];
    args.extend_from_slice(extra);
    xtask_command(root, &args).env(KEY_VAR, KEY).output().unwrap()
}

fn structured(v: &Value) -> bool {
    v.get("schema").is_some() || v.pointer("/response_format/json_schema/schema").is_some()
}

fn items(text: &str) -> Vec<Value> {
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The lines the rule must pick for `n` items of one kind: failed ones up to half (the
/// highest latency first), then the slowest.
fn expected_picks(structured: bool, n: usize) -> Vec<u64> {
    let mut failed: Vec<(f64, usize)> = Vec::new();
    let mut slow: Vec<(f64, usize)> = Vec::new();
    for l in 1..=LINES {
        match kind(l) {
            Kind::Failed(s, _, lat) if s == structured => failed.push((lat, l)),
            Kind::Slow(s, lat) if s == structured => slow.push((lat, l)),
            _ => {}
        }
    }
    let by_rank = |v: &mut Vec<(f64, usize)>| {
        v.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    };
    by_rank(&mut failed);
    by_rank(&mut slow);
    let nf = (n / 2).min(failed.len());
    failed.iter().take(nf).chain(slow.iter().take(n - nf)).map(|(_, l)| *l as u64).collect()
}

#[test]
fn a_refresh_picks_the_expected_lines_scrubs_them_and_is_reproducible() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_inputs(root);
    let out = refresh(root, "42", "out.jsonl", &[]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");

    let input = std::fs::read_to_string(root.join("dataset.jsonl")).unwrap();
    let output = std::fs::read_to_string(root.join("out.jsonl")).unwrap();
    let prov_text = std::fs::read_to_string(root.join("out.jsonl.provenance.json")).unwrap();
    let prov: Provenance = read(&root.join("out.jsonl.provenance.json")).unwrap();
    let (before, after) = (items(&input), items(&output));
    assert_eq!(after.len(), ITEMS);

    // Exactly 10% replaced: the lines that differ are the provenance's items.
    let changed: Vec<usize> = (0..ITEMS).filter(|i| before[*i] != after[*i]).collect();
    let listed: Vec<usize> = prov.replaced.iter().map(|r| r.item).collect();
    assert_eq!(changed.len(), ITEMS / 10);
    assert_eq!(changed, listed);

    // The picks: each structured item took the next structured pick, each other item the
    // next other pick, in item order.
    let n_s = changed.iter().filter(|i| structured(&before[**i])).count();
    let (mut want_s, mut want_o) = (
        expected_picks(true, n_s).into_iter(),
        expected_picks(false, ITEMS / 10 - n_s).into_iter(),
    );
    for r in &prov.replaced {
        let old_structured = structured(&before[r.item]);
        let want = if old_structured { want_s.next() } else { want_o.next() };
        assert_eq!(Some(r.log_line), want, "item {} ({})", r.item, r.old_id);
        assert_eq!(r.structured, old_structured);
        assert_eq!(after[r.item]["id"], json!(format!("log-{}", r.log_line)));
        assert_eq!(r.old_id, before[r.item]["id"].as_str().unwrap());
    }
    assert!(prov.replaced.iter().all(|r| !matches!(kind(r.log_line as usize), Kind::Early(_))));
    let picked: BTreeSet<u64> = prov.replaced.iter().map(|r| r.log_line).collect();
    assert_eq!(picked.len(), ITEMS / 10);
    assert!(prov.replaced.iter().any(|r| r.why.starts_with("failed (status")), "{prov:?}");
    assert!(prov.replaced.iter().any(|r| r.why.starts_with("slow (latency_ms")), "{prov:?}");

    // Nothing secret in any byte written or printed (the provenance lists the e-mail pattern,
    // whose `@` is no address).
    assert!(!output.contains('@'), "an address in the output");
    for (what, text) in [("output", &output), ("provenance", &prov_text), ("stdout", &stdout)] {
        for leak in ["sk-live", "tok0", "Bearer", "corp-example"] {
            assert!(!text.contains(leak), "{leak} in the {what}");
        }
        for n in &picked {
            let n = *n as usize;
            for s in [secret_key(n), bearer(n), email(n), format!("\"u{n}\"")] {
                assert!(!text.contains(&s), "{s} in the {what}");
            }
        }
    }
    // The secrets' places are marked, user ids hashed with the key.
    for r in &prov.replaced {
        let item = &after[r.item];
        let content = item["messages"][0]["content"].as_str().unwrap();
        assert_eq!(
            content,
            "Customer [pii] (key [redacted], token [redacted]) reports: invoice 4711 is wrong"
        );
        assert!(item["user"].as_str().unwrap().starts_with("u-"), "{item}");
        assert!(item["metadata"]["user_id"].as_str().unwrap().starts_with("u-"), "{item}");
        assert_eq!(item["metadata"]["api_key"], json!("[redacted]"));
        assert!(item.get("model").is_none() && item.get("stream").is_none(), "{item}");
    }
    assert_eq!(prov.scrub.user_ids_hashed, 2 * (ITEMS as u64 / 10));
    assert!(prov.scrub.key_id.as_deref().unwrap().starts_with("hmac-sha256:"));

    // The structured share is kept (45%, above the 40% floor).
    let s_before = before.iter().filter(|v| structured(v)).count();
    let s_after = after.iter().filter(|v| structured(v)).count();
    assert_eq!(s_after, s_before);
    assert!(s_after * 100 >= 40 * ITEMS, "{s_after}");
    assert_eq!(
        (prov.dataset.structured_before, prov.dataset.structured_after),
        (s_before, s_after)
    );

    // Malformed lines counted and named, in the provenance and the report.
    assert_eq!(prov.log.lines, LINES as u64);
    assert_eq!(prov.log.malformed, 5);
    let named: Vec<&str> =
        prov.log.malformed_lines.iter().map(|m| m.split(": ").next().unwrap()).collect();
    assert_eq!(
        named,
        ["log.jsonl:7", "log.jsonl:1234", "log.jsonl:5555", "log.jsonl:8000", "log.jsonl:9999"]
    );
    assert!(prov.log.malformed_lines[1].ends_with("missing `status`"), "{:?}", prov.log);
    // A malformed line's message quotes what it holds, scrubbed like the requests.
    assert!(
        prov.log.malformed_lines[2]
            .starts_with("log.jsonl:5555: `timestamp` \"yesterday [pii]\" is not RFC 3339"),
        "{:?}",
        prov.log
    );
    for n in named {
        assert!(stdout.contains(&format!("malformed {n}: ")), "{n} not in:\n{stdout}");
    }
    // The window: 5 days up to the newest request; the early slowest lines are outside it.
    assert_eq!(prov.window.until, "2025-12-07T22:39:00.000Z");
    assert_eq!(prov.window.since, "2025-12-02T22:39:00.000Z");
    assert_eq!(prov.seed, 42);
    assert!(prov.log.sha256.starts_with("sha256:") && prov.log.sha256.len() == 71);

    // The same inputs, the same bytes; another seed replaces other items.
    let again = refresh(root, "42", "again.jsonl", &[]);
    assert_eq!(again.status.code(), Some(0));
    assert_eq!(std::fs::read(root.join("again.jsonl")).unwrap(), output.as_bytes());
    let again_prov = std::fs::read_to_string(root.join("again.jsonl.provenance.json")).unwrap();
    assert_eq!(again_prov, prov_text.replace("out.jsonl", "again.jsonl"));
    let other = refresh(root, "43", "other.jsonl", &[]);
    assert_eq!(other.status.code(), Some(0));
    let other: Provenance = read(&root.join("other.jsonl.provenance.json")).unwrap();
    assert_ne!(other.replaced.iter().map(|r| r.item).collect::<Vec<_>>(), listed);
}

#[test]
fn a_refresh_refuses_too_many_malformed_lines_and_a_missing_key() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_inputs(root);
    // 5 malformed lines of 10,000 are more than 0.01%.
    let out = refresh(root, "1", "out.jsonl", &["--max-malformed-share", "0.0001"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("log.jsonl: 5 of 10000 non-blank lines are malformed"), "{stderr}");
    assert!(stderr.contains("malformed log.jsonl:9999: "), "{stderr}");
    assert!(!root.join("out.jsonl").exists());
    // User ids and no key: refused, the variable named, nothing written.
    let out = xtask_command(
        root,
        &["dataset", "refresh", "--log", "log.jsonl", "--dataset", "dataset.jsonl", "--seed", "1"],
    )
    .args(["--out", "out.jsonl", "--user-id-key-env", "INFERGATE_TEST_NO_SUCH_KEY"])
    .env_remove("INFERGATE_TEST_NO_SUCH_KEY")
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("holds a user id") && stderr.contains("INFERGATE_TEST_NO_SUCH_KEY"));
    assert!(!root.join("out.jsonl").exists());
    // A PII pattern of the settings that is no regular expression: named at its line.
    std::fs::create_dir_all(root.join("configs")).unwrap();
    std::fs::write(root.join("configs/xtask.toml"), "[dataset]\npii_patterns = [\"(\"]\n").unwrap();
    let out = refresh(root, "1", "out.jsonl", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("configs/xtask.toml:2"), "{stderr}");
    assert!(stderr.contains("PII pattern `(` is not a valid regular expression"), "{stderr}");
    assert!(!root.join("out.jsonl").exists());
}

#[test]
fn adr_new_cites_the_provenance_of_a_refreshed_dataset() {
    use crate::support::{engine_params, new_record, summary, write_run, xtask};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_inputs(root);
    let out = refresh(root, "42", "fresh.jsonl", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let prov: Provenance = read(&root.join("fresh.jsonl.provenance.json")).unwrap();
    let mut run = summary("r", 100.0, 10.0, 0.9, engine_params(true, 2048));
    run.workload.files = vec![infergate_model::workload::WorkloadFile {
        path: "fresh.jsonl".into(),
        hash: prov.dataset.output_hash.clone(),
    }];
    write_run(&root.join("runs"), &run);
    let o = xtask(root, &["adr", "new", "Refreshed prompts", "--baseline", "runs/r"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let record = std::fs::read_to_string(new_record(root)).unwrap();
    let cited = record
        .lines()
        .find(|l| l.starts_with("- `fresh.jsonl`: "))
        .unwrap_or_else(|| panic!("no citation in:\n{record}"));
    assert!(cited.contains("20 of 200 items replaced by the slowest by latency_ms"), "{cited}");
    assert!(cited.contains(&prov.log.sha256) && cited.contains("seed 42"), "{cited}");
    assert!(cited.contains("from 2025-12-02T22:39:00.000Z to 2025-12-07T22:39:00.000Z"), "{cited}");
    assert!(
        cited.ends_with(
            "provenance [fresh.jsonl.provenance.json](../../fresh.jsonl.provenance.json)."
        ),
        "{cited}"
    );

    // A run of the dataset edited since its refresh: the record says so.
    std::fs::remove_dir_all(root.join("docs")).unwrap();
    run.workload.files[0].hash = "fnv1a:0000000000000000".into();
    write_run(&root.join("runs"), &run);
    let o = xtask(root, &["adr", "new", "Refreshed prompts", "--baseline", "runs/r"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let record = std::fs::read_to_string(new_record(root)).unwrap();
    assert!(
        record.contains("(`fnv1a:0000000000000000`) is not the one the refresh wrote"),
        "{record}"
    );

    // An unreadable provenance is named, not skipped.
    std::fs::remove_dir_all(root.join("docs")).unwrap();
    std::fs::write(root.join("fresh.jsonl.provenance.json"), "{\"format_version\": 1}").unwrap();
    let o = xtask(root, &["adr", "new", "Refreshed prompts", "--baseline", "runs/r"]);
    assert_eq!(o.code, 2, "{}{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("cannot cite the provenance of fresh.jsonl"), "{}", o.stderr);
}

#[test]
fn a_litellm_log_is_read_by_its_documented_payload() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // 40 payloads a minute apart: line 17 the slowest success, line 30 a failure (HTTP 429).
    let log: Vec<String> = (1..=40)
        .map(|n| {
            let start = BASE as f64 + n as f64 * 60.0;
            let took = if n == 17 { 9.5 } else { 0.5 + n as f64 / 100.0 };
            let mut v = json!({
                "id": format!("req-{n}"),
                "startTime": start,
                "endTime": start + took,
                "completionStartTime": start + 0.1,
                "status": "success",
                "messages": [{"role": "user", "content": format!("question {n} from {}", email(n))}],
                "model_parameters": {"max_tokens": 32, "temperature": 0.2},
                "end_user": email(n),
                "metadata": {"user_api_key_user_id": "owner", "user_api_key_hash": "88dc28"},
            });
            if n == 30 {
                v["status"] = json!("failure");
                v["error_information"] = json!({"error_code": "429", "error_class": "RateLimitError"});
            }
            v.to_string()
        })
        .collect();
    std::fs::write(root.join("litellm.jsonl"), log.join("\n") + "\n").unwrap();
    let dataset: String =
        (0..10).map(|i| format!("{{\"id\": \"d{i}\", \"prompt\": \"p{i}\"}}\n")).collect();
    std::fs::write(root.join("d.jsonl"), dataset).unwrap();
    let args = [
        "dataset",
        "refresh",
        "--log",
        "litellm.jsonl",
        "--dataset",
        "d.jsonl",
        "--share",
        "0.2",
        "--seed",
        "5",
        "--out",
        "d2.jsonl",
        "--min-structured-share",
        "0",
    ];
    // `end_user` and the key's metadata are not part of the request: no user id is copied, no
    // key is needed.
    let out = xtask_command(root, &args).env_remove("INFERGATE_USER_ID_KEY").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let prov: Provenance = read(&root.join("d2.jsonl.provenance.json")).unwrap();
    assert_eq!(prov.log.format, "litellm");
    assert_eq!(prov.log.malformed, 0);
    let lines: Vec<u64> = prov.replaced.iter().map(|r| r.log_line).collect();
    // One failed (half of two picks), then the slowest.
    assert_eq!(lines, vec![30, 17]);
    assert_eq!(prov.replaced[0].why, "failed (status 429)");
    assert_eq!(prov.replaced[1].why, "slow (latency_ms 9500)");
    let written = std::fs::read_to_string(root.join("d2.jsonl")).unwrap();
    assert!(!written.contains('@') && !written.contains("corp-example"), "{written}");
    assert!(
        written.contains(r#""messages":[{"content":"question 30 from [pii]","role":"user"}]"#),
        "{written}"
    );
}

/// Where a refresh may write: never the log, never inside `.git/`, never over an existing file
/// without `--force` (the dataset itself included), each refused before anything is written
/// (exit 2); PII patterns rewrite string values only, so `user` leaves keys and roles and the
/// empty pattern is refused.
#[test]
fn a_refresh_writes_only_where_it_may_and_pii_patterns_leave_keys_and_roles() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git2::Repository::init(root).unwrap();
    write_inputs(root);
    let log = std::fs::read(root.join("log.jsonl")).unwrap();
    let dataset = std::fs::read(root.join("dataset.jsonl")).unwrap();
    let config = std::fs::read(root.join(".git/config")).unwrap();
    let refused = |out: &str, extra: &[&str], why: &str| {
        let o = refresh(root, "42", out, extra);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{out}: {stderr}");
        assert!(stderr.contains(why), "{out}: {stderr}");
    };
    refused("log.jsonl", &["--force"], "--out log.jsonl is the --log file");
    refused("./sub/../log.jsonl", &[], "is the --log file");
    refused(".git/config", &["--force"], "inside the git directory");
    refused("dataset.jsonl", &[], "--out dataset.jsonl is the --dataset file");
    refused("out.jsonl", &["--pii-pattern", ""], "matches the empty text");
    assert_eq!(std::fs::read(root.join("log.jsonl")).unwrap(), log);
    assert_eq!(std::fs::read(root.join("dataset.jsonl")).unwrap(), dataset);
    assert_eq!(std::fs::read(root.join(".git/config")).unwrap(), config);
    assert!(!root.join("out.jsonl").exists() && !root.join(".git/config.provenance.json").exists());
    // A first refresh writes; a second over it needs --force, as does one in place.
    let first = refresh(root, "42", "out.jsonl", &["--pii-pattern", "user"]);
    assert_eq!(first.status.code(), Some(0), "{}", String::from_utf8_lossy(&first.stderr));
    let written = std::fs::read(root.join("out.jsonl")).unwrap();
    refused(
        "out.jsonl",
        &[],
        "--out out.jsonl exists: refused, nothing written (--force replaces it)",
    );
    assert_eq!(std::fs::read(root.join("out.jsonl")).unwrap(), written);
    let in_place = refresh(root, "42", "dataset.jsonl", &["--force"]);
    assert_eq!(in_place.status.code(), Some(0), "{}", String::from_utf8_lossy(&in_place.stderr));
    // `user` as a PII pattern: the roles and keys stay, and the bench's reader takes the result.
    let text = String::from_utf8(written).unwrap();
    assert!(!text.contains(r#""role":"[pii]""#), "{text}");
    let roles: BTreeSet<String> = items(&text)
        .iter()
        .filter_map(|v| v.get("messages"))
        .flat_map(|m| m.as_array().unwrap().iter())
        .map(|m| m["role"].as_str().unwrap().to_string())
        .collect();
    assert!(roles.contains("user"), "{roles:?}");
    for v in items(&text) {
        assert!(v.as_object().unwrap().keys().all(|k| !k.contains("[pii]")), "{v}");
    }
    let cfg = infergate_model::config::WorkloadConfig::default();
    let workload =
        infergate_model::workload::Workload::from_jsonl(&root.join("out.jsonl"), &text, &cfg);
    assert!(workload.is_ok(), "{:?}", workload.err());
}
