//! A sharded LRU cache: the block cache (`(file number, block offset)` → a data block, a filter
//! partition, or an index or filter block charged to the cache, charged by size) and the table
//! cache's LRU (file number → `Arc<TableReader>`, charge 1).
//!
//! Each shard is a mutex around a hash map from key to a slot in a `Vec`, and the slots form two
//! intrusive doubly linked lists by index, most recently used at the head: one per [`Priority`].
//! Eviction takes the least recently used low-priority entry (data blocks), and a high-priority one
//! (index and filter blocks) only when no low-priority entry is left or the high-priority entries
//! hold more than their share of the capacity: so the blocks every lookup of a table needs outlive
//! the data blocks one lookup needed. Every operation is O(1) expected. Sharding by key hash keeps
//! concurrent readers from all queueing on one lock.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};

/// A cheap hasher for the caches' keys: file numbers and block offsets, which the store assigns
/// and a user cannot craft, so SipHash's resistance to chosen keys buys nothing here; it cost a
/// third of a missing-key Get's instructions (callgrind), paid twice per lookup (shard, then map).
/// Each integer is folded in with a multiply; `finish` applies MurmurHash3's 64-bit finalizer so
/// that both the high bits (shard choice) and the low bits (the map's buckets) are well mixed.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct CacheKeyHasher(u64);

impl Hasher for CacheKeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
    }

    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }

    fn finish(&self) -> u64 {
        let mut z = self.0;
        z ^= z >> 33;
        z = z.wrapping_mul(0xff51_afd7_ed55_8ccd);
        z ^= z >> 33;
        z = z.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        z ^ (z >> 33)
    }
}

type CacheKeyHash = BuildHasherDefault<CacheKeyHasher>;

use parking_lot::Mutex;

/// The end of a shard's linked lists.
const NIL: usize = usize::MAX;

/// Which list an entry lives in, and so how soon it is evicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Priority {
    /// Evicted only after every low-priority entry, while within its share of the capacity.
    High = 0,
    /// Evicted first.
    Low = 1,
}

/// One cached entry and its list links.
#[derive(Debug)]
struct Node<K, V> {
    /// The entry's key, kept here too so eviction from the tail can remove it from the map.
    key: K,
    /// The cached value.
    value: V,
    /// The capacity it occupies.
    charge: usize,
    /// Its list.
    priority: Priority,
    /// The next more recently used slot of its list, or `NIL` at the head.
    prev: usize,
    /// The next less recently used slot of its list, or `NIL` at the tail.
    next: usize,
}

/// One independently locked LRU of two lists.
#[derive(Debug)]
struct Shard<K, V> {
    /// Key → slot in `nodes`.
    map: HashMap<K, usize, CacheKeyHash>,
    /// The entries, densely packed: removal moves the last slot into the hole so no free list is
    /// needed and no dead slot keeps a value alive.
    nodes: Vec<Node<K, V>>,
    /// Per priority, the most recently used slot, or `NIL` if its list is empty.
    head: [usize; 2],
    /// Per priority, the least recently used slot, or `NIL` if its list is empty.
    tail: [usize; 2],
    /// Per priority, the sum of the charges of its entries.
    usage: [usize; 2],
    /// Usage this shard evicts down to.
    capacity: usize,
    /// The most the high-priority entries keep from eviction while low-priority ones remain.
    high_capacity: usize,
    /// Lookups that found their key, and those that did not: counted under the lock a lookup
    /// holds anyway, so counting costs no shared cache line of its own.
    hits: u64,
    misses: u64,
}

impl<K: Hash + Eq + Clone, V: Clone> Shard<K, V> {
    /// An empty shard holding at most `capacity` charge, of which high-priority entries are
    /// protected up to `high_capacity`.
    fn new(capacity: usize, high_capacity: usize) -> Self {
        Shard {
            map: HashMap::default(),
            nodes: Vec::new(),
            head: [NIL; 2],
            tail: [NIL; 2],
            usage: [0; 2],
            capacity,
            high_capacity,
            hits: 0,
            misses: 0,
        }
    }

    fn total_usage(&self) -> usize {
        self.usage[0] + self.usage[1]
    }

