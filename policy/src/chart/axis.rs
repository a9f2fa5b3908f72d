//! Axes: linear and logarithmic scales, their ticks and the numbers printed at them (integers
//! as integers: `16`, never `16.0`).

/// How values map to positions along an axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    Linear,
    /// Base-10 logarithmic; every value drawn on it is > 0.
    Log,
}

/// One axis: its title (with the unit, `TTFT (ms)`), its scale, and where its ticks go.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    pub title: String,
    pub scale: Scale,
    /// Ticks at exactly these values (a sweep's measured loads); `None`: round numbers.
    pub ticks: Option<Vec<f64>>,
    /// Start the axis at zero (linear only), so that bars and levels are read from zero.
    pub from_zero: bool,
    /// The axis ends at least here (a mark beyond the data stays on the chart).
    pub include: Vec<f64>,
}

impl Axis {
    pub fn linear(title: impl Into<String>) -> Axis {
        Axis {
            title: title.into(),
            scale: Scale::Linear,
            ticks: None,
            from_zero: true,
            include: vec![],
        }
    }

    /// The axis of a load sweep: ticks at the measured loads; logarithmic when the loads grow
    /// geometrically (see [`is_geometric`]).
    pub fn loads(title: impl Into<String>, loads: &[f64]) -> Axis {
        let scale = if is_geometric(loads) { Scale::Log } else { Scale::Linear };
        Axis {
            title: title.into(),
            scale,
            ticks: Some(loads.to_vec()),
            from_zero: false,
            include: vec![],
        }
    }
}

/// Loads that grow geometrically (each at least 1.5 times the previous, the last at least 8
/// times the first, all > 0) sit on a log axis: on a linear one the small loads crowd the left.
pub fn is_geometric(values: &[f64]) -> bool {
    values.len() >= 3
        && values.iter().all(|v| v.is_finite() && *v > 0.0)
        && values.windows(2).all(|w| w[1] >= 1.5 * w[0])
        && values[values.len() - 1] >= 8.0 * values[0]
}

/// The range an axis shows and the map from values to pixels.
#[derive(Clone, Debug, PartialEq)]
pub struct Range {
    pub scale: Scale,
    pub lo: f64,
    pub hi: f64,
    pub ticks: Vec<f64>,
}

impl Range {
    /// The range of `axis` over `values` (finite ones; for a log axis, positive ones).
    pub fn of(axis: &Axis, values: &[f64]) -> Range {
        let usable: Vec<f64> = values
            .iter()
            .chain(axis.include.iter())
            .chain(axis.ticks.iter().flatten())
            .copied()
            .filter(|v| v.is_finite() && (axis.scale == Scale::Linear || *v > 0.0))
            .collect();
        let min = usable.iter().copied().fold(f64::INFINITY, f64::min);
        let max = usable.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        match axis.scale {
            Scale::Linear => {
                let (mut lo, mut hi) = if min.is_finite() { (min, max) } else { (0.0, 1.0) };
                if axis.from_zero && lo > 0.0 {
                    lo = 0.0;
                }
                if hi <= lo {
                    hi = lo + if lo == 0.0 { 1.0 } else { lo.abs() };
                }
                let explicit = axis.ticks.clone();
                if explicit.is_none() {
                    let step = nice_step((hi - lo) / 5.0);
                    lo = (lo / step).floor() * step;
                    hi = (hi / step).ceil() * step;
                } else {
                    let pad = (hi - lo) * 0.05;
                    lo -= pad;
                    hi += pad;
                }
                let ticks = explicit.unwrap_or_else(|| linear_ticks(lo, hi));
                Range { scale: Scale::Linear, lo, hi, ticks }
            }
            Scale::Log => {
                let (lo, hi) = if min.is_finite() { (min, max) } else { (1.0, 10.0) };
                let (lo, hi) = if hi <= lo { (lo / 2.0, hi * 2.0) } else { (lo, hi) };
                // A little room at both ends, in log space.
                let pad = (hi / lo).log10() * 0.05;
                let (lo, hi) = (lo / 10f64.powf(pad), hi * 10f64.powf(pad));
                let ticks = axis.ticks.clone().unwrap_or_else(|| log_ticks(lo, hi));
                Range { scale: Scale::Log, lo, hi, ticks }
            }
        }
    }

