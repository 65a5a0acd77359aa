//! A binary fuse filter (`siftdb.BinaryFuse8`, `siftdb.BinaryFuse16`), after Graf & Lemire,
//! "Binary Fuse Filters: Fast and Smaller Than Xor Filters" (2022).
//!
//! A table's key set never changes once the table is written, so the filter does not need a
//! bloom filter's ability to take more keys: it can be solved for its keys once. Each key owns three
//! slots of an array of `w`-bit fingerprints, one in each of three consecutive segments, and the
//! array is filled so that the XOR of a key's three slots equals the key's fingerprint. An absent
//! key's three slots XOR to its fingerprint with probability 2^-w: 0.39 % at 8 bits, 0.0015 % at 16,
//! for about 1.125 · w bits per key on large sets (9.04 bits/key at 1M keys for 8 bits, against
//! ≈ 12.1 for a cache-local bloom with the same rate and 8 for the information-theoretic limit).
//!
//! Format, hashing, probing and construction: `docs/filters.md`, *Binary fuse*. Bytes that are
//! not exactly that format answer "may match", which is always safe.
//!
//! Width comes from the bytes: a `BinaryFuse::fuse16()` object reads a filter built by
//! `BinaryFuse::fuse8()` exactly as the 8-bit object does, and the other way round.

#[cfg(test)]
mod measure;
#[cfg(test)]
mod tests;

use std::ops::BitXor;

use xxhash_rust::xxh3::xxh3_64;

use super::policy::{FilterBitsBuilder, FilterPolicy, FilterProbe};
use super::sort::sort_dedup;
use super::theory;

/// Bytes of the trailer after the fingerprints.
const TRAILER_LEN: usize = 25;
/// Trailer byte 20: a "new" (non-LevelDB) filter, as in the cache-local bloom.
const MARKER: u8 = 0xFF;
/// Trailer byte 21: this implementation (3-wise binary fuse).
const SUB_IMPL: u8 = 1;
/// Trailer byte 23 of a real filter.
const KIND_FILTER: u8 = 0;
/// Trailer byte 23 of the filter written when construction gave up: it matches everything.
const KIND_MATCH_ALL: u8 = 1;
/// The paper caps the segment length at 2^18 (reached at ≈ 170M keys).
const MAX_SEGMENT_LENGTH_LOG2: u32 = 18;
/// Seeds tried before giving up. One attempt nearly always succeeds at the paper's sizes (a
/// failure is a few percent likely for tiny sets, far less for large ones), so 64 failures in a
/// row do not happen in practice; the bound exists so that `finish` always terminates.
const MAX_ATTEMPTS: u32 = 64;
/// Start of the seed sequence (any constant: it makes builds reproducible).
const SEED_START: u64 = 0x5eed_f0c5_1f7d_b000;
/// A slot's counter byte is `keys << 2 | xor of the keys' slot numbers (0, 1, 2)`: six bits of
/// count. A 64th key in one slot (the mean is about 2.65) fails the attempt instead of overflowing.
const COUNT_LIMIT: u8 = 0xFC;

