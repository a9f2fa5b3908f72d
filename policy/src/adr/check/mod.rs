//! The pure parts of `adr check`: the pull-request rule ([`rule`]) and the key-by-key diff of a
//! governed TOML file ([`semdiff`]). The inputs from two git trees, the governed sources and the
//! report are the command's (`xtask::adr::check`).

pub mod rule;
pub mod semdiff;
