//! Reads a table: pins its index and filter at open, answers point lookups filter-first, and
//! iterates its entries in order.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::cache::ShardedLruCache;
use crate::db::store_id::StoreId;
use crate::error::{Error, Result};
use crate::filter::block_based::BlockBasedFilterReader;
use crate::filter::full::FullFilterReader;
use crate::filter::layout::{FilterBlockReader, TableFilter};
use crate::filter::partitioned::{PartitionLookup, PartitionedFilterReader};
use crate::filter::{FilterLayout, FilterProbe, PolicyRegistry};
use crate::fs::io_at;
use crate::iter::InternalIterator;
use crate::key::{lookup_key, parse_internal_key, user_key, ValueKind, MAX_SEQUENCE};
use crate::memtable::Lookup;
use crate::prefix::PrefixExtractor;
use crate::sst::block::{Block, BlockIter, KeyOrder};
use crate::sst::format::{read_block, BlockHandle, Footer, FOOTER_LEN};
use crate::sst::index_search::{IndexPosition, IndexSearch};
use crate::sst::properties::TableProperties;
use crate::stats::{FilterVerdict, Stats, Ticker};

/// A block as the block cache holds it.
#[derive(Clone)]
pub(crate) enum CachedBlock {
    /// A data block, parsed.
    Data(Arc<Block>),
    /// A filter partition: raw policy bytes.
    Filter(Arc<Vec<u8>>),
}

/// The block cache shared by every table of a store, keyed by (file number, block offset).
pub(crate) type BlockCache = ShardedLruCache<(u64, u64), CachedBlock>;

/// What one table's point lookup did.
#[derive(Debug, Default)]
pub(crate) struct TableLookup {
    /// The filter's layout and answer ("maybe" = true), if the table has a filter it could read.
    pub(crate) filter: Option<(FilterLayout, bool)>,
    /// The data block read, if any.
    pub(crate) data_block: Option<BlockHandle>,
    /// What the table holds for the key.
    pub(crate) found: Option<Lookup>,
}

