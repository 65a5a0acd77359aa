//! `Db::multi_get` against single Gets and a `BTreeMap` model.
//!
//! - `multi_get_matches_single_gets_and_a_btreemap`: a seeded random mix of puts, deletes,
//!   overwrites, flushes, compactions and reopens, with every filter layout and Ribbon, full
//!   filters kept with their tables and charged to the block cache (tiny tables, so keys sit in
//!   the memtable, in frozen memtables, in L0 and in every level); random batches of present,
//!   absent, deleted and duplicated keys, in random order, must equal the model key by key and
//!   the single Gets, and count exactly the filter statistics that single Gets of the distinct
//!   keys count. Batches at a snapshot must equal the snapshot's model.
//! - A damaged data block fails only the keys whose lookup reads it.

use crate::common;
use common::scratch;

use std::collections::BTreeMap;

use rand::{rngs::StdRng, Rng, SeedableRng};
use siftdb::{Db, Error, Filter, Options, Snapshot, Ticker, WriteBatch};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options(round: u64) -> Options {
    let filter = match round % 6 {
        0 | 5 => Filter::full(10.0),
        1 => Filter::block_based(8.0),
        2 => Filter::partitioned(10.0).partition_bytes(256),
        3 => Filter::ribbon(7.0),
        _ => Filter::none(),
    };
    Options::default()
        // Full filters in the block cache, but L0's pinned: the batch's walk through the filters
        // in memory hands the keys over to the table searches half way.
        .cache_index_and_filter_blocks(round % 6 == 5)
        .pin_l0_filter_and_index_blocks_in_cache(true)
        .write_buffer_size(8 << 10)
        .target_file_size(8 << 10)
        .max_bytes_for_level_base(24 << 10)
        .block_size(512)
        .block_cache_bytes(64 << 10)
        .filter(filter)
}

/// Short keys, keys longer than 16 bytes that share their first 16, and keys holding zero bytes
/// (a prefix of another key with zeros after it), so that the batch's sort meets every case.
fn key(n: u32) -> Vec<u8> {
    if n.is_multiple_of(11) {
        format!("k{n}").into_bytes()
    } else if n.is_multiple_of(13) {
        format!("a-shared-long-prefix:{n}").into_bytes()
    } else if n.is_multiple_of(17) {
        let mut k = b"key".to_vec();
        k.extend(std::iter::repeat_n(0u8, (n % 3) as usize));
        k.extend(n.to_be_bytes());
        k
    } else {
        format!("key{n:05}").into_bytes()
    }
}

fn random_batch(rng: &mut StdRng, model: &Model) -> Vec<Vec<u8>> {
    let len = rng.gen_range(0..48);
    let present: Vec<&Vec<u8>> = model.keys().collect();
    let mut batch = Vec::with_capacity(len);
    for _ in 0..len {
        match rng.gen_range(0..10) {
            0..=4 if !present.is_empty() => {
                batch.push(present[rng.gen_range(0..present.len())].clone())
            }
            5 if !batch.is_empty() => {
                let dup = batch[rng.gen_range(0..batch.len())].clone();
                batch.push(dup);
            }
            _ => batch.push(key(rng.gen_range(0..4000))),
        }
    }
    batch
}

/// The three bloom tickers, in total over levels and layouts.
fn filter_tickers(db: &Db) -> [u64; 3] {
    let s = db.statistics();
    [
        s.ticker(Ticker::BloomFilterUseful),
        s.ticker(Ticker::BloomFilterFullPositive),
        s.ticker(Ticker::BloomFilterFullTruePositive),
    ]
}

/// The shape of the tree: tables per level and their bytes. Background flushes and compactions
/// change it; reads do not.
fn shape(db: &Db) -> Vec<String> {
    let mut shape: Vec<String> = (0..siftdb::NUM_LEVELS)
        .map(|l| {
            db.property(&format!("siftdb.num-files-at-level{l}"))
                .unwrap()
        })
        .collect();
    shape.push(db.property("siftdb.total-sst-bytes").unwrap());
    shape
}

