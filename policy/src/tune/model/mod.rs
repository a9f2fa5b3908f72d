//! `tune.json`, the result of a tune, and the policy over its rows as pure functions: which
//! rows meet the profile's SLOs, the Pareto fronts, the winner and its tie-break, the warning
//! when the winner sits at the edge of the grid, and the order a search measures in.
//!
//! One file per part, each using only those before it:
//!
//! - [`file`](mod@file): the model, `tune.json` (`TuneFile`, `TuneRow`, each row's estimates
//!   and its SLO compliance, the winner's rivals), read as a typed artifact;
//! - [`policy`]: the policy over the rows: SLOs decided by the intervals, the Pareto fronts,
//!   the winner and how it was decided, edge-of-grid warnings ([`TuneFile::decide`]);
//! - [`render`]: the result shown: the winner's statement, why there is none, the points of
//!   the Pareto chart;
//! - [`search`]: the order a search measures in (grid, seeded random, successive halving).

pub mod file;
pub mod policy;
pub mod render;
pub mod search;

#[cfg(test)]
mod tests;

pub use file::{
    AxisRecord, DecidedBy, FORMAT_VERSION, Objective, PARETO_FILE, Rival, RowCapacity,
    RowEstimates, RowStatus, SUGGESTED_TRIALS, SloCompliance, TUNE_FILE, TieBreak, TuneFile,
    TuneRow,
};
pub use policy::{
    Choice, GOODPUT, beats, capacity_overlaps, choose, choose_by_capacity, edge_warnings,
    pareto_front, slo_check, winner,
};
pub use search::{MIN_RUNG_REQUESTS, Search, better_half, halving_rungs};
