//! A Ribbon filter (`siftdb.Ribbon128`), after Dillinger & Walzer, "Ribbon filter: practically
//! smaller than Bloom and Xor" (2021), and RocksDB's Standard128Ribbon.
//!
//! Like the binary fuse filter, a Ribbon filter is solved once for a table's fixed key set. Each
//! key hashes to an equation over GF(2): 128 coefficient bits starting at some slot, and a few
//! result bits. The filter stores a solution matrix, one row per slot and one column per result
//! bit, such that every key's coefficients select solution rows whose XOR is the key's result
//! bits; an absent key's selection matches its result bits by chance, with probability `2^-c` for
//! `c` columns. Because the equations are 128-slot windows, the solver (`banding.rs`) is Gaussian
//! elimination that stays local and runs in near-linear time, and it needs only 2–5 % more slots
//! than keys, so from a thousand keys up the filter spends within 4–7 % of the
//! information-theoretic minimum, `log2(1/ε)` bits per key, where a bloom filter spends 44–50 %
//! more. Blocks with `c` and `c + 1`
//! columns mix in one filter (`solution.rs`), so any bits per key can be spent, not just whole
//! columns.
//!
//! Small key sets, where the solution's minimum of two 128-slot blocks costs more than a bloom
//! filter, and the (vanishingly rare) key set that no seed solves get a cache-local bloom filter
//! of the same bits per key instead, in its own format: the reader tells them apart by the
//! trailer.
//!
//! Format, hashing, probing and construction: `docs/filters.md`, *Ribbon*. Bytes that are not
//! exactly that format (or the cache-local bloom's) answer "may match", which is always safe.

mod banding;
#[cfg(test)]
mod measure;
#[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
mod portable;
mod solution;
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
mod sse2;
#[cfg(test)]
mod tests;

use xxhash_rust::xxh3::xxh3_64;

use super::cache_local_bloom::CacheLocalBloom;
use super::policy::{FilterBitsBuilder, FilterPolicy, FilterProbe};
use super::sort::sort_dedup;
use super::theory;
use banding::{slots_for_keys, Banding};
use solution::{
    row_matches, write_segments, ColumnParities, Layout, Parities, BLOCK_SLOTS, MAX_BLOCKS,
    SEGMENT_BYTES,
};

/// Bytes of the trailer after the solution.
const TRAILER_LEN: usize = 8;
/// Trailer byte 3: a "new" (non-LevelDB) filter, as in the cache-local bloom, at the same distance
/// from the end.
const MARKER: u8 = 0xFF;
/// Trailer byte 4: this implementation (Ribbon, 128-bit coefficient rows).
const SUB_IMPL: u8 = 2;
/// The cache-local bloom's sub-implementation byte: the bloom fallback's filters.
const BLOOM_SUB_IMPL: u8 = 0;
/// Seeds tried before falling back to a bloom filter. The slots are sized for at most a one in
/// 20 chance of failure per seed, so 64 failures in a row do not happen in practice; the bound
/// keeps `finish` finite whatever the hashes.
const MAX_SEEDS: u32 = 64;
/// Below this many keys (hashes kept by the builder) the filter is a cache-local bloom: the
/// solution's two-block minimum (256 slots) makes a smaller Ribbon worse than the bloom at the
/// same bits per key. Chosen by measurement: `measure::fallback_threshold` (see
/// `docs/benchmarks.md`).
const MIN_RIBBON_KEYS: usize = 200;
/// Above this many keys the filter is a cache-local bloom too: the block count must fit 24 bits.
const MAX_RIBBON_KEYS: usize = 950_000_000;
/// `Ribbon::new` clamps bits/key to this range: below 1 a filter is nearly useless, and 64 result
/// columns are the most a block has.
const MIN_BITS_PER_KEY: f64 = 1.0;
const MAX_BITS_PER_KEY: f64 = 64.0;
/// [`Ribbon::theoretical_fp_rate`](FilterPolicy::theoretical_fp_rate) assumes a filter of this
/// many keys (about a table of siftdb's default 2 MiB): the rate depends a little on the key count
/// through the slots per key.
const REFERENCE_KEYS: usize = 20_000;

