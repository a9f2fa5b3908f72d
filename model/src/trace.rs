//! Request traces to replay: the Mooncake JSONL, BurstGPT CSV and infergate JSONL formats read
//! into one record list (`Trace`, `TraceRecord`), a window of it, the intended send times
//! (timestamp x time scale, optionally rate-capped), and prompts synthesised so that records
//! sharing hash ids share identical prefix blocks word for word (`TracePrompts`).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::TraceFormat;
use crate::config::limits::{MAX_MS, MAX_REQUEST_TOKENS, MAX_TRACE_MS, number};
use crate::wire::VOCABULARY;

/// One request of a trace.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceRecord {
    /// 1-based line of the file the record came from.
    pub line: usize,
    /// Arrival time in milliseconds, as written in the trace.
    pub timestamp_ms: f64,
    pub input_tokens: u32,
    pub output_tokens: u32,
    /// Ids of the prompt's blocks, in order; two records with the same id at the same position
    /// share that block (and, in Mooncake traces, everything before it).
    pub hash_ids: Vec<u64>,
}

/// A parsed trace, in arrival order.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    pub format: TraceFormat,
    pub records: Vec<TraceRecord>,
}

/// A trace that cannot be replayed: the file, the line (0: the whole file) and why.
#[derive(Debug, thiserror::Error)]
#[error("{}:{line}: {message}", path.display())]
pub struct TraceError {
    pub path: PathBuf,
    pub line: usize,
    pub message: String,
}

impl TraceError {
    fn at(path: &Path, line: usize, message: impl Into<String>) -> TraceError {
        TraceError { path: path.to_path_buf(), line, message: message.into() }
    }
}

/// What the summary records of a replayed trace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceInfo {
    pub file: String,
    pub format: Option<TraceFormat>,
    /// Records in the replayed window.
    pub records: u64,
    /// Where the window starts, in ms after the trace's first record.
    pub start_ms: f64,
    pub time_scale: f64,
    /// Tokens per hash block.
    pub block_tokens: u32,
    /// Hash blocks of the window's prompts, and those an earlier record of the window already
    /// had (what a prefix cache large enough could serve).
    pub blocks: u64,
    pub reused_blocks: u64,
}

impl Trace {
    /// Parse a trace file's text in `format` (`auto`: by the file's extension and first record).
    pub fn parse(path: &Path, text: &str, format: TraceFormat) -> Result<Trace, TraceError> {
        let format = match format {
            TraceFormat::Auto => detect(path, text),
            f => f,
        };
        let mut records = match format {
            TraceFormat::Burstgpt => parse_burstgpt(path, text)?,
            _ => parse_jsonl(path, text, format)?,
        };
        if records.is_empty() {
            return Err(TraceError::at(path, 0, "the trace has no records"));
        }
        // Arrival order (stable: records with equal timestamps keep the file's order).
        records.sort_by(|a, b| a.timestamp_ms.total_cmp(&b.timestamp_ms));
        Ok(Trace { format, records })
    }

    /// The records arriving within `[start, start + duration)` ms after the first record.
    pub fn window(mut self, start_ms: f64, duration_ms: Option<f64>) -> Trace {
        let t0 = self.records.first().map_or(0.0, |r| r.timestamp_ms) + start_ms;
        self.records.retain(|r| {
            r.timestamp_ms >= t0 && duration_ms.is_none_or(|d| r.timestamp_ms < t0 + d)
        });
        self
    }

    /// Intended send offsets (ms from the start of the load): each record's timestamp minus the
    /// window's start, times `time_scale`; with `max_rate`, a record is sent no sooner than
    /// `1000 / max_rate` ms after the previous one.
    pub(crate) fn send_offsets(
        &self,
        origin_ms: f64,
        time_scale: f64,
        max_rate: Option<f64>,
    ) -> Vec<f64> {
        let gap = max_rate.map(|r| 1000.0 / r);
        let mut out: Vec<f64> = Vec::with_capacity(self.records.len());
        for r in &self.records {
            let mut at = (r.timestamp_ms - origin_ms) * time_scale;
            if let (Some(g), Some(prev)) = (gap, out.last()) {
                at = at.max(prev + g);
            }
            out.push(at.max(0.0));
        }
        out
    }

