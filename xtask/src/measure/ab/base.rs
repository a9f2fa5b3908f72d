//! The base arm of `bench ab` read from git (git2, committed content): the base revision and
//! its governed engine config. What each arm runs from there is `infergate_policy::ab::arms`.

use std::path::Path;

use anyhow::{Context, bail};

use crate::git;

/// The base revision: `rev`, or (empty) the merge base of HEAD and the first of origin/main,
/// main and master that exists. Returns the commit id and `base <short id> (<rev>)`.
pub fn base_revision(root: &Path, rev: &str) -> anyhow::Result<(git2::Oid, String)> {
    let repo = git::open(root)?;
    if !rev.is_empty() {
        let c = git::resolve(&repo, rev, "base")?;
        return Ok((c.id(), format!("base {} ({rev})", git::short(c.id()))));
    }
    let head = git::resolve(&repo, "HEAD", "head")?;
    for name in ["origin/main", "main", "master"] {
        if let Ok(obj) = repo.revparse_single(name)
            && let Ok(c) = obj.peel_to_commit()
        {
            let base = git::merge_base(&repo, c.id(), head.id())?;
            return Ok((
                base,
                format!("base {} (merge base of HEAD and {name})", git::short(base)),
            ));
        }
    }
    bail!(
        "--ab without a revision takes the merge base with origin/main or main, and neither exists here; name the base: --ab REV"
    )
}

/// The text of `rel` at commit `oid`.
pub fn config_at(root: &Path, oid: git2::Oid, rel: &str) -> anyhow::Result<String> {
    let repo = git::open(root)?;
    let commit = repo.find_commit(oid).context("cannot read the base commit")?;
    let tree = commit.tree().context("cannot read the base commit's tree")?;
    match git::read_text(&repo, &tree, rel)? {
        Some(t) => Ok(t),
        None => bail!(
            "{rel} does not exist at the base revision {}: the baseline has no governed config to run",
            git::short(oid)
        ),
    }
}