/// Multipliers of the key hashing (odd 64-bit constants with well-mixed bits: MurmurHash3's and
/// SplitMix64's finalizer constants and the golden ratio).
const SEED_STEP: u64 = 0x9e37_79b9_7f4a_7c15;
const SEEDED_MULTIPLIER: u64 = 0xbf58_476d_1ce4_e5b9;
const HIGH_COEFFICIENTS: u64 = 0x94d0_49bb_1331_11eb;
const LOW_COEFFICIENTS: u64 = 0xff51_afd7_ed55_8ccd;
const RESULT_MULTIPLIER: u64 = 0xc4ce_b9fe_1a85_ec53;

/// A Ribbon filter policy (name `"siftdb.Ribbon128"`) spending `bits_per_key` bits per key, any
/// real number from 1 to 64: a false positive rate of about `2^-(bits_per_key / 1.03)` (0.94–1.03 %
/// at 7 bits/key, where the cache-local bloom needs 10), within 10 % of the information-theoretic
/// minimum from a thousand keys up.
///
/// The builder keeps one 64-bit hash per key and solves the filter in `finish`; seeds are tried
/// until one solves (the first does 19 times in 20). Key sets under 200 keys, or that 64 seeds
/// fail to solve, get a [`CacheLocalBloom`] filter of the same bits per key instead; any `Ribbon`
/// reads both, and reads a filter built with any bits per key. Building costs several times a
/// bloom filter's CPU (in the background, once per table); a query reads 16 bytes per result
/// bit from each of two adjacent blocks and takes a parity per result bit (in SSE2 registers on
/// x86-64), 1.6–2 times the cache-local bloom's time.
///
/// ```
/// use siftdb::FilterPolicy;
/// use siftdb::filter::Ribbon;
///
/// let policy = Ribbon::new(7.0);
/// let mut b = policy.builder();
/// for i in 0..10_000u32 {
///     b.add_key(&i.to_le_bytes());
/// }
/// let filter = b.finish();
/// assert!(policy.may_match(&filter, &7u32.to_le_bytes()));
/// // About 7 bits per key, plus an 8-byte trailer.
/// assert!(filter.len() * 8 <= 10_000 * 7 + 128 + 64);
/// // Same hash as the cache-local bloom: the Get path hashes a key once for every table.
/// let h = Ribbon::hash(&7u32.to_le_bytes());
/// assert!(policy.may_match_hash(&filter, h));
/// // The parameters are in the bytes: a policy at other bits/key reads the filter.
/// assert!(Ribbon::new(12.5).may_match(&filter, &7u32.to_le_bytes()));
/// ```
#[derive(Debug, Clone)]
pub struct Ribbon {
    bits_per_key: f64,
    millibits: u32,
    /// The fallback for small or unsolvable key sets, at the same bits per key; it also reads the
    /// fallback's filters.
    bloom: CacheLocalBloom,
    /// Key sets below this size get the bloom (a parameter so that tests can build tiny Ribbons).
    min_ribbon_keys: usize,
}

impl Ribbon {
    /// A policy that spends `bits_per_key` bits per key on the solution (fractions allowed, to a
    /// thousandth), plus an 8-byte trailer per filter.
    ///
    /// Values are clamped to `1.0..=64.0` (NaN counts as 1.0).
    pub fn new(bits_per_key: f64) -> Self {
        let bits_per_key = clamp_bits_per_key(bits_per_key);
        Ribbon {
            bits_per_key,
            millibits: (bits_per_key * 1000.0).round() as u32,
            bloom: CacheLocalBloom::new(bits_per_key),
            min_ribbon_keys: MIN_RIBBON_KEYS,
        }
    }

    /// This policy, building Ribbons from `min_ribbon_keys` keys up (for tests and measurements).
    #[cfg(test)]
    fn with_min_ribbon_keys(mut self, min_ribbon_keys: usize) -> Self {
        self.min_ribbon_keys = min_ribbon_keys;
        self
    }

