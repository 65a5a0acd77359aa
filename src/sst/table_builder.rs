//! Writes a table: data blocks, filter block(s), properties, metaindex, index, footer.
//!
//! Format: `docs/table_format.md`, *Layout*; what the filter layouts are fed:
//! `docs/filters.md`, *What the table writer feeds a layout*.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::filter::range::SEGMENTED_GRAFITE_BLOCK;
use crate::filter::{Filter, RangeFilter, SegmentedGrafiteBuilder};
use crate::fs::{FileSystem, WritableFile};
use crate::key::{
    compare_internal, internal_key, parse_internal_key, user_key, ValueKind, MAX_SEQUENCE,
};
use crate::prefix::PrefixExtractor;
use crate::range_tombstones::{encode_block, Fragment};
use crate::rate_limiter::{PacedWriter, Pacer};
use crate::sst::block_builder::BlockBuilder;
use crate::sst::compression::Compression;
use crate::sst::compression::{BlockCompressor, COMPRESSION_NONE};
use crate::sst::filter_block::{new_filter_block_builder, FilterBlockBuilder};
use crate::sst::format::{block_trailer, BlockHandle, Footer};
use crate::sst::properties::TableProperties;
use crate::store_id::StoreId;

/// The metaindex name of the range tombstone block.
pub(crate) const RANGE_TOMBSTONE_BLOCK: &str = "range_tombstones";

/// The settings a table is built with.
#[derive(Clone)]
pub(crate) struct TableOptions {
    pub(crate) block_size: usize,
    pub(crate) restart_interval: usize,
    pub(crate) compression: Compression,
    pub(crate) filter: Filter,
    /// The range filter, built from the same user keys.
    pub(crate) range_filter: RangeFilter,
    /// Prefixes of in-domain keys go into the filter too.
    pub(crate) prefix: Option<PrefixExtractor>,
    /// Whole user keys go into the filter (else only prefixes).
    pub(crate) whole_key_filtering: bool,
    /// The identity of the store the table belongs to, written into its properties.
    pub(crate) store_id: StoreId,
    /// The id of the keyspace the table belongs to, written into its properties.
    pub(crate) keyspace_id: u32,
    /// The name of that keyspace, written into its properties.
    pub(crate) keyspace: String,
    /// The rate limiter its writes wait for, if any, and their priority.
    pub(crate) pacer: Option<Pacer>,
}

/// What a finished table is.
#[derive(Debug, Clone)]
pub(crate) struct TableSummary {
    pub(crate) file_size: u64,
    pub(crate) smallest: Vec<u8>,
    pub(crate) largest: Vec<u8>,
    /// Whether it holds range tombstones.
    pub(crate) range_tombstones: bool,
}

/// The table file, buffered, each buffer's write paced by the store's rate limiter (if any).
type TableFile = BufWriter<PacedWriter<WritableFile>>;

/// Writes one table file. Keys (internal keys) must arrive in internal-key order. A builder
/// dropped without [`finish`](TableBuilder::finish) succeeding removes its partial file, on error
/// and on panic alike.
pub(crate) struct TableBuilder {
    fs: FileSystem,
    path: PathBuf,
    /// Set once the table is complete and synced; until then, drop removes the file.
    finished: bool,
    out: TableFile,
    offset: u64,
    options: TableOptions,
    data_block: BlockBuilder,
    index_block: BlockBuilder,
    filter: Option<Box<dyn FilterBlockBuilder>>,
    range_filter: Option<SegmentedGrafiteBuilder>,
    smallest: Vec<u8>,
    last_key: Vec<u8>,
    props: TableProperties,
    compressor: BlockCompressor,
    /// Range tombstone fragments, written in their own block at `finish`.
    range_tombstones: Vec<Fragment>,
}

impl TableBuilder {
    /// Creates table `number` at `path`, which must not exist.
    pub(crate) fn create(
        fs: &FileSystem,
        path: &Path,
        number: u64,
        options: TableOptions,
    ) -> Result<TableBuilder> {
        let compressor = BlockCompressor::new(options.compression)?;
        let file = fs.create(path)?;
        let props = TableProperties {
            store_id: options.store_id.to_vec(),
            table_number: number,
            compression: options.compression.to_string(),
            keyspace: options.keyspace.clone(),
            keyspace_id: Some(options.keyspace_id),
            ..TableProperties::default()
        };
        Ok(TableBuilder {
            fs: fs.clone(),
            path: path.to_path_buf(),
            finished: false,
            out: BufWriter::with_capacity(256 << 10, PacedWriter::new(file, options.pacer.clone())),
            offset: 0,
            data_block: BlockBuilder::new(options.restart_interval),
            index_block: BlockBuilder::new(1),
            filter: new_filter_block_builder(&options.filter),
            range_filter: options.range_filter.builder(),
            options,
            smallest: Vec::new(),
            last_key: Vec::new(),
            props,
            compressor,
            range_tombstones: Vec::new(),
        })
    }

