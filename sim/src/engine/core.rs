//! Engine state shared by every batching strategy: requests, the waiting queue, the running set
//! and the KV block pool, with the primitives a [`Scheduler`](super::Scheduler) composes
//! (allocate, admit, preempt).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;

use infergate_model::config::SchedulerPolicy;

use super::kv::{BlockPool, block_hash, mix};
use super::stats::EngineStats;
use super::{Nanos, Prompt, ReqKey};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Waiting,
    Running,
    /// Finished or aborted; the slot is free (or about to be).
    Done,
}

/// One request inside the engine.
#[derive(Debug)]
pub struct Req {
    pub id: u64,
    /// The client's name for the request (its `x-request-id`), for logs.
    pub label: Option<Arc<str>>,
    pub prompt: Prompt,
    pub prompt_len: u32,
    /// Output tokens it will produce (natural length capped by max_tokens).
    pub target: u32,
    pub max_tokens: u32,
    pub priority: i64,
    pub arrival: Nanos,
    /// Order of arrival in the engine (tie-break).
    pub seq: u64,
    pub status: Status,
    /// Tokens whose KV is in the cache.
    pub computed: u32,
    /// Output tokens sampled so far.
    pub generated: u32,
    /// Most tokens ever computed (to count recomputation after a preemption).
    pub high_water: u32,
    pub blocks: Vec<u32>,
    /// Hashes of the full blocks of prompt + output, computed on demand.
    pub hashes: Vec<u64>,
    pub first_scheduled: Option<Nanos>,
    pub first_token: Option<Nanos>,
    pub last_token: Nanos,
    pub preemptions: u32,
    /// Prompt tokens found in the prefix cache at the first admission.
    pub cached_tokens: u32,
    /// Tokens scheduled in the step being built.
    pub scheduled: u32,
    /// When its client went away (it is then freed at the next step, or computed to its end by
    /// an engine that ignores cancels).
    pub gone_at: Option<Nanos>,
}

impl Req {
    /// Prompt plus generated tokens: what must be in the KV cache before the next sample.
    #[inline]
    pub(crate) fn num_tokens(&self) -> u32 {
        self.prompt_len + self.generated
    }

    /// Tokens to compute before the next token can be sampled.
    #[inline]
    pub(crate) fn tokens_needed(&self) -> u32 {
        self.num_tokens() - self.computed
    }

    /// Token id at a position: the prompt's, then synthetic output ids unique to the request.
    #[inline]
    fn token_at(&self, pos: u32) -> u32 {
        if pos < self.prompt_len {
            match &self.prompt {
                Prompt::Tokens(t) => t[pos as usize],
                Prompt::Synthetic { prefix_group, prefix_len, .. } if pos < *prefix_len => {
                    mix(prefix_group.wrapping_mul(0x1000_0000_01b3) ^ pos as u64) as u32
                }
                Prompt::Synthetic { .. } => mix(self.id ^ (pos as u64) << 32) as u32,
            }
        } else {
            mix(!self.id ^ (pos as u64) << 32) as u32
        }
    }

    /// Make sure the hashes of the first `n` full blocks are known.
    fn ensure_hashes(&mut self, n: usize, block_size: u32) {
        while self.hashes.len() < n {
            let i = self.hashes.len() as u32;
            let parent = self.hashes.last().copied().unwrap_or(0);
            let start = i * block_size;
            let h = block_hash(parent, (start..start + block_size).map(|p| self.token_at(p)));
            self.hashes.push(h);
        }
    }
}

/// An entry of the priority queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrioEntry {
    priority: i64,
    arrival: Nanos,
    seq: u64,
    key: ReqKey,
}

impl Ord for PrioEntry {
    /// Max-heap order: the most urgent (lowest priority value, then earliest) is greatest.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.priority, o.arrival, o.seq).cmp(&(self.priority, self.arrival, self.seq))
    }
}

