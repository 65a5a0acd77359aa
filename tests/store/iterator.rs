//! The two-way iterator, reversed scans and snapshots against a `BTreeMap` model per moment, and
//! on damaged tables.
//!
//! - `iterators_scans_and_snapshots_match_a_btreemap_per_snapshot`: a seeded random mix of puts,
//!   deletes, overwrites, batches, flushes, compactions (manual and background) and reopens; at
//!   every checkpoint a `Cursor` is walked both ways and re-sought at random (`seek`,
//!   `seek_for_prev`, `seek_to_first`, `seek_to_last`, then steps that turn around), and
//!   `scan(range)`, `scan(range).rev()`, scans taken from both ends at once and
//!   `scan_prefix(p).rev()` over random ranges are compared with the model, every key and value.
//!   Iterators created at earlier checkpoints are kept across later writes, flushes and
//!   compactions and must still return their own moment's model. Snapshots are taken and released
//!   at random; at each checkpoint one live snapshot is read through `cursor_at`, `scan_at`,
//!   `scan_prefix_at` and `get_at` and compared with the model of its moment (snapshots end at a
//!   reopen). `SIFTDB_ITER_OPS` sets the number of operations (default 6,000; 60,000 with
//!   `SIFTDB_LONG=1`), `SIFTDB_ITER_SEED` the seed.
//! - A cursor or scan outlives its `Db` and keeps the directory's `LOCK` until dropped.
//! - Bytes flipped in a table's data and index blocks: backward walks (`prev`, `seek_for_prev`,
//!   `scan(..).rev()`) return right entries until `Error::Corruption` naming the table, never a
//!   wrong entry or a panic.

use crate::common;
use common::{block_entries, copy_dir, files_with_ext, handle, long, scratch, varint};

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;

use rand::{rngs::StdRng, Rng, SeedableRng};
use siftdb::{
    Compression, Cursor, Db, Error, Filter, Options, PrefixExtractor, Scan, Snapshot, WriteBatch,
};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn options(round: u64) -> Options {
    // Rotate the filter on every reopen, so old tables are read with their own filters; the
    // prefix extractor makes prefix scans skip tables.
    let filter = match round % 3 {
        0 => Filter::full(10.0),
        1 => Filter::partitioned(10.0).partition_bytes(512),
        _ => Filter::block_based(8.0),
    };
    Options::default()
        .write_buffer_size(16 << 10)
        .target_file_size(8 << 10)
        .max_bytes_for_level_base(32 << 10)
        .block_size(512)
        .block_cache_bytes(128 << 10)
        .filter(filter)
        .prefix_extractor(PrefixExtractor::fixed(3))
}

fn random_key(rng: &mut StdRng) -> Vec<u8> {
    // A small key space so overwrites and deletes hit existing keys often; varied lengths,
    // including the empty key, keys shorter than the prefix, and keys that are prefixes of others.
    let n = rng.gen_range(0..1500u32);
    match n % 9 {
        0 if n < 30 => Vec::new(),
        1 => format!("{}", n % 10).into_bytes(),
        2 => format!("k{n}").into_bytes(),
        _ => format!("k{:04}", n).into_bytes(),
    }
}

