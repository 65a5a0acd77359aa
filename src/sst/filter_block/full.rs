//! The full layout: one filter over every user key of the table, stored as one block, kept in
//! memory and asked before the index.

use std::sync::Arc;

use super::{
    BlockSource, FilterAnswer, FilterBlockBuilder, FilterBlockReader, FilterShape, WriteBlock,
};
use crate::error::Result;
use crate::filter::{FilterBitsBuilder, FilterPolicy, FilterProbe};
use crate::sst::format::BlockHandle;

/// Feeds every key of the table to one policy builder.
pub(crate) struct FullFilterBuilder {
    bits: Box<dyn FilterBitsBuilder>,
    keys: u64,
    bytes: u64,
}

impl FullFilterBuilder {
    pub(crate) fn new(policy: Arc<dyn FilterPolicy>) -> Self {
        FullFilterBuilder {
            bits: policy.builder(),
            keys: 0,
            bytes: 0,
        }
    }
}

impl FilterBlockBuilder for FullFilterBuilder {
    fn start_block(&mut self, _block_offset: u64) {}

    fn add_key(&mut self, user_key: &[u8]) {
        self.bits.add_key(user_key);
        self.keys += 1;
    }

    fn finish_block(&mut self, _last_user_key: &[u8]) {}

    fn finish(&mut self, write: &mut WriteBlock<'_>) -> Result<BlockHandle> {
        let filter = self.bits.finish();
        self.bytes = filter.len() as u64;
        write(&filter)
    }

    fn filter_bytes(&self) -> u64 {
        self.bytes
    }

    fn num_keys(&self) -> u64 {
        self.keys
    }
}

/// The whole filter of a table, kept in memory with the table.
pub(crate) struct FullFilterReader {
    /// Shared with the versions that list the table (see `db/version/level_filters.rs`).
    data: Arc<[u8]>,
}

impl FullFilterReader {
    pub(crate) fn new(data: Vec<u8>) -> Self {
        FullFilterReader { data: data.into() }
    }

    /// The filter's bytes, shared.
    pub(crate) fn shared_bytes(&self) -> &Arc<[u8]> {
        &self.data
    }

    /// The filter's bytes, as its policy reads them.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.data
    }
}

impl FilterBlockReader for FullFilterReader {
    fn may_match(
        &self,
        policy: &dyn FilterPolicy,
        probe: &FilterProbe<'_>,
        _lookup: &[u8],
        _blocks: &dyn BlockSource,
    ) -> Result<FilterAnswer> {
        Ok(FilterAnswer::from_maybe(
            policy.may_match_probe(&self.data, probe),
        ))
    }

    fn may_match_batch(
        &self,
        policy: &dyn FilterPolicy,
        probes: &[FilterProbe<'_>],
        out: &mut [bool],
    ) -> bool {
        policy.may_match_batch(&self.data, probes, out);
        true
    }

    fn pinned_bytes(&self) -> usize {
        self.data.len()
    }

    fn describe(
        &self,
        policy: &dyn FilterPolicy,
        _blocks: &dyn BlockSource,
    ) -> Result<FilterShape> {
        Ok(FilterShape {
            probes: policy.probes_in(&self.data),
            partitions: None,
        })
    }
}
