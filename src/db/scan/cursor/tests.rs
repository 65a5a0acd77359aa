//! The cursor against a model of the store, both ways, over memtables and tables.

use std::collections::BTreeMap;

use super::*;
use crate::Options;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Walks `it` against `model` (the live keys it should see): whole walks both ways, then
/// random seeks of every kind, each followed by random steps that turn around often.
fn check(it: &mut Cursor, model: &BTreeMap<Vec<u8>, Vec<u8>>, rng: &mut StdRng) {
    let entries: Vec<(&Vec<u8>, &Vec<u8>)> = model.iter().collect();
    let n = entries.len();
    let at = |it: &Cursor, pos: usize, what: &str| match entries.get(pos) {
        Some((k, v)) => {
            assert!(it.valid(), "{what}: expected {k:?}, iterator invalid");
            assert_eq!((it.key(), it.value()), (&k[..], &v[..]), "{what}");
        }
        None => assert!(!it.valid(), "{what}: expected the end, got {:?}", it.key()),
    };
    it.seek_to_first().unwrap();
    for i in 0..=n {
        at(it, i, "forward walk");
        it.next().unwrap();
    }
    it.seek_to_last().unwrap();
    for i in (0..n).rev() {
        at(it, i, "backward walk");
        it.prev().unwrap();
    }
    at(it, n, "before the first");
    for round in 0..400 {
        let target = format!("k{:03}", rng.gen_range(0..130)).into_bytes();
        let mut pos = match rng.gen_range(0..4) {
            0 => {
                it.seek(&target).unwrap();
                entries.partition_point(|(k, _)| **k < target)
            }
            1 => {
                it.seek_for_prev(&target).unwrap();
                entries
                    .partition_point(|(k, _)| **k <= target)
                    .checked_sub(1)
                    .unwrap_or(n)
            }
            2 => {
                it.seek_to_first().unwrap();
                0
            }
            _ => {
                it.seek_to_last().unwrap();
                n.checked_sub(1).unwrap_or(n)
            }
        };
        at(it, pos, &format!("round {round}: seek"));
        for step in 0..rng.gen_range(0..10) {
            if pos == n {
                break;
            }
            if rng.gen_bool(0.5) {
                it.next().unwrap();
                pos += 1;
            } else {
                it.prev().unwrap();
                pos = pos.checked_sub(1).unwrap_or(n);
            }
            at(it, pos, &format!("round {round}, step {step}"));
        }
        it.status().unwrap();
    }
}

/// Random puts and deletes over a small key space, many versions per key, on a store holding
/// `start`; returns the model after each write (index 0: `start`).
fn write_versions(
    db: &Db,
    rng: &mut StdRng,
    ops: usize,
    start: BTreeMap<Vec<u8>, Vec<u8>>,
) -> Vec<BTreeMap<Vec<u8>, Vec<u8>>> {
    let mut models = vec![start];
    for i in 0..ops {
        let key = format!("k{:03}", rng.gen_range(0..120)).into_bytes();
        let mut model = models.last().cloned().unwrap_or_default();
        if rng.gen_bool(0.3) {
            db.delete(&key).unwrap();
            model.remove(&key);
        } else {
            let value = format!("v{i}").into_bytes();
            db.put(&key, &value).unwrap();
            model.insert(key, value);
        }
        models.push(model);
    }
    models
}

#[test]
fn every_sequence_sees_its_own_versions_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let mut rng = StdRng::seed_from_u64(21);
    // Everything stays in the memtable, every version of every key with it.
    // Sequences start at 1 in a new store, so model i is the store at sequence i.
    let models = write_versions(&db, &mut rng, 1500, BTreeMap::new());
    for seq in [0, 1, 2, 50, 700, 1499, 1500] {
        let mut it = db.cursor_at_sequence(seq);
        check(&mut it, &models[seq as usize], &mut rng);
    }
    let mut it = db.cursor();
    check(&mut it, &models[1500], &mut rng);
}

#[test]
fn memtables_and_tables_merge_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options::default()
        .write_buffer_size(8 << 10)
        .target_file_size(4 << 10)
        .max_bytes_for_level_base(16 << 10);
    let db = Db::open(dir.path(), options).unwrap();
    let mut rng = StdRng::seed_from_u64(22);
    let mut model = BTreeMap::new();
    for round in 0..6 {
        model = write_versions(&db, &mut rng, 600, model).pop().unwrap();
        match round % 3 {
            0 => db.flush().unwrap(),
            1 => db.compact().unwrap(),
            _ => {}
        }
        let mut it = db.cursor();
        check(&mut it, &model, &mut rng);
    }
}

#[test]
fn an_iterator_keeps_what_it_was_created_over() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for i in 0..100 {
        db.put(format!("k{i:03}"), "old").unwrap();
    }
    let mut it = db.cursor();
    for i in 0..100 {
        if i % 2 == 0 {
            db.delete(format!("k{i:03}")).unwrap();
        } else {
            db.put(format!("k{i:03}"), "new").unwrap();
        }
    }
    db.put("k999", "new").unwrap();
    db.compact().unwrap();
    let model: BTreeMap<Vec<u8>, Vec<u8>> = (0..100)
        .map(|i| (format!("k{i:03}").into_bytes(), b"old".to_vec()))
        .collect();
    let mut rng = StdRng::seed_from_u64(23);
    check(&mut it, &model, &mut rng);
}
