//! `cargo xtask report` and `bench --report`: the page of a run, a sweep and a strategy
//! comparison, built from what the runs wrote; failures shown, blanks shown as blanks, the gate's
//! limits drawn, the page self-contained and small.

use std::path::Path;

use crate::support::{self, Out};

/// A repository root with a bench config that uses the timing simulator (`extra` appended).
pub fn repo(extra: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("configs")).unwrap();
    let text = format!(
        "[profile.default.sim]\nmode = \"timing\"\n[profile.default.sim.timing]\nttft_ms = 2\nitl_ms = 1\n\
         [profile.default.workload]\ninput_lengths = [8]\nrepeats = 12\nmax_tokens = 4\n\
         [profile.default.load]\nconcurrency = 2\n{extra}"
    );
    std::fs::write(dir.path().join("configs/bench.toml"), text).unwrap();
    dir
}

pub fn xtask(root: &Path, args: &[&str]) -> Out {
    support::xtask(root, args)
}

/// The SVG of chart `id` in a page.
pub fn chart<'a>(html: &'a str, id: &str) -> &'a str {
    let at = html.find(&format!("data-chart=\"{id}\"")).unwrap_or_else(|| panic!("no chart {id}"));
    let end = html[at..].find("</svg>").unwrap();
    &html[at..at + end]
}

fn attr(tag: &str, name: &str) -> String {
    let key = format!("{name}=\"");
    let at = tag.find(&key).unwrap_or_else(|| panic!("no {name} in {tag}")) + key.len();
    tag[at..].split('"').next().unwrap().to_string()
}

/// Each series of a chart: name, points drawn, blanks.
pub fn series(chart: &str) -> Vec<(String, usize, usize)> {
    chart
        .split("<g class=\"series\"")
        .skip(1)
        .map(|g| {
            let tag = g.split('>').next().unwrap();
            (
                attr(tag, "data-name"),
                attr(tag, "data-points").parse().unwrap(),
                attr(tag, "data-blanks").parse().unwrap(),
            )
        })
        .collect()
}

/// A repository root whose default profile runs the engine simulator (for strategy
/// comparisons) with a small workload.
pub fn comparison_repo() -> tempfile::TempDir {
    let r = tempfile::tempdir().unwrap();
    std::fs::create_dir(r.path().join("configs")).unwrap();
    std::fs::write(
        r.path().join("configs/bench.toml"),
        "[profile.default.load]\nconcurrency = 4\nwarmup_requests = 0\n\
         [profile.default.workload]\ninput_lengths = [64, 128]\nrepeats = 4\nmax_tokens = 8\n\
         [profile.default.sim]\nengine_config = \"configs/engine.toml\"\n",
    )
    .unwrap();
    std::fs::write(
        r.path().join("configs/engine.toml"),
        "[engine]\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\nmax_model_len = 4096\n\
         [device]\nname = \"H100-SXM-80GB\"\nprice_per_hour = 2.0\n",
    )
    .unwrap();
    r
}

const GATE: &str = "version = 1\n\n[[threshold]]\nmetric = \"metrics.ttft_ms.p99\"\ncomparator = \"<=\"\n\
    limit = 250.0\nunit = \"ms\"\naction = \"block\"\nprofile = \"default\"\nadr = 7\n\
    file = \"docs/adr/0007-x.md\"\nline = 1\n";