    /// Detaches slot `i` from its list, leaving it in `nodes`.
    fn unlink(&mut self, i: usize) {
        let (prev, next, p) = (
            self.nodes[i].prev,
            self.nodes[i].next,
            self.nodes[i].priority as usize,
        );
        match prev {
            NIL => self.head[p] = next,
            q => self.nodes[q].next = next,
        }
        match next {
            NIL => self.tail[p] = prev,
            n => self.nodes[n].prev = prev,
        }
    }

    /// Links the detached slot `i` in as the most recently used of its list.
    fn push_front(&mut self, i: usize) {
        let p = self.nodes[i].priority as usize;
        self.nodes[i].prev = NIL;
        self.nodes[i].next = self.head[p];
        match self.head[p] {
            NIL => self.tail[p] = i,
            h => self.nodes[h].prev = i,
        }
        self.head[p] = i;
    }

    /// Removes slot `i` (already removed from `map`) and returns its node.
    fn remove_slot(&mut self, i: usize) -> Node<K, V> {
        self.unlink(i);
        let node = self.nodes.swap_remove(i);
        self.usage[node.priority as usize] -= node.charge;
        if i < self.nodes.len() {
            // The former last slot now lives at `i`: repoint its neighbours and its map entry.
            let (prev, next, p) = (
                self.nodes[i].prev,
                self.nodes[i].next,
                self.nodes[i].priority as usize,
            );
            match prev {
                NIL => self.head[p] = i,
                q => self.nodes[q].next = i,
            }
            match next {
                NIL => self.tail[p] = i,
                n => self.nodes[n].prev = i,
            }
            if let Some(slot) = self.map.get_mut(&self.nodes[i].key) {
                *slot = i;
            }
        }
        node
    }

    /// Looks `key` up and makes it the most recently used of its list.
    fn get(&mut self, key: &K) -> Option<V> {
        let Some(&i) = self.map.get(key) else {
            self.misses += 1;
            return None;
        };
        self.hits += 1;
        if self.head[self.nodes[i].priority as usize] != i {
            self.unlink(i);
            self.push_front(i);
        }
        Some(self.nodes[i].value.clone())
    }

    /// The slot to evict next, other than `keep`: the least recently used low-priority entry,
    /// unless high-priority entries hold more than their share (or no other low-priority entry is
    /// left); `NIL` if `keep` is the only entry.
    fn victim(&self, keep: usize) -> usize {
        let (high, low) = (Priority::High as usize, Priority::Low as usize);
        let first = if self.usage[high] > self.high_capacity {
            high
        } else {
            low
        };
        // `keep` is the newest entry, at the head of its list: it is a tail only when alone.
        [self.tail[first], self.tail[1 - first]]
            .into_iter()
            .find(|&t| t != NIL && t != keep)
            .unwrap_or(NIL)
    }

    /// Inserts or replaces `key`, then evicts until usage fits. Returns what was displaced so the
    /// caller can drop it after unlocking.
    fn insert(&mut self, key: K, value: V, charge: usize, priority: Priority) -> Vec<Node<K, V>> {
        let mut displaced = Vec::new();
        if let Some(i) = self.map.remove(&key) {
            // The old value goes even if the new one is not kept: a lookup must never return a
            // value older than the last insert.
            displaced.push(self.remove_slot(i));
        }
        if charge > self.capacity {
            return displaced;
        }
        let i = self.nodes.len();
        self.nodes.push(Node {
            key: key.clone(),
            value,
            charge,
            priority,
            prev: NIL,
            next: NIL,
        });
        self.push_front(i);
        self.map.insert(key, i);
        self.usage[priority as usize] += charge;
        // The new entry fits by itself, and is never its own victim.
        while self.total_usage() > self.capacity {
            let t = self.victim(i);
            if t == NIL {
                break;
            }
            self.map.remove(&self.nodes[t].key);
            displaced.push(self.remove_slot(t));
        }
        displaced
    }

    /// Removes `key` if present, returning its node.
    fn remove(&mut self, key: &K) -> Option<Node<K, V>> {
        let i = self.map.remove(key)?;
        Some(self.remove_slot(i))
    }

