//! `infergate init`: sets up a git repository (Rust or not) for infergate: the bench
//! configuration (the embedded simulator by default, the named engine as a target), the governed
//! engine parameters (read from the team's deployment files with `--from`, which are declared as
//! governed sources), the settings, the decision records with ADR-0001, the thresholds generated
//! from them, the GitHub workflows and `.gitignore` entries.
//!
//! It never overwrites: an existing file is named and left as it is (a second `init` changes no
//! byte); `--force` replaces, naming what it replaced. The files are planned first ([`plan`],
//! pure but for reading the `--from` files), then written.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Args;
use infergate_model::sources::{self, EngineKind, SourceDecl};
use xshell::Shell;

use crate::engine_flags::engine_value;
use crate::exit::Status;
use crate::text::tool;

const BENCH_TEMPLATE: &str = include_str!("init/bench.toml");
const ENGINE_TEMPLATE: &str = include_str!("../../configs/engine.toml");
const SETTINGS_TEMPLATE: &str = include_str!("init/xtask.toml");
const ADR_README: &str = include_str!("init/adr-readme.md");
const ADR_TEMPLATE: &str = include_str!("../../docs/adr/template.md");
const ADR_0001: &str = include_str!("init/adr-0001.md");
const PR_WORKFLOW: &str = include_str!("init/pr-check.yml");
const BENCH_WORKFLOW: &str = include_str!("init/bench-gate.yml");
const DATASET_WORKFLOW: &str = include_str!("init/dataset-refresh.yml");

/// The record `init` writes.
pub const ADR_0001_FILE: &str =
    "docs/adr/0001-govern-inference-parameters-with-decision-records.md";
/// The lines `init` keeps in `.gitignore`: run directories.
pub const GITIGNORE_LINES: [&str; 2] = ["/runs/", "/target/bench/"];

/// What `init` writes for the engine a team serves with: its name in prose, where its server
/// listens by default, its API key's variable, and the words that find it in deployment files.
trait Scaffold {
    fn display(self) -> &'static str;
    fn default_base_url(self) -> &'static str;
    fn api_key_env(self) -> &'static str;
    fn needles(self) -> &'static [&'static str];
}

impl Scaffold for EngineKind {
    fn display(self) -> &'static str {
        match self {
            EngineKind::Vllm => "vLLM",
            EngineKind::Sglang => "SGLang",
            EngineKind::LlamaCpp => "llama.cpp",
            EngineKind::Tgi => "TGI",
            EngineKind::Trtllm => "TensorRT-LLM",
        }
    }

    /// Where the engine's OpenAI-compatible server listens by default.
    fn default_base_url(self) -> &'static str {
        match self {
            EngineKind::Vllm => "http://127.0.0.1:8000/v1",
            EngineKind::Sglang => "http://127.0.0.1:30000/v1",
            EngineKind::LlamaCpp => "http://127.0.0.1:8080/v1",
            EngineKind::Tgi => "http://127.0.0.1:8080/v1",
            EngineKind::Trtllm => "http://127.0.0.1:8000/v1",
        }
    }

    /// The variable the API key is read from.
    fn api_key_env(self) -> &'static str {
        match self {
            EngineKind::Vllm => "VLLM_API_KEY",
            EngineKind::Sglang => "SGLANG_API_KEY",
            EngineKind::LlamaCpp => "LLAMA_API_KEY",
            EngineKind::Tgi => "TGI_API_KEY",
            EngineKind::Trtllm => "TRTLLM_API_KEY",
        }
    }

    /// The words a container image, service or command of this engine contains.
    fn needles(self) -> &'static [&'static str] {
        match self {
            EngineKind::Vllm => &["vllm"],
            EngineKind::Sglang => &["sglang"],
            EngineKind::LlamaCpp => &["llama", "llama.cpp", "llama-server"],
            EngineKind::Tgi => &["text-generation", "tgi"],
            EngineKind::Trtllm => &["trtllm", "tensorrt"],
        }
    }
}

