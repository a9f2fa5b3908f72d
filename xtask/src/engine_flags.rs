//! The command line that starts vLLM or SGLang with exactly the parameters of an engine config.
//!
//! Every value is rendered explicitly, defaults included, so the deployment does not depend on
//! an engine version's own defaults. Parameters that do not map one to one are returned as
//! notes. `engine args` prints the result ([`Format`]: a shell command, or the deployment
//! file's fragment: Helm values, a container's `args`, vLLM's `--config` YAML, a compose
//! `command:`); `engine serve` starts vLLM with it.

use clap::ValueEnum;
use clap::builder::TypedValueParser;
use infergate_model::EngineKind;
use infergate_model::config::{EngineConfig, SchedulerPolicy};

use crate::text::quote;

/// The engines a command line is rendered for: vLLM (`vllm serve`) and SGLang
/// (`python -m sglang.launch_server`).
pub const RENDERED: [EngineKind; 2] = [EngineKind::Vllm, EngineKind::Sglang];

/// An `--engine` value: one of `kinds`, by its name ([`EngineKind::as_str`]). The commands
/// that serve only some engines accept only those, listed in their help.
pub fn engine_value(kinds: &'static [EngineKind]) -> impl TypedValueParser<Value = EngineKind> {
    clap::builder::PossibleValuesParser::new(kinds.iter().map(|k| k.as_str()))
        .map(|name| name.parse::<EngineKind>().expect("every possible value names an engine"))
}

/// A command line and what the reader should know about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendered {
    /// The program and its leading arguments (`vllm serve <model>`).
    pub program: Vec<String>,
    /// Flags, each with its value if it takes one.
    pub flags: Vec<(String, Option<String>)>,
    /// Parameters that map only approximately, or not at all.
    pub notes: Vec<String>,
}

impl Rendered {
    /// Every argument, in order.
    pub fn argv(&self) -> Vec<String> {
        let mut argv = self.program.clone();
        for (flag, value) in &self.flags {
            argv.push(flag.clone());
            argv.extend(value.clone());
        }
        argv
    }

    /// A copy-pasteable shell command, one flag per line.
    pub fn shell(&self) -> String {
        let mut out = self.program.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ");
        for (flag, value) in &self.flags {
            out.push_str(" \\\n  ");
            out.push_str(&quote(flag));
            if let Some(v) = value {
                out.push(' ');
                out.push_str(&quote(v));
            }
        }
        out
    }
}

/// How `engine args` writes a rendered command line: where the team keeps its parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A shell command, one flag per line.
    Shell,
    /// The vLLM production-stack chart's `vllmConfig` (camelCase fields; the flags the chart
    /// has no field for in `extraArgs`), to paste under `servingEngineSpec.modelSpec[N]`.
    HelmValues,
    /// A Kubernetes container's `command` and `args`.
    K8sArgs,
    /// vLLM's `--config` YAML (`max-num-seqs: 256`).
    VllmConfig,
    /// A compose service's `command:` (after the image's `vllm serve` entrypoint).
    Compose,
}

/// The production-stack chart's `vllmConfig` fields, by vLLM flag.
const HELM_FIELDS: &[(&str, &str)] = &[
    ("--dtype", "dtype"),
    ("--tensor-parallel-size", "tensorParallelSize"),
    ("--gpu-memory-utilization", "gpuMemoryUtilization"),
    ("--max-model-len", "maxModelLen"),
    ("--max-num-seqs", "maxNumSeqs"),
    ("--enable-chunked-prefill", "enableChunkedPrefill"),
    ("--enable-prefix-caching", "enablePrefixCaching"),
];