    /// [`Trace::send_offsets`], refused when a record would be sent more than a week
    /// ([`MAX_MS`]) after the replay's start: the error names the record's line of `path`.
    pub fn replay_offsets(
        &self,
        path: &Path,
        origin_ms: f64,
        time_scale: f64,
        max_rate: Option<f64>,
    ) -> Result<Vec<f64>, TraceError> {
        let offsets = self.send_offsets(origin_ms, time_scale, max_rate);
        if let Some((r, at)) =
            self.records.iter().zip(&offsets).find(|(_, at)| !at.is_finite() || **at > MAX_MS)
        {
            return Err(TraceError::at(
                path,
                r.line,
                format!(
                    "this record would be sent {} s after the replay's start; a replay spans at \
                     most {} s (a week): narrow the window (load.trace_start_s, \
                     load.trace_duration_s) or lower load.time_scale",
                    number(at / 1e3),
                    MAX_MS / 1e3
                ),
            ));
        }
        Ok(offsets)
    }

    /// Hash blocks in all, and those seen in an earlier record at the same position.
    pub fn block_reuse(&self) -> (u64, u64) {
        let mut seen = HashSet::new();
        let (mut all, mut reused) = (0u64, 0u64);
        for r in &self.records {
            for (k, h) in r.hash_ids.iter().enumerate() {
                all += 1;
                if !seen.insert((k, *h)) {
                    reused += 1;
                }
            }
        }
        (all, reused)
    }
}

fn detect(path: &Path, text: &str) -> TraceFormat {
    if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv")) {
        return TraceFormat::Burstgpt;
    }
    let first = text.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with("//"));
    match first {
        Some(l) if l.contains("\"input_length\"") => TraceFormat::Mooncake,
        Some(l) if !l.starts_with('{') && l.contains(',') => TraceFormat::Burstgpt,
        _ => TraceFormat::Infergate,
    }
}

/// A token count: a whole number within 1..=2^20.
fn tokens(v: Option<&serde_json::Value>, key: &str) -> Result<u32, String> {
    let v = v.ok_or_else(|| format!("missing `{key}`"))?;
    v.as_u64().filter(|n| (1..=MAX_REQUEST_TOKENS as u64).contains(n)).map(|n| n as u32).ok_or_else(
        || format!("`{key}` must be a whole number within 1..={MAX_REQUEST_TOKENS}, got {v}"),
    )
}

/// Whether a timestamp in ms lies within the documented bound `[0, MAX_TRACE_MS]`.
fn timestamp_in_bound(ms: f64) -> bool {
    ms.is_finite() && (0.0..=MAX_TRACE_MS).contains(&ms)
}

/// The bound of a timestamp, for messages: `within [0, 31536000000] ms (a year)`.
fn timestamp_bound(unit: &str) -> String {
    match unit {
        "s" => format!("within [0, {}] (a year)", MAX_TRACE_MS / 1e3),
        _ => format!("within [0, {MAX_TRACE_MS}] (a year)"),
    }
}

fn timestamp(v: Option<&serde_json::Value>, key: &str) -> Result<f64, String> {
    let v = v.ok_or_else(|| format!("missing `{key}`"))?;
    v.as_f64().filter(|t| timestamp_in_bound(*t)).ok_or_else(|| {
        let shown = v.as_f64().map_or_else(|| v.to_string(), number);
        format!("`{key}` must be a number of milliseconds {}, got {shown}", timestamp_bound("ms"))
    })
}

