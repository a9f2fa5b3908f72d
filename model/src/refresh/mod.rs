//! Datasets kept fresh from production: `cargo xtask dataset refresh` replaces a seeded share
//! of a dataset with the slowest or failed requests of a window of a production request log,
//! scrubbed of secrets, PII and user ids, and writes where they came from beside it.
//!
//! [`provenance`] (the file written beside the refreshed dataset, which the record tooling
//! reads) is in every build; the refresh itself ([`log`]: the log's lines, [`scrub`]: secrets,
//! PII and user ids out, [`replace`]: selection and replacement) needs the `refresh` feature.

#[cfg(feature = "refresh")]
pub mod log;
pub mod provenance;
#[cfg(feature = "refresh")]
pub mod replace;
#[cfg(feature = "refresh")]
pub mod scrub;
