//! `cargo xtask import FORMAT FILE --out DIR` through the CLI, on a fixture of each format
//! (`fixtures/import/`): every statistic the fixture holds is in the imported summary with the
//! same value (each expected value read from the fixture, converted as documented), the
//! statistics it does not hold are null, its per-request data round-trips into
//! `requests.jsonl`, guidellm's TPOT is infergate's (one value per request, from its kept
//! requests), a malformed file, one of an unknown format version or one holding an impossible
//! value is refused (exit 2, never a panic) with the file and the field, `/dev/zero` and a
//! 1 GB file are refused within 500 MB of peak memory (measured with `wait4`), and a record
//! whose baseline was imported lints and says so.
//!
//! The fixtures are written from each tool's own writer code: `vllm-bench.json` follows
//! `vllm/benchmarks/serve.py` of vLLM (vllm-project/vllm at commit 009e6d4a, 2026: `benchmark()`
//! with `--save-result --save-detailed --metric-percentiles 90,99`); `guidellm-benchmarks.json`
//! guidellm 0.8.1's `GenerativeBenchmarksReport` (`benchmark/schemas/report.py`, report schema
//! 2); `aiperf/` AIPerf 0.13.0's `JsonExportData` (schema 1.4) and `MetricRecordInfo` lines.

use std::path::{Path, PathBuf};

use infergate_model::outcome::Outcome;
use infergate_model::record::RequestRecord;
use serde_json::Value;

use crate::support::{Out, repo_root, xtask};

fn fixture(name: &str) -> PathBuf {
    repo_root().join("xtask/tests/it/fixtures/import").join(name)
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// An import into a fresh root: the summary (as JSON, and read as infergate reads it) and the
/// records, when it wrote any.
struct Imported {
    _root: tempfile::TempDir,
    stdout: String,
    summary: Value,
    records: Option<Vec<RequestRecord>>,
}

fn run_import(format: &str, file: &Path, extra: &[&str]) -> (tempfile::TempDir, Out) {
    let root = tempfile::tempdir().unwrap();
    let file = file.to_str().unwrap();
    let mut args = vec!["import", format, file, "--out", "runs/imported"];
    args.extend_from_slice(extra);
    let out = xtask(root.path(), &args);
    (root, out)
}

fn import(format: &str, file: &Path) -> Imported {
    let (root, out) = run_import(format, file, &[]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let dir = root.path().join("runs/imported");
    infergate_model::Summary::read(&dir).expect("an imported summary reads as a summary");
    let summary = read_json(&dir.join("summary.json"));
    let records = std::fs::read_to_string(dir.join("requests.jsonl"))
        .ok()
        .map(|t| t.lines().map(|l| serde_json::from_str::<RequestRecord>(l).unwrap()).collect());
    Imported { _root: root, stdout: out.stdout, summary, records }
}

fn at<'a>(v: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(v, |v, k| match k.parse::<usize>() {
        Ok(i) if v.is_array() => &v[i],
        _ => &v[k],
    })
}

/// The summary holds `expected` at `path`, exactly.
fn assert_at(s: &Value, path: &str, expected: f64) {
    let got = at(s, path).as_f64();
    assert_eq!(got, Some(expected), "summary `{path}`");
}

