//! The served configuration read back: the engine asked what it runs before and after the
//! load, recorded beside the engine config file's parameters, and a key they contradict noted.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bench::runner::{self, RunControl, RunSpec};
use infergate_model::config::Target;
use infergate_model::summary::EngineParams;
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use crate::support::*;

const SHORT: &str = "[profile.default.load]\nconcurrency = 2\nrequests = 4\nwarmup_requests = 0\n\
    [profile.default.workload]\ninput_lengths = [8]\nmax_tokens = 4\n";

/// A repository root whose `configs/engine.toml` sets `max_num_seqs` and the simulator's other
/// keys as `ENGINE_H100` does.
fn root_with_engine_file(max_num_seqs: u32) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("configs")).unwrap();
    let text = ENGINE_H100.replace("max_num_seqs = 64", &format!("max_num_seqs = {max_num_seqs}"));
    std::fs::write(dir.path().join("configs/engine.toml"), text).unwrap();
    dir
}

/// A simulator serving `max_num_seqs = 64` measured with a file saying 256: the summary holds
/// 64 as read from `/server_info`, the cache labels of `/metrics`, and the mismatch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simulator_serving_another_config_than_the_file_is_caught() {
    let handle = start_engine_sim(ENGINE_H100, Default::default()).await;
    for (seqs, mismatched) in [(256, true), (64, false)] {
        let root = root_with_engine_file(seqs);
        let target = Target::at(handle.base_url()).with_model(handle.model());
        let mut spec = RunSpec::quiet(
            profile(SHORT, &[]),
            ("sim".into(), target),
            root.path().join("run"),
            "t",
        );
        spec.root = root.path().to_path_buf();
        spec.engine = Some(EngineParams::read(root.path(), "configs/engine.toml").unwrap());
        let out = runner::run(spec, RunControl::default()).await.expect("the run completes");
        let e = out.summary.engine.as_ref().expect("engine params");
        assert_eq!(e.served_by.as_deref(), Some("vLLM"), "{e:?}");
        let get =
            |k: &str| e.served.iter().find(|v| v.key == k).unwrap_or_else(|| panic!("{k}: {e:?}"));
        let seqs_served = get("scheduler.max_num_seqs");
        assert_eq!(seqs_served.value, json!(64));
        assert_eq!(seqs_served.source, "GET /server_info scheduler_config.max_num_seqs");
        assert_eq!(get("engine.max_model_len").value, json!(4096));
        assert_eq!(get("scheduler.block_size").value, json!(16));
        assert_eq!(get("engine.gpu_memory_utilization").value, json!(0.9));
        assert_eq!(get("scheduler.enable_prefix_caching").value, json!(true));
        assert!(e.served.iter().any(|v| v.key == "vllm.num_gpu_blocks"), "{e:?}");
        if mismatched {
            assert_eq!(e.mismatches.len(), 1, "{:?}", e.mismatches);
            let m = &e.mismatches[0];
            assert_eq!(
                (m.key.as_str(), &m.config, &m.served),
                ("scheduler.max_num_seqs", &json!(256), &json!(64))
            );
            let note =
                out.summary.notes.iter().find(|n| n.contains("served configuration differs"));
            let note = note.unwrap_or_else(|| panic!("{:?}", out.summary.notes));
            assert!(note.contains("configs/engine.toml says 256, the server 64"), "{note}");
        } else {
            assert!(e.mismatches.is_empty(), "{:?}", e.mismatches);
            assert!(!out.summary.notes.iter().any(|n| n.contains("served configuration")));
        }
        // Written and read back.
        let back = infergate_model::Summary::read(&out.dir).unwrap();
        assert_eq!(back.engine, out.summary.engine);
    }
    handle.shutdown().await;
}

