//! The Ribbon filter's tests: sizing, format, construction, queries, the bloom fallback, garbage
//! bytes.

use super::banding::MIN_SLOTS;
use super::portable::parities8;
use super::solution::{column_mask, column_parities_of, ColumnParities};
use super::*;
use crate::filter::test_support::{build as build_keys, fp_hits, key, xorshift};
use crate::filter::LevelDbBloom;

/// A policy that builds a Ribbon for any non-empty key set (no small-set fallback).
fn always_ribbon(bits_per_key: f64) -> Ribbon {
    Ribbon::new(bits_per_key).with_min_ribbon_keys(1)
}

fn sub_impl(filter: &[u8]) -> u8 {
    filter[filter.len() - 4]
}

fn hashes(prefix: &str, n: u64) -> Vec<u64> {
    (0..n).map(|i| Ribbon::hash(&key(prefix, i))).collect()
}

#[test]
fn policy_basics() {
    let p = Ribbon::new(7.0);
    assert_eq!(p.name(), "siftdb.Ribbon128");
    assert_eq!(p.bits_per_key(), 7.0);
    assert_eq!(Ribbon::new(0.2).bits_per_key(), 1.0);
    assert_eq!(Ribbon::new(f64::NAN).bits_per_key(), 1.0);
    assert_eq!(Ribbon::new(-3.0).bits_per_key(), 1.0);
    assert_eq!(Ribbon::new(100.0).bits_per_key(), 64.0);
    assert_eq!(Ribbon::new(f64::INFINITY).bits_per_key(), 64.0);
    let other = p.with_bits_per_key(9.25).unwrap();
    assert_eq!(other.name(), p.name());
    assert_eq!(other.bits_per_key(), 9.25);
    // 7 bits/key over ≈ 1.03 slots per key: about 6.8 result bits, ≈ 0.9 %.
    let t = p.theoretical_fp_rate(7.0).unwrap();
    assert!((0.008..0.011).contains(&t), "{t}");
    // Every extra bit per key about halves it.
    let t8 = p.theoretical_fp_rate(8.0).unwrap();
    assert!((0.45..0.56).contains(&(t8 / t)), "{t8} / {t}");
    assert_eq!(Ribbon::hash(b"apple"), CacheLocalBloom::hash(b"apple"));
    assert_eq!(p.bits_per_key_for(0), None);
    let b = p.bits_per_key_for(1_000_000).unwrap();
    assert!((7.0..7.001).contains(&b), "{b}");
    assert!(p.builds_ribbon_for(MIN_RIBBON_KEYS) && !p.builds_ribbon_for(MIN_RIBBON_KEYS - 1));
    assert!(!p.builds_ribbon_for(MAX_RIBBON_KEYS + 1));
}

#[test]
fn slots_follow_the_measured_table() {
    assert_eq!(slots_for_keys(1), MIN_SLOTS);
    assert_eq!(slots_for_keys(248), 256);
    // Just past 2^8's figure: interpolated towards 2^9, rounded up to whole blocks.
    assert_eq!(slots_for_keys(250), 384);
    // 10k: between 2^13 (8000.39 keys) and 2^14 (15966.6): 8192 · 1.2509 = 10247.1 → 10368.
    assert_eq!(slots_for_keys(10_000), 10_368);
    // 1M: past the table, 2^19 · (1 + (10^6 − K19) / (K20 − K19)) with Kk = 2^k / (1.03609
    // + 0.0038 (k − 17)): 1,047,491 → 1,047,552.
    assert_eq!(slots_for_keys(1_000_000), 1_047_552);
    let mut last = 0;
    for n in (0..3_000_000u64).step_by(997) {
        let s = slots_for_keys(n);
        assert!(s >= last && s.is_multiple_of(128) && s >= n, "n = {n}: {s}");
        last = s;
    }
    // Slots per key: about 1.02–1.05 from 1k to 1M keys, growing slowly beyond (1.06 at 10M).
    for n in [1_000u64, 10_000, 100_000, 1_000_000, 10_000_000] {
        let r = slots_for_keys(n) as f64 / n as f64;
        assert!((1.01..1.065).contains(&r), "n = {n}: {r}");
    }
}

