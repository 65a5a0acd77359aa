//! Keyspaces: several ordered maps in one store.
//!
//! - a reopened store finds every keyspace, each with the options it was created with (filter,
//!   prefix extractor, whole-key filtering), shown by the filter counters of tables built after
//!   the reopen; `keyspace_with` on an existing keyspace accepts only its recorded options;
//! - keyspaces are isolated: the same key holds a value per keyspace, and gets, scans, prefix
//!   scans, cursors and the conveniences see only their own keyspace, across flushes, compactions
//!   and reopens;
//! - a batch across keyspaces is seen whole or not at all by every snapshot, and a snapshot is one
//!   view of every keyspace;
//! - dropping a keyspace removes its data and its table files, a reopen does not bring it back, the
//!   same name then makes an empty keyspace, and handles to the dropped keyspace (and batches naming
//!   it) fail with `Error::InvalidArgument` naming it; the default keyspace cannot be dropped;
//! - each keyspace counts its own reads and filter checks, the store counts them all, and
//!   `siftdb.stats` has a section per keyspace;
//! - a hundred keyspaces written in turn keep the WALs under a bound set by
//!   `Options::max_total_wal_size`.

use crate::common;
use common::keyspaces::{assert_invalid_argument_naming, contents, tables_per_level, wal_bytes};
use common::{names_with_ext, scratch};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use siftdb::{Db, Error, Filter, Keyspace, Options, PrefixExtractor, Ticker, WriteBatch};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Key `i` under the four-byte prefix `p{group:03}`.
fn grouped_key(group: u32, i: u32) -> Vec<u8> {
    format!("p{group:03}:{i:04}").into_bytes()
}

/// Small memtables and tables, so that a few hundred keys make several tables.
fn small() -> Options {
    Options::default()
        .write_buffer_size(16 << 10)
        .target_file_size(8 << 10)
        .max_bytes_for_level_base(32 << 10)
}

/// Waits (for at most a minute) until `done` holds: file removals may trail the call that makes
/// them due.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not after a minute");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Writes the even groups `0, 2, …, 98` (20 keys each) into `ks` and flushes them to a table.
fn write_even_groups(ks: &Keyspace, tag: &str) {
    for g in (0..100).step_by(2) {
        for i in 0..20 {
            ks.put(grouped_key(g, i), format!("{tag}-{g}-{i}")).unwrap();
        }
    }
    ks.flush().unwrap();
}

/// The filter counters of `f` applied to `ks`.
fn counted(ks: &Keyspace, f: impl FnOnce()) -> siftdb::Statistics {
    let before = ks.statistics();
    f();
    ks.statistics().since(&before)
}

/// Point gets of 200 missing keys whose prefixes the keyspace holds, each inside the key range of
/// a table (`p000:0000-missing`, …).
fn get_missing_keys_of_present_prefixes(ks: &Keyspace) {
    for g in (0..100).step_by(2) {
        for i in 0..4 {
            let mut k = grouped_key(g, i);
            k.extend_from_slice(b"-missing");
            assert_eq!(ks.get(k).unwrap(), None);
        }
    }
}

/// Point gets of 50 missing keys of prefixes the keyspace does not hold (`p001:0000`, …).
fn get_keys_of_missing_prefixes(ks: &Keyspace) {
    for g in (1..100).step_by(2) {
        assert_eq!(ks.get(grouped_key(g, 0)).unwrap(), None);
    }
}

/// A keyspace without a filter: gets consult its tables and check no filter.
fn assert_unfiltered(ks: &Keyspace, what: &str) {
    let s = counted(ks, || get_missing_keys_of_present_prefixes(ks));
    assert_eq!(
        s.filter_totals().checks(),
        0,
        "{what}: keyspace {} checked a filter",
        ks.name()
    );
    assert!(s.ticker(Ticker::TablesConsulted) >= 200, "{what}");
}

/// A keyspace with a whole-key filter: missing keys are mostly filtered out, even where their
/// prefix is present.
fn assert_whole_key_filtered(ks: &Keyspace, what: &str) {
    let s = counted(ks, || get_missing_keys_of_present_prefixes(ks));
    let t = s.filter_totals();
    assert_eq!(t.checks(), s.ticker(Ticker::TablesConsulted), "{what}");
    assert!(
        t.useful >= 180,
        "{what}: keyspace {}: a whole-key filter answers \"no\" for most of 200 missing keys: {t:?}",
        ks.name()
    );
}

