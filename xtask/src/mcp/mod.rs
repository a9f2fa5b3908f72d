//! `cargo xtask mcp`: a Model Context Protocol server (the official Rust SDK, `rmcp`) over stdio,
//! or streamable HTTP on 127.0.0.1 with `--http PORT`, so that a coding agent runs the bench,
//! the gate and the record checks as tools with typed inputs and structured results
//! (docs/mcp.md).
//!
//! - [`tools`]: each tool's arguments and result types (their JSON Schemas) and what it runs;
//! - [`child`]: the measuring commands as child processes of this binary (progress,
//!   cancellation as Ctrl-C);
//! - [`progress`]: `notifications/progress` of a call;
//! - [`explain`]: `explain_record`, a record read with the records' parser.
//!
//! In stdio mode the server's stdout is the protocol channel: nothing else prints there (the
//! commands' output is captured from their own pipes). Every text a result carries passes the
//! bench's redaction ([`infergate_model::redact::Redactor`]) of the API keys the environment holds.

pub mod child;
pub mod explain;
pub mod progress;
pub mod tools;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use infergate_model::redact::Redactor;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::Serialize;
use xshell::Shell;

use self::child::Job;
use self::progress::Progress;
use self::tools::{
    AcceptArgs, AdrCheckArgs, AdrNewArgs, BenchArgs, CheckOutput, CommandOutput, CompareArgs,
    GateArgs, LintOutput, NoArgs,
};
use crate::exit::Status;

/// `cargo xtask mcp`.
#[derive(Debug, Args)]
pub struct McpCmd {
    /// Serve streamable HTTP on 127.0.0.1:PORT (path `/mcp`; 0 picks a free port, printed on
    /// stderr) instead of stdio.
    #[arg(long, value_name = "PORT")]
    pub http: Option<u16>,
}

impl McpCmd {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        let root = sh.current_dir();
        let rt = crate::measure::runtime()?;
        rt.block_on(async move {
            match self.http {
                Some(port) => serve_http(root, port).await,
                None => serve_stdio(root).await,
            }
        })?;
        Ok(Status::Success)
    }
}

async fn serve_stdio(root: PathBuf) -> anyhow::Result<()> {
    let service = Server { root }
        .serve(rmcp::transport::stdio())
        .await
        .context("cannot start the MCP server on stdio")?;
    service.waiting().await.context("the MCP server stopped")?;
    Ok(())
}

async fn serve_http(root: PathBuf, port: u16) -> anyhow::Result<()> {
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    };
    let service = StreamableHttpService::new(
        move || Ok(Server { root: root.clone() }),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .with_context(|| format!("cannot listen on 127.0.0.1:{port}"))?;
    let addr = listener.local_addr().context("cannot read the listening address")?;
    eprintln!("MCP server on http://{addr}/mcp (streamable HTTP); Ctrl-C stops it");
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("the MCP server stopped")
}

/// The server of one repository.
#[derive(Clone)]
pub struct Server {
    root: PathBuf,
}

/// What a tool does to the repository, for its annotations.
#[derive(Clone, Copy)]
enum Writes {
    Nothing,
    Target,
    Records,
}

fn tool<A: JsonSchema + 'static, O: JsonSchema + 'static>(
    name: &'static str,
    description: &'static str,
    writes: Writes,
) -> Tool {
    let annotations = match writes {
        Writes::Nothing => ToolAnnotations::new().read_only(true),
        Writes::Target => ToolAnnotations::new().read_only(false).destructive(false),
        Writes::Records => {
            ToolAnnotations::new().read_only(false).destructive(false).idempotent(false)
        }
    };
    Tool::new(name, description, Arc::new(serde_json::Map::new()))
        .with_input_schema::<A>()
        .with_output_schema::<O>()
        .with_annotations(annotations.open_world(false))
}

