//! Change points of a series: the points after which its distribution moved.
//!
//! The method is **E-divisive means** (Matteson and James, "A Nonparametric Approach for
//! Multiple Change Point Analysis of Multivariate Data", JASA 2014), the detector behind
//! MongoDB's performance CI and Apache Otava, with its permutation test of significance:
//!
//! - For a segment `Z` split at `τ` into `X = Z[..τ]` (`m` points) and `Y = Z[τ..]` (`k`
//!   points), the divergence is `ê = 2/(mk) Σ|x - y| - C(m,2)⁻¹ Σ|x - x'| - C(k,2)⁻¹ Σ|y - y'|`
//!   (the energy distance with exponent 1) and the statistic `q̂ = mk/(m + k) ê`. Each segment's
//!   best split maximises `q̂` over `τ`, with at least [`Settings::min_size`] points on each side.
//! - Bisection: the split with the largest `q̂` over the current segments is tested; when
//!   significant it becomes a change point and the segments are searched again, until a test
//!   fails or no segment can be split.
//! - Significance: the points of each current segment are shuffled within it
//!   ([`Settings::permutations`] times, a seeded generator so that a series always gives the
//!   same answer) and the largest `q̂` recomputed; the p-value is `(1 + #{q̂* >= q̂}) / (1 + R)`,
//!   and a split is kept when it is at most [`Settings::alpha`].
//!
//! Assumptions: the points are independent given the segment they lie in (no trend within a
//! segment: a slow ramp is reported as one or more steps), and the series is ordered (main's
//! first-parent commits). It needs enough points for a permutation test to reach the level at
//! all ([`needed_points`]: 10 at the default level of 2%), and says so below that
//! ([`Detection::TooFew`]). Each change point's shift is the difference of the means of the
//! segments on either side (bounded by the neighbouring change points), with Welch's interval.
//!
//! The caller chooses the scale: `xtask history` passes log values of a positive metric, so a
//! shift is a ratio (`exp(shift) - 1` relative).

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// How the detector decides.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Settings {
    /// The largest p-value of a kept change point.
    pub alpha: f64,
    /// Permutations of each test.
    pub permutations: usize,
    /// The fewest points a segment may have.
    pub min_size: usize,
    /// Seed of the permutations.
    pub seed: u64,
    /// Confidence of each shift's interval.
    pub confidence: f64,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings { alpha: 0.02, permutations: 999, min_size: 3, seed: 1, confidence: 0.95 }
    }
}

/// A segment of the series, `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Segment {
    pub start: usize,
    pub end: usize,
    pub mean: f64,
    /// Sample standard deviation (0 for one point).
    pub sd: f64,
}

/// One change point: the series' distribution moved between `index - 1` and `index`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ChangePoint {
    /// The first point after the change.
    pub index: usize,
    /// The permutation test's p-value when the split was made.
    pub p_value: f64,
    /// `q̂` of the split.
    pub statistic: f64,
    pub before: Segment,
    pub after: Segment,
    /// `after.mean - before.mean`, with Welch's interval at [`Settings::confidence`].
    pub shift: f64,
    pub lo: f64,
    pub hi: f64,
}

/// What the detector could say.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Detection {
    /// Too few points to split even once.
    TooFew { points: usize, needed: usize },
    /// The change points found, in order (none: no significant change).
    Decided(Vec<ChangePoint>),
}

/// Sums of `|z_i - z_j|` over blocks of one segment, from a prefix table of the distance matrix.
struct Distances {
    n: usize,
    /// `p[(i, j)] = Σ_{a < i, b < j} |z_a - z_b|`, `(n + 1)²` entries.
    p: Vec<f64>,
}

impl Distances {
    fn new(z: &[f64]) -> Distances {
        let n = z.len();
        let w = n + 1;
        let mut p = vec![0.0; w * w];
        for i in 0..n {
            let mut row = 0.0;
            for j in 0..n {
                row += (z[i] - z[j]).abs();
                p[(i + 1) * w + j + 1] = p[i * w + j + 1] + row;
            }
        }
        Distances { n, p }
    }

    /// `Σ_{r0 <= a < r1, c0 <= b < c1} |z_a - z_b|`.
    fn block(&self, r0: usize, r1: usize, c0: usize, c1: usize) -> f64 {
        let w = self.n + 1;
        self.p[r1 * w + c1] - self.p[r0 * w + c1] - self.p[r1 * w + c0] + self.p[r0 * w + c0]
    }
}