impl PartialOrd for PrioEntry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// The waiting queue: arrival order (fcfs; preempted requests go back to the front) or
/// (priority, arrival) order.
#[derive(Debug)]
pub enum WaitQueue {
    Fcfs(VecDeque<ReqKey>),
    Priority(BinaryHeap<PrioEntry>),
}

impl WaitQueue {
    pub fn new(policy: SchedulerPolicy) -> WaitQueue {
        match policy {
            SchedulerPolicy::Fcfs => WaitQueue::Fcfs(VecDeque::new()),
            SchedulerPolicy::Priority => WaitQueue::Priority(BinaryHeap::new()),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            WaitQueue::Fcfs(q) => q.len(),
            WaitQueue::Priority(h) => h.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn peek(&self) -> Option<ReqKey> {
        match self {
            WaitQueue::Fcfs(q) => q.front().copied(),
            WaitQueue::Priority(h) => h.peek().map(|e| e.key),
        }
    }

    /// The first `n` requests in queue order (the order they would be admitted in).
    pub fn first(&self, n: usize) -> Vec<ReqKey> {
        match self {
            WaitQueue::Fcfs(q) => q.iter().take(n).copied().collect(),
            WaitQueue::Priority(h) => {
                let mut h = h.clone();
                std::iter::from_fn(|| h.pop().map(|e| e.key)).take(n).collect()
            }
        }
    }

    /// Every waiting request, in no particular order.
    pub fn keys(&self) -> Vec<ReqKey> {
        match self {
            WaitQueue::Fcfs(q) => q.iter().copied().collect(),
            WaitQueue::Priority(h) => h.iter().map(|e| e.key).collect(),
        }
    }

    fn pop(&mut self) -> Option<ReqKey> {
        match self {
            WaitQueue::Fcfs(q) => q.pop_front(),
            WaitQueue::Priority(h) => h.pop().map(|e| e.key),
        }
    }

    fn push(&mut self, r: &Req, key: ReqKey, front: bool) {
        match self {
            WaitQueue::Fcfs(q) if front => q.push_front(key),
            WaitQueue::Fcfs(q) => q.push_back(key),
            WaitQueue::Priority(h) => {
                h.push(PrioEntry { priority: r.priority, arrival: r.arrival, seq: r.seq, key })
            }
        }
    }

    fn remove(&mut self, key: ReqKey) {
        match self {
            WaitQueue::Fcfs(q) => q.retain(|k| *k != key),
            WaitQueue::Priority(h) => h.retain(|e| e.key != key),
        }
    }
}

/// Limits a scheduler works within (from the engine spec).
#[derive(Clone, Debug)]
pub struct Limits {
    pub max_num_seqs: u32,
    pub max_num_batched_tokens: u32,
    pub max_model_len: u32,
    pub block_size: u32,
    pub chunked_prefill: bool,
    pub prefix_caching: bool,
    pub policy: SchedulerPolicy,
}

/// A request scheduled for the first time in the current step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scheduled {
    pub key: ReqKey,
    pub id: u64,
    /// First scheduled step start - arrival.
    pub queue_ns: Nanos,
}

/// A request the engine failed (the server answers with `status`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub key: ReqKey,
    pub id: u64,
    pub status: u16,
    pub message: Arc<str>,
}

/// Engine state and the primitives schedulers use.
#[derive(Debug)]
pub struct Core {
    pub limits: Limits,
    reqs: Vec<Req>,
    free_slots: Vec<u32>,
    /// Slots of requests that finished in the last step, released at the next one (so a driver
    /// can still map the step's outputs to its own per-request state).
    pending_free: Vec<u32>,
    pub waiting: WaitQueue,
    pub running: Vec<ReqKey>,
    pub pool: BlockPool,
    pub stats: EngineStats,
    pub(super) newly_scheduled: Vec<Scheduled>,
    /// Requests admitted to the running set in the current step, with the tokens each computes.
    pub(super) admitted: Vec<(ReqKey, u32)>,
    /// Requests preempted in the current step (engine ids).
    pub(super) preempted: Vec<u64>,
    /// Requests failed in the current step.
    pub(super) failed: Vec<Failure>,
    next_seq: u64,
}

