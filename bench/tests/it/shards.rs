//! A run sharded over processes (`infergate_model::shard`) and merged (`infergate_model::merge`): the shards run as
//! tasks of this test against ONE timing-mode simulator, and their merge is compared with one
//! process measuring the same total load.
//!
//! Tolerances: counts are exact; the TTFT and TPOT the merge reports are those of the
//! concatenated records exactly (the merged directory recomputes to the same numbers, and the
//! shards' histogram logs added together equal the merged ones). Against the single process the
//! distributions agree within 15 ms at TTFT p50 / p90 and 2 ms at TPOT p50: the simulator's
//! known answer is 50 ms and 10 ms per token, and this test shares two busy cores with the rest of
//! the suite (the millisecond-sharp known-answer tolerances live in the `timing` binary).

use std::path::{Path, PathBuf};

use bench::runner::{self, RunControl, RunOutcome, RunSpec};
use infergate_model::config::{Profile, Target, TimingConfig};
use infergate_model::merge::{self, MergeError};
use infergate_model::shard::{Shard, ShardRun};
use infergate_model::summary::RunStatus;
use infergate_sim::{SimHandle, SimOptions};

use crate::support::*;

const PROFILE: &str = r#"
[profile.default]
endpoint = "chat"
[profile.default.load]
concurrency = 4
warmup_requests = 0
[profile.default.workload]
input_lengths = [32, 64, 96]
repeats = 16
max_tokens = 8
"#;

const RUN_ID: &str = "20261201T100000Z-shards";

fn oracle() -> TimingConfig {
    TimingConfig { ttft_ms: 50.0, itl_ms: 10.0, jitter_ms: 1.0, ..TimingConfig::default() }
}

/// Shard `i` of `n` of `profile` against the simulator, into `dir`.
async fn run_shard(
    sim: &SimHandle,
    profile: &Profile,
    shard: Shard,
    start_at: Option<chrono::DateTime<chrono::Utc>>,
    dir: PathBuf,
) -> RunOutcome {
    let target = Target::at(sim.base_url()).with_model(sim.model());
    let mut spec = RunSpec::quiet(profile.clone(), ("sim".into(), target), dir, RUN_ID);
    spec.shard = Some(ShardRun { shard, start_at });
    runner::run(spec, RunControl::default()).await.expect("the shard runs")
}

