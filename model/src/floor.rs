//! The measurement floor a run records: the result of `cargo xtask selftest` as a typed
//! artifact, `target/selftest/latest.json` under the repository root ([`SelftestFile`]), and
//! the recent one of this host set into a run's `environment.selftest` ([`record_recent`]: the
//! same host fingerprint, made within `selftest::RECENT_DAYS` before the run). Nothing is
//! estimated: without a recent self-test the field is absent.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::artifact::{self, Artifact, ArtifactError};
use crate::selftest::{SelftestRecord, is_recent};

/// Where `cargo xtask selftest` writes its result, under the repository root.
pub(crate) fn latest_path(root: &Path) -> PathBuf {
    root.join("target").join("selftest").join(SelftestFile::FILE)
}

/// `target/selftest/latest.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelftestFile {
    pub format_version: u32,
    pub selftest: SelftestRecord,
}

impl Artifact for SelftestFile {
    const FILE: &'static str = "latest.json";
    const VERSION: u32 = 1;
    const WHAT: &'static str = "a self-test's result";
}

impl SelftestFile {
    pub fn new(record: SelftestRecord) -> SelftestFile {
        SelftestFile { format_version: SelftestFile::VERSION, selftest: record }
    }

    /// Write it into `target/selftest` under `root`; its path.
    pub fn write(&self, root: &Path) -> Result<PathBuf, ArtifactError> {
        let path = latest_path(root);
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        artifact::write_at(&path, self)?;
        Ok(path)
    }
}

/// The self-test a run at `now` on the host `fingerprint` records as `environment.selftest`:
/// the one in `target/selftest/latest.json` under `root` when it was made on the same host
/// within `selftest::RECENT_DAYS` before `now`. `Ok(None)` without one (no file, another host, too
/// old); an error for a file that cannot be read as one.
pub fn recent(
    root: &Path,
    fingerprint: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Option<SelftestRecord>, ArtifactError> {
    let path = latest_path(root);
    if !path.is_file() {
        return Ok(None);
    }
    let file: SelftestFile = artifact::read(&path)?;
    Ok(is_recent(&file.selftest, fingerprint, now).then_some(file.selftest))
}

/// Record the recent self-test of this host ([`recent`], under `root`) as the summary's
/// `environment.selftest`; a self-test file that cannot be read is a note, not an error of the
/// run.
pub fn record_recent(root: &Path, summary: &mut crate::Summary) {
    match recent(root, &summary.environment_fingerprint, chrono::Utc::now()) {
        Ok(r) => summary.environment.selftest = r,
        Err(e) => summary.notes.push(format!(
            "{e}; no self-test recorded in environment.selftest (run `cargo xtask selftest` again)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selftest::test_record as record;

    #[test]
    fn the_result_file_reads_back_and_a_bad_one_names_its_field() {
        let dir = tempfile::tempdir().unwrap();
        let now = chrono::Utc::now();
        let at = now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        assert_eq!(recent(dir.path(), "abc", now).unwrap(), None, "no file: none");
        let path = SelftestFile::new(record(&at, "abc")).write(dir.path()).unwrap();
        assert_eq!(path, dir.path().join("target/selftest/latest.json"));
        assert_eq!(recent(dir.path(), "abc", now).unwrap(), Some(record(&at, "abc")));
        assert_eq!(recent(dir.path(), "xyz", now).unwrap(), None);
        let text = std::fs::read_to_string(&path).unwrap().replace("\"p99\"", "\"p98\"");
        std::fs::write(&path, text).unwrap();
        let e = recent(dir.path(), "abc", now).unwrap_err().to_string();
        assert!(e.contains("latest.json is not a self-test's result of format 1: field"), "{e}");
    }
}
