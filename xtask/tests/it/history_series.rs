//! `cargo xtask trend`: each metric's series along main's first-parent commits with its change
//! points, the records in force and changed, `--check`, the exports (Apache Otava reads the CSV
//! and finds the same change points), and what is never mixed: other fingerprints, commits off
//! the line, duplicates, dirty trees. The real series is this repository's own simulator
//! profile measured at 10 commits, one of which changes `scheduler.max_num_seqs`.

use std::collections::BTreeMap;
use std::path::Path;

use git2::Oid;
use infergate_model::history::{ENTRY_VERSION, Entry, EntryKind, Fingerprint, Scenario};

use crate::support::gitrepo::GitRepo;
use crate::support::xtask;

const METRIC: &str = "metrics.ttft_ms.p99";

fn scenario() -> Scenario {
    Scenario {
        profile: "default".into(),
        trial_requests: 80,
        settings: "s".into(),
        workload: "w".into(),
        engine_config: "e".into(),
    }
}

fn fingerprint(host: &str) -> Fingerprint {
    Fingerprint { host: host.into(), gpu: "simulated H100".into(), engine: "sim".into() }
}

fn entry(run: &str, commit: Oid, values: &[f64], host: &str) -> Entry {
    let mut e = Entry {
        format_version: ENTRY_VERSION,
        id: String::new(),
        kind: EntryKind::Trials,
        run_id: run.into(),
        measured_at: "2026-12-01T00:00:00.000Z".into(),
        commit: Some(commit.to_string()),
        dirty: false,
        scenario: scenario(),
        fingerprint: fingerprint(host),
        values: BTreeMap::from([(METRIC.to_string(), values.iter().map(|v| Some(*v)).collect())]),
        paired: BTreeMap::new(),
    };
    e.seal();
    e
}

/// Three trials about `level`, each within 2% of it (pseudo-random, seeded by `k`).
fn trials(level: f64, k: usize) -> Vec<f64> {
    (0..3u64)
        .map(|t| {
            let mut x = (k as u64 * 3 + t).wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            x ^= x >> 31;
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            level * (1.0 + 0.04 * (u - 0.5))
        })
        .collect()
}

fn record(n: u32, value: u32) -> String {
    format!(
        "# ADR-{n:04}: Seqs {value}\n\n- Status: Accepted\n- Date: 2026-11-0{n}\n- Deciders: a\n\n\
         ## Decision\n\n- configs/engine.toml: scheduler.max_num_seqs = {value}\n"
    )
}

fn engine(seqs: u32) -> String {
    format!("[scheduler]\nmax_num_seqs = {seqs}\n")
}

/// `n` commits on main; commit `step` (1-based) changes the engine config, with a record when
/// `with_record`. Returns the commits, oldest first.
fn main_line(g: &mut GitRepo, n: usize, step: usize, with_record: bool) -> Vec<Oid> {
    let mut out = Vec::new();
    g.write("configs/engine.toml", Some(&engine(256)));
    g.write("docs/adr/0001-seqs-256.md", Some(&record(1, 256)));
    for i in 1..=n {
        if i == step {
            g.write("configs/engine.toml", Some(&engine(64)));
            if with_record {
                g.write("docs/adr/0002-seqs-64.md", Some(&record(2, 64)));
            }
        } else {
            g.write("notes.txt", Some(&format!("{i}\n")));
        }
        out.push(g.commit(&format!("commit {i}")));
    }
    g.checkout();
    out
}

fn append(root: &Path, entries: &[Entry]) {
    xtask::history_store::append(root, entries, "test entries").unwrap();
}

fn short(o: Oid) -> String {
    o.to_string()[..12].to_string()
}

