//! Transactions against range deletes: a `delete_range` written after a transaction's snapshot
//! over a key it read, or overlapping a range it scanned, fails its commit with
//! `Error::Conflict`, whether the range tombstone is still in a memtable, flushed into an L0 table
//! (alone or beside other writes) or compacted down; one written before the snapshot, or beside
//! what the transaction read, does not.

use crate::common;
use common::scratch;

use siftdb::{Db, Error, Options, Ticker};

fn small_options() -> Options {
    Options::default()
        .write_buffer_size(4096)
        .target_file_size(4096)
        .max_bytes_for_level_base(16 << 10)
        .level_size_multiplier(4)
        .level0_compaction_trigger(2)
        .block_size(512)
}

fn item(i: u32) -> String {
    format!("item{i:04}")
}

/// A store holding `item0000`..`item0299` in its tables.
fn store(dir: &std::path::Path) -> Db {
    let db = Db::open(dir, small_options()).unwrap();
    for i in 0..300 {
        db.put(item(i), [5u8; 40]).unwrap();
    }
    db.compact().unwrap();
    db
}

/// Where the competing range tombstone is when the transaction commits.
#[derive(Debug, Clone, Copy)]
enum Place {
    /// Still in the memtable.
    Memtable,
    /// Flushed into an L0 table that holds other writes too.
    FlushedWithWrites,
    /// Flushed into an L0 table holding nothing else.
    FlushedAlone,
    /// Compacted down the levels (the transaction's snapshot keeps the tombstone).
    Compacted,
}

const PLACES: [Place; 4] = [
    Place::Memtable,
    Place::FlushedWithWrites,
    Place::FlushedAlone,
    Place::Compacted,
];

/// Writes `delete_range(start..end)` and moves it to `place`.
fn competing_delete_range(db: &Db, start: &str, end: &str, place: Place) {
    db.delete_range(start..end).unwrap();
    move_to(db, place);
}

/// Moves the store's newest write to `place`.
fn move_to(db: &Db, place: Place) {
    match place {
        Place::Memtable => {}
        Place::FlushedWithWrites => {
            db.put("other", "x").unwrap();
            db.flush().unwrap();
        }
        Place::FlushedAlone => db.flush().unwrap(),
        Place::Compacted => db.compact().unwrap(),
    }
}

fn assert_conflict(outcome: siftdb::Result<()>, what: &str) {
    match outcome {
        Err(e @ Error::Conflict(_)) => assert!(e.is_conflict()),
        other => panic!("{what}: expected a conflict, got {other:?}"),
    }
}

#[test]
fn a_delete_range_over_a_key_read_is_a_conflict_wherever_its_tombstone_is() {
    for place in PLACES {
        let dir = scratch();
        let db = store(dir.path());
        let before = db.statistics().ticker(Ticker::TransactionConflicts);

        // A key read (present), then deleted by a range around it.
        let mut tx = db.transaction();
        assert!(tx.get(item(100)).unwrap().is_some());
        tx.put("mine", "1").unwrap();
        competing_delete_range(&db, &item(90), &item(110), place);
        assert_eq!(db.get(item(100)).unwrap(), None);
        assert_conflict(tx.commit(), &format!("{place:?}: a read key"));
        assert_eq!(
            db.get("mine").unwrap(),
            None,
            "a refused commit applies nothing"
        );

        // A key read at a range's first key, which the range deletes.
        let mut tx = db.transaction();
        assert!(tx.get(item(200)).unwrap().is_some());
        tx.put("mine", "2").unwrap();
        competing_delete_range(&db, &item(200), &item(201), place);
        assert_conflict(tx.commit(), &format!("{place:?}: the range's first key"));

        // A key read as absent that a range deletion then covers: a newer version of the key
        // (its deletion), as a point delete would be.
        let mut tx = db.transaction();
        assert_eq!(tx.get("item0150x").unwrap(), None);
        tx.put("mine", "3").unwrap();
        competing_delete_range(&db, &item(150), &item(151), place);
        assert_conflict(tx.commit(), &format!("{place:?}: an absent key"));

        assert_eq!(
            db.statistics().ticker(Ticker::TransactionConflicts) - before,
            3,
            "{place:?}"
        );

        // A range's end is not in it, nor are the keys beside it: those commits go through.
        let mut tx = db.transaction();
        assert!(tx.get(item(260)).unwrap().is_some());
        assert!(tx.get(item(249)).unwrap().is_some());
        tx.put("mine", "4").unwrap();
        competing_delete_range(&db, &item(250), &item(260), place);
        tx.commit()
            .unwrap_or_else(|e| panic!("{place:?}: a range beside the keys read: {e}"));
        assert_eq!(db.get("mine").unwrap(), Some(b"4".to_vec()));

        // A range deleted before the snapshot is history, not a conflict.
        db.delete_range(item(280).as_str()..item(290).as_str())
            .unwrap();
        let mut tx = db.transaction();
        assert_eq!(tx.get(item(285)).unwrap(), None);
        tx.put("mine", "5").unwrap();
        competing_delete_range(&db, &item(0), &item(1), place);
        tx.commit()
            .unwrap_or_else(|e| panic!("{place:?}: a range older than the snapshot: {e}"));
    }
}