#[derive(Debug, Args)]
pub struct InitCmd {
    /// The engine the team serves with: a target and profile of that name in
    /// configs/bench.toml, the spellings of the `--from` files.
    #[arg(long, value_parser = engine_value(&EngineKind::ALL), default_value = "vllm")]
    pub engine: EngineKind,
    /// The engine server's base URL (default: the engine's usual local port).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// The model the target asks for (default: the first one the server's /v1/models offers).
    #[arg(long)]
    pub model: Option<String>,
    /// The variable holding the server's API key (its name only; the key never goes in a file).
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,
    /// The team's deployment files (Helm values, a Kubernetes manifest, a compose file, a vLLM
    /// config YAML, a launch script or Dockerfile): configs/engine.toml takes their parameters
    /// and each is declared a governed source in configs/xtask.toml.
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub from: Vec<PathBuf>,
    /// Replace the files that exist (named in the output).
    #[arg(long)]
    pub force: bool,
    /// Also write a small `xtask/` crate whose `main` is infergate's entry point (it depends
    /// on infergate by git revision) and the `.cargo/config.toml` alias, so `cargo xtask bench`
    /// works in this Rust repository as in infergate's own.
    #[arg(long)]
    pub xtask: bool,
}

/// One file `init` writes, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    /// Relative to the repository root, `/`-separated.
    pub path: String,
    pub text: String,
    /// Lines appended to an existing file that lacks them (`.gitignore`), never a replacement.
    pub append_lines: bool,
}

/// A `--from` file read: its declaration and its parameters.
#[derive(Clone, Debug)]
pub struct FromFile {
    pub decl: SourceDecl,
    pub params: Vec<sources::Param>,
    pub notes: Vec<String>,
}

impl InitCmd {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        let root = sh.current_dir();
        if !root.join(".git").exists() {
            bail!(
                "{} is not a git repository (no .git): `{} init` sets up a git repository; run \
                 `git init` there first or pass -C DIR",
                root.display(),
                tool()
            );
        }
        let from = self
            .from
            .iter()
            .map(|f| read_from(&root, f, self.engine))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let files = plan(&self, &from, &today())?;
        let mut written = Vec::new();
        let mut kept = Vec::new();
        let mut replaced = Vec::new();
        for f in &files {
            let full = root.join(&f.path);
            let existing = match std::fs::read_to_string(&full) {
                Ok(t) => Some(t),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(e).with_context(|| format!("cannot read {}", f.path)),
            };
            let new_text = match (&existing, f.append_lines) {
                (Some(old), true) => match appended(old, &f.text) {
                    Some(t) => t,
                    None => {
                        kept.push(f.path.clone());
                        continue;
                    }
                },
                (Some(old), false) if !self.force || *old == f.text => {
                    kept.push(f.path.clone());
                    continue;
                }
                (Some(_), false) => {
                    replaced.push(f.path.clone());
                    f.text.clone()
                }
                (None, _) => {
                    written.push(f.path.clone());
                    f.text.clone()
                }
            };
            if let Some(dir) = full.parent() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
            }
            infergate_policy::adr::records::write_file(&full, &new_text)?;
            if existing.is_some() && f.append_lines {
                written.push(format!("{} (appended)", f.path));
            }
        }
        for f in &from {
            for n in &f.notes {
                println!("note: {}: {n}", f.decl.path);
            }
        }
        for p in &written {
            println!("wrote    {p}");
        }
        for p in &replaced {
            println!("replaced {p}");
        }
        for p in &kept {
            println!("kept     {p} (exists; --force replaces it)");
        }
        let t = tool();
        println!();
        println!("next:");
        println!("  {t} bench                       # the embedded simulator, configs/engine.toml");
        println!(
            "  {t} bench --profile {}{}# the server of [targets.{}] in configs/bench.toml",
            self.engine.as_str(),
            " ".repeat(12usize.saturating_sub(self.engine.as_str().len())),
            self.engine.as_str()
        );
        println!("  {t} adr new \"<title>\" --baseline target/bench/<run id>");
        println!("  {t} adr check --base origin/main");
        if self.xtask {
            println!("  cargo xtask bench             # the same, through the xtask/ crate");
            if std::fs::read_to_string(root.join("Cargo.toml"))
                .is_ok_and(|t| t.contains("[workspace]"))
            {
                println!(
                    "note: Cargo.toml is a workspace: add \"xtask\" to its members (init leaves \
                     your Cargo.toml as it is)"
                );
            }
        }
        println!("  git add -A && git commit -m \"Set up infergate\"");
        Ok(Status::Success)
    }
}

fn today() -> String {
    chrono::Local::now().date_naive().format("%Y-%m-%d").to_string()
}

