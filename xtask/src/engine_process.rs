//! `cargo xtask engine serve`: start a real engine from the governed engine config.
//!
//! llama.cpp's `llama-server` (from `LLAMA_SERVER` or `PATH`) with `-np` = max_num_seqs, context =
//! max_model_len x slots, `--metrics`, bound to 127.0.0.1 on a free port; or vLLM (`vllm serve`
//! with the flags `engine args` renders) when installed. The engine's output goes to a log file;
//! readiness is `GET /health` answering 200 within a timeout (the error names the log). The
//! engine stops when the command exits, on Ctrl-C, and when an [`EngineProcess`] is dropped.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use clap::builder::TypedValueParser;
use infergate_model::EngineKind;
use infergate_model::config::EngineConfig;
use xshell::{Shell, cmd};

use crate::engine_flags::engine_value;
use crate::exit::Status;
use crate::model;

/// The engines a command starts as a process of its own: llama.cpp's llama-server (`LLAMA_SERVER`
/// or PATH; CPU or GPU builds) and vLLM (`vllm serve` with the rendered flags; with two at once
/// on one GPU, lower `engine.gpu_memory_utilization` in both configs).
pub const STARTED: [EngineKind; 2] = [EngineKind::LlamaCpp, EngineKind::Vllm];

/// What a command runs its load against: the embedded simulator, in-process (a fresh one per
/// trial), or a process of a real engine ([`STARTED`]) it starts and stops. One choice for every
/// `--engine` that starts one: `tune` (a process per configuration) and `bench ab` (a process
/// per arm); `engine serve` starts a real engine only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Sim,
    Process(EngineKind),
}

impl Engine {
    /// The name on the command line and in files (`sim`, `llama-cpp`).
    pub fn name(self) -> &'static str {
        match self {
            Engine::Sim => "sim",
            Engine::Process(kind) => kind.as_str(),
        }
    }

    /// `--engine`'s values: `sim` or one of [`STARTED`], by name.
    pub fn value_parser() -> impl TypedValueParser<Value = Engine> {
        let names = std::iter::once("sim").chain(STARTED.iter().map(|k| k.as_str()));
        clap::builder::PossibleValuesParser::new(names).map(|name| match name.as_str() {
            "sim" => Engine::Sim,
            kind => Engine::Process(kind.parse().expect("every possible value names an engine")),
        })
    }

    /// What runs, for a report's plan: `per` is what each engine process serves (`arm`, ...);
    /// the simulator is a fresh one per trial.
    pub fn describe(self, per: &str) -> String {
        match self {
            Engine::Sim => "embedded simulator (a fresh one per trial)".to_string(),
            Engine::Process(EngineKind::LlamaCpp) => {
                format!("llama.cpp (one llama-server per {per})")
            }
            Engine::Process(EngineKind::Vllm) => format!("vLLM (one server per {per})"),
            Engine::Process(kind) => format!("{kind} (one server per {per})"),
        }
    }
}

/// The engine flags of the commands that start an engine per configuration: `tune` (one
/// process per configuration) and `bench ab` (one per arm).
#[derive(Clone, Debug, Args)]
pub struct EngineFlags {
    /// The engine each configuration runs in (each arm of `bench ab`).
    #[arg(long = "engine", value_name = "ENGINE", value_parser = Engine::value_parser(), default_value = "sim")]
    pub kind: Engine,
    /// With --engine llama-cpp: the model file (default: the cached Gemma 3 270M).
    #[arg(long, value_name = "GGUF")]
    pub gguf: Option<PathBuf>,
    /// Seconds to wait for a started engine to answer /health.
    #[arg(long, value_name = "SECONDS", default_value_t = 180)]
    pub ready_timeout: u64,
}

impl EngineFlags {
    /// The process of a configuration (its engine-config text `text`, read as the file
    /// `config`), its log at `log`, ready: none on the simulator.
    pub(crate) fn start(
        &self,
        root: &Path,
        (config, text): (&Path, &str),
        log: PathBuf,
    ) -> anyhow::Result<Option<EngineProcess>> {
        let Engine::Process(kind) = self.kind else { return Ok(None) };
        let timeout = Duration::from_secs(self.ready_timeout);
        start_config(root, kind, (config, text), self.gguf.clone(), timeout, log).map(Some)
    }
}

