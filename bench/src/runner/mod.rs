//! One bench run, in four steps with typed values between them, after its input is settled
//! ([`input::RunInput`]: the workload read from its files, then a shard's or a slice's part of
//! it, in one transform each). Each step is given only what it uses:
//!
//! 1. [`connect::connect_run`]: the target (or the embedded simulator, started here), its API
//!    key, client and preflight -> [`connect::Connected`];
//! 2. [`prepare::prepare_workload`]: the dataset or synthetic items, prompts fitted to the
//!    target's tokenizer -> [`prepare::Prepared`];
//! 3. [`drive::drive`]: the load, each record streamed to the run directory as it arrives ->
//!    [`drive::Driven`];
//! 4. [`assemble::assemble`]: the summary, its notes and status -> [`Summary`].
//!
//! [`run`] composes them and writes the summary. Acceptance connects its sides with the same
//! [`connect::connect`].

pub(crate) mod assemble;
pub(crate) mod connect;
pub(crate) mod drive;
pub(crate) mod input;
pub mod isolation;
pub(crate) mod pace;
pub mod prepare;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use tokio::sync::watch;

use crate::client::Phase;
use infergate_model::config::{Profile, ResolvedProfile, Target};
use infergate_model::rundir::{self, RunDirError};
use infergate_model::shard::{ShardError, ShardRecord, ShardRun, ShardTotal};
use infergate_model::summary::{EngineParams, GitInfo, Invocation, RunStatus, Summary};
use infergate_sim::engine::SchedulerReport;

pub use connect::{ConnectError, Connection};
pub use input::RunInput;
pub use prepare::PrepareError;

/// Everything one run needs.
pub struct RunSpec {
    pub profile: ResolvedProfile,
    /// Run directory to create.
    pub out_dir: PathBuf,
    pub run_id: String,
    pub git: Option<GitInfo>,
    /// Engine parameters to record (the target's governed config), when known.
    pub engine: Option<EngineParams>,
    /// Hide the progress bar and informational lines.
    pub quiet: bool,
    /// Handle Ctrl-C and SIGTERM (before the load: stop; during it: stop sending, grace
    /// period, then cancel). Tests drive [`RunControl`] instead.
    pub handle_signals: bool,
    /// Repository root, for relative paths in the config (datasets, engine configs).
    pub root: PathBuf,
    /// The command that started the run, recorded in the summary (secrets removed); the
    /// library knows no command line, so callers that have one set it (`None`: recorded as
    /// null).
    pub invocation: Option<Invocation>,
    /// This run is one shard of a sharded run (`bench --shard I/N`): the profile holds the
    /// whole load, and [`RunInput::shard`] makes the shard's part of it (load, items, prompts'
    /// salt, arrival stream) before the target is contacted; the load waits for the shared
    /// start time, and the summary records the shard (`infergate_model::shard`).
    pub shard: Option<ShardRun>,
    /// This run measures one slice of the workload (a trial of an A/B gate): its items from
    /// the slice's first on, its prompts salted so an engine that lives through several such
    /// runs never serves one from its prefix cache.
    pub slice: Option<infergate_model::workload::WorkloadSlice>,
    /// What was done to keep the last run's state out of this one (a trial of a set or an A/B
    /// gate), recorded as `summary.isolation`.
    pub isolation: Option<infergate_model::summary::Isolation>,
    /// What an earlier run of this job found out about the same target in its preflight
    /// ([`RunOutcome::preflight`]): given, and for a target at the same address, this run sends
    /// no preflight of its own and records those facts and notes. For runs of one job against
    /// one server that lives through them (the trials of an A/B gate's arm), where each
    /// preflight would ask the same questions and get the same answers.
    pub preflight: Option<crate::client::Resolved>,
}

impl RunSpec {
    /// A quiet run of `profile` against `target` into `out_dir`, without signal handling (for
    /// tools and tests that drive [`RunControl`] themselves).
    pub fn quiet(
        mut profile: Profile,
        target: (String, Target),
        out_dir: PathBuf,
        run_id: impl Into<String>,
    ) -> RunSpec {
        profile.target = Some(target.0.clone());
        let root = out_dir.parent().map(Path::to_path_buf).unwrap_or_default();
        RunSpec {
            profile: ResolvedProfile {
                name: "default".into(),
                profile,
                target: Some(target),
                file: None,
            },
            out_dir,
            run_id: run_id.into(),
            git: None,
            engine: None,
            quiet: true,
            handle_signals: false,
            root,
            invocation: None,
            shard: None,
            slice: None,
            isolation: None,
            preflight: None,
        }
    }
}