fn parse_jsonl(
    path: &Path,
    text: &str,
    format: TraceFormat,
) -> Result<Vec<TraceRecord>, TraceError> {
    let (ts, input, output) = match format {
        TraceFormat::Mooncake => ("timestamp", "input_length", "output_length"),
        _ => ("timestamp_ms", "input_tokens", "output_tokens"),
    };
    let mut out = Vec::new();
    for (line, raw) in crate::workload::dataset_lines(text) {
        let err = |m: String| TraceError::at(path, line, m);
        let v: serde_json::Value = serde_json::from_str(raw)
            .map_err(|e| err(format!("not valid JSON: {}", crate::workload::json_error(&e))))?;
        let obj = v.as_object().ok_or_else(|| err("expected a JSON object".into()))?;
        let input_tokens = tokens(obj.get(input), input).map_err(err)?;
        let hash_ids = match obj.get("hash_ids") {
            None | Some(serde_json::Value::Null) => vec![],
            Some(serde_json::Value::Array(ids)) => ids
                .iter()
                .map(|h| {
                    h.as_u64().ok_or_else(|| {
                        err(format!("`hash_ids` holds {h}, not a whole number >= 0"))
                    })
                })
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(err(format!(
                    "`hash_ids` must be an array of whole numbers, got {other}"
                )));
            }
        };
        out.push(TraceRecord {
            line,
            timestamp_ms: timestamp(obj.get(ts), ts).map_err(err)?,
            input_tokens,
            output_tokens: tokens(obj.get(output), output).map_err(err)?,
            hash_ids,
        });
    }
    Ok(out)
}

/// BurstGPT: a CSV (RFC 4180, read by the `csv` crate: quoted cells may hold commas, a UTF-8
/// byte order mark is skipped) with a header naming `Timestamp` (seconds), `Request tokens` and
/// `Response tokens` (other columns ignored). Counts of 0 (failed requests in BurstGPT) are
/// sent as 1.
fn parse_burstgpt(path: &Path, text: &str) -> Result<Vec<TraceRecord>, TraceError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut reader =
        csv::ReaderBuilder::new().trim(csv::Trim::All).comment(None).from_reader(text.as_bytes());
    // The line of a byte offset (the crate's own line count skips blank lines).
    // The line of a record starting at a byte offset, past the blank lines the reader skips
    // (its own line count leaves them out).
    let line_at = |byte: u64| {
        let b = text.as_bytes();
        let mut at = (byte as usize).min(b.len());
        while at < b.len() && (b[at] == b'\n' || b[at] == b'\r') {
            at += 1;
        }
        b[..at].iter().filter(|c| **c == b'\n').count() + 1
    };
    let csv_line = |e: &csv::Error| e.position().map_or(0, |p| line_at(p.byte()));
    let csv_err = |e: csv::Error| match e.kind() {
        csv::ErrorKind::UnequalLengths { expected_len, len, .. } => TraceError::at(
            path,
            csv_line(&e),
            format!("{len} columns, the header has {expected_len}"),
        ),
        _ => TraceError::at(path, csv_line(&e), format!("not valid CSV: {e}")),
    };
    let names: Vec<String> =
        reader.headers().map_err(csv_err)?.iter().map(|c| c.to_ascii_lowercase()).collect();
    if names.iter().all(String::is_empty) {
        return Ok(vec![]);
    }
    let header_line =
        1 + text.bytes().take_while(|b| b.is_ascii_whitespace()).filter(|b| *b == b'\n').count();
    let col = |name: &str| {
        names.iter().position(|n| n == name).ok_or_else(|| {
            TraceError::at(
                path,
                header_line,
                format!(
                    "the header has no `{name}` column; a BurstGPT trace needs Timestamp, \
                     Request tokens and Response tokens"
                ),
            )
        })
    };
    let (ts, input, output) = (col("timestamp")?, col("request tokens")?, col("response tokens")?);
    let mut out = Vec::new();
    for row in reader.records() {
        let row = row.map_err(csv_err)?;
        let line = row.position().map_or(0, |p| line_at(p.byte()));
        if row.iter().all(str::is_empty) {
            continue;
        }
        let err = |m: String| TraceError::at(path, line, m);
        let cell = |c: usize| row.get(c).unwrap_or("");
        let seconds: f64 =
            cell(ts).parse().ok().filter(|t: &f64| timestamp_in_bound(*t * 1e3)).ok_or_else(
                || {
                    err(format!(
                        "Timestamp `{}` is not a number of seconds {}",
                        cell(ts),
                        timestamp_bound("s")
                    ))
                },
            )?;
        let count = |c: usize, name: &str| -> Result<u32, TraceError> {
            let n: u64 = cell(c)
                .parse()
                .map_err(|_| err(format!("{name} `{}` is not a whole number", cell(c))))?;
            if n > MAX_REQUEST_TOKENS as u64 {
                return Err(err(format!("{name} {n} is more than {MAX_REQUEST_TOKENS}")));
            }
            Ok((n as u32).max(1))
        };
        out.push(TraceRecord {
            line,
            timestamp_ms: seconds * 1000.0,
            input_tokens: count(input, "Request tokens")?,
            output_tokens: count(output, "Response tokens")?,
            hash_ids: vec![],
        });
    }
    Ok(out)
}

