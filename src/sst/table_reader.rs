//! Reads a table: pins its index and filter at open, answers point lookups filter-first, and
//! iterates its entries in order.

use std::cell::Cell;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::cache::Priority;
use crate::cache::ShardedLruCache;
use crate::error::{Error, Result};
use crate::filter::range::{RangeFilterFormat, TableRangeFilter};
use crate::filter::{FilterLayout, FilterProbe, PolicyRegistry};
use crate::fs::{io_at, read_exact_at};
use crate::iter::InternalIterator;
use crate::key::{lookup_key, parse_internal_key, user_key, ValueKind, MAX_SEQUENCE};
use crate::memtable::NewestEntry;
use crate::pinned_value::PinnedValue;
use crate::prefix::PrefixExtractor;
use crate::range_tombstones::FragmentedRangeTombstones;
use crate::sst::block::{Block, BlockIter, KeyOrder};
use crate::sst::filter_block::{
    parse_filter_block, BlockSource, FilterAnswer, FilterBlockReader, FilterShape, InMemoryFilter,
    SharedFullFilter, TableFilter,
};
use crate::sst::format::{read_block, BlockHandle, Footer, FOOTER_LEN};
use crate::sst::index_search::{IndexPosition, IndexSearch};
use crate::sst::properties::TableProperties;
use crate::sst::table_builder::RANGE_TOMBSTONE_BLOCK;
use crate::stats::{Stats, Ticker};
use crate::store_id::StoreId;

/// A point lookup's key buffer larger than this (a block of very long keys) is not kept.
const KEPT_POINT_LOOKUP_KEY_BYTES: usize = 4096;

thread_local! {
    /// The buffer point lookups rebuild a data block's keys in, kept for the thread's next
    /// lookup: a new one would be allocated and grown in every block searched.
    static POINT_LOOKUP_KEY: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// A block as the block cache holds it.
#[derive(Clone)]
pub(crate) enum CachedBlock {
    /// A data block, parsed.
    Data(Arc<Block>),
    /// A filter partition: raw policy bytes.
    Filter(Arc<Vec<u8>>),
    /// A filter's top-level block, parsed, when filters are charged to the cache.
    FilterBlock(Arc<dyn FilterBlockReader>),
    /// An index block and its search array, when index blocks are charged to the cache.
    Index(Arc<IndexBlock>),
    /// A range filter, decoded, when filters are charged to the cache.
    RangeFilter(Arc<TableRangeFilter>),
}

impl CachedBlock {
    /// What kind of block it is, for the cache's accounting by kind.
    pub(crate) fn kind(&self) -> BlockKind {
        match self {
            CachedBlock::Data(_) => BlockKind::Data,
            CachedBlock::Filter(_) | CachedBlock::FilterBlock(_) | CachedBlock::RangeFilter(_) => {
                BlockKind::Filter
            }
            CachedBlock::Index(_) => BlockKind::Index,
        }
    }
}

/// The kinds of block a table reads through the block cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockKind {
    Data = 0,
    Filter = 1,
    Index = 2,
}

/// Where a table keeps its index and filter blocks (see the `Options` of the same names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct MetaBlockPlacement {
    /// Index and filter blocks go through the block cache, charged to it, instead of being read
    /// at open and kept with the table.
    pub(crate) charge_to_cache: bool,
    /// A partitioned filter's partition index stays with the table even when charging.
    pub(crate) pin_partition_index: bool,
}

/// An index block and the dense search array over it (see `index_search.rs`), held together
/// whether pinned with the table or cached.
pub(crate) struct IndexBlock {
    block: Arc<Block>,
    search: Option<IndexSearch>,
}

impl IndexBlock {
    fn new(block: Arc<Block>) -> IndexBlock {
        let search = IndexSearch::new(&block);
        IndexBlock { block, search }
    }

    /// Bytes it holds: the block and the search array.
    fn size(&self) -> usize {
        self.block.size() + self.search.as_ref().map_or(0, IndexSearch::size)
    }
}

/// Where a table keeps its index block.
enum IndexPlacement {
    Pinned(Arc<IndexBlock>),
    Cached(BlockHandle),
}

/// An index block, borrowed from its table or shared with the cache.
enum IndexRef<'a> {
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

/// A table's range filter, kept with the table or shared with the block cache.
pub(crate) enum RangeFilterRef<'a> {
    Kept(&'a TableRangeFilter),
    Cached(Arc<TableRangeFilter>),
}

impl std::ops::Deref for RangeFilterRef<'_> {
    type Target = TableRangeFilter;

    fn deref(&self) -> &TableRangeFilter {
        match self {
            RangeFilterRef::Kept(f) => f,
            RangeFilterRef::Cached(f) => f,
        }
    }
}

/// The block cache shared by every table of a store, keyed by (file number, block offset).
pub(crate) type BlockCache = ShardedLruCache<(u64, u64), CachedBlock>;

/// What one table's point lookup did; the value found as `V` (see [`TakeValue`]).
#[derive(Debug)]
pub(crate) struct TableSearch<V = Vec<u8>> {
    /// The filter's layout and answer ("maybe" = true), if the table has a filter it could read
    /// and asked it.
    pub(crate) filter: Option<(FilterLayout, bool)>,
    /// The data block read, if any.
    pub(crate) data_block: Option<BlockHandle>,
    /// What the table holds for the key: its newest value or point tombstone at or below the
    /// lookup's sequence.
    pub(crate) found: Option<NewestEntry<V>>,
    /// The sequence of `found`'s entry.
    pub(crate) found_sequence: u64,
    /// The sequence of the table's newest range tombstone over the key at or below the lookup's
    /// sequence (0 if none).
    pub(crate) range_tombstone: u64,
}

impl<V> TableSearch<V> {
    /// A search that has found nothing yet.
    fn start(filter: Option<(FilterLayout, bool)>, data_block: Option<BlockHandle>) -> Self {
        TableSearch {
            filter,
            data_block,
            found: None,
            found_sequence: 0,
            range_tombstone: 0,
        }
    }

    /// Whether one of the table's range tombstones deletes the key for this lookup: one at or
    /// below its sequence is newer than the entry found, or there is no entry. Deeper tables
    /// hold only older entries of the key, so the key is deleted.
    #[inline]
    pub(crate) fn covered(&self) -> bool {
        self.range_tombstone > 0
            && (self.found.is_none() || self.found_sequence < self.range_tombstone)
    }
}

