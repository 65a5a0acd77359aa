//! Thin wrappers over crate-private pieces of the read and write paths, for the micro-benchmarks in
//! `benches/hot_paths.rs`: a data block (built as the table builder builds one, sought as a table
//! Get seeks it, stepped as a table iterator steps it) and a memtable (filled as a write fills
//! it). Compiled only with the `__bench-internals` feature and hidden from the docs; it is not
//! part of the API.
//!
//! Also, for `benches/filters.rs`: the cache-local bloom's probe, one key or a batch, with the
//! key's line tested portably or by AVX2 (the policy tests one key portably, a batch by AVX2
//! where the CPU has it), so the two can be timed side by side.

use std::sync::Arc;

use crate::filter::{may_match_batch_with, may_match_hash_with, FilterProbe, LineProbe};
use crate::key::{internal_key, lookup_key, parse_internal_key, ValueKind, MAX_SEQUENCE};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::sst::block::{Block, BlockIter, KeyOrder};
use crate::sst::block_builder::BlockBuilder;

/// The data block size new tables aim for by default, in bytes.
pub fn default_block_size() -> usize {
    Options::default().block_size
}

/// The restart interval of the data blocks of new tables by default.
pub fn default_restart_interval() -> usize {
    Options::default().block_restart_interval
}

/// The internal key a table stores for a value of `user_key` written at sequence `seq`.
pub fn value_key(user_key: &[u8], seq: u64) -> Vec<u8> {
    internal_key(user_key, seq, ValueKind::Value)
}

/// The internal key a Get of `user_key` seeks to: its newest version.
pub fn lookup(user_key: &[u8]) -> Vec<u8> {
    lookup_key(user_key, MAX_SEQUENCE)
}

/// A data block with one iterator over it in internal-key order, reused from seek to seek so a
/// seek is timed without the iterator's construction.
pub struct DataBlock {
    /// The iterator, which holds the block.
    iter: BlockIter,
    /// Bytes of the block, restart array included.
    size: usize,
}

impl DataBlock {
    /// Builds a block of `entries` (internal keys, see [`value_key`], in internal-key order) with
    /// a restart point every `restart_interval` entries; `None` if the bytes do not parse as a
    /// block.
    pub fn build<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        entries: &[(K, V)],
        restart_interval: usize,
    ) -> Option<DataBlock> {
        let mut b = BlockBuilder::new(restart_interval);
        for (k, v) in entries {
            b.add(k.as_ref(), v.as_ref());
        }
        let block = Arc::new(Block::new(b.finish().to_vec())?);
        Some(DataBlock {
            size: block.size(),
            iter: block.iter(KeyOrder::Internal),
        })
    }

    /// Bytes of the block, restart array included.
    pub fn size(&self) -> usize {
        self.size
    }

    /// What a table Get does in a data block: seeks to `target` (see [`lookup`]) and returns the
    /// value there if the entry is a value of the target's user key; `None` past the last entry, on
    /// another user key, on a tombstone or on a malformed entry.
    pub fn get(&mut self, target: &[u8]) -> Option<&[u8]> {
        self.iter.seek(target);
        if !self.iter.valid() {
            return None;
        }
        let found = parse_internal_key(self.iter.key())?;
        let wanted = parse_internal_key(target)?;
        (found.user_key == wanted.user_key && found.kind == ValueKind::Value)
            .then(|| self.iter.value())
    }
}

impl DataBlock {
    /// What a table iterator does in a data block on `next`: moves to the next entry, wrapping
    /// around to the first past the last (so a timed loop never runs off the end); returns the
    /// entry's value length.
    pub fn next_wrapping(&mut self) -> usize {
        self.iter.next();
        if !self.iter.valid() {
            self.iter.seek_to_first();
        }
        self.iter.value().len()
    }

    /// What a table iterator does in a data block on `prev`: moves to the previous entry (back to
    /// the restart point before it, then forward), wrapping around to the last before the first;
    /// returns the entry's value length.
    pub fn prev_wrapping(&mut self) -> usize {
        self.iter.prev();
        if !self.iter.valid() {
            self.iter.seek_to_last();
        }
        self.iter.value().len()
    }
}

/// A memtable, filled as the write path fills it.
pub struct Memtable(MemTable);

impl Memtable {
    /// An empty memtable.
    pub fn new() -> Memtable {
        Memtable(MemTable::new(0))
    }

    /// Inserts `value` for `key` at sequence `seq`, as a Put does after its WAL record.
    pub fn put(&self, seq: u64, key: &[u8], value: &[u8]) {
        self.0.add(seq, ValueKind::Value, key, value);
    }

    /// Approximate bytes held (what decides when the write path freezes a memtable).
    pub fn approximate_bytes(&self) -> usize {
        self.0.approximate_bytes()
    }
}

impl Default for Memtable {
    fn default() -> Self {
        Memtable::new()
    }
}

/// Whether this CPU can run the cache-local bloom's AVX2 line test (x86_64 with AVX2).
pub fn cache_local_has_avx2() -> bool {
    matches!(LineProbe::fastest(), LineProbe::Avx2(_))
}

/// [`CacheLocalBloom::may_match_hash`](crate::filter::CacheLocalBloom::may_match_hash) with the
/// key's line tested one bit at a time: what the policy uses for one key.
pub fn cache_local_may_match_portable(filter: &[u8], hash: u64) -> bool {
    may_match_hash_with(filter, hash, LineProbe::Portable)
}

/// [`CacheLocalBloom::may_match_hash`](crate::filter::CacheLocalBloom::may_match_hash) with the
/// key's line tested by AVX2, or one bit at a time without it (see [`cache_local_has_avx2`]).
pub fn cache_local_may_match_avx2(filter: &[u8], hash: u64) -> bool {
    may_match_hash_with(filter, hash, LineProbe::fastest())
}

/// The cache-local bloom's
/// [`may_match_batch`](crate::FilterPolicy::may_match_batch) with the lines tested one bit at a
/// time. Panics if `out` is shorter than `probes`.
pub fn cache_local_may_match_batch_portable(
    filter: &[u8],
    probes: &[FilterProbe<'_>],
    out: &mut [bool],
) {
    may_match_batch_with(filter, probes, out, LineProbe::Portable);
}

/// The cache-local bloom's
/// [`may_match_batch`](crate::FilterPolicy::may_match_batch) with the lines tested by AVX2, or one
/// bit at a time without it (see [`cache_local_has_avx2`]): what the policy uses. Panics if `out` is shorter than
/// `probes`.
pub fn cache_local_may_match_batch_avx2(
    filter: &[u8],
    probes: &[FilterProbe<'_>],
    out: &mut [bool],
) {
    may_match_batch_with(filter, probes, out, LineProbe::fastest());
}
