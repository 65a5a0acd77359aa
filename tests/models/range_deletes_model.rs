//! Model-based test: a store that deletes ranges, against a `BTreeMap`. A seeded random mix of
//! put, delete, `delete_range` (alone and inside batches), snapshots, flush, compact and reopen;
//! after each step a random read through every read path (`get`, `get_pinned`, `multi_get`,
//! `scan` both ways, the cursor both ways, and each of them at a live snapshot) is compared
//! with the model.
//!
//! `SIFTDB_MODEL_OPS` sets the number of operations (default 40,000); `SIFTDB_MODEL_SEED` the
//! seed.

use crate::common::scratch;
use std::collections::BTreeMap;
use std::ops::Bound;

use rand::{rngs::StdRng, Rng, SeedableRng};
use siftdb::{Db, Filter, KeyRange, Keyspace, Options, Snapshot, Ticker, WriteBatch};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options(round: u64) -> Options {
    let filter = match round % 3 {
        0 => Filter::full(10.0),
        1 => Filter::partitioned(10.0).partition_bytes(512),
        _ => Filter::block_based(8.0),
    };
    // Small memtables and tables, so that tombstones and the keys they cover spread over
    // several levels and tables are cut inside tombstones.
    Options::default()
        .write_buffer_size(16 << 10)
        .target_file_size(8 << 10)
        .max_bytes_for_level_base(32 << 10)
        .block_size(512)
        .filter(filter)
}

fn key(n: u32) -> Vec<u8> {
    format!("key{n:04}").into_bytes()
}

fn random_key(rng: &mut StdRng) -> Vec<u8> {
    key(rng.gen_range(0..2000))
}