    /// The 64-bit hash of `key` this filter uses (xxh3, seed 0: the same as
    /// [`CacheLocalBloom::hash`]).
    #[inline]
    pub fn hash(key: &[u8]) -> u64 {
        xxh3_64(key)
    }

    /// Whether the key whose [`hash`](Ribbon::hash) is `hash` may be in `filter`:
    /// [`may_match`](FilterPolicy::may_match) without hashing the key again.
    ///
    /// Bytes that are neither this format nor the cache-local bloom's answer `true`. Never
    /// allocates.
    #[inline]
    pub fn may_match_hash(&self, filter: &[u8], hash: u64) -> bool {
        match parse(filter) {
            Parsed::Ribbon(view) => view.contains(hash),
            Parsed::Bloom => self.bloom.may_match_hash(filter, hash),
            Parsed::Empty => false,
            Parsed::Unknown => true,
        }
    }

    /// Whether a filter of `num_keys` keys (hashes kept by the builder) is a Ribbon filter rather
    /// than the bloom fallback (barring a key set no seed solves).
    pub fn builds_ribbon_for(&self, num_keys: usize) -> bool {
        (self.min_ribbon_keys..=MAX_RIBBON_KEYS).contains(&num_keys)
    }

    /// Bits per key of the filter this policy builds for `num_keys` keys, trailer included (for
    /// example 7.006 at 1M keys and 7 bits/key). `None` for no keys.
    pub fn bits_per_key_for(&self, num_keys: usize) -> Option<f64> {
        (num_keys > 0).then(|| filter_len(self, num_keys) as f64 * 8.0 / num_keys as f64)
    }

    /// The false positive rate theory predicts for a filter of `num_keys` keys built by this
    /// policy: for a Ribbon, `2^-c` averaged over the blocks' column counts `c` (weighted by the
    /// starts they hold), plus the (negligible) chance that an absent key's 64-bit hash equals a
    /// present key's; for the bloom fallback, the cache-local bloom's rate.
    pub fn theoretical_fp_rate_for(&self, num_keys: usize) -> f64 {
        let rate = if num_keys == 0 {
            0.0
        } else if self.builds_ribbon_for(num_keys) {
            layout_for(num_keys, self.millibits).map_or(1.0, |l| l.fp_rate())
        } else {
            self.bloom.theoretical_fp_rate_for(num_keys)
        };
        theory::independent_probability_sum(rate, theory::fingerprint_fp_rate(num_keys as f64, 64))
    }
}

fn clamp_bits_per_key(bits_per_key: f64) -> f64 {
    if bits_per_key.is_nan() {
        MIN_BITS_PER_KEY
    } else {
        bits_per_key.clamp(MIN_BITS_PER_KEY, MAX_BITS_PER_KEY)
    }
}

impl FilterPolicy for Ribbon {
    fn name(&self) -> &str {
        "siftdb.Ribbon128"
    }

    fn bits_per_key(&self) -> f64 {
        self.bits_per_key
    }

    fn builder(&self) -> Box<dyn FilterBitsBuilder> {
        Box::new(RibbonBuilder {
            policy: self.clone(),
            hashes: Vec::new(),
            added: 0,
            scratch: Scratch::default(),
        })
    }

    #[inline]
    fn may_match(&self, filter: &[u8], key: &[u8]) -> bool {
        self.may_match_hash(filter, Self::hash(key))
    }

    fn may_match_probe(&self, filter: &[u8], probe: &FilterProbe<'_>) -> bool {
        // `hash` is xxh3 with seed 0, which is what the probe caches.
        self.may_match_hash(filter, probe.xxh3_64())
    }

    fn with_bits_per_key(&self, bits_per_key: f64) -> Option<std::sync::Arc<dyn FilterPolicy>> {
        Some(std::sync::Arc::new(Ribbon::new(bits_per_key)))
    }