    /// Where `v` sits between the ends of the range: 0 at `lo`, 1 at `hi`; `None` when it
    /// cannot be drawn (not finite, or not > 0 on a log axis).
    pub fn fraction(&self, v: f64) -> Option<f64> {
        if !v.is_finite() {
            return None;
        }
        match self.scale {
            Scale::Linear => Some((v - self.lo) / (self.hi - self.lo)),
            Scale::Log if v > 0.0 => Some((v / self.lo).log10() / (self.hi / self.lo).log10()),
            Scale::Log => None,
        }
    }
}

/// A round step (1, 2 or 5 times a power of ten) near `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    let m = raw / p;
    let n = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    n * p
}

fn linear_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let step = nice_step((hi - lo) / 5.0);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).take(50).map(|i| clean(i as f64 * step)).collect()
}

/// Powers of ten within the range (with 2 and 5 between them when the range spans fewer than
/// three decades).
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let a = lo.log10().floor() as i32;
    let b = hi.log10().ceil() as i32;
    let mults: &[f64] = if b - a < 3 { &[1.0, 2.0, 5.0] } else { &[1.0] };
    let mut out = Vec::new();
    for e in a..=b.min(a + 30) {
        for m in mults {
            let v = clean(m * 10f64.powi(e));
            if v >= lo && v <= hi {
                out.push(v);
            }
        }
    }
    out
}

/// `v` without floating-point dust (`0.30000000000000004` -> `0.3`).
fn clean(v: f64) -> f64 {
    format!("{v:.10e}").parse().unwrap_or(v)
}

/// A tick label: integers as integers (`16`, `1000`), others with at most three significant
/// digits after trimming (`0.25`, `2.5`), large values grouped (`12k` from 10 000 up).
pub fn label(v: f64) -> String {
    if !v.is_finite() {
        return String::new();
    }
    let a = v.abs();
    if a >= 10_000.0 && (v / 1000.0).fract() == 0.0 {
        return format!("{}k", (v / 1000.0) as i64);
    }
    if v.fract() == 0.0 && a < 1e15 {
        return format!("{}", v as i64);
    }
    let digits = if a >= 1.0 { a.log10().floor() as i32 + 1 } else { 0 };
    let decimals = if a >= 1.0 { (3 - digits).max(0) } else { (-a.log10()).ceil() as i32 + 2 };
    let s = format!("{v:.*}", decimals.clamp(0, 12) as usize);
    let s =
        if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s };
    if s == "-0" { "0".into() } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_loads_print_as_integers() {
        assert_eq!(label(16.0), "16");
        assert_eq!(label(10.0), "10");
        assert_eq!(label(2.5), "2.5");
        assert_eq!(label(0.25), "0.25");
        assert_eq!(label(20000.0), "20k");
        assert_eq!(label(1234.6), "1235");
    }

    #[test]
    fn geometric_sweeps_get_a_log_axis_and_ticks_at_the_loads() {
        assert!(is_geometric(&[4.0, 16.0, 64.0]));
        assert!(is_geometric(&[1.0, 2.0, 4.0, 8.0]));
        assert!(!is_geometric(&[10.0, 20.0, 30.0]));
        assert!(!is_geometric(&[4.0, 16.0]));
        let axis = Axis::loads("concurrency", &[4.0, 16.0, 64.0]);
        assert_eq!(axis.scale, Scale::Log);
        let r = Range::of(&axis, &[]);
        assert_eq!(r.ticks, vec![4.0, 16.0, 64.0]);
        // Equal ratios sit at equal distances on a log axis.
        let (a, b, c) =
            (r.fraction(4.0).unwrap(), r.fraction(16.0).unwrap(), r.fraction(64.0).unwrap());
        assert!(((b - a) - (c - b)).abs() < 1e-9, "{a} {b} {c}");
        assert_eq!(Axis::loads("rate", &[1.0, 2.0, 3.0]).scale, Scale::Linear);
    }

    #[test]
    fn linear_ranges_are_round_and_start_at_zero() {
        let r = Range::of(&Axis::linear("ms"), &[12.0, 87.0]);
        assert_eq!((r.lo, r.hi), (0.0, 100.0));
        assert_eq!(r.ticks, vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        let empty = Range::of(&Axis::linear("ms"), &[]);
        assert_eq!((empty.lo, empty.hi), (0.0, 1.0));
    }
}