fn check_batch(db: &Db, batch: &[Vec<u8>], model: &Model, ctx: &str) {
    let keys = |db: &Db| {
        let s = db.statistics();
        [
            s.ticker(Ticker::NumberKeysRead),
            s.ticker(Ticker::NumberKeysFound),
        ]
    };
    let before = keys(db);
    let got = db.multi_get(batch);
    let after = keys(db);
    assert_eq!(got.len(), batch.len(), "{ctx}");
    for (k, answer) in batch.iter().zip(&got) {
        let answer = answer.as_ref().unwrap_or_else(|e| panic!("{ctx}: {e}"));
        assert_eq!(answer.as_ref(), model.get(k), "{ctx}: key {k:?}");
    }
    // Keys read and found count every key of the batch, duplicates too, as Gets would.
    let found = batch.iter().filter(|k| model.contains_key(*k)).count() as u64;
    assert_eq!(
        [after[0] - before[0], after[1] - before[1]],
        [batch.len() as u64, found],
        "{ctx}: keys read and found"
    );
    // Single Gets of the same keys, each once (a batch looks a duplicate up once), ask the same
    // filters the same questions, on the same tree: a background flush or compaction between
    // the two changes which tables there are to ask, so then the comparison is made again.
    let distinct: std::collections::BTreeSet<&Vec<u8>> = batch.iter().collect();
    for attempt in 0.. {
        let tree = shape(db);
        let before = filter_tickers(db);
        let _ = db.multi_get(batch);
        let batched = filter_tickers(db);
        for &k in &distinct {
            assert_eq!(
                db.get(k).unwrap().as_ref(),
                model.get(k),
                "{ctx}: get {k:?}"
            );
        }
        let single = filter_tickers(db);
        if shape(db) != tree && attempt < 50 {
            std::thread::sleep(std::time::Duration::from_millis(10));
            continue;
        }
        for t in 0..3 {
            assert_eq!(
                batched[t] - before[t],
                single[t] - batched[t],
                "{ctx}: ticker {t} counted differently by multi_get and get"
            );
        }
        break;
    }
}

#[test]
fn multi_get_matches_single_gets_and_a_btreemap() {
    let mut rng = StdRng::seed_from_u64(0x3017);
    let dir = scratch();
    let mut round = 0;
    let mut db = Db::open(dir.path(), options(round)).unwrap();
    let mut model = Model::new();
    let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
    let mut batches = 0;
    for op in 0..6000 {
        let ctx = format!("op {op}");
        match rng.gen_range(0..100) {
            0..=59 => {
                let mut b = WriteBatch::new();
                for _ in 0..rng.gen_range(1..6) {
                    let k = key(rng.gen_range(0..4000));
                    if rng.gen_bool(0.25) {
                        b.delete(&k);
                        model.remove(&k);
                    } else {
                        let v = format!("{op}-{}", "v".repeat(rng.gen_range(0..80)));
                        b.put(&k, v.as_bytes());
                        model.insert(k, v.into_bytes());
                    }
                }
                db.write(b).unwrap();
            }
            60..=84 => {
                batches += 1;
                let batch = random_batch(&mut rng, &model);
                check_batch(&db, &batch, &model, &ctx);
                if let Some((snapshot, then)) = snapshots.last() {
                    let batch = random_batch(&mut rng, then);
                    for (k, v) in batch.iter().zip(db.multi_get_at(snapshot, &batch)) {
                        assert_eq!(v.unwrap().as_ref(), then.get(k), "{ctx}: at snapshot");
                    }
                }
            }
            85..=88 => {
                if snapshots.len() < 3 {
                    snapshots.push((db.snapshot(), model.clone()));
                } else {
                    snapshots.remove(0);
                }
            }
            89..=93 => db.flush().unwrap(),
            94..=97 => db.compact().unwrap(),
            _ => {
                snapshots.clear();
                drop(db);
                round += 1;
                db = Db::open(dir.path(), options(round)).unwrap();
            }
        }
    }
    eprintln!(
        "{batches} batches; tables per level at the end: {:?}",
        common::tables_per_level(&db)
    );
    assert!(batches > 1000);
    // Every key of the model and as many absent ones, in one batch.
    let mut all: Vec<Vec<u8>> = model.keys().cloned().collect();
    all.extend((0..4000).map(key).filter(|k| !model.contains_key(k)));
    check_batch(&db, &all, &model, "every key");
}

#[test]
fn a_damaged_block_fails_only_the_keys_that_read_it() {
    let dir = scratch();
    let opts = || {
        Options::default()
            .block_size(256)
            .compression(siftdb::Compression::None)
            .filter(Filter::full(10.0))
    };
    let db = Db::open(dir.path(), opts()).unwrap();
    for i in 0..2000u32 {
        db.put(key(i * 2), format!("value {i}")).unwrap();
    }
    db.flush().unwrap();
    drop(db);
    // Damage the value of one key in the middle of the table's data.
    let table = common::files_with_ext(dir.path(), "sst")
        .into_iter()
        .next()
        .unwrap();
    let mut bytes = std::fs::read(&table).unwrap();
    let at = bytes.windows(10).position(|w| w == b"value 1000").unwrap();
    bytes[at + 3] ^= 0x55;
    std::fs::write(&table, &bytes).unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let keys: Vec<Vec<u8>> = [0u32, 1000, 1999].iter().map(|i| key(i * 2)).collect();
    let got = db.multi_get(&keys);
    assert_eq!(got[0].as_ref().unwrap(), &Some(b"value 0".to_vec()));
    assert!(
        matches!(&got[1], Err(Error::Corruption { .. })),
        "{:?}",
        got[1]
    );
    assert_eq!(got[2].as_ref().unwrap(), &Some(b"value 1999".to_vec()));
}
