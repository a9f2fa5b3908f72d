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
//! commands' output is captured from their own pipes). Its transport ([`lines`]) reads one message
//! a line, each line at most [`lines::MAX_LINE`] bytes: a longer line is skipped unread and
//! answered with a JSON-RPC error, as is a line of JSON that is no JSON-RPC message (its `id`
//! echoed). Over HTTP, requests whose `Host` is not a loopback name or whose `Origin` is neither a
//! loopback origin nor one given with `--allow-origin` are refused with 403 (DNS rebinding). Every
//! text a result carries passes the bench's redaction ([`infergate_model::redact::Redactor`]) of
//! the API keys the environment holds.

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
    /// With `--http`: also serve browser pages of this origin (`https://app.example`,
    /// `http://app.example:8080`, `http://app.example:*` for any port); repeatable. Requests
    /// without an `Origin` header and from loopback origins (`http(s)://127.0.0.1`, `localhost`,
    /// `[::1]`, any port) are always served; any other origin gets 403.
    #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http", value_parser = parse_origin)]
    pub allow_origins: Vec<String>,
}

impl McpCmd {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        let root = sh.current_dir();
        let rt = crate::measure::runtime()?;
        rt.block_on(async move {
            match self.http {
                Some(port) => serve_http(root, port, self.allow_origins).await,
                None => serve_stdio(root).await,
            }
        })?;
        Ok(Status::Success)
    }
}

async fn serve_stdio(root: PathBuf) -> anyhow::Result<()> {
    let (stdin, stdout) = rmcp::transport::stdio();
    let service = Server { root }
        .serve(lines::LineTransport::new(stdin, stdout, lines::MAX_LINE))
        .await
        .context("cannot start the MCP server on stdio")?;
    service.waiting().await.context("the MCP server stopped")?;
    Ok(())
}

/// The `Host` names the HTTP transport answers to: the loopback address it binds, by name and
/// by number (any port).
const LOOPBACK_HOSTS: [&str; 3] = ["127.0.0.1", "localhost", "::1"];

/// The browser origins always served: the loopback hosts over http and https, any port.
fn loopback_origins() -> Vec<String> {
    let hosts = ["127.0.0.1", "localhost", "[::1]"];
    ["http", "https"]
        .iter()
        .flat_map(|scheme| hosts.iter().map(move |host| format!("{scheme}://{host}:*")))
        .collect()
}

/// An `--allow-origin` value: `http` or `https`, a host and a port (`:*` for any), nothing
/// else; without a port the scheme's (80, 443), as browsers leave it out. The origin as the
/// transport's allow list takes it.
fn parse_origin(value: &str) -> Result<String, String> {
    let why = |what: &str| {
        format!(
            "`{value}` is not an origin ({what}): give a scheme, a host and optionally a port, \
             as a browser sends it in `Origin` (`https://app.example`, `http://app.example:8080`, \
             `http://app.example:*` for any port)"
        )
    };
    let (scheme, rest) = value.split_once("://").ok_or_else(|| why("no `scheme://`"))?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return Err(why("the scheme is not http or https")),
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.contains(['/', '?', '#', '@']) {
        return Err(why("an origin has no path, query, fragment or user"));
    }
    let (authority, any_port) = match authority.strip_suffix(":*") {
        Some(a) => (a, true),
        None => (authority, false),
    };
    if authority.is_empty() {
        return Err(why("no host"));
    }
    let parsed = axum::http::uri::Authority::try_from(authority)
        .map_err(|e| why(&format!("the host does not parse: {e}")))?;
    let host = parsed.host();
    let port_text = authority[host.len()..].strip_prefix(':');
    if port_text.is_some_and(|p| parsed.port_u16().map(|n| n.to_string()).as_deref() != Some(p)) {
        return Err(why("the port is not a number"));
    }
    if any_port && parsed.port().is_some() {
        return Err(why("a port and `:*`"));
    }
    let port = match (any_port, parsed.port_u16()) {
        (true, _) => "*".to_string(),
        (false, Some(p)) => p.to_string(),
        (false, None) => default_port.to_string(),
    };
    Ok(format!("{scheme}://{}:{port}", host.to_ascii_lowercase()))
}

