//! Step 2, prepare the workload: the dataset or the synthetic items, and for synthetic items
//! the prompt lengths fitted to the target's tokenizer (when it offers one).

use std::path::{Path, PathBuf};

use crate::client::TokenizeError;
use crate::config::{Endpoint, WorkloadConfig};
use crate::workload::{LengthBasis, PromptBuilder, PromptFit, Workload};

use super::RunError;
use super::connect::Connection;

/// The prompts of a synthetic workload: per item, the word count that fits its token target.
pub struct Prompts {
    builder: PromptBuilder,
    words: Vec<usize>,
    counted: Vec<Option<u32>>,
}

impl Prompts {
    /// The prompt request `request_id` sends for item `item`.
    pub fn text(&self, item: u64, request_id: u64) -> String {
        self.builder.build(item, request_id, self.words[item as usize])
    }

    /// The item's prompt tokens as the target's tokenizer counted them (None: not counted).
    pub fn counted_tokens(&self, item: u64) -> Option<u32> {
        self.counted[item as usize]
    }
}

/// Step 2's result: what the load will send, and notes on how its lengths were set.
pub struct Prepared {
    pub workload: Workload,
    /// For synthetic workloads (None for a dataset).
    pub prompts: Option<Prompts>,
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
    Dataset(#[from] crate::workload::DatasetError),
    #[error("cannot use the empirical length distribution")]
    Lengths(#[from] crate::lengths::LengthFileError),
    #[error("cannot fit the prompt lengths with the target's /tokenize")]
    PromptFit(#[source] TokenizeError),
}

fn resolve_path(root: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() { p.to_path_buf() } else { root.join(p) }
}

/// The workload a profile describes: its dataset (relative paths from `root`) or its
/// synthetic items.
pub fn load_workload(wl: &WorkloadConfig, root: &Path) -> Result<Workload, PrepareError> {
    match &wl.dataset {
        Some(path) => {
            let path = resolve_path(root, path);
            let text = std::fs::read_to_string(&path)
                .map_err(|source| PrepareError::DatasetRead { path: path.clone(), source })?;
            Ok(Workload::from_jsonl(&path, &text, wl)?)
        }
        None => {
            let sampler = |d: &Option<crate::config::LengthDist>, salt: u64| {
                d.as_ref().map(|d| d.sampler(root, wl.seed ^ salt)).transpose()
            };
            let input = sampler(&wl.input_distribution, 0)?;
            let output = sampler(&wl.output_distribution, 0x6f75_7470_7574)?;
            Ok(Workload::synthetic_with(wl, input, output))
        }
    }
}

/// Notes on how the prompt lengths of a workload were set.
pub fn workload_notes(basis: LengthBasis, endpoint: Endpoint) -> Vec<String> {
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

/// Prepare what a run sends to `conn`: load the workload and, for synthetic items, fit each
/// prompt to its token target with the target's tokenizer.
pub async fn prepare_workload(
    wl: &WorkloadConfig,
    endpoint: Endpoint,
    root: &Path,
    conn: &Connection,
) -> Result<Prepared, RunError> {
    let mut workload = load_workload(wl, root)?;
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
        Some(Prompts { builder, words, counted })
    };
    let notes = workload_notes(workload.basis, endpoint);
    Ok(Prepared { workload, prompts, notes })
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
        let e = load_workload(&wl, Path::new("/nonexistent-root")).unwrap_err();
        assert!(matches!(e, PrepareError::DatasetRead { .. }));
        assert!(e.to_string().contains("/nonexistent-root/no/such/dataset.jsonl"), "{e}");
        let synthetic = load_workload(&WorkloadConfig::default(), Path::new(".")).unwrap();
        assert_eq!(synthetic.basis, LengthBasis::Approximate);
    }
}
