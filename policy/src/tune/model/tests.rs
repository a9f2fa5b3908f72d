//! Unit tests of the tune model: the choice, its statement, the fronts, SLOs, edge warnings
//! and the searches.

use infergate_model::compare::Change;
use infergate_model::stats::Estimate;

use super::*;

/// A t interval over 3 trials: `value ± half`.
fn est(value: f64, half: f64) -> Estimate {
    crate::test_support::estimate(value, value - half, value + half)
}

fn row(name: &str, goodput: f64, tput: f64, ttft: f64) -> TuneRow {
    let mut r = TuneRow::unmeasured(name, vec![], RowStatus::Measured);
    r.trials = 3;
    r.goodput_rps = Some(goodput);
    r.estimates.goodput_rps = Some(est(goodput, 0.3));
    r.output_tokens_per_s = Some(tput);
    r.ttft_p99_ms = Some(ttft);
    r
}

fn file(rows: Vec<TuneRow>) -> TuneFile {
    let mut f = TuneFile {
        format: FORMAT_VERSION,
        profile: "default".into(),
        engine_config: "configs/engine.toml".into(),
        engine: "sim".into(),
        search: "grid".into(),
        objective: Objective::Goodput,
        command: None,
        axes: vec![],
        rows,
        earlier: vec![],
        winner: None,
        decided_by: None,
        tie_break: None,
        indistinguishable: vec![],
        rivals: vec![],
        slo_undecided: vec![],
        beyond_max_configs: 0,
        capacity_overlaps: vec![],
        warnings: vec![],
    };
    f.decide(&[]);
    f
}

/// A row whose capacity search bracketed `[pass, fail)` concurrency, at `cost` per 1M tokens.
fn capacity_row(name: &str, pass: f64, fail: f64, cost: Option<f64>) -> TuneRow {
    let mut r = row(name, 1.0, 100.0, 100.0);
    r.capacity = Some(RowCapacity {
        dimension: "concurrency".into(),
        target: 0.95,
        bracket: infergate_model::capacity::Bracket { pass: Some(pass), fail: Some(fail) },
        binding: Some("ttft_ms".into()),
        requests: 1000,
    });
    r.cost_per_1m_output_tokens = cost;
    r
}

fn capacity_file(rows: Vec<TuneRow>) -> TuneFile {
    let mut f = file(rows);
    f.objective = Objective::Capacity;
    f.decide(&[]);
    f
}

#[test]
fn by_capacity_a_bracket_above_every_other_decides() {
    let f = capacity_file(vec![
        capacity_row("small", 8.0, 10.0, Some(1.0)),
        capacity_row("large", 16.0, 18.0, Some(2.0)),
    ]);
    assert_eq!(f.winner.as_deref(), Some("large"));
    assert_eq!(f.decided_by, Some(DecidedBy::Capacity));
    assert!(f.capacity_overlaps.is_empty());
    let s = f.statement().unwrap();
    assert!(s.contains("capacity concurrency [16, 18)"), "{s}");
    assert!(s.contains("above small's [8, 10)"), "{s}");
}

#[test]
fn by_capacity_overlapping_brackets_go_to_the_lower_cost() {
    let mut rows = vec![
        capacity_row("a", 16.0, 20.0, Some(3.0)),
        capacity_row("b", 18.0, 20.0, Some(2.0)),
        capacity_row("c", 4.0, 6.0, Some(0.5)),
        capacity_row("failed", 30.0, 40.0, Some(0.1)),
    ];
    rows[3].status = RowStatus::Failed;
    let f = capacity_file(rows);
    // b leads (18), a's bracket overlaps it: tied, b is cheaper; c is below both.
    assert_eq!(f.winner.as_deref(), Some("b"));
    assert_eq!(f.decided_by, Some(DecidedBy::TieBreak));
    assert_eq!(f.tie_break, Some(TieBreak::Cost));
    assert_eq!(f.capacity_overlaps, vec![("a".to_string(), "b".to_string())]);
    assert_eq!(f.indistinguishable, vec!["a".to_string()]);
    let s = f.statement().unwrap();
    assert!(s.contains("overlaps a's [16, 20)"), "{s}");
    assert!(s.contains("cost per 1M output tokens"), "{s}");
    // The cheaper overlapping row wins even with the lower passing load.
    let f = capacity_file(vec![
        capacity_row("a", 18.0, 20.0, Some(3.0)),
        capacity_row("b", 16.0, 20.0, Some(2.0)),
    ]);
    assert_eq!(f.winner.as_deref(), Some("b"));
    // No load held the SLO anywhere: no winner.
    let mut none = capacity_row("x", 1.0, 2.0, None);
    none.capacity.as_mut().unwrap().bracket.pass = None;
    assert_eq!(capacity_file(vec![none]).winner, None);
}