    /// The rate of a Ribbon filter of 20,000 keys (about a table of siftdb's default size) at
    /// `bits_per_key`: the rate depends a little on the key count, through the slots per key
    /// (1.02–1.05); [`Ribbon::theoretical_fp_rate_for`] gives it for any count. The 64-bit hash
    /// collision term is below 1e-12 for any real table and left out.
    fn theoretical_fp_rate(&self, bits_per_key: f64) -> Option<f64> {
        let millibits = (clamp_bits_per_key(bits_per_key) * 1000.0).round() as u32;
        Some(layout_for(REFERENCE_KEYS, millibits).map_or(1.0, |l| l.fp_rate()))
    }

    /// For a Ribbon filter, the result bits a query checks in its fuller blocks: each halves the
    /// false positive rate, as a bloom filter's probe does at the optimum (the other blocks check
    /// one fewer). For the bloom fallback, its probes.
    fn probes_in(&self, filter: &[u8]) -> Option<u32> {
        match parse(filter) {
            Parsed::Ribbon(view) => Some(view.layout.upper_columns()),
            Parsed::Bloom => self.bloom.probes_in(filter),
            Parsed::Empty | Parsed::Unknown => None,
        }
    }
}

/// The solution's shape for `num_keys` keys at `millibits` thousandths of a bit per key:
/// [`slots_for_keys`] slots, and `round(num_keys · millibits / 128000)` segments of 128 bits
/// (at most 64 a block). `None` beyond the format's 2^24 blocks.
fn layout_for(num_keys: usize, millibits: u32) -> Option<Layout> {
    let slots = slots_for_keys(num_keys as u64);
    let blocks = u32::try_from(slots / u64::from(BLOCK_SLOTS)).ok()?;
    if blocks > MAX_BLOCKS {
        return None;
    }
    let bits = u128::from(num_keys as u64) * u128::from(millibits);
    let segment_millibits = 128_000u128;
    let segments = (bits + segment_millibits / 2) / segment_millibits;
    let most = u128::from(blocks) * 64;
    Layout::new(blocks, segments.min(most) as u64)
}

/// The length of the filter `policy` writes for `num_keys` keys (hashes), unless no seed solves.
fn filter_len(policy: &Ribbon, num_keys: usize) -> usize {
    if num_keys == 0 {
        return TRAILER_LEN;
    }
    match policy
        .builds_ribbon_for(num_keys)
        .then(|| layout_for(num_keys, policy.millibits))
        .flatten()
    {
        Some(layout) => layout.segments() * SEGMENT_BYTES + TRAILER_LEN,
        None => policy.bloom.filter_len_for(num_keys),
    }
}

/// The raw seed for seed number `ordinal` (stored in the trailer): distinct ordinals give
/// distinct, well-spread seeds.
#[inline]
fn raw_seed(ordinal: u8) -> u64 {
    (u64::from(ordinal) + 1).wrapping_mul(SEED_STEP)
}

/// The key hash under a seed: `(hash ^ seed) · m`, a bijection of the hash for each seed, so
/// distinct keys keep distinct hashes, and a new seed moves every key's equation.
#[inline]
fn seeded(hash: u64, raw_seed: u64) -> u64 {
    (hash ^ raw_seed).wrapping_mul(SEEDED_MULTIPLIER)
}

/// A key's equation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Equation {
    /// The slot of its first coefficient.
    start: u32,
    /// Coefficient `k` applies to slot `start + k`; bit 0 is always set.
    coefficients: u128,
    /// Result bit `j` is column `j`'s.
    result: u64,
}

/// The equation of the seeded hash `s` among `num_starts` starts. The start is the fast range
/// of `s` (its top bits; it grows with `s`, so keys sorted by `s` band in slot order); the
/// coefficients and result bits are products of `s` with other odd constants, whose bits are
/// independent of the start, the result's low (most used) bits taken from a product's top byte.
#[inline]
fn equation(s: u64, num_starts: u32) -> Equation {
    let start = ((u128::from(s) * u128::from(num_starts)) >> 64) as u32;
    let high = s.wrapping_mul(HIGH_COEFFICIENTS);
    let low = s.wrapping_mul(LOW_COEFFICIENTS);
    Equation {
        start,
        coefficients: (u128::from(high) << 64) | u128::from(low) | 1,
        result: s.wrapping_mul(RESULT_MULTIPLIER).swap_bytes(),
    }
}