fn random_value(rng: &mut StdRng) -> Vec<u8> {
    let len = match rng.gen_range(0..10) {
        0 => 0,
        1 => rng.gen_range(200..1500),
        _ => rng.gen_range(1..40),
    };
    (0..len).map(|_| rng.r#gen()).collect()
}

fn show(k: &[u8]) -> String {
    String::from_utf8_lossy(k).into_owned()
}

/// Walks `it` against `model`: whole walks both ways, then `rounds` random seeks of every kind,
/// each followed by random steps that turn around often.
fn check_iterator(it: &mut Cursor, model: &Model, rng: &mut StdRng, rounds: usize, ctx: &str) {
    let entries: Vec<(&Vec<u8>, &Vec<u8>)> = model.iter().collect();
    let n = entries.len();
    let at = |it: &Cursor, pos: usize, what: &str| {
        it.status().unwrap();
        match entries.get(pos) {
            Some((k, v)) => {
                assert!(it.valid(), "{ctx}: {what}: expected {}, invalid", show(k));
                assert_eq!(it.key(), &k[..], "{ctx}: {what}: key");
                assert_eq!(it.value(), &v[..], "{ctx}: {what}: value of {}", show(k));
            }
            None => assert!(
                !it.valid(),
                "{ctx}: {what}: expected the end, got {}",
                show(it.key())
            ),
        }
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
    for round in 0..rounds {
        let target = random_key(rng);
        let (mut pos, what) = match rng.gen_range(0..5) {
            0 | 1 => {
                it.seek(&target).unwrap();
                (entries.partition_point(|(k, _)| **k < target), "seek")
            }
            2 | 3 => {
                it.seek_for_prev(&target).unwrap();
                let after = entries.partition_point(|(k, _)| **k <= target);
                (after.checked_sub(1).unwrap_or(n), "seek_for_prev")
            }
            _ if rng.gen_bool(0.5) => {
                it.seek_to_first().unwrap();
                (0, "seek_to_first")
            }
            _ => {
                it.seek_to_last().unwrap();
                (n.checked_sub(1).unwrap_or(n), "seek_to_last")
            }
        };
        let what = format!("round {round}: {what} {}", show(&target));
        at(it, pos, &what);
        for step in 0..rng.gen_range(0..16) {
            if pos == n {
                // Stepping an iterator that ran off an end leaves it there.
                it.next().unwrap();
                it.prev().unwrap();
                at(it, n, &format!("{what}, stepped at the end"));
                break;
            }
            if rng.gen_bool(0.5) {
                it.next().unwrap();
                pos += 1;
            } else {
                it.prev().unwrap();
                pos = pos.checked_sub(1).unwrap_or(n);
            }
            at(it, pos, &format!("{what}, step {step}"));
        }
    }
}

fn random_bounds(rng: &mut StdRng) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let a = random_key(rng);
    let b = random_key(rng);
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    let bound = |rng: &mut StdRng, k: Vec<u8>| match rng.gen_range(0..5) {
        0 | 1 => Bound::Included(k),
        2 | 3 => Bound::Excluded(k),
        _ => Bound::Unbounded,
    };
    let lo = bound(rng, lo);
    let hi = bound(rng, hi);
    (lo, hi)
}

/// Whether `range` is one `BTreeMap::range` accepts (it panics on start > end, or on equal
/// bounds both excluded); the store's scan of such a range is simply empty.
fn valid_range(range: &(Bound<Vec<u8>>, Bound<Vec<u8>>)) -> bool {
    match range {
        (Bound::Excluded(a), Bound::Excluded(b)) => a < b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
            a <= b
        }
        _ => true,
    }
}

