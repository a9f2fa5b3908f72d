//! The noise history's policy: what the gates take from it ([`priors`]: a set's pooled priors
//! and the lines saying what was used, an A/B gate's paired-difference priors) and the history
//! as series along a branch with their change points ([`series`]). The history itself lives in
//! git and is read and appended by the command side (`xtask::history_store`,
//! `xtask::history::series`).

pub mod priors;
pub mod series;