/// Where the records of a run go instead of `requests.jsonl`: given the file, the writer to
/// use (tests of a failing disk wrap it).
pub(crate) type RecordSink =
    Arc<dyn Fn(std::fs::File) -> Box<dyn std::io::Write + Send> + Send + Sync>;

/// Lets the caller interrupt a run as Ctrl-C would.
#[derive(Clone)]
pub struct RunControl {
    tx: Arc<watch::Sender<Phase>>,
    interrupted: Arc<AtomicBool>,
    /// The load has started (before it, an interruption ends the run with nothing measured).
    loading: Arc<AtomicBool>,
    pub(crate) record_sink: Option<RecordSink>,
}

impl Default for RunControl {
    fn default() -> Self {
        RunControl {
            tx: Arc::new(watch::channel(Phase::Running).0),
            interrupted: Arc::default(),
            loading: Arc::default(),
            record_sink: None,
        }
    }
}

impl RunControl {
    /// Stop sending new requests; in-flight ones get the grace period.
    pub fn interrupt(&self) {
        self.interrupted.store(true, Ordering::SeqCst);
        self.tx.send_if_modified(|p| {
            if *p == Phase::Running {
                *p = Phase::Draining;
                true
            } else {
                false
            }
        });
    }

    /// Stop sending new requests without the run counting as interrupted (the over-saturation
    /// stop): in-flight ones get the grace period.
    pub(crate) fn stop_sending(&self) {
        self.tx.send_if_modified(|p| {
            if *p == Phase::Running {
                *p = Phase::Draining;
                true
            } else {
                false
            }
        });
    }

    /// Back to running after a run that stopped sending by itself (the over-saturation stop),
    /// so the next run of a search or a sweep sent with this control starts; a control that was
    /// interrupted stays so. Whether it was, after the call: `false` means the next run may start.
    pub fn rearm(&self) -> bool {
        self.tx.send_if_modified(|p| {
            if *p != Phase::Running && !self.interrupted.load(Ordering::SeqCst) {
                *p = Phase::Running;
                true
            } else {
                false
            }
        });
        self.was_interrupted()
    }

    /// Cancel everything in flight now, at the end of the grace period: the run counts as
    /// interrupted only when something asked it to stop ([`RunControl::interrupt`]).
    pub(crate) fn cancel_in_flight(&self) {
        self.tx.send_replace(Phase::Abort);
    }

    /// Cancel everything in flight now. The phase is stored even while nothing is listening
    /// yet (`send` would drop it then): a stop that comes before the run first waits for one
    /// is still seen when it does.
    pub fn abort(&self) {
        self.interrupted.store(true, Ordering::SeqCst);
        self.tx.send_replace(Phase::Abort);
    }

    pub(crate) fn was_interrupted(&self) -> bool {
        self.interrupted.load(Ordering::SeqCst)
    }

    /// Records go through `sink` (given the `requests.jsonl` file) instead of straight to the
    /// file: how tests make the disk fail.
    pub fn with_record_sink(mut self, sink: RecordSink) -> RunControl {
        self.record_sink = Some(sink);
        self
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<Phase> {
        self.tx.subscribe()
    }

    /// Resolves once the run is asked to stop (interrupted or aborted).
    pub(crate) async fn stopped(&self) {
        let mut rx = self.subscribe();
        let _ = rx.wait_for(|p| *p != Phase::Running).await;
    }

    pub(crate) fn start_load(&self) {
        self.loading.store(true, Ordering::SeqCst);
    }

    fn load_started(&self) -> bool {
        self.loading.load(Ordering::SeqCst)
    }
}

/// Ctrl-C and SIGTERM: the signals with which a user (or a supervisor, a container runtime, CI)
/// asks a run or a server to stop. Listening starts when the value is made, inside a runtime.
pub struct StopSignals {
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    /// Start listening (the default action of each signal, ending the process, is replaced).
    pub fn listen() -> StopSignals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            StopSignals {
                interrupt: signal(SignalKind::interrupt()).ok(),
                terminate: signal(SignalKind::terminate()).ok(),
            }
        }
        #[cfg(not(unix))]
        StopSignals {}
    }

    /// The next signal's name (`Ctrl-C`, `SIGTERM`); never resolves when none can be heard.
    pub async fn next(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
                let heard = match s {
                    Some(s) => s.recv().await.is_some(),
                    None => false,
                };
                if !heard {
                    std::future::pending::<()>().await;
                }
            }
            tokio::select! {
                _ = recv(&mut self.interrupt) => "Ctrl-C",
                _ = recv(&mut self.terminate) => "SIGTERM",
            }
        }
        #[cfg(not(unix))]
        {
            match tokio::signal::ctrl_c().await {
                Ok(()) => "Ctrl-C",
                Err(_) => std::future::pending().await,
            }
        }
    }
}

