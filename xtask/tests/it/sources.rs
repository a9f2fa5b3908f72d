//! `adr check` on a repository shaped like a team's (`fixtures/team/`): a Helm chart's values,
//! a Kubernetes Deployment's args, a vLLM config YAML, a compose file and a launch script,
//! each declared as an `[[adr.source]]`. A change of `max_num_seqs` in any of them fails
//! naming the file, its line and `scheduler.max_num_seqs`, and passes with a record naming it;
//! reordering, `=` against a space, re-quoting and re-indenting are not changes; an unknown
//! flag is; sources of one deployment that disagree fail naming both lines.

use std::path::Path;

use crate::support::gitrepo::GitRepo;
use crate::support::governed::{Governed, record};
use crate::support::{Out, repo_root, xtask};

/// The fixture's files (path relative to the fixture, text).
fn team_files() -> Vec<(String, String)> {
    let root = repo_root().join("xtask/tests/it/fixtures/team");
    let mut out = Vec::new();
    fn walk(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, root, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
                out.push((rel, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    walk(&root, &root, &mut out);
    out.sort();
    out
}

/// The team's repository on `main`, HEAD on `pr`.
fn team(files: &[(String, String)]) -> GitRepo {
    let mut g = Governed::default();
    for (p, t) in files {
        g = g.with(p, t);
    }
    g.on_branch_pr().0
}

fn text_of<'a>(files: &'a [(String, String)], path: &str) -> &'a str {
    &files.iter().find(|(p, _)| p == path).unwrap().1
}

fn check(g: &GitRepo) -> Out {
    xtask(g.path(), &["adr", "check", "--base", "main"])
}

/// The line of `file` at head that holds `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

/// Each source with the edit that sets max_num_seqs to 128 and the text on its line.
const EDITS: &[(&str, &str, &str, &str)] = &[
    ("deploy/helm/values.yaml", "maxNumSeqs: 256", "maxNumSeqs: 128", "maxNumSeqs"),
    ("deploy/k8s/vllm.yaml", "- \"256\"", "- \"128\"", "- --max-num-seqs"),
    ("serve/vllm-config.yaml", "max-num-seqs: 256", "max-num-seqs: 128", "max-num-seqs"),
    // A folded block scalar: each flag is named at its own line.
    ("docker-compose.yml", "--max-num-seqs 256", "--max-num-seqs 128", "--max-num-seqs"),
    ("scripts/serve.sh", "--max-num-seqs 256", "--max-num-seqs 128", "--max-num-seqs"),
];

#[test]
fn a_changed_max_num_seqs_in_any_source_needs_a_record_naming_it() {
    let files = team_files();
    for (file, from, to, on) in EDITS {
        let mut g = team(&files);
        let text = text_of(&files, file).replace(from, to);
        assert_ne!(text, text_of(&files, file), "{file}");
        g.commit_files("Fewer sequences", &[(file, Some(&text))]);
        let out = check(&g);
        assert_eq!(out.code, 1, "{file}: {}{}", out.stdout, out.stderr);
        assert!(
            out.stdout.contains("governed sources: deploy/helm/values.yaml (vllm), "),
            "{}",
            out.stdout
        );
        let line = line_of(&text, on);
        assert!(
            out.stdout.contains(&format!("{file}: scheduler.max_num_seqs 256 -> 128")),
            "{file}: {}",
            out.stdout
        );
        assert!(
            out.stdout.contains(&format!("  - {file}: scheduler.max_num_seqs = 128\n")),
            "{file}: {}",
            out.stdout
        );
        let github = xtask(g.path(), &["adr", "check", "--base", "main", "--github"]);
        assert!(
            github.stdout.contains(&format!("::error file={file},line={line}")),
            "{file}: line {line}: {}",
            github.stdout
        );
        // The same pull request with a record naming the change passes.
        let adr = record(
            2,
            "Serve fewer sequences",
            "Proposed",
            &format!("- {file}: scheduler.max_num_seqs = 128"),
            "None.",
        );
        g.commit_files("ADR-0002", &[("docs/adr/0002-serve-fewer-sequences.md", Some(&adr))]);
        let out = check(&g);
        assert_eq!(out.code, 0, "{file}: {}{}", out.stdout, out.stderr);
    }
}

#[test]
fn reordering_requoting_and_reindenting_are_not_changes_and_an_unknown_flag_is() {
    let files = team_files();
    let same: &[(&str, &str, &str)] = &[
        (
            "deploy/helm/values.yaml",
            "        maxNumSeqs: 256\n        gpuMemoryUtilization: 0.9\n",
            "        gpuMemoryUtilization: 0.90\n        maxNumSeqs: \"256\"\n",
        ),
        (
            "deploy/k8s/vllm.yaml",
            "            - --max-num-seqs\n            - \"256\"\n            - --max-num-batched-tokens=8192\n",
            "            - --max-num-batched-tokens\n            - '8192'\n            - --max-num-seqs=256\n",
        ),
        ("serve/vllm-config.yaml", "max-num-seqs: 256\n", "max-num-seqs:     256   # the slots\n"),
        (
            "docker-compose.yml",
            "--max-num-seqs 256\n      --gpu-memory-utilization 0.9",
            "--gpu-memory-utilization=0.9\n      --max-num-seqs=256",
        ),
        (
            "scripts/serve.sh",
            "  --max-num-seqs 256 \\\n  --max-num-batched-tokens 8192 \\\n",
            "    --max-num-batched-tokens='8192' \\\n    --max-num-seqs \"256\" \\\n",
        ),
    ];
    for (file, from, to) in same {
        let mut g = team(&files);
        let text = text_of(&files, file).replace(from, to);
        assert_ne!(text, text_of(&files, file), "{file}");
        g.commit_files("Restyle", &[(file, Some(&text))]);
        let out = check(&g);
        assert_eq!(out.code, 0, "{file}: {}{}", out.stdout, out.stderr);
        assert!(out.stdout.contains("governed changes: none"), "{file}: {}", out.stdout);
    }
    // An added flag the vocabulary does not know is a change of its own key.
    let mut g = team(&files);
    let file = "scripts/serve.sh";
    let text =
        text_of(&files, file).replace("--port 8000", "--port 8000 \\\n  --kv-cache-dtype fp8");
    g.commit_files("Quantize the cache", &[(file, Some(&text))]);
    let out = check(&g);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("scripts/serve.sh: unmapped.\"--kv-cache-dtype\""),
        "{}",
        out.stdout
    );
}