/// A binary fuse filter policy with 8- or 16-bit fingerprints (names `"siftdb.BinaryFuse8"`,
/// `"siftdb.BinaryFuse16"`): about 9.04 or 18.1 bits per key at 1M keys for a false positive rate
/// of 2^-8 (0.39 %) or 2^-16 (0.0015 %), within 13 % of the information-theoretic limit.
///
/// Suited to immutable key sets of thousands of keys or more (full and partitioned layouts); on
/// the small per-block filters of the block-based layout the fixed 25-byte trailer and the paper's
/// larger size factor for small sets cost more space (see [`bits_per_key_for`]).
///
/// The builder keeps one 64-bit hash per key and solves the filter in `finish`: sort and dedup the
/// hashes, size the array for the distinct count, peel; if peeling fails, retry with the next seed
/// (64 seeds at most, then write a filter that matches everything: never a false negative).
/// The bytes depend only on the set of distinct keys, not on the order they were added in.
///
/// [`bits_per_key_for`]: BinaryFuse::bits_per_key_for
///
/// ```
/// use siftdb::FilterPolicy;
/// use siftdb::filter::BinaryFuse;
///
/// let policy = BinaryFuse::fuse8();
/// let mut b = policy.builder();
/// for i in 0..1000u32 {
///     b.add_key(&i.to_le_bytes());
/// }
/// let filter = b.finish();
/// assert!(policy.may_match(&filter, &7u32.to_le_bytes()));
/// // Same hash as the cache-local bloom: the Get path hashes a key once for every table.
/// let h = BinaryFuse::hash(&7u32.to_le_bytes());
/// assert!(policy.may_match_hash(&filter, h));
/// // The width is in the bytes: a 16-bit policy object reads an 8-bit filter.
/// assert!(BinaryFuse::fuse16().may_match(&filter, &7u32.to_le_bytes()));
/// ```
#[derive(Debug, Clone)]
pub struct BinaryFuse {
    fingerprint_bits: u8,
}

impl BinaryFuse {
    /// 8-bit fingerprints: false positive rate 2^-8 ≈ 0.39 %, ≈ 9.04 bits/key at 1M keys.
    pub fn fuse8() -> Self {
        BinaryFuse {
            fingerprint_bits: 8,
        }
    }

    /// 16-bit fingerprints: false positive rate 2^-16 ≈ 0.0015 %, ≈ 18.1 bits/key at 1M keys.
    pub fn fuse16() -> Self {
        BinaryFuse {
            fingerprint_bits: 16,
        }
    }

    /// `fingerprint_bits` (8 or 16) bit fingerprints, or `None` for any other width.
    pub fn new(fingerprint_bits: u8) -> Option<Self> {
        matches!(fingerprint_bits, 8 | 16).then_some(BinaryFuse { fingerprint_bits })
    }

    /// The fingerprint width this policy writes: 8 or 16.
    pub fn fingerprint_bits(&self) -> u8 {
        self.fingerprint_bits
    }

    /// The 64-bit hash of `key` this filter uses (xxh3, seed 0: the same as
    /// [`CacheLocalBloom::hash`](super::CacheLocalBloom::hash)).
    #[inline]
    pub fn hash(key: &[u8]) -> u64 {
        xxh3_64(key)
    }

    /// Bits per key of a filter this policy builds for `num_keys` distinct keys, trailer
    /// included (for example 10.3 at 10k keys and 9.04 at 1M for 8-bit fingerprints).
    /// `None` for no keys or a set too large for the format (over ≈ 3.8 billion keys).
    pub fn bits_per_key_for(&self, num_keys: usize) -> Option<f64> {
        if num_keys == 0 {
            return None;
        }
        let shape = Shape::for_keys(num_keys)?;
        let bytes = shape.array_length as usize * usize::from(self.fingerprint_bits / 8);
        Some((bytes + TRAILER_LEN) as f64 * 8.0 / num_keys as f64)
    }

    /// How many times the information-theoretic minimum, `log2(1 / 2^-w) = w` bits/key, a filter of
    /// `num_keys` keys spends (1.13 at 1M keys): [`bits_per_key_for`](BinaryFuse::bits_per_key_for)
    /// over `w`.
    pub fn space_overhead_for(&self, num_keys: usize) -> Option<f64> {
        let limit = theory::space_limit_bits_per_key(theory::xor_filter_fp_rate(u32::from(
            self.fingerprint_bits,
        )));
        Some(self.bits_per_key_for(num_keys)? / limit)
    }

    /// The false positive rate theory predicts for a filter of `num_keys` keys: 2^-w, plus the
    /// (negligible) chance that an absent key's 64-bit hash equals a present key's.
    pub fn theoretical_fp_rate_for(&self, num_keys: usize) -> f64 {
        theory::independent_probability_sum(
            theory::xor_filter_fp_rate(u32::from(self.fingerprint_bits)),
            theory::fingerprint_fp_rate(num_keys as f64, 64),
        )
    }

