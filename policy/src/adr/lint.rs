//! `adr lint`: the rules every record follows. Pure functions over parsed records
//! ([`lint_files`], [`lint_adrs`]); [`lint_dir`] reads the directory.
//!
//! Rules: file name `NNNN-slug.md`; unique numbers; one H1 (its `ADR-NNNN` prefix, if any,
//! matches the file); a known status, an ISO-8601 date and deciders; the required sections
//! present and non-empty; no template placeholders left; supersession links both ways and to
//! existing records; a thresholds table with known metrics, comparators, units and actions;
//! decision lines well-formed and not repeated; no metric set by two live records; no governed
//! key decided differently by two live records.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::live::{conflicts, decision_conflicts, live_thresholds};
use super::model::{
    Adr, AdrStatus, Link, LinkKind, Part, Problem, REQUIRED_SECTIONS, SectionKind, strip_adr_prefix,
};
use super::parse::parse_adr;
use super::records::read_records;

/// Parse and lint `(path, text)` pairs. Problems are sorted by path and line.
pub fn lint_files(files: &[(PathBuf, String)]) -> Vec<Problem> {
    let adrs: Vec<Adr> = files.iter().map(|(p, t)| parse_adr(p, t)).collect();
    lint_adrs(&adrs)
}

/// Lint parsed records (a whole directory: numbers and links are checked across them).
pub fn lint_adrs(adrs: &[Adr]) -> Vec<Problem> {
    let mut problems = Vec::new();
    for adr in adrs {
        problems.extend(adr.problems.iter().cloned());
        lint_one(adr, &mut problems);
    }
    lint_numbers(adrs, &mut problems);
    lint_links(adrs, &mut problems);
    lint_cycles(adrs, &mut problems);
    problems.extend(conflicts(&live_thresholds(adrs)));
    problems.extend(decision_conflicts(adrs));
    problems.sort();
    problems.dedup();
    problems
}

/// Whether a file name is `NNNN-slug.md` (slug: lowercase letters and digits joined by `-`).
pub fn valid_file_name(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".md") else { return false };
    let (Some(num), Some(slug)) = (stem.get(..4), stem.get(4..)) else { return false };
    num.bytes().all(|b| b.is_ascii_digit())
        && slug.strip_prefix('-').is_some_and(|s| {
            !s.is_empty()
                && s.split('-').all(|w| {
                    !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                })
        })
}

fn lint_one(adr: &Adr, out: &mut Vec<Problem>) {
    let path = &adr.path;
    let mut p = |line: usize, msg: String| out.push(Problem::new(path, line, msg));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if !valid_file_name(name) {
        p(1, format!("file name `{name}` is not `NNNN-slug.md` (four digits, a lowercase slug)"));
    }

    // Title.
    let title_line = adr.titles.first().map_or(1, |t| t.line);
    match adr.titles.as_slice() {
        [] => p(1, "no H1 title; the first line is `# ADR-NNNN: <title>`".into()),
        [first, rest @ ..] => {
            for extra in rest {
                p(
                    extra.line,
                    format!(
                        "second H1 heading (the title is at line {}); a record has one H1",
                        first.line
                    ),
                );
            }
            let (n, title) = strip_adr_prefix(&first.value);
            if title.is_empty() {
                p(first.line, "the title is empty".into());
            }
            if let (Some(n), Some(file_n)) = (n, adr.number)
                && n != file_n
            {
                p(first.line, format!("title says ADR-{n:04} but the file is number {file_n:04}"));
            }
        }
    }

    // Sections.
    for (kind, heading) in REQUIRED_SECTIONS {
        let found: Vec<_> = adr.sections.iter().filter(|s| s.kind == Some(kind)).collect();
        match found.as_slice() {
            [] => p(title_line, format!("missing section `## {heading}`{}", section_hint(kind))),
            [first, rest @ ..] => {
                if !first.has_content {
                    p(first.line, format!("section `{}` is empty", first.heading));
                }
                for dup in rest {
                    p(
                        dup.line,
                        format!("section `{}` again (first at line {})", dup.heading, first.line),
                    );
                }
            }
        }
    }

    for ph in &adr.placeholders {
        p(
            ph.line,
            format!(
                "template placeholder `{}` left; replace it with the record's content",
                ph.value
            ),
        );
    }

    // Thresholds: a record that states no executable rule reached no conclusion.
    if let Some(section) = adr.section(super::model::SectionKind::Thresholds)
        && adr.thresholds.is_empty()
        && section.has_content
        && adr.status_value() != Some(AdrStatus::Rejected)
        && !adr.problems.iter().any(|q| q.line > section.line && q.line < section.end)
    {
        p(
            section.line,
            "no thresholds: this section needs a table with columns metric, comparator, limit, \
             unit, action and at least one row"
                .into(),
        );
    }

    // A limit no run can break decides nothing.
    for t in &adr.thresholds {
        if let Some(why) = crate::thresholds::propose::unbreakable(t.metric, t.comparator, t.limit)
        {
            p(t.line, format!("{why}; set a limit a run could break, or remove the row"));
        }
    }

    // A configuration adopted although it misses its SLO needs a person's reason.
    if let Some(line) = adr.slo_missed {
        match &adr.slo_exception {
            Some(why) if !why.value.is_empty() => {}
            Some(why) => p(
                why.line,
                "`SLO exception:` is empty; state why this configuration is adopted although it \
                 misses the SLO"
                    .into(),
            ),
            None => p(
                line,
                "the adopted configuration misses its SLO and no `SLO exception: <why>` line \
                 states why; a person writes the reason before the record is accepted"
                    .into(),
            ),
        }
    }

    // Decision lines name each key once.
    let mut seen: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for d in &adr.decisions {
        if let Some(first) = seen.insert((&d.file, d.key.as_str()), d.line) {
            p(d.line, format!("{}: {} is already decided at line {first}", d.file, d.key));
            seen.insert((&d.file, d.key.as_str()), first);
        }
    }
}

