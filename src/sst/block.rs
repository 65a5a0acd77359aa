//! Reading blocks: validating the restart array and iterating over prefix-compressed entries.
//!
//! Format (LevelDB's): `docs/table_format.md`, *Blocks*. Each entry's key shares a prefix with
//! the previous one; every `restart_interval` entries a key is stored whole and listed in the
//! restart array, so a seek can binary-search the restart points and only scan a few entries
//! linearly.
//!
//! Blocks come from disk behind a checksum, but the iterator still treats every length as
//! untrusted: malformed bytes make it invalid with [`BlockIter::is_corrupt`] set, never a panic and
//! never an out-of-bounds key.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::coding::{fixed32_at, Decoder};
use crate::key::{compare_bytes, compare_internal};
use crate::prefetch::prefetch_line_of;
use crate::sst::block_buffers;

/// Restart points whose entries [`Block::prefetch_restart_points`] loads: all of a block of the
/// default size (4 KiB of 100-byte values holds three).
const PREFETCHED_RESTARTS: usize = 8;

/// Cache lines of a restart interval [`Block::prefetch_seek_span`] loads at most: all of an
/// interval of sixteen 100-byte entries.
const PREFETCHED_SPAN_LINES: usize = 32;

/// How the keys of a block are ordered, which decides what `seek` means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyOrder {
    /// Plain byte order (index keys of the metaindex block, filter names …).
    Bytewise,
    /// Internal-key order: user key ascending, then sequence descending.
    Internal,
}

impl KeyOrder {
    /// Compares `a` with `b` in this order.
    pub(crate) fn compare(self, a: &[u8], b: &[u8]) -> Ordering {
        match self {
            KeyOrder::Bytewise => compare_bytes(a, b),
            KeyOrder::Internal => compare_internal(a, b),
        }
    }
}

/// The decompressed contents of one block with a validated restart array.
#[derive(Debug)]
pub(crate) struct Block {
    /// The whole block, restart array included.
    data: Vec<u8>,
    /// Where the restart array starts, which is also where the entries end.
    restarts_at: usize,
    /// Entries of the restart array (at least 1).
    num_restarts: usize,
}

impl Drop for Block {
    fn drop(&mut self) {
        block_buffers::give(std::mem::take(&mut self.data));
    }
}

impl Block {
    /// Wraps `contents`, or `None` when its restart array is malformed: shorter than the count,
    /// a count of zero or one that does not fit, a first offset other than 0, or offsets that are
    /// not strictly increasing inside the entry area.
    ///
    /// Entries themselves are checked lazily by [`BlockIter`], so this costs one pass over the
    /// restart array only.
    pub(crate) fn new(contents: Vec<u8>) -> Option<Block> {
        let len = contents.len();
        let count_at = len.checked_sub(4)?;
        let num_restarts = usize::try_from(fixed32_at(&contents, count_at)?).ok()?;
        if num_restarts == 0 || num_restarts > count_at / 4 {
            return None;
        }
        let restarts_at = count_at - 4 * num_restarts;
        // The builder always puts the first restart at 0; anything before the first restart would
        // be unreachable by a seek, so a nonzero first offset can only be damage.
        let mut prev = fixed32_at(&contents, restarts_at)?;
        if prev != 0 {
            return None;
        }
        for i in 1..num_restarts {
            let r = fixed32_at(&contents, restarts_at + 4 * i)?;
            // Every later restart starts an entry, so it lies strictly inside the entry area.
            if r <= prev || usize::try_from(r).ok()? >= restarts_at {
                return None;
            }
            prev = r;
        }
        Some(Block {
            data: contents,
            restarts_at,
            num_restarts,
        })
    }

    /// Bytes of the block, restart array included (its charge in the block cache).
    pub(crate) fn size(&self) -> usize {
        self.data.len()
    }

    /// The block's bytes in `range` (empty if out of bounds): a value whose range a
    /// [`BlockIter::value_range`] gave.
    pub(crate) fn bytes(&self, range: std::ops::Range<usize>) -> &[u8] {
        self.data.get(range).unwrap_or(&[])
    }

