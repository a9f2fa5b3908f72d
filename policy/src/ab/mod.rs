//! The pure parts of the A/B gate (`cargo xtask bench ab BASE_REV`):
//!
//! - [`arms`]: what each arm runs: the candidate's config and settings, the checks from the
//!   live records' budgets and thresholds;
//! - [`report`]: the report: plan, measurement, one row per metric, GitHub annotations.
//!
//! The command (flags, the base revision read from git, the engines, the trials) is
//! `xtask::gate::ab`.

pub mod arms;
pub mod report;
