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
mod steady;
mod throughput;

/// Held for the whole of each timing test: they run one after another.
pub async fn one_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

/// What one attempt at a timing test measured: whether the machine was quiet while it ran (the
/// known-answer server, a process of its own, kept its schedule), what it saw, and the timing
/// bounds it broke. The same as `cargo xtask selftest`'s (`infergate_model::selftest`).
pub use infergate_model::selftest::{Attempt, QUIET_SERVER_LATE_P99_MS};

/// What a stalled machine adds to a wall-clock bound of the bench's own (a send lag, a latency
/// compared between two runs): the lateness p99 the same machine imposed, during the same
/// attempt, on the known-answer server, a process that does nothing but keep a schedule. On a
/// quiet machine nothing is added. A bench that adds time of its own still breaks the widened
/// bound by that much: the machine's share is allowed, never the bench's.
pub fn stall_allowance(server_late_p99_ms: f64) -> f64 {
    if server_late_p99_ms <= QUIET_SERVER_LATE_P99_MS { 0.0 } else { server_late_p99_ms }
}

/// Run a timing test's measurement until one attempt holds its bounds, judged as `cargo xtask
/// selftest` judges its own (`infergate_model::selftest::Attempts`): an attempt is quiet when the
/// known-answer server kept its schedule (the attempt says) and no other process took more than
/// `QUIET_OTHERS_SHARE` of the machine meanwhile (measured from `/proc`, this test process's CPU
/// time and that of the servers it started and waited for set apart). A broken bound on a quiet
/// machine fails at once (that is the bench's error); one broken while the machine stalled or
/// was busy is measured again, up to `ATTEMPTS` times, and the test fails when every attempt
/// was disturbed and broke a bound, naming each. (Tests whose bounds are the bench's own
/// wall-clock error widen them by [`stall_allowance`] first, so a stalled attempt can hold them
/// too.)
pub async fn until_quiet<F, Fut>(mut attempt: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Attempt>,
{
    use infergate_model::selftest::{Attempts, Next, cpu_ticks};
    let mut attempts = Attempts::default();
    let mut n = 0;
    loop {
        n += 1;
        let before = cpu_ticks();
        let a = attempt().await;
        let (next, line) = attempts.judge(n, &a, before, cpu_ticks());
        eprintln!("{line}");
        match next {
            Next::Held => return,
            Next::Again => {}
            Next::Failed(m) | Next::Stalled(m) => panic!("{m}"),
        }
    }
}
