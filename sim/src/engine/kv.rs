//! The KV cache block pool, with prefix caching.
//!
//! Blocks live in one of two states: in use (reference count > 0, held by running requests) or
//! free. Free blocks form an LRU queue; a free block may still hold the KV of a full block of
//! tokens that prefix caching can hand to a later request with the same prefix ("cached"). A
//! block taken from the head of the queue for a new allocation loses its cached content
//! (eviction). Allocation, freeing and cache hits are O(1).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

const NIL: u32 = u32::MAX;
/// Hash value meaning "no cached content" (block hashes are forced odd, so never 0).
const NO_HASH: u64 = 0;

/// Keys are already well-mixed 64-bit hashes: use them as they are.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) ^ b as u64;
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

pub(crate) type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

#[derive(Debug)]
pub struct BlockPool {
    ref_cnt: Vec<u32>,
    hash: Vec<u64>,
    prev: Vec<u32>,
    next: Vec<u32>,
    head: u32,
    tail: u32,
    free: u32,
    /// Blocks held by more than one request, counted once per extra holder.
    shared_refs: u64,
    cached: IdMap<u32>,
    pub evictions: u64,
}

impl BlockPool {
    pub fn new(num_blocks: u32) -> BlockPool {
        let n = num_blocks as usize;
        let prev = (0..num_blocks).map(|i| if i == 0 { NIL } else { i - 1 }).collect();
        let next = (0..num_blocks).map(|i| if i + 1 == num_blocks { NIL } else { i + 1 }).collect();
        BlockPool {
            ref_cnt: vec![0; n],
            hash: vec![NO_HASH; n],
            prev,
            next,
            head: if n == 0 { NIL } else { 0 },
            tail: if n == 0 { NIL } else { num_blocks - 1 },
            free: num_blocks,
            shared_refs: 0,
            cached: IdMap::default(),
            evictions: 0,
        }
    }

    pub fn total(&self) -> u32 {
        self.ref_cnt.len() as u32
    }

    /// Free blocks, including those holding cached content.
    pub(crate) fn num_free(&self) -> u32 {
        self.free
    }

    pub(crate) fn num_used(&self) -> u32 {
        self.total() - self.free
    }

    /// Blocks whose content prefix caching can find (in use or free).
    pub(crate) fn num_cached(&self) -> usize {
        self.cached.len()
    }

    /// Extra holders of shared blocks (sum of reference count - 1 over blocks in use).
    pub(crate) fn shared_refs(&self) -> u64 {
        self.shared_refs
    }

    pub(crate) fn ref_count(&self, block: u32) -> u32 {
        self.ref_cnt[block as usize]
    }

    /// Take the least recently freed block; its cached content, if any, is evicted.
    /// The caller checks `num_free() > 0` first.
    pub(crate) fn allocate(&mut self) -> u32 {
        let b = self.head;
        debug_assert!(b != NIL, "allocate from an empty pool");
        self.unlink(b);
        let h = std::mem::replace(&mut self.hash[b as usize], NO_HASH);
        if h != NO_HASH && self.cached.get(&h) == Some(&b) {
            self.cached.remove(&h);
            self.evictions += 1;
        }
        self.ref_cnt[b as usize] = 1;
        b
    }

    /// Take a block found by a cache lookup (in use or free).
    pub fn touch(&mut self, b: u32) {
        if self.ref_cnt[b as usize] == 0 {
            self.unlink(b);
        } else {
            self.shared_refs += 1;
        }
        self.ref_cnt[b as usize] += 1;
    }

    /// Drop one reference; an unreferenced block goes to the tail of the free queue, keeping its
    /// cached content until it is reused.
    pub fn release(&mut self, b: u32) {
        let r = &mut self.ref_cnt[b as usize];
        debug_assert!(*r > 0, "release of a free block");
        *r -= 1;
        if *r > 0 {
            self.shared_refs -= 1;
        } else {
            self.push_tail(b);
        }
    }

