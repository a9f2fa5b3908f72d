//! Sequential looks: how a gate that looks at its data several times, and stops as soon as it
//! can decide, keeps the chance of a wrong verdict over all its looks at the level it states.
//!
//! Two rules share a one-sided error rate `alpha` over looks made at information fractions
//! `t_1 < ... < t_K = 1` (the share of the planned data each look has seen):
//!
//! - [`LookRule::Bonferroni`]: every look at `alpha / K`. Valid whatever the correlation between
//!   looks; wasteful, since looks at nested data are strongly correlated.
//! - [`LookRule::Spending`]: Lan and DeMets' alpha spending. A spending function `alpha(t)`
//!   (O'Brien-Fleming-type `2 - 2 Phi(z_{1-alpha/2} / sqrt t)` or Pocock-type
//!   `alpha ln(1 + (e - 1) t)`) says how much of `alpha` may be spent by fraction `t`; the
//!   boundary of look k is the `c_k` with `P(Z_1 < c_1, ..., Z_{k-1} < c_{k-1}, Z_k >= c_k) =
//!   alpha(t_k) - alpha(t_{k-1})` for the standardised statistics of a Brownian motion observed
//!   at the looks (`corr(Z_i, Z_j) = sqrt(t_i / t_j)`), computed by recursive numerical
//!   integration (Armitage, McPherson and Rowe; Jennison and Turnbull, ch. 19).
//!
//! Each rule gives per-look **nominal levels** `alpha_k`: look k rejects when its one-sided
//! p-value is at most `alpha_k`. With an estimated variance the gate turns `alpha_k` into a t
//! quantile at the look's degrees of freedom (the nominal-level approach); the rates this gives
//! are measured against a known truth in `docs/statistics.md`.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal};

use super::{StatsError, check_range};

/// How a sequential gate shares its error rate over its looks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LookRule {
    /// Each of K looks at `alpha / K`.
    Bonferroni,
    /// Lan-DeMets alpha spending with an O'Brien-Fleming-type function: strict early looks,
    /// almost the whole `alpha` at the last.
    ObrienFleming,
    /// Lan-DeMets alpha spending with a Pocock-type function: about the same level at every
    /// look.
    Pocock,
}

/// The rules, as `--spending` takes them.
pub const LOOK_RULE_CHOICES: &str = "obrien-fleming, pocock, bonferroni";

impl LookRule {
    pub fn as_str(self) -> &'static str {
        match self {
            LookRule::Bonferroni => "bonferroni",
            LookRule::ObrienFleming => "obrien-fleming",
            LookRule::Pocock => "pocock",
        }
    }

    pub fn parse(s: &str) -> Option<LookRule> {
        match s.trim() {
            "bonferroni" => Some(LookRule::Bonferroni),
            "obrien-fleming" | "o'brien-fleming" | "obf" => Some(LookRule::ObrienFleming),
            "pocock" => Some(LookRule::Pocock),
            _ => None,
        }
    }

    /// What it is, in words (for reports).
    pub fn describe(self) -> &'static str {
        match self {
            LookRule::Bonferroni => "Bonferroni (each look at alpha / looks)",
            LookRule::ObrienFleming => "alpha spending, O'Brien-Fleming-type (Lan-DeMets)",
            LookRule::Pocock => "alpha spending, Pocock-type (Lan-DeMets)",
        }
    }
}

impl std::fmt::Display for LookRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

fn std_normal() -> Normal {
    Normal::new(0.0, 1.0).expect("the standard normal")
}

/// The share of `alpha` a spending rule may have spent by information fraction `t` (0..=1).
pub fn spent(rule: LookRule, alpha: f64, t: f64) -> f64 {
    let t = t.clamp(0.0, 1.0);
    if t <= 0.0 {
        return 0.0;
    }
    match rule {
        LookRule::Bonferroni => alpha * t,
        LookRule::ObrienFleming => {
            let n = std_normal();
            let z = n.inverse_cdf(1.0 - alpha / 2.0);
            (2.0 - 2.0 * n.cdf(z / t.sqrt())).min(alpha)
        }
        LookRule::Pocock => alpha * (1.0 + (std::f64::consts::E - 1.0) * t).ln(),
    }
}

