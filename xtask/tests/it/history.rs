//! `cargo xtask adr history KEY` on a repository built with git2: the timeline of a governed
//! key's values with the record, status, date and commit of each.

use crate::support::gitrepo::GitRepo;
use crate::support::xtask;

const ENGINE: &str = "configs/engine.toml";

fn record(n: u32, status: &str, value: u32, links: &str) -> String {
    format!(
        "# ADR-{n:04}: Seqs {value}\n\n- Status: {status}\n- Date: 2025-0{n}-01\n- Deciders: a\n\n\
         ## Decision\n\n- configs/engine.toml: scheduler.max_num_seqs = {value}\n\n## Links\n\n{links}\n"
    )
}

#[test]
fn the_history_of_a_key_names_each_value_with_its_record_status_date_and_commit() {
    let mut g = GitRepo::init();
    let engine = |v: u32| format!("[scheduler]\nmax_num_seqs = {v}\nblock_size = 16\n");
    g.commit_files(
        "Initial",
        &[
            (ENGINE, Some(&engine(256))),
            ("docs/adr/0001-seqs-256.md", Some(&record(1, "Accepted", 256, "None."))),
        ],
    );
    g.commit_files("Unrelated", &[("src/main.rs", Some("fn main() {}\n"))]);
    g.commit_files(
        "Raise max_num_seqs",
        &[
            (ENGINE, Some(&engine(384))),
            (
                "docs/adr/0001-seqs-256.md",
                Some(&record(1, "Superseded by 0002", 256, "- Superseded by 0002")),
            ),
            ("docs/adr/0002-seqs-384.md", Some(&record(2, "Accepted", 384, "- Supersedes 0001"))),
        ],
    );
    g.commit_files("Hotfix\n\nADR-Exempt: incident 7\n", &[(ENGINE, Some(&engine(128)))]);
    g.commit_files("Other key", &[(ENGINE, Some(&engine(128).replace("16", "32")))]);

    let out = xtask(g.path(), &["adr", "history", "scheduler.max_num_seqs"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let rows: Vec<Vec<String>> = out
        .stdout
        .lines()
        .skip(3)
        .map(|l| l.split('|').map(|c| c.trim().to_string()).filter(|c| !c.is_empty()).collect())
        .collect();
    let pick = |r: &Vec<String>| {
        (
            r[0].split_once(' ').unwrap().1.to_string(),
            r[3].clone(),
            r[4].clone(),
            r[5].clone(),
            r[6].clone(),
        )
    };
    let got: Vec<_> = rows.iter().map(pick).collect();
    let s = |x: &str| x.to_string();
    assert_eq!(
        got,
        vec![
            (s("Initial"), s("256"), s("ADR-0001"), s("Superseded by 0002"), s("2025-01-01")),
            (s("Raise max_num_seqs"), s("384"), s("ADR-0002"), s("Accepted"), s("2025-02-01")),
            (s("Hotfix"), s("128"), s("no record"), s("—"), s("—")),
        ],
        "{}",
        out.stdout
    );
    // A key no governed file sets.
    let out = xtask(g.path(), &["adr", "history", "scheduler.nothing"]);
    assert_eq!(out.code, 0);
    assert!(out.stdout.contains("no governed file of this history sets it"), "{}", out.stdout);
    // Outside a repository: a tool error.
    let tmp = tempfile::tempdir().unwrap();
    assert_eq!(xtask(tmp.path(), &["adr", "history", "a.b"]).code, 2);
}
