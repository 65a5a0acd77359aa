//! How a table reads its blocks: through the block cache or not, the index block pinned or
//! cached, and the index's answer for a key, which a lookup's filter and its search share.

use std::sync::Arc;

use super::{BlockKind, CachedBlock, TableReader};
use crate::cache::Priority;
use crate::error::{Error, Result};
use crate::filter::FilterLayout;
use crate::sst::block::{Block, KeyOrder};
use crate::sst::filter_block::{parse_filter_block, BlockSource, FilterBlockReader};
use crate::sst::format::{read_block, BlockHandle};
use crate::sst::index_search::{IndexPosition, IndexSearch};
use crate::stats::Ticker;

/// An index block and the dense search array over it (see `index_search.rs`), held together
/// whether pinned with the table or cached.
pub(crate) struct IndexBlock {
    pub(super) block: Arc<Block>,
    search: Option<IndexSearch>,
}

impl IndexBlock {
    pub(super) fn new(block: Arc<Block>) -> IndexBlock {
        let search = IndexSearch::new(&block);
        IndexBlock { block, search }
    }

    /// Bytes it holds: the block and the search array.
    fn size(&self) -> usize {
        self.block.size() + self.search.as_ref().map_or(0, IndexSearch::size)
    }
}

/// Where a table keeps its index block.
pub(super) enum IndexPlacement {
    Pinned(Arc<IndexBlock>),
    Cached(BlockHandle),
}

/// An index block, borrowed from its table or shared with the cache.
pub(super) enum IndexRef<'a> {
    Pinned(&'a IndexBlock),
    Cached(Arc<IndexBlock>),
}

impl std::ops::Deref for IndexRef<'_> {
    type Target = IndexBlock;

    fn deref(&self) -> &IndexBlock {
        match self {
            IndexRef::Pinned(b) => b,
            IndexRef::Cached(b) => b,
        }
    }
}

impl TableReader {
    /// Reads a block of `kind` through the block cache. Index and filter blocks charged to the
    /// cache go in with high priority, so data blocks are evicted before them.
    pub(super) fn cached_block(
        &self,
        handle: BlockHandle,
        kind: BlockKind,
        parse: impl FnOnce(Vec<u8>) -> Option<CachedBlock>,
    ) -> Result<CachedBlock> {
        let key = self.cache.key(self.number, handle.offset);
        let (hit, miss) = match kind {
            BlockKind::Data => (None, None),
            BlockKind::Filter => (
                Some(Ticker::BlockCacheFilterHit),
                Some(Ticker::BlockCacheFilterMiss),
            ),
            BlockKind::Index => (
                Some(Ticker::BlockCacheIndexHit),
                Some(Ticker::BlockCacheIndexMiss),
            ),
        };
        if let Some(b) = self.cache.get(&key) {
            self.stats.inc(Ticker::BlockCacheHit);
            if let Some(t) = hit {
                self.stats.inc(t);
            }
            return Ok(b);
        }
        self.stats.inc(Ticker::BlockCacheMiss);
        if let Some(t) = miss {
            self.stats.inc(t);
        }
        let raw = read_block(&self.file, &self.path, handle, self.file_len)?;
        // The buffer's room above the block is memory the cache keeps too.
        let charge = raw.capacity();
        let block = parse(raw)
            .ok_or_else(|| self.corrupt(format!("malformed block at offset {}", handle.offset)))?;
        let (charge, priority) = match (&block, self.charged && kind != BlockKind::Data) {
            (CachedBlock::Index(ib), _) => (ib.size(), Priority::High),
            // Charged what it holds decoded, as a range filter kept with its table is counted.
            (CachedBlock::RangeFilter(f), _) => (f.memory_bytes(), Priority::High),
            (_, true) => (charge, Priority::High),
            (_, false) => (charge, Priority::Low),
        };
        self.cache.insert(key, block.clone(), charge, priority);
        Ok(block)
    }

