//! What the gates take from the noise history ([`priors`]): a set's pooled priors and the lines
//! saying what was used, an A/B gate's paired-difference priors. The history itself lives in
//! git and is read and appended by the command side (`xtask::history_store`).

pub mod priors;
