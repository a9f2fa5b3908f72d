//! The checks of a resolved profile: every number against its documented bound
//! ([`super::super::limits`]), and the combinations a run cannot measure.

use super::*;

/// `api_key_env` (or a header's variable) is not a variable's name. The value is never echoed:
/// it may be a key pasted in the wrong place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "api_key_env must be the NAME of an environment variable (letters, digits, underscores), not \
     the key itself"
)]
pub struct NotAVariableName;

/// An environment variable name: letters, digits and underscores, not starting with a digit.
pub fn validate_env_name(var: &str) -> Result<(), NotAVariableName> {
    let valid = !var.is_empty()
        && !var.starts_with(|c: char| c.is_ascii_digit())
        && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if valid { Ok(()) } else { Err(NotAVariableName) }
}

/// Semantic checks on a resolved profile: `(dotted key, message)` of the first problem. Every
/// number is checked against its documented bound ([`crate::config::limits`]).
pub(crate) fn validate_profile(p: &Profile) -> Result<(), Invalid> {
    validate_load(&p.load)?;
    validate_trace(p)?;
    validate_conversations(p)?;
    validate_workload(&p.workload)?;
    for (k, v) in [
        ("slo.ttft_ms", p.slo.ttft_ms),
        ("slo.tpot_ms", p.slo.tpot_ms),
        ("slo.e2e_ms", p.slo.e2e_ms),
    ] {
        if let Some(v) = v {
            at(k, limits::millis(v, false))?;
        }
    }
    at(
        "scrape.interval_s",
        limits::check_f64(p.scrape.interval_s, Low::Closed, 0.01, MAX_SECONDS, "seconds"),
    )?;
    let c = &p.client;
    at("client.request_timeout_s", limits::seconds(c.request_timeout_s, false))?;
    at("client.stall_timeout_s", limits::seconds(c.stall_timeout_s, false))?;
    at("client.grace_s", limits::seconds(c.grace_s, true))?;
    at("client.max_event_kib", limits::check_int(c.max_event_kib, 1, 1024 * 1024, "KiB"))?;
    if let Some(n) = p.trials {
        at("trials", limits::check_int(n.into(), 1, limits::MAX_TRIALS.into(), "trials"))?;
    }
    if let Some(c) = p.cooldown_s {
        at("cooldown_s", limits::seconds(c, true))?;
    }
    p.cancel.validate("cancel", p.stream)?;
    p.steady.validate("steady")?;
    validate_sim(&p.sim)
}

/// The dotted key of a failed check.
pub(super) fn at<E: std::fmt::Display>(key: &str, r: Result<(), E>) -> Result<(), Invalid> {
    r.map_err(|m| Invalid(key.to_string(), m.to_string()))
}

pub(super) fn validate_trace(p: &Profile) -> Result<(), Invalid> {
    let (l, w) = (&p.load, &p.workload);
    match (l.mode, &w.trace) {
        (LoadMode::Trace, None) => {
            return at(
                "workload.trace",
                Err("a trace replay (load.mode = \"trace\") needs workload.trace = <file>"
                    .to_string()),
            );
        }
        (LoadMode::Closed | LoadMode::Open, Some(_)) => {
            return at(
                "load.mode",
                Err("workload.trace is replayed by load.mode = \"trace\"".to_string()),
            );
        }
        _ => {}
    }
    if w.trace.is_some() && w.dataset.is_some() {
        return at("workload.dataset", Err("a trace and a dataset exclude each other".to_string()));
    }
    at(
        "load.time_scale",
        limits::check_f64(l.time_scale, Low::Open, 0.0, 1000.0, "(trace time x scale)"),
    )?;
    at("load.trace_start_s", limits::seconds(l.trace_start_s, true))?;
    if let Some(d) = l.trace_duration_s {
        at("load.trace_duration_s", limits::seconds(d, false))?;
    }
    if let Some(r) = l.max_rate {
        at(
            "load.max_rate",
            limits::check_f64(r, Low::Closed, MIN_RATE, MAX_RATE, "requests per second"),
        )?;
    }
    at(
        "workload.trace_block_tokens",
        limits::check_int(w.trace_block_tokens.into(), 1, MAX_REQUEST_TOKENS.into(), "tokens"),
    )
}

