use infergate_model::metrics::Slo;
use infergate_model::sweep::{StagePlan, SweepSpec, SweepSummary};

use crate::test_support::stage;

use super::figures::{cdf, cdf_points, sweep_latency, sweep_svg};
use super::*;

fn sweep() -> SweepSummary {
    let spec: SweepSpec = "concurrency=4,16,64,256".parse().unwrap();
    SweepSummary::new(
        "sweep-x".into(),
        &spec,
        StagePlan::default(),
        Slo { ttft_ms: Some(200.0), tpot_ms: None, e2e_ms: None },
        vec![
            stage(1, 4.0, 500.0, Some(60.0)),
            stage(2, 16.0, 1800.0, Some(120.0)),
            stage(3, 64.0, 3000.0, None),
            stage(4, 256.0, 3100.0, Some(900.0)),
        ],
    )
}

#[test]
fn sweep_svg_snapshot() {
    insta::assert_snapshot!("sweep_svg", sweep_svg(&sweep()));
}

#[test]
fn cdf_svg_snapshot() {
    let samples = vec![
        ("baseline".to_string(), vec![10.0, 12.0, 15.0, 40.0]),
        ("tuned".to_string(), vec![8.0, 9.0, 9.5, 11.0, 30.0]),
    ];
    let marks = vec![Mark::limit(MarkAxis::X, 35.0, "gate TTFT p99 <= 35 ms (ADR-0002)")];
    insta::assert_snapshot!("cdf_svg", render(&cdf("ttft-cdf", "TTFT", &samples, marks)));
}

#[test]
fn a_geometric_sweep_has_a_log_axis_ticks_at_its_loads_and_a_labelled_knee() {
    let svg = render(&sweep_latency(&sweep()));
    assert!(svg.contains("concurrency (concurrent requests), log scale"), "{svg}");
    for t in [">4<", ">16<", ">64<", ">256<"] {
        assert!(svg.contains(t), "tick {t} missing");
    }
    assert!(!svg.contains(">16.0<"));
    assert!(svg.contains("knee: concurrency=16"), "{svg}");
    assert!(svg.contains("SLO TTFT p99 &lt;= 200 ms"), "{svg}");
}

#[test]
fn a_blank_breaks_the_line_and_is_counted_not_drawn_as_zero() {
    let chart = sweep_latency(&sweep());
    let ttft = &chart.series[0];
    assert_eq!((ttft.drawn(), ttft.blanks()), (3, 1));
    let svg = render(&chart);
    let group = svg.split("data-name=\"TTFT p99\"").nth(1).unwrap().split("</g>").next().unwrap();
    // Two polylines around the blank stage, never a point at y = 0.
    assert_eq!(group.matches("<polyline").count(), 2, "{group}");
    assert!(svg.contains("TTFT p99: 1 value not measured (blank, not drawn; not zero)"), "{svg}");
}

#[test]
fn a_chart_without_values_says_so() {
    let chart = cdf("tpot-cdf", "TPOT", &[("run".into(), vec![])], vec![]);
    let svg = render(&chart);
    assert!(svg.contains("no TPOT was measured (blank, not zero)"), "{svg}");
    assert!(svg.contains("data-points=\"0\""));
}

#[test]
fn cdfs_are_thinned_to_a_bounded_number_of_points_with_both_ends() {
    let values: Vec<f64> = (1..=10_000).map(f64::from).collect();
    let pts = cdf_points(&values);
    assert_eq!(pts.len(), figures::CDF_POINTS);
    assert_eq!(pts.first(), Some(&(1.0, Some(0.01))));
    assert_eq!(pts.last(), Some(&(10_000.0, Some(100.0))));
    assert_eq!(cdf_points(&[3.0, 1.0]), vec![(1.0, Some(50.0)), (3.0, Some(100.0))]);
}

#[test]
fn text_is_escaped() {
    let mut chart = Chart::new("x", "a <b> & \"c\"", Axis::linear("ms"), Axis::linear("%"));
    chart.series.push(Series::line("<script>", 0, vec![(1.0, Some(1.0))]));
    let svg = render(&chart);
    assert!(!svg.contains("<script>") && !svg.contains("<b>"), "{svg}");
}

#[test]
fn a_timeline_above_the_limit_is_sampled_and_says_so() {
    let records: Vec<infergate_model::record::RequestRecord> = (0..4500u64)
        .map(|i| {
            serde_json::from_value(serde_json::json!({
                "id": i, "warmup": false, "class": "ok", "item": 0,
                "intended_ms": i as f64, "sent_ms": i as f64 + 0.5, "first_token_ms": i as f64 + 3.0,
                "last_token_ms": i as f64 + 9.0, "end_ms": i as f64 + 9.0, "content_events": 4
            }))
            .unwrap()
        })
        .collect();
    let refs: Vec<&infergate_model::record::RequestRecord> = records.iter().collect();
    let chart = figures::timeline(&refs);
    assert_eq!(chart.series[0].drawn(), 1500);
    assert_eq!(chart.notes, vec!["n = 4500 measured requests; every 3rd drawn (1500 rows)"]);
}

#[test]
fn a_tunes_pareto_chart_draws_the_front_as_a_line_and_configurations_as_dots() {
    use super::figures::{ParetoPoint, pareto_svg};
    let p = |name: &str, ttft: f64, tput: f64, front: bool, winner: bool| ParetoPoint {
        name: name.into(),
        ttft_p99_ms: Some(ttft),
        throughput: Some(tput),
        goodput: Some(tput / 100.0),
        pareto: front,
        goodput_pareto: front,
        winner,
    };
    let points = [
        p("a", 100.0, 500.0, true, false),
        p("b", 300.0, 400.0, false, false),
        p("c", 400.0, 900.0, true, true),
    ];
    let svg = pareto_svg(&points);
    for chart in ["pareto-throughput", "pareto-goodput"] {
        assert!(svg.contains(&format!("data-chart=\"{chart}\" data-series=\"3\"")), "{svg}");
    }
    // Per chart: one polyline (the front through a and c), and dots: 2 on the front, 3
    // configurations, 1 winner.
    assert_eq!(svg.matches("<polyline").count(), 2, "{svg}");
    assert_eq!(svg.matches("<circle").count(), 2 * (2 + 3 + 1), "{svg}");
    assert!(svg.contains("data-name=\"Pareto front\" data-points=\"2\""), "{svg}");
}