/// The best split of `z[start..end]` (`τ`, `q̂`), `None` when it is too short.
fn best_split(d: &Distances, start: usize, end: usize, min_size: usize) -> Option<(usize, f64)> {
    let min_size = min_size.max(2);
    if end - start < 2 * min_size {
        return None;
    }
    let mut best: Option<(usize, f64)> = None;
    for tau in start + min_size..=end - min_size {
        let (m, k) = ((tau - start) as f64, (end - tau) as f64);
        let between = d.block(start, tau, tau, end);
        let within_x = d.block(start, tau, start, tau) / 2.0;
        let within_y = d.block(tau, end, tau, end) / 2.0;
        let e = 2.0 * between / (m * k)
            - within_x / (m * (m - 1.0) / 2.0)
            - within_y / (k * (k - 1.0) / 2.0);
        let q = m * k / (m + k) * e;
        if best.is_none_or(|(_, b)| q > b) {
            best = Some((tau, q));
        }
    }
    best
}

/// The largest split over the segments between `bounds` (`(segment, τ, q̂)`).
fn best_over(z: &[f64], bounds: &[usize], min_size: usize) -> Option<(usize, usize, f64)> {
    let d = Distances::new(z);
    let mut best: Option<(usize, usize, f64)> = None;
    for (s, w) in bounds.windows(2).enumerate() {
        if let Some((tau, q)) = best_split(&d, w[0], w[1], min_size)
            && best.is_none_or(|(_, _, b)| q > b)
        {
            best = Some((s, tau, q));
        }
    }
    best
}

