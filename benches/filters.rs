//! Filter policy benchmarks, side by side in one run: siftdb's two bloom policies (the `fastbloom`
//! crate, fed the same xxh3 hash, as a reference), the binary fuse filters (8- and 16-bit
//! fingerprints, whose size follows from the key count) and the Ribbon filter, on filters of 10k,
//! 20k, 100k and 1M keys. Criterion times the build per filter and a probe per query for present
//! and absent keys. At setup, for each size, a table goes to stderr with each filter's bits/key
//! actually spent (trailer included), its measured false positive rate, `log2(1/rate)` (the
//! fewest bits/key any filter with that rate can spend) and the ratio of the two; the blooms run
//! at 10 bits/key, the Ribbon at 7 (about the bloom's rate) and at the fewest bits/key, in steps of
//! 0.05, whose measured rate is at most the cache-local bloom's, with its bytes as a share of the
//! bloom's.
//!
//! `range_filter_build/F-B/n` times a range filter's build (`B` bits per key, ranges up to 2^16)
//! from `n` sorted 16-byte keys of a fixed 8-byte head and a scrambled 64-bit number, in format
//! `F`: `segmented` (`SegmentedGrafiteBuilder`, what tables get) or `single-window`
//! (`GrafiteBuilder`, the format before it): 30k keys is about a default 2 MiB table of 100-byte
//! values. `F-strings-20/30000` builds one of 30k `user:<id>:<field>` strings, keys of varying
//! lengths that share a separator.
//!
//! Run with `cargo bench -p siftdb-benches --bench filters`; probe figures are per query, build figures per filter
//! (divide by the key count, or read the throughput line).
//!
//! With `--features __bench-internals`, also `probe_absent_line/1000000`: the cache-local bloom's
//! absent-key probe at 1M keys, prehashed, with the key's line tested one bit at a time
//! (`portable`) or eight probes per AVX2 step (`avx2`), and `may_match_batch` over runs of
//! [`BATCH`] keys, each key's line prefetched before any is tested (`batch32_portable`,
//! `batch32_avx2`, and `batch32`, the policy's own choice). Batch figures are per key, like the
//! others. Without AVX2 the `avx2` entries are skipped.

use std::hash::{BuildHasherDefault, Hasher};
use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fastbloom::BloomFilter;
use siftdb::filter::{
    BinaryFuse, CacheLocalBloom, GrafiteBuilder, LevelDbBloom, Ribbon, SegmentedGrafiteBuilder,
};
use siftdb::FilterPolicy;
use xxhash_rust::xxh3::xxh3_64;
#[cfg(feature = "__bench-internals")]
use {siftdb::bench_internals, siftdb::filter::FilterProbe, std::time::Instant};

const BITS_PER_KEY: f64 = 10.0;
const SIZES: [usize; 4] = [10_000, 20_000, 100_000, 1_000_000];
/// The Ribbon's bits/key for about the cache-local bloom's rate at 10.
const RIBBON_BITS_PER_KEY: f64 = 7.0;

/// A 16-byte key, stored inline so the key array itself is read sequentially, not chased.
type Key = [u8; 16];

fn keys(prefix: &str, n: usize) -> Vec<Key> {
    (0..n)
        .map(|i| {
            let s = format!("{prefix}{i:012}");
            let mut k = [0u8; 16];
            k.copy_from_slice(s.as_bytes());
            k
        })
        .collect()
}