impl Core {
    pub fn new(limits: Limits, num_blocks: u32) -> Core {
        Core {
            waiting: WaitQueue::new(limits.policy),
            limits,
            reqs: Vec::new(),
            free_slots: Vec::new(),
            pending_free: Vec::new(),
            running: Vec::new(),
            pool: BlockPool::new(num_blocks),
            stats: EngineStats::default(),
            newly_scheduled: Vec::new(),
            admitted: Vec::new(),
            preempted: Vec::new(),
            failed: Vec::new(),
            next_seq: 0,
        }
    }

    #[inline]
    pub fn req(&self, key: ReqKey) -> &Req {
        &self.reqs[key.0 as usize]
    }

    #[inline]
    pub(crate) fn req_mut(&mut self, key: ReqKey) -> &mut Req {
        &mut self.reqs[key.0 as usize]
    }

    /// The request of a slot, None for a slot never used.
    pub(crate) fn try_req(&self, key: ReqKey) -> Option<&Req> {
        self.reqs.get(key.0 as usize)
    }

    pub(crate) fn try_req_mut(&mut self, key: ReqKey) -> Option<&mut Req> {
        self.reqs.get_mut(key.0 as usize)
    }

    /// A request slot with the given contents, reusing the buffers of a free slot.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn insert(
        &mut self,
        id: u64,
        label: Option<Arc<str>>,
        prompt: Prompt,
        prompt_len: u32,
        target: u32,
        max_tokens: u32,
        priority: i64,
        arrival: Nanos,
    ) -> ReqKey {
        let seq = self.next_seq;
        self.next_seq += 1;
        let fresh = |blocks: Vec<u32>, hashes: Vec<u64>| Req {
            id,
            label,
            prompt,
            prompt_len,
            target,
            max_tokens,
            priority,
            arrival,
            seq,
            status: Status::Waiting,
            computed: 0,
            generated: 0,
            high_water: 0,
            blocks,
            hashes,
            first_scheduled: None,
            first_token: None,
            last_token: 0,
            preemptions: 0,
            cached_tokens: 0,
            gone_at: None,
            scheduled: 0,
        };
        let key = match self.free_slots.pop() {
            Some(slot) => {
                let old = &mut self.reqs[slot as usize];
                let mut blocks = std::mem::take(&mut old.blocks);
                let mut hashes = std::mem::take(&mut old.hashes);
                blocks.clear();
                hashes.clear();
                *old = fresh(blocks, hashes);
                ReqKey(slot)
            }
            None => {
                self.reqs.push(fresh(Vec::new(), Vec::new()));
                ReqKey(self.reqs.len() as u32 - 1)
            }
        };
        let r = &self.reqs[key.0 as usize];
        self.waiting.push(r, key, false);
        key
    }

    /// Release the slots of requests that finished in the previous step.
    pub(super) fn release_finished_slots(&mut self) {
        self.free_slots.append(&mut self.pending_free);
    }

    /// Free a request's blocks, last block first (so the tail of a sequence is evicted before
    /// its shared head).
    fn free_blocks(&mut self, key: ReqKey) {
        let r = &mut self.reqs[key.0 as usize];
        for &b in r.blocks.iter().rev() {
            self.pool.release(b);
        }
        r.blocks.clear();
    }

    /// End a request (finished or aborted): free its blocks and, when `defer`, keep its slot
    /// until the next step.
    pub(super) fn retire(&mut self, key: ReqKey, defer: bool) {
        self.free_blocks(key);
        let r = &mut self.reqs[key.0 as usize];
        r.status = Status::Done;
        if defer {
            self.pending_free.push(key.0);
        } else {
            self.free_slots.push(key.0);
        }
    }

    /// The waste of a request whose client went away, as it is freed at `at` (aborted, or at its
    /// end): the time it kept its slot after the client left, and its prefill when its first
    /// token was sampled after that (or never). Nothing for a request whose client stayed.
    pub(super) fn count_abandoned(&mut self, key: ReqKey, at: Nanos) {
        let r = &self.reqs[key.0 as usize];
        let Some(gone) = r.gone_at else { return };
        let prefill_wasted = r.first_token.is_none_or(|t| t > gone);
        let prefilled = r.computed.min(r.prompt_len).saturating_sub(r.cached_tokens);
        self.stats.abandoned_hold_ns += at.saturating_sub(gone);
        if prefill_wasted {
            self.stats.wasted_prefill_tokens += prefilled as u64;
        }
    }

    /// Remove a request wherever it is (client disconnect) at `now`, counting its waste
    /// ([`Core::count_abandoned`]). Returns false for an unknown or finished request.
    pub(super) fn abort(&mut self, key: ReqKey, now: Nanos) -> bool {
        if self.detach(key).is_none() {
            return false;
        }
        self.count_abandoned(key, now);
        self.retire(key, false);
        true
    }

    /// Take a waiting or running request out of the queue or the running set: its id, or None
    /// for an unknown or ended request.
    fn detach(&mut self, key: ReqKey) -> Option<u64> {
        let r = self.reqs.get(key.0 as usize)?;
        let id = r.id;
        match r.status {
            Status::Done => return None,
            Status::Waiting => self.waiting.remove(key),
            Status::Running => {
                if let Some(i) = self.running.iter().position(|k| *k == key) {
                    self.running.remove(i);
                }
            }
        }
        Some(id)
    }

    /// Fail a waiting or running request (e.g. its batch ran out of memory): it leaves the
    /// queue or the running set, its blocks are freed, and the driver reports the error. Its slot
    /// stays readable until the next step. False for an unknown or ended request.
    pub fn fail(&mut self, key: ReqKey, status: u16, message: Arc<str>) -> bool {
        let Some(id) = self.detach(key) else { return false };
        self.retire(key, true);
        self.stats.failed_requests += 1;
        self.failed.push(Failure { key, id, status, message });
        true
    }

    /// Clear the per-step lists (admitted, preempted, failed, newly scheduled).
    pub(super) fn begin_step(&mut self) {
        self.newly_scheduled.clear();
        self.admitted.clear();
        self.preempted.clear();
        self.failed.clear();
    }

    /// Allocate the blocks a running request needs to hold `n` more tokens. False (and nothing
    /// allocated) when the pool is short.
    pub(crate) fn try_allocate(&mut self, key: ReqKey, n: u32) -> bool {
        let bs = self.limits.block_size;
        let r = &self.reqs[key.0 as usize];
        let need = (r.computed + n).div_ceil(bs) as usize;
        let missing = need.saturating_sub(r.blocks.len()) as u32;
        if missing > self.pool.num_free() {
            return false;
        }
        for _ in 0..missing {
            let b = self.pool.allocate();
            self.reqs[key.0 as usize].blocks.push(b);
        }
        true
    }

    /// Prefix-cache lookup for a waiting request that holds no KV: the cached blocks of its
    /// longest cached prefix go into `hits` (at most num_tokens - 1 tokens, so at least one token
    /// is computed). Returns the tokens they cover.
    pub(crate) fn prefix_hit(&mut self, key: ReqKey, hits: &mut Vec<u32>) -> u32 {
        hits.clear();
        let bs = self.limits.block_size;
        let r = &mut self.reqs[key.0 as usize];
        if !self.limits.prefix_caching || r.computed > 0 {
            return 0;
        }
        let max_blocks = ((r.num_tokens() - 1) / bs) as usize;
        r.ensure_hashes(max_blocks, bs);
        for &h in &r.hashes[..max_blocks] {
            match self.pool.lookup(h) {
                Some(b) => hits.push(b),
                None => break,
            }
        }
        hits.len() as u32 * bs
    }

    /// Move the head of the waiting queue to the running set with the cached blocks `hits` and
    /// room for `n` tokens to compute. False (nothing changed) when the pool is short.
    pub(crate) fn try_admit(&mut self, key: ReqKey, hits: &[u32], n: u32, now: Nanos) -> bool {
        debug_assert_eq!(self.waiting.peek(), Some(key));
        let bs = self.limits.block_size;
        let hit_tokens = hits.len() as u32 * bs;
        let evictable = hits.iter().filter(|&&b| self.pool.ref_count(b) == 0).count() as u32;
        let need = (hit_tokens + n).div_ceil(bs) - hits.len() as u32;
        if need + evictable > self.pool.num_free() {
            return false;
        }
        self.waiting.pop();
        let r = &mut self.reqs[key.0 as usize];
        for &b in hits {
            self.pool.touch(b);
            r.blocks.push(b);
        }
        for _ in 0..need {
            let b = self.pool.allocate();
            r.blocks.push(b);
        }
        if self.limits.prefix_caching {
            self.stats.prefix_cache_queries += r.num_tokens() as u64;
            self.stats.prefix_cache_hits += hit_tokens as u64;
        }
        r.computed = hit_tokens;
        r.status = Status::Running;
        if r.first_scheduled.is_none() {
            r.first_scheduled = Some(now);
            r.cached_tokens = hit_tokens.min(r.prompt_len);
            let queue_ns = now.saturating_sub(r.arrival);
            self.stats.queue.observe(queue_ns as f64 / 1e9);
            self.newly_scheduled.push(Scheduled { key, id: r.id, queue_ns });
        }
        self.admitted.push((key, n));
        self.running.push(key);
        true
    }

    /// The running request to preempt first: the newest (fcfs) or the least urgent (priority).
    pub(crate) fn preemption_victim(&self) -> Option<ReqKey> {
        match self.limits.policy {
            SchedulerPolicy::Fcfs => self.running.last().copied(),
            SchedulerPolicy::Priority => self.running.iter().copied().max_by_key(|&k| {
                let r = self.req(k);
                (r.priority, r.arrival, r.seq)
            }),
        }
    }

    /// Preempt a running request (recompute mode): its KV is dropped, it goes back to the
    /// waiting queue (at the front under fcfs) and is recomputed when admitted again.
    pub(crate) fn preempt(&mut self, key: ReqKey) {
        if let Some(i) = self.running.iter().position(|k| *k == key) {
            self.running.remove(i);
        }
        self.free_blocks(key);
        let r = &mut self.reqs[key.0 as usize];
        r.computed = 0;
        r.scheduled = 0;
        r.status = Status::Waiting;
        r.preemptions += 1;
        self.stats.preemptions += 1;
        self.preempted.push(r.id);
        let r = &self.reqs[key.0 as usize];
        self.waiting.push(r, key, true);
    }

    /// Make the full blocks a request completed this step findable by prefix caching.
    pub(super) fn register_full_blocks(&mut self, key: ReqKey, before: u32, after: u32) {
        let bs = self.limits.block_size;
        let (from, to) = ((before / bs) as usize, (after / bs) as usize);
        if from == to {
            return;
        }
        let r = &mut self.reqs[key.0 as usize];
        r.ensure_hashes(to, bs);
        for i in from..to {
            self.pool.register(r.blocks[i], r.hashes[i]);
        }
    }

    /// Remove the requests that ended in this step from the running set.
    pub(super) fn drop_ended_from_running(&mut self) {
        let reqs = &self.reqs;
        self.running.retain(|k| reqs[k.0 as usize].status == Status::Running);
    }

    /// Tokens held in the KV cache (a shared block counted once).
    pub(crate) fn kv_tokens_held(&self) -> u64 {
        let held: u64 = self.running.iter().map(|&k| self.req(k).computed as u64).sum();
        held.saturating_sub(self.pool.shared_refs() * self.limits.block_size as u64)
    }

    /// Share of allocated KV slots not holding a token.
    pub fn kv_fragmentation(&self) -> f64 {
        let slots = self.pool.num_used() as u64 * self.limits.block_size as u64;
        if slots == 0 {
            return 0.0;
        }
        1.0 - self.kv_tokens_held() as f64 / slots as f64
    }

    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }
}
