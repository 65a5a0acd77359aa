//! Iterating a table's entries in order, both ways.

use std::sync::Arc;

use super::TableReader;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{compare_internal, set_sequence, user_key, TAG_LEN};
use crate::sst::block::{BlockIter, KeyOrder};
use crate::sst::format::BlockHandle;

impl TableReader {
    /// An iterator over every entry. `fill_cache` is false for compactions, which read each block
    /// once and should not push user reads out of the cache.
    pub(crate) fn iter(self: &Arc<Self>, fill_cache: bool) -> TableIter {
        TableIter {
            index: None,
            table: Arc::clone(self),
            data: None,
            fill_cache,
            global_sequence: self.global_sequence,
            key: Vec::new(),
        }
    }
}

/// Walks a table in either direction: the index block picks data blocks, a block iterator walks
/// each. Both are positioned exactly (the index on the current data block), so the walk turns
/// around without re-seeking.
pub(crate) struct TableIter {
    table: Arc<TableReader>,
    /// Over the index block; `None` until the first seek reads it (through the cache, when index
    /// blocks are charged to it).
    index: Option<BlockIter>,
    data: Option<BlockIter>,
    fill_cache: bool,
    /// An ingested table's sequence: its entries, stored at 0, are shown at it.
    global_sequence: Option<u64>,
    /// The current entry's key at that sequence (ingested tables only).
    key: Vec<u8>,
}

impl TableIter {
    /// The index iterator, reading the index block first if this is the first seek.
    fn index(&mut self) -> Result<&mut BlockIter> {
        if self.index.is_none() {
            let block = Arc::clone(&self.table.index_block()?.block);
            self.index = Some(block.iter(KeyOrder::Internal));
        }
        self.index
            .as_mut()
            .ok_or_else(|| self.table.corrupt("index block not read"))
    }

    fn load_data_block(&mut self) -> Result<()> {
        self.data = None;
        let Some(index) = self.index.as_ref() else {
            return Ok(());
        };
        if index.is_corrupt() {
            return Err(self.table.corrupt("malformed index block entry"));
        }
        if !index.valid() {
            return Ok(());
        }
        let handle = BlockHandle::decode_exact(index.value())
            .ok_or_else(|| self.table.corrupt("bad handle in index block"))?;
        let block = self.table.data_block(handle, self.fill_cache)?;
        self.data = Some(block.iter(KeyOrder::Internal));
        Ok(())
    }

    /// Whether the data iterator is on an entry (`Ok(true)`), has run off its block
    /// (`Ok(false)`), or found its block damaged.
    fn data_status(&mut self) -> Result<Option<bool>> {
        match &self.data {
            None => Ok(None),
            Some(d) if d.is_corrupt() => {
                self.data = None;
                Err(self.table.corrupt("malformed entry in data block"))
            }
            Some(d) => Ok(Some(d.valid())),
        }
    }

    /// Moves on past exhausted blocks until an entry or the end.
    fn skip_exhausted_blocks(&mut self) -> Result<()> {
        while self.data_status()? == Some(false) {
            if let Some(index) = self.index.as_mut() {
                index.next();
            }
            self.load_data_block()?;
            if let Some(d) = self.data.as_mut() {
                d.seek_to_first();
            }
        }
        Ok(())
    }

    /// Moves back past exhausted blocks until an entry or the beginning.
    fn skip_exhausted_blocks_backward(&mut self) -> Result<()> {
        while self.data_status()? == Some(false) {
            if let Some(index) = self.index.as_mut() {
                index.prev();
            }
            self.load_data_block()?;
            if let Some(d) = self.data.as_mut() {
                d.seek_to_last();
            }
        }
        Ok(())
    }

    /// Leaves the iterator invalid if `r` is an error; in an ingested table, rewrites the
    /// current key's sequence.
    fn settle(&mut self, r: Result<()>) -> Result<()> {
        if r.is_err() {
            self.data = None;
        }
        if let (Some(seq), Some(d)) = (self.global_sequence, self.data.as_ref())
            && d.valid()
        {
            self.key.clear();
            self.key.extend_from_slice(d.key());
            set_sequence(&mut self.key, seq);
        }
        r
    }

    /// The current key as stored (at 0 in an ingested table).
    fn stored_key(&self) -> &[u8] {
        self.data.as_ref().map(BlockIter::key).unwrap_or_default()
    }

