//! Multi-turn sessions from a conversation dataset, on the simulator: the history each turn
//! sends holds the earlier answers as they were streamed, the think time separates the turns,
//! concurrency counts sessions, a failed turn ends its session, and a malformed dataset stops
//! the run before anything is sent.

use std::collections::BTreeMap;

use crate::support::*;
use bench::runner::{self, RunControl, RunSpec};
use infergate_model::config::{FaultConfig, Target, TimingConfig};
use infergate_sim::SimOptions;
use serde_json::{Value, json};

const THINK_MS: f64 = 40.0;

/// `n` ShareGPT conversations of 2 to 4 turns, each recorded answer `3 + turn` words long.
fn sharegpt(n: usize) -> String {
    let convs: Vec<Value> = (0..n)
        .map(|c| {
            let mut msgs = vec![json!({"from": "system", "value": format!("you are helper {c}")})];
            for t in 0..(2 + c % 3) {
                msgs.push(json!({"from": "human", "value": format!("question {t} of chat {c}")}));
                let answer: Vec<&str> = std::iter::repeat_n("word", 3 + t).collect();
                msgs.push(json!({"from": "gpt", "value": answer.join(" ")}));
            }
            json!({"id": c, "conversations": msgs})
        })
        .collect();
    serde_json::to_string_pretty(&convs).unwrap()
}

fn sessions_profile(file: &std::path::Path, extra: &str) -> infergate_model::config::Profile {
    profile(
        &format!(
            r#"
[profile.default]
endpoint = "chat"
[profile.default.load]
concurrency = 2
[profile.default.workload]
conversations = "{}"
shuffle = false
ignore_eos = true
{extra}
"#,
            file.display()
        ),
        &[],
    )
}

