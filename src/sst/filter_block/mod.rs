//! Filter layouts: where a table keeps its filter's bits, and how a lookup finds the bits for a
//! key. The bits themselves come from a [`FilterPolicy`]; a layout decides which keys share one
//! filter and in which blocks the filters live.
//!
//! Layouts live with the table format (they are made of blocks, handles and an index) and depend
//! on policies, never the reverse: `filter/` knows nothing of tables.
//!
//! Each layout has a builder, fed by the table writer, and a reader, asked by the table reader;
//! both traits are here, and each layout's read path is in its own file:
//! [`block_based`] (LevelDB's filter block, asked after the index), [`full`] (one filter, asked
//! first) and [`partitioned`] (a pinned partition index, partitions through the block cache).

pub(crate) mod block_based;
pub(crate) mod full;
pub(crate) mod partitioned;

use std::sync::Arc;

use block_based::{BlockBasedFilterBuilder, BlockBasedFilterReader};
use full::{FullFilterBuilder, FullFilterReader};
use partitioned::{PartitionedFilterBuilder, PartitionedFilterReader};

use crate::error::{Error, Result};
use crate::filter::{Filter, FilterLayout, FilterPolicy, FilterProbe, PolicyRegistry};
use crate::sst::format::BlockHandle;

/// Writes one block (uncompressed, with its trailer) to the table being built, returning its handle.
pub(crate) type WriteBlock<'a> = dyn FnMut(&[u8]) -> Result<BlockHandle> + 'a;

/// What the table writer feeds as it writes data blocks. Keys are user keys, in table order.
pub(crate) trait FilterBlockBuilder: Send {
    /// A data block starting at `block_offset` is about to receive keys.
    fn start_block(&mut self, block_offset: u64);
    /// A user key of the current data block.
    fn add_key(&mut self, user_key: &[u8]);
    /// The prefix of a key of the current data block, fed just before that key (if whole keys are
    /// filtered too). Layouts that cut filters override it to keep prefixes that straddle a cut.
    fn add_prefix(&mut self, prefix: &[u8]) {
        self.add_key(prefix);
    }
    /// The current data block is complete; `last_user_key` is its last key. Partitions are cut here.
    fn finish_block(&mut self, last_user_key: &[u8]);
    /// Writes the filter block(s) through `write` and returns the handle the metaindex points to.
    fn finish(&mut self, write: &mut WriteBlock<'_>) -> Result<BlockHandle>;
    /// Bytes of filter written so far by `finish` (all partitions and the top-level index).
    fn filter_bytes(&self) -> u64;
    /// Distinct keys added (consecutive duplicates within a block count once).
    fn num_keys(&self) -> u64;
}

/// A builder for `filter`'s layout, or `None` for no filter.
pub(crate) fn new_filter_block_builder(filter: &Filter) -> Option<Box<dyn FilterBlockBuilder>> {
    let policy = Arc::clone(filter.policy()?);
    Some(match filter.layout()? {
        FilterLayout::BlockBased => Box::new(BlockBasedFilterBuilder::new(policy)),
        FilterLayout::Full => Box::new(FullFilterBuilder::new(policy)),
        FilterLayout::Partitioned => Box::new(PartitionedFilterBuilder::new(
            policy,
            filter.target_partition_bytes(),
        )),
    })
}

/// What a filter reader may read from its table besides what it keeps in memory.
pub(crate) trait BlockSource {
    /// The filter partition at `handle` (raw policy bytes), through the block cache.
    ///
    /// # Errors
    /// `Error::Corruption` naming the table if the block is damaged.
    fn filter_partition(&self, handle: BlockHandle) -> Result<Arc<Vec<u8>>>;

    /// The data block that would hold internal key `lookup`, as the index says; `None` if every
    /// key of the table is smaller.
    ///
    /// # Errors
    /// `Error::Corruption` naming the table if the index is damaged.
    fn data_block_for(&self, lookup: &[u8]) -> Result<Option<BlockHandle>>;

    /// An `Error::Corruption` naming the table, for damage a filter reader finds itself.
    fn corruption(&self, what: &str) -> Error;
}

/// A filter's answer for one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FilterAnswer {
    /// Certainly not in the table.
    No,
    /// Perhaps in the table.
    Maybe,
    /// The filter had nothing to say: the table holds no block the key could be in (block-based:
    /// the key sorts after the last block). The table has no entry for it either.
    NotAsked,
}

