//! Timing mode: every request is answered on an exact, documented schedule, which makes the
//! simulator the bench's known-answer oracle.
//!
//! Tokens leave in chunks of `tokens_per_chunk` (the last chunk may be smaller). Chunk `j`
//! (0-based) is sent at `arrival + ttft + (gap_1 + ... + gap_j)`, where each chunk's gap is the
//! sum of one per-token gap for each token it carries: `itl_ms` each, or drawn uniformly from `[itl - jitter, itl + jitter]`
//! (seeded per request). So the first content event arrives exactly `ttft` after the request, and
//! consecutive events are `k * itl` apart. A cold start (`cold_s`, `cold_factor`) gives the
//! requests that arrive within `cold_s` of the first one `cold_factor` times the TTFT.
//!
//! The schedule is kept by a dedicated timer thread (sub-millisecond precision) rather than the
//! async runtime's 1 ms timer wheel, so the oracle's own error stays far below the bench's
//! tolerances.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant as StdInstant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::mpsc;

use super::backend::{Backend, FinishReason, GenEvent, GenRequest};
use infergate_model::config::TimingConfig;

pub struct TimingBackend {
    cfg: TimingConfig,
    stats: Arc<TimingStats>,
    timer: Arc<Timer>,
    /// When the first request arrived: the cold start (`cold_s`) counts from it.
    first_arrival: std::sync::OnceLock<StdInstant>,
}

/// One request's remaining schedule.
struct Pending {
    chunks: std::iter::Peekable<Chunks>,
    reason: FinishReason,
    tx: mpsc::UnboundedSender<GenEvent>,
    stats: Arc<TimingStats>,
}

/// A heap of (due time, request) served by one thread that sleeps until the earliest deadline.
struct Timer {
    heap: Mutex<TimerState>,
    wake: Condvar,
}

struct TimerState {
    heap: BinaryHeap<Reverse<(StdInstant, u64)>>,
    pending: std::collections::HashMap<u64, Pending>,
    shutdown: bool,
}

impl Timer {
    fn start() -> Arc<Timer> {
        let timer = Arc::new(Timer {
            heap: Mutex::new(TimerState {
                heap: BinaryHeap::new(),
                pending: Default::default(),
                shutdown: false,
            }),
            wake: Condvar::new(),
        });
        let t = Arc::downgrade(&timer);
        std::thread::Builder::new()
            .name("sim-timing".into())
            .spawn(move || Timer::run(t))
            .expect("spawn the simulator's timer thread");
        timer
    }

    fn add(&self, id: u64, mut p: Pending) {
        let Some(first) = p.chunks.peek().map(|c| c.0) else {
            let _ = p.tx.send(GenEvent::Finished { reason: p.reason });
            p.stats.running.fetch_sub(1, Ordering::Relaxed);
            return;
        };
        let mut st = self.heap.lock().unwrap();
        st.heap.push(Reverse((first, id)));
        st.pending.insert(id, p);
        drop(st);
        self.wake.notify_one();
    }

    fn run(weak: std::sync::Weak<Timer>) {
        loop {
            let Some(timer) = weak.upgrade() else { return };
            let mut st = timer.heap.lock().unwrap();
            if st.shutdown {
                return;
            }
            let now = StdInstant::now();
            // Send everything that is due.
            while let Some(Reverse((due, id))) = st.heap.peek().copied() {
                if due > now {
                    break;
                }
                st.heap.pop();
                let Some(mut p) = st.pending.remove(&id) else { continue };
                let (_, count) = p.chunks.next().expect("a due entry has a chunk");
                if p.tx.send(GenEvent::Tokens { count, due: Some(due) }).is_err() {
                    p.stats.running.fetch_sub(1, Ordering::Relaxed); // the client went away
                    continue;
                }
                p.stats.generated.fetch_add(count as u64, Ordering::Relaxed);
                match p.chunks.peek().map(|c| c.0) {
                    Some(next) => {
                        st.heap.push(Reverse((next, id)));
                        st.pending.insert(id, p);
                    }
                    None => {
                        let _ = p.tx.send(GenEvent::Finished { reason: p.reason });
                        p.stats.running.fetch_sub(1, Ordering::Relaxed);
                    }
                }
            }
            let wait = st.heap.peek().map(|Reverse((due, _))| due.saturating_duration_since(now));
            // Wake at least every 100 ms to notice the backend being dropped.
            let wait = wait.unwrap_or(Duration::from_millis(100)).min(Duration::from_millis(100));
            let _ = timer.wake.wait_timeout(st, wait).unwrap();
        }
    }
}

impl Drop for TimingBackend {
    fn drop(&mut self) {
        self.timer.heap.lock().unwrap().shutdown = true;
        self.timer.wake.notify_one();
    }
}

