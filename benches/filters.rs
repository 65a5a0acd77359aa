//! Filter policy benchmarks: build cost per key, probe cost per query for present and absent keys,
//! at 10 bits/key on a 10k-key and a 1M-key filter, for siftdb's two bloom policies and the
//! `fastbloom` crate (fed the same xxh3 hash) as a reference, and for the binary fuse filters
//! (8- and 16-bit fingerprints, whose size follows from the key count). Each filter's measured
//! false positive rate and bits/key are printed to stderr once, at setup; at 1M keys so are the
//! bits/key the cache-local bloom needs to match the 8-bit fuse filter's rate.
//!
//! Run with `cargo bench --bench filters`; probe figures are per query, build figures per filter
//! (divide by the key count, or read the throughput line).

use std::hash::{BuildHasherDefault, Hasher};
use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fastbloom::BloomFilter;
use siftdb::filter::{BinaryFuse, CacheLocalBloom, LevelDbBloom};
use siftdb::FilterPolicy;
use xxhash_rust::xxh3::xxh3_64;

const BITS_PER_KEY: f64 = 10.0;
const SIZES: [usize; 2] = [10_000, 1_000_000];

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

/// The measured FP rate and bits/key of `filter` over `probes` absent keys, printed, and the rate
/// returned. 16-bit fingerprints need 16M probes (≈ 244 false positives) for a rate good to ±6 %.
fn report_fuse(policy: &BinaryFuse, filter: &[u8], n: usize, probes: usize) -> f64 {
    let hits = (0..probes)
        .filter(|&i| policy.may_match(filter, &absent_key(i)))
        .count();
    let fp = hits as f64 / probes as f64;
    let bits = filter.len() as f64 * 8.0 / n as f64;
    let limit = -fp.log2();
    eprintln!(
        "FP rate, {n} keys, {}: {} ({hits} of {} absent probes), {bits:.3} bits/key, \
         log2(1/FPR) = {limit:.3}, ratio to the limit {:.3}",
        policy.name(),
        rate(hits, probes),
        probes,
        bits / limit,
    );
    fp
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

fn bench_filters(c: &mut Criterion) {
    let leveldb = LevelDbBloom::new(BITS_PER_KEY);
    let local = CacheLocalBloom::new(BITS_PER_KEY);
    let fuse8 = BinaryFuse::fuse8();
    let fuse16 = BinaryFuse::fuse16();

    for n in SIZES {
        let present = keys("user", n);
        // At least 1M absent keys for the FP rate, so it is good to about ±0.01 %.
        let absent = keys("miss", n.max(1_000_000));

        let ldb_filter = policy_build(&leveldb, &present);
        let local_filter = policy_build(&local, &present);
        let fast = fastbloom_build(&present);
        let ldb_fp = absent
            .iter()
            .filter(|k| leveldb.may_match(&ldb_filter, &k[..]))
            .count();
        let local_fp = absent
            .iter()
            .filter(|k| local.may_match(&local_filter, &k[..]))
            .count();
        let fast_fp = absent
            .iter()
            .filter(|k| fast.contains(&xxh3_64(&k[..])))
            .count();
        eprintln!(
            "FP rate, {n} keys, {BITS_PER_KEY} bits/key, {} absent probes: leveldb {} (k={}, {} B) \
             | cache-local {} (k={}, {} B) | fastbloom {} (k={}, {} B)",
            absent.len(),
            rate(ldb_fp, absent.len()),
            leveldb.num_probes(),
            ldb_filter.len(),
            rate(local_fp, absent.len()),
            local.num_probes(),
            local_filter.len(),
            rate(fast_fp, absent.len()),
            fast.num_hashes(),
            fast.num_bits() / 8,
        );
        assert_eq!(absent_key(n - 1), absent[n - 1]);
        let fuse8_filter = policy_build(&fuse8, &present);
        let fuse16_filter = policy_build(&fuse16, &present);
        let fuse8_fp = report_fuse(&fuse8, &fuse8_filter, n, absent.len());
        report_fuse(&fuse16, &fuse16_filter, n, 16_000_000);
        if n >= 1_000_000 {
            match bloom_bits_for(&present, &absent, fuse8_fp) {
                Some((bits, fp)) => eprintln!(
                    "cache-local bloom at the fuse8 rate ({}): {bits:.3} bits/key ({:.3} %); \
                     fuse8 uses {:.1} % of its bytes",
                    rate((fuse8_fp * absent.len() as f64) as usize, absent.len()),
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
            g.finish();
        }
    }
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
    targets = bench_filters
}
criterion_main!(benches);
