//! A search array over a table's index block, built when the table is opened.
//!
//! A binary search of the index block itself touches a restart offset and an entry per step, two
//! likely cache misses each on a block of thousands of entries. This keeps, per index entry, one
//! `u64`: the eight bytes of its user key that follow the prefix all the table's index keys share,
//! big-endian, and the entry's decoded block handle. Those words order as the keys do (ties
//! aside), so a Get searches a dense array of 8 bytes per data block, laid out by cache line
//! (`word_tree.rs`), and reads the index block only to break ties. Nothing here is stored on
//! disk; it costs about 25 bytes of memory per data block.

use std::cmp::Ordering;

use crate::key::{compare_internal, user_key};
use crate::prefetch::prefetch_line_of;
use crate::sst::block::Block;
use crate::sst::format::BlockHandle;
use crate::sst::word_tree::WordTree;

/// Where the first index entry ≥ a lookup key is.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum IndexPosition {
    /// At this entry, whose data block this is.
    Entry(BlockHandle),
    /// Past the last entry: every key of the table is smaller.
    PastEnd,
    /// Not decided here (the key lies outside the shared prefix, or an entry is malformed): seek
    /// the index block itself.
    Unknown,
}

/// The per-entry words of one index block.
#[derive(Debug)]
pub(crate) struct IndexSearch {
    /// The user-key bytes every index key starts with.
    prefix: Vec<u8>,
    /// Per entry, the 8 user-key bytes after `prefix`, zero-padded, big-endian.
    words: WordTree,
    /// Per entry, its decoded value: the data block's handle.
    handles: Vec<BlockHandle>,
}

/// The 8 bytes of `rest` from its start, zero-padded, as a big-endian word. Zero padding keeps
/// the order: a shorter key sorts before any extension of it, and its word is not greater.
fn word(rest: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    let n = rest.len().min(8);
    w[..n].copy_from_slice(&rest[..n]);
    u64::from_be_bytes(w)
}

impl IndexSearch {
    /// Bytes it holds in memory.
    pub(crate) fn size(&self) -> usize {
        self.prefix.len()
            + self.words.size()
            + self.handles.len() * std::mem::size_of::<BlockHandle>()
    }

    /// The search array of `index`, or `None` if it is not a block whose every entry is a restart
    /// point with a whole internal key (then lookups seek the block as before).
    pub(crate) fn new(index: &Block) -> Option<IndexSearch> {
        let n = index.num_restarts();
        if !index.every_entry_restarts() {
            return None;
        }
        let first = user_key(index.restart_entry(0)?.0);
        let last = user_key(index.restart_entry(n - 1)?.0);
        // Sorted keys: whatever the first and last share, every key between shares too.
        let shared = first.iter().zip(last).take_while(|(a, b)| a == b).count();
        let prefix = first[..shared].to_vec();
        let mut words = Vec::with_capacity(n);
        let mut handles = Vec::with_capacity(n);
        for i in 0..n {
            let (key, value) = index.restart_entry(i)?;
            words.push(word(user_key(key).get(shared..)?));
            handles.push(BlockHandle::decode_exact(value)?);
        }
        Some(IndexSearch {
            prefix,
            words: WordTree::new(&words),
            handles,
        })
    }

    /// Starts loading what a [`seek`](Self::seek) of a key of `ukey` reads below the upper
    /// layers of its word tree: the line of words it scans and the handles that line leads to.
    pub(crate) fn prefetch(&self, ukey: &[u8]) {
        let Some(rest) = ukey.strip_prefix(self.prefix.as_slice()) else {
            return;
        };
        if let Some(line) = self.words.prefetch(word(rest)) {
            // The line's handles (one per word, 16 bytes each) span up to three cache lines.
            if let Some(handles) = self.handles.get(line) {
                for handle in handles.iter().step_by(4).chain(handles.last()) {
                    prefetch_line_of(handle);
                }
            }
        }
    }

