//! Tables built outside the store by a `TableWriter` and ingested: where they land, what reads at
//! each sequence see of them, and the files ingest refuses, leaving the store as it was.

use crate::common::scratch;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use siftdb::{Db, Error, Options, Ticker};

use crate::common::{file_names, tables_per_level, ManualClock};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    format!("value {i} of round {round}").into_bytes()
}

/// Writes keys `range` (step `step`) with values of `round` into a table at `path`.
fn table(db: &Db, path: &Path, range: std::ops::Range<u32>, step: usize, round: u32) -> PathBuf {
    let mut w = db.table_writer(path).unwrap();
    for i in range.step_by(step) {
        w.put(key(i), value(i, round)).unwrap();
    }
    w.finish().unwrap().path
}

fn contents(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.iter().map(|r| r.unwrap()).collect()
}

fn options() -> Options {
    // No compaction of its own accord: the tests read the levels ingest chose.
    Options::default()
        .compact_l0_when_idle(false)
        .compact_l0_for_reads(false)
}

#[test]
fn tables_land_in_the_deepest_level_where_they_overlap_nothing_above_and_in_l0_on_overlap() {
    let dir = scratch();
    let db = Db::open(dir.path().join("db"), options()).unwrap();
    let last = siftdb::NUM_LEVELS - 1;
    // Into an empty store: the last level.
    let a = table(&db, &dir.path().join("a.sst"), 0..1000, 1, 1);
    let placed = db.ingest(&[&a]).unwrap();
    assert_eq!(placed[0].level, last);
    assert_eq!(placed[0].entries, 1000);
    // Overlapping it: the level above; beside it: the last level too.
    let b = table(&db, &dir.path().join("b.sst"), 500..1500, 2, 2);
    let c = table(&db, &dir.path().join("c.sst"), 2000..2100, 1, 2);
    let placed = db.ingest(&[&c, &b]).unwrap();
    let level_of = |p: &PathBuf| placed.iter().find(|t| &t.path == p).unwrap().level;
    assert_eq!((level_of(&b), level_of(&c)), (last - 1, last));
    assert_eq!(placed[0].sequence, placed[1].sequence);
    // A put in the range, flushed by the ingest to L0: an overlapping table goes to L0, newer.
    db.put(key(700), b"put").unwrap();
    let d = table(&db, &dir.path().join("d.sst"), 600..800, 1, 3);
    let placed = db.ingest(&[&d]).unwrap();
    assert_eq!(placed[0].level, 0);
    let mut levels = vec![0; siftdb::NUM_LEVELS];
    levels[0] = 2;
    levels[last - 1] = 1;
    levels[last] = 2;
    assert_eq!(tables_per_level(&db), levels);
    // Newest wins: d over the put, b over a.
    let check = |db: &Db| {
        assert_eq!(db.get(key(700)).unwrap(), Some(value(700, 3)));
        assert_eq!(db.get(key(502)).unwrap(), Some(value(502, 2)));
        assert_eq!(db.get(key(501)).unwrap(), Some(value(501, 1)));
        assert_eq!(db.get(key(1498)).unwrap(), Some(value(1498, 2)));
        assert_eq!(db.get(key(1499)).unwrap(), None);
        assert_eq!(db.get(key(2050)).unwrap(), Some(value(2050, 2)));
        let all = contents(db);
        assert_eq!(all.len(), 1000 + 250 + 100);
        assert_eq!(all[&key(799)], value(799, 3));
        assert_eq!(all[&key(800)], value(800, 2));
        assert_eq!(all[&key(801)], value(801, 1));
        // Backward too.
        let back: Vec<Vec<u8>> = db.iter().rev().map(|r| r.unwrap().0).collect();
        let forward: Vec<Vec<u8>> = all.keys().rev().cloned().collect();
        assert_eq!(back, forward);
    };
    check(&db);
    // The caller's files are left as they were.
    assert!(a.exists() && b.exists() && d.exists());
    drop(db);
    let db = Db::open(dir.path().join("db"), options()).unwrap();
    check(&db);
    db.compact().unwrap();
    check(&db);
}

