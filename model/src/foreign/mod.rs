//! Other tools' results read into infergate's run directory (`cargo xtask import`): the JSON
//! `vllm bench serve --save-result` writes ([`vllm`]), guidellm's benchmarks report
//! ([`guidellm`]) and AIPerf's `profile_export_aiperf.json` with its per-request
//! `profile_export.jsonl` ([`aiperf`]).
//!
//! An imported summary holds every statistic the source reported, in infergate's units (seconds
//! become milliseconds by one multiplication), and nothing else: a statistic the source did not
//! report is blank (`null`; NaN inside a [`Stats`]), never estimated. Where the source defines a
//! metric otherwise than infergate does (its TTFT counted from when the request was sent, not
//! from when the schedule meant it to be; its percentile method), the summary's notes and its
//! `config.imported.definitions` say so. Per-request data, when the source holds it, becomes
//! `requests.jsonl` records, each in exactly one outcome class. A file of the wrong shape is
//! refused with its name, the field (a JSON path) and what is valid.
//!
//! Every file is read through a [`Source`]: at most [`MAX_FILE_BYTES`] (a regular file's size is
//! checked before it is opened for reading, and the reading itself stops one byte past the
//! limit, so a device or a pipe is bounded too), parsed as it streams (no copy of the text, no
//! JSON tree; a JSON Lines file line by line, each at most [`MAX_LINE_BYTES`]) and hashed as it
//! passes. At most [`MAX_REQUESTS`] requests and [`MAX_VALUES`] per-request values are decoded
//! from one file ([`Capped`]: refused as a list grows past them), so a compact file cannot make
//! the records take more than a bounded amount of memory. Every value read is checked against
//! what it can be ([`Checker`]): durations and latencies finite, never negative and at most
//! [`MAX_SECONDS`], wall-clock times between [`EPOCH_MIN_S`] and [`EPOCH_MAX_S`], ends not
//! before starts, counts at most [`MAX_COUNT`] and consistent with the per-class totals, rates
//! at most [`MAX_RATE`], per-request arrays one entry per request; an impossible value is
//! refused ([`ImportError::Impossible`]) with the file, the field (its JSON path, with the
//! index) and what it can be.
//!
//! These files are not [`crate::artifact::Artifact`]s: their formats and version fields are the
//! tools' own (guidellm's nested in `metadata`, AIPerf's a `"1.4"` string, none in vLLM's), so
//! each reader checks its version itself and reports errors in the artifacts' shape.

pub(crate) mod aiperf;
pub(crate) mod guidellm;
pub(crate) mod vllm;

use std::cell::Cell;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use serde::de::{DeserializeOwned, DeserializeSeed, Error as _, IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

pub use crate::imported::{ImportSource, ImportedConfig, ImportedLoad};
use crate::metrics::{
    Goodput, LatencyMetrics, RequestCounts, Stats, Throughput, TokenCounts, Window,
};
use crate::outcome::Outcome;
use crate::record::RequestRecord;
use crate::summary::{
    Environment, RunConfig, RunStatus, SCHEMA_VERSION, ScheduleSummary, Summary, TargetInfo,
    Timing, ToolInfo, WorkloadInfo,
};
use crate::workload::{LengthBasis, WorkloadFile};

/// The largest file `import` reads: 512 MiB. A vLLM `--save-detailed` result of 10,000 requests
/// of 1,000 output tokens is about 220 MB.
pub const MAX_FILE_BYTES: u64 = 512 << 20;
/// The longest line of a JSON Lines file `import` reads: 16 MiB (an AIPerf record of 100,000
/// streamed chunks is about 2 MB).
pub const MAX_LINE_BYTES: u64 = 16 << 20;
/// The longest duration or latency, and the longest a benchmark spans (a request's send after
/// the first send): 30 days, in seconds.
pub const MAX_SECONDS: f64 = 30.0 * 86_400.0;
/// The earliest wall-clock time a file may hold: 2000-01-01T00:00:00Z, seconds since the epoch.
pub const EPOCH_MIN_S: f64 = 946_684_800.0;
/// The latest wall-clock time a file may hold: 2100-01-01T00:00:00Z, seconds since the epoch.
pub const EPOCH_MAX_S: f64 = 4_102_444_800.0;
/// The largest count (requests, tokens) a file may hold: 10^15.
pub const MAX_COUNT: u64 = 1_000_000_000_000_000;
/// The highest rate (requests or tokens per second) a file may hold: 10^9 per second.
pub const MAX_RATE: f64 = 1e9;
/// The most requests one file may hold (entries of a per-request array, kept requests, lines):
/// 1,000,000. Each becomes a record of about half a kilobyte, whatever few bytes of the file it
/// took.
pub const MAX_REQUESTS: usize = 1_000_000;
/// The most per-request values (ITL gaps, inter-chunk gaps) one file may hold in all:
/// 50,000,000, 400 MB as numbers (a real 512 MiB vLLM result holds about 27 million).
pub const MAX_VALUES: usize = 50_000_000;

/// The formats `import` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `vllm bench serve --save-result` (with `--save-detailed`: per-request arrays).
    VllmBench,
    /// guidellm's benchmarks report (`benchmarks.json`), report schema version 2.
    Guidellm,
    /// AIPerf's `profile_export_aiperf.json` (schema 1.x), with `profile_export.jsonl` beside it.
    Aiperf,
}

impl Format {
    pub const ALL: [Format; 3] = [Format::VllmBench, Format::Guidellm, Format::Aiperf];

    /// The name on the command line and in `config.imported.tool`.
    pub fn name(self) -> &'static str {
        match self {
            Format::VllmBench => "vllm-bench",
            Format::Guidellm => "guidellm",
            Format::Aiperf => "aiperf",
        }
    }

    pub fn parse(name: &str) -> Result<Format, UnknownFormat> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == name)
            .ok_or_else(|| UnknownFormat(name.to_string()))
    }
}

/// A format name that is none of [`Format::ALL`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown format `{0}`; the formats are vllm-bench, guidellm, aiperf")]
pub struct UnknownFormat(pub String);

/// `:<line>` of a JSON Lines file's error, nothing for a whole-file one.
fn at(line: &Option<usize>) -> String {
    line.map(|l| format!(":{l}")).unwrap_or_default()
}

/// A size in bytes as people read it (`512 MiB`), with the exact count.
fn bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 && n % (1 << 30) == 0 => format!("{} GiB ({n} bytes)", n >> 30),
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB ({n} bytes)", n >> 20),
        n => format!("{n} bytes"),
    }
}

/// What a file over the limit is told: its size when it has one, else that there was more.
fn too_large(size: Option<u64>, limit: u64) -> String {
    match size {
        Some(size) => {
            format!("{} long: infergate imports files of at most {}", bytes(size), bytes(limit))
        }
        None => format!(
            "more than {}, read until the limit: infergate imports files of at most that size",
            bytes(limit)
        ),
    }
}

