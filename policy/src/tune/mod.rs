//! The tune model (`cargo xtask tune`): the grid of configurations ([`grid`]), the ranking and
//! its file ([`model`]), and the accepted winner written into a config ([`apply`]). The command
//! (flags, engines, measurements) is `xtask::tune`.

pub mod apply;
pub mod grid;
pub mod model;

pub use model::{TUNE_FILE, TuneFile, TuneRow};
