//! Governed sources: the engine parameters where a team deploys them, read into one vocabulary.
//!
//! A source is a file of the repository declared in `configs/xtask.toml` (`[[adr.source]]`,
//! [`SourceDecl`]): Helm values, a Kubernetes manifest, vLLM's `--config` YAML, a compose file,
//! a launch script or Dockerfile, a JSON or TOML file. One reader per format feeds one model:
//! [`extract`] returns the file's parameters as canonical keys of the engine config
//! (`scheduler.max_num_seqs`, ...), each with its value and the line it is written on, whatever
//! the engine's spelling (a flag, a YAML key, the Helm chart's camelCase). A spelling the
//! vocabulary does not know is a key of its own (`unmapped."--flag"`), never dropped.
//!
//! - [`path`]: key paths into a document (`a.b[0].c[name=vllm].args`);
//! - [`yaml`]: YAML (multi-document), JSON and TOML read into one located tree;
//! - [`cmdline`]: an engine's command line found in a script, a Dockerfile or a list of
//!   arguments, parsed into flags;
//! - [`vocab`]: each engine's spellings and their canonical keys, with the conversions that are
//!   not one to one.

pub mod cmdline;
pub mod path;
pub mod vocab;
pub mod yaml;

use std::fmt;

use serde::Deserialize;

pub use crate::engine_kind::EngineKind;

use crate::config::ConfigKey;

/// One `[[adr.source]]` of `configs/xtask.toml`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceDecl {
    /// A file of the repository, `/`-separated from its root; `*` matches any characters of
    /// one path segment.
    pub path: String,
    /// Whose spellings the file uses.
    pub engine: EngineKind,
    /// Where the parameters sit in a YAML, JSON or TOML file (a mapping of the engine's
    /// config keys); without it, at the top level.
    #[serde(default)]
    pub at: Option<String>,
    /// Where a command line sits in a YAML, JSON or TOML file (a list of arguments, or one
    /// string split as a shell would).
    #[serde(default)]
    pub args: Option<String>,
    /// Sources of one deployment must agree on every key they both give (`configs/engine.toml`
    /// belongs to `default`).
    #[serde(default = "default_deployment")]
    pub deployment: String,
}

fn default_deployment() -> String {
    "default".to_string()
}

/// One parameter of a source.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// The canonical dotted key (`scheduler.max_num_seqs`), or `unmapped."<spelling>"` for a
    /// spelling the vocabulary does not know.
    pub key: String,
    /// The value, typed as the engine config types it (an integer, a float, a boolean, a
    /// string); an unknown spelling's value as written (a string; `true` for a bare flag).
    pub value: toml::Value,
    /// 1-based line of the file the value is written on.
    pub line: usize,
    /// The spelling in the file (`--max-num-seqs`, `maxNumSeqs`, `-np`).
    pub spelling: String,
}

/// A source's parameters, one per key, sorted by key; and what the reader should know (a
/// conversion that is not one to one).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Extracted {
    pub params: Vec<Param>,
    pub notes: Vec<String>,
}

impl Extracted {
    /// The parameter at `key` (an `unmapped."<spelling>"` key as [`unmapped_key`] writes it).
    pub fn get(&self, key: &ConfigKey) -> Option<&Param> {
        self.params.iter().find(|p| p.key == key.as_str())
    }
}

/// Why a source cannot be read: the file, the line when there is one, and what is wrong and
/// what is valid.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct SourceError {
    pub file: String,
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{l}: {}", self.file, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

