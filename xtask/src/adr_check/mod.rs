//! `cargo xtask adr check --base REV [--head REV]`: fail a pull request that changes a governed
//! inference parameter without a new decision record that names it.
//!
//! The tree at merge-base(base, head) is compared with the tree at head (commits only; the work
//! tree is not read). Governed files are `configs/engine*.toml` and the `[adr] governed` list of
//! `configs/xtask.toml` (at the merge base or at head). The pieces:
//!
//! - `crate::git`: revisions, merge base, changed files, blobs, `ADR-Exempt` trailers (I/O);
//! - [`semdiff`]: the key-by-key diff of two versions of a TOML file (pure, in
//!   `infergate_policy::adr::check`);
//! - [`sources`]: the governed sources elsewhere in the repository (`[[adr.source]]`: Helm
//!   values, manifests, scripts...), diffed per canonical key, and their drift at head;
//! - [`rule`]: the rule over typed inputs (pure, in `infergate_policy::adr::check`);
//! - [`check`] puts them together and [`render`] prints the outcome (pure).

pub mod sources;

pub use infergate_policy::adr::check::{rule, semdiff};

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use anyhow::Context;
use clap::Args;
use git2::{Repository, Tree};
use infergate_model::config::{BenchConfig, ConfigKey, Source};

use self::rule::{
    Coverage, Exemption, Input, Outcome, RecordChange, RecordFile, ScenarioChange, Violation,
};
use self::semdiff::KeyChange;
use crate::console::ConsoleTable;
use crate::exit::Status;
use crate::git;
use crate::settings::{self, BENCH_FILE, SETTINGS_FILE, Settings};
use crate::text::{gh_escape, plural, quote};
use crate::thresholds::GATE_FILE;
use infergate_policy::adr::lint;
use infergate_policy::adr::live;
use infergate_policy::adr::model::{Adr, AdrStatus, Problem};
use infergate_policy::adr::parse::{number_from_file_name, parse_adr};
use infergate_policy::adr::records::is_record_file;

/// `cargo xtask adr check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The branch the pull request merges into: a commit SHA, branch or tag (e.g.
    /// `origin/main`, or `${{ github.event.pull_request.base.sha }}` in CI).
    #[arg(long, value_name = "REV")]
    pub base: String,
    /// The pull request's commit (a detached HEAD works).
    #[arg(long, value_name = "REV", default_value = "HEAD")]
    pub head: String,
    /// Also print GitHub Actions `::error` / `::warning` annotations.
    #[arg(long)]
    pub github: bool,
}

/// A revision as named and as resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rev {
    pub name: String,
    /// Abbreviated commit id.
    pub id: String,
}

/// A governed file that was added, deleted or renamed (shown as a note beside its keys).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileNote {
    pub path: String,
    pub note: String,
}

/// The line at head of each changed key that is still there, by (file, key).
pub(crate) type KeyLines = BTreeMap<(String, String), usize>;

/// What the check looked at and what the rule says.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub base: Rev,
    pub head: Rev,
    pub merge_base: String,
    /// Commits in merge-base..head.
    pub commits: usize,
    /// The clone is shallow (the merge base was found all the same).
    pub shallow: bool,
    /// Governed file patterns.
    pub governed: Vec<String>,
    /// The declared sources at head (`path (engine)`).
    pub sources: Vec<String>,
    /// Added, deleted and renamed governed files.
    pub file_notes: Vec<FileNote>,
    /// Record files the diff touches.
    pub records: Vec<RecordChange>,
    /// Line at head of each changed key that is still there, for annotations.
    pub key_lines: KeyLines,
    /// Thresholds that leave or enter the live set (gate.toml) between the merge base and head.
    pub gate_changes: Vec<live::ThresholdChange>,
    /// `ADR-Exempt` trailers without a reason: not honoured.
    pub refused_exemptions: Vec<Exemption>,
    pub outcome: Outcome,
}