/// A keyspace whose filter holds four-byte prefixes instead of whole keys: a missing key of a
/// present prefix passes the filter, one of a missing prefix does not, and a prefix scan of a
/// missing prefix skips the table.
fn assert_prefix_filtered(ks: &Keyspace, what: &str) {
    let name = ks.name().to_string();
    let s = counted(ks, || get_missing_keys_of_present_prefixes(ks));
    let t = s.filter_totals();
    assert_eq!(
        (t.useful, t.positive, t.true_positive),
        (0, 200, 0),
        "{what}: keyspace {name}: prefixes present, keys missing"
    );
    let s = counted(ks, || get_keys_of_missing_prefixes(ks));
    assert!(
        s.filter_totals().useful >= 45,
        "{what}: keyspace {name}: missing prefixes: {:?}",
        s.filter_totals()
    );
    let s = counted(ks, || {
        for g in (1..100).step_by(2) {
            let prefix = format!("p{g:03}");
            assert_eq!(ks.scan_prefix(prefix).count(), 0);
        }
    });
    assert!(
        s.ticker(Ticker::BloomFilterPrefixChecked) >= 45
            && s.ticker(Ticker::BloomFilterPrefixUseful) >= 45,
        "{what}: keyspace {name}: prefix scans of missing prefixes: checked {}, useful {}",
        s.ticker(Ticker::BloomFilterPrefixChecked),
        s.ticker(Ticker::BloomFilterPrefixUseful)
    );
}

#[test]
fn a_reopened_store_finds_every_keyspace_with_the_options_it_was_created_with() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.keyspace_names(), ["default"]);
    db.keyspace_with(
        "unfiltered",
        Options::default()
            .filter(Filter::none())
            .prefix_extractor(PrefixExtractor::fixed(4)),
    )
    .unwrap();
    db.keyspace_with(
        "by_prefix",
        Options::default()
            .filter(Filter::full(10.0))
            .prefix_extractor(PrefixExtractor::fixed(4))
            .whole_key_filtering(false),
    )
    .unwrap();
    // With the store's options: a whole-key full filter, no prefix extractor.
    db.keyspace("plain").unwrap();
    assert_eq!(
        db.keyspace_names(),
        ["default", "by_prefix", "plain", "unfiltered"]
    );
    db.close().unwrap();
    drop(db);

    // Reopened with options that name no keyspace and whose filter is the default one: each
    // keyspace builds its tables with the options recorded for it.
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(
        db.keyspace_names(),
        ["default", "by_prefix", "plain", "unfiltered"]
    );
    let unfiltered = db.keyspace("unfiltered").unwrap();
    let by_prefix = db.keyspace("by_prefix").unwrap();
    let plain = db.keyspace("plain").unwrap();
    let default = db.default_keyspace();
    for ks in [&unfiltered, &by_prefix, &plain, &default] {
        write_even_groups(ks, ks.name());
    }
    assert_unfiltered(&unfiltered, "after reopen");
    assert_prefix_filtered(&by_prefix, "after reopen");
    assert_whole_key_filtered(&plain, "after reopen");
    assert_whole_key_filtered(&default, "after reopen");
    // Reads through handles taken again see the same keyspaces.
    assert_eq!(
        db.keyspace("by_prefix")
            .unwrap()
            .get(grouped_key(4, 3))
            .unwrap(),
        Some(b"by_prefix-4-3".to_vec())
    );
    assert_eq!(
        db.get(grouped_key(4, 3)).unwrap(),
        Some(b"default-4-3".to_vec())
    );
    drop((unfiltered, by_prefix, plain, default));
    db.close().unwrap();
    drop(db);

    // Opened with other store-wide options, the keyspaces keep theirs.
    let db = Db::open(
        dir.path(),
        Options::default()
            .filter(Filter::none())
            .prefix_extractor(PrefixExtractor::fixed(2)),
    )
    .unwrap();
    let by_prefix = db.keyspace("by_prefix").unwrap();
    let plain = db.keyspace("plain").unwrap();
    by_prefix.compact().unwrap();
    plain.compact().unwrap();
    assert_prefix_filtered(&by_prefix, "after compaction under other store options");
    assert_whole_key_filtered(&plain, "after compaction under other store options");
}

#[test]
fn keyspace_with_on_an_existing_keyspace_takes_only_its_recorded_options() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let unfiltered = || Options::default().filter(Filter::none());
    let ks = db.keyspace_with("ks", unfiltered()).unwrap();
    write_even_groups(&ks, "old");
    // The same options again: the same keyspace.
    let again = db.keyspace_with("ks", unfiltered()).unwrap();
    assert_eq!(
        again.get(grouped_key(0, 0)).unwrap(),
        Some(b"old-0-0".to_vec())
    );
    // Other options are refused, naming the keyspace; it keeps the recorded ones.
    assert_invalid_argument_naming(
        db.keyspace_with("ks", Options::default().filter(Filter::full(10.0))),
        "ks",
        "keyspace_with and other options",
    );
    ks.compact().unwrap();
    assert_unfiltered(&ks, "after other options were refused");
    drop((ks, again));
    db.close().unwrap();
    drop(db);

    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_invalid_argument_naming(
        db.keyspace_with("ks", Options::default().filter(Filter::full(10.0))),
        "ks",
        "keyspace_with and other options after a reopen",
    );
    let ks = db.keyspace_with("ks", unfiltered()).unwrap();
    write_even_groups(&ks, "new");
    ks.compact().unwrap();
    assert_unfiltered(&ks, "reopened");
    assert_eq!(
        ks.get(grouped_key(0, 0)).unwrap(),
        Some(b"new-0-0".to_vec())
    );
}