/// A point lookup between [`TableReader::locate`] and [`TableReader::finish_search`]: what the
/// search did so far (nothing found yet), and the data block left to seek in, if any.
pub(crate) struct Located<V = Vec<u8>> {
    search: TableSearch<V>,
    block: Option<Arc<Block>>,
}

impl<V> Located<V> {
    /// The data block left to seek in, if the filter let the key through to one.
    pub(crate) fn block(&self) -> Option<&Arc<Block>> {
        self.block.as_ref()
    }
}

/// How a table search hands out the value it found.
pub(crate) trait TakeValue {
    type Value;
    /// The value under `it` in `block`.
    fn take(block: &Arc<Block>, it: &BlockIter) -> Self::Value;

    /// What a search that found the entry under `it` (of `kind`, at `seq`) answers: its value,
    /// or that the key is deleted. A search after an entry's sequence rather than its value
    /// ([`TakeSequence`]) answers both kinds alike.
    #[inline(always)]
    fn found(
        block: &Arc<Block>,
        it: &BlockIter,
        kind: ValueKind,
        _seq: u64,
    ) -> NewestEntry<Self::Value> {
        match kind {
            ValueKind::Value => NewestEntry::Value(Self::take(block, it)),
            ValueKind::ExpiringValue => NewestEntry::Expiring(Self::take(block, it)),
            // A writer never puts a range tombstone in a data block.
            ValueKind::Deletion | ValueKind::RangeDeletion => NewestEntry::Deleted,
        }
    }
}

/// The sequence of the entry found, value or tombstone alike, as `NewestEntry::Value`: what a
/// transaction's conflict check asks of a table (whether the key changed since its snapshot).
pub(crate) struct TakeSequence;

impl TakeValue for TakeSequence {
    type Value = u64;

    fn take(_block: &Arc<Block>, it: &BlockIter) -> u64 {
        // A search asks `found`, which has the sequence already parsed.
        parse_internal_key(it.key()).map_or(0, |k| k.seq)
    }

    #[inline]
    fn found(_block: &Arc<Block>, _it: &BlockIter, _kind: ValueKind, seq: u64) -> NewestEntry<u64> {
        NewestEntry::Value(seq)
    }
}

/// A copy of the value (`Db::get`).
pub(crate) struct CopyValue;

impl TakeValue for CopyValue {
    type Value = Vec<u8>;

    #[inline]
    fn take(_block: &Arc<Block>, it: &BlockIter) -> Vec<u8> {
        it.value().to_vec()
    }
}

/// A view of the value in its block, which it keeps alive (`Db::get_pinned`).
pub(crate) struct PinValue;

impl TakeValue for PinValue {
    type Value = PinnedValue;

    #[inline]
    fn take(block: &Arc<Block>, it: &BlockIter) -> PinnedValue {
        PinnedValue::in_block(block, it.value_range())
    }
}

/// An open table.
pub(crate) struct TableReader {
    file: File,
    path: PathBuf,
    number: u64,
    file_len: u64,
    index: IndexPlacement,
    filter: Option<TableFilter>,
    /// Where its range filter block is, if it has one, and the block's format.
    range_filter_handle: Option<(BlockHandle, RangeFilterFormat)>,
    /// Its range filter, read when a bounded read first asks it (a table that compaction alone
    /// opens never reads it) and kept in memory from then on, unless filters are charged to the
    /// block cache: then it is read through the cache each time and this stays empty.
    range_filter: OnceLock<TableRangeFilter>,
    /// Index and filter blocks are charged to the block cache.
    charged: bool,
    /// The store's prefix extractor, if the filter holds its prefixes.
    prefix: Option<PrefixExtractor>,
    properties: TableProperties,
    /// Its range tombstones, read at open; `None` if it has none.
    range_tombstones: Option<Arc<FragmentedRangeTombstones>>,
    cache: Arc<BlockCache>,
    stats: Arc<Stats>,
}

/// What the MANIFEST says a table is. A file that disagrees is not the table the store wrote
/// under that name (another store's, or an older file), and is refused rather than read.
pub(crate) struct ExpectedTable<'a> {
    pub(crate) store_id: &'a StoreId,
    pub(crate) size: u64,
    pub(crate) smallest: &'a [u8],
    pub(crate) largest: &'a [u8],
}

/// Reads and verifies the footer and the metaindex block of the table `file` (at `path`, of
/// `file_len` bytes).
///
/// # Errors
/// `Error::Corruption` naming the file if it is too short or either is damaged; `Error::Io` if it
/// cannot be read.
fn read_metaindex(file: &File, path: &Path, file_len: u64) -> Result<(Footer, Arc<Block>)> {
    let bad = |what: &str| Error::corruption(path, what);
    if file_len < FOOTER_LEN as u64 {
        return Err(bad("file too short to be a table"));
    }
    let mut footer = [0u8; FOOTER_LEN];
    read_exact_at(file, &mut footer, file_len - FOOTER_LEN as u64).map_err(io_at(path))?;
    let footer = Footer::decode(&footer, path)?;
    let metaindex = read_block(file, path, footer.metaindex, file_len)?;
    let metaindex = Block::new(metaindex).ok_or_else(|| bad("malformed metaindex block"))?;
    Ok((footer, Arc::new(metaindex)))
}

/// The properties of the table at `path`, read alone (footer, metaindex, properties block, each
/// verified): what a table says about itself, for a file no MANIFEST names.
///
/// # Errors
/// `Error::Corruption` naming the file if it is not a table or any of those is damaged;
/// `Error::Io` if it cannot be read.
pub(crate) fn read_properties(path: &Path) -> Result<TableProperties> {
    let file = File::open(path).map_err(io_at(path))?;
    let file_len = file.metadata().map_err(io_at(path))?.len();
    let bad = |what: &str| Error::corruption(path, what);
    let (_, metaindex) = read_metaindex(&file, path, file_len)?;
    let mut it = metaindex.iter(KeyOrder::Bytewise);
    it.seek(b"properties");
    if !it.valid() || it.key() != b"properties" {
        return Err(bad("no properties block"));
    }
    let handle =
        BlockHandle::decode_exact(it.value()).ok_or_else(|| bad("bad handle in metaindex"))?;
    let block = read_block(&file, path, handle, file_len)?;
    TableProperties::decode(block).ok_or_else(|| bad("malformed properties block"))
}

