//! `contains_key`, `first_key_value`, `last_key_value` (and their snapshot forms),
//! `approximate_len` and `disk_space`, against what was written: with deletions hiding keys in
//! tables below them, at snapshots, after flushes, compactions and a reopen.

use crate::common::scratch;
use std::path::Path;

use siftdb::{Db, Options};

fn kv(k: &str, v: &str) -> Option<(Vec<u8>, Vec<u8>)> {
    Some((k.as_bytes().to_vec(), v.as_bytes().to_vec()))
}

/// The bytes of the directory's files with extension `ext`.
fn bytes_with_ext(dir: &Path, ext: &str) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum()
}

#[test]
fn contains_key_follows_puts_deletes_and_snapshots_across_flush_and_reopen() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert!(!db.contains_key("a").unwrap());
    db.put("a", "1").unwrap();
    db.put("b", "").unwrap(); // an empty value is a value
    db.flush().unwrap();
    assert!(db.contains_key("a").unwrap() && db.contains_key("b").unwrap());
    let before_delete = db.snapshot();
    db.delete("a").unwrap(); // a tombstone in the memtable over the table's value
    assert!(!db.contains_key("a").unwrap());
    assert!(db.contains_key_at(&before_delete, "a").unwrap());
    db.flush().unwrap(); // the tombstone in a newer table
    assert!(!db.contains_key("a").unwrap());
    assert!(db.contains_key_at(&before_delete, "a").unwrap());
    assert!(!db.contains_key("c").unwrap());
    drop(before_delete);
    db.put("c", "3").unwrap(); // only in the WAL at the close
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert!(!db.contains_key("a").unwrap());
    assert!(db.contains_key("b").unwrap() && db.contains_key("c").unwrap());
}

#[test]
fn first_and_last_entries_skip_deleted_keys_at_every_stage() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.first_key_value().unwrap(), None);
    assert_eq!(db.last_key_value().unwrap(), None);
    let empty = db.snapshot();
    for k in ["b", "c", "d", "e"] {
        db.put(k, k.to_uppercase()).unwrap();
    }
    db.flush().unwrap();
    assert_eq!(db.first_key_value().unwrap(), kv("b", "B"));
    assert_eq!(db.last_key_value().unwrap(), kv("e", "E"));
    let full = db.snapshot();
    // The ends deleted (tombstones in the memtable over the table), a new first key written.
    db.delete("b").unwrap();
    db.delete("e").unwrap();
    assert_eq!(db.first_key_value().unwrap(), kv("c", "C"));
    assert_eq!(db.last_key_value().unwrap(), kv("d", "D"));
    db.put("a", "new").unwrap();
    assert_eq!(db.first_key_value().unwrap(), kv("a", "new"));
    // The snapshots see their own moments, whatever is flushed or compacted meanwhile.
    db.flush().unwrap();
    db.compact().unwrap();
    assert_eq!(db.first_key_value_at(&full).unwrap(), kv("b", "B"));
    assert_eq!(db.last_key_value_at(&full).unwrap(), kv("e", "E"));
    assert_eq!(db.first_key_value_at(&empty).unwrap(), None);
    assert_eq!(db.last_key_value_at(&empty).unwrap(), None);
    assert_eq!(db.first_key_value().unwrap(), kv("a", "new"));
    assert_eq!(db.last_key_value().unwrap(), kv("d", "D"));
    drop((full, empty));
    db.delete("d").unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.first_key_value().unwrap(), kv("a", "new"));
    assert_eq!(db.last_key_value().unwrap(), kv("c", "C"));
    for k in ["a", "c"] {
        db.delete(k).unwrap();
    }
    assert_eq!(db.first_key_value().unwrap(), None);
    assert_eq!(db.last_key_value().unwrap(), None);
}

