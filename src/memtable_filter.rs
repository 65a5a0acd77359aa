//! A memtable's filter of its user keys: a Get of a key the memtable does not hold skips the
//! skiplist search, a walk of some twenty nodes that each cost a cache miss.
//!
//! While writes flow a Get asks the memtable and up to `max_immutable_memtables` frozen ones
//! before any table, and most keys are in none of them; the filter answers each with one load.
//! It is a register-blocked bloom filter: a key sets [`BITS_PER_KEY`] bits of one 64-bit word,
//! chosen by the key's xxh3 hash (the hash table filters use), so that adding a key is one atomic
//! `fetch_or` and asking one load. It takes a word per 256 bytes of write buffer, 1/32 of it (a
//! 4 MiB memtable's: 128 KiB), allocated by the first key added, so an empty memtable costs nothing; a
//! memtable of 100-byte values then holds about 45 filter bits per key, and a key it does not hold
//! passes about once in 8,000 Gets (the words fill unevenly; once in 850 at twice the keys).
//!
//! Writes are visible to a Get once it has read their sequence, which the writer publishes
//! (release) after adding them here; the filter's relaxed `fetch_or`s happen before that.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;

/// `Options::write_buffer_size`'s default (here, the leaf both `options.rs` and the memtable
/// import, so that neither imports the other).
pub(crate) const DEFAULT_WRITE_BUFFER_SIZE: usize = 4 << 20;

/// Bits a key sets in its word.
const BITS_PER_KEY: u32 = 6;

/// Write-buffer bytes per filter word (8 bytes): the filter takes 1/32 of the buffer's size.
const BUFFER_BYTES_PER_WORD: usize = 256;

/// The most words a filter takes (8 MiB, a 2 GiB write buffer's).
const MAX_WORDS: usize = 1 << 20;

/// The filter of one memtable's user keys.
pub(crate) struct MemtableFilter {
    words: OnceLock<Box<[AtomicU64]>>,
    /// log2 of the word count.
    shift: u32,
}

impl MemtableFilter {
    /// A filter for a memtable of `write_buffer_size` bytes (not allocated until a key comes).
    pub(crate) fn new(write_buffer_size: usize) -> Self {
        let words = (write_buffer_size / BUFFER_BYTES_PER_WORD)
            .next_power_of_two()
            .clamp(1, MAX_WORDS);
        MemtableFilter {
            words: OnceLock::new(),
            shift: words.trailing_zeros(),
        }
    }

    /// Adds `key`.
    #[inline]
    pub(crate) fn add(&self, key: &[u8]) {
        let words = self.words.get_or_init(|| {
            (0..1usize << self.shift)
                .map(|_| AtomicU64::new(0))
                .collect()
        });
        let (word, mask) = self.locate(key);
        // Every key's word and bits are set once: later writes of the key find them set.
        if words[word].load(Relaxed) & mask != mask {
            words[word].fetch_or(mask, Relaxed);
        }
    }

    /// Whether `key` may have been added: `false` means it never was.
    #[inline]
    pub(crate) fn may_contain(&self, key: &[u8]) -> bool {
        let Some(words) = self.words.get() else {
            return false;
        };
        let (word, mask) = self.locate(key);
        words[word].load(Relaxed) & mask == mask
    }

    /// The bytes it holds.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.words.get().map_or(0, |w| w.len() * 8)
    }

    /// `key`'s word (from the hash's top bits) and the bits it sets there (six 6-bit pieces of
    /// the hash times an odd constant, so that they do not repeat the word's bits).
    #[inline]
    fn locate(&self, key: &[u8]) -> (usize, u64) {
        let h = xxhash_rust::xxh3::xxh3_64(key);
        // `checked_shr`: a one-word filter shifts by 64, which is every key's word 0.
        let word = h.checked_shr(64 - self.shift).unwrap_or(0) as usize;
        let mut bits = h.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut mask = 0u64;
        for _ in 0..BITS_PER_KEY {
            mask |= 1 << (bits & 63);
            bits >>= 6;
        }
        (word, mask)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u64) -> [u8; 16] {
        let mut k = [b'0'; 16];
        let digits = format!("{i:016}");
        k.copy_from_slice(digits.as_bytes());
        k
    }

    #[test]
    fn every_key_added_may_be_there_and_few_others_pass() {
        let f = MemtableFilter::new(4 << 20);
        assert!(!f.may_contain(&key(1)), "empty: nothing passes");
        assert_eq!(f.bytes(), 0, "nothing allocated before the first key");
        // A 4 MiB memtable of 100-byte values holds about 23,000 keys.
        for i in 0..23_000 {
            f.add(&key(2 * i));
        }
        assert_eq!(f.bytes(), 128 << 10);
        assert!((0..23_000).all(|i| f.may_contain(&key(2 * i))));
        let passed = (0..100_000)
            .filter(|i| f.may_contain(&key(2 * i + 1)))
            .count();
        assert!(passed < 100, "{passed} of 100,000 absent keys passed");
    }

    #[test]
    fn a_small_buffer_gets_one_word_that_still_holds_every_key() {
        let f = MemtableFilter::new(0);
        assert_eq!(f.shift, 0);
        for i in 0..50 {
            f.add(&key(i));
        }
        assert_eq!(f.bytes(), 8);
        assert!((0..50).all(|i| f.may_contain(&key(i))));
    }

    #[test]
    fn a_huge_buffer_is_capped() {
        let f = MemtableFilter::new(usize::MAX / 2);
        assert_eq!(1usize << f.shift, MAX_WORDS);
    }
}