/// An open table.
pub(crate) struct TableReader {
    file: File,
    path: PathBuf,
    number: u64,
    file_len: u64,
    index: Arc<Block>,
    /// A dense search array over `index`, if it has the usual shape.
    index_search: Option<IndexSearch>,
    filter: Option<TableFilter>,
    /// The store's prefix extractor, if the filter holds its prefixes.
    prefix: Option<PrefixExtractor>,
    properties: TableProperties,
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

impl TableReader {
    /// Opens table `number` at `path`, reading and verifying its footer, metaindex, properties,
    /// index and (if its policy is known) filter, and, if `expected` is given, that the file is
    /// that table: its size, store identity, number and key range.
    ///
    /// # Errors
    /// `Error::Corruption` naming the file if any of those is damaged or differs; `Error::Io` if it
    /// cannot be read.
    pub(crate) fn open(
        path: &Path,
        number: u64,
        expected: Option<&ExpectedTable<'_>>,
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
        if file_len < FOOTER_LEN as u64 {
            return Err(bad("file too short to be a table"));
        }
        let mut footer = [0u8; FOOTER_LEN];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut footer, file_len - FOOTER_LEN as u64)
            .map_err(io_at(path))?;
        let footer = Footer::decode(&footer, path)?;
        let metaindex = read_block(&file, path, footer.metaindex, file_len)?;
        let metaindex =
            Arc::new(Block::new(metaindex).ok_or_else(|| bad("malformed metaindex block"))?);
        let mut properties = None;
        let mut filter = None;
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
            } else if filter.is_none() {
                filter = open_filter(&file, path, file_len, name, handle, policies)?;
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
        let index = read_block(&file, path, footer.index, file_len)?;
        let index = Arc::new(Block::new(index).ok_or_else(|| bad("malformed index block"))?);
        let index_search = IndexSearch::new(&index);
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
            index_search,
            filter,
            prefix,
            properties,
            cache,
            stats,
        })
    }

    pub(crate) fn properties(&self) -> &TableProperties {
        &self.properties
    }

    pub(crate) fn filter(&self) -> Option<&TableFilter> {
        self.filter.as_ref()
    }

    fn corrupt(&self, what: impl Into<String>) -> Error {
        Error::corruption(&self.path, what)
    }

    /// Reads a block through the block cache.
    fn cached_block(
        &self,
        handle: BlockHandle,
        parse: impl FnOnce(Vec<u8>) -> Option<CachedBlock>,
    ) -> Result<CachedBlock> {
        let key = (self.number, handle.offset);
        if let Some(b) = self.cache.get(&key) {
            self.stats.inc(Ticker::BlockCacheHit);
            return Ok(b);
        }
        self.stats.inc(Ticker::BlockCacheMiss);
        let raw = read_block(&self.file, &self.path, handle, self.file_len)?;
        let charge = raw.len();
        let block = parse(raw)
            .ok_or_else(|| self.corrupt(format!("malformed block at offset {}", handle.offset)))?;
        self.cache.insert(key, block.clone(), charge);
        Ok(block)
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
        match self.cached_block(handle, |raw| {
            Block::new(raw).map(|b| CachedBlock::Data(Arc::new(b)))
        })? {
            CachedBlock::Data(b) => Ok(b),
            CachedBlock::Filter(_) => Err(self.corrupt(format!(
                "offset {} is a filter, not a data block",
                handle.offset
            ))),
        }
    }

    /// A filter partition, through the cache.
    pub(crate) fn filter_partition(&self, handle: BlockHandle) -> Result<Arc<Vec<u8>>> {
        self.stats.inc(Ticker::FilterPartitionsRead);
        match self.cached_block(handle, |raw| Some(CachedBlock::Filter(Arc::new(raw))))? {
            CachedBlock::Filter(f) => Ok(f),
            CachedBlock::Data(_) => Err(self.corrupt(format!(
                "offset {} is a data block, not a filter",
                handle.offset
            ))),
        }
    }

    /// The newest entry for the user key of `lookup` (an internal lookup key), asking the filter
    /// first, and counting the filter's verdict against `level`. `probe` is the user key's, shared
    /// by every table a Get consults so the key is hashed once.
    pub(crate) fn get(
        &self,
        lookup: &[u8],
        probe: &FilterProbe<'_>,
        level: usize,
    ) -> Result<Option<Lookup>> {
        let outcome = self.lookup(lookup, probe)?;
        if let Some((layout, maybe)) = outcome.filter {
            let verdict = match (maybe, outcome.found.is_some()) {
                (false, _) => FilterVerdict::Useful,
                (true, false) => FilterVerdict::FalsePositive,
                (true, true) => FilterVerdict::TruePositive,
            };
            self.stats.record_filter(level, layout, verdict);
        }
        Ok(outcome.found)
    }

    /// A point lookup, saying what it did: what the filter answered and which data block it read.
    /// `key_probe` is a probe of `lookup`'s user key.
    pub(crate) fn lookup(&self, lookup: &[u8], key_probe: &FilterProbe<'_>) -> Result<TableLookup> {
        let ukey = user_key(lookup);
        let mut outcome = TableLookup::default();
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
        let filter = self.filter.as_ref().zip(probe);
        // Full and partitioned filters are asked before the index is touched.
        if let Some((f, probe)) = filter {
            let maybe = match &f.reader {
                FilterBlockReader::Full(r) => Some(r.may_match(f.policy.as_ref(), probe)),
                FilterBlockReader::Partitioned(r) => Some(match r.partition_for(ukey) {
                    PartitionLookup::PastLastKey => false,
                    PartitionLookup::Corrupt => {
                        return Err(self.corrupt("malformed filter partition index"))
                    }
                    PartitionLookup::Partition(h) => {
                        f.policy.may_match_probe(&self.filter_partition(h)?, probe)
                    }
                }),
                FilterBlockReader::BlockBased(_) => None,
            };
            outcome.filter = maybe.map(|m| (f.layout(), m));
            if maybe == Some(false) {
                return Ok(outcome);
            }
        }
        let Some(handle) = self.index_handle(lookup)? else {
            return Ok(outcome);
        };
        // The block-based filter is asked for the block the index chose.
        if let Some((f, probe)) = filter {
            if let FilterBlockReader::BlockBased(r) = &f.reader {
                let maybe = r.may_match(f.policy.as_ref(), handle.offset, probe.key());
                outcome.filter = Some((FilterLayout::BlockBased, maybe));
                if !maybe {
                    return Ok(outcome);
                }
            }
        }
        outcome.data_block = Some(handle);
        outcome.found = self.search_block(handle, lookup, ukey)?;
        Ok(outcome)
    }

    /// The handle of the only data block that may hold `lookup` (an internal key), or `None` if
    /// every key of the table is smaller.
    fn index_handle(&self, lookup: &[u8]) -> Result<Option<BlockHandle>> {
        if let Some(search) = &self.index_search {
            match search.seek(&self.index, lookup) {
                IndexPosition::PastEnd => return Ok(None),
                IndexPosition::Entry(h) => return Ok(Some(h)),
                IndexPosition::Unknown => {}
            }
        }
        let decode = |v: &[u8]| {
            BlockHandle::decode_exact(v).ok_or_else(|| self.corrupt("bad handle in index block"))
        };
        let mut index = self.index.iter(KeyOrder::Internal);
        index.seek(lookup);
        if index.is_corrupt() {
            return Err(self.corrupt("malformed index block entry"));
        }
        if !index.valid() {
            return Ok(None);
        }
        decode(index.value()).map(Some)
    }

    /// Whether the table may hold keys starting with `prefix` (an in-domain prefix of the store's
    /// extractor); `None` if its filter holds no such prefixes.
    pub(crate) fn prefix_may_match(&self, prefix: &[u8]) -> Result<Option<bool>> {
        let (Some(f), Some(_)) = (&self.filter, &self.prefix) else {
            return Ok(None);
        };
        let maybe = match &f.reader {
            FilterBlockReader::Full(r) => r.may_match(f.policy.as_ref(), &FilterProbe::new(prefix)),
            FilterBlockReader::Partitioned(r) => match r.partition_for(prefix) {
                PartitionLookup::PastLastKey => false,
                PartitionLookup::Corrupt => {
                    return Err(self.corrupt("malformed filter partition index"))
                }
                PartitionLookup::Partition(h) => {
                    f.policy.may_match(&self.filter_partition(h)?, prefix)
                }
            },
            FilterBlockReader::BlockBased(r) => {
                // The first key with this prefix, if any, is in the block the index finds for it.
                let mut index = self.index.iter(KeyOrder::Internal);
                index.seek(&lookup_key(prefix, MAX_SEQUENCE));
                if index.is_corrupt() {
                    return Err(self.corrupt("malformed index block entry"));
                }
                if !index.valid() {
                    false
                } else {
                    let handle = BlockHandle::decode_exact(index.value())
                        .ok_or_else(|| self.corrupt("bad handle in index block"))?;
                    r.may_match(f.policy.as_ref(), handle.offset, prefix)
                }
            }
        };
        Ok(Some(maybe))
    }

    fn search_block(
        &self,
        handle: BlockHandle,
        lookup: &[u8],
        ukey: &[u8],
    ) -> Result<Option<Lookup>> {
        let block = self.data_block(handle, true)?;
        let mut it = block.iter(KeyOrder::Internal);
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
        Ok(Some(match parsed.kind {
            ValueKind::Value => Lookup::Value(it.value().to_vec()),
            ValueKind::Deletion => Lookup::Deleted,
        }))
    }

    /// An iterator over every entry. `fill_cache` is false for compactions, which read each block
    /// once and should not push user reads out of the cache.
    pub(crate) fn iter(self: &Arc<Self>, fill_cache: bool) -> TableIter {
        TableIter {
            index: self.index.iter(KeyOrder::Internal),
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
    }
}