    /// An iterator over the block's entries in `order`, positioned nowhere (invalid) until a
    /// `seek_to_first` or `seek`.
    pub(crate) fn iter(self: &Arc<Block>, order: KeyOrder) -> BlockIter {
        self.iter_in(order, Vec::new())
    }

    /// [`iter`](Block::iter), rebuilding keys in `key` (cleared first) instead of a new buffer:
    /// a caller that seeks one block after another keeps one buffer, which
    /// [`BlockIter::into_key_buffer`] hands back, instead of growing a new one in every block.
    pub(crate) fn iter_in(self: &Arc<Block>, order: KeyOrder, mut key: Vec<u8>) -> BlockIter {
        key.clear();
        BlockIter {
            block: Arc::clone(self),
            order,
            current: self.restarts_at,
            next_offset: self.restarts_at,
            restart_index: 0,
            next_restart: NO_RESTART,
            key,
            value_start: 0,
            value_end: 0,
            valid: false,
            corrupt: false,
        }
    }

    /// Entries of the restart array.
    pub(crate) fn num_restarts(&self) -> usize {
        self.num_restarts
    }

    /// The key and value of the entry at restart point `i` (its key is stored whole), or `None`
    /// if `i` is out of range or the entry is malformed.
    pub(crate) fn restart_entry(&self, i: usize) -> Option<(&[u8], &[u8])> {
        if i >= self.num_restarts {
            return None;
        }
        let h = self.entry_header(self.restart_point(i))?;
        if h.shared != 0 {
            return None;
        }
        let value_at = h.body + h.unshared;
        Some((
            self.data.get(h.body..value_at)?,
            self.data.get(value_at..value_at + h.value_len)?,
        ))
    }

    /// Whether every entry is a restart point (a block built with restart interval 1, like an
    /// index block): each restart entry ends exactly where the next begins.
    pub(crate) fn every_entry_restarts(&self) -> bool {
        (0..self.num_restarts).all(|i| {
            let next = if i + 1 < self.num_restarts {
                self.restart_point(i + 1)
            } else {
                self.restarts_at
            };
            self.entry_header(self.restart_point(i))
                .is_some_and(|h| h.shared == 0 && h.body + h.unshared + h.value_len == next)
        })
    }

    /// Starts loading the restart array, the first thing a seek reads.
    pub(crate) fn prefetch_restart_array(&self) {
        if let Some(first) = self.data.get(self.restarts_at) {
            prefetch_line_of(first);
        }
    }

    /// Starts loading the entries at the restart points a seek's binary search compares with
    /// (the first [`PREFETCHED_RESTARTS`]; the rest of a seek scans forward, which the hardware
    /// prefetcher follows). Reads the restart array, so best after
    /// [`prefetch_restart_array`](Self::prefetch_restart_array) has had time to load it.
    pub(crate) fn prefetch_restart_points(&self) {
        for i in 1..self.num_restarts.min(PREFETCHED_RESTARTS) {
            if let Some(entry) = self.data.get(self.restart_point(i)) {
                prefetch_line_of(entry);
            }
        }
    }

    /// Starts loading the entries a seek for `target` (in `order`) decodes: from the restart point
    /// its binary search lands on up to the next one, at most [`PREFETCHED_SPAN_LINES`] cache
    /// lines. Runs that binary search, so best after
    /// [`prefetch_restart_points`](Self::prefetch_restart_points) has had time to load its keys.
    pub(crate) fn prefetch_seek_span(&self, target: &[u8], order: KeyOrder) {
        if let Some(i) = self.restart_before(target, order) {
            self.prefetch_interval(i);
        } // else malformed: the seek reports it
    }

