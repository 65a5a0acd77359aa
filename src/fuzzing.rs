//! Entry points for the fuzz targets in `fuzz/`: each feeds arbitrary bytes to one of the crate's
//! decoders. Compiled only with the `__fuzzing` feature and hidden from the docs; it is not part of
//! the API. Every function must return normally for every input: a panic is a finding.

use std::path::Path;
use std::sync::Arc;

use crate::cache::ShardedLruCache;
use crate::db::version::edit::VersionEdit;
use crate::error::{Error, Result};
use crate::filter::{
    BinaryFuse, CacheLocalBloom, Filter, FilterLayout, FilterPolicy, FilterProbe, LevelDbBloom,
    PolicyRegistry, Ribbon,
};
use crate::iter::InternalIterator;
use crate::key::{lookup_key, MAX_SEQUENCE};
use crate::sst::block::{Block, KeyOrder};
use crate::sst::filter_block::block_based::BlockBasedFilterReader;
use crate::sst::filter_block::full::FullFilterReader;
use crate::sst::filter_block::partitioned::PartitionedFilterReader;
use crate::sst::filter_block::{parse_filter_block, BlockSource, FilterBlockReader};
use crate::sst::format::BlockHandle;
use crate::sst::table_reader::{CopyValue, MetaBlockPlacement, TableReader};
use crate::stats::Stats;
use crate::write_batch::decode_batch;

/// Decodes `data` as a block: walks it in both key orders and seeks to `target`.
pub fn block(data: &[u8], target: &[u8]) {
    let Some(block) = Block::new(data.to_vec()) else {
        return;
    };
    let block = Arc::new(block);
    for order in [KeyOrder::Bytewise, KeyOrder::Internal] {
        let mut it = block.iter(order);
        it.seek_to_first();
        let mut n = 0usize;
        while it.valid() {
            std::hint::black_box((it.key(), it.value()));
            it.next();
            n += 1;
        }
        it.seek(target);
        if it.valid() {
            std::hint::black_box(it.key());
        }
        std::hint::black_box(n);
    }
}

/// Decompresses `data` as a stored block, then decodes what it gives as a block. The first byte
/// picks the trailer byte: 0 none, 1 snappy, 2 LZ4, 3 zstd, 4 itself; the rest is the block.
pub fn compressed_block(data: &[u8]) {
    let Some((&pick, stored)) = data.split_first() else {
        return;
    };
    let kind = [0, 1, 4, 7, pick][usize::from(pick % 5)];
    if let Ok(raw) = crate::sst::compression::decompress(kind, stored) {
        block(&raw, b"");
    }
}

/// Writes `data` to `path` and opens it as a table: a point lookup of `key`, then a full scan.
pub fn table(path: &Path, data: &[u8], key: &[u8]) {
    if std::fs::write(path, data).is_err() {
        return;
    }
    let cache = Arc::new(ShardedLruCache::new(1 << 20, 4));
    let stats = Arc::new(Stats::new());
    let registry = PolicyRegistry::new(&Filter::full(10.0), None);
    let Ok(table) = TableReader::open(
        path,
        1,
        None,
        MetaBlockPlacement::default(),
        cache,
        stats,
        &registry,
    ) else {
        return;
    };
    let table = Arc::new(table);
    let _ = table.search::<CopyValue>(&lookup_key(key, MAX_SEQUENCE), &FilterProbe::new(key));
    let _ = table.prefix_may_match(key);
    let _ = table.filter_shape();
    let mut it = table.iter(true);
    if it.seek_to_first().is_ok() {
        while it.valid() {
            std::hint::black_box((it.key(), it.value()));
            if it.next().is_err() {
                break;
            }
        }
    }
    if it.seek(&lookup_key(key, MAX_SEQUENCE)).is_ok() && it.valid() {
        std::hint::black_box(it.key());
    }
}

/// Parses `data` as a record log, then each record as a write batch and as a version edit (the
/// WAL's and the MANIFEST's record formats).
pub fn log(data: &[u8]) {
    let path = Path::new("fuzz.log");
    let Ok(contents) = crate::wal::reader::parse_log(path, data) else {
        return;
    };
    for r in &contents.records {
        std::hint::black_box(decode_batch(r));
        let _ = VersionEdit::decode(r, path);
    }
}

/// A write batch record on its own.
pub fn write_batch(data: &[u8]) {
    std::hint::black_box(decode_batch(data));
}

/// A version edit record on its own.
pub fn version_edit(data: &[u8]) {
    let _ = VersionEdit::decode(data, Path::new("MANIFEST-000001"));
}

/// What a filter reader reads besides its own block, in the `filters` target: `data` again as
/// every partition, and a data block at `block_offset` for every key.
struct FuzzBlocks<'a> {
    data: &'a [u8],
    block_offset: u64,
}

impl BlockSource for FuzzBlocks<'_> {
    fn filter_partition(&self, _handle: BlockHandle) -> Result<Arc<Vec<u8>>> {
        Ok(Arc::new(self.data.to_vec()))
    }

    fn data_block_for(&self, _lookup: &[u8]) -> Result<Option<BlockHandle>> {
        Ok(Some(BlockHandle {
            offset: self.block_offset,
            size: 0,
        }))
    }

    fn corruption(&self, what: &str) -> Error {
        Error::corruption(Path::new("fuzz.sst"), what)
    }

    fn filter_block(
        &self,
        layout: FilterLayout,
        _handle: BlockHandle,
    ) -> Result<Arc<dyn FilterBlockReader>> {
        parse_filter_block(layout, self.data.to_vec())
            .ok_or_else(|| self.corruption("malformed filter block"))
    }
}

/// Asks every filter reader about `key` over the filter bytes `data`.
pub fn filters(data: &[u8], key: &[u8], block_offset: u64) {
    let policies: [Arc<dyn FilterPolicy>; 4] = [
        Arc::new(LevelDbBloom::new(10.0)),
        Arc::new(CacheLocalBloom::new(10.0)),
        Arc::new(BinaryFuse::fuse8()),
        Arc::new(Ribbon::new(7.0)),
    ];
    let mut readers: Vec<Box<dyn FilterBlockReader>> =
        vec![Box::new(FullFilterReader::new(data.to_vec()))];
    if let Some(r) = BlockBasedFilterReader::new(data.to_vec()) {
        readers.push(Box::new(r));
    }
    if let Some(r) = PartitionedFilterReader::new(data.to_vec()) {
        readers.push(Box::new(r));
    }
    let blocks = FuzzBlocks { data, block_offset };
    let lookup = lookup_key(key, MAX_SEQUENCE);
    for p in &policies {
        std::hint::black_box(p.may_match(data, key));
        std::hint::black_box(p.probes_in(data));
        for r in &readers {
            let _ = r.may_match(p.as_ref(), &FilterProbe::new(key), &lookup, &blocks);
            let _ = r.describe(p.as_ref(), &blocks);
        }
    }
}