/// Run the check in the repository containing `root`; records are in `dir` (relative to the
/// repository root). Errors are tool errors (exit 2): unknown revisions, a shallow clone
/// without the merge base, invalid TOML in a governed file or in the settings.
pub fn check(root: &Path, dir: &str, base: &str, head: &str) -> anyhow::Result<Report> {
    let repo = git::open(root)?;
    let base_commit = git::resolve(&repo, base, "base")?;
    let head_commit = git::resolve(&repo, head, "head")?;
    let mb = git::merge_base(&repo, base_commit.id(), head_commit.id())?;
    let mb_short = git::short(mb);
    let head_short = git::short(head_commit.id());
    let mb_tree =
        repo.find_commit(mb).and_then(|c| c.tree()).context("cannot read the merge base")?;
    let head_tree = head_commit.tree().context("cannot read the head tree")?;
    let at_base = format!("at the merge base {mb_short}");
    let at_head = format!("at head {head_short}");

    let sides = Sides { repo: &repo, base: &mb_tree, head: &head_tree, at_base, at_head };
    let gov = governed_patterns(&sides)?;
    let governed = gov.patterns.clone();
    let mut config_problems = gov.problems.clone();
    let dir = dir.trim_end_matches('/');
    let changed = changed_files(&sides, dir, &governed)?;
    let (mut changes, mut key_lines) = key_changes(&sides, changed.governed_paths)?;
    let (mut file_notes, records, assets) = (changed.file_notes, changed.records, changed.assets);
    repointed_changes(
        &sides,
        &gov,
        &mut changes,
        &mut key_lines,
        &mut file_notes,
        &mut config_problems,
    )?;
    let at_head = sources::read_head(&sides, &gov.decls)?;
    let (source_changes, source_lines, source_notes) =
        sources::changes(&sides, &gov.decls, Some(&at_head))?;
    let toml_governed = |f: &str| settings::is_governed(&governed, f);
    changes.extend(source_changes.into_iter().filter(|c| !toml_governed(&c.file)));
    key_lines.extend(source_lines);
    file_notes.extend(source_notes.into_iter().filter(|n| !toml_governed(&n.path)));
    let drift = sources::drift(&sides, &at_head)?;

    // The records at head: lint, and gate.toml against them.
    let head_records: Vec<(std::path::PathBuf, String)> =
        git::read_dir(&repo, &head_tree, dir, is_record_file)?
            .into_iter()
            .map(|(p, t)| (p.into(), t))
            .collect();
    let adrs: Vec<Adr> = head_records.iter().map(|(p, t)| parse_adr(p, t)).collect();
    let mut lint_problems = lint::lint_adrs(&adrs);
    lint_problems.extend(config_problems);
    // Scope at head: the profiles of the bench configuration, the files decision lines name.
    let profiles =
        git::read_text(&repo, &head_tree, BENCH_FILE)?.and_then(|t| lint::bench_profiles(&t));
    let mut missing_files = Vec::new();
    for f in lint::decision_files(&adrs) {
        if git::read_text(&repo, &head_tree, &f)?.is_none() {
            missing_files.push(f);
        }
    }
    let mut missing_assets = Vec::new();
    for f in lint::asset_files(&adrs) {
        if git::read_text(&repo, &head_tree, &f)?.is_none() {
            missing_assets.push(f);
        }
    }
    let facts = lint::RepoFacts { profiles, missing_files, missing_assets };
    lint_problems.extend(lint::lint_scope(&adrs, &facts));
    let gate = git::read_text(&repo, &head_tree, GATE_FILE)?;
    let sync = live::check_in_sync(&adrs, dir, gate.as_deref());
    // The thresholds in force at each side, as the records say (gate.toml follows them).
    let base_adrs: Vec<Adr> = git::read_dir(&repo, &mb_tree, dir, is_record_file)?
        .iter()
        .map(|(p, t)| parse_adr(Path::new(p), t))
        .collect();
    let gate_changes =
        live::threshold_changes(&live::live_thresholds(&base_adrs), &live::live_thresholds(&adrs));

    // Exemptions.
    let commits = git::pr_commits(&repo, head_commit.id(), mb)?;
    let (exempt, refused): (Vec<_>, Vec<_>) =
        git::exemptions(&commits).into_iter().partition(|(_, e)| !e.reason.is_empty());
    let refused: Vec<Exemption> = refused.into_iter().map(|(_, e)| e).collect();
    let mut exemptions = Vec::new();
    for (oid, mut e) in exempt {
        e.keys = commit_keys(&repo, oid, dir, &governed, &gov.decls)?;
        exemptions.push(e);
    }

    let mut outcome = rule::evaluate(Input {
        changes: &changes,
        records: &records,
        lint: &lint_problems,
        thresholds: &sync,
        gate_file: GATE_FILE,
        exemptions: &exemptions,
    });
    outcome.violations.extend(rule::asset_edits(&assets, &base_adrs));
    outcome.violations.extend(drift.into_iter().map(Violation::Drift));
    let added: Vec<std::path::PathBuf> = outcome.added.iter().map(|(_, p, _)| p.clone()).collect();
    outcome.violations.extend(rule::live_contradictions(&adrs, &added));
    outcome.violations.extend(stale_alerts(&repo, &head_tree, &adrs)?);
    let threshold_profiles: Vec<Option<String>> =
        live::live_thresholds(&adrs).into_iter().map(|t| t.profile).collect();
    let scenario = scenario_changes(&sides, &threshold_profiles)?;
    outcome.violations.extend(rule::scenario_edits(&scenario, &records));
    let refreshed = refreshed_elsewhere(&sides, &scenario)?;
    outcome.violations.extend(rule::refreshed_edits(&refreshed, &records));
    Ok(Report {
        base: Rev { name: base.to_string(), id: git::short(base_commit.id()) },
        head: Rev { name: head.to_string(), id: head_short },
        merge_base: mb_short,
        commits: commits.len(),
        shallow: repo.is_shallow(),
        governed,
        sources: gov.decls.head.iter().map(|d| format!("{} ({})", d.path, d.engine)).collect(),
        file_notes,
        records,
        key_lines,
        gate_changes,
        refused_exemptions: refused,
        outcome,
    })
}

/// The alert rules at head against what the live records at head generate (`adr alerts`): a
/// file that differs is stale; a missing one only when the records state conditions.
fn stale_alerts(repo: &Repository, head: &Tree, adrs: &[Adr]) -> anyhow::Result<Vec<Violation>> {
    use infergate_policy::adr::alerts::{K8S_FILE, RULES_FILE, render_records};
    let (conds, r) = render_records(adrs);
    let mut out = Vec::new();
    for (file, want) in [(RULES_FILE, &r.rules), (K8S_FILE, &r.k8s)] {
        let stale = match git::read_text(repo, head, file)? {
            Some(text) => text != *want,
            None => !conds.is_empty(),
        };
        if stale {
            out.push(Violation::Stale(format!(
                "{file} is out of date with the rollback conditions of the records at head; run \
                 `cargo xtask adr alerts` and commit it"
            )));
        }
    }
    Ok(out)
}