#[test]
fn a_delete_range_overlapping_a_scanned_range_is_a_conflict_wherever_its_tombstone_is() {
    for place in PLACES {
        let dir = scratch();
        let db = store(dir.path());
        // Ranges that overlap the scan's [item0100, item0200): inside it, across its start,
        // across its end, around all of it, and over keys it does not hold (it found none there,
        // but a deletion there is a change of the range all the same).
        let overlapping = [
            (item(120), item(130)),
            (item(50), item(101)),
            (item(199), item(220)),
            ("item".to_string(), "item9".to_string()),
            ("item0150-".to_string(), "item0150z".to_string()),
        ];
        for (start, end) in &overlapping {
            let mut tx = db.transaction();
            let n = tx.scan(item(100)..item(200)).count();
            assert!(n > 0);
            tx.put("count", (n as u64).to_be_bytes()).unwrap();
            competing_delete_range(&db, start, end, place);
            assert_conflict(
                tx.commit(),
                &format!("{place:?}: scanned [item0100, item0200), then {start}..{end} deleted"),
            );
            // Put the keys back for the next case.
            for i in 0..300 {
                db.put(item(i), [5u8; 40]).unwrap();
            }
        }
        // A range well away from the scanned one does not conflict.
        let mut tx = db.transaction();
        let n = tx.scan(item(100)..item(200)).count();
        assert_eq!(n, 100);
        tx.put("count", (n as u64).to_be_bytes()).unwrap();
        competing_delete_range(&db, &item(250), &item(270), place);
        tx.commit()
            .unwrap_or_else(|e| panic!("{place:?}: a range beside the scanned one: {e}"));
        // And a transaction whose snapshot is after the deletion sees its result, unchanged.
        let mut tx = db.transaction();
        let n = tx.scan(item(240)..item(280)).count();
        assert_eq!(n, 20, "{place:?}: the scan inside the transaction");
        tx.put("count", (n as u64).to_be_bytes()).unwrap();
        tx.commit()
            .unwrap_or_else(|e| panic!("{place:?}: a range older than the snapshot: {e}"));
    }
}

