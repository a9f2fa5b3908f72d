//! The order a search measures configurations in: the grid's, a seeded random sample, or
//! successive halving's rungs (each with twice the requests of the one before, the better half
//! going on).

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use super::file::{RowStatus, TuneRow};
use super::policy::{cmp_asc, cmp_desc};

/// Fewest measured requests of a rung of successive halving.
pub const MIN_RUNG_REQUESTS: u64 = 8;

/// The measured requests of each rung of successive halving over `n` configurations with
/// `full` requests: ceil(log2 n) rungs (at least one), the last with `full`, each earlier one
/// with half the next (at least [`MIN_RUNG_REQUESTS`], never more than `full`).
pub fn halving_rungs(full: u64, n: usize) -> Vec<u64> {
    let rungs = (n.max(1) as f64).log2().ceil().max(1.0) as u32;
    (0..rungs).map(|r| (full >> (rungs - 1 - r).min(63)).max(MIN_RUNG_REQUESTS.min(full))).collect()
}

/// The better half (rounded up) of `rows`, as indexes into it in their order: ranked by
/// meeting every SLO, then goodput, then throughput, then TTFT P99, then order (a row not
/// measured ranks last).
pub fn better_half(rows: &[&TuneRow]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..rows.len()).collect();
    idx.sort_by(|&a, &b| {
        let (ra, rb) = (rows[a], rows[b]);
        let measured = |r: &TuneRow| r.status == RowStatus::Measured;
        measured(rb)
            .cmp(&measured(ra))
            .then(rb.meets_slos().cmp(&ra.meets_slos()))
            .then(cmp_desc(ra.goodput_rps, rb.goodput_rps))
            .then(cmp_desc(ra.output_tokens_per_s, rb.output_tokens_per_s))
            .then(cmp_asc(ra.ttft_p99_ms, rb.ttft_p99_ms))
            .then(a.cmp(&b))
    });
    idx.truncate(rows.len().div_ceil(2));
    idx.sort();
    idx
}

/// How a search orders the configurations: `grid` keeps the grid's order; `random` shuffles it
/// with the seed (the same seed, the same order). `--max-configs` then keeps the first ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Search {
    Grid,
    Random {
        seed: u64,
    },
    /// Grid order, measured in rungs of [`halving_rungs`], the [`better_half`] going on.
    Halving,
}

impl Search {
    /// The indexes of `n` configurations in the order this search measures them, the first
    /// `max` of them (all when `None`).
    /// Nothing the size of `n` is allocated: a random sample of `max` is drawn without the rest.
    pub fn order(&self, n: usize, max: Option<usize>) -> Vec<usize> {
        let k = max.unwrap_or(n).min(n);
        match self {
            Search::Random { seed } => {
                let mut rng = StdRng::seed_from_u64(*seed);
                let mut idx = rand::seq::index::sample(&mut rng, n, k).into_vec();
                idx.shuffle(&mut rng);
                idx
            }
            _ => (0..k).collect(),
        }
    }

    pub fn label(&self) -> String {
        match self {
            Search::Grid => "grid".into(),
            Search::Random { seed } => format!("random (seed {seed})"),
            Search::Halving => "successive halving".into(),
        }
    }
}