#[test]
fn a_run_with_failures_shows_them_with_its_cdfs_timeline_and_the_gate_line() {
    let r = repo(
        "[profile.default.sim.faults]\nhttp_503 = 0.3\n[profile.default.slo]\nttft_ms = 400\n",
    );
    std::fs::create_dir_all(r.path().join("thresholds")).unwrap();
    std::fs::write(r.path().join("thresholds/gate.toml"), GATE).unwrap();
    let o = xtask(r.path(), &["bench", "-q", "--out", "runs/a", "--report"]);
    assert!(o.code == 0 || o.code == 1, "{}", o.stderr);
    let path = r.path().join("runs/a/report.html");
    assert!(o.stdout.contains(&format!("report: {}", path.display())), "{}", o.stdout);
    let html = std::fs::read_to_string(&path).unwrap();
    let s = infergate_model::Summary::read(&r.path().join("runs/a")).unwrap();
    let failed = s.requests.by_class.get("http_503").copied().unwrap_or(0);
    assert!(failed > 0 && s.requests.ok > 0, "{:?}", s.requests.by_class);
    // The failures: a table row per class, and a series over time holding every one of them.
    assert!(html.contains("<tr class=\"fail\"><td class=\"l\">http_503</td>"), "{html}");
    let errors = series(chart(&html, "errors"));
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].0, "http_503");
    // One CDF per metric, one series of every ok request.
    let ttft = series(chart(&html, "ttft-cdf"));
    assert_eq!(ttft, vec![(s.run_id.clone(), s.requests.ok as usize, 0)]);
    assert!(chart(&html, "ttft-cdf").contains("gate TTFT p99 &lt;= 250 ms (ADR-0007)"));
    assert!(chart(&html, "ttft-cdf").contains("SLO TTFT &lt;= 400 ms"));
    assert!(chart(&html, "ttft-cdf").contains(&format!("n = {}", s.requests.ok)));
    // The timeline draws every measured request: the ok ones' three phases, the failed ones.
    let tl = series(chart(&html, "timeline"));
    assert_eq!(tl.len(), 4);
    assert_eq!(tl[0].1 as u64, s.requests.total);
    assert_eq!(tl[3].1 as u64, failed);
    // The server's gauges over time, one point per scrape of the simulator's /metrics.
    let scrapes = s.server.as_ref().unwrap().scrapes as usize;
    let queue = series(chart(&html, "server-queue"));
    assert_eq!(queue.iter().map(|q| q.0.as_str()).collect::<Vec<_>>(), ["running", "waiting"]);
    assert!(scrapes > 0 && queue.iter().all(|q| q.1 + q.2 == scrapes), "{queue:?} of {scrapes}");
    // Self-contained: no fetch of anything, and a policy that forbids one.
    assert!(html.contains("Content-Security-Policy\" content=\"default-src 'none'"));
    for bad in ["src=", "href=", "<script", "@import", "url("] {
        assert!(!html.contains(bad), "{bad}");
    }
}

