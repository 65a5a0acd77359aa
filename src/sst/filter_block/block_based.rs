//! The block-based layout (LevelDB's filter block): one filter per 2 KiB of data-block offsets,
//! each holding the keys of the data blocks that start in its range.
//!
//! Format: `docs/filters.md`, *Block-based*.

use std::sync::Arc;

use super::{
    BlockSource, FilterAnswer, FilterBlockBuilder, FilterBlockReader, FilterShape, WriteBlock,
};
use crate::coding::{fixed32_at, put_fixed32};
use crate::error::Result;
use crate::filter::{FilterBitsBuilder, FilterPolicy, FilterProbe};
use crate::sst::format::BlockHandle;

/// lg of the span of data-block offsets one filter covers (2 KiB).
pub(crate) const FILTER_BASE_LG: u8 = 11;

/// Builds LevelDB's filter block.
pub(crate) struct BlockBasedFilterBuilder {
    bits: Box<dyn FilterBitsBuilder>,
    result: Vec<u8>,
    starts: Vec<u32>,
    keys: u64,
    bytes: u64,
}

impl BlockBasedFilterBuilder {
    pub(crate) fn new(policy: Arc<dyn FilterPolicy>) -> Self {
        BlockBasedFilterBuilder {
            bits: policy.builder(),
            result: Vec::new(),
            starts: Vec::new(),
            keys: 0,
            bytes: 0,
        }
    }

    /// Closes the filter for the next 2 KiB range with the keys gathered so far (maybe none).
    fn generate_filter(&mut self) {
        self.starts.push(self.result.len() as u32);
        if self.bits.num_keys() > 0 {
            let filter = self.bits.finish();
            self.result.extend_from_slice(&filter);
        }
    }
}

impl FilterBlockBuilder for BlockBasedFilterBuilder {
    fn start_block(&mut self, block_offset: u64) {
        let index = block_offset >> FILTER_BASE_LG;
        while (self.starts.len() as u64) < index {
            self.generate_filter();
        }
    }

    fn add_key(&mut self, user_key: &[u8]) {
        self.bits.add_key(user_key);
        self.keys += 1;
    }

    fn finish_block(&mut self, _last_user_key: &[u8]) {}

    fn finish(&mut self, write: &mut WriteBlock<'_>) -> Result<BlockHandle> {
        if self.bits.num_keys() > 0 {
            self.generate_filter();
        }
        let array_start = self.result.len() as u32;
        let mut block = std::mem::take(&mut self.result);
        for &s in &self.starts {
            put_fixed32(&mut block, s);
        }
        put_fixed32(&mut block, array_start);
        block.push(FILTER_BASE_LG);
        self.bytes = block.len() as u64;
        write(&block)
    }

    fn filter_bytes(&self) -> u64 {
        self.bytes
    }

    fn num_keys(&self) -> u64 {
        self.keys
    }
}

/// A table's whole filter block, kept in memory with the table.
pub(crate) struct BlockBasedFilterReader {
    data: Vec<u8>,
    array_start: usize,
    num: usize,
    base_lg: u8,
}

impl BlockBasedFilterReader {
    /// Parses the block; `None` if its tail does not describe a filter block.
    pub(crate) fn new(data: Vec<u8>) -> Option<Self> {
        let n = data.len();
        if n < 5 {
            return None;
        }
        let base_lg = data[n - 1];
        let array_start = usize::try_from(fixed32_at(&data, n - 5)?).ok()?;
        if array_start > n - 5 || base_lg > 40 {
            return None;
        }
        let num = (n - 5 - array_start) / 4;
        Some(BlockBasedFilterReader {
            data,
            array_start,
            num,
            base_lg,
        })
    }

    /// The bytes of filter `index`: `Some(empty)` for a range with no keys, `None` past the
    /// filters or where the offsets are damaged.
    fn filter(&self, index: usize) -> Option<&[u8]> {
        if index >= self.num {
            return None;
        }
        let start_at = self.array_start + index * 4;
        let start = fixed32_at(&self.data, start_at)? as usize;
        let limit = if index + 1 < self.num {
            fixed32_at(&self.data, start_at + 4)? as usize
        } else {
            self.array_start
        };
        (start <= limit && limit <= self.array_start).then(|| &self.data[start..limit])
    }