    /// The index block: the pinned one, or the one in the cache (read again if evicted).
    pub(super) fn index_block(&self) -> Result<IndexRef<'_>> {
        match &self.index {
            IndexPlacement::Pinned(b) => Ok(IndexRef::Pinned(b)),
            IndexPlacement::Cached(h) => {
                let parse = |raw| {
                    Block::new(raw)
                        .map(|b| CachedBlock::Index(Arc::new(IndexBlock::new(Arc::new(b)))))
                };
                match self.cached_block(*h, BlockKind::Index, parse)? {
                    CachedBlock::Index(b) => Ok(IndexRef::Cached(b)),
                    _ => Err(self.corrupt(format!("offset {} is not the index block", h.offset))),
                }
            }
        }
    }

    /// A filter's top-level block charged to the cache, parsed, through the cache.
    #[inline(never)]
    fn filter_block(
        &self,
        layout: FilterLayout,
        handle: BlockHandle,
    ) -> Result<Arc<dyn FilterBlockReader>> {
        let parse = |raw| parse_filter_block(layout, raw).map(CachedBlock::FilterBlock);
        match self.cached_block(handle, BlockKind::Filter, parse)? {
            CachedBlock::FilterBlock(f) => Ok(f),
            _ => Err(self.corrupt(format!(
                "offset {} is not a {layout} filter block",
                handle.offset
            ))),
        }
    }

    /// A data block, from the cache if it is there (and put there if `fill_cache`).
    pub(crate) fn data_block(&self, handle: BlockHandle, fill_cache: bool) -> Result<Arc<Block>> {
        if !fill_cache {
            let raw = read_block(&self.file, &self.path, handle, self.file_len)?;
            return Block::new(raw).map(Arc::new).ok_or_else(|| {
                self.corrupt(format!("malformed data block at offset {}", handle.offset))
            });
        }
        self.stats.inc(Ticker::DataBlocksRead);
        let parse = |raw| Block::new(raw).map(|b| CachedBlock::Data(Arc::new(b)));
        match self.cached_block(handle, BlockKind::Data, parse)? {
            CachedBlock::Data(b) => Ok(b),
            _ => Err(self.corrupt(format!("offset {} is not a data block", handle.offset))),
        }
    }

    /// A filter partition, through the cache.
    pub(crate) fn filter_partition(&self, handle: BlockHandle) -> Result<Arc<Vec<u8>>> {
        self.stats.inc(Ticker::FilterPartitionsRead);
        let parse = |raw| Some(CachedBlock::Filter(Arc::new(raw)));
        match self.cached_block(handle, BlockKind::Filter, parse)? {
            CachedBlock::Filter(f) => Ok(f),
            _ => Err(self.corrupt(format!(
                "offset {} is not a filter partition",
                handle.offset
            ))),
        }
    }

    /// Starts loading the part of the index a lookup of a key of `ukey` will read, when the
    /// index is kept with the table (see `IndexSearch::prefetch`); otherwise does nothing. A
    /// batch of lookups calls it for every key a filter let through before it locates any.
    pub(crate) fn prefetch_index(&self, ukey: &[u8]) {
        if let IndexPlacement::Pinned(index) = &self.index
            && let Some(search) = &index.search
        {
            search.prefetch(ukey);
        }
    }

    /// The handle of the only data block that may hold `lookup` (an internal key), or `None` if
    /// every key of the table is smaller.
    pub(super) fn index_handle(&self, lookup: &[u8]) -> Result<Option<BlockHandle>> {
        let index = self.index_block()?;
        if let Some(search) = &index.search {
            match search.seek(&index.block, lookup) {
                IndexPosition::PastEnd => return Ok(None),
                IndexPosition::Entry(h) => return Ok(Some(h)),
                IndexPosition::Unknown => {}
            }
        }
        let mut index = index.block.iter(KeyOrder::Internal);
        index.seek(lookup);
        if index.is_corrupt() {
            return Err(self.corrupt("malformed index block entry"));
        }
        if !index.valid() {
            return Ok(None);
        }
        BlockHandle::decode_exact(index.value())
            .map(Some)
            .ok_or_else(|| self.corrupt("bad handle in index block"))
    }
}

/// The blocks one lookup's filter may read: filter partitions through the cache, and the index,
/// whose answer is kept so that a block-based filter and the lookup after it seek it once.
pub(super) struct LookupBlocks<'a> {
    table: &'a TableReader,
    index_answer: std::cell::Cell<Option<Option<BlockHandle>>>,
}

impl<'a> LookupBlocks<'a> {
    pub(super) fn new(table: &'a TableReader) -> Self {
        LookupBlocks {
            table,
            index_answer: std::cell::Cell::new(None),
        }
    }
}

impl BlockSource for LookupBlocks<'_> {
    fn filter_partition(&self, handle: BlockHandle) -> Result<Arc<Vec<u8>>> {
        self.table.filter_partition(handle)
    }

    /// Seeks the index once per lookup: every caller asks for the same key.
    fn data_block_for(&self, lookup: &[u8]) -> Result<Option<BlockHandle>> {
        if let Some(answer) = self.index_answer.get() {
            return Ok(answer);
        }
        let answer = self.table.index_handle(lookup)?;
        self.index_answer.set(Some(answer));
        Ok(answer)
    }

    fn corruption(&self, what: &str) -> Error {
        self.table.corrupt(what)
    }

    fn filter_block(
        &self,
        layout: FilterLayout,
        handle: BlockHandle,
    ) -> Result<Arc<dyn FilterBlockReader>> {
        self.table.filter_block(layout, handle)
    }
}
