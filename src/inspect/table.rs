//! A read-only view of one table file: [`TableInfo`].

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::cache::ShardedLruCache;
use crate::error::{Error, Result};
use crate::filter::{Filter, FilterLayout, PolicyRegistry};
use crate::fs::{io_at, read_exact_at};
use crate::options::Compression;
use crate::sst::block::{Block, KeyOrder};
use crate::sst::compression::{
    COMPRESSION_LZ4, COMPRESSION_NONE, COMPRESSION_SNAPPY, COMPRESSION_ZSTD,
};
use crate::sst::format::{read_block, BlockHandle, Footer, FOOTER_LEN};
use crate::sst::table_reader::{MetaBlockPlacement, TableReader};
use crate::stats::Stats;

/// Where one block sits in a table file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockInfo {
    /// Offset of the block's first byte in the file.
    pub offset: u64,
    /// Bytes of the block as stored (compressed if it is), without its 5-byte trailer.
    pub size: u64,
}

impl From<BlockHandle> for BlockInfo {
    fn from(h: BlockHandle) -> Self {
        BlockInfo {
            offset: h.offset,
            size: h.size,
        }
    }
}

/// One data block: where it is and how it is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataBlockInfo {
    /// Offset and stored size.
    pub block: BlockInfo,
    /// The compression recorded in the block's trailer: [`Compression::None`] for a block
    /// stored raw (its codec did not save an eighth of it). The trailer names the codec only; a
    /// zstd block shows the level of the table's codec ([`TableInfo::compression`]), or 0 if the
    /// table does not record one.
    pub compression: Compression,
}

/// One entry of the metaindex block: a named meta block (`properties`, `fullfilter.<policy>` …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaBlockInfo {
    /// The entry's name, lossily decoded as UTF-8.
    pub name: String,
    /// Where the block is.
    pub block: BlockInfo,
}

/// A table's filter as stored: its layout, policy and size.
#[derive(Debug, Clone, PartialEq)]
pub struct FilterInfo {
    /// Where the filter lives and which keys each filter covers.
    pub layout: FilterLayout,
    /// The policy name stored in the table, for example `siftdb.CacheLocalBloom`.
    pub policy: String,
    /// Whether this crate knows the policy (a store reading this table would use the filter).
    pub policy_known: bool,
    /// Bytes of filter written (all filters, partitions and the partition index).
    pub bytes: u64,
    /// Keys fed to the filter.
    pub keys: u64,
    /// The bits per key the policy was configured with when the table was written.
    pub configured_bits_per_key: f64,
    /// Probes per key (k), as the policy reads them from its filter bytes
    /// ([`FilterPolicy::probes_in`](crate::FilterPolicy::probes_in)); `None` for a policy that
    /// does not say or this crate does not know, or a filter built from no keys.
    pub probes: Option<u32>,
    /// Number of partitions (partitioned layout, policy known).
    pub partitions: Option<usize>,
    /// The filter's top-level block: the whole filter (full), LevelDB's filter block
    /// (block-based) or the partition index (partitioned).
    pub block: BlockInfo,
}

impl FilterInfo {
    /// Bits of filter actually spent per key: `bytes · 8 / keys` (0 for no keys).
    pub fn bits_per_key(&self) -> f64 {
        if self.keys == 0 {
            0.0
        } else {
            self.bytes as f64 * 8.0 / self.keys as f64
        }
    }
}

/// A read-only view of one table file: footer, properties, blocks and filter.
///
/// Everything is read and checksum-verified by [`open`](TableInfo::open); the view holds no file
/// open afterwards.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TableInfo {
    /// The file that was read.
    pub path: PathBuf,
    /// Its size in bytes.
    pub file_size: u64,
    /// The metaindex block the footer points to.
    pub metaindex: BlockInfo,
    /// The index block the footer points to.
    pub index: BlockInfo,
    /// Every entry of the metaindex block, in order.
    pub meta_blocks: Vec<MetaBlockInfo>,
    /// Entries (values and tombstones).
    pub num_entries: u64,
    /// Tombstones among them.
    pub num_deletions: u64,
    /// Range tombstones in its range tombstone block (one per piece and sequence; see
    /// [`Db::delete_range`](crate::Db::delete_range)).
    pub num_range_deletions: u64,
    /// Data blocks, as the properties block counts them.
    pub num_data_blocks: u64,
    /// Bytes of keys as written (internal keys, before prefix compression).
    pub raw_key_bytes: u64,
    /// Bytes of values as written.
    pub raw_value_bytes: u64,
    /// Bytes of data blocks as stored (after compression, trailers excluded).
    pub data_bytes: u64,
    /// Bytes of the index block before compression, as the table builder recorded them.
    pub index_bytes: u64,
    /// The codec the table was written with ([`Options::compression_per_level`]), or `None` if
    /// the table does not record it (it was written before tables recorded their codec).
    ///
    /// [`Options::compression_per_level`]: crate::Options::compression_per_level
    pub compression: Option<Compression>,
    /// The keyspace the table belongs to (`"default"` for a table written before keyspaces
    /// existed).
    pub keyspace: String,
    /// Every data block in key order, from the index block. Each was read and its checksum
    /// verified.
    pub data_blocks: Vec<DataBlockInfo>,
    /// The filter, or `None` if the table has none.
    pub filter: Option<FilterInfo>,
}