    /// Removes every entry whose key `doomed` picks, returning their nodes.
    fn remove_where(&mut self, doomed: &impl Fn(&K) -> bool) -> Vec<Node<K, V>> {
        let mut removed = Vec::new();
        // From the end: removing slot `i` moves the last slot, already visited, into it.
        for i in (0..self.nodes.len()).rev() {
            if doomed(&self.nodes[i].key) {
                self.map.remove(&self.nodes[i].key);
                removed.push(self.remove_slot(i));
            }
        }
        removed
    }
}

/// A thread-safe LRU cache split into independently locked shards; capacity is measured in the
/// caller's unit of "charge" (bytes for blocks, 1 per open table).
#[derive(Debug)]
pub(crate) struct ShardedLruCache<K, V> {
    /// The shards; a key always lives in the one its hash picks.
    shards: Vec<Mutex<Shard<K, V>>>,
    /// Picks the shard (from the hash's middle bits; the shard's map uses the others).
    hasher: CacheKeyHash,
    /// Sum of the shard capacities.
    capacity: usize,
}

impl<K: Hash + Eq + Clone, V: Clone> ShardedLruCache<K, V> {
    /// A cache holding at most `capacity_bytes` of charge in total, split over `shards` shards,
    /// in which high-priority entries are evicted after low-priority ones (see
    /// [`with_high_priority_share`](Self::with_high_priority_share); here all of the capacity).
    ///
    /// The capacity is divided exactly among the shards (so `usage() <= capacity()` always), and
    /// the shard count is lowered to at most `capacity_bytes` so that no shard ends up with zero
    /// capacity and silently drops everything hashed to it. Each shard evicts on its own, so an
    /// entry larger than `capacity_bytes / shards` is never kept; for a table cache charged 1 per
    /// table, use few shards. A capacity of 0 caches nothing.
    pub(crate) fn new(capacity_bytes: usize, shards: usize) -> Self {
        Self::with_high_priority_share(capacity_bytes, shards, 1.0)
    }

    /// As [`new`](Self::new), with high-priority entries protected from eviction only while they
    /// hold at most `share` (0 to 1) of the capacity.
    pub(crate) fn with_high_priority_share(
        capacity_bytes: usize,
        shards: usize,
        share: f64,
    ) -> Self {
        let n = shards.clamp(1, capacity_bytes.max(1));
        let (base, extra) = (capacity_bytes / n, capacity_bytes % n);
        let share = share.clamp(0.0, 1.0);
        ShardedLruCache {
            shards: (0..n)
                .map(|i| {
                    let capacity = base + usize::from(i < extra);
                    let high = (capacity as f64 * share) as usize;
                    Mutex::new(Shard::new(capacity, high))
                })
                .collect(),
            hasher: CacheKeyHash::default(),
            capacity: capacity_bytes,
        }
    }

    /// The shard `key` lives in.
    fn shard(&self, key: &K) -> &Mutex<Shard<K, V>> {
        let h = self.hasher.hash_one(key);
        // Fast range over bits 16..48, leaving the low bits (the map's buckets) and the top seven
        // (hashbrown's tags) independent of the shard. Below len, so the cast is lossless.
        let i = (((h >> 16) & 0xffff_ffff) * self.shards.len() as u64) >> 32;
        &self.shards[i as usize]
    }

    /// Caches `value` under `key`, replacing any previous value, and evicts least recently used
    /// entries of the key's shard until it fits. A charge above the shard's capacity is not kept
    /// (and still displaces an old value for `key`). A charge of 0 counts as 1, so that every
    /// entry occupies capacity and the cache stays bounded in entries too.
    pub(crate) fn insert(&self, key: K, value: V, charge: usize) {
        self.insert_with_priority(key, value, charge, Priority::Low);
    }

    /// [`insert`](Self::insert) into the list of `priority`.
    pub(crate) fn insert_with_priority(&self, key: K, value: V, charge: usize, priority: Priority) {
        if self.capacity == 0 {
            return;
        }
        let charge = charge.max(1);
        let displaced = self.shard(&key).lock().insert(key, value, charge, priority);
        // Dropped here, after the lock is released: the last reference to an evicted table
        // closes its file, which need not stall other users of the shard.
        drop(displaced);
    }