/// A rendered command line written as `format`; an error for a format the engine has no such
/// file for (the Helm chart and the `--config` YAML are vLLM's).
pub fn write(r: &Rendered, engine: EngineKind, format: Format) -> Result<String, String> {
    use yaml_rust2::Yaml;
    use yaml_rust2::yaml::Hash;
    let s = |v: &str| Yaml::String(v.to_string());
    let list = |items: &[String]| Yaml::Array(items.iter().map(|a| s(a)).collect());
    // A switch as a field: `--no-x` is `x: false`, `--x` is `x: true`.
    let fields = || {
        r.flags.iter().map(|(flag, value)| {
            let (name, v) = match (flag.strip_prefix("--no-"), value) {
                (Some(name), None) => (format!("--{name}"), Yaml::Boolean(false)),
                (None, None) => (flag.clone(), Yaml::Boolean(true)),
                (_, Some(v)) => (flag.clone(), typed(v)),
            };
            (name, v)
        })
    };
    let vllm_only = |what: &str| {
        if engine == EngineKind::Vllm {
            Ok(())
        } else {
            Err(format!("{what} is vLLM's; render --engine vllm, or --format k8s-args or compose"))
        }
    };
    let mut doc = Hash::new();
    match format {
        Format::Shell => return Ok(format!("{}\n", r.shell())),
        Format::K8sArgs => {
            let program = match engine {
                EngineKind::Vllm => r.program[..2].to_vec(),
                _ => r.program.clone(),
            };
            let args: Vec<String> = r.argv().into_iter().skip(program.len()).collect();
            doc.insert(s("command"), list(&program));
            doc.insert(s("args"), list(&args));
        }
        Format::Compose => {
            let args = match engine {
                EngineKind::Vllm => r.argv().into_iter().skip(2).collect(),
                _ => r.argv(),
            };
            doc.insert(s("command"), list(&args));
        }
        Format::VllmConfig => {
            vllm_only("the --config YAML")?;
            doc.insert(s("model"), s(&r.program[2]));
            for (name, v) in fields() {
                doc.insert(s(name.trim_start_matches('-')), v);
            }
        }
        Format::HelmValues => {
            vllm_only("the production-stack chart")?;
            let mut cfg = Hash::new();
            let mut extra = Vec::new();
            for ((name, v), (flag, value)) in fields().zip(&r.flags) {
                match HELM_FIELDS.iter().find(|(f, _)| *f == name) {
                    Some((_, field)) => {
                        cfg.insert(s(field), v);
                    }
                    None => {
                        extra.push(flag.clone());
                        extra.extend(value.clone());
                    }
                }
            }
            if !extra.is_empty() {
                cfg.insert(s("extraArgs"), list(&extra));
            }
            let mut spec = Hash::new();
            spec.insert(s("modelURL"), s(&r.program[2]));
            spec.insert(s("vllmConfig"), Yaml::Hash(cfg));
            doc.insert(s("modelSpec"), Yaml::Array(vec![Yaml::Hash(spec)]));
            let mut top = Hash::new();
            top.insert(s("servingEngineSpec"), Yaml::Hash(doc));
            return Ok(crate::text::yaml(&Yaml::Hash(top)));
        }
    }
    Ok(crate::text::yaml(&Yaml::Hash(doc)))
}

/// A flag's value as YAML: an integer, a float or a boolean as such, else a string.
fn typed(v: &str) -> yaml_rust2::Yaml {
    use yaml_rust2::Yaml;
    if let Ok(i) = v.parse::<i64>() {
        Yaml::Integer(i)
    } else if v.parse::<f64>().is_ok_and(f64::is_finite) {
        Yaml::Real(v.to_string())
    } else if let Ok(b) = v.parse::<bool>() {
        Yaml::Boolean(b)
    } else {
        Yaml::String(v.to_string())
    }
}

/// The command line of `engine` with the parameters of `cfg`, or why there is none (an
/// engine outside [`RENDERED`]).
pub fn render(cfg: &EngineConfig, engine: EngineKind) -> Result<Rendered, String> {
    match engine {
        EngineKind::Vllm => Ok(render_vllm(cfg)),
        EngineKind::Sglang => Ok(render_sglang(cfg)),
        other => Err(format!(
            "no command line is rendered for {other}: one of {}",
            EngineKind::names(&RENDERED)
        )),
    }
}

fn flag(name: &str, value: impl ToString) -> (String, Option<String>) {
    (name.to_string(), Some(value.to_string()))
}

fn switch(name: &str) -> (String, Option<String>) {
    (name.to_string(), None)
}

/// Sections the engines do not read.
fn common_notes(cfg: &EngineConfig, notes: &mut Vec<String>) {
    if cfg.device.is_some() {
        notes.push(
            "[device] describes the hardware (simulator, cost); it is not an engine flag".into(),
        );
    }
    if !cfg.sim.is_empty() {
        notes.push("[sim] configures the simulator only; it is not an engine flag".into());
    }
    if !cfg.batch.is_default() {
        notes.push(
            "[batch] selects the simulator's batching strategy; the engine batches continuously"
                .into(),
        );
    }
}

