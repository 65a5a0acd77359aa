//! Open table readers, bounded by `max_open_files`, shared by Gets, scans and compactions.
//!
//! Most readers are pinned: kept in their table's [`FileMeta`] for as long as the table is live, so
//! a Get reaches a table's filter through a pointer it already holds, with no lock, hash lookup or
//! reference count. Once `max_open_files` minus a small LRU's share are pinned, further tables are
//! opened through that LRU.

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use super::filename::table_path;
use super::{FileMeta, PinnedReader};
use crate::cache::ShardedLruCache;
use crate::error::Result;
use crate::filter::PolicyRegistry;
use crate::sst::table_reader::block_cache::StoreCache;
use crate::sst::table_reader::{ExpectedTable, MetaBlockPlacement, TableReader};
use crate::stats::Stats;
use crate::store_id::StoreId;

/// A table's reader: borrowed from its `FileMeta` if pinned, else shared with the LRU.
pub(crate) enum TableRef<'a> {
    Pinned(&'a Arc<TableReader>),
    Shared(Arc<TableReader>),
}

impl Deref for TableRef<'_> {
    type Target = Arc<TableReader>;

    fn deref(&self) -> &Arc<TableReader> {
        match self {
            TableRef::Pinned(r) => r,
            TableRef::Shared(r) => r,
        }
    }
}

/// Opens tables on demand, pins them while there is room, and keeps an LRU of the rest.
pub(crate) struct TableCache {
    dir: PathBuf,
    /// Every table must carry it (see `ExpectedTable`).
    store_id: StoreId,
    /// Shared by every keyspace's cache: file numbers are unique in the store.
    readers: Arc<ShardedLruCache<u64, Arc<TableReader>>>,
    pinned: Arc<AtomicUsize>,
    max_pinned: usize,
    blocks: StoreCache,
    stats: Arc<Stats>,
    policies: PolicyRegistry,
    /// Where tables keep their index and filter blocks, by level.
    placement: TablePlacement,
}

/// Where tables keep their index and filter blocks (the `Options` of the same names).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TablePlacement {
    pub(crate) cache_index_and_filter_blocks: bool,
    pub(crate) pin_l0_filter_and_index_blocks: bool,
    pub(crate) pin_top_level_index_and_filter: bool,
}

impl TablePlacement {
    /// The placement for a table of `level`.
    fn for_level(self, level: usize) -> MetaBlockPlacement {
        let pinned_l0 = level == 0 && self.pin_l0_filter_and_index_blocks;
        MetaBlockPlacement {
            charge_to_cache: self.cache_index_and_filter_blocks && !pinned_l0,
            pin_partition_index: self.pin_top_level_index_and_filter,
        }
    }
}

impl TableCache {
    pub(crate) fn new(
        dir: PathBuf,
        store_id: StoreId,
        max_open_files: usize,
        blocks: StoreCache,
        stats: Arc<Stats>,
        policies: PolicyRegistry,
        placement: TablePlacement,
    ) -> Self {
        // An eighth of the budget (at least 8 files) for the LRU, the rest for pins.
        let lru = (max_open_files / 8).max(8);
        TableCache {
            dir,
            store_id,
            readers: Arc::new(ShardedLruCache::new(lru, 4)),
            pinned: Arc::new(AtomicUsize::new(0)),
            max_pinned: max_open_files.saturating_sub(lru),
            blocks,
            stats,
            policies,
            placement,
        }
    }

    /// Opens the table at `path`, which no MANIFEST names (a file offered for ingestion), with this
    /// keyspace's filter policies, outside the caches: its blocks go through a small cache of its
    /// own, so nothing of it is cached under a number of this store.
    ///
    /// # Errors
    /// As [`TableReader::open`].
    pub(crate) fn open_unnamed(&self, path: &Path) -> Result<Arc<TableReader>> {
        TableReader::open(
            path,
            0,
            None,
            MetaBlockPlacement::default(),
            StoreCache::private(1 << 20, 0.5),
            Arc::clone(&self.stats),
            &self.policies,
        )
        .map(Arc::new)
    }

    /// The reader of `file`, opening it if it is not open.
    ///
    /// # Errors
    /// `Error::Corruption` naming the file if its footer, index, properties or filter is damaged,
    /// or if it is not the table the MANIFEST describes (size, store identity, number, key range).
    #[inline]
    pub(crate) fn get<'a>(&self, file: &'a FileMeta) -> Result<TableRef<'a>> {
        match file.pinned_reader() {
            Some(p) => Ok(TableRef::Pinned(p.reader())),
            None => self.get_unpinned(file),
        }
    }

    /// [`get`](Self::get) for a table not pinned (yet): through the LRU, or opened. Out of line
    /// so that the pinned path every Get takes stays small.
    #[cold]
    #[inline(never)]
    fn get_unpinned<'a>(&self, file: &'a FileMeta) -> Result<TableRef<'a>> {
        let reader = match self.readers.get(&file.number) {
            Some(r) => r,
            None => Arc::new(TableReader::open(
                &table_path(&self.dir, file.number),
                file.number,
                Some(&ExpectedTable {
                    store_id: &self.store_id,
                    size: file.size,
                    smallest: &file.smallest,
                    largest: &file.largest,
                    global_sequence: file.global_sequence,
                }),
                self.placement.for_level(file.level),
                self.blocks.clone(),
                Arc::clone(&self.stats),
                &self.policies,
            )?),
        };
        let room = self
            .pinned
            .fetch_update(Relaxed, Relaxed, |n| (n < self.max_pinned).then_some(n + 1));
        if room.is_ok() {
            // A racing Get may have pinned it first; then ours is dropped and frees its pin.
            file.pin_reader(PinnedReader::new(
                Arc::clone(&reader),
                Arc::clone(&self.pinned),
            ));
            self.readers.remove(&file.number);
        } else {
            self.readers.insert(file.number, Arc::clone(&reader), 1);
        }
        Ok(TableRef::Shared(reader))
    }

    /// The cache of a keyspace's tables: the same open-file budget, LRU and block cache as this
    /// one, with the keyspace's counters and filter policies.
    pub(crate) fn for_keyspace(&self, stats: Arc<Stats>, policies: PolicyRegistry) -> TableCache {
        TableCache {
            dir: self.dir.clone(),
            store_id: self.store_id,
            readers: Arc::clone(&self.readers),
            pinned: Arc::clone(&self.pinned),
            max_pinned: self.max_pinned,
            blocks: self.blocks.clone(),
            stats,
            policies,
            placement: self.placement,
        }
    }

    /// The block cache every table reads through.
    pub(crate) fn block_cache(&self) -> &StoreCache {
        &self.blocks
    }

    /// Forgets table `number` (it is being deleted, or moved to another level); a pinned reader
    /// goes with its `FileMeta`.
    pub(crate) fn evict(&self, number: u64) {
        self.readers.remove(&number);
    }
}
