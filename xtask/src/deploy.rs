//! `cargo xtask deploy render`: the Kubernetes manifests of a sharded run of a profile
//! (docs/sharding.md): a ConfigMap with the files the profile reads, a PersistentVolumeClaim for
//! the run directories, an Indexed Job of N shards (`bench --shard $INDEX/N`, the index from the
//! pod's completion index) and a merge Job that waits for the shards' summaries and runs
//! `bench merge`.
//!
//! [`render`] is a pure function from a [`DeploySpec`] and the files to ship to the manifests as
//! JSON values; [`to_yaml`] writes them. The profile is resolved and split for every shard
//! before anything is written, so a profile that cannot be sharded fails here, not in the
//! cluster. API keys never appear: the pods read them from a Secret by the variable's name.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Subcommand};
use infergate_model::config::{BenchConfig, Override, ResolvedProfile};
use infergate_model::shard::Shard;
use serde_json::{Value, json};
use xshell::Shell;

use crate::exit::Status;

/// The image `deploy render` names by default (built from `deploy/container/Dockerfile`).
pub(crate) const DEFAULT_IMAGE: &str = "infergate-bench:latest";
/// The Secret the pods read API keys from, one key per variable name.
pub(crate) const API_KEY_SECRET: &str = "infergate-api-keys";
/// Where the pods mount the ConfigMap (the repository root of the bench inside the pod).
pub(crate) const CONFIG_ROOT: &str = "/infergate";
/// Where the pods mount the run directories' volume.
pub(crate) const RUNS_ROOT: &str = "/runs";
/// The bench binary in the image.
pub(crate) const BINARY: &str = "infergate";

#[derive(Debug, Subcommand)]
pub enum DeployCmd {
    /// Render the Kubernetes manifests of a sharded run of a profile.
    Render(RenderCmd),
}

impl DeployCmd {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        match self {
            DeployCmd::Render(cmd) => cmd.run(sh),
        }
    }
}

