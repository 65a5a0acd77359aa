//! Model-based test: a store whose keys take merge operands, against a `BTreeMap`. A seeded random
//! mix of merges (alone, in batches and in transactions) with puts, deletes, range deletes,
//! snapshots, flushes, compactions and reopens; after each step a random read through every read
//! path (`get`, `get_pinned`, `multi_get`, `scan` both ways, the cursor both ways, each of them
//! at a live snapshot, and a transaction's `get` and `scan` over its own merges) is compared with
//! the model. The operator appends with a separator, so the order of operands shows; it runs
//! once with its partial merge and once without (flushes and compactions then keep operands
//! they cannot resolve as written).
//!
//! `SIFTDB_MODEL_OPS` sets the number of operations of each run (default 15,000; 500,000 with
//! `SIFTDB_LONG=1`); `SIFTDB_MODEL_SEED` the seed.

use crate::common::scratch;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use rand::{rngs::StdRng, Rng, SeedableRng};
use siftdb::{Append, Db, MergeOperator, Options, Snapshot, WriteBatch};

use crate::common::{env_number, long};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// [`Append`] without its partial merge.
struct AppendWhole(Append);

impl MergeOperator for AppendWhole {
    fn name(&self) -> &str {
        "test.AppendWhole"
    }
    fn full_merge(&self, key: &[u8], existing: Option<&[u8]>, ops: &[&[u8]]) -> Option<Vec<u8>> {
        self.0.full_merge(key, existing, ops)
    }
}

fn options(operator: &Arc<dyn MergeOperator>) -> Options {
    // Small memtables and tables, so that a key's operands spread over memtables, L0 and the
    // levels, and every compaction meets chains.
    Options::default()
        .write_buffer_size(16 << 10)
        .target_file_size(8 << 10)
        .max_bytes_for_level_base(32 << 10)
        .block_size(512)
        .merge_operator(Arc::clone(operator))
}

fn key(n: u32) -> Vec<u8> {
    format!("key{n:03}").into_bytes()
}

fn random_key(rng: &mut StdRng) -> Vec<u8> {
    key(rng.gen_range(0..400))
}

fn random_operand(rng: &mut StdRng) -> Vec<u8> {
    let len = rng.gen_range(1..6);
    (0..len).map(|_| rng.gen_range(b'a'..=b'z')).collect()
}

/// What a merge of `operand` makes of `key` in `model`.
fn merge_in_model(model: &mut Model, key: &[u8], operand: &[u8]) {
    match model.get_mut(key) {
        Some(v) => {
            v.push(b',');
            v.extend_from_slice(operand);
        }
        None => {
            model.insert(key.to_vec(), operand.to_vec());
        }
    }
}

fn random_range(rng: &mut StdRng) -> (Vec<u8>, Vec<u8>) {
    let a = rng.gen_range(0..400);
    (key(a), key(a + rng.gen_range(0..20)))
}

fn delete_range_in_model(model: &mut Model, start: &[u8], end: &[u8]) {
    model.retain(|k, _| !(k.as_slice() >= start && k.as_slice() < end));
}

