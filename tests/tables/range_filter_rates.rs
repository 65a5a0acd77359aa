//! Empty short scans through a store, as a user would run them, for the three key formats of the
//! workload runner (`examples/common/key_formats.rs`): the range filters' false positive rate per
//! width against the bound `ℓ / 2^(B−2)`, and no false negative (every scan returns exactly what
//! the store holds).
//!
//! `binary` (a fixed head and a 64-bit number) and `tenants` (three tenants whose ids differ in
//! their first byte, so tables span tenants and their common prefix is empty) keep the bound at
//! every width, for ranges anywhere and just after a key. `strings` (`user:<id>:<field>`) keep it
//! too: their segments map each key after the `:` that ends its id, down to its last byte
//! (docs/filters.md, *Range filters*).

use crate::common::scratch;
// Shared with the workload runner, which uses all of it.
#[allow(dead_code)]
#[path = "../../examples/common/key_formats.rs"]
mod key_formats;

use std::collections::BTreeSet;

use key_formats::Keys;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use siftdb::{Db, Options, RangeFilter, Statistics};

const BITS: f64 = 20.0;
const KEYS: u64 = 60_000;
const SCANS: u64 = 2_000;

/// The store's keys.
fn present(keys: Keys) -> BTreeSet<Vec<u8>> {
    let mut k = Vec::new();
    (0..KEYS)
        .map(|i| {
            keys.key(2 * i, &mut k);
            k.clone()
        })
        .collect()
}

fn filled(dir: &std::path::Path, keys: Keys) -> Db {
    let db = Db::open(
        dir,
        Options::default()
            .write_buffer_size(256 << 10)
            .target_file_size(256 << 10)
            .max_bytes_for_level_base(1 << 20)
            .range_filter(RangeFilter::grafite(BITS, 1 << 16)),
    )
    .expect("open");
    let mut order: Vec<u64> = (0..KEYS).collect();
    order.shuffle(&mut StdRng::seed_from_u64(1));
    let mut k = Vec::new();
    for i in order {
        keys.key(2 * i, &mut k);
        db.put(&k, b"v").expect("put");
    }
    db.compact().expect("compact");
    db
}

/// Theory's false positives for the checks of each width class (`2^(c−1) < ℓ ≤ 2^c`), at the
/// class's widest, and the false positives counted.
fn expected_and_counted(stats: &Statistics) -> (f64, u64) {
    let filter = RangeFilter::grafite(BITS, 1 << 16);
    let mut expected = 0.0;
    for class in 0..=16 {
        let c = stats.range_filter_width_counts(class);
        let theory = filter.theoretical_fp_rate(1 << class).unwrap_or(1.0);
        expected += c.checks() as f64 * theory;
    }
    let t = stats.range_filter_totals();
    (expected, t.positive - t.true_positive)
}

/// `SCANS` short scans of `width` keys: anywhere, or just after a present key. Each must return
/// the keys `present` holds there (none, but for a few ranges drawn anywhere); returns the
/// statistics they added.
fn scans(
    db: &Db,
    keys: Keys,
    present: &BTreeSet<Vec<u8>>,
    (width, after_key, seed): (u64, bool, u64),
) -> Statistics {
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut k, mut lo, mut hi) = (Vec::new(), Vec::new(), Vec::new());
    let before = db.statistics();
    for _ in 0..SCANS {
        if after_key {
            keys.key(2 * rng.gen_range(0..KEYS), &mut k);
            key_formats::plus(&k, 1, &mut lo);
            key_formats::plus(&k, width, &mut hi);
        } else {
            keys.anywhere(&mut rng, &mut lo);
            key_formats::plus(&lo, width - 1, &mut hi);
        }
        let found: Vec<Vec<u8>> = db
            .scan(lo.as_slice()..=hi.as_slice())
            .map(|r| r.expect("scan").0)
            .collect();
        let want: Vec<Vec<u8>> = present.range(lo.clone()..=hi.clone()).cloned().collect();
        assert_eq!(found, want, "scan of {lo:?} ..= {hi:?}");
    }
    db.statistics().since(&before)
}

/// Checks the false positives of `stats` against theory's for the widths asked: at most twice as
/// many, with room for a few at tiny rates.
fn assert_within_bound(stats: &Statistics, what: &str) {
    let (expected, counted) = expected_and_counted(stats);
    let checks = stats.range_filter_totals().checks();
    assert!(checks > 0, "{what}: no range filter asked");
    assert!(
        (counted as f64) <= 2.0 * expected + 4.0,
        "{what}: {counted} false positives in {checks} checks, theory {expected:.1}"
    );
}

#[test]
fn keys_of_one_length_keep_the_bound_at_every_width_even_where_tables_span_tenants() {
    for (name, keys) in [
        ("binary", Keys::binary(16)),
        ("tenants", Keys::tenants(12, 3)),
    ] {
        let dir = scratch();
        let db = filled(dir.path(), keys);
        let present = present(keys);
        for width in [1u64, 16, 256, 4096, 1 << 16] {
            for after_key in [false, true] {
                let stats = scans(&db, keys, &present, (width, after_key, width));
                let what = format!("{name}, width {width}, after a key {after_key}");
                assert_within_bound(&stats, &what);
            }
        }
    }
}

#[test]
fn strings_keep_the_bound_for_ranges_anywhere_and_just_after_a_key() {
    let keys = Keys::strings();
    let dir = scratch();
    let db = filled(dir.path(), keys);
    let present = present(keys);
    for width in [1u64, 16, 256, 4096, 1 << 16] {
        for after_key in [false, true] {
            let stats = scans(&db, keys, &present, (width, after_key, width));
            let what = format!("strings, width {width}, after a key {after_key}");
            assert_within_bound(&stats, &what);
        }
    }
}
