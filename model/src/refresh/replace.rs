//! A dataset refreshed from a production log ([`refresh`]): the log streamed twice (its hash,
//! its newest request and its malformed lines; then the window's candidates), the slowest or
//! failed requests of the window kept in bounded top lists, a seeded share of the dataset's
//! items replaced by them (a structured item by a structured request, so the structured share
//! holds), each scrubbed ([`super::scrub`]), and the provenance of it all.
//!
//! Which items are replaced depends only on the dataset and the seed; which requests replace
//! them only on the log, the window and the rule: the same inputs give the same bytes.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::path::PathBuf;

use chrono::{SecondsFormat, TimeZone, Utc};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::{Map, Value};

use super::log::{self, Entry, Line, Malformed};
use super::provenance::{
    DatasetSides, LogSource, MAX_NAMED_MALFORMED, Provenance, Replacement, Scrub, Selection, Window,
};
use super::scrub::{SECRET_PATTERNS, ScrubError, Scrubber};
use crate::workload::{
    DatasetError, WorkItem, WorkloadFile, dataset_lines, item_schema, parse_dataset_line,
    read_dataset,
};

/// What "slowest" ranks by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    LatencyMs,
    TtftMs,
}

impl Metric {
    pub fn name(self) -> &'static str {
        match self {
            Metric::LatencyMs => "latency_ms",
            Metric::TtftMs => "ttft_ms",
        }
    }

    fn of(self, e: &Entry) -> Option<f64> {
        match self {
            Metric::LatencyMs => e.latency_ms,
            Metric::TtftMs => e.ttft_ms,
        }
    }
}

/// The window requests are selected from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum WindowSpec {
    /// Both ends in epoch milliseconds, included; an open end is the log's first or last
    /// request.
    Between { since: Option<i64>, until: Option<i64> },
    /// The days up to the log's newest request.
    Days(f64),
}

/// Everything a refresh reads.
#[derive(Clone, Debug)]
pub struct Options {
    pub log: PathBuf,
    /// The log, the dataset and the output as the user named them (recorded in the
    /// provenance and its messages).
    pub log_name: String,
    pub dataset: PathBuf,
    pub dataset_name: String,
    pub out_name: String,
    /// Share of the dataset's items replaced, in (0, 1].
    pub share: f64,
    pub seed: u64,
    pub window: WindowSpec,
    /// The log's format (`Auto`: told by its first JSON object).
    pub format: log::Format,
    pub by: Metric,
    /// At most this share of each kind's picks are failed requests (the rest the slowest).
    pub failed_share: f64,
    /// The structured share the result keeps at least (or the input's, when lower).
    pub min_structured_share: f64,
    /// More malformed lines than this share of the non-blank lines fails the refresh.
    pub max_malformed_share: f64,
    pub pii_patterns: Vec<String>,
    /// The key user ids are hashed with, and the variable it came from.
    pub key: Option<Vec<u8>>,
    pub key_env: String,
}

/// A refreshed dataset: its text, its provenance, and every malformed log line counted (the
/// first [`MAX_NAMED_MALFORMED`] named).
#[derive(Clone, Debug)]
pub struct Refreshed {
    pub text: String,
    pub provenance: Provenance,
    pub malformed: Vec<Malformed>,
}

