//! `cargo xtask adr check` on temporary git repositories built with git2: the binary's exit
//! codes and output for the cases a pull request meets.

use std::path::Path;
use std::process::Command;

use crate::support::gitrepo::GitRepo;
use crate::support::governed::{
    ADR1, ENGINE, ENGINE_TEXT, GATE, Governed, README, adr1, gate_for, record,
};
use crate::support::{Out, xtask};
use git2::Oid;

const ADR2: &str = "docs/adr/0002-tune-the-scheduler.md";

/// A Proposed record with these decision lines, taking over ADR-0001's threshold and keys (a
/// record that decides them otherwise than the live ADR-0001 must supersede it).
fn adr2(decisions: &str) -> String {
    record(2, "Tune the scheduler", "Proposed", decisions, TAKES_OVER)
}

const TAKES_OVER: &str = "- Supersedes in part [ADR-0001](0001-use-the-defaults.md): \
    `metrics.ttft_ms.p99`, `configs/engine.toml: scheduler.max_num_seqs`, \
    `configs/engine.toml: scheduler.enable_chunked_prefill`";

/// A repository with one commit on `main` (engine config, ADR-0001, gate.toml), and HEAD on a
/// new branch `pr` at that commit.
fn setup() -> (GitRepo, Oid) {
    Governed::default().with("src/main.rs", "fn main() {}\n").on_branch_pr()
}

fn check(g: &GitRepo, args: &[&str]) -> Out {
    let mut all = vec!["adr", "check"];
    all.extend_from_slice(args);
    xtask(g.path(), &all)
}

/// Snapshot the output with commit ids and the temporary path filtered out.
fn snap(name: &str, out: &Out) {
    let text = format!("exit: {}\n--- stdout\n{}--- stderr\n{}", out.code, out.stdout, out.stderr);
    insta::with_settings!({filters => vec![(r"\b[0-9a-f]{7,40}\b", "[sha]"), (r"/tmp/\S+", "[tmp]")]}, {
        insta::assert_snapshot!(name, text);
    });
}

fn assert_exit(out: &Out, code: i32) {
    assert_eq!(out.code, code, "stdout:\n{}\nstderr:\n{}", out.stdout, out.stderr);
}

#[test]
fn a_parameter_change_without_a_record_fails() {
    let (mut g, _) = setup();
    g.commit_files("Raise max_num_seqs", &[(ENGINE, Some(&ENGINE_TEXT.replace("256", "384")))]);
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 1);
    assert!(out.stdout.contains("configs/engine.toml: scheduler.max_num_seqs 256 -> 384"));
    assert!(out.stdout.contains("| not covered |"), "{}", out.stdout);
    assert!(out.stdout.contains(
        "cargo xtask adr new 'Set scheduler.max_num_seqs to 384' --baseline RUN_BASE --exp RUN_HEAD"
    ));
    assert!(out.stdout.contains("  - configs/engine.toml: scheduler.max_num_seqs = 384\n"));
    snap("check_uncovered", &out);
}

#[test]
fn an_added_record_covering_every_key_passes() {
    let (mut g, _) = setup();
    let engine = ENGINE_TEXT
        .replace("256", "384")
        .replace("enable_chunked_prefill = false\n", "max_num_batched_tokens = 2048\n");
    g.commit_files("Tune the scheduler", &[(ENGINE, Some(&engine))]);
    let a2 = adr2(
        "- configs/engine.toml: scheduler.max_num_seqs = 384\n\
         - `configs/engine.toml: scheduler.max_num_batched_tokens = 2048`\n\
         - configs/engine.toml: scheduler.enable_chunked_prefill removed",
    );
    g.commit_files("ADR-0002", &[(ADR2, Some(&a2))]);
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 0);
    assert!(out.stdout.contains("adr check passed: 3 governed keys changed, 3 covered"));
    snap("check_covered", &out);
}

/// The issue's pull request: a Proposed record deciding `max_num_seqs = 320` against the live
/// ADR-0001's 256, without superseding it, covers the change but contradicts the decision in
/// force (`adr accept` would refuse it): the check fails naming both, and passes once the record
/// supersedes that key.
#[test]
fn a_record_contradicting_a_live_decision_fails_unless_it_supersedes_it() {
    let (mut g, _) = setup();
    g.commit_files("Raise", &[(ENGINE, Some(&ENGINE_TEXT.replace("256", "320")))]);
    let without = record(
        2,
        "Raise max_num_seqs",
        "Proposed",
        "- configs/engine.toml: scheduler.max_num_seqs = 320",
        "None.",
    );
    g.commit_files("ADR-0002", &[(ADR2, Some(&without))]);
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 1);
    assert!(out.stdout.contains("1 governed key changed, 1 covered"), "{}", out.stdout);
    assert!(
        out.stdout.contains("configs/engine.toml: scheduler.max_num_seqs is decided differently by two live records: ADR-0001 (docs/adr/0001-use-the-defaults.md:19) says = 256 and ADR-0002"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("until a record of this pull request supersedes it"),
        "{}",
        out.stdout
    );
    let with = without.replace(
        "## Links\n\nNone.",
        "## Links\n\n- Supersedes in part [ADR-0001](0001-use-the-defaults.md): `configs/engine.toml: scheduler.max_num_seqs`",
    );
    g.commit_files("Supersede in part", &[(ADR2, Some(&with))]);
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 0);
}

