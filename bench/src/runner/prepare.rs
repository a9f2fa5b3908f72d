//! Step 2, prepare the workload: the dataset or the synthetic items, and for synthetic items
//! the prompt lengths fitted to the target's tokenizer (when it offers one).

use std::path::{Path, PathBuf};

use crate::client::TokenizeError;
use infergate_model::config::{Endpoint, LoadConfig, TurnMode, WorkloadConfig};
use infergate_model::import::parse_conversations;
use infergate_model::lengths::LengthSampler;
use infergate_model::session::{self, Imported, Session};
use infergate_model::trace::{Trace, TraceInfo, TracePrompts};
use infergate_model::workload::{
    DatasetError, LengthBasis, Payload, PromptBuilder, PromptFit, WorkItem, Workload, WorkloadFile,
};

use super::RunError;
use super::connect::Connection;

/// The prompts of a synthetic workload (per item, the word count that fits its token target)
/// or of a trace (per item, its hash blocks).
pub struct Prompts {
    kind: PromptKind,
}

enum PromptKind {
    Synthetic { builder: PromptBuilder, words: Vec<usize>, counted: Vec<Option<u32>> },
    Trace(TracePrompts),
}

impl Prompts {
    /// The prompt request `request_id` sends for item `item`.
    pub fn text(&self, item: u64, request_id: u64) -> String {
        match &self.kind {
            PromptKind::Synthetic { builder, words, .. } => {
                builder.build(item, request_id, words[item as usize])
            }
            PromptKind::Trace(t) => t.text(item as usize, request_id),
        }
    }

    /// The same prompts with the words unique to each request salted by `salt` (a shard's,
    /// so that no two shards send the same text, or a slice's).
    pub fn with_unique_salt(self, salt: u64) -> Prompts {
        let kind = match self.kind {
            PromptKind::Synthetic { builder, words, counted } => {
                PromptKind::Synthetic { builder: builder.with_unique_salt(salt), words, counted }
            }
            PromptKind::Trace(t) => PromptKind::Trace(t.with_unique_salt(salt)),
        };
        Prompts { kind }
    }

    /// The item's prompt tokens as the target's tokenizer counted them (None: not counted).
    pub(crate) fn counted_tokens(&self, item: u64) -> Option<u32> {
        match &self.kind {
            PromptKind::Synthetic { counted, .. } => counted[item as usize],
            PromptKind::Trace(_) => None,
        }
    }
}

/// A trace to replay: each item's intended send offset (ms from the start of the load, in item
/// order) and what the summary says of it.
#[derive(Clone, Debug)]
pub struct Replay {
    pub offsets: Vec<f64>,
    pub info: TraceInfo,
}

/// What a profile's workload files hold, read (and checked) before the target is contacted.
pub struct Loaded {
    pub workload: Workload,
    pub trace: Option<(TracePrompts, Replay)>,
    /// The files read (trace, dataset, empirical lengths) with their content hashes.
    pub files: Vec<WorkloadFile>,
    /// A conversation dataset's sessions and recorded answers.
    pub conversations: Option<Conversations>,
}

/// What a conversation dataset adds to its workload items.
pub struct Conversations {
    /// Sessions mode: the sessions (None: first turns only).
    pub sessions: Option<Vec<Session>>,
    /// Per item, the recorded answer, when `max_tokens_from_answer` asks for its length.
    pub answers: Option<Vec<Option<String>>>,
    /// The think time between a session's turns, in ms.
    pub think: Option<LengthSampler>,
}

/// The sessions a run drives: each one's turns in order, with the think time between them.
pub(crate) struct SessionPlan {
    pub sessions: Vec<Session>,
    pub think: Option<std::sync::Mutex<LengthSampler>>,
}

/// Step 2's result: what the load will send, and notes on how its lengths were set.
pub(crate) struct Prepared {
    pub workload: Workload,
    /// For synthetic and trace workloads (None for a dataset).
    pub prompts: Option<Prompts>,
    /// The replay schedule (trace workloads).
    pub replay: Option<Replay>,
    /// The files the workload was read from.
    pub files: Vec<WorkloadFile>,
    /// A sessions workload's sessions (None for every other workload).
    pub sessions: Option<SessionPlan>,
    pub notes: Vec<String>,
}

