//! The run directory: the file boundary between a bench run and everything that reads it.
//!
//! ```text
//! <run dir>/
//!   summary.json      written once at the end, atomically (temp file + rename)
//!   requests.jsonl    one line per request, appended as each request finishes
//!   histograms.hlog   HdrHistogram V2 interval log (microseconds), one tagged histogram per metric
//! ```
//! `requests.jsonl` is flushed line by line, so a crash or Ctrl-C loses nothing already measured;
//! [`recompute`] rebuilds the metrics from it.
//!
//! One run per directory: [`claim`] (and [`create`]) take an exclusive lock on `<dir>/.lock`
//! before anything is written, so a second run into the same directory is refused
//! ([`RunDirError::InUse`]) instead of interleaving its records with the first one's.

use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};

use crate::metrics::{MetricsAccumulator, RunMetrics, Slo};
use crate::record::RequestRecord;
use crate::summary::Summary;

pub(crate) use crate::fileio::LOCK_FILE;
use crate::fileio::io_err;
pub use crate::fileio::{RunDirError, write_atomic, write_json};

pub const SUMMARY_FILE: &str = <Summary as crate::artifact::Artifact>::FILE;
pub const REQUESTS_FILE: &str = "requests.jsonl";
pub(crate) const HISTOGRAMS_FILE: &str = "histograms.hlog";
/// Create (or reuse an empty) run directory and lock it for this process (see [`claim`]); the
/// lock is held until [`release`] or the end of the process. A directory that already holds a
/// run, or that another run has locked, is refused.
pub fn create(dir: &Path) -> Result<PathBuf, RunDirError> {
    let lock = claim(dir)?;
    held().push(lock);
    Ok(dir.to_path_buf())
}

/// Release the lock [`create`] took on `dir` (a no-op when this process holds none).
pub fn release(dir: &Path) {
    held().retain(|l| l.dir != dir);
}

/// The locks [`create`] took, held until [`release`] or the end of the process.
fn held() -> std::sync::MutexGuard<'static, Vec<RunDirLock>> {
    static HELD: std::sync::Mutex<Vec<RunDirLock>> = std::sync::Mutex::new(Vec::new());
    HELD.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A run directory locked by this process: nobody else can claim it while this value lives.
/// The operating system releases the lock when the process ends, however it ends, so a crashed
/// run leaves no stale lock (its records still mark the directory as holding a run).
#[derive(Debug)]
pub struct RunDirLock {
    dir: PathBuf,
    _file: File,
}

impl RunDirLock {
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Create (or reuse an empty) run directory and take an exclusive lock on `<dir>/.lock` before
/// anything is written. Refused: a directory that already holds a run
/// ([`RunDirError::Occupied`]) and one another run holds ([`RunDirError::InUse`]). On platforms
/// without `flock` (not Unix) the directory is created without a lock.
pub(crate) fn claim(dir: &Path) -> Result<RunDirLock, RunDirError> {
    let occupied = || {
        [SUMMARY_FILE, REQUESTS_FILE]
            .into_iter()
            .find(|f| dir.join(f).exists())
            .map_or(Ok(()), |file| Err(RunDirError::Occupied { dir: dir.to_path_buf(), file }))
    };
    occupied()?;
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    let path = dir.join(LOCK_FILE);
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io_err(&path))?;
    lock_exclusive(&file).map_err(|e| match e.kind() {
        io::ErrorKind::WouldBlock => RunDirError::InUse { dir: dir.to_path_buf() },
        _ => RunDirError::Io { path: path.clone(), source: e },
    })?;
    // Checked again under the lock: a run that finished between the first check and the lock
    // has written its records by now.
    occupied()?;
    Ok(RunDirLock { dir: dir.to_path_buf(), _file: file })
}

#[cfg(unix)]
fn lock_exclusive(file: &File) -> io::Result<()> {
    use rustix::fs::{FlockOperation, flock};
    flock(file, FlockOperation::NonBlockingLockExclusive).map_err(io::Error::from)
}

#[cfg(not(unix))]
fn lock_exclusive(_file: &File) -> io::Result<()> {
    Ok(())
}

/// Appends records to `requests.jsonl`, one flushed line each.
pub struct RecordWriter {
    path: PathBuf,
    out: BufWriter<Box<dyn Write + Send>>,
    /// The file itself, to sync at the end.
    file: File,
    line: Vec<u8>,
}

impl RecordWriter {
    pub fn create(dir: &Path) -> Result<RecordWriter, RunDirError> {
        RecordWriter::create_through(dir, |f| Box::new(f))
    }