/// Hands fastbloom the xxh3 value it is given, so that it and siftdb hash alike.
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn write(&mut self, bytes: &[u8]) {
        // Only u64s are inserted; hash anything else rather than ignore it.
        self.0 = xxh3_64(bytes);
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type FastBloom = BloomFilter<512, BuildHasherDefault<PassThrough>>;

fn fastbloom_build(keys: &[Key]) -> FastBloom {
    let bits = (keys.len() as f64 * BITS_PER_KEY) as usize;
    let mut f = BloomFilter::with_num_bits(bits)
        .hasher(BuildHasherDefault::<PassThrough>::default())
        .expected_items(keys.len());
    for k in keys {
        f.insert(&xxh3_64(k));
    }
    f
}

fn policy_build(policy: &dyn FilterPolicy, keys: &[Key]) -> Vec<u8> {
    let mut b = policy.builder();
    for k in keys {
        b.add_key(k);
    }
    b.finish()
}

fn rate(hits: usize, total: usize) -> String {
    format!("{:.3} %", 100.0 * hits as f64 / total as f64)
}

/// Times one query per iteration, cycling through `keys`.
fn probe_loop<T, F: FnMut(&T) -> bool>(c: &mut criterion::Bencher<'_>, keys: &[T], mut f: F) {
    let mut i = 0;
    c.iter(|| {
        let k = &keys[i];
        i += 1;
        if i == keys.len() {
            i = 0;
        }
        black_box(f(black_box(k)))
    });
}

/// The `i`-th absent key, `miss` and 12 digits, as [`keys`] makes it, without allocating.
fn absent_key(mut i: usize) -> Key {
    let mut k = *b"miss000000000000";
    for d in k[4..].iter_mut().rev() {
        *d = b'0' + (i % 10) as u8;
        i /= 10;
    }
    k
}

/// One row of the setup table for `filter`, `bits` bits/key over `n` keys, `hits` of `probes`
/// absent probes matching; returns the rate.
fn row(n: usize, name: &str, bits: f64, hits: usize, probes: usize) -> f64 {
    let fp = hits as f64 / probes as f64;
    let limit = -fp.log2();
    eprintln!(
        "{n:>9} {name:<40} {bits:>8.3} {:>10} {limit:>7.3} {:>6.3}",
        rate(hits, probes),
        bits / limit,
    );
    fp
}

/// [`row`] for a policy's filter, measured over the first `probes` absent keys.
fn report(n: usize, name: &str, policy: &dyn FilterPolicy, filter: &[u8], probes: usize) -> f64 {
    let hits = (0..probes)
        .filter(|&i| policy.may_match(filter, &absent_key(i)))
        .count();
    row(n, name, filter.len() as f64 * 8.0 / n as f64, hits, probes)
}

/// The fewest bits/key (from 10, in steps of 0.1) at which the cache-local bloom's measured FP rate on
/// `absent` is at most `target`, with that rate.
fn bloom_bits_for(present: &[Key], absent: &[Key], target: f64) -> Option<(f64, f64)> {
    (100..=200).map(|q| f64::from(q) / 10.0).find_map(|bpk| {
        let p = CacheLocalBloom::new(bpk);
        let f = policy_build(&p, present);
        let hits = absent.iter().filter(|k| p.may_match(&f, &k[..])).count();
        let fp = hits as f64 / absent.len() as f64;
        (fp <= target).then_some((f.len() as f64 * 8.0 / present.len() as f64, fp))
    })
}

/// The fewest Ribbon bits/key (from 6.5, in steps of 0.05) whose filter's measured FP rate over
/// `probes` absent keys is at most `target`: the policy and its filter.
fn ribbon_for_rate(present: &[Key], probes: usize, target: f64) -> Option<(Ribbon, Vec<u8>)> {
    (130..=200).map(|q| f64::from(q) / 20.0).find_map(|bpk| {
        let p = Ribbon::new(bpk);
        let f = policy_build(&p, present);
        let hits = (0..probes)
            .filter(|&i| p.may_match(&f, &absent_key(i)))
            .count();
        (hits as f64 / probes as f64 <= target).then_some((p, f))
    })
}

fn bench_filters(c: &mut Criterion) {
    let leveldb = LevelDbBloom::new(BITS_PER_KEY);
    let local = CacheLocalBloom::new(BITS_PER_KEY);
    let fuse8 = BinaryFuse::fuse8();
    let fuse16 = BinaryFuse::fuse16();
    let ribbon = Ribbon::new(RIBBON_BITS_PER_KEY);
    // At least 1M absent probes for a rate good to about ±1 % of itself at 1 %; 16M for fuse16
    // (≈ 244 false positives, ±6 %).
    let probes = 1_000_000;

    eprintln!(
        "{:>9} {:<40} {:>8} {:>10} {:>7} {:>6}",
        "keys", "filter", "bits/key", "FP rate", "log2(1/FP)", "ratio"
    );
    for n in SIZES {
        let present = keys("user", n);
        let absent = keys("miss", n.max(probes));
        assert_eq!(absent_key(n - 1), absent[n - 1]);

        let ldb_filter = policy_build(&leveldb, &present);
        let local_filter = policy_build(&local, &present);
        let fast = fastbloom_build(&present);
        let fuse8_filter = policy_build(&fuse8, &present);
        let fuse16_filter = policy_build(&fuse16, &present);
        let ribbon_filter = policy_build(&ribbon, &present);
        report(n, "LevelDbBloom 10 b/k", &leveldb, &ldb_filter, probes);
        let local_fp = report(n, "CacheLocalBloom 10 b/k", &local, &local_filter, probes);
        let fast_hits = absent[..probes]
            .iter()
            .filter(|k| fast.contains(&xxh3_64(&k[..])))
            .count();
        row(
            n,
            &format!("fastbloom 0.9 10 b/k (k={})", fast.num_hashes()),
            fast.num_bits() as f64 / n as f64,
            fast_hits,
            probes,
        );
        let fuse8_fp = report(n, "BinaryFuse8", &fuse8, &fuse8_filter, probes);
        report(n, "BinaryFuse16", &fuse16, &fuse16_filter, 16 * probes);
        report(n, "Ribbon 7 b/k", &ribbon, &ribbon_filter, probes);
        match ribbon_for_rate(&present, probes, local_fp) {
            Some((p, f)) => {
                report(
                    n,
                    &format!("Ribbon at the bloom's rate ({} b/k)", p.bits_per_key()),
                    &p,
                    &f,
                    probes,
                );
                eprintln!(
                    "{n:>9}   Ribbon bytes / CacheLocalBloom bytes at its rate: {:.1} %",
                    100.0 * f.len() as f64 / local_filter.len() as f64
                );
            }
            None => eprintln!("{n:>9}   no Ribbon up to 10 b/k reaches {local_fp}"),
        }
        if n >= 1_000_000 {
            match bloom_bits_for(&present, &absent, fuse8_fp) {
                Some((bits, fp)) => eprintln!(
                    "{n:>9}   CacheLocalBloom at the fuse8 rate: {bits:.3} bits/key ({:.3} %); \
                     fuse8 uses {:.1} % of its bytes",
                    fp * 100.0,
                    100.0 * fuse8_filter.len() as f64 * 8.0 / n as f64 / bits,
                ),
                None => eprintln!("cache-local bloom: no bits/key up to 20 reaches {fuse8_fp}"),
            }
        }
        // Absent probes always cycle through 1M distinct keys: cycling through only 10k lets the
        // branch predictor learn where an early-exit probe stops (measured: fastbloom 4.7 ns
        // instead of 12.5), which flatters early-exit filters.
        let absent = &absent[..];

        let mut g = c.benchmark_group(format!("build/{n}"));
        g.throughput(Throughput::Elements(n as u64));
        if n >= 1_000_000 {
            g.sample_size(10);
        }
        g.bench_function("leveldb", |b| {
            b.iter(|| policy_build(&leveldb, black_box(&present)))
        });
        g.bench_function("cache_local", |b| {
            b.iter(|| policy_build(&local, black_box(&present)))
        });
        g.bench_function("fastbloom_xxh3", |b| {
            b.iter(|| fastbloom_build(black_box(&present)))
        });
        g.bench_function("binary_fuse8", |b| {
            b.iter(|| policy_build(&fuse8, black_box(&present)))
        });
        g.bench_function("binary_fuse16", |b| {
            b.iter(|| policy_build(&fuse16, black_box(&present)))
        });
        g.bench_function("ribbon", |b| {
            b.iter(|| policy_build(&ribbon, black_box(&present)))
        });
        g.finish();

        for (what, probe_keys) in [("present", &present[..]), ("absent", absent)] {
            let mut g = c.benchmark_group(format!("probe_{what}/{n}"));
            g.bench_function(BenchmarkId::from_parameter("leveldb"), |b| {
                probe_loop(b, probe_keys, |k| leveldb.may_match(&ldb_filter, k))
            });
            g.bench_function(BenchmarkId::from_parameter("cache_local"), |b| {
                probe_loop(b, probe_keys, |k| local.may_match(&local_filter, k))
            });
            // The Get path hashes a key once and reuses the hash for every table it checks.
            let hashes: Vec<u64> = probe_keys
                .iter()
                .map(|k| CacheLocalBloom::hash(k))
                .collect();
            g.bench_function(BenchmarkId::from_parameter("cache_local_prehashed"), |b| {
                probe_loop(b, &hashes, |&h| local.may_match_hash(&local_filter, h))
            });
            g.bench_function(BenchmarkId::from_parameter("fastbloom_xxh3"), |b| {
                probe_loop(b, probe_keys, |k| fast.contains(&xxh3_64(k)))
            });
            g.bench_function(BenchmarkId::from_parameter("binary_fuse8"), |b| {
                probe_loop(b, probe_keys, |k| fuse8.may_match(&fuse8_filter, k))
            });
            g.bench_function(BenchmarkId::from_parameter("binary_fuse8_prehashed"), |b| {
                probe_loop(b, &hashes, |&h| fuse8.may_match_hash(&fuse8_filter, h))
            });
            g.bench_function(BenchmarkId::from_parameter("binary_fuse16"), |b| {
                probe_loop(b, probe_keys, |k| fuse16.may_match(&fuse16_filter, k))
            });
            g.bench_function(BenchmarkId::from_parameter("ribbon"), |b| {
                probe_loop(b, probe_keys, |k| ribbon.may_match(&ribbon_filter, k))
            });
            g.bench_function(BenchmarkId::from_parameter("ribbon_prehashed"), |b| {
                probe_loop(b, &hashes, |&h| ribbon.may_match_hash(&ribbon_filter, h))
            });
            g.finish();
        }
        #[cfg(feature = "__bench-internals")]
        if n >= 1_000_000 {
            bench_line_probes(c, n, &local, &local_filter, absent);
        }
    }
}

/// Keys per `may_match_batch` call in `probe_absent_line` (a `multi_get`'s keys for one table).
#[cfg(feature = "__bench-internals")]
const BATCH: usize = 32;

/// Times one `batch` call per iteration over the next [`BATCH`] of `probes`, cycling; reports the
/// time per key.
#[cfg(feature = "__bench-internals")]
fn batch_loop<F: FnMut(&[FilterProbe<'_>], &mut [bool])>(
    c: &mut criterion::Bencher<'_>,
    probes: &[FilterProbe<'_>],
    mut batch: F,
) {
    let runs: Vec<&[FilterProbe<'_>]> = probes.chunks_exact(BATCH).collect();
    let mut out = [false; BATCH];
    let mut i = 0;
    c.iter_custom(|iters| {
        let start = Instant::now();
        for _ in 0..iters {
            batch(black_box(runs[i]), &mut out);
            black_box(&out);
            i += 1;
            if i == runs.len() {
                i = 0;
            }
        }
        start.elapsed() / BATCH as u32
    });
}

/// `probe_absent_line/{n}`: the cache-local bloom's absent probe, portable against AVX2, one key
/// at a time and in batches (see the file's header).
#[cfg(feature = "__bench-internals")]
fn bench_line_probes(
    c: &mut Criterion,
    n: usize,
    local: &CacheLocalBloom,
    filter: &[u8],
    absent: &[Key],
) {
    let hashes: Vec<u64> = absent.iter().map(|k| CacheLocalBloom::hash(k)).collect();
    let probes: Vec<FilterProbe<'_>> = absent
        .iter()
        .map(|k| {
            let p = FilterProbe::new(k);
            // Prehashed, as the single-key entries are.
            p.xxh3_64();
            p
        })
        .collect();
    let avx2 = bench_internals::cache_local_has_avx2();
    if !avx2 {
        eprintln!("probe_absent_line: no AVX2 on this CPU, the avx2 entries are skipped");
    }
    let mut g = c.benchmark_group(format!("probe_absent_line/{n}"));
    g.bench_function(BenchmarkId::from_parameter("portable"), |b| {
        probe_loop(b, &hashes, |&h| {
            bench_internals::cache_local_may_match_portable(filter, h)
        })
    });
    if avx2 {
        g.bench_function(BenchmarkId::from_parameter("avx2"), |b| {
            probe_loop(b, &hashes, |&h| {
                bench_internals::cache_local_may_match_avx2(filter, h)
            })
        });
    }
    g.bench_function(BenchmarkId::from_parameter("batch32_portable"), |b| {
        batch_loop(b, &probes, |run, out| {
            bench_internals::cache_local_may_match_batch_portable(filter, run, out)
        })
    });
    if avx2 {
        g.bench_function(BenchmarkId::from_parameter("batch32_avx2"), |b| {
            batch_loop(b, &probes, |run, out| {
                bench_internals::cache_local_may_match_batch_avx2(filter, run, out)
            })
        });
    }
    g.bench_function(BenchmarkId::from_parameter("batch32"), |b| {
        batch_loop(b, &probes, |run, out| {
            local.may_match_batch(filter, run, out)
        })
    });
    g.finish();
}

/// Sorted keys of a fixed head and a scrambled big-endian number, as range-filtered stores have.
fn range_keys(n: usize) -> Vec<Key> {
    let mut keys: Vec<Key> = (0..n as u64)
        .map(|i| {
            let mut k = [0u8; 16];
            k[..8].copy_from_slice(b"device42");
            // splitmix64 of i: distinct numbers spread over the whole 64-bit space.
            let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            k[8..].copy_from_slice(&(z ^ (z >> 31)).to_be_bytes());
            k
        })
        .collect();
    keys.sort_unstable();
    keys
}

/// Sorted `user:<id>:<field>` strings, three fields of each user (the workload runner's `strings`
/// keys): keys of varying lengths that share a separator.
fn string_keys(n: usize) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = (0..n as u64)
        .map(|i| {
            let mut z = (i / 3).wrapping_add(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            let field = ["name", "address", "last_login"][(i % 3) as usize];
            format!("user:{}:{field}", (z ^ (z >> 31)) % 1_000_000_000_000).into_bytes()
        })
        .collect();
    keys.sort_unstable();
    keys
}

/// A range filter builder of either format, for the build benchmarks.
trait RangeFilterBuilder {
    fn add(&mut self, key: &[u8]);
    fn bytes(&mut self) -> Vec<u8>;
}

impl RangeFilterBuilder for SegmentedGrafiteBuilder {
    fn add(&mut self, key: &[u8]) {
        self.add_key(key);
    }
    fn bytes(&mut self) -> Vec<u8> {
        self.finish()
    }
}

impl RangeFilterBuilder for GrafiteBuilder {
    fn add(&mut self, key: &[u8]) {
        self.add_key(key);
    }
    fn bytes(&mut self) -> Vec<u8> {
        self.finish()
    }
}

/// The filter `builder` builds over `keys`.
fn build_range_filter<K: AsRef<[u8]>>(mut builder: impl RangeFilterBuilder, keys: &[K]) -> Vec<u8> {
    for k in keys {
        builder.add(k.as_ref());
    }
    black_box(builder.bytes())
}

fn bench_range_filter_build(c: &mut Criterion) {
    let mut g = c.benchmark_group("range_filter_build");
    let strings = string_keys(30_000);
    g.throughput(Throughput::Elements(strings.len() as u64));
    let id = |format: &str| BenchmarkId::new(format!("{format}-strings-20"), strings.len());
    g.bench_with_input(id("segmented"), &strings, |b, keys| {
        b.iter(|| build_range_filter(SegmentedGrafiteBuilder::new(20.0, 1 << 16), keys))
    });
    g.bench_with_input(id("single-window"), &strings, |b, keys| {
        b.iter(|| build_range_filter(GrafiteBuilder::new(20.0, 1 << 16), keys))
    });
    for n in [30_000usize, 1_000_000] {
        let keys = range_keys(n);
        g.throughput(Throughput::Elements(n as u64));
        for bits in [20.0, 24.0] {
            let id = |format: &str| BenchmarkId::new(format!("{format}-{bits}"), n);
            g.bench_with_input(id("segmented"), &keys, |b, keys| {
                b.iter(|| build_range_filter(SegmentedGrafiteBuilder::new(bits, 1 << 16), keys))
            });
            g.bench_with_input(id("single-window"), &keys, |b, keys| {
                b.iter(|| build_range_filter(GrafiteBuilder::new(bits, 1 << 16), keys))
            });
        }
    }
    g.finish();
}

fn config() -> Criterion {
    // Modest times: the whole run takes a few minutes on two cores.
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_filters, bench_range_filter_build
}
criterion_main!(benches);