/// Why a file could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file over [`MAX_FILE_BYTES`]: its size when it has one (a regular file), else it was
    /// read up to one byte past the limit.
    #[error("{}: {}", path.display(), too_large(*size, *limit))]
    TooLarge { path: PathBuf, size: Option<u64>, limit: u64 },
    /// More requests, or per-request values, than one file may hold ([`MAX_REQUESTS`],
    /// [`MAX_VALUES`]): the line where the one too many came, for a JSON Lines file.
    #[error(
        "{}{}: more than {limit} {what}: infergate imports at most {limit} from one file",
        path.display(),
        at(line)
    )]
    TooMany { path: PathBuf, line: Option<usize>, what: &'static str, limit: usize },
    /// A line of a JSON Lines file over [`MAX_LINE_BYTES`].
    #[error("{}:{line}: a line longer than {}, the longest infergate reads", path.display(), bytes(*limit))]
    LineTooLong { path: PathBuf, line: usize, limit: u64 },
    #[error("{}:{line}:{column}: not valid JSON: {message}", path.display())]
    Syntax { path: PathBuf, line: usize, column: usize, message: String },
    /// A field of the wrong shape: the file, its line for a JSON Lines file, the field's JSON
    /// path, what is wrong.
    #[error("{}{}: not {what}: field `{field}`: {message}", path.display(), at(line))]
    Field { path: PathBuf, line: Option<usize>, what: &'static str, field: String, message: String },
    /// A value of the right shape that cannot be what its field says (a negative latency, a
    /// request that ends before it starts, counts that contradict each other): the file, its
    /// line for a JSON Lines file, the field's JSON path (with its index), the value as the file
    /// holds it and what it can be.
    #[error("{}{}: field `{field}` is {found}: {why}", path.display(), at(line))]
    Impossible { path: PathBuf, line: Option<usize>, field: String, found: String, why: String },
    #[error("{}: field `{field}` is {found}: infergate imports {what} of format {reads}", path.display())]
    Version { path: PathBuf, what: &'static str, field: String, found: String, reads: &'static str },
}

impl ImportError {
    fn field(path: &Path, what: &'static str, field: &str, message: impl Into<String>) -> Self {
        ImportError::Field {
            path: path.to_path_buf(),
            line: None,
            what,
            field: field.to_string(),
            message: message.into(),
        }
    }

    /// The same error at `line` of a JSON Lines file.
    fn at_line(self, line: usize) -> Self {
        match self {
            ImportError::Field { path, what, field, message, .. } => {
                ImportError::Field { path, line: Some(line), what, field, message }
            }
            ImportError::Impossible { path, field, found, why, .. } => {
                ImportError::Impossible { path, line: Some(line), field, found, why }
            }
            ImportError::Syntax { path, column, message, .. } => {
                ImportError::Syntax { path, line, column, message }
            }
            other => other,
        }
    }

    /// A parse error of `path`: an I/O error, a syntax error with its line and column, or a
    /// field of the wrong shape with its JSON path.
    fn of_json(path: &Path, what: &'static str, field: String, e: serde_json::Error) -> Self {
        use serde_json::error::Category;
        match e.classify() {
            Category::Io => ImportError::Read { path: path.to_path_buf(), source: e.into() },
            Category::Syntax | Category::Eof => ImportError::Syntax {
                path: path.to_path_buf(),
                line: e.line(),
                column: e.column(),
                message: e.to_string(),
            },
            Category::Data => ImportError::field(path, what, &field, e.to_string()),
        }
    }
}

/// FNV-1a, 64-bit, fed in pieces: the same value as [`crate::hash::fnv1a`] of the whole.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

/// A reader that counts and hashes the bytes that pass through it.
struct Tally<R> {
    inner: R,
    read: u64,
    hash: u64,
}

impl<R: Read> Read for Tally<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        for b in &buf[..n] {
            self.hash = (self.hash ^ u64::from(*b)).wrapping_mul(FNV_PRIME);
        }
        self.read += n as u64;
        Ok(n)
    }
}

/// A file being imported: read at most `limit` bytes (and one more, to tell that there was
/// more), parsed as it streams, hashed as it passes ([`Source::finish`] gives its
/// [`WorkloadFile`]).
pub(crate) struct Source<R = File> {
    path: PathBuf,
    limit: u64,
    reader: BufReader<Tally<io::Take<R>>>,
}

impl Source<File> {
    /// `path` opened for reading, refused when it is a regular file over `limit` bytes.
    pub fn open(path: &Path, limit: u64) -> Result<Self, ImportError> {
        let read = |source| ImportError::Read { path: path.to_path_buf(), source };
        let file = File::open(path).map_err(read)?;
        let meta = file.metadata().map_err(read)?;
        if meta.is_dir() {
            return Err(read(io::Error::other("a directory, not a file")));
        }
        if meta.is_file() && meta.len() > limit {
            return Err(ImportError::TooLarge {
                path: path.to_path_buf(),
                size: Some(meta.len()),
                limit,
            });
        }
        Ok(Source::new(path, file, limit))
    }
}

