//! The governed sources of `adr check` (`[[adr.source]]` of `configs/xtask.toml`): the engine
//! parameters in the files a team deploys with, read through `infergate_model::sources` into
//! canonical keys. The diff is per canonical key, so flag order, `--flag=value` against
//! `--flag value`, quoting, YAML style and anchors are not changes; a changed, added or removed
//! flag or key is, and a spelling the vocabulary does not know is a change of its own key.
//!
//! Sources of one deployment (and `configs/engine.toml`, of the `default` one) must agree at
//! head on every key they both give ([`drift`]).

use std::collections::BTreeMap;

use anyhow::Context;
use git2::{ObjectType, Tree};
use infergate_model::config::{ConfigKey, Source};
use infergate_model::sources::{Extracted, SourceDecl, extract};

use super::semdiff::{self, KeyChange, same_value};
use super::{FileNote, KeyLines, Sides, git};
use crate::settings;
use infergate_policy::adr::model::Problem;

/// The engine config that belongs to the `default` deployment.
pub(crate) const DEFAULT_ENGINE_FILE: &str = "configs/engine.toml";

/// The declarations at each side.
pub(crate) struct Decls {
    pub base: Vec<SourceDecl>,
    pub head: Vec<SourceDecl>,
}

impl Decls {
    fn at(&self, head: bool) -> &[SourceDecl] {
        if head { &self.head } else { &self.base }
    }

    /// The declaration a path is read by at one side: the first that matches it.
    fn of(&self, head: bool, path: &str) -> Option<&SourceDecl> {
        self.at(head).iter().find(|d| settings::matches(&d.path, path))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.base.is_empty() && self.head.is_empty()
    }
}

/// Every file of `tree` that a declaration of `decls` matches, with its declaration.
fn declared_files<'d>(
    tree: &Tree<'_>,
    decls: &'d [SourceDecl],
) -> anyhow::Result<Vec<(String, &'d SourceDecl)>> {
    let mut out = Vec::new();
    if decls.is_empty() {
        return Ok(out);
    }
    tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        if entry.kind() == Some(ObjectType::Blob) {
            let path = format!("{dir}{}", entry.name().unwrap_or(""));
            if let Some(d) = decls.iter().find(|d| settings::matches(&d.path, &path)) {
                out.push((path, d));
            }
        }
        git2::TreeWalkResult::Ok
    })
    .context("cannot walk the tree")?;
    Ok(out)
}

/// A source read at one side; a file that cannot be read is a tool error naming the file, the
/// line and the side.
fn read(
    sides: &Sides<'_>,
    head: bool,
    path: &str,
    decl: &SourceDecl,
) -> anyhow::Result<Option<Extracted>> {
    let (tree, at) = if head { (sides.head, &sides.at_head) } else { (sides.base, &sides.at_base) };
    let Some(text) = git::read_text(sides.repo, tree, path)? else { return Ok(None) };
    let e = extract(decl, path, &text)
        .with_context(|| format!("cannot read the governed source {path} {at}"))?;
    Ok(Some(e))
}

/// Every declared source at head, read once (path -> its deployment and parameters): the drift
/// check reads them all, and the diff takes its head side from them.
pub(super) type AtHead = BTreeMap<String, (String, Extracted)>;

/// [`AtHead`] of `sides`.
pub(super) fn read_head(sides: &Sides<'_>, decls: &Decls) -> anyhow::Result<AtHead> {
    let mut out = AtHead::new();
    for (path, decl) in declared_files(sides.head, &decls.head)? {
        if let Some(e) = read(sides, true, &path, decl)? {
            out.insert(path, (decl.deployment.clone(), e));
        }
    }
    Ok(out)
}