/// What `isolation` writes: `key(i)` in every keyspace with its own value, the odd keys missing
/// from `b`, `key(5)` deleted from `a`.
fn isolation_models() -> BTreeMap<&'static str, Map> {
    let mut models: BTreeMap<&'static str, Map> = BTreeMap::new();
    for name in ["default", "a", "b"] {
        let m = models.entry(name).or_default();
        for i in 0..300 {
            if name == "b" && i % 2 == 1 {
                continue;
            }
            m.insert(key(i), format!("{name}-{i}").into_bytes());
        }
    }
    models.get_mut("a").unwrap().remove(&key(5));
    models
}

fn check_isolation(db: &Db, models: &BTreeMap<&'static str, Map>, stage: &str) {
    let handles: Vec<Keyspace> = ["default", "a", "b"]
        .into_iter()
        .map(|n| db.keyspace(n).unwrap())
        .collect();
    for ks in &handles {
        let name = ks.name();
        let model = &models[name];
        assert!(
            contents(ks) == *model,
            "{stage}: keyspace {name} holds other entries than it was given"
        );
        for i in [0, 1, 5, 150, 299, 300] {
            assert_eq!(
                ks.get(key(i)).unwrap().as_ref(),
                model.get(&key(i)),
                "{stage}: get of {i} in {name}"
            );
            assert_eq!(
                ks.contains_key(key(i)).unwrap(),
                model.contains_key(&key(i)),
                "{stage}: contains_key of {i} in {name}"
            );
        }
        let range: Vec<Vec<u8>> = ks.scan(key(10)..key(20)).map(|r| r.unwrap().0).collect();
        let want: Vec<Vec<u8>> = model
            .range(key(10)..key(20))
            .map(|(k, _)| k.clone())
            .collect();
        assert_eq!(range, want, "{stage}: range scan of {name}");
        let prefixed: Vec<(Vec<u8>, Vec<u8>)> =
            ks.scan_prefix("key0001").map(|r| r.unwrap()).collect();
        let want: Vec<(Vec<u8>, Vec<u8>)> = model
            .iter()
            .filter(|(k, _)| k.starts_with(b"key0001"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(prefixed, want, "{stage}: prefix scan of {name}");
        let backward: Vec<Vec<u8>> = ks.iter().rev().take(3).map(|r| r.unwrap().0).collect();
        let want: Vec<Vec<u8>> = model.keys().rev().take(3).cloned().collect();
        assert_eq!(backward, want, "{stage}: backward scan of {name}");
        assert_eq!(
            ks.first_key_value().unwrap(),
            model.first_key_value().map(|(k, v)| (k.clone(), v.clone())),
            "{stage}: first of {name}"
        );
        assert_eq!(
            ks.last_key_value().unwrap(),
            model.last_key_value().map(|(k, v)| (k.clone(), v.clone())),
            "{stage}: last of {name}"
        );
        let keys = [key(4), key(5), key(7), key(1000)];
        let got: Vec<Option<Vec<u8>>> = ks
            .multi_get(&keys)
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        let want: Vec<Option<Vec<u8>>> = keys.iter().map(|k| model.get(k).cloned()).collect();
        assert_eq!(got, want, "{stage}: multi_get in {name}");
        let mut cursor = ks.cursor();
        cursor.seek(key(5)).unwrap();
        let want = model.range(key(5)..).next().map(|(k, _)| k.clone());
        assert_eq!(
            cursor.valid().then(|| cursor.key().to_vec()),
            want,
            "{stage}: cursor seek in {name}"
        );
        assert_eq!(
            ks.get_pinned(key(6)).unwrap().map(|v| v.to_vec()).as_ref(),
            model.get(&key(6)),
            "{stage}: pinned get in {name}"
        );
    }
    // The store's own methods act on the default keyspace.
    let via_db: Map = db.iter().map(|r| r.unwrap()).collect();
    assert!(via_db == models["default"], "{stage}: db.iter()");
    assert_eq!(
        db.get(key(5)).unwrap().as_ref(),
        models["default"].get(&key(5))
    );
}

#[test]
fn the_same_key_in_two_keyspaces_holds_two_values() {
    let dir = scratch();
    let db = Db::open(dir.path(), small()).unwrap();
    let a = db.keyspace("a").unwrap();
    let b = db.keyspace("b").unwrap();
    for i in 0..300 {
        db.put(key(i), format!("default-{i}")).unwrap();
        a.put(key(i), format!("a-{i}")).unwrap();
        if i % 2 == 0 {
            b.put(key(i), format!("b-{i}")).unwrap();
        }
    }
    a.delete(key(5)).unwrap();
    let models = isolation_models();
    check_isolation(&db, &models, "memtables");
    a.flush().unwrap();
    check_isolation(&db, &models, "a flushed");
    b.compact().unwrap();
    check_isolation(&db, &models, "b compacted");
    db.compact().unwrap();
    a.compact().unwrap();
    check_isolation(&db, &models, "all compacted");
    drop((a, b));
    db.close().unwrap();
    drop(db);
    let db = Db::open(dir.path(), small()).unwrap();
    check_isolation(&db, &models, "reopen");
}

#[test]
fn a_batch_across_keyspaces_is_seen_whole_or_not_at_all() {
    let dir = scratch();
    // Tiny memtables: each keyspace flushes on its own schedule while the readers read.
    let db = Db::open(
        dir.path(),
        Options::default()
            .write_buffer_size(4096)
            .target_file_size(4096)
            .max_bytes_for_level_base(16 << 10),
    )
    .unwrap();
    let a = db.keyspace("a").unwrap();
    let b = db.keyspace("b").unwrap();
    let c = db
        .keyspace_with("c", small().filter(Filter::none()))
        .unwrap();

    // One batch over four keyspaces (the default one through `put`).
    let before = db.snapshot();
    let mut batch = WriteBatch::new();
    batch
        .put_in(&a, "k", "in a")
        .put_in(&b, "k", "in b")
        .put_in(&c, "k", "in c")
        .put("k", "in default");
    db.write(batch).unwrap();
    let after = db.snapshot();
    for (ks, v) in [(&a, "in a"), (&b, "in b"), (&c, "in c")] {
        assert_eq!(ks.get_at(&before, "k").unwrap(), None);
        assert_eq!(ks.get_at(&after, "k").unwrap(), Some(v.as_bytes().to_vec()));
    }
    assert_eq!(db.get_at(&before, "k").unwrap(), None);
    assert_eq!(
        db.get_at(&after, "k").unwrap(),
        Some(b"in default".to_vec())
    );
    drop((before, after));

    // A writer moves rows between a and the pair b, c in batches (a row leaves a as it enters b
    // and c, and back) while readers check, at snapshots, that every row is in a or in both b
    // and c, never in between.
    const ROWS: u32 = 2000;
    let mut batch = WriteBatch::new();
    for i in 0..ROWS {
        batch.put_in(&a, key(i), format!("row-{i}"));
    }
    db.write(batch).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (db, a, b, c, stop) = (db.clone(), a.clone(), b.clone(), c.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut views = 0u64;
                while !stop.load(Ordering::Relaxed) || views < 5 {
                    let snap = db.snapshot();
                    let in_a: BTreeSet<Vec<u8>> = a
                        .iter_at(&snap)
                        .map(|r| r.unwrap().0)
                        .filter(|k| k != b"k")
                        .collect();
                    let in_b: BTreeSet<Vec<u8>> = b
                        .iter_at(&snap)
                        .map(|r| r.unwrap().0)
                        .filter(|k| k != b"k")
                        .collect();
                    let in_c: BTreeSet<Vec<u8>> = c
                        .iter_at(&snap)
                        .map(|r| r.unwrap().0)
                        .filter(|k| k != b"k")
                        .collect();
                    assert_eq!(in_b, in_c, "reader {r}: b and c differ at one snapshot");
                    assert!(in_a.is_disjoint(&in_b), "reader {r}: a row in a and in b");
                    assert_eq!(
                        in_a.len() + in_b.len(),
                        ROWS as usize,
                        "reader {r}: rows lost or doubled at one snapshot"
                    );
                    // Point reads at the same snapshot agree with the scans.
                    let i = (views as u32 * 37) % ROWS;
                    let (ga, gb) = (
                        a.get_at(&snap, key(i)).unwrap(),
                        b.get_at(&snap, key(i)).unwrap(),
                    );
                    assert_eq!(ga.is_some(), in_a.contains(&key(i)), "reader {r}");
                    assert_eq!(gb.is_some(), in_b.contains(&key(i)), "reader {r}");
                    views += 1;
                }
                views
            })
        })
        .collect();
    // Four rounds: rows move to b and c, back to a, and again, five rows a batch.
    for round in 0..4 {
        for start in (0..ROWS).step_by(5) {
            let mut batch = WriteBatch::new();
            for i in start..start + 5 {
                if round % 2 == 0 {
                    batch
                        .delete_in(&a, key(i))
                        .put_in(&b, key(i), format!("moved-{round}-{i}"))
                        .put_in(&c, key(i), format!("moved-{round}-{i}"));
                } else {
                    batch
                        .put_in(&a, key(i), format!("back-{round}-{i}"))
                        .delete_in(&b, key(i))
                        .delete_in(&c, key(i));
                }
            }
            db.write(batch).unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() >= 5);
    }
    assert_eq!(contents(&a).len(), ROWS as usize + 1);
    assert_eq!(contents(&b).len(), 1);
    assert_eq!(
        a.get(key(7)).unwrap(),
        Some(b"back-3-7".to_vec()),
        "the last round's value"
    );
    assert!(
        db.statistics().ticker(Ticker::Flushes) > 3,
        "the keyspaces flushed while the rows moved"
    );
}