/// Reads the filter a metaindex entry names, if its layout and policy are known.
fn open_filter(
    file: &File,
    path: &Path,
    file_len: u64,
    name: &[u8],
    handle: BlockHandle,
    policies: &PolicyRegistry,
) -> Result<Option<TableFilter>> {
    let Ok(name) = std::str::from_utf8(name) else {
        return Ok(None);
    };
    for layout in FilterLayout::ALL {
        let Some(policy_name) = name.strip_prefix(layout.meta_prefix()) else {
            continue;
        };
        // A policy this store does not know: read the table without its filter.
        let Some(policy) = policies.find(policy_name) else {
            return Ok(None);
        };
        let block = read_block(file, path, handle, file_len)?;
        let bad = || Error::corruption(path, format!("malformed {layout} filter block"));
        let reader = match layout {
            FilterLayout::BlockBased => {
                FilterBlockReader::BlockBased(BlockBasedFilterReader::new(block).ok_or_else(bad)?)
            }
            FilterLayout::Full => FilterBlockReader::Full(FullFilterReader::new(block)),
            FilterLayout::Partitioned => {
                FilterBlockReader::Partitioned(PartitionedFilterReader::new(block).ok_or_else(bad)?)
            }
        };
        return Ok(Some(TableFilter {
            policy: Arc::clone(policy),
            reader,
        }));
    }
    Ok(None)
}

/// Walks a table in order: the index block picks data blocks, a block iterator walks each.
pub(crate) struct TableIter {
    table: Arc<TableReader>,
    index: BlockIter,
    data: Option<BlockIter>,
    fill_cache: bool,
}

impl TableIter {
    fn load_data_block(&mut self) -> Result<()> {
        self.data = None;
        if self.index.is_corrupt() {
            return Err(self.table.corrupt("malformed index block entry"));
        }
        if !self.index.valid() {
            return Ok(());
        }
        let handle = BlockHandle::decode_exact(self.index.value())
            .ok_or_else(|| self.table.corrupt("bad handle in index block"))?;
        let block = self.table.data_block(handle, self.fill_cache)?;
        self.data = Some(block.iter(KeyOrder::Internal));
        Ok(())
    }

    /// Moves on past exhausted blocks until an entry or the end.
    fn skip_exhausted_blocks(&mut self) -> Result<()> {
        loop {
            match &self.data {
                None => return Ok(()),
                Some(d) if d.is_corrupt() => {
                    self.data = None;
                    return Err(self.table.corrupt("malformed entry in data block"));
                }
                Some(d) if d.valid() => return Ok(()),
                Some(_) => {}
            }
            self.index.next();
            self.load_data_block()?;
            if let Some(d) = self.data.as_mut() {
                d.seek_to_first();
            }
        }
    }
}

impl InternalIterator for TableIter {
    fn seek_to_first(&mut self) -> Result<()> {
        self.index.seek_to_first();
        self.load_data_block()?;
        if let Some(d) = self.data.as_mut() {
            d.seek_to_first();
        }
        self.skip_exhausted_blocks()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.index.seek(target);
        self.load_data_block()?;
        if let Some(d) = self.data.as_mut() {
            d.seek(target);
        }
        self.skip_exhausted_blocks()
    }

    fn next(&mut self) -> Result<()> {
        if let Some(d) = self.data.as_mut() {
            d.next();
        }
        self.skip_exhausted_blocks()
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