    /// Starts loading the entries of restart interval `i`, at most [`PREFETCHED_SPAN_LINES`]
    /// cache lines: a seek decodes them one after another, each waiting on the last, so its
    /// misses overlap only if the lines were asked for together beforehand.
    fn prefetch_interval(&self, i: usize) {
        let end = if i + 1 < self.num_restarts {
            self.restart_point(i + 1)
        } else {
            self.restarts_at
        };
        let start = self.restart_point(i);
        for at in (start..end).step_by(64).take(PREFETCHED_SPAN_LINES) {
            if let Some(byte) = self.data.get(at) {
                prefetch_line_of(byte);
            }
        }
    }

    /// The last restart point whose key is < `target` in `order`, or 0 if there is none (a
    /// seek's answer is in its interval); `None` if a restart key it compares with is malformed.
    fn restart_before(&self, target: &[u8], order: KeyOrder) -> Option<usize> {
        let mut left = 0;
        let mut right = self.num_restarts - 1;
        while left < right {
            let mid = left + (right - left).div_ceil(2);
            if order.compare(self.restart_key(mid)?, target) == Ordering::Less {
                left = mid;
            } else {
                right = mid - 1;
            }
        }
        Some(left)
    }

    /// Offset of restart point `i`; `Block::new` guaranteed it is readable for `i < num_restarts`.
    fn restart_point(&self, i: usize) -> usize {
        fixed32_at(&self.data, self.restarts_at + 4 * i)
            .and_then(|r| usize::try_from(r).ok())
            .unwrap_or(self.restarts_at)
    }
}

/// The three lengths that head an entry, and where the entry's key bytes start.
struct EntryHeader {
    /// Bytes taken from the front of the previous key.
    shared: usize,
    /// Bytes of key stored in this entry.
    unshared: usize,
    /// Bytes of value stored after the key bytes.
    value_len: usize,
    /// Offset just past the header, where the unshared key bytes start.
    body: usize,
}

impl Block {
    /// Decodes the header of the entry at `offset`, or `None` if the varints are malformed or the
    /// key and value would run past the entry area.
    fn entry_header(&self, offset: usize) -> Option<EntryHeader> {
        let area = self.data.get(offset..self.restarts_at)?;
        // The usual entry has three one-byte lengths (each < 128): read them without the varint
        // loop. Seeks decode a dozen headers per lookup, so this is a hot path.
        if let [shared, unshared, value_len, ref rest @ ..] = *area
            && (shared | unshared | value_len) < 0x80
        {
            let (unshared, value_len) = (usize::from(unshared), usize::from(value_len));
            if unshared + value_len > rest.len() {
                return None;
            }
            return Some(EntryHeader {
                shared: usize::from(shared),
                unshared,
                value_len,
                body: offset + 3,
            });
        }
        let mut d = Decoder::new(area);
        let shared = usize::try_from(d.varint32()?).ok()?;
        let unshared = usize::try_from(d.varint32()?).ok()?;
        let value_len = usize::try_from(d.varint32()?).ok()?;
        if unshared.checked_add(value_len)? > d.remaining().len() {
            return None;
        }
        Some(EntryHeader {
            shared,
            unshared,
            value_len,
            body: self.restarts_at - d.remaining().len(),
        })
    }

    /// The whole key stored at restart point `i`, or `None` if that entry is malformed (including a
    /// nonzero shared length, which a restart point never has).
    fn restart_key(&self, i: usize) -> Option<&[u8]> {
        self.restart_entry(i).map(|(key, _)| key)
    }
}

/// `BlockIter::next_restart` once the iterator is in the last restart interval.
const NO_RESTART: usize = usize::MAX;