/// A conversation dataset: alone (no trace or JSONL dataset), sessions in a closed loop, think
/// time and recorded answers only with it.
pub(super) fn validate_conversations(p: &Profile) -> Result<(), Invalid> {
    let w = &p.workload;
    if w.conversations.is_none() {
        if w.think_time_ms.is_some() {
            return at(
                "workload.think_time_ms",
                Err("think time is between the turns of sessions: set workload.conversations"
                    .to_string()),
            );
        }
        if w.max_tokens_from_answer {
            return at(
                "workload.max_tokens_from_answer",
                Err("recorded answers come from workload.conversations".to_string()),
            );
        }
        return Ok(());
    }
    if w.trace.is_some() || w.dataset.is_some() {
        return at(
            "workload.conversations",
            Err("a conversation dataset excludes workload.trace and workload.dataset".to_string()),
        );
    }
    let sessions = w.conversation_turns == TurnMode::Sessions;
    if sessions && p.load.mode != LoadMode::Closed {
        return at(
            "load.mode",
            Err("sessions run in a closed loop (load.mode = \"closed\": concurrency counts \
                 sessions); conversation_turns = \"first\" sends single requests in any mode"
                .to_string()),
        );
    }
    if let Some(d) = &w.think_time_ms {
        if !sessions {
            return at(
                "workload.think_time_ms",
                Err("think time is between turns: conversation_turns = \"sessions\"".to_string()),
            );
        }
        d.validate().map_err(|Invalid(field, m)| {
            Invalid(format!("workload.think_time_ms.{field}"), m.replace(" tokens", " ms"))
        })?;
    }
    Ok(())
}

pub(super) fn validate_load(l: &LoadConfig) -> Result<(), Invalid> {
    let concurrency = |v: u32| limits::check_int(v.into(), 1, MAX_CONCURRENCY.into(), "requests");
    at("load.concurrency", concurrency(l.concurrency))?;
    match (l.mode, l.rate) {
        (LoadMode::Open, None) => {
            return at(
                "load.rate",
                Err("an open-loop load (mode = \"open\") needs rate = <requests per second>"
                    .to_string()),
            );
        }
        (_, Some(r)) => at(
            "load.rate",
            limits::check_f64(r, Low::Closed, MIN_RATE, MAX_RATE, "requests per second"),
        )?,
        _ => {}
    }
    at(
        "load.burstiness",
        limits::check_f64(
            l.burstiness,
            Low::Closed,
            MIN_BURSTINESS,
            MAX_BURSTINESS,
            "(the gamma shape: 1 = Poisson)",
        ),
    )?;
    if let Some(n) = l.max_concurrency {
        at("load.max_concurrency", concurrency(n))?;
    }
    if let Some(n) = l.requests {
        at("load.requests", limits::check_int(n, 1, MAX_REQUESTS, "requests"))?;
    }
    at("load.warmup_requests", limits::check_int(l.warmup_requests, 0, MAX_REQUESTS, "requests"))?;
    if let Some(d) = l.duration_s {
        at("load.duration_s", limits::seconds(d, false))?;
    }
    at(
        "load.warmup_trials",
        limits::check_int(l.warmup_trials.into(), 0, limits::MAX_TRIALS.into(), "trials"),
    )?;
    at("load.warmup_s", limits::seconds(l.warmup_s, true))
}

pub(super) fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

pub(super) fn validate_workload(w: &WorkloadConfig) -> Result<(), Invalid> {
    let tokens = |v: u32| limits::check_int(v.into(), 1, MAX_REQUEST_TOKENS.into(), "tokens");
    for (key, dist) in [
        ("input_distribution", &w.input_distribution),
        ("output_distribution", &w.output_distribution),
    ] {
        if let Some(d) = dist {
            d.validate()
                .map_err(|Invalid(field, m)| Invalid(format!("workload.{key}.{field}"), m))?;
        }
    }
    at("workload.samples", limits::check_int(w.samples.into(), 1, MAX_WORKLOAD_ITEMS, "items"))?;
    let synthetic = w.dataset.is_none() && w.trace.is_none() && w.conversations.is_none();
    if synthetic && w.input_distribution.is_none() {
        if w.input_lengths.is_empty() {
            return at(
                "workload.input_lengths",
                Err("needs at least one prompt length (or set workload.dataset)".to_string()),
            );
        }
        if let Some(&n) = w.input_lengths.iter().find(|&&n| tokens(n).is_err()) {
            return at(
                "workload.input_lengths",
                tokens(n).map_err(|m| format!("every prompt length {m}")),
            );
        }
        at("workload.repeats", limits::check_int(w.repeats.into(), 1, MAX_WORKLOAD_ITEMS, ""))?;
        let items = w.input_lengths.len() as u64 * u64::from(w.repeats);
        if items > MAX_WORKLOAD_ITEMS {
            return at(
                "workload.repeats",
                Err(format!(
                    "{} prompt lengths x {} repeats = {items} requests, more than the \
                     {MAX_WORKLOAD_ITEMS} a synthetic workload may hold",
                    w.input_lengths.len(),
                    w.repeats
                )),
            );
        }
        if w.input_lengths.iter().any(|&n| n <= w.shared_prefix_tokens)
            && w.shared_prefix_tokens > 0
        {
            return at(
                "workload.shared_prefix_tokens",
                Err("must be shorter than every prompt length".to_string()),
            );
        }
    }
    at("workload.max_tokens", tokens(w.max_tokens))?;
    if !(w.temperature.is_finite() && (0.0..=2.0).contains(&w.temperature)) {
        return at(
            "workload.temperature",
            Err(format!("must be within 0..=2, got {}", w.temperature)),
        );
    }
    if !(w.top_p.is_finite() && w.top_p > 0.0 && w.top_p <= 1.0) {
        return at("workload.top_p", Err(format!("must be within (0, 1], got {}", w.top_p)));
    }
    Ok(())
}