/// `vllm serve` flags. Every parameter of the file has a vLLM flag.
pub(crate) fn render_vllm(cfg: &EngineConfig) -> Rendered {
    let e = &cfg.engine;
    let s = &cfg.scheduler;
    let mut notes = Vec::new();
    let mut flags = vec![flag("--dtype", e.dtype.as_str())];
    if let Some(q) = e.quantization {
        flags.push(flag("--quantization", q.as_str()));
    }
    flags.push(flag("--tensor-parallel-size", e.tensor_parallel_size));
    flags.push(flag("--gpu-memory-utilization", e.gpu_memory_utilization));
    match e.max_model_len {
        Some(l) => flags.push(flag("--max-model-len", l)),
        None => notes.push(
            "max_model_len is not set: vLLM takes the model's own context length".to_string(),
        ),
    }
    flags.push(flag("--max-num-seqs", s.max_num_seqs));
    match cfg.max_num_batched_tokens() {
        Some(n) => flags.push(flag("--max-num-batched-tokens", n)),
        None => notes.push(
            "max_num_batched_tokens is not set and chunked prefill is off: vLLM sizes it from \
             the model's context length"
                .to_string(),
        ),
    }
    flags.push(switch(if s.enable_chunked_prefill {
        "--enable-chunked-prefill"
    } else {
        "--no-enable-chunked-prefill"
    }));
    flags.push(switch(if s.enable_prefix_caching {
        "--enable-prefix-caching"
    } else {
        "--no-enable-prefix-caching"
    }));
    flags.push(flag("--scheduling-policy", s.scheduler_policy.as_str()));
    flags.push(flag("--block-size", s.block_size));
    flags.push(switch(if cfg.token_interval.async_scheduling {
        "--async-scheduling"
    } else {
        "--no-async-scheduling"
    }));
    common_notes(cfg, &mut notes);
    Rendered { program: vec!["vllm".into(), "serve".into(), e.model.clone()], flags, notes }
}