    /// Records written through the writer `wrap` makes of the file (tests make it fail as a
    /// full disk does).
    pub fn create_through(
        dir: &Path,
        wrap: impl FnOnce(File) -> Box<dyn Write + Send>,
    ) -> Result<RecordWriter, RunDirError> {
        let path = dir.join(REQUESTS_FILE);
        let file = File::create(&path).map_err(io_err(&path))?;
        let sync = file.try_clone().map_err(io_err(&path))?;
        Ok(RecordWriter {
            out: BufWriter::with_capacity(64 * 1024, wrap(file)),
            file: sync,
            path,
            line: Vec::with_capacity(1024),
        })
    }

    pub fn write(&mut self, r: &RequestRecord) -> Result<(), RunDirError> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, r).expect("records serialize");
        self.line.push(b'\n');
        self.out.write_all(&self.line).map_err(io_err(&self.path))?;
        // Hand each line to the OS right away: a crash of this process loses nothing written.
        self.out.flush().map_err(io_err(&self.path))
    }

    pub fn finish(mut self) -> Result<(), RunDirError> {
        self.out.flush().map_err(io_err(&self.path))?;
        self.file.sync_all().map_err(io_err(&self.path))
    }
}

pub fn write_summary(dir: &Path, summary: &Summary) -> Result<PathBuf, RunDirError> {
    let path = dir.join(SUMMARY_FILE);
    write_json(&path, summary)?;
    Ok(path)
}

/// Write the latency histograms (microseconds) as an HdrHistogram V2 interval log, one
/// histogram per metric tagged with its name (`ttft_ms`, `tpot_ms`, `itl_ms`, `e2e_ms`, ...).
pub fn write_histograms(
    dir: &Path,
    acc: &MetricsAccumulator,
    started: SystemTime,
    window: Duration,
) -> Result<(), RunDirError> {
    let path = dir.join(HISTOGRAMS_FILE);
    let mut buf = Vec::new();
    let mut ser = V2DeflateSerializer::new();
    {
        let mut w = IntervalLogWriterBuilder::new()
            .add_comment("infergate latency histograms; values in microseconds; tag = metric")
            .with_start_time(started)
            .with_base_time(started)
            .with_max_value_divisor(1000.0)
            .begin_log_with(&mut buf, &mut ser)
            .map_err(io_err(&path))?;
        for (tag, h) in [
            ("ttft_ms", &acc.ttft),
            ("tpot_ms", &acc.tpot),
            ("itl_ms", &acc.itl),
            ("e2e_ms", &acc.e2e),
            ("queue_ms", &acc.queue),
            ("lag_ms", &acc.lag),
        ] {
            if h.is_empty() {
                continue;
            }
            w.write_histogram(h.histogram(), Duration::ZERO, window, Tag::new(tag)).map_err(
                |e| RunDirError::Io {
                    path: path.clone(),
                    source: io::Error::other(format!("{e:?}")),
                },
            )?;
        }
    }
    write_atomic(&path, &buf)
}

/// Records read back from `requests.jsonl`.
pub struct ReadRecords {
    pub records: Vec<RequestRecord>,
    /// The last line was cut short (the writer was killed mid-line); it was skipped.
    pub truncated_tail: bool,
}

pub fn read_records(dir: &Path) -> Result<ReadRecords, RunDirError> {
    let path = dir.join(REQUESTS_FILE);
    let read_err = |source| RunDirError::Read { path: path.clone(), source };
    let file = File::open(&path).map_err(read_err)?;
    let lines: Vec<String> =
        BufReader::new(file).lines().collect::<Result<_, _>>().map_err(read_err)?;
    let mut records = Vec::with_capacity(lines.len());
    let mut truncated_tail = false;
    let last = lines.len();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<RequestRecord>(line) {
            Ok(r) => records.push(r),
            Err(_) if i + 1 == last && !line.ends_with('}') => truncated_tail = true,
            Err(e) => {
                return Err(RunDirError::BadRecord { path, line: i + 1, message: e.to_string() });
            }
        }
    }
    Ok(ReadRecords { records, truncated_tail })
}

/// The histograms of an HdrHistogram interval log, by tag (`None` when it cannot be read).
pub fn decode_hlog(
    bytes: &[u8],
) -> Option<std::collections::BTreeMap<String, hdrhistogram::Histogram<u64>>> {
    use base64::Engine;
    use hdrhistogram::serialization::Deserializer;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    let mut out = std::collections::BTreeMap::new();
    for entry in IntervalLogIterator::new(bytes) {
        if let LogEntry::Interval(h) = entry.ok()? {
            let tag = h.tag()?.as_str().to_string();
            let raw =
                base64::engine::general_purpose::STANDARD.decode(h.encoded_histogram()).ok()?;
            let hist: hdrhistogram::Histogram<u64> =
                Deserializer::new().deserialize(&mut raw.as_slice()).ok()?;
            out.insert(tag, hist);
        }
    }
    Some(out)
}

