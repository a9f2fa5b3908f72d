//! The environment a threshold holds for: GPU model and count, engine, model, dtype and
//! quantization, taken from a run's summary ([`EnvironmentKey::of`]).
//!
//! A latency limit set on one GPU says little about another (a 200 ms TTFT line on an A100 is
//! 100 ms on an H100), so a decision record keys its thresholds by the environment it measured,
//! and the gate applies them to runs of that environment only. For a run on the embedded
//! simulator the GPU is the simulated device of the engine config's `[device]` (name and
//! count), the engine the simulator and the model the engine config's; for a real target the
//! GPU the run recorded (`environment.gpu`), the engine the server names in `/v1/models`
//! (`owned_by`, else the target's name) and the target's model. The derivation of the device
//! and the engine is shared with the noise history's fingerprint
//! ([`crate::history::fingerprint_of`]).
//!
//! The text form is stable, written in records and in `thresholds/gate.toml`:
//!
//! ```text
//! gpu=H100-SXM-80GB x1; engine=infergate-sim; model=meta-llama/Llama-3.1-8B-Instruct; dtype=bfloat16
//! ```
//!
//! with `; quantization=fp8` after the dtype when the engine config quantizes, and `gpu=none`
//! for a run without a GPU.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::summary::Summary;

/// The engine name of the embedded simulator in an environment key (without the tool version:
/// a key must not change with each release).
pub(crate) const SIM_ENGINE: &str = "infergate-sim";

/// The shape of the text form, for error messages.
pub(crate) const KEY_SHAPE: &str = "`gpu=NAME xCOUNT; engine=ENGINE; model=MODEL; dtype=DTYPE` (then \
                             `; quantization=METHOD` when quantized; `gpu=none` without a GPU)";

/// The environment a run measured, or a threshold holds for.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EnvironmentKey {
    /// The GPU model (`H100-SXM-80GB`, `NVIDIA A100-SXM4-80GB`), or `none`.
    pub gpu: String,
    /// GPUs of that model (0 with `none`).
    pub gpu_count: u32,
    /// `infergate-sim`, or the engine the server names (`vllm`, `llamacpp`).
    pub engine: String,
    /// The served model.
    pub model: String,
    /// The engine config's `engine.dtype` (`auto` when it leaves it to the checkpoint),
    /// `unknown` when the run names no engine config.
    pub dtype: String,
    /// The engine config's `engine.quantization`, when set.
    pub quantization: Option<String>,
}

/// The simulated device of a simulator run: `[device]` `name` and `count` (1 when unset) of
/// the engine config it ran; `None` when the run has no `[device]` (the timing simulator).
pub(crate) fn simulated_device(s: &Summary) -> Option<(String, u32)> {
    device_of(&s.engine.as_ref()?.params)
}

/// `[device]` `name` and `count` (1 when unset) of an engine config's parameters.
fn device_of(params: &serde_json::Value) -> Option<(String, u32)> {
    let device = params.get("device")?;
    let name = device.get("name")?.as_str()?.to_string();
    let count = device.get("count").and_then(|c| c.as_u64()).unwrap_or(1) as u32;
    Some((name, count))
}

/// The engine a real target's server names for itself (`owned_by` of the first model its
/// `/v1/models` lists), when it does.
pub(crate) fn served_by(s: &Summary) -> Option<&str> {
    s.target.models.as_ref()?.pointer("/data/0/owned_by")?.as_str()
}

/// A text setting of an engine config's parameters (`/engine/dtype`).
fn text_at(params: &serde_json::Value, pointer: &str) -> Option<String> {
    params.pointer(pointer).and_then(|v| v.as_str()).map(str::to_string)
}

impl EnvironmentKey {
    /// The environment a run measured.
    pub fn of(s: &Summary) -> EnvironmentKey {
        let params = s.engine.as_ref().map(|e| &e.params);
        if let (true, Some(params)) = (s.simulated, params) {
            return EnvironmentKey::simulated(params);
        }
        let (gpu, gpu_count) = match (&s.environment.gpu, s.simulated) {
            (Some(g), false) => (g.name.clone(), g.count),
            // The timing simulator models no device.
            _ => ("none".into(), 0),
        };
        let engine = match s.simulated {
            true => SIM_ENGINE,
            false => served_by(s).unwrap_or(&s.target.name),
        };
        EnvironmentKey {
            gpu,
            gpu_count,
            engine: engine.to_string(),
            model: s.target.model.clone(),
            dtype: params.map_or_else(
                || "unknown".into(),
                |p| text_at(p, "/engine/dtype").unwrap_or_else(|| "auto".into()),
            ),
            quantization: params.and_then(|p| text_at(p, "/engine/quantization")),
        }
        .cleaned()
    }

