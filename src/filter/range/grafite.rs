//! Grafite (Costa, Ferragina and Vinciguerra, SIGMOD 2024): a range filter whose false positive rate
//! for a range of `ℓ ≤ L` integers is at most about `ℓ / 2^(B − 2)` with `B` bits per key,
//! whatever the keys and the queries, including queries that start just past a key.
//!
//! Each key's integer `x` ([`key_map`](super::key_map)) is hashed to
//! `h(x) = (q(⌊x / L⌋) + x mod L) mod r` with `r = n · 2^(B − 2)`: a random offset per block of `L`
//! integers, so keys of one block keep their distances. (The paper adds `x` rather than `x mod L`;
//! the two differ by `⌊x / L⌋ · L mod r`, a constant per block that the random offset absorbs.
//! `L` is a power of two, so both are a shift and a mask.) The sorted hashes go into Elias–Fano
//! (`n · (2 + log2(r / n)) = n · B` bits). A range `[a, b]` of at most `L` integers meets at most
//! two blocks; within each, its keys hash into one interval of length `b − a + 1` (mod `r`), so
//! the filter answers whether a stored hash lies there: never "no" for a range holding a key, and
//! "maybe" for an empty one with probability at most `n · ℓ / r`. A mixing hash
//! stands in for the paper's pairwise-independent `q`.
//!
//! This file holds the hash and the query both formats share, and the single-window format: one
//! Grafite over every key's 8 bytes after the table's common prefix, which tables were written in
//! before segments (`segmented.rs`) and which the store still reads. Its bytes' layout is in
//! `docs/table_format.md`, *Range filter block*.

use std::ops::Bound;

use super::elias_fano::EliasFano;
use super::key_map::{integer_range, KeyMapper};
use super::spare_integers;
use super::RangeCheck;
use crate::coding::{put_length_prefixed, Decoder};

/// The format byte a Grafite filter's bytes start with.
const FORMAT_GRAFITE: u8 = 1;
/// The seed of `q` (fixed: a filter's answers depend only on its keys).
const SEED: u64 = 0x6772_6166_6974_6531;

/// `q`: a block number to an offset in `[0, r)`.
fn block_offset(block: u64, seed: u64, r: u64) -> u64 {
    // splitmix64's finaliser, then a multiply-high reduction to [0, r).
    let mut z = block ^ seed;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    ((u128::from(z) * u128::from(r)) >> 64) as u64
}

/// `h(x) = (q(⌊x / L⌋ ⊕ context) + x mod L) mod r`, for `L = 2^shift`: `context` (0 in the
/// single-window format) names the set of integers `x` belongs to, so that equal integers of two
/// contexts fall in unrelated blocks.
#[inline]
pub(super) fn hash(x: u64, context: u64, shift: u32, r: u64) -> u64 {
    let offset = block_offset((x >> shift) ^ context, SEED, r);
    let mut within = x & low_mask(shift);
    if within >= r {
        within %= r;
    }
    // Both below r: one subtraction brings the sum below r (wrapping past 2^64 when r is above
    // 2^63).
    let (sum, carry) = offset.overflowing_add(within);
    if carry || sum >= r {
        sum.wrapping_sub(r)
    } else {
        sum
    }
}

fn low_mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1 << bits) - 1
    }
}

/// The block size for ranges up to `max_range` integers: the power of two at or above it (at most
/// 2^63).
pub(super) fn block_size_for(max_range: u64) -> u64 {
    max_range
        .max(1)
        .checked_next_power_of_two()
        .unwrap_or(1 << 63)
}

