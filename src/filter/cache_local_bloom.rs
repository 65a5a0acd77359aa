//! A cache-local bloom filter (`siftdb.CacheLocalBloom`), after RocksDB's FastLocalBloom.
//!
//! Every key's probes fall in one 64-byte line, so a query touches one cache line: one memory
//! miss at most, where a standard bloom filter takes up to `k`. The price is a slightly higher
//! false positive rate for the same bits (0.9535 % instead of 0.84 % at 10 bits/key), because
//! keys spread unevenly over lines.
//!
//! Format, hashing and probing: `docs/filters.md`, *Cache-local bloom*.

use xxhash_rust::xxh3::xxh3_64;

use super::policy::{FilterBitsBuilder, FilterPolicy, FilterProbe};
use super::theory;

// The prefetch and the AVX2 line test: with the Ribbon query's SSE2 parities, the crate's only
// unsafe code.
mod simd;

/// Bytes per line: one cache line.
const LINE_BYTES: usize = 64;
/// Bits per line.
const LINE_BITS: u32 = 512;
/// Bytes of the metadata trailer.
const TRAILER_LEN: usize = 5;
/// First trailer byte: this is a "new" (non-LevelDB) filter.
const MARKER: u8 = 0xFF;
/// Second trailer byte: this implementation (cache-local bloom).
const SUB_IMPL: u8 = 0;
/// Golden-ratio multiplier that remixes the probe hash between probes.
const REMIX: u32 = 0x9e37_79b9;

/// The number of probes for `millibits` thousandths of a bit per key.
///
/// The table RocksDB measured best for its cache-local bloom: ≤ 2080 → 1, ≤ 3580 → 2, ≤ 5100 → 3,
/// ≤ 6640 → 4, ≤ 8300 → 5, ≤ 10070 → 6, ≤ 11720 → 7, ≤ 14001 → 8, ≤ 16050 → 9, ≤ 18300 → 10,
/// ≤ 22001 → 11, ≤ 25501 → 12, > 50000 → 24, otherwise `(m − 1) / 2000 − 1`. (It is kept exactly,
/// including its dip to 11 probes for 25502..=26000.)
pub(crate) fn probes_for_millibits(millibits: u32) -> u32 {
    match millibits {
        0..=2080 => 1,
        2081..=3580 => 2,
        3581..=5100 => 3,
        5101..=6640 => 4,
        6641..=8300 => 5,
        8301..=10070 => 6,
        10071..=11720 => 7,
        11721..=14001 => 8,
        14002..=16050 => 9,
        16051..=18300 => 10,
        18301..=22001 => 11,
        22002..=25501 => 12,
        50001.. => 24,
        m => (m - 1) / 2000 - 1,
    }
}

/// A cache-local bloom filter policy (name `"siftdb.CacheLocalBloom"`): all of a key's probes
/// fall in one 64-byte line, chosen by one 64-bit xxh3 hash.
///
/// The filter has `round_up_to_64(ceil(n · millibits / 8000))` bytes of lines, with
/// `millibits = round(1000 · bits_per_key)`, and a 5-byte trailer carrying the number of probes,
/// so any `CacheLocalBloom` reads a filter built with any bits/key. An empty key set gives a
/// filter of the trailer alone, which matches nothing.
///
/// ```
/// use siftdb::FilterPolicy;
/// use siftdb::filter::CacheLocalBloom;
///
/// let policy = CacheLocalBloom::new(10.0);
/// let mut b = policy.builder();
/// b.add_key(b"apple");
/// let filter = b.finish();
/// assert!(policy.may_match(&filter, b"apple"));
/// // The Get path hashes once and reuses the hash for every table it checks.
/// let h = CacheLocalBloom::hash(b"apple");
/// assert!(policy.may_match_hash(&filter, h));
/// ```
#[derive(Debug, Clone)]
pub struct CacheLocalBloom {
    bits_per_key: f64,
    millibits: u32,
    probes: u32,
}

impl CacheLocalBloom {
    /// A policy that spends `bits_per_key` bits per key (fractions allowed, to a thousandth).
    ///
    /// Values are clamped to `1.0..=100.0` (NaN counts as 1.0).
    pub fn new(bits_per_key: f64) -> Self {
        let bits_per_key = clamp_bits_per_key(bits_per_key);
        let millibits = millibits_for(bits_per_key);
        CacheLocalBloom {
            bits_per_key,
            millibits,
            probes: probes_for_millibits(millibits),
        }
    }