/// Why a refresh could not be made.
#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    #[error("cannot read the log {file}: {source}")]
    Log {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    #[error(
        "{file}: {malformed} of {lines} non-blank lines are malformed, more than the {share}% \
         allowed (--max-malformed-share); the first: {first}"
    )]
    TooManyMalformed {
        file: String,
        malformed: u64,
        lines: u64,
        share: f64,
        first: String,
        /// `file:line: what is wrong`, the first [`MAX_NAMED_MALFORMED`].
        named: Vec<String>,
    },
    #[error("{0}")]
    Usage(String),
    #[error(
        "the window of {file} holds {have} {kind} candidate requests; replacing {need} {kind} \
         items needs {need}{also}: widen the window, or lower --share"
    )]
    Shortage { file: String, kind: &'static str, have: usize, need: usize, also: String },
    #[error(transparent)]
    Scrub(#[from] ScrubError),
}

/// One dataset item as the refresh sees it.
struct Item {
    /// 1-based line in the dataset file.
    line: usize,
    id: String,
    structured: bool,
}

fn read_items(opts: &Options) -> Result<(String, Vec<Item>), RefreshError> {
    let text = read_dataset(&opts.dataset)?;
    let mut items = Vec::new();
    for (line_no, line) in dataset_lines(&text) {
        let raw = parse_dataset_line(&opts.dataset, line_no, line)?;
        WorkItem::from_dataset_line(&opts.dataset, line_no, &raw, 1)?;
        let id = raw
            .get("id")
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
            .unwrap_or_else(|| format!("line-{}", items.len() + 1));
        let structured = raw.as_object().and_then(item_schema).is_some();
        items.push(Item { line: line_no, id, structured });
    }
    if items.is_empty() {
        return Err(DatasetError::empty(&opts.dataset).into());
    }
    Ok((text, items))
}

/// A candidate: better is a higher score, then an earlier line.
struct Ranked {
    score: f64,
    entry: Box<Entry>,
}

impl Ranked {
    fn cmp_good(&self, other: &Ranked) -> Ordering {
        self.score.total_cmp(&other.score).then(other.entry.line.cmp(&self.entry.line))
    }
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp_good(other) == Ordering::Equal
    }
}
impl Eq for Ranked {}
impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        self.cmp_good(other)
    }
}

/// The best `cap` candidates seen, in bounded memory.
struct TopK {
    cap: usize,
    heap: BinaryHeap<Reverse<Ranked>>,
}

impl TopK {
    fn new(cap: usize) -> TopK {
        TopK { cap, heap: BinaryHeap::with_capacity(cap + 1) }
    }

    fn push(&mut self, r: Ranked) {
        if self.cap == 0 {
            return;
        }
        if self.heap.len() == self.cap {
            match self.heap.peek() {
                Some(Reverse(worst)) if r.cmp_good(worst) == Ordering::Greater => {
                    self.heap.pop();
                }
                _ => return,
            }
        }
        self.heap.push(Reverse(r));
    }

    /// Best first.
    fn into_sorted(self) -> Vec<Ranked> {
        let mut v: Vec<Ranked> = self.heap.into_iter().map(|Reverse(r)| r).collect();
        v.sort_by(|a, b| b.cmp_good(a));
        v
    }
}

/// What the first pass learns of the log.
struct Scan {
    sha256: String,
    format: log::Format,
    lines: u64,
    blank: u64,
    malformed: Vec<Malformed>,
    malformed_count: u64,
    first_ms: Option<i64>,
    last_ms: Option<i64>,
}

fn open(opts: &Options) -> Result<log::LineReader<impl std::io::BufRead>, RefreshError> {
    log::open(&opts.log, opts.format)
        .map_err(|source| RefreshError::Log { file: opts.log_name.clone(), source })
}

fn scan(opts: &Options) -> Result<Scan, RefreshError> {
    let mut r = open(opts)?;
    let io = |source| RefreshError::Log { file: opts.log_name.clone(), source };
    let (mut blank, mut malformed, mut count) = (0, Vec::new(), 0u64);
    let (mut first_ms, mut last_ms) = (None::<i64>, None::<i64>);
    while let Some(line) = r.next_line().map_err(io)? {
        match line {
            Line::Blank => blank += 1,
            Line::Malformed(m) => {
                count += 1;
                if malformed.len() < MAX_NAMED_MALFORMED {
                    malformed.push(m);
                }
            }
            Line::Request(e) => {
                first_ms = Some(first_ms.map_or(e.ts_ms, |f| f.min(e.ts_ms)));
                last_ms = Some(last_ms.map_or(e.ts_ms, |l| l.max(e.ts_ms)));
            }
        }
    }
    let lines = r.lines();
    let format = r.format();
    Ok(Scan {
        format,
        sha256: r.sha256(),
        lines,
        blank,
        malformed,
        malformed_count: count,
        first_ms,
        last_ms,
    })
}