/// Sorts `values`, all below `bound`: a least-significant-digit radix sort of 11-bit digits when
/// that takes at most four passes (a table's hashes: `bound` is about `n · 2^(bits − 2)`), which
/// beats a comparison sort several times over; else the standard sort. Every pass's digit counts
/// are taken in one read of the input.
pub(super) fn sort_below(values: &mut Vec<u64>, bound: u64) {
    const DIGIT: u32 = 11;
    const BUCKETS: usize = 1 << DIGIT;
    const MASK: u64 = (1 << DIGIT) - 1;
    let bits = 64 - bound.saturating_sub(1).leading_zeros();
    let passes = bits.div_ceil(DIGIT) as usize;
    if passes > 4 || values.len() < 256 {
        values.sort_unstable();
        return;
    }
    let mut counts = [[0usize; BUCKETS]; 4];
    for &v in values.iter() {
        for (pass, c) in counts.iter_mut().enumerate().take(passes) {
            c[((v >> (pass as u32 * DIGIT)) & MASK) as usize] += 1;
        }
    }
    let mut other = spare_integers::take();
    other.resize(values.len(), 0);
    for (pass, c) in counts.iter_mut().enumerate().take(passes) {
        let shift = pass as u32 * DIGIT;
        let mut start = 0;
        for slot in c.iter_mut() {
            let n = *slot;
            *slot = start;
            start += n;
        }
        for &v in values.iter() {
            let digit = ((v >> shift) & MASK) as usize;
            other[c[digit]] = v;
            c[digit] += 1;
        }
        std::mem::swap(values, &mut other);
    }
    spare_integers::give(other);
}

/// The hash range for `n` keys at `bits_per_key`: `n · 2^(bits − 2)`, at least 1.
pub(super) fn hash_range(n: u64, bits_per_key: f64) -> u64 {
    let r = n as f64 * (bits_per_key - 2.0).exp2();
    if r >= u64::MAX as f64 {
        u64::MAX
    } else {
        (r.ceil() as u64).max(1)
    }
}

/// Collects a table's keys, in order, and builds its Grafite filter.
#[derive(Debug)]
pub struct GrafiteBuilder {
    bits_per_key: f64,
    max_range: u64,
    keys: KeyMapper,
}

impl GrafiteBuilder {
    /// A builder for filters of `bits_per_key` (clamped to 3..=60) answering ranges of up to
    /// `max_range` integers (rounded up to a power of two, at most 2^63).
    pub fn new(bits_per_key: f64, max_range: u64) -> GrafiteBuilder {
        GrafiteBuilder {
            bits_per_key: clamp_bits(bits_per_key),
            max_range: block_size_for(max_range),
            keys: KeyMapper::default(),
        }
    }

    /// Adds a key, not below the last one added (a repeat changes nothing in the filter).
    pub fn add_key(&mut self, key: &[u8]) {
        self.keys.add(key);
    }

    /// Keys added so far (a repeat counted again).
    pub fn num_keys(&self) -> usize {
        self.keys.len()
    }

    /// The filter's bytes over every key added; the builder starts empty again.
    pub fn finish(&mut self) -> Vec<u8> {
        let (prefix, mut values) = self.keys.finish();
        values.dedup();
        let r = hash_range(values.len() as u64, self.bits_per_key);
        let l = self.max_range;
        let shift = l.trailing_zeros();
        for x in values.iter_mut() {
            *x = hash(*x, 0, shift, r);
        }
        sort_below(&mut values, r);
        // The sequence reserves its own bytes.
        let mut out = Vec::with_capacity(32 + prefix.len());
        out.push(FORMAT_GRAFITE);
        out.extend_from_slice(&self.bits_per_key.to_bits().to_le_bytes());
        out.extend_from_slice(&l.to_le_bytes());
        put_length_prefixed(&mut out, &prefix);
        EliasFano::encode_sorted(&values, r, &mut out);
        spare_integers::give(values);
        out
    }
}

