//! Rollback conditions: when a deployed decision is undone, in a form machines read.
//!
//! A record's Rollback conditions section holds one list item per condition:
//!
//! ```text
//! - `metrics.ttft_ms.p99` above 302 ms for 5m: roll back (measured 274.2 in Baseline)
//! - `metrics.itl_jitter` above 0.48 for 10m: investigate
//! ```
//!
//! the metric (a registry path, `infergate_model::metric::known_metrics`), where it breaks (`above`,
//! `below`, `>`, `>=`, `<`, `<=`), the limit and its unit (as in the thresholds table, with the
//! same `%` / `s` aliases), how long it must hold (`for` a Prometheus duration: `30s`, `5m`,
//! `1h`) and the action (`roll back` or `investigate`); a parenthesised comment may follow. A
//! list item of the section that starts with a backticked metric-like name (letters, digits,
//! `_`, `.`) and has a window (`for`) or an action (`:`) before any comment is a condition and
//! must parse; other text is prose: a restored value such as `` `configs/engine.toml: key = 1` ``,
//! and the statements of records written before this form (`` `metric` above 302 ms ``). Parsing is pure; `adr::parse` places each condition at its line.

use std::fmt;

use infergate_model::summary::Better;

use super::rule::Comparator;
use super::units::to_metric_unit;

/// What a rollback condition asks for when it holds for its window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RollbackAction {
    /// Undo the decision (alert severity `critical`; `watch` exits 1 or runs its command).
    RollBack,
    /// Look into it without rolling back (severity `warning`; `watch` reports it).
    Investigate,
}

pub const ACTION_CHOICES: &str = "`roll back`, `investigate`";

impl RollbackAction {
    pub fn parse(s: &str) -> Option<RollbackAction> {
        let t = s.trim().trim_end_matches('.').to_ascii_lowercase();
        let t = t.split_whitespace().collect::<Vec<_>>().join(" ");
        match t.as_str() {
            "roll back" | "rollback" => Some(RollbackAction::RollBack),
            "investigate" => Some(RollbackAction::Investigate),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RollbackAction::RollBack => "roll back",
            RollbackAction::Investigate => "investigate",
        }
    }

    /// The alert severity label: `critical` for a rollback, `warning` otherwise.
    pub fn severity(self) -> &'static str {
        match self {
            RollbackAction::RollBack => "critical",
            RollbackAction::Investigate => "warning",
        }
    }

    /// Whether the condition ends a canary (`watch` exits 1 on it).
    pub fn blocks(self) -> bool {
        self == RollbackAction::RollBack
    }
}