#[test]
fn layout_mixes_column_counts() {
    // 65 segments over 10 blocks: 5 blocks of 6 columns, then 5 of 7.
    let l = Layout::new(10, 65).unwrap();
    assert_eq!((l.upper_columns(), l.segments(), l.slots()), (7, 65, 1280));
    assert_eq!(l.num_starts(), 1280 - 127);
    let cols: Vec<u32> = (0..10).map(|b| l.columns_of(b)).collect();
    assert_eq!(cols, [6, 6, 6, 6, 6, 7, 7, 7, 7, 7]);
    let firsts: Vec<usize> = (0..10).map(|b| l.first_segment_of(b)).collect();
    assert_eq!(firsts, [0, 6, 12, 18, 24, 30, 37, 44, 51, 58]);
    // 640 of 1153 starts see 2^-6, the rest 2^-7.
    let lower = 640.0 / 1153.0;
    let want = lower / 64.0 + (1.0 - lower) / 128.0;
    assert!((l.fp_rate() - want).abs() < 1e-15);
    // Whole columns: every block alike.
    let even = Layout::new(4, 28).unwrap();
    assert!((0..4).all(|b| even.columns_of(b) == 7));
    assert_eq!(even.fp_rate(), 1.0 / 128.0);
    // Zero segments: no columns, everything matches. Too many columns, no blocks: rejected.
    assert_eq!(Layout::new(3, 0).unwrap().fp_rate(), 1.0);
    assert!(Layout::new(2, 129).is_none());
    assert!(Layout::new(2, 128).is_some());
    assert!(Layout::new(0, 0).is_none());
    assert!(Layout::new(1 << 24, 1).is_none());
    assert_eq!(column_mask(0), 0);
    assert_eq!(column_mask(7), 0x7f);
    assert_eq!(column_mask(64), u64::MAX);
    // The layout a trailer states: consistent only with upper = ceil(segments / blocks).
    assert_eq!(Layout::stored(10, 65, 7), Some(l));
    assert_eq!(Layout::stored(10, 65, 8), None);
    assert_eq!(Layout::stored(10, 65, 6), None);
    assert_eq!(
        Layout::stored(10, 70, 7),
        Some(Layout::new(10, 70).unwrap())
    );
    assert_eq!(Layout::stored(3, 0, 0), Layout::new(3, 0));
    assert_eq!(Layout::stored(2, 130, 65), None);
    assert_eq!(Layout::stored(0, 0, 0), None);
}

#[test]
fn eight_parities_at_once() {
    let mut next = xorshift();
    for round in 0..10_000 {
        let mut words = [0u64; 8];
        for (k, w) in words.iter_mut().enumerate() {
            // Random words, and sparse ones whose parity is often 0.
            *w = if round % 3 == k as u64 % 3 {
                next() & next() & next()
            } else {
                next()
            };
        }
        let want = words.iter().enumerate().fold(0u64, |acc, (k, &w)| {
            acc | u64::from(w.count_ones() & 1) << k
        });
        assert_eq!(parities8(&words), want, "{words:x?}");
    }
    assert_eq!(parities8(&[0; 8]), 0);
    assert_eq!(parities8(&[1; 8]), 0xff);
    assert_eq!(parities8(&[u64::MAX; 8]), 0);
}

/// Column `j`'s parity by the definition: the 128-bit dot product's bit count.
fn column_parities_by_definition(here: &[u8], next: &[u8], in_here: u128, in_next: u128) -> u64 {
    let segment = |b: &[u8], j: usize| {
        u128::from_le_bytes(
            b[j * SEGMENT_BYTES..(j + 1) * SEGMENT_BYTES]
                .try_into()
                .unwrap(),
        )
    };
    (0..here.len() / SEGMENT_BYTES).fold(0, |acc, j| {
        let dot = (segment(here, j) & in_here) ^ (segment(next, j) & in_next);
        acc | u64::from(dot.count_ones() & 1) << j
    })
}

