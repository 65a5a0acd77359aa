//! The segmented filter's tests: no false negative for any keys and bounds, the false positive
//! rate per range width against the bound for the three key formats the workload runner writes
//! (a fixed head and a 64-bit number; tenants and ids; `user:<id>:<field>` strings), how tables
//! are cut into segments, and damaged bytes.

use std::collections::BTreeSet;
use std::ops::Bound;

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;

fn build_with(keys: &BTreeSet<Vec<u8>>, builder: SegmentedGrafiteBuilder) -> SegmentedGrafite {
    let mut b = builder;
    for k in keys {
        b.add_key(k);
    }
    assert_eq!(b.num_keys(), keys.len());
    let f = SegmentedGrafite::from_bytes(&b.finish()).expect("reads back");
    assert_eq!(b.num_keys(), 0, "finish empties the builder");
    f
}

fn build(keys: &BTreeSet<Vec<u8>>, bits: f64, max_range: u64) -> SegmentedGrafite {
    build_with(keys, SegmentedGrafiteBuilder::new(bits, max_range))
}

fn holds(keys: &BTreeSet<Vec<u8>>, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> bool {
    if is_empty_range(lower, upper) {
        return false;
    }
    keys.range::<[u8], _>((lower, upper)).next().is_some()
}

fn says_maybe(f: &SegmentedGrafite, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> bool {
    !matches!(
        f.check(lower, upper),
        RangeCheck::Absent | RangeCheck::Asked { maybe: false, .. }
    )
}

/// A fixed 8-byte head, then `x` big-endian (the workload runner's `binary` keys).
fn binary_key(x: u64) -> Vec<u8> {
    [b"siftkey:".as_slice(), &x.to_be_bytes()].concat()
}

/// Tenant `t` (4 bytes, big-endian) and an id (8 bytes, big-endian).
fn tenant_key(t: u32, id: u64) -> Vec<u8> {
    [t.to_be_bytes().as_slice(), &id.to_be_bytes()].concat()
}

const FIELDS: [&str; 6] = ["name", "email", "phone", "address", "created_at", "plan"];

/// `user:<id>:<field>`, the id in decimal.
fn string_key(id: u64, field: usize) -> Vec<u8> {
    format!("user:{id}:{}", FIELDS[field % FIELDS.len()]).into_bytes()
}

/// `key` with its last 8 bytes (all, if fewer) read as a big-endian number plus `n`, at most all
/// `0xff`: the key `n` places after it among keys of its length and leading bytes.
fn plus(key: &[u8], n: u64) -> Vec<u8> {
    let cut = key.len().saturating_sub(8);
    let tail = number(&key[cut..]);
    let width = 8 * (key.len() - cut) as u32;
    let max = if width == 64 {
        u64::MAX
    } else {
        (1 << width) - 1
    };
    let sum = tail.saturating_add(n).min(max);
    let mut out = key[..cut].to_vec();
    out.extend_from_slice(&sum.to_be_bytes()[8 - (key.len() - cut)..]);
    out
}

#[test]
fn an_empty_filter_holds_nothing() {
    let f = build(&BTreeSet::new(), 12.0, 64);
    assert_eq!(f.num_segments(), 0);
    assert!(!f.may_contain(None, None));
    assert!(!f.may_contain(Some(b"a"), Some(b"z")));
}

#[test]
fn keys_of_one_length_make_one_segment_whatever_their_leading_bytes() {
    // Three tenants: the common prefix of the table is empty, yet each key's integer is its id.
    let mut rng = StdRng::seed_from_u64(1);
    let keys: BTreeSet<Vec<u8>> = (0..3000)
        .map(|i| tenant_key(0x1000_0000 * (i % 3), rng.gen_range(0..1u64 << 40)))
        .collect();
    let f = build(&keys, 16.0, 1 << 16);
    assert_eq!((f.num_segments(), f.one_length_segments()), (1, 1));
    for k in keys.iter().take(200) {
        // The key itself, and the 16 ids after it (each a range of 16 integers, not 2^32).
        assert!(f.may_contain(Some(k), Some(k)));
        let (a, b) = (plus(k, 1), plus(k, 16));
        assert!(matches!(
            f.check(Bound::Included(&a), Bound::Included(&b)),
            RangeCheck::Asked { width: 16, .. }
        ));
    }
}

#[test]
fn tables_are_cut_where_the_length_or_the_leading_bytes_change() {
    // Two families of keys of one length each, then strings of varying lengths under two
    // prefixes: four segments, two of one length.
    let mut keys = BTreeSet::new();
    for i in 0..400u64 {
        keys.insert([b"a/".as_slice(), &(i * 977).to_be_bytes()].concat());
        keys.insert([b"b/x/".as_slice(), &(i * 977).to_be_bytes()].concat());
        keys.insert(format!("c/{}:{}", i * 13, FIELDS[i as usize % 6]).into_bytes());
        keys.insert(format!("d/{}:{}", i * 13, FIELDS[i as usize % 6]).into_bytes());
    }
    let f = build(&keys, 16.0, 1 << 16);
    assert_eq!((f.num_segments(), f.one_length_segments()), (4, 2));
    // Keys of varying lengths throughout: about one segment per `MIN_SEGMENT_KEYS` keys at most.
    let strings: BTreeSet<Vec<u8>> = (0..20_000u64)
        .map(|i| string_key(i * 7919, i as usize))
        .collect();
    let f = build(&strings, 16.0, 1 << 16);
    assert!(f.num_segments() <= 2 * strings.len() / MIN_SEGMENT_KEYS + 1);
    assert_eq!(f.one_length_segments(), 0);
}

#[test]
fn damaged_bytes_are_refused_or_answer_without_panicking() {
    let mut keys = BTreeSet::new();
    for i in 0..300u64 {
        keys.insert(tenant_key(7, i << 20));
        keys.insert(string_key(i, i as usize));
    }
    let mut b = SegmentedGrafiteBuilder::new(14.0, 256).with_segment_sizes(40, 8);
    for k in &keys {
        b.add_key(k);
    }
    let bytes = b.finish();
    let f = SegmentedGrafite::from_bytes(&bytes).expect("reads back");
    assert!(f.separator_segments() > 0 && f.one_length_segments() > 0);
    assert!(SegmentedGrafite::from_bytes(&bytes[..bytes.len() - 3]).is_none());
    assert!(SegmentedGrafite::from_bytes(&[]).is_none());
    assert!(SegmentedGrafite::from_bytes(&[FORMAT_SEGMENTED]).is_none());
    let mut rng = StdRng::seed_from_u64(5);
    for _ in 0..3000 {
        let mut bad = bytes.clone();
        let i = rng.gen_range(0..bad.len());
        bad[i] ^= 1 << rng.gen_range(0..8);
        if let Some(f) = SegmentedGrafite::from_bytes(&bad) {
            let k = string_key(rng.gen_range(0..300), 1);
            let _ = f.may_contain(Some(&k), Some(&plus(&k, 5)));
            let _ = f.may_contain(None, None);
            let t = tenant_key(7, rng.r#gen());
            let _ = f.check(Bound::Excluded(&t), Bound::Excluded(&plus(&t, 1 << 30)));
        }
    }
}

#[test]
fn bounds_of_other_lengths_are_projected_onto_one_length_keys() {
    let keys: BTreeSet<Vec<u8>> = [0x1000u64, 0x2000, 0x3000]
        .iter()
        .map(|&x| tenant_key(1, x))
        .collect();
    let f = build(&keys, 20.0, 1 << 16);
    let key = |x: u64| tenant_key(1, x);
    let check = |lo: Bound<&[u8]>, hi: Bound<&[u8]>| f.check(lo, hi);
    use Bound::{Excluded, Included};
    // [0x1001, 0x1fff]: 0xfff ids; excluded ends give the same.
    assert!(matches!(
        check(Included(&key(0x1001)), Included(&key(0x1fff))),
        RangeCheck::Asked { width: 0xfff, .. }
    ));
    assert!(matches!(
        check(Excluded(&key(0x1000)), Excluded(&key(0x2000))),
        RangeCheck::Asked { width: 0xfff, .. }
    ));
    // A longer lower bound lies above its first 12 bytes; a shorter upper bound below itself
    // padded with zeros (11 bytes of 0x2000's key: 0x2000 itself is above it).
    let longer = [key(0x1000), vec![0]].concat();
    let shorter = &key(0x2000)[..11];
    assert!(matches!(
        check(Included(&longer), Included(&key(0x1fff))),
        RangeCheck::Asked { width: 0xfff, .. }
    ));
    assert!(matches!(
        check(Included(&key(0x1001)), Excluded(shorter)),
        RangeCheck::Asked { width: 0xfff, .. }
    ));
    assert!(matches!(
        check(Included(&key(0x1001)), Included(shorter)),
        RangeCheck::Asked { width: 0xfff, .. }
    ));
    // Every key holds: its own range says "maybe".
    for k in &keys {
        assert!(f.may_contain(Some(k), Some(k)));
        assert!(f.may_contain(Some(&k[..11]), Some(k)));
    }
    // A range from one tenant's last ids into the next tenant's first: two pieces.
    let (a, b) = (tenant_key(1, u64::MAX - 3), tenant_key(2, 4));
    assert!(matches!(
        check(Included(&a), Included(&b)),
        RangeCheck::Asked { width: 9, .. }
    ));
    assert!(matches!(
        check(Included(&tenant_key(1, 5)), Included(&tenant_key(3, 4))),
        RangeCheck::TooWide { .. }
    ));
}

/// The measured false positive rate of `queries` empty ranges against theory, as pairs
/// `(measured, theory)`; panics on a false negative. Ranges holding a key are skipped; `judge`
/// says which empty ranges the bound is for (the others are counted apart, in `.2`).
fn measure(
    keys: &BTreeSet<Vec<u8>>,
    f: &SegmentedGrafite,
    width: u64,
    mut query: impl FnMut() -> (Vec<u8>, Vec<u8>),
    judge: impl Fn(&[u8], &[u8]) -> bool,
) -> (f64, f64, f64) {
    let (mut fp, mut empty, mut fp_other, mut other) = (0u64, 0u64, 0u64, 0u64);
    for _ in 0..60_000 {
        let (lo, hi) = query();
        let range = (
            Bound::Included(lo.as_slice()),
            Bound::Included(hi.as_slice()),
        );
        let maybe = says_maybe(f, range.0, range.1);
        if holds(keys, range.0, range.1) {
            assert!(maybe, "false negative for {lo:?} ..= {hi:?}");
            continue;
        }
        if judge(&lo, &hi) {
            empty += 1;
            fp += u64::from(maybe);
        } else {
            other += 1;
            fp_other += u64::from(maybe);
        }
    }
    (
        fp as f64 / empty.max(1) as f64,
        f.theoretical_fp_rate(width),
        fp_other as f64 / other.max(1) as f64,
    )
}

fn assert_near_theory(
    format: &str,
    width: u64,
    queries: &str,
    (measured, theory, _): (f64, f64, f64),
) {
    assert!(
        measured <= 2.0 * theory + 2e-4,
        "{format}, width {width}, {queries}: {measured} against {theory}"
    );
}

#[test]
fn keys_of_one_length_keep_the_bound_for_uniform_ranges_and_ranges_just_after_a_key() {
    let bits = 18.0;
    let mut rng = StdRng::seed_from_u64(9);
    // A fixed head and 64-bit numbers; three tenants of ids below 2^40 (the table spans them).
    let binary: Vec<u64> = (0..30_000).map(|_| rng.r#gen()).collect();
    let tenants: Vec<(u32, u64)> = (0..30_000)
        .map(|i| (0x0100_0000 * (1 + i % 3), rng.gen_range(0..1u64 << 40)))
        .collect();
    let binary_keys: BTreeSet<Vec<u8>> = binary.iter().map(|&x| binary_key(x)).collect();
    let tenant_keys: BTreeSet<Vec<u8>> = tenants.iter().map(|&(t, id)| tenant_key(t, id)).collect();
    let fb = build(&binary_keys, bits, 1 << 16);
    let ft = build(&tenant_keys, bits, 1 << 16);
    for width in [1u64, 16, 256, 4096, 1 << 16] {
        let mut r = StdRng::seed_from_u64(width);
        let m = measure(
            &binary_keys,
            &fb,
            width,
            || {
                let lo = binary_key(r.r#gen());
                let hi = plus(&lo, width - 1);
                (lo, hi)
            },
            |_, _| true,
        );
        assert_near_theory("binary", width, "uniform", m);
        let m = measure(
            &binary_keys,
            &fb,
            width,
            || {
                let k = binary_key(binary[r.gen_range(0..binary.len())]);
                (plus(&k, 1), plus(&k, width))
            },
            |_, _| true,
        );
        assert_near_theory("binary", width, "just after a key", m);
        let m = measure(
            &tenant_keys,
            &ft,
            width,
            || {
                let lo = tenant_key(0x0100_0000 * r.gen_range(1..4), r.gen_range(0..1u64 << 40));
                let hi = plus(&lo, width - 1);
                (lo, hi)
            },
            |_, _| true,
        );
        assert_near_theory("tenants", width, "uniform", m);
        let m = measure(
            &tenant_keys,
            &ft,
            width,
            || {
                let (t, id) = tenants[r.gen_range(0..tenants.len())];
                let k = tenant_key(t, id);
                (plus(&k, 1), plus(&k, width))
            },
            |_, _| true,
        );
        assert_near_theory("tenants", width, "just after a key", m);
    }
}

/// 5,000 random user ids, and every field of each as `user:<id>:<field>` strings.
fn user_field_keys() -> (Vec<u64>, BTreeSet<Vec<u8>>) {
    let mut rng = StdRng::seed_from_u64(11);
    let users: Vec<u64> = (0..5000).map(|_| rng.gen_range(0..1_000_000_000)).collect();
    let keys = users
        .iter()
        .flat_map(|&u| (0..FIELDS.len()).map(move |f| string_key(u, f)))
        .collect();
    (users, keys)
}

#[test]
fn strings_keep_the_bound_for_uniform_ranges_and_ranges_just_after_a_key() {
    // `user:<id>:<field>` strings: segments map them after the `:` that ends the id, so every
    // field but `plan` (whose class, `p`, is as wide as `phone`) maps down to its last byte.
    let bits = 18.0;
    let (_, keys) = user_field_keys();
    let f = build(&keys, bits, 1 << 16);
    assert_eq!(f.separator_segments(), f.num_segments());
    let exact: Vec<&Vec<u8>> = keys.iter().filter(|k| f.maps_to_last_byte(k)).collect();
    assert!(
        exact.len() * 6 >= keys.len() * 5,
        "{} of {} keys map down to their last byte",
        exact.len(),
        keys.len()
    );
    let judge = |lo: &[u8], _: &[u8]| f.maps_to_last_byte(lo);
    for width in [1u64, 16, 256, 4096, 1 << 16] {
        let mut r = StdRng::seed_from_u64(width);
        let m = measure(
            &keys,
            &f,
            width,
            || {
                let lo = string_key(r.gen_range(0..1_000_000_000), r.gen_range(0..6));
                let hi = plus(&lo, width - 1);
                (lo, hi)
            },
            judge,
        );
        assert_near_theory("strings", width, "uniform", m);
        let m = measure(
            &keys,
            &f,
            width,
            || {
                let k = exact[r.gen_range(0..exact.len())];
                (plus(k, 1), plus(k, width))
            },
            judge,
        );
        assert_near_theory("strings", width, "just after a key", m);
    }
}

/// Keys of `words` (some sharing their first letter) after a head, a decimal id of 1 to 12
/// digits and `separator`; `count` of them.
fn separated_keys(
    rng: &mut StdRng,
    separator: u8,
    words: &[Vec<u8>],
    count: usize,
) -> Vec<Vec<u8>> {
    (0..count)
        .map(|_| {
            let digits = rng.gen_range(1..=12u32);
            let id = rng.gen_range(0..10u64.pow(digits));
            let mut k = format!("obj{id}").into_bytes();
            k.push(separator);
            k.extend_from_slice(&words[rng.gen_range(0..words.len())]);
            k
        })
        .collect()
}

#[test]
fn random_separated_key_sets_keep_the_bound_where_keys_map_down_to_their_last_byte() {
    let bits = 18.0;
    for seed in 0..4u64 {
        let mut rng = StdRng::seed_from_u64(100 + seed);
        let separator = [b':', b'/', b'|', b'#'][seed as usize];
        let words: Vec<Vec<u8>> = (0..rng.gen_range(3..9))
            .map(|_| {
                let len = rng.gen_range(1..15);
                (0..len).map(|_| rng.gen_range(b'a'..=b'k')).collect()
            })
            .collect();
        let list = separated_keys(&mut rng, separator, &words, 20_000);
        let keys: BTreeSet<Vec<u8>> = list.iter().cloned().collect();
        let f = build(&keys, bits, 1 << 16);
        let exact: Vec<&Vec<u8>> = keys.iter().filter(|k| f.maps_to_last_byte(k)).collect();
        assert!(
            !exact.is_empty(),
            "seed {seed}: no key maps to its last byte"
        );
        let judge = |lo: &[u8], hi: &[u8]| f.keeps_the_bound(lo, hi);
        for width in [1u64, 16, 256] {
            let mut r = StdRng::seed_from_u64(width + seed);
            let m = measure(
                &keys,
                &f,
                width,
                || {
                    let lo = separated_keys(&mut r, separator, &words, 1).remove(0);
                    let hi = plus(&lo, width - 1);
                    (lo, hi)
                },
                judge,
            );
            assert_near_theory("separated", width, "uniform", m);
            let m = measure(
                &keys,
                &f,
                width,
                || {
                    let k = exact[r.gen_range(0..exact.len())];
                    (plus(k, 1), plus(k, width))
                },
                judge,
            );
            assert_near_theory("separated", width, "just after a key", m);
        }
    }
}

#[test]
fn keys_of_varying_lengths_keep_the_bound_for_ranges_apart_from_every_key_in_their_window() {
    // Format 2, before separator windows: a segment maps `user:<id>:<field>` strings to the 8
    // bytes after its prefix, so a range is asked about as many integers as it spans there, and
    // the bound holds for ranges whose integers no key of the segment maps to. (A range just
    // after a key at its last byte lies past the window, meets the key's own integer and is a
    // "maybe": only checked for false negatives here.)
    let bits = 18.0;
    let (users, keys) = user_field_keys();
    let f = build_with(
        &keys,
        SegmentedGrafiteBuilder::new(bits, 1 << 16).without_separators(),
    );
    assert_eq!(f.separator_segments(), 0);
    let images: BTreeSet<(usize, u64)> = keys
        .iter()
        .filter_map(|k| match f.image(k) {
            (s, Some(x)) => Some((s, x)),
            _ => None,
        })
        .collect();
    let apart = |lo: &[u8], hi: &[u8]| match (f.image(lo), f.image(hi)) {
        ((s, Some(a)), (t, Some(b))) if s == t => images.range((s, a)..=(s, b)).next().is_none(),
        _ => false,
    };
    for width in [1u64, 16, 256] {
        let mut r = StdRng::seed_from_u64(width);
        let (measured, theory, _) = measure(
            &keys,
            &f,
            width,
            || {
                let lo = string_key(r.gen_range(0..1_000_000_000), r.gen_range(0..6));
                let hi = plus(&lo, width - 1);
                (lo, hi)
            },
            apart,
        );
        // Asked at the window, such a range spans one integer: the bound for width 1 holds.
        assert!(
            measured <= 2.0 * f.theoretical_fp_rate(1) + 2e-4,
            "strings, width {width}, uniform: {measured} (theory {theory})"
        );
        measure(
            &keys,
            &f,
            width,
            || {
                let k = string_key(users[r.gen_range(0..users.len())], r.gen_range(0..6));
                (plus(&k, 1), plus(&k, width))
            },
            apart,
        );
    }
}

/// A key of one of the three formats, or a short random one, for the property tests.
fn any_key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (0u32..3, 0u64..64).prop_map(|(t, id)| tenant_key(t, id << 8)),
        (0u64..40, 0usize..6).prop_map(|(u, f)| string_key(u * 3, f)),
        (0u64..64).prop_map(|x| binary_key(x << 4)),
        (0u64..2000, 0usize..5, any::<bool>()).prop_map(|(id, w, slash)| {
            let words: [&[u8]; 5] = [b"a", b"ab", b"abc\0", b"b\xff", b""];
            let sep: &[u8] = if slash { b"/" } else { b":" };
            [format!("o{id}").as_bytes(), sep, words[w]].concat()
        }),
        proptest::collection::vec(
            prop_oneof![Just(0u8), Just(b'u'), Just(b':'), Just(255u8), any::<u8>()],
            0..14
        ),
    ]
}

/// A bound near `keys`: one of them, one plus or minus a little, cut short or extended, or
/// another key-shaped string.
fn bound_near(keys: &[Vec<u8>], pick: usize, how: u8, delta: u64, other: Vec<u8>) -> Vec<u8> {
    let Some(k) = keys.get(pick % keys.len().max(1)) else {
        return other;
    };
    match how % 7 {
        0 => k.clone(),
        1 => plus(k, delta % 300),
        2 => [k.as_slice(), &[0]].concat(),
        3 => k[..k.len() / 2].to_vec(),
        4 => {
            let mut m = k.clone();
            if let Some(last) = m.last_mut() {
                *last = last.wrapping_sub(1 + (delta % 4) as u8);
            }
            m
        }
        5 => [k.as_slice(), &[0xff, 0xff]].concat(),
        _ => other,
    }
}

fn bound_of(kind: u8, key: &[u8]) -> Bound<&[u8]> {
    match kind % 5 {
        0 => Bound::Unbounded,
        1 | 2 => Bound::Included(key),
        _ => Bound::Excluded(key),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn no_false_negative_for_any_keys_and_bounds(
        keys in proptest::collection::btree_set(any_key(), 0..400),
        bits in 3.0f64..24.0,
        max_range in prop_oneof![Just(1u64), 1u64..300, Just(1u64 << 20), Just(u64::MAX)],
        sizes in (1usize..80, 1usize..20),
        separators in any::<bool>(),
        queries in proptest::collection::vec(
            ((any::<usize>(), any::<u8>(), any::<u64>(), any_key()),
             (any::<usize>(), any::<u8>(), any::<u64>(), any_key()),
             any::<u8>(), any::<u8>()),
            1..60),
    ) {
        let mut builder =
            SegmentedGrafiteBuilder::new(bits, max_range).with_segment_sizes(sizes.0, sizes.1);
        if !separators {
            builder = builder.without_separators();
        }
        let f = build_with(&keys, builder);
        let list: Vec<Vec<u8>> = keys.iter().cloned().collect();
        for k in &list {
            prop_assert!(f.may_contain(Some(k), Some(k)), "key {:?}", k);
        }
        for ((p1, h1, d1, o1), (p2, h2, d2, o2), kind_lo, kind_hi) in queries {
            let a = bound_near(&list, p1, h1, d1, o1);
            let b = bound_near(&list, p2, h2, d2, o2);
            let (lo, hi) = (bound_of(kind_lo, &a), bound_of(kind_hi, &b));
            if holds(&keys, lo, hi) {
                prop_assert!(says_maybe(&f, lo, hi), "lo {:?} hi {:?}", lo, hi);
            }
        }
    }
}