/// The same in a keyspace, the range deleted in a `WriteBatch` with `delete_range_in`.
#[test]
fn a_delete_range_in_a_keyspace_conflicts_with_reads_and_scans_of_that_keyspace_only() {
    let dir = scratch();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let ks = db.keyspace("ks").unwrap();
    for i in 0..200 {
        ks.put(item(i), [1u8; 40]).unwrap();
        db.put(item(i), [2u8; 40]).unwrap();
    }
    ks.compact().unwrap();
    db.compact().unwrap();
    for flush in [false, true] {
        let mut read = db.transaction();
        assert!(read.get_in(&ks, item(40)).unwrap().is_some());
        read.put("mine", "1").unwrap();
        let mut scanned = db.transaction();
        let _ = scanned.scan_in(&ks, item(100)..item(110)).count();
        scanned.put("mine", "2").unwrap();
        // The same keys of the default keyspace, read and scanned: no conflict there.
        let mut elsewhere = db.transaction();
        assert!(elsewhere.get(item(40)).unwrap().is_some());
        let _ = elsewhere.scan(item(100)..item(110)).count();
        elsewhere.put("mine", "3").unwrap();

        let mut b = siftdb::WriteBatch::new();
        b.delete_range_in(&ks, item(30)..item(50))
            .delete_range_in(&ks, item(105)..item(106));
        db.write(b).unwrap();
        if flush {
            ks.flush().unwrap();
        }
        assert_conflict(read.commit(), &format!("flush {flush}: a read key"));
        assert_conflict(scanned.commit(), &format!("flush {flush}: a scanned range"));
        elsewhere
            .commit()
            .unwrap_or_else(|e| panic!("flush {flush}: the other keyspace: {e}"));
        for i in 0..200 {
            ks.put(item(i), [1u8; 40]).unwrap();
        }
    }
}

/// Writes a put of `key` and moves it to `place`.
fn competing_put(db: &Db, key: &str, place: Place) {
    db.put(key, "concurrent").unwrap();
    move_to(db, place);
}

/// A transaction's own `delete_range` is checked at its commit as a scanned range is: a put
/// inside it by someone else after the snapshot fails the commit, wherever the put lies by
/// then, and applies nothing; one outside it, or before the snapshot, does not. Its own reads
/// see the range gone at once, but for the keys it writes afterwards.
#[test]
fn a_transactions_delete_range_conflicts_with_a_concurrent_put_inside_it() {
    for place in PLACES {
        let dir = scratch();
        let db = store(dir.path());
        let mut tx = db.transaction();
        tx.delete_range(item(100)..=item(199)).unwrap();
        tx.put(item(150), "mine").unwrap();
        assert_eq!(tx.get(item(120)).unwrap(), None, "{place:?}: its own read");
        assert_eq!(tx.get(item(150)).unwrap(), Some(b"mine".to_vec()));
        assert_eq!(tx.get(item(200)).unwrap(), Some(vec![5u8; 40]));
        let seen: Vec<_> = tx.scan(item(90)..item(210)).map(Result::unwrap).collect();
        assert_eq!(seen.len(), 10 + 1 + 10, "{place:?}: its own scan");
        competing_put(&db, &item(199), place);
        assert_conflict(tx.commit(), &format!("{place:?}: a put inside the range"));
        assert_eq!(
            db.get(item(120)).unwrap(),
            Some(vec![5u8; 40]),
            "{place:?}: nothing applied"
        );
        assert_eq!(db.get(item(150)).unwrap(), Some(vec![5u8; 40]));

        // Outside the range, or before the snapshot: the commit goes through.
        let mut tx = db.transaction();
        tx.delete_range(item(100)..=item(199)).unwrap();
        competing_put(&db, &item(200), place);
        tx.commit().unwrap();
        assert_eq!(db.get(item(199)).unwrap(), None, "{place:?}: applied");
        assert_eq!(db.scan(item(100)..item(200)).count(), 0);
        assert_eq!(db.get(item(200)).unwrap(), Some(b"concurrent".to_vec()));
    }
    // An open range (`item0250..`) conflicts with a put anywhere past its start, and deletes
    // every key there once committed.
    let dir = scratch();
    let db = store(dir.path());
    let mut tx = db.transaction();
    tx.delete_range(item(250)..).unwrap();
    db.put("zzz", "past every key").unwrap();
    assert_conflict(tx.commit(), "a put past the start of an open range");
    let mut tx = db.transaction();
    tx.delete_range(item(250)..).unwrap();
    tx.commit().unwrap();
    assert_eq!(db.scan(item(250)..).count(), 0);
    assert_eq!(db.scan(..item(250)).count(), 250);
}