    /// Marks the table as built outside the store, for ingestion: it records number 0 and the
    /// `siftdb.external` property (`docs/table_format.md`, *Properties block*).
    pub(crate) fn mark_external(&mut self) {
        self.props.table_number = 0;
        self.props.external = true;
    }

    /// Entries added so far.
    pub(crate) fn num_entries(&self) -> u64 {
        self.props.num_entries
    }

    /// Whether it holds nothing yet: no entry and no range tombstone.
    pub(crate) fn is_empty(&self) -> bool {
        self.props.num_entries == 0 && self.range_tombstones.is_empty()
    }

    /// Adds range tombstone fragments: non-overlapping, in key order, after any added before.
    /// The table's key range grows to hold them: from the first one's start to the last one's
    /// end, which is exclusive; when it ends in a zero byte, the key before it is known exactly
    /// (nothing sorts between `k` and `k` + `0x00`), else the end itself stands in.
    pub(crate) fn add_range_tombstones(&mut self, fragments: Vec<Fragment>) {
        self.props.num_range_deletions +=
            fragments.iter().map(|f| f.seqs.len() as u64).sum::<u64>();
        self.range_tombstones.extend(fragments);
    }

    /// Bytes written so far plus the open data block: where compaction cuts its outputs.
    pub(crate) fn estimated_file_size(&self) -> u64 {
        self.offset + self.data_block.estimated_size() as u64
    }

    pub(crate) fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        let ukey = user_key(ikey);
        let block_starts = self.data_block.is_empty();
        // Versions of one key are one key to the filters: compared once for both.
        let new_key = self.props.num_entries == 0 || user_key(&self.last_key) != ukey;
        if let Some(f) = self.filter.as_mut() {
            if block_starts {
                f.start_block(self.offset);
            }
            // Versions of one key share a filter entry; a key that spans two blocks is in both.
            // Likewise one entry per prefix per block.
            let prefix = self.options.prefix.as_ref().and_then(|p| p.prefix(ukey));
            // A prefix that is the whole key is already there when whole keys are.
            let prefix =
                prefix.filter(|p| !(self.options.whole_key_filtering && p.len() == ukey.len()));
            if let Some(prefix) = prefix {
                let last = user_key(&self.last_key);
                let last_prefix = self.options.prefix.as_ref().and_then(|p| p.prefix(last));
                if block_starts || last_prefix != Some(prefix) {
                    f.add_prefix(prefix);
                }
            }
            if self.options.whole_key_filtering && (block_starts || new_key) {
                f.add_key(ukey);
            }
        }
        if let Some(r) = self.range_filter.as_mut() {
            // Tombstones too: a table holding one in a scan's range hides older versions there.
            if new_key {
                r.add_key(ukey);
            }
        }
        if self.props.num_entries == 0 {
            self.smallest = ikey.to_vec();
        }
        match parse_internal_key(ikey).map(|p| p.kind) {
            Some(ValueKind::Deletion) => self.props.num_deletions += 1,
            Some(ValueKind::ExpiringValue) => self.props.num_expiring += 1,
            _ => {}
        }
        self.props.num_entries += 1;
        self.props.raw_key_bytes += ikey.len() as u64;
        self.props.raw_value_bytes += value.len() as u64;
        self.last_key.clear();
        self.last_key.extend_from_slice(ikey);
        self.data_block.add(ikey, value);
        if self.data_block.estimated_size() >= self.options.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    fn flush_data_block(&mut self) -> Result<()> {
        if self.data_block.is_empty() {
            return Ok(());
        }
        let raw = self.data_block.finish();
        let handle = write_block(
            &mut self.out,
            &mut self.offset,
            raw,
            Some(&mut self.compressor),
        )?;
        self.data_block.reset();
        self.props.num_data_blocks += 1;
        self.props.data_bytes += handle.size;
        self.index_block.add(&self.last_key, &handle.encode());
        if let Some(f) = self.filter.as_mut() {
            f.finish_block(user_key(&self.last_key));
        }
        Ok(())
    }