impl<R: Read> Source<R> {
    /// `inner`'s content under the name `path`, at most `limit` bytes of it.
    pub fn new(path: &Path, inner: R, limit: u64) -> Self {
        let tally = Tally { inner: inner.take(limit.saturating_add(1)), read: 0, hash: FNV_OFFSET };
        Source {
            path: path.to_path_buf(),
            limit,
            reader: BufReader::with_capacity(64 << 10, tally),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn over_limit(&self) -> bool {
        self.reader.get_ref().read > self.limit
    }

    fn too_large(&self) -> ImportError {
        ImportError::TooLarge { path: self.path.clone(), size: None, limit: self.limit }
    }

    /// The whole content as one JSON document, decoded by `seed` as it streams; every error
    /// names the file and, for a field of the wrong shape, its JSON path.
    pub fn json_seed<'de, S: DeserializeSeed<'de>>(
        &mut self,
        what: &'static str,
        seed: S,
    ) -> Result<S::Value, ImportError> {
        let mut de = serde_json::Deserializer::from_reader(&mut self.reader);
        let value = decode(&mut de, seed)
            .and_then(|v| de.end().map(|()| v).map_err(|e| (String::new(), e)));
        match value {
            Ok(v) => Ok(v),
            Err(_) if self.over_limit() => Err(self.too_large()),
            Err((field, e)) => Err(ImportError::of_json(&self.path, what, field, e)),
        }
    }

    /// The whole content as one JSON document of type `T`.
    pub fn json<T: DeserializeOwned>(&mut self, what: &'static str) -> Result<T, ImportError> {
        self.json_seed(what, std::marker::PhantomData::<T>)
    }

    /// The next line into `buf` (without its line end); false at the end of the file. A line
    /// over `line_limit` bytes is refused as soon as its limit is read.
    pub fn line(
        &mut self,
        buf: &mut Vec<u8>,
        number: usize,
        line_limit: u64,
    ) -> Result<bool, ImportError> {
        buf.clear();
        let n = (&mut self.reader)
            .take(line_limit.saturating_add(2))
            .read_until(b'\n', buf)
            .map_err(|source| ImportError::Read { path: self.path.clone(), source })?;
        if self.over_limit() {
            return Err(self.too_large());
        }
        if n == 0 {
            return Ok(false);
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
        }
        if buf.len() as u64 > line_limit {
            return Err(ImportError::LineTooLong {
                path: self.path.clone(),
                line: number,
                limit: line_limit,
            });
        }
        Ok(true)
    }

    /// The file as read (path as given, content hash), once every byte of it went through:
    /// what the parser left (trailing whitespace) is read to the end, within the limit.
    pub fn finish(mut self) -> Result<WorkloadFile, ImportError> {
        io::copy(&mut self.reader, &mut io::sink())
            .map_err(|source| ImportError::Read { path: self.path.clone(), source })?;
        if self.over_limit() {
            return Err(self.too_large());
        }
        let hash = self.reader.get_ref().hash;
        Ok(WorkloadFile {
            path: self.path.display().to_string(),
            hash: format!("fnv1a:{hash:016x}"),
        })
    }
}

/// `seed` run over `de` with the JSON path of the first error kept (`benchmarks[0].metrics`).
fn decode<'de, D: Deserializer<'de>, S: DeserializeSeed<'de>>(
    de: D,
    seed: S,
) -> Result<S::Value, (String, D::Error)> {
    let mut track = serde_path_to_error::Track::new();
    match seed.deserialize(serde_path_to_error::Deserializer::new(de, &mut track)) {
        Ok(v) => Ok(v),
        Err(e) => Err((track.path().to_string(), e)),
    }
}

/// One line of a JSON Lines file (`line`, from 1) as a `T`, every error naming the file, the
/// line and the field.
pub(crate) fn parse_line<T: DeserializeOwned>(
    path: &Path,
    line: usize,
    bytes: &[u8],
    what: &'static str,
) -> Result<T, ImportError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    decode(&mut de, std::marker::PhantomData::<T>)
        .and_then(|v| de.end().map(|()| v).map_err(|e| (String::new(), e)))
        .map_err(|(field, e)| ImportError::of_json(path, what, field, e).at_line(line))
}

/// A list decoded entry by entry, each by `item`, refused as soon as it would take more than
/// `left` entries (`left` may be shared by several lists: the file's budget of values), before
/// the memory is spent.
pub(crate) struct Capped<'a, S> {
    pub left: &'a Cell<usize>,
    /// What the entries are and how many a file may hold (`requests`, [`MAX_REQUESTS`]).
    pub what: &'static str,
    pub limit: usize,
    pub item: S,
}

impl<'a, S: Clone> Clone for Capped<'a, S> {
    fn clone(&self) -> Self {
        Capped { left: self.left, what: self.what, limit: self.limit, item: self.item.clone() }
    }
}

impl<'a, S> Capped<'a, S> {
    pub fn new(left: &'a Cell<usize>, what: &'static str, limit: usize, item: S) -> Self {
        Capped { left, what, limit, item }
    }
}

impl<'de, S: DeserializeSeed<'de> + Clone> DeserializeSeed<'de> for Capped<'_, S> {
    type Value = Vec<S::Value>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, S: DeserializeSeed<'de> + Clone> Visitor<'de> for Capped<'_, S> {
    type Value = Vec<S::Value>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a list of {}", self.what)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        loop {
            if self.left.get() == 0 {
                // One more entry is one too many; the end of the list is not.
                return match seq.next_element::<IgnoredAny>()? {
                    None => Ok(out),
                    Some(_) => Err(A::Error::custom(format!(
                        "more than {} {}: infergate imports at most {} from one file",
                        self.limit, self.what, self.limit
                    ))),
                };
            }
            match seq.next_element_seed(self.item.clone())? {
                Some(v) => out.push(v),
                None => return Ok(out),
            }
            self.left.set(self.left.get() - 1);
        }
    }
}

/// `null` or what `S` decodes.
#[derive(Clone)]
pub(crate) struct Nullable<S>(pub S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Nullable<S> {
    type Value = Option<S::Value>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de, S: DeserializeSeed<'de>> Visitor<'de> for Nullable<S> {
    type Value = Option<S::Value>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("null or a value")
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.0.deserialize(d).map(Some)
    }
}

/// A value read only when it is a number; anything else is skipped as it streams (an array
/// of a million entries takes no memory) and described for the error that names it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Loose {
    /// The number as written (`40.0` stays `40.0`, `2` stays `2`).
    Number(serde_json::Number),
    Other(String),
}

impl Loose {
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Loose::Number(n) => n.as_f64(),
            Loose::Other(_) => None,
        }
    }
}

