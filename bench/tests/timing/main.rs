//! The timing tests of `infergate-bench`, in a test binary of their own. They measure the bench
//! against the simulator to the millisecond (or compare wall-clock latencies) on a machine that
//! may have two cores; cargo runs test binaries one after another, so none of the other
//! integration tests (`tests/it`, which run in parallel with each other) shares the cores while
//! these measure, and [`one_at_a_time`] keeps them from sharing them with each other.

// The same helpers as `tests/it`; each binary uses part of them.
#[allow(dead_code)]
#[path = "../it/support.rs"]
mod support;

mod apart;
mod coordinated_omission;
mod engine_http;
mod known_answer;
mod replay;
mod shards;
mod throughput;

/// Held for the whole of each timing test: they run one after another.
pub async fn one_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}
