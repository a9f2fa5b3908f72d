//! `configs/bench.toml`: targets and named bench profiles.
//!
//! ```toml
//! [targets.local-vllm]
//! base_url = "http://127.0.0.1:8000"      # with or without /v1
//! model = "meta-llama/Llama-3.1-8B-Instruct"
//! api_key_env = "VLLM_API_KEY"             # the key itself only ever lives in the environment
//! engine_config = "configs/engine.toml"    # the governed parameters this server runs with
//!
//! [profile.default]                        # used when no --profile is given
//! [profile.default.load]
//! concurrency = 16
//!
//! [profile.nightly]
//! inherits = "default"                     # profiles layer over their parent
//! target = "local-vllm"
//! ```
//!
//! Resolution: built-in defaults, then `[profile.default]`, then the chain of `inherits` down to
//! the chosen profile, then command-line overrides. Unknown keys and bad values are refused with
//! the file, the line and the valid choices.
//!
//! By phase, as the options, the configuration and the settings: `schema` (what the file may
//! say: every section's options and their defaults), `target` (a server's access: headers,
//! credentials from the environment, a CA bundle), `resolve` (the file loaded, a profile's
//! `inherits` chain and the command line's overrides merged into a `ResolvedProfile`) and
//! `validate` (the checks of a resolved profile against the documented bounds).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::limits::{
    self, Low, MAX_BURSTINESS, MAX_CONCURRENCY, MAX_RATE, MAX_REQUEST_TOKENS, MAX_REQUESTS,
    MAX_SECONDS, MAX_WORKLOAD_ITEMS, MIN_BURSTINESS, MIN_RATE,
};
use super::source::{ConfigError, Invalid, Source};
use crate::metrics::Slo;

mod resolve;
mod schema;
mod target;
mod validate;