/// A cursor over one block's entries; it owns an `Arc` of its block, so it has no lifetime.
///
/// It moves both ways. Keys are prefix-compressed, so an entry can only be decoded forward from a
/// restart point: `prev`, like LevelDB's, goes back to the last restart point before the current
/// entry and decodes forward to the entry just before it (at most a restart interval of entries).
///
/// Every move reuses the key buffer, so none allocates once it has grown to the longest key.
#[derive(Debug)]
pub(crate) struct BlockIter {
    /// The block iterated over, shared with the block cache.
    block: Arc<Block>,
    /// The order `seek` compares keys in.
    order: KeyOrder,
    /// Offset of the current entry, where `prev` stops when it scans forward from a restart point.
    current: usize,
    /// Offset just past the current entry, where `next` decodes.
    next_offset: usize,
    /// The restart interval the current entry belongs to.
    restart_index: usize,
    /// Offset of restart point `restart_index + 1` ([`NO_RESTART`] after the last), cached so a
    /// step reads no restart array.
    next_restart: usize,
    /// The current entry's whole key, rebuilt from the previous key on every step.
    key: Vec<u8>,
    /// Start of the current value in the block, kept as a range so `value` borrows instead of
    /// copying.
    value_start: usize,
    /// End (exclusive) of the current value in the block.
    value_end: usize,
    /// Whether the iterator is on an entry.
    valid: bool,
    /// Sticky: once the block is found malformed the iterator stays invalid, so a caller cannot
    /// mistake a later position for trustworthy data.
    corrupt: bool,
}

impl BlockIter {
    /// Whether the iterator is on an entry.
    pub(crate) fn valid(&self) -> bool {
        self.valid
    }

    /// Whether iteration stopped because the block is malformed; the caller reports it as
    /// `Error::Corruption` naming its file.
    pub(crate) fn is_corrupt(&self) -> bool {
        self.corrupt
    }

    /// The buffer keys were rebuilt in, for another block's [`Block::iter_in`].
    pub(crate) fn into_key_buffer(self) -> Vec<u8> {
        self.key
    }

    /// The current key while `valid()`; empty otherwise.
    pub(crate) fn key(&self) -> &[u8] {
        &self.key
    }

    /// Where the current value lies in the block (see [`Block::bytes`]), to keep a reference to
    /// it that outlives the iterator.
    pub(crate) fn value_range(&self) -> std::ops::Range<usize> {
        self.value_start..self.value_end
    }

    /// The current value, borrowed from the block, while `valid()`; empty otherwise.
    pub(crate) fn value(&self) -> &[u8] {
        self.block
            .data
            .get(self.value_start..self.value_end)
            .unwrap_or(&[])
    }

    /// Positions on the first entry (invalid if the block is empty).
    pub(crate) fn seek_to_first(&mut self) {
        if self.corrupt {
            return;
        }
        self.seek_to_restart(0);
        self.parse_next();
    }

    /// Positions on the first entry whose key is ≥ `target` in the iterator's order (invalid if
    /// there is none).
    pub(crate) fn seek(&mut self, target: &[u8]) {
        if self.corrupt {
            return;
        }
        let Some(restart) = self.block.restart_before(target, self.order) else {
            return self.mark_corrupt();
        };
        self.block.prefetch_interval(restart);
        self.seek_to_restart(restart);
        loop {
            self.parse_next();
            if !self.valid || self.order.compare(&self.key, target) != Ordering::Less {
                return;
            }
        }
    }

    /// Positions on the last entry whose key is ≤ `target` in the iterator's order (invalid if
    /// there is none).
    pub(crate) fn seek_for_prev(&mut self, target: &[u8]) {
        self.seek(target);
        if self.corrupt {
            return;
        }
        if !self.valid {
            // Every key is < target (or the block is empty).
            return self.seek_to_last();
        }
        if self.order.compare(&self.key, target) == Ordering::Greater {
            // The first key ≥ target is > target: the answer is the entry before it.
            self.prev();
        }
    }

    /// Positions on the last entry (invalid if the block is empty).
    pub(crate) fn seek_to_last(&mut self) {
        if self.corrupt {
            return;
        }
        self.seek_to_restart(self.block.num_restarts - 1);
        self.parse_next();
        // Entries end inside the entry area (`entry_header` checks), so this ends on the entry
        // that ends exactly where the restart array starts.
        while self.valid && self.next_offset < self.block.restarts_at {
            self.parse_next();
        }
    }

    /// Moves to the next entry (invalid past the last one). A no-op on an invalid iterator.
    pub(crate) fn next(&mut self) {
        if self.valid {
            self.parse_next();
        }
    }