/// What a missing required section is for, and its MADR 4 spelling where MADR has one.
fn section_hint(kind: SectionKind) -> &'static str {
    match kind {
        SectionKind::Context => " (MADR: `## Context and Problem Statement`): the scenario",
        SectionKind::MetricsMatrix => {
            ": the measured runs the decision rests on (infergate requires it beyond MADR)"
        }
        SectionKind::Decision => {
            " (MADR: `## Decision Outcome`): the decision lines of the governed values"
        }
        SectionKind::Thresholds => {
            " (MADR: `### Confirmation` under the Decision Outcome): the thresholds table CI \
             enforces"
        }
        SectionKind::Rollback => {
            ": when to roll back and what it restores (infergate requires it beyond MADR)"
        }
        SectionKind::Consequences => " (MADR: `### Consequences` under the Decision Outcome)",
        SectionKind::Links => " (MADR: `## More Information`): supersession links, or `None.`",
        _ => "",
    }
}

fn lint_numbers(adrs: &[Adr], out: &mut Vec<Problem>) {
    let mut by_number: BTreeMap<u32, Vec<&Adr>> = BTreeMap::new();
    for adr in adrs {
        if let Some(n) = adr.number {
            by_number.entry(n).or_default().push(adr);
        }
    }
    for (n, group) in by_number.iter().filter(|(_, g)| g.len() > 1) {
        for adr in group {
            let others: Vec<String> = group
                .iter()
                .filter(|o| o.path != adr.path)
                .map(|o| o.path.display().to_string())
                .collect();
            out.push(Problem::new(
                &adr.path,
                1,
                format!("number {n:04} is also used by {}; numbers are unique", others.join(", ")),
            ));
        }
    }
}