#[test]
fn a_snapshot_from_before_the_ingest_does_not_see_it_and_reads_after_do() {
    let dir = scratch();
    let db = Db::open(dir.path().join("db"), options()).unwrap();
    db.put(key(5), b"old").unwrap();
    let before = db.snapshot();
    let t = table(&db, &dir.path().join("t.sst"), 0..10, 1, 1);
    db.ingest(&[&t]).unwrap();
    let after = db.snapshot();
    db.put(key(6), b"newer").unwrap();
    assert_eq!(db.get_at(&before, key(5)).unwrap(), Some(b"old".to_vec()));
    assert_eq!(db.get_at(&before, key(3)).unwrap(), None);
    assert_eq!(db.iter_at(&before).count(), 1);
    assert_eq!(db.get_at(&after, key(5)).unwrap(), Some(value(5, 1)));
    assert_eq!(db.get_at(&after, key(6)).unwrap(), Some(value(6, 1)));
    assert_eq!(db.get(key(6)).unwrap(), Some(b"newer".to_vec()));
    // Compaction keeps what each snapshot sees.
    db.compact().unwrap();
    assert_eq!(db.get_at(&before, key(5)).unwrap(), Some(b"old".to_vec()));
    assert_eq!(db.get_at(&before, key(3)).unwrap(), None);
    assert_eq!(db.get_at(&after, key(6)).unwrap(), Some(value(6, 1)));
}

#[test]
fn range_deletes_tombstones_transactions_and_ttl_work_on_ingested_tables() {
    let dir = scratch();
    let db = Db::open(dir.path().join("db"), options()).unwrap();
    // A range delete before the ingest does not hide its keys; one after does.
    db.put(key(1), b"old").unwrap();
    db.delete_range(key(0)..key(50)).unwrap();
    let mut w = db.table_writer(dir.path().join("t.sst")).unwrap();
    w.put(key(1), b"ingested").unwrap();
    w.delete(key(2)).unwrap();
    w.put(key(3), b"ingested").unwrap();
    let t = w.finish().unwrap();
    // A transaction that read a key the ingest writes fails to commit.
    let mut txn = db.transaction();
    assert_eq!(txn.get(key(3)).unwrap(), None);
    txn.put(key(99), b"txn").unwrap();
    db.put(key(2), b"put before").unwrap();
    db.ingest(&[&t.path]).unwrap();
    assert!(
        matches!(txn.commit(), Err(Error::Conflict(_))),
        "a read key changed"
    );
    assert_eq!(db.get(key(1)).unwrap(), Some(b"ingested".to_vec()));
    assert_eq!(db.get(key(2)).unwrap(), None, "the tombstone hides the put");
    db.delete_range(key(3)..key(4)).unwrap();
    assert_eq!(db.get(key(3)).unwrap(), None);
    assert_eq!(contents(&db).len(), 1);
    db.compact().unwrap();
    assert_eq!(db.get(key(1)).unwrap(), Some(b"ingested".to_vec()));
    assert_eq!(contents(&db).len(), 1);

    // In a keyspace with a time to live, values expire that long after their put.
    let clock = ManualClock::at(1_000_000);
    let ttl_dir = dir.path().join("ttl");
    let db = Db::open(
        &ttl_dir,
        options().ttl(Duration::from_secs(60)).clock(clock.clone()),
    )
    .unwrap();
    let t = table(&db, &dir.path().join("ttl.sst"), 0..100, 1, 1);
    db.ingest(&[&t]).unwrap();
    assert_eq!(db.get(key(7)).unwrap(), Some(value(7, 1)));
    clock.set(1_000_061);
    assert_eq!(db.get(key(7)).unwrap(), None);
    assert_eq!(db.iter().count(), 0);
}

#[test]
fn gets_ask_the_ingested_tables_filters() {
    let dir = scratch();
    let db = Db::open(dir.path().join("db"), options()).unwrap();
    let t = table(&db, &dir.path().join("t.sst"), 0..20_000, 2, 1);
    db.ingest(&[&t]).unwrap();
    let before = db.statistics();
    // Odd keys fall between the table's keys: its filter answers.
    for i in (1..20_000).step_by(2) {
        assert_eq!(db.get(key(i)).unwrap(), None);
    }
    for i in (0..2000).step_by(2) {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i, 1)));
    }
    let d = db.statistics().since(&before);
    assert!(d.ticker(Ticker::BloomFilterUseful) > 9000, "{d:?}");
    assert_eq!(d.ticker(Ticker::BloomFilterFullTruePositive), 1000);
}