impl TableReader {
    /// Opens table `number` at `path`, reading and verifying its footer, metaindex, properties,
    /// index and (if its policy is known) filter, and, if `expected` is given, that the file is
    /// that table: its size, store identity, number and key range.
    ///
    /// # Errors
    /// `Error::Corruption` naming the file if any of those is damaged or differs; `Error::Io` if it
    /// cannot be read.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn open(
        path: &Path,
        number: u64,
        expected: Option<&ExpectedTable<'_>>,
        placement: MetaBlockPlacement,
        cache: Arc<BlockCache>,
        stats: Arc<Stats>,
        policies: &PolicyRegistry,
    ) -> Result<TableReader> {
        let file = File::open(path).map_err(io_at(path))?;
        let file_len = file.metadata().map_err(io_at(path))?.len();
        let bad = |what: &str| Error::corruption(path, what);
        if let Some(e) = expected {
            if file_len != e.size {
                return Err(bad(&format!(
                    "the file is {file_len} bytes, the MANIFEST says {}: not this store's table",
                    e.size
                )));
            }
        }
        let (footer, metaindex) = read_metaindex(&file, path, file_len)?;
        let mut properties = None;
        let mut filter = None;
        let mut range_tombstones = None;
        let mut range_filter_handle = None;
        let mut it = metaindex.iter(KeyOrder::Bytewise);
        it.seek_to_first();
        while it.valid() {
            let handle = BlockHandle::decode_exact(it.value())
                .ok_or_else(|| bad("bad handle in metaindex"))?;
            let name = it.key();
            if name == b"properties" {
                let block = read_block(&file, path, handle, file_len)?;
                properties = Some(
                    TableProperties::decode(block)
                        .ok_or_else(|| bad("malformed properties block"))?,
                );
            } else if name == RANGE_TOMBSTONE_BLOCK.as_bytes() {
                let block = read_block(&file, path, handle, file_len)?;
                let tombstones = FragmentedRangeTombstones::decode(block).map_err(bad)?;
                range_tombstones = (!tombstones.is_empty()).then(|| Arc::new(tombstones));
            } else if let Some(format) = RangeFilterFormat::of_block(name) {
                range_filter_handle = Some((handle, format));
            } else if filter.is_none() {
                filter = TableFilter::open(
                    name,
                    handle,
                    policies,
                    placement.charge_to_cache,
                    placement.pin_partition_index,
                    || read_block(&file, path, handle, file_len),
                    |layout| Error::corruption(path, format!("malformed {layout} filter block")),
                )?;
            }
            it.next();
        }
        if it.is_corrupt() {
            return Err(bad("malformed metaindex entry"));
        }
        let properties = properties.ok_or_else(|| bad("no properties block"))?;
        if let Some(e) = expected {
            check_identity(&properties, number, e).map_err(|what| bad(&what))?;
        }
        let index = if placement.charge_to_cache {
            IndexPlacement::Cached(footer.index)
        } else {
            let block = read_block(&file, path, footer.index, file_len)?;
            let block = Block::new(block).ok_or_else(|| bad("malformed index block"))?;
            IndexPlacement::Pinned(Arc::new(IndexBlock::new(Arc::new(block))))
        };
        if let Some(f) = &filter {
            stats.filter_memory_added(f.pinned_bytes());
        }
        let prefix = filter
            .as_ref()
            .and(policies.prefix_named(&properties.prefix_extractor))
            .cloned();
        Ok(TableReader {
            file,
            path: path.to_path_buf(),
            number,
            file_len,
            index,
            filter,
            range_filter_handle,
            range_filter: OnceLock::new(),
            charged: placement.charge_to_cache,
            prefix,
            properties,
            range_tombstones,
            cache,
            stats,
        })
    }

    /// Its range tombstones, if it has any.
    pub(crate) fn range_tombstones(&self) -> Option<&Arc<FragmentedRangeTombstones>> {
        self.range_tombstones.as_ref()
    }

    pub(crate) fn properties(&self) -> &TableProperties {
        &self.properties
    }

    pub(crate) fn filter(&self) -> Option<&TableFilter> {
        self.filter.as_ref()
    }

    /// Its range filter, if it has one: read from the file the first time it is asked for and
    /// kept with the table, or, when filters are charged to the block cache, taken from the cache
    /// (a filter block, counted by the `block.cache.filter.*` tickers) and read again if evicted.
    ///
    /// # Errors
    /// `Error::Corruption` naming the file if the range filter block is damaged or malformed;
    /// `Error::Io` if it cannot be read.
    pub(crate) fn range_filter(&self) -> Result<Option<RangeFilterRef<'_>>> {
        let Some((handle, format)) = self.range_filter_handle else {
            return Ok(None);
        };
        if self.charged {
            let parse = |raw: Vec<u8>| {
                TableRangeFilter::read(format, &raw).map(|f| CachedBlock::RangeFilter(Arc::new(f)))
            };
            return match self.cached_block(handle, BlockKind::Filter, parse)? {
                CachedBlock::RangeFilter(f) => Ok(Some(RangeFilterRef::Cached(f))),
                _ => Err(self.corrupt(format!(
                    "offset {} is not the range filter block",
                    handle.offset
                ))),
            };
        }
        if let Some(filter) = self.range_filter.get() {
            return Ok(Some(RangeFilterRef::Kept(filter)));
        }
        let block = read_block(&self.file, &self.path, handle, self.file_len)?;
        let filter = TableRangeFilter::read(format, &block)
            .ok_or_else(|| self.corrupt("malformed range filter block"))?;
        // Two reads may load it at once: the one kept is counted.
        if self.range_filter.set(filter).is_ok() {
            if let Some(kept) = self.range_filter.get() {
                self.stats.filter_memory_added(kept.memory_bytes());
            }
        }
        Ok(self.range_filter.get().map(RangeFilterRef::Kept))
    }

    /// The stored size of its range filter block, if it has one, and the filter if it is already
    /// kept in memory: what a report can show without reading any table's filter.
    pub(crate) fn range_filter_if_read(&self) -> Option<(u64, Option<&TableRangeFilter>)> {
        let (handle, _) = self.range_filter_handle?;
        Some((handle.size, self.range_filter.get()))
    }

    fn corrupt(&self, what: impl Into<String>) -> Error {
        Error::corruption(&self.path, what)
    }

    /// Reads a block of `kind` through the block cache. Index and filter blocks charged to the
    /// cache go in with high priority, so data blocks are evicted before them.
    fn cached_block(
        &self,
        handle: BlockHandle,
        kind: BlockKind,
        parse: impl FnOnce(Vec<u8>) -> Option<CachedBlock>,
    ) -> Result<CachedBlock> {
        let key = (self.number, handle.offset);
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
        self.cache
            .insert_with_priority(key, block.clone(), charge, priority);
        Ok(block)
    }

    /// The index block: the pinned one, or the one in the cache (read again if evicted).
    fn index_block(&self) -> Result<IndexRef<'_>> {
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

    /// The newest entry for the user key of `lookup` (an internal lookup key), asking the filter
    /// first, and what the lookup did on the way. `key_probe` is a probe of the user key, shared
    /// by every table a Get consults so the key is hashed once.
    #[inline]
    pub(crate) fn search<T: TakeValue>(
        &self,
        lookup: &[u8],
        key_probe: &FilterProbe<'_>,
    ) -> Result<TableSearch<T::Value>> {
        let located = self.locate::<T>(lookup, key_probe)?;
        self.finish_search::<T>(located, lookup)
    }

    /// The first part of [`search`](Self::search): the filter's answer and, if it lets the key
    /// through, the data block that may hold it, fetched. A batch of lookups locates every key
    /// (prefetching what the seeks will read) before it finishes any, so that their cache misses
    /// overlap.
    // Inlined into `search` whole, so that a Get pays nothing for the split.
    #[inline(always)]
    pub(crate) fn locate<T: TakeValue>(
        &self,
        lookup: &[u8],
        key_probe: &FilterProbe<'_>,
    ) -> Result<Located<T::Value>> {
        let ukey = user_key(lookup);
        let mut outcome = TableSearch::start(None, None);
        let blocks = LookupBlocks::new(self);
        // What the filter holds for this key: the key itself, or (whole-key filtering off) its
        // prefix; a key with neither cannot be filtered.
        let prefix_probe;
        let probe = if self.properties.filter_whole_keys {
            Some(key_probe)
        } else {
            prefix_probe = self
                .prefix
                .as_ref()
                .and_then(|p| p.prefix(ukey))
                .map(FilterProbe::new);
            prefix_probe.as_ref()
        };
        if let Some((f, probe)) = self.filter.as_ref().zip(probe) {
            match f.may_match(probe, lookup, &blocks)? {
                FilterAnswer::No => {
                    outcome.filter = Some((f.layout(), false));
                    return Ok(Located {
                        search: outcome,
                        block: None,
                    });
                }
                FilterAnswer::Maybe => outcome.filter = Some((f.layout(), true)),
                FilterAnswer::NotAsked => {}
            }
        }
        self.locate_block::<T>(outcome, lookup, &blocks)
    }

    /// [`locate`](Self::locate) for a key whose filter, kept in memory, has already let it
    /// through (see [`filter_in_memory`](Self::filter_in_memory)), its answer recorded as the
    /// full filter's "maybe": the index searched for the data block that may hold `lookup`,
    /// which [`fetch_located_block`](Self::fetch_located_block) then fetches. A batch searches
    /// the index for all its keys before it fetches any block, so that the searches' cache misses
    /// overlap instead of each waiting on the block cache's lock taken for the key before.
    ///
    /// # Errors
    /// As [`search`](Self::search).
    pub(crate) fn locate_past_filter<T: TakeValue>(
        &self,
        lookup: &[u8],
    ) -> Result<Located<T::Value>> {
        Ok(Located {
            search: TableSearch::start(
                Some((FilterLayout::Full, true)),
                LookupBlocks::new(self).data_block_for(lookup)?,
            ),
            block: None,
        })
    }

    /// The data block [`locate_past_filter`](Self::locate_past_filter) chose, fetched into
    /// `located` (nothing if it chose none).
    ///
    /// # Errors
    /// As [`search`](Self::search).
    pub(crate) fn fetch_located_block<V>(&self, located: &mut Located<V>) -> Result<()> {
        if let Some(handle) = located.search.data_block {
            located.block = Some(self.data_block(handle, true)?);
        }
        Ok(())
    }

    /// Starts loading the part of the index a lookup of a key of `ukey` will read, when the
    /// index is kept with the table (see `IndexSearch::prefetch`); otherwise does nothing. A
    /// batch of lookups calls it for every key a filter let through before it locates any.
    pub(crate) fn prefetch_index(&self, ukey: &[u8]) {
        if let IndexPlacement::Pinned(index) = &self.index {
            if let Some(search) = &index.search {
                search.prefetch(ukey);
            }
        }
    }

    /// The end of a `locate`: the data block `lookup` may be in, found in the index and fetched.
    #[inline(always)]
    fn locate_block<T: TakeValue>(
        &self,
        mut outcome: TableSearch<T::Value>,
        lookup: &[u8],
        blocks: &LookupBlocks<'_>,
    ) -> Result<Located<T::Value>> {
        let Some(handle) = blocks.data_block_for(lookup)? else {
            return Ok(Located {
                search: outcome,
                block: None,
            });
        };
        outcome.data_block = Some(handle);
        Ok(Located {
            search: outcome,
            block: Some(self.data_block(handle, true)?),
        })
    }

    /// The rest of [`search`](Self::search) once [`locate`](Self::locate) has run: the seek in
    /// the data block it found.
    ///
    /// # Errors
    /// As [`search`](Self::search).
    #[inline(always)]
    pub(crate) fn finish_search<T: TakeValue>(
        &self,
        located: Located<T::Value>,
        lookup: &[u8],
    ) -> Result<TableSearch<T::Value>> {
        let Located { mut search, block } = located;
        if let (Some(block), Some(handle)) = (block, search.data_block) {
            if let Some((found, seq)) = self.find_in_block::<T>(&block, handle, lookup)? {
                search.found = Some(found);
                search.found_sequence = seq;
            }
        }
        self.check_range_tombstones(&mut search, lookup);
        Ok(search)
    }

    /// Records in `search` the newest range tombstone over `lookup`'s key visible to it, if the
    /// table has range tombstones: whatever the filter said, since it knows nothing of them.
    #[inline(always)]
    fn check_range_tombstones<V>(&self, search: &mut TableSearch<V>, lookup: &[u8]) {
        if let Some(t) = &self.range_tombstones {
            if let Some(p) = parse_internal_key(lookup) {
                search.range_tombstone = t.covering_sequence(p.user_key, p.seq);
            }
        }
    }

    /// The handle of the only data block that may hold `lookup` (an internal key), or `None` if
    /// every key of the table is smaller.
    fn index_handle(&self, lookup: &[u8]) -> Result<Option<BlockHandle>> {
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

    /// Whether the table may hold keys starting with `prefix` (an in-domain prefix of the store's
    /// extractor); `None` if its filter holds no such prefixes.
    pub(crate) fn prefix_may_match(&self, prefix: &[u8]) -> Result<Option<bool>> {
        let (Some(f), Some(_)) = (&self.filter, &self.prefix) else {
            return Ok(None);
        };
        // The first key with this prefix, if the table has one, sorts at the prefix itself.
        let first = lookup_key(prefix, MAX_SEQUENCE);
        let answer = f.may_match(&FilterProbe::new(prefix), &first, &LookupBlocks::new(self))?;
        Ok(Some(answer == FilterAnswer::Maybe))
    }

    /// The filter's shape, for inspection; `None` without a filter the store can read.
    pub(crate) fn filter_shape(&self) -> Result<Option<FilterShape>> {
        self.filter
            .as_ref()
            .map(|f| f.describe(&LookupBlocks::new(self)))
            .transpose()
    }

    /// The table's filter, when it answers for a whole key from memory alone (a full filter of
    /// whole keys, kept with the table): what a [`search`](Self::search) asks first, without
    /// the search. `None` when only a search can tell.
    #[inline]
    pub(crate) fn filter_in_memory(&self) -> Option<InMemoryFilter<'_>> {
        if !self.properties.filter_whole_keys {
            return None;
        }
        self.filter.as_ref()?.in_memory()
    }

    /// [`filter_in_memory`](Self::filter_in_memory), shared: what a version keeps of the
    /// filter (see `db/level_filters.rs`).
    pub(crate) fn shared_filter_in_memory(&self) -> Option<SharedFullFilter> {
        if !self.properties.filter_whole_keys {
            return None;
        }
        self.filter.as_ref()?.shared_in_memory()
    }

    /// Starts loading the part of the filter a [`search`](Self::search) with `probe` will read,
    /// when the filter is in memory (see [`filter_in_memory`](Self::filter_in_memory) and
    /// [`FilterPolicy::prefetch`](crate::FilterPolicy::prefetch)); otherwise does nothing.
    pub(crate) fn prefetch_filter(&self, probe: &FilterProbe<'_>) {
        if let Some(f) = self.filter_in_memory() {
            f.prefetch(probe);
        }
    }

    /// [`search`](Self::search) for several keys of this table at once, sorted by user key
    /// (`probes[i]` the probe of `lookups[i]`). A full filter answers every key in one call
    /// (which may overlap their memory accesses), the keys it lets through are searched in passes
    /// that overlap their cache misses too, and each data block is read once for all the keys it
    /// may hold: then the call returns the filter's layout, `maybe[i]` is its answer for key `i`,
    /// and `out` holds `(i, search)` for the keys it let through only. Other layouts,
    /// and prefix filters, are asked one key at a time: then it returns `None` and `out` holds
    /// every key's search.
    ///
    /// # Errors
    /// As [`search`](Self::search); the first error ends the batch.
    pub(crate) fn search_batch<T: TakeValue>(
        &self,
        lookups: &[&[u8]],
        probes: &[FilterProbe<'_>],
        maybe: &mut Vec<bool>,
        out: &mut Vec<(usize, TableSearch<T::Value>)>,
    ) -> Result<Option<FilterLayout>> {
        out.clear();
        maybe.clear();
        maybe.resize(lookups.len(), true);
        let layout = match &self.filter {
            Some(f) if self.properties.filter_whole_keys => f
                .may_match_batch(probes, &LookupBlocks::new(self), maybe)?
                .then(|| f.layout()),
            _ => None,
        };
        let Some(layout) = layout else {
            for (i, (lookup, probe)) in lookups.iter().zip(probes).enumerate() {
                out.push((i, self.search::<T>(lookup, probe)?));
            }
            return Ok(None);
        };
        // In passes over the keys the filter let through, so that the cache misses of different
        // keys overlap: each key's data block from the index; the blocks, their restart arrays
        // prefetched; their restart entries prefetched; then the seeks.
        for (i, lookup) in lookups.iter().enumerate() {
            if maybe[i] {
                let outcome = TableSearch::start(Some((layout, true)), self.index_handle(lookup)?);
                out.push((i, outcome));
            }
        }
        let mut blocks: Vec<Option<Arc<Block>>> = Vec::with_capacity(out.len());
        let mut previous: Option<(BlockHandle, Arc<Block>)> = None;
        for (_, outcome) in out.iter() {
            let Some(handle) = outcome.data_block else {
                blocks.push(None);
                continue;
            };
            let block = match &previous {
                // Sorted keys that share a block follow each other: read it once for them.
                Some((h, b)) if *h == handle => Arc::clone(b),
                _ => {
                    let block = self.data_block(handle, true)?;
                    block.prefetch_restart_array();
                    previous = Some((handle, Arc::clone(&block)));
                    block
                }
            };
            blocks.push(Some(block));
        }
        for block in blocks.iter().flatten() {
            block.prefetch_restart_points();
        }
        for ((i, _), block) in out.iter().zip(&blocks) {
            if let Some(block) = block {
                block.prefetch_seek_span(lookups[*i], KeyOrder::Internal);
            }
        }
        for ((i, outcome), block) in out.iter_mut().zip(&blocks) {
            if let (Some(block), Some(handle)) = (block, outcome.data_block) {
                if let Some((found, seq)) = self.find_in_block::<T>(block, handle, lookups[*i])? {
                    outcome.found = Some(found);
                    outcome.found_sequence = seq;
                }
            }
            self.check_range_tombstones(outcome, lookups[*i]);
        }
        Ok(Some(layout))
    }

    /// The newest entry for `lookup`'s user key at or below its sequence in `block` (the data
    /// block at `handle`), and its sequence, if the block holds one.
    fn find_in_block<T: TakeValue>(
        &self,
        block: &Arc<Block>,
        handle: BlockHandle,
        lookup: &[u8],
    ) -> Result<Option<(NewestEntry<T::Value>, u64)>> {
        let mut it = block.iter_in(KeyOrder::Internal, POINT_LOOKUP_KEY.take());
        let found = self.seek_in_block::<T>(block, &mut it, handle, lookup);
        let buffer = it.into_key_buffer();
        if buffer.capacity() <= KEPT_POINT_LOOKUP_KEY_BYTES {
            POINT_LOOKUP_KEY.set(buffer);
        }
        found
    }

    /// [`find_in_block`](Self::find_in_block) with the iterator `it` over `block`.
    fn seek_in_block<T: TakeValue>(
        &self,
        block: &Arc<Block>,
        it: &mut BlockIter,
        handle: BlockHandle,
        lookup: &[u8],
    ) -> Result<Option<(NewestEntry<T::Value>, u64)>> {
        let ukey = user_key(lookup);
        it.seek(lookup);
        if it.is_corrupt() {
            return Err(self.corrupt(format!(
                "malformed entry in data block at offset {}",
                handle.offset
            )));
        }
        if !it.valid() {
            return Ok(None);
        }
        let parsed = parse_internal_key(it.key())
            .ok_or_else(|| self.corrupt("bad internal key in data block"))?;
        if parsed.user_key != ukey {
            return Ok(None);
        }
        Ok(Some((
            T::found(block, it, parsed.kind, parsed.seq),
            parsed.seq,
        )))
    }

    /// An iterator over every entry. `fill_cache` is false for compactions, which read each block
    /// once and should not push user reads out of the cache.
    pub(crate) fn iter(self: &Arc<Self>, fill_cache: bool) -> TableIter {
        TableIter {
            index: None,
            table: Arc::clone(self),
            data: None,
            fill_cache,
        }
    }
}