/// The governed keys commit `oid` changes against its first parent (none for a root commit: an
/// exemption there waives nothing). A governed file that is not valid TOML in that commit or its parent
/// contributes no key: nothing of it is waived.
fn commit_keys(
    repo: &Repository,
    oid: git2::Oid,
    dir: &str,
    governed: &[String],
    decls: &sources::Decls,
) -> anyhow::Result<Vec<(String, String)>> {
    let commit = repo.find_commit(oid).with_context(|| format!("cannot read commit {oid}"))?;
    let tree = commit.tree().with_context(|| format!("cannot read the tree of {oid}"))?;
    let Ok(parent) = commit.parent(0) else { return Ok(Vec::new()) };
    let parent = parent.tree().with_context(|| format!("cannot read the parent of {oid}"))?;
    let short = git::short(oid);
    let sides = Sides {
        repo,
        base: &parent,
        head: &tree,
        at_base: format!("in the parent of {short}"),
        at_head: format!("in {short}"),
    };
    let changed = changed_files(&sides, dir, governed)?;
    let mut keys = Vec::new();
    for p in changed.governed_paths {
        if let Ok((changes, _)) = key_changes(&sides, vec![p]) {
            keys.extend(changes.into_iter().map(|c| (c.file, c.key)));
        }
    }
    // The sources as head declares them, on both sides of the commit.
    let decls = sources::Decls { base: decls.head.clone(), head: decls.head.clone() };
    if let Ok((changes, _, _)) = sources::changes(&sides, &decls, None) {
        keys.extend(changes.into_iter().map(|c| (c.file, c.key)));
    }
    Ok(keys)
}

/// The workload files of each gated profile whose content, or whose name in the profile,
/// differs between the merge base and head. A profile that is new at head, or a bench
/// configuration that does not resolve at either side, contributes none (its problems are
/// reported where the profile is run).
fn scenario_changes(
    sides: &Sides<'_>,
    threshold_profiles: &[Option<String>],
) -> anyhow::Result<Vec<ScenarioChange>> {
    let config = |tree: &Tree<'_>| -> anyhow::Result<Option<BenchConfig>> {
        let Some(text) = git::read_text(sides.repo, tree, BENCH_FILE)? else { return Ok(None) };
        Ok(BenchConfig::from_source(Source::new(BENCH_FILE, text)).ok())
    };
    let (Some(base), Some(head)) = (config(sides.base)?, config(sides.head)?) else {
        return Ok(Vec::new());
    };
    let files = |cfg: &BenchConfig, profile: &str| -> Option<Vec<(ConfigKey, String)>> {
        let p = cfg.resolve(profile, &[]).ok()?.profile;
        let files = p.workload.files().into_iter();
        Some(files.map(|(k, f)| (ConfigKey::literal(k), f.to_string())).collect())
    };
    let mut out = Vec::new();
    for profile in rule::gated_profiles(threshold_profiles, &head.profile_names()) {
        let (Some(old), Some(new)) = (files(&base, &profile), files(&head, &profile)) else {
            continue;
        };
        let mut keys: Vec<&ConfigKey> = old.iter().chain(&new).map(|(k, _)| k).collect();
        keys.sort();
        keys.dedup();
        for key in keys {
            let at = |v: &[(ConfigKey, String)]| {
                v.iter().find(|(k, _)| k == key).map(|(_, f)| f.clone())
            };
            let how = match (at(&old), at(&new)) {
                (Some(o), Some(n)) if o != n => {
                    Some((n.clone(), format!("now names {n} (was {o})")))
                }
                (Some(o), Some(n)) => {
                    let before = git::read_text(sides.repo, sides.base, &o)?;
                    let after = git::read_text(sides.repo, sides.head, &n)?;
                    (before != after).then(|| (n.clone(), "was modified".to_string()))
                }
                (None, Some(n)) => Some((n, "is newly set".to_string())),
                (Some(o), None) => Some((o, "is no longer set".to_string())),
                (None, None) => None,
            };
            if let Some((file, how)) = how {
                let how = format!("{how}{}", refresh_note(sides, &file)?);
                out.push(ScenarioChange { profile: profile.clone(), key: key.clone(), file, how });
            }
        }
    }
    Ok(out)
}

/// The datasets the diff changes that have a provenance beside them at head (`dataset refresh`
/// wrote them) and that no gated profile's scenario change names already: the acceptance
/// dataset, or one a profile without thresholds reads. Each with what changed and the refresh.
fn refreshed_elsewhere(
    sides: &Sides<'_>,
    scenario: &[ScenarioChange],
) -> anyhow::Result<Vec<(String, String)>> {
    use infergate_model::refresh::provenance::provenance_name;
    let mut out = Vec::new();
    for change in git::tree_changes(sides.repo, sides.base, sides.head)? {
        let Some(file) = change.new else { continue };
        let has_provenance = git::read_text(sides.repo, sides.head, &provenance_name(&file))?;
        if file.ends_with(".provenance.json")
            || has_provenance.is_none()
            || scenario.iter().any(|c| c.file == file)
        {
            continue;
        }
        let how = if change.old.is_none() { "was added" } else { "was modified" };
        out.push((file.clone(), format!("{how}{}", refresh_note(sides, &file)?)));
    }
    Ok(out)
}