/// RFC 3339 in UTC with milliseconds.
pub(crate) fn rfc3339(ms: i64) -> String {
    Utc.timestamp_millis_opt(ms)
        .single()
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
        .unwrap_or_else(|| ms.to_string())
}

/// The window's ends (ms, included) and how they were chosen.
fn window(opts: &Options, scan: &Scan) -> Result<(i64, i64, String), RefreshError> {
    let (Some(first), Some(last)) = (scan.first_ms, scan.last_ms) else {
        return Err(RefreshError::Usage(format!("{} holds no usable request", opts.log_name)));
    };
    Ok(match opts.window {
        WindowSpec::Between { since, until } => (
            since.unwrap_or(first),
            until.unwrap_or(last),
            "--window-start/--window-end".to_string(),
        ),
        WindowSpec::Days(d) => (
            last - (d * 86_400_000.0).round() as i64,
            last,
            format!("the {d} days up to the log's newest request"),
        ),
    })
}

/// The four candidate lists: `[structured][failed]`, each the best `cap`, and the window's
/// counts: requests, failed, structured.
struct Pools {
    lists: [[TopK; 2]; 2],
    requests: u64,
    failed: u64,
    structured: u64,
    /// The log's hash as this pass read it.
    sha256: String,
}

fn collect(
    opts: &Options,
    format: log::Format,
    since: i64,
    until: i64,
    cap: usize,
) -> Result<Pools, RefreshError> {
    let mut r = log::open(&opts.log, format)
        .map_err(|source| RefreshError::Log { file: opts.log_name.clone(), source })?;
    let io = |source| RefreshError::Log { file: opts.log_name.clone(), source };
    let mut p = Pools {
        lists: [[TopK::new(cap), TopK::new(cap)], [TopK::new(cap), TopK::new(cap)]],
        requests: 0,
        failed: 0,
        structured: 0,
        sha256: String::new(),
    };
    while let Some(line) = r.next_line().map_err(io)? {
        let Line::Request(e) = line else { continue };
        if e.ts_ms < since || e.ts_ms > until {
            continue;
        }
        p.requests += 1;
        let structured = item_schema(&e.request).is_some();
        let failed = e.failed();
        p.structured += structured as u64;
        p.failed += failed as u64;
        let score = match (failed, opts.by.of(&e)) {
            (_, Some(v)) => v,
            (true, None) => 0.0,
            // A successful request without the ranking metric is not a slow candidate.
            (false, None) => continue,
        };
        p.lists[structured as usize][failed as usize].push(Ranked { score, entry: e });
    }
    p.sha256 = r.sha256();
    Ok(p)
}

/// The picks of one kind for `n` items: failed requests up to `failed_share` of them, the
/// slowest for the rest (more failed ones when too few are slow); best first within each. And
/// the candidates left over (slow ones first), which the other kind may take.
fn picks(
    failed: Vec<Ranked>,
    slow: Vec<Ranked>,
    n: usize,
    failed_share: f64,
) -> (Vec<Ranked>, Vec<Ranked>) {
    let cap_failed = ((n as f64) * failed_share).floor() as usize;
    let mut nf = failed.len().min(cap_failed);
    let ns = slow.len().min(n - nf);
    nf = failed.len().min(n - ns);
    let (mut failed, mut slow) = (failed.into_iter(), slow.into_iter());
    let chosen: Vec<Ranked> = failed.by_ref().take(nf).chain(slow.by_ref().take(ns)).collect();
    (chosen, slow.chain(failed).collect())
}