#[test]
fn a_snapshot_is_one_view_of_every_keyspace() {
    let dir = scratch();
    let db = Db::open(dir.path(), small()).unwrap();
    let a = db.keyspace("a").unwrap();
    let b = db.keyspace("b").unwrap();
    for i in 0..500 {
        a.put(key(i), format!("a-old-{i}")).unwrap();
        b.put(key(i), format!("b-old-{i}")).unwrap();
    }
    let snap = db.snapshot();
    // After it: overwrites, deletes, and each keyspace flushed and compacted on its own.
    for i in 0..500 {
        if i % 3 == 0 {
            a.delete(key(i)).unwrap();
        } else {
            a.put(key(i), format!("a-new-{i}")).unwrap();
        }
        b.put(key(i + 1000), "b-new").unwrap();
    }
    a.compact().unwrap();
    b.flush().unwrap();
    for (ks, tag) in [(&a, "a"), (&b, "b")] {
        let seen: Vec<(Vec<u8>, Vec<u8>)> = ks.iter_at(&snap).map(|r| r.unwrap()).collect();
        let want: Vec<(Vec<u8>, Vec<u8>)> = (0..500)
            .map(|i| (key(i), format!("{tag}-old-{i}").into_bytes()))
            .collect();
        assert!(seen == want, "keyspace {tag} at the snapshot");
        for i in [0, 1, 3, 499, 1000] {
            let want = (i < 500).then(|| format!("{tag}-old-{i}").into_bytes());
            assert_eq!(ks.get_at(&snap, key(i)).unwrap(), want, "{tag} {i}");
        }
        let mut cursor = ks.cursor_at(&snap);
        cursor.seek_to_last().unwrap();
        assert_eq!(cursor.key(), key(499).as_slice());
    }
    assert_eq!(a.get(key(3)).unwrap(), None);
    assert_eq!(a.get(key(4)).unwrap(), Some(b"a-new-4".to_vec()));
    assert_eq!(b.get(key(1000)).unwrap(), Some(b"b-new".to_vec()));
}

