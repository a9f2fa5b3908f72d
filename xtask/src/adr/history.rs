//! `cargo xtask adr history KEY`: the timeline of a governed key's values through git history
//! (git2, committed content only): each commit of HEAD's first-parent line where the value in a
//! governed file (or a declared source, read into the canonical keys) changed (or the key appeared or went away), with the record that names that
//! value at that commit (or, marked `(later)`, a record written afterwards that names it), the
//! record's status and date (as they stand at HEAD), and the commit.
//!
//! [`timeline`] walks the history; [`render`] prints it. The record lookup is pure
//! ([`naming_record`]).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use git2::{ObjectType, Oid, Repository, Sort, Tree};

use super::model::{Adr, AdrStatus, Decided};
use crate::console::ConsoleTable;
use crate::git;
use crate::settings::{self, SETTINGS_FILE, Settings};
use crate::text::BLANK;
use infergate_model::config::ConfigKey;
use infergate_model::sources::{SourceDecl, extract};
use infergate_policy::adr::check::semdiff::{flatten, inline, same_value};

/// One change of the key's value in one governed file.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// Abbreviated commit id, its date (`YYYY-MM-DD`) and summary line.
    pub commit: String,
    pub date: String,
    pub summary: String,
    pub file: String,
    /// The new value (`None`: the key went away).
    pub value: Option<toml::Value>,
    /// The record that names this value at that commit (`ADR-0002`), its status and date at HEAD
    /// (or at that commit when it is gone since).
    pub record: Option<(String, String, String)>,
}

/// The record at a commit whose decision line names `file: key` with `value` (`removed` for
/// `None`), preferring an Accepted one, then the highest number: `(label, number)`.
pub(crate) fn naming_record(
    adrs: &[Adr],
    file: &str,
    key: &ConfigKey,
    value: Option<&toml::Value>,
) -> Option<(String, Option<u32>)> {
    let says = |adr: &Adr| {
        adr.decisions.iter().any(|d| {
            d.file == file
                && &d.key == key
                && match (&d.value, value) {
                    (Decided::Set(v), Some(w)) => same_value(v, w),
                    (Decided::Removed, None) => true,
                    _ => false,
                }
        })
    };
    let mut candidates: Vec<&Adr> = adrs
        .iter()
        .filter(|a| {
            matches!(
                a.status_value(),
                Some(AdrStatus::Accepted | AdrStatus::Proposed | AdrStatus::SupersededBy(_))
            ) && says(a)
        })
        .collect();
    candidates.sort_by_key(|a| (a.status_value() == Some(AdrStatus::Accepted), a.number));
    candidates.last().map(|a| (a.label(), a.number))
}

/// A governed file of a tree: its path, its blob, and the `[[adr.source]]` it is read by (none
/// for a governed TOML file).
type Governed = (String, Oid, Option<SourceDecl>);

/// The governed files of a tree (`configs/engine*.toml`, the settings' patterns and the
/// declared sources) and the blob of each.
fn governed_blobs(repo: &Repository, tree: &Tree<'_>) -> anyhow::Result<Vec<Governed>> {
    let settings = match git::read_text(repo, tree, SETTINGS_FILE)? {
        Some(t) => Settings::parse(&infergate_model::config::Source::new(SETTINGS_FILE, t))
            .unwrap_or_default(),
        None => Settings::default(),
    };
    let patterns = settings.governed_patterns();
    let mut out = Vec::new();
    if !settings.adr.sources.is_empty() {
        tree.walk(git2::TreeWalkMode::PreOrder, |dir, e| {
            if e.kind() == Some(ObjectType::Blob)
                && let Ok(name) = e.name()
            {
                let path = format!("{dir}{name}");
                if !settings::is_governed(&patterns, &path)
                    && let Some(decl) = settings.sources_of(&path).next()
                {
                    out.push((path, e.id(), Some(decl.clone())));
                }
            }
            git2::TreeWalkResult::Ok
        })
        .context("cannot walk the tree")?;
    }
    let Ok(entry) = tree.get_path(Path::new("configs")) else { return Ok(out) };
    let Ok(configs) = repo.find_tree(entry.id()) else { return Ok(out) };
    configs
        .walk(git2::TreeWalkMode::PreOrder, |dir, e| {
            if e.kind() == Some(ObjectType::Blob)
                && let Ok(name) = e.name()
            {
                let path = format!("configs/{dir}{name}");
                if settings::is_governed(&patterns, &path) {
                    out.push((path, e.id(), None));
                }
            }
            git2::TreeWalkResult::Ok
        })
        .context("cannot walk configs/")?;
    Ok(out)
}