#[test]
fn keys_out_of_order_and_empty_tables_are_refused_by_the_writer() {
    let dir = scratch();
    let db = Db::open(dir.path().join("db"), options()).unwrap();
    let path = dir.path().join("t.sst");
    let mut w = db.table_writer(&path).unwrap();
    w.put(b"b", b"1").unwrap();
    for bad in [&b"a"[..], b"b"] {
        match w.put(bad, b"2") {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("increasing"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(w.delete(bad), Err(Error::InvalidArgument(_))));
    }
    // The table goes on after a refused key.
    w.put(b"c", b"3").unwrap();
    assert_eq!(w.entries(), 2);
    let t = w.finish().unwrap();
    assert_eq!(
        (t.smallest_key, t.largest_key),
        (b"b".to_vec(), b"c".to_vec())
    );
    // An existing file is not overwritten; an empty table is not written.
    assert!(matches!(db.table_writer(&path), Err(Error::Io(_))));
    let empty = dir.path().join("empty.sst");
    let w = db.table_writer(&empty).unwrap();
    assert!(matches!(w.finish(), Err(Error::InvalidArgument(_))));
    assert!(!empty.exists());
    // Nor one named like a store file in the store's directory.
    let inside = db.path().join("000999.sst");
    assert!(matches!(
        db.table_writer(&inside),
        Err(Error::InvalidArgument(_))
    ));
}

/// Ingesting `paths` fails with an error naming `named`, and changes nothing: the same files, the
/// same contents, before and after a reopen.
fn refused(dir: &Path, paths: &[PathBuf], named: &Path, corruption: bool) {
    let db = Db::open(dir, options()).unwrap();
    let (files, data) = (file_names(dir), contents(&db));
    let err = db.ingest(paths).unwrap_err();
    match (&err, corruption) {
        (Error::Corruption { file, .. }, true) => assert_eq!(file, named),
        (Error::InvalidArgument(m), false) => {
            assert!(m.contains(&named.display().to_string()), "{m}")
        }
        _ => panic!("{named:?}: {err:?}"),
    }
    assert_eq!(file_names(dir), files, "{err}");
    assert_eq!(contents(&db), data);
    drop(db);
    let db = Db::open(dir, options()).unwrap();
    assert_eq!(contents(&db), data);
}

#[test]
fn damaged_truncated_foreign_and_overlapping_files_are_refused_and_the_store_is_unchanged() {
    let dir = scratch();
    let store = dir.path().join("db");
    let db = Db::open(&store, options()).unwrap();
    db.put(b"existing", b"1").unwrap();
    let good = table(&db, &dir.path().join("good.sst"), 0..5000, 1, 1);
    let other = table(&db, &dir.path().join("other.sst"), 10_000..10_100, 1, 1);
    let overlapping = table(&db, &dir.path().join("overlap.sst"), 4000..4100, 1, 1);
    let users = db.keyspace("users").unwrap();
    let in_users = table(&users, &dir.path().join("users.sst"), 0..10, 1, 1);
    drop(users);
    db.flush().unwrap();
    let own_table = crate::common::files_with_ext(&store, "sst")[0].clone();
    let copied = dir.path().join("copied.sst");
    std::fs::copy(&own_table, &copied).unwrap();
    drop(db);
    let foreign_store = dir.path().join("foreign");
    let foreign_db = Db::open(&foreign_store, options()).unwrap();
    let foreign = table(&foreign_db, &dir.path().join("foreign.sst"), 0..10, 1, 1);
    drop(foreign_db);

    let bytes = std::fs::read(&good).unwrap();
    // A flipped bit in a data block: the checksum catches it.
    let damaged = dir.path().join("damaged.sst");
    let mut b = bytes.clone();
    b[100] ^= 0x10;
    std::fs::write(&damaged, &b).unwrap();
    // Cut short: the footer is gone.
    let truncated = dir.path().join("truncated.sst");
    std::fs::write(&truncated, &bytes[..bytes.len() - 20]).unwrap();
    let garbage = dir.path().join("garbage.sst");
    std::fs::write(&garbage, vec![7u8; 4096]).unwrap();

    // With a sound file beside each, so that all-or-none is seen.
    refused(&store, &[other.clone(), damaged.clone()], &damaged, true);
    refused(
        &store,
        &[other.clone(), truncated.clone()],
        &truncated,
        true,
    );
    refused(&store, std::slice::from_ref(&garbage), &garbage, true);
    refused(&store, &[other.clone(), foreign.clone()], &foreign, false);
    refused(&store, std::slice::from_ref(&in_users), &in_users, false);
    refused(&store, std::slice::from_ref(&copied), &copied, false);
    refused(
        &store,
        &[good.clone(), overlapping.clone()],
        &overlapping,
        false,
    );
    refused(&store, &[good.clone(), good.clone()], &good, false);
    // And the sound ones still go in.
    let db = Db::open(&store, options()).unwrap();
    db.ingest(&[&good, &other]).unwrap();
    assert_eq!(contents(&db).len(), 5000 + 100 + 1);
}

/// The ingest takes a sequence outside the WAL: writes to every keyspace before and after it come
/// back from the WALs at reopen, in order, over the ingested keys.
#[test]
fn writes_to_every_keyspace_around_an_ingest_are_replayed_at_reopen() {
    let dir = scratch();
    let store = dir.path().join("db");
    let db = Db::open(&store, options()).unwrap();
    let users = db.keyspace("users").unwrap();
    let orders = db.keyspace("orders").unwrap();
    orders.put(b"before", b"1").unwrap();
    users.put(key(1), b"before").unwrap();
    let t = table(&users, &dir.path().join("t.sst"), 0..100, 1, 1);
    users.ingest(&[&t]).unwrap();
    orders.put(b"after", b"2").unwrap();
    users.put(key(2), b"after").unwrap();
    db.put(b"default", b"3").unwrap();
    drop((users, orders, db));
    let db = Db::open(&store, options()).unwrap();
    let users = db.keyspace("users").unwrap();
    let orders = db.keyspace("orders").unwrap();
    assert_eq!(users.get(key(1)).unwrap(), Some(value(1, 1)));
    assert_eq!(users.get(key(2)).unwrap(), Some(b"after".to_vec()));
    assert_eq!(users.get(key(3)).unwrap(), Some(value(3, 1)));
    assert_eq!(orders.get(b"before").unwrap(), Some(b"1".to_vec()));
    assert_eq!(orders.get(b"after").unwrap(), Some(b"2".to_vec()));
    assert_eq!(db.get(b"default").unwrap(), Some(b"3".to_vec()));
    assert_eq!(
        db.get(key(1)).unwrap(),
        None,
        "the default keyspace is another map"
    );
}

/// A checkpoint, a backup restored and a read-only open of a store holding ingested tables read
/// them at their sequence, as the store does.
#[test]
fn checkpoints_backups_and_read_only_opens_carry_ingested_tables() {
    let dir = scratch();
    let store = dir.path().join("db");
    let db = Db::open(&store, options()).unwrap();
    db.put(key(5), b"put before").unwrap();
    let snapshot = db.snapshot();
    let t = table(&db, &dir.path().join("t.sst"), 0..100, 1, 1);
    db.ingest(&[&t]).unwrap();
    db.put(key(6), b"put after").unwrap();
    let expected = contents(&db);
    assert_eq!(expected[&key(5)], value(5, 1));
    assert_eq!(
        db.get_at(&snapshot, key(5)).unwrap(),
        Some(b"put before".to_vec())
    );
    drop(snapshot);
    db.checkpoint(dir.path().join("checkpoint")).unwrap();
    let mut engine = siftdb::BackupEngine::open(dir.path().join("backups")).unwrap();
    let id = engine.create_backup(&db).unwrap();
    engine.restore(id, dir.path().join("restored")).unwrap();
    drop(db);
    for copy in ["checkpoint", "restored"] {
        let db = Db::open(dir.path().join(copy), options()).unwrap();
        assert_eq!(contents(&db), expected, "{copy}");
        db.compact().unwrap();
        assert_eq!(contents(&db), expected, "{copy} compacted");
    }
    let db = Db::open_read_only(&store, options()).unwrap();
    assert_eq!(contents(&db), expected, "read-only");
}

/// A WAL may hold writes no memtable holds (to a keyspace dropped since): the ingest starts a new
/// one, so that replay, which starts past the ingest's sequence, never meets an older record.
#[test]
fn an_ingest_after_writes_to_a_dropped_keyspace_reopens() {
    let dir = scratch();
    let store = dir.path().join("db");
    let db = Db::open(&store, options()).unwrap();
    let doomed = db.keyspace("doomed").unwrap();
    doomed.put(b"k", b"v").unwrap();
    drop(doomed);
    db.drop_keyspace("doomed").unwrap();
    let t = table(&db, &dir.path().join("t.sst"), 0..10, 1, 1);
    db.ingest(&[&t]).unwrap();
    db.put(key(20), b"after").unwrap();
    drop(db);
    let db = Db::open(&store, options()).unwrap();
    assert_eq!(db.get(key(3)).unwrap(), Some(value(3, 1)));
    assert_eq!(db.get(key(20)).unwrap(), Some(b"after".to_vec()));
    assert_eq!(db.keyspace_names(), ["default"]);
}
