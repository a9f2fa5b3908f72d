//! The GitHub workflows parse as YAML, run what the project promises (fmt, clippy, .ci/run,
//! `adr check` with the whole history; a manual GPU bench gate), and every `cargo xtask ...` /
//! `cargo run -p xtask ... -- ...` command they (and .ci/run) call parses with the real CLI.

use crate::support::repo_root;
use clap::Parser;
use yaml_rust2::{Yaml, YamlLoader};

fn load(name: &str) -> Yaml {
    let path = repo_root().join(".github/workflows").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut docs = YamlLoader::load_from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", path.display()));
    assert_eq!(docs.len(), 1, "{name}: one YAML document");
    docs.remove(0)
}

fn key<'a>(y: &'a Yaml, k: &str) -> &'a Yaml {
    &y[k]
}

/// Every step of every job: (job name, step).
fn steps(doc: &Yaml) -> Vec<(String, &Yaml)> {
    let jobs = doc["jobs"].as_hash().expect("jobs");
    let mut out = Vec::new();
    for (name, job) in jobs {
        for step in job["steps"].as_vec().expect("steps") {
            out.push((name.as_str().unwrap().to_string(), step));
        }
    }
    out
}

fn scripts(doc: &Yaml) -> Vec<String> {
    steps(doc).iter().filter_map(|(_, s)| s["run"].as_str().map(str::to_string)).collect()
}

/// One shell command: its words (quotes removed; `${{ ... }}` replaced by `EXPR`).
type ShellCommand = Vec<String>;

/// Split a shell script into simple commands: `;`, `&`, `&&`, `||`, `|` and newlines separate
/// them; `$(...)` is a command of its own (its place holds the word `SUBST`); redirections and
/// comments are dropped. Enough for the scripts of a workflow, not a full shell.
fn commands(script: &str) -> Vec<ShellCommand> {
    let text = script.replace("\\\n", " ");
    let mut text = text.as_str().to_string();
    while let Some(start) = text.find("${{") {
        let end = text[start..].find("}}").map_or(text.len(), |e| start + e + 2);
        text.replace_range(start..end, "EXPR");
    }
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    parse_commands(&chars, &mut 0, &mut out, false);
    out.retain(|c| !c.is_empty());
    out
}

fn parse_commands(c: &[char], i: &mut usize, out: &mut Vec<ShellCommand>, nested: bool) {
    let mut cmd: ShellCommand = Vec::new();
    let mut word: Option<String> = None;
    let mut skip_next_word = false;
    let end_word = |word: &mut Option<String>, cmd: &mut ShellCommand, skip: &mut bool| {
        if let Some(w) = word.take() {
            if *skip {
                *skip = false;
            } else {
                cmd.push(w);
            }
        }
    };
    while *i < c.len() {
        let ch = c[*i];
        match ch {
            ')' if nested => {
                *i += 1;
                break;
            }
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                *i += 1;
                while *i < c.len() && c[*i] != '\'' {
                    w.push(c[*i]);
                    *i += 1;
                }
                *i += 1;
                continue;
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                *i += 1;
                while *i < c.len() && c[*i] != '"' {
                    if c[*i] == '\\' && *i + 1 < c.len() {
                        *i += 1;
                    }
                    if c[*i] == '$' && c.get(*i + 1) == Some(&'(') {
                        *i += 2;
                        parse_commands(c, i, out, true);
                        w.push_str("SUBST");
                        continue;
                    }
                    w.push(c[*i]);
                    *i += 1;
                }
                *i += 1;
                continue;
            }
            '$' if c.get(*i + 1) == Some(&'(') => {
                *i += 2;
                parse_commands(c, i, out, true);
                word.get_or_insert_with(String::new).push_str("SUBST");
                continue;
            }
            '#' if word.is_none() => {
                while *i < c.len() && c[*i] != '\n' {
                    *i += 1;
                }
                continue;
            }
            '>' | '<' => {
                if word.as_deref().is_some_and(|w| w.chars().all(|d| d.is_ascii_digit())) {
                    word = None;
                }
                end_word(&mut word, &mut cmd, &mut skip_next_word);
                while *i < c.len() && (c[*i] == '>' || c[*i] == '<') {
                    *i += 1;
                }
                if c.get(*i) == Some(&'&') {
                    *i += 1;
                    while *i < c.len() && c[*i].is_ascii_digit() {
                        *i += 1;
                    }
                } else {
                    skip_next_word = true;
                }
                continue;
            }
            ';' | '&' | '|' | '\n' => {
                end_word(&mut word, &mut cmd, &mut skip_next_word);
                out.push(std::mem::take(&mut cmd));
            }
            c if c.is_whitespace() => end_word(&mut word, &mut cmd, &mut skip_next_word),
            '\\' if *i + 1 < c.len() => {
                *i += 1;
                word.get_or_insert_with(String::new).push(c[*i]);
            }
            other => word.get_or_insert_with(String::new).push(other),
        }
        *i += 1;
    }
    end_word(&mut word, &mut cmd, &mut skip_next_word);
    out.push(cmd);
}

