//! The partitioned layout: the full filter cut, at data-block boundaries, into partitions of about
//! `partition_bytes`, each stored as its own block, behind a top-level index block.
//!
//! The top-level index is pinned with the table; a lookup seeks the partition for its user key and
//! reads it through the block cache. Past the last partition the key is out of the table's range
//! and the answer is "no".

use std::sync::Arc;

use super::{
    BlockSource, FilterAnswer, FilterBlockBuilder, FilterBlockReader, FilterShape, WriteBlock,
};
use crate::error::{Error, Result};
use crate::filter::{FilterBitsBuilder, FilterPolicy, FilterProbe};
use crate::key::user_key;
use crate::sst::block::{Block, KeyOrder};
use crate::sst::block_builder::BlockBuilder;
use crate::sst::format::BlockHandle;

/// Builds partitions and their top-level index.
pub(crate) struct PartitionedFilterBuilder {
    bits: Box<dyn FilterBitsBuilder>,
    target_bytes: usize,
    /// Finished partitions: (last user key, filter bytes), written at `finish`.
    partitions: Vec<(Vec<u8>, Vec<u8>)>,
    last_key: Vec<u8>,
    /// A partition is full but not closed yet: it waits for the next key's prefix, so that a
    /// prefix whose keys straddle the cut is in both partitions (else a prefix check could miss it, a bug RocksDB once had).
    cut_pending: bool,
    keys: u64,
    bytes: u64,
}

impl PartitionedFilterBuilder {
    pub(crate) fn new(policy: Arc<dyn FilterPolicy>, target_bytes: usize) -> Self {
        PartitionedFilterBuilder {
            bits: policy.builder(),
            target_bytes,
            partitions: Vec::new(),
            last_key: Vec::new(),
            cut_pending: false,
            keys: 0,
            bytes: 0,
        }
    }

    fn cut(&mut self) {
        self.cut_pending = false;
        let filter = self.bits.finish();
        self.partitions.push((self.last_key.clone(), filter));
    }
}

impl FilterBlockBuilder for PartitionedFilterBuilder {
    fn start_block(&mut self, _block_offset: u64) {}

    fn add_key(&mut self, user_key: &[u8]) {
        if self.cut_pending {
            self.cut();
        }
        self.bits.add_key(user_key);
        self.last_key.clear();
        self.last_key.extend_from_slice(user_key);
        self.keys += 1;
    }

    fn add_prefix(&mut self, prefix: &[u8]) {
        if self.cut_pending {
            self.bits.add_key(prefix);
            self.cut();
        }
        self.bits.add_key(prefix);
        self.keys += 1;
    }

    fn finish_block(&mut self, last_user_key: &[u8]) {
        // The separator is the block's last user key; with prefixes only, `last_key` follows it.
        self.last_key.clear();
        self.last_key.extend_from_slice(last_user_key);
        if self.bits.num_keys() > 0 && self.bits.estimated_len() >= self.target_bytes {
            self.cut_pending = true;
        }
    }

    fn finish(&mut self, write: &mut WriteBlock<'_>) -> Result<BlockHandle> {
        if self.bits.num_keys() > 0 {
            self.cut();
        }
        let mut index = BlockBuilder::new(1);
        for (last_key, filter) in std::mem::take(&mut self.partitions) {
            let handle = write(&filter)?;
            self.bytes += filter.len() as u64;
            index.add(&last_key, &handle.encode());
        }
        let index_bytes = index.finish();
        self.bytes += index_bytes.len() as u64;
        write(index_bytes)
    }

    fn filter_bytes(&self) -> u64 {
        self.bytes
    }

    fn num_keys(&self) -> u64 {
        self.keys
    }
}

/// Where a key's partition is.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PartitionPosition {
    /// The partition that would hold the key.
    Partition(BlockHandle),
    /// The key sorts after every key of the table: certainly absent.
    PastLastKey,
    /// The top-level index is damaged.
    Corrupt,
}

/// The pinned top-level index of a partitioned filter.
pub(crate) struct PartitionedFilterReader {
    index: Arc<Block>,
}

