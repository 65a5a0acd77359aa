//! Elias–Fano: a sorted sequence of `n` integers below `universe` in about
//! `n · (2 + log2(universe / n))` bits, answering "how many are below `y`" in constant expected
//! time. The range filter stores its hashes in it.
//!
//! Each value is split into its low `low_bits` bits, packed one after another, and its high part
//! `h = value >> low_bits`, written in unary into the *upper* bit vector: value `i` (in sorted
//! order) sets bit `h + i`. So bucket `b` (the values whose high part is `b`) is a run of ones
//! ended by the `b`-th zero, and the values below bucket `b` number `select0(b − 1) + 1 − b`.
//! A sample of the position of every 256th zero, rebuilt at load, makes `select0` a short scan.

use super::spare_integers;

/// Zeros between two select samples.
const SAMPLE_EVERY: u64 = 256;

/// A sorted sequence of integers in Elias–Fano form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EliasFano {
    len: u64,
    universe: u64,
    low_bits: u32,
    low: Vec<u64>,
    upper: Vec<u64>,
    /// The position in `upper` of zero number `k · SAMPLE_EVERY`, for every such zero.
    zero_samples: Vec<u64>,
}

impl EliasFano {
    /// The low bits per value that make the sequence smallest for `len` values below `universe`.
    fn low_bits_for(len: u64, universe: u64) -> u32 {
        if len == 0 || universe <= len {
            0
        } else {
            (universe / len).ilog2()
        }
    }

    /// The sequence of `values`, as [`encode_sorted`](Self::encode_sorted) takes them.
    #[cfg(test)]
    pub(crate) fn new(values: &[u64], universe: u64) -> EliasFano {
        let (low_bits, low, upper) = Self::split(values, universe, Vec::new());
        let mut ef = EliasFano {
            len: values.len() as u64,
            universe,
            low_bits,
            low,
            upper,
            zero_samples: Vec::new(),
        };
        // The zeros: bucket b's run is closed by a zero at select0(b); every position not set
        // is one.
        ef.zero_samples = ef.sample_zeros();
        ef
    }

    /// Appends the encoding ([`write_encoding`](Self::write_encoding)) of `values`, sorted
    /// ascending (repeats allowed), each below `universe`, without keeping the sequence: a
    /// filter's build reads nothing back. The low bits are set in a buffer the thread kept.
    ///
    /// # Panics
    /// If `values` is not sorted or holds a value `≥ universe` (a caller's bug: the range filter
    /// builds its values itself).
    pub(crate) fn encode_sorted(values: &[u64], universe: u64, out: &mut Vec<u8>) {
        let (low_bits, low, upper) = Self::split(values, universe, spare_integers::take());
        Self::write_encoding(values.len() as u64, universe, low_bits, &low, &upper, out);
        spare_integers::give(low);
    }

    /// The low bits per value, the low words (set in `low`, emptied first) and the upper words.
    fn split(values: &[u64], universe: u64, mut low: Vec<u64>) -> (u32, Vec<u64>, Vec<u64>) {
        let len = values.len() as u64;
        let low_bits = Self::low_bits_for(len, universe);
        let buckets = Self::buckets(universe, low_bits);
        low.clear();
        low.resize(words(len * u64::from(low_bits)), 0);
        let mut upper = vec![0u64; words(len + buckets)];
        let mut previous = 0;
        for (i, &v) in values.iter().enumerate() {
            assert!(
                v >= previous && v < universe,
                "Elias-Fano input out of order"
            );
            previous = v;
            if low_bits > 0 {
                write_bits(&mut low, i as u64 * u64::from(low_bits), low_bits, v);
            }
            let bit = (v >> low_bits) + i as u64;
            upper[(bit / 64) as usize] |= 1 << (bit % 64);
        }
        (low_bits, low, upper)
    }

    /// How many buckets (high parts) values below `universe` fall in.
    fn buckets(universe: u64, low_bits: u32) -> u64 {
        if universe == 0 {
            0
        } else {
            ((universe - 1) >> low_bits) + 1
        }
    }

