//! Repository policy, enforced by `cargo test`: this repository's own records pass `adr lint`,
//! `thresholds/gate.toml` is what `adr thresholds` would write, and the records README
//! documents every metric name.

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
    for m in bench::summary::known_metrics() {
        let parts: Vec<&str> = m.path.split('.').collect();
        let name = match parts.as_slice() {
            ["metrics", family, stat] if family.ends_with("_ms") => {
                assert!(
                    readme.contains(&format!("`{stat}`")),
                    "statistic {stat} is not documented"
                );
                format!("`metrics.{family}.<stat>`")
            }
            _ => format!("`{}`", m.path),
        };
        let row = rows.iter().find(|r| r[0].starts_with(&name));
        let row =
            row.unwrap_or_else(|| panic!("docs/adr/README.md does not document metric {}", m.path));
        assert_eq!(row[1], m.unit, "docs/adr/README.md gives the wrong unit for {}", m.path);
        let better = match m.better {
            bench::summary::Better::Lower => "lower",
            bench::summary::Better::Higher => "higher",
        };
        assert_eq!(row[2], better, "docs/adr/README.md gives the wrong direction for {}", m.path);
    }
}

#[test]
fn the_xtask_settings_parse() {
    let path = repo_root().join(xtask::settings::SETTINGS_FILE);
    let source = bench::config::Source::read(&path).unwrap();
    let settings = xtask::settings::Settings::parse(&source).unwrap_or_else(|e| panic!("{e}"));
    assert!(settings.governed_patterns().contains(&xtask::settings::ALWAYS_GOVERNED.to_string()));
}