#[derive(Debug, Args)]
pub struct ServeCmd {
    /// The engine config file (engine parameters).
    #[arg(
        long = "engine-config",
        value_name = "FILE",
        default_value = "configs/engine-llamacpp.toml"
    )]
    pub config: PathBuf,
    /// The engine to start (a real one: the simulator is `cargo xtask sim`).
    #[arg(long, value_parser = engine_value(&STARTED), default_value = "llama-cpp")]
    pub engine: EngineKind,
    /// Model file for llama.cpp (default: the cached Gemma 3 270M, installed on first use).
    #[arg(long = "gguf", value_name = "GGUF")]
    pub model: Option<PathBuf>,
    /// Port (default: a free one).
    #[arg(long)]
    pub port: Option<u16>,
    /// Seconds to wait for the engine to answer /health.
    #[arg(long, value_name = "SECONDS", default_value_t = 120)]
    pub ready_timeout: u64,
}

/// How to start an engine.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    pub engine: EngineKind,
    pub config: EngineConfig,
    pub model: Option<PathBuf>,
    pub port: Option<u16>,
    pub ready_timeout: Duration,
    /// Where the engine's stdout and stderr go.
    pub log: PathBuf,
    /// Extra engine flags (e.g. llama.cpp's `--cache-type-k q4_0`).
    pub extra_args: Vec<String>,
}

/// A running engine; dropping it stops the engine.
pub struct EngineProcess {
    child: Child,
    pub base_url: String,
    pub model_id: String,
    pub log: PathBuf,
    pub argv: Vec<String>,
}

impl Drop for EngineProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl EngineProcess {
    /// Stop the engine and wait for it to exit.
    pub fn stop(self) {
        drop(self);
    }
}

/// The llama.cpp binary: `LLAMA_SERVER`, else `llama-server` on `PATH`.
pub fn llama_server_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("LLAMA_SERVER").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    find_in_path("llama-server")
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(name)).find(|p| p.is_file())
}

/// A free loopback port (bound and released; the engine binds it right after).
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// llama-server's arguments for an engine config: slots from max_num_seqs, context for every
/// slot, metrics on, loopback only.
pub(crate) fn llama_cpp_args(
    cfg: &EngineConfig,
    model: &Path,
    alias: &str,
    port: u16,
    threads: usize,
) -> Vec<String> {
    let slots = cfg.scheduler.max_num_seqs.max(1);
    let per_slot = cfg.engine.max_model_len.unwrap_or(2048);
    let mut a: Vec<String> = vec![
        "-m".into(),
        model.display().to_string(),
        "--alias".into(),
        alias.into(),
        "--host".into(),
        "127.0.0.1".into(),
        "--port".into(),
        port.to_string(),
        "-np".into(),
        slots.to_string(),
        "-c".into(),
        (per_slot as u64 * slots as u64).to_string(),
        "-t".into(),
        threads.to_string(),
        "--metrics".into(),
    ];
    if let Some(b) = cfg.scheduler.max_num_batched_tokens {
        a.extend(["-b".into(), b.to_string()]);
    }
    if !cfg.scheduler.enable_prefix_caching {
        a.push("--no-cache-prompt".into());
    }
    a
}

/// Start `engine` for the engine-config text `text` (read as the file `config`), with its log at
/// `log`, and wait until it is ready: the lifecycle `tune` and `bench ab` give each
/// configuration.
pub(crate) fn start_config(
    root: &Path,
    engine: EngineKind,
    (config, text): (&Path, &str),
    model: Option<PathBuf>,
    ready_timeout: Duration,
    log: PathBuf,
) -> anyhow::Result<EngineProcess> {
    let source = infergate_model::config::Source::new(config.to_path_buf(), text.to_string());
    let opts = ServeOptions {
        engine,
        config: EngineConfig::from_source(&source)?,
        model,
        port: None,
        ready_timeout,
        log,
        extra_args: Vec::new(),
    };
    let sh = Shell::new()?;
    sh.change_dir(root);
    start(&sh, &opts).context("the engine did not start")
}

