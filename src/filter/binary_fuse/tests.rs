//! The binary fuse filter's tests: format, construction, queries, garbage bytes.

use super::*;
use crate::filter::test_support::{build as build_keys, fp_hits, key, xorshift};

fn both() -> [BinaryFuse; 2] {
    [BinaryFuse::fuse8(), BinaryFuse::fuse16()]
}

#[test]
fn policy_basics() {
    assert_eq!(BinaryFuse::fuse8().name(), "siftdb.BinaryFuse8");
    assert_eq!(BinaryFuse::fuse16().name(), "siftdb.BinaryFuse16");
    assert_eq!(BinaryFuse::new(16).unwrap().fingerprint_bits(), 16);
    assert!(BinaryFuse::new(12).is_none());
    assert_eq!(BinaryFuse::fuse8().bits_per_key(), 9.0);
    assert_eq!(BinaryFuse::fuse16().bits_per_key(), 18.0);
    assert_eq!(
        BinaryFuse::fuse8().theoretical_fp_rate(10.0),
        Some(1.0 / 256.0)
    );
    assert_eq!(
        BinaryFuse::fuse16().theoretical_fp_rate(f64::NAN),
        Some(1.0 / 65536.0)
    );
    let t = BinaryFuse::fuse8().theoretical_fp_rate_for(1_000_000);
    assert!((t - 1.0 / 256.0).abs() < 1e-12);
}

#[test]
fn shapes_follow_the_paper() {
    // n = 1M: L = 2^floor(13.82 / 1.203 + 2.25) = 2^13; factor 1.125; capacity 1,125,000;
    // segments = ceil(1,125,000 / 8192) − 2 = 136; A = 138 · 8192.
    let s = Shape::for_keys(1_000_000).unwrap();
    assert_eq!(
        s,
        Shape {
            segment_length: 8192,
            segment_count_length: 136 * 8192,
            array_length: 138 * 8192
        }
    );
    // n = 10k: L = 2^9; factor 0.875 + 0.25 · 13.82 / 9.21 = 1.25; capacity 12,500;
    // segments = 25 − 2 = 23.
    let s = Shape::for_keys(10_000).unwrap();
    assert_eq!((s.segment_length, s.array_length), (512, 25 * 512));
    // One key: L = 4, one segment: 12 slots.
    let s = Shape::for_keys(1).unwrap();
    assert_eq!(
        (s.segment_length, s.segment_count_length, s.array_length),
        (4, 4, 12)
    );
    // The paper's cap: 2^18 from about 170M keys.
    assert_eq!(
        Shape::for_keys(500_000_000).unwrap().segment_length,
        1 << 18
    );
    // Too large for 32-bit slots.
    assert!(Shape::for_keys(4_000_000_000).is_none());
    let p = BinaryFuse::fuse8();
    let b = p.bits_per_key_for(1_000_000).unwrap();
    assert!((9.04..9.05).contains(&b), "{b}");
    let b16 = BinaryFuse::fuse16().bits_per_key_for(1_000_000).unwrap();
    assert!((18.08..18.09).contains(&b16), "{b16}");
    assert!(p.bits_per_key_for(0).is_none());
    let o = p.space_overhead_for(1_000_000).unwrap();
    assert!((1.13..1.131).contains(&o), "{o}");
}

#[test]
fn layout_and_trailer() {
    let p = BinaryFuse::fuse8();
    let f = build_keys(&p, "k", 10_000);
    assert_eq!(f.len(), 25 * 512 + 25);
    let t = &f[f.len() - 25..];
    assert_eq!(&t[8..12], &512u32.to_le_bytes());
    assert_eq!(&t[12..16], &(23u32 * 512).to_le_bytes());
    assert_eq!(&t[16..20], &(25u32 * 512).to_le_bytes());
    assert_eq!(&t[20..], &[0xFF, 1, 8, 0, 0]);
    let f16 = build_keys(&BinaryFuse::fuse16(), "k", 10_000);
    assert_eq!(f16.len(), 2 * 25 * 512 + 25);
    assert_eq!(&f16[f16.len() - 5..], &[0xFF, 1, 16, 0, 0]);
    // The filter equation, by hand, for a present key.
    let (data, t) = f16.split_at(f16.len() - 25);
    let seed = u64::from_le_bytes(t[..8].try_into().unwrap());
    let m = mix(BinaryFuse::hash(&key("k", 77)), seed);
    let [a, b, c] = slots(m, 512, 23 * 512);
    let at = |s: u32| u16::from_le_bytes([data[2 * s as usize], data[2 * s as usize + 1]]);
    assert_eq!(at(a) ^ at(b) ^ at(c), (m ^ (m >> 32)) as u16);
    assert_eq!((a / 512 + 1, a / 512 + 2), (b / 512, c / 512));
}