#[derive(Debug, Args)]
pub struct RenderCmd {
    /// Shards (pods) the run is split into.
    #[arg(long, value_name = "N")]
    pub shards: u32,
    /// Profile from the bench config; it must name a target (or give --base-url).
    #[arg(short, long)]
    pub profile: String,
    /// Bench config file (default: configs/bench.toml).
    #[arg(long, value_name = "FILE", default_value = "configs/bench.toml")]
    pub config: PathBuf,
    /// The server as the pods reach it (a Service URL), instead of the profile's target.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Container image of the bench.
    #[arg(long, default_value = DEFAULT_IMAGE)]
    pub image: String,
    /// Run id shared by the shards (default: one made of the start time).
    #[arg(long, value_name = "ID", value_parser = infergate_model::shard::check_run_id)]
    pub run_id: Option<String>,
    /// Wall-clock start of the shards' load, RFC 3339 (default: now + --start-delay).
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
    /// Seconds from now to the load's start when --start-at is not given (pods must be
    /// scheduled, pull the image and connect by then).
    #[arg(long, value_name = "SECONDS", default_value_t = 120)]
    pub start_delay: u32,
    /// Namespace of every object.
    #[arg(long, default_value = "default")]
    pub namespace: String,
    /// Size of the run directories' volume.
    #[arg(long, default_value = "10Gi")]
    pub storage: String,
    /// Seconds the merge Job waits for the shards' summaries before merging what is there
    /// (an incomplete merge says which shards are missing).
    #[arg(long, value_name = "SECONDS", default_value_t = 3600)]
    pub merge_wait: u32,
    /// Write one file per object into DIR (default: every object to stdout, `---` between).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// What the manifests are rendered from.
#[derive(Clone, Debug, PartialEq)]
pub struct DeploySpec {
    pub shards: u32,
    pub profile: String,
    /// The bench config, relative to the root (as the pods see it under [`CONFIG_ROOT`]).
    pub config: String,
    pub base_url: Option<String>,
    pub image: String,
    pub run_id: String,
    /// RFC 3339.
    pub start_at: String,
    pub namespace: String,
    pub storage: String,
    pub merge_wait: u32,
    /// Environment variables holding API keys (names only).
    pub api_key_envs: Vec<String>,
}

impl RenderCmd {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        let root = sh.current_dir();
        let config = BenchConfig::load_in(&root, &self.config)?;
        let start_at = match &self.start_at {
            Some(t) => chrono::DateTime::parse_from_rfc3339(t)
                .with_context(|| format!("--start-at `{t}` is not an RFC 3339 time"))?
                .to_utc(),
            None => chrono::Utc::now() + chrono::Duration::seconds(self.start_delay.into()),
        };
        if start_at > chrono::Utc::now() + chrono::Duration::days(1) {
            anyhow::bail!(
                "the shards' start {} is more than a day ahead: every pod would refuse it \
                 (`bench --start-at` accepts at most a day); give an earlier --start-at or a \
                 smaller --start-delay",
                start_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            );
        }
        check_k8s_name("--namespace", &self.namespace)?;
        check_quantity("--storage", &self.storage)?;
        let start_at = start_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let run_id = match &self.run_id {
            Some(id) => id.clone(),
            None => format!("{}-shards", start_at.replace([':', '-'], "")),
        };
        let resolved = self.resolve(&config)?;
        check_shards(&resolved, self.shards)?;
        check_items(&root, &resolved, self.shards)?;
        let mut api_key_envs = Vec::new();
        if let Some(var) = resolved.target.as_ref().and_then(|(_, t)| t.api_key_env.clone()) {
            api_key_envs.push(var);
        }
        let spec = DeploySpec {
            shards: self.shards,
            profile: self.profile.clone(),
            config: self.config.display().to_string(),
            base_url: self.base_url.clone(),
            image: self.image.clone(),
            run_id,
            start_at,
            namespace: self.namespace.clone(),
            storage: self.storage.clone(),
            merge_wait: self.merge_wait,
            api_key_envs,
        };
        let files = shipped_files(&root, &spec.config, &resolved)?;
        let manifests = render(&spec, &files);
        match &self.out {
            Some(dir) => {
                let dir = root.join(dir);
                std::fs::create_dir_all(&dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
                for (name, v) in &manifests {
                    let path = dir.join(name);
                    infergate_model::rundir::write_atomic(&path, to_yaml(v).as_bytes())?;
                    println!("{}", path.display());
                }
            }
            None => {
                let docs: Vec<String> = manifests.iter().map(|(_, v)| to_yaml(v)).collect();
                print!("{}", docs.join("---\n"));
            }
        }
        Ok(Status::Success)
    }