impl<'de> Deserialize<'de> for Loose {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Loose, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Loose;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_u64<E>(self, v: u64) -> Result<Loose, E> {
                Ok(Loose::Number(v.into()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Loose, E> {
                Ok(Loose::Number(v.into()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Loose, E> {
                Ok(serde_json::Number::from_f64(v)
                    .map_or_else(|| Loose::Other(v.to_string()), Loose::Number))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Loose, E> {
                Ok(Loose::Other(v.to_string()))
            }
            fn visit_str<E>(self, v: &str) -> Result<Loose, E> {
                let short: String = v.chars().take(40).collect();
                let more = if short.len() < v.len() { "..." } else { "" };
                Ok(Loose::Other(format!("\"{short}{more}\"")))
            }
            fn visit_unit<E>(self) -> Result<Loose, E> {
                Ok(Loose::Other("null".into()))
            }
            fn visit_none<E>(self) -> Result<Loose, E> {
                Ok(Loose::Other("null".into()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Loose, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Loose::Other("a list".into()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Loose, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Loose::Other("an object".into()))
            }
        }
        d.deserialize_any(V)
    }
}

impl fmt::Display for Loose {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Loose::Number(n) => write!(f, "{n}"),
            Loose::Other(s) => f.write_str(s),
        }
    }
}

/// A number as an error shows it: as written for the usual magnitudes, in exponent form for
/// the very large and the very small (`1e308`, not 309 digits).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Num(pub f64);

impl fmt::Display for Num {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let a = self.0.abs();
        if a != 0.0 && !(1e-6..1e15).contains(&a) {
            write!(f, "{:e}", self.0)
        } else {
            write!(f, "{}", self.0)
        }
    }
}

/// Checks each value of one file (and line) against what it can physically be; every refusal
/// an [`ImportError::Impossible`] naming the file, the line and the field.
#[derive(Clone, Copy)]
pub(crate) struct Checker<'a> {
    pub path: &'a Path,
    pub line: Option<usize>,
}

/// How the checks' refusals word the longest duration.
const MAX_SECONDS_TEXT: &str = "30 days";

impl<'a> Checker<'a> {
    pub fn new(path: &'a Path) -> Self {
        Checker { path, line: None }
    }

    pub fn at_line(self, line: usize) -> Self {
        Checker { line: Some(line), ..self }
    }

    pub fn impossible(
        &self,
        field: &str,
        found: impl fmt::Display,
        why: impl Into<String>,
    ) -> ImportError {
        ImportError::Impossible {
            path: self.path.to_path_buf(),
            line: self.line,
            field: field.to_string(),
            found: found.to_string(),
            why: why.into(),
        }
    }

    /// A duration or a latency `v` in `unit` (see [`ms_factor`]): finite, not negative, at most
    /// [`MAX_SECONDS`]; its value in milliseconds.
    pub fn latency(&self, field: &str, v: f64, unit: (f64, bool)) -> Result<f64, ImportError> {
        let ms = to_ms(v, unit);
        if v.is_nan() {
            Err(self.impossible(field, Num(v), "a duration is a number"))
        } else if ms < 0.0 {
            Err(self.impossible(field, Num(v), "a duration or a latency is never negative"))
        } else if ms > MAX_SECONDS * 1000.0 {
            Err(self.impossible(
                field,
                Num(v),
                format!(
                    "over {MAX_SECONDS_TEXT}, the longest duration or latency infergate imports"
                ),
            ))
        } else {
            Ok(ms)
        }
    }

    /// A benchmark's duration `v` in `unit`: as [`Checker::latency`], and more than 0 (a run
    /// that measured requests took time); its value in seconds.
    pub fn duration(&self, field: &str, v: f64, unit: (f64, bool)) -> Result<f64, ImportError> {
        let ms = self.latency(field, v, unit)?;
        if ms <= 0.0 {
            return Err(self.impossible(field, Num(v), "a benchmark's duration is more than 0"));
        }
        Ok(ms / 1000.0)
    }

    /// [`Checker::duration`] of a value in seconds.
    pub fn duration_s(&self, field: &str, v: f64) -> Result<f64, ImportError> {
        self.duration(field, v, SECONDS)
    }

    /// A wall-clock time in seconds since the epoch, from [`EPOCH_MIN_S`] to [`EPOCH_MAX_S`].
    pub fn epoch_s(&self, field: &str, v: f64) -> Result<f64, ImportError> {
        if v.is_finite() && (EPOCH_MIN_S..=EPOCH_MAX_S).contains(&v) {
            Ok(v)
        } else {
            Err(self.impossible(
                field,
                Num(v),
                "a wall-clock time is a number of seconds since 1970 from 946684800 (2000-01-01) \
                 to 4102444800 (2100-01-01)",
            ))
        }
    }

    /// A wall-clock time in nanoseconds since the epoch, from [`EPOCH_MIN_S`] to
    /// [`EPOCH_MAX_S`].
    pub fn epoch_ns(&self, field: &str, v: u64) -> Result<u64, ImportError> {
        let (lo, hi) = ((EPOCH_MIN_S as u64) * 1_000_000_000, (EPOCH_MAX_S as u64) * 1_000_000_000);
        if (lo..=hi).contains(&v) {
            Ok(v)
        } else {
            Err(self.impossible(
                field,
                v,
                format!(
                    "a wall-clock time is a number of nanoseconds since 1970 from {lo} \
                     (2000-01-01) to {hi} (2100-01-01)"
                ),
            ))
        }
    }

    /// `later` (of field `field`) not before `earlier` (of field `earlier_field`).
    pub fn not_before<T: PartialOrd + fmt::Display>(
        &self,
        field: &str,
        later: T,
        earlier_field: &str,
        earlier: T,
        why: &str,
    ) -> Result<(), ImportError> {
        if later >= earlier {
            Ok(())
        } else {
            Err(self.impossible(
                field,
                &later,
                format!("before `{earlier_field}` ({earlier}): {why}"),
            ))
        }
    }

    /// A count (requests, tokens): at most [`MAX_COUNT`].
    pub fn count(&self, field: &str, v: u64) -> Result<u64, ImportError> {
        if v <= MAX_COUNT {
            Ok(v)
        } else {
            Err(self.impossible(
                field,
                v,
                format!("over {MAX_COUNT}, the largest count infergate imports"),
            ))
        }
    }

    /// A count written as a number that may be a float (`4.0`): a whole number from 0 to
    /// [`MAX_COUNT`].
    pub fn whole(&self, field: &str, v: f64) -> Result<u64, ImportError> {
        if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v <= MAX_COUNT as f64 {
            Ok(v as u64)
        } else {
            Err(self.impossible(
                field,
                Num(v),
                format!("a count is a whole number from 0 to {MAX_COUNT}"),
            ))
        }
    }

    /// A rate per second (requests, tokens): finite, not negative, at most [`MAX_RATE`].
    pub fn rate(&self, field: &str, v: f64) -> Result<f64, ImportError> {
        if v.is_finite() && (0.0..=MAX_RATE).contains(&v) {
            Ok(v)
        } else {
            Err(self.impossible(
                field,
                Num(v),
                format!("a rate is a number per second from 0 to {MAX_RATE:e}"),
            ))
        }
    }

    /// A setting's rate or factor: finite, more than 0, at most [`MAX_RATE`].
    pub fn positive(&self, field: &str, v: f64) -> Result<f64, ImportError> {
        if v.is_finite() && v > 0.0 && v <= MAX_RATE {
            Ok(v)
        } else {
            Err(self.impossible(
                field,
                Num(v),
                format!("a finite number more than 0, at most {MAX_RATE:e}"),
            ))
        }
    }
}

/// Seconds, for [`Checker::latency`].
pub(crate) const SECONDS: (f64, bool) = (1000.0, false);
/// Milliseconds, for [`Checker::latency`].
pub(crate) const MILLIS: (f64, bool) = (1.0, false);

/// One statistic as the source wrote it: its field's JSON path and its value, in the source's
/// unit.
#[derive(Clone, Debug)]
pub(crate) struct Stat {
    pub field: String,
    pub value: f64,
}

impl Stat {
    pub fn new(field: impl Into<String>, value: f64) -> Self {
        Stat { field: field.into(), value }
    }
}

/// A distribution as the source wrote it, each statistic with its field, before it is checked
/// and converted ([`Written::checked`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct Written {
    pub count: Option<(String, u64)>,
    pub mean: Option<Stat>,
    pub stdev: Option<Stat>,
    pub min: Option<Stat>,
    pub p50: Option<Stat>,
    pub p90: Option<Stat>,
    pub p95: Option<Stat>,
    pub p99: Option<Stat>,
    pub p999: Option<Stat>,
    pub max: Option<Stat>,
}

/// Two statistics of one distribution that are in order up to floating-point rounding (a
/// mean of equal values can exceed them in the last digit).
fn in_order(lower: f64, upper: f64) -> bool {
    lower <= upper + 1e-9 * lower.abs().max(upper.abs()).max(1.0)
}

impl Written {
    /// Each statistic checked (a latency in `unit`: finite, not negative, at most
    /// [`MAX_SECONDS`]; the count at most [`MAX_COUNT`]; min <= P50 <= P90 <= P95 <= P99 <=
    /// P99.9 <= max and min <= mean <= max), then in milliseconds.
    pub fn checked(&self, c: &Checker, unit: (f64, bool)) -> Result<Reported, ImportError> {
        let ms = |s: &Option<Stat>| -> Result<Option<f64>, ImportError> {
            s.as_ref().map(|s| c.latency(&s.field, s.value, unit)).transpose()
        };
        let count = match &self.count {
            Some((field, n)) => Some(c.count(field, *n)?),
            None => None,
        };
        let r = Reported {
            count,
            mean: ms(&self.mean)?,
            stdev: ms(&self.stdev)?,
            min: ms(&self.min)?,
            p50: ms(&self.p50)?,
            p90: ms(&self.p90)?,
            p95: ms(&self.p95)?,
            p99: ms(&self.p99)?,
            p999: ms(&self.p999)?,
            max: ms(&self.max)?,
        };
        let ranked = [
            (&self.min, r.min, "the minimum"),
            (&self.p50, r.p50, "P50"),
            (&self.p90, r.p90, "P90"),
            (&self.p95, r.p95, "P95"),
            (&self.p99, r.p99, "P99"),
            (&self.p999, r.p999, "P99.9"),
            (&self.max, r.max, "the maximum"),
        ];
        let present: Vec<(&Stat, f64, &str)> =
            ranked.iter().filter_map(|(s, v, name)| Some((s.as_ref()?, (*v)?, *name))).collect();
        for pair in present.windows(2) {
            let ((low, lv, lname), (high, hv, hname)) = (pair[0], pair[1]);
            if !in_order(lv, hv) {
                return Err(c.impossible(
                    &high.field,
                    Num(high.value),
                    format!(
                        "below `{}` ({}): {hname} of a distribution is never below {lname}",
                        low.field,
                        Num(low.value)
                    ),
                ));
            }
        }
        if let (Some(mean), Some(m)) = (&self.mean, r.mean) {
            if let (Some(min), Some(lo)) = (&self.min, r.min)
                && !in_order(lo, m)
            {
                return Err(c.impossible(
                    &mean.field,
                    Num(mean.value),
                    format!(
                        "below `{}` ({}): a mean is never below the minimum",
                        min.field,
                        Num(min.value)
                    ),
                ));
            }
            if let (Some(max), Some(hi)) = (&self.max, r.max)
                && !in_order(m, hi)
            {
                return Err(c.impossible(
                    &mean.field,
                    Num(mean.value),
                    format!(
                        "above `{}` ({}): a mean is never above the maximum",
                        max.field,
                        Num(max.value)
                    ),
                ));
            }
        }
        Ok(r)
    }
}

/// Milliseconds from a value in `unit` (`ns`, `us`, `ms`, `s`/`sec`): one exact-as-floats
/// conversion; None for another unit.
pub(crate) fn ms_factor(unit: &str) -> Option<(f64, bool)> {
    // (factor, divide): nanoseconds are divided by 1e6, seconds multiplied by 1000.
    match unit {
        "ms" => Some((1.0, false)),
        "ns" => Some((1e6, true)),
        "us" => Some((1e3, true)),
        "s" | "sec" | "seconds" => Some((1000.0, false)),
        _ => None,
    }
}

/// `v` in milliseconds from `unit` (see [`ms_factor`]).
pub(crate) fn to_ms(v: f64, (factor, divide): (f64, bool)) -> f64 {
    if divide { v / factor } else { v * factor }
}

/// A distribution as the source reported it: each statistic it gives, already in ms.
#[derive(Clone, Debug, Default)]
pub(crate) struct Reported {
    pub count: Option<u64>,
    pub mean: Option<f64>,
    pub stdev: Option<f64>,
    pub min: Option<f64>,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    pub p999: Option<f64>,
    pub max: Option<f64>,
}

impl Reported {
    /// The statistics, each one the source did not report NaN (written `null`); None when it
    /// reported none. A count it did not report is 0 and `missing_count` gets the metric.
    pub fn stats(&self) -> Option<Stats> {
        let all = [
            self.mean, self.stdev, self.min, self.p50, self.p90, self.p95, self.p99, self.p999,
            self.max,
        ];
        if all.iter().all(Option::is_none) {
            return None;
        }
        let v = |x: Option<f64>| x.unwrap_or(f64::NAN);
        Some(Stats {
            count: self.count.unwrap_or(0),
            mean: v(self.mean),
            stdev: v(self.stdev),
            min: v(self.min),
            p50: v(self.p50),
            p90: v(self.p90),
            p95: v(self.p95),
            p99: v(self.p99),
            p999: v(self.p999),
            max: v(self.max),
        })
    }
}

/// What a format's reader makes of its file, before it becomes a summary.
#[derive(Clone, Debug, Default)]
pub struct Imported {
    pub tool: String,
    pub tool_version: Option<String>,
    pub format_version: Option<String>,
    pub files: Vec<WorkloadFile>,
    pub definitions: Vec<String>,
    pub load: ImportedLoad,
    /// The model, endpoint kind (`chat`, `completions`), URL and streaming, when the file says.
    pub model: Option<String>,
    pub endpoint: Option<String>,
    pub url: Option<String>,
    pub stream: Option<bool>,
    /// RFC 3339 start and end, when the file has them.
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    pub interrupted: bool,
    pub requests: RequestCounts,
    pub tokens: TokenCounts,
    pub latency: LatencyMetrics,
    pub throughput: Throughput,
    pub goodput_requests_per_s: Option<f64>,
    pub duration_s: Option<f64>,
    /// The per-request records (None: the source holds none).
    pub records: Option<Vec<RequestRecord>>,
    pub notes: Vec<String>,
}

impl Imported {
    /// The run's `summary.json`: the source's values where it measured them, blank elsewhere.
    pub fn summary(&self) -> Summary {
        let hash = self.files.first().map(|f| f.hash.trim_start_matches("fnv1a:").to_string());
        let run_id = format!("imported-{}-{}", self.tool, hash.as_deref().unwrap_or("file"));
        let environment = Environment::default();
        let status = if self.interrupted {
            RunStatus::Interrupted
        } else if self.requests.ok == 0 {
            RunStatus::Failed
        } else {
            RunStatus::Complete
        };
        let mut notes = vec![format!(
            "imported from {} ({}): measured by {}{}, not by infergate; values the source did \
             not report are blank",
            self.files.first().map_or("?", |f| f.path.as_str()),
            self.files.first().map_or("?", |f| f.hash.as_str()),
            self.tool,
            self.tool_version.as_deref().map(|v| format!(" {v}")).unwrap_or_default(),
        )];
        notes.extend(self.definitions.iter().cloned());
        notes.extend(self.notes.iter().cloned());
        let api_base = self.url.clone().unwrap_or_default();
        Summary {
            schema_version: SCHEMA_VERSION,
            run_id,
            status,
            simulated: false,
            tool: ToolInfo {
                name: self.tool.clone(),
                version: self.tool_version.clone().unwrap_or_else(|| "unknown".into()),
            },
            git: None,
            environment_fingerprint: environment.fingerprint(),
            environment,
            target: TargetInfo {
                name: format!("imported ({})", self.tool),
                url: api_base.clone(),
                api_base,
                endpoint: self.endpoint.clone().unwrap_or_default(),
                stream: self.stream.unwrap_or(true),
                model: self.model.clone().unwrap_or_default(),
                ..TargetInfo::default()
            },
            config: RunConfig::Imported(Box::new(ImportedConfig {
                imported: ImportSource {
                    tool: self.tool.clone(),
                    tool_version: self.tool_version.clone(),
                    format_version: self.format_version.clone(),
                    files: self.files.clone(),
                    definitions: self.definitions.clone(),
                },
                load: self.load.clone(),
            })),
            profile: format!("imported-{}", self.tool),
            engine: None,
            invocation: None,
            timing: Timing {
                started_at: self.started_at.clone().unwrap_or_default(),
                ended_at: self.ended_at.clone().unwrap_or_default(),
                window: Window {
                    start_ms: self.duration_s.map(|_| 0.0),
                    end_ms: self.duration_s.map(|d| d * 1000.0),
                    duration_s: self.duration_s,
                },
            },
            requests: self.requests.clone(),
            tokens: self.tokens.clone(),
            metrics: self.latency.clone(),
            throughput: self.throughput.clone(),
            goodput: Goodput { requests_per_s: self.goodput_requests_per_s, ..Goodput::default() },
            schedule: ScheduleSummary::default(),
            workload: WorkloadInfo::new(0, LengthBasis::Dataset),
            turns: Vec::new(),
            // The source's own file says nothing of a plateau: blank, never computed here.
            plateau: None,
            cost: Default::default(),
            server: None,
            isolation: None,
            extra: Default::default(),
            notes,
        }
    }
}

/// Read `file` (and, for AIPerf, the per-request export beside it) in `format`.
pub fn import(format: Format, file: &Path, index: Option<usize>) -> Result<Imported, ImportError> {
    match format {
        Format::VllmBench => vllm::read(file),
        Format::Guidellm => guidellm::read(file, index),
        Format::Aiperf => aiperf::read(file),
    }
}

/// Request counts from records: each in exactly one class (warmup ones apart).
pub(crate) fn counts_of(records: &[RequestRecord]) -> RequestCounts {
    let mut c = RequestCounts::default();
    for r in records {
        if r.warmup {
            c.warmup += 1;
            continue;
        }
        c.total += 1;
        match r.class {
            Outcome::Ok => c.ok += 1,
            Outcome::Cancelled => c.cancelled += 1,
            _ => c.failed += 1,
        }
        *c.by_class.entry(r.class.to_string()).or_insert(0) += 1;
    }
    c
}

/// The class of a failed request from what the source says of it: an HTTP status when it has
/// one, else a timeout or a connection failure when its error says so, else a stream error.
pub(crate) fn failure_class(status: Option<u16>, error: &str) -> Outcome {
    let lower = error.to_ascii_lowercase();
    match status {
        Some(s) if (400..600).contains(&s) => Outcome::Http(s),
        _ if lower.contains("timeout") || lower.contains("timed out") => Outcome::Timeout,
        _ if lower.contains("connect") => Outcome::ConnectError,
        _ => Outcome::StreamError,
    }
}

/// What the formats' tests share: strategies of JSON shaped like a format, the invariants every
/// successful import keeps, and the check that a refusal names its file and field.
#[cfg(test)]
pub(crate) mod testkit {
    use std::path::{Path, PathBuf};

    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::{ImportError, Imported};
    use crate::outcome::Outcome;

