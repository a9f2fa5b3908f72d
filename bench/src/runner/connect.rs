//! Step 1, connect: a target's API key, client and preflight, and whether connections can be
//! reused. A bench run's target is a configured server or the embedded simulator, started here
//! on an OS-chosen loopback port; acceptance connects each of its sides the same way.

use std::path::Path;
use std::time::Duration;

use crate::client::{
    Access, AccessError, ApiKeyError, Client, ClientError, ClientOptions, PreflightError, Resolved,
    read_api_key,
};
use infergate_model::config::{ClientConfig, Endpoint, Profile, Target};
use infergate_model::served::ServedReading;
use infergate_model::summary::{EngineParams, TargetInfo};
use infergate_sim::SimHandle;

use super::{Console, RunError};

/// What the requests to a target ask for (the rest comes from the target's config).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Wants<'a> {
    /// The model to request instead of the target's own.
    pub model: Option<&'a str>,
    pub endpoint: Endpoint,
    pub stream: bool,
}

/// A target, connected and checked: the client to send with and where requests go.
#[derive(Clone)]
pub struct Connection {
    pub name: String,
    pub target: Target,
    pub client: Client,
    pub resolved: Resolved,
    /// Notes for the summary: the client's (proxy use), then the preflight's (fallbacks).
    pub notes: Vec<String>,
}

impl Connection {
    /// The target announced itself as the built-in simulator.
    pub fn simulated(&self) -> bool {
        self.resolved.simulated
    }

    /// The summary's description of the target (of the key, only its variable's name).
    pub(crate) fn target_info(&self) -> TargetInfo {
        self.resolved.target_info(
            self.name.clone(),
            self.target.api_key_env.clone(),
            &self.client.redactor,
        )
    }
}

/// Why a target cannot be connected.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error(transparent)]
    ApiKey(#[from] ApiKeyError),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Preflight(#[from] PreflightError),
    /// A header or the CA bundle of the target cannot be used (the message never holds a
    /// header's value). Boxed: it would make every connection error as large as itself.
    #[error("target `{target}`: {error}")]
    Access { target: String, error: Box<AccessError> },
}

/// The client options of a profile's `[client]` section.
pub(crate) fn client_options(cfg: &ClientConfig) -> ClientOptions {
    ClientOptions {
        request_timeout: Duration::from_secs_f64(cfg.request_timeout_s),
        stall_timeout: Duration::from_secs_f64(cfg.stall_timeout_s),
        proxy: cfg.proxy,
        max_event_bytes: (cfg.max_event_kib as usize).saturating_mul(1024),
        cross_host_redirects: cfg.cross_host_redirects,
    }
}

/// Connect to a target: read its API key and headers, build the client (trusting its CA bundle,
/// a file under `root`), run the preflight (or take `known`, an earlier preflight's of a
/// target at the same address), and drop connection reuse when the server closes connections
/// after each response.
pub async fn connect(
    name: &str,
    target: &Target,
    cfg: &ClientConfig,
    wants: Wants<'_>,
    root: &Path,
    known: Option<&Resolved>,
) -> Result<Connection, ConnectError> {
    let api_key_env = target.api_key_env.as_deref();
    let key = match api_key_env {
        Some(var) => Some(read_api_key(var, name)?),
        None => None,
    };
    let access = Access::of_target(target, root, |var| std::env::var(var).ok())
        .map_err(|e| ConnectError::Access { target: name.to_string(), error: Box::new(e) })?;
    let (client, mut notes) =
        Client::new(client_options(cfg), key.as_deref(), &target.base_url, &access)?;
    let (root_url, _) = crate::client::split_base_url(&target.base_url);
    let known = known.filter(|k| {
        k.root == root_url
            && k.endpoint == wants.endpoint
            && k.stream == wants.stream
            && wants.model.is_none_or(|m| m == k.model)
    });
    let resolved = match known {
        Some(k) => k.clone(),
        None => client
            .preflight(name, target, wants.model, wants.endpoint, wants.stream, api_key_env)
            .await
            .map_err(|e| e.redacted(&client.redactor))?,
    };
    let client = if resolved.reuse_connections { client } else { client.without_reuse()? };
    notes.extend(resolved.notes.iter().cloned());
    let notes = notes.iter().map(|n| client.redactor.redact(n)).collect();
    Ok(Connection { name: name.to_string(), target: target.clone(), client, resolved, notes })
}