fn random_value(rng: &mut StdRng) -> Vec<u8> {
    let len = rng.gen_range(1..40);
    (0..len).map(|_| rng.r#gen()).collect()
}

/// A range of the key space: mostly short, sometimes wide, sometimes with bounds that are not
/// keys the store holds (between keys, or shorter prefixes).
fn random_range(rng: &mut StdRng) -> (Vec<u8>, Vec<u8>) {
    let a = rng.gen_range(0..2000);
    let width = match rng.gen_range(0..10) {
        0 => rng.gen_range(100..800),
        1 => 0,
        _ => rng.gen_range(1..40),
    };
    let mut start = key(a);
    let mut end = key((a + width).min(2100));
    if rng.gen_bool(0.2) {
        start.push(b'-'); // just after key a
    }
    if rng.gen_bool(0.1) {
        end.truncate(5); // a prefix: ends before every key that extends it
    }
    (start, end)
}

fn delete_range_in_model(model: &mut Model, start: &[u8], end: &[u8]) {
    if start < end {
        let doomed: Vec<Vec<u8>> = model
            .range::<[u8], _>((Bound::Included(start), Bound::Excluded(end)))
            .map(|(k, _)| k.clone())
            .collect();
        for k in doomed {
            model.remove(&k);
        }
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Compares one random read of `db` (at `snapshot`, if given) with `model`.
fn check_a_read(db: &Db, snapshot: Option<&Snapshot>, model: &Model, rng: &mut StdRng, ctx: &str) {
    match rng.gen_range(0..6) {
        0 => {
            let k = random_key(rng);
            let got = match snapshot {
                Some(s) => db.get_at(s, &k).unwrap(),
                None => db.get(&k).unwrap(),
            };
            assert_eq!(got, model.get(&k).cloned(), "get {k:?} at {ctx}");
            if snapshot.is_none() {
                let pinned = db.get_pinned(&k).unwrap().map(|v| v.to_vec());
                assert_eq!(pinned, model.get(&k).cloned(), "get_pinned {k:?} at {ctx}");
            }
        }
        1 => {
            let keys: Vec<Vec<u8>> = (0..rng.gen_range(1..40)).map(|_| random_key(rng)).collect();
            let got: Vec<Option<Vec<u8>>> = match snapshot {
                Some(s) => db.multi_get_at(s, &keys),
                None => db.multi_get(&keys),
            }
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
            let want: Vec<Option<Vec<u8>>> = keys.iter().map(|k| model.get(k).cloned()).collect();
            assert_eq!(got, want, "multi_get at {ctx}");
        }
        2 | 3 => {
            let (a, b) = random_range(rng);
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            let limit = rng.gen_range(1..300);
            let scan = match snapshot {
                Some(s) => db.scan_at(s, lo.clone()..hi.clone()),
                None => db.scan(lo.clone()..hi.clone()),
            };
            let reverse = rng.gen_bool(0.5);
            let got: Vec<(Vec<u8>, Vec<u8>)> = if reverse {
                scan.rev().take(limit).map(|r| r.unwrap()).collect()
            } else {
                scan.take(limit).map(|r| r.unwrap()).collect()
            };
            let range = model.range(lo..hi).map(|(k, v)| (k.clone(), v.clone()));
            let want: Vec<(Vec<u8>, Vec<u8>)> = if reverse {
                range.rev().take(limit).collect()
            } else {
                range.take(limit).collect()
            };
            assert_eq!(got, want, "scan (reverse: {reverse}) at {ctx}");
        }
        _ => {
            // The cursor: a seek, then steps both ways, each compared with the model.
            let mut c = match snapshot {
                Some(s) => db.cursor_at(s),
                None => db.cursor(),
            };
            let target = random_key(rng);
            let mut at: Option<Vec<u8>> = if rng.gen_bool(0.5) {
                c.seek(&target).unwrap();
                model.range(target.clone()..).next().map(|(k, _)| k.clone())
            } else {
                c.seek_for_prev(&target).unwrap();
                model
                    .range(..=target.clone())
                    .next_back()
                    .map(|(k, _)| k.clone())
            };
            for _ in 0..rng.gen_range(1..30) {
                match &at {
                    Some(k) => {
                        assert!(c.valid(), "cursor ended early at {ctx}");
                        assert_eq!(c.key(), k.as_slice(), "cursor key at {ctx}");
                        assert_eq!(c.value(), model[k].as_slice(), "cursor value at {ctx}");
                    }
                    None => {
                        assert!(!c.valid(), "cursor went on past the model at {ctx}");
                        break;
                    }
                }
                let k = at.clone().unwrap_or_default();
                if rng.gen_bool(0.5) {
                    c.next().unwrap();
                    at = model
                        .range((Bound::Excluded(k), Bound::Unbounded))
                        .next()
                        .map(|(k, _)| k.clone());
                } else {
                    c.prev().unwrap();
                    at = model.range(..k).next_back().map(|(k, _)| k.clone());
                }
            }
        }
    }
}

#[test]
fn a_store_that_deletes_ranges_matches_a_btreemap_model() {
    let ops = env_u64("SIFTDB_MODEL_OPS", 40_000);
    let seed = env_u64("SIFTDB_MODEL_SEED", 0x0de1_e7e5);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = scratch();
    let mut round = 0;
    let mut db = Db::open(dir.path(), options(round)).unwrap();
    let mut model = Model::new();
    let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
    let (mut ranges, mut reopens, mut compactions) = (0, 0, 0);
    for op in 0..ops {
        let ctx = format!("seed {seed:#x}, op {op}");
        match rng.gen_range(0..1000) {
            0..=549 => {
                let (k, v) = (random_key(&mut rng), random_value(&mut rng));
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            550..=619 => {
                let k = random_key(&mut rng);
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            620..=659 => {
                ranges += 1;
                let (start, end) = random_range(&mut rng);
                db.delete_range(start.clone()..end.clone()).unwrap();
                delete_range_in_model(&mut model, &start, &end);
            }
            660..=689 => {
                // A batch mixing puts, deletes and range deletes, applied in order.
                let mut batch = WriteBatch::new();
                for _ in 0..rng.gen_range(1..10) {
                    match rng.gen_range(0..3) {
                        0 => {
                            let (start, end) = random_range(&mut rng);
                            batch.delete_range(start.clone()..end.clone());
                            delete_range_in_model(&mut model, &start, &end);
                        }
                        1 => {
                            let k = random_key(&mut rng);
                            batch.delete(&k);
                            model.remove(&k);
                        }
                        _ => {
                            let (k, v) = (random_key(&mut rng), random_value(&mut rng));
                            batch.put(&k, &v);
                            model.insert(k, v);
                        }
                    }
                }
                db.write(batch).unwrap();
            }
            690..=699 => {
                if snapshots.len() >= 3 {
                    snapshots.remove(rng.gen_range(0..snapshots.len()));
                }
                snapshots.push((db.snapshot(), model.clone()));
            }
            700..=979 => {
                if !snapshots.is_empty() && rng.gen_bool(0.3) {
                    let (s, m) = &snapshots[rng.gen_range(0..snapshots.len())];
                    check_a_read(&db, Some(s), m, &mut rng, &format!("{ctx} (snapshot)"));
                } else {
                    check_a_read(&db, None, &model, &mut rng, &ctx);
                }
            }
            980..=995 => db.flush().unwrap(),
            996 => {
                compactions += 1;
                db.compact().unwrap();
            }
            _ => {
                reopens += 1;
                round += 1;
                snapshots.clear();
                drop(db);
                db = Db::open(dir.path(), options(round)).unwrap();
            }
        }
    }
    let got: Vec<(Vec<u8>, Vec<u8>)> = db.iter().map(|r| r.unwrap()).collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
    assert_eq!(got, want, "the final full scan");
    let stats = db.statistics();
    assert!(ranges > 100 && reopens > 0 && compactions > 0);
    assert!(
        stats.ticker(Ticker::RangeDeleteCovered) > 0,
        "no lookup met a range tombstone"
    );
    eprintln!(
        "{ops} ops: {ranges} range deletes, {compactions} compactions, {reopens} reopens, \
         {} lookups covered by a range tombstone",
        stats.ticker(Ticker::RangeDeleteCovered)
    );
}

/// Where a range delete of `range_deletes_of_every_bound_shape_match_a_model` is written.
#[derive(Debug, Clone, Copy)]
enum Via {
    Keyspace,
    Batch,
    BatchIn,
    Transaction,
    TransactionIn,
}

/// Deletes `range` from `ks` the way `via` says, and from `model`.
fn delete_range_via<R: KeyRange + Clone>(
    db: &Db,
    ks: &Keyspace,
    via: Via,
    range: R,
    model: &mut Model,
) {
    let (start, end) = range.clone().into_bounds();
    model.retain(|k, _| {
        let after_start = match &start {
            Bound::Included(s) => k >= s,
            Bound::Excluded(s) => k > s,
            Bound::Unbounded => true,
        };
        let before_end = match &end {
            Bound::Included(e) => k <= e,
            Bound::Excluded(e) => k < e,
            Bound::Unbounded => true,
        };
        !(after_start && before_end)
    });
    match via {
        Via::Keyspace => ks.delete_range(range).unwrap(),
        Via::Batch => {
            let mut b = WriteBatch::new();
            b.delete_range(range);
            ks.write(b).unwrap();
        }
        Via::BatchIn => {
            let mut b = WriteBatch::new();
            b.delete_range_in(ks, range);
            db.write(b).unwrap();
        }
        Via::Transaction => {
            let mut tx = ks.transaction();
            tx.delete_range(range).unwrap();
            tx.commit().unwrap();
        }
        Via::TransactionIn => {
            let mut tx = db.transaction();
            tx.delete_range_in(ks, range).unwrap();
            tx.commit().unwrap();
        }
    }
}

/// Every shape of range `scan` takes (`a..b`, `a..=b`, `a..`, `..b`, `..=b`, `..`, and pairs of
/// bounds with an excluded start), deleted through a keyspace, a batch (plain and `_in`) and a
/// transaction (plain and `_in`), against a model, read back by scans both ways and Gets
/// through flushes, compactions and a reopen.
#[test]
fn range_deletes_of_every_bound_shape_match_a_model() {
    let seed = env_u64("SIFTDB_MODEL_SEED", 0x5_4a9e);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = scratch();
    let mut db = Db::open(dir.path(), options(0)).unwrap();
    let mut model = Model::new();
    let vias = [
        Via::Keyspace,
        Via::Batch,
        Via::BatchIn,
        Via::Transaction,
        Via::TransactionIn,
    ];
    let ops = env_u64("SIFTDB_MODEL_OPS", 40_000) / 80;
    for op in 0..ops {
        let ks = db.keyspace("shapes").unwrap();
        // The default keyspace, written alongside, keeps every key.
        let (k, v) = (random_key(&mut rng), random_value(&mut rng));
        db.put(&k, &v).unwrap();
        for _ in 0..rng.gen_range(1..30) {
            let (k, v) = (random_key(&mut rng), random_value(&mut rng));
            ks.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        let via = vias[rng.gen_range(0..vias.len())];
        let (mut a, mut b) = random_range(&mut rng);
        if a > b {
            std::mem::swap(&mut a, &mut b);
        }
        let shape = rng.gen_range(0..9);
        match shape {
            0 => delete_range_via(&db, &ks, via, a..b, &mut model),
            1 => delete_range_via(&db, &ks, via, a..=b, &mut model),
            // An open end or start is rare: it empties much of the keyspace.
            2 if rng.gen_bool(0.3) => delete_range_via(&db, &ks, via, a.., &mut model),
            3 if rng.gen_bool(0.3) => delete_range_via(&db, &ks, via, ..b, &mut model),
            4 if rng.gen_bool(0.3) => delete_range_via(&db, &ks, via, ..=b, &mut model),
            5 if rng.gen_bool(0.1) => delete_range_via(&db, &ks, via, .., &mut model),
            6 => delete_range_via(
                &db,
                &ks,
                via,
                (Bound::Excluded(a), Bound::Included(b)),
                &mut model,
            ),
            7 if rng.gen_bool(0.3) => delete_range_via(
                &db,
                &ks,
                via,
                (Bound::Excluded(a), Bound::Unbounded),
                &mut model,
            ),
            _ => delete_range_via(
                &db,
                &ks,
                via,
                (Bound::Excluded(a), Bound::Excluded(b)),
                &mut model,
            ),
        }
        let ctx = format!("seed {seed:#x}, op {op}, shape {shape}, {via:?}");
        match rng.gen_range(0..20) {
            0 => ks.flush().unwrap(),
            1 => ks.compact().unwrap(),
            2 => {
                drop(ks);
                drop(db);
                db = Db::open(dir.path(), options(0)).unwrap();
                continue;
            }
            _ => {}
        }
        let want: Vec<(Vec<u8>, Vec<u8>)> =
            model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let got: Vec<_> = ks.iter().map(Result::unwrap).collect();
        assert_eq!(got, want, "{ctx}: forward");
        let back: Vec<_> = ks.scan(..).rev().map(Result::unwrap).collect();
        assert_eq!(back.len(), want.len(), "{ctx}: backward");
        let k = random_key(&mut rng);
        assert_eq!(ks.get(&k).unwrap(), model.get(&k).cloned(), "{ctx}: get");
    }
    assert!(db.iter().count() > 0, "the default keyspace kept its keys");
}