    /// Bits of the upper vector: one per value and one zero per bucket.
    fn upper_len(&self) -> u64 {
        self.len + Self::buckets(self.universe, self.low_bits)
    }

    fn sample_zeros(&self) -> Vec<u64> {
        let mut samples = Vec::new();
        let mut zeros = 0u64;
        let bits = self.upper_len();
        for (w, &word) in self.upper.iter().enumerate() {
            let base = w as u64 * 64;
            let valid = (bits - base).min(64);
            let mut inverted = !word;
            if valid < 64 {
                inverted &= (1u64 << valid) - 1;
            }
            let count = u64::from(inverted.count_ones());
            // Every sampled zero in this word: zero number k·SAMPLE_EVERY for zeros ≤ k·S < zeros + count.
            let mut next = zeros.div_ceil(SAMPLE_EVERY) * SAMPLE_EVERY;
            while next < zeros + count {
                let rank = (next - zeros) as u32;
                samples.push(base + u64::from(select_in_word(inverted, rank)));
                next += SAMPLE_EVERY;
            }
            zeros += count;
        }
        samples
    }

    /// The number of values.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// The bound every value is below.
    pub(crate) fn universe(&self) -> u64 {
        self.universe
    }

    /// The position of zero number `k` (from 0) in the upper vector; `k` must be below the number
    /// of buckets.
    fn select0(&self, k: u64) -> u64 {
        let sample = (k / SAMPLE_EVERY) as usize;
        let mut position = self.zero_samples[sample];
        let mut remaining = k - sample as u64 * SAMPLE_EVERY;
        loop {
            let w = (position / 64) as usize;
            let offset = position % 64;
            // Zeros at or after `position` in this word (bits past the end are never asked for:
            // the zero sought exists).
            let inverted = !self.upper[w] & (u64::MAX << offset);
            let count = u64::from(inverted.count_ones());
            if remaining < count {
                return w as u64 * 64 + u64::from(select_in_word(inverted, remaining as u32));
            }
            remaining -= count;
            position = (w as u64 + 1) * 64;
        }
    }

    fn upper_bit(&self, position: u64) -> bool {
        self.upper[(position / 64) as usize] >> (position % 64) & 1 == 1
    }

    fn low_of(&self, i: u64) -> u64 {
        if self.low_bits == 0 {
            0
        } else {
            read_bits(&self.low, i * u64::from(self.low_bits), self.low_bits)
        }
    }

    /// How many values are below `y` (tests check the encoding with it).
    #[cfg(test)]
    fn rank(&self, y: u64) -> u64 {
        if y >= self.universe {
            return self.len;
        }
        self.walk_to(y).0
    }

    /// For `y` below the universe: how many values are below `y`, and the position in the upper
    /// vector where the walk stopped (the first value at or above `y` if it is in `y`'s bucket,
    /// else the zero that closes the bucket).
    fn walk_to(&self, y: u64) -> (u64, u64) {
        let bucket = y >> self.low_bits;
        let start = match bucket {
            0 => 0,
            b => self.select0(b - 1) + 1,
        };
        // Values in buckets below: the ones before `start`.
        let mut index = start - bucket;
        let low = y & low_mask(self.low_bits);
        let mut position = start;
        // Bucket `bucket`'s values, ascending in their low bits; its run ends at a zero, which
        // exists (y < universe).
        while self.upper_bit(position) && self.low_of(index) < low {
            index += 1;
            position += 1;
        }
        (index, position)
    }

    /// Whether any value lies in `[lo, hi]`: whether the smallest value at or above `lo` is at
    /// most `hi`, one walk from `lo`'s bucket (two ranks would find two buckets' starts, each a
    /// cache miss or two).
    pub(crate) fn any_in(&self, lo: u64, hi: u64) -> bool {
        if lo > hi {
            return false;
        }
        self.successor(lo).is_some_and(|v| v <= hi)
    }