/// An xtask invocation found in a script.
#[derive(Debug)]
struct Invocation {
    /// `cargo xtask` followed by the xtask arguments.
    argv: Vec<String>,
    /// Built with `--no-default-features` (the PR-check build).
    no_default_features: bool,
}

fn invocations(script: &str) -> Vec<Invocation> {
    let mut out = Vec::new();
    for cmd in commands(script) {
        let Some(at) = cmd.iter().position(|w| w == "cargo") else { continue };
        let rest = &cmd[at + 1..];
        let args: Vec<String> = match rest.first().map(String::as_str) {
            Some("xtask") => {
                out.push(Invocation { argv: argv(&rest[1..]), no_default_features: false });
                continue;
            }
            Some("run") => rest[1..].to_vec(),
            _ => continue,
        };
        let package =
            args.windows(2).any(|w| (w[0] == "-p" || w[0] == "--package") && w[1] == "xtask")
                || args.iter().any(|a| a == "--package=xtask");
        if !package {
            continue;
        }
        let sep = args.iter().position(|a| a == "--").expect("cargo run -p xtask ... -- ARGS");
        out.push(Invocation {
            argv: argv(&args[sep + 1..]),
            no_default_features: args[..sep].iter().any(|a| a == "--no-default-features"),
        });
    }
    out
}

fn argv(args: &[String]) -> Vec<String> {
    std::iter::once("cargo xtask".to_string()).chain(args.iter().cloned()).collect()
}

/// Every xtask command the script calls parses with the real CLI (those built with default
/// features only when this test is: the runtime commands exist only there).
fn assert_commands_parse(name: &str, script: &str) -> Vec<Invocation> {
    let found = invocations(script);
    for inv in &found {
        if !inv.no_default_features && !cfg!(feature = "runtime") {
            continue;
        }
        if let Err(e) = xtask::Cli::try_parse_from(&inv.argv) {
            panic!("{name}: `{}` does not parse with the CLI:\n{e}", inv.argv.join(" "));
        }
    }
    found
}

#[test]
fn the_shell_splitter_finds_each_command() {
    let script = "set -e\nFOO=$(cargo xtask engine args --config 'configs/a b.toml') # note\n\
                  cargo run -p xtask --no-default-features -- adr check --base \"${{ github.sha }}\" > out.txt 2>&1 && echo ok\n\
                  cargo xtask bench \\\n  --profile vllm | tee log; cargo build";
    let cmds = commands(script);
    assert!(
        cmds.contains(&vec![
            "cargo".to_string(),
            "xtask".into(),
            "engine".into(),
            "args".into(),
            "--config".into(),
            "configs/a b.toml".into()
        ]),
        "{cmds:?}"
    );
    let inv = invocations(script);
    let got: Vec<(String, bool)> =
        inv.iter().map(|i| (i.argv.join(" "), i.no_default_features)).collect();
    assert_eq!(
        got,
        vec![
            ("cargo xtask engine args --config configs/a b.toml".to_string(), false),
            ("cargo xtask adr check --base EXPR".to_string(), true),
            ("cargo xtask bench --profile vllm".to_string(), false),
        ]
    );
    // A command that does not exist is caught.
    assert!(xtask::Cli::try_parse_from(["cargo xtask", "adr", "chek", "--base", "x"]).is_err());
    assert!(xtask::Cli::try_parse_from(["cargo xtask", "adr", "check"]).is_err());
}

