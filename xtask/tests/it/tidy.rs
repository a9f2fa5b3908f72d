//! Code-shape policy, checked on every `cargo test`: the crates are the layers and their
//! arrows point down (Cargo refuses a circle between packages; these tests hold which arrows
//! there are, and that the pull request's build reaches no runtime), no long functions in the
//! run pipeline and the threshold modules (read from the sources as text), and one way to start
//! an HTTP client.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::support::repo_root;

/// Longest function body allowed in the modules the run pipeline and the thresholds live in.
const MAX_FN_LINES: usize = 120;

/// Files (relative to the repository root; a trailing `/` takes a whole folder) whose functions
/// are held to [`MAX_FN_LINES`].
const SHORT_FUNCTIONS: &[&str] = &[
    "bench/src/runner",
    "model/src/ab/",
    "xtask/src/measure/ab/",
    "policy/src/ab/",
    "bench/src/accept/",
    "bench/src/sweep.rs",
    "bench/src/capacity.rs",
    "model/src/sweep.rs",
    "model/src/strategy_compare.rs",
    "bench/src/client/",
    "model/src/workload.rs",
    "sim/src/server/",
    "sim/src/engine/spec.rs",
    "policy/src/thresholds",
    "xtask/src/gate.rs",
    "xtask/src/measure/actions.rs",
    "policy/src/adr/",
    "xtask/src/adr/",
    "xtask/src/measure/bench.rs",
    "xtask/src/measure/sweep.rs",
    "xtask/src/measure/capacity.rs",
    "xtask/src/measure/strategies.rs",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// Source text with comments, string and char literals blanked out (line structure kept), so
/// braces and paths inside them are not read as code.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i] as char;
        if text[i..].starts_with("//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if text[i..].starts_with("/*") {
            let end = text[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
            out.extend(text[i..end].chars().filter(|&c| c == '\n'));
            i = end;
        } else if c == 'r' && (text[i..].starts_with("r\"") || text[i..].starts_with("r#")) {
            let hashes = text[i + 1..].chars().take_while(|&c| c == '#').count();
            if text[i + 1 + hashes..].starts_with('"') {
                let close = format!("\"{}", "#".repeat(hashes));
                let start = i + 2 + hashes;
                let end = text[start..].find(&close).map_or(b.len(), |e| start + e + close.len());
                out.push_str("\"\"");
                out.extend(text[i..end].chars().filter(|&c| c == '\n'));
                i = end;
            } else {
                out.push(c);
                i += 1;
            }
        } else if c == '"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            out.extend(text[i..j.min(b.len())].chars().filter(|&c| c == '\n'));
            i = j + 1;
        } else if c == '\''
            && (text[i..].starts_with("'\\") || text[i + 1..].chars().nth(1) == Some('\''))
        {
            // A char literal ('x', '\n', '\u{..}'), not a lifetime.
            let end = text[i + 1..].find('\'').map_or(b.len(), |e| i + 1 + e + 1);
            let end = if text[i..].starts_with("'\\''") { i + 4 } else { end };
            out.push_str("' '");
            i = end;
        } else {
            let ch = text[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// A cargo command's standard output, run offline on the lock file (what the build would resolve).
fn cargo(args: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args(args)
        .args(["--offline", "--locked"])
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert!(out.status.success(), "cargo {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The crates are the layers, and Cargo keeps their arrows pointing one way (it refuses a
/// circle between packages): the data model depends on no other crate of the workspace, the
/// simulator on the model, the measuring runtime on both, the policy on the model alone, the
/// CLI on all four. Each crate's
/// dependencies on the others are exactly these, so an arrow added upward or across is seen.
#[test]
fn the_layers_are_crates_whose_arrows_point_down() {
    let meta: serde_json::Value =
        serde_json::from_str(&cargo(&["metadata", "--format-version", "1", "--no-deps"])).unwrap();
    let mut layers = BTreeMap::new();
    for pkg in meta["packages"].as_array().unwrap() {
        let name = pkg["name"].as_str().unwrap();
        let on: BTreeSet<&str> = pkg["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"].is_null() && d["path"].is_string())
            .map(|d| d["name"].as_str().unwrap())
            .collect();
        layers.insert(name, on);
    }
    let set = |v: &[&'static str]| v.iter().copied().collect::<BTreeSet<&str>>();
    let want = BTreeMap::from([
        ("infergate-model", set(&[])),
        ("infergate-sim", set(&["infergate-model"])),
        ("infergate-bench", set(&["infergate-model", "infergate-sim"])),
        ("infergate-bench-tests", set(&["infergate-bench", "infergate-model", "infergate-sim"])),
        ("infergate-policy", set(&["infergate-model"])),
        (
            "xtask",
            set(&["infergate-bench", "infergate-model", "infergate-policy", "infergate-sim"]),
        ),
    ]);
    assert_eq!(layers, want);
}

/// The pull request's check (`adr check`, `adr thresholds`, `gate`: `cargo build -p xtask
/// --no-default-features`) builds on the data model alone: no async runtime, no HTTP stack, no
/// simulator, no client. Neither do the model and policy crates themselves, in any build, and
/// the policy crate has no CLI parser either.
#[test]
fn the_pr_check_build_compiles_the_model_and_no_runtime() {
    let crates = |args: &[&str]| -> BTreeSet<String> {
        let mut all = vec!["tree", "-e", "normal", "--prefix", "none", "--format", "{p}"];
        all.extend_from_slice(args);
        cargo(&all).lines().filter_map(|l| l.split_whitespace().next()).map(String::from).collect()
    };
    let runtime = ["tokio", "reqwest", "axum", "hyper", "infergate-sim", "infergate-bench"];
    for build in [
        vec!["-p", "xtask", "--no-default-features"],
        vec!["-p", "infergate-model", "--all-features"],
        vec!["-p", "infergate-policy", "--all-features"],
    ] {
        let got = crates(&build);
        assert!(got.contains("infergate-model") && got.contains("serde"), "{build:?}: {got:?}");
        let found: Vec<_> = runtime.iter().filter(|c| got.contains(**c)).collect();
        assert!(found.is_empty(), "{build:?} compiles {found:?}");
    }
    let policy = crates(&["-p", "infergate-policy"]);
    assert!(!policy.contains("clap") && !policy.contains("git2"), "{policy:?}");
    assert!(crates(&["-p", "xtask", "--no-default-features"]).contains("infergate-policy"));
    // The check sees what it looks for: the default build has all of them.
    let full = crates(&["-p", "xtask"]);
    assert!(runtime.iter().all(|c| full.contains(*c)), "{full:?}");
}

/// Functions of `code` longer than `max` lines: (name, first line, lines).
fn long_functions(code: &str, max: usize) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]") {
            break; // unit tests sit at the end of a file
        }
        let Some(at) = t.find("fn ") else { continue };
        let head = &t[..at];
        let qualifiers = ["pub", "pub(crate)", "pub(super)", "async", "const", "unsafe", "extern"];
        if !head.split_whitespace().all(|w| qualifiers.contains(&w)) {
            continue;
        }
        let name: String =
            t[at + 3..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        // The body: from the first `{` after the signature to its matching `}`.
        let (mut depth, mut opened) = (0i64, false);
        for (j, l) in lines.iter().enumerate().skip(i) {
            if !opened && j > i && l.trim_end().ends_with(';') && !l.contains('{') && depth == 0 {
                break; // a declaration without a body (trait method)
            }
            for ch in l.chars() {
                match ch {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if opened && depth <= 0 {
                let n = j - i + 1;
                if n > max {
                    out.push((name.clone(), i + 1, n));
                }
                break;
            }
            if !opened && l.trim_end().ends_with(';') {
                break;
            }
        }
    }
    out
}

#[test]
fn no_long_functions_in_the_pipeline_and_threshold_modules() {
    let root = repo_root();
    let mut files = Vec::new();
    for krate in ["model", "sim", "bench", "policy", "xtask"] {
        rust_files(&root.join(krate).join("src"), &mut files);
    }
    let mut long = Vec::new();
    let mut checked = 0;
    for f in &files {
        let rel = f.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
        if !SHORT_FUNCTIONS.iter().any(|p| rel.starts_with(p)) || rel.ends_with("tests.rs") {
            continue;
        }
        checked += 1;
        let code = code_only(&std::fs::read_to_string(f).unwrap());
        for (name, line, n) in long_functions(&code, MAX_FN_LINES) {
            long.push(format!("{rel}:{line}: fn {name} has {n} lines"));
        }
    }
    assert!(checked >= 10, "only {checked} files matched the policy's paths");
    // A path that matches no file (a module moved) would drop out of the policy unseen.
    let stale: Vec<&&str> = SHORT_FUNCTIONS
        .iter()
        .filter(|p| {
            !files.iter().any(|f| {
                f.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/").starts_with(**p)
            })
        })
        .collect();
    assert!(stale.is_empty(), "SHORT_FUNCTIONS names paths with no source file: {stale:?}");
    assert!(long.is_empty(), "functions over {MAX_FN_LINES} lines:\n{}", long.join("\n"));
}

#[test]
fn the_length_check_counts_bodies() {
    let body = |n: usize| (0..n).map(|i| format!("    let x{i} = 1;\n")).collect::<String>();
    let code = format!(
        "pub async fn long(a: u32)\n    -> u32\n{{\n{}}}\nfn short() {{ {{ }} }}\ntrait T {{\n    fn decl(&self);\n}}\nfn also_long() {{\n{}}}\n#[cfg(test)]\nmod tests {{ fn t() {{\n{}}} }}\n",
        body(10),
        body(4),
        body(50)
    );
    let found = long_functions(&code_only(&code), 5);
    assert_eq!(found, vec![("long".to_string(), 1, 14), ("also_long".to_string(), 19, 6)]);
    let braces_in_text = "fn f() {\n    let s = \"}}}\";\n    let c = '}';\n    g();\n}\n";
    assert_eq!(long_functions(&code_only(braces_in_text), 3), vec![("f".to_string(), 1, 5)]);
}

/// reqwest is built without a crypto provider of its own (rustls with `ring` is installed by
/// `bench::client::http_builder`), and panics on an HTTPS-capable client built any other way:
/// so no code outside that function starts a client itself.
#[test]
fn every_http_client_starts_from_http_builder() {
    let root = crate::support::repo_root();
    let mut files = Vec::new();
    for dir in [
        "model/src",
        "sim/src",
        "sim/benches",
        "bench/src",
        "bench/tests",
        "bench/benches",
        "xtask/src",
        "xtask/tests",
    ] {
        rust_files(&root.join(dir), &mut files);
    }
    let mut found = Vec::new();
    for f in &files {
        let code = code_only(&std::fs::read_to_string(f).unwrap());
        for (i, line) in code.lines().enumerate() {
            let starts = ["reqwest::Client::builder(", "reqwest::Client::new(", "reqwest::get("];
            if starts.iter().any(|s| line.contains(s)) {
                let rel = f.strip_prefix(&root).unwrap().display().to_string();
                let inside =
                    rel == "bench/src/client/mod.rs" && line.trim() == "reqwest::Client::builder()";
                if !inside {
                    found.push(format!("{rel}:{}: {}", i + 1, line.trim()));
                }
            }
        }
    }
    assert!(found.is_empty(), "use bench::client::http_builder():\n{}", found.join("\n"));
}

/// The command modules of `xtask`: its subcommands. They never import each other, nor the crate
/// root's items (`lib.rs`); what two of them share sits in a module below both.
const COMMANDS: &[&str] = &[
    "ab",
    "accept",
    "adr",
    "bench",
    "capacity",
    "compare",
    "dataset",
    "deploy",
    "engine",
    "gate",
    "history",
    "import",
    "init",
    "mcp",
    "merge",
    "noise",
    "report",
    "selftest",
    "serve",
    "sim",
    "strategies",
    "sweep",
    "test_cmd",
    "trials",
    "tune",
    "watch",
];

/// The shared modules below the commands (some of them re-exports of `infergate_policy`'s).
const SHARED: &[&str] = &[
    "adr_check",
    "chart",
    "console",
    "decide_flags",
    "engine_flags",
    "engine_process",
    "exit",
    "git",
    "gitinfo",
    "history_store",
    "measure",
    "model",
    "outpath",
    "plan",
    "run_report",
    "settings",
    "template",
    "text",
    "thresholds",
];

/// The module path of a source file under a crate's `src/` (`a/b.rs` and `a/b/mod.rs`:
/// `[a, b]`; `lib.rs`: `[]`), or `None` for a binary's root (`main.rs`, `bin/`), a crate of its
/// own, and for test-only files (`tests.rs`, `*_tests.rs`), as the unit tests inside a file are
/// left out.
fn module_of(rel: &str) -> Option<Vec<String>> {
    let rel = rel.strip_suffix(".rs")?;
    let name = rel.rsplit('/').next().unwrap_or(rel);
    if rel == "main" || rel.starts_with("bin/") || name == "tests" || name.ends_with("_tests") {
        return None;
    }
    let mut parts: Vec<String> = rel.split('/').map(String::from).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    Some(parts)
}

fn ident_at(s: &str) -> String {
    s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
}

/// The first segments of the paths inside a `{...}` group that starts at `s` (after the `{`):
/// `a, b::c, d::{e, f}` gives `a`, `b` and `d`.
fn group_heads(s: &str) -> Vec<String> {
    let (mut depth, mut item, mut heads) = (0usize, String::new(), Vec::new());
    for ch in s.chars() {
        match ch {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                heads.push(ident_at(item.trim()));
                item.clear();
                continue;
            }
            _ => {}
        }
        if depth == 0 || ch != '{' {
            item.push(ch);
        }
    }
    heads.push(ident_at(item.trim()));
    heads.into_iter().filter(|h| !h.is_empty() && h != "self").collect()
}

/// Code with its unit tests (`#[cfg(test)] mod ... { ... }`) left out: a test may parse the
/// whole command line (`crate::Cli`) to check a command's flags.
fn without_unit_tests(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut lines = code.lines().peekable();
    while let Some(line) = lines.next() {
        let opens_tests = line.trim() == "#[cfg(test)]"
            && lines.peek().is_some_and(|n| n.trim_start().starts_with("mod ") && n.contains('{'));
        if !opens_tests {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let mut depth = 0i64;
        for l in lines.by_ref() {
            depth += l.matches('{').count() as i64 - l.matches('}').count() as i64;
            out.push('\n');
            if depth <= 0 {
                break;
            }
        }
        out.push('\n');
    }
    out
}

/// The top-level modules (or root items) that the code of the file at `module` names, its unit
/// tests left out: through `crate::a`, `crate::{a, b}` and `super::` chains that climb to the
/// crate root. Inline modules (`mod inner { ... }`) add their level to the `super::` count.
fn top_level_refs(module: &[String], text: &str) -> BTreeSet<String> {
    let code = without_unit_tests(&code_only(text));
    let mut out = BTreeSet::new();
    // The nesting of inline modules: the brace depth each was opened at.
    let (mut depth, mut inline): (usize, Vec<usize>) = (0, Vec::new());
    let b = code.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let rest = &code[i..];
        let boundary =
            i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_' || b[i - 1] == b'$');
        if b[i] == b'{' {
            depth += 1;
        } else if b[i] == b'}' {
            depth = depth.saturating_sub(1);
            if inline.last() == Some(&depth) {
                inline.pop();
            }
        } else if boundary && rest.starts_with("mod ") {
            let name = ident_at(&rest[4..]);
            let after = rest[4 + name.len()..].trim_start();
            if after.starts_with('{') {
                inline.push(depth);
            }
        } else if boundary && rest.starts_with("crate::") {
            let after = &rest["crate::".len()..];
            if let Some(group) = after.strip_prefix('{') {
                out.extend(group_heads(group));
            } else {
                out.insert(ident_at(after));
            }
        } else if boundary && rest.starts_with("super::") {
            let mut ups = 0;
            let mut after = rest;
            while let Some(a) = after.strip_prefix("super::") {
                ups += 1;
                after = a;
            }
            // `super` from an inline module's code climbs out of the inline modules first.
            let level = module.len() + inline.len();
            if ups >= level && ups > 0 {
                if let Some(group) = after.strip_prefix('{') {
                    out.extend(group_heads(group));
                } else {
                    out.insert(ident_at(after));
                }
            }
            i += rest.len() - after.len();
            continue;
        }
        i += rest.chars().next().map_or(1, char::len_utf8);
    }
    out.retain(|m| !m.is_empty() && module.first() != Some(m));
    out
}

/// The imports that break "commands do not import each other", one line each: a command
/// module's file that names another command, or a crate root item that is not a shared module.
/// `files` are (path under `xtask/src/`, text) pairs.
fn command_violations(files: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (rel, text) in files {
        let Some(module) = module_of(rel) else { continue };
        let Some(own) = module.first().filter(|m| COMMANDS.contains(&m.as_str())) else {
            continue;
        };
        for r in top_level_refs(&module, text) {
            if COMMANDS.contains(&r.as_str()) {
                out.push(format!("{rel}: command `{own}` imports command `{r}`"));
            } else if !SHARED.contains(&r.as_str()) {
                out.push(format!(
                    "{rel}: command `{own}` imports `crate::{r}` from the crate root"
                ));
            }
        }
    }
    out
}

/// The sources of a crate: (path under its `src/`, text) pairs.
fn crate_sources(dir: &str) -> Vec<(String, String)> {
    let src = repo_root().join(dir);
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files
        .iter()
        .map(|f| {
            let rel = f.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
            (rel, std::fs::read_to_string(f).unwrap())
        })
        .collect()
}

#[test]
fn commands_do_not_import_each_other() {
    let files = crate_sources("xtask/src");
    assert!(files.len() > 50, "only {} files under xtask/src", files.len());
    let found = command_violations(&files);
    assert!(
        found.is_empty(),
        "commands importing other commands or the crate root:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_command_check_sees_a_command_importing_another() {
    let file = |rel: &str, text: &str| (rel.to_string(), text.to_string());
    let files = [
        file("gate.rs", "use crate::text::num;\nuse crate::{exit, bench::BenchCmd};\n"),
        file("adr/mod.rs", "pub mod new;\nfn f() { crate::tune::grid::parse(); }\n"),
        file("adr/new.rs", "use super::super::history::store;\nuse super::check;\n"),
        file(
            "noise.rs",
            "// crate::ab in a comment\nconst S: &str = \"crate::ab\";\nfn f() { crate::project_root(); }\n",
        ),
        file("text.rs", "use crate::adr;\n"),
        file("adr/check/mod.rs", "mod inner {\n    use super::super::super::exit;\n}\n"),
        file(
            "trials.rs",
            "#[cfg(test)]\nmod tests {\n    use crate::Cli;\n}\nuse crate::history;\n",
        ),
    ];
    assert_eq!(
        command_violations(&files),
        [
            "gate.rs: command `gate` imports command `bench`",
            "adr/mod.rs: command `adr` imports command `tune`",
            "adr/new.rs: command `adr` imports command `history`",
            "noise.rs: command `noise` imports `crate::project_root` from the crate root",
            "trials.rs: command `trials` imports command `history`",
        ]
    );
}

/// A circle in a graph of modules, as `a -> b -> a`, or `None`.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<String> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<String> {
        if let Some(at) = path.iter().position(|p| p == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle.join(" -> "));
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

/// Each top-level module of a crate and the top-level modules its files name (`crate::` paths
/// and `super::` chains to the root); the crate root itself (`lib.rs`) is not a node.
fn module_graph(files: &[(String, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (rel, text) in files {
        let Some(module) = module_of(rel) else { continue };
        let Some(top) = module.first() else { continue };
        graph.entry(top.clone()).or_default().extend(top_level_refs(&module, text));
    }
    graph
}

#[test]
fn no_crate_has_a_circle_of_modules() {
    let mut circles = Vec::new();
    for dir in ["model/src", "sim/src", "bench/src", "policy/src", "xtask/src"] {
        let graph = module_graph(&crate_sources(dir));
        assert!(graph.len() > 5, "{dir}: only {} modules", graph.len());
        if let Some(c) = find_cycle(&graph) {
            circles.push(format!("{dir}: {c}"));
        }
    }
    assert!(circles.is_empty(), "import circles between modules:\n{}", circles.join("\n"));
}

#[test]
fn the_circle_check_sees_a_circle() {
    let file = |rel: &str, text: &str| (rel.to_string(), text.to_string());
    let files = [
        file("lib.rs", "pub mod artifact;\npub mod rundir;\npub mod summary;\n"),
        file("artifact.rs", "use crate::summary::Summary;\n"),
        file("rundir.rs", "use crate::{artifact::Artifact, stats};\n"),
        file("summary/mod.rs", "pub mod view;\n"),
        file("summary/view.rs", "fn f() { super::super::rundir::open(); }\n"),
        file("stats.rs", "// crate::artifact\n"),
    ];
    let graph = module_graph(&files);
    assert_eq!(find_cycle(&graph).as_deref(), Some("artifact -> summary -> rundir -> artifact"));
    let without = &files[..4];
    assert_eq!(find_cycle(&module_graph(without)), None);
}

/// Where a metric path or a configuration key may be split on its dots or taken as text: their
/// parsers (`MetricPath`, `ConfigKey`), and the few strings that only look like one, each with
/// why. Everywhere else a metric is a `MetricPath` and a key a `ConfigKey`, resolved once.
const KEY_TEXT_ALLOWED: &[(&str, &str)] = &[
    ("model/src/metric.rs", "MetricPath's parser"),
    ("model/src/config/key.rs", "ConfigKey's parser"),
    (
        "policy/src/adr/parse/values.rs",
        "the decision record's parser: a cell's text read into a MetricPath or a ConfigKey",
    ),
    ("model/src/foreign/aiperf.rs", "a schema version (`1.2`), not a key"),
    ("model/src/promtext.rs", "a Prometheus label's name"),
    ("model/src/sources/yaml.rs", "one key of a YAML mapping in a deployment file"),
];

/// The places in `files` ((path from the repository root, text) pairs) that take a metric or
/// a configuration key apart as text: a `split('.')`/`rsplit('.')`/`splitn(.., '.')` call, or
/// a public function with a `metric`/`key` parameter (`*_metric`, `*_key`, plural) typed
/// `&str`, `String` or a list of them. Files of [`KEY_TEXT_ALLOWED`] are left out.
fn key_text_violations(files: &[(String, String)]) -> Vec<String> {
    const TEXT_TYPES: &[&str] =
        &["&str", "String", "&String", "&[String]", "&[&str]", "Vec<String>", "Vec<&str>"];
    let named = |n: &str| {
        let n = n.trim_start_matches("mut ").trim();
        ["metric", "key", "metrics", "keys"]
            .iter()
            .any(|w| n == *w || n.ends_with(&format!("_{w}")))
    };
    let mut out = Vec::new();
    for (path, text) in files {
        if KEY_TEXT_ALLOWED.iter().any(|(p, _)| p == path) {
            continue;
        }
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for call in ["split('.')", "rsplit('.')", ", '.')"] {
                if code.contains(call) && (call != ", '.')" || code.contains("splitn(")) {
                    out.push(format!("{path}:{}: {}", i + 1, line.trim()));
                }
            }
        }
        let mut rest = text.as_str();
        while let Some(at) = rest.find("pub ").or_else(|| rest.find("pub(crate) ")) {
            rest = &rest[at..];
            let head = rest.split('{').next().unwrap_or("");
            let line = text.len() - rest.len();
            let line = text[..line].lines().count() + 1;
            rest = &rest[4..];
            let Some(sig) = head.split_once(" fn ").map(|(_, s)| s) else { continue };
            let Some((_, params)) = sig.split_once('(') else { continue };
            let params = params.rsplit_once(')').map_or(params, |(p, _)| p);
            for p in params.split(',') {
                let Some((name, ty)) = p.split_once(':') else { continue };
                if named(name) && TEXT_TYPES.contains(&ty.trim()) {
                    let f = sig.split('(').next().unwrap_or("").trim();
                    out.push(format!("{path}:{line}: fn {f}({}: {})", name.trim(), ty.trim()));
                }
            }
        }
    }
    out
}

#[test]
fn metrics_and_config_keys_are_typed_outside_their_parsers() {
    let mut files = Vec::new();
    for krate in ["model", "sim", "bench", "policy", "xtask"] {
        let dir = format!("{krate}/src");
        files.extend(crate_sources(&dir).into_iter().map(|(rel, t)| (format!("{dir}/{rel}"), t)));
    }
    assert!(files.len() > 200, "only {} source files", files.len());
    for (p, _) in KEY_TEXT_ALLOWED {
        assert!(files.iter().any(|(f, _)| f == p), "{p} is allowed but no longer exists");
    }
    let found = key_text_violations(&files);
    assert!(found.is_empty(), "metric paths or config keys taken as text:\n{}", found.join("\n"));
}

#[test]
fn the_key_text_check_sees_a_split_key_and_a_key_taken_as_a_string() {
    let file = |rel: &str, text: &str| (rel.to_string(), text.to_string());
    let files = [
        file("policy/src/a.rs", "fn f(k: &ConfigKey) {\n    let s = k.as_str().split('.');\n}\n"),
        file("policy/src/b.rs", "pub fn value(run: &Summary, metric: &str) -> f64 { 0.0 }\n"),
        file(
            "policy/src/c.rs",
            "pub(crate) fn set(\n    table: &mut Table,\n    dotted_key: String,\n) {}\n",
        ),
        file("policy/src/d.rs", "pub fn value(run: &Summary, metric: MetricPath) -> f64 { 0.0 }\n"),
        file("model/src/metric.rs", "pub fn parse(metric: &str) { metric.split('.'); }\n"),
        file("policy/src/e.rs", "// a comment may say split('.')\nfn g(name: &str) {}\n"),
    ];
    assert_eq!(
        key_text_violations(&files),
        [
            "policy/src/a.rs:2: let s = k.as_str().split('.');",
            "policy/src/b.rs:1: fn value(metric: &str)",
            "policy/src/c.rs:1: fn set(dotted_key: String)",
        ]
    );
}
