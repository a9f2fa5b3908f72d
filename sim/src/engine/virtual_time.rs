//! The engine in virtual time: a discrete-event run with no sleeping. Events are arrivals,
//! client disconnects and step ends; between them time jumps. Deterministic: the same spec and
//! load give the same records, bit for bit.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::Serialize;

use super::stats::EngineStats;
use super::{
    Engine, EngineRequest, EngineSpec, Finish, Gauges, Nanos, Prompt, Rejection, ReqKey,
    nanos_to_secs, secs_to_nanos,
};

/// A request of a simulated load.
#[derive(Clone, Debug, PartialEq)]
pub struct SimRequest {
    /// Arrival, seconds from the start (open loop; a closed loop sends each request when a
    /// worker becomes free and ignores it).
    pub at: f64,
    pub prompt: Prompt,
    pub max_tokens: u32,
    /// Where generation stops by itself; `None`: at max_tokens (as with `ignore_eos`).
    pub output_len: Option<u32>,
    /// Lower = more urgent (`priority` policy).
    pub priority: i64,
    /// The client disconnects this many seconds after the request arrives.
    pub cancel_after: Option<f64>,
    /// The client disconnects once it has received this many tokens ([`CLIENT_REACTION_NS`]
    /// after the step that delivered the last of them ended), as the bench's
    /// `cancel.after_tokens` does.
    pub cancel_after_tokens: Option<u32>,
}

/// How long after a token arrives a client that closes on it is gone: the step that started
/// meanwhile runs to its end for it.
pub const CLIENT_REACTION_NS: Nanos = 1_000;

impl SimRequest {
    /// A request with a prompt of unique tokens.
    pub fn new(at: f64, prompt_len: u32, max_tokens: u32) -> SimRequest {
        SimRequest {
            at,
            prompt: Prompt::unique(prompt_len),
            max_tokens,
            output_len: None,
            priority: 0,
            cancel_after: None,
            cancel_after_tokens: None,
        }
    }

    /// The first `prefix_len` prompt tokens are those of every prompt in `group`.
    pub fn shared_prefix(mut self, group: u64, prefix_len: u32) -> SimRequest {
        let len = self.prompt.len();
        self.prompt =
            Prompt::Synthetic { len, prefix_group: group, prefix_len: prefix_len.min(len) };
        self
    }

    pub fn prompt(mut self, prompt: Prompt) -> SimRequest {
        self.prompt = prompt;
        self
    }

    pub fn output_len(mut self, n: u32) -> SimRequest {
        self.output_len = Some(n);
        self
    }

    pub fn priority(mut self, p: i64) -> SimRequest {
        self.priority = p;
        self
    }

    pub fn cancel_after(mut self, seconds: f64) -> SimRequest {
        self.cancel_after = Some(seconds);
        self
    }

    pub fn cancel_after_tokens(mut self, n: u32) -> SimRequest {
        self.cancel_after_tokens = Some(n);
        self
    }
}

/// How requests reach the engine.
#[derive(Clone, Debug, PartialEq)]
pub enum Load {
    /// Each request arrives at its `at`.
    Open(Vec<SimRequest>),
    /// `concurrency` clients, each sending its next request (in list order) when the previous
    /// one ends (finished, cancelled or refused). All start at time 0.
    Closed { concurrency: u32, requests: Vec<SimRequest> },
}

/// How a simulated request ended.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SimOutcome {
    Finished(#[serde(serialize_with = "ser_finish")] Finish),
    /// The client disconnected before the end.
    Cancelled,
    /// The engine refused it.
    Rejected {
        status: u16,
        message: String,
    },
    /// The engine failed it after admission (its batch ran out of memory).
    Failed {
        status: u16,
        message: String,
    },
    /// Still waiting or running when the run stopped.
    Unfinished,
}

fn ser_finish<S: serde::Serializer>(f: &Finish, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(f.as_str())
}

/// One request's timeline, in seconds of virtual time.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimRecord {
    /// Index of the request in the load.
    pub id: u64,
    pub arrival: f64,
    /// Start of the first step that scheduled it.
    pub scheduled: Option<f64>,
    /// When its first token reached the client.
    pub first_token: Option<f64>,
    /// When its last delivered token reached the client.
    pub last_token: Option<f64>,
    /// Longest gap between two consecutive delivered tokens (the worst stall it saw).
    pub max_gap: Option<f64>,
    /// When it ended (last token, disconnect, refusal or failure).
    pub end: Option<f64>,
    pub prompt_tokens: u32,
    /// Output tokens the engine generated.
    pub output_tokens: u32,
    /// Output tokens delivered before any disconnect.
    pub delivered_tokens: u32,
    /// Prompt tokens served from the prefix cache at the first admission.
    pub cached_tokens: u32,
    pub preemptions: u32,
    pub outcome: SimOutcome,
}