/// One-sided nominal levels of looks at `fractions` (strictly increasing, the last 1) that keep
/// the chance of any rejection under the null at `alpha` (`0 < alpha < 0.5`). Bonferroni:
/// `alpha / K` each. Spending: the level of each look's exact boundary (0 for a look that may
/// spend nothing).
pub fn nominal_levels(
    rule: LookRule,
    alpha: f64,
    fractions: &[f64],
) -> Result<Vec<f64>, StatsError> {
    check_range("alpha", "(0, 0.5)", alpha, |a| a > 0.0 && a < 0.5)?;
    check_fractions(fractions)?;
    let k = fractions.len();
    if rule == LookRule::Bonferroni {
        return Ok(vec![alpha / k as f64; k]);
    }
    // The boundaries take milliseconds to integrate, and a gate asks for the same ones at
    // every look: computed once per process for each (rule, alpha, fractions).
    type Key = (LookRule, u64, Vec<u64>);
    static CACHE: Mutex<BTreeMap<Key, Vec<f64>>> = Mutex::new(BTreeMap::new());
    let key = (rule, alpha.to_bits(), fractions.iter().map(|f| f.to_bits()).collect());
    if let Some(hit) = CACHE.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(hit.clone());
    }
    let bounds = boundaries(fractions, |t| spent(rule, alpha, t));
    let n = std_normal();
    let levels: Vec<f64> =
        bounds.iter().map(|&c| if c.is_finite() { 1.0 - n.cdf(c) } else { 0.0 }).collect();
    CACHE.lock().unwrap_or_else(|e| e.into_inner()).insert(key, levels.clone());
    Ok(levels)
}

fn check_fractions(fractions: &[f64]) -> Result<(), StatsError> {
    let bad = |value: f64| StatsError::OutOfRange {
        name: "look fractions",
        range: "strictly increasing within (0, 1], the last 1",
        value,
    };
    let Some(&last) = fractions.last() else { return Err(bad(f64::NAN)) };
    if (last - 1.0).abs() > 1e-12 {
        return Err(bad(last));
    }
    let mut prev = 0.0;
    for &t in fractions {
        if !(t.is_finite() && t > prev && t <= 1.0 + 1e-12) {
            return Err(bad(t));
        }
        prev = t;
    }
    Ok(())
}

/// Grid step on the score scale and the lower end of the grid, in standard deviations of the
/// whole process: mass below it is under 1e-15.
const STEP: f64 = 0.02;
const LOWER_SD: f64 = 8.0;

/// The z boundaries of looks at `fractions` for a spending function: `+inf` where a look may
/// spend nothing. The score `S_k = Z_k sqrt(t_k)` has independent normal increments of variance
/// `t_k - t_{k-1}`; the sub-density of `S_k` on the continuation region is carried on a grid
/// from look to look (trapezoidal rule).
fn boundaries(fractions: &[f64], spend: impl Fn(f64) -> f64) -> Vec<f64> {
    let n = std_normal();
    let lower = -LOWER_SD;
    // (grid points, sub-density) of the score at the previous look; None before the first.
    let mut carried: Option<(Vec<f64>, Vec<f64>)> = None;
    let (mut prev_t, mut prev_spent) = (0.0, 0.0);
    let mut out = Vec::with_capacity(fractions.len());
    for &t in fractions {
        let target = (spend(t) - prev_spent).max(0.0);
        let dt = t - prev_t;
        let sd = dt.sqrt();
        // P(no crossing so far, S_t >= c sqrt t).
        let exit = |c: f64| -> f64 {
            let b = c * t.sqrt();
            match &carried {
                None => 1.0 - n.cdf(b / sd),
                Some((xs, fs)) => trapezoid(xs, fs, |u| 1.0 - n.cdf((b - u) / sd)),
            }
        };
        let c = if target <= 1e-15 {
            f64::INFINITY
        } else {
            // exit(c) falls as c grows: bisect on [-LOWER_SD, 40].
            let (mut lo, mut hi) = (-LOWER_SD, 40.0);
            for _ in 0..60 {
                let mid = 0.5 * (lo + hi);
                if exit(mid) > target { lo = mid } else { hi = mid }
            }
            0.5 * (lo + hi)
        };
        out.push(c);
        // The sub-density of S_t below the boundary (the paths that go on).
        let top = if c.is_finite() { c * t.sqrt() } else { LOWER_SD * 2.0 };
        let points = (((top - lower) / STEP).ceil() as usize).max(2);
        let xs: Vec<f64> =
            (0..=points).map(|i| lower + (top - lower) * i as f64 / points as f64).collect();
        let density = |s: f64| -> f64 {
            match &carried {
                None => pdf(s / sd) / sd,
                Some((us, gs)) => trapezoid(us, gs, |u| pdf((s - u) / sd) / sd),
            }
        };
        let fs: Vec<f64> = xs.iter().map(|&s| density(s)).collect();
        carried = Some((xs, fs));
        prev_t = t;
        prev_spent += target;
    }
    out
}

