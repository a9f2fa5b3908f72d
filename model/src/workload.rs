//! What is sent: synthetic prompts of given token lengths, or a JSONL dataset of requests.
//!
//! Synthetic prompts are built from a fixed vocabulary of common English words, seeded, so the
//! same config always sends the same text. Each prompt starts with words derived from its
//! request id, so no two requests share a prefix (unless `shared_prefix_tokens` asks for one)
//! and a server's prefix cache cannot serve one request from another.

use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::config::WorkloadConfig;
use crate::lengths::LengthSampler;

use crate::wire::VOCABULARY;

/// Words at the start of each synthetic prompt that make it unique.
pub(crate) const UNIQUE_WORDS: usize = 4;

/// One request's payload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Payload {
    /// A prompt text (sent as one user message to the chat endpoint).
    Prompt(String),
    /// Chat messages from a dataset (sent as-is; the completions endpoint gets them joined).
    Messages(Vec<serde_json::Value>),
}

/// One item of the workload.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkItem {
    pub payload: Payload,
    /// Requested prompt length in tokens (synthetic prompts).
    pub target_tokens: Option<u32>,
    /// Output tokens to request (dataset items may override the profile's).
    pub max_tokens: u32,
    /// JSON Schema or response_format the item asks for (datasets), passed through.
    pub response_format: Option<serde_json::Value>,
    /// The item's `tools` (an array of tool definitions) and `tool_choice` (datasets), passed
    /// through to chat requests as they are; tool-call deltas in the answer count as output.
    pub tools: Option<serde_json::Value>,
    pub tool_choice: Option<serde_json::Value>,
}

/// A file the workload was read from, as the profile names it, with a hash of its content
/// (`fnv1a:` and 16 hex digits): a run of the same profile with an edited file is another
/// scenario.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadFile {
    pub path: String,
    pub hash: String,
}

impl WorkloadFile {
    pub fn of(path: &str, content: &[u8]) -> WorkloadFile {
        WorkloadFile {
            path: path.to_string(),
            hash: format!("fnv1a:{:016x}", crate::hash::fnv1a(content)),
        }
    }
}

/// How prompt lengths were counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LengthBasis {
    /// Counted by the target's own `/tokenize` endpoint.
    Tokenize,
    /// Approximated as one token per word (the target offers no `/tokenize`).
    Approximate,
    /// Taken from a dataset as written.
    Dataset,
}

/// Builds synthetic prompt text.
#[derive(Clone, Debug)]
pub struct PromptBuilder {
    seed: u64,
    prefix: Vec<&'static str>,
    /// Mixed into the unique words (0: none): a shard's requests never repeat another
    /// shard's (`bench::shard`).
    unique_salt: u64,
}

impl PromptBuilder {
    pub fn new(seed: u64, shared_prefix_words: usize) -> PromptBuilder {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x7072_6566_6978);
        let prefix = (0..shared_prefix_words)
            .map(|_| VOCABULARY[rng.random_range(0..VOCABULARY.len())])
            .collect();
        PromptBuilder { seed, prefix, unique_salt: 0 }
    }

    /// The same prompts with the unique words salted by `salt` (the shared prefix stays).
    pub fn with_unique_salt(mut self, salt: u64) -> PromptBuilder {
        self.unique_salt = salt;
        self
    }

    /// A prompt of `words` words for request `request_id` built on text `item`: the shared
    /// prefix, then `UNIQUE_WORDS` words derived from the request id, then the item's filler.
    pub fn build(&self, item: u64, request_id: u64, words: usize) -> String {
        let mut out = String::with_capacity(words * 7);
        let mut n = 0;
        let push = |w: &str, out: &mut String| {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(w);
        };
        for w in &self.prefix {
            if n == words {
                return out;
            }
            push(w, &mut out);
            n += 1;
        }
        // Unique words: the request id in base-|V| digits (plus a seeded offset).
        let mut id = request_id.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ self.seed ^ self.unique_salt;
        for _ in 0..UNIQUE_WORDS {
            if n == words {
                return out;
            }
            push(VOCABULARY[(id % VOCABULARY.len() as u64) as usize], &mut out);
            id /= VOCABULARY.len() as u64;
            n += 1;
        }
        let mut rng = StdRng::seed_from_u64(self.seed ^ item.wrapping_mul(0x2545_f491_4f6c_dd1d));
        while n < words {
            push(VOCABULARY[rng.random_range(0..VOCABULARY.len())], &mut out);
            n += 1;
        }
        out
    }
}