/// `P`'s parities for `c` columns, both ways it has: by constant count (up to 16) and by any
/// count.
fn column_parities_both_ways<P: ColumnParities>(
    c: u32,
    here: &[u8],
    next: &[u8],
    in_here: u128,
    in_next: u128,
) -> [Option<u64>; 2] {
    let by_constant = column_parities_of::<P>(c, c, here, next, in_here, in_next);
    [
        by_constant,
        P::many_column_parities(here, next, in_here, in_next, c),
    ]
}

/// The query's parities for `c` columns, every way this build has of computing them: portable
/// and (on x86-64) SSE2.
fn column_parities_every_way(
    c: u32,
    here: &[u8],
    next: &[u8],
    in_here: u128,
    in_next: u128,
) -> Vec<Option<u64>> {
    #[allow(unused_mut)] // Nothing is added off x86-64.
    let mut ways =
        column_parities_both_ways::<super::portable::Portable>(c, here, next, in_here, in_next)
            .to_vec();
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    ways.extend(column_parities_both_ways::<super::sse2::Sse2>(
        c, here, next, in_here, in_next,
    ));
    ways
}

#[test]
fn query_parities_agree_with_the_definition() {
    let mut rand = xorshift();
    for round in 0..20_000u32 {
        let c = 1 + round % 64;
        let len = c as usize * SEGMENT_BYTES;
        let bytes =
            |rand: &mut dyn FnMut() -> u64| -> Vec<u8> { (0..len).map(|_| rand() as u8).collect() };
        let (here, next) = (bytes(&mut rand), bytes(&mut rand));
        // Masks as the query makes them: a row's coefficients shifted by its offset in the block.
        let coefficients = (u128::from(rand()) << 64 | u128::from(rand())) | 1;
        let offset = rand() as u32 % 128;
        let in_here = coefficients << offset;
        let in_next = (coefficients >> 1) >> (127 - offset);
        let want = column_parities_by_definition(&here, &next, in_here, in_next);
        let mask = column_mask(c);
        for (way, got) in column_parities_every_way(c, &here, &next, in_here, in_next)
            .into_iter()
            .enumerate()
        {
            assert_eq!(got.map(|g| g & mask), Some(want), "way {way}, {c} columns");
        }
        // Short segments answer None, never a wrong bit or a panic.
        let short = &here[..len - 1];
        for got in column_parities_every_way(c, short, &next, in_here, in_next) {
            assert_eq!(got, None, "{c} columns, one byte short");
        }
    }
}

/// The whole query, portable and SSE2, gives the same answer on real filters at any bits/key:
/// whole and fractional column counts, up to sixteen columns (the constant-count path) and beyond.
#[test]
fn portable_and_sse2_queries_agree() {
    for bits in [1.0, 3.5, 7.0, 8.0, 8.3, 9.7, 16.0, 16.6, 33.3, 64.0] {
        let f = build_keys(&always_ribbon(bits), "present:", 3_000);
        let Parsed::Ribbon(view) = parse(&f) else {
            panic!("not a Ribbon at {bits} bits/key");
        };
        for h in hashes("present:", 3_000)
            .into_iter()
            .chain(hashes("absent:", 30_000))
        {
            let portable = view.contains_with::<super::portable::Portable>(h);
            #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
            assert_eq!(
                portable,
                view.contains_with::<super::sse2::Sse2>(h),
                "{bits} bits/key, hash {h:x}"
            );
            assert_eq!(portable, view.contains(h));
        }
    }
}