#[test]
fn indistinguishable_goodputs_go_to_the_tie_break_throughput_then_ttft_then_order() {
    let mut rows = vec![
        row("a", 5.0, 500.0, 100.0),
        row("b", 9.0, 900.0, 300.0),
        row("c", 12.0, 1200.0, 800.0),
        row("d", 9.05, 950.0, 310.0),
    ];
    rows[2].slo_misses = vec!["TTFT P99 800.0 ms above the SLO's 500 ms".into()];
    // c misses its SLO; d leads, b is within noise of it (9.0 ± 0.3 against 9.05 ± 0.3),
    // a is far below: the tie-break between b and d goes to d's higher throughput.
    let c = choose(&rows).unwrap();
    assert_eq!(
        (c.winner, c.decided_by, c.tie_break),
        (3, DecidedBy::TieBreak, Some(TieBreak::Throughput))
    );
    let changes: Vec<(usize, Change)> = c.rivals.iter().map(|(i, _, ch)| (*i, *ch)).collect();
    assert_eq!(changes, [(0, Change::Better), (1, Change::NotSignificant)]);
    // Welch over two t intervals of 3 trials: se = 0.3 / t(0.975, 2) each, df = 4,
    // half width t(0.975, 4) x se x sqrt(2) = 0.2738 around 0.05.
    let d = c.rivals[1].1.as_ref().unwrap();
    assert!(
        (d.lo.unwrap() + 0.2238).abs() < 1e-3 && (d.hi.unwrap() - 0.3238).abs() < 1e-3,
        "{d:?}"
    );
    let f = file(rows.clone());
    assert_eq!(
        (f.winner.as_deref(), f.indistinguishable.clone()),
        (Some("d"), vec!["b".to_string()])
    );
    assert_eq!(
        f.statement().unwrap(),
        "d (goodput 9.05 ± 0.30 req/s); not significantly better than b (differences \
         [-0.22, 0.32] req/s): chosen by the tie-break (throughput); run with --trials 6 to \
         decide"
    );
    let json = serde_json::to_value(&f).unwrap();
    assert_eq!(json["decided_by"], "tie-break");
    assert_eq!(json["indistinguishable"], serde_json::json!(["b"]));
    assert_eq!(json["rivals"][1]["change"], "not_significant");
    rows[3].output_tokens_per_s = Some(900.0);
    // Same throughput: the lower TTFT P99 wins.
    assert_eq!(choose(&rows).map(|c| (c.winner, c.tie_break)), Some((1, Some(TieBreak::TtftP99))));
    rows[3].ttft_p99_ms = Some(300.0);
    // Equal in everything: the earlier row.
    assert_eq!(choose(&rows).map(|c| (c.winner, c.tie_break)), Some((1, Some(TieBreak::Order))));
    rows[1].status = RowStatus::Failed;
    rows[3].status = RowStatus::Failed;
    let only = file(rows.clone());
    assert_eq!(only.decided_by, Some(DecidedBy::Goodput));
    assert_eq!(
        only.statement().unwrap(),
        "a (goodput 5.00 ± 0.30 req/s): the only configuration that meets every SLO"
    );
    rows[0].slo_misses = vec!["x".into()];
    assert_eq!(winner(&rows), None, "no row meets the SLOs");
}