/// The changes of the declared sources between the two sides: files the diff touches, and
/// every file whose declaration differs between the sides (read otherwise, it says otherwise).
/// `at_head`: the sources already read at head, when the caller has them.
pub(super) fn changes(
    sides: &Sides<'_>,
    decls: &Decls,
    at_head: Option<&AtHead>,
) -> anyhow::Result<(Vec<KeyChange>, KeyLines, Vec<FileNote>)> {
    let mut paths: Vec<String> = Vec::new();
    let mut notes = Vec::new();
    if decls.is_empty() {
        return Ok((Vec::new(), KeyLines::new(), notes));
    }
    for f in git::tree_changes(sides.repo, sides.base, sides.head)? {
        let old = f.old.as_deref().filter(|p| decls.of(false, p).is_some());
        let new = f.new.as_deref().filter(|p| decls.of(true, p).is_some());
        for p in old.iter().chain(new.iter()) {
            if !paths.iter().any(|q| q == p) {
                paths.push(p.to_string());
            }
        }
        notes.extend(super::file_note(&f, old.is_some(), new.is_some()));
    }
    if decls.base != decls.head {
        for (p, _) in declared_files(sides.head, &decls.head)?
            .into_iter()
            .chain(declared_files(sides.base, &decls.base)?)
        {
            if decls.of(false, &p) != decls.of(true, &p) && !paths.contains(&p) {
                paths.push(p);
            }
        }
    }
    paths.sort();
    let mut changes = Vec::new();
    let mut lines = KeyLines::new();
    for p in &paths {
        let old = match decls.of(false, p) {
            Some(d) => read(sides, false, p, d)?,
            None => None,
        };
        let new = match (at_head, decls.of(true, p)) {
            (Some(known), _) => known.get(p).map(|(_, e)| e.clone()),
            (None, Some(d)) => read(sides, true, p, d)?,
            (None, None) => None,
        };
        let as_map = |e: &Option<Extracted>| -> BTreeMap<String, toml::Value> {
            e.iter().flat_map(|e| &e.params).map(|p| (p.key.clone(), p.value.clone())).collect()
        };
        let file_changes = semdiff::diff_maps(p, &as_map(&old), &as_map(&new));
        if let Some(new) = &new {
            for c in file_changes.iter().filter(|c| c.new.is_some()) {
                // The change's key is the parameter's own text (`unmapped."--x"` included).
                if let Some(param) = new.params.iter().find(|p| p.key == c.key) {
                    lines.insert((c.file.clone(), c.key.clone()), param.line);
                }
            }
        }
        changes.extend(file_changes);
    }
    Ok((changes, lines, notes))
}

/// One source's value of a key at head.
struct Given {
    file: String,
    line: usize,
    value: toml::Value,
}

/// Keys that sources of one deployment give differently at head: one problem per pair of
/// disagreeing files and key, at the later file's line, naming both files and lines.
pub(super) fn drift(sides: &Sides<'_>, at_head: &AtHead) -> anyhow::Result<Vec<Problem>> {
    if at_head.is_empty() {
        return Ok(Vec::new());
    }
    // deployment -> key -> what each file gives.
    let mut by: BTreeMap<String, BTreeMap<String, Vec<Given>>> = BTreeMap::new();
    if let Some(text) = git::read_text(sides.repo, sides.head, DEFAULT_ENGINE_FILE)? {
        let src = Source::new(DEFAULT_ENGINE_FILE, text);
        // An invalid engine config is reported where the governed files are diffed.
        if let Ok(table) = semdiff::parse(&src) {
            let keys = by.entry("default".into()).or_default();
            for (key, value) in semdiff::flatten(&table) {
                let line = ConfigKey::parse(&key)
                    .ok()
                    .and_then(|k| src.locate(&k.path()))
                    .map_or(1, |s| src.line_col(s.start).0);
                keys.entry(key).or_default().push(Given {
                    file: DEFAULT_ENGINE_FILE.into(),
                    line,
                    value,
                });
            }
        }
    }
    for (path, (deployment, e)) in at_head {
        let keys = by.entry(deployment.clone()).or_default();
        for p in e.params.iter().filter(|p| !p.key.starts_with("unmapped.")) {
            keys.entry(p.key.clone()).or_default().push(Given {
                file: path.clone(),
                line: p.line,
                value: p.value.clone(),
            });
        }
    }
    let mut out = Vec::new();
    for (deployment, keys) in &by {
        for (key, given) in keys {
            let Some(first) = given.first() else { continue };
            for other in given.iter().skip(1) {
                if !same_value(&first.value, &other.value) {
                    out.push(Problem::new(
                        other.file.clone(),
                        other.line,
                        format!(
                            "{key} = {} here, but {}:{} gives {key} = {}: the sources of \
                             deployment `{deployment}` disagree; make them agree (or generate \
                             one from the other with `cargo xtask engine args --format ...`)",
                            semdiff::inline(&other.value),
                            first.file,
                            first.line,
                            semdiff::inline(&first.value)
                        ),
                    ));
                }
            }
        }
    }
    Ok(out)
}