impl Drop for TableReader {
    fn drop(&mut self) {
        if let Some(f) = &self.filter {
            self.stats.filter_memory_released(f.pinned_bytes());
        }
        if let Some(r) = self.range_filter.get() {
            self.stats.filter_memory_released(r.memory_bytes());
        }
    }
}

/// The blocks one lookup's filter may read: filter partitions through the cache, and the index,
/// whose answer is kept so that a block-based filter and the lookup after it seek it once.
struct LookupBlocks<'a> {
    table: &'a TableReader,
    index_answer: std::cell::Cell<Option<Option<BlockHandle>>>,
}

impl<'a> LookupBlocks<'a> {
    fn new(table: &'a TableReader) -> Self {
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

/// Walks a table in either direction: the index block picks data blocks, a block iterator walks
/// each. Both are positioned exactly (the index on the current data block), so the walk turns
/// around without re-seeking.
pub(crate) struct TableIter {
    table: Arc<TableReader>,
    /// Over the index block; `None` until the first seek reads it (through the cache, when index
    /// blocks are charged to it).
    index: Option<BlockIter>,
    data: Option<BlockIter>,
    fill_cache: bool,
}

impl TableIter {
    /// The index iterator, reading the index block first if this is the first seek.
    fn index(&mut self) -> Result<&mut BlockIter> {
        if self.index.is_none() {
            let block = Arc::clone(&self.table.index_block()?.block);
            self.index = Some(block.iter(KeyOrder::Internal));
        }
        self.index
            .as_mut()
            .ok_or_else(|| self.table.corrupt("index block not read"))
    }

    fn load_data_block(&mut self) -> Result<()> {
        self.data = None;
        let Some(index) = self.index.as_ref() else {
            return Ok(());
        };
        if index.is_corrupt() {
            return Err(self.table.corrupt("malformed index block entry"));
        }
        if !index.valid() {
            return Ok(());
        }
        let handle = BlockHandle::decode_exact(index.value())
            .ok_or_else(|| self.table.corrupt("bad handle in index block"))?;
        let block = self.table.data_block(handle, self.fill_cache)?;
        self.data = Some(block.iter(KeyOrder::Internal));
        Ok(())
    }

    /// Whether the data iterator is on an entry (`Ok(true)`), has run off its block
    /// (`Ok(false)`), or found its block damaged.
    fn data_status(&mut self) -> Result<Option<bool>> {
        match &self.data {
            None => Ok(None),
            Some(d) if d.is_corrupt() => {
                self.data = None;
                Err(self.table.corrupt("malformed entry in data block"))
            }
            Some(d) => Ok(Some(d.valid())),
        }
    }

    /// Moves on past exhausted blocks until an entry or the end.
    fn skip_exhausted_blocks(&mut self) -> Result<()> {
        while self.data_status()? == Some(false) {
            if let Some(index) = self.index.as_mut() {
                index.next();
            }
            self.load_data_block()?;
            if let Some(d) = self.data.as_mut() {
                d.seek_to_first();
            }
        }
        Ok(())
    }

    /// Moves back past exhausted blocks until an entry or the beginning.
    fn skip_exhausted_blocks_backward(&mut self) -> Result<()> {
        while self.data_status()? == Some(false) {
            if let Some(index) = self.index.as_mut() {
                index.prev();
            }
            self.load_data_block()?;
            if let Some(d) = self.data.as_mut() {
                d.seek_to_last();
            }
        }
        Ok(())
    }

    /// Leaves the iterator invalid if `r` is an error.
    fn settle(&mut self, r: Result<()>) -> Result<()> {
        if r.is_err() {
            self.data = None;
        }
        r
    }

    fn try_seek_to_first(&mut self) -> Result<()> {
        self.index()?.seek_to_first();
        self.load_data_block()?;
        if let Some(d) = self.data.as_mut() {
            d.seek_to_first();
        }
        self.skip_exhausted_blocks()
    }

    fn try_seek(&mut self, target: &[u8]) -> Result<()> {
        self.index()?.seek(target);
        self.load_data_block()?;
        if let Some(d) = self.data.as_mut() {
            d.seek(target);
        }
        self.skip_exhausted_blocks()
    }

    fn try_seek_to_last(&mut self) -> Result<()> {
        self.index()?.seek_to_last();
        self.load_data_block()?;
        if let Some(d) = self.data.as_mut() {
            d.seek_to_last();
        }
        self.skip_exhausted_blocks_backward()
    }

    fn try_seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        // The first block whose index key (≥ each of its keys, < each key of the next block) is
        // ≥ target holds the last key ≤ target, unless all its keys are > target: then the block
        // before it does. Past every index key, the table's last entry is the answer.
        let index = self.index()?;
        index.seek(target);
        if !index.valid() && !index.is_corrupt() {
            return self.try_seek_to_last();
        }
        self.load_data_block()?;
        if let Some(d) = self.data.as_mut() {
            d.seek_for_prev(target);
        }
        self.skip_exhausted_blocks_backward()
    }
}

impl InternalIterator for TableIter {
    fn seek_to_first(&mut self) -> Result<()> {
        let r = self.try_seek_to_first();
        self.settle(r)
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let r = self.try_seek_to_last();
        self.settle(r)
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let r = self.try_seek(target);
        self.settle(r)
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let r = self.try_seek_for_prev(target);
        self.settle(r)
    }

