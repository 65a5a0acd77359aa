//! The layout axis: what the table writer feeds a filter, and what a table reader keeps of it.

use std::sync::Arc;

use super::block_based::{BlockBasedFilterBuilder, BlockBasedFilterReader};
use super::full::{FullFilterBuilder, FullFilterReader};
use super::partitioned::{PartitionedFilterBuilder, PartitionedFilterReader};
use super::{Filter, FilterLayout, FilterPolicy};
use crate::error::Result;
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

/// What a table reader keeps of its filter, by layout.
pub(crate) enum FilterBlockReader {
    /// Pinned: the whole filter block.
    BlockBased(BlockBasedFilterReader),
    /// Pinned: the whole filter.
    Full(FullFilterReader),
    /// Pinned: only the top-level index; partitions are loaded through the block cache.
    Partitioned(PartitionedFilterReader),
}

/// A table's filter: its policy and what the reader keeps.
pub(crate) struct TableFilter {
    pub(crate) policy: Arc<dyn FilterPolicy>,
    pub(crate) reader: FilterBlockReader,
}

impl TableFilter {
    pub(crate) fn layout(&self) -> FilterLayout {
        match self.reader {
            FilterBlockReader::BlockBased(_) => FilterLayout::BlockBased,
            FilterBlockReader::Full(_) => FilterLayout::Full,
            FilterBlockReader::Partitioned(_) => FilterLayout::Partitioned,
        }
    }

    /// Bytes this filter keeps in memory for as long as its table is open.
    pub(crate) fn pinned_bytes(&self) -> usize {
        match &self.reader {
            FilterBlockReader::BlockBased(r) => r.size(),
            FilterBlockReader::Full(r) => r.size(),
            FilterBlockReader::Partitioned(r) => r.size(),
        }
    }
}
