//! Where a command may write a file the user named (`--out FILE`): never over one of the
//! command's own inputs, never inside the repository's `.git` directory, and never over an
//! existing file unless `--force` says so. Checked before anything is read or written, so a
//! refused path leaves every file as it was. Paths compare by what they resolve to (symbolic
//! links and `..` followed as far as the path exists), so `./log.jsonl`, `sub/../log.jsonl`
//! and a link to it are the same file.

use std::path::{Component, Path, PathBuf};

/// Why an output path is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OutPathError {
    #[error(
        "{flag} {out} is the {input_flag} file: writing it would replace what is read; name another file"
    )]
    IsInput { flag: String, out: String, input_flag: String },
    #[error("{flag} {out} is inside the git directory {git}: refused, nothing written")]
    InGitDir { flag: String, out: String, git: String },
    #[error("{flag} {out} exists: refused, nothing written (--force replaces it)")]
    Exists { flag: String, out: String },
    #[error("{flag} {out} is a directory: name a file")]
    Directory { flag: String, out: String },
}

/// One file a command writes: the flag that named it and the path as given.
pub(crate) struct Output<'a> {
    pub flag: &'a str,
    pub path: &'a Path,
}

/// Check the files a command is about to write (`outputs`, relative to `root` or absolute)
/// against its `inputs` (flag and path), the git directory of `root`, and (without `force`)
/// existing files. Returns the outputs joined to `root`.
pub(crate) fn check(
    root: &Path,
    outputs: &[Output<'_>],
    inputs: &[(&str, &Path)],
    force: bool,
) -> Result<Vec<PathBuf>, OutPathError> {
    let git_dirs = git_dirs(root);
    let mut out = Vec::with_capacity(outputs.len());
    for o in outputs {
        let joined = crate::text::join_clean(root, o.path);
        let resolved = resolve(&joined);
        let shown = o.path.display().to_string();
        for (input_flag, input) in inputs {
            if resolve(&crate::text::join_clean(root, input)) == resolved {
                return Err(OutPathError::IsInput {
                    flag: o.flag.to_string(),
                    out: shown,
                    input_flag: input_flag.to_string(),
                });
            }
        }
        let named_git = resolved.components().any(|c| c == Component::Normal(".git".as_ref()));
        let git = git_dirs
            .iter()
            .find(|g| resolved.starts_with(g))
            .cloned()
            .or_else(|| named_git.then(|| git_ancestor(&resolved)));
        if let Some(git) = git {
            return Err(OutPathError::InGitDir {
                flag: o.flag.to_string(),
                out: shown,
                git: git.display().to_string(),
            });
        }
        match std::fs::metadata(&joined) {
            Ok(m) if m.is_dir() => {
                return Err(OutPathError::Directory { flag: o.flag.to_string(), out: shown });
            }
            Ok(_) if !force => {
                return Err(OutPathError::Exists { flag: o.flag.to_string(), out: shown });
            }
            _ => {}
        }
        out.push(joined);
    }
    Ok(out)
}

/// The git directories of the repository holding `root` (the common one and a worktree's own),
/// resolved; none outside a repository.
fn git_dirs(root: &Path) -> Vec<PathBuf> {
    let Ok(repo) = git2::Repository::discover(root) else { return Vec::new() };
    let mut dirs = vec![resolve(repo.path())];
    let common = resolve(repo.commondir());
    if !dirs.contains(&common) {
        dirs.push(common);
    }
    dirs
}

/// The `.git` directory a path lies in (the path up to its last `.git` component).
fn git_ancestor(path: &Path) -> PathBuf {
    let mut best = path.to_path_buf();
    let mut acc = PathBuf::new();
    for c in path.components() {
        acc.push(c);
        if c == Component::Normal(".git".as_ref()) {
            best = acc.clone();
        }
    }
    best
}

/// A path as the file system resolves it: component by component, each existing prefix
/// canonicalised (links followed), `..` taking back the last component, and what does not exist
/// yet appended as written.
fn resolve(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    let mut exists = true;
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => {
                out.push(other);
                if exists {
                    match out.canonicalize() {
                        Ok(canon) => out = canon,
                        Err(_) => exists = false,
                    }
                }
            }
        }
    }
    out
}

/// `--json FILE`: `value` as pretty JSON to FILE (relative to `root`, its directory made), or
/// to standard output for `-`.
pub(crate) fn write_json(
    root: &Path,
    file: &Path,
    value: &impl serde::Serialize,
) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let text = serde_json::to_string_pretty(value)?;
    if file == Path::new("-") {
        println!("{text}");
        return Ok(());
    }
    let path = root.join(file);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(&path, text + "\n").with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out<'a>(flag: &'a str, path: &'a str) -> Output<'a> {
        Output { flag, path: Path::new(path) }
    }

    #[test]
    fn inputs_the_git_directory_and_existing_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        git2::Repository::init(root).unwrap();
        std::fs::write(root.join("log.jsonl"), "x\n").unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        let inputs = [("--log", Path::new("log.jsonl"))];
        // The same file spelled three ways, and through a link.
        for same in ["log.jsonl", "./log.jsonl", "sub/../log.jsonl"] {
            let e = check(root, &[out("--out", same)], &inputs, true).unwrap_err();
            assert!(matches!(e, OutPathError::IsInput { .. }), "{same}: {e}");
        }
        std::os::unix::fs::symlink(root.join("log.jsonl"), root.join("link.jsonl")).unwrap();
        let e = check(root, &[out("--out", "link.jsonl")], &inputs, true).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--out link.jsonl is the --log file: writing it would replace what is read; name \
             another file"
        );
        for git in [".git/config", ".git/new-file", "sub/../.git/x"] {
            let e = check(root, &[out("--out", git)], &inputs, true).unwrap_err();
            assert!(matches!(e, OutPathError::InGitDir { .. }), "{git}: {e}");
        }
        // An existing file needs --force; a new one does not; a directory never.
        std::fs::write(root.join("old.jsonl"), "x\n").unwrap();
        let e = check(root, &[out("--out", "old.jsonl")], &inputs, false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--out old.jsonl exists: refused, nothing written (--force replaces it)"
        );
        assert!(check(root, &[out("--out", "old.jsonl")], &inputs, true).is_ok());
        let ok = check(root, &[out("--out", "new/dir/file.jsonl")], &inputs, false).unwrap();
        assert_eq!(ok, vec![root.join("new/dir/file.jsonl")]);
        let e = check(root, &[out("--out", "sub")], &inputs, true).unwrap_err();
        assert!(matches!(e, OutPathError::Directory { .. }), "{e}");
        assert_eq!(std::fs::read_to_string(root.join("log.jsonl")).unwrap(), "x\n");
    }

    #[test]
    fn a_git_directory_is_found_outside_a_repository_by_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let e = check(dir.path(), &[out("--out", "elsewhere/.git/config")], &[], true).unwrap_err();
        assert!(matches!(e, OutPathError::InGitDir { .. }), "{e}");
    }
}