/// The table files of the store in `dir`.
fn tables(dir: &Path) -> BTreeSet<String> {
    names_with_ext(dir, "sst").into_iter().collect()
}

#[test]
fn a_dropped_keyspace_is_gone_with_its_files_and_its_name_makes_a_new_one() {
    let dir = scratch();
    let db = Db::open(dir.path(), small()).unwrap();
    let kept = db.keyspace("kept").unwrap();
    for i in 0..400 {
        kept.put(key(i), format!("kept-{i}")).unwrap();
        db.put(key(i), format!("default-{i}")).unwrap();
    }
    kept.compact().unwrap();
    db.compact().unwrap();
    let others = tables(dir.path());

    // The keyspace to drop: tables in several levels, and entries still in its memtable (so in
    // the WAL).
    let doomed = db.keyspace("doomed").unwrap();
    for i in 0..400 {
        doomed.put(key(i), format!("doomed-{i}")).unwrap();
    }
    doomed.compact().unwrap();
    for i in 0..300 {
        doomed.put(key(i), format!("doomed-again-{i}")).unwrap();
    }
    doomed.flush().unwrap();
    for i in 400..450 {
        doomed.put(key(i), "unflushed").unwrap();
    }
    let doomed_tables: BTreeSet<String> = tables(dir.path()).difference(&others).cloned().collect();
    assert!(
        doomed_tables.len() >= 2
            && tables_per_level(&doomed).iter().filter(|&&n| n > 0).count() >= 2,
        "the keyspace's tables fill two levels: {:?}",
        tables_per_level(&doomed)
    );

    // A scan made before the drop reads the keyspace to its end.
    let mut scan = doomed.iter();
    let first = scan.next().unwrap().unwrap();
    assert_eq!(first.0, key(0));
    db.drop_keyspace("doomed").unwrap();
    assert_eq!(db.keyspace_names(), ["default", "kept"]);
    let rest: Vec<Vec<u8>> = scan.map(|r| r.unwrap().0).collect();
    assert_eq!(rest, (1..450).map(key).collect::<Vec<_>>());
    eventually("the dropped keyspace's tables are removed", || {
        let now = tables(dir.path());
        now.is_disjoint(&doomed_tables)
    });

    // Its handles fail, naming it; the other keyspaces are untouched.
    assert_invalid_argument_naming(doomed.get(key(1)), "doomed", "get");
    let expected_kept: Map = (0..400)
        .map(|i| (key(i), format!("kept-{i}").into_bytes()))
        .collect();
    assert!(contents(&kept) == expected_kept);
    assert_eq!(db.get(key(7)).unwrap(), Some(b"default-7".to_vec()));

    // The same name makes a new, empty keyspace, with the options it is made with now.
    let reborn = db
        .keyspace_with("doomed", small().filter(Filter::none()))
        .unwrap();
    assert_eq!(reborn.get(key(1)).unwrap(), None);
    assert_eq!(reborn.iter().count(), 0);
    reborn.put("after", "the drop").unwrap();
    // A handle to the dropped keyspace still fails: it does not reach the new one.
    assert_invalid_argument_naming(
        doomed.put(key(1), "stale"),
        "doomed",
        "put on a stale handle",
    );
    assert_invalid_argument_naming(doomed.get("after"), "doomed", "get on a stale handle");
    drop((doomed, reborn, kept));
    db.close().unwrap();
    drop(db);

    // Reopened: the dropped keyspace's data (tables and WAL entries) does not come back.
    let db = Db::open(dir.path(), small()).unwrap();
    assert_eq!(db.keyspace_names(), ["default", "doomed", "kept"]);
    let reborn = db.keyspace("doomed").unwrap();
    let only_new: Vec<(Vec<u8>, Vec<u8>)> = reborn.iter().map(|r| r.unwrap()).collect();
    assert_eq!(only_new, vec![(b"after".to_vec(), b"the drop".to_vec())]);
    assert!(tables(dir.path()).is_disjoint(&doomed_tables));
    assert!(contents(&db.keyspace("kept").unwrap()) == expected_kept);
    // Dropped and reopened again: gone for good.
    db.drop_keyspace("doomed").unwrap();
    drop(reborn);
    db.close().unwrap();
    drop(db);
    let db = Db::open(dir.path(), small()).unwrap();
    assert_eq!(db.keyspace_names(), ["default", "kept"]);
    assert_eq!(db.keyspace("doomed").unwrap().iter().count(), 0);
}