    /// Writes the rest of the table, fsyncs it, and says what was written.
    pub(crate) fn finish(mut self) -> Result<TableSummary> {
        self.flush_data_block()?;
        let mut meta: Vec<(String, BlockHandle)> = Vec::new();
        if let Some(mut f) = self.filter.take() {
            let (out, offset) = (&mut self.out, &mut self.offset);
            let handle = f.finish(&mut |bytes: &[u8]| write_block(out, offset, bytes, None))?;
            if let (Some(layout), Some(policy)) =
                (self.options.filter.layout(), self.options.filter.policy())
            {
                meta.push((format!("{}{}", layout.meta_prefix(), policy.name()), handle));
                self.props.filter_layout = layout.name().to_string();
                self.props.filter_policy = policy.name().to_string();
                self.props.filter_bits_per_key = policy.bits_per_key();
                self.props.filter_whole_keys = self.options.whole_key_filtering;
                self.props.prefix_extractor = self
                    .options
                    .prefix
                    .as_ref()
                    .map(|p| p.name().to_string())
                    .unwrap_or_default();
            }
            self.props.filter_bytes = f.filter_bytes();
            self.props.filter_keys = f.num_keys();
        }
        if let Some(mut r) = self.range_filter.take() {
            let bytes = r.finish();
            let handle = write_block(&mut self.out, &mut self.offset, &bytes, None)?;
            meta.push((SEGMENTED_GRAFITE_BLOCK.to_string(), handle));
        }
        if let (Some(first), Some(last)) =
            (self.range_tombstones.first(), self.range_tombstones.last())
        {
            let handle = write_block(
                &mut self.out,
                &mut self.offset,
                &encode_block(&self.range_tombstones),
                None,
            )?;
            meta.push((RANGE_TOMBSTONE_BLOCK.to_string(), handle));
            let smallest = internal_key(&first.start, MAX_SEQUENCE, ValueKind::RangeDeletion);
            if self.props.num_entries == 0 || compare_internal(&smallest, &self.smallest).is_lt() {
                self.smallest = smallest;
            }
            let end = &last.end;
            let last_covered = match end.split_last() {
                Some((0, before)) => before,
                _ => end.as_slice(),
            };
            // The largest internal key of that user key.
            let largest = internal_key(last_covered, 0, ValueKind::Deletion);
            if self.props.num_entries == 0 || compare_internal(&largest, &self.last_key).is_gt() {
                self.last_key = largest;
            }
        }
        self.props.index_bytes = self.index_block.estimated_size() as u64;
        self.props.smallest_key = self.smallest.clone();
        self.props.largest_key = self.last_key.clone();
        let props = self.props.encode();
        let handle = write_block(&mut self.out, &mut self.offset, &props, None)?;
        meta.push(("properties".to_string(), handle));
        meta.sort_by(|a, b| a.0.cmp(&b.0));
        let mut metaindex = BlockBuilder::new(1);
        for (name, handle) in &meta {
            metaindex.add(name.as_bytes(), &handle.encode());
        }
        let metaindex_handle =
            write_block(&mut self.out, &mut self.offset, metaindex.finish(), None)?;
        let index_handle = write_block(
            &mut self.out,
            &mut self.offset,
            self.index_block.finish(),
            Some(&mut self.compressor),
        )?;
        let footer = Footer {
            metaindex: metaindex_handle,
            index: index_handle,
        }
        .encode();
        self.out.write_all(&footer)?;
        self.offset += footer.len() as u64;
        self.out.flush()?;
        self.out.get_mut().get_mut().sync()?;
        self.finished = true;
        Ok(TableSummary {
            file_size: self.offset,
            smallest: std::mem::take(&mut self.smallest),
            largest: std::mem::take(&mut self.last_key),
            range_tombstones: !self.range_tombstones.is_empty(),
        })
    }
}

impl Drop for TableBuilder {
    fn drop(&mut self) {
        if !self.finished {
            // An unfinished table is garbage; if it cannot be removed now, the next open does it.
            let _ = self.fs.remove_file(&self.path);
        }
    }
}

/// Writes `raw` (compressed by `compressor`, if given, where that is worth it) and its trailer;
/// returns its handle.
fn write_block(
    out: &mut TableFile,
    offset: &mut u64,
    raw: &[u8],
    compressor: Option<&mut BlockCompressor>,
) -> Result<BlockHandle> {
    let (contents, kind) = match compressor {
        Some(c) => c.compress(raw),
        None => (raw, COMPRESSION_NONE),
    };
    out.write_all(contents)?;
    out.write_all(&block_trailer(contents, kind))?;
    let handle = BlockHandle {
        offset: *offset,
        size: contents.len() as u64,
    };
    *offset += (contents.len() + crate::sst::format::BLOCK_TRAILER_LEN) as u64;
    Ok(handle)
}
