//! The block cache tables read through, and [`Cache`], the handle that lets several stores in one
//! process share one under one memory budget.
//!
//! A block's key is (owner, file number, block offset). File numbers repeat from store to store
//! (each counts from its own first table), so every store that opens takes an owner id of its own
//! from the cache, as RocksDB gives each table a cache key prefix: a block one store put in never
//! answers another store's lookup of the same file number and offset. The owner stays the same for
//! as long as the store is open, so a table reopened (evicted from the table cache, or moved to
//! another level) finds its blocks again. Once every table reader of a store is gone (the store
//! closed), its blocks leave a shared cache at once rather than waiting for eviction.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use super::CachedBlock;
use crate::cache::{Priority, ShardedLruCache};

/// Shards of a block cache: enough that readers on different cores rarely wait on one lock.
const SHARDS: usize = 16;

/// The default share of a [`Cache`] that index and filter blocks keep from eviction.
const DEFAULT_HIGH_PRIORITY_SHARE: f64 = 0.5;

/// A block's key: the store's owner id in the cache, the table's file number, the block's offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct BlockKey {
    owner: u64,
    file: u64,
    offset: u64,
}

/// The sharded LRU of blocks.
pub(crate) type BlockCache = ShardedLruCache<BlockKey, CachedBlock>;

/// What every handle to one cache shares.
struct Shared {
    blocks: BlockCache,
    /// The next owner id a store takes.
    next_owner: AtomicU64,
}

/// A block cache that several stores (each with all its keyspaces) share under one budget: give
/// clones of it to [`Options::block_cache`](crate::Options::block_cache). Data blocks, and
/// with [`cache_index_and_filter_blocks`](crate::Options::cache_index_and_filter_blocks) index
/// and filter blocks (at high priority: evicted after data blocks), of every store compete for
/// its capacity, least recently used first.
///
/// A `Cache` is a cheap handle: clones are the same cache. Each store keys its blocks apart from
/// the others', and its blocks leave the cache when it closes.
///
/// ```
/// use siftdb::{Cache, Db, Options};
///
/// # fn main() -> siftdb::Result<()> {
/// let cache = Cache::new(64 << 20); // 64 MiB for both stores
/// let (a, b) = (tempfile::tempdir()?, tempfile::tempdir()?);
/// let users = Db::open(a.path(), Options::default().block_cache(cache.clone()))?;
/// let orders = Db::open(b.path(), Options::default().block_cache(cache.clone()))?;
/// users.put("ada", "1815")?;
/// orders.put("ada", "a book")?;
/// users.flush()?;
/// orders.flush()?;
/// assert_eq!(users.get("ada")?, Some(b"1815".to_vec()));
/// assert_eq!(orders.get("ada")?, Some(b"a book".to_vec()));
/// assert!(cache.usage() > 0 && cache.usage() <= cache.capacity());
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Cache {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("capacity", &self.capacity())
            .field("usage", &self.usage())
            .finish()
    }
}

impl Cache {
    /// A cache of `capacity_bytes` (0 caches nothing) in which index and filter blocks keep up to
    /// half of the capacity from eviction while data blocks remain.
    pub fn new(capacity_bytes: usize) -> Cache {
        Cache::with_high_priority_share(capacity_bytes, DEFAULT_HIGH_PRIORITY_SHARE)
    }

    /// A cache of `capacity_bytes` in which index and filter blocks keep up to `share` (0 to 1;
    /// a share outside counts as the nearer end, one that is not a number as 0) of the capacity
    /// from eviction while data blocks remain (as
    /// [`Options::block_cache_high_priority_share`](crate::Options::block_cache_high_priority_share)
    /// does for a store's own cache).
    pub fn with_high_priority_share(capacity_bytes: usize, share: f64) -> Cache {
        let share = if share.is_nan() { 0.0 } else { share };
        Cache {
            shared: Arc::new(Shared {
                blocks: ShardedLruCache::with_high_priority_share(capacity_bytes, SHARDS, share),
                next_owner: AtomicU64::new(0),
            }),
        }
    }

    /// The most bytes it holds.
    pub fn capacity(&self) -> usize {
        self.shared.blocks.capacity()
    }

    /// Bytes its blocks hold now, every store's together (each block is charged the memory it
    /// keeps: its buffer's capacity, or what an index or filter holds decoded).
    pub fn usage(&self) -> usize {
        self.shared.blocks.usage()
    }

    /// Lookups that found their block, by every store since the cache was made. Each store also
    /// counts its own, by kind of block ([`Ticker::BlockCacheHit`](crate::Ticker::BlockCacheHit)
    /// and those after it).
    pub fn hits(&self) -> u64 {
        self.shared.blocks.hits_and_misses().0
    }

    /// Lookups that did not find their block (and read it from its table), by every store since
    /// the cache was made.
    pub fn misses(&self) -> u64 {
        self.shared.blocks.hits_and_misses().1
    }