    /// Moves to the entry before the current one (invalid before the first one). A no-op on an
    /// invalid iterator.
    pub(crate) fn prev(&mut self) {
        if !self.valid {
            return;
        }
        let original = self.current;
        // The last restart point before the current entry: the current entry's own interval, or
        // the one before if the current entry is its restart point.
        let mut i = self.restart_index;
        while self.block.restart_point(i) >= original {
            if i == 0 {
                // The current entry is the first: nothing before it.
                self.valid = false;
                self.key.clear();
                self.current = self.block.restarts_at;
                self.next_offset = self.block.restarts_at;
                self.next_restart = NO_RESTART;
                self.value_start = 0;
                self.value_end = 0;
                return;
            }
            i -= 1;
        }
        self.seek_to_restart(i);
        loop {
            self.parse_next();
            if !self.valid {
                // Damage (`parse_next` flagged it), or an entry area that ended early: either way
                // the entries from restart point `i` do not lead to the original entry.
                return self.mark_corrupt();
            }
            match self.next_offset.cmp(&original) {
                Ordering::Less => {}
                Ordering::Equal => return,
                // Decoding from the restart point steps over the original entry's start: entry
                // boundaries disagree with the path that reached it.
                Ordering::Greater => return self.mark_corrupt(),
            }
        }
    }

    /// Prepares to decode restart point `i` next: its key is stored whole, so no previous key is
    /// needed.
    fn seek_to_restart(&mut self, i: usize) {
        self.key.clear();
        self.restart_index = i;
        self.next_offset = self.block.restart_point(i);
        self.next_restart = self.restart_after(i);
        self.valid = false;
    }

    /// Offset of the restart point after `i`, or [`NO_RESTART`].
    fn restart_after(&self, i: usize) -> usize {
        if i + 1 < self.block.num_restarts {
            self.block.restart_point(i + 1)
        } else {
            NO_RESTART
        }
    }

    /// Decodes the entry at `next_offset` into the current position.
    fn parse_next(&mut self) {
        let current = self.next_offset;
        if current >= self.block.restarts_at {
            // Past the last entry: a normal end, unless a restart point was never reached, which
            // means it pointed inside an entry.
            if self.next_restart != NO_RESTART {
                return self.mark_corrupt();
            }
            self.valid = false;
            self.key.clear();
            self.value_start = 0;
            self.value_end = 0;
            return;
        }
        // Keep restart_index in step and check that linear decoding lands exactly on every
        // restart point; if it jumped over one, entry boundaries disagree with the restart array,
        // and a seek would decode different keys than a scan. (The restart point a seek starts
        // from needs no flag: the key is empty then, so any nonzero shared fails below anyway.)
        let mut at_restart = false;
        match current.cmp(&self.next_restart) {
            Ordering::Less => {}
            Ordering::Equal => {
                self.restart_index += 1;
                self.next_restart = self.restart_after(self.restart_index);
                at_restart = true;
            }
            Ordering::Greater => return self.mark_corrupt(),
        }
        let block = &*self.block;
        let Some(h) = block.entry_header(current) else {
            return self.mark_corrupt();
        };
        if h.shared > self.key.len() || (at_restart && h.shared != 0) {
            return self.mark_corrupt();
        }
        let Some(unshared) = block.data.get(h.body..h.body + h.unshared) else {
            return self.mark_corrupt();
        };
        self.key.truncate(h.shared);
        self.key.extend_from_slice(unshared);
        self.value_start = h.body + h.unshared;
        self.value_end = self.value_start + h.value_len;
        self.current = current;
        self.next_offset = self.value_end;
        self.valid = true;
    }

    /// Makes the iterator invalid for good, flagged as corrupt.
    fn mark_corrupt(&mut self) {
        self.corrupt = true;
        self.valid = false;
        self.key.clear();
        self.current = self.block.restarts_at;
        self.next_offset = self.block.restarts_at;
        self.next_restart = NO_RESTART;
        self.value_start = 0;
        self.value_end = 0;
    }
}

#[cfg(test)]
mod tests;