#[test]
fn handles_of_a_dropped_keyspace_fail_naming_it() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let gone = db.keyspace("gone").unwrap();
    let other = db.keyspace("other").unwrap();
    gone.put("k", "v").unwrap();
    let clone = gone.clone();
    db.drop_keyspace("gone").unwrap();
    let snap = db.snapshot();
    for h in [&gone, &clone] {
        assert_invalid_argument_naming(h.put("k", "w"), "gone", "put");
        assert_invalid_argument_naming(h.delete("k"), "gone", "delete");
        assert_invalid_argument_naming(h.get("k"), "gone", "get");
        assert_invalid_argument_naming(h.get_at(&snap, "k"), "gone", "get_at");
        assert_invalid_argument_naming(
            h.get_pinned("k").map(|v| v.map(|p| p.to_vec())),
            "gone",
            "get_pinned",
        );
        assert_invalid_argument_naming(h.contains_key("k"), "gone", "contains_key");
        assert_invalid_argument_naming(h.first_key_value(), "gone", "first_key_value");
        assert_invalid_argument_naming(h.last_key_value(), "gone", "last_key_value");
        assert_invalid_argument_naming(h.flush(), "gone", "flush");
        assert_invalid_argument_naming(h.compact(), "gone", "compact");
        for r in h.multi_get(&["k", "j"]) {
            assert_invalid_argument_naming(r, "gone", "multi_get");
        }
        let first = h
            .iter()
            .next()
            .expect("a scan of a dropped keyspace says why it ends");
        assert_invalid_argument_naming(first, "gone", "iter");
        let first = h
            .scan_prefix("k")
            .next()
            .expect("a prefix scan says why it ends");
        assert_invalid_argument_naming(first, "gone", "scan_prefix");
        let mut cursor = h.cursor();
        let seek = cursor.seek_to_first().and_then(|()| cursor.status());
        assert_invalid_argument_naming(seek, "gone", "cursor");
    }
    // A batch naming the dropped keyspace fails whole: its entry for `other` is not applied.
    let mut batch = WriteBatch::new();
    batch
        .put_in(&other, "k", "v")
        .put_in(&gone, "k", "v")
        .put("k", "v");
    assert_invalid_argument_naming(db.write(batch), "gone", "batch");
    assert_eq!(other.get("k").unwrap(), None);
    assert_eq!(db.get("k").unwrap(), None);
    // Dropping it again, or any missing keyspace, fails the same way.
    assert_invalid_argument_naming(db.drop_keyspace("gone"), "gone", "second drop");
    assert_invalid_argument_naming(
        db.drop_keyspace("never"),
        "never",
        "drop of a missing keyspace",
    );
    // The store works on.
    other.put("k", "v").unwrap();
    assert_eq!(other.get("k").unwrap(), Some(b"v".to_vec()));
}

/// A keyspace whose memtable was still empty when another keyspace's flush started a new WAL
/// (and retired the old one), written afterwards: the next flush must find every WAL it needs.
#[test]
fn a_keyspace_written_after_another_flushed_keeps_the_store_writable() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let a = db.keyspace("a").unwrap();
    let b = db.keyspace("b").unwrap();
    a.put("k", "a1").unwrap();
    a.flush().unwrap();
    b.put("k", "b1").unwrap();
    a.put("k", "a2").unwrap();
    a.flush().unwrap();
    b.put("j", "b2").unwrap();
    b.flush().unwrap();
    drop((a, b));
    db.close().unwrap();
    drop(db);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let b = db.keyspace("b").unwrap();
    assert_eq!(b.get("k").unwrap(), Some(b"b1".to_vec()));
    assert_eq!(b.get("j").unwrap(), Some(b"b2".to_vec()));
    assert_eq!(
        db.keyspace("a").unwrap().get("k").unwrap(),
        Some(b"a2".to_vec())
    );
}

#[test]
fn the_default_keyspace_cannot_be_dropped() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put("k", "v").unwrap();
    let default = db.default_keyspace();
    assert_eq!(default.name(), "default");
    match db.drop_keyspace("default") {
        Err(Error::InvalidArgument(_)) => {}
        other => panic!("dropping the default keyspace: expected InvalidArgument, got {other:?}"),
    }
    assert_eq!(db.keyspace_names(), ["default"]);
    assert_eq!(default.get("k").unwrap(), Some(b"v".to_vec()));
    default.put("j", "w").unwrap();
    assert_eq!(db.get("j").unwrap(), Some(b"w".to_vec()));
}

