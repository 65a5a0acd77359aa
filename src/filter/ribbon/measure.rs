//! Measurements behind the Ribbon filter's choices, printed rather than asserted: where the bloom
//! fallback pays, phase timings of construction, and interleaved probe timings against the
//! cache-local bloom (the minimum of 15 runs each: steadier than criterion on a shared machine).
//! Run with `cargo test --release --lib ribbon::measure -- --ignored --nocapture --test-threads 1`.

use super::*;
use crate::filter::test_support::{fp_hits, key};
use std::time::Instant;

fn min_ns<R>(n: u64, mut f: impl FnMut() -> R) -> f64 {
    (0..15)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed().as_nanos() as f64 / n as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// For small key sets, a Ribbon (forced) beside the cache-local bloom at the same bits/key: bits
/// per key spent (trailer included), measured false positive rate over 200 filters of `n` keys
/// (400k absent probes in all), and the ratio of the two to the space limit `log2(1/rate)`. The
/// fallback threshold is the key count from which the Ribbon's ratio is the lower at every
/// bits/key.
#[test]
#[ignore]
fn fallback_threshold() {
    let filters = 200u64;
    let probes_each = 2000u64;
    eprintln!("keys  bits/key | ribbon: bits/key  FP  ratio | bloom: bits/key  FP  ratio");
    for bits in [4.0, 7.0, 10.0, 15.0, 20.0] {
        let ribbon = Ribbon::new(bits).with_min_ribbon_keys(1);
        let bloom = CacheLocalBloom::new(bits);
        for n in [
            32u64, 64, 100, 128, 150, 175, 200, 225, 248, 300, 400, 512, 1000,
        ] {
            let mut rows = [(0usize, 0u64), (0, 0)];
            for set in 0..filters {
                let present = format!("s{set}:");
                for (row, policy) in rows
                    .iter_mut()
                    .zip([&ribbon as &dyn FilterPolicy, &bloom as &dyn FilterPolicy])
                {
                    let mut b = policy.builder();
                    for i in 0..n {
                        b.add_key(&key(&present, i));
                    }
                    let f = b.finish();
                    row.0 += f.len();
                    // Absent keys differ per filter, so the rate averages over key sets.
                    row.1 += (0..probes_each)
                        .filter(|&i| policy.may_match(&f, &key(&format!("a{set}:"), i)))
                        .count() as u64;
                }
            }
            let cell = |(bytes, hits): (usize, u64)| {
                let bpk = bytes as f64 * 8.0 / (n * filters) as f64;
                let fp = hits as f64 / (probes_each * filters) as f64;
                let limit = theory::space_limit_bits_per_key(fp);
                format!("{bpk:7.2} {:8.4}% {:6.3}", fp * 100.0, bpk / limit)
            };
            eprintln!("{n:5} {bits:5} | {} | {}", cell(rows[0]), cell(rows[1]));
        }
    }
}

/// Measured false positive rates beside theory, and bits/key against the space limit, for the
/// key counts of the benchmarks.
#[test]
#[ignore]
fn rates_and_space() {
    for n in [10_000u64, 20_000, 100_000, 1_000_000] {
        for bits in [7.0, 8.0, 10.0] {
            let p = Ribbon::new(bits);
            let f = crate::filter::test_support::build(&p, "present:", n);
            let probes = 4_000_000;
            let fp = fp_hits(&p, &f, probes) as f64 / probes as f64;
            let spent = f.len() as f64 * 8.0 / n as f64;
            eprintln!(
                "n={n} bits={bits}: spent {spent:.3} bits/key, FP {:.4}% (theory {:.4}%), \
                 ratio to limit {:.3}",
                fp * 100.0,
                p.theoretical_fp_rate_for(n as usize) * 100.0,
                spent / theory::space_limit_bits_per_key(fp)
            );
        }
    }
}

#[test]
#[ignore]
fn phases() {
    for n in [10_000u64, 1_000_000] {
        let hashes: Vec<u64> = (0..n)
            .map(|i| Ribbon::hash(format!("user{i:012}").as_bytes()))
            .collect();
        let p = Ribbon::new(7.0);
        let layout = layout_for(n as usize, p.millibits).unwrap();
        let mask = solution::column_mask(layout.upper_columns());
        let mut s = Scratch::default();
        let raw = raw_seed(0);
        let t_sort = min_ns(n, || {
            s.seeded.clear();
            s.seeded.extend(hashes.iter().map(|&h| seeded(h, raw)));
            sort_dedup(&mut s.seeded, &mut s.spare, &mut s.buckets);
        });
        let t_band = min_ns(n, || {
            s.banding.reset(layout.slots());
            s.seeded.iter().all(|&sh| {
                let e = equation(sh, layout.num_starts());
                s.banding.add(e.start, e.coefficients, e.result & mask)
            })
        });
        let t_solve = min_ns(n, || s.banding.solve(&layout));
        let t_all = min_ns(n, || build(&p, &hashes, &mut s, MAX_SEEDS));
        let bloom = CacheLocalBloom::new(10.0);
        let t_bloom = min_ns(n, || bloom.filter_from_hashes(&hashes));
        eprintln!(
            "n={n}: seed+sort {t_sort:.1}, banding {t_band:.1}, back-substitution {t_solve:.1}, \
             build {t_all:.1} ns/key (cache-local bloom from hashes: {t_bloom:.1})"
        );
    }
}

#[test]
#[ignore]
fn interleaved_probes() {
    for n in [10_000u64, 100_000, 1_000_000] {
        let present: Vec<u64> = (0..n).map(|i| Ribbon::hash(&key("present:", i))).collect();
        let absent: Vec<u64> = (0..1_000_000u64)
            .map(|i| Ribbon::hash(&key("absent:", i)))
            .collect();
        let bloom = CacheLocalBloom::new(10.0);
        let ribbon = Ribbon::new(7.0);
        let bf = bloom.filter_from_hashes(&present);
        let rf = build(&ribbon, &present, &mut Scratch::default(), MAX_SEEDS).0;
        let count = absent.len() as u64;
        let (mut tb, mut tr) = (f64::INFINITY, f64::INFINITY);
        let (mut tbb, mut trb) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..5 {
            tb = tb.min(min_ns(count, || {
                absent
                    .iter()
                    .filter(|&&h| bloom.may_match_hash(&bf, h))
                    .count()
            }));
            tr = tr.min(min_ns(count, || {
                absent
                    .iter()
                    .filter(|&&h| ribbon.may_match_hash(&rf, h))
                    .count()
            }));
            // The filter passed through `black_box`, so that its trailer is read for each probe
            // as in a store, where each probe may be of another filter.
            tbb = tbb.min(min_ns(count, || {
                absent
                    .iter()
                    .filter(|&&h| bloom.may_match_hash(std::hint::black_box(&bf), h))
                    .count()
            }));
            trb = trb.min(min_ns(count, || {
                absent
                    .iter()
                    .filter(|&&h| ribbon.may_match_hash(std::hint::black_box(&rf), h))
                    .count()
            }));
        }
        eprintln!(
            "n={n}: absent probes, prehashed: bloom 10 b/k {tb:.1} ns ({} B), ribbon 7 b/k \
             {tr:.1} ns ({} B), ratio {:.2}; filters behind black_box: {tbb:.1} and {trb:.1} \
             ns, ratio {:.2}",
            bf.len(),
            rf.len(),
            tr / tb,
            trb / tbb
        );
    }
}

/// Absent-key probes with the key hashed, the filter behind `black_box` (as the criterion
/// benchmark does it), bloom and Ribbon interleaved, the best of 5 × 15 runs.
#[test]
#[ignore]
fn hashed_probes() {
    let absent: Vec<[u8; 16]> = (0..1_000_000u64)
        .map(|i| {
            let mut k = [0u8; 16];
            k.copy_from_slice(format!("miss{i:012}").as_bytes());
            k
        })
        .collect();
    for n in [10_000u64, 100_000, 1_000_000] {
        let present: Vec<u64> = (0..n).map(|i| Ribbon::hash(&key("present:", i))).collect();
        let bloom = CacheLocalBloom::new(10.0);
        let ribbon = Ribbon::new(7.0);
        let bf = bloom.filter_from_hashes(&present);
        let rf = build(&ribbon, &present, &mut Scratch::default(), MAX_SEEDS).0;
        let count = absent.len() as u64;
        let (mut tb, mut tr) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..5 {
            tb = tb.min(min_ns(count, || {
                absent
                    .iter()
                    .filter(|k| bloom.may_match(std::hint::black_box(&bf), &k[..]))
                    .count()
            }));
            tr = tr.min(min_ns(count, || {
                absent
                    .iter()
                    .filter(|k| ribbon.may_match(std::hint::black_box(&rf), &k[..]))
                    .count()
            }));
        }
        eprintln!(
            "n={n}: absent probes, hashed: bloom 10 b/k {tb:.1} ns, ribbon 7 b/k {tr:.1} ns, \
             ratio {:.2}",
            tr / tb
        );
    }
}

/// The query's two ways of taking column parities, portable and SSE2, side by side on one
/// filter: prehashed absent probes, the best of 5 × 15 runs each, alternating; at 7 bits/key
/// (seven columns) and 10 (ten: two groups).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[test]
#[ignore]
fn portable_and_sse2_probes() {
    use super::portable::Portable;
    use super::sse2::Sse2;
    let absent: Vec<u64> = (0..1_000_000u64)
        .map(|i| Ribbon::hash(&key("absent:", i)))
        .collect();
    for (n, bits) in [10_000u64, 100_000, 1_000_000]
        .into_iter()
        .flat_map(|n| [(n, 7.0), (n, 10.0)])
    {
        let present: Vec<u64> = (0..n).map(|i| Ribbon::hash(&key("present:", i))).collect();
        let f = build(
            &Ribbon::new(bits),
            &present,
            &mut Scratch::default(),
            MAX_SEEDS,
        )
        .0;
        let Parsed::Ribbon(view) = parse(&f) else {
            panic!("not a Ribbon");
        };
        let count = absent.len() as u64;
        let (mut portable, mut sse2) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..5 {
            portable = portable.min(min_ns(count, || {
                let view = std::hint::black_box(&view);
                absent
                    .iter()
                    .filter(|&&h| view.contains_with::<Portable>(h))
                    .count()
            }));
            sse2 = sse2.min(min_ns(count, || {
                let view = std::hint::black_box(&view);
                absent
                    .iter()
                    .filter(|&&h| view.contains_with::<Sse2>(h))
                    .count()
            }));
        }
        eprintln!(
            "n={n}: absent probes, prehashed, {bits} b/k: portable {portable:.1} ns, SSE2 {sse2:.1} ns, \
             portable / SSE2 {:.2}",
            portable / sse2
        );
    }
}