/// The histograms a run's `histograms.hlog` holds, by tag, from its accumulator.
pub(crate) fn logged_histograms(
    acc: &MetricsAccumulator,
) -> [(&'static str, &hdrhistogram::Histogram<u64>); 6] {
    [
        ("ttft_ms", acc.ttft.histogram()),
        ("tpot_ms", acc.tpot.histogram()),
        ("itl_ms", acc.itl.histogram()),
        ("e2e_ms", acc.e2e.histogram()),
        ("queue_ms", acc.queue.histogram()),
        ("lag_ms", acc.lag.histogram()),
    ]
}

/// The recorded values of a histogram, bucket by bucket.
pub fn buckets(h: &hdrhistogram::Histogram<u64>) -> Vec<(u64, u64)> {
    h.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())).collect()
}

/// Where a run directory's files disagree with its `summary.json`, one sentence each (empty:
/// they agree): `requests.jsonl` missing, unreadable or cut short, its measured or warmup
/// records not the summary's counts, its last measured request not the end of the summary's
/// window, `histograms.hlog` missing, unreadable or not the histograms of the records. A run
/// whose files disagree is not the run its summary describes: merges and trial sets call it
/// incomplete.
pub fn disagreements(dir: &Path, summary: &Summary) -> Vec<String> {
    let mut out = Vec::new();
    let read = match read_records(dir) {
        Ok(r) => r,
        Err(e) => {
            let why = std::error::Error::source(&e).map(|s| format!(": {s}")).unwrap_or_default();
            return vec![format!("{e}{why}")];
        }
    };
    if read.truncated_tail {
        out.push(format!("{REQUESTS_FILE} ends in a line cut short"));
    }
    let mut acc = MetricsAccumulator::new(summary.goodput.slo.clone());
    for r in &read.records {
        acc.add(r);
    }
    let m = acc.finish(None);
    let counts = &summary.requests;
    if (m.requests.total, m.requests.warmup) != (counts.total, counts.warmup) {
        out.push(format!(
            "{REQUESTS_FILE} holds {} measured and {} warmup requests, {SUMMARY_FILE} counts {} and {}",
            m.requests.total, m.requests.warmup, counts.total, counts.warmup
        ));
    }
    let (ends, window_end) = (m.window.end_ms, summary.timing.window.end_ms);
    if ends.zip(window_end).is_some_and(|(a, b)| (a - b).abs() > 1e-3)
        || ends.is_some() != window_end.is_some()
    {
        let ms = |v: Option<f64>| v.map_or("(none)".to_string(), |v| format!("{v} ms"));
        out.push(format!(
            "the last measured request of {REQUESTS_FILE} ends at {}, the window of \
             {SUMMARY_FILE} at {}",
            ms(ends),
            ms(window_end)
        ));
    }
    let log = match fs::read(dir.join(HISTOGRAMS_FILE)) {
        Ok(bytes) => decode_hlog(&bytes),
        Err(_) => {
            out.push(format!("{HISTOGRAMS_FILE} is missing"));
            return out;
        }
    };
    let Some(log) = log else {
        out.push(format!("{HISTOGRAMS_FILE} cannot be read as an HdrHistogram interval log"));
        return out;
    };
    let differ: Vec<&str> = logged_histograms(&acc)
        .into_iter()
        .filter(|(tag, h)| log.get(*tag).map_or(Vec::new(), buckets) != buckets(h))
        .map(|(tag, _)| tag)
        .collect();
    if !differ.is_empty() {
        out.push(format!(
            "{HISTOGRAMS_FILE} does not hold the histograms of {REQUESTS_FILE} ({})",
            differ.join(", ")
        ));
    }
    out
}

