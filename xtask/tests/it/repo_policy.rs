//! Repository policy, enforced by `cargo test`: this repository's own records pass `adr lint`,
//! `thresholds/gate.toml` is what `adr thresholds` would write, the records README documents
//! every metric name, docs/exit-codes.md lists exactly the exit codes of `xtask::exit`,
//! ARCHITECTURE.md's code map names every source file, and relative links in the markdown
//! files lead to a file and heading that exist.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::support::{repo_root, xtask};

#[test]
fn the_records_pass_adr_lint() {
    let out = xtask(&repo_root(), &["adr", "lint"]);
    assert_eq!(out.code, 0, "cargo xtask adr lint:\n{}{}", out.stdout, out.stderr);
}

#[test]
fn thresholds_gate_toml_is_up_to_date() {
    let out = xtask(&repo_root(), &["adr", "thresholds", "--check"]);
    assert_eq!(out.code, 0, "cargo xtask adr thresholds --check:\n{}{}", out.stdout, out.stderr);
}

/// The committed alerting rules (deploy/prometheus, deploy/k8s) are what `adr alerts` writes
/// from the records, like gate.toml.
#[test]
fn the_alerting_rules_are_up_to_date() {
    let out = xtask(&repo_root(), &["adr", "alerts", "--check"]);
    assert_eq!(out.code, 0, "cargo xtask adr alerts --check:\n{}{}", out.stdout, out.stderr);
}

#[test]
fn the_records_readme_documents_every_metric() {
    let readme = std::fs::read_to_string(repo_root().join("docs/adr/README.md")).unwrap();
    // The metric table's rows: | `name` (what) | unit | better |
    let rows: Vec<Vec<&str>> = readme
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect::<Vec<_>>())
        .filter(|cells| cells.len() == 3)
        .collect();
    for m in infergate_model::summary::known_metrics() {
        let parts: Vec<&str> = m.path.split('.').collect();
        let name = match parts.as_slice() {
            ["metrics", family, stat] if family.ends_with("_ms") => {
                assert!(
                    readme.contains(&format!("`{stat}`")),
                    "statistic {stat} is not documented"
                );
                format!("`metrics.{family}.<stat>`")
            }
            ["plateau", "metrics", family, _] if family.ends_with("_ms") => {
                "`plateau.metrics.<latency>.<stat>`".to_string()
            }
            _ => format!("`{}`", m.path),
        };
        let row = rows.iter().find(|r| r[0].starts_with(&name));
        let row =
            row.unwrap_or_else(|| panic!("docs/adr/README.md does not document metric {}", m.path));
        assert_eq!(row[1], m.unit, "docs/adr/README.md gives the wrong unit for {}", m.path);
        let better = match m.better {
            infergate_model::summary::Better::Lower => "lower",
            infergate_model::summary::Better::Higher => "higher",
        };
        assert_eq!(row[2], better, "docs/adr/README.md gives the wrong direction for {}", m.path);
    }
}

#[test]
fn the_xtask_settings_parse() {
    let path = repo_root().join(xtask::settings::SETTINGS_FILE);
    let source = infergate_model::config::Source::read(&path).unwrap();
    let settings = xtask::settings::Settings::parse(&source).unwrap_or_else(|e| panic!("{e}"));
    assert!(settings.governed_patterns().contains(&xtask::settings::ALWAYS_GOVERNED.to_string()));
}

/// The rows of the first table in `text` whose first cell is a number: (code, cells).
fn numbered_rows(text: &str) -> Vec<(u8, Vec<String>)> {
    let mut rows = Vec::new();
    let mut in_table = false;
    for line in text.lines() {
        if !line.starts_with('|') {
            if in_table && !rows.is_empty() {
                break;
            }
            in_table = false;
            continue;
        }
        in_table = true;
        let cells: Vec<String> =
            line.trim().trim_matches('|').split('|').map(|c| c.trim().to_string()).collect();
        if let Ok(code) = cells[0].parse::<u8>() {
            rows.push((code, cells));
        }
    }
    rows
}

#[test]
fn docs_exit_codes_lists_exactly_the_exit_codes_of_the_code() {
    let path = repo_root().join("docs/exit-codes.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    // | code | `name` | meaning |
    let documented: BTreeSet<(u8, String)> = numbered_rows(&doc)
        .into_iter()
        .map(|(code, cells)| {
            assert_eq!(cells.len(), 3, "docs/exit-codes.md: row of code {code} needs 3 cells");
            (code, cells[1].trim_matches('`').to_string())
        })
        .collect();
    let in_code: BTreeSet<(u8, String)> =
        xtask::exit::EXIT_CODES.iter().map(|e| (e.code, e.name.to_string())).collect();
    let mut problems = Vec::new();
    for (code, name) in in_code.difference(&documented) {
        problems
            .push(format!("exit code {code} `{name}` of policy/src/exit.rs is not in the table"));
    }
    for (code, name) in documented.difference(&in_code) {
        problems.push(format!(
            "the table has exit code {code} `{name}`, which policy/src/exit.rs does not"
        ));
    }
    assert!(problems.is_empty(), "docs/exit-codes.md:\n{}", problems.join("\n"));
}

/// Markdown and Rust files of the repository (not build outputs, not hidden directories).
fn repo_files(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if !name.starts_with('.') && name != "target" {
                repo_files(&path, ext, out);
            }
        } else if name.ends_with(ext) {
            out.push(path);
        }
    }
}