#[test]
fn layout_and_trailer() {
    let p = Ribbon::new(7.0);
    let f = build_keys(&p, "k", 10_000);
    // round(10,000 · 7 / 128) = 547 segments; 10,368 slots = 81 blocks.
    assert_eq!(f.len(), 547 * 16 + 8);
    let t = &f[f.len() - 8..];
    // 547 segments over 81 blocks: 6.75 columns a block, so 7 in the last blocks.
    assert_eq!(&t[..5], &[81, 0, 0, 0xFF, 2]);
    assert_eq!(&t[6..], &[7, 0]);
    assert_eq!(p.probes_in(&f), Some(7));
    assert_eq!(p.probes_in(&build_keys(&p, "k", 0)), None);
    assert_eq!(sub_impl(&f), 2);
    let layout = Layout::new(81, 547).unwrap();
    assert_eq!(layout.upper_columns(), 7);
    // The filter equation, bit by bit, for every present key: the XOR over the key's
    // coefficients of the solution rows gives its result bits in each of its block's columns.
    let solution = &f[..547 * 16];
    let bit_at = |segment: usize, k: u32| (solution[segment * 16 + k as usize / 8] >> (k % 8)) & 1;
    let seed = raw_seed(t[5]);
    for i in 0..10_000 {
        let e = equation(
            seeded(Ribbon::hash(&key("k", i)), seed),
            layout.num_starts(),
        );
        let block = e.start / 128;
        let columns = layout.columns_of(block);
        for j in 0..columns {
            let mut x = 0u8;
            for k in 0..128u32 {
                if (e.coefficients >> k) & 1 == 1 {
                    let slot = e.start + k;
                    let segment = layout.first_segment_of(slot / 128) + j as usize;
                    x ^= bit_at(segment, slot % 128);
                }
            }
            assert_eq!(u64::from(x), (e.result >> j) & 1, "key {i} column {j}");
        }
    }
}

#[test]
fn no_false_negatives_at_any_size() {
    let sizes = [
        1u64, 2, 3, 10, 64, 100, 199, 200, 201, 248, 249, 256, 257, 1000, 4096, 10_000, 100_000,
        1_000_000,
    ];
    for n in sizes {
        let policies = if n <= 100_000 {
            vec![Ribbon::new(7.0), always_ribbon(7.0), always_ribbon(1.0)]
        } else {
            vec![Ribbon::new(7.0)]
        };
        for p in policies {
            let f = build_keys(&p, "present:", n);
            let ribbon = p.builds_ribbon_for(n as usize);
            assert_eq!(sub_impl(&f), if ribbon { 2 } else { 0 }, "n = {n}");
            for i in 0..n {
                let k = key("present:", i);
                assert!(
                    p.may_match(&f, &k),
                    "n = {n}, {:?}: key {i}",
                    p.min_ribbon_keys
                );
                assert!(p.may_match_probe(&f, &FilterProbe::new(&k)));
            }
        }
    }
}

#[test]
fn duplicates_are_redundant_equations() {
    let p = Ribbon::new(8.0);
    let n = 50_000u64;
    let mut b = p.builder();
    for i in 0..n {
        b.add_key(&key("present:", i));
        if i % 3 == 0 {
            // Another version of the same user key: dropped on the spot.
            b.add_key(&key("present:", i));
        }
    }
    assert_eq!(b.num_keys(), (n + n.div_ceil(3)) as usize);
    assert_eq!(b.estimated_len(), build_keys(&p, "present:", n).len());
    // Non-consecutive duplicates: kept by the builder (and sized for), dropped by the solver.
    for i in 0..1000 {
        b.add_key(&key("present:", i));
        b.add_key(&key("present:", 5));
    }
    let len = b.estimated_len();
    let f = b.finish();
    assert_eq!(f.len(), len, "estimated_len is exact");
    assert_eq!(sub_impl(&f), 2, "solved despite the duplicates");
    for i in 0..n {
        assert!(p.may_match(&f, &key("present:", i)), "key {i}");
    }
    // One key many times, and a pair repeated: tiny Ribbons of repeated equations.
    let p = always_ribbon(10.0);
    for reps in [1, 2, 1000] {
        let mut b = p.builder();
        for r in 0..reps {
            b.add_key(b"same");
            if r % 2 == 1 {
                b.add_key(b"other");
            }
        }
        let f = b.finish();
        assert_eq!(sub_impl(&f), 2);
        assert!(p.may_match(&f, b"same"));
        assert!(p.may_match(&f, b"other") || reps == 1);
    }
    // The banding itself: a repeated equation is accepted, a contradicting one refused.
    let mut banding = Banding::default();
    banding.reset(256);
    assert!(banding.add(5, 0b1011, 0b10));
    assert!(banding.add(5, 0b1011, 0b10));
    assert!(!banding.add(5, 0b1011, 0b11));
    // The sum of two banded equations, with the sum of their results: redundant.
    assert!(banding.add(6, 0b11, 0b1));
    assert!(banding.add(5, 0b1011 ^ 0b110, 0b10 ^ 0b1));
    assert!(!banding.add(5, 0b1011 ^ 0b110, 0b10));
}