/// The header both formats' bytes start with: their format byte, then bits per key and
/// `max_range`; the bits per key, `max_range` and the bytes after, if `bytes` start with `format`
/// and a well-formed header.
pub(super) fn read_header(bytes: &[u8], format: u8) -> Option<(f64, u64, &[u8])> {
    let (&found, rest) = bytes.split_first()?;
    if found != format {
        return None;
    }
    let (bits, rest) = rest.split_first_chunk::<8>()?;
    let bits_per_key = f64::from_bits(u64::from_le_bytes(*bits));
    let (max_range, rest) = rest.split_first_chunk::<8>()?;
    let max_range = u64::from_le_bytes(*max_range);
    if !max_range.is_power_of_two() || clamp_bits(bits_per_key) != bits_per_key {
        return None;
    }
    Some((bits_per_key, max_range, rest))
}

pub(super) fn clamp_bits(bits_per_key: f64) -> f64 {
    if bits_per_key.is_nan() {
        3.0
    } else {
        bits_per_key.clamp(3.0, 60.0)
    }
}

/// A Grafite filter read from its bytes: asks whether a table may hold a key in a range.
///
/// ```
/// use siftdb::filter::{GrafiteBuilder, GrafiteFilter};
///
/// let mut builder = GrafiteBuilder::new(16.0, 1 << 10);
/// for k in [b"user:0100", b"user:0200", b"user:0300"] {
///     builder.add_key(k);
/// }
/// let filter = GrafiteFilter::from_bytes(&builder.finish()).expect("well-formed");
/// assert!(filter.may_contain(Some(b"user:0150"), Some(b"user:0250"))); // holds user:0200
/// // Bounds outside the stripped prefix ("u": keys this short keep 8 bytes after it) are certain.
/// assert!(!filter.may_contain(Some(b"v"), None));
/// assert!(!filter.may_contain(None, Some(b"t")));
/// ```
///
/// On its own the filter knows only its prefix, not its table's smallest and largest keys: a
/// store clamps a range to those before asking, so that a one-sided range becomes narrow.
#[derive(Debug, Clone)]
pub struct GrafiteFilter {
    bits_per_key: f64,
    max_range: u64,
    prefix: Vec<u8>,
    hashes: EliasFano,
}

impl GrafiteFilter {
    /// Reads a filter from the bytes [`GrafiteBuilder::finish`] wrote; `None` if they are not a
    /// well-formed Grafite filter.
    pub fn from_bytes(bytes: &[u8]) -> Option<GrafiteFilter> {
        let (bits_per_key, max_range, rest) = read_header(bytes, FORMAT_GRAFITE)?;
        let mut reader = Decoder::new(rest);
        let prefix = reader.length_prefixed()?;
        let rest = reader.remaining();
        let (hashes, rest) = EliasFano::decode(rest)?;
        if !rest.is_empty()
            || hashes.universe() != hash_range(hashes.len(), bits_per_key)
            || hashes.len() == 0 && !prefix.is_empty()
        {
            return None;
        }
        Some(GrafiteFilter {
            bits_per_key,
            max_range,
            prefix: prefix.to_vec(),
            hashes,
        })
    }

    /// The bits per key it was built with.
    pub fn bits_per_key(&self) -> f64 {
        self.bits_per_key
    }

    /// The widest range (in integers after the prefix) it answers; wider ones are "maybe".
    pub fn max_range(&self) -> u64 {
        self.max_range
    }

    /// The bytes every key of its table starts with.
    pub fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    /// The number of distinct key integers it holds.
    pub fn num_keys(&self) -> u64 {
        self.hashes.len()
    }

    /// Bytes it holds in memory.
    pub fn memory_bytes(&self) -> usize {
        self.hashes.memory_bytes() + self.prefix.len()
    }

    /// The integer range `[lo, hi]` keys between `lower` and `upper` (each `None` for unbounded;
    /// inclusive or exclusive alike) map into, or `None` if no key of the table can lie there.
    pub fn integer_range(&self, lower: Option<&[u8]>, upper: Option<&[u8]>) -> Option<(u64, u64)> {
        self.integer_range_between(
            lower.map_or(Bound::Unbounded, Bound::Included),
            upper.map_or(Bound::Unbounded, Bound::Included),
        )
    }