#[test]
fn a_winner_significantly_better_than_every_other_is_decided_by_goodput() {
    let mut rows = vec![
        row("a", 5.0, 500.0, 100.0),
        row("b", 9.0, 990.0, 300.0),
        row("d", 9.05, 950.0, 310.0),
    ];
    rows[1].estimates.goodput_rps = Some(est(9.0, 0.01));
    rows[2].estimates.goodput_rps = Some(est(9.05, 0.01));
    // 0.05 apart with half widths of 0.01: significant, though b has more throughput.
    let c = choose(&rows).unwrap();
    assert_eq!((c.winner, c.decided_by, c.tie_break), (2, DecidedBy::Goodput, None));
    assert!(c.rivals.iter().all(|(_, _, ch)| *ch == Change::Better));
    let f = file(rows.clone());
    assert!(f.indistinguishable.is_empty());
    let s = f.statement().unwrap();
    assert!(
        s.starts_with("d (goodput 9.050 ± 0.010 req/s): significantly better in goodput than a, b (differences ["),
        "{s}"
    );
    assert!(s.ends_with("req/s): decided by goodput"), "{s}");
    // Single runs: the same differences, request-level only, cannot decide; the tie-break
    // among all three goes to b's throughput.
    let mut single = rows.clone();
    for r in &mut single {
        let e = r.estimates.goodput_rps.as_mut().unwrap();
        (e.method, e.trials) = (infergate_model::stats::Method::RequestBootstrap, 1);
        r.trials = 1;
    }
    let c = choose(&single).unwrap();
    assert_eq!((c.winner, c.decided_by), (1, DecidedBy::TieBreak));
    // b against a is better, against d worse: request-level only, neither decides.
    let changes: Vec<(Change, bool)> =
        c.rivals.iter().map(|(_, d, ch)| (*ch, d.as_ref().unwrap().request_level_only)).collect();
    assert_eq!(changes, [(Change::Better, true), (Change::Worse, true)]);
    let f = file(single);
    assert_eq!(f.indistinguishable, ["a", "d"]);
    let s = f.statement().unwrap();
    assert!(
        s.starts_with("b (goodput 9.000 ± 0.010~ req/s); not significantly better than a, d"),
        "{s}"
    );
    assert!(
        s.ends_with(
            "~ req/s; ~: one run each, a request-level interval leaves run-to-run \
             variance out and cannot decide): chosen by the tie-break (throughput); run \
             with --trials 3 to decide"
        ),
        "{s}"
    );
    // A row without a goodput interval cannot be told apart: the tie-break decides.
    rows[0].estimates.goodput_rps = None;
    let c = choose(&rows).unwrap();
    assert_eq!((c.winner, c.decided_by), (2, DecidedBy::TieBreak));
    assert_eq!(c.rivals[0].2, Change::Blank);
}

#[test]
fn an_undecided_slo_never_wins_and_the_error_names_it() {
    let mut rows = vec![row("a", 5.0, 500.0, 100.0), row("b", 9.0, 900.0, 300.0)];
    rows[0].slo_misses = vec!["x".into()];
    rows[1].slo_undecided =
        vec!["TTFT P99 480.0 ms [430.0, 530.0] straddles the SLO's 500 ms".into()];
    let f = file(rows);
    assert_eq!(f.winner, None);
    assert_eq!(f.rows[1].slo, Some(SloCompliance::Undecided));
    assert_eq!(f.rows[0].slo, Some(SloCompliance::Misses));
    assert_eq!(f.slo_undecided, ["b"]);
    assert_eq!(
        f.no_winner(),
        "no measured configuration meets every SLO of the profile; undecided (an interval \
         straddles an SLO): b; run with --trials 6 to decide"
    );
}

#[test]
fn the_pareto_front_keeps_the_rows_no_other_row_dominates() {
    let mut rows = vec![
        row("fast", 1.0, 500.0, 100.0),
        row("dominated", 1.0, 400.0, 200.0),
        row("wide", 1.0, 1000.0, 400.0),
        row("middle", 1.0, 700.0, 250.0),
        row("failed", 1.0, 5000.0, 1.0),
    ];
    rows[4].status = RowStatus::Failed;
    assert_eq!(pareto_front(&rows, |r| r.output_tokens_per_s), vec![0, 2, 3]);
    rows[1].ttft_p99_ms = None;
    assert_eq!(pareto_front(&rows, |r| r.output_tokens_per_s), vec![0, 2, 3]);
}