impl SimRecord {
    pub fn is_finished(&self) -> bool {
        matches!(self.outcome, SimOutcome::Finished(_))
    }

    /// Time to first token, seconds.
    pub fn ttft(&self) -> Option<f64> {
        Some(self.first_token? - self.arrival)
    }

    /// Arrival to first scheduled step, seconds.
    pub fn queue_time(&self) -> Option<f64> {
        Some(self.scheduled? - self.arrival)
    }

    /// Arrival to last token, seconds (finished requests).
    pub fn e2e(&self) -> Option<f64> {
        if !self.is_finished() {
            return None;
        }
        Some(self.last_token? - self.arrival)
    }

    /// Time per output token after the first: (last - first) / (delivered - 1).
    pub fn tpot(&self) -> Option<f64> {
        if self.delivered_tokens < 2 {
            return None;
        }
        Some((self.last_token? - self.first_token?) / (self.delivered_tokens - 1) as f64)
    }
}

/// Result of a virtual-time run.
#[derive(Clone, Debug)]
pub struct SimReport {
    /// In the order of the load's requests.
    pub records: Vec<SimRecord>,
    pub stats: EngineStats,
    /// Engine state at the end.
    pub gauges: Gauges,
    /// Virtual time when the last step ended, seconds.
    pub duration: f64,
}

impl SimReport {
    pub fn finished(&self) -> impl Iterator<Item = &SimRecord> {
        self.records.iter().filter(|r| r.is_finished())
    }

    /// Output tokens of finished requests per second of virtual time.
    pub fn output_tokens_per_s(&self) -> f64 {
        if self.duration <= 0.0 {
            return 0.0;
        }
        self.finished().map(|r| r.delivered_tokens as f64).sum::<f64>() / self.duration
    }

    /// Modelled GPU busy share: forward time over step time.
    pub fn gpu_utilisation(&self) -> Option<f64> {
        (self.stats.step_ns > 0).then(|| self.stats.forward_ns as f64 / self.stats.step_ns as f64)
    }
}

#[derive(Clone, Debug, Default)]
struct Track {
    key: Option<ReqKey>,
    cancel_at: Option<Nanos>,
    done: bool,
}

/// A virtual-time run in progress (use [`simulate`] for a whole run at once).
#[derive(Debug)]
pub struct Simulation {
    engine: Engine,
    requests: Vec<SimRequest>,
    records: Vec<SimRecord>,
    track: Vec<Track>,
    slot_to_req: Vec<u32>,
    arrivals: BinaryHeap<Reverse<(Nanos, u32)>>,
    cancels: BinaryHeap<Reverse<(Nanos, u32)>>,
    /// Closed loop: the next request to send when a client becomes free.
    closed_next: Option<usize>,
    now: Nanos,
    wasted: u32,
    /// Compute requests whose client went away to their end (`sim.on_cancel = "ignore"`).
    ignore_cancels: bool,
}

impl Simulation {
    pub fn new(spec: &EngineSpec, load: Load) -> Simulation {
        Simulation::with_engine(Engine::new(spec), load)
    }

    /// Run a load on a given engine (e.g. one with another batching strategy).
    pub fn with_engine(engine: Engine, load: Load) -> Simulation {
        let (requests, closed) = match load {
            Load::Open(r) => (r, None),
            Load::Closed { concurrency, requests } => (requests, Some(concurrency.max(1) as usize)),
        };
        let records = requests
            .iter()
            .enumerate()
            .map(|(i, r)| SimRecord {
                id: i as u64,
                arrival: r.at,
                scheduled: None,
                first_token: None,
                last_token: None,
                max_gap: None,
                end: None,
                prompt_tokens: r.prompt.len(),
                output_tokens: 0,
                delivered_tokens: 0,
                cached_tokens: 0,
                preemptions: 0,
                outcome: SimOutcome::Unfinished,
            })
            .collect();
        let mut arrivals = BinaryHeap::with_capacity(requests.len());
        let closed_next = match closed {
            None => {
                for (i, r) in requests.iter().enumerate() {
                    arrivals.push(Reverse((secs_to_nanos(r.at), i as u32)));
                }
                None
            }
            Some(c) => {
                let first = c.min(requests.len());
                for i in 0..first {
                    arrivals.push(Reverse((0, i as u32)));
                }
                Some(first)
            }
        };
        Simulation {
            engine,
            track: vec![Track::default(); requests.len()],
            requests,
            records,
            slot_to_req: Vec::new(),
            arrivals,
            cancels: BinaryHeap::new(),
            closed_next,
            now: 0,
            wasted: 0,
            ignore_cancels: false,
        }
    }

