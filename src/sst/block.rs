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
        if let [shared, unshared, value_len, ref rest @ ..] = *area {
            if (shared | unshared | value_len) < 0x80 {
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
mod tests {
    use super::*;
    use crate::key::{internal_key, lookup_key, ValueKind};
    use crate::sst::block_builder::BlockBuilder;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn build(entries: &[(Vec<u8>, Vec<u8>)], interval: usize) -> Arc<Block> {
        let mut b = BlockBuilder::new(interval);
        for (k, v) in entries {
            b.add(k, v);
        }
        let size = b.estimated_size();
        let bytes = b.finish().to_vec();
        assert_eq!(bytes.len(), size);
        Arc::new(Block::new(bytes).expect("builder output is a valid block"))
    }

    fn collect(block: &Arc<Block>, order: KeyOrder) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut it = block.iter(order);
        let mut out = Vec::new();
        it.seek_to_first();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        assert!(!it.is_corrupt());
        out
    }

    /// 1000 bytewise-sorted keys with long shared prefixes, some values empty.
    fn prefixed_entries() -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..1000u32)
            .map(|i| {
                let k = format!("user/{:03}/item/{:06}", i / 37, i * 7).into_bytes();
                let v = if i % 5 == 0 {
                    Vec::new()
                } else {
                    format!("value-{i}").into_bytes()
                };
                (k, v)
            })
            .collect()
    }

    /// Internal keys: several versions of each user key, newest first, plus an empty user key.
    fn internal_entries() -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        for u in 0..200u32 {
            let user = if u == 0 {
                Vec::new()
            } else {
                format!("k{u:05}").into_bytes()
            };
            for seq in (1..=3u64).rev() {
                let kind = if seq == 2 {
                    ValueKind::Deletion
                } else {
                    ValueKind::Value
                };
                let seq = seq + u64::from(u) * 10;
                out.push((internal_key(&user, seq, kind), seq.to_le_bytes().to_vec()));
            }
        }
        out.sort_by(|a, b| compare_internal(&a.0, &b.0));
        out
    }

    #[test]
    fn empty_block_round_trips() {
        for interval in [1, 16] {
            let block = build(&[], interval);
            assert_eq!(block.data.as_slice(), &[0, 0, 0, 0, 1, 0, 0, 0]);
            assert_eq!(block.size(), 8);
            for order in [KeyOrder::Bytewise, KeyOrder::Internal] {
                let mut it = block.iter(order);
                assert!(!it.valid());
                it.seek_to_first();
                assert!(!it.valid() && !it.is_corrupt());
                it.seek(b"anything");
                assert!(!it.valid() && !it.is_corrupt());
                it.seek(b"");
                assert!(!it.valid() && !it.is_corrupt());
            }
        }
    }

    #[test]
    fn single_entry_with_empty_key_and_value() {
        for (k, v) in [
            (&b""[..], &b""[..]),
            (b"key", b""),
            (b"", b"value"),
            (b"k", b"v"),
        ] {
            let entries = vec![(k.to_vec(), v.to_vec())];
            let block = build(&entries, 16);
            assert_eq!(collect(&block, KeyOrder::Bytewise), entries);
            let mut it = block.iter(KeyOrder::Bytewise);
            it.seek(b"");
            assert!(it.valid());
            assert_eq!((it.key(), it.value()), (k, v));
            it.seek(k);
            assert!(it.valid());
            assert_eq!(it.key(), k);
            let mut after = k.to_vec();
            after.push(0);
            it.seek(&after);
            assert!(!it.valid() && !it.is_corrupt());
        }
    }

    #[test]
    fn many_entries_round_trip_at_every_interval() {
        let entries = prefixed_entries();
        for interval in [1, 2, 16, 1000, 5000] {
            let block = build(&entries, interval);
            assert_eq!(
                collect(&block, KeyOrder::Bytewise),
                entries,
                "interval {interval}"
            );
        }
        // Prefix compression is doing its job.
        let raw: usize = entries.iter().map(|(k, v)| k.len() + v.len()).sum();
        assert!(build(&entries, 16).size() < raw);
    }

    #[test]
    fn internal_keys_round_trip_and_seek() {
        let entries = internal_entries();
        for interval in [1, 16] {
            let block = build(&entries, interval);
            assert_eq!(collect(&block, KeyOrder::Internal), entries);
            let mut it = block.iter(KeyOrder::Internal);
            for (i, (k, v)) in entries.iter().enumerate() {
                it.seek(k);
                assert!(it.valid(), "entry {i}");
                assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
            }
            // A lookup key at a snapshot lands on the newest version visible to it.
            for u in 1..200u32 {
                let user = format!("k{u:05}").into_bytes();
                let base = u64::from(u) * 10;
                for (snapshot, want_seq) in [
                    (base + 3, base + 3),
                    (base + 2, base + 2),
                    (base + 1, base + 1),
                ] {
                    it.seek(&lookup_key(&user, snapshot));
                    assert!(it.valid());
                    let p = crate::key::parse_internal_key(it.key()).unwrap();
                    assert_eq!((p.user_key, p.seq), (&user[..], want_seq));
                }
                // Newer than everything stored for this key: still the newest version.
                it.seek(&lookup_key(&user, base + 9));
                assert_eq!(
                    crate::key::parse_internal_key(it.key()).unwrap().seq,
                    base + 3
                );
                // Older than every version: moves on to the next user key (or the end).
                it.seek(&lookup_key(&user, base));
                if u < 199 {
                    let next = format!("k{:05}", u + 1).into_bytes();
                    assert_eq!(crate::key::user_key(it.key()), &next[..]);
                } else {
                    assert!(!it.valid() && !it.is_corrupt());
                }
            }
        }
    }

    #[test]
    fn seek_to_every_key_between_keys_and_past_the_ends() {
        let entries = prefixed_entries();
        for interval in [1, 16] {
            let block = build(&entries, interval);
            let mut it = block.iter(KeyOrder::Bytewise);
            for (i, (k, v)) in entries.iter().enumerate() {
                it.seek(k);
                assert!(it.valid());
                assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
                // Just after this key (k + 0x00) lands on the next key.
                let mut between = k.clone();
                between.push(0);
                it.seek(&between);
                match entries.get(i + 1) {
                    Some((next, _)) => assert_eq!(it.key(), &next[..]),
                    None => assert!(!it.valid() && !it.is_corrupt()),
                }
                // Iterating on from a seek continues in order.
                it.seek(k);
                it.next();
                match entries.get(i + 1) {
                    Some((next, _)) => assert_eq!(it.key(), &next[..]),
                    None => assert!(!it.valid()),
                }
            }
            it.seek(b"");
            assert_eq!(it.key(), &entries[0].0[..]);
            it.seek(b"a");
            assert_eq!(it.key(), &entries[0].0[..]);
            it.seek(b"zzz");
            assert!(!it.valid() && !it.is_corrupt());
            // After running off the end, seek_to_first starts over.
            it.seek_to_first();
            assert_eq!(it.key(), &entries[0].0[..]);
        }
    }

    #[test]
    fn seek_matches_a_linear_model_on_random_keys() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut keys: Vec<Vec<u8>> = (0..500)
            .map(|_| {
                let n = rng.gen_range(0..6);
                (0..n).map(|_| rng.gen_range(b'a'..=b'd')).collect()
            })
            .collect();
        keys.sort();
        keys.dedup();
        let entries: Vec<_> = keys.iter().map(|k| (k.clone(), k.repeat(2))).collect();
        for interval in [1, 3, 16] {
            let block = build(&entries, interval);
            let mut it = block.iter(KeyOrder::Bytewise);
            for _ in 0..2000 {
                let n = rng.gen_range(0..7);
                let target: Vec<u8> = (0..n).map(|_| rng.gen_range(b'a'..=b'e')).collect();
                it.seek(&target);
                match entries.iter().find(|(k, _)| k >= &target) {
                    Some((k, v)) => assert_eq!((it.key(), it.value()), (&k[..], &v[..])),
                    None => assert!(!it.valid()),
                }
            }
        }
    }

    #[test]
    fn seek_and_next_reuse_the_key_buffer() {
        let entries = prefixed_entries();
        let block = build(&entries, 16);
        let mut it = block.iter(KeyOrder::Bytewise);
        // Warm up: every key has the same length here, so one visit sizes the buffer.
        it.seek_to_first();
        let (ptr, cap) = (it.key.as_ptr(), it.key.capacity());
        for (k, _) in entries.iter().step_by(7) {
            it.seek(k);
            it.next();
            assert_eq!((it.key.as_ptr(), it.key.capacity()), (ptr, cap));
        }
    }

    #[test]
    fn malformed_restart_arrays_are_rejected() {
        assert!(Block::new(Vec::new()).is_none());
        assert!(Block::new(vec![1, 0, 0]).is_none());
        // Zero restarts.
        assert!(Block::new(vec![0, 0, 0, 0]).is_none());
        // A count that does not fit.
        assert!(Block::new(vec![0, 0, 0, 0, 2, 0, 0, 0]).is_none());
        assert!(Block::new(vec![0xff, 0xff, 0xff, 0xff]).is_none());
        // First restart not at 0.
        assert!(Block::new(vec![9, 9, 9, 1, 0, 0, 0, 1, 0, 0, 0]).is_none());
        let entries = prefixed_entries()[..40].to_vec();
        let good = build(&entries, 4).data.as_slice().to_vec();
        let n = good.len();
        let count = fixed32_at(&good, n - 4).unwrap() as usize;
        let restarts_at = n - 4 - 4 * count;
        // Offsets that are not increasing.
        let mut bad = good.clone();
        bad[restarts_at + 8..restarts_at + 12]
            .copy_from_slice(&good[restarts_at + 4..restarts_at + 8]);
        assert!(Block::new(bad).is_none());
        // An offset past the entry area.
        let mut bad = good.clone();
        bad[n - 8..n - 4].copy_from_slice(&(restarts_at as u32).to_le_bytes());
        assert!(Block::new(bad).is_none());
        assert!(Block::new(good).is_some());
    }

    #[test]
    fn malformed_entries_are_flagged_not_panicked_on() {
        let entries = vec![
            (b"alpha".to_vec(), b"1".to_vec()),
            (b"alpine".to_vec(), b"2".to_vec()),
        ];
        let good = build(&entries, 16).data.as_slice().to_vec();
        // Second entry header starts at 3 + 5 + 1 = 9: claim more shared bytes than exist.
        let mut bad = good.clone();
        assert_eq!(bad[9], 3);
        bad[9] = 6;
        let block = Arc::new(Block::new(bad).unwrap());
        let mut it = block.iter(KeyOrder::Bytewise);
        it.seek_to_first();
        assert_eq!(it.key(), b"alpha");
        it.next();
        assert!(!it.valid() && it.is_corrupt());
        // Corruption is sticky.
        it.seek_to_first();
        assert!(!it.valid() && it.is_corrupt());

        // A value length past the entry area.
        let mut bad = good.clone();
        bad[2] = 100;
        let block = Arc::new(Block::new(bad).unwrap());
        let mut it = block.iter(KeyOrder::Bytewise);
        it.seek(b"alpha");
        assert!(!it.valid() && it.is_corrupt());

        // A varint that never ends.
        let mut bad = good.clone();
        bad[..3].copy_from_slice(&[0x80, 0x80, 0x80]);
        let block = Arc::new(Block::new(bad).unwrap());
        let mut it = block.iter(KeyOrder::Bytewise);
        it.seek_to_first();
        assert!(!it.valid() && it.is_corrupt());

        // A restart point with a nonzero shared length.
        let two = build(&entries, 1).data.as_slice().to_vec();
        let mut bad = two.clone();
        assert_eq!(bad[9], 0);
        bad[9] = 2;
        bad[10] -= 2;
        let block = Arc::new(Block::new(bad).unwrap());
        let mut it = block.iter(KeyOrder::Bytewise);
        it.seek_to_first();
        it.next();
        assert!(it.is_corrupt());
        let mut it = block.iter(KeyOrder::Bytewise);
        it.seek(b"alpine");
        assert!(it.is_corrupt());

        // A restart offset that points inside an entry: a scan steps over it.
        let mut bad = two;
        let n = bad.len();
        bad[n - 8] = 10;
        let block = Arc::new(Block::new(bad).unwrap());
        let mut it = block.iter(KeyOrder::Bytewise);
        it.seek_to_first();
        assert!(it.valid());
        it.next();
        // Only reaching the end shows that restart offset 10 was never an entry boundary.
        assert_eq!(it.key(), b"alpine");
        it.next();
        assert!(!it.valid() && it.is_corrupt());
        // A seek decodes the restart point itself and finds a nonzero shared length there.
        let mut it = block.iter(KeyOrder::Bytewise);
        it.seek(b"alpine");
        assert!(!it.valid() && it.is_corrupt());
    }

    #[test]
    fn backward_walks_mirror_forward_ones_at_every_interval() {
        let entries = prefixed_entries();
        for interval in [1, 2, 3, 16, 1000] {
            let block = build(&entries, interval);
            let mut it = block.iter(KeyOrder::Bytewise);
            it.seek_to_last();
            for (i, (k, v)) in entries.iter().enumerate().rev() {
                assert!(it.valid(), "interval {interval}, entry {i}");
                assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
                it.prev();
            }
            assert!(!it.valid() && !it.is_corrupt());
            // prev on an invalid iterator stays put; a seek starts over.
            it.prev();
            assert!(!it.valid() && !it.is_corrupt());
            // Turning around at every entry.
            for (i, (k, _)) in entries.iter().enumerate().step_by(7) {
                it.seek(k);
                it.prev();
                match i.checked_sub(1) {
                    Some(p) => assert_eq!(it.key(), &entries[p].0[..]),
                    None => assert!(!it.valid() && !it.is_corrupt()),
                }
                it.next();
                if i > 0 {
                    assert_eq!(it.key(), &k[..]);
                }
            }
        }
    }

    #[test]
    fn seek_for_prev_and_seek_to_last_on_empty_and_single_entry_blocks() {
        for interval in [1, 16] {
            let block = build(&[], interval);
            let mut it = block.iter(KeyOrder::Bytewise);
            it.seek_to_last();
            assert!(!it.valid() && !it.is_corrupt());
            it.seek_for_prev(b"zzz");
            assert!(!it.valid() && !it.is_corrupt());
            let entries = vec![(b"m".to_vec(), b"v".to_vec())];
            let block = build(&entries, interval);
            let mut it = block.iter(KeyOrder::Bytewise);
            it.seek_to_last();
            assert_eq!(it.key(), b"m");
            it.prev();
            assert!(!it.valid() && !it.is_corrupt());
            it.seek_for_prev(b"m");
            assert_eq!(it.key(), b"m");
            it.seek_for_prev(b"z");
            assert_eq!(it.key(), b"m");
            it.seek_for_prev(b"a");
            assert!(!it.valid() && !it.is_corrupt());
            it.seek_for_prev(b"");
            assert!(!it.valid() && !it.is_corrupt());
        }
    }

    #[test]
    fn internal_keys_seek_for_prev_lands_on_the_oldest_version_at_or_before() {
        let entries = internal_entries();
        for interval in [1, 16] {
            let block = build(&entries, interval);
            let mut it = block.iter(KeyOrder::Internal);
            for (i, (k, v)) in entries.iter().enumerate() {
                it.seek_for_prev(k);
                assert_eq!((it.key(), it.value()), (&k[..], &v[..]), "entry {i}");
            }
            // The largest internal key of a user key (sequence 0, a tombstone) is ≥ each of its
            // versions: seek_for_prev to it lands on the oldest version.
            for u in 1..200u32 {
                let user = format!("k{u:05}").into_bytes();
                it.seek_for_prev(&internal_key(&user, 0, ValueKind::Deletion));
                let p = crate::key::parse_internal_key(it.key()).unwrap();
                assert_eq!((p.user_key, p.seq), (&user[..], u64::from(u) * 10 + 1));
            }
        }
    }

    #[test]
    fn random_walks_match_a_linear_model() {
        let mut rng = StdRng::seed_from_u64(17);
        let mut keys: Vec<Vec<u8>> = (0..400)
            .map(|_| {
                let n = rng.gen_range(0..6);
                (0..n).map(|_| rng.gen_range(b'a'..=b'd')).collect()
            })
            .collect();
        keys.sort();
        keys.dedup();
        let entries: Vec<_> = keys.iter().map(|k| (k.clone(), k.repeat(3))).collect();
        let n = entries.len();
        for interval in [1, 2, 5, 16] {
            let block = build(&entries, interval);
            let mut it = block.iter(KeyOrder::Bytewise);
            for _ in 0..3000 {
                let target: Vec<u8> = (0..rng.gen_range(0..7))
                    .map(|_| rng.gen_range(b'a'..=b'e'))
                    .collect();
                let mut pos = match rng.gen_range(0..4) {
                    0 => {
                        it.seek(&target);
                        entries.partition_point(|(k, _)| k < &target)
                    }
                    1 => {
                        it.seek_for_prev(&target);
                        entries
                            .partition_point(|(k, _)| k <= &target)
                            .checked_sub(1)
                            .unwrap_or(n)
                    }
                    2 => {
                        it.seek_to_first();
                        0
                    }
                    _ => {
                        it.seek_to_last();
                        n - 1
                    }
                };
                for _ in 0..rng.gen_range(0..20) {
                    match entries.get(pos) {
                        Some((k, v)) => assert_eq!((it.key(), it.value()), (&k[..], &v[..])),
                        None => {
                            assert!(!it.valid() && !it.is_corrupt());
                            break;
                        }
                    }
                    if rng.gen_bool(0.5) {
                        it.next();
                        pos += 1;
                    } else {
                        it.prev();
                        pos = pos.checked_sub(1).unwrap_or(n);
                    }
                }
            }
        }
    }

    #[test]
    fn prev_flags_entries_that_straddle_a_restart_point() {
        // Restart point 1 moved inside the first entry's value: a forward scan steps over it and
        // flags it; walking back from the last entry decodes from restart point 1 and flags it
        // before returning anything invented.
        let entries = vec![
            (b"alpha".to_vec(), b"1111".to_vec()),
            (b"beta".to_vec(), b"2".to_vec()),
            (b"gamma".to_vec(), b"3".to_vec()),
        ];
        let mut bad = build(&entries, 1).data.as_slice().to_vec();
        let n = bad.len();
        // Restart array: [0, 12, 20]; the second becomes 10, inside "alpha"'s value.
        assert_eq!(fixed32_at(&bad, n - 12), Some(12));
        bad[n - 12] = 10;
        let block = Arc::new(Block::new(bad).unwrap());
        let mut it = block.iter(KeyOrder::Bytewise);
        it.seek_to_first();
        it.next();
        assert!(!it.valid() && it.is_corrupt());
        let mut it = block.iter(KeyOrder::Bytewise);
        it.seek_to_last();
        assert_eq!(it.key(), b"gamma");
        it.prev();
        // Restart point 1 (offset 10, inside a value) does not decode as an entry.
        assert!(!it.valid() && it.is_corrupt());
        // Sticky, as for every other corruption.
        it.seek_to_last();
        assert!(!it.valid() && it.is_corrupt());
        it.seek_for_prev(b"zzz");
        assert!(!it.valid() && it.is_corrupt());
    }

    /// Walks a possibly damaged block every way a reader would; returns the keys a full scan
    /// yielded without being flagged corrupt.
    fn exercise(bytes: Vec<u8>, order: KeyOrder, probes: &[Vec<u8>]) -> Option<Vec<Vec<u8>>> {
        let len = bytes.len();
        let block = Arc::new(Block::new(bytes)?);
        let mut it = block.iter(order);
        it.seek_to_first();
        let mut keys = Vec::new();
        // Every entry takes at least 3 header bytes, so a scan that terminates does so within this.
        let mut steps = 0;
        while it.valid() {
            keys.push(it.key().to_vec());
            let _ = it.value();
            it.next();
            steps += 1;
            assert!(steps <= len / 3 + 1, "iteration does not terminate");
        }
        let scan_ok = !it.is_corrupt();
        // Backward from the end: each step lands on an entry that starts before the current one,
        // so it terminates within the same bound.
        let mut it = block.iter(order);
        it.seek_to_last();
        let mut back = Vec::new();
        let mut steps = 0;
        while it.valid() {
            back.push(it.key().to_vec());
            let _ = it.value();
            it.prev();
            steps += 1;
            assert!(
                steps <= len / 3 + 1,
                "backward iteration does not terminate"
            );
        }
        if scan_ok {
            // A block a forward scan found sound reads the same backward.
            assert!(
                !it.is_corrupt(),
                "a clean block is flagged walking backward"
            );
            back.reverse();
            assert_eq!(back, keys, "backward walk differs from the forward one");
        }
        for p in probes {
            // A batch's prefetch of the entries a seek will decode reads the block as the seek
            // does, damaged or not.
            block.prefetch_seek_span(p, order);
            let mut it = block.iter(order);
            it.seek(p);
            let mut steps = 0;
            while it.valid() && steps < 4 {
                let _ = (it.key(), it.value());
                it.next();
                steps += 1;
            }
            let mut it = block.iter(order);
            it.seek_for_prev(p);
            let mut steps = 0;
            while it.valid() && steps < 4 {
                let _ = (it.key(), it.value());
                if steps % 3 == 2 {
                    it.next();
                } else {
                    it.prev();
                }
                steps += 1;
            }
        }
        scan_ok.then_some(keys)
    }

    #[test]
    fn damaged_blocks_never_panic() {
        let mut rng = StdRng::seed_from_u64(0x5eed);
        let bytewise = prefixed_entries()[..200].to_vec();
        let internal = internal_entries()[..200].to_vec();
        let cases = [
            (build(&bytewise, 16), KeyOrder::Bytewise, &bytewise),
            (build(&bytewise, 1), KeyOrder::Bytewise, &bytewise),
            (build(&internal, 16), KeyOrder::Internal, &internal),
            (build(&internal, 3), KeyOrder::Internal, &internal),
        ];
        let mut accepted = 0;
        let mut clean_scans = 0;
        for (block, order, entries) in &cases {
            let good = block.data.as_slice();
            let mut probes: Vec<Vec<u8>> =
                entries.iter().step_by(17).map(|e| e.0.clone()).collect();
            probes.push(Vec::new());
            probes.push(vec![0xff; 30]);
            for round in 0..1500 {
                let mut bad = good.to_vec();
                match round % 4 {
                    0 => {
                        let i = rng.gen_range(0..bad.len());
                        bad[i] ^= 1 << rng.gen_range(0..8);
                    }
                    1 => {
                        for _ in 0..rng.gen_range(1..8) {
                            let i = rng.gen_range(0..bad.len());
                            bad[i] = rng.gen();
                        }
                    }
                    2 => bad.truncate(rng.gen_range(0..bad.len())),
                    _ => {
                        // Damage only the entry area, so Block::new accepts it and the iterator
                        // must cope.
                        let count = fixed32_at(&bad, bad.len() - 4).unwrap() as usize;
                        let entries_end = bad.len() - 4 - 4 * count;
                        let i = rng.gen_range(0..entries_end);
                        bad[i] = rng.gen();
                    }
                }
                if let Some(keys) = exercise(bad, *order, &probes) {
                    accepted += 1;
                    clean_scans += usize::from(keys.len() == entries.len());
                }
            }
            // Pure garbage of every small size.
            for _ in 0..1000 {
                let n = rng.gen_range(0..64);
                let mut junk: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
                if n >= 8 && rng.gen_bool(0.5) {
                    // A plausible trailer makes Block::new accept more of it.
                    junk[n - 4..].copy_from_slice(&1u32.to_le_bytes());
                    junk[n - 8..n - 4].copy_from_slice(&0u32.to_le_bytes());
                }
                let _ = exercise(junk, *order, &probes);
            }
        }
        // The fuzzing reached the iterator, not just Block::new's rejection path.
        assert!(
            accepted > 1000 && clean_scans > 0,
            "{accepted} {clean_scans}"
        );
    }

    #[test]
    fn truncated_entries_yield_a_stored_prefix_or_are_flagged() {
        // Cut the entry area anywhere and rebuild a valid restart array for what is left: a scan
        // must return exactly the stored keys before the cut, and flag corruption unless the cut
        // fell on an entry boundary. No invented key may appear.
        let entries = prefixed_entries()[..100].to_vec();
        let interval = 16;
        let mut b = BlockBuilder::new(interval);
        let mut boundaries = vec![0];
        for (n, (k, v)) in entries.iter().enumerate() {
            b.add(k, v);
            let restarts = (n + 1).div_ceil(interval);
            boundaries.push(b.estimated_size() - 4 * restarts - 4);
        }
        let full = b.finish().to_vec();
        let count = fixed32_at(&full, full.len() - 4).unwrap() as usize;
        let restarts_at = full.len() - 4 - 4 * count;
        assert_eq!(boundaries.last(), Some(&restarts_at));
        for cut in 0..=restarts_at {
            let mut bytes = full[..cut].to_vec();
            let kept: Vec<u32> = (0..count)
                .map(|i| fixed32_at(&full, restarts_at + 4 * i).unwrap())
                .filter(|&r| r == 0 || (r as usize) < cut)
                .collect();
            for r in &kept {
                bytes.extend_from_slice(&r.to_le_bytes());
            }
            bytes.extend_from_slice(&(kept.len() as u32).to_le_bytes());
            let block = Arc::new(Block::new(bytes).unwrap());
            let mut it = block.iter(KeyOrder::Bytewise);
            it.seek_to_first();
            let mut i = 0;
            while it.valid() {
                assert_eq!(
                    (it.key(), it.value()),
                    (&entries[i].0[..], &entries[i].1[..]),
                    "cut {cut}"
                );
                i += 1;
                it.next();
            }
            let whole = boundaries.iter().take_while(|&&b| b <= cut).count() - 1;
            assert_eq!(i, whole, "cut {cut}");
            assert_eq!(it.is_corrupt(), !boundaries.contains(&cut), "cut {cut}");
            // A seek past everything kept agrees with the scan.
            let mut it = block.iter(KeyOrder::Bytewise);
            it.seek(&[0xff]);
            assert!(!it.valid());
        }
    }
}