/// The estimate counts entries: every version and tombstone until compaction merges them, and
/// exactly the live keys once the store is compacted with no snapshot.
#[test]
fn approximate_len_counts_entries_and_is_exact_after_a_compaction() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.approximate_len(), 0);
    for i in 0..1000u32 {
        db.put(format!("k{i:04}"), [b'v'; 50]).unwrap();
    }
    assert_eq!(db.approximate_len(), 1000);
    db.flush().unwrap();
    assert_eq!(db.approximate_len(), 1000, "in a table now");
    for i in 1000..1500u32 {
        db.put(format!("k{i:04}"), [b'v'; 50]).unwrap();
    }
    assert_eq!(db.approximate_len(), 1500, "a table and a memtable");
    // Overwrites and deletions add entries until compaction.
    for i in 0..100u32 {
        db.put(format!("k{i:04}"), "again").unwrap();
    }
    for i in 900..1000u32 {
        db.delete(format!("k{i:04}")).unwrap();
    }
    db.delete("never written").unwrap();
    assert_eq!(db.approximate_len(), 1701);
    assert_eq!(db.iter().count(), 1400);
    db.compact().unwrap();
    assert_eq!(db.approximate_len(), 1400);
    // After a reopen: the tables' counts, and the WAL replayed.
    db.put("k2000", "in the WAL").unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.approximate_len(), 1401);
    // A snapshot keeps the version it sees through a compaction: then that counts too.
    let snapshot = db.snapshot();
    db.put("k0000", "newest").unwrap();
    db.compact().unwrap();
    assert_eq!(db.approximate_len(), 1402);
    assert_eq!(
        db.get_at(&snapshot, "k0000").unwrap(),
        Some(b"again".to_vec())
    );
    drop(snapshot);
    // Without it, the next compaction through that table drops the old version.
    db.put("k0001", "newest").unwrap();
    db.compact().unwrap();
    assert_eq!(db.approximate_len(), 1401);
}

/// Waits until the flush that made the last table has removed its WAL (it does so just after
/// installing the table, which is when `flush` returns), so that the directory holds the live
/// files only; returns the bytes of its tables and WALs.
fn live_bytes(dir: &Path) -> u64 {
    let wals = || {
        std::fs::read_dir(dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "log")
            })
            .count()
    };
    while wals() > 1 {
        std::thread::yield_now();
    }
    bytes_with_ext(dir, "sst") + bytes_with_ext(dir, "log")
}

/// Asserts that `disk_space` comes to equal what the directory's live files hold: a compaction's
/// inputs are deleted just after it installs its outputs, so for a moment the two may differ.
fn assert_disk_space_is_live_bytes(db: &Db, path: &Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (space, live) = (db.disk_space().unwrap(), live_bytes(path));
        if space == live || std::time::Instant::now() > deadline {
            assert_eq!(space, live);
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// `disk_space` is the live tables plus the WALs: what the directory's `.sst` and `.log` files
/// hold once no obsolete file waits for deletion.
#[test]
fn disk_space_is_the_live_tables_and_wals() {
    let dir = scratch();
    let path = dir.path();
    let db = Db::open(path, Options::default()).unwrap();
    assert_disk_space_is_live_bytes(&db, path);
    for i in 0..200u32 {
        db.put(format!("k{i:04}"), [b'v'; 1000]).unwrap();
    }
    // All in the WAL, uncompressed.
    assert!(db.disk_space().unwrap() >= 200 * 1000);
    assert_disk_space_is_live_bytes(&db, path);
    db.flush().unwrap();
    let flushed = live_bytes(path);
    assert!(bytes_with_ext(path, "sst") > 0);
    assert_eq!(db.disk_space().unwrap(), flushed);
    assert!(
        flushed < 200 * 1000,
        "the table is compressed, the WAL gone"
    );
    for i in 0..200u32 {
        db.delete(format!("k{i:04}")).unwrap();
    }
    db.compact().unwrap();
    assert_disk_space_is_live_bytes(&db, path);
    db.put("k", [b'v'; 5000]).unwrap();
    assert!(db.disk_space().unwrap() >= 5000);
    db.close().unwrap();
    // The open flushes the WAL it replays into a table (compressed).
    let db = Db::open(path, Options::default()).unwrap();
    assert_disk_space_is_live_bytes(&db, path);
    assert!(bytes_with_ext(path, "sst") > 0);
    assert_eq!(db.get("k").unwrap().map(|v| v.len()), Some(5000));
}
