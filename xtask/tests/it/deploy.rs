//! `cargo xtask deploy render`: the manifests of a sharded run validate against the Kubernetes
//! API schema (vendored in `fixtures/k8s-schema.json`, strict: unknown fields fail), hold the
//! Indexed Job the shards need, never an API key, and the example in `deploy/k8s/shards/` is
//! what the command renders.

use std::path::Path;

use serde_json::Value;

use crate::support::*;

/// The arguments `deploy/k8s/shards/` was rendered with (its README says so too).
const EXAMPLE_ARGS: &[&str] = &[
    "deploy",
    "render",
    "--shards",
    "4",
    "--profile",
    "vllm",
    "--base-url",
    "http://vllm.default.svc:8000",
    "--run-id",
    "example",
    "--start-at",
    "2026-01-01T00:00:00Z",
    "--image",
    "registry.example.com/infergate-bench:0.1.0",
];

const FILES: [&str; 4] = ["configmap.yaml", "pvc.yaml", "job-shards.yaml", "job-merge.yaml"];

fn yaml_to_json(y: &yaml_rust2::Yaml) -> Value {
    use yaml_rust2::Yaml;
    match y {
        Yaml::Null => Value::Null,
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Integer(i) => Value::from(*i),
        Yaml::Real(r) => Value::from(r.parse::<f64>().expect("a YAML real")),
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Array(a) => Value::Array(a.iter().map(yaml_to_json).collect()),
        Yaml::Hash(h) => Value::Object(
            h.iter()
                .map(|(k, v)| (k.as_str().expect("string keys").to_string(), yaml_to_json(v)))
                .collect(),
        ),
        other => panic!("unexpected YAML node {other:?}"),
    }
}

/// The documents of a rendered file, as JSON.
fn read_manifest(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    let docs = yaml_rust2::YamlLoader::load_from_str(&text).unwrap();
    assert_eq!(docs.len(), 1, "{}", path.display());
    yaml_to_json(&docs[0])
}

fn validator() -> jsonschema::Validator {
    let text = std::fs::read_to_string(repo_root().join("xtask/tests/it/fixtures/k8s-schema.json"))
        .unwrap();
    jsonschema::validator_for(&serde_json::from_str(&text).unwrap()).unwrap()
}

fn errors(v: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    v.iter_errors(doc).map(|e| format!("{} at {}", e, e.instance_path())).collect()
}

fn render_into(root: &Path, out: &str) -> std::process::Output {
    let mut args = EXAMPLE_ARGS.to_vec();
    args.extend(["--out", out]);
    xtask_output(root, &args)
}