#[test]
fn ci_runs_fmt_clippy_tests_and_adr_check_on_pull_requests_and_the_merge_queue() {
    let doc = load("ci.yml");
    let on = key(&doc, "on").as_hash().expect("`on` is a map");
    let events: Vec<&str> = on.keys().filter_map(Yaml::as_str).collect();
    assert!(events.contains(&"pull_request") && events.contains(&"merge_group"), "{events:?}");

    for (job, step) in steps(&doc) {
        if step["uses"].as_str().is_some_and(|u| u.starts_with("actions/checkout@")) {
            assert_eq!(
                step["with"]["fetch-depth"].as_i64(),
                Some(0),
                "{job}: checkout needs fetch-depth: 0"
            );
        }
    }
    let all = scripts(&doc).join("\n");
    for needed in ["cargo fmt --all -- --check", "cargo clippy", "-D warnings", "bash .ci/run"] {
        assert!(all.contains(needed), "ci.yml does not run `{needed}`");
    }
    let found = assert_commands_parse("ci.yml", &all);
    let check = found
        .iter()
        .find(|i| i.argv.get(1..3) == Some(&["adr".to_string(), "check".to_string()]))
        .expect("ci.yml runs adr check");
    assert!(check.no_default_features, "adr check runs without the async runtime: {check:?}");
    // The base is the pull request's base, or the merge group's.
    let run = steps(&doc)
        .into_iter()
        .find(|(_, s)| s["run"].as_str().is_some_and(|r| r.contains("adr check")))
        .unwrap()
        .1;
    let base = run["env"]["BASE_SHA"].as_str().expect("BASE_SHA");
    assert!(base.contains("github.event.pull_request.base.sha"), "{base}");
    assert!(base.contains("github.event.merge_group.base_sha"), "{base}");
    assert!(run["run"].as_str().unwrap().contains("--base \"$BASE_SHA\""));
}

#[test]
fn the_bench_gate_is_manual_on_a_gpu_runner_and_keeps_the_run() {
    let doc = load("bench-gate.yml");
    let on = key(&doc, "on").as_hash().expect("`on` is a map");
    let events: Vec<&str> = on.keys().filter_map(Yaml::as_str).collect();
    assert_eq!(events, vec!["workflow_dispatch", "pull_request"]);
    let job = &doc["jobs"]["bench-gate"];
    let labels: Vec<&str> =
        job["runs-on"].as_vec().expect("runs-on labels").iter().filter_map(Yaml::as_str).collect();
    assert!(labels.contains(&"self-hosted") && labels.contains(&"gpu"), "{labels:?}");
    let all = scripts(&doc).join("\n");
    let found = assert_commands_parse("bench-gate.yml", &all);
    let lines: Vec<String> = found.iter().map(|i| i.argv[1..].join(" ")).collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("engine args --engine vllm --engine-config configs/engine.toml")),
        "{lines:?}"
    );
    assert!(lines.iter().any(|l| l.starts_with("bench ") && l.contains("--gate")), "{lines:?}");
    let upload = steps(&doc)
        .into_iter()
        .find(|(_, s)| {
            s["uses"].as_str().is_some_and(|u| u.starts_with("actions/upload-artifact@"))
        })
        .expect("the run directory is uploaded")
        .1;
    assert!(upload["with"]["path"].as_str().unwrap().contains("env.RUN_DIR"));
    assert_eq!(upload["if"].as_str(), Some("always()"));
}

/// Each push to main appends a measured set to the history and checks the change points along
/// main (docs/statistics.md).
#[test]
fn main_appends_to_the_history_and_checks_its_change_points() {
    let doc = load("history.yml");
    let branches: Vec<&str> = doc["on"]["push"]["branches"]
        .as_vec()
        .expect("pushes to named branches")
        .iter()
        .filter_map(Yaml::as_str)
        .collect();
    assert_eq!(branches, vec!["main"]);
    let found = assert_commands_parse("history.yml", &scripts(&doc).join("\n"));
    let lines: Vec<String> = found.iter().map(|i| i.argv[1..].join(" ")).collect();
    assert!(lines.iter().any(|l| l.starts_with("bench ") && l.contains("--history")), "{lines:?}");
    assert!(
        lines.iter().any(|l| l.starts_with("trend ")
            && l.contains("--fail-on-regression")
            && l.contains("--github")),
        "{lines:?}"
    );
    assert!(lines.iter().any(|l| l.starts_with("trend merge ")), "{lines:?}");
}