    /// A number of any kind a hostile file may hold (usual values most often; negatives, zero,
    /// 1e308, the extremes of the integers, wall-clock times), or now and then no number at all.
    pub fn num() -> BoxedStrategy<Value> {
        prop_oneof![
            5 => prop::sample::select(vec![
                json!(0), json!(1), json!(2), json!(3), json!(4), json!(0.01), json!(0.05),
                json!(0.1), json!(32), json!(1000.0), json!(1764930000.05),
                json!(1764930000050000000u64),
            ]),
            3 => prop::sample::select(vec![
                json!(-1), json!(-0.05), json!(1e308), json!(-1e308), json!(5e-324),
                json!(u64::MAX), json!(i64::MIN), json!(1e20), json!(4102444801.0),
            ]),
            1 => any::<f64>().prop_filter("JSON has no NaN", |f| f.is_finite()).prop_map(|f| json!(f)),
            1 => any::<i64>().prop_map(|i| json!(i)),
            1 => prop::sample::select(vec![Value::Null, json!("x"), json!([]), json!({}), json!(true)]),
        ]
        .boxed()
    }

    /// Every value of `v` but the root, by JSON pointer (`/itls/0/1`).
    pub fn pointers(v: &Value) -> Vec<String> {
        fn walk(v: &Value, at: &str, out: &mut Vec<String>) {
            let children: Vec<(String, &Value)> = match v {
                Value::Object(m) => {
                    m.iter().map(|(k, v)| (k.replace('~', "~0").replace('/', "~1"), v)).collect()
                }
                Value::Array(a) => a.iter().enumerate().map(|(i, v)| (i.to_string(), v)).collect(),
                _ => Vec::new(),
            };
            for (k, child) in children {
                let p = format!("{at}/{k}");
                out.push(p.clone());
                walk(child, &p, out);
            }
        }
        let mut out = Vec::new();
        walk(v, "", &mut out);
        out
    }

