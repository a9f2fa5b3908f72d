//! The plan of an A/B gate: how many trials, how long each, in which order, and when to look.
//!
//! Run-to-run noise (a busier neighbour, another GPU clock, a slow step) is independent from
//! trial to trial, so what beats it is the number of trials, not their length: a gate's budget
//! of requests goes furthest as many short trials. [`Design::plan`] spends the budget
//! (`max_requests`, both arms together, warmups included) on one warmup per arm, then on
//! blocks of four trials aiming at [`TARGET_BLOCKS`] blocks: the trial length is what that
//! leaves, at most the profile's own measured requests. Each block runs its four trials in the
//! order ABBA or BAAB (drawn from the seed), every trial of a block the same slice of the
//! workload (its items from `first_item` on), so a drift of the machine during the job and the
//! slice's make-up both cancel in the block's difference. Looks come after equal shares of the
//! blocks.

use serde::{Deserialize, Serialize};

use crate::stats::LookRule;

/// The default budget: the requests of 20 trials of the shipped default profile (16 warmup
/// and 80 measured requests each).
pub const DEFAULT_MAX_REQUESTS: u64 = 1920;
/// The blocks a plan aims at: enough for a 10% regression at the noise of a shared machine
/// (docs/statistics.md).
pub const TARGET_BLOCKS: u32 = 56;
/// The fewest blocks a plan may have (a look needs at least two, its variance a few more).
pub(crate) const MIN_BLOCKS: u32 = 4;
/// The default number of looks.
pub const DEFAULT_LOOKS: u32 = 5;
/// How each side of the verdict spends its error rate over the looks. By default both sides
/// spend Pocock-type: measured against Bonferroni and O'Brien-Fleming-type spending on the same
/// cases (docs/statistics.md), it met every required rate with the fewest trials on average.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spending {
    /// The fail side (an unchanged configuration failing).
    pub fail: LookRule,
    /// The pass side (a regressed configuration passing).
    pub pass: LookRule,
}

impl Default for Spending {
    fn default() -> Self {
        Spending::both(LookRule::Pocock)
    }
}

impl Spending {
    /// The same rule on both sides.
    pub fn both(rule: LookRule) -> Spending {
        Spending { fail: rule, pass: rule }
    }
}

/// No look is made with fewer blocks than this.
pub(crate) const FIRST_LOOK_MIN_BLOCKS: u32 = 4;

/// One arm of the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arm {
    /// The base revision's configuration.
    Baseline,
    /// The working tree's (or `--candidate-set`'s) configuration.
    Candidate,
}

impl Arm {
    pub fn as_str(self) -> &'static str {
        match self {
            Arm::Baseline => "baseline",
            Arm::Candidate => "candidate",
        }
    }

    /// `A` or `B`.
    pub fn letter(self) -> char {
        match self {
            Arm::Baseline => 'A',
            Arm::Candidate => 'B',
        }
    }
}

/// What the plan is made from.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanInput {
    /// Requests the whole gate may send, both arms, warmups included.
    pub max_requests: u64,
    /// Warmup requests each arm's engine gets once, before its first trial.
    pub warmup_requests: u32,
    /// Distinct workload items the trials' slices cycle through.
    pub items: u32,
    /// The profile's measured requests per run: no trial is longer.
    pub measured: u32,
    /// A trial length chosen by the user instead of the plan's.
    pub trial_requests: Option<u32>,
    pub looks: u32,
    pub spending: Spending,
    /// Seed of the blocks' orders.
    pub seed: u64,
}

/// The plan of an A/B gate, as recorded in `ab.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Design {
    pub max_requests: u64,
    pub warmup_requests: u32,
    /// Measured requests of each trial.
    pub trial_requests: u32,
    pub items: u32,
    /// Blocks planned (four trials each); the gate stops earlier when a look decides.
    pub blocks: u32,
    /// The looks: after this many blocks each, the last after all of them.
    pub looks: Vec<u32>,
    pub spending: Spending,
    pub seed: u64,
}

