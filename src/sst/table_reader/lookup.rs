//! Point lookups in a table, filter first: one key ([`TableReader::search`], in two halves a
//! batch of Gets interleaves), several keys at once ([`TableReader::search_batch`]), and what the
//! filter alone answers.

use std::cell::Cell;
use std::sync::Arc;

use super::blocks::LookupBlocks;
use super::TableReader;
use crate::error::Result;
use crate::filter::{FilterLayout, FilterProbe};
use crate::key::{lookup_key, parse_internal_key, user_key, ValueKind, MAX_SEQUENCE};
use crate::memtable::NewestEntry;
use crate::pinned_value::PinnedValue;
use crate::sst::block::{Block, BlockIter, KeyOrder};
use crate::sst::filter_block::{
    BlockSource, FilterAnswer, FilterShape, InMemoryFilter, SharedFullFilter,
};
use crate::sst::format::BlockHandle;

/// A point lookup's key buffer larger than this (a block of very long keys) is not kept.
const KEPT_POINT_LOOKUP_KEY_BYTES: usize = 4096;

thread_local! {
    /// The buffer point lookups rebuild a data block's keys in, kept for the thread's next
    /// lookup: a new one would be allocated and grown in every block searched.
    static POINT_LOOKUP_KEY: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// What one table's point lookup did; the value found as `V` (see [`TakeValue`]).
#[derive(Debug)]
pub(crate) struct TableSearch<V = Vec<u8>> {
    /// The filter's layout and answer ("maybe" = true), if the table has a filter it could read
    /// and asked it.
    pub(crate) filter: Option<(FilterLayout, bool)>,
    /// The data block read, if any.
    pub(crate) data_block: Option<BlockHandle>,
    /// What the table holds for the key: its newest value or point tombstone at or below the
    /// lookup's sequence.
    pub(crate) found: Option<NewestEntry<V>>,
    /// The sequence of `found`'s entry.
    pub(crate) found_sequence: u64,
    /// The sequence of the table's newest range tombstone over the key at or below the lookup's
    /// sequence (0 if none).
    pub(crate) range_tombstone: u64,
}

impl<V> TableSearch<V> {
    /// A search that has found nothing yet.
    fn start(filter: Option<(FilterLayout, bool)>, data_block: Option<BlockHandle>) -> Self {
        TableSearch {
            filter,
            data_block,
            found: None,
            found_sequence: 0,
            range_tombstone: 0,
        }
    }

    /// Whether one of the table's range tombstones deletes the key for this lookup: one at or
    /// below its sequence is newer than the entry found, or there is no entry. Deeper tables
    /// hold only older entries of the key, so the key is deleted.
    #[inline]
    pub(crate) fn covered(&self) -> bool {
        self.range_tombstone > 0
            && (self.found.is_none() || self.found_sequence < self.range_tombstone)
    }
}

/// A point lookup between [`TableReader::locate`] and [`TableReader::finish_search`]: what the
/// search did so far (nothing found yet), and the data block left to seek in, if any.
pub(crate) struct Located<V = Vec<u8>> {
    search: TableSearch<V>,
    block: Option<Arc<Block>>,
}

impl<V> Located<V> {
    /// The data block left to seek in, if the filter let the key through to one.
    pub(crate) fn block(&self) -> Option<&Arc<Block>> {
        self.block.as_ref()
    }
}

/// How a table search hands out the value it found.
pub(crate) trait TakeValue {
    type Value;
    /// The value under `it` in `block`.
    fn take(block: &Arc<Block>, it: &BlockIter) -> Self::Value;

    /// What a search that found the entry under `it` (of `kind`, at `seq`) answers: its value,
    /// or that the key is deleted. A search after an entry's sequence rather than its value
    /// ([`TakeSequence`]) answers both kinds alike.
    #[inline(always)]
    fn found(
        block: &Arc<Block>,
        it: &BlockIter,
        kind: ValueKind,
        _seq: u64,
    ) -> NewestEntry<Self::Value> {
        match kind {
            ValueKind::Value => NewestEntry::Value(Self::take(block, it)),
            ValueKind::ExpiringValue => NewestEntry::Expiring(Self::take(block, it)),
            ValueKind::Merge => NewestEntry::Merge(Self::take(block, it)),
            // A writer never puts a range tombstone in a data block.
            ValueKind::Deletion | ValueKind::RangeDeletion => NewestEntry::Deleted,
        }
    }
}

/// The sequence of the entry found, value or tombstone alike, as `NewestEntry::Value`: what a
/// transaction's conflict check asks of a table (whether the key changed since its snapshot).
pub(crate) struct TakeSequence;

impl TakeValue for TakeSequence {
    type Value = u64;

    fn take(_block: &Arc<Block>, it: &BlockIter) -> u64 {
        // A search asks `found`, which has the sequence already parsed.
        parse_internal_key(it.key()).map_or(0, |k| k.seq)
    }

    #[inline]
    fn found(_block: &Arc<Block>, _it: &BlockIter, _kind: ValueKind, seq: u64) -> NewestEntry<u64> {
        NewestEntry::Value(seq)
    }
}

/// A copy of the value (`Db::get`).
pub(crate) struct CopyValue;

impl TakeValue for CopyValue {
    type Value = Vec<u8>;

    #[inline]
    fn take(_block: &Arc<Block>, it: &BlockIter) -> Vec<u8> {
        it.value().to_vec()
    }
}

/// A view of the value in its block, which it keeps alive (`Db::get_pinned`).
pub(crate) struct PinValue;

impl TakeValue for PinValue {
    type Value = PinnedValue;

    #[inline]
    fn take(block: &Arc<Block>, it: &BlockIter) -> PinnedValue {
        PinnedValue::in_block(block, it.value_range())
    }
}

impl TableReader {
    /// The newest entry for the user key of `lookup` (an internal lookup key), asking the filter
    /// first, and what the lookup did on the way. `key_probe` is a probe of the user key, shared
    /// by every table a Get consults so the key is hashed once.
    #[inline]
    pub(crate) fn search<T: TakeValue>(
        &self,
        lookup: &[u8],
        key_probe: &FilterProbe<'_>,
    ) -> Result<TableSearch<T::Value>> {
        let located = self.locate::<T>(lookup, key_probe)?;
        self.finish_search::<T>(located, lookup)
    }

    /// The first part of [`search`](Self::search): the filter's answer and, if it lets the key
    /// through, the data block that may hold it, fetched. A batch of lookups locates every key
    /// (prefetching what the seeks will read) before it finishes any, so that their cache misses
    /// overlap.
    // Inlined into `search` whole, so that a Get pays nothing for the split.
    #[inline(always)]
    pub(crate) fn locate<T: TakeValue>(
        &self,
        lookup: &[u8],
        key_probe: &FilterProbe<'_>,
    ) -> Result<Located<T::Value>> {
        let ukey = user_key(lookup);
        let mut outcome = TableSearch::start(None, None);
        let blocks = LookupBlocks::new(self);
        // What the filter holds for this key: the key itself, or (whole-key filtering off) its
        // prefix; a key with neither cannot be filtered.
        let prefix_probe;
        let probe = if self.properties.filter_whole_keys {
            Some(key_probe)
        } else {
            prefix_probe = self
                .prefix
                .as_ref()
                .and_then(|p| p.prefix(ukey))
                .map(FilterProbe::new);
            prefix_probe.as_ref()
        };
        if let Some((f, probe)) = self.filter.as_ref().zip(probe) {
            match f.may_match(probe, lookup, &blocks)? {
                FilterAnswer::No => {
                    outcome.filter = Some((f.layout(), false));
                    return Ok(Located {
                        search: outcome,
                        block: None,
                    });
                }
                FilterAnswer::Maybe => outcome.filter = Some((f.layout(), true)),
                FilterAnswer::NotAsked => {}
            }
        }
        self.locate_block::<T>(outcome, lookup, &blocks)
    }

    /// [`locate`](Self::locate) for a key whose filter, kept in memory, has already let it
    /// through (see [`filter_in_memory`](Self::filter_in_memory)), its answer recorded as the
    /// full filter's "maybe": the index searched for the data block that may hold `lookup`,
    /// which [`fetch_located_block`](Self::fetch_located_block) then fetches. A batch searches
    /// the index for all its keys before it fetches any block, so that the searches' cache misses
    /// overlap instead of each waiting on the block cache's lock taken for the key before.
    ///
    /// # Errors
    /// As [`search`](Self::search).
    pub(crate) fn locate_past_filter<T: TakeValue>(
        &self,
        lookup: &[u8],
    ) -> Result<Located<T::Value>> {
        Ok(Located {
            search: TableSearch::start(
                Some((FilterLayout::Full, true)),
                LookupBlocks::new(self).data_block_for(lookup)?,
            ),
            block: None,
        })
    }

    /// The data block [`locate_past_filter`](Self::locate_past_filter) chose, fetched into
    /// `located` (nothing if it chose none).
    ///
    /// # Errors
    /// As [`search`](Self::search).
    pub(crate) fn fetch_located_block<V>(&self, located: &mut Located<V>) -> Result<()> {
        if let Some(handle) = located.search.data_block {
            located.block = Some(self.data_block(handle, true)?);
        }
        Ok(())
    }

    /// The end of a `locate`: the data block `lookup` may be in, found in the index and fetched.
    #[inline(always)]
    fn locate_block<T: TakeValue>(
        &self,
        mut outcome: TableSearch<T::Value>,
        lookup: &[u8],
        blocks: &LookupBlocks<'_>,
    ) -> Result<Located<T::Value>> {
        let Some(handle) = blocks.data_block_for(lookup)? else {
            return Ok(Located {
                search: outcome,
                block: None,
            });
        };
        outcome.data_block = Some(handle);
        Ok(Located {
            search: outcome,
            block: Some(self.data_block(handle, true)?),
        })
    }

    /// The rest of [`search`](Self::search) once [`locate`](Self::locate) has run: the seek in
    /// the data block it found.
    ///
    /// # Errors
    /// As [`search`](Self::search).
    #[inline(always)]
    pub(crate) fn finish_search<T: TakeValue>(
        &self,
        located: Located<T::Value>,
        lookup: &[u8],
    ) -> Result<TableSearch<T::Value>> {
        let Located { mut search, block } = located;
        if let (Some(block), Some(handle)) = (block, search.data_block)
            && let Some((found, seq)) = self.find_in_block::<T>(&block, handle, lookup)?
        {
            search.found = Some(found);
            search.found_sequence = seq;
        }
        self.check_range_tombstones(&mut search, lookup);
        Ok(search)
    }

    /// Records in `search` the newest range tombstone over `lookup`'s key visible to it, if the
    /// table has range tombstones: whatever the filter said, since it knows nothing of them.
    #[inline(always)]
    fn check_range_tombstones<V>(&self, search: &mut TableSearch<V>, lookup: &[u8]) {
        if let Some(t) = &self.range_tombstones
            && let Some(p) = parse_internal_key(lookup)
        {
            search.range_tombstone = t.covering_sequence(p.user_key, p.seq);
        }
    }

    /// Whether the table may hold keys starting with `prefix` (an in-domain prefix of the store's
    /// extractor); `None` if its filter holds no such prefixes.
    pub(crate) fn prefix_may_match(&self, prefix: &[u8]) -> Result<Option<bool>> {
        let (Some(f), Some(_)) = (&self.filter, &self.prefix) else {
            return Ok(None);
        };
        // The first key with this prefix, if the table has one, sorts at the prefix itself.
        let first = lookup_key(prefix, MAX_SEQUENCE);
        let answer = f.may_match(&FilterProbe::new(prefix), &first, &LookupBlocks::new(self))?;
        Ok(Some(answer == FilterAnswer::Maybe))
    }

    /// The filter's shape, for inspection; `None` without a filter the store can read.
    pub(crate) fn filter_shape(&self) -> Result<Option<FilterShape>> {
        self.filter
            .as_ref()
            .map(|f| f.describe(&LookupBlocks::new(self)))
            .transpose()
    }

    /// The table's filter, when it answers for a whole key from memory alone (a full filter of
    /// whole keys, kept with the table): what a [`search`](Self::search) asks first, without
    /// the search. `None` when only a search can tell.
    #[inline]
    pub(crate) fn filter_in_memory(&self) -> Option<InMemoryFilter<'_>> {
        if !self.properties.filter_whole_keys {
            return None;
        }
        self.filter.as_ref()?.in_memory()
    }

    /// [`filter_in_memory`](Self::filter_in_memory), shared: what a version keeps of the
    /// filter (see `db/version/level_filters.rs`).
    pub(crate) fn shared_filter_in_memory(&self) -> Option<SharedFullFilter> {
        if !self.properties.filter_whole_keys {
            return None;
        }
        self.filter.as_ref()?.shared_in_memory()
    }

    /// Starts loading the part of the filter a [`search`](Self::search) with `probe` will read,
    /// when the filter is in memory (see [`filter_in_memory`](Self::filter_in_memory) and
    /// [`FilterPolicy::prefetch`](crate::FilterPolicy::prefetch)); otherwise does nothing.
    pub(crate) fn prefetch_filter(&self, probe: &FilterProbe<'_>) {
        if let Some(f) = self.filter_in_memory() {
            f.prefetch(probe);
        }
    }

    /// [`search`](Self::search) for several keys of this table at once, sorted by user key
    /// (`probes[i]` the probe of `lookups[i]`). A full filter answers every key in one call
    /// (which may overlap their memory accesses), the keys it lets through are searched in passes
    /// that overlap their cache misses too, and each data block is read once for all the keys it
    /// may hold: then the call returns the filter's layout, `maybe[i]` is its answer for key `i`,
    /// and `out` holds `(i, search)` for the keys it let through only. Other layouts,
    /// and prefix filters, are asked one key at a time: then it returns `None` and `out` holds
    /// every key's search.
    ///
    /// # Errors
    /// As [`search`](Self::search); the first error ends the batch.
    pub(crate) fn search_batch<T: TakeValue>(
        &self,
        lookups: &[&[u8]],
        probes: &[FilterProbe<'_>],
        maybe: &mut Vec<bool>,
        out: &mut Vec<(usize, TableSearch<T::Value>)>,
    ) -> Result<Option<FilterLayout>> {
        out.clear();
        maybe.clear();
        maybe.resize(lookups.len(), true);
        let layout = match &self.filter {
            Some(f) if self.properties.filter_whole_keys => f
                .may_match_batch(probes, &LookupBlocks::new(self), maybe)?
                .then(|| f.layout()),
            _ => None,
        };
        let Some(layout) = layout else {
            for (i, (lookup, probe)) in lookups.iter().zip(probes).enumerate() {
                out.push((i, self.search::<T>(lookup, probe)?));
            }
            return Ok(None);
        };
        // In passes over the keys the filter let through, so that the cache misses of different
        // keys overlap: each key's data block from the index; the blocks, their restart arrays
        // prefetched; their restart entries prefetched; then the seeks.
        for (i, lookup) in lookups.iter().enumerate() {
            if maybe[i] {
                let outcome = TableSearch::start(Some((layout, true)), self.index_handle(lookup)?);
                out.push((i, outcome));
            }
        }
        let mut blocks: Vec<Option<Arc<Block>>> = Vec::with_capacity(out.len());
        let mut previous: Option<(BlockHandle, Arc<Block>)> = None;
        for (_, outcome) in out.iter() {
            let Some(handle) = outcome.data_block else {
                blocks.push(None);
                continue;
            };
            let block = match &previous {
                // Sorted keys that share a block follow each other: read it once for them.
                Some((h, b)) if *h == handle => Arc::clone(b),
                _ => {
                    let block = self.data_block(handle, true)?;
                    block.prefetch_restart_array();
                    previous = Some((handle, Arc::clone(&block)));
                    block
                }
            };
            blocks.push(Some(block));
        }
        for block in blocks.iter().flatten() {
            block.prefetch_restart_points();
        }
        for ((i, _), block) in out.iter().zip(&blocks) {
            if let Some(block) = block {
                block.prefetch_seek_span(lookups[*i], KeyOrder::Internal);
            }
        }
        for ((i, outcome), block) in out.iter_mut().zip(&blocks) {
            if let (Some(block), Some(handle)) = (block, outcome.data_block)
                && let Some((found, seq)) = self.find_in_block::<T>(block, handle, lookups[*i])?
            {
                outcome.found = Some(found);
                outcome.found_sequence = seq;
            }
            self.check_range_tombstones(outcome, lookups[*i]);
        }
        Ok(Some(layout))
    }

    /// The newest entry for `lookup`'s user key at or below its sequence in `block` (the data
    /// block at `handle`), and its sequence, if the block holds one.
    fn find_in_block<T: TakeValue>(
        &self,
        block: &Arc<Block>,
        handle: BlockHandle,
        lookup: &[u8],
    ) -> Result<Option<(NewestEntry<T::Value>, u64)>> {
        let mut it = block.iter_in(KeyOrder::Internal, POINT_LOOKUP_KEY.take());
        let found = self.seek_in_block::<T>(block, &mut it, handle, lookup);
        let buffer = it.into_key_buffer();
        if buffer.capacity() <= KEPT_POINT_LOOKUP_KEY_BYTES {
            POINT_LOOKUP_KEY.set(buffer);
        }
        found
    }

    /// [`find_in_block`](Self::find_in_block) with the iterator `it` over `block`.
    fn seek_in_block<T: TakeValue>(
        &self,
        block: &Arc<Block>,
        it: &mut BlockIter,
        handle: BlockHandle,
        lookup: &[u8],
    ) -> Result<Option<(NewestEntry<T::Value>, u64)>> {
        let ukey = user_key(lookup);
        it.seek(lookup);
        if it.is_corrupt() {
            return Err(self.corrupt(format!(
                "malformed entry in data block at offset {}",
                handle.offset
            )));
        }
        if !it.valid() {
            return Ok(None);
        }
        let parsed = parse_internal_key(it.key())
            .ok_or_else(|| self.corrupt("bad internal key in data block"))?;
        if parsed.user_key != ukey {
            return Ok(None);
        }
        let mut seq = parsed.seq;
        if let Some(global) = self.global_sequence {
            // An ingested table holds each key once, stored at 0 (so the seek always lands on
            // it): it is read at the table's sequence, and a lookup older than that sees nothing.
            if parse_internal_key(lookup).is_some_and(|l| l.seq < global) {
                return Ok(None);
            }
            seq = global;
        }
        Ok(Some((T::found(block, it, parsed.kind, seq), seq)))
    }
}