impl fmt::Display for RollbackAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How long a condition must hold: a Prometheus duration of one unit (`30s`, `5m`, `1h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Window {
    pub seconds: u64,
}

/// The window `adr new` writes (the field notes' "for 5 minutes"); edit it before accepting.
pub const DEFAULT_WINDOW: Window = Window { seconds: 300 };

/// The longest window accepted (a day): longer is no rollback trigger.
pub const MAX_WINDOW_S: u64 = 86_400;

/// A window that is not a whole number and one unit (`s`, `m`, `h`), positive and at most a
/// day; the text as written (trimmed).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "window `{0}` is not a duration; write a whole number and one unit: `30s`, `5m`, `1h` (at \
     most 24h)"
)]
pub struct WindowError(pub String);

impl Window {
    /// `30s`, `5m`, `1h`: a positive whole number and one unit, at most a day.
    pub fn parse(s: &str) -> Result<Window, WindowError> {
        let t = s.trim();
        let bad = || WindowError(t.to_string());
        let digits = t.chars().take_while(|c| c.is_ascii_digit()).count();
        let (n, unit) = t.split_at(digits);
        let n: u64 = n.parse().map_err(|_| bad())?;
        let mult = match unit {
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            _ => return Err(bad()),
        };
        let seconds = n.checked_mul(mult).ok_or_else(bad)?;
        if seconds == 0 || seconds > MAX_WINDOW_S {
            return Err(bad());
        }
        Ok(Window { seconds })
    }
}

impl fmt::Display for Window {
    /// The shortest exact spelling: `300` seconds is `5m`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.seconds;
        if s.is_multiple_of(3600) {
            write!(f, "{}h", s / 3600)
        } else if s.is_multiple_of(60) {
            write!(f, "{}m", s / 60)
        } else {
            write!(f, "{s}s")
        }
    }
}

/// One rollback condition: roll back (or investigate) when `metric <comparator> limit` holds
/// for `window`.
#[derive(Clone, Debug, PartialEq)]
pub struct RollbackCondition {
    /// Registry path (`metrics.ttft_ms.p99`).
    pub metric: infergate_model::metric::MetricPath,
    /// The breaking comparison: the condition holds when `value <comparator> limit`.
    pub comparator: Comparator,
    /// The limit in the registry unit of the metric.
    pub limit: f64,
    /// The registry unit of the metric.
    pub unit: String,
    pub window: Window,
    pub action: RollbackAction,
    /// The comment after the action, without its parentheses (`measured 274.2 in Baseline`).
    pub note: Option<String>,
    /// 1-based line in the record (0 until placed).
    pub line: usize,
}

impl RollbackCondition {
    /// Whether `value` meets the condition (NaN never does).
    pub fn holds(&self, value: f64) -> bool {
        self.comparator.holds(value, self.limit)
    }

    /// The condition as `adr new` writes it (without the list marker and comment).
    pub fn render(&self) -> String {
        let side = match self.comparator {
            Comparator::Gt => "above".to_string(),
            Comparator::Lt => "below".to_string(),
            c => c.to_string(),
        };
        format!(
            "`{}` {side} {} for {}: {}",
            self.metric,
            crate::text::with_unit(self.limit, &self.unit),
            self.window,
            self.action
        )
    }
}

/// The condition that breaks a threshold `comparator limit` (`<=` 302 -> `>` 302).
pub fn breaking(comparator: Comparator) -> Option<Comparator> {
    match comparator {
        Comparator::Le => Some(Comparator::Gt),
        Comparator::Lt => Some(Comparator::Ge),
        Comparator::Ge => Some(Comparator::Lt),
        Comparator::Gt => Some(Comparator::Le),
        Comparator::Eq => None,
    }
}

const GRAMMAR: &str = "write ``- `METRIC` above|below|>|>=|<|<= LIMIT UNIT for WINDOW: roll \
                       back|investigate``, e.g. ``- `metrics.ttft_ms.p99` above 302 ms for 5m: \
                       roll back``";

/// Parse a list item's text (the marker already stripped). `None`: not a condition (it does not
/// start with a backticked name); `Err`: a condition that does not parse, every reason.
pub fn parse_condition(item: &str) -> Option<Result<RollbackCondition, Vec<String>>> {
    let rest = item.trim().strip_prefix('`')?;
    let end = rest.find('`')?;
    let metric = rest[..end].trim();
    // A metric-like name: `configs/engine.toml: key = value` (what rolling back restores) and
    // other code are prose.
    if metric.is_empty()
        || !metric.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
    {
        return None;
    }
    let rest = &rest[end + 1..];
    // Without a window or an action it is a statement in prose, as records written before this
    // form have them (`- `metrics.ttft_ms.p99` above 302 ms (measured 274.2)`).
    let before_comment = rest.split('(').next().unwrap_or("");
    if !before_comment.contains(':') && !before_comment.split_whitespace().any(|w| w == "for") {
        return None;
    }
    Some(parse_rest(metric, rest))
}