/// The committed alert rules are generated files: a record whose rollback conditions change
/// without regenerating them fails the check with the command that does.
#[test]
fn stale_alert_rules_fail_with_the_command_that_regenerates_them() {
    let (mut g, _) = setup();
    let cond = "## Rollback conditions\n\n- `metrics.ttft_ms.p99` above 500 ms for 5m: roll back\n";
    let a1 = adr1()
        .replace("## Rollback conditions\n\nTTFT P99 above 302 ms on a gate run: revert.\n", cond);
    let adrs = [xtask::adr::parse_adr(Path::new(ADR1), &a1)];
    let r = xtask::adr::alerts::render(
        &xtask::adr::live::live_rollback(&adrs),
        &xtask::adr::live::live_budgets(&adrs),
    );
    g.commit_files(
        "Alerts",
        &[
            (ADR1, Some(&a1)),
            ("deploy/prometheus/infergate-rules.yml", Some(&r.rules)),
            ("deploy/k8s/infergate-prometheusrule.yml", Some(&r.k8s)),
        ],
    );
    // The rules are current: an unrelated change passes.
    g.commit_files("Code", &[("src/main.rs", Some("fn main() { }\n"))]);
    let out = check(&g, &["--base", "main"]);
    assert!(!out.stdout.contains("infergate-rules.yml is out of date"), "{}", out.stdout);
    // The rules edited by hand (or left behind by a record change): stale.
    let edited = r.rules.replace("for: 5m", "for: 10m");
    g.commit_files("Edit", &[("deploy/prometheus/infergate-rules.yml", Some(&edited))]);
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 1);
    assert!(
        out.stdout.contains("deploy/prometheus/infergate-rules.yml is out of date with the rollback conditions of the records at head; run `cargo xtask adr alerts` and commit it"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("infergate-prometheusrule.yml is out of date"), "{}", out.stdout);
}

#[test]
fn a_record_missing_one_key_fails_naming_it() {
    let (mut g, _) = setup();
    let engine = ENGINE_TEXT.replace("256", "384").replace("false", "true");
    let a2 = adr2("- configs/engine.toml: scheduler.max_num_seqs = 384");
    g.commit_files("Tune", &[(ENGINE, Some(&engine)), (ADR2, Some(&a2))]);
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 1);
    assert!(out.stdout.contains("1 changed key is not named"), "{}", out.stdout);
    assert!(
        out.stdout.contains("  - configs/engine.toml: scheduler.enable_chunked_prefill = true\n")
    );
    assert!(!out.stdout.contains("  - configs/engine.toml: scheduler.max_num_seqs = 384\n"));
    assert!(
        out.stdout.contains("add the missing lines to the record this pull request adds: ADR-0002")
    );
    snap("check_missing_one_key", &out);
}

#[test]
fn comments_whitespace_and_key_order_are_not_changes() {
    let (mut g, _) = setup();
    let reformatted = "\
[scheduler]
# Why: see ADR-0001.
enable_chunked_prefill=false
max_num_seqs   = 256

[engine]
gpu_memory_utilization = 0.9
model = 'm'
";
    g.commit_files("Reformat the engine config", &[(ENGINE, Some(reformatted))]);
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 0);
    assert!(out.stdout.contains("governed changes: none"), "{}", out.stdout);
}

#[test]
fn an_edit_to_an_accepted_record_fails_but_superseding_it_passes() {
    let (mut g, base) = setup();
    let edited = adr1().replace("Reviews read numbers.", "Reviews read other numbers.");
    g.commit_files("Reword ADR-0001", &[(ADR1, Some(&edited))]);
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 1);
    assert!(out.stdout.contains(&format!("{ADR1}:34: ADR-0001 is Accepted")), "{}", out.stdout);
    snap("check_accepted_edited", &out);

    // Superseding: ADR-0001 changes status, date and links only; ADR-0002 is new and Accepted.
    g.branch("supersede", base);
    let old = adr1()
        .replace("- Status: Accepted", "- Status: Superseded by 0002")
        .replace("- Date: 2025-05-01", "- Date: 2025-06-01")
        .replace(
            "## Links\n\nNone.",
            "## Links\n\n- Superseded by [ADR-0002](0002-tune-the-scheduler.md)",
        );
    let new = record(
        2,
        "Tune the scheduler",
        "Accepted",
        "- configs/engine.toml: scheduler.max_num_seqs = 384",
        "- Supersedes [ADR-0001](0001-use-the-defaults.md)",
    );
    let gate = gate_for(&[(ADR1, &old), (ADR2, &new)]);
    g.commit_files(
        "Supersede ADR-0001",
        &[
            (ENGINE, Some(&ENGINE_TEXT.replace("256", "384"))),
            (ADR1, Some(&old)),
            (ADR2, Some(&new)),
            (GATE, Some(&gate)),
        ],
    );
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 0);
}

#[test]
fn a_renamed_config_removes_every_key_at_the_old_path_and_adds_them_at_the_new() {
    let (mut g, base) = setup();
    let renamed = "configs/engine-h100.toml";
    g.commit_files("Rename", &[(ENGINE, None), (renamed, Some(ENGINE_TEXT))]);
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 1);
    assert!(out.stdout.contains("configs/engine-h100.toml: renamed from configs/engine.toml"));
    assert!(out.stdout.contains("configs/engine.toml: scheduler.max_num_seqs 256 -> (unset)"));
    assert!(out.stdout.contains("configs/engine-h100.toml: scheduler.max_num_seqs (unset) -> 256"));
    assert!(out.stdout.contains("8 changed keys are not named"), "{}", out.stdout);
    // ADR-0001 stays live and names the file that is gone: a violation at its lines.
    assert!(
        out.stdout.contains(&format!(
            "{ADR1}:19: ADR-0001 is live and decides configs/engine.toml: scheduler.max_num_seqs, \
             but configs/engine.toml does not exist"
        )),
        "{}",
        out.stdout
    );
    snap("check_renamed", &out);

    // A record naming every removal and every new key covers the rename.
    g.branch("rename-with-record", base);
    let mut lines = Vec::new();
    for (k, v) in [
        ("engine.gpu_memory_utilization", "0.9"),
        ("engine.model", "\"m\""),
        ("scheduler.enable_chunked_prefill", "false"),
        ("scheduler.max_num_seqs", "256"),
    ] {
        lines.push(format!("- configs/engine.toml: {k} removed"));
        lines.push(format!("- configs/engine-h100.toml: {k} = {v}"));
    }
    let a2 = adr2(&lines.join("\n"));
    g.commit_files(
        "Rename with a record",
        &[(ENGINE, None), (renamed, Some(ENGINE_TEXT)), (ADR2, Some(&a2))],
    );
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 0);
}

