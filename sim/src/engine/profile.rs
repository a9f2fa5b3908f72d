//! Built-in model and device profiles: the shapes and peak rates the cost model is built from.
//!
//! A model profile is found from `engine.model` (or `[sim] model_profile`) by matching its
//! patterns against the name with case and punctuation removed, so
//! `meta-llama/Meta-Llama-3.1-8B-Instruct` and `llama-3.1-8b` both find `llama-3.1-8b`.
//! A device profile is found the same way from `device.name` (or `[sim] device_profile`).
//! Figures are public spec-sheet values (dense tensor throughput, without sparsity).

/// The shape of a decoder-only transformer.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelProfile {
    /// Profile key, as `[sim] model_profile` names it.
    pub key: &'static str,
    /// Normalised substrings (lowercase letters and digits only) that select this profile;
    /// `a+b` needs both parts.
    pub patterns: &'static [&'static str],
    /// Parameters, in total.
    pub params: f64,
    pub layers: u32,
    pub hidden: u32,
    /// Query heads.
    pub heads: u32,
    /// Key/value heads (grouped-query attention).
    pub kv_heads: u32,
    pub head_dim: u32,
    pub intermediate: u32,
    pub vocab: u32,
    /// Longest context the model was trained for (the default max_model_len).
    pub max_position: u32,
}

impl ModelProfile {
    /// Parameters of the output projection (computed only for a sequence's last position).
    pub(crate) fn lm_head_params(&self) -> f64 {
        self.hidden as f64 * self.vocab as f64
    }
}

/// A GPU: memory, peak rates and the link used for tensor-parallel all-reduces.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceProfile {
    pub key: &'static str,
    pub patterns: &'static [&'static str],
    pub memory_gib: f64,
    /// Dense BF16/FP16 tensor throughput, TFLOP/s.
    pub bf16_tflops: f64,
    /// Dense FP8 tensor throughput, TFLOP/s (`None`: no FP8 tensor cores).
    pub fp8_tflops: Option<f64>,
    /// Memory bandwidth, GB/s.
    pub mem_bw_gbs: f64,
    /// GPU-to-GPU bandwidth per direction, GB/s (NVLink or PCIe).
    pub link_gbs: f64,
    /// Latency of one all-reduce, µs.
    pub allreduce_us: f64,
}

pub(crate) const MODELS: &[ModelProfile] = &[
    ModelProfile {
        key: "llama-3.1-8b",
        patterns: &["llama318b"],
        params: 8.03e9,
        layers: 32,
        hidden: 4096,
        heads: 32,
        kv_heads: 8,
        head_dim: 128,
        intermediate: 14336,
        vocab: 128256,
        max_position: 131072,
    },
    ModelProfile {
        key: "llama-3.1-70b",
        patterns: &["llama3170b", "llama3370b"],
        params: 70.55e9,
        layers: 80,
        hidden: 8192,
        heads: 64,
        kv_heads: 8,
        head_dim: 128,
        intermediate: 28672,
        vocab: 128256,
        max_position: 131072,
    },
    ModelProfile {
        key: "llama-3.2-1b",
        patterns: &["llama321b"],
        params: 1.24e9,
        layers: 16,
        hidden: 2048,
        heads: 32,
        kv_heads: 8,
        head_dim: 64,
        intermediate: 8192,
        vocab: 128256,
        max_position: 131072,
    },
    ModelProfile {
        key: "qwen2.5-7b",
        patterns: &["qwen257b"],
        params: 7.62e9,
        layers: 28,
        hidden: 3584,
        heads: 28,
        kv_heads: 4,
        head_dim: 128,
        intermediate: 18944,
        vocab: 152064,
        max_position: 32768,
    },
    ModelProfile {
        key: "mistral-7b",
        patterns: &["mistral7b"],
        params: 7.25e9,
        layers: 32,
        hidden: 4096,
        heads: 32,
        kv_heads: 8,
        head_dim: 128,
        intermediate: 14336,
        vocab: 32768,
        max_position: 32768,
    },
];

