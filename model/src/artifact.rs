//! The typed contract of the files infergate writes beside its runs: each file is one type with
//! its file name and format version ([`Artifact`]), read and written only through [`read`] and
//! [`write`]. Writes are atomic (a crash leaves the old file or the new one, never half of one);
//! a read error names the file and, for a file of the wrong shape, the field (as a JSON path)
//! and the version the file says it is. A file of an older format is upgraded when the type
//! knows how ([`Artifact::upgrade`]), else refused with the version it has and the one this tool
//! reads.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::fileio::{self, RunDirError};

/// A file of a known format.
pub trait Artifact: Serialize + DeserializeOwned {
    /// The file's name in its directory (`ab.json`).
    const FILE: &'static str;
    /// The format version this tool writes, in the field [`Artifact::VERSION_FIELD`].
    const VERSION: u32;
    /// The field of the document that holds its version.
    const VERSION_FIELD: &'static str = "format_version";
    /// What the file is, for messages (`an A/B gate's result`).
    const WHAT: &'static str;
    /// The format of a file without the version field, when the type's first format had none
    /// (it is then upgraded like any older format); by default such a file is refused.
    const UNVERSIONED: Option<u64> = None;

    /// A document of format `found` (older than [`Artifact::VERSION`]) turned into the current
    /// format, or why that cannot be done. By default no older format is read.
    fn upgrade(found: u64, _doc: serde_json::Value) -> Result<serde_json::Value, UpgradeError> {
        Err(UpgradeError::Unsupported { found, reads: Self::VERSION })
    }
}

/// Why a document of an older format cannot be turned into the current one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UpgradeError {
    /// The type reads no older format (the default of [`Artifact::upgrade`]).
    #[error("format {found} is older than this tool reads ({reads}) ")]
    Unsupported { found: u64, reads: u32 },
    /// No file of format `found` was ever written.
    #[error("format {found} was never written")]
    NeverWritten { found: u64 },
    /// The document is not the JSON object every format is.
    #[error("not a JSON object")]
    NotAnObject,
    /// A document of format `found` without a field that format has.
    #[error("format {found} without `{field}`")]
    Missing { found: u64, field: &'static str },
}

/// Why an artifact could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}:{column}: not valid JSON: {message}", path.display())]
    Syntax { path: PathBuf, line: usize, column: usize, message: String },
    #[error(
        "{} is not {what} of format {version}: field `{field}`: {message}",
        path.display()
    )]
    Field { path: PathBuf, what: &'static str, version: String, field: String, message: String },
    #[error(
        "{} is {what} of format {}, this tool reads format {reads}{}",
        path.display(),
        found.map(|v| v.to_string()).unwrap_or_else(|| "(none: no version field)".into()),
        why.as_ref().map(|w| format!(": {w}")).unwrap_or_default()
    )]
    Version {
        path: PathBuf,
        what: &'static str,
        found: Option<u64>,
        reads: u32,
        why: Option<UpgradeError>,
    },
    #[error(transparent)]
    Write(#[from] RunDirError),
}

/// The artifact's file: `path` itself when it names a file, else `path/FILE`.
pub fn file_of<A: Artifact>(path: &Path) -> PathBuf {
    if path.is_dir() || !path.ends_with(A::FILE) && path.extension().is_none() {
        path.join(A::FILE)
    } else {
        path.to_path_buf()
    }
}

/// Whether `dir` holds the artifact.
pub fn exists<A: Artifact>(dir: &Path) -> bool {
    dir.join(A::FILE).is_file()
}

/// Read an artifact from its file (`path`, or `path/FILE` for a directory).
pub fn read<A: Artifact>(path: &Path) -> Result<A, ArtifactError> {
    let file = file_of::<A>(path);
    let text = std::fs::read_to_string(&file)
        .map_err(|source| ArtifactError::Read { path: file.clone(), source })?;
    parse::<A>(&file, &text)
}