/// What the provenance beside a changed workload file at head says (`dataset refresh`): the
/// refresh that wrote it, or that the provenance describes another version of it; empty
/// without one. A refreshed dataset is a changed scenario like any other edit.
fn refresh_note(sides: &Sides<'_>, file: &str) -> anyhow::Result<String> {
    use infergate_model::refresh::provenance::{Provenance, provenance_name};
    let name = provenance_name(file);
    let Some(text) = git::read_text(sides.repo, sides.head, &name)? else {
        return Ok(String::new());
    };
    let content = git::read_text(sides.repo, sides.head, file)?.unwrap_or_default();
    let hash = infergate_model::workload::WorkloadFile::of(file, content.as_bytes()).hash;
    Ok(match infergate_model::artifact::parse::<Provenance>(Path::new(&name), &text) {
        Ok(p) if p.dataset.output_hash == hash => format!(
            " (refreshed from production requests by `cargo xtask dataset refresh`: {}; \
             provenance {name})",
            p.summary_line()
        ),
        Ok(_) => format!(" (its provenance {name} describes another version of it)"),
        Err(e) => format!(" (its provenance is unreadable: {e})"),
    })
}

/// The two trees `adr check` compares, with the words that name them in errors.
struct Sides<'r> {
    repo: &'r Repository,
    base: &'r Tree<'r>,
    head: &'r Tree<'r>,
    /// `at the merge base <id>`.
    at_base: String,
    /// `at head <id>`.
    at_head: String,
}

/// The governed file patterns: those of the settings at either side, and every file the bench
/// configuration names as an `engine_config` at either side. An `engine_config` at head that no
/// record could govern (not under configs/, not .toml) is a problem at its line.
fn governed_patterns(sides: &Sides<'_>) -> anyhow::Result<Governance> {
    let mut governed = Vec::new();
    let mut problems = Vec::new();
    let mut repointed = Vec::new();
    let mut at_base: BTreeMap<String, String> = BTreeMap::new();
    let mut decls = sources::Decls { base: Vec::new(), head: Vec::new() };
    for (tree, at) in [(sides.base, &sides.at_base), (sides.head, &sides.at_head)] {
        let text = git::read_text(sides.repo, tree, SETTINGS_FILE)?;
        let s = match text {
            Some(t) => Settings::parse(&Source::new(SETTINGS_FILE, t))
                .with_context(|| format!("invalid {SETTINGS_FILE} {at}"))?,
            None => Settings::default(),
        };
        for p in s.governed_patterns() {
            if !governed.contains(&p) {
                governed.push(p);
            }
        }
        if std::ptr::eq(tree, sides.head) {
            decls.head = s.adr.sources;
        } else {
            decls.base = s.adr.sources;
        }
        let Some(bench) = git::read_text(sides.repo, tree, BENCH_FILE)? else { continue };
        let refs = settings::engine_config_refs(&Source::new(BENCH_FILE, bench))
            .with_context(|| format!("invalid {BENCH_FILE} {at}"))?;
        let is_head = std::ptr::eq(tree, sides.head);
        for r in refs {
            if !is_head {
                at_base.insert(r.key.clone(), r.path.clone());
            }
            match r.ungovernable() {
                None => {
                    if is_head && at_base.get(&r.key) != Some(&r.path) {
                        repointed.push((r.path.clone(), r.key.clone(), r.line));
                    }
                    if !settings::is_governed(&governed, &r.path) {
                        governed.push(r.path);
                    }
                }
                Some(why) if is_head => problems.push(Problem::new(BENCH_FILE, r.line, why)),
                Some(_) => {}
            }
        }
    }
    Ok(Governance { patterns: governed, problems, repointed, decls })
}

/// The governed files and what the bench configuration says about them.
struct Governance {
    patterns: Vec<String>,
    /// `engine_config` settings at head that no record could govern.
    problems: Vec<Problem>,
    /// `(path, key, line)`: an `engine_config` setting that names another file at head than at
    /// the merge base (or is new): runs of that profile take every key of the file from now on.
    repointed: Vec<(String, String, usize)>,
    /// The `[[adr.source]]` declarations at each side.
    decls: sources::Decls,
}

/// Every key of each file an `engine_config` setting newly points at counts as set (the whole
/// file against nothing), replacing that file's own diff; a file that does not exist at head is
/// a problem at the setting's line.
fn repointed_changes(
    sides: &Sides<'_>,
    gov: &Governance,
    changes: &mut Vec<KeyChange>,
    key_lines: &mut KeyLines,
    notes: &mut Vec<FileNote>,
    problems: &mut Vec<Problem>,
) -> anyhow::Result<()> {
    let mut done: Vec<&str> = Vec::new();
    for (path, key, line) in &gov.repointed {
        if done.contains(&path.as_str()) {
            continue;
        }
        done.push(path);
        let Some(text) = git::read_text(sides.repo, sides.head, path)? else {
            problems.push(Problem::new(
                BENCH_FILE,
                *line,
                format!("`{key}` names {path}, which does not exist {}", sides.at_head),
            ));
            continue;
        };
        let src = Source::new(path, text);
        let all = semdiff::diff_file(path, None, Some(&src))
            .with_context(|| format!("{path} {} is not valid TOML", sides.at_head))?;
        changes.retain(|c| &c.file != path);
        for c in &all {
            if let Some(span) = ConfigKey::parse(&c.key).ok().and_then(|k| src.locate(&k.path())) {
                key_lines.insert((c.file.clone(), c.key.clone()), src.line_col(span.start).0);
            }
        }
        changes.extend(all);
        notes.retain(|n| &n.path != path);
        notes.push(FileNote {
            path: path.clone(),
            note: format!(
                "now the engine config of `{key}` ({BENCH_FILE}:{line}): every key of it counts as set"
            ),
        });
    }
    Ok(())
}