/// What a filter's bytes say.
enum Parsed<'a> {
    /// A Ribbon filter to probe.
    Ribbon(View<'a>),
    /// The cache-local bloom's format (the fallback): its reader answers.
    Bloom,
    /// A Ribbon built from no keys: matches nothing.
    Empty,
    /// Not a format this policy writes, or damaged: "may match".
    Unknown,
}

/// A parsed, consistent Ribbon filter.
struct View<'a> {
    solution: &'a [u8],
    layout: Layout,
    raw_seed: u64,
}

/// Reads and checks the trailer: one load and a few compares, cheap enough for every probe, which
/// keeps the policy stateless like the blooms.
#[inline]
fn parse(filter: &[u8]) -> Parsed<'_> {
    let Some((solution, trailer)) = filter.split_last_chunk::<TRAILER_LEN>() else {
        // Too short for a Ribbon; the bloom fallback's trailer is five bytes.
        return match filter.last_chunk::<5>() {
            Some([MARKER, BLOOM_SUB_IMPL, ..]) => Parsed::Bloom,
            _ => Parsed::Unknown,
        };
    };
    // Trailer byte k is bits 8k.. of the word: bytes 3, 4 and 7 are fixed.
    let t = u64::from_le_bytes(*trailer);
    let fixed = 0xff00_00ff_ff00_0000;
    if t & fixed != u64::from(MARKER) << 24 | u64::from(SUB_IMPL) << 32 {
        return if (t >> 24) as u16 == u16::from_le_bytes([MARKER, BLOOM_SUB_IMPL]) {
            Parsed::Bloom
        } else {
            Parsed::Unknown
        };
    }
    let blocks = (t & 0xff_ffff) as u32;
    let (seed, upper_columns) = ((t >> 40) as u8, (t >> 48) as u8);
    if solution.len() % SEGMENT_BYTES != 0 {
        return Parsed::Unknown;
    }
    let segments = (solution.len() / SEGMENT_BYTES) as u64;
    if blocks == 0 {
        return if segments == 0 && upper_columns == 0 {
            Parsed::Empty
        } else {
            Parsed::Unknown
        };
    }
    match Layout::stored(blocks, segments, u32::from(upper_columns)) {
        Some(layout) => Parsed::Ribbon(View {
            solution,
            layout,
            raw_seed: raw_seed(seed),
        }),
        None => Parsed::Unknown,
    }
}

impl View<'_> {
    #[inline(always)]
    fn contains(&self, hash: u64) -> bool {
        self.contains_with::<Parities>(hash)
    }

    /// [`contains`](View::contains) with the column parities of `P` (the measurements compare
    /// them).
    #[inline(always)]
    fn contains_with<P: ColumnParities>(&self, hash: u64) -> bool {
        let e = equation(seeded(hash, self.raw_seed), self.layout.num_starts());
        row_matches::<P>(
            self.solution,
            &self.layout,
            e.start,
            e.coefficients,
            e.result,
        )
    }
}

/// Working memory of one construction, kept by the builder so that a builder reused across
/// partitions does not reallocate for each.
#[derive(Default)]
struct Scratch {
    /// Seeded hashes, sorted and deduplicated.
    seeded: Vec<u64>,
    /// The bucket sort's output buffer and bucket offsets.
    spare: Vec<u64>,
    buckets: Vec<u32>,
    banding: Banding,
}

/// Collects the keys' 64-bit hashes; `finish` solves the filter.
struct RibbonBuilder {
    policy: Ribbon,
    hashes: Vec<u64>,
    added: usize,
    scratch: Scratch,
}