    /// Forget the cached content of every free block (what vLLM's `/reset_prefix_cache`
    /// does): no later request gets a prefix cache hit from earlier ones. Blocks in use keep
    /// theirs. The blocks forgotten.
    pub fn reset_prefix_cache(&mut self) -> u64 {
        let mut forgotten = 0;
        for b in 0..self.hash.len() {
            if self.ref_cnt[b] == 0 && self.hash[b] != NO_HASH {
                self.cached.remove(&self.hash[b]);
                self.hash[b] = NO_HASH;
                forgotten += 1;
            }
        }
        forgotten
    }

    pub fn lookup(&self, hash: u64) -> Option<u32> {
        self.cached.get(&hash).copied()
    }

    /// A block became full: make its content findable (the first block with a given content
    /// wins; a duplicate stays unregistered).
    pub(crate) fn register(&mut self, b: u32, hash: u64) {
        debug_assert!(hash != NO_HASH);
        if self.hash[b as usize] != NO_HASH {
            return;
        }
        if let std::collections::hash_map::Entry::Vacant(e) = self.cached.entry(hash) {
            e.insert(b);
            self.hash[b as usize] = hash;
        }
    }

    fn unlink(&mut self, b: u32) {
        let (p, n) = (self.prev[b as usize], self.next[b as usize]);
        if p == NIL {
            self.head = n;
        } else {
            self.next[p as usize] = n;
        }
        if n == NIL {
            self.tail = p;
        } else {
            self.prev[n as usize] = p;
        }
        self.prev[b as usize] = NIL;
        self.next[b as usize] = NIL;
        self.free -= 1;
    }

    fn push_tail(&mut self, b: u32) {
        self.prev[b as usize] = self.tail;
        self.next[b as usize] = NIL;
        if self.tail == NIL {
            self.head = b;
        } else {
            self.next[self.tail as usize] = b;
        }
        self.tail = b;
        self.free += 1;
    }
}

/// 64-bit mixer (splitmix64's finaliser).
#[inline]
pub fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Hash of a full block: chained on the previous block's hash, so equal hashes mean equal
/// prefixes up to and including this block. Never [`NO_HASH`].
#[inline]
pub(crate) fn block_hash(parent: u64, tokens: impl Iterator<Item = u32>) -> u64 {
    let mut h = mix(parent ^ 0x9e37_79b9_7f4a_7c15);
    for t in tokens {
        h = mix(h ^ t as u64);
    }
    h | 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_reuse_and_eviction() {
        let mut p = BlockPool::new(3);
        let a = p.allocate();
        let b = p.allocate();
        assert_eq!((a, b, p.num_free()), (0, 1, 1));
        p.register(a, 11);
        p.release(a);
        assert_eq!(p.num_free(), 2);
        // The cached free block can be found and taken back without allocation.
        assert_eq!(p.lookup(11), Some(a));
        p.touch(a);
        assert_eq!(p.num_free(), 1);
        p.touch(a);
        assert_eq!(p.shared_refs(), 1);
        p.release(a);
        p.release(a);
        assert_eq!(p.shared_refs(), 0);
        // Free queue is now [2, 0]: block 2 goes first, then the cached block 0 is evicted.
        assert_eq!(p.allocate(), 2);
        assert_eq!(p.lookup(11), Some(0));
        assert_eq!(p.allocate(), 0);
        assert_eq!(p.lookup(11), None);
        assert_eq!((p.num_free(), p.evictions), (0, 1));
        p.release(b);
        assert_eq!(p.allocate(), b);
    }

    #[test]
    fn hashes_chain() {
        let h1 = block_hash(0, [1, 2, 3].into_iter());
        assert_eq!(h1, block_hash(0, [1, 2, 3].into_iter()));
        assert_ne!(h1, block_hash(0, [1, 2, 4].into_iter()));
        assert_ne!(block_hash(h1, [5].into_iter()), block_hash(7, [5].into_iter()));
        assert_eq!(h1 & 1, 1);
    }
}