    /// The number of probes per key this policy writes.
    pub fn num_probes(&self) -> u32 {
        self.probes
    }

    /// The false positive rate theory predicts for a filter of `num_keys` keys built by this policy:
    /// the cache-local rate plus the (negligible) chance that an absent key's 64-bit hash equals a
    /// present key's.
    pub fn theoretical_fp_rate_for(&self, num_keys: usize) -> f64 {
        theory::independent_probability_sum(
            theory::cache_local_fp_rate(f64::from(self.millibits) / 1000.0, self.probes, LINE_BITS),
            theory::fingerprint_fp_rate(num_keys as f64, 64),
        )
    }

    /// The filter this policy builds over the keys whose [`hash`](CacheLocalBloom::hash)es are
    /// `hashes`, sized for `hashes.len()` keys: what a builder fed those keys writes. For policies
    /// that fall back to this format (the Ribbon filter).
    pub(crate) fn filter_from_hashes(&self, hashes: &[u64]) -> Vec<u8> {
        filter_from_hashes(hashes, self.millibits, self.probes)
    }

    /// The length of [`filter_from_hashes`](CacheLocalBloom::filter_from_hashes)'s filter for
    /// `num_hashes` hashes.
    pub(crate) fn filter_len_for(&self, num_hashes: usize) -> usize {
        filter_len(num_hashes, self.millibits)
    }

    /// The 64-bit hash of `key` this filter uses (xxh3, seed 0).
    #[inline]
    pub fn hash(key: &[u8]) -> u64 {
        xxh3_64(key)
    }

    /// Whether the key whose [`hash`](CacheLocalBloom::hash) is `hash` may be in `filter`:
    /// [`may_match`](FilterPolicy::may_match) without hashing the key again.
    ///
    /// Bytes that are not a filter of this format (wrong length, unknown trailer) answer `true`:
    /// "may match" is always safe.
    #[inline]
    pub fn may_match_hash(&self, filter: &[u8], hash: u64) -> bool {
        // Portable even where AVX2 exists: one key's probe of a large filter waits on its line's
        // cache miss more than on the arithmetic. At 1M keys the AVX2 line test measured
        // 0.8–1.26× the portable one (benches/filters.rs, `probe_absent_line`); batches, whose
        // lines are prefetched, use it.
        may_match_hash_with(filter, hash, LineProbe::Portable)
    }
}

/// How a key's line is tested: the same answers either way.
#[derive(Clone, Copy, Debug)]
pub(crate) enum LineProbe {
    /// One bit at a time, on any target.
    Portable,
    /// Eight probes per step with AVX2 (x86_64 CPUs that have it): for batches, whose lines are
    /// prefetched, so that the test's arithmetic is what a probe waits on.
    Avx2(simd::Avx2),
}

impl LineProbe {
    /// The AVX2 probe if this CPU has AVX2, otherwise the portable one.
    #[inline]
    pub(crate) fn fastest() -> LineProbe {
        match simd::Avx2::detect() {
            Some(avx2) => LineProbe::Avx2(avx2),
            None => LineProbe::Portable,
        }
    }

    /// Whether every one of `probes` bits that `g` (the hash's high half) addresses in `line`
    /// is set.
    #[inline]
    fn line_may_match(self, line: &[u8; LINE_BYTES], g: u32, probes: u32) -> bool {
        match self {
            LineProbe::Portable => line_may_match(line, g, probes),
            LineProbe::Avx2(avx2) => avx2.line_may_match(line, g, probes),
        }
    }