/// The governed files and records a diff touches.
struct Changed {
    /// Governed files changed (at either path of a rename), in diff order.
    governed_paths: Vec<String>,
    /// Added, deleted and renamed governed files.
    file_notes: Vec<FileNote>,
    /// Record files of `dir` changed, paired old with new.
    records: Vec<RecordChange>,
    /// Files of `dir/assets/` changed.
    assets: Vec<rule::AssetChange>,
}

/// The files that changed between the two sides: governed files (`governed` patterns) and
/// records (files of `dir`).
fn changed_files(sides: &Sides<'_>, dir: &str, governed: &[String]) -> anyhow::Result<Changed> {
    let files = git::tree_changes(sides.repo, sides.base, sides.head)?;
    let in_records_dir = |p: &str| {
        p.rsplit_once('/').is_some_and(|(parent, name)| parent == dir && is_record_file(name))
    };
    let assets_dir = format!("{dir}/{}", infergate_policy::adr::model::ASSETS_DIR);
    let mut governed_paths: Vec<String> = Vec::new();
    let mut file_notes = Vec::new();
    let (mut old_records, mut new_records) = (Vec::new(), Vec::new());
    let mut assets = Vec::new();
    for f in &files {
        let old_asset = f.old.as_deref().filter(|p| p.starts_with(&assets_dir));
        let new_asset = f.new.as_deref().filter(|p| p.starts_with(&assets_dir));
        match (old_asset, new_asset) {
            (_, Some(n)) => {
                let how = match f.old.as_deref() {
                    None => "added".to_string(),
                    Some(o) if o == n => "modified".to_string(),
                    Some(o) => format!("renamed from {o}"),
                };
                assets.push(rule::AssetChange { path: n.into(), how });
            }
            (Some(o), None) => {
                let how =
                    if f.new.is_some() { "moved out of the assets directory" } else { "deleted" };
                assets.push(rule::AssetChange { path: o.into(), how: how.into() });
            }
            (None, None) => {}
        }
        let old_gov = f.old.as_deref().filter(|p| settings::is_governed(governed, p));
        let new_gov = f.new.as_deref().filter(|p| settings::is_governed(governed, p));
        for p in old_gov.iter().chain(new_gov.iter()) {
            if !governed_paths.iter().any(|g| g == p) {
                governed_paths.push(p.to_string());
            }
        }
        file_notes.extend(file_note(f, old_gov.is_some(), new_gov.is_some()));
        if let Some(p) = f.old.as_deref().filter(|p| in_records_dir(p)) {
            old_records
                .extend(git::read_text(sides.repo, sides.base, p)?.map(|t| RecordFile::new(p, t)));
        }
        if let Some(p) = f.new.as_deref().filter(|p| in_records_dir(p)) {
            new_records
                .extend(git::read_text(sides.repo, sides.head, p)?.map(|t| RecordFile::new(p, t)));
        }
    }
    Ok(Changed {
        governed_paths,
        file_notes,
        records: pair_records(old_records, new_records),
        assets,
    })
}

/// What happened to a changed file that is governed at the base (`old`) or at head (`new`):
/// renamed, added or deleted (a file modified in place has no note).
fn file_note(f: &git::FileChange, old: bool, new: bool) -> Option<FileNote> {
    match (f.old.as_deref(), f.new.as_deref()) {
        (Some(o), Some(n)) if o != n && (old || new) => {
            Some(FileNote { path: n.into(), note: format!("renamed from {o}") })
        }
        (None, Some(n)) if new => Some(FileNote { path: n.into(), note: "added".into() }),
        (Some(o), None) if old => Some(FileNote { path: o.into(), note: "deleted".into() }),
        _ => None,
    }
}

/// The semantic diff of each governed file, by path (a renamed file loses every key at its old
/// path and gains them at its new one), and the line at head of each key still there.
fn key_changes(
    sides: &Sides<'_>,
    governed_paths: Vec<String>,
) -> anyhow::Result<(Vec<KeyChange>, KeyLines)> {
    let mut governed_paths = governed_paths;
    governed_paths.sort();
    let mut changes: Vec<KeyChange> = Vec::new();
    let mut key_lines = BTreeMap::new();
    for p in &governed_paths {
        let old = git::read_text(sides.repo, sides.base, p)?.map(|t| Source::new(p, t));
        let new = git::read_text(sides.repo, sides.head, p)?.map(|t| Source::new(p, t));
        if let Some(o) = &old {
            semdiff::parse(o)
                .with_context(|| format!("{p} {} is not valid TOML", sides.at_base))?;
        }
        if let Some(n) = &new {
            semdiff::parse(n)
                .with_context(|| format!("{p} {} is not valid TOML", sides.at_head))?;
        }
        let file_changes = semdiff::diff_file(p, old.as_ref(), new.as_ref())?;
        if let Some(n) = &new {
            for c in file_changes.iter().filter(|c| c.new.is_some()) {
                if let Some(span) = ConfigKey::parse(&c.key).ok().and_then(|k| n.locate(&k.path()))
                {
                    key_lines.insert((c.file.clone(), c.key.clone()), n.line_col(span.start).0);
                }
            }
        }
        changes.extend(file_changes);
    }
    Ok((changes, key_lines))
}