/// Rebuild a run's metrics from its `requests.jsonl`.
pub fn recompute(
    dir: &Path,
    slo: Slo,
    requested_rate: Option<f64>,
) -> Result<(RunMetrics, ReadRecords), RunDirError> {
    let read = read_records(dir)?;
    let mut acc = MetricsAccumulator::new(slo);
    for r in &read.records {
        acc.add(r);
    }
    Ok((acc.finish(requested_rate), read))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: u64) -> RequestRecord {
        let t = id as f64;
        RequestRecord {
            input_tokens: Some(3),
            ..RequestRecord::ok(id, t, t + 50.0, vec![10.0, 10.0, 10.0])
        }
    }

    #[test]
    fn two_concurrent_creates_of_one_directory_let_exactly_one_run_in() {
        let base = tempfile::tempdir().unwrap();
        for round in 0..20 {
            let dir = base.path().join(format!("run-{round}"));
            let barrier = std::sync::Barrier::new(2);
            let results: Vec<Result<PathBuf, RunDirError>> = std::thread::scope(|s| {
                let go = || {
                    barrier.wait();
                    create(&dir)
                };
                let a = s.spawn(go);
                let b = s.spawn(go);
                vec![a.join().unwrap(), b.join().unwrap()]
            });
            let won = results.iter().filter(|r| r.is_ok()).count();
            assert_eq!(won, 1, "round {round}: {results:?}");
            let lost = results.into_iter().find_map(Result::err).unwrap();
            assert!(matches!(lost, RunDirError::InUse { .. }), "{lost:?}");
            let msg = lost.to_string();
            assert!(msg.contains("in use by another run") && msg.contains("--out"), "{msg}");
            // Nothing else may claim it while the winner holds it; once released, it may.
            assert!(matches!(claim(&dir), Err(RunDirError::InUse { .. })));
            release(&dir);
            let again = claim(&dir).unwrap();
            assert_eq!(again.dir(), dir);
            assert!(dir.join(LOCK_FILE).exists());
        }
    }

    #[test]
    fn a_claimed_directory_that_holds_records_is_refused_once_released() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("r");
        let lock = claim(&run).unwrap();
        RecordWriter::create(&run).unwrap().write(&rec(1)).unwrap();
        drop(lock);
        let err = claim(&run).unwrap_err();
        assert!(matches!(err, RunDirError::Occupied { file: REQUESTS_FILE, .. }), "{err:?}");
        assert!(err.to_string().contains("already holds a run"), "{err}");
    }

    #[test]
    fn records_stream_and_survive_a_cut_tail() {
        let dir = tempfile::tempdir().unwrap();
        let run = create(&dir.path().join("run")).unwrap();
        let mut w = RecordWriter::create(&run).unwrap();
        w.write(&rec(0)).unwrap();
        w.write(&rec(1)).unwrap();
        // Readable before the writer is finished: lines are flushed as written.
        assert_eq!(read_records(&run).unwrap().records.len(), 2);
        drop(w);
        // Simulate a crash mid-line.
        let mut f = fs::OpenOptions::new().append(true).open(run.join(REQUESTS_FILE)).unwrap();
        f.write_all(b"{\"id\":2,\"warm").unwrap();
        let read = read_records(&run).unwrap();
        assert_eq!(read.records.len(), 2);
        assert!(read.truncated_tail);
        let (m, _) = recompute(&run, Slo::default(), None).unwrap();
        assert_eq!(m.requests.ok, 2);
        assert_eq!(m.latency.ttft_ms.unwrap().p50, 50.0);
        // A run directory is never overwritten.
        assert!(matches!(create(&run), Err(RunDirError::Occupied { .. })));
    }

    #[test]
    fn atomic_write_replaces_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        let leftovers: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1);
    }

    #[test]
    fn histogram_log_round_trips() {
        use hdrhistogram::serialization::Deserializer;
        use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
        let dir = tempfile::tempdir().unwrap();
        let mut acc = MetricsAccumulator::new(Slo::default());
        for i in 0..10 {
            acc.add(&rec(i));
        }
        write_histograms(dir.path(), &acc, SystemTime::now(), Duration::from_secs(1)).unwrap();
        let bytes = fs::read(dir.path().join(HISTOGRAMS_FILE)).unwrap();
        let mut tags = Vec::new();
        for entry in IntervalLogIterator::new(&bytes) {
            if let Ok(LogEntry::Interval(h)) = entry {
                let tag = h.tag().unwrap().as_str().to_string();
                let raw = base64_decode(h.encoded_histogram());
                let hist: hdrhistogram::Histogram<u64> =
                    Deserializer::new().deserialize(&mut raw.as_slice()).unwrap();
                if tag == "ttft_ms" {
                    assert_eq!(hist.len(), 10);
                    let p50 = hist.value_at_quantile(0.5);
                    assert!((50_000..50_032).contains(&p50), "{p50}");
                }
                tags.push(tag);
            }
        }
        assert_eq!(tags, vec!["ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "lag_ms"]);
    }

    fn base64_decode(s: &str) -> Vec<u8> {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.decode(s).unwrap()
    }
}