#[test]
fn blanks_are_shown_as_blanks_not_zeros() {
    // One output token: no TPOT and no ITL can be measured.
    let r = repo("");
    let o = xtask(r.path(), &["bench", "-q", "--out", "runs/b", "--max-tokens", "1"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let o = xtask(r.path(), &["report", "runs/b"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let html = std::fs::read_to_string(r.path().join("runs/b/report.html")).unwrap();
    let tpot = chart(&html, "tpot-cdf");
    assert!(tpot.contains("no TPOT was measured (blank, not zero)"), "{tpot}");
    assert_eq!(series(tpot)[0].1, 0);
    assert!(!tpot.contains("<polyline"));
    let row =
        html.split("<td class=\"l\">TPOT</td>").nth(1).unwrap().split("</tr>").next().unwrap();
    assert_eq!(row.matches("<td class=\"blank\">—</td>").count(), 9, "{row}");
    assert!(!row.contains(">0<") && !row.contains("0.00"), "{row}");
    assert!(chart(&html, "gpu").contains("not sampled"));
    assert!(html.contains("No failed request among"));
}

#[test]
fn a_sweep_report_overlays_its_stages_and_marks_the_knee_on_a_log_axis() {
    let r = repo("[profile.default.slo]\nttft_ms = 1000\n");
    let o = xtask(
        r.path(),
        &["bench", "-q", "--out", "runs/s", "--sweep", "concurrency=1,4,16", "--report"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let html = std::fs::read_to_string(r.path().join("runs/s/report.html")).unwrap();
    let lat = chart(&html, "sweep-latency");
    let names: Vec<String> = series(lat).into_iter().map(|s| s.0).collect();
    assert_eq!(names, ["TTFT p99", "TPOT p99", "E2E p99"]);
    assert!(series(lat).iter().all(|s| s.1 == 3), "{lat}");
    assert!(lat.contains("log scale") && lat.contains("knee: concurrency=16"), "{lat}");
    assert!(lat.contains(">4</text>") && !lat.contains(">4.0<"));
    let ttft = series(chart(&html, "ttft-cdf"));
    let stages: Vec<&str> = ttft.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(stages, ["concurrency=1", "concurrency=4", "concurrency=16"]);
    assert!(ttft.iter().all(|s| s.1 > 0));
    // sweep.svg is drawn by the same code.
    let svg = std::fs::read_to_string(r.path().join("runs/s/sweep.svg")).unwrap();
    assert!(svg.contains("data-chart=\"sweep-latency\"") && svg.contains("knee: concurrency=16"));
}

#[test]
fn a_comparison_report_overlays_its_strategies() {
    let r = comparison_repo();
    let args = ["bench", "-q", "--out", "runs/c", "--compare-strategies", "serial,continuous"];
    let o = xtask(r.path(), &args);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let o = xtask(r.path(), &["report", "runs/c/comparison.json"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let html = std::fs::read_to_string(r.path().join("runs/c/report.html")).unwrap();
    let names: Vec<String> = series(chart(&html, "e2e-cdf")).into_iter().map(|s| s.0).collect();
    assert_eq!(names, ["serial", "continuous"]);
    assert!(html.contains("<td class=\"l\">serial</td>"));
}

/// `bench --trials N --report` and `report SET`: the set's estimates with their intervals and
/// each trial's value, the trials' CDFs overlaid, their failures.
#[test]
fn a_trial_set_report_shows_its_estimates_and_overlays_its_trials() {
    let r = repo("");
    let o = xtask(
        r.path(),
        &["bench", "-q", "--trials", "3", "--cooldown", "0", "--report", "--out", "runs/t"],
    );
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("report: "), "{}", o.stdout);
    let html = std::fs::read_to_string(r.path().join("runs/t/report.html")).unwrap();
    assert!(html.contains("<title>Trial set "), "{html}");
    assert!(html.contains("profile default, 3 of 3 trials measured, 95% intervals"), "{html}");
    let set: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(r.path().join("runs/t/trials.json")).unwrap(),
    )
    .unwrap();
    let ttft = &set["metrics"]["metrics.ttft_ms.p99"]["estimate"];
    let row = html
        .split("<tr>")
        .find(|row| row.contains(">metrics.ttft_ms.p99<"))
        .expect("a row per metric");
    assert!(row.contains("3 trials, 36 requests"), "{row}");
    let lo = ttft["lo"].as_f64().unwrap();
    assert!(row.contains(&format!("[{lo:.3}")), "{row} {ttft}");
    let names: Vec<String> = series(chart(&html, "ttft-cdf")).into_iter().map(|s| s.0).collect();
    assert_eq!(names, ["trial-01", "trial-02", "trial-03"]);
    // The same page from `report`, by the set's directory or its trials.json.
    std::fs::remove_file(r.path().join("runs/t/report.html")).unwrap();
    let o = xtask(r.path(), &["report", "runs/t/trials.json"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(r.path().join("runs/t/report.html").is_file());
}

#[test]
fn a_path_without_results_is_refused_with_what_is_valid() {
    let r = repo("");
    std::fs::create_dir_all(r.path().join("empty")).unwrap();
    let o = xtask(r.path(), &["report", "empty"]);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains(
            "holds no summary.json, trials.json, sweep.json, capacity.json, comparison.json or \
             tune.json"
        ),
        "{}",
        o.stderr
    );
    let o = xtask(r.path(), &["report", "empty", "--thresholds", "no/gate.toml"]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("no/gate.toml does not exist"), "{}", o.stderr);
    let o = xtask(r.path(), &["report", "nowhere"]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("nowhere does not exist"), "{}", o.stderr);
}

/// A sweep, comparison or tune file that cannot be read is named with what is wrong in it: the
/// field and the format, or both versions.
#[test]
fn a_damaged_result_file_is_refused_naming_its_field_or_format() {
    let r = repo("");
    let write = |dir: &str, file: &str, text: &str| {
        std::fs::create_dir_all(r.path().join(dir)).unwrap();
        std::fs::write(r.path().join(dir).join(file), text).unwrap();
    };
    write("sw", "sweep.json", r#"{"schema_version": 1, "sweep_id": 7}"#);
    write("cmp", "comparison.json", r#"{"profile": "default", "engine_config": 3}"#);
    write("tune", "tune.json", r#"{"format": 9}"#);
    write("notjson", "tune.json", "{\n  \"format\": 1,\n");
    let cases = [
        ("sw", "sw/sweep.json is not a sweep summary of format 1: field `sweep_id`: invalid type"),
        (
            "cmp",
            "cmp/comparison.json is not a strategy comparison of format 0: field `engine_config`: invalid type",
        ),
        ("tune", "tune/tune.json is a tune of format 9, this tool reads format 1"),
        ("notjson", "notjson/tune.json:3:0: not valid JSON"),
    ];
    for (dir, says) in cases {
        let o = xtask(r.path(), &["report", dir]);
        assert_eq!(o.code, 2, "{dir}: {}", o.stderr);
        assert!(o.stderr.contains(says), "{dir}: {}", o.stderr);
    }
}

/// A tune's page, whole but for its charts and style (their own tests cover them): the
/// headings, the table of configurations with a failed row, blanks and a winner, escaped
/// text and the notes. Read from a tune.json written here, so every value is known.
#[test]
fn a_tune_page_renders_its_sections_from_the_tune_file() {
    let r = repo("");
    let dir = r.path().join("runs/tune");
    std::fs::create_dir_all(&dir).unwrap();
    let row = |name: &str, status: &str, goodput: Option<f64>, error: Option<&str>| {
        serde_json::json!({
            "name": name, "settings": [["scheduler.max_num_seqs", 8]], "key": name,
            "config": format!("runs/tune/{name}/engine.toml"), "dir": name, "status": status,
            "error": error, "trials": 3, "requests": 36, "goodput_rps": goodput,
            "goodput_ratio": goodput.map(|_| 0.9), "output_tokens_per_s": goodput.map(|g| g * 10.0),
            "ttft_p99_ms": goodput.map(|_| 120.5), "tpot_p99_ms": goodput.map(|_| 12.25),
            "e2e_p99_ms": None::<f64>, "slo": goodput.map(|_| "meets"), "slo_misses": [],
            "pareto": goodput.is_some(), "goodput_pareto": goodput == Some(4.5),
            "elapsed_s": 1.5
        })
    };
    let tune = serde_json::json!({
        "format": 1, "profile": "default", "engine_config": "configs/engine.toml",
        "engine": "sim", "search": "grid",
        "axes": [{"key": "scheduler.max_num_seqs", "values": [8, 16, 32]}],
        "rows": [
            row("max_num_seqs=8", "measured", Some(4.5), None),
            row("max_num_seqs=16", "measured", Some(3.25), None),
            row("max_num_seqs=<32>", "failed", None, Some("the engine did not start: \"x\" & y")),
        ],
        "winner": "max_num_seqs=8",
        "warnings": ["the winner is at the edge of the grid (scheduler.max_num_seqs = 8)"]
    });
    std::fs::write(dir.join("tune.json"), serde_json::to_string_pretty(&tune).unwrap()).unwrap();
    let o = xtask(r.path(), &["report", "runs/tune"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    // Charts and CSS collapsed; the tool's version is not the page's content.
    let page = collapse(&collapse(&html, "<style>", "</style>"), "<figure>", "</figure>");
    let page = page.replace(infergate_model::TOOL_VERSION, "VERSION");
    insta::assert_snapshot!("report_tune_page", page);
}

/// `text` with what lies between each `open` and its `close` replaced by `…`.
fn collapse(text: &str, open: &str, close: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(open) {
        let end = at + rest[at..].find(close).expect("closed");
        out.push_str(&rest[..at + open.len()]);
        out.push('…');
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}