/// Record files at the merge base and at head (those the diff touches) as changes: the same
/// path, or else the same record number (a renamed record), is one record changed; what is left
/// is added or deleted. Git's similarity-based rename detection is not used for records: two
/// records written from the same template look alike without being the same record.
pub(crate) fn pair_records(old: Vec<RecordFile>, new: Vec<RecordFile>) -> Vec<RecordChange> {
    let number = |f: &RecordFile| number_from_file_name(&f.path);
    let mut old: Vec<Option<RecordFile>> = old.into_iter().map(Some).collect();
    let mut out = Vec::new();
    for n in new {
        let same_path = old.iter().position(|o| o.as_ref().is_some_and(|o| o.path == n.path));
        let same_number = || {
            let num = number(&n)?;
            old.iter().position(|o| o.as_ref().is_some_and(|o| number(o) == Some(num)))
        };
        let matched = same_path.or_else(same_number).and_then(|i| old[i].take());
        out.push(RecordChange { old: matched, new: Some(n) });
    }
    out.extend(old.into_iter().flatten().map(|o| RecordChange { old: Some(o), new: None }));
    out
}

/// `cargo xtask adr check`: print the report; exit 1 when the rule is broken (and no commit is
/// exempt).
pub fn run(root: &Path, dir: &Path, args: CheckArgs) -> anyhow::Result<Status> {
    let dir = dir.to_string_lossy().replace('\\', "/");
    let report = check(root, &dir, &args.base, &args.head)?;
    print!("{}", crate::text::as_invoked(&render(&report, args.github)));
    for e in &report.outcome.exemptions {
        eprintln!(
            "warning: adr check is waived for {} by `ADR-Exempt: {}` in commit {}",
            plural(e.keys.len(), "governed key"),
            e.reason,
            e.commit
        );
    }
    Ok(report.outcome.status())
}

/// The title `adr new` is suggested for the keys a record must name.
pub(crate) fn suggested_title(changes: &[&KeyChange]) -> String {
    match changes {
        [c] => match &c.new {
            Some(v) => format!("Set {} to {}", c.key, semdiff::inline(v)),
            None => format!("Remove {}", c.key),
        },
        [a, b] => format!("Change {} and {}", a.key, b.key),
        [a, b, c] => format!("Change {}, {} and {}", a.key, b.key, c.key),
        many => format!("Change {} inference parameters", many.len()),
    }
}

/// The exact `cargo xtask adr new` command that starts the missing record.
pub(crate) fn adr_new_command(changes: &[&KeyChange]) -> String {
    format!(
        "cargo xtask adr new {} --baseline RUN_BASE --exp RUN_HEAD",
        quote(&suggested_title(changes))
    )
}

fn coverage_cell(c: &Coverage) -> String {
    if c.covered() {
        return c
            .covered_by
            .iter()
            .map(|n| format!("{} ({}:{})", n.label, n.path.display(), n.line))
            .collect::<Vec<_>>()
            .join(", ");
    }
    if c.near_misses.is_empty() {
        "not covered".into()
    } else {
        format!("not covered ({})", c.near_misses.join("; "))
    }
}

/// The coverage table: key, old -> new, covered by.
pub(crate) fn coverage_table(outcome: &Outcome) -> String {
    let mut table = ConsoleTable::markdown(["Key", "Old -> new", "Covered by"]);
    for c in &outcome.coverage {
        table.row([c.change.target(), c.change.old_to_new(), coverage_cell(c)]);
    }
    table.to_string()
}

fn record_kind(rc: &RecordChange) -> (String, &'static str) {
    match (&rc.old, &rc.new) {
        (None, Some(n)) => (n.path.display().to_string(), "added"),
        (Some(o), None) => (o.path.display().to_string(), "deleted"),
        (Some(o), Some(n)) if o.path != n.path => {
            (format!("{} (from {})", n.path.display(), o.path.display()), "renamed")
        }
        (_, Some(n)) => (n.path.display().to_string(), "modified"),
        (None, None) => (String::new(), "unchanged"),
    }
}

/// The report as `adr check` prints it.
pub fn render(r: &Report, github: bool) -> String {
    ReportText { report: r, github }.to_string()
}

/// The report as [`render`] prints it, written part by part.
struct ReportText<'a> {
    report: &'a Report,
    github: bool,
}

impl fmt::Display for ReportText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.report;
        render_header(f, r)?;
        render_changes(f, r)?;
        render_fix(f, r)?;
        render_verdict(f, r)?;
        if self.github {
            annotations(f, r)?;
        }
        Ok(())
    }
}