    /// One change to a document.
    #[derive(Clone, Debug)]
    pub enum Edit {
        /// The value taken out (a key of its object, an entry of its list).
        Remove,
        /// The value replaced.
        Replace(Value),
        /// One more entry at the end of a list (a value that is no list: replaced).
        Push(Value),
    }

    /// `base` with up to three of its values removed, replaced or grown (the first two with
    /// any number or none, the lists with one more of them).
    pub fn edits(base: Value) -> BoxedStrategy<Value> {
        let ptrs = pointers(&base);
        let edit = prop_oneof![
            1 => Just(Edit::Remove),
            4 => num().prop_map(Edit::Replace),
            1 => num().prop_map(Edit::Push),
        ];
        prop::collection::vec((0..ptrs.len(), edit), 0..4)
            .prop_map(move |es| {
                let mut v = base.clone();
                for (i, e) in es {
                    apply(&mut v, &ptrs[i], e);
                }
                v
            })
            .boxed()
    }

    /// `e` applied at `pointer` of `v`; nothing when an earlier edit took the place away.
    fn apply(v: &mut Value, pointer: &str, e: Edit) {
        let (parent, key) = pointer.rsplit_once('/').expect("a pointer below the root");
        match e {
            Edit::Remove => match v.pointer_mut(parent) {
                Some(Value::Object(m)) => {
                    m.remove(&key.replace("~1", "/").replace("~0", "~"));
                }
                Some(Value::Array(a)) => {
                    if let Ok(i) = key.parse::<usize>()
                        && i < a.len()
                    {
                        a.remove(i);
                    }
                }
                _ => {}
            },
            Edit::Replace(to) => {
                if let Some(at) = v.pointer_mut(pointer) {
                    *at = to;
                }
            }
            Edit::Push(to) => match v.pointer_mut(pointer) {
                Some(Value::Array(a)) => a.push(to),
                Some(at) => *at = to,
                None => {}
            },
        }
    }

