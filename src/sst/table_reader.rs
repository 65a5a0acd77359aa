//! Reads a table: opens it, checking that it is the table the MANIFEST names, and pins its index
//! and filter; reads its range filter when first asked. Point lookups, filter first, are in
//! `table_reader/lookup.rs`, the reads of its blocks (through the cache or pinned) and the
//! index's answer for a key in `blocks.rs`, iteration in `iter.rs`.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::error::{Error, Result};
use crate::filter::range::{RangeFilterFormat, TableRangeFilter};
use crate::filter::PolicyRegistry;
use crate::fs::{io_at, read_exact_at};
use crate::key::set_sequence;
use crate::prefix::PrefixExtractor;
use crate::range_tombstones::FragmentedRangeTombstones;
use crate::sst::block::{Block, KeyOrder};
use crate::sst::filter_block::{FilterBlockReader, TableFilter};
use crate::sst::format::{read_block, BlockHandle, Footer, FOOTER_LEN};
use crate::sst::properties::TableProperties;
use crate::sst::table_builder::RANGE_TOMBSTONE_BLOCK;
use crate::stats::Stats;
use crate::store_id::StoreId;
use block_cache::StoreCache;

pub(crate) mod block_cache;
mod blocks;
mod iter;
mod lookup;

use blocks::{IndexBlock, IndexPlacement};
pub(crate) use iter::TableIter;
pub(crate) use lookup::{CopyValue, Located, PinValue, TableSearch, TakeSequence, TakeValue};

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
    /// For an ingested table, the sequence every entry is read at (each is stored at 0).
    global_sequence: Option<u64>,
    /// Its range tombstones, read at open; `None` if it has none.
    range_tombstones: Option<Arc<FragmentedRangeTombstones>>,
    /// The block cache, as its store sees it.
    cache: StoreCache,
    stats: Arc<Stats>,
}

/// What the MANIFEST says a table is. A file that disagrees is not the table the store wrote
/// under that name (another store's, or an older file), and is refused rather than read.
pub(crate) struct ExpectedTable<'a> {
    pub(crate) store_id: &'a StoreId,
    pub(crate) size: u64,
    pub(crate) smallest: &'a [u8],
    pub(crate) largest: &'a [u8],
    /// Set for a table built outside the store and ingested: the sequence its entries are read
    /// at. Such a table records number 0 and its keys at sequence 0.
    pub(crate) global_sequence: Option<u64>,
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
        cache: StoreCache,
        stats: Arc<Stats>,
        policies: &PolicyRegistry,
    ) -> Result<TableReader> {
        let file = File::open(path).map_err(io_at(path))?;
        let file_len = file.metadata().map_err(io_at(path))?.len();
        let bad = |what: &str| Error::corruption(path, what);
        if let Some(e) = expected
            && file_len != e.size
        {
            return Err(bad(&format!(
                "the file is {file_len} bytes, the MANIFEST says {}: not this store's table",
                e.size
            )));
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
            global_sequence: expected.and_then(|e| e.global_sequence),
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
        if self.range_filter.set(filter).is_ok()
            && let Some(kept) = self.range_filter.get()
        {
            self.stats.filter_memory_added(kept.memory_bytes());
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
    let (mut smallest, mut largest) = (props.smallest_key.clone(), props.largest_key.clone());
    match expected.global_sequence {
        Some(seq) => {
            if !props.external || props.table_number != 0 {
                return Err(format!(
                    "the MANIFEST records an ingested table, but the file is the store's table \
                     number {}",
                    props.table_number
                ));
            }
            set_sequence(&mut smallest, seq);
            set_sequence(&mut largest, seq);
        }
        None if props.table_number != number => {
            return Err(format!(
                "the table was written as number {}, not {number}",
                props.table_number
            ));
        }
        None => {}
    }
    if smallest != expected.smallest || largest != expected.largest {
        return Err("the table's key range is not the one the MANIFEST records".to_string());
    }
    Ok(())
}

#[cfg(test)]
mod iter_tests {
    use super::*;
    use crate::filter::{Filter, RangeFilter};
    use crate::fs::FileSystem;
    use crate::iter::{check_against_model, InternalIterator};
    use crate::key::{compare_internal, internal_key, lookup_key, ValueKind, MAX_SEQUENCE};
    use crate::sst::compression::Compression;
    use crate::sst::table_builder::{TableBuilder, TableOptions};
    use crate::stats::Ticker;
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
                let value = (0..rng.gen_range(0..40)).map(|_| rng.r#gen()).collect();
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
            pacer: None,
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
            StoreCache::private(1 << 20, 1.0),
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
            let [_, filter, _] = t.cache.usage_by_kind();
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
        table
            .cache
            .remove(&table.cache.key(table.number, handle.offset));
        assert_eq!(filter_bytes(&table), before);
        let filter = table.range_filter().unwrap().expect("a range filter");
        assert_eq!(ticks(&table), (miss0 + 2, hit0 + 1));
        assert_eq!(filter.memory_bytes(), bytes);
        for (k, _) in &entries {
            let user = &k[..k.len() - 8];
            assert!(filter.may_contain(Some(user), Some(user)));
        }
    }

    /// An ingested table: each key once, stored at sequence 0, read at the table's sequence. Its
    /// iterator walks and seeks as one that stored them at that sequence would, and a point
    /// lookup older than it finds nothing.
    #[test]
    fn an_ingested_table_shows_its_entries_at_its_sequence() {
        let mut rng = StdRng::seed_from_u64(8);
        let dir = tempfile::tempdir().unwrap();
        let global = 1000;
        let mut stored = Vec::new();
        let mut shown = Vec::new();
        for i in 0..600u32 {
            let user = format!("key{i:05}").into_bytes();
            let kind = if i % 7 == 3 {
                ValueKind::Deletion
            } else {
                ValueKind::Value
            };
            let value: Vec<u8> = (0..rng.gen_range(0..40)).map(|_| rng.r#gen()).collect();
            stored.push((internal_key(&user, 0, kind), value.clone()));
            shown.push((internal_key(&user, global, kind), value));
        }
        let path = dir.path().join("ingested.sst");
        write_table(&path, &stored, Compression::None);
        let mut probes = probes(&shown);
        for i in (0..610u32).step_by(2) {
            let user = format!("key{i:05}").into_bytes();
            for seq in [0, global - 1, global, global + 1, MAX_SEQUENCE] {
                probes.push(lookup_key(&user, seq));
                probes.push(internal_key(&user, seq, ValueKind::Deletion));
            }
        }
        let mut table = Arc::into_inner(open(&path, false).unwrap()).unwrap();
        table.global_sequence = Some(global);
        let table = Arc::new(table);
        let mut it = table.iter(true);
        check_against_model(&mut it, &shown, &probes, &mut rng, 3000);
        let probe_key = b"key00010";
        let probe = crate::filter::FilterProbe::new(probe_key);
        for (seq, found) in [(global - 1, false), (global, true), (MAX_SEQUENCE, true)] {
            let search = table
                .search::<lookup::CopyValue>(&lookup_key(probe_key, seq), &probe)
                .unwrap();
            assert_eq!(search.found.is_some(), found, "at {seq}");
            if found {
                assert_eq!(search.found_sequence, global);
            }
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
