//! `environment.noise` of a run against a target on this host: the target's own CPU is not
//! "other processes". A standalone simulator (`cargo xtask sim`, a process of its own) is found
//! by the port it listens on; the embedded simulator is the bench's own process.

use crate::support::{start_sim, xtask};

fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("configs")).unwrap();
    let text = "[profile.default.sim]\nmode = \"timing\"\n[profile.default.sim.timing]\nttft_ms = 2\n\
        itl_ms = 1\n[profile.default.workload]\ninput_lengths = [8]\nrepeats = 4\nmax_tokens = 4\n\
        [profile.default.load]\nconcurrency = 2\n";
    std::fs::write(dir.path().join("configs/bench.toml"), text).unwrap();
    dir
}

fn noise_of(dir: &std::path::Path) -> infergate_model::hostnoise::HostNoise {
    infergate_model::Summary::read(dir)
        .unwrap()
        .environment
        .noise
        .expect("noise is recorded on Linux")
}

#[test]
fn a_local_target_s_process_is_found_by_its_port_and_the_embedded_simulator_is_the_bench() {
    let r = repo();
    let (sim, model, url) = start_sim(r.path(), &[]);
    let pid = sim.0.id();
    let o =
        xtask(r.path(), &["bench", "-q", "--base-url", &url, "--model", &model, "--out", "local"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let target = noise_of(&r.path().join("local")).target.expect("a local target is recorded");
    assert_eq!(target.pid, Some(pid), "{target:?}");
    let share = target.share.expect("its share");
    assert!((0.0..=1.0).contains(&share), "{share}");
    assert!(
        target.excluded.starts_with(&format!("the target's process (pid {pid}, ")),
        "{target:?}"
    );
    drop(sim);

    let o = xtask(r.path(), &["bench", "-q", "--out", "embedded"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let target = noise_of(&r.path().join("embedded")).target.unwrap();
    assert_eq!((target.pid, target.share), (None, None));
    assert!(target.excluded.starts_with("the embedded simulator runs in the bench's process"));
}

/// `bench --trials` against a target resets the engine's caches before every trial where the
/// engine offers it (the engine-mode simulator serves vLLM's `POST /reset_prefix_cache`), and
/// says so in each trial's summary; an engine without a reset (the timing mode) runs the trial
/// unreset, with a note in the summary.
#[test]
fn trials_of_a_target_reset_its_caches_or_say_it_offers_none() {
    let r = repo();
    let engine = std::fs::read_to_string(crate::support::repo_root().join("configs/engine.toml"));
    std::fs::write(r.path().join("configs/engine.toml"), engine.unwrap()).unwrap();
    let isolation = |set: &str, n: usize| {
        let s = infergate_model::Summary::read(&r.path().join(set).join(format!("trial-{n:02}")))
            .unwrap();
        (s.isolation, s.notes)
    };
    let (sim, model, url) = start_sim(r.path(), &["--set", "sim.mode=engine"]);
    let args = ["bench", "-q", "--base-url", &url, "--model", &model, "--trials", "2"];
    let o = xtask(r.path(), &[&args[..], &["--out", "engine"]].concat());
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    for n in [1, 2] {
        let (iso, notes) = isolation("engine", n);
        let want = infergate_model::summary::Isolation::Reset("POST /reset_prefix_cache".into());
        assert_eq!(iso, Some(want), "trial {n}");
        assert!(!notes.iter().any(|n| n.starts_with("trial isolation")), "{notes:?}");
    }
    drop(sim);

    let (sim, model, url) = start_sim(r.path(), &[]);
    let args = ["bench", "-q", "--base-url", &url, "--model", &model, "--trials", "2"];
    let o = xtask(r.path(), &[&args[..], &["--out", "timing"]].concat());
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("note: trial 2: the engine offers no cache reset"), "{}", o.stderr);
    for n in [1, 2] {
        let (iso, notes) = isolation("timing", n);
        assert!(matches!(iso, Some(infergate_model::summary::Isolation::NotOffered(_))), "{iso:?}");
        let note = notes.iter().find(|n| n.starts_with("trial isolation: "));
        assert!(note.is_some_and(|n| n.contains("caches carried over")), "{notes:?}");
    }
    drop(sim);
    // The embedded simulator is built for every trial.
    let o = xtask(r.path(), &["bench", "-q", "--trials", "2", "--out", "embedded"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert_eq!(isolation("embedded", 2).0, Some(infergate_model::summary::Isolation::FreshEngine));
}