#[test]
fn more_equations_than_slots_cannot_be_banded() {
    let mut banding = Banding::default();
    banding.reset(256);
    let layout = Layout::new(2, 16).unwrap();
    let mut next = xorshift();
    let mut refused = false;
    for _ in 0..300 {
        let e = equation(next(), layout.num_starts());
        refused |= !banding.add(e.start, e.coefficients, e.result & 0xff);
    }
    assert!(refused, "300 random equations in 256 unknowns");
}

#[test]
fn fp_rate_follows_theory() {
    // Fractional and whole bits/key; 100k keys, 1M absent probes (σ ≈ 0.01 % at 1 %).
    for bits in [3.0, 5.0, 7.0, 7.5, 9.3, 12.0] {
        let p = Ribbon::new(bits);
        let n = 100_000;
        let f = build_keys(&p, "present:", n);
        let probes = 1_000_000;
        let hits = fp_hits(&p, &f, probes);
        let theory = p.theoretical_fp_rate_for(n as usize);
        let expected = theory * probes as f64;
        // Five standard deviations plus 3 % of theory.
        let tolerance = 5.0 * expected.sqrt() + 0.03 * expected;
        assert!(
            (hits as f64 - expected).abs() <= tolerance,
            "{bits} bits/key: {hits} of {probes}, theory {expected:.0} ± {tolerance:.0}"
        );
        // Within 10 % of the information-theoretic limit at the measured rate.
        let spent = f.len() as f64 * 8.0 / n as f64;
        let ratio = spent / theory::space_limit_bits_per_key(hits as f64 / probes as f64);
        assert!(ratio < 1.10, "{bits} bits/key: ratio {ratio}");
    }
}

#[test]
fn fractional_bits_per_key_are_spent() {
    let n = 20_000u64;
    let mut last_hits = u64::MAX;
    for millis in (6000..=8000).step_by(250) {
        let bits = f64::from(millis) / 1000.0;
        let p = Ribbon::new(bits);
        let f = build_keys(&p, "present:", n);
        // round(n · bits / 128) segments of 16 bytes, and the trailer.
        let segments = (n * millis as u64 + 64_000) / 128_000;
        assert_eq!(f.len() as u64, segments * 16 + 8, "{bits}");
        let spent = (f.len() - 8) as f64 * 8.0 / n as f64;
        assert!((spent - bits).abs() < 0.01, "{bits}: {spent}");
        // More bits, fewer false positives (400k probes: steps of 0.25 bits are ≈ 16 % apart,
        // ≥ 9σ at these rates).
        let hits = fp_hits(&p, &f, 400_000);
        assert!(hits < last_hits, "{bits}: {hits} not below {last_hits}");
        last_hits = hits;
    }
}

#[test]
fn extreme_bits_per_key() {
    let n = 5000;
    // 1 bit/key: under one column a block on average; about half of the absent keys match.
    let p = Ribbon::new(1.0);
    let f = build_keys(&p, "present:", n);
    assert!((0..n).all(|i| p.may_match(&f, &key("present:", i))));
    let hits = fp_hits(&p, &f, 20_000);
    assert!((9_000..=12_000).contains(&hits), "{hits}");
    // 64 bits/key: ≈ 62 columns; no absent key matches.
    let p = Ribbon::new(64.0);
    let f = build_keys(&p, "present:", n);
    let blocks = u32::from_le_bytes([f[f.len() - 8], f[f.len() - 7], f[f.len() - 6], 0]);
    let upper = Layout::new(blocks, ((f.len() - 8) / 16) as u64)
        .unwrap()
        .upper_columns();
    assert!((60..=64).contains(&upper), "{upper}");
    assert!((0..n).all(|i| p.may_match(&f, &key("present:", i))));
    assert_eq!(fp_hits(&p, &f, 20_000), 0);
}