#[test]
fn ci_run_calls_an_existing_command() {
    let script = std::fs::read_to_string(repo_root().join(".ci/run")).unwrap();
    let found = assert_commands_parse(".ci/run", &script);
    assert!(found.iter().any(|i| i.argv[1..] == ["test".to_string()]), "{found:?}");
}

#[test]
fn every_workflow_parses() {
    let dir = repo_root().join(".github/workflows");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".yml") || name.ends_with(".yaml") {
            let doc = load(&name);
            assert!(doc["jobs"].as_hash().is_some_and(|j| !j.is_empty()), "{name}: no jobs");
            assert_commands_parse(&name, &scripts(&doc).join("\n"));
            n += 1;
        }
    }
    assert!(n >= 2, "{n} workflows");
}

/// Every job that runs cargo restores cargo's registry and target from a cache step (keyed on
/// `Cargo.lock` by Swatinem/rust-cache) before its first cargo command, so a warm pull request
/// check rebuilds only the workspace's crates.
#[test]
fn every_job_that_builds_caches_cargo_first() {
    for name in ["ci.yml", "bench-gate.yml", "history.yml"] {
        let doc = load(name);
        for (job, body) in doc["jobs"].as_hash().unwrap() {
            let steps = body["steps"].as_vec().unwrap();
            let first_cargo =
                steps.iter().position(|s| s["run"].as_str().is_some_and(|r| r.contains("cargo ")));
            let Some(first_cargo) = first_cargo else { continue };
            let cache = steps.iter().position(|s| {
                s["uses"].as_str().is_some_and(|u| u.starts_with("Swatinem/rust-cache@"))
            });
            let job = job.as_str().unwrap();
            let cache = cache.unwrap_or_else(|| panic!("{name}: job {job} has no cache step"));
            assert!(cache < first_cargo, "{name}: job {job} caches after it builds");
            assert_eq!(steps[cache]["name"].as_str(), Some("cache cargo"), "{name}: {job}");
        }
    }
}

/// A pushed `v*` tag builds `infergate` and `cargo-infergate` with `--locked --release` for Linux on x86_64 and aarch64,
/// each on a runner of its architecture, and publishes the archives with their SHA-256 sums.
#[test]
fn a_tag_releases_the_binary_for_both_linux_targets_with_checksums() {
    let doc = load("release.yml");
    let tags: Vec<&str> = doc["on"]["push"]["tags"]
        .as_vec()
        .expect("on.push.tags")
        .iter()
        .filter_map(Yaml::as_str)
        .collect();
    assert_eq!(tags, vec!["v*"]);
    let build = &doc["jobs"]["build"];
    let targets: Vec<(&str, &str)> = build["strategy"]["matrix"]["include"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|m| (m["target"].as_str().unwrap(), m["runner"].as_str().unwrap()))
        .collect();
    assert_eq!(
        targets,
        vec![
            ("x86_64-unknown-linux-gnu", "ubuntu-24.04"),
            ("aarch64-unknown-linux-gnu", "ubuntu-24.04-arm")
        ]
    );
    let all = scripts(&doc).join("\n");
    let cargo: Vec<ShellCommand> =
        commands(&all).into_iter().filter(|c| c.first().is_some_and(|w| w == "cargo")).collect();
    assert_eq!(cargo.len(), 1, "{cargo:?}");
    for flag in ["build", "--locked", "--release", "-p", "xtask", "--all-features", "--target"] {
        assert!(cargo[0].iter().any(|w| w == flag), "{flag} in {:?}", cargo[0]);
    }
    for bin in ["infergate", "cargo-infergate"] {
        assert!(
            cargo[0].windows(2).any(|w| w[0] == "--bin" && w[1] == bin),
            "{bin} in {:?}",
            cargo[0]
        );
        assert!(all.contains(&format!("release/{bin}\"")), "{bin} packed: {all}");
    }
    // The archive name the Action's install script downloads.
    assert!(all.contains("NAME=\"infergate-${GITHUB_REF_NAME}-${{ matrix.target }}\""), "{all}");
    assert!(all.contains("sha256sum -- *.tar.gz > SHA256SUMS"), "{all}");
    assert!(all.contains("gh release create"), "{all}");
    assert_eq!(doc["jobs"]["release"]["needs"].as_str(), Some("build"));
    assert_eq!(doc["jobs"]["release"]["permissions"]["contents"].as_str(), Some("write"));
}
