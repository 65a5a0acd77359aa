//! Iterating a table's entries in order, both ways.

use std::sync::Arc;

use super::TableReader;
use crate::error::Result;
use crate::iter::InternalIterator;
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

    /// Leaves the iterator invalid if `r` is an error.
    fn settle(&mut self, r: Result<()>) -> Result<()> {
        if r.is_err() {
            self.data = None;
        }
        r
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
        self.skip_exhausted_blocks()
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
        self.data.as_ref().map(BlockIter::key).unwrap_or_default()
    }

    fn value(&self) -> &[u8] {
        self.data.as_ref().map(BlockIter::value).unwrap_or_default()
    }

    fn table_number(&self) -> Option<u64> {
        Some(self.table.number)
    }
}