#[test]
fn parameters_come_from_the_bytes() {
    let small = Ribbon::new(5.0);
    let large = Ribbon::new(15.0);
    for n in [100u64, 10_000] {
        // The bloom fallback (100 keys) and a Ribbon (10k).
        let f = build_keys(&small, "present:", n);
        for i in 0..n {
            assert!(large.may_match(&f, &key("present:", i)));
        }
        for i in 0..10_000 {
            let k = key("absent:", i);
            assert_eq!(large.may_match(&f, &k), small.may_match(&f, &k));
        }
    }
}

#[test]
fn empty_and_tiny_sets() {
    for p in [Ribbon::new(7.0), always_ribbon(7.0)] {
        let empty = build_keys(&p, "k", 0);
        assert_eq!(empty, vec![0, 0, 0, 0xFF, 2, 0, 0, 0]);
        assert!(!p.may_match(&empty, b"anything"));
        assert!(!p.may_match(&empty, b""));
        assert_eq!(p.theoretical_fp_rate_for(0), 0.0);
        let mut b = p.builder();
        b.add_key(b"");
        let f = b.finish();
        assert!(p.may_match(&f, b""));
    }
    // One key as a Ribbon: two blocks, round(7 / 128) = 0 segments, so no columns: it matches
    // everything, as its theory says.
    let f = build_keys(&always_ribbon(7.0), "k", 1);
    assert_eq!(f, vec![2, 0, 0, 0xFF, 2, 0, 0, 0]);
    assert!(always_ribbon(7.0).may_match(&f, b"anything"));
    assert_eq!(always_ribbon(7.0).theoretical_fp_rate_for(1), 1.0);
    // Eight keys at 64 bits/key: four segments, two columns in each of the two blocks, 1/4.
    let p = always_ribbon(64.0);
    let f = build_keys(&p, "k", 8);
    assert_eq!(f.len(), 4 * 16 + 8);
    assert!((0..8).all(|i| p.may_match(&f, &key("k", i))));
    assert_eq!(p.theoretical_fp_rate_for(8), 0.25);
    let hits = fp_hits(&p, &f, 8000);
    assert!((1700..=2300).contains(&hits), "{hits}");
}

#[test]
fn small_sets_fall_back_to_the_bloom() {
    for bits in [4.0, 7.0, 10.0, 15.5] {
        let p = Ribbon::new(bits);
        let bloom = CacheLocalBloom::new(bits);
        for n in [1u64, 10, 50, MIN_RIBBON_KEYS as u64 - 1] {
            let f = build_keys(&p, "present:", n);
            // Exactly the cache-local bloom's bytes at the same bits/key.
            assert_eq!(f, build_keys(&bloom, "present:", n), "{bits}, {n}");
            assert_eq!(p.probes_in(&f), Some(bloom.num_probes()));
            assert!((0..n).all(|i| p.may_match(&f, &key("present:", i))));
            for i in 0..1000 {
                let k = key("absent:", i);
                assert_eq!(p.may_match(&f, &k), bloom.may_match(&f, &k));
            }
            let t = p.theoretical_fp_rate_for(n as usize);
            assert!((t - bloom.theoretical_fp_rate_for(n as usize)).abs() < 1e-15);
        }
        let f = build_keys(&p, "present:", MIN_RIBBON_KEYS as u64);
        assert_eq!(sub_impl(&f), 2);
        let upper = u32::from(f[f.len() - 2]);
        assert_eq!(p.probes_in(&f), Some(upper));
        // 256 slots for 200 keys: about bits / 1.28 columns.
        assert!(f64::from(upper) >= (bits / 1.28).floor() && f64::from(upper) <= bits.ceil());
    }
}

