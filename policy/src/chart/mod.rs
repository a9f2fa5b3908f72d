//! Charts as SVG text, drawn by hand so that every chart the project writes (`report.html`,
//! `sweep.svg`, the assets of decision records) has one style ([`style`]) and can be checked:
//! each `<svg>` carries `data-chart` and `data-series`, each series a `<g class="series">` with
//! `data-name`, `data-points` (points drawn) and `data-blanks` (values not measured, not drawn).
//!
//! A value that was not measured is a blank: it breaks a line instead of being drawn as zero,
//! and the chart's note counts it. A chart with nothing to draw says so in its plot area.

pub mod axis;
pub mod figures;
pub mod style;

use std::fmt::Write;

pub use axis::{Axis, Range, Scale};

/// One series: a line through points (a blank `y` breaks it), or horizontal spans.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    /// `(x, y)`; `y` is `None` where the value was not measured.
    pub points: Vec<(f64, Option<f64>)>,
    /// A dot at every point (few points: sweep stages).
    pub markers: bool,
    /// Dots only, no line between them (configurations of a tune, which no order connects).
    pub scatter: bool,
    /// Horizontal spans `(y, x_start, x_end)` (a timeline), drawn instead of `points`.
    pub spans: Vec<(f64, f64, f64)>,
    /// Vertical intervals `(x, low, high)` drawn beside the points (an estimate's confidence
    /// interval at each load).
    pub intervals: Vec<(f64, f64, f64)>,
    /// Colour index into [`style::PALETTE`].
    pub color: usize,
}

impl Series {
    pub fn line(name: impl Into<String>, color: usize, points: Vec<(f64, Option<f64>)>) -> Series {
        Series {
            name: name.into(),
            points,
            markers: false,
            scatter: false,
            spans: vec![],
            intervals: vec![],
            color,
        }
    }

    pub fn spans(name: impl Into<String>, color: usize, spans: Vec<(f64, f64, f64)>) -> Series {
        Series {
            name: name.into(),
            points: vec![],
            markers: false,
            scatter: false,
            spans,
            intervals: vec![],
            color,
        }
    }

    /// Points drawn.
    pub fn drawn(&self) -> usize {
        if self.spans.is_empty() {
            self.points.iter().filter(|p| p.1.is_some_and(f64::is_finite)).count()
        } else {
            self.spans.len()
        }
    }

    /// Values that were not measured (blank), not drawn.
    pub fn blanks(&self) -> usize {
        self.points.iter().filter(|p| p.1.is_none()).count()
    }
}

/// Which axis a mark crosses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkAxis {
    /// A vertical line at an x value.
    X,
    /// A horizontal line at a y value.
    Y,
}

/// A labelled reference line: the knee, an SLO, a gate threshold.
#[derive(Clone, Debug, PartialEq)]
pub struct Mark {
    pub axis: MarkAxis,
    pub value: f64,
    pub label: String,
    /// The knee is drawn darker than limits.
    pub knee: bool,
}

impl Mark {
    pub fn limit(axis: MarkAxis, value: f64, label: impl Into<String>) -> Mark {
        Mark { axis, value, label: label.into(), knee: false }
    }
}

/// A shaded range of x values (a capacity's bracket), labelled, drawn behind the series.
#[derive(Clone, Debug, PartialEq)]
pub struct Band {
    pub from: f64,
    pub to: f64,
    pub label: String,
}

/// A whole chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    /// Stable name of the chart (`ttft-cdf`, `sweep-latency`), its `data-chart`.
    pub id: String,
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
    pub marks: Vec<Mark>,
    /// Shaded x ranges.
    pub bands: Vec<Band>,
    /// Lines under the chart: n, sampling, what is blank.
    pub notes: Vec<String>,
    /// What the plot area says when no series has a point.
    pub empty: String,
}

impl Chart {
    pub fn new(id: impl Into<String>, title: impl Into<String>, x: Axis, y: Axis) -> Chart {
        Chart {
            id: id.into(),
            title: title.into(),
            x,
            y,
            series: vec![],
            marks: vec![],
            bands: vec![],
            notes: vec![],
            empty: "nothing was measured: blank".into(),
        }
    }