/// One trial of the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Slot {
    /// Trial number in the order measured, from 1.
    pub trial: u32,
    /// Block number, from 1.
    pub block: u32,
    pub arm: Arm,
    /// The first workload item of the block's slice (from 0).
    pub first_item: u32,
}

/// A plan the inputs cannot make.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DesignError {
    #[error(
        "a budget of {max_requests} requests holds {blocks} blocks of 4 trials of \
         {trial_requests} requests after the warmups ({warmups} requests), fewer than the \
         {MIN_BLOCKS} an A/B gate needs; raise --max-requests to at least {needed}"
    )]
    Budget { max_requests: u64, blocks: u64, trial_requests: u32, warmups: u64, needed: u64 },
    #[error("{what} must be at least 1")]
    Zero { what: &'static str },
}

impl Design {
    /// The plan for a budget and a profile (see the module's documentation).
    pub fn plan(input: &PlanInput) -> Result<Design, DesignError> {
        for (what, v) in
            [("the workload's items", input.items), ("the measured requests", input.measured)]
        {
            if v == 0 {
                return Err(DesignError::Zero { what });
            }
        }
        if input.looks == 0 || input.trial_requests == Some(0) {
            return Err(DesignError::Zero { what: "--looks and --trial-requests" });
        }
        let warmups = 2 * input.warmup_requests as u64;
        let left = input.max_requests.saturating_sub(warmups);
        let trial_requests = input.trial_requests.unwrap_or_else(|| {
            let fit = left / (4 * TARGET_BLOCKS as u64);
            fit.clamp(1, input.measured as u64) as u32
        });
        let blocks = left / (4 * trial_requests as u64);
        if blocks < MIN_BLOCKS as u64 {
            return Err(DesignError::Budget {
                max_requests: input.max_requests,
                blocks,
                trial_requests,
                warmups,
                needed: warmups + 4 * MIN_BLOCKS as u64 * trial_requests as u64,
            });
        }
        let blocks = blocks.min(u32::MAX as u64) as u32;
        Ok(Design {
            max_requests: input.max_requests,
            warmup_requests: input.warmup_requests,
            trial_requests,
            items: input.items,
            blocks,
            looks: looks(blocks, input.looks),
            spending: input.spending,
            seed: input.seed,
        })
    }

    /// The order of block `block`'s four trials: ABBA or BAAB, drawn from the seed.
    pub fn order(&self, block: u32) -> [Arm; 4] {
        let mut bytes = [0u8; 12];
        bytes[..8].copy_from_slice(&self.seed.to_le_bytes());
        bytes[8..].copy_from_slice(&block.to_le_bytes());
        let (a, b) = (Arm::Baseline, Arm::Candidate);
        if crate::hash::fnv1a(&bytes) & 1 == 0 { [a, b, b, a] } else { [b, a, a, b] }
    }

    /// The four trials of block `block` (from 1), numbered in the order measured.
    pub fn slots(&self, block: u32) -> [Slot; 4] {
        let first_item =
            ((block as u64 - 1) * self.trial_requests as u64 % self.items as u64) as u32;
        let order = self.order(block);
        std::array::from_fn(|i| Slot {
            trial: (block - 1) * 4 + i as u32 + 1,
            block,
            arm: order[i],
            first_item,
        })
    }

    /// The requests the whole plan sends when no look stops it.
    pub fn planned_requests(&self) -> u64 {
        2 * self.warmup_requests as u64 + 4 * self.blocks as u64 * self.trial_requests as u64
    }

    /// Each look's share of the planned blocks.
    pub(crate) fn fractions(&self) -> Vec<f64> {
        self.looks.iter().map(|&b| b as f64 / self.blocks as f64).collect()
    }

    /// The index of the look after `blocks` blocks, if one is made then.
    pub(crate) fn look_after(&self, blocks: u32) -> Option<usize> {
        self.looks.iter().position(|&b| b == blocks)
    }
}