impl FilterBitsBuilder for RibbonBuilder {
    #[inline]
    fn add_key(&mut self, key: &[u8]) {
        self.added += 1;
        let h = Ribbon::hash(key);
        // Several versions of one user key arrive together: drop them here, cheaply. Any other
        // duplicates band as redundant equations (and are dropped by the sort in `finish`).
        if self.hashes.last() != Some(&h) {
            self.hashes.push(h);
        }
    }

    fn num_keys(&self) -> usize {
        self.added
    }

    /// Exact, unless no seed solves the key set (then the bloom fallback, of about the same size,
    /// is written).
    fn estimated_len(&self) -> usize {
        filter_len(&self.policy, self.hashes.len())
    }

    fn finish(&mut self) -> Vec<u8> {
        let (out, _) = build(&self.policy, &self.hashes, &mut self.scratch, MAX_SEEDS);
        self.hashes.clear();
        self.added = 0;
        out
    }
}

/// How a filter was built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Built {
    /// No keys: the trailer alone.
    Empty,
    /// A Ribbon, solved by this seed number.
    Ribbon { seed: u8 },
    /// The bloom fallback, for a key set too small or too large for a Ribbon.
    BloomBySize,
    /// The bloom fallback, after every seed failed.
    BloomGaveUp,
}

/// Builds the filter for `hashes` (any order, duplicates allowed), trying at most `max_seeds`
/// seeds, sized for `hashes.len()` keys.
fn build(policy: &Ribbon, hashes: &[u64], s: &mut Scratch, max_seeds: u32) -> (Vec<u8>, Built) {
    if hashes.is_empty() {
        return (EMPTY_FILTER.to_vec(), Built::Empty);
    }
    let layout = match policy
        .builds_ribbon_for(hashes.len())
        .then(|| layout_for(hashes.len(), policy.millibits))
        .flatten()
    {
        Some(layout) => layout,
        None => return (policy.bloom.filter_from_hashes(hashes), Built::BloomBySize),
    };
    // The banding need not satisfy result bits no block stores.
    let result_mask = solution::column_mask(layout.upper_columns());
    let num_starts = layout.num_starts();
    for seed in (0..max_seeds.min(256)).map(|a| a as u8) {
        let raw = raw_seed(seed);
        // Sorting the seeded hashes orders the keys by start slot, so banding walks its arrays
        // forwards instead of at random (at 1M keys they are 25 MB), and brings repeated keys
        // together to be dropped.
        s.seeded.clear();
        s.seeded.extend(hashes.iter().map(|&h| seeded(h, raw)));
        sort_dedup(&mut s.seeded, &mut s.spare, &mut s.buckets);
        s.banding.reset(layout.slots());
        let solved = s.seeded.iter().all(|&sh| {
            let e = equation(sh, num_starts);
            s.banding
                .add(e.start, e.coefficients, e.result & result_mask)
        });
        if solved {
            let segments = s.banding.solve(&layout);
            let mut out = Vec::with_capacity(segments.len() * SEGMENT_BYTES + TRAILER_LEN);
            write_segments(&segments, &mut out);
            out.extend_from_slice(&trailer(&layout, seed));
            return (out, Built::Ribbon { seed });
        }
    }
    (policy.bloom.filter_from_hashes(hashes), Built::BloomGaveUp)
}

/// The filter of no keys: a trailer with no blocks and no columns.
const EMPTY_FILTER: [u8; TRAILER_LEN] = [0, 0, 0, MARKER, SUB_IMPL, 0, 0, 0];

/// The trailer: the block count in 24 bits, the marker, the sub-implementation, the seed number,
/// the upper column count and a reserved zero byte.
fn trailer(layout: &Layout, seed: u8) -> [u8; TRAILER_LEN] {
    let b = layout.blocks().to_le_bytes();
    // Columns ≤ 64.
    let columns = layout.upper_columns() as u8;
    [b[0], b[1], b[2], MARKER, SUB_IMPL, seed, columns, 0]
}