#[test]
fn a_deleted_config_needs_a_removal_line_per_key() {
    let (mut g, _) = setup();
    let tuned = "configs/engine-tuned.toml";
    g.commit_files("Add a tuned variant", &[(tuned, Some("[scheduler]\nmax_num_seqs = 384\n"))]);
    let a2 = adr2("- configs/engine-tuned.toml: scheduler.max_num_seqs = 384");
    g.commit_files("ADR-0002", &[(ADR2, Some(&a2))]);
    g.repo.branch("main", &g.repo.head().unwrap().peel_to_commit().unwrap(), true).unwrap();

    g.commit_files("Drop the tuned variant", &[(tuned, None)]);
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 1);
    assert!(out.stdout.contains("configs/engine-tuned.toml: deleted"));
    assert!(out.stdout.contains("  - configs/engine-tuned.toml: scheduler.max_num_seqs removed\n"));

    let a3 = record(
        3,
        "Drop the tuned variant",
        "Proposed",
        "- configs/engine-tuned.toml: scheduler.max_num_seqs removed",
        "None.",
    );
    g.commit_files("ADR-0003", &[("docs/adr/0003-drop-the-tuned-variant.md", Some(&a3))]);
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 0);
}

#[test]
fn a_new_record_that_looks_like_a_deleted_one_is_still_new() {
    // main has a Proposed ADR-0002; the pull request drops it and adds ADR-0003, written from
    // the same template (git would call it a rename).
    let (mut g, _) = setup();
    let old = adr2("- configs/engine.toml: scheduler.max_num_seqs = 320");
    g.commit_files("Propose", &[(ADR2, Some(&old))]);
    let main = g.repo.head().unwrap().peel_to_commit().unwrap().id();
    g.repo.branch("main", &g.repo.find_commit(main).unwrap(), true).unwrap();
    let new = record(
        3,
        "Tune the scheduler",
        "Proposed",
        "- configs/engine.toml: scheduler.max_num_seqs = 384",
        TAKES_OVER,
    );
    g.commit_files(
        "Replace the proposal",
        &[
            (ENGINE, Some(&ENGINE_TEXT.replace("256", "384"))),
            (ADR2, None),
            ("docs/adr/0003-tune-the-scheduler.md", Some(&new)),
        ],
    );
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 0);
    assert!(out.stdout.contains("docs/adr/0003-tune-the-scheduler.md: added, Proposed"));
    assert!(out.stdout.contains("docs/adr/0002-tune-the-scheduler.md: deleted"), "{}", out.stdout);
}

#[test]
fn an_accepted_record_may_be_renamed_but_not_deleted() {
    let (mut g, base) = setup();
    let renamed = "docs/adr/0001-keep-the-defaults.md";
    let a1 = adr1();
    g.commit_files(
        "Rename ADR-0001",
        &[(ADR1, None), (renamed, Some(&a1)), (GATE, Some(&gate_for(&[(renamed, &a1)])))],
    );
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 0);
    assert!(out.stdout.contains(&format!("{renamed} (from {ADR1}): renamed, Accepted")));

    g.branch("delete", base);
    g.commit_files("Delete ADR-0001", &[(ADR1, None), (GATE, Some(&gate_for(&[])))]);
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 1);
    assert!(out.stdout.contains("ADR-0001 is Accepted and was deleted"), "{}", out.stdout);
}

#[test]
fn a_shallow_clone_is_explained_not_diffed_against_nothing() {
    let (mut g, _) = setup();
    g.commit_files("Raise max_num_seqs", &[(ENGINE, Some(&ENGINE_TEXT.replace("256", "384")))]);
    g.checkout();
    let clone = tempfile::tempdir().unwrap();
    let url = format!("file://{}", g.path().display());
    let status = Command::new("git")
        .args(["clone", "--quiet", "--depth", "1", "--no-single-branch", &url])
        .arg(clone.path().join("c"))
        .status()
        .expect("the git command line is needed to make a shallow clone");
    assert!(status.success());
    let root = clone.path().join("c");

    // The base commit is in the clone, but not the history that joins it to HEAD.
    let out = xtask(&root, &["adr", "check", "--base", "origin/main"]);
    assert_exit(&out, 2);
    assert!(out.stderr.contains("shallow clone"), "{}", out.stderr);
    assert!(out.stderr.contains("fetch-depth: 0"), "{}", out.stderr);
    // A base SHA the clone does not have at all.
    let (mut other, _) = setup();
    let unknown = other.commit_files("Elsewhere", &[("x", Some("y"))]).to_string();
    let out = xtask(&root, &["adr", "check", "--base", &unknown]);
    assert_exit(&out, 2);
    assert!(out.stderr.contains("shallow clone") && out.stderr.contains("fetch-depth: 0"));
    assert!(out.stderr.contains(&format!("base revision `{unknown}`")), "{}", out.stderr);
}