    /// The cache as a new store sees it: under an owner id no other store has.
    pub(crate) fn for_store(&self, shared_with_others: bool) -> StoreCache {
        let owner = self.shared.next_owner.fetch_add(1, Relaxed);
        StoreCache {
            shared: Arc::clone(&self.shared),
            owner,
            release: Arc::new(Release {
                shared: shared_with_others.then(|| Arc::clone(&self.shared)),
                owner,
            }),
        }
    }
}

/// The block cache as one store sees it: the cache, and the store's owner id in its keys. Every
/// table reader of the store holds a clone.
#[derive(Clone)]
pub(crate) struct StoreCache {
    shared: Arc<Shared>,
    owner: u64,
    /// Dropped with the last clone: the store's blocks then leave a shared cache.
    release: Arc<Release>,
}

/// Removes an owner's blocks from a shared cache when dropped.
struct Release {
    /// The cache, if other stores share it (a store's own cache goes with it anyway).
    shared: Option<Arc<Shared>>,
    owner: u64,
}

impl Drop for Release {
    fn drop(&mut self) {
        if let Some(shared) = &self.shared {
            let owner = self.owner;
            shared.blocks.remove_where(|k| k.owner == owner);
        }
    }
}

impl StoreCache {
    /// A cache of `capacity_bytes` for one store alone.
    pub(crate) fn private(capacity_bytes: usize, high_priority_share: f64) -> StoreCache {
        Cache::with_high_priority_share(capacity_bytes, high_priority_share).for_store(false)
    }

    /// The handle of the whole cache.
    pub(crate) fn cache(&self) -> Cache {
        Cache {
            shared: Arc::clone(&self.shared),
        }
    }

    /// The key of the block at `offset` of table `file`.
    #[inline]
    pub(crate) fn key(&self, file: u64, offset: u64) -> BlockKey {
        BlockKey {
            owner: self.owner,
            file,
            offset,
        }
    }

    #[inline]
    pub(crate) fn get(&self, key: &BlockKey) -> Option<CachedBlock> {
        self.shared.blocks.get(key)
    }

    pub(crate) fn insert(
        &self,
        key: BlockKey,
        block: CachedBlock,
        charge: usize,
        priority: Priority,
    ) {
        self.shared
            .blocks
            .insert_with_priority(key, block, charge, priority);
    }

    #[cfg(test)]
    pub(crate) fn remove(&self, key: &BlockKey) {
        self.shared.blocks.remove(key);
    }

    /// Bytes this store's blocks hold now, by kind of block (data, filter, index). Walks every
    /// entry: for reports.
    pub(crate) fn usage_by_kind(&self) -> [usize; 3] {
        self.shared.blocks.usage_by(|k, b: &CachedBlock| {
            if k.owner == self.owner {
                b.kind() as usize
            } else {
                usize::MAX
            }
        })
    }

    /// Whether other stores may share the cache (it was given in the options).
    pub(crate) fn is_shared(&self) -> bool {
        self.release.shared.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(byte: u8) -> CachedBlock {
        CachedBlock::Filter(Arc::new(vec![byte; 100]))
    }

    fn byte_of(b: Option<CachedBlock>) -> Option<u8> {
        match b {
            Some(CachedBlock::Filter(f)) => Some(f[0]),
            _ => None,
        }
    }

    #[test]
    fn stores_never_see_each_others_blocks() {
        let cache = Cache::new(1 << 20);
        let (a, b) = (cache.for_store(true), cache.for_store(true));
        a.insert(a.key(7, 4096), block(1), 100, Priority::Low);
        assert_eq!(byte_of(b.get(&b.key(7, 4096))), None);
        b.insert(b.key(7, 4096), block(2), 100, Priority::Low);
        assert_eq!(byte_of(a.get(&a.key(7, 4096))), Some(1));
        assert_eq!(byte_of(b.get(&b.key(7, 4096))), Some(2));
        assert_eq!((cache.hits(), cache.misses()), (2, 1));
        assert_eq!(a.usage_by_kind(), [0, 100, 0]);
        assert_eq!(cache.usage(), 200);
    }

    #[test]
    fn a_store_that_lets_go_takes_its_blocks_out_of_a_shared_cache() {
        let cache = Cache::new(1 << 20);
        let (a, b) = (cache.for_store(true), cache.for_store(true));
        for offset in 0..10 {
            a.insert(a.key(1, offset), block(1), 100, Priority::Low);
            b.insert(b.key(1, offset), block(2), 100, Priority::Low);
        }
        let reader_of_a = a.clone();
        drop(a);
        // A table reader still holds the store's handle: its blocks stay.
        assert_eq!(cache.usage(), 2000);
        drop(reader_of_a);
        assert_eq!(cache.usage(), 1000);
        assert_eq!(b.usage_by_kind(), [0, 1000, 0]);
        // A store's own cache is not walked: it goes with the store.
        let own = StoreCache::private(1 << 20, 0.5);
        own.insert(own.key(1, 0), block(3), 100, Priority::Low);
        let whole = own.cache();
        drop(own);
        assert_eq!(whole.usage(), 100);
        assert!(!StoreCache::private(1, 0.5).is_shared());
    }
}
