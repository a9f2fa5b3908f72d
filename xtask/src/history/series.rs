//! The history's series read from git: the first-parent line of a branch ([`line`]) and what
//! the change points need of the repository ([`GitLookups`]: the record in force at a commit, the
//! records and governed files changed in a range). The series and their change points are
//! `infergate_policy::history::series`, re-exported here.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use git2::{Oid, Repository, Sort};
use infergate_model::stats::changepoint::Settings;
use infergate_policy::adr::model::AdrStatus;
pub use infergate_policy::history::series::*;

use crate::git;

/// The first-parent line of `branch` in `repo`.
pub fn line(repo: &Repository, branch: &str) -> anyhow::Result<Line> {
    let head = git::resolve(repo, branch, "branch")?;
    let mut walk = repo.revwalk().context("cannot walk the history")?;
    walk.set_sorting(Sort::TOPOLOGICAL | Sort::REVERSE)?;
    walk.simplify_first_parent()?;
    walk.push(head.id())?;
    let mut commits = Vec::new();
    for oid in walk {
        let c = repo.find_commit(oid.context("cannot walk the history")?)?;
        let when = chrono::DateTime::from_timestamp(c.time().seconds(), 0).unwrap_or_default();
        commits.push(Commit {
            id: c.id().to_string(),
            date: when.format("%Y-%m-%d").to_string(),
            time: when.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
            summary: c.summary().ok().flatten().unwrap_or("").to_string(),
        });
    }
    Ok(Line::new(branch, commits))
}

/// Detect the change points of every series of `built`, reading what they need of `repo`.
pub fn detect(repo: &Repository, built: &mut Built, settings: &Settings) -> anyhow::Result<()> {
    let mut lookups = GitLookups::new(repo, &built.line)?;
    infergate_policy::history::series::detect(&mut lookups, built, settings)
}

/// Reads of the repository, cached.
pub struct GitLookups<'r> {
    repo: &'r Repository,
    patterns: Vec<String>,
    /// Per tree of `docs/adr`, the record in force; and per position of the line (each series
    /// asks for the same commits).
    in_force: BTreeMap<Oid, Option<String>>,
    at_position: BTreeMap<usize, Option<String>>,
}

impl<'r> GitLookups<'r> {
    /// The governed patterns are the settings' at the line's last commit.
    fn new(repo: &'r Repository, line: &Line) -> anyhow::Result<GitLookups<'r>> {
        use crate::settings::{SETTINGS_FILE, Settings};
        let mut l = GitLookups {
            repo,
            patterns: vec![],
            in_force: BTreeMap::new(),
            at_position: BTreeMap::new(),
        };
        let text = match line.commits.len() {
            0 => None,
            n => git::read_text(repo, &l.tree(line, n - 1)?, SETTINGS_FILE)?,
        };
        l.patterns = text
            .and_then(|t| {
                Settings::parse(&infergate_model::config::Source::new(SETTINGS_FILE, t)).ok()
            })
            .unwrap_or_default()
            .governed_patterns();
        Ok(l)
    }

    fn tree(&self, line: &Line, pos: usize) -> anyhow::Result<git2::Tree<'r>> {
        let oid = Oid::from_str(&line.commits[pos].id)?;
        Ok(self.repo.find_commit(oid)?.tree()?)
    }

    fn record_at(&mut self, pos: usize, line: &Line) -> anyhow::Result<Option<String>> {
        let tree = self.tree(line, pos)?;
        let Ok(dir) = tree.get_path(Path::new(infergate_policy::adr::records::ADR_DIR)) else {
            return Ok(None);
        };
        if let Some(r) = self.in_force.get(&dir.id()) {
            return Ok(r.clone());
        }
        let adrs =
            crate::git::records_at(self.repo, &tree, infergate_policy::adr::records::ADR_DIR)?;
        let r = adrs
            .iter()
            .filter(|a| a.status_value() == Some(AdrStatus::Accepted))
            .max_by_key(|a| a.number)
            .map(|a| a.label());
        self.in_force.insert(dir.id(), r.clone());
        Ok(r)
    }
}

impl Lookups for GitLookups<'_> {
    fn record_in_force(&mut self, pos: usize, line: &Line) -> anyhow::Result<Option<String>> {
        if let Some(r) = self.at_position.get(&pos) {
            return Ok(r.clone());
        }
        let r = self.record_at(pos, line)?;
        self.at_position.insert(pos, r.clone());
        Ok(r)
    }

    /// The records added or changed, and the commits that changed a governed file, in the
    /// commits after `good` up to `bad`.
    fn range(
        &self,
        line: &Line,
        good: usize,
        bad: usize,
    ) -> anyhow::Result<(Vec<String>, Vec<String>)> {
        let (mut records, mut governed) = (Vec::new(), Vec::new());
        for pos in good + 1..=bad {
            let (old, new) = (self.tree(line, pos - 1)?, self.tree(line, pos)?);
            let mut touched_governed = false;
            for change in git::tree_changes(self.repo, &old, &new)? {
                let Some(path) = change.new.or(change.old) else { continue };
                let dir = format!("{}/", infergate_policy::adr::records::ADR_DIR);
                if let Some(name) = path.strip_prefix(&dir)
                    && !name.contains('/')
                    && infergate_policy::adr::records::is_record_file(name)
                {
                    let label = git::read_text(self.repo, &new, &path)
                        .ok()
                        .flatten()
                        .map(|t| {
                            infergate_policy::adr::parse::parse_adr(Path::new(&path), &t).label()
                        })
                        .unwrap_or_else(|| format!("{name} (deleted)"));
                    if !records.contains(&label) {
                        records.push(label);
                    }
                }
                if crate::settings::is_governed(&self.patterns, &path) {
                    touched_governed = true;
                }
            }
            if touched_governed {
                governed.push(format!("{} {}", line.short(pos), line.commits[pos].summary));
            }
        }
        Ok((records, governed))
    }
}
