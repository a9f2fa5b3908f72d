//! The embedded engine simulator: what `cargo xtask bench` measures when a profile names no
//! target.

#[cfg(feature = "runtime")]
pub mod backend;
pub mod engine;