    /// The value cached under `key`, which becomes the most recently used entry of its shard.
    pub(crate) fn get(&self, key: &K) -> Option<V> {
        self.shard(key).lock().get(key)
    }

    /// Drops `key` from the cache if present (e.g. a table file that compaction deleted).
    pub(crate) fn remove(&self, key: &K) {
        let removed = self.shard(key).lock().remove(key);
        // As in `insert`, the value is dropped after unlocking.
        drop(removed);
    }

    /// Charge held now, summed over the shards.
    pub(crate) fn usage(&self) -> usize {
        self.shards.iter().map(|s| s.lock().total_usage()).sum()
    }

    /// Removes every entry whose key `doomed` picks (the blocks of a store that let go of a
    /// shared cache). Walks every entry, one shard locked at a time.
    pub(crate) fn remove_where(&self, doomed: impl Fn(&K) -> bool) {
        for shard in &self.shards {
            let removed = shard.lock().remove_where(&doomed);
            // As in `insert`, the values are dropped after unlocking.
            drop(removed);
        }
    }

    /// Lookups that found their key and lookups that did not, summed over the shards.
    pub(crate) fn hits_and_misses(&self) -> (u64, u64) {
        self.shards.iter().fold((0, 0), |(h, m), s| {
            let s = s.lock();
            (h + s.hits, m + s.misses)
        })
    }