/// The request lines of a JSONL dataset: each line trimmed, blank lines and `//` comments
/// skipped, with its 1-based line number in the file; a UTF-8 byte order mark before the first
/// line is skipped.
pub fn dataset_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.strip_prefix('\u{feff}')
        .unwrap_or(text)
        .lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.trim()))
        .filter(|(_, line)| !line.is_empty() && !line.starts_with("//"))
}

/// How many requests a JSONL dataset holds (its [`dataset_lines`]).
pub fn dataset_line_count(text: &str) -> usize {
    dataset_lines(text).count()
}

/// A JSON parse error as the readers of workload files word it: serde_json's recursion limit
/// (a value nested deeper than [`MAX_JSON_DEPTH`](crate::config::limits::MAX_JSON_DEPTH)
/// arrays and objects) says so and where.
pub(crate) fn json_error(e: &serde_json::Error) -> String {
    let text = e.to_string();
    if text.starts_with("recursion limit exceeded") {
        format!(
            "nested deeper than {} arrays and objects, the most a workload file may nest \
             (column {})",
            crate::config::limits::MAX_JSON_DEPTH,
            e.column()
        )
    } else {
        text
    }
}

/// The JSON Schema a dataset item's output must follow, when it is structured: its `schema`, or
/// `response_format.json_schema.schema`.
pub fn item_schema(
    item: &serde_json::Map<String, serde_json::Value>,
) -> Option<&serde_json::Value> {
    item.get("schema")
        .or_else(|| item.get("response_format").and_then(|r| r.pointer("/json_schema/schema")))
}

/// One dataset line as a JSON object.
pub fn parse_dataset_line(
    path: &Path,
    line_no: usize,
    line: &str,
) -> Result<serde_json::Value, DatasetError> {
    let v: serde_json::Value = serde_json::from_str(line).map_err(|e| {
        DatasetError::at(path, line_no, format!("not valid JSON: {}", json_error(&e)))
    })?;
    if !v.is_object() {
        return Err(DatasetError::at(path, line_no, "expected a JSON object".into()));
    }
    Ok(v)
}

impl WorkItem {
    /// The request of one dataset line (a JSON object, see [`Workload::from_jsonl`]); items
    /// without `max_tokens` get `default_max_tokens`.
    pub fn from_dataset_line(
        path: &Path,
        line_no: usize,
        v: &serde_json::Value,
        default_max_tokens: u32,
    ) -> Result<WorkItem, DatasetError> {
        let err = |message: String| DatasetError::at(path, line_no, message);
        let obj = v.as_object().ok_or_else(|| err("expected a JSON object".into()))?;
        let payload = match (obj.get("messages"), obj.get("prompt")) {
            (Some(serde_json::Value::Array(m)), _) if !m.is_empty() => {
                for (k, msg) in m.iter().enumerate() {
                    let ok = msg.get("role").and_then(|r| r.as_str()).is_some()
                        && msg.get("content").is_some();
                    if !ok {
                        return Err(err(format!("messages[{k}] needs `role` and `content`")));
                    }
                }
                Payload::Messages(m.clone())
            }
            (Some(_), _) => return Err(err("`messages` must be a non-empty array".into())),
            (None, Some(serde_json::Value::String(p))) => Payload::Prompt(p.clone()),
            (None, Some(_)) => return Err(err("`prompt` must be a string".into())),
            (None, None) => return Err(err("each line needs `messages` or `prompt`".into())),
        };
        let max_tokens = match obj.get("max_tokens") {
            None => default_max_tokens,
            Some(v) => v
                .as_u64()
                .filter(|n| *n >= 1 && *n <= u32::MAX as u64)
                .ok_or_else(|| err("`max_tokens` must be a positive integer".into()))?
                as u32,
        };
        let response_format = obj.get("response_format").cloned().or_else(|| {
            obj.get("schema").map(|s| {
                serde_json::json!({"type": "json_schema", "json_schema": {"name": "item", "schema": s}})
            })
        });
        let tools = match obj.get("tools") {
            None => None,
            Some(v @ serde_json::Value::Array(a)) if a.iter().all(|x| x.is_object()) => {
                Some(v.clone())
            }
            Some(_) => return Err(err("`tools` must be an array of tool objects".into())),
        };
        let tool_choice = obj.get("tool_choice").cloned();
        Ok(WorkItem {
            payload,
            target_tokens: None,
            max_tokens,
            response_format,
            tools,
            tool_choice,
        })
    }
}