    fn resolve(&self, config: &BenchConfig) -> anyhow::Result<ResolvedProfile> {
        let mut resolved = config.resolve(&self.profile, &[] as &[Override])?;
        if let Some(url) = &self.base_url {
            let mut t = infergate_model::config::Target::at(url);
            if let Some((_, old)) = &resolved.target {
                t.model = old.model.clone();
                t.api_key_env = old.api_key_env.clone();
                t.engine_config = old.engine_config.clone();
            }
            resolved.target = Some(("cli".into(), t));
        }
        Ok(resolved)
    }
}

/// Refuse a profile that cannot run as `count` shards: it needs a target, and every shard its
/// part of the load.
pub(crate) fn check_shards(resolved: &ResolvedProfile, count: u32) -> anyhow::Result<()> {
    // At least one shard (`completions: 0` would run the merge on nothing), at most the bound.
    Shard::new(0, count).map_err(anyhow::Error::msg)?;
    if resolved.target.is_none() {
        anyhow::bail!(
            "profile `{}` measures the embedded simulator; shards need one server they share: \
             name a target in the profile or give --base-url",
            resolved.name
        );
    }
    for i in 0..count {
        let shard = Shard::new(i, count).map_err(anyhow::Error::msg)?;
        shard.split(&resolved.profile.load)?;
    }
    Ok(())
}

/// Refuse more shards than the workload has items: `bench --shard` deals the items by
/// position, and a shard with none refuses to run.
fn check_items(root: &Path, resolved: &ResolvedProfile, count: u32) -> anyhow::Result<()> {
    let wl = &resolved.profile.workload;
    let read = |rel: &str| {
        let p = root.join(rel);
        std::fs::read_to_string(&p).with_context(|| format!("cannot read {}", p.display()))
    };
    let items = if let Some(rel) = &wl.trace {
        let load = &resolved.profile.load;
        let trace =
            infergate_model::trace::Trace::parse(&root.join(rel), &read(rel)?, wl.trace_format)?;
        trace.window(load.trace_start_s * 1e3, load.trace_duration_s.map(|d| d * 1e3)).records.len()
    } else if let Some(rel) = &wl.conversations {
        let c = infergate_model::import::parse_conversations(
            &root.join(rel),
            &read(rel)?,
            wl.conversation_format,
        )?;
        infergate_model::session::import(c, wl.conversation_turns, wl).workload.items.len()
    } else if let Some(rel) = &wl.dataset {
        infergate_model::workload::dataset_line_count(&read(rel)?)
    } else if wl.input_distribution.is_some() || wl.output_distribution.is_some() {
        return Ok(()); // drawn per request: as many items as requests (checked with the load)
    } else {
        infergate_model::workload::Workload::synthetic(wl).items.len()
    };
    if items < count as usize {
        anyhow::bail!(infergate_model::shard::ShardError::TooFewItems { items, count });
    }
    Ok(())
}

/// A Kubernetes name (RFC 1123 label): 1 to 63 lowercase letters, digits and `-`, starting and
/// ending with a letter or digit.
pub(crate) fn check_k8s_name(flag: &str, v: &str) -> anyhow::Result<()> {
    let ok = (1..=63).contains(&v.len())
        && v.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !v.starts_with('-')
        && !v.ends_with('-');
    if !ok {
        anyhow::bail!(
            "{flag} `{v}` is not a Kubernetes name: 1 to 63 lowercase letters, digits and `-`, \
             starting and ending with a letter or digit (RFC 1123), e.g. `bench-runs`"
        );
    }
    Ok(())
}

/// A Kubernetes storage quantity: a positive number with an optional binary (`Ki`, `Mi`, `Gi`,
/// `Ti`, `Pi`, `Ei`) or decimal (`k`, `M`, `G`, `T`, `P`, `E`) suffix: `10Gi`, `500M`, `1.5Ti`.
pub(crate) fn check_quantity(flag: &str, v: &str) -> anyhow::Result<()> {
    const SUFFIXES: [&str; 12] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E"];
    let digits = v.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &v[digits.len()..];
    let number_ok = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && digits.matches('.').count() <= 1
        && !digits.starts_with('.')
        && !digits.ends_with('.')
        && digits.parse::<f64>().is_ok_and(|n| n > 0.0);
    if !number_ok || !(suffix.is_empty() || SUFFIXES.contains(&suffix)) {
        anyhow::bail!(
            "{flag} `{v}` is not a Kubernetes storage quantity: a positive number and one of the \
             suffixes {} (or none: bytes), e.g. `10Gi`",
            SUFFIXES.join(", ")
        );
    }
    Ok(())
}

/// The most a ConfigMap holds (Kubernetes refuses larger ones).
pub(crate) const CONFIG_MAP_LIMIT: usize = 1024 * 1024;

/// The files the pods read, relative to the root, with their text: the bench config, the
/// target's engine config, the workload's dataset, trace and empirical length files.
pub(crate) fn shipped_files(
    root: &Path,
    config: &str,
    resolved: &ResolvedProfile,
) -> anyhow::Result<Vec<(String, String)>> {
    let mut paths = vec![config.to_string()];
    let wl = &resolved.profile.workload;
    let engine = resolved.target.as_ref().and_then(|(_, t)| t.engine_config.clone());
    paths.extend(engine.into_iter().chain(wl.dataset.clone()).chain(wl.trace.clone()));
    let lengths = [&wl.input_distribution, &wl.output_distribution];
    paths.extend(lengths.into_iter().flatten().filter_map(|d| d.file()).map(str::to_string));
    let mut seen = std::collections::BTreeSet::new();
    paths.retain(|p| seen.insert(p.clone()));
    let files = paths
        .into_iter()
        .map(|p| {
            if Path::new(&p).is_absolute() || p.split('/').any(|c| c == "..") {
                anyhow::bail!("{p}: only files inside the repository can be shipped to the pods");
            }
            let text = std::fs::read_to_string(root.join(&p))
                .with_context(|| format!("cannot read {p} for the ConfigMap"))?;
            Ok((p, text))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let size: usize = files.iter().map(|(p, t)| p.len() + t.len()).sum();
    if size > CONFIG_MAP_LIMIT {
        let list: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
        anyhow::bail!(
            "the files the pods read ({}) are {size} bytes, more than a ConfigMap holds \
             ({CONFIG_MAP_LIMIT}); put the dataset or trace into the image or a volume and \
             name it there",
            list.join(", ")
        );
    }
    Ok(files)
}

/// A Kubernetes name (DNS-1123 label) made of `s`: lower case, `-` for anything else, at most
/// `max` characters, no `-` at either end.
pub(crate) fn dns_name(s: &str, max: usize) -> String {
    let mapped: String = s
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
        .take(max)
        .collect();
    mapped.trim_matches('-').to_string()
}

/// The key of a shipped file in the ConfigMap (keys may not hold `/`).
fn config_key(path: &str) -> String {
    path.replace('/', "__")
}

/// The manifests, by file name: ConfigMap, PersistentVolumeClaim, the shards' Job, the merge
/// Job.
pub fn render(spec: &DeploySpec, files: &[(String, String)]) -> Vec<(String, Value)> {
    let name = format!("infergate-{}", dns_name(&spec.run_id, 40));
    let labels = json!({
        "app.kubernetes.io/name": "infergate",
        "app.kubernetes.io/component": "bench",
        "infergate.dev/run": dns_name(&spec.run_id, 63),
    });
    let meta = |n: &str| json!({"name": n, "namespace": spec.namespace, "labels": labels});
    let data: serde_json::Map<String, Value> =
        files.iter().map(|(p, text)| (config_key(p), Value::String(text.clone()))).collect();
    let items: Vec<Value> =
        files.iter().map(|(p, _)| json!({"key": config_key(p), "path": p})).collect();
    let config_map = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta(&format!("{name}-config")),
        "data": data,
    });
    let pvc = json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": meta("infergate-runs"),
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "resources": {"requests": {"storage": spec.storage}},
        },
    });
    let volumes = json!([
        {"name": "config", "configMap": {"name": format!("{name}-config"), "items": items}},
        {"name": "runs", "persistentVolumeClaim": {"claimName": "infergate-runs"}},
    ]);
    let mounts = json!([
        {"name": "config", "mountPath": CONFIG_ROOT, "readOnly": true},
        {"name": "runs", "mountPath": RUNS_ROOT},
    ]);
    let run_dir = format!("{RUNS_ROOT}/{}", spec.run_id);
    let mut env = vec![json!({
        "name": "SHARD_INDEX",
        "valueFrom": {"fieldRef": {
            "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"
        }},
    })];
    env.extend(spec.api_key_envs.iter().map(|var| {
        json!({"name": var, "valueFrom": {"secretKeyRef": {
            "name": API_KEY_SECRET, "key": var, "optional": true
        }}})
    }));
    let mut args: Vec<String> = ["-C", CONFIG_ROOT, "bench", "--quiet", "--config", &spec.config]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(["--profile".into(), spec.profile.clone()]);
    if let Some(url) = &spec.base_url {
        args.extend(["--base-url".into(), url.clone()]);
    }
    args.extend([
        "--shard".into(),
        format!("$(SHARD_INDEX)/{}", spec.shards),
        "--run-id".into(),
        spec.run_id.clone(),
        "--start-at".into(),
        spec.start_at.clone(),
        "--out".into(),
        format!("{run_dir}/shard-$(SHARD_INDEX)"),
    ]);
    let shards_job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta(&name),
        "spec": {
            "completionMode": "Indexed",
            "completions": spec.shards,
            "parallelism": spec.shards,
            // A shard retried later would miss the shared start: the merge reports it instead.
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "securityContext": pod_security(),
                    "containers": [{
                        "name": "bench",
                        "image": spec.image,
                        "command": [BINARY],
                        "args": args,
                        "env": env,
                        "volumeMounts": mounts,
                        "resources": {"requests": {"cpu": "2", "memory": "1Gi"}},
                    }],
                    "volumes": volumes,
                },
            },
        },
    });
    let merge_job = merge_job(spec, &meta(&format!("{name}-merge")), &labels, &volumes);
    vec![
        ("configmap.yaml".into(), config_map),
        ("pvc.yaml".into(), pvc),
        ("job-shards.yaml".into(), shards_job),
        ("job-merge.yaml".into(), merge_job),
    ]
}

