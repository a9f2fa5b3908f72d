//! How long `adr check` takes on a large repository: 10,000 commits on `main` and 200 decision
//! records (a supersession chain, each record changing `configs/engine.toml` and regenerating
//! thresholds/gate.toml), then a pull request of three commits that changes a parameter with a
//! new record. Generated with git2 (no work tree), then packed with `git repack` when the git
//! command line is there, as a clone would be.
//!
//!     cargo bench -p xtask --bench adr_check
//!
//! Prints the time of `xtask::adr::check::check` (what the command does besides printing) for
//! the pull request (base `main`) and for the worst case, a base at the first commit (every
//! commit walked for `ADR-Exempt` trailers, every record in the diff); then the same with the
//! five YAML sources of a team's repository declared (`[[adr.source]]`: Helm values, a
//! Deployment, a vLLM config, compose, a script; `xtask/tests/it/fixtures/team/`), the pull
//! request changing the Helm values' `maxNumSeqs` with its record.

// The benchmark uses only part of the tests' repository builder.
#[allow(dead_code)]
#[path = "../tests/it/support/gitrepo.rs"]
mod gitrepo;

use std::path::Path;
use std::time::{Duration, Instant};

use gitrepo::GitRepo;
use xtask::adr::live::generate;
use xtask::adr::parse_adr;
use xtask::thresholds::file::render_file;

const COMMITS: usize = 10_000;
const RECORDS: usize = 200;
const RUNS: usize = 20;

fn record_path(n: usize) -> String {
    format!("docs/adr/{n:04}-tune-max-num-seqs-{n}.md")
}

/// Record `n`: sets `scheduler.max_num_seqs = seqs`; supersedes `n - 1`; `superseded` when
/// `n + 1` exists.
fn record(n: usize, seqs: usize, superseded: bool) -> String {
    let name = |k: usize| record_path(k).trim_start_matches("docs/adr/").to_string();
    let status =
        if superseded { format!("Superseded by {:04}", n + 1) } else { "Accepted".to_string() };
    let mut links = Vec::new();
    if n > 1 {
        links.push(format!("- Supersedes [ADR-{:04}]({})", n - 1, name(n - 1)));
    }
    if superseded {
        links.push(format!("- Superseded by [ADR-{:04}]({})", n + 1, name(n + 1)));
    }
    let links = if links.is_empty() { "None.".to_string() } else { links.join("\n") };
    format!(
        "# ADR-{n:04}: Tune max num seqs {n}\n\n- Status: {status}\n- Date: 2025-05-01\n- Deciders: Platform team\n\n\
         ## Context\n\nLong prompts block decode at concurrency {n}; measured with the default profile.\n\n\
         ## Metrics matrix\n\n| Config | TTFT P99 (ms) | TPOT P99 (ms) | Goodput | Conclusion |\n|---|---:|---:|---:|---|\n\
         | Baseline | 274 | 13.6 | 0.97 | reference |\n| Exp-1 | 250 | 13.1 | 0.99 | chosen |\n\n\
         ## Decision\n\nAdopt Exp-1.\n\n- configs/engine.toml: scheduler.max_num_seqs = {seqs}\n\n\
         ## CI gate thresholds\n\n| Metric | Comparator | Limit | Unit | Action |\n|---|---|---|---|---|\n\
         | `metrics.ttft_ms.p99` | <= | 275 | ms | block |\n| `metrics.tpot_ms.p99` | <= | 14.5 | ms | block |\n\
         | `goodput.ratio` | >= | 0.9 | ratio | block |\n\n\
         ## Rollback conditions\n\nTTFT P99 above 275 ms on a gate run: restore the previous value.\n\n\
         ## Consequences\n\nMore sequences per step; a longer token interval under load.\n\n\
         ## Links\n\n{links}\n"
    )
}

fn engine(seqs: usize) -> String {
    format!(
        "# Inference parameters.\n[engine]\nmodel = \"m\"\ngpu_memory_utilization = 0.9\n\n\
         [scheduler]\nmax_num_seqs = {seqs}   # see the records\nenable_chunked_prefill = false\n"
    )
}

fn gate(live: usize, text: &str) -> String {
    let adr = parse_adr(Path::new(&record_path(live)), text);
    render_file(&generate(&[adr]).expect("the generated records are valid"), "docs/adr")
}

/// Add record `n` (superseding `n - 1`) with its engine change and gate.toml.
fn add_record(g: &mut GitRepo, n: usize, seqs: usize) {
    if n > 1 {
        g.write(&record_path(n - 1), Some(&record(n - 1, 100 + n - 1, true)));
    }
    let text = record(n, seqs, false);
    g.write(&record_path(n), Some(&text));
    g.write("configs/engine.toml", Some(&engine(seqs)));
    g.write("thresholds/gate.toml", Some(&gate(n, &text)));
}