#[test]
fn slos_are_met_missed_or_undecided_by_the_intervals_unfavourable_and_favourable_ends() {
    let slo =
        infergate_model::metrics::Slo { ttft_ms: Some(500.0), tpot_ms: Some(50.0), e2e_ms: None };
    let (ttft, tpot) = (est(450.0, 40.0), est(45.0, 4.0));
    let (m, u) =
        slo_check(&slo, [(Some(450.0), Some(&ttft)), (Some(45.0), Some(&tpot)), (Some(9e9), None)]);
    assert!(m.is_empty() && u.is_empty(), "{m:?} {u:?}");
    // 480 ± 50: the upper end 530 is beyond 500, the lower end within: undecided.
    let straddles = est(480.0, 50.0);
    let mut above = est(812.0, 20.0);
    above.method = infergate_model::stats::Method::RequestBootstrap;
    let (m, u) =
        slo_check(&slo, [(Some(480.0), Some(&straddles)), (Some(45.0), None), (None, None)]);
    assert!(m.is_empty(), "{m:?}");
    assert_eq!(
        u,
        [
            "TTFT P99 480.0 ms [430.0, 530.0] straddles the SLO's 500 ms",
            "TPOT P99 45.0 ms has no interval (SLO 50 ms)"
        ]
    );
    let (m, u) = slo_check(&slo, [(Some(812.0), Some(&above)), (None, None), (None, None)]);
    assert_eq!(
        m,
        [
            "TTFT P99 812.0 ms [792.0, 832.0]~ above the SLO's 500 ms",
            "TPOT P99 not measured (SLO 50 ms)"
        ]
    );
    assert!(u.is_empty());
}

#[test]
fn a_winner_at_the_edge_of_a_numeric_axis_is_warned_about() {
    let axes = vec![
        crate::tune::grid::parse_axis("scheduler.max_num_seqs=64,128,256").unwrap(),
        crate::tune::grid::parse_axis("scheduler.enable_chunked_prefill=true,false").unwrap(),
    ];
    let mut w = row("w", 1.0, 1.0, 1.0);
    w.settings = vec![
        (infergate_model::config::ConfigKey::literal("scheduler.max_num_seqs"), 256.into()),
        (
            infergate_model::config::ConfigKey::literal("scheduler.enable_chunked_prefill"),
            true.into(),
        ),
    ];
    let warnings = edge_warnings(&axes, &w);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("largest value tried for scheduler.max_num_seqs (256)"));
    w.settings[0].1 = 128.into();
    assert!(edge_warnings(&axes, &w).is_empty());
    w.settings[0].1 = 64.into();
    assert!(edge_warnings(&axes, &w)[0].contains("smallest"));
}

#[test]
fn halving_doubles_the_requests_each_rung_and_keeps_the_better_half() {
    assert_eq!(halving_rungs(64, 6), vec![16, 32, 64]);
    assert_eq!(halving_rungs(64, 8), vec![16, 32, 64]);
    assert_eq!(halving_rungs(64, 2), vec![64]);
    assert_eq!(halving_rungs(64, 1), vec![64]);
    assert_eq!(halving_rungs(20, 16), vec![8, 8, 10, 20]);
    assert_eq!(halving_rungs(4, 4), vec![4, 4]);
    let mut rows = vec![
        row("a", 5.0, 500.0, 100.0),
        row("b", 9.0, 900.0, 300.0),
        row("c", 12.0, 1200.0, 800.0),
        row("d", 9.0, 950.0, 310.0),
        row("e", 1.0, 100.0, 100.0),
    ];
    rows[2].slo_misses = vec!["x".into()];
    rows[4].status = RowStatus::Failed;
    let refs: Vec<&TuneRow> = rows.iter().collect();
    // Within the SLOs first (b, d, a by goodput, then throughput), c missing them next.
    assert_eq!(better_half(&refs), vec![0, 1, 3]);
    rows[0].eliminated = true;
    rows[1].eliminated = true;
    rows[3].eliminated = true;
    assert_eq!(winner(&rows), None, "an eliminated row never wins");
}

#[test]
fn searches_order_and_cap_the_configurations() {
    assert_eq!(Search::Grid.order(4, None), vec![0, 1, 2, 3]);
    assert_eq!(Search::Grid.order(4, Some(2)), vec![0, 1]);
    let r = Search::Random { seed: 7 }.order(10, Some(4));
    assert_eq!(r, Search::Random { seed: 7 }.order(10, Some(4)), "seeded");
    assert_eq!(r.len(), 4);
    let mut all = Search::Random { seed: 7 }.order(10, None);
    assert_ne!(all, (0..10).collect::<Vec<_>>());
    all.sort();
    assert_eq!(all, (0..10).collect::<Vec<_>>());
}
