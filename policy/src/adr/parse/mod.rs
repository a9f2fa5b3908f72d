//! Markdown -> [`Adr`]: pulldown-cmark (with tables) finds headings, tables, code and HTML
//! blocks; fields, decision lines and links are read from the source lines of their section, so
//! every value keeps its exact line.
//!
//! Tolerated: CRLF line endings; YAML-style front matter (`---` ... `---`) holding `status`,
//! `date` and `deciders`; a `## Status` section instead of the status block; numbered headings
//! (`## 1. Context`); bold field names (`**Status:** Accepted`); decision lines in backticks.
//!
//! One file per phase, each using only those before it; this file puts them together
//! ([`parse_adr`]):
//!
//! - [`markdown`]: the document's structure: headings, tables, code and comment lines, the
//!   sections, front matter and the status block's fields;
//! - [`values`]: one line or table cell read into a typed value (a date, a decision line, a
//!   link, a threshold or budget row, an environment key), or a typed error saying why not;
//! - [`placeholders`](mod@placeholders): the blanks the template leaves in a line;
//! - [`sections`]: each part of the record gathered from its section and checked as a whole
//!   (a field given once, one threshold per metric and action, one profile line), every
//!   problem at its line.

pub mod markdown;
pub mod placeholders;
pub mod sections;
pub mod values;

use std::path::Path;

use super::model::{Adr, Located};
pub use markdown::number_from_file_name;
pub use markdown::strip_list_marker;
use markdown::{Doc, front_matter, scan_markdown, titles_and_sections};
pub use placeholders::find_placeholders;
use sections::{
    Problems, assets, budget_rows, decision_lines, links, placeholders, rollback_conditions,
    status_block, threshold_rows, thresholds_profile, thresholds_scenario,
};
pub use values::{
    BudgetRowError, DECISION_LINE_SHAPES, DateError, DecisionLineError, ENVIRONMENT_COLUMN,
    EnvironmentCellError, LOAD_COLUMN, LinkError, ProfileLineError, UnknownMetric, gated_profile,
    parse_budget_row, parse_decision_line, parse_environment_cell, parse_iso_date, parse_load_cell,
    parse_threshold_row, scenario_profile,
};