    /// Whether the key whose [`hash`](BinaryFuse::hash) is `hash` may be in `filter`:
    /// [`may_match`](FilterPolicy::may_match) without hashing the key again.
    ///
    /// Bytes that are not a filter of this format answer `true`. Never allocates.
    #[inline]
    pub fn may_match_hash(&self, filter: &[u8], hash: u64) -> bool {
        match parse(filter) {
            Parsed::Filter(f) => f.contains(hash),
            Parsed::Empty => false,
            Parsed::Unknown => true,
        }
    }
}

impl FilterPolicy for BinaryFuse {
    fn name(&self) -> &str {
        match self.fingerprint_bits {
            16 => "siftdb.BinaryFuse16",
            _ => "siftdb.BinaryFuse8",
        }
    }

    /// The nominal space: `1.125 · w` (9.0 or 18.0), the paper's size factor for large sets.
    /// Real filters carry a little more (9.04 at 1M keys, 10.3 at 10k: see
    /// [`BinaryFuse::bits_per_key_for`]).
    fn bits_per_key(&self) -> f64 {
        1.125 * f64::from(self.fingerprint_bits)
    }

    fn builder(&self) -> Box<dyn FilterBitsBuilder> {
        Box::new(BinaryFuseBuilder {
            fingerprint_bits: self.fingerprint_bits,
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

    /// Three: a key's three fingerprints lie in three consecutive segments (fewer in a filter
    /// shorter than three lines; none in one that answers alike for every key).
    fn lines_per_probe(&self, filter: &[u8]) -> Option<u32> {
        Some(match parse(filter) {
            Parsed::Filter(view) => {
                u32::try_from(view.data.len().div_ceil(64)).map_or(3, |lines| lines.min(3))
            }
            Parsed::Empty | Parsed::Unknown => 0,
        })
    }

    /// 2^-w whatever `bits_per_key` is: the rate depends on the fingerprint width only (the 64-bit
    /// hash collision term is below 1e-12 for any real table and left out).
    fn theoretical_fp_rate(&self, bits_per_key: f64) -> Option<f64> {
        let _ = bits_per_key;
        Some(theory::xor_filter_fp_rate(u32::from(self.fingerprint_bits)))
    }
}

/// The paper's array geometry for a number of distinct keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shape {
    /// L: slots per segment, a power of two.
    segment_length: u32,
    /// C: slots of the segments a key's first slot can fall in.
    segment_count_length: u32,
    /// A = C + 2L: the key's second and third slots are one and two segments further on.
    array_length: u32,
}

impl Shape {
    /// Graf & Lemire's sizing for 3-wise binary fuse filters, for `n ≥ 1` keys:
    ///
    /// ```text
    /// L = 2^floor(ln n / ln 3.33 + 2.25), at most 2^18
    /// size factor = max(1.125, 0.875 + 0.25 · ln 10^6 / ln n)        (n ≥ 2)
    /// capacity = round(n · size factor)                              (0 for n = 1)
    /// segments = max(1, ceil(capacity / L) − 2);  C = segments · L;  A = C + 2L
    /// ```
    ///
    /// Small sets get relatively more room because peeling a small random hypergraph fails more
    /// often. `None` if `A` would not fit a `u32`.
    fn for_keys(n: usize) -> Option<Shape> {
        let nf = n.max(1) as f64;
        let exponent = (nf.ln() / 3.33f64.ln() + 2.25).floor();
        // exponent ≥ 2.25 floors to ≥ 2; the cap keeps the shift in range.
        let log2_len = (exponent as u32).min(MAX_SEGMENT_LENGTH_LOG2);
        let segment_length = 1u64 << log2_len;
        let capacity = if n <= 1 {
            0.0
        } else {
            let factor = (0.875 + 0.25 * 1e6f64.ln() / nf.ln()).max(1.125);
            (nf * factor).round()
        };
        // capacity ≤ 3 · n, so the float is exact enough and the cast saturates at worst.
        let capacity = capacity as u64;
        let segments = capacity.div_ceil(segment_length).saturating_sub(2).max(1);
        let segment_count_length = segments.checked_mul(segment_length)?;
        let array_length = segment_count_length.checked_add(2 * segment_length)?;
        Some(Shape {
            segment_length: u32::try_from(segment_length).ok()?,
            segment_count_length: u32::try_from(segment_count_length).ok()?,
            array_length: u32::try_from(array_length).ok()?,
        })
    }
}

/// MurmurHash3's 64-bit finalizer on `hash + seed`: a bijection of `u64` for a fixed seed (so
/// distinct key hashes stay distinct), and a new seed moves every key's slots independently.
#[inline]
fn mix(hash: u64, seed: u64) -> u64 {
    let mut z = hash.wrapping_add(seed);
    z = (z ^ (z >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    z = (z ^ (z >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    z ^ (z >> 33)
}

/// The three slots of the remixed hash `m`: one in each of three consecutive segments.
///
/// With `C = segments · L` and `A = C + 2L` (the parser and the builder both ensure it), `h0 < C`
/// and XORing low bits stays inside a segment, so every slot is below `A`.
#[inline]
fn slots(m: u64, segment_length: u32, segment_count_length: u32) -> [u32; 3] {
    let mask = segment_length.wrapping_sub(1);
    let h0 = ((u128::from(m) * u128::from(segment_count_length)) >> 64) as u32;
    let h1 = h0.wrapping_add(segment_length) ^ ((m >> 18) as u32 & mask);
    let h2 = h0.wrapping_add(segment_length.wrapping_mul(2)) ^ (m as u32 & mask);
    [h0, h1, h2]
}

/// A fingerprint type: `u8` or `u16`.
trait Fingerprint: Copy + Default + Eq + BitXor<Output = Self> {
    /// Width in bits (the trailer's byte 22).
    const BITS: u8;
    /// The fingerprint of the remixed hash `m`: its low `BITS` bits of `m ^ (m >> 32)`.
    fn of(m: u64) -> Self;
    /// Appends the little-endian bytes.
    fn put(self, out: &mut Vec<u8>);
}

impl Fingerprint for u8 {
    const BITS: u8 = 8;
    #[inline]
    fn of(m: u64) -> u8 {
        (m ^ (m >> 32)) as u8
    }
    fn put(self, out: &mut Vec<u8>) {
        out.push(self);
    }
}

impl Fingerprint for u16 {
    const BITS: u8 = 16;
    #[inline]
    fn of(m: u64) -> u16 {
        (m ^ (m >> 32)) as u16
    }
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

/// What a filter's bytes say.
enum Parsed<'a> {
    /// A filter to probe.
    Filter(View<'a>),
    /// Built from no keys: matches nothing.
    Empty,
    /// Not this format, damaged, or the give-up filter: "may match".
    Unknown,
}

/// A parsed, consistent filter: the fingerprint bytes and the geometry.
struct View<'a> {
    data: &'a [u8],
    seed: u64,
    segment_length: u32,
    segment_count_length: u32,
    fingerprint_bits: u8,
}

fn u32_at(t: &[u8; TRAILER_LEN], at: usize) -> u32 {
    u32::from_le_bytes([t[at], t[at + 1], t[at + 2], t[at + 3]])
}

/// Reads and checks the trailer. Cheap enough to run on every probe (a few loads and compares,
/// all predictable), which keeps the policy stateless like the blooms.
#[inline]
fn parse(filter: &[u8]) -> Parsed<'_> {
    let Some(data_len) = filter.len().checked_sub(TRAILER_LEN) else {
        return Parsed::Unknown;
    };
    let (data, trailer) = filter.split_at(data_len);
    let Ok(t) = <&[u8; TRAILER_LEN]>::try_from(trailer) else {
        return Parsed::Unknown;
    };
    let fingerprint_bits = match t[20..] {
        [MARKER, SUB_IMPL, w @ (8 | 16), KIND_FILTER, 0] => w,
        _ => return Parsed::Unknown,
    };
    let mut seed_bytes = [0u8; 8];
    seed_bytes.copy_from_slice(&t[..8]);
    let seed = u64::from_le_bytes(seed_bytes);
    let segment_length = u32_at(t, 8);
    let segment_count_length = u32_at(t, 12);
    let array_length = u32_at(t, 16);
    if array_length == 0 {
        return if data.is_empty() && segment_count_length == 0 && segment_length == 0 {
            Parsed::Empty
        } else {
            Parsed::Unknown
        };
    }
    // The slot arithmetic needs: L a power of two, C a non-zero multiple of L, A = C + 2L, and
    // exactly A fingerprints of bytes.
    let consistent = segment_length.is_power_of_two()
        && segment_count_length != 0
        && segment_count_length & (segment_length - 1) == 0
        && u64::from(segment_count_length) + 2 * u64::from(segment_length)
            == u64::from(array_length)
        && data.len() as u64 == u64::from(array_length) * u64::from(fingerprint_bits / 8);
    if !consistent {
        return Parsed::Unknown;
    }
    Parsed::Filter(View {
        data,
        seed,
        segment_length,
        segment_count_length,
        fingerprint_bits,
    })
}

impl View<'_> {
    #[inline]
    fn contains(&self, hash: u64) -> bool {
        let m = mix(hash, self.seed);
        let [a, b, c] = slots(m, self.segment_length, self.segment_count_length);
        let (a, b, c) = (a as usize, b as usize, c as usize);
        if self.fingerprint_bits == 8 {
            // The three loads are independent, so their cache misses overlap. The indexes are in
            // range by construction of the checked geometry; `get` keeps damaged bytes from ever
            // reading out of bounds at the cost of three predictable branches.
            match (self.data.get(a), self.data.get(b), self.data.get(c)) {
                (Some(&x), Some(&y), Some(&z)) => x ^ y ^ z == u8::of(m),
                _ => true,
            }
        } else {
            match (
                u16_at(self.data, a),
                u16_at(self.data, b),
                u16_at(self.data, c),
            ) {
                (Some(x), Some(y), Some(z)) => x ^ y ^ z == u16::of(m),
                _ => true,
            }
        }
    }
}

#[inline]
fn u16_at(data: &[u8], slot: usize) -> Option<u16> {
    let at = slot.checked_mul(2)?;
    let bytes = data.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes([bytes[0], bytes[1]]))
}

/// Working memory of one construction, kept by the builder so that a builder reused across
/// partitions does not reallocate for each.
#[derive(Default)]
struct Scratch {
    /// Remixed hashes, sorted and deduplicated.
    mixed: Vec<u64>,
    /// Per slot: `keys << 2 | xor of slot numbers`.
    counts: Vec<u8>,
    /// Per slot: XOR of the remixed hashes of its keys (the key itself once only one is left).
    xors: Vec<u64>,
    /// Slots with one key, waiting to be peeled.
    queue: Vec<u32>,
    /// Peeled keys' remixed hashes, in peel order.
    peeled: Vec<u64>,
    /// Which of their slots (0, 1, 2) they were peeled from (apart: 9 bytes a key, not 16).
    peeled_slot: Vec<u8>,
    /// The bucket sort's output buffer and bucket offsets.
    spare: Vec<u64>,
    buckets: Vec<u32>,
}

/// Collects the keys' 64-bit hashes; `finish` solves the filter.
struct BinaryFuseBuilder {
    fingerprint_bits: u8,
    hashes: Vec<u64>,
    added: usize,
    scratch: Scratch,
}

impl FilterBitsBuilder for BinaryFuseBuilder {
    #[inline]
    fn add_key(&mut self, key: &[u8]) {
        self.added += 1;
        let h = BinaryFuse::hash(key);
        // Several versions of one user key arrive together: drop them here, cheaply. Any other
        // duplicates go in `finish` (peeling cannot succeed with two equal hashes).
        if self.hashes.last() != Some(&h) {
            self.hashes.push(h);
        }
    }

    fn num_keys(&self) -> usize {
        self.added
    }

    fn estimated_len(&self) -> usize {
        // Exact unless non-consecutive duplicates were added.
        if self.hashes.is_empty() {
            return TRAILER_LEN;
        }
        let width = usize::from(self.fingerprint_bits / 8);
        match Shape::for_keys(self.hashes.len()) {
            Some(s) => s.array_length as usize * width + TRAILER_LEN,
            None => TRAILER_LEN,
        }
    }

    fn finish(&mut self) -> Vec<u8> {
        let out = if self.fingerprint_bits == 16 {
            build::<u16>(&self.hashes, &mut self.scratch, MAX_ATTEMPTS).0
        } else {
            build::<u8>(&self.hashes, &mut self.scratch, MAX_ATTEMPTS).0
        };
        self.hashes.clear();
        self.added = 0;
        out
    }
}

/// The seed of attempt `attempt` (splitmix64 of a counter: deterministic, well spread).
fn seed_for(attempt: u32) -> u64 {
    let mut z = SEED_START.wrapping_add(u64::from(attempt).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Builds the filter bytes for `hashes` (any order, duplicates allowed), trying at most
/// `max_attempts` seeds. Returns the bytes and the attempts used (0 for an empty set; more than
/// `max_attempts` means it gave up and wrote the match-everything filter).
fn build<F: Fingerprint>(hashes: &[u64], s: &mut Scratch, max_attempts: u32) -> (Vec<u8>, u32) {
    if hashes.is_empty() {
        return (trailer_only(F::BITS, KIND_FILTER), 0);
    }
    let mut shape = None;
    for attempt in 0..max_attempts {
        let seed = seed_for(attempt);
        // Sorting the remixed hashes does two jobs: it brings equal hashes together for dedup
        // (the mix is a bijection, so equal after mixing means equal before), and it orders keys
        // by their first slot (h0 grows with m), so the counting and peeling passes below walk
        // the arrays nearly sequentially instead of at random.
        s.mixed.clear();
        s.mixed.extend(hashes.iter().map(|&h| mix(h, seed)));
        sort_dedup(&mut s.mixed, &mut s.spare, &mut s.buckets);
        let shape = match shape {
            Some(shape) => shape,
            None => match Shape::for_keys(s.mixed.len()) {
                Some(found) => *shape.insert(found),
                // Too many keys for 32-bit slot numbers.
                None => break,
            },
        };
        if peel(s, shape) {
            return (assign::<F>(s, shape, seed), attempt + 1);
        }
    }
    (
        trailer_only(F::BITS, KIND_MATCH_ALL),
        max_attempts.saturating_add(1),
    )
}

/// A filter of the trailer alone: the empty set (`KIND_FILTER`) or the give-up filter.
fn trailer_only(bits: u8, kind: u8) -> Vec<u8> {
    let mut out = vec![0u8; TRAILER_LEN];
    out[20..].copy_from_slice(&[MARKER, SUB_IMPL, bits, kind, 0]);
    out
}

/// Peels the 3-uniform hypergraph of `s.mixed` (distinct keys) over `shape`'s slots: repeatedly
/// takes a slot that only one remaining key uses and removes that key. Succeeds when every key
/// was removed; `s.peeled` then holds them in peel order.
fn peel(s: &mut Scratch, shape: Shape) -> bool {
    let Shape {
        segment_length: len,
        segment_count_length: scl,
        array_length,
    } = shape;
    let slots_n = array_length as usize;
    s.counts.clear();
    s.counts.resize(slots_n, 0);
    s.xors.clear();
    s.xors.resize(slots_n, 0);
    s.peeled.clear();
    s.peeled.reserve(s.mixed.len());
    s.peeled_slot.clear();
    s.peeled_slot.reserve(s.mixed.len());

    let counts = &mut s.counts[..];
    let xors = &mut s.xors[..];
    let mut overflow = false;
    for &m in &s.mixed {
        for (j, slot) in slots(m, len, scl).into_iter().enumerate() {
            let slot = slot as usize;
            let c = counts[slot];
            overflow |= c >= COUNT_LIMIT;
            counts[slot] = c.wrapping_add(4) ^ j as u8;
            xors[slot] ^= m;
        }
    }
    if overflow {
        return false;
    }

    // Queue every slot with one key, then peel last-in first-out: a key's removal queues its
    // other slots as they drop to one key, and these are peeled next, while still in cache. The
    // pushes are branchless (write, then advance only if the slot qualifies) because whether a
    // slot holds one key is a coin toss the branch predictor cannot learn. Each slot is pushed at
    // most once (in the scan if it starts with one key, else when it drops to one: counts only
    // fall), so `slots_n + 1` entries hold every push and the unconditional write.
    s.queue.clear();
    s.queue.resize(slots_n + 1, 0);
    let queue = &mut s.queue[..];
    let mut queued = 0usize;
    for (slot, &c) in counts.iter().enumerate() {
        queue[queued] = slot as u32;
        queued += usize::from(c >> 2 == 1);
    }
    while queued > 0 {
        queued -= 1;
        let slot = queue[queued] as usize;
        let c = counts[slot];
        if c >> 2 != 1 {
            // Emptied since it was queued.
            continue;
        }
        // One key left here: its hash is the XOR, its slot number the low bits.
        let m = xors[slot];
        s.peeled.push(m);
        s.peeled_slot.push(c & 3);
        for (j, other) in slots(m, len, scl).into_iter().enumerate() {
            let other = other as usize;
            let oc = counts[other].wrapping_sub(4) ^ j as u8;
            counts[other] = oc;
            xors[other] ^= m;
            queue[queued] = other as u32;
            queued += usize::from(oc >> 2 == 1);
        }
    }
    s.peeled.len() == s.mixed.len()
}

/// Fills the fingerprints in reverse peel order and serializes the filter.
///
/// A key peeled from slot `s` was the only key left at `s`, so every key peeled before it (and
/// assigned after it here) writes slots other than this key's three: each key's XOR, once
/// written, stays right.
fn assign<F: Fingerprint>(s: &Scratch, shape: Shape, seed: u64) -> Vec<u8> {
    let mut fps = vec![F::default(); shape.array_length as usize];
    for (&m, &j) in s.peeled.iter().zip(&s.peeled_slot).rev() {
        let [a, b, c] = slots(m, shape.segment_length, shape.segment_count_length);
        let (a, b, c) = (a as usize, b as usize, c as usize);
        // The peeled slot gets whatever makes the three XOR to the fingerprint; it is still 0.
        let target = match j {
            0 => a,
            1 => b,
            _ => c,
        };
        fps[target] = F::of(m) ^ fps[a] ^ fps[b] ^ fps[c];
    }
    let width = usize::from(F::BITS / 8);
    let mut out = Vec::with_capacity(fps.len() * width + TRAILER_LEN);
    for f in fps {
        f.put(&mut out);
    }
    out.extend_from_slice(&seed.to_le_bytes());
    out.extend_from_slice(&shape.segment_length.to_le_bytes());
    out.extend_from_slice(&shape.segment_count_length.to_le_bytes());
    out.extend_from_slice(&shape.array_length.to_le_bytes());
    out.extend_from_slice(&[MARKER, SUB_IMPL, F::BITS, KIND_FILTER, 0]);
    out
}