fn parse_rest(metric: &str, rest: &str) -> Result<RollbackCondition, Vec<String>> {
    let mut errors = Vec::new();
    let path = infergate_model::metric::MetricPath::parse(metric).ok();
    let def = path.map(|m| *m.def());
    if def.is_none() {
        errors.push(format!(
            "unknown metric `{metric}` in a rollback condition; metrics are the dotted \
             summary.json paths listed in docs/adr/README.md"
        ));
    }
    // `... for WINDOW: ACTION (comment)`: the part before the colon, then the action.
    let Some((cond, action_text)) = rest.split_once(':') else {
        return Err(vec![format!(
            "no `: roll back` or `: investigate` after the window; {GRAMMAR}"
        )]);
    };
    let (action_text, note) = match action_text.split_once('(') {
        Some((a, n)) => (a, Some(n.trim().trim_end_matches('.').trim_end_matches(')').trim())),
        None => (action_text, None),
    };
    let note = note.filter(|n| !n.is_empty()).map(str::to_string);
    let action = RollbackAction::parse(action_text);
    if action.is_none() {
        errors.push(format!(
            "unknown rollback action `{}`; valid: {ACTION_CHOICES}",
            action_text.trim().trim_end_matches('.')
        ));
    }
    let words: Vec<&str> = cond.split_whitespace().collect();
    let Some(for_at) = words.iter().position(|w| *w == "for") else {
        errors.push(format!("no window (`for 5m`) in the rollback condition; {GRAMMAR}"));
        return Err(errors);
    };
    let window = match words.get(for_at + 1..) {
        Some([w]) => Window::parse(w).map_err(|e| errors.push(e.to_string())).ok(),
        _ => {
            errors.push(format!("`for` takes one duration (`5m`); {GRAMMAR}"));
            None
        }
    };
    let head = &words[..for_at];
    let comparator = match head.first().copied() {
        Some("above") => Some(Comparator::Gt),
        Some("below") => Some(Comparator::Lt),
        Some(c @ (">" | ">=" | "<" | "<=")) => Comparator::parse(c).ok(),
        other => {
            errors.push(format!(
                "`{}` is not where a rollback condition breaks; valid: above, below, >, >=, <, <=",
                other.unwrap_or("")
            ));
            None
        }
    };
    let limit = match head.get(1).map(|l| l.parse::<f64>()) {
        Some(Ok(v)) if v.is_finite() => Some(v),
        _ => {
            errors.push(format!(
                "limit `{}` is not a number; {GRAMMAR}",
                head.get(1).copied().unwrap_or("")
            ));
            None
        }
    };
    let unit = match head.get(2..) {
        Some([]) | None => "",
        Some([u]) => u,
        Some(more) => {
            errors.push(format!("`{}` after the limit: one unit only; {GRAMMAR}", more.join(" ")));
            ""
        }
    };
    let converted = match (path, limit) {
        (Some(path), Some(v)) => {
            let unit = if unit.is_empty() { path.unit() } else { unit };
            to_metric_unit(v, unit, path)
                .map_err(|e| errors.push(e.to_string()))
                .ok()
                .filter(|v| v.is_finite())
        }
        _ => None,
    };
    if let (Some(def), Some(c)) = (def, comparator) {
        let worse = match def.better {
            Better::Lower => matches!(c, Comparator::Gt | Comparator::Ge),
            Better::Higher => matches!(c, Comparator::Lt | Comparator::Le),
        };
        if !worse {
            let (better, side) = match def.better {
                Better::Lower => ("lower", "above, >, >="),
                Better::Higher => ("higher", "below, <, <="),
            };
            errors.push(format!(
                "`{metric}` is better {better}: a rollback condition is on its worse side \
                 ({side})"
            ));
        }
    }
    match (path, comparator, converted, window, action) {
        (Some(path), Some(comparator), Some(limit), Some(window), Some(action))
            if errors.is_empty() =>
        {
            Ok(RollbackCondition {
                metric: path,
                comparator,
                limit,
                unit: path.unit().to_string(),
                window,
                action,
                note,
                line: 0,
            })
        }
        _ => Err(errors),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_parse_with_words_symbols_aliases_and_comments() {
        let c = parse_condition(
            "`metrics.ttft_ms.p99` above 302 ms for 5m: roll back (measured 274.2 in Baseline)",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (c.metric.as_str(), c.comparator, c.limit, c.unit.as_str()),
            ("metrics.ttft_ms.p99", Comparator::Gt, 302.0, "ms")
        );
        assert_eq!((c.window.seconds, c.action), (300, RollbackAction::RollBack));
        assert_eq!(c.render(), "`metrics.ttft_ms.p99` above 302 ms for 5m: roll back");
        assert_eq!(c.note.as_deref(), Some("measured 274.2 in Baseline"));
        let c = parse_condition("`goodput.ratio` <= 90 % for 30s: Investigate.").unwrap().unwrap();
        assert_eq!((c.comparator, c.limit, c.window.seconds), (Comparator::Le, 0.9, 30));
        assert_eq!(c.action.severity(), "warning");
        let c = parse_condition("`metrics.e2e_ms.p50` >= 2 s for 1h: rollback").unwrap().unwrap();
        assert_eq!((c.limit, c.window.to_string().as_str()), (2000.0, "1h"));
        assert!(parse_condition("TTFT above 302 ms: roll back").is_none(), "prose");
        assert!(parse_condition("`configs/engine.toml: engine.dtype = \"fp8\"`").is_none());
        // The older prose statement (no window, no action) is not a condition.
        assert!(
            parse_condition("`metrics.ttft_ms.p99` above 302 ms (measured 274.2: x)").is_none()
        );
    }

    #[test]
    fn broken_conditions_name_what_is_valid() {
        let errs = |s: &str| parse_condition(s).unwrap().unwrap_err().join(" | ");
        assert!(errs("`metrics.ttft_ms.p99` above 302 ms: roll back").contains("no window"));
        assert!(
            errs("`metrics.ttft_ms.p99` above 302 ms for 5 minutes: roll back")
                .contains("one duration")
        );
        assert!(
            errs("`metrics.ttft_ms.p99` above 302 ms for 0m: roll back").contains("`30s`, `5m`")
        );
        assert!(
            errs("`metrics.ttft_ms.p99` above 302 ms for 5m: page")
                .contains("`roll back`, `investigate`")
        );
        assert!(
            errs("`metrics.ttft_ms.p99` below 302 ms for 5m: roll back")
                .contains("worse side (above, >, >=)")
        );
        assert!(
            errs("`metrics.ttft_ms.p99` above 302 tok/s for 5m: roll back")
                .contains("unit `tok/s`")
        );
        assert!(
            errs("`metrics.ttft.p99` above 302 ms for 5m: roll back").contains("unknown metric")
        );
        assert!(errs("`metrics.ttft_ms.p99` above 302 ms for 5m").contains("no `: roll back`"));
        assert!(
            errs("`metrics.ttft_ms.p99` around 302 ms for 5m: roll back")
                .contains("valid: above, below")
        );
        assert!(errs("`goodput.ratio` above 0.9 for 5m: roll back").contains("better higher"));
    }

    #[test]
    fn windows_are_one_unit_and_print_shortest() {
        assert_eq!(Window::parse("90s").unwrap().to_string(), "90s");
        assert_eq!(Window::parse("120s").unwrap().to_string(), "2m");
        assert_eq!(Window::parse("24h").unwrap().seconds, 86_400);
        for bad in ["", "5", "m", "1h30m", "25h", "-5m", "5M"] {
            assert!(Window::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn thresholds_break_on_the_other_side() {
        assert_eq!(breaking(Comparator::Le), Some(Comparator::Gt));
        assert_eq!(breaking(Comparator::Ge), Some(Comparator::Lt));
        assert_eq!(breaking(Comparator::Eq), None);
    }
}