/// The parameters of `text`, the content of `file` (a path that `decl.path` matches), read as
/// `decl` says: the format by the file's name (`.yaml`/`.yml`, `.json`, `.toml`; anything else
/// is a script or Dockerfile whose engine command line is found in it).
pub fn extract(decl: &SourceDecl, file: &str, text: &str) -> Result<Extracted, SourceError> {
    let engine = decl.engine;
    let mut out = Collector::new(engine, file);
    let Some(format) = yaml::Format::of(file) else {
        if decl.at.is_some() || decl.args.is_some() {
            return Err(fail(
                file,
                None,
                "`at` and `args` name a place in a YAML, JSON or TOML file (.yaml, .yml, .json, \
                 .toml); a script or Dockerfile is declared with `path` and `engine` alone"
                    .into(),
            ));
        }
        let args = cmdline::find_in_script(engine, file, text)?;
        out.command_line(&args)?;
        return Ok(out.finish());
    };
    if decl.at.is_some() && decl.args.is_some() {
        return Err(fail(
            file,
            None,
            "a source has `at` (a mapping of parameters) or `args` (a command line), not both"
                .into(),
        ));
    }
    let docs = yaml::load(format, file, text)?;
    if let Some(args_path) = &decl.args {
        let (_, node, parent) = path::resolve_docs(file, &docs, args_path)?;
        let mut words = Vec::new();
        // A container's `command` holds the program, its `args` the flags.
        if args_path.trim_end().ends_with("args") {
            if let Some(command) = parent.and_then(|p| p.get("command")) {
                if !std::ptr::eq(&command.value, node) {
                    words.extend(words_of(file, &command.value, args_path)?);
                }
            }
        }
        words.extend(words_of(file, node, args_path)?);
        let args = cmdline::from_list(engine, file, &words)?;
        out.command_line(&args)?;
        return Ok(out.finish());
    }
    let map = match &decl.at {
        Some(at) => path::resolve_docs(file, &docs, at)?.1,
        None => {
            let present: Vec<&yaml::Node> =
                docs.iter().filter(|d| d.value != yaml::Value::Null).collect();
            match present.as_slice() {
                [one] => *one,
                [] => return Ok(out.finish()),
                [a, b, ..] => {
                    return Err(fail(
                        file,
                        Some(b.line),
                        format!(
                            "{} documents (lines {} and {}): without `at` the parameters sit at \
                             the top level of the one document; name the place with `at`",
                            docs.len(),
                            a.line,
                            b.line
                        ),
                    ));
                }
            }
        }
    };
    let yaml::Value::Map(entries) = &map.value else {
        return Err(fail(
            file,
            Some(map.line),
            format!(
                "{} is {}: the engine's parameters are a mapping of its config keys \
                 (`max-num-seqs: 256`); a command line is declared with `args`",
                decl.at.as_deref().map_or("the top level".to_string(), |a| format!("`{a}`")),
                map.kind()
            ),
        ));
    };
    out.mapping("", entries)?;
    Ok(out.finish())
}

fn fail(file: &str, line: Option<usize>, message: String) -> SourceError {
    SourceError { file: file.to_string(), line, message }
}

/// The words of a command line held at `path`: a list of scalars, or one string split as a
/// shell would.
fn words_of(file: &str, node: &yaml::Node, path: &str) -> Result<Vec<cmdline::Arg>, SourceError> {
    match &node.value {
        yaml::Value::List(items) => items
            .iter()
            .map(|x| match x.scalar_text() {
                Some(text) => Ok(cmdline::Arg { text, line: x.line }),
                None => Err(fail(
                    file,
                    Some(x.line),
                    format!(
                        "an argument of `{path}` is {}: a command line is a list of strings \
                         or one string",
                        x.kind()
                    ),
                )),
            })
            .collect(),
        yaml::Value::Str(s) => cmdline::split(s, node.line).map_err(|line| {
            fail(
                file,
                Some(line),
                "unbalanced quote: every `'` and `\"` of the command line must be closed".into(),
            )
        }),
        _ => Err(fail(
            file,
            Some(node.line),
            format!(
                "`{path}` is {}: `args` names a command line, a list of strings or one string",
                node.kind()
            ),
        )),
    }
}