/// The timeline of `key` (dotted, as in decision lines) in the governed files, oldest first,
/// along the first-parent history of `head`. `file` narrows it to one file.
pub fn timeline(
    root: &Path,
    dir: &str,
    key: &ConfigKey,
    file: Option<&str>,
    head: &str,
) -> anyhow::Result<Vec<Entry>> {
    let repo = git::open(root)?;
    let head = git::resolve(&repo, head, "head")?;
    let mut walk = repo.revwalk().context("cannot walk the history")?;
    walk.set_sorting(Sort::TOPOLOGICAL | Sort::REVERSE)?;
    walk.simplify_first_parent()?;
    walk.push(head.id())?;
    let head_adrs = git::records_at(&repo, &head.tree()?, dir)?;
    let mut values: BTreeMap<String, Option<toml::Value>> = BTreeMap::new();
    let mut parsed: BTreeMap<(Oid, Option<String>), Option<toml::Value>> = BTreeMap::new();
    let mut out = Vec::new();
    for oid in walk {
        let oid = oid.context("cannot walk the history")?;
        let commit = repo.find_commit(oid)?;
        let tree = commit.tree()?;
        let mut now: BTreeMap<String, Option<toml::Value>> = BTreeMap::new();
        for (path, blob, decl) in governed_blobs(&repo, &tree)? {
            if file.is_some_and(|f| f != path) {
                continue;
            }
            let cache_key = (blob, decl.as_ref().map(|d| format!("{d:?}")));
            let value = match parsed.get(&cache_key) {
                Some(v) => v.clone(),
                None => {
                    let b = repo.find_blob(blob)?;
                    let text = std::str::from_utf8(b.content()).ok();
                    // A version that does not read has no value of the key (as before: an
                    // invalid TOML file holds none).
                    let v = match &decl {
                        None => text
                            .and_then(|t| toml::from_str::<toml::Table>(t).ok())
                            .and_then(|t| flatten(&t).remove(key.as_str())),
                        Some(d) => text
                            .and_then(|t| extract(d, &path, t).ok())
                            .and_then(|e| e.get(key).map(|p| p.value.clone())),
                    };
                    parsed.insert(cache_key, v.clone());
                    v
                }
            };
            now.insert(path, value);
        }
        let paths: std::collections::BTreeSet<String> =
            values.keys().chain(now.keys()).cloned().collect();
        let mut adrs: Option<Vec<Adr>> = None;
        for path in paths {
            let before = values.get(&path).cloned().flatten();
            let after = now.get(&path).cloned().flatten();
            let changed = match (&before, &after) {
                (Some(a), Some(b)) => !same_value(a, b),
                (None, None) => false,
                _ => true,
            };
            if !changed {
                continue;
            }
            let adrs = match &adrs {
                Some(a) => a,
                None => adrs.insert(git::records_at(&repo, &tree, dir)?),
            };
            // The record at that commit; else one written later that names the value (while
            // it still stood or since), marked `(later)`.
            let at_commit = naming_record(adrs, &path, key, after.as_ref());
            let later = || {
                naming_record(&head_adrs, &path, key, after.as_ref())
                    .map(|(label, n)| (format!("{label} (later)"), n))
            };
            let record = at_commit.or_else(later).map(|(label, n)| {
                let at_head = head_adrs.iter().find(|a| n.is_some() && a.number == n);
                let source = at_head.or_else(|| adrs.iter().find(|a| a.number == n));
                let status = source
                    .and_then(|a| a.status_value())
                    .map_or(BLANK.to_string(), |s| s.to_string());
                let date = source
                    .and_then(|a| a.date.as_ref())
                    .map_or(BLANK.to_string(), |d| d.value.format("%Y-%m-%d").to_string());
                (label, status, date)
            });
            let time = commit.time();
            let date = chrono::DateTime::from_timestamp(time.seconds(), 0)
                .map_or(BLANK.to_string(), |d| d.format("%Y-%m-%d").to_string());
            out.push(Entry {
                commit: git::short(oid),
                date,
                summary: commit.summary().ok().flatten().unwrap_or("").to_string(),
                file: path.clone(),
                value: after,
                record,
            });
        }
        values = now.into_iter().collect();
    }
    Ok(out)
}

/// The timeline as a table; entries without a record say so.
pub fn render(key: &ConfigKey, entries: &[Entry]) -> String {
    if entries.is_empty() {
        return format!("{key}: no governed file of this history sets it\n");
    }
    let mut table = ConsoleTable::markdown([
        "Commit",
        "Date",
        "File",
        "Value",
        "Record",
        "Status",
        "Record date",
    ]);
    for e in entries {
        let (label, status, date) = e
            .record
            .clone()
            .unwrap_or_else(|| ("no record".to_string(), BLANK.to_string(), BLANK.to_string()));
        table.row([
            format!("{} {}", e.commit, e.summary),
            e.date.clone(),
            e.file.clone(),
            e.value.as_ref().map_or("(unset)".to_string(), inline),
            label,
            status,
            date,
        ]);
    }
    format!("{key}:\n{table}\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_policy::adr::parse_adr;

    #[test]
    fn the_naming_record_prefers_an_accepted_one() {
        let rec = |n: u32, status: &str, value: &str| {
            let text = format!(
                "# ADR-{n:04}: T\n\n- Status: {status}\n\n## Decision\n\n- configs/engine.toml: a.b = {value}\n"
            );
            parse_adr(Path::new(&format!("docs/adr/{n:04}-t.md")), &text)
        };
        let adrs = [rec(1, "Accepted", "1"), rec(2, "Proposed", "1"), rec(3, "Rejected", "2")];
        let one = toml::Value::Integer(1);
        let ab = ConfigKey::literal("a.b");
        assert_eq!(
            naming_record(&adrs, "configs/engine.toml", &ab, Some(&one)),
            Some(("ADR-0001".to_string(), Some(1)))
        );
        // A Rejected record names no value in force.
        let two = toml::Value::Integer(2);
        assert_eq!(naming_record(&adrs, "configs/engine.toml", &ab, Some(&two)), None);
    }
}