#[test]
fn the_exit_code_table_is_written_once() {
    // Other pages and the code's comments link to docs/exit-codes.md instead of repeating it.
    let root = repo_root();
    let mut files = Vec::new();
    repo_files(&root, ".md", &mut files);
    repo_files(&root.join("xtask/src"), ".rs", &mut files);
    repo_files(&root.join("policy/src"), ".rs", &mut files);
    for f in files {
        if f.ends_with("docs/exit-codes.md") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        for line in text.lines() {
            let line = line.trim_start_matches("//!").trim_start_matches("///").trim();
            // Rows of a code table; 0 and 1 are too common in other tables to tell.
            let row = xtask::exit::EXIT_CODES
                .iter()
                .filter(|e| e.code >= 2)
                .find(|e| line.starts_with(&format!("| {} ", e.code)));
            assert!(
                row.is_none(),
                "{} repeats the exit-code table ({line}); link to docs/exit-codes.md instead",
                f.display()
            );
        }
    }
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces to `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.insert(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

#[test]
fn relative_links_in_markdown_resolve() {
    let root = repo_root();
    let mut files = Vec::new();
    repo_files(&root, ".md", &mut files);
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let mut fenced = false;
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
            }
            if fenced {
                continue;
            }
            for part in line.split("](").skip(1) {
                let Some(end) = part.find(')') else { continue };
                let link = &part[..end];
                if link.contains("://") || link.starts_with("mailto:") || link.contains(' ') {
                    continue;
                }
                let (target, fragment) = match link.split_once('#') {
                    Some((t, f)) => (t, Some(f)),
                    None => (link, None),
                };
                let path = if target.is_empty() {
                    file.clone()
                } else {
                    file.parent().unwrap().join(target)
                };
                let at =
                    format!("{}:{}: {link}", file.strip_prefix(&root).unwrap().display(), n + 1);
                // Records link the run directories they were written from: `runs/` is ignored
                // by git, kept where reviewers read the records, never in a checkout.
                let normalized: PathBuf = path.components().fold(PathBuf::new(), |mut p, c| {
                    match c {
                        std::path::Component::ParentDir => {
                            p.pop();
                        }
                        std::path::Component::CurDir => {}
                        c => p.push(c),
                    }
                    p
                });
                if normalized.starts_with(root.join("runs")) {
                    continue;
                }
                if !path.exists() {
                    broken.push(format!("{at} (no such file)"));
                } else if let Some(fragment) = fragment {
                    let target_text = std::fs::read_to_string(&path).unwrap_or_default();
                    if !anchors(&target_text).contains(fragment) {
                        broken.push(format!("{at} (no such heading)"));
                    }
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The `.rs` files under `src` of a crate, relative to `src`, without test-only files.
fn source_files(src: &Path) -> BTreeSet<String> {
    let mut files = Vec::new();
    repo_files(src, ".rs", &mut files);
    files
        .iter()
        .map(|f| f.strip_prefix(src).unwrap().to_string_lossy().replace('\\', "/"))
        .filter(|f| {
            let name = f.rsplit('/').next().unwrap();
            name != "tests.rs" && !name.ends_with("_tests.rs")
        })
        .collect()
}

/// The files named in the first cell of the code map's table for one crate
/// (`### \`bench/src\`` ... up to the next heading).
fn code_map(architecture: &str, src: &str) -> BTreeSet<String> {
    let heading = format!("### `{src}`");
    let start = architecture
        .lines()
        .position(|l| l.starts_with(&heading))
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no code map section `{heading}`"));
    architecture
        .lines()
        .skip(start + 1)
        .take_while(|l| !l.starts_with('#'))
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`'))
        .map(|(path, _)| path.to_string())
        .filter(|p| p.ends_with(".rs"))
        .collect()
}

#[test]
fn architecture_md_maps_every_source_file() {
    let root = repo_root();
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let mut problems = Vec::new();
    for src in ["model/src", "sim/src", "bench/src", "policy/src", "xtask/src"] {
        let on_disk = source_files(&root.join(src));
        let mapped = code_map(&architecture, src);
        for f in on_disk.difference(&mapped) {
            problems.push(format!(
                "{src}/{f} is not in the code map: add its row (file `{f}`, module, what it owns) under ### `{src}`"
            ));
        }
        for f in mapped.iter().filter(|f| !root.join(src).join(f).exists()) {
            problems.push(format!(
                "the code map names {src}/{f}, which does not exist: remove or rename its row"
            ));
        }
    }
    assert!(problems.is_empty(), "ARCHITECTURE.md:\n{}", problems.join("\n"));
}

/// docs/promises.md: every row of its tables names at least one test as `path::function`, and
/// every test it names exists (a `fn` of that name in that file).
#[test]
fn every_readme_promise_names_tests_that_exist() {
    let root = repo_root();
    let text = std::fs::read_to_string(root.join("docs/promises.md")).unwrap();
    let mut problems = Vec::new();
    let mut rows = 0;
    for (n, line) in text.lines().enumerate() {
        if !line.starts_with('|') || line.starts_with("|--") || line.starts_with("| promise") {
            continue;
        }
        rows += 1;
        let refs: Vec<&str> =
            line.split('`').skip(1).step_by(2).filter(|w| w.contains(".rs::")).collect();
        if refs.is_empty() {
            problems.push(format!("docs/promises.md:{}: a promise without a test", n + 1));
        }
        for r in refs {
            let (file, func) = r.split_once("::").unwrap();
            let source = std::fs::read_to_string(root.join(file)).unwrap_or_default();
            if !source.contains(&format!("fn {func}(")) {
                problems.push(format!("docs/promises.md:{}: no `fn {func}` in {file}", n + 1));
            }
        }
    }
    assert!(rows >= 30, "the tables were read ({rows} rows)");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