/// Parse an artifact's text; `file` names it in errors.
pub fn parse<A: Artifact>(file: &Path, text: &str) -> Result<A, ArtifactError> {
    let doc: serde_json::Value = serde_json::from_str(text).map_err(|e| ArtifactError::Syntax {
        path: file.to_path_buf(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    let found = match doc.get(A::VERSION_FIELD) {
        None => A::UNVERSIONED,
        Some(v) => v.as_u64(),
    };
    let version_error = |why: Option<UpgradeError>| ArtifactError::Version {
        path: file.to_path_buf(),
        what: A::WHAT,
        found,
        reads: A::VERSION,
        why,
    };
    let doc = match found {
        Some(v) if v == A::VERSION as u64 => doc,
        Some(v) if v < A::VERSION as u64 => {
            A::upgrade(v, doc).map_err(|why| version_error(Some(why)))?
        }
        _ => return Err(version_error(None)),
    };
    serde_path_to_error::deserialize(doc).map_err(|e| ArtifactError::Field {
        path: file.to_path_buf(),
        what: A::WHAT,
        version: found.map(|v| v.to_string()).unwrap_or_default(),
        field: e.path().to_string(),
        message: e.into_inner().to_string(),
    })
}

/// Write an artifact into `dir` atomically (pretty JSON and a final newline); its path.
pub fn write<A: Artifact>(dir: &Path, value: &A) -> Result<PathBuf, ArtifactError> {
    let path = dir.join(A::FILE);
    write_at(&path, value)?;
    Ok(path)
}

/// Write an artifact atomically to a file the user named (`compare --out FILE`).
pub fn write_at<A: Artifact>(path: &Path, value: &A) -> Result<(), ArtifactError> {
    Ok(fileio::write_json(path, value)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Doc {
        format_version: u32,
        items: Vec<Item>,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Item {
        name: String,
        value: f64,
    }

    impl Artifact for Doc {
        const FILE: &'static str = "doc.json";
        const VERSION: u32 = 2;
        const WHAT: &'static str = "a test document";

        fn upgrade(
            found: u64,
            mut doc: serde_json::Value,
        ) -> Result<serde_json::Value, UpgradeError> {
            // Format 1 called the list `entries`.
            match found {
                1 => {
                    let entries = doc.as_object_mut().and_then(|o| o.remove("entries"));
                    doc["items"] =
                        entries.ok_or(UpgradeError::Missing { found, field: "entries" })?;
                    doc["format_version"] = 2.into();
                    Ok(doc)
                }
                _ => Err(UpgradeError::NeverWritten { found }),
            }
        }
    }

    #[test]
    fn a_written_artifact_reads_back_and_errors_name_the_file_field_and_version() {
        let dir = tempfile::tempdir().unwrap();
        let doc = Doc { format_version: 2, items: vec![Item { name: "a".into(), value: 1.5 }] };
        let path = write(dir.path(), &doc).unwrap();
        assert_eq!(path, dir.path().join("doc.json"));
        assert_eq!(read::<Doc>(dir.path()).unwrap(), doc);
        assert_eq!(read::<Doc>(&path).unwrap(), doc);
        assert!(exists::<Doc>(dir.path()));

        let at = |text: &str| parse::<Doc>(Path::new("d/doc.json"), text).unwrap_err().to_string();
        let e = at(r#"{"format_version": 2, "items": [{"name": "a", "value": "x"}]}"#);
        assert!(
            e.starts_with("d/doc.json is not a test document of format 2: field `items[0].value`"),
            "{e}"
        );
        let e = at(r#"{"format_version": 2, "items": [{"name": "a", "value": 1, "extra": 2}]}"#);
        assert!(e.contains("field `items[0].extra`: unknown field `extra`"), "{e}");
        let e = at("{\n  \"format_version\": 2,\n  \"items\": [\n}");
        assert!(e.starts_with("d/doc.json:4:1: not valid JSON"), "{e}");
        let e = at(r#"{"format_version": 3, "items": []}"#);
        assert_eq!(e, "d/doc.json is a test document of format 3, this tool reads format 2");
        let e = at(r#"{"items": []}"#);
        assert!(e.contains("of format (none: no version field)"), "{e}");
        let e = at(r#"{"format_version": 0, "items": []}"#);
        assert!(e.ends_with("reads format 2: format 0 was never written"), "{e}");
        let e = at(r#"{"format_version": 1, "items": []}"#);
        assert!(e.ends_with("reads format 2: format 1 without `entries`"), "{e}");
        // A type whose first format had no version field reads such a file as that format.
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct Late {
            format_version: u32,
        }
        impl Artifact for Late {
            const FILE: &'static str = "late.json";
            const VERSION: u32 = 1;
            const WHAT: &'static str = "a late-versioned document";
            const UNVERSIONED: Option<u64> = Some(0);
            fn upgrade(
                found: u64,
                mut doc: serde_json::Value,
            ) -> Result<serde_json::Value, UpgradeError> {
                assert_eq!(found, 0);
                doc["format_version"] = 1.into();
                Ok(doc)
            }
        }
        assert_eq!(parse::<Late>(Path::new("l"), "{}").unwrap(), Late { format_version: 1 });
        let e = parse::<Late>(Path::new("l"), r#"{"format_version": "one"}"#).unwrap_err();
        assert!(e.to_string().contains("of format (none: no version field)"), "{e}");
        // An older format the type knows is upgraded.
        let old = parse::<Doc>(Path::new("x"), r#"{"format_version": 1, "entries": []}"#).unwrap();
        assert_eq!(old, Doc { format_version: 2, items: vec![] });
        let missing = read::<Doc>(&dir.path().join("nope")).unwrap_err();
        assert!(matches!(missing, ArtifactError::Read { .. }), "{missing}");
    }
}