#[test]
fn a_step_on_main_is_a_change_point_at_its_commit_with_the_record_that_explains_it() {
    let mut g = GitRepo::init();
    let commits = main_line(&mut g, 14, 8, true);
    // Every commit measured but commit 7 (a gap: the range is commits 7 and 8).
    let entries: Vec<Entry> = commits
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 6)
        .map(|(i, c)| {
            let level = if i >= 7 { 120.0 } else { 100.0 };
            entry(&format!("r{i}"), *c, &trials(level, i), "h1")
        })
        .collect();
    append(g.path(), &entries);
    let out = xtask(g.path(), &["trend", "--metric", METRIC]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let want = format!("change point: {}..{} (2 commits), +", short(commits[5]), short(commits[7]));
    assert!(out.stdout.contains(&want), "{want}\n{}", out.stdout);
    assert!(out.stdout.contains("worse"), "{}", out.stdout);
    assert!(out.stdout.contains("records changed in the range: ADR-0002"), "{}", out.stdout);
    // Bisect hint: the range's two ends, and the commit that changed a governed file.
    assert!(
        out.stdout.contains(&format!(
            "git checkout {} && cargo xtask bench ab {} --profile default",
            short(commits[7]),
            short(commits[5])
        )),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!("changed a governed file: {} commit 8", short(commits[7]))),
        "{}",
        out.stdout
    );
    // The record in force at each point: ADR-0001, then ADR-0002 from commit 8.
    let rows: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with("| ")).skip(1).collect();
    assert_eq!(rows.len(), 13, "{}", out.stdout);
    assert!(rows[5].contains("ADR-0001") && rows[6].contains("ADR-0002"), "{rows:?}");
    // Explained by a record: the check passes.
    let out = xtask(g.path(), &["trend", "--fail-on-regression", "--metric", METRIC]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);

    // The same step with no record: the check fails, with an annotation naming the commit.
    let mut g = GitRepo::init();
    let commits = main_line(&mut g, 14, 8, false);
    let entries: Vec<Entry> = commits
        .iter()
        .enumerate()
        .map(|(i, c)| {
            entry(&format!("r{i}"), *c, &trials(if i >= 7 { 120.0 } else { 100.0 }, i), "h1")
        })
        .collect();
    append(g.path(), &entries);
    let out = xtask(g.path(), &["trend", "--fail-on-regression", "--github"]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(&format!("::error title=change point at {}::", short(commits[7]))),
        "{}",
        out.stdout
    );
    assert!(out.stderr.contains("no decision record changed in that range"), "{}", out.stderr);
    // Outside the last 3 commits the change is not this check's to fail.
    let out = xtask(g.path(), &["trend", "--fail-on-regression", "--last", "3"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    // A larger --min-change lets a 20% step pass.
    let out = xtask(g.path(), &["trend", "--fail-on-regression", "--min-change", "25%"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    // The HTML page: the series and its change point.
    let out = xtask(g.path(), &["trend", "--html", "history.html"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let page = std::fs::read_to_string(g.path().join("history.html")).unwrap();
    assert!(page.contains("data-chart=\"history-"), "{page}");
    assert!(page.contains(&format!("{}..{}", short(commits[6]), short(commits[7]))), "{page}");
}

#[test]
fn few_points_other_hosts_rewritten_commits_duplicates_and_dirty_trees_are_named_never_mixed() {
    let mut g = GitRepo::init();
    let commits = main_line(&mut g, 12, 100, false);
    // A commit that main no longer has (a force-push rewrote it).
    g.write("notes.txt", Some("rewritten\n"));
    let gone = g.commit("rewritten away");
    g.detach(commits[11]);
    g.branch("main", commits[11]);
    g.checkout();
    let mut entries: Vec<Entry> = commits
        .iter()
        .enumerate()
        .map(|(i, c)| entry(&format!("a{i}"), *c, &trials(100.0, i), "h1"))
        .collect();
    // Another host: a series of its own, at a level that would be a step if it were mixed in.
    entries.extend(
        commits
            .iter()
            .enumerate()
            .skip(8)
            .map(|(i, c)| entry(&format!("b{i}"), *c, &trials(300.0, i), "h2")),
    );
    entries.push(entry("gone", gone, &trials(500.0, 0), "h1"));
    // A second set at commit 3: one point of both sets' trials.
    entries.push(entry("again", commits[2], &trials(100.0, 5), "h1"));
    let mut dirty = entry("dirty", commits[3], &trials(900.0, 0), "h1");
    dirty.dirty = true;
    dirty.seal();
    entries.push(dirty);
    append(g.path(), &entries);

    let out = xtask(g.path(), &["trend"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let headers: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with(METRIC)).collect();
    assert_eq!(headers.len(), 2, "{}", out.stdout);
    assert!(headers[0].contains("h1") && headers[1].contains("h2"), "{headers:?}");
    assert!(out.stdout.contains("change points: none"), "{}", out.stdout);
    // Four points of the other host: too few to decide, and it says so.
    assert!(
        out.stdout.contains("change points: undecided, 4 points (the detector needs at least 10)"),
        "{}",
        out.stdout
    );
    let h1_rows =
        out.stdout.split("\n\n").next().unwrap().lines().filter(|l| l.starts_with("| ")).count();
    assert_eq!(h1_rows, 1 + 12, "{}", out.stdout);
    assert!(
        out.stderr.contains(&format!(
            "1 commit measured in the history is not on main's first-parent line (a rewritten branch, or another branch's commits): left out ({})",
            short(gone)
        )),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("1 sets measured a dirty work tree"), "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "{} (scenario {}) was measured by 2 sets",
            short(commits[2]),
            xtask::history::series::series_scenario(&scenario()).key()
        )),
        "{}",
        out.stderr
    );
    // The point of commit 3 holds six trials.
    let row =
        out.stdout.lines().find(|l| l.starts_with(&format!("| {}", short(commits[2])))).unwrap();
    assert!(row.contains("| 6 "), "{row}");
    // Otava's CSV holds one scenario and fingerprint: two are refused, naming the way out.
    let out = xtask(g.path(), &["trend", "--format", "csv"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("choose one with --scenario"), "{}", out.stderr);
    // A bad date names what is valid.
    let out = xtask(g.path(), &["trend", "--since", "yesterday"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("YYYY-MM-DD"), "{}", out.stderr);
    // JSONL: a point a line, each naming its scenario and fingerprint.
    let out = xtask(g.path(), &["trend", "--format", "jsonl"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<serde_json::Value> =
        out.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 16);
    assert_eq!(lines[0]["fingerprint"], fingerprint("h1").key());
}

/// Apache Otava (`pip install apache-otava`) on the CSV `history --format csv` writes: the same
/// change points within one commit. Skipped loudly without it; CI=true fails instead.
#[test]
fn apache_otava_finds_the_same_change_points_in_the_exported_csv() {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let otava = std::process::Command::new("otava").arg("--help").output();
    if !otava.as_ref().is_ok_and(|o| o.status.success()) {
        let why = "Apache Otava test SKIPPED: `otava` not found (pip install apache-otava)";
        assert!(!ci, "CI=true: {why}");
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "\n*** {why} ***\n");
        return;
    }
    let mut g = GitRepo::init();
    let commits = main_line(&mut g, 60, 100, false);
    // Steps at commits 21 (+15%) and 41 (-20%), 2% noise.
    let entries: Vec<Entry> = commits
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let level = match i {
                0..=19 => 100.0,
                20..=39 => 115.0,
                _ => 92.0,
            };
            entry(&format!("r{i}"), *c, &trials(level, i * 7 + 3), "h1")
        })
        .collect();
    append(g.path(), &entries);
    let out = xtask(g.path(), &["trend", "--format", "csv", "--out", "series.csv"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let ours = xtask(g.path(), &["trend", "--format", "jsonl"]);
    assert_eq!(ours.code, 0);
    let table = xtask(g.path(), &["trend"]).stdout;
    let our_bad: Vec<String> = table
        .lines()
        .filter_map(|l| l.strip_prefix("change point: "))
        .map(|l| l.split(' ').next().unwrap().split("..").nth(1).unwrap().to_string())
        .collect();
    let config = format!(
        "tests:\n  series:\n    type: csv\n    file: {}\n    time_column: time\n    attributes: [commit]\n    metrics:\n      ttft:\n        column: {METRIC}\n        direction: -1\n",
        g.path().join("series.csv").display()
    );
    std::fs::write(g.path().join("otava.yaml"), config).unwrap();
    let o = std::process::Command::new("otava")
        .args(["analyze", "series", "--since", "2000-01-01", "--output", "json"])
        .env("OTAVA_CONFIG", g.path().join("otava.yaml"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let theirs: Vec<usize> = json["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let commit = c["attributes"]["commit"].as_str().unwrap();
            commits.iter().position(|o| o.to_string() == commit).unwrap()
        })
        .collect();
    let ours: Vec<usize> = our_bad
        .iter()
        .map(|s| commits.iter().position(|o| o.to_string().starts_with(s.as_str())).unwrap())
        .collect();
    assert_eq!(ours.len(), theirs.len(), "ours {ours:?}, Otava's {theirs:?}\n{table}");
    for (a, b) in ours.iter().zip(&theirs) {
        assert!(a.abs_diff(*b) <= 1, "ours {ours:?}, Otava's {theirs:?}");
    }
    assert_eq!(ours, vec![20, 40], "{table}");
}

/// This repository's own `default` profile on the simulator, measured at 10 commits with
/// `bench --trials 3 --history`; commit 6 lowers `scheduler.max_num_seqs` from 256 to
/// 4 (16 clients: twelve queue) for good. The change point lands on commit 6.
#[cfg(feature = "runtime")]
#[test]
fn the_simulator_profile_measured_at_ten_commits_moves_at_the_commit_that_changes_max_num_seqs() {
    let ws = crate::support::repo_root();
    let engine_toml = std::fs::read_to_string(ws.join("configs/engine.toml")).unwrap();
    let mut g = GitRepo::init();
    for e in walk(&ws.join("configs")) {
        let rel = e.strip_prefix(&ws).unwrap().to_string_lossy().replace('\\', "/");
        g.write(&rel, Some(&std::fs::read_to_string(&e).unwrap()));
    }
    g.write(".gitignore", Some("runs/\n"));
    let mut commits = Vec::new();
    for i in 1..=10 {
        if i >= 6 {
            g.write(
                "configs/engine.toml",
                Some(&engine_toml.replace("max_num_seqs = 256", "max_num_seqs = 4")),
            );
        } else {
            g.write("configs/engine.toml", Some(&engine_toml));
            g.write("notes.txt", Some(&format!("{i}\n")));
        }
        let c = g.commit(&format!("commit {i}"));
        g.checkout();
        commits.push(c);
        let out_dir = format!("runs/c{i}");
        let out = xtask(
            g.path(),
            &[
                "bench",
                "-q",
                "--trials",
                "3",
                "--history",
                "--cooldown",
                "0",
                "--requests",
                "16",
                "--max-tokens",
                "16",
                "--set",
                "load.warmup_requests=4",
                "--set",
                "sim.noise.run_cv=0.03",
                "--out",
                &out_dir,
            ],
        );
        assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
        assert!(out.stderr.contains("appended to refs/infergate/history"), "{}", out.stderr);
    }
    let out = xtask(g.path(), &["trend", "--metric", METRIC]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let want = format!("change point: {}..{} (1 commit)", short(commits[4]), short(commits[5]));
    assert!(out.stdout.contains(&want), "{want}\n{}", out.stdout);
    assert_eq!(out.stdout.matches("change point: ").count(), 1, "{}", out.stdout);
}

#[cfg(feature = "runtime")]
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() { out.extend(walk(&p)) } else { out.push(p) }
    }
    out
}
