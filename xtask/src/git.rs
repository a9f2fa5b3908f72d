//! The git side of `adr check`, the A/B gate's base and the history's series (git2, no work
//! tree needed): resolve the revisions, find the merge base, list what changed between the
//! merge-base tree and the head tree, read blobs, and find `ADR-Exempt` trailers in the commits
//! merge-base..head. No policy here.

use std::path::Path;

use anyhow::{Context, anyhow, bail};
use git2::{Commit, Delta, DiffFindOptions, ErrorCode, ObjectType, Oid, Repository, Sort, Tree};

use infergate_policy::adr::check::rule::Exemption;

/// The trailer that waives the rule for a pull request.
pub(crate) const EXEMPT_TRAILER: &str = "ADR-Exempt";

/// What `--fetch-depth` advice says, once.
const SHALLOW_ADVICE: &str = "the repository is a shallow clone (only part of the history was \
     fetched), so the merge base of base and head cannot be found; fetch the whole history: in \
     GitHub Actions set `fetch-depth: 0` on actions/checkout, elsewhere run `git fetch --unshallow`";

/// Open the repository that contains `root`.
pub fn open(root: &Path) -> anyhow::Result<Repository> {
    Repository::discover(root)
        .with_context(|| format!("{} is not inside a git repository", root.display()))
}

/// A commit named on the command line.
pub fn resolve<'r>(repo: &'r Repository, rev: &str, what: &str) -> anyhow::Result<Commit<'r>> {
    let object = match repo.revparse_single(rev) {
        Ok(o) => o,
        Err(e) if repo.is_shallow() => {
            bail!(
                "{what} revision `{rev}` is not in this repository ({}); {SHALLOW_ADVICE}",
                e.message()
            )
        }
        Err(e)
            if matches!(
                e.code(),
                ErrorCode::NotFound | ErrorCode::Ambiguous | ErrorCode::InvalidSpec
            ) =>
        {
            bail!(
                "{what} revision `{rev}` is not in this repository ({}): pass a commit SHA, a \
                 branch or a tag that exists here (for a remote branch, fetch it first: \
                 `git fetch origin <branch>` and use `origin/<branch>`)",
                e.message()
            )
        }
        Err(e) => return Err(e).with_context(|| format!("cannot resolve {what} revision `{rev}`")),
    };
    object
        .peel_to_commit()
        .with_context(|| format!("{what} revision `{rev}` does not name a commit"))
}

/// The merge base of `base` and `head`.
pub(crate) fn merge_base(repo: &Repository, base: Oid, head: Oid) -> anyhow::Result<Oid> {
    match repo.merge_base(base, head) {
        Ok(oid) => Ok(oid),
        Err(e) if e.code() == ErrorCode::NotFound && repo.is_shallow() => {
            Err(anyhow!("no merge base of {} and {}: {SHALLOW_ADVICE}", short(base), short(head)))
        }
        Err(e) if e.code() == ErrorCode::NotFound => Err(anyhow!(
            "{} and {} have no common history (no merge base); is --base the branch the pull \
             request merges into?",
            short(base),
            short(head)
        )),
        Err(e) => Err(e).context("cannot compute the merge base"),
    }
}

/// A seven-digit commit id.
pub fn short(oid: Oid) -> String {
    oid.to_string()[..7].to_string()
}

/// A file the diff touches; paths are `/`-separated and relative to the repository root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FileChange {
    /// `None`: added.
    pub old: Option<String>,
    /// `None`: deleted.
    pub new: Option<String>,
}

/// The files that differ between two trees, with renames (and copies) detected.
pub(crate) fn tree_changes(
    repo: &Repository,
    old: &Tree<'_>,
    new: &Tree<'_>,
) -> anyhow::Result<Vec<FileChange>> {
    let mut diff = repo
        .diff_tree_to_tree(Some(old), Some(new), None)
        .context("cannot diff the merge-base tree against the head tree")?;
    diff.find_similar(Some(DiffFindOptions::new().renames(true)))
        .context("cannot detect renames")?;
    let path = |f: git2::DiffFile<'_>| f.path().map(|p| p.to_string_lossy().replace('\\', "/"));
    let mut out = Vec::new();
    for delta in diff.deltas() {
        let (old, new) = (path(delta.old_file()), path(delta.new_file()));
        let change = match delta.status() {
            Delta::Added => FileChange { old: None, new },
            Delta::Deleted => FileChange { old, new: None },
            Delta::Unmodified | Delta::Ignored | Delta::Untracked => continue,
            _ => FileChange { old, new },
        };
        out.push(change);
    }
    Ok(out)
}