impl TableInfo {
    /// Reads and verifies the table at `path`.
    ///
    /// # Errors
    /// `Error::Corruption` naming the file if it is not a siftdb table or any block read is damaged;
    /// `Error::InvalidArgument` if `path` is a directory; `Error::Io` if it cannot be read.
    pub fn open(path: impl AsRef<Path>) -> Result<TableInfo> {
        let path = path.as_ref();
        if path.is_dir() {
            return Err(Error::InvalidArgument(format!(
                "{} is a directory, not a table file",
                path.display()
            )));
        }
        let bad = |what: String| Error::corruption(path, what);
        // The store's own reader verifies footer, metaindex, properties, index and filter. Private
        // cache and counters: inspecting a file must not disturb any open store.
        let cache = Arc::new(ShardedLruCache::new(1 << 20, 1));
        let registry = PolicyRegistry::new(&Filter::none(), None);
        let reader = TableReader::open(
            path,
            0,
            None,
            MetaBlockPlacement::default(),
            cache,
            Arc::new(Stats::new()),
            &registry,
        )?;
        let p = reader.properties().clone();
        let shape = reader.filter_shape()?;

        // What the reader does not expose (handles, per-block trailers) is read again here; the
        // footer, metaindex and index were verified once already by `TableReader::open`.
        let file = File::open(path).map_err(io_at(path))?;
        let file_size = file.metadata().map_err(io_at(path))?.len();
        let mut footer = [0u8; FOOTER_LEN];
        let footer_at = file_size
            .checked_sub(FOOTER_LEN as u64)
            .ok_or_else(|| bad("file too short to be a table".into()))?;
        read_exact_at(&file, &mut footer, footer_at).map_err(io_at(path))?;
        let footer = Footer::decode(&footer, path)?;

        let metaindex = parse_block(&file, path, footer.metaindex, file_size, "metaindex")?;
        let mut meta_blocks = Vec::new();
        let mut it = metaindex.iter(KeyOrder::Bytewise);
        it.seek_to_first();
        while it.valid() {
            let h = BlockHandle::decode_exact(it.value())
                .ok_or_else(|| bad("bad handle in metaindex".into()))?;
            meta_blocks.push(MetaBlockInfo {
                name: String::from_utf8_lossy(it.key()).into_owned(),
                block: h.into(),
            });
            it.next();
        }
        if it.is_corrupt() {
            return Err(bad("malformed metaindex entry".into()));
        }

        let compression = Compression::from_property_name(&p.compression);
        let zstd_level = match compression {
            Some(Compression::Zstd(level)) => level,
            _ => 0,
        };
        let index = parse_block(&file, path, footer.index, file_size, "index")?;
        let mut data_blocks = Vec::new();
        let mut it = index.iter(KeyOrder::Internal);
        it.seek_to_first();
        while it.valid() {
            let h = BlockHandle::decode_exact(it.value())
                .ok_or_else(|| bad("bad handle in index block".into()))?;
            // Read (and so checksum) every data block: a dump doubles as a verification.
            read_block(&file, path, h, file_size)?;
            data_blocks.push(DataBlockInfo {
                block: h.into(),
                compression: trailer_compression(&file, path, h, file_size, zstd_level)?,
            });
            it.next();
        }
        if it.is_corrupt() {
            return Err(bad("malformed index block entry".into()));
        }

        // The policy reads its own bytes (probes); the layout says how many partitions.
        let filter = meta_blocks.iter().find_map(|m| {
            let (layout, policy) = FilterLayout::parse_meta_name(&m.name)?;
            Some(FilterInfo {
                layout,
                policy: policy.to_string(),
                policy_known: shape.is_some(),
                bytes: p.filter_bytes,
                keys: p.filter_keys,
                configured_bits_per_key: p.filter_bits_per_key,
                probes: shape.and_then(|s| s.probes),
                partitions: shape.and_then(|s| s.partitions),
                block: m.block,
            })
        });

        Ok(TableInfo {
            path: path.to_path_buf(),
            file_size,
            metaindex: footer.metaindex.into(),
            index: footer.index.into(),
            meta_blocks,
            num_entries: p.num_entries,
            num_deletions: p.num_deletions,
            num_range_deletions: p.num_range_deletions,
            num_data_blocks: p.num_data_blocks,
            raw_key_bytes: p.raw_key_bytes,
            raw_value_bytes: p.raw_value_bytes,
            data_bytes: p.data_bytes,
            index_bytes: p.index_bytes,
            compression,
            keyspace: match p.keyspace.as_str() {
                "" => crate::store_id::DEFAULT_KEYSPACE.to_string(),
                name => name.to_string(),
            },
            data_blocks,
            filter,
        })
    }
}