async fn serve_http(root: PathBuf, port: u16, allow_origins: Vec<String>) -> anyhow::Result<()> {
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    };
    let mut origins = loopback_origins();
    origins.extend(allow_origins);
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(LOOPBACK_HOSTS)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_max_request_body_bytes(lines::MAX_LINE);
    let service = StreamableHttpService::new(
        move || Ok(Server { root: root.clone() }),
        Arc::new(LocalSessionManager::default()),
        config,
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
             with `trials`) under target/mcp/; returns its summary.json (or trials.json). With \
             `capacity`, searches the highest load at which the profile's goodput SLO holds \
             (`bench --capacity`) and returns capacity.json: the bracket [pass, fail), each \
             probe's attainment with its interval; exit 0 a load held the SLO, 1 none did, 3 \
             none was decided. Sends progress notifications; cancelling stops the run as Ctrl-C \
             does (what was measured is written, status `interrupted`).",
            Writes::Target,
        ),
        tool::<GateArgs, CommandOutput>(
            "gate",
            "Gate a run, trial set, sweep or comparison against the live records' thresholds \
             (`run`), as `cargo xtask gate`, or measure and gate the base revision's engine \
             config against the working tree's (`ab`), as `cargo xtask bench ab`. Writes the gate's report \
             (target/mcp/gate-*, JSON) or the A/B gate's directory (target/mcp/gate-ab-*, \
             ab.json); returns it. The exit code says the verdict: 0 pass, 1 fail, 3 undecided. \
             A threshold bound to a load (\"holds the SLO at concurrency 24\", from a capacity \
             search) is decided on a run at that load and reported as `not_applicable`, with the \
             reason and the command that measures its load, on a run at another. \
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
            "acceptance",
            "Accept a candidate engine against a baseline (numeric, engine and business \
             layers), as `cargo xtask acceptance`: needs both targets running and a build with the \
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
            // `accept`: the tool's name before `acceptance`, for one release.
            "acceptance" | "accept" => call.accept(parse(args)?).await,
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
        self.command("acceptance", a.job(&out), Some(out), read_accept).await
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
    if infergate_model::capacity::is_capacity_dir(dir) {
        return read_artifact::<infergate_model::capacity::CapacityFile>(dir);
    }
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
    infergate_policy::adr::read_records(root, Path::new(infergate_policy::adr::ADR_DIR))
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

/// The stdio transport: one JSON-RPC message a line on stdin, one a line on stdout, as rmcp's
/// own, but bounded and answering what it cannot deliver. A line longer than [`MAX_LINE`] bytes
/// is skipped without being held (memory stays bounded) and answered with `-32600`, echoing the
/// request's `id` when one is among its first [`ID_PREFIX`] bytes; a line of JSON that is no
/// JSON-RPC message is answered with `-32600` and its `id` (rmcp's transport answers both
/// without an `id`, or not at all). A line that is not JSON, or an invalid notification, gets no
/// answer: it has no `id` to answer, and answering unreadable input invites an echo loop.
pub mod lines {
    use std::future::Future;
    use std::sync::Arc;

    use rmcp::RoleServer;
    use rmcp::model::{ErrorData, NumberOrString, RequestId};
    use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
    use rmcp::transport::Transport;
    use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
    use tokio::sync::{Mutex, mpsc};

    /// The longest line read: 16 MiB, as rmcp's own stdio transport.
    pub const MAX_LINE: usize = 16 * 1024 * 1024;
    /// The bytes of an over-long line kept to find its `id`.
    pub const ID_PREFIX: usize = 64 * 1024;
    /// Messages read ahead of the server (reading waits while they are not taken).
    const READ_AHEAD: usize = 16;

    type Incoming = RxJsonRpcMessage<RoleServer>;
    type Outgoing = TxJsonRpcMessage<RoleServer>;

    /// Messages read from `R` and written to `W`, a line each.
    pub struct LineTransport<W> {
        incoming: mpsc::Receiver<Incoming>,
        out: Arc<Mutex<W>>,
        reader: tokio::task::JoinHandle<()>,
    }

    impl<W: AsyncWrite + Unpin + Send + 'static> LineTransport<W> {
        /// Read `input` (lines of at most `max_line` bytes) on a task of its own; answers go to
        /// `output`.
        pub fn new<R: AsyncRead + Unpin + Send + 'static>(
            input: R,
            output: W,
            max_line: usize,
        ) -> LineTransport<W> {
            let out = Arc::new(Mutex::new(output));
            let (tx, incoming) = mpsc::channel(READ_AHEAD);
            let reader = tokio::spawn(read(Lines::new(input, max_line), tx, out.clone()));
            LineTransport { incoming, out, reader }
        }
    }

    impl<W> Drop for LineTransport<W> {
        fn drop(&mut self) {
            self.reader.abort();
        }
    }

    impl<W: AsyncWrite + Unpin + Send + 'static> Transport<RoleServer> for LineTransport<W> {
        type Error = std::io::Error;

        fn send(
            &mut self,
            item: Outgoing,
        ) -> impl Future<Output = std::io::Result<()>> + Send + 'static {
            let out = self.out.clone();
            async move { write(&out, &item).await }
        }

        async fn receive(&mut self) -> Option<Incoming> {
            self.incoming.recv().await
        }

        async fn close(&mut self) -> std::io::Result<()> {
            self.reader.abort();
            self.out.lock().await.flush().await
        }
    }

    /// One message and its newline, whole (the lock keeps messages from interleaving).
    async fn write<W: AsyncWrite + Unpin>(
        out: &Mutex<W>,
        message: &Outgoing,
    ) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(message).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let mut out = out.lock().await;
        out.write_all(&line).await?;
        out.flush().await
    }

    /// Until the input ends (or the server stops taking messages, or the output is gone): each
    /// message to the server, each answer of the transport's own to the output.
    async fn read<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
        mut lines: Lines<R>,
        tx: mpsc::Sender<Incoming>,
        out: Arc<Mutex<W>>,
    ) {
        loop {
            let answer = match lines.next().await {
                Ok(Line::Whole(line)) => match decode(&line) {
                    Decoded::Message(m) => {
                        if tx.send(*m).await.is_err() {
                            return;
                        }
                        continue;
                    }
                    Decoded::Unanswered => continue,
                    Decoded::Invalid(answer) => *answer,
                },
                Ok(Line::TooLong { start }) => too_long(&start, lines.max),
                Ok(Line::End) => return,
                Err(e) => {
                    eprintln!("error: cannot read the MCP client's messages on stdin: {e}");
                    return;
                }
            };
            if write(&out, &answer).await.is_err() {
                return;
            }
        }
    }

    /// What one line holds.
    #[derive(Debug, PartialEq)]
    pub enum Line {
        /// A line (without its newline) of at most the limit's bytes.
        Whole(Vec<u8>),
        /// A longer line: its first [`ID_PREFIX`] bytes; the rest was read past, not kept.
        TooLong { start: Vec<u8> },
        /// The input ended.
        End,
    }

    /// The lines of an input, each at most `max` bytes held.
    pub struct Lines<R> {
        input: BufReader<R>,
        max: usize,
    }

    impl<R: AsyncRead + Unpin> Lines<R> {
        pub fn new(input: R, max: usize) -> Lines<R> {
            Lines { input: BufReader::new(input), max }
        }

        /// The next line; the last one may end without a newline.
        pub async fn next(&mut self) -> std::io::Result<Line> {
            let mut line = Vec::new();
            let mut too_long = false;
            loop {
                let available = self.input.fill_buf().await?;
                if available.is_empty() {
                    return Ok(match (too_long, line.is_empty()) {
                        (true, _) => Line::TooLong { start: line },
                        (false, true) => Line::End,
                        (false, false) => Line::Whole(line),
                    });
                }
                let newline = available.iter().position(|&b| b == b'\n');
                let text = &available[..newline.unwrap_or(available.len())];
                if !too_long && line.len() + text.len() > self.max {
                    too_long = true;
                    line.truncate(ID_PREFIX);
                    line.shrink_to_fit();
                }
                let room = if too_long { ID_PREFIX.saturating_sub(line.len()) } else { text.len() };
                line.extend_from_slice(&text[..room.min(text.len())]);
                let used = newline.map_or(available.len(), |i| i + 1);
                self.input.consume(used);
                if newline.is_some() {
                    return Ok(if too_long {
                        Line::TooLong { start: line }
                    } else {
                        Line::Whole(line)
                    });
                }
            }
        }
    }

    /// What the server gets of a line, or what the transport answers itself.
    enum Decoded {
        Message(Box<Incoming>),
        Invalid(Box<Outgoing>),
        Unanswered,
    }

    const BOM: &[u8] = b"\xEF\xBB\xBF";

    fn decode(line: &[u8]) -> Decoded {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = line.strip_prefix(BOM).unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return Decoded::Unanswered;
        }
        let error = match serde_json::from_slice::<Incoming>(line) {
            Ok(m) => return Decoded::Message(Box::new(m)),
            Err(e) => e,
        };
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(line) else {
            return Decoded::Unanswered;
        };
        let id = value.get("id").and_then(request_id);
        if id.is_none() && value.get("method").is_some() {
            // A notification: JSON-RPC never answers one.
            return Decoded::Unanswered;
        }
        Decoded::Invalid(Box::new(invalid(
            id,
            format!(
                "Invalid request: not a JSON-RPC 2.0 request, notification or response of the \
                 Model Context Protocol (`\"jsonrpc\": \"2.0\"`, an `id`, a `method` and its \
                 `params` object): {error}"
            ),
        )))
    }

    /// The answer to a line over the limit.
    fn too_long(start: &[u8], max: usize) -> Outgoing {
        invalid(
            leading_id(start),
            format!(
                "Invalid request: the message is longer than {max} bytes, the most one line may \
                 hold; it was skipped unread"
            ),
        )
    }

    fn invalid(id: Option<RequestId>, message: String) -> Outgoing {
        Outgoing::error(ErrorData::invalid_request(message, None), id)
    }

    /// A JSON-RPC id: a string or an integer.
    fn request_id(v: &serde_json::Value) -> Option<RequestId> {
        match v {
            serde_json::Value::String(s) => Some(NumberOrString::String(s.as_str().into())),
            serde_json::Value::Number(n) => n.as_i64().map(NumberOrString::Number),
            _ => None,
        }
    }

    /// The `id` of the message `start` begins, when it is a member of the top-level object
    /// before the text ends (members are read past one by one, none of them kept).
    pub fn leading_id(start: &[u8]) -> Option<RequestId> {
        let mut rest = skip_space(start).strip_prefix(b"{")?;
        loop {
            let (key, after) = json_value::<String>(rest)?;
            rest = skip_space(after).strip_prefix(b":")?;
            if key == "id" {
                let (id, after) = json_value::<serde_json::Value>(rest)?;
                // A number is whole only when something follows it.
                matches!(skip_space(after).first(), Some(b',' | b'}')).then_some(())?;
                return request_id(&id);
            }
            let (_, after) = json_value::<serde::de::IgnoredAny>(rest)?;
            rest = skip_space(after).strip_prefix(b",")?;
        }
    }

    /// The JSON value `text` starts with, and the text after it.
    fn json_value<T: serde::de::DeserializeOwned>(text: &[u8]) -> Option<(T, &[u8])> {
        let mut values = serde_json::Deserializer::from_slice(text).into_iter::<T>();
        let value = values.next()?.ok()?;
        Some((value, &text[values.byte_offset()..]))
    }

    fn skip_space(text: &[u8]) -> &[u8] {
        let n = text.iter().take_while(|b| b.is_ascii_whitespace()).count();
        &text[n..]
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn lines_of(input: &[u8], max: usize) -> Vec<Line> {
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            rt.block_on(async {
                let mut lines = Lines::new(input, max);
                let mut all = Vec::new();
                loop {
                    let line = lines.next().await.unwrap();
                    if line == Line::End {
                        return all;
                    }
                    all.push(line);
                }
            })
        }

        #[test]
        fn a_line_over_the_limit_is_skipped_keeping_only_its_start() {
            let long = format!("{{\"id\":7,\"x\":\"{}\"}}", "a".repeat(ID_PREFIX * 3));
            let input = format!("short\n{long}\n{}\nlast", "b".repeat(ID_PREFIX * 3));
            let lines = lines_of(input.as_bytes(), ID_PREFIX * 3);
            assert_eq!(lines.len(), 4);
            assert_eq!(lines[0], Line::Whole(b"short".to_vec()));
            let Line::TooLong { start } = &lines[1] else { panic!("{:?}", lines[1]) };
            assert_eq!((start.len(), &start[..8]), (ID_PREFIX, &b"{\"id\":7,"[..]));
            assert_eq!(lines[2], Line::Whole(vec![b'b'; ID_PREFIX * 3]), "exactly the limit");
            assert_eq!(lines[3], Line::Whole(b"last".to_vec()), "the last line needs no newline");
            let over_at_the_end = lines_of(&[b'c'; 40], 39);
            assert!(matches!(&over_at_the_end[..], [Line::TooLong { start }] if start.len() == 40));
        }

        #[test]
        fn the_id_is_found_at_the_start_of_a_message() {
            let id = |s: &str| leading_id(s.as_bytes());
            assert_eq!(
                id(r#"{"jsonrpc":"2.0","id":7,"method":"x","params":{"a""#),
                Some(NumberOrString::Number(7))
            );
            assert_eq!(
                id(r#" { "method" : "tools/call" , "id" : "s-1" , "params": [1, 2"#),
                Some(NumberOrString::String("s-1".into()))
            );
            assert_eq!(
                id(r#"{"params":{"nested":{"id":3}},"id":4,"#),
                Some(NumberOrString::Number(4))
            );
            assert_eq!(id(r#"{"method":"x","params":{"long"#), None, "the id comes after the cut");
            assert_eq!(id(r#"{"jsonrpc":"2.0","id":12"#), None, "a number cut short");
            assert_eq!(id(r#"{"id":1.5,"method":"x"}"#), None);
            assert_eq!(id(r#"[{"id":1}]"#), None);
        }

        #[test]
        fn json_that_is_no_message_is_answered_with_its_id_and_notifications_are_not() {
            let answer = |line: &str| match decode(line.as_bytes()) {
                Decoded::Invalid(a) => Some(serde_json::to_value(*a).unwrap()),
                Decoded::Message(_) => panic!("{line} is a message"),
                Decoded::Unanswered => None,
            };
            let a =
                answer(r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":"x"}"#).unwrap();
            assert_eq!((a["id"].clone(), a["error"]["code"].clone()), (9.into(), (-32600).into()));
            let a = answer(r#"{"jsonrpc":"1.0","id":"s","method":"ping"}"#).unwrap();
            assert_eq!(a["id"], "s");
            assert_eq!(answer("[1,2]").unwrap().get("id"), None, "no id to echo");
            assert_eq!(answer(r#"{"jsonrpc":"2.0","method":"tools/call","params":"x"}"#), None);
            assert_eq!(answer("not json"), None);
            assert_eq!(answer("  \r"), None);
            assert!(matches!(
                decode(b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r"),
                Decoded::Message(_)
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allowed_origin_is_a_scheme_a_host_and_a_port() {
        let ok = |v: &str| parse_origin(v).unwrap_or_else(|e| panic!("{v}: {e}"));
        assert_eq!(ok("https://App.Example"), "https://app.example:443");
        assert_eq!(ok("http://app.example/"), "http://app.example:80");
        assert_eq!(ok("http://app.example:8080"), "http://app.example:8080");
        assert_eq!(ok("HTTP://app.example:*"), "http://app.example:*");
        assert_eq!(ok("http://[::1]:3000"), "http://[::1]:3000");
        for (bad, why) in [
            ("app.example", "no `scheme://`"),
            ("ftp://app.example", "not http or https"),
            ("https://app.example/path", "no path"),
            ("https://user@app.example", "no path, query, fragment or user"),
            ("https://app.example:8080:*", "a port and `:*`"),
            ("https://", "no host"),
            ("https://app.example:port", "the port is not a number"),
            ("https://app.example:", "the port is not a number"),
            ("https://a b", "does not parse"),
        ] {
            let e = parse_origin(bad).unwrap_err();
            assert!(e.contains(why) && e.starts_with(&format!("`{bad}` is not an origin")), "{e}");
        }
        assert!(loopback_origins().contains(&"https://[::1]:*".to_string()));
    }

    #[test]
    fn allow_origin_goes_with_http() {
        use clap::Parser;
        let parse = |args: &[&str]| {
            crate::Cli::try_parse_from(["cargo xtask", "mcp"].iter().chain(args)).map(|c| c.command)
        };
        let Ok(crate::Command::Mcp(m)) = parse(&[
            "--http",
            "0",
            "--allow-origin",
            "https://a.example",
            "--allow-origin=http://b:*",
        ]) else {
            panic!("does not parse")
        };
        assert_eq!(m.allow_origins, ["https://a.example:443", "http://b:*"]);
        assert!(parse(&["--allow-origin", "https://a.example"]).is_err(), "without --http");
    }
}