    /// The first entry of `index` (the block this was built from) whose key is ≥ `lookup`, an
    /// internal key.
    pub(crate) fn seek(&self, index: &Block, lookup: &[u8]) -> IndexPosition {
        let Some(rest) = user_key(lookup).strip_prefix(self.prefix.as_slice()) else {
            return IndexPosition::Unknown;
        };
        let w = word(rest);
        // Entries before `lo` have smaller words, so smaller keys; from `hi` on, larger keys.
        let lo = self.words.lower_bound(w);
        let hi = (lo..self.words.len())
            .find(|&i| self.words.get(i) != Some(w))
            .unwrap_or(self.words.len());
        // Between them the words tie: compare whole keys.
        let (mut left, mut right) = (lo, hi);
        while left < right {
            let mid = left + (right - left) / 2;
            let Some((key, _)) = index.restart_entry(mid) else {
                return IndexPosition::Unknown;
            };
            if compare_internal(key, lookup) == Ordering::Less {
                left = mid + 1;
            } else {
                right = mid;
            }
        }
        match self.handles.get(left) {
            Some(&h) => IndexPosition::Entry(h),
            None => IndexPosition::PastEnd,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::key::{internal_key, lookup_key, ValueKind, MAX_SEQUENCE};
    use crate::sst::block::KeyOrder;
    use crate::sst::block_builder::BlockBuilder;
    use proptest::prelude::*;

    fn index_of(keys: &[Vec<u8>]) -> Arc<Block> {
        let mut b = BlockBuilder::new(1);
        for (i, k) in keys.iter().enumerate() {
            let mut handle = Vec::new();
            BlockHandle {
                offset: 4096 * i as u64,
                size: 4000 + i as u64,
            }
            .encode_to(&mut handle);
            b.add(&internal_key(k, 7, ValueKind::Value), &handle);
        }
        Arc::new(Block::new(b.finish().to_vec()).expect("a built block parses"))
    }

    /// Where seeking the block itself lands: the model this search must agree with.
    fn block_seek(block: &Arc<Block>, lookup: &[u8]) -> Option<Vec<u8>> {
        let mut it = block.iter(KeyOrder::Internal);
        it.seek(lookup);
        it.valid().then(|| it.value().to_vec())
    }

    proptest! {
        #[test]
        fn index_search_lands_where_a_block_seek_does(
            keys in proptest::collection::btree_set(proptest::collection::vec(b'0'..b'3', 0..20), 1..60),
            probes in proptest::collection::vec(proptest::collection::vec(b'0'..b'4', 0..22), 1..40),
            seq in prop_oneof![Just(1u64), Just(7), Just(8), Just(MAX_SEQUENCE)],
        ) {
            let keys: Vec<Vec<u8>> = keys.into_iter().collect();
            let block = index_of(&keys);
            let search = IndexSearch::new(&block).expect("an index block: every entry restarts and holds a handle");
            for p in probes.iter().chain(&keys) {
                let lookup = lookup_key(p, seq);
                let got = match search.seek(&block, &lookup) {
                    IndexPosition::Entry(h) => {
                        let mut v = Vec::new();
                        h.encode_to(&mut v);
                        Some(Some(v))
                    }
                    IndexPosition::PastEnd => Some(None),
                    IndexPosition::Unknown => None,
                };
                if let Some(got) = got {
                    prop_assert_eq!(got, block_seek(&block, &lookup));
                } else {
                    // Only keys outside the shared prefix are left to the block.
                    prop_assert!(!p.starts_with(&search.prefix));
                }
            }
        }
    }

    #[test]
    fn a_data_block_with_restart_interval_16_gets_no_search() {
        let mut b = BlockBuilder::new(16);
        for i in 0..40u32 {
            b.add(
                &internal_key(format!("{i:04}").as_bytes(), 1, ValueKind::Value),
                b"v",
            );
        }
        let block = Block::new(b.finish().to_vec()).expect("a built block parses");
        assert!(IndexSearch::new(&block).is_none());
    }
}