fn pdf(z: f64) -> f64 {
    (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

/// The trapezoidal rule for `integral f(x) g(x) dx` over the grid `xs` with `f` sampled as `fs`.
fn trapezoid(xs: &[f64], fs: &[f64], g: impl Fn(f64) -> f64) -> f64 {
    let mut sum = 0.0;
    for i in 1..xs.len() {
        let h = xs[i] - xs[i - 1];
        sum += 0.5 * h * (fs[i - 1] * g(xs[i - 1]) + fs[i] * g(xs[i]));
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_distr::{Distribution, StandardNormal};

    const FIVE: [f64; 5] = [0.2, 0.4, 0.6, 0.8, 1.0];

    fn z_bounds(levels: &[f64]) -> Vec<f64> {
        let n = std_normal();
        levels
            .iter()
            .map(|&a| if a > 0.0 { n.inverse_cdf(1.0 - a) } else { f64::INFINITY })
            .collect()
    }

    #[test]
    fn one_look_is_the_fixed_sample_test_and_bonferroni_splits_evenly() {
        for rule in [LookRule::ObrienFleming, LookRule::Pocock, LookRule::Bonferroni] {
            let l = nominal_levels(rule, 0.025, &[1.0]).unwrap();
            assert!((l[0] - 0.025).abs() < 1e-6, "{rule}: {l:?}");
        }
        assert_eq!(nominal_levels(LookRule::Bonferroni, 0.05, &FIVE).unwrap(), vec![0.01; 5]);
        assert!(nominal_levels(LookRule::Pocock, 0.05, &[0.5, 0.4, 1.0]).is_err());
        assert!(nominal_levels(LookRule::Pocock, 0.05, &[0.5, 0.9]).is_err());
        assert!(nominal_levels(LookRule::Pocock, 0.7, &[1.0]).is_err());
        assert!(nominal_levels(LookRule::Pocock, 0.05, &[]).is_err());
    }

    #[test]
    fn obrien_fleming_spending_matches_the_published_boundaries() {
        // Lan-DeMets O'Brien-Fleming-type spending, 5 equally spaced looks, one-sided 0.025
        // (two-sided 0.05): 4.877, 3.357, 2.680, 2.290, 2.031 (Jennison & Turnbull, table 7.6;
        // gsDesign's sfLDOF).
        let z = z_bounds(&nominal_levels(LookRule::ObrienFleming, 0.025, &FIVE).unwrap());
        for (got, want) in z.iter().zip([4.877, 3.357, 2.680, 2.290, 2.031]) {
            assert!((got - want).abs() < 0.005, "{z:?}");
        }
        // Pocock-type: 2.438, 2.427, 2.410, 2.397, 2.386 (the same tables, sfLDPocock).
        let z = z_bounds(&nominal_levels(LookRule::Pocock, 0.025, &FIVE).unwrap());
        for (got, want) in z.iter().zip([2.438, 2.427, 2.410, 2.397, 2.386]) {
            assert!((got - want).abs() < 0.005, "{z:?}");
        }
    }

    #[test]
    fn the_boundaries_keep_the_error_rate_of_a_brownian_motion_seen_at_the_looks() {
        // Monte Carlo truth: 200,000 paths of a standard Brownian motion observed at unequal
        // fractions; the share that crosses any look's boundary is alpha within 3 standard errors.
        let fractions = [0.15, 0.3, 0.55, 0.8, 1.0];
        let alpha = 0.05;
        let paths = 200_000;
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for rule in [LookRule::ObrienFleming, LookRule::Pocock, LookRule::Bonferroni] {
            let z = z_bounds(&nominal_levels(rule, alpha, &fractions).unwrap());
            let mut crossed = 0;
            for _ in 0..paths {
                let (mut s, mut prev) = (0.0, 0.0);
                for (k, &t) in fractions.iter().enumerate() {
                    let e: f64 = StandardNormal.sample(&mut rng);
                    s += e * (t - prev).sqrt();
                    prev = t;
                    if s / t.sqrt() >= z[k] {
                        crossed += 1;
                        break;
                    }
                }
            }
            let rate = crossed as f64 / paths as f64;
            let se = (alpha * (1.0 - alpha) / paths as f64).sqrt();
            if rule == LookRule::Bonferroni {
                assert!(rate <= alpha && rate > alpha / 2.0, "{rule}: {rate}");
            } else {
                assert!((rate - alpha).abs() < 3.0 * se, "{rule}: {rate} against {alpha}");
            }
        }
    }

    #[test]
    fn spending_is_monotone_and_ends_at_alpha() {
        for rule in [LookRule::ObrienFleming, LookRule::Pocock, LookRule::Bonferroni] {
            let mut prev = 0.0;
            for i in 1..=100 {
                let s = spent(rule, 0.01, i as f64 / 100.0);
                assert!(s >= prev && s <= 0.01 + 1e-12, "{rule}");
                prev = s;
            }
            assert!((prev - 0.01).abs() < 1e-9, "{rule}: {prev}");
            assert_eq!(LookRule::parse(rule.as_str()), Some(rule));
        }
    }
}
