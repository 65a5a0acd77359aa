//! Builds one block: prefix-compressed sorted entries followed by a restart array.
//!
//! Format (LevelDB's): `docs/table_format.md`, *Blocks*.

use crate::coding::{put_fixed32, put_varint64};

/// Accumulates sorted entries into the bytes of one block.
#[derive(Debug, Clone)]
pub(crate) struct BlockBuilder {
    /// Entries encoded so far; `finish` appends the restart array to it.
    buf: Vec<u8>,
    /// Offsets in `buf` of the restart points, the first always 0.
    restarts: Vec<u32>,
    /// Entries per restart point (at least 1).
    restart_interval: usize,
    /// Entries added since the last restart point.
    since_restart: usize,
    /// Entries added since `new` or `reset`.
    num_entries: usize,
    /// The last key added, kept whole so the next key can be prefix-compressed against it.
    last_key: Vec<u8>,
    /// Whether `finish` has appended the restart array.
    finished: bool,
}

impl BlockBuilder {
    /// An empty builder that starts a restart point every `restart_interval` entries
    /// (0 is treated as 1: every entry a restart point).
    pub(crate) fn new(restart_interval: usize) -> Self {
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            restart_interval: restart_interval.max(1),
            since_restart: 0,
            num_entries: 0,
            last_key: Vec::new(),
            finished: false,
        }
    }

    /// Appends an entry. Keys must arrive in the block's key order (the builder does not know the
    /// order, so it cannot check it), and not after `finish` until `reset`.
    ///
    /// The block must stay below 4 GiB, since restart offsets are u32; the table builder cuts
    /// blocks at a few KiB, so this holds in practice.
    pub(crate) fn add(&mut self, key: &[u8], value: &[u8]) {
        debug_assert!(!self.finished, "BlockBuilder::add after finish");
        let shared = if self.since_restart < self.restart_interval {
            common_prefix_len(&self.last_key, key)
        } else {
            // A restart point stores its key whole, so a seek can start decoding here.
            debug_assert!(u32::try_from(self.buf.len()).is_ok(), "block over 4 GiB");
            self.restarts.push(self.buf.len() as u32);
            self.since_restart = 0;
            0
        };
        let unshared = &key[shared..];
        // Lengths are varint32 in the format. Writing them as varint64 gives the same bytes for
        // every length below 4 GiB, and an impossible larger one then fails the reader's varint32
        // decode (reported as corruption) instead of being silently truncated here.
        put_varint64(&mut self.buf, shared as u64);
        put_varint64(&mut self.buf, unshared.len() as u64);
        put_varint64(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(unshared);
        self.buf.extend_from_slice(value);
        // Rewrite only the differing suffix so the key buffer's allocation is reused.
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(unshared);
        self.since_restart += 1;
        self.num_entries += 1;
    }

    /// The size in bytes `finish` would return now (or did return, once finished).
    pub(crate) fn estimated_size(&self) -> usize {
        if self.finished {
            self.buf.len()
        } else {
            self.buf.len() + 4 * self.restarts.len() + 4
        }
    }

    /// Whether no entry has been added since `new` or `reset`.
    pub(crate) fn is_empty(&self) -> bool {
        self.num_entries == 0
    }

    /// Appends the restart array and returns the finished block. Calling it again returns the
    /// same bytes; `reset` starts the next block.
    pub(crate) fn finish(&mut self) -> &[u8] {
        if !self.finished {
            for &r in &self.restarts {
                put_fixed32(&mut self.buf, r);
            }
            put_fixed32(&mut self.buf, self.restarts.len() as u32);
            self.finished = true;
        }
        &self.buf
    }

    /// Empties the builder for the next block, keeping its allocations.
    pub(crate) fn reset(&mut self) {
        self.buf.clear();
        self.restarts.clear();
        self.restarts.push(0);
        self.since_restart = 0;
        self.num_entries = 0;
        self.last_key.clear();
        self.finished = false;
    }
}

/// Length of the longest common prefix of `a` and `b`.
fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_block_is_one_restart_at_zero() {
        let mut b = BlockBuilder::new(16);
        assert!(b.is_empty());
        assert_eq!(b.estimated_size(), 8);
        assert_eq!(b.finish(), &[0, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(b.estimated_size(), 8);
    }

    #[test]
    fn entries_are_prefix_compressed_between_restarts() {
        let mut b = BlockBuilder::new(2);
        b.add(b"apple", b"1");
        b.add(b"apricot", b"22");
        b.add(b"banana", b"");
        assert_eq!(b.num_entries, 3);
        assert_eq!(b.last_key.as_slice(), b"banana");
        let expected_size = b.estimated_size();
        let bytes = b.finish().to_vec();
        assert_eq!(bytes.len(), expected_size);
        let mut want = Vec::new();
        want.extend_from_slice(&[0, 5, 1]);
        want.extend_from_slice(b"apple1");
        // "apricot" shares "ap" with "apple".
        want.extend_from_slice(&[2, 5, 2]);
        want.extend_from_slice(b"ricot22");
        // The third entry starts a restart point: no sharing.
        let third = want.len() as u8;
        want.extend_from_slice(&[0, 6, 0]);
        want.extend_from_slice(b"banana");
        want.extend_from_slice(&[0, 0, 0, 0, third, 0, 0, 0, 2, 0, 0, 0]);
        assert_eq!(bytes, want);
        // finish is idempotent.
        assert_eq!(b.finish(), &want[..]);
    }

    #[test]
    fn reset_starts_a_fresh_block() {
        let mut b = BlockBuilder::new(16);
        b.add(b"k1", b"v1");
        let first = b.finish().to_vec();
        b.reset();
        assert!(b.is_empty());
        assert_eq!(b.last_key.as_slice(), b"");
        b.add(b"k1", b"v1");
        assert_eq!(b.finish(), &first[..]);
    }

    #[test]
    fn zero_restart_interval_means_every_entry_restarts() {
        let mut b = BlockBuilder::new(0);
        b.add(b"aa", b"");
        b.add(b"ab", b"");
        let bytes = b.finish();
        // Second entry stores its key whole: shared = 0, unshared = 2.
        assert_eq!(&bytes[5..8], &[0, 2, 0]);
        assert_eq!(crate::coding::fixed32_at(bytes, bytes.len() - 4), Some(2));
    }
}