/// The tools, in the order they are listed.
pub fn tools() -> Vec<Tool> {
    use self::explain::{ExplainArgs, Explanation};
    vec![
        tool::<BenchArgs, CommandOutput>(
            "bench",
            "Measure a bench profile of configs/bench.toml (the embedded simulator unless it \
             names a target), as `cargo xtask bench`. Writes a run directory (or a trial set \
             with `trials`) under target/mcp/; returns its summary.json (or trials.json). Sends \
             progress notifications; cancelling stops the run as Ctrl-C does (what was measured \
             is written, status `interrupted`).",
            Writes::Target,
        ),
        tool::<GateArgs, CommandOutput>(
            "gate",
            "Gate a run, trial set, sweep or comparison against the live records' thresholds \
             (`run`), or run an A/B gate of the base revision's engine config against the \
             working tree's (`ab`), as `cargo xtask gate`. Writes the gate's report \
             (target/mcp/gate-*, JSON) or the A/B gate's directory (target/mcp/gate-ab-*, \
             ab.json); returns it. The exit code says the verdict: 0 pass, 1 fail, 3 undecided. \
             The gate of a trial set and the A/B gate also append to the noise history, the git \
             ref refs/infergate/history, as the command does (`no_history`: not).",
            Writes::Target,
        ),
        tool::<CompareArgs, CommandOutput>(
            "compare",
            "Compare two runs or trial sets metric by metric with intervals and significance, \
             as `cargo xtask compare`. Writes target/mcp/compare-*.json; returns it.",
            Writes::Target,
        ),
        tool::<AdrNewArgs, CommandOutput>(
            "adr_new",
            "Draft the next decision record from measured runs, as `cargo xtask adr new`. \
             Writes docs/adr/NNNN-<title>.md (status Proposed) and its charts under \
             docs/adr/assets/; returns the new record as explain_record reads it.",
            Writes::Records,
        ),
        tool::<NoArgs, LintOutput>(
            "adr_lint",
            "Check every decision record in docs/adr against the format rules, as `cargo xtask \
             adr lint`. Writes nothing.",
            Writes::Nothing,
        ),
        tool::<AdrCheckArgs, CheckOutput>(
            "adr_check",
            "The pull-request rule, as `cargo xtask adr check`: fails when a governed inference \
             parameter changed between the merge base of `base` and `head` without a new \
             record naming its new value. Reads git commits only; writes nothing.",
            Writes::Nothing,
        ),
        tool::<AcceptArgs, CommandOutput>(
            "accept",
            "Accept a candidate engine against a baseline (numeric, engine and business \
             layers), as `cargo xtask accept`: needs both targets running and a build with the \
             `acceptance` feature. Writes target/mcp/accept-*/; returns acceptance.json. Sends \
             progress notifications; cancellable.",
            Writes::Target,
        ),
        tool::<ExplainArgs, Explanation>(
            "explain_record",
            "What a decision record fixes and why: its status, context and decision, the \
             governed parameters, thresholds, budgets and rollback conditions it sets. Writes \
             nothing.",
            Writes::Nothing,
        ),
    ]
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("infergate", infergate_model::TOOL_VERSION))
            .with_instructions(
                "infergate: measure an inference config (bench), gate it against the accepted \
                 decision records (gate), and check that a change of a governed parameter has \
                 its record (adr_check, adr_new). Results hold the JSON of the files written.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = serde_json::Value::Object(request.arguments.clone().unwrap_or_default());
        let progress = Progress::new(context.peer.clone(), context.meta.get_progress_token());
        let ct = context.ct.clone();
        let cancel: Cancelled = Box::pin(async move { ct.cancelled().await });
        let call = Call { server: self, progress, cancel: Some(cancel) };
        match request.name.as_ref() {
            "bench" => call.bench(parse(args)?).await,
            "gate" => call.gate(parse(args)?).await,
            "compare" => call.compare(parse(args)?).await,
            "adr_new" => call.adr_new(parse(args)?).await,
            "accept" => call.accept(parse(args)?).await,
            "adr_lint" => {
                let _: NoArgs = parse(args)?;
                self.in_server(tools::lint, lint_text)
            }
            "adr_check" => {
                let a: AdrCheckArgs = parse(args)?;
                self.in_server(|root| tools::check(root, &a), |o| o.report.clone())
            }
            "explain_record" => {
                let a: self::explain::ExplainArgs = parse(args)?;
                self.in_server(|root| Ok(explain::explain(root, &a.record)?), explain_text)
            }
            other => {
                let names: Vec<String> = tools().iter().map(|t| t.name.to_string()).collect();
                Err(McpError::invalid_params(
                    format!("unknown tool `{other}`; the tools are {}", names.join(", ")),
                    None,
                ))
            }
        }
    }
}

/// Arguments that do not match the tool's input schema: a JSON-RPC invalid-params error.
fn parse<T: serde::de::DeserializeOwned>(args: serde_json::Value) -> Result<T, McpError> {
    serde_json::from_value(args)
        .map_err(|e| McpError::invalid_params(format!("invalid arguments: {e}"), None))
}

impl Server {
    /// A tool that runs in the server (it only reads): its result, or an error result that
    /// says why it could not run.
    fn in_server<O: Serialize>(
        &self,
        run: impl FnOnce(&Path) -> anyhow::Result<O>,
        text: impl FnOnce(&O) -> String,
    ) -> Result<CallToolResponse, McpError> {
        let redactor = secrets(&self.root);
        match run(&self.root) {
            Ok(out) => respond(&redactor, text(&out), &out, false),
            Err(e) => Ok(error_result(&redactor, &format!("{e:#}"))),
        }
    }
}