/// Why a request was picked.
fn why(e: &Entry, by: Metric) -> String {
    if e.failed() {
        format!("failed (status {})", e.status)
    } else {
        format!("slow ({} {})", by.name(), by.of(e).map_or("—".into(), |v| format!("{v}")))
    }
}

/// The category of a new item: `structured`, `multi_turn` (several user turns),
/// `long_context` (1,200 words or more), else `chat`.
fn category(req: &Map<String, Value>, structured: bool) -> &'static str {
    if structured {
        return "structured";
    }
    let messages = req.get("messages").and_then(Value::as_array);
    let users = messages
        .map(|m| m.iter().filter(|x| x.get("role").and_then(Value::as_str) == Some("user")).count())
        .unwrap_or(0);
    if users > 1 {
        return "multi_turn";
    }
    let words: usize = match (messages, req.get("prompt").and_then(Value::as_str)) {
        (Some(m), _) => {
            m.iter().map(|x| crate::wire::message_text(x).split_whitespace().count()).sum()
        }
        (None, Some(p)) => p.split_whitespace().count(),
        _ => 0,
    };
    if words >= 1200 { "long_context" } else { "chat" }
}

/// The dataset item a scrubbed request becomes: the body without what the bench sets itself
/// (`model`, `stream`, `stream_options`, `n`), `max_completion_tokens` as `max_tokens`, with an
/// id and a category.
fn item_of(mut req: Map<String, Value>, line: u64, structured: bool) -> Map<String, Value> {
    for k in ["model", "stream", "stream_options", "n"] {
        req.remove(k);
    }
    if let Some(m) = req.remove("max_completion_tokens") {
        req.entry("max_tokens").or_insert(m);
    }
    let category = category(&req, structured);
    req.insert("id".into(), Value::String(format!("log-{line}")));
    req.insert("category".into(), Value::String(category.into()));
    req
}

