//! `cargo xtask import FORMAT FILE --out DIR`: another tool's results (`vllm-bench`,
//! `guidellm`, `aiperf`) written as an infergate run directory (`infergate_model::foreign`): its
//! `summary.json` with the source's values and where they came from, and `requests.jsonl`
//! when the source holds per-request data, so `compare`, `gate`, trials' intervals and
//! `adr new` read it like a run infergate measured. docs/import.md.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use infergate_model::foreign::{self, Format};
use infergate_model::rundir;
use xshell::Shell;

use crate::exit::Status;

#[derive(Debug, Args)]
pub struct ImportCmd {
    /// The file's format: vllm-bench, guidellm or aiperf.
    #[arg(value_name = "FORMAT", value_parser = parse_format)]
    pub format: Format,
    /// The results file (`vllm bench serve --save-result` JSON, guidellm's benchmarks.json,
    /// AIPerf's profile_export_aiperf.json with profile_export.jsonl beside it).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The run directory to write (refused when it already holds a run).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// guidellm: which benchmark of the report (from 0), when it holds several.
    #[arg(long, value_name = "I")]
    pub benchmark: Option<usize>,
}

fn parse_format(s: &str) -> Result<Format, String> {
    Format::parse(s).map_err(|e| e.to_string())
}

impl ImportCmd {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        let root = sh.current_dir();
        let file = root.join(&self.file);
        let out = root.join(&self.out);
        let mut imported = foreign::import(self.format, &file, self.benchmark)?;
        // The files as the repository names them, not as this machine's absolute paths.
        for f in &mut imported.files {
            if let Ok(rel) = std::path::Path::new(&f.path).strip_prefix(&root) {
                f.path = rel.display().to_string();
            }
        }
        let summary = imported.summary();
        rundir::create(&out)
            .with_context(|| format!("cannot write the run to {}", out.display()))?;
        let written = (|| -> Result<(), rundir::RunDirError> {
            if let Some(records) = &imported.records {
                let mut w = rundir::RecordWriter::create(&out)?;
                for r in records {
                    w.write(r)?;
                }
                w.finish()?;
            }
            rundir::write_summary(&out, &summary).map(|_| ())
        })();
        rundir::release(&out);
        written.with_context(|| format!("cannot write the run to {}", out.display()))?;
        println!("{}", crate::run_report::render(&summary));
        let records = match &imported.records {
            Some(r) => format!("{} requests in {}", r.len(), rundir::REQUESTS_FILE),
            None => "no per-request data".to_string(),
        };
        println!(
            "imported {} ({}) into {} ({records})",
            self.file.display(),
            self.format.name(),
            self.out.display()
        );
        Ok(Status::Success)
    }
}
