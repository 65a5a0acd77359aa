//! The filter-policy axis: how a set of keys becomes bytes, and how one key is tested against them.

use std::cell::Cell;

/// A filter policy: the bits of a filter, independent of where the table keeps them.
///
/// A policy is named; the name is stored in every table built with it, and a table whose policy the
/// opening store does not know is read correctly without its filter. A policy must never answer
/// "no" for a key that was added (no false negatives) and must accept any bytes in
/// [`may_match`](FilterPolicy::may_match) without panicking (damaged filters are caught by the
/// block checksum before they reach it, but the policy is the last line of defence).
///
/// # Example
///
/// A policy that keeps every key verbatim (exact, and large):
///
/// ```
/// use siftdb::{FilterBitsBuilder, FilterPolicy};
///
/// struct Exact;
/// struct ExactBuilder(Vec<Vec<u8>>);
///
/// impl FilterBitsBuilder for ExactBuilder {
///     fn add_key(&mut self, key: &[u8]) { self.0.push(key.to_vec()); }
///     fn num_keys(&self) -> usize { self.0.len() }
///     fn estimated_len(&self) -> usize { self.0.iter().map(|k| k.len() + 4).sum() }
///     fn finish(&mut self) -> Vec<u8> {
///         let mut out = Vec::new();
///         for k in self.0.drain(..) {
///             out.extend_from_slice(&(k.len() as u32).to_le_bytes());
///             out.extend_from_slice(&k);
///         }
///         out
///     }
/// }
///
/// impl FilterPolicy for Exact {
///     fn name(&self) -> &str { "example.Exact" }
///     fn bits_per_key(&self) -> f64 { f64::NAN }
///     fn builder(&self) -> Box<dyn FilterBitsBuilder> { Box::new(ExactBuilder(Vec::new())) }
///     fn may_match(&self, mut filter: &[u8], key: &[u8]) -> bool {
///         while filter.len() >= 4 {
///             let n = u32::from_le_bytes([filter[0], filter[1], filter[2], filter[3]]) as usize;
///             let Some(k) = filter.get(4..4 + n) else { return true };
///             if k == key { return true; }
///             filter = &filter[4 + n..];
///         }
///         false
///     }
/// }
///
/// let mut b = Exact.builder();
/// b.add_key(b"apple");
/// let bytes = b.finish();
/// assert!(Exact.may_match(&bytes, b"apple"));
/// assert!(!Exact.may_match(&bytes, b"pear"));
/// ```
pub trait FilterPolicy: Send + Sync {
    /// The name stored in each table built with this policy (for example `"siftdb.CacheLocalBloom"`).
    fn name(&self) -> &str;

    /// The bits per key this policy was configured with (`NAN` if it has no such notion).
    fn bits_per_key(&self) -> f64;

    /// A builder that collects keys and finishes into filter bytes.
    fn builder(&self) -> Box<dyn FilterBitsBuilder>;

    /// Whether `key` may be among the keys `filter` was built from. `false` means certainly not.
    ///
    /// It runs inside [`Db::get`](crate::Db::get), which holds the store's read lock on its
    /// current tables: it must not call back into the store.
    ///
    /// `filter` may have been built by this policy with other settings (another bits/key); the bytes
    /// must carry whatever the query needs.
    fn may_match(&self, filter: &[u8], key: &[u8]) -> bool;

    /// [`may_match`](FilterPolicy::may_match) for a key that is probed against many filters (a Get
    /// asks one per table): a policy that hashes with [`FilterProbe::xxh3_64`] takes the hash from
    /// `probe`, so the key is hashed once per Get instead of once per table. The default ignores
    /// the cached hash.
    fn may_match_probe(&self, filter: &[u8], probe: &FilterProbe<'_>) -> bool {
        self.may_match(filter, probe.key())
    }