/// The text of the file at `path` in `tree`; `None` when there is no such file.
pub(crate) fn read_text(
    repo: &Repository,
    tree: &Tree<'_>,
    path: &str,
) -> anyhow::Result<Option<String>> {
    let entry = match tree.get_path(Path::new(path)) {
        Ok(e) => e,
        Err(e) if e.code() == ErrorCode::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot look up {path}")),
    };
    if entry.kind() != Some(ObjectType::Blob) {
        return Ok(None);
    }
    let blob = repo.find_blob(entry.id()).with_context(|| format!("cannot read {path}"))?;
    let text =
        std::str::from_utf8(blob.content()).with_context(|| format!("{path} is not UTF-8 text"))?;
    Ok(Some(text.to_string()))
}

/// `(path, text)` of the files directly in `dir` of `tree` whose names `keep` accepts, sorted by
/// name. A missing directory holds none.
pub fn read_dir(
    repo: &Repository,
    tree: &Tree<'_>,
    dir: &str,
    keep: impl Fn(&str) -> bool,
) -> anyhow::Result<Vec<(String, String)>> {
    let sub = match tree.get_path(Path::new(dir)) {
        Ok(e) if e.kind() == Some(ObjectType::Tree) => {
            repo.find_tree(e.id()).with_context(|| format!("cannot read {dir}"))?
        }
        Ok(_) => return Ok(Vec::new()),
        Err(e) if e.code() == ErrorCode::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot look up {dir}")),
    };
    let mut out = Vec::new();
    for entry in sub.iter() {
        let Ok(name) = entry.name() else { continue };
        if entry.kind() != Some(ObjectType::Blob) || !keep(name) {
            continue;
        }
        let path = format!("{dir}/{name}");
        let blob = repo.find_blob(entry.id()).with_context(|| format!("cannot read {path}"))?;
        let text = std::str::from_utf8(blob.content())
            .with_context(|| format!("{path} is not UTF-8 text"))?;
        out.push((path, text.to_string()));
    }
    out.sort();
    Ok(out)
}

/// The commits reachable from `head` and not from `merge_base`, newest first.
pub(crate) fn pr_commits<'r>(
    repo: &'r Repository,
    head: Oid,
    merge_base: Oid,
) -> anyhow::Result<Vec<Commit<'r>>> {
    let mut walk = repo.revwalk().context("cannot walk the history")?;
    walk.set_sorting(Sort::TOPOLOGICAL | Sort::TIME)?;
    walk.push(head)?;
    walk.hide(merge_base)?;
    let mut out = Vec::new();
    for oid in walk {
        let oid = oid.context("cannot walk the history")?;
        out.push(repo.find_commit(oid).with_context(|| format!("cannot read commit {oid}"))?);
    }
    Ok(out)
}

/// `ADR-Exempt: <reason>` trailers (key case-insensitive) in the messages of `commits`. A trailer
/// with an empty reason is returned with an empty reason: the caller refuses it.
///
/// Each comes with its commit's id; its `keys` are left empty for the caller, who knows which
/// files are governed.
pub(crate) fn exemptions(commits: &[Commit<'_>]) -> Vec<(Oid, Exemption)> {
    let mut out = Vec::new();
    for c in commits {
        let message = String::from_utf8_lossy(c.message_bytes()).into_owned();
        for (key, value) in trailers(&message) {
            if key.eq_ignore_ascii_case(EXEMPT_TRAILER) {
                out.push((
                    c.id(),
                    Exemption {
                        commit: short(c.id()),
                        summary: message.lines().next().unwrap_or("").trim().to_string(),
                        reason: value.trim().to_string(),
                        keys: Vec::new(),
                    },
                ));
            }
        }
    }
    out
}

/// The trailers of a commit message, as git reads them (the last paragraph of `Key: value`
/// lines).
pub fn trailers(message: &str) -> Vec<(String, String)> {
    match git2::message_trailers_strs(message) {
        Ok(t) => t.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        Err(_) => Vec::new(),
    }
}

/// The records of `dir` in `tree`, parsed.
pub fn records_at(
    repo: &Repository,
    tree: &Tree<'_>,
    dir: &str,
) -> anyhow::Result<Vec<infergate_policy::adr::Adr>> {
    Ok(read_dir(repo, tree, dir, infergate_policy::adr::is_record_file)?
        .iter()
        .map(|(p, t)| infergate_policy::adr::parse_adr(Path::new(p), t))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailers_are_read_from_the_last_paragraph_only() {
        let msg = "Raise max_num_seqs\n\nADR-Exempt: not here\n\nBody.\n\nADR-Exempt: incident 42\nSigned-off-by: A <a@b>\n";
        let t = trailers(msg);
        assert_eq!(
            t,
            vec![
                ("ADR-Exempt".to_string(), "incident 42".to_string()),
                ("Signed-off-by".to_string(), "A <a@b>".to_string())
            ]
        );
        assert!(trailers("Only a subject").is_empty());
    }
}