/// The team fixture's files (path, text).
fn team_files() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures/team");
    let mut out = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("the fixture") {
            let p = e.expect("an entry").path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
                out.push((rel, std::fs::read_to_string(&p).expect("a fixture file")));
            }
        }
    }
    out
}

fn generate_repo(sources: bool) -> (GitRepo, git2::Oid) {
    let mut g = GitRepo::init();
    let team = if sources { team_files() } else { Vec::new() };
    for (path, text) in &team {
        g.write(path, Some(text));
    }
    g.write("configs/engine.toml", Some(&engine(100)));
    g.write("configs/bench.toml", Some("[profile.default]\n"));
    g.write("docs/adr/README.md", Some("# Records\n"));
    g.write("thresholds/gate.toml", Some(&render_file(&generate(&[]).unwrap(), "docs/adr")));
    let first = g.commit("Initial commit");
    let every = COMMITS / RECORDS;
    for i in 2..=COMMITS {
        if i % every == 0 {
            let n = i / every;
            add_record(&mut g, n, 100 + n);
            g.commit(&format!("ADR-{n:04}: tune max_num_seqs"));
        } else {
            let f = i % 40;
            g.write(
                &format!("src/module{f}.rs"),
                Some(&format!("pub const VERSION: usize = {i};\n")),
            );
            g.commit(&format!("Change module {f} ({i})"));
        }
    }
    // The pull request: a new value, its record, the regenerated thresholds.
    let tip = g.repo.head().unwrap().peel_to_commit().unwrap().id();
    g.branch("pr", tip);
    g.write("src/module1.rs", Some("pub const VERSION: usize = 0;\n"));
    g.commit("Refactor");
    add_record(&mut g, RECORDS + 1, 999);
    g.commit("ADR-0201: raise max_num_seqs to 999");
    g.write("src/module2.rs", Some("pub const VERSION: usize = 1;\n"));
    g.commit("Follow-up");
    if sources {
        let (path, text) = team.iter().find(|(p, _)| p == "deploy/helm/values.yaml").unwrap();
        g.write(path, Some(&text.replace("maxNumSeqs: 256", "maxNumSeqs: 128")));
        let n = RECORDS + 2;
        let adr = record(n, 999, false)
            .replace(
                "- configs/engine.toml: scheduler.max_num_seqs = 999",
                "- deploy/helm/values.yaml: scheduler.max_num_seqs = 128",
            )
            .replace(&format!("- Supersedes [ADR-{:04}]", n - 1), "- Related to [ADR")
            .replace("Status: Accepted", "Status: Proposed");
        g.write(&record_path(n), Some(&adr));
        g.commit("Fewer sequences in the chart");
    }
    (g, first)
}

fn measure(root: &Path, base: &str) -> (Vec<Duration>, xtask::adr::check::Report) {
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..RUNS {
        let t = Instant::now();
        let report = xtask::adr::check::check(root, "docs/adr", base, "HEAD").expect("check runs");
        times.push(t.elapsed());
        last = Some(report);
    }
    times.sort();
    (times, last.unwrap())
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    // `cargo test --benches` runs this with `--bench` absent: keep it quick there.
    if !std::env::args().any(|a| a == "--bench") {
        println!("adr_check: run with `cargo bench -p xtask --bench adr_check`");
        return;
    }
    for sources in [false, true] {
        run(sources);
    }
}

fn run(sources: bool) {
    let t = Instant::now();
    let (g, first) = generate_repo(sources);
    let generated = t.elapsed();
    let packed = std::process::Command::new("git")
        .args(["repack", "-a", "-d", "-q"])
        .current_dir(g.path())
        .status()
        .is_ok_and(|s| s.success());
    println!(
        "generated {COMMITS} commits + {} on the pull request, {} records{}, in {:.1} s ({})",
        if sources { 4 } else { 3 },
        RECORDS + 1 + usize::from(sources),
        if sources { ", five YAML sources declared" } else { "" },
        generated.as_secs_f64(),
        if packed { "packed with git repack" } else { "loose objects: git not found" }
    );

    for (what, base) in [
        ("pull request (base main)", "main".to_string()),
        ("worst case (base = first commit)", first.to_string()),
    ] {
        let (times, report) = measure(g.path(), &base);
        let o = &report.outcome;
        println!(
            "adr check, {what}: median {}, min {}, max {} over {RUNS} runs; {} commits walked, \
             {} changed keys, {} records in the diff, rule {}",
            ms(times[RUNS / 2]),
            ms(times[0]),
            ms(times[RUNS - 1]),
            report.commits,
            o.coverage.len(),
            report.records.len(),
            if o.rule_holds() { "holds" } else { "broken" }
        );
        if base == "main" {
            assert!(o.rule_holds(), "the generated pull request passes: {:#?}", o.violations);
        }
    }
}