    /// Charge held now by high-priority entries, summed over the shards.
    #[cfg(test)]
    pub(crate) fn high_priority_usage(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().usage[Priority::High as usize])
            .sum()
    }

    /// Charge held now, summed by the class `class` gives each entry (`0..N`; other classes are
    /// left out). Walks every entry: for reports, not for hot paths.
    pub(crate) fn usage_by<const N: usize>(&self, class: impl Fn(&K, &V) -> usize) -> [usize; N] {
        let mut out = [0; N];
        for shard in &self.shards {
            for node in &shard.lock().nodes {
                if let Some(slot) = out.get_mut(class(&node.key, &node.value)) {
                    *slot += node.charge;
                }
            }
        }
        out
    }

    /// The most charge the cache holds.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::collections::VecDeque;
    use std::sync::Arc;

    #[test]
    fn least_recently_used_goes_first() {
        let c = ShardedLruCache::new(3, 1);
        c.insert("a", 1, 1);
        c.insert("b", 2, 1);
        c.insert("c", 3, 1);
        // Touch "a": "b" is now the least recently used.
        assert_eq!(c.get(&"a"), Some(1));
        c.insert("d", 4, 1);
        assert_eq!(c.get(&"b"), None);
        assert_eq!(
            (c.get(&"a"), c.get(&"c"), c.get(&"d")),
            (Some(1), Some(3), Some(4))
        );
        // Order is now a, c, d (oldest first): two more inserts evict a and c.
        c.insert("e", 5, 1);
        c.insert("f", 6, 1);
        assert_eq!((c.get(&"a"), c.get(&"c")), (None, None));
        assert_eq!(
            (c.get(&"d"), c.get(&"e"), c.get(&"f")),
            (Some(4), Some(5), Some(6))
        );
        assert_eq!(c.usage(), 3);
    }

    #[test]
    fn eviction_is_by_charge() {
        let c = ShardedLruCache::new(100, 1);
        c.insert(1, "one", 40);
        c.insert(2, "two", 40);
        assert_eq!(c.usage(), 80);
        // 30 more needs 10 freed: only the oldest entry goes.
        c.insert(3, "three", 30);
        assert_eq!(
            (c.get(&1), c.get(&2), c.get(&3)),
            (None, Some("two"), Some("three"))
        );
        assert_eq!(c.usage(), 70);
        // One entry the size of the whole capacity evicts everything else.
        c.insert(4, "four", 100);
        assert_eq!(
            (c.get(&2), c.get(&3), c.get(&4)),
            (None, None, Some("four"))
        );
        assert_eq!(c.usage(), 100);
        // Larger than the capacity: not kept, and nothing else is disturbed.
        c.insert(5, "five", 101);
        assert_eq!((c.get(&4), c.get(&5)), (Some("four"), None));
        assert_eq!(c.usage(), 100);
    }

    #[test]
    fn replace_and_remove_keep_usage_right() {
        let c = ShardedLruCache::new(10, 1);
        c.insert("k", 1, 4);
        c.insert("k", 2, 6);
        assert_eq!((c.get(&"k"), c.usage()), (Some(2), 6));
        // An oversized replacement drops the old value rather than leaving it stale.
        c.insert("k", 3, 11);
        assert_eq!((c.get(&"k"), c.usage()), (None, 0));
        c.insert("k", 4, 5);
        c.insert("j", 5, 5);
        c.remove(&"k");
        c.remove(&"missing");
        assert_eq!((c.get(&"k"), c.get(&"j"), c.usage()), (None, Some(5), 5));
        // Zero charges count as one, so the cache stays bounded.
        for i in 0..100 {
            c.insert("z", i, 0);
            c.insert(if i % 2 == 0 { "x" } else { "y" }, i, 0);
        }
        assert!(c.usage() <= 10);
    }

    #[test]
    fn high_priority_entries_are_evicted_after_low_priority_ones() {
        let c = ShardedLruCache::with_high_priority_share(10, 1, 0.5);
        c.insert_with_priority("index", 1, 3, Priority::High);
        c.insert("d1", 2, 3);
        c.insert("d2", 3, 3);
        // Full: the next data block evicts the oldest data block, not the older index block.
        c.insert("d3", 4, 3);
        assert_eq!((c.get(&"index"), c.get(&"d1")), (Some(1), None));
        assert_eq!(c.high_priority_usage(), 3);
        // High-priority entries past their share (5 of 10) go first, oldest first.
        c.insert_with_priority("filter", 5, 3, Priority::High);
        assert_eq!(c.usage(), 9);
        c.insert("d4", 6, 3);
        assert_eq!(c.get(&"index"), None);
        assert_eq!(
            (c.get(&"filter"), c.get(&"d3"), c.get(&"d4")),
            (Some(5), Some(4), Some(6))
        );
        // A data block that is the only low-priority entry evicts high-priority ones to fit.
        let c = ShardedLruCache::with_high_priority_share(10, 1, 0.5);
        c.insert_with_priority("index", 1, 4, Priority::High);
        c.insert_with_priority("filter", 2, 4, Priority::High);
        c.insert("data", 3, 4);
        assert!(c.usage() <= 10, "{}", c.usage());
        assert_eq!((c.get(&"index"), c.get(&"data")), (None, Some(3)));
        // With no low-priority entry left, high-priority ones are evicted as any LRU would.
        let c = ShardedLruCache::with_high_priority_share(6, 1, 1.0);
        for i in 0..5 {
            c.insert_with_priority(i, i, 2, Priority::High);
        }
        assert_eq!((c.get(&0), c.get(&1), c.get(&4)), (None, None, Some(4)));
        assert!(c.usage() <= 6);
    }

    #[test]
    fn removing_by_key_keeps_the_lists_whole() {
        let c = ShardedLruCache::new(40, 1);
        for i in 0..10u64 {
            c.insert(i, i, 4);
        }
        c.remove_where(|k| k % 3 == 0);
        assert_eq!(c.usage(), 6 * 4);
        for i in 0..10u64 {
            assert_eq!(c.get(&i), (i % 3 != 0).then_some(i), "{i}");
        }
        // The survivors were touched in key order: six more entries evict the two oldest
        // survivors, as the lists say.
        for i in 10..16u64 {
            c.insert(i, i, 4);
        }
        let kept: Vec<u64> = (0..16).filter(|i| c.get(i).is_some()).collect();
        assert_eq!(kept, [4, 5, 7, 8, 10, 11, 12, 13, 14, 15]);
        assert_eq!(c.usage(), 40);
    }

    #[test]
    fn hits_and_misses_are_counted() {
        let c = ShardedLruCache::new(10, 2);
        c.insert(1u64, 1, 1);
        assert_eq!((c.get(&1), c.get(&1), c.get(&2)), (Some(1), Some(1), None));
        assert_eq!(c.hits_and_misses(), (2, 1));
    }

    #[test]
    fn capacity_zero_caches_nothing() {
        let c = ShardedLruCache::new(0, 16);
        c.insert(1u64, Arc::new(vec![1u8]), 1);
        c.insert(2u64, Arc::new(vec![2u8]), 0);
        assert_eq!(c.get(&1), None);
        assert_eq!(c.get(&2), None);
        assert_eq!((c.usage(), c.capacity()), (0, 0));
    }

    #[test]
    fn small_capacities_keep_every_shard_useful() {
        // A table cache of 10 with 16 shards: every table must still be cacheable.
        let c = ShardedLruCache::new(10, 16);
        assert_eq!(c.capacity(), 10);
        c.insert(7u64, "t", 1);
        assert_eq!(c.get(&7), Some("t"));
        for i in 0..1000u64 {
            c.insert(i, "t", 1);
            assert!(c.usage() <= 10);
        }
    }

    #[test]
    fn evicted_values_are_dropped() {
        let c = ShardedLruCache::new(2, 1);
        let v = Arc::new(());
        c.insert(1, Arc::clone(&v), 1);
        c.insert(2, Arc::clone(&v), 1);
        assert_eq!(Arc::strong_count(&v), 3);
        c.insert(3, Arc::clone(&v), 1);
        assert_eq!(Arc::strong_count(&v), 3);
        c.remove(&2);
        c.remove(&3);
        assert_eq!(Arc::strong_count(&v), 1);
    }

    #[test]
    fn matches_a_naive_model() {
        // One shard against a VecDeque LRU (front = most recent), over random operations.
        let mut rng = StdRng::seed_from_u64(42);
        let cap = 50;
        let c = ShardedLruCache::new(cap, 1);
        let mut model: VecDeque<(u32, u32, usize)> = VecDeque::new();
        for step in 0..20_000u32 {
            let key = rng.gen_range(0..40u32);
            match rng.gen_range(0..10) {
                0..=4 => {
                    let got = c.get(&key);
                    let pos = model.iter().position(|e| e.0 == key);
                    assert_eq!(got, pos.map(|p| model[p].1), "step {step}");
                    if let Some(p) = pos {
                        let e = model.remove(p).unwrap();
                        model.push_front(e);
                    }
                }
                5..=8 => {
                    let charge = rng.gen_range(1..20);
                    c.insert(key, step, charge);
                    if let Some(p) = model.iter().position(|e| e.0 == key) {
                        model.remove(p);
                    }
                    if charge <= cap {
                        model.push_front((key, step, charge));
                        while model.iter().map(|e| e.2).sum::<usize>() > cap {
                            model.pop_back();
                        }
                    }
                }
                _ => {
                    c.remove(&key);
                    if let Some(p) = model.iter().position(|e| e.0 == key) {
                        model.remove(p);
                    }
                }
            }
            assert_eq!(
                c.usage(),
                model.iter().map(|e| e.2).sum::<usize>(),
                "step {step}"
            );
        }
    }

    #[test]
    fn concurrent_use_from_four_threads() {
        let c = Arc::new(ShardedLruCache::new(4096, 8));
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let c = Arc::clone(&c);
                std::thread::spawn(move || {
                    let mut rng = StdRng::seed_from_u64(t);
                    for _ in 0..50_000 {
                        let file = rng.gen_range(0..8u64);
                        let offset = rng.gen_range(0..256u64) * 4096;
                        let key = (file, offset);
                        match rng.gen_range(0..4) {
                            0 => c.insert(key, Arc::new(file ^ offset), rng.gen_range(1..200)),
                            1 => c.remove(&key),
                            _ => {
                                // Every value seen is the one derived from its key.
                                if let Some(v) = c.get(&key) {
                                    assert_eq!(*v, file ^ offset);
                                }
                            }
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(c.usage() <= c.capacity());
        assert!(c.usage() > 0);
    }
}
