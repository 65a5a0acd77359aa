//! Open table readers, bounded by `max_open_files`, shared by Gets, scans and compactions.

use std::path::PathBuf;
use std::sync::Arc;

use super::filename::table_path;
use crate::cache::ShardedLruCache;
use crate::error::Result;
use crate::filter::PolicyRegistry;
use crate::sst::table_reader::{BlockCache, TableReader};
use crate::stats::Stats;

/// Opens tables on demand and keeps the most recently used ones open.
pub(crate) struct TableCache {
    dir: PathBuf,
    readers: ShardedLruCache<u64, Arc<TableReader>>,
    blocks: Arc<BlockCache>,
    stats: Arc<Stats>,
    policies: PolicyRegistry,
}

impl TableCache {
    pub(crate) fn new(
        dir: PathBuf,
        max_open_files: usize,
        blocks: Arc<BlockCache>,
        stats: Arc<Stats>,
        policies: PolicyRegistry,
    ) -> Self {
        TableCache {
            dir,
            readers: ShardedLruCache::new(max_open_files, 4),
            blocks,
            stats,
            policies,
        }
    }

    /// The reader of table `number`, opening it if it is not open.
    ///
    /// # Errors
    /// `Error::Corruption` naming the file if its footer, index, properties or filter is damaged.
    pub(crate) fn get(&self, number: u64) -> Result<Arc<TableReader>> {
        if let Some(r) = self.readers.get(&number) {
            return Ok(r);
        }
        let reader = Arc::new(TableReader::open(
            &table_path(&self.dir, number),
            number,
            Arc::clone(&self.blocks),
            Arc::clone(&self.stats),
            &self.policies,
        )?);
        self.readers.insert(number, Arc::clone(&reader), 1);
        Ok(reader)
    }

    /// The block cache every table reads through.
    pub(crate) fn block_cache(&self) -> &BlockCache {
        &self.blocks
    }

    /// Forgets table `number` (it is being deleted).
    pub(crate) fn evict(&self, number: u64) {
        self.readers.remove(&number);
    }
}
