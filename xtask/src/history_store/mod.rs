//! The noise history in git: a ref of its own, `refs/infergate/history`, whose commits hold one
//! JSONL file per scenario and fingerprint (`<scenario key>/<fingerprint key>.jsonl`, one
//! `infergate_model::history::Entry` a line), written with git2 without touching the work tree or the
//! index. CI jobs share it like any ref (`git fetch origin refs/infergate/history:...`, `git
//! push origin refs/infergate/history`); two jobs that appended at once are joined with
//! `history merge` (a union by entry id). Reviewers read it with `git show`.

pub mod gating;

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, bail};
use git2::{ObjectType, Oid, Repository, Signature};
use infergate_model::history::{Entry, parse_line};

/// The ref the history lives under.
pub(crate) const HISTORY_REF: &str = "refs/infergate/history";

/// What the history holds, and what of it could not be read.
#[derive(Clone, Debug, Default)]
pub struct History {
    /// The ref's commit (`None`: no history yet).
    pub tip: Option<Oid>,
    /// The entries of every file that read cleanly.
    pub entries: Vec<Entry>,
    /// Files left out whole, each `path:line: why` (a corrupt line makes its file untrusted:
    /// its entries are never pooled).
    pub problems: Vec<String>,
}

impl History {
    /// A line for reports: how many entries, and what was left out.
    pub fn describe(&self) -> String {
        let base = match self.tip {
            Some(t) => {
                format!("{HISTORY_REF} at {}: {} entries", &t.to_string()[..12], self.entries.len())
            }
            None => format!("no {HISTORY_REF} yet"),
        };
        if self.problems.is_empty() {
            base
        } else {
            format!("{base}; left out: {}", self.problems.join("; "))
        }
    }
}

/// Read the history of the repository at `root`. A ref that is not a commit is an error; a
/// file with a bad line is left out and named in [`History::problems`].
pub fn read(root: &Path) -> anyhow::Result<History> {
    read_repo(&open(root)?, HISTORY_REF)
}

/// Outside a git repository there is no history to read or append to.
#[derive(Debug, thiserror::Error)]
#[error("{} is not in a git repository", .0.display())]
pub struct NotARepository(pub std::path::PathBuf);

/// The repository holding `root`; one plain sentence when there is none.
fn open(root: &Path) -> anyhow::Result<Repository> {
    match Repository::discover(root) {
        Ok(repo) => Ok(repo),
        Err(e) if e.code() == git2::ErrorCode::NotFound => {
            Err(NotARepository(root.to_path_buf()).into())
        }
        Err(e) => {
            Err(e).with_context(|| format!("opening the git repository of {}", root.display()))
        }
    }
}

fn read_repo(repo: &Repository, refname: &str) -> anyhow::Result<History> {
    // Only a ref that is not there is "no history yet": one that does not parse (a loose ref
    // file of junk, a packed line that is no object id) is an unreadable history, said so.
    let reference = match repo.find_reference(refname) {
        Ok(r) => r,
        Err(e) if e.code() == git2::ErrorCode::NotFound => return Ok(History::default()),
        Err(e) => {
            bail!("{refname} cannot be read ({}): the history is unreadable", e.message())
        }
    };
    let commit = reference.peel_to_commit().with_context(|| {
        format!("{refname} does not point at a commit: the history is unreadable")
    })?;
    let tree = commit.tree().with_context(|| format!("cannot read the tree of {refname}"))?;
    let mut out = History { tip: Some(commit.id()), ..History::default() };
    let mut files: Vec<(String, Oid)> = Vec::new();
    tree.walk(git2::TreeWalkMode::PreOrder, |dir, e| {
        if e.kind() == Some(ObjectType::Blob) {
            files.push((format!("{dir}{}", e.name().unwrap_or("?")), e.id()));
        }
        git2::TreeWalkResult::Ok
    })?;
    for (path, oid) in files {
        if !path.ends_with(".jsonl") {
            continue;
        }
        let blob = repo.find_blob(oid)?;
        let Ok(text) = std::str::from_utf8(blob.content()) else {
            out.problems.push(format!("{path}: not UTF-8 text"));
            continue;
        };
        let mut file_entries = Vec::new();
        let mut bad = None;
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            match parse_line(line) {
                Ok(e) => file_entries.push(e),
                Err(why) => {
                    bad = Some(format!("{path}:{}: {why}", i + 1));
                    break;
                }
            }
        }
        match bad {
            Some(p) => out.problems.push(p),
            None => out.entries.extend(file_entries),
        }
    }
    Ok(out)
}

/// The file an entry goes in.
fn file_of(e: &Entry) -> String {
    format!("{}/{}.jsonl", e.scenario.key(), e.fingerprint.key())
}