#[test]
fn no_false_negatives_with_duplicates() {
    for p in both() {
        let n = 100_000u64;
        let mut b = p.builder();
        for i in 0..n {
            b.add_key(&key("present:", i));
            if i % 3 == 0 {
                // Consecutive duplicate (another version of the same user key).
                b.add_key(&key("present:", i));
            }
        }
        // Non-consecutive duplicates: the first thousand keys again, and one key many times.
        for i in 0..1000 {
            b.add_key(&key("present:", i));
            b.add_key(&key("present:", 5));
        }
        let f = b.finish();
        // Sized for the 100k distinct keys, not for the adds.
        let expect = Shape::for_keys(n as usize).unwrap().array_length as usize
            * usize::from(p.fingerprint_bits() / 8)
            + TRAILER_LEN;
        assert_eq!(f.len(), expect);
        assert_eq!(f[f.len() - 2], KIND_FILTER, "construction gave up");
        for i in 0..n {
            let k = key("present:", i);
            assert!(p.may_match(&f, &k), "{}: false negative {i}", p.name());
        }
    }
}

#[test]
fn empty_and_tiny_sets() {
    for p in both() {
        let empty = build_keys(&p, "k", 0);
        assert_eq!(empty.len(), 25);
        assert_eq!(&empty[20..], &[0xFF, 1, p.fingerprint_bits(), 0, 0]);
        assert!(!p.may_match(&empty, b"anything"));
        assert!(!p.may_match(&empty, b""));
        let mut worst = 0;
        for n in 1..=300u64 {
            let mut b = p.builder();
            for i in 0..n {
                b.add_key(&key("k", i));
            }
            let hashes: Vec<u64> = (0..n).map(|i| BinaryFuse::hash(&key("k", i))).collect();
            let f = b.finish();
            for i in 0..n {
                assert!(p.may_match(&f, &key("k", i)), "n = {n}, key {i}");
            }
            assert_eq!(f[f.len() - 2], KIND_FILTER, "gave up at n = {n}");
            let (again, attempts) = build::<u8>(&hashes, &mut Scratch::default(), 64);
            worst = worst.max(attempts);
            if p.fingerprint_bits() == 8 {
                assert_eq!(again, f, "deterministic");
            }
        }
        // The paper's sizing leaves peeling little chance to fail even on tiny sets.
        assert!(worst <= 8, "{worst} attempts");
        let mut b = p.builder();
        b.add_key(b"");
        let f = b.finish();
        assert!(p.may_match(&f, b""));
    }
}

#[test]
fn bucket_sort_sorts_and_dedups_anything() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut spare, mut buckets) = (Vec::new(), Vec::new());
    for n in [
        0usize, 1, 2, 1023, 1024, 1025, 5000, 65_536, 65_537, 300_000,
    ] {
        let uniform: Vec<u64> = (0..n).map(|_| next()).collect();
        // Many copies of few values, values sharing their top bits, and extremes.
        let few: Vec<u64> = (0..n).map(|_| next() % 7).collect();
        let narrow: Vec<u64> = (0..n).map(|_| (next() >> 40) | (0xAB << 56)).collect();
        let mut dups = uniform.clone();
        dups.extend(uniform.iter().step_by(3));
        dups.extend([0, u64::MAX, 0, u64::MAX]);
        for input in [uniform, few, narrow, dups] {
            let mut expect = input.clone();
            expect.sort_unstable();
            expect.dedup();
            let mut got = input;
            sort_dedup(&mut got, &mut spare, &mut buckets);
            assert_eq!(got, expect, "n = {n}");
        }
    }
}