/// Why the workload cannot be prepared.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error("cannot read the dataset {}", path.display())]
    DatasetRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Dataset(#[from] infergate_model::workload::DatasetError),
    #[error("cannot use the empirical length distribution")]
    Lengths(#[from] infergate_model::lengths::LengthFileError),
    #[error("cannot replay the trace")]
    Trace(#[from] infergate_model::trace::TraceError),
    #[error("the trace window (load.trace_start_s, load.trace_duration_s) holds no record of {}", path.display())]
    EmptyWindow { path: PathBuf },
    #[error("cannot fit the prompt lengths with the target's /tokenize")]
    PromptFit(#[source] TokenizeError),
    #[error("cannot count the tokens of the recorded answers with the target's /tokenize")]
    AnswerLength(#[source] TokenizeError),
}

fn resolve_path(root: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() { p.to_path_buf() } else { root.join(p) }
}

/// The workload a profile describes: its trace or dataset (relative paths from `root`) or its
/// synthetic items.
pub fn load_workload(
    wl: &WorkloadConfig,
    load: &LoadConfig,
    root: &Path,
) -> Result<Loaded, PrepareError> {
    if let Some(file) = &wl.trace {
        return load_trace(wl, load, root, file);
    }
    if let Some(file) = &wl.conversations {
        return load_conversations(wl, root, file);
    }
    let mut files = Vec::new();
    let workload = match &wl.dataset {
        Some(rel) => {
            let (path, text) = read_workload_file(root, rel)?;
            files.push(WorkloadFile::of(rel, text.as_bytes()));
            Workload::from_jsonl(&path, &text, wl)?
        }
        None => {
            let sampler = |d: &Option<infergate_model::config::LengthDist>, salt: u64| {
                d.as_ref().map(|d| d.sampler(root, wl.seed ^ salt)).transpose()
            };
            let input = sampler(&wl.input_distribution, 0)?;
            let output = sampler(&wl.output_distribution, 0x6f75_7470_7574)?;
            files.extend(length_files(root, [&wl.input_distribution, &wl.output_distribution]));
            Workload::synthetic_with(wl, input, output)
        }
    };
    Ok(Loaded { workload, trace: None, files, conversations: None })
}

/// A workload file (dataset, conversations, trace) read whole, with its resolved path.
fn read_workload_file(root: &Path, rel: &str) -> Result<(PathBuf, String), PrepareError> {
    let path = resolve_path(root, rel);
    let text = std::fs::read_to_string(&path)
        .map_err(|source| PrepareError::DatasetRead { path: path.clone(), source })?;
    Ok((path, text))
}

/// The empirical list files among these distributions, for their hashes: read once more, as
/// their samplers have just read them whole.
fn length_files<const N: usize>(
    root: &Path,
    dists: [&Option<infergate_model::config::LengthDist>; N],
) -> Vec<WorkloadFile> {
    let mut files = Vec::new();
    for rel in dists.into_iter().flatten().filter_map(|d| d.file()) {
        if let Ok(bytes) = std::fs::read(resolve_path(root, rel)) {
            files.push(WorkloadFile::of(rel, &bytes));
        }
    }
    files
}

/// A conversation dataset, read and checked whole, as sessions or first turns.
fn load_conversations(
    wl: &WorkloadConfig,
    root: &Path,
    file: &str,
) -> Result<Loaded, PrepareError> {
    let (path, text) = read_workload_file(root, file)?;
    let conversations = parse_conversations(&path, &text, wl.conversation_format)?;
    if wl.max_tokens_from_answer {
        let first_only = wl.conversation_turns == TurnMode::First;
        for c in &conversations {
            let sent = if first_only { &c.turns[..1] } else { &c.turns[..] };
            if let Some(k) = sent.iter().position(|t| t.answer.is_none()) {
                let message = format!(
                    "max_tokens_from_answer: user turn {} has no recorded answer to take its \
                     length from",
                    k + 1
                );
                return Err(DatasetError::at(&path, c.line, message).into());
            }
        }
    }
    let Imported { workload, sessions, answers } =
        session::import(conversations, wl.conversation_turns, wl);
    let think = wl
        .think_time_ms
        .as_ref()
        .map(|d| d.sampler(root, wl.seed ^ 0x0074_6869_6e6b))
        .transpose()?;
    let answers = wl.max_tokens_from_answer.then_some(answers);
    let mut files = vec![WorkloadFile::of(file, text.as_bytes())];
    files.extend(length_files(root, [&wl.think_time_ms]));
    let conversations = Some(Conversations { sessions, answers, think });
    Ok(Loaded { workload, trace: None, files, conversations })
}

/// A trace's window as workload items (in arrival order), its prompts and its schedule.
fn load_trace(
    wl: &WorkloadConfig,
    load: &LoadConfig,
    root: &Path,
    file: &str,
) -> Result<Loaded, PrepareError> {
    let (path, text) = read_workload_file(root, file)?;
    let trace = Trace::parse(&path, &text, wl.trace_format)?;
    let start_ms = load.trace_start_s * 1000.0;
    let origin = trace.records[0].timestamp_ms + start_ms;
    let trace = trace.window(start_ms, load.trace_duration_s.map(|d| d * 1000.0));
    if trace.records.is_empty() {
        return Err(PrepareError::EmptyWindow { path });
    }
    let offsets = trace.replay_offsets(&path, origin, load.time_scale, load.max_rate)?;
    let (blocks, reused_blocks) = trace.block_reuse();
    let info = TraceInfo {
        file: file.to_string(),
        format: Some(trace.format),
        records: trace.records.len() as u64,
        start_ms,
        time_scale: load.time_scale,
        block_tokens: wl.trace_block_tokens,
        blocks,
        reused_blocks,
    };
    let items = trace
        .records
        .iter()
        .map(|r| WorkItem {
            payload: Payload::Prompt(String::new()),
            target_tokens: Some(r.input_tokens),
            max_tokens: r.output_tokens,
            response_format: None,
            tools: None,
            tool_choice: None,
        })
        .collect();
    let prompts = TracePrompts::new(&trace, wl.trace_block_tokens, wl.seed);
    let workload = Workload { items, basis: LengthBasis::Approximate };
    let files = vec![WorkloadFile::of(file, text.as_bytes())];
    Ok(Loaded {
        workload,
        trace: Some((prompts, Replay { offsets, info })),
        files,
        conversations: None,
    })
}

/// Notes on how the prompt lengths of a workload were set.
pub(crate) fn workload_notes(basis: LengthBasis, endpoint: Endpoint) -> Vec<String> {
    let mut notes = Vec::new();
    if basis == LengthBasis::Approximate {
        notes.push("prompt lengths are approximate: the target has no /tokenize (one token per word assumed)".into());
    }
    if endpoint == Endpoint::Chat && basis != LengthBasis::Dataset {
        notes.push(
            "input_lengths count the prompt text; the chat template adds a few tokens (input_tokens records the server's count)".into(),
        );
    }
    notes
}

/// Prepare what a run sends to `conn` from the loaded workload: for synthetic items, fit each
/// prompt to its token target with the target's tokenizer. A trace's prompts are one word per
/// token as they are (fitting could break the identity of shared blocks).
/// The words unique to each request are salted by `prompt_salt` (0: none; a shard's or a
/// slice's, [`super::input::RunInput`]).
pub(crate) async fn prepare_workload(
    loaded: Loaded,
    prompt_salt: u64,
    wl: &WorkloadConfig,
    endpoint: Endpoint,
    conn: &Connection,
) -> Result<Prepared, RunError> {
    let mut prepared = prepare_unsalted(loaded, wl, endpoint, conn).await?;
    if prompt_salt != 0 {
        prepared.prompts = prepared.prompts.map(|p| p.with_unique_salt(prompt_salt));
    }
    Ok(prepared)
}

async fn prepare_unsalted(
    loaded: Loaded,
    wl: &WorkloadConfig,
    endpoint: Endpoint,
    conn: &Connection,
) -> Result<Prepared, RunError> {
    let Loaded { mut workload, trace, files, conversations } = loaded;
    if let Some(c) = conversations {
        if let Some(answers) = &c.answers {
            set_answer_lengths(conn, &mut workload, answers).await?;
        }
        let mut notes = workload_notes(workload.basis, endpoint);
        if c.answers.is_some() && !conn.resolved.tokenize {
            notes.push(
                "max_tokens of each turn is its recorded answer's words (the target has no \
                 /tokenize)"
                    .into(),
            );
        }
        let sessions = c
            .sessions
            .map(|sessions| SessionPlan { sessions, think: c.think.map(std::sync::Mutex::new) });
        return Ok(Prepared { workload, prompts: None, replay: None, files, sessions, notes });
    }
    if let Some((prompts, replay)) = trace {
        let notes = vec![
            "trace prompts are one vocabulary word per trace token, so records sharing hash ids \
             share identical text; input_tokens records the server's count"
                .into(),
        ];
        let prompts = Some(Prompts { kind: PromptKind::Trace(prompts) });
        return Ok(Prepared {
            workload,
            prompts,
            replay: Some(replay),
            files,
            sessions: None,
            notes,
        });
    }
    let prompts = if workload.basis == LengthBasis::Dataset {
        None
    } else {
        let builder = PromptBuilder::new(wl.seed, wl.shared_prefix_tokens as usize);
        let (words, counted) = if conn.resolved.tokenize {
            workload.basis = LengthBasis::Tokenize;
            let fits = fit_all(conn, &builder, &workload).await.map_err(PrepareError::PromptFit)?;
            fits.into_iter().map(|(w, n)| (w, Some(n))).unzip()
        } else {
            workload
                .items
                .iter()
                .map(|item| (item.target_tokens.unwrap_or(1) as usize, None))
                .unzip()
        };
        Some(Prompts { kind: PromptKind::Synthetic { builder, words, counted } })
    };
    let notes = workload_notes(workload.basis, endpoint);
    Ok(Prepared { workload, prompts, replay: None, files, sessions: None, notes })
}

/// Each item's `max_tokens`: its recorded answer's tokens, counted by the target's `/tokenize`
/// when it has one, else one per word.
async fn set_answer_lengths(
    conn: &Connection,
    workload: &mut Workload,
    answers: &[Option<String>],
) -> Result<(), RunError> {
    let (client, resolved) = (&conn.client, &conn.resolved);
    for (item, answer) in workload.items.iter_mut().zip(answers) {
        let Some(answer) = answer else { continue };
        item.max_tokens = if resolved.tokenize {
            let n = client
                .count_tokens(&resolved.root, &resolved.model, answer)
                .await
                .map_err(PrepareError::AnswerLength)?;
            n.max(1)
        } else {
            session::approximate_tokens(answer)
        };
    }
    Ok(())
}

/// Fit every synthetic item's prompt to its token target with the target's tokenizer
/// (eight requests at a time).
async fn fit_all(
    conn: &Connection,
    builder: &PromptBuilder,
    workload: &Workload,
) -> Result<Vec<(usize, u32)>, TokenizeError> {
    use futures_util::StreamExt;
    let (client, resolved) = (&conn.client, &conn.resolved);
    // Calibrate words per token once on a sample.
    let sample = builder.build(0, 0, 200);
    let n = client.count_tokens(&resolved.root, &resolved.model, &sample).await?;
    let words_per_token = 200.0 / n.max(1) as f64;
    // Each job owns what it uses (clients and builders are cheap to clone), which keeps the
    // future `Send` for any caller.
    let jobs: Vec<_> = workload
        .items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let (client, builder) = (client.clone(), builder.clone());
            let (root, model) = (resolved.root.clone(), resolved.model.clone());
            let target = item.target_tokens.unwrap_or(1);
            async move {
                let mut fit = PromptFit::new(target, words_per_token);
                while let Some(words) = fit.next_words() {
                    let text = builder.build(i as u64, i as u64, words);
                    fit.observe(client.count_tokens(&root, &model, &text).await?);
                }
                Ok::<_, TokenizeError>(fit.best().expect("at least one attempt"))
            }
        })
        .collect();
    let results: Vec<Result<(usize, u32), TokenizeError>> =
        futures_util::stream::iter(jobs).buffered(8).collect().await;
    results.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_say_how_prompt_lengths_were_set() {
        let approx = workload_notes(LengthBasis::Approximate, Endpoint::Completions);
        assert_eq!(approx.len(), 1);
        assert!(approx[0].starts_with("prompt lengths are approximate"));
        let chat = workload_notes(LengthBasis::Tokenize, Endpoint::Chat);
        assert_eq!(chat.len(), 1);
        assert!(chat[0].contains("chat template"));
        assert!(workload_notes(LengthBasis::Dataset, Endpoint::Chat).is_empty());
        assert!(workload_notes(LengthBasis::Tokenize, Endpoint::Completions).is_empty());
    }

    #[test]
    fn a_missing_dataset_names_its_path() {
        let wl = WorkloadConfig {
            dataset: Some("no/such/dataset.jsonl".into()),
            ..WorkloadConfig::default()
        };
        let load = LoadConfig::default();
        let e = load_workload(&wl, &load, Path::new("/nonexistent-root")).err().unwrap();
        assert!(matches!(e, PrepareError::DatasetRead { .. }));
        assert!(e.to_string().contains("/nonexistent-root/no/such/dataset.jsonl"), "{e}");
        let synthetic = load_workload(&WorkloadConfig::default(), &load, Path::new(".")).unwrap();
        assert_eq!(synthetic.workload.basis, LengthBasis::Approximate);
    }
}