/// Append `entries` (those whose id is not there yet) as a new commit of the history ref; the
/// number appended. Refused when the history is unreadable: nothing is overwritten.
pub fn append(root: &Path, entries: &[Entry], message: &str) -> anyhow::Result<usize> {
    write(&open(root)?, entries, message, None)
}

/// [`append`], with `also` (another copy's tip) as a second parent of the new commit, so the
/// result descends from both copies and pushes as a fast-forward over either. A commit is
/// made even when nothing is new, unless the history already descends from `also`.
fn write(
    repo: &Repository,
    entries: &[Entry],
    message: &str,
    also: Option<Oid>,
) -> anyhow::Result<usize> {
    for _ in 0..5 {
        let current = read_repo(repo, HISTORY_REF)?;
        if !current.problems.is_empty() {
            bail!(
                "the history has unreadable files ({}): not appended",
                current.problems.join("; ")
            );
        }
        let known: std::collections::BTreeSet<&str> =
            current.entries.iter().map(|e| e.id.as_str()).collect();
        let new: Vec<&Entry> = entries.iter().filter(|e| !known.contains(e.id.as_str())).collect();
        let also = also.filter(|&a| match current.tip {
            Some(tip) => tip != a && !repo.graph_descendant_of(tip, a).unwrap_or(false),
            None => true,
        });
        if new.is_empty() && also.is_none() {
            return Ok(0);
        }
        let mut files: BTreeMap<String, String> = BTreeMap::new();
        for e in current.entries.iter().chain(new.iter().copied()) {
            let line = serde_json::to_string(e)? + "\n";
            files.entry(file_of(e)).or_default().push_str(&line);
        }
        let tree = write_tree(repo, &files)?;
        let parents: Vec<git2::Commit<'_>> = current
            .tip
            .into_iter()
            .chain(also)
            .map(|t| repo.find_commit(t))
            .collect::<Result<_, _>>()?;
        let sig =
            repo.signature().or_else(|_| Signature::now("infergate", "infergate@localhost"))?;
        let tree = repo.find_tree(tree)?;
        let parents: Vec<&git2::Commit<'_>> = parents.iter().collect();
        let commit = repo.commit(None, &sig, &sig, message, &tree, &parents)?;
        // Compare and swap: another writer in between means reading again.
        let swapped = match current.tip {
            Some(old) => repo.reference_matching(HISTORY_REF, commit, true, old, message).is_ok(),
            None => repo.reference(HISTORY_REF, commit, false, message).is_ok(),
        };
        if swapped {
            return Ok(new.len());
        }
    }
    bail!("{HISTORY_REF} kept moving while appending (another writer?); try again")
}

/// Join the entries of `other` (a ref or revision, e.g. a fetched copy of another job's
/// history) into the history; the number added. The result has both tips as parents, so it
/// pushes over the other copy as a fast-forward.
pub fn merge(root: &Path, other: &str) -> anyhow::Result<usize> {
    let repo = open(root)?;
    let oid = repo
        .revparse_single(other)
        .with_context(|| format!("`{other}` is not a revision here"))?
        .id();
    let tmp = "refs/infergate/history-merge-source";
    repo.reference(tmp, oid, true, "history merge")?;
    let theirs = read_repo(&repo, tmp);
    let _ = repo.find_reference(tmp).and_then(|mut r| r.delete());
    let theirs = theirs?;
    if !theirs.problems.is_empty() {
        bail!("`{other}` has unreadable files ({}): not merged", theirs.problems.join("; "));
    }
    write(&repo, &theirs.entries, &format!("history merge {other}"), theirs.tip)
}