#[test]
fn giving_up_falls_back_to_the_bloom() {
    let p = Ribbon::new(7.0);
    let h = hashes("k", 5000);
    let mut s = Scratch::default();
    let (f, built) = build(&p, &h, &mut s, 0);
    assert_eq!(built, Built::BloomGaveUp);
    assert_eq!(f, CacheLocalBloom::new(7.0).filter_from_hashes(&h));
    for i in 0..5000 {
        assert!(p.may_match(&f, &key("k", i)));
    }
    // The same keys, solved: the first seeds do it, and the bytes do not depend on the scratch.
    let (solved, built) = build(&p, &h, &mut s, MAX_SEEDS);
    assert!(
        matches!(built, Built::Ribbon { seed } if seed < 4),
        "{built:?}"
    );
    assert_eq!(solved, build(&p, &h, &mut Scratch::default(), MAX_SEEDS).0);
    assert_eq!(build(&p, &[], &mut s, MAX_SEEDS).1, Built::Empty);
    assert_eq!(build(&p, &h[..10], &mut s, MAX_SEEDS).1, Built::BloomBySize);
}

#[test]
fn seeds_rarely_fail() {
    // At most a one in 20 chance per seed: over 200 key sets of assorted sizes, a handful of
    // second seeds, and never a fallback.
    let p = Ribbon::new(7.0);
    let mut s = Scratch::default();
    let mut retries = 0;
    for set in 0..200u64 {
        let n = 200 + set * 37;
        let h = hashes(&format!("set{set}:"), n);
        match build(&p, &h, &mut s, MAX_SEEDS).1 {
            Built::Ribbon { seed } => retries += u32::from(seed),
            other => panic!("set {set}: {other:?}"),
        }
    }
    assert!(retries <= 40, "{retries} retries in 200 key sets");
}

#[test]
fn bytes_depend_only_on_the_key_set() {
    let p = Ribbon::new(6.5);
    let forward = build_keys(&p, "k", 5000);
    let mut b = p.builder();
    for i in (0..5000).rev() {
        b.add_key(&key("k", i));
    }
    assert_eq!(b.finish(), forward);
}

#[test]
fn one_builder_across_partitions() {
    let p = Ribbon::new(7.0);
    let mut b = p.builder();
    let mut filters = Vec::new();
    for (part, n) in [(0u64, 3000u64), (1, 1), (2, 0), (3, 50_000), (4, 700)] {
        let prefix = format!("part{part}:");
        for i in 0..n {
            b.add_key(&key(&prefix, i));
        }
        assert_eq!(b.num_keys(), n as usize);
        let len = b.estimated_len();
        let f = b.finish();
        assert_eq!(f.len(), len);
        assert_eq!(b.num_keys(), 0);
        assert_eq!(b.estimated_len(), TRAILER_LEN);
        filters.push((prefix, n, f));
    }
    for (prefix, n, f) in &filters {
        assert_eq!(
            f,
            &build_keys(&p, prefix, *n),
            "independent of earlier partitions"
        );
        for i in 0..*n {
            assert!(p.may_match(f, &key(prefix, i)));
        }
    }
    // A partition does not match another's keys more than the FP rate allows (≈ 1 %).
    let (_, _, big) = &filters[3];
    let other = (0..3000)
        .filter(|&i| p.may_match(big, &key("part0:", i)))
        .count();
    assert!(other <= 60, "{other}");
}