/// Prompts of a trace: block `k` of a record with hash id `h` there is `block_tokens` words
/// drawn from `h` (fewer for a partial last block), so records sharing hash ids share those
/// blocks word for word; the blocks past its hash ids are unique to the request.
#[derive(Clone, Debug)]
pub struct TracePrompts {
    pub block_tokens: u32,
    seed: u64,
    /// Mixed into the blocks unique to a request (0: none): a shard's never repeat another
    /// shard's (`bench::shard`); shared blocks stay shared.
    unique_salt: u64,
    /// Per item: prompt length and hash ids.
    items: Vec<(u32, Vec<u64>)>,
}

impl TracePrompts {
    pub fn new(trace: &Trace, block_tokens: u32, seed: u64) -> TracePrompts {
        let items = trace.records.iter().map(|r| (r.input_tokens, r.hash_ids.clone())).collect();
        TracePrompts { block_tokens, seed, unique_salt: 0, items }
    }

    /// The same prompts with the blocks unique to a request salted by `salt`.
    pub fn with_unique_salt(mut self, salt: u64) -> TracePrompts {
        self.unique_salt = salt;
        self
    }

    /// The prompts of the items `keep` accepts by position, in order (a shard's records).
    pub fn select(&self, keep: impl Fn(usize) -> bool) -> TracePrompts {
        let items = self.items.iter().enumerate().filter(|(i, _)| keep(*i));
        TracePrompts {
            block_tokens: self.block_tokens,
            seed: self.seed,
            unique_salt: self.unique_salt,
            items: items.map(|(_, it)| it.clone()).collect(),
        }
    }

    /// The prompt of item `item` sent as request `request_id`: `input_tokens` words.
    pub fn text(&self, item: usize, request_id: u64) -> String {
        let (len, ids) = &self.items[item];
        let (len, block) = (*len as usize, self.block_tokens as usize);
        let mut out = String::with_capacity(len * 7);
        for pos in 0..len {
            let k = pos / block;
            let key = match ids.get(k) {
                Some(&h) => crate::hash::fnv1a(&h.to_le_bytes()) ^ self.seed,
                // Unique to the request: salted with its id and the block.
                None => {
                    crate::hash::fnv1a(
                        &[request_id.to_le_bytes(), (k as u64).to_le_bytes()].concat(),
                    ) ^ self.seed.rotate_left(17)
                        ^ 0x756e_6971_7565
                        ^ self.unique_salt
                }
            };
            let w = splitmix(key ^ (pos % block) as u64);
            if pos > 0 {
                out.push(' ');
            }
            out.push_str(VOCABULARY[(w % VOCABULARY.len() as u64) as usize]);
        }
        out
    }
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOONCAKE: &str = "{\"timestamp\": 0, \"input_length\": 1000, \"output_length\": 10, \"hash_ids\": [1, 2]}\n\
        {\"timestamp\": 250, \"input_length\": 700, \"output_length\": 5, \"hash_ids\": [1, 3]}\n\
        {\"timestamp\": 100, \"input_length\": 20, \"output_length\": 3, \"hash_ids\": [9]}\n";

    fn mooncake() -> Trace {
        Trace::parse(Path::new("t.jsonl"), MOONCAKE, TraceFormat::Auto).unwrap()
    }