fn lint_links(adrs: &[Adr], out: &mut Vec<Problem>) {
    let find = |n: u32| adrs.iter().find(|a| a.number == Some(n));
    let file_name = |a: &Adr| a.path.file_name().map(|f| f.to_string_lossy().into_owned());
    for adr in adrs {
        let Some(me) = adr.number else { continue };
        if let Some(status) = &adr.status
            && let AdrStatus::SupersededBy(n) = status.value
        {
            match find(n) {
                _ if n == me => out.push(Problem::new(
                    &adr.path,
                    status.line,
                    "a record cannot supersede itself",
                )),
                None => out.push(Problem::new(
                    &adr.path,
                    status.line,
                    format!("superseded by {n:04}, but no record has that number"),
                )),
                Some(newer) => {
                    let back = newer
                        .links
                        .iter()
                        .any(|l| l.kind == LinkKind::Supersedes && l.number == me);
                    if !back {
                        out.push(Problem::new(
                            &adr.path,
                            status.line,
                            format!(
                                "superseded by {n:04}, but {} does not list `Supersedes {me:04}` in its Links",
                                newer.path.display()
                            ),
                        ));
                    }
                }
            }
        }
        for link in &adr.links {
            let n = link.number;
            let Some(other) = find(n) else {
                out.push(Problem::new(
                    &adr.path,
                    link.line,
                    format!("links to {n:04}, but no record has that number"),
                ));
                continue;
            };
            if n == me {
                out.push(Problem::new(&adr.path, link.line, "a record cannot link to itself"));
                continue;
            }
            if let Some(target) = &link.target {
                let target_name =
                    Path::new(target).file_name().map(|f| f.to_string_lossy().into_owned());
                if target_name != file_name(other) {
                    out.push(Problem::new(
                        &adr.path,
                        link.line,
                        format!(
                            "link target `{target}` is not {}, the file of record {n:04}",
                            other.path.display()
                        ),
                    ));
                }
            }
            match link.kind {
                LinkKind::Supersedes => {
                    let status = other.status_value();
                    let fix = match status {
                        Some(AdrStatus::SupersededBy(x)) if x == me => None,
                        Some(AdrStatus::Accepted) => {
                            Some(format!("run `{} adr supersede {n} {me}`", crate::text::tool()))
                        }
                        Some(AdrStatus::SupersededBy(x)) => Some(format!(
                            "it is already `Superseded by {x:04}`: supersede that record instead \
                             (`{} adr supersede {x} {me}` once {x:04} is Accepted) or \
                             remove this link",
                            crate::text::tool()
                        )),
                        Some(other) => Some(format!(
                            "it is {other}, and only an Accepted record can be superseded: \
                             remove this link"
                        )),
                        None => Some("its status is not valid".to_string()),
                    };
                    if let Some(fix) = fix {
                        out.push(Problem::new(
                            &adr.path,
                            link.line,
                            format!(
                                "supersedes {n:04}, but {} is not `Superseded by {me:04}`; {fix}",
                                other.path.display()
                            ),
                        ));
                    }
                }
                LinkKind::SupersedesInPart => lint_parts(adr, link, other, out),
                LinkKind::SupersededBy => {
                    if adr.status_value() != Some(AdrStatus::SupersededBy(n)) {
                        out.push(Problem::new(
                            &adr.path,
                            link.line,
                            format!("links `Superseded by {n:04}` but its status is not `Superseded by {n:04}`"),
                        ));
                    }
                }
            }
        }
    }
}

/// A `Supersedes in part` link: the older record is Accepted (or superseded since), and each
/// part names a metric of its thresholds or a key of its decision lines.
fn lint_parts(adr: &Adr, link: &Link, other: &Adr, out: &mut Vec<Problem>) {
    let n = link.number;
    let mut p = |msg: String| out.push(Problem::new(&adr.path, link.line, msg));
    match other.status_value() {
        Some(AdrStatus::Accepted | AdrStatus::SupersededBy(_)) => {}
        status => p(format!(
            "supersedes in part {n:04}, which is {}; only an Accepted record can be superseded",
            status.map_or("without a valid status".into(), |s| s.to_string())
        )),
    }
    for part in &link.parts {
        match part {
            Part::Metric(m) if !other.thresholds.iter().any(|t| &t.metric == m) => {
                let mut valid: Vec<&str> =
                    other.thresholds.iter().map(|t| t.metric.as_str()).collect();
                valid.dedup();
                p(format!(
                    "supersedes in part {n:04} on {part}, but {} has no threshold on it; its \
                     metrics: {}",
                    other.path.display(),
                    if valid.is_empty() { "none".into() } else { valid.join(", ") }
                ));
            }
            Part::Key { file, key }
                if !other.decisions.iter().any(|d| &d.file == file && &d.key == key) =>
            {
                let valid: Vec<String> =
                    other.decisions.iter().map(|d| format!("{}: {}", d.file, d.key)).collect();
                p(format!(
                    "supersedes in part {n:04} on {part}, but {} has no decision line for it; \
                     its keys: {}",
                    other.path.display(),
                    if valid.is_empty() { "none".into() } else { valid.join(", ") }
                ));
            }
            _ => {}
        }
    }
}