pub(super) fn validate_sim(sim: &SimConfig) -> Result<(), Invalid> {
    let t = &sim.timing;
    at("sim.timing.ttft_ms", limits::millis(t.ttft_ms, true))?;
    at("sim.timing.itl_ms", limits::millis(t.itl_ms, true))?;
    at("sim.timing.jitter_ms", limits::millis(t.jitter_ms, true))?;
    if t.jitter_ms > t.itl_ms {
        return at(
            "sim.timing.jitter_ms",
            Err(format!("must not exceed itl_ms ({}), got {}", t.itl_ms, t.jitter_ms)),
        );
    }
    let tokens = |v: u32| limits::check_int(v.into(), 1, MAX_REQUEST_TOKENS.into(), "tokens");
    at("sim.timing.tokens_per_chunk", tokens(t.tokens_per_chunk))?;
    at("sim.timing.cold_s", limits::check_f64(t.cold_s, Low::Closed, 0.0, 3600.0, "seconds"))?;
    at(
        "sim.timing.cold_factor",
        limits::check_f64(t.cold_factor, Low::Closed, 1.0, MAX_SLOWDOWN, "factor on the TTFT"),
    )?;
    if let Some(n) = t.output_tokens {
        at("sim.timing.output_tokens", tokens(n))?;
    }
    if !(sim.corruption_rate.is_finite() && (0.0..=1.0).contains(&sim.corruption_rate)) {
        return at(
            "sim.corruption_rate",
            Err(format!("is a probability: within 0..=1, got {}", sim.corruption_rate)),
        );
    }
    if !(sim.slowdown.is_finite() && sim.slowdown > 0.0 && sim.slowdown <= MAX_SLOWDOWN) {
        return at(
            "sim.slowdown",
            Err(format!(
                "is a factor on every step's cost: within (0, {MAX_SLOWDOWN}], got {}",
                sim.slowdown
            )),
        );
    }
    if !(sim.logprob_drift.is_finite() && sim.logprob_drift >= 0.0 && sim.logprob_drift < 1.0) {
        return at(
            "sim.logprob_drift",
            Err(format!("is a relative error: within 0..1, got {}", sim.logprob_drift)),
        );
    }
    let f = &sim.faults;
    for (name, prob) in f.probabilities() {
        if !(prob.is_finite() && (0.0..=1.0).contains(&prob)) {
            return at(
                &format!("sim.faults.{name}"),
                Err(format!("is a probability: within 0..=1, got {prob}")),
            );
        }
    }
    let total: f64 = f.probabilities().iter().filter(|(n, _)| *n != "stall").map(|(_, p)| p).sum();
    if total > 1.0 + 1e-9 {
        return at(
            "sim.faults",
            Err(format!("the fault probabilities (except stall) add up to {total}, more than 1")),
        );
    }
    at("sim.faults.stall_ms", limits::millis(f.stall_ms, true))?;
    at("sim.faults.freeze_ms", limits::millis(f.freeze_ms, true))?;
    at(
        "sim.faults.usage_overcount",
        limits::check_f64(f.usage_overcount, Low::Closed, 0.0, 10.0, "share"),
    )?;
    if let Some(v) = f.freeze_at_ms {
        at("sim.faults.freeze_at_ms", limits::millis(v, true))?;
    }
    sim.noise.validate("sim.noise")
}