    #[test]
    fn the_three_formats_read_into_the_same_records() {
        let t = mooncake();
        assert_eq!(t.format, TraceFormat::Mooncake);
        let ts: Vec<f64> = t.records.iter().map(|r| r.timestamp_ms).collect();
        assert_eq!(ts, vec![0.0, 100.0, 250.0], "arrival order");
        assert_eq!(t.records[1].line, 3);
        assert_eq!(t.records[2].hash_ids, vec![1, 3]);
        let csv = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n\
                   5,ChatGPT,472,18,490,Conversation log\n5.25,GPT-4,1087,0,1087,API log\n";
        let b = Trace::parse(Path::new("b.csv"), csv, TraceFormat::Auto).unwrap();
        assert_eq!(b.format, TraceFormat::Burstgpt);
        assert_eq!(b.records[1].timestamp_ms, 5250.0);
        assert_eq!((b.records[1].input_tokens, b.records[1].output_tokens), (1087, 1));
        let own = "{\"timestamp_ms\": 1.5, \"input_tokens\": 8, \"output_tokens\": 2}\n";
        let o = Trace::parse(Path::new("o.jsonl"), own, TraceFormat::Auto).unwrap();
        assert_eq!(o.format, TraceFormat::Infergate);
        assert_eq!(o.records[0].timestamp_ms, 1.5);
        assert!(o.records[0].hash_ids.is_empty());
    }