/// What was compared, the governed files, and the exemptions (honoured or refused).
fn render_header(w: &mut fmt::Formatter<'_>, r: &Report) -> fmt::Result {
    let o = &r.outcome;
    writeln!(
        w,
        "adr check: base {} ({}), head {} ({}), merge base {}, {}",
        r.base.name,
        r.base.id,
        r.head.name,
        r.head.id,
        r.merge_base,
        plural(r.commits, "commit")
    )?;
    if r.shallow {
        writeln!(w, "note: shallow clone; the merge base was found in the fetched history")?;
    }
    writeln!(w, "governed files: {}", r.governed.join(", "))?;
    if !r.sources.is_empty() {
        writeln!(w, "governed sources: {}", r.sources.join(", "))?;
    }
    for e in &o.exemptions {
        writeln!(
            w,
            "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
        )?;
        writeln!(w, "!!! ADR-Exempt: {}", e.reason)?;
        writeln!(w, "!!! in commit {} \"{}\"", e.commit, e.summary)?;
        if e.keys.is_empty() {
            writeln!(w, "!!! it waives nothing: this commit changes no governed key")?;
        } else {
            writeln!(
                w,
                "!!! it waives the record for the governed keys this commit changes, and nothing \
                 else (record edits, gate.toml, lint and other commits' keys are still checked):"
            )?;
            for (file, key) in &e.keys {
                writeln!(w, "!!!   {file}: {key}")?;
            }
        }
        writeln!(
            w,
            "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
        )?;
    }
    for e in &r.refused_exemptions {
        writeln!(
            w,
            "warning: commit {} has an `ADR-Exempt:` trailer without a reason; it is ignored \
             (write `ADR-Exempt: <why this change cannot wait for a record>`)",
            e.commit
        )?;
    }
    Ok(())
}

/// The governed changes, the records the diff touches, their coverage and the violations.
fn render_changes(w: &mut fmt::Formatter<'_>, r: &Report) -> fmt::Result {
    let o = &r.outcome;
    if o.coverage.is_empty() {
        writeln!(w, "governed changes: none")?;
    } else {
        writeln!(w, "governed changes:")?;
        for n in &r.file_notes {
            writeln!(w, "  {}: {}", n.path, n.note)?;
        }
        for c in &o.coverage {
            writeln!(w, "  {}", c.change)?;
        }
    }
    if !r.records.is_empty() {
        writeln!(w, "records:")?;
        for rc in &r.records {
            let (path, kind) = record_kind(rc);
            let status = rc
                .new
                .as_ref()
                .and_then(|n| parse_adr(&n.path, &n.text).status_value())
                .map_or(String::new(), |s| format!(", {s}"));
            writeln!(w, "  {path}: {kind}{status}")?;
        }
    }
    if !r.gate_changes.is_empty() {
        let (leave, enter) = r
            .gate_changes
            .iter()
            .fold((0, 0), |(l, e), c| if c.enters { (l, e + 1) } else { (l + 1, e) });
        writeln!(w, "thresholds in force ({GATE_FILE}): {leave} leave, {enter} enter",)?;
        for c in &r.gate_changes {
            writeln!(w, "  {c}")?;
        }
    }
    if !o.coverage.is_empty() {
        writeln!(w, "{}", coverage_table(o))?;
    }
    if !o.violations.is_empty() {
        writeln!(w, "violations:")?;
        for v in &o.violations {
            writeln!(w, "  {v}")?;
        }
    }
    Ok(())
}

/// How to fix what is not covered: the `adr new` command and the decision lines to write.
fn render_fix(w: &mut fmt::Formatter<'_>, r: &Report) -> fmt::Result {
    let o = &r.outcome;
    let uncovered: Vec<&KeyChange> = o.uncovered().map(|c| &c.change).collect();
    if !uncovered.is_empty() {
        writeln!(
            w,
            "\n{} not named by a record this pull request adds (Proposed or Accepted, with the \
             new value). Start the record from a bench run of the base configuration and one of \
             this change (RUN_BASE, RUN_HEAD: run directories of `cargo xtask bench`):\n\n  {}\n\n\
             Its Decision section must have these lines (adr new writes them from the runs' \
             engine parameters):\n",
            if uncovered.len() == 1 {
                "1 changed key is".to_string()
            } else {
                format!("{} changed keys are", uncovered.len())
            },
            adr_new_command(&uncovered)
        )?;
        for c in &uncovered {
            writeln!(w, "  - {}", c.decision_line())?;
        }
        let open: Vec<String> = o
            .added
            .iter()
            .filter(|(_, _, s)| matches!(s, Some(AdrStatus::Proposed | AdrStatus::Accepted)))
            .map(|(label, path, _)| format!("{label} ({})", path.display()))
            .collect();
        if !open.is_empty() {
            writeln!(
                w,
                "\n(or add the missing lines to the record this pull request adds: {})",
                open.join(", ")
            )?;
        }
        writeln!(w)?;
    }
    Ok(())
}

/// The verdict line (and the exemption that waives it).
fn render_verdict(w: &mut fmt::Formatter<'_>, r: &Report) -> fmt::Result {
    let o = &r.outcome;
    let n = o.coverage.len();
    let covered = o.coverage.iter().filter(|c| c.covered()).count();
    let keys = if n == 0 {
        "no governed key changed".to_string()
    } else {
        format!("{} changed, {covered} covered", plural(n, "governed key"))
    };
    let waived = o.waived().count();
    let keys = if waived > 0 { format!("{keys}, {waived} waived") } else { keys };
    let verdict = if o.rule_holds() {
        "passed".to_string()
    } else if o.passed() {
        "WAIVED by ADR-Exempt (it would have FAILED)".to_string()
    } else {
        "FAILED".to_string()
    };
    writeln!(w, "adr check {verdict}: {keys}, {}", plural(o.violations.len(), "other violation"))?;
    for c in o.waived() {
        let e = o.exemptions.iter().find(|e| Some(&e.commit) == c.exempted_by.as_ref());
        if let Some(e) = e {
            writeln!(
                w,
                "waived: {} (ADR-Exempt: {}, commit {})",
                c.change.target(),
                e.reason,
                e.commit
            )?;
        }
    }
    Ok(())
}