#[test]
fn a_base_that_does_not_exist_is_a_clear_error() {
    let (g, _) = setup();
    let out = check(&g, &["--base", "origin/no-such-branch"]);
    assert_exit(&out, 2);
    assert!(
        out.stderr
            .starts_with("error: base revision `origin/no-such-branch` is not in this repository"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("git fetch origin"), "{}", out.stderr);
    let out = check(&g, &["--base", "main", "--head", "0123456789abcdef0123456789abcdef01234567"]);
    assert_exit(&out, 2);
    assert!(out.stderr.contains("head revision `0123456789abcdef"), "{}", out.stderr);
    let out = xtask(Path::new("/"), &["adr", "check", "--base", "main"]);
    assert_exit(&out, 2);
    assert!(out.stderr.contains("not inside a git repository"), "{}", out.stderr);
}

#[test]
fn a_detached_head_and_shas_work() {
    let (mut g, base) = setup();
    let engine = ENGINE_TEXT.replace("256", "384");
    let pr = g.commit_files("Raise", &[(ENGINE, Some(&engine))]);
    g.detach(pr);
    assert!(g.repo.head_detached().unwrap());
    let out = check(&g, &["--base", &base.to_string()]);
    assert_exit(&out, 1);
    assert!(out.stdout.contains("scheduler.max_num_seqs 256 -> 384"));
    // Short SHAs too, and an explicit --head.
    let a2 = adr2("- configs/engine.toml: scheduler.max_num_seqs = 384");
    let covered = g.commit_files("ADR-0002", &[(ADR2, Some(&a2))]);
    let out = check(&g, &["--base", &base.to_string()[..10], "--head", &covered.to_string()]);
    assert_exit(&out, 0);
    let out = check(&g, &["--base", &base.to_string(), "--head", &pr.to_string()[..8]]);
    assert_exit(&out, 1);
}

#[test]
fn the_merge_base_is_the_reference_not_the_base_tip() {
    // main moves on after the branch point: its own changes are not the pull request's.
    let (mut g, base) = setup();
    let pr = g.commit_files("Docs", &[("src/main.rs", Some("fn main() { }\n"))]);
    g.branch("main", base);
    let a2 = adr2("- configs/engine.toml: scheduler.max_num_seqs = 384");
    g.commit_files(
        "Main tunes",
        &[(ENGINE, Some(&ENGINE_TEXT.replace("256", "384"))), (ADR2, Some(&a2))],
    );
    g.detach(pr);
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 0);
    assert!(out.stdout.contains("governed changes: none"), "{}", out.stdout);
}

#[test]
fn an_adr_exempt_trailer_passes_loudly() {
    let (mut g, _) = setup();
    g.commit_files(
        "Hotfix: lower max_num_seqs\n\nThe pool runs out of memory.\n\nADR-Exempt: incident 4711, record follows\n",
        &[(ENGINE, Some(&ENGINE_TEXT.replace("256", "128")))],
    );
    g.commit_files("Unrelated", &[("src/main.rs", Some("fn main() { }\n"))]);
    let out = check(&g, &["--base", "main", "--github"]);
    assert_exit(&out, 0);
    assert!(out.stdout.contains("!!! ADR-Exempt: incident 4711, record follows"));
    assert!(out.stdout.contains("adr check WAIVED by ADR-Exempt (it would have FAILED)"));
    assert!(out.stdout.contains("| not covered |"));
    assert!(out.stdout.contains("::warning title=ADR-Exempt::"));
    assert!(out.stderr.contains("warning: adr check is waived"), "{}", out.stderr);
    snap("check_exempt", &out);

    // Without a reason the trailer is refused.
    let (mut g, _) = setup();
    g.commit_files(
        "Hotfix\n\nADR-Exempt:\n",
        &[(ENGINE, Some(&ENGINE_TEXT.replace("256", "128")))],
    );
    let out = check(&g, &["--base", "main"]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    // A trailer in a commit of main (not of the pull request) does not count.
    let (mut g, base) = setup();
    g.branch("main", base);
    g.commit_files("Old\n\nADR-Exempt: long ago\n", &[("src/main.rs", Some("x\n"))]);
    let main = g.repo.head().unwrap().peel_to_commit().unwrap().id();
    g.branch("pr", main);
    g.commit_files("Raise", &[(ENGINE, Some(&ENGINE_TEXT.replace("256", "384")))]);
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 1);
}

#[test]
fn an_adr_exempt_trailer_covers_only_the_keys_its_own_commit_changed() {
    const EXEMPT: &str = "Hotfix\n\nADR-Exempt: incident 4711\n";
    // Another commit of the pull request changes another key: that key still fails.
    let (mut g, _) = setup();
    g.commit_files(EXEMPT, &[(ENGINE, Some(&ENGINE_TEXT.replace("256", "128")))]);
    let both = ENGINE_TEXT.replace("256", "128").replace("false", "true");
    g.commit_files("Also chunked prefill", &[(ENGINE, Some(&both))]);
    let out = check(&g, &["--base", "main", "--github"]);
    assert_exit(&out, 1);
    assert!(
        out.stdout.contains("!!!   configs/engine.toml: scheduler.max_num_seqs\n"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("adr check FAILED: 2 governed keys changed, 0 covered, 1 waived"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("::error file=configs/engine.toml,line=8,"), "{}", out.stdout);
    assert!(out.stdout.contains("::warning file=configs/engine.toml,line=7,"), "{}", out.stdout);

    // The exempt commit also loosens gate.toml: the stale file is not waived.
    let (mut g, _) = setup();
    let gate = gate_for(&[(ADR1, &adr1())]).replace("limit = 302.0", "limit = 900.0");
    g.commit_files(
        EXEMPT,
        &[(ENGINE, Some(&ENGINE_TEXT.replace("256", "128"))), (GATE, Some(&gate))],
    );
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 1);
    assert!(out.stdout.contains("thresholds/gate.toml is out of date"), "{}", out.stdout);

    // Nor is an edit of an accepted record.
    let (mut g, _) = setup();
    let edited = adr1().replace("Reviews read numbers.", "Reviews read fewer numbers.");
    g.commit_files(
        EXEMPT,
        &[(ENGINE, Some(&ENGINE_TEXT.replace("256", "128"))), (ADR1, Some(&edited))],
    );
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 1);
    assert!(out.stdout.contains("ADR-0001 is Accepted: only its status"), "{}", out.stdout);

    // An exempt commit that changes no governed key waives nothing.
    let (mut g, _) = setup();
    g.commit_files(EXEMPT, &[("src/main.rs", Some("fn main() { }\n"))]);
    g.commit_files("Raise", &[(ENGINE, Some(&ENGINE_TEXT.replace("256", "384")))]);
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 1);
    assert!(out.stdout.contains("!!! it waives nothing"), "{}", out.stdout);
}