    /// `s`, or absent.
    pub fn opt<S: Strategy<Value = Value> + 'static>(s: S) -> BoxedStrategy<Option<Value>> {
        prop_oneof![1 => Just(None), 4 => s.prop_map(Some)].boxed()
    }

    /// A list of `n` numbers most of the time, else of another length (0 to 4).
    pub fn list_of(n: usize, item: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
        prop_oneof![
            4 => prop::collection::vec(item.clone(), n..=n),
            1 => prop::collection::vec(item, 0..5),
        ]
        .prop_map(Value::Array)
        .boxed()
    }

    /// An object of the keys whose value is present.
    pub fn object(pairs: Vec<(&str, Option<Value>)>) -> Value {
        Value::Object(pairs.into_iter().filter_map(|(k, v)| Some((k.to_string(), v?))).collect())
    }

    /// `v` written as `dir/name`.
    pub fn write(dir: &Path, name: &str, v: &Value) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, serde_json::to_string_pretty(v).unwrap()).unwrap();
        path
    }

    /// `*v` at `pointer` set to `to` (the pointer exists in the document).
    pub fn set(v: &mut Value, pointer: &str, to: Value) {
        *v.pointer_mut(pointer).unwrap_or_else(|| panic!("no {pointer} in the document")) = to;
    }

    /// What every successful import keeps, whatever its file held: finite, non-negative times
    /// in order, a window of positive length, counts that add up, statistics that are numbers.
    pub fn assert_sane(i: &Imported) {
        if let Some(d) = i.duration_s {
            assert!(d.is_finite() && d > 0.0, "duration {d}");
        }
        let r = &i.requests;
        assert_eq!(r.ok + r.failed + r.cancelled, r.total, "{r:?}");
        for (name, s) in [
            ("ttft", &i.latency.ttft_ms),
            ("tpot", &i.latency.tpot_ms),
            ("itl", &i.latency.itl_ms),
            ("e2e", &i.latency.e2e_ms),
        ] {
            let Some(s) = s else { continue };
            for v in [s.mean, s.stdev, s.min, s.p50, s.p90, s.p95, s.p99, s.p999, s.max] {
                assert!(v.is_nan() || (v.is_finite() && v >= 0.0), "{name}: {s:?}");
            }
        }
        for v in [
            i.throughput.requests_per_s,
            i.throughput.output_tokens_per_s,
            i.throughput.total_tokens_per_s,
            i.goodput_requests_per_s,
        ]
        .into_iter()
        .flatten()
        {
            assert!(v.is_finite() && v >= 0.0, "rate {v}");
        }
        for rec in i.records.iter().flatten() {
            let ok_time = |t: f64| t.is_finite() && t >= 0.0;
            assert!(ok_time(rec.intended_ms) && ok_time(rec.end_ms), "{rec:?}");
            assert!(rec.end_ms >= rec.intended_ms, "ends before it starts: {rec:?}");
            if let Some(ttft) = rec.ttft_ms() {
                assert!(ttft.is_finite() && ttft >= 0.0, "{rec:?}");
                assert!(rec.e2e_ms().is_none_or(|e2e| e2e >= ttft), "{rec:?}");
            }
            assert!(rec.itl_ms.iter().all(|g| g.is_finite() && *g >= 0.0), "{rec:?}");
            if rec.class != Outcome::Ok {
                assert!(rec.first_token_ms.is_none() && rec.itl_ms.is_empty(), "{rec:?}");
            }
        }
        // The summary is written and read back.
        let text = serde_json::to_string(&i.summary()).unwrap();
        serde_json::from_str::<crate::summary::Summary>(&text).unwrap();
    }

    /// `result` is a refusal that names `path` and, as a field, `field`.
    pub fn assert_refused<T: std::fmt::Debug>(
        result: Result<T, ImportError>,
        path: &Path,
        field: &str,
    ) {
        let e = result.expect_err("refused").to_string();
        assert!(e.contains(&path.display().to_string()), "the file is not named: {e}");
        assert!(e.contains(&format!("field `{field}")), "field `{field}` is not named: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_imported_summary_reads_back_with_its_blanks_and_its_source() {
        let imported = Imported {
            tool: "vllm-bench".into(),
            files: vec![WorkloadFile::of("r.json", b"{}")],
            definitions: vec!["counted from the send".into()],
            load: ImportedLoad {
                mode: Some("closed".into()),
                concurrency: Some(4),
                ..Default::default()
            },
            requests: RequestCounts { total: 2, ok: 2, ..Default::default() },
            latency: LatencyMetrics {
                ttft_ms: Reported {
                    count: Some(2),
                    mean: Some(12.5),
                    p99: Some(20.0),
                    ..Default::default()
                }
                .stats(),
                ..Default::default()
            },
            ..Default::default()
        };
        let s = imported.summary();
        let text = serde_json::to_string(&s).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(json["metrics"]["ttft_ms"]["p50"].is_null(), "{json}");
        assert_eq!(json["config"]["imported"]["tool"], "vllm-bench");
        let back: Summary = serde_json::from_str(&text).unwrap();
        assert_eq!(
            back.metric(crate::metric::MetricPath::named("metrics.ttft_ms.p99")),
            Some(20.0)
        );
        assert_eq!(back.metric(crate::metric::MetricPath::named("metrics.ttft_ms.p50")), None);
        assert!(back.metrics.ttft_ms.unwrap().p50.is_nan());
        let c = back.config.imported().expect("an imported run's settings");
        assert_eq!(c.load.concurrency, Some(4));
        assert_eq!(c.imported.files[0].hash, imported.files[0].hash);
        assert!(back.config.profile().is_none());
        // Its settings are read strictly: an unknown key is named.
        let bad = text.replace("\"definitions\"", "\"definitons\"");
        let e = serde_json::from_str::<Summary>(&bad).unwrap_err().to_string();
        assert!(e.contains("not an imported run's settings") && e.contains("definitons"), "{e}");
    }

    #[test]
    fn a_source_reads_within_its_limit_and_hashes_what_it_read() {
        let name = Path::new("piped.json");
        // A stream that never ends (whitespace is valid JSON around a value) stops one byte
        // past the limit.
        let mut endless = Source::new(name, io::repeat(b' '), 1000);
        let e = endless.json::<serde_json::Value>("a test file").unwrap_err();
        assert!(matches!(e, ImportError::TooLarge { size: None, limit: 1000, .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            "piped.json: more than 1000 bytes, read until the limit: infergate imports files of \
             at most that size"
        );
        assert_eq!(endless.reader.get_ref().read, 1001);
        // Within the limit: parsed, and hashed over every byte, the trailing ones included.
        let text = b"{\"a\": [1, 2.5]}  \n";
        let mut ok = Source::new(name, &text[..], text.len() as u64);
        let v: serde_json::Value = ok.json("a test file").unwrap();
        assert_eq!(v["a"][1], 2.5);
        let file = ok.finish().unwrap();
        assert_eq!(file.hash, WorkloadFile::of("piped.json", text).hash);
        // One byte more than the limit: refused, whether the parser or the end read it.
        let mut over = Source::new(name, &text[..], text.len() as u64 - 1);
        let parsed = over.json::<serde_json::Value>("a test file");
        let e = parsed.and_then(|_| over.finish().map(|_| ())).unwrap_err();
        assert!(matches!(e, ImportError::TooLarge { .. }), "{e:?}");
        // A regular file over the limit is refused by its size, before a byte is read.
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.json");
        File::create(&big).unwrap().set_len(5000).unwrap();
        let e = Source::open(&big, 4096).err().unwrap();
        assert!(matches!(e, ImportError::TooLarge { size: Some(5000), limit: 4096, .. }), "{e:?}");
        assert!(
            e.to_string()
                .contains("5000 bytes long: infergate imports files of at most 4096 bytes"),
            "{e}"
        );
        assert!(matches!(Source::open(dir.path(), 4096), Err(ImportError::Read { .. })));
    }

    #[test]
    fn a_line_is_read_within_its_limit() {
        let text = b"{}\r\n\n0123456789\nabcdefghijklmnop\n";
        let mut s = Source::new(Path::new("r.jsonl"), &text[..], 1000);
        let mut buf = Vec::new();
        assert!(s.line(&mut buf, 1, 10).unwrap());
        assert_eq!(buf, b"{}");
        assert!(s.line(&mut buf, 2, 10).unwrap());
        assert_eq!(buf, b"");
        assert!(s.line(&mut buf, 3, 10).unwrap());
        assert_eq!(buf, b"0123456789");
        let e = s.line(&mut buf, 4, 10).unwrap_err();
        assert!(matches!(e, ImportError::LineTooLong { line: 4, limit: 10, .. }), "{e:?}");
        assert!(buf.len() <= 12, "read no further than the limit: {}", buf.len());
        // An endless line stops at its limit.
        let mut endless = Source::new(Path::new("zero"), io::repeat(0), 1 << 30);
        assert!(matches!(
            endless.line(&mut buf, 1, 64),
            Err(ImportError::LineTooLong { line: 1, .. })
        ));
        assert!(endless.reader.get_ref().read < 1 << 20);
    }

    #[test]
    fn a_capped_list_is_refused_at_one_entry_too_many_and_shares_its_budget() {
        let decode = |text: &str, left: &Cell<usize>| {
            let seed = Capped::new(left, "things", 3, std::marker::PhantomData::<u64>);
            seed.deserialize(&mut serde_json::Deserializer::from_str(text))
        };
        assert_eq!(decode("[1, 2, 3]", &Cell::new(3)).unwrap(), vec![1, 2, 3]);
        let e = decode("[1, 2, 3, 4]", &Cell::new(3)).unwrap_err().to_string();
        assert!(e.starts_with("more than 3 things: infergate imports at most 3"), "{e}");
        // Lists of lists draw on one budget.
        let left = Cell::new(3);
        let inner = Capped::new(&left, "gaps", 3, std::marker::PhantomData::<f64>);
        let outer_left = Cell::new(10);
        let outer = Capped::new(&outer_left, "requests", 10, inner);
        let e = outer
            .deserialize(&mut serde_json::Deserializer::from_str("[[1, 2], [3], [4]]"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("more than 3 gaps"), "{e}");
    }

    #[test]
    fn an_impossible_value_names_the_file_the_line_and_the_field() {
        let c = Checker::new(Path::new("r.jsonl")).at_line(3);
        let e = c.latency("metrics.ttft.value[0]", -1.0, MILLIS).unwrap_err().to_string();
        assert_eq!(
            e,
            "r.jsonl:3: field `metrics.ttft.value[0]` is -1: a duration or a latency is never \
             negative"
        );
        let c = Checker::new(Path::new("r.json"));
        assert!(
            c.latency("x", 1e308, SECONDS)
                .unwrap_err()
                .to_string()
                .contains("is 1e308: over 30 days")
        );
        assert_eq!(c.latency("x", 2.5, SECONDS).unwrap(), 2500.0);
        assert!(c.epoch_s("t", 1764930000.0).is_ok() && c.epoch_s("t", 0.0).is_err());
        assert!(c.epoch_ns("t", 1_764_930_000_000_000_000).is_ok() && c.epoch_ns("t", 1).is_err());
        assert!(
            c.whole("n", 4.0).is_ok() && c.whole("n", 4.5).is_err() && c.whole("n", -1.0).is_err()
        );
        assert!(c.count("n", MAX_COUNT).is_ok() && c.count("n", MAX_COUNT + 1).is_err());
        assert!(
            c.rate("r", 0.0).is_ok() && c.rate("r", -0.1).is_err() && c.rate("r", 1e308).is_err()
        );
        assert!(c.duration_s("d", 0.0).is_err());
        assert_eq!(c.duration_s("d", 0.5).unwrap(), 0.5);
        // A mean a hair above equal values is in order; a P90 below P50 is not.
        let stat = |f: &str, v: f64| Some(Stat::new(f, v));
        let equal = Written {
            mean: stat("mean", 10.000000000000002),
            min: stat("min", 10.0),
            max: stat("max", 10.0),
            ..Default::default()
        };
        assert!(equal.checked(&c, MILLIS).is_ok());
        let crossed =
            Written { p50: stat("p50", 20.0), p90: stat("p90", 10.0), ..Default::default() };
        let e = crossed.checked(&c, MILLIS).unwrap_err().to_string();
        assert!(e.contains("field `p90` is 10: below `p50` (20)"), "{e}");
    }

    #[test]
    fn formats_are_named_and_failures_classed_from_what_the_source_says() {
        assert_eq!(Format::parse("aiperf"), Ok(Format::Aiperf));
        let e = Format::parse("genai-perf").unwrap_err().to_string();
        assert!(e.contains("vllm-bench, guidellm, aiperf"), "{e}");
        let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
        assert!(e.ends_with(&names.join(", ")), "the message lists every format: {e}");
        assert_eq!(failure_class(Some(503), "Service Unavailable"), Outcome::Http(503));
        assert_eq!(failure_class(None, "ReadTimeout: timed out"), Outcome::Timeout);
        assert_eq!(failure_class(None, "ClientConnectorError"), Outcome::ConnectError);
        assert_eq!(failure_class(None, "Traceback ..."), Outcome::StreamError);
        assert_eq!(to_ms(1.5, ms_factor("sec").unwrap()), 1500.0);
        assert_eq!(to_ms(2_500_000.0, ms_factor("ns").unwrap()), 2.5);
        assert_eq!(ms_factor("fortnights"), None);
    }
}