#[derive(Default)]
struct TimingStats {
    running: AtomicU64,
    requests: AtomicU64,
    generated: AtomicU64,
    prompt: AtomicU64,
}

impl TimingBackend {
    pub fn new(cfg: TimingConfig) -> TimingBackend {
        TimingBackend {
            cfg,
            stats: Arc::default(),
            timer: Timer::start(),
            first_arrival: std::sync::OnceLock::new(),
        }
    }

    /// The TTFT of a request arriving at `arrival`: `ttft_ms`, times `cold_factor` while the
    /// cold start lasts (`cold_s` from the first request's arrival).
    fn ttft_at(&self, arrival: StdInstant) -> f64 {
        let first = *self.first_arrival.get_or_init(|| arrival);
        let cold = arrival.saturating_duration_since(first).as_secs_f64() < self.cfg.cold_s;
        if cold { self.cfg.ttft_ms * self.cfg.cold_factor } else { self.cfg.ttft_ms }
    }

    /// When each chunk of a request is sent (offsets from arrival) and how many tokens it holds.
    pub fn chunk_schedule(cfg: &TimingConfig, req_id: u64, tokens: u32) -> Vec<(Duration, u32)> {
        ChunkSchedule::new(cfg, req_id, tokens).collect()
    }
}

/// A request's chunks, each computed when the one before it is sent: (offset from arrival,
/// tokens). Nothing is planned per token up front, so a long output costs memory only for the
/// chunk that is due.
pub(crate) struct ChunkSchedule {
    rng: StdRng,
    itl_ms: f64,
    jitter_ms: f64,
    per_chunk: u32,
    /// The offset of the last chunk, in ms.
    t: f64,
    left: u32,
    started: bool,
}

impl ChunkSchedule {
    pub fn new(cfg: &TimingConfig, req_id: u64, tokens: u32) -> ChunkSchedule {
        ChunkSchedule::with_ttft(cfg, req_id, tokens, cfg.ttft_ms)
    }

    /// The schedule of a request whose first chunk leaves `ttft_ms` after its arrival.
    pub(crate) fn with_ttft(
        cfg: &TimingConfig,
        req_id: u64,
        tokens: u32,
        ttft_ms: f64,
    ) -> ChunkSchedule {
        ChunkSchedule {
            rng: StdRng::seed_from_u64(cfg.seed ^ req_id.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            itl_ms: cfg.itl_ms,
            jitter_ms: cfg.jitter_ms,
            per_chunk: cfg.tokens_per_chunk.max(1),
            t: ttft_ms,
            left: tokens,
            started: false,
        }
    }

    /// The gap before one token: `itl_ms`, or drawn from `[itl - jitter, itl + jitter]`.
    fn gap(&mut self) -> f64 {
        if self.jitter_ms > 0.0 {
            self.rng.random_range((self.itl_ms - self.jitter_ms)..=(self.itl_ms + self.jitter_ms))
        } else {
            self.itl_ms
        }
    }
}

impl Iterator for ChunkSchedule {
    type Item = (Duration, u32);

    fn next(&mut self) -> Option<(Duration, u32)> {
        if self.left == 0 {
            return None;
        }
        let n = self.left.min(self.per_chunk);
        if self.started {
            // The chunk's gaps summed first, then added: the documented formula's arithmetic.
            let mut gaps = 0.0;
            for _ in 0..n {
                gaps += self.gap();
            }
            self.t += gaps;
        }
        self.started = true;
        self.left -= n;
        Some((Duration::from_secs_f64(self.t.max(0.0) / 1000.0), n))
    }
}

/// A request's chunks at their instants.
struct Chunks {
    schedule: ChunkSchedule,
    arrival: StdInstant,
}

impl Iterator for Chunks {
    type Item = (StdInstant, u32);

    fn next(&mut self) -> Option<(StdInstant, u32)> {
        self.schedule.next().map(|(at, n)| (self.arrival + at, n))
    }
}

impl Backend for TimingBackend {
    fn reasoning_tokens(&self) -> u32 {
        self.cfg.reasoning_tokens
    }

    fn submit(&self, req: GenRequest) -> mpsc::UnboundedReceiver<GenEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        let len = if req.ignore_eos || req.natural_len.is_some() {
            req.target_len()
        } else {
            self.cfg.output_tokens.map_or(req.max_tokens, |n| n.min(req.max_tokens)).max(1)
        };
        let reason = if len < req.max_tokens { FinishReason::Stop } else { FinishReason::Length };
        let arrival = req.arrival.into_std();
        let schedule = ChunkSchedule::with_ttft(&self.cfg, req.id, len, self.ttft_at(arrival));
        let stats = self.stats.clone();
        stats.requests.fetch_add(1, Ordering::Relaxed);
        stats.prompt.fetch_add(req.prompt.len() as u64, Ordering::Relaxed);
        stats.running.fetch_add(1, Ordering::Relaxed);
        let _ = tx.send(GenEvent::Scheduled { queue: Duration::ZERO });
        let chunks = Chunks { schedule, arrival }.peekable();
        self.timer.add(req.id, Pending { chunks, reason, tx, stats });
        rx
    }