    fn next(&mut self) -> Result<()> {
        if let Some(d) = self.data.as_mut() {
            d.next();
        }
        let r = self.skip_exhausted_blocks();
        self.settle(r)
    }

    fn prev(&mut self) -> Result<()> {
        if let Some(d) = self.data.as_mut() {
            d.prev();
        }
        let r = self.skip_exhausted_blocks_backward();
        self.settle(r)
    }

    fn valid(&self) -> bool {
        self.data.as_ref().is_some_and(BlockIter::valid)
    }

    fn key(&self) -> &[u8] {
        self.data.as_ref().map(BlockIter::key).unwrap_or_default()
    }

    fn value(&self) -> &[u8] {
        self.data.as_ref().map(BlockIter::value).unwrap_or_default()
    }

    fn table_number(&self) -> Option<u64> {
        Some(self.table.number)
    }
}

/// Whether the table's properties say it is the table `expected` describes; if not, what differs.
fn check_identity(
    props: &TableProperties,
    number: u64,
    expected: &ExpectedTable<'_>,
) -> std::result::Result<(), String> {
    if props.store_id != expected.store_id {
        return Err(if props.store_id.is_empty() {
            "the table carries no store identity: not this store's table".to_string()
        } else {
            "the table belongs to another store".to_string()
        });
    }
    if props.table_number != number {
        return Err(format!(
            "the table was written as number {}, not {number}",
            props.table_number
        ));
    }
    if props.smallest_key != expected.smallest || props.largest_key != expected.largest {
        return Err("the table's key range is not the one the MANIFEST records".to_string());
    }
    Ok(())
}

#[cfg(test)]
mod iter_tests {
    use super::*;
    use crate::filter::{Filter, RangeFilter};
    use crate::fs::FileSystem;
    use crate::iter::check_against_model;
    use crate::key::{compare_internal, internal_key};
    use crate::options::Compression;
    use crate::sst::table_builder::{TableBuilder, TableOptions};
    use crate::store_id::new_store_id;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// Versions of 600 user keys (1–3 each, some tombstones), values of 0–40 bytes.
    fn entries(rng: &mut StdRng) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        let mut seq = 1;
        for i in 0..600u32 {
            for _ in 0..rng.gen_range(1..=3) {
                let kind = if rng.gen_bool(0.2) {
                    ValueKind::Deletion
                } else {
                    ValueKind::Value
                };
                let user = format!("key{i:05}").into_bytes();
                let value = (0..rng.gen_range(0..40)).map(|_| rng.gen()).collect();
                out.push((internal_key(&user, seq, kind), value));
                seq += 1;
            }
        }
        out.sort_by(|a, b| compare_internal(&a.0, &b.0));
        out
    }