/// `python -m sglang.launch_server` flags, where SGLang has an equivalent.
pub(crate) fn render_sglang(cfg: &EngineConfig) -> Rendered {
    let e = &cfg.engine;
    let s = &cfg.scheduler;
    let mut notes = Vec::new();
    let mut flags = vec![flag("--model-path", &e.model), flag("--dtype", e.dtype.as_str())];
    if let Some(q) = e.quantization {
        flags.push(flag("--quantization", q.as_str()));
    }
    flags.push(flag("--tp-size", e.tensor_parallel_size));
    flags.push(flag("--mem-fraction-static", e.gpu_memory_utilization));
    notes.push(
        "gpu_memory_utilization -> --mem-fraction-static is approximate: SGLang's fraction covers \
         weights and KV cache, with activations outside it; compare the KV cache size both \
         engines log at startup"
            .to_string(),
    );
    if let Some(l) = e.max_model_len {
        flags.push(flag("--context-length", l));
    }
    flags.push(flag("--max-running-requests", s.max_num_seqs));
    match (s.enable_chunked_prefill, cfg.max_num_batched_tokens()) {
        (true, Some(n)) => {
            flags.push(flag("--chunked-prefill-size", n));
            notes.push(
                "max_num_batched_tokens -> --chunked-prefill-size is approximate: SGLang caps the \
                 prefill tokens of a step, decode tokens are not counted against it"
                    .to_string(),
            );
        }
        (false, n) => {
            flags.push(flag("--chunked-prefill-size", -1));
            if let Some(n) = n {
                flags.push(flag("--max-prefill-tokens", n));
            }
        }
        (true, None) => unreachable!("chunked prefill always has a budget"),
    }
    if !s.enable_prefix_caching {
        flags.push(switch("--disable-radix-cache"));
    }
    flags.push(flag("--schedule-policy", "fcfs"));
    if s.scheduler_policy == SchedulerPolicy::Priority {
        flags.push(switch("--enable-priority-scheduling"));
        flags.push(switch("--schedule-low-priority-values-first"));
    }
    flags.push(flag("--page-size", s.block_size));
    if !cfg.token_interval.async_scheduling {
        flags.push(switch("--disable-overlap-schedule"));
    }
    common_notes(cfg, &mut notes);
    Rendered {
        program: vec!["python".into(), "-m".into(), "sglang.launch_server".into()],
        flags,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_model::config::Source;

    fn cfg(text: &str) -> EngineConfig {
        EngineConfig::from_source(&Source::new("engine.toml", text)).unwrap()
    }

    const BASE: &str = "[engine]\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\ndtype = \"bfloat16\"\n\
        max_model_len = 8192\n[scheduler]\nmax_num_seqs = 128\nmax_num_batched_tokens = 8192\n\
        enable_chunked_prefill = false\n[device]\nname = \"H100-SXM-80GB\"\n";

    #[test]
    fn vllm_gets_every_parameter_explicitly() {
        let r = render_vllm(&cfg(BASE));
        assert_eq!(
            r.argv().join(" "),
            "vllm serve meta-llama/Llama-3.1-8B-Instruct --dtype bfloat16 \
             --tensor-parallel-size 1 --gpu-memory-utilization 0.9 --max-model-len 8192 \
             --max-num-seqs 128 --max-num-batched-tokens 8192 --no-enable-chunked-prefill \
             --enable-prefix-caching --scheduling-policy fcfs --block-size 16 \
             --no-async-scheduling"
        );
        assert!(r.notes.iter().any(|n| n.contains("[device]")));
        let tuned = render_vllm(&cfg(&BASE
            .replace("enable_chunked_prefill = false", "enable_chunked_prefill = true")
            .replace("dtype = \"bfloat16\"", "quantization = \"fp8\"\ntensor_parallel_size = 2")
            .replace("[device]", "scheduler_policy = \"priority\"\n[token_interval]\nasync_scheduling = true\n[device]")));
        let argv = tuned.argv().join(" ");
        for part in [
            "--dtype auto --quantization fp8 --tensor-parallel-size 2",
            "--enable-chunked-prefill",
            "--scheduling-policy priority",
            "--async-scheduling",
        ] {
            assert!(argv.contains(part), "{part} in {argv}");
        }
    }

    #[test]
    fn defaults_are_rendered_and_unknowns_noted() {
        let r = render_vllm(&cfg("[engine]\nmodel = \"m\"\n"));
        let argv = r.argv().join(" ");
        assert!(argv.contains("--max-num-seqs 256 --max-num-batched-tokens 8192"), "{argv}");
        assert!(!argv.contains("--max-model-len"));
        assert!(r.notes.iter().any(|n| n.contains("context length")), "{:?}", r.notes);
        let r = render_vllm(&cfg(
            "[engine]\nmodel = \"m\"\n[scheduler]\nenable_chunked_prefill = false\n",
        ));
        assert!(!r.argv().join(" ").contains("--max-num-batched-tokens"));
    }

    #[test]
    fn sglang_maps_what_it_can() {
        let r = render_sglang(&cfg(BASE));
        assert_eq!(
            r.argv().join(" "),
            "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct \
             --dtype bfloat16 --tp-size 1 --mem-fraction-static 0.9 --context-length 8192 \
             --max-running-requests 128 --chunked-prefill-size -1 --max-prefill-tokens 8192 \
             --schedule-policy fcfs --page-size 16 --disable-overlap-schedule"
        );
        assert!(r.notes.iter().any(|n| n.contains("mem-fraction-static")));
        let r = render_sglang(&cfg(&BASE
            .replace("enable_chunked_prefill = false", "enable_chunked_prefill = true\nenable_prefix_caching = false\nscheduler_policy = \"priority\"")
            .replace("[device]", "[token_interval]\nasync_scheduling = true\n[device]")));
        let argv = r.argv().join(" ");
        assert!(argv.contains("--chunked-prefill-size 8192 --disable-radix-cache"), "{argv}");
        assert!(argv.contains("--enable-priority-scheduling --schedule-low-priority-values-first"));
        assert!(!argv.contains("overlap"));
        assert!(r.notes.iter().any(|n| n.contains("decode tokens")));
    }

    #[test]
    fn shell_output_quotes_what_needs_it() {
        let r = render_vllm(&cfg("[engine]\nmodel = \"/models/my model\"\n"));
        let sh = r.shell();
        assert!(sh.starts_with("vllm serve '/models/my model' \\\n  --dtype auto \\\n"), "{sh}");
    }

    /// Every format, read back through the governed sources' readers (written apart from this
    /// renderer, from the engines' own spellings), gives the engine config's values.
    #[test]
    fn every_format_reads_back_through_the_sources_as_the_engine_config() {
        use infergate_model::sources::{SourceDecl, extract};
        let c = cfg(&BASE.replace(
            "enable_chunked_prefill = false",
            "enable_chunked_prefill = true\nenable_prefix_caching = false",
        ));
        let r = render_vllm(&c);
        let e = &c.engine;
        let sch = &c.scheduler;
        let expected: Vec<(&str, toml::Value)> = vec![
            ("engine.model", e.model.clone().into()),
            ("engine.dtype", e.dtype.as_str().into()),
            ("engine.tensor_parallel_size", i64::from(e.tensor_parallel_size).into()),
            ("engine.gpu_memory_utilization", e.gpu_memory_utilization.into()),
            ("engine.max_model_len", i64::from(e.max_model_len.unwrap()).into()),
            ("scheduler.max_num_seqs", i64::from(sch.max_num_seqs).into()),
            (
                "scheduler.max_num_batched_tokens",
                i64::from(c.max_num_batched_tokens().unwrap()).into(),
            ),
            ("scheduler.enable_chunked_prefill", true.into()),
            ("scheduler.enable_prefix_caching", false.into()),
            ("scheduler.scheduler_policy", sch.scheduler_policy.as_str().into()),
            ("scheduler.block_size", i64::from(sch.block_size).into()),
            ("token_interval.async_scheduling", c.token_interval.async_scheduling.into()),
        ];
        let decl = |path: &str, at: Option<&str>, args: Option<&str>| SourceDecl {
            path: path.into(),
            engine: EngineKind::Vllm,
            at: at.map(String::from),
            args: args.map(String::from),
            deployment: "default".into(),
        };
        let cases = [
            (Format::Shell, decl("serve.sh", None, None), "serve.sh"),
            (Format::K8sArgs, decl("c.yaml", None, Some("args")), "c.yaml"),
            (Format::VllmConfig, decl("v.yaml", None, None), "v.yaml"),
            (Format::Compose, decl("d.yml", None, Some("command")), "d.yml"),
            (
                Format::HelmValues,
                decl("values.yaml", Some("servingEngineSpec.modelSpec[0].vllmConfig"), None),
                "values.yaml",
            ),
        ];
        for (format, decl, file) in cases {
            let text = write(&r, EngineKind::Vllm, format).unwrap();
            let got =
                extract(&decl, file, &text).unwrap_or_else(|e| panic!("{format:?}: {e}\n{text}"));
            for (key, want) in &expected {
                if format == Format::HelmValues && *key == "engine.model" {
                    continue; // the chart names the model in modelURL, outside vllmConfig
                }
                let param = got
                    .get(&infergate_model::config::ConfigKey::parse(key).unwrap())
                    .unwrap_or_else(|| panic!("{format:?}: no {key} in\n{text}"));
                assert_eq!(&param.value, want, "{format:?} {key}:\n{text}");
            }
            let unmapped: Vec<&str> = got
                .params
                .iter()
                .map(|p| p.key.as_str())
                .filter(|k| k.starts_with("unmapped."))
                .collect();
            assert!(unmapped.is_empty(), "{format:?}: {unmapped:?}\n{text}");
        }
        assert!(write(&render_sglang(&c), EngineKind::Sglang, Format::HelmValues).is_err());
    }

    #[test]
    fn the_engine_flag_takes_the_one_engine_kind_and_refuses_an_engine_without_a_renderer() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[arg(long, value_parser = engine_value(&RENDERED))]
            engine: EngineKind,
        }
        let parsed = Cli::try_parse_from(["x", "--engine", "sglang"]).unwrap();
        assert_eq!(parsed.engine, EngineKind::Sglang);
        let e = Cli::try_parse_from(["x", "--engine", "tgi"]).err().unwrap().to_string();
        assert!(e.contains("[possible values: vllm, sglang]"), "{e}");
        let c = cfg("[engine]\nmodel = \"m\"\n");
        let e = render(&c, EngineKind::LlamaCpp).unwrap_err();
        assert_eq!(e, "no command line is rendered for llama-cpp: one of vllm, sglang");
    }
}