/// Refresh the dataset; see the module header.
pub fn refresh(opts: &Options) -> Result<Refreshed, RefreshError> {
    if !(opts.share > 0.0 && opts.share <= 1.0) {
        return Err(RefreshError::Usage(format!("--share {} is not in (0, 1]", opts.share)));
    }
    let (text, items) = read_items(opts)?;
    let n = items.len();
    let k = (opts.share * n as f64).round() as usize;
    if k == 0 {
        return Err(RefreshError::Usage(format!(
            "--share {} of {n} items replaces none; raise it to at least {:.4}",
            opts.share,
            0.5 / n as f64
        )));
    }
    let mut scrubber = Scrubber::new(&opts.pii_patterns, opts.key.clone(), &opts.key_env)?;
    let scan = scan(opts)?;
    let non_blank = scan.lines - scan.blank;
    if scan.malformed_count as f64 > opts.max_malformed_share * non_blank as f64 {
        let first = named_malformed(opts, &scan.malformed[..1.min(scan.malformed.len())])
            .pop()
            .unwrap_or_default();
        return Err(RefreshError::TooManyMalformed {
            file: opts.log_name.clone(),
            malformed: scan.malformed_count,
            lines: non_blank,
            share: opts.max_malformed_share * 100.0,
            first,
            named: named_malformed(opts, &scan.malformed),
        });
    }
    let (since, until, chosen_by) = window(opts, &scan)?;
    let mut slots =
        rand::seq::index::sample(&mut StdRng::seed_from_u64(opts.seed), n, k).into_vec();
    slots.sort_unstable();
    let pools = collect(opts, scan.format, since, until, k)?;
    if pools.sha256 != scan.sha256 {
        return Err(RefreshError::Usage(format!(
            "{} changed while it was read (its SHA-256 differs between the two passes); refresh \
             from a copy no one is writing",
            opts.log_name
        )));
    }
    let assigned = assign(opts, &items, &slots, pools.lists)?;
    let mut replaced = Vec::new();
    let mut new_lines = std::collections::BTreeMap::new();
    for (slot, pick) in slots.iter().zip(assigned) {
        let e = &pick.entry;
        let structured = item_schema(&e.request).is_some();
        let scrubbed = scrubber.request(&e.request, e.line, &e.secrets)?;
        let item = item_of(scrubbed, e.line, structured);
        let new_id = format!("log-{}", e.line);
        new_lines.insert(items[*slot].line, Value::Object(item).to_string());
        replaced.push(Replacement {
            item: *slot,
            old_id: items[*slot].id.clone(),
            new_id,
            log_line: e.line,
            structured,
            why: why(e, opts.by),
        });
    }
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.strip_prefix('\u{feff}').unwrap_or(&text).lines().enumerate() {
        out.push_str(new_lines.get(&(i + 1)).map_or(line, String::as_str));
        out.push('\n');
    }
    let structured_before = items.iter().filter(|i| i.structured).count();
    let structured_after = structured_before
        - replaced.iter().filter(|r| items[r.item].structured && !r.structured).count()
        + replaced.iter().filter(|r| !items[r.item].structured && r.structured).count();
    let provenance = Provenance {
        format_version: 1,
        tool: format!("{} {}", crate::TOOL_NAME, crate::TOOL_VERSION),
        log: LogSource {
            file: opts.log_name.clone(),
            sha256: scan.sha256,
            format: scan.format.name().into(),
            lines: scan.lines,
            blank: scan.blank,
            malformed: scan.malformed_count,
            malformed_lines: named_malformed(opts, &scan.malformed),
        },
        window: Window {
            since: rfc3339(since),
            until: rfc3339(until),
            chosen_by,
            requests: pools.requests,
        },
        selection: Selection {
            rule: rule_text(opts),
            by: opts.by.name().into(),
            failed_share: opts.failed_share,
            failed: pools.failed,
            structured: pools.structured,
        },
        scrub: Scrub {
            secret_patterns: SECRET_PATTERNS.iter().map(|(name, _)| name.to_string()).collect(),
            pii_patterns: scrubber.pii_patterns().to_vec(),
            secrets_removed: scrubber.counts.secrets,
            pii_removed: scrubber.counts.pii,
            user_ids_hashed: scrubber.counts.user_ids,
            user_id_hash: "hmac-sha256".into(),
            key_env: opts.key_env.clone(),
            key_id: scrubber.key_id(),
        },
        seed: opts.seed,
        share: opts.share,
        dataset: DatasetSides {
            input: opts.dataset_name.clone(),
            input_hash: WorkloadFile::of(&opts.dataset_name, text.as_bytes()).hash,
            output: opts.out_name.clone(),
            output_hash: WorkloadFile::of(&opts.out_name, out.as_bytes()).hash,
            items: n,
            structured_before,
            structured_after,
        },
        replaced,
    };
    Ok(Refreshed { text: out, provenance, malformed: scan.malformed })
}

/// Malformed lines as `file:line: what is wrong`, scrubbed like the requests (a message may
/// quote a value of the line).
fn named_malformed(opts: &Options, malformed: &[Malformed]) -> Vec<String> {
    let mut scrubber = Scrubber::new(&opts.pii_patterns, None, &opts.key_env).ok();
    let none = crate::redact::Redactor::default();
    malformed
        .iter()
        .map(|m| {
            let message = match scrubber.as_mut() {
                Some(s) => s.text(&m.message, &none),
                None => m.message.clone(),
            };
            format!("{}:{}: {}", opts.log_name, m.line, message)
        })
        .collect()
}

/// The selection rule in words.
pub fn rule_text(opts: &Options) -> String {
    format!(
        "slowest by {} and failed (status >= 400 or 0; at most {}% of each kind's picks) requests",
        opts.by.name(),
        (opts.failed_share * 100.0).round()
    )
}