/// One slice of a workload: its items from `first_item` on (cycling), and a salt for its
/// prompts (0: none). Recorded in the summary's `workload.slice`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSlice {
    pub first_item: u32,
    pub salt: u64,
}

impl WorkloadSlice {
    /// Rotate the items so the slice's first is sent first.
    pub fn apply(&self, workload: &mut Workload) {
        let n = workload.items.len();
        if n > 0 {
            workload.items.rotate_left(self.first_item as usize % n);
        }
    }
}

/// The resolved list of things to send, in send order.
#[derive(Clone, Debug)]
pub struct Workload {
    pub items: Vec<WorkItem>,
    pub basis: LengthBasis,
}

impl Workload {
    /// Synthetic items: each input length `repeats` times, shuffled by seed when asked. The prompt
    /// text is filled in later (its length is fitted to the target's tokenizer).
    pub fn synthetic(cfg: &WorkloadConfig) -> Workload {
        Workload::synthetic_with(cfg, None, None)
    }

    /// Synthetic items whose prompt lengths are `samples` draws of `input` (else the length list
    /// times `repeats`) and whose output lengths are draws of `output` (else `max_tokens`).
    pub fn synthetic_with(
        cfg: &WorkloadConfig,
        input: Option<LengthSampler>,
        output: Option<LengthSampler>,
    ) -> Workload {
        let mut lengths: Vec<u32> = match input {
            Some(mut s) => (0..cfg.samples).map(|_| s.sample()).collect(),
            None => {
                let mut v = Vec::with_capacity(cfg.input_lengths.len() * cfg.repeats as usize);
                for _ in 0..cfg.repeats {
                    v.extend_from_slice(&cfg.input_lengths);
                }
                v
            }
        };
        if cfg.shuffle {
            lengths.shuffle(&mut StdRng::seed_from_u64(cfg.seed));
        }
        let mut output = output;
        let items = lengths
            .into_iter()
            .map(|n| WorkItem {
                payload: Payload::Prompt(String::new()),
                target_tokens: Some(n),
                max_tokens: output.as_mut().map_or(cfg.max_tokens, |s| s.sample()),
                response_format: None,
                tools: None,
                tool_choice: None,
            })
            .collect();
        Workload { items, basis: LengthBasis::Approximate }
    }

    /// The lengths the items request: prompt lengths (None when an item's is not known, as for
    /// a dataset) and output lengths.
    pub fn requested_lengths(&self) -> (Option<Vec<u32>>, Vec<u32>) {
        let input = self.items.iter().map(|i| i.target_tokens).collect();
        (input, self.items.iter().map(|i| i.max_tokens).collect())
    }