/// A chain of `Superseded by` statuses that comes back to where it started: no record of it
/// can be live, and no order of supersession made it. One problem per cycle, at the status of
/// its lowest-numbered record.
fn lint_cycles(adrs: &[Adr], out: &mut Vec<Problem>) {
    let next = |n: u32| {
        adrs.iter().find(|a| a.number == Some(n)).and_then(|a| match a.status_value() {
            Some(AdrStatus::SupersededBy(x)) => Some(x),
            _ => None,
        })
    };
    for adr in adrs {
        let (Some(start), Some(status)) = (adr.number, &adr.status) else { continue };
        let mut chain = vec![start];
        let mut cur = start;
        while let Some(x) = next(cur) {
            if x == start {
                if chain.len() > 1 && chain.iter().min() == Some(&start) {
                    chain.push(start);
                    let text: Vec<String> = chain.iter().map(|n| format!("{n:04}")).collect();
                    out.push(Problem::new(
                        &adr.path,
                        status.line,
                        format!(
                            "supersession cycle: {} (each `Superseded by` the next); a record \
                             supersedes only older decisions: set the newest one's status back \
                             to Accepted and remove its `Supersedes` link",
                            text.join(" -> ")
                        ),
                    ));
                }
                break;
            }
            if chain.contains(&x) {
                break; // a cycle that does not pass through `start`: reported from its members
            }
            chain.push(x);
            cur = x;
        }
    }
}

/// What the repository says about the records' scope: the bench profiles that exist
/// (`None`: unknown, not checked) and which of the files the decision lines name are missing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RepoFacts {
    pub profiles: Option<Vec<String>>,
    /// Files named by decision lines that do not exist.
    pub missing_files: Vec<String>,
    /// Assets the records link that do not exist (paths relative to the repository root).
    pub missing_assets: Vec<String>,
}

impl RepoFacts {
    /// The facts of the work tree at `root`: the profiles of `configs/bench.toml` (when it can be
    /// read) and the decision-line files missing under `root` (only when `root/configs` exists:
    /// elsewhere there is nothing to compare with).
    pub fn read(root: &Path, adrs: &[Adr]) -> RepoFacts {
        let profiles = std::fs::read_to_string(root.join(crate::settings::BENCH_FILE))
            .ok()
            .and_then(|t| bench_profiles(&t));
        let missing_files = if root.join("configs").is_dir() {
            decision_files(adrs).into_iter().filter(|f| !root.join(f).is_file()).collect()
        } else {
            Vec::new()
        };
        let missing_assets =
            asset_files(adrs).into_iter().filter(|f| !root.join(f).is_file()).collect();
        RepoFacts { profiles, missing_files, missing_assets }
    }
}

/// Where an asset a record links is, relative to the repository root: beside the record
/// (`docs/adr/0003-x.md` links `assets/0003-latency.svg`: `docs/adr/assets/0003-latency.svg`).
pub fn asset_path(adr: &Adr, target: &str) -> String {
    let dir = adr.path.parent().map(|p| p.to_string_lossy().replace('\\', "/")).unwrap_or_default();
    if dir.is_empty() { target.to_string() } else { format!("{dir}/{target}") }
}

/// Every asset the records link, once, sorted (relative to the repository root).
pub fn asset_files(adrs: &[Adr]) -> Vec<String> {
    let mut files: Vec<String> =
        adrs.iter().flat_map(|a| a.assets.iter().map(|x| asset_path(a, &x.value))).collect();
    files.sort();
    files.dedup();
    files
}

/// The profile names of a bench configuration (`[profile.NAME]`); `None` when it is not TOML.
pub fn bench_profiles(text: &str) -> Option<Vec<String>> {
    let t: toml::Table = toml::from_str(text).ok()?;
    Some(match t.get("profile") {
        Some(toml::Value::Table(p)) => p.keys().cloned().collect(),
        _ => Vec::new(),
    })
}

/// Every file the decision lines of the records name, once, sorted.
pub fn decision_files(adrs: &[Adr]) -> Vec<String> {
    let mut files: Vec<String> =
        adrs.iter().flat_map(|a| a.decisions.iter().map(|d| d.file.clone())).collect();
    files.sort();
    files.dedup();
    files
}