/// Most specific patterns first (`l40s` before `l4`, `h100+pcie` before `h100`).
pub(crate) const DEVICES: &[DeviceProfile] = &[
    DeviceProfile {
        key: "H100-PCIe-80GB",
        patterns: &["h100+pcie"],
        memory_gib: 80.0,
        bf16_tflops: 756.0,
        fp8_tflops: Some(1513.0),
        mem_bw_gbs: 2000.0,
        link_gbs: 64.0,
        allreduce_us: 25.0,
    },
    DeviceProfile {
        key: "H100-SXM-80GB",
        patterns: &["h100"],
        memory_gib: 80.0,
        bf16_tflops: 989.0,
        fp8_tflops: Some(1979.0),
        mem_bw_gbs: 3350.0,
        link_gbs: 450.0,
        allreduce_us: 10.0,
    },
    DeviceProfile {
        key: "H200-141GB",
        patterns: &["h200"],
        memory_gib: 141.0,
        bf16_tflops: 989.0,
        fp8_tflops: Some(1979.0),
        mem_bw_gbs: 4800.0,
        link_gbs: 450.0,
        allreduce_us: 10.0,
    },
    DeviceProfile {
        key: "A100-40GB",
        patterns: &["a100+40gb"],
        memory_gib: 40.0,
        bf16_tflops: 312.0,
        fp8_tflops: None,
        mem_bw_gbs: 1555.0,
        link_gbs: 300.0,
        allreduce_us: 12.0,
    },
    DeviceProfile {
        key: "A100-SXM-80GB",
        patterns: &["a100"],
        memory_gib: 80.0,
        bf16_tflops: 312.0,
        fp8_tflops: None,
        mem_bw_gbs: 2039.0,
        link_gbs: 300.0,
        allreduce_us: 12.0,
    },
    DeviceProfile {
        key: "L40S",
        patterns: &["l40s"],
        memory_gib: 48.0,
        bf16_tflops: 362.0,
        fp8_tflops: Some(733.0),
        mem_bw_gbs: 864.0,
        link_gbs: 32.0,
        allreduce_us: 30.0,
    },
    DeviceProfile {
        key: "L4",
        patterns: &["l4"],
        memory_gib: 24.0,
        bf16_tflops: 121.0,
        fp8_tflops: Some(242.0),
        mem_bw_gbs: 300.0,
        link_gbs: 32.0,
        allreduce_us: 30.0,
    },
    DeviceProfile {
        key: "RTX-4090",
        patterns: &["4090"],
        memory_gib: 24.0,
        bf16_tflops: 165.0,
        fp8_tflops: Some(330.0),
        mem_bw_gbs: 1008.0,
        link_gbs: 32.0,
        allreduce_us: 40.0,
    },
];

/// Lowercase letters and digits only.
pub(crate) fn normalize(name: &str) -> String {
    name.chars().filter(|c| c.is_ascii_alphanumeric()).map(|c| c.to_ascii_lowercase()).collect()
}

/// The model profile a name selects: an exact profile key, or the first whose pattern occurs in
/// the normalised name.
pub(crate) fn find_model(name: &str) -> Option<&'static ModelProfile> {
    let n = normalize(name);
    MODELS
        .iter()
        .find(|m| normalize(m.key) == n)
        .or_else(|| MODELS.iter().find(|m| matches(m.patterns, &n)))
}

pub(crate) fn find_device(name: &str) -> Option<&'static DeviceProfile> {
    let n = normalize(name);
    DEVICES
        .iter()
        .find(|d| normalize(d.key) == n)
        .or_else(|| DEVICES.iter().find(|d| matches(d.patterns, &n)))
}

fn matches(patterns: &[&str], normalized: &str) -> bool {
    patterns.iter().any(|p| p.split('+').all(|part| normalized.contains(part)))
}

pub(crate) fn model_keys() -> String {
    MODELS.iter().map(|m| m.key).collect::<Vec<_>>().join(", ")
}

pub(crate) fn device_keys() -> String {
    DEVICES.iter().map(|d| d.key).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_find_their_profiles() {
        let m = |n: &str| find_model(n).map(|p| p.key);
        assert_eq!(m("meta-llama/Llama-3.1-8B-Instruct"), Some("llama-3.1-8b"));
        assert_eq!(m("meta-llama/Meta-Llama-3.1-8B-Instruct"), Some("llama-3.1-8b"));
        assert_eq!(m("meta-llama/Llama-3.3-70B-Instruct"), Some("llama-3.1-70b"));
        assert_eq!(m("Qwen/Qwen2.5-7B-Instruct"), Some("qwen2.5-7b"));
        assert_eq!(m("Qwen/Qwen2.5-72B-Instruct"), None);
        assert_eq!(m("mistral-7b"), Some("mistral-7b"));
        let d = |n: &str| find_device(n).map(|p| p.key);
        assert_eq!(d("NVIDIA H100 80GB HBM3"), Some("H100-SXM-80GB"));
        assert_eq!(d("H100 PCIe"), Some("H100-PCIe-80GB"));
        assert_eq!(d("NVIDIA A100-SXM4-40GB"), Some("A100-40GB"));
        assert_eq!(d("a100-sxm-80gb"), Some("A100-SXM-80GB"));
        assert_eq!(d("NVIDIA L40S"), Some("L40S"));
        assert_eq!(d("NVIDIA L4"), Some("L4"));
        assert_eq!(d("MI300X"), None);
    }
}