/// A value as a source writes it.
enum Raw<'a> {
    /// A command-line value.
    Text(&'a str),
    /// A switch given alone.
    Bare,
    /// A value of a YAML, JSON or TOML mapping.
    Node(&'a yaml::Node),
}

/// `unmapped."<spelling>"`, the spelling as a TOML quoted key.
pub fn unmapped_key(spelling: &str) -> String {
    let mut quoted = String::from("unmapped.\"");
    for c in spelling.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            c if c.is_control() => quoted.push_str(&format!("\\u{:04X}", c as u32)),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

struct Collector<'f> {
    engine: EngineKind,
    file: &'f str,
    params: Vec<Param>,
    notes: Vec<String>,
    /// SGLang's `--chunked-prefill-size`, llama.cpp's `-c`, SGLang's `--max-prefill-tokens`.
    chunked: Option<(i64, usize, String)>,
    ctx: Option<(i64, usize, String)>,
    prefill: Option<(i64, usize, String)>,
}

impl<'f> Collector<'f> {
    fn new(engine: EngineKind, file: &'f str) -> Self {
        Collector {
            engine,
            file,
            params: Vec::new(),
            notes: Vec::new(),
            chunked: None,
            ctx: None,
            prefill: None,
        }
    }

    fn set(&mut self, key: &str, value: toml::Value, line: usize, spelling: &str) {
        if let Some(old) = self.params.iter_mut().find(|p| p.key == key) {
            self.notes.push(format!(
                "`{key}` is set twice (`{}` line {}, `{spelling}` line {line}): the last one counts",
                old.spelling, old.line
            ));
            *old = Param { key: key.into(), value, line, spelling: spelling.into() };
        } else {
            self.params.push(Param { key: key.into(), value, line, spelling: spelling.into() });
        }
    }

    fn note(&mut self, note: &str) {
        if !self.notes.iter().any(|n| n == note) {
            self.notes.push(note.to_string());
        }
    }

    fn bad(&self, line: usize, spelling: &str, ty: vocab::Type, found: &str) -> SourceError {
        fail(self.file, Some(line), format!("`{spelling}` takes {}, not {found}", ty.name()))
    }

    /// `raw` converted to `ty`.
    fn typed(
        &self,
        raw: &Raw<'_>,
        ty: vocab::Type,
        line: usize,
        spelling: &str,
    ) -> Result<toml::Value, SourceError> {
        use vocab::Type;
        use yaml::Value as V;
        let text = match raw {
            Raw::Bare => {
                return if ty == Type::Bool {
                    Ok(toml::Value::Boolean(true))
                } else {
                    Err(self.bad(line, spelling, ty, "nothing (the flag needs a value)"))
                };
            }
            Raw::Text(t) => t.to_string(),
            Raw::Node(n) => match (&n.value, ty) {
                (V::Int(i), Type::Int) => return Ok(toml::Value::Integer(*i)),
                (V::Int(i), Type::Float) => return Ok(toml::Value::Float(*i as f64)),
                (V::Float(f), Type::Float) if f.is_finite() => return Ok(toml::Value::Float(*f)),
                (V::Bool(b), Type::Bool) => return Ok(toml::Value::Boolean(*b)),
                (V::Str(s), _) => s.clone(),
                (V::List(_) | V::Map(_) | V::Null, _) => {
                    return Err(self.bad(line, spelling, ty, n.kind()));
                }
                (_, Type::Str) => n.scalar_text().unwrap_or_default(),
                _ => {
                    return Err(self.bad(
                        line,
                        spelling,
                        ty,
                        &format!("{} ({})", n.kind(), n.scalar_text().unwrap_or_default()),
                    ));
                }
            },
        };
        let t = text.trim();
        let value = match ty {
            Type::Int => t.parse::<i64>().ok().map(toml::Value::Integer),
            Type::Float => t.parse::<f64>().ok().filter(|f| f.is_finite()).map(toml::Value::Float),
            Type::Bool => match t.to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" | "on" => Some(toml::Value::Boolean(true)),
                "false" | "0" | "no" | "off" => Some(toml::Value::Boolean(false)),
                _ => None,
            },
            Type::Str => Some(toml::Value::String(text.clone())),
        };
        value.ok_or_else(|| self.bad(line, spelling, ty, &format!("`{text}`")))
    }

    /// One spelling and its value.
    fn add(
        &mut self,
        spelling: &str,
        row: Option<&'static vocab::Spelling>,
        raw: Raw<'_>,
        line: usize,
    ) -> Result<(), SourceError> {
        use vocab::{Rule, Type};
        let Some(row) = row else {
            let value = match raw {
                Raw::Bare => toml::Value::Boolean(true),
                Raw::Text(t) => toml::Value::String(t.to_string()),
                Raw::Node(n) => as_written(n),
            };
            self.set(&unmapped_key(spelling), value, line, spelling);
            return Ok(());
        };
        if let Some(note) = row.note {
            self.note(note);
        }
        match row.rule {
            Rule::Value(key, ty) => {
                let v = self.typed(&raw, ty, line, spelling)?;
                self.set(key, v, line, spelling);
            }
            Rule::Switch(key, on) => {
                let given = self.typed(&raw, Type::Bool, line, spelling)?;
                let b = given.as_bool() == Some(true);
                self.set(key, toml::Value::Boolean(if b { on } else { !on }), line, spelling);
            }
            Rule::Const(key, value) => {
                if self.typed(&raw, Type::Bool, line, spelling)?.as_bool() == Some(true) {
                    self.set(key, toml::Value::String(value.into()), line, spelling);
                }
            }
            Rule::ChunkedPrefillSize | Rule::CtxSize | Rule::MaxPrefillTokens => {
                let n = self.typed(&raw, Type::Int, line, spelling)?.as_integer().unwrap_or(0);
                let slot = Some((n, line, spelling.to_string()));
                match row.rule {
                    Rule::ChunkedPrefillSize => self.chunked = slot,
                    Rule::CtxSize => self.ctx = slot,
                    _ => self.prefill = slot,
                }
            }
        }
        Ok(())
    }

    /// The flags of a command line (the arguments after the program).
    fn command_line(&mut self, args: &[cmdline::Arg]) -> Result<(), SourceError> {
        let mut model_seen = false;
        for f in cmdline::flags(self.engine, args) {
            match &f.value {
                cmdline::FlagValue::Positional => {
                    if vocab::positional_model(self.engine) && !model_seen {
                        model_seen = true;
                        self.set(
                            "engine.model",
                            toml::Value::String(f.spelling.clone()),
                            f.line,
                            "(positional)",
                        );
                    } else {
                        self.add(&f.spelling, None, Raw::Text(&f.spelling), f.line)?;
                    }
                }
                cmdline::FlagValue::Given(v) => {
                    let row = vocab::flag(self.engine, &f.spelling);
                    self.add(&f.spelling, row, Raw::Text(v), f.line)?;
                }
                cmdline::FlagValue::Bare => {
                    let row = vocab::flag(self.engine, &f.spelling);
                    self.add(&f.spelling, row, Raw::Bare, f.line)?;
                }
            }
        }
        Ok(())
    }

    /// The entries of a mapping; nested mappings give dotted spellings, an `extraArgs` list is
    /// a command-line fragment.
    fn mapping(&mut self, prefix: &str, entries: &[yaml::Entry]) -> Result<(), SourceError> {
        for e in entries {
            let spelling =
                if prefix.is_empty() { e.key.clone() } else { format!("{prefix}.{}", e.key) };
            let row = vocab::key(self.engine, &spelling);
            match &e.value.value {
                yaml::Value::Map(inner) if row.is_none() => self.mapping(&spelling, inner)?,
                yaml::Value::List(_) if row.is_none() && is_extra_args(&e.key) => {
                    let words = words_of(self.file, &e.value, &spelling)?;
                    self.command_line(&words)?;
                }
                _ => self.add(&spelling, row, Raw::Node(&e.value), e.line)?,
            }
        }
        Ok(())
    }

    fn finish(mut self) -> Extracted {
        let int = toml::Value::Integer;
        if let Some((n, line, spelling)) = self.chunked.take() {
            if n > 0 {
                self.set(
                    "scheduler.enable_chunked_prefill",
                    toml::Value::Boolean(true),
                    line,
                    &spelling,
                );
                self.set("scheduler.max_num_batched_tokens", int(n), line, &spelling);
            } else {
                self.set(
                    "scheduler.enable_chunked_prefill",
                    toml::Value::Boolean(false),
                    line,
                    &spelling,
                );
            }
            if let Some((m, l, s)) = self.prefill.take() {
                if n > 0 {
                    self.set("sglang.max_prefill_tokens", int(m), l, &s);
                    self.note("--max-prefill-tokens is kept as sglang.max_prefill_tokens: with chunked prefill on, --chunked-prefill-size is the step's token budget");
                } else {
                    self.set("scheduler.max_num_batched_tokens", int(m), l, &s);
                }
            }
        }
        if let Some((m, l, s)) = self.prefill.take() {
            self.set("scheduler.max_num_batched_tokens", int(m), l, &s);
        }
        if let Some((c, line, spelling)) = self.ctx.take() {
            let slots = self
                .params
                .iter()
                .find(|p| p.key == "scheduler.max_num_seqs")
                .and_then(|p| p.value.as_integer());
            match slots {
                Some(np) if np > 0 => {
                    self.set("engine.max_model_len", int(c / np), line, &spelling);
                    self.note(&format!("{spelling} {c} is shared by {np} slots: engine.max_model_len = {c} / {np} = {}", c / np));
                }
                _ => {
                    self.set("llama_cpp.ctx_size", int(c), line, &spelling);
                    self.note(&format!("{spelling} {c} is kept as llama_cpp.ctx_size: without -np the number of slots, and so each request's context, is the server's default"));
                }
            }
        }
        self.params.sort_by(|a, b| a.key.cmp(&b.key));
        Extracted { params: self.params, notes: self.notes }
    }
}