/// The simulator's `/metrics` labels and `/server_info` carry the engine config it serves.
#[tokio::test]
async fn the_simulator_answers_its_engine_config_like_vllm() {
    let handle = start_engine_sim(ENGINE_H100, Default::default()).await;
    let c = http();
    let info: serde_json::Value = c
        .get(format!("{}/server_info?config_format=json", handle.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let p = infergate_model::served::parse::vllm_server_info(&info);
    let value = |k: &str| p.values.iter().find(|v| v.key == k).map(|v| v.value.clone());
    assert_eq!(value("scheduler.max_num_seqs"), Some(json!(64)));
    assert_eq!(
        value("scheduler.max_num_batched_tokens"),
        Some(json!(8192)),
        "the default in effect"
    );
    assert_eq!(value("scheduler.enable_chunked_prefill"), Some(json!(true)));
    assert_eq!(value("engine.max_model_len"), Some(json!(4096)));
    let page = scrape(&c, &handle).await;
    let labels = infergate_model::served::parse::vllm_cache_config(&page);
    let label = |k: &str| labels.values.iter().find(|v| v.key == k).map(|v| v.value.clone());
    assert_eq!(label("scheduler.block_size"), Some(json!(16)));
    assert_eq!(label("engine.gpu_memory_utilization"), Some(json!(0.9)));
    assert_eq!(label("scheduler.enable_prefix_caching"), Some(json!(true)));
    // The text format is one string; the timing mode runs no engine config.
    let text: serde_json::Value = c
        .get(format!("{}/server_info", handle.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(text["vllm_config"].is_string(), "{text}");
    handle.shutdown().await;
    let timing = start_timing_sim(Default::default(), Default::default()).await;
    let r = c.get(format!("{}/server_info?config_format=json", timing.base_url())).send().await;
    assert_eq!(r.unwrap().status().as_u16(), 404);
    timing.shutdown().await;
}

/// The embedded simulator serves the profile's own engine config: nothing differs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_simulator_serves_its_file() {
    let root = root_with_engine_file(48);
    let p = profile(
        &format!(
            "{SHORT}[profile.default.sim]\nmode = \"engine\"\nengine_config = \"configs/engine.toml\"\n"
        ),
        &[],
    );
    let out = run_embedded(p, root.path()).await;
    let e = out.summary.engine.as_ref().expect("engine params");
    let seqs = e.served.iter().find(|v| v.key == "scheduler.max_num_seqs").expect("read back");
    assert_eq!(seqs.value, json!(48));
    assert!(e.mismatches.is_empty(), "{:?}", e.mismatches);
}

/// A llama.cpp-shaped server whose `/props` answers `body`, and whatever else a server answers
/// to the configuration endpoints: `(status, body)` by path.
async fn config_server(props: &'static str, others: &'static str) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let asked = Arc::new(AtomicUsize::new(0));
    let count = asked.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(answer(s, props, others, count.clone()));
        }
    });
    (url, asked)
}

async fn answer(mut s: TcpStream, props: &str, others: &str, asked: Arc<AtomicUsize>) {
    let Ok(Some((head, body))) =
        tokio::time::timeout(Duration::from_secs(10), read_http_request(&mut s)).await
    else {
        return;
    };
    let reply = if head.starts_with("GET /props") {
        asked.fetch_add(1, Ordering::Relaxed);
        http_reply(200, "application/json", props)
    } else if let Some(r) = preflight_reply(&head, &body) {
        r
    } else {
        http_reply(200, "application/json", others)
    };
    let _ = s.write_all(reply.as_bytes()).await;
    let _ = s.shutdown().await;
}

/// Malformed answers reveal nothing: no value, no mismatch, no panic, the run measured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_answers_are_not_revealed() {
    for (props, others) in [
        (r#"{"total_slots": "four", "default_generation_settings": []}"#, "not json {"),
        ("[1, 2, 3]", r#"{"vllm_config": "text"}"#),
        (
            r#"{"total_slots": -1}"#,
            r#"{"max_running_requests": {"x": 1}, "chunked_prefill_size": "big"}"#,
        ),
    ] {
        let (url, asked) = config_server(props, others).await;
        let root = root_with_engine_file(2);
        let target = Target::at(&url).with_model("m");
        let p = profile(&format!("{SHORT}[profile.default]\nstream = false\n"), &[]);
        let mut spec = RunSpec::quiet(p, ("raw".into(), target), root.path().join("run"), "t");
        spec.root = root.path().to_path_buf();
        spec.engine = Some(EngineParams::read(root.path(), "configs/engine.toml").unwrap());
        let out = runner::run(spec, RunControl::default()).await.expect("the run completes");
        assert_eq!(asked.load(Ordering::Relaxed), 2, "asked before and after the load");
        let e = out.summary.engine.as_ref().unwrap();
        let compared: Vec<_> = e.served.iter().filter(|v| v.key.section() == "scheduler").collect();
        assert!(compared.is_empty(), "{props}: {compared:?}");
        assert!(e.mismatches.is_empty(), "{props}: {:?}", e.mismatches);
        assert_eq!(out.summary.requests.ok, 4);
    }
}
