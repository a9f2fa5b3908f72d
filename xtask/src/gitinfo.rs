//! The repository state recorded with each run (commit and whether the tree was dirty).

use std::path::Path;

use infergate_model::summary::GitInfo;

/// `None` when `root` is not inside a git repository or has no commit yet.
pub fn detect(root: &Path) -> Option<GitInfo> {
    let repo = git2::Repository::discover(root).ok()?;
    let head = repo.head().ok()?.peel_to_commit().ok()?;
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(false).include_ignored(false);
    let dirty = repo.statuses(Some(&mut opts)).map(|s| !s.is_empty()).unwrap_or(false);
    Some(GitInfo { commit: head.id().to_string(), dirty })
}