    fn render_metrics(&self, out: &mut String) {
        use std::fmt::Write;
        let s = &self.stats;
        let _ = write!(
            out,
            "# HELP vllm:num_requests_running Requests being generated.\n\
             # TYPE vllm:num_requests_running gauge\n\
             vllm:num_requests_running {}\n\
             # HELP vllm:num_requests_waiting Requests waiting to be scheduled.\n\
             # TYPE vllm:num_requests_waiting gauge\n\
             vllm:num_requests_waiting 0\n\
             # HELP vllm:prompt_tokens_total Prompt tokens processed.\n\
             # TYPE vllm:prompt_tokens_total counter\n\
             vllm:prompt_tokens_total {}\n\
             # HELP vllm:generation_tokens_total Tokens generated.\n\
             # TYPE vllm:generation_tokens_total counter\n\
             vllm:generation_tokens_total {}\n",
            s.running.load(Ordering::Relaxed),
            s.prompt.load(Ordering::Relaxed),
            s.generated.load(Ordering::Relaxed),
        );
    }

    fn describe(&self) -> String {
        format!(
            "timing mode: TTFT {} ms, {} ms/token (jitter {} ms), {} token(s) per chunk",
            self.cfg.ttft_ms, self.cfg.itl_ms, self.cfg.jitter_ms, self.cfg.tokens_per_chunk
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_matches_the_documented_formula() {
        let cfg = TimingConfig {
            ttft_ms: 50.0,
            itl_ms: 10.0,
            tokens_per_chunk: 4,
            ..TimingConfig::default()
        };
        let s = TimingBackend::chunk_schedule(&cfg, 1, 10);
        let ms: Vec<(f64, u32)> =
            s.iter().map(|(d, n)| ((d.as_secs_f64() * 1000.0 * 1e6).round() / 1e6, *n)).collect();
        assert_eq!(ms, vec![(50.0, 4), (90.0, 4), (110.0, 2)]);
        let one = TimingBackend::chunk_schedule(&TimingConfig::default(), 1, 3);
        assert_eq!(one.iter().map(|(d, _)| d.as_millis()).collect::<Vec<_>>(), vec![50, 60, 70]);
    }

    #[test]
    fn a_cold_start_multiplies_the_ttft_of_the_requests_that_arrive_within_it() {
        let cfg = TimingConfig { cold_s: 10.0, cold_factor: 4.0, ..TimingConfig::default() };
        let b = TimingBackend::new(cfg);
        let t0 = StdInstant::now();
        assert_eq!(b.ttft_at(t0 + Duration::from_secs(1)), 200.0, "the first request is cold");
        assert_eq!(b.ttft_at(t0 + Duration::from_millis(10_999)), 200.0);
        assert_eq!(b.ttft_at(t0 + Duration::from_secs(11)), 50.0, "10 s after the first");
        let warm = TimingBackend::new(TimingConfig::default());
        assert_eq!(warm.ttft_at(t0), 50.0, "no cold start by default");
    }

    #[test]
    fn a_huge_output_is_planned_one_chunk_at_a_time() {
        let cfg = TimingConfig { tokens_per_chunk: 1, ..TimingConfig::default() };
        let mut s = ChunkSchedule::new(&cfg, 1, u32::MAX);
        assert_eq!(s.next().map(|c| c.1), Some(1));
        assert_eq!(s.nth(9).map(|c| c.0.as_millis()), Some(50 + 10 * 10));
        assert_eq!(s.left, u32::MAX - 11, "only what was sent was planned");
    }

    #[test]
    fn jitter_stays_in_range_and_is_seeded() {
        let cfg = TimingConfig { jitter_ms: 3.0, ..TimingConfig::default() };
        // One token per chunk: each chunk gap is one token gap.
        let a = TimingBackend::chunk_schedule(&cfg, 5, 50);
        assert_eq!(a, TimingBackend::chunk_schedule(&cfg, 5, 50));
        assert_ne!(a, TimingBackend::chunk_schedule(&cfg, 6, 50));
        for w in a.windows(2) {
            let gap = (w[1].0 - w[0].0).as_secs_f64() * 1000.0;
            assert!((7.0 - 1e-9..=13.0 + 1e-9).contains(&gap), "{gap}");
        }
    }
}