/// Ctrl-C or SIGTERM: before the load, the run stops with nothing measured; during it, the
/// first stops sending and starts the grace period, the second cancels what is in flight.
fn spawn_signal_handler(
    control: &RunControl,
    grace: std::time::Duration,
    quiet: bool,
) -> tokio::task::JoinHandle<()> {
    let control = control.clone();
    let mut signals = StopSignals::listen();
    tokio::spawn(async move {
        let name = signals.next().await;
        if !control.load_started() {
            eprintln!("\n{name}: stopping before the load started; nothing is measured");
            control.abort();
            return;
        }
        if !quiet {
            eprintln!(
                "\n{name}: no new requests; waiting up to {grace:?} for those in flight ({name} again to cancel them)"
            );
        }
        control.interrupt();
        signals.next().await;
        control.abort();
    })
}

/// Why a run measured nothing. Request failures are not errors: they are part of the outcome.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error(transparent)]
    Prepare(#[from] PrepareError),
    #[error("cannot build the embedded simulator")]
    Simulator(#[from] infergate_sim::EmbedError),
    #[error("cannot start the embedded simulator")]
    SimulatorStart(#[source] std::io::Error),
    /// The engine config recorded for the run cannot be read.
    #[error(transparent)]
    EngineConfig(#[from] infergate_model::config::ConfigError),
    #[error(transparent)]
    RunDir(#[from] RunDirError),
    /// A file beside the runs (a sweep's `sweep.json`) cannot be written.
    #[error(transparent)]
    Artifact(#[from] infergate_model::artifact::ArtifactError),
    /// The process may not open the files the run's concurrency needs.
    #[error(transparent)]
    OpenFiles(#[from] crate::fdlimit::FdLimitError),
    /// The workload cannot be dealt to the shards.
    #[error(transparent)]
    Shard(#[from] ShardError),
    /// A caller could not set up a run it was asked for (a sweep's stage, say).
    #[error("cannot set up the run")]
    Setup(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Stopped (Ctrl-C, SIGTERM) during the pre-run checks, before any request was measured.
    #[error(
        "interrupted during the pre-run checks: no run was measured ({} holds no summary)",
        dir.display()
    )]
    Interrupted { dir: PathBuf },
}

/// The result of a run.
pub struct RunOutcome {
    pub summary: Summary,
    pub dir: PathBuf,
    /// The embedded engine simulator's scheduler report (also in `summary.extra.scheduler`).
    pub scheduler: Option<SchedulerReport>,
    /// What the run's preflight found out about its target (or the one it was given), for a
    /// later run of the same job against the same server ([`RunSpec::preflight`]).
    pub preflight: crate::client::Resolved,
}

impl RunOutcome {
    pub fn status(&self) -> RunStatus {
        self.summary.status
    }

    /// The notes naming each batch the simulated engine ran out of memory on (empty when it
    /// never did, or the target is not the embedded engine simulator).
    pub fn out_of_memory_notes(&self) -> Vec<String> {
        self.scheduler.as_ref().map(SchedulerReport::oom_notes).unwrap_or_default()
    }
}

/// A new run id: UTC time plus a random suffix.
pub fn new_run_id() -> String {
    let now = chrono::Utc::now();
    // Distinguishes runs started within the same second (nanoseconds and process id mixed).
    let nanos = now.timestamp_subsec_nanos() as u64;
    let suffix =
        (infergate_model::hash::fnv1a(&(nanos ^ (std::process::id() as u64) << 32).to_le_bytes())
            & 0xffff) as u32;
    format!("{}-{suffix:04x}", now.format("%Y%m%dT%H%M%SZ"))
}

pub(crate) struct Console {
    pub(crate) quiet: bool,
}

impl Console {
    pub(crate) fn info(&self, msg: &str) {
        if !self.quiet {
            eprintln!("{msg}");
        }
    }
}

/// Run a bench: connect, prepare the workload, drive the load, assemble and write the summary.
/// Returns an error only when nothing could be measured (bad target, bad config, unwritable
/// directory); request failures are part of the outcome.
pub async fn run(spec: RunSpec, control: RunControl) -> Result<RunOutcome, RunError> {
    // The workload's files are read and checked before anything else: a malformed trace or
    // dataset ends the run before a directory is made or anything is sent.
    let input = RunInput::settle(&spec)?;
    let (concurrency, in_process_server) =
        open_files_need(&input.profile.load, spec.profile.target.is_none());
    crate::fdlimit::ensure_open_files(concurrency, in_process_server)?;
    let dir = rundir::create(&spec.out_dir)?;
    let grace = std::time::Duration::from_secs_f64(spec.profile.profile.client.grace_s);
    let signals = spec.handle_signals.then(|| spawn_signal_handler(&control, grace, spec.quiet));
    let result = run_in(&spec, input, control, &dir).await;
    if let Some(t) = signals {
        t.abort();
    }
    rundir::release(&dir);
    result
}

/// What a run's open files depend on: its most concurrent connections under `load`, and
/// whether the embedded simulator serves them in this process.
pub(crate) fn open_files_need(
    load: &infergate_model::config::LoadConfig,
    embedded: bool,
) -> (u32, bool) {
    let concurrency = match load.mode {
        infergate_model::config::LoadMode::Closed => load.concurrency,
        infergate_model::config::LoadMode::Open | infergate_model::config::LoadMode::Trace => {
            load.max_concurrency.unwrap_or(load.concurrency)
        }
    };
    (concurrency, embedded)
}

/// The run, in the directory `run` created and locked.
async fn run_in(
    spec: &RunSpec,
    input: RunInput,
    control: RunControl,
    dir: &Path,
) -> Result<RunOutcome, RunError> {
    let dir = dir.to_path_buf();
    let started_at = chrono::Utc::now();
    let started_sys = SystemTime::now();
    // The pre-run checks end at once when the run is stopped: nothing is measured yet.
    let RunInput { profile, loaded, prompt_salt, arrival_seed, shard_total } = input;
    let before_load = async {
        let target = connect::RunTarget {
            profile: &profile,
            target: spec.profile.target.as_ref(),
            engine: spec.engine.clone(),
            root: &spec.root,
            preflight: spec.preflight.as_ref(),
            quiet: spec.quiet,
        };
        let connected = connect::connect_run(target, &dir).await?;
        let prepared = prepare::prepare_workload(
            loaded,
            prompt_salt,
            &profile.workload,
            profile.endpoint,
            &connected.connection,
        )
        .await?;
        Ok::<_, RunError>((connected, prepared))
    };
    let (connect::Connected { connection, simulator, mut engine, served }, prepared) = tokio::select! {
        r = before_load => r?,
        _ = control.stopped() => return Err(RunError::Interrupted { dir }),
    };
    let mut notes = connection.notes.clone();
    notes.extend(prepared.notes.iter().cloned());
    if let Some(at) = spec.shard.as_ref().and_then(|s| s.start_at) {
        tokio::select! {
            late = wait_until(at) => notes.extend(late),
            _ = control.stopped() => return Err(RunError::Interrupted { dir }),
        }
    }
    let load = drive::Load {
        profile: &profile,
        run_id: &spec.run_id,
        arrival_seed,
        embedded: simulator.is_some(),
        quiet: spec.quiet,
    };
    let driven = drive::drive(load, &connection, prepared, &dir, &control, &mut notes).await?;
    let after = connect::read_served(&connection).await;
    let console = Console { quiet: spec.quiet };
    connect::record_served(engine.as_mut(), served, after, &mut notes, &console);
    let mut scheduler = None;
    if let Some(h) = simulator {
        scheduler = h.scheduler_report();
        h.shutdown().await;
    }
    let mut summary = assemble::assemble(assemble::RunParts {
        run_id: &spec.run_id,
        profile: &profile,
        profile_name: &spec.profile.name,
        git: spec.git.clone(),
        invocation: spec.invocation.as_ref(),
        slice: spec.slice,
        isolation: spec.isolation.clone(),
        connection: &connection,
        engine,
        started_at,
        notes,
        driven: &driven,
        scheduler: scheduler.as_ref(),
    });
    infergate_model::floor::record_recent(&spec.root, &mut summary);
    if let (Some(s), Some(total)) = (&spec.shard, shard_total) {
        summary.extra.shard = Some(shard_section(s, total, &driven));
    }
    assemble::plateau(&dir, &mut summary, &profile);
    // A failed histogram log (a full disk) still leaves the summary a try.
    let window = assemble::window(&summary);
    if let Err(e) = rundir::write_histograms(&dir, &driven.acc, started_sys, window) {
        let why = std::error::Error::source(&e).map(|s| format!(": {s}")).unwrap_or_default();
        summary.notes.push(format!("{e}{why}; the latency histograms are only in this summary"));
    }
    rundir::write_summary(&dir, &summary)?;
    Ok(RunOutcome { summary, dir, scheduler, preflight: connection.resolved })
}

/// Sleep until the wall-clock time `at`; a note when it had passed already.
async fn wait_until(at: chrono::DateTime<chrono::Utc>) -> Option<String> {
    let now = chrono::Utc::now();
    match (at - now).to_std() {
        Ok(wait) => {
            tokio::time::sleep(wait).await;
            None
        }
        Err(_) => Some(format!(
            "the load started {:.3} s after --start-at {} (the shard was ready late)",
            (now - at).as_seconds_f64(),
            infergate_model::shard::timestamp(at)
        )),
    }
}

/// The summary's `shard` section: the shard, the whole load and the wall-clock time of the
/// load clock's origin (now, less the time the clock has run).
fn shard_section(run: &ShardRun, total: ShardTotal, driven: &drive::Driven) -> ShardRecord {
    let elapsed = chrono::Duration::from_std(driven.clock.elapsed()).unwrap_or_default();
    ShardRecord {
        index: run.shard.index,
        count: run.shard.count,
        total,
        start_at: run.start_at.map(infergate_model::shard::timestamp),
        load_started_at: infergate_model::shard::timestamp(chrono::Utc::now() - elapsed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fdlimit::{FdNeed, Limits, Plan, plan};
    use infergate_model::config::{BenchConfig, Source};

    fn resolved(text: &str) -> ResolvedProfile {
        let cfg = BenchConfig::from_source(Source::new("bench.toml", text.to_string())).unwrap();
        cfg.resolve("default", &[]).unwrap()
    }

    /// A stop that comes while nothing waits for one yet (a signal between the preflight's
    /// connect and the run's first wait) is still seen by the next wait.
    #[tokio::test]
    async fn an_abort_before_anyone_waits_is_seen_by_the_next_wait() {
        let control = RunControl::default();
        control.abort();
        tokio::time::timeout(std::time::Duration::from_secs(5), control.stopped())
            .await
            .expect("the earlier abort ends the wait at once");
        let control = RunControl::default();
        control.interrupt();
        tokio::time::timeout(std::time::Duration::from_secs(5), control.stopped())
            .await
            .expect("the earlier interrupt ends the wait at once");
    }

    #[test]
    fn the_open_files_a_run_needs_come_from_its_load_and_its_server() {
        let need = |p: &ResolvedProfile| open_files_need(&p.profile.load, p.target.is_none());
        let closed = resolved("[profile.default.load]\nconcurrency = 300\n");
        assert_eq!(need(&closed), (300, true), "the embedded simulator");
        let open = resolved(
            "[targets.t]\nbase_url = \"http://h\"\n[profile.default]\ntarget = \"t\"\n\
             [profile.default.load]\nmode = \"open\"\nrate = 5.0\nmax_concurrency = 40\n",
        );
        assert_eq!(need(&open), (40, false));
    }

    #[test]
    fn a_run_short_of_open_files_is_refused_with_the_arithmetic_and_the_fix() {
        let p = resolved(
            "[targets.t]\nbase_url = \"http://h\"\n[profile.default]\ntarget = \"t\"\n\
             [profile.default.load]\nconcurrency = 300\n",
        );
        let (concurrency, in_process) = open_files_need(&p.profile.load, p.target.is_none());
        let limits = Limits { soft: Some(256), hard: Some(256) };
        let Plan::Short { error, .. } = plan(FdNeed::new(concurrency, in_process), limits) else {
            panic!("300 connections do not fit 256 files");
        };
        let msg = RunError::from(error).to_string();
        assert!(msg.contains("concurrency 300 needs 364 open files"), "{msg}");
        assert!(msg.contains("ulimit -n 364") && msg.contains("at most 192"), "{msg}");
        let limits = Limits { soft: Some(256), hard: Some(4096) };
        assert_eq!(plan(FdNeed::new(concurrency, in_process), limits), Plan::Raise(4096));
    }
}