fn parse_block(
    file: &File,
    path: &Path,
    handle: BlockHandle,
    file_len: u64,
    what: &str,
) -> Result<Arc<Block>> {
    let raw = read_block(file, path, handle, file_len)?;
    Block::new(raw)
        .map(Arc::new)
        .ok_or_else(|| Error::corruption(path, format!("malformed {what} block")))
}

/// The compression byte of the trailer after the block at `h`, zstd taken at `zstd_level`.
fn trailer_compression(
    file: &File,
    path: &Path,
    h: BlockHandle,
    file_len: u64,
    zstd_level: i32,
) -> Result<Compression> {
    let at = h
        .offset
        .checked_add(h.size)
        .filter(|&at| at < file_len)
        .ok_or_else(|| {
            Error::corruption(path, format!("data block handle {h:?} points past the end"))
        })?;
    let mut byte = [0u8; 1];
    read_exact_at(file, &mut byte, at).map_err(io_at(path))?;
    match byte[0] {
        COMPRESSION_NONE => Ok(Compression::None),
        COMPRESSION_SNAPPY => Ok(Compression::Snappy),
        COMPRESSION_LZ4 => Ok(Compression::Lz4),
        COMPRESSION_ZSTD => Ok(Compression::Zstd(zstd_level)),
        other => Err(Error::corruption(
            path,
            format!("unknown compression type {other} at offset {}", h.offset),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Db, Options};

    /// A store with one flushed table holding `n` keys, under `filter`.
    fn table_with(filter: Filter, n: u32) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default().filter(filter)).unwrap();
        for i in 0..n {
            db.put(format!("key{i:06}"), vec![b'v'; 100]).unwrap();
        }
        db.delete("key000000").unwrap();
        db.flush().unwrap();
        drop(db);
        let sst = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "sst"))
            .unwrap();
        (dir, sst)
    }

    #[test]
    fn reads_every_layout() {
        for (filter, layout, probes) in [
            (Filter::full(10.0), FilterLayout::Full, 6),
            (Filter::block_based(10.0), FilterLayout::BlockBased, 6),
            (
                Filter::partitioned(10.0).partition_bytes(512),
                FilterLayout::Partitioned,
                6,
            ),
        ] {
            let (_dir, sst) = table_with(filter, 5000);
            let info = TableInfo::open(&sst).unwrap();
            assert_eq!(info.num_entries, 5000); // the tombstone replaced key000000
            assert_eq!(info.num_deletions, 1);
            assert_eq!(info.data_blocks.len() as u64, info.num_data_blocks);
            assert!(info.data_blocks.len() > 10);
            assert!(info
                .data_blocks
                .windows(2)
                .all(|w| w[0].block.offset < w[1].block.offset));
            assert!(info.meta_blocks.iter().any(|m| m.name == "properties"));
            let f = info.filter.unwrap();
            assert_eq!(f.layout, layout);
            assert!(f.policy_known);
            assert_eq!(f.keys, 5000);
            assert_eq!(f.probes, Some(probes), "{layout}");
            assert!(
                (9.0..12.0).contains(&f.bits_per_key()),
                "{}",
                f.bits_per_key()
            );
            match layout {
                FilterLayout::Partitioned => assert!(f.partitions.unwrap() > 3),
                _ => assert_eq!(f.partitions, None),
            }
        }
    }

    #[test]
    fn no_filter() {
        let (_dir, sst) = table_with(Filter::none(), 100);
        let info = TableInfo::open(&sst).unwrap();
        assert!(info.filter.is_none());
        assert_eq!(info.num_entries, 100);
    }

    #[test]
    fn damaged_and_foreign_files_are_corruption_not_panics() {
        let (dir, sst) = table_with(Filter::full(10.0), 2000);
        let good = std::fs::read(&sst).unwrap();
        let copy = dir.path().join("copy.sst");
        // Not a table at all, too short, and every byte of the real one flipped in turn (strided
        // to keep the test quick).
        let mut cases = vec![b"hello, world".to_vec(), vec![0u8; 4096]];
        cases.extend((0..good.len()).step_by(97).map(|i| {
            let mut b = good.clone();
            b[i] ^= 0x55;
            b
        }));
        cases.push(good[..good.len() - 1].to_vec());
        for bytes in cases {
            std::fs::write(&copy, &bytes).unwrap();
            match TableInfo::open(&copy) {
                Err(Error::Corruption { file, .. }) => assert_eq!(file, copy),
                other => panic!("expected corruption, got {other:?}"),
            }
        }
        std::fs::write(&copy, b"short").unwrap();
        assert!(matches!(
            TableInfo::open(&copy),
            Err(Error::Corruption { .. })
        ));
        assert!(matches!(
            TableInfo::open(dir.path()),
            Err(Error::InvalidArgument(_))
        ));
    }
}