    /// In an ingested table, after a seek that went by stored keys: whether the entry it landed
    /// on, shown at the table's sequence, sorts before `target` (then the seek moves one on) or
    /// after it (a seek for the previous moves one back). Each user key is there once, so one
    /// step is enough.
    fn shown_order(&self, target: &[u8]) -> Option<std::cmp::Ordering> {
        let seq = self.global_sequence?;
        let stored = self.data.as_ref().filter(|d| d.valid())?.key();
        if target.len() < TAG_LEN || user_key(stored) != user_key(target) {
            return None;
        }
        let mut shown = stored.to_vec();
        set_sequence(&mut shown, seq);
        Some(compare_internal(&shown, target))
    }

    fn try_seek_to_first(&mut self) -> Result<()> {
        self.index()?.seek_to_first();
        self.load_data_block()?;
        if let Some(d) = self.data.as_mut() {
            d.seek_to_first();
        }
        self.skip_exhausted_blocks()
    }

    fn try_seek(&mut self, target: &[u8]) -> Result<()> {
        self.index()?.seek(target);
        self.load_data_block()?;
        if let Some(d) = self.data.as_mut() {
            d.seek(target);
        }
        self.skip_exhausted_blocks()?;
        // Stored at 0, an ingested entry of the target's user key is never passed over, but
        // shown at its sequence it may sort before the target.
        if self.shown_order(target) == Some(std::cmp::Ordering::Less) {
            if let Some(d) = self.data.as_mut() {
                d.next();
            }
            self.skip_exhausted_blocks()?;
        }
        Ok(())
    }

    fn try_seek_to_last(&mut self) -> Result<()> {
        self.index()?.seek_to_last();
        self.load_data_block()?;
        if let Some(d) = self.data.as_mut() {
            d.seek_to_last();
        }
        self.skip_exhausted_blocks_backward()
    }

    fn try_seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        if self.global_sequence.is_none() || target.len() < TAG_LEN {
            return self.try_seek_for_prev_stored(target);
        }
        // The target's user key with the largest tag: the last position of that user key, so
        // the seek lands on its ingested entry (stored at 0) if there is one; shown at the
        // table's sequence, that entry may sort after the target.
        let mut last_of_key = user_key(target).to_vec();
        last_of_key.extend_from_slice(&[0; TAG_LEN]);
        self.try_seek_for_prev_stored(&last_of_key)?;
        if self.shown_order(target) == Some(std::cmp::Ordering::Greater) {
            if let Some(d) = self.data.as_mut() {
                d.prev();
            }
            self.skip_exhausted_blocks_backward()?;
        }
        Ok(())
    }

    fn try_seek_for_prev_stored(&mut self, target: &[u8]) -> Result<()> {
        // The first block whose index key (≥ each of its keys, < each key of the next block) is
        // ≥ target holds the last key ≤ target, unless all its keys are > target: then the block
        // before it does. Past every index key, the table's last entry is the answer.
        let index = self.index()?;
        index.seek(target);
        if !index.valid() && !index.is_corrupt() {
            return self.try_seek_to_last();
        }
        self.load_data_block()?;
        if let Some(d) = self.data.as_mut() {
            d.seek_for_prev(target);
        }
        self.skip_exhausted_blocks_backward()
    }
}

impl InternalIterator for TableIter {
    fn seek_to_first(&mut self) -> Result<()> {
        let r = self.try_seek_to_first();
        self.settle(r)
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let r = self.try_seek_to_last();
        self.settle(r)
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let r = self.try_seek(target);
        self.settle(r)
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let r = self.try_seek_for_prev(target);
        self.settle(r)
    }

    fn next(&mut self) -> Result<()> {
        if let Some(d) = self.data.as_mut() {
            d.next();
        }
        let r = self.skip_exhausted_blocks();
        self.settle(r)
    }

    fn prev(&mut self) -> Result<()> {
        if let Some(d) = self.data.as_mut() {
            d.prev();
        }
        let r = self.skip_exhausted_blocks_backward();
        self.settle(r)
    }

    fn valid(&self) -> bool {
        self.data.as_ref().is_some_and(BlockIter::valid)
    }

    fn key(&self) -> &[u8] {
        if self.global_sequence.is_some() && self.valid() {
            return &self.key;
        }
        self.stored_key()
    }

    fn value(&self) -> &[u8] {
        self.data.as_ref().map(BlockIter::value).unwrap_or_default()
    }

    fn table_number(&self) -> Option<u64> {
        Some(self.table.number)
    }
}