    /// The simulated environment of an engine config's parameters (as a summary records them),
    /// before any run: what [`EnvironmentKey::of`] gives a simulator run of that config.
    pub fn simulated(params: &serde_json::Value) -> EnvironmentKey {
        let (gpu, gpu_count) = device_of(params).unwrap_or_else(|| ("none".into(), 0));
        EnvironmentKey {
            gpu,
            gpu_count,
            engine: SIM_ENGINE.into(),
            model: text_at(params, "/engine/model").unwrap_or_default(),
            dtype: text_at(params, "/engine/dtype").unwrap_or_else(|| "auto".into()),
            quantization: text_at(params, "/engine/quantization"),
        }
        .cleaned()
    }

    /// Characters the text form reserves (`;`, `=`, `|`, backticks, line breaks) replaced by
    /// `_`, blank fields named `unknown`: any summary gives a key that reads back.
    fn cleaned(mut self) -> EnvironmentKey {
        let clean = |v: &mut String| {
            let t: String = v
                .trim()
                .chars()
                .map(|c| if matches!(c, ';' | '=' | '|' | '`') || c.is_control() { '_' } else { c })
                .collect();
            *v = if t.is_empty() { "unknown".into() } else { t };
        };
        for v in [&mut self.gpu, &mut self.engine, &mut self.model, &mut self.dtype] {
            clean(v);
        }
        if let Some(q) = &mut self.quantization {
            clean(q);
        }
        if self.gpu == "none" {
            self.gpu_count = 0;
        }
        self
    }

    /// The GPU part: `H100-SXM-80GB x1`, or `none`.
    pub fn gpu_text(&self) -> String {
        if self.gpu == "none" { "none".into() } else { format!("{} x{}", self.gpu, self.gpu_count) }
    }
}

impl fmt::Display for EnvironmentKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "gpu={}; engine={}; model={}; dtype={}",
            self.gpu_text(),
            self.engine,
            self.model,
            self.dtype
        )?;
        if let Some(q) = &self.quantization {
            write!(f, "; quantization={q}")?;
        }
        Ok(())
    }
}

/// Why a text is not an environment key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("environment `{text}` is not valid: {why}; write {KEY_SHAPE}")]
pub struct KeyError {
    pub text: String,
    pub why: String,
}

impl FromStr for EnvironmentKey {
    type Err = KeyError;

    fn from_str(text: &str) -> Result<EnvironmentKey, KeyError> {
        let err = |why: String| KeyError { text: text.trim().to_string(), why };
        let mut fields: Vec<(&str, &str)> = Vec::new();
        for part in text.split(';') {
            let Some((k, v)) = part.split_once('=') else {
                return Err(err(format!("`{}` is not `field=value`", part.trim())));
            };
            let (k, v) = (k.trim(), v.trim());
            if !["gpu", "engine", "model", "dtype", "quantization"].contains(&k) {
                return Err(err(format!(
                    "unknown field `{k}` (valid: gpu, engine, model, dtype, quantization)"
                )));
            }
            if fields.iter().any(|(f, _)| *f == k) {
                return Err(err(format!("field `{k}` is given twice")));
            }
            if v.is_empty() || v.contains(['=', '|', '`']) {
                return Err(err(format!(
                    "field `{k}` needs a value without `=`, `|` or backticks"
                )));
            }
            fields.push((k, v));
        }
        let get = |k: &str| fields.iter().find(|(f, _)| *f == k).map(|(_, v)| v.to_string());
        let missing: Vec<&str> =
            ["gpu", "engine", "model", "dtype"].into_iter().filter(|k| get(k).is_none()).collect();
        if !missing.is_empty() {
            return Err(err(format!("missing {}", missing.join(", "))));
        }
        let gpu_field = get("gpu").unwrap_or_default();
        let (gpu, gpu_count) = if gpu_field == "none" {
            ("none".to_string(), 0)
        } else {
            let count = gpu_field
                .rsplit_once(" x")
                .and_then(|(name, n)| Some((name.trim(), n.parse::<u32>().ok()?)))
                .filter(|(name, n)| !name.is_empty() && *n > 0);
            match count {
                Some((name, n)) => (name.to_string(), n),
                None => {
                    return Err(err(format!(
                        "gpu `{gpu_field}` is not `NAME xCOUNT` (`H100-SXM-80GB x1`) or `none`"
                    )));
                }
            }
        };
        Ok(EnvironmentKey {
            gpu,
            gpu_count,
            engine: get("engine").unwrap_or_default(),
            model: get("model").unwrap_or_default(),
            dtype: get("dtype").unwrap_or_default(),
            quantization: get("quantization"),
        })
    }
}