    /// Every note, with one line per series that has blanks.
    fn all_notes(&self) -> Vec<String> {
        let mut notes = self.notes.clone();
        for s in &self.series {
            let b = s.blanks();
            if b > 0 {
                notes.push(format!(
                    "{}: {b} value{} not measured (blank, not drawn; not zero)",
                    s.name,
                    if b == 1 { "" } else { "s" }
                ));
            }
        }
        notes
    }
}

/// Text for SVG and HTML: `&`, `<`, `>` and quotes escaped.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A coordinate with one decimal.
fn c(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

/// The chart as a standalone SVG document.
pub fn render(chart: &Chart) -> String {
    use style::*;
    let notes = chart.all_notes();
    let height = HEIGHT + 14.0 * notes.len().saturating_sub(1) as f64;
    let (left, right) = (MARGIN_LEFT, WIDTH - MARGIN_RIGHT);
    let (top, bottom) = (MARGIN_TOP, HEIGHT - MARGIN_BOTTOM);
    let xs: Vec<f64> = chart
        .series
        .iter()
        .flat_map(|s| {
            s.points
                .iter()
                .filter(|p| p.1.is_some())
                .map(|p| p.0)
                .chain(s.spans.iter().flat_map(|sp| [sp.1, sp.2]))
                .chain(s.intervals.iter().map(|iv| iv.0))
        })
        .chain(chart.marks.iter().filter(|m| m.axis == MarkAxis::X).map(|m| m.value))
        .chain(chart.bands.iter().flat_map(|b| [b.from, b.to]))
        .collect();
    let ys: Vec<f64> = chart
        .series
        .iter()
        .flat_map(|s| {
            s.points
                .iter()
                .filter_map(|p| p.1)
                .chain(s.spans.iter().map(|sp| sp.0))
                .chain(s.intervals.iter().flat_map(|iv| [iv.1, iv.2]))
        })
        .chain(chart.marks.iter().filter(|m| m.axis == MarkAxis::Y).map(|m| m.value))
        .collect();
    let xr = Range::of(&chart.x, &xs);
    let yr = Range::of(&chart.y, &ys);
    let px = |v: f64| xr.fraction(v).map(|f| left + f * (right - left));
    let py = |v: f64| yr.fraction(v).map(|f| bottom - f * (bottom - top));
    let mut o = String::new();
    let _ = writeln!(
        o,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" data-chart=\"{}\" data-series=\"{}\" \
         width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" font-family=\"{}\" font-size=\"{}\" fill=\"{TEXT}\">",
        esc(&chart.id),
        chart.series.len(),
        c(WIDTH),
        c(height),
        c(WIDTH),
        c(height),
        esc(FONT),
        FONT_SIZE
    );
    let _ = writeln!(o, "<title>{}</title>", esc(&chart.title));
    let _ = writeln!(o, "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>");
    let _ = writeln!(
        o,
        "<text x=\"{}\" y=\"22\" font-size=\"{TITLE_SIZE}\" font-weight=\"600\">{}</text>",
        c(left),
        esc(&chart.title)
    );
    // Grid and ticks.
    o.push_str("<g class=\"grid\" stroke=\"");
    o.push_str(GRID);
    o.push_str("\">\n");
    for &t in &xr.ticks {
        if let Some(x) = px(t).filter(|x| *x >= left - 0.5 && *x <= right + 0.5) {
            let _ = writeln!(
                o,
                "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"/>",
                c(x),
                c(top),
                c(bottom)
            );
        }
    }
    for &t in &yr.ticks {
        if let Some(y) = py(t).filter(|y| *y >= top - 0.5 && *y <= bottom + 0.5) {
            let _ = writeln!(
                o,
                "<line x1=\"{1}\" y1=\"{0}\" x2=\"{2}\" y2=\"{0}\"/>",
                c(y),
                c(left),
                c(right)
            );
        }
    }
    o.push_str("</g>\n");
    let _ = writeln!(
        o,
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"{AXIS}\"/>",
        c(left),
        c(top),
        c(right - left),
        c(bottom - top)
    );
    o.push_str("<g class=\"ticks\" fill=\"");
    o.push_str(MUTED);
    o.push_str("\">\n");
    for &t in &xr.ticks {
        if let Some(x) = px(t).filter(|x| *x >= left - 0.5 && *x <= right + 0.5) {
            let _ = writeln!(
                o,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                c(x),
                c(bottom + 16.0),
                axis::label(t)
            );
        }
    }
    for &t in &yr.ticks {
        if let Some(y) = py(t).filter(|y| *y >= top - 0.5 && *y <= bottom + 0.5) {
            let _ = writeln!(
                o,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
                c(left - 6.0),
                c(y + 4.0),
                axis::label(t)
            );
        }
    }
    o.push_str("</g>\n");
    let _ = writeln!(
        o,
        "<text class=\"x-title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
        c((left + right) / 2.0),
        c(bottom + 34.0),
        esc(&chart.x.title)
    );
    let _ = writeln!(
        o,
        "<text class=\"y-title\" transform=\"translate({},{}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        c(18.0),
        c((top + bottom) / 2.0),
        esc(&chart.y.title)
    );
    draw_bands(&mut o, chart, &px, (left, right, top, bottom));
    // Series.
    let mut any = false;
    for s in &chart.series {
        any |= s.drawn() > 0;
        let col = color(s.color);
        let _ = writeln!(
            o,
            "<g class=\"series\" data-name=\"{}\" data-points=\"{}\" data-blanks=\"{}\">",
            esc(&s.name),
            s.drawn(),
            s.blanks()
        );
        draw_intervals(&mut o, s, col, &px, &py);
        if s.spans.is_empty() {
            draw_line(&mut o, s, col, &px, &py);
        } else {
            let mut d = String::new();
            for &(y, x0, x1) in &s.spans {
                if let (Some(y), Some(a), Some(b)) = (py(y), px(x0), px(x1)) {
                    let _ = write!(d, "M{} {}H{}", c(a), c(y), c(b.max(a + 0.5)));
                }
            }
            let _ = writeln!(
                o,
                "<path d=\"{d}\" stroke=\"{col}\" stroke-width=\"1.5\" fill=\"none\"/>"
            );
        }
        o.push_str("</g>\n");
    }
    if !any {
        let _ = writeln!(
            o,
            "<text class=\"empty\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"{MUTED}\">{}</text>",
            c((left + right) / 2.0),
            c((top + bottom) / 2.0),
            esc(&chart.empty)
        );
    }
    draw_marks(&mut o, chart, &px, &py, (left, right, top, bottom));
    draw_legend(&mut o, chart, right, top);
    for (i, n) in notes.iter().enumerate() {
        let _ = writeln!(
            o,
            "<text class=\"note\" x=\"{}\" y=\"{}\" fill=\"{MUTED}\">{}</text>",
            c(left),
            c(bottom + 56.0 + 14.0 * i as f64),
            esc(n)
        );
    }
    o.push_str("</svg>\n");
    o
}

/// Each band as a shaded rectangle over the plot's height, its label at the top.
fn draw_bands(
    o: &mut String,
    chart: &Chart,
    px: &dyn Fn(f64) -> Option<f64>,
    (left, right, top, bottom): (f64, f64, f64, f64),
) {
    for b in &chart.bands {
        let (Some(a), Some(z)) = (px(b.from), px(b.to)) else { continue };
        let (a, z) = (a.clamp(left, right), z.clamp(left, right));
        let _ = writeln!(
            o,
            "<g class=\"band\" data-label=\"{}\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" \
             fill=\"{}\" fill-opacity=\"0.18\"/><text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"{}\">{}</text></g>",
            esc(&b.label),
            c(a.min(z)),
            c(top),
            c((z - a).abs().max(1.0)),
            c(bottom - top),
            style::BAND,
            c((a + z) / 2.0),
            c(bottom - 6.0),
            style::MUTED,
            esc(&b.label)
        );
    }
}

/// A series' intervals: a vertical line from low to high with short caps.
fn draw_intervals(
    o: &mut String,
    s: &Series,
    col: &str,
    px: &dyn Fn(f64) -> Option<f64>,
    py: &dyn Fn(f64) -> Option<f64>,
) {
    if s.intervals.is_empty() {
        return;
    }
    let mut d = String::new();
    for &(x, lo, hi) in &s.intervals {
        if let (Some(x), Some(a), Some(b)) = (px(x), py(lo), py(hi)) {
            let _ = write!(
                d,
                "M{x} {a}V{b}M{l} {a}H{r}M{l} {b}H{r}",
                x = c(x),
                a = c(a),
                b = c(b),
                l = c(x - 4.0),
                r = c(x + 4.0)
            );
        }
    }
    let _ = writeln!(
        o,
        "<path class=\"intervals\" data-intervals=\"{}\" d=\"{d}\" stroke=\"{col}\" stroke-width=\"1.5\" fill=\"none\"/>",
        s.intervals.len()
    );
}

fn draw_line(
    o: &mut String,
    s: &Series,
    col: &str,
    px: &dyn Fn(f64) -> Option<f64>,
    py: &dyn Fn(f64) -> Option<f64>,
) {
    // A blank breaks the line: one polyline per run of measured points.
    let mut runs: Vec<Vec<(f64, f64)>> = vec![vec![]];
    for &(x, y) in &s.points {
        match y.and_then(|y| Some((px(x)?, py(y)?))) {
            Some(p) => runs.last_mut().expect("never empty").push(p),
            None => runs.push(vec![]),
        }
    }
    for run in runs.iter().filter(|r| !r.is_empty()) {
        let pts: Vec<String> = run.iter().map(|(x, y)| format!("{},{}", c(*x), c(*y))).collect();
        if !s.scatter {
            let _ = writeln!(
                o,
                "<polyline points=\"{}\" fill=\"none\" stroke=\"{col}\" stroke-width=\"2\" stroke-linejoin=\"round\"/>",
                pts.join(" ")
            );
        }
        if s.markers || s.scatter {
            for (x, y) in run {
                let _ = writeln!(
                    o,
                    "<circle cx=\"{}\" cy=\"{}\" r=\"3.5\" fill=\"{col}\"/>",
                    c(*x),
                    c(*y)
                );
            }
        }
    }
}

fn draw_marks(
    o: &mut String,
    chart: &Chart,
    px: &dyn Fn(f64) -> Option<f64>,
    py: &dyn Fn(f64) -> Option<f64>,
    (left, right, top, bottom): (f64, f64, f64, f64),
) {
    for (i, m) in chart.marks.iter().enumerate() {
        let col = if m.knee { style::KNEE } else { style::MARK };
        let _ = write!(o, "<g class=\"mark\" data-label=\"{}\">", esc(&m.label));
        match m.axis {
            MarkAxis::X => {
                if let Some(x) = px(m.value) {
                    // Labels of lines in the right half read leftwards, inside the plot.
                    let (tx, anchor) = if x > (left + right) / 2.0 {
                        (x - 4.0, "end")
                    } else {
                        (x + 4.0, "start")
                    };
                    let _ = write!(
                        o,
                        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"{col}\" stroke-dasharray=\"5 3\" stroke-width=\"1.5\"/>\
                         <text x=\"{3}\" y=\"{4}\" text-anchor=\"{anchor}\" fill=\"{col}\">{5}</text>",
                        c(x),
                        c(top),
                        c(bottom),
                        c(tx),
                        c(top + 14.0 + 14.0 * i as f64),
                        esc(&m.label)
                    );
                }
            }
            MarkAxis::Y => {
                if let Some(y) = py(m.value) {
                    let _ = write!(
                        o,
                        "<line x1=\"{1}\" y1=\"{0}\" x2=\"{2}\" y2=\"{0}\" stroke=\"{col}\" stroke-dasharray=\"5 3\" stroke-width=\"1.5\"/>\
                         <text x=\"{3}\" y=\"{4}\" text-anchor=\"end\" fill=\"{col}\">{5}</text>",
                        c(y),
                        c(left),
                        c(right),
                        c(right - 4.0),
                        c(y - 4.0),
                        esc(&m.label)
                    );
                }
            }
        }
        o.push_str("</g>\n");
    }
}

fn draw_legend(o: &mut String, chart: &Chart, right: f64, top: f64) {
    let x = right + 12.0;
    o.push_str("<g class=\"legend\">\n");
    for (i, s) in chart.series.iter().enumerate() {
        let y = top + 8.0 + 18.0 * i as f64;
        let name: String = s.name.chars().take(24).collect();
        let _ = writeln!(
            o,
            "<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"4\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>",
            c(x),
            c(y - 2.0),
            style::color(s.color),
            c(x + 20.0),
            c(y + 4.0),
            esc(&name)
        );
    }
    o.push_str("</g>\n");
}

#[cfg(test)]
pub mod tests;
