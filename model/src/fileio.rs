//! Writing the files beside a run: atomically (a temporary file synced, then renamed), JSON in
//! its one format, and the error of a run directory's files (`RunDirError`). Below both the run
//! directory (`crate::rundir`) and the typed artifacts (`crate::artifact`), which write through
//! it; `crate::rundir` re-exports it.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The file a run locks while it writes the directory (empty; it stays after the run).
pub(crate) const LOCK_FILE: &str = ".lock";

#[derive(Debug, thiserror::Error)]
pub enum RunDirError {
    #[error("{} already holds a run ({}); choose another --out directory", dir.display(), file)]
    Occupied { dir: PathBuf, file: &'static str },
    #[error(
        "{} is in use by another run (it holds the lock on {}); choose another --out directory",
        dir.display(),
        LOCK_FILE
    )]
    InUse { dir: PathBuf },
    #[error("cannot write {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{}:{line}: not a request record: {message}", path.display())]
    BadRecord { path: PathBuf, line: usize, message: String },
}

pub(crate) fn io_err(path: &Path) -> impl FnOnce(io::Error) -> RunDirError + '_ {
    move |source| RunDirError::Io { path: path.to_path_buf(), source }
}

/// Write a file atomically: a temporary file in the same directory, synced, then renamed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), RunDirError> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(io_err(path))
}

/// Write a JSON document atomically: pretty, with a final newline. The one format of the JSON
/// files beside a run (the summary and every other artifact).
pub fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<(), RunDirError> {
    let mut bytes = serde_json::to_vec_pretty(value).expect("documents serialise");
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}