    /// Whether `user_key` may be in the data block that starts at `block_offset`. Past the
    /// filters, or on damaged offsets, the answer is "maybe", as LevelDB's.
    pub(crate) fn may_match_in_block(
        &self,
        policy: &dyn FilterPolicy,
        block_offset: u64,
        user_key: &[u8],
    ) -> bool {
        let filter = usize::try_from(block_offset >> self.base_lg)
            .ok()
            .and_then(|i| self.filter(i));
        match filter {
            Some([]) => false,
            Some(f) => policy.may_match(f, user_key),
            None => true,
        }
    }
}

impl FilterBlockReader for BlockBasedFilterReader {
    /// Asks the filter of the one data block the index picks for `lookup`.
    fn may_match(
        &self,
        policy: &dyn FilterPolicy,
        probe: &FilterProbe<'_>,
        lookup: &[u8],
        blocks: &dyn BlockSource,
    ) -> Result<FilterAnswer> {
        let Some(block) = blocks.data_block_for(lookup)? else {
            return Ok(FilterAnswer::NotAsked);
        };
        let maybe = self.may_match_in_block(policy, block.offset, probe.key());
        Ok(FilterAnswer::from_maybe(maybe))
    }

    fn pinned_bytes(&self) -> usize {
        self.data.len()
    }

    /// Probes are read from the first filter that holds keys.
    fn describe(
        &self,
        policy: &dyn FilterPolicy,
        _blocks: &dyn BlockSource,
    ) -> Result<FilterShape> {
        let probes = (0..self.num)
            .filter_map(|i| self.filter(i))
            .find(|f| !f.is_empty())
            .and_then(|f| policy.probes_in(f));
        Ok(FilterShape {
            probes,
            partitions: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::LevelDbBloom;

    fn build(blocks: &[(u64, &[&[u8]])]) -> BlockBasedFilterReader {
        let policy: Arc<dyn FilterPolicy> = Arc::new(LevelDbBloom::new(10.0));
        let mut b = BlockBasedFilterBuilder::new(policy);
        for (offset, keys) in blocks {
            b.start_block(*offset);
            for k in *keys {
                b.add_key(k);
            }
            b.finish_block(keys.last().copied().unwrap_or_default());
        }
        let mut out = Vec::new();
        b.finish(&mut |bytes: &[u8]| {
            out = bytes.to_vec();
            Ok(BlockHandle::default())
        })
        .unwrap();
        BlockBasedFilterReader::new(out).unwrap()
    }

    #[test]
    fn empty_builder_gives_the_bare_trailer() {
        let r = build(&[]);
        assert_eq!(r.pinned_bytes(), 5);
        // No filters at all: out of range, so "maybe".
        assert!(r.may_match_in_block(&LevelDbBloom::new(10.0), 0, b"x"));
    }

    #[test]
    fn each_block_is_answered_by_its_own_filter() {
        let policy = LevelDbBloom::new(10.0);
        let r = build(&[
            (0, &[b"foo", b"bar"]),
            (1000, &[b"box"]),
            (3100, &[b"hello"]),
            (9000, &[b"zed"]),
        ]);
        // Blocks at 0 and 1000 share filter 0.
        for k in [&b"foo"[..], b"bar", b"box"] {
            assert!(r.may_match_in_block(&policy, 0, k));
            assert!(r.may_match_in_block(&policy, 1000, k));
        }
        assert!(!r.may_match_in_block(&policy, 0, b"hello"));
        assert!(r.may_match_in_block(&policy, 3100, b"hello"));
        assert!(!r.may_match_in_block(&policy, 3100, b"foo"));
        // Offsets 4096..8191 map to empty filters: nothing matches there.
        assert!(!r.may_match_in_block(&policy, 5000, b"hello"));
        assert!(r.may_match_in_block(&policy, 9000, b"zed"));
        assert!(!r.may_match_in_block(&policy, 9000, b"foo"));
    }

    #[test]
    fn malformed_blocks_are_rejected_or_answer_maybe() {
        assert!(BlockBasedFilterReader::new(vec![1, 2, 3]).is_none());
        assert!(BlockBasedFilterReader::new(vec![0xff, 0xff, 0, 0, 11]).is_none());
        let mut bogus = vec![0u8; 8];
        bogus.extend_from_slice(&[200, 0, 0, 0]); // filter 0 starts past the array
        bogus.extend_from_slice(&8u32.to_le_bytes());
        bogus.push(11);
        let r = BlockBasedFilterReader::new(bogus).unwrap();
        assert!(r.may_match_in_block(&LevelDbBloom::new(10.0), 0, b"k"));
    }
}