/// The records of each session, in turn order.
fn by_session(
    recs: &[infergate_model::RequestRecord],
) -> BTreeMap<u64, Vec<infergate_model::RequestRecord>> {
    let mut m: BTreeMap<u64, Vec<infergate_model::RequestRecord>> = BTreeMap::new();
    for r in recs {
        m.entry(r.session.expect("every request is a session's turn")).or_default().push(r.clone());
    }
    for turns in m.values_mut() {
        turns.sort_by_key(|r| r.turn);
    }
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_turn_sends_the_earlier_streamed_answers_after_the_think_time() {
    let timing = TimingConfig { ttft_ms: 2.0, itl_ms: 1.0, ..TimingConfig::default() };
    let h =
        start_timing_sim(timing, SimOptions { keep_prompts: true, ..SimOptions::default() }).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("chats.json");
    std::fs::write(&file, sharegpt(6)).unwrap();
    let extra = format!(
        "max_tokens_from_answer = true\n[profile.default.workload.think_time_ms]\nkind = \"fixed\"\nvalue = {THINK_MS}\n"
    );
    let out = run_against(&h, sessions_profile(&file, &extra), dir.path()).await;
    // 6 sessions of 2, 3, 4, 2, 3, 4 turns, each turn once.
    assert_eq!(out.summary.requests.ok, 18, "{:?}", out.summary.notes);
    let recs = records_by_id(&out.dir);
    let sessions = by_session(&recs);
    assert_eq!(sessions.len(), 6);
    let sim: BTreeMap<String, infergate_sim::SimRecord> =
        h.records().into_iter().filter_map(|r| Some((r.request_id.clone()?, r))).collect();
    let sim_of =
        |r: &infergate_model::RequestRecord| &sim[&format!("{}-{}", out.summary.run_id, r.id)];
    let mut answers = std::collections::BTreeSet::new();
    for turns in sessions.values() {
        let first_prompt = sim_of(&turns[0]).prompt.clone().unwrap();
        let chat: usize = first_prompt[0]["content"].as_str().unwrap()[15..].parse().unwrap();
        assert_eq!(turns.len(), 2 + chat % 3, "every turn of chat {chat}");
        for (k, r) in turns.iter().enumerate() {
            assert_eq!(r.turn, Some(k as u32 + 1));
            // max_tokens is the recorded answer's length: 3 + turn words.
            assert_eq!(r.output_tokens, Some(3 + k as u64), "turn {}", k + 1);
            // The history: system, then each earlier question and the answer streamed for it.
            let mut want =
                vec![json!({"role": "system", "content": format!("you are helper {chat}")})];
            for (j, earlier) in turns[..k].iter().enumerate() {
                want.push(
                    json!({"role": "user", "content": format!("question {j} of chat {chat}")}),
                );
                let answer = sim_of(earlier).answer.clone().expect("an answer was streamed");
                want.push(json!({"role": "assistant", "content": answer}));
            }
            want.push(json!({"role": "user", "content": format!("question {k} of chat {chat}")}));
            assert_eq!(sim_of(r).prompt.as_ref().unwrap(), &Value::Array(want), "chat {chat}");
            answers.insert(sim_of(r).answer.clone().unwrap());
            // The next turn waits for this answer plus the think time (and not much longer:
            // 100 ms covers a busy test machine's scheduling).
            if let Some(next) = turns.get(k + 1) {
                let gap = next.sent_ms.unwrap() - r.end_ms;
                assert!(gap >= THINK_MS - 0.5, "gap {gap} ms < think time");
                assert!(gap < THINK_MS + 100.0, "gap {gap} ms");
            }
        }
    }
    assert_eq!(answers.len(), 18, "every answer differs, so the comparison is not vacuous");
    // Concurrency counts sessions: at most two in flight, and two at some time.
    let spans: Vec<(f64, f64)> =
        sessions.values().map(|t| (t[0].intended_ms, t.last().unwrap().end_ms)).collect();
    let most = spans
        .iter()
        .map(|&(start, _)| spans.iter().filter(|&&(s, e)| s <= start && start < e).count())
        .max()
        .unwrap();
    assert_eq!(most, 2, "{spans:?}");
    // Per-turn metrics: turn 1 of every session, turn 4 of two; the prompt grows.
    let turns = &out.summary.turns;
    let counts: Vec<(u32, u64)> = turns.iter().map(|t| (t.turn, t.requests)).collect();
    assert_eq!(counts, vec![(1, 6), (2, 6), (3, 4), (4, 2)]);
    assert!(turns[3].input_tokens_mean.unwrap() > turns[0].input_tokens_mean.unwrap());
    assert_eq!(turns[0].ttft_ms.as_ref().unwrap().count, 6);
    let json = std::fs::read_to_string(out.dir.join("summary.json")).unwrap();
    assert!(json.contains("\"turns\""), "{json}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_turn_ends_its_session_and_is_counted_once() {
    let timing = TimingConfig { ttft_ms: 1.0, itl_ms: 0.0, ..TimingConfig::default() };
    let faults = FaultConfig { http_500: 0.3, ..FaultConfig::default() };
    let h = start_timing_sim(timing, SimOptions { faults, ..SimOptions::default() }).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("chats.json");
    std::fs::write(&file, sharegpt(12)).unwrap();
    let out = run_against(&h, sessions_profile(&file, "max_tokens = 4"), dir.path()).await;
    let recs = records_by_id(&out.dir);
    let failed = recs.iter().filter(|r| r.class != infergate_model::Outcome::Ok).count() as u64;
    assert!(failed > 0, "the seeded faults fail some turn");
    assert_eq!(out.summary.requests.failed, failed);
    assert_eq!(out.summary.requests.total, recs.len() as u64);
    // Session n is chat n (no shuffle), of 2 + n % 3 turns: it runs to its end or to its
    // first failed turn, and no further; each session once.
    let sessions = by_session(&recs);
    assert_eq!(sessions.keys().copied().collect::<Vec<_>>(), (0..12).collect::<Vec<u64>>());
    for (n, turns) in &sessions {
        let sent: Vec<u32> = turns.iter().map(|r| r.turn.unwrap()).collect();
        let want = match turns.iter().position(|r| r.class != infergate_model::Outcome::Ok) {
            Some(i) => i + 1,
            None => 2 + *n as usize % 3,
        };
        assert_eq!(sent, (1..=want as u32).collect::<Vec<_>>(), "session {n}: {turns:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_dataset_names_its_line_and_nothing_is_sent() {
    let h = start_timing_sim(TimingConfig::default(), SimOptions::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("chats.jsonl");
    let good = r#"{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}"#;
    let bad =
        r#"{"messages": [{"role": "user", "content": "hi"}, {"role": "robot", "content": "yo"}]}"#;
    std::fs::write(&file, format!("{good}\n{good}\n{bad}\n")).unwrap();
    let target = Target::at(h.base_url()).with_model(h.model());
    let spec = RunSpec::quiet(
        sessions_profile(&file, ""),
        ("sim".into(), target),
        dir.path().join("run"),
        "test",
    );
    let err = runner::run(spec, RunControl::default()).await.err().expect("the run is refused");
    let chain = format!("{:#}", anyhow::Error::from(err));
    assert!(
        chain.contains(
            "chats.jsonl:3: messages[1].role: expected system, user or assistant, got `robot`"
        ),
        "{chain}"
    );
    assert!(h.records().is_empty(), "nothing was sent");
}
