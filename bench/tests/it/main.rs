//! The integration tests of `infergate-bench`, in one test binary (one link instead of one per
//! file): each module is one area of the crate, `support` holds what they share.

// Each module uses only part of the shared helpers.
#[allow(dead_code)]
mod support;

mod ab_gate;
mod accept;
mod access;
mod cold_start;
mod config_props;
mod diagnose;
mod engine_metrics;
mod faults;
mod hostile;
mod hostile_connection;
mod noise_statistics;
mod oversized;
mod reader_props;
mod secrets;
mod server_side;
mod sessions;
mod shards;
mod structured_logprobs;
mod sweep;
#[cfg(feature = "tls")]
mod tls_default;
mod workloads;