#[test]
fn two_sources_of_one_deployment_must_agree() {
    let files = team_files();
    let settings = text_of(&files, "configs/xtask.toml")
        .replace("deployment = \"script\"", "deployment = \"helm\"");
    let mut with = files.clone();
    with.retain(|(p, _)| p != "configs/xtask.toml");
    with.push(("configs/xtask.toml".into(), settings));
    // Agreeing: the check passes.
    let mut g = team(&with);
    g.commit_files("Unrelated", &[("README.md", Some("x\n"))]);
    let out = check(&g);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    // The script says 128 while the chart says 256: both files and lines are named.
    let script =
        text_of(&files, "scripts/serve.sh").replace("--max-num-seqs 256", "--max-num-seqs 128");
    let adr = record(
        2,
        "Serve fewer sequences",
        "Proposed",
        "- scripts/serve.sh: scheduler.max_num_seqs = 128",
        "None.",
    );
    g.commit_files(
        "Fewer sequences in the script",
        &[
            ("scripts/serve.sh", Some(&script)),
            ("docs/adr/0002-serve-fewer-sequences.md", Some(&adr)),
        ],
    );
    let out = check(&g);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    let helm = line_of(text_of(&files, "deploy/helm/values.yaml"), "maxNumSeqs");
    let sh = line_of(&script, "--max-num-seqs");
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(
        all.contains(&format!("scripts/serve.sh:{sh}: scheduler.max_num_seqs = 128 here, but deploy/helm/values.yaml:{helm} gives scheduler.max_num_seqs = 256")),
        "{all}"
    );
}

#[test]
fn a_source_that_cannot_be_read_is_a_clear_error_at_its_line() {
    let files = team_files();
    let bad: &[(&str, &str, &str)] = &[
        ("deploy/helm/values.yaml", "      vllmConfig:\n", "      vllmConfig: [\n"),
        ("scripts/serve.sh", "--port 8000", "--port '8000"),
    ];
    for (file, from, to) in bad {
        let mut g = team(&files);
        let text = text_of(&files, file).replace(from, to);
        g.commit_files("Break it", &[(file, Some(&text))]);
        let out = check(&g);
        assert_eq!(out.code, 2, "{file}: {}{}", out.stdout, out.stderr);
        assert!(out.stderr.contains(&format!("{file}:")), "{file}: {}", out.stderr);
    }
    // A key path that resolves in both documents of a multi-document file.
    let settings = text_of(&files, "configs/xtask.toml")
        .replace("args = \"spec.template.spec.containers[name=vllm].args\"", "at = \"metadata\"");
    let mut g = team(&files);
    g.commit_files("Point at both", &[("configs/xtask.toml", Some(&settings))]);
    let out = check(&g);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("deploy/k8s/vllm.yaml"), "{}", out.stderr);
    // A key path that resolves to nothing.
    let settings = text_of(&files, "configs/xtask.toml").replace("modelSpec[0]", "modelSpec[3]");
    let mut g = team(&files);
    g.commit_files("Point elsewhere", &[("configs/xtask.toml", Some(&settings))]);
    let out = check(&g);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("deploy/helm/values.yaml"), "{}", out.stderr);
}