fn assert_null(s: &Value, path: &str) {
    assert!(at(s, path).is_null(), "summary `{path}` should be null, is {}", at(s, path));
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

/// The source file recorded with its content's hash.
fn assert_source(s: &Value, tool: &str, file: &Path) {
    assert_eq!(at(s, "config.imported.tool"), tool);
    let hash =
        format!("fnv1a:{:016x}", infergate_model::hash::fnv1a(&std::fs::read(file).unwrap()));
    assert_eq!(at(s, "config.imported.files.0.hash"), &Value::from(hash));
    assert!(!at(s, "config.imported.definitions").as_array().unwrap().is_empty());
}

/// Each request in exactly one class: the summary's classes are the records' classes.
fn assert_classes(s: &Value, records: &[RequestRecord]) {
    let measured: Vec<&RequestRecord> = records.iter().filter(|r| !r.warmup).collect();
    let by_class = at(s, "requests.by_class").as_object().unwrap();
    let sum: u64 = by_class.values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(sum, measured.len() as u64);
    for (class, n) in by_class {
        let count = measured.iter().filter(|r| r.class.to_string() == *class).count() as u64;
        assert_eq!(Some(count), n.as_u64(), "class {class}");
    }
    // Failed requests are never in a latency distribution: no token times.
    for r in measured.iter().filter(|r| r.class != Outcome::Ok) {
        assert!(r.first_token_ms.is_none() && r.itl_ms.is_empty(), "{r:?}");
    }
}

#[test]
fn a_vllm_bench_result_imports_every_statistic_and_its_detailed_requests() {
    let file = fixture("vllm-bench.json");
    let src = read_json(&file);
    let got = import("vllm-bench", &file);
    let s = &got.summary;
    assert_source(s, "vllm-bench", &file);
    // Every statistic vLLM wrote, by its key, and where infergate keeps it.
    let mut covered = vec![];
    for (theirs, ours) in
        [("ttft", "ttft_ms"), ("tpot", "tpot_ms"), ("itl", "itl_ms"), ("e2el", "e2e_ms")]
    {
        for (stat, field) in
            [("mean", "mean"), ("median", "p50"), ("std", "stdev"), ("p90", "p90"), ("p99", "p99")]
        {
            let key = format!("{stat}_{theirs}_ms");
            let v = src[&key].as_f64().unwrap_or_else(|| panic!("the fixture has {key}"));
            assert_at(s, &format!("metrics.{ours}.{field}"), v);
            covered.push(key);
        }
        // What vLLM does not report is blank, never estimated.
        for field in ["min", "max", "p95", "p999"] {
            assert_null(s, &format!("metrics.{ours}.{field}"));
        }
    }
    for (key, path) in [
        ("duration", "timing.window.duration_s"),
        ("completed", "requests.ok"),
        ("failed", "requests.failed"),
        ("total_input_tokens", "tokens.input_total"),
        ("total_output_tokens", "tokens.output_total"),
        ("request_throughput", "throughput.requests_per_s"),
        ("output_throughput", "throughput.output_tokens_per_s"),
        ("total_token_throughput", "throughput.total_tokens_per_s"),
        ("max_concurrency", "config.load.concurrency"),
        ("num_prompts", "config.load.requests"),
    ] {
        assert_at(s, path, src[key].as_f64().unwrap());
        covered.push(key.to_string());
    }
    // The two measurements infergate has no metric for are in the notes with their values.
    let notes = at(s, "notes").to_string();
    for key in ["max_output_tokens_per_s", "max_concurrent_requests"] {
        assert!(notes.contains(&format!("{key} = {}", src[key])), "{notes}");
        covered.push(key.to_string());
    }
    // Every number of the fixture is asserted above (or is a setting with no figure in it).
    for (key, v) in src.as_object().unwrap() {
        if v.is_number() && !["burstiness", "rtfx"].contains(&key.as_str()) {
            assert!(covered.contains(key), "the fixture's {key} is not checked");
        }
    }
    // Per request: the class, TTFT, each gap, E2E and the tokens.
    let recs = got.records.expect("--save-detailed arrays become requests.jsonl");
    let n = src["ttfts"].as_array().unwrap().len();
    assert_eq!(recs.len(), n);
    for (i, r) in recs.iter().enumerate() {
        let ok = src["errors"][i].as_str().unwrap().is_empty();
        assert_eq!(r.class == Outcome::Ok, ok, "request {i}");
        assert_eq!(r.input_tokens, src["input_lens"][i].as_u64());
        let latency = src["latencies"][i].as_f64().unwrap() * 1000.0;
        assert!(close(r.end_ms - r.intended_ms, latency), "request {i} E2E to the end");
        if !ok {
            continue;
        }
        let ttft = src["ttfts"][i].as_f64().unwrap() * 1000.0;
        assert!(close(r.ttft_ms().unwrap(), ttft), "request {i} TTFT");
        let gaps: Vec<f64> = src["itls"][i]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g.as_f64().unwrap() * 1000.0)
            .collect();
        assert_eq!(r.itl_ms, gaps, "request {i} ITL");
        assert!(close(r.e2e_ms().unwrap(), ttft + gaps.iter().sum::<f64>()), "request {i} E2E");
        assert_eq!(r.output_tokens, src["output_lens"][i].as_u64());
    }
    assert_classes(s, &recs);
    assert_eq!(at(s, "requests.total").as_u64(), Some(n as u64));
    // The blanks show as blanks, in the console and on the report page.
    let root = got._root.path();
    let o = xtask(root, &["report", "runs/imported"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let html = std::fs::read_to_string(root.join("runs/imported/report.html")).unwrap();
    assert!(!html.contains("NaN") && !got.stdout.contains("NaN"), "{}", got.stdout);
    assert!(got.stdout.contains("—"), "{}", got.stdout);
}

#[test]
fn a_guidellm_report_imports_its_benchmark_and_every_kept_request() {
    let file = fixture("guidellm-benchmarks.json");
    let src = read_json(&file);
    let got = import("guidellm", &file);
    let s = &got.summary;
    assert_source(s, "guidellm", &file);
    assert_eq!(at(s, "tool.version"), &src["metadata"]["guidellm_version"]);
    let b = &src["benchmarks"][0];
    let m = &b["metrics"];
    // guidellm's request latency is in seconds: milliseconds by one multiplication.
    for (theirs, ours, scale) in
        [("time_to_first_token_ms", "ttft_ms", 1.0), ("request_latency", "e2e_ms", 1000.0)]
    {
        let d = &m[theirs]["successful"];
        for (stat, field) in [
            ("mean", "mean"),
            ("std_dev", "stdev"),
            ("min", "min"),
            ("max", "max"),
            ("percentiles.p50", "p50"),
            ("percentiles.p90", "p90"),
            ("percentiles.p95", "p95"),
            ("percentiles.p99", "p99"),
            ("percentiles.p999", "p999"),
        ] {
            assert_at(s, &format!("metrics.{ours}.{field}"), at(d, stat).as_f64().unwrap() * scale);
        }
        assert_at(s, &format!("metrics.{ours}.count"), d["count"].as_f64().unwrap());
    }
    assert!(at(s, "metrics.itl_ms").is_null(), "guidellm records no per-gap ITL");
    // TPOT is infergate's, one value per kept successful request with more than one output
    // token: (last token - first token) / (output tokens - 1).
    let tpots: Vec<f64> = b["requests"]["successful"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["output_metrics"]["total_tokens"].as_u64().unwrap() > 1)
        .map(|r| {
            let t = &r["info"]["timings"];
            let n = r["output_metrics"]["total_tokens"].as_f64().unwrap();
            let span = t["last_token_iteration"].as_f64().unwrap()
                - t["first_token_iteration"].as_f64().unwrap();
            span * 1000.0 / (n - 1.0)
        })
        .collect();
    assert_tpot(s, &tpots);
    for (theirs, ours) in [
        ("requests_per_second", "throughput.requests_per_s"),
        ("output_tokens_per_second", "throughput.output_tokens_per_s"),
        ("tokens_per_second", "throughput.total_tokens_per_s"),
    ] {
        assert_at(s, ours, m[theirs]["successful"]["mean"].as_f64().unwrap());
    }
    assert_at(
        s,
        "tokens.input_total",
        m["prompt_token_count"]["successful"]["total_sum"].as_f64().unwrap(),
    );
    assert_at(
        s,
        "tokens.output_total",
        m["output_token_count"]["successful"]["total_sum"].as_f64().unwrap(),
    );
    let t = &m["request_totals"];
    assert_at(s, "requests.total", t["total"].as_f64().unwrap());
    assert_at(s, "requests.ok", t["successful"].as_f64().unwrap());
    assert_at(
        s,
        "requests.failed",
        t["errored"].as_f64().unwrap() + t["incomplete"].as_f64().unwrap(),
    );
    assert_at(s, "timing.window.duration_s", b["duration"].as_f64().unwrap());
    assert_at(s, "config.load.concurrency", b["config"]["strategy"]["streams"].as_f64().unwrap());
    // Every request was kept: each becomes a record.
    let recs = got.records.expect("the kept requests become requests.jsonl");
    let ok = b["requests"]["successful"].as_array().unwrap();
    let errored = b["requests"]["errored"].as_array().unwrap();
    assert_eq!(recs.len(), ok.len() + errored.len());
    let start0 = ok
        .iter()
        .chain(errored)
        .map(|r| r["info"]["timings"]["request_start"].as_f64().unwrap())
        .fold(f64::INFINITY, f64::min);
    for (r, src) in recs.iter().zip(ok) {
        let tm = &src["info"]["timings"];
        let t = |k: &str| tm[k].as_f64().unwrap();
        assert_eq!(r.class, Outcome::Ok);
        assert!(close(r.intended_ms, (t("request_start") - start0) * 1000.0));
        assert!(close(
            r.ttft_ms().unwrap(),
            (t("first_token_iteration") - t("request_start")) * 1000.0
        ));
        assert!(close(
            r.e2e_ms().unwrap(),
            (t("last_token_iteration") - t("request_start")) * 1000.0
        ));
        assert_eq!(r.output_tokens, src["output_metrics"]["total_tokens"].as_u64());
        assert_eq!(r.input_tokens, src["input_metrics"]["total_tokens"].as_u64());
        assert_eq!(r.content_events, tm["token_iterations"].as_u64().unwrap());
    }
    for r in &recs[ok.len()..] {
        assert_ne!(r.class, Outcome::Ok);
    }
    assert_classes(s, &recs);
}

#[test]
fn an_aiperf_export_imports_every_statistic_and_its_per_request_records() {
    let file = fixture("aiperf/profile_export_aiperf.json");
    let src = read_json(&file);
    let got = import("aiperf", &file);
    let s = &got.summary;
    assert_source(s, "aiperf", &file);
    assert_eq!(at(s, "tool.version"), &src["aiperf_version"]);
    for (theirs, ours) in [
        ("time_to_first_token", "ttft_ms"),
        ("inter_token_latency", "tpot_ms"),
        ("inter_chunk_latency", "itl_ms"),
        ("request_latency", "e2e_ms"),
    ] {
        let d = &src[theirs];
        assert_eq!(d["unit"], "ms");
        for (stat, field) in [
            ("avg", "mean"),
            ("std", "stdev"),
            ("min", "min"),
            ("max", "max"),
            ("p50", "p50"),
            ("p90", "p90"),
            ("p95", "p95"),
            ("p99", "p99"),
            ("count", "count"),
        ] {
            assert_at(s, &format!("metrics.{ours}.{field}"), d[stat].as_f64().unwrap());
        }
        assert_null(s, &format!("metrics.{ours}.p999"));
    }
    for (theirs, ours) in [
        ("request_throughput", "throughput.requests_per_s"),
        ("output_token_throughput", "throughput.output_tokens_per_s"),
        ("total_isl", "tokens.input_total"),
        ("total_osl", "tokens.output_total"),
        ("benchmark_duration", "timing.window.duration_s"),
        ("request_count", "requests.ok"),
    ] {
        assert_at(s, ours, src[theirs]["avg"].as_f64().unwrap());
    }
    assert_null(s, "throughput.total_tokens_per_s");
    assert_at(
        s,
        "config.load.concurrency",
        src["input_config"]["loadgen"]["concurrency"].as_f64().unwrap(),
    );
    // The per-request lines: one record each, warmup apart, each in one class.
    let lines: Vec<Value> = std::fs::read_to_string(fixture("aiperf/profile_export.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let recs = got.records.expect("profile_export.jsonl becomes requests.jsonl");
    assert_eq!(recs.len(), lines.len());
    let start0 =
        lines.iter().map(|l| l["metadata"]["request_start_ns"].as_u64().unwrap()).min().unwrap();
    for (r, l) in recs.iter().zip(&lines) {
        let md = &l["metadata"];
        assert_eq!(r.warmup, md["benchmark_phase"] == "warmup");
        let ns = |k: &str| (md[k].as_u64().unwrap() - start0) as f64 / 1e6;
        assert!(close(r.intended_ms, ns("request_start_ns")));
        assert!(close(r.end_ms, ns("request_end_ns")));
        let expected = match (&l["error"], md["was_cancelled"].as_bool().unwrap()) {
            (_, true) => Outcome::Cancelled,
            (Value::Null, false) => Outcome::Ok,
            (e, false) => Outcome::Http(e["code"].as_u64().unwrap() as u16),
        };
        assert_eq!(r.class, expected);
        if expected != Outcome::Ok {
            continue;
        }
        let metric = |k: &str| &l["metrics"][k]["value"];
        assert!(close(r.ttft_ms().unwrap(), metric("time_to_first_token").as_f64().unwrap()));
        let gaps: Vec<f64> = metric("inter_chunk_latency")
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g.as_f64().unwrap())
            .collect();
        assert_eq!(r.itl_ms, gaps);
        assert!(close(r.end_ms - r.intended_ms, metric("request_latency").as_f64().unwrap()));
        assert_eq!(r.output_tokens, metric("output_sequence_length").as_u64());
        assert_eq!(r.input_tokens, metric("input_sequence_length").as_u64());
    }
    assert_classes(s, &recs);
}

/// A copy of fixture `name` (a file or the AIPerf directory) in a scratch directory, with
/// `edit` applied to the text of `file` in it.
fn edited(name: &str, file: &str, edit: impl Fn(&str) -> String) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let from = fixture(name);
    if from.is_dir() {
        for e in std::fs::read_dir(&from).unwrap() {
            let p = e.unwrap().path();
            std::fs::copy(&p, dir.path().join(p.file_name().unwrap())).unwrap();
        }
    } else {
        std::fs::copy(&from, dir.path().join(file)).unwrap();
    }
    let path = dir.path().join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let changed = edit(&text);
    assert_ne!(changed, text, "the edit changes the file");
    std::fs::write(&path, changed).unwrap();
    (dir, path)
}

/// The import of `file` fails (exit 2) with every one of `wanted` in its message.
fn refused(format: &str, file: &Path, wanted: &[&str]) {
    let (_root, out) = run_import(format, file, &[]);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    for w in wanted {
        assert!(out.stderr.contains(w), "`{w}` not in: {}", out.stderr);
    }
}

#[test]
fn a_malformed_file_is_refused_with_the_file_and_the_field() {
    let (_d, f) = edited("vllm-bench.json", "vllm-bench.json", |t| {
        t.replace("\"completed\": 4,", "\"completed\": \"four\",")
    });
    refused("vllm-bench", &f, &[f.to_str().unwrap(), "field `completed`", "expected u64"]);
    let (_d, f) = edited("vllm-bench.json", "vllm-bench.json", |t| {
        t.replace("\"p99_ttft_ms\": ", "\"p99_ttft_ms\": \"slow\", \"x\": ")
    });
    refused("vllm-bench", &f, &["field `p99_ttft_ms`", "not a number of milliseconds"]);
    let (_d, f) = edited("guidellm-benchmarks.json", "benchmarks.json", |t| {
        t.replacen("\"std_dev\": ", "\"std_dev\": \"wide\", \"x\": ", 1)
    });
    refused("guidellm", &f, &[f.to_str().unwrap(), "field `benchmarks[0].metrics."]);
    let (_d, f) = edited("aiperf", "profile_export.jsonl", |t| {
        let mut lines: Vec<String> = t.lines().map(str::to_string).collect();
        lines[2] = lines[2].replacen("\"request_start_ns\": ", "\"request_start_ns\": -", 1);
        lines.join("\n") + "\n"
    });
    let export = f.with_file_name("profile_export_aiperf.json");
    refused("aiperf", &export, &["profile_export.jsonl:3:", "field `metadata.request_start_ns`"]);
    let (_d, f) = edited("aiperf", "profile_export_aiperf.json", |t| {
        t.replacen("\"unit\": \"ms\"", "\"unit\": \"fortnights\"", 1)
    });
    refused("aiperf", &f, &["field `request_latency.unit`", "ns, us, ms or sec"]);
    let (_root, out) = run_import("vllm", &fixture("vllm-bench.json"), &[]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("the formats are vllm-bench, guidellm, aiperf"), "{}", out.stderr);
}

#[test]
fn a_file_of_an_unknown_format_version_is_refused_with_the_versions() {
    let (_d, f) = edited("guidellm-benchmarks.json", "benchmarks.json", |t| {
        t.replacen("\"version\": 2", "\"version\": 3", 1)
    });
    refused("guidellm", &f, &[f.to_str().unwrap(), "field `metadata.version` is 3", "format 2"]);
    let (_d, f) = edited("aiperf", "profile_export_aiperf.json", |t| {
        t.replacen("\"schema_version\": \"1.4\"", "\"schema_version\": \"2.0\"", 1)
    });
    refused("aiperf", &f, &["field `schema_version` is \"2.0\"", "format 1.x"]);
}

/// A record whose baseline is an imported vLLM run and whose experiment a run infergate
/// measured on its simulator: written, accepted by `adr lint`, and it says the baseline was
/// imported, from which tool and file.
#[cfg(feature = "runtime")]
#[test]
fn a_record_with_an_imported_baseline_lints_and_says_it_was_imported() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    std::fs::create_dir_all(r.join(".git")).unwrap();
    std::fs::create_dir_all(r.join("configs")).unwrap();
    std::fs::write(
        r.join("configs/bench.toml"),
        "[profile.default.sim]\nmode = \"timing\"\n[profile.default.sim.timing]\nttft_ms = 2\n\
         itl_ms = 1\n[profile.default.workload]\ninput_lengths = [8]\nrepeats = 4\nmax_tokens = 4\n\
         [profile.default.load]\nconcurrency = 2\n",
    )
    .unwrap();
    std::fs::copy(fixture("vllm-bench.json"), r.join("vllm-result.json")).unwrap();
    let o = xtask(r, &["import", "vllm-bench", "vllm-result.json", "--out", "runs/vllm"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let o = xtask(r, &["bench", "-q", "--out", "runs/measured"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let o = xtask(
        r,
        &[
            "adr",
            "new",
            "Move to infergate",
            "--baseline",
            "runs/vllm",
            "--exp",
            "runs/measured",
            "--choose",
            "1",
            "--deciders",
            "Platform team",
        ],
    );
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let record = crate::support::new_record(r);
    let text = std::fs::read_to_string(&record).unwrap();
    let note = text.lines().find(|l| l.contains("**Imported:**")).expect("the record says so");
    assert!(note.contains("measured by vllm-bench, not by infergate"), "{note}");
    let hash = format!(
        "fnv1a:{:016x}",
        infergate_model::hash::fnv1a(&std::fs::read(r.join("vllm-result.json")).unwrap())
    );
    assert!(note.contains("vllm-result.json") && note.contains(&hash), "{note}");
    // The deciders fill in the template's prompts; then the record lints.
    let filled: Vec<String> = text
        .lines()
        .map(
            |l| if l.starts_with('<') && l.ends_with('>') { "Filled in.".into() } else { l.into() },
        )
        .collect();
    std::fs::write(&record, filled.join("\n") + "\n").unwrap();
    let lint = xtask(r, &["adr", "lint"]);
    assert_eq!(lint.code, 0, "{}{}", lint.stdout, lint.stderr);
}

/// The summary's TPOT is one value per request, exactly `expected` (to the microsecond the
/// summary keeps): its count, minimum, maximum and mean.
fn assert_tpot(s: &Value, expected: &[f64]) {
    let near = |path: &str, v: f64| {
        let got = at(s, path).as_f64().unwrap_or_else(|| panic!("summary `{path}` is blank"));
        assert!((got - v).abs() <= 1e-3, "summary `{path}`: {got}, expected {v}");
    };
    assert_at(s, "metrics.tpot_ms.count", expected.len() as f64);
    near("metrics.tpot_ms.min", expected.iter().copied().fold(f64::INFINITY, f64::min));
    near("metrics.tpot_ms.max", expected.iter().copied().fold(f64::NEG_INFINITY, f64::max));
    near("metrics.tpot_ms.mean", expected.iter().sum::<f64>() / expected.len() as f64);
}

/// A copy of fixture `name` in a scratch directory (the AIPerf directory: every file of it) as
/// `file`, its JSON edited by `edit`.
fn edited_json(name: &str, file: &str, edit: impl Fn(&mut Value)) -> (tempfile::TempDir, PathBuf) {
    edited(name, file, |t| {
        let mut v: Value = serde_json::from_str(t).unwrap();
        edit(&mut v);
        serde_json::to_string_pretty(&v).unwrap()
    })
}

/// A copy of the AIPerf fixture whose `profile_export.jsonl` line `line` (from 1) is edited.
fn edited_aiperf_line(line: usize, edit: impl Fn(&mut Value)) -> (tempfile::TempDir, PathBuf) {
    let (dir, _) = edited("aiperf", "profile_export.jsonl", |t| {
        let mut lines: Vec<String> = t.lines().map(str::to_string).collect();
        let mut v: Value = serde_json::from_str(&lines[line - 1]).unwrap();
        edit(&mut v);
        lines[line - 1] = v.to_string();
        lines.join("\n") + "\n"
    });
    let export = dir.path().join("profile_export_aiperf.json");
    (dir, export)
}

fn set(v: &mut Value, pointer: &str, to: Value) {
    *v.pointer_mut(pointer).unwrap_or_else(|| panic!("the fixture has {pointer}")) = to;
}

#[test]
fn guidellm_tpot_is_one_value_per_request_with_more_than_one_output_token() {
    // Three successful requests: 4 output tokens over 30 ms after the first (10 ms each), one
    // token (no TPOT), 9 tokens over 40 ms (5 ms each). guidellm's own inter_token_latency_ms
    // weights each request by its output tokens - 1: 3 + 0 + 8 = 11 values, mean 70 / 11.
    let (_d, f) = edited_json("guidellm-benchmarks.json", "benchmarks.json", |v| {
        let ok = "/benchmarks/0/requests/successful";
        for (i, (first, last, tokens)) in [
            (1764930000.05, 1764930000.08, 4),
            (1764930000.06, 1764930000.06, 1),
            (1764930000.16, 1764930000.2, 9),
        ]
        .into_iter()
        .enumerate()
        {
            set(v, &format!("{ok}/{i}/info/timings/first_token_iteration"), first.into());
            set(v, &format!("{ok}/{i}/info/timings/last_token_iteration"), last.into());
            set(v, &format!("{ok}/{i}/output_metrics/total_tokens"), tokens.into());
        }
        let itl = "/benchmarks/0/metrics/inter_token_latency_ms/successful";
        set(v, &format!("{itl}/count"), 11.into());
        set(v, &format!("{itl}/mean"), (70.0 / 11.0).into());
        set(v, &format!("{itl}/min"), 5.0.into());
    });
    let got = import("guidellm", &f);
    let s = &got.summary;
    let start = |t: f64| (t - 1764930000.0) * 1000.0;
    let expected = [
        (start(1764930000.08) - start(1764930000.05)) / 3.0,
        (start(1764930000.2) - start(1764930000.16)) / 8.0,
    ];
    assert!((expected[0] - 10.0).abs() < 1e-3 && (expected[1] - 5.0).abs() < 1e-3);
    assert_tpot(s, &expected);
    // The records give the same figures, request by request.
    let recs = got.records.unwrap();
    let per_request: Vec<f64> = recs.iter().filter_map(RequestRecord::tpot_ms).collect();
    assert_eq!(per_request.len(), 2, "{per_request:?}");
    for (got, want) in per_request.iter().zip(expected) {
        assert!((got - want).abs() < 1e-6, "{got} vs {want}");
    }
    // guidellm's token-weighted figure is not the summary's TPOT; a note keeps it.
    assert_ne!(at(s, "metrics.tpot_ms.count").as_u64(), Some(11));
    let notes = at(s, "notes").to_string();
    assert!(
        notes.contains("inter_token_latency_ms (weighted by output tokens - 1: count 11"),
        "{notes}"
    );
}

#[test]
fn a_guidellm_report_that_kept_a_sample_has_no_tpot_and_says_why() {
    let (_d, f) = edited_json("guidellm-benchmarks.json", "benchmarks.json", |v| {
        let ok = v.pointer_mut("/benchmarks/0/requests/successful").unwrap();
        ok.as_array_mut().unwrap().pop();
    });
    let got = import("guidellm", &f);
    assert!(got.records.is_none());
    assert_null(&got.summary, "metrics.tpot_ms");
    let notes = at(&got.summary, "notes").to_string();
    assert!(
        notes.contains("kept 3 of the benchmark's 4 requests") && notes.contains("no TPOT"),
        "{notes}"
    );
}

#[test]
fn inputs_that_panicked_the_importer_exit_2_with_the_file_and_the_field() {
    // vLLM per-request arrays of different lengths, without `ttfts`.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("result.json");
    std::fs::write(
        &f,
        r#"{"duration":1,"completed":3,"total_input_tokens":3,"request_throughput":3,"output_lens":[2,2,2],"itls":[[0.01],[0.01],[0.01]],"errors":[""]}"#,
    )
    .unwrap();
    refused(
        "vllm-bench",
        &f,
        &[f.to_str().unwrap(), "field `errors`", "holds 1 entries, `output_lens` 3"],
    );
    // An AIPerf record whose TTFT is an empty list.
    let (_d, export) = edited_aiperf_line(2, |v| {
        set(v, "/metrics/time_to_first_token/value", serde_json::json!([]))
    });
    refused(
        "aiperf",
        &export,
        &[
            "profile_export.jsonl:2:",
            "field `metrics.time_to_first_token.value`",
            "a request has one TTFT",
        ],
    );
}

#[test]
fn impossible_values_are_refused_with_the_file_and_the_field() {
    let vllm = |pointer: &'static str, to: Value| {
        edited_json("vllm-bench.json", "vllm-bench.json", move |v| set(v, pointer, to.clone()))
    };
    // A negative TTFT and a negative duration: a first token before its send, a window of -2 s.
    let (_d, f) = vllm("/ttfts/1", (-0.05).into());
    refused(
        "vllm-bench",
        &f,
        &[f.to_str().unwrap(), "field `ttfts[1]` is -0.05", "never negative"],
    );
    let (_d, f) = vllm("/duration", (-2.0).into());
    refused("vllm-bench", &f, &[f.to_str().unwrap(), "field `duration` is -2", "never negative"]);
    // Send times of 1e308 and -1e308.
    let (_d, f) = vllm("/start_times/2", 1e308.into());
    refused("vllm-bench", &f, &["field `start_times[2]` is 1e308", "at most 30 days"]);
    let (_d, f) = vllm("/start_times/0", (-1e308).into());
    refused(
        "vllm-bench",
        &f,
        &["field `start_times[1]`", "after the first send (`start_times[0]`"],
    );
    // A request that ends before its first token.
    let (_d, f) = vllm("/latencies/0", 0.01.into());
    refused("vllm-bench", &f, &["field `latencies[0]` is 0.01", "before `ttfts[0]` (0.05)"]);
    // An AIPerf request that ends before it starts, and a benchmark that ends before it starts.
    let (_d, export) = edited_aiperf_line(3, |v| {
        set(v, "/metadata/request_end_ns", 1764930000000000000u64.into())
    });
    refused(
        "aiperf",
        &export,
        &[
            "profile_export.jsonl:3:",
            "field `metadata.request_end_ns`",
            "before `metadata.request_start_ns`",
        ],
    );
    let (_d, f) = edited_json("aiperf", "profile_export_aiperf.json", |v| {
        set(v, "/end_time", "2026-12-04T23:59:59.000000".into())
    });
    refused("aiperf", &f, &[f.to_str().unwrap(), "field `end_time`", "before `start_time`"]);
    // guidellm totals that contradict its classes (ok 3, total 40), and a report that kept more
    // successful requests than it counted (kept 3, counted 1).
    let (_d, f) = edited_json("guidellm-benchmarks.json", "benchmarks.json", |v| {
        set(v, "/benchmarks/0/metrics/request_totals/total", 40.into())
    });
    refused(
        "guidellm",
        &f,
        &[
            f.to_str().unwrap(),
            "field `benchmarks[0].metrics.request_totals.total` is 40",
            "3 + 1 + 0 = 4",
        ],
    );
    let (_d, f) = edited_json("guidellm-benchmarks.json", "benchmarks.json", |v| {
        set(v, "/benchmarks/0/metrics/request_totals/successful", 1.into());
        set(v, "/benchmarks/0/metrics/request_totals/total", 2.into());
    });
    refused(
        "guidellm",
        &f,
        &["field `benchmarks[0].requests.successful`", "request_totals.successful` is 1"],
    );
}

/// The import of `file`, run as a child process, and its peak resident set in bytes (the
/// kernel's `ru_maxrss` of the child, from `wait4`; it may include the pages the child shared
/// with this process before it ran the binary, so it never reads low).
///
/// The child may map at most 4 GiB (`RLIMIT_AS`; the import runs on one thread): an importer
/// that reads without a bound fails here in seconds, refused its memory, instead of taking the
/// machine's.
#[cfg(target_os = "linux")]
fn import_measured(format: &str, file: &Path) -> (Out, u64) {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    let root = tempfile::tempdir().unwrap();
    let mut command = crate::support::xtask_command(
        root.path(),
        &["import", format, file.to_str().unwrap(), "--out", "runs/imported"],
    );
    // SAFETY: between fork and exec the closure only makes the setrlimit system call.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit { rlim_cur: 4 << 30, rlim_max: 4 << 30 };
            match libc::setrlimit(libc::RLIMIT_AS, &limit) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            }
        });
    }
    // Reaped by `wait4` below, which std's handle does not see.
    #[allow(clippy::zombie_processes)]
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the xtask binary");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            r.read_to_string(&mut s).unwrap();
            s
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 reaps our own child (std's handle is not waited
    // on after this).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "{}", std::io::Error::last_os_error());
    let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { -1 };
    let out = Out { code, stdout: stdout.join().unwrap(), stderr: stderr.join().unwrap() };
    (out, usage.ru_maxrss as u64 * 1024)
}

/// What the import tests allow one import of a hostile file to take: 500 MB resident.
#[cfg(target_os = "linux")]
const PEAK_BOUND: u64 = 500_000_000;

#[cfg(target_os = "linux")]
#[test]
fn dev_zero_and_a_1_gb_file_end_with_a_clear_error_within_the_memory_bound() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.json");
    // Sparse: a gigabyte of zeros that takes no disk.
    std::fs::File::create(&big).unwrap().set_len(1 << 30).unwrap();
    let zero = Path::new("/dev/zero");
    for format in ["vllm-bench", "guidellm", "aiperf"] {
        let (out, peak) = import_measured(format, zero);
        assert_eq!(out.code, 2, "{format} /dev/zero: {}", out.stderr);
        assert!(out.stderr.contains("/dev/zero:1:1: not valid JSON"), "{}", out.stderr);
        assert!(peak < PEAK_BOUND, "{format} /dev/zero: peak {peak} bytes");
        eprintln!("peak RSS, import {format} /dev/zero: {:.1} MB", peak as f64 / 1e6);
        let (out, peak) = import_measured(format, &big);
        assert_eq!(out.code, 2, "{format} 1 GiB: {}", out.stderr);
        for want in [big.to_str().unwrap(), "1 GiB (1073741824 bytes) long", "at most 512 MiB"] {
            assert!(out.stderr.contains(want), "`{want}` not in {}", out.stderr);
        }
        assert!(peak < PEAK_BOUND, "{format} 1 GiB: peak {peak} bytes");
        eprintln!("peak RSS, import {format} (1 GiB file): {:.1} MB", peak as f64 / 1e6);
    }
    // AIPerf's per-request file read from beside the export: a link to /dev/zero is one
    // endless line, refused at the per-line limit; a 1 GiB one is refused by its size.
    let (d, export) = edited_json("aiperf", "profile_export_aiperf.json", |v| {
        set(v, "/aiperf_version", "0.13.0-test".into())
    });
    let jsonl = d.path().join("profile_export.jsonl");
    std::fs::remove_file(&jsonl).unwrap();
    std::os::unix::fs::symlink(zero, &jsonl).unwrap();
    let (out, peak) = import_measured("aiperf", &export);
    assert_eq!(out.code, 2, "{}", out.stderr);
    let line = format!("{}:1: a line longer than 16 MiB", jsonl.display());
    assert!(out.stderr.contains(&line), "`{line}` not in {}", out.stderr);
    assert!(peak < PEAK_BOUND, "aiperf, its records /dev/zero: peak {peak} bytes");
    eprintln!(
        "peak RSS, import aiperf (profile_export.jsonl -> /dev/zero): {:.1} MB",
        peak as f64 / 1e6
    );
    std::fs::remove_file(&jsonl).unwrap();
    std::fs::File::create(&jsonl).unwrap().set_len(1 << 30).unwrap();
    let (out, peak) = import_measured("aiperf", &export);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("profile_export.jsonl: 1 GiB"), "{}", out.stderr);
    assert!(peak < PEAK_BOUND, "aiperf, its records 1 GiB: peak {peak} bytes");
}