impl PartitionedFilterReader {
    /// Parses the top-level index block; `None` if it is malformed.
    pub(crate) fn new(index_block: Vec<u8>) -> Option<Self> {
        Some(PartitionedFilterReader {
            index: Arc::new(Block::new(index_block)?),
        })
    }

    pub(crate) fn partition_for(&self, user_key: &[u8]) -> PartitionPosition {
        let mut it = self.index.iter(KeyOrder::Bytewise);
        it.seek(user_key);
        if it.is_corrupt() {
            return PartitionPosition::Corrupt;
        }
        if !it.valid() {
            return PartitionPosition::PastLastKey;
        }
        match BlockHandle::decode_exact(it.value()) {
            Some(h) => PartitionPosition::Partition(h),
            None => PartitionPosition::Corrupt,
        }
    }

    /// Every partition's handle, in key order; `None` if the index is damaged.
    pub(crate) fn partitions(&self) -> Option<Vec<BlockHandle>> {
        let mut out = Vec::new();
        let mut it = self.index.iter(KeyOrder::Bytewise);
        it.seek_to_first();
        while it.valid() {
            out.push(BlockHandle::decode_exact(it.value())?);
            it.next();
        }
        (!it.is_corrupt()).then_some(out)
    }
}

/// The damage a malformed partition index is reported as.
fn corrupt_index(blocks: &dyn BlockSource) -> Error {
    blocks.corruption("malformed filter partition index")
}

impl FilterBlockReader for PartitionedFilterReader {
    fn may_match(
        &self,
        policy: &dyn FilterPolicy,
        probe: &FilterProbe<'_>,
        lookup: &[u8],
        blocks: &dyn BlockSource,
    ) -> Result<FilterAnswer> {
        let maybe = match self.partition_for(user_key(lookup)) {
            PartitionPosition::PastLastKey => false,
            PartitionPosition::Corrupt => return Err(corrupt_index(blocks)),
            PartitionPosition::Partition(h) => {
                policy.may_match_probe(&blocks.filter_partition(h)?, probe)
            }
        };
        Ok(FilterAnswer::from_maybe(maybe))
    }

    fn pinned_bytes(&self) -> usize {
        self.index.size()
    }

    fn describe(&self, policy: &dyn FilterPolicy, blocks: &dyn BlockSource) -> Result<FilterShape> {
        let partitions = self.partitions().ok_or_else(|| corrupt_index(blocks))?;
        let probes = match partitions.first() {
            Some(&h) => policy.probes_in(&blocks.filter_partition(h)?),
            None => None,
        };
        Ok(FilterShape {
            probes,
            partitions: Some(partitions.len()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::CacheLocalBloom;

    #[test]
    fn partitions_are_cut_at_block_boundaries_and_found_by_key() {
        let policy: Arc<dyn FilterPolicy> = Arc::new(CacheLocalBloom::new(10.0));
        let mut b = PartitionedFilterBuilder::new(Arc::clone(&policy), 256);
        let keys: Vec<Vec<u8>> = (0..2000u32)
            .map(|i| format!("key{i:06}").into_bytes())
            .collect();
        for block in keys.chunks(50) {
            b.start_block(0);
            for k in block {
                b.add_key(k);
            }
            b.finish_block(block.last().unwrap());
        }
        let mut written: Vec<Vec<u8>> = Vec::new();
        let top = b
            .finish(&mut |bytes: &[u8]| {
                written.push(bytes.to_vec());
                Ok(BlockHandle {
                    offset: written.len() as u64 - 1,
                    size: bytes.len() as u64,
                })
            })
            .unwrap();
        assert!(
            written.len() > 3,
            "expected several partitions, got {}",
            written.len() - 1
        );
        let reader = PartitionedFilterReader::new(written[top.offset as usize].clone()).unwrap();
        assert_eq!(reader.partitions().unwrap().len(), written.len() - 1);
        for k in &keys {
            match reader.partition_for(k) {
                PartitionPosition::Partition(h) => {
                    assert!(policy.may_match(&written[h.offset as usize], k))
                }
                other => panic!("{other:?} for a present key"),
            }
        }
        assert_eq!(reader.partition_for(b"zzz"), PartitionPosition::PastLastKey);
    }
}