#[test]
fn bytes_depend_only_on_the_key_set() {
    let p = BinaryFuse::fuse8();
    let forward = build_keys(&p, "k", 5000);
    let mut b = p.builder();
    for i in (0..5000).rev() {
        b.add_key(&key("k", i));
        b.add_key(&key("k", (i * 7) % 5000));
    }
    assert_eq!(b.finish(), forward);
}

#[test]
fn measured_fp_rate_is_two_to_the_minus_width() {
    // fuse8: 1M absent probes, 3906 expected false positives, σ ≈ 62: ±8 % is over 5σ.
    let p = BinaryFuse::fuse8();
    let f = build_keys(&p, "present:", 200_000);
    let hits = fp_hits(&p, &f, 1_000_000);
    assert!((3600..=4220).contains(&hits), "fuse8: {hits} / 1M");
    // fuse16: 4M probes, 61 expected, σ ≈ 7.8.
    let p = BinaryFuse::fuse16();
    let f = build_keys(&p, "present:", 200_000);
    let hits = fp_hits(&p, &f, 4_000_000);
    assert!((25..=100).contains(&hits), "fuse16: {hits} / 4M");
}

#[test]
fn width_comes_from_the_bytes() {
    let (p8, p16) = (BinaryFuse::fuse8(), BinaryFuse::fuse16());
    let f8 = build_keys(&p8, "present:", 10_000);
    let f16 = build_keys(&p16, "present:", 10_000);
    for i in 0..10_000 {
        let k = key("present:", i);
        assert!(p16.may_match(&f8, &k) && p8.may_match(&f16, &k));
    }
    let mut hits = 0;
    for i in 0..20_000 {
        let k = key("absent:", i);
        assert_eq!(p16.may_match(&f8, &k), p8.may_match(&f8, &k));
        assert_eq!(p8.may_match(&f16, &k), p16.may_match(&f16, &k));
        hits += u32::from(p16.may_match(&f8, &k));
    }
    // Read as 8-bit: its rate (≈ 78 of 20k), not the 16-bit one (≈ 0.3).
    assert!((40..=130).contains(&hits), "{hits}");
}

#[test]
fn one_builder_across_partitions() {
    for p in both() {
        let mut b = p.builder();
        let mut filters = Vec::new();
        for (part, n) in [(0u64, 3000u64), (1, 1), (2, 0), (3, 50_000), (4, 700)] {
            let prefix = format!("part{part}:");
            for i in 0..n {
                b.add_key(&key(&prefix, i));
            }
            assert_eq!(b.num_keys(), n as usize);
            let f = b.finish();
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
        // A partition does not match another's keys more than the FP rate allows.
        let (_, _, big) = &filters[3];
        let other = (0..3000)
            .filter(|&i| p.may_match(big, &key("part0:", i)))
            .count();
        assert!(other <= 30, "{other}");
    }
}

#[test]
fn giving_up_matches_everything() {
    let hashes: Vec<u64> = (0..1000).map(|i| BinaryFuse::hash(&key("k", i))).collect();
    let (f, attempts) = build::<u8>(&hashes, &mut Scratch::default(), 0);
    assert_eq!(attempts, 1);
    assert_eq!(
        f,
        vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 1, 8, 1, 0]
    );
    let p = BinaryFuse::fuse8();
    for i in 0..1000 {
        assert!(p.may_match(&f, &key("k", i)));
        assert!(p.may_match(&f, &key("absent:", i)));
    }
}