    /// [`line_may_match`](Self::line_may_match) of each test that has a line, into the answer
    /// beside it; the other answers are left as they are.
    #[inline]
    fn lines_may_match(self, tests: &[simd::LineTest<'_>], answers: &mut [bool]) {
        match self {
            LineProbe::Portable => {
                for (&(line, g, probes), answer) in tests.iter().zip(answers) {
                    if let Some(line) = line {
                        *answer = line_may_match(line, g, probes);
                    }
                }
            }
            LineProbe::Avx2(avx2) => avx2.lines_may_match(tests, answers),
        }
    }
}

/// [`CacheLocalBloom::may_match_hash`] with the line tested by `how`.
#[inline]
pub(crate) fn may_match_hash_with(filter: &[u8], hash: u64, how: LineProbe) -> bool {
    match parse(filter) {
        Parsed::Answer(answer) => answer,
        Parsed::Lines(lines) => lines.may_match(hash, how),
    }
}

/// Keys whose lines are prefetched before the first of them is tested: enough misses in flight
/// to cover memory latency, few enough that the lines are still in L1 when tested.
const PREFETCH_RUN: usize = 16;

/// [`FilterPolicy::may_match_batch`] for [`CacheLocalBloom`], with the lines tested by `how`.
///
/// # Panics
/// If `out` is shorter than `probes`.
pub(crate) fn may_match_batch_with(
    filter: &[u8],
    probes: &[FilterProbe<'_>],
    out: &mut [bool],
    how: LineProbe,
) {
    let out = &mut out[..probes.len()];
    let lines = match parse(filter) {
        Parsed::Answer(answer) => {
            out.fill(answer);
            return;
        }
        Parsed::Lines(lines) => lines,
    };
    for (run, answers) in probes
        .chunks(PREFETCH_RUN)
        .zip(out.chunks_mut(PREFETCH_RUN))
    {
        for probe in run {
            if let Some(line) = lines.line(probe.xxh3_64()) {
                simd::prefetch(line);
            }
        }
        // Finding the line again is one multiply; keeping it would cost a stack array.
        for (probe, answer) in run.iter().zip(answers) {
            *answer = lines.may_match(probe.xxh3_64(), how);
        }
    }
}

/// [`FilterPolicy::may_match_each`] for [`CacheLocalBloom`], with the lines tested by `how`.
///
/// # Panics
/// If `out` is shorter than `queries`.
pub(crate) fn may_match_each_with(
    queries: &[(&[u8], &FilterProbe<'_>)],
    out: &mut [bool],
    how: LineProbe,
) {
    let out = &mut out[..queries.len()];
    // Each query's line, probe bits and probe count, found once: the filters differ from query
    // to query, so each is parsed.
    let mut found: [simd::LineTest<'_>; PREFETCH_RUN] = [(None, 0, 0); PREFETCH_RUN];
    for (run, answers) in queries
        .chunks(PREFETCH_RUN)
        .zip(out.chunks_mut(PREFETCH_RUN))
    {
        for (&(filter, probe), (slot, answer)) in
            run.iter().zip(found.iter_mut().zip(&mut *answers))
        {
            match parse(filter) {
                Parsed::Answer(a) => {
                    *slot = (None, 0, 0);
                    *answer = a;
                }
                Parsed::Lines(lines) => {
                    let hash = probe.xxh3_64();
                    let line = lines.line(hash);
                    if let Some(line) = line {
                        simd::prefetch(line);
                    }
                    // A line that cannot be found (never, for parsed lines) answers "maybe".
                    *slot = (line, (hash >> 32) as u32, lines.probes);
                    *answer = true;
                }
            }
        }
        how.lines_may_match(&found[..run.len()], answers);
    }
}

/// What a filter's bytes say before any key is looked at.
enum Parsed<'a> {
    /// The same answer for every key: an empty key set (`false`) or bytes of an unknown or
    /// damaged format (`true`).
    Answer(bool),
    /// Well-formed lines to probe.
    Lines(Lines<'a>),
}

/// The lines of a well-formed filter: `data.len()` is `num_lines · 64`, with
/// `1 ≤ num_lines ≤ 2^32 − 1`.
struct Lines<'a> {
    data: &'a [u8],
    num_lines: u64,
    probes: u32,
}

/// Checks the trailer and the line area; every probe, scalar or vector, goes through here first.
#[inline]
fn parse(filter: &[u8]) -> Parsed<'_> {
    let Some(data_len) = filter.len().checked_sub(TRAILER_LEN) else {
        return Parsed::Answer(true);
    };
    let (data, meta) = filter.split_at(data_len);
    let probes = match *meta {
        [MARKER, SUB_IMPL, p, 0, 0] if p >> 5 == 0 => u32::from(p),
        // Another line size, implementation or a future extension: we cannot tell.
        _ => return Parsed::Answer(true),
    };
    if data.is_empty() {
        // Built from no keys.
        return Parsed::Answer(false);
    }
    if data.len() % LINE_BYTES != 0 {
        return Parsed::Answer(true);
    }
    let num_lines = (data.len() / LINE_BYTES) as u64;
    if num_lines > u64::from(u32::MAX) {
        // The fast range below needs num_lines ≤ 2^32; we never write more lines.
        return Parsed::Answer(true);
    }
    Parsed::Lines(Lines {
        data,
        num_lines,
        probes,
    })
}

impl<'a> Lines<'a> {
    /// The line `hash` maps to; `None` cannot happen for parsed lines, but is not trusted.
    #[inline]
    fn line(&self, hash: u64) -> Option<&'a [u8; LINE_BYTES]> {
        line_of(self.data, hash, self.num_lines)
    }

    #[inline]
    fn may_match(&self, hash: u64, how: LineProbe) -> bool {
        match self.line(hash) {
            Some(line) => how.line_may_match(line, (hash >> 32) as u32, self.probes),
            None => true,
        }
    }
}

/// The portable line test: every one of `probes` bits addressed from `g` set in `line`.
#[inline]
fn line_may_match(line: &[u8; LINE_BYTES], mut g: u32, probes: u32) -> bool {
    // Test every probe and AND the bits instead of returning at the first zero: a miss (the
    // common case in an LSM) then costs what a hit costs, with no mispredicted branch.
    let mut all = 1u8;
    for _ in 0..probes {
        let bit = g >> 23;
        all &= line[(bit >> 3) as usize] >> (bit & 7);
        g = g.wrapping_mul(REMIX);
    }
    all & 1 != 0
}

/// The 64-byte line `hash` maps to (fast range of the low 32 bits over `num_lines`).
#[inline]
fn line_of(data: &[u8], hash: u64, num_lines: u64) -> Option<&[u8; LINE_BYTES]> {
    let line = ((u64::from(hash as u32) * num_lines) >> 32) as usize;
    let start = line * LINE_BYTES;
    data.get(start..start + LINE_BYTES)?.try_into().ok()
}

fn clamp_bits_per_key(bits_per_key: f64) -> f64 {
    if bits_per_key.is_nan() {
        1.0
    } else {
        bits_per_key.clamp(1.0, 100.0)
    }
}

fn millibits_for(bits_per_key: f64) -> u32 {
    // bits_per_key is clamped to 1..=100, so this is 1000..=100000.
    (bits_per_key * 1000.0).round() as u32
}

/// Bytes of lines for `n` keys: `round_up_to_64(ceil(n · millibits / 8000))`, at most 2^32 lines.
fn data_len(n: usize, millibits: u32) -> usize {
    let bytes = (n as u64 * u64::from(millibits)).div_ceil(8000);
    let lines = bytes.div_ceil(LINE_BYTES as u64).min(u64::from(u32::MAX));
    lines as usize * LINE_BYTES
}

impl FilterPolicy for CacheLocalBloom {
    fn name(&self) -> &str {
        "siftdb.CacheLocalBloom"
    }

    /// The probes are the low 5 bits of the trailer's third byte.
    fn probes_in(&self, filter: &[u8]) -> Option<u32> {
        match filter {
            [data @ .., MARKER, SUB_IMPL, p, 0, 0] if !data.is_empty() && p >> 5 == 0 => {
                Some(u32::from(*p))
            }
            _ => None,
        }
    }

    fn with_bits_per_key(&self, bits_per_key: f64) -> Option<std::sync::Arc<dyn FilterPolicy>> {
        Some(std::sync::Arc::new(CacheLocalBloom::new(bits_per_key)))
    }

    fn bits_per_key(&self) -> f64 {
        self.bits_per_key
    }

    fn builder(&self) -> Box<dyn FilterBitsBuilder> {
        Box::new(CacheLocalBloomBuilder {
            millibits: self.millibits,
            probes: self.probes,
            hashes: Vec::new(),
            added: 0,
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

    /// Parses the filter once, then for each run of keys prefetches every key's line before
    /// testing any, so the run's cache misses overlap instead of following one another; the
    /// lines are tested by AVX2 where the CPU has it (1.4× the portable test in batches of 32
    /// at 1M keys, `probe_absent_line` in benches/filters.rs).
    fn may_match_batch(&self, filter: &[u8], probes: &[FilterProbe<'_>], out: &mut [bool]) {
        may_match_batch_with(filter, probes, out, LineProbe::fastest());
    }

    /// Prefetches each query's line in runs, then tests them, as
    /// [`may_match_batch`](FilterPolicy::may_match_batch) does for one filter.
    fn may_match_each(&self, queries: &[(&[u8], &FilterProbe<'_>)], out: &mut [bool]) {
        may_match_each_with(queries, out, LineProbe::fastest());
    }

    /// One: a key's probes all fall in its line (none for a filter that answers alike for every
    /// key).
    fn lines_per_probe(&self, filter: &[u8]) -> Option<u32> {
        Some(match parse(filter) {
            Parsed::Lines(_) => 1,
            Parsed::Answer(_) => 0,
        })
    }

    /// Prefetches the key's line, when the filter is well formed.
    #[inline]
    fn prefetch(&self, filter: &[u8], probe: &FilterProbe<'_>) {
        if let Parsed::Lines(lines) = parse(filter)
            && let Some(line) = lines.line(probe.xxh3_64())
        {
            simd::prefetch(line);
        }
    }

    fn theoretical_fp_rate(&self, bits_per_key: f64) -> Option<f64> {
        // The 64-bit hash's collision term, 1 − e^(−n/2^64), is below 1e-12 for any real table,
        // so the rate is the cache-local one alone.
        let millibits = millibits_for(clamp_bits_per_key(bits_per_key));
        Some(theory::cache_local_fp_rate(
            f64::from(millibits) / 1000.0,
            probes_for_millibits(millibits),
            LINE_BITS,
        ))
    }
}

/// Collects the keys' 64-bit hashes and sets all the bits in `finish`, once the size is known.
struct CacheLocalBloomBuilder {
    millibits: u32,
    probes: u32,
    hashes: Vec<u64>,
    added: usize,
}

impl FilterBitsBuilder for CacheLocalBloomBuilder {
    #[inline]
    fn add_key(&mut self, key: &[u8]) {
        self.added += 1;
        let h = CacheLocalBloom::hash(key);
        // Consecutive equal hashes set the same bits: keep one, so that repeated keys (several
        // versions of one user key) do not inflate the filter.
        if self.hashes.last() != Some(&h) {
            self.hashes.push(h);
        }
    }

    fn num_keys(&self) -> usize {
        self.added
    }

    fn estimated_len(&self) -> usize {
        filter_len(self.hashes.len(), self.millibits)
    }

    fn finish(&mut self) -> Vec<u8> {
        let out = filter_from_hashes(&self.hashes, self.millibits, self.probes);
        self.hashes.clear();
        self.added = 0;
        out
    }
}

/// The length of the filter [`filter_from_hashes`] writes for `num_hashes` hashes.
fn filter_len(num_hashes: usize, millibits: u32) -> usize {
    data_len(num_hashes, millibits) + TRAILER_LEN
}

/// The filter over the keys whose hashes are `hashes`, sized for `hashes.len()` keys (a repeated
/// hash sets the same bits again).
fn filter_from_hashes(hashes: &[u64], millibits: u32, probes: u32) -> Vec<u8> {
    let len = data_len(hashes.len(), millibits);
    let mut out = vec![0u8; len + TRAILER_LEN];
    let num_lines = (len / LINE_BYTES) as u64;
    if num_lines > 0 {
        let data = &mut out[..len];
        for &h in hashes {
            let line = ((u64::from(h as u32) * num_lines) >> 32) as usize;
            let start = line * LINE_BYTES;
            // line < num_lines, so the line is whole; one bounds check covers every probe.
            let line = &mut data[start..start + LINE_BYTES];
            let mut g = (h >> 32) as u32;
            for _ in 0..probes {
                let bit = g >> 23;
                line[(bit >> 3) as usize] |= 1 << (bit & 7);
                g = g.wrapping_mul(REMIX);
            }
        }
    }
    // log2(64) − 6 = 0 in the top three bits; probes ≤ 24 fit the low five.
    out[len..].copy_from_slice(&[MARKER, SUB_IMPL, probes as u8, 0, 0]);
    out
}

#[cfg(test)]
mod tests;