pub use resolve::*;
pub use schema::*;
pub use target::*;
pub use validate::*;

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> Result<BenchConfig, ConfigError> {
        BenchConfig::from_source(Source::new("configs/bench.toml", text))
    }

    #[test]
    fn unknown_key_is_refused_at_its_line_with_valid_choices() {
        let err = cfg("[profile.default.load]\nconcurrency = 4\nconcurency = 8\n").unwrap_err();
        assert_eq!(err.line, Some(3), "{err}");
        let msg = err.to_string();
        assert!(msg.starts_with("configs/bench.toml:3:"), "{msg}");
        assert!(msg.contains("concurency") && msg.contains("concurrency"), "{msg}");
    }

    #[test]
    fn bad_enum_value_lists_choices() {
        let err = cfg("[profile.default.load]\nmode = \"sideways\"\n").unwrap_err();
        assert_eq!(err.line, Some(2), "{err}");
        assert!(err.message.contains("closed") && err.message.contains("open"), "{err}");
    }

    #[test]
    fn semantic_errors_point_at_the_layer_that_set_them() {
        let c = cfg("[profile.default.load]\nconcurrency = 4\n\n[profile.fast]\n[profile.fast.load]\nconcurrency = 0\n").unwrap();
        assert_eq!(c.resolve("default", &[]).unwrap().profile.load.concurrency, 4);
        let err = c.resolve("fast", &[]).unwrap_err();
        assert_eq!(err.line, Some(6), "{err}");
        assert!(err.message.contains("within 1..=100000"), "{err}");
        let err =
            c.resolve("default", &[Override::parse("load.concurrency=0").unwrap()]).unwrap_err();
        assert!(err.to_string().contains("--set load.concurrency=0"), "{err}");
    }

    #[test]
    fn profiles_inherit_and_overrides_win() {
        let c = cfg(
            "[profile.default]\nstream = false\n[profile.default.workload]\nmax_tokens = 64\nrepeats = 3\n\
             [profile.a]\n[profile.a.workload]\nrepeats = 5\n\
             [profile.b]\ninherits = \"a\"\n[profile.b.load]\nconcurrency = 2\n",
        )
        .unwrap();
        let b =
            c.resolve("b", &[Override::parse("workload.max_tokens=16").unwrap()]).unwrap().profile;
        assert!(!b.stream);
        assert_eq!(b.workload.repeats, 5);
        assert_eq!(b.workload.max_tokens, 16);
        assert_eq!(b.load.concurrency, 2);
        assert_eq!(b.workload.input_lengths, vec![128, 256, 512, 1024]);
        let err = c.resolve("nope", &[]).unwrap_err();
        assert!(err.message.contains("a, b, default"), "{err}");
    }

    #[test]
    fn override_values_are_typed() {
        let o = Override::parse("workload.input_lengths=[16, 32]").unwrap();
        assert_eq!(o.value, toml::Value::Array(vec![16.into(), 32.into()]));
        let o = Override::parse("endpoint=completions").unwrap();
        assert_eq!(o.value, toml::Value::String("completions".into()));
        assert_eq!(
            Override::parse("novalue").unwrap_err().to_string(),
            "`novalue`: expected KEY=VALUE, e.g. load.concurrency=64"
        );
        assert_eq!(
            Override::parse("load..x=1").unwrap_err().to_string(),
            "`load..x=1`: `load..x` is not a dotted key like load.concurrency"
        );
        let c = BenchConfig::builtin();
        let sets = ["load.concurrency=4", "load.concurrency.x=1"];
        let o: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
        let err = c.resolve("default", &o).unwrap_err();
        assert_eq!(
            err.to_string(),
            "<command line>: --set load.concurrency.x=1: `load.concurrency` is a value, not a table"
        );
        assert_eq!(
            c.target("gw").unwrap_err().to_string(),
            "no target `gw` in <built-in defaults>; defined targets: (none)"
        );
        let err =
            c.resolve("default", &[Override::parse("load.concurrency=lots").unwrap()]).unwrap_err();
        assert!(err.to_string().contains("--set load.concurrency=lots"), "{err}");
        let err = c.resolve("default", &[Override::parse("load.nope=1").unwrap()]).unwrap_err();
        assert!(err.message.contains("nope"), "{err}");
    }

    #[test]
    fn every_duration_rate_size_and_count_is_bounded_and_named_by_its_override() {
        let c = BenchConfig::builtin();
        for (set, range) in [
            ("load.duration_s=1e300", "(0, 604800] seconds (a week), got 1e300"),
            ("load.rate=1e-300", "[0.001, 1000000] requests per second, got 1e-300"),
            ("client.request_timeout_s=1e20", "(0, 604800] seconds"),
            ("client.stall_timeout_s=1e300", "(0, 604800] seconds"),
            ("client.grace_s=1e300", "[0, 604800] seconds"),
            ("client.grace_s=nan", "got NaN"),
            ("load.warmup_s=1e300", "[0, 604800] seconds"),
            ("load.warmup_s=-inf", "got -inf"),
            ("sim.timing.itl_ms=1e300", "[0, 604800000] ms (a week)"),
            ("sim.timing.ttft_ms=1e300", "[0, 604800000] ms"),
            ("sim.faults.stall_ms=1e300", "[0, 604800000] ms"),
            ("sim.faults.freeze_at_ms=inf", "[0, 604800000] ms"),
            ("scrape.interval_s=1e10", "[0.01, 604800] seconds"),
            ("slo.ttft_ms=1e300", "(0, 604800000] ms"),
            ("load.burstiness=1e-300", "[0.01, 100]"),
            ("workload.input_lengths=[128, 4000000000]", "1..=1048576 tokens, got 4000000000"),
            ("workload.max_tokens=4000000000", "1..=1048576 tokens, got 4000000000"),
            ("load.concurrency=4000000000", "1..=100000 requests, got 4000000000"),
            ("load.max_concurrency=200000", "1..=100000 requests"),
            ("load.requests=18446744073709551", "1..=1000000000 requests"),
            ("load.warmup_requests=9000000000000", "0..=1000000000 requests"),
            ("load.warmup_trials=1001", "0..=1000 trials, got 1001"),
            ("workload.repeats=4000000000", "1..=10000000, got 4000000000"),
            ("workload.repeats=5000000", "4 prompt lengths x 5000000 repeats = 20000000"),
            ("sim.timing.tokens_per_chunk=4000000000", "1..=1048576 tokens"),
            ("sim.timing.output_tokens=2000000", "1..=1048576 tokens"),
        ] {
            let o = Override::parse(set).unwrap();
            let err = c.resolve("default", &[o]).unwrap_err().to_string();
            assert!(err.starts_with(&format!("<command line>: --set {set}: ")), "{set}: {err}");
            assert!(err.contains("must be within") || err.contains("more than"), "{err}");
            assert!(err.contains(range), "{set}: {err}");
        }
        // The bounds themselves are valid.
        let ok = [
            "load.duration_s=604800",
            "load.rate=0.001",
            "load.rate=1000000",
            "client.grace_s=0",
            "load.concurrency=100000",
            "workload.max_tokens=1048576",
        ];
        let o: Vec<Override> = ok.iter().map(|s| Override::parse(s).unwrap()).collect();
        c.resolve("default", &o).unwrap();
    }

    #[test]
    fn out_of_range_numbers_in_the_file_are_refused_at_their_line() {
        let c = cfg("[profile.default.client]\ngrace_s = 5\nrequest_timeout_s = 1e20\n").unwrap();
        let err = c.resolve("default", &[]).unwrap_err();
        assert_eq!(err.line, Some(3), "{err}");
        assert!(err.to_string().starts_with("configs/bench.toml:3:1: client.request_timeout_s: must be within (0, 604800] seconds (a week), got 1e20"), "{err}");
        let c = cfg("[profile.default.workload]\ninput_lengths = [4000000000]\n").unwrap();
        let err = c.resolve("default", &[]).unwrap_err();
        assert_eq!(err.line, Some(2), "{err}");
        assert!(err.message.contains("every prompt length must be within 1..=1048576"), "{err}");
    }

    #[test]
    fn length_distributions_are_checked_at_their_line() {
        let c = cfg("[profile.default.workload]\nsamples = 5\n\
                     [profile.default.workload.input_distribution]\nkind = \"uniform\"\n\
                     min = 90\nmax = 30\n")
        .unwrap();
        let err = c.resolve("default", &[]).unwrap_err();
        assert_eq!(err.line, Some(5), "{err}");
        assert!(err.message.contains("workload.input_distribution.min: must not exceed max (30)"));
        let err =
            cfg("[profile.default.workload.output_distribution]\nkind = \"zipf\"\n").unwrap_err();
        assert_eq!(err.line, Some(2), "{err}");
        assert!(err.message.contains("lognormal") && err.message.contains("empirical"), "{err}");
        let ok =
            cfg("[profile.default.workload.input_distribution]\nkind = \"fixed\"\nvalue = 7\n")
                .unwrap();
        let p = ok.resolve("default", &[]).unwrap().profile;
        assert_eq!(
            p.workload.input_distribution,
            Some(super::super::LengthDist::Fixed { value: 7 })
        );
        let err = ok.resolve("default", &[Override::parse("workload.samples=0").unwrap()]);
        assert!(err.unwrap_err().to_string().contains("--set workload.samples=0"));
    }

    #[test]
    fn a_trace_replay_needs_its_file_and_its_mode() {
        let c = cfg("[profile.default.load]\nmode = \"trace\"\n").unwrap();
        let err = c.resolve("default", &[]).unwrap_err();
        assert!(err.message.contains("needs workload.trace = <file>"), "{err}");
        let c = cfg("[profile.default.workload]\ntrace = \"t.jsonl\"\n").unwrap();
        let err = c.resolve("default", &[]).unwrap_err();
        assert!(err.message.contains("load.mode = \"trace\""), "{err}");
        let ok = cfg("[profile.default.load]\nmode = \"trace\"\ntime_scale = 0.5\n\
                      [profile.default.workload]\ntrace = \"t.csv\"\ntrace_format = \"burstgpt\"\n")
        .unwrap();
        let p = ok.resolve("default", &[]).unwrap().profile;
        assert_eq!((p.load.mode, p.load.time_scale), (LoadMode::Trace, 0.5));
        assert_eq!(p.workload.trace_format, TraceFormat::Burstgpt);
        for (set, want) in [
            ("load.time_scale=0", "(0, 1000]"),
            ("load.trace_start_s=-1", "[0, 604800] seconds"),
            ("load.trace_duration_s=0", "(0, 604800] seconds"),
            ("load.max_rate=0", "requests per second"),
            ("workload.trace_block_tokens=0", "1..=1048576 tokens"),
            ("workload.trace_format=parquet", "mooncake"),
        ] {
            let err = ok.resolve("default", &[Override::parse(set).unwrap()]).unwrap_err();
            assert!(err.to_string().contains(&format!("--set {set}")), "{set}: {err}");
            assert!(err.to_string().contains(want), "{set}: {err}");
        }
    }

    #[test]
    fn conversations_are_checked_with_the_keys_they_need() {
        let ok = cfg("[profile.default.load]\nrate = 2.0\n\
                      [profile.default.workload]\nconversations = \"c.json\"\n\
                      [profile.default.workload.think_time_ms]\nkind = \"fixed\"\nvalue = 500\n")
        .unwrap();
        let p = ok.resolve("default", &[]).unwrap().profile;
        assert_eq!(p.workload.conversation_turns, TurnMode::Sessions);
        assert_eq!(p.workload.files(), vec![("workload.conversations", "c.json")]);
        for (set, want) in [
            ("load.mode=\"open\"", "sessions run in a closed loop"),
            ("workload.trace=\"t.csv\"", "load.mode = \"trace\""),
            ("workload.dataset=\"d.jsonl\"", "excludes workload.trace and workload.dataset"),
            ("workload.conversation_turns=\"first\"", "think time is between turns"),
            ("workload.conversation_format=\"csv\"", "sharegpt"),
        ] {
            let err = ok.resolve("default", &[Override::parse(set).unwrap()]).unwrap_err();
            assert!(err.to_string().contains(want), "{set}: {err}");
        }
        let zero = cfg("[profile.default.workload]\nconversations = \"c.json\"\n\
                        [profile.default.workload.think_time_ms]\nkind = \"fixed\"\nvalue = 0\n")
        .unwrap();
        let err = zero.resolve("default", &[]).unwrap_err().to_string();
        assert!(
            err.contains("workload.think_time_ms.value: must be within 1..=1048576 ms"),
            "{err}"
        );
        let err = cfg("[profile.default.workload]\nmax_tokens_from_answer = true\n")
            .unwrap()
            .resolve("default", &[])
            .unwrap_err();
        assert!(err.to_string().contains("recorded answers come from workload.conversations"));
    }

    #[test]
    fn headers_take_secrets_from_the_environment_only() {
        let c = cfg("[targets.gw]\nbase_url = \"https://gw\"\n[targets.gw.headers]\n\
                     X-Tenant = \"bench\"\nX-Api-Key = { env = \"GW_KEY\" }\n\
                     Authorization = { env = \"GW_AUTH\" }\n")
        .unwrap();
        let t = c.target("gw").unwrap();
        assert_eq!(t.headers["X-Tenant"], HeaderValue::Literal("bench".into()));
        assert_eq!(t.headers["X-Api-Key"], HeaderValue::Env { env: "GW_KEY".into() });
        let env = |v: &str| match v {
            "GW_KEY" => Some("k-123".to_string()),
            "GW_AUTH" => Some("Basic abc".to_string()),
            _ => None,
        };
        let values = t.header_values(env).unwrap();
        assert_eq!(values.len(), 3);
        assert!(values.contains(&("X-Api-Key".into(), "k-123".into())));
        let err = t.header_values(|_| None).unwrap_err().to_string();
        assert!(err.contains("GW_AUTH is not set") || err.contains("GW_KEY is not set"), "{err}");
        let err = t.header_values(|_| Some("abc\r\nX-Evil: 1".into())).unwrap_err().to_string();
        assert!(err.contains("newline") && !err.contains("abc"), "{err}");
        // The parsed config writes back as it was read.
        let text = toml::to_string(t).unwrap();
        assert!(
            text.contains("X-Api-Key = { env = \"GW_KEY\" }") || text.contains("[headers]"),
            "{text}"
        );

        for (line3, line, want) in [
            ("X-Api-Key = \"k-123\"", 4, "looks like a credential"),
            ("Cookie = \"s=1\"", 4, "looks like a credential"),
            ("\"Bad Name\" = \"x\"", 4, "not a valid header name"),
            ("Host = \"other\"", 4, "set by the client itself"),
            ("X-Route = { env = \"not a name\" }", 4, "NAME of an environment variable"),
            ("X-Route = { file = \"x\" }", 4, "{ env = \"VAR_NAME\" }"),
            ("X-Route = 3", 4, "a header value is a string"),
            ("X-Route = \" padded\"", 4, "surrounding whitespace"),
        ] {
            let text =
                format!("[targets.gw]\nbase_url = \"https://gw\"\n[targets.gw.headers]\n{line3}\n");
            let err = cfg(&text).unwrap_err();
            assert_eq!(err.line, Some(line), "{line3}: {err}");
            assert!(err.message.contains(want), "{line3}: {err}");
            assert!(!err.message.contains("k-123") && !err.message.contains("s=1"), "{err}");
        }
        let err = cfg("[targets.gw]\nbase_url = \"https://gw\"\napi_key_env = \"K\"\n\
                       [targets.gw.headers]\nauthorization = { env = \"A\" }\n")
        .unwrap_err();
        assert_eq!(err.line, Some(5), "{err}");
        assert!(err.message.contains("conflicts with api_key_env"), "{err}");
    }

    #[test]
    fn a_ca_bundle_must_be_a_pem_file_under_the_root() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("configs")).unwrap();
        let write = |text: &str| {
            std::fs::write(root.path().join("configs/bench.toml"), text).unwrap();
            BenchConfig::load_in(root.path(), Path::new("configs/bench.toml"))
        };
        let text = "[targets.gw]\nbase_url = \"https://gw\"\nca_bundle = \"certs/ca.pem\"\n";
        let err = write(text).unwrap_err();
        assert_eq!(err.line, Some(3), "{err}");
        assert!(err.message.contains("cannot read ca_bundle certs/ca.pem"), "{err}");
        std::fs::create_dir_all(root.path().join("certs")).unwrap();
        std::fs::write(root.path().join("certs/ca.pem"), "not a certificate").unwrap();
        let err = write(text).unwrap_err();
        assert!(err.message.contains("holds no PEM certificate"), "{err}");
        let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        std::fs::write(root.path().join("certs/ca.pem"), pem).unwrap();
        let c = write(text).unwrap();
        let t = c.target("gw").unwrap();
        assert_eq!(t.read_ca_bundle(root.path()).unwrap().unwrap(), pem.as_bytes());
        let err = cfg("[targets.gw]\nbase_url = \"https://gw\"\nca_bundle = \" \"\n").unwrap_err();
        assert_eq!(err.line, Some(3), "{err}");
    }

    #[test]
    fn targets_are_checked() {
        let err = cfg("[targets.x]\nbase_url = \"localhost:8000\"\n").unwrap_err();
        assert_eq!(err.line, Some(2));
        let err =
            cfg("[targets.x]\nbase_url = \"http://h\"\napi_key_env = \"abc def\"\n").unwrap_err();
        assert_eq!(err.line, Some(3));
        assert!(!err.to_string().contains("abc def"));
        let c = cfg("[targets.x]\nbase_url = \"http://h\"\n[profile.default]\ntarget = \"y\"\n")
            .unwrap();
        let err = c.resolve("default", &[]).unwrap_err();
        assert_eq!(err.line, Some(4), "{err}");
        assert!(err.message.contains("defined targets: x"), "{err}");
    }
}