/// One call of a command tool.
struct Call<'a> {
    server: &'a Server,
    progress: Progress,
    /// Resolves when the client cancels the call (`notifications/cancelled`); taken by the one
    /// command the call runs.
    cancel: Option<Cancelled>,
}

type Cancelled = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// How a command tool reads back what its command wrote: the file's JSON, `None` when the
/// command wrote nothing there.
type ReadBack = fn(&Path) -> Result<Option<serde_json::Value>, String>;

impl Call<'_> {
    async fn bench(self, a: BenchArgs) -> Result<CallToolResponse, McpError> {
        let out = tools::out_path("bench");
        self.command("bench", a.job(&out), Some(out), read_bench).await
    }

    async fn gate(self, a: GateArgs) -> Result<CallToolResponse, McpError> {
        let (out, read): (PathBuf, ReadBack) = if a.ab.is_some() {
            (tools::out_path("gate-ab"), read_ab)
        } else {
            (tools::out_path("gate").with_extension("json"), read_gate)
        };
        match a.job(&out) {
            Ok(job) => self.command("gate", job, Some(out), read).await,
            Err(why) => Ok(error_result(&secrets(&self.server.root), &why.to_string())),
        }
    }

    async fn compare(self, a: CompareArgs) -> Result<CallToolResponse, McpError> {
        let out = tools::out_path("compare").with_extension("json");
        self.command("compare", a.job(&out), Some(out), read_compare).await
    }

    async fn accept(self, a: AcceptArgs) -> Result<CallToolResponse, McpError> {
        let out = tools::out_path("accept");
        self.command("accept", a.job(&out), Some(out), read_accept).await
    }

    async fn adr_new(mut self, a: AdrNewArgs) -> Result<CallToolResponse, McpError> {
        let root = self.server.root.clone();
        let before = record_files(&root);
        let job = a.job();
        let redactor = secrets(&root);
        let command = job.command_line(&redactor);
        self.progress.start(&command).await;
        let done = self.run(&job, &redactor).await?;
        let new = record_files(&root).into_iter().find(|p| !before.contains(p));
        let result = match &new {
            Some(p) => explain::explain(&root, &p.to_string_lossy())
                .ok()
                .and_then(|e| serde_json::to_value(e).ok()),
            None => None,
        };
        let out = CommandOutput::new(command, &done, new.as_deref(), result);
        respond(&redactor, out.text("adr new"), &out, out.is_error())
    }

    /// Run `job`, writing `out` (relative to the root), and return its output with the JSON
    /// `read` finds there.
    async fn command(
        mut self,
        what: &str,
        job: Job,
        out: Option<PathBuf>,
        read: ReadBack,
    ) -> Result<CallToolResponse, McpError> {
        let root = &self.server.root;
        let redactor = secrets(root);
        let command = job.command_line(&redactor);
        let writes = out.as_ref().map(|o| format!(" (writes {})", o.display())).unwrap_or_default();
        self.progress.start(&format!("{command}{writes}")).await;
        let mut done = self.run(&job, &redactor).await?;
        let result = match &out {
            Some(o) => read(&root.join(o)).unwrap_or_else(|e| {
                done.stderr.push_str(&format!("\n{}\n", redactor.redact(&e)));
                None
            }),
            None => None,
        };
        let wrote = if result.is_some() { out.as_deref() } else { None };
        let output = CommandOutput::new(command, &done, wrote, result);
        respond(&redactor, output.text(what), &output, output.is_error())
    }

    async fn run(&mut self, job: &Job, redactor: &Redactor) -> Result<child::Finished, McpError> {
        let cancel: Cancelled =
            self.cancel.take().unwrap_or_else(|| Box::pin(std::future::pending()));
        job.run(&self.server.root, redactor, &self.progress, cancel)
            .await
            .map_err(|e| McpError::internal_error(redactor.redact(&format!("{e:#}")), None))
    }
}

fn read_bench(dir: &Path) -> Result<Option<serde_json::Value>, String> {
    if dir.join(infergate_model::trials::TRIALS_FILE).is_file() {
        let t = infergate_model::trials::TrialsFile::read(dir).map_err(|e| format!("{e:#}"))?;
        return serde_json::to_value(t).map(Some).map_err(|e| e.to_string());
    }
    if !dir.join(infergate_model::rundir::SUMMARY_FILE).is_file() {
        return Ok(None);
    }
    let s = infergate_model::Summary::read(dir).map_err(|e| format!("{e:#}"))?;
    serde_json::to_value(s).map(Some).map_err(|e| e.to_string())
}