fn segment(z: &[f64], start: usize, end: usize) -> Segment {
    let v = &z[start..end];
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let sd = if v.len() > 1 {
        (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    Segment { start, end, mean, sd }
}

/// Welch's interval of `b.mean - a.mean`.
fn welch(a: &Segment, b: &Segment, confidence: f64) -> (f64, f64) {
    let (na, nb) = ((a.end - a.start) as f64, (b.end - b.start) as f64);
    let (va, vb) = (a.sd * a.sd / na, b.sd * b.sd / nb);
    let diff = b.mean - a.mean;
    let se = (va + vb).sqrt();
    if se == 0.0 {
        return (diff, diff);
    }
    let df = (va + vb).powi(2)
        / (va * va / (na - 1.0).max(1.0) + vb * vb / (nb - 1.0).max(1.0)).max(f64::MIN_POSITIVE);
    let t = StudentsT::new(0.0, 1.0, df.max(1.0))
        .map(|t| t.inverse_cdf(1.0 - (1.0 - confidence) / 2.0))
        .unwrap_or(f64::INFINITY);
    (diff - t * se, diff + t * se)
}

/// The fewest points that can show a change at `settings.alpha`. Shuffling `n` points, only
/// the observed split's two halves and their mirror image are as extreme as a perfect step, so
/// the smallest p-value the test can give is about `2 / C(n, n/2)`; a series is decidable
/// when that is at most half of `alpha` (a margin for the p-value's own sampling error), and
/// has room for two segments of [`Settings::min_size`].
pub(crate) fn needed_points(settings: &Settings) -> usize {
    let mut n = 2 * settings.min_size.max(2);
    loop {
        let half = n / 2;
        let c = (0..half).fold(1.0f64, |c, i| c * (n - i) as f64 / (i + 1) as f64);
        if 2.0 / c <= settings.alpha / 2.0 || n >= 64 {
            return n;
        }
        n += 1;
    }
}

/// The change points of `z` (finite values, in order).
pub fn detect(z: &[f64], settings: &Settings) -> Detection {
    let needed = needed_points(settings);
    if z.len() < needed {
        return Detection::TooFew { points: z.len(), needed };
    }
    let mut rng = StdRng::seed_from_u64(settings.seed);
    let mut bounds = vec![0, z.len()];
    let mut found: Vec<(usize, f64, f64)> = Vec::new();
    let mut shuffled = z.to_vec();
    while let Some((_, tau, q)) = best_over(z, &bounds, settings.min_size) {
        let mut at_least = 0usize;
        for _ in 0..settings.permutations {
            shuffled.copy_from_slice(z);
            for w in bounds.windows(2) {
                shuffled[w[0]..w[1]].shuffle(&mut rng);
            }
            if best_over(&shuffled, &bounds, settings.min_size).is_some_and(|(_, _, qs)| qs >= q) {
                at_least += 1;
            }
        }
        let p = (1 + at_least) as f64 / (1 + settings.permutations) as f64;
        if p > settings.alpha {
            break;
        }
        found.push((tau, p, q));
        let at = bounds.partition_point(|b| *b < tau);
        bounds.insert(at, tau);
    }
    found.sort_by_key(|f| f.0);
    let points = found
        .iter()
        .map(|&(index, p_value, statistic)| {
            let at = bounds.iter().position(|b| *b == index).expect("a found split is a bound");
            let before = segment(z, bounds[at - 1], index);
            let after = segment(z, index, bounds[at + 1]);
            let (lo, hi) = welch(&before, &after, settings.confidence);
            ChangePoint {
                index,
                p_value,
                statistic,
                before,
                after,
                shift: after.mean - before.mean,
                lo,
                hi,
            }
        })
        .collect();
    Detection::Decided(points)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_distr::{Distribution, Normal};

    /// 60 commits, each point the mean log of `trials` trials with 5% run-to-run noise; a step
    /// of `step` (relative) from commit `at`, a ramp of `ramp` per commit over the last
    /// `ramp_len` commits.
    fn series_of(
        trials: usize,
        seed: u64,
        step: f64,
        at: usize,
        ramp: f64,
        ramp_len: usize,
    ) -> Vec<f64> {
        let mut rng = StdRng::seed_from_u64(seed);
        let noise = Normal::new(0.0, 0.05).unwrap();
        (0..60)
            .map(|i| {
                let mut truth = 100.0;
                if i >= at {
                    truth *= 1.0 + step;
                }
                let ramp_start = 60 - ramp_len;
                if i >= ramp_start {
                    truth *= (1.0f64 + ramp).powi((i - ramp_start + 1) as i32);
                }
                let logs: f64 =
                    (0..trials).map(|_| (truth * (1.0 + noise.sample(&mut rng))).ln()).sum();
                logs / trials as f64
            })
            .collect()
    }

    /// The series of the history's points: 3 trials a commit (`bench --trials 3`, the main
    /// branch's job).
    fn series(seed: u64, step: f64, at: usize, ramp: f64, ramp_len: usize) -> Vec<f64> {
        series_of(3, seed, step, at, ramp, ramp_len)
    }

    fn found(d: Detection) -> Vec<ChangePoint> {
        match d {
            Detection::Decided(c) => c,
            Detection::TooFew { .. } => panic!("60 points decide"),
        }
    }

    /// The rates docs/statistics.md states ("Change points"): 200 series each.
    #[test]
    fn a_ten_percent_step_is_found_at_its_commit_and_flat_series_rarely_move() {
        let s = Settings::default();
        let mut at_commit = 0;
        let mut within_one = 0;
        let mut shift_covered = 0;
        for seed in 0..200u64 {
            let at = 20 + (seed as usize % 21);
            let z = series(seed, 0.10, at, 0.0, 0);
            let c = found(detect(&z, &s));
            if let Some(cp) = c.iter().min_by_key(|cp| cp.index.abs_diff(at)) {
                at_commit += usize::from(cp.index == at);
                if cp.index.abs_diff(at) <= 1 {
                    within_one += 1;
                    shift_covered += usize::from(cp.lo <= 1.1f64.ln() && 1.1f64.ln() <= cp.hi);
                }
            }
        }
        let mut false_series = 0;
        for seed in 1000..1200u64 {
            let z = series(seed, 0.0, 60, 0.0, 0);
            false_series += usize::from(!found(detect(&z, &s)).is_empty());
        }
        // The same with one trial a commit (a point's noise 5%, the step 1.9 of its standard
        // deviations): printed for docs/statistics.md, which explains the bound.
        // Beside it, the least-squares split (the maximum-likelihood position of one step).
        let (mut single, mut least_squares) = (0, 0);
        for seed in 0..200u64 {
            let at = 20 + (seed as usize % 21);
            let z = series_of(1, seed, 0.10, at, 0.0, 0);
            let c = found(detect(&z, &s));
            single += usize::from(c.iter().any(|cp| cp.index.abs_diff(at) <= 1));
            let sse = |a: &[f64]| {
                let m = a.iter().sum::<f64>() / a.len() as f64;
                a.iter().map(|x| (x - m).powi(2)).sum::<f64>()
            };
            let best = (3..=57)
                .min_by(|&i, &j| {
                    let (ci, cj) = (sse(&z[..i]) + sse(&z[i..]), sse(&z[..j]) + sse(&z[j..]));
                    ci.total_cmp(&cj)
                })
                .unwrap();
            least_squares += usize::from(best.abs_diff(at) <= 1);
        }
        // The bound on any detector: the Bayes rule that knows everything the generator does
        // (the step's size, the noise, the level before, and where the step may lie, uniformly)
        // and names the commit whose window of three holds the most posterior mass. No rule with
        // that prior can place the step within one commit more often on these series. Twice: the
        // step anywhere a detector can see one (3 points a side), and the step at commit 20 to
        // 40 as these series draw it.
        let oracle_series = 20_000u64;
        let (d, sd) = (1.1f64.ln(), 0.05f64);
        let oracle = |range: std::ops::RangeInclusive<usize>| {
            let mut hits = 0u64;
            for seed in 0..oracle_series {
                let at = 20 + (seed as usize % 21);
                let z = series_of(1, 1_000_000 + seed, 0.10, at, 0.0, 0);
                // Log-likelihood of a step at t against none: a sum over the points from t.
                let r: Vec<f64> =
                    z.iter().map(|x| ((x - 100f64.ln()) * d - d * d / 2.0) / sd / sd).collect();
                let ll: Vec<f64> = (0..=60).map(|t| r[t..].iter().sum()).collect();
                let top = range.clone().map(|t| ll[t]).fold(f64::NEG_INFINITY, f64::max);
                let post = |t: usize| if range.contains(&t) { (ll[t] - top).exp() } else { 0.0 };
                let window = |t: usize| post(t - 1) + post(t) + post(t + 1);
                let best = range.clone().max_by(|&i, &j| window(i).total_cmp(&window(j))).unwrap();
                hits += u64::from(best.abs_diff(at) <= 1);
            }
            100.0 * hits as f64 / oracle_series as f64
        };
        let (anywhere, drawn) = (oracle(3..=57), oracle(20..=40));
        eprintln!(
            "10% step, one trial a commit: within one commit {single}/200 (the least-squares \
             split: {least_squares}/200; the Bayes rule that knows the step and the noise, over \
             {oracle_series} series: {anywhere:.1}% with the step anywhere from commit 3 to 57, \
             {drawn:.1}% knowing it lies at 20 to 40)"
        );
        eprintln!(
            "10% step: at the commit {at_commit}/200, within one {within_one}/200 (its shift's 95% \
             interval holds the true 10%: {shift_covered}); flat: a change point in {false_series}/200"
        );
        assert!(within_one >= 180, "{within_one} of 200 within one commit");
        assert!(false_series <= 10, "{false_series} of 200 flat series moved");
    }

    #[test]
    fn a_slow_ramp_is_reported_by_its_end() {
        let s = Settings::default();
        let mut reported = 0;
        for seed in 0..200u64 {
            // 40 flat points, then 1% worse per commit for 20 commits.
            let z = series(seed, 0.0, 60, 0.01, 20);
            let c = found(detect(&z, &s));
            reported += usize::from(c.iter().any(|cp| cp.index >= 35 && cp.shift > 0.0));
        }
        eprintln!("ramp of 1% a commit over 20 commits: reported in {reported}/200");
        assert!(reported >= 190, "{reported}");
    }

    #[test]
    fn short_series_say_they_cannot_decide_and_answers_repeat() {
        let s = Settings::default();
        assert_eq!(needed_points(&s), 10);
        assert_eq!(detect(&[1.0, 2.0, 3.0], &s), Detection::TooFew { points: 3, needed: 10 });
        // Ten points: a clear step is found (a young series decides as soon as it can).
        let young: Vec<f64> =
            (0..10).map(|i| if i < 5 { 0.0 } else { 0.3 } + 0.01 * (i % 3) as f64).collect();
        let c = found(detect(&young, &s));
        assert_eq!(c.iter().map(|c| c.index).collect::<Vec<_>>(), vec![5], "{c:?}");
        let z = series(3, 0.2, 30, 0.0, 0);
        assert_eq!(detect(&z, &s), detect(&z, &s));
        // Two steps: both found, each shift with its own segments.
        let mut z = series(4, 0.0, 60, 0.0, 0);
        for (i, v) in z.iter_mut().enumerate() {
            if (20..40).contains(&i) {
                *v += 0.2;
            }
        }
        let c = found(detect(&z, &s));
        let idx: Vec<usize> = c.iter().map(|c| c.index).collect();
        assert_eq!(idx, vec![20, 40], "{c:?}");
        assert!(c[0].shift > 0.1 && c[1].shift < -0.1);
        assert_eq!((c[0].after.start, c[0].after.end), (20, 40));
        // A constant series has nothing to find.
        assert_eq!(detect(&[5.0; 12], &s), Detection::Decided(vec![]));
        assert_eq!(needed_points(&Settings { alpha: 0.05, ..s }), 9);
    }
}