/// Invoked as `infergate` (a team's repository has no `cargo xtask`), the check's hints and
/// errors name `infergate`.
#[test]
fn the_hints_name_the_tool_as_it_was_invoked() {
    let files = team_files();
    let mut g = team(&files);
    let text =
        text_of(&files, "serve/vllm-config.yaml").replace("max-num-seqs: 256", "max-num-seqs: 64");
    g.commit_files("Fewer sequences", &[("serve/vllm-config.yaml", Some(&text))]);
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_infergate"))
            .arg("-C")
            .arg(g.path())
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stdout, stderr) = run(&["adr", "check", "--base", "main"]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("  infergate adr new 'Set scheduler.max_num_seqs to 64'"), "{stdout}");
    assert!(!stdout.contains("cargo xtask") && !stderr.contains("cargo xtask"), "{stdout}{stderr}");
    let (code, _, stderr) = run(&["adr", "check", "--base", "no-such-branch"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(!stderr.contains("cargo xtask"), "{stderr}");
    let (code, _, stderr) = run(&["adr", "chek"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("Usage: infergate adr"), "{stderr}");
}

/// `adr new` reads the same sources: a decision on `scheduler.max_num_seqs` gets a decision
/// line for each declared source that sets it, so the pull request that changes the Helm values
/// with that record passes `adr check`.
#[test]
fn adr_new_names_the_sources_that_set_a_decided_key() {
    use crate::support::{engine_params, summary, write_run};
    let files = team_files();
    let mut g = team(&files);
    g.checkout();
    let base = summary("base", 300.0, 20.0, 0.95, engine_params(false, 8192));
    let mut exp = summary("exp", 250.0, 20.0, 0.97, engine_params(false, 8192));
    exp.engine.as_mut().unwrap().params["scheduler"]["max_num_seqs"] = 128.into();
    let runs = g.path().join("runs");
    write_run(&runs, &base);
    write_run(&runs, &exp);
    let out = xtask(
        g.path(),
        &[
            "adr",
            "new",
            "Serve fewer sequences",
            "--baseline",
            "runs/base",
            "--exp",
            "runs/exp",
            "--choose",
            "1",
        ],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let dir = g.path().join("docs/adr");
    let record = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("0002-"))
        .unwrap();
    let text = std::fs::read_to_string(&record).unwrap();
    for source in [
        "deploy/helm/values.yaml",
        "deploy/k8s/vllm.yaml",
        "serve/vllm-config.yaml",
        "docker-compose.yml",
        "scripts/serve.sh",
    ] {
        assert!(
            text.contains(&format!("- {source}: scheduler.max_num_seqs = 128\n")),
            "{source}:\n{text}"
        );
    }
    let helm =
        text_of(&files, "deploy/helm/values.yaml").replace("maxNumSeqs: 256", "maxNumSeqs: 128");
    let name = format!("docs/adr/{}", record.file_name().unwrap().to_string_lossy());
    g.commit_files(
        "Fewer sequences",
        &[("deploy/helm/values.yaml", Some(&helm)), (&name, Some(&text))],
    );
    // The change is covered by the draft (which is still a draft: its placeholders and its
    // contradiction of the live ADR-0001 are violations of their own until a person finishes it).
    let out = check(&g);
    assert!(
        out.stdout
            .contains("| deploy/helm/values.yaml: scheduler.max_num_seqs | 256 -> 128 | ADR-0002"),
        "{}",
        out.stdout
    );
}

/// `adr history KEY` follows a canonical key through the declared sources too.
#[test]
fn adr_history_follows_a_key_through_a_source() {
    let files = team_files();
    let mut g = team(&files);
    let helm =
        text_of(&files, "deploy/helm/values.yaml").replace("maxNumSeqs: 256", "maxNumSeqs: 128");
    g.commit_files("Fewer sequences in the chart", &[("deploy/helm/values.yaml", Some(&helm))]);
    let out = xtask(g.path(), &["adr", "history", "scheduler.max_num_seqs"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let helm_rows: Vec<&str> =
        out.stdout.lines().filter(|l| l.contains("deploy/helm/values.yaml")).collect();
    assert_eq!(helm_rows.len(), 2, "{}", out.stdout);
    assert!(helm_rows[0].contains("256") && helm_rows[1].contains("128"), "{}", out.stdout);
    assert!(out.stdout.contains("scripts/serve.sh"), "{}", out.stdout);
}

/// `adr list --exempt` lists the sources' values that no live record names.
#[test]
fn adr_list_exempt_shows_the_sources_values_no_record_names() {
    let files = team_files();
    let g = team(&files);
    g.checkout();
    let out = xtask(g.path(), &["adr", "list", "--exempt"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    for row in [
        "| deploy/helm/values.yaml: scheduler.max_num_seqs ",
        "| scripts/serve.sh: scheduler.max_num_batched_tokens ",
        "| docker-compose.yml: engine.gpu_memory_utilization ",
    ] {
        assert!(out.stdout.contains(row), "{row}\n{}", out.stdout);
    }
    // The engine config's key ADR-0001 names is not listed.
    assert!(
        !out.stdout.contains("| configs/engine.toml: scheduler.max_num_seqs "),
        "{}",
        out.stdout
    );
}
