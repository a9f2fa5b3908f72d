//! The one look of every chart the project draws (reports, `sweep.svg`, the charts of decision
//! records): size, margins, fonts, the series palette, grid and mark colours, and the page CSS
//! of `report.html`.

/// Width and height of a chart, in SVG user units (pixels at 100 % zoom).
pub const WIDTH: f64 = 760.0;
pub const HEIGHT: f64 = 380.0;
/// Plot area margins: left (y tick labels and title), right (legend), top (title), bottom
/// (x tick labels, x title, the note).
pub const MARGIN_LEFT: f64 = 76.0;
pub const MARGIN_RIGHT: f64 = 170.0;
pub const MARGIN_TOP: f64 = 40.0;
pub const MARGIN_BOTTOM: f64 = 78.0;

pub const FONT: &str = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
pub const FONT_SIZE: f64 = 12.0;
pub const TITLE_SIZE: f64 = 15.0;

pub const TEXT: &str = "#222";
pub const MUTED: &str = "#666";
pub const AXIS: &str = "#444";
/// Major grid lines only: a dense minor grid hides the marks.
pub const GRID: &str = "#e6e6e6";
/// Marks (knee, SLO, threshold lines) are dashed and labelled.
pub const MARK: &str = "#b00020";
pub const KNEE: &str = "#333";
/// Shaded ranges (a capacity's bracket), drawn translucent behind the series.
pub const BAND: &str = "#009E73";

/// Series colours (colour-blind safe, Okabe-Ito), used in order.
pub const PALETTE: [&str; 8] =
    ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"];

/// The colour of series `i`.
pub fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// The CSS of `report.html`: inline, no web fonts, no network.
pub const PAGE_CSS: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#222;margin:24px auto;max-width:1000px;padding:0 16px;line-height:1.4}\
h1{font-size:22px;margin-bottom:4px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd;padding-bottom:4px}\
table{border-collapse:collapse;margin:8px 0;font-size:13px}th,td{border:1px solid #ddd;padding:3px 8px;text-align:right}\
th{background:#f4f4f4}td.l,th.l{text-align:left}td.blank{color:#999}tr.fail td{background:#fff0f0}\
.note{color:#666;font-size:13px}.meta{color:#666;font-size:13px}figure{margin:16px 0}svg.chart{max-width:100%;height:auto}\
";