    /// Items from a JSONL dataset. Each line is an object with `messages` (chat messages) or
    /// `prompt` (text), and optionally `max_tokens`, `response_format` / `schema`, `tools` and
    /// `tool_choice`. Other keys
    /// (ids, categories, expected answers) are allowed and ignored here.
    pub fn from_jsonl(
        path: &Path,
        text: &str,
        cfg: &WorkloadConfig,
    ) -> Result<Workload, DatasetError> {
        let mut items = Vec::new();
        for (line_no, line) in dataset_lines(text) {
            let v = parse_dataset_line(path, line_no, line)?;
            items.push(WorkItem::from_dataset_line(path, line_no, &v, cfg.max_tokens)?);
        }
        if items.is_empty() {
            return Err(DatasetError::empty(path));
        }
        if cfg.shuffle {
            items.shuffle(&mut StdRng::seed_from_u64(cfg.seed));
        }
        Ok(Workload { items, basis: LengthBasis::Dataset })
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Item used by request `request_id` (the workload cycles when more requests are sent).
    pub fn item_index(&self, request_id: u64) -> u64 {
        request_id % self.items.len() as u64
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{}:{line}: {message}", path.display())]
pub struct DatasetError {
    pub path: PathBuf,
    pub line: usize,
    pub message: String,
}

impl DatasetError {
    pub fn at(path: &Path, line: usize, message: String) -> DatasetError {
        DatasetError { path: path.to_path_buf(), line, message }
    }

    pub fn empty(path: &Path) -> DatasetError {
        DatasetError::at(path, 0, "the dataset has no requests".into())
    }

    /// The dataset file cannot be read.
    pub fn unreadable(path: &Path, e: &std::io::Error) -> DatasetError {
        DatasetError::at(path, 0, format!("cannot read: {e}"))
    }
}

/// Read a dataset file's text.
pub fn read_dataset(path: &Path) -> Result<String, DatasetError> {
    std::fs::read_to_string(path).map_err(|e| DatasetError::unreadable(path, &e))
}

/// Fits a synthetic prompt to a token target with the target's own tokenizer: propose a word
/// count, observe how many tokens it makes, correct, at most eight times. The closest fit wins,
/// preferring one that does not exceed the target.
#[derive(Clone, Debug)]
pub struct PromptFit {
    target: u32,
    next: usize,
    best: Option<(usize, u32)>,
    attempts: u32,
    done: bool,
}

impl PromptFit {
    pub(crate) const MAX_ATTEMPTS: u32 = 8;

    /// Start from `words_per_token x target` words.
    pub fn new(target: u32, words_per_token: f64) -> PromptFit {
        let next = ((target as f64 * words_per_token).round() as usize).max(1);
        PromptFit { target, next, best: None, attempts: 0, done: false }
    }

    /// The word count to try next, or `None` when fitting is over.
    pub fn next_words(&self) -> Option<usize> {
        (!self.done).then_some(self.next)
    }

    /// Record that the last proposed word count made `tokens` tokens.
    pub fn observe(&mut self, tokens: u32) {
        let words = self.next;
        let target = self.target;
        let better = self.best.is_none_or(|(_, b)| {
            let (dc, du) = (tokens.abs_diff(target), b.abs_diff(target));
            dc < du || (dc == du && tokens <= target && b > target)
        });
        if better {
            self.best = Some((words, tokens));
        }
        self.attempts += 1;
        if tokens == target || self.attempts >= Self::MAX_ATTEMPTS {
            self.done = true;
            return;
        }
        let ratio = words as f64 / tokens.max(1) as f64;
        let next =
            ((words as f64 + (target as f64 - tokens as f64) * ratio).round() as usize).max(1);
        self.next = if next != words {
            next
        } else if tokens > target {
            words.saturating_sub(1).max(1)
        } else {
            words + 1
        };
    }

    /// Best (word count, token count) so far.
    pub fn best(&self) -> Option<(usize, u32)> {
        self.best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_are_deterministic_unique_and_sized() {
        let b = PromptBuilder::new(42, 0);
        let p = b.build(3, 7, 100);
        assert_eq!(p.split(' ').count(), 100);
        assert_eq!(p, PromptBuilder::new(42, 0).build(3, 7, 100));
        let q = b.build(3, 8, 100);
        assert_ne!(
            p.split(' ').take(UNIQUE_WORDS).collect::<Vec<_>>(),
            q.split(' ').take(UNIQUE_WORDS).collect::<Vec<_>>()
        );
        // Same item, different request: same filler after the unique words.
        assert_eq!(
            p.split(' ').skip(UNIQUE_WORDS).collect::<Vec<_>>(),
            q.split(' ').skip(UNIQUE_WORDS).collect::<Vec<_>>()
        );
        assert_eq!(b.build(0, 0, 2).split(' ').count(), 2);
    }

    #[test]
    fn shared_prefix_is_shared() {
        let b = PromptBuilder::new(1, 32);
        let p = b.build(1, 1, 64);
        let q = b.build(2, 2, 64);
        let pp: Vec<_> = p.split(' ').take(32).collect();
        let qq: Vec<_> = q.split(' ').take(32).collect();
        assert_eq!(pp, qq);
        assert_ne!(p, q);
    }

    #[test]
    fn fitting_converges_on_a_nonlinear_tokenizer() {
        // A tokenizer where words longer than 4 letters count twice.
        let count = |s: &str| -> Result<u32, ()> {
            Ok(s.split(' ').map(|w| if w.len() > 4 { 2 } else { 1 }).sum())
        };
        let b = PromptBuilder::new(5, 0);
        for target in [16u32, 128, 1000] {
            let mut fit = PromptFit::new(target, 1.0);
            while let Some(words) = fit.next_words() {
                fit.observe(count(&b.build(1, 1, words)).unwrap());
            }
            let (words, n) = fit.best().unwrap();
            assert!(n.abs_diff(target) <= 1, "target {target} got {n}");
            assert_eq!(count(&b.build(1, 1, words)).unwrap(), n);
        }
    }

    #[test]
    fn synthetic_workload_is_the_length_list_times_repeats() {
        let cfg =
            WorkloadConfig { input_lengths: vec![10, 20], repeats: 3, ..WorkloadConfig::default() };
        let w = Workload::synthetic(&cfg);
        assert_eq!(w.len(), 6);
        let mut lens: Vec<u32> = w.items.iter().map(|i| i.target_tokens.unwrap()).collect();
        lens.sort();
        assert_eq!(lens, vec![10, 10, 10, 20, 20, 20]);
    }

    #[test]
    fn distributions_set_the_item_count_and_both_lengths() {
        use crate::config::LengthDist;
        let cfg = WorkloadConfig { samples: 300, ..WorkloadConfig::default() };
        let root = Path::new(".");
        let input = LengthDist::Uniform { min: 50, max: 60 }.sampler(root, 1).unwrap();
        let output = LengthDist::Fixed { value: 9 }.sampler(root, 2).unwrap();
        let w = Workload::synthetic_with(&cfg, Some(input), Some(output));
        assert_eq!(w.len(), 300);
        let (inp, out) = w.requested_lengths();
        let inp = inp.unwrap();
        assert!(inp.iter().all(|n| (50..=60).contains(n)) && inp.contains(&50));
        assert!(out.iter().all(|&n| n == 9));
        let again = LengthDist::Uniform { min: 50, max: 60 }.sampler(root, 1).unwrap();
        let w2 = Workload::synthetic_with(&cfg, Some(again), None);
        assert_eq!(w2.requested_lengths().0.unwrap(), inp, "seeded");
        assert!(w2.items.iter().all(|i| i.max_tokens == cfg.max_tokens));
    }

    #[test]
    fn dataset_lines_skip_blanks_and_comments_and_keep_line_numbers() {
        let text = "  {\"prompt\": \"a\"}  \n\n// a comment\n   // indented comment\n{\"prompt\": \"b\"}\n";
        let lines: Vec<_> = dataset_lines(text).collect();
        assert_eq!(lines, vec![(1, "{\"prompt\": \"a\"}"), (5, "{\"prompt\": \"b\"}")]);
        assert_eq!(dataset_line_count(text), 2);
        assert_eq!(dataset_line_count(""), 0);
    }

    #[test]
    fn dataset_lines_are_checked_with_line_numbers() {
        let cfg = WorkloadConfig { shuffle: false, ..WorkloadConfig::default() };
        let ok = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":5}\n\n{\"prompt\":\"x\",\"id\":3}\n";
        let w = Workload::from_jsonl(Path::new("d.jsonl"), ok, &cfg).unwrap();
        assert_eq!(w.len(), 2);
        assert_eq!(w.items[0].max_tokens, 5);
        assert_eq!(w.items[1].max_tokens, cfg.max_tokens);
        let bad = "{\"prompt\":\"x\"}\n{\"messages\":[{\"content\":\"no role\"}]}\n";
        let e = Workload::from_jsonl(Path::new("d.jsonl"), bad, &cfg).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().starts_with("d.jsonl:2:"), "{e}");
        let e = Workload::from_jsonl(Path::new("d.jsonl"), "{\"prompt\": 3}", &cfg).unwrap_err();
        assert!(e.message.contains("string"));
        assert!(Workload::from_jsonl(Path::new("d.jsonl"), "", &cfg).is_err());
    }

    #[test]
    fn a_datasets_tools_that_are_not_tool_objects_are_refused_with_the_file_and_line() {
        let cfg = WorkloadConfig { shuffle: false, ..WorkloadConfig::default() };
        // A dataset's tools that are not tool objects are refused with the file and line.
        let bad = "{\"prompt\":\"x\"}\n{\"prompt\":\"y\",\"tools\":\"get_weather\"}\n";
        let e = Workload::from_jsonl(Path::new("d.jsonl"), bad, &cfg).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("`tools` must be an array"), "{e}");
    }
}