#[test]
fn github_annotations_point_at_the_changed_key() {
    let (mut g, _) = setup();
    g.commit_files("Raise", &[(ENGINE, Some(&ENGINE_TEXT.replace("256", "384")))]);
    let out = check(&g, &["--base", "main", "--github"]);
    assert_exit(&out, 1);
    assert!(
        out.stdout.contains(
            "::error file=configs/engine.toml,line=7,title=adr check%3A scheduler.max_num_seqs::"
        ),
        "{}",
        out.stdout
    );
}

#[test]
fn files_listed_as_governed_in_the_settings_are_governed() {
    let (mut g, base) = setup();
    let settings = "[adr]\ngoverned = [\"configs/serving-*.toml\"]\n";
    g.commit_files("Govern serving", &[("configs/xtask.toml", Some(settings))]);
    let main = g.repo.head().unwrap().peel_to_commit().unwrap().id();
    g.repo.branch("main", &g.repo.find_commit(main).unwrap(), true).unwrap();
    g.commit_files("Serve more", &[("configs/serving-a.toml", Some("[http]\nworkers = 8\n"))]);
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 1);
    assert!(out.stdout.contains("governed files: configs/engine*.toml, configs/serving-*.toml"));
    assert!(out.stdout.contains("configs/serving-a.toml: http.workers (unset) -> 8"));

    // Dropping the entry in the same pull request does not exempt it.
    g.commit_files("Ungovern", &[("configs/xtask.toml", Some("[adr]\ngoverned = []\n"))]);
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 1);

    // Not governed: bench.toml.
    g.branch("bench", main);
    g.commit_files(
        "Bench",
        &[("configs/bench.toml", Some("[profile.default.load]\nconcurrency = 4\n"))],
    );
    assert_exit(&check(&g, &["--base", "main"]), 0);

    // Unknown settings are refused at their line (exit 2).
    g.branch("typo", base);
    g.commit_files("Typo", &[("configs/xtask.toml", Some("[adr]\ngovern = []\n"))]);
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 2);
    assert!(out.stderr.contains("invalid configs/xtask.toml at head"), "{}", out.stderr);
    assert!(
        out.stderr.contains("configs/xtask.toml:2:1: unknown field `govern`"),
        "{}",
        out.stderr
    );
}

#[test]
fn invalid_toml_in_a_governed_file_is_a_tool_error() {
    let (mut g, _) = setup();
    g.commit_files("Break", &[(ENGINE, Some("[engine]\nmodel = \n"))]);
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 2);
    assert!(out.stderr.contains("configs/engine.toml at head"), "{}", out.stderr);
    assert!(out.stderr.contains("configs/engine.toml:2:"), "{}", out.stderr);
}

#[test]
fn lint_problems_and_a_stale_gate_file_at_head_fail() {
    let (mut g, base) = setup();
    let broken = adr2("- configs/engine.toml: scheduler.max_num_seqs = 384")
        .replace("- Deciders: Platform team\n", "");
    g.commit_files(
        "Tune",
        &[(ENGINE, Some(&ENGINE_TEXT.replace("256", "384"))), (ADR2, Some(&broken))],
    );
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 1);
    assert!(out.stdout.contains(&format!("{ADR2}:1: no deciders")), "{}", out.stdout);
    // The keys are covered: only lint fails.
    assert!(out.stdout.contains("1 governed key changed, 1 covered, 1 other violation"));

    g.branch("stale", base);
    g.commit_files(
        "Stale",
        &[(GATE, Some(&gate_for(&[(ADR1, &adr1())]).replace("302.0", "300.0")))],
    );
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 1);
    assert!(out.stdout.contains("thresholds/gate.toml is out of date"), "{}", out.stdout);
}

#[test]
fn an_accepted_record_sent_back_to_proposed_fails_and_its_thresholds_are_listed_leaving() {
    let (mut g, _) = setup();
    let back = adr1().replace("- Status: Accepted", "- Status: Proposed");
    // gate.toml regenerated so that it agrees with the records: nothing else is wrong.
    let gate = gate_for(&[(ADR1, &back)]);
    g.commit_files("Reopen ADR-0001", &[(ADR1, Some(&back)), (GATE, Some(&gate))]);
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 1);
    assert!(
        out.stdout.contains(&format!(
            "{ADR1}:3: ADR-0001 was Accepted at the merge base and is now Proposed; an accepted \
             record does not go back"
        )),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!(
            "thresholds in force (thresholds/gate.toml): 1 leave, 0 enter\n  - \
             metrics.ttft_ms.p99 <= 302 ms (block, every profile, ADR-0001 {ADR1}:26)\n"
        )),
        "{}",
        out.stdout
    );
}