/// A tree of `path -> text` files (paths with one directory level or more).
fn write_tree(repo: &Repository, files: &BTreeMap<String, String>) -> anyhow::Result<Oid> {
    let mut dirs: BTreeMap<String, Vec<(String, Oid)>> = BTreeMap::new();
    for (path, text) in files {
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        dirs.entry(dir.to_string())
            .or_default()
            .push((name.to_string(), repo.blob(text.as_bytes())?));
    }
    let mut root = repo.treebuilder(None)?;
    for (dir, blobs) in dirs {
        let mut tb = repo.treebuilder(None)?;
        for (name, oid) in blobs {
            tb.insert(&name, oid, 0o100644)?;
        }
        let sub = tb.write()?;
        if dir.is_empty() {
            bail!("history files live in a directory per scenario");
        }
        root.insert(&dir, sub, 0o040000)?;
    }
    Ok(root.write()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_model::history::{ENTRY_VERSION, EntryKind, Fingerprint, Scenario};

    fn entry(run: &str, host: &str) -> Entry {
        let mut e = Entry {
            format_version: ENTRY_VERSION,
            id: String::new(),
            kind: EntryKind::Trials,
            run_id: run.into(),
            measured_at: "2026-12-01T00:00:00.000Z".into(),
            commit: None,
            dirty: false,
            scenario: Scenario {
                profile: "default".into(),
                trial_requests: 8,
                settings: "s".into(),
                workload: "w".into(),
                engine_config: "e".into(),
            },
            fingerprint: Fingerprint { host: host.into(), gpu: "none".into(), engine: "x".into() },
            values: [("metrics.ttft_ms.p99".to_string(), vec![Some(1.0), Some(2.0)])].into(),
            paired: Default::default(),
        };
        e.seal();
        e
    }

    #[test]
    fn entries_append_once_read_back_and_merge_by_id() {
        let dir = tempfile::tempdir().unwrap();
        Repository::init(dir.path()).unwrap();
        assert!(read(dir.path()).unwrap().tip.is_none());
        assert_eq!(append(dir.path(), &[entry("a", "h1"), entry("b", "h2")], "t").unwrap(), 2);
        assert_eq!(append(dir.path(), &[entry("a", "h1")], "t").unwrap(), 0, "no duplicate");
        let h = read(dir.path()).unwrap();
        assert_eq!(h.entries.len(), 2);
        assert!(h.problems.is_empty());
        // Another job appended `c` to the same tip while this one appended `d`: joined by id.
        let repo = Repository::open(dir.path()).unwrap();
        let tip = h.tip.unwrap();
        append(dir.path(), &[entry("c", "h1")], "t").unwrap();
        let theirs = read(dir.path()).unwrap().tip.unwrap();
        repo.reference("refs/other", theirs, true, "").unwrap();
        repo.reference(HISTORY_REF, tip, true, "rewind").unwrap();
        append(dir.path(), &[entry("d", "h3")], "t").unwrap();
        assert_eq!(merge(dir.path(), "refs/other").unwrap(), 1);
        assert_eq!(merge(dir.path(), "refs/other").unwrap(), 0);
        // The merged history descends from both copies: it pushes over theirs as a
        // fast-forward. Merging a copy it already holds makes no commit.
        let ours = read(dir.path()).unwrap().tip.unwrap();
        assert!(repo.graph_descendant_of(ours, theirs).unwrap());
        assert_eq!(repo.find_commit(ours).unwrap().parent_count(), 2);
        let mine = repo.find_commit(ours).unwrap().parent_id(0).unwrap();
        repo.reference("refs/mine", mine, true, "").unwrap();
        assert_eq!(merge(dir.path(), "refs/mine").unwrap(), 0);
        assert_eq!(read(dir.path()).unwrap().tip.unwrap(), ours);
        let mut runs: Vec<String> =
            read(dir.path()).unwrap().entries.iter().map(|e| e.run_id.clone()).collect();
        runs.sort();
        assert_eq!(runs, ["a", "b", "c", "d"]);
    }

    #[test]
    fn a_corrupt_file_is_left_out_and_named_and_blocks_appending() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        append(dir.path(), &[entry("a", "h1"), entry("b", "h2")], "t").unwrap();
        // Break one file by hand.
        let h = read(dir.path()).unwrap();
        let file = file_of(&h.entries[0]);
        let mut files = BTreeMap::new();
        files.insert(file.clone(), "{not json\n".to_string());
        files.insert(file_of(&h.entries[1]), serde_json::to_string(&h.entries[1]).unwrap() + "\n");
        let tree = repo.find_tree(write_tree(&repo, &files).unwrap()).unwrap();
        let sig = Signature::now("t", "t@t").unwrap();
        let c = repo.commit(None, &sig, &sig, "break", &tree, &[]).unwrap();
        repo.reference(HISTORY_REF, c, true, "").unwrap();
        let h = read(dir.path()).unwrap();
        assert_eq!(h.entries.len(), 1);
        assert!(h.problems[0].starts_with(&format!("{file}:1:")), "{:?}", h.problems);
        assert!(h.describe().contains("left out"), "{}", h.describe());
        assert!(append(dir.path(), &[entry("c", "h1")], "t").is_err());
        // A ref that is no commit: unreadable.
        let blob = repo.blob(b"x").unwrap();
        repo.reference(HISTORY_REF, blob, true, "").unwrap();
        assert!(read(dir.path()).unwrap_err().to_string().contains("does not point at a commit"));
        // A loose ref file that does not parse: unreadable, not "no history".
        std::fs::write(dir.path().join(".git").join(HISTORY_REF), "junk\n").unwrap();
        let e = read(dir.path()).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{HISTORY_REF} cannot be read (")), "{e}");
        assert!(append(dir.path(), &[entry("c", "h1")], "t").is_err());
    }
}