fn is_extra_args(key: &str) -> bool {
    let k: String =
        key.chars().filter(|c| !matches!(c, '-' | '_')).flat_map(char::to_lowercase).collect();
    k == "extraargs"
}

/// An unknown spelling's value from a mapping: a scalar as its type, a list as an array.
fn as_written(n: &yaml::Node) -> toml::Value {
    match &n.value {
        yaml::Value::Null => toml::Value::String(String::new()),
        yaml::Value::Bool(b) => toml::Value::Boolean(*b),
        yaml::Value::Int(i) => toml::Value::Integer(*i),
        yaml::Value::Float(f) => toml::Value::Float(*f),
        yaml::Value::Str(s) => toml::Value::String(s.clone()),
        yaml::Value::List(items) => toml::Value::Array(items.iter().map(as_written).collect()),
        yaml::Value::Map(entries) => toml::Value::Table(
            entries.iter().map(|e| (e.key.clone(), as_written(&e.value))).collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ck(key: &str) -> ConfigKey {
        ConfigKey::parse(key).unwrap()
    }

    fn decl(engine: EngineKind, at: Option<&str>, args: Option<&str>) -> SourceDecl {
        SourceDecl {
            path: "x".into(),
            engine,
            at: at.map(Into::into),
            args: args.map(Into::into),
            deployment: "default".into(),
        }
    }

    fn vllm() -> SourceDecl {
        decl(EngineKind::Vllm, None, None)
    }

    /// Keys and values only (lines differ between spellings of one configuration).
    fn kv(x: &Extracted) -> Vec<(String, toml::Value)> {
        x.params.iter().map(|p| (p.key.clone(), p.value.clone())).collect()
    }

    fn seqs(x: &Extracted) -> (i64, usize) {
        let p = x.get(&ck("scheduler.max_num_seqs")).expect("max_num_seqs");
        (p.value.as_integer().unwrap(), p.line)
    }

    const VALUES: &str = "servingEngineSpec:\n  runtimeClassName: \"\"\n  modelSpec:\n  - name: \"llama3\"\n    repository: \"vllm/vllm-openai\"\n    modelURL: \"meta-llama/Llama-3.1-8B-Instruct\"\n    vllmConfig:\n      enableChunkedPrefill: false\n      enablePrefixCaching: true\n      maxModelLen: 8192\n      dtype: \"bfloat16\"\n      maxNumSeqs: 128\n      gpuMemoryUtilization: 0.9\n      maxNumBatchedTokens: \"8192\"\n      maxLoras: 4\n      extraArgs: [\"--disable-log-requests\", \"--block-size\", \"32\"]\n";

    #[test]
    fn production_stack_values() {
        let d = decl(EngineKind::Vllm, Some("servingEngineSpec.modelSpec[0].vllmConfig"), None);
        let x = extract(&d, "deploy/helm/values.yaml", VALUES).unwrap();
        assert_eq!(seqs(&x), (128, 12));
        assert_eq!(
            x.get(&ck("scheduler.max_num_batched_tokens")).unwrap().value,
            toml::Value::Integer(8192)
        );
        assert_eq!(
            x.get(&ck("scheduler.enable_chunked_prefill")).unwrap().value,
            toml::Value::Boolean(false)
        );
        assert_eq!(
            x.get(&ck("engine.gpu_memory_utilization")).unwrap().value,
            toml::Value::Float(0.9)
        );
        assert_eq!(x.get(&ck("scheduler.block_size")).unwrap().line, 16);
        assert_eq!(
            x.get(&ck("unmapped.\"--disable-log-requests\"")).unwrap().value,
            toml::Value::Boolean(true)
        );
        assert_eq!(x.get(&ck("unmapped.\"maxLoras\"")).unwrap().value, toml::Value::Integer(4));
        let by_name = decl(
            EngineKind::Vllm,
            Some("servingEngineSpec.modelSpec[name=llama3].vllmConfig"),
            None,
        );
        assert_eq!(kv(&extract(&by_name, "v.yaml", VALUES).unwrap()), kv(&x));
        // Re-indented, anchored, other quoting: the same parameters.
        let other = "common: &c\n  maxNumSeqs: '128'\n  gpuMemoryUtilization: 0.90\nservingEngineSpec:\n    modelSpec:\n        -   name: llama3\n            vllmConfig:\n                <<: *c\n                extraArgs:\n                  - --block-size=32\n                  - \"--disable-log-requests\"\n                maxNumBatchedTokens: 8192\n                dtype: bfloat16\n                maxLoras: 4\n                enablePrefixCaching: yes_no_typo\n";
        let e = extract(&d, "v.yaml", other).unwrap_err();
        assert_eq!(e.line, Some(15));
        assert!(e.message.contains("`enablePrefixCaching` takes a boolean"), "{e}");
        let other = other.replace(
            "yes_no_typo",
            "true\n                enableChunkedPrefill: false\n                maxModelLen: 8192",
        );
        assert_eq!(kv(&extract(&d, "v.yaml", &other).unwrap()), kv(&x));
    }

    #[test]
    fn deployment_with_two_containers() {
        let text = "apiVersion: v1\nkind: Service\nmetadata:\n  name: vllm\n---\napiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n      - name: proxy\n        args: [\"--max-num-seqs\", \"1\"]\n      - name: vllm\n        image: vllm/vllm-openai\n        command: [\"vllm\", \"serve\"]\n        args:\n        - meta-llama/Llama-3.1-8B-Instruct\n        - --max-num-seqs\n        - \"64\"\n        - --enable-chunked-prefill\n        - --unknown-flag=x\n";
        let d = decl(EngineKind::Vllm, None, Some("spec.template.spec.containers[name=vllm].args"));
        let x = extract(&d, "deploy/k8s/vllm.yaml", text).unwrap();
        assert_eq!(seqs(&x), (64, 19));
        assert_eq!(
            x.get(&ck("engine.model")).unwrap().value.as_str(),
            Some("meta-llama/Llama-3.1-8B-Instruct")
        );
        assert_eq!(
            x.get(&ck("scheduler.enable_chunked_prefill")).unwrap().value,
            toml::Value::Boolean(true)
        );
        assert_eq!(x.get(&ck("unmapped.\"--unknown-flag\"")).unwrap().value.as_str(), Some("x"));
        let d = decl(EngineKind::Vllm, None, Some("spec.template.spec.containers[name=nope].args"));
        let e = extract(&d, "k.yaml", text).unwrap_err();
        assert!(
            e.message.contains("resolves to nothing") && e.message.contains("`name=proxy`"),
            "{e}"
        );
        assert_eq!(e.line, Some(12));
    }

    #[test]
    fn vllm_config_json_and_toml() {
        let yaml = "model: m\nmax-num-seqs: 256\nmax_num_batched_tokens: 4096\nenable-chunked-prefill: true\ncompilation-config:\n  level: 3\n";
        let x = extract(&vllm(), "serve/vllm-config.yaml", yaml).unwrap();
        assert_eq!(seqs(&x), (256, 2));
        assert_eq!(
            x.get(&ck("unmapped.\"compilation-config.level\"")).unwrap().value,
            toml::Value::Integer(3)
        );
        let json = "{\n  \"model\": \"m\",\n  \"max-num-batched-tokens\": 4096,\n  \"max_num_seqs\": 256,\n  \"enable_chunked_prefill\": true,\n  \"compilation-config\": {\"level\": 3}\n}\n";
        let j = extract(&vllm(), "c.json", json).unwrap();
        assert_eq!(seqs(&j), (256, 4));
        assert_eq!(kv(&j), kv(&x));
        let toml_text = "model = \"m\"\nmax-num-batched-tokens = 4096\nenable-chunked-prefill = true\n\nmax-num-seqs = 256\n[compilation-config]\nlevel = 3\n";
        let t = extract(&vllm(), "c.toml", toml_text).unwrap();
        assert_eq!(seqs(&t), (256, 5));
        assert_eq!(kv(&t), kv(&x));
        let e = extract(&vllm(), "c.yaml", "max-num-seqs: many\n").unwrap_err();
        assert_eq!(e.line, Some(1));
        assert!(e.message.contains("`max-num-seqs` takes an integer, not `many`"), "{e}");
    }

    #[test]
    fn compose_command_as_string_and_list() {
        let string = "services:\n  vllm:\n    image: vllm/vllm-openai\n    command: >-\n      --model m --max-num-seqs 48 --gpu-memory-utilization 0.8\n";
        let d = decl(EngineKind::Vllm, None, Some("services.vllm.command"));
        let s = extract(&d, "compose.yaml", string).unwrap();
        assert_eq!(seqs(&s).0, 48);
        let list = "services:\n  vllm:\n    image: vllm/vllm-openai\n    command:\n      - --gpu-memory-utilization=0.8\n      - --max-num-seqs\n      - '48'\n      - --model\n      - m\n";
        let l = extract(&d, "compose.yml", list).unwrap();
        assert_eq!(seqs(&l), (48, 6));
        assert_eq!(kv(&l), kv(&s));
        let shell = "services:\n  vllm:\n    command: [\"sh\", \"-c\", \"vllm serve m --max-num-seqs 48 --gpu-memory-utilization 0.8\"]\n";
        assert_eq!(kv(&extract(&d, "compose.yml", shell).unwrap()), kv(&s));
        let bad = "services:\n  vllm:\n    command: \"vllm serve 'm --max-num-seqs 48\"\n";
        let e = extract(&d, "compose.yml", bad).unwrap_err();
        assert_eq!(e.line, Some(3));
        assert!(e.message.contains("unbalanced quote"), "{e}");
    }

    #[test]
    fn scripts_and_dockerfiles() {
        let script = "#!/usr/bin/env bash\nset -euo pipefail\nMODEL=${MODEL:-m}\nexec env VLLM_LOGGING_LEVEL=INFO vllm serve \"$MODEL\" \\\n  --max-num-seqs 96 \\\n  --no-enable-prefix-caching \\\n  --max-num-batched-tokens=2048\n";
        let x = extract(&vllm(), "scripts/serve.sh", script).unwrap();
        assert_eq!(seqs(&x), (96, 5));
        assert_eq!(
            x.get(&ck("scheduler.enable_prefix_caching")).unwrap().value,
            toml::Value::Boolean(false)
        );
        assert_eq!(x.get(&ck("engine.model")).unwrap().value.as_str(), Some("$MODEL"));
        // Reordered, `=` against a space, other quoting: the same parameters.
        let again = "exec vllm serve '$MODEL' --max-num-batched-tokens 2048 --no-enable-prefix-caching --max-num-seqs=\"96\"\n";
        assert_eq!(kv(&extract(&vllm(), "serve.sh", again).unwrap()), kv(&x));
        let exec = "FROM vllm/vllm-openai:v0.10.0\nRUN pip install x\nENTRYPOINT [\"python3\", \"-m\", \"vllm.entrypoints.openai.api_server\"]\nCMD [\"--model\", \"m\", \"--max-num-seqs\", \"96\"]\n";
        let d = extract(&vllm(), "Dockerfile", exec).unwrap();
        assert_eq!(seqs(&d), (96, 4));
        let shell = "FROM python:3.12\nCMD python -m vllm.entrypoints.openai.api_server --model m \\\n    --max-num-seqs 96\n";
        let s = extract(&vllm(), "deploy/Dockerfile", shell).unwrap();
        assert_eq!(seqs(&s), (96, 3));
        assert_eq!(kv(&s), kv(&d));
        let e = extract(&decl(EngineKind::Vllm, Some("a"), None), "serve.sh", script).unwrap_err();
        assert!(e.message.contains("YAML, JSON or TOML"), "{e}");
    }

    #[test]
    fn malformed_input_names_file_and_line() {
        let e = extract(&vllm(), "c.yaml", "max-num-seqs: 1\n  bad: [\n").unwrap_err();
        assert_eq!(e.file, "c.yaml");
        assert!(e.line.is_some() && e.message.contains("not valid YAML"), "{e}");
        let multi =
            "a:\n  vllmConfig:\n    maxNumSeqs: 1\n---\na:\n  vllmConfig:\n    maxNumSeqs: 2\n";
        let e = extract(&decl(EngineKind::Vllm, Some("a.vllmConfig"), None), "m.yaml", multi)
            .unwrap_err();
        assert!(e.message.contains("two documents") && e.line.is_some(), "{e}");
        let e = extract(&vllm(), "m.yaml", multi).unwrap_err();
        assert!(e.message.contains("`at`"), "{e}");
        let e =
            extract(&decl(EngineKind::Vllm, Some("a.nope"), None), "m.yaml", multi).unwrap_err();
        assert!(
            e.message.contains("resolves to nothing") && e.message.contains("`vllmConfig`"),
            "{e}"
        );
        let e =
            extract(&decl(EngineKind::Vllm, Some("a"), None), "s.yaml", "a: [1]\n").unwrap_err();
        assert!(e.message.contains("mapping") && e.line == Some(1), "{e}");
    }

    #[test]
    fn unknown_spellings_are_their_own_keys() {
        assert_eq!(unmapped_key("--a\"b"), "unmapped.\"--a\\\"b\"");
        let x = extract(
            &vllm(),
            "s.sh",
            "vllm serve m --trust-remote-code --port 8000 --seed=-1 --x -5\n",
        )
        .unwrap();
        let keys: Vec<&str> = x.params.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "engine.model",
                "unmapped.\"--port\"",
                "unmapped.\"--seed\"",
                "unmapped.\"--trust-remote-code\"",
                "unmapped.\"--x\""
            ]
        );
        assert_eq!(x.get(&ck("unmapped.\"--x\"")).unwrap().value.as_str(), Some("-5"));
    }

    fn value(x: &Extracted, key: &str) -> toml::Value {
        x.get(&ck(key)).unwrap_or_else(|| panic!("{key} in {:?}", x.params)).value.clone()
    }

    #[test]
    fn sglang_chunked_prefill_and_switches() {
        let d = decl(EngineKind::Sglang, None, None);
        let on = "python3 -m sglang.launch_server --model-path m --max-running-requests 32 \\\n  --chunked-prefill-size 4096 --max-prefill-tokens 16384 --disable-radix-cache \\\n  --mem-fraction-static 0.85 --disable-overlap-schedule --page-size 1\n";
        let x = extract(&d, "s.sh", on).unwrap();
        assert_eq!(seqs(&x), (32, 1));
        assert_eq!(value(&x, "scheduler.enable_chunked_prefill"), toml::Value::Boolean(true));
        assert_eq!(value(&x, "scheduler.max_num_batched_tokens"), toml::Value::Integer(4096));
        assert_eq!(value(&x, "sglang.max_prefill_tokens"), toml::Value::Integer(16384));
        assert_eq!(value(&x, "scheduler.enable_prefix_caching"), toml::Value::Boolean(false));
        assert_eq!(value(&x, "token_interval.async_scheduling"), toml::Value::Boolean(false));
        assert_eq!(value(&x, "engine.model"), toml::Value::String("m".into()));
        assert!(x.notes.iter().any(|n| n.contains("mem-fraction-static")), "{:?}", x.notes);
        let off = "python -m sglang.launch_server --model-path m --chunked-prefill-size -1 --max-prefill-tokens 8192\n";
        let x = extract(&d, "s.sh", off).unwrap();
        assert_eq!(value(&x, "scheduler.enable_chunked_prefill"), toml::Value::Boolean(false));
        assert_eq!(value(&x, "scheduler.max_num_batched_tokens"), toml::Value::Integer(8192));
    }

    #[test]
    fn llama_cpp_context_is_shared_by_the_slots() {
        let d = decl(EngineKind::LlamaCpp, None, None);
        let x = extract(&d, "run.sh", "/opt/llama.cpp/build/bin/llama-server -m /models/q.gguf -c 32768 -np 4 -ngl 99 -b 2048 --no-cache-prompt\n").unwrap();
        assert_eq!(seqs(&x).0, 4);
        assert_eq!(value(&x, "engine.max_model_len"), toml::Value::Integer(8192));
        assert_eq!(value(&x, "scheduler.max_num_batched_tokens"), toml::Value::Integer(2048));
        assert_eq!(value(&x, "scheduler.enable_prefix_caching"), toml::Value::Boolean(false));
        assert_eq!(value(&x, "unmapped.\"-ngl\""), toml::Value::String("99".into()));
        let x = extract(&d, "run.sh", "llama-server --model q.gguf --ctx-size 4096\n").unwrap();
        assert_eq!(value(&x, "llama_cpp.ctx_size"), toml::Value::Integer(4096));
        assert!(x.get(&ck("engine.max_model_len")).is_none());
        assert!(x.notes.iter().any(|n| n.contains("llama_cpp.ctx_size")), "{:?}", x.notes);
    }

    #[test]
    fn tgi_and_tensorrt_llm() {
        let d = decl(EngineKind::Tgi, None, None);
        let x = extract(&d, "Dockerfile", "FROM ghcr.io/huggingface/text-generation-inference\nENTRYPOINT [\"text-generation-launcher\", \"--model-id\", \"m\", \"--max-concurrent-requests\", \"128\", \"--max-batch-total-tokens\", \"100000\", \"--num-shard\", \"2\"]\n").unwrap();
        assert_eq!(seqs(&x).0, 128);
        assert_eq!(value(&x, "tgi.max_batch_total_tokens"), toml::Value::Integer(100000));
        assert_eq!(value(&x, "engine.tensor_parallel_size"), toml::Value::Integer(2));
        let d = decl(EngineKind::Trtllm, None, None);
        let x = extract(&d, "serve.sh", "trtllm-serve m --max_batch_size 64 --max_num_tokens 8192 --kv_cache_free_gpu_memory_fraction 0.9 --tp_size 2 --extra_llm_api_options opts.yaml\n").unwrap();
        assert_eq!(seqs(&x).0, 64);
        assert_eq!(value(&x, "trtllm.kv_cache_free_gpu_memory_fraction"), toml::Value::Float(0.9));
        assert!(x.get(&ck("engine.gpu_memory_utilization")).is_none());
        let opts = "max_batch_size: 64\nmax_num_tokens: 8192\nenable_chunked_prefill: true\nkv_cache_config:\n  free_gpu_memory_fraction: 0.9\n  enable_block_reuse: false\n";
        let y = extract(&d, "opts.yaml", opts).unwrap();
        assert_eq!(seqs(&y), (64, 1));
        assert_eq!(value(&y, "trtllm.kv_cache_free_gpu_memory_fraction"), toml::Value::Float(0.9));
        assert_eq!(value(&y, "scheduler.enable_prefix_caching"), toml::Value::Boolean(false));
    }

    use proptest::prelude::*;

    proptest! {
        #[test]
        fn arbitrary_arguments_never_panic(
            args in proptest::collection::vec(
                prop_oneof![
                    "[-a-z=0-9'\" \\\\]{0,12}",
                    Just("--max-num-seqs".to_string()),
                    Just("-c".to_string()),
                    Just("-np".to_string()),
                    Just("--chunked-prefill-size".to_string()),
                    Just("-1".to_string()),
                    Just("vllm".to_string()),
                    Just("serve".to_string()),
                ],
                0..12,
            ),
            engine in proptest::sample::select(EngineKind::ALL.to_vec()),
        ) {
            let list: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
            let yaml = format!("args: [{}]\n", list.join(", "));
            let _ = extract(&decl(engine, None, Some("args")), "a.yaml", &yaml);
            let _ = extract(&decl(engine, None, None), "s.sh", &format!("vllm serve {}\nllama-server {}\n", args.join(" "), args.join(" ")));
            let _ = extract(&decl(engine, None, Some("args")), "a.yaml", &format!("args: {:?}\n", args.join(" ")));
        }
    }
}