/// All `n` shards at once (starting together), their directories `root/shard-I`.
async fn run_shards(sim: &SimHandle, profile: &Profile, n: u32, root: &Path) -> Vec<PathBuf> {
    let start = chrono::Utc::now() + chrono::Duration::milliseconds(300);
    let runs = (0..n).map(|i| {
        let shard = Shard::new(i, n).unwrap();
        run_shard(sim, profile, shard, Some(start), root.join(format!("shard-{i}")))
    });
    let outcomes = futures_util::future::join_all(runs).await;
    outcomes.into_iter().map(|o| o.dir).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shards_merged_measure_what_one_process_measures() {
    let dir = tempfile::tempdir().unwrap();
    let sim = start_timing_sim(oracle(), SimOptions::default()).await;
    let whole = profile(PROFILE, &[]);
    let single = run_against(&sim, whole.clone(), &dir.path().join("single")).await;
    let shards = run_shards(&sim, &whole, 2, dir.path()).await;
    sim.shutdown().await;
    let out = dir.path().join("merged");
    let merged = merge::merge(&shards, &out, None).unwrap();
    let (s, one) = (&merged.summary, &single.summary);
    // Counts are exact: 48 requests, every workload item once, as the single process sent them.
    assert_eq!((s.requests.total, s.requests.ok), (48, 48), "{:?}", s.requests.by_class);
    assert_eq!((one.requests.total, one.requests.ok), (48, 48));
    let mut items: Vec<u64> = merged.records.iter().map(|(_, r)| r.item).collect();
    items.sort_unstable();
    assert_eq!(items, (0..48).collect::<Vec<u64>>());
    assert_eq!(s.status, RunStatus::Complete, "{:?}", s.notes);
    assert!(merged.report.complete && merged.report.missing.is_empty());
    assert_eq!(merged.report.histograms_agree, Some(true));
    assert_eq!(merged.report.shards.iter().map(|x| x.requests).collect::<Vec<_>>(), [24, 24]);
    // The merged run is the profile's whole load, and a normal run directory.
    assert_eq!(s.config.profile().unwrap().load.concurrency, 4);
    assert_eq!(s.run_id, RUN_ID);
    let (again, read) =
        infergate_model::rundir::recompute(&out, s.goodput.slo.clone(), None).unwrap();
    assert_eq!(read.records.len(), 48);
    assert_eq!(again.latency.ttft_ms, s.metrics.ttft_ms, "merged = concatenated records");
    assert_eq!(again.latency.tpot_ms, s.metrics.tpot_ms);
    let text = std::fs::read_to_string(out.join("requests.jsonl")).unwrap();
    let shard_ids: Vec<u64> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["shard"].as_u64().unwrap())
        .collect();
    assert_eq!(shard_ids.iter().filter(|&&i| i == 1).count(), 24);
    // Same distributions as the single process, within the stated tolerances.
    let (t, t1) = (s.metrics.ttft_ms.as_ref().unwrap(), one.metrics.ttft_ms.as_ref().unwrap());
    assert!((t.p50 - t1.p50).abs() <= 15.0, "TTFT p50 {} against {}", t.p50, t1.p50);
    assert!((t.p90 - t1.p90).abs() <= 15.0, "TTFT p90 {} against {}", t.p90, t1.p90);
    let (p, p1) = (s.metrics.tpot_ms.as_ref().unwrap(), one.metrics.tpot_ms.as_ref().unwrap());
    assert!((p.p50 - p1.p50).abs() <= 2.0, "TPOT p50 {} against {}", p.p50, p1.p50);
    assert!(t.p50 >= 50.0 && t.p50 <= 65.0, "TTFT p50 {} (known answer 50 ms)", t.p50);
    // The shards started together: the spread is recorded, and small.
    assert!(merged.report.start_spread_ms < 200.0, "{:?}", merged.report);
    let (common, rate) = (&merged.report.common_window, merged.report.common_requests_per_s);
    let (start, end) = (common.start_ms.unwrap(), common.end_ms.unwrap());
    let inside = merged.records.iter().filter(|(_, r)| r.end_ms >= start && r.end_ms <= end);
    let want = inside.count() as f64 / common.duration_s.unwrap();
    assert!((rate.unwrap() - want).abs() < 1e-3, "{rate:?} against {want}");

    // One shard missing: the merge says so and is never a complete run.
    let partial = merge::merge(&shards[..1], &dir.path().join("partial"), None).unwrap();
    assert_eq!(partial.summary.status, RunStatus::Interrupted);
    assert_eq!(partial.report.missing, vec![1]);
    assert!(!partial.report.complete);
    assert!(
        partial.summary.notes[0].starts_with("incomplete: shard(s) 1/2"),
        "{:?}",
        partial.summary.notes
    );
    assert_eq!(partial.summary.requests.total, 24);

    refusals(&shards, &single.dir, dir.path());
}