#[test]
fn rendered_manifests_validate_and_hold_an_indexed_job_of_the_shards() {
    let ws = copy_of_configs();
    let out = render_into(ws.path(), "k8s");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let schema = validator();
    let docs: Vec<Value> =
        FILES.iter().map(|f| read_manifest(&ws.path().join("k8s").join(f))).collect();
    for (file, doc) in FILES.iter().zip(&docs) {
        assert_eq!(errors(&schema, doc), Vec::<String>::new(), "{file}");
    }
    let job = &docs[2]["spec"];
    assert_eq!(job["completionMode"], "Indexed");
    assert_eq!((job["completions"].as_i64(), job["parallelism"].as_i64()), (Some(4), Some(4)));
    let pod = &job["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never", "a Job's pods never restart in place");
    let c = &pod["containers"][0];
    let args: Vec<&str> =
        c["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    let after = |flag: &str| args[args.iter().position(|a| *a == flag).unwrap() + 1];
    assert_eq!(after("--shard"), "$(SHARD_INDEX)/4");
    assert_eq!(after("--run-id"), "example");
    assert_eq!(after("--start-at"), "2026-01-01T00:00:00Z");
    assert_eq!(after("--out"), "/runs/example/shard-$(SHARD_INDEX)");
    assert_eq!(after("--base-url"), "http://vllm.default.svc:8000");
    let env = c["env"].as_array().unwrap();
    assert_eq!(
        env[0]["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    );
    // The key's variable comes from a Secret by name; no value is ever written.
    let key = env.iter().find(|e| e["name"] == "VLLM_API_KEY").unwrap();
    assert_eq!(key["valueFrom"]["secretKeyRef"]["name"], "infergate-api-keys");
    assert!(key.get("value").is_none());
    // The ConfigMap ships the config and the target's engine config, mounted at their paths.
    let data = docs[0]["data"].as_object().unwrap();
    let keys: Vec<&str> = data.keys().map(String::as_str).collect();
    assert_eq!(keys, ["configs__bench.toml", "configs__engine.toml"]);
    let bench_toml = std::fs::read_to_string(ws.path().join("configs/bench.toml")).unwrap();
    assert_eq!(data["configs__bench.toml"], bench_toml.as_str());
    let items = &pod["volumes"][0]["configMap"]["items"];
    assert_eq!(items[0]["path"], "configs/bench.toml");
    // The merge waits for the shards' summaries, then merges what is there.
    let merge = &docs[3]["spec"]["template"]["spec"];
    let wait = merge["initContainers"][0]["command"][2].as_str().unwrap();
    assert!(
        wait.contains("/runs/example/shard-*/summary.json") && wait.contains("-ge 4"),
        "{wait}"
    );
    let run = merge["containers"][0]["command"][2].as_str().unwrap();
    assert!(run.contains("bench merge --quiet --out /runs/example/merged $dirs"), "{run}");
    assert_eq!(docs[1]["spec"]["accessModes"][0], "ReadWriteMany");
}

#[test]
fn the_schema_check_fails_a_manifest_it_should() {
    let ws = copy_of_configs();
    assert!(render_into(ws.path(), "k8s").status.success());
    let schema = validator();
    let mut job = read_manifest(&ws.path().join("k8s/job-shards.yaml"));
    job["spec"]["completionMode"] = "Sharded".into();
    job["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "Sometimes".into();
    job["spec"]["paralelism"] = 4.into();
    let found = errors(&schema, &job);
    assert!(found.iter().any(|e| e.contains("Sharded")), "{found:?}");
    assert!(found.iter().any(|e| e.contains("paralelism")), "{found:?}");
    assert!(found.iter().any(|e| e.contains("Sometimes")), "{found:?}");
}

#[test]
fn the_committed_example_is_what_deploy_render_writes() {
    let root = repo_root();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("k8s");
    let out_text = out.to_str().unwrap();
    let rendered = render_into(&root, out_text);
    assert!(rendered.status.success(), "{}", String::from_utf8_lossy(&rendered.stderr));
    for f in FILES {
        let want = std::fs::read_to_string(out.join(f)).unwrap();
        let have = std::fs::read_to_string(root.join("deploy/k8s/shards").join(f))
            .unwrap_or_else(|e| panic!("deploy/k8s/shards/{f}: {e}"));
        assert_eq!(
            have,
            want,
            "deploy/k8s/shards/{f} is stale: run `cargo xtask {} --out deploy/k8s/shards`",
            EXAMPLE_ARGS.join(" ")
        );
    }
}

#[test]
fn profiles_that_cannot_be_sharded_are_refused_before_anything_is_written() {
    let ws = copy_of_configs();
    let out =
        xtask_output(ws.path(), &["deploy", "render", "--shards", "2", "--profile", "default"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("measures the embedded simulator"), "{err}");
    let args = ["deploy", "render", "--shards", "32", "--profile", "vllm", "--out", "k8s"];
    let out = xtask_output(ws.path(), &args);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("load.concurrency = 16 cannot be split over 32 shards"), "{err}");
    assert!(!ws.path().join("k8s").exists());
}

/// Manifests a cluster would refuse, or that could not run, are refused (exit 2) with what is
/// valid, and nothing is written: no shard, more shards than workload items, a start more
/// than a day ahead, a namespace or storage size outside Kubernetes's grammar.
#[test]
fn manifests_a_cluster_would_refuse_are_not_written() {
    let ws = copy_of_configs();
    let bench = ws.path().join("configs/bench.toml");
    let mut cfg = std::fs::read_to_string(&bench).unwrap();
    // 12 items (3 lengths x 4), 64 workers: the load splits over 16 shards, the items do not.
    cfg.push_str(
        "\n[profile.few]\ntarget = \"local-vllm\"\n[profile.few.load]\nconcurrency = 64\n\
         [profile.few.workload]\ninput_lengths = [8, 16, 32]\nrepeats = 4\n",
    );
    std::fs::write(&bench, cfg).unwrap();
    let later = (chrono::Utc::now() + chrono::Duration::days(2))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let cases: [(&[&str], &str); 7] = [
        (&["--shards", "0", "--profile", "vllm"], "the shard count must be within 1..=1024, got 0"),
        (
            &["--shards", "16", "--profile", "few"],
            "the workload has 12 items, fewer than the 16 shards",
        ),
        (&["--shards", "2", "--profile", "vllm", "--start-at", &later], "more than a day ahead"),
        (
            &["--shards", "2", "--profile", "vllm", "--start-delay", "200000"],
            "more than a day ahead",
        ),
        (
            &["--shards", "2", "--profile", "vllm", "--namespace", "Bench_Runs"],
            "is not a Kubernetes name",
        ),
        (
            &["--shards", "2", "--profile", "vllm", "--storage", "10GB"],
            "is not a Kubernetes storage quantity",
        ),
        (
            &["--shards", "2", "--profile", "vllm", "--storage", "0Gi"],
            "is not a Kubernetes storage quantity",
        ),
    ];
    for (extra, want) in cases {
        let mut args = vec!["deploy", "render", "--out", "k8s"];
        args.extend_from_slice(extra);
        let out = xtask_output(ws.path(), &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(want), "{extra:?}: {err}");
        assert!(!ws.path().join("k8s").exists(), "{extra:?}");
    }
    // Within every bound: written.
    let args = [
        "deploy",
        "render",
        "--out",
        "k8s",
        "--shards",
        "12",
        "--profile",
        "few",
        "--namespace",
        "bench-runs",
        "--storage",
        "1.5Ti",
    ];
    let out = xtask_output(ws.path(), &args);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_workloads_files_are_shipped_and_a_configmap_too_large_is_refused() {
    let ws = copy_of_configs();
    let bench = ws.path().join("configs/bench.toml");
    let mut text = std::fs::read_to_string(&bench).unwrap();
    text.push_str(
        "\n[profile.replay]\ntarget = \"local-vllm\"\n[profile.replay.load]\nmode = \"trace\"\n\
         [profile.replay.workload]\ntrace = \"traces/small.jsonl\"\n\
         [profile.huge]\ntarget = \"local-vllm\"\n[profile.huge.load]\nmode = \"trace\"\n\
         [profile.huge.workload]\ntrace = \"traces/huge.jsonl\"\n",
    );
    std::fs::write(&bench, text).unwrap();
    std::fs::create_dir_all(ws.path().join("traces")).unwrap();
    let line = "{\"timestamp_ms\": 0, \"input_tokens\": 8, \"output_tokens\": 4}\n";
    std::fs::write(ws.path().join("traces/small.jsonl"), line.repeat(4)).unwrap();
    std::fs::write(ws.path().join("traces/huge.jsonl"), line.repeat(20_000)).unwrap();
    let render = |profile: &str| {
        let args = [
            "deploy",
            "render",
            "--shards",
            "2",
            "--profile",
            profile,
            "--run-id",
            "t",
            "--out",
            profile,
        ];
        xtask_output(ws.path(), &args)
    };
    let out = render("replay");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let cm = read_manifest(&ws.path().join("replay/configmap.yaml"));
    assert_eq!(cm["data"]["traces__small.jsonl"], line.repeat(4).as_str());
    assert_eq!(errors(&validator(), &cm), Vec::<String>::new());
    let out = render("huge");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("more than a ConfigMap holds"), "{err}");
}