    /// The smallest value at or above `y`, if any.
    fn successor(&self, y: u64) -> Option<u64> {
        if y >= self.universe {
            return None;
        }
        let (index, position) = self.walk_to(y);
        if index >= self.len {
            return None;
        }
        // Value `index` is the next one at or after `position` (the zeros skipped are buckets
        // ending; a decoded sequence holds exactly `len` ones).
        let position = self.next_one(position)?;
        Some(((position - index) << self.low_bits) | self.low_of(index))
    }

    /// The first one at or after `position`.
    fn next_one(&self, position: u64) -> Option<u64> {
        let mut w = (position / 64) as usize;
        let mut bits = self.upper.get(w)? & (u64::MAX << (position % 64));
        while bits == 0 {
            w += 1;
            bits = *self.upper.get(w)?;
        }
        Some(w as u64 * 64 + u64::from(bits.trailing_zeros()))
    }

    /// The value at sorted position `i`, for tests and inspection.
    #[cfg(test)]
    fn get(&self, i: u64) -> u64 {
        // The (i+1)-th one: walk the vector (tests only).
        let mut seen = 0;
        let mut position = 0;
        loop {
            if self.upper_bit(position) {
                if seen == i {
                    return ((position - i) << self.low_bits) | self.low_of(i);
                }
                seen += 1;
            }
            position += 1;
        }
    }

    /// Bytes held in memory.
    pub(crate) fn memory_bytes(&self) -> usize {
        (self.low.len() + self.upper.len() + self.zero_samples.len()) * 8
    }

    /// Appends the encoding, as [`encode_sorted`](Self::encode_sorted) does for the sequence's
    /// values.
    #[cfg(test)]
    pub(crate) fn encode_into(&self, out: &mut Vec<u8>) {
        Self::write_encoding(
            self.len,
            self.universe,
            self.low_bits,
            &self.low,
            &self.upper,
            out,
        );
    }

    /// Appends the encoding: `u64 len`, `u64 universe`, `u8 low_bits`, then the low words and the
    /// upper words, little-endian (their counts follow from the three numbers).
    fn write_encoding(
        len: u64,
        universe: u64,
        low_bits: u32,
        low: &[u64],
        upper: &[u64],
        out: &mut Vec<u8>,
    ) {
        out.reserve(8 + 8 + 1 + 8 * (low.len() + upper.len()));
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&universe.to_le_bytes());
        out.push(low_bits as u8);
        for w in low.iter().chain(upper) {
            out.extend_from_slice(&w.to_le_bytes());
        }
    }

    /// Decodes what [`encode_sorted`](Self::encode_sorted) wrote at the start of `bytes`; returns
    /// it and the bytes after it, or `None` if they are not a well-formed sequence.
    pub(crate) fn decode(bytes: &[u8]) -> Option<(EliasFano, &[u8])> {
        let (len, rest) = take_u64(bytes)?;
        let (universe, rest) = take_u64(rest)?;
        let (&low_bits, rest) = rest.split_first()?;
        let low_bits = u32::from(low_bits);
        if low_bits != Self::low_bits_for(len, universe) {
            return None;
        }
        let low_words = words(len.checked_mul(u64::from(low_bits))?);
        let buckets = Self::buckets(universe, low_bits);
        let upper_len = len.checked_add(buckets)?;
        let upper_words = words(upper_len);
        let total = low_words.checked_add(upper_words)?.checked_mul(8)?;
        if rest.len() < total {
            return None;
        }
        let (body, rest) = rest.split_at(total);
        let mut all = body
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])));
        let low: Vec<u64> = all.by_ref().take(low_words).collect();
        let upper: Vec<u64> = all.collect();
        // Well-formed: exactly `len` ones, no bit set past the end, and (so every rank ends)
        // the last bucket closed by a zero.
        let ones: u64 = upper.iter().map(|w| u64::from(w.count_ones())).sum();
        if ones != len {
            return None;
        }
        if upper_len % 64 != 0
            && let Some(last) = upper.last()
            && last >> (upper_len % 64) != 0
        {
            return None;
        }
        let mut ef = EliasFano {
            len,
            universe,
            low_bits,
            low,
            upper,
            zero_samples: Vec::new(),
        };
        if upper_len > 0 && ef.upper_bit(upper_len - 1) {
            return None;
        }
        ef.zero_samples = ef.sample_zeros();
        // Low parts ascend within each bucket: walk the set bits a word at a time (the value of
        // sorted position i has its bit at bucket + i).
        let mut index = 0u64;
        let mut previous: Option<(u64, u64)> = None;
        for (w, &word) in ef.upper.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                let position = w as u64 * 64 + u64::from(bits.trailing_zeros());
                bits &= bits - 1;
                let bucket = position - index;
                let low = ef.low_of(index);
                if previous.is_some_and(|(b, l)| b == bucket && low < l) {
                    return None;
                }
                previous = Some((bucket, low));
                index += 1;
            }
        }
        Some((ef, rest))
    }
}