    /// Writes `entries` as table 1 at `path`, in small blocks (many blocks, several restart
    /// intervals each).
    fn write_table(path: &Path, entries: &[(Vec<u8>, Vec<u8>)], compression: Compression) {
        write_table_with(path, entries, compression, RangeFilter::none());
    }

    fn write_table_with(
        path: &Path,
        entries: &[(Vec<u8>, Vec<u8>)],
        compression: Compression,
        range_filter: RangeFilter,
    ) {
        let options = TableOptions {
            block_size: 256,
            restart_interval: 4,
            compression,
            filter: Filter::full(10.0),
            range_filter,
            prefix: None,
            whole_key_filtering: true,
            store_id: new_store_id(),
            keyspace_id: 0,
            keyspace: String::new(),
        };
        let mut b = TableBuilder::create(&FileSystem::default(), path, 1, options).unwrap();
        for (k, v) in entries {
            b.add(k, v).unwrap();
        }
        b.finish().unwrap();
    }

    fn open(path: &Path, charge_to_cache: bool) -> Result<Arc<TableReader>> {
        let placement = MetaBlockPlacement {
            charge_to_cache,
            pin_partition_index: false,
        };
        TableReader::open(
            path,
            1,
            None,
            placement,
            Arc::new(ShardedLruCache::new(1 << 20, 4)),
            Arc::new(Stats::new()),
            &PolicyRegistry::new(&Filter::full(10.0), None),
        )
        .map(Arc::new)
    }

