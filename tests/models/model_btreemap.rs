//! Model-based test: siftdb against a `BTreeMap` over a seeded random mix of put, delete, batch,
//! get, scan, flush, compact and reopen, checking every read.
//!
//! Both compaction styles: leveled, and lazy leveling with two to four runs per level, switching
//! to leveled and back every fourth reopen.
//!
//! `SIFTDB_MODEL_OPS` sets the number of operations (default 120,000); `SIFTDB_MODEL_SEED` the seed.

use crate::common::scratch;
use std::collections::BTreeMap;
use std::ops::Bound;

use rand::{rngs::StdRng, Rng, SeedableRng};
use siftdb::{CompactionStyle, Db, Filter, Options, WriteBatch};

/// The compaction style of the store's `round`-th open.
type Styles = fn(round: u64) -> CompactionStyle;

fn options(round: u64, styles: Styles) -> Options {
    // Rotate the filter on every reopen, so old tables are read with their own filters.
    let filter = match round % 4 {
        0 => Filter::full(10.0),
        1 => Filter::block_based(8.0),
        2 => Filter::partitioned(10.0).partition_bytes(512),
        _ => Filter::none(),
    };
    Options::default()
        .write_buffer_size(32 << 10)
        .target_file_size(16 << 10)
        .max_bytes_for_level_base(64 << 10)
        .block_cache_bytes(256 << 10)
        .filter(filter)
        .compaction_style(styles(round))
}

fn random_key(rng: &mut StdRng) -> Vec<u8> {
    // A small key space so overwrites and deletes hit existing keys often; varied lengths,
    // including the empty key and keys that are prefixes of others.
    let n = rng.gen_range(0..3000u32);
    match n % 7 {
        0 => format!("k{n}").into_bytes(),
        1 if n < 20 => Vec::new(),
        _ => format!("key{:05}", n).into_bytes(),
    }
}

fn random_value(rng: &mut StdRng) -> Vec<u8> {
    let len = match rng.gen_range(0..10) {
        0 => 0,
        1 => rng.gen_range(500..3000),
        _ => rng.gen_range(1..60),
    };
    (0..len).map(|_| rng.r#gen()).collect()
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn store_matches_a_btreemap_model() {
    store_matches_the_model(|_| CompactionStyle::Leveled, 0x0051_f7db);
}

#[test]
fn lazy_leveled_store_matches_a_btreemap_model() {
    let styles: Styles = |round| match round % 4 {
        3 => CompactionStyle::Leveled,
        r => CompactionStyle::LazyLeveled {
            runs_per_level: 2 + r as usize,
        },
    };
    store_matches_the_model(styles, 0x1a2e_f7db);
}

fn store_matches_the_model(styles: Styles, seed: u64) {
    let ops = env_u64("SIFTDB_MODEL_OPS", 120_000);
    let seed = env_u64("SIFTDB_MODEL_SEED", seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = scratch();
    let mut round = 0;
    let mut db = Db::open(dir.path(), options(round, styles)).unwrap();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let (mut gets, mut scans, mut reopens, mut compactions) = (0, 0, 0, 0);
    for op in 0..ops {
        let ctx = || format!("seed {seed:#x}, op {op}");
        match rng.gen_range(0..1000) {
            0..=399 => {
                let (k, v) = (random_key(&mut rng), random_value(&mut rng));
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            400..=499 => {
                let k = random_key(&mut rng);
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            500..=539 => {
                let mut batch = WriteBatch::new();
                for _ in 0..rng.gen_range(1..20) {
                    let k = random_key(&mut rng);
                    if rng.gen_bool(0.7) {
                        let v = random_value(&mut rng);
                        batch.put(&k, &v);
                        model.insert(k, v);
                    } else {
                        batch.delete(&k);
                        model.remove(&k);
                    }
                }
                db.write(batch).unwrap();
            }
            540..=939 => {
                gets += 1;
                let k = random_key(&mut rng);
                assert_eq!(
                    db.get(&k).unwrap(),
                    model.get(&k).cloned(),
                    "get {:?} at {}",
                    String::from_utf8_lossy(&k),
                    ctx()
                );
            }
            940..=979 => {
                scans += 1;
                let a = random_key(&mut rng);
                let b = random_key(&mut rng);
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                let bounds = match rng.gen_range(0..4) {
                    0 => (Bound::Included(lo), Bound::Excluded(hi)),
                    1 => (Bound::Excluded(lo), Bound::Included(hi)),
                    2 => (Bound::Included(lo), Bound::Unbounded),
                    _ => (Bound::Unbounded, Bound::Included(hi)),
                };
                let limit = rng.gen_range(1..200);
                let got: Vec<(Vec<u8>, Vec<u8>)> = db
                    .scan(bounds.clone())
                    .take(limit)
                    .map(|r| r.unwrap())
                    .collect();
                let want: Vec<(Vec<u8>, Vec<u8>)> = model
                    .range(bounds)
                    .take(limit)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(got, want, "scan at {}", ctx());
            }
            980..=989 => db.flush().unwrap(),
            990..=994 => {
                compactions += 1;
                db.compact().unwrap();
            }
            _ => {
                reopens += 1;
                round += 1;
                drop(db);
                db = Db::open(dir.path(), options(round, styles)).unwrap();
            }
        }
    }
    // A full scan at the end agrees too.
    let got: Vec<(Vec<u8>, Vec<u8>)> = db.iter().map(|r| r.unwrap()).collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
    assert_eq!(got, want);
    assert!(gets > ops / 3 && scans > 0 && reopens > 0 && compactions > 0);
    eprintln!(
        "{ops} ops: {gets} gets, {scans} scans, {compactions} compactions, {reopens} reopens"
    );
}