#[test]
fn superseding_lists_the_thresholds_that_leave_and_enter() {
    let (mut g, _) = setup();
    let old = adr1().replace("- Status: Accepted", "- Status: Superseded by 0002").replace(
        "## Links\n\nNone.",
        "## Links\n\n- Superseded by [ADR-0002](0002-tune-the-scheduler.md)",
    );
    let new = record(
        2,
        "Tune the scheduler",
        "Accepted",
        "- configs/engine.toml: scheduler.max_num_seqs = 384",
        "- Supersedes [ADR-0001](0001-use-the-defaults.md)",
    )
    .replace("| <= | 302 | ms |", "| <= | 250 | ms |");
    let gate = gate_for(&[(ADR1, &old), (ADR2, &new)]);
    g.commit_files(
        "Supersede ADR-0001",
        &[
            (ENGINE, Some(&ENGINE_TEXT.replace("256", "384"))),
            (ADR1, Some(&old)),
            (ADR2, Some(&new)),
            (GATE, Some(&gate)),
        ],
    );
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 0);
    assert!(
        out.stdout.contains(&format!(
            "  - metrics.ttft_ms.p99 <= 302 ms (block, every profile, ADR-0001 {ADR1}:26)\n  + \
             metrics.ttft_ms.p99 <= 250 ms (block, every profile, ADR-0002 {ADR2}:25)\n"
        )),
        "{}",
        out.stdout
    );
}

#[test]
fn two_live_records_deciding_one_key_differently_fail_naming_both() {
    let (mut g, _) = setup();
    // ADR-0002 is Accepted and decides max_num_seqs = 384, but does not supersede ADR-0001,
    // which stays live with 256. Another metric, so only the key conflicts.
    let new = record(
        2,
        "Tune the scheduler",
        "Accepted",
        "- configs/engine.toml: scheduler.max_num_seqs = 384",
        "None.",
    )
    .replace("`metrics.ttft_ms.p99`", "`metrics.tpot_ms.p99`");
    let gate = gate_for(&[(ADR1, &adr1()), (ADR2, &new)]);
    g.commit_files(
        "Tune",
        &[
            (ENGINE, Some(&ENGINE_TEXT.replace("256", "384"))),
            (ADR2, Some(&new)),
            (GATE, Some(&gate)),
        ],
    );
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 1);
    assert!(
        out.stdout.contains(&format!(
            "{ADR2}:19: configs/engine.toml: scheduler.max_num_seqs is decided differently by two \
             live records: ADR-0001 ({ADR1}:19) says = 256 and ADR-0002 ({ADR2}:19) says = 384"
        )),
        "{}",
        out.stdout
    );
}

/// configs/bench.toml whose default profile takes its engine parameters from `engine`.
fn bench_toml(engine: &str) -> String {
    format!("[profile.default]\n\n[profile.default.sim]\nengine_config = \"{engine}\"\n")
}

#[test]
fn an_engine_config_pointing_at_another_file_is_governed() {
    // The reproduction: a copy of the engine config with other values, under another name,
    // and the profile pointed at it. Every key of the copy counts as set.
    let (mut g, base) = setup();
    g.commit_files(
        "Bench on the engine config",
        &[("configs/bench.toml", Some(&bench_toml(ENGINE)))],
    );
    let main = g.repo.head().unwrap().peel_to_commit().unwrap().id();
    g.branch("main", main);
    g.branch("pr", main);
    let _ = base;
    let llm = ENGINE_TEXT.replace("256", "8");
    g.commit_files(
        "Use llm.toml",
        &[
            ("configs/llm.toml", Some(&llm)),
            ("configs/bench.toml", Some(&bench_toml("configs/llm.toml"))),
        ],
    );
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 1);
    assert!(
        out.stdout.contains("governed files: configs/engine*.toml, configs/llm.toml\n"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(
            "configs/llm.toml: now the engine config of `profile.default.sim.engine_config` \
             (configs/bench.toml:4): every key of it counts as set"
        ),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("  - configs/llm.toml: scheduler.max_num_seqs = 8\n"),
        "{}",
        out.stdout
    );

    // The file was there before (ungoverned) and only the pointer moves: still every key.
    let (mut g2, _) = Governed::default()
        .with("configs/llm.toml", &llm)
        .with("configs/bench.toml", &bench_toml(ENGINE))
        .without(README)
        .on_branch_pr();
    g2.commit_files("Point", &[("configs/bench.toml", Some(&bench_toml("./configs/llm.toml")))]);
    let out = check(&g2, &["--base", "main"]);
    assert_exit(&out, 1);
    assert!(
        out.stdout.contains("configs/llm.toml: scheduler.max_num_seqs (unset) -> 8"),
        "{}",
        out.stdout
    );

    // A file decision records cannot name is refused at its line; so is a missing one.
    g2.commit_files("Point away", &[("configs/bench.toml", Some(&bench_toml("/etc/llm.toml")))]);
    let out = check(&g2, &["--base", "main"]);
    assert_exit(&out, 1);
    assert!(
        out.stdout.contains(
            "configs/bench.toml:4: `profile.default.sim.engine_config` = \"/etc/llm.toml\" names a file decision records cannot govern"
        ),
        "{}",
        out.stdout
    );
    g2.commit_files(
        "Point nowhere",
        &[("configs/bench.toml", Some(&bench_toml("configs/gone.toml")))],
    );
    let out = check(&g2, &["--base", "main"]);
    assert_exit(&out, 1);
    assert!(
        out.stdout.contains("configs/bench.toml:4: `profile.default.sim.engine_config` names configs/gone.toml, which does not exist at head"),
        "{}",
        out.stdout
    );
}