    /// [`may_match_probe`](FilterPolicy::may_match_probe) for a batch of keys against one filter
    /// (a `Db::multi_get` asks each table once for all its keys): `out[i]` becomes the answer
    /// for `probes[i]`. A policy may overlap the keys' memory accesses (prefetch every key's
    /// bits, then test them); the answers must be exactly those of `may_match_probe`. The
    /// default asks one key at a time.
    ///
    /// # Panics
    /// If `out` is shorter than `probes`.
    fn may_match_batch(&self, filter: &[u8], probes: &[FilterProbe<'_>], out: &mut [bool]) {
        for (probe, answer) in probes.iter().zip(&mut out[..probes.len()]) {
            *answer = self.may_match_probe(filter, probe);
        }
    }

    /// [`may_match_probe`](FilterPolicy::may_match_probe) for keys each asked of its own filter
    /// of this policy (a `Db::multi_get` asks each key, at each step of its walk, the filter of
    /// the table there that may hold it: an L0 table, or the one table of a level): `out[i]`
    /// becomes whether `queries[i].0` may hold `queries[i].1`'s key. The answers must be exactly
    /// those of `may_match_probe`. The default prefetches every query's bits
    /// ([`prefetch`](FilterPolicy::prefetch)), then asks one query at a time.
    ///
    /// # Panics
    /// If `out` is shorter than `queries`.
    fn may_match_each(&self, queries: &[(&[u8], &FilterProbe<'_>)], out: &mut [bool]) {
        for &(filter, probe) in queries {
            self.prefetch(filter, probe);
        }
        for (&(filter, probe), answer) in queries.iter().zip(&mut out[..queries.len()]) {
            *answer = self.may_match_probe(filter, probe);
        }
    }

    /// Starts loading the part of `filter` that [`may_match_probe`](FilterPolicy::may_match_probe)
    /// of `probe` will read, without waiting for it: a batch of lookups prefetches the filters of
    /// the tables of a level it asks for one key each before probing any, so their cache misses
    /// overlap. A hint only, it changes no answer. The default does nothing.
    fn prefetch(&self, filter: &[u8], probe: &FilterProbe<'_>) {
        let _ = (filter, probe);
    }

    /// The cache lines of `filter` (built by this policy) that one probe reads at most, for the
    /// per-level count of filter lines a Get touches (`filter.lines.touched`); `None` (the
    /// default) if the policy does not say, and then its probes are not counted there.
    fn lines_per_probe(&self, filter: &[u8]) -> Option<u32> {
        let _ = filter;
        None
    }

    /// This policy at another bits per key, for per-level allocation
    /// ([`FilterAllocation::Monkey`](crate::FilterAllocation::Monkey)); `None` (the default) if the
    /// policy has no such knob, and then every level gets it as it is.
    fn with_bits_per_key(&self, bits_per_key: f64) -> Option<std::sync::Arc<dyn FilterPolicy>> {
        let _ = bits_per_key;
        None
    }

    /// The false positive rate theory predicts for a filter of this policy at `bits_per_key`, if the
    /// policy knows it.
    fn theoretical_fp_rate(&self, bits_per_key: f64) -> Option<f64> {
        let _ = bits_per_key;
        None
    }

    /// The probes per key that `filter`, built by this policy, uses, read from its bytes: for
    /// inspection tools such as `sst_dump`. `None` (the default) if the policy does not say, or
    /// `filter` is not one of its well-formed filters.
    fn probes_in(&self, filter: &[u8]) -> Option<u32> {
        let _ = filter;
        None
    }
}

/// A key about to be tested against several filters, with its 64-bit xxh3 hash (seed 0) computed
/// on first use and kept.
///
/// ```
/// use siftdb::filter::{CacheLocalBloom, FilterProbe};
/// use siftdb::FilterPolicy;
///
/// let policy = CacheLocalBloom::new(10.0);
/// let mut b = policy.builder();
/// b.add_key(b"apple");
/// let filter = b.finish();
/// let probe = FilterProbe::new(b"apple");
/// assert!(policy.may_match_probe(&filter, &probe));
/// assert_eq!(probe.xxh3_64(), CacheLocalBloom::hash(b"apple"));
/// ```
///
/// A clone keeps the hash if it was computed, so a batch of keys can be handed to each table
/// without hashing them again.
#[derive(Debug, Clone)]
pub struct FilterProbe<'a> {
    key: &'a [u8],
    xxh3: Cell<Option<u64>>,
}

impl<'a> FilterProbe<'a> {
    /// A probe for `key`; nothing is hashed yet.
    pub fn new(key: &'a [u8]) -> Self {
        FilterProbe {
            key,
            xxh3: Cell::new(None),
        }
    }

    /// The key.
    pub fn key(&self) -> &'a [u8] {
        self.key
    }

    /// The key's xxh3 64-bit hash with seed 0, computed on the first call.
    #[inline]
    pub fn xxh3_64(&self) -> u64 {
        match self.xxh3.get() {
            Some(h) => h,
            None => {
                let h = xxhash_rust::xxh3::xxh3_64(self.key);
                self.xxh3.set(Some(h));
                h
            }
        }
    }
}

/// Collects keys for one filter and turns them into its bytes.
pub trait FilterBitsBuilder: Send {
    /// Adds a key. Adding the same key twice is allowed.
    fn add_key(&mut self, key: &[u8]);

    /// How many keys were added since the last [`finish`](FilterBitsBuilder::finish).
    fn num_keys(&self) -> usize;

    /// About how many bytes `finish` would return now (used to cut partitions).
    fn estimated_len(&self) -> usize;

    /// The filter over every key added since the last call; the builder starts empty again.
    fn finish(&mut self) -> Vec<u8>;
}