/// Parse a record. Never fails: anything unreadable becomes a
/// [`Problem`](super::model::Problem) in `Adr::problems`
/// (located at its line), and the values that could be read are kept.
pub fn parse_adr(path: &Path, text: &str) -> Adr {
    let text = text.replace("\r\n", "\n");
    let lines: Vec<&str> = text.split('\n').collect();
    let mut problems = Problems { path, list: Vec::new() };
    let front = front_matter(&lines, &mut |line, msg| problems.add(line, msg));
    let md: String = if front.end > 0 {
        let mut out: Vec<&str> = vec![""; front.end];
        out.extend_from_slice(&lines[front.end..]);
        out.join("\n")
    } else {
        text.clone()
    };
    let scan = scan_markdown(&md);
    let (titles, sections) = titles_and_sections(&scan, &lines);
    let doc = Doc { lines: &lines, scan: &scan, sections: &sections };
    let block = status_block(&doc, &titles, front, &mut problems);
    let decisions = decision_lines(&doc, &mut problems);
    let links = links(&doc, &mut problems);
    let thresholds = threshold_rows(&doc, &mut problems);
    let budgets = budget_rows(&doc, &mut problems);
    let rollback = rollback_conditions(&doc, &mut problems);
    let profile = thresholds_profile(&doc, &mut problems);
    let scenario = thresholds_scenario(&doc, &mut problems);
    let placeholders = placeholders(&doc);
    let assets = assets(&doc);
    let mut slo_missed = None;
    let mut slo_exception = None;
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim();
        if slo_missed.is_none() && t.starts_with(super::model::SLO_MISSED) {
            slo_missed = Some(i + 1);
        }
        if let Some(why) =
            t.strip_prefix(super::model::SLO_EXCEPTION).filter(|_| slo_exception.is_none())
        {
            slo_exception = Some(Located { value: why.trim().to_string(), line: i + 1 });
        }
    }
    Adr {
        path: path.to_path_buf(),
        number: number_from_file_name(path),
        titles,
        status: block.status,
        status_line: block.status_line,
        date: block.date,
        deciders: block.deciders,
        sections,
        decisions,
        thresholds,
        budgets,
        rollback,
        profile,
        scenario,
        links,
        placeholders,
        assets,
        slo_missed,
        slo_exception,
        problems: problems.list,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adr::model::{NO_STATUS, Problem};
    use crate::thresholds::Action;

    #[test]
    fn the_measured_scenario_names_the_profile_thresholds_apply_to() {
        let ok = |l: &str| scenario_profile(l).map(|r| r.unwrap());
        assert_eq!(
            ok("Measured scenario: profile `llama-cpp`, target `llama-cpp` (model x); closed loop"),
            Some("llama-cpp".into())
        );
        assert_eq!(ok("**Measured scenario:** profile `default`."), Some("default".into()));
        assert_eq!(ok("The measured scenario was profile `x`"), None, "only the template's line");
        assert!(scenario_profile("Measured scenario: the default one").unwrap().is_err());
        let adr = parse_adr(
            Path::new("docs/adr/0003-x.md"),
            "# T\n\n- Status: Proposed\n\n## Context\n\nWhy.\n\nMeasured scenario: profile `tuned`, closed loop.\n",
        );
        assert_eq!(adr.profile.map(|p| (p.value, p.line)), Some(("tuned".to_string(), 9)));
        let adr = parse_adr(Path::new("docs/adr/0003-x.md"), "# T\n\n## Context\n\nWhy.\n");
        assert_eq!(adr.profile, None, "no scenario line: thresholds gate every run");
        // The thresholds section's own line wins over the scenario.
        let adr = parse_adr(
            Path::new("docs/adr/0003-x.md"),
            "# T\n\n## Context\n\nMeasured scenario: profile `default`.\n\n## CI gate thresholds\n\n\
             Proposed from Exp-1.\nThey gate runs of bench profile `tuned`, the profile Exp-1 was measured with.\n",
        );
        assert_eq!(adr.profile.map(|p| (p.value, p.line)), Some(("tuned".to_string(), 10)));
        assert!(gated_profile("They gate runs of bench profile tuned.").unwrap().is_err());
    }

    fn messages(adr: &Adr) -> Vec<(usize, String)> {
        adr.problems.iter().map(|p| (p.line, p.message.clone())).collect()
    }

    #[test]
    fn the_status_block_reads_each_field_once_and_names_what_is_missing() {
        let adr = parse_adr(Path::new("docs/adr/0001-x.md"), "# ADR-0001: T\n\nText.\n");
        let got = messages(&adr);
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(got.iter().all(|(l, _)| *l == 1), "{got:?}");
        assert_eq!(adr.status_problems(), vec![Problem::new(&adr.path, 1, NO_STATUS)]);
        let adr = parse_adr(
            Path::new("docs/adr/0001-x.md"),
            "# T\n\n- Status: Acepted\n- Date: 2025-01-01\n- Date: 2025-01-02\n- Deciders: \n",
        );
        let got = messages(&adr);
        assert!(got[0].0 == 3 && got[0].1.starts_with("unknown status `Acepted`"), "{got:?}");
        assert_eq!(got[1], (5, "`date` is given twice (first at line 4)".to_string()));
        assert_eq!(got[2], (6, "deciders are empty; name who decided".to_string()));
        assert_eq!(adr.status_line, Some(3));
        assert_eq!(adr.status_problems().len(), 1);
        assert_eq!(adr.date.map(|d| d.line), Some(4));
    }

    #[test]
    fn threshold_tables_need_their_columns_and_one_row_per_metric_and_action() {
        let head = "# T\n\n- Status: Proposed\n- Date: 2025-01-01\n- Deciders: a\n\n## CI gate thresholds\n\n";
        let adr = parse_adr(
            Path::new("docs/adr/0001-x.md"),
            &format!("{head}| Metric | Limit |\n|---|---|\n| goodput.ratio | 0.9 |\n"),
        );
        assert_eq!(adr.thresholds, vec![]);
        assert_eq!(messages(&adr).len(), 1);
        assert!(
            messages(&adr)[0].1.contains("`comparator`, `unit`, `action`"),
            "{:?}",
            adr.problems
        );
        let adr = parse_adr(
            Path::new("docs/adr/0001-x.md"),
            &format!(
                "{head}| Action | Metric | Comparator | Limit | Unit |\n|---|---|---|---|---|\n\
                 | block | goodput.ratio | >= | 90 | % |\n| warn | goodput.ratio | >= | 0.95 | ratio |\n\
                 | block | `goodput.ratio` | >= | 0.8 | ratio |\n"
            ),
        );
        let rows: Vec<(f64, Action, usize)> =
            adr.thresholds.iter().map(|t| (t.limit, t.action, t.line)).collect();
        assert_eq!(rows, vec![(0.9, Action::Block, 11), (0.95, Action::Warn, 12)]);
        assert_eq!(
            messages(&adr),
            vec![(13, "metric `goodput.ratio` already has a `block` threshold at line 11".into())]
        );
    }

    #[test]
    fn a_second_profile_line_is_a_problem() {
        let adr = parse_adr(
            Path::new("docs/adr/0001-x.md"),
            "# T\n\n## CI gate thresholds\n\nThey gate runs of bench profile `a`.\n\
             They gate runs of bench profile `b`.\n",
        );
        assert_eq!(adr.profile.map(|p| (p.value, p.line)), Some(("a".to_string(), 5)));
        assert!(
            adr.problems.iter().any(|p| p.line == 6 && p.message.contains("first is at line 5")),
            "{:?}",
            adr.problems
        );
    }

    /// The At load column binds a row to a load: a metric may have one threshold per action
    /// for the scenario and one at each load; a cell that is no load is a problem naming the
    /// shapes.
    #[test]
    fn the_at_load_column_binds_rows_to_a_load() {
        let adr = parse_adr(
            Path::new("docs/adr/0001-x.md"),
            "# T\n\n## CI gate thresholds\n\n\
             | Metric | Comparator | Limit | Unit | Action | At load |\n|---|---|---|---|---|---|\n\
             | `goodput.ratio` | >= | 0.9 | ratio | block | — |\n\
             | `goodput.ratio` | >= | 0.95 | ratio | block | `concurrency 24` |\n\
             | `goodput.ratio` | >= | 0.95 | ratio | block | rate=2.5 |\n\
             | `goodput.ratio` | >= | 0.95 | ratio | block | concurrency 24 |\n\
             | `goodput.ratio` | >= | 0.95 | ratio | block | concurrency 2.5 |\n",
        );
        let loads: Vec<(usize, Option<String>)> =
            adr.thresholds.iter().map(|t| (t.line, t.load.map(|l| l.to_string()))).collect();
        assert_eq!(
            loads,
            vec![(7, None), (8, Some("concurrency 24".into())), (9, Some("rate 2.5 req/s".into()))]
        );
        // The status block's problems (lines 1) aside.
        let got: Vec<_> = messages(&adr).into_iter().filter(|(l, _)| *l > 1).collect();
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].0, 10);
        assert!(
            got[0].1.contains("already has a `block` threshold at concurrency 24 at line 8"),
            "{got:?}"
        );
        assert_eq!(got[1].0, 11);
        assert!(
            got[1].1.contains("load `concurrency 2.5`") && got[1].1.contains("whole number"),
            "{got:?}"
        );
    }

    /// The Environment column keys a row; blank, `any` and a dash hold for any environment;
    /// a bad key is a problem at its row naming what is valid; one metric may have a threshold
    /// per environment.
    #[test]
    fn the_environment_column_keys_rows_and_names_bad_keys() {
        let h100 = "gpu=H100-SXM-80GB x1; engine=infergate-sim; model=m; dtype=bfloat16";
        let a100 = h100.replace("H100-SXM-80GB", "A100-80GB");
        let adr = parse_adr(
            Path::new("docs/adr/0001-x.md"),
            &format!(
                "# T\n\n## CI gate thresholds\n\n\
                 | Metric | Comparator | Limit | Unit | Action | Environment |\n|---|---|---|---|---|---|\n\
                 | `metrics.ttft_ms.p99` | <= | 100 | ms | block | `{h100}` |\n\
                 | `metrics.ttft_ms.p99` | <= | 200 | ms | block | {a100} |\n\
                 | `goodput.ratio` | >= | 0.9 | ratio | block | any |\n\
                 | `error_rate` | <= | 0.01 | ratio | block | \u{2014} |\n\
                 | `requests.failed` | == | 0 | count | block | gpu=H100 |\n\
                 | `metrics.ttft_ms.p99` | <= | 150 | ms | block | {h100} |\n"
            ),
        );
        let envs: Vec<(usize, Option<String>)> = adr
            .thresholds
            .iter()
            .map(|t| (t.line, t.environment.as_ref().map(|e| e.to_string())))
            .collect();
        assert_eq!(
            envs,
            vec![(7, Some(h100.to_string())), (8, Some(a100.clone())), (9, None), (10, None)]
        );
        let at = |line: usize| -> Vec<&str> {
            adr.problems.iter().filter(|p| p.line == line).map(|p| p.message.as_str()).collect()
        };
        assert!(
            at(11).iter().any(|m| m.contains("environment `gpu=H100` is not valid")
                && m.contains("gpu=NAME xCOUNT; engine=ENGINE")
                && m.contains("or `any`")),
            "{:?}",
            adr.problems
        );
        assert!(
            at(12).iter().any(|m| m.contains("already has a `block` threshold for environment")
                && m.contains("at line 7")),
            "{:?}",
            adr.problems
        );
    }
}