/// `old` with the lines of `lines` it lacks appended, or `None` when it has them all.
fn appended(old: &str, lines: &str) -> Option<String> {
    let have: Vec<&str> = old.lines().map(str::trim).collect();
    let missing: Vec<&str> =
        lines.lines().filter(|l| !l.starts_with('#') && !have.contains(&l.trim())).collect();
    if missing.is_empty() {
        return None;
    }
    let mut out = old.to_string();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    for l in missing {
        out.push_str(l);
        out.push('\n');
    }
    Some(out)
}

/// Reads a `--from` file: its declaration detected from its content, then its parameters.
pub fn read_from(root: &Path, file: &Path, engine: EngineKind) -> anyhow::Result<FromFile> {
    let full = if file.is_absolute() { file.to_path_buf() } else { root.join(file) };
    let rel = full.strip_prefix(root).map(Path::to_path_buf).map_err(|_| {
        anyhow::anyhow!(
            "--from {}: not a file of the repository {}; a governed source is a file of the \
             repository",
            file.display(),
            root.display()
        )
    })?;
    let rel = rel
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect::<PathBuf>()
        .to_string_lossy()
        .replace('\\', "/");
    let text =
        std::fs::read_to_string(&full).with_context(|| format!("--from {}: cannot read", rel))?;
    let decl = detect(&rel, &text, engine)?;
    let got = sources::extract(&decl, &rel, &text).map_err(|e| anyhow::anyhow!("--from {e}"))?;
    Ok(FromFile { decl, params: got.params, notes: got.notes })
}