/// The request each slot gets, in slot order: a structured item a structured request, another
/// item another request; a kind short of requests takes the other kind's while the structured
/// share stays at least the floor, else the refresh is refused.
fn assign(
    opts: &Options,
    items: &[Item],
    slots: &[usize],
    lists: [[TopK; 2]; 2],
) -> Result<Vec<Ranked>, RefreshError> {
    let n = items.len();
    let need_s = slots.iter().filter(|s| items[**s].structured).count();
    let need_o = slots.len() - need_s;
    let [[o_slow, o_failed], [s_slow, s_failed]] = lists;
    let (own_s, spare_s) =
        picks(s_failed.into_sorted(), s_slow.into_sorted(), need_s, opts.failed_share);
    let (own_o, spare_o) =
        picks(o_failed.into_sorted(), o_slow.into_sorted(), need_o, opts.failed_share);
    let structured = items.iter().filter(|i| i.structured).count();
    let floor = (opts.min_structured_share * n as f64).min(structured as f64);
    // Structured items that cannot get a structured request lower the share by one each.
    let short_s = need_s - own_s.len();
    let short_o = need_o - own_o.len();
    if short_s > 0 && ((structured - short_s) as f64) < floor - 1e-9 {
        return Err(RefreshError::Shortage {
            file: opts.log_name.clone(),
            kind: "structured",
            have: own_s.len(),
            need: need_s,
            also: format!(
                " to keep the structured share at {:.0}% or more",
                floor / n as f64 * 100.0
            ),
        });
    }
    for (kind, short, own, spare) in [
        ("structured", short_s, own_s.len(), spare_o.len()),
        ("unstructured", short_o, own_o.len(), spare_s.len()),
    ] {
        if short > spare {
            return Err(RefreshError::Shortage {
                file: opts.log_name.clone(),
                kind,
                have: own,
                need: own + short,
                also: format!(" (or as many spare requests of the other kind, {spare} left)"),
            });
        }
    }
    // Each slot its own kind's next pick (best first), else the other kind's next spare one.
    let (mut own_s, mut own_o) = (own_s.into_iter(), own_o.into_iter());
    let (mut spare_s, mut spare_o) = (spare_s.into_iter(), spare_o.into_iter());
    let mut out = Vec::with_capacity(slots.len());
    for slot in slots {
        let pick = if items[*slot].structured {
            own_s.next().or_else(|| spare_o.next())
        } else {
            own_o.next().or_else(|| spare_s.next())
        };
        out.push(pick.expect("the shortages are checked above"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranked(line: u64, score: f64) -> Ranked {
        let entry = Entry {
            line,
            ts_ms: 0,
            request: Map::new(),
            latency_ms: Some(score),
            ttft_ms: None,
            status: 200,
            secrets: Vec::new(),
        };
        Ranked { score, entry: Box::new(entry) }
    }

    #[test]
    fn the_top_list_keeps_the_best_in_bounded_memory_ties_to_the_earlier_line() {
        let mut t = TopK::new(3);
        for (line, score) in [(1, 5.0), (2, 9.0), (3, 1.0), (4, 9.0), (5, 7.0), (6, 2.0)] {
            t.push(ranked(line, score));
            assert!(t.heap.len() <= 3);
        }
        let lines: Vec<u64> = t.into_sorted().iter().map(|r| r.entry.line).collect();
        assert_eq!(lines, vec![2, 4, 5]);
    }

    #[test]
    fn picks_mix_failed_and_slow_by_the_share() {
        let f = || (10..14).map(|l| ranked(l, 1.0)).collect::<Vec<_>>();
        let s = || (20..30).map(|l| ranked(l, 100.0 - l as f64)).collect::<Vec<_>>();
        let lines = |v: Vec<Ranked>| v.iter().map(|r| r.entry.line).collect::<Vec<_>>();
        let (chosen, rest) = picks(f(), s(), 5, 0.5);
        assert_eq!(lines(chosen), vec![10, 11, 20, 21, 22]);
        assert_eq!(lines(rest), vec![23, 24, 25, 26, 27, 28, 29, 12, 13]);
        assert_eq!(lines(picks(f(), s(), 5, 0.0).0), vec![20, 21, 22, 23, 24]);
        // Too few slow ones: more failed.
        let few = s().into_iter().take(1).collect();
        assert_eq!(lines(picks(f(), few, 4, 0.5).0), vec![10, 11, 12, 20]);
    }

    fn options(min_structured_share: f64) -> Options {
        Options {
            log: PathBuf::from("log.jsonl"),
            log_name: "log.jsonl".into(),
            dataset: PathBuf::from("d.jsonl"),
            dataset_name: "d.jsonl".into(),
            out_name: "o.jsonl".into(),
            share: 0.3,
            seed: 1,
            window: WindowSpec::Days(7.0),
            format: log::Format::Auto,
            by: Metric::LatencyMs,
            failed_share: 0.5,
            min_structured_share,
            max_malformed_share: 0.01,
            pii_patterns: Vec::new(),
            key: None,
            key_env: "K".into(),
        }
    }

    /// `[structured][failed]` lists: `other` and `structured` slow requests with these lines
    /// (the earlier line the slower).
    fn lists(other: &[u64], structured: &[u64]) -> [[TopK; 2]; 2] {
        let list = |lines: &[u64]| {
            let mut t = TopK::new(10);
            lines.iter().for_each(|l| t.push(ranked(*l, 1000.0 - *l as f64)));
            t
        };
        [[list(other), TopK::new(10)], [list(structured), TopK::new(10)]]
    }

    #[test]
    fn a_kind_short_of_requests_takes_the_other_kinds_while_the_share_holds() {
        // Ten items, the first five structured (50%); items 0, 1 (structured) and 6 replaced.
        let items: Vec<Item> =
            (0..10).map(|i| Item { line: i + 1, id: format!("d{i}"), structured: i < 5 }).collect();
        let slots = [0, 1, 6];
        let got = |o: &Options, l| {
            assign(o, &items, &slots, l).map(|v| v.iter().map(|r| r.entry.line).collect::<Vec<_>>())
        };
        // No structured request: two structured items lost would leave 30%, under 40%.
        let e = got(&options(0.4), lists(&[1, 2, 3, 4], &[])).unwrap_err().to_string();
        assert!(
            e.contains("holds 0 structured candidate requests; replacing 2 structured items"),
            "{e}"
        );
        assert!(e.contains("to keep the structured share at 40% or more"), "{e}");
        // With a 30% floor they take the other kind's spare requests, after its own pick.
        assert_eq!(got(&options(0.3), lists(&[1, 2, 3, 4], &[])).unwrap(), vec![2, 3, 1]);
        // Too few of any kind: refused with the counts.
        let e = got(&options(0.0), lists(&[1], &[])).unwrap_err().to_string();
        assert!(e.contains("(or as many spare requests of the other kind, 0 left)"), "{e}");
        // No other request: the other item takes a structured one (the share only grows).
        assert_eq!(got(&options(0.4), lists(&[], &[7, 8, 9])).unwrap(), vec![7, 8, 9]);
        // Each kind its own, best first in item order.
        assert_eq!(got(&options(0.4), lists(&[1, 2], &[7, 8, 9])).unwrap(), vec![7, 8, 1]);
    }

    #[test]
    fn categories_of_new_items() {
        let m = |v: serde_json::Value| v.as_object().unwrap().clone();
        assert_eq!(category(&m(serde_json::json!({"prompt": "x"})), true), "structured");
        let two = serde_json::json!({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]});
        assert_eq!(category(&m(two), false), "multi_turn");
        let long = "w ".repeat(1200);
        assert_eq!(category(&m(serde_json::json!({"prompt": long})), false), "long_context");
        assert_eq!(category(&m(serde_json::json!({"prompt": "short"})), false), "chat");
    }
}