#[test]
fn thresholds_of_a_profile_the_bench_configuration_lacks_fail() {
    let (mut g, _) = setup();
    // A new record gating profile `tuned`, which configs/bench.toml ([profile.default]) lacks.
    let a2 = adr2("- configs/engine.toml: scheduler.max_num_seqs = 384")
        .replace("## Context\n\n", "## Context\n\nMeasured scenario: profile `tuned`.\n\n")
        .replace("| `metrics.ttft_ms.p99` |", "| `metrics.tpot_ms.p99` |");
    g.commit_files(
        "Tune",
        &[(ENGINE, Some(&ENGINE_TEXT.replace("256", "384"))), (ADR2, Some(&a2))],
    );
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 1);
    assert!(
        out.stdout.contains(&format!(
            "{ADR2}:9: the thresholds gate runs of bench profile `tuned`, which configs/bench.toml \
             does not define; profiles: default"
        )),
        "{}",
        out.stdout
    );
    // With the profile defined, it passes.
    g.commit_files(
        "Add the profile",
        &[("configs/bench.toml", Some("[profile.default]\n\n[profile.tuned]\n"))],
    );
    assert_exit(&check(&g, &["--base", "main"]), 0);
}

#[test]
fn the_assets_of_an_accepted_record_are_part_of_it() {
    const ASSET: &str = "docs/adr/assets/0001-latency.svg";
    let a1 = adr1().replace(
        "Reviews read numbers.",
        "Reviews read numbers.\n\n![TTFT and E2E distributions](assets/0001-latency.svg)",
    );
    let (mut g, base) = Governed::default().adr1(&a1).with(ASSET, "<svg/>\n").on_branch_pr();
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 0);
    // Redrawing the accepted record's chart is editing the record.
    g.commit_files("Redraw the chart", &[(ASSET, Some("<svg><g/></svg>\n"))]);
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 1);
    assert!(
        out.stdout.contains(&format!(
            "{ASSET}:1: an asset of ADR-0001 ({ADR1}), which was Accepted at the merge base, was \
             modified"
        )),
        "{}",
        out.stdout
    );
    // Deleting it is too, and the record's link is then broken (lint at head).
    g.branch("delete", base);
    g.commit_files("Drop the chart", &[(ASSET, None)]);
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 1);
    assert!(out.stdout.contains("Accepted at the merge base, was deleted"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains(&format!("links assets/0001-latency.svg, which does not exist ({ASSET})")),
        "{}",
        out.stdout
    );
}

/// A repository whose bench profile `chat` replays a conversation dataset and is gated by an
/// Accepted record measured on it; profile `other` reads another dataset and is not gated.
fn setup_gated_workload() -> GitRepo {
    let measured = |n: u32, title: &str, status: &str| {
        record(n, title, status, "- configs/engine.toml: scheduler.max_num_seqs = 256", "None.")
            .replace(
                "Long prompts block decode at concurrency 64.",
                "Long prompts block decode at concurrency 64.\n\nMeasured scenario: profile `chat`, 8 sessions.",
            )
    };
    let a1 = measured(1, "Use the defaults", "Accepted");
    let bench = "[profile.default]\n\
                 [profile.chat.workload]\nconversations = \"configs/workloads/chats.jsonl\"\n\
                 [profile.other.workload]\ndataset = \"configs/workloads/other.jsonl\"\n";
    let engine = ENGINE_TEXT.replace("enable_chunked_prefill = false\n", "");
    let (g, _) = Governed::default()
        .with(ENGINE, &engine)
        .with("configs/bench.toml", bench)
        .with(
            "configs/workloads/chats.jsonl",
            "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n",
        )
        .with("configs/workloads/other.jsonl", "{\"prompt\": \"hi\"}\n")
        .adr1(&a1)
        .without(README)
        .on_branch_pr();
    g
}

#[test]
fn a_changed_workload_file_of_a_gated_profile_needs_a_record_measured_on_it() {
    let mut g = setup_gated_workload();
    // The dataset of an ungated profile may change freely.
    g.commit_files(
        "Edit other",
        &[("configs/workloads/other.jsonl", Some("{\"prompt\": \"ho\"}\n"))],
    );
    assert_exit(&check(&g, &["--base", "main"]), 0);
    // The gated profile's conversations change: another scenario, no record measured it.
    let chats = "{\"messages\": [{\"role\": \"user\", \"content\": \"hello\"}]}\n";
    g.commit_files("Edit chats", &[("configs/workloads/chats.jsonl", Some(chats))]);
    let out = check(&g, &["--base", "main", "--github"]);
    assert_exit(&out, 1);
    assert!(
        out.stdout.contains(
            "::error file=configs/workloads/chats.jsonl,line=1,title=adr check::configs/workloads/chats.jsonl of gated profile `chat` (workload.conversations) was modified"
        ),
        "{}",
        out.stdout
    );
    // A new Proposed record measured on the profile covers it.
    let a2 = record(2, "Measure the new chats", "Proposed", "- configs/engine.toml: scheduler.max_num_seqs = 256", "None.")
        .replace(
            "Long prompts block decode at concurrency 64.",
            "Long prompts block decode at concurrency 64.\n\nMeasured scenario: profile `chat`, 8 sessions.",
        );
    g.commit_files("Record the new scenario", &[(ADR2, Some(&a2))]);
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 0);
}