impl Serialize for EnvironmentKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for EnvironmentKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<EnvironmentKey, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H100: &str = "gpu=H100-SXM-80GB x1; engine=infergate-sim; model=meta-llama/Llama-3.1-8B-Instruct; dtype=bfloat16";

    #[test]
    fn the_text_form_reads_back_and_names_what_is_valid() {
        let k: EnvironmentKey = H100.parse().unwrap();
        assert_eq!(
            (k.gpu.as_str(), k.gpu_count, k.engine.as_str()),
            ("H100-SXM-80GB", 1, SIM_ENGINE)
        );
        assert_eq!(k.to_string(), H100);
        let q: EnvironmentKey =
            "gpu = NVIDIA A100-SXM4-80GB x8 ;engine=vllm; model=m; dtype=float16; quantization=awq"
                .parse()
                .unwrap();
        assert_eq!((q.gpu.as_str(), q.gpu_count), ("NVIDIA A100-SXM4-80GB", 8));
        assert_eq!(
            q.to_string(),
            "gpu=NVIDIA A100-SXM4-80GB x8; engine=vllm; model=m; dtype=float16; quantization=awq"
        );
        let none: EnvironmentKey =
            "gpu=none; engine=llamacpp; model=g; dtype=unknown".parse().unwrap();
        assert_eq!((none.gpu_count, none.gpu_text()), (0, "none".to_string()));
        for (bad, why) in [
            ("H100", "`H100` is not `field=value`"),
            ("gpu=H100; engine=e; model=m; dtype=d", "gpu `H100` is not `NAME xCOUNT`"),
            ("gpu=H100 x0; engine=e; model=m; dtype=d", "is not `NAME xCOUNT`"),
            ("gpu=H100 x1; engine=e; model=m", "missing dtype"),
            ("gpu=H100 x1; engine=e; model=m; dtype=d; host=x", "unknown field `host`"),
            ("gpu=H100 x1; gpu=A100 x1; engine=e; model=m; dtype=d", "`gpu` is given twice"),
        ] {
            let e = bad.parse::<EnvironmentKey>().unwrap_err().to_string();
            assert!(e.contains(why) && e.contains("gpu=NAME xCOUNT; engine=ENGINE"), "{bad}: {e}");
        }
    }

    #[test]
    fn keys_compare_every_field() {
        let h100: EnvironmentKey = H100.parse().unwrap();
        let a100: EnvironmentKey = H100.replace("H100-SXM-80GB", "A100-80GB").parse().unwrap();
        let two: EnvironmentKey = H100.replace("x1", "x2").parse().unwrap();
        let fp8: EnvironmentKey = format!("{H100}; quantization=fp8").parse().unwrap();
        assert_ne!(h100, a100);
        assert_ne!(h100, two);
        assert_ne!(h100, fp8);
        assert_eq!(h100, H100.parse().unwrap());
    }

    #[test]
    fn an_engine_config_gives_the_simulated_key_and_reserved_characters_are_replaced() {
        let params = serde_json::json!({
            "engine": {"model": "meta-llama/Llama-3.1-8B-Instruct", "dtype": "bfloat16"},
            "device": {"name": "H100-SXM-80GB", "count": 1},
        });
        assert_eq!(EnvironmentKey::simulated(&params).to_string(), H100);
        let odd =
            serde_json::json!({"engine": {"model": "a;b=c"}, "device": {"name": "X", "count": 2}});
        let k = EnvironmentKey::simulated(&odd);
        assert_eq!(k.to_string(), "gpu=X x2; engine=infergate-sim; model=a_b_c; dtype=auto");
        assert_eq!(k.to_string().parse::<EnvironmentKey>().unwrap(), k);
    }
}
