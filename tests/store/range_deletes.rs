//! Range deletes: what `delete_range` hides, in memtables and in tables of every level, with
//! overlapping tombstones, snapshots, filters that know nothing of tombstones, and what
//! compaction then removes.

use crate::common::scratch;
use std::path::Path;

use siftdb::inspect::TableInfo;
use siftdb::{Db, Filter, Options, Ticker, WriteBatch};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    format!("value-{i}-{round}").into_bytes()
}

fn options() -> Options {
    Options::default()
        .write_buffer_size(64 << 10)
        .target_file_size(16 << 10)
        .max_bytes_for_level_base(64 << 10)
        .filter(Filter::full(10.0))
}

/// The keys a full scan returns.
fn keys(db: &Db) -> Vec<Vec<u8>> {
    db.iter().map(|kv| kv.unwrap().0).collect()
}

/// Every table file of the store, as the inspector reads it.
fn tables(dir: &Path) -> Vec<TableInfo> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "sst") {
            out.push(TableInfo::open(&path).unwrap());
        }
    }
    out
}

#[test]
fn a_range_delete_hides_the_keys_in_its_range_from_every_read_and_no_others() {
    let dir = scratch();
    let db = Db::open(dir.path(), options()).unwrap();
    for i in 0..100 {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.delete_range(key(20)..key(30)).unwrap();
    for i in 0..100 {
        let want = (!(20..30).contains(&i)).then(|| value(i, 0));
        assert_eq!(db.get(key(i)).unwrap(), want, "key {i}");
    }
    let got = db.multi_get(&[key(19), key(20), key(29), key(30)]);
    let got: Vec<_> = got.into_iter().map(|r| r.unwrap().is_some()).collect();
    assert_eq!(got, [true, false, false, true]);
    assert_eq!(keys(&db).len(), 90);
    let back: Vec<_> = db.iter().rev().map(|kv| kv.unwrap().0).collect();
    assert_eq!(back.len(), 90);
    assert_eq!(db.scan(key(15)..key(35)).count(), 10);
    let mut c = db.cursor();
    c.seek(key(20)).unwrap();
    assert_eq!(c.key(), key(30).as_slice());
    c.prev().unwrap();
    assert_eq!(c.key(), key(19).as_slice());
    // An empty range writes nothing.
    db.delete_range(key(50)..key(50)).unwrap();
    db.delete_range(key(60)..key(50)).unwrap();
    assert_eq!(keys(&db).len(), 90);
    assert_eq!(db.statistics().ticker(Ticker::RangeDeletes), 1);
}

#[test]
fn keys_written_after_a_range_delete_are_visible_and_snapshots_see_the_keys_before() {
    let dir = scratch();
    let db = Db::open(dir.path(), options()).unwrap();
    for i in 0..50 {
        db.put(key(i), value(i, 0)).unwrap();
    }
    let before = db.snapshot();
    db.delete_range(key(0)..key(50)).unwrap();
    let between = db.snapshot();
    db.put(key(7), value(7, 1)).unwrap();
    // The same in the memtable, in an L0 table, and compacted.
    for stage in ["memtable", "table", "compacted"] {
        match stage {
            "table" => db.flush().unwrap(),
            "compacted" => db.compact().unwrap(),
            _ => {}
        }
        assert_eq!(db.get(key(7)).unwrap(), Some(value(7, 1)), "{stage}");
        assert_eq!(db.get(key(8)).unwrap(), None, "{stage}");
        assert_eq!(keys(&db), vec![key(7)], "{stage}");
        assert_eq!(
            db.get_at(&before, key(8)).unwrap(),
            Some(value(8, 0)),
            "{stage}"
        );
        assert_eq!(
            db.get_at(&before, key(7)).unwrap(),
            Some(value(7, 0)),
            "{stage}"
        );
        assert_eq!(db.iter_at(&before).count(), 50, "{stage}");
        assert_eq!(db.get_at(&between, key(7)).unwrap(), None, "{stage}");
        assert_eq!(db.iter_at(&between).count(), 0, "{stage}");
    }
    drop((before, between));
    db.close().unwrap();
    // And after a reopen, from the tables alone.
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(keys(&db), vec![key(7)]);
}

/// A table holding only a range tombstone has a filter with no keys, which rules every key out;
/// a Get must still find the tombstone there and not go on to the older table that holds the key.
#[test]
fn a_get_finds_a_covering_tombstone_in_a_table_whose_filter_rules_the_key_out() {
    let dir = scratch();
    let db = Db::open(dir.path(), options().level0_compaction_trigger(100)).unwrap();
    for i in 0..200 {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    db.delete_range(key(0)..key(100)).unwrap();
    db.flush().unwrap();
    assert_eq!(
        db.property("siftdb.num-files-at-level0").as_deref(),
        Some("2")
    );
    let before = db.statistics();
    for i in 0..200 {
        assert_eq!(db.get(key(i)).unwrap().is_some(), i >= 100, "key {i}");
    }
    let s = db.statistics().since(&before);
    assert_eq!(s.ticker(Ticker::RangeDeleteCovered), 100);
    assert!(
        s.filter_totals().useful >= 100,
        "the tombstone's table's filter ruled the keys out"
    );
}

/// Overlapping tombstones written at different times, tables of several levels beneath them, a
/// newer write inside each: every key reads as the model says, before and after compaction.
#[test]
fn overlapping_tombstones_over_several_levels_hide_exactly_the_older_keys() {
    let dir = scratch();
    let db = Db::open(dir.path(), options()).unwrap();
    let mut model = std::collections::BTreeMap::new();
    for round in 0..3u32 {
        for i in (0..3000).step_by(1 + round as usize) {
            db.put(key(i), value(i, round)).unwrap();
            model.insert(key(i), value(i, round));
        }
        db.flush().unwrap();
    }
    db.compact().unwrap();
    let ranges = [(100, 900), (500, 1500), (1400, 1450), (2000, 2999)];
    for (n, &(a, b)) in ranges.iter().enumerate() {
        db.delete_range(key(a)..key(b)).unwrap();
        model.retain(|k, _| !(key(a) <= *k && *k < key(b)));
        // A write inside the range just deleted, then more data so tables reach several levels.
        let inside = a + 3;
        db.put(key(inside), value(inside, 9)).unwrap();
        model.insert(key(inside), value(inside, 9));
        for i in (3000 + n as u32 * 500)..(3500 + n as u32 * 500) {
            db.put(key(i), value(i, 0)).unwrap();
            model.insert(key(i), value(i, 0));
        }
        db.flush().unwrap();
    }
    let check = |db: &Db, stage: &str| {
        for i in 0..5000 {
            assert_eq!(
                db.get(key(i)).unwrap(),
                model.get(&key(i)).cloned(),
                "key {i}, {stage}"
            );
        }
        let got: Vec<_> = db.iter().map(|kv| kv.unwrap()).collect();
        let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(got, want, "{stage}");
        let got: Vec<_> = db.iter().rev().map(|kv| kv.unwrap().0).collect();
        let want: Vec<_> = model.keys().rev().cloned().collect();
        assert_eq!(got, want, "{stage} backwards");
    };
    check(&db, "before compaction");
    db.compact().unwrap();
    check(&db, "after compaction");
}

/// Compaction removes the keys a tombstone covers and, once nothing below can hold its range,
/// the tombstone itself; while a snapshot older than it lives, both stay.
#[test]
fn compaction_drops_covered_keys_and_then_the_tombstone_unless_a_snapshot_needs_them() {
    let dir = scratch();
    let db = Db::open(dir.path(), options()).unwrap();
    for i in 0..2000 {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.compact().unwrap();
    let entries = |dir: &Path| -> (u64, u64) {
        let t = tables(dir);
        (
            t.iter().map(|t| t.num_entries).sum(),
            t.iter().map(|t| t.num_range_deletions).sum(),
        )
    };
    assert_eq!(entries(dir.path()), (2000, 0));
    let snapshot = db.snapshot();
    db.delete_range(key(500)..key(1500)).unwrap();
    db.compact().unwrap();
    let (points, tombstones) = entries(dir.path());
    assert_eq!(
        points, 2000,
        "a snapshot older than the tombstone still reads every key"
    );
    assert!(tombstones > 0);
    assert_eq!(db.get_at(&snapshot, key(700)).unwrap(), Some(value(700, 0)));
    assert_eq!(db.get(key(700)).unwrap(), None);
    drop(snapshot);
    db.compact().unwrap();
    assert_eq!(entries(dir.path()), (1000, 0));
    assert_eq!(keys(&db).len(), 1000);
}

#[test]
fn range_deletes_in_a_batch_apply_in_order_and_stay_in_their_keyspace() {
    let dir = scratch();
    let db = Db::open(dir.path(), options()).unwrap();
    let other = db.keyspace("other").unwrap();
    for i in 0..10 {
        db.put(key(i), value(i, 0)).unwrap();
        other.put(key(i), value(i, 0)).unwrap();
    }
    let mut batch = WriteBatch::new();
    batch
        .put(key(20), value(20, 0)) // before the range delete: deleted with the rest
        .delete_range(key(0)..key(100))
        .put(key(3), value(3, 1)) // after it: kept
        .delete_range_in(&other, key(5)..key(7));
    db.write(batch).unwrap();
    assert_eq!(keys(&db), vec![key(3)]);
    assert_eq!(db.get(key(3)).unwrap(), Some(value(3, 1)));
    assert_eq!(keys(&other).len(), 8);
    assert_eq!(other.get(key(5)).unwrap(), None);
    // A keyspace's own delete_range.
    other.delete_range(key(0)..key(2)).unwrap();
    assert_eq!(keys(&other).len(), 6);
    db.close().unwrap();
    // Replayed from the WAL.
    let db = Db::open(dir.path(), options()).unwrap();
    let other = db.keyspace("other").unwrap();
    assert_eq!(keys(&db), vec![key(3)]);
    assert_eq!(keys(&other).len(), 6);
}

#[test]
fn a_prefix_scan_honours_a_tombstone_in_a_table_its_filter_leaves_out() {
    let dir = scratch();
    let o = options()
        .prefix_extractor(siftdb::PrefixExtractor::fixed(4))
        .level0_compaction_trigger(100);
    let db = Db::open(dir.path(), o).unwrap();
    for i in 0..100 {
        db.put(format!("user{i:03}"), "x").unwrap();
        db.put(format!("item{i:03}"), "y").unwrap();
    }
    db.flush().unwrap();
    // A table holding only a tombstone over every "user" key: its prefix filter holds no prefix.
    db.delete_range("user".."usez").unwrap();
    db.flush().unwrap();
    assert_eq!(db.scan_prefix("user").count(), 0);
    assert_eq!(db.scan_prefix("item").count(), 100);
}

/// A table written from a memtable that holds range tombstones alone has no keys for its filter:
/// every layout and policy writes it and reads it back.
#[test]
fn a_table_of_range_tombstones_alone_is_written_and_read_under_every_filter() {
    use siftdb::filter::{BinaryFuse, FilterLayout};
    use std::sync::Arc;
    let filters = [
        Filter::full(10.0),
        Filter::block_based(10.0),
        Filter::partitioned(10.0),
        Filter::ribbon(10.0),
        Filter::new(FilterLayout::Full, Arc::new(BinaryFuse::fuse8())),
        Filter::none(),
    ];
    for filter in filters {
        let dir = scratch();
        let o = options().filter(filter).level0_compaction_trigger(100);
        let db = Db::open(dir.path(), o.clone()).unwrap();
        db.put(key(5), value(5, 0)).unwrap();
        db.flush().unwrap();
        db.delete_range(key(0)..key(10)).unwrap();
        db.flush().unwrap();
        assert_eq!(db.get(key(5)).unwrap(), None);
        db.close().unwrap();
        let db = Db::open(dir.path(), o).unwrap();
        assert_eq!(db.get(key(5)).unwrap(), None);
        assert_eq!(db.iter().count(), 0);
        db.compact().unwrap();
        assert_eq!(tables(dir.path()).len(), 0, "compaction leaves nothing");
    }
}

/// Tables cut small, so that compaction outputs end next to the tombstones: a snapshot taken
/// before the range deletes keeps reading every key, and the latest view none of the deleted.
#[test]
fn a_snapshot_reads_every_key_after_tombstones_are_compacted_between_small_tables() {
    let o = Options::default()
        .write_buffer_size(4096)
        .target_file_size(4096)
        .max_bytes_for_level_base(16 << 10)
        .level_size_multiplier(4)
        .level0_compaction_trigger(2)
        .block_size(512);
    let dir = scratch();
    let db = Db::open(dir.path(), o).unwrap();
    for i in 0..300 {
        db.put(key(i), [5u8; 40]).unwrap();
    }
    db.compact().unwrap();
    let snapshot = db.snapshot();
    let mut deleted = std::collections::BTreeSet::new();
    for (a, b) in [
        (90, 110),
        (200, 201),
        (150, 151),
        (0, 3),
        (297, 300),
        (40, 41),
    ] {
        db.delete_range(key(a)..key(b)).unwrap();
        deleted.extend(a..b);
        db.compact().unwrap();
        for i in 0..300 {
            assert!(
                db.get_at(&snapshot, key(i)).unwrap().is_some(),
                "key {i} at the snapshot, after {a}..{b}"
            );
            assert_eq!(
                db.get(key(i)).unwrap().is_some(),
                !deleted.contains(&i),
                "key {i} after {a}..{b}"
            );
        }
    }
}

/// `compact_range` removes what a range tombstone covers, and the tombstone, rewriting only the
/// tables that hold keys of the range.
#[test]
fn compact_range_reclaims_a_deleted_range_and_leaves_the_other_tables_alone() {
    let dir = scratch();
    let db = Db::open(dir.path(), options()).unwrap();
    for i in 0..12000 {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.compact().unwrap();
    let numbers = |dir: &Path| -> std::collections::BTreeSet<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".sst"))
            .collect()
    };
    let before = numbers(dir.path());
    assert!(before.len() > 4, "a store of several tables: {before:?}");
    db.delete_range(key(4000)..key(6000)).unwrap();
    db.compact_range(key(4000)..key(6000)).unwrap();
    let after = numbers(dir.path());
    let t = tables(dir.path());
    assert_eq!(t.iter().map(|t| t.num_entries).sum::<u64>(), 10000);
    assert_eq!(t.iter().map(|t| t.num_range_deletions).sum::<u64>(), 0);
    assert_eq!(keys(&db).len(), 10000);
    assert_eq!(db.get(key(5000)).unwrap(), None);
    assert_eq!(db.get(key(6000)).unwrap(), Some(value(6000, 0)));
    let kept = before.intersection(&after).count();
    assert!(
        kept >= before.len() / 2,
        "tables outside the range stay: {kept} of {} kept",
        before.len()
    );
    // A range with nothing in it compacts nothing.
    db.compact_range(key(20000)..key(20500)).unwrap();
    assert_eq!(numbers(dir.path()), after);
}