fn read_artifact<A: infergate_model::artifact::Artifact>(
    path: &Path,
) -> Result<Option<serde_json::Value>, String> {
    if !infergate_model::artifact::file_of::<A>(path).is_file() {
        return Ok(None);
    }
    let a = infergate_model::artifact::read::<A>(path).map_err(|e| e.to_string())?;
    serde_json::to_value(a).map(Some).map_err(|e| e.to_string())
}

fn read_gate(file: &Path) -> Result<Option<serde_json::Value>, String> {
    read_artifact::<crate::thresholds::report_file::GateFile>(file)
}

fn read_ab(dir: &Path) -> Result<Option<serde_json::Value>, String> {
    read_artifact::<infergate_model::ab::file::AbFile>(dir)
}

fn read_compare(file: &Path) -> Result<Option<serde_json::Value>, String> {
    read_artifact::<infergate_model::compare::Comparison>(file)
}

fn read_accept(dir: &Path) -> Result<Option<serde_json::Value>, String> {
    read_artifact::<bench::accept::AcceptanceReport>(dir)
}

/// The record files of the repository (relative paths).
fn record_files(root: &Path) -> Vec<PathBuf> {
    crate::adr::read_records(root, Path::new(crate::adr::ADR_DIR))
        .map(|r| r.into_iter().map(|(p, _)| p).collect())
        .unwrap_or_default()
}

/// The secrets a result must not hold: the API keys and secret headers the bench config's
/// targets read from the environment, the passwords in their URLs, and any environment
/// variable whose name ends in `API_KEY`.
fn secrets(root: &Path) -> Redactor {
    use infergate_model::config::bench::HeaderValue;
    let mut vars: Vec<String> =
        std::env::vars().map(|(k, _)| k).filter(|k| k.ends_with("API_KEY")).collect();
    let mut found = Vec::new();
    if let Ok(cfg) =
        infergate_model::config::BenchConfig::load_in(root, Path::new(crate::settings::BENCH_FILE))
    {
        for t in cfg.file.targets.values() {
            vars.extend(t.api_key_env.clone());
            vars.extend(t.headers.values().filter_map(|h| match h {
                HeaderValue::Env { env } => Some(env.clone()),
                HeaderValue::Literal(_) => None,
            }));
            found.extend(Redactor::url_secrets(&t.base_url));
        }
    }
    found.extend(vars.iter().filter_map(|v| std::env::var(v).ok()));
    Redactor::new(found)
}

/// A result: the text, then the structured JSON (also as text, for clients that read only
/// text), every text redacted.
fn respond<O: Serialize>(
    redactor: &Redactor,
    text: String,
    out: &O,
    is_error: bool,
) -> Result<CallToolResponse, McpError> {
    let value = serde_json::to_value(out)
        .map_err(|e| McpError::internal_error(format!("cannot serialise the result: {e}"), None))?;
    let value = redactor.redact_json(&value);
    let mut r = CallToolResult::success(vec![
        ContentBlock::text(redactor.redact(&text)),
        ContentBlock::text(value.to_string()),
    ]);
    r.structured_content = Some(value);
    r.is_error = Some(is_error);
    Ok(r.into())
}

/// A tool that could not run (a bad path, arguments that contradict each other): an error
/// result with the reason, which the agent can act on.
fn error_result(redactor: &Redactor, why: &str) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(redactor.redact(&format!("error: {why}")))])
        .into()
}

fn lint_text(o: &LintOutput) -> String {
    let mut t = format!(
        "adr lint: {} records, {}",
        o.records,
        if o.passed { "no problems".to_string() } else { format!("{} problems", o.problems.len()) }
    );
    for p in &o.problems {
        t.push_str(&format!("\n{}:{}: {}", p.path, p.line, p.message));
    }
    t
}

fn explain_text(e: &explain::Explanation) -> String {
    let mut t = format!(
        "{} ({}, {}): {}",
        e.title.as_deref().unwrap_or(&e.path),
        e.status.as_deref().unwrap_or("no status"),
        if e.live { "live" } else { "not live" },
        e.context.lines().next().unwrap_or_default()
    );
    for p in &e.parameters {
        t.push_str(&format!(
            "\nfixes {}: {} = {}",
            p.file,
            p.key,
            p.value.as_deref().unwrap_or("(removed)")
        ));
    }
    for th in &e.thresholds {
        t.push_str(&format!(
            "\ngates {} {} {} {} ({})",
            th.metric, th.comparator, th.limit, th.unit, th.action
        ));
    }
    for r in &e.rollback_conditions {
        t.push_str(&format!("\nroll back: {}", r.condition));
    }
    t
}