#[test]
fn unknown_or_damaged_bytes_may_match() {
    let p = BinaryFuse::fuse8();
    let good = build_keys(&p, "k", 1000);
    let absent = (0..1000)
        .map(|i| key("absent:", i))
        .find(|k| !p.may_match(&good, k))
        .unwrap();
    let n = good.len();
    assert!(p.may_match(&good[..24], &absent));
    assert!(p.may_match(&good[1..], &absent));
    assert!(p.may_match(&good[..n - 1], &absent));
    // Every trailer byte except the seed's changes the answer to "maybe"; a damaged seed only
    // reshuffles (and may lose keys, which is the block checksum's job to prevent).
    for at in 8..25 {
        for v in [0x00u8, 0x01, 0x07, 0x10, 0x80, 0xFF] {
            let mut bad = good.clone();
            if bad[n - 25 + at] == v {
                continue;
            }
            bad[n - 25 + at] = v;
            assert!(p.may_match(&bad, &absent), "trailer byte {at} = {v:#x}");
        }
    }
    // A 16-bit width on 8-bit data: the length no longer matches.
    let mut bad = good.clone();
    bad[n - 3] = 16;
    assert!(p.may_match(&bad, &absent));
    // The blooms' readers treat this format as unknown.
    use crate::filter::CacheLocalBloom;
    assert!(CacheLocalBloom::new(10.0).may_match(&good, &absent));
}

#[test]
fn garbage_does_not_panic() {
    let p = BinaryFuse::fuse16();
    let mut next = xorshift();
    for len in 0..600usize {
        let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if len >= 25 && len % 2 == 0 {
            // A valid-looking trailer, sometimes with a consistent geometry, so that the
            // probing path runs on random fingerprints and extreme values.
            let data = len - 25;
            let w = if next().is_multiple_of(2) { 8 } else { 16 };
            let l = 1u32 << (next() % 32);
            let (scl, a) = match next() % 3 {
                0 => (next() as u32, next() as u32),
                1 => (u32::MAX - l + 1, u32::MAX),
                _ => {
                    let a = (data / (w / 8)) as u32;
                    (a.wrapping_sub(l.wrapping_mul(2)), a)
                }
            };
            let t = &mut bytes[data..];
            t[8..12].copy_from_slice(&l.to_le_bytes());
            t[12..16].copy_from_slice(&scl.to_le_bytes());
            t[16..20].copy_from_slice(&a.to_le_bytes());
            t[20..].copy_from_slice(&[0xFF, 1, w as u8, 0, 0]);
        }
        for k in [&b""[..], b"a", b"some key", &bytes] {
            let _ = p.may_match(&bytes, k);
            let _ = p.may_match_hash(&bytes, next());
        }
    }
}

/// The policy in every layout through the real store: no false negatives across flush,
/// compaction and reopen; 2^-8 false positives on absent keys inside the tables' range.
#[test]
fn through_the_store_in_every_layout() {
    use crate::{Db, Filter, FilterLayout, Options};
    use std::sync::Arc;

    let n = 20_000u32;
    let key = |i: u32| format!("user{i:09}").into_bytes();
    let absent = |i: u32| format!("user{i:09}x").into_bytes();
    for layout in FilterLayout::ALL {
        let dir = tempfile::tempdir().unwrap();
        let options = || {
            Options::default()
                .write_buffer_size(1 << 20)
                .target_file_size(1 << 20)
                .filter(Filter::new(layout, Arc::new(BinaryFuse::fuse8())))
        };
        let check = |db: &Db, stage: &str| {
            for i in 0..n {
                assert!(
                    db.get(key(i)).unwrap().is_some(),
                    "{layout}: key {i} lost after {stage}"
                );
            }
        };
        {
            let db = Db::open(dir.path(), options()).unwrap();
            for i in 0..n {
                db.put(key(i), i.to_le_bytes()).unwrap();
            }
            db.flush().unwrap();
            check(&db, "flush");
            db.compact().unwrap();
            check(&db, "compaction");
        }
        let db = Db::open(dir.path(), options()).unwrap();
        check(&db, "reopen");
        let before = db.statistics();
        for round in 0..5 {
            for i in 0..n {
                let k = [absent(i), format!("r{round}").into_bytes()].concat();
                assert_eq!(db.get(k).unwrap(), None);
            }
        }
        let fp = db
            .statistics()
            .since(&before)
            .filter_totals()
            .fp_rate()
            .unwrap();
        eprintln!("binary fuse 8, {layout}: measured FP {:.3} %", fp * 100.0);
        // 100k probes, 391 expected, σ ≈ 20.
        assert!((0.0028..=0.0051).contains(&fp), "{layout}: fp {fp}");
    }
}