/// What the merge refuses, each naming the directory.
fn refusals(shards: &[PathBuf], single: &Path, root: &Path) {
    let refused = |dirs: &[PathBuf], name: &str| {
        merge::merge(dirs, &root.join(name), None).err().expect("refused")
    };
    let err = refused(&[shards[0].clone(), shards[0].clone()], "dup");
    assert!(matches!(err, MergeError::Duplicate { .. }), "{err}");
    assert!(err.to_string().contains("are both shard 0/2"), "{err}");
    let err = refused(&[shards[0].clone(), single.to_path_buf()], "plain");
    assert!(matches!(err, MergeError::NotAShard { .. }), "{err}");
    assert!(err.to_string().starts_with(&single.display().to_string()), "{err}");
    // A shard of another run, and one of another profile.
    let edit = |name: &str, f: &dyn Fn(&mut serde_json::Value)| {
        let copy = root.join(name);
        std::fs::create_dir_all(&copy).unwrap();
        for file in ["summary.json", "requests.jsonl", "histograms.hlog"] {
            std::fs::copy(shards[1].join(file), copy.join(file)).unwrap();
        }
        let path = copy.join("summary.json");
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        f(&mut v);
        std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
        copy
    };
    let other = edit("other-run", &|v| v["run_id"] = "another".into());
    let err = refused(&[shards[0].clone(), other.clone()], "x1");
    assert!(matches!(err, MergeError::DifferentRun { .. }), "{err}");
    assert!(err.to_string().starts_with(&other.display().to_string()), "{err}");
    let longer = edit("other-profile", &|v| v["config"]["workload"]["max_tokens"] = 9.into());
    let err = refused(&[shards[0].clone(), longer], "x2");
    let msg = err.to_string();
    assert!(
        msg.contains("the profile differs") && msg.contains("workload.max_tokens: 9 against 8"),
        "{msg}"
    );
    let three = edit("three", &|v| v["extra"]["shard"]["count"] = 3.into());
    let err = refused(&[shards[0].clone(), three], "x3");
    assert!(err.to_string().contains("shard count: 3 against 2"), "{err}");
    // A shard that did not end complete: the merge's status says so, and which shard.
    for (status, merged_status) in [
        ("interrupted", RunStatus::Interrupted),
        ("aborted", RunStatus::Aborted),
        ("failed", RunStatus::Failed),
    ] {
        let copy = edit(status, &|v| v["status"] = status.into());
        let m = merge::merge(
            &[shards[0].clone(), copy.clone()],
            &root.join(format!("m-{status}")),
            None,
        )
        .unwrap();
        assert_eq!(m.summary.status, merged_status, "{status}");
        assert!(!m.report.complete);
        let note = format!("shard 1/2 ({}) ended {status}", copy.display());
        assert!(m.summary.notes.iter().any(|n| n.starts_with(&note)), "{:?}", m.summary.notes);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_shards_send_independent_streams_at_their_share_of_the_rate() {
    let dir = tempfile::tempdir().unwrap();
    let sim = start_timing_sim(
        TimingConfig { ttft_ms: 5.0, itl_ms: 1.0, ..TimingConfig::default() },
        SimOptions::default(),
    )
    .await;
    let whole = profile(PROFILE, &["load.mode=open", "load.rate=40.0", "load.requests=20"]);
    let shards = run_shards(&sim, &whole, 2, dir.path()).await;
    sim.shutdown().await;
    let merged = merge::merge(&shards, &dir.path().join("merged"), None).unwrap();
    let s = &merged.summary;
    assert_eq!(s.requests.ok, 20);
    assert_eq!(s.config.profile().unwrap().load.rate, Some(40.0));
    assert_eq!(s.schedule.stats.requested_rate, Some(40.0));
    let starts = |d: &Path| -> Vec<f64> {
        let read = infergate_model::rundir::read_records(d).unwrap().records;
        let mut v: Vec<f64> = read.iter().map(|r| r.intended_ms).collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let (a, b) = (starts(&shards[0]), starts(&shards[1]));
    assert_eq!((a.len(), b.len()), (10, 10));
    assert_ne!(a[1..], b[1..], "each shard draws its own arrival stream");
    for d in &shards {
        let one = infergate_model::Summary::read(d).unwrap();
        assert_eq!(one.config.profile().unwrap().load.rate, Some(20.0));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trace_shards_replay_the_records_at_their_index_modulo_n_at_their_own_times() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (0..9)
        .map(|i| {
            format!(
                "{{\"timestamp_ms\": {}, \"input_tokens\": {}, \"output_tokens\": 4}}",
                20 * i,
                16 + i
            )
        })
        .collect();
    std::fs::write(dir.path().join("t.jsonl"), lines.join("\n")).unwrap();
    let sim = start_timing_sim(oracle(), SimOptions::default()).await;
    let sets = ["load.mode=trace", "workload.trace=t.jsonl"];
    let shards = run_shards(&sim, &profile(PROFILE, &sets), 2, dir.path()).await;
    sim.shutdown().await;
    for (d, want) in shards.iter().zip([5, 4]) {
        let one = infergate_model::Summary::read(d).unwrap();
        assert_eq!(one.requests.ok, want, "{}", d.display());
        assert_eq!(one.workload.trace.as_ref().unwrap().records, want);
    }
    let merged = merge::merge(&shards, &dir.path().join("merged"), None).unwrap();
    assert_eq!(merged.summary.requests.ok, 9);
    assert_eq!(merged.summary.workload.trace.as_ref().unwrap().records, 9);
    // Each record at its own trace time on its shard's clock: 20 ms x its index in the trace.
    for (shard, r) in &merged.records {
        let offset = merged.report.shards[*shard as usize].offset_ms;
        let at = r.intended_ms - offset;
        assert!((at - 20.0 * r.item as f64).abs() < 0.01, "item {} at {at} ms", r.item);
    }
    let mut items: Vec<u64> = merged.records.iter().map(|(_, r)| r.item).collect();
    items.sort_unstable();
    assert_eq!(items, (0..9).collect::<Vec<u64>>());
}