impl FilterAnswer {
    /// `Maybe` if `maybe`, else `No`.
    pub(crate) fn from_maybe(maybe: bool) -> FilterAnswer {
        if maybe {
            FilterAnswer::Maybe
        } else {
            FilterAnswer::No
        }
    }
}

/// What an inspector can learn of a filter from its bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct FilterShape {
    /// Probes per key, if the policy can read them from its filter bytes.
    pub(crate) probes: Option<u32>,
    /// Partitions (partitioned layout only).
    pub(crate) partitions: Option<usize>,
}

/// What a table reader keeps of its filter, and how it answers for a key.
pub(crate) trait FilterBlockReader: Send + Sync {
    /// The layout this reader reads.
    fn layout(&self) -> FilterLayout;

    /// Whether the table may hold `probe`'s key, which a lookup of internal key `lookup` seeks.
    /// (They differ when the filter holds a key's prefix, and for prefix checks.)
    ///
    /// # Errors
    /// `Error::Corruption` naming the table if a block it reads is damaged.
    fn may_match(
        &self,
        policy: &dyn FilterPolicy,
        probe: &FilterProbe<'_>,
        lookup: &[u8],
        blocks: &dyn BlockSource,
    ) -> Result<FilterAnswer>;

    /// Bytes kept in memory for as long as the table is open.
    fn pinned_bytes(&self) -> usize;

    /// The filter's shape, for inspection: probes per key and partitions.
    ///
    /// # Errors
    /// `Error::Corruption` naming the table if a block it reads is damaged.
    fn describe(&self, policy: &dyn FilterPolicy, blocks: &dyn BlockSource) -> Result<FilterShape>;
}

/// A table's filter: its policy and the layout's reader.
pub(crate) struct TableFilter {
    pub(crate) policy: Arc<dyn FilterPolicy>,
    reader: Box<dyn FilterBlockReader>,
}

impl TableFilter {
    /// The filter a metaindex entry named `name` points to, whose top-level block is `block`.
    /// `Ok(None)` for an entry that names no filter, or a policy `policies` does not know (the
    /// table is then read without its filter).
    ///
    /// # Errors
    /// The error of `read` (the top-level block), or `malformed(layout)` if it does not parse.
    pub(crate) fn open<E>(
        name: &[u8],
        policies: &PolicyRegistry,
        read: impl FnOnce() -> std::result::Result<Vec<u8>, E>,
        malformed: impl FnOnce(FilterLayout) -> E,
    ) -> std::result::Result<Option<TableFilter>, E> {
        let Some((layout, policy)) = std::str::from_utf8(name)
            .ok()
            .and_then(FilterLayout::parse_meta_name)
        else {
            return Ok(None);
        };
        let Some(policy) = policies.find(policy) else {
            return Ok(None);
        };
        let block = read()?;
        let reader: Box<dyn FilterBlockReader> = match layout {
            FilterLayout::BlockBased => {
                Box::new(BlockBasedFilterReader::new(block).ok_or_else(|| malformed(layout))?)
            }
            FilterLayout::Full => Box::new(FullFilterReader::new(block)),
            FilterLayout::Partitioned => {
                Box::new(PartitionedFilterReader::new(block).ok_or_else(|| malformed(layout))?)
            }
        };
        Ok(Some(TableFilter {
            policy: Arc::clone(policy),
            reader,
        }))
    }

    pub(crate) fn layout(&self) -> FilterLayout {
        self.reader.layout()
    }

    /// See [`FilterBlockReader::may_match`].
    pub(crate) fn may_match(
        &self,
        probe: &FilterProbe<'_>,
        lookup: &[u8],
        blocks: &dyn BlockSource,
    ) -> Result<FilterAnswer> {
        self.reader
            .may_match(self.policy.as_ref(), probe, lookup, blocks)
    }

    /// Bytes this filter keeps in memory for as long as its table is open.
    pub(crate) fn pinned_bytes(&self) -> usize {
        self.reader.pinned_bytes()
    }

    /// See [`FilterBlockReader::describe`].
    pub(crate) fn describe(&self, blocks: &dyn BlockSource) -> Result<FilterShape> {
        self.reader.describe(self.policy.as_ref(), blocks)
    }
}
