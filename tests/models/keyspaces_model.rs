//! Model-based test: the keyspaces of a store against a `BTreeMap` per keyspace, over a seeded
//! random mix of puts, deletes, batches across keyspaces, gets, scans, prefix scans, reads at
//! snapshots, flushes, compactions, drops, re-creations under the same names (with other options)
//! and reopens. Memtables, tables and levels are tiny, so flushes and compactions happen all the
//! time and every keyspace's tree has several levels. Every read is checked; so are the keyspace
//! names after every drop, creation and reopen, and handles kept from dropped keyspaces must fail.
//!
//! The store lives on tmpfs where there is one. Short mode (plain `cargo test`): 100,000
//! operations. `SIFTDB_LONG=1`: 2,000,000.
//! `SIFTDB_KS_MODEL_OPS=n`: any number; `SIFTDB_KS_MODEL_SEED=s`: another random sequence.

use crate::common;
use common::keyspaces::{assert_invalid_argument_naming, contents};
use common::{long, scratch};
use std::collections::BTreeMap;
use std::ops::Bound;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use siftdb::{Db, Filter, Keyspace, Options, PrefixExtractor, WriteBatch};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// The keyspace names the test uses; "default" is always there.
const NAMES: [&str; 5] = ["default", "a", "b", "c", "d"];

fn tiny() -> Options {
    Options::default()
        .write_buffer_size(4096)
        .target_file_size(4096)
        .max_bytes_for_level_base(16 << 10)
        .level_size_multiplier(4)
        .level0_compaction_trigger(2)
        .block_size(512)
        .block_cache_bytes(256 << 10)
}

/// Options for a new keyspace: tiny sizes, and one of several filters (with a prefix extractor
/// now and then).
fn keyspace_options(rng: &mut StdRng) -> Options {
    match rng.gen_range(0..6) {
        0 => tiny().filter(Filter::full(10.0)),
        1 => tiny().filter(Filter::none()),
        2 => tiny()
            .filter(Filter::partitioned(10.0).partition_bytes(256))
            .prefix_extractor(PrefixExtractor::fixed(4)),
        3 => tiny()
            .filter(Filter::full(8.0))
            .prefix_extractor(PrefixExtractor::fixed(4))
            .whole_key_filtering(false),
        4 => tiny().filter(Filter::block_based(10.0)),
        _ => tiny().filter(Filter::ribbon(10.0)),
    }
}

fn random_key(rng: &mut StdRng) -> Vec<u8> {
    // A small key space so overwrites and deletes hit existing keys often; varied lengths, keys
    // that are prefixes of others, and the empty key.
    let n = rng.gen_range(0..800u32);
    match n % 9 {
        0 => format!("k{n}").into_bytes(),
        1 if n < 20 => Vec::new(),
        _ => format!("key{n:04}").into_bytes(),
    }
}