/// GitHub Actions annotations: an `::error` per uncovered key (at its line at head; a
/// `::warning` when an exemption waives it) and per violation, and a `::warning` per exemption.
pub fn render_github(r: &Report) -> String {
    Annotations(r).to_string()
}

/// The annotations of [`render_github`].
struct Annotations<'a>(&'a Report);

impl fmt::Display for Annotations<'_> {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        annotations(out, self.0)
    }
}

fn annotations(out: &mut fmt::Formatter<'_>, r: &Report) -> fmt::Result {
    let o = &r.outcome;
    for e in &o.exemptions {
        writeln!(
            out,
            "::warning title={}::{}",
            gh_escape("ADR-Exempt", true),
            gh_escape(&format!("adr check waived by commit {}: {}", e.commit, e.reason), false)
        )?;
    }
    for c in o.uncovered() {
        let level = if c.exempted_by.is_some() { "warning" } else { "error" };
        let ch = &c.change;
        let line = r
            .key_lines
            .get(&(ch.file.clone(), ch.key.clone()))
            .map_or(String::new(), |l| format!(",line={l}"));
        writeln!(
            out,
            "::{level} file={}{line},title={}::{}",
            gh_escape(&ch.file, true),
            gh_escape(&format!("adr check: {}", ch.key), true),
            gh_escape(
                &format!(
                    "{} changed ({}) without a new decision record naming it; add one with `{}`",
                    ch.target(),
                    ch.old_to_new(),
                    ch.decision_line()
                ),
                false
            )
        )?;
    }
    for v in &o.violations {
        let (file, line, message) = match v {
            Violation::Lint(p)
            | Violation::AcceptedEdited(p)
            | Violation::ScenarioChanged(p)
            | Violation::Drift(p) => {
                (p.path.display().to_string(), format!(",line={}", p.line), p.message.clone())
            }
            Violation::Thresholds(m) => (GATE_FILE.to_string(), String::new(), m.clone()),
            Violation::LiveContradicted(p) => {
                (p.path.display().to_string(), format!(",line={}", p.line), v.to_string())
            }
            Violation::Stale(m) => (
                m.split_whitespace().next().unwrap_or_default().to_string(),
                String::new(),
                m.clone(),
            ),
        };
        writeln!(
            out,
            "::error file={}{line},title={}::{}",
            gh_escape(&file, true),
            gh_escape("adr check", true),
            gh_escape(&message, false)
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(key: &str, old: Option<i64>, new: Option<i64>) -> KeyChange {
        KeyChange {
            file: "configs/engine.toml".into(),
            key: key.into(),
            old: old.map(Into::into),
            new: new.map(Into::into),
        }
    }

    #[test]
    fn records_pair_by_path_then_by_number() {
        let f = |p: &str| RecordFile::new(p, "text");
        let got = pair_records(
            vec![f("docs/adr/0001-a.md"), f("docs/adr/0002-b.md"), f("docs/adr/0003-c.md")],
            vec![f("docs/adr/0001-a.md"), f("docs/adr/0002-renamed.md"), f("docs/adr/0004-d.md")],
        );
        let show = |o: &Option<RecordFile>| o.as_ref().map(|f| f.path.display().to_string());
        let got: Vec<(Option<String>, Option<String>)> =
            got.iter().map(|c| (show(&c.old), show(&c.new))).collect();
        let s = |p: &str| Some(p.to_string());
        assert_eq!(
            got,
            vec![
                (s("docs/adr/0001-a.md"), s("docs/adr/0001-a.md")),
                (s("docs/adr/0002-b.md"), s("docs/adr/0002-renamed.md")),
                (None, s("docs/adr/0004-d.md")),
                (s("docs/adr/0003-c.md"), None),
            ]
        );
    }

    #[test]
    fn the_suggested_command_is_copy_pasteable() {
        let a = change("scheduler.max_num_seqs", Some(256), Some(384));
        let b = change("scheduler.block_size", Some(16), None);
        let c = change("engine.max_model_len", None, Some(4096));
        let d = change("engine.x", None, Some(1));
        assert_eq!(
            adr_new_command(&[&a]),
            "cargo xtask adr new 'Set scheduler.max_num_seqs to 384' --baseline RUN_BASE --exp RUN_HEAD"
        );
        assert_eq!(suggested_title(&[&b]), "Remove scheduler.block_size");
        assert_eq!(
            suggested_title(&[&a, &b, &c]),
            "Change scheduler.max_num_seqs, scheduler.block_size and engine.max_model_len"
        );
        assert_eq!(suggested_title(&[&a, &b, &c, &d]), "Change 4 inference parameters");
        // The title makes a valid file name.
        assert!(crate::adr::new::slug(&suggested_title(&[&a, &b, &c])).is_ok());
        let s = KeyChange { new: Some("x'y".into()), ..a };
        assert_eq!(
            adr_new_command(&[&s]),
            "cargo xtask adr new 'Set scheduler.max_num_seqs to \"x'\\''y\"' --baseline RUN_BASE --exp RUN_HEAD"
        );
    }
}