fn take_u64(bytes: &[u8]) -> Option<(u64, &[u8])> {
    let (head, rest) = bytes.split_first_chunk::<8>()?;
    Some((u64::from_le_bytes(*head), rest))
}

fn words(bits: u64) -> usize {
    bits.div_ceil(64) as usize
}

fn low_mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// The position of the set bit of rank `rank` (from 0) in `word`, which has more than `rank`.
fn select_in_word(mut word: u64, rank: u32) -> u32 {
    for _ in 0..rank {
        word &= word - 1;
    }
    word.trailing_zeros()
}

/// Writes the low `width` bits of `value` at bit `at` of `words` (which are zero there).
fn write_bits(words: &mut [u64], at: u64, width: u32, value: u64) {
    let value = value & low_mask(width);
    let (w, offset) = ((at / 64) as usize, (at % 64) as u32);
    words[w] |= value << offset;
    if offset + width > 64 {
        words[w + 1] |= value >> (64 - offset);
    }
}

/// Reads `width` bits at bit `at` of `words`.
fn read_bits(words: &[u64], at: u64, width: u32) -> u64 {
    let (w, offset) = ((at / 64) as usize, (at % 64) as u32);
    let mut value = words[w] >> offset;
    if offset + width > 64 {
        value |= words[w + 1] << (64 - offset);
    }
    value & low_mask(width)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn naive_rank(values: &[u64], y: u64) -> u64 {
        values.iter().filter(|&&v| v < y).count() as u64
    }

    #[test]
    fn empty_sequences_hold_nothing() {
        for universe in [0, 1, 1000] {
            let ef = EliasFano::new(&[], universe);
            assert_eq!(ef.rank(0), 0);
            assert!(!ef.any_in(0, u64::MAX));
            let mut bytes = Vec::new();
            ef.encode_into(&mut bytes);
            assert_eq!(EliasFano::decode(&bytes).unwrap().0, ef);
        }
    }

    #[test]
    fn dense_and_sparse_sequences_rank_exactly() {
        let dense: Vec<u64> = (0..5000).collect();
        let sparse: Vec<u64> = (0..5000).map(|i| i * 1_000_003).collect();
        let repeats: Vec<u64> = (0..3000).map(|i| i / 3 * 7).collect();
        for (values, universe) in [
            (dense, 5000),
            (sparse, 5_000_000_000),
            (repeats, 7000),
            (vec![u64::MAX - 1], u64::MAX),
        ] {
            let ef = EliasFano::new(&values, universe);
            for (i, &v) in values.iter().enumerate().step_by(7) {
                assert_eq!(ef.get(i as u64), v);
                for y in [v.saturating_sub(1), v, v + 1] {
                    assert_eq!(ef.rank(y), naive_rank(&values, y), "y {y}");
                }
            }
        }
    }

    #[test]
    fn damaged_encodings_are_refused() {
        let ef = EliasFano::new(&[3, 9, 12, 400, 401], 1000);
        let mut bytes = Vec::new();
        ef.encode_into(&mut bytes);
        assert!(EliasFano::decode(&bytes[..bytes.len() - 1]).is_none());
        for i in 0..bytes.len() {
            for bit in [0x01, 0x80] {
                let mut bad = bytes.clone();
                bad[i] ^= bit;
                // Decoding either refuses or yields a sequence that answers without panicking.
                if let Some((other, _)) = EliasFano::decode(&bad) {
                    for y in [0, 5, 400, 999, 5000] {
                        let _ = other.any_in(y, y + 10);
                    }
                }
            }
        }
    }

    #[test]
    fn low_parts_out_of_order_in_a_bucket_are_refused() {
        let ef = EliasFano::new(&[1, 2], 1000);
        let mut bytes = Vec::new();
        ef.encode_into(&mut bytes);
        // Both values are in bucket 0 with 8 low bits: swap them in the first low word.
        let low_word = 8 + 8 + 1;
        assert_eq!(bytes[low_word..low_word + 2], [1, 2]);
        bytes.swap(low_word, low_word + 1);
        assert!(EliasFano::decode(&bytes).is_none());
    }

    proptest! {
        #[test]
        fn a_build_in_a_kept_buffer_encodes_as_the_sequence_does(
            mut values in proptest::collection::vec(0u64..1_000_000, 0..600),
            stale in 0usize..2000,
        ) {
            values.sort_unstable();
            // The thread's spare holds a former build's bits, which must not show.
            spare_integers::give(vec![u64::MAX; stale]);
            let mut built = vec![7u8];
            EliasFano::encode_sorted(&values, 1_000_000, &mut built);
            let mut expected = vec![7u8];
            EliasFano::new(&values, 1_000_000).encode_into(&mut expected);
            let (decoded, rest) = EliasFano::decode(&built[1..]).expect("well-formed");
            prop_assert!(rest.is_empty());
            prop_assert_eq!(decoded.len(), values.len() as u64);
            prop_assert_eq!(built, expected);
        }

        #[test]
        fn rank_and_round_trip_match_a_sorted_vector(
            mut values in proptest::collection::vec(0u64..1_000_000, 0..600),
            extra in 0u64..2_000_000,
            probes in proptest::collection::vec(0u64..2_100_000, 1..50),
        ) {
            values.sort_unstable();
            let universe = 1_000_000 + extra;
            let ef = EliasFano::new(&values, universe);
            let mut bytes = Vec::new();
            ef.encode_into(&mut bytes);
            bytes.extend_from_slice(b"tail");
            let (decoded, rest) = EliasFano::decode(&bytes).unwrap();
            prop_assert_eq!(rest, b"tail");
            prop_assert_eq!(&decoded, &ef);
            for y in probes {
                prop_assert_eq!(ef.rank(y), naive_rank(&values, y));
                prop_assert_eq!(
                    ef.successor(y),
                    values.iter().copied().find(|&v| v >= y)
                );
                for width in [0, 1, 37, 4096, 300_000] {
                    let hi = y + width;
                    let naive = values.iter().any(|&v| v >= y && v <= hi);
                    prop_assert_eq!(ef.any_in(y, hi), naive);
                }
            }
        }

        #[test]
        fn successors_in_dense_sequences_match_a_sorted_vector(
            mut values in proptest::collection::vec(0u64..5_000, 0..3_000),
            probes in proptest::collection::vec(0u64..5_100, 1..50),
        ) {
            // Many values per bucket, repeats, and empty buckets between runs.
            values.sort_unstable();
            let ef = EliasFano::new(&values, 5_000);
            for y in probes {
                prop_assert_eq!(
                    ef.successor(y),
                    values.iter().copied().find(|&v| v >= y)
                );
                prop_assert_eq!(ef.any_in(y, y + 3), values.iter().any(|&v| v >= y && v <= y + 3));
            }
        }
    }
}