    /// Probes for seeks: every key, lookup keys between and around versions, and the ends.
    fn probes(entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<Vec<u8>> {
        let mut probes: Vec<Vec<u8>> = entries.iter().map(|e| e.0.clone()).collect();
        for i in (0..610u32).step_by(3) {
            let user = format!("key{i:05}").into_bytes();
            probes.push(lookup_key(&user, MAX_SEQUENCE));
            probes.push(internal_key(&user, 0, ValueKind::Deletion));
            probes.push(lookup_key(&user, u64::from(i) * 2));
            let mut between = user.clone();
            between.push(0);
            probes.push(lookup_key(&between, 5));
        }
        probes.push(Vec::new());
        probes.push(lookup_key(b"", MAX_SEQUENCE));
        probes.push(lookup_key(b"zzz", 1));
        probes
    }

    #[test]
    fn table_iterator_walks_both_ways_across_blocks() {
        let mut rng = StdRng::seed_from_u64(3);
        let dir = tempfile::tempdir().unwrap();
        let entries = entries(&mut rng);
        let probes = probes(&entries);
        let codecs = [
            Compression::None,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd(3),
        ];
        for (n, compression) in codecs.into_iter().enumerate() {
            let path = dir.path().join(format!("{n}.sst"));
            write_table(&path, &entries, compression);
            for charge in [false, true] {
                let table = open(&path, charge).unwrap();
                for fill_cache in [true, false] {
                    let mut it = table.iter(fill_cache);
                    check_against_model(&mut it, &entries, &probes, &mut rng, 2000);
                }
            }
        }
    }

    /// The entries of a test table.
    type Entries = Vec<(Vec<u8>, Vec<u8>)>;

    /// A table of random entries with a 12-bit range filter, in a directory of its own.
    fn range_filtered_table(seed: u64) -> (tempfile::TempDir, PathBuf, Entries) {
        let mut rng = StdRng::seed_from_u64(seed);
        let dir = tempfile::tempdir().unwrap();
        let entries = entries(&mut rng);
        let path = dir.path().join("t.sst");
        write_table_with(
            &path,
            &entries,
            Compression::None,
            RangeFilter::grafite(12.0, 1 << 10),
        );
        (dir, path, entries)
    }

    #[test]
    fn the_range_filter_is_read_when_first_asked_and_a_damaged_one_is_corruption() {
        let (_dir, path, _) = range_filtered_table(5);
        let table = open(&path, false).unwrap();
        let gauge = |t: &TableReader| t.stats.snapshot().filter_bytes_in_memory();
        let before = gauge(&table);
        let filter = table.range_filter().unwrap().expect("a range filter");
        assert!(filter.may_contain(Some(b"key00007"), Some(b"key00007")));
        let bytes_kept = filter.memory_bytes() as u64;
        assert_eq!(gauge(&table), before + bytes_kept);
        // Asked again: the same filter, counted once.
        table.range_filter().unwrap();
        assert_eq!(gauge(&table), before + bytes_kept);
        let (handle, _) = table.range_filter_handle.unwrap();
        drop(table);

        let mut bytes = std::fs::read(&path).unwrap();
        bytes[handle.offset as usize + 20] ^= 0x08;
        std::fs::write(&path, &bytes).unwrap();
        // The table opens (its range filter is not read yet); asking the filter is corruption
        // naming the file, every time.
        for charge in [false, true] {
            let table = open(&path, charge).unwrap();
            for _ in 0..2 {
                match table.range_filter() {
                    Err(Error::Corruption { file, .. }) => assert_eq!(file, path),
                    other => panic!("expected corruption, got {:?}", other.map(|f| f.is_some())),
                }
            }
            let mut it = table.iter(true);
            it.seek_to_first().unwrap();
            assert!(it.valid());
        }
    }

    #[test]
    fn a_charged_range_filter_goes_through_the_cache_and_is_read_again_when_evicted() {
        let (_dir, path, entries) = range_filtered_table(6);
        let table = open(&path, true).unwrap();
        let pinned = table.stats.snapshot().filter_bytes_in_memory();
        let filter_bytes = |t: &TableReader| {
            let [_, filter, _] = t.cache.usage_by(|b: &CachedBlock| b.kind() as usize);
            filter
        };
        let ticks = |t: &TableReader| {
            let s = t.stats.snapshot();
            (
                s.ticker(Ticker::BlockCacheFilterMiss),
                s.ticker(Ticker::BlockCacheFilterHit),
            )
        };
        let before = filter_bytes(&table);
        let (miss0, hit0) = ticks(&table);
        let bytes = {
            let filter = table.range_filter().unwrap().expect("a range filter");
            assert!(filter.may_contain(Some(b"key00007"), Some(b"key00007")));
            filter.memory_bytes()
        };
        assert!(bytes > 0);
        // In the cache as a filter block, charged what it holds; nothing kept with the table.
        assert_eq!(filter_bytes(&table), before + bytes);
        assert!(table.range_filter.get().is_none());
        assert_eq!(table.stats.snapshot().filter_bytes_in_memory(), pinned);
        assert_eq!(ticks(&table), (miss0 + 1, hit0));
        table.range_filter().unwrap().expect("a range filter");
        assert_eq!(ticks(&table), (miss0 + 1, hit0 + 1));
        // Evicted, it is read from the file again and answers the same.
        let (handle, _) = table.range_filter_handle.unwrap();
        table.cache.remove(&(table.number, handle.offset));
        assert_eq!(filter_bytes(&table), before);
        let filter = table.range_filter().unwrap().expect("a range filter");
        assert_eq!(ticks(&table), (miss0 + 2, hit0 + 1));
        assert_eq!(filter.memory_bytes(), bytes);
        for (k, _) in &entries {
            let user = &k[..k.len() - 8];
            assert!(filter.may_contain(Some(user), Some(user)));
        }
    }

    #[test]
    fn an_empty_table_is_invalid_both_ways() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.sst");
        write_table(&path, &[], Compression::None);
        let table = open(&path, false).unwrap();
        let mut it = table.iter(true);
        for probe in [Vec::new(), lookup_key(b"k", 1)] {
            it.seek_to_last().unwrap();
            assert!(!it.valid());
            it.seek_for_prev(&probe).unwrap();
            assert!(!it.valid());
            it.prev().unwrap();
            assert!(!it.valid());
        }
    }