fn model_range(model: &Model, range: &(Bound<Vec<u8>>, Bound<Vec<u8>>)) -> Vec<(Vec<u8>, Vec<u8>)> {
    if !valid_range(range) {
        return Vec::new();
    }
    model
        .range(range.clone())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Scans of random ranges forward, backward, and from both ends at once, of the store as it is
/// or at `snapshot`.
fn check_scans(
    db: &Db,
    snapshot: Option<&Snapshot>,
    model: &Model,
    rng: &mut StdRng,
    count: usize,
    ctx: &str,
) {
    type Range = (Bound<Vec<u8>>, Bound<Vec<u8>>);
    let scan = |range: Range| -> Scan {
        match snapshot {
            Some(s) => db.scan_at(s, range),
            None => db.scan(range),
        }
    };
    for _ in 0..count {
        let range = random_bounds(rng);
        let want = model_range(model, &range);
        let ctx = format!("{ctx}: range {range:?}");
        let forward: Vec<_> = scan(range.clone()).map(|r| r.unwrap()).collect();
        assert_eq!(forward, want, "{ctx}: forward");
        let backward: Vec<_> = scan(range.clone()).rev().map(|r| r.unwrap()).collect();
        let mut want_back = want.clone();
        want_back.reverse();
        assert_eq!(backward, want_back, "{ctx}: reversed");
        // Both ends at once, in a random order: they meet without losing or repeating an entry.
        let mut scan = scan(range.clone());
        let (mut front, mut back) = (Vec::new(), Vec::new());
        loop {
            let item = if rng.gen_bool(0.5) {
                scan.next().map(|r| (true, r.unwrap()))
            } else {
                scan.next_back().map(|r| (false, r.unwrap()))
            };
            match item {
                Some((true, e)) => front.push(e),
                Some((false, e)) => back.push(e),
                None => break,
            }
        }
        assert!(scan.next().is_none() && scan.next_back().is_none(), "{ctx}");
        back.reverse();
        front.extend(back);
        assert_eq!(front, want, "{ctx}: from both ends");
    }
    // Prefix scans, which may skip tables by their prefix filters.
    for _ in 0..count / 4 {
        let k = random_key(rng);
        let prefix = &k[..k.len().min(3)];
        let want: Vec<_> = model
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .rev()
            .collect();
        let got = match snapshot {
            Some(s) => db.scan_prefix_at(s, prefix),
            None => db.scan_prefix(prefix),
        };
        let got: Vec<_> = got.rev().map(|r| r.unwrap()).collect();
        assert_eq!(got, want, "{ctx}: scan_prefix({}).rev()", show(prefix));
    }
}

#[test]
fn iterators_scans_and_snapshots_match_a_btreemap_per_snapshot() {
    let ops = env_u64("SIFTDB_ITER_OPS", if long() { 60_000 } else { 6_000 });
    let seed = env_u64("SIFTDB_ITER_SEED", 0x17e2);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = scratch();
    let mut round = 0;
    let mut db = Db::open(dir.path(), options(round)).unwrap();
    let mut model = Model::new();
    // Iterators kept from earlier checkpoints, with the model of their moment.
    let mut held: Vec<(Cursor, Model)> = Vec::new();
    // Live snapshots, with the model of their moment.
    let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
    let (mut checkpoints, mut flushes, mut compactions, mut reopens) = (0, 0, 0, 0);
    let mut snapshot_checks = 0;
    for op in 0..ops {
        let ctx = format!("seed {seed:#x}, op {op}");
        match rng.gen_range(0..1000) {
            0..=549 => {
                let (k, v) = (random_key(&mut rng), random_value(&mut rng));
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            550..=799 => {
                let k = random_key(&mut rng);
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            800..=879 => {
                let mut batch = WriteBatch::new();
                for _ in 0..rng.gen_range(1..20) {
                    let k = random_key(&mut rng);
                    if rng.gen_bool(0.6) {
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
            880..=979 => {
                checkpoints += 1;
                let mut it = db.cursor();
                check_iterator(&mut it, &model, &mut rng, 150, &ctx);
                check_scans(&db, None, &model, &mut rng, 12, &ctx);
                if rng.gen_bool(0.3) {
                    held.push((it, model.clone()));
                }
                if !snapshots.is_empty() {
                    snapshot_checks += 1;
                    let (snapshot, then) = &snapshots[rng.gen_range(0..snapshots.len())];
                    let ctx = format!("{ctx}: snapshot at {}", snapshot.sequence());
                    check_iterator(&mut db.cursor_at(snapshot), then, &mut rng, 60, &ctx);
                    check_scans(&db, Some(snapshot), then, &mut rng, 4, &ctx);
                    for _ in 0..20 {
                        let k = random_key(&mut rng);
                        assert_eq!(db.get_at(snapshot, &k).unwrap().as_ref(), then.get(&k));
                    }
                }
                match rng.gen_range(0..3) {
                    0 if snapshots.len() < 4 => snapshots.push((db.snapshot(), model.clone())),
                    1 if !snapshots.is_empty() => {
                        snapshots.swap_remove(rng.gen_range(0..snapshots.len()));
                    }
                    _ => {}
                }
                if held.len() > 3 {
                    let (mut it, then) = held.remove(0);
                    check_iterator(&mut it, &then, &mut rng, 100, &format!("{ctx}: held"));
                }
            }
            980..=987 => {
                flushes += 1;
                db.flush().unwrap();
            }
            988..=995 => {
                compactions += 1;
                db.compact().unwrap();
            }
            _ => {
                reopens += 1;
                round += 1;
                // Held iterators still read right after their Db is gone, and keep its LOCK.
                drop(db);
                for (it, then) in &mut held {
                    check_iterator(it, then, &mut rng, 20, &format!("{ctx}: after drop"));
                }
                if !held.is_empty() {
                    assert!(matches!(
                        Db::open(dir.path(), options(round)),
                        Err(Error::Locked(_))
                    ));
                }
                held.clear();
                snapshots.clear();
                db = Db::open(dir.path(), options(round)).unwrap();
                // Across the reopen, every key and value once more, both ways.
                let mut it = db.cursor();
                check_iterator(&mut it, &model, &mut rng, 50, &format!("{ctx}: reopened"));
            }
        }
    }
    let mut it = db.cursor();
    check_iterator(&mut it, &model, &mut rng, 500, "the end");
    check_scans(&db, None, &model, &mut rng, 50, "the end");
    for (snapshot, then) in &snapshots {
        check_iterator(
            &mut db.cursor_at(snapshot),
            then,
            &mut rng,
            100,
            "the end: snapshot",
        );
    }
    for (mut it, then) in held {
        check_iterator(&mut it, &then, &mut rng, 100, "the end: held");
    }
    eprintln!(
        "{ops} ops: {checkpoints} checkpoints ({snapshot_checks} at a snapshot), {flushes} \
         flushes, {compactions} compactions, {reopens} reopens; {} live keys",
        model.len()
    );
    assert!(checkpoints > 10 && flushes > 0 && compactions > 0 && reopens > 0);
    assert!(snapshot_checks > 10);
}

#[test]
fn a_live_iterator_or_scan_keeps_the_lock_after_its_db_is_dropped() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for i in 0..100 {
        db.put(format!("k{i:03}"), format!("v{i}")).unwrap();
    }
    db.flush().unwrap();
    let mut it = db.cursor();
    let mut scan = db.scan(b"k050".to_vec()..);
    drop(db);
    // Both still read, both ways.
    it.seek_to_last().unwrap();
    assert_eq!((it.key(), it.value()), (&b"k099"[..], &b"v99"[..]));
    it.seek_for_prev("k0505").unwrap();
    assert_eq!(it.key(), b"k050");
    assert_eq!(scan.next_back().unwrap().unwrap().0, b"k099");
    assert!(matches!(
        Db::open(dir.path(), Options::default()),
        Err(Error::Locked(_))
    ));
    drop(it);
    // The scan alone still holds it.
    assert!(matches!(
        Db::open(dir.path(), Options::default()),
        Err(Error::Locked(_))
    ));
    assert_eq!(scan.next().unwrap().unwrap().0, b"k050");
    drop(scan);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.iter().rev().count(), 100);
}

// ---------------------------------------------------------------------------------------------
// Damaged tables

const TABLES: usize = 3;
const PER_TABLE: usize = 300;

fn table_key(t: usize, i: usize) -> Vec<u8> {
    format!("{}{i:05}", (b'a' + t as u8) as char).into_bytes()
}

fn table_value(t: usize, i: usize) -> Vec<u8> {
    format!("value-{t}-{i}-{}", "v".repeat(i % 40)).into_bytes()
}

fn table_options() -> Options {
    Options::default()
        .compression(Compression::None)
        .block_size(512)
        .max_bytes_for_level_base(64 << 20)
}

/// Three tables with disjoint key ranges ("a…", "b…", "c…") in L0, or (`compacted`) those keys
/// in five or so tables of one deeper level, where a level iterator reads them.
fn build_tables(dir: &Path, compacted: bool) {
    let db = Db::open(dir, table_options().target_file_size(12 << 10)).unwrap();
    for t in 0..TABLES {
        for i in 0..PER_TABLE {
            db.put(table_key(t, i), table_value(t, i)).unwrap();
        }
        db.flush().unwrap();
    }
    if compacted {
        db.compact().unwrap();
    }
    drop(db);
    assert!(files_with_ext(dir, "sst").len() >= TABLES);
}

/// The byte ranges of a pristine table's data blocks and index block.
fn data_and_index(bytes: &[u8]) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
    let len = bytes.len();
    let footer = &bytes[len - 56..];
    let mut p = 0;
    let _metaindex = (varint(footer, &mut p), varint(footer, &mut p));
    let (io, is) = (
        varint(footer, &mut p) as usize,
        varint(footer, &mut p) as usize,
    );
    let index = &bytes[io..io + is];
    let data_end = block_entries(index)
        .iter()
        .map(|(_, h)| {
            let (o, s) = handle(h);
            o + s + 5
        })
        .max()
        .unwrap();
    (0..data_end, io..io + is + 5)
}

/// Every entry, newest key last: (table, index) pairs in key order.
fn all_entries() -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..TABLES)
        .flat_map(|t| (0..PER_TABLE).map(move |i| (table_key(t, i), table_value(t, i))))
        .collect()
}

/// Walks the damaged store backward every way; returns whether the damage was reported. Panics
/// on a wrong entry or a wrong error.
fn walk_back_damaged(work: &Path, bad: &Path, what: &str) -> bool {
    let is_ours = |e: &Error| matches!(e, Error::Corruption { file, .. } if file.file_name() == bad.file_name());
    let db = match Db::open(work, table_options()) {
        Ok(db) => db,
        Err(e) => {
            assert!(is_ours(&e), "{what}: open failed with {e}");
            return true;
        }
    };
    let entries = all_entries();
    let mut detected = false;
    // prev from the end.
    let mut it = db.cursor();
    let mut expected = entries.iter().rev();
    let mut r = it.seek_to_last();
    loop {
        match r {
            Err(e) => {
                assert!(is_ours(&e), "{what}: prev failed with {e}");
                assert!(!it.valid(), "{what}");
                // The error stays until the next seek, and steps repeat it.
                assert!(it.status().is_err_and(|e| is_ours(&e)), "{what}");
                assert!(it.prev().is_err() && it.next().is_err(), "{what}");
                detected = true;
                break;
            }
            Ok(()) if !it.valid() => {
                assert!(
                    expected.next().is_none(),
                    "{what}: backward walk ended early"
                );
                break;
            }
            Ok(()) => {
                let (k, v) = expected
                    .next()
                    .expect("backward walk returned an extra entry");
                assert_eq!((it.key(), it.value()), (&k[..], &v[..]), "{what}: prev");
            }
        }
        r = it.prev();
    }
    // seek_for_prev into each table's range, then back to the start.
    for t in 0..TABLES {
        let target = table_key(t, PER_TABLE / 2);
        let mut expected = entries.iter().rev().skip_while(|(k, _)| *k > target);
        let mut r = it.seek_for_prev(&target);
        loop {
            match r {
                Err(e) => {
                    assert!(is_ours(&e), "{what}: seek_for_prev failed with {e}");
                    detected = true;
                    break;
                }
                Ok(()) if !it.valid() => {
                    assert!(expected.next().is_none(), "{what}: ended early");
                    break;
                }
                Ok(()) => {
                    let (k, v) = expected.next().expect("an extra entry");
                    assert_eq!(
                        (it.key(), it.value()),
                        (&k[..], &v[..]),
                        "{what}: seek_for_prev"
                    );
                }
            }
            r = it.prev();
        }
    }
    // A reversed scan.
    let mut expected = entries.iter().rev();
    for item in db.iter().rev() {
        match item {
            Ok((k, v)) => {
                let (ek, ev) = expected
                    .next()
                    .expect("reversed scan returned an extra entry");
                assert_eq!((&k, &v), (ek, ev), "{what}: reversed scan");
            }
            Err(e) => {
                assert!(is_ours(&e), "{what}: reversed scan failed with {e}");
                detected = true;
                break;
            }
        }
    }
    detected
}

fn flip_bytes_and_walk_back(compacted: bool, seed: u64) {
    let root = scratch();
    let pristine = root.path().join("pristine");
    build_tables(&pristine, compacted);
    let work = root.path().join("work");
    let tables = files_with_ext(&pristine, "sst");
    let victim = tables[tables.len() / 2].clone();
    let bytes = std::fs::read(&victim).unwrap();
    let (data, index) = data_and_index(&bytes);
    let mut rng = StdRng::seed_from_u64(seed);
    let samples = if long() { 400 } else { 40 };
    let mut positions: Vec<(&str, usize)> = (0..samples)
        .map(|_| ("data", rng.gen_range(data.clone())))
        .collect();
    positions.extend((0..samples / 4).map(|_| ("index", rng.gen_range(index.clone()))));
    for (region, pos) in positions {
        copy_dir(&pristine, &work);
        let bad = work.join(victim.file_name().unwrap());
        let mut damaged = bytes.clone();
        damaged[pos] ^= rng.gen_range(1..=255u8);
        std::fs::write(&bad, &damaged).unwrap();
        let what = format!("compacted {compacted}: {region} byte {pos}");
        // Every data block is read by a full backward walk and every block has a checksum: the
        // damage must be reported.
        assert!(walk_back_damaged(&work, &bad, &what), "{what}: unnoticed");
    }
}

#[test]
fn damaged_l0_tables_are_corruption_walking_backward() {
    flip_bytes_and_walk_back(false, 0xbad0);
}

#[test]
fn damaged_level_tables_are_corruption_walking_backward() {
    flip_bytes_and_walk_back(true, 0xbad1);
}