/// Up to `k` looks after equal shares of `blocks`, none before [`FIRST_LOOK_MIN_BLOCKS`], the
/// last after all of them.
fn looks(blocks: u32, k: u32) -> Vec<u32> {
    let mut out: Vec<u32> = (1..=k)
        .map(|i| ((blocks as u64 * i as u64).div_ceil(k as u64)) as u32)
        .filter(|&b| b >= FIRST_LOOK_MIN_BLOCKS.min(blocks))
        .collect();
    out.dedup();
    if out.last() != Some(&blocks) {
        out.push(blocks);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> PlanInput {
        PlanInput {
            max_requests: DEFAULT_MAX_REQUESTS,
            warmup_requests: 16,
            items: 80,
            measured: 80,
            trial_requests: None,
            looks: DEFAULT_LOOKS,
            spending: Spending::default(),
            seed: 1,
        }
    }

    #[test]
    fn the_default_budget_becomes_many_short_trials_within_it() {
        let d = Design::plan(&input()).unwrap();
        // (1920 - 32) / (4 x 56) = 8.4 -> 8 requests a trial, 59 blocks.
        assert_eq!((d.trial_requests, d.blocks), (8, 59));
        assert_eq!(d.planned_requests(), 32 + 4 * 59 * 8);
        assert!(d.planned_requests() <= DEFAULT_MAX_REQUESTS);
        assert_eq!(d.looks, vec![12, 24, 36, 48, 59]);
        assert_eq!(d.fractions().last(), Some(&1.0));
        // A trial is never longer than the profile's run, and a chosen length is kept.
        let small = Design::plan(&PlanInput { measured: 6, items: 6, ..input() }).unwrap();
        assert_eq!(small.trial_requests, 6);
        let chosen = Design::plan(&PlanInput { trial_requests: Some(20), ..input() }).unwrap();
        assert_eq!((chosen.trial_requests, chosen.blocks), (20, 23));
    }

    #[test]
    fn a_budget_too_small_for_four_blocks_is_refused_with_what_would_do() {
        let e = Design::plan(&PlanInput { max_requests: 100, trial_requests: Some(10), ..input() })
            .unwrap_err();
        assert_eq!(
            e,
            DesignError::Budget {
                max_requests: 100,
                blocks: 1,
                trial_requests: 10,
                warmups: 32,
                needed: 192
            }
        );
        assert!(e.to_string().contains("raise --max-requests to at least 192"), "{e}");
        assert!(Design::plan(&PlanInput { items: 0, ..input() }).is_err());
        assert!(Design::plan(&PlanInput { looks: 0, ..input() }).is_err());
    }

    #[test]
    fn blocks_are_balanced_abba_or_baab_over_one_slice_each() {
        let d = Design::plan(&input()).unwrap();
        let mut abba = 0;
        for block in 1..=d.blocks {
            let s = d.slots(block);
            let arms: Vec<Arm> = s.iter().map(|s| s.arm).collect();
            assert!(
                arms == [Arm::Baseline, Arm::Candidate, Arm::Candidate, Arm::Baseline]
                    || arms == [Arm::Candidate, Arm::Baseline, Arm::Baseline, Arm::Candidate]
            );
            abba += (arms[0] == Arm::Baseline) as u32;
            assert!(s.iter().all(|t| t.block == block && t.first_item == s[0].first_item));
            assert_eq!(s[0].trial, (block - 1) * 4 + 1);
            assert_eq!(s[0].first_item, (block - 1) * 8 % 80);
        }
        // Both orders occur (59 fair draws: all of one kind has probability 2^-58).
        assert!(abba > 0 && abba < d.blocks, "{abba}");
        // The same seed gives the same orders, another seed others.
        let again = Design::plan(&input()).unwrap();
        assert!((1..=d.blocks).all(|b| again.order(b) == d.order(b)));
        let other = Design::plan(&PlanInput { seed: 2, ..input() }).unwrap();
        assert!((1..=d.blocks).any(|b| other.order(b) != d.order(b)));
    }

    #[test]
    fn looks_come_after_equal_shares_and_never_too_early() {
        assert_eq!(looks(10, 5), vec![4, 6, 8, 10]);
        assert_eq!(looks(4, 5), vec![4]);
        assert_eq!(looks(40, 1), vec![40]);
        assert_eq!(looks(100, 4), vec![25, 50, 75, 100]);
    }
}