#[test]
fn each_keyspace_counts_its_own_reads_and_the_store_counts_them_all() {
    let dir = scratch();
    // Each keyspace's table stays in L0, where the per-level counts below look for it.
    let db = Db::open(dir.path(), Options::default().compact_l0_when_idle(false)).unwrap();
    let a = db.keyspace("a").unwrap();
    let b = db.keyspace("b").unwrap();
    for i in 0..200 {
        a.put(key(i), "a").unwrap();
        b.put(key(i), "b").unwrap();
        db.put(key(i), "default").unwrap();
    }
    a.flush().unwrap();
    b.flush().unwrap();
    db.flush().unwrap();
    let (db0, a0, b0, d0) = (
        db.statistics(),
        a.statistics(),
        b.statistics(),
        db.default_keyspace().statistics(),
    );
    // 100 gets in a, half of them for missing keys (inside the table's key range); 7 in the
    // default keyspace; none in b.
    for i in 0..100 {
        let mut k = key(i);
        if i % 2 == 1 {
            k.extend_from_slice(b"-missing");
        }
        let _ = a.get(k).unwrap();
    }
    for i in 0..7 {
        assert!(db.get(key(i)).unwrap().is_some());
    }
    let (sa, sb, sd, sdb) = (
        a.statistics().since(&a0),
        b.statistics().since(&b0),
        db.default_keyspace().statistics().since(&d0),
        db.statistics().since(&db0),
    );
    assert_eq!(sa.ticker(Ticker::NumberKeysRead), 100);
    assert_eq!(sa.ticker(Ticker::NumberKeysFound), 50);
    assert_eq!(sa.filter_totals().true_positive, 50);
    assert!(sa.filter_totals().useful >= 45, "{:?}", sa.filter_totals());
    assert_eq!(sb.ticker(Ticker::NumberKeysRead), 0);
    assert_eq!(sb.filter_totals().checks(), 0);
    assert_eq!(sd.ticker(Ticker::NumberKeysRead), 7);
    assert_eq!(sd.filter_totals().true_positive, 7);
    assert_eq!(sdb.ticker(Ticker::NumberKeysRead), 107);
    assert_eq!(sdb.ticker(Ticker::NumberKeysFound), 57);
    assert_eq!(
        sdb.filter_totals(),
        siftdb::FilterCounts {
            useful: sa.filter_totals().useful + sd.filter_totals().useful,
            positive: sa.filter_totals().positive + sd.filter_totals().positive,
            true_positive: 57,
        }
    );
    // Per level too: a's table is in L0.
    assert_eq!(sa.level_filter_counts(0), sa.filter_totals());
    // Writes and flushes are each keyspace's, and the store's totals; the WAL is the store's.
    assert_eq!(db.statistics().ticker(Ticker::NumberKeysWritten), 600);
    assert_eq!(a.statistics().ticker(Ticker::NumberKeysWritten), 200);
    assert!(db.statistics().ticker(Ticker::WalBytes) > 0);
    for ks in [&a, &b] {
        assert_eq!(ks.statistics().ticker(Ticker::Flushes), 1, "{}", ks.name());
    }
    assert_eq!(db.statistics().ticker(Ticker::Flushes), 3);
}

#[test]
fn the_stats_property_has_a_section_per_keyspace() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let names = ["alpha_users", "beta_messages", "gamma_events"];
    for (n, name) in names.iter().enumerate() {
        let ks = db.keyspace(name).unwrap();
        for i in 0..(n as u32 + 1) * 50 {
            ks.put(key(i), "v").unwrap();
        }
        ks.flush().unwrap();
        assert_eq!(tables_per_level(&ks)[0], 1, "{name}");
        assert!(ks.property("siftdb.stats").is_some());
    }
    let report = db.property("siftdb.stats").unwrap();
    for name in ["default"].iter().chain(names.iter()) {
        assert!(
            report.contains(name),
            "siftdb.stats does not name {name}:\n{report}"
        );
    }
    // The default keyspace holds no table; the store's own table count is its.
    assert_eq!(db.property("siftdb.num-files-at-level0").unwrap(), "0");
}

/// The WAL and the write stalls are the store's: the report shows the store's figures, not the
/// default keyspace's (which holds none of them).
#[test]
fn the_stats_property_shows_the_stores_wal_bytes_and_stalls() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let ks = db.keyspace("events").unwrap();
    for i in 0..2000 {
        ks.put(key(i), vec![b'v'; 500]).unwrap();
    }
    let wal = db.statistics().ticker(Ticker::WalBytes);
    assert!(wal > 1 << 20, "{wal} WAL bytes");
    let report = db.property("siftdb.stats").unwrap();
    let line = format!("WAL: {:.1} MiB written", wal as f64 / (1 << 20) as f64);
    assert!(report.contains(&line), "no {line:?} in:\n{report}");
    assert!(report.contains("write stalls: "), "{report}");
    // A keyspace's own report shows them too: they are the store's.
    assert!(ks.property("siftdb.stats").unwrap().contains(&line));
    // And the counters come under a line saying what they are.
    assert!(report.contains("counters since open"), "{report}");
}