fn random_value(rng: &mut StdRng) -> Vec<u8> {
    let len = match rng.gen_range(0..12) {
        0 => 0,
        1 => rng.gen_range(300..1500),
        _ => rng.gen_range(1..50),
    };
    (0..len).map(|_| rng.r#gen()).collect()
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// The names `keyspace_names` must return: "default", then the others in name order.
fn expected_names(models: &BTreeMap<String, Map>) -> Vec<String> {
    let mut names = vec!["default".to_string()];
    names.extend(models.keys().filter(|n| *n != "default").cloned());
    names
}

/// The store's open keyspaces (a handle and a model each), and handles kept from dropped ones.
struct World {
    handles: BTreeMap<String, Keyspace>,
    models: BTreeMap<String, Map>,
    stale: Vec<Keyspace>,
}

impl World {
    fn pick(&self, rng: &mut StdRng) -> String {
        let names: Vec<&String> = self.models.keys().collect();
        names[rng.gen_range(0..names.len())].clone()
    }
}

fn random_bounds(rng: &mut StdRng) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let a = random_key(rng);
    let b = random_key(rng);
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    match rng.gen_range(0..5) {
        0 => (Bound::Included(lo), Bound::Excluded(hi)),
        1 => (Bound::Excluded(lo), Bound::Included(hi)),
        2 => (Bound::Included(lo), Bound::Unbounded),
        3 => (Bound::Unbounded, Bound::Included(hi)),
        _ => (Bound::Unbounded, Bound::Unbounded),
    }
}

#[test]
fn keyspaces_behave_like_a_btreemap_per_keyspace() {
    let ops = env_u64("SIFTDB_KS_MODEL_OPS").unwrap_or(if long() { 2_000_000 } else { 100_000 });
    let seed = env_u64("SIFTDB_KS_MODEL_SEED").unwrap_or(0x6b73_0001);
    let started = std::time::Instant::now();
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = scratch();
    let mut db = Db::open(dir.path(), tiny()).unwrap();
    let mut w = World {
        handles: BTreeMap::from([("default".to_string(), db.default_keyspace())]),
        models: BTreeMap::from([("default".to_string(), Map::new())]),
        stale: Vec::new(),
    };
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for op in 0..ops {
        let what = format!("seed {seed:#x}, op {op}");
        let name = w.pick(&mut rng);
        let ks = w.handles[&name].clone();
        let kind = match rng.gen_range(0..1000) {
            0..=329 => {
                let (k, v) = (random_key(&mut rng), random_value(&mut rng));
                ks.put(&k, &v).unwrap();
                w.models.get_mut(&name).unwrap().insert(k, v);
                "put"
            }
            330..=419 => {
                let k = random_key(&mut rng);
                ks.delete(&k).unwrap();
                w.models.get_mut(&name).unwrap().remove(&k);
                "delete"
            }
            420..=499 => {
                // A batch across keyspaces; `put`/`delete` without one act on "default".
                let mut batch = WriteBatch::new();
                for _ in 0..rng.gen_range(1..12) {
                    let target = w.pick(&mut rng);
                    let k = random_key(&mut rng);
                    let plain = target == "default" && rng.gen_bool(0.5);
                    let h = &w.handles[&target];
                    let model = w.models.get_mut(&target).unwrap();
                    if rng.gen_bool(0.75) {
                        let v = random_value(&mut rng);
                        if plain {
                            batch.put(&k, &v);
                        } else {
                            batch.put_in(h, &k, &v);
                        }
                        model.insert(k, v);
                    } else {
                        if plain {
                            batch.delete(&k);
                        } else {
                            batch.delete_in(h, &k);
                        }
                        model.remove(&k);
                    }
                }
                db.write(batch).unwrap();
                "batch"
            }
            500..=799 => {
                let k = random_key(&mut rng);
                let model = &w.models[&name];
                let got = if name == "default" && rng.gen_bool(0.3) {
                    db.get(&k).unwrap()
                } else {
                    ks.get(&k).unwrap()
                };
                assert_eq!(
                    got.as_ref(),
                    model.get(&k),
                    "{what}: get {:?} in {name}",
                    String::from_utf8_lossy(&k)
                );
                "get"
            }
            800..=889 => {
                let model = &w.models[&name];
                let limit = rng.gen_range(1..150);
                if rng.gen_bool(0.25) {
                    let k = random_key(&mut rng);
                    let prefix = k[..rng.gen_range(0..=4).min(k.len())].to_vec();
                    let got: Vec<(Vec<u8>, Vec<u8>)> = ks
                        .scan_prefix(&prefix)
                        .take(limit)
                        .map(|r| r.unwrap())
                        .collect();
                    let want: Vec<(Vec<u8>, Vec<u8>)> = model
                        .range(prefix.clone()..)
                        .take_while(|(k, _)| k.starts_with(&prefix))
                        .take(limit)
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    assert_eq!(got, want, "{what}: prefix scan {prefix:?} in {name}");
                } else {
                    let bounds = random_bounds(&mut rng);
                    let backward = rng.gen_bool(0.3);
                    let scan = ks.scan(bounds.clone());
                    let got: Vec<(Vec<u8>, Vec<u8>)> = if backward {
                        scan.rev().take(limit).map(|r| r.unwrap()).collect()
                    } else {
                        scan.take(limit).map(|r| r.unwrap()).collect()
                    };
                    let range = model.range(bounds);
                    let want: Vec<(Vec<u8>, Vec<u8>)> = if backward {
                        range
                            .rev()
                            .take(limit)
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect()
                    } else {
                        range
                            .take(limit)
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect()
                    };
                    assert_eq!(got, want, "{what}: scan in {name} (backward {backward})");
                }
                "scan"
            }
            890..=919 => {
                // A snapshot, then writes to every keyspace: it still sees the models as they were.
                let snap = db.snapshot();
                let then = w.models.clone();
                for (n, h) in &w.handles {
                    let k = random_key(&mut rng);
                    h.put(&k, b"after the snapshot").unwrap();
                    w.models
                        .get_mut(n)
                        .unwrap()
                        .insert(k, b"after the snapshot".to_vec());
                }
                for (n, h) in &w.handles {
                    let seen: Map = h.iter_at(&snap).map(|r| r.unwrap()).collect();
                    assert!(seen == then[n], "{what}: keyspace {n} at a snapshot");
                    let k = random_key(&mut rng);
                    assert_eq!(
                        h.get_at(&snap, &k).unwrap().as_ref(),
                        then[n].get(&k),
                        "{what}: get at a snapshot in {n}"
                    );
                }
                "snapshot"
            }
            920..=949 => {
                if rng.gen_bool(0.2) {
                    db.flush().unwrap();
                } else {
                    ks.flush().unwrap();
                }
                "flush"
            }
            950..=959 => {
                ks.compact().unwrap();
                "compact"
            }
            960..=971 => {
                // Drop a keyspace other than "default"; keep a handle to it now and then.
                if name == "default" {
                    continue;
                }
                db.drop_keyspace(&name)
                    .unwrap_or_else(|e| panic!("{what}: drop {name}: {e}"));
                let old = w.handles.remove(&name).unwrap();
                w.models.remove(&name);
                assert_invalid_argument_naming(old.get(b"key0001"), &name, &what);
                if rng.gen_bool(0.5) && w.stale.len() < 4 {
                    w.stale.push(old);
                }
                assert_eq!(db.keyspace_names(), expected_names(&w.models), "{what}");
                "drop"
            }
            972..=989 => {
                // Create a missing keyspace (perhaps one dropped before), with fresh options.
                let missing: Vec<&str> = NAMES
                    .iter()
                    .copied()
                    .filter(|n| !w.models.contains_key(*n))
                    .collect();
                if missing.is_empty() {
                    continue;
                }
                let new = missing[rng.gen_range(0..missing.len())].to_string();
                let options = keyspace_options(&mut rng);
                let h = db.keyspace_with(&new, options).unwrap();
                assert!(
                    contents(&h).is_empty(),
                    "{what}: new keyspace {new} is not empty"
                );
                w.handles.insert(new.clone(), h);
                w.models.insert(new, Map::new());
                assert_eq!(db.keyspace_names(), expected_names(&w.models), "{what}");
                "create"
            }
            990..=993 => {
                // A handle kept from a dropped keyspace fails, even if its name was used again.
                if let Some(old) = w.stale.first() {
                    let name = old.name().to_string();
                    assert_invalid_argument_naming(old.put(b"x", b"y"), &name, &what);
                    let first = old
                        .iter()
                        .next()
                        .expect("a scan of a dropped keyspace errs");
                    assert_invalid_argument_naming(first, &name, &what);
                }
                "stale handle"
            }
            _ => {
                // Every handle keeps the store open: all go before the reopen.
                drop(ks);
                w.handles.clear();
                w.stale.clear();
                drop(db);
                db = Db::open(dir.path(), tiny())
                    .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
                assert_eq!(db.keyspace_names(), expected_names(&w.models), "{what}");
                for n in w.models.keys() {
                    let h = db.keyspace(n).unwrap();
                    w.handles.insert(n.clone(), h);
                }
                "reopen"
            }
        };
        *counts.entry(kind).or_default() += 1;
    }
    // Full scans of every keyspace agree at the end.
    for (n, h) in &w.handles {
        assert!(
            contents(h) == w.models[n],
            "seed {seed:#x}: keyspace {n} at the end"
        );
    }
    for kind in ["drop", "create", "reopen", "compact", "snapshot"] {
        assert!(
            counts.get(kind).copied().unwrap_or(0) > 0,
            "no {kind} in {ops} ops"
        );
    }
    eprintln!(
        "keyspace model (seed {seed:#x}): {ops} ops in {:.1?}: {counts:?}",
        started.elapsed()
    );
}