/// A provenance of `dataset refresh` for a dataset whose refreshed content is `text`.
fn provenance_of(file: &str, text: &str) -> String {
    use infergate_model::refresh::provenance::*;
    let p = Provenance {
        format_version: 1,
        tool: "infergate 0.1.0".into(),
        log: LogSource {
            file: "prod.jsonl".into(),
            sha256: format!("sha256:{}", "ab".repeat(32)),
            format: "infergate".into(),
            lines: 10,
            blank: 0,
            malformed: 0,
            malformed_lines: vec![],
        },
        window: Window {
            since: "2025-12-01T00:00:00.000Z".into(),
            until: "2025-12-08T00:00:00.000Z".into(),
            chosen_by: "--window-start/--window-end".into(),
            requests: 10,
        },
        selection: Selection {
            rule: "slowest by latency_ms".into(),
            by: "latency_ms".into(),
            failed_share: 0.5,
            failed: 0,
            structured: 0,
        },
        scrub: Scrub {
            secret_patterns: vec![],
            pii_patterns: vec![],
            secrets_removed: 0,
            pii_removed: 0,
            user_ids_hashed: 0,
            user_id_hash: "hmac-sha256".into(),
            key_env: "K".into(),
            key_id: None,
        },
        seed: 7,
        share: 1.0,
        dataset: DatasetSides {
            input: file.into(),
            input_hash: "fnv1a:0000000000000000".into(),
            output: file.into(),
            output_hash: infergate_model::workload::WorkloadFile::of(file, text.as_bytes()).hash,
            items: 1,
            structured_before: 0,
            structured_after: 0,
        },
        replaced: vec![Replacement {
            item: 0,
            old_id: "line-1".into(),
            new_id: "log-3".into(),
            log_line: 3,
            structured: false,
            why: "slow (latency_ms 900)".into(),
        }],
    };
    serde_json::to_string_pretty(&p).unwrap()
}

#[test]
fn a_refreshed_dataset_of_a_gated_profile_is_a_changed_scenario_and_names_its_refresh() {
    let mut g = setup_gated_workload();
    let file = "configs/workloads/chats.jsonl";
    let refreshed =
        "{\"messages\": [{\"role\": \"user\", \"content\": \"slow one\"}], \"id\": \"log-3\"}\n";
    let prov = provenance_of(file, refreshed);
    g.commit_files(
        "Refresh the chats",
        &[(file, Some(refreshed)), ("configs/workloads/chats.jsonl.provenance.json", Some(&prov))],
    );
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 1);
    assert!(
        out.stdout.contains(
            "configs/workloads/chats.jsonl of gated profile `chat` (workload.conversations) was \
             modified (refreshed from production requests by `cargo xtask dataset refresh`: 1 of \
             1 items replaced by the slowest by latency_ms of `prod.jsonl`"
        ),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("seed 7; provenance configs/workloads/chats.jsonl.provenance.json)")
    );
    // Edited after the refresh: still a changed scenario, and the provenance is not taken for it.
    g.commit_files("Edit", &[(file, Some("{\"prompt\": \"edited\"}\n"))]);
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 1);
    assert!(
        out.stdout.contains(
            "was modified (its provenance configs/workloads/chats.jsonl.provenance.json describes \
             another version of it)"
        ),
        "{}",
        out.stdout
    );
    // A record measured on the profile covers the refresh.
    let a2 = record(2, "Measure the refreshed chats", "Proposed", "- configs/engine.toml: scheduler.max_num_seqs = 256", "None.")
        .replace(
            "Long prompts block decode at concurrency 64.",
            "Long prompts block decode at concurrency 64.\n\nMeasured scenario: profile `chat`, 8 sessions.",
        );
    g.commit_files("Record the refreshed scenario", &[(ADR2, Some(&a2))]);
    assert_exit(&check(&g, &["--base", "main"]), 0);
}

/// A refreshed dataset no gated profile reads (the acceptance dataset of `cargo xtask accept`,
/// which `dataset refresh` keeps fresh) changes what the runs on it measure: the pull request
/// needs a record that cites it. Without a provenance, the same edit is free, as any workload
/// file of an ungated profile.
#[test]
fn a_refreshed_acceptance_dataset_needs_a_record_that_cites_it() {
    let mut g = setup_gated_workload();
    let file = "configs/acceptance/dataset.jsonl";
    // The merge base has the dataset; the pull request refreshes it.
    let base =
        g.commit_files("Add the acceptance dataset", &[(file, Some("{\"prompt\": \"hi\"}\n"))]);
    g.branch("main", base);
    g.branch("pr", base);
    g.commit_files("Edit it by hand", &[(file, Some("{\"prompt\": \"ho\"}\n"))]);
    assert_exit(&check(&g, &["--base", "main"]), 0);
    let refreshed = "{\"prompt\": \"slow one\", \"id\": \"log-3\"}\n";
    let prov = provenance_of(file, refreshed);
    let provenance = "configs/acceptance/dataset.jsonl.provenance.json";
    g.commit_files("Refresh it", &[(file, Some(refreshed)), (provenance, Some(&prov))]);
    let out = check(&g, &["--base", "main"]);
    assert_exit(&out, 1);
    assert!(
        out.stdout.contains(
            "configs/acceptance/dataset.jsonl was modified (refreshed from production requests by \
             `cargo xtask dataset refresh`"
        ),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("add a decision record that cites it"), "{}", out.stdout);
    // A record that does not cite it does not cover it; one that does, does.
    let other = record(
        2,
        "Something else",
        "Proposed",
        "- configs/engine.toml: scheduler.max_num_seqs = 256",
        "None.",
    );
    g.commit_files("Record something else", &[(ADR2, Some(&other))]);
    assert_exit(&check(&g, &["--base", "main"]), 1);
    let citing = other.replace(
        "Long prompts block decode at concurrency 64.",
        "Long prompts block decode at concurrency 64.\n\nAcceptance measured on `configs/acceptance/dataset.jsonl` as refreshed.",
    );
    g.commit_files("Cite the refreshed dataset", &[(ADR2, Some(&citing))]);
    assert_exit(&check(&g, &["--base", "main"]), 0);
}