/// Compares one random read of `db` (at `snapshot`, if given) with `model`.
fn check_a_read(db: &Db, snapshot: Option<&Snapshot>, model: &Model, rng: &mut StdRng, ctx: &str) {
    match rng.gen_range(0..5) {
        0 => {
            let k = random_key(rng);
            let got = match snapshot {
                Some(s) => db.get_at(s, &k).unwrap(),
                None => db.get(&k).unwrap(),
            };
            assert_eq!(got, model.get(&k).cloned(), "get {k:?} at {ctx}");
            let pinned = match snapshot {
                Some(s) => db.get_pinned_at(s, &k).unwrap(),
                None => db.get_pinned(&k).unwrap(),
            };
            assert_eq!(
                pinned.map(|v| v.to_vec()),
                model.get(&k).cloned(),
                "get_pinned at {ctx}"
            );
        }
        1 => {
            let keys: Vec<Vec<u8>> = (0..rng.gen_range(1..30)).map(|_| random_key(rng)).collect();
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
        2 => {
            let a = rng.gen_range(0..400);
            let (lo, hi) = (key(a), key(a + rng.gen_range(0..80)));
            let limit = rng.gen_range(1..100);
            let scan = match snapshot {
                Some(s) => db.scan_at(s, lo.clone()..hi.clone()),
                None => db.scan(lo.clone()..hi.clone()),
            };
            let reverse = rng.gen_bool(0.5);
            let got: Vec<(Vec<u8>, Vec<u8>)> = match reverse {
                true => scan.rev().take(limit).map(|r| r.unwrap()).collect(),
                false => scan.take(limit).map(|r| r.unwrap()).collect(),
            };
            let range = model.range(lo..hi).map(|(k, v)| (k.clone(), v.clone()));
            let want: Vec<(Vec<u8>, Vec<u8>)> = match reverse {
                true => range.rev().take(limit).collect(),
                false => range.take(limit).collect(),
            };
            assert_eq!(got, want, "scan (reverse: {reverse}) at {ctx}");
        }
        _ => {
            // The cursor: a seek, then steps both ways, turning around at random.
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
                model.range(..=target).next_back().map(|(k, _)| k.clone())
            };
            for _ in 0..rng.gen_range(1..30) {
                let Some(k) = at.clone() else {
                    assert!(!c.valid(), "cursor went on past the model at {ctx}");
                    break;
                };
                assert!(c.valid(), "cursor ended early at {ctx}");
                assert_eq!(c.key(), k.as_slice(), "cursor key at {ctx}");
                assert_eq!(c.value(), model[&k].as_slice(), "cursor value at {ctx}");
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

/// A transaction that merges, puts and deletes, reading its own writes on the way (against a copy
/// of the model), then commits (and the model takes its writes) or rolls back.
fn transaction(db: &Db, model: &mut Model, rng: &mut StdRng, ctx: &str) {
    let mut txn = db.transaction();
    let mut own = model.clone();
    for _ in 0..rng.gen_range(1..8) {
        let k = random_key(rng);
        match rng.gen_range(0..10) {
            0 => {
                txn.delete(&k).unwrap();
                own.remove(&k);
            }
            1 => {
                let v = random_operand(rng);
                txn.put(&k, &v).unwrap();
                own.insert(k.clone(), v);
            }
            _ => {
                let op = random_operand(rng);
                txn.merge(&k, &op).unwrap();
                merge_in_model(&mut own, &k, &op);
            }
        }
        assert_eq!(
            txn.get(&k).unwrap(),
            own.get(&k).cloned(),
            "txn get at {ctx}"
        );
    }
    let (lo, hi) = random_range(rng);
    let got: Vec<(Vec<u8>, Vec<u8>)> = txn
        .scan(lo.clone()..hi.clone())
        .map(|r| r.unwrap())
        .collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> = own
        .range(lo..hi)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(got, want, "txn scan at {ctx}");
    if rng.gen_bool(0.8) {
        txn.commit().unwrap();
        *model = own;
    }
}

fn a_store_of_merges_matches_a_btreemap_model(operator: Arc<dyn MergeOperator>, seed: u64) {
    let ops = env_number("SIFTDB_MODEL_OPS", if long() { 500_000 } else { 15_000 });
    let seed = env_number("SIFTDB_MODEL_SEED", seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = scratch();
    let mut db = Db::open(dir.path(), options(&operator)).unwrap();
    let mut model = Model::new();
    let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
    let (mut merges, mut reopens, mut compactions) = (0, 0, 0);
    for op in 0..ops {
        let ctx = format!("seed {seed:#x}, op {op}");
        match rng.gen_range(0..1000) {
            0..=399 => {
                merges += 1;
                let (k, o) = (random_key(&mut rng), random_operand(&mut rng));
                db.merge(&k, &o).unwrap();
                merge_in_model(&mut model, &k, &o);
            }
            400..=469 => {
                let (k, v) = (random_key(&mut rng), random_operand(&mut rng));
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            470..=499 => {
                let k = random_key(&mut rng);
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            500..=514 => {
                let (start, end) = random_range(&mut rng);
                db.delete_range(start.clone()..end.clone()).unwrap();
                delete_range_in_model(&mut model, &start, &end);
            }
            515..=544 => {
                // A batch of merges (several into one key, often), puts and deletes, in order.
                let mut batch = WriteBatch::new();
                for _ in 0..rng.gen_range(1..10) {
                    let k = key(rng.gen_range(0..20) * 20);
                    match rng.gen_range(0..6) {
                        0 => {
                            batch.delete(&k);
                            model.remove(&k);
                        }
                        1 => {
                            let v = random_operand(&mut rng);
                            batch.put(&k, &v);
                            model.insert(k, v);
                        }
                        _ => {
                            let o = random_operand(&mut rng);
                            batch.merge(&k, &o);
                            merge_in_model(&mut model, &k, &o);
                        }
                    }
                }
                db.write(batch).unwrap();
            }
            545..=564 => transaction(&db, &mut model, &mut rng, &ctx),
            565..=574 => {
                if snapshots.len() >= 3 {
                    snapshots.remove(rng.gen_range(0..snapshots.len()));
                }
                snapshots.push((db.snapshot(), model.clone()));
            }
            575..=979 => {
                if !snapshots.is_empty() && rng.gen_bool(0.3) {
                    let (s, m) = &snapshots[rng.gen_range(0..snapshots.len())];
                    check_a_read(&db, Some(s), m, &mut rng, &format!("{ctx} (snapshot)"));
                } else {
                    check_a_read(&db, None, &model, &mut rng, &ctx);
                }
            }
            980..=994 => db.flush().unwrap(),
            995..=997 => {
                compactions += 1;
                db.compact().unwrap();
            }
            _ => {
                reopens += 1;
                snapshots.clear();
                drop(db);
                db = Db::open(dir.path(), options(&operator)).unwrap();
            }
        }
    }
    let got: Vec<(Vec<u8>, Vec<u8>)> = db.iter().map(|r| r.unwrap()).collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
    assert_eq!(got, want, "the final full scan");
    assert!(merges > ops / 4 && reopens > 0 && compactions > 0);
    eprintln!(
        "{} ({ops} ops): {merges} merges, {compactions} compactions, {reopens} reopens",
        operator.name()
    );
}

#[test]
fn a_store_of_merges_with_partial_merges_matches_a_btreemap_model() {
    a_store_of_merges_matches_a_btreemap_model(Arc::new(Append::new(",")), 0x6e76_0001);
}

#[test]
fn a_store_of_merges_without_partial_merges_matches_a_btreemap_model() {
    let whole = AppendWhole(Append::new(","));
    a_store_of_merges_matches_a_btreemap_model(Arc::new(whole), 0x6e76_0002);
}
