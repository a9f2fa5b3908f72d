//! Decision records on disk, and what other commands read from them: the records directory,
//! reading and parsing every record, the next number, atomic writes, and a record's decision
//! lines (what `adr check` compares with a diff of the governed configs).

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::model::{Adr, AdrStatus, DecisionLine, Problem, SectionKind};
use super::parse::{number_from_file_name, parse_adr};

/// Where the records live, relative to the repository root.
pub const ADR_DIR: &str = "docs/adr";

/// A record's status and its decision lines: what `adr check` compares with a diff of the
/// governed configs.
#[derive(Clone, Debug, PartialEq)]
pub struct DecisionSet {
    /// From the file name (`None` when it is not `NNNN-slug.md`).
    pub number: Option<u32>,
    pub status: AdrStatus,
    /// In file order; each is `configs/<file>.toml: section.key = value` (or `... removed`) with
    /// its line.
    pub lines: Vec<DecisionLine>,
}

/// The status and decision lines of the record at `path` with contents `text`.
///
/// `Err` holds every problem that makes the answer unreliable, as `path:line: message`: a
/// missing or unknown status, and any malformed decision line (a line of the Decision section
/// that starts with `configs/` but is neither `configs/<file>.toml: section.key = value` with a
/// TOML value nor `configs/<file>.toml: section.key removed`). Other problems of the record are `adr lint`'s business.
pub fn decision_lines(path: &Path, text: &str) -> Result<DecisionSet, Vec<Problem>> {
    let adr = parse_adr(path, text);
    let decision = adr.section(SectionKind::Decision).map(|s| (s.line, s.end));
    let mut problems: Vec<Problem> = adr
        .problems
        .iter()
        .filter(|p| decision.is_some_and(|(start, end)| p.line > start && p.line < end))
        .cloned()
        .collect();
    problems.extend(adr.status_problems());
    match adr.status {
        Some(status) if problems.is_empty() => {
            Ok(DecisionSet { number: adr.number, status: status.value, lines: adr.decisions })
        }
        _ => {
            problems.sort();
            Err(problems)
        }
    }
}

/// Whether a file in the records directory is a record (`*.md` but not `template.md` or
/// `README.md`).
pub fn is_record_file(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.ends_with(".md") && lower != "template.md" && lower != "readme.md"
}

/// `(path, text)` of every record in `dir`, sorted by file name. `path` is `dir/<name>` (as
/// given, so relative to the repository root); files are read from `root/dir`.
pub fn read_records(root: &Path, dir: &Path) -> anyhow::Result<Vec<(PathBuf, String)>> {
    let full = root.join(dir);
    let entries = std::fs::read_dir(&full)
        .with_context(|| format!("cannot read the records directory {}", full.display()))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot list {}", full.display()))?;
        if !entry.file_type().map(|t| t.is_file()).unwrap_or(false) {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        if is_record_file(&name) {
            names.push(name);
        }
    }
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let path = dir.join(&name);
            let text = std::fs::read_to_string(root.join(&path))
                .with_context(|| format!("cannot read {}", path.display()))?;
            Ok((path, text))
        })
        .collect()
}

/// Parse every record in `dir` (see [`read_records`]).
pub fn load_records(root: &Path, dir: &Path) -> anyhow::Result<Vec<Adr>> {
    Ok(read_records(root, dir)?.iter().map(|(p, t)| parse_adr(p, t)).collect())
}

/// The next record number: the highest number in use plus one (1 for an empty directory).
pub fn next_number(paths: &[PathBuf]) -> u32 {
    paths.iter().filter_map(|p| number_from_file_name(p)).max().map_or(1, |n| n + 1)
}

/// Write a generated file (a record, gate.toml) atomically: its directory is created, then
/// `infergate_model::rundir::write_atomic` writes a synced temporary file and renames it over `path` (the
/// temporary file is removed when that fails), so a reader never sees half of it.
pub fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(infergate_model::rundir::write_atomic(path, text.as_bytes())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_read_sorted_without_the_template_and_readme() {
        let root = tempfile::tempdir().unwrap();
        let dir = Path::new("docs/adr");
        write_file(&root.path().join(dir).join("0002-b.md"), "# B\n").unwrap();
        write_file(&root.path().join(dir).join("0001-a.md"), "# A\n").unwrap();
        for other in ["template.md", "README.md", "notes.txt"] {
            write_file(&root.path().join(dir).join(other), "x").unwrap();
        }
        let files = read_records(root.path(), dir).unwrap();
        let names: Vec<String> = files.iter().map(|(p, _)| p.display().to_string()).collect();
        assert_eq!(names, ["docs/adr/0001-a.md", "docs/adr/0002-b.md"]);
        assert_eq!(files[0].1, "# A\n");
        let paths: Vec<PathBuf> = files.into_iter().map(|(p, _)| p).collect();
        assert_eq!(next_number(&paths), 3);
        assert_eq!(next_number(&[]), 1);
        let e = read_records(root.path(), Path::new("missing")).unwrap_err();
        assert!(e.to_string().starts_with("cannot read the records directory"), "{e}");
    }

    #[test]
    fn generated_files_replace_the_old_one_and_leave_no_temporary_file() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("thresholds/gate.toml");
        write_file(&path, "old").unwrap();
        write_file(&path, "new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        let left: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }

    #[test]
    fn decision_lines_come_with_the_status_or_the_problems() {
        let path = Path::new("docs/adr/0001-x.md");
        let ok = "# T\n\n- Status: Accepted\n\n## Decision\n\n- configs/engine.toml: a.b = 1\n";
        let set = decision_lines(path, ok).unwrap();
        assert_eq!((set.number, set.status, set.lines.len()), (Some(1), AdrStatus::Accepted, 1));
        let bad = ok.replace("a.b = 1", "a.b = fcfs").replace("Accepted", "Acepted");
        let problems = decision_lines(path, &bad).unwrap_err();
        let lines: Vec<usize> = problems.iter().map(|p| p.line).collect();
        assert_eq!(lines, [3, 7], "{problems:?}");
    }
}
