//! infergate's policy: what lives beyond one run, as pure functions over typed values.
//!
//! Decision records ([`adr`]: parse, lint, draft, the pull-request rule of `adr check`, the
//! live records), thresholds from proposal to the gate's verdict ([`thresholds`]), the priors
//! the gates pool from the noise history ([`history`]), the tune model ([`tune`]: grid, ranking,
//! the accepted winner written into a config) and the A/B gate's plan and report ([`ab`]), with
//! the pure helpers they share: text formatting ([`text`]), console tables ([`console`]), SVG
//! charts ([`chart`]), templates ([`template`]), the settings file ([`settings`]) and the exit
//! statuses ([`exit`]).
//!
//! No CLI parser, no async runtime, no git: the `xtask` crate parses arguments, reads git and
//! the file system, runs processes and prints; this crate decides. It depends on the data model
//! (`infergate_model`) only, so the pull request's check builds on the two.

pub mod ab;
pub mod adr;
pub mod chart;
pub mod console;
pub mod exit;
pub mod history;
pub mod settings;
pub mod template;
#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
pub mod text;
pub mod thresholds;
pub mod tune;

pub use exit::Status;