    /// The integer range `[lo, hi]` the keys in `(lower, upper)` map into, or `None` if no key of
    /// the table can lie there. An excluded upper bound that is the prefix and 1 to 8 more bytes,
    /// the last not zero, excludes its own integer: every key below it maps below it (a key
    /// mapping to the same integer would be the bound with zero bytes after it, so above it).
    /// So `[a, a + w)` asks about `w` integers, not `w + 1`.
    pub fn integer_range_between(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
    ) -> Option<(u64, u64)> {
        integer_range(&self.prefix, lower, upper)
    }

    /// Whether its table may hold a key `k` with `lower ≤ k ≤ upper` (each `None` for unbounded).
    /// Never `false` when it does; `true` for ranges wider than [`max_range`](Self::max_range).
    pub fn may_contain(&self, lower: Option<&[u8]>, upper: Option<&[u8]>) -> bool {
        match self.integer_range(lower, upper) {
            None => false,
            Some((lo, hi)) => self.may_contain_integers(lo, hi),
        }
    }

    /// Whether its table may hold a key whose integer lies in `[lo, hi]`.
    pub fn may_contain_integers(&self, lo: u64, hi: u64) -> bool {
        any_in_range(&self.hashes, self.max_range, 0, lo, hi)
    }

    /// What it answers for the keys between `lower` and `upper`: nothing can lie there, the
    /// range is too wide to ask, or the filter's answer and the range's width in integers.
    pub(crate) fn check(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> RangeCheck {
        let Some((lo, hi)) = self.integer_range_between(lower, upper) else {
            return RangeCheck::Absent;
        };
        let width = (hi - lo).saturating_add(1);
        if width > self.max_range {
            return RangeCheck::TooWide { width };
        }
        RangeCheck::Asked {
            width,
            maybe: self.may_contain_integers(lo, hi),
        }
    }

    /// The false positive rate theory gives for an empty range of `width` integers:
    /// `min(1, width / 2^(bits − 2))`, and 1 past [`max_range`](Self::max_range).
    pub fn theoretical_fp_rate(&self, width: u64) -> f64 {
        theoretical_fp_rate(self.bits_per_key, self.max_range, width)
    }
}

/// Whether `hashes`, built with blocks of `max_range` integers, may hold the hash of an integer of
/// `context` in `[lo, hi]`: a range of at most `max_range` integers meets at most two blocks, in
/// each of which its integers hash into one interval (wrapping at `r`); a wider range is "maybe".
pub(super) fn any_in_range(
    hashes: &EliasFano,
    max_range: u64,
    context: u64,
    lo: u64,
    hi: u64,
) -> bool {
    if lo > hi || hashes.len() == 0 {
        return false;
    }
    let width = hi - lo;
    let r = hashes.universe();
    if width >= max_range || width >= r - 1 {
        return true;
    }
    let shift = max_range.trailing_zeros();
    let (first_block, last_block) = (lo >> shift, hi >> shift);
    if first_block == last_block {
        any_in_block(hashes, shift, context, lo, width)
    } else {
        let end_of_first = (first_block << shift) | (max_range - 1);
        any_in_block(hashes, shift, context, lo, end_of_first - lo)
            || any_in_block(
                hashes,
                shift,
                context,
                last_block << shift,
                hi - (last_block << shift),
            )
    }
}

/// Whether a stored hash lies in the hashes of `[x, x + width]`, one block's integers.
fn any_in_block(hashes: &EliasFano, shift: u32, context: u64, x: u64, width: u64) -> bool {
    let r = hashes.universe();
    if width >= r - 1 {
        return true;
    }
    let start = hash(x, context, shift, r);
    match start.checked_add(width).filter(|&end| end < r) {
        Some(end) => hashes.any_in(start, end),
        None => {
            let wrapped_end = (u128::from(start) + u128::from(width) - u128::from(r)) as u64;
            hashes.any_in(start, r - 1) || hashes.any_in(0, wrapped_end)
        }
    }
}

/// The false positive rate theory gives a Grafite filter of `bits_per_key` and `max_range` for an
/// empty range of `width` integers.
pub(crate) fn theoretical_fp_rate(bits_per_key: f64, max_range: u64, width: u64) -> f64 {
    if width > max_range {
        return 1.0;
    }
    (width as f64 / (clamp_bits(bits_per_key) - 2.0).exp2()).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn build(keys: &[Vec<u8>], bits: f64, max_range: u64) -> GrafiteFilter {
        let mut b = GrafiteBuilder::new(bits, max_range);
        for k in keys {
            b.add_key(k);
        }
        GrafiteFilter::from_bytes(&b.finish()).unwrap()
    }

    fn holds(keys: &[Vec<u8>], lo: &[u8], hi: &[u8]) -> bool {
        keys.iter()
            .any(|k| k.as_slice() >= lo && k.as_slice() <= hi)
    }

    #[test]
    fn an_empty_filter_holds_nothing() {
        let f = build(&[], 12.0, 64);
        assert!(!f.may_contain(None, None));
        assert!(!f.may_contain(Some(b"a"), Some(b"z")));
    }

    #[test]
    fn damaged_bytes_are_refused_or_answer_without_panicking() {
        let keys: Vec<Vec<u8>> = (0..200u32)
            .map(|i| format!("key{i:06}").into_bytes())
            .collect();
        let mut b = GrafiteBuilder::new(14.0, 256);
        for k in &keys {
            b.add_key(k);
        }
        let bytes = b.finish();
        assert!(GrafiteFilter::from_bytes(&bytes[..bytes.len() - 3]).is_none());
        assert!(GrafiteFilter::from_bytes(&[]).is_none());
        let mut rng = StdRng::seed_from_u64(5);
        for _ in 0..2000 {
            let mut bad = bytes.clone();
            let i = rng.gen_range(0..bad.len());
            bad[i] ^= 1 << rng.gen_range(0..8);
            if let Some(f) = GrafiteFilter::from_bytes(&bad) {
                let _ = f.may_contain(Some(b"key000010"), Some(b"key000020"));
                let _ = f.may_contain_integers(0, u64::MAX);
            }
        }
    }

    #[test]
    fn an_excluded_upper_bound_that_maps_exactly_leaves_out_its_integer() {
        let keys: Vec<Vec<u8>> = [0x1000u64, 0x2000]
            .iter()
            .map(|x| [b"head".as_slice(), &x.to_be_bytes()].concat())
            .collect();
        let f = build(&keys, 16.0, 16);
        assert_eq!(f.prefix(), b"head");
        let key = |x: u64| [b"head".as_slice(), &x.to_be_bytes()].concat();
        let (lo, hi) = (key(0x1001), key(0x1011));
        use Bound::{Excluded, Included};
        // [0x1001, 0x1011): 16 integers, as wide as the filter answers.
        assert_eq!(
            f.integer_range_between(Included(&lo), Excluded(&hi)),
            Some((0x1001, 0x1010))
        );
        assert_eq!(
            f.integer_range_between(Included(&lo), Included(&hi)),
            Some((0x1001, 0x1011))
        );
        // A bound ending in a zero byte keeps its own integer: a shorter key mapping to it (the
        // bound without its zero bytes) lies below it.
        let zero_end = key(0x1100);
        assert_eq!(
            f.integer_range_between(Included(&lo), Excluded(&zero_end)),
            Some((0x1001, 0x1100))
        );
        // A shorter bound maps zero-padded: "head" and 7 bytes ending in 0x10 maps to 0x1000, and
        // every key below it maps below that.
        let short = &key(0x1000)[..11];
        assert_eq!(
            f.integer_range_between(Included(&key(0)), Excluded(short)),
            Some((0, 0x0fff))
        );
        // The prefix alone keeps its integer, 0.
        assert_eq!(
            f.integer_range_between(Included(&key(0)), Excluded(b"head")),
            Some((0, 0))
        );
    }

    #[test]
    fn long_shared_prefixes_are_stripped() {
        // Zero-padded decimals after a tenant id: only the digits vary.
        let keys: Vec<Vec<u8>> = (0..5000u64)
            .map(|i| format!("tenant-0042/events/{:012}", i * 1000).into_bytes())
            .collect();
        let f = build(&keys, 16.0, 1 << 16);
        assert_eq!(f.prefix(), b"tenant-0042/events/0000");
        for i in 0..4999u64 {
            let lo = format!("tenant-0042/events/{:012}", i * 1000 + 1);
            let hi = format!("tenant-0042/events/{:012}", i * 1000 + 9);
            assert!(!holds(&keys, lo.as_bytes(), hi.as_bytes()));
            let _ = f.may_contain(Some(lo.as_bytes()), Some(hi.as_bytes()));
            let at = format!("tenant-0042/events/{:012}", i * 1000);
            assert!(f.may_contain(Some(at.as_bytes()), Some(hi.as_bytes())));
        }
        assert!(!f.may_contain(Some(b"tenant-0043"), None));
        assert!(!f.may_contain(None, Some(b"tenant-0041/zzz")));
    }

    /// The measured false positive rate of empty ranges of `width` integers, uniform or starting
    /// just after a key, over `n` random keys.
    fn measured_fp(n: usize, bits: f64, width: u64, correlated: bool, seed: u64) -> f64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut ints: Vec<u64> = (0..n).map(|_| rng.r#gen::<u64>()).collect();
        ints.sort_unstable();
        ints.dedup();
        let keys: Vec<Vec<u8>> = ints.iter().map(|x| x.to_be_bytes().to_vec()).collect();
        let f = build(&keys, bits, 1 << 16);
        let (mut fp, mut empty) = (0u64, 0u64);
        for _ in 0..200_000 {
            let lo = if correlated {
                ints[rng.gen_range(0..ints.len())].saturating_add(1)
            } else {
                rng.r#gen::<u64>()
            };
            let hi = lo.saturating_add(width - 1);
            let next = ints.partition_point(|&x| x < lo);
            if ints.get(next).is_some_and(|&x| x <= hi) {
                assert!(f.may_contain_integers(lo, hi), "false negative");
                continue;
            }
            empty += 1;
            fp += u64::from(f.may_contain_integers(lo, hi));
        }
        fp as f64 / empty as f64
    }

    #[test]
    fn the_false_positive_rate_is_near_theory_for_uniform_and_correlated_ranges() {
        for width in [1u64, 16, 256, 4096] {
            for correlated in [false, true] {
                let bits = 18.0;
                let theory = theoretical_fp_rate(bits, 1 << 16, width);
                let measured = measured_fp(50_000, bits, width, correlated, width);
                // Within 2× of theory, with room for sampling noise at tiny rates.
                assert!(
                    measured <= 2.0 * theory + 3e-4,
                    "width {width} correlated {correlated}: {measured} vs {theory}"
                );
                if theory > 0.01 {
                    assert!(
                        measured >= theory / 4.0,
                        "width {width}: {measured} vs {theory}"
                    );
                }
            }
        }
    }

    proptest! {
        #[test]
        fn the_radix_sort_sorts(values in proptest::collection::vec(any::<u64>(), 0..3000), bits in 1u32..64) {
            let bound = 1u64 << bits;
            let mut values: Vec<u64> = values.into_iter().map(|v| v % bound).collect();
            let mut expected = values.clone();
            expected.sort_unstable();
            sort_below(&mut values, bound);
            prop_assert_eq!(values, expected);
        }

        #[test]
        fn no_false_negative_for_any_keys_and_range(
            mut keys in proptest::collection::vec(
                proptest::collection::vec(prop_oneof![Just(0u8), Just(b'k'), Just(255u8), any::<u8>()], 0..12),
                0..200),
            shared in proptest::collection::vec(any::<u8>(), 0..6),
            bits in 3.0f64..24.0,
            max_range in prop_oneof![Just(1u64), 1u64..300, Just(1u64 << 40), Just(u64::MAX)],
            queries in proptest::collection::vec(
                (proptest::collection::vec(any::<u8>(), 0..14), 0usize..4, any::<u64>()), 1..40),
        ) {
            for k in &mut keys {
                k.splice(0..0, shared.iter().copied());
            }
            keys.sort();
            keys.dedup();
            let f = build(&keys, bits, max_range);
            for (q, anchor, delta) in queries {
                // Queries made of the keys themselves and their neighbours, and random ones.
                let lo = match (anchor, keys.is_empty()) {
                    (0, _) | (_, true) => q,
                    (1, false) => keys[q.len() % keys.len()].clone(),
                    (2, false) => { let mut k = keys[q.len() % keys.len()].clone(); k.push(0); k }
                    _ => { let mut k = shared.clone(); k.extend_from_slice(&q); k }
                };
                let mut hi = lo.clone();
                let tail = (delta % 4) as usize;
                hi.extend(std::iter::repeat_n(0xff, tail));
                if delta % 3 == 0
                    && let Some(last) = hi.last_mut() { *last = last.saturating_add((delta >> 8) as u8); }
                if holds(&keys, &lo, &hi) {
                    prop_assert!(f.may_contain(Some(&lo), Some(&hi)), "lo {:?} hi {:?}", lo, hi);
                }
                if keys.iter().any(|k| k.as_slice() >= lo.as_slice() && k.as_slice() < hi.as_slice()) {
                    let between = f.integer_range_between(Bound::Included(&lo), Bound::Excluded(&hi));
                    prop_assert!(
                        between.is_some_and(|(a, b)| f.may_contain_integers(a, b)),
                        "lo {:?} hi {:?} excluded", lo, hi
                    );
                }
                if keys.iter().any(|k| k.as_slice() < hi.as_slice()) {
                    let below = f.integer_range_between(Bound::Unbounded, Bound::Excluded(&hi));
                    prop_assert!(below.is_some_and(|(a, b)| f.may_contain_integers(a, b)));
                }
                if keys.iter().any(|k| k.as_slice() >= lo.as_slice()) {
                    prop_assert!(f.may_contain(Some(&lo), None));
                }
                if keys.iter().any(|k| k.as_slice() <= hi.as_slice()) {
                    prop_assert!(f.may_contain(None, Some(&hi)));
                }
            }
            for k in &keys {
                prop_assert!(f.may_contain(Some(k), Some(k)));
            }
        }

        #[test]
        fn no_false_negative_for_integer_ranges(
            ints in proptest::collection::vec(any::<u64>(), 1..300),
            bits in 3.0f64..30.0,
            max_range in 1u64..5000,
            queries in proptest::collection::vec((0usize..300, 0u64..6000, any::<bool>()), 1..60),
        ) {
            let mut ints = ints;
            ints.sort_unstable();
            ints.dedup();
            let keys: Vec<Vec<u8>> = ints.iter().map(|x| x.to_be_bytes().to_vec()).collect();
            let f = build(&keys, bits, max_range);
            for (i, width, before) in queries {
                let x = ints[i % ints.len()];
                let lo = if before { x.saturating_sub(width) } else { x };
                let hi = lo.saturating_add(width);
                if lo <= x && x <= hi {
                    let lo_key = lo.to_be_bytes();
                    let hi_key = hi.to_be_bytes();
                    prop_assert!(f.may_contain(Some(&lo_key), Some(&hi_key)));
                }
            }
        }
    }
}