    #[test]
    fn a_damaged_data_block_is_corruption_walking_backward() {
        let mut rng = StdRng::seed_from_u64(4);
        let dir = tempfile::tempdir().unwrap();
        let entries = entries(&mut rng);
        let path = dir.path().join("t.sst");
        write_table(&path, &entries, Compression::None);
        // Find the data blocks through the index, then damage one in the middle.
        let table = open(&path, false).unwrap();
        let index = Arc::clone(&table.index_block().unwrap().block);
        let mut handles = Vec::new();
        let mut ii = index.iter(KeyOrder::Internal);
        ii.seek_to_first();
        while ii.valid() {
            handles.push((
                ii.key().to_vec(),
                BlockHandle::decode_exact(ii.value()).unwrap(),
            ));
            ii.next();
        }
        assert!(handles.len() > 10, "{} blocks", handles.len());
        let (victim_key, victim) = handles[handles.len() / 2].clone();
        drop(table);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[victim.offset as usize + 5] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let table = open(&path, false).unwrap();
        let corruption = |r: Result<()>| match r {
            Err(Error::Corruption { file, .. }) => assert_eq!(file, path),
            other => panic!("expected corruption, got {other:?}"),
        };
        // A backward walk from the end reaches the damaged block and stops there.
        let mut it = table.iter(true);
        it.seek_to_last().unwrap();
        let mut steps = 0;
        let r = loop {
            match it.prev() {
                Ok(()) if it.valid() => steps += 1,
                r => break r,
            }
        };
        corruption(r);
        assert!(!it.valid() && steps > 0);
        // So does a seek_for_prev that lands in it (at its index key, ≥ each of its keys).
        let mut it = table.iter(true);
        corruption(it.seek_for_prev(&victim_key));
        assert!(!it.valid());
        // And a turn: forward from the start, then back once the walk is past the damaged block
        // (the walk forward itself stops there, so start past it with a seek).
        let (after_key, _) = &handles[handles.len() / 2 + 1];
        let mut it = table.iter(true);
        it.seek(after_key).unwrap();
        assert!(it.valid());
        let r = loop {
            match it.prev() {
                Ok(()) if it.valid() => {}
                r => break r,
            }
        };
        corruption(r);
        assert!(!it.valid());
    }
}
