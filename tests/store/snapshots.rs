//! Snapshots against a model: a `BTreeMap` per live snapshot. Random puts, deletes and
//! overwrites over a small key space (so every key has many versions), snapshots taken and
//! released at random, flushes and compactions with tiny tables (so versions kept for snapshots
//! cross table and level boundaries), reopens. Every read at a snapshot must return what the
//! model held when the snapshot was taken, and the latest reads the latest.

use crate::common::scratch;
use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use siftdb::{Compression, Db, Filter, Options, Snapshot, WriteBatch};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const KEYS: u32 = 60;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:04}").into_bytes()
}

fn options(filter: Filter) -> Options {
    Options::default()
        .write_buffer_size(4096)
        .target_file_size(4096)
        .max_bytes_for_level_base(16 << 10)
        .level_size_multiplier(4)
        .level0_compaction_trigger(2)
        .block_size(256)
        .filter(filter)
}

fn check(db: &Db, snapshots: &[(Snapshot, Model)], latest: &Model, what: &str) {
    for i in 0..KEYS {
        let k = key(i);
        assert_eq!(
            db.get(&k).unwrap().as_ref(),
            latest.get(&k),
            "{what}: latest {i}"
        );
        for (n, (snapshot, model)) in snapshots.iter().enumerate() {
            assert_eq!(
                db.get_at(snapshot, &k).unwrap().as_ref(),
                model.get(&k),
                "{what}: snapshot {n} (sequence {}), key {i}",
                snapshot.sequence()
            );
        }
    }
}

#[test]
fn reads_at_snapshots_see_the_store_as_it_was_across_flushes_and_compactions() {
    for (seed, filter) in [
        (1, Filter::full(10.0)),
        (2, Filter::partitioned(10.0)),
        (3, Filter::block_based(10.0)),
    ] {
        let mut rng = StdRng::seed_from_u64(seed);
        let dir = scratch();
        let mut db = Db::open(dir.path(), options(filter.clone())).unwrap();
        let mut latest = Model::new();
        let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
        let mut version = 0u64;
        for step in 0..3000 {
            let what = format!("seed {seed}, step {step}");
            match rng.gen_range(0..100) {
                0..=69 => {
                    let mut b = WriteBatch::new();
                    for _ in 0..rng.gen_range(1..4) {
                        let k = key(rng.gen_range(0..KEYS));
                        if rng.gen_bool(0.2) {
                            b.delete(&k);
                            latest.remove(&k);
                        } else {
                            version += 1;
                            let v = format!("v{version}-{}", "x".repeat(rng.gen_range(0..60)));
                            b.put(&k, v.as_bytes());
                            latest.insert(k, v.into_bytes());
                        }
                    }
                    db.write(b).unwrap();
                }
                70..=79 => {
                    if snapshots.len() < 8 {
                        snapshots.push((db.snapshot(), latest.clone()));
                    }
                }
                80..=86 => {
                    if !snapshots.is_empty() {
                        let i = rng.gen_range(0..snapshots.len());
                        snapshots.swap_remove(i);
                    }
                }
                87..=92 => db.flush().unwrap(),
                93..=95 => db.compact().unwrap(),
                96 => {
                    // Snapshots do not outlive the store.
                    snapshots.clear();
                    drop(db);
                    db = Db::open(dir.path(), options(filter.clone())).unwrap();
                    check(&db, &[], &latest, &format!("{what}, reopened"));
                }
                _ => check(&db, &snapshots, &latest, &what),
            }
        }
        check(&db, &snapshots, &latest, &format!("seed {seed}, end"));
        db.compact().unwrap();
        check(&db, &snapshots, &latest, &format!("seed {seed}, compacted"));
        let report = db.property("siftdb.stats").unwrap();
        assert!(
            report.contains(&format!("snapshots: {} live", snapshots.len())),
            "{report}"
        );
    }
}

#[test]
fn released_snapshots_let_compaction_drop_old_versions() {
    let dir = scratch();
    let opts = options(Filter::full(10.0)).compression(Compression::None);
    let db = Db::open(dir.path(), opts).unwrap();
    let bytes = |db: &Db| -> u64 {
        db.property("siftdb.total-sst-bytes")
            .unwrap()
            .parse()
            .unwrap()
    };
    for round in 0..20 {
        for i in 0..KEYS {
            db.put(key(i), format!("round {round}").repeat(20)).unwrap();
        }
    }
    let held = db.snapshot();
    for round in 20..40 {
        for i in 0..KEYS {
            db.put(key(i), format!("round {round}").repeat(20)).unwrap();
        }
    }
    db.compact().unwrap();
    let with_snapshot = bytes(&db);
    assert_eq!(
        db.get_at(&held, key(7)).unwrap(),
        Some(b"round 19".repeat(20))
    );
    drop(held);
    // Rewrite the first and the last key, so the next compaction's range spans every table.
    for i in [0, KEYS - 1] {
        db.put(key(i), "round 39".repeat(20)).unwrap();
    }
    db.compact().unwrap();
    let without = bytes(&db);
    // Two versions of every key while the snapshot lived, one after.
    assert!(
        without * 3 < with_snapshot * 2,
        "{without} bytes after release, {with_snapshot} with the snapshot"
    );
    assert_eq!(db.get(key(7)).unwrap(), Some(b"round 39".repeat(20)));
}

#[test]
#[should_panic(expected = "a snapshot of another siftdb::Db")]
fn a_snapshot_of_another_store_is_refused() {
    let (a, b) = (scratch(), scratch());
    let first = Db::open(a.path(), Options::default()).unwrap();
    let second = Db::open(b.path(), Options::default()).unwrap();
    let snapshot = first.snapshot();
    let _ = second.get_at(&snapshot, b"k");
}