/// Scope against the repository: the assets a record links exist; the thresholds of a Proposed or live record gate a bench
/// profile that exists, and a live record's `= value` decision lines name files that exist,
/// unless another Proposed or Accepted record decides that key `removed` (a deleted governed
/// file is decided key by key with `removed` in a record that supersedes the old one).
pub fn lint_scope(adrs: &[Adr], facts: &RepoFacts) -> Vec<Problem> {
    let mut out = Vec::new();
    for adr in adrs {
        for a in &adr.assets {
            let path = asset_path(adr, &a.value);
            if facts.missing_assets.contains(&path) {
                out.push(Problem::new(
                    &adr.path,
                    a.line,
                    format!(
                        "links {}, which does not exist ({path}); a record's charts are committed \
                         with it in the assets directory beside it",
                        a.value
                    ),
                ));
            }
        }
        let live = super::live::is_live(adr, adrs);
        let open = live || adr.status_value() == Some(AdrStatus::Proposed);
        if let (true, Some(profile), Some(profiles)) = (open, &adr.profile, &facts.profiles)
            && !profiles.contains(&profile.value)
        {
            out.push(Problem::new(
                &adr.path,
                profile.line,
                format!(
                    "the thresholds gate runs of bench profile `{}`, which {} does not define; \
                     profiles: {}",
                    profile.value,
                    crate::settings::BENCH_FILE,
                    if profiles.is_empty() { "none".into() } else { profiles.join(", ") }
                ),
            ));
        }
        if !live {
            continue;
        }
        let parts = super::live::superseded_parts(adr, adrs);
        for d in &adr.decisions {
            let taken = parts.iter().any(
                |(_, p)| matches!(p, Part::Key { file, key } if *file == d.file && *key == d.key),
            );
            // A Proposed or Accepted record that decides the key `removed` is the record of
            // the deletion (it supersedes this one once accepted; until then they conflict).
            let removal_recorded = adrs.iter().any(|o| {
                o.path != adr.path
                    && matches!(o.status_value(), Some(AdrStatus::Proposed | AdrStatus::Accepted))
                    && o.decisions.iter().any(|e| {
                        e.file == d.file
                            && e.key == d.key
                            && matches!(e.value, super::model::Decided::Removed)
                    })
            });
            if taken
                || removal_recorded
                || matches!(d.value, super::model::Decided::Removed)
                || !facts.missing_files.contains(&d.file)
            {
                continue;
            }
            out.push(Problem::new(
                &adr.path,
                d.line,
                format!(
                    "{} is live and decides {}: {}, but {} does not exist; a deleted governed file \
                     is decided key by key (`{}: KEY removed`) by a record that supersedes this one",
                    adr.label(),
                    d.file,
                    d.key,
                    d.file,
                    d.file
                ),
            ));
        }
    }
    out.sort();
    out
}

/// Lint the records of the work tree at `root`: [`lint_adrs`] and [`lint_scope`].
pub fn lint_in_repo(root: &Path, adrs: &[Adr]) -> Vec<Problem> {
    let mut problems = lint_adrs(adrs);
    problems.extend(lint_scope(adrs, &RepoFacts::read(root, adrs)));
    problems.sort();
    problems.dedup();
    problems
}

/// What `adr lint` found in a directory.
#[derive(Debug)]
pub struct LintReport {
    /// Records read.
    pub files: usize,
    pub problems: Vec<Problem>,
}

/// Read every record in `dir` (relative to `root`; `template.md` and `README.md` are not
/// records) and lint them. Paths in problems are `dir/<file>`. I/O errors are `Err`.
pub fn lint_dir(root: &Path, dir: &Path) -> anyhow::Result<LintReport> {
    let files = read_records(root, dir)?;
    let adrs: Vec<Adr> = files.iter().map(|(p, t)| parse_adr(p, t)).collect();
    Ok(LintReport { files: files.len(), problems: lint_in_repo(root, &adrs) })
}

#[cfg(test)]
mod tests {
    use super::valid_file_name;

    #[test]
    fn file_names() {
        assert!(valid_file_name("0001-use-adrs.md"));
        assert!(valid_file_name("0012-v2.md"));
        for bad in [
            "1-x.md",
            "0001-.md",
            "0001-Use.md",
            "0001_x.md",
            "0001-x--y.md",
            "0001-x.txt",
            "abcé-x.md",
            "é.md",
            "0001",
        ] {
            assert!(!valid_file_name(bad), "{bad}");
        }
    }
}