    #[test]
    fn malformed_records_are_named_by_file_and_line() {
        let cases: [(&str, &str, TraceFormat, usize, &str); 7] = [
            (
                "t.jsonl",
                "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1}\n{oops\n",
                TraceFormat::Mooncake,
                2,
                "not valid JSON",
            ),
            (
                "t.jsonl",
                "{\"timestamp\": 0, \"output_length\": 1}\n",
                TraceFormat::Mooncake,
                1,
                "missing `input_length`",
            ),
            (
                "t.jsonl",
                "\n{\"timestamp\": -3, \"input_length\": 5, \"output_length\": 1}\n",
                TraceFormat::Mooncake,
                2,
                "`timestamp` must be a number of milliseconds within [0, 31536000000] (a year), got -3",
            ),
            (
                "t.jsonl",
                "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": [\"a\"]}\n",
                TraceFormat::Mooncake,
                1,
                "`hash_ids` holds \"a\"",
            ),
            (
                "t.jsonl",
                "{\"timestamp_ms\": 0, \"input_tokens\": 0, \"output_tokens\": 1}\n",
                TraceFormat::Infergate,
                1,
                "`input_tokens` must be a whole number within 1..=",
            ),
            (
                "b.csv",
                "Timestamp,Request tokens,Response tokens\n1,2,3\n2,x,3\n",
                TraceFormat::Burstgpt,
                3,
                "Request tokens `x` is not a whole number",
            ),
            (
                "b.csv",
                "Time,Request tokens,Response tokens\n1,2,3\n",
                TraceFormat::Burstgpt,
                1,
                "no `timestamp` column",
            ),
        ];
        for (file, text, format, line, want) in cases {
            let e = Trace::parse(Path::new(file), text, format).unwrap_err();
            assert_eq!(e.line, line, "{e}");
            assert!(e.to_string().starts_with(&format!("{file}:{line}: ")), "{e}");
            assert!(e.message.contains(want), "{e}");
        }
        let e =
            Trace::parse(Path::new("e.jsonl"), "\n// nothing\n", TraceFormat::Auto).unwrap_err();
        assert!(e.message.contains("no records"), "{e}");
    }

    #[test]
    fn burstgpt_is_read_as_csv_quoted_commas_and_a_byte_order_mark_included() {
        let csv = "\u{feff}Timestamp,Model,Request tokens,Response tokens\n\
                   1,\"GPT,4\",10,2\n2.5,\"say \"\"hi\"\"\",20,0\n";
        let t = Trace::parse(Path::new("b.csv"), csv, TraceFormat::Burstgpt).unwrap();
        assert_eq!(t.records.len(), 2);
        assert_eq!((t.records[0].line, t.records[0].input_tokens), (2, 10));
        assert_eq!((t.records[1].timestamp_ms, t.records[1].output_tokens), (2500.0, 1));
        // A ragged row is still refused, at its line.
        let ragged = "Timestamp,Request tokens,Response tokens\n1,2,3\n\n2,3\n";
        let e = Trace::parse(Path::new("b.csv"), ragged, TraceFormat::Burstgpt).unwrap_err();
        assert_eq!((e.line, e.message.as_str()), (4, "2 columns, the header has 3"), "{e}");
    }

    #[test]
    fn timestamps_and_replay_spans_are_bounded_with_the_line() {
        for (file, text, format) in [
            (
                "t.jsonl",
                "{\"timestamp\": 1e300, \"input_length\": 5, \"output_length\": 1}\n",
                TraceFormat::Mooncake,
            ),
            (
                "o.jsonl",
                "{\"timestamp_ms\": 4e10, \"input_tokens\": 5, \"output_tokens\": 1}\n",
                TraceFormat::Infergate,
            ),
            (
                "b.csv",
                "Timestamp,Request tokens,Response tokens\n1e300,2,3\n",
                TraceFormat::Burstgpt,
            ),
        ] {
            let e = Trace::parse(Path::new(file), text, format).unwrap_err();
            let line = if file.ends_with("csv") { 2 } else { 1 };
            assert_eq!(e.line, line, "{e}");
            assert!(e.message.contains("(a year)"), "{e}");
        }
        // Within the year, but 300 days after the first record: no replay spans that long.
        let far = "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1}\n\
                   {\"timestamp\": 2.592e10, \"input_length\": 5, \"output_length\": 1}\n";
        let t = Trace::parse(Path::new("t.jsonl"), far, TraceFormat::Mooncake).unwrap();
        let e = t.replay_offsets(Path::new("t.jsonl"), 0.0, 1.0, None).unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        assert!(e.message.contains("25920000 s after the replay's start"), "{e}");
        // Scaled down a thousandfold it fits the week.
        assert_eq!(t.replay_offsets(Path::new("t.jsonl"), 0.0, 0.001, None).unwrap()[1], 2.592e7);
    }

    #[test]
    fn send_times_are_timestamps_times_the_scale_exactly_and_the_cap_spaces_them() {
        let text: String = (0..50)
            .map(|i| {
                format!(
                    "{{\"timestamp\": {}, \"input_length\": 4, \"output_length\": 1}}\n",
                    i * 37 + i % 3
                )
            })
            .collect();
        let t = Trace::parse(Path::new("t.jsonl"), &text, TraceFormat::Mooncake).unwrap();
        for scale in [1.0, 0.5, 2.0, 0.001] {
            let got = t.send_offsets(0.0, scale, None);
            let want: Vec<f64> = t.records.iter().map(|r| r.timestamp_ms * scale).collect();
            assert_eq!(got, want, "scale {scale}");
        }
        let capped = t.send_offsets(0.0, 0.1, Some(100.0));
        assert!(capped.windows(2).all(|w| w[1] - w[0] >= 10.0 - 1e-9), "{capped:?}");
        assert_eq!(capped[0], 0.0);
    }

    #[test]
    fn a_window_keeps_the_records_within_it() {
        let t = mooncake().window(100.0, Some(150.0));
        let ts: Vec<f64> = t.records.iter().map(|r| r.timestamp_ms).collect();
        assert_eq!(ts, vec![100.0]);
        let t = mooncake().window(50.0, None);
        assert_eq!(t.records.len(), 2);
        assert_eq!(t.send_offsets(50.0, 1.0, None), vec![50.0, 200.0]);
    }

    #[test]
    fn shared_hash_ids_share_identical_blocks_and_nothing_else() {
        let t = mooncake();
        let p = TracePrompts::new(&t, 512, 42);
        let a = p.text(0, 0); // 1000 words, blocks [1, 2]
        let c = p.text(2, 2); // 700 words, blocks [1, 3]
        let (a, c): (Vec<&str>, Vec<&str>) = (a.split(' ').collect(), c.split(' ').collect());
        assert_eq!((a.len(), c.len()), (1000, 700));
        assert_eq!(a[..512], c[..512], "block 1 shared word for word");
        let same = a[512..700].iter().zip(&c[512..700]).filter(|(x, y)| x == y).count();
        assert!(same < 40, "blocks 2 and 3 differ ({same} of 188 words equal by chance)");
        assert_eq!(p.text(0, 0), p.text(0, 7), "hash blocks do not depend on the request");
        let (all, reused) = t.block_reuse();
        assert_eq!((all, reused), (5, 1));
        // Blocks without hash ids are unique to the request.
        let own = "{\"timestamp_ms\": 0, \"input_tokens\": 64, \"output_tokens\": 2}\n";
        let o = Trace::parse(Path::new("o.jsonl"), own, TraceFormat::Auto).unwrap();
        let q = TracePrompts::new(&o, 16, 1);
        assert_ne!(q.text(0, 1), q.text(0, 2));
    }
}