#[test]
fn unknown_or_damaged_bytes_may_match() {
    let p = Ribbon::new(7.0);
    let good = build_keys(&p, "k", 1000);
    let absent = (0..1000)
        .map(|i| key("absent:", i))
        .find(|k| !p.may_match(&good, k))
        .unwrap();
    let n = good.len();
    // Short, misaligned, cut.
    for bad in [
        &good[..4],
        &good[1..],
        &good[..n - 1],
        &good[..7],
        &good[n - 8..],
    ] {
        assert!(p.may_match(bad, &absent), "{} bytes", bad.len());
    }
    // Trailer bytes 3.. (marker, implementation, column count, reserved) changed: unknown. (The
    // block count and the seed only reshape or reseed the query, which the block checksum
    // guards.)
    for at in [3usize, 4, 6, 7] {
        for v in [0x00u8, 0x01, 0x03, 0x10, 0x80, 0xFE] {
            let mut bad = good.clone();
            if bad[n - 8 + at] == v || (at == 4 && v == 0) {
                continue;
            }
            bad[n - 8 + at] = v;
            assert!(p.may_match(&bad, &absent), "trailer byte {at} = {v:#x}");
        }
    }
    // More segments than 64 columns of the stated blocks; no blocks but a solution.
    let mut bad = good.clone();
    bad[n - 8..n - 5].copy_from_slice(&[1, 0, 0]);
    let mut many = vec![0u8; 65 * 16];
    many.extend_from_slice(&bad[n - 8..]);
    assert!(p.may_match(&many, &absent));
    bad[n - 8] = 0;
    assert!(p.may_match(&bad, &absent));
    // A Ribbon read by the blooms' readers: unknown to them, "maybe".
    assert!(CacheLocalBloom::new(10.0).may_match(&good, &absent));
    assert!(LevelDbBloom::new(10.0).may_match(&good, &absent));
    assert_eq!(CacheLocalBloom::new(10.0).probes_in(&good), None);
    // A binary fuse filter read by the Ribbon: unknown, "maybe".
    let fuse = build_keys(&crate::filter::BinaryFuse::fuse8(), "k", 1000);
    assert!((0..1000).all(|i| p.may_match(&fuse, &key("absent:", i))));
}

#[test]
fn garbage_does_not_panic() {
    let p = Ribbon::new(7.0);
    let mut next = xorshift();
    for len in 0..700usize {
        let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if len >= 8 && len % 2 == 0 {
            // A valid-looking trailer, often with a consistent shape, so that the query runs on
            // random segments and extreme block counts.
            let segments = (len - 8) / 16;
            let blocks: u32 = match next() % 4 {
                0 => (next() as u32) & 0xff_ffff,
                1 => 0xff_ffff,
                2 => (segments as u32).div_ceil(1 + (next() % 64) as u32).max(1),
                _ => 1 + (next() % 4) as u32,
            };
            let upper = if next().is_multiple_of(2) {
                (segments as u32).div_ceil(blocks) as u8
            } else {
                (next() % 70) as u8
            };
            let b = blocks.to_le_bytes();
            let t = len - 8;
            bytes[t..].copy_from_slice(&[b[0], b[1], b[2], 0xFF, 2, next() as u8, upper, 0]);
        }
        for k in [&b""[..], b"a", b"some key", &bytes] {
            let _ = p.may_match(&bytes, k);
            let _ = p.may_match_hash(&bytes, next());
            let _ = p.probes_in(&bytes);
        }
    }
}

#[test]
fn ribbons_spend_fewer_bits_than_the_bloom_for_its_rate() {
    // At the cache-local bloom's 10 bits/key rate (≈ 0.95 %), a Ribbon needs about 7.
    let n = 100_000;
    let bloom = CacheLocalBloom::new(10.0);
    let target = bloom.theoretical_fp_rate(10.0).unwrap();
    let bits = (600..1000)
        .map(|m| f64::from(m) / 100.0)
        .find(|&b| Ribbon::new(b).theoretical_fp_rate_for(n) <= target)
        .unwrap();
    assert!(bits < 7.5, "{bits}");
    let ribbon = Ribbon::new(bits);
    let (r, b) = (
        build_keys(&ribbon, "k", n as u64),
        build_keys(&bloom, "k", n as u64),
    );
    assert!(
        (r.len() as f64) < 0.75 * b.len() as f64,
        "{} vs {}",
        r.len(),
        b.len()
    );
}