/// The `[[adr.source]]` declaration of `file` (its text `text`): a production-stack values file
/// (`servingEngineSpec`), a Kubernetes manifest (the engine's container's args), a compose file
/// (the engine's service's command), a YAML/JSON/TOML config (top level) or a script or
/// Dockerfile (the command line in it).
pub fn detect(file: &str, text: &str, engine: EngineKind) -> anyhow::Result<SourceDecl> {
    let decl = |at: Option<String>, args: Option<String>| SourceDecl {
        path: file.to_string(),
        engine,
        at,
        args,
        deployment: "default".into(),
    };
    let lower = file.to_ascii_lowercase();
    if !(lower.ends_with(".yaml") || lower.ends_with(".yml")) {
        return Ok(decl(None, None));
    }
    let docs = yaml_rust2::YamlLoader::load_from_str(text)
        .map_err(|e| anyhow::anyhow!("--from {file}: not YAML: {e}"))?;
    let matches_engine = |s: &str| {
        let s = s.to_ascii_lowercase();
        engine.needles().iter().any(|n| s.contains(n))
    };
    for doc in &docs {
        if !doc["servingEngineSpec"]["modelSpec"].is_badvalue() {
            return Ok(decl(Some("servingEngineSpec.modelSpec[0].vllmConfig".into()), None));
        }
        if let Some(containers) = doc["spec"]["template"]["spec"]["containers"].as_vec() {
            let pick =
                containers.iter().find(|c| c["name"].as_str().is_some_and(matches_engine)).or_else(
                    || containers.iter().find(|c| c["image"].as_str().is_some_and(matches_engine)),
                );
            let Some(name) = pick.and_then(|c| c["name"].as_str()) else {
                bail!(
                    "--from {file}: a Kubernetes manifest, but no container's name or image \
                     names {} (containers: {}); pass --engine for its engine",
                    engine.display(),
                    containers
                        .iter()
                        .filter_map(|c| c["name"].as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            };
            return Ok(decl(
                None,
                Some(format!("spec.template.spec.containers[name={name}].args")),
            ));
        }
        if let Some(services) = doc["services"].as_hash() {
            let named = |pred: &dyn Fn(&yaml_rust2::Yaml) -> bool| {
                services.iter().find(|(_, s)| pred(s)).and_then(|(k, _)| k.as_str())
            };
            let service =
                named(&|s| s["image"].as_str().is_some_and(matches_engine)).or_else(|| {
                    services.iter().find_map(|(k, _)| k.as_str().filter(|k| matches_engine(k)))
                });
            let Some(service) = service else {
                bail!(
                    "--from {file}: a compose file, but no service's name or image names {}; \
                     pass --engine for its engine",
                    engine.display()
                );
            };
            return Ok(decl(None, Some(format!("services.{service}.command"))));
        }
    }
    Ok(decl(None, None))
}

/// The canonical keys of a source that the engine config holds (`section.key`), with their
/// values; the unmapped spellings are left out.
fn engine_keys(params: &[sources::Param]) -> Vec<(String, toml::Value)> {
    params
        .iter()
        .filter(|p| !p.key.starts_with("unmapped.") && p.key.matches('.').count() == 1)
        .map(|p| (p.key.clone(), p.value.clone()))
        .collect()
}

/// Whether the sources agree on every key two of them give.
fn agree(from: &[FromFile]) -> bool {
    let mut seen: std::collections::BTreeMap<&str, &toml::Value> = Default::default();
    for f in from {
        for p in &f.params {
            if let Some(v) = seen.insert(&p.key, &p.value)
                && v != &p.value
            {
                return false;
            }
        }
    }
    true
}

/// A deployment's name from its file (`deploy/helm/values.yaml` -> `deploy-helm-values`).
fn deployment_name(path: &str) -> String {
    let stem = path.rsplit_once('.').map_or(path, |(s, _)| s);
    stem.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
        .collect()
}

fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// The files `init` writes, with their text: pure but for the version and date it is given.
pub fn plan(cmd: &InitCmd, from: &[FromFile], date: &str) -> anyhow::Result<Vec<Planned>> {
    let e = cmd.engine;
    let file = |path: &str, text: String| Planned { path: path.into(), text, append_lines: false };
    let version = env!("CARGO_PKG_VERSION");
    let api_key_env = cmd.api_key_env.clone().unwrap_or_else(|| e.api_key_env().to_string());
    let base_url = cmd.base_url.clone().unwrap_or_else(|| e.default_base_url().to_string());
    let key_line = format!("api_key_env = {}", toml_str(&api_key_env));
    let bench = BENCH_TEMPLATE
        .replace("{{ENGINE_NAME}}", e.display())
        .replace("{{ENGINE}}", e.as_str())
        .replace("{{BASE_URL}}", &base_url.replace('\\', "\\\\").replace('"', "\\\""))
        .replace(
            "{{MODEL_LINE}}",
            &cmd.model.as_ref().map(|m| format!("model = {}\n", toml_str(m))).unwrap_or_default(),
        )
        .replace("api_key_env = \"{{API_KEY_ENV}}\"", &key_line)
        .replace("{{API_KEY_PAD}}", &" ".repeat(40usize.saturating_sub(key_line.len()).max(1)));

    // The engine parameters: the first source's (all of them, when they agree).
    let mut engine = ENGINE_TEMPLATE.replace("cargo xtask", "infergate");
    let together = agree(from);
    let mut changes: Vec<(String, toml::Value)> = Vec::new();
    for f in if together { from } else { &from[..from.len().min(1)] } {
        for (k, v) in engine_keys(&f.params) {
            if !changes.iter().any(|(c, _)| *c == k) {
                changes.push((k, v));
            }
        }
    }
    if let Some(m) = &cmd.model
        && from.is_empty()
    {
        changes.push(("engine.model".into(), toml::Value::String(m.clone())));
    }
    if !changes.is_empty() {
        let changes = changes
            .into_iter()
            .map(|(k, v)| Ok((infergate_model::config::ConfigKey::parse(&k)?, v)))
            .collect::<Result<Vec<_>, infergate_model::config::KeyError>>()
            .map_err(|err| anyhow::anyhow!("configs/engine.toml from --from: {err}"))?;
        engine = infergate_policy::tune::apply::apply(&engine, &changes)
            .map_err(|err| anyhow::anyhow!("configs/engine.toml from --from: {err}"))?;
    }
    infergate_model::config::EngineConfig::from_source(&infergate_model::config::Source::new(
        "configs/engine.toml",
        engine.clone(),
    ))
    .map_err(|err| {
        anyhow::anyhow!("the engine parameters of --from do not make an engine config: {err}")
    })?;

    let mut settings = SETTINGS_TEMPLATE.to_string();
    for f in from {
        let d = &f.decl;
        let deployment = if together { "default".to_string() } else { deployment_name(&d.path) };
        settings.push_str(&format!(
            "\n[[adr.source]]\npath = {}\nengine = {}\n",
            toml_str(&d.path),
            toml_str(d.engine.as_str())
        ));
        if let Some(at) = &d.at {
            settings.push_str(&format!("at = {}\n", toml_str(at)));
        }
        if let Some(args) = &d.args {
            settings.push_str(&format!("args = {}\n", toml_str(args)));
        }
        settings.push_str(&format!("deployment = {}\n", toml_str(&deployment)));
    }

    let adr1 = ADR_0001.replace("{{DATE}}", date);
    let adr = infergate_policy::adr::parse::parse_adr(Path::new(ADR_0001_FILE), &adr1);
    let thresholds =
        infergate_policy::adr::live::generate(std::slice::from_ref(&adr)).map_err(|p| {
            anyhow::anyhow!(
                "ADR-0001's thresholds: {}",
                p.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("; ")
            )
        })?;
    let gate = crate::thresholds::file::render_file(&thresholds, "docs/adr");

    let workflow = |t: &str| {
        t.replace("{{VERSION}}", version)
            .replace("{{ENGINE_NAME}}", e.display())
            .replace("{{ENGINE}}", e.as_str())
            .replace("{{API_KEY_ENV}}", &api_key_env)
    };
    Ok(vec![
        file("configs/bench.toml", bench),
        file("configs/engine.toml", engine),
        file("configs/xtask.toml", settings),
        file("docs/adr/README.md", ADR_README.to_string()),
        file("docs/adr/template.md", ADR_TEMPLATE.to_string()),
        file(ADR_0001_FILE, adr1),
        file("thresholds/gate.toml", gate),
        file(".github/workflows/infergate.yml", workflow(PR_WORKFLOW)),
        file(".github/workflows/infergate-bench-gate.yml", workflow(BENCH_WORKFLOW)),
        file(".github/workflows/infergate-dataset-refresh.yml", workflow(DATASET_WORKFLOW)),
        Planned {
            path: ".gitignore".into(),
            text: format!("# infergate run directories\n{}\n", GITIGNORE_LINES.join("\n")),
            append_lines: true,
        },
    ]
    .into_iter()
    .chain(if cmd.xtask { xtask_crate(version) } else { Vec::new() })
    .collect())
}

/// The repository infergate is published from, whose tag `v<version>` the `--xtask` crate
/// depends on.
const REPOSITORY: &str = "https://github.com/infergate/infergate";

/// `init --xtask`: an `xtask/` crate whose `main` is infergate's entry point, pinned to the
/// tag of this version, and the cargo alias. A workspace at the root must list `xtask` in its
/// members (said in the output, never edited).
fn xtask_crate(version: &str) -> Vec<Planned> {
    let file = |path: &str, text: String| Planned { path: path.into(), text, append_lines: false };
    let manifest = format!(
        "# `cargo xtask ...`: infergate's commands in this repository (`infergate init --xtask`).\n\
         [package]\nname = \"xtask\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
         [dependencies]\n\
         # infergate by git revision: move the tag to take a newer release.\n\
         infergate = {{ package = \"xtask\", git = \"{REPOSITORY}\", tag = \"v{version}\" }}\n"
    );
    let main = "//! `cargo xtask ...`: infergate's commands (bench, adr, gate, ...) in this repository.\n\n\
                fn main() -> std::process::ExitCode {\n    \
                infergate::exit::quiet_broken_pipe();\n    \
                infergate::main_impl(std::env::args_os())\n}\n"
        .to_string();
    let alias =
        "[alias]\n# `cargo xtask bench`, `cargo xtask adr check`, ...: infergate (xtask/).\n\
                 xtask = \"run --quiet --package xtask --\"\n"
            .to_string();
    vec![
        file("xtask/Cargo.toml", manifest),
        file("xtask/src/main.rs", main),
        file(".cargo/config.toml", alias),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(engine: EngineKind) -> InitCmd {
        InitCmd {
            engine,
            base_url: Some("http://10.0.0.5:8000/v1".into()),
            model: Some("org/model".into()),
            api_key_env: None,
            from: vec![],
            force: false,
            xtask: false,
        }
    }

    /// `--xtask`: a crate cargo reads (its manifest checked by `cargo metadata`, which resolves
    /// nothing over the network with `--no-deps`), depending on this version's tag, whose main
    /// is the library's entry point, and the alias.
    #[test]
    fn the_xtask_crate_is_a_valid_manifest_on_this_versions_tag_with_the_alias() {
        let none = plan(&cmd(EngineKind::Vllm), &[], "2026-01-01").unwrap();
        assert!(!none.iter().any(|f| f.path.starts_with("xtask/")));
        let files =
            plan(&InitCmd { xtask: true, ..cmd(EngineKind::Vllm) }, &[], "2026-01-01").unwrap();
        let text = |p: &str| files.iter().find(|f| f.path == p).unwrap().text.clone();
        let manifest: toml::Table = toml::from_str(&text("xtask/Cargo.toml")).unwrap();
        let dep = &manifest["dependencies"]["infergate"];
        assert_eq!(dep["package"].as_str(), Some("xtask"));
        assert_eq!(dep["git"].as_str(), Some(REPOSITORY));
        assert_eq!(dep["tag"].as_str(), Some(format!("v{}", env!("CARGO_PKG_VERSION")).as_str()));
        assert!(text("xtask/src/main.rs").contains("infergate::main_impl(std::env::args_os())"));
        let alias: toml::Table = toml::from_str(&text(".cargo/config.toml")).unwrap();
        assert_eq!(alias["alias"]["xtask"].as_str(), Some("run --quiet --package xtask --"));
        let dir = tempfile::tempdir().unwrap();
        for f in files.iter().filter(|f| f.path.starts_with("xtask/")) {
            let path = dir.path().join(&f.path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, &f.text).unwrap();
        }
        let out = std::process::Command::new(env!("CARGO"))
            .args([
                "metadata",
                "--no-deps",
                "--format-version",
                "1",
                "--offline",
                "--manifest-path",
            ])
            .arg(dir.path().join("xtask/Cargo.toml"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(meta["packages"][0]["name"], "xtask");
        assert_eq!(meta["packages"][0]["dependencies"][0]["rename"], "infergate");
    }

    #[test]
    fn the_bench_file_loads_for_every_engine_with_a_default_sim_and_engine_profile() {
        for e in [
            EngineKind::Vllm,
            EngineKind::Sglang,
            EngineKind::LlamaCpp,
            EngineKind::Tgi,
            EngineKind::Trtllm,
        ] {
            let files = plan(&cmd(e), &[], "2026-01-01").unwrap();
            let bench = &files.iter().find(|f| f.path == "configs/bench.toml").unwrap().text;
            let c = infergate_model::config::BenchConfig::from_source(
                infergate_model::config::Source::new("configs/bench.toml", bench.clone()),
            )
            .unwrap_or_else(|err| panic!("{e:?}: {err}\n{bench}"));
            let names = c.profile_names();
            for p in ["default", "sim", e.as_str()] {
                assert!(names.iter().any(|n| n == p), "{e:?}: {names:?}");
            }
            let t = c.target(e.as_str()).unwrap();
            assert_eq!(t.base_url, "http://10.0.0.5:8000/v1");
            assert_eq!(t.model.as_deref(), Some("org/model"));
            assert_eq!(t.api_key_env.as_deref(), Some(e.api_key_env()));
            assert!(!bench.contains("{{"), "{bench}");
        }
    }

    #[test]
    fn gitignore_lines_are_appended_once() {
        assert_eq!(appended("/runs/\n/target/bench/\n", "# x\n/runs/\n/target/bench/\n"), None);
        assert_eq!(
            appended("node_modules", "# x\n/runs/\n/target/bench/\n").unwrap(),
            "node_modules\n/runs/\n/target/bench/\n"
        );
    }

    #[test]
    fn declarations_are_detected_from_the_content() {
        let helm = "servingEngineSpec:\n  modelSpec:\n    - vllmConfig:\n        maxNumSeqs: 8\n";
        let d = detect("values.yaml", helm, EngineKind::Vllm).unwrap();
        assert_eq!(d.at.as_deref(), Some("servingEngineSpec.modelSpec[0].vllmConfig"));
        let k8s = "kind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n        - name: side\n          image: x\n        - name: server\n          image: vllm/vllm-openai\n";
        let d = detect("k.yaml", k8s, EngineKind::Vllm).unwrap();
        assert_eq!(d.args.as_deref(), Some("spec.template.spec.containers[name=server].args"));
        let compose =
            "services:\n  api:\n    image: vllm/vllm-openai\n    command: --max-num-seqs 4\n";
        let d = detect("compose.yml", compose, EngineKind::Vllm).unwrap();
        assert_eq!(d.args.as_deref(), Some("services.api.command"));
        let d = detect("c.yaml", "max-num-seqs: 4\n", EngineKind::Vllm).unwrap();
        assert_eq!((d.at, d.args), (None, None));
        let d = detect("serve.sh", "vllm serve m\n", EngineKind::Sglang).unwrap();
        assert_eq!((d.at, d.args, d.engine), (None, None, EngineKind::Sglang));
        assert!(
            detect("k.yaml", k8s, EngineKind::Sglang).unwrap_err().to_string().contains("server")
        );
    }
}