/// The merge Job: waits (up to `merge_wait` s) for every shard's summary, then merges the
/// shard directories that hold one; a missing shard makes the merge incomplete.
fn merge_job(spec: &DeploySpec, meta: &Value, labels: &Value, volumes: &Value) -> Value {
    let run_dir = format!("{RUNS_ROOT}/{}", spec.run_id);
    let wait = format!(
        "end=$(( $(date +%s) + {wait} )); \
         until [ \"$(ls {run_dir}/shard-*/summary.json 2>/dev/null | wc -l)\" -ge {n} ] \
         || [ \"$(date +%s)\" -ge \"$end\" ]; do sleep 5; done",
        wait = spec.merge_wait,
        n = spec.shards
    );
    let merge = format!(
        "set -- {run_dir}/shard-*/summary.json; dirs=; \
         for f in \"$@\"; do [ -e \"$f\" ] && dirs=\"$dirs ${{f%/summary.json}}\"; done; \
         exec {BINARY} -C {CONFIG_ROOT} bench merge --quiet --out {run_dir}/merged $dirs"
    );
    let mounts = json!([
        {"name": "config", "mountPath": CONFIG_ROOT, "readOnly": true},
        {"name": "runs", "mountPath": RUNS_ROOT},
    ]);
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "securityContext": pod_security(),
                    "initContainers": [{
                        "name": "wait-for-shards",
                        "image": spec.image,
                        "command": ["sh", "-c", wait],
                        "volumeMounts": mounts,
                    }],
                    "containers": [{
                        "name": "merge",
                        "image": spec.image,
                        "command": ["sh", "-c", merge],
                        "volumeMounts": mounts,
                    }],
                    "volumes": volumes,
                },
            },
        },
    })
}

/// The image's non-root user; the run directories' volume is writable by its group.
fn pod_security() -> Value {
    json!({"runAsNonRoot": true, "runAsUser": 10001, "runAsGroup": 10001, "fsGroup": 10001})
}

/// A JSON value as a YAML document (block style; multi-line strings as literal blocks).
pub(crate) fn to_yaml(v: &Value) -> String {
    fn conv(v: &Value) -> yaml_rust2::Yaml {
        use yaml_rust2::Yaml;
        match v {
            Value::Null => Yaml::Null,
            Value::Bool(b) => Yaml::Boolean(*b),
            Value::Number(n) => match n.as_i64() {
                Some(i) => Yaml::Integer(i),
                None => Yaml::Real(n.to_string()),
            },
            Value::String(s) => Yaml::String(s.clone()),
            Value::Array(a) => Yaml::Array(a.iter().map(conv).collect()),
            Value::Object(m) => {
                Yaml::Hash(m.iter().map(|(k, v)| (Yaml::String(k.clone()), conv(v))).collect())
            }
        }
    }
    crate::text::yaml(&conv(v))
}