    /// An engine that computes requests whose client went away to their end instead of freeing
    /// them at the next step (`sim.on_cancel = "ignore"`): the client still ends at its cancel
    /// time (a closed-loop client sends its next request then), the engine's slot does not.
    pub fn ignoring_cancels(mut self, ignore: bool) -> Simulation {
        self.ignore_cancels = ignore;
        self
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Virtual time, seconds.
    pub fn now(&self) -> f64 {
        nanos_to_secs(self.now)
    }

    pub fn render_metrics(&self, out: &mut String) {
        self.engine.render_metrics(out);
    }

    /// Run until virtual time `t` (seconds) or the end of the load. A step that starts before
    /// `t` runs to its end. Returns whether anything is left to do.
    pub fn run_until(&mut self, t: f64) -> bool {
        let until = if t == f64::INFINITY { Nanos::MAX } else { secs_to_nanos(t) };
        self.advance(until)
    }

    /// Run the whole load.
    pub fn run(mut self) -> SimReport {
        self.advance(Nanos::MAX);
        self.report()
    }

    fn advance(&mut self, until: Nanos) -> bool {
        loop {
            self.admit_due();
            self.cancel_due();
            if self.now >= until {
                return self.pending();
            }
            let step = self.engine.step(self.now);
            let failed = self.collect_failures();
            if let Some(info) = step {
                self.collect(info.start, info.end);
                self.now = info.end;
                continue;
            }
            if failed {
                continue; // closed-loop clients send their next requests now
            }
            let next_arrival = self.arrivals.peek().map(|Reverse((t, _))| *t);
            let next_cancel = self.cancels.peek().map(|Reverse((t, _))| *t);
            let wake = self.engine.wake_at();
            let next = [next_arrival, next_cancel, wake].into_iter().flatten().min();
            match next {
                Some(t) => self.now = t.max(self.now + 1).min(until),
                None => return false,
            }
        }
    }

    fn pending(&self) -> bool {
        !self.arrivals.is_empty() || self.engine.has_work()
    }

    fn admit_due(&mut self) {
        while let Some(&Reverse((t, i))) = self.arrivals.peek() {
            if t > self.now {
                break;
            }
            self.arrivals.pop();
            let i = i as usize;
            let r = &self.requests[i];
            self.records[i].arrival = nanos_to_secs(t);
            let req = EngineRequest {
                id: i as u64,
                label: None,
                prompt: r.prompt.clone(),
                max_tokens: r.max_tokens,
                output_len: r.output_len,
                priority: r.priority,
                arrival: t,
            };
            let cancel_at = r.cancel_after.map(|c| t + secs_to_nanos(c));
            match self.engine.add_request(req) {
                Ok(key) => {
                    let slot = key.0 as usize;
                    if self.slot_to_req.len() <= slot {
                        self.slot_to_req.resize(slot + 1, u32::MAX);
                    }
                    self.slot_to_req[slot] = i as u32;
                    self.track[i].key = Some(key);
                    if let Some(c) = cancel_at {
                        self.track[i].cancel_at = Some(c);
                        self.cancels.push(Reverse((c, i as u32)));
                    }
                }
                Err(Rejection { status, message }) => {
                    self.records[i].outcome = SimOutcome::Rejected { status, message };
                    self.end(i, t);
                }
            }
        }
    }

    fn cancel_due(&mut self) {
        while let Some(&Reverse((t, i))) = self.cancels.peek() {
            if t > self.now {
                break;
            }
            self.cancels.pop();
            let i = i as usize;
            if self.track[i].done {
                continue;
            }
            if let Some(key) = self.track[i].key {
                self.engine.client_gone(key, t);
                if !self.ignore_cancels {
                    self.track[i].key = None;
                    self.engine.abort(key, self.now);
                }
            }
            self.records[i].outcome = SimOutcome::Cancelled;
            self.end(i, t);
        }
    }

    /// A request ended at `t`: its closed-loop client sends the next one.
    fn end(&mut self, i: usize, t: Nanos) {
        self.track[i].done = true;
        self.records[i].end = Some(nanos_to_secs(t));
        if let Some(next) = self.closed_next {
            if next < self.requests.len() {
                self.arrivals.push(Reverse((t, next as u32)));
                self.closed_next = Some(next + 1);
            }
        }
    }

    /// Requests the engine failed in the last decision end now. Returns whether there were any.
    fn collect_failures(&mut self) -> bool {
        let failed: Vec<(usize, u16, String)> = self
            .engine
            .failed()
            .iter()
            .map(|f| (self.slot_to_req[f.key.0 as usize] as usize, f.status, f.message.to_string()))
            .collect();
        let any = !failed.is_empty();
        for (i, status, message) in failed {
            self.track[i].key = None;
            self.records[i].outcome = SimOutcome::Failed { status, message };
            self.end(i, self.now);
        }
        any
    }

    /// The decisions recorded since the last call (see [`Engine::record_decisions`]).
    pub fn take_decisions(&mut self) -> Vec<super::Decision> {
        self.engine.take_decisions()
    }

    /// Record every scheduling decision (read them with [`Simulation::take_decisions`]).
    pub fn record_decisions(&mut self, on: bool) {
        self.engine.record_decisions(on);
    }

    fn collect(&mut self, start: Nanos, end: Nanos) {
        let start_s = nanos_to_secs(start);
        for s in self.engine.newly_scheduled() {
            let i = self.slot_to_req[s.key.0 as usize] as usize;
            self.records[i].scheduled = Some(start_s);
        }
        let end_s = nanos_to_secs(end);
        let mut ended: Vec<(usize, Nanos)> = Vec::new();
        for o in self.engine.outputs() {
            let i = self.slot_to_req[o.key.0 as usize] as usize;
            let track = &mut self.track[i];
            let rec = &mut self.records[i];
            let req = self.engine.request(o.key);
            rec.output_tokens += o.tokens;
            rec.preemptions = req.preemptions;
            rec.cached_tokens = req.cached_tokens;
            let gone = track.cancel_at.filter(|&c| end > c);
            if gone.is_some() {
                self.wasted += o.tokens;
            } else {
                match rec.last_token {
                    None => rec.first_token = Some(end_s),
                    Some(last) => {
                        let gap = end_s - last;
                        rec.max_gap = Some(rec.max_gap.map_or(gap, |g| g.max(gap)));
                    }
                }
                rec.delivered_tokens += o.tokens;
                rec.last_token = Some(end_s);
                let closes_at = self.requests[i].cancel_after_tokens;
                if closes_at.is_some_and(|n| rec.delivered_tokens >= n)
                    && track.cancel_at.is_none()
                    && o.finished.is_none()
                {
                    let c = end + CLIENT_REACTION_NS;
                    track.cancel_at = Some(c);
                    self.cancels.push(Reverse((c, i as u32)));
                }
            }
            if let Some(f) = o.finished {
                track.key = None;
                match gone {
                    // An ignored cancel ended its client at the cancel time already.
                    Some(_) if track.done => {}
                    Some(c) => {
                        rec.outcome = SimOutcome::Cancelled;
                        ended.push((i, c));
                    }
                    None => {
                        rec.outcome = SimOutcome::Finished(f);
                        ended.push((i, end));
                    }
                }
            }
        }
        for (i, t) in ended {
            self.end(i, t);
        }
        if self.wasted > 0 {
            self.engine.record_undelivered(std::mem::take(&mut self.wasted));
        }
    }

    /// The records and counters so far.
    pub fn report(&self) -> SimReport {
        let mut records = self.records.clone();
        for r in &mut records {
            if matches!(r.outcome, SimOutcome::Unfinished) {
                r.end = None;
            }
        }
        SimReport {
            records,
            stats: self.engine.stats().clone(),
            gauges: self.engine.gauges(),
            duration: nanos_to_secs(self.engine.now()),
        }
    }
}

/// Run a load through an engine built from `spec`, in virtual time.
pub fn simulate(spec: &EngineSpec, load: Load) -> SimReport {
    Simulation::new(spec, load).run()
}