/// A batch written through a keyspace's handle puts its entries that name no keyspace in that
/// keyspace, and those that name one where they name, the default keyspace included.
#[test]
fn a_batch_written_through_a_keyspace_handle_lands_in_that_keyspace() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let (users, log) = (db.keyspace("users").unwrap(), db.keyspace("log").unwrap());
    db.put("u0", "in default").unwrap();
    users.put("u0", "old").unwrap();
    users.put("u9", "deleted by range").unwrap();
    let mut batch = WriteBatch::new();
    batch
        .put("u5", "Ada")
        .delete("u0")
        .delete_range("u9"..)
        .put_in(&log, "0001", "u5 joined")
        .put_in(&db.default_keyspace(), "d", "named default");
    users.write(batch).unwrap();
    assert_eq!(users.get("u5").unwrap(), Some(b"Ada".to_vec()));
    assert_eq!(users.get("u0").unwrap(), None);
    assert_eq!(users.get("u9").unwrap(), None);
    assert_eq!(log.get("0001").unwrap(), Some(b"u5 joined".to_vec()));
    assert_eq!(db.get("d").unwrap(), Some(b"named default".to_vec()));
    // Nothing un-targeted reached the default keyspace.
    assert_eq!(db.get("u5").unwrap(), None);
    assert_eq!(db.get("u0").unwrap(), Some(b"in default".to_vec()));
    // Written through `Db`, the same batch goes to the default keyspace; synced, too.
    let mut batch = WriteBatch::new();
    batch.put("u6", "Bob");
    db.write_opt(batch, &siftdb::WriteOptions::new().sync(true))
        .unwrap();
    assert_eq!(db.get("u6").unwrap(), Some(b"Bob".to_vec()));
    assert_eq!(users.get("u6").unwrap(), None);
    // It survives a reopen where it landed.
    drop((users, log, db));
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let users = db.keyspace("users").unwrap();
    assert_eq!(users.get("u5").unwrap(), Some(b"Ada".to_vec()));
    assert_eq!(db.get("u5").unwrap(), None);
}

/// `max_total_wal_size` of `a_hundred_keyspaces_keep_the_wals_under_max_total_wal_size`.
const MAX_TOTAL_WAL: u64 = 256 << 10;
/// Its memtables: a quarter of that (as the default bound is four memtables).
const WRITE_BUFFER: u64 = MAX_TOTAL_WAL / 4;

#[test]
fn a_hundred_keyspaces_keep_the_wals_under_max_total_wal_size() {
    let dir = scratch();
    let options = Options::default()
        .write_buffer_size(WRITE_BUFFER as usize)
        .max_total_wal_size(MAX_TOTAL_WAL);
    let db = Db::open(dir.path(), options).unwrap();
    let spaces: Vec<Keyspace> = (0..100)
        .map(|n| db.keyspace(&format!("ks{n:03}")).unwrap())
        .collect();
    // 8 MiB in 100-byte values: half to one busy keyspace, whose memtable fills (and starts a new
    // WAL) every 64 KiB, the rest spread over the 99 others, which get ~42 KiB each: less than a
    // memtable, so without the bound each would keep every WAL since its first write (all 8 MiB).
    //
    // The bound, once the flushes the writes started have run (they run beside the writer, so
    // the WALs may pass it for a while): `max_total_wal_size` for the WALs the writes were
    // checked against, plus the newest WAL's writes since, less than one more.
    let bound = 2 * MAX_TOTAL_WAL;
    let value = [b'v'; 100];
    let (mut peak, mut settled_peak) = (0u64, 0u64);
    let mut written = 0u64;
    let mut n = 0u32;
    while written < 8 << 20 {
        let ks = if n.is_multiple_of(2) {
            &spaces[0]
        } else {
            &spaces[1 + (n as usize / 2) % 99]
        };
        ks.put(key(n), value).unwrap();
        written += 100 + 8;
        n += 1;
        if n.is_multiple_of(64) {
            peak = peak.max(wal_bytes(dir.path()));
        }
        // Every 512 KiB, the writer pauses until the flushes it started have retired their WALs.
        if n.is_multiple_of(4096) {
            eventually("the WALs back under 2 × max_total_wal_size", || {
                wal_bytes(dir.path()) <= bound
            });
            settled_peak = settled_peak.max(wal_bytes(dir.path()));
        }
    }
    eprintln!(
        "{n} writes, {written} bytes over 100 keyspaces: the WALs held at most {settled_peak} \
         bytes once the flushes ran (bound {bound}), {peak} while they ran (max_total_wal_size \
         {MAX_TOTAL_WAL})"
    );
    assert!(
        db.statistics().ticker(Ticker::Flushes) > 100,
        "the quiet keyspaces were flushed"
    );
    // Everything is still there.
    assert_eq!(
        spaces
            .iter()
            .map(|ks| contents(ks).len() as u64)
            .sum::<u64>(),
        u64::from(n)
    );
}