/// Step 1 of a bench run: its target connected, with the embedded simulator when the run
/// started one and the engine parameters to record.
pub(crate) struct Connected {
    pub connection: Connection,
    /// Shut down when the run ends (its scheduler report goes into the summary).
    pub simulator: Option<SimHandle>,
    /// The spec's, else those of the embedded simulator's engine config.
    pub engine: Option<EngineParams>,
    /// What the engine said it runs before the load.
    pub served: ServedReading,
}

/// What connecting a run needs: its profile (the client, the model and endpoint it asks for,
/// the simulator it describes), its target, and what the caller already knows.
pub(crate) struct RunTarget<'a> {
    pub profile: &'a Profile,
    /// The configured server (`None`: the embedded simulator the profile describes).
    pub target: Option<&'a (String, Target)>,
    /// The engine parameters to record, when the caller knows them.
    pub engine: Option<EngineParams>,
    /// Repository root, for the simulator's engine config and the client's files.
    pub root: &'a Path,
    /// An earlier run's preflight of the same target ([`super::RunSpec::preflight`]).
    pub preflight: Option<&'a Resolved>,
    pub quiet: bool,
}

/// Connect a run to its target: the configured server, or the embedded simulator its profile
/// describes (decision log in `run_dir`).
pub(crate) async fn connect_run(run: RunTarget<'_>, run_dir: &Path) -> Result<Connected, RunError> {
    let RunTarget { profile, target, mut engine, root, preflight, quiet } = run;
    let console = Console { quiet };
    let (name, target, simulator) = match target {
        Some((name, t)) => (name.clone(), t.clone(), None),
        None => {
            let embedded = infergate_sim::embedded_for_run(&profile.sim, root, run_dir)?;
            if engine.is_none() {
                if let Some(file) = &embedded.engine_config {
                    engine = Some(EngineParams::read(root, file)?);
                }
            }
            let handle = infergate_sim::start(
                embedded.options,
                embedded.backend,
                ([127, 0, 0, 1], 0).into(),
            )
            .await
            .map_err(RunError::SimulatorStart)?;
            console.info(&format!(
                "embedded simulator on {} ({})",
                handle.base_url(),
                handle.describe()
            ));
            let t = Target::at(handle.base_url()).with_model(handle.model());
            ("embedded-sim".to_string(), t, Some(handle))
        }
    };
    let wants = Wants {
        model: profile.model.as_deref(),
        endpoint: profile.endpoint,
        stream: profile.stream,
    };
    // A simulator started for this run is a server no earlier run has seen.
    let known = preflight.filter(|_| simulator.is_none());
    let connection = connect(&name, &target, &profile.client, wants, root, known).await?;
    console.info(&format!(
        "target: {} (model {})",
        connection.client.redactor.redact(&connection.resolved.url),
        connection.client.redactor.redact(&connection.resolved.model)
    ));
    for n in &connection.notes {
        console.info(&format!("note: {n}"));
    }
    let served = read_served(&connection).await;
    if let Some(e) = &engine {
        let found = infergate_model::served::mismatches(&e.params, &served.values);
        if let Some(n) = infergate_model::served::mismatch_note(&e.file, &found) {
            console.info(&format!("note: {n}"));
        }
    }
    Ok(Connected { connection, simulator, engine, served })
}

/// What the engine of a connected target says it runs (`bench::client::served`).
pub(crate) async fn read_served(c: &Connection) -> ServedReading {
    let r = &c.resolved;
    c.client.read_served(&r.root, r.models.as_ref(), &r.model).await
}

/// The served configuration, read before the load and after it, recorded beside the engine
/// parameters; a key they contradict is a note of the summary (and the console's).
pub(crate) fn record_served(
    engine: Option<&mut EngineParams>,
    before: ServedReading,
    after: ServedReading,
    notes: &mut Vec<String>,
    console: &Console,
) {
    let (reading, changed) = infergate_model::served::combine(before, after);
    notes.extend(changed);
    let Some(e) = engine else { return };
    e.set_served(&reading);
    if let Some(n) = infergate_model::served::mismatch_note(&e.file, &e.mismatches) {
        console.info(&format!("note: {n}"));
        notes.push(n);
    }
}