/// Start an engine and wait until it is ready.
pub fn start(sh: &Shell, opts: &ServeOptions) -> anyhow::Result<EngineProcess> {
    let port = match opts.port {
        Some(p) => p,
        None => free_port().context("cannot find a free port")?,
    };
    if let Some(dir) = opts.log.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let (program, mut args, model_id) = match opts.engine {
        EngineKind::LlamaCpp => {
            let Some(bin) = llama_server_binary() else {
                bail!(
                    "llama.cpp's llama-server was not found: set LLAMA_SERVER to its path or put it on PATH"
                );
            };
            let model = match &opts.model {
                Some(m) => m.clone(),
                None => model::ensure(sh)?,
            };
            if !model.is_file() {
                bail!("the model file {} does not exist", model.display());
            }
            let alias = opts.config.engine.model.clone();
            let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
            let mut args = llama_cpp_args(&opts.config, &model, &alias, port, threads);
            // llama-server serves slot actions (the erase that isolates trials, see
            // `bench::runner::isolation`) only with a slot save path: one beside the log.
            let slots_dir = opts.log.with_extension("slots");
            std::fs::create_dir_all(&slots_dir)
                .with_context(|| format!("cannot create {}", slots_dir.display()))?;
            args.extend(["--slot-save-path".into(), slots_dir.display().to_string()]);
            (bin, args, alias)
        }
        EngineKind::Vllm => {
            let Some(bin) = find_in_path("vllm") else {
                bail!(
                    "vllm is not installed (no `vllm` on PATH); install it on a GPU machine: pip install vllm"
                );
            };
            let rendered = crate::engine_flags::render_vllm(&opts.config);
            let mut argv = rendered.argv();
            argv.remove(0); // the program itself
            argv.extend(["--host".into(), "127.0.0.1".into(), "--port".into(), port.to_string()]);
            (bin, argv, opts.config.engine.model.clone())
        }
        other => bail!(
            "{} starts {} only, not {other}: start it yourself and measure it as a target",
            crate::text::tool(),
            EngineKind::names(&STARTED)
        ),
    };
    args.extend(opts.extra_args.iter().cloned());
    let log = std::fs::File::create(&opts.log)
        .with_context(|| format!("cannot create {}", opts.log.display()))?;
    // Built through xshell (the shell's directory and environment), spawned as a child process.
    let mut command: Command = cmd!(sh, "{program} {args...}").into();
    let args = command.get_args().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>();
    let mut argv = vec![program.display().to_string()];
    argv.extend(args);
    command.stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
    let child = command.spawn().with_context(|| format!("cannot start {}", program.display()))?;
    let mut proc = EngineProcess {
        child,
        base_url: format!("http://127.0.0.1:{port}"),
        model_id,
        log: opts.log.clone(),
        argv,
    };
    wait_ready(&mut proc, opts.ready_timeout)?;
    Ok(proc)
}

fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// Poll `GET /health` until 200, the process exits, or the timeout passes.
fn wait_ready(proc: &mut EngineProcess, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    let addr = proc.base_url.trim_start_matches("http://").to_string();
    loop {
        if let Some(status) = proc.child.try_wait()? {
            bail!(
                "the engine exited ({status}) before it was ready; its log {} ends with:\n{}",
                proc.log.display(),
                log_tail(&proc.log)
            );
        }
        if health_ok(&addr) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "the engine did not answer GET /health with 200 within {:?}; see its log {}:\n{}",
                timeout,
                proc.log.display(),
                log_tail(&proc.log)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A plain HTTP/1.0 `GET /health` (no HTTP stack needed for this).
fn health_ok(addr: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(addr) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(format!("GET /health HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).is_err() {
        return false;
    }
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).unwrap_or(0);
    let head = String::from_utf8_lossy(&buf[..n]);
    head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200")
}

impl ServeCmd {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        let root = sh.current_dir();
        let config = EngineConfig::read(&root.join(&self.config))
            .with_context(|| format!("invalid engine config {}", self.config.display()))?;
        let stem =
            self.config.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let opts = ServeOptions {
            engine: self.engine,
            config,
            model: self.model,
            port: self.port,
            ready_timeout: Duration::from_secs(self.ready_timeout),
            log: root.join("target").join("engine").join(format!("{stem}.log")),
            extra_args: Vec::new(),
        };
        let proc = start(sh, &opts)?;
        println!(
            "{} serving `{}` at {}/v1 (log: {})",
            proc.argv[0],
            proc.model_id,
            proc.base_url,
            proc.log.display()
        );
        println!(
            "  {} bench --base-url {} --model {}",
            crate::text::tool(),
            proc.base_url,
            proc.model_id
        );
        println!("Ctrl-C stops it.");
        wait_for_ctrl_c_or_exit(proc)
    }
}

fn wait_for_ctrl_c_or_exit(mut proc: EngineProcess) -> anyhow::Result<Status> {
    let interrupted = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let flag = interrupted.clone();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        // Ctrl-C and SIGTERM both stop the engine; listening starts before this returns.
        let mut signals = rt.block_on(async { bench::runner::StopSignals::listen() });
        std::thread::spawn(move || {
            rt.block_on(signals.next());
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
        });
    }
    loop {
        if interrupted.load(std::sync::atomic::Ordering::SeqCst) {
            proc.stop();
            return Ok(Status::Interrupted);
        }
        if let Some(status) = proc.child.try_wait()? {
            bail!(
                "the engine exited ({status}); its log {} ends with:\n{}",
                proc.log.display(),
                log_tail(&proc.log)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
